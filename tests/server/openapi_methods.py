#!/usr/bin/python3
"""openapi_methods.py - api/openapi.yaml against a live attnd: every route answers every method
(GET, HEAD, POST, OPTIONS, and OPTIONS as a CORS preflight from an allowed and a foreign origin)
with a status the description lists for that method, or, for a method the description does not
list, with 405 and an Allow header; an error's JSON body has the shape documented for its status
(v1's error object, or under /v2 the protocol's {"error": "..."}, a refused CORS preflight
included); HEAD answers carry no body; and the body of GET /openapi.yaml,
parsed as YAML (as a client that reads the description's media type does), matches the schema
the description gives it (its type and required members); and the examples of GET /v1/models and
GET /v1/models/{name} give the built-in models as the server does (every member an example shows
equal to the live answer's, an example's vocabulary ending in '...' as a prefix of the live one).

Usage: openapi_methods.py --attnd build/attnd --openapi api/openapi.yaml
Prints one line per failed check and "N passed, N failed"; exits 1 on any failure.
"""

import argparse
import http.client
import json
import os
import signal
import sys
import tempfile

import yaml

from harness import Checks, start_attnd

ORIGIN = "http://allowed.example"
check = Checks()


def request(port, method, path, headers=None, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data


def matches(value, schema):
    """The schema's type, required members and member types, as far as they are given."""
    types = schema.get("type")
    types = [types] if isinstance(types, str) else types or []
    py = {"object": dict, "string": str, "array": list, "integer": int, "number": (int, float),
          "boolean": bool, "null": type(None)}
    if types and not any(isinstance(value, py[t]) for t in types):
        return False
    if isinstance(value, dict):
        if any(k not in value for k in schema.get("required", [])):
            return False
        for k, sub in schema.get("properties", {}).items():
            if k in value and not matches(value[k], sub):
                return False
    return True


def resolve(spec, node):
    """node with its $ref (a local "#/..." pointer) followed, as often as it has one."""
    while isinstance(node, dict) and "$ref" in node:
        at = spec
        for part in node["$ref"].lstrip("#/").split("/"):
            at = at[part]
        node = at
    return node


def body_schema(spec, op, status):
    """The JSON schema the description gives op's answer with status, or None."""
    resp = resolve(spec, op.get("responses", {}).get(status))
    schema = ((resp or {}).get("content") or {}).get("application/json", {}).get("schema")
    return resolve(spec, schema) if schema else None


def check_path(spec, port, path, item):
    """Every method on path answers as item (its OpenAPI path item) documents."""
    sends = [
        ("GET", "get", {}, None),
        ("HEAD", "head", {}, None),
        ("POST", "post", {"Content-Type": "application/json"}, b"{}"),
        ("OPTIONS", "options", {}, None),
        ("OPTIONS", "options", {"Origin": ORIGIN,
                                "Access-Control-Request-Method": "POST"}, None),
        ("OPTIONS", "options", {"Origin": "http://foreign.example",
                                "Access-Control-Request-Method": "GET"}, None),
    ]
    for method, key, headers, body in sends:
        status, hdrs, data = request(port, method, path, headers, body)
        what = f"{method} {path}" + (f" (Origin {headers['Origin']})"
                                     if "Origin" in headers else "")
        op = item.get(key)
        if op is None:
            check(status == 405 and "allow" in hdrs,
                  f"{what}: {status}; the description lists no {key}, so 405 with "
                  f"Allow was expected")
            continue
        documented = {str(k) for k in op.get("responses", {})}
        check(str(status) in documented,
              f"{what}: {status}, not among the documented {sorted(documented)}")
        if method == "HEAD":
            check(data == b"", f"{what}: a body of {len(data)} bytes")
        # An error's body has the shape its status documents: v1's {"error": {code, ...}}, or
        # under /v2 the protocol's {"error": "..."} (a refused CORS preflight included).
        schema = body_schema(spec, op, str(status)) if status >= 400 else None
        if schema and method != "HEAD":
            try:
                value = json.loads(data)
            except ValueError:
                value = None
            check(value is not None and matches(value, schema),
                  f"{what}: {status} with the body {data[:120]!r}, which its documented "
                  f"schema does not accept")


def check_model_examples(spec, port):
    """The built-in models in the examples of GET /v1/models and GET /v1/models/lesson against the
    live answers: each member an example gives equals the server's (a vocabulary ending in '...'
    is a prefix of the server's)."""
    def same(where, example, live):
        for k, want in example.items():
            got = live.get(k)
            if k == "vocab" and isinstance(want, list) and want and want[-1] == "...":
                ok = isinstance(got, list) and got[:len(want) - 1] == want[:-1]
            else:
                ok = got == want
            check(ok, f"{where}: the example's {k} is {want!r}, the server answers {got!r}")

    status, _, data = request(port, "GET", "/v1/models")
    live = {m["name"]: m for m in json.loads(data)["models"]} if status == 200 else {}
    example = spec["paths"]["/v1/models"]["get"]["responses"]["200"]["content"][
        "application/json"]["example"]
    check(example["default"] == (json.loads(data).get("default") if status == 200 else None),
          "GET /v1/models: the example's default is not the server's")
    for m in example["models"]:
        check(m["name"] in live, f"GET /v1/models: the example's {m['name']} is not served")
        same(f"GET /v1/models, {m['name']}", m, live.get(m["name"], {}))
    status, _, data = request(port, "GET", "/v1/models/lesson")
    example = spec["paths"]["/v1/models/{name}"]["get"]["responses"]["200"]["content"][
        "application/json"]["example"]
    same("GET /v1/models/lesson", example, json.loads(data) if status == 200 else {})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnd", required=True)
    ap.add_argument("--openapi", required=True)
    args = ap.parse_args()
    with open(args.openapi) as f:
        spec = yaml.safe_load(f)
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_attnd(os.path.abspath(args.attnd), ["--cors-origins", ORIGIN],
                                  os.path.join(tmp, "attnd.log"), "openapi_methods")
        try:
            for template, item in spec["paths"].items():
                # A templated path is sent with a model that exists (its 404 is checked too).
                # and a {version} as version 1, the one every model has.
                for path in ([template.replace("{name}", "lesson").replace("{version}", "1"),
                              template.replace("{name}", "no-such-model").replace("{version}",
                                                                                  "1")]
                             if "{name}" in template else [template]):
                    check_path(spec, port, path, item)
            check_model_examples(spec, port)
            # /openapi.yaml, read as its media type says: YAML, parsed.
            status, hdrs, data = request(port, "GET", "/openapi.yaml")
            media = spec["paths"]["/openapi.yaml"]["get"]["responses"]["200"]["content"]
            ctype = hdrs.get("content-type", "").split(";")[0].strip()
            check(ctype in media, f"/openapi.yaml is served as {ctype}, not one of {list(media)}")
            schema = media.get(ctype, {}).get("schema", {})
            parsed = yaml.safe_load(data)
            check(status == 200 and matches(parsed, schema),
                  f"/openapi.yaml parsed as YAML is a {type(parsed).__name__}, which its schema "
                  f"{schema} does not accept")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    print(f"openapi_methods: {check.summary()}")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
