// A run's request: the input a preset or the controls describe, the request(s) it makes to the
// API, and the view model, what every view draws, from the response.

import { isSentence, models, paramsChoice, state, t, vocabModel } from './state.js';
import { gaussianMatrix, randomMatrix } from './numbers.js';
import { f32Tensor, readTensor } from './tensors.js';
import { PageError, post } from './api.js';
import { meanOf } from './maps.js';
import { fetchTrace, traceBody } from './trace.js';

// A run is large, and asks the API for each row's top-k weights in base64, above DENSE_LIMIT
// weights for a sentence, and for embeddings above DENSE_NUMBERS numbers in the reply (weights
// per head and the output, about 10 bytes each in JSON: within the 256 KiB a page of a class
// receives at most). A large run's reply carries its weights alone, each entry an int32 index and
// a float32 value (8 bytes, 4/3 of it on the wire): per head and for the mean, k is what fits
// REPLY_WEIGHTS_BYTES, AUTO_TOP_K at most.
const DENSE_LIMIT = 1 << 20;
const DENSE_NUMBERS = 20000;
const AUTO_TOP_K = 16;
const REPLY_WEIGHTS_BYTES = 192 * 1024;

// ---- Inputs -------------------------------------------------------------------------------

// Returns {mode: 'sdpa', tokens, q, k, v, scale?}, {mode: 'mha', tokens, x, seed?} or, for a
// sentence, {mode: 'words', text, model}. seed: x is the API's seeded tensor of that seed
// (numbers.js makes the same values), which a large run sends in its place.
export function buildInput() {
  if (isSentence(state.preset)) {
    const model = vocabModel();
    if (!model) throw new PageError('err.novocab');
    if (!state.text.trim()) throw new PageError('err.text_empty');
    return { mode: 'words', text: state.text, model };
  }
  switch (state.preset) {
  case 'a':
    return {
      mode: 'sdpa', tokens: ['token 0', 'token 1', 'token 2', 'token 3'],
      q: [[1, 1], [0, 1], [1, 0], [0.5, 0.5]], k: [[1, 1], [0, 1], [1, 0], [0.5, 0.5]],
      v: [[1, 0], [0, 1], [1, 1], [0.5, 0.5]],
    };
  case 'b':
    // One query whose logits against the four keys are the chapter's [3.0 0.5 -1.0 2.0]:
    // q = [1], the keys hold the logits, scale 1; V = I so the output equals the weights.
    return {
      mode: 'sdpa', qTokens: [t('tok.query')], tokens: [t('tok.key', { i: 0 }), t('tok.key', { i: 1 }), '<pad>', '<pad>'], scale: 1,
      q: [[1]], k: [[3.0], [0.5], [-1.0], [2.0]], v: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]],
    };
  case 'dk': {
    // d_k = 64 with q, k and v of variance 1, the chapter's assumption for √d_k (第 5 章 2.3):
    // q·k then has variance 64, and without ÷ √d_k the softmax is nearly one-hot.
    const [q, k, v] = [1, 2, 3].map((seed) => gaussianMatrix(8, 64, seed));
    return { mode: 'sdpa', tokens: Array.from({ length: 8 }, (_, i) => `token ${i}`), q, k, v };
  }
  case 'd': {
    const e = 96;
    return { mode: 'mha', tokens: Array.from({ length: 512 }, (_, i) => `t${i}`), x: randomMatrix(512, e, 512), seed: 512 };
  }
  case 'random': {
    const e = embedWidth(state.randE);
    return {
      mode: 'mha', tokens: Array.from({ length: state.randL }, (_, i) => `t${i}`),
      x: randomMatrix(state.randL, e, state.randSeed), seed: state.randSeed,
    };
  }
  default: {
    let j;
    try { j = JSON.parse(state.custom); } catch (e) { throw new PageError('err.json_parse', {}, e.message); }
    if (!j || typeof j !== 'object') throw new PageError('err.json_object');
    if ('q' in j) {
      const n = j.q.length, s = j.k ? j.k.length : 0;
      return {
        mode: 'sdpa', q: j.q, k: j.k, v: j.v, scale: j.scale,
        qTokens: j.query_tokens || j.tokens || Array.from({ length: n }, (_, i) => `q${i}`),
        tokens: j.key_tokens || j.tokens || Array.from({ length: s }, (_, i) => `k${i}`),
      };
    }
    if (!Array.isArray(j.embeddings)) throw new PageError('err.json_fields');
    const tokens = j.tokens || j.embeddings.map((_, i) => `t${i}`);
    if (tokens.length !== j.embeddings.length) throw new PageError('err.json_labels', { n: tokens.length, m: j.embeddings.length });
    return { mode: 'mha', tokens, x: j.embeddings };
  }
  }
}

// The embedding width a preset should use: the model's when a server model is chosen.
function embedWidth(dflt) {
  const p = paramsChoice();
  if (p.kind === 'model' && models) {
    const m = models.models.find((mm) => mm.name === p.name);
    if (m) return m.embed_dim;
  }
  return dflt;
}

// ---- Requests -----------------------------------------------------------------------------

// Adds the causal and padding options; key_lengths holds one length for the batch of one. s is
// the number of keys, or null when only the API knows it (a sentence's words).
function maskOptions(body, s) {
  if (state.causal !== 'off') body.causal = state.causal;
  if (state.keyLength !== '') {
    const kl = Number(state.keyLength);
    if (!(Number.isInteger(kl) && kl >= 0 && (s === null || kl <= s))) throw new PageError(s === null ? 'err.keys_words' : 'err.keys', { s });
    body.key_lengths = [kl];
  }
}

