/* batching.c - dynamic batching: requests queued behind a slow job run as one batch, each
 * answer against its unbatched one (v1 and v2 jobs together too); the batch window; jobs run
 * inline on the HTTP thread (and not, with --inline-max-flops 0); queue places during a batch. */
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "server_test.h"

/* True when two replies agree: the same status and error code, or outputs and weights equal to
 * float32 rounding (top-k indices exactly). why gets the first difference. */
static bool replies_agree(const reply *a, const reply *b, char *why, size_t cap) {
    if (a->status != b->status) {
        snprintf(why, cap, "status %ld, unbatched %ld (%.200s)", a->status, b->status, a->body);
        return false;
    }
    json_t *ja = json_loads(a->body, 0, NULL), *jb = json_loads(b->body, 0, NULL);
    bool ok = ja && jb;
    if (!ok)
        snprintf(why, cap, "a reply is not JSON");
    if (ok && a->status != 200) {
        json_t *ca = json_object_get(json_object_get(ja, "error"), "code");
        ok = json_equal(ca, json_object_get(json_object_get(jb, "error"), "code"));
        if (!ok)
            snprintf(why, cap, "error %s, unbatched %.200s", json_string_value(ca), b->body);
    }
    for (int m = 0; ok && a->status == 200 && m < 2; m++) {
        json_t *xa = json_object_get(ja, m ? "weights" : "output");
        json_t *xb = json_object_get(jb, m ? "weights" : "output");
        if (json_object_get(xb, "indices")) {
            ok = json_equal(json_object_get(xa, "indices"), json_object_get(xb, "indices"));
            xa = json_object_get(xa, "values");
            xb = json_object_get(xb, "values");
        }
        if (!xb && !xa)
            continue;
        tens ta, tb;
        ok = ok && tens_from_json(xa, &ta) && tens_from_json(xb, &tb) && same(&ta, &tb);
        if (!ok)
            snprintf(why, cap, "%s differs from the unbatched answer", m ? "weights" : "output");
        tens_free(&ta);
        tens_free(&tb);
    }
    json_decref(ja);
    json_decref(jb);
    return ok;
}

/* Requests on one worker that are queued behind a slow job run as one batch when the worker gets
 * to them: masks, weights modes, cross-attention, base64, a job that overflows float32, another
 * model, SDPA and an invalid body, twice over. Each answer must agree with the one the same
 * request got alone, and the batch metrics must show batches (of at most tokens rows). */
