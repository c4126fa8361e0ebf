// Generation on a key/value cache: the sentence of the run (a sentence of the lesson model)
// appended to a decode session one token per request, the weights of each new row drawn under
// the rows before it, the rows above checked against what the page showed at the step before,
// and the cache's bytes beside what recomputing the prefix would cost (genchart.js). The guided
// path's step 8 starts it (path.js), and leaving that step deletes the session.
//
// Requests: POST /v1/sessions {model, max_length: the sentence's tokens}; then per step t (1 …
// n) POST /v1/sessions/{id} {tokens: [token t], add_special_tokens: false, expected_length:
// t − 1, need_weights: per_head, outputs: [weights], encoding: base64}, which answers the new
// row's weights (H, 1, t) over every key so far; DELETE /v1/sessions/{id} at the end. Each is
// well under the page's limits (a request of about 200 bytes, an answer under 2 KiB).
//
// Legend: n the sentence's tokens (the start token first), t the step and the session's length
// after it (1-based: step t appends token t), H heads, E the model's width.

import { LESSON_MODEL, apiBase, state, t, view } from './state.js';
import { $ } from './dom.js';
import { ApiError, PageError, del, post } from './api.js';
import { readTensor } from './tensors.js';
import { hideError, showError } from './errors.js';
import { colour, rgb } from './heatmap.js';
import { headName } from './heads.js';
import { f2 } from './tables.js';
import { count, drawGenChart, kib } from './genchart.js';

// The session of the sentence shown, or null: {key, tokens, id, max, bytes, rowBytes, e, h,
// rows, flops, shown, check, ended}; rows[t − 1] is step t's weights, (H, t) flat, as received;
// flops[t − 1] its usage.flops; shown the maps the page drew at the last step, (H, t, t) as
// float32 bits, which the next step's rows are checked against; check that step's result.
let gen = null;
let seq = 0;       // bumped when a session ends: an answer for an older one is dropped
let busy = false;  // a request of the session under way

const usable = (v) => !!(v && v.words && v.model === LESSON_MODEL && v.start === 0);
const genKey = (v) => JSON.stringify([v.model, v.tokens]);
const sessionPath = (id) => `v1/sessions/${encodeURIComponent(id)}`;
// Token j's label (0-based): the start token as the page writes it (〈始〉 / <s>), else itself.
const label = (j) => (j === 0 ? t('tok.start') : gen.tokens[j]);

// The maps of steps 1 … t as float32 bits, (H, t, t) flat per head: row i holds step i + 1's
// weights over keys 0 … i and zeros over the keys after it, which it never saw.
function maps(rows, h, tt) {
  return Array.from({ length: h }, (_, k) => {
    const m = new Float32Array(tt * tt);
    rows.slice(0, tt).forEach((r, i) => m.set(r.subarray(k * (i + 1), (k + 1) * (i + 1)), i * tt));
    return new Uint32Array(m.buffer);
  });
}

// The rows above step t (0 … t − 2) in every head against the maps shown at step t − 1, bit for
// bit, and the new key (column t − 1) zero for each of them: {rows: t − 1, bad: rows that differ}.
function checkRows(prev, cur, tt) {
  let bad = 0;
  for (let i = 0; i < tt - 1; i++) {
    let same = true;
    for (let k = 0; k < cur.length && same; k++) {
      for (let j = 0; j < tt && same; j++) {
        const was = j < tt - 1 ? prev[k][i * (tt - 1) + j] : 0;
        if (cur[k][i * tt + j] !== was) same = false;
      }
    }
    if (!same) bad++;
  }
  return { rows: tt - 1, bad };
}

// Appends the next token of the sentence (step t = the length + 1). true once its row is in.
async function appendNext(mine) {
  const at = gen.rows.length;
  const body = {
    tokens: [gen.tokens[at]], add_special_tokens: false, expected_length: at,
    need_weights: 'per_head', outputs: ['weights'], encoding: 'base64',
  };
  const r = await post(sessionPath(gen.id), body);
  if (mine !== seq) return false;
  const w = readTensor(r.weights); // (H, 1, t)
  if (r.length !== at + 1 || w.shape.join() !== [gen.h, 1, at + 1].join()) throw new PageError('err.page');
  gen.rows.push(Float32Array.from(w.data));
  gen.flops.push(r.usage.flops);
  const tt = at + 1, cur = maps(gen.rows, gen.h, tt);
  gen.check = gen.shown ? { t: tt, ...checkRows(gen.shown, cur, tt) } : { t: tt, rows: 0, bad: 0 };
  gen.shown = cur;
  return true;
}

