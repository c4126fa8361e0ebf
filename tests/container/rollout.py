#!/usr/bin/python3
"""rollout.py - a rolling update as a Kubernetes Service sees it, against two attnd containers
(an old pod and its replacement), with a client sending jobs all along: the client must see no
503 and no failed connection while the old pod is stopped.

The client plays the Service and kube-proxy: it sends each job to one of the endpoints, the pods
whose /readyz answered 200 at its last look (once a second, as endpoint updates reach kube-proxy
a moment after a pod's state changes), over a keep-alive connection per pod that it opens again
when a reply says Connection: close. Two seconds in, right after a look (so the old pod stays
an endpoint for a second after its SIGTERM, as endpoint updates lag in a cluster), it stops the
old pod the way the kubelet does (the stop command given: SIGTERM, then the grace period), and
goes on until the old pod has exited and one more second, at most --seconds in all.

Usage: rollout.py --old URL --new URL --stop 'podman stop -t 40 NAME' [--seconds 40]
Prints what it saw and "N passed, N failed"; exits 1 on any failure.
"""
import argparse
import http.client
import json
import shlex
import subprocess
import sys
import time
import urllib.parse

JOB = json.dumps({"q": [[1, 1], [0, 1], [1, 0], [0.5, 0.5]], "k": [[1, 1], [0, 1], [1, 0], [0.5, 0.5]],
                  "v": [[1, 0], [0, 1], [1, 1], [0.5, 0.5]]}).encode()


class Pod:
    def __init__(self, name, url):
        u = urllib.parse.urlsplit(url)
        self.name, self.host, self.port = name, u.hostname, u.port
        self.conn, self.ready, self.served = None, False, 0

    def probe(self):
        """/readyz on a connection of its own, as the kubelet's probe."""
        try:
            c = http.client.HTTPConnection(self.host, self.port, timeout=2)
            c.request("GET", "/readyz")
            self.ready = c.getresponse().status == 200
            c.close()
        except OSError:
            self.ready = False

    def send(self):
        """One job on the pod's keep-alive connection: (status, error text or None)."""
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
            self.conn.request("POST", "/v1/sdpa", JOB, {"Content-Type": "application/json"})
            r = self.conn.getresponse()
            r.read()
            if (r.getheader("Connection") or "").lower() == "close":
                self.conn.close()
                self.conn = None
            return r.status, None
        except (OSError, http.client.HTTPException) as e:
            if self.conn:
                self.conn.close()
            self.conn = None
            return 0, f"{type(e).__name__}: {e}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--stop", required=True)
    ap.add_argument("--seconds", type=float, default=40)
    args = ap.parse_args()
    old, new = Pod("old", args.old), Pod("new", args.new)
    pods = [old, new]
    statuses, errors = {}, []
    t0 = time.monotonic()
    last_probe, stopper, stopped_at, exited_at, after_term = 0.0, None, None, None, 0
    i = 0
    while time.monotonic() - t0 < args.seconds:
        now = time.monotonic()
        if now - last_probe >= 1.0:
            for p in pods:
                p.probe()
            last_probe = now
        if stopper is None and now - t0 >= 2.0:
            # Right after a look: the old pod stays an endpoint for a second after its SIGTERM,
            # as it does in a cluster while the endpoint update travels.
            for p in pods:
                p.probe()
            last_probe = now
            stopper = subprocess.Popen(shlex.split(args.stop), stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
            stopped_at = now
        if stopper is not None and exited_at is None and stopper.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > 1.0:
            break
        endpoints = [p for p in pods if p.ready]
        if not endpoints:
            errors.append("no ready endpoint")
            time.sleep(0.05)
            continue
        p = endpoints[i % len(endpoints)]
        i += 1
        status, err = p.send()
        statuses[status] = statuses.get(status, 0) + 1
        if status == 200:
            p.served += 1
            if p is old and stopped_at is not None:
                after_term += 1
        else:
            errors.append(f"{p.name}: {status} {err or ''}")
        time.sleep(0.005)
    failures = []
    if stopper is None or exited_at is None:
        failures.append(f"the old pod did not stop within {args.seconds} s")
    elif stopper.returncode != 0:
        failures.append(f"the stop command exited {stopper.returncode}")
    if statuses.get(503):
        failures.append(f"{statuses[503]} replies were 503")
    if errors:
        failures.append(f"{len(errors)} requests failed, the first: {errors[:3]}")
    if old.served == 0 or new.served == 0 or after_term == 0:
        failures.append(f"both pods should serve, the old one after SIGTERM too: old {old.served} "
                        f"({after_term} after SIGTERM), new {new.served}")
    took = (exited_at - stopped_at) if exited_at and stopped_at else -1
    print(f"rollout: {sum(statuses.values())} requests {statuses}; old pod served {old.served} "
          f"({after_term} after SIGTERM), new {new.served}; the old pod took {took:.1f} s to stop")
    for f in failures:
        print(f"FAIL {f}")
    checks = 5
    print(f"rollout: {checks - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
