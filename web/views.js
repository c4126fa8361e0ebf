// A result drawn in every view: the grid of heads (a click selects one), the large heatmap, the
// lines, the lesson's note, experiments, the model that learned, generation and 思考题, and the
// tables.

import { LESSON_MODEL, state, t, view, writeUrl } from './state.js';
import { $, setupCanvas } from './dom.js';
import { drawHeat } from './heatmap.js';
import { shownView } from './maps.js';
import { headNameEl } from './heads.js';
import { drawLarge } from './large.js';
import { drawLines } from './lines.js';
import { drawOutput, drawSteps } from './steps.js';
import { drawExp1 } from './exp1.js';
import { drawExp3 } from './exp3.js';
import { drawExp2 } from './exp2.js';
import { drawThink } from './think.js';
import { drawConcat } from './concat.js';
import { drawRecap } from './recap.js';
import { drawGen } from './gen.js';
import { drawLearned } from './learned.js';

function drawGrid(run) {
  const v = shownView(run);
  const grid = $('head-grid');
  grid.textContent = '';
  const entries = [];
  if (v.heads) v.heads.forEach((m, i) => entries.push([String(i), m]));
  if (v.mean && v.h > 1) entries.push(['mean', v.mean]);
  // Thumbnails show patterns, not text: smaller with large font, to leave the first screen to
  // the selected head's heatmap and its labels (and to the second line of a named head's gloss).
  const cell = (state.large ? 56 : 96) / Math.max(v.l, v.s);
  for (const [key, map] of entries) {
    const div = document.createElement('div');
    div.className = 'head-cell' + (String(state.head) === key ? ' selected' : '');
    div.dataset.head = key;
    div.dataset.testid = `head-${key}`;
    const cv = document.createElement('canvas');
    drawHeat(setupCanvas(cv, v.s * cell, v.l * cell), map, v, 0, 0, cell, cell);
    const cap = document.createElement('div');
    cap.append(headNameEl(v, key, true));
    div.append(cv, cap);
    div.addEventListener('click', () => selectHead(run, key));
    grid.append(div);
  }
}

function drawNote(v) {
  $('lesson-note').hidden = !(v.words && v.model === LESSON_MODEL);
  // The start token: what it is, and the switch that hides it.
  $('start-opts').hidden = v.start !== 0;
  $('start-note').textContent = t('start.note');
  $('nostart').checked = state.nostart;
}

export function drawViews(v) {
  headSeq++; // a selection's remaining views, if pending, are drawn here
  drawGrid(v);
  drawLarge(v);
  drawLines(v);
  drawNote(v);
  drawExp1(v);
  drawLearned();
  drawExp2(v);
  drawExp3(v);
  drawGen(v);
  drawThink(v);
  drawSteps(v);
  drawOutput(v);
  drawConcat(v);
  drawRecap(v);
}

// A head selected: its tile outlined and the large heatmap drawn at once, in the frame after the
// click; what else shows the selected head (the lines, 实验三's maps, the step tables) once that
// frame is on the screen. Nothing else depends on the head: the tiles, the experiments'
// pictures, the concat and the tables of the output stay as they are.
let headSeq = 0;
function selectHead(run, key) {
  state.head = key;
  for (const c of $('head-grid').children) c.classList.toggle('selected', c.dataset.head === key);
  drawLarge(run);
  const mine = ++headSeq;
  requestAnimationFrame(() => setTimeout(() => {
    writeUrl();
    if (mine !== headSeq || view !== run) return;
    drawLines(run);
    drawExp3(run);
    drawGen(run);
    drawSteps(run);
  }, 0));
}
