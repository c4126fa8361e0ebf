// attnd visualizer, its entry module: it wires the controls to a run, and a run to the views.
// The page talks only to the public API v1 (POST /v1/attention, POST /v1/sdpa, GET /v1/models,
// GET /v1/models/{name}, POST and DELETE /v1/sessions[/{id}]), so anything it shows another
// client could compute too.
//
// Its modules, from the bottom up; each imports only modules above it in this list (named in
// brackets), so that there is no import cycle:
//   i18n-screens.js  the strings of the exports, the call and the screens (i18n.js adds them)
//   strings-lesson.js  the guided path's, 实验二's and the 思考题's strings (i18n.js merges them)
//   strings-class.js  the busy server's line, the error lines, the controls' fold (i18n.js
//                merges them)
//   strings-chapter.js  √d_k, concat → W^O, the ending, the gloss, the experiments' calls
//                (i18n.js merges them)
//   strings-learned.js  the path's step on a model that learned (i18n.js merges them)
//   strings-gen.js  generation on a decode session (i18n.js merges them)
//   i18n.js      every string a person reads, in Chinese and English [i18n-screens
//                strings-lesson strings-class strings-chapter strings-learned strings-gen]
//   twins.js     the lesson's sentences in Chinese and English, the experiments' words, the
//                chapter's table of 它's row (data)
//   numbers.js   deterministic numbers (splitmix64) for the random presets
//   tensors.js   tensors as the API sends and takes them (nested arrays, base64)
//   dom.js       elements by id, canvases at the pixel ratio, selects and bars
//   state.js     the state and the URL, the server's models, the last result [i18n twins]
//   busy.js      the line shown while a request waits to retry a busy server [state dom]
//   api.js       the API client, a 503 retried after its Retry-After, and its errors
//                [state busy]
//   errors.js    an error as a line in the page's language, the API's message folded under
//                it [state api]
//   fold.js      the controls folded away in large font and on the path [state dom]
//   maps.js      weight maps: the selected one, rows, masks, filters, maximum, mean, the
//                view without its start token [state]
//   compute.js   a run's input, its request(s) and the view model
//                [state numbers tensors api maps trace]
//   heatmap.js   the colour scale, the masked cells' stripes, painting a map [state maps]
//   heads.js     the names of heads [i18n state]
//   large.js     the large heatmap, its legend and tooltip [state dom maps heatmap heads]
//   lines.js     the line view [state dom maps large]
//   trace.js     a run's trace, and the value vectors of a vocabulary [state api]
//   received.js  what a word received: the keys that added most, the nearest word
//                [state dom api heads trace errors]
//   tables.js    the step tables' numeric table, number format and ÷ √d_k notation [state]
//   rowsteps.js  one row step by step: with and without ÷ √d_k, the mask after the softmax,
//                the chapter's own table [state dom heads trace tables twins]
//   steps.js     the step tables of a row and of a head, and the output table
//                [state dom trace received errors tables rowsteps]
//   concat.js    concat → W^O for the selected word, checked against the output
//                [state dom heads trace]
//   recap.js     the ending: 本章小结 and the six 自测题 [state dom]
//   calls.js     a request as curl, Python (requests) and JavaScript (fetch), one or several
//   callbox.js   the call as code at each experiment [state calls]
//   status.js    the status line and the error line [state dom api errors]
//   vocab.js     the vocabulary window [state dom api status]
//   exp1.js      实验一, guess then compare [state twins dom maps heads callbox]
//   exp3map.js   实验三 on the heatmap [state dom maps heatmap heads]
//   exp3.js      实验三, no peeking at the future
//                [state twins dom api tensors status exp3map callbox]
//   exp2.js      实验二, Q/K/V as a search system over /v1/sdpa
//                [state dom api tensors errors callbox]
//   minimap.js   small matrices on a canvas, weights or scores [dom heatmap]
//   wordvec.js   a sentence's words as seeded vectors, for the 思考题 [state numbers]
//   tied.js      思考题 1, W^Q = W^K [state dom api errors wordvec minimap callbox]
//   multihead.js 思考题 2, H = 1, 2, 4, 8 on the same E
//                [state dom api errors tensors wordvec minimap callbox]
//   cost.js      思考题 3, the cost of n², measured, on seeded inputs
//                [state dom api errors callbox]
//   think.js     the 思考题's section [dom tied multihead cost]
//   genchart.js  generation's chart: the cache's bytes, recomputing's operations, in SVG [state]
//   gen.js       generation one token at a time on a decode session (POST, DELETE
//                /v1/sessions[/{id}]) [state dom api tensors errors heatmap heads tables
//                genchart]
//   headscores.js  previous-token and induction scores of a head on a sequence (no imports)
//   modelview.js every layer × head of a model of layers as small maps with their scores, one
//                open large [state dom minimap headscores]
//   learned.js   a model that learned: the induction model on a seeded sequence that repeats,
//                or the student's, its heads and next-token predictions
//                [state dom api tensors errors numbers headscores modelview callbox]
//   views.js     a result in every view, the grid of heads, and a head's click (the heatmap
//                first, the rest after that frame)
//                [state dom heatmap maps heads large lines steps exp1 exp2 exp3 think concat
//                recap learned gen]
//   controls.js  the controls, presets, the models' list and the language
//                [i18n state dom api status vocab fold]
//   svg.js       the current view as an SVG document, and an SVG as a PNG
//                [state dom maps heatmap heads large]
//   export.js    the exports and the call, a failed run's greyed-out result, the colour scale's
//                switch [state dom svg calls]
//   path.js      the guided path: twelve steps, the URL's step, the first visit's offer, Finish
//                [state dom controls fold]
//   app.js       this module: a run, the sentence box, the language switch and the listeners
//                [state dom api busy errors fold compute status vocab large lines exp1 exp3
//                views steps controls export path think concat recap callbox learned gen]
//
// Legend: L query tokens, S key tokens, E embedding width, H heads, Dh = E / H the head width.
// Weight maps are kept per head as Float32Array(L * S) (dense) or as the top-k of every row
// ({idx: Int32Array(L * k), val: Float32Array(L * k), k}) when L is large.
//
// Every string it shows comes from i18n.js; canvases are drawn at the device's pixel ratio with
// fonts in rem, so "large font" enlarges what is drawn as well as the controls.

