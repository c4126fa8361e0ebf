#!/usr/bin/python3
"""torch_mha.py - the PyTorch side of the core benchmark: bench_attention's workloads run with
torch.nn.MultiheadAttention, timed and measured the same way, for bench/run_bench.py.

Legend: N = batch, L = query length, S = key length (S = L: self-attention), E = embedding width,
H = heads.

Usage: /usr/bin/python3 bench/torch_mha.py [--time SECONDS] [--only NAME] [--threads T]

Prints one JSON object per line on stdout, each with a "type": "torch" (version, threads and the
OpenBLAS core torch's BLAS runs), one "workload" per workload, then "done". run_bench.py sets
OPENBLAS_CORETYPE to the core bench_attention reported, so both sides run the same BLAS kernels.

The inputs and parameters are bit for bit those of bench_attention.c (the same splitmix64
counter generator), so the output checksums can be compared. Method, as in bench_attention.c:
float32, eval mode, torch.no_grad(), two warm-up runs (the second sizes the timed runs), at least
5 timed runs, median and min; peak RSS growth = VmHWM after the runs minus VmRSS before, with the
high-water mark reset through /proc/self/clear_refs. Inputs, parameters and masks are built
before that baseline, so the growth counts what the forward itself needs.
"""

import argparse
import ctypes
import ctypes.util
import gc
import json
import math
import os
import sys
import time

import numpy as np
import torch

BENCH_SEED = 0x5EED2024
GOLDEN = 0x9E3779B97F4A7C15
MASK64 = (1 << 64) - 1
MIN_REPS = 5
MAX_REPS = 10000

# Generator tags, as in bench_attention.c.
TAG_X, TAG_IN_W, TAG_IN_B, TAG_OUT_W, TAG_OUT_B = 1, 2, 3, 4, 5
TAG_CHK_OUT, TAG_CHK_W = 9, 10

# name, label, N, L, E, H, causal, key_lengths, per-head weights
WORKLOADS = [
    ("W1", "classroom", 1, 16, 64, 4, False, None, True),
    ("W2", "small batch", 8, 128, 256, 8, True, None, False),
    ("W3", "BERT-base", 4, 512, 768, 12, False, [512, 448, 384, 320], False),
    ("W4", "long", 1, 4096, 512, 8, True, None, False),
    ("W4-nocausal", "long, no mask", 1, 4096, 512, 8, False, None, False),
    ("W5", "weights", 1, 512, 768, 12, False, None, True),
]


def mix64_int(z):
    """splitmix64's finaliser on a Python int."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def mix64_np(z):
    """splitmix64's finaliser on a uint64 array (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def gen_uniform(tag, count, amp):
    """The stream of tag: count float32 uniform on [-amp, amp), as gen_uniform in C."""
    key = mix64_int((BENCH_SEED ^ ((tag * GOLDEN) & MASK64)) & MASK64)
    step = np.float32(amp / 8388608.0)
    out = np.empty(count, dtype=np.float32)
    chunk = 1 << 20
    for start in range(0, count, chunk):
        i = np.arange(start, min(count, start + chunk), dtype=np.uint64)
        z = mix64_np(np.uint64(key) + i * np.uint64(GOLDEN))
        r = (z >> np.uint64(40)).astype(np.int64) - 8388608
        out[start : start + len(i)] = r.astype(np.float32) * step
    return out


def tensor(tag, shape, amp):
    """A float32 tensor of the given shape holding the stream of tag, uniform on [-amp, amp)."""
    return torch.from_numpy(gen_uniform(tag, math.prod(shape), amp)).view(*shape)


def checksum(t, tag):
    """dot = sum t[i] c[i] with c the coefficients of tag, dotabs = sum |t[i] c[i]|, abs."""
    v = t.detach().contiguous().view(-1).double().numpy()
    c = gen_uniform(tag, v.size, 1.0).astype(np.float64)
    p = v * c
    return {
        "dot": float(p.sum()),
        "dotabs": float(np.abs(p).sum()),
        "abs": float(np.abs(v).sum()),
        "finite": bool(np.isfinite(v).all()),
    }


