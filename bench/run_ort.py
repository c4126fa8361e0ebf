#!/usr/bin/python3
"""run_ort.py - attnd's core beside ONNX Runtime (npm onnxruntime-node, CPU) on the core
benchmark's workloads, in interleaved rounds of fresh processes; writes a markdown report.

Usage: /usr/bin/python3 bench/run_ort.py --bin build/bench/bench_attention --out REPORT.md
           [--append OTHER.md] [--work DIR] [--rounds N] [--time SECONDS] [--only W[,W...]]
           [--env-coretype CORE] [--ort-default-malloc]

Steps:
  1. bench/ort/graphs.py makes, from the bench's own inputs (bench/torch_mha.py's generator), three
     ONNX graphs per workload: torch.onnx.export of nn.MultiheadAttention ("plain") and the fused
     contrib ops com.microsoft.Attention and com.microsoft.MultiHeadAttention; and torch's outputs.
  2. Each graph runs once in ORT (bench/ort/run.mjs --dump) and its outputs are checked against
     torch's: max |ORT - torch| <= MAX_ABS and the checksum difference (run_bench.py's, on the
     same coefficients) < CHECK_TOL. A graph that fails is reported and not timed.
  3. --rounds rounds; in each, for each workload, fresh processes one after the other:
     bench_attention --only W on the environment's OpenBLAS kernel (OPENBLAS_CORETYPE as set, or
     --env-coretype; skipped when none is set, since attnd then runs the best kernel anyway),
     bench_attention --only W on the best kernel for the CPU (OPENBLAS_CORETYPE unset: attnd
     re-executes itself with it), then each checked ORT graph. Medians over the rounds of each
     process's median.
ORT runs with GLIBC_TUNABLES=ORT_TUNABLES: freed memory stays in the process (no trim, no mmap
below 32 MiB, 64 MiB of padding on each heap growth), as attnd's bench reuses its buffers; node
allocates fresh output buffers on every run, and a page faulted in afresh costs about 17 us on
these VMs (without it W5's plain graph flips between about 50 and 14 ms). --ort-default-malloc
adds a run of the fastest fused graph (W1, W5: of those that write weights) without it, to show
the difference.

Exits non-zero when a program fails or a graph's output disagrees with torch's.
"""

import argparse
import datetime
import os
import resource
import shutil
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ORT_DIR = os.path.join(HERE, "ort")
sys.path.insert(0, HERE)
import torch_mha  # noqa: E402
from run_bench import CHECK_TOL, cpu_model, fmt, median, one, rel_check, run_lines  # noqa: E402

PY = "/usr/bin/python3"
MIB = 1024.0 * 1024.0
MAX_ABS = 1e-4  # max |ORT - torch| over every output element (outputs are O(1))
ORT_TUNABLES = ("glibc.malloc.trim_threshold=4294967296:glibc.malloc.mmap_threshold=33554432:"
                "glibc.malloc.top_pad=67108864")
GRAPH_TITLES = {"plain": "plain export", "attention": "com.microsoft.Attention",
                "mha": "com.microsoft.MultiHeadAttention",
                "mha_w": "com.microsoft.MultiHeadAttention + Softmax of its qk output"}
SHORT = {"plain": "plain", "attention": "Attention", "mha": "MultiHeadAttention",
         "mha_w": "MultiHeadAttention + Softmax"}
FUSED = ("attention", "mha")  # the fused graphs without weights


def ort_installed():
    return os.path.isdir(os.path.join(ORT_DIR, "node_modules", "onnxruntime-node"))


def node_cmd(g, extra):
    return ["node", "--expose-gc", os.path.join(ORT_DIR, "run.mjs"), "--model", g["path"],
            "--input", g["x"], "--shape", ",".join(str(d) for d in g["shape"])] + extra


def load_f32(path):
    return np.fromfile(path, dtype=np.float32)


