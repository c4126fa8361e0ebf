#!/usr/bin/python3
"""overload.py - attnd driven far above its capacity with wrk, on 127.0.0.1 only, bounded in
time (about a minute): `make overload`.

W1 of the benchmarks (the demo model, E = 64, H = 4, L = 16, per-head weights, JSON). W1's
bottleneck is the HTTP side (reading 1024 numbers and writing 2048 costs more than computing
them), so the queue is exercised by a second, compute-bound variant. Steps:
  1. W1 at rest, checked against a float64 reference of the demo model computed here (its
     weights are reproducible: api/api.h documents the splitmix64 stream);
  2. capacity, against a daemon with its default flags: wrk with 1 to 64 connections on W1;
     the load held is the highest rate whose p99 stays under P99_BOUND_MS with every answer
     200;
  3. W1 far above capacity: wrk with 256 connections (daemon: 2 workers, --max-queue 8, and
     --inline-max-flops 0 so that W1 goes through the queue: on its HTTP thread, the default,
     a job that small never waits in the queue, and 256 connections were held with p99 36 ms
     and no 503 at all, so the queue's refusals would go untested; and --share-jobs off,
     since wrk sends one body again and again and its copies would wait beside one job instead
     of in the queue), a
     probe sending one request every 20 ms, VmRSS sampled every 50 ms. Checked: only 200 and
     503, every 503 with Retry-After, no socket error or timeout, every 10th 200 right, the
     RSS under its value at rest + RSS_BOUND_MB, every answer within OVER_P99_BOUND_MS (p99: no
     queue grows), 503s decided within BUSY_SERVER_P99_MS of the request's arrival (the access
     log's total_ms; what the probe saw is reported); then a W1 answered 200
     within RECOVER_BOUND_MS and /readyz 200;
  4. compute-bound: SDPA at L = S = 2048, D = 8, Dv = 1 (base64 in, JSON out; about 8 ms of
     compute per job, small bodies and replies) against 1 worker, --max-queue 4, no batching,
     no shared jobs,
     64 connections: most of it refused, and a 503 reaches the probe within BUSY_P99_BOUND_MS
     (p99); the same checks of answers, RSS and recovery;
  5. the connection limit under load: wrk with 64 connections on W1 against --max-connections
     32, while a prober opens a new connection every 50 ms for /healthz or /readyz: at least
     95% of probes are answered 200 (the new connection takes an idle one's place: none waits
     in the kernel's backlog; a probe can lose its place to the churn of wrk's reconnections),
     wrk is still served, and the log names the evictions; the probes' times are reported;
  6. SIGTERM and exit status 0 for every daemon.
Prints the figures and a markdown section (--report FILE also writes it there). Exits 1 when
a check fails.

Usage: /usr/bin/python3 tests/reliability/overload.py --attnd build/attnd --work DIR
           [--report FILE] [--seconds 10]
"""

import argparse
import base64
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
P99_BOUND_MS = 50.0        # the p99 the held load must keep
OVER_P99_BOUND_MS = 1000.0 # every answer under W1 overload (256 connections), p99
BUSY_SERVER_P99_MS = 10.0  # a 503's arrival-to-answer time in the access log, p99
BUSY_P99_BOUND_MS = 100.0  # 503s reach the probe within this (p99), compute-bound case
RECOVER_BOUND_MS = 100.0   # the first request after the load
RSS_BOUND_MB = 64.0        # growth of VmRSS over its value at rest, under overload
MAX_QUEUE = 8
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


# ---- The demo model and W1 -----------------------------------------------------------------

def splitmix_uniform(seed, n):
    """The first n uniforms in [0, 1) of the splitmix64 stream of seed, as api/api.h says."""
    with np.errstate(over="ignore"):
        idx = np.arange(1, n + 1, dtype=np.uint64)
        z = np.uint64(seed) + idx * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = z ^ (z >> np.uint64(31))
    return (x >> np.uint64(40)).astype(np.float64) / float(1 << 24)


def demo_weights(e=64, seed=24301):
    u = splitmix_uniform(seed, 4 * e * e)
    a_in, a_out = np.sqrt(6.0 / (e + 3 * e)), np.sqrt(6.0 / (e + e))
    w_in = (a_in * (2 * u[:3 * e * e] - 1)).astype(np.float32).reshape(3 * e, e)
    w_out = (a_out * (2 * u[3 * e * e:] - 1)).astype(np.float32).reshape(e, e)
    return w_in.astype(np.float64), w_out.astype(np.float64)


