/* util.c - test_api's shared helpers: deterministic random numbers, request bodies built as text,
 * a request parsed, run and answered (checked as JSON with jansson), tensors read back from
 * answers, the registries the tests use, and answers compared. */
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_test.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static uint64_t rng = 0x243F6A8885A308D3u;

/* xorshift64 on the state *s: rnd64's, or a test's own (whose draws then move no other test's). */
uint64_t rnd64_from(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

uint64_t rnd64(void) {
    return rnd64_from(&rng);
}

float frand(void) { /* uniform in [-1, 1) */
    return (float)((double)(rnd64() >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

float *frand_new(size_t n) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = frand();
    return x;
}

char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        fclose(f);
        return NULL;
    }
    b[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* A growable string for building request bodies. */

void sb_add(sb *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->n + (size_t)k + 1 > b->cap) {
        b->cap = (b->n + (size_t)k + 1) * 2;
        b->s = realloc(b->s, b->cap);
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

/* Appends x (dims) as nested JSON arrays, each float written with api_float_write. */
void sb_tensor(sb *b, const float *x, const size_t *dims, size_t rank) {
    size_t inner = 1;
    for (size_t i = 1; i < rank; i++)
        inner *= dims[i];
    sb_add(b, "[");
    for (size_t i = 0; i < dims[0]; i++) {
        if (i)
            sb_add(b, ",");
        if (rank == 1) {
            char t[40];
            t[api_float_write(t, x[i])] = '\0';
            sb_add(b, "%s", t);
        } else {
            sb_tensor(b, x + i * inner, dims + 1, rank - 1);
        }
    }
    sb_add(b, "]");
}

/* Appends x as a binary tensor object. */
void sb_tensor_b64(sb *b, const float *x, const size_t *dims, size_t rank) {
    size_t n = 1;
    sb_add(b, "{\"dtype\":\"float32\",\"shape\":[");
    for (size_t i = 0; i < rank; i++) {
        sb_add(b, "%s%zu", i ? "," : "", dims[i]);
        n *= dims[i];
    }
    char *enc = malloc(api_base64_encoded_len(n * 4) + 1);
    api_base64_encode(enc, (const uint8_t *)x, n * 4);
    enc[api_base64_encoded_len(n * 4)] = '\0';
    sb_add(b, "],\"data\":\"%s\"}", enc);
    free(enc);
}

/* Parses, runs and answers a request. Returns the parsed response (jansson) on 200, else NULL
 * with *err filled; either way the body (response or error body) must be valid JSON. */
json_t *request(api_op op, const char *body, size_t len, const api_registry *models,
                const api_limits *lim, api_error *err) {
    api_error e = {0};
    api_buf out = {0};
    api_job *job = api_job_parse(op, body, len, models, lim, &e);
    if (job && api_job_run(job, NULL, &e) == 0) {
        api_job_respond(job, 1.5, 2.25, &out, &e);
        /* The response stays within the bound the job was counted with, and the buffer was
         * grown once, to exactly that bound and the writer's slack. */
        CHECK(e.status || (out.len <= api_job_response_bytes(job) &&
                           out.cap == api_job_response_bytes(job) + 64),
              "response of %zu bytes (buffer %zu) for a bound of %zu", out.len, out.cap,
              api_job_response_bytes(job));
    }
    if (e.status)
        api_error_body(&e, &out);
    json_error_t je;
    json_t *j = json_loadb(out.data, out.len, 0, &je);
    CHECK(j != NULL, "response body is not valid JSON (%s): %.200s", je.text, out.data);
    if (e.status) {
        CHECK(j && json_is_string(json_object_get(json_object_get(j, "error"), "code")),
              "error body lacks error.code");
        json_decref(j);
        j = NULL;
    }
    api_job_destroy(job);
    api_buf_free(&out);
    if (err)
        *err = e;
    return j;
}

json_t *request_str(api_op op, const char *body, const api_registry *models, api_error *err) {
    api_limits lim = api_limits_default();
    return request(op, body, strlen(body), models, &lim, err);
}

/* Flattens a nested JSON array of numbers, or a base64 tensor object, into out (cap floats).
 * Returns the count, or SIZE_MAX when the value is malformed. */
size_t flatten(const json_t *j, float *out, size_t cap) {
    if (json_is_object(j)) {
        const char *data = json_string_value(json_object_get(j, "data"));
        if (!data)
            return SIZE_MAX;
        size_t n = strlen(data), got = 0;
        uint8_t *raw = malloc(api_base64_decoded_max(n) + 1);
        if (!api_base64_decode(raw, &got, data, n) || got / 4 > cap) {
            free(raw);
            return SIZE_MAX;
        }
        memcpy(out, raw, got);
        free(raw);
        return got / 4;
    }
    if (json_is_number(j)) {
        if (cap < 1)
            return SIZE_MAX;
        out[0] = (float)json_number_value(j);
        return 1;
    }
    if (!json_is_array(j))
        return SIZE_MAX;
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(j); i++) {
        size_t k = flatten(json_array_get(j, i), out + n, cap - n);
        if (k == SIZE_MAX)
            return SIZE_MAX;
        n += k;
    }
    return n;
}

/* The dims of a nested array (following first elements), or of a base64 object's shape. */
size_t shape_of_json(const json_t *j, size_t *dims) {
    size_t r = 0;
    if (json_is_object(j)) {
        const json_t *s = json_object_get(j, "shape");
        for (size_t i = 0; i < json_array_size(s); i++)
            dims[r++] = (size_t)json_integer_value(json_array_get(s, i));
        return r;
    }
    while (json_is_array(j)) {
        dims[r++] = json_array_size(j);
        j = json_array_get(j, 0);
    }
    return r;
}

bool same_bits(const float *a, const float *b, size_t n, size_t *at) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof *a) != 0) {
            *at = i;
            return false;
        }
    return true;
}

