// The line view: each query token joined to the keys it attends to, the line as dark as the
// weight; hovering a token shows only its lines.

import { unitScale, view } from './state.js';
import { $, canvasFont, rootPx, setupCanvas, tokenFont } from './dom.js';
import { isMasked, passes, rowOf, selectedMap, shownView } from './maps.js';
import { LABEL_LIMIT } from './large.js';

let lineHover = null;

export function drawLines(run) {
  const v = shownView(run);
  const cv = $('lines');
  const map = selectedMap(v);
  // Up to 64 tokens: a labelled row per token. Beyond: one pixel row each, and without a hovered
  // token only each query's strongest key, or the lines would merge into one blot.
  const labels = v.l <= LABEL_LIMIT && v.s <= LABEL_LIMIT;
  const font = rootPx() * 0.8;
  const rowH = labels ? Math.ceil(font * 1.5) : 1;
  const ctx0 = cv.getContext('2d');
  const width = (s) => { ctx0.font = tokenFont(s, font); return ctx0.measureText(s).width; };
  const tw = labels ? Math.ceil(Math.max(...v.qTokens.concat(v.kTokens).map(width))) + 10 : 4;
  const gap = Math.max(60, Math.min(160, cv.parentElement.clientWidth - 2 * tw - 2));
  const w = tw * 2 + gap, h = Math.max(v.l, v.s) * rowH + 8;
  const ctx = setupCanvas(cv, w, h);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, w, h);
  const yl = (i) => 4 + (i + 0.5) * rowH;
  const row = new Float32Array(v.s);
  let max = 0;
  for (let i = 0; i < v.l; i++) { rowOf(map, v, i, row); for (const x of row) max = Math.max(max, x); }
  if (unitScale()) max = 1; // the colour scale's top, as on the heatmap
  ctx.lineWidth = labels ? 2 : 1;
  for (let i = 0; i < v.l; i++) {
    if (lineHover && lineHover.side === 'q' && lineHover.i !== i) continue;
    rowOf(map, v, i, row);
    const keep = passes(Array.from(row));
    let best = -1;
    if (!labels && !lineHover) for (let j = 0; j < v.s; j++) if (best < 0 || row[j] > row[best]) best = j;
    for (let j = 0; j < v.s; j++) {
      if (lineHover && lineHover.side === 'k' && lineHover.i !== j) continue;
      if (best >= 0 && j !== best) continue;
      const x = row[j];
      if (!keep[j] || x <= 0 || isMasked(v, i, j)) continue;
      ctx.strokeStyle = `rgba(47, 95, 208, ${Math.min(1, x / (max || 1)).toFixed(3)})`;
      ctx.beginPath();
      ctx.moveTo(tw, yl(i));
      ctx.lineTo(tw + gap, yl(j));
      ctx.stroke();
    }
  }
  if (labels) {
    ctx.textBaseline = 'middle';
    v.qTokens.forEach((s, i) => {
      ctx.font = tokenFont(s, font);
      ctx.fillStyle = lineHover && lineHover.side === 'q' && lineHover.i === i ? '#2f5fd0' : '#1d2330';
      ctx.textAlign = 'right';
      ctx.fillText(s, tw - 6, yl(i));
    });
    v.kTokens.forEach((s, j) => {
      ctx.font = tokenFont(s, font);
      ctx.fillStyle = lineHover && lineHover.side === 'k' && lineHover.i === j ? '#2f5fd0' : '#1d2330';
      ctx.textAlign = 'left';
      ctx.fillText(s, tw + gap + 6, yl(j));
    });
  } else if (lineHover) {
    ctx.fillStyle = '#2f5fd0';
    ctx.fillRect(lineHover.side === 'q' ? 0 : tw + gap, yl(lineHover.i) - 1, tw, 3);
  }
  cv.dataset.rowH = rowH; cv.dataset.tw = tw; cv.dataset.gap = gap;
  // The axis titles (index.html) over the two columns: 查询 / query over the queries, right
  // aligned as they are, and 键 / key over the keys.
  $('lines-axis-query').style.width = `${Math.max(0, tw - 6)}px`;
  $('lines-axis-key').style.marginLeft = `${gap + 12}px`;
}

export function onLinesMove(ev) {
  if (!view) return;
  const v = shownView(view);
  const cv = $('lines'), r = cv.getBoundingClientRect();
  const x = ev.clientX - r.left, y = ev.clientY - r.top;
  const rowH = Number(cv.dataset.rowH), tw = Number(cv.dataset.tw), gap = Number(cv.dataset.gap);
  const i = Math.floor((y - 4) / rowH);
  let h = null;
  if (x < tw && i >= 0 && i < v.l) h = { side: 'q', i };
  else if (x > tw + gap && i >= 0 && i < v.s) h = { side: 'k', i };
  if (JSON.stringify(h) !== JSON.stringify(lineHover)) { lineHover = h; drawLines(view); }
}

export function onLinesLeave() {
  lineHover = null;
  if (view) drawLines(view);
}
