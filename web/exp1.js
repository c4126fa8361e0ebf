// 实验一, guess then compare: the reader types how a query word's attention splits over a few
// candidate words, and sees the guess beside every head's weights, one picture per head.

import { PRONOUNS, isStart, isWordToken, state, t, writeUrl } from './state.js';
import { EXP1_CANDIDATES } from './twins.js';
import { setCalls } from './callbox.js';
import { $, fillSelect, tokenItems } from './dom.js';
import { rowOf } from './maps.js';
import { headName, headNameEl } from './heads.js';

// ---- 实验一: guess, then compare ------------------------------------------------------------
//
// The guess is a weight typed per candidate key (any number ≥ 0), normalised to sum 1. It is
// compared with the query's row in every head, all S keys of it, by the L1 distance
// Σ_j |guess_j − w_j| (0: the same row; 2: no overlap). The start token stays in the row: a head
// that rests on it shows no relation for this word, and the guess, which gives it 0, does not
// match that. The chapter's sentence (第 6 章, 实验一) has the chapter's four candidates, and its
// English twin the same four in English (twins.js).

// The query word of 实验一: the chosen one, else the first pronoun, else the last word.
function exp1Query(v) {
  if (Number.isInteger(state.e1q) && state.e1q >= 0 && state.e1q < v.l) return state.e1q;
  const p = v.qTokens.findIndex((x) => PRONOUNS.includes(x));
  if (p >= 0) return p;
  for (let i = v.l - 1; i >= 0; i--) if (isWordToken(v.qTokens[i]) && !isStart(v, i)) return i;
  return v.l - 1;
}

// The candidates and the guess as a Map key -> typed weight (NaN: not typed yet): the URL's
// ("j:w,j:,…"), else the chapter's four when the sentence has them, else every word before the
// query (the query itself when there is none).
function exp1Guess(v, q) {
  const g = new Map();
  for (const part of state.e1g.split(',')) {
    const m = /^(\d+):(\d+(?:\.\d+)?)?$/.exec(part.trim());
    if (m && Number(m[1]) < v.s) g.set(Number(m[1]), m[2] === undefined ? NaN : Number(m[2]));
  }
  if (g.size || state.e1g) return g;
  for (const words of [EXP1_CANDIDATES.zh, EXP1_CANDIDATES.en]) {
    const four = words.map((w) => v.kTokens.indexOf(w));
    if (four.every((j) => j >= 0)) { for (const j of four) g.set(j, NaN); return g; }
  }
  for (let j = 0; j < q; j++) if (isWordToken(v.kTokens[j]) && !isStart(v, j)) g.set(j, NaN);
  if (!g.size) g.set(q, NaN);
  return g;
}

function setGuess(g) {
  state.e1g = [...g].sort((a, b) => a[0] - b[0]).map(([j, w]) => `${j}:${Number.isNaN(w) ? '' : w}`).join(',') || 'none';
  writeUrl();
}

// The guess over all S keys, summing to 1 (null when no weight above 0 was typed).
function normGuess(v, g) {
  const out = new Float64Array(v.s);
  let sum = 0;
  for (const [j, w] of g) if (w > 0) { out[j] = w; sum += w; }
  if (!(sum > 0)) return null;
  for (let j = 0; j < v.s; j++) out[j] /= sum;
  return out;
}

// A word after the query: not read yet when the model reads the query in order.
const unread = (q, j) => j > q;

function notYet() {
  const s = document.createElement('span');
  s.className = 'unread';
  s.textContent = t('exp1.unread');
  return s;
}

export function drawExp1(v) {
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
    if (isStart(v, j)) return; // the start token is no candidate: no one would guess it
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'chip';
    b.textContent = tok;
    b.dataset.j = j;
    b.setAttribute('aria-pressed', String(g.has(j)));
    b.addEventListener('click', () => {
      const now = exp1Guess(v, q);
      if (now.has(j)) now.delete(j); else now.set(j, NaN);
      setGuess(now);
      drawExp1(v);
    });
    keys.append(b);
  });
  const guess = $('exp1-guess');
  guess.textContent = '';
  let later = null;
  for (const [j, w] of [...g].sort((a, b) => a[0] - b[0])) {
    const row = document.createElement('label');
    row.className = 'guess-row';
    const name = document.createElement('span');
    name.className = 'tok';
    const word = document.createElement('span');
    word.dataset.i18nData = '';
    word.textContent = v.kTokens[j];
    name.append(word);
    if (unread(q, j)) { name.append(' ', notYet()); later = later === null ? j : later; }
    const input = document.createElement('input');
    Object.assign(input, { type: 'number', min: '0', step: 'any', inputMode: 'decimal', placeholder: t('exp1.placeholder') });
    if (!Number.isNaN(w)) input.value = String(w);
    input.dataset.j = j;
    input.dataset.testid = `exp1-weight-${j}`;
    input.setAttribute('aria-label', t('exp1.weight', { k: v.kTokens[j] }));
    const share = document.createElement('output');
    share.className = 'share';
    share.dataset.j = j;
    share.dataset.i18nData = '';
    input.addEventListener('input', () => {
      const now = exp1Guess(v, q), x = input.value.trim() === '' ? NaN : Number(input.value);
      now.set(j, Number.isFinite(x) && x >= 0 ? x : NaN);
      setGuess(now);
      drawShares(v);
      drawExp1Result(v);
    });
    row.append(name, input, share);
    guess.append(row);
  }
  const why = $('exp1-unread');
  why.hidden = later === null;
  if (later !== null) why.textContent = t('exp1.unread.why', { k: v.kTokens[later], q: v.qTokens[q] });
  $('exp1-start').hidden = v.start !== 0;
  // The experiment compares the guess with the sentence's own run: its request is the call.
  setCalls('exp1', [{ path: v.request.path, body: v.request.body }]);
  drawShares(v);
  drawExp1Result(v);
}

