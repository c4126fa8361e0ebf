/* util.c - test_server's helpers on data and HTTP: deterministic floats, base64, tensors read
 * from replies and written as JSON, a POST, and the checks of an error reply and of a tensor. */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "server_test.h"

/* ---- Data --------------------------------------------------------------------------------- */

/* Deterministic uniform floats in [-1, 1) from a splitmix64 stream. */
float rnd(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (float)((double)(z >> 40) / 8388608.0 - 1.0);
}

float *rnd_array(size_t n, uint64_t seed) {
    float *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = rnd(&seed);
    return a;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const void *data, size_t n) {
    const unsigned char *p = data;
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        *o++ = B64[v >> 18];
        *o++ = B64[(v >> 12) & 63];
        *o++ = i + 1 < n ? B64[(v >> 6) & 63] : '=';
        *o++ = i + 2 < n ? B64[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

/* Decodes standard base64 into a new buffer; NULL on a bad character or length. */
unsigned char *b64_decode(const char *s, size_t *n) {
    size_t len = strlen(s);
    if (len % 4)
        return NULL;
    unsigned char *out = malloc(len / 4 * 3 + 1);
    size_t k = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int j = 0; j < 4; j++) {
            const char *c = strchr(B64, s[i + j]);
            if (s[i + j] == '=' && i + 4 == len && j >= 2) {
                pad++;
                v <<= 6;
            } else if (c && s[i + j] && !pad) {
                v = (v << 6) | (uint32_t)(c - B64);
            } else {
                free(out);
                return NULL;
            }
        }
        out[k++] = (unsigned char)(v >> 16);
        if (pad < 2)
            out[k++] = (unsigned char)(v >> 8);
        if (pad < 1)
            out[k++] = (unsigned char)v;
    }
    *n = k;
    return out;
}

void tens_free(tens *t) {
    free(t->v);
    memset(t, 0, sizeof *t);
}

static bool flatten(const json_t *j, int depth, const tens *t, double *out, size_t *k) {
    if (depth == t->rank) {
        if (!json_is_number(j))
            return false;
        out[(*k)++] = json_number_value(j);
        return true;
    }
    if (!json_is_array(j) || json_array_size(j) != t->shape[depth])
        return false;
    for (size_t i = 0; i < json_array_size(j); i++)
        if (!flatten(json_array_get(j, i), depth + 1, t, out, k))
            return false;
    return true;
}

/* Reads nested arrays of numbers, or {"dtype": "float32", "shape", "data": base64}. */
bool tens_from_json(const json_t *j, tens *t) {
    memset(t, 0, sizeof *t);
    if (json_is_object(j)) {
        const json_t *shape = json_object_get(j, "shape");
        const char *dtype = json_string_value(json_object_get(j, "dtype"));
        const char *data = json_string_value(json_object_get(j, "data"));
        if (!json_is_array(shape) || !dtype || !data || strcmp(dtype, "float32") ||
            json_array_size(shape) > 8)
            return false;
        t->rank = (int)json_array_size(shape);
        size_t n = 1;
        for (int i = 0; i < t->rank; i++) {
            t->shape[i] = (size_t)json_integer_value(json_array_get(shape, (size_t)i));
            n *= t->shape[i];
        }
        size_t bytes;
        unsigned char *raw = b64_decode(data, &bytes);
        if (!raw || bytes != n * 4) {
            free(raw);
            return false;
        }
        t->v = malloc((n ? n : 1) * sizeof *t->v);
        t->n = n;
        for (size_t i = 0; i < n; i++) {
            float f;
            memcpy(&f, raw + 4 * i, 4);
            t->v[i] = (double)f;
        }
        free(raw);
        return true;
    }
    const json_t *x = j;
    while (json_is_array(x) && t->rank < 8) {
        t->shape[t->rank++] = json_array_size(x);
        if (json_array_size(x) == 0)
            break;
        x = json_array_get(x, 0);
    }
    size_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->shape[i];
    if (t->rank == 0)
        return false;
    t->v = malloc((n ? n : 1) * sizeof *t->v);
    t->n = n;
    size_t k = 0;
    if (!flatten(j, 0, t, t->v, &k) || k != n) {
        tens_free(t);
        return false;
    }
    return true;
}

json_t *json_matrix(const float *a, size_t rows, size_t cols) {
    json_t *m = json_array();
    for (size_t i = 0; i < rows; i++) {
        json_t *r = json_array();
        for (size_t j = 0; j < cols; j++)
            json_array_append_new(r, json_real((double)a[i * cols + j]));
        json_array_append_new(m, r);
    }
    return m;
}

