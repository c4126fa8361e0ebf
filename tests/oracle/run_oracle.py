#!/usr/bin/python3
"""run_oracle.py - checks libattn against PyTorch in float64.

Builds a seeded, randomized grid of MHA and SDPA cases, computes each case's expectation in
float64 (torch.nn.MultiheadAttention, batch_first, for MHA; softmax(q k^T * scale + mask) v in
torch for SDPA), writes the inputs for tests/oracle_run.c, runs it, and compares what it wrote
within TOL absolute. Prints one line per case group and a total line; exits 1 when any comparison
fails, when the runner fails, or when too few values were compared.

Usage: run_oracle.py --runner build/tests/oracle_run --work build/oracle [--seed N] [-v]

A case is one set of inputs and expectations; a run is one way of computing it (weights mode,
path, block sizes, pool), each in its own directory under --work:
  case.txt                 "key value..." lines, read by oracle_run.c (see Run.keys)
  *.f32, *.i32, *.u8       the inputs: raw little-endian float32, int32, uint8, row-major
  status.txt, out.f32, weights.f32, indices.i32    written by the runner

Fully masked rows: libattn defines a query row whose every key is blocked to get zero weights
and a zero attention vector (its MHA output row is then out_proj.bias); torch returns NaN there.
Values torch gives are compared with torch; the NaN ones with that definition, computed here in
float64 (our own float64 attention, itself checked against torch wherever torch is not NaN).

Legend: N batch, L query length, S key length, E embedding, H heads, Dh = E / H, D and Dv the
SDPA query/key and value widths, K the top-k count.
"""

import argparse
import math
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from oracle_ref import *  # noqa: F401,F403 (the references, re-exported for tests/server)
from oracle_ref import _extent  # noqa: F401

# ---- Cases and runs ---------------------------------------------------------------------------


@dataclass
class Run:
    """One way to compute a case: the attn_opts of the runner."""

    label: str
    weights: int = WEIGHTS_NONE
    heads: tuple = ()
    top_k: int = 0
    path: int = PATH_AUTO
    block_q: int = 0
    block_k: int = 0
    pool: int = 0

    def keys(self):
        k = {"weights": self.weights, "top_k": self.top_k, "path": self.path,
             "block_q": self.block_q, "block_k": self.block_k, "pool": self.pool}
        if self.heads:
            k["heads"] = " ".join(str(h) for h in self.heads)
        return k


@dataclass
class Case:
    group: str
    name: str
    keys: dict  # case.txt entries common to every run
    files: dict  # file name -> array in the file's dtype
    expect: Expect
    runs: list
    dirs: list = field(default_factory=list)
    masks: object = None  # the Masks of the case (http_oracle's trace check reads them)


def run_variants(index, primary):
    """The runs of case number index: the primary weights run, the same with no weights (the
    tiled path), and two variants from a cycle (small ragged blocks, the direct path without
    weights, the pool)."""
    cycle = [
        Run("tiled-b3x5", block_q=3, block_k=5),
        Run("direct-b3", weights=primary.weights, heads=primary.heads, top_k=primary.top_k,
            block_q=3),
        Run("tiled-b5x3-pool", block_q=5, block_k=3, pool=1),
        Run("direct-none-b5", path=PATH_DIRECT, block_q=5),
        Run("direct-pool", weights=primary.weights, heads=primary.heads, top_k=primary.top_k,
            pool=1),
        Run("tiled-b1x1", path=PATH_TILED, block_q=1, block_k=1),
        Run("direct-b5-pool", weights=primary.weights, heads=primary.heads, top_k=primary.top_k,
            block_q=5, pool=1),
        Run("tiled-b2x7-pool", block_q=2, block_k=7, pool=1),
    ]
    return [primary, Run("none")] + [cycle[(2 * index) % len(cycle)],
                                     cycle[(2 * index + 1) % len(cycle)]]


def all_variants(primary):
    """Every run variant at once, for the groups where blocked rows and tiles meet."""
    w = dict(weights=primary.weights, heads=primary.heads, top_k=primary.top_k)
    return [
        primary,
        Run("none"),
        Run("tiled-b3x5", block_q=3, block_k=5),
        Run("tiled-b1x2", block_q=1, block_k=2),
        Run("tiled-b5x3-pool", block_q=5, block_k=3, pool=1),
        Run("direct-b3", block_q=3, **w),
        Run("direct-none-b1", path=PATH_DIRECT, block_q=1),
        Run("direct-b2-pool", block_q=2, pool=1, **w),
    ]


