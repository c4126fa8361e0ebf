// The chapters' 思考题 on the page: W^Q = W^K (tied.js), the choice of H (multihead.js) and the
// cost of n² (cost.js), in one section under a sentence; this module shows it and wires its
// controls.

import { $ } from './dom.js';
import { drawTied, runTied } from './tied.js';
import { drawMulti, runMulti } from './multihead.js';
import { drawCost, runCost } from './cost.js';

export function initThink() {
  $('tied-run').addEventListener('click', runTied);
  $('tied-switch').addEventListener('change', runTied);
  $('multi-run').addEventListener('click', runMulti);
  $('cost-run').addEventListener('click', runCost);
}

export function drawThink(v) {
  $('think').hidden = !v.words;
  if (!v.words) return;
  drawTied(v);
  drawMulti(v);
  drawCost();
}
