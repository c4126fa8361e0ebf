// The controls: they show the state and are read back into it; a preset fills them, and the
// language switch puts every string of the page in the other language.

import { LANG_NAMES } from './i18n.js';
import {
  EXP_DEFAULTS, glossOf, isSdpa, isSentence, models, presetOfText, sentenceOf, setModels, state, t, vocabModel,
} from './state.js';
import { $ } from './dom.js';
import { PageError, fetchModels } from './api.js';
import { renderError, renderStatus, setFailure } from './status.js';
import { renderVocabTitle } from './vocab.js';
import { setFold } from './fold.js';

export function syncControls() {
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
  setFold('large', state.large);
  $('text-opts').hidden = !isSentence(state.preset);
  // The sentence's twin in the other language, as a gloss line under the box (a preset's only).
  const gloss = glossOf(state.text);
  $('gloss-opt').hidden = !gloss;
  $('gloss').checked = state.gloss;
  $('gloss-line').hidden = !(gloss && state.gloss);
  $('gloss-text').textContent = gloss;
  $('random-opts').hidden = state.preset !== 'random';
  $('custom-opts').hidden = state.preset !== 'custom';
  $('filter-value-label').hidden = state.filter === 'none';
  $('filter-value-name').textContent = t(state.filter === 'topk' ? 'filter.value.topk' : 'filter.value.threshold');
  const sdpa = isSdpa();
  $('params-section').hidden = sdpa;
  $('num-heads').disabled = state.params.startsWith('model:');
  $('init-seed').disabled = state.params !== 'init:random';
}

export function readControls() {
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
    if (text !== state.text) Object.assign(state, { text, row: -1 }, EXP_DEFAULTS);
    state.preset = presetOfText(text);
  }
}

// Presets fill the controls; the inputs themselves are built by buildInput.
export function applyPreset(p) {
  const from = state.preset;
  state.preset = p;
  state.head = 0;
  state.row = -1;
  if (p === 'a' || p === 'dk') Object.assign(state, { causal: 'off', keyLength: '' });
  if (p === 'b') Object.assign(state, { causal: 'off', keyLength: '2' });
  if (isSentence(p)) {
    // A preset's sentence; "your own sentence" starts from the sentence shown, if any.
    if (sentenceOf(p)) state.text = sentenceOf(p);
    else if (!state.text) state.text = $('text').value || sentenceOf('c1');
    const m = vocabModel();
    Object.assign(state, { causal: 'off', keyLength: '' }, m ? { params: `model:${m}` } : {}, EXP_DEFAULTS);
  } else if (isSentence(from) && models && models.default) {
    state.params = `model:${models.default}`; // embeddings again: back to the default model
  }
  if (p === 'd') Object.assign(state, { params: 'init:random', heads: 12, seed: 7, causal: 'off', keyLength: '' });
}

export async function loadModels() {
  try {
    setModels(await fetchModels());
  } catch (e) {
    setModels({ default: null, models: [] });
    setFailure(new PageError('err.models', {}, e.message));
    renderError();
  }
  renderModelOptions();
}

// The choices of projection weights: the server's models, then the two inits; for a sentence,
// only the models with a vocabulary. A model of layers (num_layers), whose weights lead with the
// layer axis, is not among them: its own view is the path's step on it (learned.js).
function renderModelOptions() {
  const sel = $('params-kind');
  sel.textContent = '';
  const words = isSentence(state.preset);
  for (const m of models ? models.models : []) {
    if ((words && !(m.vocab_size > 0)) || m.num_layers) continue;
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
export function applyLanguage() {
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
