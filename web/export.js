// The exports and the call: the current view as PNG or SVG (svg.js), the request and the
// response as JSON files, and the request the page just made as curl, Python or JavaScript
// (calls.js), ready to copy. Also what a failed run does to the last result (greyed out, nothing
// to export), and the colour scale's switch. Everything is made in the page: nothing is fetched.

import { apiBase, state, t, unitScale, view, writeUrl } from './state.js';
import { $ } from './dom.js';
import { heatmapSvg, linesSvg, svgToPng } from './svg.js';
import { CALLS } from './calls.js';

let call = 'curl'; // the language shown
let stale = false; // the last run failed: what is on the page is not its result

// The main request of run v: {url, body}, the one whose answer the views draw.
export function mainCall(v) {
  return { url: new URL(v.request.path.slice(1), apiBase()).href, body: v.request.body };
}

function download(blob, name) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 60000);
}

const json = (x) => new Blob([`${JSON.stringify(x, null, 2)}\n`], { type: 'application/json' });
const svgBlob = (s) => new Blob([s], { type: 'image/svg+xml' });

// The heatmap's options: its numbers in the cells (the switch beside its buttons).
const opts = () => ({ numbers: $('export-numbers').checked });

// The file of export kind for run v: [Blob, name].
async function exportFile(kind, v) {
  const base = v.words ? `attnd-${v.model}` : `attnd-${state.preset}`;
  const head = state.head === 'mean' || !v.heads ? 'mean' : `head${state.head}`;
  switch (kind) {
  case 'heat-svg': return [svgBlob(heatmapSvg(v, opts())), `${base}-${head}-heatmap.svg`];
  case 'heat-png': return [await svgToPng(heatmapSvg(v, opts())), `${base}-${head}-heatmap.png`];
  case 'lines-svg': return [svgBlob(linesSvg(v)), `${base}-${head}-lines.svg`];
  case 'lines-png': return [await svgToPng(linesSvg(v)), `${base}-${head}-lines.png`];
  case 'request': return [json(v.request.body), `${base}-request.json`];
  default: return [json(v.response), `${base}-response.json`];
  }
}

// Shows the call of run v (null: none yet) in the chosen language, and which exports there are.
export function drawCall(v) {
  const usable = !!v && !stale;
  $('export-none').hidden = usable;
  for (const b of document.querySelectorAll('[data-export], #call-copy')) b.disabled = !usable;
  for (const b of document.querySelectorAll('[data-call]')) b.setAttribute('aria-pressed', String(b.dataset.call === call));
  $('call-code').textContent = usable ? CALLS[call](mainCall(v).url, mainCall(v).body) : '';
  $('call-code').dataset.call = call;
  $('call-copied').textContent = '';
}

// A run failed (failed) or succeeded: the last result is greyed out, with a line saying so, and
// cannot be exported until a run succeeds.
export function setStale(failed) {
  stale = failed && !!view;
  $('views').classList.toggle('stale', stale);
  $('views').dataset.stale = String(stale);
  $('stale-note').hidden = !stale;
  drawCall(view);
}

async function copyCall() {
  const code = $('call-code');
  try {
    await navigator.clipboard.writeText(code.textContent);
    $('call-copied').textContent = t('call.copied');
  } catch { // no clipboard (an insecure origin, or no permission): select the text instead
    getSelection().selectAllChildren(code);
    $('call-copied').textContent = t('call.selected');
  }
}

// The colour scale's switch shows the scale in use (unitScale: the URL's, else the default).
export function syncScale() {
  $('colour-scale').value = unitScale() ? 'unit' : 'max';
}

// Wires the panel; redraw draws every view again (the colour scale changed).
export function initExport(redraw) {
  for (const b of document.querySelectorAll('[data-export]')) {
    b.addEventListener('click', async () => {
      if (!view || stale) return;
      const [blob, name] = await exportFile(b.dataset.export, view);
      download(blob, name);
    });
  }
  for (const b of document.querySelectorAll('[data-call]')) {
    b.addEventListener('click', () => { call = b.dataset.call; drawCall(stale ? null : view); });
  }
  $('call-copy').addEventListener('click', copyCall);
  $('colour-scale').addEventListener('change', () => {
    state.cs = $('colour-scale').value;
    writeUrl();
    if (view) redraw(view);
  });
  syncScale();
  drawCall(null);
}
