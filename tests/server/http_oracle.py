#!/usr/bin/python3
"""http_oracle.py - the PyTorch oracle grid of tests/oracle/run_oracle.py, run through HTTP.

Builds the same seeded grid of MHA and SDPA cases with run_oracle's generators and float64
expectations (torch.nn.MultiheadAttention; softmax(q k^T * scale + mask) v), starts build/attnd on
127.0.0.1:0, sends every case as a JSON request (inline params; masks as JSON; inputs as nested
arrays or, for every third case, base64; responses alternately JSON and base64), and compares the
answers with the expectations within run_oracle.TOL absolute. A case's runs that differ only in
how libattn computes (paths, blocks, pool) collapse into one request per weights option.

Mapping of the grid onto API v1: MHA rank-3 queries (N, L, E), or rank 2 when N = 1 on every
other case; causal 1 as true or "top_left" (alternately), 2 as "bottom_right"; key_mask extents
0/1 as (S); attn_mask/attn_bias extents 0/1 as (L, S), (N, 1) as (N, L, S), anything with H
broadcast to (N, H, L, S); -inf biases as the string "-inf". SDPA sends (N, H, L, D) whenever a
mask is given, and (L, D) or (H, L, D) otherwise; its weights are dense per head (need_weights is
a bool there), and its mean/top-k runs are checked against the dense maps.

Through API v1, every case within the trace's bound (trace_oracle.traceable) also goes once
with "trace": true (alternately JSON and base64), and trace_oracle.py checks each step of the
trace against the case's inputs in float64 and against the step before it.

The grid runs twice: through API v1 as above, then through the Open Inference Protocol (v2).
For v2, each MHA case's weights are written as a safetensors model file (o<index>), a second
attnd loads them (--models), and the case is POSTed to /v2/models/o<index>/infer; SDPA cases
go to /v2/models/sdpa/infer. Inputs travel as raw bytes after the JSON (binary tensor data
extension, Inference-Header-Content-Length) on every other case and as flat JSON data arrays
otherwise; outputs alternately binary and JSON. The masks map as for v1 (key_lengths INT32,
key_mask INT32 or BOOL, attn_mask BOOL, attn_bias FP32 with -inf raw or as "-inf"), and the
parameters carry causal, need_weights, heads ("0,2"), weights_top_k and scale.

Usage: http_oracle.py --attnd build/attnd [--work DIR] [--seed N] [--threads N]
                      [--protocols v1,v2] [-v]
Exits 1 when any value is off, a request fails, or too few values were compared (per protocol).
"""

import argparse
import base64
import gzip
import http.client
import json
import math
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.dont_write_bytecode = True  # leave no __pycache__ in tests/oracle
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "oracle"))
import run_oracle as ro  # noqa: E402  (the grid, the references and the comparisons)
import trace_oracle  # noqa: E402  (the "trace" of v1, checked step by step)

MIN_VALUES = 100000
MIN_TRACES = 100  # v1 replies with a trace: most of the grid is within its bound
START_SECS = 20
REQUEST_SECS = 120


# ---- Encoding requests ---------------------------------------------------------------------

def b64_tensor(a):
    a = np.ascontiguousarray(a, dtype="<f4")
    return {"dtype": "float32", "shape": list(a.shape),
            "data": base64.b64encode(a.tobytes()).decode()}


def tensor(a, b64):
    """A float tensor as nested lists (exact: float32 -> double -> float32) or base64."""
    a = np.asarray(a, dtype=np.float32)
    return b64_tensor(a) if b64 else a.astype(np.float64).tolist()


def bias_tensor(a, b64):
    """attn_bias: -inf as the string "-inf"; base64 only when every value is finite."""
    a = np.asarray(a, dtype=np.float32)
    if b64 and np.isfinite(a).all():
        return b64_tensor(a)
    return [bias_tensor(x, False) for x in a] if a.ndim > 1 else [
        "-inf" if math.isinf(x) else float(x) for x in a.astype(np.float64)]


def mask_tensor(a, as_bool):
    a = np.asarray(a) != 0
    return a.tolist() if as_bool else a.astype(int).tolist()


