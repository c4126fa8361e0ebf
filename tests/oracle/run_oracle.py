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

TOL = 1e-4  # absolute, against float64, for unit-scale inputs: outputs and weights
ORACLE_TOL = 1e-9  # our own float64 attention against torch's float64
MIN_VALUES_PER_GROUP = 2000
MIN_VALUES_TOTAL = 200000
RUNNER_TIMEOUT = 120  # seconds per runner invocation

WEIGHTS_NONE, WEIGHTS_PER_HEAD, WEIGHTS_MEAN = 0, 1, 2
PATH_AUTO, PATH_DIRECT, PATH_TILED = 0, 1, 2
CAUSAL_NONE, CAUSAL_TOP_LEFT, CAUSAL_BOTTOM_RIGHT = 0, 1, 2

# ---- Masks ------------------------------------------------------------------------------------


@dataclass
class Masks:
    """Every mask of a case: the files and case.txt keys for the runner, and the same masks
    folded for the references: allowed (N, H, L, S) and bias (N, H, L, S), 0 where absent."""

    keys: dict
    files: dict
    allowed: np.ndarray
    bias: np.ndarray

    def additive(self):
        """(N, H, L, S) float64: the bias where allowed, -inf elsewhere."""
        return np.where(self.allowed, self.bias, -np.inf)

    def blocked_rows(self):
        """(N, H, L) bool: rows with no key left, which libattn defines as all-zero weights."""
        return ~np.any(self.allowed & np.isfinite(self.bias), axis=-1)


def _extent(spec, N, H):
    """A symbolic leading extent ("N", "H" or a number) as the number written to case.txt."""
    return N if spec == "N" else H if spec == "H" else int(spec)


def make_masks(rng, N, H, L, S, causal=CAUSAL_NONE, key_lengths=None, key_mask=None,
               attn_mask=None, attn_bias=None):
    """Builds the masks of a case.

    key_lengths: None, "rand", or a list of N ints.
    key_mask: None, or the written leading extent (N, 1 or 0, symbolic "N" allowed) for a random
      mask, or (extent, array (extent or 1, S)).
    attn_mask, attn_bias: None, or (mn, mh) written leading extents for a random tensor, or
      (mn, mh, array (max(mn, 1), max(mh, 1), L, S)).
    """
    keys = {"causal": causal}
    files = {}
    allowed = np.ones((N, H, L, S), dtype=bool)
    bias = np.zeros((N, H, L, S))
    i = np.arange(L)[:, None]
    j = np.arange(S)[None, :]
    if causal == CAUSAL_TOP_LEFT:
        allowed &= j <= i
    elif causal == CAUSAL_BOTTOM_RIGHT:
        allowed &= j <= i + S - L
    if key_lengths is not None:
        kl = (rng.integers(1, S + 1, size=N) if isinstance(key_lengths, str)
              else np.asarray(key_lengths))
        kl = kl.astype(np.int32)
        assert kl.shape == (N,)
        keys["key_lengths"] = 1
        files["key_lengths.i32"] = kl
        allowed &= j[None, None] < kl[:, None, None, None]
    if key_mask is not None:
        if isinstance(key_mask, tuple):
            kn, km = _extent(key_mask[0], N, H), key_mask[1]
        else:
            kn = _extent(key_mask, N, H)
            km = rng.random((max(kn, 1), S)) < 0.75
        km = np.asarray(km).astype(np.uint8)
        keys.update(key_mask=1, key_mask_n=kn)
        files["key_mask.u8"] = km
        rows = km if km.shape[0] == N else np.broadcast_to(km[:1], (N, S))
        allowed &= rows[:, None, None, :] != 0
    if attn_mask is not None:
        mn, mh = _extent(attn_mask[0], N, H), _extent(attn_mask[1], N, H)
        am = (attn_mask[2] if len(attn_mask) == 3
              else rng.random((max(mn, 1), max(mh, 1), L, S)) < 0.8)
        am = np.asarray(am).astype(np.uint8)
        keys.update(attn_mask=1, attn_mask_n=mn, attn_mask_h=mh)
        files["attn_mask.u8"] = am
        allowed &= np.broadcast_to(am != 0, (N, H, L, S))
    if attn_bias is not None:
        bn, bh = _extent(attn_bias[0], N, H), _extent(attn_bias[1], N, H)
        if len(attn_bias) == 3:
            ab = attn_bias[2]
        else:
            ab = rng.standard_normal((max(bn, 1), max(bh, 1), L, S))
            ab[rng.random(ab.shape) < 0.05] = -np.inf
        ab = np.asarray(ab).astype(np.float32)
        keys.update(attn_bias=1, attn_bias_n=bn, attn_bias_h=bh)
        files["attn_bias.f32"] = ab
        bias = bias + np.broadcast_to(ab.astype(np.float64), (N, H, L, S))
    return Masks(keys, files, allowed, bias)


