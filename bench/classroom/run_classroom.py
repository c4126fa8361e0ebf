#!/usr/bin/python3
"""run_classroom.py - the guided path for a whole class on one attnd: `make bench-classroom`.

1. Record. attnd starts alone (the Dockerfile's environment, on loopback, JSON logs) and
   bench/classroom/record.mjs walks the guided path in headless chromium, one student in one
   language, recording every request the page makes and the step it belongs to. The recording is
   matched against attnd's access log (each request carries X-Request-Id rec-<step>): a request
   the browser answered from its cache never reached attnd and is not replayed; one attnd saw
   that the browser did not report (the favicon) is added. A request the lone walk got a 4xx for
   is part of the lesson (step 9 asks for the weights at n = 8k and shows the 413): it is marked
   on_purpose with its status, and the same status in the replay is not an error. A 5xx or a
   failed request in the walk stops the benchmark. Saved as build/bench/classroom/recording.json.
2. Replay. For each class size and mode, a fresh attnd starts as the container starts it (the
   Dockerfile's ENV, ENTRYPOINT without arguments, ATTND_LISTEN on 127.0.0.1, ATTND_MODELS an
   empty folder, nothing else from this environment) inside cgroups the benchmark makes under its
   own (v1: cpu with cpu.cfs_quota_us 200000 per cpu.cfs_period_us 100000, memory with
   memory.limit_in_bytes 2 GiB), joined before exec so that attnd sizes itself to them. N
   students (Python threads, http.client, keep-alive, up to 6 connections each as a browser
   keeps) replay the recorded requests: within a step in waves, as the page sent them (requests
   the page started while others of the step were in flight go together), without the page's
   own pauses between waves. The generation step's decode session is each student's own: the
   id attnd gives a student's POST /v1/sessions replaces the recording's in that student's
   appends and DELETE (a student who reaches the DELETE before opening one sends nothing, as the
   page would). Modes:
     together  every student on the same step at once: a barrier before each step;
     spread    each student loads the page at a random moment in the first 2 s, then starts at
               its own step (spread evenly over the path) and walks every step once, wrapping
               round, with a random pause of 0 to 1 s before each.
   Each run is repeated with ATTND_SHARE_JOBS=off for the STUDENTS:MODE pairs of --unshared
   (60:together by default): every request computed, none answered with a copy of an identical
   one in flight. A 503 is tried again after its Retry-After (times 1 to 1.5, at random), at most 3 times, as
   the page is to do; it is an error only if the last try fails. Each request: its status, the
   time the student waited for it (retries included), bytes up and down (bodies, every try).
3. Report, per step: p50 and p99 (nearest rank: with 30 or 60 students, the slowest) of the time
   a student waits for the step's requests, errors by code, bytes up and down per student; and
   attnd's peak RSS (VmHWM) beside the memory_bound and memory_limit of its start log, the
   cgroup's peak usage and CPU throttling. The goals are evaluated (reported, not asserted).

Loopback only; bounded: each call times out after --timeout s, each run stops after --deadline s
(calls not sent by then are errors, "not run"). Needs root (the cgroups) and cgroup v1.

Usage: /usr/bin/python3 bench/classroom/run_classroom.py --attnd build/attnd
           [--out build/bench/classroom.md] [--work build/bench/classroom] [--students 30,60]
           [--modes together,spread] [--lang zh] [--recording FILE (replay it, no walk)]
           [--unshared 60:together]
"""

import argparse
import base64
import datetime
import http.client
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attnd_proc import (HERE, MEMORY_LIMIT, PERIOD_US, QUOTA_US, ROOT, Cgroups,  # noqa: E402
                        container_env, cpu_busy, cpu_seconds, log_fields, metric_value,
                        self_cpu, start_attnd, stop, vm_hwm)
from classroom_report import counts, render, summarise  # noqa: E402

CONNS = 6          # connections a browser keeps to one host
RETRIES = 3        # tries again after a 503
# A decode session's own path: the recording's id there is replaced with the student's own.
SESSION_PATH = re.compile(r"/v1/sessions/[^/?]+")


# ---- 1. Record ---------------------------------------------------------------------------------

def access_lines(log):
    out = []
    for line in open(log, errors="replace"):
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get("msg") == "access":
            out.append(j)
    return out


