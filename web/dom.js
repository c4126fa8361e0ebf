// The page's elements: one by its id, canvases at the device's pixel ratio with fonts in rem, and
// the small builders the views share (a select's options, a cell's bar).

export const $ = (id) => document.getElementById(id);

// ---- Canvas helpers -----------------------------------------------------------------------

export const rootPx = () => parseFloat(getComputedStyle(document.documentElement).fontSize);

// A canvas font in the page's own font family, so that canvases follow the page's fonts.
export const canvasFont = (px) => `${px}px ${getComputedStyle(document.body).fontFamily}`;

// Sizes cv to w x h CSS px at the device pixel ratio; returns its context in CSS px, cleared.
// A size that stays the same is not set again, so that redrawing a canvas (a head's click) does
// not make the browser lay the page out again.
export function setupCanvas(cv, w, h) {
  const dpr = window.devicePixelRatio || 1;
  w = Math.ceil(w); h = Math.ceil(h);
  const pw = Math.round(w * dpr), ph = Math.round(h * dpr);
  if (cv.width !== pw) cv.width = pw;
  if (cv.height !== ph) cv.height = ph;
  if (cv.style.width !== `${w}px`) cv.style.width = `${w}px`;
  if (cv.style.height !== `${h}px`) cv.style.height = `${h}px`;
  const ctx = cv.getContext('2d');
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.clearRect(0, 0, pw, ph);
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

// ---- Selects and bars ---------------------------------------------------------------------

// Options value -> label of a select, its value set to selected.
export function fillSelect(sel, items, selected) {
  sel.textContent = '';
  for (const [value, label] of items) {
    const o = document.createElement('option');
    o.value = String(value);
    o.textContent = label;
    sel.append(o);
  }
  sel.value = String(selected);
}

export const tokenItems = (tokens) => tokens.map((tok, i) => [i, `${i} · ${tok}`]);

// A cell's weight as a bar behind its number (a CSS variable, 0 to 1).
export function barCell(td, w) {
  td.style.setProperty('--w', String(Math.max(0, Math.min(1, w))));
  td.classList.add('bar');
}

// ---- Punctuation tokens -------------------------------------------------------------------

// A token of punctuation or symbols alone (， 。 " ”): at a label's size ， and 。 are two dots and
// " and ” look alike, so the canvases draw them PUNCT_SCALE times larger and bold, and the tables
// mark them (class punct, style.css) to the same end.
export const isPunct = (s) => /\S/.test(s) && !/[\p{L}\p{N}]/u.test(s);
export const PUNCT_SCALE = 1.5;
export const tokenFont = (s, px) => (isPunct(s) ? `bold ${canvasFont(px * PUNCT_SCALE)}` : canvasFont(px));

// Marks the token cells under root whose text is punctuation alone.
export function markPunct(root) {
  for (const el of root.querySelectorAll('th, td.word, button.chip')) {
    const p = isPunct(el.textContent);
    if (el.classList.contains('punct') !== p) el.classList.toggle('punct', p);
  }
}
