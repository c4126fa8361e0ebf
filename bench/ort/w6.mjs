// w6.mjs - W6 (issue 37) in ONNX Runtime (npm onnxruntime-node, its CPU execution provider: MLAS
// kernels): a decode session of T one-row steps on a W6 graph of w6_graphs.py, each step timed,
// for bench/run_ort_w6.py; or, with --dump, one session whose outputs are written for the check
// against torch.
//
// Usage: node --expose-gc bench/ort/w6.mjs --model W6.GRAPH.onnx --graph mha|gqa
//            --input W6.x.bin [--t 4096] [--e 512] [--h 8] [--threads N] [--profile DIR]
//            [--dump FILE]
//   --threads  ORT's intra-op threads (default: the online cores, as attnd's pool)
//   --profile  also run the session in a second InferenceSession with ORT's profiler on (files
//              in DIR) and report each step's time inside ORT's Run (its "model_run" events)
//   --dump     run one session and write its outputs, (T, E) float32, to FILE; no timing
//
// Legend: T steps, E width, H heads, Dh = E / H, t the length after a step, C = T the shared
// buffer's rows (gqa).
//
// A step: mha feeds x_t (1, 1, E) and the previous step's present_key and present_value as
// past (1, H, t - 1, Dh), and keeps the new present (1, H, t, Dh), which ORT allocates and the
// binding copies into fresh JS buffers; gqa feeds x_t, past = present = one buffer (1, H, C, Dh)
// for keys and one for values (fetched as preallocated outputs, so ORT writes the new row in
// place), seqlens_k = t - 1 and total_len = t. Only session.run is inside the timed region.
//
// Method, as bench/w6.c's: one untimed session first (ORT's arena and the pages grow to their
// size), then the timed session. Prints one JSON line: {"type": "w6_ort", "graph", "version",
// "threads", "t", "steps_ms" (T wall times of session.run, as a node caller sees them),
// "run_ms" and "op_ms" (with --profile: each step's model_run and its attention node's kernel
// time, from the profiled session's second pass; else null), "warmup_s", "rss_before",
// "rss_peak_growth" (VmHWM after the untimed session minus VmRSS before it, the session and
// inputs made: what a first session of T steps needs, ORT's arena and the JS buffers, garbage
// not yet collected included), "glibc_tunables"}.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const ort = require('onnxruntime-node');

function parseArgs(argv) {
  const a = {
    t: 4096, e: 512, h: 8,
    threads: os.availableParallelism ? os.availableParallelism() : os.cpus().length,
  };
  for (let i = 2; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1];
    if (v === undefined) throw new Error(`${k} needs a value`);
    i++;
    if (k === '--model') a.model = v;
    else if (k === '--graph') a.graph = v;
    else if (k === '--input') a.input = v;
    else if (k === '--t') a.t = Number(v);
    else if (k === '--e') a.e = Number(v);
    else if (k === '--h') a.h = Number(v);
    else if (k === '--threads') a.threads = Number(v);
    else if (k === '--profile') a.profile = v;
    else if (k === '--dump') a.dump = v;
    else throw new Error(`unknown argument ${k}`);
  }
  if (!a.model || !a.input || !['mha', 'gqa'].includes(a.graph)) {
    throw new Error('--model, --input and --graph mha|gqa are required');
  }
  if (a.e % a.h !== 0) throw new Error('--e must be a multiple of --h');
  return a;
}

function statusBytes(field) {
  const line = fs.readFileSync('/proc/self/status', 'utf8').split('\n').find((l) => l.startsWith(field));
  return line ? Number(line.split(/\s+/)[1]) * 1024 : null;
}

function hwmReset() {
  try {
    fs.writeFileSync('/proc/self/clear_refs', '5');
    return true;
  } catch {
    return false;
  }
}

function sessionOptions(a, profilePrefix) {
  const o = {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    intraOpNumThreads: a.threads,
    interOpNumThreads: 1,
  };
  if (profilePrefix) Object.assign(o, { enableProfiling: true, profileFilePrefix: profilePrefix });
  return o;
}

// A decode session on a graph: reset() empties the cache, step(k) appends row k (0-based) and
// resolves to its output (E floats, valid until the next step).
function makeDecoder(session, a, xs) {
  const { t: T, e: E, h: H } = a;
  const Dh = E / H;
  if (a.graph === 'mha') {
    const empty = () => new ort.Tensor('float32', new Float32Array(0), [1, H, 0, Dh]);
    let pk = empty();
    let pv = empty();
    return {
      reset() {
        pk = empty();
        pv = empty();
      },
      async step(k) {
        const r = await session.run({ x: xs[k], past_key: pk, past_value: pv });
        pk = r.present_key;
        pv = r.present_value;
        return r.out.data;
      },
    };
  }
  // gqa: one buffer of C = T rows for keys and one for values, past and present alike.
  const kt = new ort.Tensor('float32', new Float32Array(H * T * Dh), [1, H, T, Dh]);
  const vt = new ort.Tensor('float32', new Float32Array(H * T * Dh), [1, H, T, Dh]);
  const out = new ort.Tensor('float32', new Float32Array(E), [1, 1, E]);
  const seqlens = new Int32Array(1);
  const total = new Int32Array(1);
  const seqlensT = new ort.Tensor('int32', seqlens, [1]);
  const totalT = new ort.Tensor('int32', total, []);
  return {
    reset() {},
    async step(k) {
      seqlens[0] = k;
      total[0] = k + 1;
      const r = await session.run(
        { x: xs[k], past_key: kt, past_value: vt, seqlens_k: seqlensT, total_len: totalT },
        { out, present_key: kt, present_value: vt });
      return r.out.data;
    },
  };
}

