"""oracle_ref.py - the references of the oracle (tests/oracle/run_oracle.py, and the HTTP
oracles in tests/server/ through it): its tolerances and constants, the masks a case may carry,
and the expectations in float64, from torch.nn.MultiheadAttention (MHA) and softmax(q k^T * scale
+ mask) v (SDPA), with libattn's definition of a fully masked row where torch gives NaN.

Legend: N batch, L query length, S key length, E embedding, H heads, Dh = E / H, D and Dv the
SDPA query/key and value widths, K the top-k count.
"""

import math
from dataclasses import dataclass, field

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
