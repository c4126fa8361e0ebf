// The API client: requests to attnd's public API v1 (POST /v1/attention and /v1/sdpa, GET
// /v1/models and /v1/models/{name}, a decode session's POST, GET and DELETE
// /v1/sessions[/{id}]), a busy server's 503 retried after its Retry-After, and the errors a
// request can end in.

import { apiBase } from './state.js';
import { waitBusy } from './busy.js';

// An error of the page itself, shown in the page's language: a string key and its parameters;
// detail is the browser's own message, if any, folded away under the line (errors.js).
export class PageError extends Error {
  constructor(key, params = {}, detail = '') {
    super(key);
    this.key = key;
    this.params = params;
    this.detail = detail;
  }
}

// An error the API answered: a line in the page's language says what happened (errors.js), and
// the API's English message, as it is, is folded away under it for the teacher. field and detail
// are the error's field and message as the API sent them.
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

// ---- A busy server -------------------------------------------------------------------------
//
// A 503 (a full queue, a full reply or memory budget, a server starting or draining) comes with
// Retry-After in seconds: the request is sent again after it, plus up to 30% at random so that a
// class that was refused at once does not come back at once, at most RETRIES times; busy.js shows
// the wait meanwhile. The last answer, 503 or not, is the request's.

export const RETRIES = 3;
const JITTER = 0.3;

// Retry-After in ms: delta-seconds or an HTTP date, within 0.2 s and 60 s (1 s when absent).
export function retryAfterMs(h) {
  let s = 1;
  if (h && /^\s*\d+(\.\d+)?\s*$/.test(h)) s = Number(h);
  else if (h && Number.isFinite(Date.parse(h))) s = (Date.parse(h) - Date.now()) / 1000;
  return Math.min(60, Math.max(0.2, s)) * 1000;
}

// fetch(url, init), sent again after a 503 as above; a network failure is a PageError.
async function send(url, init) {
  for (let attempt = 1; ; attempt++) {
    let res;
    try {
      res = await fetch(url, init);
    } catch (e) {
      throw new PageError('err.network', {}, e.message);
    }
    if (res.status !== 503 || attempt > RETRIES) return res;
    await waitBusy(retryAfterMs(res.headers.get('Retry-After')) * (1 + JITTER * Math.random()), attempt, RETRIES);
  }
}

// An answer that is not ok as an ApiError (the API's {"error"} when it sent one).
async function failed(res) {
  let j = null;
  try { j = await res.json(); } catch { /* not JSON */ }
  const e = j && j.error;
  return new ApiError(res.status, e ? e.code : res.statusText,
    e ? `${res.status} ${e.code}: ${e.message}${e.field ? ` (field ${e.field})` : ''}` : `${res.status} ${res.statusText}`,
    e ? e.field : null, e ? String(e.message) : '');
}

export async function post(path, body) {
  const res = await send(new URL(path, apiBase()), {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  if (!res.ok) throw await failed(res);
  return res.json();
}

export async function get(path) {
  const res = await send(new URL(path, apiBase()));
  if (!res.ok) throw await failed(res);
  return res.json();
}

// DELETE path; an answer that is not ok (204) is an ApiError.
export async function del(path) {
  const res = await send(new URL(path, apiBase()), { method: 'DELETE' });
  if (!res.ok) throw await failed(res);
}

// GET /v1/models.
export const fetchModels = () => get('v1/models');

const vocabs = new Map(); // model name -> a promise of its vocabulary (GET /v1/models/{name})
export const vocabLists = new Map(); // model name -> its vocabulary, once loaded

export function loadVocab(name) {
  if (!vocabs.has(name)) {
    const p = (async () => {
      const j = await get(`v1/models/${encodeURIComponent(name)}`);
      if (!Array.isArray(j.vocab)) throw new Error('no vocab');
      vocabLists.set(name, j.vocab);
      return j.vocab;
    })();
    p.catch(() => vocabs.delete(name)); // try again next time
    vocabs.set(name, p);
  }
  return vocabs.get(name);
}
