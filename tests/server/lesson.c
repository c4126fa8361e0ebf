/* lesson.c - the built-in lesson model over HTTP: each named head's documented rule on the
 * chapter's sentences and on new ones, sent as text, in Chinese and in English, the causal mask's
 * "no peeking" (实验三), the vocabulary's description, and the errors of words. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "server_test.h"

#define LESSON_MAX 48 /* its positions */

/* One text's answer from lesson: the words as split, and the weights of every head. */
typedef struct lesson_ans {
    char words[LESSON_MAX][64];
    size_t l;
    double *w;          /* (4, l, l): head, query row, key */
    unsigned char *out; /* (l, 256) float32 bytes */
} lesson_ans;

static const char *const HEAD_NAMES[4] = {"adjacent", "subject", "structure", "coreference"};
enum { ADJACENT, SUBJECT, STRUCTURE, COREFERENCE };

static const char *str_or(const char *s) {
    return s ? s : "";
}

/* POSTs text to lesson with per-head weights (and base64 output). */
static bool lesson_ask(int port, const char *text, bool causal, lesson_ans *a) {
    memset(a, 0, sizeof *a);
    json_t *b = json_pack("{s:s,s:s,s:s,s:b,s:s}", "model", "lesson", "text", text, "need_weights",
                          "per_head", "causal", causal, "encoding", "base64");
    char *body = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    reply r;
    post(NULL, port, "/v1/attention", body, &r);
    free(body);
    json_t *j = r.status == 200 ? json_loads(r.body, 0, NULL) : NULL;
    json_t *toks = json_object_get(j, "tokens");
    tens w;
    bool ok = CHECK(j && json_is_array(toks) && json_array_size(toks) <= LESSON_MAX &&
                        tens_from_json(json_object_get(j, "weights"), &w),
                    "lesson %s: %ld %.300s", text, r.status, r.body);
    if (ok) {
        a->l = json_array_size(toks);
        for (size_t i = 0; i < a->l; i++)
            snprintf(a->words[i], sizeof a->words[i], "%s",
                     json_string_value(json_array_get(toks, i)));
        ok = CHECK(w.rank == 3 && w.shape[0] == 4 && w.shape[1] == a->l && w.shape[2] == a->l,
                   "lesson %s: weights shape", text);
        a->w = w.v;
        const char *data = json_string_value(json_object_get(json_object_get(j, "output"), "data"));
        size_t n = 0;
        a->out = data ? b64_decode(data, &n) : NULL;
        ok = ok && CHECK(a->out && n == a->l * 256 * 4, "lesson %s: output", text);
        json_t *hn = json_object_get(j, "head_names");
        for (int h = 0; h < 4; h++)
            ok = ok && CHECK(!strcmp(str_or(json_string_value(json_array_get(hn, (size_t)h))),
                                     HEAD_NAMES[h]),
                             "lesson: head %d is not named %s", h, HEAD_NAMES[h]);
    }
    json_decref(j);
    reply_free(&r);
    return ok;
}

static void lesson_free(lesson_ans *a) {
    free(a->w);
    free(a->out);
}

static double lw(const lesson_ans *a, int head, size_t i, size_t j) {
    return a->w[((size_t)head * a->l + i) * a->l + j];
}

/* The index of the n-th (from 0) occurrence of word; fails the test (and returns 0) if none. */
static size_t at(const lesson_ans *a, const char *word, int n) {
    for (size_t i = 0; i < a->l; i++)
        if (!strcmp(a->words[i], word) && n-- == 0)
            return i;
    CHECK(false, "lesson: no %s in the split text", word);
    return 0;
}

static size_t argmax_row(const lesson_ans *a, int head, size_t i) {
    size_t best = 0;
    for (size_t j = 1; j < a->l; j++)
        if (lw(a, head, i, j) > lw(a, head, i, best))
            best = j;
    return best;
}

static bool in_set(const char *word, const char *const *set) {
    for (; *set; set++)
        if (!strcmp(word, *set))
            return true;
    return false;
}

static const char *const PUNCT[] = {"，", "。", "！", "？", "；", "：", "、", ",",
                                    ".",  "!",  "?",  ";",  ":",  "“",  "（", "《",
                                    "「", "(",  "”",  "）", "》", "」", ")",  NULL};
