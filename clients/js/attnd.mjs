// attnd.mjs - a client of attnd, the multi-head attention service, for Node.js 18 or later (its
// fetch) and browsers: one ES module, no dependencies. Tensors go in as {shape, data} (data a
// Float32Array or any array of numbers) or as nested arrays, and come back as {shape, data}
// with data a Float32Array (top-k indices an Int32Array).
//
//   import { Client, AttndError } from './attnd.mjs';
//   const client = new Client('http://127.0.0.1:8080');  // {apiKey, timeout (ms), retries}
//   const x = { shape: [2, 16, 64], data: new Float32Array(2 * 16 * 64).fill(0.5) };
//   const r = await client.attention({ query: x, causal: true, need_weights: 'per_head' });
//   r.output.data, r.output.shape, r.weights.shape  // Float32Array, [2, 16, 64], [2, 4, 16, 16]
//   const w = await client.attention({ model: 'lesson', text: '程序员把服务器日志发给同事。',
//                                      need_weights: 'per_head' });  // w.tokens, w.head_names
//   const s = await client.sdpa({ q, k, v, causal: true, need_weights: true });
//   const v2 = await client.infer('demo', { query: x }, { parameters: { causal: true } });
//   try { await client.attention({ query: [[1, 2, 3]] }); }
//   catch (e) { if (e instanceof AttndError) console.log(e.status, e.code, e.message, e.field); }
//
// Bytes are little-endian float32 whatever the host (written and read through DataView), in
// base64 for API v1 and raw after the JSON for the Open Inference Protocol (its binary tensor
// data extension). A 503 is sent again after its Retry-After (`retries` times, plus a random
// part of up to half of it); other errors throw AttndError at once. Every field of the API
// (api/openapi.yaml) is a member of the options. `client.openSession({ model: 'demo' })` opens
// a decode session whose `append({ query })` answers the new rows alone (Session).

// The fields of API v1 requests that hold float32 tensors (masks as 0 and 1): sent as binary
// tensors. Other fields (key_lengths, heads, ...) are sent as JSON.
const V1_TENSORS = new Set(['query', 'key', 'value', 'q', 'k', 'v', 'key_mask', 'attn_mask',
  'attn_bias', 'key_padding_mask', 'torch_attn_mask']);

/** An error answer of attnd: `status` (HTTP), `code` (v1's snake_case code; null under /v2,
 * whose errors are `{"error": "message"}`, and for a body that is not attnd's JSON),
 * `message`, `field` (the JSON path at fault, or null) and `retryAfter` (a 503's seconds). */
export class AttndError extends Error {
  constructor(status, code, message, field = null, retryAfter = null) {
    super(message);
    this.name = 'AttndError';
    this.status = status;
    this.code = code;
    this.field = field;
    this.retryAfter = retryAfter;
  }

  toString() {
    return `${this.name}: ${this.status}${this.code ? ' ' + this.code : ''}: ${this.message}` +
      (this.field ? ` (field ${this.field})` : '');
  }

  /** The error an answer's body (text) describes: v1's object, v2's string, or other text. */
  static fromBody(status, text, retryAfter = null) {
    let err;
    try { err = JSON.parse(text).error; } catch { err = undefined; }
    if (err && typeof err === 'object') {
      return new AttndError(status, err.code ?? null, err.message ?? '', err.field ?? null,
        retryAfter);
    }
    if (typeof err === 'string') return new AttndError(status, null, err, null, retryAfter);
    const message = text.trim().slice(0, 300) || `HTTP ${status}`;
    return new AttndError(status, null, message, null, retryAfter);
  }
}

// ---- Tensors ------------------------------------------------------------------------------

function toNumber(x) {
  if (typeof x === 'boolean') return x ? 1 : 0;
  if (x === '-inf') return -Infinity;
  return Number(x);
}

/** x as {shape, data (an array-like of numbers)}: a tensor as it is, or nested arrays
 * (numbers, booleans, "-inf"), whose rows must be equally long. */
export function tensorOf(x) {
  if (x && !Array.isArray(x) && x.shape && x.data !== undefined) return x;
  if (!Array.isArray(x)) throw new TypeError('a tensor is {shape, data} or nested arrays');
  const shape = [];
  for (let level = x; Array.isArray(level); level = level[0]) shape.push(level.length);
  const data = x.flat(shape.length);
  if (data.length !== shape.reduce((a, b) => a * b, 1) || data.some(Array.isArray)) {
    throw new TypeError(`ragged nested arrays (shape read from the first rows: [${shape}])`);
  }
  return { shape, data };
}

function base64Encode(bytes) {
  if (typeof Buffer !== 'undefined') {
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
  }
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

function base64Decode(text) {
  if (typeof Buffer !== 'undefined') return new Uint8Array(Buffer.from(text, 'base64'));
  const s = atob(text);
  const bytes = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) bytes[i] = s.charCodeAt(i);
  return bytes;
}

