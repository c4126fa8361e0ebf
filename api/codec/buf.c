/* buf.c - the growable byte buffer responses are written into, error bodies, JSON string
 * literals, and the shapes of messages. (The error record itself is api/base/error.c.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

void api_buf_free(api_buf *b) {
    if (!b)
        return;
    if (b->block)
        api_mem_free(b->data);
    else
        free(b->data);
    *b = (api_buf){0};
}

/* Moves the buffer's contents into a new allocation of cap bytes: a block of mem when mem (or a
 * block buffer's own cache) is given, else realloc. false (nothing changed) when out of memory. */
static bool buf_move(api_buf *b, size_t cap, api_mem *mem) {
    if (!mem && b->block)
        mem = apip_mem_owner(b->data);
    if (!mem && !b->block) {
        char *d = realloc(b->data, cap);
        if (!d)
            return false;
        b->data = d;
        b->cap = cap;
        return true;
    }
    size_t got = 0;
    char *d = api_mem_alloc(mem, cap, cap, &got);
    if (!d)
        return false;
    if (b->len)
        memcpy(d, b->data, b->len);
    if (b->block)
        api_mem_free(b->data);
    else
        free(b->data);
    b->data = d;
    b->cap = got;
    b->block = true;
    return true;
}

void api_buf_reset(api_buf *b) {
    b->len = 0;
}

char *apip_buf_reserve(api_buf *b, size_t n) {
    if (b->failed)
        return NULL;
    size_t need = 0;
    if (!apip_add(b->len, n, &need)) {
        b->failed = true;
        return NULL;
    }
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need)
            cap = cap > SIZE_MAX / 2 ? need : cap * 2;
        if (!buf_move(b, cap, NULL)) {
            b->failed = true;
            return NULL;
        }
    }
    return b->data + b->len;
}

bool apip_buf_reserve_exact(api_buf *b, size_t n) {
    return apip_buf_reserve_block(b, n, NULL);
}

bool apip_buf_reserve_block(api_buf *b, size_t n, api_mem *mem) {
    size_t need = 0;
    if (b->failed || !apip_add(b->len, n, &need)) {
        b->failed = true;
        return false;
    }
    if (need <= b->cap)
        return true;
    if (!buf_move(b, need, mem)) {
        b->failed = true;
        return false;
    }
    return true;
}

void api_buf_append(api_buf *b, const void *bytes, size_t n) {
    char *at = apip_buf_reserve(b, n);
    if (!at)
        return;
    if (n)
        memcpy(at, bytes, n);
    b->len += n;
}

void apip_buf_puts(api_buf *b, const char *s) {
    api_buf_append(b, s, strlen(s));
}

/* v in decimal at o (room for APIP_U64_DIGITS bytes); returns the end. */
static char *u64_text(char *o, uint64_t v) {
    char tmp[APIP_U64_DIGITS];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *o++ = tmp[--n];
    return o;
}

void apip_buf_put_u64(api_buf *b, uint64_t v) {
    char tmp[APIP_U64_DIGITS];
    api_buf_append(b, tmp, (size_t)(u64_text(tmp, v) - tmp));
}

void apip_buf_put_flops(api_buf *b, double flops) {
    /* round is exact and stays below 2^64 for flops below it; llround would overflow from 2^63. */
    apip_buf_put_u64(b, !(flops > 0) ? 0 : flops < 0x1p64 ? (uint64_t)round(flops) : UINT64_MAX);
}

size_t api_ms_write(char *buf, double ms) {
    uint64_t m = (uint64_t)(ms * 1000.0 + 0.5); /* thousandths: below 2^50 */
    unsigned frac = (unsigned)(m % 1000);
    char *o = u64_text(buf, m / 1000);
    o[0] = '.';
    o[1] = (char)('0' + frac / 100);
    o[2] = (char)('0' + frac / 10 % 10);
    o[3] = (char)('0' + frac % 10);
    return (size_t)(o + 4 - buf);
}

void apip_buf_put_ms(api_buf *b, double ms) {
    char tmp[API_MS_MAX];
    api_buf_append(b, tmp, api_ms_write(tmp, !(ms >= 0.0) || ms > 1e12 ? 0.0 : ms));
}

/* Length of the valid UTF-8 sequence at s[0, n), or 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0;
        if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return len;
}

void api_buf_json_string(api_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    /* Worst case: every byte becomes "\ufffd" (6 bytes). */
    size_t room = 0;
    if (!apip_mul(n, 6, &room) || !apip_add(room, 2, &room)) {
        b->failed = true;
        return;
    }
    char *o = apip_buf_reserve(b, room);
    if (!o)
        return;
    char *start = o;
    const unsigned char *u = (const unsigned char *)s;
    *o++ = '"';
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        if (c >= 0x80) {
            size_t k = utf8_seq(u + i, n - i);
            if (k == 0) {
                memcpy(o, "\\ufffd", 6);
                o += 6;
                i++;
            } else {
                memcpy(o, u + i, k);
                o += k;
                i += k;
            }
            continue;
        }
        i++;
        if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
        } else if (c >= 0x20) {
            *o++ = (char)c;
        } else if (c == '\n') {
            *o++ = '\\';
            *o++ = 'n';
        } else if (c == '\t') {
            *o++ = '\\';
            *o++ = 't';
        } else if (c == '\r') {
            *o++ = '\\';
            *o++ = 'r';
        } else {
            memcpy(o, "\\u00", 4);
            o[4] = hex[c >> 4];
            o[5] = hex[c & 15];
            o += 6;
        }
    }
    *o++ = '"';
    b->len += (size_t)(o - start);
}

void api_error_body(const api_error *err, api_buf *out) {
    static const api_error unknown = {
        .status = 500, .code = "internal", .message = "unknown error", .field = ""};
    if (!err || err->status == 0)
        err = &unknown;
    apip_buf_puts(out, "{\"error\":{\"code\":");
    api_buf_json_string(out, err->code, strnlen(err->code, sizeof err->code));
    apip_buf_puts(out, ",\"message\":");
    api_buf_json_string(out, err->message, strnlen(err->message, sizeof err->message));
    apip_buf_puts(out, ",\"field\":");
    size_t fl = strnlen(err->field, sizeof err->field);
    if (fl)
        api_buf_json_string(out, err->field, fl);
    else
        apip_buf_puts(out, "null");
    apip_buf_puts(out, "}}");
}

void apip_dims_str(char *out, size_t cap, const size_t *dims, size_t rank) {
    size_t w = 0;
    int n = snprintf(out, cap, "(");
    w = n > 0 ? (size_t)n : 0;
    for (size_t i = 0; i < rank && w < cap; i++) {
        n = snprintf(out + w, cap - w, i ? ", %zu" : "%zu", dims[i]);
        w += n > 0 ? (size_t)n : 0;
    }
    if (w < cap)
        snprintf(out + w, cap - w, rank == 1 ? ",)" : ")");
}
