#!/usr/bin/python3
"""check_dashboard.py - deploy/grafana/attnd.json against the metrics attnd exports. Grafana is
not in Debian's archive, so the dashboard is not loaded into one; instead: it is a dashboard
JSON (title, uid, panels with a grid position, a Prometheus datasource given by the variable
${datasource}, and each target a PromQL expression), every metric its expressions and variables
name is one a live attnd's /metrics has, after a little traffic (with its _bucket, _sum and
_count series for a histogram), every label they select on or group by is one that metric
carries, and the metrics issue 28 added (by model, the request durations, parse and encode,
the sizes, process_*) each appear in some panel.

Usage: check_dashboard.py --dashboard deploy/grafana/attnd.json --attnd build/attnd
Prints one line per failed check and "N passed, N failed"; exits 1 on any failure.
"""
import argparse
import json
import os
import re
import signal
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from harness import Checks, start_attnd  # noqa: E402

check = Checks()
NAME = re.compile(r"\b((?:attnd|process)_[a-z0-9_]+)\b")
SELECTOR = re.compile(r"\b((?:attnd|process)_[a-z0-9_]+)\{([^}]*)\}")
BY = re.compile(r"\bby\s*\(([^)]*)\)")
LABEL_VALUES = re.compile(r"label_values\((\w+),\s*(\w+)\)")
MUST_USE = ["attnd_model_requests_total", "attnd_model_request_duration_seconds_bucket",
            "attnd_http_request_duration_seconds_bucket", "attnd_job_parse_seconds_bucket",
            "attnd_job_encode_seconds_bucket", "attnd_http_request_size_bytes_bucket",
            "attnd_http_response_size_bytes_bucket", "process_cpu_seconds_total",
            "process_resident_memory_bytes", "process_open_fds", "process_max_fds",
            "process_start_time_seconds"]


def exposition(port):
    """{series name: set of label names} of a live attnd's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    series = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s", line)
        if m:
            labels = set(re.findall(r'(\w+)="', m.group(3) or ""))
            series.setdefault(m.group(1), set()).update(labels | {"instance", "job"})
    return series


def traffic(port):
    """A job on a registry model (v1) and one on v2's sdpa, so that model series exist."""
    bodies = [("/v1/attention", {"query": [[0.1 * i for i in range(64)]], "model": "demo"}),
              ("/v2/models/sdpa/infer", {"inputs": [
                  {"name": n, "shape": [1, 1], "datatype": "FP32", "data": [1]}
                  for n in ("q", "k", "v")]})]
    for path, body in bodies:
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dashboard", required=True)
    ap.add_argument("--attnd", required=True)
    args = ap.parse_args()
    with open(args.dashboard) as f:
        d = json.load(f)
    check(d.get("title") and d.get("uid") and isinstance(d.get("panels"), list),
          "the dashboard has a title, a uid and panels")
    names = [v.get("name") for v in d.get("templating", {}).get("list", [])]
    check("datasource" in names, f"the dashboard has a datasource variable: {names}")
    exprs = []
    for v in d.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            exprs.append(v["definition"])
    panels = [p for p in d["panels"] if p.get("type") != "row"]
    for p in panels:
        gp = p.get("gridPos", {})
        check(all(isinstance(gp.get(k), int) for k in ("x", "y", "w", "h")) and
              gp["x"] + gp["w"] <= 24, f"panel {p.get('title')}: its gridPos {gp}")
        check(p.get("datasource", {}).get("uid") == "${datasource}",
              f"panel {p.get('title')}: its datasource is the variable")
        check(p.get("targets"), f"panel {p.get('title')} has targets")
        for t in p.get("targets", []):
            check(t.get("datasource", {}).get("uid") == "${datasource}" and t.get("expr"),
                  f"panel {p.get('title')}: a target without its datasource or expression")
            exprs.append(t.get("expr", ""))
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_attnd(os.path.abspath(args.attnd), [], os.path.join(tmp, "attnd.log"),
                                 "check_dashboard")
        try:
            traffic(port)
            series = exposition(port)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    used = set()
    for e in exprs:
        metrics = set(NAME.findall(e))
        used |= metrics
        for m in metrics:
            check(m in series, f"{m} (in {e[:80]}...) is not in attnd's /metrics")
        for m, sel in SELECTOR.findall(e):
            for label in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", sel):
                check(label in series.get(m, set()), f"{m} has no label {label} ({e[:80]}...)")
        for group in BY.findall(e):
            for label in [x.strip() for x in group.split(",") if x.strip()]:
                check(any(label in series.get(m, set()) for m in metrics),
                      f"no metric of {e[:80]}... has the label {label} it groups by")
        for m, label in LABEL_VALUES.findall(e):
            check(label in series.get(m, set()), f"label_values: {m} has no label {label}")
    for m in MUST_USE:
        check(m in used, f"no panel uses {m}")
    print(f"check_dashboard: {len(panels)} panels, {len(used)} metrics; {check.summary()}")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
