// responses.mjs - the 200 answers of a live attnd against api/openapi.yaml's response schemas,
// validated by ajv (JSON Schema 2020-12, which OpenAPI 3.1 uses), not by attnd's own tests.
//
// Sends every 200 case of tests/api_cases/requests/{attention,sdpa,stack} to POST /v1/attention
// (stack: on the built-in model of layers, induction) or /v1/sdpa, each once as written and once with "trace": true added where the case allows one
// (the trace's members are the schema's hardest: "-inf" strings among numbers), and validates
// each answer against AttentionResponse or SdpaResponse; every 200 case of
// tests/api_cases/requests/session_{open,append} through POST /v1/sessions (and
// /v1/sessions/{id}), against Session and SessionAppendResponse. Then, so that the check can fail, a few
// answers altered by hand must be refused. Exits 1 on any failure.
//
// Usage: node tests/openapi/responses.mjs ATTND_BINARY [CASES_DIR]
import { startAttnd } from './attnd.mjs';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const Ajv2020 = require('ajv/dist/2020').default;
const yaml = require('js-yaml');

const [bin, casesDir = 'tests/api_cases/requests'] = process.argv.slice(2);
if (!bin) {
  console.error('usage: responses.mjs ATTND_BINARY [CASES_DIR]');
  process.exit(2);
}

let failures = 0, checks = 0;
function check(ok, what) {
  checks++;
  if (!ok) { failures++; console.error(`FAIL: ${what}`); }
  return ok;
}

const spec = yaml.load(readFileSync(new URL('../../api/openapi.yaml', import.meta.url), 'utf8'));
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema({ $id: 'spec', components: spec.components });
const schemas = {
  attention: ajv.getSchema('spec#/components/schemas/AttentionResponse'),
  sdpa: ajv.getSchema('spec#/components/schemas/SdpaResponse'),
  session: ajv.getSchema('spec#/components/schemas/Session'),
  append: ajv.getSchema('spec#/components/schemas/SessionAppendResponse'),
};


function errorsOf(validate) {
  return JSON.stringify((validate.errors || []).slice(0, 3));
}

const { proc, base } = await startAttnd(bin);
const timeout = setTimeout(() => { console.error('FAIL: responses.mjs took over 120 s'); proc.kill(); process.exit(1); }, 120000);
let answers = 0, traced = 0, sessions = 0;
const kept = {};
try {
  for (const sub of ['attention', 'sdpa', 'stack']) {
    const ep = sub === 'sdpa' ? 'sdpa' : 'attention';
    const dir = join(casesDir, sub);
    for (const f of readdirSync(dir).filter((n) => n.endsWith('.case')).sort()) {
      const raw = readFileSync(join(dir, f));
      const nl = raw.indexOf(10);
      if (!/^200\b/.test(raw.subarray(0, nl).toString())) continue;
      const body = raw.subarray(nl + 1);
      const bodies = [body];
      let parsed = null;
      try { parsed = JSON.parse(body.toString()); } catch { /* raw bytes: sent as written only */ }
      // "trace" goes in as text, so that the rest of the body stays byte for byte (JSON.parse
      // would round a 64-bit seed).
      const at = body.indexOf(123); // '{'
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed) && !('trace' in parsed) && at >= 0) {
        bodies.push(Buffer.concat([body.subarray(0, at + 1), Buffer.from('"trace":true,'), body.subarray(at + 1)]));
      }
      for (const [i, b] of bodies.entries()) {
        const r = await fetch(`${base}/v1/${ep}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: b });
        const text = await r.text();
        if (i === 1 && r.status === 400 && /"field":"trace"/.test(text)) continue; // past the bound
        check(r.status === 200, `${sub}/${f}${i ? ' with trace' : ''}: HTTP ${r.status} ${text.slice(0, 200)}`);
        if (r.status !== 200) continue;
        const doc = JSON.parse(text);
        const v = schemas[ep];
        check(v(doc), `${sub}/${f}${i ? ' with trace' : ''}: the answer does not match ${ep === 'sdpa' ? 'SdpaResponse' : 'AttentionResponse'}: ${errorsOf(v)}`);
        answers++;
        if (doc.trace) { traced++; kept[ep] = doc; }
      }
    }
  }
  // Decode sessions: every 200 open case (its 201 and GET's answer against Session) and
  // append case (its first line opens, the rest appends: against SessionAppendResponse).
  for (const kind of ['session_open', 'session_append']) {
    const dir = join(casesDir, kind);
    for (const f of readdirSync(dir).filter((n) => n.endsWith('.case')).sort()) {
      const raw = readFileSync(join(dir, f)).toString();
      const lines = raw.split('\n');
      if (!/^200\b/.test(lines[0])) continue;
      const open = await fetch(`${base}/v1/sessions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: lines[1] });
      const opened = await open.text();
      if (!check(open.status === 201, `${kind}/${f}: open HTTP ${open.status} ${opened.slice(0, 200)}`)) continue;
      const doc = JSON.parse(opened);
      check(schemas.session(doc), `${kind}/${f}: the open's answer does not match Session: ${errorsOf(schemas.session)}`);
      sessions++;
      if (kind === 'session_append') {
        const r = await fetch(`${base}/v1/sessions/${doc.id}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: lines.slice(2).join('\n') });
        const text = await r.text();
        if (check(r.status === 200, `${kind}/${f}: append HTTP ${r.status} ${text.slice(0, 200)}`)) {
          const a = JSON.parse(text);
          check(schemas.append(a), `${kind}/${f}: the answer does not match SessionAppendResponse: ${errorsOf(schemas.append)}`);
          kept.append = a;
          sessions++;
        }
        const g = await fetch(`${base}/v1/sessions/${doc.id}`);
        const gd = await g.json();
        check(g.status === 200 && schemas.session(gd), `${kind}/${f}: GET's answer does not match Session: ${errorsOf(schemas.session)}`);
        kept.session = gd;
      }
      await fetch(`${base}/v1/sessions/${doc.id}`, { method: 'DELETE' });
    }
  }
} finally {
  clearTimeout(timeout);
  proc.kill('SIGTERM');
}

// The check can fail: answers altered by hand are refused.
const alter = [
  ['attention', 'a member the trace does not have', (d) => { d.trace.extra = 1; }],
  ['attention', 'a trace without head_outputs', (d) => { delete d.trace.head_outputs; }],
  ['sdpa', 'masked scores holding "minus infinity"', (d) => { let x = d.trace.masked_scores; while (Array.isArray(x[0])) x = x[0]; x[0] = 'minus infinity'; }],
  ['sdpa', 'an answer without usage', (d) => { delete d.usage; }],
  ['append', 'an append without its length', (d) => { delete d.length; }],
  ['session', 'an id of 31 digits', (d) => { d.id = d.id.slice(1); }],
];
for (const [ep, what, f] of alter) {
  if (!kept[ep]) { check(false, `no ${ep} answer to alter`); continue; }
  const d = structuredClone(kept[ep]);
  f(d);
  check(!schemas[ep](d), `${ep}: ${what} is refused by the schema`);
}
check(answers >= 100 && traced >= 40 && sessions >= 20, `validated ${answers} answers, ${traced} with a trace, ${sessions} of sessions (want at least 100, 40 and 20)`);
console.log(`openapi responses: ${answers} answers validated (${traced} with a trace) and ${sessions} of decode sessions against api/openapi.yaml with ajv; ${checks - failures} passed, ${failures} failed`);
process.exit(failures ? 1 : 0);
