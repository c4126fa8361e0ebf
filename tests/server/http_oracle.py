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

Usage: http_oracle.py --attnd build/attnd [--work DIR] [--seed N] [--threads N] [-v]
Exits 1 when any value is off, a request fails, or too few values were compared.
"""

import argparse
import base64
import http.client
import json
import math
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.dont_write_bytecode = True  # leave no __pycache__ in tests/oracle
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "oracle"))
import run_oracle as ro  # noqa: E402  (the grid, the references and the comparisons)

MIN_VALUES = 100000
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
        data = json.dumps(body).encode()
        for attempt in (0, 1):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port,
                                                           timeout=REQUEST_SECS)
                self.conn.request("POST", path, data, {"Content-Type": "application/json"})
                r = self.conn.getresponse()
                payload = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
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


# ---- The daemon ----------------------------------------------------------------------------

def start_attnd(binary, work, threads):
    log = work / "http_oracle_attnd.log"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ATTND_") or k.startswith("ATTND_BLAS_")}
    f = open(log, "wb")
    p = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--threads", str(threads),
                          "--max-queue", "1024"], stdout=f, stderr=subprocess.STDOUT, env=env)
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attnd", required=True)
    ap.add_argument("--work", default="build/tests/server")
    ap.add_argument("--seed", type=int, default=20240611)
    ap.add_argument("--threads", type=int, default=4, help="client threads")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()
    cases = ro.build_grid(args.seed)
    t_grid = time.monotonic() - t_start
    proc, port, log = start_attnd(args.attnd, work, 2)

    groups = {}
    for i, c in enumerate(cases):
        groups.setdefault(c.group, []).append((i, c))

    def run_case(item):
        i, case = item
        t = ro.Tally()
        client = Client(port)
        reqs, sdpa = requests_of(case, i)
        for path, body, run, out_shape, wshape in reqs:
            where = f"{case.group}/{case.name}/{run.label}-{body['encoding']}"
            try:
                status, reply = client.post(path, body)
            except Exception as ex:  # noqa: BLE001 - any transport failure fails the case
                t.fail(where, f"request failed: {ex}")
                continue
            t.runs += 1
            if status != 200:
                t.fail(where, f"HTTP {status}: {json.dumps(reply)[:300]}")
                continue
            before = t.values
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
                for k in ("values", "by_def", "runs", "cases"):
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

    total = ro.Tally()
    print(f"http_oracle: seed {args.seed}, tolerance {ro.TOL:g} absolute against float64 torch, "
          f"grid built in {t_grid:.1f} s")
    for group, g in totals.items():
        print(f"{group:<13} {g.cases:4d} cases {g.runs:5d} requests {g.values:9d} values "
              f"({g.by_def} by definition)  max err {g.max_err:.1e}  "
              f"{'ok' if not g.failures else f'{len(g.failures)} FAILED'}")
        for k in ("values", "by_def", "runs", "cases"):
            setattr(total, k, getattr(total, k) + getattr(g, k))
        total.max_err = max(total.max_err, g.max_err)
        total.failures += g.failures
    if total.values < MIN_VALUES:
        total.fail("total", f"only {total.values} values compared; expected at least {MIN_VALUES}")
    if code != 0:
        total.fail("attnd", f"exit status {code} after SIGTERM (log: {log})")
    shown = total.failures if args.verbose else total.failures[:30]
    for f in shown:
        print("FAIL " + f)
    if len(shown) < len(total.failures):
        print(f"... and {len(total.failures) - len(shown)} more (-v shows all)")
    verdict = "FAIL" if total.failures else "PASS"
    print(f"http_oracle: {verdict}: {total.cases} cases, {total.runs} requests, {total.values} "
          f"values compared, {len(total.failures)} failures, max err {total.max_err:.1e}, "
          f"{time.monotonic() - t_start:.1f} s")
    global_fails = 1 if total.failures and not failed_cases else 0
    print(f"{total.cases - failed_cases} passed, {failed_cases + global_fails} failed")
    return 1 if total.failures else 0


if __name__ == "__main__":
    sys.exit(main())
