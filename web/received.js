// "What this word received": for the selected row and head, the keys whose values added the most
// to the head's output (weight × |v_j|, from the trace) and, for a model with a vocabulary, the
// vocabulary word whose value vector that output is nearest to.

import { isStart, state, t, view } from './state.js';
import { barCell } from './dom.js';
import { loadVocab } from './api.js';
import { headName } from './heads.js';
import { nearestWord, norm, valueTable } from './trace.js';
import { errorBox } from './errors.js';

const TOP = 5; // keys listed

const el = (tag, cls, text) => {
  const x = document.createElement(tag);
  if (cls) x.className = cls;
  if (text !== undefined) x.textContent = text;
  return x;
};

// Draws into box what row i of head h received; r holds the head's rows (steps.js headRows).
export function drawReceived(v, h, i, r, box) {
  const q = v.qTokens[i], name = headName(v, String(h));
  box.append(el('h3', '', t('recv.title', { q, name })), el('p', 'note', t('recv.how')));
  const vn = r.vv.map(norm);
  const parts = r.weights[i].map((w, j) => ({ j, w, c: w * vn[j] })).filter((x) => x.c > 0)
    .sort((a, b) => b.c - a.c || a.j - b.j).slice(0, TOP);
  const top = parts.length ? parts[0].c : 1;
  const tbl = el('table', 'num received');
  tbl.dataset.testid = 'recv-top';
  const head = el('tr');
  for (const key of ['row.col.key', 'row.col.weight', 'row.col.vnorm', 'row.col.contrib']) head.append(el('th', '', t(key)));
  tbl.append(head);
  for (const p of parts) {
    const tr = el('tr', isStart(v, p.j) ? 'start' : '');
    tr.dataset.j = p.j;
    const k = el('th', '', v.kTokens[p.j]);
    k.dataset.i18nData = '';
    tr.append(k);
    for (const [x, bar] of [[p.w, false], [vn[p.j], false], [p.c, true]]) {
      const td = el('td', '', x.toFixed(2));
      td.dataset.i18nData = '';
      td.dataset.x = String(x);
      if (bar) barCell(td, x / top);
      tr.append(td);
    }
    tbl.append(tr);
  }
  const wrap = el('div', 'canvas-wrap');
  wrap.append(tbl);
  box.append(wrap);
  if (!(v.words && v.model)) return;
  // The nearest vocabulary word, once the vocabulary's value vectors are read (once per model).
  const line = el('p', 'verdict nearest', t('recv.loading'));
  line.dataset.testid = 'recv-nearest';
  box.append(line, el('p', 'note', t('recv.nearest.what')));
  const out = r.out[i];
  const still = () => view === v && line.isConnected && String(state.head) === String(h);
  loadVocab(v.model).then((vocab) => valueTable(v.model, vocab)).then((tab) => {
    if (!still()) return;
    const best = nearestWord(tab, h, out);
    if (!best) { line.textContent = t('recv.zero', { q }); line.dataset.word = ''; return; }
    const word = v.start === 0 && best.word === v.tokens[v.start] ? t('tok.start') : best.word;
    line.textContent = t('recv.nearest', { q, name, w: word, c: best.cos.toFixed(3) });
    line.dataset.word = best.word;
    line.dataset.cos = String(best.cos);
  }).catch((e) => {
    if (!still()) return;
    const failed = errorBox(e, 'recv.noprobe', 'note nearest');
    Object.assign(failed.dataset, { testid: 'recv-nearest', word: '' });
    line.replaceWith(failed);
  });
}
