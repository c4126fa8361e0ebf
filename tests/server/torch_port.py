#!/usr/bin/python3
"""torch_port.py - nn.MultiheadAttention calls ported to POST /v1/attention with PyTorch's own
conventions, against PyTorch: batch_first=False inputs (L, N, E) and output, key_padding_mask
(True = ignore), a boolean attn_mask in PyTorch's polarity (True = blocked) sent as
torch_attn_mask, (L, S) and (N*num_heads, L, S), is_causal (against the causal attn_mask it
stands for: Debian's torch 1.13 predates the argument), need_weights=True (the weights
averaged over the heads) and average_attn_weights=False (per head), cross-attention with kdim
and vdim, an unbatched query, base64; each answer within 1e-5 of torch's (float64, from the same
float32 inputs). Then the same jobs in attnd's own names and polarities answer bit for bit the
same, and every ambiguous mix of the two conventions is a 400 naming the PyTorch field.

Usage: torch_port.py --attnd build/attnd
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
import torch

from harness import Checks, start_attnd

check = Checks()
TOL = 1e-5


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def from_b64(t):
    return np.frombuffer(base64.b64decode(t["data"]), "<f4").reshape(t["shape"])


def module(E, H, kdim=None, vdim=None, seed=0):
    """An nn.MultiheadAttention (batch_first=False, PyTorch's default) with float32-exact
    weights, in float64, and its state_dict as attnd's params."""
    torch.manual_seed(seed)
    m = torch.nn.MultiheadAttention(E, H, kdim=kdim, vdim=vdim)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.float())
            if p.dim() == 1:  # biases are zeros by default: make them count
                p.copy_(torch.randn(p.shape) * 0.1)
    m = m.double()
    params = {"num_heads": H}
    params.update({k: v.tolist() for k, v in m.state_dict().items()})
    return m, params


def rand(*shape):
    return torch.randn(*shape).float().double()


def compare(what, got, want):
    want = want.detach().numpy()
    got = np.asarray(got, dtype=np.float64)
    if not check(got.shape == want.shape, f"{what}: shape {got.shape}, torch {want.shape}"):
        return
    err = float(np.max(np.abs(got - want))) if got.size else 0.0
    check(err <= TOL, f"{what}: max |attnd - torch| = {err:.3g} > {TOL}")


