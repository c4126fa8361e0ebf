#!/usr/bin/python3
"""lockout.py - issue 23's repro of finding 1, run against attnd with its default flags, on
127.0.0.1 only, bounded in time (SECS, 100 by default): not part of `make test` (it takes its
time by design); test_reliability's slow_reader runs the same scenario scaled to a 16 MiB budget.

Client A posts /v1/sdpa with q, k, v of shape (3000, 1) and need_weights (a reply bound of
153 MB) and reads 1 MiB of its reply every 42 s; client B posts the same at L = S = 2626,
which does not fit beside A (503); client C sends a tiny job every 0.5 s. Prints how many of
C's jobs got 200, when attnd cut A (its log's send_timeout line, seconds from the start), and
the budget held at the end. Exits 1 when fewer than 99% of C's jobs got 200.

Usage: /usr/bin/python3 tests/reliability/lockout.py build/attnd [SECS]
"""
import base64
import http.client
import json
import random
import re
import socket
import struct
import subprocess
import sys
import threading
import time

attnd = sys.argv[1]
SECS = float(sys.argv[2]) if len(sys.argv) > 2 else 100.0
log_path = "/tmp/attnd-lockout.log"
p = subprocess.Popen([attnd, "--listen", "127.0.0.1:0"], stderr=open(log_path, "w"))
port = None
t_start = time.time()
while port is None and time.time() - t_start < 20:
    text = open(log_path).read()
    m = re.search(r"listening .*port=(\d+)", text)
    port = int(m.group(1)) if m and re.search(r"^\S+ info ready$", text, re.M) else None
    time.sleep(0.05)
if port is None:
    p.kill()
    raise SystemExit("attnd did not start")
time.sleep(0.3)


def tensor(n):
    random.seed(n)
    b = struct.pack("<%df" % n, *[random.uniform(-1, 1) for _ in range(n)])
    return {"dtype": "float32", "shape": [n, 1], "data": base64.b64encode(b).decode()}


def body(n):
    x = tensor(n)
    return json.dumps({"q": x, "k": x, "v": x, "need_weights": True}).encode()


def post(b):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", "/v1/sdpa", body=b, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    c.close()
    return r.status


def metric(name):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return -1.0


a_body, b_body = body(3000), body(2626)
tiny = json.dumps({"q": [[1, 0], [0, 1]], "k": [[1, 0], [0, 1]], "v": [[1, 2], [3, 4]]}).encode()
t0 = time.time()
a_read = [0]


def client_a():
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/sdpa HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(a_body) + a_body)
    while time.time() - t0 < SECS:
        want = 1 << 20
        try:
            while want > 0:
                s.settimeout(max(0.1, SECS - (time.time() - t0)))
                d = s.recv(min(want, 65536))
                if not d:
                    return
                a_read[0] += len(d)
                want -= len(d)
        except (socket.timeout, OSError):
            return
        end = time.time() + 42
        while time.time() < end and time.time() - t0 < SECS:
            time.sleep(0.2)
    s.close()


th = threading.Thread(target=client_a)
th.start()
while metric("attnd_unsent_reply_bytes") <= 0 and time.time() - t0 < 20:
    time.sleep(0.05)
held = metric("attnd_unsent_reply_bytes")
b_status = post(b_body)
ok = total = 0
while time.time() - t0 < SECS:
    total += 1
    ok += post(tiny) == 200
    time.sleep(0.5)
th.join()
end_held = metric("attnd_unsent_reply_bytes")
p.terminate()
p.wait()
cut = None
for line in open(log_path):
    if " warn send_timeout " in line:
        ts = time.mktime(time.strptime(line[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        cut = ts + float("0" + line[19:23]) - t0
        break
print(f"lockout: A's reply held {held / 1e6:.0f} MB; B got {b_status}; C: {ok} of {total} tiny "
      f"jobs got 200 in {SECS:.0f} s; attnd cut A "
      + (f"{cut:.1f} s after the start" if cut is not None else "never")
      + f" (A had read {a_read[0] / 1e6:.1f} MB); reply bytes held at the end: {end_held:.0f}")
sys.exit(0 if total and ok >= 0.99 * total else 1)
