// 实验二, Q/K/V as a search system: four "documents", each with a key (what it is indexed by)
// and a value (what it returns), both editable; a query gives weights over the documents and an
// output that mixes their values, computed by POST /v1/sdpa on these small labelled vectors.

import { state, t } from './state.js';
import { $ } from './dom.js';
import { post } from './api.js';
import { readTensor } from './tensors.js';
import { hideError, showError } from './errors.js';
import { setCalls } from './callbox.js';

// ---- The documents --------------------------------------------------------------------------
//
// Keys and the query have three labelled features (exp2.kf.*), values three others (exp2.vf.*):
// q is (1, 3), k is (4, 3), v is (4, 3). The API scales by 1/√3, as softmax(qkᵀ/√d_k)v does.

const KEY_FEATURES = ['errors', 'settings', 'people'];
const VALUE_FEATURES = ['cause', 'switch', 'contact'];
const DOCS = [
  { name: 'log', key: [2, 0, 0], value: [1, 0, 0] },
  { name: 'config', key: [0, 2, 0], value: [0, 1, 0] },
  { name: 'report', key: [1, 1, 0], value: [0.5, 0.5, 0] },
  { name: 'people', key: [0, 0, 2], value: [0, 0, 1] },
];
const QUERY = [2, 0, 0];
const TIE = 1e-6; // weights within this share of the largest are a tie

const docs = DOCS.map((d) => ({ name: d.name, key: d.key.slice(), value: d.value.slice() }));
const query = QUERY.slice();
let last = null;  // {weights, output, body} of the last answer
let seq = 0;      // the latest request, so that an older answer does not overwrite it
let built = false;

// A number box bound to arr[i]; any change asks the API again.
function numberBox(arr, i, label) {
  const el = document.createElement('input');
  Object.assign(el, { type: 'number', step: 'any', value: String(arr[i]) });
  el.className = 'e2-num';
  el.setAttribute('aria-label', label);
  el.addEventListener('input', () => {
    const x = Number(el.value);
    if (el.value.trim() !== '' && Number.isFinite(x)) { arr[i] = x; search(); }
  });
  return el;
}

const cell = (tag, content, cls) => {
  const el = document.createElement(tag);
  if (content !== undefined) el.append(content);
  if (cls) el.className = cls;
  return el;
};

// The table of documents and the query's boxes, built once per language.
function build() {
  const tbl = $('exp2-docs');
  tbl.textContent = '';
  const kf = KEY_FEATURES.map((f) => t(`exp2.kf.${f}`)), vf = VALUE_FEATURES.map((f) => t(`exp2.vf.${f}`));
  const top = document.createElement('tr');
  top.append(cell('th', t('exp2.col.doc')), cell('th', t('exp2.col.key'), 'grp'), cell('th', '', 'gap'),
    cell('th', t('exp2.col.value'), 'grp'), cell('th', t('exp2.col.weight')));
  top.children[1].colSpan = 3;
  top.children[3].colSpan = 3;
  const names = document.createElement('tr');
  names.className = 'feat';
  names.append(cell('th'));
  for (const f of kf) names.append(cell('th', f));
  names.append(cell('th', '', 'gap'));
  for (const f of vf) names.append(cell('th', f));
  names.append(cell('th'));
  tbl.append(top, names);
  docs.forEach((d, r) => {
    const tr = document.createElement('tr');
    tr.dataset.doc = String(r);
    tr.append(cell('th', t(`exp2.doc.${d.name}`), 'doc'));
    d.key.forEach((_, i) => tr.append(cell('td', numberBox(d.key, i, t('exp2.aria.key', { doc: t(`exp2.doc.${d.name}`), f: kf[i] })))));
    tr.append(cell('td', '', 'gap'));
    d.value.forEach((_, i) => tr.append(cell('td', numberBox(d.value, i, t('exp2.aria.value', { doc: t(`exp2.doc.${d.name}`), f: vf[i] })))));
    const w = cell('td', '', 'e2-w');
    w.dataset.testid = `exp2-w-${r}`;
    tr.append(w);
    tbl.append(tr);
  });
  const q = $('exp2-query');
  q.textContent = '';
  query.forEach((_, i) => {
    const l = document.createElement('label');
    l.className = 'inline';
    l.append(kf[i], ' ', numberBox(query, i, t('exp2.aria.query', { f: kf[i] })));
    q.append(l);
  });
  built = state.lang;
}

