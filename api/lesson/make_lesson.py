#!/usr/bin/python3
"""make_lesson.py - builds attnd's built-in "lesson" model: 4 attention heads built by hand, each
to carry one relation of the seed chapter (第 6 章: 为什么一个注意力头不够), in Chinese and in
English (one vocabulary of both; twins.json pairs the lesson's sentences with their English twins).

Run from anywhere with /usr/bin/python3 (numpy only):

    /usr/bin/python3 api/lesson/make_lesson.py            # writes api/lesson/lesson.safetensors
    /usr/bin/python3 api/lesson/make_lesson.py --check    # also measures every head's rule
                                                          # (lesson_check.py)
    /usr/bin/python3 api/lesson/make_lesson.py --out F    # writes F instead

The output is deterministic (every weight is a small dyadic number, exact in float32, and the
file is written byte by byte), and committed; attnd embeds it. tests/test_server regenerates it
and compares the bytes, so this script and the built-in model cannot drift apart.

Everything here is explained in api/lesson/README.md: the features of each token, the positional
encoding, which head reads which feature, and why. In short, the score of query token i for key
token j in head h is

    score_h(i, j) = relation_h(token i, token j) + position_h(i, j)

where the relation term is a dot product of features (W_Q and W_K pick them out) and the position
term is a fixed function of i and j (W_Q and W_K pick out the position coordinates).
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# ---- Vocabulary -------------------------------------------------------------------------------
# Each kind with its tokens, in vocabulary order. Attributes follow in ATTRS.

START = "〈s〉"  # the start token: put before every text's words (position 0) by attnd

KINDS = [
    ("start", START),
    ("person", "程序员 同事 小王 小李 张工 测试同学 同学 老师 学生 经理 产品经理 运维 用户 客户 "
               "小明 小红 老王 小张 我 你 我们"),
    ("pronoun", "它 他 她 它们 他们 她们"),
    ("system", "服务器 缓存模块 缓存 数据库 Redis 系统 程序 脚本 接口 浏览器 编译器 Linux"),
    ("thing", "服务器日志 日志 配置文件 文件 笔记本 背包 补丁 错误原因 错误 原因 旧数据 数据 "
              "新的开关 开关 高并发 内存 代码 文档 邮件 报告 电脑 手机 书 钥匙 箱子 盒子 抽屉 "
              "杯子 咖啡 问题 任务 需求 版本 密码 截图 表格"),
    ("predicate", "发给 提交了 提交 记录了 记录 发现 发现了 返回 包含 放进 是 太重了 太大了 "
                  "太小了 太旧了 坏了 修复了 修复 写了 打开 打开了 删除了 检查 检查了 更新 更新了 "
                  "修改 修改了 保存 保存了 拿走了 喜欢 看到了 需要 读取 丢了 找到了 部署了 重启了 "
                  "出错了 告诉 说 有 用"),
    ("function", "把 因为 所以 但是 而且 然后 如果 就 在 下 会 给 和 跟 也 都 又 已经 还 没有 "
                 "不 了 的 一个 这个 那个 新的 旧的 很多 昨天 今天 明天 刚才 里"),
    ("punct", "， 。 ！ ？ ； ： 、 , . ! ? ; :"),
    ("open", "“ （ 《 「 ("),
    ("close", "” ） 》 」 )"),
]

# Extra attributes by token.
ATTRS = {
    # Persons a third-person pronoun can stand for (not 我, 你, 我们).
    "referent_person": "程序员 同事 小王 小李 张工 测试同学 同学 老师 学生 经理 产品经理 运维 用户 "
                       "客户 小明 小红 老王 小张",
    "it": "它 它们",           # pronouns that stand for a thing or a system
    "he": "他 她 他们 她们",   # pronouns that stand for a person
    "heavy": "笔记本 背包 电脑 箱子 书",
    "container": "背包 箱子 盒子 抽屉 杯子",
    # Brackets and quotes by pair: a closing mark looks for an opening one of its own pair.
    "paren": "（ ） ( )",
    "quote": "“ ”",
    "book": "《 》",
    "corner": "「 」",
}
PAIRS = ("paren", "quote", "book", "corner")

# The English vocabulary: the same kinds and features, after the Chinese tokens (whose indices,
# and so embeddings, stay as they were). Entries are separated by commas, since an entry may be
# several words ("server log" is one token, as 服务器日志 is). English shares the Chinese list's
# ASCII punctuation, brackets and curly quotes, and Redis and Linux. Names keep their capitals;
# text matches any case (attnd's "words" splitting, split below).
KINDS_EN = [
    ("person", "programmer, colleague, Xiao Wang, Xiao Li, Engineer Zhang, tester, classmate, "
               "teacher, student, manager, product manager, ops engineer, engineer, user, "
               "customer, Xiao Ming, Xiao Hong, Lao Wang, Xiao Zhang, I, you, we, programmers, "
               "colleagues, testers, teachers, students, managers, engineers, users, customers"),
    ("pronoun", "it, he, she, they, him, her, them"),
    ("system", "server, cache module, cache, database, system, program, script, interface, "
               "browser, compiler, servers, databases, scripts"),
    ("thing", "server log, log, config file, file, laptop, suitcase, backpack, patch, cause, "
              "error, stale data, data, new switch, switch, high concurrency, in-memory, memory, "
              "code, document, email, report, computer, phone, book, key, box, drawer, cup, "
              "coffee, problem, task, requirement, version, password, screenshot, spreadsheet, "
              "logs, files, patches, errors, documents, emails, reports, books, keys, boxes, "
              "screenshots, tasks"),
    ("predicate", "sent, submitted, submit, recorded, record, found, find, returns, return, "
                  "returned, contains, put, is, are, was, were, is too heavy, is too big, "
                  "is too small, is too old, are too heavy, are too old, was too heavy, "
                  "were too old, broke, fixed, fix, wrote, opened, open, deleted, checked, check, "
                  "updated, update, changed, change, saved, save, took, likes, saw, needs, "
                  "needed, reads, read, lost, deployed, restarted, failed, told, said, has, uses"),
    ("function", "the, a, an, to, of, in, into, on, at, under, with, and, also, already, still, "
                 "not, did, does, would, will, can, this, that, these, new, old, many, "
                 "yesterday, today, tomorrow, just now, from, for, because, but, which, who, so, "
                 "if, then, when, while"),
]

ATTRS_EN = {
    "referent_person": "programmer, colleague, Xiao Wang, Xiao Li, Engineer Zhang, tester, "
                       "classmate, teacher, student, manager, product manager, ops engineer, "
                       "engineer, user, customer, Xiao Ming, Xiao Hong, Lao Wang, Xiao Zhang, "
                       "programmers, colleagues, testers, teachers, students, managers, "
                       "engineers, users, customers",
    "it": "it",
    "he": "he, she, him, her",
    "heavy": "laptop, backpack, computer, suitcase, book, books",
    "container": "backpack, suitcase, box, drawer, cup, boxes",
    # English only: plural nouns a "they" can stand for (not "we"), the pronouns that stand for
    # them, and the words that open a clause as a comma does (the structure head's boundaries).
    "plural": "programmers, colleagues, testers, teachers, students, managers, engineers, users, "
              "customers, servers, databases, scripts, logs, files, patches, errors, documents, "
              "emails, reports, books, keys, boxes, screenshots, tasks",
    "they": "they, them",
    "clause": "because, but, which, who, so, if, then, when, while",
}


def entries(text):
    """The entries of a list: comma-separated (English), else whitespace-separated (Chinese)."""
    return [w.strip() for w in text.split(",")] if "," in text else text.split()


# Every attribute's tokens, both languages.
ATTR_SETS = {a: set(entries(ATTRS.get(a, ""))) | set(entries(ATTRS_EN.get(a, "")))
             for a in set(ATTRS) | set(ATTRS_EN)}

# ---- Dimensions --------------------------------------------------------------------------------

H = 4                  # heads, in this order:
HEAD_NAMES = ["adjacent", "subject", "structure", "coreference"]
E = 256                # embedding width
DH = E // H            # 64 per head; libattn scales scores by 1/sqrt(64) = 1/8 (exact)
P = 48                 # positions: a text may have up to 48 tokens
POS0 = 32              # position i is a 1 in coordinate POS0 + i (32..79); 80..255 stay 0

# Feature coordinates of a token embedding (0..31; those not listed stay 0, room for your own).
FEATURES = [
    "bias",             # 0: 1 for every token
    "person",           # 1
    "pronoun",          # 2
    "system",           # 3: a program or machine, which can act (缓存模块 返回 旧数据)
    "thing",            # 4: a file, object or abstract thing
    "predicate",        # 5: a verb or an adjective predicate (太重了)
    "function",         # 6: function words, adverbs, time words, determiners
    "punct",            # 7: any punctuation mark, brackets and quotes included
    "open",             # 8: an opening bracket or quote
    "close",            # 9: a closing bracket or quote
    "animate",          # 10: persons, 他, 她, 他们, 她们
    "heavy",            # 11
    "container",        # 12
    "id0", "id1", "id2", "id3",  # 13..16: the vocabulary index in base 4 (an identity code)
    "referent_person",  # 17: a person a third-person pronoun can stand for (not 我, 你, 我们)
    "it",               # 18: 它, 它们
    "he",               # 19: 他, 她, 他们, 她们
    "agent",            # 20: person, pronoun or system: what can be a subject
    # 21..28: the pair of a bracket or quote mark: opening marks, then closing marks
    "open_paren", "open_quote", "open_book", "open_corner",
    "close_paren", "close_quote", "close_book", "close_corner",
    "start",            # 29: the start token 〈s〉, where a row with nothing to show rests
    "plural",           # 30: a plural noun (English) that "they" can stand for
    "they",             # 31: they, them
]
# Two features live above the position table (80..255 are free): no head's W_V reads them in
# its first 32 dimensions, so they are copied into dimensions 40 and 41 (see head_weights).
FEATURES_HIGH = {
    "clause": 80,       # an English word that opens a clause: because, but, which, ...
    "id4": 81,          # the identity code's fifth digit: 0 for tokens 0..255, 0.5 for 256..511
}
F = {name: i for i, name in enumerate(FEATURES)}
F.update(FEATURES_HIGH)
V_READS = 32  # every head's W_V copies features 0..31 of the tokens it reads
V_HIGH = 40   # ... and the high features into its dimensions 40, 41


def vocabulary():
    """[(token, kind)] in vocabulary order: the Chinese list, then the English one."""
    out = []
    for kind, words in KINDS:
        out += [(w, kind) for w in words.split()]
    for kind, words in KINDS_EN:
        out += [(w, kind) for w in entries(words)]
    return out


def token_features(tokens):
    """(V, E) float64: each token's feature vector (the position coordinates are 0)."""
    attrs = ATTR_SETS
    X = np.zeros((len(tokens), E))
    for idx, (tok, kind) in enumerate(tokens):
        x = X[idx]
        x[F["bias"]] = 1
        if kind in ("open", "close"):
            x[F["punct"]] = 1
        x[F[kind]] = 1
        if kind == "person" or tok in attrs["he"]:
            x[F["animate"]] = 1
        if kind in ("person", "pronoun", "system"):
            x[F["agent"]] = 1
        for a in ("referent_person", "it", "he", "heavy", "container", "plural", "they",
                  "clause"):
            if tok in attrs[a]:
                x[F[a]] = 1
        for p in PAIRS:
            if tok in attrs[p]:
                x[F[kind + "_" + p]] = 1
        # Identity: the index in base 4, digits 0..3 mapped to -0.75, -0.25, 0.25, 0.75; a
        # fifth digit, 0 below 256 (so the Chinese tokens' embeddings are what they were).
        for k, name in enumerate(("id0", "id1", "id2", "id3")):
            x[F[name]] = ((idx >> (2 * k)) & 3) * 0.5 - 0.75
        x[F["id4"]] = (idx >> 8) * 0.5
    return X