def weight_modes(H, S):
    """The weights-requesting runs, cycled over the cases: per-head, mean, head subsets (with a
    duplicate), top-k of each."""
    sub = (2, 0) if H >= 3 else (1, 1) if H == 2 else (0, 0)
    k = min(3, S)
    return [
        Run("per-head", weights=WEIGHTS_PER_HEAD),
        Run("mean", weights=WEIGHTS_MEAN),
        Run(f"heads{sub[0]}{sub[1]}", weights=WEIGHTS_PER_HEAD, heads=sub),
        Run(f"top{k}", weights=WEIGHTS_PER_HEAD, top_k=k),
        Run(f"mean-top{min(2, S)}", weights=WEIGHTS_MEAN, top_k=min(2, S)),
        Run(f"heads{H - 1}{H - 1}-top{S}", weights=WEIGHTS_PER_HEAD, heads=(H - 1, H - 1),
            top_k=S),
        Run("top1", weights=WEIGHTS_PER_HEAD, top_k=1),
    ]


class Grid:
    """Builds the cases, group by group, from one seeded generator."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        torch.manual_seed(seed)
        self.cases = []
        self.count = 0

    def mha(self, group, N, L, S, E, H, kdim=None, vdim=None, bias=True, inputs="cross",
            split=False, masks=None, primary=None, every_run=False):
        """Adds an MHA case. inputs: "self" (one tensor, one pointer), "kv" (key tensor is the
        value) or "cross". split: give a packed module's weights as q/k/v_proj_weight."""
        rng = self.rng
        kdim = kdim or E
        vdim = vdim or E
        if inputs == "self":
            assert L == S and kdim == E and vdim == E
        if inputs == "kv":
            assert kdim == vdim
        # Left in training mode (dropout is 0): that keeps torch off its fused fast path.
        module = torch.nn.MultiheadAttention(E, H, bias=bias, batch_first=True, kdim=kdim,
                                             vdim=vdim, dtype=torch.float64)
        params = mha_params(rng, module)
        x_q = f32(rng.standard_normal((N, L, E)))
        x_k = x_q if inputs == "self" else f32(rng.standard_normal((N, S, kdim)))
        x_v = x_k if inputs in ("self", "kv") else f32(rng.standard_normal((N, S, vdim)))
        m = make_masks(rng, N, H, L, S, **self._resolve(masks, N, H))
        expect = expect_mha(params, E, H, x_q, x_k, x_v, m, inputs == "kv", inputs == "self",
                            module)
        files = {"query.f32": x_q}
        if inputs != "self":
            files["key.f32"] = x_k
        if inputs == "cross":
            files["value.f32"] = x_v
        packed = "in_proj_weight" in params
        for name, a in params.items():
            if name == "in_proj_weight" and split:
                files.update({"q_proj_weight.f32": a[:E], "k_proj_weight.f32": a[E:2 * E],
                              "v_proj_weight.f32": a[2 * E:]})
            else:
                files[name.replace(".", "_") + ".f32"] = a
        files.update(m.files)
        keys = {"kind": "mha", "n": N, "l": L, "s": S, "e": E, "h": H, "kdim": kdim,
                "vdim": vdim, "inputs": {"cross": 0, "self": 1, "kv": 2}[inputs],
                "packed": int(packed and not split), "bias": int(bias)}
        keys.update(m.keys)
        name = (f"mha-n{N}-l{L}-s{S}-e{E}-h{H}-k{kdim}-v{vdim}-{inputs}"
                f"{'-split' if split else ''}{'' if bias else '-nobias'}")
        self._add(group, name, keys, files, expect, H, S, primary, every_run)
        self.cases[-1].masks = m

    def sdpa(self, group, N, H, L, S, D, Dv, scale=None, same_qk=False, masks=None,
             primary=None, every_run=False):
        """Adds an SDPA case; scale None is the default 1/sqrt(D). same_qk: k is q (L = S)."""
        rng = self.rng
        q = f32(rng.standard_normal((N, H, L, D)))
        k = q if same_qk else f32(rng.standard_normal((N, H, S, D)))
        v = f32(rng.standard_normal((N, H, S, Dv)))
        m = make_masks(rng, N, H, L, S, **self._resolve(masks, N, H))
        s = 1.0 / math.sqrt(D) if scale is None else float(np.float32(scale))
        expect = expect_sdpa(q, k, v, m, s)
        files = {"q.f32": q, "v.f32": v}
        if not same_qk:
            files["k.f32"] = k
        files.update(m.files)
        keys = {"kind": "sdpa", "n": N, "h": H, "l": L, "s": S, "d": D, "dv": Dv,
                "inputs": int(same_qk)}
        if scale is not None:
            keys["scale"] = repr(float(np.float32(scale)))
        keys.update(m.keys)
        name = (f"sdpa-n{N}-h{H}-l{L}-s{S}-d{D}-dv{Dv}{'-qk' if same_qk else ''}"
                f"{'' if scale is None else f'-scale{scale}'}")
        self._add(group, name, keys, files, expect, H, S, primary, every_run)
        self.cases[-1].masks = m

    def _resolve(self, masks, N, H):
        """The mask arguments of a case: masks, or the next preset of the cycle when None."""
        if masks is None:
            masks = MASK_PRESETS[self.count % len(MASK_PRESETS)]
        return dict(masks)

    def _add(self, group, name, keys, files, expect, H, S, primary, every_run):
        """Adds a case with its runs: primary (cycled over weight_modes when None) and the
        variants (every one with every_run)."""
        if primary is None:
            modes = weight_modes(H, S)
            primary = modes[self.count % len(modes)]
        runs = all_variants(primary) if every_run else run_variants(self.count, primary)
        mask_tag = "".join(t[0] for t in ("causal", "key_lengths", "key_mask", "attn_mask",
                                          "attn_bias") if keys.get(t))
        keys = dict(keys, causal=keys.get("causal", 0))
        name = f"{self.count:04d}-{name}-m{mask_tag or '0'}c{keys['causal']}"
        self.cases.append(Case(group, name, keys, files, expect, runs))
        self.count += 1


