"""tritonclient.http, as far as attnd's README and tests use it: an Open Inference Protocol
(KServe v2) REST client written from the protocol's documentation (the KServe v2 REST API, and
Triton's binary tensor data extension) and from tritonclient's documented Python API, for
machines without PyPI, where the real package cannot be installed.

What it sends is what tritonclient.http sends for the same calls:
- infer: POST v2/models/NAME[/versions/V]/infer with the JSON request {"id"?, "inputs",
  "outputs"?, "parameters"?} (compact JSON, keys in that order), each input {"name", "shape",
  "datatype"} plus "parameters": {"binary_data_size": n} and its raw little-endian bytes after
  the JSON (set_data_from_numpy(binary_data=True), the default) or "data": a flat row-major list
  (binary_data=False); no Content-Type; Inference-Header-Content-Length when any input is binary;
  with no outputs given, the parameter binary_data_output: true; outputs
  {"name", "parameters": {"binary_data": b}}; the caller's parameters merged into "parameters";
  Content-Encoding: gzip or deflate (zlib) for request_compression_algorithm, Accept-Encoding
  for response_compression_algorithm; priority (when not 0) and timeout (when not None) as the
  parameters "priority" and "timeout" (the schedule policy extension), sequence_id (when not 0)
  with sequence_start and sequence_end.
- the reply: the JSON, or with Inference-Header-Content-Length that many bytes of JSON and the
  outputs' raw bytes after it, in the order of the outputs; decoded by its Content-Encoding.
- errors: a status other than 200 raises InferenceServerException with the body's "error".
- health, metadata and the repository index: GET v2/health/live, v2/health/ready,
  v2/models/NAME[/versions/V]/ready (true when 200), GET v2, v2/models/NAME[/versions/V],
  POST v2/repository/index with an empty body.
- get_model_config: GET v2/models/NAME[/versions/V]/config (the model configuration
  extension); get_inference_statistics: GET v2/models/NAME[/versions/V]/stats, or
  v2/models/stats when no model is named (the statistics extension); each returns the JSON.

Not here: async calls, shared memory, BYTES and BF16 tensors, SSL, plugins (sequences are only
the three parameters above: Triton's client keeps no state of its own for them).
"""
import gzip
import http.client
import json
import zlib
from urllib.parse import quote

import numpy as np

_NP = {"FP32": np.float32, "FP64": np.float64, "FP16": np.float16, "INT8": np.int8,
       "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "UINT8": np.uint8,
       "BOOL": np.bool_}


def np_to_triton_dtype(dtype):
    for name, t in _NP.items():
        if np.dtype(t) == np.dtype(dtype):
            return name
    return None


def triton_to_np_dtype(name):
    return _NP.get(name)


class InferenceServerException(Exception):
    def __init__(self, msg, status=None):
        super().__init__(msg)
        self._msg, self._status = msg, status

    def message(self):
        return self._msg

    def status(self):
        return self._status


class InferInput:
    """An input tensor: name, shape, datatype, then its data from a numpy array."""

    def __init__(self, name, shape, datatype):
        self._name, self._shape, self._datatype = name, list(shape), datatype
        self._parameters, self._data, self._raw = {}, None, None

    def name(self):
        return self._name

    def datatype(self):
        return self._datatype

    def shape(self):
        return self._shape

    def set_data_from_numpy(self, input_tensor, binary_data=True):
        if not isinstance(input_tensor, np.ndarray):
            raise InferenceServerException("input_tensor must be a numpy array")
        if np_to_triton_dtype(input_tensor.dtype) != self._datatype:
            raise InferenceServerException(
                f"got unexpected datatype {np_to_triton_dtype(input_tensor.dtype)} from numpy "
                f"array, expected {self._datatype}")
        if list(input_tensor.shape) != self._shape:
            raise InferenceServerException(
                f"got unexpected numpy array shape {list(input_tensor.shape)}, expected "
                f"{self._shape}")
        if binary_data:
            self._data = None
            a = input_tensor.astype(input_tensor.dtype.newbyteorder("<"), copy=False)
            self._raw = np.ascontiguousarray(a).tobytes()
            self._parameters["binary_data_size"] = len(self._raw)
        else:
            self._parameters.pop("binary_data_size", None)
            self._raw = None
            self._data = [v.item() for v in input_tensor.flatten()]

    def _get_tensor(self):
        t = {"name": self._name, "shape": self._shape, "datatype": self._datatype}
        if self._parameters:
            t["parameters"] = self._parameters
        if self._raw is None and self._data is not None:
            t["data"] = self._data
        return t


class InferRequestedOutput:
    """An output to return: as raw bytes after the JSON (binary_data, the default) or as JSON."""

    def __init__(self, name, binary_data=True, class_count=0):
        self._name = name
        self._parameters = {"binary_data": binary_data}
        if class_count:
            self._parameters["classification"] = class_count

    def name(self):
        return self._name

    def _get_tensor(self):
        return {"name": self._name, "parameters": self._parameters}


class InferResult:
    """The reply of an inference: its JSON, and its outputs as numpy arrays."""

    def __init__(self, body, header_length, content_encoding=None):
        if content_encoding == "gzip":
            body = gzip.decompress(body)
        elif content_encoding == "deflate":
            body = zlib.decompress(body)
        n = len(body) if header_length is None else int(header_length)
        self._result = json.loads(body[:n])
        self._buffer = body[n:]
        self._at, at = {}, 0
        for o in self._result.get("outputs", []):
            size = o.get("parameters", {}).get("binary_data_size")
            if size is not None:
                self._at[o["name"]] = at
                at += size

    def as_numpy(self, name):
        for o in self._result.get("outputs", []):
            if o["name"] != name:
                continue
            dtype = np.dtype(triton_to_np_dtype(o["datatype"])).newbyteorder("<")
            size = o.get("parameters", {}).get("binary_data_size")
            if size is not None:
                start = self._at[name]
                a = np.frombuffer(self._buffer[start:start + size], dtype=dtype)
            else:
                a = np.array(o["data"], dtype=dtype)
            return a.reshape(o["shape"])
        return None

    def get_output(self, name):
        for o in self._result.get("outputs", []):
            if o["name"] == name:
                return o
        return None

    def get_response(self):
        return self._result


