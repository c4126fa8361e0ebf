/* job.c - the job (api/job/job.c) and the job memory cache (api/base/mem.c): jobs batched
 * against the same jobs run alone, a failing job inside a batch, the cache's reuse, bound and
 * trimming, and jobs whose arena, response and batch workspace come from it. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "job.h"
#include "api_test.h"

/* ---- Batches -------------------------------------------------------------------------------- */

void test_batches(void) {
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

/* ---- Job memory ----------------------------------------------------------------------------- */

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The job memory cache alone: capacities, reuse, the bound, trimming, destroy with a block out. */
void test_mem_cache(void) {
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

/* The job memory budget: bounded blocks of every size count in it at their capacity and are
 * refused past it (with over set), unbounded ones never are; freeing gives the room back; a
 * block freed after the cache was destroyed (small ones included) is still handled. */
void test_mem_budget(void) {
    const size_t MiB = (size_t)1 << 20, KiB = 1024;
    api_mem *m = api_mem_create(SIZE_MAX, 0, NULL);
    api_mem_set_budget(m, 3 * MiB);
    bool over = true;
    size_t cap = 0;
    char *a = api_mem_alloc_bounded(m, 2 * MiB, 2 * MiB, &cap, &over);
    api_mem_stats st = api_mem_stats_get(m);
    CHECK(a && !over && cap == 2 * MiB && st.charged_bytes == 2 * MiB && st.budget_bytes == 3 * MiB,
          "a bounded 2 MiB block: %p, over %d, charged %zu", (void *)a, over, st.charged_bytes);
    char *small = api_mem_alloc_bounded(m, 100 * KiB, 100 * KiB, NULL, &over);
    st = api_mem_stats_get(m);
    CHECK(small && !over && st.charged_bytes == 2 * MiB + 100 * KiB,
          "a small bounded block counts too: charged %zu", st.charged_bytes);
    char *b = api_mem_alloc_bounded(m, MiB, MiB, NULL, &over);
    st = api_mem_stats_get(m);
    CHECK(!b && over && st.refused == 1 && st.charged_bytes == 2 * MiB + 100 * KiB,
          "past the budget: refused (%p, over %d, refused %llu)", (void *)b, over,
          (unsigned long long)st.refused);
    char *tiny = api_mem_alloc_bounded(m, 1000 * KiB, 1000 * KiB, NULL, &over);
    CHECK(!tiny && over, "a small block past the budget is refused too");
    char *u = api_mem_alloc(m, 4 * MiB, 4 * MiB, NULL);
    CHECK(u != NULL, "an unbounded block is never refused for the budget");
    api_mem_free(u);
    api_mem_free(a);
    b = api_mem_alloc_bounded(m, MiB, MiB, NULL, &over);
    st = api_mem_stats_get(m);
    CHECK(b && !over && st.charged_bytes == MiB + 100 * KiB,
          "the room comes back when a block is freed: charged %zu", st.charged_bytes);
    /* a cached block reused for a bounded request counts at its capacity */
    api_mem_free(b);
    b = api_mem_alloc_bounded(m, MiB - 4096, MiB, &cap, &over);
    st = api_mem_stats_get(m);
    CHECK(b && st.charged_bytes == cap + 100 * KiB && st.hits >= 1,
          "a reused block counts at its capacity %zu: charged %zu", cap, st.charged_bytes);
    api_mem_destroy(m); /* two blocks still out, one small */
    api_mem_free(b);
    api_mem_free(small);
    char *n = api_mem_alloc_bounded(NULL, 10, 10, &cap, &over);
    CHECK(n && !over && cap == 10, "no cache: a plain block");
    api_mem_free(n);
}

/* A reclaimer (what attnd's idle decode sessions are): a bounded block that does not fit asks it
 * for the shortfall, once, and is served when it frees enough; refused (and counted once) when
 * it frees nothing; never asked while the block fits. */
typedef struct reclaimer {
    char *held[4]; /* blocks it may give back */
    size_t calls, asked;
} reclaimer;

static size_t give_back(void *ctx, size_t shortfall) {
    reclaimer *r = ctx;
    r->calls++;
    r->asked = shortfall;
    size_t freed = 0;
    for (int i = 0; i < 4 && freed < shortfall; i++)
        if (r->held[i]) {
            freed += apip_mem_capacity(r->held[i]);
            api_mem_free(r->held[i]);
            r->held[i] = NULL;
        }
    return freed;
}

void test_mem_reclaim(void) {
    const size_t MiB = (size_t)1 << 20;
    api_mem *m = api_mem_create(SIZE_MAX, 0, NULL);
    api_mem_set_budget(m, 4 * MiB);
    reclaimer r = {0};
    api_mem_set_reclaim(m, give_back, &r);
    bool over = true;
    for (int i = 0; i < 3; i++)
        r.held[i] = api_mem_alloc_bounded(m, MiB, MiB, NULL, &over);
    CHECK(r.held[2] && !over && r.calls == 0, "blocks within the budget never ask the reclaimer");
    char *a = api_mem_alloc_bounded(m, 2 * MiB, 2 * MiB, NULL, &over);
    api_mem_stats st = api_mem_stats_get(m);
    CHECK(a && !over && r.calls == 1 && r.asked == MiB && st.charged_bytes == 4 * MiB &&
              st.refused == 0 && !r.held[0] && r.held[1],
          "2 MiB past a budget with 1 MiB left: the reclaimer asked for %zu (calls %zu), the "
          "block %p, charged %zu, refused %llu",
          r.asked, r.calls, (void *)a, st.charged_bytes, (unsigned long long)st.refused);
    api_mem_free(r.held[1]);
    api_mem_free(r.held[2]);
    r.held[1] = r.held[2] = NULL;
    char *b = api_mem_alloc_bounded(m, 3 * MiB, 3 * MiB, NULL, &over);
    st = api_mem_stats_get(m);
    CHECK(!b && over && r.calls == 2 && st.refused == 1,
          "nothing left to give back: refused once (calls %zu, refused %llu)", r.calls,
          (unsigned long long)st.refused);
    api_mem_set_reclaim(m, NULL, NULL);
    api_mem_free(a);
    api_mem_destroy(m);
}

/* Jobs with a memory cache: the arena, the response buffer and the batch workspace come from it
 * and are reused; the results are those of jobs without it; the arena's capacity never passes
 * what max_job_bytes leaves beside the response. */
void test_mem_jobs(void) {
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
