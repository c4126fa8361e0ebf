/* json.c - the JSON reader of api/: one validating pass over the text (RFC 8259, UTF-8,
 * bounded nesting, never reading outside the buffer), then cheap navigation over the validated
 * text with no tree and no copies, and exact number parsing.
 *
 * Why not jansson: it copies every string byte by byte and allocates a node per number; an
 * 8 MiB base64 tensor took 211 ms to load with it, twice the compute of the job it carried.
 * This reader validates that string at memory speed, and the tensor decoder then reads the
 * base64 in place. */
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "codec.h"

/* ---- Validation --------------------------------------------------------------------------- */

typedef struct jp {
    const char *s, *p, *e;
    const char *why; /* what is wrong, set at the first error */
    apip_json_root *root;
    size_t max_depth; /* containers may nest this deep (the root object is level 1) */
    bool too_deep;    /* the first error is the nesting limit */
    /* checks a row of numbers whole (apip_num_row_check); NULL: number by number */
    const char *(*row_check)(const char *p, const char *e);
} jp;

static bool jp_fail(jp *j, const char *why) {
    if (!j->why)
        j->why = why;
    return false;
}

static void jp_ws(jp *j) {
    while (j->p < j->e && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
        j->p++;
}

static bool jp_literal(jp *j, const char *lit) {
    size_t n = strlen(lit);
    if ((size_t)(j->e - j->p) < n || memcmp(j->p, lit, n) != 0)
        return jp_fail(j, "unexpected characters (expected a value)");
    j->p += n;
    return true;
}

static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

static bool jp_number(jp *j) {
    const char *p = j->p, *e = j->e;
    if (p < e && *p == '-')
        p++;
    if (p >= e || !is_digit(*p))
        return jp_fail(j, "a number needs a digit after its sign");
    if (*p == '0')
        p++;
    else
        while (p < e && is_digit(*p))
            p++;
    if (p < e && *p == '.') {
        p++;
        if (p >= e || !is_digit(*p))
            return jp_fail(j, "a number needs a digit after its decimal point");
        while (p < e && is_digit(*p))
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || !is_digit(*p))
            return jp_fail(j, "a number needs a digit in its exponent");
        while (p < e && is_digit(*p))
            p++;
    }
    j->p = p;
    return true;
}

/* True when some byte of w is '"', '\\', below 0x20 or at least 0x80 (exact: the "has less
 * than" tricks have no false positives when no byte matches). */
static bool word_special(uint64_t w) {
    const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    uint64_t t = (w & high) | ((w - ones * 0x20) & ~w & high) | ((q - ones) & ~q & high) |
                 ((b - ones) & ~b & high);
    return t != 0;
}

