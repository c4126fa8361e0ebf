#!/usr/bin/python3
"""train_induction.py - trains attnd's built-in "induction" model: a 2-layer attention-only
transformer that learned, on random sequences of words in which a stretch repeats, to copy the
stretch the second time round. Its layer-0 heads learn to look at the previous token and its
layer-1 heads to look at the token after an earlier occurrence of the current one (an induction
head: Elhage et al. 2021, Olsson et al. 2022). Debian's python3-torch, on the CPU.

Run from anywhere with /usr/bin/python3 (torch and numpy):

    /usr/bin/python3 api/induction/train_induction.py             # writes induction.safetensors
    /usr/bin/python3 api/induction/train_induction.py --out F     # writes F instead
    /usr/bin/python3 api/induction/train_induction.py --steps 40 --out F   # a short run

The same seed and thread count (--seed, --threads) give the same bytes, on the same BLAS: torch
and numpy multiply through libblas.so.3, which the build's libopenblas-dev makes OpenBLAS, and
OpenBLAS's kernel and thread count change a sum's order too. Run as a script, this pins them
(BLAS_ENV, before numpy loads the library) and prints which library it got. The file holds the
module's state_dict under PyTorch's own names (layers.0.self_attn.in_proj_weight, ...), so
AttnOnly().load_state_dict(read_safetensors(F)[0]) loads it as saved, and in __metadata__ the
vocabulary, the start token and what the held-out evaluation measured (head_scores, accuracy),
which attnd shows in GET /v1/models. api/induction/README.md explains the model and its numbers.

The module (AttnOnly), the file's writer and reader and the scores are importable: the tests
(tests/server/stack_torch.py) load files with them and measure attnd's answers with them.

Legend: V vocabulary, P positions, E width, H heads per layer, Dh = E / H, L tokens of a sequence
(the start token first), N sequences.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

# OpenBLAS's kernel and threads, read when the library loads (at numpy's import): measured, 200
# steps from seed 38 gave five different files with OpenBLAS's Haswell kernel on 2 threads (the
# committed file's), on 1 thread, its SkylakeX kernel, the kernel it picks by itself on an AMD
# EPYC, and Debian's reference BLAS. Haswell's is AVX2, which every x86-64 machine here has.
BLAS_ENV = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_NUM_THREADS": "2"}
if __name__ == "__main__":
    os.environ.update(BLAS_ENV)

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

# ---- Vocabulary: words of the lesson model a class can read -----------------------------------
# No token is a prefix of another, and every English entry is one word, so a text splits one way.

START = "〈s〉"  # attnd puts it before every text's words, at position 0
WORDS_ZH = (
    "程序员 同事 小王 小李 张工 老师 学生 经理 用户 客户 小明 小红 "          # people
    "服务器 缓存 数据库 系统 脚本 接口 浏览器 "                                # systems
    "日志 配置文件 笔记本 背包 补丁 错误 开关 内存 代码 文档 邮件 报告 电脑 手机 书 钥匙 "
    "箱子 盒子 抽屉 杯子 咖啡 问题 任务 版本 密码 截图 表格 "                    # things
    "发给 提交 记录 发现 返回 包含 修复 打开 检查 更新 修改 保存 喜欢 需要 读取 删除了 "
    "部署了 重启了").split()                                                  # predicates
WORDS_EN = (
    "programmer colleague tester classmate teacher student manager engineer user customer "
    "server cache database system program script interface browser compiler "
    "log file laptop suitcase backpack patch cause error data switch memory code document email "
    "report computer phone book key box drawer cup coffee problem task requirement version "
    "password screenshot spreadsheet "
    "sent submitted recorded found returns contains put fixed wrote opened deleted checked "
    "updated changed saved").split()
VOCAB = [START] + WORDS_ZH + WORDS_EN
ZH = np.arange(1, 1 + len(WORDS_ZH))             # token ids of each pool
EN = np.arange(1 + len(WORDS_ZH), len(VOCAB))
BOTH = np.arange(1, len(VOCAB))
POOLS = {"zh": ZH, "en": EN, "both": BOTH}

# ---- The model and its training -----------------------------------------------------------------

P = 64            # positions: the start token and up to 63 words
E = 64            # width of the residual stream
H = 4             # heads per layer (Dh = 16)
LAYERS = 2
NORM = False      # a LayerNorm before each attention (and before the unembedding); not needed
STEPS = 3000      # optimiser steps, of a learning-rate schedule of SCHEDULE steps
SCHEDULE = 5000   # stopped at 3000, both heads were past 0.8; at 5000 the induction had spread
                  # over three heads of layer 1 (the best 0.78); a schedule of 3000 steps left the
                  # previous-token head at 0.76
BATCH = 64        # sequences per step, each of P tokens
LR = 2e-3         # AdamW's learning rate, after a linear warm-up of WARMUP steps, cosine to 0
WARMUP = 100
WEIGHT_DECAY = 0.01
SEED = 38         # the model's initialisation and the training data
THREADS = 1       # torch's threads: part of what makes the bytes (a sum's order)
HALF_FORM = 1.0   # the share of training rows in the held-out form (the stretch at once again);
                  # at 0.25 (the other rows: a stretch anywhere, after a gap) and LR 1e-3, no
                  # induction head had formed after 1500 steps
STRETCH = (2, 31) # the repeated stretch's words in a training row
EVAL_SEED = 2038  # the held-out sequences: another stream than training's
EVAL_SEQS = 600   # 200 of Chinese words, 200 of English ones, 200 of both
EVAL_N = (8, 24)  # each is the start token, n random words (n in this range), the n again


def torch_module():
    """The torch module (imported here so that the data and scores need numpy alone)."""
    import torch
    from torch import nn

    class Layer(nn.Module):
        """x + MHA(LN(x)): nn.TransformerEncoderLayer(norm_first=True)'s attention block."""

        def __init__(self, e, h, norm):
            super().__init__()
            self.norm1 = nn.LayerNorm(e) if norm else None
            self.self_attn = nn.MultiheadAttention(e, h, batch_first=True)

        def forward(self, x, mask):
            y = self.norm1(x) if self.norm1 is not None else x
            a, w = self.self_attn(y, y, y, attn_mask=mask, need_weights=True,
                                  average_attn_weights=False)
            return x + a, w

    class AttnOnly(nn.Module):
        """Token and position embeddings, layers of x <- x + MHA(LN(x)), then (optionally) a
        final LayerNorm and the unembedding lm_head to next-token logits. State_dict names:
        token_embeddings (V, E), position_embeddings (P, E), layers.i.norm1.weight and .bias
        (E), layers.i.self_attn.in_proj_weight (3E, E), .in_proj_bias (3E),
        .out_proj.weight (E, E), .out_proj.bias (E), norm.weight and .bias (E), lm_head.weight
        (V, E) and lm_head.bias (V)."""

        def __init__(self, vocab=len(VOCAB), positions=P, e=E, h=H, layers=LAYERS, norm=NORM,
                     final_norm=None, unembed=True, unembed_bias=False):
            super().__init__()
            self.token_embeddings = nn.Parameter(torch.randn(vocab, e) * 0.5)
            # learned, from sinusoids (Vaswani et al. 2017), where "the word before" is a
            # rotation of each pair of coordinates (from random ones, 3000 steps of a schedule of
            # 3000 gave a previous-token score of 0.77, from sinusoids 0.76)
            pos = torch.arange(positions, dtype=torch.float32)[:, None]
            freq = torch.exp(-math.log(1000.0) * torch.arange(0, e, 2, dtype=torch.float32) / e)
            pe = torch.zeros(positions, e)
            pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
            self.position_embeddings = nn.Parameter(pe)
            self.layers = nn.ModuleList(Layer(e, h, norm) for _ in range(layers))
            self.norm = nn.LayerNorm(e) if (norm if final_norm is None else final_norm) else None
            self.lm_head = nn.Linear(e, vocab, bias=unembed_bias) if unembed else None

        def forward(self, ids, causal=True):
            """ids (N, L) -> (final residual (N, L, E), logits (N, L, V) or None, [weights
            (N, H, L, L) per layer])."""
            n, l = ids.shape
            x = self.token_embeddings[ids] + self.position_embeddings[:l]
            mask = torch.triu(torch.ones(l, l, dtype=torch.bool), 1) if causal else None
            maps = []
            for layer in self.layers:
                x, w = layer(x, mask)
                maps.append(w)
            y = self.norm(x) if self.norm is not None else x
            return x, self.lm_head(y) if self.lm_head is not None else None, maps

    return AttnOnly


