/* rss.c - the daemon's memory over 20 000 mixed good and bad requests.
 *
 * RSS bound: after a warm-up of 2 000 requests, the daemon's VmRSS may grow by at most
 * RSS_GROWTH_MAX over the next 20 000 (a leak of 100 bytes per request would be 2 MB; one of
 * a small job's arenas per request would be tens of MB). */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness.h"
#include "reliability.h"

#define RSS_GROWTH_MAX (4 << 20) /* bytes */
#define RSS_WARMUP     2000
#define RSS_REQUESTS   20000
#define RSS_THREADS    4

/* W1 of the benchmarks: the demo model (E = 64, H = 4), L = 16, per-head weights, in JSON. */
static char *w1_body(void) {
    str s = {0};
    str_cat(&s, "{\"query\": [");
    for (int i = 0; i < 16; i++) {
        str_cat(&s, i ? ",[" : "[");
        for (int j = 0; j < 64; j++)
            str_printf(&s, "%s%.3f", j ? "," : "", (double)((i * 7 + j) % 5) / 5.0 - 0.4);
        str_cat(&s, "]");
    }
    str_cat(&s, "], \"need_weights\": \"per_head\"}");
    return s.p;
}

typedef struct mix_ctx {
    int port;
    int from, to; /* request numbers */
    atomic_int *bad;
    const char *w1, *deep, *big;
} mix_ctx;

/* Request number i of the mix: a tenth of every kind below. */
static void mix_one(CURL *c, const mix_ctx *m, int i, atomic_int *bad) {
    reply r = {0};
    long want = 0;
    switch (i % 10) {
    case 0:
    case 1:
    case 2:
        post(c, m->port, "/v1/sdpa", SDPA_SMALL, 0, &r), want = 200;
        break;
    case 3:
        post(c, m->port, "/v1/attention", m->w1, 0, &r), want = 200;
        break;
    case 4:
        post(c, m->port, "/v1/sdpa", "{\"q\": [[1, 2], [3, ", 0, &r), want = 400;
        break;
    case 5:
        post(c, m->port, "/v1/sdpa", m->deep, 0, &r), want = 400;
        break;
    case 6:
        post(c, m->port, (i / 10) % 2 ? "/v1/nothing" : "/v1/attention",
             "{\"query\": [[1]], \"causal\": \"sideways\"}", 0, &r);
        want = (i / 10) % 2 ? 404 : 400;
        break;
    case 7: { /* over --max-body-bytes: refused from Content-Length, before the body */
        int fd = tcp_connect(m->port);
        str q = {0}, out = {0};
        post_head(&q, "/v1/sdpa", strlen(m->big));
        send_all(fd, q.p, q.n);
        read_to_end(fd, 10 * cfg.scale, &out);
        r.status = out.p && !strncmp(out.p, "HTTP/1.1 ", 9) ? atol(out.p + 9) : 0;
        want = 413;
        close(fd);
        free(q.p);
        free(out.p);
        break;
    }
    case 8:
        post(c, m->port, "/v1/sdpa",
             "{\"q\": {\"dtype\": \"float32\", \"shape\": [2, 2], \"data\": \"AACAPw==\"}, \"k\": "
             "[[1]], \"v\": [[1]]}",
             0, &r);
        want = 400;
        break;
    case 9: { /* a client that vanishes mid-upload */
        int fd = tcp_connect(m->port);
        str q = {0};
        post_head(&q, "/v1/sdpa", 1000);
        str_cat(&q, "{\"q\": [[1]");
        send_all(fd, q.p, q.n);
        close_reset(fd);
        free(q.p);
        return;
    }
    }
    if (r.status != want && atomic_fetch_add(bad, 1) < 5)
        fprintf(stderr, "test_reliability: mix request %d (kind %d): %ld (%s), expected %ld\n", i,
                i % 10, r.status, curl_easy_strerror(r.rc), want);
    reply_free(&r);
}

static void *mix_main(void *arg) {
    const mix_ctx *m = arg;
    CURL *c = curl_easy_init();
    for (int i = m->from; i < m->to; i++)
        mix_one(c, m, i, m->bad);
    curl_easy_cleanup(c);
    return NULL;
}

/* Runs requests [from, to) of the mix on RSS_THREADS threads; returns the wrong answers. */
static int run_mix(int port, int from, int to) {
    atomic_int bad = 0;
    char *w1 = w1_body();
    str deep = {0}, big = {0};
    str_cat(&deep, "{\"q\": ");
    str_repeat(&deep, "[", 5000);
    str_repeat(&deep, "]", 5000);
    str_cat(&deep, "}");
    str_repeat(&big, " ", 70 << 10);
    str_cat(&big, "{}");
    pthread_t th[RSS_THREADS];
    mix_ctx m[RSS_THREADS];
    int per = (to - from) / RSS_THREADS;
    for (int t = 0; t < RSS_THREADS; t++) {
        m[t] = (mix_ctx){
            port,   from + t * per, t == RSS_THREADS - 1 ? to : from + (t + 1) * per, &bad, w1,
            deep.p, big.p};
        pthread_create(&th[t], NULL, mix_main, &m[t]);
    }
    for (int t = 0; t < RSS_THREADS; t++)
        pthread_join(th[t], NULL);
    free(w1);
    free(deep.p);
    free(big.p);
    return atomic_load(&bad);
}

void test_rss(void) {
    if (cfg.scale > 1) {
        printf("test_reliability: rss skipped (time scale %.0f: not under valgrind)\n", cfg.scale);
        return;
    }
    attnd d;
    const char *args[] = {"--threads", "2", "--max-body-bytes", "64K", NULL};
    if (!attnd_start(&d, "rss", args, NULL))
        return;
    int bad = run_mix(d.port, 0, RSS_WARMUP);
    CHECK(bad == 0, "warm-up: %d of %d answers had the wrong status", bad, RSS_WARMUP);
    sleep_s(0.3);
    size_t rss0 = rss_bytes(&d);
    double t0 = now();
    bad = run_mix(d.port, RSS_WARMUP, RSS_WARMUP + RSS_REQUESTS);
    double secs = now() - t0;
    sleep_s(0.3);
    size_t rss1 = rss_bytes(&d);
    CHECK(bad == 0, "%d of %d answers had the wrong status", bad, RSS_REQUESTS);
    CHECK(rss0 > 0 && rss1 > 0, "no VmRSS for the daemon");
    long long grew = (long long)rss1 - (long long)rss0;
    printf("test_reliability: rss %.1f MiB after %d warm-up requests, %.1f MiB after %d more "
           "mixed ones (%.1f s, %+.2f MiB; bound %+.0f MiB)\n",
           (double)rss0 / 1048576.0, RSS_WARMUP, (double)rss1 / 1048576.0, RSS_REQUESTS, secs,
           (double)grew / 1048576.0, (double)RSS_GROWTH_MAX / 1048576.0);
    CHECK(grew <= RSS_GROWTH_MAX, "RSS grew by %lld bytes over %d requests (bound %d)", grew,
          RSS_REQUESTS, RSS_GROWTH_MAX);
    CHECK(healthy(&d), "the daemon after the mix");
    CHECK(attnd_stop(&d, SIGTERM) == 0, "rss daemon: exit status after SIGTERM");
}
