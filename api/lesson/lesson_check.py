#!/usr/bin/python3
"""lesson_check.py - make_lesson.py --check: the lesson model's forward pass in numpy, and every
head's rule measured on the chapter's sentences, their English twins (twins.json), invented
template sentences in both languages, with and without the causal mask, and 实验三's leak.
make_lesson.py runs check() before it writes the file; api/lesson/README.md states the rules.
"""

import json
import os

import numpy as np

from make_lesson import (ATTR_SETS, DH, E, H, HEAD_NAMES, HERE, KINDS, P, PAIRS, START,
                         head_weights, position_encoding, split, token_features, vocabulary)


# ---- Forward pass and the rules ----------------------------------------------------------------


def embed(words, tokens, X, Ppos):
    index = {t: n for n, (t, _) in enumerate(tokens)}
    if len(words) > P:
        raise ValueError("more than %d tokens" % P)
    return np.stack([X[index[w]] + Ppos[i] for i, w in enumerate(words)])


def weights(x, Wq, Wk, causal=False):
    """(H, L, L) attention weights of x (L, E), as nn.MultiheadAttention computes them."""
    L = x.shape[0]
    q = (x @ Wq.T).reshape(L, H, DH).transpose(1, 0, 2)
    k = (x @ Wk.T).reshape(L, H, DH).transpose(1, 0, 2)
    s = q @ k.transpose(0, 2, 1) / np.sqrt(DH)
    if causal:
        s = np.where(np.tril(np.ones((L, L), bool)), s, -np.inf)
    s = s - s.max(axis=2, keepdims=True)
    w = np.exp(s)
    return w / w.sum(axis=2, keepdims=True)


def forward(x, Wq, Wk, Wv, Wo, causal=False):
    """(L, E) output of x (L, E): every head's weights times its values, concatenated, out_proj."""
    L = x.shape[0]
    v = (x @ Wv.T).reshape(L, H, DH).transpose(1, 0, 2)
    heads = weights(x, Wq, Wk, causal) @ v  # (H, L, DH)
    return heads.transpose(1, 0, 2).reshape(L, E) @ Wo.T


def rule_targets(words, kind_of):
    """What each head's rule says, per row of words (the start token first, at 0): {row: target}
    for subject and structure, {row: (good, wrong)} for coreference; a row of subject or
    coreference that is not listed has no relation and rests on the start token (0)."""
    attrs = ATTR_SETS
    kinds = [kind_of[w] for w in words]
    L = len(words)
    subj, struct, coref = {}, {}, {}
    for i in range(1, L):
        before = range(i - 1, 0, -1)  # the words before i, nearest first (not the start token)
        if kinds[i] == "predicate":
            agents = [j for j in before if kinds[j] in ("person", "pronoun", "system")]
            things = [j for j in before if kinds[j] == "thing"]
            if agents or things:
                subj[i] = (agents or things)[0]
        pair = [p for p in PAIRS if words[i] in attrs[p]]
        opens = [j for j in before if kinds[j] == "open" and pair and words[j] in attrs[pair[0]]]
        puncts = [j for j in before if kinds[j] in ("punct", "open", "close")
                  or words[j] in attrs["clause"]]  # the boundaries: a mark, or a clause word
        if kinds[i] == "close" and opens:
            struct[i] = opens[0]
        else:
            struct[i] = puncts[0] if puncts else 0
        good = wrong = None
        if words[i] in attrs["it"]:
            good = [j for j in before if kinds[j] in ("thing", "system")]
            wrong = [j for j in before if words[j] in attrs["referent_person"]]
        elif words[i] in attrs["he"]:
            good = [j for j in before if words[j] in attrs["referent_person"]]
            wrong = [j for j in before if kinds[j] in ("thing", "system")]
        elif words[i] in attrs["they"]:  # plural nouns; a singular one is the wrong number
            nouns = [j for j in before if kinds[j] in ("thing", "system")
                     or words[j] in attrs["referent_person"]]
            good = [j for j in nouns if words[j] in attrs["plural"]]
            wrong = [j for j in nouns if words[j] not in attrs["plural"]]
        if good:
            coref[i] = (good, wrong)
    struct[0] = 0
    return subj, struct, coref


SINK_MIN = 0.9  # a row with nothing to show puts at least this on the start token