// Runs fn (a session's requests) with the buttons off; an error is shown in the section.
async function guarded(fn) {
  if (busy) return;
  busy = true;
  const mine = seq;
  drawGen(view);
  try {
    await fn(mine);
    if (mine === seq) hideError($('gen-error'));
  } catch (e) {
    if (mine !== seq) return;
    const gone = e instanceof ApiError && (e.status === 404 || e.status === 410);
    const mismatch = e instanceof ApiError && e.code === 'length_mismatch';
    if (gen && (gone || mismatch)) gen.broken = true;
    showError($('gen-error'), e, gone ? 'gen.gone' : mismatch ? 'gen.mismatch' : 'gen.error');
  } finally {
    if (mine === seq) busy = false; // else endGen let go of it already
    if (view) drawGen(view);
  }
}

// Start: the session of the sentence shown (a new one; an old one is deleted first), and its
// first token, the start token.
export async function startGen() {
  const v = view;
  if (!usable(v) || busy) return;
  await endGen();
  gen = { key: genKey(v), tokens: v.tokens.slice(), id: null, rows: [], flops: [], shown: null, check: null };
  await guarded(async (mine) => {
    const s = await post('v1/sessions', { model: v.model, max_length: v.tokens.length });
    if (mine !== seq) { del(sessionPath(s.id)).catch(() => {}); return; }
    Object.assign(gen, { id: s.id, max: s.max_length, bytes: s.bytes, rowBytes: s.bytes / s.max_length, e: s.embed_dim, h: s.num_heads });
    await appendNext(mine);
  });
}

const canAppend = () => !!(gen && gen.id && !gen.broken && gen.rows.length < gen.tokens.length);

export const nextGen = () => guarded(async (mine) => { if (canAppend()) await appendNext(mine); });

export const allGen = () => guarded(async (mine) => {
  while (canAppend() && mine === seq && await appendNext(mine)) drawGen(view);
});

// Ends the session (DELETE) and forgets it; ended marks that the section says so. Safe to call
// when there is none.
export async function endGen(ended = false) {
  seq++;
  const id = gen && gen.id;
  gen = ended && id ? { ended: true } : null;
  busy = false;
  hideError($('gen-error'));
  if (view) drawGen(view);
  if (id) await del(sessionPath(id)).catch(() => {}); // gone already: nothing to give back
}

// A page closed or left: its session deleted in a request that outlives the page.
function onHide() {
  if (gen && gen.id) fetch(new URL(sessionPath(gen.id), apiBase()), { method: 'DELETE', keepalive: true }).catch(() => {});
}

export function initGen() {
  $('gen-start').addEventListener('click', startGen);
  $('gen-next').addEventListener('click', nextGen);
  $('gen-all').addEventListener('click', allGen);
  window.addEventListener('pagehide', onHide);
}

// ---- Drawing ------------------------------------------------------------------------------