def position_encoding():
    """(P, E) float64: position i is one-hot, a 1 in coordinate POS0 + i."""
    X = np.zeros((P, E))
    for i in range(P):
        X[i, POS0 + i] = 1
    return X


# ---- Heads -------------------------------------------------------------------------------------
# score_h(i, j) = q_i . k_j / 8 with q = W_Q x, k = W_K x. Each head's 64 dimensions hold a few
# feature terms (row r of W_Q reads features of token i, row r of W_K features of token j, and
# their product adds to the score) and a position table G_h[i][j]: W_K copies position j's one-hot
# into the head's last 48 dimensions, and W_Q writes row i of G_h there, so q_i . k_j picks
# G_h[i][j]. W_Q carries a factor 8 to undo libattn's 1/sqrt(64). The constants below are the
# scores softmax sees.

WALL = 64.0        # relation heads: the token itself and every later token get -64 (e^-64 ~ 2e-28)
ADJ = 8.0          # adjacent: every key but the two neighbours i-1 and i+1 gets -8
ADJ_START = 3.0    # ... the start token as a neighbour -3 (word 1 looks ahead when it may)
ADJ_SELF = 11.0    # ... and the start token's own row +11 on itself (8 over word 1)
ADJ_ID = 4.0       # ... its W_V copies the identity code again, times 4 (see head_weights)
SUBJ_AGENT = 12.0  # subject: a predicate meets a person, pronoun or system before it
SUBJ_THING = 6.0   # ... or a thing, for a predicate with no agent before it
SUBJ_PLAIN = 8.0   # ... every other word (not the start token) gets -8 from a predicate
SUBJ_NEAR = 1.0    # ... - log2(distance): of two candidates the nearer wins
SUBJ_SINK = 10.0   # ... rows of other words rest on the start token: +10 there
STRUCT_PUNCT = 30.0  # structure: every token meets the punctuation marks before it
STRUCT_CLOSE = 24.0  # ... a closing bracket or quote meets an opening one of its pair
STRUCT_SINK = 26.0   # ... the start token (the start of the text is a boundary)
CO_MATCH = 5.0     # coreference: 它 meets a thing or system, 他 a person it can stand for
CO_MISMATCH = 8.0  # ... and the other kind gets -8
CO_PLAIN = 8.0     # ... every other word (not the start token) gets -8 from a pronoun
CO_FIRST = 0.25    # ... - 0.25 log2(j): of two candidates, the earlier mention (the topic) wins
CO_SINK = 10.0     # ... rows of other words rest on the start token: +10 there


