// The large heatmap of the selected head: its layout and labels, its legend, and the tooltip and
// row highlight under the pointer.

import { state, t, unitScale, view } from './state.js';
import { $, canvasFont, rootPx, setupCanvas, tokenFont } from './dom.js';
import { isMasked, rowOf, selectedMap, shownView } from './maps.js';
import { colour, drawHeat, paintMap, rgb } from './heatmap.js';
import { headName, headNameEl } from './heads.js';

export const LABEL_LIMIT = 64; // token labels up to this many tokens; beyond, positions as tick values
const NICE = [1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 200, 256, 500, 512, 1000, 1024, 2048, 4096];

// Where the large heatmap's parts go, in CSS px. The cells fill the width of the panel and the
// height left on the first screen (for L <= 16 with large font at 1024x768 the whole heatmap and
// its labels fit), or on the guided path the height left under its panel once the heads are
// scrolled to it, at most 3 rem; with hundreds of tokens a cell may shrink to half a pixel.
// Token labels are 0.8 rem (16 px with large font), horizontal on the left; on the top
// horizontal when they fit their column, else angled at 45° or, when neighbours would touch,
// 60°, with room kept above and to the right so that none is clipped. When rows are too thin for
// every label, every n-th is drawn. Beyond 64 tokens the labels are positions (tick values),
// horizontal, at round intervals.
function largeLayout(v, ctx) {
  const rem = rootPx();
  const font = Math.round(rem * 0.8 * 100) / 100;
  const pad = Math.round(font * 0.4);
  ctx.font = canvasFont(font);
  const tokens = v.l <= LABEL_LIMIT && v.s <= LABEL_LIMIT;
  const rowText = tokens ? v.qTokens : Array.from({ length: v.l }, (_, i) => String(i));
  const colText = tokens ? v.kTokens : Array.from({ length: v.s }, (_, j) => String(j));
  const width = (x) => { ctx.font = tokens ? tokenFont(x, font) : canvasFont(font); return ctx.measureText(x).width; };
  const rowW = rowText.map(width);
  const colW = colText.map(width);
  const labW = Math.ceil(Math.max(...rowW)) + 2 * pad;
  const maxColW = Math.max(...colW);

  // The width the heatmap may take: the whole row of its pair (the lines go below it when they
  // no longer fit beside), not the panel's width of the moment, which depends on the canvas drawn
  // last and on the lines beside it.
  const wrap = $('large-wrap'), panel = $('large-panel'), ps = getComputedStyle(panel);
  const frame = ['paddingLeft', 'paddingRight', 'borderLeftWidth', 'borderRightWidth'].reduce((a, k) => a + parseFloat(ps[k]), 0);
  const availW = Math.max(wrap.clientWidth, panel.parentElement.clientWidth - frame - $('axis-query').offsetWidth);
  let top = wrap.getBoundingClientRect().top + window.scrollY;
  // On the guided path the heads' section is scrolled to just under its panel (path.js, whose
  // height is --path-h): the heatmap and its legend fit the screen from there.
  const pathH = parseFloat(getComputedStyle(document.documentElement).getPropertyValue('--path-h')) || 0;
  if (pathH > 0) top = top - ($('heads-section').getBoundingClientRect().top + window.scrollY) + pathH + rem * 0.5;
  const reserve = $('scale').offsetHeight + rem * (pathH > 0 ? 0.6 : 1.4); // the legend and the panel's bottom
  let availH = window.innerHeight - top - reserve;
  // Below the first screen anyway (a narrow window stacks the controls first): fit one screen.
  if (availH < window.innerHeight * 0.35) availH = window.innerHeight - rem * 4 - reserve;

  const minRow = font * 1.2; // the spacing a row label needs
  const minSlant = font * 1.05; // the spacing of angled labels across their text (glyphs are 1 font high)
  const stride = (cell, need) => {
    const k = Math.max(1, Math.ceil(need / cell - 1e-9));
    return tokens ? k : NICE.find((n) => n >= k) || k;
  };
  const fit = (labH, right) => Math.min((availW - labW - right - 2) / v.s, (availH - labH - 2) / v.l);
  const place = (ang) => { // the layout with top labels angled by ang (0: horizontal)
    const sn = Math.sin(ang), cs = Math.cos(ang);
    const labH = Math.ceil(ang ? 2 * pad + font * cs + maxColW * sn : font + 2 * pad);
    let right = 0, cell = 1;
    for (let it = 0; it < 3; it++) { // the overhang on the right depends on the cell, and back
      const f = fit(labH, right);
      cell = f >= 1 ? Math.min(Math.floor(rem * 3), Math.floor(f)) : Math.max(0.5, f);
      right = 0;
      for (let j = 0; j < v.s; j++) {
        const reach = ang ? colW[j] * cs + font * sn / 2 : colW[j] / 2;
        right = Math.max(right, reach - (v.s - j - 0.5) * cell);
      }
      right = Math.ceil(right + pad);
    }
    const colStride = ang ? stride(cell * sn, minSlant) : stride(cell, maxColW + pad);
    return { ang, labH, right, cell, colStride, rowStride: stride(cell, minRow) };
  };
  let g = place(0);
  if (!tokens) g.rowStride = g.colStride = Math.max(g.rowStride, g.colStride);
  else if (g.colStride > 1) { // horizontal labels do not fit their columns
    g = place(Math.PI / 4);
    if (g.colStride > 1) {
      const steep = place(Math.PI / 3);
      if (steep.colStride < g.colStride) g = steep;
    }
  }
  return Object.assign(g, { font, pad, labW, rowText, colText, tokens });
}

