#!/usr/bin/python3
"""w1_cost.py - what a change costs W1: two attnd builds side by side, interleaved rounds of
`wrk -t1 -c16` with W1's JSON body (as bench/RESULTS.md's "What it costs W1" measures), each
build's CPU per request (user + system from /proc/PID/stat over the round, over the requests it
answered) and requests per second; medians and ranges, and after / before. Two bodies: W1 as
run_http_bench.py has it (params.init, no model), and W1 on the demo model (the same weights:
demo is init random, seed 24301), whose requests carry the model label.

What sharing's lookup costs a job that finds no twin: one build against itself, sharing off and
on, one connection (so that no two requests are in flight together):
  /usr/bin/python3 bench/http/w1_cost.py --before build/attnd --after build/attnd \\
      --share off on --connections 1

Run it on a quiet machine (no other load):
  git worktree add /tmp/attnd-before 6b045ae && make -C /tmp/attnd-before build/attnd
  make build/attnd
  /usr/bin/python3 bench/http/w1_cost.py --before /tmp/attnd-before/build/attnd \\
      --after build/attnd --rounds 11 --seconds 4
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_http_bench as hb  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--seconds", type=int, default=4)  # whole seconds: wrk reads "4s", not "4.0s"
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--share", nargs=2, default=["off", "off"], metavar=("BEFORE", "AFTER"),
                    help="ATTND_SHARE_JOBS of each side (wrk repeats one body: with more than "
                    "one connection and sharing on, its copies share jobs)")
    args = ap.parse_args()
    w1 = hb.workloads()["W1"]
    bodies = {"W1": w1, "W1 model demo": {k: v for k, v in w1.items() if k != "params"}}
    bodies["W1 model demo"]["model"] = "demo"
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, body in bodies.items():
            files[name] = os.path.join(tmp, name.replace(" ", "_") + ".json")
            with open(files[name], "w") as f:
                json.dump(body, f)
        procs = {}
        try:
            for side in ("before", "after"):
                share = args.share[0 if side == "before" else 1]
                procs[side] = hb.start_attnd(os.path.abspath(getattr(args, side)), [],
                                             os.path.join(tmp, side + ".log"), share=share)[:2]
            res = {(n, s): [] for n in files for s in procs}
            for rnd in range(args.rounds):
                for name, path in files.items():
                    order = ("before", "after") if rnd % 2 == 0 else ("after", "before")
                    for side in order:
                        proc, port = procs[side]
                        r = hb.wrk_attnd(proc, port, path, args.seconds, conns=args.connections,
                                         threads=1)
                        if r["non2xx"] or r["errors"]:
                            raise RuntimeError(f"{side} {name}: {r}")
                        res[name, side].append(r)
                        print(f"round {rnd + 1} {name} {side}: {r['cpu_us']:.1f} us, "
                              f"{r['rps']:.0f} req/s", file=sys.stderr, flush=True)
        finally:
            hb.stop_all([p for p, _ in procs.values()])
    print("| body | before: CPU per request, req/s | after | after / before (CPU, req/s) | "
          "paired: median of the rounds' CPU ratios (range) |")
    print("|---|---|---|---|---|")
    for name in files:
        cell = {}
        for side in ("before", "after"):
            cpu = [r["cpu_us"] for r in res[name, side]]
            rps = [r["rps"] for r in res[name, side]]
            cell[side] = (statistics.median(cpu), min(cpu), max(cpu), statistics.median(rps))
        b, a = cell["before"], cell["after"]
        # Each round runs both sides back to back: their ratio cancels the machine's drift
        # between rounds, which on a shared machine is wider than the difference sought.
        paired = [x["cpu_us"] / y["cpu_us"] for x, y in zip(res[name, "after"], res[name, "before"])]
        print(f"| {name} | {b[0]:.1f} us ({b[1]:.1f} to {b[2]:.1f}), {b[3]:,.0f} | "
              f"{a[0]:.1f} us ({a[1]:.1f} to {a[2]:.1f}), {a[3]:,.0f} | "
              f"{a[0] / b[0]:.3f}, {a[3] / b[3]:.3f} | {statistics.median(paired):.3f} "
              f"({min(paired):.3f} to {max(paired):.3f}) |")


if __name__ == "__main__":
    main()
