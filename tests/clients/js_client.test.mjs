// js_client.test.mjs - attnd's JavaScript client (clients/js/attnd.mjs) against a live attnd:
// attention and sdpa against the raw JSON API's answers bit for bit (Float32Array out; tensors,
// nested arrays, -inf in a bias, top-k, a trace), little-endian bytes written by DataView, the
// lesson model by text, the models, v2 infer against v1 bit for bit, errors as AttndError with
// attnd's status, code, message and field (v1 and v2), and a 503 retried after Retry-After (a
// local server answers 503 with Retry-After: 1 twice, then passes the request on to attnd),
// retries running out, a 400 not retried; and the JavaScript example of README.md's "Clients" as
// printed, saved beside a copy of attnd.mjs under the name its paragraph gives, its printed
// answers those its comments give. Loopback only.
//
// Usage: node tests/clients/js_client.test.mjs build/attnd
// Prints one line per failed check and "N passed, N failed"; exits 1 on any failure.
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startAttnd } from '../openapi/attnd.mjs';
import { AttndError, Client, fromBinary, toBinary } from '../../clients/js/attnd.mjs';

let passed = 0;
const failures = [];
function check(ok, what) {
  if (ok) passed++;
  else {
    failures.push(what);
    console.log(`FAIL: ${what}`);
  }
  return ok;
}

const SENTENCE = '程序员把服务器日志发给同事，因为它记录了错误原因。';

// The raw JSON API: {status, body}.
async function raw(base, path, body) {
  const res = await fetch(base + path, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

// Nested JSON arrays (numbers, "-inf") as [shape, flat values rounded to float32].
function flatF32(x) {
  const shape = [];
  for (let l = x; Array.isArray(l); l = l[0]) shape.push(l.length);
  const flat = shape.length ? x.flat(shape.length) : [x];
  return [shape, flat.map((v) => (v === '-inf' ? -Infinity : Math.fround(v)))];
}

// A client tensor {shape, data} equal bit for bit to the raw API's nested arrays.
function same(t, rawRows) {
  if (!t || !ArrayBuffer.isView(t.data)) return false;
  const [shape, flat] = flatF32(rawRows);
  return JSON.stringify(t.shape) === JSON.stringify(shape) && t.data.length === flat.length &&
    t.data.every((v, i) => Object.is(v, flat[i]));
}

function sameTensor(a, b) {
  return a && b && JSON.stringify(a.shape) === JSON.stringify(b.shape) &&
    a.data.length === b.data.length && a.data.every((v, i) => Object.is(v, b.data[i]));
}

// Deterministic numbers in [-1, 1).
function numbers(n, seed) {
  let s = seed >>> 0;
  return Float32Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 31 - 1;
  });
}

function rows(t) { // {shape, data} as nested arrays
  const build = (dims, off) => (dims.length === 1 ? Array.from(t.data.subarray(off, off + dims[0]))
    : Array.from({ length: dims[0] }, (_, i) => build(dims.slice(1),
      off + i * dims.slice(1).reduce((a, b) => a * b, 1))));
  return build(t.shape, 0);
}

async function errorOf(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  return null;
}

// A local server that answers the first `fail` POSTs with `status` (503 with Retry-After: 1)
// and passes the rest on to attnd; counts them.
function relay(target) {
  const state = { fail: 2, status: 503, count: 0 };
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    state.count++;
    if (state.count <= state.fail) {
      const code = state.status === 503 ? 'queue_full' : 'invalid_field';
      res.writeHead(state.status, { 'Content-Type': 'application/json',
        ...(state.status === 503 ? { 'Retry-After': '1' } : {}) });
      res.end(JSON.stringify({ error: { code, message: 'test', field: null } }));
      return;
    }
    const headers = {};
    for (const h of ['content-type', 'inference-header-content-length']) {
      if (req.headers[h]) headers[h] = req.headers[h];
    }
    const r = await fetch(target + req.url, { method: 'POST', headers, body: Buffer.concat(chunks) });
    const out = {};
    for (const h of ['content-type', 'inference-header-content-length']) {
      if (r.headers.get(h)) out[h] = r.headers.get(h);
    }
    res.writeHead(r.status, out);
    res.end(Buffer.from(await r.arrayBuffer()));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () =>
    resolve({ server, state, url: `http://127.0.0.1:${server.address().port}` })));
}

