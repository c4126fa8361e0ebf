/* tensor.c - decodes the tensor fields of a request: nested JSON arrays (shape inferred from
 * the first element of each level, then every row checked while copying) or binary objects
 * {"dtype": "float32", "shape": [..], "data": "<base64 of little-endian float32>"}.
 *
 * Probing learns the shape without decoding anything, so the job's arena can be sized and
 * checked against the limit first; reading then decodes into the arena. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#define TENSOR_AVX512 1 /* the finite check with AVX-512 where the CPU has it */
#include <immintrin.h>
#endif

#include "v1.h"

/* "name[i0][i1]..." for the first depth indices. */
static void elem_path(char *out, size_t cap, const char *name, const size_t *idx, size_t depth) {
    size_t w = 0;
    int n = snprintf(out, cap, "%s", name);
    w = n > 0 ? (size_t)n : 0;
    for (size_t i = 0; i < depth && w < cap; i++) {
        n = snprintf(out + w, cap - w, "[%zu]", idx[i]);
        w += n > 0 ? (size_t)n : 0;
    }
}

/* ---- Probing ------------------------------------------------------------------------------ */

static int probe_nested(apip_tensor_in *t, size_t max_rank, size_t max_dim, api_error *err) {
    const char *p = t->val;
    size_t idx[APIP_MAX_RANK + 1] = {0};
    char path[160];
    while (apip_jv_kind(p) == '[') {
        /* the paths of errors are made only for them: on the way, printf cost more than the
         * probe itself */
        if (t->rank == max_rank) {
            elem_path(path, sizeof path, t->name, idx, t->rank);
            return api_fail(err, 400, "invalid_field", path,
                            "%s nests deeper than the %zu dimensions it may have", t->name,
                            max_rank);
        }
        size_t n = 0;
        const char *it = p, *el = NULL, *first = apip_jv_ws(p + 1);
        const char *close = *first == '-' || (*first >= '0' && *first <= '9')
                                ? memchr(first, ']', (size_t)(UINTPTR_MAX - (uintptr_t)first))
                                : NULL; /* validated text: a ']' closes the row */
        long commas = close ? apip_num_row_commas(first, close) : -1;
        if (commas >= 0) { /* a row of numbers (and literals): its commas tell its length */
            n = (size_t)commas + 1;
            it = close;
        } else {
            while (apip_jv_arr_next(&it, &el))
                n++;
        }
        if (t->rank == 0) /* it is at the outer array's closing bracket */
            t->end = apip_jv_ws(it) + 1;
        if (n == 0 || n > max_dim)
            elem_path(path, sizeof path, t->name, idx, t->rank);
        if (n == 0)
            return api_fail(err, 400, "invalid_field", path,
                            "%s is an empty array; every dimension of a tensor must be at least 1",
                            path);
        if (n > max_dim)
            return api_fail(err, 413, "job_too_large", path,
                            "%s has %zu elements, over the max_dim limit of %zu per dimension",
                            path, n, max_dim);
        t->dims[t->rank++] = n;
        p = first;
    }
    if (t->rank == 0)
        return api_fail(err, 400, "invalid_field", t->name,
                        "%s must be a tensor: nested arrays of numbers or a {\"dtype\", \"shape\", "
                        "\"data\"} object",
                        t->name);
    return 0;
}

/* "name.field" into out (cap bytes); returns out. For error paths only. */
static const char *sub_path(char *out, size_t cap, const char *name, const char *field) {
    snprintf(out, cap, "%s.%s", name, field);
    return out;
}

/* Reads the "shape" member at shape (an array of positive integers, at most max_rank of them,
 * each at most max_dim) into t->dims and t->rank. Errors name "NAME.shape" or "NAME.shape[i]":
 * 400 invalid_field, 413 job_too_large past max_dim. 0 or -1 with err. */
