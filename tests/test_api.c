/* test_api.c - unit tests of api/: float formatting (against printf and strtod, and the previous
 * writer tests/float_ref.c, on millions of floats), float reading (against strtod on a million
 * decimals: halfway cases, 17 to 25 digits, denormals, overflow), base64, the JSON reader (against
 * jansson), every request field's validation (the cases are data files under
 * tests/api_cases/requests), responses (JSON and base64, checked bitwise against libattn called
 * directly), the seed chapter's worked example, models (identity, random, demo, safetensors files
 * written from PyTorch weights) and the registry.
 *
 * Usage: test_api [CASES_DIR] (default tests/api_cases). Exits non-zero when any check fails and
 * ends with the line "N passed, N failed".
 *
 * Legend: N batch, L query length, S key length, E embedding width, H heads, kdim/vdim key and
 * value widths, D/Dv SDPA widths, K top-k count. */
#include <dirent.h>
#include <float.h>
#include <jansson.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "codec.h"
#include "float_ref.h"
#include "job.h"
#include "models.h"
#include "v1.h"

static int failures, checks;
static const char *cases_dir = "tests/api_cases";

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            if (failures <= 200) {                                                                 \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                               \
                fprintf(stderr, __VA_ARGS__);                                                      \
                fputc('\n', stderr);                                                               \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* ---- helpers ------------------------------------------------------------------------------ */

static uint64_t rng = 0x243F6A8885A308D3u;

/* xorshift64 on the state *s: rnd64's, or a test's own (whose draws then move no other test's). */
static uint64_t rnd64_from(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static uint64_t rnd64(void) {
    return rnd64_from(&rng);
}

static float frand(void) { /* uniform in [-1, 1) */
    return (float)((double)(rnd64() >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *frand_new(size_t n) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = frand();
    return x;
}

static char *read_file(const char *path, size_t *len) {
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
typedef struct sb {
    char *s;
    size_t n, cap;
} sb;

static void sb_add(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sb *b, const char *fmt, ...) {
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
static void sb_tensor(sb *b, const float *x, const size_t *dims, size_t rank) {
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
static void sb_tensor_b64(sb *b, const float *x, const size_t *dims, size_t rank) {
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
static json_t *request(api_op op, const char *body, size_t len, const api_registry *models,
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

static json_t *request_str(api_op op, const char *body, const api_registry *models,
                           api_error *err) {
    api_limits lim = api_limits_default();
    return request(op, body, strlen(body), models, &lim, err);
}

/* Flattens a nested JSON array of numbers, or a base64 tensor object, into out (cap floats).
 * Returns the count, or SIZE_MAX when the value is malformed. */
static size_t flatten(const json_t *j, float *out, size_t cap) {
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
static size_t shape_of_json(const json_t *j, size_t *dims) {
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

static bool same_bits(const float *a, const float *b, size_t n, size_t *at) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof *a) != 0) {
            *at = i;
            return false;
        }
    return true;
}

/* ---- Floats ------------------------------------------------------------------------------- */

/* Fewest digits p such that a p-digit decimal reads back (via strtod then float) as f, written
 * into out as "%.{p-1}e". At each p the nearest decimal (printf's "%.{p-1}e") is tried, then the
 * one a unit above it in magnitude: at a power of two the gap below f is half the gap above, so
 * the nearest can miss below while the next one up still reads back. The one a unit below the
 * nearest never does (it is on a side the nearest already missed on, and farther). */
static int ref_shortest(char *out, float f) {
    for (int p = 1; p <= 9; p++) {
        snprintf(out, 64, "%.*e", p - 1, (double)f);
        if ((float)strtod(out, NULL) == f)
            return p;
        long long d = 0;
        const char *c = out + (out[0] == '-');
        for (; *c != 'e'; c++)
            if (isdigit((unsigned char)*c))
                d = d * 10 + (*c - '0');
        char up[64];
        snprintf(up, sizeof up, "%s%llde%d", f < 0 ? "-" : "", d + 1, atoi(c + 1) - (p - 1));
        double v = strtod(up, NULL);
        if ((float)v == f) {
            snprintf(out, 64, "%.*e", p - 1, v);
            return p;
        }
    }
    return -1;
}

static int sig_digits(const char *s) {
    char m[64];
    int n = 0;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9')
            m[n++] = *s;
    int a = 0, b = n;
    while (a < n && m[a] == '0')
        a++;
    while (b > a && m[b - 1] == '0')
        b--;
    return b - a;
}

/* Checks one float: round trip, digit count and digits against the reference, and the bytes
 * against the previous writer (tests/float_ref.c). */
static bool float_ok(float f, bool against_ref) {
    char b[64], old[64];
    size_t n = api_float_write(b, f), on = ref_float_write(old, f);
    b[n] = '\0';
    old[on] = '\0';
    if (strcmp(b, old) != 0) {
        CHECK(false, "api_float_write(%a) = %s, the previous writer wrote %s", (double)f, b, old);
        return false;
    }
    float g = (float)strtod(b, NULL);
    if (memcmp(&f, &g, sizeof f) != 0) {
        CHECK(false, "api_float_write(%a) = %s reads back as %a", (double)f, b, (double)g);
        return false;
    }
    json_error_t je;
    char doc[80];
    snprintf(doc, sizeof doc, "[%s]", b);
    json_t *j = json_loads(doc, JSON_DECODE_INT_AS_REAL, &je);
    bool valid = j != NULL;
    json_decref(j);
    if (!valid) {
        CHECK(false, "api_float_write(%a) = %s is not a JSON number", (double)f, b);
        return false;
    }
    if (!against_ref || f == 0.0f)
        return true;
    char r[64], c[64];
    int p = ref_shortest(r, f), q = sig_digits(b);
    snprintf(c, sizeof c, "%.*e", q - 1, strtod(b, NULL));
    if (p != q || strcmp(c, r) != 0) {
        CHECK(false, "api_float_write(%.9g) = %s; the shortest round trip is %s", (double)f, b, r);
        return false;
    }
    return true;
}

/* The layout of a float's text t[0, n): its sign, the decimal exponent of its first significant
 * digit and its number of significant digits ("-0.00125": 1, -3, 3; "1.5e-7": 0, -7, 2). */
static void float_layout(const char *t, size_t n, int *neg, int *x, int *p) {
    size_t i = *neg = t[0] == '-';
    int point = -1, first = -1, last = -1, nd = 0;
    for (; i < n && t[i] != 'e'; i++) {
        if (t[i] == '.') {
            point = nd;
            continue;
        }
        if (t[i] != '0') {
            first = first < 0 ? nd : first;
            last = nd;
        }
        nd++;
    }
    int e = 0;
    for (size_t j = i + 1 + (i + 1 < n && t[i + 1] == '-'); j < n; j++)
        e = 10 * e + (t[j] - '0');
    *p = last - first + 1;
    *x = (point < 0 ? nd : point) - 1 - first + (i + 1 < n && t[i + 1] == '-' ? -e : e);
}

/* v[0, n) in rows of 1, 2, ..., 40, 1, ... floats, then in one row, each written by
 * apip_floats_write into got and by the previous writer into want (each with room for n floats);
 * returns how many of those rows differ. */
static size_t rows_differ(const float *v, size_t n, char *got, char *want) {
    size_t bad = 0;
    for (size_t at = 0, len = 1; at < n; at += len, len = len % 40 + 1) {
        size_t k = at + len <= n ? len : n - at;
        char *ge = apip_floats_write(got, v + at, k), *we = ref_floats_write(want, v + at, k);
        bad += !(ge - got == we - want && memcmp(got, want, (size_t)(ge - got)) == 0);
    }
    char *ge = apip_floats_write(got, v, n), *we = ref_floats_write(want, v, n);
    return bad + !(ge - got == we - want && memcmp(got, want, (size_t)(ge - got)) == 0);
}

static void test_float_write(void) {
    static const struct {
        float f;
        const char *want;
    } edge[] = {{0.0f, "0"},
                {-0.0f, "-0"},
                {1e-45f, "1e-45"},
                {-1e-45f, "-1e-45"},
                {FLT_MIN, "1.1754944e-38"},
                {1.1754942e-38f, "1.1754942e-38"},
                {FLT_MAX, "3.4028235e38"},
                {-FLT_MAX, "-3.4028235e38"},
                {0.1f, "0.1"},
                {0.4f, "0.4"},
                {1.0f / 3.0f, "0.33333334"},
                {2.0f / 3.0f, "0.6666667"},
                {1.0f, "1"},
                {-2.5f, "-2.5"},
                {100.0f, "100"},
                {123456792.0f, "123456790"},
                {1e9f, "1e9"},
                {1e10f, "1e10"},
                {16777216.0f, "16777216"},
                {0.5f, "0.5"},
                {0.25f, "0.25"},
                {1e-5f, "0.00001"},
                {1.5e-5f, "0.000015"},
                {1e-6f, "1e-6"},
                {1e-14f, "1e-14"},
                {3.14159265f, "3.1415927"},
                {0.70167750f, "0.7016775"},
                /* Powers of two where the nearest 8-digit decimal misses below (the gap below is
                 * half as wide) but the next one up reads back. */
                {0x1p-96f, "1.2621775e-29"},
                {-0x1p-96f, "-1.2621775e-29"},
                {0x1p87f, "1.5474251e26"},
                {-0x1p87f, "-1.5474251e26"},
                {0x1p90f, "1.2379401e27"},
                {-0x1p90f, "-1.2379401e27"},
                /* 7.038531e-26 lies within half a double's ulp of the midpoint between these
                 * two: strtod rounds it onto the midpoint as a double, and then to the even
                 * float, the second. So the first needs 8 digits (a reader that rounds decimals
                 * straight to float32 would give it 7.038531e-26). */
                {0x1.5c87fap-84f, "7.0385307e-26"},
                {0x1.5c87fcp-84f, "7.038531e-26"},
                {-0x1.5c87fap-84f, "-7.0385307e-26"},
                /* The fast path's ends and its neighbours: 2^-30 and 2^24. */
                {0x1p-30f, "9.313226e-10"},
                {0x1.fffffep-31f, "9.313225e-10"},
                {0x1p24f, "16777216"},
                {0x1.fffffep23f, "16777215"},
                {16777218.0f, "16777218"},
                {0x1p-126f, "1.1754944e-38"},
                {0x1p-127f, "5.877472e-39"},
                {0x1p-119f, "1.5046328e-36"}};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        char b[64];
        size_t n = api_float_write(b, edge[i].f);
        b[n] = '\0';
        CHECK(strcmp(b, edge[i].want) == 0, "api_float_write(%.9g) = %s, want %s",
              (double)edge[i].f, b, edge[i].want);
        float_ok(edge[i].f, true);
    }
    /* Random bit patterns (every exponent, denormals included) against the reference. */
    size_t bad = 0;
    for (int i = 0; i < 2000000 && bad < 20; i++) {
        uint32_t u = (uint32_t)(rnd64() >> 32);
        if ((u & 0x7F800000u) == 0x7F800000u)
            continue;
        float f;
        memcpy(&f, &u, sizeof f);
        bad += !float_ok(f, true);
    }
    /* Every power of two, both signs (denormals included), against the reference. */
    for (int k = -149; k <= 127; k++) {
        bad += !float_ok(ldexpf(1.0f, k), true);
        bad += !float_ok(-ldexpf(1.0f, k), true);
    }
    /* Values attention produces: weights in [0, 1], outputs near 0, softmax tails. */
    for (int i = 0; i < 300000 && bad < 20; i++) {
        float f = i % 3 == 0   ? fabsf(frand())
                  : i % 3 == 1 ? frand() * 4.0f
                               : expf(-40.0f * fabsf(frand()));
        bad += !float_ok(f, true);
    }
    /* Every float of the binades [1, 2) and [2^-130, 2^-126) (denormals): round trip, and the
     * bytes of the previous writer. */
    for (uint32_t u = 0x3F800000u; u < 0x40000000u && bad < 20; u++) {
        float f;
        memcpy(&f, &u, sizeof f);
        char b[64], old[64];
        b[api_float_write(b, f)] = '\0';
        old[ref_float_write(old, f)] = '\0';
        if ((float)strtod(b, NULL) != f || strcmp(b, old) != 0) {
            CHECK(false, "api_float_write(%a) = %s (previous writer: %s)", (double)f, b, old);
            bad++;
        }
    }
    for (uint32_t u = 0x00100000u; u < 0x00800000u && bad < 20; u += 3) {
        float f;
        memcpy(&f, &u, sizeof f);
        char b[64], old[64];
        b[api_float_write(b, f)] = '\0';
        old[ref_float_write(old, f)] = '\0';
        if ((float)strtod(b, NULL) != f || strcmp(b, old) != 0) {
            CHECK(false, "api_float_write(%a) = %s (previous writer: %s)", (double)f, b, old);
            bad++;
        }
    }
    CHECK(bad == 0, "%zu floats were written wrong", bad);
    /* The row writer joins with commas and writes what api_float_write writes. */
    float row[4] = {1.0f, -0.5f, 0.1f, 3e-7f};
    char buf[4 * APIP_FLOAT_MAX + 32];
    char *e = apip_floats_write(buf, row, 4);
    *e = '\0';
    CHECK(strcmp(buf, "1,-0.5,0.1,3e-7") == 0, "apip_floats_write gave %s", buf);
    /* A long row of every kind of float, against the previous writer's. */
    enum { ROW = 4096 };
    float *v = malloc(ROW * sizeof *v);
    char *got = malloc(ROW * APIP_FLOAT_MAX + 32), *want = malloc(ROW * APIP_FLOAT_MAX + 32);
    for (size_t i = 0; i < ROW; i++) {
        uint32_t u = (uint32_t)(rnd64() >> 32);
        if (i % 2 == 0 || (u & 0x7F800000u) == 0x7F800000u)
            v[i] = frand() * (i % 3 ? 1.0f : 1e-3f);
        else
            memcpy(&v[i], &u, sizeof u);
    }
    v[0] = -0.0f;
    v[1] = 0.0f;
    char *ge = apip_floats_write(got, v, ROW), *we = ref_floats_write(want, v, ROW);
    CHECK(ge - got == we - want && memcmp(got, want, (size_t)(ge - got)) == 0,
          "apip_floats_write differs from the previous writer on a row of %d floats", ROW);
    /* The layouts the row writer shuffles (sign, decimal exponent -10 to 7, 1 to 9 digits),
     * and those it leaves to put_float (the longest, "-0.0000123456789", and the exponents
     * beyond): magnitudes spread evenly in log from 1e-11 to 1e8, in rows of 1 to 40 and one
     * of all (about four fifths of the layouts, few of 5 or 9 digits; every one below). */
    for (size_t i = 0; i < ROW; i++) {
        double mag = pow(10.0, -11.0 + 19.0 * (double)(rnd64() >> 11) * 0x1p-53);
        v[i] = (float)(rnd64() & 1 ? -mag : mag);
        if (i % 5 == 0) { /* short decimals: 1 to 4 significant digits */
            char d[32];
            snprintf(d, sizeof d, "%.*e", (int)(i / 5 % 4), (double)v[i]);
            v[i] = strtof(d, NULL);
        }
    }
    size_t bad_rows = rows_differ(v, ROW, got, want);
    CHECK(bad_rows == 0,
          "apip_floats_write differs from the previous writer on %zu rows of "
          "magnitudes from 1e-11 to 1e8",
          bad_rows);
    /* Every layout the row writer shuffles that a float has: for each sign, decimal exponent
     * -10 to 7 and count of 1 to 9 significant digits, a float on its fast path (in [2^-30,
     * 2^24), not a power of two) found from random decimals of that shape (and their
     * neighbours, for 8 and 9 digits), all written in rows of 1 to 40 and one of all, in a
     * random order. No such float has the 8 others of each sign (found by writing every one of
     * them): 1, 8 or 9 digits at 1e-10 (from 9.3e-10 only) and 9 at 1e-9, 1e-6, 1e-3, 1, 1e7. */
    enum { LAYOUTS = 2 * 18 * 9, NO_FLOAT = 2 * 8 };
    uint64_t lay_rng = 0x9E3779B97F4A7C15u; /* its own, so the tests after draw as before */
    float lay[LAYOUTS];
    size_t nlay = 0;
    for (int neg = 0; neg < 2; neg++)
        for (int x = -10; x <= 7; x++)
            for (int p = 1; p <= 9; p++)
                for (int t = 0; t < 20000; t++) {
                    char d[32], out[32];
                    int k = 0;
                    d[k++] = neg ? '-' : '+';
                    d[k++] = (char)('1' + rnd64_from(&lay_rng) % 9);
                    d[k++] = '.';
                    for (int j = 1; j < p; j++) /* the last digit is not 0 */
                        d[k++] = (char)(j + 1 == p ? '1' + rnd64_from(&lay_rng) % 9
                                                   : '0' + rnd64_from(&lay_rng) % 10);
                    snprintf(d + k, sizeof d - (size_t)k, "e%d", x);
                    float f = strtof(d, NULL);
                    uint32_t u;
                    memcpy(&u, &f, sizeof u);
                    if (p >= 8 && t % 2)
                        u += (uint32_t)(rnd64_from(&lay_rng) % 64) - 32;
                    memcpy(&f, &u, sizeof f);
                    float a = fabsf(f);
                    if (!(a >= 0x1p-30f && a < 0x1p24f) || (u & 0x7FFFFFu) == 0)
                        continue;
                    int gn, gx, gp;
                    float_layout(out, api_float_write(out, f), &gn, &gx, &gp);
                    if (gn == neg && gx == x && gp == p) {
                        lay[nlay++] = f;
                        break;
                    }
                }
    CHECK(nlay == LAYOUTS - NO_FLOAT, "floats found for %zu layouts, not %d", nlay,
          LAYOUTS - NO_FLOAT);
    for (size_t i = nlay; i > 1; i--) {
        size_t j = (size_t)(rnd64_from(&lay_rng) % i);
        float t = lay[i - 1];
        lay[i - 1] = lay[j], lay[j] = t;
    }
    bad_rows = rows_differ(lay, nlay, got, want);
    CHECK(bad_rows == 0,
          "apip_floats_write differs from the previous writer on %zu rows of layouts", bad_rows);
    /* The row writer's room (api/codec/codec.h): it writes nothing before o, at most 32 bytes from
     * its end on, and nothing past APIP_FLOAT_MAX * n + 32 bytes (a block of exactly that size,
     * for test-asan), in rows of 1 to 140 floats (1 to 2 chunks of 64, every tail) of every
     * kind, each row ended by each kind: a shuffled text, the 16-byte one, 1-byte ones, and
     * others put_float writes (powers of two, denormals, outside [2^-30, 2^24)). */
    enum { GUARD = 64, ROOM_N = 140 };
    const float tiny16 = -0x1.4febcap-17f; /* "-0.0000100112275", the longest text */
    char t16[32];
    CHECK(api_float_write(t16, tiny16) == 16, "%a is not written in 16 bytes", (double)tiny16);
    const float kinds[] = {0.0f,    -0.0f,  tiny16,   1.0f,     -2.0f, 0x1p-149f,
                           3.0e38f, 1.0e8f, 0.15625f, 1.5e-10f, 9.0f,  -123456.79f};
    enum { NKINDS = sizeof kinds / sizeof kinds[0] };
    char *blk = malloc(GUARD + APIP_FLOAT_MAX * ROOM_N + 32 + GUARD);
    size_t bad_room = 0, bad_text = 0;
    for (size_t n = 1; n <= ROOM_N; n++) {
        for (size_t last = 0; last < NKINDS; last++) {
            float row_v[ROOM_N];
            for (size_t i = 0; i < n; i++)
                row_v[i] = i % 3 ? v[(n * 7 + i) % ROW] : kinds[(n + i) % NKINDS];
            row_v[n - 1] = kinds[last];
            size_t room = APIP_FLOAT_MAX * n + 32;
            memset(blk, 0x5A, GUARD + room + GUARD);
            char *o = blk + GUARD, *end = apip_floats_write(o, row_v, n);
            we = ref_floats_write(want, row_v, n);
            bad_text += !(end - o == we - want && memcmp(o, want, (size_t)(we - want)) == 0);
            for (const char *q = blk; q < blk + GUARD + room + GUARD; q++)
                if ((q < o || q >= end + 32) && *q != 0x5A) {
                    bad_room++;
                    break;
                }
            char *exact = malloc(room);
            apip_floats_write(exact, row_v, n);
            free(exact);
        }
    }
    free(blk);
    CHECK(bad_text == 0 && bad_room == 0,
          "apip_floats_write: %zu rows differ from the previous writer, %zu write outside their "
          "room (before o, or 32 bytes past the end and beyond)",
          bad_text, bad_room);
    free(v), free(got), free(want);
}

/* ---- Float reading ------------------------------------------------------------------------ */

/* A decimal string for the reader, of kind k: random digits and exponents; float midpoints,
 * exact or cut to 1 to 30 digits (halfway cases and the double-rounding zone); neighbours of
 * midpoints as doubles; 17-digit doubles (what Python and JavaScript send) and 9-digit floats;
 * values around the denormals, FLT_MAX and the overflow threshold. */
static void dec_string(char *t, int k) {
    uint32_t u = (uint32_t)(rnd64() >> 32) & 0x7F7FFFFFu;
    float f;
    memcpy(&f, &u, sizeof f);
    double mid = (double)f + (double)(nextafterf(f, INFINITY) - f) / 2; /* exact */
    const char *sign = rnd64() & 1 ? "-" : "";
    int prec = (int)(rnd64() % 30);
    switch (k) {
    case 0: {
        int n = 0, digits = 1 + (int)(rnd64() % 25), ip = (int)(rnd64() % 4);
        n += sprintf(t, "%s", sign);
        if (ip == 0)
            t[n++] = '0';
        else
            for (int d = 0; d < ip; d++)
                t[n++] = (char)((d ? '0' : '1') + rnd64() % (d ? 10 : 9));
        if (digits > ip) {
            t[n++] = '.';
            for (int d = ip; d < digits; d++)
                t[n++] = (char)('0' + rnd64() % 10);
        }
        t[n] = '\0';
        if (rnd64() % 4) {
            int ex = (int)(rnd64() % 130) - 85;
            sprintf(t + n, "%c%s%d", rnd64() & 1 ? 'e' : 'E',
                    ex < 0        ? "-"
                    : rnd64() & 1 ? "+"
                                  : "",
                    abs(ex));
        }
        break;
    }
    case 1:
        sprintf(t, "%s%.*e", sign, prec, mid);
        break;
    case 2:
        sprintf(t, "%s%.*e", sign, 16 + prec % 4,
                rnd64() & 1 ? nextafter(mid, 0.0) : nextafter(mid, HUGE_VAL));
        break;
    case 3:
        sprintf(t, "%s%.17g", sign, (double)(rnd64() >> 11) / 9007199254740992.0);
        break;
    case 4:
        sprintf(t, "%s%.9g", sign, (double)f);
        break;
    default: {
        static const double around[] = {
            0x1p-149,       0x1p-150,       0x1.8p-150, 0x1p-126, 0x1.fffffcp-127,
            0x1.fffffep127, 0x1.ffffffp127, 0x1p128,    1e-45,    1e38};
        double x = around[rnd64() % (sizeof around / sizeof around[0])];
        x *= 1.0 + ((double)(rnd64() >> 11) / 9007199254740992.0 - 0.5) * 1e-7;
        sprintf(t, "%s%.*e", sign, prec, x);
        break;
    }
    }
}

/* Reads t with apip_jv_float, apip_jv_float_row and apip_jv_number; all must give
 * (float)strtod(t) bit for bit and end where t ends. */
static bool read_ok(const char *t) {
    char buf[160];
    size_t n = strlen(t);
    memcpy(buf, t, n);
    memcpy(buf + n, "]       ", 9);
    float want = (float)strtod(t, NULL), b = 0.0f;
    const char *e1 = NULL, *e2 = NULL, *e3 = NULL;
    float a = apip_jv_float(buf, &e1);
    size_t got = apip_jv_float_row(buf, buf + n + 9, &b, 1, &e2);
    float c = (float)apip_jv_number(buf, &e3);
    if (got == 0 && !isfinite(want)) { /* the row reader leaves infinities to its caller */
        b = want;
        e2 = buf + n;
    }
    if (memcmp(&a, &want, sizeof a) || memcmp(&b, &want, sizeof b) || memcmp(&c, &want, sizeof c) ||
        e1 != buf + n || e2 != buf + n || e3 != buf + n) {
        CHECK(false, "reading %s: strtod %a, apip_jv_float %a, _row %a, apip_jv_number %a", t,
              (double)want, (double)a, (double)b, (double)c);
        return false;
    }
    return true;
}

static void test_float_read(void) {
    static const char *const edge[] = {
        "0",
        "-0",
        "0.0",
        "-0.0",
        "-0e5",
        "0e-999",
        "1",
        "-1",
        "0.1",
        "0.5",
        "1e-45",
        "-1e-45",
        "7e-46",
        "7.006492321624085e-46",
        "7.006492321624086e-46",
        "1.401298464324817e-45",
        "2.1019476964872256e-45",
        "1.1754942e-38",
        "1.17549435e-38",
        "1.1754943508222875e-38",
        "5.877471754111438e-39",
        "3.4028235e38",
        "-3.4028235e38",
        "3.4028236e38",
        "3.4028235677973362e38",
        "3.4028235677973366e38",
        "3.40282356779733661637539395458142568448e38",
        "3.402823567797336616375393954581425684479e38",
        "1e38",
        "1e39",
        "-1e39",
        "1e-65",
        "1e-66",
        "1e100000",
        "-1e-100000",
        "7.038531e-26",
        "7.0385307e-26",
        "7.0385310e-26",
        "16777216",
        "16777217",
        "16777219",
        "33554433",
        "1.00000005960464477539",
        "1.0000000596046447753906250",
        "1.0000000596046447753906250000000001",
        "1.00000005960464477539062499999999",
        "0.30000000000000004",
        "-0.5771224498748779",
        "123456789012345678901234567890",
        "9999999999999999999",
        "18446744073709551615",
        "18446744073709551616",
        "0.000000000000000000000000000000000000000000000000000000001",
        "1E+2",
        "1e+02",
        "12345678.5",
        "123456789.5",
        "0.1234567890123456789",
        "4.9e-324",
        "2.2250738585072014e-308",
        "1.7976931348623157e308",
        "-0.000000000000000000001"};
    size_t bad = 0;
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
        bad += !read_ok(edge[i]);
    for (int i = 0; i < 1000000 && bad < 20; i++) {
        char t[128];
        dec_string(t, i % 6);
        bad += !read_ok(t);
    }
    CHECK(bad == 0, "%zu decimals were read wrong", bad);

    /* Through the tensor reader: a (40, 500) array of such decimals, separated as JSON
     * writers do (",", ", ", newlines, whitespace before a comma), up to the last number before
     * the closing brackets. */
    enum { R = 40, C = 500 };
    sb body = {0};
    float *want = malloc(R * C * sizeof *want), *got = malloc(R * C * sizeof *got);
    sb_add(&body, "{\"x\": [");
    for (int r = 0; r < R; r++) {
        sb_add(&body, r ? ",\n [" : "[");
        for (int c = 0; c < C; c++) {
            char t[128];
            do /* finite ones: an infinity is refused (tested with the request cases) */
                dec_string(t, (r * C + c) % 5);
            while (!isfinite((float)strtod(t, NULL)));
            want[r * C + c] = (float)strtod(t, NULL);
            sb_add(&body, c == 0 ? "%s" : r % 3 == 1 ? ", %s" : r % 3 == 2 ? " ,\n\t%s" : ",%s", t);
        }
        sb_add(&body, "]");
    }
    sb_add(&body, "]}");
    apip_json_root root;
    api_error err = {0};
    apip_tensor_in tin;
    CHECK(apip_json_check(body.s, body.n, "body", &root, &err) == 0 &&
              apip_tensor_probe(&tin, "x", root.m[0].val, 4, 100000, SIZE_MAX, &err) == 0 &&
              apip_tensor_read(&tin, APIP_TENSOR_FLOAT, got, &err) == 0,
          "reading the tensor: %s", err.message);
    size_t at = 0;
    CHECK(tin.rank == 2 && tin.dims[0] == R && tin.dims[1] == C && same_bits(got, want, R * C, &at),
          "the tensor reader read element %zu as %a, strtod %a", at, (double)got[at],
          (double)want[at]);
    free(body.s), free(want), free(got);
}

/* ---- Rows of numbers (api/codec/rows.c) --------------------------------------------------- */

/* A number for the row tests, of kind k: dec_string's kinds (0-5), attnd's own output (6),
 * short decimals as Python writes round(x, 6) (7), zeros (8), and float midpoints that have at
 * most 15 digits in fixed notation, or the decimals one unit in their last digit away (9: the
 * doubtful case of the product with a rounded power of ten in rows.c). */
static void row_number(char *t, int k) {
    switch (k) {
    case 6: {
        float f = frand() * (rnd64() % 4 ? 1.0f : 1e-4f);
        t[api_float_write(t, f)] = '\0';
        break;
    }
    case 7:
        sprintf(t, "%.6f", (double)frand());
        break;
    case 8:
        sprintf(t, "%s", rnd64() % 2 ? "0" : rnd64() % 2 ? "-0" : "-0.0");
        break;
    case 9: { /* a float midpoint in [2^13, 2^49), exact in at most 15 digits, or next to it */
        int x = 13 + (int)(rnd64() % 36);
        uint32_t u = (uint32_t)(127 + x) << 23 | (uint32_t)(rnd64() & 0x7FFFFFu);
        float f;
        memcpy(&f, &u, sizeof f);
        double mid = (double)f + (double)(nextafterf(f, INFINITY) - f) / 2;
        int n = sprintf(t, "%s%.*f", rnd64() % 2 ? "-" : "", x < 24 ? 24 - x : 0, mid);
        if (n > 16) {
            sprintf(t, "%.0f", mid);
            n = (int)strlen(t);
        }
        int step = (int)(rnd64() % 3) - 1; /* the last digit one down, as is, one up */
        if (t[n - 1] > '0' && t[n - 1] < '9')
            t[n - 1] = (char)(t[n - 1] + step);
        break;
    }
    default:
        dec_string(t, k);
    }
}

static bool row_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The reference reading of a row (apip_jv_float_row's contract): (float)strtod per number, up to
 * n of them, stopping at a number that is not finite or an element that is not a number; *end
 * where it stopped (the next element, or the ']'). */
static size_t ref_row_read(const char *p, float *dst, size_t n, const char **end) {
    size_t k = 0;
    while (k < n && (*p == '-' || (*p >= '0' && *p <= '9'))) {
        char *e;
        float v = (float)strtod(p, &e);
        if (!isfinite(v))
            break;
        dst[k++] = v;
        p = e;
        while (row_ws(*p))
            p++;
        if (*p != ',')
            break;
        p++;
        while (row_ws(*p))
            p++;
    }
    *end = p;
    return k;
}

/* RFC 8259's number at p (before e), or NULL. */
static const char *ref_number(const char *p, const char *e) {
    if (p < e && *p == '-')
        p++;
    if (p >= e || !isdigit((unsigned char)*p))
        return NULL;
    if (*p == '0')
        p++;
    else
        while (p < e && isdigit((unsigned char)*p))
            p++;
    if (p < e && *p == '.') {
        if (++p >= e || !isdigit((unsigned char)*p))
            return NULL;
        while (p < e && isdigit((unsigned char)*p))
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || !isdigit((unsigned char)*p))
            return NULL;
        while (p < e && isdigit((unsigned char)*p))
            p++;
    }
    return p;
}

/* The reference check of a row (apip_num_row_check's contract): one past the ']' when [p, e)
 * starts with numbers separated by commas, whitespace around them, up to a ']'; else NULL. */
static const char *ref_row_check(const char *p, const char *e) {
    for (;;) {
        if (!(p = ref_number(p, e)))
            return NULL;
        while (p < e && row_ws(*p))
            p++;
        if (p < e && *p == ']')
            return p + 1;
        if (p >= e || *p != ',')
            return NULL;
        p++;
        while (p < e && row_ws(*p))
            p++;
    }
}

/* Appends a row of count elements to b (its '[' and ']' too), numbers of kinds from the mask
 * kinds (bit k: row_number's kind k), separators of every kind; with odd > 0, one element in
 * about odd is something else (a string, a literal, an array, an object, an infinity). */
static void sb_row(sb *b, size_t count, unsigned kinds, unsigned odd) {
    static const char *const seps[] = {
        ",", ", ", " ,", ",\n  ", "\t,\t", ",\r\n", ",                              "};
    static const char *const others[] = {"\"-inf\"", "true", "null",  "[1]",
                                         "{}",       "1e39", "-1e39", "false"};
    sb_add(b, "%s", rnd64() % 4 ? "[" : "[ \n");
    unsigned sep = (unsigned)(rnd64() % 7); /* mostly one kind per row, as writers do */
    for (size_t i = 0; i < count; i++) {
        char t[160];
        int k;
        do
            k = (int)(rnd64() % 10);
        while (!(kinds >> k & 1));
        row_number(t, k);
        if (odd && rnd64() % odd == 0)
            sprintf(t, "%s", others[rnd64() % 8]);
        if (i)
            sb_add(b, "%s", seps[rnd64() % 8 == 0 ? rnd64() % 7 : sep]);
        sb_add(b, "%s", t);
    }
    sb_add(b, "%s", rnd64() % 4 ? "]" : " \n]");
}

/* Every implementation reads rows as strtod does: rows of 1 to 40 numbers and long ones, every
 * kind of number, at every alignment to the 64-byte blocks (a prefix of 0 to 69 spaces), with
 * n at, below and above the row's length, odd elements inside, and the row at the very end of
 * an allocation of its exact size (so that ASan sees any read past it). */
static void test_rows_read(void) {
    size_t nimpl = 0;
    const apip_rows_impl *impls = apip_rows_impls(&nimpl);
    CHECK(nimpl >= 1 && !strcmp(impls[nimpl - 1].name, "portable"),
          "the implementations end with the portable one");
    size_t bad = 0, rows = 0;
    for (int it = 0; it < 60000 && bad < 10; it++) {
        size_t count = it % 3 == 0 ? 40 + rnd64() % 200 : 1 + (size_t)(it % 40);
        unsigned kinds = it % 4 == 0 ? 0x3FFu : it % 4 == 1 ? 1u << 6 : 1u << (rnd64() % 10);
        unsigned odd = it % 5 == 0 ? 20 : 0;
        sb row = {0};
        size_t pad = rnd64() % 70;
        for (size_t i = 0; i < pad; i++)
            sb_add(&row, " ");
        sb_row(&row, count, kinds, odd);
        /* the exact size: nothing after the ']' (a tensor's text ends right there) */
        char *text = malloc(row.n);
        memcpy(text, row.s, row.n);
        const char *p = text + pad + 1, *lim = text + row.n;
        while (row_ws(*p))
            p++;
        size_t n = it % 7 == 0 ? rnd64() % (count + 1) : it % 7 == 1 ? count + 3 : count;
        float *want = malloc((count + 3) * sizeof *want), *got = malloc((count + 3) * sizeof *got);
        const char *we = NULL;
        size_t wn = ref_row_read(p, want, n, &we);
        for (size_t m = 0; m < nimpl; m++) {
            const char *ge = NULL;
            size_t gn = impls[m].read(p, lim, got, n, &ge);
            size_t at = 0;
            if (gn != wn || ge != we || !same_bits(got, want, wn, &at)) {
                if (bad++ < 10)
                    CHECK(false,
                          "%s read %zu numbers (strtod %zu), ended at byte %td (strtod %td), "
                          "number %zu %a (strtod %a), n %zu, row %.*s",
                          impls[m].name, gn, wn, ge - p, we - p, at, (double)got[at],
                          (double)want[at], n, (int)(lim - p), p);
            }
        }
        rows++;
        free(text), free(row.s), free(want), free(got);
    }
    CHECK(bad == 0, "%zu of %zu rows were read differently from strtod", bad, rows);
}

/* Every implementation's check of a row gives the reference grammar's verdict (and end) on
 * valid rows and on rows with one to three random edits; and apip_json_check gives the same
 * result and message with each implementation as byte by byte, for documents with such rows. */
static void test_rows_check(void) {
    size_t nimpl = 0;
    const apip_rows_impl *impls = apip_rows_impls(&nimpl);
    const char alphabet[] = "0123456789.eE+-, \t\n]x[\"}";
    size_t bad = 0, accepted = 0, total = 0;
    for (int it = 0; it < 150000 && bad < 10; it++) {
        sb row = {0};
        size_t count = 1 + rnd64() % (it % 2 ? 12 : 60);
        sb_row(&row, count, 0x3FFu & ~(1u << 5), it % 9 == 0 ? 8 : 0);
        int edits = it % 4 == 0 ? 0 : 1 + (int)(rnd64() % 3);
        for (int k = 0; k < edits && row.n > 2; k++) {
            size_t at = 1 + rnd64() % (row.n - 1);
            char c = alphabet[rnd64() % (sizeof alphabet - 1)];
            int op = (int)(rnd64() % 3);
            if (op == 0) {
                row.s[at] = c;
            } else if (op == 1) {
                sb_add(&row, " ");
                memmove(row.s + at + 1, row.s + at, row.n - at - 1);
                row.s[at] = c;
            } else {
                memmove(row.s + at, row.s + at + 1, row.n - at - 1);
                row.n--;
            }
        }
        /* the row alone, cut at a random place one time in four, at the end of its allocation */
        size_t len = it % 4 == 3 ? 1 + rnd64() % row.n : row.n;
        char *text = malloc(len);
        memcpy(text, row.s, len);
        const char *p = text + 1, *e = text + len;
        while (p < e && row_ws(*p))
            p++;
        if (p < e && (*p == '-' || isdigit((unsigned char)*p))) {
            const char *want = ref_row_check(p, e);
            accepted += want != NULL;
            total++;
            for (size_t m = 0; m < nimpl; m++) {
                if (!impls[m].check)
                    continue;
                const char *got = impls[m].check(p, e);
                if (got != want && bad++ < 10)
                    CHECK(false, "%s checks the row %.*s as %s (the grammar: %s)", impls[m].name,
                          (int)(e - p), p, got ? "valid" : "invalid", want ? "valid" : "invalid");
            }
        }
        free(text);
        /* in a document: the same verdict and message whatever checks the rows */
        sb doc = {0};
        sb_add(&doc, "{\"a\": %.*s, \"b\": [", (int)row.n, row.s);
        sb_row(&doc, 1 + rnd64() % 30, 1u << 6, 0);
        sb_add(&doc, ", ");
        sb_row(&doc, 1 + rnd64() % 30, 1u << 7, 0);
        sb_add(&doc, "]}");
        char *d = malloc(doc.n);
        memcpy(d, doc.s, doc.n);
        apip_json_root r0;
        api_error e0 = {0};
        int rc0 = apip_json_check_with(d, doc.n, "the body", 64, NULL, &r0, &e0);
        for (size_t m = 0; m < nimpl; m++) {
            apip_json_root r1;
            api_error e1 = {0};
            int rc1 = apip_json_check_with(d, doc.n, "the body", 64, impls[m].check, &r1, &e1);
            if ((rc0 != rc1 || strcmp(e0.message, e1.message) || r0.n != r1.n) && bad++ < 10)
                CHECK(false, "%s: apip_json_check says \"%s\", byte by byte \"%s\": %.*s",
                      impls[m].name, e1.message, e0.message, (int)doc.n, d);
        }
        free(d), free(doc.s), free(row.s);
    }
    CHECK(bad == 0, "%zu row checks differ from the grammar or from byte by byte", bad);
    CHECK(accepted > total / 5 && accepted < total, "valid rows %zu of %zu: both kinds tested",
          accepted, total);
}

/* Appends a random JSON value for the probe test: numbers, literals, strings with brackets
 * in them, and arrays of 0 to 5 of these (of any shape) down to depth levels. */
static void sb_value(sb *b, int depth) {
    static const char *const scalars[] = {"1",      "-2.5e-3",         "0", "true", "null", "\"]\"",
                                          "\"[,\"", "{\"a\": [1, 2]}", "17"};
    if (depth == 0 || rnd64() % 5 == 0) {
        sb_add(b, "%s", scalars[rnd64() % 9]);
        return;
    }
    size_t n = rnd64() % 6;
    sb_add(b, "%s", rnd64() % 3 ? "[" : "[ ");
    for (size_t i = 0; i < n; i++) {
        if (i)
            sb_add(b, "%s", rnd64() % 2 ? "," : " , ");
        sb_value(b, depth - 1);
    }
    sb_add(b, "%s", rnd64() % 3 ? "]" : " ]");
}

/* The shape of the nested arrays at val from the first element of each level, counting the
 * elements one by one (as apip_tensor_probe did before it counted rows of numbers by their
 * commas): rank, dims and where the outer array ends. 1 when a level is empty. */
static int ref_probe(const char *val, size_t *rank, size_t *dims, const char **end) {
    *rank = 0;
    for (const char *p = val; apip_jv_kind(p) == '[' && *rank < APIP_MAX_RANK;) {
        size_t n = 0;
        const char *it = p, *el = NULL, *first = NULL;
        while (apip_jv_arr_next(&it, &el))
            if (n++ == 0)
                first = el;
        if (*rank == 0)
            *end = apip_jv_ws(it) + 1;
        if (n == 0)
            return 1;
        dims[(*rank)++] = n;
        p = first;
    }
    return 0;
}

/* apip_num_row_commas (every implementation) against a byte loop, and apip_tensor_probe's shapes
 * against counting elements one by one, on random values. */
static void test_rows_count(void) {
    size_t nimpl = 0;
    const apip_rows_impl *impls = apip_rows_impls(&nimpl);
    const char alphabet[] = "0123456789.,- e,,,,[{}\"]";
    size_t bad = 0;
    for (int it = 0; it < 20000 && bad < 10; it++) {
        size_t n = rnd64() % (it % 2 ? 40 : 300);
        char *t = malloc(n ? n : 1);
        for (size_t i = 0; i < n; i++)
            t[i] =
                rnd64() % 50 ? alphabet[rnd64() % 15] : alphabet[rnd64() % (sizeof alphabet - 1)];
        long want = 0;
        for (size_t i = 0; i < n && want >= 0; i++)
            want = strchr("[{}\"", t[i]) ? -1 : want + (t[i] == ',');
        for (size_t m = 0; m < nimpl; m++) {
            long got = impls[m].commas(t, t + n);
            if (got != want && bad++ < 10)
                CHECK(false, "%s counts %ld commas (%ld) in %.*s", impls[m].name, got, want, (int)n,
                      t);
        }
        free(t);
    }
    for (int it = 0; it < 20000 && bad < 10; it++) {
        sb doc = {0};
        sb_add(&doc, "{\"x\": ");
        sb_value(&doc, 1 + (int)(rnd64() % 4));
        sb_add(&doc, "}");
        apip_json_root root;
        api_error err = {0};
        apip_tensor_in tin;
        if (apip_json_check(doc.s, doc.n, "body", &root, &err) != 0) {
            CHECK(false, "the probe test made invalid JSON: %s", doc.s);
            free(doc.s);
            continue;
        }
        size_t rank = 0, dims[APIP_MAX_RANK] = {0};
        const char *end = NULL;
        int empty = ref_probe(root.m[0].val, &rank, dims, &end);
        int rc = apip_tensor_probe(&tin, "x", root.m[0].val, APIP_MAX_RANK, 100, SIZE_MAX, &err);
        bool same = empty       ? rc != 0 && strstr(err.message, "is an empty array")
                    : rank == 0 ? rc != 0
                                : rc == 0 && tin.rank == rank && tin.end == end &&
                                      !memcmp(tin.dims, dims, rank * sizeof *dims);
        if (!same && bad++ < 10)
            CHECK(false,
                  "probing %s: rank %zu, dims %zu %zu (counted one by one: rank %zu, %zu %zu): %s",
                  doc.s, tin.rank, tin.dims[0], tin.dims[1], rank, dims[0], dims[1],
                  rc ? err.message : "ok");
        free(doc.s);
    }
    CHECK(bad == 0, "%zu comma counts or probes differ", bad);
}

/* ---- Base64 ------------------------------------------------------------------------------- */

static void test_base64(void) {
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const enc[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                      "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        size_t n = strlen(plain[i]);
        char out[16] = {0};
        CHECK(api_base64_encoded_len(n) == strlen(enc[i]), "encoded_len(%zu)", n);
        api_base64_encode(out, (const uint8_t *)plain[i], n);
        CHECK(memcmp(out, enc[i], strlen(enc[i])) == 0, "encode(%s) = %.8s", plain[i], out);
        uint8_t dec[16];
        size_t got = 99;
        CHECK(api_base64_decode(dec, &got, enc[i], strlen(enc[i])) && got == n &&
                  memcmp(dec, plain[i], n) == 0,
              "decode(%s)", enc[i]);
        CHECK(api_base64_decoded_max(strlen(enc[i])) >= n, "decoded_max");
    }
    static const char *const bad[] = {"Zg=",     "Zg",        "Z===",       "Zg==Zg==", "Zm9v!A==",
                                      "Zh==",    "Zm9=",      "=Zg=",       "Zm=v",     "Zm9v\n",
                                      "Zm 9",    "Zm9-",      "Zm9_",       "====",     "Zg=a",
                                      "Zm9vZg=", "Zm9vYmFy=", "\xc3\xa9Zg="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t dec[16];
        size_t got = 0;
        CHECK(!api_base64_decode(dec, &got, bad[i], strlen(bad[i])), "decode(\"%s\") accepted",
              bad[i]);
    }
    /* Round trips of random bytes of every length up to 300. */
    for (size_t n = 0; n <= 300; n++) {
        uint8_t in[300], back[300];
        for (size_t i = 0; i < n; i++)
            in[i] = (uint8_t)rnd64();
        char e[404];
        api_base64_encode(e, in, n);
        size_t got = 0;
        CHECK(api_base64_decode(back, &got, e, api_base64_encoded_len(n)) && got == n &&
                  memcmp(in, back, n) == 0,
              "round trip of %zu bytes", n);
    }
}

/* Every base64 implementation this CPU runs against the portable one (the last): the same text
 * for random bytes of every length up to 700, the same bytes back, nothing written past either;
 * and, for lengths that are multiples of 37 and every length from 200, a character outside the
 * alphabet at every place, with the portable code's verdict. Inputs are heap blocks of exactly
 * their length (make test-asan catches a read past them); outputs have one guard byte more. */
static void test_base64_impls(void) {
    size_t n_impl;
    const apip_base64_impl *im = apip_base64_impls(&n_impl);
    const apip_base64_impl *ref = &im[n_impl - 1];
    CHECK(strcmp(ref->name, "portable") == 0, "the last base64 implementation is %s", ref->name);
    if (n_impl == 1)
        printf("  base64: this CPU runs only the portable code (the AVX-512 VBMI path is not "
               "tested here)\n");
    static const char outside[] = {'=', '-', '_', ' ', '\n',       '\0',       '.',       '@',
                                   '[', '`', '{', 127, (char)0x80, (char)0xC3, (char)0xFF};
    enum { MAXN = 700 };
    for (size_t k = 0; k < n_impl; k++) {
        size_t bad = 0;
        for (size_t n = 0; n <= MAXN; n++) {
            size_t len = api_base64_encoded_len(n), room = api_base64_decoded_max(len);
            uint8_t *in = malloc(n ? n : 1), *back = malloc(room + 1), *want = malloc(room + 1);
            char *e = malloc(len + 1), *f = malloc(len + 1), *text = malloc(len ? len : 1);
            for (size_t i = 0; i < n; i++)
                in[i] = (uint8_t)rnd64();
            memset(e, '#', len + 1);
            memset(f, '#', len + 1);
            ref->encode(e, in, n);
            im[k].encode(f, in, n);
            bad += memcmp(e, f, len + 1) != 0 || e[len] != '#'; /* same text, guard intact */
            memcpy(text, e, len);
            size_t got = 0;
            memset(back, 0xA5, room + 1);
            bad += !im[k].decode(back, &got, text, len) || got != n || memcmp(back, in, n) != 0;
            for (size_t i = n; i <= room; i++)
                bad += back[i] != 0xA5; /* nothing past the decoded length */
            if (n % 37 == 0 || n >= 200) {
                for (size_t at = 0; at < len; at++) {
                    text[at] = outside[(n + at) % sizeof outside];
                    bool ok_ref = ref->decode(want, &got, text, len);
                    bool ok = im[k].decode(back, &got, text, len);
                    /* '=' in the last two places can be valid padding; elsewhere both refuse */
                    bad += ok != ok_ref || (ok && at + 2 < len);
                    text[at] = e[at];
                }
            }
            free(in);
            free(back);
            free(want);
            free(e);
            free(f);
            free(text);
        }
        CHECK(bad == 0, "base64 %s: %zu differences from the portable code", im[k].name, bad);
        printf("  base64 %s checked against portable\n", im[k].name);
    }
}

/* Base64 tensors' values: an infinity or a NaN at any place of tensors of many lengths (the
 * check works 16 values at a time, then the rest) is refused with its index; -inf is allowed
 * in attn_bias, +inf is not. */
static void test_base64_finite(void) {
    static const uint32_t nonfinite[] = {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFFFFFFFu};
    api_limits lim = api_limits_default();
    size_t bad = 0, tried = 0;
    for (size_t n = 1; n <= 70; n += n < 40 ? 1 : 15) {
        float *x = malloc(n * n * sizeof *x);
        for (size_t p = 0; p < n; p++) {
            for (size_t i = 0; i < n; i++)
                x[i] = (float)i * 0.25f - 1.0f;
            uint32_t u = nonfinite[(n + p) % 4];
            memcpy(&x[p], &u, sizeof u);
            sb b = {0};
            size_t dims[2] = {n, 1};
            sb_add(&b, "{\"query\":");
            sb_tensor_b64(&b, x, dims, 2);
            sb_add(&b, ",\"params\":{\"init\":\"identity\",\"num_heads\":1}}");
            api_error e = {0};
            api_job *job = api_job_parse(API_OP_ATTENTION, b.s, b.n, NULL, &lim, &e);
            char want[64];
            snprintf(want, sizeof want, " at [%zu][0];", p);
            bad += job != NULL || strcmp(e.code, "non_finite") != 0 || !strstr(e.message, want);
            api_job_destroy(job);
            /* the same place in a bias: -inf goes, +inf does not */
            for (int sign = 0; sign < 2; sign++) {
                for (size_t i = 0; i < n * n; i++)
                    x[i] = 0.5f;
                u = sign ? 0xFF800000u : 0x7F800000u;
                memcpy(&x[p * n + (p + 1) % n], &u, sizeof u);
                b.n = 0;
                size_t one[2] = {n, 1}, nn[2] = {n, n};
                float *q = calloc(n, sizeof *q);
                sb_add(&b, "{\"query\":");
                sb_tensor_b64(&b, q, one, 2);
                sb_add(&b, ",\"attn_bias\":");
                sb_tensor_b64(&b, x, nn, 2);
                sb_add(&b, ",\"params\":{\"init\":\"identity\",\"num_heads\":1}}");
                free(q);
                e = (api_error){0};
                job = api_job_parse(API_OP_ATTENTION, b.s, b.n, NULL, &lim, &e);
                bad += sign ? (n > 1 && job == NULL) : job != NULL;
                api_job_destroy(job);
            }
            free(b.s);
            tried++;
        }
        free(x);
    }
    CHECK(bad == 0, "%zu wrong answers for base64 tensors with a non-finite value at %zu places",
          bad, tried);
}

/* ---- JSON reader -------------------------------------------------------------------------- */

static bool json_ok(const char *s, size_t n) {
    apip_json_root root;
    api_error e = {0};
    return apip_json_check(s, n, "the text", &root, &e) == 0;
}

static void test_json(void) {
    static const char *const good[] = {"{}",
                                       " {\"a\":1} ",
                                       "{\"a\":[1,-2.5e+3,0,0.0,1E-2,-0]}",
                                       "{\"\\u00e9\\ud83d\\ude00\":\"\"}",
                                       "{\"a\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}",
                                       "{\"a\":{\"b\":[true,false,null]}}",
                                       "{\"a\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}",
                                       "{\r\n\t\"a\" : [ ] , \"b\" : { } }"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK(json_ok(good[i], strlen(good[i])), "rejected valid JSON %s", good[i]);
    static const char *const badj[] = {"",
                                       "{",
                                       "}",
                                       "[]",
                                       "{\"a\"}",
                                       "{\"a\":}",
                                       "{a:1}",
                                       "{\"a\":1,}",
                                       "{\"a\":01}",
                                       "{\"a\":1.}",
                                       "{\"a\":.5}",
                                       "{\"a\":-}",
                                       "{\"a\":1e}",
                                       "{\"a\":+1}",
                                       "{\"a\":tru}",
                                       "{\"a\":\"\\u12\"}",
                                       "{\"a\":\"\\ud800x\"}",
                                       "{\"a\":\"\\udc00\"}",
                                       "{\"a\":\"\xed\xa0\x80\"}",
                                       "{\"a\":\"\xf4\x90\x80\x80\"}",
                                       "{\"a\":\"\xe0\x80\xaf\"}",
                                       "{\"a\":\"\x80\"}",
                                       "{\"a\":\"\xc3\"}",
                                       "{\"a\":1}}",
                                       "{\"a\":[1 2]}",
                                       "{\"a\":\"b\" \"c\":1}",
                                       "{\"a\":0x10}",
                                       "{\"a\":\"\t\"}"};
    for (size_t i = 0; i < sizeof badj / sizeof badj[0]; i++)
        CHECK(!json_ok(badj[i], strlen(badj[i])), "accepted invalid JSON %s", badj[i]);
    /* Never reads past the given length: the same texts cut short must all fail. */
    const char *full = "{\"a\":[1,2,{\"b\":\"c\\u0041\"}],\"d\":-1.5e3}";
    for (size_t n = 0; n < strlen(full); n++) {
        char *cut = malloc(n ? n : 1);
        memcpy(cut, full, n);
        CHECK(!json_ok(cut, n), "accepted a prefix of %zu bytes", n);
        free(cut);
    }
    /* Depth: 64 levels pass, 65 fail, 100000 fail cleanly. */
    for (size_t depth = 63; depth <= 100000; depth = depth == 65 ? 100000 : depth + 1) {
        size_t n = 2 * depth + 8;
        char *s = malloc(n);
        size_t k = 0;
        k += (size_t)sprintf(s, "{\"a\":");
        for (size_t i = 1; i < depth; i++)
            s[k++] = '[';
        for (size_t i = 1; i < depth; i++)
            s[k++] = ']';
        s[k++] = '}';
        CHECK(json_ok(s, k) == (depth <= 64), "depth %zu", depth);
        free(s);
    }
    /* Differential test against jansson on mutated documents. */
    static const char *const seeds[] = {
        "{\"query\":[[1,0.5,-2e-3],[3,4,5]],\"params\":{\"init\":\"identity\",\"num_heads\":1}}",
        "{\"a\":\"\\u00e9\\n\",\"b\":[true,false,null,{}],\"c\":{\"d\":[[]]}}",
        "{\"q\":{\"dtype\":\"float32\",\"shape\":[1,2],\"data\":\"AACAPwAAAEA=\"}}",
        "{\"a\":[[1,2,3],[4,\"]\",6],[[7]],[8,{\"b\":[9]}],[\"[\"]],\"c\":[[1.5,-2e3]]}"};
    const char alphabet[] = "{}[]\",:\\/0123456789.eE+-tfnul aA\x80\xc3\xa9\xed\t\n";
    size_t mismatches = 0;
    for (int it = 0; it < 200000; it++) {
        const char *seed = seeds[it % 4];
        char s[256];
        size_t n = strlen(seed);
        memcpy(s, seed, n);
        int edits = 1 + (int)(rnd64() % 3);
        for (int k = 0; k < edits; k++) {
            size_t at = (size_t)(rnd64() % (n + 1));
            int op = (int)(rnd64() % 3);
            char c = alphabet[rnd64() % (sizeof alphabet - 1)];
            if (op == 0 && at < n)
                s[at] = c;
            else if (op == 1 && n < sizeof s - 1) {
                memmove(s + at + 1, s + at, n - at);
                s[at] = c;
                n++;
            } else if (at < n) {
                memmove(s + at, s + at + 1, n - at - 1);
                n--;
            }
        }
        json_error_t je;
        json_t *j = json_loadb(s, n, JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, &je);
        bool theirs = j && json_is_object(j), mine = json_ok(s, n);
        json_decref(j);
        if (mine) { /* navigation: the object ends where the text does, but for whitespace */
            const char *start = apip_jv_ws(s), *end = apip_jv_end(start), *last = s + n;
            while (last > s && strchr(" \t\r\n", last[-1]))
                last--;
            CHECK(end == last, "apip_jv_end stops at byte %td of %.*s", end - s, (int)n, s);
        }
        if (!j && strstr(je.text, "overflow"))
            continue; /* jansson refuses numbers beyond double; for us that is non_finite later */
        if (mine != theirs && mismatches++ < 5)
            CHECK(false, "JSON verdict differs from jansson (ours %d): %.*s (%s)", mine, (int)n, s,
                  je.text);
    }
    CHECK(mismatches == 0, "%zu JSON verdicts differ from jansson", mismatches);

    /* Numbers of up to 18 characters made of number characters, then a delimiter and enough
     * text after them for the 16-byte check (and without it, at the end), against jansson. */
    const char numchars[] = "0123456789012345678901234567890123456789.eE+--";
    mismatches = 0;
    for (int it = 0; it < 300000; it++) {
        char tok[24], s[128];
        size_t tn = 1 + (size_t)(rnd64() % 18);
        for (size_t k = 0; k < tn; k++)
            tok[k] = numchars[rnd64() % (sizeof numchars - 1)];
        tok[tn] = '\0';
        const char *delim = it % 3 == 0 ? "]" : it % 3 == 1 ? ",1]" : " ]";
        int n = it % 5
                    ? snprintf(s, sizeof s, "{\"a\":[%s%s,\"b\":\"0123456789abcdef\"}", tok, delim)
                    : snprintf(s, sizeof s, "{\"a\":%s}", tok);
        json_error_t je;
        json_t *j = json_loadb(s, (size_t)n, JSON_DECODE_INT_AS_REAL, &je);
        bool theirs = j != NULL, mine = json_ok(s, (size_t)n);
        json_decref(j);
        if (!j && strstr(je.text, "overflow"))
            continue;
        if (mine != theirs && mismatches++ < 5)
            CHECK(false, "number verdict differs from jansson (ours %d): %s (%s)", mine, s,
                  je.text);
    }
    CHECK(mismatches == 0, "%zu number verdicts differ from jansson", mismatches);

    /* Strings: decoding, comparison. */
    const char *doc = "{\"k\\u0065y\":\"a\\u00e9\\ud83d\\ude00\\n\\/\"}";
    apip_json_root root;
    api_error e = {0};
    CHECK(apip_json_check(doc, strlen(doc), "doc", &root, &e) == 0 && root.n == 1, "doc");
    CHECK(apip_jv_streq(root.m[0].key, "key"), "escaped key compares equal");
    CHECK(!apip_jv_streq(root.m[0].key, "ke"), "prefix is not equal");
    char out[32];
    size_t n = apip_jv_decode(apip_jv_string(root.m[0].val), out, sizeof out);
    CHECK(n == 9 && strcmp(out, "a\xc3\xa9\xf0\x9f\x98\x80\n/") == 0, "decode gave %zu %s", n, out);
    n = apip_jv_decode(apip_jv_string(root.m[0].val), out, 4); /* cut at a character boundary */
    CHECK(n == 9 && strcmp(out, "a\xc3\xa9") == 0, "cut decode gave %s", out);

    /* Numbers: the fast path agrees with strtod on random decimals. */
    size_t nbad = 0;
    for (int i = 0; i < 300000; i++) {
        char t[64];
        int digits = 1 + (int)(rnd64() % 20), ex = (int)(rnd64() % 80) - 40;
        int k = 0;
        if (rnd64() & 1)
            t[k++] = '-';
        t[k++] = (char)('1' + rnd64() % 9);
        if (digits > 1) {
            t[k++] = '.';
            for (int d = 1; d < digits; d++)
                t[k++] = (char)('0' + rnd64() % 10);
        }
        k += sprintf(t + k, "e%d,", ex);
        const char *end = NULL;
        double mine = apip_jv_number(t, &end), ref = strtod(t, NULL);
        if (memcmp(&mine, &ref, sizeof mine) != 0 || *end != ',')
            nbad += 1;
        if (nbad && nbad < 3 && memcmp(&mine, &ref, sizeof mine) != 0)
            CHECK(false, "apip_jv_number(%s) = %.17g, strtod = %.17g", t, mine, ref);
    }
    CHECK(nbad == 0, "%zu numbers parsed differently from strtod", nbad);
    const char *ints = "18446744073709551615,18446744073709551616,0,007,1.0,";
    uint64_t u = 0;
    CHECK(apip_jv_u64(ints, &u) && u == UINT64_MAX, "u64 max");
    CHECK(!apip_jv_u64(ints + 21, &u), "u64 overflow");
    CHECK(apip_jv_u64(ints + 42, &u) && u == 0, "u64 zero");
    CHECK(!apip_jv_u64(ints + 44, &u), "leading zero");
    CHECK(!apip_jv_u64(ints + 48, &u), "fraction");
}

/* ---- Request cases from data files -------------------------------------------------------- */

static api_registry *demo_registry(void) {
    api_error e = {0};
    api_registry *r = api_registry_create();
    CHECK(api_registry_add(r, api_model_demo(&e), &e) == 0, "add demo: %s", e.message);
    return r;
}

/* demo (the default) and lesson, as attnd holds them. */
static api_registry *builtin_registry(void) {
    api_error e = {0};
    api_registry *r = demo_registry();
    CHECK(api_registry_add(r, api_model_lesson(&e), &e) == 0, "add lesson: %s", e.message);
    return r;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Each .case file: the first line "STATUS [CODE FIELD] [limit=value ...]" (FIELD "-" for
 * null), then the body. */
static size_t run_case_dir(const char *sub, api_op op, const api_registry *models) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/requests/%s", cases_dir, sub);
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (!d)
        return 0;
    char *names[1024];
    size_t count = 0;
    struct dirent *de;
    while ((de = readdir(d)) && count < 1024)
        if (strstr(de->d_name, ".case"))
            names[count++] = strdup(de->d_name);
    closedir(d);
    qsort(names, count, sizeof *names, cmp_str);
    for (size_t i = 0; i < count; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t len = 0;
        char *text = read_file(path, &len);
        CHECK(text != NULL, "cannot read %s", path);
        if (!text)
            continue;
        char *nl = memchr(text, '\n', len);
        size_t hl = nl ? (size_t)(nl - text) : len;
        char head[256] = "", phrase[160] = "";
        snprintf(head, sizeof head, "%.*s", (int)hl, text);
        char *bar = strstr(head, " | "); /* the rest is a phrase the message must contain */
        if (bar) {
            snprintf(phrase, sizeof phrase, "%s", bar + 3);
            *bar = '\0';
        }
        const char *body = nl ? nl + 1 : text + len;
        size_t blen = len - (size_t)(body - text);
        int status = 0;
        char code[64] = "", field[160] = "";
        api_limits lim = api_limits_default();
        char *save = NULL;
        for (char *tok = strtok_r(head, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
            if (!status)
                status = atoi(tok);
            else if (strchr(tok, '=')) {
                size_t v = (size_t)strtoull(strchr(tok, '=') + 1, NULL, 10);
                if (!strncmp(tok, "max_job_bytes=", 14))
                    lim.max_job_bytes = v;
                else if (!strncmp(tok, "max_dim=", 8))
                    lim.max_dim = v;
                else if (!strncmp(tok, "max_heads=", 10))
                    lim.max_heads = v;
                else if (!strncmp(tok, "max_depth=", 10))
                    lim.max_depth = v;
            } else if (!code[0])
                snprintf(code, sizeof code, "%s", tok);
            else
                snprintf(field, sizeof field, "%s", strcmp(tok, "-") ? tok : "");
        }
        api_error e = {0};
        /* A copy of exactly blen bytes, so a read past the body is caught under ASan. */
        char *exact = malloc(blen ? blen : 1);
        memcpy(exact, body, blen);
        json_t *j = request(op, exact, blen, models, &lim, &e);
        int got = j ? 200 : e.status;
        CHECK(got == status, "%s: status %d, want %d (%s %s: %s)", path, got, status, e.code,
              e.field, e.message);
        if (status != 200 && got == status) {
            CHECK(strcmp(e.code, code) == 0, "%s: code %s, want %s (%s)", path, e.code, code,
                  e.message);
            CHECK(strcmp(e.field, field) == 0, "%s: field \"%s\", want \"%s\" (%s)", path, e.field,
                  field, e.message);
            CHECK(e.message[0] && !strchr(e.message, '\n'), "%s: message must be one line", path);
            CHECK(!phrase[0] || strstr(e.message, phrase), "%s: the message \"%s\" lacks \"%s\"",
                  path, e.message, phrase);
        }
        json_decref(j);
        free(exact);
        free(text);
        free(names[i]);
    }
    return count;
}

static void test_request_cases(void) {
    api_registry *models = builtin_registry();
    size_t n = run_case_dir("attention", API_OP_ATTENTION, models);
    n += run_case_dir("sdpa", API_OP_SDPA, models);
    CHECK(n >= 250, "only %zu request cases found", n);
    printf("request cases: %zu\n", n);
    api_registry_destroy(models);
}

/* ---- Worked examples ---------------------------------------------------------------------- */

static const char *seed_q = "[[1,1],[0,1],[1,0],[0.5,0.5]]";
static const char *seed_v = "[[1,0],[0,1],[1,1],[0.5,0.5]]";

static void test_seed_example(void) {
    char body[512];
    snprintf(body, sizeof body, "{\"q\":%s,\"k\":%s,\"v\":%s,\"need_weights\":true}", seed_q,
             seed_q, seed_v);
    api_error e = {0};
    json_t *j = request_str(API_OP_SDPA, body, NULL, &e);
    CHECK(j != NULL, "seed sdpa: %s", e.message);
    if (!j)
        return;
    float out[8], w[16];
    CHECK(flatten(json_object_get(j, "output"), out, 8) == 8, "output is (4, 2)");
    CHECK(flatten(json_object_get(j, "weights"), w, 16) == 16, "weights are (4, 4)");
    CHECK(fabsf(out[0] - 0.70f) < 0.005f && fabsf(out[1] - 0.50f) < 0.005f,
          "output row 0 = [%g, %g], want [0.70, 0.50]", (double)out[0], (double)out[1]);
    CHECK(fabsf(w[0] - 0.40f) < 0.005f && fabsf(w[1] - 0.20f) < 0.005f &&
              fabsf(w[2] - 0.20f) < 0.005f && fabsf(w[3] - 0.20f) < 0.005f,
          "weights row 0 = [%g, %g, %g, %g]", (double)w[0], (double)w[1], (double)w[2],
          (double)w[3]);
    size_t dims[4];
    CHECK(shape_of_json(json_object_get(j, "output"), dims) == 2 && dims[0] == 4 && dims[1] == 2,
          "sdpa rank-2 output shape");
    CHECK(json_object_get(j, "usage") && json_object_get(j, "model") == NULL &&
              json_integer_value(json_object_get(json_object_get(j, "usage"), "flops")) == 128,
          "sdpa usage");
    CHECK(json_object_size(j) == 3, "sdpa response has output, weights, usage");
    json_decref(j);

    /* Through /v1/attention with identity projections and one head: Q = K = V = query, scale
     * 1/sqrt(E = 2), so the weights are the seed's and the output is weights @ query; with the
     * seed's values as value, the output is the seed's output. Reference in double. */
    const double x[4][2] = {{1, 1}, {0, 1}, {1, 0}, {0.5, 0.5}},
                 vv[4][2] = {{1, 0}, {0, 1}, {1, 1}, {0.5, 0.5}};
    double ref_w[4][4], ref_self[4][2] = {{0}}, ref_cross[4][2] = {{0}};
    for (int i = 0; i < 4; i++) {
        double s[4], mx = -1e300, z = 0;
        for (int k = 0; k < 4; k++) {
            s[k] = (x[i][0] * x[k][0] + x[i][1] * x[k][1]) / sqrt(2.0);
            mx = s[k] > mx ? s[k] : mx;
        }
        for (int k = 0; k < 4; k++)
            z += exp(s[k] - mx);
        for (int k = 0; k < 4; k++) {
            ref_w[i][k] = exp(s[k] - mx) / z;
            for (int c = 0; c < 2; c++) {
                ref_self[i][c] += ref_w[i][k] * x[k][c];
                ref_cross[i][c] += ref_w[i][k] * vv[k][c];
            }
        }
    }
    for (int cross = 0; cross < 2; cross++) {
        snprintf(body, sizeof body,
                 "{\"query\":%s%s%s,\"params\":{\"init\":\"identity\",\"num_heads\":1},"
                 "\"need_weights\":\"per_head\"}",
                 seed_q, cross ? ",\"value\":" : "", cross ? seed_v : "");
        j = request_str(API_OP_ATTENTION, body, NULL, &e);
        CHECK(j != NULL, "identity attention: %s", e.message);
        if (!j)
            continue;
        CHECK(flatten(json_object_get(j, "output"), out, 8) == 8, "output (4, 2)");
        CHECK(flatten(json_object_get(j, "weights"), w, 16) == 16, "weights (1, 4, 4)");
        double err = 0;
        for (int i = 0; i < 4; i++)
            for (int c = 0; c < 2; c++)
                err =
                    fmax(err, fabs((double)out[i * 2 + c] - (cross ? ref_cross : ref_self)[i][c]));
        for (int i = 0; i < 16; i++)
            err = fmax(err, fabs((double)w[i] - ref_w[i / 4][i % 4]));
        CHECK(err < 1e-6, "identity attention (cross %d) off by %g", cross, err);
        CHECK(cross || (fabsf(out[0] - 0.7016775f) < 1e-6f && fabsf(out[1] - 0.7016775f) < 1e-6f),
              "self-attention row 0 = [%g, %g]: weights @ query", (double)out[0], (double)out[1]);
        CHECK(!cross || (fabsf(out[0] - 0.70f) < 0.005f && fabsf(out[1] - 0.50f) < 0.005f),
              "cross row 0 = [%g, %g]", (double)out[0], (double)out[1]);
        size_t wd[4];
        CHECK(shape_of_json(json_object_get(j, "weights"), wd) == 3 && wd[0] == 1 && wd[1] == 4 &&
                  wd[2] == 4,
              "rank-2 per-head weights are (H, L, S)");
        CHECK(json_is_null(json_object_get(j, "model")) &&
                  json_integer_value(json_object_get(j, "num_heads")) == 1,
              "model null, num_heads 1");
        json_t *sh = json_object_get(j, "shape");
        CHECK(json_integer_value(json_object_get(sh, "N")) == 1 &&
                  json_integer_value(json_object_get(sh, "L")) == 4 &&
                  json_integer_value(json_object_get(sh, "S")) == 4 &&
                  json_integer_value(json_object_get(sh, "E")) == 2,
              "shape N, L, S, E");
        json_t *us = json_object_get(j, "usage");
        CHECK(json_is_integer(json_object_get(us, "flops")) &&
                  json_real_value(json_object_get(us, "queue_ms")) == 1.5 &&
                  json_real_value(json_object_get(us, "compute_ms")) == 2.25,
              "usage flops, queue_ms, compute_ms");
        json_decref(j);
    }
}

/* ---- Bitwise agreement with libattn ------------------------------------------------------- */

/* Random cross-attention with kdim/vdim, biases, every mask kind and per-head weights, sent as
 * JSON and as base64; the response (base64) must equal libattn's own result bit for bit. */
static void test_bitwise_cross(void) {
    enum { N = 2, L = 5, S = 7, E = 8, H = 2, KD = 3, VD = 6 };
    float *q = frand_new(N * L * E), *k = frand_new(N * S * KD), *v = frand_new(N * S * VD);
    float *wq = frand_new(E * E), *wk = frand_new(E * KD), *wv = frand_new(E * VD);
    float *bin = frand_new(3 * E), *wo = frand_new(E * E), *bo = frand_new(E);
    float bias[N * L * S];
    for (int i = 0; i < N * L * S; i++)
        bias[i] = i % 11 == 3 ? -INFINITY : frand();
    int32_t kl[N] = {6, 4};
    uint8_t km[S] = {1, 1, 0, 1, 1, 1, 1};
    for (int b64 = 0; b64 < 2; b64++) {
        sb body = {0};
        void (*put)(sb *, const float *, const size_t *, size_t) = b64 ? sb_tensor_b64 : sb_tensor;
        sb_add(&body, "{\"query\":");
        put(&body, q, (size_t[]){N, L, E}, 3);
        sb_add(&body, ",\"key\":");
        put(&body, k, (size_t[]){N, S, KD}, 3);
        sb_add(&body, ",\"value\":");
        put(&body, v, (size_t[]){N, S, VD}, 3);
        sb_add(&body, ",\"params\":{\"num_heads\":%d,\"q_proj_weight\":", H);
        put(&body, wq, (size_t[]){E, E}, 2);
        sb_add(&body, ",\"k_proj_weight\":");
        put(&body, wk, (size_t[]){E, KD}, 2);
        sb_add(&body, ",\"v_proj_weight\":");
        put(&body, wv, (size_t[]){E, VD}, 2);
        sb_add(&body, ",\"in_proj_bias\":");
        put(&body, bin, (size_t[]){3 * E}, 1);
        sb_add(&body, ",\"out_proj.weight\":");
        put(&body, wo, (size_t[]){E, E}, 2);
        sb_add(&body, ",\"out_proj.bias\":");
        put(&body, bo, (size_t[]){E}, 1);
        sb_add(&body, "},\"causal\":\"bottom_right\",\"key_lengths\":[6,4],"
                      "\"key_mask\":[1,1,0,1,1,1,1],\"attn_bias\":");
        if (b64) {
            sb_tensor_b64(&body, bias, (size_t[]){N, L, S}, 3);
        } else { /* JSON cannot hold -inf: the string "-inf" stands for it */
            sb_add(&body, "[");
            for (int i = 0; i < N * L * S; i++) {
                char t[40];
                t[api_float_write(t, bias[i])] = '\0';
                sb_add(&body, "%s%s%s%s%s", i % (L * S) == 0 ? (i ? "]],[[" : "[[") : "",
                       i % S == 0 && i % (L * S) ? "],[" : "", i % S ? "," : "",
                       isinf(bias[i]) ? "\"-inf\"" : t, "");
            }
            sb_add(&body, "]]]");
        }
        sb_add(&body, ",\"need_weights\":\"per_head\",\"encoding\":\"base64\"}");
        api_error e = {0};
        json_t *j = request_str(API_OP_ATTENTION, body.s, NULL, &e);
        CHECK(j != NULL, "cross request (base64 in: %d): %s", b64, e.message);

        attn_mha_dims dims = {.n = N, .l = L, .s = S, .e = E, .h = H, .kdim = KD, .vdim = VD};
        attn_masks m = {.causal = ATTN_CAUSAL_BOTTOM_RIGHT,
                        .key_lengths = kl,
                        .key_mask = km,
                        .key_mask_n = 1,
                        .attn_bias = bias,
                        .attn_bias_n = N,
                        .attn_bias_h = 1};
        attn_opts o = {.weights = ATTN_WEIGHTS_PER_HEAD};
        attn_plan p;
        attn_error ae = {0};
        CHECK(attn_mha_plan(&p, &dims, &o, &m, 1, &ae) == ATTN_OK, "plan: %s", ae.msg);
        void *ws = aligned_alloc(64, (p.workspace_bytes + 63) / 64 * 64 + 64);
        float out[N * L * E], w[N * H * L * S];
        attn_weights_out wo_ = {.values = w};
        attn_mha_params pr = {.q_proj_weight = wq,
                              .k_proj_weight = wk,
                              .v_proj_weight = wv,
                              .in_proj_bias = bin,
                              .out_proj_weight = wo,
                              .out_proj_bias = bo};
        CHECK(attn_mha_forward(&p, ws, out, &wo_, q, k, v, &pr, NULL, &ae) == ATTN_OK,
              "forward: %s", ae.msg);
        float got[N * L * E], gw[N * H * L * S];
        size_t at = 0;
        if (j) {
            CHECK(flatten(json_object_get(j, "output"), got, N * L * E) == N * L * E,
                  "output size");
            CHECK(flatten(json_object_get(j, "weights"), gw, N * H * L * S) == N * H * L * S,
                  "weights size");
            CHECK(same_bits(got, out, N * L * E, &at), "output differs from libattn at %zu", at);
            CHECK(same_bits(gw, w, N * H * L * S, &at), "weights differ from libattn at %zu", at);
            /* usage.flops counts the cells the key lengths leave, as the plan made with them. */
            json_t *fl = json_object_get(json_object_get(j, "usage"), "flops");
            CHECK(json_is_integer(fl) && (double)json_integer_value(fl) == p.flops,
                  "usage.flops is %lld; libattn's plan has %.0f", (long long)json_integer_value(fl),
                  p.flops);
            size_t d[4];
            CHECK(shape_of_json(json_object_get(j, "weights"), d) == 4 && d[0] == N && d[1] == H &&
                      d[2] == L && d[3] == S,
                  "weights shape (N, H, L, S)");
            CHECK(strcmp(json_string_value(json_object_get(json_object_get(j, "output"), "dtype")),
                         "float32") == 0,
                  "base64 output dtype");
            json_decref(j);
        }
        free(ws);
        free(body.s);
    }
    free(q), free(k), free(v), free(wq), free(wk), free(wv), free(bin), free(wo), free(bo);
}

/* Self-attention without key and value (libattn's packed path, same pointer), rank 2 and
 * rank 3, against libattn with query == key == value, in JSON out (exact by round trip). */
static void test_bitwise_self(void) {
    enum { N = 3, L = 6, E = 12, H = 3 };
    float *q = frand_new(N * L * E), *win = frand_new(3 * E * E), *wo = frand_new(E * E);
    float *bin = frand_new(3 * E), *bo = frand_new(E);
    for (int rank = 2; rank <= 3; rank++) {
        size_t n = rank == 3 ? N : 1;
        sb body = {0};
        sb_add(&body, "{\"query\":");
        sb_tensor(&body, q, rank == 3 ? (size_t[]){N, L, E} : (size_t[]){L, E}, (size_t)rank);
        sb_add(&body, ",\"params\":{\"num_heads\":%d,\"in_proj_weight\":", H);
        sb_tensor(&body, win, (size_t[]){3 * E, E}, 2);
        sb_add(&body, ",\"in_proj_bias\":");
        sb_tensor(&body, bin, (size_t[]){3 * E}, 1);
        sb_add(&body, ",\"out_proj.weight\":");
        sb_tensor(&body, wo, (size_t[]){E, E}, 2);
        sb_add(&body, ",\"out_proj.bias\":");
        sb_tensor(&body, bo, (size_t[]){E}, 1);
        sb_add(&body, "},\"causal\":true,\"need_weights\":\"mean\"}");
        api_error e = {0};
        json_t *j = request_str(API_OP_ATTENTION, body.s, NULL, &e);
        CHECK(j != NULL, "self request: %s", e.message);
        attn_mha_dims dims = {.n = n, .l = L, .s = L, .e = E, .h = H};
        attn_masks m = {.causal = ATTN_CAUSAL_TOP_LEFT};
        attn_opts o = {.weights = ATTN_WEIGHTS_MEAN};
        attn_plan p;
        attn_error ae = {0};
        attn_mha_plan(&p, &dims, &o, &m, 1, &ae);
        void *ws = aligned_alloc(64, (p.workspace_bytes + 63) / 64 * 64 + 64);
        float out[N * L * E], w[N * L * L], got[N * L * E], gw[N * L * L];
        attn_weights_out wout = {.values = w};
        attn_mha_params pr = {
            .in_proj_weight = win, .in_proj_bias = bin, .out_proj_weight = wo, .out_proj_bias = bo};
        attn_mha_forward(&p, ws, out, &wout, q, q, q, &pr, NULL, &ae);
        if (j) {
            size_t at = 0, d[4];
            CHECK(flatten(json_object_get(j, "output"), got, N * L * E) == n * L * E, "size");
            CHECK(flatten(json_object_get(j, "weights"), gw, N * L * L) == n * L * L, "size");
            CHECK(same_bits(got, out, n * L * E, &at), "rank %d output differs at %zu", rank, at);
            CHECK(same_bits(gw, w, n * L * L, &at), "rank %d weights differ at %zu", rank, at);
            CHECK(shape_of_json(json_object_get(j, "output"), d) == (size_t)rank, "out rank");
            CHECK(shape_of_json(json_object_get(j, "weights"), d) == (size_t)rank - 1 + 0 + 1 &&
                      d[rank - 2] == L && d[rank - 1] == L,
                  "mean weights rank");
            json_decref(j);
        }
        free(ws);
        free(body.s);
    }
    free(q), free(win), free(wo), free(bin), free(bo);
}

/* ---- Models ------------------------------------------------------------------------------- */

static uint64_t sm_state;
static uint64_t sm_next(void) { /* splitmix64, written out again independently */
    uint64_t z = (sm_state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* params.init weights are kept per thread (API_INIT_CACHE_FLOATS): jobs that alternate seeds,
 * and kinds of init, on one thread each answer as the registry model of their own weights, bit
 * for bit, with E = 16 (kept) and E = 264 (over the bound: made in each job's arena). */
static void test_init_cache(void) {
    const size_t H = 4, L = 3, es[2] = {16, 264};
    const uint64_t seeds[5] = {5, 6, 5, 0, 6}; /* 0: "identity" */
    for (int ei = 0; ei < 2; ei++) {
        size_t E = es[ei];
        api_error e = {0};
        api_registry *reg = api_registry_create();
        api_registry_add(reg, api_model_init_random("s5", E, H, 5, &e), &e);
        api_registry_add(reg, api_model_init_random("s6", E, H, 6, &e), &e);
        float *x = frand_new(L * E), *a = malloc(L * E * sizeof *a), *b = malloc(L * E * sizeof *b);
        for (int si = 0; si < 5; si++) {
            uint64_t seed = seeds[si];
            sb body = {0};
            sb_add(&body, "{\"query\":");
            sb_tensor(&body, x, (size_t[]){L, E}, 2);
            if (seed)
                sb_add(&body, ",\"params\":{\"init\":\"random\",\"seed\":%llu,\"num_heads\":%zu}}",
                       (unsigned long long)seed, H);
            else
                sb_add(&body, ",\"params\":{\"init\":\"identity\",\"num_heads\":%zu}}", H);
            json_t *inl = request_str(API_OP_ATTENTION, body.s, reg, &e), *ref = NULL;
            size_t at = 0, n = L * E;
            if (seed) { /* the same query on the model of the same weights */
                body.n = 0;
                sb_add(&body, "{\"query\":");
                sb_tensor(&body, x, (size_t[]){L, E}, 2);
                sb_add(&body, ",\"model\":\"s%llu\"}", (unsigned long long)seed);
                ref = request_str(API_OP_ATTENTION, body.s, reg, &e);
                CHECK(inl && ref && flatten(json_object_get(inl, "output"), a, n) == n &&
                          flatten(json_object_get(ref, "output"), b, n) == n &&
                          same_bits(a, b, n, &at),
                      "init cache: E %zu, request %d (seed %llu) differs from its model (at %zu)",
                      E, si, (unsigned long long)seed, at);
            } else { /* identity (checked in test_init_models); here it replaces the kept
                        weights between two "random" jobs */
                CHECK(inl != NULL, "init cache: E %zu, identity: %s", E, e.message);
            }
            json_decref(inl);
            json_decref(ref);
            free(body.s);
        }
        free(x), free(a), free(b);
        api_registry_destroy(reg);
    }
}

static void test_init_models(void) {
    api_error e = {0};
    const size_t E = 16, H = 4;
    const uint64_t seed = 12345;
    api_model *m = api_model_init_random("r", E, H, seed, &e);
    CHECK(m != NULL, "init_random: %s", e.message);
    const attn_mha_params *pp = apip_model_params(m);
    sm_state = seed;
    size_t bad = 0;
    double a_in = sqrt(6.0 / (double)(4 * E)), a_out = sqrt(6.0 / (double)(2 * E));
    for (size_t i = 0; i < 4 * E * E; i++) {
        double u = (double)(sm_next() >> 40) / 16777216.0;
        float want = (float)((i < 3 * E * E ? a_in : a_out) * (2.0 * u - 1.0));
        float got = i < 3 * E * E ? pp->in_proj_weight[i] : pp->out_proj_weight[i - 3 * E * E];
        bad += memcmp(&want, &got, sizeof got) != 0;
    }
    CHECK(bad == 0, "%zu init_random weights differ from the documented stream", bad);
    CHECK(!pp->in_proj_bias && !pp->out_proj_bias, "no biases");
    api_model_info mi = api_model_describe(m);
    CHECK(mi.embed_dim == E && mi.num_heads == H && mi.kdim == E && mi.vdim == E && !mi.has_bias &&
              strcmp(mi.source, "builtin") == 0 && strcmp(mi.name, "r") == 0,
          "describe");

    /* The same weights inline ({"init": "random"}) give the same output bit for bit. */
    float *x = frand_new(5 * E);
    sb body = {0};
    sb_add(&body, "{\"query\":");
    sb_tensor(&body, x, (size_t[]){5, E}, 2);
    sb_add(&body,
           ",\"params\":{\"init\":\"random\",\"seed\":%llu,\"num_heads\":%zu},\"encoding\":"
           "\"base64\"}",
           (unsigned long long)seed, H);
    api_registry *reg = api_registry_create();
    api_registry_add(reg, m, &e);
    json_t *inl = request_str(API_OP_ATTENTION, body.s, reg, &e);
    CHECK(inl != NULL, "init random request: %s", e.message);
    body.n = 0;
    sb_add(&body, "{\"query\":");
    sb_tensor(&body, x, (size_t[]){5, E}, 2);
    sb_add(&body, ",\"model\":\"r\",\"encoding\":\"base64\"}");
    json_t *named = request_str(API_OP_ATTENTION, body.s, reg, &e);
    CHECK(named != NULL, "model request: %s", e.message);
    if (inl && named) {
        float a[5 * 16], b[5 * 16];
        size_t at = 0;
        CHECK(flatten(json_object_get(inl, "output"), a, 80) == 80 &&
                  flatten(json_object_get(named, "output"), b, 80) == 80 &&
                  same_bits(a, b, 80, &at),
              "init random inline != the same model by name (at %zu)", at);
        CHECK(strcmp(json_string_value(json_object_get(named, "model")), "r") == 0,
              "model name in the response");
        CHECK(json_integer_value(json_object_get(named, "num_heads")) == 4, "num_heads 4");
    }
    json_decref(inl);
    json_decref(named);

    /* Identity: output = softmax(x x^T / sqrt(Dh) per head) x, checked in double. */
    body.n = 0;
    sb_add(&body, "{\"query\":");
    sb_tensor(&body, x, (size_t[]){5, E}, 2);
    sb_add(&body, ",\"params\":{\"init\":\"identity\",\"num_heads\":%zu}}", H);
    json_t *id = request_str(API_OP_ATTENTION, body.s, NULL, &e);
    CHECK(id != NULL, "identity request: %s", e.message);
    if (id) {
        float got[80];
        CHECK(flatten(json_object_get(id, "output"), got, 80) == 80, "identity output");
        double err = 0;
        size_t dh = E / H;
        for (size_t hh = 0; hh < H; hh++)
            for (size_t i = 0; i < 5; i++) {
                double s[5], mx = -1e300, z = 0;
                for (size_t k = 0; k < 5; k++) {
                    s[k] = 0;
                    for (size_t c = 0; c < dh; c++)
                        s[k] += (double)x[i * E + hh * dh + c] * (double)x[k * E + hh * dh + c];
                    s[k] /= sqrt((double)dh);
                    mx = fmax(mx, s[k]);
                }
                for (size_t k = 0; k < 5; k++)
                    z += exp(s[k] - mx);
                for (size_t c = 0; c < dh; c++) {
                    double o = 0;
                    for (size_t k = 0; k < 5; k++)
                        o += exp(s[k] - mx) / z * (double)x[k * E + hh * dh + c];
                    err = fmax(err, fabs(o - (double)got[i * E + hh * dh + c]));
                }
            }
        CHECK(err < 2e-6, "identity MHA off by %g", err);
        json_decref(id);
    }
    api_model *idm = api_model_init_identity("i", 6, 3, &e);
    CHECK(idm && apip_model_params(idm)->in_proj_weight[0] == 1.0f &&
              apip_model_params(idm)->in_proj_weight[1] == 0.0f &&
              apip_model_params(idm)->in_proj_weight[(2 * 6 + 5) * 6 + 5] == 1.0f &&
              apip_model_params(idm)->out_proj_weight[7] == 1.0f,
          "identity weights");
    api_model_destroy(idm);
    api_error e2 = {0};
    CHECK(api_model_init_identity("bad", 6, 4, &e2) == NULL && e2.status == 400, "E %% H");

    /* The demo model is init_random("demo", 64, 4, seed 24301). */
    api_model *demo = api_model_demo(&e), *same = api_model_init_random("x", 64, 4, 24301, &e);
    mi = api_model_describe(demo);
    CHECK(mi.embed_dim == 64 && mi.num_heads == 4 && strcmp(mi.name, "demo") == 0,
          "demo is E=64 H=4");
    CHECK(memcmp(apip_model_params(demo)->in_proj_weight, apip_model_params(same)->in_proj_weight,
                 3 * 64 * 64 * 4) == 0 &&
              memcmp(apip_model_params(demo)->out_proj_weight,
                     apip_model_params(same)->out_proj_weight, 64 * 64 * 4) == 0,
          "demo weights = init_random seed 24301");
    api_model_destroy(demo);
    api_model_destroy(same);
    api_model_destroy(NULL);
    api_registry_destroy(reg);
    free(x);
    free(body.s);
}

static void test_registry(void) {
    api_error e = {0};
    api_registry *r = api_registry_create();
    CHECK(api_registry_default(r) == NULL && api_registry_count(r) == 0, "empty registry");
    api_buf b = {0};
    api_registry_list_json(r, &b);
    CHECK(b.len == strlen("{\"default\":null,\"models\":[]}") &&
              memcmp(b.data, "{\"default\":null,\"models\":[]}", b.len) == 0,
          "empty list %.*s", (int)b.len, b.data);
    CHECK(api_registry_add(r, api_model_demo(&e), &e) == 0, "add demo");
    CHECK(api_registry_add(r, api_model_init_identity("id\"x", 4, 2, &e), &e) == 0, "add id");
    api_error d = {0};
    CHECK(api_registry_add(r, api_model_init_identity("demo", 4, 2, &e), &d) == -1 &&
              d.status == 500 && strcmp(d.code, "duplicate_model") == 0,
          "duplicate name");
    api_error nullm = {0};
    CHECK(api_registry_add(r, NULL, &nullm) == -1 && nullm.status != 0, "NULL model");
    CHECK(api_registry_count(r) == 2 && api_registry_at(r, 5) == NULL, "count");
    CHECK(api_registry_default(r) == api_registry_find(r, "demo"), "first is default");
    api_error u = {0};
    CHECK(api_registry_set_default(r, "nope", &u) == -1 && u.status == 404 &&
              strcmp(u.code, "unknown_model") == 0,
          "set_default unknown");
    CHECK(api_registry_set_default(r, "id\"x", &e) == 0 &&
              api_registry_default(r) == api_registry_at(r, 1),
          "set_default");
    api_buf_reset(&b);
    api_registry_list_json(r, &b);
    const char *want = "{\"default\":\"id\\\"x\",\"models\":[{\"name\":\"demo\",\"embed_dim\":64,"
                       "\"num_heads\":4,\"kdim\":64,\"vdim\":64,\"source\":\"builtin\","
                       "\"has_bias\":false,\"vocab_size\":0},{\"name\":\"id\\\"x\",\"embed_dim\":4,"
                       "\"num_heads\":2,\"kdim\":4,\"vdim\":4,\"source\":\"builtin\","
                       "\"has_bias\":false,\"vocab_size\":0}]}";
    CHECK(b.len == strlen(want) && memcmp(b.data, want, b.len) == 0, "list: %.*s", (int)b.len,
          b.data);
    api_buf_free(&b);
    api_registry_destroy(r);
    api_registry_destroy(NULL);
}

/* A model is found by its whole name: not by a prefix cut at a buffer's size or at an escaped
 * NUL (tests/api_cases/requests/attention/model-nul.case has the NUL in a request). */
static void test_model_names(void) {
    char n255[256], n300[301], body[512];
    memset(n255, 'a', 255);
    n255[255] = '\0';
    memset(n300, 'a', 300);
    n300[300] = '\0';
    api_error e = {0};
    api_registry *r = api_registry_create();
    CHECK(api_registry_add(r, api_model_init_identity(n255, 2, 1, &e), &e) == 0 &&
              api_registry_add(r, api_model_init_identity(n300, 2, 1, &e), &e) == 0,
          "add long names: %s", e.message);
    const char *names[] = {n255, n300};
    for (int i = 0; i < 2; i++) {
        snprintf(body, sizeof body, "{\"query\":[[1,0]],\"model\":\"%s\"}", names[i]);
        api_error me = {0};
        json_t *j = request_str(API_OP_ATTENTION, body, r, &me);
        const char *got = json_string_value(json_object_get(j, "model"));
        CHECK(got && strcmp(got, names[i]) == 0,
              "model of %zu bytes: resolved to %.20s... (%zu bytes) %s", strlen(names[i]),
              got ? got : "(none)", got ? strlen(got) : 0, me.message);
        json_decref(j);
    }
    snprintf(body, sizeof body, "{\"query\":[[1,0]],\"model\":\"%sb\"}", n255);
    api_error nf = {0};
    json_t *j = request_str(API_OP_ATTENTION, body, r, &nf);
    CHECK(!j && nf.status == 404 && strcmp(nf.code, "unknown_model") == 0 &&
              strcmp(nf.field, "model") == 0,
          "a 256-byte name that a 255-byte model's name begins: %d %s", nf.status, nf.message);
    json_decref(j);
    /* A name with an escaped NUL: no model (here the 255-byte one was found), and the message
     * shows the NUL rather than stopping at it. */
    snprintf(body, sizeof body, "{\"query\":[[1,0]],\"model\":\"%s\\u0000\"}", n255);
    api_error nul = {0};
    j = request_str(API_OP_ATTENTION, body, r, &nul);
    CHECK(!j && nul.status == 404 && strcmp(nul.code, "unknown_model") == 0,
          "the 255-byte name and an escaped NUL: %d %.40s", nul.status, nul.message);
    json_decref(j);
    api_error nul2 = {0};
    j = request_str(API_OP_ATTENTION, "{\"query\":[[1,0]],\"model\":\"ab\\u0000c\"}", r, &nul2);
    CHECK(!j && nul2.status == 404 && strstr(nul2.message, "named \"ab\\u0000...\""),
          "a name with an escaped NUL: %d %s", nul2.status, nul2.message);
    json_decref(j);
    api_registry_destroy(r);
}

/* ---- Weights subsets, top-k, masked rows -------------------------------------------------- */

static void test_weights_views(void) {
    enum { L = 6, S = 6, E = 8, H = 4 };
    float *x = frand_new(L * E);
    sb base = {0};
    sb_add(&base, "{\"query\":");
    sb_tensor(&base, x, (size_t[]){L, E}, 2);
    sb_add(&base, ",\"params\":{\"init\":\"random\",\"seed\":5,\"num_heads\":%d}", H);
    char body[8192];
    api_error e = {0};
    snprintf(body, sizeof body, "%s,\"need_weights\":\"per_head\"}", base.s);
    json_t *dense = request_str(API_OP_ATTENTION, body, NULL, &e);
    snprintf(body, sizeof body, "%s,\"need_weights\":\"per_head\",\"heads\":[3,1]}", base.s);
    json_t *sub = request_str(API_OP_ATTENTION, body, NULL, &e);
    snprintf(body, sizeof body,
             "%s,\"need_weights\":\"per_head\",\"heads\":[2],\"weights_top_k\":3}", base.s);
    json_t *topk = request_str(API_OP_ATTENTION, body, NULL, &e);
    snprintf(body, sizeof body,
             "%s,\"need_weights\":\"mean\",\"weights_top_k\":2,"
             "\"encoding\":\"base64\"}",
             base.s);
    json_t *mean = request_str(API_OP_ATTENTION, body, NULL, &e);
    CHECK(dense && sub && topk && mean, "weights requests: %s", e.message);
    if (dense && sub && topk && mean) {
        float w[H * L * S], ws[2 * L * S], vals[L * 3], mv[L * 2];
        CHECK(flatten(json_object_get(dense, "weights"), w, H * L * S) == H * L * S, "dense");
        CHECK(flatten(json_object_get(sub, "weights"), ws, 2 * L * S) == 2 * L * S, "subset");
        CHECK(memcmp(ws, w + 3 * L * S, L * S * 4) == 0 &&
                  memcmp(ws + L * S, w + 1 * L * S, L * S * 4) == 0,
              "heads [3, 1] are the dense maps 3 and 1, in that order");
        size_t d[4];
        CHECK(shape_of_json(json_object_get(sub, "weights"), d) == 3 && d[0] == 2 && d[1] == L,
              "subset shape (2, L, S)");
        json_t *tw = json_object_get(topk, "weights");
        float idx[L * 3];
        CHECK(flatten(json_object_get(tw, "values"), vals, L * 3) == L * 3 &&
                  flatten(json_object_get(tw, "indices"), idx, L * 3) == L * 3,
              "top-k values and indices");
        CHECK(json_is_integer(json_array_get(
                  json_array_get(json_array_get(json_object_get(tw, "indices"), 0), 0), 0)),
              "top-k indices are JSON integers");
        for (int i = 0; i < L; i++) {
            const float *row = w + (2 * L + i) * S;
            for (int r = 0; r < 3; r++) {
                int j = (int)idx[i * 3 + r];
                CHECK(j >= 0 && j < S && vals[i * 3 + r] == row[j], "top-k value = dense");
                CHECK(r == 0 || vals[i * 3 + r] <= vals[i * 3 + r - 1], "descending");
                int above = 0;
                for (int c = 0; c < S; c++)
                    above += row[c] > row[j];
                CHECK(above <= r, "top-k entry %d of row %d is not among the largest", r, i);
            }
        }
        json_t *mw = json_object_get(mean, "weights");
        CHECK(strcmp(json_string_value(json_object_get(json_object_get(mw, "indices"), "dtype")),
                     "int32") == 0,
              "base64 indices are int32");
        CHECK(flatten(json_object_get(mw, "values"), mv, L * 2) == L * 2, "mean top-2");
        const char *idata =
            json_string_value(json_object_get(json_object_get(mw, "indices"), "data"));
        int32_t ii[L * 2];
        size_t got = 0;
        CHECK(idata && api_base64_decode((uint8_t *)ii, &got, idata, strlen(idata)) &&
                  got == sizeof ii,
              "indices decode");
        for (int i = 0; i < L; i++) {
            double mean0 = 0;
            for (int hh = 0; hh < H; hh++)
                mean0 += (double)w[(hh * L + i) * S + ii[i * 2]];
            mean0 /= H;
            CHECK(fabs(mean0 - (double)mv[i * 2]) < 1e-6,
                  "mean top-1 of row %d = %g, dense mean %g", i, (double)mv[i * 2], mean0);
        }
    }
    json_decref(dense), json_decref(sub), json_decref(topk), json_decref(mean);
    free(base.s);
    free(x);
}

/* A query row whose every key is blocked: output = out_proj.bias exactly, weights zeros. */
static void test_fully_masked(void) {
    enum { N = 2, L = 3, E = 4, H = 2 };
    float *x = frand_new(N * L * E), *win = frand_new(3 * E * E), *wo = frand_new(E * E);
    float *bo = frand_new(E), *bin = frand_new(3 * E);
    const char *masks[] = {
        "\"key_mask\":[[1,1,1],[0,0,0]]", "\"key_lengths\":[3,0]",
        "\"attn_mask\":[[[1,1,1],[1,1,1],[1,1,1]],[[0,0,0],[0,0,0],[0,0,0]]]",
        ("\"attn_bias\":[[[0,0,0],[0,0,0],[0,0,0]],[[\"-inf\",\"-inf\",\"-inf\"],"
         "[\"-inf\",\"-inf\",\"-inf\"],[\"-inf\",\"-inf\",\"-inf\"]]]")};
    for (int mi = 0; mi < 4; mi++) {
        sb b = {0};
        sb_add(&b, "{\"query\":");
        sb_tensor(&b, x, (size_t[]){N, L, E}, 3);
        sb_add(&b, ",\"params\":{\"num_heads\":%d,\"in_proj_weight\":", H);
        sb_tensor(&b, win, (size_t[]){3 * E, E}, 2);
        sb_add(&b, ",\"in_proj_bias\":");
        sb_tensor(&b, bin, (size_t[]){3 * E}, 1);
        sb_add(&b, ",\"out_proj.weight\":");
        sb_tensor(&b, wo, (size_t[]){E, E}, 2);
        sb_add(&b, ",\"out_proj.bias\":");
        sb_tensor(&b, bo, (size_t[]){E}, 1);
        sb_add(&b, "},%s,\"need_weights\":\"per_head\"}", masks[mi]);
        api_error e = {0};
        json_t *j = request_str(API_OP_ATTENTION, b.s, NULL, &e);
        CHECK(j != NULL, "masked request %d: %s", mi, e.message);
        if (j) {
            float out[N * L * E], w[N * H * L * L];
            CHECK(flatten(json_object_get(j, "output"), out, N * L * E) == N * L * E, "out");
            CHECK(flatten(json_object_get(j, "weights"), w, N * H * L * L) == N * H * L * L, "w");
            size_t at = 0;
            for (int i = 0; i < L; i++)
                CHECK(same_bits(out + (L + i) * E, bo, E, &at),
                      "mask %d: masked row %d is not out_proj.bias (at %zu)", mi, i, at);
            bool zeros = true, finite = true;
            for (int i = 0; i < H * L * L; i++)
                zeros &= w[H * L * L + i] == 0.0f;
            for (int i = 0; i < N * L * E; i++)
                finite &= isfinite(out[i]) != 0;
            CHECK(zeros, "mask %d: weights of masked rows are not zero", mi);
            CHECK(finite, "mask %d: NaN in the output", mi);
            json_decref(j);
        }
        free(b.s);
    }
    free(x), free(win), free(wo), free(bo), free(bin);
}

/* ---- Limits, numeric overflow, errors, buffers -------------------------------------------- */

static void test_limits(void) {
    const char *body = "{\"query\":[[1,0],[0,1],[1,1]],\"params\":{\"init\":\"random\",\"seed\":1,"
                       "\"num_heads\":2},\"need_weights\":\"mean\"}";
    api_limits lim = api_limits_default();
    CHECK(lim.max_job_bytes == (size_t)1 << 30 && lim.max_dim == 65536 && lim.max_heads == 256 &&
              lim.nslots == 1,
          "api_limits_default");
    api_error e = {0};
    api_job *job = api_job_parse(API_OP_ATTENTION, body, strlen(body), NULL, &lim, &e);
    CHECK(job != NULL, "parse: %s", e.message);
    size_t arena = api_job_bytes(job), resp = api_job_response_bytes(job), bytes = arena + resp;
    CHECK(arena > 0 && arena % 64 == 0, "job bytes %zu", arena);
    CHECK(resp > 0, "response bytes %zu", resp);
    CHECK(api_job_flops(job) > 0, "flops");
    api_error twice = {0};
    CHECK(api_job_run(job, NULL, &e) == 0 && api_job_run(job, NULL, &twice) == -1 &&
              twice.status == 500,
          "a job runs once");
    api_job_destroy(job);
    lim.max_job_bytes = bytes;
    job = api_job_parse(API_OP_ATTENTION, body, strlen(body), NULL, &lim, &e);
    CHECK(job != NULL, "exactly at the limit: %s", e.message);
    api_job_destroy(job);
    lim.max_job_bytes = bytes - 1;
    api_error big = {0};
    job = api_job_parse(API_OP_ATTENTION, body, strlen(body), NULL, &lim, &big);
    char need[32], limit[32];
    char parts[64];
    snprintf(need, sizeof need, "%zu bytes", bytes);
    snprintf(limit, sizeof limit, "%zu bytes", bytes - 1);
    snprintf(parts, sizeof parts, "%zu of working memory and up to %zu for its response", arena,
             resp);
    CHECK(!job && big.status == 413 && strcmp(big.code, "job_too_large") == 0 &&
              strstr(big.message, "max_job_bytes") && strstr(big.message, need) &&
              strstr(big.message, limit) && strstr(big.message, parts),
          "413 names the limit and the sizes: %s", big.message);
    /* An arena of 2^62 floats is refused before anything is allocated. */
    const char *huge = "{\"query\":{\"dtype\":\"float32\",\"shape\":[65536,65536,65536],\"data\":"
                       "\"\"},\"params\":{\"init\":\"identity\",\"num_heads\":1}}";
    api_error h = {0};
    lim = api_limits_default();
    job = api_job_parse(API_OP_ATTENTION, huge, strlen(huge), NULL, &lim, &h);
    CHECK(!job && (h.status == 413 || h.status == 400), "huge shape: %d %s", h.status, h.message);
    /* max_heads counts as API_MAX_HEADS at most (the duplicate check of heads needs a bound). */
    sb hb = {0};
    for (int t = 0; t < 3; t++) { /* q, k and v all (65537, 1, 1) */
        sb_add(&hb, "%s\"%c\":[", t ? "," : "{", "qkv"[t]);
        for (int i = 0; i < API_MAX_HEADS + 1; i++)
            sb_add(&hb, "%s[[0]]", i ? "," : "");
        sb_add(&hb, "]");
    }
    sb_add(&hb, "}");
    api_limits many = api_limits_default();
    many.max_heads = many.max_dim = (size_t)1 << 20;
    api_error mh = {0};
    job = api_job_parse(API_OP_SDPA, hb.s, hb.n, NULL, &many, &mh);
    CHECK(!job && mh.status == 413 && strstr(mh.message, "65537 heads") &&
              strstr(mh.message, "max_heads limit of 65536"),
          "max_heads above API_MAX_HEADS: %s", mh.message);
    api_job_destroy(job);
    free(hb.s);
    /* A mask whose element count overflows size_t: the message names the limit and sizes. */
    const char *hm = "{\"query\":[[1]],\"params\":{\"init\":\"identity\",\"num_heads\":1},"
                     "\"attn_mask\":{\"dtype\":\"float32\",\"shape\":[65536,65536,65536,65536],"
                     "\"data\":\"\"}}";
    api_error hme = {0};
    job = api_job_parse(API_OP_ATTENTION, hm, strlen(hm), NULL, &lim, &hme);
    CHECK(!job && hme.status == 413 && strcmp(hme.code, "job_too_large") == 0 &&
              strcmp(hme.field, "attn_mask") == 0 && strstr(hme.message, "max_job_bytes") &&
              strstr(hme.message, "1073741824 bytes") &&
              strstr(hme.message, "(65536, 65536, 65536, 65536)"),
          "413 for a huge attn_mask names the limit and the sizes: %s", hme.message);
    /* usage.flops beyond 2^63 (llround's range) is written exactly; beyond 2^64, saturated. */
    static const struct {
        double flops;
        const char *want;
    } fl[] = {{1e19, "\"flops\":10000000000000000000,"},
              {0x1p63, "\"flops\":9223372036854775808,"},
              {2e19, "\"flops\":18446744073709551615,"},
              {0x1p52 + 1, "\"flops\":4503599627370497,"},
              {1234.4, "\"flops\":1234,"}};
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) {
        api_error fe = {0};
        job = api_job_parse(API_OP_ATTENTION, body, strlen(body), NULL, &lim, &fe);
        CHECK(job && api_job_run(job, NULL, &fe) == 0, "flops job: %s", fe.message);
        if (!job)
            continue;
        job->plan.flops = fl[i].flops;
        job->init_flops = 0; /* the body's identity weights are counted apart (test_job_flops) */
        api_buf fb = {0};
        CHECK(api_job_respond(job, 0.0, 0.0, &fb, &fe) == 0, "respond: %s", fe.message);
        api_buf_append(&fb, "", 1);
        CHECK(!fb.failed && strstr(fb.data, fl[i].want), "flops %g: want %s in %.80s", fl[i].flops,
              fl[i].want, strstr(fb.data, "\"usage\"") ? strstr(fb.data, "\"usage\"") : "");
        api_buf_free(&fb);
        api_job_destroy(job);
    }
    /* Numeric overflow: logits beyond float32. */
    const char *ov = "{\"q\":[[1e20,1e20]],\"k\":[[1e20,1e20]],\"v\":[[1,1]]}";
    api_error o = {0};
    json_t *j = request_str(API_OP_SDPA, ov, NULL, &o);
    CHECK(!j && o.status == 400 && strcmp(o.code, "numeric_overflow") == 0,
          "numeric overflow: %d %s", o.status, o.code);
    json_decref(j);
    /* A NULL registry has no default model. */
    api_error nm = {0};
    j = request_str(API_OP_ATTENTION, "{\"query\":[[1]]}", NULL, &nm);
    CHECK(!j && nm.status == 404 && strcmp(nm.field, "model") == 0, "no default model");
}

/* ---- Bodies that declare far more than they hold (issue 10, item 1) ---------------------- */

static double thread_cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Appends [first, 0, 0, ...] with n elements in all: nested arrays take their shape from their
 * first element, so this declares n rows of first's shape in about 2n bytes. */
static void sb_hollow(sb *b, const char *first, size_t n) {
    sb_add(b, "[%s", first);
    for (size_t i = 1; i < n; i++)
        sb_add(b, ",0");
    sb_add(b, "]");
}

/* The issue's bodies: SDPA q, k, v (65536, 1, 65536, 1) with "causal": "bottom_right" (0.8 MB),
 * and /v1/attention with query (32768, 65535, 1) (197 KB). Each is refused with 413 at once:
 * in thread CPU time (not wall time: other processes' load does not count) at most 200 ms and
 * 50 times what validating its JSON costs, never time proportional to N x L (seconds before). */
static void test_declared_shapes(void) {
    sb row = {0}, plane = {0}, sd = {0}, at = {0};
    sb_hollow(&row, "[0]", 65536); /* (65536, 1) */
    sb_add(&plane, "[%s]", row.s); /* (1, 65536, 1) */
    sb_add(&sd, "{\"causal\":\"bottom_right\"");
    for (int t = 0; t < 3; t++) {
        sb_add(&sd, ",\"%c\":", "qkv"[t]);
        sb_hollow(&sd, plane.s, 65536);
    }
    sb_add(&sd, "}");
    sb inner = {0};
    sb_hollow(&inner, "[0]", 65535);
    sb_add(&at, "{\"params\":{\"init\":\"identity\",\"num_heads\":1},\"causal\":true,\"query\":");
    sb_hollow(&at, inner.s, 32768);
    sb_add(&at, "}");
    const struct {
        const char *what;
        api_op op;
        const sb *body;
    } cases[] = {{"sdpa N = L = 65536", API_OP_SDPA, &sd},
                 {"attention N = 32768, L = 65535", API_OP_ATTENTION, &at}};
    api_limits lims[2] = {api_limits_default(), api_limits_default()};
    lims[1].max_job_bytes = (size_t)256 << 20; /* attnd's default --max-job-bytes */
    for (size_t c = 0; c < 2; c++) {
        for (size_t l = 0; l < 2; l++) {
            double t0 = thread_cpu_ms();
            api_error je = {0};
            CHECK(apip_json_check(cases[c].body->s, cases[c].body->n, "b", NULL, &je) == 0, "%s",
                  je.message);
            double t1 = thread_cpu_ms();
            api_error e = {0};
            api_job *job =
                api_job_parse(cases[c].op, cases[c].body->s, cases[c].body->n, NULL, &lims[l], &e);
            double t2 = thread_cpu_ms(), json_ms = t1 - t0, parse_ms = t2 - t1;
            CHECK(!job && e.status == 413 && !strcmp(e.code, "job_too_large"),
                  "%s (%zu bytes): %d %s: %s", cases[c].what, cases[c].body->n, e.status, e.code,
                  e.message);
            CHECK(parse_ms < 200.0 && parse_ms < 50.0 * json_ms + 5.0,
                  "%s (%zu bytes): refused in %.1f ms of CPU (validating its JSON: %.2f ms)",
                  cases[c].what, cases[c].body->n, parse_ms, json_ms);
            api_job_destroy(job);
        }
    }
    free(row.s), free(plane.s), free(sd.s), free(inner.s), free(at.s);
}

/* ---- Response size (issue 10, item 2) ---------------------------------------------------- */

/* ---- The compute bound (issue 23, item 4) -------------------------------------------------- */

/* usage.flops counts making params.init weights (4 E^2 of them, at APIP_INIT_RANDOM_FLOP or
 * APIP_INIT_IDENTITY_FLOP each) beside the plan's FLOPs; max_job_flops refuses a job over it with
 * 413 from the shapes alone, before any tensor is decoded; num_heads past max_heads names the
 * limit, not the integer range. */
static void test_job_flops(void) {
    const char *fmt = "{\"query\":[[0.5,1,2,3],[1,0,0,0]],\"params\":{\"init\":\"%s\",%s"
                      "\"num_heads\":2}}";
    const struct {
        const char *init, *seed;
        double per_weight;
    } inits[] = {{"random", "\"seed\":3,", APIP_INIT_RANDOM_FLOP},
                 {"identity", "", APIP_INIT_IDENTITY_FLOP}};
    for (size_t i = 0; i < 2; i++) {
        char body[256];
        snprintf(body, sizeof body, fmt, inits[i].init, inits[i].seed);
        api_limits lim = api_limits_default();
        api_error e = {0};
        api_job *job = api_job_parse(API_OP_ATTENTION, body, strlen(body), NULL, &lim, &e);
        CHECK(job != NULL, "init %s: %s", inits[i].init, e.message);
        if (!job)
            continue;
        double want = api_job_plan_flops(job) + 4.0 * 4 * 4 * inits[i].per_weight;
        CHECK(api_job_flops(job) == want && api_job_plan_flops(job) > 0,
              "init %s: flops %.17g, want plan %.17g + 16 weights", inits[i].init,
              api_job_flops(job), api_job_plan_flops(job));
        api_error re = {0};
        api_buf out = {0};
        CHECK(api_job_run(job, NULL, &re) == 0 && api_job_respond(job, 0, 0, &out, &re) == 0,
              "init %s runs: %s", inits[i].init, re.message);
        api_buf_append(&out, "", 1);
        char usage[64];
        snprintf(usage, sizeof usage, "\"flops\":%.0f,", want);
        CHECK(!out.failed && strstr(out.data, usage), "init %s: usage says %s in %.120s",
              inits[i].init, usage, out.data ? out.data : "");
        api_buf_free(&out);
        /* The limit: at the job's FLOPs it passes; one FLOP less, 413 naming both figures. */
        lim.max_job_flops = want;
        api_job *again = api_job_parse(API_OP_ATTENTION, body, strlen(body), NULL, &lim, &e);
        CHECK(again != NULL, "init %s at max_job_flops = its flops: %s", inits[i].init, e.message);
        api_job_destroy(again);
        lim.max_job_flops = want - 1;
        api_error over = {0};
        again = api_job_parse(API_OP_ATTENTION, body, strlen(body), NULL, &lim, &over);
        CHECK(!again && over.status == 413 && strcmp(over.code, "job_too_large") == 0 &&
                  strstr(over.message, "max_job_flops") &&
                  strstr(over.message, "making params.init weights included"),
              "init %s one FLOP over: %d %s", inits[i].init, over.status, over.message);
        api_job_destroy(again);
        api_job_destroy(job);
    }
    /* The issue's body: SDPA with L = S = 65536 and D = 1 (17 GFLOP) in under 1 MB, with a value
     * that is not a number at its end. A limit of 1 GFLOP refuses it with 413 from its shapes,
     * before the tensors are decoded (decoding would have found the bad value: 400). */
    sb b = {0};
    for (int t = 0; t < 3; t++) {
        sb_add(&b, "%s\"%c\":", t ? "," : "{", "qkv"[t]);
        sb_hollow(&b, "[1]", 65536);
    }
    b.n -= 2; /* the last row of v, ",0]" -> ",\"x\"]" */
    b.s[b.n] = '\0';
    sb_add(&b, "\"x\"]}");
    api_limits lim = api_limits_default();
    lim.max_job_flops = 1e9;
    api_error e = {0};
    api_job *job = api_job_parse(API_OP_SDPA, b.s, b.n, NULL, &lim, &e);
    CHECK(!job && e.status == 413 && strstr(e.message, "max_job_flops limit of 1e+09") &&
              !strstr(e.message, "params.init"),
          "17 GFLOP SDPA over a 1 GFLOP limit: %d %s", e.status, e.message);
    lim.max_job_flops = 0; /* no limit: decoding finds the bad value */
    api_error bad = {0};
    job = api_job_parse(API_OP_SDPA, b.s, b.n, NULL, &lim, &bad);
    CHECK(!job && bad.status == 400, "without the limit the bad value is found: %d %s", bad.status,
          bad.message);
    api_job_destroy(job);
    free(b.s);
    /* num_heads: past max_heads (even past 2^64) is 413 naming the limit; 0 or 2.5 is 400 naming
     * the range the limit allows. */
    const struct {
        const char *heads;
        int status;
        const char *says;
    } nh[] = {
        {"257", 413, "max_heads limit of 256"},  {"1099511627777", 413, "max_heads limit of 256"},
        {"1e30", 413, "max_heads limit of 256"}, {"0", 400, "from 1 to 256"},
        {"2.5", 400, "from 1 to 256"},           {"-3", 400, "from 1 to 256"}};
    for (size_t i = 0; i < sizeof nh / sizeof nh[0]; i++) {
        char body[160];
        snprintf(body, sizeof body,
                 "{\"query\":[[1,2]],\"params\":{\"init\":\"identity\",\"num_heads\":%s}}",
                 nh[i].heads);
        api_limits dl = api_limits_default();
        api_error he = {0};
        job = api_job_parse(API_OP_ATTENTION, body, strlen(body), NULL, &dl, &he);
        CHECK(!job && he.status == nh[i].status && strstr(he.message, nh[i].says) &&
                  !strstr(he.message, "1099511627776") && !strcmp(he.field, "params.num_heads"),
              "num_heads %s: %d %s", nh[i].heads, he.status, he.message);
        api_job_destroy(job);
    }
}

/* The issue's example: SDPA q, k, v (1, 200, 512, 1) with weights, 2.9 MB of request and a
 * 690 MB JSON response, is refused before compute with default limits (api/'s 1 GiB and
 * attnd's 256 MiB), naming the response size; as base64 it fits the 1 GiB. */
static void test_response_limit(void) {
    sb b = {0};
    sb_add(&b, "{\"need_weights\":true");
    for (int t = 0; t < 3; t++) {
        sb_add(&b, ",\"%c\":[[", "qkv"[t]);
        for (int h = 0; h < 200; h++) {
            sb_add(&b, "%s[", h ? "," : "");
            for (int i = 0; i < 512; i++)
                sb_add(&b, "%s[%d]", i ? "," : "", (i * 7 + h) % 3);
            sb_add(&b, "]");
        }
        sb_add(&b, "]]");
    }
    size_t json_end = b.n;
    sb_add(&b, "}");
    api_limits lims[2] = {api_limits_default(), api_limits_default()};
    lims[1].max_job_bytes = (size_t)256 << 20;
    for (int l = 0; l < 2; l++) {
        api_error e = {0};
        api_job *job = api_job_parse(API_OP_SDPA, b.s, b.n, NULL, &lims[l], &e);
        char limit[64];
        snprintf(limit, sizeof limit, "limit of %zu bytes", lims[l].max_job_bytes);
        CHECK(!job && e.status == 413 && !strcmp(e.code, "job_too_large") &&
                  strstr(e.message, "for its response") && strstr(e.message, limit) &&
                  strstr(e.message, "base64"),
              "q, k, v (1, 200, 512, 1) with weights, max_job_bytes %zu: %d %s",
              lims[l].max_job_bytes, e.status, e.message);
        api_job_destroy(job);
    }
    /* The bound: 52428800 weights at 17 bytes and 102400 outputs at 17, plus brackets. */
    b.n = json_end;
    sb_add(&b, ",\"encoding\":\"base64\"}");
    api_error e = {0};
    api_job *job = api_job_parse(API_OP_SDPA, b.s, b.n, NULL, &lims[0], &e);
    CHECK(job != NULL, "the same as base64 fits 1 GiB: %s", e.message);
    size_t w_b64 = (52428800 * 4 + 2) / 3 * 4, o_b64 = (102400 * 4 + 2) / 3 * 4;
    CHECK(job && api_job_response_bytes(job) > w_b64 + o_b64 &&
              api_job_response_bytes(job) < w_b64 + o_b64 + 400,
          "base64 response bound %zu, want %zu + fixed text", api_job_response_bytes(job),
          w_b64 + o_b64);
    api_job_destroy(job);
    free(b.s);
}

/* For many jobs (both endpoints, JSON and base64, every weights mode, top-k, registry models,
 * ranks 2 to 4), the response is never longer than api_job_response_bytes, also when every
 * float takes the longest form there is ("-0.0000123456791", 16 characters). */
static void test_response_bound(void) {
    api_registry *models = demo_registry();
    size_t jobs = 0, worst_slack = SIZE_MAX;
    for (size_t t = 0; t < 240; t++) {
        bool sdpa = t % 2, b64 = t % 5 == 1;
        size_t rank = sdpa ? 2 + t / 2 % 3 : 2 + t / 2 % 2;
        size_t N = 1 + t % 3, H = 1 + t / 3 % 3, L = 1 + t % 7, S = 1 + t / 7 % 9;
        size_t D = sdpa ? 1 + t % 4 : 4 * H, Dv = sdpa ? 1 + t / 4 % 3 : D;
        bool model = !sdpa && t % 6 == 4; /* demo: E = 64, H = 4 */
        if (model)
            D = Dv = 64, H = 4;
        size_t lead[2], nl = 0;
        if (sdpa && rank == 4)
            lead[nl++] = N, lead[nl++] = H;
        else if (sdpa && rank == 3)
            lead[nl++] = H;
        else if (!sdpa && rank == 3)
            lead[nl++] = N;
        size_t qd[4], kd[4], vd[4], cq = 1, ck = 1, cv = 1;
        for (size_t i = 0; i < nl; i++)
            qd[i] = kd[i] = vd[i] = lead[i], cq *= lead[i], ck *= lead[i], cv *= lead[i];
        qd[nl] = L, qd[nl + 1] = D, kd[nl] = vd[nl] = S, kd[nl + 1] = D, vd[nl + 1] = Dv;
        cq *= L * D, ck *= S * D, cv *= S * Dv;
        float *q = frand_new(cq), *k = frand_new(ck), *v = frand_new(cv);
        sb b = {0};
        sb_add(&b, "{\"%s\":", sdpa ? "q" : "query");
        sb_tensor(&b, q, qd, nl + 2);
        sb_add(&b, ",\"%s\":", sdpa ? "k" : "key");
        sb_tensor(&b, k, kd, nl + 2);
        sb_add(&b, ",\"%s\":", sdpa ? "v" : "value");
        sb_tensor(&b, v, vd, nl + 2);
        if (!sdpa && !model)
            sb_add(&b, ",\"params\":{\"init\":\"random\",\"seed\":%zu,\"num_heads\":%zu}", t, H);
        const char *nw = sdpa ? (t % 3 ? "true" : "false")
                              : (t % 3 == 0   ? "false"
                                 : t % 3 == 1 ? "\"per_head\""
                                              : "\"mean\"");
        sb_add(&b, ",\"need_weights\":%s", nw);
        if (strcmp(nw, "false") && t % 4 == 3)
            sb_add(&b, ",\"weights_top_k\":%zu", 1 + t % S);
        if (b64)
            sb_add(&b, ",\"encoding\":\"base64\"");
        sb_add(&b, "}");
        api_error e = {0};
        api_limits lim = api_limits_default();
        api_job *job =
            api_job_parse(sdpa ? API_OP_SDPA : API_OP_ATTENTION, b.s, b.n, models, &lim, &e);
        CHECK(job && api_job_run(job, NULL, &e) == 0, "job %zu: %s", t, e.message);
        for (int longest = 0; job && longest < 2 && !e.status; longest++) {
            if (longest) { /* every float as long as a float gets */
                for (size_t i = 0; i < job->plan.out_elems; i++)
                    job->out[i] = -1.23456791e-05f;
                for (size_t i = 0; i < job->plan.weights_elems; i++)
                    job->wout.values[i] = -1.23456791e-05f;
            }
            api_buf out = {0};
            apip_buf_puts(&out, "prefix");
            CHECK(api_job_respond(job, 1e12, 123456.789, &out, &e) == 0, "job %zu: %s", t,
                  e.message);
            size_t len = out.len - 6, bound = api_job_response_bytes(job);
            CHECK(len <= bound, "job %zu (%s): response %zu bytes over its bound %zu", t, b.s, len,
                  bound);
            CHECK(out.cap <= 6 + bound + 64 || out.cap == 256, /* 256: api_buf's first block */
                  "job %zu: the buffer grew to %zu for %zu + %zu", t, out.cap, (size_t)6, bound);
            if (longest && !b64 && bound - len < worst_slack)
                worst_slack = bound - len;
            jobs++;
            api_buf_free(&out);
        }
        api_job_destroy(job);
        free(q), free(k), free(v), free(b.s);
    }
    CHECK(jobs >= 400, "only %zu responses checked", jobs);
    /* With the longest floats a JSON bound is nearly reached: only the integers and times
     * written shorter than their widest are left over. */
    CHECK(worst_slack < 200, "the JSON bound is loose: at least %zu bytes to spare", worst_slack);
    api_registry_destroy(models);
}

/* The words a lesson job echoes (tokens) and its head names count in its response bound: the
 * same job sent as words and as their embeddings differs by at least the echoed text. */
static void test_response_bound_words(void) {
    api_registry *models = builtin_registry();
    const char *bodies[2] = {
        "{\"model\":\"lesson\",\"text\":\"程序员把服务器日志发给同事，因为它记录了错误原因。\","
        "\"need_weights\":\"per_head\"}",
        "{\"model\":\"lesson\",\"tokens\":[\"“\",\"它\",\"”\"]}",
    };
    for (int i = 0; i < 2; i++) {
        api_error e = {0};
        api_limits lim = api_limits_default();
        api_job *job =
            api_job_parse(API_OP_ATTENTION, bodies[i], strlen(bodies[i]), models, &lim, &e);
        CHECK(job && api_job_run(job, NULL, &e) == 0, "words job %d: %s", i, e.message);
        if (!job)
            continue;
        api_buf out = {0};
        CHECK(api_job_respond(job, 1e12, 123456.789, &out, &e) == 0, "words job %d: %s", i,
              e.message);
        const char *words = strstr(out.data ? out.data : "", ",\"tokens\":[");
        const char *names = strstr(out.data ? out.data : "", ",\"head_names\":[");
        CHECK(words && names, "words job %d: no tokens or head_names in %.200s", i, out.data);
        /* Without the words' allowance the bound would be short by what they take at most. */
        size_t bound = api_job_response_bytes(job), echo = 0;
        CHECK(out.len <= bound, "words job %d: response %zu bytes over its bound %zu", i, out.len,
              bound);
        apip_resp_shape rs = {.op = API_OP_ATTENTION,
                              .out_rank = job->out_rank,
                              .w_rank = job->w_rank,
                              .model_len = strlen("lesson")};
        memcpy(rs.out_dims, job->out_dims, sizeof rs.out_dims);
        memcpy(rs.w_dims, job->w_dims, sizeof rs.w_dims);
        CHECK(apip_response_bound(&rs, &echo) &&
                  bound - echo >=
                      (size_t)(strchr(words + 11, ']') - words) + strlen(",\"head_names\":"),
              "words job %d: the bound %zu leaves %zu for the words", i, bound, bound - echo);
        api_buf_free(&out);
        api_job_destroy(job);
    }
    api_registry_destroy(models);
}

/* ---- SDPA key masks without leading dimensions (issue 10, item 6) ----------------------- */

/* The seed chapter's padding example (chapter 5, 3.1) as a user writes it: logits [3.0, 0.5,
 * -1.0, 2.0] (q [[1]], k the logits, scale 1) and key_mask [1, 1, 0, 0] give the weights
 * [0.92, 0.08, 0, 0]. The same with key_mask (1, S), key_lengths [2], and for q of rank 3 and
 * 4, where key_mask (S) broadcasts over every head and batch element. */
static void test_sdpa_key_masks(void) {
    const char *bodies[] = {
        "{\"q\":[[1]],\"k\":[[3.0],[0.5],[-1.0],[2.0]],\"v\":[[1],[2],[3],[4]],\"scale\":1,"
        "\"key_mask\":[1,1,0,0],\"need_weights\":true}",
        "{\"q\":[[1]],\"k\":[[3.0],[0.5],[-1.0],[2.0]],\"v\":[[1],[2],[3],[4]],\"scale\":1,"
        "\"key_mask\":[[1,1,0,0]],\"need_weights\":true}",
        "{\"q\":[[1]],\"k\":[[3.0],[0.5],[-1.0],[2.0]],\"v\":[[1],[2],[3],[4]],\"scale\":1,"
        "\"key_lengths\":[2],\"need_weights\":true}",
        "{\"q\":[[[1]],[[1]]],\"k\":[[[3.0],[0.5],[-1.0],[2.0]],[[3.0],[0.5],[-1.0],[2.0]]],"
        "\"v\":[[[1],[2],[3],[4]],[[1],[2],[3],[4]]],\"scale\":1,\"key_mask\":[1,1,0,0],"
        "\"need_weights\":true}",
        "{\"q\":[[[1]],[[1]]],\"k\":[[[3.0],[0.5],[-1.0],[2.0]],[[3.0],[0.5],[-1.0],[2.0]]],"
        "\"v\":[[[1],[2],[3],[4]],[[1],[2],[3],[4]]],\"scale\":1,\"key_lengths\":[2],"
        "\"need_weights\":true}",
        "{\"q\":[[[[1]]],[[[1]]]],\"k\":[[[[3.0],[0.5],[-1.0],[2.0]]],[[[3.0],[0.5],[-1.0],"
        "[2.0]]]],\"v\":[[[[1],[2],[3],[4]]],[[[1],[2],[3],[4]]]],\"scale\":1,"
        "\"key_mask\":[1,1,0,0],\"need_weights\":true}",
        "{\"q\":[[[[1]]],[[[1]]]],\"k\":[[[[3.0],[0.5],[-1.0],[2.0]]],[[[3.0],[0.5],[-1.0],"
        "[2.0]]]],\"v\":[[[[1],[2],[3],[4]]],[[[1],[2],[3],[4]]]],\"scale\":1,"
        "\"key_mask\":[[1,1,0,0],[1,1,0,0]],\"need_weights\":true}",
        "{\"q\":[[[[1]]],[[[1]]]],\"k\":[[[[3.0],[0.5],[-1.0],[2.0]]],[[[3.0],[0.5],[-1.0],"
        "[2.0]]]],\"v\":[[[[1],[2],[3],[4]]],[[[1],[2],[3],[4]]]],\"scale\":1,"
        "\"key_lengths\":[2,2],\"need_weights\":true}",
    };
    const double e25 = exp(2.5), w0 = e25 / (e25 + 1.0), w1 = 1.0 / (e25 + 1.0);
    for (size_t c = 0; c < sizeof bodies / sizeof bodies[0]; c++) {
        api_error e = {0};
        json_t *j = request_str(API_OP_SDPA, bodies[c], NULL, &e);
        CHECK(j != NULL, "padding example %zu: %d %s", c, e.status, e.message);
        if (!j)
            continue;
        float w[8], o[2];
        size_t nw = flatten(json_object_get(j, "weights"), w, 8);
        size_t no = flatten(json_object_get(j, "output"), o, 2);
        CHECK(nw == 4 * no && no >= 1, "padding example %zu: %zu weights, %zu outputs", c, nw, no);
        for (size_t r = 0; r < no && nw == 4 * no; r++) {
            const float *x = w + 4 * r;
            CHECK(fabs((double)x[0] - w0) < 1e-6 && fabs((double)x[1] - w1) < 1e-6 &&
                      x[2] == 0.0f && x[3] == 0.0f,
                  "padding example %zu row %zu: weights [%g %g %g %g], want [%.6f %.6f 0 0]", c, r,
                  (double)x[0], (double)x[1], (double)x[2], (double)x[3], w0, w1);
            char a[32], b2[32];
            snprintf(a, sizeof a, "%.2f", (double)x[0]);
            snprintf(b2, sizeof b2, "%.2f", (double)x[1]);
            CHECK(!strcmp(a, "0.92") && !strcmp(b2, "0.08"), "the chapter prints [%s %s]", a, b2);
            CHECK(fabs((double)o[r] - (w0 * 1 + w1 * 2)) < 1e-6, "padding example %zu: output %g",
                  c, (double)o[r]);
        }
        json_decref(j);
    }
}

/* ---- Integers (issue 10, item 7) --------------------------------------------------------- */

/* One rule for every integer field: a number whose value, read exactly, is integral. */
static void test_integer_rule(void) {
    static const struct {
        const char *text;
        int kind;
        uint64_t value;
    } t[] = {{"2", APIP_INT_OK, 2},
             {"2.0", APIP_INT_OK, 2},
             {"2e0", APIP_INT_OK, 2},
             {"2E+0", APIP_INT_OK, 2},
             {"0.2e1", APIP_INT_OK, 2},
             {"200e-2", APIP_INT_OK, 2},
             {"-0", APIP_INT_OK, 0},
             {"-0.0e-7", APIP_INT_OK, 0},
             {"0e99999999999999999999", APIP_INT_OK, 0},
             {"1e19", APIP_INT_OK, 10000000000000000000u},
             {"18446744073709551615", APIP_INT_OK, UINT64_MAX},
             {"18446744073709551615.000", APIP_INT_OK, UINT64_MAX},
             {"1.8446744073709551615e19", APIP_INT_OK, UINT64_MAX},
             {"18446744073709551616", APIP_INT_TOO_BIG, 0},
             {"1e20", APIP_INT_TOO_BIG, 0},
             {"1e400", APIP_INT_TOO_BIG, 0},
             {"1234567890123456789012345678900000000000e-10", APIP_INT_TOO_BIG, 0},
             {"123456789012345678901234567890e-10", APIP_INT_NOT_INTEGER, 0},
             {"2.5", APIP_INT_NOT_INTEGER, 0},
             {"1.0000000000000000001", APIP_INT_NOT_INTEGER, 0}, /* a double would say 1 */
             {"25e-1", APIP_INT_NOT_INTEGER, 0},
             {"1e-400", APIP_INT_NOT_INTEGER, 0},
             {"-3.5", APIP_INT_NOT_INTEGER, 0}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char buf[64];
        snprintf(buf, sizeof buf, "%s,", t[i].text); /* a delimiter after, as in a body */
        bool neg = false;
        uint64_t v = 0;
        int kind = apip_jv_int(buf, &neg, &v);
        CHECK(kind == t[i].kind && (kind != APIP_INT_OK || v == t[i].value),
              "apip_jv_int(%s): kind %d value %llu, want %d %llu", t[i].text, kind,
              (unsigned long long)v, t[i].kind, (unsigned long long)t[i].value);
    }
    bool neg = false;
    uint64_t v = 0;
    CHECK(apip_jv_int("-7,", &neg, &v) == APIP_INT_OK && neg && v == 7, "-7");

    /* Every integer field takes 2.0 as it takes 2, and refuses 2.5 (or 0.5). */
    static const struct {
        api_op op;
        const char *body; /* %s is the number */
        const char *field;
    } f[] = {
        {API_OP_ATTENTION,
         "{\"query\":[[1,0],[0,1]],\"params\":{\"init\":\"identity\",\"num_heads\":%s}}",
         "params.num_heads"},
        {API_OP_ATTENTION,
         "{\"query\":[[1,0],[0,1]],\"params\":{\"init\":\"random\",\"num_heads\":1,\"seed\":%s}}",
         "params.seed"},
        {API_OP_ATTENTION,
         "{\"query\":[[1,0],[0,1]],\"params\":{\"init\":\"identity\",\"num_heads\":2},"
         "\"need_weights\":\"per_head\",\"heads\":[%s]}",
         "heads[0]"},
        {API_OP_ATTENTION,
         "{\"query\":[[1,0],[0,1]],\"params\":{\"init\":\"identity\",\"num_heads\":1},"
         "\"need_weights\":\"mean\",\"weights_top_k\":%s}",
         "weights_top_k"},
        {API_OP_ATTENTION,
         "{\"query\":[[1,0],[0,1]],\"params\":{\"init\":\"identity\",\"num_heads\":1},"
         "\"key_lengths\":[%s]}",
         "key_lengths[0]"},
        {API_OP_ATTENTION,
         "{\"query\":{\"dtype\":\"float32\",\"shape\":[%s,1],\"data\":\"AACAPwAAAEA=\"},"
         "\"params\":{\"init\":\"identity\",\"num_heads\":1}}",
         "query.shape[0]"},
        {API_OP_SDPA, "{\"q\":[[1]],\"k\":[[1],[2]],\"v\":[[1],[2]],\"key_lengths\":[%s]}",
         "key_lengths[0]"},
        {API_OP_SDPA,
         "{\"q\":[[1]],\"k\":[[1],[2]],\"v\":[[1],[2]],\"need_weights\":true,\"weights_top_k\":%s}",
         "weights_top_k"},
    };
    static const char *same[] = {"2", "2.0", "2e0", "0.2e1", "200E-2"};
    static const char *refused[] = {"2.5", "1.0000000000000000001", "2e-1", "\"2\"", "true"};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        char *first = NULL;
        for (size_t k = 0; k < sizeof same / sizeof same[0]; k++) {
            char body[512];
            const char *num = same[k];
            if (!strcmp(f[i].field, "heads[0]")) /* heads run 0..1 here */
                num = k == 0 ? "1" : k == 1 ? "1.0" : k == 2 ? "1e0" : k == 3 ? "0.1e1" : "100E-2";
            snprintf(body, sizeof body, f[i].body, num);
            api_error e = {0};
            json_t *j = request_str(f[i].op, body, NULL, &e);
            CHECK(j != NULL, "%s = %s must be accepted: %s", f[i].field, num, e.message);
            char *text = j ? json_dumps(json_object_get(j, "output"), JSON_COMPACT) : NULL;
            if (text && !first)
                first = text;
            else if (text) {
                CHECK(!strcmp(first, text), "%s = %s answers otherwise than %s", f[i].field, num,
                      same[0]);
                free(text);
            }
            json_decref(j);
        }
        free(first);
        for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
            char body[512];
            snprintf(body, sizeof body, f[i].body, refused[k]);
            api_error e = {0};
            json_t *j = request_str(f[i].op, body, NULL, &e);
            CHECK(!j && e.status == 400 && !strcmp(e.field, f[i].field),
                  "%s = %s must be refused naming the field: %d %s %s", f[i].field, refused[k],
                  e.status, e.field, e.message);
            json_decref(j);
        }
    }
}

static void test_errors_and_buffers(void) {
    api_error e = {0};
    CHECK(api_fail(&e, 400, "invalid_field", "query", "first %d", 1) == -1, "api_fail -1");
    api_fail(&e, 500, "internal", NULL, "second");
    CHECK(e.status == 400 && strcmp(e.message, "first 1") == 0 && strcmp(e.field, "query") == 0,
          "first error wins");
    CHECK(api_fail(NULL, 400, "x", NULL, "no record") == -1, "NULL record");
    /* Durations in usage: 3 decimals, half up, and 0 for what is not a duration. Half up is
     * from the double's product by 1000, where "%.3f" rounds the exact value, ties to even:
     * 0.0625 is a tie (62.5 thousandths exactly; "%.3f" gives 0.062), and the double 1.0005 lies
     * just below one but its product is 1000.5 ("%.3f" gives 1.000). -0 is written without its
     * sign ("%.3f" gives -0.000), and the longest, 1e12, takes all of APIP_MS_DIGITS. */
    static const struct {
        double ms;
        const char *text;
    } durations[] = {{0.0, "0.000"},
                     {1.5, "1.500"},
                     {12.3456, "12.346"},
                     {0.0004, "0.000"},
                     {0.0005, "0.001"},
                     {0.0125, "0.013"},
                     {0.0625, "0.063"},
                     {1.0005, "1.001"},
                     {999.9996, "1000.000"},
                     {123456789.25, "123456789.250"},
                     {1e12, "1000000000000.000"},
                     {999999999999.9995, "1000000000000.000"},
                     {-0.0, "0.000"},
                     {-1.0, "0.000"},
                     {2e12, "0.000"},
                     {NAN, "0.000"}};
    for (size_t i = 0; i < sizeof durations / sizeof durations[0]; i++) {
        api_buf t = {0};
        apip_buf_put_ms(&t, durations[i].ms);
        CHECK(t.len == strlen(durations[i].text) && memcmp(t.data, durations[i].text, t.len) == 0 &&
                  t.len <= APIP_MS_DIGITS,
              "apip_buf_put_ms(%g) gave %.*s, not %s", durations[i].ms, (int)t.len,
              t.data ? t.data : "", durations[i].text);
        api_buf_free(&t);
    }
    api_buf b = {0};
    api_error w = {.status = 400, .code = "invalid_field", .field = "a\"b"};
    snprintf(w.message, sizeof w.message,
             "ctl \x01 tab\t nl\n bad \xff utf8 \xc3\xa9 quote \" bs \\");
    api_error_body(&w, &b);
    json_error_t je;
    json_t *j = json_loadb(b.data, b.len, 0, &je);
    CHECK(j != NULL, "error body is JSON: %s", je.text);
    json_t *er = json_object_get(j, "error");
    CHECK(
        er && strcmp(json_string_value(json_object_get(er, "field")), "a\"b") == 0 &&
            strcmp(json_string_value(json_object_get(er, "code")), "invalid_field") == 0 &&
            strstr(json_string_value(json_object_get(er, "message")), "\xef\xbf\xbd utf8 \xc3\xa9"),
        "error body fields");
    json_decref(j);
    api_buf_reset(&b);
    api_error nf = {.status = 404, .code = "unknown_model", .message = "m"};
    api_error_body(&nf, &b);
    const char *want = "{\"error\":{\"code\":\"unknown_model\",\"message\":\"m\",\"field\":null}}";
    CHECK(b.len == strlen(want) && memcmp(b.data, want, b.len) == 0, "null field: %.*s", (int)b.len,
          b.data);
    for (int i = 0; i < 10000; i++)
        api_buf_append(&b, "0123456789", 10);
    CHECK(b.len == strlen(want) + 100000 && !b.failed, "growth");
    api_buf_free(&b);
    CHECK(b.data == NULL && b.len == 0, "free");
    api_buf_free(NULL);
}

/* ---- Safetensors -------------------------------------------------------------------------- */

/* True when the JSON arrays of strings a and b are equal. */
static bool same_strings(const json_t *a, const json_t *b) {
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

/* The output of a 200 response, flattened into a new array (*n floats); NULL when none. */
static float *output_of(json_t *resp, size_t *n) {
    float *o = malloc(65536 * sizeof *o);
    *n = resp ? flatten(json_object_get(resp, "output"), o, 65536) : 0;
    if (*n == 0 || *n == SIZE_MAX) {
        free(o);
        return NULL;
    }
    return o;
}

/* A model with a vocabulary (reference.json of a *-vocab-* case, registered in reg as "model";
 * query_resp: the answer to the reference's query): its tables bit for bit, its description,
 * every text's split, text and tokens answering what the query does, an unknown word. */
static void check_vocab_model(const char *name, api_registry *reg, const json_t *ref,
                              json_t *query_resp) {
    const api_model *m = api_registry_find(reg, "model");
    size_t p = 0;
    const float *pos = apip_model_position_embeddings(m, &p);
    const float *tables[2] = {apip_model_token_embeddings(m), pos};
    const char *tn[2] = {"token_embeddings", "position_embeddings"};
    json_t *wj = json_object_get(ref, "weights");
    for (int i = 0; i < 2; i++) {
        json_t *a = json_object_get(wj, tn[i]);
        CHECK((a != NULL) == (tables[i] != NULL), "%s: %s presence", name, tn[i]);
        size_t bad = 0;
        for (size_t k = 0; a && tables[i] && k < json_array_size(a); k++) {
            float want = (float)json_number_value(json_array_get(a, k));
            bad += memcmp(&want, tables[i] + k, 4) != 0;
        }
        CHECK(bad == 0, "%s: %zu values of %s differ after conversion", name, bad, tn[i]);
    }
    api_model_info mi = api_model_describe(m);
    size_t max_tokens = (size_t)json_number_value(json_object_get(ref, "max_tokens"));
    CHECK(mi.vocab_size == json_array_size(json_object_get(ref, "vocab")) && mi.max_tokens == p &&
              p == max_tokens,
          "%s: vocab_size %zu, max_tokens %zu", name, mi.vocab_size, mi.max_tokens);

    /* GET /v1/models/model: the vocabulary in id order, the head names. */
    api_buf b = {0};
    api_error e = {0};
    CHECK(api_registry_model_json(reg, "model", &b, &e) == 0, "%s: describe: %s", name, e.message);
    json_error_t je;
    json_t *d = json_loadb(b.data, b.len, 0, &je);
    CHECK(d && same_strings(json_object_get(d, "vocab"), json_object_get(ref, "vocab")) &&
              same_strings(json_object_get(d, "head_names"), json_object_get(ref, "head_names")) &&
              json_is_true(json_object_get(d, "default")) &&
              json_integer_value(json_object_get(d, "vocab_size")) == (json_int_t)mi.vocab_size &&
              (p ? json_integer_value(json_object_get(d, "max_tokens")) == (json_int_t)p
                 : json_object_get(d, "max_tokens") == NULL),
          "%s: GET /v1/models/model: %.*s", name, (int)b.len, b.data);
    json_decref(d);
    api_buf_free(&b);

    /* Each text: split as the reference says; tokens answer bit for bit what text does. */
    size_t nq = 0;
    float *q_out = output_of(query_resp, &nq);
    json_t *splits = json_object_get(ref, "splits");
    for (size_t i = 0; i < json_array_size(splits); i++) {
        json_t *sp = json_array_get(splits, i);
        json_t *body =
            json_pack("{s:s,s:O}", "model", "model", "text", json_object_get(sp, "text"));
        char *text_body = json_dumps(body, JSON_COMPACT);
        json_object_del(body, "text");
        json_object_set(body, "tokens", json_object_get(sp, "tokens"));
        char *tokens_body = json_dumps(body, JSON_COMPACT);
        json_t *rt = request_str(API_OP_ATTENTION, text_body, reg, &e);
        CHECK(rt && same_strings(json_object_get(rt, "tokens"), json_object_get(sp, "tokens")),
              "%s: text %s split otherwise (%s)", name, text_body, e.message);
        CHECK(rt && same_strings(json_object_get(rt, "head_names"),
                                 json_object_get(ref, "head_names")),
              "%s: the response's head_names", name);
        json_t *rk = request_str(API_OP_ATTENTION, tokens_body, reg, &e);
        CHECK(rk && same_strings(json_object_get(rk, "tokens"), json_object_get(sp, "tokens")),
              "%s: tokens echoed otherwise (%s)", name, e.message);
        size_t nt = 0, nk = 0;
        float *t_out = output_of(rt, &nt), *k_out = output_of(rk, &nk);
        CHECK(t_out && k_out && nt == nk && !memcmp(t_out, k_out, nt * sizeof *t_out),
              "%s: tokens and text answer differently for %s", name, text_body);
        /* The first text's words make the reference's query: the same answer, bit for bit. */
        if (i == 0)
            CHECK(t_out && q_out && nt == nq && !memcmp(t_out, q_out, nt * sizeof *t_out),
                  "%s: text and its embeddings as query answer differently", name);
        free(t_out);
        free(k_out);
        json_decref(rt);
        json_decref(rk);
        free(text_body);
        free(tokens_body);
        json_decref(body);
    }
    free(q_out);

    /* An unknown word: its character offset (code points) in the message. */
    json_t *u = json_object_get(ref, "unknown");
    json_t *body = json_pack("{s:s,s:O}", "model", "model", "text", json_object_get(u, "text"));
    char *ub = json_dumps(body, JSON_COMPACT);
    json_t *ru = request_str(API_OP_ATTENTION, ub, reg, &e);
    char at[48];
    snprintf(at, sizeof at, "at character %.0f of text",
             json_number_value(json_object_get(u, "at")));
    CHECK(!ru && e.status == 400 && !strcmp(e.code, "unknown_token") && !strcmp(e.field, "text") &&
              strstr(e.message, at),
          "%s: unknown word in %s: %d %s %s", name, ub, e.status, e.code, e.message);
    json_decref(ru);
    free(ub);
    json_decref(body);
}

static void test_safetensors_valid(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, name);
    api_error e = {0};
    api_model *m = api_model_load_file(path, &e);
    CHECK(m != NULL, "%s: %s", path, e.message);
    if (!m)
        return;
    snprintf(path, sizeof path, "%s/%s/reference.json", dir, name);
    json_error_t je;
    json_t *ref = json_load_file(path, JSON_DECODE_INT_AS_REAL, &je);
    CHECK(ref != NULL, "%s: %s", path, je.text);
    if (!ref) {
        api_model_destroy(m);
        return;
    }
    api_model_info mi = api_model_describe(m);
    CHECK(strcmp(mi.name, "model") == 0 && strcmp(mi.source, "file") == 0, "name is the stem");
    CHECK(mi.embed_dim == (size_t)json_number_value(json_object_get(ref, "embed_dim")) &&
              mi.num_heads == (size_t)json_number_value(json_object_get(ref, "num_heads")) &&
              mi.kdim == (size_t)json_number_value(json_object_get(ref, "kdim")) &&
              mi.vdim == (size_t)json_number_value(json_object_get(ref, "vdim")) &&
              mi.has_bias == json_is_true(json_object_get(ref, "has_bias")),
          "%s: model info", name);
    /* Weights: bit-exact after the dtype conversion. */
    const attn_mha_params *pp = apip_model_params(m);
    const char *tn[] = {"in_proj_weight", "in_proj_bias",  "out_proj.weight", "out_proj.bias",
                        "q_proj_weight",  "k_proj_weight", "v_proj_weight"};
    const float *tp[] = {pp->in_proj_weight, pp->in_proj_bias,  pp->out_proj_weight,
                         pp->out_proj_bias,  pp->q_proj_weight, pp->k_proj_weight,
                         pp->v_proj_weight};
    json_t *wj = json_object_get(ref, "weights");
    for (int i = 0; i < 7; i++) {
        json_t *a = json_object_get(wj, tn[i]);
        CHECK((a != NULL) == (tp[i] != NULL), "%s: %s presence", name, tn[i]);
        size_t bad = 0;
        for (size_t k = 0; a && tp[i] && k < json_array_size(a); k++) {
            float want = (float)json_number_value(json_array_get(a, k));
            bad += memcmp(&want, tp[i] + k, 4) != 0;
        }
        CHECK(bad == 0, "%s: %zu values of %s differ after conversion", name, bad, tn[i]);
    }
    /* Output against PyTorch, through a request to the registered model. */
    api_registry *reg = api_registry_create();
    api_registry_add(reg, m, &e);
    api_buf lb = {0};
    api_registry_list_json(reg, &lb);
    json_t *list = json_loadb(lb.data, lb.len, 0, &je);
    json_t *m0 = json_array_get(json_object_get(list, "models"), 0);
    CHECK(json_is_integer(json_object_get(m0, "kdim")) &&
              json_integer_value(json_object_get(m0, "kdim")) == (json_int_t)mi.kdim &&
              json_is_integer(json_object_get(m0, "vdim")) &&
              json_integer_value(json_object_get(m0, "vdim")) == (json_int_t)mi.vdim,
          "%s: GET /v1/models gives kdim %zu and vdim %zu: %.*s", name, mi.kdim, mi.vdim,
          (int)lb.len, lb.data);
    json_decref(list);
    api_buf_free(&lb);
    char *q = json_dumps(json_object_get(ref, "query"), JSON_COMPACT | JSON_REAL_PRECISION(9));
    char *k = json_object_get(ref, "key")
                  ? json_dumps(json_object_get(ref, "key"), JSON_COMPACT | JSON_REAL_PRECISION(9))
                  : NULL;
    char *v = json_object_get(ref, "value")
                  ? json_dumps(json_object_get(ref, "value"), JSON_COMPACT | JSON_REAL_PRECISION(9))
                  : NULL;
    sb body = {0};
    sb_add(&body, "{\"model\":\"model\",\"query\":%s", q);
    if (k)
        sb_add(&body, ",\"key\":%s,\"value\":%s", k, v);
    sb_add(&body, "}");
    json_t *resp = request_str(API_OP_ATTENTION, body.s, reg, &e);
    CHECK(resp != NULL, "%s: request: %s", name, e.message);
    if (resp) {
        float got[4096], want[4096];
        size_t n = flatten(json_object_get(resp, "output"), got, 4096);
        size_t nw = flatten(json_object_get(ref, "output"), want, 4096);
        CHECK(n == nw && n > 0, "%s: output sizes %zu vs %zu", name, n, nw);
        double err = 0;
        for (size_t i = 0; i < n && n == nw; i++)
            err = fmax(err, fabs((double)got[i] - (double)want[i]) / (1.0 + fabs((double)want[i])));
        CHECK(err < 2e-5, "%s: output differs from PyTorch by %g", name, err);
        if (json_object_get(ref, "vocab"))
            check_vocab_model(name, reg, ref, resp);
        json_decref(resp);
    }
    free(q), free(k), free(v), free(body.s);
    json_decref(ref);
    api_registry_destroy(reg);
}

static void test_safetensors(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/safetensors/valid", cases_dir);
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    size_t nvalid = 0, ninvalid = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.') {
            test_safetensors_valid(dir, de->d_name);
            nvalid++;
        }
    if (d)
        closedir(d);
    CHECK(nvalid >= 6, "only %zu valid safetensors cases", nvalid);

    snprintf(dir, sizeof dir, "%s/safetensors/invalid", cases_dir);
    d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[1024], epath[1024];
        snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, de->d_name);
        snprintf(epath, sizeof epath, "%s/%s/expect", dir, de->d_name);
        size_t el = 0;
        char *expect = read_file(epath, &el);
        CHECK(expect != NULL, "cannot read %s", epath);
        if (!expect)
            continue;
        while (el && (expect[el - 1] == '\n'))
            expect[--el] = '\0';
        api_error e = {0};
        api_model *m = api_model_load_file(path, &e);
        CHECK(m == NULL, "%s was accepted", path);
        CHECK(e.status == 400 && strcmp(e.code, "invalid_model") == 0, "%s: %d %s", path, e.status,
              e.code);
        CHECK(strncmp(e.message, path, strlen(path)) == 0, "%s: message does not name the file",
              path);
        CHECK(strstr(e.message, expect) != NULL, "%s: message \"%s\" lacks \"%s\"", path, e.message,
              expect);
        CHECK(!strchr(e.message, '\n'), "%s: message is not one line", path);
        api_model_destroy(m);
        free(expect);
        ninvalid++;
    }
    if (d)
        closedir(d);
    CHECK(ninvalid >= 60, "only %zu invalid safetensors cases", ninvalid);
    printf("safetensors cases: %zu valid, %zu invalid\n", nvalid, ninvalid);

    /* A missing file is an I/O error naming it. */
    api_error e = {0};
    CHECK(!api_model_load_file("/nonexistent/x.safetensors", &e) && e.status == 500 &&
              strstr(e.message, "/nonexistent/x.safetensors"),
          "missing file: %s", e.message);
    /* Every prefix and random corruptions of a valid file fail cleanly or load (ASan watches
     * the reads: each copy is exactly as long as claimed). */
    char path[1024];
    snprintf(path, sizeof path, "%s/safetensors/valid/bf16-kvdim-bias/model.safetensors",
             cases_dir);
    size_t len = 0;
    char *ok = read_file(path, &len);
    CHECK(ok != NULL, "read %s", path);
    for (size_t n = 0; ok && n < len; n++) {
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, ok, n);
        api_error ce = {0};
        api_model *m = api_model_from_safetensors("cut", cut, n, &ce);
        CHECK(!m && ce.status == 400 && strncmp(ce.message, "cut: ", 5) == 0,
              "prefix of %zu bytes: %s", n, ce.message);
        api_model_destroy(m);
        free(cut);
    }
    size_t loaded = 0;
    for (int it = 0; ok && it < 3000; it++) {
        uint8_t *c = malloc(len);
        memcpy(c, ok, len);
        int flips = 1 + (int)(rnd64() % 4);
        for (int f = 0; f < flips; f++) {
            size_t at = (size_t)(rnd64() % (it % 2 ? len : (len < 400 ? len : 400)));
            c[at] = (uint8_t)rnd64();
        }
        api_error ce = {0};
        api_model *m = api_model_from_safetensors("fuzz", c, len, &ce);
        CHECK(m || (ce.status && ce.message[0]), "corrupt file: no model and no error");
        loaded += m != NULL;
        api_model_destroy(m);
        free(c);
    }
    free(ok);
    CHECK(loaded > 0, "no corrupted file loaded at all (data flips should still load)");
}

/* ---- Batches -------------------------------------------------------------------------------- */

/* The response body of a job that ran, without the usage (its times differ). */
static char *answer_of(api_job *job) {
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
static double answers_diff(const char *a, const char *b) {
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

static void test_batches(void) {
    api_error e = {0};
    api_registry *models = api_registry_create();
    api_registry_add(models, api_model_demo(&e), &e);
    api_registry_add(models, api_model_init_random("other", 64, 4, 7, &e), &e);
    float *xq = frand_new(16 * 64), *xkv = frand_new(5 * 64);
    sb q = {0}, kv = {0};
    sb_tensor(&q, xq, (size_t[]){16, 64}, 2);
    sb_tensor(&kv, xkv, (size_t[]){5, 64}, 2);
    /* Bodies 0-5 batch with each other (the demo model: self and cross, masks, weights modes);
     * 6-7 (init random, seed 5) with each other; 8-11 with nothing here. */
    static const char *const extras[] = {"",
                                         ",\"causal\":true,\"need_weights\":\"per_head\"",
                                         ",\"need_weights\":\"mean\"",
                                         ",\"key_lengths\":[3]",
                                         ",\"key_mask\":[1,0,1,1,1],\"need_weights\":\"per_head\"",
                                         (",\"heads\":[1],\"need_weights\":\"per_head\","
                                          "\"weights_top_k\":2")};
    char *bodies[12];
    size_t nb = 0;
    for (size_t i = 0; i < 6; i++) {
        sb t = {0};
        sb_add(&t, "{\"query\":%s", q.s);
        if (i == 3 || i == 4)
            sb_add(&t, ",\"key\":%s", kv.s);
        sb_add(&t, "%s}", extras[i]);
        bodies[nb++] = t.s;
    }
    for (size_t i = 0; i < 4; i++) {
        static const char *const rest[] = {
            ",\"params\":{\"init\":\"random\",\"seed\":5,\"num_heads\":4}",
            (",\"params\":{\"init\":\"random\",\"seed\":5,\"num_heads\":4},"
             "\"need_weights\":\"mean\""),
            ",\"model\":\"other\"", ",\"params\":{\"init\":\"random\",\"seed\":6,\"num_heads\":4}"};
        sb t = {0};
        sb_add(&t, "{\"query\":%s%s}", q.s, rest[i]);
        bodies[nb++] = t.s;
    }
    bodies[nb++] = strdup("{\"query\":[[1,2],[3,4]],\"params\":{\"num_heads\":1,"
                          "\"in_proj_weight\":[[1,0],[0,1],[1,0],[0,1],[1,0],[0,1]],"
                          "\"out_proj.weight\":[[1,0],[0,1]]}}");
    bodies[nb++] = strdup("{\"q\":[[1,2]],\"k\":[[1,2]],\"v\":[[1,2]]}");
    api_limits lim = api_limits_default();
    api_job *a[12], *b[12];
    for (size_t i = 0; i < nb; i++) {
        api_op op = i == nb - 1 ? API_OP_SDPA : API_OP_ATTENTION;
        e = (api_error){0};
        a[i] = api_job_parse(op, bodies[i], strlen(bodies[i]), models, &lim, &e);
        b[i] = api_job_parse(op, bodies[i], strlen(bodies[i]), models, &lim, &e);
        CHECK(a[i] && b[i], "batch body %zu: %s", i, e.message);
    }
    for (size_t i = 0; i < nb; i++)
        for (size_t j = 0; j < nb; j++) {
            bool want = (i < 6 && j < 6) || (i >= 6 && i < 8 && j >= 6 && j < 8) ||
                        (i == j && i < 10); /* inline tensors and sdpa never batch */
            CHECK(api_jobs_batchable(a[i], a[j]) == want, "batchable(%zu, %zu) should be %d", i, j,
                  want);
        }
    CHECK(!api_jobs_batchable(a[0], NULL) && api_job_rows(a[0]) == 16 && api_job_rows(NULL) == 0,
          "batchable with NULL, rows");
    /* Run b one by one, a as one call (the demo jobs as a batch, the others alone); the
     * answers agree to float32 rounding. */
    for (size_t i = 0; i < nb; i++) {
        e = (api_error){0};
        CHECK(api_job_run(b[i], NULL, &e) == 0, "job %zu alone: %s", i, e.message);
    }
    api_error errs[12] = {{0}};
    CHECK(api_jobs_run(a, nb, NULL, 0, errs) == 0, "the batch failed: %s", errs[0].message);
    for (size_t i = 0; i < nb; i++) {
        char *x = answer_of(a[i]), *y = answer_of(b[i]);
        double d = x && y ? answers_diff(x, y) : (double)INFINITY;
        CHECK(d < 1e-5, "job %zu: batched and alone differ by %g", i, d);
        free(x), free(y);
    }
    /* One job that overflows float32 fails alone; a batch over max_bytes runs one by one. */
    for (size_t i = 0; i < nb; i++)
        api_job_destroy(a[i]), api_job_destroy(b[i]);
    for (size_t round = 0; round < 2; round++) {
        for (size_t i = 0; i < 3; i++) {
            const char *body = i == 1 ? bodies[6] : bodies[7];
            a[i] = api_job_parse(API_OP_ATTENTION, body, strlen(body), models, &lim, &e);
        }
        /* Job 1's query overflows: write it in the arena after parsing. */
        for (size_t k = 0; k < 16 * 64; k++)
            ((float *)a[1]->q)[k] = 1e30f;
        memset(errs, 0, sizeof errs);
        size_t failed = api_jobs_run(a, 3, NULL, round ? 64 : 0, errs);
        CHECK(failed == 1 && errs[1].status == 400 && !strcmp(errs[1].code, "numeric_overflow") &&
                  !errs[0].status && !errs[2].status,
              "round %zu: one overflowing job fails alone (%zu failed, %d %s)", round, failed,
              errs[1].status, errs[1].message);
        /* As a batch, only the first job made the weights; one by one, each did. */
        CHECK(a[0]->params_ready && a[2]->params_ready == (round == 1), "round %zu: ran %s", round,
              round ? "as a batch, not one by one" : "one by one");
        char *x = answer_of(a[0]), *y = answer_of(a[2]);
        CHECK(x && y && answers_diff(x, y) < (double)INFINITY, "round %zu: the others answer",
              round);
        free(x), free(y);
        for (size_t i = 0; i < 3; i++)
            api_job_destroy(a[i]);
    }
    for (size_t i = 0; i < nb; i++)
        free(bodies[i]);
    free(q.s), free(kv.s), free(xq), free(xkv);
    api_registry_destroy(models);
}

/* The built-in lesson model: its description, the chapter's sentences split as documented
 * (api/lesson/README.md), a text job batching with a query job on the same model. */
static void test_lesson(void) {
    api_error e = {0};
    api_registry *r = builtin_registry();
    const api_model *m = api_registry_find(r, "lesson");
    api_model_info mi = api_model_describe(m);
    CHECK(m && !strcmp(mi.source, "builtin") && mi.embed_dim == 256 && mi.num_heads == 4 &&
              mi.kdim == 256 && mi.vdim == 256 && !mi.has_bias && mi.max_tokens == 48 &&
              mi.vocab_size >= 150,
          "lesson: %s E %zu H %zu V %zu P %zu", mi.source, mi.embed_dim, mi.num_heads,
          mi.vocab_size, mi.max_tokens);
    CHECK(api_registry_default(r) == api_registry_find(r, "demo"), "demo stays the default");
    api_buf b = {0};
    CHECK(api_registry_model_json(r, "lesson", &b, &e) == 0, "describe lesson: %s", e.message);
    json_t *d = json_loadb(b.data, b.len, 0, NULL);
    json_t *names = json_pack("[ssss]", "adjacent", "subject", "structure", "coreference");
    CHECK(d && same_strings(json_object_get(d, "head_names"), names) &&
              json_array_size(json_object_get(d, "vocab")) == mi.vocab_size &&
              json_is_false(json_object_get(d, "default")) &&
              json_integer_value(json_object_get(d, "max_tokens")) == 48,
          "GET /v1/models/lesson: %.300s", b.data);
    json_decref(d);
    api_buf_reset(&b);
    e = (api_error){0};
    CHECK(api_registry_model_json(r, "lesso", &b, &e) == -1 && e.status == 404 &&
              !strcmp(e.code, "unknown_model") && !e.field[0] && b.len == 0,
          "GET /v1/models/lesso: %d %s", e.status, e.code);
    api_buf_reset(&b);
    api_registry_list_json(r, &b);
    json_t *l = json_loadb(b.data, b.len, 0, NULL);
    json_t *lm = json_array_get(json_object_get(l, "models"), 1);
    json_t *dm = json_array_get(json_object_get(l, "models"), 0);
    CHECK(same_strings(json_object_get(lm, "head_names"), names) &&
              json_integer_value(json_object_get(lm, "vocab_size")) == (json_int_t)mi.vocab_size &&
              !json_object_get(lm, "vocab") && !json_object_get(dm, "head_names") &&
              json_integer_value(json_object_get(dm, "vocab_size")) == 0 &&
              json_is_integer(json_object_get(dm, "vocab_size")),
          "GET /v1/models: %.400s", b.data);
    json_decref(l);
    json_decref(names);
    api_buf_free(&b);

    /* The segmentation the README documents for the chapter's sentences. */
    static const char *const splits[][2] = {
        {"程序员把服务器日志发给同事，因为它记录了错误原因。",
         "程序员|把|服务器日志|发给|同事|，|因为|它|记录了|错误原因|。"},
        {"小王昨天提交了补丁，因为他发现缓存模块在高并发下会返回旧数据。",
         "小王|昨天|提交了|补丁|，|因为|他|发现|缓存模块|在|高并发|下|会|返回|旧数据|。"},
        {"张工把配置文件发给测试同学，因为它包含新的开关。",
         "张工|把|配置文件|发给|测试同学|，|因为|它|包含|新的开关|。"},
        {"小李把笔记本放进背包，因为它太重了。", "小李|把|笔记本|放进|背包|，|因为|它|太重了|。"},
        {"Redis 是一个内存数据库。", "Redis|是|一个|内存|数据库|。"},
        {"服务器 日志", "服务器|日志"},
    };
    for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
        json_t *body = json_pack("{s:s,s:s}", "model", "lesson", "text", splits[i][0]);
        char *bs = json_dumps(body, JSON_COMPACT);
        json_t *resp = request_str(API_OP_ATTENTION, bs, r, &e);
        sb got = {0};
        json_t *toks = json_object_get(resp, "tokens");
        for (size_t k = 0; k < json_array_size(toks); k++)
            sb_add(&got, "%s%s", k ? "|" : "", json_string_value(json_array_get(toks, k)));
        CHECK(got.s && !strcmp(got.s, splits[i][1]), "split of %s: %s, want %s", splits[i][0],
              got.s ? got.s : e.message, splits[i][1]);
        free(got.s);
        free(bs);
        json_decref(body);
        json_decref(resp);
    }

    /* A text job batches with a query job on lesson; each answers as when run alone. */
    api_limits lim = api_limits_default();
    const char *tb = "{\"model\":\"lesson\",\"text\":\"小李把笔记本放进背包，因为它太重了。\","
                     "\"need_weights\":\"per_head\"}";
    float *x = frand_new(3 * 256);
    sb qb = {0};
    sb_add(&qb, "{\"model\":\"lesson\",\"causal\":true,\"query\":");
    sb_tensor(&qb, x, (size_t[]){3, 256}, 2);
    sb_add(&qb, "}");
    api_job *a[2], *solo[2];
    const char *bodies[2] = {tb, qb.s};
    for (int i = 0; i < 2; i++) {
        a[i] = api_job_parse(API_OP_ATTENTION, bodies[i], strlen(bodies[i]), r, &lim, &e);
        solo[i] = api_job_parse(API_OP_ATTENTION, bodies[i], strlen(bodies[i]), r, &lim, &e);
        CHECK(a[i] && solo[i], "lesson batch body %d: %s", i, e.message);
    }
    if (a[0] && a[1] && solo[0] && solo[1]) {
        CHECK(api_jobs_batchable(a[0], a[1]), "a text job and a query job on lesson batch");
        api_error errs[2] = {{0}, {0}};
        CHECK(api_jobs_run(a, 2, NULL, 0, errs) == 0, "lesson batch: %s", errs[0].message);
        for (int i = 0; i < 2; i++) {
            CHECK(api_job_run(solo[i], NULL, &e) == 0, "lesson solo %d: %s", i, e.message);
            char *x1 = answer_of(a[i]), *x2 = answer_of(solo[i]);
            CHECK(x1 && x2 && answers_diff(x1, x2) < 1e-5, "lesson batch answer %d differs", i);
            CHECK(i != 0 || (x1 && strstr(x1, "\"tokens\":[\"小李\",\"把\"")),
                  "batched text job lost its tokens");
            free(x1);
            free(x2);
        }
    }
    for (int i = 0; i < 2; i++) {
        api_job_destroy(a[i]);
        api_job_destroy(solo[i]);
    }
    free(x);
    free(qb.s);
    api_registry_destroy(r);
}

/* ---- Job memory ----------------------------------------------------------------------------- */

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The job memory cache alone: capacities, reuse, the bound, trimming, destroy with a block out. */
static void test_mem_cache(void) {
    const size_t MiB = (size_t)1 << 20;
    size_t cap = 0;
    /* Without a cache: malloc, exactly the size asked. */
    char *p = api_mem_alloc(NULL, 1000, 5000, &cap);
    CHECK(p && cap == 1000 && (uintptr_t)p % 64 == 0, "no cache: %p, capacity %zu", (void *)p, cap);
    memset(p, 1, cap);
    api_mem_free(p);
    api_mem_free(NULL);

    api_mem *m = api_mem_create(64 * MiB, 0, NULL); /* no trimmer: blocks stay until trimmed */
    CHECK(m != NULL, "api_mem_create");
    char *a = api_mem_alloc(m, MiB, MiB, &cap);
    CHECK(a && cap == MiB && (uintptr_t)a % 64 == 0, "1 MiB, at most 1 MiB: capacity %zu", cap);
    memset(a, 2, MiB);
    api_mem_stats st = api_mem_stats_get(m);
    CHECK(st.in_use_bytes == MiB && st.in_use_blocks == 1 && st.misses == 1, "in use %zu",
          st.in_use_bytes);
    api_mem_free(a);
    st = api_mem_stats_get(m);
    CHECK(st.in_use_bytes == 0 && st.cached_bytes == MiB && st.cached_blocks == 1,
          "freed: cached %zu", st.cached_bytes);
    char *b = api_mem_alloc(m, MiB - 4096, SIZE_MAX, &cap);
    st = api_mem_stats_get(m);
    CHECK(b == a && cap == MiB && st.hits == 1 && st.cached_bytes == 0,
          "a slightly smaller request reuses the cached block (%p %p, capacity %zu, hits %llu)",
          (void *)a, (void *)b, cap, (unsigned long long)st.hits);
    api_mem_free(b);
    /* Not reused: when the caller allows less than its capacity, or it is over a quarter more. */
    char *c = api_mem_alloc(m, MiB - 4096, MiB - 4096, &cap);
    CHECK(c && c != a && cap == MiB - 4096, "most is kept: capacity %zu", cap);
    char *d = api_mem_alloc(m, MiB / 2, SIZE_MAX, &cap);
    CHECK(d && d != a && cap >= MiB / 2 && cap <= MiB / 2 + MiB / 16,
          "a half-size request gets a new block of its size class: capacity %zu", cap);
    size_t odd = 1000001;
    char *o = api_mem_alloc(m, odd, SIZE_MAX, &cap);
    CHECK(o && cap >= odd && cap <= odd + odd / 8, "size class of %zu: %zu", odd, cap);
    if (o)
        memset(o, 5, cap); /* all of the capacity is the caller's (ASan checks it) */
    api_mem_free(c);
    api_mem_free(d);
    api_mem_free(o);
    st = api_mem_stats_get(m);
    CHECK(st.in_use_bytes == 0 && st.cached_blocks == 3, "three cached, %zu", st.cached_blocks);
    CHECK(api_mem_trim(m, 3600) == 0 && api_mem_trim(m, 0) == st.cached_bytes &&
              api_mem_stats_get(m).cached_bytes == 0,
          "api_mem_trim");
    /* A flood's blocks: 200 in use at once, all freed, then asked for again: every one is a
     * cached block (the cache keeps up to 256; it kept 32, and mapped 168 of them anew). */
    {
        enum { FLOOD = 200 };
        char *blocks[FLOOD];
        api_mem_stats f0 = api_mem_stats_get(m);
        for (int i = 0; i < FLOOD; i++)
            blocks[i] = api_mem_alloc(m, (size_t)128 << 10, SIZE_MAX, NULL);
        for (int i = 0; i < FLOOD; i++)
            api_mem_free(blocks[i]);
        api_mem_stats f1 = api_mem_stats_get(m);
        for (int i = 0; i < FLOOD; i++)
            blocks[i] = api_mem_alloc(m, (size_t)128 << 10, SIZE_MAX, NULL);
        api_mem_stats f2 = api_mem_stats_get(m);
        for (int i = 0; i < FLOOD; i++)
            api_mem_free(blocks[i]);
        CHECK(f1.cached_blocks >= FLOOD && f2.hits - f1.hits == FLOOD && f2.misses - f1.misses == 0,
              "a flood of %d blocks: %zu cached, then %llu reused and %llu mapped (misses before "
              "%llu)",
              FLOOD, f1.cached_blocks, (unsigned long long)(f2.hits - f1.hits),
              (unsigned long long)(f2.misses - f1.misses), (unsigned long long)f0.misses);
        api_mem_trim(m, 0);
    }
    /* A block still in use when its cache is destroyed stays valid until freed. */
    char *late = api_mem_alloc(m, 2 * MiB, 2 * MiB, NULL);
    api_mem_destroy(m);
    memset(late, 3, 2 * MiB);
    api_mem_free(late);

    /* The bound: cached blocks are unmapped, oldest first, so that in use + cached stay within
     * max_bytes. */
    m = api_mem_create(3 * MiB, 0, NULL);
    char *x[3];
    for (int i = 0; i < 3; i++)
        x[i] = api_mem_alloc(m, MiB, MiB, NULL);
    for (int i = 0; i < 3; i++)
        api_mem_free(x[i]);
    st = api_mem_stats_get(m);
    CHECK(st.cached_bytes == 3 * MiB, "three cached within the bound: %zu", st.cached_bytes);
    char *y = api_mem_alloc(m, 2 * MiB, 2 * MiB, NULL);
    st = api_mem_stats_get(m);
    CHECK(y && st.in_use_bytes == 2 * MiB && st.cached_bytes == MiB && st.evicted == 2,
          "a 2 MiB block evicts two: in use %zu, cached %zu, evicted %llu", st.in_use_bytes,
          st.cached_bytes, (unsigned long long)st.evicted);
    char *z = api_mem_alloc(m, 2 * MiB, 2 * MiB, NULL); /* in use alone passes the bound */
    st = api_mem_stats_get(m);
    CHECK(z && st.cached_bytes == 0 && st.in_use_bytes == 4 * MiB,
          "in use is never refused: in use %zu, cached %zu", st.in_use_bytes, st.cached_bytes);
    api_mem_free(y);
    st = api_mem_stats_get(m);
    CHECK(st.cached_bytes == 0, "over the bound, a freed block is unmapped: cached %zu",
          st.cached_bytes);
    api_mem_free(z);
    st = api_mem_stats_get(m);
    CHECK(st.cached_bytes == 2 * MiB && st.in_use_bytes == 0, "within it again: cached %zu",
          st.cached_bytes);
    api_mem_destroy(m);

    /* The trimmer: a cached block unused for idle_s is unmapped. */
    m = api_mem_create(SIZE_MAX, 0.3, NULL);
    a = api_mem_alloc(m, MiB, MiB, NULL);
    memset(a, 4, MiB);
    double t0 = mono_s();
    api_mem_free(a);
    bool kept = api_mem_stats_get(m).cached_bytes == MiB || mono_s() - t0 >= 0.3;
    while (api_mem_stats_get(m).cached_bytes > 0 && mono_s() - t0 < 10)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    double took = mono_s() - t0;
    st = api_mem_stats_get(m);
    CHECK(kept && st.cached_bytes == 0 && st.trimmed == 1 && took >= 0.29,
          "trimmed after %.2f s (idle_s 0.3): cached %zu, trimmed %llu", took, st.cached_bytes,
          (unsigned long long)st.trimmed);
    api_mem_destroy(m);
    api_mem_destroy(NULL);
}

/* Jobs with a memory cache: the arena, the response buffer and the batch workspace come from it
 * and are reused; the results are those of jobs without it; the arena's capacity never passes
 * what max_job_bytes leaves beside the response. */
static void test_mem_jobs(void) {
    const size_t L = 256, E = 128;
    float *xq = frand_new(L * E);
    sb q = {0};
    sb_tensor_b64(&q, xq, (size_t[]){L, E}, 2);
    sb body = {0};
    sb_add(&body, "{\"query\":%s,\"params\":{\"init\":\"random\",\"seed\":3,\"num_heads\":4}}",
           q.s);
    api_error e = {0};
    api_limits lim = api_limits_default();
    api_job *plain = api_job_parse(API_OP_ATTENTION, body.s, strlen(body.s), NULL, &lim, &e);
    api_buf want = {0};
    CHECK(plain && api_job_run(plain, NULL, &e) == 0 &&
              api_job_respond(plain, 0, 0, &want, &e) == 0 && !want.block,
          "without a cache: %s", e.message);
    size_t arena = api_job_bytes(plain), resp = api_job_response_bytes(plain);
    CHECK(arena >= (size_t)256 << 10, "the test's arena should be cached: %zu bytes", arena);
    api_job_destroy(plain);

    api_mem *m = api_mem_create(SIZE_MAX, 0, NULL);
    lim.mem = m;
    void *first = NULL;
    for (int i = 0; i < 3; i++) {
        e = (api_error){0};
        api_job *job = api_job_parse(API_OP_ATTENTION, body.s, strlen(body.s), NULL, &lim, &e);
        api_buf got = {0};
        CHECK(job && api_job_run(job, NULL, &e) == 0 && api_job_respond(job, 0, 0, &got, &e) == 0,
              "with a cache: %s", e.message);
        if (!job)
            break;
        if (i == 0)
            first = job;
        CHECK((void *)job == first && api_job_bytes(job) >= arena &&
                  api_job_bytes(job) <= arena + arena / 4,
              "run %d: the arena is the first one's block (%p %p), capacity %zu", i, (void *)job,
              first, api_job_bytes(job));
        CHECK(got.block && got.cap == resp + API_RESPOND_SLACK && got.len == want.len &&
                  !memcmp(got.data, want.data, want.len),
              "run %d: the response, in a block of exactly its bound (%zu of %zu)", i, got.cap,
              resp + API_RESPOND_SLACK);
        api_job_destroy(job);
        api_buf_free(&got);
    }
    api_mem_stats st = api_mem_stats_get(m);
    CHECK(st.misses == 2 && st.hits == 4 && st.in_use_bytes == 0,
          "two blocks mapped (arena, response), reused twice each: %llu misses, %llu hits",
          (unsigned long long)st.misses, (unsigned long long)st.hits);

    /* The limit: a cached block larger than what the limit leaves is not taken. */
    lim.max_job_bytes = arena + resp;
    void *bigger = api_mem_alloc(m, arena + 8192, arena + 8192, NULL);
    api_mem_trim(m, 0);
    api_mem_free(bigger);
    api_job *tight = api_job_parse(API_OP_ATTENTION, body.s, strlen(body.s), NULL, &lim, &e);
    CHECK(tight && api_job_bytes(tight) == arena && (void *)tight != bigger,
          "at the limit the arena is exactly its size: %zu", api_job_bytes(tight));
    api_job_destroy(tight);

    /* A batch: its workspace comes from the cache too, and goes back. */
    lim.max_job_bytes = api_limits_default().max_job_bytes;
    api_job *jobs[2];
    api_error errs[2] = {{0}};
    for (int i = 0; i < 2; i++)
        jobs[i] = api_job_parse(API_OP_ATTENTION, body.s, strlen(body.s), NULL, &lim, &e);
    uint64_t before = api_mem_stats_get(m).hits + api_mem_stats_get(m).misses;
    CHECK(jobs[0] && jobs[1] && api_jobs_run(jobs, 2, NULL, 0, errs) == 0, "batch");
    st = api_mem_stats_get(m);
    CHECK(st.hits + st.misses == before + 1 && st.in_use_blocks == 2,
          "the batch's workspace came from the cache and went back (%llu requests, %zu in use)",
          (unsigned long long)(st.hits + st.misses - before), st.in_use_blocks);
    for (int i = 0; i < 2; i++) {
        api_buf got = {0};
        CHECK(api_job_respond(jobs[i], 0, 0, &got, &e) == 0 && got.block && got.len > 0,
              "batched job %d answers: %s", i, e.message);
        api_buf_free(&got);
        api_job_destroy(jobs[i]);
    }
    CHECK(api_mem_stats_get(m).in_use_bytes == 0, "every block back");
    api_mem_destroy(m);
    api_buf_free(&want);
    free(q.s), free(body.s), free(xq);
}

/* ---- The Open Inference Protocol (v2) ----------------------------------------------------- */

static void sb_bytes(sb *b, const void *p, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->s = realloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = '\0';
}

/* A v2 response: its JSON part parsed, and a copy of the raw bytes after it. */
typedef struct v2_answer {
    json_t *j;
    uint8_t *raw;
    size_t raw_len;
} v2_answer;

static void v2_answer_free(v2_answer *a) {
    json_decref(a->j);
    free(a->raw);
    memset(a, 0, sizeof *a);
}

/* Parses, runs and answers a v2 request. On 200 fills *a and returns true; the response must
 * stay within its bound (the buffer grown once, to the bound and the writer's slack), its JSON
 * part (all but api_job_binary_bytes) be valid JSON, and the binary_data_size of its outputs add
 * up to the bytes after it. Else false with *err filled, and the error body {"error": message}
 * must be valid JSON. */
static bool v2_request(const char *body, size_t len, size_t header, const char *model,
                       const char *version, const api_registry *models, const api_limits *lim,
                       api_error *err, v2_answer *a) {
    api_error e = {0};
    api_buf out = {0};
    memset(a, 0, sizeof *a);
    api_job *job = api_v2_parse(body, len, header, model, version, models, lim, &e);
    size_t binary = api_job_binary_bytes(job);
    if (job && api_job_run(job, NULL, &e) == 0) {
        api_job_respond(job, 1.5, 2.25, &out, &e);
        CHECK(e.status || (out.len <= api_job_response_bytes(job) &&
                           out.cap == api_job_response_bytes(job) + 64 && binary <= out.len),
              "v2 response of %zu bytes (buffer %zu, binary %zu) for a bound of %zu", out.len,
              out.cap, binary, api_job_response_bytes(job));
    }
    api_job_destroy(job);
    if (e.status) {
        api_buf_reset(&out);
        api_v2_error_body(&e, &out);
        json_t *j = json_loadb(out.data, out.len, 0, NULL);
        CHECK(j && json_is_string(json_object_get(j, "error")) && json_object_size(j) == 1,
              "v2 error body %.*s", (int)out.len, out.data);
        json_decref(j);
        api_buf_free(&out);
        if (err)
            *err = e;
        return false;
    }
    json_error_t je;
    a->j = json_loadb(out.data, out.len - binary, 0, &je);
    CHECK(a->j != NULL, "v2 response JSON is not valid (%s): %.300s", je.text, out.data);
    size_t sum = 0;
    json_t *outs = json_object_get(a->j, "outputs"), *o;
    size_t i;
    json_array_foreach(outs, i, o) {
        json_t *bs = json_object_get(json_object_get(o, "parameters"), "binary_data_size");
        sum += bs ? (size_t)json_integer_value(bs) : 0;
    }
    CHECK(sum == binary, "v2 outputs declare %zu binary bytes; %zu follow the JSON", sum, binary);
    a->raw_len = binary;
    a->raw = malloc(binary + 1);
    memcpy(a->raw, out.data + out.len - binary, binary);
    api_buf_free(&out);
    if (err)
        *err = e;
    return a->j != NULL;
}

/* Output name of a v2 answer as floats (or int32 indices as floats) in out (cap), from JSON data
 * or the binary part. Returns the count, or SIZE_MAX when it is missing. */
static size_t v2_output(const v2_answer *a, const char *name, float *out, size_t cap,
                        bool *binary) {
    size_t off = 0, i;
    json_t *o;
    json_array_foreach(json_object_get(a->j, "outputs"), i, o) {
        json_t *bs = json_object_get(json_object_get(o, "parameters"), "binary_data_size");
        size_t n = bs ? (size_t)json_integer_value(bs) : 0;
        if (strcmp(json_string_value(json_object_get(o, "name")), name) != 0) {
            off += n;
            continue;
        }
        bool ints = !strcmp(json_string_value(json_object_get(o, "datatype")), "INT32");
        *binary = bs != NULL;
        if (bs) {
            if (n / 4 > cap || off + n > a->raw_len)
                return SIZE_MAX;
            for (size_t k = 0; k < n / 4; k++) {
                int32_t x;
                memcpy(ints ? (void *)&x : (void *)&out[k], a->raw + off + 4 * k, 4);
                if (ints)
                    out[k] = (float)x;
            }
            return n / 4;
        }
        return flatten(json_object_get(o, "data"), out, cap);
    }
    return SIZE_MAX;
}

static size_t run_v2_cases(const api_registry *models) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/requests/v2", cases_dir);
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (!d)
        return 0;
    char *names[512];
    size_t count = 0;
    struct dirent *de;
    while ((de = readdir(d)) && count < 512)
        if (strstr(de->d_name, ".case"))
            names[count++] = strdup(de->d_name);
    closedir(d);
    qsort(names, count, sizeof *names, cmp_str);
    for (size_t i = 0; i < count; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t len = 0;
        char *text = read_file(path, &len);
        CHECK(text != NULL, "cannot read %s", path);
        if (!text)
            continue;
        char *nl = memchr(text, '\n', len);
        size_t hl = nl ? (size_t)(nl - text) : len;
        char head[256] = "", phrase[160] = "", code[64] = "", model[64] = "", version[16] = "";
        snprintf(head, sizeof head, "%.*s", (int)hl, text);
        char *bar = strstr(head, " | ");
        if (bar) {
            snprintf(phrase, sizeof phrase, "%s", bar + 3);
            *bar = '\0';
        }
        const char *body = nl ? nl + 1 : text + len;
        size_t blen = len - (size_t)(body - text), header = API_V2_NO_HEADER;
        int status = 0;
        bool has_version = false;
        api_limits lim = api_limits_default();
        char *save = NULL;
        for (char *tok = strtok_r(head, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
            const char *eq = strchr(tok, '=');
            size_t v = eq ? (size_t)strtoull(eq + 1, NULL, 10) : 0;
            if (!status)
                status = atoi(tok);
            else if (!strncmp(tok, "model=", 6))
                snprintf(model, sizeof model, "%s", eq + 1);
            else if (!strncmp(tok, "version=", 8))
                has_version = snprintf(version, sizeof version, "%s", eq + 1) >= 0;
            else if (!strncmp(tok, "header=", 7))
                header = v;
            else if (!strncmp(tok, "max_job_bytes=", 14))
                lim.max_job_bytes = v;
            else if (!strncmp(tok, "max_dim=", 8))
                lim.max_dim = v;
            else if (!eq)
                snprintf(code, sizeof code, "%s", tok);
        }
        char *exact = malloc(blen ? blen : 1); /* exactly blen bytes: ASan sees a read past */
        memcpy(exact, body, blen);
        api_error e = {0};
        v2_answer a;
        bool ok = v2_request(exact, blen, header, model, has_version ? version : NULL, models, &lim,
                             &e, &a);
        int got = ok ? 200 : e.status;
        CHECK(got == status, "%s: status %d, want %d (%s: %s)", path, got, status, e.code,
              e.message);
        if (status != 200 && got == status) {
            CHECK(!strcmp(e.code, code), "%s: code %s, want %s (%s)", path, e.code, code,
                  e.message);
            CHECK(e.message[0] && !strchr(e.message, '\n'), "%s: message must be one line", path);
            CHECK(!phrase[0] || strstr(e.message, phrase), "%s: the message \"%s\" lacks \"%s\"",
                  path, e.message, phrase);
        }
        if (ok) {
            const char *mn = json_string_value(json_object_get(a.j, "model_name"));
            CHECK(mn && !strcmp(mn, model) && json_array_size(json_object_get(a.j, "outputs")) > 0,
                  "%s: model_name %s, outputs %zu", path, mn ? mn : "none",
                  json_array_size(json_object_get(a.j, "outputs")));
        }
        v2_answer_free(&a);
        free(exact);
        free(text);
        free(names[i]);
    }
    return count;
}

/* One tensor of a v2/v1 pair of requests. */
typedef struct pair_in {
    const char *v1, *v2; /* the field's names (sdpa: q/k/v in both) */
    int dt;              /* APIP_DT_* */
    size_t rank, dims[4];
    const float *f;   /* FP32 (may hold -inf in attn_bias) */
    const int32_t *i; /* INT32 (key_lengths, an INT32 key_mask) */
    const uint8_t *b; /* BOOL */
} pair_in;

static size_t pair_count(const pair_in *t) {
    size_t n = 1;
    for (size_t k = 0; k < t->rank; k++)
        n *= t->dims[k];
    return n;
}

/* Nested JSON arrays of the integers (or bools as 0/1) of t. */
static void sb_ints(sb *b, const pair_in *t, size_t lvl, size_t *at) {
    sb_add(b, "[");
    for (size_t i = 0; i < t->dims[lvl]; i++) {
        if (i)
            sb_add(b, ",");
        if (lvl + 1 < t->rank)
            sb_ints(b, t, lvl + 1, at);
        else
            sb_add(b, "%d", t->i ? (int)t->i[*at] : (int)t->b[*at]), (*at)++;
    }
    sb_add(b, "]");
}

/* The v1 body: base64 floats, nested integer lists, the extra fields, base64 out. */
static void pair_v1(sb *b, const pair_in *in, size_t n, const char *extra) {
    sb_add(b, "{\"encoding\":\"base64\"%s", extra);
    for (size_t k = 0; k < n; k++) {
        sb_add(b, ",\"%s\":", in[k].v1);
        size_t at = 0;
        if (in[k].dt == APIP_DT_FP32)
            sb_tensor_b64(b, in[k].f, in[k].dims, in[k].rank);
        else
            sb_ints(b, &in[k], 0, &at);
    }
    sb_add(b, "}");
}

/* The v2 body: binary inputs and outputs, or JSON data and outputs. Returns the header length
 * (API_V2_NO_HEADER for JSON). */
static size_t pair_v2(sb *b, const pair_in *in, size_t n, const char *params, bool binary) {
    static const char *const dts[] = {"FP32", "INT32", "BOOL"};
    sb_add(b, "{\"parameters\":{%s%s\"binary_data_output\":%s},\"inputs\":[", params,
           params[0] ? "," : "", binary ? "true" : "false");
    for (size_t k = 0; k < n; k++) {
        const pair_in *t = &in[k];
        size_t c = pair_count(t);
        sb_add(b, "%s{\"name\":\"%s\",\"datatype\":\"%s\",\"shape\":[", k ? "," : "", t->v2,
               dts[t->dt]);
        for (size_t d = 0; d < t->rank; d++)
            sb_add(b, "%s%zu", d ? "," : "", t->dims[d]);
        if (binary) {
            sb_add(b, "],\"parameters\":{\"binary_data_size\":%zu}}",
                   c * (t->dt == APIP_DT_BOOL ? 1 : 4));
            continue;
        }
        sb_add(b, "],\"data\":[");
        for (size_t e = 0; e < c; e++) {
            char num[40];
            if (t->dt == APIP_DT_FP32 && isinf(t->f[e]))
                snprintf(num, sizeof num, "\"-inf\"");
            else if (t->dt == APIP_DT_FP32)
                num[api_float_write(num, t->f[e])] = '\0';
            else if (t->dt == APIP_DT_BOOL)
                snprintf(num, sizeof num, "%s", t->b[e] ? "true" : "false");
            else
                snprintf(num, sizeof num, "%d", (int)t->i[e]);
            sb_add(b, "%s%s", e ? "," : "", num);
        }
        sb_add(b, "]}");
    }
    sb_add(b, "]}");
    if (!binary)
        return API_V2_NO_HEADER;
    size_t hl = b->n;
    for (size_t k = 0; k < n; k++) {
        const pair_in *t = &in[k];
        size_t c = pair_count(t);
        if (t->dt == APIP_DT_FP32)
            sb_bytes(b, t->f, c * 4);
        else if (t->dt == APIP_DT_INT32)
            sb_bytes(b, t->i, c * 4);
        else
            sb_bytes(b, t->b, c);
    }
    return hl;
}

/* v1 (base64) and v2 (binary, and JSON) answers to the same job agree bit for bit. */
static void pair_check(const char *what, const char *model, const pair_in *in, size_t n,
                       const char *v1_extra, const char *v2_params, const api_registry *models) {
    api_op op = strcmp(model, API_V2_SDPA_MODEL) ? API_OP_ATTENTION : API_OP_SDPA;
    sb b1 = {0};
    pair_v1(&b1, in, n, v1_extra);
    if (op == API_OP_ATTENTION) { /* the model by name */
        sb named = {0};
        sb_add(&named, "{\"model\":\"%s\",%s", model, b1.s + 1);
        free(b1.s);
        b1 = named;
    }
    api_error e = {0};
    json_t *r1 = request_str(op, b1.s, models, &e);
    CHECK(r1 != NULL, "%s: v1 failed: %s", what, e.message);
    static const char *const v1_names[3] = {"output", "weights", "indices"};
    static const char *const v2_names[3] = {"output", "weights", "weights_indices"};
    for (int mode = 0; mode < 2 && r1; mode++) {
        sb b2 = {0};
        size_t hl = pair_v2(&b2, in, n, v2_params, mode == 0);
        api_limits lim = api_limits_default();
        v2_answer a;
        bool ok = v2_request(b2.s, b2.n, hl, model, NULL, models, &lim, &e, &a);
        CHECK(ok, "%s (%s): v2 failed: %s", what, mode ? "JSON" : "binary", e.message);
        for (int o = 0; ok && o < 3; o++) {
            const json_t *t1 = json_object_get(r1, v1_names[o]);
            if (o == 1 && json_object_get(t1, "values"))
                t1 = json_object_get(t1, "values");
            if (o == 2)
                t1 = json_object_get(json_object_get(r1, "weights"), "indices");
            size_t cap = 1 << 20;
            float *x1 = malloc(cap * sizeof *x1), *x2 = malloc(cap * sizeof *x2);
            size_t n1 = t1 ? flatten(t1, x1, cap) : SIZE_MAX;
            if (o == 2 && n1 != SIZE_MAX) /* int32 bits read as floats: back to values */
                for (size_t k = 0; k < n1; k++) {
                    int32_t v;
                    memcpy(&v, &x1[k], 4);
                    x1[k] = (float)v;
                }
            bool bin = false;
            size_t n2 = v2_output(&a, v2_names[o], x2, cap, &bin), at = 0;
            bool wanted = o == 0 || (o == 1 && strstr(v1_extra, "need_weights")) ||
                          (o == 2 && strstr(v1_extra, "top_k"));
            CHECK(n1 == n2 && (n1 != SIZE_MAX) == wanted,
                  "%s (%s): %s has %zu values in v1, %zu in v2", what, mode ? "JSON" : "binary",
                  v2_names[o], n1, n2);
            CHECK(n2 == SIZE_MAX || bin == (mode == 0), "%s: %s binary %d in mode %d", what,
                  v2_names[o], bin, mode);
            if (n1 == n2 && n1 != SIZE_MAX)
                CHECK(same_bits(x1, x2, n1, &at), "%s (%s): %s[%zu] is %.9g in v1, %.9g in v2",
                      what, mode ? "JSON" : "binary", v2_names[o], at, (double)x1[at],
                      (double)x2[at]);
            free(x1);
            free(x2);
        }
        v2_answer_free(&a);
        free(b2.s);
    }
    json_decref(r1);
    free(b1.s);
}

static void test_v2(void) {
    api_registry *models = builtin_registry();
    size_t n = run_v2_cases(models);
    CHECK(n >= 60, "only %zu v2 request cases found", n);
    printf("v2 request cases: %zu\n", n);

    /* v1 and v2 answer the same job with the same bits. */
    enum { N = 2, L = 5, S = 3, E = 64, H = 4 };
    float *q = frand_new(N * L * E), *kv = frand_new(N * S * E), *lq = frand_new(6 * 256);
    float *bias = frand_new(L * L);
    for (size_t i = 0; i < L; i++)
        for (size_t j = i + 1; j < L; j++)
            bias[i * L + j] = -INFINITY;
    int32_t kl[N] = {2, 5}, km[N * L] = {1, 0, 1, 1, 0, 1, 1, 1, 1, 1};
    uint8_t am[N * H * L * L];
    for (size_t i = 0; i < sizeof am; i++)
        am[i] = (uint8_t)(rnd64() % 4 != 0);
    pair_in qin = {"query", "query", APIP_DT_FP32, 3, {N, L, E}, .f = q};
    pair_in q2in = {"query", "query", APIP_DT_FP32, 2, {L, E}, .f = q};
    pair_in kin = {"key", "key", APIP_DT_FP32, 3, {N, S, E}, .f = kv};
    pair_in vin = {"value", "value", APIP_DT_FP32, 3, {N, S, E}, .f = kv};
    pair_in klin = {"key_lengths", "key_lengths", APIP_DT_INT32, 1, {N}, .i = kl};
    pair_in kmin = {"key_mask", "key_mask", APIP_DT_INT32, 2, {N, L}, .i = km};
    pair_in amin = {"attn_mask", "attn_mask", APIP_DT_BOOL, 4, {N, H, L, L}, .b = am};
    pair_in abin = {"attn_bias", "attn_bias", APIP_DT_FP32, 2, {L, L}, .f = bias};
    pair_in lin = {"query", "query", APIP_DT_FP32, 3, {1, 6, 256}, .f = lq};

    pair_check("self", "demo", (pair_in[]){qin}, 1, "", "", models);
    pair_check("causal per-head", "demo", (pair_in[]){qin}, 1,
               ",\"causal\":true,\"need_weights\":\"per_head\"",
               "\"causal\":true,\"need_weights\":\"per_head\"", models);
    pair_check("cross bottom-right mean", "demo", (pair_in[]){qin, kin, vin}, 3,
               ",\"causal\":\"bottom_right\",\"need_weights\":\"mean\"",
               "\"causal\":\"bottom_right\",\"need_weights\":\"mean\"", models);
    pair_check("key lengths and mask", "demo", (pair_in[]){qin, klin, kmin}, 3,
               ",\"need_weights\":\"per_head\"", "\"need_weights\":\"per_head\"", models);
    pair_check("attn mask and bias", "demo", (pair_in[]){qin, amin, abin}, 3,
               ",\"need_weights\":\"per_head\"", "\"need_weights\":\"per_head\"", models);
    pair_check("heads and top-k", "demo", (pair_in[]){qin}, 1,
               ",\"need_weights\":\"per_head\",\"heads\":[3,1],\"weights_top_k\":2",
               "\"need_weights\":\"per_head\",\"heads\":\"3,1\",\"weights_top_k\":2", models);
    pair_check("rank 2, mean top-k", "demo", (pair_in[]){q2in}, 1,
               ",\"need_weights\":\"mean\",\"weights_top_k\":3",
               "\"need_weights\":\"mean\",\"weights_top_k\":3", models);
    pair_check("lesson", "lesson", (pair_in[]){lin}, 1, ",\"need_weights\":\"per_head\"",
               "\"need_weights\":\"per_head\"", models);

    float *sq = frand_new(2 * 3 * 4 * 8), *sk = frand_new(2 * 3 * 6 * 8),
          *sv = frand_new(2 * 3 * 6 * 5);
    int32_t skm[2 * 6] = {1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 0, 1};
    pair_in sdpa[4] = {{"q", "q", APIP_DT_FP32, 4, {2, 3, 4, 8}, .f = sq},
                       {"k", "k", APIP_DT_FP32, 4, {2, 3, 6, 8}, .f = sk},
                       {"v", "v", APIP_DT_FP32, 4, {2, 3, 6, 5}, .f = sv},
                       {"key_mask", "key_mask", APIP_DT_INT32, 2, {2, 6}, .i = skm}};
    pair_check("sdpa", "sdpa", sdpa, 4,
               ",\"scale\":0.3,\"causal\":\"bottom_right\",\"need_weights\":true",
               "\"scale\":0.3,\"causal\":\"bottom_right\",\"need_weights\":\"per_head\"", models);
    pair_check("sdpa top-k", "sdpa", sdpa, 3, ",\"need_weights\":true,\"weights_top_k\":2",
               "\"need_weights\":true,\"weights_top_k\":2", models);

    /* The name sdpa is the protocol's: no registry model takes it. */
    api_error e = {0};
    api_registry *r = api_registry_create();
    CHECK(api_registry_add(r, api_model_init_identity("sdpa", 4, 1, &e), &e) != 0 &&
              e.status == 400 && strstr(e.message, "reserved") && api_registry_count(r) == 0,
          "a model named sdpa: %d %s", e.status, e.message);
    api_registry_destroy(r);

    /* Metadata: every model and sdpa; unknown names and versions are 404. */
    api_buf b = {0};
    CHECK(api_v2_model_json(models, "lesson", "1", &b, &e) == 0, "lesson metadata: %s", e.message);
    json_t *j = json_loadb(b.data, b.len, 0, NULL);
    json_t *in0 = json_array_get(json_object_get(j, "inputs"), 0);
    CHECK(j && !strcmp(json_string_value(json_object_get(in0, "name")), "query") &&
              json_integer_value(json_array_get(json_object_get(in0, "shape"), 2)) == 256 &&
              json_array_size(json_object_get(j, "outputs")) == 3,
          "lesson metadata: %.*s", (int)b.len, b.data);
    json_decref(j);
    api_buf_reset(&b);
    e = (api_error){0};
    CHECK(api_v2_model_json(models, "sdpa", NULL, &b, &e) == 0 && memmem(b.data, b.len, "\"q\"", 3),
          "sdpa metadata");
    e = (api_error){0};
    CHECK(api_v2_model_check(models, "nope", NULL, &e) != 0 && e.status == 404, "unknown model");
    e = (api_error){0};
    CHECK(api_v2_model_check(models, "demo", "2", &e) != 0 && e.status == 404, "version 2");
    api_buf_reset(&b);
    api_v2_index_json(models, &b);
    j = json_loadb(b.data, b.len, 0, NULL);
    CHECK(json_array_size(j) == 3 &&
              !strcmp(json_string_value(json_object_get(json_array_get(j, 2), "name")), "sdpa"),
          "repository index: %.*s", (int)b.len, b.data);
    json_decref(j);
    api_buf_free(&b);
    free(q);
    free(kv);
    free(lq);
    free(bias);
    free(sq);
    free(sk);
    free(sv);
    api_registry_destroy(models);
}

int main(int argc, char **argv) {
    if (argc > 1)
        cases_dir = argv[1];
    test_float_write();
    test_float_read();
    test_rows_read();
    test_rows_check();
    test_rows_count();
    test_base64();
    test_base64_impls();
    test_base64_finite();
    test_json();
    test_errors_and_buffers();
    test_registry();
    test_model_names();
    test_request_cases();
    test_seed_example();
    test_bitwise_cross();
    test_bitwise_self();
    test_init_models();
    test_init_cache();
    test_weights_views();
    test_fully_masked();
    test_limits();
    test_safetensors();
    test_batches();
    test_lesson();
    test_declared_shapes();
    test_job_flops();
    test_response_limit();
    test_response_bound();
    test_response_bound_words();
    test_sdpa_key_masks();
    test_integer_rule();
    test_mem_cache();
    test_mem_jobs();
    test_v2();
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
