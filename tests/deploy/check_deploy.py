#!/usr/bin/python3
"""check_deploy.py - checks deploy/ and the Dockerfile: every YAML parses, the Kubernetes
manifests carry the probes, resources and security settings deploy/README.md promises, every
ATTND_* setting they use is one attnd knows, each container with a memory limit sets
ATTND_MAX_MEMORY and attnd started with its settings logs a bound that fits the limit (no
memory_unfit), Prometheus' config passes `promtool check config`, and the systemd unit passes
`systemd-analyze verify` where systemd-analyze exists.

Usage: /usr/bin/python3 tests/deploy/check_deploy.py ATTND_BINARY
Exits non-zero on any failed check.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
failures = []
checks = 0


def check(ok, what):
    global checks
    checks += 1
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


# Kubernetes' quantities of memory: a number with an optional decimal or binary suffix.
QUANTITY = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity_bytes(q):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kMGT]i?|Ki)?", str(q).strip())
    if not m or (m.group(2) or "") not in QUANTITY:
        return None
    return int(float(m.group(1)) * QUANTITY[m.group(2) or ""])


def limited_containers(docs):
    """(name, container, its ATTND_* settings, its args) for each container of a Deployment or a
    ServingRuntime that has a memory limit. Settings come from the ConfigMaps it names in envFrom,
    then its env list, as the kubelet applies them."""
    configmaps = {d.get("metadata", {}).get("name"): d.get("data") or {}
                  for ds in docs.values() for d in ds if d.get("kind") == "ConfigMap"}
    for rel, ds in docs.items():
        for d in ds:
            kind = d.get("kind")
            if kind == "Deployment":
                conts = d.get("spec", {}).get("template", {}).get("spec", {}).get("containers")
            elif kind == "ServingRuntime":
                conts = d.get("spec", {}).get("containers")
            else:
                continue
            for c in conts or []:
                if "memory" not in (c.get("resources", {}).get("limits") or {}):
                    continue
                env = {}
                for src in c.get("envFrom") or []:
                    ref = (src.get("configMapRef") or {}).get("name")
                    check(ref in configmaps, f"{rel}: the ConfigMap {ref} it names is in deploy/k8s")
                    env.update(configmaps.get(ref, {}))
                for e in c.get("env") or []:
                    if "value" in e:
                        env[e["name"]] = str(e["value"])
                name = f"{rel} {kind} {d.get('metadata', {}).get('name')}/{c.get('name')}"
                yield name, c, {k: v for k, v in env.items() if k.startswith("ATTND_")}, c.get("args") or []


def limited_others(docs):
    """The same for the compose service and the systemd unit: (name, a container-like dict with
    resources.limits, ATTND_* settings, args)."""
    compose = docs.get("deploy/docker-compose.yml", [{}])[0].get("services", {}).get("attnd", {})
    env = {k: str(v) for k, v in (compose.get("environment") or {}).items() if k.startswith("ATTND_")}
    limits = {}
    if "mem_limit" in compose:  # Docker's suffixes are powers of 1024
        limits["memory"] = re.sub(r"([kmgt])b?$", lambda m: m.group(1).upper() + "i",
                                  str(compose["mem_limit"]).lower())
    if "cpus" in compose:
        limits["cpu"] = str(compose["cpus"])
    yield "deploy/docker-compose.yml service attnd", {"resources": {"limits": limits}}, env, []
    unit = open(os.path.join(ROOT, "deploy", "attnd.service")).read()
    env, limits = {}, {}
    for line in unit.splitlines():
        m = re.match(r"Environment=(ATTND_[A-Z_]+)=(.*)$", line.strip())
        if m:
            env[m.group(1)] = m.group(2)
        m = re.match(r"MemoryMax=(\d+)([KMGT]?)$", line.strip())
        if m:  # systemd's suffixes are powers of 1024
            limits["memory"] = m.group(1) + (m.group(2) + "i" if m.group(2) else "")
        m = re.match(r"CPUQuota=(\d+)%$", line.strip())
        if m:
            limits["cpu"] = str(int(m.group(1)) / 100)
    yield "deploy/attnd.service", {"resources": {"limits": limits}}, env, []


class Cgroups:
    """A cgroup v1 under this process's own in the memory and cpu hierarchies (as these machines
    have), with the limit and quota given; attnd started with its preexec joins them. Empty when
    the machine has none writable (then attnd sees the machine's limits, and the checks that it
    read the cgroup are skipped with a note)."""

    def __init__(self, memory, cpus):
        self.dirs = []
        own = {}
        for line in open("/proc/self/cgroup"):
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            for c in ctrls.split(","):
                own[c] = path
        for ctrl, files in (("memory", {"memory.limit_in_bytes": str(memory)}),
                            ("cpu", {"cpu.cfs_period_us": "100000",
                                     "cpu.cfs_quota_us": str(int(cpus * 100000)) if cpus else "-1"})):
            if ctrl not in own:
                continue
            d = f"/sys/fs/cgroup/{ctrl}{own[ctrl].rstrip('/')}/attnd-deploy-{os.getpid()}"
            try:
                os.makedirs(d, exist_ok=True)
                for f, v in files.items():
                    with open(os.path.join(d, f), "w") as fh:
                        fh.write(v)
                self.dirs.append(d)
            except OSError as e:
                print(f"note: no cgroup {ctrl} here ({e})")

    def join(self):
        for d in self.dirs:
            with open(os.path.join(d, "cgroup.procs"), "w") as fh:
                fh.write(str(os.getpid()))

    def remove(self):
        for d in self.dirs:
            try:
                os.rmdir(d)
            except OSError:
                pass


def start_log(attnd, args, env, timeout, preexec=None):
    """Starts attnd (running preexec in the child first) and collects its JSON log records until
    it logs "ready", exits, or timeout seconds pass; then SIGTERMs it and waits. Returns (records,
    exit status or None if it had to be killed)."""
    p = subprocess.Popen([attnd, *args], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, preexec_fn=preexec)
    records, ready = [], threading.Event()

    def read():
        for line in p.stderr:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            records.append(rec)
            if rec.get("msg") == "ready":
                ready.set()
        ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    ready.wait(timeout)
    p.terminate()
    try:
        status = p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        status = None
    reader.join(timeout)
    return records, status


def check_memory(attnd, docs):
    """Each manifest with a memory limit (the Deployment with its ConfigMap, the ServingRuntime,
    the compose service, the systemd unit): attnd started with its settings (its models and
    address are the container's, so they are left out, and it listens on a free loopback port)
    in a cgroup this test makes with the manifest's memory limit and CPU quota must read them
    (its memory_limit is the manifest's, its workers the CPUs), log a memory bound that, with its
    size at rest, fits the limit, and name no flag that cannot fit. ATTND_MAX_MEMORY must be set,
    so that the bound does not hang on reading a cgroup either."""
    found = 0
    for name, cont, env, args in [*limited_containers(docs), *limited_others(docs)]:
        limits = cont["resources"]["limits"]
        check("memory" in limits, f"{name}: sets a memory limit ({limits})")
        if "memory" not in limits:
            continue
        found += 1
        limit = quantity_bytes(limits["memory"])
        cpus = float(str(limits["cpu"]).rstrip("m")) / (1000 if str(limits["cpu"]).endswith("m") else 1) \
            if "cpu" in limits else None
        check(limit is not None, f"{name}: its memory limit {limits['memory']} is a quantity")
        check("ATTND_MAX_MEMORY" in env, f"{name}: sets ATTND_MAX_MEMORY for its {limits['memory']} limit")
        check(cpus is not None and "ATTND_THREADS" in env and float(env["ATTND_THREADS"]) <= cpus,
              f"{name}: sets a CPU limit ({cpus}) and ATTND_THREADS within it ({env.get('ATTND_THREADS')})")
        run_env = {k: v for k, v in os.environ.items() if not k.startswith("ATTND_")}
        run_env.update({k: v for k, v in env.items() if k not in ("ATTND_MODELS", "ATTND_LISTEN")})
        # the log as records, and SIGTERM ends it at once (the delay is not memory)
        run_env.update(ATTND_LOG_FORMAT="json", ATTND_SHUTDOWN_DELAY="0")
        run_args, skip = [], False
        for a in args:
            if skip or a.startswith(("--listen", "--models")):
                skip = a in ("--listen", "--models")
                continue
            run_args.append(a)
        run_args += ["--listen", "127.0.0.1:0"]
        groups = Cgroups(limit or 0, cpus)
        t0 = time.monotonic()
        try:
            records, status = start_log(attnd, run_args, run_env, 5.0,
                                        preexec=groups.join if groups.dirs else None)
        finally:
            groups.remove()
        took = time.monotonic() - t0
        mem = next((r for r in records if r.get("msg") == "memory"), None)
        threads = next((r for r in records if r.get("msg") == "threads"), None)
        check(mem is not None, f"{name}: attnd logs its memory line ({took:.1f} s)")
        if mem is None or limit is None:
            continue
        if groups.dirs:
            check(mem["memory_limit"] == limit and "cgroup" in mem["memory_limit_source"],
                  f"{name}: attnd reads the limit of the cgroup it runs in: {mem['memory_limit']} "
                  f"from {mem['memory_limit_source']}")
        used = mem["memory_bound"] + mem["rest_bytes"]
        check(used <= limit,
              f"{name}: memory_bound {mem['memory_bound']} + rest_bytes {mem['rest_bytes']} = {used} "
              f"<= its memory limit {limit} (max_memory={mem['max_memory']}, memory_limit={mem['memory_limit']} "
              f"from {mem['memory_limit_source']})")
        unfit = [r for r in records if r.get("msg") == "memory_unfit"]
        flags = [f for r in unfit for f in r.get("flags", "").split(", ") if f]
        check(not flags, f"{name}: no memory_unfit ({', '.join(flags) or 'every flag fits'}; "
              f"fixed {mem['fixed_bytes']}, replies {mem['reply_bytes']}, jobs {mem['job_budget_bytes']})")
        check(threads is not None and cpus is not None and threads["workers"] <= cpus,
              f"{name}: attnd runs at most its {cpus} CPUs' workers ({threads and threads['workers']})")
        check(status == 0 and took < 10, f"{name}: attnd ends on SIGTERM with 0 ({status}, {took:.1f} s)")
        if env.get("ATTND_MAX_MEMORY") and "envFrom" in cont:
            # the ConfigMap's comment shows the shares: they must be the ones attnd logs
            with open(os.path.join(ROOT, "deploy", "k8s", "configmap.yaml")) as f:
                text = f.read()
            for key in ("fixed_bytes", "reply_bytes", "job_budget_bytes"):
                check(f"{mem[key]:,}" in text, f"{name}: configmap.yaml's comment shows {key} {mem[key]:,}")
    check(found >= 4, f"the Deployment, the ServingRuntime, compose and the systemd unit have memory limits ({found})")


def main():
    attnd = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
    docs = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "deploy", "**", "*.y*ml"), recursive=True)):
        rel = os.path.relpath(path, ROOT)
        try:
            docs[rel] = load_all(path)
            check(True, f"{rel} parses")
        except yaml.YAMLError as e:
            check(False, f"{rel} parses: {e}")
    check(len(docs) >= 6, f"deploy/ holds the compose, prometheus and k8s files ({len(docs)} YAML files)")

    # The settings attnd knows, from its own --help.
    known = set()
    if attnd:
        out = subprocess.run([attnd, "--help"], capture_output=True, text=True)
        known = set(re.findall(r"ATTND_[A-Z_]+", out.stdout + out.stderr))
        check(len(known) >= 10, f"attnd --help names its ATTND_* variables ({len(known)})")

    k8s = [d for rel, ds in docs.items() if rel.startswith("deploy/k8s") for d in ds]
    kinds = {}
    for d in k8s:
        kinds.setdefault(d.get("kind"), []).append(d)
    for kind in ("Deployment", "Service", "HorizontalPodAutoscaler", "ConfigMap"):
        check(kind in kinds, f"k8s has a {kind}")

    dep = kinds.get("Deployment", [{}])[0]
    spec = dep.get("spec", {}).get("template", {}).get("spec", {})
    cont = (spec.get("containers") or [{}])[0]
    live = cont.get("livenessProbe", {}).get("httpGet", {})
    ready = cont.get("readinessProbe", {}).get("httpGet", {})
    check(live.get("path") == "/healthz", "the liveness probe is GET /healthz")
    check(ready.get("path") == "/readyz", "the readiness probe is GET /readyz")
    res = cont.get("resources", {})
    check(all(k in res.get("requests", {}) for k in ("cpu", "memory")), "cpu and memory requests")
    check(all(k in res.get("limits", {}) for k in ("cpu", "memory")), "cpu and memory limits")
    psc, csc = spec.get("securityContext", {}), cont.get("securityContext", {})
    check(psc.get("runAsNonRoot") is True and psc.get("runAsUser", 0) != 0, "pods run as non-root")
    check(csc.get("readOnlyRootFilesystem") is True, "the root filesystem is read-only")
    check(csc.get("allowPrivilegeEscalation") is False, "no privilege escalation")
    check("ALL" in csc.get("capabilities", {}).get("drop", []), "all capabilities dropped")
    ports = {p.get("name"): p.get("containerPort") for p in cont.get("ports", [])}
    check(ports.get("http") == 8080, "the container serves http on 8080")

    labels = dep.get("spec", {}).get("template", {}).get("metadata", {}).get("labels", {})
    svc = kinds.get("Service", [{}])[0].get("spec", {})
    check(svc.get("selector") and all(labels.get(k) == v for k, v in svc["selector"].items()),
          "the Service selects the Deployment's pods")
    check(any(p.get("targetPort") in ("http", 8080) for p in svc.get("ports", [])),
          "the Service targets the http port")
    hpa = kinds.get("HorizontalPodAutoscaler", [{}])[0].get("spec", {})
    check(hpa.get("scaleTargetRef", {}).get("name") == dep.get("metadata", {}).get("name"),
          "the HPA scales the Deployment")
    check(any(m.get("resource", {}).get("name") == "cpu" for m in hpa.get("metrics", [])),
          "the HPA scales on CPU")

    envs = set()
    for cm in kinds.get("ConfigMap", []):
        envs |= {k for k in (cm.get("data") or {}) if k.startswith("ATTND_")}
    compose = docs.get("deploy/docker-compose.yml", [{}])[0]
    csvc = compose.get("services", {})
    envs |= {k for k in (csvc.get("attnd", {}).get("environment") or {}) if k.startswith("ATTND_")}
    with open(os.path.join(ROOT, "deploy", "attnd.service")) as f:
        unit = f.read()
    envs |= set(re.findall(r"Environment=(ATTND_[A-Z_]+)=", unit))
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        dockerfile = f.read()
    envs |= set(re.findall(r"\b(ATTND_[A-Z_]+)=", dockerfile))
    if known:
        unknown = sorted(envs - known)
        check(not unknown, f"every ATTND_* setting used is one attnd knows ({', '.join(unknown) or 'all known'})")

    check("attnd" in csvc and "prometheus" in csvc, "compose runs attnd and Prometheus")
    check("8080:8080" in [str(p) for p in csvc.get("attnd", {}).get("ports", [])], "compose publishes 8080")
    prom = docs.get("deploy/prometheus.yml", [{}])[0]
    targets = [t for sc in prom.get("scrape_configs", []) for c in sc.get("static_configs", [])
               for t in c.get("targets", [])]
    check("attnd:8080" in targets, "Prometheus scrapes attnd:8080")
    check(all(sc.get("metrics_path", "/metrics") == "/metrics" for sc in prom.get("scrape_configs", [])),
          "Prometheus scrapes /metrics")
    promtool = shutil.which("promtool")
    check(promtool is not None, "promtool is installed")
    if promtool:
        r = subprocess.run([promtool, "check", "config", os.path.join(ROOT, "deploy", "prometheus.yml")],
                           capture_output=True, text=True)
        check(r.returncode == 0, "promtool check config deploy/prometheus.yml" + ("" if r.returncode == 0 else ": " + r.stdout + r.stderr))

    for key in ("DynamicUser=yes", "ProtectSystem=strict", "NoNewPrivileges=yes", "ProtectHome=yes"):
        check(key in unit, f"attnd.service sets {key}")
    sa = shutil.which("systemd-analyze")
    if sa and attnd:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "attnd.service")
            with open(path, "w") as f:
                f.write(unit.replace("/usr/local/bin/attnd", attnd))
            r = subprocess.run([sa, "verify", path], capture_output=True, text=True)
            check(r.returncode == 0, "systemd-analyze verify attnd.service" + ("" if r.returncode == 0 else ": " + r.stderr))
    else:
        print("skip: systemd-analyze is not available here")

    # The image's HEALTHCHECK: attnd --health-check answers 0 with a daemon up, 1 without.
    if attnd:
        import socket
        import time
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, ATTND_LISTEN=f"0.0.0.0:{port}")
        down = subprocess.run([attnd, "--health-check"], env=env, capture_output=True, text=True)
        check(down.returncode == 1, f"--health-check fails with no daemon ({down.returncode})")
        d = subprocess.Popen([attnd, "--listen", f"127.0.0.1:{port}"], stderr=subprocess.DEVNULL)
        try:
            up = None
            for _ in range(50):
                up = subprocess.run([attnd, "--health-check"], env=env, capture_output=True)
                if up.returncode == 0:
                    break
                time.sleep(0.1)
            check(up.returncode == 0, "--health-check passes against a running daemon")
        finally:
            d.terminate()
            d.wait(10)

    if attnd:
        check_memory(attnd, docs)

    stages = re.findall(r"^FROM\s+(\S+)", dockerfile, re.M)
    check(stages[:1] == ["debian:bookworm"] and stages[-1:] == ["debian:bookworm-slim"] and len(stages) == 2,
          f"the Dockerfile builds on debian:bookworm and runs on debian:bookworm-slim ({stages})")
    user = re.findall(r"^USER\s+(\S+)", dockerfile, re.M)
    check(user and not user[-1].startswith(("root", "0")), "the image runs as a non-root user")
    check(re.search(r"^EXPOSE\s+8080\b", dockerfile, re.M) is not None, "the image exposes 8080")
    check(re.search(r"^HEALTHCHECK\b.*", dockerfile, re.M) is not None, "the image has a HEALTHCHECK")

    print(f"deploy: {checks} checks, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
