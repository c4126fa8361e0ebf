#!/usr/bin/python3
"""graphs.py - ONNX graphs of the core benchmark's workloads for ONNX Runtime (bench/run_ort.py),
made from the bench's own inputs, with torch's outputs to check them against.

Legend: N = batch, L = query length, S = key length (S = L: self-attention), E = embedding width,
H = heads, Dh = E / H.

Usage: /usr/bin/python3 bench/ort/graphs.py --dir DIR [--only NAME]

For each workload of bench/torch_mha.py (W1-W5, W4-nocausal) it writes into DIR:
  NAME.x.bin            the input x (N, L, E), float32, bit for bit bench_attention's (torch_mha's
                        splitmix64 streams, imported, not copied)
  NAME.ref.out.bin      torch's output (N, L, E) for it (nn.MultiheadAttention, eval, no_grad)
  NAME.ref.w.bin        with per-head weights: torch's weights (N, H, L, S)
  NAME.plain.onnx       torch.onnx.export of that nn.MultiheadAttention (opset 17); the masks are
                        constants of the graph, weights an output where the workload asks for them
  NAME.attention.onnx   com.microsoft.Attention (packed in-projection, (E, 3E)) + MatMul + Add
                        (the out-projection, which the op does not do)
  NAME.mha.onnx         MatMul (x, in-projection) + Split into Q, K, V + com.microsoft
                        .MultiHeadAttention (in-projection bias inside the op) + MatMul + Add
  NAME.mha_w.onnx       with per-head weights only: that graph with MultiHeadAttention's optional
                        output qk (the scaled scores Q K^T / sqrt(Dh), (N, H, L, S)) and a Softmax
                        of it as the weights: the fused graph that writes weights
and prints one JSON line per graph: {"type": "graph", "name", "graph", "path", "outputs",
"masks", "writes_weights", "note"}, then {"type": "done"}.

Masks, as each graph expresses them:
  causal (W2, W4)       plain: attn_mask (L, S) bool; Attention: unidirectional=1;
                        MultiHeadAttention: unidirectional=1
  key lengths (W3)      plain: key_padding_mask (N, S) bool; Attention: mask_index (N) int32 (right
                        padding: each key length); MultiHeadAttention: key_padding_mask (N) int32
  per-head weights      plain: the second output (N, H, L, S). Neither fused op outputs the softmax,
  (W1, W5)              so the Attention and MultiHeadAttention graphs compute the output only:
                        they do less work than attnd and the plain graph. mha_w writes them:
                        Softmax(qk) (qk holds the scores before the softmax, and the masks' bias).
The fused ops add mask_filter_value (-10000) to masked scores where torch and attnd use -inf; with
these inputs a masked key's weight is exp(-10000 - max) = 0 in float32 either way.
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
import torch_mha  # noqa: E402  (bench/torch_mha.py: the workloads and their inputs)

OPSET = 17
MS = "com.microsoft"


class Plain(torch.nn.Module):
    """nn.MultiheadAttention on x alone, its masks held as constants."""

    def __init__(self, mha, attn_mask, kpm, per_head):
        super().__init__()
        self.mha, self.attn_mask, self.kpm, self.per_head = mha, attn_mask, kpm, per_head

    def forward(self, x):
        out, w = self.mha(x, x, x, key_padding_mask=self.kpm, need_weights=self.per_head,
                          attn_mask=self.attn_mask, average_attn_weights=False)
        return (out, w) if self.per_head else out


def params(mha):
    """(in_proj_weight (3E, E), in_proj_bias (3E), out_proj.weight (E, E), out_proj.bias (E)) as
    float32 numpy arrays."""
    return tuple(t.detach().numpy().astype(np.float32) for t in
                 (mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias))


def inputs(*names):
    """A node's input names without the trailing omitted ("") optional ones."""
    names = list(names)
    while names and not names[-1]:
        names.pop()
    return names


