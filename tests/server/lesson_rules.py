#!/usr/bin/python3
"""lesson_rules.py - the lesson model's rules (api/lesson/README.md) measured through attnd's own
computation: a live build/attnd answers POST /v1/attention with text and per-head weights
(float32, as any client sees them), on the chapter's five sentences, their English twins
(api/lesson/twins.json), and sentences invented here from the vocabulary (seeded): Chinese ones,
English ones and runs of words of both languages, each with and without the causal mask. The
rules are written out again here from the README, apart from make_lesson.py's --check (only the
word lists and the twins, its data, are shared):

- the start token 〈s〉 comes first, and its row rests on itself in every head;
- subject and coreference: a row with no relation rests on 〈s〉 (largest weight, at least 0.9);
  a row with one has its largest weight where the rule says; the two heads' largest keys differ
  on every row where either has a relation;
- coreference: 它/it on the things and systems before it, 他/她/he/she on the people, they on
  the plural nouns (English), less than 0.1 on each of the other kind (or number);
- structure: a closing mark on the nearest opening mark of its pair (at least 0.5 there), any
  other row on the nearest boundary before it (a punctuation mark, or an English clause word such
  as because), else on 〈s〉;
- adjacent: with the causal mask every row on the token before it; without it both neighbours
  (word 1 on word 2, the last word on the one before);
- 实验三: 数据库 replaced by 缓存 in "Redis 是一个内存数据库。" moves 内存's output row by at least
  10% of its norm without the mask, and leaves every earlier row bit for bit with it; the same
  for database -> cache in "Redis is an in-memory database.";
- every relation twins.json lists holds in both languages, and 实验一's largest candidate.

Usage: lesson_rules.py --attnd build/attnd [--texts N] [--seed S]
Prints the measured figures, one line per failed check and "N passed, N failed"; exits 1 on any
failure.
"""

import argparse
import base64
import json
import os
import random
import sys
import tempfile
import urllib.request

import numpy as np

from harness import Checks, start_attnd

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "api", "lesson"))
from make_lesson import ATTR_SETS, KINDS, KINDS_EN, PAIRS, entries  # noqa: E402
from lesson_check import load_twins  # noqa: E402
# (the word lists and the twins only)

check = Checks()
START = "〈s〉"
KIND_ZH = {w: k for k, ws in KINDS for w in ws.split()}
KIND_EN = {w: k for k, ws in KINDS_EN for w in entries(ws)}
KIND = {**KIND_ZH, **KIND_EN}
ATTR = ATTR_SETS
PUNCT_KINDS = ("punct", "open", "close")
TWINS = load_twins()
ADJACENT, SUBJECT, STRUCTURE, COREFERENCE = range(4)

CHAPTER = [
    "程序员把服务器日志发给同事，因为它记录了错误原因。",
    "小王昨天提交了补丁，因为他发现缓存模块在高并发下会返回旧数据。",
    "张工把配置文件发给测试同学，因为它包含新的开关。",
    "小李把笔记本放进背包，因为它太重了。",
    "Redis 是一个内存数据库。",
]
CHAPTER_EN = [s["en"] for s in TWINS["sentences"]]


def decode(t):
    """A base64 tensor {dtype, shape, data} as a float32 array."""
    return np.frombuffer(base64.b64decode(t["data"]), "<f4").reshape(t["shape"])


def ask(port, text, causal, extra=None):
    """(words, weights (4, L, L), output (L, 256)) of text, or None with a failed check."""
    body = {"model": "lesson", "text": text, "need_weights": "per_head", "causal": causal,
            "encoding": "base64"}
    body.update(extra or {})
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/attention",
                                 json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            j = json.load(r)
    except OSError as e:
        check(False, f"{text}: {e}")
        return None
    return j["tokens"], decode(j["weights"]), decode(j["output"])


# ---- The rules, from the README ----------------------------------------------------------------