void test_batching(const char *tokens, size_t slow_l) {
    attnd d;
    const char *args[] = {"--threads",
                          "1",
                          "--pool-threads",
                          "0",
                          "--batch-window-us",
                          "100000",
                          "--max-batch-tokens",
                          tokens,
                          "--max-queue",
                          "256",
                          "--inline-max-flops", /* tiny jobs queue behind the slow one */
                          "0",
                          "--share-jobs", /* each request sent twice is its own job */
                          "off",
                          SLOW_FLOPS,
                          NULL};
    char name[64];
    snprintf(name, sizeof name, "batching-%s", tokens);
    if (!attnd_start(&d, name, args, NULL))
        return;
    enum { NB = 11, COPIES = 2 };
    float *x = rnd_array(2 * 16 * 64, 1200), *kx = rnd_array(9 * 64, 1201);
    float *big = malloc(16 * 64 * sizeof *big);
    for (size_t i = 0; i < 16 * 64; i++)
        big[i] = 1e30f;
    json_t *bias = json_array();
    for (size_t i = 0; i < 16; i++) {
        json_t *row = json_array();
        for (size_t j = 0; j < 16; j++)
            json_array_append_new(row, (i + j) % 5 == 0 ? json_string("-inf")
                                                        : json_real(0.1 * (double)(j % 3)));
        json_array_append_new(bias, row);
    }
    size_t s16[2] = {16, 64};
    char *bodies[NB] = {
        dump(json_pack("{s:o}", "query", json_matrix(x, 16, 64))),
        dump(json_pack("{s:o,s:b,s:s}", "query", json_matrix(x + 64, 16, 64), "causal", 1,
                       "need_weights", "per_head")),
        dump(json_pack("{s:o,s:[i,i],s:s}", "query", json_tensor3(x, 2, 16, 64), "key_lengths", 16,
                       5, "need_weights", "mean")),
        dump(json_pack("{s:o,s:o,s:[i,i,i,i,i,i,i,i,i],s:s,s:i}", "query",
                       json_matrix(x + 128, 16, 64), "key", json_matrix(kx, 9, 64), "key_mask", 1,
                       1, 0, 1, 1, 1, 1, 0, 1, "need_weights", "per_head", "weights_top_k", 3)),
        dump(json_pack("{s:o,s:o,s:s}", "query", json_b64(x + 256, s16, 2), "attn_bias", bias,
                       "encoding", "base64")),
        dump(json_pack("{s:o,s:[i,i],s:s}", "query", json_matrix(x + 320, 16, 64), "heads", 2, 0,
                       "need_weights", "per_head")),
        dump(json_pack("{s:o}", "query", json_matrix(big, 16, 64))), /* overflows: 400 */
        dump(json_pack("{s:o,s:{s:s,s:i,s:i}}", "query", json_matrix(x, 16, 64), "params", "init",
                       "random", "seed", 9, "num_heads", 8)),
        dump(json_pack("{s:o,s:{s:s,s:i,s:i},s:b}", "query", json_matrix(x + 64, 16, 64), "params",
                       "init", "random", "seed", 9, "num_heads", 8, "causal", 1)),
        dump(json_pack("{s:o,s:o,s:o}", "q", json_matrix(x, 5, 8), "k", json_matrix(x + 40, 7, 8),
                       "v", json_matrix(x + 96, 7, 8))),
        dump(json_pack("{s:o,s:i}", "query", json_matrix(x, 16, 64), "causal", 3)), /* 400 */
    };
    const char *path[NB] = {"/v1/attention", "/v1/attention", "/v1/attention", "/v1/attention",
                            "/v1/attention", "/v1/attention", "/v1/attention", "/v1/attention",
                            "/v1/attention", "/v1/sdpa",      "/v1/attention"};
    /* Alone: one request at a time, so each job runs by itself. */
    reply alone[NB];
    for (int k = 0; k < NB; k++)
        post(NULL, d.port, path[k], bodies[k], &alone[k]);
    CHECK(alone[0].status == 200 && alone[3].status == 200 && alone[6].status == 400 &&
              alone[10].status == 400,
          "batching: unbatched answers: %ld %ld %ld %ld", alone[0].status, alone[3].status,
          alone[6].status, alone[10].status);
    double batches0 = metric(d.port, "attnd_batch_jobs_count");
    /* Together: behind a slow job, so that all are queued when the worker gets to them. */
    async_req slow = {0}, a[NB * COPIES];
    memset(a, 0, sizeof a);
    async_start(&slow, d.port, "/v1/attention", slow_body(slow_l));
    CHECK(wait_metric(d.port, "attnd_jobs_in_flight", 1, 20), "batching: the slow job never ran");
    for (int i = 0; i < NB * COPIES; i++)
        async_start(&a[i], d.port, path[i % NB], bodies[i % NB]);
    CHECK(wait_metric(d.port, "attnd_queue_depth", (NB - 1) * COPIES, 20),
          "batching: the requests were not all queued behind the slow job");
    pthread_join(slow.th, NULL);
    CHECK(slow.r.status == 200, "batching: slow job %ld", slow.r.status);
    for (int i = 0; i < NB * COPIES; i++) {
        pthread_join(a[i].th, NULL);
        char why[400] = "";
        CHECK(replies_agree(&a[i].r, &alone[i % NB], why, sizeof why),
              "batching (max %s tokens): request %d: %s", tokens, i % NB, why);
        reply_free(&a[i].r);
    }
    /* The demo model's 7 bodies (128 rows) twice, seed 9's 2, SDPA's 2: with room for all, one
     * batch of 14 jobs; with 48 rows, batches of at most 48 rows, several jobs each. */
    double n = metric(d.port, "attnd_batch_jobs_count") - batches0;
    double jobs = metric(d.port, "attnd_batch_jobs_sum");
    double le8 = metric(d.port, "attnd_batch_jobs_bucket{le=\"8\"}");
    double le1 = metric(d.port, "attnd_batch_jobs_bucket{le=\"1\"}");
    double rows_n = metric(d.port, "attnd_batch_rows_count");
    double le64 = metric(d.port, "attnd_batch_rows_bucket{le=\"64\"}");
    if (!strcmp(tokens, "4096"))
        CHECK(n <= 5 && le8 < rows_n,
              "batching: %g batches for the slow job and 20 queued jobs (%g jobs in all); one "
              "of 14 expected",
              n, jobs);
    else
        CHECK(le64 == rows_n - 1 && le1 < rows_n && n < 20, /* all but the slow job */
              "batching (max 48 rows): %g batches, %g of %g at most 64 rows, %g of one job", n,
              le64, rows_n, le1);
    for (int k = 0; k < NB; k++) {
        reply_free(&alone[k]);
        free(bodies[k]);
    }
    reply_free(&slow.r);
    free(slow.body);
    free(x), free(kx), free(big);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "batching daemon: exit status");
}

