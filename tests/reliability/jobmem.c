/* jobmem.c - job memory: a large job's memory reused by the next, returned to the system when
 * the daemon is idle, and few page faults per small request. */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness.h"
#include "reliability.h"

/* The minor page faults of the daemon so far (pages it touched for the first time). */
static unsigned long long minor_faults(const attnd *d) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)d->pid);
    char *s = slurp(path);
    const char *p = strrchr(s, ')');
    unsigned long long v = 0;
    /* After the command's ")": state, ppid, pgrp, session, tty, tpgid, flags, minflt. */
    for (int field = 0; p && field < 8; field++)
        p = strchr(p + 1, ' ');
    if (p)
        v = strtoull(p + 1, NULL, 10);
    free(s);
    return v;
}

/* Small jobs (W1: 16 x 64 JSON floats, per-head weights) from 16 clients at once: after a
 * warm-up, they reuse the pages of attnd's malloc heaps instead of faulting them in again per
 * request. With glibc's default trim threshold (128 KiB) each thread's heap went back to the
 * system and was faulted in anew: about 6 minor faults per request, W1 at 40% of its speed. */
typedef struct small_ctx {
    int port, n, ok;
    const char *body;
} small_ctx;

static void *small_main(void *arg) {
    small_ctx *c = arg;
    CURL *h = curl_easy_init();
    for (int i = 0; i < c->n; i++) {
        reply r;
        if (post(h, c->port, "/v1/attention", c->body, strlen(c->body), &r) && r.status == 200)
            c->ok++;
        reply_free(&r);
    }
    curl_easy_cleanup(h);
    return NULL;
}

void test_small_job_faults(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__has_feature)
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer)
    printf("test_reliability: jobmem: small jobs' page faults not counted (ASan's allocator is "
           "not glibc's)\n");
    return;
#endif
#endif
    enum { CLIENTS = 16, WARM = 40, COUNTED = 100 };
    attnd d;
    if (!attnd_start(&d, "smalljobs", NULL, NULL))
        return;
    str b = {0};
    str_cat(&b, "{\"query\": [");
    for (int i = 0; i < 16; i++) {
        str_cat(&b, i ? ",[" : "[");
        for (int j = 0; j < 64; j++)
            str_printf(&b, "%s%.6f", j ? "," : "", (double)((i * 64 + j) % 13) / 13.0 - 0.5);
        str_cat(&b, "]");
    }
    str_cat(&b, "], \"need_weights\": \"per_head\"}");
    unsigned long long faults = 0;
    int ok = 0;
    for (int phase = 0; phase < 2; phase++) {
        pthread_t th[CLIENTS];
        small_ctx c[CLIENTS];
        unsigned long long f0 = minor_faults(&d);
        for (int i = 0; i < CLIENTS; i++) {
            c[i] = (small_ctx){.port = d.port, .n = phase ? COUNTED : WARM, .body = b.p};
            pthread_create(&th[i], NULL, small_main, &c[i]);
        }
        for (int i = 0; i < CLIENTS; i++) {
            pthread_join(th[i], NULL);
            ok += phase ? c[i].ok : 0;
        }
        faults = minor_faults(&d) - f0;
    }
    double per = (double)faults / (CLIENTS * COUNTED);
    printf("test_reliability: jobmem: %d W1 requests from %d clients at once after a warm-up: "
           "%llu minor faults in attnd (%.3f per request)\n",
           CLIENTS * COUNTED, CLIENTS, faults, per);
    CHECK(ok == CLIENTS * COUNTED, "jobmem: %d of %d small jobs answered 200", ok,
          CLIENTS * COUNTED);
    CHECK(per < 0.5, "jobmem: small jobs fault %.2f pages per request in attnd (at most 0.5)", per);
    free(b.p);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "smalljobs daemon: exit status after SIGTERM");
}

