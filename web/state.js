// The page's state and its URL: what the controls chose, the server's models, the last result,
// and the lesson's sentences and the model a sentence goes to.

import { pickLang, tr } from './i18n.js';
import { TWINS } from './twins.js';

// The seed chapters' sentences (第 6 章), sent as text to a model with a vocabulary (the built-in
// lesson model), which splits them into its words: a preset's sentence in the page's language,
// the Chinese one or its English twin (twins.js).
export const sentenceOf = (p, lang = state.lang) => (TWINS[p] ? TWINS[p][lang] : '');
export const LESSON_MODEL = 'lesson';
export const PRONOUNS = ['它', '他', '她', '它们', '他们', '她们', 'it', 'he', 'she', 'they'];
export const isSentence = (p) => p in TWINS || p === 'text';
// A word with a letter or a digit in it; the others are punctuation.
export const isWordToken = (s) => /[\p{L}\p{N}]/u.test(s);
// A character of Chinese text: a Han character, CJK punctuation (，。「」〈〉) or a full-width form.
export const CJK = /[\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]/;
// The words of a vocabulary the page offers (the word list, 实验三's replacement): in English,
// those without a Chinese character (the lesson model's vocabulary holds both languages); never
// the model's start token, which attnd puts in itself.
export function pageWords(vocab, startToken) {
  return vocab.filter((w) => w !== startToken && (state.lang !== 'en' || !CJK.test(w)));
}
// Whether key (or query) j of view v is the model's start token (v.start: its index, or -1).
export const isStart = (v, j) => v.start === j;
// The selected row of the step tables: the URL's, else a sentence's first pronoun, else 0.
export function selectedRow(v) {
  if (Number.isInteger(state.row) && state.row >= 0 && state.row < v.l) return state.row;
  const p = v.words ? v.tokens.findIndex((x) => PRONOUNS.includes(x)) : -1;
  return p >= 0 ? p : 0;
}

// ---- State and URL ------------------------------------------------------------------------

// The experiments' settings (a sentence's only): e1q the query word of 实验一 (-1: the default,
// its pronoun), e1g its guess as "key:weight,…" over the candidate keys, e1 whether it is
// compared; e3t the position t of 实验三 (-1: the default), e3w the replacement word, e3 what has
// been run (0 nothing, 1 causal on, 2 on and off); lm whether the model that learned is shown
// (learned.js, the path's step on it).
export const EXP_DEFAULTS = { e1q: -1, e1g: '', e1: false, e3t: -1, e3w: '', e3: 0, lm: false };

export const state = {
  preset: 'a', causal: 'off', keyLength: '', weights: 'per_head', filter: 'none', filterValue: 0.1,
  params: 'model:demo', heads: 4, seed: 7, randL: 8, randE: 16, randSeed: 1, custom: '', head: 0,
  large: false, lang: 'en', text: '', row: -1, nostart: false, cs: '', gloss: false, nosqrt: false, ...EXP_DEFAULTS,
};
export let models = null;   // GET /v1/models
export let view = null;     // the last result: what every view draws
export let runSeq = 0;      // the number of the latest run

// The other modules' way to change them (an imported binding cannot be assigned).
export function setModels(m) { models = m; }
export function setView(v) { view = v; }
export const nextRun = () => ++runSeq;

const URL_KEYS = {
  preset: 'p', causal: 'causal', keyLength: 'klen', weights: 'w', filter: 'f', filterValue: 'fv',
  params: 'params', heads: 'h', seed: 'seed', randL: 'L', randE: 'E', randSeed: 'rseed', custom: 'json',
  head: 'head', large: 'large', lang: 'lang', text: 'text', row: 'row', nostart: 'ns', cs: 'cs', gloss: 'gl',
  nosqrt: 'nosqrt',
  e1q: 'e1q', e1g: 'e1g', e1: 'e1', e3t: 'e3t', e3w: 'e3w', e3: 'e3', lm: 'lm',
};
const SENTENCE_KEYS = ['text', ...Object.keys(EXP_DEFAULTS)];

