#!/usr/bin/python3
"""w6_http.py - W6 over HTTP (issue 37, section 6): generation a row at a time against attnd's
API. It measures the side a client without a session has, recomputing the prefix at every step
through POST /v1/attention (causal, inline params), and the side with a decode session (POST
/v1/sessions); the latter only when the server's own /openapi.yaml has /v1/sessions (a build from
before sessions is reported as not measured).

Usage: /usr/bin/python3 bench/http/w6_http.py --attnd build/attnd
           [--url http://127.0.0.1:PORT] [--out build/bench/w6_http.md] [--work DIR]
           [--rounds 3] [--stride 64]

Legend: T = 4,096 steps, E = 512, H = 8, t the length after a step.

W6's inputs and weights are bench_attention's (W4's input and module, bench/torch_mha.py's
generator): x (T, E), in_proj (3E, E) with its bias, out_proj (E, E) with its bias. Step t's new
row is x[t - 1]; what step t must output is row t - 1 of the whole causal call (torch's, the
reference every answer is checked against: max abs <= TOL).

The recomputing side. At step t a client without a session sends the whole prefix: POST
/v1/attention {"query": x[:t] (t, E), "params": {the four tensors, "num_heads": 8}, "causal":
true, "encoding": "base64"}, tensors as base64 float32 both ways, on one keep-alive connection,
and keeps the last row of the answer. As bench/w6.c does for the core, it is measured at t = 1
and at every multiple of --stride (65 lengths a round with 64), odd rounds longest first; the
total over t = 1..T is the sum of the piecewise-linear interpolation of the measured times.
Each request's time runs from sending the body to reading the whole answer (the body is made
before, the answer decoded after); usage.compute_ms and queue_ms come from the answer.

The session side. When the server's /openapi.yaml lists
/v1/sessions, SessionClient below opens a session with the same params (POST /v1/sessions
{"params", "max_length": T} -> 201 {"id", ...}), appends the T rows one at a time (POST
/v1/sessions/{id} {"query": x[t - 1] (1, E), "expected_length": t - 1, "encoding": "base64"}
-> the new row's output), each step timed, and deletes it (DELETE /v1/sessions/{id}); every
step's output is checked against torch's row, so a server whose API differs fails the check
rather than giving a number.

Writes a markdown report (--out) and the measurements as JSON (WORK/w6_http.json). Exits
non-zero when the server fails to start or an answer disagrees with torch.
"""

import argparse
import datetime
import http.client
import json
import os
import subprocess
import sys
import time
import urllib.parse

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, BENCH)
from run_bench import cpu_model, fmt, median  # noqa: E402
from run_http_bench import b64, from_b64, start_attnd, stop_all  # noqa: E402

T, E, H = 4096, 512, 8
TOL = 1e-4  # max |answer - torch| of a step's row (outputs are O(1)), as run_ort_w6.py
WINDOW = 16  # bench/w6.c's: "per step at t" of the session side, the median of steps t-15..t
POINTS = (512, 2048, 4096)


def w6_inputs():
    """(x (T, E), params as /v1/attention's StateDictParams, torch's whole causal out (T, E))."""
    import torch  # only here: the reference
    import torch_mha
    spec = ("W6", "decode session", 1, T, E, H, True, None, False)
    mha, x, attn_mask, _ = torch_mha.build(spec)
    with torch.no_grad():
        ref, _ = mha(x, x, x, attn_mask=attn_mask, need_weights=False)
    params = {"num_heads": H}
    for name, t in (("in_proj_weight", mha.in_proj_weight), ("in_proj_bias", mha.in_proj_bias),
                    ("out_proj.weight", mha.out_proj.weight),
                    ("out_proj.bias", mha.out_proj.bias)):
        params[name] = b64(t.detach().numpy())
    return x[0].numpy(), params, ref[0].numpy()


