"""trace_oracle.py - checks the "trace" of POST /v1/attention and /v1/sdpa against the oracle
grid's inputs, for http_oracle.py.

Every step is recomputed here in float64 from the case's own inputs and weights, independently
of attnd, and compared with the trace; then the steps are chained on the trace's own float32
values, so that each step is checked against the one before it:
  MHA   q = x_q W_Q^T + b_Q (and k, v), split into heads
        scores = q k^T / sqrt(Dh)         masked = scores + bias, -inf exactly where blocked
        weights = softmax(masked)         (of the reference, and of the trace's own masked)
        head_outputs = weights v          (the trace's weights and v)
        concat(head_outputs) W_out^T + b_out = the reply's output
  SDPA  the same from scores on, with the request's scale; weights v = the reply's output.
Values are compared within TOL * (1 + |reference|): scores grow with the inputs' norms.

Legend: N batch, H heads, L query length, S key length, E embedding, Dh = E / H.
"""

import base64
import math

import numpy as np

import run_oracle as ro

MAX_CELLS = 65536  # API_TRACE_MAX_CELLS (api/api.h)
TOL = ro.TOL


def traceable(case):
    """True when the case is within the trace's bound (api.h): N H L S and the widest step."""
    k = case.keys
    N, H, L, S = k["n"], k["h"], k["l"], k["s"]
    if k["kind"] == "sdpa":
        widest = N * H * max(L, S) * max(k["d"], k["dv"])
    else:
        widest = N * max(L, S) * k["e"]
    return N * H * L * S <= MAX_CELLS and widest <= MAX_CELLS


def decode(x):
    """A trace tensor: base64 {"dtype", "shape", "data"}, or nested arrays whose non-finite
    values are the strings "-inf", "inf", "nan"."""
    if isinstance(x, dict):
        return np.frombuffer(base64.b64decode(x["data"]), dtype="<f4").reshape(x["shape"]) \
            .astype(np.float64)
    return np.asarray(x, dtype=np.float64)  # numpy reads "-inf" as -inf


def softmax64(masked):
    """Rows of masked (-inf where blocked) through softmax; a fully blocked row is zeros."""
    m = masked.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(masked - m)
    z = p.sum(axis=-1, keepdims=True)
    return np.where(z > 0, p / np.where(z > 0, z, 1.0), 0.0)


def close(t, where, what, got, want):
    """got against want within TOL (1 + |want|); infinities must sit at the same places."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        t.fail(where, f"trace {what}: shape {got.shape}, expected {want.shape}")
        return
    inf_g, inf_w = np.isinf(got), np.isinf(want)
    if not np.array_equal(inf_g, inf_w) or not np.array_equal(got[inf_g], want[inf_w]):
        t.fail(where, f"trace {what}: infinities at {int(inf_g.sum())} places, expected at "
               f"{int(inf_w.sum())} (or of another sign)")
        return
    fin = ~inf_w
    err = np.abs(got[fin] - want[fin]) / (1.0 + np.abs(want[fin]))
    t.values += got.size
    if err.size:
        t.max_err = max(t.max_err, float(np.nan_to_num(err, nan=1.0).max()))
    bad = ~(err <= TOL)
    if bad.any():
        i = int(np.argmax(bad))
        t.fail(where, f"trace {what}: {int(bad.sum())} of {err.size} values off by more than "
               f"{TOL:g} relative; first: got {got[fin][i]!r}, expected {want[fin][i]!r}")


def mha_weights(files, E):
    """The case's projection weights in float64: (wq, wk, wv, bq, bk, bv, w_out, b_out)."""
    f = {k: v.astype(np.float64) for k, v in files.items() if k.endswith(".f32")}
    if "in_proj_weight.f32" in f:
        wq, wk, wv = np.split(f["in_proj_weight.f32"], 3)
    else:
        wq, wk, wv = f["q_proj_weight.f32"], f["k_proj_weight.f32"], f["v_proj_weight.f32"]
    bq = bk = bv = np.zeros(E)
    if "in_proj_bias.f32" in f:
        bq, bk, bv = np.split(f["in_proj_bias.f32"], 3)
    return wq, wk, wv, bq, bk, bv, f["out_proj_weight.f32"], f.get("out_proj_bias.f32",
                                                                    np.zeros(E))


