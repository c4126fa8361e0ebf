/* bench_api.c - where the time of a request goes outside HTTP: parsing and validating its body
 * (api_job_parse), computing it (api_job_run) and writing the response (api_job_respond), for
 * the core benchmark's workloads W1-W5; then JSON floats alone, in ns per float read and
 * written, attnd's code beside the previous one; and what reading each body, and the float
 * rows, with jansson would cost instead. Prints one JSON object per measurement on stdout for
 * bench/run_bench.py.
 *
 * Usage: bench_api [--time SECONDS] [--only NAME] [--no-cache] [--floats-only] [--seeded-only]
 *   --only         one workload (W1-W5), and no float benchmark
 *   --no-cache     every job's memory from malloc, as before the job memory cache
 *   --seeded-only  what making a seeded input costs: ns per element (apip_uniform_fill with
 *                  a = 1) beside ns per params.init random weight (apip_init_random at E = 2048),
 *                  on one thread with the pages in memory, best of 5; usage.flops counts each as
 *                  that time over one FLOP's time at bench_attention's sgemm peak
 *
 * W1 is sent and answered as JSON numbers (the classroom case); W2-W5 as base64 tensors, the
 * fast path for large inputs. The models are registered up front, as a server loads them at
 * start, and requests name them. Each job's arena, workspace and response buffer come from a
 * job memory cache made as attnd makes it (api_mem_create, blocks unmapped after 2 s unused),
 * and each response buffer is a new one, as a server hands each away: so the figures are what
 * a server's worker spends. Times are medians over at least 5 runs, after one warm-up.
 *
 * Legend: N batch, L = S sequence length, E embedding, H heads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "../tests/float_ref.h"
#include "api.h"
#include "codec.h"
#include "models.h"
#include "attention.h"

typedef struct workload {
    const char *name;
    size_t n, l, e, h;
    const char *causal;      /* JSON value or NULL */
    const char *key_lengths; /* JSON value or NULL */
    const char *weights;     /* need_weights JSON value or NULL */
    bool base64;
} workload;

static const workload WORKLOADS[] = {
    {"W1", 1, 16, 64, 4, NULL, NULL, "\"per_head\"", false},
    {"W2", 8, 128, 256, 8, "true", NULL, NULL, true},
    {"W3", 4, 512, 768, 12, NULL, "[512, 448, 384, 320]", NULL, true},
    {"W4", 1, 4096, 512, 8, "true", NULL, NULL, true},
    {"W5", 1, 512, 768, 12, NULL, NULL, "\"per_head\"", true},
};

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Appends the query (N, L, E) of workload w, uniform in [-1, 1), as JSON or base64. */
static void append_query(api_buf *b, const workload *w) {
    size_t count = w->n * w->l * w->e;
    float *x = malloc(count * sizeof *x);
    if (!x) {
        b->failed = true;
        return;
    }
    uint64_t s = 12345;
    for (size_t i = 0; i < count; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((double)(s >> 40) / 8388608.0 - 1.0);
    }
    if (w->base64) {
        char head[128];
        int len = snprintf(head, sizeof head,
                           "{\"dtype\": \"float32\", \"shape\": [%zu, %zu, %zu], \"data\": \"",
                           w->n, w->l, w->e);
        api_buf_append(b, head, (size_t)len);
        size_t enc = api_base64_encoded_len(count * sizeof *x);
        char *t = malloc(enc);
        if (t) {
            api_base64_encode(t, (const uint8_t *)x, count * sizeof *x);
            api_buf_append(b, t, enc);
        } else {
            b->failed = true;
        }
        free(t);
        api_buf_append(b, "\"}", 2);
    } else {
        char num[40];
        size_t i = 0;
        api_buf_append(b, "[", 1);
        for (size_t n = 0; n < w->n; n++) {
            api_buf_append(b, n ? ",[" : "[", n ? 2 : 1);
            for (size_t l = 0; l < w->l; l++) {
                api_buf_append(b, l ? ",[" : "[", l ? 2 : 1);
                for (size_t e = 0; e < w->e; e++, i++) {
                    if (e)
                        api_buf_append(b, ",", 1);
                    api_buf_append(b, num, api_float_write(num, x[i]));
                }
                api_buf_append(b, "]", 1);
            }
            api_buf_append(b, "]", 1);
        }
        api_buf_append(b, "]", 1);
    }
    free(x);
}

static void append_str(api_buf *b, const char *s) {
    api_buf_append(b, s, strlen(s));
}