def fold_leading(a, mn, mh, N, H):
    """A (max(mn,1), max(mh,1), L, S) mask as one of the API's shapes: (L, S), (N, L, S) or
    (N, H, L, S). Extents 0 and 1 broadcast; anything with H is written out in full."""
    if mh in (0, 1) and mn in (0, 1):
        return a[0, 0]
    if mh in (0, 1) and mn == N:
        return a[:, 0]
    return np.broadcast_to(a, (N, H) + a.shape[2:])


def add_masks(body, keys, files, N, H, index, b64):
    causal = keys.get("causal", 0)
    if causal == ro.CAUSAL_TOP_LEFT:
        body["causal"] = True if index % 2 else "top_left"
    elif causal == ro.CAUSAL_BOTTOM_RIGHT:
        body["causal"] = "bottom_right"
    if "key_lengths.i32" in files:
        body["key_lengths"] = [int(x) for x in files["key_lengths.i32"]]
    if "key_mask.u8" in files:
        km = np.asarray(files["key_mask.u8"])
        kn = keys["key_mask_n"]
        body["key_mask"] = mask_tensor(km if kn == N and kn > 1 else km[0], index % 3 == 0)
    if "attn_mask.u8" in files:
        am = fold_leading(files["attn_mask.u8"], keys["attn_mask_n"], keys["attn_mask_h"], N, H)
        body["attn_mask"] = mask_tensor(am, index % 2 == 0)
    if "attn_bias.f32" in files:
        ab = fold_leading(files["attn_bias.f32"], keys["attn_bias_n"], keys["attn_bias_h"], N, H)
        body["attn_bias"] = bias_tensor(ab, b64)


def weight_options(run, sdpa):
    """The request fields of a run's weights, and a key to collapse equal requests."""
    if run.weights == ro.WEIGHTS_NONE:
        return {}, ("none",)
    if sdpa:
        return {"need_weights": True}, ("dense",)
    opts = {"need_weights": "per_head" if run.weights == ro.WEIGHTS_PER_HEAD else "mean"}
    heads = unique_heads(run)
    if heads:
        opts["heads"] = heads
    if run.top_k:
        opts["weights_top_k"] = run.top_k
    return opts, (run.weights, tuple(heads), run.top_k)


def unique_heads(run):
    """The run's head list without repeats (libattn allows a head twice; API v1 does not)."""
    return list(dict.fromkeys(run.heads))


def mha_request(case, index):
    k, f = case.keys, case.files
    N, H = k["n"], k["h"]
    b64 = index % 3 == 0
    per_batch = "key_lengths.i32" in f or "key_mask.u8" in f
    rank2 = N == 1 and index % 2 == 1 and not per_batch

    def batch(a):
        return a[0] if rank2 else a

    body = {"query": tensor(batch(f["query.f32"]), b64)}
    if k["inputs"] != 1:  # not self-attention: key given; value given unless it is the key
        body["key"] = tensor(batch(f["key.f32"]), b64)
        if k["inputs"] == 0:
            body["value"] = tensor(batch(f["value.f32"]), b64)
    params = {"num_heads": H}
    names = {"in_proj_weight.f32": "in_proj_weight", "q_proj_weight.f32": "q_proj_weight",
             "k_proj_weight.f32": "k_proj_weight", "v_proj_weight.f32": "v_proj_weight",
             "in_proj_bias.f32": "in_proj_bias", "out_proj_weight.f32": "out_proj.weight",
             "out_proj_bias.f32": "out_proj.bias"}
    for fname, pname in names.items():
        if fname in f:
            params[pname] = tensor(f[fname], b64 and index % 2 == 0)
    body["params"] = params
    add_masks(body, k, f, N, H, index, b64)
    return body, rank2


def sdpa_request(case, index):
    k, f = case.keys, case.files
    N, H = k["n"], k["h"]
    b64 = index % 3 == 0
    q = f["q.f32"]
    kk = q if k["inputs"] == 1 else f["k.f32"]
    v = f["v.f32"]
    masked = any(name in f for name in ("key_lengths.i32", "key_mask.u8", "attn_mask.u8",
                                        "attn_bias.f32"))
    lead = 4
    if not masked and N == 1:
        lead = 2 if H == 1 and index % 2 else 3

    def shape(a):
        return a.reshape(a.shape[4 - lead:]) if lead < 4 else a

    body = {"q": tensor(shape(q), b64), "k": tensor(shape(kk), b64), "v": tensor(shape(v), b64)}
    if "scale" in k:
        body["scale"] = float(k["scale"])
    add_masks(body, k, f, N, H, index, b64)
    return body, lead


