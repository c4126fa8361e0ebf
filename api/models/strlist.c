/* strlist.c - the string lists of a model file's metadata (vocab, head_names): a JSON list of
 * distinct non-empty strings held in one metadata string, read into one allocation with the
 * strings' byte order beside them, and written back as JSON. The lowest unit of the models
 * room: models.c keeps and describes the lists, vocab.c looks words up in them, and this file
 * calls neither.
 *
 * Legend: V vocabulary size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models.h"

/* ---- String lists ------------------------------------------------------------------------- */

/* The list and its arrays, in one allocation. */
typedef struct strlist_mem {
    apip_strlist l;
    /* then: s (n pointers), len (n), order (n), the strings */
} strlist_mem;

void apip_strlist_free(apip_strlist *l) {
    free(l); /* l is the start of its strlist_mem */
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

static long hex4_at(const char *p) {
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_digit(p[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

static const char *skip_space(const char *p, const char *e) {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* At '"' (p < e): the end of a valid JSON string (past its closing quote), or NULL with *why.
 * The text is valid UTF-8 already (it was decoded from a checked JSON string). */
static const char *string_end(const char *p, const char *e, const char **why) {
    for (p++; p < e; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"')
            return p + 1;
        if (c < 0x20)
            return *why = "a control character inside a string", NULL;
        if (c != '\\')
            continue;
        if (e - p < 2)
            break;
        char x = p[1];
        if (strchr("\"\\/bfnrt", x) && x) {
            p++;
            continue;
        }
        long u = x == 'u' && e - p >= 6 ? hex4_at(p + 2) : -1;
        if (u < 0)
            return *why = "an invalid escape", NULL;
        if (u >= 0xDC00 && u <= 0xDFFF)
            return *why = "a lone low surrogate escape", NULL;
        if (u >= 0xD800 && u <= 0xDBFF) {
            long lo = e - p >= 12 && p[6] == '\\' && p[7] == 'u' ? hex4_at(p + 8) : -1;
            if (lo < 0xDC00 || lo > 0xDFFF)
                return *why = "a lone high surrogate escape", NULL;
            p += 6;
        }
        p += 5;
    }
    return *why = "a string that is not closed", NULL;
}

/* Orders indices of the list ctx by their strings (qsort_r, glibc's argument order). */
static int cmp_order(const void *x, const void *y, void *ctx) {
    const apip_strlist *l = ctx;
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return l->words ? apip_strlist_cmp_fold(l->s[a], l->len[a], l->s[b], l->len[b])
                    : apip_strlist_cmp(l->s[a], l->len[a], l->s[b], l->len[b]);
}

/* Whether byte b of token s (k bytes) is a space a vocabulary of words allows: one space
 * between two ASCII letters or digits, as in "server log". */
static bool word_space_ok(const char *s, size_t k, size_t b) {
    return s[b] == ' ' && b > 0 && b + 1 < k && apip_word_char((unsigned char)s[b - 1]) &&
           apip_word_char((unsigned char)s[b + 1]);
}

apip_strlist *apip_strlist_parse(const char *text, size_t n, const char *what, int kind, char *msg,
                                 size_t cap) {
    const char *p = text, *e = text + n, *why = NULL;
    size_t count = 0, bytes = 0;
    /* First pass: the syntax, the number of strings and an upper bound of their bytes. */
    p = skip_space(p, e);
    if (p == e || *p != '[')
        return snprintf(msg, cap, "%s must be a JSON list of strings, like [\"a\", \"b\"]", what),
               NULL;
    p = skip_space(p + 1, e);
    if (p < e && *p == ']') {
        p = skip_space(p + 1, e);
    } else {
        for (;;) {
            if (p == e || *p != '"')
                return snprintf(msg, cap,
                                "%s must be a JSON list of strings: entry %zu is not a string",
                                what, count),
                       NULL;
            const char *q = string_end(p, e, &why);
            if (!q)
                return snprintf(msg, cap, "%s is not valid JSON: entry %zu holds %s", what, count,
                                why),
                       NULL;
            bytes += (size_t)(q - p) + 1; /* decoding never makes a string longer */
            count++;
            p = skip_space(q, e);
            if (p < e && *p == ',') {
                p = skip_space(p + 1, e);
                continue;
            }
            if (p < e && *p == ']') {
                p = skip_space(p + 1, e);
                break;
            }
            return snprintf(msg, cap, "%s is not valid JSON: expected , or ] after entry %zu", what,
                            count - 1),
                   NULL;
        }
    }
    if (p != e)
        return snprintf(msg, cap, "%s is not valid JSON: something follows the list's ]", what),
               NULL;
    if (count == 0)
        return snprintf(msg, cap, "%s is an empty list", what), NULL;
    if (count > UINT32_MAX)
        return snprintf(msg, cap, "%s has more than %u entries", what, UINT32_MAX), NULL;

    /* One allocation: the record, s, len, order, the strings. */
    size_t total = sizeof(strlist_mem), arrays = 0;
    bool ok = apip_mul(count, sizeof(char *) + sizeof(size_t) + sizeof(uint32_t), &arrays) &&
              apip_add(total, arrays, &total) && apip_add(total, bytes, &total);
    strlist_mem *mem = ok ? malloc(total) : NULL;
    if (!mem)
        return snprintf(msg, cap, "out of memory reading %s", what), NULL;
    const char **s = (const char **)(void *)(mem + 1);
    size_t *len = (size_t *)(void *)(s + count);
    uint32_t *order = (uint32_t *)(void *)(len + count);
    char *at = (char *)(order + count);
    bool words = kind == APIP_LIST_WORDS, tokens = words || kind == APIP_LIST_TOKENS;
    mem->l = (apip_strlist){.n = count, .s = s, .len = len, .order = order, .words = words};

    /* Second pass: decode, check each string, sort, look for repeats. */
    size_t max = tokens ? APIP_TOKEN_MAX_BYTES : APIP_NAME_MAX_BYTES;
    char shown[64];
    p = skip_space(text, e) + 1;
    for (size_t i = 0; i < count; i++) {
        p = skip_space(p, e);
        const char *q = string_end(p, e, &why);
        size_t k = apip_jv_decode((apip_span){p + 1, q - 1}, at, (size_t)(q - p));
        s[i] = at;
        len[i] = k;
        order[i] = (uint32_t)i;
        at += k + 1;
        p = skip_space(q, e) + 1; /* past the , or ] */
        apip_word_quote(shown, sizeof shown, s[i], k);
        if (k == 0) {
            snprintf(msg, cap, "%s entry %zu is an empty string", what, i);
            goto fail;
        }
        if (k > max) {
            snprintf(msg, cap, "%s entry %zu %s is %zu bytes long, over the limit of %zu", what, i,
                     shown, k, max);
            goto fail;
        }
        for (size_t b = 0; b < k; b++) {
            size_t sp = 0;
            if ((unsigned char)s[i][b] < 0x20 || s[i][b] == 0x7F) {
                snprintf(msg, cap, "%s entry %zu holds a control character", what, i);
                goto fail;
            }
            if (tokens && apip_word_space(s[i] + b, k - b, &sp) &&
                !(words && word_space_ok(s[i], k, b))) {
                snprintf(msg, cap,
                         words ? "%s entry %zu %s holds whitespace other than one space between "
                                 "two words (letters or digits), which is all text can match"
                               : "%s entry %zu %s holds whitespace, which text splitting drops: "
                                 "split it into two tokens",
                         what, i, shown);
                goto fail;
            }
        }
    }
    qsort_r(order, count, sizeof *order, cmp_order, &mem->l);
    for (size_t i = 1; i < count; i++) {
        uint32_t a = order[i - 1], b = order[i];
        if (!apip_strlist_cmp(s[a], len[a], s[b], len[b])) {
            apip_word_quote(shown, sizeof shown, s[b], len[b]);
            snprintf(msg, cap, "%s lists %s twice (entries %u and %u)", what, shown, a < b ? a : b,
                     a < b ? b : a);
            goto fail;
        }
        if (words && !apip_strlist_cmp_fold(s[a], len[a], s[b], len[b])) {
            char other[64];
            apip_word_quote(shown, sizeof shown, s[a < b ? a : b], len[a < b ? a : b]);
            apip_word_quote(other, sizeof other, s[a < b ? b : a], len[a < b ? b : a]);
            snprintf(msg, cap,
                     "%s lists %s and %s (entries %u and %u), which differ only in the case of "
                     "their letters: text matches letters in either case",
                     what, shown, other, a < b ? a : b, a < b ? b : a);
            goto fail;
        }
    }
    return &mem->l;
fail:
    free(mem);
    return NULL;
}

void apip_strlist_json(const apip_strlist *l, api_buf *out) {
    apip_buf_puts(out, "[");
    for (size_t i = 0; l && i < l->n; i++) {
        if (i)
            apip_buf_puts(out, ",");
        api_buf_json_string(out, l->s[i], l->len[i]);
    }
    apip_buf_puts(out, "]");
}