// The normalised share of each candidate beside its box.
function drawShares(v) {
  const n = normGuess(v, exp1Guess(v, exp1Query(v)));
  for (const o of $('exp1-guess').querySelectorAll('output')) o.textContent = n ? n[Number(o.dataset.j)].toFixed(2) : '–';
}

// A pair of bars: the guess (when given) and the head's weight, with their numbers.
function bars(guess, model) {
  const box = document.createElement('div');
  box.className = 'e1-bars';
  for (const [cls, w] of [['g', guess], ['m', model]]) {
    const line = document.createElement('div');
    line.className = `e1-bar ${cls}`;
    if (w === null) { line.classList.add('none'); box.append(line); continue; }
    line.dataset.w = String(w);
    line.style.setProperty('--w', String(Math.max(0, Math.min(1, w))));
    const num = document.createElement('span');
    num.dataset.i18nData = '';
    num.textContent = w.toFixed(2);
    line.append(num);
    box.append(line);
  }
  return box;
}

export function drawExp1Result(v) {
  const res = $('exp1-result');
  res.hidden = !state.e1;
  if (!state.e1) return;
  const q = exp1Query(v), cand = exp1Guess(v, q), guess = normGuess(v, cand);
  const verdict = $('exp1-verdict'), pics = $('exp1-pics');
  pics.textContent = '';
  delete res.dataset.closest;
  if (!guess) { verdict.textContent = t('exp1.none'); return; }
  // Each head's row and its L1 distance to the guess.
  const cols = v.heads.map((m, h) => ({ key: String(h), row: rowOf(m, v, q, new Float32Array(v.s)) }));
  for (const c of cols) c.d = c.row.reduce((s, w, j) => s + Math.abs(guess[j] - w), 0);
  let best = 0;
  for (let h = 1; h < cols.length; h++) if (cols[h].d < cols[best].d) best = h;
  res.dataset.closest = String(best);
  verdict.textContent = t('exp1.closest', { head: headName(v, String(best)), d: cols[best].d.toFixed(2) });
  const js = [...cand.keys()].sort((a, b) => a - b);
  for (const c of cols) {
    const fig = document.createElement('figure');
    fig.className = 'e1-pic' + (c.key === String(best) ? ' closest' : '');
    fig.dataset.h = c.key;
    fig.dataset.d = String(c.d);
    const cap = document.createElement('figcaption');
    const d = document.createElement('span');
    d.className = 'e1-d';
    d.textContent = t('exp1.pic.l1', { d: c.d.toFixed(2) });
    cap.append(headNameEl(v, c.key), ' ', d);
    fig.append(cap);
    const line = (label, j, g, w, cls) => {
      const r = document.createElement('div');
      r.className = `e1-row ${cls}`;
      if (j !== null) r.dataset.j = String(j);
      const l = document.createElement('span');
      l.className = 'e1-key';
      l.append(label);
      r.append(l, bars(g, w));
      fig.append(r);
    };
    let other = 0;
    c.row.forEach((w, j) => { if (!cand.has(j) && !(v.start === 0 && j === 0)) other += w; });
    for (const j of js) {
      const word = document.createElement('span');
      word.dataset.i18nData = '';
      word.textContent = v.kTokens[j];
      const label = document.createDocumentFragment();
      label.append(word);
      if (unread(q, j)) label.append(' ', notYet());
      line(label, j, guess[j], c.row[j], 'cand');
    }
    if (v.start === 0 && !cand.has(0)) {
      line(t('exp1.pic.start', { s: v.kTokens[0] }), 0, null, c.row[0], 'start');
    }
    line(t('exp1.pic.other'), null, null, other, 'other');
    pics.append(fig);
  }
}