def subject_target(words, i):
    """A predicate's nearest agent (person, pronoun, system) before it, else its nearest thing;
    None for any other row or a predicate with neither."""
    if KIND[words[i]] != "predicate":
        return None
    before = range(i - 1, 0, -1)
    for kinds in (("person", "pronoun", "system"), ("thing",)):
        for j in before:
            if KIND[words[j]] in kinds:
                return j
    return None


def coref_sets(words, i):
    """(antecedents, wrong kind) of a pronoun row: 它/它们/it things and systems, 他/她/he/she…
    the people a pronoun can stand for, they/them the plural nouns (the singular ones wrong); None
    for other rows or with no antecedent before."""
    w = words[i]
    things = [j for j in range(1, i) if KIND[words[j]] in ("thing", "system")]
    people = [j for j in range(1, i) if words[j] in ATTR["referent_person"]]
    plural = [j for j in things + people if words[j] in ATTR["plural"]]
    one = [j for j in things + people if words[j] not in ATTR["plural"]]
    good, wrong = (things, people) if w in ATTR["it"] else (people, things) if w in ATTR["he"] \
        else (plural, one) if w in ATTR["they"] else (None, None)
    return (good, wrong) if good else None


def structure_target(words, i):
    if i == 0:
        return 0
    pair = [p for p in PAIRS if words[i] in ATTR[p]]
    if KIND[words[i]] == "close":
        for j in range(i - 1, 0, -1):
            if KIND[words[j]] == "open" and words[j] in ATTR[pair[0]]:
                return j
    for j in range(i - 1, 0, -1):
        if KIND[words[j]] in PUNCT_KINDS or words[j] in ATTR["clause"]:
            return j
    return 0


def rules(words, w, causal, label, strict=True):
    """Checks every rule on one answer; returns the least weight a resting row put on 〈s〉. Not
    strict (a run of random words): a closing mark's largest weight on its opening mark is enough
    (several opening marks of its pair far back, one after the other, share the weight)."""
    L = len(words)
    top = lambda h, i: int(np.argmax(w[h, i]))  # noqa: E731
    where = f"{label} (causal {causal})"
    ok = check(words[0] == START, f"{where}: the first token is {words[0]}, not {START}")
    least = 1.0
    for h in range(4):
        ok &= check(top(h, 0) == 0, f"{where}: head {h}'s row of {START} rests elsewhere")
    for i in range(1, L):
        # adjacent, both modes
        b = w[ADJACENT, i, i - 1]
        a = w[ADJACENT, i, i + 1] if i + 1 < L else 0.0
        if causal or L == 2 or i == L - 1:
            good = b >= 0.9
        elif i == 1:
            good = a >= 0.9
        else:
            good = b >= 0.4 and a >= 0.4 and a + b >= 0.9
        ok &= check(good, f"{where}: adjacent row {i} ({words[i]}): {b:.3f} before, {a:.3f} after")
        # subject and coreference: the relation, or rest on 〈s〉
        st, co = subject_target(words, i), coref_sets(words, i)
        if st is None:
            least = min(least, w[SUBJECT, i, 0])
            ok &= check(top(SUBJECT, i) == 0 and w[SUBJECT, i, 0] >= 0.9,
                        f"{where}: subject row {i} ({words[i]}) has no relation but rests on "
                        f"{words[top(SUBJECT, i)]} ({w[SUBJECT, i, 0]:.3f} on {START})")
        else:
            ok &= check(top(SUBJECT, i) == st,
                        f"{where}: subject row {i} ({words[i]}) largest on "
                        f"{words[top(SUBJECT, i)]}, not {words[st]}")
        if co is None:
            least = min(least, w[COREFERENCE, i, 0])
            ok &= check(top(COREFERENCE, i) == 0 and w[COREFERENCE, i, 0] >= 0.9,
                        f"{where}: coreference row {i} ({words[i]}) has no relation but rests on "
                        f"{words[top(COREFERENCE, i)]} ({w[COREFERENCE, i, 0]:.3f} on {START})")
        else:
            good_set, wrong = co
            ok &= check(top(COREFERENCE, i) in good_set and w[COREFERENCE, i, good_set].sum() >= 0.8
                        and all(w[COREFERENCE, i, j] < 0.1 for j in wrong),
                        f"{where}: coreference row {i} ({words[i]}): largest on "
                        f"{words[top(COREFERENCE, i)]}, {w[COREFERENCE, i, good_set].sum():.3f} on "
                        f"{'+'.join(words[j] for j in good_set)}")
        if st is not None or co is not None:
            ok &= check(top(SUBJECT, i) != top(COREFERENCE, i),
                        f"{where}: row {i} ({words[i]}): subject and coreference both largest on "
                        f"{words[top(SUBJECT, i)]}")
        t = structure_target(words, i)
        matched = strict and KIND[words[i]] == "close" and KIND[words[t]] == "open"
        ok &= check(top(STRUCTURE, i) == t and (w[STRUCTURE, i, t] >= 0.5 or not matched),
                    f"{where}: structure row {i} ({words[i]}): largest on "
                    f"{words[top(STRUCTURE, i)]}, {w[STRUCTURE, i, t]:.3f} on {words[t]}")
    return least


