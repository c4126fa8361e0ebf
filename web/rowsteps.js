// One row of one head, step by step, as 第 6 章 shows 它's: per key its score q·k ÷ √d_k, the
// score after the mask (when the row has a mask), its softmax weight, |v| and weight × |v|;
// beside them, on the switch, the same row without ÷ √d_k, and, when the row is masked, the
// softmax taken first and zeroed after (the wrong order); then × V, the head's output row. Under
// the table one line for each thing that needs saying: no mask, scores far below the largest,
// the switch's largest weights and entropies, the broken sum; and for 它's row of the chapter's
// sentence the chapter's own table beside the model's.
//
// The weights are attnd's (the trace); the row without ÷ √d_k and the softmax-then-zero row are
// computed here from the trace's scores, in float64.

import { LESSON_MODEL, isStart, state, t, writeUrl } from './state.js';
import { barCell } from './dom.js';
import { headName } from './heads.js';
import { norm } from './trace.js';
import { f2, note, scaleText, scrollBox, table } from './tables.js';
import { CHAPTER_ROW, TWINS } from './twins.js';

const DIM_LIMIT = 16; // the output row's first 16 dims
const FAR = 20; // a score this far below the row's largest gets e^−20 of its weight, or less

// softmax of xs in float64, −∞ giving 0 (all zeros when every entry is −∞).
export function softmax(xs) {
  const m = Math.max(...xs);
  if (m === -Infinity) return xs.map(() => 0);
  const e = xs.map((x) => (x === -Infinity ? 0 : Math.exp(x - m)));
  const z = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / z);
}

// The entropy of weights w in bits: 0 for one key taking everything, log2 n for n equal ones.
export const entropyBits = (w) => w.reduce((s, x) => (x > 0 ? s - x * Math.log2(x) : s), 0);

const sum = (xs) => xs.reduce((a, b) => a + b, 0);

// The row's numbers: attnd's (score, masked, weight) and the page's own (raw: q·k unscaled, its
// softmax, and the softmax of the scores zeroed where the mask blocks).
function rowNumbers(r, i) {
  const scores = r.scores[i], masked = r.masked[i], weights = r.weights[i];
  const raw = scores.map((x) => x / r.scale);
  // Without ÷ √d_k the mask stays where it was (an added bias is not scaled: it is added after).
  const rawMasked = masked.map((x, j) => (x === -Infinity ? -Infinity : raw[j] + (x - scores[j])));
  const blocked = masked.map((x) => x === -Infinity);
  const first = softmax(scores);
  return {
    scores, masked, weights, raw, rawWeights: softmax(rawMasked), blocked,
    after: first.map((x, j) => (blocked[j] ? 0 : x)),
    hasMask: masked.some((x, j) => x !== scores[j]), hasBlocked: blocked.some(Boolean),
  };
}

// A cell of the row's table.
function cell(tr, col, x, fmt, bar = false) {
  const td = document.createElement('td');
  td.dataset.col = col;
  td.dataset.x = String(x);
  td.dataset.i18nData = '';
  td.textContent = fmt(x);
  if (x === -Infinity) td.classList.add('masked');
  if (bar) barCell(td, x);
  tr.append(td);
}