/* The batch window bounds a wait for company, and only while other jobs are in flight: with two
 * workers and a 1 s window, a job that cannot batch (inline parameter tensors) runs at once
 * beside a short slow job (about 0.25 s), and a lone demo-model job that waits for company stops
 * waiting when that job ends, well before its window has passed. */
void test_batch_wait(size_t slow_l) {
    attnd d;
    const char *args[] = {"--threads",         "2",       "--pool-threads",     "0",
                          "--batch-window-us", "1000000", "--inline-max-flops", "0",
                          SLOW_FLOPS,          NULL};
    if (!attnd_start(&d, "batch-wait", args, NULL))
        return;
    float *x = rnd_array(4 * 8, 1300), *w = rnd_array(3 * 8 * 8 + 8 * 8, 1301);
    char *inline_body = dump(json_pack(
        "{s:o,s:{s:i,s:o,s:o}}", "query", json_matrix(x, 4, 8), "params", "num_heads", 2,
        "in_proj_weight", json_matrix(w, 24, 8), "out_proj.weight", json_matrix(w + 192, 8, 8)));
    float *q = rnd_array(16 * 64, 1302);
    char *demo_body = dump(json_pack("{s:o}", "query", json_matrix(q, 16, 64)));

    /* A lone job that waits for company, beside a slow one. */
    async_req slow = {0};
    async_start(&slow, d.port, "/v1/attention", slow_body(slow_l / 2));
    CHECK(wait_metric(d.port, "attnd_jobs_in_flight", 1, 20), "batch wait: the slow job never ran");
    reply r;
    post(NULL, d.port, "/v1/attention", demo_body, &r);
    pthread_join(slow.th, NULL);
    CHECK(r.status == 200 && slow.r.status == 200 && r.secs < slow.r.secs + 0.3 && r.secs < 0.9,
          "batch wait: a lone job took %.2f s; the slow job it waited beside %.2f s (window 1 s)",
          r.secs, slow.r.secs);
    reply_free(&r);
    reply_free(&slow.r);
    free(slow.body);

    /* A job that cannot batch, beside a slow one: it does not wait at all. */
    memset(&slow, 0, sizeof slow);
    async_start(&slow, d.port, "/v1/attention", slow_body(slow_l / 2));
    CHECK(wait_metric(d.port, "attnd_jobs_in_flight", 1, 20), "batch wait: the slow job never ran");
    post(NULL, d.port, "/v1/attention", inline_body, &r);
    CHECK(r.status == 200 && r.secs < 0.5,
          "batch wait: a job that cannot batch took %.2f s beside a slow job (%ld; window 1 s)",
          r.secs, r.status);
    reply_free(&r);
    pthread_join(slow.th, NULL);
    reply_free(&slow.r);
    free(slow.body);
    free(inline_body), free(demo_body), free(x), free(w), free(q);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "batch-wait daemon: exit status");
}

/* True when two replies hold the same "output", value for value. */
static bool same_output(const reply *a, const reply *b) {
    json_t *ja = json_loads(a->body, 0, NULL), *jb = json_loads(b->body, 0, NULL);
    bool same =
        ja && jb && json_equal(json_object_get(ja, "output"), json_object_get(jb, "output"));
    json_decref(ja);
    json_decref(jb);
    return same;
}

