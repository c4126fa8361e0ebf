#!/usr/bin/python3
"""gen_safetensors.py - writes the safetensors test cases of test_api (tests/api/models_safetensors.c).

Run with /usr/bin/python3 (it needs torch and numpy) from the repository root:

    /usr/bin/python3 tests/api_cases/gen_safetensors.py

valid/<case>/model.safetensors   nn.MultiheadAttention weights (F32, F16 or BF16) and
valid/<case>/reference.json      a query (and key/value), PyTorch's output for it, and the weights
                                 as float32 after the dtype's rounding (bit-exact expectations)
invalid/<case>/model.safetensors a broken file
invalid/<case>/expect            a phrase the loader's one-line message must contain

Models with a vocabulary (valid/*-vocab-*) also carry token_embeddings, position_embeddings and the
metadata lists vocab and head_names; their reference.json adds the vocabulary, the head names, texts
with their split by longest match (written here independently of attnd's splitter), the query
those words make (token_embeddings row + position_embeddings row) and an unknown word's offset.

The outputs are committed; the C test needs neither Python nor torch. The format is written by
hand (8-byte little-endian header length, JSON header, raw data), as the issue asks.
"""
import json
import os
import struct
import sys

import numpy as np
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "safetensors")


def f32(x):
    """Shortest repr of a float32 value (reads back exactly)."""
    return float(np.float32(x))