def log_term(c, d):
    """-c log2(d) for d >= 1, rounded to 1/256 (8 times it is exact in F16 below 64)."""
    return -round(256 * c * math.log2(d)) / 256


def recency(d):
    """structure's position term for a key d >= 1 tokens back: -4 log2(d), in eighths."""
    return -round(32 * math.log2(d)) / 8  # no value is near a rounding boundary


def position_tables():
    """(H, P, P): G_h[i][j], the position term of each head."""
    G = np.zeros((H, P, P))
    for i in range(P):
        for j in range(P):
            G[0, i, j] = 0 if abs(j - i) == 1 or i == j == 0 else -ADJ
            for h in (1, 2, 3):
                G[h, i, j] = -WALL if j > i or (j == i and i > 0) else 0
            if 0 < j < i:  # (the start token, at 0, is not nearer or farther for subject)
                G[1, i, j] = log_term(SUBJ_NEAR, i - j)
            if j < i:
                G[2, i, j] = recency(i - j)
                G[3, i, j] = log_term(CO_FIRST, j) if j > 0 else 0
    return G


def head_weights():
    """(W_Q, W_K, W_V) each (E, E) (head h in rows 64h..64h+63, the rows of in_proj_weight) and
    out_proj (E, E)."""
    Wq = np.zeros((H, DH, E))
    Wk = np.zeros((H, DH, E))
    G = position_tables()
    first = DH - P  # the position table's dimensions in each head: 16..63
    for h in range(H):
        for j in range(P):
            Wk[h, first + j, POS0 + j] = 1
            for i in range(P):
                Wq[h, first + j, POS0 + i] = 8 * G[h, i, j]

    def term(h, r, q, k):
        """Feature term r of head h: q and k are {coordinate: coefficient}."""
        for c, v in q.items():
            Wq[h, r, c] = 8 * v
        for c, v in k.items():
            Wk[h, r, c] = v

    b, st = F["bias"], F["start"]
    start = {st: 1}  # the start token, wherever it is (attnd puts it at position 0)
    # 0 adjacent: the start token as a neighbour -3; the start token's row on itself
    term(0, 0, {b: -ADJ_START, st: ADJ_SELF}, start)
    # 1 subject
    term(1, 0, {F["predicate"]: SUBJ_AGENT}, {F["agent"]: 1})
    term(1, 1, {F["predicate"]: SUBJ_THING}, {F["thing"]: 1})
    term(1, 2, {F["predicate"]: -SUBJ_PLAIN}, {b: 1, F["agent"]: -1, F["thing"]: -1, st: -1})
    term(1, 3, {b: SUBJ_SINK, F["predicate"]: -SUBJ_SINK}, start)
    # 2 structure (an English clause word is a boundary as a punctuation mark is)
    term(2, 0, {b: STRUCT_PUNCT}, {F["punct"]: 1, F["clause"]: 1})
    term(2, 1, {b: STRUCT_SINK}, start)
    for r, pair in enumerate(PAIRS, 2):
        term(2, r, {F["close_" + pair]: STRUCT_CLOSE}, {F["open_" + pair]: 1})
    # 3 coreference
    term(3, 0, {F["it"]: CO_MATCH, F["he"]: -CO_MISMATCH}, {F["thing"]: 1, F["system"]: 1})
    term(3, 1, {F["he"]: CO_MATCH, F["it"]: -CO_MISMATCH}, {F["referent_person"]: 1})
    term(3, 2, {F["it"]: -CO_PLAIN, F["he"]: -CO_PLAIN, F["they"]: -CO_PLAIN},
         {b: 1, F["thing"]: -1, F["system"]: -1, F["referent_person"]: -1, st: -1})
    term(3, 3, {b: CO_SINK, F["it"]: -CO_SINK, F["he"]: -CO_SINK, F["they"]: -CO_SINK}, start)
    # ... "they" meets a plural noun, and a singular person, thing or system gets -8
    term(3, 4, {F["they"]: CO_MATCH}, {F["plural"]: 1})
    term(3, 5, {F["they"]: -CO_MISMATCH},
         {F["referent_person"]: 1, F["thing"]: 1, F["system"]: 1, F["plural"]: -1})

    # W_V: every head copies features 0..31 of the token it reads into its first 32 dimensions;
    # out_proj is the identity, so output[i, 64h + f] is head h's weighted average of feature f.
    Wv = np.zeros((H, DH, E))
    for h in range(H):
        for f in range(V_READS):
            Wv[h, f, f] = 1
    # adjacent also copies the identity code, times ADJ_ID, into its dimensions 32..35: which
    # word a neighbour is matters to this head, and a replaced neighbour moves the row visibly.
    for k, name in enumerate(("id0", "id1", "id2", "id3", "id4")):
        Wv[0, V_READS + k, F[name]] = ADJ_ID
    # The high features, in every head: output[i, 64h + 40] is clause, 64h + 41 id4.
    for h in range(H):
        for k, name in enumerate(FEATURES_HIGH):
            Wv[h, V_HIGH + k, F[name]] = 1
    return Wq.reshape(E, E), Wk.reshape(E, E), Wv.reshape(E, E), np.eye(E)