// Builds the request(s), calls the API and returns the view model.
export async function compute(input) {
  if (input.mode === 'sdpa') {
    const l = input.q.length, s = input.k.length;
    // Leading dims (N=1, H=1) so that key_lengths may be given.
    const body = { q: [[input.q]], k: [[input.k]], v: [[input.v]], need_weights: true };
    if (input.scale !== undefined) body.scale = input.scale;
    maskOptions(body, s);
    const t0 = performance.now();
    const r = await post('v1/sdpa', body);
    const out = readTensor(r.output), w = readTensor(r.weights);
    const v = {
      mode: 'sdpa', request: { path: '/v1/sdpa', body }, response: r, ms: performance.now() - t0, usage: r.usage,
      qTokens: input.qTokens || input.tokens, kTokens: input.tokens, l, s, h: 1, start: -1,
      heads: [w.data], mean: null, topk: null, output: out, input, dv: input.v[0].length,
      dk: input.q[0].length, scale: input.scale !== undefined ? input.scale : 1 / Math.sqrt(input.q[0].length),
    };
    await addTrace(v, '/v1/sdpa', body);
    return v;
  }
  const words = input.mode === 'words';
  const p = words ? { kind: 'model', name: input.model } : paramsChoice();
  const model = p.kind === 'model' && models ? models.models.find((m) => m.name === p.name) : null;
  const heads = model ? model.num_heads : p.heads;
  // A text of n characters has at most n words: its L is known only from the response.
  const lMax = words ? [...input.text].length : input.x.length;
  const big = words ? lMax * lMax * heads > DENSE_LIMIT : lMax * lMax * heads + lMax * input.x[0].length > DENSE_NUMBERS;
  const body = {};
  if (words) {
    body.model = p.name;
    body.text = input.text;
  } else {
    const e = input.x[0].length;
    if (!big) body.query = input.x;
    else if (input.seed !== undefined) body.query = { init: 'uniform', seed: input.seed, shape: [lMax, e] };
    else body.query = f32Tensor(Float32Array.from(input.x.flat()), [lMax, e]);
    if (p.kind === 'model') body.model = p.name;
    else body.params = p.init === 'random' ? { init: 'random', seed: p.seed, num_heads: p.heads } : { init: 'identity', num_heads: p.heads };
  }
  maskOptions(body, words ? null : lMax);
  if (big) body.encoding = 'base64';
  const reqs = [];
  const want = state.weights;
  const fit = (rows) => Math.max(1, Math.min(AUTO_TOP_K, lMax, Math.floor(REPLY_WEIGHTS_BYTES / (rows * 8 * 4 / 3))));
  const k = big ? fit(lMax) : 0, kHead = big ? fit(heads * lMax) : 0;
  // (The output table is drawn for up to 20 tokens: beyond, the reply need not carry it.)
  const withW = (mode, kk) => Object.assign({}, body, { need_weights: mode }, kk ? { weights_top_k: kk } : {},
    kk && lMax > 20 ? { outputs: ['weights'] } : {});
  if (want === 'per_head') reqs.push(withW('per_head', kHead));
  if (want === 'mean' || k) reqs.push(withW('mean', k));
  const t0 = performance.now();
  const res = await Promise.all(reqs.map((b) => post('v1/attention', b)));
  const ms = performance.now() - t0;
  const r0 = res[0];
  const h = r0.num_heads;
  // A sentence's words are the API's: the text as the model's vocabulary split it.
  const tokens = words ? r0.tokens : input.tokens;
  const l = tokens.length, e = r0.shape.E;
  const v = { mode: 'mha', request: { path: '/v1/attention', body: reqs[0] }, response: r0, ms, usage: r0.usage,
    tokens, start: -1, l, s: l, h, heads: null, mean: null, topk: (want === 'per_head' ? kHead : k) || null, topkMean: k || null,
    output: r0.output ? readTensor(r0.output) : null, input, params: p, e, dk: e / h, scale: 1 / Math.sqrt(e / h),
    words, model: p.kind === 'model' ? p.name : null, headNames: r0.head_names || null };
  const split = (w) => { // (H, L, X) or (L, X) flat -> per map
    const t = readTensor(w);
    const per = t.shape.length === 3 ? t.shape[0] : 1, size = t.data.length / per;
    return Array.from({ length: per }, (_, i) => t.data.subarray(i * size, (i + 1) * size));
  };
  const sparse = (w, kk) => {
    const idx = split(w.indices), val = split(w.values);
    return idx.map((ix, i) => ({ idx: ix, val: val[i], k: kk }));
  };
  if (want === 'per_head') v.heads = k ? sparse(r0.weights, kHead) : split(r0.weights);
  const rm = res[want === 'per_head' ? 1 : 0];
  if (rm) v.mean = (k ? sparse(rm.weights, k) : split(rm.weights))[0];
  else if (v.heads) v.mean = meanOf(v.heads, l * l);
  // The model's start token, first among a sentence's words (the API prepends it): its label is
  // the page's (〈始〉 / 〈s〉), so the labels are read in the page's language when drawn.
  if (words && model && model.start_token && tokens[0] === model.start_token) v.start = 0;
  const label = (tok, j) => (j === v.start ? t('tok.start') : tok);
  for (const name of ['qTokens', 'kTokens']) {
    Object.defineProperty(v, name, { get: () => tokens.map(label), enumerable: true });
  }
  await addTrace(v, '/v1/attention', reqs[0]);
  return v;
}

// The run's trace (trace.js), when it is within the API's bound: v.trace, or v.traceError with
// the reason the API gave.
async function addTrace(v, path, body) {
  const b = traceBody(v, body);
  if (!b) return;
  try {
    v.trace = await fetchTrace(path.slice(1), b);
    v.traceRequest = { path, body: b };
  } catch (e) {
    v.traceError = e;
  }
}
