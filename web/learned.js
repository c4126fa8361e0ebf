// "A model that learned": the guided path's step on the built-in induction model (a model of
// layers, GET /v1/models's num_layers), trained in this repository. A seeded random sequence of
// its words in the page's language, the same words twice (or the student's own words) goes to
// POST /v1/attention with every layer's weights and the next-token predictions; the model view
// (modelview.js) shows every layer's heads with their scores, the induction head opened large
// with its stripe pointed at, and the predictions show where the model copies.
//
// One request a sequence, within the page's limits: at most 64 tokens, so the weights (Ls, H,
// L, L) = 2 · 4 · 64 · 64 float32 in base64 (175 KiB) and the top-3 predictions stay under the
// 256 KiB a reply of the path may take.

import { CJK, models, state, t } from './state.js';
import { $ } from './dom.js';
import { loadVocab, post } from './api.js';
import { readTensor } from './tensors.js';
import { hideError, showError } from './errors.js';
import { shuffled } from './numbers.js';
import { bestHead, headScores } from './headscores.js';
import { drawModelView } from './modelview.js';
import { setCalls } from './callbox.js';

export const LEARNED_WORDS = 10; // the random words, then the same again: 21 tokens with 〈s〉
const TOP_K = 3;

let seed = 1;       // the random sequence's seed (the URL's ls)
let own = null;     // the student's own words, or null for the random sequence
let result = null;  // the last answer, drawn: see runLearned
let open = 'auto';  // the open map: {layer, head}, null, or 'auto' (the induction head)
let seq = 0;
let tried = '';     // the key of the last sequence sent (its language and seed, or own words)

const keyNow = () => `${state.lang}|${own === null ? seed : own}`;

// The model of layers the step shows: induction if listed, else the first with an unembedding.
function layeredModel() {
  const list = models ? models.models.filter((m) => m.num_layers > 0 && m.unembedding && m.vocab_size > 0) : [];
  return list.find((m) => m.name === 'induction') || list[0] || null;
}

// The random sequence of seed in lang: LEARNED_WORDS different words of the model's vocabulary
// in that language (a Chinese word has a Han character; English ones have none), then the same.
export function learnedSequence(vocab, startToken, lang, s) {
  const words = vocab.filter((w) => w !== startToken && (lang === 'zh') === CJK.test(w));
  const order = shuffled(words.length, s).slice(0, Math.min(LEARNED_WORDS, words.length));
  const half = order.map((k) => words[k]);
  return half.concat(half);
}

function writeSeed() {
  const q = new URLSearchParams(location.search);
  if (state.lm) q.set('ls', String(seed)); else q.delete('ls');
  history.replaceState(null, '', `${location.pathname}?${q}`);
}

export function initLearned() {
  const q = new URLSearchParams(location.search);
  const s = Math.floor(Number(q.get('ls')));
  if (Number.isFinite(s) && s >= 0 && q.has('ls')) seed = s;
  $('learned-new').addEventListener('click', () => { seed += 1; own = null; open = 'auto'; runLearned(); });
  $('learned-try').addEventListener('click', tryOwn);
  $('learned-text').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.isComposing) { ev.preventDefault(); tryOwn(); }
  });
  $('learned-clear').addEventListener('click', () => pick(null));
}

function tryOwn() {
  own = $('learned-text').value.trim();
  if (!own) own = null;
  open = 'auto';
  runLearned();
}

// The words to send: the student's, else the random sequence in the page's language.
async function wordsNow(m) {
  if (own !== null) return { text: own, half: 0 };
  const vocab = await loadVocab(m.name);
  const w = learnedSequence(vocab, m.start_token, state.lang, seed);
  return { text: w.join(' '), half: w.length / 2 };
}

// Sends the sequence and keeps result = {key, text, half, tokens, t, L, layers, maps, scores,
// held, ind, prev, preds: {tokens (L, K), probs (L, K)}}.
export async function runLearned() {
  const m = layeredModel();
  if (!m || !state.lm) return;
  const mine = ++seq;
  tried = keyNow();
  $('learned-new').disabled = true;
  $('learned-try').disabled = true;
  try {
    const { text, half } = await wordsNow(m);
    const body = {
      model: m.name, text, need_weights: 'per_head', predict_top_k: TOP_K, encoding: 'base64',
      outputs: ['weights', 'predictions'],
    };
    $('learned-text').value = text;
    const r = await post('v1/attention', body);
    if (mine !== seq) return;
    setCalls('learned', [{ path: 'v1/attention', body }]);
    const w = readTensor(r.weights), [ls, h, L] = w.shape;
    const maps = Array.from({ length: ls }, (_, li) => Array.from({ length: h },
      (_, k) => w.data.subarray(((li * h) + k) * L * L, ((li * h) + k + 1) * L * L)));
    const tokens = r.tokens, scores = headScores(maps, tokens);
    const last = r.layers.length - 1;
    result = {
      key: tried, text, half, tokens, t: tokens, L, layers: r.layers,
      maps, scores, held: Array.isArray(m.head_scores) ? m.head_scores : null,
      ind: { layer: last, head: bestHead(scores, last, 'induction') },
      prev: { layer: 0, head: bestHead(scores, 0, 'previous_token') },
      preds: { tokens: r.predictions.tokens, probs: readTensor(r.predictions.probs).data },
    };
    if (result.ind.head < 0) result.ind = null;
    if (open === 'auto') open = result.ind;
    hideError($('learned-error'));
  } catch (e) {
    if (mine !== seq) return;
    result = null;
    showError($('learned-error'), e, 'learned.error');
  } finally {
    if (mine === seq) { $('learned-new').disabled = false; $('learned-try').disabled = false; }
  }
  writeSeed();
  drawLearned();
}