# ---- Decoding and checking -----------------------------------------------------------------

def read_tensor(x, dtype="<f4"):
    if isinstance(x, np.ndarray):  # a v2 reply's, already decoded
        return x
    if isinstance(x, dict):
        want = {"float32": "<f4", "int32": "<i4"}[x["dtype"]]
        return np.frombuffer(base64.b64decode(x["data"]), dtype=want).reshape(x["shape"])
    return np.asarray(x, dtype=np.float64 if dtype == "<f4" else np.int64)


def check_reply(t, where, reply, case, run, out_shape, weights_shape_fn, sdpa):
    e = case.expect
    if "output" not in reply:
        t.fail(where, f"no output in the reply: {str(reply)[:300]}")
        return
    out = read_tensor(reply["output"]).astype(np.float64)
    want = e.out.reshape(out_shape)
    t.close(where, "output", out, want, e.from_def.reshape(out_shape))
    if run.weights == ro.WEIGHTS_NONE:
        if "weights" in reply:
            t.fail(where, "weights returned but not asked for")
        return
    if "weights" not in reply:
        t.fail(where, "no weights in the reply")
        return
    if sdpa:
        ref = e.weights  # (N, H, L, S): SDPA returns dense per-head maps
    elif run.weights == ro.WEIGHTS_MEAN:
        ref = e.weights.mean(axis=1)
    else:
        ref = e.weights[:, unique_heads(run)] if run.heads else e.weights
    ref = ref.reshape(weights_shape_fn(ref.shape))
    w = reply["weights"]
    if run.top_k and not sdpa:
        if not isinstance(w, dict) or "indices" not in w or "values" not in w:
            t.fail(where, f"top-k weights are not {{indices, values}}: {str(w)[:200]}")
            return
        vals = read_tensor(w["values"]).astype(np.float64)
        idx = read_tensor(w["indices"], "<i4").astype(np.int64)
        t.topk(where, f"top-{run.top_k}", vals, idx, ref, run.top_k)
    else:
        t.close(where, "weights", read_tensor(w).astype(np.float64), ref)


