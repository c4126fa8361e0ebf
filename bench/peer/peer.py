#!/usr/bin/python3
"""peer.py - the service a user would otherwise write: FastAPI + uvicorn + PyTorch, serving the
subset of attnd's POST /v1/attention that the HTTP benchmark (bench/http) sends.

The subset: query (L, E) or (N, L, E), key and value (default: the query), as nested JSON arrays
or {"dtype": "float32", "shape", "data": base64}; params as state_dict tensors (in_proj_weight,
in_proj_bias, out_proj.weight, out_proj.bias) or {"init": "random", "seed"} / {"init":
"identity"} with num_heads (the same splitmix64 Xavier stream as attnd, api/api.h); causal
(true = top-left), key_lengths, need_weights (false, "per_head", "mean") and encoding ("json",
"base64"). The response has attnd's shape: {"output", "weights", "model", "num_heads", "shape",
"usage"}. Anything else is answered 400.

It is written as such a user would write it, with the obvious care: torch.inference_mode,
nn.MultiheadAttention(batch_first=True), one torch thread per worker process, and modules made
from params.init cached per (init, seed, E, H) so that repeated requests do not rebuild them.

Run (from the repository root; OPENBLAS_CORETYPE as attnd's start-up log says):
    OPENBLAS_CORETYPE=Zen /usr/bin/python3 -m uvicorn bench.peer.peer:app --workers 2 \
        --host 127.0.0.1 --port 8090 --no-access-log
"""

import base64
import functools
import json
import time

import numpy as np
import torch
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

torch.set_num_threads(1)
app = FastAPI()


class BadRequest(Exception):
    pass


def splitmix_uniform(n, a, state):
    """n floats of attnd's init stream from state (api_model_init_random); returns (w, state)."""
    with np.errstate(over="ignore"):
        i = np.arange(1, n + 1, dtype=np.uint64)
        z = np.uint64(state) + i * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float64) / 16777216.0
    new_state = (state + n * 0x9E3779B97F4A7C15) % (1 << 64)
    return (a * (2.0 * u - 1.0)).astype(np.float32), new_state


@functools.lru_cache(maxsize=16)
def init_module(init, seed, e, h):
    # Zero biases: torch 1.13's fast path needs bias tensors (attnd's init has none).
    m = torch.nn.MultiheadAttention(e, h, bias=True, batch_first=True)
    if init == "random":
        w_in, st = splitmix_uniform(3 * e * e, np.sqrt(6.0 / (e + 3.0 * e)), seed)
        w_out, _ = splitmix_uniform(e * e, np.sqrt(6.0 / (e + e)), st)
    else:
        w_in = np.concatenate([np.eye(e, dtype=np.float32)] * 3)
        w_out = np.eye(e, dtype=np.float32)
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.from_numpy(w_in.reshape(3 * e, e)))
        m.out_proj.weight.copy_(torch.from_numpy(w_out.reshape(e, e)))
    return m.eval()


def tensor_in(v, name):
    if isinstance(v, dict):
        if v.get("dtype") != "float32":
            raise BadRequest(f"{name}: only float32 binary tensors")
        a = np.frombuffer(base64.b64decode(v["data"]), dtype="<f4").reshape(v["shape"])
        return torch.from_numpy(a.copy())
    return torch.tensor(v, dtype=torch.float32)


def tensor_out(t, b64):
    a = t.detach().contiguous().numpy()
    if b64:
        return {"dtype": "float32", "shape": list(a.shape),
                "data": base64.b64encode(a.astype("<f4").tobytes()).decode()}
    return a.tolist()


def module_from(params, e):
    h = int(params["num_heads"])
    init = params.get("init")
    if init in ("random", "identity"):
        return init_module(init, int(params.get("seed", 0)), e, h), h
    if init is not None:
        raise BadRequest("params.init must be random or identity")
    w_in = params["in_proj_weight"]
    bias = "in_proj_bias" in params or "out_proj.bias" in params
    m = torch.nn.MultiheadAttention(e, h, bias=bias, batch_first=True)
    with torch.no_grad():
        m.in_proj_weight.copy_(tensor_in(w_in, "in_proj_weight"))
        m.out_proj.weight.copy_(tensor_in(params["out_proj.weight"], "out_proj.weight"))
        if bias:
            m.in_proj_bias.copy_(tensor_in(params.get("in_proj_bias", [0.0] * 3 * e), "b"))
            m.out_proj.bias.copy_(tensor_in(params.get("out_proj.bias", [0.0] * e), "b"))
    return m.eval(), h


def attention(body):
    t0 = time.monotonic()
    q = tensor_in(body["query"], "query")
    rank2 = q.dim() == 2
    if rank2:
        q = q.unsqueeze(0)
    k = tensor_in(body["key"], "key") if "key" in body else q
    v = tensor_in(body["value"], "value") if "value" in body else k
    if rank2 and "key" in body:
        k = k.unsqueeze(0)
    if rank2 and "value" in body:
        v = v.unsqueeze(0)
    n, l, e = q.shape
    s = k.shape[1]
    if "params" not in body:
        raise BadRequest("the peer needs params (inline tensors or init)")
    m, h = module_from(body["params"], e)
    causal = body.get("causal", False)
    attn_mask = None
    if causal in (True, "top_left"):
        attn_mask = torch.ones(l, s, dtype=torch.bool).triu(1)
    elif causal:
        raise BadRequest("causal: only true / top_left")
    kpm = None
    if body.get("key_lengths") is not None:
        kl = torch.tensor(body["key_lengths"]).view(n, 1)
        kpm = torch.arange(s).view(1, s) >= kl
    nw = body.get("need_weights", False)
    if nw not in (False, "per_head", "mean"):
        raise BadRequest("need_weights: false, per_head or mean")
    with torch.inference_mode():
        out, w = m(q, k, v, key_padding_mask=kpm, attn_mask=attn_mask, need_weights=bool(nw),
                   average_attn_weights=nw == "mean")
    compute_ms = (time.monotonic() - t0) * 1e3
    b64 = body.get("encoding") == "base64"
    if rank2:
        out = out[0]
        w = w[0] if w is not None else None
    res = {"output": tensor_out(out, b64)}
    if w is not None:
        res["weights"] = tensor_out(w, b64)
    res.update({"model": None, "num_heads": h, "shape": {"N": n, "L": l, "S": s, "E": e},
                "usage": {"queue_ms": 0.0, "compute_ms": compute_ms}})
    return res


@app.post("/v1/attention")
async def post_attention(request: Request):
    try:
        body = json.loads(await request.body())
        res = attention(body)
    except (BadRequest, KeyError, ValueError, TypeError, RuntimeError) as e:
        return JSONResponse({"error": {"code": "invalid_field", "message": str(e),
                                       "field": None}}, status_code=400)
    return Response(json.dumps(res), media_type="application/json")


@app.get("/healthz")
async def healthz():
    return {"status": "ok"}
