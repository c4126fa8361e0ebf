// The model view: every layer × head of a model of layers as a small map, each labelled with its
// previous-token and induction scores (computed by the page on the sequence shown, and the
// model's own measure on held-out sequences when GET /v1/models gives head_scores); a click
// opens one large, and a click on it again, or the clear button, lets it go. The large map of an
// induction head outlines where the same word stood before (dotted) and the cell one step right
// of it (solid), where the head looks.

import { t } from './state.js';
import { $ } from './dom.js';
import { drawMatrix } from './minimap.js';
import { patternCells } from './headscores.js';

const f2 = (x) => (x === null || x === undefined ? '–' : x.toFixed(2));
const SAME = '#c2185b';   // the same word earlier: the diagonal's copy (dotted)
const TARGET = '#e08a00'; // one step right of it: the induction head's stripe (solid)
const STRIPE_MIN = 0.5;   // an induction score from which the head's stripe is there to see

// The open map: {layer, head} (indices into d.layers and the heads) or null.
export const sameHead = (a, b) => !!a && !!b && a.layer === b.layer && a.head === b.head;

// One tile: the map, its name and its scores; a button, pressed when open.
function tile(d, li, h, open, onPick) {
  const layer = d.layers[li], s = d.scores[li][h], held = d.held && d.held[layer] && d.held[layer][h];
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'lm-tile';
  Object.assign(b.dataset, {
    testid: `lm-tile-${layer}-${h}`, layer: String(layer), head: String(h),
    prev: String(s.previous_token), ind: String(s.induction),
  });
  const isOpen = sameHead(open, { layer: li, head: h });
  b.setAttribute('aria-pressed', String(isOpen));
  const cv = document.createElement('canvas');
  const cell = Math.max(2, Math.floor(96 / d.L));
  drawMatrix(cv, d.maps[li][h], d.L, cell, { mode: 'weights', masked: (i, j) => j > i });
  const name = document.createElement('span');
  name.className = 'lm-name';
  name.textContent = t('learned.head', { l: layer, h });
  const sc = document.createElement('span');
  sc.className = 'lm-scores';
  sc.dataset.testid = 'lm-scores';
  sc.textContent = t('learned.scores', { p: f2(s.previous_token), i: f2(s.induction) });
  b.append(cv, name, sc);
  if (held) {
    const hs = document.createElement('span');
    hs.className = 'lm-scores held';
    hs.dataset.testid = 'lm-held';
    hs.textContent = t('learned.held', { p: f2(held.previous_token), i: f2(held.induction) });
    b.append(hs);
  }
  b.addEventListener('click', () => onPick(isOpen ? null : { layer: li, head: h }));
  return b;
}

// Draws d ({labels (L), t (token ids or words, L), L, layers, maps[li][h] Float32Array(L·L),
// scores[li][h], held (head_scores by layer, or null), ind {layer, head} the induction head})
// into the grid, and the open map (or none) below it. onPick(next) chooses what is open.
export function drawModelView(d, open, onPick) {
  const grid = $('learned-grid');
  grid.textContent = '';
  d.layers.forEach((layer, li) => {
    const row = document.createElement('div');
    row.className = 'lm-layer';
    row.dataset.testid = `lm-layer-${layer}`;
    const lab = document.createElement('span');
    lab.className = 'lm-layer-name';
    lab.textContent = t('learned.layer', { l: layer });
    row.append(lab);
    d.maps[li].forEach((_, h) => row.append(tile(d, li, h, open, onPick)));
    grid.append(row);
  });
  drawOpen(d, open, onPick);
}

function drawOpen(d, open, onPick) {
  const box = $('learned-open');
  box.hidden = !open;
  if (!open) { delete box.dataset.layer; delete box.dataset.head; return; }
  const layer = d.layers[open.layer], s = d.scores[open.layer][open.head];
  Object.assign(box.dataset, { layer: String(layer), head: String(open.head) });
  $('learned-open-title').textContent = t('learned.open', {
    l: layer, h: open.head, p: f2(s.previous_token), i: f2(s.induction),
  });
  const isInd = sameHead(open, d.ind);
  const { same, ind } = patternCells(d.t);
  const marks = isInd ? [{ cells: same, colour: SAME, dash: true }, { cells: ind, colour: TARGET }] : [];
  const cv = $('learned-open-map');
  const room = Math.max(160, Math.min(box.parentElement.clientWidth, 640) - 120);
  const cell = Math.max(8, Math.min(24, Math.floor(room / d.L)));
  drawMatrix(cv, d.maps[open.layer][open.head], d.L, cell, {
    mode: 'weights', labels: d.labels, masked: (i, j) => j > i, marks,
  });
  cv.setAttribute('aria-label', $('learned-open-title').textContent);
  cv.dataset.same = isInd ? JSON.stringify(same) : '';  // the cells outlined, for a test to read
  cv.dataset.stripe = isInd ? JSON.stringify(ind) : '';
  cv.onclick = () => onPick(null);
  const stripe = $('learned-stripe');
  stripe.hidden = !isInd || !same.length;
  if (!stripe.hidden) {
    // A head that does not look there (an untrained model's best) is said to, not claimed to.
    const key = s.induction >= STRIPE_MIN ? 'learned.stripe' : 'learned.stripe.weak';
    stripe.textContent = t(key, { l: layer, h: open.head, i: f2(s.induction) });
  }
  $('learned-legend').hidden = stripe.hidden;
}