def check_rules(words, w, kind_of, causal):
    """The failures of each head's documented rule on one text's weights (H, L, L); words[0] is
    the start token. Also returns the least weight a resting row put on the start token."""
    bad = []
    subj, struct, coref = rule_targets(words, kind_of)
    L = len(words)
    name = lambda j: words[j]  # noqa: E731
    sink = 1.0

    def at_least(h, i, j, m, what):
        if w[h, i, j] < m:
            bad.append("%s row %d (%s): %.3f on %s, want >= %.2f" % (
                HEAD_NAMES[h], i, words[i], w[h, i, j], name(j), m))

    # adjacent: the start token's row on itself; with the mask every other row on the word (or
    # token) before it; without it, both neighbours (word 1 has only the word after, the last
    # word only the word before).
    at_least(0, 0, 0, 0.9, "itself")
    for i in range(1, L):
        if causal or L == 2:
            at_least(0, i, i - 1, 0.9, "before")
        elif i == 1:
            at_least(0, i, 2, 0.9, "after")
        elif i == L - 1:
            at_least(0, i, i - 1, 0.9, "before")
        else:
            at_least(0, i, i - 1, 0.4, "before")
            at_least(0, i, i + 1, 0.4, "after")
            if w[0, i, i - 1] + w[0, i, i + 1] < 0.9:
                bad.append("adjacent row %d (%s): %.3f on its two neighbours" % (
                    i, words[i], w[0, i, i - 1] + w[0, i, i + 1]))
    # subject, structure, coreference: the largest weight where the rule says, else on 〈s〉.
    for i in range(L):
        targets = (subj.get(i, 0), struct[i], coref[i][0] if i in coref else [0])
        for h, t in zip((1, 2, 3), targets):
            got = int(np.argmax(w[h, i]))
            ok = got in t if isinstance(t, list) else got == t
            if not ok:
                bad.append("%s row %d (%s): largest on %s (%.3f), want %s" % (
                    HEAD_NAMES[h], i, words[i], name(got), w[h, i, got],
                    "/".join(name(j) for j in t) if isinstance(t, list) else name(t)))
            if h != 2 and (i not in (subj if h == 1 else coref)):
                sink = min(sink, w[h, i, 0])
                at_least(h, i, 0, SINK_MIN, "the start token")
        at_least(2, i, struct[i], 0.5, "its boundary")
    for i, (good, wrong) in coref.items():
        if w[3, i, good].sum() < 0.8:
            bad.append("coreference row %d (%s): %.3f on %s" % (
                i, words[i], w[3, i, good].sum(), "+".join(words[j] for j in good)))
        for j in wrong:
            if w[3, i, j] >= 0.1:
                bad.append("coreference row %d (%s): %.3f on %s" % (i, words[i], w[3, i, j],
                                                                   words[j]))
    # heads apart: where subject or coreference has a relation, their largest keys differ.
    for i in set(subj) | set(coref):
        if int(np.argmax(w[1, i])) == int(np.argmax(w[3, i])):
            bad.append("row %d (%s): subject and coreference both largest on %s" % (
                i, words[i], words[int(np.argmax(w[1, i]))]))
    return bad, sink


def exp3(tokens, X, Pos, weights4, text="Redis 是一个内存数据库。", word="数据库",
         replacement="缓存"):
    """实验三 on text ("Redis 是一个内存数据库。") with the start token: the change of the output
    row of the word before word (内存, before 数据库) when word is replaced, over its norm,
    without and with the causal mask; and the smallest such change without the mask over every
    other word of the vocabulary."""
    Wq, Wk, Wv, Wo = weights4
    vocab = {t for t, _ in tokens}
    words = [START] + split(text, vocab)
    t = words.index(word)
    out = {}
    for causal in (False, True):
        base = forward(embed(words, tokens, X, Pos), Wq, Wk, Wv, Wo, causal)

        def change(w):
            other = words[:t] + [w] + words[t + 1:]
            o = forward(embed(other, tokens, X, Pos), Wq, Wk, Wv, Wo, causal)
            return (np.linalg.norm(o[t - 1] - base[t - 1]) / np.linalg.norm(base[t - 1]),
                    np.abs(o[:t] - base[:t]).max())
        out[causal] = change(replacement)
        if not causal:
            out["min"] = min((change(w)[0], w) for w, _ in tokens if w not in (word, START))
    return out


