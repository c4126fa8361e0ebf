// Heatmap drawing: the colour scale, the masked cells' stripes, and a weight map painted once,
// then drawn at any cell size.

import { state, unitScale } from './state.js';
import { mapMax, maskStart, passes, rowOf } from './maps.js';

// A perceptual sequential scale from near-white (0) to deep blue-violet (1).
const STOPS = [[247, 251, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107], [37, 0, 70]];
export function colour(x) {
  x = Math.min(1, Math.max(0, x)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(x)), f = x - i;
  return STOPS[i].map((c, k) => Math.round(c + (STOPS[i + 1][k] - c) * f));
}
export const rgb = (c) => `rgb(${c[0]},${c[1]},${c[2]})`;

// Masked cells: dark diagonal stripes on a mid grey (mean about 150 of 255), so that on a
// washed-out projector they stay far from the near-white of weight 0 and, being grey and
// striped, apart from the scale's blues. The legend's swatch in style.css matches.
const MASK_BG = [190, 190, 190], MASK_STRIPE = [64, 64, 64];
const MASK_TILE = 8; // CSS px between stripes, along x

// The stripes as a pattern in CSS px for a context scaled by the device pixel ratio.
function maskPattern(ctx) {
  const dpr = window.devicePixelRatio || 1;
  const tile = document.createElement('canvas');
  tile.width = tile.height = Math.round(MASK_TILE * dpr);
  const c = tile.getContext('2d');
  c.scale(tile.width / MASK_TILE, tile.height / MASK_TILE);
  c.fillStyle = rgb(MASK_BG);
  c.fillRect(0, 0, MASK_TILE, MASK_TILE);
  c.strokeStyle = rgb(MASK_STRIPE);
  c.lineWidth = 2;
  c.beginPath();
  for (const o of [-MASK_TILE, 0, MASK_TILE]) { c.moveTo(o, MASK_TILE); c.lineTo(o + MASK_TILE, 0); }
  c.stroke();
  const pat = ctx.createPattern(tile, 'repeat');
  pat.setTransform(new DOMMatrix().scale(MASK_TILE / tile.width));
  return pat;
}

// The painted maps, one entry per map, valid while the filter and masks stay the same: the
// large view is redrawn on every mouse move, which must stay cheap for L = 512.
const painted = new WeakMap();

// Paints map into an offscreen canvas, one pixel per cell (masked cells in the mask's grey;
// drawHeat puts the stripes on top), against the colour scale's top (unitScale: 1, else the
// map's maximum). Returns {canvas, max, top}.
export function paintMap(map, v) {
  const unit = unitScale();
  const key = [state.filter, state.filterValue, state.causal, state.keyLength, v.causal, v.shift, unit].join('|');
  const hit = painted.get(map);
  if (hit && hit.key === key) return hit;
  const c = document.createElement('canvas');
  c.width = v.s; c.height = v.l;
  const ctx = c.getContext('2d');
  const img = ctx.createImageData(v.s, v.l);
  const max = mapMax(map, v), top = unit ? 1 : max; // the map's largest weight, the scale's top
  const row = new Float32Array(v.s);
  for (let i = 0; i < v.l; i++) {
    rowOf(map, v, i, row);
    const keep = passes(Array.from(row));
    const m0 = maskStart(v, i);
    for (let j = 0; j < v.s; j++) {
      let c3;
      if (j >= m0) c3 = MASK_BG;
      else {
        c3 = colour(row[j] / top);
        if (!keep[j]) c3 = c3.map((x) => Math.round(x * 0.25 + 255 * 0.75));
      }
      const o = (i * v.s + j) * 4;
      img.data[o] = c3[0]; img.data[o + 1] = c3[1]; img.data[o + 2] = c3[2]; img.data[o + 3] = 255;
    }
  }
  ctx.putImageData(img, 0, 0);
  const out = { canvas: c, max, top, key };
  painted.set(map, out);
  return out;
}

// Draws map with its top-left cell at (x, y), cells cw x ch CSS px, masked cells striped.
export function drawHeat(ctx, map, v, x, y, cw, ch) {
  const { canvas } = paintMap(map, v);
  ctx.imageSmoothingEnabled = cw < 1 || ch < 1; // average when shrinking, sharp cells otherwise
  ctx.drawImage(canvas, x, y, v.s * cw, v.l * ch);
  ctx.save();
  ctx.fillStyle = maskPattern(ctx);
  for (let i = 0; i < v.l; i++) { // a row's masked cells are one run at its end
    const m0 = maskStart(v, i);
    if (m0 < v.s) ctx.fillRect(x + m0 * cw, y + i * ch, (v.s - m0) * cw, ch);
  }
  ctx.restore();
}