# A cycle of mask combinations for the grid; "N" and "H" are the case's own extents.
MASK_PRESETS = [
    {},
    {"causal": CAUSAL_TOP_LEFT},
    {"causal": CAUSAL_BOTTOM_RIGHT},
    {"key_lengths": "rand"},
    {"key_mask": "N"},
    {"key_mask": 1},
    {"attn_mask": (1, 1)},
    {"attn_mask": ("N", 1)},
    {"attn_mask": ("N", "H")},
    {"attn_mask": (1, "H")},
    {"attn_bias": (1, 1)},
    {"attn_bias": ("N", 1)},
    {"attn_bias": ("N", "H")},
    {"attn_bias": (1, "H")},
    {"key_mask": 0, "attn_mask": (0, 0), "attn_bias": (0, "H")},
    {"causal": CAUSAL_TOP_LEFT, "key_lengths": "rand", "key_mask": "N"},
    {"causal": CAUSAL_BOTTOM_RIGHT, "attn_mask": ("N", "H"), "attn_bias": ("N", "H")},
    {"key_mask": 1, "attn_bias": (1, 1)},
    {"key_lengths": "rand", "attn_mask": ("N", 1), "attn_bias": (1, "H")},
    {"causal": CAUSAL_TOP_LEFT, "key_lengths": "rand", "key_mask": "N",
     "attn_mask": ("N", "H"), "attn_bias": ("N", "H")},
]

# ---- References -------------------------------------------------------------------------------


def attend64(q, k, v, allowed, bias, scale):
    """Our own float64 attention with libattn's definition for blocked rows.
    q (N, H, L, D), k (N, H, S, D), v (N, H, S, Dv), allowed and bias (N, H, L, S).
    Returns out (N, H, L, Dv) and weights (N, H, L, S), both 0 on blocked rows."""
    logits = np.where(allowed, q @ np.swapaxes(k, -1, -2) * scale + bias, -np.inf)
    m = logits.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(logits - m)
    z = p.sum(axis=-1, keepdims=True)
    w = np.where(z > 0, p / np.where(z > 0, z, 1.0), 0.0)
    return w @ v, w


def f32(x):
    """x rounded to float32: what the runner reads."""
    return np.asarray(x, dtype=np.float32)


def mha_params(rng, module):
    """Random float32-representable parameters for every parameter of module, at unit scale."""
    params = {}
    for name, p in module.named_parameters():
        shape = tuple(p.shape)
        if len(shape) == 2:
            a = rng.standard_normal(shape) / math.sqrt(shape[1])
        else:
            a = 0.5 * rng.standard_normal(shape)
        params[name] = f32(a)
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.from_numpy(params[name].astype(np.float64)))
    return params


@dataclass
class Expect:
    """A case's float64 expectations. out is the output; weights (N, H, L, S) the per-head maps;
    from_def marks output values taken from the blocked-row definition, not from torch;
    oracle_bad counts values where our float64 attention disagrees with torch."""

    out: np.ndarray
    weights: np.ndarray
    from_def: np.ndarray
    oracle_bad: list = field(default_factory=list)


def reconcile(what, torch_val, own_val, expect_nan, bad):
    """Checks our float64 value against torch's, where torch's is not NaN, and that torch is NaN
    exactly where the definition differs from the softmax (expect_nan). Appends problems to bad."""
    nan = np.isnan(torch_val)
    if not np.array_equal(nan, expect_nan):
        bad.append(f"{what}: torch is NaN at {int(nan.sum())} values, the blocked rows predict "
                   f"{int(expect_nan.sum())}")
    ok = ~nan
    diff = np.abs(torch_val[ok] - own_val[ok])
    if diff.size and not diff.max() <= ORACLE_TOL:
        bad.append(f"{what}: own float64 attention differs from torch by {diff.max():.3e}")


