// The status line and the error line, kept as keys and values so that switching the language
// shows them again in the other.

import { t, vocabModel } from './state.js';
import { $ } from './dom.js';
import { ApiError, unknownWord } from './api.js';
import { errorParts, fillDetails } from './errors.js';

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

// The error line, in the page's language (errors.js): an unknown word named with its place, else
// the line for the error; the API's own message (or the browser's) folded away under it.
export function renderError() {
  const box = $('error');
  box.hidden = !failure;
  if (!failure) return;
  const parts = errorParts(failure);
  const unknown = unknownWord(failure);
  if (unknown) { // the word and where it is, in the page's language
    const model = failure.model || vocabModel();
    parts.lead = unknown.at !== undefined ? t('err.unknown_word', { word: unknown.word, at: unknown.at, model })
      : t('err.unknown_token', { word: unknown.word, i: unknown.i, model });
  }
  box.querySelector('.lead').textContent = parts.lead;
  fillDetails(box.querySelector('.api-details'), parts.detail, parts.summary);
  // The vocabulary, one click away from an unknown word.
  $('error-vocab').hidden = !(failure instanceof ApiError && failure.code === 'unknown_token');
}
