/* share.c - --share-jobs: identical job requests in flight share one computation. Behind a slow
 * job on the only worker, requests identical to a queued one join it instead of queueing (the
 * queue's depth and attnd_jobs_shared_total say so) and get its reply byte for byte, equal to
 * the same request answered alone; a different body, and the same v2 body accepting another
 * coding, are computed on their own; a leader's error is its followers' error; with
 * --share-jobs off every request is its own job. */
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "server_test.h"

#define NSAME 6

static bool same_bytes(const reply *a, const reply *b) {
    return a->status == b->status && a->len == b->len && !memcmp(a->body, b->body, a->len);
}

/* The output and weights of two v1 replies, bit for bit (attnd prints each float in the
 * shortest form that reads back as the same float). */
static bool same_tensors(const reply *a, const reply *b) {
    json_t *ja = json_loads(a->body, 0, NULL), *jb = json_loads(b->body, 0, NULL);
    bool same = ja && jb && json_object_get(ja, "weights") &&
                json_equal(json_object_get(ja, "output"), json_object_get(jb, "output")) &&
                json_equal(json_object_get(ja, "weights"), json_object_get(jb, "weights"));
    json_decref(ja);
    json_decref(jb);
    return same;
}

/* Starts a on body (a->q when path is NULL), then waits until the queue holds depth jobs. */
static void start_queued(attnd *d, async_req *a, const char *path, char *body, double depth) {
    async_start(a, d->port, path, body);
    CHECK(wait_metric(d->port, "attnd_queue_depth", depth, 20), "share: request %g not queued",
          depth);
}

static size_t test_share_on(size_t slow_l) {
    attnd d;
    const char *args[] = {"--threads",         "1", "--pool-threads",     "0",
                          "--batch-window-us", "0", "--inline-max-flops", "0",
                          SLOW_FLOPS,          NULL};
    if (!attnd_start(&d, "share", args, NULL))
        return slow_l;
    int runs = 0;
    if (!slow_l) /* alone (test_server --only share): the deadline test needs a slow job */
        slow_l = calibrate_slow(d.port, &runs);
    float *q = rnd_array(16 * 64, 1600), *q2 = rnd_array(16 * 64, 1601);
    char *same =
        dump(json_pack("{s:o,s:s}", "query", json_matrix(q, 16, 64), "need_weights", "per_head"));
    char *other =
        dump(json_pack("{s:o,s:s}", "query", json_matrix(q2, 16, 64), "need_weights", "per_head"));
    reply alone;
    post(NULL, d.port, "/v1/attention", same, &alone);
    CHECK(alone.status == 200 && metric(d.port, "attnd_jobs_shared_total") == 0,
          "share: alone %ld, shared %g", alone.status, metric(d.port, "attnd_jobs_shared_total"));

    /* The same v2 body twice with gzip accepted and once without. */
    v2_in in = {"query", "FP32", 2, {16, 64}, q2};
    size_t len, hl;
    char *v2 = v2_body(&in, 1, false, NULL, NULL, &len, &hl);
    req gz = {.path = "/v2/models/demo/infer",
              .ctype = "application/json",
              .body = v2,
              .len = len,
              .hdrs = {"Accept-Encoding: gzip"}};
    req plain = {
        .path = "/v2/models/demo/infer", .ctype = "application/json", .body = v2, .len = len};

    async_req slow = {0}, a[NSAME], o[2], g[2], p = {0};
    memset(a, 0, sizeof a), memset(o, 0, sizeof o), memset(g, 0, sizeof g);
    async_start(&slow, d.port, "/v1/attention", slow_body(slow_l));
    CHECK(wait_metric(d.port, "attnd_jobs_in_flight", 1, 20), "share: the slow job never ran");
    start_queued(&d, &a[0], "/v1/attention", same, 1);
    start_queued(&d, &o[0], "/v1/attention", other, 2);
    g[0].q = &gz;
    start_queued(&d, &g[0], NULL, NULL, 3);
    p.q = &plain;
    start_queued(&d, &p, NULL, NULL, 4); /* the same bytes, another coding: not shared */
    for (int i = 1; i < NSAME; i++)
        async_start(&a[i], d.port, "/v1/attention", same);
    async_start(&o[1], d.port, "/v1/attention", other);
    g[1].q = &gz;
    async_start(&g[1], d.port, NULL, NULL);
    double want = NSAME - 1 + 2;
    CHECK(wait_metric(d.port, "attnd_jobs_shared_total", want, 20),
          "share: %g requests joined a queued one, %g expected",
          metric(d.port, "attnd_jobs_shared_total"), want);
    double depth = metric(d.port, "attnd_queue_depth");
    CHECK(depth == 4,
          "share: %g jobs queued behind the slow one; 4 expected (followers wait "
          "outside the queue)",
          depth);
    pthread_join(slow.th, NULL);
    for (int i = 0; i < NSAME; i++)
        pthread_join(a[i].th, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(o[i].th, NULL), pthread_join(g[i].th, NULL);
    pthread_join(p.th, NULL);

    CHECK(a[0].r.status == 200 && same_tensors(&a[0].r, &alone),
          "share: the leader's answer (%ld) differs from the same request's alone", a[0].r.status);
    for (int i = 1; i < NSAME; i++)
        CHECK(same_bytes(&a[i].r, &a[0].r),
              "share: follower %d got %ld, %zu bytes, not the "
              "leader's %zu",
              i, a[i].r.status, a[i].r.len, a[0].r.len);
    CHECK(o[0].r.status == 200 && same_bytes(&o[1].r, &o[0].r) && !same_tensors(&o[0].r, &a[0].r),
          "share: another body: %ld %ld, shared with its twin %d", o[0].r.status, o[1].r.status,
          same_bytes(&o[1].r, &o[0].r));
    char *e0 = header(&g[0].r, "Content-Encoding"), *e1 = header(&g[1].r, "Content-Encoding"),
         *ep = header(&p.r, "Content-Encoding");
    CHECK(g[0].r.status == 200 && same_bytes(&g[1].r, &g[0].r) && e0 && !strcmp(e0, "gzip") && e1 &&
              !strcmp(e1, "gzip") && p.r.status == 200 && !ep,
          "share: v2 gzip %ld (%s) and its twin %ld (%s), plain %ld (%s)", g[0].r.status,
          e0 ? e0 : "none", g[1].r.status, e1 ? e1 : "none", p.r.status, ep ? ep : "none");
    free(e0), free(e1), free(ep);
    CHECK(metric(d.port, "attnd_jobs_shared_total") == want, "share: %g shared in the end",
          metric(d.port, "attnd_jobs_shared_total"));

    reply_free(&alone), reply_free(&slow.r), reply_free(&p.r);
    for (int i = 0; i < NSAME; i++)
        reply_free(&a[i].r);
    for (int i = 0; i < 2; i++)
        reply_free(&o[i].r), reply_free(&g[i].r);
    free(slow.body), free(same), free(other), free(v2), free(q), free(q2);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "share daemon: exit status");
    return slow_l;
}