CHAPTER = [
    "程序员把服务器日志发给同事，因为它记录了错误原因。",
    "小王昨天提交了补丁，因为他发现缓存模块在高并发下会返回旧数据。",
    "张工把配置文件发给测试同学，因为它包含新的开关。",
    "小李把笔记本放进背包，因为它太重了。",
    "Redis 是一个内存数据库。",
]


# The English twins of the chapter's sentences (twins.json pairs them, with their relations).
CHAPTER_EN = [
    "The programmer sent the server log to a colleague, because it recorded the cause of the "
    "error.",
    "Xiao Wang submitted a patch yesterday, because he found the cache module would return stale "
    "data under high concurrency.",
    "Engineer Zhang sent the config file to the tester, because it contains a new switch.",
    "Xiao Li put the laptop in the backpack, because it is too heavy.",
    "Redis is an in-memory database.",
]

# Where the heads go wrong, as the README shows: (text, head, row word, its largest key).
HONEST = [
    ("小红写了报告。她把它发给客户。", 1, "发给", "它"),       # the nearest agent, not 她
    ("他说：“配置文件太大了”", 1, "太大了", "他"),            # agents beat things at any distance
    ("小李把笔记本放进背包，因为它太重了。", 3, "它", "笔记本"),  # 背包 close behind: no 'heavy'
    # English: a relative clause puts an agent between a predicate and its subject
    ("The log which the programmer sent recorded the error.", 1, "recorded", "programmer"),
    ("He said: “the config file is too big”", 1, "is too big", "he"),
    ("Xiao Li put the laptop in the backpack, because it is too heavy.", 3, "it", "laptop"),
]


def template_sentences():
    """Sentences made from the vocabulary by templates: what a class might type."""
    people = "程序员 同事 小王 小李 张工 测试同学 老师 经理 产品经理 运维 小明 老王".split()
    files = "服务器日志 配置文件 文件 代码 文档 邮件 报告 补丁 截图 表格".split()
    objects = "笔记本 电脑 手机 书 钥匙 咖啡".split()
    boxes = "背包 箱子 盒子 抽屉".split()
    systems = "服务器 缓存模块 数据库 Redis 系统 程序 脚本 接口".split()
    out = []
    for a, p1 in enumerate(people):
        p2 = people[(a + 5) % len(people)]
        for b, f in enumerate(files):
            s = systems[(a + b) % len(systems)]
            out.append("%s把%s发给%s，因为它记录了错误原因。" % (p1, f, p2))
            out.append("%s把%s发给%s，因为他需要%s。" % (p1, f, p2, files[(b + 3) % len(files)]))
            out.append("%s昨天修改了%s，因为她发现%s会返回旧数据。" % (p1, f, s))
            out.append("%s告诉%s：“%s出错了”，然后他检查了%s。" % (p1, p2, s, f))
            out.append("如果%s坏了，%s就会打开%s（%s）。" % (s, p1, f, files[(b + 1) % len(files)]))
        for c, o in enumerate(objects):
            box = boxes[(a + c) % len(boxes)]
            out.append("%s把%s放进%s，因为它太重了。" % (p1, o, box))
            out.append("%s今天丢了%s，但是%s找到了它。" % (p1, o, p2))
    for s in systems:
        out.append("%s 是一个内存数据库。" % s)
        out.append("%s在高并发下会返回旧数据，因为它没有更新缓存。" % s)
    # Two or three sentences in one text (up to the 48 positions).
    single = list(out)
    for n, s in enumerate(single[::7]):
        out.append(s + single[(n * 11 + 3) % len(single)])
        three = s + single[(n * 5 + 1) % len(single)] + single[(n * 13 + 2) % len(single)]
        if len(split(three, {t for t, _ in vocabulary()})) <= P:
            out.append(three)
    return out


NAMES_EN = {"Xiao Wang", "Xiao Li", "Engineer Zhang", "Xiao Ming", "Xiao Hong", "Lao Wang",
            "Xiao Zhang", "Redis", "Linux"}


def the(w):
    """A noun phrase: a name alone, any other noun after "the"."""
    return w if w in NAMES_EN else "the " + w


