// The step tables of one head, from the run's trace (trace.js): the selected row through
// q·kᵀ ÷ √d_k, the mask, softmax and × V (rowsteps.js, as 第 6 章 shows 它's row), and for small
// runs the whole matrices Q, K, V, QKᵀ, scaled, masked, softmax and × V; and the output table.

import { selectedRow, state, t } from './state.js';
import { $, fillSelect, tokenItems } from './dom.js';
import { rowAt } from './trace.js';
import { drawReceived } from './received.js';
import { errorBox } from './errors.js';
import { f2, note, scaleText, table } from './tables.js';
import { rowTables } from './rowsteps.js';

const MATRIX_LIMIT = 20; // the whole matrices for L, S <= 20 (a sentence of the lesson: at most 19)
const DIM_LIMIT = 16; // Q, K and V tables for a head width up to 16; rows cut to 16 dims

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
  const o = { hlRow: i, startCol: st };
  // Step 3 only when the run has a mask: without one it would repeat step 2.
  const anyMask = r.masked.some((row, a) => row.some((x, b) => x !== r.scores[a][b]));
  steps.append(
    table(t('step.1'), logits, ql, kl, f2, { ...o, testid: 'table-qk' }),
    table(t('step.2', { div: scaleText(r.scale, dk) }), r.scores, ql, kl, f2, { ...o, testid: 'table-scaled' }),
    anyMask ? table(t('step.3'), r.masked, ql, kl, f2, { ...o, masked, maskText: '−∞', testid: 'table-masked' })
      : Object.assign(note(t('step.3.none')), { className: 'note step-none' }),
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
  body.append(rowTables(v, h, i, r, () => drawSteps(v)));
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