def check_graph(g, work):
    """Runs the graph once and compares its outputs with torch's; returns the check record."""
    prefix = os.path.join(work, f"{g['name']}.{g['graph']}.ort")
    rc, recs, other = run_lines(node_cmd(g, ["--dump", prefix]))
    rec = {"ok": False, "max_abs_out": None, "rel_out": None, "max_abs_w": None, "rel_w": None,
           "error": None}
    if rc != 0 or not one(recs, "dump"):
        rec["error"] = f"run.mjs --dump exited {rc}" + (f": {other[-1]}" if other else "")
        return rec
    base = os.path.join(work, g["name"])
    pairs = [("out", "out", torch_mha.TAG_CHK_OUT, base + ".ref.out.bin")]
    if "weights" in g["outputs"]:
        pairs.append(("w", "weights", torch_mha.TAG_CHK_W, base + ".ref.w.bin"))
    ok = True
    for key, output, tag, ref_path in pairs:
        got, ref = load_f32(f"{prefix}.{output}.bin"), load_f32(ref_path)
        if got.size != ref.size:
            rec["error"] = f"{output}: {got.size} values, torch has {ref.size}"
            return rec
        finite = bool(np.isfinite(got).all())
        mad = float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max())
        a = torch_mha.checksum(torch.from_numpy(got), tag)
        t = torch_mha.checksum(torch.from_numpy(ref), tag)
        rel = rel_check({key + "_dot": a["dot"], key + "_dotabs": a["dotabs"]},
                        {key + "_dot": t["dot"]}, key)
        rec[f"max_abs_{key}"], rec[f"rel_{key}"] = mad, rel
        ok = ok and finite and mad <= MAX_ABS and rel < CHECK_TOL
        if not finite:
            rec["error"] = f"{output} holds a NaN or an infinity"
    rec["ok"] = ok
    return rec


def attnd_env(coretype):
    """The environment for bench_attention: coretype None = the best kernel (attnd chooses)."""
    env = dict(os.environ)
    for k in ("ATTND_BLAS_REEXEC", "ATTND_BLAS_CORETYPE", "OPENBLAS_CORETYPE"):
        env.pop(k, None)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    return env


def cpu_stat():
    """(busy, steal) seconds of the whole machine since boot, from /proc/stat's cpu line."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    steal = v[7] if len(v) > 7 else 0
    return (sum(v[:8]) - idle - steal) / hz, steal / hz


def own_cpu():
    """CPU seconds of this script and of its finished children."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def others_load(t0, t1):
    """Cores that other processes kept busy on average between snapshots t0 and t1, each
    (wall, busy, steal, own), and the steal, in cores."""
    wall = t1[0] - t0[0]
    if wall <= 0:
        return None, None
    return (max(0.0, (t1[1] - t0[1]) - (t1[3] - t0[3])) / wall, (t1[2] - t0[2]) / wall)


def snapshot():
    busy, steal = cpu_stat()
    return (time.monotonic(), busy, steal, own_cpu())


def paired(res_n, peer, key):
    """Per-round ratios ORT graph peer / attnd on kernel key, from the same round only."""
    out = []
    for rd in res_n["by_round"]:
        a, o = rd["attnd"].get(key), rd["ort"].get(peer)
        if a and o:
            out.append(o / a)
    return out


