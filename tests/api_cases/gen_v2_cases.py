#!/usr/bin/python3
"""gen_v2_cases.py - writes the Open Inference Protocol (v2) request cases of test_api (tests/api/v2.c).

Run from the repository root (it needs numpy):

    /usr/bin/python3 tests/api_cases/gen_v2_cases.py

Writes requests/v2/<case>.case: a first line `STATUS [CODE] [model=NAME] [version=V]
[header=N] [LIMIT=N ...] [| PHRASE]` (see README.md), then the body: the JSON inference request
and, for binary tensors, their raw little-endian bytes after it; header=N is what the
Inference-Header-Content-Length header says (absent: the whole body is JSON). Most cases are
invalid; the valid ones must be answered, in the protocol's form, within their response bound.

The bodies are built as the protocol's documentation describes them, the binary ones as
Triton's Python client lays them out (JSON, then each binary input's bytes in input order).
The outputs are committed; the C test needs no Python.
"""
import json
import os
import struct

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "requests", "v2")
rng = np.random.default_rng(2026)


def fp32(shape):
    return rng.standard_normal(shape).astype("<f4")


def inp(name, a, dtype="FP32", binary=False, shape=None):
    """An input object and its raw bytes (None when it carries JSON data)."""
    a = np.asarray(a)
    t = {"name": name, "shape": list(shape if shape is not None else a.shape), "datatype": dtype}
    if binary:
        raw = a.astype({"FP32": "<f4", "INT32": "<i4", "BOOL": "u1"}[dtype]).tobytes()
        t["parameters"] = {"binary_data_size": len(raw)}
        return t, raw
    t["data"] = [v.item() for v in a.flatten()]
    return t, None


def body(inputs, params=None, outputs=None, rid=None, extra=b"", **members):
    """The request: JSON, then the raw bytes. Returns (bytes, header length or None)."""
    req = {}
    if rid is not None:
        req["id"] = rid
    if params is not None:
        req["parameters"] = params
    req["inputs"] = [t for t, _ in inputs]
    if outputs is not None:
        req["outputs"] = outputs
    req.update(members)
    js = json.dumps(req).encode()
    raw = b"".join(r for _, r in inputs if r is not None) + extra
    return js + raw, (len(js) if raw else None)


CASES = []


def case(name, expect, payload, model="demo", version=None, header="auto", limits=""):
    data, hl = payload
    if header != "auto":
        hl = header
    head = expect.split(" | ")
    words = [head[0], "model=" + model]
    if version is not None:
        words.append("version=" + version)
    if hl is not None:
        words.append("header=%d" % hl)
    if limits:
        words.append(limits)
    line = " ".join(words) + (" | " + head[1] if len(head) > 1 else "")
    CASES.append((name, line.encode() + b"\n" + data))


q = fp32((2, 5, 64))
q2 = fp32((5, 64))
kv = fp32((2, 3, 64))
D = fp32((4, 8))

# ---- Valid -------------------------------------------------------------------------------
case("json-ok", "200", body([inp("query", q)], params={"causal": True}))
case("json-rank2-ok", "200", body([inp("query", q2)], params={"need_weights": "mean"}))
case("binary-ok", "200", body([inp("query", q, binary=True)],
                              params={"binary_data_output": True, "need_weights": "per_head"}))
case("mixed-ok", "200", body([inp("query", q, binary=True), inp("key", kv, binary=True),
                              inp("value", kv)],
                             outputs=[{"name": "output"}]))
case("nested-ok", "200", body([({"name": "query", "shape": [5, 64], "datatype": "FP32",
                                  "data": q2.astype(float).tolist()}, None)]))
case("id-escaped-ok", "200", body([inp("query", q2)], rid="a\"b\\c\u00e9"))
case("heads-csv-ok", "200", body([inp("query", q, binary=True)],
                                 params={"need_weights": "per_head", "heads": " 3, 1",
                                         "weights_top_k": 2},
                                 outputs=[{"name": "weights_indices",
                                           "parameters": {"binary_data": True}},
                                          {"name": "weights"}]))
case("key-lengths-binary-ok", "200", body([inp("query", q, binary=True),
                                           inp("key_lengths", np.array([2, 5]), "INT32",
                                               binary=True)]))
