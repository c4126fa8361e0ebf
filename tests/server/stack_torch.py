#!/usr/bin/python3
"""stack_torch.py - models of layers through a live attnd against the PyTorch module they were
saved from (api/induction/train_induction.py's AttnOnly, Debian's python3-torch):

- the whole forward within 1e-5 (the final residual stream, every layer's per-head weights, the
  logits through predictions of every token) on the built-in induction model, loaded in torch
  from api/induction/induction.safetensors, and on random models written here: 1 to 3 layers,
  with and without a LayerNorm before each attention, a final norm, an unembedding and its bias,
  causal by their metadata or not; sent as tokens, as text and as query embeddings (N = 2, with
  key_lengths), in JSON and base64;
- the reply's fields and their selection: "layers" (order kept), "heads", mean weights, top-k
  weights, predict_top_k and its probabilities, "outputs", the trace per layer (its weights
  those of the weights, residual[l + 1] = residual[l] + attn_output[l], output the last sum),
  num_layers and layers, and the same bits whatever is selected;
- the scores: on sequences made here (random words, then the same words again), each head's
  previous-token and induction score computed from the weights attnd returns, with
  TransformerLens's head_detector patterns (written again here, not taken from the script),
  against GET /v1/models' head_scores, and the goals (a layer-0 head's previous-token score and a layer-1 head's
  induction score at least 0.8, top-1 accuracy at least 0.9 on the repeated half).

Usage: stack_torch.py --attnd build/attnd. Exits non-zero on any failure.
"""
import argparse
import base64
import json
import os
import signal
import sys
import tempfile
import urllib.error
import urllib.request

import numpy as np
import torch

from harness import Checks, start_attnd

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "api", "induction"))
import train_induction as ti  # noqa: E402  (the module, the file's writer and reader)

check = Checks()
TOL = 1e-5


def post(port, body, path="/v1/attention"):
    """(status, reply) of a JSON body."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return json.load(r)


def arr(t):
    """An API tensor (nested lists or a binary object) as a numpy array."""
    if isinstance(t, dict):
        dt = "<i4" if t["dtype"] == "int32" else "<f4"
        return np.frombuffer(base64.b64decode(t["data"]), dt).reshape(t["shape"])
    return np.array(t, dtype=np.float64)


def b64(a):
    a = np.ascontiguousarray(a, "<f4")
    return {"dtype": "float32", "shape": list(a.shape), "data": base64.b64encode(a).decode()}


def err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max()) if a.shape == b.shape else float("inf")


def torch_forward(model, x, causal, lengths=None):
    """The module's layers on the stream x (N, L, E): (out, logits or None, [weights (N, H, L, L)
    per layer]), key_lengths as PyTorch's key_padding_mask."""
    n, l, _ = x.shape
    mask = torch.triu(torch.ones(l, l, dtype=torch.bool), 1) if causal else None
    kpm = None
    if lengths is not None:
        kpm = torch.arange(l)[None, :] >= torch.tensor(lengths)[:, None]
    maps = []
    with torch.no_grad():
        for layer in model.layers:
            y = layer.norm1(x) if layer.norm1 is not None else x
            a, w = layer.self_attn(y, y, y, attn_mask=mask, key_padding_mask=kpm,
                                   need_weights=True, average_attn_weights=False)
            x = x + a
            maps.append(w)
        y = model.norm(x) if model.norm is not None else x
        logits = model.lm_head(y) if model.lm_head is not None else None
    return x, logits, maps


def full_logits(pred, v):
    """The logits of every token, scattered back from predictions of all V ids."""
    ids, lg = arr(pred["ids"]).astype(int), arr(pred["logits"])
    out = np.zeros(ids.shape[:-1] + (v,))
    np.put_along_axis(out, ids, lg, axis=-1)
    return out


# ---- Models ---------------------------------------------------------------------------------------


def random_model(seed, layers, norm, final_norm, unembed, unembed_bias, e=32, h=4, v=20, p=24):
    """A random AttnOnly (its attention sharpened so that its maps are not flat) and its vocab."""
    torch.manual_seed(seed)
    AttnOnly = ti.torch_module()
    m = AttnOnly(vocab=v, positions=p, e=e, h=h, layers=layers, norm=norm, final_norm=final_norm,
                 unembed=unembed, unembed_bias=unembed_bias)
    with torch.no_grad():
        for layer in m.layers:
            layer.self_attn.in_proj_weight.mul_(3.0)
            layer.self_attn.in_proj_bias.normal_(0, 0.1)
            layer.self_attn.out_proj.bias.normal_(0, 0.1)
            if layer.norm1 is not None:
                layer.norm1.weight.normal_(1, 0.2)
                layer.norm1.bias.normal_(0, 0.2)
        if m.norm is not None:
            m.norm.weight.normal_(1, 0.2)
            m.norm.bias.normal_(0, 0.2)
    return m.eval(), [f"w{i}" for i in range(v)]


