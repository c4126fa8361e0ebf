// The current view as a picture of its own, for the exports: the selected head's heatmap or its
// lines as an SVG document, with the head's name, the token labels, the axis titles (horizontal)
// and the colour scale, drawn from the same weights and colours as the page, the heatmap's
// numbers in its cells when asked; and an SVG as a PNG.
//
// Sizes are in CSS px at a fixed label font (FONT), whatever the window: an export looks the
// same from a phone and from a projector. Up to LABEL_LIMIT tokens each cell is a rect and each
// token a label; beyond, the map is one embedded image and the axes carry positions.

import { state, t, unitScale } from './state.js';
import { isPunct, PUNCT_SCALE } from './dom.js';
import { isMasked, maskStart, passes, rowOf, selectedMap, shownView } from './maps.js';
import { colour, paintMap, rgb } from './heatmap.js';
import { headName } from './heads.js';
import { LABEL_LIMIT } from './large.js';

const FONT = 13; // the labels' size, px
const INK = '#1d2330', MUTED = '#5b6475', ACCENT = '#2f5fd0', START_INK = '#a34700';

const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const n2 = (x) => String(Math.round(x * 100) / 100);
const family = () => getComputedStyle(document.body).fontFamily;

let probe = null;
// The width of s in the SVG's font (a punctuation token larger and bold, as on the page).
function textWidth(s, px = FONT) {
  probe = probe || document.createElement('canvas').getContext('2d');
  probe.font = isPunct(s) ? `bold ${px * PUNCT_SCALE}px ${family()}` : `${px}px ${family()}`;
  return probe.measureText(s).width;
}

// A <text> element; a punctuation token larger and bold.
function text(s, x, y, { anchor = 'start', size = FONT, fill = INK, weight = '', rotate = 0, token = false } = {}) {
  const big = token && isPunct(s);
  const attrs = [`x="${n2(x)}"`, `y="${n2(y)}"`, `font-size="${n2(big ? size * PUNCT_SCALE : size)}"`, `fill="${fill}"`,
    `text-anchor="${anchor}"`, 'dominant-baseline="central"'];
  if (weight || big) attrs.push(`font-weight="${big ? 'bold' : weight}"`);
  if (rotate) attrs.push(`transform="rotate(${rotate} ${n2(x)} ${n2(y)})"`);
  return `<text ${attrs.join(' ')}>${esc(s)}</text>`;
}