def section(args, ctx):
    """The report's markdown lines."""
    graphs, checks, res, kernels = ctx["graphs"], ctx["checks"], ctx["res"], ctx["kernels"]
    names = ctx["names"]
    L = ["# attnd beside ONNX Runtime (issue 27)", ""]
    L.append(f"Run {ctx['started']} by `bench/run_ort.py`: {args.rounds} interleaved round(s) of "
             f"fresh processes, {args.time:g} s of timed runs per process; load average (1 min) "
             f"at start / end {ctx['load'][0]:.2f} / {ctx['load'][1]:.2f}.")
    L.append("")
    others, steal = ctx["others"]
    if others is not None:
        L.append(f"- other processes kept {others:.2f} cores busy on average during the run "
                 f"(/proc/stat's busy time less this run's own processes), steal {steal:.2f}")
    if others is None or others > 0.2:
        L.append("- **shared machine**: other work ran beside the benchmark (above); the times "
                 "below are not a quiet measurement")
    L.append(f"- CPU: {cpu_model()}; {os.cpu_count()} cores online")
    L.append(f"- ONNX Runtime {ctx['ort_version'] or '?'} (npm onnxruntime-node, CPU execution "
             f"provider, its MLAS kernels), {ctx['ort_threads'] or '?'} intra-op threads, "
             "graph optimisation level all, sequential execution; run with "
             f"`GLIBC_TUNABLES={ORT_TUNABLES}`")
    for k in kernels:
        L.append(f"- attnd, {k['label']}: OpenBLAS core **{k.get('active') or '?'}** "
                 f"({k.get('how') or 'not run'})")
    if not ctx["env_core"]:
        L.append("- the environment sets no OPENBLAS_CORETYPE, so attnd runs the best kernel for "
                 "the CPU either way (its column is that of the best kernel; `--env-coretype "
                 "Haswell` measures a pinned environment)")
    L.append("")
    L.append("Method. Each round runs, for each workload, fresh processes one after the other: "
             "bench_attention --only W on each kernel, then ORT on each graph "
             "(bench/ort/run.mjs). Both sides: two warm-up runs, the second sizes the timed runs "
             "(at least 5), median per process; the table gives the median over the rounds. "
             "attnd uses its pool (cores - 1 helpers and the caller); ORT its intra-op pool of "
             "as many threads as cores. Inputs and parameters are bench_attention's, bit for bit "
             "(bench/torch_mha.py's splitmix64 streams); the masks are constants of each graph. "
             "ORT's malloc keeps freed memory (GLIBC_TUNABLES above: trim threshold 4 GiB, "
             "mmap threshold 32 MiB, top pad 64 MiB), since node allocates fresh output buffers on "
             "every run and attnd's bench reuses its own. Peak RSS growth: VmHWM after the timed "
             "runs minus VmRSS before the first run (session and input made before), on both "
             "sides. Ratio = ORT / attnd: above 1, attnd is faster.")
    L.append("")

    # The correctness checks.
    L.append("## Outputs checked against torch (before timing)")
    L.append("")
    L.append(f"Each graph ran once on the workload's input; its outputs against torch's "
             f"(nn.MultiheadAttention, eval): max |ORT - torch| must be <= {MAX_ABS:g} and the "
             f"checksum difference (run_bench.py's, |sum r_i (a_i - t_i)| / sum |r_i a_i|) < "
             f"{CHECK_TOL:g}. Only graphs that pass are timed.")
    L.append("")
    L.append("| workload | graph | masks, as the graph expresses them | weights | max abs diff, "
             "output | checksum, output | max abs diff, weights | checksum, weights | check |")
    L.append("|---|---|---|---|--:|--:|--:|--:|---|")
    for n in names:
        for g in graphs.get(n, []):
            c = checks.get((n, g["graph"]), {})
            L.append(f"| {n} | {GRAPH_TITLES[g['graph']]} | {'; '.join(g['masks']) or '-'} | "
                     f"{'written' if g['writes_weights'] else ('none (less work)' if g['note'] else '-')} | "
                     f"{fmt(c.get('max_abs_out'), '.1e')} | {fmt(c.get('rel_out'), '.1e')} | "
                     f"{fmt(c.get('max_abs_w'), '.1e')} | {fmt(c.get('rel_w'), '.1e')} | "
                     f"{'pass' if c.get('ok') else 'FAIL: ' + str(c.get('error') or 'tolerance')} |")
    L.append("")
    L.append("Masks: every graph expresses the masks of these workloads (causal: the plain "
             "graph's attn_mask, the fused ops' unidirectional=1; key lengths: the plain graph's "
             "key_padding_mask, Attention's mask_index (N), MultiHeadAttention's "
             "key_padding_mask (N)). What the fused ops cannot give is the per-head weights (W1, "
             "W5): neither outputs the softmax, so their graphs write none and do less work. "
             "MultiHeadAttention's optional output qk is the scaled scores before the softmax; "
             "the MultiHeadAttention + Softmax graph turns it into the weights. The fused ops add "
             "mask_filter_value (-10000) to masked scores where torch and attnd use -inf: the same "
             "zeros in float32 here.")
    L.append("")

    # The timings.
    env_k = [k for k in kernels if k["key"] == "env"]
    L.append("## Times (ms, medians over the rounds)")
    L.append("")
    L.append("ORT fused (best): the faster of the Attention and MultiHeadAttention graphs, which "
             "write no weights. ORT, same work: the fastest graph that writes what attnd writes "
             "(W1, W5: plain or MultiHeadAttention + Softmax of its qk output; else any graph).")
    L.append("")
    head = "| workload | shape (N, L=S, E, H); masks |"
    sep = "|---|---|"
    for k in kernels:
        head += f" attnd, {k['label']} ({k.get('active') or '?'}) |"
        sep += "--:|"
    head += (" ORT plain | ORT Attention | ORT MultiHeadAttention | ORT MultiHeadAttention + "
             "Softmax (weights) | ORT fused (best) | ORT, same work |")
    sep += "--:|--:|--:|--:|--:|--:|"
    for k in kernels:
        head += f" ratio fused / attnd ({k.get('active') or '?'}) |"
        sep += "--:|"
    for k in kernels:
        head += f" ratio same work / attnd ({k.get('active') or '?'}) |"
        sep += "--:|"
    head += " less work | attnd peak RSS growth MiB | ORT peak RSS growth MiB (fused / same work) |"
    sep += "---|--:|--:|"
    if args.ort_default_malloc:
        head += " ORT without the tunables ms |"
        sep += "--:|"
    L += [head, sep]
    for n in names:
        r = res[n]
        _, _, N, Lq, E, H, causal, key_lengths, per_head = r["spec"]
        masks = (["causal"] if causal else []) + (
            ["key lengths " + "/".join(map(str, key_lengths))] if key_lengths else []) + (
            ["per-head weights"] if per_head else [])
        row = f"| {n} | {N}, {Lq}, {E}, {H}" + ("; " + ", ".join(masks) if masks else "") + " |"
        for k in kernels:
            row += f" {fmt(r['attnd'].get(k['key']), '.4g')} |"
        best, same, ort = r["best_fused"], r["same_work"], r["ort"]
        for g in ("plain", "attention", "mha", "mha_w"):
            row += f" {fmt(ort.get(g), '.4g')} |"
        row += f" {fmt(best and ort[best], '.4g')}{' (' + SHORT[best] + ')' if best else ''} |"
        row += f" {fmt(same and ort[same], '.4g')}{' (' + SHORT[same] + ')' if same else ''} |"
        for peer, paren in ((best, per_head), (same, False)):
            for k in kernels:
                a = r["attnd"].get(k["key"])
                v = ort[peer] / a if peer and a else None
                row += f" {'(' if paren else '**'}{fmt(v, '.2f')}{')' if paren else '**'} |"
        row += (" ORT fused (writes no weights; attnd does) |" if per_head else " same work |")
        row += (f" {fmt(mib(r['attnd_rss'].get('best')), '.1f')} | "
                f"{fmt(mib(r['ort_rss'].get(best)), '.1f')} / "
                f"{fmt(mib(r['ort_rss'].get(same)), '.1f')} |")
        if args.ort_default_malloc:
            dm = r.get("default_malloc")
            row += f" {fmt(dm and dm['ms'], '.4g')}{' (' + SHORT[dm['graph']] + ')' if dm else ''} |"
        L.append(row)
    L.append("")
    L.append("Ratios = ORT / attnd, above 1 attnd is faster; in parentheses (W1, W5) ORT's fused "
             "graph writes no weights while attnd writes them.")
    L.append("")
    L.append("Per round (ms): attnd on the best kernel / ORT's graph that does the same work.")
    L.append("")
    L.append("| workload | rounds |")
    L.append("|---|---|")
    for n in names:
        r = res[n]
        same = r["same_work"]
        a = r["rounds_attnd"].get("best", [])
        o = r["rounds_ort"].get(same, []) if same else []
        L.append(f"| {n} | " + ", ".join(f"{fmt(x, '.4g')} / {fmt(y, '.4g')}"
                                         for x, y in zip(a, o)) + " |")
    L.append("")
    L.append("Paired ratios: ORT / attnd within each round (both ran minutes apart at most, so a "
             "slow spell of the host weighs on both), median over the rounds [lowest, highest]. "
             "The ratios of the medians above and these should agree; where they do not, the "
             "host's noise was larger than the difference.")
    L.append("")
    head, sep = "| workload |", "|---|"
    for peer_label in ("fused", "same work"):
        for k in kernels:
            head += f" {peer_label} / attnd ({k.get('active') or '?'}) |"
            sep += "--:|"
    L += [head, sep]
    for n in names:
        r = res[n]
        row = f"| {n} |"
        for peer in (r["best_fused"], r["same_work"]):
            for k in kernels:
                v = paired(r, peer, k["key"]) if peer else []
                row += (f" {median(v):.2f} [{min(v):.2f}, {max(v):.2f}] |" if v else " - |")
        L.append(row)
    L.append("")

    # Goals of issue 27, reported.
    L.append("## Goals of issue 27 (reported, not asserted)")
    L.append("")
    for n in names:
        r = res[n]
        peer = r["same_work"]
        a = r["attnd"].get("best")
        v = r["ort"][peer] / a if peer and a else None
        L.append(goal(v, 1.0, f"{n}: ORT, same work ({SHORT.get(peer, '-')}) / attnd (best "
                      "kernel) >= 1.0, ratio of the medians"))
        pv = paired(r, peer, "best") if peer else []
        L.append(goal(median(pv) if pv else None, 1.0, f"{n}: the same, median of the paired "
                      "ratios"))
    if env_k and "W4-nocausal" in res:
        r = res["W4-nocausal"]
        a = r["attnd"].get("env")
        b = r["best_fused"]
        v = r["ort"][b] / a if b and a else None
        L.append(goal(v, 1.0, f"W4-nocausal: ORT's best fused / attnd ({env_k[0].get('active')}, "
                      "the environment's kernel) >= 1.0, ratio of the medians"))
        pv = paired(r, b, "env") if b else []
        L.append(goal(median(pv) if pv else None, 1.0, "W4-nocausal: the same, median of the "
                      "paired ratios"))
    w4 = res.get("W4", {}).get("attnd_rss", {}).get("best")
    if w4 is not None:
        L.append(goal(64 - mib(w4), 0, f"W4 attnd peak RSS growth {mib(w4):.1f} MiB <= 64 MiB",
                      show=False))
    L.append("")
    if ctx["problems"]:
        L.append("## Problems")
        L.append("")
        L += [f"- {p}" for p in ctx["problems"]]
        L.append("")
    return L


