#!/usr/bin/python3
"""log_json.py - attnd's log with --log-format json: every line, from start-up (the models) to
the drain's last line, is one JSON object, and its yes-or-no fields (has_bias and default of
each model; drained, forced and replies_sent of "stopped") are JSON booleans, never the strings
"true" and "false"; no field of any line holds such a string.

Usage: log_json.py --attnd build/attnd
Prints one line per failed check and "N passed, N failed"; exits 1 on any failure.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from harness import Checks

check = Checks()
BOOLEANS = {"model": ("has_bias", "default"), "stopped": ("drained", "forced", "replies_sent")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnd", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "attnd.log")
        # harness.start_attnd reads the text log's port; here the JSON one's.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("ATTND_") or k.startswith("ATTND_BLAS_")}
        with open(path, "w") as log:
            proc = subprocess.Popen([os.path.abspath(args.attnd), "--listen", "127.0.0.1:0",
                                     "--log-format", "json"], stdout=log, stderr=log, env=env)
        port, t0 = None, time.time()
        while port is None and time.time() - t0 < 20 and proc.poll() is None:
            text = open(path).read()
            m = re.search(r'"msg":"listening".*"port":(\d+)', text)
            # the port, once attnd is ready too (before, a job gets 503 not_ready)
            port = int(m.group(1)) if m and '"msg":"ready"' in text else None
            time.sleep(0.02)
        if port is None:
            proc.kill()
            sys.exit(f"log_json: attnd did not start; see {path}")
        try:
            body = json.dumps({"q": [[1.0]], "k": [[1.0]], "v": [[1.0]]}).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/sdpa", body,
                                         {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as r:
                check(r.status == 200, f"a job: {r.status}")
        finally:
            proc.send_signal(signal.SIGTERM)
            check(proc.wait(30) == 0, "attnd exits 0 after SIGTERM")
        with open(path) as f:
            lines = [ln for ln in f.read().splitlines() if ln.strip()]
    seen = {msg: 0 for msg in BOOLEANS}
    for ln in lines:
        try:
            rec = json.loads(ln)
        except ValueError:
            check(False, f"a line that is not JSON: {ln[:200]}")
            continue
        check(isinstance(rec, dict), f"a line that is not an object: {ln[:200]}")
        strings = [k for k, v in rec.items() if v in ("true", "false")]
        check(not strings, f"{rec.get('msg')}: {strings} hold the strings \"true\"/\"false\"")
        for key in BOOLEANS.get(rec.get("msg"), ()):
            seen[rec["msg"]] += 1
            check(isinstance(rec.get(key), bool),
                  f"{rec['msg']}: {key} is {rec.get(key)!r}, not a JSON boolean")
    check(seen["model"] >= 4 and seen["stopped"] == 3,
          f"the lines with booleans were seen: {seen} (two models or more, and \"stopped\")")
    stopped = [json.loads(ln) for ln in lines if '"msg":"stopped"' in ln]
    check(stopped and stopped[-1].get("drained") is True, f"stopped: drained is true: {stopped}")
    print(f"log_json: {check.summary()}")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