// The chapter's table of 它's row beside the model's (twins.js CHAPTER_ROW), when v is the
// chapter's sentence (either language), h its coreference head and i the row of its pronoun.
function chapterBox(v, h, i, n) {
  const lang = ['zh', 'en'].find((l) => v.words && v.input && v.input.text === TWINS[CHAPTER_ROW.preset][l]);
  if (!lang || !v.headNames || v.headNames[h] !== CHAPTER_ROW.head || v.tokens[i] !== CHAPTER_ROW.query[lang]) return null;
  const js = CHAPTER_ROW.rows.map((x) => v.tokens.indexOf(x[lang]));
  if (js.some((j) => j < 0)) return null;
  const box = document.createElement('div');
  box.className = 'chapter-row';
  box.dataset.testid = 'chapter-row';
  const tbl = document.createElement('table');
  tbl.className = 'num chapter';
  const cap = document.createElement('caption');
  cap.textContent = t('chapter.title');
  tbl.append(cap);
  const head = document.createElement('tr');
  for (const k of ['chapter.col.word', 'chapter.col.book', 'chapter.col.model']) {
    const th = document.createElement('th');
    th.textContent = t(k);
    head.append(th);
  }
  tbl.append(head);
  CHAPTER_ROW.rows.forEach((x, k) => {
    const j = js[k], tr = document.createElement('tr');
    tr.dataset.i18nData = '';
    tr.dataset.j = String(j);
    const th = document.createElement('th');
    th.textContent = x[lang];
    const book = document.createElement('td');
    book.textContent = `${x.score.toFixed(1)} → ${x.weight.toFixed(2)}`;
    book.dataset.score = String(x.score);
    book.dataset.weight = String(x.weight);
    const mine = document.createElement('td');
    mine.textContent = `${f2(n.scores[j])} → ${n.weights[j].toFixed(2)}`;
    mine.dataset.score = String(n.scores[j]);
    mine.dataset.weight = String(n.weights[j]);
    tr.append(th, book, mine);
    tbl.append(tr);
  });
  box.append(scrollBox(tbl));
  // Why they differ, in the model's own numbers: the antecedent's score against the others'.
  const ante = js[1], others = js.filter((j) => j !== ante);
  const low = Math.max(...others.map((j) => n.scores[j]));
  box.append(note(t('chapter.why', {
    sum: sum(CHAPTER_ROW.rows.map((x) => x.weight)).toFixed(2), low: f2(low),
    start: v.start >= 0 ? n.weights[v.start].toFixed(3) : '0', gap: (n.scores[ante] - low).toFixed(1),
    w: n.weights[ante].toFixed(2),
  })));
  return box;
}

// The lines under the row's table.
function rowNotes(v, h, n, dk, redrawLink) {
  const out = [];
  if (!n.hasMask) out.push(note(t('row.nomask')));
  // Scores far below the row's largest: softmax gives them nothing, as a mask would.
  const finite = n.masked.filter((x) => x > -Infinity), top = Math.max(...finite);
  const far = finite.filter((x) => x < top - FAR);
  if (far.length) {
    const low = Math.min(...far);
    const line = note(t('row.ignored', { low: f2(low), top: f2(top), gap: (top - low).toFixed(1) }));
    if (v.model === LESSON_MODEL) { // why, for the heads built by hand: a sentence of its own
      const why = document.createElement('span');
      why.textContent = t('row.ignored.lesson');
      line.append(' ', why);
    }
    line.dataset.testid = 'row-ignored';
    out.push(line);
  }
  if (state.nosqrt) { // the largest weight and the entropy, with and without ÷ √d_k
    const open = n.blocked.filter((b) => !b).length;
    const w1 = Math.max(...n.weights), w2 = Math.max(...n.rawWeights);
    const h1 = entropyBits(n.weights), h2 = entropyBits(n.rawWeights);
    const line = note(t('sqrt.verdict', {
      dk, w1: w1.toFixed(3), h1: h1.toFixed(2), w2: w2.toFixed(3), h2: h2.toFixed(2),
      hmax: Math.log2(Math.max(1, open)).toFixed(2), n: open,
    }), 'verdict');
    Object.assign(line.dataset, { testid: 'sqrt-verdict', dk: String(dk), w1: String(w1), w2: String(w2), h1: String(h1), h2: String(h2) });
    out.push(line, note(t(w2 - w1 > 0.01 ? 'sqrt.sharper' : 'sqrt.same')));
    if (redrawLink) out.push(redrawLink);
  }
  if (n.hasBlocked) { // masked before the softmax, or zeroed after it
    const a = sum(n.weights), b = sum(n.after);
    const line = note(t('row.after.verdict', { a: a.toFixed(2), b: b.toFixed(2), lost: (1 - b).toFixed(2) }), 'verdict');
    Object.assign(line.dataset, { testid: 'after-verdict', before: String(a), after: String(b) });
    out.push(line);
  }
  return out;
}

// The link to the seeded d_k = 64 example (compute.js preset dk) with the switch on, from this
// page's URL (the path's step and the language stay).
function dkLink() {
  const q = new URLSearchParams(location.search);
  for (const k of [...q.keys()]) if (!['lang', 'step', 'large', 'api'].includes(k)) q.delete(k);
  q.set('p', 'dk');
  q.set('nosqrt', '1');
  const a = document.createElement('a');
  a.href = `?${q}`;
  a.className = 'dk-link';
  a.dataset.testid = 'dk-link';
  a.textContent = t('sqrt.try');
  const p = document.createElement('p');
  p.className = 'note';
  p.append(a);
  return p;
}