/* Tiny jobs (--inline-max-flops, default 2 MFLOP) run on the HTTP thread that read them when no
 * job is queued: one worker busy with a slow job does not hold them up, a job above the bound
 * still waits for that worker, and a tiny job that finds the queue non-empty waits its turn.
 * params.init weights kept per thread give the answers of freshly made ones: "random" with the
 * demo model's seed answers as the demo model does, another seed differently, and the first
 * seed again as at first. */
void test_inline(size_t slow_l) {
    attnd d;
    /* One HTTP thread: every tiny job runs on it, with its one cache of params.init weights. */
    const char *args[] = {"--threads",      "1", "--pool-threads", "0", "--batch-window-us", "0",
                          "--http-threads", "1", SLOW_FLOPS,       NULL};
    if (!attnd_start(&d, "inline", args, NULL))
        return;
    float *q = rnd_array(16 * 64, 1400);
    char *demo = dump(json_pack("{s:o}", "query", json_matrix(q, 16, 64)));
    char *seeded[3];
    const int seeds[3] = {24301, 7, 24301}; /* 24301: the demo model's weights */
    for (int i = 0; i < 3; i++)
        seeded[i] = dump(json_pack("{s:o,s:{s:s,s:i,s:i}}", "query", json_matrix(q, 16, 64),
                                   "params", "init", "random", "seed", seeds[i], "num_heads", 4));
    /* Above the bound: 64 rows of E = 64 through a (3E, E) projection and more: > 2 MFLOP. */
    float *q2 = rnd_array(256 * 64, 1401);
    char *big = dump(json_pack("{s:o}", "query", json_matrix(q2, 256, 64)));

    reply ref, r[3];
    post(NULL, d.port, "/v1/attention", demo, &ref);
    for (int i = 0; i < 3; i++)
        post(NULL, d.port, "/v1/attention", seeded[i], &r[i]);
    CHECK(ref.status == 200 && r[0].status == 200 && r[1].status == 200 && r[2].status == 200,
          "inline: %ld %ld %ld %ld", ref.status, r[0].status, r[1].status, r[2].status);
    CHECK(same_output(&ref, &r[0]) && same_output(&ref, &r[2]) && !same_output(&ref, &r[1]),
          "inline: params.init seed 24301 should answer as the demo model, seed 7 otherwise "
          "(cached weights: %d %d %d)",
          same_output(&ref, &r[0]), same_output(&ref, &r[2]), !same_output(&ref, &r[1]));

    /* Beside a slow job on the only worker: the tiny job is answered while it still runs. */
    async_req slow = {0};
    async_start(&slow, d.port, "/v1/attention", slow_body(slow_l));
    CHECK(wait_metric(d.port, "attnd_jobs_in_flight", 1, 20), "inline: the slow job never ran");
    reply t;
    post(NULL, d.port, "/v1/attention", demo, &t);
    double in_flight = metric(d.port, "attnd_jobs_in_flight");
    CHECK(t.status == 200 && same_output(&ref, &t) && usage_of(&t, "queue_ms") < 50 &&
              in_flight >= 1,
          "inline: a tiny job beside a slow one: status %ld, queued %.1f ms, same answer %d, "
          "jobs in flight after it %g (the slow job should still run)",
          t.status, usage_of(&t, "queue_ms"), same_output(&ref, &t), in_flight);
    reply_free(&t);
    /* A job above the bound queues behind the slow job, and a tiny job then waits behind it. */
    async_req a = {0}, b = {0};
    async_start(&a, d.port, "/v1/attention", big);
    CHECK(wait_metric(d.port, "attnd_queue_depth", 1, 20), "inline: the large job was not queued");
    async_start(&b, d.port, "/v1/attention", demo);
    pthread_join(slow.th, NULL);
    pthread_join(a.th, NULL);
    pthread_join(b.th, NULL);
    double slow_ms = usage_of(&slow.r, "compute_ms");
    CHECK(slow.r.status == 200 && a.r.status == 200 && b.r.status == 200 &&
              same_output(&ref, &b.r) && usage_of(&a.r, "queue_ms") > 0.2 * slow_ms &&
              usage_of(&b.r, "queue_ms") > 0.2 * slow_ms,
          "inline: behind a slow job of %.0f ms, a large job queued %.1f ms and a tiny one after "
          "it %.1f ms (both should wait; statuses %ld %ld %ld)",
          slow_ms, usage_of(&a.r, "queue_ms"), usage_of(&b.r, "queue_ms"), slow.r.status,
          a.r.status, b.r.status);
    reply_free(&slow.r), reply_free(&a.r), reply_free(&b.r);
    /* Few FLOPs but a large reply (key_lengths [1] leaves the weight maps at full size): it
     * waits for the worker rather than encode 4 MB of bound on the HTTP thread. */
    float *x1 = rnd_array(3 * 512, 1402);
    char *wide = dump(json_pack("{s:o,s:o,s:o,s:[i],s:b}", "q", json_matrix(x1, 512, 1), "k",
                                json_matrix(x1 + 512, 512, 1), "v", json_matrix(x1 + 1024, 512, 1),
                                "key_lengths", 1, "need_weights", 1));
    free(slow.body);
    memset(&slow, 0, sizeof slow);
    async_start(&slow, d.port, "/v1/attention", slow_body(slow_l));
    CHECK(wait_metric(d.port, "attnd_jobs_in_flight", 1, 20), "inline: the slow job never ran");
    post(NULL, d.port, "/v1/sdpa", wide, &t);
    pthread_join(slow.th, NULL);
    slow_ms = usage_of(&slow.r, "compute_ms");
    double wide_flops = usage_of(&t, "flops");
    CHECK(t.status == 200 && slow.r.status == 200 && wide_flops < 1e5 &&
              usage_of(&t, "queue_ms") > 0.2 * slow_ms,
          "inline: a job of %g FLOP with a large reply beside a slow job of %.0f ms queued %.1f "
          "ms (it should wait for the worker; statuses %ld %ld)",
          wide_flops, slow_ms, usage_of(&t, "queue_ms"), t.status, slow.r.status);
    reply_free(&t), reply_free(&slow.r), free(wide), free(x1);
    reply_free(&ref);
    for (int i = 0; i < 3; i++)
        reply_free(&r[i]), free(seeded[i]);
    free(slow.body), free(demo), free(big), free(q), free(q2);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "inline daemon: exit status");
}

