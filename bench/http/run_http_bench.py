#!/usr/bin/python3
"""run_http_bench.py - attnd against the PyTorch peer service (bench/peer/peer.py), side by side
over HTTP on loopback, in one run: `make bench-http`.

Starts build/attnd (default flags: batching on), a second attnd with --batch-window-us 0, and the
peer (uvicorn, 2 workers, one torch thread each) with the OpenBLAS core attnd's start-up log
names ("blas kernel=..."). Checks once that both answer every workload alike (outputs and
weights to 1e-4), then measures:
  W1        JSON, N 1, L 16, E 64, H 4, per-head weights: wrk, 64 connections;
  W2-small  base64, N 1, L 32, E 256, H 8: wrk, 64 connections; attnd with batching on and off;
  W3        base64, N 4, L 512, E 768, H 12, key_lengths 512/448/384/320: one client;
  W4        base64, N 1, L 4096, E 512, H 8, causal: one client; attnd's peak RSS (VmHWM).
Every request names its weights as params {"init": "random", "seed", "num_heads"} (the peer
caches the module it builds for them; attnd makes them per request, or once per batch).
Writes a markdown report with the goals evaluated (reported, not asserted: a MISS does not fail
the run). Exits non-zero when a server fails to start, answers wrongly, or a tool is missing.
Loopback only, bounded in time (about 4 minutes with the defaults).

Usage: /usr/bin/python3 bench/http/run_http_bench.py --attnd build/attnd
           [--out build/bench/http_results.md] [--seconds 10]
"""

import argparse
import base64
import datetime
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"
TOL = 1e-4


def b64(a):
    a = np.ascontiguousarray(a, dtype="<f4")
    return {"dtype": "float32", "shape": list(a.shape),
            "data": base64.b64encode(a.tobytes()).decode()}


def from_b64(t):
    if isinstance(t, dict):
        return np.frombuffer(base64.b64decode(t["data"]), "<f4").reshape(t["shape"])
    return np.asarray(t, dtype=np.float64)


def workloads():
    rng = np.random.default_rng(7)
    return {
        "W1": {"query": rng.uniform(-1, 1, (16, 64)).round(6).tolist(),
               "params": {"init": "random", "seed": 24301, "num_heads": 4},
               "need_weights": "per_head"},
        "W2-small": {"query": b64(rng.standard_normal((1, 32, 256))),
                     "params": {"init": "random", "seed": 5, "num_heads": 8},
                     "encoding": "base64"},
        "W3": {"query": b64(rng.standard_normal((4, 512, 768))),
               "params": {"init": "random", "seed": 3, "num_heads": 12},
               "key_lengths": [512, 448, 384, 320], "encoding": "base64"},
        "W4": {"query": b64(rng.standard_normal((1, 4096, 512))),
               "params": {"init": "random", "seed": 4, "num_heads": 8},
               "causal": True, "encoding": "base64"},
    }


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(port, path, proc, secs=60):
    t0 = time.monotonic()
    while time.monotonic() - t0 < secs:
        if proc.poll() is not None:
            raise RuntimeError(f"the server on port {port} exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", path)
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the server on port {port} did not answer {path} in {secs} s")


def start_attnd(binary, extra, log):
    f = open(log, "wb")
    p = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--max-queue", "1024"] + extra,
                         stdout=f, stderr=subprocess.STDOUT)
    f.close()
    port, t0 = 0, time.monotonic()
    while not port and time.monotonic() - t0 < 30:
        m = re.search(r"listening .*port=(\d+)\n", open(log).read())
        port = int(m.group(1)) if m else 0
        time.sleep(0.05)
    if not port:
        p.kill()
        raise RuntimeError("attnd did not start: " + open(log).read()[-500:])
    wait_http(port, "/readyz", p)
    kernel = re.search(r"blas .*kernel=(\w+)", open(log).read()).group(1)
    return p, port, kernel


