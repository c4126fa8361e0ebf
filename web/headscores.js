// What a head of a layered model does, measured on one sequence: TransformerLens's head_detector
// patterns, as api/induction/train_induction.py scores the induction model's heads on held-out
// sequences (head_scores in GET /v1/models), here on the sequence the page shows.
//
// For tokens t (L) and one head's causal weights A (L, L), flat and row-major:
//   previous token: a 1 at (i, i − 1);
//   induction: a 1 at (i, j) where 1 ≤ j ≤ i and t[j − 1] = t[i], j − 1 ≠ i (the same word
//   earlier, shifted one column right: the word that followed it then).
// A score is head_detector's "mul", sum(A ∘ pattern) / sum(A), over the rows that have a target
// (a row with a 1 in its pattern); null when no row has one (a sequence with no repeat has no
// induction target).

// The cells of each pattern as [i, j] pairs, and the duplicate-token cells (the same word at an
// earlier j: where the induction head's stripe sits one step left of).
export function patternCells(t) {
  const prev = [], ind = [], same = [];
  for (let i = 0; i < t.length; i++) {
    if (i >= 1) prev.push([i, i - 1]);
    for (let j = 0; j < i; j++) {
      if (t[j] !== t[i]) continue;
      same.push([i, j]);
      ind.push([i, j + 1]);
    }
  }
  return { prev, ind, same };
}

// The score of weights a (Float32Array(L * L)) against cells ([i, j] pairs); null without any.
export function scoreOf(a, L, cells) {
  if (!cells.length) return null;
  const rows = new Set(cells.map(([i]) => i));
  let hit = 0, all = 0;
  for (const [i, j] of cells) hit += a[i * L + j];
  for (const i of rows) for (let j = 0; j < L; j++) all += a[i * L + j];
  return all > 0 ? hit / all : 0;
}

// Every head's {previous_token, induction} on tokens t from maps[layer][head] (Float32Array(L·L)).
export function headScores(maps, t) {
  const { prev, ind } = patternCells(t), L = t.length;
  return maps.map((layer) => layer.map((a) => ({ previous_token: scoreOf(a, L, prev), induction: scoreOf(a, L, ind) })));
}

// The head of layer li with the highest score of kind ('previous_token' or 'induction'), or -1.
export function bestHead(scores, li, kind) {
  let best = -1;
  (scores[li] || []).forEach((s, h) => {
    if (s[kind] !== null && (best < 0 || s[kind] > scores[li][best][kind])) best = h;
  });
  return best;
}
