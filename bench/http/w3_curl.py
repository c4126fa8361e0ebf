#!/usr/bin/python3
"""w3_curl.py - W3 over HTTP with curl (base64 in and out, the registered E=768 H=12 model "w3"),
for one or more attnd binaries side by side (say, before and after a change), in interleaved
rounds.

`make bench-http` (run_http_bench.py) measures the same against one attnd; this script is for
comparing binaries. Each binary gets its own attnd, started once with --models holding
run_http_bench.py's W3 model. A round sends, to every binary in turn, one warm-up and then
--requests requests one at a time with curl (a new process and connection each), and takes
curl's time_total beside the compute_ms, parse_ms and encode_ms attnd logs for the same request
(matched by X-Request-Id). The report gives, per binary, the medians over all requests and the
median of each round's curl total / compute_ms (the goal of issue 12: at most 1.3).

Usage: /usr/bin/python3 bench/http/w3_curl.py --attnd NAME=build/attnd [--attnd ...]
           [--rounds 3] [--requests 10]
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_http_bench import curl_w3, start_attnd, stop_all, w3_model, workloads  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attnd", action="append", required=True, help="NAME=PATH, repeatable")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=10, help="per binary and round")
    args = ap.parse_args()
    if not shutil.which("curl"):
        print("w3_curl: curl is missing (Debian package curl)", file=sys.stderr)
        return 1
    bins = [a.split("=", 1) if "=" in a else (a, a) for a in args.attnd]
    work = tempfile.mkdtemp(prefix="attnd-w3-curl-")
    procs, ports, logs = [], {}, {}
    rows, ratios = {}, {}
    try:
        models = os.path.join(work, "models")
        os.mkdir(models)
        w3_model(os.path.join(models, "w3.safetensors"))
        body = os.path.join(work, "W3-model.json")
        with open(body, "wb") as f:
            f.write(json.dumps({"model": "w3", "query": workloads()["W3"]["query"],
                                "key_lengths": [512, 448, 384, 320],
                                "encoding": "base64"}).encode())
        for name, path in bins:
            logs[name] = os.path.join(work, f"{name}.log")
            p, port, kernel = start_attnd(path, ["--models", models], logs[name])
            procs.append(p)
            ports[name] = port
            print(f"{name}: {path} on :{port}, OPENBLAS_CORETYPE={kernel}", file=sys.stderr,
                  flush=True)
        load0 = os.getloadavg()[0]
        for rnd in range(args.rounds):
            for name, _ in bins:
                got = curl_w3(ports[name], body, logs[name], args.requests)
                if len(got) != args.requests:
                    print(f"w3_curl: {name}: {len(got)} of {args.requests} requests logged",
                          file=sys.stderr)
                    return 1
                rows.setdefault(name, []).extend(got)
                r = statistics.median(x["total_ms"] / x["compute_ms"] for x in got)
                ratios.setdefault(name, []).append(r)
                print(f"round {rnd + 1} {name}: curl total / compute_ms {r:.3f}", file=sys.stderr,
                      flush=True)
        load1 = os.getloadavg()[0]
    finally:
        stop_all(procs)
        shutil.rmtree(work, ignore_errors=True)

    print(f"W3 with curl, {args.requests} requests per binary and round, {args.rounds} "
          f"interleaved rounds; {os.cpu_count()} cores; load average (1 min) at start / end "
          f"{load0:.2f} / {load1:.2f}. Medians over all requests, and of the rounds' ratios.")
    print()
    print("| attnd | curl total ms | parse ms | compute ms | encode ms | "
          "**curl total / compute_ms** | rounds |")
    print("|---|--:|--:|--:|--:|--:|---|")
    for name, _ in bins:
        med = {k: statistics.median(x[k] for x in rows[name])
               for k in ("total_ms", "parse_ms", "compute_ms", "encode_ms")}
        print(f"| {name} | {med['total_ms']:.1f} | {med['parse_ms']:.2f} | "
              f"{med['compute_ms']:.1f} | {med['encode_ms']:.2f} | "
              f"**{statistics.median(ratios[name]):.2f}** | "
              + ", ".join(f"{r:.2f}" for r in ratios[name]) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