def merge(rec, lines):
    """Marks each recorded call that reached attnd (replay: True) against the access lines of its
    step, adds the requests attnd saw that the browser did not report, and marks on purpose the
    4xx the walk got. Returns the list of problems (a 5xx, a failed request)."""
    t_start = datetime.datetime.fromisoformat(rec["started"].replace("Z", "+00:00"))
    by_step = {}
    # Only what the walk sent: not the runner's own /readyz before it began.
    lines = [a for a in lines if datetime.datetime.fromisoformat(
        a["time"].replace("Z", "+00:00")) >= t_start]
    for a in lines:
        m = re.fullmatch(r"rec-(\d+)", str(a.get("id", "")))
        if m:
            n = int(m.group(1))
        else:  # no id of ours: the step whose time window holds it
            t = (datetime.datetime.fromisoformat(a["time"].replace("Z", "+00:00")) - t_start)
            ms = t.total_seconds() * 1e3
            n = max([s["n"] for s in rec["steps"] if s["t0_ms"] <= ms] or [0])
        by_step.setdefault(n, []).append(a)
    problems = []
    for c in rec["calls"]:
        seen = by_step.get(c["step"], [])
        path = c["path"].split("?", 1)[0]
        same = [a for a in seen
                if a["method"] == c["method"] and str(a["path"]).split("?", 1)[0] == path]
        # Requests of a step sent together finish in any order: the same length first.
        hit = next((a for a in same if a.get("bytes_in") == c["req_bytes"]),
                   same[0] if same else None)
        c["replay"] = hit is not None
        if hit:
            seen.remove(hit)
            c["status"] = hit["status"]
            if c["req_bytes"] != hit.get("bytes_in", c["req_bytes"]):
                problems.append(f"step {c['step']}: {c['method']} {c['path']}: the browser "
                                f"reported a body of {c['req_bytes']} bytes, attnd read "
                                f"{hit.get('bytes_in')}")
        elif c["failed"]:
            problems.append(f"step {c['step']}: {c['method']} {c['path']} failed: {c['failed']}")
    for n, rest in by_step.items():
        for a in rest:
            rec["calls"].append({"step": n, "method": a["method"], "path": a["path"],
                                 "headers": {}, "body_b64": "", "req_bytes": 0,
                                 "status": a["status"], "resp_bytes": a.get("bytes_out"),
                                 "t0_ms": None, "t1_ms": None, "failed": None, "replay": True,
                                 "source": "access log"})
    for c in rec["calls"]:
        if c["replay"] and c["status"] and 400 <= c["status"] < 500:
            c["on_purpose"] = c["status"]
        if c["replay"] and (c["status"] is None or c["status"] >= 500):
            problems.append(f"step {c['step']}: {c['method']} {c['path']} got {c['status']} "
                            "in the walk alone")
    rec["calls"].sort(key=lambda c: (c["step"], c["t0_ms"] if c["t0_ms"] is not None else 1e18))
    return problems


def record(args, work):
    models = tempfile.mkdtemp(prefix="attnd-models-", dir=work)
    env, eargs = container_env(os.path.join(ROOT, "Dockerfile"), models,
                               {"ATTND_LOG_FORMAT": "json"})
    log = os.path.join(work, "record-attnd.log")
    p, port = start_attnd(args.attnd, env, eargs, log)
    out = os.path.join(work, "walk.json")
    try:
        r = subprocess.run(["node", os.path.join(HERE, "record.mjs"), f"http://127.0.0.1:{port}/",
                            out, args.lang], timeout=600)
        if r.returncode:
            raise RuntimeError(f"the walk failed (record.mjs exited {r.returncode})")
    finally:
        stop(p)
        shutil.rmtree(models, ignore_errors=True)
    rec = json.load(open(out))
    problems = merge(rec, access_lines(log))
    if problems:
        raise RuntimeError("the walk alone did not go cleanly:\n  " + "\n  ".join(problems))
    rec["attnd_log_format"] = "json"
    with open(args.recording_out, "w") as f:
        json.dump(rec, f)
    os.remove(out)
    return rec


# ---- 2. Replay ---------------------------------------------------------------------------------