/* ---- jansson, the library attnd does not use to read requests ---------------------------
 *
 * What reading the same body with jansson would cost a server: json_loadb (the tree), then the
 * query's numbers into float32 (JSON arrays) or its base64 text found (not decoded: attnd's
 * own decoder would still have to run). A lower bound, then: none of attnd's checks, no other
 * field read. */

/* Writes the numbers of nested arrays j into out in order; returns false on anything else. */
static bool jn_flatten(const json_t *j, float *out, size_t cap, size_t *k) {
    if (json_is_number(j)) {
        if (*k >= cap)
            return false;
        out[(*k)++] = (float)json_number_value(j);
        return true;
    }
    if (!json_is_array(j))
        return false;
    for (size_t i = 0; i < json_array_size(j); i++)
        if (!jn_flatten(json_array_get(j, i), out, cap, k))
            return false;
    return true;
}

/* Milliseconds to load body with jansson and take out its query (median of at least 3 runs,
 * for about target_s); -1 when jansson fails. */
static double jansson_ms(const api_buf *body, const workload *w, double target_s) {
    size_t count = w->n * w->l * w->e;
    float *x = malloc(count * sizeof *x);
    if (!x)
        return -1;
    enum { MAX_J = 200 };
    double t[MAX_J];
    size_t reps = 0;
    double start = now_ms();
    while (reps < MAX_J && (reps < 3 || now_ms() - start < target_s * 1e3)) {
        double t0 = now_ms();
        json_error_t jerr;
        json_t *root = json_loadb(body->data, body->len, 0, &jerr);
        json_t *q = json_object_get(root, "query");
        size_t k = 0;
        bool ok = w->base64 ? json_string_length(json_object_get(q, "data")) > 0
                            : jn_flatten(q, x, count, &k) && k == count;
        json_decref(root);
        double t1 = now_ms();
        if (!ok) {
            fprintf(stderr, "bench_api: jansson could not read %s\n", w->name);
            free(x);
            return -1;
        }
        t[reps++] = t1 - t0;
    }
    free(x);
    return median(t, reps);
}

static int run(const workload *w, const api_registry *models, attn_pool *pool, api_mem *mem,
               double target_s) {
    api_buf body = {0}, resp = {0};
    append_str(&body, "{\"model\": \"");
    append_str(&body, w->name);
    append_str(&body, "\", \"query\": ");
    append_query(&body, w);
    if (w->causal) {
        append_str(&body, ", \"causal\": ");
        append_str(&body, w->causal);
    }
    if (w->key_lengths) {
        append_str(&body, ", \"key_lengths\": ");
        append_str(&body, w->key_lengths);
    }
    if (w->weights) {
        append_str(&body, ", \"need_weights\": ");
        append_str(&body, w->weights);
    }
    append_str(&body, w->base64 ? ", \"encoding\": \"base64\"}" : "}");
    if (body.failed) {
        fprintf(stderr, "bench_api: out of memory building %s\n", w->name);
        return -1;
    }

    api_limits lim = api_limits_default();
    lim.max_job_bytes = (size_t)4 << 30;
    lim.nslots = attn_pool_slots(pool);
    lim.mem = mem;
    enum { MAX_REPS = 2000 };
    static double tp[MAX_REPS], tc[MAX_REPS], te[MAX_REPS];
    size_t reps = 0;
    api_mem_stats st0 = api_mem_stats_get(mem);
    double start = now_ms();
    int rc = 0;
    /* Run 0 is a warm-up; then at least 5 timed runs, for about target_s seconds. */
    for (size_t run_i = 0; run_i <= MAX_REPS && (reps < 5 || now_ms() - start < target_s * 1e3);
         run_i++) {
        api_error err = {0};
        double t0 = now_ms();
        api_job *job = api_job_parse(API_OP_ATTENTION, body.data, body.len, models, &lim, &err);
        double t1 = now_ms();
        if (!job || api_job_run(job, pool, &err) != 0) {
            fprintf(stderr, "bench_api: %s: %d %s: %s\n", w->name, err.status, err.code,
                    err.message);
            api_job_destroy(job);
            rc = -1;
            break;
        }
        double t2 = now_ms();
        api_buf_free(&resp); /* a server hands each response away: a new buffer per job */
        if (api_job_respond(job, 0.0, t2 - t1, &resp, &err) != 0) {
            fprintf(stderr, "bench_api: %s: respond: %s\n", w->name, err.message);
            api_job_destroy(job);
            rc = -1;
            break;
        }
        double t3 = now_ms();
        api_job_destroy(job);
        if (run_i == 0)
            continue;
        tp[reps] = t1 - t0;
        tc[reps] = t2 - t1;
        te[reps] = t3 - t2;
        reps++;
    }
    if (rc == 0) {
        size_t n = reps;
        double p = median(tp, n), c = median(tc, n), e = median(te, n);
        api_mem_stats st1 = api_mem_stats_get(mem);
        /* After the timed runs, so that jansson's allocations do not disturb them. */
        double j = jansson_ms(&body, w, target_s);
        printf("{\"type\":\"io\",\"name\":\"%s\",\"encoding\":\"%s\",\"request_bytes\":%zu,"
               "\"response_bytes\":%zu,\"reps\":%zu,\"parse_ms\":%.4f,\"compute_ms\":%.4f,"
               "\"encode_ms\":%.4f,\"io_over_compute\":%.4f,\"cache\":%s,\"cache_hits\":%llu,"
               "\"cache_misses\":%llu,\"jansson_ms\":%.4f}\n",
               w->name, w->base64 ? "base64" : "json", body.len, resp.len, n, p, c, e, (p + e) / c,
               mem ? "true" : "false", (unsigned long long)(st1.hits - st0.hits),
               (unsigned long long)(st1.misses - st0.misses), j);
        fflush(stdout);
    }
    api_buf_free(&body);
    api_buf_free(&resp);
    return rc;
}

