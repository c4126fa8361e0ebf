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

Then PyTorch's remaining options (run_options): add_zero_attn and add_bias_kv (bias_k and bias_v
in params, and in a model file with __metadata__ add_zero_attn), a float key_padding_mask (added
to the scores; "-inf" as a string, and in base64), dropout and dropout_p at 0 as nanoGPT passes
them (any other value refused: inference only), and grouped-query attention on /v1/sdpa
(enable_gqa, against F.scaled_dot_product_attention's definition of it: k and v repeated over
each group of query heads). Their largest errors are printed.

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
from pathlib import Path

import numpy as np
import torch

from harness import Checks, start_attnd
from make_models import tensor_bytes, write_safetensors

check = Checks()
TOL = 1e-5
ERRS = {}  # what -> the largest |attnd - torch| of the options' cases, printed at the end


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


def module(E, H, kdim=None, vdim=None, seed=0, add_bias_kv=False, add_zero_attn=False):
    """An nn.MultiheadAttention (batch_first=False, PyTorch's default) with float32-exact
    weights, in float64, and its state_dict as attnd's params."""
    torch.manual_seed(seed)
    m = torch.nn.MultiheadAttention(E, H, kdim=kdim, vdim=vdim, add_bias_kv=add_bias_kv,
                                    add_zero_attn=add_zero_attn)
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


def compare(what, got, want, option=None):
    """Checks got against torch's want within TOL; option: the option whose figure it joins."""
    want = want.detach().numpy()
    got = np.asarray(got, dtype=np.float64)
    if not check(got.shape == want.shape, f"{what}: shape {got.shape}, torch {want.shape}"):
        return
    err = float(np.max(np.abs(got - want))) if got.size else 0.0
    check(err <= TOL, f"{what}: max |attnd - torch| = {err:.3g} > {TOL}")
    if option:
        ERRS[option] = max(ERRS.get(option, 0.0), err)


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


# ---- PyTorch's remaining options ------------------------------------------------------------

def refused(url, body, field, phrase, what):
    """body must get a 400 naming field, its message saying phrase."""
    st, r = post(url, body)
    err = r.get("error", {}) if isinstance(r, dict) else {}
    check(st == 400 and err.get("field") == field and phrase in err.get("message", ""),
          f"{what}: want 400 on {field} saying {phrase!r}, got {st} {err}")


def jsonable(t):
    """t.tolist() with -inf as the string "-inf" (JSON has no infinity)."""
    def conv(x):
        return [conv(y) for y in x] if isinstance(x, list) else "-inf" if x == float("-inf") else x
    return conv(t.tolist())


def to_b64(t):
    a = np.ascontiguousarray(t.numpy(), dtype="<f4")
    return {"dtype": "float32", "shape": list(a.shape), "data": base64.b64encode(a).decode()}


def option_model(models_dir):
    """A model file of an nn.MultiheadAttention made with add_bias_kv and add_zero_attn: its
    state_dict (bias_k and bias_v (1, 1, E) among it) and __metadata__ add_zero_attn "true".
    Returns the module."""
    m, _ = module(8, 2, seed=7, add_bias_kv=True, add_zero_attn=True)
    tensors = [(k, "F32", tuple(v.shape), tensor_bytes(v, "F32"))
               for k, v in m.state_dict().items()]
    os.makedirs(models_dir, exist_ok=True)
    write_safetensors(Path(models_dir) / "kvbias.safetensors", tensors,
                      {"num_heads": "2", "add_zero_attn": "true"})
    return m