async function run(base) {
  const c = new Client(base, { timeout: 60000 });
  check(await c.ready(), 'ready() is true');

  // Little-endian by DataView, whatever the host: 1.0 is 00 00 80 3f.
  check(toBinary({ shape: [2], data: [1, -2] }).data === 'AACAPwAAAMA=' &&
    toBinary([[true, false]]).data === 'AACAPwAAAAA=',
  'toBinary writes little-endian float32 (1 as 00 00 80 3f), booleans as 1 and 0');
  const back = fromBinary({ dtype: 'float32', shape: [2], data: 'AACAPwAAAMA=' });
  check(back.data instanceof Float32Array && back.data[0] === 1 && back.data[1] === -2,
    'fromBinary reads little-endian float32 into a Float32Array');

  // attention on the demo model: a Float32Array tensor in and out, the raw API's bits.
  const x = { shape: [2, 16, 64], data: numbers(2 * 16 * 64, 36) };
  const r = await c.attention({ query: x, causal: true, need_weights: 'per_head' });
  const want = await raw(base, '/v1/attention', { query: rows(x), causal: true, need_weights: 'per_head' });
  check(r.output.data instanceof Float32Array && r.weights.data instanceof Float32Array &&
    JSON.stringify(r.weights.shape) === '[2,4,16,16]', 'attention: Float32Array out, (2, 4, 16, 16) weights');
  check(want.status === 200 && same(r.output, want.body.output) && same(r.weights, want.body.weights),
    "attention's output and weights equal the raw JSON API's bit for bit");
  check(r.model === 'demo' && r.usage.flops === want.body.usage.flops, "the reply's other fields");

  // Nested arrays, inline parameters, a boolean key mask.
  const q = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]];
  const r2 = await c.attention({ query: q, params: { init: 'identity', num_heads: 2 },
    key_mask: [true, true, false], need_weights: 'mean' });
  const want2 = await raw(base, '/v1/attention', { query: q, params: { init: 'identity', num_heads: 2 },
    key_mask: [1, 1, 0], need_weights: 'mean' });
  check(same(r2.output, want2.body.output) && same(r2.weights, want2.body.weights),
    'nested arrays, init params and a boolean key_mask: the raw API\'s answer');
  // Inline weights as tensors (params' tensors are sent in binary too).
  const w = { shape: [6, 2], data: Float32Array.from([1, 0, 0, 1, 0.5, 0, 0, 1, 1, 0, 0, 1]) };
  const r3 = await c.attention({ query: [[1, 2], [3, 4]], params: { num_heads: 1, in_proj_weight: w,
    'out_proj.weight': [[1, 0], [0, 1]] } });
  const want3 = await raw(base, '/v1/attention', { query: [[1, 2], [3, 4]], params: { num_heads: 1,
    in_proj_weight: rows(w), 'out_proj.weight': [[1, 0], [0, 1]] } });
  check(same(r3.output, want3.body.output), 'inline weights as a tensor: the raw API\'s answer');

  // sdpa with -inf in a bias, top-k and a trace.
  const qs = { shape: [3, 5, 4], data: numbers(60, 1) };
  const ks = { shape: [3, 6, 4], data: numbers(72, 2) };
  const vs = { shape: [3, 6, 3], data: numbers(54, 3) };
  const bias = Array.from({ length: 5 }, (_, i) => Array.from({ length: 6 }, (_, j) =>
    (j > 0 && (i + j) % 4 === 0 ? '-inf' : ((i * j) % 3) / 4)));
  const s1 = await c.sdpa({ q: qs, k: ks, v: vs, attn_bias: bias, scale: 0.4, need_weights: true });
  const ws1 = await raw(base, '/v1/sdpa', { q: rows(qs), k: rows(ks), v: rows(vs), attn_bias: bias,
    scale: 0.4, need_weights: true });
  check(ws1.status === 200 && same(s1.output, ws1.body.output) && same(s1.weights, ws1.body.weights),
    `sdpa with "-inf" in a bias: the raw API's answer (${ws1.status})`);
  const s2 = await c.sdpa({ q: qs, k: ks, v: vs, causal: true, need_weights: true, weights_top_k: 2,
    trace: true });
  const ws2 = await raw(base, '/v1/sdpa', { q: rows(qs), k: rows(ks), v: rows(vs), causal: true,
    need_weights: true, weights_top_k: 2, trace: true });
  check(s2.weights.indices.data instanceof Int32Array &&
    same({ shape: s2.weights.indices.shape, data: Float32Array.from(s2.weights.indices.data) },
      ws2.body.weights.indices) && same(s2.weights.values, ws2.body.weights.values),
  'top-k: Int32Array indices and Float32Array values, the raw API\'s');
  check(['scores', 'masked_scores', 'weights'].every((m) => same(s2.trace[m], ws2.body.trace[m])) &&
    s2.trace.masked_scores.data[1] === -Infinity, 'a trace: every member the raw API\'s, -inf past the causal limit');

  // The lesson model by text.
  const l = await c.attention({ model: 'lesson', text: SENTENCE, need_weights: 'per_head' });
  const wl = await raw(base, '/v1/attention', { model: 'lesson', text: SENTENCE, need_weights: 'per_head' });
  check(JSON.stringify(l.tokens) === JSON.stringify(wl.body.tokens) && l.tokens[0] === '〈s〉' &&
    same(l.weights, wl.body.weights), 'the lesson model by text: its tokens and weights, the raw API\'s');
  const L = l.tokens.length;
  const head = l.head_names.indexOf('coreference');
  const row = l.weights.data.subarray((head * L + l.tokens.indexOf('它')) * L, (head * L + l.tokens.indexOf('它') + 1) * L);
  check(l.tokens[row.indexOf(Math.max(...row))] === '服务器日志', '它 looks at 服务器日志 in coreference');

  // Models.
  const m = await c.models();
  check(m.default === 'demo' && m.models.some((d) => d.name === 'lesson'), 'models(): demo, lesson');
  check((await c.model('lesson')).vocab.includes('它'), "model('lesson') lists its vocabulary");

  // Decode sessions: six rows appended (four alone, then two) against the whole causal call.
  {
    const T = 6;
    const E = 64;
    const xs = { shape: [T, E], data: Float32Array.from({ length: T * E }, (_, i) => Math.sin(i * 0.37)) };
    const whole = await c.attention({ query: xs, causal: true });  // output (T, E)
    const rowsOf = (a, b) => ({ shape: [b - a, E], data: xs.data.slice(a * E, b * E) });
    const s = await c.openSession({ model: 'demo', max_length: 8 });
    let err = 0;
    for (const [a, b] of [[0, 1], [1, 2], [2, 3], [3, 4], [4, 6]]) {
      const r = await s.append({ query: rowsOf(a, b) });  // output (b - a, E)
      for (let i = 0; i < (b - a) * E; i++) err = Math.max(err, Math.abs(r.output.data[i] - whole.output.data[a * E + i]));
    }
    check(s.id.length === 32 && s.length === T && err <= 1e-5,
      `openSession and append: six rows equal the whole causal call's within ${err.toExponential(1)}, length ${s.length}`);
    check((await s.get()).length === T && s.info.bytes > 0, `session get(): length ${s.info.length}`);
    s.length = 3;
    const e409 = await s.append({ query: rowsOf(0, 1) }).then(() => null, (e) => e);
    check(e409 instanceof AttndError && e409.status === 409 && (await s.get()).length === T,
      `an append expecting another length: AttndError 409, nothing appended (${e409})`);
    await s.close();
    const e404 = await s.append({ query: rowsOf(0, 1) }).then(() => null, (e) => e);
    check(e404 instanceof AttndError && e404.status === 404 && e404.code === 'session_unknown',
      `after close(): AttndError 404 session_unknown (${e404})`);
    await s.close(); // gone already: not an error
  }

  // v2 infer against v1.
  const i1 = await c.infer('demo', { query: x }, { parameters: { causal: true, need_weights: 'per_head' } });
  check(sameTensor(i1.output, r.output) && sameTensor(i1.weights, r.weights) &&
    i1.output.data instanceof Float32Array && i1.response.model_name === 'demo' &&
    Object.keys(i1).join() === 'output,weights', 'infer on demo: output and weights equal v1\'s bit for bit');
  const km = [true, true, false, true, true, false];
  const one = await c.sdpa({ q: qs, k: ks, v: vs, key_mask: km, need_weights: true, weights_top_k: 3 });
  const i2 = await c.infer('sdpa', { q: qs, k: ks, v: vs, key_mask: km, key_lengths: [3] },
    { parameters: { need_weights: true, weights_top_k: 3 }, outputs: ['weights_indices', 'output'] });
  const one2 = await c.sdpa({ q: qs, k: ks, v: vs, key_mask: km, key_lengths: [3], need_weights: true,
    weights_top_k: 3 });
  check(Object.keys(i2).join() === 'weights_indices,output' && i2.weights_indices.data instanceof Int32Array &&
    sameTensor(i2.weights_indices, one2.weights.indices) && sameTensor(i2.output, one2.output) &&
    !sameTensor(one.output, one2.output), 'infer on sdpa with a BOOL key_mask, INT32 key_lengths and the outputs in the order asked: v1\'s answer');

  // Errors.
  let e = await errorOf(c.attention({ query: [[1, 2, 3]] }));
  check(e instanceof AttndError && e instanceof Error && e.status === 400 && e.code === 'invalid_field' &&
    e.field === 'query' && e.message.includes('width 3') && String(e).includes('invalid_field'),
  `a wrong width: AttndError 400 invalid_field on query: ${e}`);
  e = await errorOf(c.attention({ query: x, model: 'nope' }));
  check(e instanceof AttndError && e.status === 404 && e.code === 'unknown_model', `unknown model: ${e}`);
  e = await errorOf(c.attention({ query: [[1, NaN, 0]], params: { init: 'identity', num_heads: 1 } }));
  check(e instanceof AttndError && e.code === 'non_finite' && e.field === 'query.data', `NaN: ${e}`);
  e = await errorOf(c.infer('demo', { query: [[1, 2, 3]] }));
  check(e instanceof AttndError && e.status === 400 && e.code === null && e.field === null &&
    e.message.includes('width 3'), `v2's error: AttndError 400 with its message, no code: ${e}`);
  e = await errorOf(c.infer('sdpa', { q: qs, k: ks, v: vs, attn_mask: [[2]] }));
  check(e instanceof RangeError, `a BOOL input of 2: RangeError before sending: ${e}`);
  e = await errorOf(c.attention({ query: [[1, 2], [3]] }));
  check(e instanceof TypeError, `ragged nested arrays: TypeError before sending: ${e}`);

  // 503: retried after Retry-After; retries running out; a 400 not retried.
  const { server, state, url } = await relay(base);
  try {
    let t0 = Date.now();
    const rr = await new Client(url, { retries: 3 }).attention({ query: x, causal: true, need_weights: 'per_head' });
    let dt = (Date.now() - t0) / 1000;
    check(state.count === 3 && sameTensor(rr.output, r.output) && dt >= 2 && dt < 4.5,
      `two 503s with Retry-After: 1, then the answer: ${state.count} requests in ${dt} s (want 3, 2 to 3 s)`);
    Object.assign(state, { count: 0, fail: 2 });
    t0 = Date.now();
    const ri = await new Client(url).infer('demo', { query: x }, { parameters: { causal: true, need_weights: 'per_head' } });
    dt = (Date.now() - t0) / 1000;
    check(state.count === 3 && sameTensor(ri.output, r.output) && dt >= 2, `infer retried the same way (${dt} s)`);
    Object.assign(state, { count: 0, fail: 10 });
    e = await errorOf(new Client(url, { retries: 1 }).attention({ query: x }));
    check(e instanceof AttndError && e.status === 503 && e.code === 'queue_full' && e.retryAfter === 1 &&
      state.count === 2, `retries: 1: two requests, then AttndError 503 queue_full: ${e}, ${state.count}`);
    Object.assign(state, { count: 0, fail: 1, status: 400 });
    e = await errorOf(new Client(url, { retries: 3 }).attention({ query: x }));
    check(e instanceof AttndError && e.status === 400 && state.count === 1,
      `a 400 is thrown at once, not retried: ${e}, ${state.count} requests`);
  } finally {
    server.close();
  }
}

