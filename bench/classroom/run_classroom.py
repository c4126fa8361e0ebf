#!/usr/bin/python3
"""run_classroom.py - the guided path for a whole class on one attnd: `make bench-classroom`.

1. Record. attnd starts alone (the Dockerfile's environment, on loopback, JSON logs) and
   bench/classroom/record.mjs walks the guided path in headless chromium, one student in one
   language, recording every request the page makes and the step it belongs to. The recording is
   matched against attnd's access log (each request carries X-Request-Id rec-<step>): a request
   the browser answered from its cache never reached attnd and is not replayed; one attnd saw
   that the browser did not report (the favicon) is added. A request the lone walk got a 4xx for
   is part of the lesson (step 8 asks for the weights at n = 8k and shows the 413): it is marked
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
   own pauses between waves. Modes:
     together  every student on the same step at once: a barrier before each step;
     spread    each student loads the page at a random moment in the first 2 s, then starts at
               its own step (spread evenly over the path) and walks every step once, wrapping
               round, with a random pause of 0 to 1 s before each.
   A 503 is tried again after its Retry-After (times 1 to 1.5, at random), at most 3 times, as
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
"""

import argparse
import base64
import datetime
import http.client
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GIB = 1 << 30
CONNS = 6          # connections a browser keeps to one host
RETRIES = 3        # tries again after a 503
QUOTA_US, PERIOD_US = 200000, 100000
MEMORY_LIMIT = 2 * GIB


# ---- attnd as the container starts it ----------------------------------------------------------

def dockerfile_env(path):
    """The ENV of the Dockerfile's last stage, as {name: value} (KEY=VALUE pairs, continuations
    joined), and its ENTRYPOINT's arguments after the program."""
    text = open(path).read().replace("\\\n", " ")
    stages = re.split(r"^FROM\s", text, flags=re.M)
    last = stages[-1]
    env, args = {}, []
    for m in re.finditer(r"^ENV\s+(.*)$", last, re.M):
        for k, v in re.findall(r'(\w+)=("[^"]*"|\S+)', m.group(1)):
            env[k] = v.strip('"')
    m = re.search(r"^ENTRYPOINT\s+(\[.*\])\s*$", last, re.M)
    if m:
        args = json.loads(m.group(1))[1:]
    return env, args


def container_env(dockerfile, models_dir, extra=None):
    env, args = dockerfile_env(dockerfile)
    env = dict(env, PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               HOME="/tmp")
    env["ATTND_LISTEN"] = "127.0.0.1:0"
    env["ATTND_MODELS"] = models_dir
    env.update(extra or {})
    return env, args


def start_attnd(binary, env, args, log, preexec=None):
    """Starts attnd, waits for its port and /readyz: (proc, port)."""
    f = open(log, "wb")
    p = subprocess.Popen([binary] + args, env=env, stdout=f, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, preexec_fn=preexec)
    f.close()
    port, t0 = 0, time.monotonic()
    while not port and time.monotonic() - t0 < 30:
        if p.poll() is not None:
            raise RuntimeError(f"attnd exited {p.returncode}: " + open(log).read()[-800:])
        m = re.search(r'listening.*address"?[=:]"?127\.0\.0\.1:(\d+)', open(log).read())
        port = int(m.group(1)) if m else 0
        time.sleep(0.05)
    if not port:
        p.kill()
        raise RuntimeError("attnd reported no port: " + open(log).read()[-800:])
    t0 = time.monotonic()
    while time.monotonic() - t0 < 30:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return p, port
        except OSError:
            pass
        time.sleep(0.1)
    p.kill()
    raise RuntimeError("attnd did not become ready: " + open(log).read()[-800:])


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=40)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def vm_hwm(pid):
    """Peak RSS in bytes (VmHWM), or None."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def cpu_seconds(pid):
    """user + system CPU seconds of a process (all its threads), from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def self_cpu():
    t = os.times()
    return t.user + t.system