/* --inline-max-flops 0 never runs a job on its HTTP thread, even one of no FLOP (an SDPA job
 * whose key_lengths are all 0 attends no cell: usage.flops is 0): beside a slow job on the only
 * worker, it waits for that worker. */
void test_inline_off(size_t slow_l) {
    attnd d;
    const char *args[] = {"--threads",         "1", "--pool-threads",     "0",
                          "--batch-window-us", "0", "--inline-max-flops", "0",
                          SLOW_FLOPS,          NULL};
    if (!attnd_start(&d, "inline-off", args, NULL))
        return;
    float *x = rnd_array(3 * 8 + 2 * 4 * 8, 1410);
    char *none = dump(json_pack("{s:o,s:o,s:o,s:[i]}", "q", json_matrix(x, 3, 8), "k",
                                json_matrix(x + 24, 4, 8), "v", json_matrix(x + 56, 4, 8),
                                "key_lengths", 0));
    async_req slow = {0};
    async_start(&slow, d.port, "/v1/attention", slow_body(slow_l));
    CHECK(wait_metric(d.port, "attnd_jobs_in_flight", 1, 20), "inline-off: the slow job never ran");
    reply t;
    post(NULL, d.port, "/v1/sdpa", none, &t);
    pthread_join(slow.th, NULL);
    double flops = usage_of(&t, "flops");
    double slow_ms = usage_of(&slow.r, "compute_ms");
    CHECK(slow.r.status == 200 && t.status == 200 && flops == 0 &&
              usage_of(&t, "queue_ms") > 0.2 * slow_ms,
          "inline-off: a job of %g FLOP beside a slow job of %.0f ms queued %.1f ms (it should "
          "wait for the worker; statuses %ld %ld)",
          flops, slow_ms, usage_of(&t, "queue_ms"), slow.r.status, t.status);
    reply_free(&t), reply_free(&slow.r);
    free(slow.body), free(none), free(x);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "inline-off daemon: exit status");
}

/* A batch's jobs after its first keep their queue places until the batch ends, so that
 * --max-queue + --threads bounds the jobs in memory (SECURITY.md): with a queue of 3, while a
 * batch of two runs, two more jobs queue and a third gets 503 queue_full. */