CONFIGS = [  # (layers, norm, final norm, unembedding, its bias, causal)
    (1, False, False, True, False, True), (1, True, True, True, True, False),
    (2, False, False, False, False, True), (2, True, False, True, False, True),
    (2, True, True, True, True, False), (3, False, False, True, True, True),
    (3, True, True, False, False, True), (3, True, True, True, False, False)]


def write_models(folder):
    """The random models as files in folder: [(name, module, vocab, causal)]."""
    out = []
    for i, (layers, norm, fnorm, unembed, ubias, causal) in enumerate(CONFIGS):
        m, vocab = random_model(100 + i, layers, norm, fnorm, unembed, ubias)
        meta = {"num_heads": "4", "vocab": json.dumps(vocab), "start_token": "w0",
                "causal": "true" if causal else "false"}
        if norm or fnorm:
            meta["layer_norm_eps"] = "1e-05"
        name = f"stack{i}"
        ti.write_safetensors(os.path.join(folder, name + ".safetensors"),
                             ti.state_dict_arrays(m), meta)
        out.append((name, m, vocab, causal))
    return out


# ---- The forward against torch --------------------------------------------------------------------


def check_forward(port, name, model, vocab, causal, rng):
    """Tokens (JSON and base64), text and query embeddings through attnd against the module."""
    v = len(vocab)
    unembed = model.lm_head is not None
    ids = np.concatenate([[0], rng.integers(1, v, size=11)])
    x0 = (model.token_embeddings[torch.from_numpy(ids)] +
          model.position_embeddings[:len(ids)]).detach()[None]
    out, logits, maps = torch_forward(model, x0, causal)
    for enc in ("json", "base64"):
        body = {"model": name, "tokens": [vocab[i] for i in ids[1:]], "need_weights": "per_head",
                "encoding": enc}
        if unembed:
            body["predict_top_k"] = v
        st, r = post(port, body)
        if not check(st == 200, f"{name} tokens ({enc}): {st} {r}"):
            continue
        w = arr(r["weights"])  # (Ls, H, L, L)
        e_out = err(arr(r["output"]), out[0])
        e_w = max(err(w[li], maps[li][0]) for li in range(len(maps)))
        check(r["num_layers"] == len(maps) and r["layers"] == list(range(len(maps))),
              f"{name}: num_layers and layers {r.get('num_layers')} {r.get('layers')}")
        check(e_out <= TOL * max(1.0, float(out.abs().max())) and e_w <= TOL,
              f"{name} tokens ({enc}): output off by {e_out:.2e}, weights by {e_w:.2e}")
        if unembed:
            lg = full_logits(r["predictions"], v)
            e_l = err(lg, logits[0])
            p = torch.softmax(logits[0].double(), -1).numpy()
            ids_k = arr(r["predictions"]["ids"]).astype(int)
            e_p = err(arr(r["predictions"]["probs"]), np.take_along_axis(p, ids_k, -1))
            check(e_l <= TOL * max(1.0, float(logits.abs().max())) and e_p <= TOL,
                  f"{name} ({enc}): logits off by {e_l:.2e}, probabilities by {e_p:.2e}")
            toks = r["predictions"]["tokens"]
            check(all(toks[i][j] == vocab[ids_k[i][j]] for i in range(len(toks))
                      for j in range(v)), f"{name}: prediction tokens against ids")
        else:
            check("predictions" not in r, f"{name}: predictions without an unembedding")
    # text: the same words, split by the vocabulary
    st, r = post(port, {"model": name, "text": " ".join(vocab[i] for i in ids[1:]),
                        "encoding": "base64"})
    check(st == 200 and err(arr(r["output"]), out[0]) <= TOL * max(1.0, float(out.abs().max())),
          f"{name} text: {st}")
    # query embeddings, N = 2, with key lengths, and the causal mask as the request says
    x = torch.randn(2, 9, model.token_embeddings.shape[1], generator=torch.Generator().manual_seed(5))
    for c in (causal, not causal):
        out2, logits2, maps2 = torch_forward(model, x, c, lengths=[9, 6])
        body = {"model": name, "query": b64(x.numpy()), "key_lengths": [9, 6], "causal": c,
                "need_weights": "per_head", "encoding": "base64"}
        st, r = post(port, body)
        if not check(st == 200, f"{name} query causal={c}: {st} {r}"):
            continue
        w = arr(r["weights"])  # (Ls, N, H, L, L)
        e_out = err(arr(r["output"]), out2)
        e_w = max(err(w[li], maps2[li]) for li in range(len(maps2)))
        check(e_out <= TOL * max(1.0, float(out2.abs().max())) and e_w <= TOL,
              f"{name} query causal={c}: output off by {e_out:.2e}, weights by {e_w:.2e}")
        if unembed:
            lg2 = arr(r["predictions"]["logits"])[..., 0]  # the largest logit of each row
            check(err(lg2, logits2.max(-1).values) <= TOL * max(1.0, float(logits2.abs().max())),
                  f"{name} query: the largest logits")
    return True