class InferenceServerClient:
    """A client of one server, url "host:port" (no scheme), over one keep-alive connection."""

    def __init__(self, url, verbose=False, connection_timeout=60.0, network_timeout=60.0):
        if url.startswith("http://") or url.startswith("https://"):
            raise InferenceServerException("url should not include the scheme")
        host, _, port = url.partition(":")
        self._host, self._port = host, int(port or 80)
        self._timeout = network_timeout
        self._verbose = verbose
        self._conn = None

    def close(self):
        if self._conn:
            self._conn.close()
            self._conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _request(self, method, uri, body=None, headers=None):
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self._host, self._port,
                                                        timeout=self._timeout)
            try:
                self._conn.request(method, "/" + uri, body, headers or {})
                r = self._conn.getresponse()
                data = r.read()
                hdrs = {k.lower(): v for k, v in r.getheaders()}
                if hdrs.get("connection", "").lower() == "close":
                    self.close()
                return r.status, hdrs, data
            except (http.client.HTTPException, ConnectionError):
                self.close()
                if attempt:
                    raise
        raise InferenceServerException("unreachable")

    @staticmethod
    def _raise(status, data):
        if status != 200:
            try:
                msg = json.loads(data)["error"]
            except (ValueError, KeyError, TypeError):
                msg = data.decode("utf-8", "replace")
            raise InferenceServerException(msg, str(status))

    def _get_json(self, uri):
        status, _, data = self._request("GET", uri)
        self._raise(status, data)
        return json.loads(data)

    @staticmethod
    def _model_uri(model_name, model_version, suffix=""):
        uri = "v2/models/" + quote(model_name)
        if model_version:
            uri += "/versions/" + model_version
        return uri + suffix

    def is_server_live(self):
        return self._request("GET", "v2/health/live")[0] == 200

    def is_server_ready(self):
        return self._request("GET", "v2/health/ready")[0] == 200

    def is_model_ready(self, model_name, model_version=""):
        return self._request("GET", self._model_uri(model_name, model_version, "/ready"))[0] == 200

    def get_server_metadata(self):
        return self._get_json("v2")

    def get_model_metadata(self, model_name, model_version=""):
        return self._get_json(self._model_uri(model_name, model_version))

    def get_model_config(self, model_name, model_version="", headers=None, query_params=None):
        return self._get_json(self._model_uri(model_name, model_version, "/config"))

    def get_inference_statistics(self, model_name="", model_version="", headers=None,
                                 query_params=None):
        if model_name == "":
            return self._get_json("v2/models/stats")
        return self._get_json(self._model_uri(model_name, model_version, "/stats"))

    def get_model_repository_index(self):
        status, _, data = self._request("POST", "v2/repository/index", b"")
        self._raise(status, data)
        return json.loads(data)

    def infer(self, model_name, inputs, model_version="", outputs=None, request_id="",
              sequence_id=0, sequence_start=False, sequence_end=False, priority=0, timeout=None,
              headers=None, query_params=None, request_compression_algorithm=None,
              response_compression_algorithm=None, parameters=None):
        request, parms = {}, {}
        if request_id != "":
            request["id"] = request_id
        if sequence_id != 0 and sequence_id != "":
            parms["sequence_id"] = sequence_id
            parms["sequence_start"] = sequence_start
            parms["sequence_end"] = sequence_end
        if priority != 0:
            parms["priority"] = priority
        if timeout is not None:
            parms["timeout"] = timeout
        request["inputs"] = [i._get_tensor() for i in inputs]
        if outputs:
            request["outputs"] = [o._get_tensor() for o in outputs]
        else:
            parms["binary_data_output"] = True
        for key, value in (parameters or {}).items():
            if key in ("sequence_id", "sequence_start", "sequence_end", "priority",
                       "binary_data_output"):
                raise InferenceServerException(
                    f'Parameter "{key}" is a reserved parameter and cannot be specified.')
            parms[key] = value
        if parms:
            request["parameters"] = parms
        text = json.dumps(request, separators=(",", ":"))
        raw = [i._raw for i in inputs if i._raw is not None]
        body = text.encode() + b"".join(raw)
        hdrs = dict(headers or {})
        if raw:
            hdrs["Inference-Header-Content-Length"] = str(len(text))
        if request_compression_algorithm == "gzip":
            hdrs["Content-Encoding"] = "gzip"
            body = gzip.compress(body)
        elif request_compression_algorithm == "deflate":
            hdrs["Content-Encoding"] = "deflate"
            body = zlib.compress(body)
        if response_compression_algorithm in ("gzip", "deflate"):
            hdrs["Accept-Encoding"] = response_compression_algorithm
        status, rh, data = self._request(
            "POST", self._model_uri(model_name, model_version, "/infer"), body, hdrs)
        if status != 200 and rh.get("content-encoding") == "gzip":
            data = gzip.decompress(data)
        self._raise(status, data)
        return InferResult(data, rh.get("inference-header-content-length"),
                           rh.get("content-encoding"))


__all__ = ["InferenceServerClient", "InferInput", "InferRequestedOutput", "InferResult",
           "InferenceServerException", "np_to_triton_dtype", "triton_to_np_dtype"]