def encode(tensors, metadata, header_extra=None, order=None, pad=True):
    """tensors: list of (name, dtype, shape, bytes). Returns the file bytes."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if header_extra:
        header.update(header_extra)
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def raw_of(t, dtype):
    if dtype == "F32":
        return t.detach().to(torch.float32).numpy().astype("<f4").tobytes()
    if dtype == "F16":
        return t.detach().to(torch.float16).numpy().astype("<f2").tobytes()
    if dtype == "BF16":
        return t.detach().to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
    raise ValueError(dtype)


def rounded(t, dtype):
    if dtype == "F32":
        return t.detach().to(torch.float32)
    if dtype == "F16":
        return t.detach().to(torch.float16).to(torch.float32)
    return t.detach().to(torch.bfloat16).to(torch.float32)


def write(path, name, blob):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, name), "wb" if isinstance(blob, bytes) else "w") as f:
        f.write(blob)


def valid_case(case, dtype, e, h, kdim=None, vdim=None, bias=True, seed=0, n=2, l=3, s=4,
               bias_kv=False, zero_attn=False):
    """bias_kv and zero_attn: nn.MultiheadAttention's add_bias_kv (bias_k and bias_v in the
    state_dict) and add_zero_attn (__metadata__ "add_zero_attn": "true")."""
    g = torch.Generator().manual_seed(seed)
    mha = torch.nn.MultiheadAttention(e, h, bias=bias, kdim=kdim, vdim=vdim, batch_first=True,
                                      add_bias_kv=bias_kv, add_zero_attn=zero_attn)
    sd = {k: torch.randn(v.shape, generator=g) * 0.5 for k, v in mha.state_dict().items()}
    if dtype == "F16":
        # Values that are subnormal in float16 (below 6.1e-5), and the largest finite ones.
        first = "in_proj_weight" if "in_proj_weight" in sd else "q_proj_weight"
        w = sd[first].view(-1)
        w[0], w[1], w[2], w[3] = 3.0e-6, -5.96e-8, 65504.0 / 1e5, -1.0e-7
    if dtype == "BF16":
        first = "in_proj_weight" if "in_proj_weight" in sd else "q_proj_weight"
        w = sd[first].view(-1)
        w[0], w[1] = 1.0e-39, -3.0e-40  # subnormal in bfloat16 too
    exact = {k: rounded(v, dtype) for k, v in sd.items()}
    mha.load_state_dict(exact)
    names = list(sd.keys())
    tensors = [(k, dtype, sd[k].shape, raw_of(sd[k], dtype)) for k in names]
    meta = {"num_heads": str(h), "format": "pt"}
    if zero_attn:
        meta["add_zero_attn"] = "true"
    blob = encode(tensors, meta)
    query = torch.randn(n, l, e, generator=g)
    kd, vd = kdim or e, vdim or e
    cross = kdim is not None or vdim is not None
    key = torch.randn(n, s, kd, generator=g) if cross else query
    value = torch.randn(n, s, vd, generator=g) if cross else query
    with torch.no_grad():
        out, _ = mha(query, key, value, need_weights=False)
    ref = {
        "num_heads": h, "embed_dim": e, "kdim": kd, "vdim": vd, "has_bias": bias,
        "add_bias_kv": bias_kv, "add_zero_attn": zero_attn,
        "query": [[[f32(x) for x in row] for row in b] for b in query.tolist()],
        "output": [[[f32(x) for x in row] for row in b] for b in out.tolist()],
        "weights": {k: [f32(x) for x in v.reshape(-1).tolist()] for k, v in exact.items()},
    }
    if cross:
        ref["key"] = [[[f32(x) for x in row] for row in b] for b in key.tolist()]
        ref["value"] = [[[f32(x) for x in row] for row in b] for b in value.tolist()]
    path = os.path.join(ROOT, "valid", case)
    write(path, "model.safetensors", blob)
    write(path, "reference.json", json.dumps(ref, indent=1) + "\n")
    return tensors


SPACES = " \t\n\r\u3000"


def split(text, vocab):
    """Longest match, whitespace separating and dropped: the split attnd must make."""
    out, i = [], 0
    while i < len(text):
        if text[i] in SPACES:
            i += 1
            continue
        n = max((len(t) for t in vocab if text.startswith(t, i)), default=0)
        if n == 0:
            return out, i  # an unknown word at character i
        out.append(text[i:i + n])
        i += n
    return out, None


def jlist(items):
    return json.dumps(items, ensure_ascii=False, separators=(",", ":"))


def vocab_case(case, dtype, e, h, vocab, positions, texts, unknown, seed, start=None):
    """A model with a vocabulary: token_embeddings (V, E), position_embeddings (P, E) when
    positions, head names; the reference of texts split and embedded. With start, the metadata's
    start_token: each split's tokens are those attnd echoes, the start token first, and the query
    is made from them."""
    g = torch.Generator().manual_seed(seed)
    mha = torch.nn.MultiheadAttention(e, h, bias=True, batch_first=True)
    sd = {k: torch.randn(v.shape, generator=g) * 0.5 for k, v in mha.state_dict().items()}
    sd["token_embeddings"] = torch.randn(len(vocab), e, generator=g)
    if positions:
        sd["position_embeddings"] = torch.randn(positions, e, generator=g) * 0.25
    exact = {k: rounded(v, dtype) for k, v in sd.items()}
    mha.load_state_dict({k: v for k, v in exact.items() if "embeddings" not in k})
    names = ["head%d" % i for i in range(h)]
    tensors = [(k, dtype, sd[k].shape, raw_of(sd[k], dtype)) for k in sd]
    meta = {"num_heads": str(h), "vocab": jlist(vocab), "head_names": jlist(names)}
    if start:
        meta["start_token"] = start
    blob = encode(tensors, meta)
    splits = []
    for text in texts:
        words, bad = split(text, vocab)
        assert bad is None, text
        splits.append({"text": text, "tokens": ([start] if start else []) + words})
    # The query of the first text: token_embeddings rows plus position_embeddings rows, in float32.
    words = splits[0]["tokens"]
    x = exact["token_embeddings"][[vocab.index(w) for w in words]]
    if positions:
        x = x + exact["position_embeddings"][:len(words)]
    query = x.unsqueeze(0)
    with torch.no_grad():
        out, _ = mha(query, query, query, need_weights=False)
    words, at = split(unknown, vocab)
    ref = {
        "num_heads": h, "embed_dim": e, "kdim": e, "vdim": e, "has_bias": True,
        "vocab": vocab, "head_names": names, "max_tokens": positions, "splits": splits,
        "start_token": start,
        "unknown": {"text": unknown, "at": at},
        "query": [[[f32(v) for v in row] for row in b] for b in query.tolist()],
        "output": [[[f32(v) for v in row] for row in b] for b in out.tolist()],
        "weights": {k: [f32(v) for v in t.reshape(-1).tolist()] for k, t in exact.items()},
    }
    path = os.path.join(ROOT, "valid", case)
    write(path, "model.safetensors", blob)
    write(path, "reference.json", json.dumps(ref, indent=1, ensure_ascii=False) + "\n")


def invalid(case, blob, expect):
    path = os.path.join(ROOT, "invalid", case)
    write(path, "model.safetensors", blob)
    write(path, "expect", expect + "\n")


def main():
    valid_case("f32-packed-bias", "F32", 8, 2, seed=1)
    valid_case("f16-packed-nobias", "F16", 8, 4, bias=False, seed=2)
    valid_case("bf16-kvdim-bias", "BF16", 8, 2, kdim=6, vdim=4, seed=3)
    valid_case("f32-kvdim-nobias", "F32", 12, 3, kdim=5, vdim=7, bias=False, seed=4)
    valid_case("f32-packed-biaskv-zeroattn", "F32", 8, 2, seed=10, bias_kv=True, zero_attn=True)
    valid_case("f16-kvdim-biaskv", "F16", 8, 4, kdim=6, vdim=5, seed=11, bias_kv=True)
    valid_case("bf16-packed-zeroattn", "BF16", 8, 2, bias=False, seed=12, zero_attn=True)
    # Longest match: "abcab" is abc ab, "aba" ab a, 你好好 你好 好; U+3000 and escapes separate.
    vocab = ["a", "ab", "abc", "b", "你", "你好", "好", "。", "🙂", "x\\y", "\"q\""]
    vocab_case("f32-vocab-pos", "F32", 8, 2, vocab, 9,
               ["你好 abcab。", "aba\u3000你好好\n\t🙂", "abca", "\"q\"x\\y"], "ab 🙂好 z你", seed=5)
    vocab_case("f16-vocab-nopos", "F16", 4, 4, vocab[:8], 0,
               ["abcabcab 你好 你好好好 a b 。" * 3, "b"], "你好吗", seed=6)
    # A start token (〈s〉, first in no order) before every text's words.
    vocab_case("f32-vocab-start", "F32", 8, 2, vocab[:8] + ["〈s〉"], 6,
               ["你好 abcab", "b", "〈s〉a"], "ab z", seed=7, start="〈s〉")

    e, h = 8, 2
    g = torch.Generator().manual_seed(9)
    W = lambda *shape: torch.randn(*shape, generator=g)  # noqa: E731
    good = [("in_proj_weight", "F32", (3 * e, e), raw_of(W(3 * e, e), "F32")),
            ("in_proj_bias", "F32", (3 * e,), raw_of(W(3 * e), "F32")),
            ("out_proj.weight", "F32", (e, e), raw_of(W(e, e), "F32")),
            ("out_proj.bias", "F32", (e,), raw_of(W(e), "F32"))]
    meta = {"num_heads": str(h)}
    ok = encode(good, meta)

    invalid("short-file", ok[:5], "too short for a safetensors header")
    invalid("header-past-eof", struct.pack("<Q", 1 << 20) + ok[8:], "runs past the end")
    text = b'{"__metadata__":{"num_heads":"2"},"in_proj_weight":{"dtype":"F32",'
    invalid("bad-json", struct.pack("<Q", len(text)) + text, "not valid JSON")
    text = b"[1, 2]  "
    invalid("header-not-object", struct.pack("<Q", len(text)) + text, "must be a JSON object")
    deep = b"{\"a\":" + b"[" * 100000 + b"]" * 100000 + b"}"
    invalid("deep-header", struct.pack("<Q", len(deep)) + deep, "nests too deeply")
    invalid("offsets-out-of-range",
            encode(good, meta, {"out_proj.bias": {"dtype": "F32", "shape": [e],
                                                  "data_offsets": [0, 10 ** 6]}}),
            "outside the")
    off = 4 * (3 * e * e + 3 * e + e * e)
    invalid("offsets-reversed",
            encode(good, meta, {"out_proj.bias": {"dtype": "F32", "shape": [e],
                                                  "data_offsets": [off + 4 * e, off]}}),
            "outside the")
    invalid("overlap",
            encode(good, meta, {"out_proj.bias": {"dtype": "F32", "shape": [e],
                                                  "data_offsets": [0, 4 * e]}}),
            "overlaps")
    gap = encode(good[:3], meta, {"out_proj.bias": {"dtype": "F32", "shape": [e],
                                                    "data_offsets": [off + 4, off + 4 + 4 * e]}})
    invalid("gap", gap + b"\0" * (4 * e + 4), "belong to no tensor")
    invalid("trailing-bytes", ok + b"\0\0\0\0", "belong to no tensor")
    bad_shape = [("out_proj.weight", "F32", (e, e - 1), raw_of(W(e, e - 1), "F32"))
                 if t[0] == "out_proj.weight" else t for t in good]
    invalid("wrong-shape-out", encode(bad_shape, meta), "out_proj.weight must be (E, E)")
    bad_shape = [("in_proj_bias", "F32", (2 * e,), raw_of(W(2 * e), "F32"))
                 if t[0] == "in_proj_bias" else t for t in good]
    invalid("wrong-shape-bias", encode(bad_shape, meta), "in_proj_bias has shape (16,)")
    invalid("rank-3", encode([("in_proj_weight", "F32", (3, e, e), good[0][3])] + good[1:], meta),
            "in_proj_weight has shape (3, 8, 8); with E=8 it must be (24, 8)")
    invalid("rank-4", encode([("in_proj_weight", "F32", (1, 3, e, e), good[0][3])] + good[1:],
                             meta), "more than 3 dimensions")
    invalid("size-mismatch",
            encode(good, meta, {"out_proj.bias": {"dtype": "F32", "shape": [e + 1],
                                                  "data_offsets": [off, off + 4 * e]}}),
            "but its shape and dtype need 36")
    invalid("missing-out-proj", encode([good[0], good[1]], meta), "out_proj.weight is missing")
    invalid("missing-in-proj", encode(good[2:], meta), "in_proj_weight (or q/k/v_proj_weight) is")
    split = [("q_proj_weight", "F32", (e, e), raw_of(W(e, e), "F32")),
             ("v_proj_weight", "F32", (e, 4), raw_of(W(e, 4), "F32")),
             ("out_proj.weight", "F32", (e, e), raw_of(W(e, e), "F32"))]
    invalid("missing-k-proj", encode(split, meta), "k_proj_weight is missing")
    invalid("both-in-and-q", encode(good + [("q_proj_weight", "F32", (e, e),
                                             raw_of(W(e, e), "F32"))], meta), "not both")
    invalid("missing-num-heads", encode(good, {"format": "pt"}), "lacks num_heads")
    invalid("no-metadata", encode(good, None), "lacks __metadata__")
    invalid("num-heads-not-string", encode(good, {"num_heads": 2}), "must be strings")
    invalid("num-heads-zero", encode(good, {"num_heads": "0"}), "positive integer")
    invalid("num-heads-garbage", encode(good, {"num_heads": "2x"}), "positive integer")
    invalid("e-not-divisible", encode(good, {"num_heads": "3"}), "not divisible by num_heads=3")
    nan = bytearray(good[2][3])
    nan[8:12] = struct.pack("<f", float("nan"))
    invalid("nonfinite-f32", encode([good[0], good[1], ("out_proj.weight", "F32", (e, e),
                                                        bytes(nan)), good[3]], meta),
            "non-finite value at element 2")
    half = bytearray(raw_of(W(e, e), "F16"))
    half[6:8] = struct.pack("<H", 0x7C00)  # +inf
    invalid("nonfinite-f16", encode([good[0], good[1], ("out_proj.weight", "F16", (e, e),
                                                        bytes(half)), good[3]], meta),
            "non-finite value at element 3")
    bf = bytearray(raw_of(W(e), "BF16"))
    bf[2:4] = struct.pack("<H", 0x7FC0)  # NaN
    invalid("nonfinite-bf16", encode(good[:3] + [("out_proj.bias", "BF16", (e,), bytes(bf))],
                                     meta), "non-finite value at element 1")
    invalid("bad-dtype", encode([("in_proj_weight", "F64", (3 * e, e // 2), good[0][3])] +
                                good[1:], meta), "dtype F64")
    invalid("unknown-tensor", encode(good + [("bias_q", "F32", (1, 1, e), raw_of(W(e), "F32"))],
                                     meta), "unexpected tensor \"bias_q\"")
    text = (b'{"__metadata__":{"num_heads":"2"},"out_proj.weight":{"dtype":"F32","shape":[1,1],'
            b'"data_offsets":[0,4]},"out_proj.weight":{"dtype":"F32","shape":[1,1],'
            b'"data_offsets":[0,4]}}')
    invalid("duplicate-tensor", struct.pack("<Q", len(text)) + text + b"\0" * 4, "appears twice")
    invalid("unknown-entry-field",
            encode(good, meta, {"out_proj.bias": {"dtype": "F32", "shape": [e],
                                                  "data_offsets": [off, off + 4 * e], "x": 1}}),
            "unknown header field \"x\"")
    vocab_invalid(W)
    # add_bias_kv's bias_k and bias_v (1, 1, E), both or neither; add_zero_attn in __metadata__.
    bias_k = ("bias_k", "F32", (1, 1, e), raw_of(W(e), "F32"))
    invalid("bias-k-alone", encode(good + [bias_k], meta),
            "tensor bias_v is missing: add_bias_kv gives bias_k and bias_v together")
    invalid("bias-k-shape", encode(good + [("bias_k", "F32", (e,), bias_k[3]),
                                           ("bias_v", "F32", (1, 1, e), bias_k[3])], meta),
            "bias_k has shape (8,); with E=8 it must be (1, 1, 8)")
    invalid("zero-attn-value", encode(good, {"num_heads": str(h), "add_zero_attn": "yes"}),
            "__metadata__.add_zero_attn must be \"true\" or \"false\"")
    return 0


def vocab_invalid(W):
    """Broken vocabularies and head names (E = 8, H = 2, V = 3)."""
    e, v = 8, 3
    mha = [("in_proj_weight", "F32", (3 * e, e), raw_of(W(3 * e, e), "F32")),
           ("out_proj.weight", "F32", (e, e), raw_of(W(e, e), "F32"))]
    tok = ("token_embeddings", "F32", (v, e), raw_of(W(v, e), "F32"))
    pos = ("position_embeddings", "F32", (4, e), raw_of(W(4, e), "F32"))
    words = jlist(["程序员", "它", "。"])

    def meta(vocab=words, names=None, start=None):
        m = {"num_heads": "2"}
        if vocab is not None:
            m["vocab"] = vocab
        if names is not None:
            m["head_names"] = names
        if start is not None:
            m["start_token"] = start
        return m

    def case(name, vocab, expect, tensors=None, names=None, start=None):
        invalid(name, encode(tensors or mha + [tok, pos], meta(vocab, names, start)), expect)

    case("vocab-bad-json", '["程序员", "它"', "__metadata__.vocab is not valid JSON")
    case("vocab-trailing", '["程序员", "它", "。"] x', "something follows the list")
    case("vocab-not-list", '{"程序员": 0}', "__metadata__.vocab must be a JSON list of strings")
    case("vocab-not-json-string", "程序员", "must be a JSON list of strings")
    case("vocab-number", '["程序员", 2, "。"]', "entry 1 is not a string")
    case("vocab-empty-list", "[]", "__metadata__.vocab is an empty list")
    case("vocab-empty-token", '["程序员", "", "。"]', "entry 1 is an empty string")
    case("vocab-duplicate", '["它", "。", "它"]', 'lists "它" twice (entries 0 and 2)')
    case("vocab-escaped-duplicate", '["它", "\\u5b83", "。"]', 'lists "它" twice')
    case("vocab-whitespace", '["程序 员", "它", "。"]', "holds whitespace")
    case("vocab-ideographic-space", '["程序员", "它\u3000", "。"]', "holds whitespace")
    case("vocab-control", '["程序员", "它\\u0001", "。"]', "entry 1 holds a control character")
    case("vocab-bad-escape", '["程序员", "\\x41", "。"]', "entry 1 holds an invalid escape")
    case("vocab-lone-surrogate", '["程序员", "\\ud800", "。"]', "lone high surrogate")
    case("vocab-unclosed-string", '["程序员", "它', "not closed")
    case("vocab-too-long", jlist(["程序员", "x" * 129, "。"]), "129 bytes long, over the limit of 128")
    case("vocab-size-mismatch", jlist(["程序员", "它"]),
         "with E=8 and the 2 tokens of __metadata__.vocab it must be (2, 8)")
    case("vocab-width-mismatch", words,
         "token_embeddings has shape (3, 7); with E=8 and the 3 tokens",
         mha + [("token_embeddings", "F32", (v, e - 1), raw_of(W(v, e - 1), "F32"))])
    case("vocab-no-embeddings", words, "__metadata__.vocab needs the tensor token_embeddings",
         mha + [pos])
    case("embeddings-no-vocab", None, "token_embeddings needs __metadata__.vocab")
    case("positions-no-embeddings", None, "position_embeddings needs token_embeddings", mha + [pos])
    case("positions-wrong-width", words, "position_embeddings has shape (4, 9); with E=8 it must be",
         mha + [tok, ("position_embeddings", "F32", (4, e + 1), raw_of(W(4, e + 1), "F32"))])
    case("positions-rank-1", words, "position_embeddings must be (P, E)",
         mha + [tok, ("position_embeddings", "F32", (e,), raw_of(W(e), "F32"))])
    split_proj = [("q_proj_weight", "F32", (e, e), raw_of(W(e, e), "F32")),
                  ("k_proj_weight", "F32", (e, 5), raw_of(W(e, 5), "F32")),
                  ("v_proj_weight", "F32", (e, e), raw_of(W(e, e), "F32")),
                  ("out_proj.weight", "F32", (e, e), raw_of(W(e, e), "F32"))]
    case("vocab-kdim", words, "a model with a vocabulary does self-attention", split_proj + [tok])
    nan = bytearray(tok[3])
    nan[4 * e:4 * e + 4] = struct.pack("<f", float("inf"))
    case("vocab-nonfinite", words, "token_embeddings holds a non-finite value at element 8",
         mha + [("token_embeddings", "F32", (v, e), bytes(nan))])
    text = ('{"__metadata__":{"num_heads":"2","vocab":"[\\"a\\"]","vocab":"[\\"b\\"]"},'
            '"out_proj.weight":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]}}').encode()
    invalid("vocab-twice", struct.pack("<Q", len(text)) + text + b"\0" * 4,
            "__metadata__.vocab appears twice")
    case("head-names-count", words, "__metadata__.head_names lists 3 names for num_heads=2",
         names=jlist(["a", "b", "c"]))
    case("head-names-duplicate", words, 'head_names lists "a" twice', names=jlist(["a", "a"]))
    case("head-names-empty", words, "head_names entry 1 is an empty string", names=jlist(["a", ""]))
    case("head-names-bad-json", words, "__metadata__.head_names is not valid JSON", names='["a", "b"')
    case("head-names-too-long", words, "over the limit of 64", names=jlist(["a", "b" * 65]))
    case("start-token-unknown", words, '__metadata__.start_token "〈s〉" is not a token of __meta',
         start="〈s〉")
    case("start-token-empty", words, '__metadata__.start_token "" is not a token', start="")
    case("start-token-prefix", words, 'start_token "程序" is not a token', start="程序")
    case("start-token-no-vocab", None, "__metadata__.start_token needs __metadata__.vocab",
         mha, start="。")
    text = ('{"__metadata__":{"num_heads":"2","vocab":"[\\"a\\"]","start_token":"a",'
            '"start_token":"a"},'
            '"out_proj.weight":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]}}').encode()
    invalid("start-token-twice", struct.pack("<Q", len(text)) + text + b"\0" * 4,
            "__metadata__.start_token appears twice")


if __name__ == "__main__":
    sys.exit(main())
