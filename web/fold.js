// The controls folded away so that the lesson gets the width: in large font (a projector) and
// whenever the guided path is on, html.fold hides the controls' column, and the header's
// Settings button opens them over the page, at the right, until closed (the button in the panel,
// Escape, or the same button again). Without either reason the controls are a column again.

import { t } from './state.js';
import { $ } from './dom.js';

const reasons = new Set(); // 'large', 'path': why the controls are folded

function setOpen(open) {
  const root = document.documentElement;
  root.classList.toggle('controls-open', open);
  const b = $('controls-toggle');
  b.setAttribute('aria-expanded', String(open));
  b.dataset.i18n = open ? 'controls.hide' : 'controls.show';
  b.dataset.open = open ? '1' : '0';
}

// Folds the controls for reason (on) or stops doing so for it.
export function setFold(reason, on) {
  if (on) reasons.add(reason); else reasons.delete(reason);
  const fold = reasons.size > 0;
  document.documentElement.classList.toggle('fold', fold);
  if (!fold && document.documentElement.classList.contains('controls-open')) setOpen(false);
  const b = $('controls-toggle');
  b.textContent = t(b.dataset.i18n || 'controls.show');
}

export function initFold() {
  const b = $('controls-toggle');
  const toggle = (open) => { setOpen(open); b.textContent = t(b.dataset.i18n); };
  b.addEventListener('click', () => {
    const open = !document.documentElement.classList.contains('controls-open');
    toggle(open);
    if (open) $('controls-close').focus();
  });
  $('controls-close').addEventListener('click', () => { toggle(false); b.focus(); });
  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape' && document.documentElement.classList.contains('controls-open')) { toggle(false); b.focus(); }
  });
}
