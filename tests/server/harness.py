"""harness.py - what the Python tests of tests/server share: counted checks, and attnd started
on 127.0.0.1:0 as the tests need it (the ATTND_* variables of the environment dropped, but the
BLAS ones), ready once its log names its port and /readyz answers 200."""

import os
import re
import subprocess
import sys
import time
import urllib.request


class Checks:
    """check(ok, what): counts a passed check, or prints and keeps a failed one; returns ok."""

    def __init__(self):
        self.passed = 0
        self.failures = []

    def __call__(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failures.append(what)
            print("FAIL: " + what)
        return ok

    def summary(self):
        return f"{self.passed} passed, {len(self.failures)} failed"


def start_attnd(attnd, args, log_path, who, timeout=20):
    """attnd --listen 127.0.0.1:0 plus args, its output in log_path: (process, port) once
    /readyz answers 200; exits the test, naming who, when it does not within timeout s."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ATTND_") or k.startswith("ATTND_BLAS_")}
    log = open(log_path, "w")
    proc = subprocess.Popen([attnd, "--listen", "127.0.0.1:0"] + list(args), stdout=log,
                            stderr=log, env=env)
    log.close()
    t0 = time.time()
    while time.time() - t0 < timeout and proc.poll() is None:
        m = re.search(r" listening .*port=(\d+)", open(log_path).read())
        if m:
            port = int(m.group(1))
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
                    if r.status == 200:
                        return proc, port
            except OSError:
                pass
        time.sleep(0.02)
    proc.kill()
    sys.exit(f"{who}: attnd did not start; see {log_path}")