let largeGeom = null;

// The start token's row and column: set apart by a white gap and labelled in the accent colour.
const START_COLOUR = '#a34700';

export function drawLarge(run, hoverRow = -1) {
  const v = shownView(run);
  const map = selectedMap(v);
  const { max, top } = paintMap(map, v);
  const cv = $('large');
  const key = state.head === 'mean' || !v.heads ? 'mean' : String(state.head);
  const name = headName(v, key);
  if (hoverRow < 0) { // a hover changes neither
    const title = $('large-title');
    title.textContent = '';
    title.append(headNameEl(v, key));
    const topk = key === 'mean' ? v.topkMean : v.topk;
    for (const part of [t('large.max', { max: max.toFixed(3) })].concat(topk ? [t('large.topk', { k: topk })] : [],
      v.renorm ? [t('large.renorm')] : [])) {
      const s = document.createElement('span');
      s.textContent = part;
      title.append(' · ', s);
    }
    drawScale(top);
  }
  const g = largeLayout(v, cv.getContext('2d'));
  const { labW, labH, cell, font, pad } = g;
  const w = labW + v.s * cell + g.right + 2, h = labH + v.l * cell + 2;
  const aqW = $('axis-query').offsetWidth; // read before anything is resized (no forced layout)
  const ctx = setupCanvas(cv, w, h);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, w, h);
  drawHeat(ctx, map, v, labW, labH, cell, cell);
  const st = v.start >= 0 && g.tokens ? v.start : -1;
  if (st >= 0) { // a white gap after the start token's column and row
    ctx.fillStyle = '#fff';
    const gap = Math.max(2, Math.round(cell / 8));
    ctx.fillRect(labW + (st + 1) * cell - gap / 2, labH, gap, v.l * cell);
    ctx.fillRect(labW, labH + (st + 1) * cell - gap / 2, v.s * cell, gap);
  }
  const ink = (k) => (k === st ? START_COLOUR : '#1d2330');
  const font1 = (x) => { ctx.font = g.tokens ? tokenFont(x, font) : canvasFont(font); };
  ctx.textBaseline = 'middle';
  ctx.textAlign = 'right';
  for (let i = 0; i < v.l; i += g.rowStride) {
    ctx.fillStyle = ink(i);
    font1(g.rowText[i]);
    ctx.fillText(g.rowText[i], labW - pad, labH + (i + 0.5) * cell);
  }
  for (let j = 0; j < v.s; j += g.colStride) {
    const x = labW + (j + 0.5) * cell;
    ctx.fillStyle = ink(j);
    font1(g.colText[j]);
    if (!g.ang) {
      ctx.textAlign = 'center';
      ctx.fillText(g.colText[j], x, labH - pad - font / 2);
      continue;
    }
    ctx.save();
    ctx.translate(x, labH - pad - font * Math.cos(g.ang) / 2);
    ctx.rotate(-g.ang);
    ctx.textAlign = 'left';
    ctx.fillText(g.colText[j], 0, 0);
    ctx.restore();
  }
  if (hoverRow >= 0) {
    ctx.strokeStyle = '#f2a900';
    ctx.lineWidth = 2;
    ctx.strokeRect(labW + 1, labH + hoverRow * cell + 1, v.s * cell - 2, cell - 2);
  }
  largeGeom = { labW, labH, cell };
  // The axis titles (index.html): 键 / key centred over the columns, 查询 / query beside the rows.
  const ak = $('axis-key'), aq = $('axis-query');
  const set = (el, k, x) => { if (el.style[k] !== x) el.style[k] = x; };
  set(ak, 'marginLeft', `${aqW + labW}px`);
  set(ak, 'width', `${v.s * cell}px`);
  set(aq, 'paddingTop', `${labH}px`);
  set(aq, 'height', `${h}px`);
  // The drawing's own numbers, for the tests and for anyone inspecting the page.
  cv.dataset.geom = JSON.stringify({
    labW, labH, cell, width: w, height: h, dpr: window.devicePixelRatio || 1, font,
    angle: Math.round(g.ang * 180 / Math.PI), rowStride: g.rowStride, colStride: g.colStride, start: st, l: v.l, s: v.s,
  });
  cv.dataset.head = key; // the head drawn (tests time a head's click to it)
  cv.setAttribute('aria-label', t('large.aria', { name, l: v.l, s: v.s }));
}