def cpu_busy():
    """CPU seconds the whole machine has been busy (not idle, not waiting on I/O)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def log_fields(log, msg):
    """The key=value fields of the first text log line whose message is msg."""
    for line in open(log, errors="replace"):
        parts = line.split(" ", 3)
        if len(parts) >= 3 and parts[2] == msg:
            return dict(re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', line))
    return {}


# ---- cgroup v1 -----------------------------------------------------------------------------------

class Cgroups:
    """A cpu and a memory cgroup (v1) made under this process's own, with a quota of
    QUOTA_US / PERIOD_US CPUs and a memory limit; join() (a preexec_fn) moves the calling process
    into both; remove() deletes them once empty."""

    def __init__(self, name, quota_us, period_us, memory):
        self.dirs = {}
        for ctl in ("cpu", "memory"):
            self.dirs[ctl] = os.path.join(self.own(ctl), name)
        try:
            for d in self.dirs.values():
                os.makedirs(d, exist_ok=True)
            self.write("cpu", "cpu.cfs_period_us", period_us)
            self.write("cpu", "cpu.cfs_quota_us", quota_us)
            self.write("memory", "memory.limit_in_bytes", memory)
        except OSError:
            self.remove()
            raise

    @staticmethod
    def own(ctl):
        """The folder of this process's v1 cgroup of controller ctl."""
        path = None
        for line in open("/proc/self/cgroup"):
            _, ctls, p = line.rstrip("\n").split(":", 2)
            if ctl in ctls.split(","):
                path = p
        if path is None:
            raise RuntimeError(f"no cgroup v1 {ctl} hierarchy in /proc/self/cgroup (cgroup v2 "
                               "only? this benchmark makes v1 cgroups)")
        for line in open("/proc/self/mountinfo"):
            left, right = line.split(" - ", 1)
            f, r = left.split(), right.split()
            if r[0] == "cgroup" and ctl in r[2].split(","):
                root, mount = f[3], f[4]
                rel = path[len(root):] if path.startswith(root) and root != "/" else path
                return mount + rel
        raise RuntimeError(f"the cgroup v1 {ctl} hierarchy is not mounted")

    def write(self, ctl, name, value):
        with open(os.path.join(self.dirs[ctl], name), "w") as f:
            f.write(str(value))

    def read(self, ctl, name):
        try:
            return open(os.path.join(self.dirs[ctl], name)).read()
        except OSError:
            return ""

    def join(self):
        for d in self.dirs.values():
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))

    def stats(self):
        cpu = dict(line.split() for line in self.read("cpu", "cpu.stat").splitlines() if line)
        oom = dict(line.split() for line in self.read("memory", "memory.oom_control").splitlines()
                   if line)
        num = lambda s: int(s) if s.strip().isdigit() else None  # noqa: E731
        return {"max_usage": num(self.read("memory", "memory.max_usage_in_bytes")),
                "failcnt": num(self.read("memory", "memory.failcnt")),
                "oom_kill": int(oom.get("oom_kill", 0)),
                "nr_periods": int(cpu.get("nr_periods", 0)),
                "nr_throttled": int(cpu.get("nr_throttled", 0)),
                "throttled_s": int(cpu.get("throttled_time", 0)) / 1e9}

    def remove(self):
        for d in self.dirs.values():
            for _ in range(50):
                try:
                    if os.path.isdir(d):
                        os.rmdir(d)
                    break
                except OSError:
                    time.sleep(0.1)


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
                return r.status, code, r.getheader("Retry-After"), len(body), down
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.drop(i)
                if not reused or attempt:
                    raise
            except BaseException:
                self.drop(i)
                raise
        raise OSError("unreachable")

    def call(self, i, c):
        """The call with the page's retries: a dict of status (or an error name), wait, tries,
        retried 503s, bytes up and down."""
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
            calls += self.wave(w)
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


# ---- 3. Report ---------------------------------------------------------------------------------

def nearest_rank(xs, p):
    xs = sorted(xs)
    return xs[max(0, math.ceil(p / 100 * len(xs)) - 1)] if xs else float("nan")


def summarise(rec, class_):
    """A row per step, and one for the whole path (n None): each student's waits summed."""
    rows = []
    for s in rec["steps"] + [None]:
        n = s["n"] if s else None
        if s:
            per = [st.steps[n] for st in class_ if n in st.steps]
            ncalls = sum(1 for c in rec["calls"] if c["replay"] and c["step"] == n)
        else:
            per = [{"wait": sum(p["wait"] for p in st.steps.values()),
                    "calls": [r for p in st.steps.values() for r in p["calls"]]}
                   for st in class_]
            ncalls = sum(1 for c in rec["calls"] if c["replay"])
        results = [r for p in per for r in p["calls"]]
        errors, purpose, retried = {}, 0, {}
        for r in results:
            if r["error"]:
                errors[r["error"]] = errors.get(r["error"], 0) + 1
            elif r["on_purpose"] and r["status"] == r["on_purpose"]:
                purpose += 1
            for k, v in r["retried_codes"].items():
                retried[k] = retried.get(k, 0) + v
        waits = [p["wait"] for p in per]
        rows.append({
            "n": n, "key": s["key"] if s else "all", "title": s["title"] if s else "the path",
            "calls": ncalls, "students": len(per), "p50": nearest_rank(waits, 50),
            "p99": nearest_rank(waits, 99), "errors": errors, "on_purpose": purpose,
            "retried": retried,
            "up": sum(r["up"] for r in results) / max(1, len(per)),
            "down": sum(r["down"] for r in results) / max(1, len(per))})
    return rows


def mb(b):
    return f"{b / 1e6:.2f}" if b >= 1e4 else f"{b / 1e6:.4f}"


