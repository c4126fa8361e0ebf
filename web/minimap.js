// Small matrices drawn on a canvas, for the 思考题: attention weights on the page's scale from 0
// to 1, or raw scores on a diverging scale (red above 0, blue below, against the largest |score|),
// with the words along the left and the top when labels are given.

import { canvasFont, rootPx, setupCanvas } from './dom.js';
import { colour, rgb } from './heatmap.js';

const MASKED = 'rgb(222,222,222)'; // a causal mask's cells: a light grey, apart from weight 0

// A score as a colour: white at 0, red (#b2182b) at +max, blue (#2166ac) at −max.
function diverging(x, max) {
  const f = Math.max(-1, Math.min(1, x / (max || 1)));
  const end = f >= 0 ? [178, 24, 43] : [33, 102, 172];
  return end.map((c) => Math.round(255 + (c - 255) * Math.abs(f)));
}

// Draws m, an n × n matrix (flat, row-major), into cv with cells of cell CSS px. opts.mode is
// 'weights' (0 to 1) or 'scores' (diverging); opts.labels the n words, drawn at the left and the
// top (rotated); opts.masked(i, j) whether a cell is masked (drawn in the mask's grey);
// opts.marks [{cells: [[i, j], …], colour, dash}] cells outlined on top. Returns the largest
// |value| (the scale of 'scores').
export function drawMatrix(cv, m, n, cell, opts = {}) {
  const labels = opts.labels || null;
  const font = 0.75 * rootPx();
  let labW = 0;
  if (labels) {
    const c = cv.getContext('2d');
    c.font = canvasFont(font);
    labW = Math.ceil(Math.max(...labels.map((s) => c.measureText(s).width))) + 6;
  }
  const ctx = setupCanvas(cv, labW + n * cell + 1, labW + n * cell + 1);
  let max = 0;
  for (const x of m) max = Math.max(max, Math.abs(x));
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      const x = m[i * n + j];
      const masked = opts.masked && opts.masked(i, j);
      ctx.fillStyle = masked ? MASKED : rgb(opts.mode === 'scores' ? diverging(x, max) : colour(x));
      ctx.fillRect(labW + j * cell, labW + i * cell, cell, cell);
    }
  }
  ctx.strokeStyle = '#d9dde5';
  ctx.strokeRect(labW + 0.5, labW + 0.5, n * cell, n * cell);
  if (opts.diagonal) { // the diagonal outlined: where a tied head's weight goes
    ctx.strokeStyle = '#1d2330';
    ctx.lineWidth = 1;
    for (let i = 0; i < n; i++) ctx.strokeRect(labW + i * cell + 0.5, labW + i * cell + 0.5, cell - 1, cell - 1);
  }
  for (const mk of opts.marks || []) {
    ctx.save();
    ctx.strokeStyle = mk.colour;
    ctx.lineWidth = Math.max(1, Math.min(2, cell / 8));
    ctx.setLineDash(mk.dash ? [Math.max(2, cell / 5), Math.max(2, cell / 5)] : []);
    for (const [i, j] of mk.cells) ctx.strokeRect(labW + j * cell + 1, labW + i * cell + 1, cell - 2, cell - 2);
    ctx.restore();
  }
  cv.dataset.geom = JSON.stringify({ labW, cell, n });
  if (labels) {
    ctx.font = canvasFont(font);
    ctx.fillStyle = '#1d2330';
    ctx.textBaseline = 'middle';
    ctx.textAlign = 'right';
    labels.forEach((s, i) => ctx.fillText(s, labW - 4, labW + (i + 0.5) * cell));
    ctx.save();
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = 'left';
    labels.forEach((s, j) => ctx.fillText(s, -labW + 4, labW + (j + 0.5) * cell));
    ctx.restore();
  }
  cv.dataset.max = String(max);
  return max;
}
