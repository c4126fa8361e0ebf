#!/usr/bin/python3
"""run_ort_w6.py - W6 (issue 37, section 6) beside ONNX Runtime: attnd's decode session
(bench_attention --w6) and ORT's decoding ops (npm onnxruntime-node, CPU) on the same 4,096
one-row appends at E = 512, H = 8, in interleaved rounds of fresh processes; writes a markdown
report.

Usage: /usr/bin/python3 bench/run_ort_w6.py --bin build/bench/bench_attention --out REPORT.md
           [--append OTHER.md] [--work DIR] [--rounds N] [--graphs mha,gqa] [--no-profile]
           [--env-coretype CORE]

Steps:
  1. bench/ort/w6_graphs.py writes W6's input (W4's, bench_attention's generator), torch's whole
     causal nn.MultiheadAttention on it (row t - 1 is step t's output) and two ONNX graphs that
     compute attnd's step (in_proj with bias, the attention over the cache, out_proj with bias):
     com.microsoft.MultiHeadAttention with past_key/past_value in and present_key/present_value
     out ("mha", the op issue 37 names), and com.microsoft.GroupQueryAttention with kv_num_heads
     = num_heads on a shared past/present buffer ("gqa", ORT's CPU decoding path that does not
     copy the past).
  2. The check, before any timing: one session of each side (bench_attention --w6 --w6-stride 0
     --w6-dump; bench/ort/w6.mjs --dump) writes its 4,096 outputs, each compared with torch's
     rows and with each other: max |a - torch| <= MAX_ABS over every step. A side that fails is
     reported and not timed.
  3. --rounds rounds, each of fresh processes one after the other, per graph an attnd process
     next to the ORT one (attnd first in even rounds, the whole order reversed in odd ones):
     bench_attention --w6 --w6-repeats 1 --w6-stride 0 (a warm-up session, then the timed one)
     on the environment's OpenBLAS kernel (OPENBLAS_CORETYPE as set, or --env-coretype), and
     w6.mjs (a warm-up session, then the timed one; with the profile, the same again in a
     second InferenceSession with ORT's profiler on) with --threads = attnd's pool slots.
"Per step at t" is, as in bench/w6.c, the median of the steps t - 15 .. t of a session; the
tables give the median over the rounds of each round's figure, and the range (lowest, highest)
over the rounds (attnd's: over every attnd process). Paired ratios: ORT / the attnd process
next to it, within a round. ORT runs with run_ort.py's GLIBC_TUNABLES (its freed memory stays
in the process).

Exits non-zero when a program fails or an output disagrees with torch's.
"""

import argparse
import datetime
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ORT_DIR = os.path.join(HERE, "ort")
sys.path.insert(0, HERE)
from run_bench import cpu_model, fmt, median, one, run_lines  # noqa: E402
from run_ort import ORT_TUNABLES, attnd_env, ort_installed, others_load, snapshot  # noqa: E402

PY = "/usr/bin/python3"
T, E, H = 4096, 512, 8
WINDOW = 16  # bench/w6.c's W6_WINDOW
POINTS = (512, 2048, 4096)
EVERY = (256, 512, 1024, 1536, 2048, 2560, 3072, 3584, 4096)
MAX_ABS = 1e-4  # max |out - torch| over every step's outputs (outputs are O(1)), as run_ort.py
CHECK_STEPS = (1, 2, 3, 64, 512, 2048, 4096)  # the steps whose errors the report lists
GRAPHS = {"mha": "com.microsoft.MultiHeadAttention, past and present",
          "gqa": "com.microsoft.GroupQueryAttention, shared buffer"}


def window_ms(steps, t):
    """The per-step time at t: the median of steps t - WINDOW + 1 .. t (1-based)."""
    return median(steps[t - WINDOW:t])


def attnd_cmd(args, extra):
    return [args.bin, "--w6", "--w6-repeats", "1", "--w6-stride", "0"] + extra


def ort_cmd(args, graph, threads, extra):
    return ["node", "--expose-gc", os.path.join(ORT_DIR, "w6.mjs"), "--model",
            os.path.join(args.work, f"W6.{graph}.onnx"), "--graph", graph, "--input",
            os.path.join(args.work, "W6.x.bin"), "--t", str(T), "--e", str(E), "--h", str(H),
            "--threads", str(threads)] + extra


