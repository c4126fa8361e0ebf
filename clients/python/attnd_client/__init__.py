"""attnd_client - a client of attnd, the multi-head attention service: numpy arrays in and out.

    import numpy as np
    from attnd_client import Client, AttndError

    client = Client("http://127.0.0.1:8080")  # api_key=..., timeout=60, retries=3
    x = np.random.default_rng(0).standard_normal((2, 16, 64), dtype=np.float32)  # (N, L, E)
    r = client.attention(x, causal=True, need_weights="per_head")   # model "demo", the default
    r.output, r.weights                                 # (2, 16, 64), (2, 4, 16, 16) float32
    r = client.attention(model="lesson", text="张工把配置文件发给测试同学，因为它包含新的开关。",
                         need_weights="per_head")        # r.tokens: 〈s〉, then the words
    r = client.sdpa(q, k, v, causal=True, need_weights=True)
    out = client.infer("demo", {"query": x}, parameters={"causal": True})["output"]
    try:
        client.attention(np.zeros((3, 5)))
    except AttndError as e:
        e.status, e.code, e.message, e.field    # 400 invalid_field "query has width 5, ..." query

Tensors go out as little-endian float32 in base64 (v1) or raw bytes (v2), whatever the array's
dtype and byte order, and come back as numpy arrays in the host's order; every field of the API
(api/openapi.yaml) is a keyword argument. A 503 is retried after its Retry-After (``retries``
times), other errors are raised at once as AttndError. ``client.open_session(model="demo")``
opens a decode session whose ``append(rows)`` answers the new rows alone (Session). The
standard library and numpy are all it needs.
"""

from .client import Client, InferResult, Result, Session
from .errors import AttndError

__all__ = ["Client", "AttndError", "Result", "InferResult", "Session"]
__version__ = "1.0.0"
