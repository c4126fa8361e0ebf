// The words of a sentence as small seeded vectors, for the 思考题's demos, which send embeddings
// with weights of their own (inline params) rather than the lesson model: each word's vector
// comes from its own characters alone (FNV-1a of the word seeds the random stream of
// numbers.js), so that a word has the same vector wherever it stands.

import { isStart } from './state.js';
import { randomMatrix } from './numbers.js';

export const DEMO_E = 16; // the embedding width E of the demos

function fnv1a(s) {
  let h = 0x811c9dc5;
  for (const ch of new TextEncoder().encode(s)) h = Math.imul(h ^ ch, 0x01000193) >>> 0;
  return h;
}

// The words of view v without its start token, and their vectors (L, DEMO_E).
export function sentenceVectors(v) {
  const words = v.tokens.filter((_, j) => !isStart(v, j));
  return { words, x: words.map((w) => randomMatrix(1, DEMO_E, fnv1a(w))[0]) };
}

// A seeded E × E matrix with entries of variance 4/E (uniform on ±2√(3/E)): x·W is about twice
// as long as x, so that the scores spread enough for softmax to pick (with variance 1/E the
// weights of a sentence are nearly uniform).
export function seededWeight(e, seed) {
  const a = 2 * Math.sqrt(3 / e);
  return randomMatrix(e, e, seed).map((row) => row.map((x) => Math.fround(x * a)));
}