def compare(path, ref):
    """Errors of the (T, E) outputs in path against ref: the largest over every step, relative
    to ref's largest magnitude, and per step of CHECK_STEPS."""
    got = np.fromfile(path, dtype=np.float32)
    if got.size != ref.size:
        return {"error": f"{got.size} values, torch has {ref.size}"}
    d = np.abs(got.astype(np.float64) - ref.astype(np.float64)).reshape(T, E)
    return {"error": None if np.isfinite(got).all() else "a NaN or an infinity",
            "max_abs": float(d.max()), "rel": float(d.max() / np.abs(ref).max()),
            "steps": {t: float(d[t - 1].max()) for t in CHECK_STEPS}, "data": got}


def attnd_round(args, env):
    """One bench_attention process: its figures, or None and a message."""
    rc, recs, _ = run_lines(attnd_cmd(args, []), env)
    w = one(recs, "w6")
    if rc != 0 or not w:
        return None, f"bench_attention --w6 exited {rc}"
    pts = {p["t"]: p["step_ms"] for p in recs if p.get("type") == "w6_point"}
    return {"at": {t: pts.get(t) for t in EVERY}, "total_s": w["total_s"],
            "blas": one(recs, "blas") or {}, "machine": one(recs, "machine") or {}}, None


def ort_round(args, graph, threads, env):
    extra = [] if args.no_profile else ["--profile", os.path.join(args.work, "prof")]
    rc, recs, other = run_lines(ort_cmd(args, graph, threads, extra), env)
    o = one(recs, "w6_ort")
    if rc != 0 or not o:
        return None, f"w6.mjs --graph {graph} exited {rc}" + (f": {other[-1]}" if other else "")
    res = {"version": o["version"], "threads": o["threads"], "rss": o["rss_peak_growth"],
           "wall": {"at": {t: window_ms(o["steps_ms"], t) for t in EVERY},
                    "total_s": sum(o["steps_ms"]) / 1e3}}
    for key in ("run_ms", "op_ms"):
        if o.get(key):
            res[key[:-3]] = {"at": {t: window_ms(o[key], t) for t in EVERY},
                             "total_s": sum(o[key]) / 1e3}
    return res, None


def cell(v, spec):
    v = [x for x in v if x is not None]
    if not v:
        return "-"
    if len(v) == 1:
        return format(v[0], spec)
    return f"{format(median(v), spec)} ({format(min(v), spec)} to {format(max(v), spec)})"


def series(rounds, path):
    """The values at path over the rounds: ("attnd",) (every attnd process of every round) or
    (graph, "wall"|"run"|"op"); {t or "total_s": [values]}."""
    out = {}
    for rd in rounds:
        if path[0] == "attnd":
            srcs = list(rd.get("attnd", {}).values())
        else:
            srcs = [(rd.get("ort", {}).get(path[0]) or {}).get(path[1])]
        for src in srcs:
            if not src:
                continue
            for t in EVERY:
                out.setdefault(t, []).append(src["at"].get(t))
            out.setdefault("total_s", []).append(src["total_s"])
    return out


def paired(rounds, path, key):
    """ORT / attnd within each round at key (a t or "total_s"), against the attnd process run
    next to that graph's."""
    out = []
    for rd in rounds:
        a = rd.get("attnd", {}).get(path[0])
        o = (rd.get("ort", {}).get(path[0]) or {}).get(path[1])
        if not a or not o:
            continue
        av = a["total_s"] if key == "total_s" else a["at"].get(key)
        ov = o["total_s"] if key == "total_s" else o["at"].get(key)
        if av and ov:
            out.append(ov / av)
    return out


