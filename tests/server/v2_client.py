#!/usr/bin/python3
"""v2_client.py - a client of the Open Inference Protocol, against a live attnd.

Uses tests/server/v2client (tritonclient.http as far as the README uses it, written from the
protocol's documentation; the real tritonclient is used instead when it is installed) the way
a client that knows nothing of attnd would: it checks liveness and readiness, discovers the
models (the repository index), reads each one's metadata, builds inputs from the shapes the
metadata gives, and runs inference in binary mode (raw tensor bytes both ways) and in JSON mode
(flat data arrays), once more with gzip both ways, and once with Triton's priority and timeout
(the schedule policy extension). Every answer must be exact: the same float32 bits as attnd's
API v1 gives for the same job (sent as base64), whatever the mode. It reads each model's
configuration (get_model_config: the inputs and outputs the metadata gives, in Triton's form)
and its inference statistics (get_inference_statistics: the requests it made, counted exactly),
and a timeout too short to be met gets 503. Sequences (Triton's sequence extension: sequence_id
numeric and string, sequence_start, sequence_end) run a row at a time on decode sessions, their
outputs within 1e-6 of v1's one causal call on the whole sequence.

Usage: v2_client.py --attnd build/attnd [--models DIR]
Prints one line per failed check and "N passed, N failed"; exits 1 on any failure.
"""

import argparse
import base64
import json
import os
import signal
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from harness import Checks, start_attnd

try:  # the real client when it is there (pip install tritonclient[http])
    import tritonclient.http as httpclient
    REAL = True
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent / "v2client"))
    import tritonclient.http as httpclient
    REAL = False

check = Checks()


def v1(port, model, tensors, fields):
    """The same job through API v1 with base64 tensors: {name: array} of its answer."""
    body = dict(fields, encoding="base64")
    for name, a in tensors.items():
        if a.dtype == np.float32:
            body[name] = {"dtype": "float32", "shape": list(a.shape),
                          "data": base64.b64encode(np.ascontiguousarray(a, "<f4")).decode()}
        else:
            body[name] = a.astype(int).tolist()
    path = "/v1/sdpa"
    if model != "sdpa":
        body["model"], path = model, "/v1/attention"
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        reply = json.load(r)

    def read(t):
        dt = "<i4" if t["dtype"] == "int32" else "<f4"
        return np.frombuffer(base64.b64decode(t["data"]), dt).reshape(t["shape"])
    got = {"output": read(reply["output"])}
    w = reply.get("weights")
    if isinstance(w, dict) and "indices" in w:
        got["weights"], got["weights_indices"] = read(w["values"]), read(w["indices"])
    elif w is not None:
        got["weights"] = read(w)
    return got


