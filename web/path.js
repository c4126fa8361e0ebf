// The guided path: the lesson as twelve ordered steps, each setting the page (preset, head, row,
// masks, experiment) and saying in one or two sentences what to look at and why, in the
// chapters' terms; the last is the ending (recap.js), whose Finish leaves the path. The URL holds the step (step=4), so that a link opens that step for a class;
// the path can be left at any step, and a first visitor is offered it once (the choice is kept
// in localStorage).

import { EXP_DEFAULTS, state, t, view } from './state.js';
import { $ } from './dom.js';
import { applyPreset, syncControls } from './controls.js';
import { setFold } from './fold.js';

// Each step: the state it sets over its preset's (applyPreset), the section it scrolls to, and
// what it starts once the run is drawn (auto: the id of a button to click).
export const STEPS = [
  { key: 'formula', set: { preset: 'a' }, target: 'steps' },
  { key: 'row', set: { preset: 'c1', head: 3 }, target: 'steps' },
  { key: 'heads', set: { preset: 'c3', head: 1 }, target: 'heads-section' },
  { key: 'exp1', set: { preset: 'c4', head: 3 }, target: 'exp1' },
  { key: 'learned', set: { preset: 'c3', head: 1, lm: true }, target: 'learned' },
  { key: 'exp2', set: { preset: 'c1', head: 3 }, target: 'exp2' },
  { key: 'exp3', set: { preset: 'c5', head: 0, e3: 2 }, target: 'exp3' },
  { key: 'gen', set: { preset: 'c1', head: 3 }, target: 'gen', auto: 'gen-start' },
  { key: 'padding', set: { preset: 'b' }, target: 'steps' },
  { key: 'cost', set: { preset: 'c1', head: 3 }, target: 'cost', auto: 'cost-run' },
  { key: 'think', set: { preset: 'c1', head: 3 }, target: 'think', auto: ['tied-run', 'multi-run'] },
  { key: 'recap', set: { preset: 'c1', head: 3 }, target: 'recap' },
];

const STORE = 'attnd.path'; // localStorage: 'started' or 'declined', once a visitor chose
let step = 0;               // the step shown, 1 … STEPS.length; 0 when not on the path
let offer = false;          // whether the first visit's offer is shown
let runPage = null;         // app.js's run(), which the path calls after setting the state
let pending = null;         // the step whose scroll and auto waits for the next drawn run
let onLeave = null;         // called with a step's key when the path leaves that step


function remembered() {
  try { return localStorage.getItem(STORE); } catch { return null; }
}
function remember(choice) {
  try { localStorage.setItem(STORE, choice); } catch { /* private mode: ask again next time */ }
}

// The step in the URL, next to the state writeUrl() keeps there (it leaves other keys alone).
function writeStep() {
  const q = new URLSearchParams(location.search);
  if (step) q.set('step', String(step)); else q.delete('step');
  history.replaceState(null, '', `${location.pathname}?${q}`);
}

// Sets the state of step n (1-based): its preset's, then the step's own settings; the view's
// other choices go back to their defaults so that every class sees the same page.
function applyStep(n) {
  const s = STEPS[n - 1];
  Object.assign(state, { filter: 'none', weights: 'per_head', nostart: false, row: -1 });
  applyPreset(s.set.preset);
  Object.assign(state, EXP_DEFAULTS, s.set);
  syncControls();
}

// Goes to step n and runs the page; its section is scrolled to once the run is drawn.
export async function goStep(n) {
  const was = step;
  step = Math.max(1, Math.min(STEPS.length, n));
  if (was && was !== step) left(was);
  offer = false;
  remember('started');
  applyStep(step);
  writeStep();
  pending = step;
  drawPath();
  await runPage();
}

export function leavePath() {
  if (step) left(step);
  step = 0;
  offer = false;
  pending = null;
  writeStep();
  drawPath();
}

// Step n left (another step, or the path): what it started ends (generation's session).
function left(n) {
  if (onLeave) onLeave(STEPS[n - 1].key);
}

// Reads the URL before the first run: a step sets the page unless the URL holds a state of its
// own (p=…, a link made on that step); a first visit to the bare page shows the offer. leave(key)
// is called when the path leaves the step of key.
export function initPath(run, leave = null) {
  runPage = run;
  onLeave = leave;
  const q = new URLSearchParams(location.search);
  const n = Math.floor(Number(q.get('step')));
  if (n >= 1) {
    step = Math.min(STEPS.length, n);
    if (!q.has('p')) applyStep(step);
    pending = step;
    writeStep();
  } else if (!q.has('p') && !remembered()) {
    offer = true;
  }
  $('path-prev').addEventListener('click', () => goStep(step - 1));
  // Next, and at the last step Finish, which leaves the path with the page as it is.
  $('path-next').addEventListener('click', () => (step === STEPS.length ? leavePath() : goStep(step + 1)));
  $('path-leave').addEventListener('click', leavePath);
  $('path-yes').addEventListener('click', () => goStep(1));
  $('path-no').addEventListener('click', () => { remember('declined'); offer = false; drawPath(); });
  $('path-open').addEventListener('click', () => goStep(step || 1));
  drawPath();
}

// The panel: the offer, or the step's title, text and buttons, in the page's language.
export function drawPath() {
  const panel = $('path'), on = step > 0;
  panel.hidden = !on && !offer;
  panel.classList.toggle('offer', offer && !on);
  setFold('path', on);
  $('path-offer').hidden = !(offer && !on);
  $('path-body').hidden = !on;
  $('path-open').hidden = on;
  if (on) {
    const key = STEPS[step - 1].key;
    panel.dataset.step = String(step);
    $('path-count').textContent = t('path.count', { n: step, m: STEPS.length });
    $('path-title').textContent = t(`path.${key}.title`);
    $('path-text').textContent = t(`path.${key}.text`);
    const last = step === STEPS.length;
    $('path-prev').disabled = step === 1;
    $('path-next').textContent = t(last ? 'path.finish' : 'path.next');
    $('path-next').classList.toggle('finish', last);
    const dots = $('path-dots');
    dots.textContent = '';
    STEPS.forEach((s, i) => {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'path-dot';
      b.textContent = String(i + 1);
      b.title = t(`path.${s.key}.title`);
      b.setAttribute('aria-label', t('path.goto', { n: i + 1, title: t(`path.${s.key}.title`) }));
      if (i + 1 === step) b.setAttribute('aria-current', 'step');
      b.addEventListener('click', () => goStep(i + 1));
      dots.append(b);
    });
    // On a phone the dots scroll sideways: the current one in view.
    const cur = dots.children[step - 1];
    dots.scrollLeft = Math.max(0, cur.offsetLeft - dots.offsetLeft - (dots.clientWidth - cur.offsetWidth) / 2);
  } else {
    delete panel.dataset.step;
  }
  // Sections scrolled to stop under the panel, which stays at the top of the window.
  document.documentElement.style.setProperty('--path-h', `${on ? panel.offsetHeight : 0}px`);
}

// After a run is drawn: the pending step's section is scrolled to and its experiment started.
export function afterRun() {
  drawPath();
  if (!pending || pending !== step || !view) return;
  pending = null;
  const s = STEPS[step - 1];
  const el = $(s.target);
  if (el && !el.hidden) el.scrollIntoView({ block: 'start' });
  for (const id of [].concat(s.auto || [])) {
    const b = $(id);
    if (b && !b.disabled) b.click();
  }
  document.body.dataset.pathStep = String(step);
}
