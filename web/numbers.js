// Deterministic numbers and small linear algebra: the random streams attnd's models and the
// random presets are made from, and the products of the step tables.

// The server's built-in "demo" model is api_model_init_random("demo", 64, 4, DEMO_SEED): the
// page regenerates its weights to show the step tables, and checks the result against the API.
const DEMO_SEED = 24301n;

// ---- Deterministic numbers ----------------------------------------------------------------

const MASK64 = (1n << 64n) - 1n;

// splitmix64: the stream api_model_init_random uses.
function splitmix64(seed) {
  let x = BigInt.asUintN(64, BigInt(seed));
  return () => {
    x = (x + 0x9E3779B97F4A7C15n) & MASK64;
    let z = x;
    z = ((z ^ (z >> 30n)) * 0xBF58476D1CE4E5B9n) & MASK64;
    z = ((z ^ (z >> 27n)) * 0x94D049BB133111EBn) & MASK64;
    return z ^ (z >> 31n);
  };
}

// Uniform float32 in [-a, a) from a splitmix64 stream, as api.h documents.
function uniformStream(seed) {
  const next = splitmix64(seed);
  return (a) => Math.fround(a * (2 * (Number(next() >> 40n) / 16777216) - 1));
}

export function randomMatrix(rows, cols, seed) {
  const u = uniformStream(BigInt(seed));
  return Array.from({ length: rows }, () => Array.from({ length: cols }, () => u(1)));
}

// ---- Small linear algebra (step tables only; L <= 16) -------------------------------------

// x (n, k) times w^T with w (m, k), plus b (m): the y = x W^T + b of nn.Linear.
export function linear(x, w, b) {
  return x.map((row) => w.map((wr, o) => wr.reduce((s, v, c) => s + v * row[c], b ? b[o] : 0)));
}

export function matmulT(a, b) { // a (n, k) b (m, k) -> (n, m)
  return a.map((ra) => b.map((rb) => ra.reduce((s, v, c) => s + v * rb[c], 0)));
}

export function matmul(a, b) { // a (n, k) b (k, m) -> (n, m)
  return a.map((ra) => b[0].map((_, j) => ra.reduce((s, v, c) => s + v * b[c][j], 0)));
}

export const cols = (m, c0, c1) => m.map((r) => r.slice(c0, c1));

// The parameters of a model the page can regenerate (demo, init random, init identity), as
// PyTorch state_dict arrays; null when it cannot (a model loaded from a file).
export function knownParams(p, e) {
  if (p.kind === 'init' && p.init === 'identity') {
    const eye = Array.from({ length: e }, (_, i) => Array.from({ length: e }, (_, j) => +(i === j)));
    return { win: [...eye, ...eye, ...eye], bin: null, wout: eye, bout: null };
  }
  let seed;
  if (p.kind === 'init' && p.init === 'random') seed = BigInt(p.seed);
  else if (p.kind === 'model' && p.name === 'demo' && e === 64) seed = DEMO_SEED;
  else return null;
  const u = uniformStream(seed);
  const aIn = Math.sqrt(6 / (e + 3 * e)), aOut = Math.sqrt(6 / (e + e));
  const win = Array.from({ length: 3 * e }, () => Array.from({ length: e }, () => u(aIn)));
  const wout = Array.from({ length: e }, () => Array.from({ length: e }, () => u(aOut)));
  return { win, bin: null, wout, bout: null };
}