static int read_shape(apip_tensor_in *t, const char *shape, size_t max_rank, size_t max_dim,
                      api_error *err) {
    char path[160];
    const char *it = shape, *val = NULL;
    if (apip_jv_kind(shape) != '[') {
        sub_path(path, sizeof path, t->name, "shape");
        return api_fail(err, 400, "invalid_field", path, "%s must be an array of integers", path);
    }
    while (apip_jv_arr_next(&it, &val)) {
        uint64_t d = 0;
        bool neg = false;
        int kind = apip_jv_kind(val) == '0' ? apip_jv_int(val, &neg, &d) : APIP_INT_NOT_INTEGER;
        bool bad = t->rank == max_rank || kind == APIP_INT_NOT_INTEGER || neg ||
                   (kind == APIP_INT_OK && d == 0) || kind == APIP_INT_TOO_BIG || d > max_dim;
        if (!bad) {
            t->dims[t->rank++] = (size_t)d;
            continue;
        }
        snprintf(path, sizeof path, "%s.shape[%zu]", t->name, t->rank);
        if (t->rank == max_rank)
            return api_fail(err, 400, "invalid_field", path,
                            "%s.shape has more than the %zu dimensions %s may have", t->name,
                            max_rank, t->name);
        if (kind == APIP_INT_NOT_INTEGER || neg || (kind == APIP_INT_OK && d == 0))
            return api_fail(err, 400, "invalid_field", path,
                            "%s must be a positive integer (a dimension)", path);
        if (kind == APIP_INT_TOO_BIG)
            return api_fail(err, 413, "job_too_large", path,
                            "%s is over 2^64, and over the max_dim limit of %zu per dimension",
                            path, max_dim);
        return api_fail(err, 413, "job_too_large", path,
                        "%s is %llu, over the max_dim limit of %zu per dimension", path,
                        (unsigned long long)d, max_dim);
    }
    if (t->rank == 0) {
        sub_path(path, sizeof path, t->name, "shape");
        return api_fail(err, 400, "invalid_field", path, "%s must not be empty", path);
    }
    return 0;
}

static int probe_binary(apip_tensor_in *t, size_t max_rank, size_t max_dim, api_error *err) {
    char path[160], k[32]; /* made only for an error: printf cost more than the probe */
    const char *it = t->val, *val = NULL, *shape = NULL, *data = NULL;
    bool dtype = false;
    apip_span key;
    while (apip_jv_obj_next(&it, &key, &val)) {
        const char **slot = NULL;
        if (apip_jv_streq(key, "dtype")) {
            if (!dtype && apip_jv_kind(val) == '"' &&
                apip_jv_streq(apip_jv_string(val), "float32")) {
                dtype = true;
                continue;
            }
            sub_path(path, sizeof path, t->name, "dtype");
            if (dtype)
                return api_fail(err, 400, "invalid_field", path, "%s appears twice", path);
            return api_fail(err, 400, "invalid_field", path,
                            "%s must be \"float32\" (little-endian IEEE 754 binary32)", path);
        } else if (apip_jv_streq(key, "shape")) {
            slot = &shape;
        } else if (apip_jv_streq(key, "data")) {
            slot = &data;
        } else {
            apip_jv_decode(key, k, sizeof k);
            sub_path(path, sizeof path, t->name, k);
            return api_fail(err, 400, "invalid_field", path,
                            "%s is not a field of a binary tensor; it has dtype, shape and data",
                            path);
        }
        if (*slot) {
            sub_path(path, sizeof path, t->name, slot == &shape ? "shape" : "data");
            return api_fail(err, 400, "invalid_field", path, "%s appears twice", path);
        }
        *slot = val;
    }
    const char *missing = !dtype ? "dtype" : !shape ? "shape" : !data ? "data" : NULL;
    if (missing) {
        sub_path(path, sizeof path, t->name, missing);
        return api_fail(err, 400, "invalid_field", path,
                        "%s is required in a binary tensor {\"dtype\": \"float32\", \"shape\": "
                        "[..], \"data\": \"<base64>\"}",
                        path);
    }

    if (read_shape(t, shape, max_rank, max_dim, err))
        return -1;

    if (apip_jv_kind(data) != '"') {
        sub_path(path, sizeof path, t->name, "data");
        return api_fail(err, 400, "invalid_field", path, "%s must be a base64 string", path);
    }
    t->b64 = apip_jv_string(data);
    t->b64_escaped = memchr(t->b64.p, '\\', (size_t)(t->b64.e - t->b64.p)) != NULL;
    t->binary = true;
    return 0;
}