# ---- Data ---------------------------------------------------------------------------------------


def training_batch(rng, batch=BATCH):
    """(batch, P) int64: each row the start token, then P - 1 random words of one pool (Chinese,
    English or both) in which a stretch of m words (STRETCH) comes again after a gap; a share
    HALF_FORM of the rows are the held-out form, the stretch at once again from the first
    word."""
    out = np.empty((batch, P), np.int64)
    out[:, 0] = 0
    for b in range(batch):
        pool = POOLS[("zh", "en", "both")[rng.integers(3)]]
        row = pool[rng.integers(len(pool), size=P - 1)]
        m = int(rng.integers(STRETCH[0], STRETCH[1] + 1))
        free = P - 1 - 2 * m
        if rng.random() < HALF_FORM:
            at, gap = 0, 0
        else:
            gap = int(rng.integers(0, free + 1))
            at = int(rng.integers(0, free - gap + 1))
        row[at + m + gap:at + 2 * m + gap] = row[at:at + m]
        out[b, 1:] = row
    return out


def held_out(seed=EVAL_SEED, count=EVAL_SEQS):
    """[(pool name, n, ids (2n + 1))]: the start token, n random words, the same n words."""
    rng = np.random.default_rng(seed)
    seqs = []
    for i in range(count):
        name = ("zh", "en", "both")[i % 3]
        pool = POOLS[name]
        n = int(rng.integers(EVAL_N[0], EVAL_N[1] + 1))
        r = pool[rng.integers(len(pool), size=n)]
        seqs.append((name, n, np.concatenate([[0], r, r]).astype(np.int64)))
    return seqs


