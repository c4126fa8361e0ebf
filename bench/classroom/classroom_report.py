"""classroom_report.py - the classroom benchmark's report: per-step waits (nearest rank),
errors and bytes per student, the machine, and the goals, as Markdown. Used by run_classroom.py;
see its docstring.
"""

import datetime
import math
import os
import subprocess

from attnd_proc import GIB, MEMORY_LIMIT, PERIOD_US, QUOTA_US, ROOT


# ---- 3. Report ---------------------------------------------------------------------------------

def nearest_rank(xs, p):
    xs = sorted(xs)
    return xs[max(0, math.ceil(p / 100 * len(xs)) - 1)] if xs else float("nan")


def summarise(rec, class_):
    """A row per step, and one for the whole path (n None): each student's waits summed."""
    rows = []
    for s in rec["steps"] + [None]:
        n = s["n"] if s else None
        if s:
            per = [st.steps[n] for st in class_ if n in st.steps]
            ncalls = sum(1 for c in rec["calls"] if c["replay"] and c["step"] == n)
        else:
            per = [{"wait": sum(p["wait"] for p in st.steps.values()),
                    "calls": [r for p in st.steps.values() for r in p["calls"]]}
                   for st in class_]
            ncalls = sum(1 for c in rec["calls"] if c["replay"])
        results = [r for p in per for r in p["calls"]]
        errors, purpose, retried = {}, 0, {}
        for r in results:
            if r["error"]:
                errors[r["error"]] = errors.get(r["error"], 0) + 1
            elif r["on_purpose"] and r["status"] == r["on_purpose"]:
                purpose += 1
            for k, v in r["retried_codes"].items():
                retried[k] = retried.get(k, 0) + v
        waits = [p["wait"] for p in per]
        rows.append({
            "n": n, "key": s["key"] if s else "all", "title": s["title"] if s else "the path",
            "calls": ncalls, "students": len(per), "p50": nearest_rank(waits, 50),
            "p99": nearest_rank(waits, 99), "errors": errors, "on_purpose": purpose,
            "retried": retried,
            "up": sum(r["up"] for r in results) / max(1, len(per)),
            "down": sum(r["down"] for r in results) / max(1, len(per))})
    return rows


def mb(b):
    return f"{b / 1e6:.2f}" if b >= 1e4 else f"{b / 1e6:.4f}"


def counts(d):
    return ", ".join(f"{k}: {v}" for k, v in sorted(d.items()))


def table(rows):
    out = ["| step | requests | p50 wait s | p99 wait s | errors | 503s retried | 4xx on purpose "
           "| MB up / student | MB down / student |",
           "|---|--:|--:|--:|---|---|--:|--:|--:|"]
    for r in rows:
        name = ("load" if r["n"] == 0 else "**the whole path** (waits summed)" if r["n"] is None
                else f"{r['n']} {r['key']}")
        if r["calls"] == 0:
            out.append(f"| {name} | 0 | - | - | - | - | - | 0 | 0 |")
            continue
        err = f"**{counts(r['errors'])}**" if r["errors"] else "0"
        out.append(f"| {name} | {r['calls']} | {r['p50']:.2f} | {r['p99']:.2f} | {err} | "
                   f"{counts(r['retried']) or 0} | {r['on_purpose']} | {mb(r['up'])} | "
                   f"{mb(r['down'])} |")
    return "\n".join(out)


def machine():
    model = "?"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return model, os.cpu_count(), os.environ.get("OPENBLAS_CORETYPE")


def git_head():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except OSError:
        return "?"


def gib(b):
    return f"{b / GIB:.2f} GiB" if b is not None else "?"