# ---- Selection ------------------------------------------------------------------------------------


def check_selection(port, name, nlayers, text):
    """layers, heads, mean, top-k, outputs and the trace against the full reply, bit for bit."""
    base = {"model": name, "text": text, "encoding": "base64"}
    st, full = post(port, dict(base, need_weights="per_head", trace=True))
    if not check(st == 200, f"{name} full: {st} {full}"):
        return
    W = arr(full["weights"])  # (Ls, H, L, L)
    out = arr(full["output"])
    order = list(range(nlayers))[::-1]
    st, r = post(port, dict(base, need_weights="per_head", layers=order, heads=[2, 0]))
    check(st == 200 and r["layers"] == order and
          np.array_equal(arr(r["weights"]), W[order][:, [2, 0]]) and
          np.array_equal(arr(r["output"]), out),
          f"{name}: layers {order} and heads [2, 0] are the full reply's slices, bit for bit")
    st, r = post(port, dict(base, need_weights="mean", layers=[nlayers - 1]))
    check(st == 200 and err(arr(r["weights"])[0], W[nlayers - 1].mean(0)) <= 1e-6,
          f"{name}: mean weights of the last layer")
    st, r = post(port, dict(base, need_weights="per_head", weights_top_k=2, layers=[0]))
    if check(st == 200, f"{name} top-k: {st}"):
        ix, val = arr(r["weights"]["indices"]), arr(r["weights"]["values"])
        check(np.array_equal(np.take_along_axis(W[0], ix[0].astype(int), -1), val[0]),
              f"{name}: top-k weights are the full maps' values at their indices")
    st, r = post(port, dict(base, outputs=[]))
    check(st == 200 and set(r) >= {"usage", "layers"} and "output" not in r and
          "predictions" not in r, f"{name}: outputs [] leaves the tensors out: {sorted(r)}")
    # the trace per layer
    t = full.get("trace", {})
    res, add = arr(t["residual"]), arr(t["attn_output"])
    check(np.array_equal(arr(t["weights"]), W), f"{name}: the trace's weights are the weights")
    ok = all(err(res[li + 1], res[li] + add[li]) <= 1e-6 for li in range(nlayers - 1))
    check(ok and err(out, res[-1] + add[-1]) <= 1e-6,
          f"{name}: the trace's residual and attn_output add up to the output")
    st, r = post(port, dict(base, trace=True, layers=[nlayers - 1], outputs=["trace"]))
    check(st == 200 and np.array_equal(arr(r["trace"]["q"])[0], arr(t["q"])[nlayers - 1]),
          f"{name}: the trace of one layer is the full trace's")


# ---- Scores ----------------------------------------------------------------------------------------
# TransformerLens's head_detector (transformer_lens/head_detector.py), written again here rather
# than taken from train_induction.py, so that a mistake there cannot pass here: the previous-token
# pattern is ones one below the diagonal; the duplicate-token pattern ones where t[j] = t[i], j != i;
# the induction pattern that one rolled a column right, its first column zeroed, lower triangle;
# the "mul" score sum(A * pattern) / sum(A). Over every row (head_detector's own) a first half with
# nothing to copy caps an induction head near 0.5 on these sequences, so the goals are checked over
# the rows with a target (some 1 in the row), as GET /v1/models reports them, and both are printed.


def detection_patterns(t):
    """(previous-token, induction) patterns (L, L) of the tokens t (L), as head_detector's."""
    L = len(t)
    prev = np.tril(np.eye(L, k=-1))
    dup = (np.tile(t, (L, 1)) == np.tile(t, (L, 1)).T).astype(np.float64)
    np.fill_diagonal(dup, 0)
    dup = np.tril(dup)
    ind = np.roll(dup, 1, axis=1)
    ind[:, 0] = 0
    return prev, np.tril(ind)


