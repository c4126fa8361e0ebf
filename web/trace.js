// The trace of a run (POST /v1/attention or /v1/sdpa with "trace": true): every step of the
// computation per head, read into rows the step tables show; and the value vectors of a model's
// vocabulary, read through the same option, for "what this word received".

import { models } from './state.js';
import { post } from './api.js';

// The API bounds a trace (openapi.yaml, "trace"): N·H·L·S and N·max(L, S)·E at most 65536.
export const TRACE_BOUND = 65536;

// A trace tensor (nested arrays, "-inf" for a masked cell) as {rows, x, shape, data}: data flat
// (Float64Array), x the length of a row (the last dim), rows the number of rows per head (the
// dim before it); the dims before those are the heads (a batch of one and H, or H).
function readT(t) {
  const shape = [];
  for (let x = t; Array.isArray(x); x = x[0]) shape.push(x.length);
  const flat = t.flat(Infinity).map((x) => (x === '-inf' ? -Infinity : x === 'inf' ? Infinity : Number(x)));
  const x = shape[shape.length - 1], rows = shape[shape.length - 2];
  return { shape, x, rows, data: Float64Array.from(flat) };
}

// Row i of head h of a read tensor, as an array.
export const rowAt = (t, h, i) => Array.from(t.data.subarray((h * t.rows + i) * t.x, (h * t.rows + i + 1) * t.x));

// The request body of the run's trace: the run's own request, with every weight per head and the
// trace, whose reply carries the trace alone ("outputs": the run's own reply has the output and
// the weights); null when the trace would pass the API's bound.
export function traceBody(v, body) {
  const n = v.l * v.s * v.h, wide = Math.max(v.l, v.s) * (v.mode === 'sdpa' ? v.h * Math.max(v.dk, v.dv || v.dk) : v.e);
  if (n > TRACE_BOUND || wide > TRACE_BOUND) return null;
  const b = Object.assign({}, body, { need_weights: v.mode === 'sdpa' ? true : 'per_head', trace: true, outputs: ['trace'] });
  delete b.weights_top_k;
  delete b.encoding;
  if (b.query && !Array.isArray(b.query)) return null; // base64 embeddings: a large job
  return b;
}

// Asks the API for the trace and reads it: {scale, scores, masked, weights, q?, k?, v?, out?},
// each a read tensor (q, k, v and out for /v1/attention only).
export async function fetchTrace(path, body) {
  const r = await post(path, body);
  const tr = r.trace;
  if (!tr) throw new Error('no trace in the response');
  const out = { scale: Number(tr.scale), scores: readT(tr.scores), masked: readT(tr.masked_scores), weights: readT(tr.weights) };
  for (const [k, name] of [['q', 'q'], ['k', 'k'], ['v', 'v'], ['out', 'head_outputs']]) if (tr[name]) out[k] = readT(tr[name]);
  return out;
}

// ---- Value vectors of a vocabulary ---------------------------------------------------------

const PROBE = 24; // words per probe request
const valueTables = new Map(); // model name -> a promise of {words, h, dh, vec: Float64Array(H, words, Dh)}

// The value vector of every word of a model's vocabulary in every head, from probe requests:
// the words themselves as tokens (without the start token), PROBE at a time, with the trace,
// whose v holds each word's value vector; a reply carries the trace alone (about 140 KB for 24
// words of the lesson model). Cached per model.
export function valueTable(name, vocab) {
  if (!valueTables.has(name)) {
    const m = models && models.models.find((x) => x.name === name);
    const p = (async () => {
      const chunks = [];
      for (let i = 0; i < vocab.length; i += PROBE) chunks.push(vocab.slice(i, i + PROBE));
      const res = await Promise.all(chunks.map((tokens) => post('v1/attention', Object.assign(
        { model: name, tokens, need_weights: false, trace: true, outputs: ['trace'] }, m && m.start_token ? { add_special_tokens: false } : {}))));
      const vs = res.map((r) => readT(r.trace.v));
      const h = vs[0].data.length / (vs[0].rows * vs[0].x), dh = vs[0].x;
      const vec = new Float64Array(h * vocab.length * dh);
      let w0 = 0;
      vs.forEach((t) => {
        for (let hh = 0; hh < h; hh++) {
          for (let i = 0; i < t.rows; i++) vec.set(rowAt(t, hh, i), (hh * vocab.length + w0 + i) * dh);
        }
        w0 += t.rows;
      });
      return { words: vocab, h, dh, vec };
    })();
    p.catch(() => valueTables.delete(name)); // try again next time
    valueTables.set(name, p);
  }
  return valueTables.get(name);
}

export const norm = (a) => Math.sqrt(a.reduce((s, x) => s + x * x, 0));

// The vocabulary word whose value vector in head h points most nearly the same way as out (the
// largest cosine); {word, cos, index} or null when out is 0.
export function nearestWord(table, h, out) {
  const n = norm(out);
  if (!(n > 0)) return null;
  let best = null;
  for (let w = 0; w < table.words.length; w++) {
    const o = (h * table.words.length + w) * table.dh;
    let dot = 0, vv = 0;
    for (let c = 0; c < table.dh; c++) { const x = table.vec[o + c]; dot += x * out[c]; vv += x * x; }
    if (!(vv > 0)) continue;
    const cos = dot / (n * Math.sqrt(vv));
    if (!best || cos > best.cos) best = { word: table.words[w], cos, index: w };
  }
  return best;
}
