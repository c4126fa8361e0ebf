// The errors a student can see, in the page's language: one line that says what happened (a busy
// server, a job too large, a refused request), and under it, folded away in a <details> for the
// teacher, the API's own English message (or the browser's). status.js shows a run's error this
// way; the experiments and the 思考题 show theirs in a box of their own with showError.

import { t } from './state.js';
import { ApiError, PageError, RETRIES } from './api.js';

// {lead, detail, summary}: the line in the page's language, the original message (or ''), and
// the key of the fold's title.
export function errorParts(e) {
  if (e instanceof PageError) return { lead: t(e.key, e.params), detail: e.detail || '', summary: 'err.details.browser' };
  if (e instanceof ApiError) {
    const p = { status: e.status, code: e.code };
    const key = e.status === 503 ? 'err.busy' : e.status === 413 ? 'err.too_large' : e.status >= 500 ? 'err.server' : 'err.api';
    return { lead: t(key, { ...p, n: RETRIES }), detail: e.message, summary: 'err.details' };
  }
  return { lead: t('err.page'), detail: String((e && e.message) || e), summary: 'err.details.browser' };
}

// Fills a fold (a <details> holding a <summary> and an element of class api) with detail, and
// hides it when there is none. The message is data: it stays as it was written.
export function fillDetails(det, detail, summary) {
  det.hidden = !detail;
  det.querySelector('summary').textContent = t(summary);
  const api = det.querySelector('.api');
  api.textContent = detail;
}

// A fold for showError's boxes, built once per box.
function details() {
  const det = document.createElement('details');
  det.className = 'api-details';
  det.dataset.testid = 'error-details';
  const sum = document.createElement('summary');
  const api = document.createElement('p');
  api.className = 'api';
  api.lang = 'en';
  api.dataset.i18nData = '';
  det.append(sum, api);
  return det;
}

const shown = new Map(); // box -> [e, key]: the boxes showError filled, for a switch of language

// Shows e in box: its line (inside key's sentence as {msg} when key is given), and the fold.
export function showError(box, e, key = null) {
  shown.set(box, [e, key]);
  const { lead, detail, summary } = errorParts(e);
  let line = box.querySelector('.lead'), det = box.querySelector('.api-details');
  if (!line) {
    box.textContent = '';
    line = document.createElement('p');
    line.className = 'lead';
    det = details();
    box.append(line, det);
  }
  line.textContent = key ? t(key, { msg: lead }) : lead;
  fillDetails(det, detail, summary);
  box.hidden = false;
}

export function hideError(box) {
  shown.delete(box);
  box.hidden = true;
}

// Every box showError filled, again in the page's language.
export function redrawErrors() {
  for (const [box, [e, key]] of shown) {
    if (!box.isConnected) shown.delete(box);
    else if (!box.hidden) showError(box, e, key);
  }
}

// A new box of class cls showing e (as showError), for a view drawn again on every change.
export function errorBox(e, key, cls) {
  const box = document.createElement('div');
  box.className = cls;
  showError(box, e, key);
  return box;
}
