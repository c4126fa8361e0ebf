// 实验三 on the heatmap: the original sentence's weights of the selected head, with the causal
// mask on and off, each with the rows whose output changed (beyond float rounding: isChanged)
// marked by a red bar at their right, and word t's column outlined.
//
// isChanged is passed in by exp3.js (drawExp3Maps' caller), which imports this module.

import { state, t } from './state.js';
import { $, canvasFont, rootPx, setupCanvas, tokenFont } from './dom.js';
import { meanOf } from './maps.js';
import { drawHeat } from './heatmap.js';
import { headName } from './heads.js';

export const CHANGED = '#c62828'; // the mark of a changed row (tests read it)

// One map: rows labelled with the words, columns with their positions, a mark column at the right.
function drawOne(v, map, causal, rows, t3, label, isChanged) {
  const fig = document.createElement('figure');
  fig.className = 'exp3-map';
  fig.dataset.testid = `exp3-map-${causal === 'off' ? 'off' : 'on'}`;
  const cap = document.createElement('figcaption');
  cap.textContent = label;
  const axes = document.createElement('span'); // the axis titles: rows are queries, columns keys
  axes.className = 'axis-grid';
  axes.dataset.testid = 'axis-grid';
  axes.textContent = t('axis.grid');
  cap.append(' ', axes);
  const cv = document.createElement('canvas');
  fig.append(cap, cv);
  const rem = rootPx(), font = Math.round(rem * 0.8), pad = Math.round(font * 0.4);
  const cell = Math.round(rem * 1.6), mw = Math.round(cell * 0.45), gap = Math.round(cell * 0.25);
  const probe = cv.getContext('2d');
  probe.font = canvasFont(font);
  const labW = Math.ceil(Math.max(...v.qTokens.map((x) => { probe.font = tokenFont(x, font); return probe.measureText(x).width; }))) + 2 * pad;
  const labH = font + 2 * pad;
  const w = labW + v.s * cell + gap + mw + 2, h = labH + v.l * cell + 2;
  const ctx = setupCanvas(cv, w, h);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, w, h);
  drawHeat(ctx, map, { l: v.l, s: v.s, causal }, labW, labH, cell, cell);
  ctx.strokeStyle = '#1d2330'; // word t's column
  ctx.lineWidth = 2;
  ctx.strokeRect(labW + t3 * cell + 1, labH + 1, cell - 2, v.l * cell - 2);
  ctx.font = canvasFont(font);
  ctx.textBaseline = 'middle';
  ctx.fillStyle = '#1d2330';
  ctx.textAlign = 'right';
  v.qTokens.forEach((x, i) => { ctx.font = tokenFont(x, font); ctx.fillText(x, labW - pad, labH + (i + 0.5) * cell); });
  ctx.font = canvasFont(font);
  ctx.textAlign = 'center';
  for (let j = 0; j < v.s; j++) ctx.fillText(String(j), labW + (j + 0.5) * cell, labH / 2);
  const markX = labW + v.s * cell + gap, marked = [];
  ctx.fillStyle = CHANGED;
  rows.forEach((r, i) => {
    if (!isChanged(r)) return; // a change beyond float rounding (exp3.js)
    marked.push(i);
    ctx.fillRect(markX, labH + i * cell + 2, mw, cell - 4);
  });
  cv.dataset.marked = JSON.stringify(marked);
  cv.dataset.geom = JSON.stringify({ labW, labH, cell, markX, markW: mw, width: w, height: h });
  cv.setAttribute('role', 'img');
  cv.setAttribute('aria-label', label);
  return fig;
}

// The maps of the runs done so far (cur: exp3.js's state of the settings shown).
export function drawExp3Maps(v, cur, t3, isChanged) {
  const box = $('exp3-maps');
  box.textContent = '';
  if (!cur || !cur.wOn) return;
  const pick = (ws) => (state.head === 'mean' ? meanOf(ws, v.l * v.s) : ws[Math.min(Number(state.head), ws.length - 1)]);
  const key = state.head === 'mean' ? 'mean' : String(Math.min(Number(state.head), v.h - 1));
  const p = document.createElement('p');
  p.className = 'note';
  p.textContent = t('exp3.map.title', { name: headName(v, key) });
  const row = document.createElement('div');
  row.className = 'exp3-map-row';
  row.append(drawOne(v, pick(cur.wOn), 'top_left', cur.on, t3, t('exp3.map.on'), isChanged));
  if (cur.wOff && cur.off) row.append(drawOne(v, pick(cur.wOff), 'off', cur.off, t3, t('exp3.map.off'), isChanged));
  box.append(p, row);
}
