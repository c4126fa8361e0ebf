#!/usr/bin/python3
"""readme_deps.py - README.md's list of dependencies kept in step with the code.

The table under "## Dependencies" names each package in its first column (in backticks; "(npm)"
after an npm package) and, in its last, the goals that need it. Checked:
  - the Debian packages it names are exactly those the Makefile's lists install (--packages:
    lines "NAME pkg pkg ..."), those .ci/run installs, and nodejs and npm;
  - the npm packages it names are exactly those of the package.json files under tests/ and
    bench/ (one folder down: tests/web/package.json, bench/ort/package.json);
  - the rows whose last column says "attnd" are exactly the packages of the libraries
    build/attnd links (its ELF NEEDED entries): so jansson and libcurl, which only the tests
    and benchmarks use, cannot creep into the daemon while the README says they do not.

Usage: readme_deps.py --readme README.md --packages build/packages.txt --ci .ci/run
                      --attnd build/attnd
Prints one line per failed check and "N passed, N failed"; exits 1 on any failure.
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "server"))
from harness import Checks  # noqa: E402

check = Checks()

# The library a NEEDED entry names -> the Debian package that provides it for the build.
SONAME_PACKAGE = {
    "libc.so": "libc6-dev",
    "libm.so": "libc6-dev",
    "libopenblas.so": "libopenblas-dev",
    "libmicrohttpd.so": "libmicrohttpd-dev",
    "libz.so": "zlib1g-dev",
}

def readme_table(text):
    """{package: (is_npm, last column)} from the table of the "## Dependencies" section."""
    m = re.search(r"^## Dependencies\n(.*?)(?=^## )", text, re.M | re.S)
    if not m:
        return None
    rows = {}
    for line in m.group(1).splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        npm = "(npm)" in cells[0]
        for name in re.findall(r"`([^`]+)`", cells[0]):
            rows[name] = (npm, cells[-1])
    return rows


def ci_packages(path):
    """The packages .ci/run installs with apt-get (continuation lines joined)."""
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    pkgs = set()
    for m in re.finditer(r"apt-get install ([^\n>|;&]*)", text):
        pkgs |= {w for w in m.group(1).split() if not w.startswith("-")}
    return pkgs


def npm_packages(root):
    names = set()
    paths = [p for top in ("tests", "bench") for p in glob.glob(os.path.join(root, top, "*",
                                                                           "package.json"))]
    for path in paths:
        with open(path) as f:
            manifest = json.load(f)
        for key in ("dependencies", "devDependencies"):
            names |= set(manifest.get(key, {}))
    return names


def needed(binary):
    out = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True,
                         check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--readme", required=True)
    ap.add_argument("--packages", required=True)
    ap.add_argument("--ci", required=True)
    ap.add_argument("--attnd", required=True)
    args = ap.parse_args()
    root = os.path.dirname(os.path.abspath(args.readme))
    with open(args.readme) as f:
        rows = readme_table(f.read())
    if not check(rows, "README.md has no table under \"## Dependencies\""):
        print(check.summary())
        return 1

    lists = {}
    with open(args.packages) as f:
        for line in f:
            name, *pkgs = line.split()
            lists[name] = set(pkgs)
    check(lists.get("PKG_BUILD") and lists.get("PKG_TEST"),
          f"{args.packages} lacks PKG_BUILD or PKG_TEST: {sorted(lists)}")
    debian = set().union(*lists.values()) | ci_packages(args.ci) | {"nodejs", "npm"}
    named = {p for p, (npm, _) in rows.items() if not npm}
    for p in sorted(debian - named):
        check(False, f"the build installs {p}, which the README's dependencies do not name")
    for p in sorted(named - debian):
        check(False, f"the README's dependencies name {p}, which nothing installs")
    check(debian == named, "README's Debian packages == what the Makefile and .ci/run install")

    npm = npm_packages(root)
    named_npm = {p for p, (is_npm, _) in rows.items() if is_npm}
    check(npm == named_npm, f"README's npm packages {sorted(named_npm)} == the package.json "
          f"files' (tests/*/, bench/*/) {sorted(npm)}")
    check(npm, "the tests' package.json files name npm packages")

    libs = needed(args.attnd)
    check(libs, f"readelf finds what {args.attnd} links")
    linked = set()
    for lib in libs:
        pkg = next((p for so, p in SONAME_PACKAGE.items() if lib.startswith(so)), None)
        if check(pkg, f"{args.attnd} links {lib}, which no row of the README's dependencies "
                 "covers (a new library: add it to the table and to SONAME_PACKAGE)"):
            linked.add(pkg)
    said = {p for p, (_, goals) in rows.items() if re.search(r"\battnd\b", goals)}
    check(linked == said, f"the rows that say attnd links them {sorted(said)} == what "
          f"{args.attnd} links {sorted(linked)}")
    for lib in ("libjansson", "libcurl"):
        check(not any(x.startswith(lib) for x in libs), f"{args.attnd} links {lib}")
    print(check.summary())
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
