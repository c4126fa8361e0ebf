/* util.c - test_reliability's helpers: a growable string, the daemon's liveness and RSS,
 * requests over the harness's libcurl, the check of an error reply, and request bodies. */
#include <curl/curl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <zlib.h>

#include "../harness.h"
#include "reliability.h"

/* ---- Text --------------------------------------------------------------------------------- */

void str_add(str *s, const char *b, size_t n) {
    if (s->n + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        while (cap < s->n + n + 1)
            cap *= 2;
        char *p = realloc(s->p, cap);
        if (!p)
            abort(); /* a test helper: out of memory ends the test */
        s->p = p;
        s->cap = cap;
    }
    memcpy(s->p + s->n, b, n);
    s->n += n;
    s->p[s->n] = '\0';
}

void str_cat(str *s, const char *text) {
    str_add(s, text, strlen(text));
}

void str_printf(str *s, const char *fmt, ...) {
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        str_add(s, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

void str_repeat(str *s, const char *piece, size_t times) {
    for (size_t i = 0; i < times; i++)
        str_add(s, piece, strlen(piece));
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Appends the base64 of n float32 values (x[i] = (i % 7) / 7) to s. */
void str_b64_floats(str *s, size_t n) {
    unsigned char *b = malloc(n * 4 + 3);
    for (size_t i = 0; i < n; i++) {
        float f = (float)(i % 7) / 7.0f;
        memcpy(b + 4 * i, &f, 4);
    }
    size_t len = n * 4;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < len ? (uint32_t)b[i + 1] << 8 : 0) |
                     (i + 2 < len ? b[i + 2] : 0);
        char q[4] = {B64[v >> 18], B64[(v >> 12) & 63], i + 1 < len ? B64[(v >> 6) & 63] : '=',
                     i + 2 < len ? B64[v & 63] : '='};
        str_add(s, q, 4);
    }
    free(b);
}

size_t count_lines_with(const char *text, const char *a, const char *b) {
    size_t n = 0;
    for (const char *p = text; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char *line = strndup(p, len);
        if (strstr(line, a) && (!b || strstr(line, b)))
            n++;
        free(line);
        p = eol ? eol + 1 : NULL;
    }
    return n;
}

/* ---- The daemon --------------------------------------------------------------------------- */

bool alive(const attnd *d) {
    int st;
    return d->pid > 0 && waitpid(d->pid, &st, WNOHANG) == 0;
}

/* The daemon's resident set in bytes, from /proc; 0 when unknown. */
size_t rss_bytes(const attnd *d) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)d->pid);
    char *s = slurp(path);
    const char *p = strstr(s, "VmRSS:");
    size_t kb = p ? (size_t)strtoull(p + 6, NULL, 10) : 0;
    free(s);
    return kb * 1024;
}

/* ---- HTTP (over the harness's libcurl requests) ------------------------------------------- */

/* Sends method path (with body, of len bytes or strlen(body) when len is 0, as JSON, and extra
 * header lines, NULL-terminated; each may be NULL) on handle c (NULL: a new one). False on a
 * transport error. */
bool request(CURL *c, int port, const char *method, const char *path, const char *body, size_t len,
             const char *const *hdrs, reply *r) {
    req q = {.method = method,
             .path = path,
             .ctype = body ? "application/json" : NULL,
             .body = body,
             .len = len,
             .hdr_list = hdrs};
    return http(c, port, &q, r);
}

bool post(CURL *c, int port, const char *path, const char *body, size_t len, reply *r) {
    return request(c, port, NULL, path, body, len, NULL, r);
}

bool healthy(const attnd *d) {
    reply r;
    bool ok = request(NULL, d->port, NULL, "/healthz", NULL, 0, NULL, &r) && r.status == 200;
    reply_free(&r);
    return ok && alive(d);
}

/* True when r has header name with exactly value (value NULL: when r lacks it). */
bool has_header(const reply *r, const char *name, const char *value) {
    char *v = header(r, name);
    bool ok = value ? v && !strcmp(v, value) : v == NULL;
    free(v);
    return ok;
}

/* Checks an error reply: status, code, and (when given) text the message must hold. */
void check_error(const reply *r, long status, const char *code, const char *needle,
                 const char *what) {
    CHECK(r->rc == CURLE_OK, "%s: transport error %s", what, curl_easy_strerror(r->rc));
    char want[64];
    snprintf(want, sizeof want, "\"code\":\"%s\"", code);
    CHECK(r->status == status && strstr(r->body, want), "%s: %ld %.300s; expected %ld with code %s",
          what, r->status, r->body, status, code);
    if (needle)
        CHECK(strstr(r->body, needle) != NULL, "%s: the message should name %s: %.300s", what,
              needle, r->body);
}

/* ---- Bodies ------------------------------------------------------------------------------- */

const char *const SDPA_SMALL = "{\"q\": [[1, 0], [0, 1]], \"k\": [[1, 0], [0, 1]], "
                               "\"v\": [[1, 2], [3, 4]], \"need_weights\": true}";

/* SDPA on n x 2 base64 tensors with need_weights: a body of about 32 n bytes whose JSON reply
 * (the n x n weights) is about 13 n^2 bytes. */
char *weights_body(size_t n) {
    str s = {0};
    const char *names[3] = {"q", "k", "v"};
    for (int t = 0; t < 3; t++) {
        str_printf(&s, "%s\"%s\": {\"dtype\": \"float32\", \"shape\": [%zu, 2], \"data\": \"",
                   t ? "\"}, " : "{", names[t], n);
        str_b64_floats(&s, 2 * n);
    }
    str_cat(&s, "\"}, \"need_weights\": true}");
    return s.p;
}

/* A gzip body of /v1/sdpa: q (1, D) and k, v (S, D) of zeros, about 4 S D bytes of JSON that
 * deflate to a few hundred KB; *json_len is the decoded length. The caller frees it. */
unsigned char *gzip_sdpa(size_t s, size_t dim, size_t *len, size_t *json_len) {
    str j = {0};
    str_cat(&j, "{\"q\": [[0");
    str_repeat(&j, ",0", dim - 1);
    str_cat(&j, "]]");
    for (int t = 0; t < 2; t++) {
        str_cat(&j, t ? ", \"v\": [" : ", \"k\": [");
        for (size_t i = 0; i < s; i++) {
            str_cat(&j, i ? ",[0" : "[0");
            str_repeat(&j, ",0", dim - 1);
            str_cat(&j, "]");
        }
        str_cat(&j, "]");
    }
    str_cat(&j, "}");
    z_stream z = {0};
    deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    size_t cap = deflateBound(&z, j.n);
    unsigned char *out = malloc(cap);
    z.next_in = (Bytef *)j.p;
    z.avail_in = (uInt)j.n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    deflate(&z, Z_FINISH);
    *len = cap - z.avail_out;
    deflateEnd(&z);
    *json_len = j.n;
    free(j.p);
    return out;
}