def render(args, rec, runs, t_start, played, up, down, purpose):
    model, cpus, coretype = machine()
    t_end = datetime.datetime.now(datetime.timezone.utc)
    steps = ", ".join(f"{s['n']} {s['key']}" for s in rec["steps"] if s["n"])
    by_step = {}
    for c in played:
        by_step[c["step"]] = by_step.get(c["step"], 0) + 1
    lines = [
        f"## The classroom, measured (`make bench-classroom`, {git_head()}, "
        f"{t_start:%Y-%m-%d %H:%M} to {t_end:%H:%M} UTC)",
        "",
        f"The machine: {model}, {cpus} CPUs"
        + (f"; OPENBLAS_CORETYPE={coretype} in this environment (not passed to attnd: the "
           "container does not set it)" if coretype else "")
        + ". attnd started as the container starts it (the Dockerfile's ENV, its ENTRYPOINT "
        "without arguments; ATTND_LISTEN on 127.0.0.1, ATTND_MODELS an empty folder), a fresh "
        f"one per run, in cgroup v1 with a CPU quota of {QUOTA_US / PERIOD_US:g} CPUs "
        f"({QUOTA_US}/{PERIOD_US} us) and a memory limit of {gib(MEMORY_LIMIT)}; the students "
        "are threads of one Python process on the same machine, outside those cgroups.",
        "",
        f"The recording: one headless chromium walked the guided path in `lang={rec['lang']}` "
        f"({steps}); {len(played)} requests reached attnd, per step "
        + ", ".join(f"{'load' if k == 0 else k}: {v}" for k, v in sorted(by_step.items()))
        + f"; {up / 1e6:.1f} MB up and {down / 1e6:.1f} MB down per student (bodies). "
        + ("On purpose: " + ", ".join(f"{c['method']} {c['path']} at step {c['step']} "
                                      f"({c['on_purpose']})" for c in purpose)
           + " (not an error when the replay gets it too). " if purpose else "")
        + "Students replay the requests in waves as the page sent them, without the page's "
        "pauses; a 503 is tried again after its Retry-After (times 1 to 1.5), at most 3 times. "
        "The wait of a step is from its first request to its last answer, retries included; p99 "
        "is the nearest rank (the slowest student at 30 and 60).",
        "",
        "Every student replays the same recording, so students at the same step send the same "
        "bytes, as a class following the path's presets does; attnd computes a request "
        "identical to one in flight once and answers both (`--share-jobs`, on in the "
        "container). A run with `ATTND_SHARE_JOBS=off` computes every request, as for students "
        "who each type their own sentence.",
        "",
    ]
    for run in runs:
        cg = run["cgroup"]
        mode = ("all on the same step at once (a barrier before each step)"
                if run["mode"] == "together" else
                "spread over the path (each from its own step, random pauses of 0 to 1 s)")
        share = run.get("share", "on")
        lines += [
            f"### {run['students']} students, {mode}"
            + ("" if share == "on" else ", `ATTND_SHARE_JOBS=off` (every request computed)"),
            "",
            table(run["rows"]),
            "",
            f"Run: {run['seconds']:.1f} s. Requests answered with a copy of an identical one "
            f"in flight (`attnd_jobs_shared_total`): {run.get('shared', '?')}. attnd's peak RSS "
            "(VmHWM) "
            f"{(run['hwm'] or 0) / 2**20:.0f} MiB; its start log: memory_bound "
            f"{gib(run['memory_bound'])} ({run['memory_bound']}), memory_limit "
            f"{gib(run['memory_limit'])} from {run['memory_limit_source']}; threads: "
            f"{run['threads'] or '?'}; BLAS kernel {run['blas']}. The cgroup: peak usage "
            f"{gib(cg['max_usage'])}, "
            f"{cg['failcnt']} times at the limit, {cg['oom_kill']} OOM kills; throttled in "
            f"{cg['nr_throttled']} of {cg['nr_periods']} periods ({cg['throttled_s']:.1f} s). "
            f"CPU during the run: attnd {run['cpu']['attnd']:.1f} s, the students "
            f"{run['cpu']['client']:.1f} s, other processes on the machine "
            f"{run['cpu']['others']:.1f} s ({run['cpu']['others'] / run['seconds']:.2f} cores)."
            + ("" if run["alive"] else " **attnd had exited by the end of the run.**"),
            "",
        ]
    lines += goals(runs)
    return "\n".join(lines) + "\n"


def goals(runs):
    out = ["### Against the goals", "",
           "| goal | measured | |", "|---|---|---|"]
    ok = lambda b: "met" if b else "**missed**"  # noqa: E731
    for run in runs:
        if run["students"] != 60 or run.get("share", "on") != "on":
            continue  # the goals are the container's defaults (shared jobs on)
        rows = [r for r in run["rows"] if r["calls"] and r["n"] is not None]
        errs = {}
        for r in rows:
            for k, v in r["errors"].items():
                errs[k] = errs.get(k, 0) + v
        bad = [f"{'load' if r['n'] == 0 else r['n']}" for r in rows if r["errors"]]
        out.append(f"| 60 students, {run['mode']}: no error on any step (no 503, no 5xx, no "
                   f"time-out) | {sum(errs.values())} errors"
                   + (f" ({', '.join(f'{k}: {v}' for k, v in sorted(errs.items()))}; steps "
                      f"{', '.join(bad)})" if errs else "")
                   + f" | {ok(not errs)} |")
        slow = [r for r in rows if r["p99"] > 10]
        worst = max(rows, key=lambda r: r["p99"])
        out.append(f"| 60 students, {run['mode']}: every step ready within 10 s at p99 on 2 "
                   f"CPUs | worst: step {worst['n']} {worst['key']}, {worst['p99']:.1f} s"
                   + (f"; over 10 s: {', '.join(str(r['n']) for r in slow)}" if slow else "")
                   + f" | {ok(not slow)} |")
        hwm, bound = run["hwm"], run["memory_bound"]
        out.append(f"| 60 students, {run['mode']}: peak RSS below the logged bound | "
                   f"{(hwm or 0) / 2**20:.0f} MiB against {(bound or 0) / 2**20:.0f} MiB | "
                   f"{ok(hwm is not None and bound is not None and hwm < bound)} |")
    bounds = {r["memory_bound"] for r in runs}
    out.append(f"| the logged bound below 2 GiB | "
               f"{', '.join(gib(b) for b in sorted(b for b in bounds if b is not None))} | "
               f"{ok(all(b is not None and b < 2 * GIB for b in bounds))} |")
    return out + [""]