def expect_mha(params, E, H, x_q, x_k, x_v, masks, same_kv, self_attn, module):
    """Float64 expectations of an MHA case: torch where it is not NaN, the definition elsewhere.
    x_q (N, L, E), x_k (N, S, kdim), x_v (N, S, vdim), all float32 arrays."""
    N, L, _ = x_q.shape
    S = x_k.shape[1]
    Dh = E // H
    f64 = {k: v.astype(np.float64) for k, v in params.items()}
    q64, k64, v64 = (a.astype(np.float64) for a in (x_q, x_k, x_v))

    # torch: one float mask of shape (N*H, L, S), batch-major, as nn.MultiheadAttention takes.
    tq = torch.from_numpy(q64)
    tk = tq if self_attn else torch.from_numpy(k64)
    tv = tq if self_attn else tk if same_kv else torch.from_numpy(v64)
    tmask = torch.from_numpy(np.ascontiguousarray(masks.additive().reshape(N * H, L, S)))
    with torch.no_grad():
        t_out, t_w = module(tq, tk, tv, attn_mask=tmask, need_weights=True,
                            average_attn_weights=False)
    t_out, t_w = t_out.numpy(), t_w.numpy()

    # Our own float64 MHA.
    if "in_proj_weight" in f64:
        wq, wk, wv = np.split(f64["in_proj_weight"], 3)
    else:
        wq, wk, wv = f64["q_proj_weight"], f64["k_proj_weight"], f64["v_proj_weight"]
    bq = bk = bv = np.zeros(E)
    if "in_proj_bias" in f64:
        bq, bk, bv = np.split(f64["in_proj_bias"], 3)
    b_out = f64.get("out_proj.bias", np.zeros(E))

    def heads(x):
        return x.reshape(x.shape[0], x.shape[1], H, Dh).transpose(0, 2, 1, 3)

    o, w = attend64(heads(q64 @ wq.T + bq), heads(k64 @ wk.T + bk), heads(v64 @ wv.T + bv),
                    masks.allowed, masks.bias, 1.0 / math.sqrt(Dh))
    own_out = o.transpose(0, 2, 1, 3).reshape(N, L, E) @ f64["out_proj.weight"].T + b_out

    blocked = masks.blocked_rows()  # (N, H, L)
    any_blocked = blocked.any(axis=1)  # (N, L): torch's output row is NaN
    all_blocked = blocked.all(axis=1)  # (N, L): the output row is out_proj.bias
    bad = []
    reconcile("weights", t_w, w, np.broadcast_to(blocked[..., None], w.shape), bad)
    reconcile("output", t_out, own_out, np.broadcast_to(any_blocked[..., None], own_out.shape),
              bad)
    defined = np.where(all_blocked[..., None], b_out, own_out)
    out = np.where(np.isnan(t_out), defined, t_out)
    weights = np.where(np.isnan(t_w), 0.0, t_w)
    return Expect(out, weights, np.isnan(t_out), bad)


def expect_sdpa(q, k, v, masks, scale):
    """Float64 expectations of an SDPA case: softmax(q k^T * scale + mask) v in torch, with the
    blocked-row definition (zeros) where torch gives NaN."""
    tq, tk, tv = (torch.from_numpy(a.astype(np.float64)) for a in (q, k, v))
    tmask = torch.from_numpy(masks.additive())
    t_w = torch.softmax(tq @ tk.transpose(-2, -1) * scale + tmask, dim=-1)
    t_out = (t_w @ tv).numpy()
    t_w = t_w.numpy()
    own_out, own_w = attend64(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                              masks.allowed, masks.bias, scale)
    blocked = masks.blocked_rows()
    bad = []
    reconcile("weights", t_w, own_w, np.broadcast_to(blocked[..., None], own_w.shape), bad)
    reconcile("output", t_out, own_out, np.broadcast_to(blocked[..., None], own_out.shape), bad)
    return Expect(np.where(np.isnan(t_out), 0.0, t_out), np.where(np.isnan(t_w), 0.0, t_w),
                  np.isnan(t_out), bad)


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