void test_batch_places(size_t slow_l) {
    attnd d;
    const char *args[] = {"--threads",         "1",    "--pool-threads",     "0",
                          "--batch-window-us", "1000", "--max-batch-tokens", "65536",
                          "--max-queue",       "3",    "--inline-max-flops", "0",
                          "--share-jobs",      "off",  SLOW_FLOPS,           NULL};
    if (!attnd_start(&d, "batch-places", args, NULL))
        return;
    size_t l = slow_l / 2, shape[2] = {l, 64};
    float *x = rnd_array(l * 64, 1500);
    /* two jobs on the demo model: they batch with each other, not with the slow job */
    char *half = dump(json_pack("{s:o,s:s}", "query", json_b64(x, shape, 2), "encoding", "base64"));
    float *q = rnd_array(4 * 64, 1501);
    char *tiny = dump(json_pack("{s:o}", "query", json_matrix(q, 4, 64)));
    async_req slow = {0}, a = {0}, b = {0}, c = {0}, e = {0};
    async_start(&slow, d.port, "/v1/attention", slow_body(slow_l));
    CHECK(wait_metric(d.port, "attnd_jobs_in_flight", 1, 20),
          "batch places: the slow job never ran");
    async_start(&a, d.port, "/v1/attention", half);
    async_start(&b, d.port, "/v1/attention", half);
    CHECK(wait_metric(d.port, "attnd_queue_depth", 2, 20), "batch places: two jobs not queued");
    /* the slow job ends; the worker takes both as one batch */
    CHECK(wait_metric(d.port, "attnd_jobs_in_flight", 2, 20), "batch places: no batch of two");
    async_start(&c, d.port, "/v1/attention", tiny);
    async_start(&e, d.port, "/v1/attention", tiny);
    bool two = wait_metric(d.port, "attnd_queue_depth", 2, 20);
    double running = metric(d.port, "attnd_jobs_in_flight");
    reply f;
    post(NULL, d.port, "/v1/attention", tiny, &f);
    pthread_join(slow.th, NULL), pthread_join(a.th, NULL), pthread_join(b.th, NULL);
    pthread_join(c.th, NULL), pthread_join(e.th, NULL);
    CHECK(two && running >= 2, "batch places: two jobs should queue beside the batch (%d, %g)", two,
          running);
    CHECK(a.r.status == 200 && b.r.status == 200 && c.r.status == 200 && e.r.status == 200 &&
              f.status == 503 && f.body && strstr(f.body, "queue_full"),
          "batch places: a job beside a batch of two and two queued jobs (queue of 3) got %ld "
          "(%.80s), the others %ld %ld %ld %ld",
          f.status, f.body ? f.body : "", a.r.status, b.r.status, c.r.status, e.r.status);
    reply_free(&slow.r), reply_free(&a.r), reply_free(&b.r), reply_free(&c.r);
    reply_free(&e.r), reply_free(&f);
    free(slow.body), free(half), free(tiny), free(x), free(q);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "batch-places daemon: exit status");
}

/* v1 and v2 jobs on the same model batch together: six of each, queued behind a slow job on
 * one worker, run as one batch of twelve (more than either protocol's six), and each answer
 * agrees with the one its request got alone. */