# ---- Text --------------------------------------------------------------------------------------

SPACES = " \t\n\r\u3000"
TEXT_SPLIT = "words"  # __metadata__.text_split: attnd keeps Latin words whole (split below)
FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ\t\n\r", "abcdefghijklmnopqrstuvwxyz   ")


def latin(c):
    """A character of a Latin word: an ASCII letter or digit."""
    return c.isascii() and c.isalnum()


def split(text, vocab):
    """What attnd does with text_split "words": longest match against vocab, whitespace
    separating and dropped, where a token that ends in a Latin letter or digit is taken only where
    the text's word ends, ASCII letters match in either case, and the space of a multi-word token
    matches one space, tab, CR or LF. Returns the vocabulary's spellings."""
    folded = {t.translate(FOLD): t for t in vocab}
    out, i = [], 0
    longest = max(len(t) for t in vocab)
    while i < len(text):
        if text[i] in SPACES:
            i += 1
            continue
        for n in range(min(longest, len(text) - i), 0, -1):
            end = i + n
            if text[i:end].translate(FOLD) in folded and not (
                    end < len(text) and latin(text[end - 1]) and latin(text[end])):
                out.append(folded[text[i:end].translate(FOLD)])
                i = end
                break
        else:
            raise ValueError("unknown word at %d in %r" % (i, text))
    return out