// Runs one session of T steps; times[k] gets step k's wall time in ms when times is given,
// outs (T E floats) its output when outs is given.
async function runSession(dec, T, E, times, outs) {
  dec.reset();
  for (let k = 0; k < T; k++) {
    const s = process.hrtime.bigint();
    const o = await dec.step(k);
    if (times) times[k] = Number(process.hrtime.bigint() - s) / 1e6;
    if (outs) outs.set(o, k * E);
  }
}

// The profiled pass: its own InferenceSession with ORT's profiler, an untimed session then a
// timed one; returns [run_ms, op_ms] of the second, from the profile's events.
async function profiled(a, xs) {
  fs.mkdirSync(a.profile, { recursive: true });
  const prefix = path.join(a.profile, `W6.${a.graph}.prof`);
  const before = new Set(fs.readdirSync(a.profile));
  const session = await ort.InferenceSession.create(a.model, sessionOptions(a, prefix));
  const dec = makeDecoder(session, a, xs);
  await runSession(dec, a.t, a.e, null, null);
  await runSession(dec, a.t, a.e, null, null);
  session.endProfiling();
  const file = fs.readdirSync(a.profile).find((f) => !before.has(f) && f.startsWith(path.basename(prefix)));
  if (!file) throw new Error(`no profile written under ${prefix}`);
  const events = JSON.parse(fs.readFileSync(path.join(a.profile, file), 'utf8'));
  fs.unlinkSync(path.join(a.profile, file)); // tens of MB; the numbers are in our output
  const runs = events.filter((e) => e.name === 'model_run').map((e) => e.dur / 1e3);
  const op = events
    .filter((e) => e.cat === 'Node' && /^(MultiHeadAttention|GroupQueryAttention).*_kernel_time$/.test(e.name))
    .map((e) => e.dur / 1e3);
  if (runs.length !== 2 * a.t || op.length !== 2 * a.t) {
    throw new Error(`profile: ${runs.length} model_run and ${op.length} attention events, expected ${2 * a.t}`);
  }
  return [runs.slice(a.t), op.slice(a.t)];
}

async function main() {
  const a = parseArgs(process.argv);
  const { t: T, e: E } = a;
  const buf = fs.readFileSync(a.input);
  if (buf.length !== T * E * 4) throw new Error(`${a.input}: ${buf.length} bytes, expected ${T * E * 4}`);
  const X = new Float32Array(T * E);
  new Uint8Array(X.buffer).set(buf);
  const xs = Array.from({ length: T }, (_, k) => new ort.Tensor('float32', X.subarray(k * E, (k + 1) * E), [1, 1, E]));
  const session = await ort.InferenceSession.create(a.model, sessionOptions(a, null));
  const dec = makeDecoder(session, a, xs);

  if (a.dump) {
    const outs = new Float32Array(T * E);
    await runSession(dec, T, E, null, outs);
    fs.writeFileSync(a.dump, Buffer.from(outs.buffer));
    console.log(JSON.stringify({ type: 'dump', graph: a.graph, file: a.dump, t: T, e: E }));
    return;
  }

  if (typeof globalThis.gc === 'function') globalThis.gc();
  const hwmOk = hwmReset();
  const rss0 = statusBytes('VmRSS:');
  const w0 = process.hrtime.bigint();
  await runSession(dec, T, E, null, null);
  const warmupS = Number(process.hrtime.bigint() - w0) / 1e9;
  const hwm = statusBytes('VmHWM:');
  const steps = new Array(T);
  await runSession(dec, T, E, steps, null);
  let runMs = null;
  let opMs = null;
  if (a.profile) [runMs, opMs] = await profiled(a, xs);
  const r4 = (v) => Math.round(v * 1e4) / 1e4;
  console.log(JSON.stringify({
    type: 'w6_ort',
    graph: a.graph,
    version: ort.env.versions.node ?? null,
    threads: a.threads,
    t: T,
    steps_ms: steps.map(r4),
    run_ms: runMs && runMs.map(r4),
    op_ms: opMs && opMs.map(r4),
    warmup_s: warmupS,
    rss_before: rss0,
    rss_peak_growth: hwmOk && hwm !== null && rss0 !== null ? hwm - rss0 : null,
    glibc_tunables: process.env.GLIBC_TUNABLES ?? null,
  }));
}

main().catch((e) => {
  console.error(`w6.mjs: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