static const char *const OPENS[] = {"“", "（", "《", "「", "(", NULL};
static const char *const CLOSES[] = {"”", "）", "》", "」", ")", NULL};
/* English words that open a clause, boundaries as the punctuation marks are. */
static const char *const CLAUSE[] = {"because", "but",  "which", "who",   "so",
                                     "if",      "then", "when",  "while", NULL};

/* The rules of adjacent and structure (api/lesson/README.md), on every row of a text whose
 * word 0 is the start token 〈s〉: adjacent puts 〈s〉's row on itself; with the causal mask every
 * other row on the token before it, without it a word between two words on both (0.4 each at
 * least), word 1 on word 2 and the last word on the one before. Structure: a closing mark on the
 * nearest opening mark of its pair, any other token on the nearest boundary before it (a
 * punctuation mark or an English clause word), else on 〈s〉. */
static void lesson_rows(const lesson_ans *a, const char *text, bool causal) {
    CHECK(!strcmp(a->words[0], "〈s〉") && lw(a, ADJACENT, 0, 0) >= 0.9,
          "adjacent, %s: row 0 is %s, %.3f on itself", text, a->words[0], lw(a, ADJACENT, 0, 0));
    for (size_t i = 1; i < a->l; i++) {
        bool both = !causal && i > 1 && i + 1 < a->l, ahead = !causal && i == 1 && a->l > 2;
        double before = lw(a, ADJACENT, i, i - 1),
               after = i + 1 < a->l ? lw(a, ADJACENT, i, i + 1) : 0;
        CHECK(both    ? before >= 0.4 && after >= 0.4 && before + after >= 0.9
              : ahead ? after >= 0.9
                      : before >= 0.9,
              "adjacent (causal %d), %s row %zu (%s): %.3f before, %.3f after", causal, text, i,
              a->words[i], before, after);
    }
    for (size_t i = 0; i < a->l; i++) {
        /* A closing mark: the nearest opening mark of its pair before it; any other token: the
         * nearest boundary before it; none: the first token. */
        size_t want = 0;
        int pair = -1;
        for (int k = 0; CLOSES[k]; k++)
            if (!strcmp(a->words[i], CLOSES[k]))
                pair = k;
        bool found = false;
        for (size_t j = i; j-- > 0 && !found;)
            if (pair >= 0 ? !strcmp(a->words[j], OPENS[pair])
                          : in_set(a->words[j], PUNCT) || in_set(a->words[j], CLAUSE))
                want = j, found = true;
        for (size_t j = i; pair >= 0 && !found && j-- > 0;)
            if (in_set(a->words[j], PUNCT) || in_set(a->words[j], CLAUSE))
                want = j, found = true;
        CHECK(argmax_row(a, STRUCTURE, i) == want && lw(a, STRUCTURE, i, want) >= 0.5,
              "structure, %s row %zu (%s): largest on %s, %.3f on %s", text, i, a->words[i],
              a->words[argmax_row(a, STRUCTURE, i)], lw(a, STRUCTURE, i, want), a->words[want]);
    }
}

/* A row's largest weight in subject is on the given word. */
static void lesson_subject(const lesson_ans *a, const char *text, const char *verb, int vn,
                           const char *subject, int sn) {
    size_t i = at(a, verb, vn), j = at(a, subject, sn), got = argmax_row(a, SUBJECT, i);
    CHECK(got == j, "subject, %s: %s puts its largest weight on %s (%.3f), not %s (%.3f)", text,
          verb, a->words[got], lw(a, SUBJECT, i, got), subject, lw(a, SUBJECT, i, j));
}

/* coreference: the pronoun's row puts at least min on the candidates together, below 0.1 on
 * each of the others. */
static void lesson_coref(const lesson_ans *a, const char *text, const char *pronoun,
                         const char *const *cands, double min, const char *const *others) {
    size_t i = at(a, pronoun, 0);
    double sum = 0;
    for (; *cands; cands++)
        sum += lw(a, COREFERENCE, i, at(a, *cands, 0));
    CHECK(sum >= min, "coreference, %s: %s puts %.3f on its antecedents, want >= %.2f", text,
          pronoun, sum, min);
    for (; others && *others; others++) {
        double w = lw(a, COREFERENCE, i, at(a, *others, 0));
        CHECK(w < 0.1, "coreference, %s: %s puts %.3f on %s", text, pronoun, w, *others);
    }
}

