// negative.mjs - the negative-data pass of the OpenAPI tests: for every operation of
// api/openapi.yaml that takes a JSON request body, bodies that break the operation's request
// schema must get a 4xx from a live attnd (never a 200, never a 5xx).
//
// The seeds are the operation's own examples from the spec (each must first pass the schema, as
// ajv reads it, and get its success status: 200, or 201 for POST /v1/sessions; a seed of POST
// /v1/sessions/{id} goes to a session opened for it). From each seed the pass makes bodies that break it: other JSON
// values for the whole body, and at every object member and at the first element of every array
// (recursively) each of a set of replacement values, the member removed, and a member the
// schema does not know added. A body is sent only when ajv (JSON Schema 2020-12, which OpenAPI
// 3.1 uses) says it breaks the schema, so the pass measures the spec against the server: a
// body the schema refuses and attnd answers 200 is a failure (the spec or the server is wrong),
// and so is any 5xx. Then, so that the check can fail, attnd's own 200 for a body the schema
// allows (null for an optional field, which the spec says is the same as leaving it out) must
// not be counted as a break. Exits 1 on any failure.
//
// Usage: node tests/openapi/negative.mjs ATTND_BINARY
import { startAttnd } from './attnd.mjs';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const Ajv2020 = require('ajv/dist/2020').default;
const yaml = require('js-yaml');

const [bin] = process.argv.slice(2);
if (!bin) {
  console.error('usage: negative.mjs ATTND_BINARY');
  process.exit(2);
}

let failures = 0, checks = 0;
function check(ok, what) {
  checks++;
  if (!ok) { failures++; console.error(`FAIL: ${what}`); }
  return ok;
}

const spec = yaml.load(readFileSync(new URL('../../api/openapi.yaml', import.meta.url), 'utf8'));
const ajv = new Ajv2020({ strict: false, allErrors: false });
ajv.addSchema({ $id: 'spec', components: spec.components });

// Path parameters: a model every route knows, and the one version.
const PATH_VALUES = { name: ['demo', 'sdpa'], version: ['1'] };

// Operations with a JSON request body, each with the concrete paths to send to and its seeds.
function operations() {
  const ops = [];
  for (const [path, item] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const json = op?.requestBody?.content?.['application/json'];
      if (!json) continue;
      const validate = ajv.compile({ $ref: `spec${json.schema.$ref}` });
      const seeds = [];
      if (json.example !== undefined) seeds.push(json.example);
      for (const ex of Object.values(json.examples || {})) seeds.push(ex.value);
      let urls = [path];
      for (const [p, values] of Object.entries(PATH_VALUES)) {
        if (!path.includes(`{${p}}`)) continue;
        urls = urls.flatMap((u) => values.map((v) => u.replace(`{${p}}`, v)));
      }
      const ok = Number(Object.keys(op.responses).find((k) => /^2/.test(k)));
      ops.push({ id: op.operationId, method: method.toUpperCase(), urls, validate, seeds, ref: json.schema.$ref, ok });
    }
  }
  return ops;
}

// What the pass puts in place of a value: one of each JSON type, and values near the edges of
// the schema's integers and strings.
const REPLACEMENTS = [null, true, false, 0, -1, 1.5, 2 ** 70, '', 'x', 'per_head', [], [[]], ['x'], {}, { x: 1 }];

// Every body that breaks seed at one place: [description, body].
function* mutations(seed) {
  for (const v of [null, [], 'x', 1, true, [seed]]) yield [`the body ${JSON.stringify(v).slice(0, 20)}`, v];
  function* walk(node, path, set) {
    if (Array.isArray(node)) {
      if (node.length === 0) return;
      const at = `${path}[0]`;
      for (const r of REPLACEMENTS) yield [`${at} = ${JSON.stringify(r)}`, set(0, r)];
      yield* walk(node[0], at, (k, v) => set(0, setIn(node[0], k, v)));
    } else if (node && typeof node === 'object') {
      for (const key of Object.keys(node)) {
        const at = path ? `${path}.${key}` : key;
        for (const r of REPLACEMENTS) yield [`${at} = ${JSON.stringify(r)}`, set(key, r)];
        yield [`${at} left out`, set(key, undefined)];
        yield* walk(node[key], at, (k, v) => set(key, setIn(node[key], k, v)));
      }
      yield [`${path || 'the body'} with a member no_such_field`, set('no_such_field', 1)];
    }
  }
  // set(k, v): the whole body with node[k] replaced by v (undefined: removed); copies on write.
  function setIn(node, k, v) {
    const c = Array.isArray(node) ? node.slice() : { ...node };
    if (v === undefined) delete c[k]; else c[k] = v;
    return c;
  }
  yield* walk(seed, '', (k, v) => setIn(seed, k, v));
}


