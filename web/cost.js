// 思考题 3, the cost of n²: for the chapter's n = 2k and 8k (fp16, one head, one batch), the
// attention matrix's size, beside what attnd held for the same jobs, measured: POST /v1/sdpa of
// one head of width 64 at L = S = n, with need_weights false and then true, and the bytes the API
// answers in usage (workspace_bytes, libattn's scratch; job_bytes, everything the job held).

import { t } from './state.js';
import { $ } from './dom.js';
import { ApiError, post } from './api.js';
import { f32Tensor } from './tensors.js';

export const COST_NS = [2048, 8192];
export const COST_D = 64; // d_k of the chapter's heads (d = 512, H = 8)

// Deterministic values in [−0.5, 0.5), cheap enough for 8192 × 64 of them.
function filler(n) {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = ((Math.imul(i + 1, 2654435761) >>> 0) % 1000) / 1000 - 0.5;
  return a;
}

// The job for n: q, k and v the same (n, COST_D) float32 tensor, in base64.
export function costBody(n, weights) {
  const x = f32Tensor(filler(n * COST_D), [n, COST_D]);
  return { q: x, k: x, v: x, need_weights: weights, encoding: 'base64' };
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
    $('cost-error').hidden = true;
  } catch (e) {
    rows = null;
    $('cost-error').hidden = false;
    $('cost-error').textContent = t('think.error', { msg: e.message });
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
