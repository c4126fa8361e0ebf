#!/usr/bin/python3
"""seeded_numpy.py - seeded input tensors ({"init": "uniform", "seed", "shape"}) made by a client
from the documentation alone: the values api/openapi.yaml's SeededTensor describes, computed here
in numpy, must be the server's. A live attnd answers seeded /v1/sdpa jobs (several shapes and
seeds, causal, weights) within 1e-6 of numpy's float64 softmax(q kᵀ / √D) v on those values (and
of torch's, when torch is there), the same jobs with the numpy tensors sent as base64 data answer
bit for bit the same, and so does a seeded /v1/attention job (identity projections, two heads)
against numpy; "outputs": [] answers usage alone, with the full answer's flops and workspace.

Usage: seeded_numpy.py --attnd build/attnd
Prints one line per failed check and "N passed, N failed"; exits 1 on any failure.
"""

import argparse
import base64
import json
import os
import signal
import sys
import tempfile
import urllib.error
import urllib.request

import numpy as np

from harness import Checks, start_attnd

try:
    import torch
except ImportError:  # numpy is the reference; torch is a second one where installed
    torch = None

check = Checks()
TOL = 1e-6
GAMMA = np.uint64(0x9E3779B97F4A7C15)


def seeded(seed, shape):
    """The documented tensor: element i (row-major) is (x_i >> 40) * 2^-23 - 1, x_i the i-th
    output of splitmix64 from state seed (outputs from the states seed + (i + 1) * gamma)."""
    n = int(np.prod(shape))
    with np.errstate(over="ignore"):
        s = np.uint64(seed) + np.arange(1, n + 1, dtype=np.uint64) * GAMMA
        z = (s ^ (s >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = z ^ (z >> np.uint64(31))
    return ((x >> np.uint64(40)).astype(np.float64) * 2.0**-23 - 1.0).astype(np.float32).reshape(shape)


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def b64(x):
    return {"dtype": "float32", "shape": list(x.shape),
            "data": base64.b64encode(np.ascontiguousarray(x, "<f4").tobytes()).decode()}


def from_b64(t):
    return np.frombuffer(base64.b64decode(t["data"]), "<f4").reshape(t["shape"])


def sdpa_ref(q, k, v, causal):
    """softmax(q kᵀ / √D + mask) v in float64 from the float32 inputs; (output, weights)."""
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        L, S = s.shape[-2:]
        s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return w @ v, w


def close(what, got, want):
    got = np.asarray(got, np.float64)
    if not check(got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"):
        return
    err = float(np.max(np.abs(got - want)))
    check(err <= TOL, f"{what}: max |attnd - reference| = {err:.3g} > {TOL}")


SDPA_CASES = [  # (q, k, v) shapes and seeds, causal
    (((16, 8), 0), ((16, 8), 1), ((16, 8), 2), False),
    (((2, 3, 33, 16), 12345), ((2, 3, 40, 16), 2**53 - 1), ((2, 3, 40, 5), 7), False),
    (((2, 2, 64, 32), 42), ((2, 2, 64, 32), 43), ((2, 2, 64, 32), 42), True),
    (((4, 128, 64), 1), ((4, 128, 64), 2), ((4, 128, 64), 3), True),
]


def run_sdpa(url):
    for i, (qs, ks, vs, causal) in enumerate(SDPA_CASES):
        spec = [qs, ks, vs]
        tensors = [seeded(seed, shape) for shape, seed in spec]
        body = {n: {"init": "uniform", "seed": seed, "shape": list(shape)}
                for n, (shape, seed) in zip("qkv", spec)}
        body.update({"causal": causal, "need_weights": True, "encoding": "base64"})
        st, ans = post(url + "/v1/sdpa", body)
        if not check(st == 200, f"sdpa case {i}: HTTP {st} {str(ans)[:200]}"):
            continue
        out, w = from_b64(ans["output"]), from_b64(ans["weights"])
        ro, rw = sdpa_ref(*tensors, causal)
        close(f"sdpa case {i} output against numpy", out, ro)
        close(f"sdpa case {i} weights against numpy", w, rw)
        if torch is not None:
            tq, tk, tv = (torch.from_numpy(t).double() for t in tensors)
            s = tq @ tk.transpose(-2, -1) / np.sqrt(tq.shape[-1])
            if causal:
                s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), -np.inf)
            tw = torch.softmax(s, -1)
            close(f"sdpa case {i} output against torch", out, (tw @ tv).numpy())
        # The numpy tensors sent as data: the same answer, bit for bit.
        data = dict(body, q=b64(tensors[0]), k=b64(tensors[1]), v=b64(tensors[2]))
        st2, ans2 = post(url + "/v1/sdpa", data)
        check(st2 == 200 and ans2["output"] == ans["output"] and ans2["weights"] == ans["weights"],
              f"sdpa case {i}: the numpy tensors sent as data answer differently")
        # "outputs": [] answers usage alone, for the same work.
        st3, ans3 = post(url + "/v1/sdpa", dict(body, outputs=[]))
        check(st3 == 200 and set(ans3) == {"usage"}
              and ans3["usage"]["flops"] == ans["usage"]["flops"]
              and ans3["usage"]["workspace_bytes"] == ans["usage"]["workspace_bytes"],
              f"sdpa case {i}: outputs [] answers {str(ans3)[:200]}")


def run_attention(url):
    """Identity projections, E = 8, two heads: each head is SDPA on its 4 columns of the query."""
    shape, seed = (5, 8), 99
    x = seeded(seed, shape)
    body = {"query": {"init": "uniform", "seed": seed, "shape": list(shape)},
            "params": {"init": "identity", "num_heads": 2}, "need_weights": "per_head",
            "encoding": "base64"}
    st, ans = post(url + "/v1/attention", body)
    if not check(st == 200, f"attention: HTTP {st} {str(ans)[:200]}"):
        return
    heads = x.reshape(5, 2, 4).transpose(1, 0, 2)  # (H, L, Dh)
    ro, rw = sdpa_ref(heads, heads, heads, False)
    close("attention output against numpy", from_b64(ans["output"]),
          ro.transpose(1, 0, 2).reshape(5, 8))
    close("attention weights against numpy", from_b64(ans["weights"]), rw)
    st2, ans2 = post(url + "/v1/attention", dict(body, query=b64(x)))
    check(st2 == 200 and ans2["output"] == ans["output"],
          "attention: the numpy query sent as data answers differently")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnd", required=True)
    a = ap.parse_args()
    # The documented first values of seed 0 (api/openapi.yaml, README.md).
    check(seeded(0, (4,)).tolist() == np.array([0.7666216, -0.13694406, -0.94713247, 0.9417639],
                                               np.float32).tolist(),
          f"seed 0 begins {seeded(0, (4,)).tolist()}")
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_attnd(a.attnd, [], os.path.join(tmp, "attnd.log"), "seeded_numpy.py")
        try:
            url = f"http://127.0.0.1:{port}"
            run_sdpa(url)
            run_attention(url)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    print(f"seeded_numpy.py: {check.summary()}")
    sys.exit(1 if check.failures else 0)


if __name__ == "__main__":
    main()
