// The step tables of one head (Q, K, V, QKᵀ, scaled, masked, softmax, output) for L, S <= 16,
// from weights the page regenerates and checks against the API, and the output table.

import { state, t } from './state.js';
import { $ } from './dom.js';
import { cols, knownParams, linear, matmul, matmulT } from './numbers.js';
import { isMasked, rowOf } from './maps.js';
import { headName } from './heads.js';

const STEP_LIMIT = 16; // step tables for L, S <= 16

const f2 = (x) => (x === -Infinity ? '−∞' : x.toFixed(2));

// A numeric table: the caption is the page's text, the cells and their labels are data (marked
// data-i18n-data: token text, dimension names, numbers).
function table(caption, rows, rowLabels, colLabels, fmt, opts = {}) {
  const tbl = document.createElement('table');
  tbl.className = 'num';
  if (opts.testid) tbl.dataset.testid = opts.testid;
  const cap = document.createElement('caption');
  cap.textContent = caption;
  tbl.append(cap);
  const head = document.createElement('tr');
  head.dataset.i18nData = '';
  head.append(document.createElement('th'));
  colLabels.forEach((c) => { const th = document.createElement('th'); th.textContent = c; head.append(th); });
  tbl.append(head);
  rows.forEach((r, i) => {
    const tRow = document.createElement('tr');
    tRow.dataset.i18nData = '';
    if (opts.hlRow === i) tRow.className = 'hl';
    const th = document.createElement('th');
    th.textContent = rowLabels[i];
    tRow.append(th);
    r.forEach((x, j) => {
      const td = document.createElement('td');
      const masked = opts.masked && opts.masked(i, j);
      td.textContent = masked && opts.maskText ? opts.maskText : fmt(x);
      if (masked) td.className = 'masked';
      td.dataset.i = i; td.dataset.j = j;
      tRow.append(td);
    });
    tbl.append(tRow);
  });
  return tbl;
}

// Per-head Q, K, V for the step tables, or null with a reason.
function headQKV(v, h) {
  if (v.mode === 'sdpa') return { q: v.input.q, k: v.input.k, vv: v.input.v };
  const prm = knownParams(v.params, v.e);
  if (!prm) return { reason: 'steps.noparams' };
  const e = v.e, dh = e / v.h;
  const proj = linear(v.input.x, prm.win, prm.bin); // (L, 3E)
  const q = cols(proj, h * dh, (h + 1) * dh), k = cols(proj, e + h * dh, e + (h + 1) * dh);
  const vv = cols(proj, 2 * e + h * dh, 2 * e + (h + 1) * dh);
  return { q, k, vv, prm, proj };
}

// Checks the regenerated weights against the API's output: the page shows step tables only when
// its numbers reproduce what attnd computed.
function reproduces(v, prm, proj) {
  const e = v.e, dh = e / v.h;
  const cat = Array.from({ length: v.l }, () => new Array(e).fill(0));
  const row = new Float32Array(v.s);
  for (let h = 0; h < v.h; h++) {
    for (let i = 0; i < v.l; i++) {
      rowOf(v.heads[h], v, i, row);
      for (let c = 0; c < dh; c++) {
        let s = 0;
        for (let j = 0; j < v.s; j++) s += row[j] * proj[j][2 * e + h * dh + c];
        cat[i][h * dh + c] = s;
      }
    }
  }
  const out = linear(cat, prm.wout, prm.bout);
  let worst = 0;
  for (let i = 0; i < v.l; i++) for (let c = 0; c < e; c++) worst = Math.max(worst, Math.abs(out[i][c] - v.output.data[i * e + c]));
  return worst < 1e-3;
}