/* ---- Registries, case files, answers ------------------------------------------------------ */

api_registry *demo_registry(void) {
    api_error e = {0};
    api_registry *r = api_registry_create();
    CHECK(api_registry_add(r, api_model_demo(&e), &e) == 0, "add demo: %s", e.message);
    return r;
}

/* demo (the default) and lesson, as attnd holds them. */
api_registry *builtin_registry(void) {
    api_error e = {0};
    api_registry *r = demo_registry();
    CHECK(api_registry_add(r, api_model_lesson(&e), &e) == 0, "add lesson: %s", e.message);
    return r;
}

int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}
/* True when the JSON arrays of strings a and b are equal. */
bool same_strings(const json_t *a, const json_t *b) {
    if (!json_is_array(a) || !json_is_array(b) || json_array_size(a) != json_array_size(b))
        return false;
    for (size_t i = 0; i < json_array_size(a); i++) {
        const char *x = json_string_value(json_array_get(a, i));
        const char *y = json_string_value(json_array_get(b, i));
        if (!x || !y || strcmp(x, y))
            return false;
    }
    return true;
}

/* The response body of a job that ran, without the usage (its times differ). */
char *answer_of(api_job *job) {
    api_buf out = {0};
    api_error e = {0};
    api_job_respond(job, 0, 0, &out, &e);
    api_buf_append(&out, "", 1); /* a NUL: an api_buf holds bytes, not a string */
    char *s = NULL;
    if (!e.status && out.data && !out.failed) {
        char *u = strstr(out.data, ",\"usage\"");
        if (u)
            *u = '\0';
        s = strdup(out.data);
    }
    api_buf_free(&out);
    return s;
}

/* Max |a - b| over the numbers of two answer bodies with the same shape; INFINITY when their
 * non-numeric text differs. */
double answers_diff(const char *a, const char *b) {
    double m = 0;
    while (*a && *b) {
        if ((isdigit((unsigned char)*a) || *a == '-') &&
            (isdigit((unsigned char)*b) || *b == '-')) {
            char *ea, *eb;
            double x = strtod(a, &ea), y = strtod(b, &eb);
            if (ea != a && eb != b) { /* else not numbers ("-:0" from a broken writer) */
                if (fabs(x - y) > m)
                    m = fabs(x - y);
                a = ea, b = eb;
                continue;
            }
        }
        if (*a++ != *b++)
            return HUGE_VAL;
    }
    return *a || *b ? (double)INFINITY : m;
}
