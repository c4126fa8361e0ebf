// 实验三, no peeking at the future: one word of the sentence replaced, with the causal mask and
// without it, and how much each row's output changed.

import { isStart, isWordToken, models, pageWords, runSeq, state, t, view, writeUrl } from './state.js';
import { EXP3_WORDS } from './twins.js';
import { $, fillSelect, tokenItems } from './dom.js';
import { loadVocab, post, vocabLists } from './api.js';
import { readTensor } from './tensors.js';
import { renderError, setFailure, setStatus, status } from './status.js';
import { drawExp3Maps } from './exp3map.js';
import { setCalls } from './callbox.js';

// ---- 实验三: no peeking at the future --------------------------------------------------------
//
// The sentence's words A and the same words with word t replaced, B, go to the API twice each
// (causal top-left, then without the mask) as tokens with base64 outputs; per row i the page
// shows max_c |A_out[i][c] − B_out[i][c]| and whether the row's float32 values are bit for bit
// the same, in a table and on A's weights (exp3map.js). The tokens go without the model's start
// token, which the API puts back (so A's rows are the run's).

let exp3 = null; // {key, t, w, on, off}: the runs of the last settings; on/off are rows or null
let exp3Runs = 0; // runs so far, shown as the result's data-runs (the tests wait on it)

// Position t: the chosen one, else the last word (数据库 in "Redis 是一个内存数据库。").
function exp3Pos(v) {
  if (Number.isInteger(state.e3t) && state.e3t >= 0 && state.e3t < v.l) return state.e3t;
  for (let i = v.l - 1; i >= 0; i--) if (isWordToken(v.tokens[i]) && !isStart(v, i)) return i;
  return v.l - 1;
}

// The replacement: the chosen word, else the chapter's (缓存 for 数据库, cache for database in
// the English twin; twins.js), else the page language's replacement, else the vocabulary's first
// word that differs.
function exp3Word(v, vocab, t3) {
  if (state.e3w) return state.e3w;
  const cur = v.tokens[t3];
  const mine = Object.values(EXP3_WORDS).filter((x) => x.word === cur).map((x) => x.replacement);
  const words = [...mine, EXP3_WORDS[state.lang].replacement, EXP3_WORDS[state.lang].word].concat(vocab || []);
  return words.find((w) => w !== cur && (!vocab || vocab.includes(w))) || cur;
}

const exp3Key = (v, t3, w) => JSON.stringify([v.model, v.tokens, t3, w]);

// A change as nodes: from 0.01 on plain decimals (2.00, 0.0312), below that 2.48 × 10<sup>-3</sup>
// (a power of ten, readable from the back of a room): the exponent in a <sup> of ordinary
// digits, which every font has (superscript digits and minus, U+2070 on, are missing from many,
// the projector's CJK font among them).
export function pow10(x) {
  if (x >= 0.01) return [x.toPrecision(3)];
  let e = Math.floor(Math.log10(x)), m = x / 10 ** e;
  if (m >= 9.995) { m /= 10; e += 1; }
  const sup = document.createElement('sup');
  sup.textContent = String(e);
  return [`${m.toFixed(2)} × 10`, sup];
}

// A row counts as changed when its output moved by more than REL_THRESHOLD of its length
// (‖Δ output‖ / ‖output‖); float32 rounding moves a row by about 1e-7 of it, which is not a change
// of the row's meaning (实验三's verdicts, its table's red bars and the heatmaps' marks).
export const REL_THRESHOLD = 1e-5;
export const isChanged = (r) => !r.same && r.rel > REL_THRESHOLD;


// Rows of two outputs (L, E): {same: every bit equal, max: the largest |difference|, rel: the
// length of the difference over the length of a's row}.
function deltaRows(a, b, l, e) {
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length), ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  return Array.from({ length: l }, (_, i) => {
    let same = true, max = 0, dd = 0, aa = 0;
    for (let c = i * e; c < (i + 1) * e; c++) {
      if (ua[c] !== ub[c]) same = false;
      max = Math.max(max, Math.abs(a[c] - b[c]));
      dd += (a[c] - b[c]) ** 2;
      aa += a[c] ** 2;
    }
    return { same, max, rel: aa > 0 ? Math.sqrt(dd / aa) : 0 };
  });
}

// A share as a percentage: 12%, 0.12%, 0.000024%.
const percent = (x) => `${x >= 0.1 ? (x * 100).toFixed(0) : (x * 100).toPrecision(2)}%`;