def sdpa_ref(q, k, v, mask=None, is_causal=False, enable_gqa=False):
    """F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal, enable_gqa) as PyTorch
    documents it (torch 1.13 has no such function): with enable_gqa, k and v repeated over each
    group of query heads (repeat_interleave on dimension -3); mask True = may attend. Returns the
    output and the weights."""
    if enable_gqa:
        k = k.repeat_interleave(q.size(-3) // k.size(-3), -3)
        v = v.repeat_interleave(q.size(-3) // v.size(-3), -3)
    L, S = q.size(-2), k.size(-2)
    bias = torch.zeros(L, S, dtype=q.dtype)
    if is_causal:
        bias = bias.masked_fill(torch.ones(L, S).triu(1).bool(), float("-inf"))
    if mask is not None:
        bias = bias.masked_fill(~mask, float("-inf"))
    w = torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5 + bias, dim=-1)
    return w @ v, w


def appended_keys(url, models_url, mk):
    """add_zero_attn and add_bias_kv, inline and from a model file."""
    L, S, N, E, H = 5, 6, 3, 8, 2
    q, kv = rand(L, N, E), rand(S, N, E)
    pad = torch.zeros(N, S, dtype=torch.bool)
    pad[1, 3:] = True
    pad[2, :] = True  # every key padded: the rows attend the appended keys alone
    blocked = torch.ones(L, S, dtype=torch.bool).triu(2)
    body = {"query": q.tolist(), "key": kv.tolist(), "value": kv.tolist(), "batch_first": False,
            "key_padding_mask": pad.tolist(), "torch_attn_mask": blocked.tolist()}

    # add_zero_attn: a zero key and value after the projections, masks padded.
    mz, pz = module(E, H, seed=3, add_zero_attn=True)
    for avg in (True, False):
        out, w = mz(q, kv, kv, key_padding_mask=pad, attn_mask=blocked, average_attn_weights=avg)
        st, r = post(url, dict(body, params=pz, add_zero_attn=True, need_weights=True,
                               average_attn_weights=avg))
        if check(st == 200, f"add_zero_attn: status {st}: {r}"):
            compare(f"add_zero_attn output (average {avg})", r["output"], out, "add_zero_attn")
            compare(f"add_zero_attn weights (N, .., L, S+1) (average {avg})", r["weights"], w,
                    "add_zero_attn")

    # add_bias_kv: bias_k and bias_v from the state_dict, inline; with add_zero_attn too, on
    # cross-attention with kdim and vdim (S+2 keys), the weights' top 3 and base64.
    mb, pb = module(E, H, seed=4, add_bias_kv=True)
    check(len(pb["bias_k"]) == 1 and len(pb["bias_k"][0][0]) == E, "bias_k is (1, 1, E)")
    out, w = mb(q, kv, kv, key_padding_mask=pad, attn_mask=blocked)
    st, r = post(url, dict(body, params=pb, need_weights=True))
    if check(st == 200, f"add_bias_kv: status {st}: {r}"):
        compare("add_bias_kv output", r["output"], out, "add_bias_kv")
        compare("add_bias_kv weights (N, L, S+1)", r["weights"], w, "add_bias_kv")
    mc, pc = module(E, H, kdim=3, vdim=5, seed=5, add_bias_kv=True, add_zero_attn=True)
    k2, v2 = rand(S, N, 3), rand(S, N, 5)
    out, w = mc(q, k2, v2, key_padding_mask=pad, average_attn_weights=False)
    st, r = post(url, {"params": pc, "query": q.tolist(), "key": k2.tolist(),
                       "value": v2.tolist(), "batch_first": False, "add_zero_attn": True,
                       "key_padding_mask": pad.tolist(), "need_weights": "per_head",
                       "weights_top_k": 3, "encoding": "base64"})
    if check(st == 200, f"add_bias_kv and add_zero_attn, kdim/vdim: status {st}: {r}"):
        compare("add_bias_kv + add_zero_attn output (base64)", from_b64(r["output"]), out,
                "add_bias_kv")
        top = torch.topk(w, 3, dim=-1)
        compare("their top-3 weights of S+2", from_b64(r["weights"]["values"]), top.values,
                "add_bias_kv")
        t = r["weights"]["indices"]
        idx = np.frombuffer(base64.b64decode(t["data"]), "<i4").reshape(t["shape"])
        some = top.values.numpy() > 0  # zero weights tie: attnd takes the lower key index
        check(np.array_equal(idx[some], top.indices.numpy()[some]) and (idx >= S).any(),
              f"the top-3 indices, the appended keys at S and S+1: {idx.tolist()}")
    # is_causal, self-attention: the appended keys stay visible to every query.
    x = rand(L, N, E)
    out, w = mb(x, x, x, attn_mask=torch.ones(L, L, dtype=torch.bool).triu(1))
    st, r = post(url, {"params": pb, "query": x.tolist(), "batch_first": False,
                       "is_causal": True, "need_weights": True, "trace": True})
    if check(st == 200, f"add_bias_kv with is_causal: status {st}: {r}"):
        compare("add_bias_kv with is_causal: output", r["output"], out, "add_bias_kv")
        compare("add_bias_kv with is_causal: weights", r["weights"], w, "add_bias_kv")
        tw = np.array(r["trace"]["weights"]).mean(axis=1)  # (N, H, L, S+1) -> the mean
        compare("add_bias_kv: the trace's weights", tw, w, "add_bias_kv")
    refused(url, dict(body, params=dict(pb, bias_v=None)), "params.bias_v", "required",
            "bias_k without bias_v")

    # A model file: bias_k and bias_v in its state_dict, __metadata__ add_zero_attn.
    qb, kvb = q.permute(1, 0, 2), kv.permute(1, 0, 2)
    out, w = mk(q, kv, kv, key_padding_mask=pad)
    st, r = post(url, {"model": "kvbias", "query": qb.tolist(), "key": kvb.tolist(),
                       "value": kvb.tolist(), "key_padding_mask": pad.tolist(),
                       "need_weights": True})
    if check(st == 200, f"the model file with add_bias_kv and add_zero_attn: {st}: {r}"):
        compare("model file output", np.array(r["output"]).transpose(1, 0, 2), out,
                "model file")
        compare("model file weights (N, L, S+2)", r["weights"], w, "model file")
    with urllib.request.urlopen(models_url + "/kvbias", timeout=30) as resp:
        info = json.load(resp)
    check(info.get("add_bias_kv") is True and info.get("add_zero_attn") is True,
          f"GET /v1/models/kvbias says add_bias_kv and add_zero_attn: {info}")
    refused(url, {"model": "kvbias", "query": qb.tolist(), "add_zero_attn": False},
            "add_zero_attn", "saved with add_zero_attn=true", "a request against its model")


def float_padding(url):
    """A float key_padding_mask: added to the scores (-inf as "-inf"), alone, beside a bool
    torch_attn_mask (PyTorch 2 adds it to that mask made float), and in base64."""
    L, S, N, E, H = 4, 7, 3, 8, 2
    m, params = module(E, H, seed=6)
    q, kv = rand(L, N, E), rand(S, N, E)
    fpad = torch.zeros(N, S, dtype=torch.float64)
    fpad[0, 2], fpad[2, 0], fpad[2, 6] = -1.5, 0.75, 2.0
    fpad[1, 4:] = float("-inf")
    body = {"params": params, "query": q.tolist(), "key": kv.tolist(), "value": kv.tolist(),
            "batch_first": False, "need_weights": True}
    out, w = m(q, kv, kv, key_padding_mask=fpad)
    st, r = post(url, dict(body, key_padding_mask=jsonable(fpad)))
    if check(st == 200, f"float key_padding_mask: status {st}: {r}"):
        compare("float key_padding_mask output", r["output"], out, "float key_padding_mask")
        compare("float key_padding_mask weights", r["weights"], w, "float key_padding_mask")
    st, r2 = post(url, dict(body, key_padding_mask=to_b64(fpad.float())))
    check(st == 200 and r2.get("output") == r.get("output"),
          f"the float key_padding_mask in base64 answers the same, bit for bit: {st}")
    blocked = torch.ones(L, S, dtype=torch.bool).triu(3)
    as_float = torch.zeros(L, S, dtype=torch.float64).masked_fill(blocked, float("-inf"))
    merged = (as_float[None] + fpad[:, None, :]).repeat_interleave(H, dim=0)  # (N*H, L, S)
    out, w = m(q, kv, kv, attn_mask=merged)
    st, r = post(url, dict(body, key_padding_mask=jsonable(fpad), torch_attn_mask=blocked.tolist()))
    if check(st == 200, f"float key_padding_mask with torch_attn_mask: status {st}: {r}"):
        compare("float key_padding_mask + torch_attn_mask output", r["output"], out,
                "float key_padding_mask")
        compare("float key_padding_mask + torch_attn_mask weights", r["weights"], w,
                "float key_padding_mask")


def dropout_and_gqa(url):
    """dropout_p=0.0 as nanoGPT passes it, dropout refused otherwise; grouped-query attention."""
    sdpa = url.replace("attention", "sdpa")
    N, T, D = 2, 6, 4
    q, k, v = rand(N, 3, T, D), rand(N, 3, T, D), rand(N, 3, T, D)
    out, _ = sdpa_ref(q, k, v, is_causal=True)
    st, r = post(sdpa, {"q": q.tolist(), "k": k.tolist(), "v": v.tolist(), "is_causal": True,
                        "dropout_p": 0.0})
    if check(st == 200, f"nanoGPT's call, dropout_p=0.0: status {st}: {r}"):
        compare("nanoGPT's call output", r["output"], out, "dropout_p=0")
    refused(sdpa, {"q": q.tolist(), "k": k.tolist(), "v": v.tolist(), "dropout_p": 0.1},
            "dropout_p", "inference only", "dropout_p 0.1")
    m, params = module(8, 2, seed=8)
    x = rand(5, 2, 8)
    out, _ = m(x, x, x)
    st, r = post(url, {"params": params, "query": x.tolist(), "batch_first": False,
                       "dropout": 0.0})
    if check(st == 200, f"attention with dropout 0.0: status {st}: {r}"):
        compare("attention with dropout 0.0", r["output"], out, "dropout_p=0")
    refused(url, {"params": params, "query": x.tolist(), "dropout": 0.5}, "dropout",
            "inference only", "dropout 0.5")

    # Grouped-query attention: 6 query heads on 2 key/value heads, causal, with the weights;
    # (H, L, D) with a mask; a mask per query head; equal heads with enable_gqa.
    L, S, Hq, Hkv, Dv = 5, 7, 6, 2, 3
    q, k, v = rand(N, Hq, L, D), rand(N, Hkv, S, D), rand(N, Hkv, S, Dv)
    mask = torch.rand(L, S) < 0.7
    mask[:, 0] = True
    cases = [("(N, H, L, D), is_causal", q, k, v, None, True),
             ("(H, L, D), attn_mask", q[0], k[0], v[0], mask, False),
             ("(N, H, L, D), attn_mask per query head", q, k, v,
              torch.rand(1, Hq, L, S) < 0.7, False)]
    for what, qq, kk, vv, mm, causal in cases:
        if mm is not None:
            mm[..., 0] = True
        out, w = sdpa_ref(qq, kk, vv, mm, causal, enable_gqa=True)
        body = {"q": qq.tolist(), "k": kk.tolist(), "v": vv.tolist(), "enable_gqa": True,
                "need_weights": True, "is_causal": causal}
        if mm is not None:
            body["attn_mask"] = mm.tolist()
        st, r = post(sdpa, body)
        if check(st == 200, f"GQA {what}: status {st}: {r}"):
            compare(f"GQA {what}: output", r["output"], out, "GQA")
            compare(f"GQA {what}: weights (.., H, L, S)", r["weights"], w, "GQA")
    refused(sdpa, {"q": q.tolist(), "k": k.tolist(), "v": v.tolist()}, "k", "enable_gqa",
            "fewer key heads without enable_gqa")
    refused(sdpa, {"q": q.tolist(), "k": rand(N, 4, S, D).tolist(),
                   "v": rand(N, 4, S, Dv).tolist(), "enable_gqa": True}, "k", "do not divide",
            "4 key heads for 6 query heads")
    k6, v6 = rand(N, Hq, S, D), rand(N, Hq, S, Dv)
    out, _ = sdpa_ref(q, k6, v6)
    st, r = post(sdpa, {"q": q.tolist(), "k": k6.tolist(), "v": v6.tolist(), "enable_gqa": True})
    if check(st == 200, f"enable_gqa with equal heads: status {st}: {r}"):
        compare("enable_gqa with equal heads", r["output"], out, "GQA")


def run_options(url, mk):
    appended_keys(url, url.replace("/attention", "/models"), mk)
    float_padding(url)
    dropout_and_gqa(url)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnd", required=True)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    with tempfile.TemporaryDirectory() as tmp:
        mk = option_model(os.path.join(tmp, "models"))
        proc, port = start_attnd(os.path.abspath(args.attnd),
                                 ["--models", os.path.join(tmp, "models")],
                                 os.path.join(tmp, "attnd.log"), "torch_port")
        try:
            run_cases(f"http://127.0.0.1:{port}/v1/attention")
            run_options(f"http://127.0.0.1:{port}/v1/attention", mk)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    print("torch_port: PyTorch's options, max |attnd - torch|: " +
          ", ".join(f"{k} {v:.2g}" for k, v in ERRS.items()))
    print(f"torch_port: {check.summary()}")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
