#!/usr/bin/python3
"""readme_shell.py - every shell snippet of README.md (its ```sh blocks), run as printed against
a live attnd, each block in a fresh empty temporary directory, with bash.

The one edit: the README's address, localhost:8080 or 127.0.0.1:8080, becomes the live
attnd's (it listens on a free port). Each block runs under `set -euo pipefail`, with curl made
to fail on an HTTP error (`curl --fail-with-body`: a `curl -s` that gets a 415 otherwise exits
0), so a block passes only when every command in it succeeds. Then what the README prints as a
command's answer must be in the block's output: each comment that starts with `{`, `[` or
`HTTP/` (joined with the comment lines that continue it, and cut after its last bracket), read
with `...` standing for anything.

Blocks that cannot run in a test are skipped by these rules, and only by them; a skipped block is
listed in the output, and a rule that skips nothing fails (so the list stays true):
  - `make run` / `make test`: they install packages and start or test the whole project;
  - `docker `: the container commands (make container-test plays the image with podman).

Usage: readme_shell.py --attnd build/attnd --readme README.md
Prints one line per failed check and "N passed, N failed"; exits 1 on any failure.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile

from harness import Checks, start_attnd

check = Checks()

SKIP_RULES = [
    (re.compile(r"^make (run|test)\b", re.M), "make run / make test install and build"),
    (re.compile(r"^docker ", re.M), "container commands (make container-test plays the image)"),
]

PRELUDE = """set -euo pipefail
curl() { command curl --fail-with-body "$@"; }
"""


def blocks(readme):
    """(line number, text) of each ```sh block."""
    for m in re.finditer(r"^```(?:sh|bash|shell)\n(.*?)^```", readme, re.M | re.S):
        yield readme[:m.start()].count("\n") + 2, m.group(1)


def expectations(text):
    """The answers a block prints in its comments: patterns for its output."""
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.search(r"#\s?(\{|\[|HTTP/)(.*)$", lines[i])
        if not m or (lines[i].lstrip().startswith("#") is False and "#" not in lines[i]):
            i += 1
            continue
        text_ = m.group(1) + m.group(2)
        # A standalone comment may continue on the next comment lines ("#  ...").
        while lines[i].lstrip().startswith("#") and i + 1 < len(lines) and \
                re.match(r"^#\s{2,}\S", lines[i + 1]):
            i += 1
            text_ += lines[i].lstrip("#").strip()
        i += 1
        if text_.startswith("HTTP/"):
            out.append(text_.split("   ")[0].strip())
            continue
        end = max(text_.rfind("}"), text_.rfind("]"))
        out.append(text_[:end + 1])
    return out


def pattern(expect):
    return re.compile(".*?".join(re.escape(p.strip()) for p in expect.split("...")), re.S)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnd", required=True)
    ap.add_argument("--readme", required=True)
    args = ap.parse_args()
    with open(args.readme) as f:
        readme = f.read()
    found = list(blocks(readme))
    check(len(found) >= 10, f"the README has {len(found)} shell blocks (want 10 or more)")
    used = [0] * len(SKIP_RULES)
    ran = 0
    with tempfile.TemporaryDirectory() as logdir:
        proc, port = start_attnd(os.path.abspath(args.attnd), [],
                                 os.path.join(logdir, "attnd.log"), "readme_shell")
        try:
            for line, text in found:
                rule = next((k for k, (rx, _) in enumerate(SKIP_RULES) if rx.search(text)), None)
                if rule is not None:
                    used[rule] += 1
                    print(f"skipped: README.md:{line}: {SKIP_RULES[rule][1]}")
                    continue
                script = re.sub(r"(localhost|127\.0\.0\.1):8080", f"127.0.0.1:{port}", text)
                with tempfile.TemporaryDirectory() as tmp:  # a fresh directory per block
                    r = subprocess.run(["bash", "-c", PRELUDE + script], cwd=tmp,
                                       capture_output=True, text=True, timeout=60)
                ran += 1
                if not check(r.returncode == 0,
                             f"README.md:{line}: exit {r.returncode}: {r.stderr[-400:]} "
                             f"{r.stdout[-300:]}"):
                    continue
                for want in expectations(text):
                    check(pattern(want).search(r.stdout) is not None,
                          f"README.md:{line}: the README prints {want[:160]!r}, and the "
                          f"answer does not hold it: {r.stdout[:300]!r}")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    for k, n in enumerate(used):
        check(n > 0, f"the skip rule \"{SKIP_RULES[k][1]}\" skips no block: remove it")
    print(f"readme_shell: {ran} blocks run, {sum(used)} skipped; {check.summary()}")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