def mib(b):
    return None if b is None else b / MIB


def goal(v, target, label, show=True):
    if v is None:
        return f"- SKIP  {label}: not measured"
    word = "PASS" if v >= target else "MISS"
    return f"- {word}  {label}" + (f": {v:.2f}" if show else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="the bench_attention program")
    ap.add_argument("--out", required=True, help="where to write the markdown report")
    ap.add_argument("--append", help="also append the report to this file (make bench: the core "
                    "benchmark's report)")
    ap.add_argument("--work", default="build/bench/ort", help="graphs, inputs and outputs")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    ap.add_argument("--time", type=float, default=1.0, help="seconds of timed runs per process")
    ap.add_argument("--only", help="these workloads only (comma-separated)")
    ap.add_argument("--env-coretype", default=os.environ.get("OPENBLAS_CORETYPE") or None,
                    help="the environment's OpenBLAS kernel for attnd (default: "
                    "OPENBLAS_CORETYPE, if set)")
    ap.add_argument("--ort-default-malloc", action="store_true",
                    help="also time ORT without GLIBC_TUNABLES (the allocator's two modes)")
    args = ap.parse_args()

    if not shutil.which("node"):
        print("run_ort.py: node is missing (make deps-test installs it)", file=sys.stderr)
        return 1
    if not ort_installed():
        print(f"run_ort.py: {ORT_DIR}/node_modules/onnxruntime-node is missing (make "
              "bench-ort-deps: npm ci --ignore-scripts in bench/ort)", file=sys.stderr)
        return 1
    only = set(args.only.split(",")) if args.only else None
    specs = [s for s in torch_mha.WORKLOADS if not only or s[0] in only]
    if only and len(specs) != len(only):
        print(f"run_ort.py: unknown workload in {args.only}", file=sys.stderr)
        return 1
    names = [s[0] for s in specs]
    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    load0 = os.getloadavg()
    problems = []
    os.makedirs(args.work, exist_ok=True)

    # 1. The graphs and torch's outputs.
    graphs = {}
    for n in names:
        rc, recs, _ = run_lines([PY, os.path.join(ORT_DIR, "graphs.py"), "--dir", args.work,
                                 "--only", n])
        if rc != 0 or not one(recs, "done"):
            problems.append(f"graphs.py --only {n} exited {rc}")
        for g in recs:
            if g.get("type") == "graph":
                g["x"] = os.path.join(args.work, n + ".x.bin")
                graphs.setdefault(n, []).append(g)

    # 2. The check against torch, before any timing.
    checks = {}
    for n in names:
        for g in graphs.get(n, []):
            c = check_graph(g, args.work)
            checks[(n, g["graph"])] = c
            if not c["ok"]:
                problems.append(f"{n}, {GRAPH_TITLES[g['graph']]}: the check against torch "
                                f"failed ({c['error'] or 'tolerance'}: max abs "
                                f"{fmt(c['max_abs_out'], '.2e')}, checksum "
                                f"{fmt(c['rel_out'], '.2e')}); not timed")

    # 3. Interleaved rounds of fresh processes.
    kernels = []
    if args.env_coretype:
        kernels.append({"key": "env", "label": "the environment's kernel",
                        "env": attnd_env(args.env_coretype)})
    kernels.append({"key": "best", "label": "the best kernel for the CPU", "env": attnd_env(None)})
    ort_env = dict(os.environ)
    ort_env["GLIBC_TUNABLES"] = ORT_TUNABLES
    plain_env = dict(os.environ)
    plain_env.pop("GLIBC_TUNABLES", None)
    runs = {n: {"attnd": {}, "attnd_rss": {}, "attnd_rec": {}, "ort": {}, "ort_rss": {},
                "default_malloc": [], "by_round": []} for n in names}
    snap0 = snapshot()
    ort_version, ort_threads = None, None
    for rnd in range(args.rounds):
        for n in names:
            R = runs[n]
            rd = {"attnd": {}, "ort": {}}
            R["by_round"].append(rd)
            for k in kernels:
                rc, recs, _ = run_lines([args.bin, "--only", n, "--time", str(args.time)],
                                        k["env"])
                w = one(recs, "workload", name=n)
                blas = one(recs, "blas") or {}
                k.setdefault("active", blas.get("active"))
                k.setdefault("how", blas.get("how"))
                if rc != 0 or not w:
                    problems.append(f"round {rnd + 1}: bench_attention --only {n} ({k['label']}) "
                                    f"exited {rc}")
                    continue
                R["attnd"].setdefault(k["key"], []).append(w["median_ms"])
                rd["attnd"][k["key"]] = w["median_ms"]
                R["attnd_rss"].setdefault(k["key"], []).append(w["rss_peak_growth"])
                R["attnd_rec"][k["key"]] = w
            timed = [g for g in graphs.get(n, []) if checks[(n, g["graph"])]["ok"]]
            for g in timed:
                rc, recs, other = run_lines(node_cmd(g, ["--time", str(args.time)]), ort_env)
                o = one(recs, "ort")
                if rc != 0 or not o:
                    problems.append(f"round {rnd + 1}: ORT {n} {g['graph']} exited {rc}")
                    continue
                ort_version, ort_threads = o["version"], o["threads"]
                R["ort"].setdefault(g["graph"], []).append(o["median_ms"])
                rd["ort"][g["graph"]] = o["median_ms"]
                R["ort_rss"].setdefault(g["graph"], []).append(o["rss_peak_growth"])
            if args.ort_default_malloc and timed:
                # The fastest so far of the fused graphs, or of those that write weights where
                # the workload asks for them.
                want = ("plain", "mha_w") if specs[names.index(n)][8] else FUSED
                cands = [g for g in timed if g["graph"] in want]
                if cands:
                    g = min(cands, key=lambda g: median(R["ort"].get(g["graph"], [])) or 1e30)
                    rc, recs, _ = run_lines(node_cmd(g, ["--time", str(args.time)]), plain_env)
                    o = one(recs, "ort")
                    if o:
                        R["default_malloc"].append((g["graph"], o["median_ms"]))

    others = others_load(snap0, snapshot())
    res = {}
    for spec in specs:
        n = spec[0]
        R = runs[n]
        ort = {k: median(v) for k, v in R["ort"].items()}
        fused = [k for k in FUSED if ort.get(k) is not None]
        best = min(fused, key=lambda k: ort[k]) if fused else None
        alike = [k for k in ort if ort[k] is not None and (not spec[8] or k in ("plain", "mha_w"))]
        same = min(alike, key=lambda k: ort[k]) if alike else None
        dm = None
        if R["default_malloc"]:
            dm = {"graph": R["default_malloc"][-1][0],
                  "ms": median([ms for _, ms in R["default_malloc"]])}
        res[n] = {"spec": spec, "attnd": {k: median(v) for k, v in R["attnd"].items()},
                  "attnd_rss": {k: median(v) for k, v in R["attnd_rss"].items()},
                  "ort": ort, "ort_rss": {k: median(v) for k, v in R["ort_rss"].items()},
                  "best_fused": best, "same_work": same, "rounds_attnd": R["attnd"], "rounds_ort": R["ort"],
                  "by_round": R["by_round"], "default_malloc": dm}
        # attnd's own result against torch's, on the same checksum.
        w = R["attnd_rec"].get("best")
        if w:
            ref = load_f32(os.path.join(args.work, n + ".ref.out.bin"))
            t = torch_mha.checksum(torch.from_numpy(ref), torch_mha.TAG_CHK_OUT)
            c = rel_check(w, {"out_dot": t["dot"]}, "out")
            if c is None or not c < CHECK_TOL:
                problems.append(f"{n}: attnd's output checksum differs from torch's by "
                                f"{fmt(c, '.2e')}")

    ctx = {"graphs": graphs, "checks": checks, "res": res, "kernels": kernels, "names": names,
           "started": started, "load": (load0[0], os.getloadavg()[0]), "problems": problems,
           "ort_version": ort_version, "ort_threads": ort_threads,
           "env_core": args.env_coretype, "others": others}
    report = "\n".join(section(args, ctx)) + "\n"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(report)
    if args.append:
        with open(args.append, "a") as f:
            f.write("\n" + report)
    print(report)
    print(f"(written to {args.out}" + (f", appended to {args.append})" if args.append else ")"),
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