def counts(d):
    return ", ".join(f"{k}: {v}" for k, v in sorted(d.items()))


def table(rows):
    out = ["| step | requests | p50 wait s | p99 wait s | errors | 503s retried | 4xx on purpose "
           "| MB up / student | MB down / student |",
           "|---|--:|--:|--:|---|---|--:|--:|--:|"]
    for r in rows:
        name = ("load" if r["n"] == 0 else "**the whole path** (waits summed)" if r["n"] is None
                else f"{r['n']} {r['key']}")
        if r["calls"] == 0:
            out.append(f"| {name} | 0 | - | - | - | - | - | 0 | 0 |")
            continue
        err = f"**{counts(r['errors'])}**" if r["errors"] else "0"
        out.append(f"| {name} | {r['calls']} | {r['p50']:.2f} | {r['p99']:.2f} | {err} | "
                   f"{counts(r['retried']) or 0} | {r['on_purpose']} | {mb(r['up'])} | "
                   f"{mb(r['down'])} |")
    return "\n".join(out)


def machine():
    model = "?"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return model, os.cpu_count(), os.environ.get("OPENBLAS_CORETYPE")


def git_head():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except OSError:
        return "?"


def gib(b):
    return f"{b / GIB:.2f} GiB" if b is not None else "?"


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
    for n in [int(x) for x in args.students.split(",")]:
        for mode in args.modes.split(","):
            name = f"attnd-classroom-{os.getpid()}-{n}-{mode}"
            cg = Cgroups(name, QUOTA_US, PERIOD_US, MEMORY_LIMIT)
            models = tempfile.mkdtemp(prefix="attnd-models-", dir=args.work)
            log = os.path.join(args.work, f"attnd-{n}-{mode}.log")
            p = None
            try:
                env, eargs = container_env(os.path.join(ROOT, "Dockerfile"), models)
                p, port = start_attnd(args.attnd, env, eargs, log, preexec=cg.join)
                print(f"{n} students, {mode}: attnd pid {p.pid} on port {port}", flush=True)
                busy0, attnd0, self0 = cpu_busy(), cpu_seconds(p.pid), self_cpu()
                class_, secs = replay(rec, port, n, mode, args.timeout, args.deadline,
                                      args.seed + n)
                cpu = {"attnd": cpu_seconds(p.pid) - attnd0, "client": self_cpu() - self0}
                cpu["others"] = max(0.0, cpu_busy() - busy0 - cpu["attnd"] - cpu["client"])
                hwm = vm_hwm(p.pid)
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
            runs.append({"students": n, "mode": mode, "seconds": secs, "rows": rows, "cpu": cpu,
                         "hwm": hwm, "alive": alive, "cgroup": stats,
                         "memory_bound": int(mem.get("memory_bound", 0)) or None,
                         "memory_limit": int(mem.get("memory_limit", 0)) or None,
                         "memory_limit_source": mem.get("memory_limit_source", "?").strip('"'),
                         "threads": " ".join(f"{k}={v}" for k, v in thr.items()),
                         "blas": blas.get("kernel", "?")})
            steps_ = [r for r in rows if r["calls"] and r["n"] is not None]
            print(f"  {secs:.1f} s, errors: {counts(rows[-1]['errors']) or 0}, worst p99 "
                  f"{max(r['p99'] for r in steps_):.2f} s, peak RSS {(hwm or 0) / 2**20:.0f} MiB",
                  flush=True)

    report = render(args, rec, runs, t_start, played, up, down, purpose)
    with open(args.out, "w") as f:
        f.write(report)
    with open(os.path.join(args.work, "runs.json"), "w") as f:
        json.dump(runs, f, indent=1)
    print(report)
    return 0