# ---- Sentences made up from the vocabulary -----------------------------------------------------

def invented(rng, n):
    """n texts of 2 to 47 words (whitespace between them, so that each is one token): clauses of
    the chapter's shapes with random words, and runs of random words of any kind."""
    by = {}
    for w, k in KIND_ZH.items():
        if k != "start":
            by.setdefault(k, []).append(w)
    pick = lambda k: rng.choice(by[k])  # noqa: E731
    agent = lambda: pick(rng.choice(("person", "system", "pronoun")))  # noqa: E731
    shapes = [
        lambda: [pick("person"), "把", pick("thing"), pick("predicate"), pick("person")],
        lambda: [agent(), rng.choice(["昨天", "今天", "刚才"]), pick("predicate"), pick("thing")],
        lambda: ["因为", pick("pronoun"), pick("predicate"), pick("thing")],
        lambda: [pick("system"), "在", "高并发", "下", "会", pick("predicate"), pick("thing")],
        lambda: [pick("person"), "说", "：", "“", agent(), pick("predicate"), "”"],
        lambda: ["如果", pick("system"), pick("predicate"), "，", pick("person"), "就", "会",
                 pick("predicate"), pick("thing"), "（", pick("thing"), "）"],
        lambda: [pick("thing"), pick("predicate")],
        lambda: [pick("pronoun"), pick("predicate")],
    ]
    out = []
    for _ in range(n):
        words = []
        runs = rng.random() < 0.3
        if runs:  # any words at all
            kinds = list(by)
            words = [pick(rng.choice(kinds)) for _ in range(rng.randint(2, 47))]
        else:
            while len(words) < rng.randint(3, 40):
                words += rng.choice(shapes)() + [rng.choice(["，", "。", "；"])]
            words = words[:47]
        out.append((" ".join(words), "random words" if runs else "invented"))
    return out