# ---- Scores: TransformerLens's head_detector patterns --------------------------------------------
# For tokens t (L) and one head's causal weights A (L, L), as transformer_lens/head_detector.py
# defines the patterns: previous token, P[i][j] = 1 where j = i - 1; induction, I[i][j] = 1 where
# 1 <= j <= i and t[j - 1] = t[i] (the duplicate-token pattern, j < i and t[j] = t[i], shifted one
# column right). Its "mul" measure is sum(A * pattern) / sum(A). attnd reports it over the rows
# that have a target (a row with some 1 in the pattern): a random first half has nothing to
# copy, so over every row an induction head could reach only about 0.5 on these sequences.
# score_rows() gives both.


def patterns(t):
    """(previous-token, induction) patterns (L, L) of tokens t (L)."""
    L = len(t)
    prev = np.zeros((L, L))
    prev[np.arange(1, L), np.arange(L - 1)] = 1
    same = (t[:, None] == t[None, :]) & ~np.eye(L, dtype=bool)
    ind = np.zeros((L, L))
    ind[:, 1:] = same[:, :-1]
    return prev, np.tril(ind)


def score_rows(a, pattern):
    """(over the rows with a target, over every row: head_detector's own) of weights a (L, L)."""
    rows = pattern.sum(1) > 0
    hit = (a * pattern).sum(1)
    return float(hit[rows].sum() / a[rows].sum()), float(hit.sum() / a.sum())


def head_scores(maps, seqs):
    """maps[s][layer] (H, L, L) of held-out sequence s: per layer and head the mean over the
    sequences of each score, {"previous_token", "induction"} (rows with a target) and the same
    over every row ("..._all_rows", head_detector's default)."""
    layers, heads = len(maps[0]), maps[0][0].shape[0]
    acc = np.zeros((layers, heads, 4))
    for s, (_, _, t) in enumerate(seqs):
        prev, ind = patterns(t)
        for li in range(layers):
            for h in range(heads):
                a = np.asarray(maps[s][li][h], np.float64)
                acc[li, h] += score_rows(a, prev) + score_rows(a, ind)
    acc /= len(seqs)
    return [[{"previous_token": round(acc[li, h, 0], 4), "induction": round(acc[li, h, 2], 4),
              "previous_token_all_rows": round(acc[li, h, 1], 4),
              "induction_all_rows": round(acc[li, h, 3], 4)}
             for h in range(heads)] for li in range(layers)]


def accuracy(logits, seqs):
    """Top-1 next-token accuracy of logits[s] (L, V) on held-out sequence s: on the first half
    (rows 0 .. n-1 predicting the first copy) and on the repeated half (rows n+1 .. 2n-1
    predicting the second copy but its first word, which nothing announces); chance is one over
    the words of the pool a sequence draws from."""
    first = rep = nf = nr = 0
    chance = 0.0
    for s, (name, n, t) in enumerate(seqs):
        pred = np.asarray(logits[s]).argmax(-1)
        first += int((pred[0:n] == t[1:n + 1]).sum())
        rep += int((pred[n + 1:2 * n] == t[n + 2:2 * n + 1]).sum())
        nf += n
        nr += n - 1
        chance += 1.0 / len(POOLS[name])
    return {"first_half": round(first / nf, 4), "repeated_half": round(rep / nr, 4),
            "chance": round(chance / len(seqs), 4)}


# ---- The file ---------------------------------------------------------------------------------


def write_safetensors(path, tensors, metadata):
    """tensors: [(name, array)], written as F32 in this order; metadata: {str: str}. The header
    is compact JSON, padded with spaces to a multiple of 8."""
    header, data = {"__metadata__": metadata}, []
    at = 0
    for name, a in tensors:
        raw = np.ascontiguousarray(a, "<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
        data.append(raw)
        at += len(raw)
    text = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(data))


