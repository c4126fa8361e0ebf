// "The call as code" at each experiment: the requests that experiment itself sent (实验三's two
// sentences, 实验二's search, the 思考题's demos and jobs), as curl, Python or JavaScript
// (calls.js), in a fold of its own under the experiment. Running the code sends the same
// requests to the same API and prints the answers the page drew from.

import { apiBase, t } from './state.js';
import { callsCode } from './calls.js';

const LANGS = [['curl', 'curl'], ['python', 'Python (requests)'], ['js', 'JavaScript (fetch)']];
let lang = 'curl'; // the language shown, the same in every box
const boxes = new Map(); // id -> {el, calls}

function render(id) {
  const b = boxes.get(id);
  if (!b || !b.el.isConnected) return;
  const pre = b.el.querySelector('pre');
  pre.textContent = b.calls.length ? callsCode(lang, b.calls) : t('callbox.none');
  pre.dataset.call = lang;
  pre.dataset.n = String(b.calls.length);
  for (const btn of b.el.querySelectorAll('[data-lang-call]')) btn.setAttribute('aria-pressed', String(btn.dataset.langCall === lang));
  b.el.querySelector('summary').textContent = t('callbox.title');
  b.el.querySelector('.note').textContent = t('callbox.note');
}

// The fold in the element of id host (index.html), built once.
function ensure(id) {
  if (boxes.has(id) && boxes.get(id).el.isConnected) return boxes.get(id);
  const host = document.getElementById(`callbox-${id}`);
  const el = document.createElement('details');
  el.className = 'callbox';
  el.dataset.testid = `callbox-${id}`;
  const sum = document.createElement('summary');
  const note = document.createElement('p');
  note.className = 'note';
  const tabs = document.createElement('div');
  tabs.className = 'call-tabs';
  for (const [key, name] of LANGS) {
    const btn = document.createElement('button');
    btn.type = 'button';
    btn.className = 'chip';
    btn.dataset.langCall = key;
    btn.dataset.i18nData = '';
    btn.textContent = name;
    btn.addEventListener('click', () => { lang = key; for (const k of boxes.keys()) render(k); });
    tabs.append(btn);
  }
  const pre = document.createElement('pre');
  pre.className = 'call-code';
  pre.dataset.i18nData = '';
  pre.tabIndex = 0;
  el.append(sum, note, tabs, pre);
  host.textContent = '';
  host.append(el);
  const b = { el, calls: [] };
  boxes.set(id, b);
  return b;
}

// The experiment id sent requests [{path, body}] (path: 'v1/sdpa' …): its fold shows them.
export function setCalls(id, requests) {
  const b = ensure(id);
  b.calls = requests.map((r) => ({ url: new URL(r.path.replace(/^\//, ''), apiBase()).href, body: r.body }));
  render(id);
}

// Every fold again, in the page's language.
export function redrawCalls() {
  for (const id of boxes.keys()) render(id);
}