/* W4-like jobs (N 1, L 4096, E 512, H 8, causal, base64; about 80 MB of bodies and arena): a job
 * after another reuses its memory instead of faulting in new pages, and once the server is idle
 * its RSS comes back to what it was before the job, within a few seconds. */
void test_job_memory(void) {
    if (cfg.scale > 1) {
        printf("test_reliability: jobmem skipped (time scale %.0f)\n", cfg.scale);
        return;
    }
    attnd d;
    const char *args[] = {"--threads", "1", "--pool-threads", "1", NULL};
    if (!attnd_start(&d, "jobmem", args, NULL))
        return;
    str b = {0};
    str_cat(&b, "{\"query\": {\"dtype\": \"float32\", \"shape\": [1, 4096, 512], \"data\": \"");
    str_b64_floats(&b, (size_t)4096 * 512);
    str_cat(&b, "\"}, \"params\": {\"init\": \"random\", \"seed\": 4, \"num_heads\": 8}, "
                "\"causal\": true, \"encoding\": \"base64\"}");
    const char *cached = "attnd_job_memory_bytes{state=\"cached\"}";
    reply r;
    /* A first job warms the threads (OpenBLAS's buffers, stacks); then the cache empties. */
    post(NULL, d.port, "/v1/attention", b.p, b.n, &r);
    CHECK(r.status == 200, "jobmem: the first W4 job: %ld %.200s", r.status, r.body);
    reply_free(&r);
    double t0 = now();
    while (now() - t0 < 10 && metric(d.port, cached) != 0)
        sleep_s(0.05);
    double emptied = now() - t0;
    CHECK(metric(d.port, cached) == 0,
          "jobmem: the cache still holds %.0f bytes 10 s after the job", metric(d.port, cached));
    sleep_s(0.2);
    size_t rss0 = rss_bytes(&d);
    /* Two jobs in a row: the second finds the first's blocks. */
    post(NULL, d.port, "/v1/attention", b.p, b.n, &r);
    CHECK(r.status == 200, "jobmem: W4 job 2: %ld", r.status);
    reply_free(&r);
    double reused0 = metric(d.port, "attnd_job_memory_blocks_total{event=\"reused\"}");
    unsigned long long f0 = minor_faults(&d);
    post(NULL, d.port, "/v1/attention", b.p, b.n, &r);
    unsigned long long faults = minor_faults(&d) - f0;
    CHECK(r.status == 200, "jobmem: W4 job 3: %ld", r.status);
    reply_free(&r);
    double reused = metric(d.port, "attnd_job_memory_blocks_total{event=\"reused\"}") - reused0;
    size_t rss1 = rss_bytes(&d);
    double mib_faulted = (double)faults * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
    CHECK(mib_faulted < 16 && reused >= 3,
          "jobmem: a W4 job after another faulted in %.1f MiB of new pages (at most 16: its body, "
          "arena and reply, about 80 MB, are the last job's) and reused %.0f blocks",
          mib_faulted, reused);
    /* Idle: back to the RSS before the jobs within a few seconds. */
    t0 = now();
    while (now() - t0 < 5 && (double)rss_bytes(&d) > 1.1 * (double)rss0)
        sleep_s(0.05);
    double back = now() - t0;
    size_t rss2 = rss_bytes(&d);
    printf("test_reliability: jobmem: the cache emptied %.1f s after a W4 job; RSS %.1f MiB idle, "
           "%.1f MiB after two more W4 jobs (the second faulted in %.1f MiB, reused %.0f blocks), "
           "%.1f MiB %.1f s later\n",
           emptied, (double)rss0 / 1048576.0, (double)rss1 / 1048576.0, mib_faulted, reused,
           (double)rss2 / 1048576.0, back);
    CHECK((double)rss2 <= 1.1 * (double)rss0,
          "jobmem: idle RSS %zu bytes 5 s after a W4 job, over 1.1 x the %zu before it", rss2,
          rss0);
    free(b.p);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "jobmem daemon: exit status after SIGTERM");
}
