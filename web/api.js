// The API client: requests to attnd's public API v1 (POST /v1/attention and /v1/sdpa, GET
// /v1/models and /v1/models/{name}), and the errors a request can end in.

import { apiBase } from './state.js';

// An error of the page itself, shown in the page's language: a string key and its parameters.
export class PageError extends Error {
  constructor(key, params = {}) {
    super(key);
    this.key = key;
    this.params = params;
  }
}

// An error the API answered: its English message is shown as it is, under a line in the page's
// language (err.api_lead, or for an unknown word err.unknown_word). field and detail are the
// error's field and message as the API sent them.
export class ApiError extends Error {
  constructor(status, code, text, field = null, detail = '') {
    super(text);
    this.status = status;
    this.code = code;
    this.field = field;
    this.detail = detail;
    this.model = null; // the model a sentence went to, set by its caller
  }
}

// The unknown word of an unknown_token error, read from its field and message: {word, at} for
// text (at: the offset in characters, from 0) or {word, i} for tokens[i]; null when they do not
// say.
export function unknownWord(e) {
  if (!(e instanceof ApiError) || e.code !== 'unknown_token') return null;
  const m = /^"(.*?)(?:\.\.\.)?" at character (\d+) of text /.exec(e.detail);
  if (e.field === 'text' && m) return { word: m[1], at: Number(m[2]) };
  const f = /^tokens\[(\d+)\]$/.exec(e.field || ''), w = /^tokens\[\d+\] "(.*?)" is not /.exec(e.detail);
  if (f && w) return { word: w[1], i: Number(f[1]) };
  return null;
}

export async function post(path, body) {
  let res;
  try {
    res = await fetch(new URL(path, apiBase()), {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    });
  } catch (e) {
    throw new PageError('err.network', { msg: e.message });
  }
  let j = null;
  try { j = await res.json(); } catch { /* not JSON */ }
  if (!res.ok) {
    const e = j && j.error;
    throw new ApiError(res.status, e ? e.code : res.statusText,
      e ? `${res.status} ${e.code}: ${e.message}${e.field ? ` (field ${e.field})` : ''}` : `${res.status} ${res.statusText}`,
      e ? e.field : null, e ? String(e.message) : '');
  }
  return j;
}

// GET /v1/models.
export async function fetchModels() {
  const r = await fetch(new URL('v1/models', apiBase()));
  if (!r.ok) throw new Error(`${r.status}`);
  return r.json();
}

const vocabs = new Map(); // model name -> a promise of its vocabulary (GET /v1/models/{name})
export const vocabLists = new Map(); // model name -> its vocabulary, once loaded

export function loadVocab(name) {
  if (!vocabs.has(name)) {
    const p = (async () => {
      const r = await fetch(new URL(`v1/models/${encodeURIComponent(name)}`, apiBase()));
      if (!r.ok) throw new Error(`${r.status} ${r.statusText}`);
      const j = await r.json();
      if (!Array.isArray(j.vocab)) throw new Error('no vocab');
      vocabLists.set(name, j.vocab);
      return j.vocab;
    })();
    p.catch(() => vocabs.delete(name)); // try again next time
    vocabs.set(name, p);
  }
  return vocabs.get(name);
}