function pick(next) {
  open = next;
  drawLearned();
}

// A predicted word as the page shows it: in English, a Chinese word is named, not shown.
const shownWord = (w) => (state.lang === 'en' && CJK.test(w) ? t('learned.pred.zh') : w);

// The predictions' table: for every word, the model's likeliest next word and its probability,
// and the word that came next; a word that appeared before (so the model can copy) is shaded,
// and a right prediction in bold.
function drawPreds(res) {
  const tbl = $('learned-preds'), L = res.L, k = res.preds.tokens[0].length;
  tbl.textContent = '';
  const head = document.createElement('tr');
  for (const key of ['learned.row.word', 'learned.row.pred', 'learned.row.next']) {
    const th = document.createElement('th');
    th.textContent = t(key);
    head.append(th);
  }
  tbl.append(head);
  const seen = new Set();
  let hitCopy = 0, nCopy = 0, hitOther = 0, nOther = 0;
  for (let i = 0; i < L; i++) {
    const copy = i > 0 && seen.has(res.tokens[i]);
    seen.add(res.tokens[i]);
    const pred = res.preds.tokens[i][0], next = i + 1 < L ? res.tokens[i + 1] : null;
    const hit = next !== null && pred === next;
    if (next !== null && i > 0) {
      if (copy) { nCopy++; hitCopy += hit; } else { nOther++; hitOther += hit; }
    }
    const tr = document.createElement('tr');
    tr.className = `${copy ? 'copy' : ''}${hit ? ' hit' : ''}`.trim();
    Object.assign(tr.dataset, { i: String(i), pred, hit: hit ? '1' : '0', copy: copy ? '1' : '0' });
    const texts = [i === 0 ? t('tok.start') : res.tokens[i], `${shownWord(pred)} ${res.preds.probs[i * k].toFixed(2)}`, next || ''];
    for (const x of texts) {
      const td = document.createElement('td');
      td.textContent = x;
      td.dataset.i18nData = '';
      tr.append(td);
    }
    tbl.append(tr);
  }
  const acc = $('learned-acc');
  Object.assign(acc.dataset, { hitCopy, nCopy, hitOther, nOther });
  acc.textContent = t(nCopy ? 'learned.acc' : 'learned.acc.none', { a: hitCopy, b: nCopy, c: hitOther, d: nOther });
}

// The section: shown on the path's step (state.lm); its sequence sent again when the language
// or the seed changed.
export function drawLearned() {
  const m = layeredModel(), sec = $('learned');
  sec.hidden = !m || !state.lm;
  if (sec.hidden) { writeSeed(); return; }
  if (!result || result.key !== keyNow()) {
    $('learned-result').hidden = true;
    if (tried !== keyNow()) runLearned(); // once: an error stays shown until the next try
    return;
  }
  const res = $('learned-result');
  res.hidden = false;
  res.dataset.n = String(seq);
  res.dataset.seed = own === null ? String(seed) : '';
  res.dataset.ind = result.ind ? `${result.layers[result.ind.layer]},${result.ind.head}` : '';
  res.dataset.prev = result.prev.head >= 0 ? `0,${result.prev.head}` : '';
  $('learned-seq').textContent = result.half ? t('learned.seq', { n: result.half }) : t('learned.seq.own', { n: result.L - 1 });
  $('learned-source').textContent = t(result.held ? 'learned.source.both' : 'learned.source.page');
  const ind = result.ind, pr = result.prev;
  $('learned-found').textContent = ind && pr.head >= 0 ? t('learned.found', {
    ph: pr.head, pl: 0, il: result.layers[ind.layer], ih: ind.head,
  }) : '';
  const labels = result.tokens.map((w, j) => (j === 0 ? t('tok.start') : w));
  const d = { ...result, labels };
  const o = open && open !== 'auto' ? open : null;
  drawModelView(d, o, pick);
  drawPreds(result);
}