// The README's example, as its paragraph says to run it: beside attnd.mjs, under its name.
async function readmeExample(base) {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const section = readme.match(/^### JavaScript: attnd\.mjs\n([\s\S]*?)(?=^#{2,3} )/m)?.[1] ?? '';
  const code = section.match(/```js\n([\s\S]*?)```/)?.[1];
  const name = section.match(/as `([\w.-]+\.mjs)`/)?.[1];
  if (!check(code && name && code.includes("from './attnd.mjs'"),
    'the README\'s JavaScript client section has an example importing ./attnd.mjs, and its file name')) return;
  const dir = mkdtempSync(join(tmpdir(), 'attnd-js-'));
  try {
    copyFileSync(join(root, 'clients', 'js', 'attnd.mjs'), join(dir, 'attnd.mjs'));
    writeFileSync(join(dir, name), code.replaceAll('http://127.0.0.1:8080', base));
    const { code: exit, stdout, stderr } = await new Promise((resolve) => execFile(process.execPath,
      [name], { cwd: dir, timeout: 60000 }, (err, out, errOut) =>
        resolve({ code: err ? (err.code ?? 1) : 0, stdout: out, stderr: errOut })));
    // What it prints: the comment line after a console.log, or the comment on its line.
    const lines = code.split('\n');
    const want = [];
    lines.forEach((l, i) => {
      if (!l.includes('console.log(')) return;
      const same = l.match(/\/\/ (.*)$/);
      want.push(same ? same[1] : lines[i + 1].replace(/^\s*\/\/ /, ''));
    });
    check(exit === 0 && stdout.trim().split('\n').join('|') === want.join('|'),
      `node ${name}: exit ${exit}, printed ${JSON.stringify(stdout)} (want ${JSON.stringify(want)}): ${stderr.slice(-500)}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const bin = process.argv[2];
if (!bin) {
  console.error('usage: node tests/clients/js_client.test.mjs build/attnd');
  process.exit(2);
}
const { proc, base } = await startAttnd(bin);
try {
  await run(base);
  await readmeExample(base);
} catch (err) {
  check(false, `the test threw: ${err?.stack ?? err}`);
} finally {
  proc.kill('SIGTERM');
}
console.log(`js_client: ${passed} passed, ${failures.length} failed`);
process.exit(failures.length ? 1 : 0);
