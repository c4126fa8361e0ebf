// attnd visualizer. Talks only to the public API v1 (POST /v1/attention, POST /v1/sdpa,
// GET /v1/models, GET /v1/models/{name}), so anything it shows another client could compute too.
//
// Legend: L query tokens, S key tokens, E embedding width, H heads, Dh = E / H the head width.
// Weight maps are kept per head as Float32Array(L * S) (dense) or as the top-k of every row
// ({idx: Int32Array(L * k), val: Float32Array(L * k), k}) when L is large.
//
// Every string it shows comes from i18n.js; canvases are drawn at the device's pixel ratio with
// fonts in rem, so "large font" enlarges what is drawn as well as the controls.

'use strict';

import { LANG_NAMES, STRINGS, pickLang, tr } from './i18n.js';

// ---- Constants ----------------------------------------------------------------------------

// The server's built-in "demo" model is api_model_init_random("demo", 64, 4, DEMO_SEED): the
// page regenerates its weights to show the step tables, and checks the result against the API.
const DEMO_SEED = 24301n;
const DENSE_LIMIT = 1 << 20; // above this many weights per request, ask the API for the top-k
const AUTO_TOP_K = 16;
const STEP_LIMIT = 16; // step tables for L, S <= 16

// The seed chapters' sentences (第 6 章), sent as text to a model with a vocabulary (the built-in
// lesson model), which splits them into its words.
const SENTENCES = {
  c1: '程序员把服务器日志发给同事，因为它记录了错误原因。',
  c2: '小李把笔记本放进背包，因为它太重了。',
  c3: '小王昨天提交了补丁，因为他发现缓存模块在高并发下会返回旧数据。',
  c4: '张工把配置文件发给测试同学，因为它包含新的开关。',
  c5: 'Redis 是一个内存数据库。',
};
const LESSON_MODEL = 'lesson';
const PRONOUNS = ['它', '他', '她', '它们', '他们', '她们'];
const isSentence = (p) => p in SENTENCES || p === 'text';
// A word with a letter or a digit in it; the others are punctuation.
const isWordToken = (s) => /[\p{L}\p{N}]/u.test(s);

const $ = (id) => document.getElementById(id);

// ---- Deterministic numbers ----------------------------------------------------------------

const MASK64 = (1n << 64n) - 1n;

// splitmix64: the stream api_model_init_random uses.
function splitmix64(seed) {
  let x = BigInt.asUintN(64, BigInt(seed));
  return () => {
    x = (x + 0x9E3779B97F4A7C15n) & MASK64;
    let z = x;
    z = ((z ^ (z >> 30n)) * 0xBF58476D1CE4E5B9n) & MASK64;
    z = ((z ^ (z >> 27n)) * 0x94D049BB133111EBn) & MASK64;
    return z ^ (z >> 31n);
  };
}

// Uniform float32 in [-a, a) from a splitmix64 stream, as api.h documents.
function uniformStream(seed) {
  const next = splitmix64(seed);
  return (a) => Math.fround(a * (2 * (Number(next() >> 40n) / 16777216) - 1));
}

function randomMatrix(rows, cols, seed) {
  const u = uniformStream(BigInt(seed));
  return Array.from({ length: rows }, () => Array.from({ length: cols }, () => u(1)));
}

// ---- Small linear algebra (step tables only; L <= 16) -------------------------------------

// x (n, k) times w^T with w (m, k), plus b (m): the y = x W^T + b of nn.Linear.
function linear(x, w, b) {
  return x.map((row) => w.map((wr, o) => wr.reduce((s, v, c) => s + v * row[c], b ? b[o] : 0)));
}

function matmulT(a, b) { // a (n, k) b (m, k) -> (n, m)
  return a.map((ra) => b.map((rb) => ra.reduce((s, v, c) => s + v * rb[c], 0)));
}

function matmul(a, b) { // a (n, k) b (k, m) -> (n, m)
  return a.map((ra) => b[0].map((_, j) => ra.reduce((s, v, c) => s + v * b[c][j], 0)));
}

const cols = (m, c0, c1) => m.map((r) => r.slice(c0, c1));

// The parameters of a model the page can regenerate (demo, init random, init identity), as
// PyTorch state_dict arrays; null when it cannot (a model loaded from a file).
function knownParams(p, e) {
  if (p.kind === 'init' && p.init === 'identity') {
    const eye = Array.from({ length: e }, (_, i) => Array.from({ length: e }, (_, j) => +(i === j)));
    return { win: [...eye, ...eye, ...eye], bin: null, wout: eye, bout: null };
  }
  let seed;
  if (p.kind === 'init' && p.init === 'random') seed = BigInt(p.seed);
  else if (p.kind === 'model' && p.name === 'demo' && e === 64) seed = DEMO_SEED;
  else return null;
  const u = uniformStream(seed);
  const aIn = Math.sqrt(6 / (e + 3 * e)), aOut = Math.sqrt(6 / (e + e));
  const win = Array.from({ length: 3 * e }, () => Array.from({ length: e }, () => u(aIn)));
  const wout = Array.from({ length: e }, () => Array.from({ length: e }, () => u(aOut)));
  return { win, bin: null, wout, bout: null };
}

// ---- Tensors from the API -----------------------------------------------------------------