def check(t, where, reply, case, out_shape, sdpa):
    """Checks the trace of one reply (a dict) of case; out_shape is the reply's output shape
    (its leading dims are the trace's). Adds to tally t."""
    tr = reply.get("trace")
    if not isinstance(tr, dict):
        t.fail(where, f"no trace in the reply: {str(reply)[:200]}")
        return
    k, f, m = case.keys, case.files, case.masks
    N, H, L, S = k["n"], k["h"], k["l"], k["s"]
    lead = tuple(out_shape[:-2])
    want_keys = ["scale", "scores", "masked_scores", "weights"]
    if not sdpa:
        want_keys = ["scale", "q", "k", "v", "scores", "masked_scores", "weights",
                     "head_outputs"]
    if list(tr) != want_keys:
        t.fail(where, f"trace members {list(tr)}, expected {want_keys}")
        return
    out = decode(reply["output"])

    def full(name, dims):
        """The trace's tensor name, its shape checked (lead + dims for MHA, whose lead is N
        or nothing; SDPA's maps share the output's lead), as (N, H, ...)."""
        a = decode(tr[name])
        want = (lead + (H,) + dims) if not sdpa else (lead + dims)
        if a.shape != want:
            t.fail(where, f"trace {name}: shape {a.shape}, expected {want}")
            return None
        return a.reshape((N, H) + dims)

    maps = [full(n, (L, S)) for n in ("scores", "masked_scores", "weights")]
    if any(a is None for a in maps):
        return
    scores, masked, weights = maps
    if sdpa:
        q = f["q.f32"].astype(np.float64)
        kk = q if k["inputs"] == 1 else f["k.f32"].astype(np.float64)
        v = f["v.f32"].astype(np.float64)
        scale = float(k["scale"]) if "scale" in k else 1.0 / math.sqrt(k["d"])
    else:
        E = k["e"]
        Dh = E // H
        x_q = f["query.f32"].astype(np.float64)
        x_k = f.get("key.f32", f["query.f32"]).astype(np.float64)
        x_v = f.get("value.f32", f.get("key.f32", f["query.f32"])).astype(np.float64)
        wq, wk, wv, bq, bk, bv, w_out, b_out = mha_weights(f, E)

        def heads(x):
            return x.reshape(N, x.shape[1], H, Dh).transpose(0, 2, 1, 3)

        q, kk, v = heads(x_q @ wq.T + bq), heads(x_k @ wk.T + bk), heads(x_v @ wv.T + bv)
        scale = 1.0 / math.sqrt(Dh)
        got = [full(n, dims) for n, dims in (("q", (L, Dh)), ("k", (S, Dh)), ("v", (S, Dh)),
                                             ("head_outputs", (L, Dh)))]
        if any(a is None for a in got):
            return
        tq, tk, tv, th = got
        close(t, where, "q = x W_Q^T + b", tq, q)
        close(t, where, "k = x W_K^T + b", tk, kk)
        close(t, where, "v = x W_V^T + b", tv, v)
    if not abs(tr["scale"] - scale) <= 1e-7 * scale:
        t.fail(where, f"trace scale {tr['scale']!r}, expected {scale!r}")
    t.values += 1

    # The steps from the inputs, in float64.
    want_scores = q @ np.swapaxes(kk, -1, -2) * scale
    want_masked = np.where(m.allowed, want_scores + m.bias, -np.inf)
    close(t, where, "scores = scale q k^T", scores, want_scores)
    close(t, where, "masked_scores = scores + bias, -inf where blocked", masked, want_masked)
    close(t, where, "weights = softmax(masked_scores)", weights, softmax64(want_masked))
    close(t, where, "weights against torch", weights, case.expect.weights)

    # The steps chained on the trace's own values.
    close(t, where, "softmax(the trace's masked_scores) = its weights", weights,
          softmax64(masked))
    if sdpa:
        close(t, where, "weights v = output", out.reshape(N, H, L, -1), weights @ v)
        return
    close(t, where, "weights v = head_outputs", th, weights @ tv)
    concat = th.transpose(0, 2, 1, 3).reshape(N, L, E)
    close(t, where, "concat(head_outputs) W_out^T + b = output", out.reshape(N, L, E),
          concat @ w_out.T + b_out)