#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* 实验三 on text and other, where word (word 5, after 〈s〉) is replaced by replacement: with the
 * causal mask the rows before it are bit for bit the same and its own row changes; without the
 * mask an earlier row changes too. */
static void lesson_exp3(int port, const char *text, const char *other, const char *word,
                        const char *replacement) {
    for (int causal = 1; causal >= 0; causal--) {
        lesson_ans x, y;
        if (!lesson_ask(port, text, causal, &x))
            return;
        if (!lesson_ask(port, other, causal, &y)) {
            lesson_free(&x);
            return;
        }
        size_t t = at(&x, word, 0), row = 256 * 4;
        CHECK(x.l == y.l && t == 5 && !strcmp(y.words[t], replacement),
              "实验三: the two splits of %s", text);
        bool before_same = true;
        for (size_t i = 0; i < t && x.l == y.l; i++)
            before_same = before_same && !memcmp(x.out + i * row, y.out + i * row, row);
        bool at_differs = x.l == y.l && memcmp(x.out + t * row, y.out + t * row, row) != 0;
        if (causal)
            CHECK(before_same && at_differs,
                  "实验三 causal, %s: rows before %s unchanged %d, its row changed %d", text, word,
                  before_same, at_differs);
        else
            CHECK(!before_same, "实验三 without the mask, %s: no earlier row changed", text);
        lesson_free(&x);
        lesson_free(&y);
    }
}

/* The same rules in English: the twins of the chapter's sentences (api/lesson/twins.json) and
 * new ones, each head's relation on its rows, 实验一 and 实验三, and an unknown English word. */
