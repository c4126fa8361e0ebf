"""client.py - Client: attnd's API v1 and Open Inference Protocol calls over HTTP (urllib), with
attnd's errors raised as AttndError and a 503 retried after its Retry-After."""

import email.utils
import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request

from . import tensors
from .errors import AttndError


class Result(dict):
    """A reply of /v1/attention or /v1/sdpa: its JSON as a dict whose tensors are numpy arrays
    (``output``, ``weights``, the ``trace`` members, top-k's ``indices`` (int32) and
    ``values``). Keys read as attributes too: ``r.output`` is ``r["output"]``."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Session:
    """A decode session (``POST /v1/sessions``): keys and values kept on the server, rows
    appended one or a few at a time, each answered alone. Made by ``Client.open_session``; a
    context manager that ends the session (``DELETE``) on leaving.

    ``id``, ``info`` (the session's JSON as last seen: ``length``, ``max_length``, ``bytes``,
    ``expires_in_s``, ...) and ``length`` (the rows the session holds, as this client knows it).
    Every append sends ``expected_length`` (the length it expects the session to have), so a
    503 retried after a lost answer never appends twice: the server answers 409
    ``length_mismatch`` instead. A session lives on the server that opened it and ends when that
    server stops or the session is idle past its TTL: then AttndError 404 ``session_unknown``,
    and the client opens a new session and appends the prefix again.
    """

    def __init__(self, client, info):
        self.client, self.info, self.id = client, info, info["id"]
        self.length = info.get("length", 0)
        self._path = "/v1/sessions/" + urllib.parse.quote(self.id, safe="")

    def append(self, query=None, key=None, value=None, **options):
        """``POST /v1/sessions/{id}``: appends rows and returns their outputs.

        Args:
            query: (L, E) new rows (or (1, L, E)); leave it out to send ``tokens=`` or
                ``text=`` to a model with a vocabulary (words after those already appended).
            key, value: (L, kdim), (L, vdim) when the session's model has other key or value
                widths.
            **options: ``need_weights``, ``heads``, ``weights_top_k``, ``trace``, ``outputs``,
                ``encoding``, ``expected_length`` (default: ``self.length``), as
                api/openapi.yaml names them.

        Returns:
            Result: ``output`` (L, E), ``weights`` over every key so far when asked, ``length``
            (the session's rows after this append), ``usage``.
        """
        fields = {"query": query, "key": key, "value": value, **options}
        fields.setdefault("expected_length", self.length)
        r = self.client._compute(self._path, fields)
        self.length = r.get("length", self.length)
        return r

    def get(self):
        """``GET /v1/sessions/{id}``: the session's JSON (also kept in ``info``)."""
        self.info = json.loads(self.client._request("GET", self._path)[2])
        self.length = self.info.get("length", self.length)
        return self.info

    def close(self):
        """``DELETE /v1/sessions/{id}``: ends the session and frees its memory at once; a
        session already gone (404) is not an error."""
        try:
            self.client._request("DELETE", self._path)
        except AttndError as e:
            if e.status != 404:
                raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class InferResult(dict):
    """A reply of the Open Inference Protocol's infer: {output name: numpy array}
    (``output``, ``weights`` float32; ``weights_indices`` int32), and ``response``, the reply's
    JSON (``model_name``, ``parameters`` with flops and times, ``outputs`` as listed)."""

    def __init__(self, arrays, response):
        super().__init__(arrays)
        self.response = response


def _retry_after(value):
    """Retry-After's seconds (a number, or an HTTP date), or 1 when missing or unreadable."""
    if value is None:
        return 1.0
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return 1.0


class Client:
    """A client of one attnd server.

    Args:
        url: the server's base URL, e.g. ``"http://127.0.0.1:8080"`` (a missing ``http://`` is
            added).
        api_key: sent as ``Authorization: Bearer <key>`` when the server requires one.
        timeout: seconds to wait for each answer (connect and read).
        retries: how many times a 503 (queue full, draining, memory or reply budget, ...) is
            sent again, each after the Retry-After it came with plus a random part of up to
            half of it (so that clients refused together do not return together). Other
            errors are raised at once. 0 never retries.

    Every call raises AttndError for an error answer, OSError (``urllib.error.URLError``,
    ``TimeoutError``) when the server cannot be reached, and ValueError for what cannot be
    sent (NaN in a JSON field; a mask of 2 in an inference input). ``open_session`` opens a
    decode session (Session).
    """

    def __init__(self, url="http://127.0.0.1:8080", api_key=None, timeout=60.0, retries=3):
        if "://" not in url:
            url = "http://" + url
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries

    # ---- API v1 ---------------------------------------------------------------------------

    def attention(self, query=None, key=None, value=None, **options):
        """``POST /v1/attention``: multi-head attention as ``nn.MultiheadAttention`` computes it.

        Args:
            query: (L, E) or (N, L, E) (a numpy array, a torch tensor or nested lists); leave
                it out to send ``text=`` or ``tokens=`` to a model with a vocabulary.
            key, value: (S, kdim), (S, vdim) or with N; default the query, then the key.
            **options: any field of the request, as api/openapi.yaml names it: ``model``,
                ``params`` (a state_dict's tensors are sent as they are), ``text``,
                ``tokens``, ``causal``, ``key_lengths``, ``key_mask``, ``attn_mask``,
                ``attn_bias`` (``-inf`` as a float, or ``"-inf"`` in lists),
                ``need_weights``, ``heads``, ``weights_top_k``, ``trace``, PyTorch's
                ``batch_first``, ``key_padding_mask``, ``torch_attn_mask``, ``is_causal``,
                ``average_attn_weights``, ... None leaves a field out.

        Tensors (query, key, value and the masks) are sent as little-endian float32 in base64
        whatever their dtype and byte order, and the reply is asked for in base64
        (``encoding="json"`` keeps JSON lists).

        Returns:
            Result: ``output`` (N, L, E) or (L, E), ``weights`` when asked, ``model``,
            ``tokens`` and ``head_names`` (with text or tokens), ``shape``, ``usage``, ...

        Example: ``client.attention(model="lesson", text="程序员把服务器日志发给同事。",
        need_weights="per_head").weights`` is (4, L, L), L counting the start token.
        """
        fields = {"query": query, "key": key, "value": value, **options}
        return self._compute("/v1/attention", fields)

    def sdpa(self, q, k, v, **options):
        """``POST /v1/sdpa``: scaled dot-product attention, softmax(scale · q kᵀ + masks) v.

        Args:
            q, k, v: (..., L, D), (..., S, D), (..., S, Dv), where ... is nothing, (H) or (N, H).
            **options: ``scale``, ``causal``, ``is_causal``, ``key_lengths``, ``key_mask``,
                ``attn_mask``, ``attn_bias``, ``need_weights``, ``weights_top_k``, ``trace``,
                ``encoding``, as api/openapi.yaml names them.

        Returns:
            Result: ``output`` (..., L, Dv), ``weights`` (..., L, S) when asked, ``usage``.
        """
        return self._compute("/v1/sdpa", {"q": q, "k": k, "v": v, **options})

    def open_session(self, model=None, params=None, **options):
        """``POST /v1/sessions``: opens a decode session.

        Args:
            model: a registry model (``demo``, ``lesson``, a ``--models`` file), or None with
                ``params``.
            params: inline weights as for ``attention`` (with ``num_heads``; ``init`` with
                ``embed_dim=``).
            **options: ``max_length``, ``embed_dim``, and the other fields of
                api/openapi.yaml's SessionOpenRequest.

        Returns:
            Session, empty (``length`` 0). Example::

                with client.open_session(model="demo", max_length=64) as s:
                    for row in x:                      # x (T, E)
                        out = s.append(row[None, :]).output   # (1, E): row t of the causal call
        """
        fields = {"model": model, "params": params, **options}
        body = tensors.dumps(tensors.v1_body(fields))
        reply = self._request("POST", "/v1/sessions", body,
                              {"Content-Type": "application/json"})[2]
        return Session(self, json.loads(reply))

    def models(self):
        """``GET /v1/models``: ``{"default": name, "models": [{"name", "embed_dim",
        "num_heads", "vocab_size", "head_names", ...}]}``."""
        return json.loads(self._request("GET", "/v1/models")[2])

    def model(self, name):
        """``GET /v1/models/{name}``: one model's description, with its vocabulary (in id
        order) and its head names."""
        path = "/v1/models/" + urllib.parse.quote(name, safe="")
        return json.loads(self._request("GET", path)[2])

    def ready(self):
        """Whether ``GET /readyz`` answers 200 (False while the server starts or drains);
        never retried."""
        try:
            self._request("GET", "/readyz", retries=0)
            return True
        except AttndError:
            return False

    # ---- The Open Inference Protocol (KServe v2) ------------------------------------------

    def infer(self, model, inputs, parameters=None, outputs=None):
        """``POST /v2/models/{model}/infer`` with the binary tensor data extension: the inputs'
        raw little-endian bytes after the JSON, and the outputs' back the same way.

        Args:
            model: a registry model (``demo``, ``lesson``, a ``--models`` file) or ``sdpa``.
            inputs: {name: array}: ``query`` (N, L, E) or (L, E), ``key``, ``value`` (for
                ``sdpa``: ``q``, ``k``, ``v``), ``key_lengths`` (sent as INT32), ``key_mask``
                (BOOL when boolean, else INT32), ``attn_mask`` (BOOL), ``attn_bias``; the
                rest FP32.
            parameters: ``causal``, ``need_weights``, ``heads`` (a string, "0,2"),
                ``weights_top_k``, ``scale``, ``priority``, ``timeout``.
            outputs: the names to return, in order (``output``, ``weights``,
                ``weights_indices``); default all that the parameters make.

        Returns:
            InferResult: {name: numpy array}, and ``.response``, the reply's JSON.
        """
        heads, raws = [], []
        for name, x in inputs.items():
            head, raw = tensors.v2_input(name, x)
            heads.append(head)
            raws.append(raw)
        request = {"inputs": heads,
                   "parameters": {**(parameters or {}), "binary_data_output": True}}
        if outputs:
            request["outputs"] = [{"name": o, "parameters": {"binary_data": True}}
                                  for o in outputs]
        js = tensors.dumps(request)
        path = "/v2/models/" + urllib.parse.quote(model, safe="") + "/infer"
        status, headers, body = self._request(
            "POST", path, js + b"".join(raws),
            {"Content-Type": "application/octet-stream",
             "Inference-Header-Content-Length": str(len(js))})
        n = int(headers.get("Inference-Header-Content-Length") or len(body))
        response = json.loads(body[:n])
        return InferResult(tensors.v2_outputs(response, body[n:]), response)

    # ---- HTTP -------------------------------------------------------------------------------

    def _compute(self, path, fields):
        fields.setdefault("encoding", "base64")
        body = tensors.dumps(tensors.v1_body(fields))
        reply = self._request("POST", path, body, {"Content-Type": "application/json"})[2]
        return Result(tensors.decode_tree(json.loads(reply)))

    def _request(self, method, path, body=None, headers=None, retries=None):
        """(status, headers, body bytes) of a 2xx answer; a 503 is sent again up to retries
        times (default self.retries) after its Retry-After; other errors raise AttndError."""
        retries = self.retries if retries is None else retries
        headers = {"Accept": "application/json", **(headers or {})}
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        attempt = 0
        while True:
            req = urllib.request.Request(self.url + path, body, headers, method=method)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as r:
                    return r.status, r.headers, r.read()
            except urllib.error.HTTPError as e:
                wait = _retry_after(e.headers.get("Retry-After")) if e.code == 503 else None
                err = AttndError.from_body(e.code, e.read(), wait)
                e.close()
                if e.code != 503 or attempt >= retries:
                    raise err from None
            attempt += 1
            time.sleep(wait * (1 + random.random() / 2))