/* ---- JSON floats ---------------------------------------------------------------------------
 *
 * Distinct values, a million of each kind, so that the branch predictor cannot learn them (a
 * request repeated in a loop lets it learn a few thousand: W1's floats write about twice as
 * fast that way, old writer included). Written by apip_floats_write and by the previous writer
 * (tests/float_ref.c); read by apip_jv_float_row and by the previous conversion, a loop of
 * (float)apip_jv_number (the previous tensor reader called it per element, with more around).
 * Runs alternate, 7 each; medians. */

enum { FLOATS_N = 1 << 20, FLOATS_RUNS = 7 };

static uint64_t fl_state = 0x9E3779B97F4A7C15u;

static double fl_uniform(void) { /* [0, 1) */
    fl_state ^= fl_state << 13;
    fl_state ^= fl_state >> 7;
    fl_state ^= fl_state << 17;
    return (double)(fl_state >> 11) / 9007199254740992.0;
}

/* kind 0: attention outputs, a sum of four uniforms around 0 (scale 0.25); kind 1: attention
 * weights, softmax rows of 64 logits uniform in [-4, 4). */
static void fl_fill(float *v, size_t n, int kind) {
    for (size_t i = 0; i < n; i += 64) {
        double sum = 0.0, e[64];
        for (size_t j = 0; j < 64 && i + j < n; j++) {
            if (kind == 0) {
                double a = fl_uniform() + fl_uniform() + fl_uniform() + fl_uniform() - 2.0;
                v[i + j] = (float)(a * 0.25);
            } else {
                e[j] = exp(8.0 * fl_uniform() - 4.0);
                sum += e[j];
            }
        }
        for (size_t j = 0; kind == 1 && j < 64 && i + j < n; j++)
            v[i + j] = (float)(e[j] / sum);
    }
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void print_floats(const char *op, const char *data, double new_ns, double old_ns,
                         bool same) {
    printf("{\"type\":\"floats\",\"op\":\"%s\",\"data\":\"%s\",\"n\":%d,\"runs\":%d,"
           "\"new_ns\":%.2f,\"old_ns\":%.2f,\"same\":%s}\n",
           op, data, FLOATS_N, FLOATS_RUNS, new_ns, old_ns, same ? "true" : "false");
    fflush(stdout);
}

/* The previous reading of a row: (float)apip_jv_number per number. */
static size_t old_row(const char *p, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++) {
        dst[i] = (float)apip_jv_number(p, &p);
        p++; /* the comma */
    }
    return n;
}