static void test_lesson_english(int port) {
    static const char *const S1 = "The programmer sent the server log to a colleague, because it "
                                  "recorded the cause of the error.",
                             *S2 = "Xiao Wang submitted a patch yesterday, because he found the "
                                   "cache module would return stale data under high concurrency.",
                             *S3 = "Engineer Zhang sent the config file to the tester, because it "
                                   "contains a new switch.",
                             *S4 = "Xiao Li put the laptop in the backpack, because it is too "
                                   "heavy.",
                             *S5 = "Redis is an in-memory database.";
    static const char *const N1 = "The teacher sent the document to the students, because it "
                                  "contains a new task.",
                             *N2 = "The manager checked the code yesterday, because she found the "
                                   "interface would return errors.",
                             *N3 = "Xiao Ming put the key in the box, because it is too big.",
                             *N4 = "The ops engineer said: “the database broke”, then he restarted "
                                   "the server.",
                             *N5 = "If the script failed, the programmer would change the config "
                                   "file (the new switch).",
                             *N6 = "Xiao Hong wrote the report. She sent it to the customer.",
                             *N7 = "The users sent the logs to the programmer, because they needed "
                                   "the screenshots.",
                             *N8 = "The log which the programmer sent recorded the error.";
    const char *texts[] = {S1, S2, S3, S4, S5, N1, N2, N3, N4, N5, N6, N7, N8};
    enum { NT = sizeof texts / sizeof texts[0] };
    for (int causal = 0; causal < 2; causal++) {
        lesson_ans a[NT];
        size_t got = 0;
        while (got < NT && lesson_ask(port, texts[got], causal, &a[got]))
            lesson_rows(&a[got], texts[got], causal), got++;
        if (got == NT) {
            /* The split: multi-word entries are one token, letters in any case. */
            CHECK(a[0].l == 19 && !strcmp(a[0].words[1], "the") &&
                      !strcmp(a[0].words[5], "server log") && !strcmp(a[0].words[9], ","),
                  "the English split of %s: %zu tokens, %s %s", S1, a[0].l, a[0].words[1],
                  a[0].words[5]);
            lesson_coref(&a[0], S1, "it", WORDS("server log"), 0.8,
                         WORDS("programmer", "colleague"));
            lesson_coref(&a[1], S2, "he", WORDS("Xiao Wang"), 0.8, WORDS("patch"));
            lesson_coref(&a[2], S3, "it", WORDS("config file"), 0.8,
                         WORDS("Engineer Zhang", "tester"));
            lesson_coref(&a[3], S4, "it", WORDS("laptop", "backpack"), 0.8, WORDS("Xiao Li"));
            /* 实验一: of the four candidates, config file has the largest weight. */
            size_t it = at(&a[2], "it", 0);
            const char *const cands[] = {"Engineer Zhang", "config file", "tester", "new switch"};
            for (int k = 0; k < 4; k++)
                CHECK(k == 1 || lw(&a[2], COREFERENCE, it, at(&a[2], cands[k], 0)) <
                                    lw(&a[2], COREFERENCE, it, at(&a[2], "config file", 0)),
                      "实验一 in English: it puts more on %s than on config file", cands[k]);
            lesson_coref(&a[5], N1, "it", WORDS("document"), 0.8, WORDS("teacher", "students"));
            lesson_coref(&a[6], N2, "she", WORDS("manager"), 0.8, WORDS("code"));
            lesson_coref(&a[7], N3, "it", WORDS("key", "box"), 0.8, WORDS("Xiao Ming"));
            lesson_coref(&a[8], N4, "he", WORDS("ops engineer"), 0.8, WORDS("database"));
            lesson_coref(&a[10], N6, "she", WORDS("Xiao Hong"), 0.8, WORDS("report"));
            lesson_coref(&a[10], N6, "it", WORDS("report"), 0.8, WORDS("Xiao Hong", "she"));
            lesson_coref(&a[11], N7, "they", WORDS("users", "logs"), 0.8, WORDS("programmer"));
            lesson_subject(&a[0], S1, "sent", 0, "programmer", 0);
            lesson_subject(&a[0], S1, "recorded", 0, "it", 0);
            lesson_subject(&a[1], S2, "submitted", 0, "Xiao Wang", 0);
            lesson_subject(&a[1], S2, "found", 0, "he", 0);
            lesson_subject(&a[1], S2, "return", 0, "cache module", 0);
            lesson_subject(&a[2], S3, "sent", 0, "Engineer Zhang", 0);
            lesson_subject(&a[2], S3, "contains", 0, "it", 0);
            lesson_subject(&a[3], S4, "put", 0, "Xiao Li", 0);
            lesson_subject(&a[3], S4, "is too heavy", 0, "it", 0);
            lesson_subject(&a[4], S5, "is", 0, "Redis", 0);
            lesson_subject(&a[5], N1, "sent", 0, "teacher", 0);
            lesson_subject(&a[6], N2, "checked", 0, "manager", 0);
            lesson_subject(&a[6], N2, "return", 0, "interface", 0);
            lesson_subject(&a[7], N3, "is too big", 0, "it", 0);
            lesson_subject(&a[8], N4, "said", 0, "ops engineer", 0);
            lesson_subject(&a[8], N4, "broke", 0, "database", 0);
            lesson_subject(&a[8], N4, "restarted", 0, "he", 0);
            lesson_subject(&a[9], N5, "failed", 0, "script", 0);
            lesson_subject(&a[9], N5, "change", 0, "programmer", 0);
            lesson_subject(&a[10], N6, "wrote", 0, "Xiao Hong", 0);
            lesson_subject(&a[10], N6, "sent", 0, "she", 0);
            lesson_subject(&a[11], N7, "needed", 0, "they", 0);
            /* Where one layer goes wrong, as the README shows: a relative clause puts an agent
             * between a predicate and its subject. */
            lesson_subject(&a[12], N8, "recorded", 0, "programmer", 0);
        }
        for (size_t t = 0; t < got; t++)
            lesson_free(&a[t]);
    }
    lesson_exp3(port, S5, "Redis is an in-memory cache.", "database", "cache");
    reply r;
    post(NULL, port, "/v1/attention",
         "{\"model\":\"lesson\",\"text\":\"The programmer sent the serverlog.\"}", &r);
    check_error(&r, 400, "unknown_token", "text", "unknown English word in text");
    CHECK(strstr(r.body, "\\\"serverlog\\\" at character 24"), "unknown English word: %s", r.body);
    reply_free(&r);
}

/* Each head's rule, measured over HTTP on the chapter's sentences and on new ones; the causal
 * mask's promise (实验三); the vocabulary's description; the errors of words. */
