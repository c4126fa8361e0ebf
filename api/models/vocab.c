/* vocab.c - words instead of vectors: the "tokens" and "text" of POST /v1/attention, looked up
 * in a model's vocabulary (its string list, strlist.c) and turned into embeddings
 * (token_embeddings row + position_embeddings row).
 *
 * Text has no spaces to split on in Chinese, so it is split by longest match: at each point the
 * longest token of the vocabulary that the text starts with there is taken. A binary search over
 * the tokens in byte order narrows, byte by byte, the range of tokens that start with what has
 * been read; the cost per word is at most APIP_TOKEN_MAX_BYTES steps of two binary searches,
 * whatever the text. Whitespace (space, tab, CR, LF, U+3000 ideographic space) separates words
 * and is dropped.
 *
 * A vocabulary of words (__metadata__.text_split "words", apip_strlist.words) keeps Latin words
 * whole, for English: a token that ends in an ASCII letter or digit is taken only where the
 * text's word ends too ("it" is not the start of "items"), ASCII letters match in either case
 * ("The" is the token "the"), and the one space inside a multi-word token ("server log") matches
 * one space, tab, CR or LF of the text. The longest token that fits is taken, so "server log"
 * wins over "server" as 服务器日志 wins over 服务器. Everything else (Chinese, punctuation) is
 * split as above, so one vocabulary holds both languages and each word finds its own.
 *
 * Legend: V vocabulary size, P positions, E embedding width, L words. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models.h"

/* ---- Lookup ------------------------------------------------------------------------------- */

/* Byte c as v's order compares it. */
static unsigned char key_byte(const apip_strlist *v, char c) {
    return v->words ? apip_word_fold((unsigned char)c) : (unsigned char)c;
}

/* The token that is exactly s (n bytes), or in a vocabulary of words the same but for the case
 * of its letters: true with *id. */
