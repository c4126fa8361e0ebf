#!/usr/bin/python3
"""w1_encodings.py - W1 over HTTP with wrk, JSON arrays in and out against base64 in and out, for
one or more attnd binaries side by side (say, before and after a change), in interleaved rounds.

`make bench-http` (run_http_bench.py) measures the same two against one attnd, beside the peer;
this script is for comparing binaries. W1 is run_http_bench.py's (w1_bodies): query (16, 64)
uniform in [-1, 1) rounded to 6 decimals, params
{"init": "random", "seed": 24301, "num_heads": 4}, need_weights "per_head". The base64 request
carries the same query as float32 and asks for "encoding": "base64". Before timing, each binary's
two answers are checked to hold the same float32 values bit for bit (the JSON numbers read back
exactly). Each round runs wrk (-t2, 64 connections) on every binary and encoding in turn; the
report gives the median req/s of the rounds, the median of the rounds' JSON/base64 ratios, and
attnd's own CPU time per request (user + system, from /proc, over each wrk run), which other
load on a shared machine disturbs less than req/s.

Usage: /usr/bin/python3 bench/http/w1_encodings.py --attnd NAME=build/attnd [--attnd ...]
           [--rounds 3] [--seconds 10]
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_http_bench import (cpu_seconds, from_b64, post, requests_done, start_attnd,  # noqa: E402
                            stop_all, w1_bodies, wrk)


def same_values(a, b):
    """True when two answers hold bit-identical float32 output and weights."""
    ja, jb = json.loads(a), json.loads(b)
    for key in ("output", "weights"):
        x = np.asarray(from_b64(ja[key]), dtype=np.float32)
        y = np.asarray(from_b64(jb[key]), dtype=np.float32)
        if x.shape != y.shape or x.tobytes() != y.tobytes():
            return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attnd", action="append", required=True, help="NAME=PATH, repeatable")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10, help="per wrk run")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        print("w1_encodings: wrk is missing (Debian package wrk)", file=sys.stderr)
        return 1
    bins = [a.split("=", 1) if "=" in a else (a, a) for a in args.attnd]
    work = tempfile.mkdtemp(prefix="attnd-w1-enc-")
    procs, ports, pids = [], {}, {}
    rps, cpu = {}, {}
    try:
        files = {}
        for enc, body in w1_bodies().items():
            files[enc] = os.path.join(work, f"W1-{enc}.json")
            with open(files[enc], "wb") as f:
                f.write(body)
        for name, path in bins:
            p, port, kernel = start_attnd(path, [], os.path.join(work, f"{name}.log"))
            procs.append(p)
            ports[name] = port
            pids[name] = p.pid
            answers = {enc: post(port, open(files[enc], "rb").read())[1] for enc in files}
            if not same_values(answers["json"], answers["base64"]):
                print(f"w1_encodings: {name}: the JSON and base64 answers differ", file=sys.stderr)
                return 1
            print(f"{name}: {path} on :{port}, OPENBLAS_CORETYPE={kernel}; JSON and base64 "
                  "answers agree bit for bit", file=sys.stderr, flush=True)
        load0 = os.getloadavg()[0]
        for rnd in range(args.rounds):
            for name, _ in bins:
                for enc in ("json", "base64"):
                    c0, n0 = cpu_seconds(pids[name]), requests_done(ports[name])
                    r = wrk(ports[name], files[enc], args.seconds)
                    c1, n1 = cpu_seconds(pids[name]), requests_done(ports[name])
                    if r["non2xx"] or r["errors"]:
                        print(f"w1_encodings: {name} {enc}: {r}", file=sys.stderr)
                        return 1
                    rps.setdefault((name, enc), []).append(r["rps"])
                    cpu.setdefault((name, enc), []).append((c1 - c0) / max(n1 - n0, 1) * 1e6)
                    print(f"round {rnd + 1} {name} {enc}: {r['rps']:.0f} req/s, "
                          f"{cpu[name, enc][-1]:.0f} us of attnd CPU per request", file=sys.stderr,
                          flush=True)
        load1 = os.getloadavg()[0]
    finally:
        stop_all(procs)
        shutil.rmtree(work, ignore_errors=True)

    print(f"W1 over HTTP, wrk -t2 -c64 -d{args.seconds}s, {args.rounds} interleaved rounds; "
          f"{os.cpu_count()} cores; load average (1 min) at start / end {load0:.2f} / "
          f"{load1:.2f}. Medians of the rounds.")
    print()
    print("| attnd | JSON req/s | base64 req/s | JSON / base64 | rounds' JSON / base64 | "
          "attnd CPU us per request, JSON | base64 |")
    print("|---|--:|--:|--:|---|--:|--:|")
    for name, _ in bins:
        j, b = rps[name, "json"], rps[name, "base64"]
        ratios = [x / y for x, y in zip(j, b)]
        print(f"| {name} | {statistics.median(j):.0f} | {statistics.median(b):.0f} | "
              f"**{statistics.median(ratios):.2f}** | "
              + ", ".join(f"{r:.2f}" for r in ratios) + f" | "
              f"{statistics.median(cpu[name, 'json']):.0f} | "
              f"{statistics.median(cpu[name, 'base64']):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
