// Weight maps, dense or top-k (see app.js): the one selected, a row of one, the masks and the
// filter over its cells, and their maximum and mean.

import { state } from './state.js';

export function selectedMap(v) {
  if (state.head === 'mean' || !v.heads) return v.mean;
  return v.heads[Math.min(Number(state.head), v.heads.length - 1)];
}

// ---- Masks and filters --------------------------------------------------------------------

// The first masked key of query row i (S when none is): with the causal and padding masks, the
// masked keys of a row are always the run from there to the end.
export function maskStart(v, i) {
  let m = v.s;
  if (state.causal === 'top_left') m = Math.min(m, i + 1);
  if (state.causal === 'bottom_right') m = Math.min(m, Math.max(0, i + v.s - v.l + 1));
  if (state.keyLength !== '') m = Math.min(m, Number(state.keyLength));
  return m;
}

export const isMasked = (v, i, j) => j >= maskStart(v, i);

// Dense row i of a map (Float32Array or top-k) into out (length S).
export function rowOf(map, v, i, out) {
  if (map instanceof Float32Array) {
    out.set(map.subarray(i * v.s, (i + 1) * v.s));
  } else {
    out.fill(0);
    for (let r = 0; r < map.k; r++) out[map.idx[i * map.k + r]] = map.val[i * map.k + r];
  }
  return out;
}

// Which cells of a row pass the filter.
export function passes(row) {
  if (state.filter === 'threshold') return row.map((w) => w >= state.filterValue);
  if (state.filter === 'topk') {
    const k = Math.max(1, Math.floor(state.filterValue));
    const order = [...row.keys()].sort((a, b) => row[b] - row[a] || a - b).slice(0, k);
    const keep = new Array(row.length).fill(false);
    for (const j of order) keep[j] = true;
    return keep;
  }
  return new Array(row.length).fill(true);
}

// ---- Maximum and mean ---------------------------------------------------------------------

export function mapMax(map, v) {
  let m = 0;
  const row = new Float32Array(v.s);
  for (let i = 0; i < v.l; i++) { rowOf(map, v, i, row); for (const w of row) if (w > m) m = w; }
  return m || 1;
}

export function meanOf(heads, n) {
  const m = new Float32Array(n);
  for (const w of heads) for (let i = 0; i < n; i++) m[i] += w[i];
  for (let i = 0; i < n; i++) m[i] /= heads.length;
  return m;
}
