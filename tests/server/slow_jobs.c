/* slow_jobs.c - a job that computes for a while, sized on the machine at hand, and requests
 * sent from their own threads: what the queue, draining and batching tests fill a queue with. */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "../harness.h"
#include "server_test.h"

/* A job that computes for a while: self-attention of identity projections, H = 1, E = 64, on L
 * tokens, sent as base64. */
char *slow_body(size_t L) {
    size_t shape[2] = {L, 64};
    float *x = rnd_array(L * 64, 900);
    char *s = dump(json_pack("{s:o,s:{s:s,s:i}}", "query", json_b64(x, shape, 2), "params", "init",
                             "identity", "num_heads", 1));
    free(x);
    return s;
}

static void *async_main(void *arg) {
    async_req *a = arg;
    if (a->q)
        http(NULL, a->port, a->q, &a->r);
    else
        post(NULL, a->port, a->path, a->body, &a->r);
    return NULL;
}

void async_start(async_req *a, int port, const char *path, char *body) {
    a->port = port;
    a->path = path;
    a->body = body;
    pthread_create(&a->th, NULL, async_main, a);
}

/* usage.KEY of a reply's body ("compute_ms", "queue_ms", "flops"); 0 when it has none. */
double usage_of(const reply *r, const char *key) {
    json_t *j = json_loads(r->body, 0, NULL);
    double v = json_number_value(json_object_get(json_object_get(j, "usage"), key));
    json_decref(j);
    return v;
}

/* A slow job's L, sized so that it computes for about SLOW_TARGET seconds on one thread. */
size_t calibrate_slow(int port, int *runs) {
    size_t L = 2048;
    for (int tries = 0; tries < 6; tries++) {
        ++*runs;
        char *b = slow_body(L);
        reply r;
        post(NULL, port, "/v1/attention", b, &r);
        free(b);
        double ms = r.status == 200 ? usage_of(&r, "compute_ms") : 0;
        reply_free(&r);
        if (!CHECK(ms > 0, "slow job of L = %zu failed", L))
            return 0;
        if (ms >= SLOW_TARGET * 1e3 || L >= 32768) {
            printf("test_server: slow job L = %zu computes for %.0f ms on one thread\n", L, ms);
            return L;
        }
        double f = sqrt(SLOW_TARGET * 1.3e3 / ms);
        size_t next = (size_t)((double)L * (f > 1.4 ? f : 1.4)) / 512 * 512 + 512;
        L = next > 32768 ? 32768 : next;
    }
    return L;
}
