#!/usr/bin/python3
"""w6_graphs.py - the ONNX graphs of W6 (a decode session, issue 37) for ONNX Runtime, with
bench_attention's W6 inputs and weights and torch's outputs to check them against.

Legend: T = 4,096 steps (the final length), E = 512, H = 8, Dh = E / H = 64, t the length after
a step, P = t - 1 the rows cached before it, C = T the shared buffer's rows.

W6 appends one row a step: x_t (1, 1, E) is the step's query, key and value. bench_attention's
step (attention/decode.c, attn_mha_decode_step) projects the row with in_proj (weights (3E, E)
and bias), appends its key and value to the cache, attends its query over the t keys so far
(scale 1 / sqrt(Dh); the newest row's causal limit is every key, so no mask), and projects the
heads' outputs with out_proj (weights and bias). Each graph below computes the same, with the
same weights (bench/torch_mha.py's generator, bit for bit bench_attention's):

  W6.mha.onnx   MatMul (x, in_proj^T) + Split + com.microsoft.MultiHeadAttention (the in_proj
                bias inside the op; past_key, past_value (1, H, P, Dh) in, present_key,
                present_value (1, H, t, Dh) out: the op copies the past into the present and
                appends the new row) + MatMul + Add (out_proj). The caller feeds each step's
                present back as the next step's past; step 1's past has P = 0 rows.
  W6.gqa.onnx   MatMul + Add (in_proj with its bias, packed q, k, v (1, 1, 3E)) +
                com.microsoft.GroupQueryAttention with kv_num_heads = num_heads (so plain
                multi-head attention) on a shared buffer: past_key, past_value (1, H, C, Dh) and
                present_key, present_value bound to the same memory, seqlens_k = t - 1 and
                total_sequence_length = t; the op writes the new row in place and attends rows
                0..t-1 (ORT's CPU decoding path without a copy of the past) + MatMul + Add.

Files written to --dir:
  W6.x.bin          x (T, E) float32: row t - 1 is step t's input (W4's input, bit for bit)
  W6.ref.out.bin    torch's whole causal nn.MultiheadAttention on x (T, E): row t - 1 is what
                    step t must output (a causal row never changes when a row is appended)
  W6.mha.onnx, W6.gqa.onnx
and prints one JSON line per graph ({"type": "graph", "name": "W6", "graph", "path", "op"}),
then {"type": "done"}.
"""

import argparse
import json
import os
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_mha  # noqa: E402  (bench/torch_mha.py: the generator of bench_attention's inputs)

OPSET = 17
MS = "com.microsoft"
T, E, H = 4096, 512, 8
DH = E // H
# W6 is W4's module and input (bench_attention.c's w6_main: the W4 streams, causal).
SPEC = ("W6", "decode session", 1, T, E, H, True, None, False)


def weights(mha):
    """The initializers: in_proj^T (E, 3E), in_proj bias (3E), out_proj^T (E, E), its bias (E)."""
    w_in, b_in, w_out, b_out = (t.detach().numpy().astype(np.float32) for t in
                                (mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight,
                                 mha.out_proj.bias))
    return [numpy_helper.from_array(np.ascontiguousarray(w_in.T), "w_in_t"),
            numpy_helper.from_array(b_in, "b_in"),
            numpy_helper.from_array(np.ascontiguousarray(w_out.T), "w_out_t"),
            numpy_helper.from_array(b_out, "b_out")]


def model(nodes, name, ins, outs, inits):
    g = helper.make_graph(nodes, name, ins, outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET),
                                            helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    onnx.checker.check_model(m)  # the com.microsoft nodes are not checked, the rest is
    return m


def f32(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def mha_graph(mha):
    """MultiHeadAttention with past and present: x (1, 1, E), past (1, H, P, Dh) -> out (1, 1, E),
    present (1, H, P + 1, Dh)."""
    inits = weights(mha) + [numpy_helper.from_array(np.array([E, E, E], dtype=np.int64), "split")]
    nodes = [helper.make_node("MatMul", ["x", "w_in_t"], ["qkv"]),  # (1, 1, 3E), no bias yet
             helper.make_node("Split", ["qkv", "split"], ["q", "k", "v"], axis=2),
             # inputs: query, key, value, bias, key_padding_mask, attention_bias, past_key,
             # past_value
             helper.make_node("MultiHeadAttention",
                              ["q", "k", "v", "b_in", "", "", "past_key", "past_value"],
                              ["ctx", "present_key", "present_value"], domain=MS, num_heads=H),
             helper.make_node("MatMul", ["ctx", "w_out_t"], ["proj"]),
             helper.make_node("Add", ["proj", "b_out"], ["out"])]
    ins = [f32("x", [1, 1, E]), f32("past_key", [1, H, "past", DH]),
           f32("past_value", [1, H, "past", DH])]
    outs = [f32("out", [1, 1, E]), f32("present_key", [1, H, "total", DH]),
            f32("present_value", [1, H, "total", DH])]
    return model(nodes, "W6_mha", ins, outs, inits)


def gqa_graph(mha):
    """GroupQueryAttention on a shared buffer of C rows: x (1, 1, E), past (1, H, C, Dh),
    seqlens_k (1) = t - 1, total_len () = t -> out (1, 1, E), present (1, H, C, Dh)."""
    nodes = [helper.make_node("MatMul", ["x", "w_in_t"], ["qkv0"]),
             helper.make_node("Add", ["qkv0", "b_in"], ["qkv"]),  # (1, 1, 3E): q, k, v packed
             # inputs: query (packed), key, value (omitted: packed), past_key, past_value,
             # seqlens_k, total_sequence_length
             helper.make_node("GroupQueryAttention",
                              ["qkv", "", "", "past_key", "past_value", "seqlens_k", "total_len"],
                              ["ctx", "present_key", "present_value"], domain=MS, num_heads=H,
                              kv_num_heads=H),
             helper.make_node("MatMul", ["ctx", "w_out_t"], ["proj"]),
             helper.make_node("Add", ["proj", "b_out"], ["out"])]
    ins = [f32("x", [1, 1, E]), f32("past_key", [1, H, "cap", DH]),
           f32("past_value", [1, H, "cap", DH]),
           helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, [1]),
           helper.make_tensor_value_info("total_len", TensorProto.INT32, [])]
    outs = [f32("out", [1, 1, E]), f32("present_key", [1, H, "cap", DH]),
            f32("present_value", [1, H, "cap", DH])]
    return model(nodes, "W6_gqa", ins, outs, weights(mha))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="where to write the graphs and the data")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    torch.set_num_threads(os.cpu_count() or 1)
    mha, x, attn_mask, _ = torch_mha.build(SPEC)  # x (1, T, E), attn_mask (T, T) causal
    base = os.path.join(args.dir, "W6")
    x.numpy().astype(np.float32).tofile(base + ".x.bin")
    with torch.no_grad():
        out, _ = mha(x, x, x, attn_mask=attn_mask, need_weights=False)
    out.numpy().astype(np.float32).tofile(base + ".ref.out.bin")
    for kind, build, op in (("mha", mha_graph, "com.microsoft.MultiHeadAttention"),
                            ("gqa", gqa_graph, "com.microsoft.GroupQueryAttention")):
        path = f"{base}.{kind}.onnx"
        onnx.save(build(mha), path)
        print(json.dumps({"type": "graph", "name": "W6", "graph": kind, "path": path, "op": op,
                          "t": T, "e": E, "h": H}), flush=True)
    print(json.dumps({"type": "done"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