case("key-lengths-json-ok", "200", body([inp("query", q),
                                         inp("key_lengths", np.array([2, 5]), "INT32")]))
case("key-mask-int32-ok", "200", body([inp("query", q, binary=True),
                                       inp("key_mask", np.array([[1, 1, 0, 1, 0]] * 2), "INT32",
                                           binary=True)]))
case("key-mask-bool-json-ok", "200", body([inp("query", q2),
                                           inp("key_mask", np.array([True, False, True, True,
                                                                     True]), "BOOL")]))
case("attn-bias-minus-inf-ok", "200",
     body([inp("query", q2, binary=True),
           inp("attn_bias", np.where(np.eye(5) > 0, 0, -np.inf), binary=True)]))
case("attn-bias-json-minus-inf-ok", "200",
     body([inp("query", q2), ({"name": "attn_bias", "shape": [5, 5], "datatype": "FP32",
                               "data": [0.0 if i % 6 == 0 else "-inf" for i in range(25)]},
                              None)]))
# Long rows of short numbers ("0," and "1,": 2 bytes each), for the count of data's elements.
case("attn-mask-json-long-ok", "200",
     body([inp("query", fp32((64, 64))),
           ({"name": "attn_mask", "shape": [64, 64], "datatype": "BOOL",
             "data": [int(i % 3 != 0) for i in range(64 * 64)]}, None)],
          params={"need_weights": "per_head"}))
case("data-long-short-count", "400 invalid_field | holds 4095 values",
     body([({"name": "query", "shape": [64, 64], "datatype": "FP32", "data": [1] * 4095},
            None)]))
case("attn-mask-bool-ok", "200", body([inp("query", q2, binary=True),
                                       inp("attn_mask", np.tril(np.ones((5, 5))) > 0, "BOOL",
                                           binary=True)],
                                      params={"need_weights": "per_head"}))
case("sdpa-ok", "200", body([inp("q", D), inp("k", D), inp("v", D)],
                            params={"scale": 0.5, "need_weights": "per_head",
                                    "causal": "bottom_right"}),
     model="sdpa")
case("sdpa-binary-ok", "200", body([inp("q", fp32((2, 3, 4, 8)), binary=True),
                                    inp("k", fp32((2, 3, 6, 8)), binary=True),
                                    inp("v", fp32((2, 3, 6, 8)), binary=True)],
                                   params={"need_weights": True, "binary_data_output": True}),
     model="sdpa")
case("version-1-ok", "200", body([inp("query", q2)]), version="1")
case("lesson-ok", "200", body([inp("query", fp32((6, 256)), binary=True)],
                              params={"need_weights": "per_head"}), model="lesson")
case("null-members-ok", "200", body([inp("query", q2)], params={"causal": None}, id=None))
case("outputs-empty-ok", "200", body([inp("query", q2)], outputs=[]))

# ---- The body's framing ------------------------------------------------------------------
case("header-past-end", "400 invalid_field | past the end of the body",
     body([inp("query", q2)]), header=100000)
case("binary-size-disagrees", "400 invalid_field | needs 1280 bytes",
     body([({"name": "query", "shape": [5, 64], "datatype": "FP32",
              "parameters": {"binary_data_size": 1276}}, q2.tobytes()[:1276])]))
case("bytes-left-over", "400 invalid_field | add up to 1280",
     body([inp("query", q2, binary=True)], extra=b"\0\0\0\0"))
case("binary-short", "400 invalid_field | only 1276 are left",
     (lambda d: (d[0][:-4], d[1]))(body([inp("query", q2, binary=True)])))
case("binary-without-header", "400 invalid_field | Inference-Header-Content-Length",
     (lambda d: (d[0][:d[1]], None))(body([inp("query", q2, binary=True)])))
case("binary-bytes-without-header", "400 invalid_json",
     body([inp("query", q2, binary=True)]), header=None)
case("json-broken", "400 invalid_json",
     (b'{"inputs": [{"name": "query", "shape": [1, 64], "datatype": "FP32", "data": [1,]}]}',
      None))
case("json-not-object", "400 invalid_json", (b"[]", None))
case("json-header-cut", "400 invalid_json",
     (lambda d: (d[0], d[1] - 5))(body([inp("query", q2, binary=True)])))