def mha_reference(x, h=4):
    """nn.MultiheadAttention forward of the demo model on x (L, E), float64: output (L, E) and
    per-head weights (H, L, L)."""
    w_in, w_out = demo_weights(x.shape[1])
    e = x.shape[1]
    d = e // h
    q, k, v = (x @ w_in[i * e:(i + 1) * e].T for i in range(3))
    out = np.zeros_like(x)
    weights = np.zeros((h, x.shape[0], x.shape[0]))
    for i in range(h):
        s = q[:, i * d:(i + 1) * d] @ k[:, i * d:(i + 1) * d].T / np.sqrt(d)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        weights[i] = p
        out[:, i * d:(i + 1) * d] = p @ v[:, i * d:(i + 1) * d]
    return out @ w_out.T, weights


def sdpa_inputs(L, S, D, seed=11):
    """q (1, L, D), k (1, S, D), v (1, S, 1) as float32, uniform in [-1, 1)."""
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, (1, L, D)).astype(np.float32),
            rng.uniform(-1, 1, (1, S, D)).astype(np.float32),
            rng.uniform(-1, 1, (1, S, 1)).astype(np.float32))


def sdpa_reference(q, k, v):
    """softmax(q k^T / sqrt(D)) v in float64, (1, L, Dv)."""
    q, k, v = (t[0].astype(np.float64) for t in (q, k, v))
    x = q @ k.T / np.sqrt(q.shape[1])
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return (p @ v)[None]


def b64_tensor(a):
    """API v1's base64 tensor object of a float32 array."""
    return {"dtype": "float32", "shape": list(a.shape),
            "data": base64.b64encode(np.ascontiguousarray(a, dtype="<f4").tobytes()).decode()}


def w1_query(L=16):
    rng = np.random.default_rng(7)  # as bench/http: W1's query (at L = 16)
    return rng.uniform(-1, 1, (L, 64)).round(6)


# ---- The daemon ----------------------------------------------------------------------------