def build_grid(seed):
    g = Grid(seed)
    rng = g.rng
    eh = [(8, 2), (16, 4), (24, 3), (32, 1), (64, 8)]

    # Self-attention: one tensor passed as query, key and value (L = S), packed in_proj.
    for E, H in eh:
        for N in (1, 3):
            for L in (1, 6, 13):
                g.mha("mha-self", N, L, L, E, H, bias=bool(rng.integers(0, 2)) or L == 6,
                      inputs="self")

    # Cross-attention: separate key and value tensors, L != S and L = S; key = value pointer too.
    for E, H in eh:
        for N in (1, 3):
            for L, S in ((4, 9), (9, 4), (6, 6)):
                g.mha("mha-cross", N, L, S, E, H, bias=L != 9 or N == 1,
                      inputs="kv" if (L + N) % 2 else "cross")
        g.mha("mha-cross", 3, 5, 5, E, H, inputs="cross", split=True)

    # kdim/vdim != E: separate q/k/v_proj_weight, with and without biases.
    for E, H, kdim, vdim in ((8, 2, 5, 11), (16, 4, 16, 7), (24, 3, 10, 24), (32, 1, 3, 40),
                             (64, 8, 20, 12), (16, 2, 9, 9)):
        for bias in (True, False):
            for N in (1, 3):
                L, S = int(rng.integers(1, 12)), int(rng.integers(1, 12))
                g.mha("mha-kvdim", N, L, S, E, H, kdim=kdim, vdim=vdim, bias=bias,
                      inputs="kv" if kdim == vdim and N == 3 else "cross")

    # Every mask preset on a few shapes, including self-attention for the causal ones.
    for preset in MASK_PRESETS:
        g.mha("mha-masks", 3, 7, 10, 16, 4, masks=preset)
        g.mha("mha-masks", 3, 9, 6, 24, 3, masks=preset, bias=False)
        g.mha("mha-masks", 1, 8, 8, 8, 2, masks=preset, inputs="self")

    # Blocked rows: every key of some rows masked, in every head or in some only.
    N, H, L, S, E = BLOCKED = 3, 4, 7, 5, 16
    am = rng.random((N, H, L, S)) < 0.8
    am[0, 1, 2] = False  # one head of one row
    am[2, 3, 0] = False
    am[1, :, 3] = False  # every head of one row
    ab = rng.standard_normal((1, H, L, S))
    ab[0, 2, 1] = -np.inf  # one head of row 1, in every batch
    kz = np.ones((N, S), dtype=bool)
    kz[2] = False  # batch 2 has no real key
    k0 = np.ones((1, S), dtype=bool)
    k0[0, 0] = False  # with top-left causal, row 0 has no key
    blocked = [
        dict(key_lengths=[S, 0, 2]),
        dict(causal=CAUSAL_BOTTOM_RIGHT),  # L > S: rows i < L - S see nothing
        dict(attn_mask=("N", "H", am)),
        dict(attn_bias=(1, "H", ab)),
        dict(causal=CAUSAL_TOP_LEFT, key_mask=("N", kz)),
        dict(causal=CAUSAL_TOP_LEFT, key_mask=(1, k0)),
        dict(key_lengths=[0, 3, S], attn_mask=("N", "H", am), attn_bias=(1, "H", ab)),
    ]
    for i, preset in enumerate(blocked):
        for primary in (Run("per-head", weights=WEIGHTS_PER_HEAD),
                        Run("mean-top2", weights=WEIGHTS_MEAN, top_k=2)):
            g.mha("mha-blocked", N, L, S, E, H, masks=preset, bias=i != 1, primary=primary,
                  every_run=True)
    g.mha("mha-blocked", 3, 9, 4, 16, 4,
          masks=dict(causal=CAUSAL_BOTTOM_RIGHT, key_lengths=[4, 0, 2]),
          primary=Run("heads20-top3", weights=WEIGHTS_PER_HEAD, heads=(2, 0), top_k=3),
          every_run=True)

    # Every weights mode on two shapes, with masks.
    for E, H in ((24, 3), (64, 8)):
        for i, primary in enumerate(weight_modes(H, 9) + [
                Run("heads-all-order", weights=WEIGHTS_PER_HEAD,
                    heads=tuple(range(H - 1, -1, -1))),
                Run("heads20", weights=WEIGHTS_PER_HEAD, heads=(2, 0)),
                Run("heads11", weights=WEIGHTS_PER_HEAD, heads=(1, 1))]):
            g.mha("mha-weights", 3, 7, 9, E, H, primary=primary, inputs="cross" if i % 2 else "kv",
                  masks=MASK_PRESETS[(3 * i + 1) % len(MASK_PRESETS)])

    # Past the default block sizes (64 query rows, 256 keys per tile).
    for preset in ({}, {"causal": CAUSAL_BOTTOM_RIGHT, "key_mask": "N"},
                   {"causal": CAUSAL_TOP_LEFT, "attn_bias": ("N", 1)},
                   {"key_lengths": [300, 100, 257]}):
        g.mha("mha-large", 3, 70, 300, 16, 4, masks=preset)
    g.mha("mha-large", 2, 130, 130, 32, 4, inputs="self", masks={"causal": CAUSAL_TOP_LEFT})

    # SDPA: Dv != D, default and explicit scales, masks, weights.
    shapes = [(1, 1, 5, 9, 8, 5), (2, 3, 7, 4, 4, 12), (2, 3, 6, 6, 16, 16), (1, 3, 11, 7, 3, 7),
              (2, 1, 1, 13, 6, 2), (2, 2, 70, 300, 8, 3)]
    for N, H, L, S, D, Dv in shapes:
        for scale in (None, 0.3, 1.7):
            g.sdpa("sdpa", N, H, L, S, D, Dv, scale=scale)
        g.sdpa("sdpa", N, H, L, S, D, Dv, masks=MASK_PRESETS[-1])
    g.sdpa("sdpa", 2, 3, 6, 6, 4, 9, same_qk=True)
    g.sdpa("sdpa", 2, 3, 6, 6, 4, 9, same_qk=True, scale=0.5, masks={"causal": CAUSAL_TOP_LEFT})
    for preset in MASK_PRESETS:
        g.sdpa("sdpa-masks", 2, 3, 7, 5, 4, 6, masks=preset)
    for preset in (dict(key_lengths=[0, 5]), dict(causal=CAUSAL_BOTTOM_RIGHT),
                   dict(attn_bias=(1, "H", ab[:, :3]), key_mask=("N", kz[:2]))):
        g.sdpa("sdpa-blocked", 2, 3, BLOCKED[2], BLOCKED[3], 4, 6, masks=preset,
               primary=Run("per-head", weights=WEIGHTS_PER_HEAD), every_run=True)
        g.sdpa("sdpa-blocked", 2, 3, BLOCKED[2], BLOCKED[3], 4, 6, masks=preset, scale=0.8,
               primary=Run("mean-top3", weights=WEIGHTS_MEAN, top_k=3), every_run=True)
    return g.cases


