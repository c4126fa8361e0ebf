#!/usr/bin/python3
"""python_client.py - attnd's Python client (clients/python) installed as a user would, and run
against a live attnd.

First, as /usr/bin/python3: a venv with the system's site packages (Debian's numpy), and
`pip install --no-index clients/python` into it, so offline: the package's own build backend
(clients/python/_build) needs nothing from an index, and numpy must be found installed. The
build is checked too: the backend's reading of pyproject.toml without tomllib equals tomllib's,
and two wheels built one after the other are the same bytes.

Then, as the venv's Python, importing the installed package (not the checkout): attention and
sdpa against the raw JSON API's answers bit for bit (numpy arrays, lists, big-endian arrays,
inline parameters, PyTorch's conventions, -inf in a bias, top-k, a trace) and sdpa against
numpy in float64 within 1e-6; the lesson model by text; the models; v2 infer against v1 bit for
bit; errors as AttndError with attnd's status, code, message and field (v1 and v2), NaN refused
before sending; a 503 retried after Retry-After (a local server answers 503 with Retry-After: 1
twice, then passes the request on to attnd), retries running out, a 400 not retried; the API
key; and the Python example of README.md's "Clients" as printed (its address made the live
attnd's), its printed answers those its comments give. Loopback only, each call bounded in
time.

Usage: python_client.py --attnd build/attnd
Prints one line per failed check and "N passed, N failed"; exits 1 on any failure.
"""

import argparse
import hashlib
import http.server
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
from harness import Checks, start_attnd  # noqa: E402

check = Checks()
PACKAGE = os.path.join(ROOT, "clients", "python")
SENTENCE = "程序员把服务器日志发给同事，因为它记录了错误原因。"


# ---- Outside the venv: install, build -------------------------------------------------------

def install(args):
    with tempfile.TemporaryDirectory() as tmp:
        venv = os.path.join(tmp, "venv")
        r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv],
                           capture_output=True, text=True, timeout=120)
        if not check(r.returncode == 0, f"python3 -m venv: {r.stderr[-500:]}"):
            return
        py = os.path.join(venv, "bin", "python")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        env["PIP_CONFIG_FILE"] = os.devnull
        r = subprocess.run([py, "-m", "pip", "install", "--no-index", "--disable-pip-version-check",
                            "--quiet", PACKAGE], capture_output=True, text=True, timeout=180,
                           env=env, cwd=tmp)
        if not check(r.returncode == 0, f"pip install --no-index clients/python: "
                     f"{r.stdout[-500:]} {r.stderr[-800:]}"):
            return
        r = subprocess.run([py, "-m", "pip", "show", "attnd-client"], capture_output=True,
                           text=True, timeout=60, env=env)
        check(r.returncode == 0 and "Requires: numpy" in r.stdout,
              f"pip show attnd-client names numpy as its dependency: {r.stdout[-300:]}")
        # The client's checks, run by the venv's Python from a directory outside the checkout.
        r = subprocess.run([py, os.path.abspath(__file__), "--inner", "--attnd",
                            os.path.abspath(args.attnd)], text=True, timeout=240, cwd=tmp)
        check(r.returncode == 0, f"the client's checks in the venv exit {r.returncode}")
    sys.path.insert(0, os.path.join(PACKAGE, "_build"))
    import backend
    with open(os.path.join(PACKAGE, "pyproject.toml")) as f:
        text = f.read()
    check(backend.read_toml_simple(text) == backend.read_toml(text),
          "the backend reads pyproject.toml without tomllib as tomllib does")
    digests = []
    for _ in range(2):
        with tempfile.TemporaryDirectory() as out:
            name = backend.build_wheel(out)
            with open(os.path.join(out, name), "rb") as f:
                digests.append(hashlib.sha256(f.read()).hexdigest())
            backend.build_sdist(out)
    check(name == "attnd_client-1.0.0-py3-none-any.whl" and digests[0] == digests[1],
          f"the wheel {name} is the same bytes when built again")


