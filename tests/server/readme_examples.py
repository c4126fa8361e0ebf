#!/usr/bin/python3
"""readme_examples.py - the README's Python and JavaScript clients, run as the README says to
run them, against a live attnd: the Python one with a Python that has what its paragraph says it
needs, the JavaScript one saved under the file name its paragraph gives and run with node, and
the Open Inference Protocol's tritonclient example with tritonclient.http, or where that is not
installed (no PyPI here) with tests/server/v2client, the stand-in that sends what it sends; the
port of an nn.MultiheadAttention call (masks section) after the Python client it uses, its two
printed differences from torch each at most 1e-5; the decode session's word by word
example; and the safetensors example in a fresh empty
directory, then attnd --models models answering its closing comment's request. Each must exit 0
(the Python ones' arrays are checked for the shapes their comments state).

Usage: readme_examples.py --attnd build/attnd --readme README.md
Prints one line per failed check and "N passed, N failed"; exits 1 on any failure.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request

from harness import Checks, start_attnd

check = Checks()


def section(readme, title):
    """The text of the README section `### title` up to the next heading."""
    m = re.search(r"^### " + re.escape(title) + r"\n(.*?)(?=^#{2,3} )", readme, re.M | re.S)
    return m.group(1) if m else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnd", required=True)
    ap.add_argument("--readme", required=True)
    args = ap.parse_args()
    with open(args.readme) as f:
        readme = f.read()
    py = section(readme, "Python client")
    js = section(readme, "JavaScript")
    tc = section(readme, "Python, tritonclient")
    port = section(readme, "Masks: PyTorch's conventions and ours")
    st = section(readme, "Models with a vocabulary")
    ss = section(readme, "Decode sessions: generation one token at a time")
    ss_code = re.search(r"```python\n(.*?)```", ss, re.S)
    check(ss_code is not None, "the decode sessions section has its Python example")
    port_code = re.search(r"```python\n(.*?)```", port, re.S)
    st_code = re.search(r"```python\n(.*?)```", st, re.S)
    check(port_code is not None and "nn.MultiheadAttention" in port_code.group(1),
          "the masks section ports an nn.MultiheadAttention call in Python")
    check(st_code is not None and "safetensors" in st, "the safetensors example is there")
    py_code = re.search(r"```python\n(.*?)```", py, re.S)
    js_code = re.search(r"```js\n(.*?)```", js, re.S)
    tc_code = re.search(r"```python\n(.*?)```", tc, re.S)
    check(py_code is not None and js_code is not None and tc_code is not None,
          "the README has the three client examples")
    if not py_code or not js_code or not tc_code:
        return 1
    # What the paragraphs say: the Python examples' third-party needs, the JS file name.
    js_prose = js[:js.index("```js")]
    examples = [(py[:py.index("```python")], py_code), (tc[:tc.index("```python")], tc_code)]
    if port_code:
        examples.append((port[:port.index("```python")], port_code))
    for prose, code in examples:
        imports = set(re.findall(r"^\s*import (\w+)", code.group(1), re.M)) | \
            set(re.findall(r"^\s*from (\w+)", code.group(1), re.M))
        third_party = sorted(m for m in imports if m not in sys.stdlib_module_names)
        for m in third_party:
            check(m in prose, f"a Python example imports {m}, and its paragraph should say so")
    name = re.search(r"save it as `([\w.-]+)`", js_prose)
    check(name is not None, "the JavaScript paragraph should say which file to save it as")
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_attnd(os.path.abspath(args.attnd), [], os.path.join(tmp, "attnd.log"),
                                  "readme_examples")
        url = f"http://127.0.0.1:{port}"
        try:
            code = py_code.group(1).replace("http://127.0.0.1:8080", url)
            code += "\nassert out.shape == (2, 16, 64) and w.shape == (2, 4, 16, 16)\n"
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               timeout=60)
            check(r.returncode == 0, f"the Python example: exit {r.returncode}: {r.stderr[-500:]}")
            # Its helper shows attnd's error, v1's and the Open Inference Protocol's.
            helper = code[:code.index("def b64")]
            err = helper + (
                "\ntry:\n    attention({'query': [[1, 2, 3]]})\nexcept RuntimeError as e:\n"
                "    print(e)\ntry:\n    attention({'inputs': []}, url=URL + '/v2/models/demo/infer')\n"
                "except RuntimeError as e:\n    print(e)\ntry:\n"
                "    attention({'query': [[1, float('-inf')]]})\nexcept ValueError as e:\n"
                "    print('ValueError', e)\n").replace("URL", repr(url))
            r = subprocess.run([sys.executable, "-c", err], capture_output=True, text=True, timeout=60)
            lines = r.stdout.strip().splitlines()
            check(r.returncode == 0 and len(lines) == 3 and lines[0].startswith("400 invalid_field:")
                  and lines[1].startswith("400: ") and lines[2].startswith("ValueError"),
                  "the Python helper shows attnd's errors, v1 and v2, and refuses -inf before "
                  f"sending: {r.stdout[-400:]} {r.stderr[-300:]}")
            # The tritonclient example: the real package when it is installed, else the
            # stand-in of tests/server/v2client.
            code = tc_code.group(1).replace("127.0.0.1:8080", f"127.0.0.1:{port}")
            code += "\nassert out.shape == (2, 16, 64) and w.shape == (2, 4, 16, 16)\n"
            env = dict(os.environ)
            real = subprocess.run([sys.executable, "-c", "import tritonclient.http"],
                                  capture_output=True).returncode == 0
            if not real:
                here = os.path.dirname(os.path.abspath(__file__))
                env["PYTHONPATH"] = os.path.join(here, "v2client")
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               timeout=60, env=env)
            check(r.returncode == 0,
                  f"the tritonclient example ({'tritonclient' if real else 'the stand-in'}): "
                  f"exit {r.returncode}: {r.stderr[-500:]}")
            # The port of an nn.MultiheadAttention call, after the client it uses; what it
            # prints is its differences from torch.
            if port_code:
                code = (py_code.group(1) + port_code.group(1)).replace("http://127.0.0.1:8080",
                                                                       url)
                r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                   timeout=120)
                diffs = [float(x) for x in r.stdout.split()[-2:]] if r.returncode == 0 else []
                check(r.returncode == 0 and len(diffs) == 2 and max(diffs) <= 1e-5,
                      f"the nn.MultiheadAttention port: exit {r.returncode}, printed "
                      f"{r.stdout[-200:]!r} (want two differences of at most 1e-5): "
                      f"{r.stderr[-500:]}")
            # The decode session, word by word: each step attends one key more (the first
            # has the start token too), and the ended session's GET is a 404.
            if ss_code:
                code = ss_code.group(1).replace("http://127.0.0.1:8080", url)
                r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                   timeout=60)
                lines = r.stdout.strip().splitlines()
                keys = [int(m.group(1)) for m in
                        (re.search(r"attends (\d+) keys", x) for x in lines) if m]
                check(r.returncode == 0 and keys == [2, 3, 4, 5, 6] and lines[-1] ==
                      "404 session_unknown", f"the decode session example: exit {r.returncode}, "
                      f"printed {r.stdout[-400:]!r}: {r.stderr[-500:]}")
            node = shutil.which("node")
            check(node is not None, "node is installed")
            if node and name:
                path = os.path.join(tmp, name.group(1))
                with open(path, "w") as f:
                    f.write(js_code.group(1).replace("http://127.0.0.1:8080", url))
                r = subprocess.run([node, path], capture_output=True, text=True, timeout=60)
                check(r.returncode == 0 and "[" in r.stdout,
                      f"node {name.group(1)}: exit {r.returncode}: {r.stderr[-500:]}")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    # The safetensors example, as printed, in a fresh empty directory; then attnd --models
    # models, and the request of its last comment.
    if st_code:
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run([sys.executable, "-c", st_code.group(1)], capture_output=True,
                               text=True, timeout=60, cwd=tmp)
            check(r.returncode == 0, f"the safetensors example in an empty directory: exit "
                  f"{r.returncode}: {r.stderr[-500:]}")
            want = re.search(r"# attnd --models (\S+), then POST /v1/attention (\{.*\})",
                             st_code.group(1))
            check(want is not None, "the safetensors example ends with its request")
            if r.returncode == 0 and want:
                proc, port = start_attnd(os.path.abspath(args.attnd),
                                         ["--models", os.path.join(tmp, want.group(1))],
                                         os.path.join(tmp, "attnd.log"), "readme_examples")
                try:
                    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/attention",
                                                 want.group(2).encode(),
                                                 {"Content-Type": "application/json"})
                    with urllib.request.urlopen(req, timeout=30) as resp:
                        body = json.load(resp)
                    check(body.get("model") == "cafe" and body.get("tokens") ==
                          ["我", "喜欢", "咖啡", "。"],
                          f"the model the example wrote answers its request: {body}")
                except (OSError, ValueError) as e:
                    check(False, f"the model the example wrote: {e}")
                finally:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(30)
    print(f"readme_examples: {check.summary()}")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