def report(args, ctx):
    rounds, checks, graphs = ctx["rounds"], ctx["checks"], ctx["graphs"]
    kern = ctx["kernel"]
    L = ["# W6 beside ONNX Runtime (issue 37, section 6)", ""]
    L.append(f"Run {ctx['started']} to {ctx['ended']} by `bench/run_ort_w6.py` ("
             f"{args.rounds} interleaved round(s) of fresh processes); load average (1 min) at "
             f"start / end {ctx['load'][0]:.2f} / {ctx['load'][1]:.2f}.")
    L.append("")
    others, steal = ctx["others"]
    if others is not None:
        L.append(f"- other processes kept {others:.2f} cores busy on average during the run "
                 f"(/proc/stat's busy time less this run's own processes), steal {steal:.2f}")
    if others is None or others > 0.2:
        L.append("- **shared machine**: other work ran beside the benchmark; read the ranges, "
                 "not only the medians")
    L.append(f"- CPU: {cpu_model()}; {os.cpu_count()} cores online")
    L.append(f"- attnd: `bench_attention --w6 --w6-repeats 1 --w6-stride 0` "
             f"(attention/decode.c's step), {ctx['slots'] or '?'} pool slots, OpenBLAS core "
             f"**{kern.get('active') or '?'}** ({kern.get('how') or '?'}); OpenBLAS runs its "
             "projections (sgemv)")
    L.append(f"- ONNX Runtime {ctx['ort_version'] or '?'} (npm onnxruntime-node, CPU execution "
             f"provider), {ctx['ort_threads'] or '?'} intra-op threads, graph optimisation level "
             "all, sequential execution, `GLIBC_TUNABLES` as run_ort.py; **ORT does not use "
             "OpenBLAS**: its MatMul and attention run on its own MLAS kernels, which pick their "
             "code path from the CPU (OPENBLAS_CORETYPE does not reach them)")
    L.append("")
    L.append("W6: 4,096 appends of one row at E = 512, H = 8 on W4's inputs and weights "
             "(in_proj and out_proj with biases). A step projects the new row, appends its key "
             "and value, attends it over the t keys so far and projects the heads' outputs; both "
             "sides do all of it. ORT's graphs: " + "; ".join(
                 f"**{g}** {GRAPHS[g]}" for g in graphs) + " (bench/ort/w6_graphs.py says how "
             "each is fed). ORT is called from node: *wall* is `session.run` as the caller "
             "sees it, which includes the binding's copy of every output into fresh JS buffers "
             "(mha: the whole present, 2 t E floats; gqa: the whole shared buffer, 2 C E "
             "floats, since the binding copies preallocated outputs too) and node's garbage "
             "collection; *in Run* is ORT's own time inside the C++ Run of each step (its "
             "profiler's model_run events, from a second pass with the profiler on, which adds "
             "a few us a step), which excludes them. attnd's times are its C call.")
    L.append("")

    L.append("## Outputs checked against torch (before timing)")
    L.append("")
    L.append(f"One session of each side; its 4,096 outputs (4,096 x 512) against torch's whole "
             f"causal call: the largest |difference| must be <= {MAX_ABS:g}.")
    L.append("")
    head = "| side | max abs, every step | over the largest magnitude |"
    sep = "|---|--:|--:|"
    for t in CHECK_STEPS:
        head += f" step {t} |"
        sep += "--:|"
    L += [head + " check |", sep + "---|"]
    for name, c in checks.items():
        row = (f"| {name} | {fmt(c.get('max_abs'), '.1e')} | {fmt(c.get('rel'), '.1e')} |")
        for t in CHECK_STEPS:
            row += f" {fmt(c.get('steps', {}).get(t), '.1e')} |"
        L.append(row + (" pass |" if c.get("ok") else f" FAIL: {c.get('error') or 'tolerance'} |"))
    if ctx.get("cross"):
        L.append("")
        L.append("attnd against ORT directly (max abs, every step): " + ", ".join(
            f"{g} {v:.1e}" for g, v in ctx["cross"].items()) + ".")
    L.append("")

    L.append("## Per step and in total (ms and s; median over the rounds, range in parentheses)")
    L.append("")
    cols = [("attnd", ("attnd",))]
    for g in graphs:
        cols.append((f"ORT {g}, wall", (g, "wall")))
        if not args.no_profile:
            cols.append((f"ORT {g}, in Run", (g, "run")))
    head, sep = "| |", "|---|"
    for label, _ in cols:
        head += f" {label} |"
        sep += "--:|"
    L += [head, sep]
    ser = {label: series(rounds, path) for label, path in cols}
    for t in POINTS:
        row = f"| per step at t = {t:,} |"
        for label, _ in cols:
            row += f" {cell(ser[label].get(t, []), '.3f')} |"
        L.append(row)
    row = "| the session's total, 4,096 steps (s) |"
    for label, _ in cols:
        row += f" {cell(ser[label].get('total_s', []), '.2f')} |"
    L.append(row)
    L.append("")
    L.append("Ratios ORT / attnd (above 1, attnd is faster): of the medians above, and paired "
             "(each ORT process against the attnd process run next to it in the same round: "
             "median, lowest to highest).")
    L.append("")
    head, sep = "| |", "|---|"
    for label, _ in cols[1:]:
        head += f" {label} / attnd, of medians | paired |"
        sep += "--:|--:|"
    L += [head, sep]
    for key in list(POINTS) + ["total_s"]:
        row = f"| {'per step at t = ' + format(key, ',') if key != 'total_s' else 'total'} |"
        for label, path in cols[1:]:
            a = [x for x in ser["attnd"].get(key, []) if x]
            o = [x for x in ser[label].get(key, []) if x]
            row += f" {fmt(median(o) / median(a) if a and o else None, '.2f')} |"
            row += f" {cell(paired(rounds, path, key), '.2f')} |"
        L.append(row)
    L.append("")

    L.append("Per step at every 512 rows (ms, medians over the rounds):")
    L.append("")
    L.append("| t | " + " | ".join(f"{t:,}" for t in EVERY) + " |")
    L.append("|---|" + "--:|" * len(EVERY))
    for label, _ in cols:
        L.append(f"| {label} | " + " | ".join(
            fmt(median([x for x in ser[label].get(t, []) if x]) if any(ser[label].get(t, []))
                else None, '.3f') for t in EVERY) + " |")
    op_rows = []
    for g in graphs:
        s = series(rounds, (g, "op"))
        if s:
            op_rows.append(f"| ORT {g}, its attention node alone | " + " | ".join(
                fmt(median([x for x in s.get(t, []) if x]) if any(s.get(t, [])) else None,
                    '.3f') for t in EVERY) + " |")
    L += op_rows
    L.append("")
    L.append("Per round (per step at t = 4,096, ms; total, s), in the order run:")
    L.append("")
    for i, rd in enumerate(rounds):
        parts = []
        for g in graphs:
            a = rd.get("attnd", {}).get(g)
            if a:
                parts.append(f"attnd (beside {g}) {fmt(a['at'].get(4096), '.3f')} / "
                             f"{a['total_s']:.2f}")
            o = rd.get("ort", {}).get(g) or {}
            for k in ("wall", "run"):
                if o.get(k):
                    parts.append(f"{g} {k} {fmt(o[k]['at'].get(4096), '.3f')} / "
                                 f"{o[k]['total_s']:.2f}")
        L.append(f"- round {i + 1} ({rd['order']}, load {rd['load']:.2f}): " + "; ".join(parts))
    L.append("")
    text = ("Bytes held at t = 4,096: attnd's cache 16 MiB (2 t E floats, allocated once at "
            "the session's start for its 4,096 rows, W6's `cache_bytes`; a step's workspace "
            "40 KiB). ORT mha: the past it is fed and the present it returns, 16 MiB each, "
            "during a step, and the binding's copy of the present on the JS heap; gqa: 16 MiB "
            "(C = 4,096 rows, shared) and the binding's copy.")
    rss = {g: [(rd.get("ort", {}).get(g) or {}).get("rss") for rd in rounds] for g in graphs}
    parts = [f"{g} {cell([r / 2 ** 20 for r in v if r is not None], '.0f')} MiB"
             for g, v in rss.items() if any(r is not None for r in v)]
    if parts:
        text += (" ORT's peak RSS growth over its first (untimed) session, the InferenceSession "
                 "and inputs made before: " + ", ".join(parts) + ".")
    L.append(text)
    L.append("")

    L.append("## The goal of issue 37 (reported, not asserted)")
    L.append("")
    a = [x for x in ser["attnd"].get(4096, []) if x]
    for label, path in cols[1:]:
        o = [x for x in ser[label].get(4096, []) if x]
        v = median(o) / median(a) if a and o else None
        pv = paired(rounds, path, 4096)
        word = "SKIP" if v is None else ("PASS" if v >= 1.0 else "MISS")
        L.append(f"- {word}  attnd's step at t = 4,096 at least as fast as {label}: "
                 f"{fmt(v, '.2f')}x of the medians, paired {cell(pv, '.2f')}")
    L.append("")
    if ctx["problems"]:
        L.append("## Problems")
        L.append("")
        L += [f"- {p}" for p in ctx["problems"]]
        L.append("")
    return L


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="the bench_attention program")
    ap.add_argument("--out", required=True, help="where to write the markdown report")
    ap.add_argument("--append", help="also append the report to this file")
    ap.add_argument("--work", default="build/bench/ort_w6", help="graphs, inputs and outputs")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    ap.add_argument("--graphs", default="mha,gqa", help="ORT graphs (mha, gqa)")
    ap.add_argument("--no-profile", action="store_true",
                    help="skip ORT's profiled pass (no in-Run times)")
    ap.add_argument("--env-coretype", default=os.environ.get("OPENBLAS_CORETYPE") or None,
                    help="attnd's OpenBLAS kernel (default: OPENBLAS_CORETYPE, if set; else "
                    "attnd picks the best)")
    args = ap.parse_args()
    graphs = [g for g in args.graphs.split(",") if g]
    if any(g not in GRAPHS for g in graphs):
        print(f"run_ort_w6.py: --graphs takes {', '.join(GRAPHS)}", file=sys.stderr)
        return 2
    if not shutil.which("node") or not ort_installed():
        print(f"run_ort_w6.py: node or {ORT_DIR}/node_modules/onnxruntime-node is missing "
              "(make bench-ort-deps)", file=sys.stderr)
        return 1
    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    load0 = os.getloadavg()
    problems = []
    os.makedirs(args.work, exist_ok=True)

    # 1. The graphs, the input and torch's outputs.
    rc, recs, _ = run_lines([PY, os.path.join(ORT_DIR, "w6_graphs.py"), "--dir", args.work])
    if rc != 0 or not one(recs, "done"):
        print(f"run_ort_w6.py: w6_graphs.py exited {rc}", file=sys.stderr)
        return 1
    ref = np.fromfile(os.path.join(args.work, "W6.ref.out.bin"), dtype=np.float32)

    # 2. The check, before any timing.
    env_a = attnd_env(args.env_coretype)
    env_o = dict(os.environ)
    env_o["GLIBC_TUNABLES"] = ORT_TUNABLES
    checks = {}
    dump = os.path.join(args.work, "W6.attnd.out.bin")
    rc, recs, _ = run_lines(attnd_cmd(args, ["--w6-dump", dump]), env_a)
    machine = one(recs, "machine") or {}
    slots = machine.get("slots")
    c = compare(dump, ref) if rc == 0 and os.path.exists(dump) else {
        "error": f"bench_attention exited {rc}"}
    c["ok"] = c.get("error") is None and c["max_abs"] <= MAX_ABS
    checks["attnd"] = c
    threads = slots or os.cpu_count() or 1
    cross = {}
    for g in graphs:
        dump_g = os.path.join(args.work, f"W6.{g}.out.bin")
        rc, recs, other = run_lines(ort_cmd(args, g, threads, ["--dump", dump_g]), env_o)
        cg = compare(dump_g, ref) if rc == 0 and os.path.exists(dump_g) else {
            "error": f"w6.mjs exited {rc}" + (f": {other[-1]}" if other else "")}
        cg["ok"] = cg.get("error") is None and cg["max_abs"] <= MAX_ABS
        checks[f"ORT {g}"] = cg
        if cg.get("data") is not None and c.get("data") is not None:
            cross[g] = float(np.abs(cg["data"].astype(np.float64) - c["data"]).max())
    for name, cc in checks.items():
        cc.pop("data", None)
        if not cc["ok"]:
            why = cc.get("error") or "max abs " + fmt(cc.get("max_abs"), ".2e")
            problems.append(f"{name}: the check against torch failed ({why}); not timed")
    timed = [g for g in graphs if checks[f"ORT {g}"]["ok"]]

    # 3. Interleaved rounds of fresh processes.
    rounds, kernel, ort_version, ort_threads = [], {}, None, None
    snap0 = snapshot()
    for r in range(args.rounds if checks["attnd"]["ok"] else 0):
        rd = {"order": "attnd first" if r % 2 == 0 else "ORT first", "load": os.getloadavg()[0],
              "attnd": {}, "ort": {}}
        # An attnd process next to each graph's, so that each pair sees the same spell of the
        # machine; in odd rounds the whole order is reversed.
        seq = [(side, g) for g in timed for side in ("attnd", "ort")]
        for side, g in (seq if r % 2 == 0 else seq[::-1]):
            print(f"run_ort_w6.py: round {r + 1} of {args.rounds}: {side} ({g})",
                  file=sys.stderr, flush=True)
            if side == "attnd":
                res, err = attnd_round(args, env_a)
                if res:
                    kernel = kernel or res["blas"]
                    rd["attnd"][g] = res
            else:
                res, err = ort_round(args, g, threads, env_o)
                if res:
                    ort_version, ort_threads = res["version"], res["threads"]
                    rd["ort"][g] = res
            if err:
                problems.append(f"round {r + 1}: {err}")
        rounds.append(rd)
    others = others_load(snap0, snapshot())
    ended = datetime.datetime.now().astimezone().strftime("%H:%M:%S")

    with open(os.path.join(args.work, "rounds.json"), "w") as f:
        json.dump({"started": started, "rounds": rounds, "checks": checks}, f, indent=1)
    ctx = {"rounds": rounds, "checks": checks, "graphs": timed, "kernel": kernel,
           "slots": slots, "ort_version": ort_version, "ort_threads": ort_threads,
           "started": started, "ended": ended, "load": (load0[0], os.getloadavg()[0]),
           "others": others, "problems": problems, "cross": cross}
    text = "\n".join(report(args, ctx)) + "\n"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    if args.append:
        with open(args.append, "a") as f:
            f.write("\n" + text)
    print(text)
    print(f"(written to {args.out}" + (f", appended to {args.append})" if args.append else ")"),
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