export function drawSteps(v) {
  const box = $('steps'), body = $('steps-body');
  body.textContent = '';
  const small = v.l <= STEP_LIMIT && v.s <= STEP_LIMIT;
  box.hidden = !small;
  if (!small) return;
  if (!v.heads || state.head === 'mean') {
    const p = document.createElement('p');
    p.className = 'note';
    p.textContent = t('steps.pick');
    body.append(p);
    return;
  }
  const h = Number(state.head);
  const got = headQKV(v, h);
  if (got.reason || (v.mode === 'mha' && !reproduces(v, got.prm, got.proj))) {
    const p = document.createElement('p');
    p.className = 'note';
    p.textContent = t(got.reason || 'steps.noreproduce');
    body.append(p);
    if (got.reason) { // without Q, K and V: the weights attnd returned (a lesson sentence's)
      const wrow = new Float32Array(v.s);
      const weights = Array.from({ length: v.l }, (_, i) => Array.from(rowOf(v.heads[h], v, i, wrow)));
      body.append(table(t('steps.weights', { name: headName(v, String(h)) }), weights, v.qTokens, v.kTokens, f2,
        { masked: (i, j) => isMasked(v, i, j), maskText: '0', testid: 'table-softmax' }));
    }
    return;
  }
  const { q, k, vv } = got;
  const dk = q[0].length;
  const dims = (n, p) => Array.from({ length: n }, (_, i) => `${p}${i}`);
  const logits = matmulT(q, k);
  const scaled = logits.map((r) => r.map((x) => x * v.scale));
  const masked = (i, j) => isMasked(v, i, j);
  const withMask = scaled.map((r, i) => r.map((x, j) => (masked(i, j) ? -Infinity : x)));
  const wrow = new Float32Array(v.s);
  const weights = Array.from({ length: v.l }, (_, i) => Array.from(rowOf(v.heads[h], v, i, wrow)));
  const headOut = v.mode === 'sdpa'
    ? Array.from({ length: v.l }, (_, i) => Array.from(v.output.data.subarray(i * vv[0].length, (i + 1) * vv[0].length)))
    : matmul(weights, vv);
  const kl = v.kTokens, ql = v.qTokens;
  const inputs = document.createElement('div');
  inputs.className = 'tables';
  inputs.append(
    table(t('tbl.q', { n: v.l, d: dk }), q, ql, dims(dk, 'd'), f2, { testid: 'table-q' }),
    table(t('tbl.k', { n: v.s, d: dk }), k, kl, dims(dk, 'd'), f2, { testid: 'table-k' }),
    table(t('tbl.v', { n: v.s, d: vv[0].length }), vv, kl, dims(vv[0].length, 'd'), f2, { testid: 'table-v' }));
  const steps = document.createElement('div');
  steps.className = 'tables';
  const sc = v.scale === 1 / Math.sqrt(dk) ? t('step.2.sqrt', { dk, root: Math.sqrt(dk).toFixed(2) }) : t('step.2.scale', { s: v.scale });
  steps.append(
    table(t('step.1'), logits, ql, kl, f2, { testid: 'table-qk' }),
    table(sc, scaled, ql, kl, f2, { testid: 'table-scaled' }),
    table(t('step.3'), withMask, ql, kl, f2, { masked, maskText: '−∞', testid: 'table-masked' }),
    table(t('step.4'), weights, ql, kl, f2, { masked, maskText: '0', testid: 'table-softmax' }),
    table(v.mode === 'sdpa' ? t('step.5.out') : t('step.5.head', { h }), headOut, ql, dims(vv[0].length, 'd'), f2, { testid: 'table-headout' }));
  body.append(inputs, steps);
}

export function drawOutput(v) {
  const sec = $('output-section'), body = $('output-body');
  body.textContent = '';
  const small = v.l <= STEP_LIMIT;
  sec.hidden = !small;
  if (!small) return;
  const dim = v.output.shape[v.output.shape.length - 1];
  const shown = Math.min(dim, 16);
  const rows = Array.from({ length: v.l }, (_, i) => Array.from(v.output.data.subarray(i * dim, i * dim + shown)));
  const labels = Array.from({ length: shown }, (_, i) => `d${i}`);
  const cap = v.mode === 'sdpa' ? t('output.sdpa')
    : t(shown < dim ? 'output.mha.cut' : 'output.mha', { l: v.l, d: dim, shown });
  body.append(table(cap, rows, v.qTokens, labels, f2, { testid: 'table-output' }));
}
