// Deterministic numbers: the random stream attnd's init "random" uses (splitmix64), which the
// random presets' embeddings are made from.

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

// Normal numbers (mean 0, variance 1) by Box–Muller from the same stream, rounded to 2 decimals
// (short on the wire, and what the tables show): the seeded d_k = 64 example, whose q and k
// follow the chapter's assumption for √d_k (第 5 章 2.3).
export function gaussianMatrix(rows, cols, seed) {
  const u = uniformStream(BigInt(seed));
  const unit = () => (u(1) + 1) / 2; // [0, 1)
  return Array.from({ length: rows }, () => Array.from({ length: cols }, () => {
    const r = Math.sqrt(-2 * Math.log(1 - unit())), a = 2 * Math.PI * unit();
    return Math.round(r * Math.cos(a) * 100) / 100;
  }));
}

// The indices 0 … count − 1 in an order shuffled (Fisher–Yates) by the splitmix64 stream of
// seed: the learned model's random words (learned.js), which a test makes again from its seed.
export function shuffled(count, seed) {
  const next = splitmix64(BigInt(seed)), out = Array.from({ length: count }, (_, i) => i);
  for (let i = count - 1; i > 0; i--) {
    const j = Number(next() % BigInt(i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}
