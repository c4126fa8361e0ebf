// The page's elements: one by its id, canvases at the device's pixel ratio with fonts in rem, and
// the small builders the views share (a select's options, a cell's bar).

export const $ = (id) => document.getElementById(id);

// ---- Canvas helpers -----------------------------------------------------------------------

export const rootPx = () => parseFloat(getComputedStyle(document.documentElement).fontSize);

// A canvas font in the page's own font family, so that canvases follow the page's fonts.
export const canvasFont = (px) => `${px}px ${getComputedStyle(document.body).fontFamily}`;

// Sizes cv to w x h CSS px at the device pixel ratio; returns its context in CSS px.
export function setupCanvas(cv, w, h) {
  const dpr = window.devicePixelRatio || 1;
  w = Math.ceil(w); h = Math.ceil(h);
  cv.width = Math.round(w * dpr); cv.height = Math.round(h * dpr);
  cv.style.width = `${w}px`; cv.style.height = `${h}px`;
  const ctx = cv.getContext('2d');
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