class Server:
    """One keep-alive connection to attnd; request() returns (status, seconds, body bytes, bytes
    sent), the time from sending the body to having read the whole answer."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.conn = None

    def request(self, method, path, body=None, timeout=600):
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            try:
                data = body.encode() if isinstance(body, str) else body
                hdrs = {"Content-Type": "application/json"} if data is not None else {}
                t0 = time.monotonic()
                self.conn.request(method, path, data, hdrs)
                r = self.conn.getresponse()
                out = r.read()
                dt = time.monotonic() - t0
                return r.status, dt, out, len(data or b"")
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise RuntimeError("unreachable")

    def close(self):
        if self.conn is not None:
            self.conn.close()


def has_sessions(srv):
    """Whether the server's own spec lists the session routes (issue 37, section 1)."""
    status, _, body, _ = srv.request("GET", "/openapi.yaml")
    return status == 200 and b"/v1/sessions" in body


def samples(stride):
    """t = 1 and the multiples of stride up to T (T always): bench/w6.c's w6_samples."""
    ts = [1] + [t for t in range(stride, T + 1, stride) if t > 1]
    return ts if ts[-1] == T else ts + [T]


def interp_sum(ts, y):
    """The sum over t = 1..T of the piecewise-linear interpolation of (ts[k], y[k]), ts[0] = 1:
    bench/w6.c's w6_interp_sum."""
    total = y[0]
    for k in range(1, len(ts)):
        a, b = ts[k - 1], ts[k]
        for t in range(a + 1, b + 1):
            total += y[k - 1] + (y[k] - y[k - 1]) * (t - a) / (b - a)
    return total


def recompute_body(x, params_json, t):
    return ('{"query":' + json.dumps(b64(x[:t])) + ',"params":' + params_json +
            ',"causal":true,"encoding":"base64"}')


def recompute_round(srv, x, params_json, ref, ts, reverse):
    """One round of recomputations: {t: record} with the time, usage and the last row's error."""
    out = {}
    for t in (ts[::-1] if reverse else ts):
        body = recompute_body(x, params_json, t)
        status, dt, data, up = srv.request("POST", "/v1/attention", body)
        if status != 200:
            raise RuntimeError(f"/v1/attention at t = {t}: HTTP {status}: {data[:300]!r}")
        reply = json.loads(data)
        row = from_b64(reply["output"]).reshape(t, E)[t - 1]
        out[t] = {"s": dt, "compute_ms": reply["usage"]["compute_ms"],
                  "queue_ms": reply["usage"]["queue_ms"], "job_bytes": reply["usage"]["job_bytes"],
                  "up": up, "down": len(data),
                  "err": float(np.abs(row.astype(np.float64) - ref[t - 1]).max())}
    return out


class SessionClient:
    """A decode session's three calls as api/openapi.yaml describes them, run only when the
    server's spec lists /v1/sessions (has_sessions). Each raises RuntimeError on an answer other
    than the one described."""

    def __init__(self, srv, params):
        self.srv, self.params, self.id = srv, params, None

    def open(self, max_length):
        body = json.dumps({"params": self.params, "max_length": max_length})
        status, _, data, _ = self.srv.request("POST", "/v1/sessions", body)
        if status != 201:
            raise RuntimeError(f"POST /v1/sessions: HTTP {status}: {data[:300]!r}")
        self.id = json.loads(data)["id"]

    def append(self, row, expected_length):
        """Appends row (1, E); returns (seconds, its output (E,), bytes sent, bytes received)."""
        body = json.dumps({"query": b64(row), "expected_length": expected_length,
                           "encoding": "base64"})
        path = "/v1/sessions/" + urllib.parse.quote(self.id, safe="")
        status, dt, data, up = self.srv.request("POST", path, body)
        if status != 200:
            raise RuntimeError(f"POST {path}: HTTP {status}: {data[:300]!r}")
        return dt, from_b64(json.loads(data)["output"]).reshape(-1)[-E:], up, len(data)

    def close(self):
        if self.id is not None:
            self.srv.request("DELETE", "/v1/sessions/" + urllib.parse.quote(self.id, safe=""))
            self.id = None


