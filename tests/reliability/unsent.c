/* unsent.c - replies a client does not read: clients that never read stay within
 * --max-unsent-bytes and the RSS bound SECURITY.md states, replies are reserved before compute,
 * and a slow reader is cut by the send rule while other clients' jobs still get 200. */
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "reliability.h"

/* A value in kB from /proc/PID/status ("VmRSS:", "VmHWM:"), in bytes; 0 when unknown. */
static size_t proc_status_bytes(const attnd *d, const char *field) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)d->pid);
    char *s = slurp(path);
    const char *p = strstr(s, field);
    size_t kb = p ? (size_t)strtoull(p + strlen(field), NULL, 10) : 0;
    free(s);
    return kb * 1024;
}

/* Restarts the daemon's peak RSS (VmHWM) from its current RSS; false when the kernel refuses. */
static bool reset_peak_rss(const attnd *d) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/clear_refs", (int)d->pid);
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

/* Clients that send jobs with large replies and never read them: the replies held for them stay
 * within --max-unsent-bytes, the daemon's RSS within the bound SECURITY.md states, later jobs get
 * 503 reply_budget, and the budget frees when the clients go away. */
void test_unsent(void) {
    enum { CLIENTS = 24 };
    const size_t conns = 32, threads = 1, max_memory = (size_t)160 << 20;
    const size_t unsent_max = 16 << 20, per_conn = 48 << 10;
    attnd d;
    const char *args[] = {"--threads",
                          "1",
                          "--pool-threads",
                          "0",
                          "--max-queue",
                          "2",
                          "--max-connections",
                          "32",
                          "--max-body-bytes",
                          "256K",
                          "--max-job-bytes",
                          "16M",
                          "--max-unsent-bytes",
                          "16M",
                          "--max-memory",
                          "160M",
                          NULL};
    if (!attnd_start(&d, "unsent", args, NULL))
        return;
    char *big = weights_body(700); /* a reply of about 6.4 MB: two fit the budget */
    size_t big_len = strlen(big);
    reply r;
    /* At rest: after jobs like these, read whole, and small ones. */
    size_t reply_len = 0;
    for (int i = 0; i < 3; i++) {
        post(NULL, d.port, "/v1/sdpa", big, big_len, &r);
        CHECK(r.status == 200, "a large reply read whole: %ld %.200s", r.status, r.body);
        reply_len = r.len;
        reply_free(&r);
        post(NULL, d.port, "/v1/sdpa", SDPA_SMALL, 0, &r);
        reply_free(&r);
    }
    /* At rest means with the job memory cache empty too (its blocks unused for 2 s go back):
     * what it keeps counts against the bound below, not as rest. */
    double t_rest = now();
    while (now() - t_rest < 10 * cfg.scale &&
           metric(d.port, "attnd_job_memory_bytes{state=\"cached\"}") != 0)
        sleep_s(0.05);
    CHECK(metric(d.port, "attnd_job_memory_bytes{state=\"cached\"}") == 0,
          "the job memory cache should empty within 10 s of the last job (%.0f bytes cached)",
          metric(d.port, "attnd_job_memory_bytes{state=\"cached\"}"));
    sleep_s(0.2);
    size_t rest = rss_bytes(&d);
    bool peak = reset_peak_rss(&d);
    /* SECURITY.md's shares of --max-memory: the connection places (the connections, 4 spare and
     * up to 8 being closed per HTTP thread), zlib's state for each thread that codes (a worker,
     * 2 HTTP threads, a parse thread), 5 /metrics renderings of the models, a metadata reply being
     * written per HTTP thread, 16 MiB atop each thread's malloc heap, the decode sessions'
     * records, the replies; the rest is the job memory budget. */
    const size_t http = 2, parsers = threads, models = 3; /* demo, lesson, induction */
    size_t fixed = (conns + (8 + 4) * http) * per_conn + (threads + http + parsers) * (512 << 10) +
                   5 * ((700 << 10) + models * (40 << 10)) + http * ((64 << 10) + models * 1024) +
                   (threads + 0 + http + parsers) * ((size_t)16 << 20) + /* heaps; no pool */
                   216 + 256 * 248; /* the records of 256 decode sessions (SECURITY.md, x86-64) */
    size_t bound = max_memory, jobs = max_memory - fixed - unsent_max;
    char *log = slurp(d.log), want_bound[64], want_jobs[64];
    snprintf(want_bound, sizeof want_bound, " memory_bound=%zu ", bound);
    snprintf(want_jobs, sizeof want_jobs, " job_budget_bytes=%zu", jobs);
    CHECK(strstr(log, want_bound) && strstr(log, want_jobs),
          "attnd should log%sand%s (SECURITY.md's shares)", want_bound, want_jobs);
    CHECK(!strstr(log, "memory_unfit"), "these flags fit 160M: no memory_unfit line");
    free(log);
    double computed0 = metric(d.port, "attnd_job_compute_seconds_count{op=\"sdpa\"}");

    /* The clients, one after the other: each sends its job and waits until its reply (or a
     * refusal) starts to arrive, never reading it. */
    int fds[CLIENTS];
    size_t worst = rest;
    for (int i = 0; i < CLIENTS; i++) {
        fds[i] = tcp_connect(d.port);
        str q = {0};
        post_head(&q, "/v1/sdpa", big_len);
        str_add(&q, big, big_len);
        send_all(fds[i], q.p, q.n);
        free(q.p);
        struct pollfd p = {fds[i], POLLIN, 0};
        CHECK(poll(&p, 1, (int)(20000 * cfg.scale)) == 1, "client %d: no reply began", i);
        size_t now_rss = rss_bytes(&d);
        worst = now_rss > worst ? now_rss : worst;
    }
    sleep_s(0.2);
    size_t hwm = peak ? proc_status_bytes(&d, "VmHWM:") : 0;
    worst = hwm > worst ? hwm : worst;
    double held = metric(d.port, "attnd_unsent_reply_bytes");
    double refused = metric(d.port, "attnd_jobs_rejected_total{reason=\"reply_budget\"}");
    double computed = metric(d.port, "attnd_job_compute_seconds_count{op=\"sdpa\"}") - computed0;
    printf("test_reliability: unsent replies: %d clients that never read replies of %zu bytes: "
           "%.0f bytes held (budget %zu), %.0f refused; RSS %.1f MiB at rest, peak %.1f MiB "
           "(%s; bound %+.1f MiB)\n",
           CLIENTS, reply_len, held, unsent_max, refused, (double)rest / 1048576.0,
           (double)worst / 1048576.0, peak ? "VmHWM" : "sampled VmRSS", (double)bound / 1048576.0);
    /* Two replies of the same job differ only in their usage times' digits (a few bytes). */
    CHECK(held >= 2.0 * ((double)reply_len - 32.0) && held <= (double)unsent_max,
          "unsent reply bytes %.0f: expected two replies of about %zu held, within the budget %zu",
          held, reply_len, unsent_max);
    CHECK(refused >= 1, "attnd_jobs_rejected_total{reason=\"reply_budget\"} is %.0f", refused);
    /* The reply is reserved before the job is queued: the jobs computed are the two held, and
     * none was computed and then refused. */
    CHECK(computed == 2,
          "%.0f jobs were computed while two replies fit the budget: a job whose "
          "reply does not fit must be refused before it is computed",
          computed);
    CHECK(worst <= rest + bound,
          "RSS peaked at %zu bytes with %d clients not reading: over %zu at rest + the bound %zu "
          "(SECURITY.md: (connections + 8 x http threads) x (1.5 x body + 88 KiB) + (queue + 2 x "
          "threads + http threads) x "
          "job + unsent + coded replies)",
          worst, CLIENTS, rest, bound);
    /* While the budget holds the two replies: a large job that does not fit gets 503 at once,
     * and a small job that fits gets 200 (a refusal leaves no trace). */
    post(NULL, d.port, "/v1/sdpa", big, big_len, &r);
    check_error(&r, 503, "reply_budget", "max-unsent-bytes", "a job that does not fit");
    CHECK(has_header(&r, "Retry-After", "1"), "reply_budget: Retry-After %s", r.hdr);
    reply_free(&r);
    post(NULL, d.port, "/v1/sdpa", SDPA_SMALL, 0, &r);
    CHECK(r.status == 200, "a small job that fits beside the held replies: %ld %.200s", r.status,
          r.body);
    reply_free(&r);
    /* The clients go away: their replies are freed, and jobs run again. */
    for (int i = 0; i < CLIENTS; i++)
        close_reset(fds[i]);
    double t0 = now();
    while (now() - t0 < 10 * cfg.scale && metric(d.port, "attnd_unsent_reply_bytes") > 0)
        sleep_s(0.02);
    CHECK(metric(d.port, "attnd_unsent_reply_bytes") == 0,
          "the unsent reply bytes should fall to 0 when the clients have gone (%.0f)",
          metric(d.port, "attnd_unsent_reply_bytes"));
    post(NULL, d.port, "/v1/sdpa", big, big_len, &r);
    CHECK(r.status == 200, "a large reply after the clients went: %ld %.200s", r.status, r.body);
    reply_free(&r);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "unsent daemon: exit status after SIGTERM");

    /* A reply that could never fit the budget: 413 at once, the job never computed. */
    const char *small_budget[] = {"--threads", "1", "--pool-threads", "0", "--max-unsent-bytes",
                                  "4M",        NULL};
    if (attnd_start(&d, "unsent-413", small_budget, NULL)) {
        post(NULL, d.port, "/v1/sdpa", big, big_len, &r);
        check_error(&r, 413, "job_too_large", "max-unsent-bytes", "a reply over the budget");
        reply_free(&r);
        double ran = metric(d.port, "attnd_job_compute_seconds_count{op=\"sdpa\"}");
        CHECK(ran == 0, "a job whose reply can never fit was computed (%.0f jobs)", ran);
        post(NULL, d.port, "/v1/sdpa", SDPA_SMALL, 0, &r);
        CHECK(r.status == 200, "a small job after it: %ld", r.status);
        reply_free(&r);
        CHECK(attnd_stop(&d, SIGTERM) == 0, "unsent-413 daemon: exit status after SIGTERM");
    }
    free(big);
}