case("unknown-member", "400 invalid_field | model_name",
     body([inp("query", q2)], model_name="demo"))
case("id-not-string", "400 invalid_field | id must be a string", body([inp("query", q2)], rid=7))
case("inputs-missing", "400 invalid_field | inputs is required",
     (json.dumps({"parameters": {"causal": True}}).encode(), None))

# ---- Inputs ----------------------------------------------------------------------------------
nan = q2.copy()
nan[3, 7] = np.nan
case("fp32-nan-binary", "400 non_finite | NaN", body([inp("query", nan, binary=True)]))
case("fp32-overflow-json", "400 non_finite | query[7]",
     (lambda t: body([(t, None)]))({"name": "query", "shape": [1, 64], "datatype": "FP32",
                                    "data": [1] * 7 + [1e39] + [2] * 56}))
case("attn-bias-plus-inf-binary", "400 non_finite | +infinity",
     body([inp("query", q2, binary=True),
           inp("attn_bias", np.where(np.eye(5) > 0, 0, np.inf), binary=True)]))
case("bool-byte-2", "400 invalid_field | BOOL byte 2",
     (lambda d: (d[0][:-1] + b"\x02", d[1]))(
         body([inp("query", q2, binary=True),
               inp("attn_mask", np.ones((5, 5)) > 0, "BOOL", binary=True)])))
case("key-mask-int32-2", "400 invalid_field | INT32 2",
     body([inp("query", q2, binary=True),
           inp("key_mask", np.array([1, 1, 2, 1, 0]), "INT32", binary=True)]))
case("key-mask-json-2", "400 invalid_field | must be 0, 1, false or true",
     body([inp("query", q2), inp("key_mask", np.array([1, 1, 2, 1, 0]), "INT32")]))
case("unknown-input", "400 invalid_field | is named \"inputs_embeds\"",
     body([inp("inputs_embeds", q2)]))
case("duplicate-input", "400 invalid_field | given twice", body([inp("query", q2)] * 2))
case("datatype-fp16", "400 invalid_field | datatype FP16",
     body([({"name": "query", "shape": [1, 64], "datatype": "FP16", "data": [0] * 64}, None)]))
case("datatype-mask-fp32", "400 invalid_field | it must be BOOL",
     body([inp("query", q2), inp("attn_mask", np.ones((5, 5)), "FP32")]))
case("datatype-key-lengths-int64", "400 invalid_field | it must be INT32",
     body([inp("query", q), inp("key_lengths", np.array([1, 2]), "INT64")]))
case("shape-data-mismatch", "400 invalid_field | holds 6 values",
     body([({"name": "query", "shape": [2, 4], "datatype": "FP32", "data": [1, 2, 3, 4, 5, 6]},
            None)]))
case("nested-shape-mismatch", "400 invalid_field | nests as [2,3]",
     body([({"name": "query", "shape": [3, 2], "datatype": "FP32",
             "data": [[1, 2, 3], [4, 5, 6]]}, None)]))
case("nested-ragged", "400 invalid_field | query[1]",
     body([({"name": "query", "shape": [2, 64], "datatype": "FP32",
             "data": [[1] * 64, [4]]}, None)]))
case("shape-zero", "400 invalid_field | positive integer",
     body([({"name": "query", "shape": [0, 64], "datatype": "FP32", "data": []}, None)]))
case("shape-negative", "400 invalid_field | positive integer",
     body([({"name": "query", "shape": [-1, 64], "datatype": "FP32", "data": [0] * 64}, None)]))
case("shape-rank5", "400 invalid_field | more than 4 dimensions",
     body([({"name": "query", "shape": [1, 1, 1, 1, 64], "datatype": "FP32", "data": [0] * 64},
            None)]))
case("shape-empty", "400 invalid_field | empty shape",
     body([({"name": "query", "shape": [], "datatype": "FP32", "data": [1]}, None)]))
case("shape-over-max-dim", "413 job_too_large | max_dim",
     body([({"name": "query", "shape": [5, 64], "datatype": "FP32", "data": [0] * 320}, None)]),
     limits="max_dim=32")
