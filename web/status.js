// The status line and the error line, kept as keys and values so that switching the language
// shows them again in the other.

import { t, vocabModel } from './state.js';
import { $ } from './dom.js';
import { ApiError, PageError, unknownWord } from './api.js';

export let status = { kind: 'idle', key: 'status.ready', time: null };
let failure = null; // the error of the last run (PageError, ApiError or another Error), or null

// A run, 实验三, the word list and the models' list set it.
export function setFailure(e) { failure = e; }

export function setStatus(kind, key, time = null) {
  status = { kind, key, time };
  renderStatus();
}

export function renderStatus() {
  const s = $('status');
  s.className = `status ${status.kind}`;
  s.dataset.kind = status.kind;
  s.querySelector('.status-text').textContent = t(status.key);
  s.querySelector('.timing').textContent = status.time ? ` · ${t('status.time', status.time)}` : '';
}

// The error line: the page's own errors in the page's language; an API error as the API wrote
// it (English), under a line in the page's language where the table has one.
export function renderError() {
  const box = $('error');
  box.hidden = !failure;
  if (!failure) return;
  let lead = '', api = '';
  const unknown = unknownWord(failure);
  if (failure instanceof PageError) lead = t(failure.key, failure.params);
  else if (unknown) { // the word and where it is, in the page's language
    const model = failure.model || vocabModel();
    lead = unknown.at !== undefined ? t('err.unknown_word', { word: unknown.word, at: unknown.at, model })
      : t('err.unknown_token', { word: unknown.word, i: unknown.i, model });
    api = failure.message;
  } else if (failure instanceof ApiError) {
    lead = t('err.api_lead', { status: failure.status, code: failure.code });
    api = failure.message;
  } else api = String(failure.message || failure);
  const leadEl = box.querySelector('.lead'), apiEl = box.querySelector('.api');
  leadEl.textContent = lead;
  leadEl.hidden = !lead;
  apiEl.textContent = api;
  apiEl.hidden = !api;
  // The vocabulary, one click away from an unknown word.
  $('error-vocab').hidden = !(failure instanceof ApiError && failure.code === 'unknown_token');
}