function b64ToBytes(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function bytesToB64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

function f32Tensor(flat, shape) {
  return { dtype: 'float32', shape, data: bytesToB64(new Uint8Array(flat.buffer, flat.byteOffset, flat.byteLength)) };
}

// A response tensor (nested arrays or a base64 object) as {shape, data} with flat typed data.
function readTensor(t) {
  if (Array.isArray(t)) {
    const shape = [];
    for (let x = t; Array.isArray(x); x = x[0]) shape.push(x.length);
    return { shape, data: Float32Array.from(t.flat(Infinity)) };
  }
  const bytes = b64ToBytes(t.data);
  const Ctor = t.dtype === 'int32' ? Int32Array : Float32Array;
  return { shape: t.shape, data: new Ctor(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4) };
}

// ---- State and URL ------------------------------------------------------------------------

// The experiments' settings (a sentence's only): e1q the query word of 实验一 (-1: the default,
// its pronoun), e1g its guess as "key:weight,…" over the candidate keys, e1 whether it is
// compared; e3t the position t of 实验三 (-1: the default), e3w the replacement word, e3 what has
// been run (0 nothing, 1 causal on, 2 on and off).
const EXP_DEFAULTS = { e1q: -1, e1g: '', e1: false, e3t: -1, e3w: '', e3: 0 };

const state = {
  preset: 'a', causal: 'off', keyLength: '', weights: 'per_head', filter: 'none', filterValue: 0.1,
  params: 'model:demo', heads: 4, seed: 7, randL: 8, randE: 16, randSeed: 1, custom: '', head: 0,
  large: false, lang: 'en', text: '', ...EXP_DEFAULTS,
};
let models = null;   // GET /v1/models
let view = null;     // the last result: what every view draws
let runSeq = 0;

const URL_KEYS = {
  preset: 'p', causal: 'causal', keyLength: 'klen', weights: 'w', filter: 'f', filterValue: 'fv',
  params: 'params', heads: 'h', seed: 'seed', randL: 'L', randE: 'E', randSeed: 'rseed', custom: 'json',
  head: 'head', large: 'large', lang: 'lang', text: 'text',
  e1q: 'e1q', e1g: 'e1g', e1: 'e1', e3t: 'e3t', e3w: 'e3w', e3: 'e3',
};
const SENTENCE_KEYS = ['text', ...Object.keys(EXP_DEFAULTS)];

// The string of key in the page's language (i18n.js).
const t = (key, params) => tr(state.lang, key, params);

function readUrl() {
  const q = new URLSearchParams(location.search);
  state.lang = pickLang(q.get('lang'), navigator.languages);
  for (const [k, u] of Object.entries(URL_KEYS)) {
    if (!q.has(u) || k === 'lang') continue;
    const v = q.get(u);
    if (k === 'head') state.head = v === 'mean' ? 'mean' : Math.max(0, Math.floor(Number(v)) || 0);
    else if (typeof state[k] === 'number') state[k] = Number.isFinite(Number(v)) ? Number(v) : state[k];
    else if (typeof state[k] === 'boolean') state[k] = v === '1';
    else state[k] = v;
  }
  if (isSentence(state.preset)) {
    if (!q.has(URL_KEYS.text)) state.text = SENTENCES[state.preset] || '';
    state.preset = presetOfText(state.text);
  }
  return q.has('p');
}

// The preset whose sentence text is, else 'text' (a sentence of one's own).
function presetOfText(text) {
  return Object.keys(SENTENCES).find((k) => SENTENCES[k] === text) || 'text';
}

function writeUrl() {
  const q = new URLSearchParams(location.search);
  for (const [k, u] of Object.entries(URL_KEYS)) {
    const v = state[k];
    if (k === 'custom' && state.preset !== 'custom') { q.delete(u); continue; }
    if (['randL', 'randE', 'randSeed'].includes(k) && state.preset !== 'random') { q.delete(u); continue; }
    // A sentence's text and experiments; an experiment's setting only once it is not the default.
    if (SENTENCE_KEYS.includes(k) && (!isSentence(state.preset) || (k in EXP_DEFAULTS && v === EXP_DEFAULTS[k]))) {
      q.delete(u);
      continue;
    }
    q.set(u, typeof v === 'boolean' ? (v ? '1' : '0') : String(v));
  }
  history.replaceState(null, '', `${location.pathname}?${q}`);
}

function apiBase() {
  const api = new URLSearchParams(location.search).get('api');
  return api ? new URL(api.endsWith('/') ? api : api + '/') : new URL('.', location.href);
}

// ---- Controls -----------------------------------------------------------------------------

function syncControls() {
  if (isSentence(state.preset)) { // a sentence goes to a model with a vocabulary
    const m = vocabModel();
    if (m) state.params = `model:${m}`;
  }
  $('preset').value = state.preset;
  $('causal').value = state.causal;
  $('key-length').value = state.keyLength;
  $('weights-mode').value = state.weights;
  $('filter-kind').value = state.filter;
  $('filter-value').value = state.filterValue;
  $('num-heads').value = state.heads;
  $('init-seed').value = state.seed;
  $('rand-l').value = state.randL;
  $('rand-e').value = state.randE;
  $('rand-seed').value = state.randSeed;
  $('custom-json').value = state.custom;
  if ($('text').value !== state.text) $('text').value = state.text;
  $('large-font').checked = state.large;
  renderModelOptions();
  document.documentElement.classList.toggle('large', state.large);
  $('text-opts').hidden = !isSentence(state.preset);
  $('random-opts').hidden = state.preset !== 'random';
  $('custom-opts').hidden = state.preset !== 'custom';
  $('filter-value-label').hidden = state.filter === 'none';
  $('filter-value-name').textContent = t(state.filter === 'topk' ? 'filter.value.topk' : 'filter.value.threshold');
  const sdpa = isSdpa();
  $('params-section').hidden = sdpa;
  $('num-heads').disabled = state.params.startsWith('model:');
  $('init-seed').disabled = state.params !== 'init:random';
}

function readControls() {
  state.causal = $('causal').value;
  state.keyLength = $('key-length').value.trim();
  state.weights = $('weights-mode').value;
  state.filter = $('filter-kind').value;
  state.filterValue = Number($('filter-value').value) || 0;
  state.params = $('params-kind').value || state.params;
  state.heads = Math.max(1, Math.floor(Number($('num-heads').value) || 1));
  state.seed = Math.max(0, Math.floor(Number($('init-seed').value) || 0));
  state.randL = Math.max(1, Math.floor(Number($('rand-l').value) || 1));
  state.randE = Math.max(1, Math.floor(Number($('rand-e').value) || 1));
  state.randSeed = Math.max(0, Math.floor(Number($('rand-seed').value) || 0));
  state.custom = $('custom-json').value;
  state.large = $('large-font').checked;
  if (isSentence(state.preset)) {
    const text = $('text').value;
    if (text !== state.text) Object.assign(state, { text }, EXP_DEFAULTS);
    state.preset = presetOfText(text);
  }
}

// Presets fill the controls; the inputs themselves are built by buildInput.
function applyPreset(p) {
  const from = state.preset;
  state.preset = p;
  state.head = 0;
  if (p === 'a') Object.assign(state, { causal: 'off', keyLength: '' });
  if (p === 'b') Object.assign(state, { causal: 'off', keyLength: '2' });
  if (isSentence(p)) {
    // A preset's sentence; "your own sentence" starts from the sentence shown, if any.
    if (p in SENTENCES) state.text = SENTENCES[p];
    else if (!state.text) state.text = $('text').value || SENTENCES.c1;
    const m = vocabModel();
    Object.assign(state, { causal: 'off', keyLength: '' }, m ? { params: `model:${m}` } : {}, EXP_DEFAULTS);
  } else if (isSentence(from) && models && models.default) {
    state.params = `model:${models.default}`; // embeddings again: back to the default model
  }
  if (p === 'd') Object.assign(state, { params: 'init:random', heads: 12, seed: 7, causal: 'off', keyLength: '' });
}

function isSdpa() {
  if (state.preset === 'a' || state.preset === 'b') return true;
  if (state.preset !== 'custom') return false;
  try { return 'q' in JSON.parse(state.custom); } catch { return false; }
}

// The name of the model a sentence goes to: the chosen one when it has a vocabulary, else the
// lesson model, else the first model with a vocabulary (null when there is none).
function vocabModel() {
  const list = models ? models.models.filter((m) => m.vocab_size > 0) : [];
  const chosen = state.params.startsWith('model:') ? state.params.slice(6) : null;
  if (list.some((m) => m.name === chosen)) return chosen;
  if (list.some((m) => m.name === LESSON_MODEL)) return LESSON_MODEL;
  return list.length ? list[0].name : (models && models.models.length ? null : LESSON_MODEL);
}

function paramsChoice() {
  const [kind, rest] = state.params.split(':');
  if (kind === 'model') return { kind: 'model', name: rest };
  return rest === 'random' ? { kind: 'init', init: 'random', seed: state.seed, heads: state.heads }
    : { kind: 'init', init: 'identity', heads: state.heads };
}

// ---- Inputs -------------------------------------------------------------------------------

// Returns {mode: 'sdpa', tokens, q, k, v, scale?}, {mode: 'mha', tokens, x} or, for a sentence,
// {mode: 'words', text, model}.
function buildInput() {
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
  case 'd': {
    const e = 96;
    return { mode: 'mha', tokens: Array.from({ length: 512 }, (_, i) => `t${i}`), x: randomMatrix(512, e, 512) };
  }
  case 'random': {
    const e = embedWidth(state.randE);
    return {
      mode: 'mha', tokens: Array.from({ length: state.randL }, (_, i) => `t${i}`),
      x: randomMatrix(state.randL, e, state.randSeed),
    };
  }
  default: {
    let j;
    try { j = JSON.parse(state.custom); } catch (e) { throw new PageError('err.json_parse', { msg: e.message }); }
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

// An error of the page itself, shown in the page's language: a string key and its parameters.
class PageError extends Error {
  constructor(key, params = {}) {
    super(key);
    this.key = key;
    this.params = params;
  }
}

// An error the API answered: its English message is shown as it is, under a line in the page's
// language (err.api_lead, or for an unknown word err.unknown_word). field and detail are the
// error's field and message as the API sent them.
class ApiError extends Error {
  constructor(status, code, text, field = null, detail = '') {
    super(text);
    this.status = status;
    this.code = code;
    this.field = field;
    this.detail = detail;
    this.model = null; // the model a sentence went to, set by its caller
  }
}

// The unknown word of an unknown_token error, read from its field and message: {word, at} for
// text (at: the offset in characters, from 0) or {word, i} for tokens[i]; null when they do not
// say.
function unknownWord(e) {
  if (!(e instanceof ApiError) || e.code !== 'unknown_token') return null;
  const m = /^"(.*?)(?:\.\.\.)?" at character (\d+) of text /.exec(e.detail);
  if (e.field === 'text' && m) return { word: m[1], at: Number(m[2]) };
  const f = /^tokens\[(\d+)\]$/.exec(e.field || ''), w = /^tokens\[\d+\] "(.*?)" is not /.exec(e.detail);
  if (f && w) return { word: w[1], i: Number(f[1]) };
  return null;
}

async function post(path, body) {
  let res;
  try {
    res = await fetch(new URL(path, apiBase()), {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    });
  } catch (e) {
    throw new PageError('err.network', { msg: e.message });
  }
  let j = null;
  try { j = await res.json(); } catch { /* not JSON */ }
  if (!res.ok) {
    const e = j && j.error;
    throw new ApiError(res.status, e ? e.code : res.statusText,
      e ? `${res.status} ${e.code}: ${e.message}${e.field ? ` (field ${e.field})` : ''}` : `${res.status} ${res.statusText}`,
      e ? e.field : null, e ? String(e.message) : '');
  }
  return j;
}

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
async function compute(input) {
  if (input.mode === 'sdpa') {
    const l = input.q.length, s = input.k.length;
    // Leading dims (N=1, H=1) so that key_lengths may be given.
    const body = { q: [[input.q]], k: [[input.k]], v: [[input.v]], need_weights: true };
    if (input.scale !== undefined) body.scale = input.scale;
    maskOptions(body, s);
    const t0 = performance.now();
    const r = await post('v1/sdpa', body);
    const out = readTensor(r.output), w = readTensor(r.weights);
    return {
      mode: 'sdpa', request: { path: '/v1/sdpa', body }, ms: performance.now() - t0, usage: r.usage,
      qTokens: input.qTokens || input.tokens, kTokens: input.tokens, l, s, h: 1,
      heads: [w.data], mean: null, topk: null, output: out, input,
      dk: input.q[0].length, scale: input.scale !== undefined ? input.scale : 1 / Math.sqrt(input.q[0].length),
    };
  }
  const words = input.mode === 'words';
  const p = words ? { kind: 'model', name: input.model } : paramsChoice();
  const model = p.kind === 'model' && models ? models.models.find((m) => m.name === p.name) : null;
  const heads = model ? model.num_heads : p.heads;
  // A text of n characters has at most n words: its L is known only from the response.
  const lMax = words ? [...input.text].length : input.x.length;
  const big = lMax * lMax * heads > DENSE_LIMIT;
  const body = {};
  if (words) {
    body.model = p.name;
    body.text = input.text;
  } else {
    const e = input.x[0].length;
    body.query = big ? f32Tensor(Float32Array.from(input.x.flat()), [lMax, e]) : input.x;
    if (p.kind === 'model') body.model = p.name;
    else body.params = p.init === 'random' ? { init: 'random', seed: p.seed, num_heads: p.heads } : { init: 'identity', num_heads: p.heads };
  }
  maskOptions(body, words ? null : lMax);
  if (big) body.encoding = 'base64';
  const reqs = [];
  const want = state.weights;
  const k = big ? Math.min(AUTO_TOP_K, lMax) : 0;
  const withW = (mode) => Object.assign({}, body, { need_weights: mode }, k ? { weights_top_k: k } : {});
  if (want === 'per_head') reqs.push(withW('per_head'));
  if (want === 'mean' || k) reqs.push(withW('mean'));
  const t0 = performance.now();
  const res = await Promise.all(reqs.map((b) => post('v1/attention', b)));
  const ms = performance.now() - t0;
  const r0 = res[0];
  const h = r0.num_heads;
  // A sentence's words are the API's: the text as the model's vocabulary split it.
  const tokens = words ? r0.tokens : input.tokens;
  const l = tokens.length, e = r0.shape.E;
  const v = { mode: 'mha', request: { path: '/v1/attention', body: reqs[0] }, ms, usage: r0.usage,
    qTokens: tokens, kTokens: tokens, l, s: l, h, heads: null, mean: null, topk: k || null,
    output: readTensor(r0.output), input, params: p, e, dk: e / h, scale: 1 / Math.sqrt(e / h),
    words, model: p.kind === 'model' ? p.name : null, headNames: r0.head_names || null };
  const split = (w) => { // (H, L, X) or (L, X) flat -> per map
    const t = readTensor(w);
    const per = t.shape.length === 3 ? t.shape[0] : 1, size = t.data.length / per;
    return Array.from({ length: per }, (_, i) => t.data.subarray(i * size, (i + 1) * size));
  };
  const sparse = (w) => {
    const idx = split(w.indices), val = split(w.values);
    return idx.map((ix, i) => ({ idx: ix, val: val[i], k }));
  };
  if (want === 'per_head') v.heads = k ? sparse(r0.weights) : split(r0.weights);
  const rm = res[want === 'per_head' ? 1 : 0];
  if (rm) v.mean = (k ? sparse(rm.weights) : split(rm.weights))[0];
  else if (v.heads) v.mean = meanOf(v.heads, l * l);
  return v;
}

function meanOf(heads, n) {
  const m = new Float32Array(n);
  for (const w of heads) for (let i = 0; i < n; i++) m[i] += w[i];
  for (let i = 0; i < n; i++) m[i] /= heads.length;
  return m;
}

// ---- Masks and filters --------------------------------------------------------------------

// The first masked key of query row i (S when none is): with the causal and padding masks, the
// masked keys of a row are always the run from there to the end.
function maskStart(v, i) {
  let m = v.s;
  if (state.causal === 'top_left') m = Math.min(m, i + 1);
  if (state.causal === 'bottom_right') m = Math.min(m, Math.max(0, i + v.s - v.l + 1));
  if (state.keyLength !== '') m = Math.min(m, Number(state.keyLength));
  return m;
}

const isMasked = (v, i, j) => j >= maskStart(v, i);

// Dense row i of a map (Float32Array or top-k) into out (length S).
function rowOf(map, v, i, out) {
  if (map instanceof Float32Array) {
    out.set(map.subarray(i * v.s, (i + 1) * v.s));
  } else {
    out.fill(0);
    for (let r = 0; r < map.k; r++) out[map.idx[i * map.k + r]] = map.val[i * map.k + r];
  }
  return out;
}

// Which cells of a row pass the filter.
function passes(row) {
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

// ---- Colours ------------------------------------------------------------------------------

// A perceptual sequential scale from near-white (0) to deep blue-violet (1).
const STOPS = [[247, 251, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107], [37, 0, 70]];
function colour(x) {
  x = Math.min(1, Math.max(0, x)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(x)), f = x - i;
  return STOPS[i].map((c, k) => Math.round(c + (STOPS[i + 1][k] - c) * f));
}
const rgb = (c) => `rgb(${c[0]},${c[1]},${c[2]})`;

// Masked cells: dark diagonal stripes on a mid grey (mean about 150 of 255), so that on a
// washed-out projector they stay far from the near-white of weight 0 and, being grey and
// striped, apart from the scale's blues. The legend's swatch in style.css matches.
const MASK_BG = [190, 190, 190], MASK_STRIPE = [64, 64, 64];
const MASK_TILE = 8; // CSS px between stripes, along x

// The stripes as a pattern in CSS px for a context scaled by the device pixel ratio.
function maskPattern(ctx) {
  const dpr = window.devicePixelRatio || 1;
  const tile = document.createElement('canvas');
  tile.width = tile.height = Math.round(MASK_TILE * dpr);
  const c = tile.getContext('2d');
  c.scale(tile.width / MASK_TILE, tile.height / MASK_TILE);
  c.fillStyle = rgb(MASK_BG);
  c.fillRect(0, 0, MASK_TILE, MASK_TILE);
  c.strokeStyle = rgb(MASK_STRIPE);
  c.lineWidth = 2;
  c.beginPath();
  for (const o of [-MASK_TILE, 0, MASK_TILE]) { c.moveTo(o, MASK_TILE); c.lineTo(o + MASK_TILE, 0); }
  c.stroke();
  const pat = ctx.createPattern(tile, 'repeat');
  pat.setTransform(new DOMMatrix().scale(MASK_TILE / tile.width));
  return pat;
}

function mapMax(map, v) {
  let m = 0;
  const row = new Float32Array(v.s);
  for (let i = 0; i < v.l; i++) { rowOf(map, v, i, row); for (const w of row) if (w > m) m = w; }
  return m || 1;
}

// The painted maps, one entry per map, valid while the filter and masks stay the same: the
// large view is redrawn on every mouse move, which must stay cheap for L = 512.
const painted = new WeakMap();

// Paints map into an offscreen canvas, one pixel per cell (masked cells in the mask's grey;
// drawHeat puts the stripes on top).
function paintMap(map, v) {
  const key = [state.filter, state.filterValue, state.causal, state.keyLength].join('|');
  const hit = painted.get(map);
  if (hit && hit.key === key) return hit;
  const c = document.createElement('canvas');
  c.width = v.s; c.height = v.l;
  const ctx = c.getContext('2d');
  const img = ctx.createImageData(v.s, v.l);
  const max = mapMax(map, v);
  const row = new Float32Array(v.s);
  for (let i = 0; i < v.l; i++) {
    rowOf(map, v, i, row);
    const keep = passes(Array.from(row));
    const m0 = maskStart(v, i);
    for (let j = 0; j < v.s; j++) {
      let c3;
      if (j >= m0) c3 = MASK_BG;
      else {
        c3 = colour(row[j] / max);
        if (!keep[j]) c3 = c3.map((x) => Math.round(x * 0.25 + 255 * 0.75));
      }
      const o = (i * v.s + j) * 4;
      img.data[o] = c3[0]; img.data[o + 1] = c3[1]; img.data[o + 2] = c3[2]; img.data[o + 3] = 255;
    }
  }
  ctx.putImageData(img, 0, 0);
  const out = { canvas: c, max, key };
  painted.set(map, out);
  return out;
}

// Draws map with its top-left cell at (x, y), cells cw x ch CSS px, masked cells striped.
function drawHeat(ctx, map, v, x, y, cw, ch) {
  const { canvas } = paintMap(map, v);
  ctx.imageSmoothingEnabled = cw < 1 || ch < 1; // average when shrinking, sharp cells otherwise
  ctx.drawImage(canvas, x, y, v.s * cw, v.l * ch);
  ctx.save();
  ctx.fillStyle = maskPattern(ctx);
  for (let i = 0; i < v.l; i++) { // a row's masked cells are one run at its end
    const m0 = maskStart(v, i);
    if (m0 < v.s) ctx.fillRect(x + m0 * cw, y + i * ch, (v.s - m0) * cw, ch);
  }
  ctx.restore();
}

// ---- Canvas helpers -----------------------------------------------------------------------

const rootPx = () => parseFloat(getComputedStyle(document.documentElement).fontSize);

// A canvas font in the page's own font family, so that canvases follow the page's fonts.
const canvasFont = (px) => `${px}px ${getComputedStyle(document.body).fontFamily}`;

// Sizes cv to w x h CSS px at the device pixel ratio; returns its context in CSS px.
function setupCanvas(cv, w, h) {
  const dpr = window.devicePixelRatio || 1;
  w = Math.ceil(w); h = Math.ceil(h);
  cv.width = Math.round(w * dpr); cv.height = Math.round(h * dpr);
  cv.style.width = `${w}px`; cv.style.height = `${h}px`;
  const ctx = cv.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

// ---- Views --------------------------------------------------------------------------------

function selectedMap(v) {
  if (state.head === 'mean' || !v.heads) return v.mean;
  return v.heads[Math.min(Number(state.head), v.heads.length - 1)];
}

// The name of head key ('0', '1', … or 'mean'): a model's head_names as the model spells them
// (data, not the page's text) with the table's gloss when it has one (headname.*), else 头 i /
// head i. Returns {name, data, gloss}.
function headLabel(v, key) {
  if (v.mode === 'sdpa' || !v.heads) return { name: t(v.mode === 'sdpa' ? 'large.weights' : 'head.mean'), data: false, gloss: '' };
  if (key === 'mean') return { name: t('head.mean'), data: false, gloss: '' };
  const named = v.headNames && v.headNames[Number(key)];
  if (!named) return { name: t('head.n', { i: key }), data: false, gloss: '' };
  const g = `headname.${named}`;
  return { name: named, data: true, gloss: g in STRINGS[state.lang] ? t(g) : '' };
}

// The name of head key as one string, for a sentence or an aria-label.
function headName(v, key) {
  const h = headLabel(v, key);
  return h.gloss ? t('head.glossed', { name: h.name, gloss: h.gloss }) : h.name;
}

// The name of head key as elements: the name (marked as data when it is the model's) and its
// gloss; on two lines when lines is set.
function headNameEl(v, key, lines = false) {
  const h = headLabel(v, key);
  const el = document.createElement('span');
  el.className = 'head-name';
  const n = document.createElement('span');
  n.className = 'name';
  n.textContent = h.name;
  if (h.data) n.dataset.i18nData = '';
  el.append(n);
  if (h.gloss) {
    const g = document.createElement('span');
    g.className = lines ? 'gloss block' : 'gloss';
    g.textContent = h.gloss;
    el.append(' ', g);
  }
  return el;
}

function drawGrid(v) {
  const grid = $('head-grid');
  grid.textContent = '';
  const entries = [];
  if (v.heads) v.heads.forEach((m, i) => entries.push([String(i), m]));
  if (v.mean && v.h > 1) entries.push(['mean', v.mean]);
  // Thumbnails show patterns, not text: smaller with large font, to leave the first screen to
  // the selected head's heatmap and its labels (and to the second line of a named head's gloss).
  const cell = (state.large ? 56 : 96) / Math.max(v.l, v.s);
  for (const [key, map] of entries) {
    const div = document.createElement('div');
    div.className = 'head-cell' + (String(state.head) === key ? ' selected' : '');
    div.dataset.head = key;
    div.dataset.testid = `head-${key}`;
    const cv = document.createElement('canvas');
    drawHeat(setupCanvas(cv, v.s * cell, v.l * cell), map, v, 0, 0, cell, cell);
    const cap = document.createElement('div');
    cap.append(headNameEl(v, key, true));
    div.append(cv, cap);
    div.addEventListener('click', () => { state.head = key; writeUrl(); drawViews(v); });
    grid.append(div);
  }
}

const LABEL_LIMIT = 64; // token labels up to this many tokens; beyond, positions as tick values
const NICE = [1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 200, 256, 500, 512, 1000, 1024, 2048, 4096];

// Where the large heatmap's parts go, in CSS px. The cells fill the width of the panel and the
// height left on the first screen (for L <= 16 with large font at 1024x768 the whole heatmap and
// its labels fit), at most 3 rem; with hundreds of tokens a cell may shrink to half a pixel.
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
  const rowW = rowText.map((x) => ctx.measureText(x).width);
  const colW = colText.map((x) => ctx.measureText(x).width);
  const labW = Math.ceil(Math.max(...rowW)) + 2 * pad;
  const maxColW = Math.max(...colW);

  const wrap = $('large-wrap');
  const availW = wrap.clientWidth;
  const reserve = $('scale').offsetHeight + rem * 1.4; // the legend and the panel's bottom
  const top = wrap.getBoundingClientRect().top + window.scrollY;
  let availH = window.innerHeight - top - reserve;
  // Below the first screen anyway (a narrow window stacks the controls first): fit one screen.
  if (availH < window.innerHeight * 0.35) availH = window.innerHeight - rem * 4 - reserve;

  const minRow = font * 1.25; // the spacing a row label needs, and an angled one across its text
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
    const colStride = ang ? stride(cell * sn, minRow) : stride(cell, maxColW + pad);
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

function drawLarge(v, hoverRow = -1) {
  const map = selectedMap(v);
  const { max } = paintMap(map, v);
  const cv = $('large');
  const key = state.head === 'mean' || !v.heads ? 'mean' : String(state.head);
  const name = headName(v, key);
  if (hoverRow < 0) { // a hover changes neither
    const title = $('large-title');
    title.textContent = '';
    title.append(headNameEl(v, key));
    for (const part of [t('large.max', { max: max.toFixed(3) })].concat(v.topk ? [t('large.topk', { k: v.topk })] : [])) {
      const s = document.createElement('span');
      s.textContent = part;
      title.append(' · ', s);
    }
    drawScale(max);
  }
  const g = largeLayout(v, cv.getContext('2d'));
  const { labW, labH, cell, font, pad } = g;
  const w = labW + v.s * cell + g.right + 2, h = labH + v.l * cell + 2;
  const ctx = setupCanvas(cv, w, h);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, w, h);
  drawHeat(ctx, map, v, labW, labH, cell, cell);
  ctx.fillStyle = '#1d2330';
  ctx.font = canvasFont(font);
  ctx.textBaseline = 'middle';
  ctx.textAlign = 'right';
  for (let i = 0; i < v.l; i += g.rowStride) ctx.fillText(g.rowText[i], labW - pad, labH + (i + 0.5) * cell);
  for (let j = 0; j < v.s; j += g.colStride) {
    const x = labW + (j + 0.5) * cell;
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
  // The drawing's own numbers, for the tests and for anyone inspecting the page.
  cv.dataset.geom = JSON.stringify({
    labW, labH, cell, width: w, height: h, dpr: window.devicePixelRatio || 1, font,
    angle: Math.round(g.ang * 180 / Math.PI), rowStride: g.rowStride, colStride: g.colStride,
  });
  cv.setAttribute('aria-label', t('large.aria', { name, l: v.l, s: v.s }));
}

function drawScale(max) {
  const el = $('scale');
  el.textContent = '';
  const c = document.createElement('canvas');
  c.width = 200; c.height = 1;
  const ctx = c.getContext('2d');
  for (let x = 0; x < 200; x++) { ctx.fillStyle = rgb(colour(x / 199)); ctx.fillRect(x, 0, 1, 1); }
  const lo = document.createElement('span'); lo.textContent = '0';
  const hi = document.createElement('span'); hi.textContent = max.toFixed(3);
  const hatch = document.createElement('span'); hatch.className = 'hatch';
  const hl = document.createElement('span'); hl.textContent = t('scale.masked');
  el.append(lo, c, hi, hatch, hl);
}

function largeCell(ev) {
  const v = view;
  if (!v || !largeGeom) return null;
  const cv = $('large'), r = cv.getBoundingClientRect();
  const x = ev.clientX - r.left, y = ev.clientY - r.top;
  const j = Math.floor((x - largeGeom.labW) / largeGeom.cell), i = Math.floor((y - largeGeom.labH) / largeGeom.cell);
  if (i < 0 || j < 0 || i >= v.l || j >= v.s) return null;
  return { i, j, px: x, py: y };
}

function onLargeMove(ev) {
  const c = largeCell(ev);
  const tip = $('tooltip');
  if (!c) { tip.hidden = true; drawLarge(view); return; }
  const v = view, row = rowOf(selectedMap(v), v, c.i, new Float32Array(v.s));
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
  drawLarge(v, c.i);
}

let lineHover = null;

function drawLines(v) {
  const cv = $('lines');
  const map = selectedMap(v);
  // Up to 64 tokens: a labelled row per token. Beyond: one pixel row each, and without a hovered
  // token only each query's strongest key, or the lines would merge into one blot.
  const labels = v.l <= LABEL_LIMIT && v.s <= LABEL_LIMIT;
  const font = rootPx() * 0.8;
  const rowH = labels ? Math.ceil(font * 1.5) : 1;
  const ctx0 = cv.getContext('2d');
  ctx0.font = canvasFont(font);
  const tw = labels ? Math.ceil(Math.max(...v.qTokens.concat(v.kTokens).map((s) => ctx0.measureText(s).width))) + 10 : 4;
  const gap = Math.max(60, Math.min(160, cv.parentElement.clientWidth - 2 * tw - 2));
  const w = tw * 2 + gap, h = Math.max(v.l, v.s) * rowH + 8;
  const ctx = setupCanvas(cv, w, h);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, w, h);
  const yl = (i) => 4 + (i + 0.5) * rowH;
  const row = new Float32Array(v.s);
  let max = 0;
  for (let i = 0; i < v.l; i++) { rowOf(map, v, i, row); for (const x of row) max = Math.max(max, x); }
  ctx.lineWidth = labels ? 2 : 1;
  for (let i = 0; i < v.l; i++) {
    if (lineHover && lineHover.side === 'q' && lineHover.i !== i) continue;
    rowOf(map, v, i, row);
    const keep = passes(Array.from(row));
    let best = -1;
    if (!labels && !lineHover) for (let j = 0; j < v.s; j++) if (best < 0 || row[j] > row[best]) best = j;
    for (let j = 0; j < v.s; j++) {
      if (lineHover && lineHover.side === 'k' && lineHover.i !== j) continue;
      if (best >= 0 && j !== best) continue;
      const x = row[j];
      if (!keep[j] || x <= 0 || isMasked(v, i, j)) continue;
      ctx.strokeStyle = `rgba(47, 95, 208, ${Math.min(1, x / (max || 1)).toFixed(3)})`;
      ctx.beginPath();
      ctx.moveTo(tw, yl(i));
      ctx.lineTo(tw + gap, yl(j));
      ctx.stroke();
    }
  }
  if (labels) {
    ctx.font = canvasFont(font);
    ctx.textBaseline = 'middle';
    v.qTokens.forEach((s, i) => {
      ctx.fillStyle = lineHover && lineHover.side === 'q' && lineHover.i === i ? '#2f5fd0' : '#1d2330';
      ctx.textAlign = 'right';
      ctx.fillText(s, tw - 6, yl(i));
    });
    v.kTokens.forEach((s, j) => {
      ctx.fillStyle = lineHover && lineHover.side === 'k' && lineHover.i === j ? '#2f5fd0' : '#1d2330';
      ctx.textAlign = 'left';
      ctx.fillText(s, tw + gap + 6, yl(j));
    });
  } else if (lineHover) {
    ctx.fillStyle = '#2f5fd0';
    ctx.fillRect(lineHover.side === 'q' ? 0 : tw + gap, yl(lineHover.i) - 1, tw, 3);
  }
  cv.dataset.rowH = rowH; cv.dataset.tw = tw; cv.dataset.gap = gap;
}

function onLinesMove(ev) {
  const v = view;
  if (!v) return;
  const cv = $('lines'), r = cv.getBoundingClientRect();
  const x = ev.clientX - r.left, y = ev.clientY - r.top;
  const rowH = Number(cv.dataset.rowH), tw = Number(cv.dataset.tw), gap = Number(cv.dataset.gap);
  const i = Math.floor((y - 4) / rowH);
  let h = null;
  if (x < tw && i >= 0 && i < v.l) h = { side: 'q', i };
  else if (x > tw + gap && i >= 0 && i < v.s) h = { side: 'k', i };
  if (JSON.stringify(h) !== JSON.stringify(lineHover)) { lineHover = h; drawLines(v); }
}

// ---- Step tables --------------------------------------------------------------------------

const f2 = (x) => (x === -Infinity ? '−∞' : x.toFixed(2));

// A numeric table: the caption is the page's text, the cells and their labels are data (marked
// data-i18n-data: token text, dimension names, numbers).
function table(caption, rows, rowLabels, colLabels, fmt, opts = {}) {
  const tbl = document.createElement('table');
  tbl.className = 'num';
  if (opts.testid) tbl.dataset.testid = opts.testid;
  const cap = document.createElement('caption');
  cap.textContent = caption;
  tbl.append(cap);
  const head = document.createElement('tr');
  head.dataset.i18nData = '';
  head.append(document.createElement('th'));
  colLabels.forEach((c) => { const th = document.createElement('th'); th.textContent = c; head.append(th); });
  tbl.append(head);
  rows.forEach((r, i) => {
    const tRow = document.createElement('tr');
    tRow.dataset.i18nData = '';
    if (opts.hlRow === i) tRow.className = 'hl';
    const th = document.createElement('th');
    th.textContent = rowLabels[i];
    tRow.append(th);
    r.forEach((x, j) => {
      const td = document.createElement('td');
      const masked = opts.masked && opts.masked(i, j);
      td.textContent = masked && opts.maskText ? opts.maskText : fmt(x);
      if (masked) td.className = 'masked';
      td.dataset.i = i; td.dataset.j = j;
      tRow.append(td);
    });
    tbl.append(tRow);
  });
  return tbl;
}

// Per-head Q, K, V for the step tables, or null with a reason.
function headQKV(v, h) {
  if (v.mode === 'sdpa') return { q: v.input.q, k: v.input.k, vv: v.input.v };
  const prm = knownParams(v.params, v.e);
  if (!prm) return { reason: 'steps.noparams' };
  const e = v.e, dh = e / v.h;
  const proj = linear(v.input.x, prm.win, prm.bin); // (L, 3E)
  const q = cols(proj, h * dh, (h + 1) * dh), k = cols(proj, e + h * dh, e + (h + 1) * dh);
  const vv = cols(proj, 2 * e + h * dh, 2 * e + (h + 1) * dh);
  return { q, k, vv, prm, proj };
}

// Checks the regenerated weights against the API's output: the page shows step tables only when
// its numbers reproduce what attnd computed.
function reproduces(v, prm, proj) {
  const e = v.e, dh = e / v.h;
  const cat = Array.from({ length: v.l }, () => new Array(e).fill(0));
  const row = new Float32Array(v.s);
  for (let h = 0; h < v.h; h++) {
    for (let i = 0; i < v.l; i++) {
      rowOf(v.heads[h], v, i, row);
      for (let c = 0; c < dh; c++) {
        let s = 0;
        for (let j = 0; j < v.s; j++) s += row[j] * proj[j][2 * e + h * dh + c];
        cat[i][h * dh + c] = s;
      }
    }
  }
  const out = linear(cat, prm.wout, prm.bout);
  let worst = 0;
  for (let i = 0; i < v.l; i++) for (let c = 0; c < e; c++) worst = Math.max(worst, Math.abs(out[i][c] - v.output.data[i * e + c]));
  return worst < 1e-3;
}

function drawSteps(v) {
  const box = $('steps'), body = $('steps-body');
  body.textContent = '';
  const small = v.l <= STEP_LIMIT && v.s <= STEP_LIMIT;
  box.hidden = !small;
  if (!small) return;
  if (!v.heads || state.head === 'mean') {
    const p = document.createElement('p');
    p.className = 'note';
    p.textContent = t('steps.pick');
    body.append(p);
    return;
  }
  const h = Number(state.head);
  const got = headQKV(v, h);
  if (got.reason || (v.mode === 'mha' && !reproduces(v, got.prm, got.proj))) {
    const p = document.createElement('p');
    p.className = 'note';
    p.textContent = t(got.reason || 'steps.noreproduce');
    body.append(p);
    if (got.reason) { // without Q, K and V: the weights attnd returned (a lesson sentence's)
      const wrow = new Float32Array(v.s);
      const weights = Array.from({ length: v.l }, (_, i) => Array.from(rowOf(v.heads[h], v, i, wrow)));
      body.append(table(t('steps.weights', { name: headName(v, String(h)) }), weights, v.qTokens, v.kTokens, f2,
        { masked: (i, j) => isMasked(v, i, j), maskText: '0', testid: 'table-softmax' }));
    }
    return;
  }
  const { q, k, vv } = got;
  const dk = q[0].length;
  const dims = (n, p) => Array.from({ length: n }, (_, i) => `${p}${i}`);
  const logits = matmulT(q, k);
  const scaled = logits.map((r) => r.map((x) => x * v.scale));
  const masked = (i, j) => isMasked(v, i, j);
  const withMask = scaled.map((r, i) => r.map((x, j) => (masked(i, j) ? -Infinity : x)));
  const wrow = new Float32Array(v.s);
  const weights = Array.from({ length: v.l }, (_, i) => Array.from(rowOf(v.heads[h], v, i, wrow)));
  const headOut = v.mode === 'sdpa'
    ? Array.from({ length: v.l }, (_, i) => Array.from(v.output.data.subarray(i * vv[0].length, (i + 1) * vv[0].length)))
    : matmul(weights, vv);
  const kl = v.kTokens, ql = v.qTokens;
  const inputs = document.createElement('div');
  inputs.className = 'tables';
  inputs.append(
    table(t('tbl.q', { n: v.l, d: dk }), q, ql, dims(dk, 'd'), f2, { testid: 'table-q' }),
    table(t('tbl.k', { n: v.s, d: dk }), k, kl, dims(dk, 'd'), f2, { testid: 'table-k' }),
    table(t('tbl.v', { n: v.s, d: vv[0].length }), vv, kl, dims(vv[0].length, 'd'), f2, { testid: 'table-v' }));
  const steps = document.createElement('div');
  steps.className = 'tables';
  const sc = v.scale === 1 / Math.sqrt(dk) ? t('step.2.sqrt', { dk, root: Math.sqrt(dk).toFixed(2) }) : t('step.2.scale', { s: v.scale });
  steps.append(
    table(t('step.1'), logits, ql, kl, f2, { testid: 'table-qk' }),
    table(sc, scaled, ql, kl, f2, { testid: 'table-scaled' }),
    table(t('step.3'), withMask, ql, kl, f2, { masked, maskText: '−∞', testid: 'table-masked' }),
    table(t('step.4'), weights, ql, kl, f2, { masked, maskText: '0', testid: 'table-softmax' }),
    table(v.mode === 'sdpa' ? t('step.5.out') : t('step.5.head', { h }), headOut, ql, dims(vv[0].length, 'd'), f2, { testid: 'table-headout' }));
  body.append(inputs, steps);
}

function drawOutput(v) {
  const sec = $('output-section'), body = $('output-body');
  body.textContent = '';
  const small = v.l <= STEP_LIMIT;
  sec.hidden = !small;
  if (!small) return;
  const dim = v.output.shape[v.output.shape.length - 1];
  const shown = Math.min(dim, 16);
  const rows = Array.from({ length: v.l }, (_, i) => Array.from(v.output.data.subarray(i * dim, i * dim + shown)));
  const labels = Array.from({ length: shown }, (_, i) => `d${i}`);
  const cap = v.mode === 'sdpa' ? t('output.sdpa')
    : t(shown < dim ? 'output.mha.cut' : 'output.mha', { l: v.l, d: dim, shown });
  body.append(table(cap, rows, v.qTokens, labels, f2, { testid: 'table-output' }));
}

// ---- The lesson: its note, the vocabulary, 实验一 and 实验三 --------------------------------

function drawNote(v) {
  $('lesson-note').hidden = !(v.words && v.model === LESSON_MODEL);
}

const vocabs = new Map(); // model name -> a promise of its vocabulary (GET /v1/models/{name})
const vocabLists = new Map(); // model name -> its vocabulary, once loaded

function loadVocab(name) {
  if (!vocabs.has(name)) {
    const p = (async () => {
      const r = await fetch(new URL(`v1/models/${encodeURIComponent(name)}`, apiBase()));
      if (!r.ok) throw new Error(`${r.status} ${r.statusText}`);
      const j = await r.json();
      if (!Array.isArray(j.vocab)) throw new Error('no vocab');
      vocabLists.set(name, j.vocab);
      return j.vocab;
    })();
    p.catch(() => vocabs.delete(name)); // try again next time
    vocabs.set(name, p);
  }
  return vocabs.get(name);
}

let vocabShown = null; // {model, n} of the open word list, for its title in either language

function renderVocabTitle() {
  $('vocab-title').textContent = vocabShown && vocabShown.n !== null
    ? t('vocab.title', { model: vocabShown.model, n: vocabShown.n }) : t('vocab.loading');
}

// Opens the word list of the sentence's model beside the page: a click on a word puts it into
// the sentence.
async function openVocab() {
  const model = vocabModel();
  if (!model) return;
  const dlg = $('vocab'), box = $('vocab-words');
  vocabShown = { model, n: null };
  renderVocabTitle();
  if (!dlg.open) dlg.show();
  let words;
  try {
    words = await loadVocab(model);
  } catch (e) {
    dlg.close();
    failure = new PageError('err.vocab', { model, msg: e.message });
    renderError();
    return;
  }
  vocabShown = { model, n: words.length };
  renderVocabTitle();
  box.textContent = '';
  for (const w of words) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'chip';
    b.textContent = w;
    b.dataset.word = w;
    b.addEventListener('click', () => insertWord(w));
    box.append(b);
  }
}

// Puts word into the sentence in place of its selection (the unknown word, after an error),
// and runs it.
function insertWord(word) {
  const ta = $('text');
  ta.setRangeText(word, ta.selectionStart, ta.selectionEnd, 'end');
  run();
}

// Selects the unknown word u (unknownWord) in the sentence box, so that a word from the list
// takes its place. The API counts characters (code points); the box counts UTF-16 units.
function selectUnknown(u) {
  if (!u || u.at === undefined) return;
  const ta = $('text'), chars = Array.from(ta.value);
  const start = chars.slice(0, u.at).join('').length;
  const end = chars.slice(0, u.at + Array.from(u.word).length).join('').length;
  ta.focus({ preventScroll: true });
  ta.setSelectionRange(start, end);
}

// Options value -> label of a select, its value set to selected.
function fillSelect(sel, items, selected) {
  sel.textContent = '';
  for (const [value, label] of items) {
    const o = document.createElement('option');
    o.value = String(value);
    o.textContent = label;
    sel.append(o);
  }
  sel.value = String(selected);
}

const tokenItems = (tokens) => tokens.map((tok, i) => [i, `${i} · ${tok}`]);

// A cell's weight as a bar behind its number (a CSS variable, 0 to 1).
function barCell(td, w) {
  td.style.setProperty('--w', String(Math.max(0, Math.min(1, w))));
  td.classList.add('bar');
}

// ---- 实验一: guess, then compare ------------------------------------------------------------
//
// The guess is a raw weight from 0 to GUESS_MAX per candidate key, normalised to sum 1; it is
// compared with the query's row in every head and in their mean by the L1 distance
// Σ_j |guess_j − w_j| over all S keys (0: the same row; 2: no overlap).

const GUESS_MAX = 10, GUESS_START = 5;

// The query word of 实验一: the chosen one, else the first pronoun, else the last word.
function exp1Query(v) {
  if (Number.isInteger(state.e1q) && state.e1q >= 0 && state.e1q < v.l) return state.e1q;
  const p = v.qTokens.findIndex((x) => PRONOUNS.includes(x));
  if (p >= 0) return p;
  for (let i = v.l - 1; i >= 0; i--) if (isWordToken(v.qTokens[i])) return i;
  return v.l - 1;
}

// The guess as a Map key -> raw weight: the URL's, else every word before the query at
// GUESS_START (the query itself when there is none).
function exp1Guess(v, q) {
  const g = new Map();
  for (const part of state.e1g.split(',')) {
    const m = /^(\d+):(\d+(?:\.\d+)?)$/.exec(part.trim());
    if (m && Number(m[1]) < v.s) g.set(Number(m[1]), Math.min(GUESS_MAX, Number(m[2])));
  }
  if (g.size || state.e1g) return g;
  for (let j = 0; j < q; j++) if (isWordToken(v.kTokens[j])) g.set(j, GUESS_START);
  if (!g.size) g.set(q, GUESS_START);
  return g;
}

function setGuess(g) {
  state.e1g = [...g].sort((a, b) => a[0] - b[0]).map(([j, w]) => `${j}:${w}`).join(',') || 'none';
  writeUrl();
}

// The guess over all S keys, summing to 1 (null when every weight is 0).
function normGuess(v, g) {
  const out = new Float64Array(v.s);
  let sum = 0;
  for (const [j, w] of g) { out[j] = w; sum += w; }
  if (!(sum > 0)) return null;
  for (let j = 0; j < v.s; j++) out[j] /= sum;
  return out;
}

function drawExp1(v) {
  $('exp1').hidden = !v.words;
  if (!v.words) return;
  const ok = !!v.heads && !v.topk;
  $('exp1-needheads').hidden = ok;
  $('exp1-body').hidden = !ok;
  if (!ok) return;
  const q = exp1Query(v), g = exp1Guess(v, q);
  fillSelect($('exp1-query'), tokenItems(v.qTokens), q);
  const keys = $('exp1-keys');
  keys.textContent = '';
  v.kTokens.forEach((tok, j) => {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'chip';
    b.textContent = tok;
    b.dataset.j = j;
    b.setAttribute('aria-pressed', String(g.has(j)));
    b.addEventListener('click', () => {
      const now = exp1Guess(v, q);
      if (now.has(j)) now.delete(j); else now.set(j, GUESS_START);
      setGuess(now);
      drawExp1(v);
    });
    keys.append(b);
  });
  const guess = $('exp1-guess');
  guess.textContent = '';
  for (const [j, w] of [...g].sort((a, b) => a[0] - b[0])) {
    const row = document.createElement('label');
    row.className = 'guess-row';
    const name = document.createElement('span');
    name.className = 'tok';
    name.dataset.i18nData = '';
    name.textContent = v.kTokens[j];
    const slider = document.createElement('input');
    Object.assign(slider, { type: 'range', min: '0', max: String(GUESS_MAX), step: '1', value: String(w) });
    slider.dataset.j = j;
    slider.dataset.testid = `exp1-weight-${j}`;
    slider.setAttribute('aria-label', t('exp1.weight', { k: v.kTokens[j] }));
    const share = document.createElement('output');
    share.className = 'share';
    share.dataset.j = j;
    share.dataset.i18nData = '';
    slider.addEventListener('input', () => {
      const now = exp1Guess(v, q);
      now.set(j, Number(slider.value));
      setGuess(now);
      drawShares(v);
      drawExp1Result(v);
    });
    row.append(name, slider, share);
    guess.append(row);
  }
  drawShares(v);
  drawExp1Result(v);
}

// The normalised share of each candidate beside its slider.
function drawShares(v) {
  const n = normGuess(v, exp1Guess(v, exp1Query(v)));
  for (const o of $('exp1-guess').querySelectorAll('output')) o.textContent = n ? n[Number(o.dataset.j)].toFixed(2) : '0.00';
}

function drawExp1Result(v) {
  const res = $('exp1-result');
  res.hidden = !state.e1;
  if (!state.e1) return;
  const q = exp1Query(v), guess = normGuess(v, exp1Guess(v, q));
  const verdict = $('exp1-verdict'), tbl = $('exp1-table');
  tbl.textContent = '';
  delete res.dataset.closest;
  if (!guess) { verdict.textContent = t('exp1.none'); tbl.hidden = true; return; }
  tbl.hidden = false;
  // The compared rows: each head's, then the mean's; their L1 distances to the guess.
  const cols = v.heads.map((m, h) => ({ key: String(h), row: rowOf(m, v, q, new Float32Array(v.s)) }));
  if (v.mean && v.h > 1) cols.push({ key: 'mean', row: rowOf(v.mean, v, q, new Float32Array(v.s)) });
  for (const c of cols) c.d = c.row.reduce((s, w, j) => s + Math.abs(guess[j] - w), 0);
  let best = 0;
  for (let h = 1; h < v.heads.length; h++) if (cols[h].d < cols[best].d) best = h;
  res.dataset.closest = String(best);
  const mean = cols.find((c) => c.key === 'mean');
  verdict.textContent = t('exp1.closest', { head: headName(v, String(best)), d: cols[best].d.toFixed(2), m: (mean || cols[best]).d.toFixed(2) });
  const th = (content, cls) => {
    const el = document.createElement('th');
    if (content instanceof Node) el.append(content); else el.textContent = content;
    if (cls) el.className = cls;
    return el;
  };
  const head = document.createElement('tr');
  head.append(th(t('exp1.col.key')), th(t('exp1.col.guess'), 'guess-col'));
  for (const c of cols) head.append(th(headNameEl(v, c.key, true), c.key === String(best) ? 'closest' : ''));
  tbl.append(head);
  const cand = exp1Guess(v, q);
  for (let j = 0; j < v.s; j++) {
    const tr = document.createElement('tr');
    tr.dataset.j = j;
    if (cand.has(j)) tr.className = 'cand';
    const k = th(v.kTokens[j]);
    k.dataset.i18nData = '';
    tr.append(k);
    const cells = [{ key: 'guess', w: guess[j] }].concat(cols.map((c) => ({ key: c.key, w: c.row[j] })));
    for (const c of cells) {
      const td = document.createElement('td');
      td.textContent = c.w.toFixed(2);
      td.dataset.h = c.key;
      td.dataset.w = String(c.w);
      if (c.key === String(best)) td.classList.add('closest');
      barCell(td, c.w);
      tr.append(td);
    }
    tbl.append(tr);
  }
  const l1 = document.createElement('tr');
  l1.className = 'l1';
  l1.dataset.testid = 'exp1-l1';
  l1.append(th(t('exp1.row.l1')), document.createElement('td'));
  for (const c of cols) {
    const td = document.createElement('td');
    td.textContent = c.d.toFixed(2);
    td.dataset.h = c.key;
    td.dataset.d = String(c.d);
    if (c.key === String(best)) td.classList.add('closest');
    l1.append(td);
  }
  tbl.append(l1);
}

// ---- 实验三: no peeking at the future --------------------------------------------------------
//
// The sentence's words A and the same words with word t replaced, B, go to the API twice each
// (causal top-left, then without the mask) as tokens with base64 outputs; per row i the page
// shows max_c |A_out[i][c] − B_out[i][c]| and whether the row's float32 values are bit for bit
// the same.

let exp3 = null; // {key, t, w, on, off}: the runs of the last settings; on/off are rows or null
let exp3Runs = 0; // runs so far, shown as the result's data-runs (the tests wait on it)

// Position t: the chosen one, else the last word (数据库 in "Redis 是一个内存数据库。").
function exp3Pos(v) {
  if (Number.isInteger(state.e3t) && state.e3t >= 0 && state.e3t < v.l) return state.e3t;
  for (let i = v.l - 1; i >= 0; i--) if (isWordToken(v.qTokens[i])) return i;
  return v.l - 1;
}

// The replacement: the chosen word, else 缓存 (数据库 in place of 缓存), else the vocabulary's
// first word that differs.
function exp3Word(v, vocab, t3) {
  if (state.e3w) return state.e3w;
  const cur = v.qTokens[t3];
  return ['缓存', '数据库'].concat(vocab || []).find((w) => w !== cur && (!vocab || vocab.includes(w))) || cur;
}

const exp3Key = (v, t3, w) => JSON.stringify([v.model, v.qTokens, t3, w]);

// 2.48 × 10⁻³ (a power of ten, readable from the back of a room).
function pow10(x) {
  let e = Math.floor(Math.log10(x)), m = x / 10 ** e;
  if (m >= 9.995) { m /= 10; e += 1; }
  const sup = String(e).replace(/-/g, '⁻').replace(/\d/g, (d) => '⁰¹²³⁴⁵⁶⁷⁸⁹'[d]);
  return `${m.toFixed(2)} × 10${sup}`;
}

// Rows of two outputs (L, E): {same: every bit equal, max: the largest |difference|}.
function deltaRows(a, b, l, e) {
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length), ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  return Array.from({ length: l }, (_, i) => {
    let same = true, max = 0;
    for (let c = i * e; c < (i + 1) * e; c++) {
      if (ua[c] !== ub[c]) same = false;
      max = Math.max(max, Math.abs(a[c] - b[c]));
    }
    return { same, max };
  });
}

// Runs 实验三 with the causal mask (causal true) or without it; the settings come from the
// selects. Causal on starts the experiment again; off needs it started.
async function runExp3(causal) {
  const v = view;
  if (!v || !v.words) return;
  const seq = runSeq;
  let vocab = null;
  try { vocab = await loadVocab(v.model); } catch { /* the default word then */ }
  const t3 = exp3Pos(v), w = exp3Word(v, vocab, t3), key = exp3Key(v, t3, w);
  if (causal || !exp3 || exp3.key !== key) exp3 = { key, t: t3, w, on: null, off: null };
  const a = v.qTokens, b = a.slice();
  b[t3] = w;
  const body = (tokens) => Object.assign({ model: v.model, tokens, need_weights: false, encoding: 'base64' },
    causal ? { causal: 'top_left' } : {});
  setStatus('loading', 'status.busy');
  try {
    const [ra, rb] = await Promise.all([post('v1/attention', body(a)), post('v1/attention', body(b))]);
    if (seq !== runSeq || view !== v) return;
    const oa = readTensor(ra.output), ob = readTensor(rb.output);
    exp3[causal ? 'on' : 'off'] = deltaRows(oa.data, ob.data, v.l, oa.shape[oa.shape.length - 1]);
    exp3.runs = (exp3Runs += 1);
    state.e3 = causal ? 1 : 2;
    writeUrl();
    setStatus('ok', 'status.ok', status.time);
  } catch (e) {
    if (seq !== runSeq) return;
    failure = e;
    renderError();
    setStatus('error', 'status.error');
  }
  drawExp3(v);
}

// After a run from a link: the experiment's runs the URL records.
async function resumeExp3(v) {
  if (!v.words || !state.e3) return;
  const t3 = exp3Pos(v), cur = exp3 && exp3.key === exp3Key(v, t3, exp3Word(v, vocabLists.get(v.model) || null, t3));
  if (cur && exp3.on && (state.e3 < 2 || exp3.off)) { drawExp3(v); return; }
  const want = state.e3;
  await runExp3(true);
  if (want >= 2 && exp3 && exp3.on) await runExp3(false);
}

function drawExp3(v) {
  $('exp3').hidden = !v.words;
  if (!v.words) return;
  const t3 = exp3Pos(v);
  fillSelect($('exp3-pos'), tokenItems(v.qTokens), t3);
  // The replacement: any word of the model's vocabulary (the list comes once it is loaded).
  const vocab = vocabLists.get(v.model) || null;
  if (!vocab) loadVocab(v.model).then(() => { if (view === v) drawExp3(v); }).catch(() => {});
  const w = exp3Word(v, vocab, t3);
  fillSelect($('exp3-word'), (vocab && vocab.includes(w) ? vocab : [w].concat(vocab || [])).map((x) => [x, x]), w);
  const cur = exp3 && exp3.key === exp3Key(v, t3, w) ? exp3 : null;
  $('exp3-off').disabled = !(cur && cur.on);
  const res = $('exp3-result');
  res.hidden = !(cur && cur.on);
  res.dataset.runs = cur ? String(cur.runs || 0) : '0';
  if (!cur || !cur.on) return;
  const before = (rows) => rows.slice(0, t3);
  const on = cur.on, off = cur.off;
  const onBad = before(on).filter((r) => !r.same).length;
  $('exp3-verdict-on').textContent = onBad
    ? t('exp3.on.bad', { c: onBad, n: t3 })
    : t('exp3.on.ok', { n: t3, m: on.slice(t3).filter((r) => !r.same).length, k: v.l - t3 });
  const vOff = $('exp3-verdict-off');
  vOff.hidden = !off;
  if (off) {
    const changed = before(off).filter((r) => !r.same);
    vOff.textContent = changed.length
      ? t('exp3.off.leak', { c: changed.length, n: t3, max: pow10(Math.max(...changed.map((r) => r.max))) })
      : t('exp3.off.none');
  }
  const tbl = $('exp3-table');
  tbl.textContent = '';
  const head = document.createElement('tr');
  for (const [text, cls] of [['', ''], [t('exp3.col.row'), ''], [t('exp3.col.word'), '']]
    .concat([[t('exp3.col.on'), 'on']], off ? [[t('exp3.col.off'), 'off']] : [])) {
    const el = document.createElement('th');
    el.textContent = text;
    if (cls) el.className = cls;
    head.append(el);
  }
  tbl.append(head);
  for (let i = 0; i < v.l; i++) {
    const tr = document.createElement('tr');
    tr.dataset.i = i;
    tr.className = i < t3 ? 'before' : i === t3 ? 'at-t' : 'after';
    if (i === 0 || i === t3) { // the two groups: before t, and from t on
      const g = document.createElement('th');
      g.className = 'group';
      g.rowSpan = i === 0 && t3 > 0 ? t3 : v.l - t3;
      g.textContent = t(i < t3 ? 'exp3.before' : 'exp3.after');
      tr.append(g);
    }
    const n = document.createElement('th');
    n.textContent = String(i);
    n.dataset.i18nData = '';
    const word = document.createElement('td');
    word.className = 'word';
    word.dataset.i18nData = '';
    word.textContent = i === t3 ? `${v.qTokens[i]} → ${w}` : v.qTokens[i];
    tr.append(n, word);
    for (const [which, rows] of [['on', on]].concat(off ? [['off', off]] : [])) {
      const r = rows[i], td = document.createElement('td');
      td.className = `delta ${which}`;
      td.dataset.same = r.same ? '1' : '0';
      td.dataset.max = String(r.max);
      if (r.same) {
        td.classList.add('exact-zero');
        td.textContent = t('exp3.zero');
      } else if (r.max === 0) {
        td.textContent = t('exp3.signzero');
      } else { // a power of ten on a bar whose length is log10 of it, from 10⁻⁸ to 1
        td.classList.add('nonzero');
        td.style.setProperty('--w', String(Math.max(0.02, Math.min(1, (Math.log10(r.max) + 8) / 8))));
        const num = document.createElement('span');
        num.dataset.i18nData = '';
        num.textContent = pow10(r.max);
        td.append(num);
      }
      tr.append(td);
    }
    tbl.append(tr);
  }
}

function drawViews(v) {
  drawGrid(v);
  drawLarge(v);
  drawLines(v);
  drawNote(v);
  drawExp1(v);
  drawExp3(v);
  drawSteps(v);
  drawOutput(v);
}

// ---- Running ------------------------------------------------------------------------------

// What the status and the error line show, kept as keys and values so that switching the
// language shows them again in the other.
let status = { kind: 'idle', key: 'status.ready', time: null };
let failure = null; // the error of the last run (PageError, ApiError or another Error), or null

function setStatus(kind, key, time = null) {
  status = { kind, key, time };
  renderStatus();
}

function renderStatus() {
  const s = $('status');
  s.className = `status ${status.kind}`;
  s.dataset.kind = status.kind;
  s.querySelector('.status-text').textContent = t(status.key);
  s.querySelector('.timing').textContent = status.time ? ` · ${t('status.time', status.time)}` : '';
}

// The error line: the page's own errors in the page's language; an API error as the API wrote
// it (English), under a line in the page's language where the table has one.
function renderError() {
  const box = $('error');
  box.hidden = !failure;
  if (!failure) return;
  let lead = '', api = '';
  const unknown = unknownWord(failure);
  if (failure instanceof PageError) lead = t(failure.key, failure.params);
  else if (unknown) { // the word and where it is, in the page's language
    const model = failure.model || vocabModel();
    lead = unknown.at !== undefined ? t('err.unknown_word', { word: unknown.word, at: unknown.at, model })
      : t('err.unknown_token', { word: unknown.word, i: unknown.i, model });
    api = failure.message;
  } else if (failure instanceof ApiError) {
    lead = t('err.api_lead', { status: failure.status, code: failure.code });
    api = failure.message;
  } else api = String(failure.message || failure);
  const leadEl = box.querySelector('.lead'), apiEl = box.querySelector('.api');
  leadEl.textContent = lead;
  leadEl.hidden = !lead;
  apiEl.textContent = api;
  apiEl.hidden = !api;
  // The vocabulary, one click away from an unknown word.
  $('error-vocab').hidden = !(failure instanceof ApiError && failure.code === 'unknown_token');
}

async function run() {
  readControls();
  syncControls();
  writeUrl();
  const seq = ++runSeq;
  failure = null;
  renderError();
  setStatus('loading', 'status.busy');
  $('run').disabled = true;
  let input = null;
  try {
    input = buildInput();
    const v = await compute(input);
    if (seq !== runSeq) return;
    $('request-json').textContent = `POST ${v.request.path}\n${JSON.stringify(v.request.body).slice(0, 20000)}`;
    if (state.head !== 'mean' && (!v.heads || Number(state.head) >= v.heads.length)) state.head = v.heads ? 0 : 'mean';
    view = v;
    setStatus('ok', 'status.ok', { ms: v.ms.toFixed(0), compute: v.usage.compute_ms.toFixed(1) });
    drawViews(v);
    writeUrl();
    await resumeExp3(v); // a link's experiment, run again
    if (seq !== runSeq) return;
    document.body.dataset.ready = String(seq);
  } catch (e) {
    if (seq !== runSeq) return;
    failure = e;
    if (e instanceof ApiError && input && input.mode === 'words') {
      e.model = input.model;
      selectUnknown(unknownWord(e));
    }
    renderError();
    setStatus('error', 'status.error');
    document.body.dataset.ready = String(seq);
  } finally {
    if (seq === runSeq) $('run').disabled = false;
  }
}

async function loadModels() {
  try {
    const r = await fetch(new URL('v1/models', apiBase()));
    if (!r.ok) throw new Error(`${r.status}`);
    models = await r.json();
  } catch (e) {
    models = { default: null, models: [] };
    failure = new PageError('err.models', { msg: e.message });
    renderError();
  }
  renderModelOptions();
}

// The choices of projection weights: the server's models, then the two inits; for a sentence,
// only the models with a vocabulary.
function renderModelOptions() {
  const sel = $('params-kind');
  sel.textContent = '';
  const words = isSentence(state.preset);
  for (const m of models ? models.models : []) {
    if (words && !(m.vocab_size > 0)) continue;
    const o = document.createElement('option');
    o.value = `model:${m.name}`;
    o.textContent = t('params.model', { name: m.name, e: m.embed_dim, h: m.num_heads });
    sel.append(o);
  }
  for (const [value, key] of words ? [] : [['init:identity', 'params.identity'], ['init:random', 'params.random']]) {
    const o = document.createElement('option');
    o.value = value;
    o.textContent = t(key);
    sel.append(o);
  }
  if ([...sel.options].some((o) => o.value === state.params)) sel.value = state.params;
}

// Puts every string of the page in state.lang.
function applyLanguage() {
  document.documentElement.lang = state.lang === 'zh' ? 'zh-CN' : 'en';
  for (const el of document.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll('[data-i18n-placeholder]')) el.placeholder = t(el.dataset.i18nPlaceholder);
  for (const el of document.querySelectorAll('[data-i18n-aria]')) el.setAttribute('aria-label', t(el.dataset.i18nAria));
  for (const b of document.querySelectorAll('[data-lang]')) {
    b.textContent = LANG_NAMES[b.dataset.lang];
    b.setAttribute('aria-pressed', String(b.dataset.lang === state.lang));
  }
  renderModelOptions();
  renderStatus();
  renderError();
  renderVocabTitle();
}

function setLanguage(lang) {
  if (lang === state.lang) return;
  readControls();
  state.lang = lang;
  applyLanguage();
  syncControls();
  writeUrl();
  // The seed presets name their tokens (查询, 键 0) in the page's language: build them again.
  if (view && (state.preset === 'a' || state.preset === 'b')) run();
  else if (view) drawViews(view);
}

async function main() {
  const fromUrl = readUrl();
  applyLanguage();
  await loadModels();
  if (!fromUrl) applyPreset(state.preset);
  syncControls();
  $('preset').addEventListener('change', () => { readControls(); applyPreset($('preset').value); syncControls(); run(); });
  for (const id of ['causal', 'key-length', 'weights-mode', 'params-kind', 'num-heads', 'init-seed', 'rand-l', 'rand-e', 'rand-seed']) {
    $(id).addEventListener('change', run);
  }
  for (const id of ['filter-kind', 'filter-value']) {
    $(id).addEventListener('change', () => { readControls(); syncControls(); writeUrl(); if (view) drawViews(view); });
  }
  $('large-font').addEventListener('change', () => { readControls(); syncControls(); writeUrl(); if (view) drawViews(view); });
  for (const b of document.querySelectorAll('[data-lang]')) b.addEventListener('click', () => setLanguage(b.dataset.lang));
  $('run').addEventListener('click', run);
  // A sentence: Enter runs it; the vocabulary opens beside the page, from the box or the error.
  $('text').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); run(); }
  });
  for (const id of ['vocab-open', 'error-vocab']) $(id).addEventListener('click', openVocab);
  $('vocab-close').addEventListener('click', () => $('vocab').close());
  $('vocab').addEventListener('keydown', (ev) => { if (ev.key === 'Escape') $('vocab').close(); });
  // 实验一 and 实验三: their settings go to the URL; they need no new run of the sentence.
  $('exp1-query').addEventListener('change', () => {
    Object.assign(state, { e1q: Number($('exp1-query').value), e1g: '' });
    writeUrl();
    if (view) drawExp1(view);
  });
  $('exp1-compare').addEventListener('click', () => { state.e1 = true; writeUrl(); if (view) drawExp1Result(view); });
  $('exp3-pos').addEventListener('change', () => {
    Object.assign(state, { e3t: Number($('exp3-pos').value), e3: 0 });
    writeUrl();
    if (view) drawExp3(view);
  });
  $('exp3-word').addEventListener('change', () => {
    Object.assign(state, { e3w: $('exp3-word').value, e3: 0 });
    writeUrl();
    if (view) drawExp3(view);
  });
  $('exp3-run').addEventListener('click', () => runExp3(true));
  $('exp3-off').addEventListener('click', () => runExp3(false));
  $('large').addEventListener('mousemove', onLargeMove);
  $('large').addEventListener('mouseleave', () => { $('tooltip').hidden = true; if (view) drawLarge(view); });
  $('lines').addEventListener('mousemove', onLinesMove);
  $('lines').addEventListener('mouseleave', () => { lineHover = null; if (view) drawLines(view); });
  // The heatmap fills the panel and the first screen: draw it again when the window changes.
  let queued = false;
  window.addEventListener('resize', () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; if (view) { drawLarge(view); drawLines(view); } });
  });
  await run();
}

main();