json_t *json_tensor3(const float *a, size_t n, size_t rows, size_t cols) {
    json_t *t = json_array();
    for (size_t b = 0; b < n; b++)
        json_array_append_new(t, json_matrix(a + b * rows * cols, rows, cols));
    return t;
}

json_t *json_vector(const float *a, size_t n) {
    json_t *v = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(v, json_real((double)a[i]));
    return v;
}

/* {"dtype": "float32", "shape": [...], "data": base64} of a row-major array. */
json_t *json_b64(const float *a, const size_t *shape, int rank) {
    size_t n = 1;
    json_t *sh = json_array();
    for (int i = 0; i < rank; i++) {
        n *= shape[i];
        json_array_append_new(sh, json_integer((json_int_t)shape[i]));
    }
    char *data = b64_encode(a, n * 4);
    json_t *o = json_pack("{s:s,s:o,s:s}", "dtype", "float32", "shape", sh, "data", data);
    free(data);
    return o;
}

char *dump(json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

/* ---- HTTP --------------------------------------------------------------------------------- */

bool post(CURL *c, int port, const char *path, const char *body, reply *r) {
    req q = {.path = path, .ctype = "application/json", .body = body};
    return http(c, port, &q, r);
}

/* Checks an error reply: status, {"error": {"code", "message", "field"}} with field NULL for
 * null or a prefix the field must start with. */
void check_error(const reply *r, long status, const char *code, const char *field,
                 const char *what) {
    CHECK(r->rc == CURLE_OK, "%s: transport error %s", what, curl_easy_strerror(r->rc));
    CHECK(r->status == status, "%s: status %ld, expected %ld (body %.300s)", what, r->status,
          status, r->body);
    char *ct = header(r, "Content-Type");
    CHECK(ct && !strncmp(ct, "application/json", 16), "%s: Content-Type %s", what,
          ct ? ct : "none");
    free(ct);
    json_error_t je;
    json_t *j = json_loads(r->body, 0, &je);
    json_t *e = json_object_get(j, "error");
    const char *got_code = json_string_value(json_object_get(e, "code"));
    const char *msg = json_string_value(json_object_get(e, "message"));
    json_t *f = json_object_get(e, "field");
    CHECK(got_code && !strcmp(got_code, code), "%s: error code %s, expected %s (body %.300s)", what,
          got_code ? got_code : "none", code, r->body);
    CHECK(msg && strlen(msg) > 10, "%s: no clear message (body %.300s)", what, r->body);
    CHECK(json_object_size(e) == 3,
          "%s: the error object has %zu members, not code, message "
          "and field",
          what, json_object_size(e));
    if (field)
        CHECK(json_is_string(f) && !strncmp(json_string_value(f), field, strlen(field)),
              "%s: field %s, expected %s...", what,
              json_is_string(f) ? json_string_value(f) : "not a string", field);
    else
        CHECK(json_is_null(f), "%s: field should be null (body %.300s)", what, r->body);
    json_decref(j);
}

/* The "output" (or another member) of a 200 reply, as a tensor. */
bool reply_tensor(const reply *r, const char *member, tens *t, const char *what) {
    memset(t, 0, sizeof *t);
    if (!CHECK(r->status == 200, "%s: status %ld (body %.400s)", what, r->status, r->body))
        return false;
    json_t *j = json_loads(r->body, 0, NULL);
    bool ok = CHECK(j && tens_from_json(json_object_get(j, member), t),
                    "%s: no tensor %s in the reply (body %.300s)", what, member, r->body);
    json_decref(j);
    return ok;
}

double max_diff(const tens *t, const double *want, size_t n) {
    if (t->n != n)
        return HUGE_VAL;
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(t->v[i] - want[i]);
        if (!(d <= m))
            m = isnan(d) ? (double)INFINITY : d;
    }
    return m;
}

/* True when a and b have one shape and agree to float32 rounding: under load, jobs on one model
 * run as one batch (--batch-window-us), whose GEMMs round differently from a job's own. */
bool same(const tens *a, const tens *b) {
    if (a->n != b->n || a->rank != b->rank || memcmp(a->shape, b->shape, sizeof a->shape))
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (!(fabs(a->v[i] - b->v[i]) <= 1e-5 * (1 + fabs(b->v[i]))))
            return false;
    return true;
}
