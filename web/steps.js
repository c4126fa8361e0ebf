// The step tables of one head, from the run's trace (trace.js): the selected row through
// scale·q·kᵀ, the mask, softmax and × V (as 第 6 章 shows 它's row), and for small runs the whole
// matrices Q, K, V, QKᵀ, scaled, masked, softmax and × V; and the output table.

import { isStart, selectedRow, state, t } from './state.js';
import { $, barCell, fillSelect, tokenItems } from './dom.js';
import { headName } from './heads.js';
import { norm, rowAt } from './trace.js';
import { drawReceived } from './received.js';
import { errorBox } from './errors.js';

const MATRIX_LIMIT = 20; // the whole matrices for L, S <= 20 (a sentence of the lesson: at most 17)
const DIM_LIMIT = 16; // Q, K and V tables for a head width up to 16; rows cut to 16 dims

// A number as the tables show it: two decimals; in large font (a projector) at most three
// significant digits beyond them (38.4, −512), so that a row of 17 scores fits the width.
const f2 = (x) => {
  if (x === -Infinity) return '−∞';
  if (!state.large) return x.toFixed(2);
  const a = Math.abs(x);
  return x.toFixed(a < 9.995 ? 2 : a < 99.95 ? 1 : 0);
};

// A numeric table: the caption is the page's text, the cells and their labels are data (marked
// data-i18n-data: token text, dimension names, numbers).
export function table(caption, rows, rowLabels, colLabels, fmt, opts = {}) {
  const tbl = document.createElement('table');
  tbl.className = 'num';
  if (opts.testid) tbl.dataset.testid = opts.testid;
  const cap = document.createElement('caption');
  cap.textContent = caption;
  tbl.append(cap);
  const head = document.createElement('tr');
  head.dataset.i18nData = '';
  head.append(document.createElement('th'));
  colLabels.forEach((c, j) => {
    const th = document.createElement('th');
    th.textContent = c;
    if (opts.startCol === j) th.className = 'start';
    head.append(th);
  });
  tbl.append(head);
  rows.forEach((r, i) => {
    const tRow = document.createElement('tr');
    tRow.dataset.i18nData = '';
    if (opts.hlRow === i) tRow.className = 'hl';
    const th = document.createElement('th');
    th.textContent = rowLabels[i];
    if (opts.startCol === i && opts.startRow) th.className = 'start';
    tRow.append(th);
    r.forEach((x, j) => {
      const td = document.createElement('td');
      const masked = opts.masked && opts.masked(i, j);
      td.textContent = masked && opts.maskText ? opts.maskText : fmt(x);
      if (masked) td.className = 'masked';
      if (opts.startCol === j) td.classList.add('start');
      td.dataset.i = i; td.dataset.j = j;
      td.dataset.x = String(x);
      tRow.append(td);
    });
    tbl.append(tRow);
  });
  return tbl;
}

const note = (text) => {
  const p = document.createElement('p');
  p.className = 'note';
  p.textContent = text;
  return p;
};

// The trace's tensors of head h as rows: {q, k, vv, scores, masked, weights, out}.
function headRows(v, h) {
  const tr = v.trace, rows = (x, n) => Array.from({ length: n }, (_, i) => rowAt(x, h, i));
  const r = { scores: rows(tr.scores, v.l), masked: rows(tr.masked, v.l), weights: rows(tr.weights, v.l) };
  if (v.mode === 'sdpa') {
    const dv = v.input.v[0].length;
    Object.assign(r, { q: v.input.q, k: v.input.k, vv: v.input.v,
      out: Array.from({ length: v.l }, (_, i) => Array.from(v.output.data.subarray(i * dv, (i + 1) * dv))) });
  } else {
    Object.assign(r, { q: rows(tr.q, v.l), k: rows(tr.k, v.s), vv: rows(tr.v, v.s), out: rows(tr.out, v.l) });
  }
  return r;
}