def invented_en(rng, n):
    """n English texts of 2 to 47 words: clauses of the twins' shapes with random words, and runs
    of random words of any kind (the English list and the shared punctuation). Words are joined
    by spaces, so two that make a longer entry together (server + log) are one token: the rules
    are checked on the tokens attnd returns."""
    by = {}
    for w, k in KIND_EN.items():
        by.setdefault(k, []).append(w)
    for w, k in KIND_ZH.items():
        if k in PUNCT_KINDS and w.isascii() or w in ("“", "”"):
            by.setdefault(k, []).append(w)
    plural = sorted(ATTR["plural"])
    pick = lambda k: rng.choice(by[k])  # noqa: E731
    agent = lambda: pick(rng.choice(("person", "system", "pronoun")))  # noqa: E731
    shapes = [
        lambda: ["the", pick("person"), "sent", "the", pick("thing"), "to", "the", pick("person")],
        lambda: [agent(), rng.choice(["yesterday", "today", "just now"]), pick("predicate"),
                 "the", pick("thing")],
        lambda: [rng.choice(["because", "but", "so", "then"]), pick("pronoun"),
                 pick("predicate"), "the", pick("thing")],
        lambda: ["the", pick("system"), "would", pick("predicate"), pick("thing"), "under",
                 "high concurrency"],
        lambda: [pick("person"), "said", ":", "“", agent(), pick("predicate"), "”"],
        lambda: ["if", pick("system"), pick("predicate"), ",", pick("person"), "would",
                 pick("predicate"), pick("thing"), "(", pick("thing"), ")"],
        lambda: ["the", rng.choice(plural), pick("predicate"), pick("thing"), "because", "they",
                 pick("predicate")],
        lambda: ["the", pick("thing"), "which", pick("person"), pick("predicate"),
                 pick("predicate")],
        lambda: [pick("thing"), pick("predicate")],
        lambda: [pick("pronoun"), pick("predicate")],
    ]
    out = []
    for _ in range(n):
        words = []
        runs = rng.random() < 0.3
        if runs:
            kinds = list(by)
            words = [pick(rng.choice(kinds)) for _ in range(rng.randint(2, 47))]
        else:
            while len(words) < rng.randint(3, 40):
                words += rng.choice(shapes)() + [rng.choice([",", ".", ";"])]
            words = words[:47]
        out.append((" ".join(words), "random English words" if runs else "invented English"))
    return out


def invented_mixed(rng, n):
    """n runs of 2 to 47 random words of both languages: one vocabulary, each word its own."""
    words = [w for w, k in KIND.items() if k != "start"]
    return [(" ".join(rng.choice(words) for _ in range(rng.randint(2, 47))), "random words, mixed")
            for _ in range(n)]


def exp3(port, text, other, word, replacement, row_word):
    """实验三 on text and other (word replaced by replacement), with and without the mask."""
    for causal in (False, True):
        x = ask(port, text, causal)
        y = ask(port, other, causal)
        if not (x and y):
            continue
        t = x[0].index(word)
        check(y[0][t] == replacement and len(x[0]) == len(y[0]) and x[0][t - 1] == row_word,
              f"实验三: the two splits of {text} and {other}")
        row = x[2][t - 1].astype(np.float64)
        leak = np.linalg.norm(y[2][t - 1] - x[2][t - 1]) / np.linalg.norm(row)
        same = x[2][:t].tobytes() == y[2][:t].tobytes()
        print(f"lesson_rules: 实验三 causal {causal}: {row_word}'s row changes by "
              f"{100 * leak:.1f}% of its norm; rows before {word} bit for bit the same: {same}")
        if causal:
            check(same and leak == 0, f"实验三 with the mask: rows before {word} changed "
                                      f"({100 * leak:.2g}%)")
            check(x[2][t].tobytes() != y[2][t].tobytes(), f"实验三 with the mask: the row of "
                                                          f"{word} did not change")
        else:
            check(leak >= 0.10, f"实验三 without the mask: {row_word}'s row moved only "
                                f"{100 * leak:.1f}%, want >= 10%")