// The legend: the colour scale from 0 to its top (1, or the map's maximum: unitScale), and the
// masked cells' stripes.
let scaleKey = '';
function drawScale(top) {
  const el = $('scale');
  const key = [unitScale() ? 1 : top, state.lang, rootPx()].join('|');
  if (key === scaleKey && el.firstChild) return; // the same legend: a head's click keeps it
  scaleKey = key;
  el.textContent = '';
  const c = document.createElement('canvas');
  c.width = 200; c.height = 1;
  const ctx = c.getContext('2d');
  for (let x = 0; x < 200; x++) { ctx.fillStyle = rgb(colour(x / 199)); ctx.fillRect(x, 0, 1, 1); }
  const lo = document.createElement('span'); lo.textContent = '0';
  const hi = document.createElement('span'); hi.textContent = unitScale() ? '1' : top.toFixed(3);
  hi.dataset.testid = 'scale-top';
  const hatch = document.createElement('span'); hatch.className = 'hatch';
  const hl = document.createElement('span'); hl.textContent = t('scale.masked');
  el.append(lo, c, hi, hatch, hl);
}

function largeCell(ev) {
  const v = view && shownView(view);
  if (!v || !largeGeom) return null;
  const cv = $('large'), r = cv.getBoundingClientRect();
  const x = ev.clientX - r.left, y = ev.clientY - r.top;
  const j = Math.floor((x - largeGeom.labW) / largeGeom.cell), i = Math.floor((y - largeGeom.labH) / largeGeom.cell);
  if (i < 0 || j < 0 || i >= v.l || j >= v.s) return null;
  return { i, j, px: x, py: y };
}

export function onLargeMove(ev) {
  const c = largeCell(ev);
  const tip = $('tooltip');
  if (!c) { tip.hidden = true; drawLarge(view); return; }
  const v = shownView(view), row = rowOf(selectedMap(v), v, c.i, new Float32Array(v.s));
  tip.textContent = t('tip', {
    q: v.qTokens[c.i], k: v.kTokens[c.j],
    w: isMasked(v, c.i, c.j) ? t('tip.masked') : t('tip.weight', { w: row[c.j].toFixed(4) }),
  });
  tip.dataset.i = c.i; tip.dataset.j = c.j;
  tip.hidden = false;
  // Beside the pointer, on whichever side keeps it inside the panel.
  const wrap = $('large-wrap');
  const left = c.px + 14 + tip.offsetWidth > wrap.clientWidth ? Math.max(0, c.px - 14 - tip.offsetWidth) : c.px + 14;
  const top = c.py + 10 + tip.offsetHeight > wrap.clientHeight ? Math.max(0, c.py - 10 - tip.offsetHeight) : c.py + 10;
  tip.style.left = `${left}px`;
  tip.style.top = `${top}px`;
  drawLarge(view, c.i);
}