// Sends the query and the documents to POST /v1/sdpa and draws the answer.
export async function search() {
  const mine = ++seq;
  const body = { q: [query.slice()], k: docs.map((d) => d.key.slice()), v: docs.map((d) => d.value.slice()), need_weights: true };
  $('exp2-result').dataset.busy = '1';
  try {
    const r = await post('v1/sdpa', body);
    if (mine !== seq) return;
    last = { weights: Array.from(readTensor(r.weights).data), output: Array.from(readTensor(r.output).data), body };
    setCalls('exp2', [{ path: 'v1/sdpa', body }]);
    hideError($('exp2-error'));
  } catch (e) {
    if (mine !== seq) return;
    last = null;
    showError($('exp2-error'), e, 'exp2.error');
  }
  drawAnswer();
}

// The weights beside the documents, and the output as bars over the value's features.
function drawAnswer() {
  const res = $('exp2-result');
  delete res.dataset.busy;
  res.hidden = !last;
  if (!last) return;
  res.dataset.n = String(seq);
  // The largest weight, and every document that ties with it (the same score gives the same
  // weight; float32 may differ in the last bit).
  const top = Math.max(...last.weights);
  const ties = last.weights.map((w, r) => (top - w <= TIE * top ? r : -1)).filter((r) => r >= 0);
  const best = ties[0];
  last.weights.forEach((w, r) => {
    const td = document.querySelector(`[data-testid=exp2-w-${r}]`);
    if (!td) return;
    td.textContent = w.toFixed(2);
    td.dataset.w = String(w);
    td.dataset.i18nData = '';
    td.style.setProperty('--w', String(w));
    td.classList.toggle('top', ties.includes(r));
  });
  const out = $('exp2-out');
  out.textContent = '';
  last.output.forEach((x, i) => {
    const row = document.createElement('div');
    row.className = 'e2-out-row';
    row.dataset.i = String(i);
    row.dataset.x = String(x);
    const bar = document.createElement('span');
    bar.className = 'e2-out-bar';
    bar.style.setProperty('--w', String(Math.max(0, Math.min(1, Math.abs(x)))));
    const num = document.createElement('span');
    num.dataset.i18nData = '';
    num.textContent = x.toFixed(2);
    bar.append(num);
    row.append(cell('span', t(`exp2.vf.${VALUE_FEATURES[i]}`), 'e2-out-name'), bar);
    out.append(row);
  });
  const verdict = $('exp2-verdict');
  verdict.dataset.ties = ties.join(',');
  if (ties.length > 1) { // named as ties: none of them is "the largest"
    const names = ties.map((r) => t('quote', { w: t(`exp2.doc.${docs[r].name}`) }));
    const list = `${names.slice(0, -1).join(t('list.sep'))}${t('list.and')}${names[names.length - 1]}`;
    const rest = 1 - ties.reduce((a, r) => a + last.weights[r], 0);
    verdict.textContent = t('exp2.verdict.tie', { docs: list, w: top.toFixed(2), rest: Math.max(0, rest).toFixed(2) });
  } else {
    verdict.textContent = t('exp2.verdict', {
      doc: t(`exp2.doc.${docs[best].name}`), w: last.weights[best].toFixed(2), rest: (1 - last.weights[best]).toFixed(2),
    });
  }
  $('exp2-request').textContent = `POST /v1/sdpa\n${JSON.stringify(last.body)}`;
}

// The section, for a sentence's page; the first time (and in a new language) it is built and
// asks the API once.
export function drawExp2(v) {
  $('exp2').hidden = !v.words;
  if (!v.words) return;
  if (built !== state.lang) {
    build();
    if (last) drawAnswer(); else search();
  }
}