'use strict';

import { nextRun, readUrl, runSeq, sentenceOf, setView, state, t, view, writeUrl } from './state.js';
import { $, markPunct } from './dom.js';
import { ApiError, unknownWord } from './api.js';
import { buildInput, compute } from './compute.js';
import { renderError, setFailure, setStatus } from './status.js';
import { openVocab } from './vocab.js';
import { drawLarge, onLargeMove } from './large.js';
import { drawLines, onLinesLeave, onLinesMove } from './lines.js';
import { drawExp1, drawExp1Result } from './exp1.js';
import { drawExp3, resumeExp3, runExp3 } from './exp3.js';
import { drawViews } from './views.js';
import { drawSteps } from './steps.js';
import { applyLanguage, applyPreset, loadModels, readControls, syncControls } from './controls.js';
import { drawCall, initExport, setStale, syncScale } from './export.js';
import { STEPS, afterRun, drawPath, goStep, initPath } from './path.js';
import { initThink } from './think.js';
import { renderBusy } from './busy.js';
import { redrawErrors } from './errors.js';
import { initFold } from './fold.js';
import { drawConcat } from './concat.js';
import { initRecap } from './recap.js';
import { redrawCalls } from './callbox.js';
import { endGen, initGen } from './gen.js';
import { initLearned } from './learned.js';

// ---- Running ------------------------------------------------------------------------------

async function run() {
  readControls();
  syncControls();
  writeUrl();
  const seq = nextRun();
  setFailure(null);
  renderError();
  setStatus('loading', 'status.busy');
  $('run').disabled = true;
  let input = null;
  try {
    input = buildInput();
    const v = await compute(input);
    if (seq !== runSeq) return;
    $('request-json').textContent = `POST ${v.request.path}\n${JSON.stringify(v.request.body).slice(0, 20000)}`;
    if (state.head !== 'mean' && (!v.heads || Number(state.head) >= v.heads.length)) state.head = v.heads ? 0 : 'mean';
    setView(v);
    setStatus('ok', 'status.ok', { ms: v.ms.toFixed(0), compute: v.usage.compute_ms.toFixed(1) });
    setStale(false);
    syncScale();
    drawViews(v);
    drawCall(v);
    writeUrl();
    await resumeExp3(v); // a link's experiment, run again
    if (seq !== runSeq) return;
    afterRun(); // the guided path's step: its section scrolled to, its demo started
    document.body.dataset.ready = String(seq);
  } catch (e) {
    if (seq !== runSeq) return;
    setFailure(e);
    setStale(true);
    if (e instanceof ApiError && input && input.mode === 'words') {
      e.model = input.model;
      selectUnknown(unknownWord(e));
    }
    renderError();
    setStatus('error', 'status.error');
    document.body.dataset.ready = String(seq);
  } finally {
    if (seq === runSeq) $('run').disabled = false;
  }
}

// ---- The sentence box ---------------------------------------------------------------------

// Puts word into the sentence in place of its selection (the unknown word, after an error),
// and runs it.
function insertWord(word) {
  const ta = $('text');
  ta.setRangeText(word, ta.selectionStart, ta.selectionEnd, 'end');
  run();
}

// Selects the unknown word u (unknownWord) in the sentence box, so that a word from the list
// takes its place. The API counts characters (code points); the box counts UTF-16 units.
function selectUnknown(u) {
  if (!u || u.at === undefined) return;
  const ta = $('text'), chars = Array.from(ta.value);
  const start = chars.slice(0, u.at).join('').length;
  const end = chars.slice(0, u.at + Array.from(u.word).length).join('').length;
  ta.focus({ preventScroll: true });
  ta.setSelectionRange(start, end);
}