# ---- Inside the venv: the client against attnd ----------------------------------------------

def raw(url, path, body):
    """The raw JSON API: (status, JSON) of body POSTed as JSON."""
    req = urllib.request.Request(url + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def f32(x):
    """JSON numbers (and "-inf" strings) as float32, as attnd wrote them."""
    import numpy as np
    a = np.asarray(x)
    return (a.astype(np.float64) if a.dtype.kind == "U" else a).astype(np.float32)


def same(a, b):
    """Bit for bit: the same shape and the same float32 (or int32) bits."""
    import numpy as np
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype:
        b = b.astype(a.dtype)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


class Relay(http.server.BaseHTTPRequestHandler):
    """Answers the first `fail` requests with `status` (503 with Retry-After: 1, an attnd error
    body), then passes requests on to attnd; counts them."""
    protocol_version = "HTTP/1.1"
    target, fail, status, count = "", 0, 503, 0
    swallow = 0  # the first `swallow` requests are passed on to attnd, then answered 503


    def log_message(self, *args):
        pass

    def do_POST(self):
        cls = type(self)
        cls.count += 1
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if cls.count <= cls.swallow:  # attnd does the work; its answer is lost on the way
            req = urllib.request.Request(cls.target + self.path, body, {
                "Content-Type": self.headers.get("Content-Type", "application/json")})
            try:
                urllib.request.urlopen(req, timeout=60).read()
            except urllib.error.HTTPError:
                pass
        if cls.count <= cls.fail or cls.count <= cls.swallow:
            reply = json.dumps({"error": {"code": "queue_full" if cls.status == 503 else
                                          "invalid_field", "message": "test", "field": None}})
            self.send_response(cls.status)
            if cls.status == 503:
                self.send_header("Retry-After", "1")
            headers, data = {"Content-Type": "application/json"}, reply.encode()
        else:
            keep = ("Content-Type", "Inference-Header-Content-Length", "Authorization")
            req = urllib.request.Request(cls.target + self.path, body, {
                k: self.headers[k] for k in keep if self.headers.get(k)})
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    status, data, got = r.status, r.read(), r.headers
            except urllib.error.HTTPError as e:
                status, data, got = e.code, e.read(), e.headers
            self.send_response(status)
            headers = {k: got[k] for k in ("Content-Type", "Inference-Header-Content-Length")
                       if got.get(k)}
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def relay(target, fail, status=503, swallow=0):
    Relay.target, Relay.fail, Relay.status, Relay.count = target, fail, status, 0
    Relay.swallow = swallow
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Relay)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def session_checks(c, url, np, AttndError, Client):
    """Decode sessions: appends against the whole causal call, the length kept, GET, a retry
    after a lost answer that does not append twice, DELETE and the 404 after it, words."""
    x = np.random.default_rng(37).standard_normal((6, 64), dtype=np.float32)  # (T, E) on demo
    whole = c.attention(x, causal=True, need_weights="per_head")  # (T, E), (H, T, T)
    scale = max(1.0, float(np.abs(whole.output).max()))
    with c.open_session(model="demo", max_length=8) as s:
        check(len(s.id) == 32 and s.length == 0 and s.info["max_length"] == 8,
              f"open_session: a 32-digit id, length 0, max_length 8: {s.info}")
        rows, err, werr = [], 0.0, 0.0
        for t in range(4):
            r = s.append(x[t:t + 1], need_weights="per_head")  # (1, E), (H, 1, t + 1)
            rows.append(r.output)
            err = max(err, float(np.abs(r.output[0] - whole.output[t]).max()))
            werr = max(werr, float(np.abs(r.weights[:, 0, :] - whole.weights[:, t, :t + 1]).max()))
        r = s.append(x[4:6])  # two rows at once
        err = max(err, float(np.abs(r.output - whole.output[4:6]).max()))
        check(s.length == 6 and r.length == 6 and err <= 1e-6 * scale and werr <= 1e-6,
              f"six rows appended (one at a time, then two) give the whole causal call's rows: "
              f"outputs within {err:.1e}, weights within {werr:.1e}; length {s.length}")
        check(s.get()["length"] == 6 and s.info["bytes"] > 0, f"get(): length 6: {s.info}")
        s.length = 3
        e = None
        try:
            s.append(x[:1])
        except AttndError as ex:
            e = ex
        check(e is not None and e.status == 409 and s.get()["length"] == 6,
              f"an append that expects another length: AttndError 409, nothing appended: {e!r}")
    e = None
    try:
        s.append(x[:1])
    except AttndError as ex:
        e = ex
    check(e is not None and e.status == 404 and e.code == "session_unknown",
          f"after the with block the session is gone: AttndError 404 session_unknown: {e!r}")
    # A retry after a lost answer: the relay passes the first append on to attnd and answers
    # 503; the client's retry carries the same expected_length, so attnd refuses it (409).
    s = c.open_session(model="demo", max_length=8)
    server, relay_url = relay(url, 0, swallow=1)
    try:
        from attnd_client import Session
        rs = Session(Client(relay_url, retries=2), s.info)  # the session opened on attnd
        e = None
        try:
            rs.append(x[:1])
        except AttndError as ex:
            e = ex
        check(e is not None and e.status == 409 and Relay.count == 2 and s.get()["length"] == 1,
              f"an append whose answer was lost, retried: 409, the row appended once "
              f"(length {s.info['length']}, {Relay.count} requests): {e!r}")
    finally:
        server.shutdown()
        server.server_close()
        s.close()
    with c.open_session(model="lesson", max_length=32) as s:
        a = s.append(text="程序员把服务器日志发给同事，", need_weights="per_head")
        b = s.append(text="因为它记录了错误原因。", need_weights="per_head")
        one = c.attention(model="lesson", text="程序员把服务器日志发给同事，因为它记录了错误原因。",
                          causal=True, need_weights="per_head")
        n = len(a.tokens)
        check(a.tokens + b.tokens == one.tokens and s.length == len(one.tokens) and
              float(np.abs(b.output - one.output[n:]).max()) <= 1e-5,
              f"the lesson model by text in two appends: {len(a.tokens)} + {len(b.tokens)} "
              f"tokens, the whole sentence's rows")


