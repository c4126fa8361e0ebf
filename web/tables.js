// The step tables' shared pieces: a numeric table whose cells are data, a number as the tables
// show it, a note, and the scale in the one notation every step uses (÷ √d_k with its value).

import { state, t } from './state.js';

// A number as the tables show it: two decimals; in large font (a projector) four characters at
// most (0.99, −0.3, −8.3, 38, −512), so that a row of 19 scores of an English sentence fits the
// width; weights, never negative, keep two decimals.
export const f2 = (x) => {
  if (x === -Infinity) return '−∞';
  if (!state.large) return x.toFixed(2);
  const a = Math.abs(x);
  return x.toFixed(a < 0.995 ? (x < 0 ? 1 : 2) : a < 9.95 ? 1 : 0);
};

// The scale as a division: ÷ √d_k (√64 = 8) when it is 1/√d_k (≈ when √d_k is not whole), else
// ÷ 1/scale (SDPA's own scale: the chapter's padding example sends logits and scale 1).
export function scaleText(scale, dk) {
  const root = Math.sqrt(dk);
  if (Math.abs(scale * root - 1) < 1e-6) {
    const whole = Math.abs(root - Math.round(root)) < 1e-9;
    return t(whole ? 'scale.sqrt' : 'scale.sqrt.approx', { dk, root: whole ? String(Math.round(root)) : root.toFixed(2) });
  }
  return t('scale.given', { d: String(Math.round(1e4 / scale) / 1e4) });
}

export const note = (text, cls = 'note') => {
  const p = document.createElement('p');
  p.className = cls;
  p.textContent = text;
  return p;
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

// el wrapped in a box that scrolls sideways when el is wider than its card.
export function scrollBox(el) {
  const w = document.createElement('div');
  w.className = 'canvas-wrap';
  w.append(el);
  return w;
}
