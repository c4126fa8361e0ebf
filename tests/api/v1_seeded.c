/* v1_seeded.c - API v1's seeded input tensors ({"init": "uniform", "seed", "shape"}): each answers
 * bit for bit what the same tensor sent as data answers, the data made here from the documented
 * formula (not with api/'s code), on both endpoints, several shapes and seeds, batch_first false
 * and batches; they are counted in usage.flops at APIP_SEEDED_FLOP per element; and their limits
 * (max_dim, max_job_bytes, max_job_flops) are checked from the shape, in time bounded by the
 * body. Bad seeds and shapes are data cases (tests/api_cases/requests/.../seeded-*.case).
 *
 * Legend: N batch, H heads, L query length, S key length, E embedding width, D/Dv SDPA widths. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "job.h"
#include "v1.h"
#include "api_test.h"

/* The seeded tensor of seed as api/openapi.yaml documents it: element i (row-major) is
 * (x_i >> 40) * 2^-23 - 1, x_i the i-th output of splitmix64 from the state seed. */
static void documented_uniform(float *x, size_t n, uint64_t seed) {
    uint64_t state = seed;
    for (size_t i = 0; i < n; i++) {
        state += 0x9e3779b97f4a7c15u;
        uint64_t z = state;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
        z ^= z >> 31;
        x[i] = (float)(z >> 40) * 0x1p-23f - 1.0f;
    }
}

/* One input of a case: its shape (rank 0: left out of the body) and seed; seeded or sent as the
 * same values in data. */
typedef struct input {
    size_t rank, dims[4];
    uint64_t seed;
    bool data; /* sent as data in the seeded body too (a mixed body) */
} input;

typedef struct seeded_case {
    api_op op;
    input in[3];      /* query, key, value (or q, k, v) */
    const char *rest; /* the other fields, each with a leading comma */
} seeded_case;