def client_checks(url, attnd, tmp):
    import numpy as np
    import attnd_client
    from attnd_client import AttndError, Client

    check(attnd_client.__file__.startswith(sys.prefix) and "clients/python" not in
          attnd_client.__file__, f"attnd_client is the installed one: {attnd_client.__file__}")
    c = Client(url, timeout=60)
    check(c.ready(), "ready() is True")
    rng = np.random.default_rng(36)

    # attention on the demo model: numpy in, numpy out, bit for bit the raw API's.
    x = rng.standard_normal((2, 16, 64), dtype=np.float32)
    r = c.attention(x, causal=True, need_weights="per_head")
    s, want = raw(url, "/v1/attention", {"query": x.tolist(), "causal": True,
                                         "need_weights": "per_head"})
    check(s == 200 and r.output.dtype == np.float32 and r.output.shape == (2, 16, 64)
          and r.weights.shape == (2, 4, 16, 16), f"attention: float32 arrays of the shapes "
          f"(2, 16, 64), (2, 4, 16, 16): {getattr(r.get('output'), 'shape', None)}")
    check(same(r.output, f32(want["output"])) and same(r.weights, f32(want["weights"])),
          "attention's output and weights equal the raw JSON API's bit for bit")
    check(r.model == "demo" and r["usage"]["flops"] == want["usage"]["flops"],
          "the reply's other fields are there, as keys and attributes")
    big = c.attention(x.astype(">f4"), causal=True, need_weights="per_head")
    check(x.astype(">f4").dtype.byteorder == ">" and same(big.output, r.output) and
          same(big.weights, r.weights), "a big-endian (>f4) query gives the same answer as <f4")
    f64 = c.attention(x.astype(np.float64), causal=True, need_weights="per_head")
    check(same(f64.output, r.output), "a float64 query is sent as float32: the same answer")

    # Lists, inline parameters, masks as booleans, key_lengths as a numpy array.
    q = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]
    mask = np.array([True, True, False])
    r = c.attention(q, params={"init": "identity", "num_heads": 2}, key_mask=mask,
                    need_weights="mean")
    s, want = raw(url, "/v1/attention", {"query": q, "params": {"init": "identity",
                  "num_heads": 2}, "key_mask": [1, 1, 0], "need_weights": "mean"})
    check(s == 200 and same(r.output, f32(want["output"])) and
          same(r.weights, f32(want["weights"])) and r.output.shape == (3, 4),
          "lists, init params and a boolean key_mask: the raw API's answer")
    r = c.attention(np.array(q, dtype=np.float32)[None], params={"init": "identity",
                    "num_heads": 2}, key_lengths=np.array([2]), need_weights="mean")
    check(same(r.weights[0], f32(want["weights"])), "key_lengths as a numpy array")

    # A port of nn.MultiheadAttention: a state_dict's arrays, PyTorch's layout and masks.
    E, H, L, S, N = 8, 2, 5, 6, 3
    params = {"num_heads": H, "in_proj_weight": rng.standard_normal((3 * E, E)) / 3,
              "in_proj_bias": rng.standard_normal(3 * E) / 10,
              "out_proj.weight": rng.standard_normal((E, E)) / 3,
              "out_proj.bias": rng.standard_normal(E) / 10}
    qx, kv = rng.standard_normal((L, N, E)), rng.standard_normal((S, N, E))
    pad = np.zeros((N, S), bool)
    pad[1, 4:] = True
    blocked = np.triu(np.ones((L, S), bool), 2)
    r = c.attention(qx, kv, kv, params=params, batch_first=False, key_padding_mask=pad,
                    torch_attn_mask=blocked, need_weights=True)
    s, want = raw(url, "/v1/attention", {
        "query": f32(qx).tolist(), "key": f32(kv).tolist(), "value": f32(kv).tolist(),
        "params": {k: (f32(v).tolist() if isinstance(v, np.ndarray) else v)
                   for k, v in params.items()},
        "batch_first": False, "key_padding_mask": pad.tolist(),
        "torch_attn_mask": blocked.tolist(), "need_weights": True})
    check(s == 200 and same(r.output, f32(want["output"])) and
          same(r.weights, f32(want["weights"])) and r.output.shape == (L, N, E),
          f"PyTorch's conventions with a state_dict's arrays: the raw API's answer ({s})")

    # The same call in torch: its tensors and its state_dict sent as they are.
    import torch
    torch.manual_seed(36)
    mha = torch.nn.MultiheadAttention(E, H)
    tq, tkv = torch.from_numpy(f32(qx)), torch.from_numpy(f32(kv))
    tout, tw = mha(tq, tkv, tkv, key_padding_mask=torch.from_numpy(pad),
                   attn_mask=torch.from_numpy(blocked))
    r = c.attention(tq, tkv, tkv, params={"num_heads": H, **mha.state_dict()}, batch_first=False,
                    key_padding_mask=torch.from_numpy(pad),
                    torch_attn_mask=torch.from_numpy(blocked), need_weights=True)
    err = max(np.abs(r.output - tout.detach().numpy()).max(),
              np.abs(r.weights - tw.detach().numpy()).max())
    check(err <= 1e-6, f"torch tensors and a state_dict sent as they are: within 1e-6 of "
          f"nn.MultiheadAttention: {err:.2e}")

    # sdpa: -inf in a bias, a mask, against the raw API and numpy.
    qs, ks = rng.standard_normal((2, 3, 5, 4)), rng.standard_normal((2, 3, 6, 4))
    vs = rng.standard_normal((2, 3, 6, 3))
    bias = np.where(rng.random((5, 6)) < 0.2, -np.inf, rng.standard_normal((5, 6)) / 4)
    bias[:, 0] = 0
    allow = rng.random((5, 6)) < 0.8
    allow[:, 0] = True
    r = c.sdpa(qs, ks, vs, scale=0.4, attn_bias=bias, attn_mask=allow, need_weights=True)
    s, want = raw(url, "/v1/sdpa", {"q": f32(qs).tolist(), "k": f32(ks).tolist(),
                                    "v": f32(vs).tolist(), "scale": 0.4,
                                    "attn_bias": [["-inf" if np.isinf(b) else float(np.float32(b))
                                                   for b in row] for row in bias],
                                    "attn_mask": allow.astype(int).tolist(),
                                    "need_weights": True})
    check(s == 200 and same(r.output, f32(want["output"])) and
          same(r.weights, f32(want["weights"])) and r.output.shape == (2, 3, 5, 3),
          f"sdpa with -inf in a bias and a mask: the raw API's answer ({s})")
    q64, k64, v64 = (f32(a).astype(np.float64) for a in (qs, ks, vs))
    logits = 0.4 * q64 @ k64.swapaxes(-1, -2) + np.where(allow, f32(bias), -np.inf)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    err = max(np.abs(w @ v64 - r.output).max(), np.abs(w - r.weights).max())
    check(err <= 1e-6, f"sdpa within 1e-6 of numpy in float64: {err:.2e}")
    r = c.sdpa(qs, ks, vs, need_weights=True, weights_top_k=2, trace=True, causal=True)
    s, want = raw(url, "/v1/sdpa", {"q": f32(qs).tolist(), "k": f32(ks).tolist(),
                                    "v": f32(vs).tolist(), "need_weights": True,
                                    "weights_top_k": 2, "trace": True, "causal": True})
    tr, wt = r.get("trace", {}), want.get("trace", {})
    check(s == 200 and r.weights["indices"].dtype == np.int32 and
          same(r.weights["indices"], np.array(want["weights"]["indices"], np.int32)) and
          same(r.weights["values"], f32(want["weights"]["values"])),
          "top-k: int32 indices and float32 values, the raw API's")
    check(all(same(tr.get(m), f32(wt[m])) for m in ("scores", "masked_scores", "weights")) and
          np.isneginf(tr["masked_scores"][0, 0, 0, 1]) and tr["scale"] == wt["scale"],
          "a trace: every member the raw API's, -inf past the causal limit")
    r = c.sdpa(qs, ks, vs, encoding="json")
    s, want = raw(url, "/v1/sdpa", {"q": f32(qs).tolist(), "k": f32(ks).tolist(),
                                    "v": f32(vs).tolist()})
    check(isinstance(r.output, list) and same(f32(r.output), f32(want["output"])),
          "encoding='json' keeps JSON lists")

    # The lesson model by text.
    r = c.attention(model="lesson", text=SENTENCE, need_weights="per_head")
    s, want = raw(url, "/v1/attention", {"model": "lesson", "text": SENTENCE,
                                         "need_weights": "per_head"})
    ok = s == 200 and r.tokens == want["tokens"] and same(r.weights, f32(want["weights"]))
    check(ok and r.tokens[0] == "〈s〉" and r.weights.shape == (4, len(r.tokens), len(r.tokens)),
          "the lesson model by text: its tokens and weights, the raw API's")
    if ok:
        row = r.weights[r.head_names.index("coreference"), r.tokens.index("它")]
        check(r.tokens[int(row.argmax())] == "服务器日志", "它 looks at 服务器日志 in coreference")

    # Models.
    m = c.models()
    check(m["default"] == "demo" and {"demo", "lesson"} <= {x["name"] for x in m["models"]},
          f"models(): demo by default, and lesson: {m.get('default')}")
    check("它" in c.model("lesson")["vocab"], "model('lesson') lists its vocabulary")

    session_checks(c, url, np, AttndError, Client)

    # v2 infer, against v1 bit for bit.
    one = c.attention(x, causal=True, need_weights="per_head")
    r = c.infer("demo", {"query": x}, parameters={"causal": True, "need_weights": "per_head"})
    check(set(r) == {"output", "weights"} and same(r["output"], one.output) and
          same(r["weights"], one.weights) and r.response["model_name"] == "demo",
          "infer on demo: output and weights equal v1's bit for bit")
    r = c.infer("demo", {"query": x.astype(">f4")}, parameters={"causal": True},
                outputs=["output"])
    check(list(r) == ["output"] and same(r["output"], one_output(c, x)),
          "infer: a big-endian query, one output asked for")
    km = np.array([True, True, True, False, True, False])
    one = c.sdpa(qs, ks, vs, key_mask=km, attn_mask=allow, need_weights=True, weights_top_k=3)
    r = c.infer("sdpa", {"q": qs, "k": ks, "v": vs, "key_mask": km, "attn_mask": allow},
                parameters={"need_weights": True, "weights_top_k": 3})
    check(same(r.get("output"), one.output) and same(r.get("weights"), one.weights["values"])
          and r.get("weights_indices") is not None and r["weights_indices"].dtype == np.int32
          and same(r["weights_indices"], one.weights["indices"]),
          "infer on sdpa with BOOL masks and top-k: v1's answer bit for bit")
    r = c.infer("sdpa", {"q": qs, "k": ks, "v": vs, "key_lengths": [4, 6]})
    one = c.sdpa(qs, ks, vs, key_lengths=[4, 6])
    check(same(r["output"], one.output), "infer with INT32 key_lengths: v1's answer")

    # Errors.
    def error_of(call):
        try:
            call()
        except AttndError as e:
            return e
        except Exception as e:  # noqa: BLE001 - reported as a failed check
            return e
        return None

    e = error_of(lambda: c.attention(np.zeros((3, 5), np.float32)))
    check(isinstance(e, AttndError) and isinstance(e, Exception) and e.status == 400 and
          e.code == "invalid_field" and e.field == "query" and "width 5" in e.message and
          "invalid_field" in str(e), f"a wrong width: AttndError 400 invalid_field on query: {e!r}")
    e = error_of(lambda: c.attention(x, model="nope"))
    check(isinstance(e, AttndError) and e.status == 404 and e.code == "unknown_model",
          f"an unknown model: 404 unknown_model: {e!r}")
    bad = x.copy()
    bad[0, 1, 2] = np.nan
    e = error_of(lambda: c.attention(bad))
    check(isinstance(e, AttndError) and e.status == 400 and e.code == "non_finite" and
          e.field == "query.data", f"NaN in a tensor: 400 non_finite on query.data: {e!r}")
    e = error_of(lambda: c.sdpa(qs, ks, vs, scale=float("nan")))
    check(isinstance(e, ValueError), f"NaN in a JSON field: ValueError before sending: {e!r}")
    e = error_of(lambda: c.infer("demo", {"query": np.zeros((3, 5))}))
    check(isinstance(e, AttndError) and e.status == 400 and e.code is None and
          "width 5" in e.message and e.field is None,
          f"v2's error: AttndError 400 with its message, no code: {e!r}")
    e = error_of(lambda: c.infer("sdpa", {"q": qs, "k": ks, "v": vs, "attn_mask": allow * 2}))
    check(isinstance(e, ValueError), f"a BOOL input of 2: ValueError before sending: {e!r}")

    # 503: retried after Retry-After, with the body sent again; then retries running out.
    server, relay_url = relay(url, 2)
    try:
        t0 = time.monotonic()
        r = Client(relay_url, retries=3).attention(x, causal=True)
        dt = time.monotonic() - t0
        check(Relay.count == 3 and same(r.output, one_output(c, x)) and 2.0 <= dt < 4.5,
              f"two 503s with Retry-After: 1, then the answer: {Relay.count} requests in "
              f"{dt:.2f} s (want 3, 2 to 3 s and the jitter)")
        Relay.count, Relay.fail = 0, 2
        t0 = time.monotonic()
        r = Client(relay_url).infer("demo", {"query": x}, parameters={"causal": True})
        check(Relay.count == 3 and same(r["output"], one_output(c, x)) and
              time.monotonic() - t0 >= 2.0, "infer retried the same way")
        Relay.count, Relay.fail = 0, 10
        e = error_of(lambda: Client(relay_url, retries=1).attention(x))
        check(isinstance(e, AttndError) and e.status == 503 and e.code == "queue_full" and
              e.retry_after == 1.0 and Relay.count == 2,
              f"retries=1: two requests, then AttndError 503 queue_full: {e!r}, {Relay.count}")
        Relay.count, Relay.fail, Relay.status = 0, 1, 400
        e = error_of(lambda: Client(relay_url, retries=3).attention(x))
        check(isinstance(e, AttndError) and e.status == 400 and Relay.count == 1,
              f"a 400 is raised at once, not retried: {e!r}, {Relay.count} requests")
    finally:
        server.shutdown()
        server.server_close()

    # The API key.
    key_file = os.path.join(tmp, "key")
    with open(key_file, "w") as f:
        f.write("k3y-of-test-36\n")
    os.chmod(key_file, 0o600)
    proc, port = start_attnd(attnd, ["--api-key-file", key_file], os.path.join(tmp, "key.log"),
                             "python_client")
    try:
        keyed = f"http://127.0.0.1:{port}"
        r = Client(keyed, api_key="k3y-of-test-36").sdpa([[1.0]], [[1.0]], [[2.0]])
        check(same(r.output, np.array([[2.0]], np.float32)), "the API key is sent")
        e = error_of(lambda: Client(keyed).sdpa([[1.0]], [[1.0]], [[2.0]]))
        check(isinstance(e, AttndError) and e.status == 401 and e.code == "unauthorized",
              f"without the key: 401 unauthorized: {e!r}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def readme_example(url):
    """The README's Python client example, run as printed by this Python."""
    import re
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    m = re.search(r"^### Python: attnd_client\n(.*?)(?=^#{2,3} )", readme, re.M | re.S)
    code = re.search(r"```python\n(.*?)```", m.group(1), re.S) if m else None
    if not check(code and "pip install clients/python" in m.group(1),
                 "README's Python client section says how to install it and has an example"):
        return
    code = code.group(1).replace("http://127.0.0.1:8080", url) + (
        "\nassert out.shape == (2, 16, 64) and w.shape == (2, 4, 16, 16)"
        "\nassert s.output.shape == (2, 2) and v2['output'].shape == (2, 16, 64)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    printed = re.findall(r"print\(.*# (.*)$", code, re.M)
    check(r.returncode == 0 and r.stdout.splitlines() == printed,
          f"the README's Python client example: exit {r.returncode}, printed {r.stdout!r} "
          f"(want {printed}): {r.stderr[-500:]}")


def one_output(c, x):
    return c.attention(x, causal=True).output


def inner(args):
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_attnd(args.attnd, [], os.path.join(tmp, "attnd.log"), "python_client")
        try:
            client_checks(f"http://127.0.0.1:{port}", args.attnd, tmp)
            readme_example(f"http://127.0.0.1:{port}")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnd", required=True)
    ap.add_argument("--inner", action="store_true", help="run the client's checks (in the venv)")
    args = ap.parse_args()
    if args.inner:
        inner(args)
        print(f"python_client (client): {check.summary()}")
    else:
        install(args)
        print(f"python_client: {check.summary()}")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