// The string of key in the page's language (i18n.js).
export const t = (key, params) => tr(state.lang, key, params);

export function readUrl() {
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
    if (!q.has(URL_KEYS.text)) state.text = sentenceOf(state.preset);
    state.preset = presetOfText(state.text);
  }
  return q.has('p');
}

// The preset whose sentence text is, in either language, else 'text' (a sentence of one's own).
export function presetOfText(text) {
  return Object.keys(TWINS).find((k) => TWINS[k].zh === text || TWINS[k].en === text) || 'text';
}

// The same sentence in the other language (its twin), or '' for a sentence of one's own.
export function glossOf(text) {
  const p = presetOfText(text);
  if (p === 'text') return '';
  return TWINS[p].zh === text ? TWINS[p].en : TWINS[p].zh;
}

export function writeUrl() {
  const q = new URLSearchParams(location.search);
  for (const [k, u] of Object.entries(URL_KEYS)) {
    const v = state[k];
    if (k === 'custom' && state.preset !== 'custom') { q.delete(u); continue; }
    if (['randL', 'randE', 'randSeed'].includes(k) && state.preset !== 'random') { q.delete(u); continue; }
    // A sentence's text and experiments; an experiment's setting only once it is not the default.
    if ((k === 'row' && v === -1) || (['nostart', 'cs', 'gloss', 'nosqrt'].includes(k) && !v)) { q.delete(u); continue; }
    if (SENTENCE_KEYS.includes(k) && (!isSentence(state.preset) || (k in EXP_DEFAULTS && v === EXP_DEFAULTS[k]))) {
      q.delete(u);
      continue;
    }
    q.set(u, typeof v === 'boolean' ? (v ? '1' : '0') : String(v));
  }
  history.replaceState(null, '', `${location.pathname}?${q}`);
}

export function apiBase() {
  const api = new URLSearchParams(location.search).get('api');
  return api ? new URL(api.endsWith('/') ? api : api + '/') : new URL('.', location.href);
}

// ---- Choices the state implies ------------------------------------------------------------

export function isSdpa() {
  if (['a', 'b', 'dk'].includes(state.preset)) return true;
  if (state.preset !== 'custom') return false;
  try { return 'q' in JSON.parse(state.custom); } catch { return false; }
}

// The name of the model a sentence goes to: the chosen one when it has a vocabulary, else the
// lesson model, else the first model with a vocabulary (null when there is none); never a model
// of layers, which learned.js shows apart.
export function vocabModel() {
  const list = models ? models.models.filter((m) => m.vocab_size > 0 && !m.num_layers) : [];
  const chosen = state.params.startsWith('model:') ? state.params.slice(6) : null;
  if (list.some((m) => m.name === chosen)) return chosen;
  if (list.some((m) => m.name === LESSON_MODEL)) return LESSON_MODEL;
  return list.length ? list[0].name : (models && models.models.length ? null : LESSON_MODEL);
}

// The colour scale: every map from 0 to 1 (true), or each to its own maximum. state.cs chooses
// ('unit' or 'max'); by default the lesson's inputs, the seed presets (a) and (b) and the lesson
// model's sentences, are on 0 to 1, where a weight of 0.40 does not look like full attention;
// other inputs (random, pasted, L = 512, whose weights may all be small) on their maximum.
export function unitScale() {
  if (state.cs) return state.cs === 'unit';
  return ['a', 'b', 'dk'].includes(state.preset) || (isSentence(state.preset) && vocabModel() === LESSON_MODEL);
}

export function paramsChoice() {
  const [kind, rest] = state.params.split(':');
  if (kind === 'model') return { kind: 'model', name: rest };
  return rest === 'random' ? { kind: 'init', init: 'random', seed: state.seed, heads: state.heads }
    : { kind: 'init', init: 'identity', heads: state.heads };
}