// The values as little-endian bytes of a datatype: 'f32', 'i32' or 'u8'.
function leBytes(values, type) {
  const size = type === 'u8' ? 1 : 4;
  const bytes = new Uint8Array(values.length * size);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < values.length; i++) {
    const x = toNumber(values[i]);
    if (type === 'f32') view.setFloat32(4 * i, x, true);
    else if (type === 'i32') view.setInt32(4 * i, x, true);
    else view.setUint8(i, x);
  }
  return bytes;
}

// Little-endian bytes as a Float32Array or Int32Array in the host's order.
function fromLeBytes(bytes, type) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = bytes.byteLength / 4;
  const out = type === 'i32' ? new Int32Array(n) : new Float32Array(n);
  for (let i = 0; i < n; i++) {
    out[i] = type === 'i32' ? view.getInt32(4 * i, true) : view.getFloat32(4 * i, true);
  }
  return out;
}

/** x (a tensor or nested arrays) as an API v1 binary tensor: float32, little-endian, base64. */
export function toBinary(x) {
  const t = tensorOf(x);
  return { dtype: 'float32', shape: [...t.shape], data: base64Encode(leBytes(t.data, 'f32')) };
}

function isBinary(o) {
  return o !== null && typeof o === 'object' && !Array.isArray(o) && typeof o.data === 'string' &&
    Array.isArray(o.shape) && typeof o.dtype === 'string' && Object.keys(o).length === 3;
}

/** An API v1 binary tensor as {shape, data}: a Float32Array, or an Int32Array for int32. */
export function fromBinary(t) {
  const data = fromLeBytes(base64Decode(t.data), t.dtype === 'int32' ? 'i32' : 'f32');
  return { shape: t.shape, data };
}

// A reply's JSON with every binary tensor object in it replaced by {shape, data}.
function decodeTree(o) {
  if (isBinary(o)) return fromBinary(o);
  if (Array.isArray(o)) return o.map(decodeTree);
  if (o !== null && typeof o === 'object') {
    return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, decodeTree(v)]));
  }
  return o;
}

function isTensorLike(x) {
  return Array.isArray(x) || ArrayBuffer.isView(x?.data) || (x?.shape && Array.isArray(x?.data));
}

// The body of a /v1 request: null and undefined left out, tensors as binary tensors (those of
// params too).
function v1Body(fields) {
  const body = {};
  for (const [name, value] of Object.entries(fields)) {
    if (value === null || value === undefined) continue;
    if (V1_TENSORS.has(name) && !isBinary(value)) body[name] = toBinary(value);
    else if (name === 'params' && typeof value === 'object' && !Array.isArray(value)) {
      body[name] = Object.fromEntries(Object.entries(value).map(
        ([k, v]) => [k, isTensorLike(v) ? toBinary(v) : v]));
    } else body[name] = value;
  }
  return body;
}

// An inference input as [its JSON, its raw bytes]: INT32 for key_lengths, BOOL for attn_mask
// and for a key_mask of booleans (else INT32), FP32 for the rest. An explicit
// {shape, data, datatype} keeps its datatype.
function v2Input(name, x) {
  const t = tensorOf(x);
  const values = Array.from(t.data);
  let datatype = t.datatype;
  if (!datatype) {
    if (name === 'key_lengths') datatype = 'INT32';
    else if (name === 'attn_mask') datatype = 'BOOL';
    else if (name === 'key_mask') {
      datatype = values.every((v) => typeof v === 'boolean') ? 'BOOL' : 'INT32';
    }
    else datatype = 'FP32';
  }
  if (datatype === 'BOOL' && !values.every((v) => [0, 1, false, true].includes(v))) {
    throw new RangeError(`${name} must hold 0 and 1 (or booleans)`);
  }
  if (datatype === 'INT32' && !values.every((v) => Number.isInteger(toNumber(v)))) {
    throw new RangeError(`${name} must hold integers`);
  }
  const bytes = leBytes(values, { FP32: 'f32', INT32: 'i32', BOOL: 'u8' }[datatype]);
  return [{ name, shape: [...t.shape], datatype, parameters: { binary_data_size: bytes.length } },
    bytes];
}

// The outputs of an inference reply, {name: {shape, data}}, from the bytes after its JSON
// (tail), in the order listed, or from their JSON data.
function v2Outputs(head, tail) {
  const out = {};
  let pos = 0;
  for (const o of head.outputs ?? []) {
    const type = o.datatype === 'INT32' ? 'i32' : 'f32';
    const size = o.parameters?.binary_data_size;
    let data;
    if (size !== undefined) {
      data = fromLeBytes(tail.subarray(pos, pos + size), type);
      pos += size;
    } else {
      data = type === 'i32' ? Int32Array.from(o.data ?? []) : Float32Array.from(o.data ?? []);
    }
    out[o.name] = { shape: o.shape, data };
  }
  return out;
}