void test_v2_batching(size_t slow_l) {
    attnd d;
    const char *args[] = {"--threads",          "1",      "--pool-threads", "0",
                          "--batch-window-us",  "100000", "--max-queue",    "64",
                          "--inline-max-flops", "0",      SLOW_FLOPS,       NULL};
    if (!attnd_start(&d, "v2-batching", args, NULL))
        return;
    enum { K = 6 };
    float *x = rnd_array(K * 8 * 64, 4200);
    static const char *const params[K] = {"{}",
                                          "{\"causal\": true, \"need_weights\": \"per_head\"}",
                                          "{\"need_weights\": \"mean\", \"weights_top_k\": 2}",
                                          "{\"causal\": \"bottom_right\"}",
                                          "{\"need_weights\": \"per_head\", \"heads\": \"1\"}",
                                          "{}"};
    static const char *const v1_extra[K] = {"{}",
                                            "{\"causal\": true, \"need_weights\": \"per_head\"}",
                                            "{\"need_weights\": \"mean\", \"weights_top_k\": 2}",
                                            "{\"causal\": \"bottom_right\"}",
                                            "{\"need_weights\": \"per_head\", \"heads\": [1]}",
                                            "{}"};
    char *b1[K], *b2[K];
    size_t len2[K], hl2[K];
    char hdr[K][80];
    req q1[K], q2[K];
    reply alone1[K], alone2[K];
    for (int k = 0; k < K; k++) {
        v2_in in = {"query", "FP32", 2, {8, 64}, x + k * 8 * 64};
        b1[k] = v1_body_for("demo", &in, 1, v1_extra[k]);
        b2[k] = v2_body(&in, 1, true, params[k], NULL, &len2[k], &hl2[k]);
        snprintf(hdr[k], sizeof hdr[k], "Inference-Header-Content-Length: %zu", hl2[k]);
        q1[k] = (req){.path = "/v1/attention", .ctype = "application/json", .body = b1[k]};
        q2[k] = (req){.path = "/v2/models/demo/infer",
                      .body = b2[k],
                      .len = len2[k],
                      .hdrs = {"Content-Type:", hdr[k]}};
        http(NULL, d.port, &q1[k], &alone1[k]);
        http(NULL, d.port, &q2[k], &alone2[k]);
        CHECK(alone1[k].status == 200 && alone2[k].status == 200, "v2 batching: alone %d: %ld %ld",
              k, alone1[k].status, alone2[k].status);
    }
    double batches0 = metric(d.port, "attnd_batch_jobs_count");
    double big0 = batches0 - metric(d.port, "attnd_batch_jobs_bucket{le=\"8\"}");
    async_req slow = {0}, a[2 * K];
    memset(a, 0, sizeof a);
    async_start(&slow, d.port, "/v1/attention", slow_body(slow_l));
    CHECK(wait_metric(d.port, "attnd_jobs_in_flight", 1, 20),
          "v2 batching: the slow job never ran");
    for (int i = 0; i < 2 * K; i++) {
        a[i].q = i % 2 ? &q2[i / 2] : &q1[i / 2];
        async_start(&a[i], d.port, NULL, NULL);
    }
    CHECK(wait_metric(d.port, "attnd_queue_depth", 2 * K, 20),
          "v2 batching: the requests were not all queued behind the slow job");
    pthread_join(slow.th, NULL);
    static const char *const outs[] = {"output", "weights", "weights_indices"};
    for (int i = 0; i < 2 * K; i++) {
        pthread_join(a[i].th, NULL);
        int k = i / 2;
        for (int o = 0; o < 3; o++) {
            tens t, u;
            bool bin, got, had;
            if (i % 2) {
                v2_out x2, y2;
                got = v2_read(&a[i].r, &x2, "v2 batching") && v2_tensor(&x2, outs[o], &t, &bin);
                had = v2_read(&alone2[k], &y2, "v2 alone") && v2_tensor(&y2, outs[o], &u, &bin);
                v2_out_free(&x2);
                v2_out_free(&y2);
            } else {
                got = v1_tensor(&a[i].r, outs[o], &t);
                had = v1_tensor(&alone1[k], outs[o], &u);
            }
            CHECK(got == had && (!got || same(&t, &u)),
                  "v2 batching: request %d (%s) %s differs from its answer alone", k,
                  i % 2 ? "v2" : "v1", outs[o]);
            tens_free(&t);
            tens_free(&u);
        }
        reply_free(&a[i].r);
    }
    double batches = metric(d.port, "attnd_batch_jobs_count") - batches0;
    double big = metric(d.port, "attnd_batch_jobs_count") -
                 metric(d.port, "attnd_batch_jobs_bucket{le=\"8\"}") - big0;
    CHECK(batches <= 3 && big >= 1,
          "v2 batching: %g batches, %g of more than 8 jobs: v1 and v2 jobs should share one",
          batches, big);
    for (int k = 0; k < K; k++) {
        reply_free(&alone1[k]);
        reply_free(&alone2[k]);
        free(b1[k]);
        free(b2[k]);
    }
    reply_free(&slow.r);
    free(slow.body);
    free(x);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "v2 batching daemon: exit status");
}