// A decode session's path ({id}) for a seed: a new session that takes it, on the lesson model
// for words, else on identity projections of the query's width.
async function sessionUrl(base, url, seed) {
  if (!url.includes('{id}')) return url;
  const width = Array.isArray(seed?.query?.[0]) ? seed.query[0].length : 0;
  const open = seed?.tokens || seed?.text ? { model: 'lesson' }
    : { params: { init: 'identity', num_heads: 1 }, embed_dim: width || 2 };
  const r = await fetch(`${base}/v1/sessions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(open) });
  const id = (await r.json()).id;
  check(r.status === 201 && id, `a session for ${url}: ${r.status}`);
  return url.replace('{id}', id);
}

async function send(base, op, url, body) {
  const r = await fetch(`${base}${url}`, { method: op.method, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, text: await r.text() };
}

const { proc, base } = await startAttnd(bin);
const timeout = setTimeout(() => { console.error('FAIL: negative.mjs took over 150 s'); proc.kill(); process.exit(1); }, 150000);
const sent = {};
try {
  const ops = operations();
  check(ops.length >= 4, `the spec has ${ops.length} operations with a JSON body (want the 4 of v1 and v2)`);
  for (const op of ops) {
    sent[op.id] = 0;
    check(op.seeds.length > 0, `${op.id}: the spec gives an example body`);
    for (const path of op.urls) {
      for (const seed of op.seeds) {
        const url = await sessionUrl(base, path, seed);
        // A v2 seed names its inputs for one model: send it only where it answers 200.
        const pos = await send(base, op, url, seed);
        if (url.includes('/v2/') && pos.status !== 200) continue;
        check(op.validate(seed), `${op.id}: its example breaks its own schema ${op.ref}: ${JSON.stringify(op.validate.errors?.[0])}`);
        check(pos.status === op.ok, `${op.id} ${url}: its example gets ${pos.status} ${pos.text.slice(0, 160)} (want ${op.ok})`);
        const seen = new Set();
        for (const [what, body] of mutations(seed)) {
          const key = JSON.stringify(body);
          if (seen.has(key) || op.validate(body)) continue; // not a break of the schema
          seen.add(key);
          const r = await send(base, op, url, body);
          sent[op.id]++;
          check(r.status >= 400 && r.status < 500,
            `${op.id} ${url}: ${what} breaks ${op.ref} (${op.validate(body) ? '' : ajv.errorsText(op.validate.errors)}) but gets ${r.status} ${r.text.slice(0, 160)}`);
        }
      }
    }
    check(sent[op.id] >= 20, `${op.id}: ${sent[op.id]} bodies that break the schema sent (want at least 20)`);
  }
  // The check can fail: a body the schema allows and attnd answers 200 is not one of them.
  const att = ops.find((o) => o.id === 'attention');
  const allowed = { ...att.seeds[0], causal: null, key_mask: null, batch_first: null };
  check(att.validate(allowed), 'null for optional fields is allowed by AttentionRequest');
  const r = await send(base, att, '/v1/attention', allowed);
  check(r.status === 200, `null for optional fields gets 200 (it is the same as leaving them out): ${r.status} ${r.text.slice(0, 160)}`);
  const broken = { ...att.seeds[0], need_weights: 'all' };
  check(!att.validate(broken), 'need_weights "all" breaks AttentionRequest');
} finally {
  clearTimeout(timeout);
  proc.kill('SIGTERM');
}
console.log(`openapi negative pass: ${Object.entries(sent).map(([k, n]) => `${k} ${n}`).join(', ')} bodies that break the schema sent; ${checks - failures} passed, ${failures} failed`);
process.exit(failures ? 1 : 0);