// Runs 实验三 with the causal mask (causal true) or without it; the settings come from the
// selects. Causal on starts the experiment again; off needs it started.
export async function runExp3(causal) {
  const v = view;
  if (!v || !v.words) return;
  const seq = runSeq;
  let vocab = null;
  try { vocab = await loadVocab(v.model); } catch { /* the default word then */ }
  const t3 = exp3Pos(v), w = exp3Word(v, vocab, t3), key = exp3Key(v, t3, w);
  if (causal || !exp3 || exp3.key !== key) exp3 = { key, t: t3, w, on: null, off: null };
  const off = v.start === 0 ? 1 : 0, a = v.tokens.slice(off), b = a.slice();
  b[t3 - off] = w;
  const body = (tokens, nw = false) => Object.assign({ model: v.model, tokens, need_weights: nw, encoding: 'base64' },
    nw ? { outputs: ['weights'] } : {}, causal ? { causal: 'top_left' } : {});
  setStatus('loading', 'status.busy');
  try {
    // The outputs compared come from requests alike but for word t; A's weights (for the
    // heatmaps) from a third, which asks for them alone.
    const bodies = [body(a), body(b), body(a, 'per_head')];
    const [ra, rb, rw] = await Promise.all(bodies.map((x) => post('v1/attention', x)));
    if (seq !== runSeq || view !== v) return;
    const oa = readTensor(ra.output), ob = readTensor(rb.output), wa = readTensor(rw.weights);
    exp3[causal ? 'on' : 'off'] = deltaRows(oa.data, ob.data, v.l, oa.shape[oa.shape.length - 1]);
    const hw = v.l * v.l; // A's weights per head, (H, L, L)
    exp3[causal ? 'wOn' : 'wOff'] = Array.from({ length: wa.data.length / hw }, (_, h) => wa.data.slice(h * hw, (h + 1) * hw));
    exp3.runs = (exp3Runs += 1);
    exp3[causal ? 'callsOn' : 'callsOff'] = bodies.map((x) => ({ path: 'v1/attention', body: x }));
    setCalls('exp3', (exp3.callsOn || []).concat(exp3.callsOff || []));
    state.e3 = causal ? 1 : 2;
    writeUrl();
    setStatus('ok', 'status.ok', status.time);
  } catch (e) {
    if (seq !== runSeq) return;
    setFailure(e);
    renderError();
    setStatus('error', 'status.error');
  }
  drawExp3(v);
}

// After a run from a link: the experiment's runs the URL records.
export async function resumeExp3(v) {
  if (!v.words || !state.e3) return;
  const t3 = exp3Pos(v), cur = exp3 && exp3.key === exp3Key(v, t3, exp3Word(v, vocabLists.get(v.model) || null, t3));
  if (cur && exp3.on && (state.e3 < 2 || exp3.off)) { drawExp3(v); return; }
  const want = state.e3;
  await runExp3(true);
  if (want >= 2 && exp3 && exp3.on) await runExp3(false);
}

export function drawExp3(v) {
  $('exp3').hidden = !v.words;
  if (!v.words) return;
  const t3 = exp3Pos(v);
  fillSelect($('exp3-pos'), tokenItems(v.qTokens), t3);
  // The replacement: any word of the model's vocabulary (the list comes once it is loaded).
  const vocab = vocabLists.get(v.model) || null;
  if (!vocab) loadVocab(v.model).then(() => { if (view === v) drawExp3(v); }).catch(() => {});
  const w = exp3Word(v, vocab, t3);
  const m = models && models.models.find((x) => x.name === v.model);
  const words = pageWords(vocab || [], m && m.start_token);
  fillSelect($('exp3-word'), (words.includes(w) ? words : [w].concat(words)).map((x) => [x, x]), w);
  const cur = exp3 && exp3.key === exp3Key(v, t3, w) ? exp3 : null;
  $('exp3-off').disabled = !(cur && cur.on);
  const res = $('exp3-result');
  res.hidden = !(cur && cur.on);
  res.dataset.runs = cur ? String(cur.runs || 0) : '0';
  if (!cur || !cur.on) return;
  const before = (rows) => rows.slice(0, t3);
  const on = cur.on, off = cur.off;
  const onBad = before(on).filter((r) => !r.same).length;
  // With the mask the rows before t must be the same bit for bit: any difference is a failure.
  $('exp3-verdict-on').textContent = onBad
    ? t('exp3.on.bad', { c: onBad, n: t3 })
    : t('exp3.on.ok', { n: t3, m: on.slice(t3).filter(isChanged).length, k: v.l - t3 });
  const vOff = $('exp3-verdict-off');
  vOff.hidden = !off;
  if (off) { // without it, the rows that changed by more than rounding, each by how much
    const rows = before(off).map((r, i) => ({ ...r, i })), changed = rows.filter(isChanged).sort((a, b) => b.rel - a.rel);
    const rounding = rows.filter((r) => !r.same && !isChanged(r)).length;
    // Named one by one from 1% of their length on (at least the largest); the others together.
    const named = changed.filter((r, k) => k === 0 || r.rel >= 0.01), small = changed.slice(named.length);
    const names = named.map((r) => t('exp3.row.changed', { w: v.qTokens[r.i], p: percent(r.rel) }))
      .concat(small.length ? [t('exp3.off.small', { k: small.length, p: percent(small[0].rel) })] : []).join(t('list.sep'));
    vOff.textContent = changed.length ? t('exp3.off.leak', { c: changed.length, n: t3, rows: names }) : t('exp3.off.none');
    if (rounding) { // the rows that moved by float rounding alone: a sentence of their own
      const r = document.createElement('span');
      r.className = 'rounding';
      r.textContent = t('exp3.rounding', { z: rounding });
      vOff.append(' ', r);
    }
    vOff.dataset.changed = changed.map((r) => r.i).join(',');
    vOff.dataset.rounding = String(rounding);
  }
  drawExp3Maps(v, cur, t3, isChanged);
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
      } else { // a power of ten on a bar whose length is log10 of it, from 1e-8 to 1: red for a
        // change, grey for rounding (REL_THRESHOLD)
        td.classList.add(isChanged(r) ? 'nonzero' : 'tiny');
        td.style.setProperty('--w', String(Math.max(0.02, Math.min(1, (Math.log10(r.max) + 8) / 8))));
        const num = document.createElement('span');
        num.dataset.i18nData = '';
        num.append(...pow10(r.max));
        const rel = document.createElement('span');
        rel.className = 'rel';
        rel.dataset.i18nData = '';
        rel.textContent = ` (${percent(r.rel)})`;
        td.dataset.rel = String(r.rel);
        td.append(num, rel);
      }
      tr.append(td);
    }
    tbl.append(tr);
  }
}
