// 思考题 3, the cost of n²: for the chapter's n = 2k and 8k (fp16, one head, one batch), the
// attention matrix's size, beside what attnd held for the same jobs, measured: POST /v1/sdpa of
// one head of width 64 at L = S = n, with need_weights false and then true, and the bytes the API
// answers in usage (workspace_bytes, libattn's scratch; job_bytes, everything the job held).
//
// The jobs are small on the wire, so that a whole class can send them at once: q, k and v are
// seeded tensors that attnd makes itself ({"init": "uniform", "seed", "shape"}), and "outputs": []
// asks for a reply of usage alone, while the job is computed as it would be with its output (and
// its weights when need_weights asks for them). A request is about 200 bytes, a reply about 1 KB.

import { t } from './state.js';
import { $ } from './dom.js';
import { ApiError, post } from './api.js';
import { hideError, showError } from './errors.js';
import { setCalls } from './callbox.js';

export const COST_NS = [2048, 8192];
export const COST_D = 64; // d_k of the chapter's heads (d = 512, H = 8)

// A (n, COST_D) tensor of uniform values in [-1, 1) that attnd makes from seed.
const seeded = (seed, n) => ({ init: 'uniform', seed, shape: [n, COST_D] });

// The job for n: q, k and v seeded 1, 2 and 3; the reply carries usage alone.
export function costBody(n, weights) {
  return { q: seeded(1, n), k: seeded(2, n), v: seeded(3, n), need_weights: weights, outputs: [] };
}

// Bytes in MiB or KiB, as a person reads them.
export function bytes(b) {
  if (b >= 1 << 20) return `${(b / 1048576).toFixed(1)} MiB`;
  return `${(b / 1024).toFixed(0)} KiB`;
}

let rows = null; // per n: {n, plain: usage, weights: usage | {refused, needs, message}}
let busy = false;

// Sends the jobs one after another (the larger ones take a moment), then draws the table.
export async function runCost() {
  if (busy) return;
  busy = true;
  $('cost-run').disabled = true;
  $('cost-result').dataset.busy = '1';
  const out = [];
  try {
    for (const n of COST_NS) {
      const plain = (await post('v1/sdpa', costBody(n, false))).usage;
      let withW;
      try {
        withW = (await post('v1/sdpa', costBody(n, true))).usage;
      } catch (e) { // the weights of a large n are over the job limit: the API says how much
        if (!(e instanceof ApiError) || e.code !== 'job_too_large') throw e;
        const m = /needs (\d+) bytes/.exec(e.detail);
        withW = { refused: true, needs: m ? Number(m[1]) : null, message: e.message };
      }
      out.push({ n, plain, weights: withW });
    }
    rows = out;
    setCalls('cost', COST_NS.flatMap((n) => [false, true].map((w) => ({ path: 'v1/sdpa', body: costBody(n, w) }))));
    hideError($('cost-error'));
  } catch (e) {
    rows = null;
    showError($('cost-error'), e, 'think.error');
  } finally {
    busy = false;
    $('cost-run').disabled = false;
  }
  drawCost();
}

export function drawCost() {
  const res = $('cost-result');
  delete res.dataset.busy;
  res.hidden = !rows;
  if (!rows) return;
  res.dataset.done = '1';
  const tbl = $('cost-table');
  tbl.textContent = '';
  const head = document.createElement('tr');
  for (const k of ['cost.col.n', 'cost.col.fp16', 'cost.col.fp32', 'cost.col.plain', 'cost.col.weights']) {
    const th = document.createElement('th');
    th.textContent = t(k);
    head.append(th);
  }
  tbl.append(head);
  for (const r of rows) {
    const tr = document.createElement('tr');
    tr.dataset.n = String(r.n);
    const td = (text, data) => {
      const el = document.createElement('td');
      el.textContent = text;
      el.dataset.i18nData = '';
      for (const [k, x] of Object.entries(data || {})) el.dataset[k] = String(x);
      tr.append(el);
      return el;
    };
    const th = document.createElement('th');
    th.textContent = r.n.toLocaleString('en');
    tr.append(th);
    td(bytes(r.n * r.n * 2), { bytes: r.n * r.n * 2 });
    td(bytes(r.n * r.n * 4), { bytes: r.n * r.n * 4 });
    td(`${bytes(r.plain.job_bytes)} (${bytes(r.plain.workspace_bytes)})`, { job: r.plain.job_bytes, ws: r.plain.workspace_bytes });
    if (r.weights.refused) {
      const el = td('', { refused: 1, needs: r.weights.needs });
      delete el.dataset.i18nData;
      el.className = 'refused';
      el.textContent = r.weights.needs ? t('cost.refused', { b: bytes(r.weights.needs) }) : t('cost.refused.plain');
    } else {
      td(`${bytes(r.weights.job_bytes)} (${bytes(r.weights.workspace_bytes)})`, { job: r.weights.job_bytes, ws: r.weights.workspace_bytes });
    }
    tbl.append(tr);
  }
  const [a, b] = rows;
  $('cost-verdict').textContent = t('cost.verdict', {
    m2: bytes(a.n * a.n * 2), m8: bytes(b.n * b.n * 2), j2: bytes(a.plain.job_bytes), j8: bytes(b.plain.job_bytes),
    ws2: bytes(a.plain.workspace_bytes), ws8: bytes(b.plain.workspace_bytes),
  });
}