case("shape-declared-huge", "400 invalid_field | needs 274877906944",
     body([({"name": "query", "shape": [65536, 65536, 64], "datatype": "FP32",
             "data": [0] * 64}, None)]))
case("shape-declared-huge-binary", "400 invalid_field | binary_data_size is 256",
     body([({"name": "query", "shape": [65536, 65536, 64], "datatype": "FP32",
             "parameters": {"binary_data_size": 256}}, bytes(256))]))
case("query-rank4", "400 invalid_field | at most 3",
     body([inp("query", fp32((1, 1, 2, 64)))]))
case("query-width", "400 invalid_field | embed_dim 64", body([inp("query", fp32((2, 32)))]))
case("data-and-binary", "400 invalid_field | give one",
     body([({"name": "query", "shape": [1, 64], "datatype": "FP32", "data": [0] * 64,
             "parameters": {"binary_data_size": 256}}, bytes(256))]))
case("data-missing", "400 invalid_field | needs data",
     body([({"name": "query", "shape": [1, 64], "datatype": "FP32"}, None)]))
case("shared-memory", "400 invalid_field | no shared memory",
     body([({"name": "query", "shape": [1, 64], "datatype": "FP32",
             "parameters": {"shared_memory_region": "r", "shared_memory_byte_size": 256}},
            None)]))
case("key-lengths-range-binary", "400 invalid_field | key_lengths[1] is 6",
     body([inp("query", q, binary=True),
           inp("key_lengths", np.array([2, 6]), "INT32", binary=True)]))
case("key-lengths-count-binary", "400 invalid_field | must hold N=2",
     body([inp("query", q, binary=True),
           inp("key_lengths", np.array([2, 3, 4]), "INT32", binary=True)]))
case("key-lengths-2d", "400 invalid_field | must be [N]",
     body([inp("query", q), inp("key_lengths", np.array([[2], [3]]), "INT32")]))
case("key-lengths-json-range", "400 invalid_field | key_lengths[0]",
     body([inp("query", q), inp("key_lengths", np.array([9, 3]), "INT32")]))
case("job-too-large", "413 job_too_large | max_job_bytes",
     body([inp("query", q, binary=True)]), limits="max_job_bytes=4096")

# ---- Parameters --------------------------------------------------------------------------
case("heads-malformed", "400 invalid_field | separated by commas",
     body([inp("query", q2)], params={"need_weights": "per_head", "heads": "0,,2"}))
case("heads-number", "400 invalid_field | a string of head indices",
     body([inp("query", q2)], params={"need_weights": "per_head", "heads": 2}))
case("heads-out-of-range", "400 invalid_field | heads[1]",
     body([inp("query", q2)], params={"need_weights": "per_head", "heads": "0,4"}))
case("heads-repeated", "400 invalid_field | repeats head 2",
     body([inp("query", q2)], params={"need_weights": "per_head", "heads": "2,2"}))
case("heads-without-per-head", "400 invalid_field | per_head",
     body([inp("query", q2)], params={"heads": "1"}))
case("causal-bad", "400 invalid_field | bottom_right",
     body([inp("query", q2)], params={"causal": "yes"}))
case("top-k-over-s", "400 invalid_field | weights_top_k",
     body([inp("query", q2)], params={"need_weights": "mean", "weights_top_k": 6}))
case("unknown-parameter", "400 invalid_field | \"sequence_flags\"",
     body([inp("query", q2)], params={"sequence_flags": 3}))
# Triton's schedule policy parameters: integers of at least 0 (priority changes nothing).
case("priority-and-timeout-ok", "200",
     body([inp("query", q2)], params={"priority": 2, "timeout": 30000000}))
case("priority-negative", "400 invalid_field | priority must be a whole number",
     body([inp("query", q2)], params={"priority": -1}))
case("timeout-fraction", "400 invalid_field | microseconds",
     body([inp("query", q2)], params={"timeout": 1.5}))
case("timeout-string", "400 invalid_field | microseconds",
     body([inp("query", q2)], params={"timeout": "1s"}), model="sdpa")
case("timeout-twice", "400 invalid_field | timeout twice",
     (b'{"parameters": {"timeout": 1, "timeout": 2}, "inputs": []}', None))