static int bench_floats(void) {
    float *v = malloc(FLOATS_N * sizeof *v), *got = malloc(FLOATS_N * sizeof *got),
          *want = malloc(FLOATS_N * sizeof *want);
    size_t cap = (size_t)FLOATS_N * 24 + 64;
    char *a = malloc(cap), *b = malloc(cap);
    if (!v || !got || !want || !a || !b) {
        fprintf(stderr, "bench_api: out of memory for the float benchmark\n");
        return -1;
    }
    static const char *const kinds[3] = {"attention outputs", "attention weights",
                                         "17-digit doubles"};
    for (int kind = 0; kind < 3; kind++) {
        double tn[FLOATS_RUNS], to[FLOATS_RUNS];
        fl_fill(v, FLOATS_N, kind == 2 ? 0 : kind);
        bool same = true;
        if (kind < 2) {
            for (int r = 0; r < FLOATS_RUNS; r++) {
                double t0 = now_ns();
                char *ea = apip_floats_write(a, v, FLOATS_N);
                double t1 = now_ns();
                char *eb = ref_floats_write(b, v, FLOATS_N);
                double t2 = now_ns();
                tn[r] = (t1 - t0) / FLOATS_N;
                to[r] = (t2 - t1) / FLOATS_N;
                same = same && ea - a == eb - b && !memcmp(a, b, (size_t)(ea - a));
                *ea = ']';
            }
            print_floats("write", kinds[kind], median(tn, FLOATS_RUNS), median(to, FLOATS_RUNS),
                         same);
        } else { /* what Python's and JavaScript's JSON writers send for doubles */
            char *o = a;
            for (size_t i = 0; i < FLOATS_N; i++)
                o += sprintf(o, "%.17g,", (double)v[i] + (fl_uniform() - 0.5) * 1e-9);
            o[-1] = ']';
        }
        for (int r = 0; r < FLOATS_RUNS; r++) {
            const char *end = NULL;
            double t0 = now_ns();
            size_t n1 = apip_jv_float_row(a, a + strlen(a), got, FLOATS_N, &end);
            double t1 = now_ns();
            size_t n2 = old_row(a, want, FLOATS_N);
            double t2 = now_ns();
            tn[r] = (t1 - t0) / FLOATS_N;
            to[r] = (t2 - t1) / FLOATS_N;
            same = same && n1 == n2 && !memcmp(got, want, n1 * sizeof *got);
        }
        print_floats("read", kinds[kind], median(tn, FLOATS_RUNS), median(to, FLOATS_RUNS), same);
        /* The row as a request body {"x":[...]}, checked (apip_json_check) and read, against the
         * code before api/codec/rows.c: the check byte by byte and the row number by number (the
         * last of apip_rows_impls). */
        size_t nimpl = 0, rl = (size_t)(strchr(a, ']') - a) + 1, bl = rl + 7;
        const apip_rows_impl *before = &apip_rows_impls(&nimpl)[nimpl - 1];
        memcpy(b, "{\"x\":[", 6);
        memcpy(b + 6, a, rl);
        b[bl - 1] = '}';
        double cn[FLOATS_RUNS], co[FLOATS_RUNS];
        for (int r = 0; r < FLOATS_RUNS; r++) {
            apip_json_root root;
            api_error err = {0};
            const char *end = NULL;
            double t0 = now_ns();
            int c1 = apip_json_check(b, bl, "x", &root, &err);
            double t1 = now_ns();
            size_t n1 = apip_jv_float_row(b + 6, b + bl, got, FLOATS_N, &end);
            double t2 = now_ns();
            int c2 = apip_json_check_with(b, bl, "x", 0, NULL, &root, &err);
            double t3 = now_ns();
            size_t n2 = before->read(b + 6, b + bl, want, FLOATS_N, &end);
            double t4 = now_ns();
            cn[r] = (t1 - t0) / FLOATS_N, co[r] = (t3 - t2) / FLOATS_N;
            tn[r] = (t2 - t0) / FLOATS_N, to[r] = (t4 - t2) / FLOATS_N;
            same = same && c1 == 0 && c2 == 0 && n1 == n2 && !memcmp(got, want, n1 * sizeof *got);
        }
        print_floats("check", kinds[kind], median(cn, FLOATS_RUNS), median(co, FLOATS_RUNS), same);
        print_floats("check+read", kinds[kind], median(tn, FLOATS_RUNS), median(to, FLOATS_RUNS),
                     same);
        /* The same body read with jansson: the tree, then its numbers into float32. */
        double tj[FLOATS_RUNS];
        size_t differ = 0;
        for (int r = 0; r < FLOATS_RUNS; r++) {
            json_error_t jerr;
            size_t k = 0;
            double t0 = now_ns();
            json_t *root = json_loadb(b, bl, 0, &jerr);
            bool ok = jn_flatten(json_object_get(root, "x"), want, FLOATS_N, &k);
            json_decref(root);
            double t1 = now_ns();
            if (!ok || k != FLOATS_N) {
                fprintf(stderr, "bench_api: jansson could not read the %s\n", kinds[kind]);
                free(v), free(got), free(want), free(a), free(b);
                return -1;
            }
            tj[r] = (t1 - t0) / FLOATS_N;
        }
        for (size_t i = 0; i < FLOATS_N; i++)
            differ += got[i] != want[i];
        printf("{\"type\":\"jansson_floats\",\"data\":\"%s\",\"n\":%d,\"runs\":%d,"
               "\"jansson_ns\":%.2f,\"attnd_ns\":%.2f,\"differ\":%zu}\n",
               kinds[kind], FLOATS_N, FLOATS_RUNS, median(tj, FLOATS_RUNS), median(tn, FLOATS_RUNS),
               differ);
        fflush(stdout);
    }
    free(v), free(got), free(want), free(a), free(b);
    return 0;
}

