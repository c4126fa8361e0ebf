// Concat → W^O, multi-head attention's last step (第 5 章 4.2, 第 6 章's 多头注意力的简单流程):
// the selected word's output in every head (the trace's head_outputs, its × V), laid side by
// side into one vector of E = H · d_k, times W^O into the layer's output; the product is checked
// against the API's own output, number by number.
//
// The API does not send a model's weights, so the page knows W^O only where the model's
// documentation gives it: the lesson model's out_proj is the identity (api/lesson/README.md,
// make_lesson.py), each head keeping its own d_k dimensions. The check against the output is
// what shows that it is.

import { LESSON_MODEL, selectedRow, t } from './state.js';
import { $, setupCanvas } from './dom.js';
import { headNameEl } from './heads.js';
import { norm, rowAt } from './trace.js';

export const TOLERANCE = 1e-5;
const CELL = 2; // CSS px per number along the strips
const STRIP_H = 14;

// W^O of run v as a function from the concat (length E) to the output, or null when the page
// does not know it.
function outProjection(v) {
  if (v.model === LESSON_MODEL) return (c) => Float64Array.from(c); // the identity
  return null;
}

// A diverging colour: blue above 0, red below, white at 0, against the largest |x|.
function tint(x, top) {
  const f = Math.min(1, Math.abs(x) / (top || 1));
  const to = x >= 0 ? [33, 102, 172] : [178, 24, 43];
  return `rgb(${to.map((c) => Math.round(255 + (c - 255) * f)).join(',')})`;
}

// A strip of e cells: values xs drawn from cell `from` on, the rest left white; head boundaries
// every dk cells.
function strip(xs, from, e, dk, top) {
  const cv = document.createElement('canvas');
  const w = e * CELL + 2, ctx = setupCanvas(cv, w, STRIP_H + 2);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, w, STRIP_H + 2);
  xs.forEach((x, c) => { ctx.fillStyle = tint(x, top); ctx.fillRect(1 + (from + c) * CELL, 1, CELL, STRIP_H); });
  ctx.strokeStyle = '#5b6475';
  ctx.lineWidth = 1;
  for (let b = 0; b <= e; b += dk) { ctx.beginPath(); ctx.moveTo(1 + b * CELL, 0); ctx.lineTo(1 + b * CELL, STRIP_H + 2); ctx.stroke(); }
  cv.dataset.values = JSON.stringify(Array.from(xs));
  cv.dataset.from = String(from);
  cv.setAttribute('role', 'img');
  return cv;
}

// W^O as a small picture (the identity: its diagonal).
function matrixPicture(e) {
  const cv = document.createElement('canvas');
  const n = 48, ctx = setupCanvas(cv, n + 2, n + 2);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, n + 2, n + 2);
  ctx.strokeStyle = '#5b6475';
  ctx.strokeRect(0.5, 0.5, n + 1, n + 1);
  ctx.strokeStyle = 'rgb(33,102,172)';
  ctx.lineWidth = 2;
  ctx.beginPath(); ctx.moveTo(1, 1); ctx.lineTo(n + 1, n + 1); ctx.stroke();
  cv.dataset.e = String(e);
  cv.setAttribute('role', 'img');
  return cv;
}

// A small difference in plain decimals, as a student reads it: 0, 0.0000002, < 0.00000001.
const decimal = (x) => (x === 0 ? '0' : x < 1e-8 ? '< 0.00000001' : x >= 0.01 ? x.toFixed(3) : x.toFixed(8).replace(/0+$/, ''));

function row(tbl, label, picture, length, cls) {
  const tr = document.createElement('tr');
  if (cls) tr.className = cls;
  const th = document.createElement('th');
  th.append(label);
  const pic = document.createElement('td');
  pic.append(picture);
  const len = document.createElement('td');
  len.className = 'num';
  len.dataset.i18nData = '';
  len.textContent = length === null ? '' : length.toFixed(2);
  tr.append(th, pic, len);
  tbl.append(tr);
  return tr;
}

export function drawConcat(v) {
  const sec = $('concat');
  const wo = v.mode === 'mha' && v.trace && v.trace.out && v.output ? outProjection(v) : null;
  sec.hidden = !wo;
  if (!wo) return;
  const i = selectedRow(v), h = v.h, dk = v.trace.out.x, e = h * dk, q = v.qTokens[i];
  // float32, as attnd computed them (the trace's JSON decimals read back into float32, as the
  // output is), so that the check compares the numbers attnd holds.
  const heads = Array.from({ length: h }, (_, k) => rowAt(v.trace.out, k, i).map(Math.fround));
  const concat = heads.flat();
  const product = wo(concat);
  const out = Array.from(v.output.data.subarray(i * e, (i + 1) * e));
  const diff = Math.max(...out.map((x, c) => Math.abs(product[c] - x)));
  const top = Math.max(...concat.map(Math.abs), ...out.map(Math.abs));
  $('concat-intro').textContent = t('concat.intro', { q, dk, e, h });
  const tbl = $('concat-table');
  tbl.textContent = '';
  Object.assign(tbl.dataset, { row: String(i), maxdiff: String(diff), e: String(e) });
  const head = document.createElement('tr');
  for (const k of ['concat.col.what', 'concat.col.values', 'concat.col.norm']) {
    const th = document.createElement('th');
    th.textContent = t(k);
    head.append(th);
  }
  tbl.append(head);
  heads.forEach((x, k) => { row(tbl, headNameEl(v, String(k)), strip(x, k * dk, e, dk, top), norm(x), 'head').dataset.h = String(k); });
  row(tbl, t('concat.concat'), strip(concat, 0, e, dk, top), norm(concat), 'concat').dataset.testid = 'concat-row';
  row(tbl, t('concat.wo'), matrixPicture(e), null, 'wo');
  row(tbl, t('concat.output'), strip(out, 0, e, dk, top), norm(out), 'output').dataset.testid = 'output-row';
  const check = $('concat-check');
  check.textContent = t(diff <= TOLERANCE ? 'concat.check' : 'concat.bad', { e, d: decimal(diff) });
  check.dataset.ok = diff <= TOLERANCE ? '1' : '0';
  $('concat-wo').textContent = t('concat.identity', { dk });
}