// The row i of head h (r: the head's rows, steps.js headRows); redraw draws the steps again
// (the switch changed).
export function rowTables(v, h, i, r, redraw) {
  const wrap = document.createElement('div');
  wrap.className = 'row-steps';
  const name = headName(v, String(h)), q = v.qTokens[i];
  const dk = r.q[0].length;
  const n = rowNumbers(r, i);
  // The switch: the same row without ÷ √d_k, beside it.
  const sw = document.createElement('label');
  sw.className = 'toggle sqrt-switch';
  const box = document.createElement('input');
  Object.assign(box, { type: 'checkbox', checked: state.nosqrt });
  box.dataset.testid = 'nosqrt';
  box.addEventListener('change', () => { state.nosqrt = box.checked; writeUrl(); redraw(); });
  const label = document.createElement('span');
  label.textContent = t('sqrt.switch');
  sw.append(box, ' ', label);
  wrap.append(sw);
  const tbl = document.createElement('table');
  tbl.className = 'num rowtable';
  Object.assign(tbl.dataset, { testid: 'row-steps', row: String(i), head: String(h) });
  const cap = document.createElement('caption');
  cap.textContent = t('row.title', { q, name });
  tbl.append(cap);
  const cols = [['key', 'row.col.key'], ['score', 'row.col.score']];
  if (n.hasMask) cols.push(['masked', 'row.col.masked']);
  cols.push(['weight', 'row.col.weight']);
  if (state.nosqrt) cols.push(['raw', 'row.col.raw'], ['rawweight', 'row.col.rawweight']);
  if (n.hasBlocked) cols.push(['after', 'row.col.after']);
  cols.push(['vnorm', 'row.col.vnorm'], ['contrib', 'row.col.contrib']);
  const head = document.createElement('tr');
  for (const [col, key] of cols) {
    const th = document.createElement('th');
    th.textContent = t(key, { div: scaleText(r.scale, dk) });
    th.dataset.col = col;
    head.append(th);
  }
  tbl.append(head);
  const vn = r.vv.map(norm);
  const values = {
    score: n.scores, masked: n.masked, weight: n.weights, raw: n.raw, rawweight: n.rawWeights, after: n.after,
    vnorm: vn, contrib: n.weights.map((w, j) => w * vn[j]),
  };
  for (let j = 0; j < v.s; j++) {
    const tr = document.createElement('tr');
    tr.dataset.j = j;
    if (isStart(v, j)) tr.className = 'start';
    for (const [col] of cols) {
      if (col === 'key') {
        const k = document.createElement('th');
        k.textContent = v.kTokens[j];
        k.dataset.i18nData = '';
        tr.append(k);
      } else {
        cell(tr, col, values[col][j], f2, ['weight', 'rawweight', 'after'].includes(col));
      }
    }
    tbl.append(tr);
  }
  // The sums of the weights' columns: 1, 1, and less than 1 zeroed after the softmax.
  const foot = document.createElement('tr');
  foot.className = 'sum';
  for (const [col] of cols) {
    if (col === 'key') {
      const th = document.createElement('th');
      th.textContent = t('row.sum');
      foot.append(th);
    } else {
      const td = document.createElement('td');
      if (['weight', 'rawweight', 'after'].includes(col)) {
        const s = sum(values[col]);
        td.textContent = s.toFixed(2);
        Object.assign(td.dataset, { sum: col, x: String(s), i18nData: '' });
      }
      foot.append(td);
    }
  }
  tbl.append(foot);
  wrap.append(scrollBox(tbl));
  wrap.append(...rowNotes(v, h, n, dk, v.mode === 'sdpa' && dk === 64 ? null : dkLink()));
  const chapter = chapterBox(v, h, i, n);
  if (chapter) wrap.append(chapter);
  // × V: the head's output row (its first DIM_LIMIT dims).
  const out = r.out[i], shown = Math.min(out.length, DIM_LIMIT);
  wrap.append(scrollBox(table(t(shown < out.length ? 'row.out.cut' : 'row.out', { q, name, d: out.length, shown, n: norm(out).toFixed(2) }),
    [out.slice(0, shown)], [q], Array.from({ length: shown }, (_, c) => `d${c}`), f2, { testid: 'row-out' })));
  return wrap;
}