def fused_graph(kind, spec, mha):
    """The com.microsoft.Attention ("attention") or com.microsoft.MultiHeadAttention ("mha", and
    "mha_w" with the weights) graph of the workload: x (N, L, E) -> out (N, L, E) [, weights
    (N, H, L, S)]."""
    name, _, n, l, e, h, causal, key_lengths, _ = spec
    w_in, b_in, w_out, b_out = params(mha)
    inits = [numpy_helper.from_array(np.ascontiguousarray(w_in.T), "w_in_t"),  # (E, 3E)
             numpy_helper.from_array(b_in, "b_in"),  # (3E)
             numpy_helper.from_array(np.ascontiguousarray(w_out.T), "w_out_t"),  # (E, E)
             numpy_helper.from_array(b_out, "b_out")]  # (E)
    attrs = {"num_heads": h}
    if causal:
        attrs["unidirectional"] = 1
    mask = ""
    if key_lengths is not None:
        inits.append(numpy_helper.from_array(np.array(key_lengths, dtype=np.int32), "key_lengths"))
        mask = "key_lengths"  # (N): the keys j >= key_lengths[b] are padding
    nodes, outputs = [], [helper.make_tensor_value_info("out", TensorProto.FLOAT, [n, l, e])]
    if kind == "attention":
        nodes.append(helper.make_node("Attention", inputs("x", "w_in_t", "b_in", mask), ["ctx"],
                                      domain=MS, **attrs))
    else:
        inits.append(numpy_helper.from_array(np.array([e, e, e], dtype=np.int64), "split"))
        nodes += [helper.make_node("MatMul", ["x", "w_in_t"], ["qkv"]),  # (N, L, 3E), no bias
                  helper.make_node("Split", ["qkv", "split"], ["q", "k", "v"], axis=2),
                  helper.make_node("MultiHeadAttention", inputs("q", "k", "v", "b_in", mask),
                                   ["ctx"] + (["", "", "qk"] if kind == "mha_w" else []),
                                   domain=MS, **attrs)]
        if kind == "mha_w":
            nodes.append(helper.make_node("Softmax", ["qk"], ["weights"], axis=-1))
            outputs.append(helper.make_tensor_value_info("weights", TensorProto.FLOAT,
                                                         [n, h, l, l]))
    nodes += [helper.make_node("MatMul", ["ctx", "w_out_t"], ["proj"]),
              helper.make_node("Add", ["proj", "b_out"], ["out"])]
    g = helper.make_graph(
        nodes, f"{name}_{kind}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, l, e])], outputs, inits)
    if kind == "mha_w":  # qk's type is its own constraint, which ORT does not infer
        g.value_info.append(helper.make_tensor_value_info("qk", TensorProto.FLOAT, [n, h, l, l]))
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET),
                                                helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    onnx.checker.check_model(model)  # the com.microsoft nodes are not checked, the rest is
    return model


def masks_of(spec, kind):
    name, _, n, l, e, h, causal, key_lengths, per_head = spec
    m = []
    if causal:
        m.append({"plain": "attn_mask (L, S) bool", "attention": "unidirectional=1"}.get(
            kind, "unidirectional=1"))
    if key_lengths is not None:
        m.append({"plain": "key_padding_mask (N, S) bool",
                  "attention": "mask_index (N) int32 key lengths"}.get(
            kind, "key_padding_mask (N) int32 key lengths"))
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="where to write the graphs and the data")
    ap.add_argument("--only", help="this workload only")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    torch.set_num_threads(os.cpu_count() or 1)
    done = 0
    for spec in torch_mha.WORKLOADS:
        name, _, n, l, e, h, causal, key_lengths, per_head = spec
        if args.only and name != args.only:
            continue
        print(f"graphs: {name}", file=sys.stderr, flush=True)
        mha, x, attn_mask, kpm = torch_mha.build(spec)
        base = os.path.join(args.dir, name)
        x.numpy().astype(np.float32).tofile(base + ".x.bin")
        with torch.no_grad():
            out, w = mha(x, x, x, key_padding_mask=kpm, need_weights=per_head,
                         attn_mask=attn_mask, average_attn_weights=False)
        out.numpy().astype(np.float32).tofile(base + ".ref.out.bin")
        if per_head:
            w.numpy().astype(np.float32).tofile(base + ".ref.w.bin")  # (N, H, L, S)

        # The plain export: requires_grad stays on, so that torch 1.13 traces the Python path of
        # multi_head_attention_forward (its fused fast path does not export).
        outputs = ["out", "weights"] if per_head else ["out"]
        torch.onnx.export(Plain(mha, attn_mask, kpm, per_head), (x,), base + ".plain.onnx",
                          input_names=["x"], output_names=outputs, opset_version=OPSET,
                          do_constant_folding=True)
        graphs = [("plain", base + ".plain.onnx", outputs, bool(per_head), "")]
        for kind in ("attention", "mha"):
            path = f"{base}.{kind}.onnx"
            onnx.save(fused_graph(kind, spec, mha), path)
            graphs.append((kind, path, ["out"], False,
                           "no weights output: less work than attnd" if per_head else ""))
        if per_head:
            path = f"{base}.mha_w.onnx"
            onnx.save(fused_graph("mha_w", spec, mha), path)
            graphs.append(("mha_w", path, ["out", "weights"], True, ""))
        for kind, path, outs, ww, note in graphs:
            print(json.dumps({"type": "graph", "name": name, "graph": kind, "path": path,
                              "outputs": outs, "masks": masks_of(spec, kind),
                              "writes_weights": ww, "note": note,
                              "shape": [n, l, e], "h": h}), flush=True)
        done += 1
    if args.only and done == 0:
        print(f"graphs: no workload is called {args.only}", file=sys.stderr)
        return 1
    print(json.dumps({"type": "done", "workloads": done}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