/* ---- Seeded inputs ----------------------------------------------------------------------------
 */

/* Prints {"type": "seeded", ...}: the best of 5 of ns per seeded element and per params.init
 * random weight, 4 E^2 = 16.8 M of each at E = 2048 (RESULTS.md's compute bound measured the
 * weights so), each pass into the same pages. */
static int bench_seeded(void) {
    const size_t e = 2048, n = 4 * e * e;
    float *w = malloc(n * sizeof *w);
    if (!w)
        return 1;
    memset(w, 0, n * sizeof *w); /* fault the pages in */
    double best_seeded = INFINITY, best_random = INFINITY;
    uint64_t sink = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = now_ns();
        sink += apip_uniform_fill(w, n, 1.0, (uint64_t)r);
        double t1 = now_ns();
        apip_init_random(w, w + 3 * e * e, e, (uint64_t)r);
        double t2 = now_ns();
        best_seeded = fmin(best_seeded, (t1 - t0) / (double)n);
        best_random = fmin(best_random, (t2 - t1) / (double)n);
    }
    printf("{\"type\":\"seeded\",\"elements\":%zu,\"ns_per_seeded_element\":%.4f,"
           "\"ns_per_random_weight\":%.4f,\"ratio\":%.4f,\"check\":%g}\n",
           n, best_seeded, best_random, best_seeded / best_random,
           (double)(sink & 1) + (double)w[n - 1]);
    free(w);
    return 0;
}

int main(int argc, char **argv) {
    attn_blas_info info;
    attn_error aerr = {0};
    if (attn_blas_setup(argv, &info, &aerr) != ATTN_OK) {
        fprintf(stderr, "bench_api: %s\n", aerr.msg);
        return 1;
    }
    double target = 1.0;
    const char *only = NULL;
    bool cache = true, floats = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--time") && i + 1 < argc) {
            target = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--floats-only")) {
            return bench_floats() ? 1 : 0;
        } else if (!strcmp(argv[i], "--seeded-only")) {
            return bench_seeded();
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
            floats = false;
        } else if (!strcmp(argv[i], "--no-cache")) {
            cache = false;
        } else {
            fprintf(stderr, "usage: bench_api [--time SECONDS] [--only NAME] [--no-cache] "
                            "[--floats-only] [--seeded-only]\n");
            return 2;
        }
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    attn_pool *pool = attn_pool_create(cores > 1 ? (size_t)cores - 1 : 0, &aerr);
    api_registry *models = api_registry_create();
    /* As attnd makes it (server/main.c): blocks cached for reuse, unmapped after 2 s unused. */
    api_mem *mem = cache ? api_mem_create(SIZE_MAX, 2.0, NULL) : NULL;
    int status = 1;
    if (!pool || !models || (cache && !mem)) {
        fprintf(stderr, "bench_api: cannot create the pool, the registry or the memory cache\n");
        goto out;
    }
    for (size_t i = 0; i < sizeof WORKLOADS / sizeof WORKLOADS[0]; i++) {
        api_error err = {0};
        const workload *w = &WORKLOADS[i];
        if (api_registry_add(models, api_model_init_random(w->name, w->e, w->h, 7, &err), &err)) {
            fprintf(stderr, "bench_api: model %s: %s\n", w->name, err.message);
            goto out;
        }
    }
    bool found = !only;
    for (size_t i = 0; i < sizeof WORKLOADS / sizeof WORKLOADS[0]; i++) {
        if (only && strcmp(only, WORKLOADS[i].name) != 0)
            continue;
        found = true;
        fprintf(stderr, "bench_api: %s\n", WORKLOADS[i].name);
        if (run(&WORKLOADS[i], models, pool, mem, target) != 0)
            goto out;
    }
    if (!found) {
        fprintf(stderr, "bench_api: no workload is called %s\n", only);
        goto out;
    }
    if (floats) {
        fprintf(stderr, "bench_api: JSON floats\n");
        if (bench_floats() != 0)
            goto out;
    }
    status = 0;
out:
    api_mem_destroy(mem);
    api_registry_destroy(models);
    attn_pool_destroy(pool);
    return status;
}
