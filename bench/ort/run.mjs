// run.mjs - times one ONNX graph of the core benchmark in ONNX Runtime (npm onnxruntime-node, its
// CPU execution provider: MLAS kernels), for bench/run_ort.py; or, with --dump, runs it once and
// writes its outputs for the check against torch.
//
// Usage: node --expose-gc bench/ort/run.mjs --model NAME.GRAPH.onnx --input NAME.x.bin
//            --shape N,L,E [--time SECONDS] [--threads T] [--dump PREFIX]
//   --time     seconds of timed runs to aim for (default 1.5; at least 5 runs), as bench_attention
//   --threads  ORT's intra-op threads (default: the online cores, as attnd's pool)
//   --dump     run once and write each output to PREFIX.OUTPUT.bin (float32), no timing
//
// Prints one JSON line: {"type": "ort", "version", "threads", "reps", "median_ms", "min_ms",
// "session_ms", "rss_before", "rss_peak_growth", "glibc_tunables"} (or {"type": "dump",
// "outputs": {name: [dims]}}). Method, as bench_attention's: two warm-up runs, the second sizes
// the timed runs; median and min. Peak RSS growth = VmHWM after the timed runs minus VmRSS before
// the first run (high-water mark reset through /proc/self/clear_refs); the session (the graph and
// its weights) and the input are made before that baseline, so it counts what the runs need:
// ORT's arena and the output buffers. Outputs from the previous run are dropped before the next.
import fs from 'node:fs';
import os from 'node:os';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const ort = require('onnxruntime-node');

const MIN_REPS = 5;
const MAX_REPS = 10000;

function parseArgs(argv) {
  const a = { time: 1.5, threads: os.availableParallelism ? os.availableParallelism() : os.cpus().length };
  for (let i = 2; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1];
    if (v === undefined) throw new Error(`${k} needs a value`);
    i++;
    if (k === '--model') a.model = v;
    else if (k === '--input') a.input = v;
    else if (k === '--shape') a.shape = v.split(',').map(Number);
    else if (k === '--time') a.time = Number(v);
    else if (k === '--threads') a.threads = Number(v);
    else if (k === '--dump') a.dump = v;
    else throw new Error(`unknown argument ${k}`);
  }
  if (!a.model || !a.input || !a.shape) throw new Error('--model, --input and --shape are required');
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

function collect() {
  if (typeof globalThis.gc === 'function') globalThis.gc();
}

async function main() {
  const a = parseArgs(process.argv);
  const buf = fs.readFileSync(a.input);
  const count = a.shape.reduce((p, d) => p * d, 1);
  if (buf.length !== count * 4) throw new Error(`${a.input}: ${buf.length} bytes, expected ${count * 4}`);
  const x = new Float32Array(count);
  new Uint8Array(x.buffer).set(buf);
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(a.model, {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    intraOpNumThreads: a.threads,
    interOpNumThreads: 1,
  });
  const sessionMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', x, a.shape) };

  if (a.dump) {
    const res = await session.run(feeds);
    const outputs = {};
    for (const name of session.outputNames) {
      const t = res[name];
      fs.writeFileSync(`${a.dump}.${name}.bin`, Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
      outputs[name] = t.dims;
    }
    console.log(JSON.stringify({ type: 'dump', outputs, session_ms: sessionMs }));
    return;
  }

  collect();
  const hwmOk = hwmReset();
  const rss0 = statusBytes('VmRSS:');
  let res = null;
  let t1 = 0;
  for (let i = 0; i < 2; i++) {
    res = null;
    const s = process.hrtime.bigint();
    res = await session.run(feeds);
    t1 = Number(process.hrtime.bigint() - s) / 1e9;
  }
  const reps = Math.min(MAX_REPS, Math.max(MIN_REPS, Math.ceil(a.time / Math.max(t1, 1e-9))));
  const times = [];
  for (let i = 0; i < reps; i++) {
    res = null; // drop the previous outputs first
    const s = process.hrtime.bigint();
    res = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - s) / 1e6);
  }
  const hwm = statusBytes('VmHWM:');
  if (!res) throw new Error('no result');
  const sorted = [...times].sort((p, q) => p - q);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[mid] : 0.5 * (sorted[mid - 1] + sorted[mid]);
  console.log(JSON.stringify({
    type: 'ort',
    version: ort.env.versions.node ?? null,
    threads: a.threads,
    reps,
    median_ms: median,
    min_ms: sorted[0],
    session_ms: sessionMs,
    rss_before: rss0,
    rss_peak_growth: hwmOk && hwm !== null && rss0 !== null ? hwm - rss0 : null,
    glibc_tunables: process.env.GLIBC_TUNABLES ?? null,
  }));
}

main().catch((e) => {
  console.error(`run.mjs: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