/* ---- Base64 diagnosis --------------------------------------------------------------------- */

static bool b64_alpha(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
}

static unsigned b64_val(unsigned char c) {
    if (c >= 'a')
        return c - 'a' + 26u;
    if (c >= 'A')
        return c - 'A' + 0u;
    if (c >= '0')
        return c - '0' + 52u;
    return c == '+' ? 62u : 63u;
}

/* Finds the first reason the data string of t (after JSON escapes; offsets count its bytes) is
 * not base64: a character outside the alphabet (a newline from a line-wrapping encoder, the
 * URL-safe '-' or '_', ...), '=' padding before the end or more of it than a group allows, or
 * nonzero bits left over by the padding. Writes the reason into why (cap bytes) and returns
 * true; false when every character is fine (the length is then what is wrong). One pass. */
static bool b64_diagnose(const apip_tensor_in *t, char *why, size_t cap) {
    const char *p = t->b64.p, *e = t->b64.e;
    char buf[256];
    size_t off = 0, pad_at = SIZE_MAX;
    unsigned char last[2] = {0, 0}; /* the last two alphabet characters */
    while (p < e) {
        size_t n;
        const char *c;
        if (t->b64_escaped) {
            n = apip_jv_decode_some(&p, e, buf, sizeof buf);
            c = buf;
            if (n == 0) /* cannot happen: a character is at most 4 bytes */
                break;
        } else {
            n = (size_t)(e - p) < sizeof buf ? (size_t)(e - p) : sizeof buf;
            c = p;
            p += n;
        }
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)c[i];
            size_t at = off + i;
            if (ch == '=') {
                if (pad_at == SIZE_MAX)
                    pad_at = at;
                continue;
            }
            if (pad_at != SIZE_MAX) {
                snprintf(why, cap,
                         "'=' padding at offset %zu before the end (padding only ends the data)",
                         pad_at);
                return true;
            }
            if (b64_alpha(ch)) {
                last[0] = last[1];
                last[1] = ch;
                continue;
            }
            const char *name = ch == '\n'   ? "newline"
                               : ch == '\r' ? "carriage return"
                               : ch == ' '  ? "space"
                               : ch == '\t' ? "tab"
                                            : NULL;
            if (name)
                snprintf(
                    why, cap, "%s at offset %zu%s", name, at,
                    ch == '\n' || ch == '\r'
                        ? " (a line-wrapped encoding: encode without wrapping, e.g. base64 -w0)"
                        : "");
            else if (ch == '-' || ch == '_')
                snprintf(why, cap,
                         "'%c' at offset %zu (base64url's alphabet; use the standard one, with '+' "
                         "and '/')",
                         ch, at);
            else if (ch >= 0x20 && ch < 0x7F)
                snprintf(why, cap, "'%c' at offset %zu", ch, at);
            else
                snprintf(why, cap, "byte 0x%02X at offset %zu", ch, at);
            return true;
        }
        off += n;
    }
    if (pad_at == SIZE_MAX)
        return false;
    size_t pads = off - pad_at;
    if (pads > 2 || (off % 4 == 0 && pad_at % 4 < 2)) {
        snprintf(why, cap,
                 "%zu '=' at offset %zu: padding fills only the last one or two characters of the "
                 "last group of four",
                 pads, pad_at);
        return true;
    }
    if (off % 4 == 0 &&
        ((pads == 2 && (b64_val(last[1]) & 15)) || (pads == 1 && (b64_val(last[1]) & 3)))) {
        snprintf(why, cap,
                 "the character before the padding ('%c' at offset %zu) leaves nonzero bits "
                 "unused",
                 last[1], pad_at - 1);
        return true;
    }
    return false;
}

/* t->count, the product of t->dims; 413 job_too_large (naming max_job_bytes, the limit such a
 * job cannot fit) when the product or its float32 bytes overflow size_t. 0 or -1 with err. */