def run_cases(url):
    L, S, N, E, H = 5, 6, 3, 8, 2
    m, params = module(E, H)
    q, kv = rand(L, N, E), rand(S, N, E)
    pad = torch.zeros(N, S, dtype=torch.bool)
    pad[1, 4:] = True
    pad[2, 5] = True
    blocked = torch.ones(L, S, dtype=torch.bool).triu(2)  # row i may see keys 0..i+1
    per_head = torch.rand(N * H, L, S) < 0.3
    per_head[:, :, 0] = False  # every row keeps a key (PyTorch gives NaN rows otherwise)
    base = {"params": params, "query": q.tolist(), "key": kv.tolist(), "value": kv.tolist(),
            "batch_first": False}

    # 1. The port: key_padding_mask and a bool attn_mask (L, S), need_weights=True: averaged.
    out, w = m(q, kv, kv, key_padding_mask=pad, attn_mask=blocked)
    st, r = post(url, dict(base, key_padding_mask=pad.tolist(),
                           torch_attn_mask=blocked.tolist(), need_weights=True))
    if check(st == 200, f"the port: status {st}: {r}"):
        compare("the port's output (L, N, E)", r["output"], out)
        compare("the port's weights (N, L, S), averaged", r["weights"], w)
        check(r["shape"] == {"N": N, "L": L, "S": S, "E": E}, f"the port's shape: {r['shape']}")
    port = r

    # 2. average_attn_weights=False: per head (N, H, L, S).
    out, w = m(q, kv, kv, key_padding_mask=pad, attn_mask=blocked, average_attn_weights=False)
    st, r = post(url, dict(base, key_padding_mask=pad.tolist(), torch_attn_mask=blocked.tolist(),
                           need_weights=True, average_attn_weights=False))
    if check(st == 200, f"average_attn_weights false: status {st}: {r}"):
        compare("per-head weights (N, H, L, S)", r["weights"], w)
        compare("output with average_attn_weights false", r["output"], out)

    # 3. A per-head mask (N*H, L, S) and need_weights=False.
    out, _ = m(q, kv, kv, attn_mask=per_head, need_weights=False)
    st, r = post(url, dict(base, torch_attn_mask=per_head.tolist()))
    if check(st == 200, f"torch_attn_mask (N*H, L, S): status {st}: {r}"):
        compare("output with torch_attn_mask (N*H, L, S)", r["output"], out)
        check("weights" not in r, "need_weights absent: no weights")

    # 4. is_causal on self-attention. PyTorch 2 takes it as a hint beside the causal attn_mask
    # (and raises without one); Debian's torch 1.13 predates it, so the reference is that mask.
    causal = torch.ones(L, L, dtype=torch.bool).triu(1)
    x = rand(L, N, E)
    out, w = m(x, x, x, attn_mask=causal)
    st, r = post(url, {"params": params, "query": x.tolist(), "batch_first": False,
                       "is_causal": True, "need_weights": True})
    if check(st == 200, f"is_causal: status {st}: {r}"):
        compare("output with is_causal", r["output"], out)
        compare("weights with is_causal", r["weights"], w)

    # 5. Cross-attention with kdim and vdim, base64 answers.
    m2, params2 = module(E, H, kdim=3, vdim=5, seed=1)
    k2, v2 = rand(S, N, 3), rand(S, N, 5)
    out, w = m2(q, k2, v2, key_padding_mask=pad)
    st, r = post(url, {"params": params2, "query": q.tolist(), "key": k2.tolist(),
                       "value": v2.tolist(), "batch_first": False,
                       "key_padding_mask": pad.tolist(), "need_weights": True,
                       "encoding": "base64"})
    if check(st == 200, f"kdim, vdim, base64: status {st}: {r}"):
        check(r["output"]["shape"] == [L, N, E], f"base64 output shape {r['output']['shape']}")
        compare("kdim/vdim output (base64)", from_b64(r["output"]), out)
        compare("kdim/vdim weights (base64)", from_b64(r["weights"]), w)

    # 6. An unbatched query (L, E): batch_first does not apply (as in PyTorch).
    x1 = rand(L, E)
    out, w = m(x1, x1, x1, attn_mask=causal)
    st, r = post(url, {"params": params, "query": x1.tolist(), "batch_first": False,
                       "torch_attn_mask": causal.tolist(), "need_weights": True})
    if check(st == 200, f"unbatched: status {st}: {r}"):
        compare("unbatched output (L, E)", r["output"], out)
        compare("unbatched weights (L, S)", r["weights"], w)

    # 7. The port in attnd's own names and polarities: the same answer, bit for bit.
    qb, kvb = q.permute(1, 0, 2), kv.permute(1, 0, 2)
    st, r = post(url, {"params": params, "query": qb.tolist(), "key": kvb.tolist(),
                       "value": kvb.tolist(), "key_mask": (~pad).int().tolist(),
                       "attn_mask": (~blocked).int().tolist(), "need_weights": "mean"})
    if check(st == 200, f"attnd's names: status {st}: {r}") and "output" in port:
        same = np.array_equal(np.array(r["output"]).transpose(1, 0, 2), np.array(port["output"]))
        check(same, "attnd's names and PyTorch's give the same output bit for bit")
        check(r["weights"] == port["weights"], "and the same weights")

    # 8. Ambiguous mixes, and fields out of place: a 400 naming the field.
    kpm, am = pad.tolist(), blocked.tolist()
    bad = [
        ("key_padding_mask with key_mask", dict(base, key_padding_mask=kpm, key_mask=kpm),
         "key_padding_mask", "opposite polarities"),
        ("key_padding_mask with key_lengths",
         dict(base, key_padding_mask=kpm, key_lengths=[6, 4, 5]), "key_padding_mask",
         "key_lengths"),
        ("torch_attn_mask with attn_mask", dict(base, torch_attn_mask=am, attn_mask=am),
         "torch_attn_mask", "opposite polarities"),
        ("is_causal with causal", dict(base, is_causal=True, causal=True), "is_causal",
         "causal"),
        ("average_attn_weights without need_weights", dict(base, average_attn_weights=False),
         "average_attn_weights", "need_weights: true"),
        ("average_attn_weights with \"per_head\"",
         dict(base, need_weights="per_head", average_attn_weights=False),
         "average_attn_weights", "need_weights: true"),
        ("batch_first not a boolean", dict(base, batch_first=0), "batch_first",
         "true or false"),
        ("is_causal not a boolean", dict(base, is_causal="top_left"), "is_causal",
         "true or false"),
        ("torch_attn_mask (N, L, S)", dict(base, torch_attn_mask=[am] * N), "torch_attn_mask",
         "(N*num_heads, L, S)"),
        ("key in (N, S, E) with batch_first false",
         dict(base, key=kv.permute(1, 0, 2).tolist(), value=None), "key", "batch"),
        ("heads with need_weights true, averaged", dict(base, need_weights=True, heads=[0]),
         "heads", "average_attn_weights false"),
    ]
    for what, body, field, phrase in bad:
        st, r = post(url, body)
        err = r.get("error", {}) if isinstance(r, dict) else {}
        check(st == 400 and err.get("field") == field and phrase in err.get("message", ""),
              f"{what}: want 400 on {field} saying {phrase!r}, got {st} {err}")

    # 9. /v1/sdpa: need_weights true is the softmax weights as they are (nothing to average),
    # is_causal is F.scaled_dot_product_attention's, batch_first is not an SDPA field.
    qs = rand(N, H, L, 4)
    ks, vs = rand(N, H, S, 4), rand(N, H, S, 4)
    # F.scaled_dot_product_attention(q, k, v, is_causal=True), written out (torch 1.13 has no
    # such function): scale 1/sqrt(D) = 1/2, the top-left causal mask.
    wt = torch.softmax((qs @ ks.transpose(-2, -1)) / 2.0 +
                       torch.zeros(L, S).masked_fill(torch.ones(L, S).triu(1).bool(),
                                                     float("-inf")), dim=-1)
    o = wt @ vs
    st, r = post(url.replace("attention", "sdpa"), {"q": qs.tolist(), "k": ks.tolist(),
                                                    "v": vs.tolist(), "is_causal": True,
                                                    "need_weights": True})
    if check(st == 200, f"sdpa is_causal: status {st}: {r}"):
        compare("sdpa output with is_causal", r["output"], o)
        compare("sdpa weights (N, H, L, S), not averaged", r["weights"], wt)
    st, r = post(url.replace("attention", "sdpa"), {"q": qs.tolist(), "k": ks.tolist(),
                                                    "v": vs.tolist(), "batch_first": False})
    check(st == 400 and r["error"]["field"] == "batch_first",
          f"sdpa refuses batch_first: {st} {r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnd", required=True)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_attnd(os.path.abspath(args.attnd), [], os.path.join(tmp, "attnd.log"),
                                  "torch_port")
        try:
            run_cases(f"http://127.0.0.1:{port}/v1/attention")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    print(f"torch_port: {check.summary()}")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