class Client:
    """One keep-alive connection per thread."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def post(self, path, body):
        """POSTs a v1 body (a dict), or a v2 one ((JSON bytes, raw bytes): the raw bytes after
        the JSON, with Inference-Header-Content-Length, and no Content-Type, as Triton's client
        sends it). Returns the status and the reply (v1's JSON; v2's as v2_reply makes it)."""
        v2 = isinstance(body, tuple)
        data = body[0] + body[1] if v2 else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if v2:
            headers = {"Inference-Header-Content-Length": str(len(body[0]))} if body[1] else {}
            if len(data) > 1 << 16:  # large bodies go compressed, as clients may send them
                data = gzip.compress(data, 1)
                headers["Content-Encoding"] = "gzip"
        for attempt in (0, 1):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port,
                                                           timeout=REQUEST_SECS)
                self.conn.request("POST", path, data, headers)
                r = self.conn.getresponse()
                payload = r.read()
                hdrs = {k.lower(): v for k, v in r.getheaders()}
                if r.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                if v2:
                    return r.status, v2_reply(r.status, hdrs, payload)
                return r.status, json.loads(payload)
            except (http.client.HTTPException, ConnectionError, OSError):
                if self.conn:
                    self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise RuntimeError("unreachable")


def requests_of(case, index):
    """[(path, body, run, output shape, weights shape function)] of one case."""
    sdpa = case.keys["kind"] == "sdpa"
    if sdpa:
        base, lead = sdpa_request(case, index)
        N, H, L, Dv = case.expect.out.shape
        out_shape = (N, H, L, Dv)[4 - lead:]

        def wshape(s, lead=lead):
            return s[4 - lead:] if lead < 4 else s
    else:
        base, rank2 = mha_request(case, index)
        out_shape = case.expect.out.shape[1:] if rank2 else case.expect.out.shape

        def wshape(s, rank2=rank2):
            return s[1:] if rank2 else s
    seen = {}
    for run in case.runs:
        opts, key = weight_options(run, sdpa)
        if key in seen:
            continue
        body = dict(base, **opts)
        body["encoding"] = "base64" if (index + len(seen)) % 2 else "json"
        seen[key] = ("/v1/sdpa" if sdpa else "/v1/attention", body, run, out_shape, wshape)
    return list(seen.values()), sdpa


# ---- The Open Inference Protocol (v2) ------------------------------------------------------

# The case files of an MHA case's weights, by their state_dict names.
PARAM_FILES = {"in_proj_weight.f32": "in_proj_weight", "q_proj_weight.f32": "q_proj_weight",
               "k_proj_weight.f32": "k_proj_weight", "v_proj_weight.f32": "v_proj_weight",
               "in_proj_bias.f32": "in_proj_bias", "out_proj_weight.f32": "out_proj.weight",
               "out_proj_bias.f32": "out_proj.bias"}


def write_model(path, case):
    """An MHA case's weights as a safetensors file (8-byte little-endian header length, JSON
    header padded with spaces to 8 bytes, raw little-endian float32), num_heads in metadata."""
    header, blobs, at = {"__metadata__": {"num_heads": str(case.keys["h"])}}, [], 0
    for fname, name in PARAM_FILES.items():
        if fname in case.files:
            a = np.ascontiguousarray(case.files[fname], dtype="<f4")
            header[name] = {"dtype": "F32", "shape": list(a.shape),
                            "data_offsets": [at, at + a.nbytes]}
            blobs.append(a.tobytes())
            at += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def v2_model_name(index):
    return f"o{index:04d}"


def v2_input(name, a, datatype, binary):
    """An input object and its raw bytes (None for JSON data). -inf in FP32 JSON data is the
    string "-inf"."""
    a = np.ascontiguousarray(a)
    t = {"name": name, "shape": list(a.shape), "datatype": datatype}
    if binary:
        raw = a.astype({"FP32": "<f4", "INT32": "<i4", "BOOL": "u1"}[datatype]).tobytes()
        t["parameters"] = {"binary_data_size": len(raw)}
        return t, raw
    if datatype == "FP32":
        t["data"] = ["-inf" if math.isinf(x) else x
                     for x in a.astype(np.float32).astype(np.float64).ravel().tolist()]
    elif datatype == "BOOL":
        t["data"] = [bool(x) for x in a.ravel()]
    else:
        t["data"] = [int(x) for x in a.ravel()]
    return t, None


def v2_requests_of(case, index):
    """The v1 requests of a case, as v2 requests: [(path, (json bytes, raw bytes), run, output
    shape, weights shape function, binary outputs)]."""
    reqs, sdpa = requests_of(case, index)
    binary_in = index % 2 == 0
    out = []
    for n, (path, body, run, out_shape, wshape) in enumerate(reqs):
        inputs, params = [], {}
        for key, val in body.items():
            if key in ("encoding", "params"):
                continue
            if key in ("causal", "need_weights", "weights_top_k", "scale"):
                params[key] = "per_head" if key == "need_weights" and val is True else val
            elif key == "heads":
                params["heads"] = ",".join(str(h) for h in val)
            elif key == "key_lengths":
                inputs.append(v2_input(key, np.asarray(val), "INT32", binary_in))
            elif key in ("key_mask", "attn_mask"):
                a = np.asarray(val).astype(np.int32)
                dt = "INT32" if key == "key_mask" and index % 3 else "BOOL"
                inputs.append(v2_input(key, a, dt, binary_in))
            else:  # float tensors: nested lists (or "-inf" strings) or v1 binary objects
                a = read_tensor(val) if isinstance(val, dict) else np.asarray(
                    [[-math.inf if x == "-inf" else x for x in row] for row in
                     np.asarray(val, dtype=object).reshape(-1, np.shape(val)[-1])],
                    dtype=np.float64).reshape(np.shape(val))
                inputs.append(v2_input(key, a, "FP32", binary_in))
        binary_out = (index + n) % 2 == 1
        params["binary_data_output"] = binary_out
        js = json.dumps({"inputs": [t for t, _ in inputs], "parameters": params}).encode()
        raw = b"".join(r for _, r in inputs if r is not None)
        model = "sdpa" if sdpa else v2_model_name(index)
        out.append((f"/v2/models/{model}/infer", (js, raw), run, out_shape, wshape, binary_out))
    return out, sdpa


def v2_reply(status, headers, payload):
    """A v2 reply as the v1 reply dict check_reply reads: output, weights (with top-k
    {indices, values}) as arrays; or the error body."""
    if status != 200:
        return json.loads(payload)
    hl = headers.get("inference-header-content-length")
    n = int(hl) if hl is not None else len(payload)
    head, raw, at = json.loads(payload[:n]), payload[n:], 0
    got = {}
    for o in head["outputs"]:
        size = o.get("parameters", {}).get("binary_data_size")
        dt = "<i4" if o["datatype"] == "INT32" else "<f4"
        if size is not None:
            a = np.frombuffer(raw[at:at + size], dtype=dt).reshape(o["shape"])
            at += size
        else:
            a = np.asarray(o["data"], dtype=np.int64 if dt == "<i4" else np.float32)
            a = a.reshape(o["shape"])
        got[o["name"]] = a
    reply = {"output": got["output"]} if "output" in got else {}
    if "weights_indices" in got:
        reply["weights"] = {"indices": got["weights_indices"], "values": got["weights"]}
    elif "weights" in got:
        reply["weights"] = got["weights"]
    if at != len(raw):
        reply["binary_left_over"] = len(raw) - at
    return reply


# ---- The daemon ----------------------------------------------------------------------------

def start_attnd(binary, work, threads, models=None):
    log = work / ("http_oracle_attnd_v2.log" if models else "http_oracle_attnd.log")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ATTND_") or k.startswith("ATTND_BLAS_")}
    f = open(log, "wb")
    extra = ["--models", str(models)] if models else []
    p = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--threads", str(threads),
                          "--max-queue", "1024"] + extra, stdout=f, stderr=subprocess.STDOUT,
                         env=env)
    f.close()
    t0 = time.monotonic()
    port = None
    while time.monotonic() - t0 < START_SECS and port is None:
        if p.poll() is not None:
            raise RuntimeError(f"attnd exited at start: {log.read_text()[-1000:]}")
        for line in log.read_text().splitlines(keepends=True):
            if "listening" in line and line.endswith("\n") and "port=" in line:
                port = int(line.split("port=")[1].split()[0])
        time.sleep(0.02)
    if port is None:
        p.kill()
        raise RuntimeError("attnd printed no port")
    while time.monotonic() - t0 < START_SECS:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return p, port, log
        except OSError:
            pass
        time.sleep(0.02)
    p.kill()
    raise RuntimeError("attnd never became ready")


def run_pass(args, cases, protocol, work):
    """Sends the grid through one protocol; returns (totals by group, failed cases, exit code,
    log)."""
    models = None
    if protocol == "v2":
        models = work / "http_oracle_models"
        shutil.rmtree(models, ignore_errors=True)
        models.mkdir(parents=True)
        for i, c in enumerate(cases):
            if c.keys["kind"] != "sdpa":
                write_model(models / f"{v2_model_name(i)}.safetensors", c)
    proc, port, log = start_attnd(args.attnd, work, 2, models)

    def run_case(item):
        i, case = item
        t = ro.Tally()
        client = Client(port)
        if protocol == "v2":
            reqs, sdpa = v2_requests_of(case, i)
        else:
            reqs, sdpa = requests_of(case, i)
            reqs = [r + (r[1]["encoding"] == "base64",) for r in reqs]
            if trace_oracle.traceable(case):  # one more request: the trace, no weights
                path, body, run, out_shape, wshape = reqs[0][:5]
                body = {k: v for k, v in body.items()
                        if k not in ("need_weights", "heads", "weights_top_k")}
                body["trace"] = True
                body["encoding"] = "base64" if i % 2 else "json"
                reqs.append((path, body, "trace", out_shape, wshape, i % 2 == 1))
        for path, body, run, out_shape, wshape, binary in reqs:
            label = run if run == "trace" else run.label
            where = (f"{protocol} {case.group}/{case.name}/{label}-"
                     f"{'binary' if binary else 'json'}")
            try:
                status, reply = client.post(path, body)
            except Exception as ex:  # noqa: BLE001 - any transport failure fails the case
                t.fail(where, f"request failed: {ex}")
                continue
            t.runs += 1
            if status != 200:
                t.fail(where, f"HTTP {status}: {json.dumps(reply)[:300]}")
                continue
            if reply.get("binary_left_over"):
                t.fail(where, f"{reply['binary_left_over']} bytes after the binary outputs")
            before = t.values
            if run == "trace":
                trace_oracle.check(t, where, reply, case, out_shape, sdpa)
                t.traces += 1
            else:
                check_reply(t, where, reply, case, run, out_shape, wshape, sdpa)
            if t.values == before and not t.failures:
                t.fail(where, "compared nothing")
        t.cases = 1
        return case.group, t

    totals = {}
    failed_cases = 0
    try:
        with ThreadPoolExecutor(max_workers=args.threads) as ex:
            for group, t in ex.map(run_case, [(i, c) for i, c in enumerate(cases)]):
                g = totals.setdefault(group, ro.Tally())
                for k in ("values", "by_def", "runs", "cases", "traces"):
                    setattr(g, k, getattr(g, k) + getattr(t, k))
                g.max_err = max(g.max_err, t.max_err)
                g.failures += t.failures
                failed_cases += bool(t.failures)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = -1
    return totals, failed_cases, code, log


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attnd", required=True)
    ap.add_argument("--work", default="build/tests/server")
    ap.add_argument("--seed", type=int, default=20240611)
    ap.add_argument("--threads", type=int, default=4, help="client threads")
    ap.add_argument("--protocols", default="v1,v2", help="v1, v2 or v1,v2")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()
    cases = ro.build_grid(args.seed)
    t_grid = time.monotonic() - t_start
    print(f"http_oracle: seed {args.seed}, tolerance {ro.TOL:g} absolute against float64 torch, "
          f"grid built in {t_grid:.1f} s")
    any_fail, cases_failed = False, 0
    for protocol in args.protocols.split(","):
        t_pass = time.monotonic()
        totals, failed_cases, code, log = run_pass(args, cases, protocol, work)
        total = ro.Tally()
        for group, g in totals.items():
            print(f"{protocol} {group:<13} {g.cases:4d} cases {g.runs:5d} requests {g.values:9d} "
                  f"values ({g.by_def} by definition)  max err {g.max_err:.1e}  "
                  f"{'ok' if not g.failures else f'{len(g.failures)} FAILED'}")
            for k in ("values", "by_def", "runs", "cases", "traces"):
                setattr(total, k, getattr(total, k) + getattr(g, k))
            total.max_err = max(total.max_err, g.max_err)
            total.failures += g.failures
        if protocol == "v1" and total.traces < MIN_TRACES:
            total.fail("total", f"only {total.traces} traces checked; expected at least "
                       f"{MIN_TRACES}")
        if total.values < MIN_VALUES:
            total.fail("total", f"{protocol}: only {total.values} values compared; expected at "
                       f"least {MIN_VALUES}")
        if code != 0:
            total.fail("attnd", f"exit status {code} after SIGTERM (log: {log})")
        shown = total.failures if args.verbose else total.failures[:30]
        for f in shown:
            print("FAIL " + f)
        if len(shown) < len(total.failures):
            print(f"... and {len(total.failures) - len(shown)} more (-v shows all)")
        verdict = "FAIL" if total.failures else "PASS"
        print(f"http_oracle {protocol}: {verdict}: {total.cases} cases, {total.runs} requests "
              f"({total.traces} with a trace), "
              f"{total.values} values compared, {len(total.failures)} failures, max err "
              f"{total.max_err:.1e}, {time.monotonic() - t_pass:.1f} s")
        any_fail |= bool(total.failures)
        cases_failed += failed_cases + (1 if total.failures and not failed_cases else 0)
        cases_total = total.cases
    print(f"{cases_total * len(args.protocols.split(',')) - cases_failed} passed, "
          f"{cases_failed} failed ({time.monotonic() - t_start:.1f} s)")
    return 1 if any_fail else 0

if __name__ == "__main__":
    sys.exit(main())
