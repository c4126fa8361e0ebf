// The busy server's line: while a request waits to be sent again after a 503 (api.js), one line
// at the bottom of the window says so in the page's language and counts down the seconds
// ("the server is busy, retrying in 2 s… (retry 1 of 3)"). With several requests waiting at once
// it shows the one that waits longest.

import { t } from './state.js';
import { $ } from './dom.js';

const waits = new Set(); // {until: ms since the epoch, attempt, of}: the requests waiting
let timer = null;

function render() {
  const el = $('busy');
  if (!el) return;
  if (!waits.size) {
    el.hidden = true;
    delete el.dataset.s;
    clearInterval(timer);
    timer = null;
    return;
  }
  let last = null;
  for (const w of waits) if (!last || w.until > last.until) last = w;
  const s = Math.max(1, Math.ceil((last.until - Date.now()) / 1000));
  el.textContent = t('busy.retry', { s, n: last.attempt, m: last.of });
  el.dataset.s = String(s);
  el.dataset.attempt = String(last.attempt);
  el.hidden = false;
}

// Resolves after ms, showing the line meanwhile: this is retry attempt of of.
export function waitBusy(ms, attempt, of) {
  const w = { until: Date.now() + ms, attempt, of };
  waits.add(w);
  render();
  if (!timer) timer = setInterval(render, 250);
  return new Promise((resolve) => setTimeout(() => { waits.delete(w); render(); resolve(); }, ms));
}

// Shows the line again in the page's language (after a switch).
export const renderBusy = render;