def session_round(srv, x, params, ref):
    """One session of T appends: per-step seconds, bytes up and down, the largest error."""
    sc = SessionClient(srv, params)
    steps, up, down, err = [], 0, 0, 0.0
    sc.open(T)
    try:
        for k in range(T):
            dt, row, u, d = sc.append(x[k:k + 1], k)
            steps.append(dt)
            up, down = up + u, down + d
            err = max(err, float(np.abs(row.astype(np.float64) - ref[k]).max()))
    finally:
        sc.close()
    return {"steps": steps, "total_s": sum(steps), "up": up, "down": down, "err": err}


def cell(v, spec):
    v = [a for a in v if a is not None]
    if not v:
        return "-"
    if len(v) == 1:
        return format(v[0], spec)
    return f"{format(median(v), spec)} ({format(min(v), spec)} to {format(max(v), spec)})"


def report(args, ctx):
    rec, ses, ts = ctx["recompute"], ctx["sessions"], ctx["ts"]
    L = ["# W6 over HTTP (issue 37, section 6)", ""]
    L.append(f"Run {ctx['started']} to {ctx['ended']} by `bench/http/w6_http.py`, against "
             f"{ctx['server']}; load average (1 min) at start / end {ctx['load'][0]:.2f} / "
             f"{ctx['load'][1]:.2f}. CPU: {cpu_model()}; {os.cpu_count()} cores online. "
             f"attnd's BLAS kernel: {ctx['kernel'] or '?'} (its start-up log).")
    L.append("")
    L.append(f"W6: {T:,} appends of one row at E = {E}, H = {H} on W4's inputs and weights "
             "(inline `params`, base64 float32 tensors both ways, one keep-alive connection). "
             f"Recomputing: POST /v1/attention with the whole prefix and `causal: true` at t = 1 "
             f"and every multiple of {args.stride} ({len(ts)} lengths a round, odd rounds longest "
             f"first), {len(rec)} round(s); the total over t = 1..{T:,} is the sum of the "
             "piecewise-linear interpolation of those times (as bench/w6.c). Every answer's "
             f"last row was checked against torch's whole causal call (largest error "
             f"{fmt(ctx['rec_err'], '.1e')}, tolerance {TOL:g}).")
    L.append("")
    L.append("| | recomputing through /v1/attention | with a session |")
    L.append("|---|--:|--:|")

    def at(t, key):
        return [r[t][key] for r in rec if t in r]

    def ses_at(t):
        return [median(s["steps"][t - WINDOW:t]) * 1e3 for s in ses]

    for t in POINTS:
        L.append(f"| per step at t = {t:,}, ms (client's time) | "
                 f"{cell([v * 1e3 for v in at(t, 's')], '.1f')} | {cell(ses_at(t), '.3f')} |")
        L.append(f"| of which attnd's compute (usage.compute_ms) at t = {t:,} | "
                 f"{cell(at(t, 'compute_ms'), '.1f')} | - |")
        L.append(f"| bytes sent / received at t = {t:,} | "
                 f"{cell([v / 2 ** 20 for v in at(t, 'up')], '.1f')} / "
                 f"{cell([v / 2 ** 20 for v in at(t, 'down')], '.1f')} MiB | "
                 f"{'%.1f / %.1f KiB' % (ses[0]['up'] / T / 1024, ses[0]['down'] / T / 1024) if ses else '-'} |")
    totals = [interp_sum(ts, [r[t]["s"] for t in ts]) for r in rec]
    compute = [interp_sum(ts, [r[t]["compute_ms"] / 1e3 for t in ts]) for r in rec]
    L.append(f"| total over {T:,} steps, s | {cell(totals, '.1f')} (estimated) | "
             f"{cell([s['total_s'] for s in ses], '.2f')} |")
    L.append(f"| of which attnd's compute, s | {cell(compute, '.1f')} | - |")
    up = [interp_sum(ts, [r[t]["up"] for t in ts]) / 2 ** 30 for r in rec[:1]]
    L.append(f"| bytes sent over the {T:,} steps | {cell(up, '.1f')} GiB (estimated) | "
             f"{'%.1f MiB' % (ses[0]['up'] / 2 ** 20) if ses else '-'} |")
    L.append("")
    if ses:
        ratio = [a / b["total_s"] for a, b in zip(totals, ses)] if len(ses) == len(totals) else []
        L.append(f"Ratio recomputing / session, totals: {cell(ratio, '.1f')} (goal: at least "
                 f"10x). Largest error of a session's step against torch: "
                 f"{max(s['err'] for s in ses):.1e}.")
    else:
        L.append("**The session side is not measured**: this server's /openapi.yaml has no "
                 "/v1/sessions (a build from before decode sessions). For the goal (the session at least 10x faster in total than "
                 f"recomputing) the {T:,} appends over HTTP would have to take at most "
                 f"{fmt(median(totals) / 10 if totals else None, '.1f')} s in all, "
                 f"{fmt(median(totals) / 10 / T * 1e3 if totals else None, '.2f')} ms a step on "
                 "average, on this run's figures.")
    L.append("")
    L.append("Per round, the recomputation's estimated total (s): " +
             ", ".join(f"{v:.1f}" for v in totals) + ".")
    L.append("")
    return L


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--attnd", default="build/attnd", help="the attnd to start (port 0)")
    ap.add_argument("--url", help="use this running server instead (http://host:port)")
    ap.add_argument("--out", default="build/bench/w6_http.md", help="the markdown report")
    ap.add_argument("--work", default="build/bench/w6_http", help="logs and the JSON record")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each side")
    ap.add_argument("--stride", type=int, default=64, help="recompute at t = 1 and every "
                    "multiple of this (1: every t, slow)")
    args = ap.parse_args()
    if not 1 <= args.stride <= T or args.rounds < 1:
        print("w6_http.py: --stride is 1 to 4096, --rounds at least 1", file=sys.stderr)
        return 2
    os.makedirs(args.work, exist_ok=True)
    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    load0 = os.getloadavg()
    x, params, ref = w6_inputs()
    params_json = json.dumps(params)
    procs, kernel = [], None
    try:
        if args.url:
            u = urllib.parse.urlsplit(args.url)
            host, port = u.hostname, u.port or 80
            server = args.url
        else:
            log = os.path.join(args.work, "attnd.log")
            p, port, kernel = start_attnd(args.attnd, [], log)
            procs.append(p)
            host, server = "127.0.0.1", f"`{args.attnd}` (defaults, port 0, --max-queue 1024)"
        srv = Server(host, port)
        sessions_api = has_sessions(srv)
        ts = samples(args.stride)
        rec, ses = [], []
        for r in range(args.rounds):
            print(f"w6_http.py: round {r + 1} of {args.rounds}: recomputing at {len(ts)} lengths",
                  file=sys.stderr, flush=True)
            rec.append(recompute_round(srv, x, params_json, ref, ts, reverse=r % 2 == 1))
            if sessions_api:
                print(f"w6_http.py: round {r + 1}: a session of {T} appends", file=sys.stderr,
                      flush=True)
                ses.append(session_round(srv, x, params, ref))
        srv.close()
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        print(f"w6_http.py: {e}", file=sys.stderr)
        return 1
    finally:
        stop_all(procs)
    rec_err = max(v["err"] for r in rec for v in r.values())
    ses_err = max((s["err"] for s in ses), default=0.0)
    ctx = {"recompute": rec, "sessions": ses, "ts": ts, "kernel": kernel, "server": server,
           "started": started, "ended": datetime.datetime.now().astimezone().strftime("%H:%M:%S"),
           "load": (load0[0], os.getloadavg()[0]), "rec_err": rec_err}
    with open(os.path.join(args.work, "w6_http.json"), "w") as f:
        json.dump({"started": started, "sessions_api": sessions_api, "samples": ts,
                   "recompute": [{str(t): v for t, v in r.items()} for r in rec],
                   "sessions": [{k: v for k, v in s.items()} for s in ses]}, f)
    text = "\n".join(report(args, ctx)) + "\n"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    print(text)
    if rec_err > TOL or ses_err > TOL:
        print(f"w6_http.py: an answer differs from torch's by {max(rec_err, ses_err):.2e}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