static bool find_exact(const apip_strlist *v, const char *s, size_t n, uint32_t *id) {
    size_t lo = 0, hi = v->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t t = v->order[mid];
        int c = v->words ? apip_strlist_cmp_fold(v->s[t], v->len[t], s, n)
                         : apip_strlist_cmp(v->s[t], v->len[t], s, n);
        if (c == 0)
            return *id = t, true;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

bool apip_vocab_find(const apip_strlist *v, const char *s, size_t n, uint32_t *id) {
    return find_exact(v, s, n, id);
}

/* In a vocabulary of words, whether a token can end after the first m bytes of s (n bytes):
 * not between two letters or digits of one Latin word. Always true otherwise. */
static bool word_ends(const apip_strlist *v, const char *s, size_t n, size_t m) {
    return !v->words || m >= n || !apip_word_char((unsigned char)s[m - 1]) ||
           !apip_word_char((unsigned char)s[m]);
}

/* The longest token that s (n bytes) starts with (in a vocabulary of words, the longest that
 * ends where a word does; s must then hold the byte after it, when the text has one): true with
 * *id and its length *len. */
static bool find_longest(const apip_strlist *v, const char *s, size_t n, uint32_t *id,
                         size_t *len) {
    size_t lo = 0, hi = v->n;
    bool found = false;
    for (size_t k = 0; k < n && k < APIP_TOKEN_MAX_BYTES && lo < hi; k++) {
        /* [lo, hi) holds the tokens that start with s[0, k); one exactly s[0, k) sorts first. */
        if (v->len[v->order[lo]] == k)
            lo++;
        unsigned char c = key_byte(v, s[k]);
        size_t a = lo, b = hi;
        while (a < b) { /* the first whose byte k is >= c */
            size_t mid = a + (b - a) / 2;
            if (key_byte(v, v->s[v->order[mid]][k]) < c)
                a = mid + 1;
            else
                b = mid;
        }
        lo = a;
        b = hi;
        while (a < b) { /* the first whose byte k is > c */
            size_t mid = a + (b - a) / 2;
            if (key_byte(v, v->s[v->order[mid]][k]) <= c)
                a = mid + 1;
            else
                b = mid;
        }
        hi = a;
        if (lo < hi && v->len[v->order[lo]] == k + 1 && word_ends(v, s, n, k + 1)) {
            *id = v->order[lo];
            *len = k + 1;
            found = true;
        }
    }
    return found;
}

/* ---- Text --------------------------------------------------------------------------------- */

/* Reads the raw content of a JSON string (escapes and all) as decoded UTF-8, keeping more than
 * APIP_TOKEN_MAX_BYTES decoded bytes ahead of the reading point while there are any (a token and
 * the byte after it, which says whether a Latin word ends there). */
typedef struct text_rd {
    const char *p, *e;                      /* raw content not yet decoded */
    char buf[2 * APIP_TOKEN_MAX_BYTES + 8]; /* decoded: [at, len) not yet consumed */
    size_t at, len;
    size_t chars; /* characters (code points) consumed */
} text_rd;

static void rd_fill(text_rd *r) {
    if (r->len - r->at > APIP_TOKEN_MAX_BYTES || r->p >= r->e)
        return;
    memmove(r->buf, r->buf + r->at, r->len - r->at);
    r->len -= r->at;
    r->at = 0;
    r->len += apip_jv_decode_some(&r->p, r->e, r->buf + r->len, sizeof r->buf - r->len);
}

static void rd_take(text_rd *r, size_t n) {
    for (size_t i = 0; i < n; i++)
        r->chars += ((unsigned char)r->buf[r->at + i] & 0xC0) != 0x80;
    r->at += n;
}

/* The bytes of the character at the reading point (1 to 4). */
static size_t rd_char_len(const text_rd *r) {
    unsigned char c = (unsigned char)r->buf[r->at];
    size_t n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    return n < r->len - r->at ? n : r->len - r->at;
}

/* The next word: 1 with *id, 0 at the end of the text, -1 when the text there starts with no
 * token (the reader is left at that point). Whitespace before a word is skipped. */
static int rd_next(text_rd *r, const apip_strlist *v, uint32_t *id) {
    for (;;) {
        rd_fill(r);
        size_t sp = 0;
        if (r->at == r->len)
            return 0;
        if (apip_word_space(r->buf + r->at, r->len - r->at, &sp)) {
            rd_take(r, sp);
            continue;
        }
        size_t n = 0;
        if (!find_longest(v, r->buf + r->at, r->len - r->at, id, &n))
            return -1;
        rd_take(r, n);
        return 1;
    }
}

/* At an unknown word: copies it (up to the next whitespace, or the next point where a token
 * starts, not inside a Latin word in a vocabulary of words, at most 12 characters) into out,
 * quoted. */
static void rd_unknown(text_rd *r, const apip_strlist *v, char *out, size_t cap) {
    char word[64];
    size_t w = 0, chars = 0;
    bool more = false;
    for (;;) {
        size_t n = rd_char_len(r);
        bool latin = n == 1 && apip_word_char((unsigned char)r->buf[r->at]);
        if (w + n < sizeof word) {
            memcpy(word + w, r->buf + r->at, n);
            w += n;
        }
        rd_take(r, n);
        rd_fill(r);
        uint32_t id;
        size_t sp = 0, len = 0;
        if (r->at == r->len || apip_word_space(r->buf + r->at, r->len - r->at, &sp))
            break;
        bool inside = v->words && latin && apip_word_char((unsigned char)r->buf[r->at]);
        if (!inside && find_longest(v, r->buf + r->at, r->len - r->at, &id, &len))
            break;
        if (++chars == 12) {
            more = true;
            break;
        }
    }
    snprintf(out, cap, "\"%.*s%s\"", (int)w, word, more ? "..." : "");
}

/* ---- Words of a request ------------------------------------------------------------------- */

int apip_words_count(const api_model *m, const char *tokens_val, const char *text_val, bool start,
                     size_t max_words, size_t *count, api_error *err) {
    return apip_words_count_at(m, tokens_val, text_val, start, 0, max_words, count, err);
}

int apip_words_count_at(const api_model *m, const char *tokens_val, const char *text_val,
                        bool start, size_t from, size_t max_words, size_t *count, api_error *err) {
    const apip_strlist *v = apip_model_vocab(m);
    const char *name = apip_model_name(m);
    const char *field = tokens_val ? "tokens" : "text";
    size_t p = 0;
    apip_model_position_embeddings(m, &p);
    /* the positions from row from on: p - from of them (none left: the caller refuses the
     * words for its own reason, a session being full) */
    p = p > from ? p - from : 0;
    char shown[80];
    /* n counts the words with the start token; first is 1 when it leads them. */
    size_t first = start && apip_model_start_token(m, NULL) ? 1 : 0, n = first;
    if (!v)
        return api_fail(err, 400, "invalid_field", field,
                        "model %s has no vocabulary, so it takes no %s: send query embeddings (L, "
                        "E), or use a model with a vocabulary (GET /v1/models shows vocab_size)",
                        name, field);
    if (tokens_val) {
        if (apip_jv_kind(tokens_val) != '[')
            return api_fail(err, 400, "invalid_field", "tokens",
                            "tokens must be a list of strings, the words of one text");
        const char *it = tokens_val, *el = NULL;
        char path[48], word[APIP_TOKEN_MAX_BYTES + 1];
        while (apip_jv_arr_next(&it, &el)) {
            if (apip_jv_kind(el) != '"') {
                snprintf(path, sizeof path, "tokens[%zu]", n - first); /* only for an error */
                return api_fail(err, 400, "invalid_field", path,
                                "%s is not a string: tokens is the list of words of one text (it "
                                "has no batch dimension)",
                                path);
            }
            size_t k = apip_jv_decode(apip_jv_string(el), word, sizeof word);
            uint32_t id;
            if (k >= sizeof word || !find_exact(v, word, k, &id)) {
                snprintf(path, sizeof path, "tokens[%zu]", n - first);
                apip_word_quote(shown, sizeof shown, word, k < sizeof word ? k : strlen(word));
                return api_fail(err, 400, "unknown_token", path,
                                "%s %s is not in the vocabulary of model %s (%zu tokens: GET "
                                "/v1/models/%s lists them)",
                                path, shown, name, v->n, name);
            }
            if (++n > max_words || (p && n > p))
                break;
        }
    } else {
        if (apip_jv_kind(text_val) != '"')
            return api_fail(err, 400, "invalid_field", "text", "text must be a string");
        apip_span raw = apip_jv_string(text_val);
        text_rd rd = {.p = raw.p, .e = raw.e};
        uint32_t id;
        int got;
        while ((got = rd_next(&rd, v, &id)) == 1)
            if (++n > max_words || (p && n > p))
                break;
        if (got < 0) {
            size_t at = rd.chars;
            rd_unknown(&rd, v, shown, sizeof shown);
            return api_fail(err, 400, "unknown_token", "text",
                            "%s at character %zu of text is not in the vocabulary of model %s "
                            "(%zu tokens: GET /v1/models/%s lists them)",
                            shown, at, name, v->n, name);
        }
    }
    if (n == first)
        return api_fail(err, 400, "invalid_field", field, "%s holds no words", field);
    if (p && n > p && from)
        return api_fail(err, 400, "invalid_field", field,
                        "%s has more than %zu words, the most model %s has positions for after "
                        "the %zu rows before them (position_embeddings)",
                        field, p - first, name, from);
    if (p && n > p)
        return api_fail(err, 400, "invalid_field", field,
                        "%s has more than %zu words, the most model %s has positions for "
                        "(position_embeddings)%s",
                        field, p - first, name,
                        first ? ", besides its start token at position 0 (\"add_special_tokens\": "
                                "false leaves it out)"
                              : "");
    if (n > max_words)
        return api_fail(err, 413, "job_too_large", field,
                        "%s has more than %zu words, over the max_dim limit", field, max_words);
    *count = n;
    return 0;
}

void apip_words_embed(const api_model *m, const char *tokens_val, const char *text_val, bool start,
                      uint32_t *ids, float *x) {
    apip_words_embed_at(m, tokens_val, text_val, start, 0, ids, x);
}

void apip_words_embed_at(const api_model *m, const char *tokens_val, const char *text_val,
                         bool start, size_t from, uint32_t *ids, float *x) {
    const apip_strlist *v = apip_model_vocab(m);
    const float *tok = apip_model_token_embeddings(m);
    size_t p = 0, e = api_model_describe(m).embed_dim, n = 0;
    const float *pos = apip_model_position_embeddings(m, &p);
    if (start && apip_model_start_token(m, &ids[0]))
        n++;
    if (tokens_val) {
        const char *it = tokens_val, *el = NULL;
        char word[APIP_TOKEN_MAX_BYTES + 1];
        while (apip_jv_arr_next(&it, &el)) {
            size_t k = apip_jv_decode(apip_jv_string(el), word, sizeof word);
            find_exact(v, word, k, &ids[n++]);
        }
    } else {
        apip_span raw = apip_jv_string(text_val);
        text_rd rd = {.p = raw.p, .e = raw.e};
        while (rd_next(&rd, v, &ids[n]) == 1)
            n++;
    }
    /* x is (n, E): row i = token_embeddings[ids[i]] + position_embeddings[from + i]. */
    for (size_t i = 0; i < n; i++) {
        const float *t = tok + (size_t)ids[i] * e;
        float *row = x + i * e;
        for (size_t c = 0; c < e; c++)
            row[c] = pos ? t[c] + pos[(from + i) * e + c] : t[c];
    }
}