def combined(single, limit):
    """Texts of two or three of the single sentences, each at most limit words."""
    vocab = {t for t, _ in vocabulary()}
    out = []
    for n, s in enumerate(single[::7]):
        out.append(s + " " + single[(n * 11 + 3) % len(single)])
        three = " ".join((s, single[(n * 5 + 1) % len(single)], single[(n * 13 + 2) % len(single)]))
        if len(split(three, vocab)) <= limit:
            out.append(three)
    return [t for t in out if len(split(t, vocab)) <= limit]


def template_sentences_en():
    """The English templates: the Chinese ones' shapes in English word order, and "they"."""
    people = ("programmer, colleague, Xiao Wang, Xiao Li, Engineer Zhang, tester, teacher, "
              "manager, product manager, ops engineer, Xiao Ming, Lao Wang").split(", ")
    files = ("server log, config file, file, code, document, email, report, patch, screenshot, "
             "spreadsheet").split(", ")
    objects = "laptop, computer, phone, book, key, coffee".split(", ")
    boxes = "backpack, suitcase, box, drawer".split(", ")
    systems = "server, cache module, database, Redis, system, program, script, interface".split(", ")
    crowds = "programmers, colleagues, testers, users, customers, engineers".split(", ")
    piles = "logs, files, patches, documents, reports, screenshots, boxes, books".split(", ")
    out = []
    for a, p1 in enumerate(people):
        p2 = people[(a + 5) % len(people)]
        P1, P2 = the(p1)[0].upper() + the(p1)[1:], the(p2)
        for b, f in enumerate(files):
            s = the(systems[(a + b) % len(systems)])
            out.append("%s sent the %s to %s, because it recorded the cause of the error." % (
                P1, f, P2))
            out.append("%s sent the %s to %s, because he needs the %s." % (
                P1, f, P2, files[(b + 3) % len(files)]))
            out.append("%s changed the %s yesterday, because she found %s would return stale "
                       "data." % (P1, f, s))
            out.append("%s told %s: “%s failed”, then he checked the %s." % (P1, P2, s, f))
            out.append("If %s broke, %s would open the %s (the %s)." % (
                s, the(p1), f, files[(b + 1) % len(files)]))
            crowd, pile = crowds[(a + b) % len(crowds)], piles[(a + b) % len(piles)]
            out.append("The %s sent the %s to %s, because they needed the %s." % (
                crowd, f, P2, files[(b + 2) % len(files)]))
            out.append("%s deleted the %s, because they were too old." % (P1, pile))
        for c, o in enumerate(objects):
            box = boxes[(a + c) % len(boxes)]
            out.append("%s put the %s in the %s, because it is too heavy." % (P1, o, box))
            out.append("%s lost the %s today, but %s found it." % (P1, o, P2))
    for s in systems:
        out.append("%s is an in-memory database." % the(s).capitalize() if s != "Redis"
                   else "Redis is an in-memory database.")
        out.append("%s would return stale data under high concurrency, because it did not update "
                   "the cache." % the(s))
    return out + combined(list(out), P - 1)


def load_twins():
    """api/lesson/twins.json: the English twins of the Chinese sentences, with their relations."""
    with open(os.path.join(HERE, "twins.json"), encoding="utf-8") as f:
        return json.load(f)


def check_twins(tokens, X, Pos, W):
    """Every relation twins.json lists, in both languages and both modes: the row's largest
    weight in its head is on the word named; 实验一's largest candidate. The failures."""
    vocab = {t for t, _ in tokens}
    twins, bad = load_twins(), []

    def largest(text, head, row, causal):
        words = [START] + split(text, vocab)
        w = weights(embed(words, tokens, X, Pos), W[0], W[1], causal)
        return words, w[head, words.index(row)]
    for s in twins["sentences"]:
        for r in s["relations"]:
            for lang in ("zh", "en"):
                for causal in (False, True):
                    row, want = r[lang]
                    words, w = largest(s[lang], HEAD_NAMES.index(r["head"]), row, causal)
                    if words[int(np.argmax(w))] != want:
                        bad.append("twin %s (causal %s) %s: %s row %s largest on %s, not %s" % (
                            s["preset"], causal, s[lang], r["head"], row,
                            words[int(np.argmax(w))], want))
    e1 = twins["exp1"]
    text = {s["preset"]: s for s in twins["sentences"]}[e1["preset"]]
    for lang in ("zh", "en"):
        words, w = largest(text[lang], 3, e1["query"][lang], False)
        got = max(e1["candidates"][lang], key=lambda c: w[words.index(c)])
        if got != e1["largest"][lang]:
            bad.append("实验一 (%s): %s puts the most on %s" % (lang, e1["query"][lang], got))
    return bad