static int hex_val(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Reads 4 hex digits at p (p + 4 <= e checked by the caller); -1 when not hex. */
static long hex4(const char *p) {
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_val(p[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

/* Length of the valid UTF-8 sequence at p (before e) that starts with a byte >= 0x80; 0 when
 * invalid (overlong, surrogate, above U+10FFFF, truncated). */
static size_t utf8_len(const unsigned char *p, const unsigned char *e) {
    unsigned c = p[0], lo = 0x80, hi = 0xBF;
    size_t n;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else
        return 0;
    if ((size_t)(e - p) < n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return n;
}

/* At '"': checks the string and moves past its closing quote. */
static bool jp_string(jp *j) {
    const char *p = j->p + 1, *e = j->e;
    for (;;) {
#ifdef __SSE2__
        /* 16 bytes at a time: '"', '\\', and (as signed bytes) anything below 0x20, which
         * takes in 0x80 and above too. */
        const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                      space = _mm_set1_epi8(0x20);
        while (e - p >= 16) {
            __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
            __m128i sp =
                _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash)),
                             _mm_cmplt_epi8(x, space));
            if (_mm_movemask_epi8(sp))
                break;
            p += 16;
        }
#endif
        while (e - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            if (word_special(w))
                break;
            p += 8;
        }
        if (p >= e)
            return jp_fail(j, "a string is not closed");
        unsigned char c = (unsigned char)*p;
        if (c == '"') {
            j->p = p + 1;
            return true;
        }
        if (c < 0x20) {
            j->p = p;
            return jp_fail(j, "a control character must be escaped inside a string");
        }
        if (c >= 0x80) {
            size_t n = utf8_len((const unsigned char *)p, (const unsigned char *)e);
            if (!n) {
                j->p = p;
                return jp_fail(j, "a string holds invalid UTF-8");
            }
            p += n;
            continue;
        }
        if (c != '\\') {
            p++;
            continue;
        }
        if (e - p < 2) {
            j->p = p;
            return jp_fail(j, "a string is not closed");
        }
        char x = p[1];
        if (x == '"' || x == '\\' || x == '/' || x == 'b' || x == 'f' || x == 'n' || x == 'r' ||
            x == 't') {
            p += 2;
            continue;
        }
        if (x != 'u' || e - p < 6 || hex4(p + 2) < 0) {
            j->p = p;
            return jp_fail(j, "a string holds an invalid escape");
        }
        long u = hex4(p + 2);
        if (u >= 0xDC00 && u <= 0xDFFF) {
            j->p = p;
            return jp_fail(j, "a string holds a lone low surrogate escape");
        }
        if (u >= 0xD800 && u <= 0xDBFF) {
            long lo = e - p >= 12 && p[6] == '\\' && p[7] == 'u' ? hex4(p + 8) : -1;
            if (lo < 0xDC00 || lo > 0xDFFF) {
                j->p = p;
                return jp_fail(j, "a string holds a lone high surrogate escape");
            }
            p += 12;
        } else {
            p += 6;
        }
    }
}

static bool jp_value(jp *j, int depth);

static bool jp_container(jp *j, int depth, bool object) {
    if ((size_t)depth >= j->max_depth) {
        j->too_deep = !j->why;
        return jp_fail(j, "the JSON nests too deeply");
    }
    char close = object ? '}' : ']';
    j->p++;
    jp_ws(j);
    if (j->p < j->e && *j->p == close) {
        j->p++;
        return true;
    }
    if (!object && j->row_check && j->p < j->e && (*j->p == '-' || is_digit(*j->p))) {
        /* A row of numbers, checked whole; when it is not valid (or holds more than numbers),
         * the loop below checks it again, element by element, and finds what is wrong. */
        const char *end = j->row_check(j->p, j->e);
        if (end) {
            j->p = end;
            return true;
        }
    }
    for (;;) {
        apip_json_member m = {{NULL, NULL}, NULL, NULL};
        if (object) {
            if (j->p >= j->e || *j->p != '"')
                return jp_fail(j, "expected a member name in double quotes");
            const char *k = j->p;
            if (!jp_string(j))
                return false;
            m.key = (apip_span){k + 1, j->p - 1};
            jp_ws(j);
            if (j->p >= j->e || *j->p != ':')
                return jp_fail(j, "expected ':' after a member name");
            j->p++;
            jp_ws(j);
        }
        m.val = j->p;
        if (!jp_value(j, depth + 1))
            return false;
        m.val_end = j->p;
        if (object && depth == 0 && j->root) {
            if (j->root->n < APIP_JSON_MAX_MEMBERS)
                j->root->m[j->root->n++] = m;
            else
                j->root->overflow = true;
        }
        jp_ws(j);
        if (j->p < j->e && *j->p == ',') {
            j->p++;
            jp_ws(j);
            continue;
        }
        if (j->p < j->e && *j->p == close) {
            j->p++;
            return true;
        }
        return jp_fail(j, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

/* True when the text at p is one of the non-JSON literals that some encoders write for
 * non-finite floats (Python's json.dumps, JavaScript's JSON5 habits): NaN, Infinity, -Infinity,
 * +Infinity, inf, -inf, nan, in any case. */
static bool nonfinite_literal(const char *p, const char *e) {
    if (p < e && (*p == '-' || *p == '+'))
        p++;
    static const char *const words[] = {"infinity", "inf", "nan"};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(e - p) >= n && !strncasecmp(p, words[i], n))
            return true;
    }
    return false;
}

static bool jp_value(jp *j, int depth) {
    if (j->p >= j->e)
        return jp_fail(j, "the text ends where a value should be");
    if (nonfinite_literal(j->p, j->e))
        return jp_fail(j, "NaN and Infinity are not JSON: send minus infinity in a bias as the "
                          "string \"-inf\" (Python: json.dumps(..., allow_nan=False) finds them), "
                          "and finite numbers elsewhere");
    switch (*j->p) {
    case '{':
        return jp_container(j, depth, true);
    case '[':
        return jp_container(j, depth, false);
    case '"':
        return jp_string(j);
    case 't':
        return jp_literal(j, "true");
    case 'f':
        return jp_literal(j, "false");
    case 'n':
        return jp_literal(j, "null");
    default:
        if (*j->p == '-' || is_digit(*j->p))
            return jp_number(j);
        return jp_fail(j, "unexpected character (expected a value)");
    }
}

int apip_json_check(const char *s, size_t len, const char *what, apip_json_root *root,
                    api_error *err) {
    return apip_json_check_depth(s, len, what, APIP_JSON_MAX_DEPTH, root, err);
}

int apip_json_check_depth(const char *s, size_t len, const char *what, size_t max_depth,
                          apip_json_root *root, api_error *err) {
    return apip_json_check_with(s, len, what, max_depth, apip_num_row_check, root, err);
}

int apip_json_check_with(const char *s, size_t len, const char *what, size_t max_depth,
                         const char *(*row_check)(const char *p, const char *e),
                         apip_json_root *root, api_error *err) {
    if (max_depth == 0 || max_depth > APIP_JSON_DEPTH_CAP)
        max_depth = max_depth ? APIP_JSON_DEPTH_CAP : APIP_JSON_MAX_DEPTH;
    jp j = {
        .s = s, .p = s, .e = s + len, .root = root, .max_depth = max_depth, .row_check = row_check};
    if (root) {
        root->n = 0;
        root->overflow = false;
    }
    if (!s)
        j.e = s;
    /* RFC 8259 8.1: no byte-order mark. Windows editors and PowerShell add one; name it. */
    if (len >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3))
        return api_fail(err, 400, "invalid_json", NULL,
                        "%s starts with a UTF-8 byte-order mark (bytes EF BB BF), which JSON does "
                        "not allow; send the text without it",
                        what);
    jp_ws(&j);
    if (j.p == j.e)
        return api_fail(err, 400, "invalid_json", NULL, "%s is empty; it must be a JSON object",
                        what);
    if (*j.p != '{')
        return api_fail(err, 400, "invalid_json", NULL, "%s must be a JSON object", what);
    bool ok = false;
    if (jp_value(&j, 0)) {
        jp_ws(&j);
        ok = j.p == j.e;
        if (!ok)
            jp_fail(&j, "unexpected characters after the end of the object");
    }
    if (ok)
        return 0;
    size_t line = 1, col = 1;
    for (const char *q = s; q && q < j.p && q < j.e; q++) {
        if (*q == '\n') {
            line++;
            col = 1;
        } else
            col++;
    }
    if (j.too_deep)
        return api_fail(err, 400, "invalid_json", NULL,
                        "%s nests too deeply: more than %zu levels of arrays and objects (the "
                        "max_depth limit; line %zu, column %zu, byte %zu)",
                        what, max_depth, line, col, (size_t)(j.p - s));
    return api_fail(err, 400, "invalid_json", NULL,
                    "%s is not valid JSON: %s (line %zu, column %zu, byte %zu)", what, j.why, line,
                    col, (size_t)(j.p - s));
}

/* ---- Navigation over validated text ------------------------------------------------------- */

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
        p++;
    return p;
}

const char *apip_jv_ws(const char *p) {
    return skip_ws(p);
}

char apip_jv_kind(const char *p) {
    char c = *p;
    if (c == '{' || c == '[' || c == '"' || c == 't' || c == 'f' || c == 'n')
        return c;
    return '0';
}

/* One past the closing quote of the string at p. */
static const char *string_end(const char *p) {
    p++;
    for (;;) {
        /* Validated text: a closing quote exists, and memchr stops at the first match. The
         * bound only keeps p + n from wrapping around. */
        const char *q = memchr(p, '"', (size_t)(UINTPTR_MAX - (uintptr_t)p));
        /* The quote is escaped when an odd number of backslashes precede it. */
        size_t bs = 0;
        while (q - bs > p && q[-1 - (ptrdiff_t)bs] == '\\')
            bs++;
        if (bs % 2 == 0)
            return q + 1;
        p = q + 1;
    }
}

/* The bytes apip_jv_end must stop at inside a container. */
static const bool structural[256] = {
    ['['] = true, [']'] = true, ['{'] = true, ['}'] = true, ['"'] = true};

/* The end of the run of non-structural bytes at p, just after a '[': the next ']' (*close, the
 * first ']' at or after p, found once and kept while p has not passed it) when nothing
 * structural comes before it, as in a row of numbers; else p (the caller goes byte by byte).
 * memchr stops at the first match (C11 7.24.5.1) and scans 16 or more bytes at a time, as
 * apip_num_row_commas does in [p, close); each byte is scanned a bounded number of times,
 * whatever the nesting. */
static const char *leaf_row_end(const char *p, const char **close) {
    if (!*close || *close < p)
        *close = memchr(p, ']', (size_t)(UINTPTR_MAX - (uintptr_t)p)); /* validated: one exists */
    return apip_num_row_commas(p, *close) < 0 ? p : *close;
}

const char *apip_jv_end(const char *p) {
    switch (*p) {
    case '"':
        return string_end(p);
    case 't':
    case 'n':
        return p + 4;
    case 'f':
        return p + 5;
    case '{':
    case '[': {
        size_t depth = 0;
        const char *close = NULL;
        for (;;) {
            while (!structural[(unsigned char)*p])
                p++;
            char c = *p;
            if (c == '"') {
                p = string_end(p);
                continue;
            }
            if (c == '{' || c == '[')
                depth++;
            else if (c == '}' || c == ']') {
                if (--depth == 0)
                    return p + 1;
            }
            p++;
            if (c == '[') /* a row of numbers is skipped whole */
                p = leaf_row_end(p, &close);
        }
    }
    default:
        p++;
        while (is_digit(*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-')
            p++;
        return p;
    }
}

bool apip_jv_obj_next(const char **it, apip_span *key, const char **val) {
    const char *p = skip_ws(*it);
    if (*p == '{' || *p == ',')
        p = skip_ws(p + 1);
    if (*p == '}')
        return false;
    const char *ke = string_end(p);
    *key = (apip_span){p + 1, ke - 1};
    p = skip_ws(skip_ws(ke) + 1); /* past ':' */
    *val = p;
    *it = apip_jv_end(p);
    return true;
}

bool apip_jv_arr_next(const char **it, const char **val) {
    const char *p = skip_ws(*it);
    if (*p == '[' || *p == ',')
        p = skip_ws(p + 1);
    if (*p == ']')
        return false;
    *val = p;
    *it = apip_jv_end(p);
    return true;
}

apip_span apip_jv_string(const char *p) {
    const char *e = string_end(p);
    return (apip_span){p + 1, e - 1};
}

/* Decodes one character of raw string content at *p into its code point. */
static unsigned long next_char(const char **pp) {
    const unsigned char *p = (const unsigned char *)*pp;
    unsigned long c = p[0];
    if (c == '\\') {
        char x = (char)p[1];
        *pp += 2;
        switch (x) {
        case 'b':
            return '\b';
        case 'f':
            return '\f';
        case 'n':
            return '\n';
        case 'r':
            return '\r';
        case 't':
            return '\t';
        case 'u': {
            unsigned long u = (unsigned long)hex4((const char *)p + 2);
            *pp += 4;
            if (u >= 0xD800 && u <= 0xDBFF) {
                unsigned long lo = (unsigned long)hex4((const char *)p + 8);
                *pp += 6;
                return 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            }
            return u;
        }
        default:
            return (unsigned long)x;
        }
    }
    if (c < 0x80) {
        *pp += 1;
        return c;
    }
    size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    c &= n == 4 ? 0x07 : n == 3 ? 0x0F : 0x1F;
    for (size_t i = 1; i < n; i++)
        c = (c << 6) | (p[i] & 0x3F);
    *pp += n;
    return c;
}

static size_t put_utf8(char *o, unsigned long c) {
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

size_t apip_jv_decode(apip_span s, char *out, size_t cap) {
    size_t n = 0, w = 0;
    bool cut = false;
    for (const char *p = s.p; p < s.e;) {
        char tmp[4];
        size_t k = put_utf8(tmp, next_char(&p));
        if (!cut && w + k < cap) {
            memcpy(out + w, tmp, k);
            w += k;
        } else {
            cut = true;
        }
        n += k;
    }
    out[w] = '\0';
    return n;
}

size_t apip_jv_decode_some(const char **p, const char *e, char *out, size_t cap) {
    size_t w = 0;
    while (*p < e) {
        const char *q = *p;
        char tmp[4];
        size_t k = put_utf8(tmp, next_char(&q));
        if (k > cap - w)
            break;
        memcpy(out + w, tmp, k);
        w += k;
        *p = q;
    }
    return w;
}

bool apip_jv_streq(apip_span s, const char *lit) {
    size_t n = strlen(lit);
    if (!memchr(s.p, '\\', (size_t)(s.e - s.p)))
        return (size_t)(s.e - s.p) == n && memcmp(s.p, lit, n) == 0;
    for (const char *p = s.p; p < s.e;) {
        char tmp[4];
        size_t k = put_utf8(tmp, next_char(&p));
        if (k > n || memcmp(tmp, lit, k) != 0)
            return false;
        lit += k;
        n -= k;
    }
    return n == 0;
}

/* ---- Numbers ------------------------------------------------------------------------------ */

/* apip_jv_number and apip_jv_float: number.c. */

int apip_jv_int(const char *p, bool *neg, uint64_t *mag) {
    *neg = false;
    *mag = 0;
    const char *q = p;
    bool minus = *q == '-';
    if (minus)
        q++;
    if (!is_digit(*q))
        return APIP_INT_NOT_INTEGER;
    /* The digits are those of the integer part, then of the fraction: the value is their
     * string D times 10^(x - nfrac). */
    const char *ib = q;
    while (is_digit(*q))
        q++;
    size_t nint = (size_t)(q - ib), nfrac = 0;
    const char *fb = q;
    if (*q == '.') {
        fb = ++q;
        while (is_digit(*q))
            q++;
        nfrac = (size_t)(q - fb);
    }
    long long x = 0;
    if (*q == 'e' || *q == 'E') {
        q++;
        bool xneg = *q == '-';
        if (*q == '+' || *q == '-')
            q++;
        for (; is_digit(*q); q++)
            if (x < 1000000000000LL) /* saturates far beyond any digit count a body can hold */
                x = x * 10 + (*q - '0');
        x = xneg ? -x : x;
    }
    size_t total = nint + nfrac, first = total, last = 0;
    for (size_t k = 0; k < total; k++) {
        char c = k < nint ? ib[k] : fb[k - nint];
        if (c != '0') {
            if (first == total)
                first = k;
            last = k;
        }
    }
    if (first == total) /* 0, -0, 0.000, 0e7 */
        return APIP_INT_OK;
    /* D = S 10^t with S = digits first..last (its last digit nonzero) and t trailing zeros, so
     * the value is S 10^e, an integer exactly when e >= 0. */
    long long e = x - (long long)nfrac + (long long)(total - 1 - last);
    if (e < 0)
        return APIP_INT_NOT_INTEGER;
    *neg = minus;
    if ((long long)(last - first + 1) + e > 20)
        return APIP_INT_TOO_BIG;
    uint64_t v = 0;
    for (size_t k = first; k <= last; k++) {
        uint64_t d = (uint64_t)((k < nint ? ib[k] : fb[k - nint]) - '0');
        if (v > (UINT64_MAX - d) / 10)
            return APIP_INT_TOO_BIG;
        v = v * 10 + d;
    }
    for (long long i = 0; i < e; i++) {
        if (v > UINT64_MAX / 10)
            return APIP_INT_TOO_BIG;
        v *= 10;
    }
    *mag = v;
    return APIP_INT_OK;
}

bool apip_jv_u64(const char *p, uint64_t *out) {
    uint64_t v = 0;
    const char *q = p;
    for (; is_digit(*q); q++) {
        uint64_t d = (uint64_t)(*q - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (q == p || *q == '.' || *q == 'e' || *q == 'E' || (q - p > 1 && *p == '0'))
        return false;
    *out = v;
    return true;
}