def mul_score(a, pattern, rows=None):
    """head_detector's "mul" score of the weights a (L, L), over the given rows (default all)."""
    if rows is None:
        rows = np.ones(len(a), bool)
    return float((a * pattern)[rows].sum() / a[rows].sum())



def check_scores(port):
    """The induction model's heads on sequences made here, from the weights attnd returns."""
    info = get(port, "/v1/models/induction")
    vocab = info["vocab"]
    pools = {"zh": [w for w in vocab[1:] if not w.isascii()],
             "en": [w for w in vocab[1:] if w.isascii()]}
    pools["both"] = pools["zh"] + pools["en"]
    rng = np.random.default_rng(777)
    layers, heads = info["num_layers"], info["num_heads"]
    sums = np.zeros((layers, heads, 2))  # over the rows with a target
    every = np.zeros((layers, heads, 2))  # over every row
    first = rep = nf = nr = 0
    count = 60
    for s in range(count):
        pool = pools[("zh", "en", "both")[s % 3]]
        n = int(rng.integers(8, 25))
        words = list(rng.choice(pool, size=n))
        st, r = post(port, {"model": "induction", "tokens": words + words,
                            "need_weights": "per_head", "predict_top_k": 1, "encoding": "base64"})
        if not check(st == 200, f"scores: {st} {r}"):
            return
        t = np.array([vocab.index(w) for w in r["tokens"]])
        prev, ind = detection_patterns(t)
        w = arr(r["weights"]).astype(np.float64)  # (layers, H, L, L)
        for li in range(layers):
            for h in range(heads):
                sums[li, h, 0] += mul_score(w[li, h], prev, prev.sum(1) > 0)
                sums[li, h, 1] += mul_score(w[li, h], ind, ind.sum(1) > 0)
                every[li, h] += mul_score(w[li, h], prev), mul_score(w[li, h], ind)
        top = arr(r["predictions"]["ids"])[:, 0]
        first += int((top[0:n] == t[1:n + 1]).sum())
        rep += int((top[n + 1:2 * n] == t[n + 2:2 * n + 1]).sum())
        nf, nr = nf + n, nr + n - 1
    sums /= count
    every /= count
    prev0, ind1 = sums[0, :, 0].max(), sums[1, :, 1].max()
    print(f"stack_torch: over every row (head_detector's own), the best layer-0 previous-token "
          f"score {every[0, :, 0].max():.4f}, the best layer-1 induction score "
          f"{every[1, :, 1].max():.4f}")
    print(f"stack_torch: on {count} sequences made here, the best layer-0 previous-token score "
          f"{prev0:.4f}, the best layer-1 induction score {ind1:.4f}; top-1 accuracy "
          f"{first / nf:.4f} on the first half, {rep / nr:.4f} on the repeated half")
    check(prev0 >= 0.8, f"a layer-0 previous-token head: {prev0:.4f}")
    check(ind1 >= 0.8, f"a layer-1 induction head: {ind1:.4f}")
    check(rep / nr >= 0.9 and first / nf < 0.1, f"accuracy {first / nf:.4f}, {rep / nr:.4f}")
    got = info.get("head_scores")
    if check(got is not None, "GET /v1/models/induction has head_scores"):
        reported = np.array([[[h["previous_token"], h["induction"]] for h in layer]
                             for layer in got])
        check(err(reported, sums) < 0.05,
              f"GET /v1/models' scores within 0.05 of these: off by {err(reported, sums):.3f}")
    acc = info.get("accuracy", {})
    check(acc.get("repeated_half", 0) >= 0.9, f"GET /v1/models' accuracy: {acc}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnd", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "models")
        os.makedirs(folder)
        models = write_models(folder)
        proc, port = start_attnd(os.path.abspath(args.attnd), ["--models", folder],
                                 os.path.join(tmp, "attnd.log"), "stack_torch")
        try:
            rng = np.random.default_rng(38)
            # the built-in induction model against its file loaded in torch, as saved
            tensors, meta = ti.read_safetensors(os.path.join(HERE, "..", "..", "api", "induction",
                                                             "induction.safetensors"))
            m = ti.torch_module()()
            m.load_state_dict({k: torch.from_numpy(v) for k, v in tensors.items()}, strict=True)
            m.eval()
            check_forward(port, "induction", m, json.loads(meta["vocab"]), True, rng)
            for name, model, vocab, causal in models:
                check_forward(port, name, model, vocab, causal, rng)
            check_selection(port, "induction", 2, "程序员 日志 代码 服务器 程序员 日志 代码")
            check_selection(port, "stack5", 3, "w1 w2 w3 w4 w1 w2")
            check_scores(port)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    print(f"stack_torch: the induction model and {len(CONFIGS)} random models; {check.summary()}")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