void test_lesson(int port) {
    static const char *const S1 = "程序员把服务器日志发给同事，因为它记录了错误原因。",
                             *S2 = "小王昨天提交了补丁，因为他发现缓存模块在高并发下会返回旧数据。",
                             *S3 = "张工把配置文件发给测试同学，因为它包含新的开关。",
                             *S4 = "小李把笔记本放进背包，因为它太重了。",
                             *S5 = "Redis 是一个内存数据库。";
    /* New sentences made from the vocabulary. */
    static const char *const N1 = "老师把文档发给学生，因为它包含新的任务。",
                             *N2 = "经理昨天检查了代码，因为她发现接口会返回错误。",
                             *N3 = "小明把钥匙放进盒子，因为它太大了。",
                             *N4 = "运维说：“数据库坏了”，然后他重启了服务器。",
                             *N5 = "如果脚本出错了，程序员就会修改配置文件（新的）。",
                             *N6 = "小红写了报告。她把它发给客户。";
    const char *texts[] = {S1, S2, S3, S4, S5, N1, N2, N3, N4, N5, N6};
    for (int causal = 0; causal < 2; causal++) { /* every rule holds with and without the mask */
        lesson_ans a[11];
        size_t got = 0;
        while (got < 11 && lesson_ask(port, texts[got], causal, &a[got]))
            lesson_rows(&a[got], texts[got], causal), got++;
        if (got == 11) {
            /* coreference: the thresholds on the chapter's sentences. */
            lesson_coref(&a[0], S1, "它", WORDS("服务器日志"), 0.5, WORDS("程序员", "同事"));
            lesson_coref(&a[1], S2, "他", WORDS("小王"), 0.5, NULL);
            lesson_coref(&a[2], S3, "它", WORDS("配置文件"), 0.5, WORDS("张工", "测试同学"));
            lesson_coref(&a[3], S4, "它", WORDS("笔记本", "背包"), 0.8, WORDS("小李"));
            /* 实验一: of 张工, 配置文件, 测试同学, 新的开关, 配置文件 has the largest weight. */
            size_t it = at(&a[2], "它", 0);
            const char *const cands[] = {"张工", "配置文件", "测试同学", "新的开关"};
            for (int k = 0; k < 4; k++)
                CHECK(k == 1 || lw(&a[2], COREFERENCE, it, at(&a[2], cands[k], 0)) <
                                    lw(&a[2], COREFERENCE, it, at(&a[2], "配置文件", 0)),
                      "实验一: 它 puts more on %s than on 配置文件", cands[k]);
            lesson_coref(&a[5], N1, "它", WORDS("文档"), 0.8, WORDS("老师", "学生"));
            lesson_coref(&a[6], N2, "她", WORDS("经理"), 0.8, WORDS("代码"));
            lesson_coref(&a[7], N3, "它", WORDS("钥匙", "盒子"), 0.8, WORDS("小明"));
            lesson_coref(&a[8], N4, "他", WORDS("运维"), 0.8, WORDS("数据库"));
            lesson_coref(&a[10], N6, "她", WORDS("小红"), 0.8, WORDS("报告"));
            lesson_coref(&a[10], N6, "它", WORDS("报告"), 0.8, WORDS("小红", "她"));
            /* subject: the four, then the rest. */
            lesson_subject(&a[0], S1, "发给", 0, "程序员", 0);
            lesson_subject(&a[1], S2, "提交了", 0, "小王", 0);
            lesson_subject(&a[3], S4, "放进", 0, "小李", 0);
            lesson_subject(&a[0], S1, "记录了", 0, "它", 0);
            lesson_subject(&a[1], S2, "发现", 0, "他", 0);
            lesson_subject(&a[1], S2, "返回", 0, "缓存模块", 0);
            lesson_subject(&a[2], S3, "发给", 0, "张工", 0);
            lesson_subject(&a[2], S3, "包含", 0, "它", 0);
            lesson_subject(&a[3], S4, "太重了", 0, "它", 0);
            lesson_subject(&a[4], S5, "是", 0, "Redis", 0);
            lesson_subject(&a[5], N1, "发给", 0, "老师", 0);
            lesson_subject(&a[5], N1, "包含", 0, "它", 0);
            lesson_subject(&a[6], N2, "检查了", 0, "经理", 0);
            lesson_subject(&a[6], N2, "返回", 0, "接口", 0);
            lesson_subject(&a[7], N3, "太大了", 0, "它", 0);
            lesson_subject(&a[8], N4, "说", 0, "运维", 0);
            lesson_subject(&a[8], N4, "坏了", 0, "数据库", 0);
            lesson_subject(&a[8], N4, "重启了", 0, "他", 0);
            lesson_subject(&a[9], N5, "出错了", 0, "脚本", 0);
            lesson_subject(&a[9], N5, "修改", 0, "程序员", 0);
            lesson_subject(&a[10], N6, "写了", 0, "小红", 0);
        }
        for (size_t t = 0; t < got; t++)
            lesson_free(&a[t]);
    }

    /* 实验三: replacing 数据库 (word 5, after 〈s〉) leaves rows 0-4 bit for bit as they were with
     * the causal mask, and changes row 5; without the mask an earlier row changes too. */
    lesson_exp3(port, S5, "Redis 是一个内存缓存。", "数据库", "缓存");

    /* GET /v1/models/lesson: the vocabulary (every chapter word in it) and the head names. */
    reply r;
    get(port, "/v1/models/lesson", &r);
    json_t *j = json_loads(r.body, 0, NULL);
    json_t *vocab = json_object_get(j, "vocab"), *hn = json_object_get(j, "head_names");
    CHECK(r.status == 200 && json_is_array(vocab) &&
              json_integer_value(json_object_get(j, "vocab_size")) ==
                  (json_int_t)json_array_size(vocab) &&
              json_integer_value(json_object_get(j, "max_tokens")) == LESSON_MAX &&
              json_is_false(json_object_get(j, "default")) && json_array_size(hn) == 4,
          "GET /v1/models/lesson: %ld %.300s", r.status, r.body);
    for (int h = 0; h < 4; h++)
        CHECK(!strcmp(str_or(json_string_value(json_array_get(hn, (size_t)h))), HEAD_NAMES[h]),
              "GET /v1/models/lesson: head %d", h);
    json_decref(j);
    reply_free(&r);
    get(port, "/v1/models", &r);
    j = json_loads(r.body, 0, NULL);
    for (size_t k = 0; k < json_array_size(json_object_get(j, "models")); k++) {
        json_t *m = json_array_get(json_object_get(j, "models"), k);
        const char *n = json_string_value(json_object_get(m, "name"));
        bool lesson = n && !strcmp(n, "lesson"), words = lesson || (n && !strcmp(n, "induction"));
        CHECK(json_is_integer(json_object_get(m, "vocab_size")) &&
                  (json_integer_value(json_object_get(m, "vocab_size")) > 0) == words &&
                  (json_object_get(m, "head_names") != NULL) == lesson &&
                  !json_object_get(m, "vocab"),
              "GET /v1/models: model %s: vocab_size, head_names", n ? n : "?");
    }
    json_decref(j);
    reply_free(&r);
    get(port, "/v1/models/nope", &r);
    check_error(&r, 404, "unknown_model", NULL, "GET /v1/models/nope");
    CHECK(strstr(r.body, "nope") != NULL, "GET /v1/models/nope: the message names it");
    reply_free(&r);
    get(port, "/v1/models/", &r);
    check_error(&r, 404, "unknown_model", NULL, "GET /v1/models/");
    reply_free(&r);
    get(port, "/v1/models/%6Cesson", &r); /* the path is percent-decoded */
    CHECK(r.status == 200 && strstr(r.body, "\"name\":\"lesson\""), "GET /v1/models/%%6Cesson: %ld",
          r.status);
    reply_free(&r);

    /* Words over HTTP: an unknown word in text (its offset in characters), in tokens; demo. */
    post(NULL, port, "/v1/attention",
         "{\"model\":\"lesson\",\"text\":\"程序员把服务器日志发给小赵\"}", &r);
    check_error(&r, 400, "unknown_token", "text", "unknown word in text");
    CHECK(strstr(r.body, "\\\"小赵\\\" at character 11"), "unknown word: %s", r.body);
    reply_free(&r);
    post(NULL, port, "/v1/attention",
         "{\"model\":\"lesson\",\"tokens\":[\"程序员\",\"把\",\"服务器\",\"服务器 日志\"]}", &r);
    check_error(&r, 400, "unknown_token", "tokens[3]", "unknown word in tokens");
    reply_free(&r);
    post(NULL, port, "/v1/attention", "{\"text\":\"它\"}", &r);
    check_error(&r, 400, "invalid_field", "text", "text for demo, which has no vocabulary");
    reply_free(&r);
    test_lesson_english(port);
}