def inputs_for(meta, rng):
    """Inputs built from a model's metadata alone: its FP32 inputs' fixed widths (-1: chosen
    here), N = 2, L = 5, S = 4 (S = L for self-attention), for sdpa H = 3, D = 8."""
    shapes = {t["name"]: t["shape"] for t in meta["inputs"]}
    if "q" in shapes:  # sdpa: q (N, H, L, D), k and v (N, H, S, D)
        return {"q": rng.standard_normal((2, 3, 5, 8), dtype=np.float32),
                "k": rng.standard_normal((2, 3, 4, 8), dtype=np.float32),
                "v": rng.standard_normal((2, 3, 4, 8), dtype=np.float32),
                "key_mask": np.array([[1, 1, 0, 1], [1, 1, 1, 1]], dtype=np.int32)}
    e, kd, vd = (shapes[n][-1] for n in ("query", "key", "value"))
    x = {"query": rng.standard_normal((2, 5, e), dtype=np.float32)}
    if kd != e or vd != e:  # the model takes keys and values of other widths
        x["key"] = rng.standard_normal((2, 4, kd), dtype=np.float32)
        x["value"] = rng.standard_normal((2, 4, vd), dtype=np.float32)
    x["key_lengths"] = np.array([3, 4 if "key" in x else 5], dtype=np.int32)
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnd", required=True)
    ap.add_argument("--models", default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(15)
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_attnd(os.path.abspath(args.attnd),
                                 ["--models", args.models] if args.models else [],
                                 os.path.join(tmp, "attnd.log"), "v2_client")
        try:
            client = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
            t0 = time.time()
            while not client.is_server_ready() and time.time() - t0 < 20:
                time.sleep(0.02)
            check(client.is_server_live() and client.is_server_ready(), "server live and ready")
            meta = client.get_server_metadata()
            for ext in ("binary_tensor_data", "parameters", "schedule_policy",
                        "model_configuration", "statistics"):
                check(ext in meta.get("extensions", []), f"server metadata lists {ext}: {meta}")
            index = client.get_model_repository_index()
            names = [m["name"] for m in index]
            check("demo" in names and "sdpa" in names and all(m["state"] == "READY" for m in index),
                  f"the repository index: {index}")
            exact = 0
            before = {s["name"]: s for s in
                      client.get_inference_statistics()["model_stats"]}
            check(sorted(before) == sorted(names),
                  f"the statistics of every model: {sorted(before)} against {sorted(names)}")
            sent = {}  # model: [successful requests, failed ones]
            for name in names:
                check(client.is_model_ready(name) and client.is_model_ready(name, "1"),
                      f"{name} is ready")
                md = client.get_model_metadata(name)
                cfg = client.get_model_config(name)
                check(cfg.get("name") == name and cfg.get("max_batch_size") == 0 and
                      [(t["name"], t["data_type"], t["dims"]) for t in cfg.get("input", [])] ==
                      [(t["name"], "TYPE_" + t["datatype"], t["shape"]) for t in md["inputs"]] and
                      [(t["name"], t["data_type"], t["dims"]) for t in cfg.get("output", [])] ==
                      [(t["name"], "TYPE_" + t["datatype"], t["shape"]) for t in md["outputs"]] and
                      cfg.get("instance_group", [{}])[0].get("kind") == "KIND_CPU",
                      f"{name}: its configuration against its metadata: {cfg}")
                check(client.get_model_config(name, "1") == cfg, f"{name}: the config of version 1")
                sent[name] = [0, 0]
                x = inputs_for(md, rng)
                sdpa = name == "sdpa"
                params = {"need_weights": "per_head", "causal": True, "weights_top_k": 2}
                want = v1(port, name, x, dict(params, need_weights=True) if sdpa else params)
                sent[name][0] += not sdpa  # a v1 job on the model counts under it too
                for mode, zip_, sched in (("binary", None, {}), ("JSON", None, {}),
                                          ("binary", "gzip", {}),
                                          ("JSON", None, {"priority": 1, "timeout": 10_000_000})):
                    binary = mode == "binary"
                    ins = []
                    for n, a in x.items():
                        dt = "FP32" if a.dtype == np.float32 else "INT32"
                        i = httpclient.InferInput(n, list(a.shape), dt)
                        i.set_data_from_numpy(a, binary_data=binary)
                        ins.append(i)
                    outs = [httpclient.InferRequestedOutput(o, binary_data=binary)
                            for o in ("output", "weights", "weights_indices")]
                    what = f"{name} ({mode}{', gzip' if zip_ else ''}{', ' if sched else ''}" \
                        f"{', '.join(f'{k} {v}' for k, v in sched.items())})"
                    try:
                        r = client.infer(name, ins, outputs=outs, parameters=params,
                                         request_id=f"{name}-{mode}",
                                         request_compression_algorithm=zip_,
                                         response_compression_algorithm=zip_, **sched)
                        sent[name][0] += 1
                    except httpclient.InferenceServerException as ex:
                        check(False, f"{what}: {ex}")
                        continue
                    check(r.get_response().get("id") == f"{name}-{mode}", f"{what}: the id")
                    for o, a in want.items():
                        got = r.as_numpy(o)
                        ok = got is not None and got.shape == a.shape and \
                            np.array_equal(got.view(np.uint32), a.view(np.uint32))
                        exact += check(ok, f"{what}: {o} is not v1's answer bit for bit")
                # A timeout of 1 microsecond is over before a worker can take the job: 503.
                try:
                    client.infer(name, ins, outputs=outs, parameters=params, timeout=1)
                    check(False, f"{name}: a timeout of 1 us was met")
                except httpclient.InferenceServerException as ex:
                    sent[name][1] += 1
                    check(ex.status() == "503" and "timeout" in ex.message(),
                          f"{name}: a timeout of 1 us: {ex.status()} {ex.message()}")
            # The statistics count exactly what was sent, and the steps of the successes.
            after = {s["name"]: s for s in client.get_inference_statistics()["model_stats"]}
            for name, (ok, failed) in sent.items():
                s0, s1 = before[name], after.get(name, {})
                st, st0 = s1.get("inference_stats", {}), s0["inference_stats"]
                got = (st["success"]["count"] - st0["success"]["count"],
                       st["fail"]["count"] - st0["fail"]["count"],
                       s1["inference_count"] - s0["inference_count"])
                check(got == (ok, failed, ok) and s1.get("version") == "1" and
                      all(st[k]["count"] - st0[k]["count"] == ok and st[k]["ns"] > 0
                          for k in ("compute_infer", "compute_output")) and
                      st["queue"]["count"] - st0["queue"]["count"] == ok and
                      st["compute_input"]["count"] - st0["compute_input"]["count"] == ok + failed
                      and 0 < s1["execution_count"] - s0["execution_count"] <= ok and
                      s1["last_inference"] > 1e12,
                      f"{name}: statistics {got} against {ok} successes and {failed} failures: "
                      f"{s1}")
                one = client.get_inference_statistics(name, "1")["model_stats"]
                check(len(one) == 1 and one[0]["name"] == name, f"{name}: its statistics alone")
            # An error comes back as the protocol's {"error": message}.
            try:
                i = httpclient.InferInput("query", [1, 3], "FP32")
                i.set_data_from_numpy(np.zeros((1, 3), np.float32))
                client.infer("demo", [i])
                check(False, "a query of the wrong width was answered")
            except httpclient.InferenceServerException as ex:
                check(ex.status() == "400" and "embed_dim 64" in ex.message(),
                      f"the error of a wrong width: {ex.status()} {ex.message()}")
            # Triton's sequence extension, as infer(sequence_id=..., sequence_start=...,
            # sequence_end=...) sends it: a sequence a row at a time, with a numeric id and a
            # string one, against v1's one causal call on the whole sequence (within 1e-6 of its
            # largest value); once ended, a request without sequence_start gets 404.
            for ext in ("sequence", "sequence(string_id)"):
                check(ext in meta.get("extensions", []), f"server metadata lists {ext}: {meta}")
            x = rng.standard_normal((6, 64), dtype=np.float32)
            whole = v1(port, "demo", {"query": x}, {"causal": True})["output"]
            for sid in (1001, "chat-1001"):
                rows = []
                for t in range(len(x)):
                    i = httpclient.InferInput("query", [1, 64], "FP32")
                    i.set_data_from_numpy(x[t:t + 1])
                    try:
                        r = client.infer("demo", [i], sequence_id=sid, sequence_start=t == 0,
                                         sequence_end=t == len(x) - 1)
                        rows.append(r.as_numpy("output"))
                    except httpclient.InferenceServerException as ex:
                        check(False, f"sequence {sid!r} step {t}: {ex}")
                        break
                got = np.concatenate(rows) if rows else np.zeros(0, np.float32)
                ok = got.shape == whole.shape and \
                    np.abs(got - whole).max() <= 1e-6 * np.abs(whole).max()
                check(ok, f"sequence {sid!r}: its rows against v1's whole causal call")
                try:
                    client.infer("demo", [i], sequence_id=sid)
                    check(False, f"sequence {sid!r} answered after its end")
                except httpclient.InferenceServerException as ex:
                    check(ex.status() == "404" and "sequence_start" in ex.message(),
                          f"sequence {sid!r} after its end: {ex.status()} {ex.message()}")
            client.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    print(f"v2_client ({'tritonclient' if REAL else 'tests/server/v2client'}): "
          f"{len(names)} models, {exact} outputs exact; {check.summary()}")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