def render(args, rec, runs, t_start, played, up, down, purpose):
    model, cpus, coretype = machine()
    t_end = datetime.datetime.now(datetime.timezone.utc)
    steps = ", ".join(f"{s['n']} {s['key']}" for s in rec["steps"] if s["n"])
    by_step = {}
    for c in played:
        by_step[c["step"]] = by_step.get(c["step"], 0) + 1
    lines = [
        f"## The classroom, measured (`make bench-classroom`, {git_head()}, "
        f"{t_start:%Y-%m-%d %H:%M} to {t_end:%H:%M} UTC)",
        "",
        f"The machine: {model}, {cpus} CPUs"
        + (f"; OPENBLAS_CORETYPE={coretype} in this environment (not passed to attnd: the "
           "container does not set it)" if coretype else "")
        + ". attnd started as the container starts it (the Dockerfile's ENV, its ENTRYPOINT "
        "without arguments; ATTND_LISTEN on 127.0.0.1, ATTND_MODELS an empty folder), a fresh "
        f"one per run, in cgroup v1 with a CPU quota of {QUOTA_US / PERIOD_US:g} CPUs "
        f"({QUOTA_US}/{PERIOD_US} us) and a memory limit of {gib(MEMORY_LIMIT)}; the students "
        "are threads of one Python process on the same machine, outside those cgroups.",
        "",
        f"The recording: one headless chromium walked the guided path in `lang={rec['lang']}` "
        f"({steps}); {len(played)} requests reached attnd, per step "
        + ", ".join(f"{'load' if k == 0 else k}: {v}" for k, v in sorted(by_step.items()))
        + f"; {up / 1e6:.1f} MB up and {down / 1e6:.1f} MB down per student (bodies). "
        + ("On purpose: " + ", ".join(f"{c['method']} {c['path']} at step {c['step']} "
                                      f"({c['on_purpose']})" for c in purpose)
           + " (not an error when the replay gets it too). " if purpose else "")
        + "Students replay the requests in waves as the page sent them, without the page's "
        "pauses; a 503 is tried again after its Retry-After (times 1 to 1.5), at most 3 times. "
        "The wait of a step is from its first request to its last answer, retries included; p99 "
        "is the nearest rank (the slowest student at 30 and 60).",
        "",
    ]
    for run in runs:
        cg = run["cgroup"]
        mode = ("all on the same step at once (a barrier before each step)"
                if run["mode"] == "together" else
                "spread over the path (each from its own step, random pauses of 0 to 1 s)")
        lines += [
            f"### {run['students']} students, {mode}",
            "",
            table(run["rows"]),
            "",
            f"Run: {run['seconds']:.1f} s. attnd's peak RSS (VmHWM) "
            f"{(run['hwm'] or 0) / 2**20:.0f} MiB; its start log: memory_bound "
            f"{gib(run['memory_bound'])} ({run['memory_bound']}), memory_limit "
            f"{gib(run['memory_limit'])} from {run['memory_limit_source']}; threads: "
            f"{run['threads'] or '?'}; BLAS kernel {run['blas']}. The cgroup: peak usage "
            f"{gib(cg['max_usage'])}, "
            f"{cg['failcnt']} times at the limit, {cg['oom_kill']} OOM kills; throttled in "
            f"{cg['nr_throttled']} of {cg['nr_periods']} periods ({cg['throttled_s']:.1f} s). "
            f"CPU during the run: attnd {run['cpu']['attnd']:.1f} s, the students "
            f"{run['cpu']['client']:.1f} s, other processes on the machine "
            f"{run['cpu']['others']:.1f} s ({run['cpu']['others'] / run['seconds']:.2f} cores)."
            + ("" if run["alive"] else " **attnd had exited by the end of the run.**"),
            "",
        ]
    lines += goals(runs)
    return "\n".join(lines) + "\n"


def goals(runs):
    out = ["### Against the goals", "",
           "| goal | measured | |", "|---|---|---|"]
    ok = lambda b: "met" if b else "**missed**"  # noqa: E731
    for run in runs:
        if run["students"] != 60:
            continue
        rows = [r for r in run["rows"] if r["calls"] and r["n"] is not None]
        errs = {}
        for r in rows:
            for k, v in r["errors"].items():
                errs[k] = errs.get(k, 0) + v
        bad = [f"{'load' if r['n'] == 0 else r['n']}" for r in rows if r["errors"]]
        out.append(f"| 60 students, {run['mode']}: no error on any step (no 503, no 5xx, no "
                   f"time-out) | {sum(errs.values())} errors"
                   + (f" ({', '.join(f'{k}: {v}' for k, v in sorted(errs.items()))}; steps "
                      f"{', '.join(bad)})" if errs else "")
                   + f" | {ok(not errs)} |")
        slow = [r for r in rows if r["p99"] > 10]
        worst = max(rows, key=lambda r: r["p99"])
        out.append(f"| 60 students, {run['mode']}: every step ready within 10 s at p99 on 2 "
                   f"CPUs | worst: step {worst['n']} {worst['key']}, {worst['p99']:.1f} s"
                   + (f"; over 10 s: {', '.join(str(r['n']) for r in slow)}" if slow else "")
                   + f" | {ok(not slow)} |")
        hwm, bound = run["hwm"], run["memory_bound"]
        out.append(f"| 60 students, {run['mode']}: peak RSS below the logged bound | "
                   f"{(hwm or 0) / 2**20:.0f} MiB against {(bound or 0) / 2**20:.0f} MiB | "
                   f"{ok(hwm is not None and bound is not None and hwm < bound)} |")
    bounds = {r["memory_bound"] for r in runs}
    out.append(f"| the logged bound below 2 GiB | "
               f"{', '.join(gib(b) for b in sorted(b for b in bounds if b is not None))} | "
               f"{ok(all(b is not None and b < 2 * GIB for b in bounds))} |")
    return out + [""]


if __name__ == "__main__":
    sys.exit(main())