static int count_elems(apip_tensor_in *t, size_t max_job_bytes, api_error *err) {
    size_t count = 1, bytes = 0;
    bool fits = true;
    for (size_t i = 0; i < t->rank; i++)
        fits = fits && apip_mul(count, t->dims[i], &count);
    if (!fits || !apip_mul(count, sizeof(float), &bytes)) {
        char shape[96];
        double elems = 1.0;
        for (size_t i = 0; i < t->rank; i++)
            elems *= (double)t->dims[i];
        apip_dims_str(shape, sizeof shape, t->dims, t->rank);
        return api_fail(err, 413, "job_too_large", t->name,
                        "%s has shape %s: %.3g elements, %.3g bytes as float32 (more than size_t "
                        "holds), over the max_job_bytes limit of %zu bytes (%.1f MiB)",
                        t->name, shape, elems, elems * 4.0, max_job_bytes,
                        (double)max_job_bytes / 1048576.0);
    }
    t->count = count;
    return 0;
}

int apip_tensor_shape(apip_tensor_in *t, const char *shape, size_t max_rank, size_t max_dim,
                      size_t max_job_bytes, api_error *err) {
    if (max_rank > APIP_MAX_RANK)
        max_rank = APIP_MAX_RANK;
    return read_shape(t, shape, max_rank, max_dim, err) || count_elems(t, max_job_bytes, err) ? -1
                                                                                              : 0;
}

int apip_tensor_probe(apip_tensor_in *t, const char *name, const char *val, size_t max_rank,
                      size_t max_dim, size_t max_job_bytes, api_error *err) {
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->val = val;
    if (max_rank > APIP_MAX_RANK)
        max_rank = APIP_MAX_RANK;
    char k = apip_jv_kind(val);
    int rc;
    if (k == '[')
        rc = probe_nested(t, max_rank, max_dim, err);
    else if (k == '{')
        rc = probe_binary(t, max_rank, max_dim, err);
    else
        rc = api_fail(err, 400, "invalid_field", name,
                      "%s must be a tensor: nested arrays of numbers or a {\"dtype\": \"float32\", "
                      "\"shape\", \"data\"} object",
                      name);
    if (rc)
        return rc;
    if (count_elems(t, max_job_bytes, err))
        return -1;
    if (!t->binary)
        return 0;

    /* The data must decode to exactly count float32 values. */
    const size_t bytes = t->count * sizeof(float); /* count_elems checked it */
    char path[160], shape[96];
    snprintf(path, sizeof path, "%s.data", name);
    apip_dims_str(shape, sizeof shape, t->dims, t->rank);
    /* The length and the last two characters, after JSON escapes ("\u003d" is a '='). */
    size_t chars = (size_t)(t->b64.e - t->b64.p);
    char last[2] = {chars >= 2 ? t->b64.e[-2] : 0, chars >= 1 ? t->b64.e[-1] : 0};
    if (t->b64_escaped) {
        chars = 0;
        last[0] = last[1] = 0;
        char buf[256];
        for (const char *p = t->b64.p; p < t->b64.e;) {
            size_t n = apip_jv_decode_some(&p, t->b64.e, buf, sizeof buf);
            if (n == 0) /* cannot happen: a character is at most 4 bytes */
                break;
            chars += n;
            last[0] = n >= 2 ? buf[n - 2] : last[1];
            last[1] = buf[n - 1];
        }
    }
    size_t pad = last[1] == '=' ? (last[0] == '=' ? 2 : 1) : 0;
    size_t got = chars % 4 == 0 ? chars / 4 * 3 - pad : 0;
    char why[160];
    if ((chars % 4 != 0 || got != bytes) && b64_diagnose(t, why, sizeof why))
        return api_fail(err, 400, "invalid_field", path, "%s is not valid base64: %s", path, why);
    if (chars % 4 != 0)
        return api_fail(err, 400, "invalid_field", path,
                        "%s is not base64: its length %zu is not a multiple of 4", path, chars);
    if (got != bytes)
        return api_fail(err, 400, "invalid_field", path,
                        "%s decodes to %zu bytes, but shape %s of float32 needs %zu", path, got,
                        shape, bytes);
    return 0;
}

/* ---- Reading ------------------------------------------------------------------------------ */

typedef struct reader {
    const apip_tensor_in *t;
    apip_tensor_kind kind;
    float *f;    /* float kinds */
    uint8_t *u8; /* masks */
    size_t at;   /* elements written */
    size_t idx[APIP_MAX_RANK];
    api_error *err;
} reader;

