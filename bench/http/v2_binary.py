#!/usr/bin/python3
"""v2_binary.py - the Open Inference Protocol's binary tensors against API v1's base64, over HTTP
on loopback, side by side in one run (interleaved rounds, medians).

One attnd (default flags) serves both protocols on the same model, so the jobs, plans and
compute are the same and only the codecs differ; before timing, the answers of every pair are
checked to be the same float32 bits. Workloads:
  W1-like  N 1, L 16, E 64, H 4 (the demo model), per-head weights out: wrk -t2 -c64, req/s
           and attnd's own CPU time per request (user + system from /proc over each wrk run,
           divided by the requests its /metrics counted: less disturbed by other load on a
           shared machine than req/s); also both protocols' JSON forms, for reference.
  W3-like  N 4, L 512, E 768, H 12 (a model file with those widths, written here), key_lengths
           512/448/384/320, output only: one client, sequential requests; the client's time per
           request, and attnd's own parse and encode times (parse_ms, encode_ms of its access
           log), medians.
v1 sends base64 objects and asks for "encoding": "base64"; v2 sends raw float32 after the JSON
(Inference-Header-Content-Length) and asks for binary outputs, as Triton's client does. The W1
runs of a round start one step further along their list each round, so that no variant always
follows the same one.

Usage: /usr/bin/python3 bench/http/v2_binary.py --attnd build/attnd [--rounds 3]
           [--seconds 10] [--w3-requests 12]
"""

import argparse
import base64
import http.client
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_http_bench import HERE, start_attnd, stop_all  # noqa: E402


def b64(a):
    a = np.ascontiguousarray(a, dtype="<f4")
    return {"dtype": "float32", "shape": list(a.shape),
            "data": base64.b64encode(a.tobytes()).decode()}


def write_model(path, e, h, seed):
    """A packed MHA model of width e and h heads (random weights; both protocols use it)."""
    rng = np.random.default_rng(seed)
    tensors = {"in_proj_weight": rng.uniform(-0.05, 0.05, (3 * e, e)).astype("<f4"),
               "out_proj.weight": rng.uniform(-0.05, 0.05, (e, e)).astype("<f4")}
    header, at, blobs = {"__metadata__": {"num_heads": str(h)}}, 0, []
    for name, a in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [at, at + a.nbytes]}
        blobs.append(a.tobytes())
        at += a.nbytes
    js = json.dumps(header).encode()
    js += b" " * (-len(js) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)) + js + b"".join(blobs))


def v2_body(x, params, binary, extra_inputs=()):
    """(body, header length or None) of a v2 request for query x (and int32 inputs)."""
    inputs, raw = [], []
    for name, a, dt in (("query", x, "FP32"),) + tuple(extra_inputs):
        t = {"name": name, "shape": list(a.shape), "datatype": dt}
        if binary:
            b = np.ascontiguousarray(a, "<f4" if dt == "FP32" else "<i4").tobytes()
            t["parameters"] = {"binary_data_size": len(b)}
            raw.append(b)
        else:
            t["data"] = a.ravel().tolist()
        inputs.append(t)
    js = json.dumps({"inputs": inputs,
                     "parameters": dict(params, binary_data_output=binary)}).encode()
    return js + b"".join(raw), (len(js) if binary else None)


def post(port, path, body, hl=None):
    headers = {"Inference-Header-Content-Length": str(hl)} if hl else \
        {"Content-Type": "application/json"}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.monotonic()
    c.request("POST", path, body, headers)
    r = c.getresponse()
    data = r.read()
    dt = time.monotonic() - t0
    hlen = r.getheader("Inference-Header-Content-Length")
    c.close()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status} from {path}: {data[:300]!r}")
    return dt, data, hlen


def outputs_v1(data):
    j = json.loads(data)
    got = {}
    for k in ("output", "weights"):
        if k in j:
            t = j[k]
            got[k] = np.frombuffer(base64.b64decode(t["data"]), "<f4").reshape(t["shape"]) \
                if isinstance(t, dict) else np.asarray(t, np.float32)
    return got


