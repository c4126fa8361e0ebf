// 思考题 2, the choice of H: the same sentence, the same E and the same seeded projections, split
// into H = 1, 2, 4 and 8 heads, side by side; each head's weights, its width d_k = E / H, and
// the parameters and FLOPs of each, as the API counts them.

import { t, view } from './state.js';
import { $ } from './dom.js';
import { post } from './api.js';
import { hideError, showError } from './errors.js';
import { readTensor } from './tensors.js';
import { DEMO_E, seededWeight, sentenceVectors } from './wordvec.js';
import { drawMatrix } from './minimap.js';
import { setCalls } from './callbox.js';

export const HS = [1, 2, 4, 8];

// The request for H heads: the same inline W_Q, W_K, W_V and W_O (E × E, seeded 11 to 14)
// whatever H is, so that only their split into heads changes: head h takes the columns
// h·d_k … (h+1)·d_k − 1 of each projection.
export const multiBody = (x, h) => ({
  query: x, need_weights: 'per_head', outputs: ['weights'],
  params: {
    num_heads: h, q_proj_weight: seededWeight(DEMO_E, 11), k_proj_weight: seededWeight(DEMO_E, 12),
    v_proj_weight: seededWeight(DEMO_E, 13), 'out_proj.weight': seededWeight(DEMO_E, 14),
  },
});

let result = null; // {key, runs: [{h, maps, flops}]}
let seq = 0;

export async function runMulti() {
  const v = view;
  if (!v || !v.words) return;
  const mine = ++seq;
  const { words, x } = sentenceVectors(v);
  $('multi-run').disabled = true;
  try {
    const bodies = HS.map((h) => multiBody(x, h));
    const rs = await Promise.all(bodies.map((b) => post('v1/attention', b)));
    if (mine !== seq) return;
    setCalls('multi', bodies.map((body) => ({ path: 'v1/attention', body })));
    const n = words.length;
    result = {
      key: JSON.stringify(words),
      runs: rs.map((r, k) => {
        const w = readTensor(r.weights).data;
        return { h: HS[k], flops: r.usage.flops, maps: Array.from({ length: HS[k] }, (_, i) => w.subarray(i * n * n, (i + 1) * n * n)) };
      }),
    };
    hideError($('multi-error'));
  } catch (e) {
    if (mine !== seq) return;
    result = null;
    showError($('multi-error'), e, 'think.error');
  } finally {
    if (mine === seq) $('multi-run').disabled = false;
  }
  drawMulti(v);
}

export function drawMulti(v) {
  if (!v.words) return;
  const { words } = sentenceVectors(v);
  const cur = result && result.key === JSON.stringify(words) ? result : null;
  const res = $('multi-result');
  res.hidden = !cur;
  if (!cur) return;
  res.dataset.n = String(seq);
  const box = $('multi-cols');
  box.textContent = '';
  const n = words.length;
  for (const run of cur.runs) {
    const col = document.createElement('figure');
    col.className = 'multi-col';
    col.dataset.h = String(run.h);
    col.dataset.flops = String(run.flops);
    const cap = document.createElement('figcaption');
    const title = document.createElement('strong');
    title.textContent = t('multi.col', { h: run.h, dk: DEMO_E / run.h });
    const facts = document.createElement('span');
    facts.className = 'note';
    facts.textContent = t('multi.facts', { p: 4 * DEMO_E * DEMO_E, f: run.flops.toLocaleString('en') });
    cap.append(title, facts);
    const maps = document.createElement('div');
    maps.className = 'multi-maps';
    // The columns share the width: H = 8's maps are smaller, as many as fit in the same room.
    const cell = Math.max(2, Math.floor((run.h === 1 ? 120 : run.h === 2 ? 58 : 56) / n));
    run.maps.forEach((m, i) => {
      const cv = document.createElement('canvas');
      cv.dataset.head = String(i);
      cv.setAttribute('role', 'img');
      cv.setAttribute('aria-label', t('multi.map', { i, h: run.h }));
      drawMatrix(cv, m, n, cell, { mode: 'weights' });
      maps.append(cv);
    });
    col.append(cap, maps);
    box.append(col);
  }
  const same = cur.runs.every((r) => r.flops === cur.runs[0].flops);
  $('multi-verdict').textContent = t(same ? 'multi.verdict' : 'multi.verdict.differ', { p: 4 * DEMO_E * DEMO_E, f: cur.runs[0].flops.toLocaleString('en') });
}