def start_peer(coretype, log):
    port = free_port()
    env = dict(os.environ, OPENBLAS_CORETYPE=coretype, OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    f = open(log, "wb")
    p = subprocess.Popen([PY, "-m", "uvicorn", "bench.peer.peer:app", "--workers", "2",
                          "--host", "127.0.0.1", "--port", str(port), "--no-access-log"],
                         cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT)
    f.close()
    wait_http(port, "/healthz", p)
    return p, port


def post(port, body, timeout=600):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.monotonic()
    c.request("POST", "/v1/attention", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    dt = time.monotonic() - t0
    c.close()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status} from port {port}: {data[:300]!r}")
    return dt, data


def check_same(name, a, b):
    """Max abs difference of output and weights between two answers; raises past TOL."""
    ja, jb = json.loads(a), json.loads(b)
    worst = 0.0
    for key in ("output", "weights"):
        if (key in ja) != (key in jb):
            raise RuntimeError(f"{name}: {key} in one answer only")
        if key in ja:
            x, y = from_b64(ja[key]), from_b64(jb[key])
            if x.shape != y.shape:
                raise RuntimeError(f"{name}: {key} shapes {x.shape} vs {y.shape}")
            worst = max(worst, float(np.max(np.abs(x.astype(np.float64) - y))))
    if not worst <= TOL:
        raise RuntimeError(f"{name}: attnd and the peer differ by {worst:g} (> {TOL:g})")
    return worst


def wrk(port, body_file, seconds, conns=64):
    env = dict(os.environ, BODY=body_file)
    cmd = ["wrk", "-t2", f"-c{conns}", f"-d{seconds}s", "--latency", "--timeout", "30s",
           "-s", os.path.join(HERE, "post.lua"), f"http://127.0.0.1:{port}/v1/attention"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env,
                         timeout=seconds + 120).stdout

    def ms(pct):
        m = re.search(rf"\s{pct}%\s+([\d.]+)(us|ms|s)\b", out)
        return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errs = re.search(r"Socket errors: (.*)", out)
    return {"rps": rps, "p50": ms(50), "p99": ms(99), "non2xx": int(bad.group(1)) if bad else 0,
            "errors": errs.group(1) if errs else ""}


def single(port, body, n, max_secs):
    post(port, body)  # warm-up
    times = []
    t0 = time.monotonic()
    while len(times) < n and (len(times) < 3 or time.monotonic() - t0 < max_secs):
        times.append(post(port, body)[0])
    t = np.array(times) * 1e3
    return {"rps": len(t) / (t.sum() / 1e3), "p50": float(np.percentile(t, 50)),
            "p99": float(np.percentile(t, 99)), "n": len(t)}


def vm_hwm_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def batch_mean(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    s = float(re.search(r"^attnd_batch_jobs_sum (\S+)", text, re.M).group(1))
    n = float(re.search(r"^attnd_batch_jobs_count (\S+)", text, re.M).group(1))
    return s / n if n else 0.0


def goal(ok, text):
    return f"- {'PASS' if ok else 'MISS'}  {text}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attnd", required=True)
    ap.add_argument("--out", default="build/bench/http_results.md")
    ap.add_argument("--seconds", type=int, default=10, help="per wrk run")
    args = ap.parse_args()
    for tool in ("wrk",):
        if not shutil.which(tool):
            print(f"run_http_bench: {tool} is missing (Debian package {tool})", file=sys.stderr)
            return 1
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        print("run_http_bench: FastAPI/uvicorn missing (python3-fastapi python3-uvicorn)",
              file=sys.stderr)
        return 1
    work = tempfile.mkdtemp(prefix="attnd-bench-http-")
    procs = []
    try:
        bodies, files = {}, {}
        for name, body in workloads().items():
            bodies[name] = json.dumps(body).encode()
            files[name] = os.path.join(work, name + ".json")
            with open(files[name], "wb") as f:
                f.write(bodies[name])
        a, a_port, kernel = start_attnd(args.attnd, [], os.path.join(work, "attnd.log"))
        procs.append(a)
        b, b_port, _ = start_attnd(args.attnd, ["--batch-window-us", "0"],
                                   os.path.join(work, "attnd-nobatch.log"))
        procs.append(b)
        p, p_port = start_peer(kernel, os.path.join(work, "peer.log"))
        procs.append(p)
        load0 = os.getloadavg()[0]
        print(f"attnd :{a_port} (batching), :{b_port} (no batching), peer :{p_port}; "
              f"OPENBLAS_CORETYPE={kernel}", file=sys.stderr, flush=True)

        # The same work: one answer of each workload from each side, to 1e-4.
        checks = {}
        for name in ("W4", "W3", "W2-small", "W1"):
            checks[name] = check_same(name, post(a_port, bodies[name])[1],
                                      post(p_port, bodies[name])[1])
            print(f"check {name}: max |attnd - peer| = {checks[name]:.2g}", file=sys.stderr,
                  flush=True)

        res = {}
        # Single client: W4 first, so that attnd's peak RSS is W4's (and start-up's).
        res["W4", "attnd"] = single(a_port, bodies["W4"], 8, 20)
        rss_w4 = vm_hwm_mib(a.pid)
        res["W4", "peer"] = single(p_port, bodies["W4"], 4, 20)
        res["W3", "attnd"] = single(a_port, bodies["W3"], 15, 15)
        res["W3", "peer"] = single(p_port, bodies["W3"], 8, 15)
        print("single-client runs done", file=sys.stderr, flush=True)
        # Floods, 64 connections; W2-small on and off interleaved over two rounds (best kept:
        # other load on a shared machine only ever slows a run down).
        res["W1", "attnd"] = wrk(a_port, files["W1"], args.seconds)
        res["W1", "peer"] = wrk(p_port, files["W1"], args.seconds)
        for rnd in range(2):
            for key, port in (("attnd", a_port), ("attnd-nobatch", b_port)):
                r = wrk(port, files["W2-small"], args.seconds)
                if ("W2-small", key) not in res or r["rps"] > res["W2-small", key]["rps"]:
                    res["W2-small", key] = r
        mean_batch = batch_mean(a_port)
        res["W2-small", "peer"] = wrk(p_port, files["W2-small"], args.seconds)
        load1 = os.getloadavg()[0]
        print("floods done", file=sys.stderr, flush=True)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)

    bad = [f"{k[0]} {k[1]}: {v['non2xx']} non-2xx, errors {v['errors']}"
           for k, v in res.items() if v.get("non2xx")]
    if bad:
        print("run_http_bench: failed requests: " + "; ".join(bad), file=sys.stderr)
        return 1
    ratio = {w: res[w, "attnd"]["rps"] / res[w, "peer"]["rps"]
             for w in ("W1", "W2-small", "W3", "W4")}
    batching = res["W2-small", "attnd"]["rps"] / res["W2-small", "attnd-nobatch"]["rps"]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = [
        f"Run {now} by `bench/http/run_http_bench.py`; {os.cpu_count()} cores, "
        f"OPENBLAS_CORETYPE={kernel} on both sides; load average (1 min) at start / end "
        f"{load0:.2f} / {load1:.2f}. wrk: 2 threads, {args.seconds} s per run. Single client: "
        "sequential requests on new connections after one warm-up; req/s = requests / total "
        "time.",
        "",
        "| workload | client | attnd req/s | attnd p50 ms | attnd p99 ms | peer req/s "
        "| peer p50 ms | peer p99 ms | attnd / peer |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    clients = {"W1": "wrk, 64 conn", "W2-small": "wrk, 64 conn", "W3": "1 client",
               "W4": "1 client"}
    for w in ("W1", "W2-small", "W3", "W4"):
        x, y = res[w, "attnd"], res[w, "peer"]
        lines.append(f"| {w} | {clients[w]} | {x['rps']:.1f} | {x['p50']:.2f} | {x['p99']:.2f} "
                     f"| {y['rps']:.1f} | {y['p50']:.2f} | {y['p99']:.2f} | "
                     f"**{ratio[w]:.2f}x** |")
    x, y = res["W2-small", "attnd"], res["W2-small", "attnd-nobatch"]
    lines += [
        "",
        "| W2-small, wrk 64 conn (best of 2 interleaved rounds) | req/s | p50 ms | p99 ms |",
        "|---|--:|--:|--:|",
        f"| attnd, batching on (defaults; mean batch {mean_batch:.1f} jobs over the whole run) "
        f"| {x['rps']:.1f} | {x['p50']:.2f} | {x['p99']:.2f} |",
        f"| attnd, --batch-window-us 0 | {y['rps']:.1f} | {y['p50']:.2f} | {y['p99']:.2f} |",
        f"| on / off | **{batching:.2f}x** | | |",
        "",
        f"attnd peak RSS (VmHWM) after the W4 runs: {rss_w4:.1f} MiB. Single-client samples: "
        + ", ".join(f"{w} {res[w, s]['n']} ({s})" for w in ("W3", "W4")
                    for s in ("attnd", "peer")) + ".",
        "Correctness, one answer of each workload, max |attnd - peer| over output and weights: "
        + ", ".join(f"{w} {checks[w]:.1e}" for w in ("W1", "W2-small", "W3", "W4"))
        + f" (limit {TOL:g}).",
        "",
        "Goals (ratios from this run):",
        goal(ratio["W1"] >= 20, f"W1 attnd/peer req/s >= 20x: {ratio['W1']:.2f}x "
             f"({(ratio['W1'] / 20 - 1) * 100:+.0f}%)"),
        goal(ratio["W3"] >= 5, f"W3 attnd/peer >= 5x: {ratio['W3']:.2f}x "
             f"({(ratio['W3'] / 5 - 1) * 100:+.0f}%)"),
        goal(ratio["W4"] >= 8, f"W4 attnd/peer >= 8x: {ratio['W4']:.2f}x "
             f"({(ratio['W4'] / 8 - 1) * 100:+.0f}%)"),
        goal(rss_w4 <= 256, f"W4 attnd peak RSS <= 256 MiB: {rss_w4:.1f} MiB"),
        goal(batching >= 1.5, f"W2-small batching on/off >= 1.5x: {batching:.2f}x "
             f"({(batching / 1.5 - 1) * 100:+.0f}%)"),
    ]
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