// One row, as the chapter shows 它's: per key its score, the score after the mask, its softmax
// weight and the length of what its value adds; then × V, the head's output row.
function rowTables(v, h, i, r) {
  const wrap = document.createElement('div');
  wrap.className = 'row-steps';
  const name = headName(v, String(h)), q = v.qTokens[i];
  const tbl = document.createElement('table');
  tbl.className = 'num rowtable';
  tbl.dataset.testid = 'row-steps';
  tbl.dataset.row = String(i);
  tbl.dataset.head = String(h);
  const cap = document.createElement('caption');
  cap.textContent = t('row.title', { q, name });
  tbl.append(cap);
  const head = document.createElement('tr');
  for (const key of ['row.col.key', 'row.col.score', 'row.col.masked', 'row.col.weight', 'row.col.vnorm', 'row.col.contrib']) {
    const th = document.createElement('th');
    th.textContent = t(key, { s: (Math.round(r.scale * 1e4) / 1e4).toString() });
    head.append(th);
  }
  tbl.append(head);
  const vn = r.vv.map(norm);
  let sum = 0;
  for (let j = 0; j < v.s; j++) {
    const tr = document.createElement('tr');
    tr.dataset.j = j;
    if (isStart(v, j)) tr.className = 'start';
    const k = document.createElement('th');
    k.textContent = v.kTokens[j];
    k.dataset.i18nData = '';
    tr.append(k);
    const w = r.weights[i][j];
    sum += w;
    const cells = [['score', r.scores[i][j], f2], ['masked', r.masked[i][j], f2], ['weight', w, f2],
      ['vnorm', vn[j], f2], ['contrib', w * vn[j], f2]];
    for (const [col, x, fmt] of cells) {
      const td = document.createElement('td');
      td.dataset.col = col;
      td.dataset.x = String(x);
      td.dataset.i18nData = '';
      td.textContent = fmt(x);
      if (col === 'masked' && x === -Infinity) td.classList.add('masked');
      if (col === 'weight') barCell(td, w);
      tr.append(td);
    }
    tbl.append(tr);
  }
  const foot = document.createElement('tr');
  foot.className = 'sum';
  const fth = document.createElement('th');
  fth.textContent = t('row.sum');
  foot.append(fth, document.createElement('td'), document.createElement('td'));
  const ftd = document.createElement('td');
  ftd.textContent = sum.toFixed(2);
  ftd.dataset.i18nData = '';
  foot.append(ftd);
  tbl.append(foot);
  const sc = document.createElement('div');
  sc.className = 'canvas-wrap';
  sc.append(tbl);
  wrap.append(sc);
  // × V: the head's output row (its first DIM_LIMIT dims).
  const out = r.out[i], shown = Math.min(out.length, DIM_LIMIT);
  const ot = table(t(shown < out.length ? 'row.out.cut' : 'row.out', { q, name, d: out.length, shown, n: norm(out).toFixed(2) }),
    [out.slice(0, shown)], [q], Array.from({ length: shown }, (_, c) => `d${c}`), f2, { testid: 'row-out' });
  const ow = document.createElement('div');
  ow.className = 'canvas-wrap';
  ow.append(ot);
  wrap.append(ow);
  return wrap;
}

