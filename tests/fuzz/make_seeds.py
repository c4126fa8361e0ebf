#!/usr/bin/env python3
"""make_seeds.py - writes the seed corpora of the fuzz targets from the test cases.

Usage: make_seeds.py --cases tests/api_cases --out DIR

DIR/request/      one input per tests/api_cases/requests/*/*.case: an options byte (bit 0: sdpa,
                  bit 1: the tight limits; see fuzz_request.c) then the body; 200 cases also once
                  with the tight limits
DIR/v2/           one input per tests/api_cases/requests/v2/*.case: an options byte (bits 0-1: the
                  model, bit 3: version 1; see fuzz_v2.c), the header length (2 bytes), the body
DIR/base64/       the "data" strings of the binary tensors in those cases, and a few edge cases
DIR/safetensors/  every tests/api_cases/safetensors/*/*/model.safetensors
DIR/http/         raw HTTP/1.1 requests (see fuzz_http.c: a first byte picks the daemon, bit 0 =
                  the one with an API key and CORS): each request case with Content-Length and
                  chunked, the GET routes, preflights, auth, and malformed framing

The corpora are rebuilt from scratch each time; only the cases are kept in git.
"""
import argparse
import os
import re
import shutil
import struct


def read_case(path):
    with open(path, "rb") as f:
        raw = f.read()
    nl = raw.find(b"\n")
    head, body = raw[:nl].decode(), raw[nl + 1:]
    return head, body


