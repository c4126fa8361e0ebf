"""attnd_proc.py - attnd as the classroom benchmark starts it: the container's environment
(the Dockerfile's ENV and ENTRYPOINT), the process and its log fields, its CPU and peak RSS, and
the cgroups (v1) it runs in. Used by run_classroom.py; see its docstring.
"""

import http.client
import json
import os
import re
import signal
import subprocess
import time


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GIB = 1 << 30
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


def metric_value(port, name):
    """A sample of attnd's /metrics without labels, as a number (None when missing)."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    return None


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