// ---- The language and the listeners -------------------------------------------------------

function setLanguage(lang) {
  if (lang === state.lang) return;
  readControls();
  state.lang = lang;
  applyLanguage();
  syncControls();
  writeUrl();
  drawPath();
  renderBusy();
  redrawErrors();
  redrawCalls();
  if ($('vocab').open) openVocab(insertWord); // the word list in the page's language
  // A sentence preset is the same sentence in the page's language (its twin, twins.js): run it
  // with the experiments' words back to their defaults, but what was run or compared stays. The
  // seed presets name their tokens (查询, 键 0) in the page's language: build them again.
  if (sentenceOf(state.preset)) {
    Object.assign(state, { text: sentenceOf(state.preset), row: -1, e1q: -1, e1g: '', e3t: -1, e3w: '' });
    syncControls();
    run();
  } else if (view && (state.preset === 'a' || state.preset === 'b')) run();
  else if (view) drawViews(view);
}

async function main() {
  const fromUrl = readUrl();
  applyLanguage();
  await loadModels();
  if (!fromUrl) applyPreset(state.preset);
  syncControls();
  initFold();
  // A step in the URL sets the page before the first run; leaving generation's step deletes its
  // session.
  initPath(run, (key) => { if (key === 'gen') endGen(true); });
  initThink();
  initGen();
  initLearned();
  initRecap(goStep, (n) => t(`path.${STEPS[n - 1].key}.title`));
  $('preset').addEventListener('change', () => { readControls(); applyPreset($('preset').value); syncControls(); run(); });
  for (const id of ['causal', 'key-length', 'weights-mode', 'params-kind', 'num-heads', 'init-seed', 'rand-l', 'rand-e', 'rand-seed']) {
    $(id).addEventListener('change', run);
  }
  for (const id of ['filter-kind', 'filter-value']) {
    $(id).addEventListener('change', () => { readControls(); syncControls(); writeUrl(); if (view) drawViews(view); });
  }
  $('large-font').addEventListener('change', () => { readControls(); syncControls(); writeUrl(); if (view) drawViews(view); });
  for (const b of document.querySelectorAll('[data-lang]')) b.addEventListener('click', () => setLanguage(b.dataset.lang));
  $('run').addEventListener('click', run);
  // The exports, the call and the colour scale; punctuation tokens marked in every table.
  initExport(drawViews);
  new MutationObserver(() => markPunct($('views'))).observe($('views'), { childList: true, subtree: true });
  // A sentence: Enter runs it; the vocabulary opens beside the page, from the box or the error.
  $('text').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); run(); }
  });
  for (const id of ['vocab-open', 'error-vocab']) $(id).addEventListener('click', () => openVocab(insertWord));
  $('vocab-close').addEventListener('click', () => $('vocab').close());
  $('vocab').addEventListener('keydown', (ev) => { if (ev.key === 'Escape') $('vocab').close(); });
  // 实验一 and 实验三: their settings go to the URL; they need no new run of the sentence.
  $('exp1-query').addEventListener('change', () => {
    Object.assign(state, { e1q: Number($('exp1-query').value), e1g: '' });
    writeUrl();
    if (view) drawExp1(view);
  });
  $('exp1-compare').addEventListener('click', () => { state.e1 = true; writeUrl(); if (view) drawExp1Result(view); });
  $('exp3-pos').addEventListener('change', () => {
    Object.assign(state, { e3t: Number($('exp3-pos').value), e3: 0 });
    writeUrl();
    if (view) drawExp3(view);
  });
  $('exp3-word').addEventListener('change', () => {
    Object.assign(state, { e3w: $('exp3-word').value, e3: 0 });
    writeUrl();
    if (view) drawExp3(view);
  });
  // The step tables' row, and the start token hidden: no new run either.
  $('row-pick').addEventListener('change', () => {
    state.row = Number($('row-pick').value);
    writeUrl();
    if (view) { drawSteps(view); drawConcat(view); }
  });
  $('gloss').addEventListener('change', () => { state.gloss = $('gloss').checked; writeUrl(); syncControls(); });
  $('nostart').addEventListener('change', () => {
    state.nostart = $('nostart').checked;
    writeUrl();
    if (view) drawViews(view);
  });
  $('exp3-run').addEventListener('click', () => runExp3(true));
  $('exp3-off').addEventListener('click', () => runExp3(false));
  $('large').addEventListener('mousemove', onLargeMove);
  $('large').addEventListener('mouseleave', () => { $('tooltip').hidden = true; if (view) drawLarge(view); });
  $('lines').addEventListener('mousemove', onLinesMove);
  $('lines').addEventListener('mouseleave', onLinesLeave);
  // The heatmap fills the panel and the first screen: draw it again when the window changes.
  let queued = false;
  window.addEventListener('resize', () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; if (view) { drawLarge(view); drawLines(view); } });
  });
  await run();
}

main();