def outputs_v2(data, hlen):
    n = int(hlen) if hlen else len(data)
    j, raw, at, got = json.loads(data[:n]), data[n:], 0, {}
    for o in j["outputs"]:
        size = o.get("parameters", {}).get("binary_data_size")
        if size is not None:
            got[o["name"]] = np.frombuffer(raw[at:at + size], "<f4").reshape(o["shape"])
            at += size
        else:
            got[o["name"]] = np.asarray(o["data"], np.float32).reshape(o["shape"])
    return got


def same_bits(a, b):
    return a.keys() == b.keys() and all(
        a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes() for k in a)


def wrk(port, path, body_file, hl, seconds):
    env = dict(os.environ, BODY=body_file, HEADER_LENGTH=str(hl or ""))
    cmd = ["wrk", "-t2", "-c64", f"-d{seconds}s", "--timeout", "30s", "-s",
           os.path.join(HERE, "post_v2.lua"), f"http://127.0.0.1:{port}{path}"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env,
                         timeout=seconds + 120).stdout
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if bad or re.search(r"Socket errors", out):
        raise RuntimeError(f"wrk on {path}: {out[-500:]}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def cpu_seconds(pid):
    """user + system CPU seconds of a process, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def answered(port):
    """Requests attnd answered 200 on the job routes, from /metrics."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    return sum(float(v) for v in re.findall(
        r'^attnd_http_requests_total\{route="(?:/v1/attention|/v2/models/\{name\}/infer)",'
        r'code="200"\} (\S+)', text, re.M))