def read_safetensors(path):
    """({name: float32 array}, metadata) of an F32 file."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, h in header.items():
        b, e = h["data_offsets"]
        out[name] = np.frombuffer(data[b:e], "<f4").reshape(h["shape"]).copy()
    return out, meta


def state_dict_arrays(model):
    """The module's state_dict as [(name, float32 array)], in its order."""
    return [(k, v.detach().numpy().astype(np.float32)) for k, v in model.state_dict().items()]


def metadata(scores=None, acc=None, norm=NORM):
    """The file's __metadata__: what attnd reads (num_heads, the vocabulary, the start token,
    causal) and what the evaluation measured."""
    meta = {"num_heads": str(H), "vocab": json.dumps(VOCAB, ensure_ascii=False),
            "start_token": START, "text_split": "words", "causal": "true"}
    if norm:
        meta["layer_norm_eps"] = "1e-05"
    if scores is not None:
        meta["head_scores"] = json.dumps(
            [[{k: s[k] for k in ("previous_token", "induction")} for s in layer]
             for layer in scores])
        meta["accuracy"] = json.dumps(acc)
    return meta


# ---- Training -----------------------------------------------------------------------------------


def evaluate(model):
    """The held-out sequences through the model: (head scores, accuracy)."""
    import torch
    seqs = held_out()
    maps, logits = [], []
    with torch.no_grad():
        for _, _, t in seqs:
            _, lg, ws = model(torch.from_numpy(t)[None])
            maps.append([w[0].numpy() for w in ws])
            logits.append(lg[0].numpy())
    return head_scores(maps, seqs), accuracy(logits, seqs)


def train(steps, seed, threads, log, probe=None):
    """Trains a model from seed on threads threads for steps steps of a schedule of
    max(steps, SCHEDULE): (model, [loss of each step]). probe(step, model), when given, is
    called every 500 steps (it must not draw from torch's generator)."""
    import torch
    schedule = max(steps, SCHEDULE)
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(seed)
    model = torch_module()()
    rng = np.random.default_rng(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    losses = []
    for step in range(steps):
        warm = min(WARMUP, max(1, schedule // 10))
        lr = LR * min(1.0, (step + 1) / warm) * 0.5 * (1 + math.cos(math.pi * step / schedule))
        for g in opt.param_groups:
            g["lr"] = lr
        ids = torch.from_numpy(training_batch(rng))
        _, logits, _ = model(ids)
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                 ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
        if probe and step % 500 == 499:
            probe(step, model)
        if log and (step % 250 == 0 or step == steps - 1):
            print(f"step {step:5d}  loss {loss.item():.4f}  lr {lr:.2e}", flush=True)
    return model, losses


def blas_library():
    """The file libblas.so.3 resolved to in this process (what torch and numpy multiply with)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if "libblas" in path or "libopenblas" in path:
                    return os.path.realpath(path)
    except OSError:
        pass
    return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "induction.safetensors"))
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--threads", type=int, default=THREADS)
    ap.add_argument("--no-eval", action="store_true", help="skip the held-out evaluation")
    ap.add_argument("--losses", help="write the loss of every step here, one a line")
    ap.add_argument("--check-losses", metavar="FILE",
                    help="only check that the losses of FILE (--losses) fall: the mean of the "
                         "last tenth at least 0.05 below that of the first tenth")
    args = ap.parse_args()
    if args.check_losses:
        with open(args.check_losses) as f:
            losses = [float(x) for x in f]
        k = max(1, len(losses) // 10)
        first, last = sum(losses[:k]) / k, sum(losses[-k:]) / k
        print(f"loss {first:.4f} over the first {k} steps, {last:.4f} over the last {k}")
        return 0 if last <= first - 0.05 else 1
    __import__("torch")  # it loads libblas.so.3 (train() imports it again)
    lib = blas_library()
    print(f"BLAS: {lib} (" + ", ".join(f"{k}={os.environ.get(k)}" for k in BLAS_ENV) + ")"
          + ("" if "openblas" in lib else ": not OpenBLAS, so not the committed file's bytes"),
          flush=True)
    t0 = time.time()
    model, losses = train(args.steps, args.seed, args.threads, log=True)
    t1 = time.time()
    scores, acc = (None, None) if args.no_eval else evaluate(model)
    write_safetensors(args.out, state_dict_arrays(model), metadata(scores, acc))
    if args.losses:
        with open(args.losses, "w") as f:
            f.write("".join(f"{x:.6f}\n" for x in losses))
    print(f"trained {args.steps} steps in {t1 - t0:.1f} s on {args.threads} threads; "
          f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")
    if scores is not None:
        for li, layer in enumerate(scores):
            for h, s in enumerate(layer):
                print(f"layer {li} head {h}: previous token {s['previous_token']:.4f} "
                      f"induction {s['induction']:.4f}  (every row: "
                      f"{s['previous_token_all_rows']:.4f}, {s['induction_all_rows']:.4f})")
        print("accuracy:", json.dumps(acc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
