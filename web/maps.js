// Weight maps, dense or top-k (see app.js): the one selected, a row of one, the masks and the
// filter over its cells, and their maximum and mean.

import { state } from './state.js';

export function selectedMap(v) {
  if (state.head === 'mean' || !v.heads) return v.mean;
  return v.heads[Math.min(Number(state.head), v.heads.length - 1)];
}

// ---- Masks and filters --------------------------------------------------------------------

// The first masked key of query row i (S when none is): with the causal and padding masks, the
// masked keys of a row are always the run from there to the end. A view may carry its own causal
// mode (v.causal, 实验三's runs) and a shift (v.shift: the start token's row and column hidden,
// so that its row i and key j are the run's i + 1 and j + 1).
export function maskStart(v, i) {
  const sh = v.shift || 0, causal = v.causal !== undefined ? v.causal : state.causal;
  const l = v.l + sh, s = v.s + sh, io = i + sh;
  let m = s;
  if (causal === 'top_left') m = Math.min(m, io + 1);
  if (causal === 'bottom_right') m = Math.min(m, Math.max(0, io + s - l + 1));
  if (state.keyLength !== '' && v.causal === undefined) m = Math.min(m, Number(state.keyLength));
  return Math.max(0, m - sh);
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

// ---- The start token hidden ----------------------------------------------------------------

const hidden = new WeakMap(); // a view -> {lang, d}: the view without its start token

// The view the heatmap, the heads and the lines draw: v itself, or, when the start token is
// hidden (state.nostart) and v has one at 0, v without its row and column, each row renormalised
// over the real words (a row with no weight left stays 0). Top-k maps stay as they are.
export function shownView(v) {
  if (!state.nostart || v.start !== 0 || !v.heads || !(v.heads[0] instanceof Float32Array)) return v;
  const hit = hidden.get(v);
  if (hit && hit.lang === state.lang) return hit.d;
  const l = v.l - 1, s = v.s - 1;
  const renorm = (map) => {
    const out = new Float32Array(l * s);
    for (let i = 0; i < l; i++) {
      const row = map.subarray((i + 1) * v.s + 1, (i + 2) * v.s);
      const sum = row.reduce((a, x) => a + x, 0);
      if (sum > 0) for (let j = 0; j < s; j++) out[i * s + j] = row[j] / sum;
    }
    return out;
  };
  const d = {
    ...v, l, s, shift: 1, start: -1, renorm: true, qTokens: v.qTokens.slice(1), kTokens: v.kTokens.slice(1),
    heads: v.heads.map(renorm), mean: v.mean ? renorm(v.mean) : null,
  };
  hidden.set(v, { lang: state.lang, d });
  return d;
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