def waves(calls):
    """The step's calls in waves: a call joins the current wave when the page started it before
    every call of the wave had finished (calls from the access log alone go in a wave of their
    own, after the others)."""
    out, cur, end = [], [], -1.0
    timed = [c for c in calls if c["t0_ms"] is not None]
    for c in timed:
        if cur and c["t0_ms"] >= end:
            out.append(cur)
            cur = []
        cur.append(c)
        end = max(end, c["t1_ms"] if c["t1_ms"] is not None else c["t0_ms"])
    if cur:
        out.append(cur)
    rest = [c for c in calls if c["t0_ms"] is None]
    if rest:
        out.append(rest)
    return out


class Student:
    """One student's connections (keep-alive, up to CONNS) and results."""

    def __init__(self, port, timeout, deadline, rng):
        self.port, self.timeout, self.deadline, self.rng = port, timeout, deadline, rng
        self.conns = [None] * CONNS
        self.steps = {}   # step -> {"wait": s, "calls": [results]}
        self.session = None  # the id of the decode session this student opened, until deleted

    def conn(self, i):
        if self.conns[i] is None:
            self.conns[i] = http.client.HTTPConnection("127.0.0.1", self.port,
                                                       timeout=self.timeout)
        return self.conns[i]

    def drop(self, i):
        if self.conns[i] is not None:
            self.conns[i].close()
            self.conns[i] = None

    def once(self, i, c, body):
        """One try: (status, error code of a 4xx or 5xx body, retry_after, up, down), or raises
        OSError / timeout. As a browser does: a keep-alive connection the server closed
        meanwhile is opened again once; when the server answers before it has read the whole
        body and closes (attnd refuses a job from its shapes at once), the answer is read."""
        for attempt in (0, 1):
            reused = self.conns[i] is not None
            h = self.conn(i)
            try:
                try:
                    h.request(c["method"], c["path"], body=body or None, headers=c["headers"])
                except (BrokenPipeError, ConnectionResetError):
                    pass  # an answer may be there: getresponse() tells
                r = h.getresponse()
                down, head = 0, b""
                while True:  # counted, not kept: 60 students' replies of 23 MB at once
                    chunk = r.read(1 << 20)
                    if not chunk:
                        break
                    if not down:
                        head = chunk[:4096]
                    down += len(chunk)
                if (r.getheader("Connection") or "").lower() == "close" or r.will_close:
                    self.drop(i)
                code = None
                if r.status >= 400:
                    m = re.search(rb'"code"\s*:\s*"([^"]{1,64})"', head)
                    code = m.group(1).decode() if m else None
                self.track_session(c, r.status, head)
                return r.status, code, r.getheader("Retry-After"), len(body), down
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.drop(i)
                if not reused or attempt:
                    raise
            except BaseException:
                self.drop(i)
                raise
        raise OSError("unreachable")

    def track_session(self, c, status, head):
        """Notes the id of the session a POST /v1/sessions opened, and forgets it once deleted."""
        path = c["path"].split("?", 1)[0]
        if c["method"] == "POST" and path == "/v1/sessions" and 200 <= status < 300:
            m = re.search(rb'"id"\s*:\s*"([^"]{1,128})"', head)
            self.session = m.group(1).decode() if m else None
        elif c["method"] == "DELETE" and SESSION_PATH.match(path) and status < 500:
            self.session = None

    def call(self, i, c):
        """The call with the page's retries: a dict of status (or an error name), wait, tries,
        retried 503s, bytes up and down. A call on a decode session goes to the student's own
        session; with none open (a student who starts the path after the generation step, and
        reaches the request that deletes it first) the page would send nothing: None."""
        if SESSION_PATH.match(c["path"]):
            if self.session is None:
                return None
            own = "/v1/sessions/" + urllib.parse.quote(self.session, safe="")
            c = dict(c, path=SESSION_PATH.sub(own, c["path"], count=1))
        body = c["body"]
        res = {"step": c["step"], "status": None, "code": None, "error": None, "tries": 0,
               "retried": 0, "retried_codes": {}, "up": 0, "down": 0,
               "on_purpose": c.get("on_purpose")}
        t0 = time.monotonic()
        while True:
            if time.monotonic() > self.deadline:
                res["error"] = res["error"] or "not run"
                break
            res["tries"] += 1
            try:
                st, code, ra, up, down = self.once(i, c, body)
            except TimeoutError:
                res["error"], res["status"] = "timeout", None
                break
            except (OSError, http.client.HTTPException) as e:
                res["error"], res["status"] = "conn " + type(e).__name__, None
                break
            res["up"] += up
            res["down"] += down
            res["status"], res["code"] = st, code
            if st == 503 and res["tries"] <= RETRIES:
                res["retried"] += 1
                k = code or "503"
                res["retried_codes"][k] = res["retried_codes"].get(k, 0) + 1
                try:
                    wait = float(ra) if ra is not None else 1.0
                except ValueError:
                    wait = 1.0
                time.sleep(wait * (1 + 0.5 * self.rng.random()))
                continue
            break
        res["wait"] = time.monotonic() - t0
        if res["error"] is None:
            st = res["status"]
            if not (200 <= st < 400 or st == res["on_purpose"]):
                res["error"] = f"{st} {res['code']}" if res["code"] else str(st)
        return res

    def wave(self, calls):
        """The wave's calls at once, over up to CONNS connections."""
        results = [None] * len(calls)
        todo = list(range(len(calls)))
        lock = threading.Lock()

        def worker(i):
            while True:
                with lock:
                    if not todo:
                        return
                    k = todo.pop(0)
                results[k] = self.call(i, calls[k])

        n = min(CONNS, len(calls))
        if n == 1:
            worker(0)
        else:
            ts = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
        return results

    def step(self, n, step_waves):
        t0 = time.monotonic()
        calls = []
        for w in step_waves:
            calls += [r for r in self.wave(w) if r is not None]
        self.steps[n] = {"wait": time.monotonic() - t0, "calls": calls}

    def close(self):
        for i in range(CONNS):
            self.drop(i)