class Daemon:
    def __init__(self, attnd, log, args):
        self.log = log
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("ATTND_") or k.startswith("ATTND_BLAS_")}
        self.f = open(log, "wb")
        self.p = subprocess.Popen([attnd, "--listen", "127.0.0.1:0"] + args, stderr=self.f,
                                  stdout=self.f, env=env)
        self.port = None
        t0 = time.time()
        while time.time() - t0 < 20 and self.port is None:
            text = open(log, errors="replace").read()
            m = re.search(r"listening .*port=(\d+)", text)
            if m and re.search(r"^\S+ info ready$", text, re.M):  # before it, 503 not_ready
                self.port = int(m.group(1))
            elif self.p.poll() is not None:
                raise SystemExit(f"attnd exited at start; see {log}")
            time.sleep(0.02)
        if self.port is None:
            self.p.kill()
            raise SystemExit(f"attnd did not start in 20 s; see {log}")

    def rss_mb(self):
        try:
            for line in open(f"/proc/{self.p.pid}/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        except OSError:
            pass
        return 0.0

    def request(self, method, path, body=None, timeout=30):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        t0 = time.perf_counter()
        c.request(method, path, body=body,
                  headers={"Content-Type": "application/json"} if body else {})
        r = c.getresponse()
        data = r.read()
        ms = (time.perf_counter() - t0) * 1e3
        headers = dict(r.getheaders())
        c.close()
        return r.status, headers, data, ms

    def stop(self):
        self.p.terminate()
        try:
            return self.p.wait(60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return -1
        finally:
            self.f.close()


def wrk(port, body_path, expect_path, conns, seconds, every=10, path="/v1/attention"):
    env = dict(os.environ, OVERLOAD_BODY=body_path, OVERLOAD_EXPECT=expect_path,
               OVERLOAD_EVERY=str(every))
    threads = min(2, conns)
    cmd = ["wrk", "-t", str(threads), "-c", str(conns), "-d", f"{seconds}s", "--timeout", "10s",
           "-s", os.path.join(HERE, "overload.lua"), f"http://127.0.0.1:{port}{path}"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=seconds + 60)
    m = re.search(r"^overload: (\{.*\})$", out.stdout, re.M)
    if not m:
        raise SystemExit(f"wrk gave no result:\n{out.stdout}\n{out.stderr}")
    r = json.loads(m.group(1))
    r["rps"] = r["requests"] / r["seconds"] if r["seconds"] else 0.0
    shown = [os.path.relpath(c, os.path.dirname(os.path.dirname(HERE))) if c.startswith("/")
             else c for c in cmd[:-1]]
    r["cmd"] = " ".join(shown) + " http://127.0.0.1:PORT" + path
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnd", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--report")
    ap.add_argument("--seconds", type=int, default=10)
    a = ap.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("overload: wrk is missing (Debian package wrk)")
    os.makedirs(a.work, exist_ok=True)

    x = w1_query()
    body = json.dumps({"query": x.tolist(), "need_weights": "per_head"})
    body_path = os.path.join(a.work, "w1.json")
    open(body_path, "w").write(body)
    ref_out, ref_w = mha_reference(x.astype(np.float32).astype(np.float64))

    # 1, 2. At rest against the reference, then capacity, on a daemon with its defaults.
    d0 = Daemon(a.attnd, os.path.join(a.work, "capacity.log"), [])
    try:
        st, _, data, _ = d0.request("POST", "/v1/attention", body)
        r = json.loads(data) if st == 200 else {}
        out = np.asarray(r.get("output", []), dtype=np.float64)
        w = np.asarray(r.get("weights", []), dtype=np.float64)
        ok = st == 200 and out.shape == ref_out.shape and w.shape == ref_w.shape
        err = max(np.abs(out - ref_out).max(), np.abs(w - ref_w).max()) if ok else float("inf")
        check(ok and err < 1e-4, f"W1 at rest matches the float64 demo-model reference "
                                 f"(max error {err:.1e})")
        expect_path = os.path.join(a.work, "w1.expect")
        open(expect_path, "w").write(json.dumps(r.get("output", [])))
        for _ in range(200):  # warm-up
            d0.request("POST", "/v1/attention", body)
        sweep = []
        for conns in (1, 2, 4, 8, 16, 32, 64):
            res = wrk(d0.port, body_path, expect_path, conns, max(3, a.seconds // 2))
            res["conns"] = conns
            sweep.append(res)
            print(f"capacity: {conns:3d} connections: {res['rps']:8.0f} req/s, p50 "
                  f"{res['p50_ms']:.2f} ms, p99 {res['p99_ms']:.2f} ms, 200: {res['ok']}, "
                  f"503: {res['busy']}, other: {res['other']}, checked {res['checked']} "
                  f"(wrong {res['wrong']})", flush=True)
            check(res["wrong"] == 0 and res["other"] == 0,
                  f"{conns} connections: every checked answer right, no unexpected status")
        held = [s for s in sweep if s["p99_ms"] < P99_BOUND_MS and s["busy"] == 0 and
                s["other"] == 0 and s["errors"] == 0]
        best = max(held, key=lambda s: s["rps"]) if held else None
        check(best is not None, f"some load is held with p99 under {P99_BOUND_MS:.0f} ms")
    finally:
        code = d0.stop()
    check(code == 0, f"exit status after SIGTERM: {code}")

    d = Daemon(a.attnd, os.path.join(a.work, "overload.log"),
               ["--threads", "2", "--max-queue", str(MAX_QUEUE), "--inline-max-flops", "0",
                "--share-jobs", "off"])
    try:
        for _ in range(200):  # warm-up
            d.request("POST", "/v1/attention", body)
        rss_rest = d.rss_mb()

        # 3. W1 far above capacity.
        w1 = overload(d, body, body_path, expect_path, r.get("output"), 256, a.seconds, rss_rest)
        check(w1["over"]["p99_ms"] < OVER_P99_BOUND_MS,
              f"every answer comes back: wrk p99 {w1['over']['p99_ms']:.0f} ms < "
              f"{OVER_P99_BOUND_MS:.0f} ms (no queue grows)")
        srv = busy_server_ms(d.log)
        check(len(srv) > 0 and srv[int(0.99 * (len(srv) - 1))] < BUSY_SERVER_P99_MS,
              f"503s decided fast: {len(srv)} in the access log, p99 "
              f"{srv[int(0.99 * (len(srv) - 1))] if srv else 0:.3f} ms from arrival "
              f"(bound {BUSY_SERVER_P99_MS:.0f} ms)")
        # What a client beside wrk sees is reported, not asserted: its times are those of a
        # shared 2-core machine (wrk, the probe and attnd on the same cores), and the fast 503
        # is checked above where attnd decides it.
        ok_ms = sorted(ms for s, ms, _ in w1["probe"] if s == 200)
        busy_ms = w1["busy_ms"]
        if busy_ms and ok_ms:
            print(f"probe beside wrk: 503 p50 {busy_ms[len(busy_ms) // 2]:.1f} ms, "
                  f"200 p50 {ok_ms[len(ok_ms) // 2]:.1f} ms")
        w1["server_p50"] = srv[len(srv) // 2] if srv else 0.0
        w1["server_p99"] = srv[int(0.99 * (len(srv) - 1))] if srv else 0.0
    finally:
        code = d.stop()
    check(code == 0, f"exit status after SIGTERM: {code}")

    # 4. Compute-bound: SDPA of 2048 queries on 2048 keys of width 8 and one value column
    # (4 M scores and exponentials, about 8 ms on one worker), base64 in (186 KB) and JSON out
    # (2048 numbers): the job's compute dwarfs what the HTTP side and the client do for it, so
    # the worker is the bottleneck whatever the speed of the codecs. (W1 at L = 128 with
    # per-head weights, used before, replied 0.9 MB of JSON per job; once attnd wrote floats
    # 6x faster, wrk reading those replies became the bottleneck, not the worker.)
    xq, xk, xv = sdpa_inputs(2048, 2048, 8)
    body_l = json.dumps({"q": b64_tensor(xq), "k": b64_tensor(xk), "v": b64_tensor(xv)})
    body_l_path = os.path.join(a.work, "sdpa-l2048.json")
    open(body_l_path, "w").write(body_l)
    dl = Daemon(a.attnd, os.path.join(a.work, "overload-sdpa.log"),
                ["--threads", "1", "--pool-threads", "0", "--max-queue", "4",
                 "--batch-window-us", "0", "--share-jobs", "off"])
    try:
        st, _, data, _ = dl.request("POST", "/v1/sdpa", body_l)
        rl = json.loads(data) if st == 200 else {}
        ref_l = sdpa_reference(xq, xk, xv)
        out_l = np.asarray(rl.get("output", []), dtype=np.float64)
        check(out_l.shape == ref_l.shape and np.abs(out_l - ref_l).max() < 1e-4,
              "SDPA at L = S = 2048 at rest matches the reference")
        expect_l_path = os.path.join(a.work, "sdpa-l2048.expect")
        open(expect_l_path, "w").write(json.dumps(rl.get("output", [])))
        for _ in range(20):
            dl.request("POST", "/v1/sdpa", body_l)
        rss_rest_l = dl.rss_mb()
        cb = overload(dl, body_l, body_l_path, expect_l_path, rl.get("output"), 64, a.seconds,
                      rss_rest_l, path="/v1/sdpa")
        busy_l = cb["busy_ms"]
        p99_l = busy_l[int(0.99 * (len(busy_l) - 1))] if busy_l else float("inf")
        check(cb["over"]["busy"] > cb["over"]["ok"], "most of the compute-bound overload was "
                                                     "refused with 503")
        check(len(busy_l) >= 10 and p99_l < BUSY_P99_BOUND_MS,
              f"503s come back fast: {len(busy_l)} to the probe, p99 {p99_l:.2f} ms < "
              f"{BUSY_P99_BOUND_MS:.0f} ms")
        cb["busy_p99"] = p99_l
    finally:
        code = dl.stop()
    check(code == 0, f"exit status after SIGTERM: {code}")

    # 5. The connection limit under load: wrk holds 64 keep-alive connections against 32.
    dc = Daemon(a.attnd, os.path.join(a.work, "overload-conns.log"), ["--max-connections", "32"])
    try:
        probes, stop = [], threading.Event()

        def prober():
            k = 0
            while not stop.is_set():
                path = ("/healthz", "/readyz")[k % 2]
                k += 1
                try:
                    st, _, _, ms = dc.request("GET", path, timeout=3)
                except OSError:
                    st, ms = 0, 3000.0
                probes.append((st, ms))
                time.sleep(0.05)

        th = threading.Thread(target=prober)
        th.start()
        time.sleep(0.2)
        cl = wrk(dc.port, body_path, expect_path, 64, max(3, a.seconds // 2))
        stop.set()
        th.join()
        ms = sorted(m for _, m in probes)
        good = sum(1 for st, _ in probes if st == 200)
        evicted = open(dc.log, errors="replace").read().count("connection_evicted")
        cl["probe_n"], cl["probe_ok"] = len(probes), good
        cl["probe_p50"] = ms[len(ms) // 2] if ms else 0.0
        cl["probe_p99"] = ms[int(0.99 * (len(ms) - 1))] if ms else 0.0
        cl["evicted"] = evicted
        print(f"connection limit: wrk with 64 connections against --max-connections 32: "
              f"{cl['rps']:.0f} answers/s ({cl['ok']} 200, socket errors {cl['errors']}); "
              f"{evicted} evictions; probes: {good} of {len(probes)} answered 200, p50 "
              f"{cl['probe_p50']:.1f} ms, p99 {cl['probe_p99']:.1f} ms", flush=True)
        # Not every probe: wrk's 64 connections churn against 32 places (each eviction makes wrk
        # reconnect, which evicts another), and a probe whose request has not come yet can be
        # the one idle connection left to evict, or find every place busy and be shut at accept.
        # tests/reliability's probes_at_limit checks the 100 ms bound beside silent and
        # trickling sockets, which is what an attacker holds.
        check(len(probes) >= 10 and good >= 0.95 * len(probes),
              f"connection limit: at least 95% of probes answered 200 beside 64 busy connections "
              f"at a limit of 32 ({good} of {len(probes)})")
        check(cl["ok"] > 0 and cl["wrong"] == 0 and cl["other"] == 0,
              "connection limit: wrk still served, every checked answer right")
        check(evicted > 0, "connection limit: the log names the evictions")
    finally:
        code = dc.stop()
    check(code == 0, f"exit status after SIGTERM: {code}")

    if best:
        report = make_report(best, sweep, w1, cb, a.seconds, cl)
        print("\n" + report)
        if a.report:
            open(a.report, "w").write(report)
    if failures:
        print(f"overload: {len(failures)} check(s) failed")
        return 1
    print("overload: all checks passed")
    return 0


def busy_server_ms(log):
    """The total_ms of every 503 the access log shows for a job route, sorted."""
    ms = []
    for line in open(log, errors="replace"):
        if " access " in line and "status=503" in line:
            m = re.search(r"total_ms=([0-9.]+)", line)
            if m:
                ms.append(float(m.group(1)))
    return sorted(ms)


def overload(d, body, body_path, expect_path, want_output, conns, seconds, rss_rest,
             path="/v1/attention"):
    """wrk with conns connections for seconds, a probe and RSS samples; the common checks.
    Returns the figures."""
    probe, rss, stop = [], [], threading.Event()

    def probe_main():
        while not stop.is_set():
            try:
                st, hd, _, ms = d.request("POST", path, body, timeout=15)
                probe.append((st, ms, "Retry-After" in hd))
            except OSError:
                probe.append((0, 0.0, False))
            time.sleep(0.02)

    def rss_main():
        while not stop.is_set():
            rss.append(d.rss_mb())
            time.sleep(0.05)

    ths = [threading.Thread(target=probe_main), threading.Thread(target=rss_main)]
    for t in ths:
        t.start()
    time.sleep(0.2)
    over = wrk(d.port, body_path, expect_path, conns, seconds, path=path)
    stop.set()
    for t in ths:
        t.join()
    st, _, data, rec_ms = d.request("POST", path, body)
    good = st == 200 and json.loads(data).get("output") == want_output
    rst, _, _, _ = d.request("GET", "/readyz")
    busy_ms = sorted(ms for s, ms, _ in probe if s == 503)
    peak = max(rss) if rss else 0.0
    tag = f"{conns} connections"
    print(f"overload: {tag} for {seconds} s: {over['rps']:.0f} answers/s, 200: {over['ok']}, "
          f"503: {over['busy']}, other: {over['other']}, errors {over['errors']}, timeouts "
          f"{over['timeouts']}; wrk p50 {over['p50_ms']:.1f} ms, p99 {over['p99_ms']:.1f} ms; "
          f"probe: {len(probe)} requests, {len(busy_ms)} got 503 (p50 "
          f"{busy_ms[len(busy_ms) // 2] if busy_ms else 0:.2f} ms); RSS at rest "
          f"{rss_rest:.1f} MiB, peak {peak:.1f} MiB", flush=True)
    check(over["busy"] > 0, f"{tag}: the excess was refused with 503")
    check(over["other"] == 0 and over["errors"] == 0 and over["timeouts"] == 0,
          f"{tag}: no answer other than 200 or 503, no socket error, no timeout")
    check(over["no_retry"] == 0 and all(ra for s, _, ra in probe if s == 503),
          f"{tag}: every 503 carries Retry-After")
    check(over["checked"] > 0 and over["wrong"] == 0,
          f"{tag}: {over['checked']} sampled 200s had the right output")
    check(0 < peak < rss_rest + RSS_BOUND_MB,
          f"{tag}: RSS bounded: peak {peak:.1f} MiB, at rest {rss_rest:.1f} MiB (bound + "
          f"{RSS_BOUND_MB:.0f} MiB)")
    check(good and rec_ms < RECOVER_BOUND_MS and rst == 200,
          f"{tag}: recovers at once: the next request answered 200 in {rec_ms:.1f} ms, "
          f"/readyz {rst}")
    return {"over": over, "probe": probe, "busy_ms": busy_ms, "peak": peak,
            "rss_rest": rss_rest, "rec_ms": rec_ms}


def make_report(best, sweep, w1, cb, seconds, cl):
    o, c = w1["over"], cb["over"]
    pb = w1["busy_ms"]
    return f"""## Overload (make overload)

Measured by `tests/reliability/overload.py` on {time.strftime('%Y-%m-%d', time.gmtime())} (the
same noisy 2-core machine; wrk runs on the same cores as the daemon). W1: the demo model
(E = 64, H = 4), L = 16, per-head weights, JSON.

**Load held: {best['rps']:.0f} W1 requests/s with p99 {best['p99_ms']:.1f} ms** (bound
{P99_BOUND_MS:.0f} ms), every answer 200 and every 10th checked, by `attnd` with its defaults:
`OVERLOAD_BODY=w1.json OVERLOAD_EXPECT=w1.expect {best['cmd']}` with {best['conns']}
connections (`make overload` writes both files). The sweep ({max(3, seconds // 2)} s each):

| connections | requests/s | p50 ms | p99 ms | 200 | 503 |
|---|---|---|---|---|---|
""" + "".join(f"| {s['conns']} | {s['rps']:.0f} | {s['p50_ms']:.2f} | {s['p99_ms']:.2f} | "
              f"{s['ok']} | {s['busy']} |\n" for s in sweep) + f"""
**W1 far above capacity** (`attnd --threads 2 --max-queue {MAX_QUEUE} --inline-max-flops 0
--share-jobs off`, so that W1 goes through the queue and wrk's copies of one body are not
answered from one job; 256 connections,
{seconds} s): {o['rps']:.0f} answers/s, {o['ok']}
of them 200 and {o['busy']} 503 with `Retry-After` (no other status, no socket error, no
timeout); wrk's p50 {o['p50_ms']:.0f} ms, p99 {o['p99_ms']:.0f} ms, the time 256 connections take
to be served in turn: W1's bottleneck is the HTTP side (reading 1024 numbers and writing
2048), not the workers, so a request waits for an HTTP thread whatever its answer. attnd
decides a 503 in p50 {w1['server_p50']:.3f} ms, p99 {w1['server_p99']:.2f} ms of reading the
request (the access log's total_ms; most are refused from the headers, before the body);
the probe beside wrk saw 503s in p50 {pb[len(pb) // 2] if pb else 0:.0f} ms. VmRSS peaked at
{w1['peak']:.1f} MiB (at rest {w1['rss_rest']:.1f} MiB); the first W1 after the load: 200 in
{w1['rec_ms']:.1f} ms.

**Compute-bound** (`/v1/sdpa` at L = S = 2048, D = 8, Dv = 1, base64 in and JSON out;
`--threads 1 --pool-threads 0 --max-queue 4
--batch-window-us 0 --share-jobs off`, 64 connections, {seconds} s): {c['rps']:.0f} answers/s, {c['ok']} of them
200 and {c['busy']} 503; the probe got its 503s in p99 {cb['busy_p99']:.2f} ms; VmRSS peaked at
{cb['peak']:.1f} MiB (at rest {cb['rss_rest']:.1f} MiB); the first request after: 200 in
{cb['rec_ms']:.1f} ms.

**The connection limit under load** (`attnd --max-connections 32`, wrk with 64 keep-alive
connections on W1, {max(3, seconds // 2)} s): {cl['rps']:.0f} answers/s ({cl['ok']} 200; wrk
counted {cl['errors']} socket errors: its connections evicted or shut at the limit),
{cl['evicted']} evictions logged; a prober opening a new connection every 50 ms got
{cl['probe_ok']} of {cl['probe_n']} probes answered 200, p50 {cl['probe_p50']:.1f} ms, p99
{cl['probe_p99']:.1f} ms (the same shared cores as wrk).
"""

if __name__ == "__main__":
    sys.exit(main())