/* ---- slow readers and the reply budget (issue 23, item 1) ----------------------------------- */

/* memory_bound=N from the daemon's limits line; 0 when absent. */
static size_t logged_bound(const attnd *d) {
    char *log = slurp(d->log);
    const char *p = strstr(log, " memory_bound=");
    size_t v = p ? (size_t)strtoull(p + 14, NULL, 10) : 0;
    free(log);
    return v;
}

/* The repro, scaled to a 16 MiB budget: client A's job reserves most of the budget for
 * its reply and A reads it at 40 KB/s; client B's job does not fit beside it and gets 503. A
 * third client's tiny jobs must still get 200 (they fit: a refusal leaves no trace), A must be
 * cut by the send rule (--send-timeout 1, --min-send-rate 256K) and its room come back, a reader
 * just above the rate must get its reply whole, and RSS must stay within the logged bound. */
void test_slow_reader(void) {
    attnd d;
    const char *args[] = {"--threads",
                          "1",
                          "--pool-threads",
                          "0",
                          "--max-unsent-bytes",
                          "16M",
                          "--max-job-bytes",
                          "16M",
                          "--send-timeout",
                          "1",
                          "--min-send-rate",
                          "256K",
                          NULL};
    if (!attnd_start(&d, "slow-reader", args, NULL))
        return;
    reply r;
    post(NULL, d.port, "/v1/sdpa", SDPA_SMALL, 0, &r); /* warm */
    reply_free(&r);
    sleep_s(0.2);
    size_t rest = rss_bytes(&d), bound = logged_bound(&d);
    bool peak = reset_peak_rss(&d);
    CHECK(bound > 0, "the limits line should log memory_bound");

    char *big = weights_body(760); /* a reply bound of about 9.8 MB: one fits the 16 MiB budget */
    size_t big_len = strlen(big);
    str raw = {0};
    post_head(&raw, "/v1/sdpa", big_len);
    str_add(&raw, big, big_len);
    trickle_ctx a = {.port = d.port,
                     .raw = raw.p,
                     .n = raw.n,
                     .rcvbuf = 8192,
                     .chunk = 4096,
                     .gap = 0.1,
                     .secs = 30 * cfg.scale};
    pthread_t ta;
    pthread_create(&ta, NULL, trickle_main, &a);
    double t_wait = now();
    while (now() - t_wait < 10 * cfg.scale && metric(d.port, "attnd_unsent_reply_bytes") == 0)
        sleep_s(0.01);
    double held = metric(d.port, "attnd_unsent_reply_bytes");
    CHECK(held > 8e6, "A's reply should hold its room (%.0f bytes)", held);

    /* B: does not fit beside A. */
    post(NULL, d.port, "/v1/sdpa", big, big_len, &r);
    check_error(&r, 503, "reply_budget", "max-unsent-bytes", "B beside A's held reply");
    reply_free(&r);
    /* A third client: tiny jobs, all of which fit. */
    int ok = 0, tiny = 100;
    for (int i = 0; i < tiny; i++) {
        post(NULL, d.port, "/v1/sdpa", SDPA_SMALL, 0, &r);
        ok += r.status == 200;
        reply_free(&r);
    }
    printf("test_reliability: slow reader: beside a reply read at 40 KB/s and a refused job, %d "
           "of %d tiny jobs got 200\n",
           ok, tiny);
    CHECK(ok * 100 >= tiny * 99,
          "%d of %d tiny jobs got 200 beside a trickling reader and a "
          "refused job (want >= 99%%)",
          ok, tiny);

    /* A is cut by the send rule: within --send-timeout + what its buffers took at the rate. */
    pthread_join(ta, NULL);
    size_t a_len = a.out.n;
    CHECK(a.closed && a.t_close < 10 * cfg.scale && a_len < 9000000,
          "A (40 KB/s against a minimum of 256 KiB/s) should be closed within 10 s: closed %d "
          "after %.1f s, %zu bytes read",
          a.closed, a.t_close, a_len);
    double t0 = now();
    while (now() - t0 < 5 * cfg.scale && metric(d.port, "attnd_unsent_reply_bytes") > 0)
        sleep_s(0.02);
    CHECK(metric(d.port, "attnd_unsent_reply_bytes") == 0,
          "A's room should come back when it is cut (%.0f bytes held)",
          metric(d.port, "attnd_unsent_reply_bytes"));
    char *log = slurp(d.log);
    CHECK(strstr(log, "send_timeout") && strstr(log, "end=send_timeout"),
          "the log should say send_timeout, and A's access line end=send_timeout");
    free(log);
    post(NULL, d.port, "/v1/sdpa", big, big_len, &r);
    CHECK(r.status == 200, "B again, once A's room is back: %ld %.200s", r.status, r.body);
    reply_free(&r);

    /* A reader above the rate (about 1.3 MB/s) gets a 1.2 MB reply whole. */
    char *mid = weights_body(300);
    raw.n = 0;
    post_head(&raw, "/v1/sdpa", strlen(mid));
    str_cat(&raw, mid);
    trickle_ctx c = {.port = d.port,
                     .raw = raw.p,
                     .n = raw.n,
                     .rcvbuf = 8192,
                     .chunk = 65536,
                     .gap = 0.05,
                     .secs = 30 * cfg.scale};
    trickle_main(&c); /* on this thread: nothing else runs beside it */
    str_add(&c.out, "", 1);
    const char *json = c.out.p ? strstr(c.out.p, "\r\n\r\n") : NULL;
    json_t *j = json ? json_loads(json + 4, 0, NULL) : NULL;
    json_t *w = json_object_get(j, "weights");
    CHECK(c.closed && strncmp(c.out.p ? c.out.p : "", "HTTP/1.1 200", 12) == 0 &&
              json_array_size(w) == 300 && json_array_size(json_array_get(w, 299)) == 300,
          "a reader at about 1.3 MB/s should get its 300 x 300 weights whole (%zu bytes read)",
          c.out.n);
    json_decref(j);
    free(c.out.p);
    free(mid);

    size_t hwm = peak ? proc_status_bytes(&d, "VmHWM:") : rss_bytes(&d);
    CHECK(hwm <= rest + bound, "RSS peaked at %zu bytes: over %zu at rest + the logged bound %zu",
          hwm, rest, bound);
    free(a.out.p);
    free(raw.p);
    free(big);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "slow-reader daemon: exit status after SIGTERM");
}