function svgDoc(w, h, body, title) {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="${Math.ceil(w)}" height="${Math.ceil(h)}" `
    + `viewBox="0 0 ${Math.ceil(w)} ${Math.ceil(h)}" font-family="${esc(family())}">\n<title>${esc(title)}</title>\n`
    + `<rect width="100%" height="100%" fill="#fff"/>\n${body}\n</svg>\n`;
}

// The masked cells' stripes (heatmap.js's colours) and the colour scale, as SVG definitions.
const DEFS = `<defs><pattern id="masked" width="8" height="8" patternUnits="userSpaceOnUse">`
  + `<rect width="8" height="8" fill="rgb(190,190,190)"/><path d="M-8 8L0 0M0 8L8 0M8 8L16 0" stroke="rgb(64,64,64)" stroke-width="2"/></pattern>`
  + `<linearGradient id="scale">${Array.from({ length: 11 }, (_, i) => `<stop offset="${i / 10}" stop-color="${rgb(colour(i / 10))}"/>`).join('')}</linearGradient></defs>`;

// The legend under a drawing at (x, y): 0, the scale, its top, and the masked cells' swatch.
function legend(x, y, top) {
  const hi = unitScale() ? '1' : top.toFixed(3);
  const w0 = textWidth('0', FONT * 0.9), w1 = textWidth(hi, FONT * 0.9);
  const sx = x + w0 + 6, ex = sx + 160 + 6;
  return [text('0', x, y + 6, { size: FONT * 0.9, fill: MUTED }),
    `<rect x="${n2(sx)}" y="${y}" width="160" height="12" fill="url(#scale)" stroke="${MUTED}" stroke-width="0.5"/>`,
    text(hi, ex, y + 6, { size: FONT * 0.9, fill: MUTED }),
    `<rect x="${n2(ex + w1 + 12)}" y="${y - 2}" width="16" height="16" fill="url(#masked)" stroke="#777"/>`,
    text(t('scale.masked'), ex + w1 + 34, y + 6, { size: FONT * 0.9, fill: MUTED })].join('\n');
}

// The title line: the head's name and the map's maximum, as the page's title has them.
function titleOf(v, max) {
  const key = state.head === 'mean' || !v.heads ? 'mean' : String(state.head);
  return [headName(v, key), t('large.max', { max: max.toFixed(3) })].concat(v.renorm ? [t('large.renorm')] : []).join(' · ');
}

// Tick positions along n tokens when they are too many to label: about 16, at round steps.
function ticks(n) {
  const step = [1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 256, 512, 1024].find((s) => n / s <= 16) || Math.ceil(n / 16);
  return Array.from({ length: Math.ceil(n / step) }, (_, k) => k * step);
}

// The colour a number is written in on a cell of colour rgb: the page's ink or white, whichever
// stands out more (WCAG's contrast ratio).
function inkOn(rgb3) {
  const lum = (c) => c.map((v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
    .reduce((a, v, k) => a + v * [0.2126, 0.7152, 0.0722][k], 0);
  const bg = lum(rgb3), ink = lum([29, 35, 48]);
  return (bg + 0.05) / (ink + 0.05) >= 1.05 / (bg + 0.05) ? INK : '#fff';
}

// The selected head's heatmap of the run as an SVG document (a string); numbers: each cell's
// weight written in it (two decimals), the cells then at least NUMBER_CELL px.
const NUMBER_CELL = 30;
export function heatmapSvg(run, { numbers = false } = {}) {
  const v = shownView(run), map = selectedMap(v);
  const { canvas, max, top } = paintMap(map, v);
  const tokens = v.l <= LABEL_LIMIT && v.s <= LABEL_LIMIT;
  const rows = tokens ? v.qTokens.map((s, i) => [i, s]) : ticks(v.l).map((i) => [i, String(i)]);
  const cols = tokens ? v.kTokens.map((s, j) => [j, s]) : ticks(v.s).map((j) => [j, String(j)]);
  const fit = Math.min(40, Math.floor(560 / Math.max(v.l, v.s)));
  const cell = tokens ? Math.max(numbers ? NUMBER_CELL : 16, fit) : 560 / Math.max(v.l, v.s);
  const colW = Math.max(...cols.map(([, s]) => textWidth(s)));
  const slant = tokens && colW > cell - 4; // angled key labels when they do not fit their column
  // The axis titles are horizontal, on one line above the map: 查询 / query ↓ over the rows'
  // labels, 键 / key → over the columns.
  const pad = 6, axisW = 0, titleH = FONT * 2.2, axisH = FONT * 1.6;
  const qTitle = `${t('axis.query')} ↓`, kTitle = `${t('axis.key')} →`;
  const labW = Math.ceil(Math.max(...rows.map(([, s]) => textWidth(s)), textWidth(qTitle))) + 2 * pad;
  const labH = Math.ceil(slant ? colW * Math.SQRT1_2 + FONT + 2 * pad : FONT + 2 * pad);
  const x0 = axisW + labW, y0 = titleH + axisH + labH;
  const W = Math.max(x0 + v.s * cell + (slant ? colW * Math.SQRT1_2 : 0) + pad, 420), H = y0 + v.l * cell + 44;
  const out = [DEFS, text(titleOf(v, max), pad, titleH / 2, { weight: '600' })];
  out.push(text(kTitle, x0 + v.s * cell / 2, titleH + axisH / 2, { fill: MUTED, weight: '600', anchor: 'middle' }));
  out.push(text(qTitle, x0 - pad, titleH + axisH / 2, { fill: MUTED, weight: '600', anchor: 'end' }));
  if (tokens) { // a rect per cell, in the colours the page painted
    const px = canvas.getContext('2d').getImageData(0, 0, v.s, v.l).data, cells = [];
    for (let i = 0; i < v.l; i++) {
      for (let j = 0; j < v.s; j++) {
        const o = (i * v.s + j) * 4;
        const fill = isMasked(v, i, j) ? 'url(#masked)' : `rgb(${px[o]},${px[o + 1]},${px[o + 2]})`;
        cells.push(`<rect x="${n2(x0 + j * cell)}" y="${n2(y0 + i * cell)}" width="${n2(cell)}" height="${n2(cell)}" fill="${fill}"/>`);
      }
    }
    out.push(`<g shape-rendering="crispEdges">${cells.join('')}</g>`);
    if (numbers) { // each weight in its cell, in the ink that stands out on its colour
      const row = new Float32Array(v.s), nums = [], size = Math.min(FONT * 0.85, cell * 0.34);
      for (let i = 0; i < v.l; i++) {
        rowOf(map, v, i, row);
        for (let j = 0; j < v.s; j++) {
          if (isMasked(v, i, j)) continue;
          const o = (i * v.s + j) * 4;
          nums.push(`<text x="${n2(x0 + (j + 0.5) * cell)}" y="${n2(y0 + (i + 0.5) * cell)}" font-size="${n2(size)}" fill="${inkOn([px[o], px[o + 1], px[o + 2]])}" `
            + `text-anchor="middle" dominant-baseline="central" data-i="${i}" data-j="${j}">${row[j].toFixed(2)}</text>`);
        }
      }
      out.push(`<g class="numbers">${nums.join('')}</g>`);
    }
  } else { // the painted map as one image, the masked runs striped on top
    out.push(`<image x="${x0}" y="${y0}" width="${n2(v.s * cell)}" height="${n2(v.l * cell)}" preserveAspectRatio="none" `
      + `style="image-rendering:pixelated" href="${canvas.toDataURL('image/png')}"/>`);
    for (let i = 0; i < v.l; i++) {
      const m0 = maskStart(v, i);
      if (m0 < v.s) out.push(`<rect x="${n2(x0 + m0 * cell)}" y="${n2(y0 + i * cell)}" width="${n2((v.s - m0) * cell)}" height="${n2(cell)}" fill="url(#masked)"/>`);
    }
  }
  const st = tokens && v.start >= 0 ? v.start : -1;
  if (st >= 0) { // the start token's row and column set apart by a white gap, as on the page
    out.push(`<rect x="${n2(x0 + (st + 1) * cell - 1)}" y="${y0}" width="2" height="${n2(v.l * cell)}" fill="#fff"/>`);
    out.push(`<rect x="${x0}" y="${n2(y0 + (st + 1) * cell - 1)}" width="${n2(v.s * cell)}" height="2" fill="#fff"/>`);
  }
  const ink = (k) => (k === st ? START_INK : INK);
  for (const [i, s] of rows) out.push(text(s, x0 - pad, y0 + (i + 0.5) * cell, { anchor: 'end', fill: ink(i), token: tokens }));
  for (const [j, s] of cols) {
    const x = x0 + (j + 0.5) * cell;
    out.push(slant ? text(s, x, y0 - pad - FONT / 2, { rotate: -45, fill: ink(j), token: true })
      : text(s, x, y0 - pad - FONT / 2, { anchor: 'middle', fill: ink(j), token: tokens }));
  }
  out.push(legend(pad, y0 + v.l * cell + 18, top));
  return svgDoc(W, H, out.join('\n'), titleOf(v, max));
}

// The selected head's lines as an SVG document: each query joined to the keys it attends to,
// the line as dark as the weight against the colour scale's top (beyond LABEL_LIMIT tokens, only
// each query's strongest key, as on the page).
export function linesSvg(run) {
  const v = shownView(run), map = selectedMap(v);
  const labels = v.l <= LABEL_LIMIT && v.s <= LABEL_LIMIT;
  const rowH = labels ? Math.ceil(FONT * 1.6) : Math.max(1, 560 / Math.max(v.l, v.s));
  const tw = labels ? Math.ceil(Math.max(...v.qTokens.concat(v.kTokens).map((s) => textWidth(s)))) + 12 : 40;
  const gap = 220, pad = 6, titleH = FONT * 2.2, axisH = FONT * 1.8;
  const y0 = titleH + axisH, W = Math.max(2 * tw + gap + 2 * pad, 420), H = y0 + Math.max(v.l, v.s) * rowH + pad;
  const yl = (i) => y0 + (i + 0.5) * rowH;
  const row = new Float32Array(v.s);
  let max = 0;
  for (let i = 0; i < v.l; i++) { rowOf(map, v, i, row); for (const x of row) max = Math.max(max, x); }
  const top = unitScale() ? 1 : max || 1;
  const out = [text(titleOf(v, max || 0), pad, titleH / 2, { weight: '600' })];
  out.push(text(t('axis.query'), pad + tw - 6, titleH + axisH / 2, { anchor: 'end', fill: MUTED, weight: '600' }));
  out.push(text(t('axis.key'), pad + tw + gap + 6, titleH + axisH / 2, { fill: MUTED, weight: '600' }));
  const lines = [];
  for (let i = 0; i < v.l; i++) {
    rowOf(map, v, i, row);
    const keep = passes(Array.from(row));
    let best = -1;
    if (!labels) for (let j = 0; j < v.s; j++) if (best < 0 || row[j] > row[best]) best = j;
    for (let j = 0; j < v.s; j++) {
      if ((best >= 0 && j !== best) || !keep[j] || row[j] <= 0 || isMasked(v, i, j)) continue;
      lines.push(`<line x1="${pad + tw}" y1="${n2(yl(i))}" x2="${pad + tw + gap}" y2="${n2(yl(j))}" stroke="${ACCENT}" `
        + `stroke-opacity="${Math.min(1, row[j] / top).toFixed(3)}"/>`);
    }
  }
  out.push(`<g stroke-width="${labels ? 2 : 1}">${lines.join('')}</g>`);
  if (labels) {
    v.qTokens.forEach((s, i) => out.push(text(s, pad + tw - 6, yl(i), { anchor: 'end', token: true })));
    v.kTokens.forEach((s, j) => out.push(text(s, pad + tw + gap + 6, yl(j), { token: true })));
  }
  return svgDoc(W, H, out.join('\n'), titleOf(v, max || 0));
}

// The SVG document svg as a PNG Blob, at scale device pixels per CSS px.
export async function svgToPng(svg, scale = 2) {
  const img = new Image();
  img.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`;
  await img.decode();
  const c = document.createElement('canvas');
  c.width = Math.round(img.width * scale); c.height = Math.round(img.height * scale);
  const ctx = c.getContext('2d');
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, c.width, c.height);
  ctx.drawImage(img, 0, 0, c.width, c.height);
  return new Promise((resolve, reject) => c.toBlob((b) => (b ? resolve(b) : reject(new Error('toBlob'))), 'image/png'));
}