# ---- Writing and checking ---------------------------------------------------------------------


def write_run(d, case, run):
    d.mkdir(parents=True)
    keys = dict(case.keys, **run.keys())
    (d / "case.txt").write_text("".join(f"{k} {v}\n" for k, v in keys.items()))
    dtypes = {".f32": "<f4", ".i32": "<i4", ".u8": "u1"}
    for name, a in case.files.items():
        np.ascontiguousarray(a, dtype=dtypes[Path(name).suffix]).tofile(d / name)


class Tally:
    """Comparison counts of one group and what failed."""

    def __init__(self):
        self.values = 0  # values compared
        self.by_def = 0  # of which expected by the blocked-row definition
        self.max_err = 0.0
        self.failures = []
        self.runs = 0
        self.cases = 0
        self.traces = 0  # http_oracle: replies with a trace checked

    def fail(self, where, msg):
        self.failures.append(f"{where}: {msg}")

    def close(self, where, what, got, want, from_def=None):
        """Compares got with want elementwise within TOL; NaN never passes."""
        got = np.asarray(got, dtype=np.float64)
        if got.shape != want.shape:
            self.fail(where, f"{what}: shape {got.shape}, expected {want.shape}")
            return
        err = np.abs(got - want)
        bad = ~(err <= TOL)
        self.values += err.size
        if from_def is not None:
            self.by_def += int(np.broadcast_to(from_def, err.shape).sum())
        finite = err[~np.isnan(err)]
        if finite.size:
            self.max_err = max(self.max_err, float(finite.max()))
        if bad.any():
            at = tuple(int(x) for x in np.argwhere(bad)[0])
            self.fail(where, f"{what}: {int(bad.sum())} of {err.size} values off by more than "
                      f"{TOL:g}; first at {at}: got {got[at]!r}, expected {want[at]!r}")

    def topk(self, where, what, vals, idx, ref, K):
        """Checks top-k values (..., L, K) and indices against the dense reference (..., L, S)."""
        S = ref.shape[-1]
        want = -np.sort(-ref, axis=-1)[..., :K]
        self.close(where, what + " values", vals, want)
        if idx.shape != want.shape:
            self.fail(where, f"{what} indices: shape {idx.shape}, expected {want.shape}")
            return
        if ((idx < 0) | (idx >= S)).any():
            self.fail(where, f"{what} indices: out of [0, {S}): {idx[(idx < 0) | (idx >= S)][:5]}")
            return
        srt = np.sort(idx, axis=-1)
        if (srt[..., 1:] == srt[..., :-1]).any():
            self.fail(where, f"{what} indices: a key repeats within a row")
        at_idx = np.take_along_axis(ref, idx.astype(np.int64), axis=-1)
        self.close(where, what + " weight at index", vals, at_idx)
        # The runner's own order: largest first, ties by lower key index.
        v = vals.astype(np.float64)
        if (v[..., 1:] > v[..., :-1]).any():
            self.fail(where, f"{what} values: not in descending order")
        tie = v[..., 1:] == v[..., :-1]
        if (tie & (idx[..., 1:] < idx[..., :-1])).any():
            self.fail(where, f"{what} indices: equal values not ordered by key index")