case("scale-on-model", "400 invalid_field | \"scale\"",
     body([inp("query", q2)], params={"scale": 1.0}))
case("heads-on-sdpa", "400 invalid_field | \"heads\"",
     body([inp("q", D), inp("k", D), inp("v", D)], params={"heads": "0"}), model="sdpa")
case("sdpa-need-weights-mean", "400 invalid_field | per_head",
     body([inp("q", D), inp("k", D), inp("v", D)], params={"need_weights": "mean"}),
     model="sdpa")
case("sdpa-query-name", "400 invalid_field | is named \"query\"",
     body([inp("query", D)]), model="sdpa")
case("binary-data-output-string", "400 invalid_field | true or false",
     body([inp("query", q2)], params={"binary_data_output": "yes"}))

# ---- Outputs -----------------------------------------------------------------------------
case("output-unknown", "400 invalid_field | \"attention\"",
     body([inp("query", q2)], outputs=[{"name": "attention"}]))
case("output-weights-without-need", "400 invalid_field | needs the parameter need_weights",
     body([inp("query", q2)], outputs=[{"name": "weights"}]))
case("output-indices-without-top-k", "400 invalid_field | weights_top_k",
     body([inp("query", q2)], params={"need_weights": "mean"},
          outputs=[{"name": "weights_indices"}]))
case("output-classification", "400 invalid_field | does not classify",
     body([inp("query", q2)], outputs=[{"name": "output", "parameters": {"classification": 3}}]))
case("output-duplicate", "400 invalid_field | listed twice",
     body([inp("query", q2)], outputs=[{"name": "output"}, {"name": "output"}]))

# ---- Models ------------------------------------------------------------------------------
case("model-unknown", "404 unknown_model | no model named \"nope\"", body([inp("query", q2)]),
     model="nope")
case("model-version-2", "404 unknown_model | no version \"2\"", body([inp("query", q2)]),
     version="2")

# ---- Triton's sequence parameters (v2_seq.c) -----------------------------------------------
# test_api parses without decode sessions: a request of a sequence is refused after its
# parameters are checked; 0 and "" are no sequence, as tritonclient's default.
case("sequence-no-sessions", "400 invalid_field | needs decode sessions",
     body([inp("query", q2)], params={"sequence_id": 3, "sequence_start": True,
                                      "sequence_end": False}))
case("sequence-id-zero-ok", "200",
     body([inp("query", q2)], params={"sequence_id": 0, "sequence_start": False,
                                      "sequence_end": False}))
case("sequence-id-empty-ok", "200", body([inp("query", q2)], params={"sequence_id": ""}))
case("sequence-start-without-id", "400 invalid_field | need a sequence_id",
     body([inp("query", q2)], params={"sequence_id": 0, "sequence_start": True}))
case("sequence-end-without-id", "400 invalid_field | need a sequence_id",
     body([inp("query", q2)], params={"sequence_end": True}))
case("sequence-start-number", "400 invalid_field | sequence_start must be true or false",
     body([inp("query", q2)], params={"sequence_id": 3, "sequence_start": 1}))
case("sequence-id-negative", "400 invalid_field | uint64 or a string",
     body([inp("query", q2)], params={"sequence_id": -3}))
case("sequence-id-fraction", "400 invalid_field | uint64 or a string",
     body([inp("query", q2)], params={"sequence_id": 2.5}))
case("sequence-id-long-string", "400 invalid_field | more than 128 bytes",
     body([inp("query", q2)], params={"sequence_id": "s" * 129}))
case("sequence-on-sdpa", "400 invalid_field | not on sdpa",
     body([inp("q", D), inp("k", D), inp("v", D)], params={"sequence_id": "a"}),
     model="sdpa")
case("sequence-id-twice", "400 invalid_field | sequence_id twice",
     (b'{"parameters": {"sequence_id": 1, "sequence_id": 2}, "inputs": []}', None))


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".case"):
            os.remove(os.path.join(OUT, f))
    for name, data in CASES:
        with open(os.path.join(OUT, name + ".case"), "wb") as f:
            f.write(data)
    print(f"{len(CASES)} cases in {OUT}")


if __name__ == "__main__":
    main()
