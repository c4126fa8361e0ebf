// The chart of generation on a key/value cache (gen.js): beside each other, the bytes the
// session's cache holds at step t (linear in t) and the floating-point operations of step t's
// attention, recomputing the whole prefix (quadratic in t) against the cached step (linear in
// t), as plain SVG. Each series' values are also its polyline's data-values, so that a test
// reads the numbers the chart draws.

import { t } from './state.js';

const NS = 'http://www.w3.org/2000/svg';
const W = 300, H = 190; // one panel, in SVG units (the chart scales to its box)
const PAD = { l: 54, r: 10, t: 30, b: 34 };

function el(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// A number of bytes or operations as a person reads it: 2 KiB, 1.5 MiB; 18k, 1.2M.
export const kib = (b) => (b >= 1 << 20 ? `${(b / 1048576).toFixed(1)} MiB` : `${Math.round(b / 1024)} KiB`);
export const count = (x) => (x >= 1e6 ? `${(x / 1e6).toFixed(1)}M` : x >= 1e3 ? `${Math.round(x / 1e3)}k` : String(x));

// One panel at x offset ox: axes for steps 1 … n and values 0 … max, its title, and each series
// {key, values, cls, label} as a polyline with a dot per step so far.
function panel(svg, ox, title, n, max, fmt, series) {
  const g = el('g', { transform: `translate(${ox},0)` });
  const x = (i) => PAD.l + ((W - PAD.l - PAD.r) * (i - 1)) / Math.max(1, n - 1);
  const y = (v) => H - PAD.b - ((H - PAD.t - PAD.b) * v) / (max || 1);
  g.append(el('text', { x: PAD.l, y: 14, class: 'gc-title' }, title));
  g.append(el('line', { x1: PAD.l, y1: H - PAD.b, x2: W - PAD.r, y2: H - PAD.b, class: 'gc-axis' }));
  g.append(el('line', { x1: PAD.l, y1: PAD.t, x2: PAD.l, y2: H - PAD.b, class: 'gc-axis' }));
  g.append(el('text', { x: PAD.l - 4, y: PAD.t + 4, class: 'gc-tick', 'text-anchor': 'end', 'data-i18n-data': '' }, fmt(max)));
  g.append(el('text', { x: PAD.l - 4, y: H - PAD.b + 4, class: 'gc-tick', 'text-anchor': 'end', 'data-i18n-data': '' }, '0'));
  for (const i of [1, n]) {
    g.append(el('text', { x: x(i), y: H - PAD.b + 14, class: 'gc-tick', 'text-anchor': 'middle', 'data-i18n-data': '' }, String(i)));
  }
  g.append(el('text', { x: (PAD.l + W - PAD.r) / 2, y: H - 4, class: 'gc-label', 'text-anchor': 'middle' }, t('gen.chart.t')));
  for (const s of series) {
    const pts = s.values.map((v, i) => `${x(i + 1).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    g.append(el('polyline', { points: pts, class: `gc-line ${s.cls}`, 'data-series': s.key, 'data-values': s.values.join(',') }));
    s.values.forEach((v, i) => g.append(el('circle', { cx: x(i + 1), cy: y(v), r: 2.5, class: `gc-dot ${s.cls}` })));
  }
  svg.append(g);
}

// Draws into box the chart of steps 1 … done of a sentence of n tokens: cache[t-1] the bytes
// held at step t, recompute[t-1] and step[t-1] the attention's operations of step t without and
// with the cache. The axes go to step n (known in advance), so that the curves grow into them.
export function drawGenChart(box, n, rowBytes, e, cache, recompute, step) {
  box.textContent = '';
  const svg = el('svg', { viewBox: `0 0 ${2 * W + 20} ${H + 36}`, class: 'gen-chart-svg', role: 'img', 'aria-label': t('gen.chart') });
  panel(svg, 0, t('gen.chart.cache'), n, n * rowBytes, kib, [{ key: 'cache', values: cache, cls: 'gc-cache' }]);
  panel(svg, W + 20, t('gen.chart.flops'), n, 2 * e * n * (n + 1), count, [
    { key: 'recompute', values: recompute, cls: 'gc-recompute' },
    { key: 'step', values: step, cls: 'gc-step' },
  ]);
  // The right panel's legend, under it.
  const lg = el('g', { transform: `translate(${W + 20 + PAD.l},${H + 12})` });
  lg.append(el('line', { x1: 0, y1: 0, x2: 18, y2: 0, class: 'gc-line gc-recompute' }));
  lg.append(el('text', { x: 22, y: 4, class: 'gc-label' }, t('gen.chart.recompute')));
  lg.append(el('line', { x1: 0, y1: 14, x2: 18, y2: 14, class: 'gc-line gc-step' }));
  lg.append(el('text', { x: 22, y: 18, class: 'gc-label' }, t('gen.chart.step')));
  svg.append(lg);
  box.append(svg);
}