// Whether a cell of colour c takes white numbers, else black: white is the more legible when
// its relative luminance (WCAG's formula) is below 0.179, and either then contrasts 4.5:1 at
// least, on every colour of the scale.
function darkCell(c) {
  const [r, g, b] = c.map((v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.179;
}

// The weights of head k at step tt as a table: row i the query of step i + 1, column j the key
// and value of token j + 1; the cells after the diagonal masked, the newest row and column marked.
function mapTable(v, k, tt) {
  const tbl = document.createElement('table');
  tbl.className = 'num gen-map';
  tbl.dataset.testid = 'gen-map';
  tbl.dataset.head = String(k);
  const cap = document.createElement('caption');
  cap.textContent = t('gen.map', { head: headName(v, String(k)) });
  tbl.append(cap);
  const head = document.createElement('tr');
  head.append(document.createElement('th'));
  for (let j = 0; j < tt; j++) {
    const th = document.createElement('th');
    th.className = 'gen-key' + (j === tt - 1 ? ' new-col' : '');
    th.dataset.i18nData = '';
    th.dataset.j = String(j + 1);
    const kv = document.createElement('span');
    kv.className = 'kv';
    kv.textContent = `k_${j + 1} v_${j + 1}`;
    th.append(label(j), document.createElement('br'), kv);
    head.append(th);
  }
  tbl.append(head);
  const m = new Float32Array(gen.shown[k].buffer);
  for (let i = 0; i < tt; i++) {
    const tr = document.createElement('tr');
    tr.dataset.i18nData = '';
    tr.dataset.t = String(i + 1);
    if (i === tt - 1) tr.className = 'new';
    const th = document.createElement('th');
    th.textContent = t('gen.row', { t: i + 1, w: label(i) });
    tr.append(th);
    for (let j = 0; j < tt; j++) {
      const td = document.createElement('td');
      td.dataset.j = String(j + 1);
      if (j === tt - 1) td.classList.add('new-col');
      if (j > i) {
        td.classList.add('masked');
      } else {
        const x = m[i * tt + j];
        td.textContent = f2(x);
        td.dataset.x = String(x);
        const c = colour(x);
        td.style.background = rgb(c);
        if (darkCell(c)) td.classList.add('dark');
      }
      tr.append(td);
    }
    tbl.append(tr);
  }
  return tbl;
}

export function drawGen(v) {
  const sec = $('gen');
  // Another sentence, or none of the lesson model: the session of the last one ends.
  if (gen && gen.key && (!usable(v) || gen.key !== genKey(v))) { endGen(); return; }
  sec.hidden = !usable(v);
  if (sec.hidden) return;
  const live = !!(gen && gen.id), tt = live ? gen.rows.length : 0, n = live ? gen.tokens.length : v.tokens.length;
  sec.dataset.t = String(tt);
  sec.dataset.busy = busy ? '1' : '0';
  $('gen-start').textContent = t(live ? 'gen.restart' : 'gen.start');
  $('gen-start').disabled = busy;
  $('gen-next').disabled = busy || !canAppend();
  $('gen-all').disabled = busy || !canAppend();
  const now = $('gen-now'), body = $('gen-body');
  body.textContent = '';
  body.hidden = !tt;
  if (!tt) {
    now.textContent = gen && gen.ended ? t('gen.ended') : t('gen.none', { n });
    delete sec.dataset.check;
    return;
  }
  now.textContent = t('gen.now', { t: tt, n, w: label(tt - 1) });
  if (tt === n) { // the last token: a sentence of its own
    const done = document.createElement('span');
    done.dataset.testid = 'gen-done';
    done.textContent = t('gen.done', { n });
    now.append(' ', done);
  }
  const k = state.head === 'mean' ? 0 : Math.min(Number(state.head) || 0, gen.h - 1);
  const wrap = document.createElement('div');
  wrap.className = 'canvas-wrap';
  wrap.append(mapTable(v, k, tt));
  const c = gen.check, verdict = document.createElement('p');
  verdict.className = 'verdict';
  verdict.dataset.testid = 'gen-check';
  verdict.textContent = c.t === 1 ? t('gen.check.first')
    : c.bad ? t('gen.check.bad', { c: c.bad, r: c.rows, p: c.t - 1 })
      : t('gen.check.same', { r: c.rows, p: c.t - 1, h: gen.h, t: c.t });
  sec.dataset.check = c.t === 1 ? 'first' : c.bad ? 'bad' : 'same';
  const line = (key, params, id) => {
    const p = document.createElement('p');
    p.className = 'note';
    p.dataset.testid = id;
    p.textContent = t(key, params);
    return p;
  };
  const e = gen.e, f = gen.flops[tt - 1];
  body.append(wrap, verdict);
  if (c.t > 1 && !c.bad) body.append(line('gen.check.why', { t: c.t, p: c.t - 1 }, 'gen-check-why'));
  body.append(
    line('gen.session', { len: tt, max: gen.max, used: kib(tt * gen.rowBytes), bytes: kib(gen.bytes), row: kib(gen.rowBytes), e }, 'gen-session'),
    line('gen.flops', { f: count(f), a: count(4 * e * tt), t: tt, r: count(2 * e * tt * (tt + 1)) }, 'gen-flops'));
  const chart = document.createElement('figure');
  chart.className = 'gen-chart';
  chart.dataset.testid = 'gen-chart';
  const cap = document.createElement('figcaption');
  cap.textContent = t('gen.chart');
  const svgBox = document.createElement('div');
  const steps = Array.from({ length: tt }, (_, i) => i + 1);
  drawGenChart(svgBox, n, gen.rowBytes, e, steps.map((s) => s * gen.rowBytes),
    steps.map((s) => 2 * e * s * (s + 1)), steps.map((s) => 4 * e * s));
  chart.append(cap, svgBox, line('gen.chart.note', {}, 'gen-chart-note'));
  body.append(chart);
}