def log_times(log, path, since):
    """parse_ms and encode_ms of the access lines for path after byte offset since."""
    text = open(log).read()[since:]
    lines = [ln for ln in text.splitlines() if f" path={path} status=200 " in ln]
    get = lambda ln, k: float(re.search(rf" {k}=([\d.]+)", ln).group(1))  # noqa: E731
    return [get(ln, "parse_ms") for ln in lines], [get(ln, "encode_ms") for ln in lines]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attnd", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10, help="per wrk run")
    ap.add_argument("--w3-requests", type=int, default=12, help="per protocol and round")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        print("v2_binary: wrk is missing (Debian package wrk)", file=sys.stderr)
        return 1
    work = tempfile.mkdtemp(prefix="attnd-v2-bin-")
    models = os.path.join(work, "models")
    os.makedirs(models)
    write_model(os.path.join(models, "w3.safetensors"), 768, 12, 3)
    log = os.path.join(work, "attnd.log")
    proc, port, kernel = start_attnd(os.path.abspath(args.attnd), ["--models", models], log)
    rng = np.random.default_rng(7)
    try:
        # W1-like: the demo model, per-head weights.
        x1 = rng.uniform(-1, 1, (16, 64)).astype(np.float32)
        w1 = {}
        w1["v1 JSON"] = ("/v1/attention", json.dumps(
            {"model": "demo", "query": x1.astype(np.float64).tolist(),
             "need_weights": "per_head"}).encode(), None)
        w1["v1 base64"] = ("/v1/attention", json.dumps(
            {"model": "demo", "query": b64(x1), "need_weights": "per_head",
             "encoding": "base64"}).encode(), None)
        for binary, name in ((False, "v2 JSON"), (True, "v2 binary")):
            body, hl = v2_body(x1.astype(np.float64) if not binary else x1,
                               {"need_weights": "per_head"}, binary)
            w1[name] = ("/v2/models/demo/infer", body, hl)
        # W3-like: the w3 model, key lengths, output only.
        x3 = rng.standard_normal((4, 512, 768)).astype(np.float32)
        kl = np.array([512, 448, 384, 320], dtype=np.int32)
        w3 = {"v1 base64": ("/v1/attention", json.dumps(
            {"model": "w3", "query": b64(x3), "key_lengths": kl.tolist(),
             "encoding": "base64"}).encode(), None)}
        body, hl = v2_body(x3, {}, True, (("key_lengths", kl, "INT32"),))
        w3["v2 binary"] = ("/v2/models/w3/infer", body, hl)

        # The same bits both ways.
        for name, runs in (("W1", w1), ("W3", w3)):
            answers = {}
            for k, (path, body, hl) in runs.items():
                _, data, hlen = post(port, path, body, hl)
                answers[k] = outputs_v2(data, hlen) if path.startswith("/v2") else \
                    outputs_v1(data)
            first = next(iter(answers.values()))
            if not all(same_bits(first, a) for a in answers.values()):
                print(f"v2_binary: {name}: the answers differ", file=sys.stderr)
                return 1
        print(f"attnd on :{port}, OPENBLAS_CORETYPE={kernel}; W1 and W3 answers agree bit for "
              "bit across protocols", file=sys.stderr, flush=True)

        files = {}
        for k, (path, body, hl) in w1.items():
            files[k] = os.path.join(work, k.replace(" ", "_") + ".body")
            with open(files[k], "wb") as f:
                f.write(body)
        load0 = os.getloadavg()[0]
        rps, cpu, lat, parse, enc = {}, {}, {}, {}, {}
        for rnd in range(args.rounds):
            order = list(w1)
            order = order[rnd % len(order):] + order[:rnd % len(order)]  # no fixed position
            for k in order:
                path, body, hl = w1[k]
                c0, n0 = cpu_seconds(proc.pid), answered(port)
                r = wrk(port, path, files[k], hl, args.seconds)
                c1, n1 = cpu_seconds(proc.pid), answered(port)
                rps.setdefault(k, []).append(r)
                cpu.setdefault(k, []).append((c1 - c0) / max(n1 - n0, 1) * 1e6)
                print(f"round {rnd + 1} W1 {k}: {r:.0f} req/s, {cpu[k][-1]:.0f} us of attnd CPU "
                      "per request", file=sys.stderr, flush=True)
            for k, (path, body, hl) in w3.items():
                post(port, path, body, hl)  # warm-up
                since = os.path.getsize(log)
                times = [post(port, path, body, hl)[0] * 1e3 for _ in range(args.w3_requests)]
                time.sleep(0.2)  # the access lines are written after the replies
                p, e = log_times(log, path, since)
                lat.setdefault(k, []).append(statistics.median(times))
                parse.setdefault(k, []).append(statistics.median(p))
                enc.setdefault(k, []).append(statistics.median(e))
                print(f"round {rnd + 1} W3 {k}: {lat[k][-1]:.1f} ms per request, parse "
                      f"{parse[k][-1]:.2f} ms, encode {enc[k][-1]:.2f} ms", file=sys.stderr,
                      flush=True)
        load1 = os.getloadavg()[0]
    finally:
        stop_all([proc])
        shutil.rmtree(work, ignore_errors=True)

    med = statistics.median
    print(f"attnd {os.path.basename(args.attnd)}, {os.cpu_count()} cores, {args.rounds} "
          f"interleaved rounds; load average (1 min) at start / end {load0:.2f} / {load1:.2f}. "
          "Medians of the rounds.")
    print()
    print(f"W1-like (N 1, L 16, E 64, H 4, per-head weights), wrk -t2 -c64 -d{args.seconds}s:")
    print()
    print("| protocol, tensors | req/s | rounds | req/s vs v1 base64 (median of the rounds' "
          "ratios) | attnd CPU us per request | rounds |")
    print("|---|--:|---|--:|--:|---|")
    for k in w1:
        ratio = med([a / b for a, b in zip(rps[k], rps["v1 base64"])])
        print(f"| {k} | {med(rps[k]):.0f} | " + ", ".join(f"{r:.0f}" for r in rps[k]) +
              f" | {ratio:.2f} | {med(cpu[k]):.0f} | " +
              ", ".join(f"{c:.0f}" for c in cpu[k]) + " |")
    print()
    print(f"W3-like (N 4, L 512, E 768, H 12, key_lengths, output only), one client, "
          f"{args.w3_requests} requests per protocol and round:")
    print()
    print("| protocol, tensors | ms per request | attnd parse ms | attnd encode ms | "
          "rounds (ms per request) |")
    print("|---|--:|--:|--:|---|")
    for k in w3:
        print(f"| {k} | {med(lat[k]):.1f} | {med(parse[k]):.2f} | {med(enc[k]):.2f} | " +
              ", ".join(f"{x:.1f}" for x in lat[k]) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