def replay(rec, port, students, mode, timeout, deadline_s, seed):
    calls = [dict(c, body=base64.b64decode(c["body_b64"])) for c in rec["calls"] if c["replay"]]
    order = [s["n"] for s in rec["steps"]]
    plan = {n: waves([c for c in calls if c["step"] == n]) for n in order}
    deadline = time.monotonic() + deadline_s
    rng = random.Random(seed)
    class_ = [Student(port, timeout, deadline, random.Random(rng.random()))
              for _ in range(students)]
    path = [n for n in order if n != 0]
    starts = list(range(students))
    rng.shuffle(starts)
    barrier = threading.Barrier(students)
    failures = []

    def together(s):
        for n in order:
            try:
                barrier.wait(timeout=max(0.1, deadline - time.monotonic()))
            except threading.BrokenBarrierError:
                pass
            s.step(n, plan[n])

    def spread(s, k):
        r = s.rng
        time.sleep(2 * r.random())
        s.step(0, plan[0])
        first = starts[k] * len(path) // students
        for j in range(len(path)):
            time.sleep(r.random())
            n = path[(first + j) % len(path)]
            s.step(n, plan[n])

    def run(k):
        s = class_[k]
        try:
            together(s) if mode == "together" else spread(s, k)
        except Exception as e:  # a fault of the client, not of attnd: stop the run loudly
            failures.append(f"student {k}: {type(e).__name__}: {e}")
            barrier.abort()
        finally:
            s.close()

    t0 = time.monotonic()
    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(students)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(1.0, deadline + timeout + 10 - time.monotonic()))
    if any(t.is_alive() for t in threads):
        failures.append("students still running past the deadline")
    if failures:
        raise RuntimeError("the replay failed: " + "; ".join(failures[:5]))
    return class_, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--attnd", required=True)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench", "classroom.md"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench", "classroom"))
    ap.add_argument("--students", default="30,60")
    ap.add_argument("--modes", default="together,spread")
    ap.add_argument("--lang", default="zh")
    ap.add_argument("--recording", help="replay this recording instead of walking the path")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per try of a call")
    ap.add_argument("--deadline", type=float, default=120.0, help="seconds per run")
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--unshared", default="60:together",
                    help="STUDENTS:MODE runs to repeat with ATTND_SHARE_JOBS=off (every request "
                         "computed, none shared), comma-separated; '' for none")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("run_classroom.py: needs root, to make the cgroups", file=sys.stderr)
        return 2
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    args.attnd = os.path.abspath(args.attnd)
    args.recording_out = os.path.join(args.work, "recording.json")
    t_start = datetime.datetime.now(datetime.timezone.utc)

    if args.recording:
        rec = json.load(open(args.recording))
    else:
        print("recording: one student walks the guided path in chromium", flush=True)
        rec = record(args, args.work)
    played = [c for c in rec["calls"] if c["replay"]]
    up = sum(len(base64.b64decode(c["body_b64"])) for c in played)
    down = sum(c["resp_bytes"] or 0 for c in played)
    purpose = [c for c in played if c.get("on_purpose")]
    print(f"recording: {len(played)} requests reached attnd over {len(rec['steps']) - 1} steps "
          f"and the load ({len(rec['calls']) - len(played)} from the browser's cache); "
          f"{up / 1e6:.1f} MB up, {down / 1e6:.1f} MB down", flush=True)

    runs = []
    plan = [(int(n), mode, "on") for n in args.students.split(",")
            for mode in args.modes.split(",")]
    plan += [(int(x.split(":")[0]), x.split(":")[1], "off")
             for x in args.unshared.split(",") if x]
    for n, mode, share in plan:
        name = f"attnd-classroom-{os.getpid()}-{n}-{mode}-{share}"
        cg = Cgroups(name, QUOTA_US, PERIOD_US, MEMORY_LIMIT)
        models = tempfile.mkdtemp(prefix="attnd-models-", dir=args.work)
        log = os.path.join(args.work, f"attnd-{n}-{mode}-share-{share}.log")
        p = None
        try:
            env, eargs = container_env(os.path.join(ROOT, "Dockerfile"), models,
                                       None if share == "on" else {"ATTND_SHARE_JOBS": "off"})
            p, port = start_attnd(args.attnd, env, eargs, log, preexec=cg.join)
            print(f"{n} students, {mode}, shared jobs {share}: attnd pid {p.pid} on port "
                  f"{port}", flush=True)
            busy0, attnd0, self0 = cpu_busy(), cpu_seconds(p.pid), self_cpu()
            class_, secs = replay(rec, port, n, mode, args.timeout, args.deadline,
                                  args.seed + n)
            cpu = {"attnd": cpu_seconds(p.pid) - attnd0, "client": self_cpu() - self0}
            cpu["others"] = max(0.0, cpu_busy() - busy0 - cpu["attnd"] - cpu["client"])
            hwm = vm_hwm(p.pid)
            shared = metric_value(port, "attnd_jobs_shared_total")
            alive = p.poll() is None
            stats = cg.stats()
        finally:
            if p is not None:
                stop(p)
            cg.remove()
            shutil.rmtree(models, ignore_errors=True)
        mem = log_fields(log, "memory")
        thr = log_fields(log, "threads")
        blas = log_fields(log, "blas")
        rows = summarise(rec, class_)
        runs.append({"students": n, "mode": mode, "share": share, "seconds": secs,
                     "rows": rows, "cpu": cpu, "shared": shared,
                     "hwm": hwm, "alive": alive, "cgroup": stats,
                     "memory_bound": int(mem.get("memory_bound", 0)) or None,
                     "memory_limit": int(mem.get("memory_limit", 0)) or None,
                     "memory_limit_source": mem.get("memory_limit_source", "?").strip('"'),
                     "threads": " ".join(f"{k}={v}" for k, v in thr.items()),
                     "blas": blas.get("kernel", "?")})
        steps_ = [r for r in rows if r["calls"] and r["n"] is not None]
        print(f"  {secs:.1f} s, {shared} requests shared, errors: "
              f"{counts(rows[-1]['errors']) or 0}, worst p99 "
              f"{max(r['p99'] for r in steps_):.2f} s, peak RSS {(hwm or 0) / 2**20:.0f} MiB",
              flush=True)

    report = render(args, rec, runs, t_start, played, up, down, purpose)
    with open(args.out, "w") as f:
        f.write(report)
    with open(os.path.join(args.work, "runs.json"), "w") as f:
        json.dump(runs, f, indent=1)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