def check(verbose):
    """Measures every head's rule on the chapter's sentences, their English twins and the
    template sentences of both languages, with and without the causal mask, and 实验三 in both;
    returns the number of failures."""
    tokens = vocabulary()
    vocab, kind_of = {t for t, _ in tokens}, dict(tokens)
    X, Pos = token_features(tokens), position_encoding()
    W = head_weights()
    Wq, Wk = W[0], W[1]
    texts = {"zh": CHAPTER + template_sentences(), "en": CHAPTER_EN + template_sentences_en()}
    failures, sink = 0, 1.0
    for lang in ("zh", "en"):
        for causal in (False, True):
            for text in texts[lang]:
                words = [START] + split(text, vocab)
                w = weights(embed(words, tokens, X, Pos), Wq, Wk, causal)
                bad, least = check_rules(words, w, kind_of, causal)
                sink = min(sink, least)
                failures += len(bad)
                for b in bad:
                    print("FAIL (causal %s) %s: %s" % (causal, " | ".join(words), b))
    if verbose:
        for text in CHAPTER + CHAPTER_EN:
            words = [START] + split(text, vocab)
            w = weights(embed(words, tokens, X, Pos), Wq, Wk)
            print(" | ".join(words))
            for i, t in enumerate(words):
                if kind_of[t] == "pronoun":
                    print("  coreference row of %s: %s" % (t, ", ".join(
                        "%s %.3f" % (words[j], w[3, i, j]) for j in range(len(words)))))
    # The honest failures the README shows: the rule holds, the reading a person makes does not.
    for text, h, row, want in HONEST:
        words = [START] + split(text, vocab)
        w = weights(embed(words, tokens, X, Pos), Wq, Wk)
        got = words[int(np.argmax(w[h, words.index(row)]))]
        if got != want:
            print("FAIL honest case %s: %s row %s largest on %s, the README says %s" % (
                text, HEAD_NAMES[h], row, got, want))
            failures += 1
    twins = check_twins(tokens, X, Pos, W)
    for b in twins:
        print("FAIL " + b)
    failures += len(twins)
    for lang, e in load_twins()["exp3"].items():
        if lang not in ("zh", "en"):
            continue
        e3 = exp3(tokens, X, Pos, W, e["text"], e["word"], e["replacement"])
        leak, _ = e3[False]
        rel_masked, abs_masked = e3[True]
        print("实验三, %s with 〈s〉, %s -> %s: the row of %s changes by %.1f%% of its norm "
              "without the causal mask, by %g with it (max |change| of the rows before %s); the "
              "least change without the mask over every other word: %.1f%% (%s)"
              % (e["text"], e["word"], e["replacement"], e["row"], 100 * leak, abs_masked,
                 e["word"], 100 * e3["min"][0], e3["min"][1]))
        if leak < 0.10 or e3["min"][0] < 0.10:
            print("FAIL 实验三 (%s): the leak without the causal mask is under 10%%" % lang)
            failures += 1
        if abs_masked != 0:
            print("FAIL 实验三 (%s): with the causal mask an earlier row changed" % lang)
            failures += 1
    n_zh = sum(len(ws.split()) for _, ws in KINDS)
    print("%d texts (%d Chinese, %d English), each with and without the causal mask, and %d "
          "twin relations: %d rule failures; rows at rest put >= %.3f on 〈s〉; vocabulary %d "
          "tokens (%d Chinese, then %d English), E %d, %d positions"
          % (len(texts["zh"]) + len(texts["en"]), len(texts["zh"]), len(texts["en"]),
             sum(len(s["relations"]) for s in load_twins()["sentences"]), failures, sink,
             len(tokens), n_zh, len(tokens) - n_zh, E, P))
    return failures
