#!/usr/bin/python3
"""gen_layers.py - writes the safetensors cases of models of layers that attnd's loader must
refuse (tests/api_cases/safetensors/invalid/layers-*), beside gen_safetensors.py's: each a small
file of layers.i.* tensors with one thing wrong, and the phrase the one-line message must hold.

Run with /usr/bin/python3 (numpy only) from anywhere; the outputs are committed:

    /usr/bin/python3 tests/api_cases/gen_layers.py
"""
import json
import os
import struct

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "safetensors", "invalid")
E, H, V, P = 8, 2, 5, 6
VOCAB = ["s", "a", "b", "c", "d"]


def encode(tensors, metadata):
    """tensors: [(name, array)] as F32, in this order. The file's bytes."""
    header, data = {"__metadata__": metadata}, b""
    for name, a in tensors:
        raw = np.ascontiguousarray(a, "<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def layer(i, norm=False, e=E):
    rng = np.random.default_rng(i)
    out = []
    if norm:
        out += [(f"layers.{i}.norm1.weight", np.ones(e)), (f"layers.{i}.norm1.bias", np.zeros(e))]
    return out + [(f"layers.{i}.self_attn.in_proj_weight", rng.standard_normal((3 * e, e))),
                  (f"layers.{i}.self_attn.in_proj_bias", np.zeros(3 * e)),
                  (f"layers.{i}.self_attn.out_proj.weight", rng.standard_normal((e, e))),
                  (f"layers.{i}.self_attn.out_proj.bias", np.zeros(e))]


EMB = [("token_embeddings", np.ones((V, E))), ("position_embeddings", np.ones((P, E)))]
HEAD = [("lm_head.weight", np.ones((V, E)))]


def meta(**extra):
    m = {"num_heads": str(H), "vocab": json.dumps(VOCAB)}
    m.update(extra)
    return m


def case(name, tensors, metadata, expect):
    path = os.path.join(ROOT, "layers-" + name)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "model.safetensors"), "wb") as f:
        f.write(encode(tensors, metadata))
    with open(os.path.join(path, "expect"), "w") as f:
        f.write(expect + "\n")


def main():
    good = EMB + layer(0) + layer(1) + HEAD
    case("missing-in-proj", [t for t in good if "1.self_attn.in_proj_weight" not in t[0]], meta(),
         "tensor layers.1.self_attn.in_proj_weight is missing")
    case("gap", EMB + layer(0) + layer(2) + HEAD, meta(),
         "tensor layers.1.self_attn.in_proj_weight is missing")
    case("mixed", good + [("in_proj_weight", np.ones((3 * E, E)))], meta(),
         "in_proj_weight belongs to a model of one MHA")
    case("no-vocab", layer(0), {"num_heads": str(H)}, "needs token_embeddings (V, E)")
    case("norm-bias-alone", EMB + [("layers.0.norm1.bias", np.zeros(E))] + layer(0) + HEAD,
         meta(), "layers.0.norm1.bias needs layers.0.norm1.weight")
    case("norm-mismatch", EMB + layer(0, norm=True) + layer(1) + HEAD, meta(),
         "layers.1 has no norm1 where layers.0 has one")
    case("wrong-shape", EMB + layer(0) + [(n, a[:, :-1] if a.ndim == 2 else a)
                                          for n, a in layer(1)] + HEAD, meta(),
         "layers.1.self_attn.in_proj_weight has shape (24, 7); with E=8 it must be (24, 8)")
    case("lm-head-rows", EMB + layer(0) + [("lm_head.weight", np.ones((V + 1, E)))], meta(),
         "lm_head.weight has shape (6, 8)")
    case("lm-head-bias-alone", EMB + layer(0) + [("lm_head.bias", np.ones(V))], meta(),
         "lm_head.bias needs lm_head.weight")
    case("e-not-divisible", good, meta(num_heads="3"), "not divisible by num_heads=3")
    case("causal-value", good, meta(causal="yes"), "__metadata__.causal must be")
    case("eps-negative", good, meta(layer_norm_eps="-1"), "layer_norm_eps must be a number")
    case("eps-garbage", good, meta(layer_norm_eps="1e-5x"), "layer_norm_eps must be a number")
    scores = [[{"previous_token": 0.5, "induction": 0.5}] * H]
    case("scores-layers", good, meta(head_scores=json.dumps(scores)),
         "head_scores must be a list of 2 lists (the layers) of 2 objects")
    case("scores-heads", good, meta(head_scores=json.dumps([scores[0][:1]] * 2)),
         "head_scores must be a list of 2 lists (the layers) of 2 objects")
    case("scores-name", good, meta(head_scores=json.dumps([[{"Prev": 1}] * H] * 2)),
         "names of 1 to 32 bytes of a-z, 0-9 and _")
    case("scores-names-differ", good,
         meta(head_scores=json.dumps([[{"a": 1}, {"b": 1}]] * 2)),
         "every object must have the names of the first, in order")
    case("scores-not-json", good, meta(head_scores="[[{"), "head_scores is not JSON text")
    case("accuracy-not-number", good, meta(accuracy=json.dumps({"first_half": "high"})),
         "__metadata__.accuracy.first_half is not a finite number")
    case("index-leading-zero", EMB + [(n.replace("layers.1.", "layers.01."), a)
                                      for n, a in layer(1)] + layer(0), meta(),
         "unexpected tensor \"layers.01.self_attn.in_proj_weight\"")
    case("index-too-high", EMB + [(n.replace("layers.1.", "layers.64."), a)
                                  for n, a in layer(1)], meta(),
         "unexpected tensor \"layers.64.self_attn.in_proj_weight\"")
    case("top-without-layers", [("in_proj_weight", np.ones((3 * E, E))),
                                ("out_proj.weight", np.ones((E, E))),
                                ("norm.weight", np.ones(E))], {"num_heads": str(H)},
         "tensor norm.weight belongs to a model of layers")
    print(f"wrote the layers-* cases under {ROOT}")


if __name__ == "__main__":
    main()