static int elem_fail(reader *r, size_t depth, int status, const char *code, const char *what) {
    char path[160];
    elem_path(path, sizeof path, r->t->name, r->idx, depth);
    return api_fail(r->err, status, code, path, "%s %s", path, what);
}

/* Reads the leaf element at p; *end gets its end. */
static int read_elem(reader *r, const char *p, const char **end) {
    char k = apip_jv_kind(p);
    size_t depth = r->t->rank;
    if (r->kind == APIP_TENSOR_MASK) {
        if (k == 't' || k == 'f') {
            r->u8[r->at++] = k == 't';
            *end = p + (k == 't' ? 4 : 5);
            return 0;
        }
        double v = k == '0' ? apip_jv_number(p, end) : 2.0;
        if (v != 0.0 && v != 1.0)
            return elem_fail(r, depth, 400, "invalid_field", "must be 0, 1, false or true");
        r->u8[r->at++] = v == 1.0;
        return 0;
    }
    if (k == '0') {
        float v = apip_jv_float(p, end);
        if (!isfinite(v))
            return elem_fail(r, depth, 400, "non_finite",
                             "is not a finite float32: it overflows the float32 range "
                             "(magnitude above 3.4028235e38)");
        r->f[r->at++] = v;
        return 0;
    }
    if (r->kind == APIP_TENSOR_BIAS && k == '"' && apip_jv_streq(apip_jv_string(p), "-inf")) {
        r->f[r->at++] = -INFINITY;
        *end = apip_jv_end(p);
        return 0;
    }
    if (r->kind == APIP_TENSOR_BIAS)
        return elem_fail(r, depth, 400, "invalid_field", "must be a number or the string \"-inf\"");
    return elem_fail(r, depth, 400, "invalid_field", "must be a number");
}

/* The first byte at or after p that is not JSON whitespace (apip_jv_ws, inlined). */
static inline const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
        p++;
    return p;
}

/* Reads the array at p as level lvl; *end_out gets its end. */
static int read_level(reader *r, const char *p, size_t lvl, const char **end_out) {
    const apip_tensor_in *t = r->t;
    char msg[128];
    if (apip_jv_kind(p) != '[') {
        snprintf(msg, sizeof msg, "must be an array of %zu %s", t->dims[lvl],
                 lvl + 1 < t->rank ? "arrays" : "elements");
        return elem_fail(r, lvl, 400, "invalid_field", msg);
    }
    /* Elements in turn: each read (or recursed into) tells where it ends, so the text is
     * walked once. A row of floats goes first to apip_jv_float_row, which reads the numbers in
     * one loop and leaves the rest ("-inf", an infinity, an error) to read_elem. */
    size_t n = 0;
    const char *q = skip_ws(p + 1);
    if (lvl + 1 == t->rank && r->kind != APIP_TENSOR_MASK) {
        n = apip_jv_float_row(q, t->end, r->f + r->at, t->dims[lvl], &q);
        r->at += n;
    }
    while (*q != ']') {
        if (n == t->dims[lvl]) {
            n++;
            break;
        }
        r->idx[lvl] = n++;
        const char *end = NULL;
        if (lvl + 1 < t->rank ? read_level(r, q, lvl + 1, &end) : read_elem(r, q, &end))
            return -1;
        q = skip_ws(end);
        if (*q == ',')
            q = skip_ws(q + 1);
    }
    *end_out = q + 1;
    if (n != t->dims[lvl]) {
        if (n > t->dims[lvl])
            snprintf(msg, sizeof msg,
                     "has more than %zu elements; all rows of a level must be as long as the "
                     "first",
                     t->dims[lvl]);
        else
            snprintf(msg, sizeof msg,
                     "has %zu elements, not %zu; all rows of a level must be as long as the first",
                     n, t->dims[lvl]);
        return elem_fail(r, lvl, 400, "invalid_field", msg);
    }
    return 0;
}

