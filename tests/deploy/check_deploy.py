#!/usr/bin/python3
"""check_deploy.py - checks deploy/ and the Dockerfile: every YAML parses, the Kubernetes
manifests carry the probes, resources and security settings deploy/README.md promises, every
ATTND_* setting they use is one attnd knows, Prometheus' config passes `promtool check config`,
and the systemd unit passes `systemd-analyze verify` where systemd-analyze exists.

Usage: /usr/bin/python3 tests/deploy/check_deploy.py ATTND_BINARY
Exits non-zero on any failed check.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

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