// ---- The client ---------------------------------------------------------------------------

// Retry-After's seconds (a number or an HTTP date), or 1 when missing or unreadable.
function retryAfterSeconds(value) {
  if (value === null || value === undefined) return 1;
  const s = Number(value);
  if (value.trim() !== '' && Number.isFinite(s)) return Math.max(0, s);
  const t = Date.parse(value);
  return Number.isNaN(t) ? 1 : Math.max(0, (t - Date.now()) / 1000);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A client of one attnd server. `url` is its base URL; options: `apiKey` (sent as
 * `Authorization: Bearer`), `timeout` (ms for each answer, body included; default 60000),
 * `retries` (how many times a 503 is sent again after its Retry-After; default 3, 0 never) and
 * `fetch` (default the global one). Every call rejects with AttndError for an error answer,
 * and with fetch's TypeError or an AbortError (the timeout) when the server cannot be
 * reached. */
/** A decode session (POST /v1/sessions), made by Client.openSession: keys and values kept on
 * the server, rows appended and answered alone. `id`, `info` (the session's JSON as last seen)
 * and `length` (its rows, as this client knows them). Every append sends `expected_length`
 * (default: `length`), so a 503 retried after a lost answer never appends twice (the server
 * answers 409 instead). A session lives on the server that opened it and ends when that server
 * stops or after its idle TTL: then AttndError 404 `session_unknown`, and the client opens a
 * new one and appends the prefix again. */
export class Session {
  #compute;
  #request;
  #path;

  constructor(info, compute, request) {
    this.info = info;
    this.id = info.id;
    this.length = info.length ?? 0;
    this.#compute = compute;
    this.#request = request;
    this.#path = `/v1/sessions/${encodeURIComponent(this.id)}`;
  }

  /** POST /v1/sessions/{id}: appends `query` (L, E) rows (or `text`/`tokens` of a model with a
   * vocabulary), with `need_weights`, `heads`, `weights_top_k`, `trace`, `outputs`,
   * `expected_length`; resolves as Client.attention does, with `length` after the append. */
  async append(options) {
    const r = await this.#compute(this.#path, { expected_length: this.length, ...options });
    if (typeof r.length === 'number') this.length = r.length;
    return r;
  }

  /** GET /v1/sessions/{id}: the session's JSON (also kept in `info`). */
  async get() {
    this.info = JSON.parse(new TextDecoder().decode((await this.#request('GET', this.#path)).bytes));
    this.length = this.info.length ?? this.length;
    return this.info;
  }

  /** DELETE /v1/sessions/{id}: ends it and frees its memory; one already gone is not an error. */
  async close() {
    try {
      await this.#request('DELETE', this.#path);
    } catch (e) {
      if (!(e instanceof AttndError) || e.status !== 404) throw e;
    }
  }
}

export class Client {
  constructor(url = 'http://127.0.0.1:8080', { apiKey = null, timeout = 60000, retries = 3,
    fetch: fetchFn = globalThis.fetch } = {}) {
    this.url = (url.includes('://') ? url : `http://${url}`).replace(/\/+$/, '');
    this.apiKey = apiKey;
    this.timeout = timeout;
    this.retries = retries;
    this.fetch = fetchFn;
  }

  /** POST /v1/attention: multi-head attention as nn.MultiheadAttention computes it. options
   * holds the request's fields as api/openapi.yaml names them: `query` (L, E) or (N, L, E),
   * `key`, `value`, the masks (tensors or nested arrays, sent as little-endian float32 base64),
   * `model`, `params`, `text` or `tokens` (a model with a vocabulary), `causal`,
   * `key_lengths`, `need_weights`, `heads`, `weights_top_k`, `trace`, PyTorch's
   * `batch_first`, `key_padding_mask`, `torch_attn_mask`, ... The reply is asked for in base64
   * (`encoding: 'json'` keeps JSON arrays); resolves with its JSON whose tensors are
   * {shape, data: Float32Array}: `output`, `weights`, `tokens`, `head_names`, `usage`, ... */
  attention(options) {
    return this.#compute('/v1/attention', options);
  }

  /** POST /v1/sdpa: softmax(scale · q kᵀ + masks) v on `q` (..., L, D), `k` (..., S, D), `v`
   * (..., S, Dv), ... nothing, (H) or (N, H); with `scale`, `causal`, the masks,
   * `need_weights`, `weights_top_k`, `trace`. Resolves as attention does. */
  sdpa(options) {
    return this.#compute('/v1/sdpa', options);
  }

  /** POST /v1/sessions: opens a decode session on `model` or inline `params`, with
   * `max_length` and the other fields of api/openapi.yaml's SessionOpenRequest; resolves with
   * a Session of length 0. */
  async openSession(options) {
    const r = await this.#request('POST', '/v1/sessions', JSON.stringify(v1Body(options)),
      { 'Content-Type': 'application/json' });
    return new Session(JSON.parse(new TextDecoder().decode(r.bytes)),
      (path, o) => this.#compute(path, o), (method, path) => this.#request(method, path));
  }

  /** GET /v1/models: {default, models: [{name, embed_dim, num_heads, vocab_size, ...}]}. */
  async models() {
    return JSON.parse(new TextDecoder().decode((await this.#request('GET', '/v1/models')).bytes));
  }

  /** GET /v1/models/{name}: one model, with its vocabulary and head names. */
  async model(name) {
    const r = await this.#request('GET', `/v1/models/${encodeURIComponent(name)}`);
    return JSON.parse(new TextDecoder().decode(r.bytes));
  }

  /** Whether GET /readyz answers 200 (false while the server starts or drains); no retry. */
  async ready() {
    try {
      await this.#request('GET', '/readyz', undefined, {}, 0);
      return true;
    } catch (e) {
      if (e instanceof AttndError) return false;
      throw e;
    }
  }

  /** POST /v2/models/{model}/infer (the Open Inference Protocol) with binary tensors.
   * `inputs` is {name: tensor}: `query`, `key`, `value` (for `sdpa`: `q`, `k`, `v`),
   * `key_lengths` (INT32), `key_mask` (BOOL when booleans, else INT32), `attn_mask` (BOOL),
   * `attn_bias`; {shape, data, datatype} sets a datatype itself. `parameters`: causal,
   * need_weights, heads ("0,2"), weights_top_k, scale, priority, timeout. `outputs`: the names
   * to return, in order. Resolves with {name: {shape, data}} and `response`, the reply's JSON
   * (not enumerable). */
  async infer(model, inputs, { parameters = {}, outputs = null } = {}) {
    const heads = [];
    const raws = [];
    for (const [name, x] of Object.entries(inputs)) {
      const [head, raw] = v2Input(name, x);
      heads.push(head);
      raws.push(raw);
    }
    const request = { inputs: heads, parameters: { ...parameters, binary_data_output: true } };
    if (outputs?.length) {
      request.outputs = outputs.map((name) => ({ name, parameters: { binary_data: true } }));
    }
    const json = new TextEncoder().encode(JSON.stringify(request));
    const body = new Uint8Array(json.length + raws.reduce((n, r) => n + r.length, 0));
    body.set(json, 0);
    let pos = json.length;
    for (const r of raws) {
      body.set(r, pos);
      pos += r.length;
    }
    const r = await this.#request('POST', `/v2/models/${encodeURIComponent(model)}/infer`, body, {
      'Content-Type': 'application/octet-stream',
      'Inference-Header-Content-Length': String(json.length),
    });
    const n = Number(r.headers.get('inference-header-content-length') ?? r.bytes.length);
    const response = JSON.parse(new TextDecoder().decode(r.bytes.subarray(0, n)));
    const result = v2Outputs(response, r.bytes.subarray(n));
    Object.defineProperty(result, 'response', { value: response, enumerable: false });
    return result;
  }

  async #compute(path, options) {
    const fields = { encoding: 'base64', ...options };
    const r = await this.#request('POST', path, JSON.stringify(v1Body(fields)),
      { 'Content-Type': 'application/json' });
    return decodeTree(JSON.parse(new TextDecoder().decode(r.bytes)));
  }

  // {status, headers, bytes} of a 2xx answer; a 503 is sent again up to retries times after its
  // Retry-After; other error answers throw AttndError.
  async #request(method, path, body = undefined, headers = {}, retries = this.retries) {
    const h = { Accept: 'application/json', ...headers };
    if (this.apiKey) h.Authorization = `Bearer ${this.apiKey}`;
    for (let attempt = 0; ; attempt++) {
      const abort = new AbortController();
      const timer = setTimeout(() => abort.abort(), this.timeout);
      let res;
      let bytes;
      try {
        res = await this.fetch(this.url + path, { method, headers: h, body, signal: abort.signal });
        bytes = new Uint8Array(await res.arrayBuffer());
      } finally {
        clearTimeout(timer);
      }
      if (res.ok) return { status: res.status, headers: res.headers, bytes };
      const wait = res.status === 503 ? retryAfterSeconds(res.headers.get('retry-after')) : null;
      const err = AttndError.fromBody(res.status, new TextDecoder().decode(bytes), wait);
      if (res.status !== 503 || attempt >= retries) throw err;
      await sleep(wait * (1 + Math.random() / 2) * 1000);
    }
  }
}