// The whole matrices of head h (small runs).
function matrices(v, h, i, r) {
  const dk = r.q[0].length, dv = r.vv[0].length;
  const dims = (n) => Array.from({ length: Math.min(n, DIM_LIMIT) }, (_, c) => `d${c}`);
  const cut = (m) => m.map((x) => x.slice(0, DIM_LIMIT));
  const kl = v.kTokens, ql = v.qTokens, st = v.start >= 0 ? v.start : undefined;
  const masked = (a, b) => r.masked[a][b] === -Infinity;
  const frag = document.createDocumentFragment();
  if (dk <= DIM_LIMIT && dv <= DIM_LIMIT) {
    const inputs = document.createElement('div');
    inputs.className = 'tables';
    inputs.append(
      table(t('tbl.q', { n: v.l, d: dk }), r.q, ql, dims(dk), f2, { testid: 'table-q', hlRow: i }),
      table(t('tbl.k', { n: v.s, d: dk }), r.k, kl, dims(dk), f2, { testid: 'table-k', startCol: st, startRow: true }),
      table(t('tbl.v', { n: v.s, d: dv }), r.vv, kl, dims(dv), f2, { testid: 'table-v' }));
    frag.append(inputs);
  } else frag.append(note(t('steps.wide', { dk, dv })));
  const steps = document.createElement('div');
  steps.className = 'tables';
  const logits = r.scores.map((row) => row.map((x) => x / r.scale));
  const sc = r.scale === 1 / Math.sqrt(dk) ? t('step.2.sqrt', { dk, root: Math.sqrt(dk).toFixed(2) })
    : t('step.2.scale', { s: Math.round(r.scale * 1e4) / 1e4 });
  const o = { hlRow: i, startCol: st };
  steps.append(
    table(t('step.1'), logits, ql, kl, f2, { ...o, testid: 'table-qk' }),
    table(sc, r.scores, ql, kl, f2, { ...o, testid: 'table-scaled' }),
    table(t('step.3'), r.masked, ql, kl, f2, { ...o, masked, maskText: '−∞', testid: 'table-masked' }),
    table(t('step.4'), r.weights, ql, kl, f2, { ...o, masked, maskText: '0', testid: 'table-softmax' }),
    table(v.mode === 'sdpa' ? t('step.5.out') : t(dv > DIM_LIMIT ? 'step.5.head.cut' : 'step.5.head', { h, d: dv, shown: DIM_LIMIT }),
      cut(r.out), ql, dims(dv), f2, { hlRow: i, testid: 'table-headout' }));
  frag.append(steps);
  return frag;
}

export function drawSteps(v) {
  const box = $('steps'), body = $('steps-body');
  body.textContent = '';
  box.hidden = !v.trace && !v.traceError;
  if (box.hidden) return;
  const pick = $('row-pick');
  pick.parentElement.hidden = true;
  if (!v.trace) { body.append(errorBox(v.traceError, 'steps.notrace', 'note')); return; }
  if (v.mode === 'mha' && state.head === 'mean') { body.append(note(t('steps.pick'))); return; }
  const h = v.mode === 'sdpa' ? 0 : Math.min(Number(state.head), v.h - 1);
  const i = selectedRow(v);
  pick.parentElement.hidden = false;
  fillSelect(pick, tokenItems(v.qTokens), i);
  const r = Object.assign(headRows(v, h), { scale: v.trace.scale });
  body.append(rowTables(v, h, i, r));
  const recv = document.createElement('div');
  recv.id = 'received';
  recv.dataset.testid = 'received';
  body.append(recv);
  drawReceived(v, h, i, r, recv);
  if (v.l <= MATRIX_LIMIT && v.s <= MATRIX_LIMIT) body.append(matrices(v, h, i, r));
}

export function drawOutput(v) {
  const sec = $('output-section'), body = $('output-body');
  body.textContent = '';
  const small = v.l <= MATRIX_LIMIT && !!v.output;
  sec.hidden = !small;
  if (!small) return;
  const dim = v.output.shape[v.output.shape.length - 1];
  const shown = Math.min(dim, 16);
  const rows = Array.from({ length: v.l }, (_, i) => Array.from(v.output.data.subarray(i * dim, i * dim + shown)));
  const labels = Array.from({ length: shown }, (_, i) => `d${i}`);
  const cap = v.mode === 'sdpa' ? t('output.sdpa')
    : t(shown < dim ? 'output.mha.cut' : 'output.mha', { l: v.l, d: dim, shown });
  const w = document.createElement('div');
  w.className = 'canvas-wrap';
  w.append(table(cap, rows, v.qTokens, labels, f2, { testid: 'table-output' }));
  body.append(w);
}