static uint32_t load_le32(const uint8_t *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Checks (and for masks converts) decoded float32 values v[0, n), elements at..at+n. */
static int check_values(reader *r, const uint8_t *bytes, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u = load_le32(bytes + 4 * i);
        float v;
        memcpy(&v, &u, sizeof v);
        bool bad;
        if (r->kind == APIP_TENSOR_MASK) {
            bad = v != 0.0f && v != 1.0f;
            if (!bad)
                r->u8[r->at] = v == 1.0f;
        } else {
            bad = (u & 0x7F800000u) == 0x7F800000u &&
                  !(r->kind == APIP_TENSOR_BIAS && u == 0xFF800000u);
            if (!bad)
                r->f[r->at] = v;
        }
        if (bad) {
            char path[160], index[96];
            size_t rem = r->at;
            size_t idx[APIP_MAX_RANK];
            for (size_t d = r->t->rank; d-- > 0;) {
                idx[d] = rem % r->t->dims[d];
                rem /= r->t->dims[d];
            }
            elem_path(index, sizeof index, "", idx, r->t->rank);
            snprintf(path, sizeof path, "%s.data", r->t->name);
            if (r->kind == APIP_TENSOR_MASK)
                return api_fail(r->err, 400, "invalid_field", path,
                                "%s holds %g at %s; a mask holds only 0 and 1", path, (double)v,
                                index);
            return api_fail(r->err, 400, "non_finite", path,
                            "%s holds %s at %s; only finite values are allowed%s", path,
                            isnan(v) ? "NaN"
                            : v > 0  ? "+infinity"
                                     : "-infinity",
                            index, r->kind == APIP_TENSOR_BIAS ? " (and -infinity)" : "");
        }
        r->at++;
    }
    return 0;
}

/* The error of data that failed to decode, with the reason b64_diagnose finds. */
static int b64_fail(reader *r, const char *path) {
    char why[160];
    if (b64_diagnose(r->t, why, sizeof why))
        return api_fail(r->err, 400, "invalid_field", path, "%s is not valid base64: %s", path,
                        why);
    return api_fail(r->err, 400, "invalid_field", path,
                    "%s is not valid base64 (standard alphabet, '=' padding)", path);
}

#ifdef TENSOR_AVX512
/* all_finite_bits with AVX-512: 16 values per step, the rest under a mask. */
__attribute__((target("avx512f"))) static bool all_finite_avx512(const uint8_t *b, size_t n,
                                                                 uint32_t allowed) {
    const __m512i e = _mm512_set1_epi32(0x7F800000), ok = _mm512_set1_epi32((int)allowed);
    __mmask16 bad = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i u = _mm512_loadu_si512(b + 4 * i);
        bad |= _mm512_mask_cmpneq_epi32_mask(_mm512_cmpeq_epi32_mask(_mm512_and_si512(u, e), e), u,
                                             ok);
    }
    __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
    __m512i u = _mm512_maskz_loadu_epi32(tail, b + 4 * i);
    bad |= _mm512_mask_cmpneq_epi32_mask(
        _mm512_mask_cmpeq_epi32_mask(tail, _mm512_and_si512(u, e), e), u, ok);
    return bad == 0;
}
#endif

/* True when none of the n float32 values at b (native byte order) is an infinity or a NaN,
 * except the bit pattern allowed: one branch-free pass, with AVX-512 where the CPU has it (the
 * plain loop is not vectorised at -O2). */
static bool all_finite_bits(const uint8_t *b, size_t n, uint32_t allowed) {
#ifdef TENSOR_AVX512
    if (apip_cpu_has(APIP_CPU_AVX512F))
        return all_finite_avx512(b, n, allowed);
#endif
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, b + 4 * i, sizeof u);
        bad |= ((u & 0x7F800000u) == 0x7F800000u) & (u != allowed);
    }
    return bad == 0;
}

