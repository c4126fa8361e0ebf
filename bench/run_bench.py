#!/usr/bin/python3
"""run_bench.py - runs the core benchmark (bench_attention, then PyTorch's torch_mha.py on the same
OpenBLAS core) and the API path beside it (bench_api: what a server worker does for W1-W5), and
writes a markdown report with the goals evaluated.

Usage: /usr/bin/python3 bench/run_bench.py --bin build/bench/bench_attention
           --api-bin build/bench/bench_api --out build/bench/results.md [--time SECONDS]
           [--api-rounds N] [--api-time SECONDS] [--api-no-cache]

The API path against the core: for each of --api-rounds rounds and each workload, a fresh
bench_attention --only W and a fresh bench_api --only W, one after the other (so that a ratio
compares two runs seconds apart on the same kernel); the report gives each round's ratio of
bench_api's compute to bench_attention's time, and their median. --api-no-cache adds a bench_api
--no-cache run to each pair (the job memory as it was before the cache: malloc per job).

Goals are reported, not asserted: a MISS does not fail the process. It exits non-zero only when a
benchmark program fails (a libattn error, a crash) or prints nothing usable.
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1024.0 * 1024.0
CHECK_TOL = 1e-5  # output checksums must agree to this relative difference

FLOPS_NOTE = (
    "FLOPs are libattn's `plan.flops`: 2 x the multiply-adds of the four projections (Q, K, V and "
    "out, i.e. 2*N*L*E*E*2 + 2*N*S*E*(kdim+vdim)) plus 2*(D+Dv) per attended (query, key) cell "
    "and head, counting only the cells left after the causal limit and the key lengths. "
    "GFLOP/s = plan.flops / median time; torch is compared by time on the same work."
)

METHOD_NOTE = (
    "Method: MHA forward, self-attention (query = key = value, one tensor), packed "
    "in_proj_weight with biases, float32, inputs from a fixed-seed counter generator shared by "
    "both sides (bit-identical inputs). Each side runs two warm-ups; the second sizes the timed "
    "runs to about {t:g} s (at least 5); times are the median (min in the details). attnd uses a "
    "pool of cores-1 helpers plus the caller; torch uses torch.set_num_threads(cores). The sgemm "
    "peak is every pool slot running cblas_sgemm 1024^3 (single-threaded BLAS) at once, "
    "aggregate GFLOP/s = total FLOPs / median wall time, measured before and after the "
    "workloads in the same process; ratios use the mean of the two. Peak RSS growth = VmHWM "
    "after the timed runs minus VmRSS before them (high-water mark reset via "
    "/proc/self/clear_refs); inputs, parameters and masks are built before that baseline, so it "
    "counts what the forward needs (attnd: workspace + outputs). attnd workspace = "
    "plan.workspace_bytes, the memory libattn needs beyond inputs and outputs."
)


def run_lines(cmd, env=None):
    """Runs cmd, passing its stderr through; returns (rc, JSON records, other stdout lines)."""
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, env=env, text=True)
    except OSError as e:
        return 127, [], [str(e)]
    recs, other = [], []
    for line in p.stdout.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            recs.append(json.loads(line))
        except ValueError:
            other.append(line)
    return p.returncode, recs, other


def torch_importable():
    try:
        return subprocess.run([PY, "-c", "import torch"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0
    except OSError:
        return False


def cpu_model():
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if ":" in line:
                    k, v = line.split(":", 1)
                    info.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    model = info.get("model name", platform.processor() or "unknown")
    if "cpu family" in info and "model" in info:
        model += f" (family {info['cpu family']}, model {info['model']})"
    return model


def by_type(recs, kind):
    return [r for r in recs if r.get("type") == kind]


def one(recs, kind, **match):
    for r in by_type(recs, kind):
        if all(r.get(k) == v for k, v in match.items()):
            return r
    return None


def fmt(v, spec=".2f", none="-"):
    return none if v is None else format(v, spec)


def mib(b):
    return None if b is None else b / MIB


def rel_check(a, t, key):
    """|a.key_dot - t.key_dot| / a.key_dotabs, or None when either side lacks it."""
    if not a or not t or a.get(key + "_dot") is None or t.get(key + "_dot") is None:
        return None
    scale = max(abs(a[key + "_dotabs"]), 1e-30)
    return abs(a[key + "_dot"] - t[key + "_dot"]) / scale



def median(v):
    v = sorted(x for x in v if x is not None)
    if not v:
        return None
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


API_WORKLOADS = ("W1", "W2", "W3", "W4", "W5")


def api_pairs(args, env):
    """For each round and workload: bench_attention --only W, then bench_api --only W (and
    --no-cache), fresh processes. Returns ({name: summary}, failures)."""
    runs, failures = {}, []
    for rnd in range(args.api_rounds):
        for n in API_WORKLOADS:
            rc, recs, _ = run_lines([args.bin, "--only", n, "--time", str(args.api_time)], env)
            core = one(recs, "workload", name=n)
            if rc != 0 or not core:
                failures.append(f"bench_attention --only {n} exited {rc}")
            variants = [("cache", [])] + ([("nocache", ["--no-cache"])] if args.api_no_cache
                                          else [])
            got = {"core": core}
            for key, extra in variants:
                rc, recs, _ = run_lines([args.api_bin, "--only", n, "--time", str(args.api_time)]
                                        + extra, env)
                io = one(recs, "io", name=n)
                if rc != 0 or not io:
                    failures.append(f"bench_api --only {n} {' '.join(extra)} exited {rc}")
                got[key] = io
            runs.setdefault(n, []).append(got)
    out = {}
    for n, rs in runs.items():
        ratios = [r["cache"]["compute_ms"] / r["core"]["median_ms"]
                  for r in rs if r.get("cache") and r.get("core")]
        nc = [r["nocache"]["compute_ms"] / r["core"]["median_ms"]
              for r in rs if r.get("nocache") and r.get("core")]
        ios = [r["cache"] for r in rs if r.get("cache")]
        io = None
        if ios:
            io = dict(ios[-1])
            for k in ("parse_ms", "compute_ms", "encode_ms", "jansson_ms"):
                io[k] = median([x[k] for x in ios])
            io["io_over_compute"] = (io["parse_ms"] + io["encode_ms"]) / io["compute_ms"]
            io["jansson_over_parse"] = (io["jansson_ms"] / io["parse_ms"]
                                        if io["jansson_ms"] > 0 else None)
        out[n] = {"ratios": ratios, "ratio": median(ratios), "nocache_ratios": nc,
                  "nocache_ratio": median(nc), "io": io,
                  "core_ms": median([r["core"]["median_ms"] for r in rs if r.get("core")]),
                  "nocache": {k: median([r["nocache"][k] for r in rs if r.get("nocache")])
                              for k in ("parse_ms", "compute_ms", "encode_ms")}
                  if nc else None}
    return out, failures


def api_section(pairs, args):
    L = ["## The API path beside the core: what a server worker spends", ""]
    L.append("`bench_api --only W`: the workload as an API request naming a registered model, as "
             "a worker runs it: api_job_parse (read and validate the body, decode the tensors "
             "into the job's arena), api_job_run (libattn on the pool), api_job_respond (write "
             "the response into a new buffer), with the job memory cache attnd uses (arenas and "
             "buffers reused from job to job). W1 in JSON, W2-W5 with base64 tensors in and out. "
             "Each is paired with a fresh `bench_attention --only W` run just before it, on the "
             f"same kernel; {args.api_rounds} round(s) of {args.api_time:g} s runs, medians "
             "over the rounds. API / core is bench_api's compute over bench_attention's time, per "
             "round (the core benchmark's inputs carry biases and the API's models do not; the "
             "shapes, masks and outputs are the same). jansson ms: the same body read with "
             "jansson instead (json_loadb, then the query's numbers into float32, or its base64 "
             "text found but not decoded; no other field read), after the timed runs; a lower "
             "bound on a jansson reader, against attnd's whole parse.")
    L.append("")
    head = ("| workload | encoding | request KiB | response KiB | core ms | API compute ms | "
            "**API / core** | rounds | parse ms | encode ms | (parse + encode) / compute | "
            "jansson ms | jansson / parse |")
    sep = "|---|---|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|"
    if args.api_no_cache:
        head += " no cache: compute ms | no cache: API / core | no cache: parse ms |"
        sep += "--:|--:|--:|"
    L += [head, sep]
    for n in API_WORKLOADS:
        p = pairs.get(n)
        if not p or not p["io"]:
            continue
        r = p["io"]
        row = (f"| {n} | {r['encoding']} | {r['request_bytes'] / 1024:.0f} | "
               f"{r['response_bytes'] / 1024:.0f} | {fmt(p['core_ms'], '.3f')} | "
               f"{r['compute_ms']:.3f} | **{fmt(p['ratio'], '.2f')}** | "
               + ", ".join(f"{x:.2f}" for x in p["ratios"]) + f" | {r['parse_ms']:.3f} | "
               f"{r['encode_ms']:.3f} | {r['io_over_compute']:.2f} | "
               f"{fmt(r.get('jansson_ms'), '.3f')} | "
               f"{fmt(r.get('jansson_over_parse'), '.0f')}{'x' if r.get('jansson_over_parse') else ''} |")
        if args.api_no_cache:
            nc = p["nocache"] or {}
            row += (f" {fmt(nc.get('compute_ms'), '.3f')} | {fmt(p['nocache_ratio'], '.2f')} | "
                    f"{fmt(nc.get('parse_ms'), '.3f')} |")
        L.append(row)
    L.append("")
    return L

def goal_line(ok, label, value, target, margin, unit=""):
    if value is None:
        return f"- SKIP  {label}: not measured"
    word = "PASS" if ok else "MISS"
    return (f"- {word}  {label}: {value:.3g}{unit} (target {target}{unit}, margin "
            f"{margin:+.3g}{unit}, {margin / target * 100:+.0f}%)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="the bench_attention program")
    ap.add_argument("--out", required=True, help="where to write the markdown report")
    ap.add_argument("--time", type=float, default=1.5, help="seconds of timed runs per workload")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch comparison")
    ap.add_argument("--api-bin", help="the bench_api program (the API path: parse, compute, encode)")
    ap.add_argument("--api-rounds", type=int, default=3,
                    help="rounds of bench_attention / bench_api pairs per workload")
    ap.add_argument("--api-time", type=float, default=1.0,
                    help="seconds of timed runs per workload in each pair")
    ap.add_argument("--api-no-cache", action="store_true",
                    help="also run bench_api --no-cache in each pair")
    args = ap.parse_args()

    load_start = os.getloadavg()
    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    failures = []

    # attnd. ATTND_BLAS_REEXEC is attn_blas_setup's private marker; never inherit it.
    env = dict(os.environ)
    env.pop("ATTND_BLAS_REEXEC", None)
    rc, arecs, aother = run_lines([args.bin, "--time", str(args.time)], env)
    if rc != 0 or not one(arecs, "done"):
        err = one(arecs, "error")
        failures.append(f"bench_attention exited {rc}" +
                        (f": {err['where']}: {err['code']}: {err['msg']}" if err else ""))
    blas = one(arecs, "blas") or {}
    machine = one(arecs, "machine") or {}
    peak_before = one(arecs, "peak", phase="before")
    peak_after = one(arecs, "peak", phase="after")
    peaks = [p["gflops"] for p in (peak_before, peak_after) if p]
    peak = sum(peaks) / len(peaks) if peaks else None
    attnd = {r["name"]: r for r in by_type(arecs, "workload")}

    # torch, on attnd's active OpenBLAS core.
    trecs, tinfo, torch_note = [], {}, None
    if args.no_torch:
        torch_note = "skipped (--no-torch)"
    elif not blas.get("active"):
        torch_note = "skipped: bench_attention reported no BLAS core"
    elif not torch_importable():
        torch_note = f"skipped: `import torch` fails under {PY}"
    else:
        tenv = dict(env)
        tenv["OPENBLAS_CORETYPE"] = blas["active"]
        trc, trecs, _ = run_lines([PY, os.path.join(HERE, "torch_mha.py"), "--time",
                                   str(args.time)], tenv)
        tinfo = one(trecs, "torch") or {}
        if trc != 0 or not one(trecs, "done"):
            failures.append(f"torch_mha.py exited {trc}")
            torch_note = f"failed (exit {trc}); partial results below"
    torch = {r["name"]: r for r in by_type(trecs, "workload")}

    # The threading alternative: no pool, OpenBLAS threads on every core.
    brc, brecs, _ = run_lines([args.bin, "--time", str(args.time), "--threading", "blas"], env)
    if brc != 0 or not one(brecs, "done"):
        failures.append(f"bench_attention --threading blas exited {brc}")
    blas_alt = {r["name"]: r for r in by_type(brecs, "workload")}

    # The API path beside the core, in pairs of fresh processes; then JSON floats.
    pairs, floats, jfloats = {}, [], []
    if args.api_bin:
        pairs, pair_failures = api_pairs(args, env)
        failures += pair_failures
        frc, frecs, _ = run_lines([args.api_bin, "--floats-only"], env)
        if frc != 0:
            failures.append(f"bench_api --floats-only exited {frc}")
        floats = by_type(frecs, "floats")
        jfloats = by_type(frecs, "jansson_floats")
        failures += [f"JSON floats, {r['op']} {r['data']}: attnd and the previous code disagree"
                     for r in floats if not r["same"]]
    io = {n: p["io"] for n, p in pairs.items() if p.get("io")}
    load_end = os.getloadavg()

    names = list(attnd) + [n for n in torch if n not in attnd]
    L = []
    L.append("# attnd core benchmark")
    L.append("")
    L.append(f"Run {started} by `bench/run_bench.py`. {FLOPS_NOTE}")
    L.append("")
    L.append(METHOD_NOTE.format(t=args.time))
    L.append("")
    L.append("## Machine")
    L.append("")
    L.append(f"- CPU: {cpu_model()}; {machine.get('cores', os.cpu_count())} cores online; attnd "
             f"pool: {machine.get('helpers', '?')} helper thread(s) + the caller = "
             f"{machine.get('slots', '?')} slots")
    L.append(f"- OpenBLAS core (attnd): **{blas.get('active', '?')}**: {blas.get('how', '')}")
    if tinfo:
        same = tinfo.get("openblas_core") == blas.get("active")
        L.append(f"- torch {tinfo.get('version')}: {tinfo.get('threads')} threads, OpenBLAS core "
                 f"{tinfo.get('openblas_core')} with {tinfo.get('openblas_threads')} threads "
                 f"(OPENBLAS_CORETYPE={tinfo.get('env_coretype')})"
                 + ("" if same else " **- not attnd's core: the comparison is unfair**"))
    else:
        L.append(f"- torch: {torch_note}")
    if torch_note and tinfo:
        L.append(f"- torch run: {torch_note}")
    for ph, p in (("before", peak_before), ("after", peak_after)):
        if p:
            conc = "" if p["concurrent_reps"] == p["reps"] else (
                f"; only {p['concurrent_reps']}/{p['reps']} runs had every slot busy")
            L.append(f"- sgemm peak {ph} the workloads: {p['gflops']:.1f} GFLOP/s aggregate over "
                     f"{p['slots']} slots (median of {p['reps']}; best "
                     f"{p['gflops_best']:.1f}){conc}")
    L.append(f"- sgemm peak used for ratios (mean of before and after): {fmt(peak, '.1f')} GFLOP/s")
    drift = abs(peaks[0] - peaks[1]) / peak if len(peaks) == 2 else 0.0
    if drift > 0.1:
        L.append(f"- **noisy machine**: the peak moved by {drift * 100:.0f}% during the run; "
                 "treat the ratios with care and re-run on a quiet machine")
    L.append(f"- load average (1 min) at start / end: {load_start[0]:.2f} / {load_end[0]:.2f}")
    L.append("")

    L.append("## Results")
    L.append("")
    L.append("| workload | shape (N, L=S, E, H) and masks | attnd ms | attnd GFLOP/s | sgemm peak "
             "GFLOP/s | attnd/peak | torch ms | torch/attnd | attnd workspace MiB | attnd peak "
             "RSS growth MiB | torch peak RSS growth MiB |")
    L.append("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for n in names:
        a, t = attnd.get(n), torch.get(n)
        r = a or t
        masks = []
        if r["causal"] != "none":
            masks.append("causal")
        if r.get("key_lengths"):
            masks.append("key_lengths " + "/".join(str(k) for k in r["key_lengths"]))
        if r["weights"] != "none":
            masks.append("per-head weights")
        shape = f"{r['n']}, {r['l']}, {r['e']}, {r['h']}" + (
            "; " + ", ".join(masks) if masks else "")
        ratio = a["gflops"] / peak if a and peak else None
        speed = t["median_ms"] / a["median_ms"] if a and t else None
        L.append(
            f"| {n} {r['label']} | {shape} | {fmt(a and a['median_ms'], '.3f')} | "
            f"{fmt(a and a['gflops'], '.1f')} | {fmt(peak, '.1f')} | {fmt(ratio, '.2f')} | "
            f"{fmt(t and t['median_ms'], '.3f')} | {fmt(speed, '.2f')} | "
            f"{fmt(a and mib(a['workspace_bytes']), '.2f')} | "
            f"{fmt(a and mib(a['rss_peak_growth']), '.2f')} | "
            f"{fmt(t and mib(t['rss_peak_growth']), '.2f')} |")
    L.append("")
    L.append("Details: attnd job MiB is plan.job_bytes (workspace + outputs, what max_bytes caps). "
             "The checks compare checksums of attnd's and torch's results on identical inputs "
             "(|sum r_i (a_i - t_i)| / sum |r_i a_i| with fixed random r_i), output and, with "
             f"weights, the per-head weight maps; they must stay below {CHECK_TOL:g}.")
    L.append("")
    L.append("| workload | attnd min ms | attnd runs | attnd job MiB | torch min ms | torch runs "
             "| output check | weights check | weight row-sum error (attnd / torch) |")
    L.append("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    mismatches = []
    for n in names:
        a, t = attnd.get(n), torch.get(n)
        co, cw = rel_check(a, t, "out"), rel_check(a, t, "w")
        for what, c in (("output", co), ("weights", cw)):
            if c is not None and not c < CHECK_TOL:
                mismatches.append(f"{n} {what} differs from torch by {c:.3g} (tolerance "
                                  f"{CHECK_TOL:g})")
        for side, rec in (("attnd", a), ("torch", t)):
            if rec and not rec.get("finite", True):
                mismatches.append(f"{n}: {side}'s result holds a NaN or an infinity")
        if a and t:
            for k in ("n", "l", "s", "e", "h", "causal", "key_lengths", "weights"):
                if a.get(k) != t.get(k):
                    mismatches.append(f"{n}: the sides disagree on {k} ({a.get(k)} vs {t.get(k)})")
        rs = "-"
        if (a and "w_rowsum_err" in a) or (t and "w_rowsum_err" in t):
            rs = (f"{fmt(a and a.get('w_rowsum_err'), '.1e')} / "
                  f"{fmt(t and t.get('w_rowsum_err'), '.1e')}")
        L.append(f"| {n} | {fmt(a and a['min_ms'], '.3f')} | {fmt(a and a['reps'], 'd')} | "
                 f"{fmt(a and mib(a['job_bytes']), '.2f')} | {fmt(t and t['min_ms'], '.3f')} | "
                 f"{fmt(t and t['reps'], 'd')} | {fmt(co, '.1e')} | {fmt(cw, '.1e')} | {rs} |")
    L.append("")

    # W4 causal speed-up.
    a4, a4n = attnd.get("W4"), attnd.get("W4-nocausal")
    t4, t4n = torch.get("W4"), torch.get("W4-nocausal")
    causal_gain = a4n["median_ms"] / a4["median_ms"] if a4 and a4n else None
    L.append("## W4: causal vs no mask")
    L.append("")
    if causal_gain is not None:
        L.append(f"- attnd: {a4n['median_ms']:.1f} ms without the mask, {a4['median_ms']:.1f} ms "
                 f"causal: speed-up **{causal_gain:.2f}x** (the causal job has "
                 f"{a4['flops'] / a4n['flops'] * 100:.0f}% of the FLOPs)")
    if t4 and t4n:
        L.append(f"- torch: {t4n['median_ms']:.1f} ms without the mask, {t4['median_ms']:.1f} ms "
                 f"causal: speed-up {t4n['median_ms'] / t4['median_ms']:.2f}x")
    L.append("")

    # Threading alternatives.
    L.append("## Threading: libattn's pool vs OpenBLAS threads")
    L.append("")
    L.append("pool: the job is split over (batch, head, query block) and projection row blocks on "
             "a pool of cores-1 helpers plus the caller, BLAS single-threaded in each task (what "
             "attnd does). blas: no pool, one thread calls libattn and OpenBLAS runs every "
             "sgemm on all cores. Same process binary, run after the torch pass.")
    L.append("")
    L.append("| workload | pool ms | blas ms | blas/pool |")
    L.append("|---|--:|--:|--:|")
    for n in names:
        a, b = attnd.get(n), blas_alt.get(n)
        if not a or not b:
            continue
        L.append(f"| {n} | {a['median_ms']:.3f} | {b['median_ms']:.3f} | "
                 f"{b['median_ms'] / a['median_ms']:.2f} |")
    L.append("")

    # The API path against the core; parse / compute / encode.
    if pairs:
        L += api_section(pairs, args)

    # JSON floats.
    if floats:
        L.append("## JSON floats: ns per float read and written")
        L.append("")
        L.append("`bench_api`: a million distinct values of each kind, so that the branch "
                 "predictor cannot learn them (a request repeated in a loop lets it learn W1's "
                 "few thousand). Written by apip_floats_write and by the previous writer "
                 "(tests/float_ref.c); read by apip_jv_float_row, the tensor reader's row loop, and "
                 "by the previous conversion, (float)apip_jv_number per number. Runs alternate; "
                 "medians of 7. Both give the same bytes and floats (checked).")
        L.append("")
        L.append("| op | values | attnd ns/float | previous ns/float | previous / attnd |")
        L.append("|---|---|--:|--:|--:|")
        for r in floats:
            L.append(f"| {r['op']} | {r['data']} | {r['new_ns']:.1f} | {r['old_ns']:.1f} | "
                     f"{r['old_ns'] / r['new_ns']:.2f} |")
        L.append("")
    if jfloats:
        L.append("The same rows as a body `{\"x\": [...]}` read with jansson, the library attnd "
                 "does not read requests with (json_loadb, then each number into float32; "
                 "medians of 7), beside attnd's check + read:")
        L.append("")
        L.append("| values | jansson ns/float | attnd ns/float | jansson / attnd | floats that differ |")
        L.append("|---|--:|--:|--:|--:|")
        for r in jfloats:
            L.append(f"| {r['data']} | {r['jansson_ns']:.1f} | {r['attnd_ns']:.1f} | "
                     f"**{r['jansson_ns'] / r['attnd_ns']:.0f}x** | {r['differ']} |")
        L.append("")

    # Goals.
    L.append("## Goals (reported, not asserted)")
    L.append("")
    w3 = attnd.get("W3")
    r3 = w3["gflops"] / peak if w3 and peak else None
    L.append(goal_line(r3 is not None and r3 >= 0.7, "W3 attnd/peak >= 0.7", r3, 0.7,
                       (r3 or 0) - 0.7))
    for n in ("W2", "W3", "W4", "W5"):
        a, t = attnd.get(n), torch.get(n)
        s = t["median_ms"] / a["median_ms"] if a and t else None
        L.append(goal_line(s is not None and s >= 2.0, f"{n} torch/attnd >= 2.0", s, 2.0,
                           (s or 0) - 2.0, "x"))
    ws4 = mib(a4["workspace_bytes"]) if a4 else None
    L.append(goal_line(ws4 is not None and ws4 <= 64, "W4 attnd workspace <= 64 MiB", ws4, 64,
                       64 - (ws4 or 0), " MiB"))
    w3io = io.get("W3", {}).get("io_over_compute")
    if args.api_bin:
        L.append(goal_line(w3io is not None and w3io <= 0.3, "W3 base64 I/O <= 0.3 of compute",
                           w3io, 0.3, 0.3 - (w3io or 0)))
        for n in ("W3", "W4"):
            r = pairs.get(n, {}).get("ratio")
            L.append(goal_line(r is not None and r <= 1.15,
                               f"{n} API path compute / core <= 1.15 (median of the rounds)", r,
                               1.15, 1.15 - (r or 0), "x"))
    L.append(goal_line(causal_gain is not None and causal_gain >= 1.6,
                       "W4 nocausal/causal time >= 1.6", causal_gain, 1.6,
                       (causal_gain or 0) - 1.6, "x"))
    L.append("")
    if mismatches or failures or aother:
        L.append("## Problems")
        L.append("")
        for m in failures + mismatches:
            L.append(f"- {m}")
        for o in aother:
            L.append(f"- bench_attention printed a non-JSON line: `{o}`")
        L.append("")
    else:
        L.append("Checks: every result finite, attnd and torch agree on every workload.")
        L.append("")

    report = "\n".join(L)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    with open(args.out, "w") as f:
        f.write(report)
    print(report)
    print(f"(written to {args.out})", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
