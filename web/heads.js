// The names of heads: a model's own head names with their glosses, else 头 i / head i, as one
// string or as elements.

import { STRINGS } from './i18n.js';
import { state, t } from './state.js';

// The name of head key ('0', '1', … or 'mean'): a model's head_names as the model spells them
// (data, not the page's text) with the table's gloss when it has one (headname.*), else 头 i /
// head i. Returns {name, data, gloss}.
function headLabel(v, key) {
  if (v.mode === 'sdpa' || !v.heads) return { name: t(v.mode === 'sdpa' ? 'large.weights' : 'head.mean'), data: false, gloss: '' };
  if (key === 'mean') return { name: t('head.mean'), data: false, gloss: '' };
  const named = v.headNames && v.headNames[Number(key)];
  if (!named) return { name: t('head.n', { i: key }), data: false, gloss: '' };
  const g = `headname.${named}`;
  return { name: named, data: true, gloss: g in STRINGS[state.lang] ? t(g) : '' };
}

// The name of head key as one string, for a sentence or an aria-label.
export function headName(v, key) {
  const h = headLabel(v, key);
  return h.gloss ? t('head.glossed', { name: h.name, gloss: h.gloss }) : h.name;
}

// The name of head key as elements: the name (marked as data when it is the model's) and its
// gloss; on two lines when lines is set.
export function headNameEl(v, key, lines = false) {
  const h = headLabel(v, key);
  const el = document.createElement('span');
  el.className = 'head-name';
  const n = document.createElement('span');
  n.className = 'name';
  n.textContent = h.name;
  if (h.data) n.dataset.i18nData = '';
  el.append(n);
  if (h.gloss) {
    const g = document.createElement('span');
    g.className = lines ? 'gloss block' : 'gloss';
    g.textContent = h.gloss;
    el.append(' ', g);
  }
  return el;
}