def status_bytes(field):
    """The field ("VmRSS:", "VmHWM:") of /proc/self/status in bytes, or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def hwm_reset():
    """Resets VmHWM to the current RSS; False when the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def openblas_info():
    """The OpenBLAS core and thread count torch's BLAS runs, from the loaded libopenblas."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode(), int(lib.openblas_get_num_threads())
    except (OSError, AttributeError):
        return None, None


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def release_free_memory():
    """Collects garbage and returns free heap pages to the kernel, so RSS starts clean."""
    gc.collect()
    try:
        _libc.malloc_trim(0)
    except AttributeError:
        pass


def build(spec):
    """The workload's module, input and masks, bit for bit bench_attention's (bench/ort reuses
    them): (mha in eval mode, x (N, L, E), attn_mask (L, S) bool or None, key_padding_mask (N, S)
    bool or None)."""
    name, label, n, l, e, h, causal, key_lengths, per_head = spec
    wamp = math.sqrt(3.0 / e)
    mha = torch.nn.MultiheadAttention(e, h, bias=True, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(tensor(TAG_IN_W, (3 * e, e), wamp))  # (3E, E)
        mha.in_proj_bias.copy_(tensor(TAG_IN_B, (3 * e,), 0.1))  # (3E)
        mha.out_proj.weight.copy_(tensor(TAG_OUT_W, (e, e), wamp))  # (E, E)
        mha.out_proj.bias.copy_(tensor(TAG_OUT_B, (e,), 0.1))  # (E)
    x = tensor(TAG_X, (n, l, e), 2.0)  # x is (N, L, E): query = key = value
    attn_mask = torch.triu(torch.ones(l, l, dtype=torch.bool), 1) if causal else None  # (L, S)
    kpm = None  # key_padding_mask is (N, S): True = padding
    if key_lengths is not None:
        kpm = torch.arange(l).unsqueeze(0) >= torch.tensor(key_lengths).unsqueeze(1)
    return mha, x, attn_mask, kpm


def run_workload(spec, target):
    name, label, n, l, e, h, causal, key_lengths, per_head = spec
    mha, x, attn_mask, kpm = build(spec)

    def forward():
        return mha(
            x,
            x,
            x,
            key_padding_mask=kpm,
            need_weights=per_head,
            attn_mask=attn_mask,
            average_attn_weights=False,
        )

    release_free_memory()
    hwm_ok = hwm_reset()
    rss0 = status_bytes("VmRSS:")
    res = None
    with torch.no_grad():
        t1 = 0.0
        for _ in range(2):
            res = None
            t0 = time.perf_counter()
            res = forward()
            t1 = time.perf_counter() - t0
        reps = int(min(MAX_REPS, max(MIN_REPS, math.ceil(target / max(t1, 1e-9)))))
        times = []
        for _ in range(reps):
            res = None  # free the previous result first, as the C side reuses its buffers
            t0 = time.perf_counter()
            res = forward()
            times.append(time.perf_counter() - t0)
    hwm = status_bytes("VmHWM:")
    out, weights = res
    co = checksum(out, TAG_CHK_OUT)
    rec = {
        "type": "workload",
        "name": name,
        "label": label,
        "n": n,
        "l": l,
        "s": l,
        "e": e,
        "h": h,
        "causal": "top_left" if causal else "none",
        "key_lengths": key_lengths,
        "weights": "per_head" if per_head else "none",
        "reps": reps,
        "median_ms": float(np.median(times)) * 1e3,
        "min_ms": min(times) * 1e3,
        "rss_before": rss0,
        "rss_peak_growth": (hwm - rss0 if hwm_ok and hwm is not None and rss0 is not None
                            else None),
        "finite": co["finite"],
        "out_dot": co["dot"],
        "out_dotabs": co["dotabs"],
        "out_abs": co["abs"],
    }
    if per_head:
        # weights is (N, H, L, S), the layout of attnd's per-head weights.
        cw = checksum(weights, TAG_CHK_W)
        rec["finite"] = rec["finite"] and cw["finite"]
        rec["w_dot"], rec["w_dotabs"] = cw["dot"], cw["dotabs"]
        rec["w_rowsum_err"] = float((weights.double().sum(-1) - 1).abs().max())
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--time", type=float, default=1.5, help="seconds of timed runs per workload")
    ap.add_argument("--only", help="run only this workload")
    ap.add_argument("--threads", type=int, default=os.sysconf("SC_NPROCESSORS_ONLN"),
                    help="torch threads (default: the online cores, as attnd)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    core, blas_threads = openblas_info()
    print(json.dumps({
        "type": "torch",
        "version": torch.__version__,
        "threads": torch.get_num_threads(),
        "openblas_core": core,
        "openblas_threads": blas_threads,
        "env_coretype": os.environ.get("OPENBLAS_CORETYPE"),
        "target_s": args.time,
    }), flush=True)

    ran = 0
    for spec in WORKLOADS:
        if args.only and spec[0] != args.only:
            continue
        print(f"torch_mha: {spec[0]} ({spec[1]})", file=sys.stderr, flush=True)
        print(json.dumps(run_workload(spec, args.time)), flush=True)
        ran += 1
    if args.only and ran == 0:
        print(f"torch_mha: no workload is called {args.only}", file=sys.stderr)
        return 1
    print(json.dumps({"type": "done", "workloads": ran}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
