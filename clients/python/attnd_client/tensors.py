"""tensors.py - arrays to attnd's bytes and back: API v1's binary tensor objects
({"dtype", "shape", "data": base64}) and the Open Inference Protocol's raw tensors, always
little-endian whatever the host's byte order, and JSON for everything else.
"""

import base64
import json

import numpy as np

# The fields of API v1 requests that hold float32 tensors (masks as 0.0 and 1.0): these are sent
# as binary tensors. Other fields (key_lengths, heads, ...) are sent as JSON.
V1_TENSORS = frozenset({"query", "key", "value", "q", "k", "v", "key_mask", "attn_mask",
                        "attn_bias", "key_padding_mask", "torch_attn_mask"})

# The Open Inference Protocol's datatypes, as little-endian numpy types.
V2_DTYPES = {"FP32": np.dtype("<f4"), "INT32": np.dtype("<i4"), "BOOL": np.dtype("u1")}


def as_array(x):
    """x (a numpy array, a torch tensor, or nested lists, where the string "-inf" is minus
    infinity) as a numpy array; torch tensors are detached and copied to the CPU first."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor, without importing torch
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.dtype.kind in "US":  # lists holding "-inf"
        a = a.astype(np.float64)
    return a


def to_binary(x):
    """x as an API v1 binary tensor: float32, little-endian, row-major, base64 (RFC 4648, one
    line). Booleans become 0.0 and 1.0."""
    a = np.ascontiguousarray(as_array(x), dtype="<f4")
    return {"dtype": "float32", "shape": list(a.shape), "data": base64.b64encode(a).decode()}


def is_binary(obj):
    return isinstance(obj, dict) and set(obj) == {"dtype", "shape", "data"} and \
        isinstance(obj["data"], str)


def from_binary(t):
    """An API v1 binary tensor (float32 or int32) as a new, writable numpy array in the host's
    byte order."""
    dtype = {"float32": "<f4", "int32": "<i4"}[t["dtype"]]
    a = np.frombuffer(base64.b64decode(t["data"]), dtype)
    return a.astype(a.dtype.newbyteorder("=")).reshape(t["shape"])


def decode_tree(obj):
    """obj (a reply's JSON) with every binary tensor object in it replaced by its array."""
    if is_binary(obj):
        return from_binary(obj)
    if isinstance(obj, dict):
        return {k: decode_tree(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode_tree(v) for v in obj]
    return obj


def _json_default(x):
    """What json.dumps cannot write itself: numpy scalars and arrays, torch tensors."""
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray) or hasattr(x, "detach"):
        return as_array(x).tolist()
    raise TypeError(f"{type(x).__name__} is not JSON serializable")


def dumps(body):
    """body as compact UTF-8 JSON; NaN and infinities outside binary tensors are refused here
    (ValueError), since JSON has no words for them."""
    return json.dumps(body, allow_nan=False, ensure_ascii=False, separators=(",", ":"),
                      default=_json_default).encode()


def v1_body(fields):
    """The JSON body of a /v1 request: fields with None left out, tensors as binary tensors
    (params' tensors too, so a torch state_dict can be sent as it is)."""
    body = {}
    for name, value in fields.items():
        if value is None:
            continue
        if name in V1_TENSORS and not is_binary(value):
            value = to_binary(value)
        elif name == "params" and isinstance(value, dict):
            value = {k: (to_binary(v) if isinstance(v, (list, np.ndarray)) or hasattr(v, "detach")
                         else v) for k, v in value.items()}
        body[name] = value
    return body


def v2_input(name, x):
    """An inference input (name, array) as (its JSON, its raw bytes): INT32 for key_lengths,
    BOOL for attn_mask, BOOL for a boolean key_mask (else INT32), FP32 for the rest. Values the
    datatype cannot hold exactly (key_lengths of 1.5, a mask of 2) raise ValueError."""
    a = as_array(x)
    if name == "key_lengths" or (name == "key_mask" and a.dtype != bool):
        datatype = "INT32"
    elif name in ("attn_mask", "key_mask"):
        datatype = "BOOL"
    else:
        datatype = "FP32"
    with np.errstate(invalid="ignore"):  # an overflow is reported below
        b = np.ascontiguousarray(a, dtype=V2_DTYPES[datatype])
    if datatype == "BOOL" and not np.isin(a, (0, 1)).all() or \
            datatype == "INT32" and not np.array_equal(b, a):
        raise ValueError(f"{name} must hold {'0 and 1' if datatype == 'BOOL' else 'integers'}")
    raw = b.tobytes()
    head = {"name": name, "shape": list(b.shape), "datatype": datatype,
            "parameters": {"binary_data_size": len(raw)}}
    return head, raw


def v2_outputs(head, tail):
    """The outputs of an inference reply ({name: array}): from the raw bytes after its JSON
    (tail), in the order listed, or from their JSON data."""
    out, pos = {}, 0
    for o in head.get("outputs", []):
        dtype = V2_DTYPES[o["datatype"]]
        size = (o.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            a = np.frombuffer(tail[pos:pos + size], dtype)
            pos += size
        else:
            a = np.asarray(o.get("data", []), dtype)
        out[o["name"]] = a.astype(a.dtype.newbyteorder("=")).reshape(o["shape"])
    return out