def write(d, name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def http_post(path, body, key=None, chunks=None, extra=b""):
    h = b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    if key:
        h += b"Authorization: Bearer " + key + b"\r\n"
    h += extra
    if chunks is None:
        return h + b"Content-Length: %d\r\n\r\n" % len(body) + body
    out = h + b"Transfer-Encoding: chunked\r\n\r\n"
    step = max(1, len(body) // chunks)
    for i in range(0, len(body), step):
        part = body[i:i + step]
        out += b"%x\r\n" % len(part) + part + b"\r\n"
    return out + b"0\r\n\r\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    dirs = {k: os.path.join(a.out, k) for k in ("request", "v2", "base64", "safetensors", "http")}
    for d in dirs.values():
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)

    b64 = set()
    n = 0
    for op, bit in (("attention", 0), ("sdpa", 1)):
        cdir = os.path.join(a.cases, "requests", op)
        for name in sorted(os.listdir(cdir)):
            if not name.endswith(".case"):
                continue
            head, body = read_case(os.path.join(cdir, name))
            stem = f"{op}-{name[:-5]}"
            write(dirs["request"], stem, bytes([bit]) + body)
            if head.startswith("200"):
                write(dirs["request"], stem + "-tight", bytes([bit | 2]) + body)
            for m in re.finditer(rb'"data"\s*:\s*"([^"]*)"', body):
                b64.add(m.group(1))
            if len(body) <= 64 << 10:  # the HTTP target's body cap
                path = b"/v1/" + op.encode()
                write(dirs["http"], stem + "-cl", b"\x00" + http_post(path, body))
                if head.startswith("200"):
                    write(dirs["http"], stem + "-chunked", b"\x00" + http_post(path, body, chunks=3))
                    write(dirs["http"], stem + "-key",
                          b"\x01" + http_post(path, body, key=b"fuzz-key",
                                              extra=b"Origin: http://allowed.example\r\n"))
            n += 1
    # Decode sessions (the request target's bit 3): the open's body, a newline, the append's.
    open_bodies = []
    for kind in ("session_open", "session_append"):
        cdir = os.path.join(a.cases, "requests", kind)
        for name in sorted(os.listdir(cdir)):
            if not name.endswith(".case"):
                continue
            head, body = read_case(os.path.join(cdir, name))
            if kind == "session_open":
                open_bodies.append(body)
                body = body + b"\n" + b'{"query": {"init": "uniform", "seed": 1, "shape": [1, 64]}}'
            write(dirs["request"], f"{kind}-{name[:-5]}", bytes([8]) + body)
            if kind == "session_open" and len(body) <= 64 << 10:
                write(dirs["http"], f"{kind}-{name[:-5]}-cl",
                      b"\x00" + http_post(b"/v1/sessions", body.split(b"\n")[0]))
            n += 1
    vdir = os.path.join(a.cases, "requests", "v2")
    model_bits = {"demo": 0, "lesson": 1, "tiny": 2, "sdpa": 3}
    for name in sorted(os.listdir(vdir)):
        if not name.endswith(".case"):
            continue
        head, body = read_case(os.path.join(vdir, name))
        words = dict(w.split("=", 1) for w in head.split(" | ")[0].split() if "=" in w)
        opt = model_bits.get(words.get("model"), 0) | (8 if words.get("version") == "1" else 0)
        hl = int(words.get("header", 0xFFFF))
        if "sequence" in name:
            opt |= 32  # a store of decode sessions for the sequence parameters
        write(dirs["v2"], f"v2-{name[:-5]}", bytes([opt]) + struct.pack("<H", min(hl, 0xFFFE))
              + body)
        if len(body) <= 64 << 10:
            path = b"/v2/models/" + words.get("model", "demo").encode() + b"/infer"
            extra = b"Inference-Header-Content-Length: %d\r\n" % hl if hl != 0xFFFF else b""
            write(dirs["http"], f"v2-{name[:-5]}-cl", b"\x00" + http_post(path, body,
                                                                         extra=extra))
        n += 1
    for i, s in enumerate(sorted(b64) + [b"", b"AA==", b"AAA=", b"AAAA", b"////", b"A===",
                                         b"AB==", b"+/+/", b"AAAAAAAAAAAAAAAAAAAAAAAA"]):
        write(dirs["base64"], f"b64-{i:03d}", s)
    for kind in ("valid", "invalid"):
        sdir = os.path.join(a.cases, "safetensors", kind)
        for name in sorted(os.listdir(sdir)):
            src = os.path.join(sdir, name, "model.safetensors")
            if os.path.exists(src):
                shutil.copy(src, os.path.join(dirs["safetensors"], f"{kind}-{name}"))

    get = b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n"
    fixed = {
        "get-healthz": b"\x00" + get % (b"/healthz", b""),
        "get-readyz": b"\x00" + get % (b"/readyz", b""),
        "get-models": b"\x00" + get % (b"/v1/models", b""),
        "get-model": b"\x00" + get % (b"/v1/models/lesson", b""),
        "get-model-encoded": b"\x00" + get % (b"/v1/models/%6Cesson", b""),
        "get-model-unknown": b"\x00" + get % (b"/v1/models/nope%00x", b""),
        "get-metrics": b"\x00" + get % (b"/metrics", b""),
        "get-v2": b"\x00" + get % (b"/v2", b""),
        "get-v2-ready": b"\x00" + get % (b"/v2/health/ready", b""),
        "get-v2-model": b"\x00" + get % (b"/v2/models/lesson/versions/1", b""),
        "get-v2-model-ready": b"\x00" + get % (b"/v2/models/sdpa/ready", b""),
        "get-v2-model-odd": b"\x00" + get % (b"/v2/models//versions//ready", b""),
        "post-v2-index": b"\x00" + http_post(b"/v2/repository/index", b""),
        "get-root": b"\x00" + get % (b"/", b""),
        "get-openapi": b"\x00" + get % (b"/openapi.yaml", b""),
        "get-traversal": b"\x00" + get % (b"/../../etc/passwd", b""),
        "get-encoded": b"\x00" + get % (b"/%2e%2e/index.html", b""),
        "head-root": b"\x00" + b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n",
        "get-id": b"\x00" + get % (b"/healthz", b"X-Request-Id: abc-123\r\n"),
        "get-keepalive": b"\x00" + (get % (b"/healthz", b"")) * 3,
        "get-http10": b"\x00" + b"GET /healthz HTTP/1.0\r\n\r\n",
        "get-key-none": b"\x01" + get % (b"/v1/models", b""),
        "get-key-wrong": b"\x01" + get % (b"/v1/models", b"Authorization: Bearer nope\r\n"),
        "get-key-right": b"\x01" + get % (b"/v1/models", b"Authorization: Bearer fuzz-key\r\n"),
        "get-key-basic": b"\x01" + get % (b"/v1/models", b"Authorization: Basic Zm9vOmJhcg==\r\n"),
        "options-plain": b"\x00" + b"OPTIONS /v1/sdpa HTTP/1.1\r\nHost: x\r\n\r\n",
        "options-preflight": b"\x01" + b"OPTIONS /v1/sdpa HTTP/1.1\r\nHost: x\r\nOrigin: "
                             b"http://allowed.example\r\nAccess-Control-Request-Method: POST\r\n\r\n",
        "options-preflight-bad": b"\x01" + b"OPTIONS /v1/sdpa HTTP/1.1\r\nHost: x\r\nOrigin: "
                                 b"http://evil.example\r\nAccess-Control-Request-Method: PUT\r\n\r\n",
        "delete": b"\x00" + b"DELETE /v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
        "session-open": b"\x00" + http_post(b"/v1/sessions", b'{"model": "demo"}'),
        "session-open-key": b"\x01" + http_post(b"/v1/sessions", b'{"model": "demo"}',
                                                 key=b"fuzz-key"),
        "session-get": b"\x00" + get % (b"/v1/sessions/00112233445566778899aabbccddeeff", b""),
        "session-head": b"\x00" + b"HEAD /v1/sessions/0 HTTP/1.1\r\nHost: x\r\n\r\n",
        "session-delete": b"\x00" + b"DELETE /v1/sessions/00112233445566778899aabbccddeeff "
                          b"HTTP/1.1\r\nHost: x\r\n\r\n",
        "session-append": b"\x00" + http_post(b"/v1/sessions/00112233445566778899aabbccddeeff",
                                              b'{"query": [[1]], "expected_length": 0}'),
        "session-options": b"\x01" + b"OPTIONS /v1/sessions/x HTTP/1.1\r\nHost: x\r\nOrigin: "
                           b"http://allowed.example\r\nAccess-Control-Request-Method: DELETE"
                           b"\r\n\r\n",
        "post-empty": b"\x00" + http_post(b"/v1/sdpa", b""),
        "post-cl-zero-chunked": b"\x00" + http_post(b"/v1/sdpa", b"", chunks=1),
        "post-text": b"\x00" + b"POST /v1/sdpa HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain"
                     b"\r\nContent-Length: 2\r\n\r\n{}",
        "post-short-body": b"\x00" + b"POST /v1/sdpa HTTP/1.1\r\nHost: x\r\nContent-Type: "
                           b"application/json\r\nContent-Length: 1000\r\n\r\n{\"q\": [[1",
        "post-huge-cl": b"\x00" + b"POST /v1/sdpa HTTP/1.1\r\nHost: x\r\nContent-Type: "
                        b"application/json\r\nContent-Length: 99999999999\r\n\r\n{}",
        "post-bad-cl": b"\x00" + b"POST /v1/sdpa HTTP/1.1\r\nHost: x\r\nContent-Type: "
                       b"application/json\r\nContent-Length: 12x\r\n\r\n{}",
        "post-bad-chunk": b"\x00" + b"POST /v1/sdpa HTTP/1.1\r\nHost: x\r\nContent-Type: "
                          b"application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0"
                          b"\r\n\r\n",
        "post-expect": b"\x00" + http_post(b"/v1/sdpa", b'{"q": [[1]], "k": [[1]], "v": [[2]]}',
                                           extra=b"Expect: 100-continue\r\n"),
        "post-pipelined": b"\x00" + http_post(b"/v1/sdpa", b'{"q": [[1]], "k": [[1]], "v": [[2]]}')
                          + get % (b"/healthz", b""),
        "garbage": b"\x00" + b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03",
    }
    for name, data in fixed.items():
        write(dirs["http"], name, data)
    counts = {k: len(os.listdir(d)) for k, d in dirs.items()}
    print(f"make_seeds: {n} request cases; " + ", ".join(f"{k} {v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