def read_tensor(path, dtype, count):
    if not path.exists():
        return None, f"{path.name} missing"
    a = np.fromfile(path, dtype=dtype)
    if a.size != count:
        return None, f"{path.name} holds {a.size} values, expected {count}"
    return a, None


def check_run(t, case, run, d):
    where = f"{case.group}/{d.name}"
    status = d / "status.txt"
    if not status.exists():
        t.fail(where, "the runner wrote no status (it crashed or failed before this case)")
        return
    text = status.read_text().strip()
    if text != "ok":
        t.fail(where, f"libattn: {text}")
        return
    e = case.expect
    out, err = read_tensor(d / "out.f32", "<f4", e.out.size)
    if err:
        t.fail(where, err)
        return
    t.close(where, "output", out.reshape(e.out.shape), e.out, e.from_def)
    N, H, L, S = e.weights.shape
    if run.weights == WEIGHTS_NONE:
        for extra in ("weights.f32", "indices.i32"):
            if (d / extra).exists():
                t.fail(where, f"{extra} written but no weights were requested")
        return
    if run.weights == WEIGHTS_MEAN:
        ref = e.weights.mean(axis=1)  # (N, L, S)
    else:
        ref = e.weights[:, list(run.heads)] if run.heads else e.weights  # (N, maps, L, S)
    width = run.top_k or S
    count = ref.size // S * width
    vals, err = read_tensor(d / "weights.f32", "<f4", count)
    if err:
        t.fail(where, err)
        return
    vals = vals.reshape(ref.shape[:-1] + (width,))
    if not run.top_k:
        t.close(where, "weights", vals, ref)
        return
    idx, err = read_tensor(d / "indices.i32", "<i4", count)
    if err:
        t.fail(where, err)
        return
    t.topk(where, f"top-{run.top_k}", vals, idx.reshape(vals.shape), ref, run.top_k)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runner", required=True, help="the oracle_run binary")
    ap.add_argument("--work", required=True, help="directory for the case files")
    ap.add_argument("--seed", type=int, default=20240611)
    ap.add_argument("-v", "--verbose", action="store_true", help="print every failure")
    args = ap.parse_args()
    start = time.monotonic()
    runner = Path(args.runner)
    if not runner.is_file():
        print(f"run_oracle: no runner at {runner}; build it with make {runner}")
        return 1
    root = Path(args.work) / "cases"
    shutil.rmtree(root, ignore_errors=True)

    cases = build_grid(args.seed)
    groups = {}
    for c in cases:
        groups.setdefault(c.group, []).append(c)
        for r in c.runs:
            d = root / c.group / f"{c.name}-{r.label}"
            write_run(d, c, r)
            c.dirs.append(d)

    total = Tally()
    banner = None
    lines = []
    for group, gcases in groups.items():
        t = Tally()
        dirs = [str(d) for c in gcases for d in c.dirs]
        try:
            p = subprocess.run([str(runner)] + dirs, capture_output=True, text=True,
                               timeout=RUNNER_TIMEOUT)
            if p.returncode != 0:
                tail = "\n    ".join(p.stderr.strip().splitlines()[-5:])
                t.fail(group, f"runner exited {p.returncode}; its last messages:\n    {tail}")
            banner = banner or (p.stdout.strip().splitlines() or [None])[0]
        except subprocess.TimeoutExpired:
            t.fail(group, f"runner timed out after {RUNNER_TIMEOUT} s")
        for c in gcases:
            t.cases += 1
            for msg in c.expect.oracle_bad:
                t.fail(f"{group}/{c.name}", f"reference self-check: {msg}")
            for r, d in zip(c.runs, c.dirs):
                t.runs += 1
                before = t.values
                check_run(t, c, r, d)
                if t.values == before and not any(f.startswith(f"{group}/{d.name}")
                                                  for f in t.failures):
                    t.fail(f"{group}/{d.name}", "compared nothing")
        if t.values < MIN_VALUES_PER_GROUP:
            t.fail(group, f"only {t.values} values compared; expected at least "
                   f"{MIN_VALUES_PER_GROUP}")
        lines.append(f"{group:<13} {t.cases:4d} cases {t.runs:5d} runs {t.values:9d} values "
                     f"({t.by_def} output values by definition)  max err {t.max_err:.1e}  "
                     f"{'ok' if not t.failures else f'{len(t.failures)} FAILED'}")
        for k in ("values", "by_def", "runs", "cases"):
            setattr(total, k, getattr(total, k) + getattr(t, k))
        total.max_err = max(total.max_err, t.max_err)
        total.failures += t.failures

    if banner:
        print(banner)
    print(f"seed {args.seed}, tolerance {TOL:g} absolute against float64 torch")
    for line in lines:
        print(line)
    if total.values < MIN_VALUES_TOTAL:
        total.fail("total", f"only {total.values} values compared; expected at least "
                   f"{MIN_VALUES_TOTAL}")
    shown = total.failures if args.verbose else total.failures[:30]
    for f in shown:
        print("FAIL " + f)
    if len(shown) < len(total.failures):
        print(f"... and {len(total.failures) - len(shown)} more (-v shows all)")
    verdict = "FAIL" if total.failures else "PASS"
    print(f"oracle: {verdict}: {total.cases} cases, {total.runs} runs, {total.values} values "
          f"compared ({total.by_def} by definition), {len(total.failures)} failures, max err "
          f"{total.max_err:.1e}, {time.monotonic() - start:.1f} s")
    return 1 if total.failures else 0


if __name__ == "__main__":
    sys.exit(main())