# ---- The file ----------------------------------------------------------------------------------


def safetensors_bytes(tensors, metadata):
    """tensors: [(name, float64 array)], written as F16 (every value here is exact in F16).
    The header is compact JSON in a fixed order, padded with spaces to a multiple of 8."""
    header, data = {"__metadata__": metadata}, b""
    for name, a in tensors:
        raw = a.astype("<f2").tobytes()
        if not np.array_equal(np.frombuffer(raw, "<f2").astype(np.float64), a.reshape(-1)):
            raise ValueError("%s holds a value F16 cannot hold exactly" % name)
        header[name] = {"dtype": "F16", "shape": list(a.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def build():
    """The model file's bytes."""
    tokens = vocabulary()
    words = [t for t, _ in tokens]
    if len(set(words)) != len(words):
        raise ValueError("a token is listed twice")
    Wq, Wk, Wv, Wo = head_weights()
    tensors = [("token_embeddings", token_features(tokens)),
               ("position_embeddings", position_encoding()),
               ("in_proj_weight", np.concatenate([Wq, Wk, Wv])),
               ("out_proj.weight", Wo)]
    metadata = {"num_heads": str(H),
                "head_names": json.dumps(HEAD_NAMES, ensure_ascii=False, separators=(",", ":")),
                "vocab": json.dumps(words, ensure_ascii=False, separators=(",", ":")),
                "start_token": START,
                "text_split": TEXT_SPLIT,
                "source": "api/lesson/make_lesson.py (see api/lesson/README.md)"}
    return safetensors_bytes(tensors, metadata)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "lesson.safetensors"))
    ap.add_argument("--check", action="store_true", help="measure the rules, print the 它/他 rows")
    args = ap.parse_args()
    if args.check:
        from lesson_check import check  # it imports this file's tables
        if check(True):
            return 1
    blob = build()
    with open(args.out, "wb") as f:
        f.write(blob)
    print("wrote %s (%d bytes)" % (args.out, len(blob)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
