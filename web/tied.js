// 思考题 1, W^Q = W^K: the sentence's words through one head with inline weights, W_Q and W_K
// apart or tied; the scores (from the API's trace) and the weights, and what tying does to them:
// QKᵀ becomes symmetric, and the weight goes to the diagonal.

import { t, view } from './state.js';
import { $ } from './dom.js';
import { post } from './api.js';
import { hideError, showError } from './errors.js';
import { DEMO_E, seededWeight, sentenceVectors } from './wordvec.js';
import { drawMatrix } from './minimap.js';
import { setCalls } from './callbox.js';

// ---- The request ----------------------------------------------------------------------------
//
// One head, E = DEMO_E, no bias: W_Q seeded 11, W_K seeded 12 or the same W_Q, W_V and W_O the
// identity (the output is the weighted mean of the words' vectors). The trace gives the scores
// scale·q·k (1, L, L) and the weights.

const identity = (e) => Array.from({ length: e }, (_, i) => Array.from({ length: e }, (_, j) => (i === j ? 1 : 0)));

export function tiedBody(x, tied) {
  const wq = seededWeight(DEMO_E, 11);
  return {
    query: x, need_weights: 'per_head', trace: true, outputs: ['weights', 'trace'],
    params: {
      num_heads: 1, q_proj_weight: wq, k_proj_weight: tied ? wq : seededWeight(DEMO_E, 12),
      v_proj_weight: identity(DEMO_E), 'out_proj.weight': identity(DEMO_E),
    },
  };
}

let result = null; // {key, tied, words, scores, weights, asym, diag}
let seq = 0;

const flat = (a) => Float32Array.from(a.flat(Infinity).map(Number));

// Asks the API for the sentence of view v with the projections apart or tied (the switch).
export async function runTied() {
  const v = view;
  if (!v || !v.words) return;
  const tied = $('tied-switch').checked, mine = ++seq;
  const { words, x } = sentenceVectors(v);
  $('tied-run').disabled = true;
  try {
    const body = tiedBody(x, tied);
    const r = await post('v1/attention', body);
    if (mine !== seq) return;
    setCalls('tied', [{ path: 'v1/attention', body }]);
    const n = words.length, scores = flat(r.trace.scores), weights = flat(r.weights);
    let asym = 0, diag = 0;
    for (let i = 0; i < n; i++) {
      let best = 0;
      for (let j = 0; j < n; j++) {
        asym = Math.max(asym, Math.abs(scores[i * n + j] - scores[j * n + i]));
        if (weights[i * n + j] > weights[i * n + best]) best = j;
      }
      if (best === i) diag++;
    }
    result = { key: JSON.stringify(words), tied, words, scores, weights, asym, diag };
    hideError($('tied-error'));
  } catch (e) {
    if (mine !== seq) return;
    result = null;
    showError($('tied-error'), e, 'think.error');
  } finally {
    if (mine === seq) $('tied-run').disabled = false;
  }
  drawTied(v);
}

export function drawTied(v) {
  if (!v.words) return;
  const { words } = sentenceVectors(v);
  const cur = result && result.key === JSON.stringify(words) ? result : null;
  const res = $('tied-result');
  res.hidden = !cur;
  if (!cur) return;
  res.dataset.tied = cur.tied ? '1' : '0';
  res.dataset.asym = String(cur.asym);
  res.dataset.diag = String(cur.diag);
  res.dataset.n = String(seq);
  const n = words.length, cell = Math.max(10, Math.min(22, Math.floor(260 / n)));
  drawMatrix($('tied-scores'), cur.scores, n, cell, { mode: 'scores', labels: words });
  drawMatrix($('tied-weights'), cur.weights, n, cell, { mode: 'weights', labels: words, diagonal: true });
  $('tied-caption-scores').textContent = t(cur.tied ? 'tied.scores.on' : 'tied.scores.off');
  $('tied-caption-weights').textContent = t('tied.weights');
  $('tied-verdict').textContent = t(cur.tied ? 'tied.verdict.on' : 'tied.verdict.off', {
    asym: cur.asym.toPrecision(2), diag: cur.diag, n,
  });
  $('tied-switch').checked = cur.tied;
}