/* A leader that passes its deadline in the queue: its followers get its 503. With share off, n
 * identical requests queue as n jobs. */
static void test_share_error_and_off(size_t slow_l, bool on) {
    attnd d;
    const char *args[] = {"--threads",         "1",   "--pool-threads",     "0",
                          "--batch-window-us", "0",   "--inline-max-flops", "0",
                          "--request-timeout", "0.3", "--share-jobs",       on ? "on" : "off",
                          SLOW_FLOPS,          NULL};
    if (!attnd_start(&d, on ? "share-error" : "share-off", args, NULL))
        return;
    float *q = rnd_array(16 * 64, 1602);
    char *same = dump(json_pack("{s:o}", "query", json_matrix(q, 16, 64)));
    async_req slow = {0}, a[3];
    memset(a, 0, sizeof a);
    async_start(&slow, d.port, "/v1/attention", slow_body(slow_l));
    CHECK(wait_metric(d.port, "attnd_jobs_in_flight", 1, 20), "share: the slow job never ran");
    start_queued(&d, &a[0], "/v1/attention", same, 1);
    for (int i = 1; i < 3; i++) {
        async_start(&a[i], d.port, "/v1/attention", same);
        if (!on)
            CHECK(wait_metric(d.port, "attnd_queue_depth", i + 1, 20),
                  "share off: request %d was not queued", i);
    }
    if (on)
        CHECK(wait_metric(d.port, "attnd_jobs_shared_total", 2, 20), "share: %g joined",
              metric(d.port, "attnd_jobs_shared_total"));
    pthread_join(slow.th, NULL);
    for (int i = 0; i < 3; i++) {
        pthread_join(a[i].th, NULL);
        check_error(&a[i].r, 503, "deadline_exceeded", NULL,
                    on ? "share: a follower of a "
                         "leader past its deadline"
                       : "share off");
        reply_free(&a[i].r);
    }
    double shared = metric(d.port, "attnd_jobs_shared_total");
    CHECK(shared == (on ? 2 : 0), "share %s: %g shared", on ? "on" : "off", shared);
    reply_free(&slow.r);
    free(slow.body), free(same), free(q);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "share daemon: exit status");
}

void test_share(size_t slow_l) {
    slow_l = test_share_on(slow_l);
    test_share_error_and_off(slow_l, true);
    test_share_error_and_off(slow_l, false);
}