static int read_binary(reader *r) {
    const apip_tensor_in *t = r->t;
    char path[160];
    snprintf(path, sizeof path, "%s.data", t->name);
    const size_t total = t->count * 4;
    bool little = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
    if (r->kind != APIP_TENSOR_MASK && !t->b64_escaped && little) {
        /* The fast path: decode straight into place, then check. */
        size_t got = 0;
        if (!api_base64_decode((uint8_t *)r->f, &got, t->b64.p, (size_t)(t->b64.e - t->b64.p)) ||
            got != total)
            return b64_fail(r, path);
        /* One branch-free pass, then a search only when something is wrong. */
        const uint8_t *b = (const uint8_t *)r->f;
        const uint32_t allowed = r->kind == APIP_TENSOR_BIAS ? 0xFF800000u : 0; /* -inf */
        if (!all_finite_bits(b, t->count, allowed))
            return check_values(r, b, t->count);
        r->at = t->count;
        return 0;
    }
    /* Chunks of 1024 characters (768 bytes, 192 values), unescaping when needed. */
    const char *p = t->b64.p, *e = t->b64.e;
    char chars[1024 + 4];
    uint8_t bytes[768];
    size_t done = 0;
    while (p < e) {
        size_t n;
        const char *c;
        if (t->b64_escaped) {
            n = apip_jv_decode_some(&p, e, chars, 1024);
            c = chars;
        } else {
            n = (size_t)(e - p) < 1024 ? (size_t)(e - p) : 1024;
            c = p;
            p += n;
        }
        size_t got = 0;
        bool last = p >= e;
        if (n % 4 != 0 || !api_base64_decode(bytes, &got, c, n) || (!last && got != n / 4 * 3) ||
            done + got > total || got % 4 != 0)
            return b64_fail(r, path);
        if (check_values(r, bytes, got / 4))
            return -1;
        done += got;
    }
    if (done != total)
        return b64_fail(r, path);
    return 0;
}

/* Raw little-endian elements (the Open Inference Protocol's binary data): FP32 copied, then
 * checked as read_binary checks base64's; BOOL bytes and INT32 values of a mask must be 0 or 1. */
static int read_raw(reader *r) {
    const apip_tensor_in *t = r->t;
    const uint8_t *b = t->raw;
    if (t->dtype == APIP_DT_FP32) {
        if (r->kind == APIP_TENSOR_MASK || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)
            return check_values(r, b, t->count);
        memcpy(r->f, b, t->count * sizeof(float));
        const uint32_t allowed = r->kind == APIP_TENSOR_BIAS ? 0xFF800000u : 0; /* -inf */
        if (!all_finite_bits((const uint8_t *)r->f, t->count, allowed))
            return check_values(r, b, t->count);
        r->at = t->count;
        return 0;
    }
    if (r->kind != APIP_TENSOR_MASK)
        return api_fail(r->err, 400, "invalid_field", t->name, "%s must hold FP32 values", t->name);
    size_t width = t->dtype == APIP_DT_BOOL ? 1 : 4;
    for (size_t i = 0; i < t->count; i++) {
        uint32_t v = width == 1 ? b[i] : load_le32(b + 4 * i);
        if (v > 1) {
            char path[192], index[96];
            size_t rem = i, idx[APIP_MAX_RANK];
            for (size_t d = t->rank; d-- > 0;) {
                idx[d] = rem % t->dims[d];
                rem /= t->dims[d];
            }
            elem_path(index, sizeof index, "", idx, t->rank);
            snprintf(path, sizeof path, "%s%s", t->name, index);
            return api_fail(r->err, 400, "invalid_field", path,
                            "%s is %s %u in the binary data; a mask holds only 0 and 1", path,
                            width == 1 ? "the BOOL byte" : "the INT32", (unsigned)v);
        }
        r->u8[i] = (uint8_t)v;
    }
    r->at = t->count;
    return 0;
}

int apip_tensor_read(const apip_tensor_in *t, apip_tensor_kind kind, void *dst, api_error *err) {
    reader r = {.t = t, .kind = kind, .err = err};
    if (kind == APIP_TENSOR_MASK)
        r.u8 = dst;
    else
        r.f = dst;
    const char *end = NULL;
    int rc;
    if (t->raw) {
        rc = read_raw(&r);
    } else if (t->flat) { /* one row of count elements, whatever the declared shape */
        apip_tensor_in row = *t;
        row.rank = 1;
        row.dims[0] = t->count;
        r.t = &row;
        rc = read_level(&r, row.val, 0, &end);
        r.t = t;
    } else {
        rc = t->binary ? read_binary(&r) : read_level(&r, t->val, 0, &end);
    }
    if (rc == 0 && r.at != t->count)
        return api_fail(err, 400, "invalid_field", t->name, "%s holds %zu values; expected %zu",
                        t->name, r.at, t->count);
    return rc;
}
