#!/usr/bin/python3
"""make_models.py - writes the safetensors model files the server tests load, from PyTorch
nn.MultiheadAttention weights, and torch's answers for requests against them.

The files are written by hand, as the format is: an 8-byte little-endian header length, a JSON
header ({name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, padded
with spaces to a multiple of 8), then the raw little-endian tensor bytes.

Usage: make_models.py --out DIR [--seed N]

DIR/models/NAME.safetensors      good models: f32, f16, bf16 (packed in_proj), kvdim (separate
                                 q/k/v_proj_weight with kdim, vdim != E)
DIR/broken/CASE/NAME.safetensors one broken file per folder; attnd must refuse to start on each
DIR/broken/expect.json           {CASE: file name} for the test to check the error line
DIR/cases/NAME.json              a request for model NAME and torch's float64 answer: output
                                 (L, E) and per-head weights (H, L, S) from the stored weights
                                 exactly as attnd reads them (F16/BF16 rounded, then widened)
"""

import argparse
import json
import shutil
import struct
import sys
from pathlib import Path

import numpy as np
import torch


def tensor_bytes(t, dtype):
    """Raw little-endian bytes of t (a float tensor) in dtype "F32", "F16" or "BF16"."""
    if dtype == "F32":
        return t.to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
    if dtype == "F16":
        return t.to(torch.float16).contiguous().numpy().astype("<f2").tobytes()
    if dtype == "BF16":
        return t.to(torch.bfloat16).contiguous().view(torch.int16).numpy().astype("<i2").tobytes()
    raise ValueError(dtype)


def stored(t, dtype):
    """t as attnd will hold it after loading: rounded to dtype, then widened to float64."""
    torch_dtype = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[dtype]
    return t.to(torch_dtype).to(torch.float64)


def write_safetensors(path, tensors, metadata, header_override=None, data_override=None):
    """tensors: list of (name, dtype string, shape, bytes)."""
    header = {}
    blobs = []
    off = 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    if metadata is not None:
        header["__metadata__"] = metadata
    text = header_override if header_override is not None else json.dumps(header)
    raw = text.encode()
    raw += b" " * (-len(raw) % 8)
    data = b"".join(blobs) if data_override is None else data_override
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def mha_module(E, H, bias, kdim=None, vdim=None, seed=0):
    torch.manual_seed(seed)
    m = torch.nn.MultiheadAttention(E, H, bias=bias, batch_first=True, kdim=kdim, vdim=vdim,
                                    dtype=torch.float64)
    with torch.no_grad():
        for p in m.parameters():  # unit-scale values, so that biases matter too
            p.copy_(torch.randn_like(p) / (p.shape[-1] ** 0.5 if p.dim() == 2 else 2.0))
    return m.eval()


def model_tensors(m, dtype):
    """The state_dict tensors attnd reads, as (name, dtype, shape, bytes), and the same values as
    attnd holds them (a dict of float64 tensors)."""
    out, held = [], {}
    for name, t in m.state_dict().items():
        if t is None:
            continue
        out.append((name, dtype, tuple(t.shape), tensor_bytes(t, dtype)))
        held[name] = stored(t, dtype)
    return out, held


def torch_answer(m, held, q, k, v):
    """nn.MultiheadAttention in float64 with the held weights: output (L, E), weights (H, L, S)."""
    with torch.no_grad():
        for name, t in held.items():
            dict(m.named_parameters())[name].copy_(t)
        out, w = m(q[None], k[None], v[None], need_weights=True, average_attn_weights=False)
    return out[0].numpy(), w[0].numpy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20241130)
    args = ap.parse_args()
    root = Path(args.out)
    for sub in ("models", "broken", "cases"):
        shutil.rmtree(root / sub, ignore_errors=True)
        (root / sub).mkdir(parents=True)
    rng = np.random.default_rng(args.seed)

    good = [
        # name, E, H, bias, kdim, vdim, dtype, L, S
        ("f32", 32, 4, True, None, None, "F32", 5, 5),
        ("f16", 16, 2, True, None, None, "F16", 4, 7),
        ("bf16", 24, 3, False, None, None, "BF16", 6, 6),
        ("kvdim", 16, 4, True, 8, 12, "F32", 3, 5),
    ]
    for i, (name, E, H, bias, kdim, vdim, dtype, L, S) in enumerate(good):
        m = mha_module(E, H, bias, kdim, vdim, seed=args.seed + i)
        tensors, held = model_tensors(m, dtype)
        write_safetensors(root / "models" / f"{name}.safetensors", tensors,
                          {"num_heads": str(H), "source": "tests/server/make_models.py"})
        q = rng.standard_normal((L, E)).astype(np.float32)
        self_attn = kdim is None and L == S
        k = q if self_attn else rng.standard_normal((S, kdim or E)).astype(np.float32)
        v = q if self_attn else rng.standard_normal((S, vdim or E)).astype(np.float32)
        out, w = torch_answer(m, held, *(torch.from_numpy(a.astype(np.float64)) for a in (q, k, v)))
        request = {"model": name, "query": q.tolist(), "need_weights": "per_head"}
        if not self_attn:
            request.update(key=k.tolist(), value=v.tolist())
        (root / "cases" / f"{name}.json").write_text(json.dumps({
            "model": name, "embed_dim": E, "num_heads": H, "has_bias": bias,
            "request": request, "output": out.tolist(), "weights": w.tolist()}))

    # Broken files: each alone in a folder, so that each start-up fails on that file.
    m = mha_module(8, 2, True, seed=1)
    tensors, _ = model_tensors(m, "F32")
    broken = {}

    def bad(case, fname, **kw):
        d = root / "broken" / case
        d.mkdir()
        write_safetensors(d / fname, kw.pop("tensors", tensors), kw.pop("meta", {"num_heads": "2"}),
                          **kw)
        broken[case] = fname

    bad("truncated", "truncated.safetensors",
        data_override=b"".join(t[3] for t in tensors)[:-10])
    bad("header", "not_json.safetensors", header_override='{"in_proj_weight": {"dtype": ')
    bad("missing", "no_out_proj.safetensors",
        tensors=[t for t in tensors if not t[0].startswith("out_proj.weight")])
    bad("dtype", "int_dtype.safetensors",
        tensors=[(n, "I64" if n == "in_proj_weight" else d, s, b) for n, d, s, b in tensors])
    bad("heads", "bad_heads.safetensors", meta={"num_heads": "3"})  # E = 8 is not a multiple of 3
    bad("noheads", "no_heads.safetensors", meta={})
    bad("reserved", "sdpa.safetensors")  # a good model under the name the v2 SDPA model holds
    d = root / "broken" / "short"
    d.mkdir()
    (d / "short.safetensors").write_bytes(b"\x10\x00\x00")
    broken["short"] = "short.safetensors"
    (root / "broken" / "expect.json").write_text(json.dumps(broken, indent=1))
    print(f"make_models: {len(good)} models, {len(broken)} broken files, {len(good)} cases in "
          f"{root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