static size_t count_of(const input *t) {
    size_t n = 1;
    for (size_t i = 0; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

/* The body of c with its inputs seeded (seeded true; inputs marked data stay data) or all as
 * data, the values documented_uniform makes; *elems gets the seeded elements. */
static char *case_body(const seeded_case *c, bool seeded, size_t *elems) {
    static const char *const names[2][3] = {{"query", "key", "value"}, {"q", "k", "v"}};
    sb b = {0};
    *elems = 0;
    sb_add(&b, "{");
    bool first = true;
    for (int i = 0; i < 3; i++) {
        const input *t = &c->in[i];
        if (!t->rank)
            continue;
        sb_add(&b, "%s\"%s\":", first ? "" : ",", names[c->op == API_OP_SDPA][i]);
        first = false;
        size_t n = count_of(t);
        if (seeded && !t->data) {
            sb_add(&b, "{\"init\":\"uniform\",\"seed\":%llu,\"shape\":[",
                   (unsigned long long)t->seed);
            for (size_t d = 0; d < t->rank; d++)
                sb_add(&b, "%s%zu", d ? "," : "", t->dims[d]);
            sb_add(&b, "]}");
            *elems += n;
            continue;
        }
        float *x = malloc(n * sizeof *x);
        documented_uniform(x, n, t->seed);
        sb_tensor_b64(&b, x, t->dims, t->rank);
        free(x);
    }
    sb_add(&b, "%s}", c->rest);
    return b.s;
}

#define MAXSEED 9007199254740991ull /* 2^53 - 1 */

static const seeded_case cases[] = {
    /* SDPA: (L, D), (H, L, D), (N, H, L, D); weights; seeds from 0 to 2^53 - 1. */
    {API_OP_SDPA,
     {{2, {3, 4}, 0, false}, {2, {5, 4}, 1, false}, {2, {5, 3}, 2, false}},
     ",\"need_weights\":true,\"encoding\":\"base64\""},
    {API_OP_SDPA,
     {{3, {2, 7, 16}, 12345, false}, {3, {2, 9, 16}, MAXSEED, false}, {3, {2, 9, 5}, 7, false}},
     ",\"need_weights\":true,\"causal\":true,\"encoding\":\"base64\""},
    {API_OP_SDPA,
     {{4, {2, 3, 17, 8}, 42, false}, {4, {2, 3, 33, 8}, 43, false}, {4, {2, 3, 33, 8}, 42, false}},
     ",\"need_weights\":true,\"weights_top_k\":4,\"encoding\":\"base64\""},
    /* JSON floats, and a mixed body: k as data. */
    {API_OP_SDPA,
     {{2, {6, 32}, 99, false}, {2, {6, 32}, 98, true}, {2, {6, 32}, 1ull << 40, false}},
     ",\"need_weights\":true"},
    /* Attention: params.init, the demo model, cross-attention, batch_first false. */
    {API_OP_ATTENTION,
     {{2, {5, 8}, 3, false}, {0, {0}, 0, false}, {0, {0}, 0, false}},
     ",\"params\":{\"init\":\"random\",\"seed\":9,\"num_heads\":2},\"need_weights\":\"per_head\","
     "\"encoding\":\"base64\""},
    {API_OP_ATTENTION,
     {{3, {2, 4, 64}, 11, false}, {3, {2, 6, 64}, 12, false}, {3, {2, 6, 64}, 13, true}},
     ",\"need_weights\":\"mean\",\"encoding\":\"base64\""},
    {API_OP_ATTENTION,
     {{3, {4, 3, 64}, MAXSEED - 1, false}, {3, {5, 3, 64}, 0, false}, {0, {0}, 0, false}},
     ",\"batch_first\":false,\"need_weights\":\"per_head\",\"encoding\":\"base64\""},
    {API_OP_ATTENTION,
     {{2, {9, 64}, 77, false}, {0, {0}, 0, false}, {0, {0}, 0, false}},
     ",\"causal\":true,\"need_weights\":true"},
};

/* Each case answers bit for bit what its data twin answers (output, weights and the rest of the
 * reply before usage), and usage.flops counts APIP_SEEDED_FLOP per seeded element more. */
static void seeded_against_data(api_registry *models) {
    api_limits lim = api_limits_default();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t elems = 0, none = 0;
        char *sbody = case_body(&cases[c], true, &elems),
             *dbody = case_body(&cases[c], false, &none);
        api_error es = {0}, ed = {0};
        api_job *js = api_job_parse(cases[c].op, sbody, strlen(sbody), models, &lim, &es);
        api_job *jd = api_job_parse(cases[c].op, dbody, strlen(dbody), models, &lim, &ed);
        CHECK(js && jd, "seeded case %zu: %s / %s", c, es.message, ed.message);
        if (js && jd) {
            bool mixed = cases[c].in[0].data || cases[c].in[1].data || cases[c].in[2].data;
            CHECK(mixed || strlen(sbody) < 400, "seeded case %zu: a body of %zu bytes", c,
                  strlen(sbody));
            CHECK(api_job_flops(js) - api_job_flops(jd) == (double)elems * APIP_SEEDED_FLOP &&
                      api_job_plan_flops(js) - api_job_plan_flops(jd) ==
                          (double)elems * APIP_SEEDED_FLOP,
                  "seeded case %zu: flops %.0f against %.0f for %zu seeded elements", c,
                  api_job_flops(js), api_job_flops(jd), elems);
            CHECK(api_job_run(js, NULL, &es) == 0 && api_job_run(jd, NULL, &ed) == 0,
                  "seeded case %zu runs: %s / %s", c, es.message, ed.message);
            char *as = answer_of(js), *ad = answer_of(jd);
            CHECK(
                as && ad && strcmp(as, ad) == 0,
                "seeded case %zu: the seeded answer differs from the data answer:\n%.300s\n%.300s",
                c, as ? as : "(none)", ad ? ad : "(none)");
            CHECK(as && (strstr(as, "\"weights\"") || strstr(as, "\"output\":{")),
                  "seeded case %zu: the answer has its tensors: %.100s", c, as ? as : "(none)");
            free(as);
            free(ad);
        }
        api_job_destroy(js);
        api_job_destroy(jd);
        free(sbody);
        free(dbody);
    }
}

/* Seeded attention jobs batched (api_jobs_run) answer what the same data jobs batched answer:
 * each job's inputs are made before the batch's GEMM. */
static void seeded_batches(api_registry *models) {
    api_limits lim = api_limits_default();
    enum { NJ = 3 };
    api_job *js[NJ], *jd[NJ];
    for (int i = 0; i < NJ; i++) {
        seeded_case c = {API_OP_ATTENTION,
                         {{2, {4 + (size_t)i, 64}, 100 + (uint64_t)i, false},
                          {0, {0}, 0, false},
                          {0, {0}, 0, false}},
                         ",\"need_weights\":\"per_head\",\"encoding\":\"base64\""};
        size_t elems = 0;
        char *sbody = case_body(&c, true, &elems), *dbody = case_body(&c, false, &elems);
        api_error e = {0};
        js[i] = api_job_parse(API_OP_ATTENTION, sbody, strlen(sbody), models, &lim, &e);
        jd[i] = api_job_parse(API_OP_ATTENTION, dbody, strlen(dbody), models, &lim, &e);
        CHECK(js[i] && jd[i], "batch job %d: %s", i, e.message);
        free(sbody);
        free(dbody);
    }
    if (js[0] && js[1] && js[2] && jd[0] && jd[1] && jd[2]) {
        CHECK(api_jobs_batchable(js[0], js[1]) && api_jobs_batchable(js[0], js[2]),
              "seeded jobs on one model batch");
        api_error es[NJ] = {{0}}, ed[NJ] = {{0}};
        CHECK(api_jobs_run(js, NJ, NULL, 0, es) == 0 && api_jobs_run(jd, NJ, NULL, 0, ed) == 0,
              "the batches run: %s / %s", es[0].message, ed[0].message);
        for (int i = 0; i < NJ; i++) {
            char *as = answer_of(js[i]), *ad = answer_of(jd[i]);
            CHECK(as && ad && strcmp(as, ad) == 0, "batched seeded job %d differs from data", i);
            free(as);
            free(ad);
        }
    }
    for (int i = 0; i < NJ; i++) {
        api_job_destroy(js[i]);
        api_job_destroy(jd[i]);
    }
}

static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* The limits, from the shape alone: bodies of a few hundred bytes declaring gigabytes are refused
 * at once, and a large seeded job is parsed without making its values (the job makes them when
 * it runs), in time bounded by the body. */
static void seeded_limits(void) {
    api_limits lim = api_limits_default();
    api_error e = {0};
    /* Over max_dim: 413 naming the dimension. */
    const char *wide = "{\"q\":{\"init\":\"uniform\",\"seed\":1,\"shape\":[65537,64]},"
                       "\"k\":{\"init\":\"uniform\",\"seed\":2,\"shape\":[8,64]},"
                       "\"v\":{\"init\":\"uniform\",\"seed\":3,\"shape\":[8,64]}}";
    api_job *job = api_job_parse(API_OP_SDPA, wide, strlen(wide), NULL, &lim, &e);
    CHECK(!job && e.status == 413 && !strcmp(e.code, "job_too_large") &&
              !strcmp(e.field, "q.shape[0]") && strstr(e.message, "max_dim"),
          "a seeded dimension over max_dim: %d %s %s", e.status, e.field, e.message);
    api_job_destroy(job);
    /* Over max_job_bytes: 3 x 16 GiB declared in 230 bytes, refused within a few ms of CPU. */
    const char *huge = "{\"q\":{\"init\":\"uniform\",\"seed\":1,\"shape\":[65536,65536]},"
                       "\"k\":{\"init\":\"uniform\",\"seed\":2,\"shape\":[65536,65536]},"
                       "\"v\":{\"init\":\"uniform\",\"seed\":3,\"shape\":[65536,65536]}}";
    e = (api_error){0};
    double t0 = cpu_ms();
    job = api_job_parse(API_OP_SDPA, huge, strlen(huge), NULL, &lim, &e);
    double ms = cpu_ms() - t0;
    CHECK(!job && e.status == 413 && strstr(e.message, "max_job_bytes") && ms < 20,
          "seeded shapes over max_job_bytes: %d %s in %.2f ms", e.status, e.message, ms);
    api_job_destroy(job);
    /* Over max_job_flops only for making the values: the same job as data fits. 3 x 64 x 64
     * seeded elements at APIP_SEEDED_FLOP each, beside the plan's 2 x 2 x 64^3 FLOP. */
    const char *small = "{\"q\":{\"init\":\"uniform\",\"seed\":1,\"shape\":[64,64]},"
                        "\"k\":{\"init\":\"uniform\",\"seed\":2,\"shape\":[64,64]},"
                        "\"v\":{\"init\":\"uniform\",\"seed\":3,\"shape\":[64,64]}}";
    job = api_job_parse(API_OP_SDPA, small, strlen(small), NULL, &lim, &e);
    double plan = api_job_plan_flops(job) - 3 * 64 * 64 * APIP_SEEDED_FLOP;
    CHECK(job && plan > 0 && api_job_flops(job) == plan + 3 * 64 * 64 * APIP_SEEDED_FLOP,
          "the small seeded job parses");
    api_job_destroy(job);
    lim.max_job_flops = plan + 64 * 64 * APIP_SEEDED_FLOP; /* room for one seeded tensor */
    e = (api_error){0};
    job = api_job_parse(API_OP_SDPA, small, strlen(small), NULL, &lim, &e);
    CHECK(!job && e.status == 413 && strstr(e.message, "max_job_flops") &&
              strstr(e.message, "seeded inputs"),
          "seeded inputs over max_job_flops: %d %s", e.status, e.message);
    api_job_destroy(job);
    lim = api_limits_default();
    /* A large seeded job (3 x 64 MiB, 48 M elements) is parsed without its values being made:
     * in less than half the time making them takes (measured here on a sample, in this build:
     * under ASan, allocating the arena costs tens of ms too). They are made when it runs. */
    const size_t sample = (size_t)1 << 20, elems = (size_t)3 << 24;
    float *x = malloc(sample * sizeof *x);
    memset(x, 0, sample * sizeof *x);
    t0 = cpu_ms();
    apip_uniform_fill(x, sample, 1.0, 7);
    double make_ms = (cpu_ms() - t0) * (double)(elems / sample);
    free(x);
    const char *large = "{\"q\":{\"init\":\"uniform\",\"seed\":1,\"shape\":[16384,1024]},"
                        "\"k\":{\"init\":\"uniform\",\"seed\":2,\"shape\":[16384,1024]},"
                        "\"v\":{\"init\":\"uniform\",\"seed\":3,\"shape\":[16384,1024]}}";
    e = (api_error){0};
    t0 = cpu_ms();
    job = api_job_parse(API_OP_SDPA, large, strlen(large), NULL, &lim, &e);
    ms = cpu_ms() - t0;
    CHECK(job && ms < make_ms / 2,
          "a large seeded job parses in %.2f ms of CPU; making its values takes %.2f (%s)", ms,
          make_ms, e.message);
    api_job_destroy(job);
}

void test_seeded_inputs(void) {
    api_registry *models = demo_registry();
    seeded_against_data(models);
    seeded_batches(models);
    seeded_limits();
    api_registry_destroy(models);
}
