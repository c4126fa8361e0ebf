// 实验一, guess then compare: the reader guesses the weights of a query word's row and compares
// the guess with every head's row and their mean.

import { PRONOUNS, isStart, isWordToken, state, t, writeUrl } from './state.js';
import { $, barCell, fillSelect, tokenItems } from './dom.js';
import { rowOf } from './maps.js';
import { headName, headNameEl } from './heads.js';

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
  for (let i = v.l - 1; i >= 0; i--) if (isWordToken(v.qTokens[i]) && !isStart(v, i)) return i;
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
  for (let j = 0; j < q; j++) if (isWordToken(v.kTokens[j]) && !isStart(v, j)) g.set(j, GUESS_START);
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

export function drawExp1Result(v) {
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
