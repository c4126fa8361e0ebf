#!/usr/bin/python3
"""measure_threads.py - how attnd's workers and its compute pool should share the cores.

Starts build/attnd once per thread layout (--threads workers, --pool-threads helpers) on
127.0.0.1:0 and measures, through HTTP:
  W3 single   one client, W3 (N 4, L 512, E 768, H 12, key_lengths 512/448/384/320), base64 in
              and out: median latency and compute_ms of the reply's usage;
  W3 pairs    two clients at once, W3 each: jobs per second;
  W1 flood    wrk, 64 connections, W1 (N 1, L 16, E 64, H 4, demo model, per-head weights,
              JSON): requests per second and p99 latency;
  W2s flood   wrk, 64 connections, N 1, L 32, E 256, H 8, base64: requests per second.
Not part of make test: it is how the choice in server/workers.c was made. Loopback only,
bounded in time (about a minute per layout).

Each layout runs once per round, the rounds interleaved, and the best of the rounds is kept: on a
shared machine other load only ever slows a run down.

Usage: measure_threads.py --attnd build/attnd [--layouts 2:1,2:0,1:1] [--seconds 4] [--rounds 3]
"""

import argparse
import base64
import http.client
import json
import os
import re
import subprocess
import tempfile
import threading
import time

import numpy as np


def b64(a):
    a = np.ascontiguousarray(a, dtype="<f4")
    return {"dtype": "float32", "shape": list(a.shape),
            "data": base64.b64encode(a.tobytes()).decode()}


def start(binary, workers, helpers, log):
    f = open(log, "wb")
    p = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--threads", str(workers),
                          "--pool-threads", str(helpers), "--max-queue", "1024"],
                         stdout=f, stderr=subprocess.STDOUT)
    f.close()
    for _ in range(500):
        m = re.search(r"listening .*port=(\d+)\n", open(log).read())
        if m and "ready" in open(log).read():
            return p, int(m.group(1))
        time.sleep(0.02)
    p.kill()
    raise RuntimeError("attnd did not start")


def post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    t0 = time.monotonic()
    c.request("POST", path, body, {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    dt = time.monotonic() - t0
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {data[:300]}")
    return dt, json.loads(data)


def wrk(port, body, seconds, conns=64):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as bf:
        bf.write(body)
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as lf:
        lf.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                 f'local f = io.open("{bf.name}", "r"); wrk.body = f:read("*a"); f:close()\n')
    out = subprocess.run(["wrk", "-t2", f"-c{conns}", f"-d{seconds}s", "--latency", "-s",
                          lf.name, f"http://127.0.0.1:{port}/v1/attention"],
                         capture_output=True, text=True, timeout=seconds + 60).stdout
    os.unlink(bf.name)
    os.unlink(lf.name)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p99 = re.search(r"99%\s+([\d.]+)(\w+)", out)
    p99ms = float(p99.group(1)) * {"us": 1e-3, "ms": 1, "s": 1e3}[p99.group(2)]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, p99ms, int(non2xx.group(1)) if non2xx else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attnd", required=True)
    ap.add_argument("--layouts", default="2:1,2:0,1:1")
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    w3 = json.dumps({"query": b64(rng.standard_normal((4, 512, 768))),
                     "params": {"init": "random", "seed": 3, "num_heads": 12},
                     "key_lengths": [512, 448, 384, 320], "encoding": "base64"})
    w1 = json.dumps({"query": rng.uniform(-1, 1, (16, 64)).round(6).tolist(),
                     "need_weights": "per_head"})
    w2s = json.dumps({"query": b64(rng.standard_normal((1, 32, 256))),
                      "params": {"init": "random", "seed": 5, "num_heads": 8},
                      "encoding": "base64"})
    print(f"cores: {os.cpu_count()}; {args.rounds} interleaved rounds; best of the rounds "
          f"(other load only ever slows a run down)")
    best = {}
    for rnd in range(args.rounds):
        for layout in args.layouts.split(","):
            workers, helpers = (int(x) for x in layout.split(":"))
            with tempfile.TemporaryDirectory() as td:
                p, port = start(args.attnd, workers, helpers, os.path.join(td, "log"))
                try:
                    for _ in range(2):
                        post(port, "/v1/attention", w3)
                    singles = [post(port, "/v1/attention", w3) for _ in range(4)]
                    lat = min(s[0] for s in singles) * 1e3
                    comp = min(s[1]["usage"]["compute_ms"] for s in singles)
                    done = []
                    t0 = time.monotonic()
                    ths = [threading.Thread(target=lambda: done.extend(
                        post(port, "/v1/attention", w3) for _ in range(3))) for _ in range(2)]
                    for t in ths:
                        t.start()
                    for t in ths:
                        t.join()
                    pairs = len(done) / (time.monotonic() - t0)
                    w1r = wrk(port, w1, args.seconds)
                    w2r = wrk(port, w2s, args.seconds)
                finally:
                    p.terminate()
                    p.wait(timeout=60)
            b = best.setdefault(layout, [1e9, 1e9, 0, (0, 0, 0), (0, 0, 0)])
            b[0], b[1], b[2] = min(b[0], lat), min(b[1], comp), max(b[2], pairs)
            b[3], b[4] = max(b[3], w1r), max(b[4], w2r)
            print(f"round {rnd + 1} {layout}: W3 {lat:.0f} ms ({comp:.0f} compute), pairs "
                  f"{pairs:.2f}/s, W1 {w1r[0]:.0f}/s, W2s {w2r[0]:.0f}/s", flush=True)
    print("| workers:helpers | W3 single ms (compute ms) | W3 pairs jobs/s | W1 req/s (p99 ms) "
          "| W2s req/s (p99 ms) |")
    print("|---|--:|--:|--:|--:|")
    for layout, b in best.items():
        print(f"| {layout} | {b[0]:.1f} ({b[1]:.1f}) | {b[2]:.2f} | {b[3][0]:.0f} ({b[3][1]:.1f})"
              f" | {b[4][0]:.0f} ({b[4][1]:.1f}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