def twins(port):
    """Every relation of twins.json in both languages and modes; 实验一's largest candidate."""
    by_preset = {s["preset"]: s for s in TWINS["sentences"]}
    for s in TWINS["sentences"]:
        for lang in ("zh", "en"):
            for causal in (False, True):
                a = ask(port, s[lang], causal)
                if not a:
                    continue
                words, w = a[0], a[1]
                for r in s["relations"]:
                    row, want = r[lang]
                    h = ("adjacent", "subject", "structure", "coreference").index(r["head"])
                    got = words[int(np.argmax(w[h, words.index(row)]))] if row in words else None
                    check(got == want, f"twin {s['preset']} {s[lang]!r} (causal {causal}): "
                                       f"{r['head']} row {row} largest on {got}, not {want}")
    e1 = TWINS["exp1"]
    for lang in ("zh", "en"):
        a = ask(port, by_preset[e1["preset"]][lang], False)
        if not a:
            continue
        words, w = a[0], a[1]
        i = words.index(e1["query"][lang])
        got = max(e1["candidates"][lang], key=lambda c: w[COREFERENCE, i, words.index(c)])
        check(got == e1["largest"][lang], f"实验一 ({lang}): {e1['query'][lang]} puts the most "
                                          f"on {got}, not {e1['largest'][lang]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnd", required=True)
    ap.add_argument("--texts", type=int, default=300)
    ap.add_argument("--seed", type=int, default=25)
    args = ap.parse_args()
    log = os.path.join(tempfile.gettempdir(), f"attnd-lesson-rules-{os.getpid()}.log")
    proc, port = start_attnd(args.attnd, [], log, "lesson_rules")
    try:
        texts = [(t, "chapter") for t in CHAPTER] + invented(random.Random(args.seed), args.texts)
        texts_en = [(t, "chapter English") for t in CHAPTER_EN] + \
            invented_en(random.Random(args.seed + 1), args.texts)
        mixed = invented_mixed(random.Random(args.seed + 2), args.texts // 6)
        least = {}
        for causal in (False, True):
            for lang, group in (("Chinese", texts), ("English", texts_en), ("both", mixed)):
                for text, kind in group:
                    a = ask(port, text, causal)
                    if a:
                        least[lang] = min(least.get(lang, 1.0), rules(
                            a[0], a[1], causal, f"{kind} {text!r}", not kind.startswith("random")))
        print(f"lesson_rules: {len(texts) + len(texts_en) + len(mixed)} texts ({len(texts)} "
              f"Chinese, {len(CHAPTER)} of them the chapter's; {len(texts_en)} English, "
              f"{len(CHAPTER_EN)} of them its twins; {len(mixed)} runs of both), each with and "
              f"without the causal mask; rows at rest put on {START} at least "
              + ", ".join(f"{v:.4f} ({k})" for k, v in least.items()))
        twins(port)

        # The chapter's figures, as the README's tables give them, and their twins'.
        for text, row, col in ((CHAPTER[0], "它", "服务器日志"), (CHAPTER[1], "他", "小王"),
                               (CHAPTER[2], "它", "配置文件"), (CHAPTER[3], "它", "笔记本"),
                               (CHAPTER[3], "它", "背包"), (CHAPTER_EN[0], "it", "server log"),
                               (CHAPTER_EN[2], "he", "Xiao Wang"),
                               (CHAPTER_EN[3], "it", "config file"),
                               (CHAPTER_EN[1], "it", "laptop"), (CHAPTER_EN[1], "it", "backpack")):
            words, w, _ = ask(port, text, False)
            i, j = words.index(row), words.index(col)
            print(f"lesson_rules: coreference {row} -> {col} {w[COREFERENCE, i, j]:.3f} "
                  f"({START} {w[COREFERENCE, i, 0]:.3f}) in {text}")

        # 实验三: 数据库 -> 缓存, the row of 内存 (the word before), with and without the mask; and
        # database -> cache, the row of in-memory.
        for lang in ("zh", "en"):
            e = TWINS["exp3"][lang]
            other = e["text"].replace(e["word"], e["replacement"])
            exp3(port, e["text"], other, e["word"], e["replacement"], e["row"])

        # Without the start token the words start at 0, and nothing is put before them.
        a = ask(port, CHAPTER[0], False, {"add_special_tokens": False})
        check(a is not None and a[0][0] == "程序员" and START not in a[0],
              "add_special_tokens false: the words alone")
        a = ask(port, CHAPTER_EN[0], False, {"add_special_tokens": False})
        check(a is not None and a[0][0] == "the" and START not in a[0],
              "add_special_tokens false: the English words alone")
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    print(check.summary())
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
