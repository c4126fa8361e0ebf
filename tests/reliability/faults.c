/* faults.c - faulty clients: SIGPIPE ignored, clients that vanish mid-upload, before their reply
 * or while it is written, each logged once and left out of the metrics, and SIGTERM during an
 * upload. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../harness.h"
#include "reliability.h"

/* Self-attention of identity projections, H = 1, E = 64, on L tokens, in base64: a job that
 * computes for a while (tens of ms at L = 1024). */
static char *slow_body(size_t L) {
    str s = {0};
    str_printf(&s, "{\"query\": {\"dtype\": \"float32\", \"shape\": [%zu, 64], \"data\": \"", L);
    str_b64_floats(&s, L * 64);
    str_cat(&s, "\"}, \"params\": {\"init\": \"identity\", \"num_heads\": 1}}");
    return s.p;
}

void test_faults(void) {
    attnd d;
    const char *args[] = {"--threads", "1", "--pool-threads", "0", "--max-body-bytes", "8M", NULL};
    if (!attnd_start(&d, "faults", args, NULL))
        return;
    reply r;

    /* SIGPIPE is ignored (signal 13: bit 12 of SigIgn). */
    {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/status", (int)d.pid);
        char *st = slurp(path);
        const char *p = strstr(st, "SigIgn:");
        unsigned long long ign = p ? strtoull(p + 7, NULL, 16) : 0;
        CHECK(ign & (1ull << (SIGPIPE - 1)), "SIGPIPE is not ignored (SigIgn %llx)", ign);
        free(st);
    }

    /* 50 clients vanish mid-upload: half with a FIN, half with a reset. */
    char *slow = slow_body(1024);
    size_t slow_len = strlen(slow);
    for (int i = 0; i < 50; i++) {
        int fd = tcp_connect(d.port);
        str q = {0};
        post_head(&q, "/v1/attention", slow_len);
        str_add(&q, slow, slow_len / 2);
        send_all(fd, q.p, q.n);
        sleep_s(0.002);
        if (i % 2)
            close(fd);
        else
            close_reset(fd);
        free(q.p);
    }
    CHECK(healthy(&d), "the daemon after 50 clients vanished mid-upload");

    /* 20 clients send a whole job and vanish before the reply, one after the other: half close
     * at once (their FIN comes after the body, so the server reads it all), half reset once
     * the job is computing (a reset drops what the server has not read yet). Each job still
     * runs, is counted, and its reply goes nowhere. */
    char *job = slow_body(cfg.scale > 1 ? 256 : 1024); /* smaller under valgrind */
    size_t job_len = strlen(job);
    const char *computed = "attnd_job_compute_seconds_count{op=\"attention\"}";
    double before = metric(d.port, computed), after = before;
    for (int i = 0; i < 20 && after == before + i; i++) {
        /* The previous job has left the gauge, so "in flight" below means this one. */
        double t0 = now();
        while (now() - t0 < 10 * cfg.scale && metric(d.port, "attnd_jobs_in_flight") > 0)
            sleep_s(0.001);
        int fd = tcp_connect(d.port);
        str q = {0};
        post_head(&q, "/v1/attention", job_len);
        str_add(&q, job, job_len);
        send_all(fd, q.p, q.n);
        t0 = now();
        if (i % 2) {
            close(fd);
        } else {
            while (now() - t0 < 10 * cfg.scale && metric(d.port, "attnd_jobs_in_flight") < 1 &&
                   metric(d.port, computed) < before + i + 1)
                sleep_s(0.001);
            close_reset(fd);
        }
        while (now() - t0 < 30 * cfg.scale && (after = metric(d.port, computed)) < before + i + 1)
            sleep_s(0.005);
        free(q.p);
    }
    CHECK(after == before + 20, "20 jobs whose clients vanished: %g computed, expected 20",
          after - before);
    CHECK(healthy(&d), "the daemon after 20 clients vanished before their reply");

    /* Clients that vanish while a large reply is being written: EPIPE/ECONNRESET, no signal. */
    {
        size_t n = cfg.scale > 1 ? 300 : 700; /* n x n weights: 5 MB of JSON, less under valgrind */
        str big = {0};
        const char *names[3] = {"q", "k", "v"};
        for (int t = 0; t < 3; t++) {
            str_printf(&big, "%s\"%s\": {\"dtype\": \"float32\", \"shape\": [%zu, 2], \"data\": \"",
                       t ? "\"}, " : "{", names[t], n);
            str_b64_floats(&big, 2 * n);
        }
        str_cat(&big, "\"}, \"need_weights\": true}");
        for (int i = 0; i < 5; i++) {
            int fd = tcp_connect(d.port);
            str q = {0};
            post_head(&q, "/v1/sdpa", big.n);
            str_add(&q, big.p, big.n);
            send_all(fd, q.p, q.n);
            char buf[256];
            struct pollfd p = {fd, POLLIN, 0};
            poll(&p, 1, (int)(10000 * cfg.scale));
            CHECK(recv(fd, buf, sizeof buf, 0) > 0, "no start of the big reply");
            close_reset(fd);
            free(q.p);
        }
        free(big.p);
    }
    sleep_s(0.3 * cfg.scale);
    CHECK(healthy(&d), "the daemon after clients vanished mid-reply (SIGPIPE)");
    /* Each is logged once, whole body in: status 200 when the reply was queued before the
     * vanishing was noticed, else 0 with end=error; either way the job ran (counted above). */
    char *log = slurp(d.log), full[64];
    snprintf(full, sizeof full, "bytes_in=%zu ", job_len);
    size_t logged = count_lines_with(log, "path=/v1/attention", full);
    CHECK(logged == 20, "%zu access lines for the 20 clients that vanished before the reply",
          logged);
    free(log);
    free(slow);
    free(job);

    /* Still correct afterwards. */
    post(NULL, d.port, "/v1/sdpa", SDPA_SMALL, 0, &r);
    CHECK(r.status == 200 && strstr(r.body, "\"output\""), "a job after the faults: %ld %.200s",
          r.status, r.body);
    reply_free(&r);
    /* The metrics count only replies sent whole: not those whose client vanished (end=). */
    {
        /* A reply reaches its client just before attnd logs and counts it (both when the
         * request completes), so the two are compared once they have settled: they must agree
         * within 2 s. */
        const char *ok = "path=/v1/sdpa status=200 ";
        size_t sent = 0;
        double counted = -1;
        for (double t0 = now(); now() - t0 < 2 * cfg.scale; sleep_s(0.05)) {
            counted = metric(d.port, "attnd_http_requests_total{route=\"/v1/sdpa\",code=\"200\"}");
            char *lg = slurp(d.log);
            sent = count_lines_with(lg, ok, NULL) - count_lines_with(lg, ok, " end=");
            free(lg);
            if (counted == (double)sent)
                break;
        }
        CHECK(counted == (double)sent,
              "/v1/sdpa replies 200 sent whole: %zu in the log, %g counted", sent, counted);
    }

    /* SIGTERM while a request is mid-upload: its upload goes on, it is answered (503 draining),
     * and only then does attnd stop. */
    {
        char *b = slow_body(1024);
        size_t bl = strlen(b);
        int fd = tcp_connect(d.port);
        str q = {0};
        post_head(&q, "/v1/attention", bl);
        size_t head = q.n;
        str_add(&q, b, bl);
        send_all(fd, q.p, head + bl / 2);
        sleep_s(0.05);
        kill(d.pid, SIGTERM);
        sleep_s(0.1);
        send_all(fd, q.p + head + bl / 2, q.n - head - bl / 2);
        str out = {0};
        read_to_end(fd, 10 * cfg.scale, &out);
        CHECK(out.p && strstr(out.p, " 503 ") && strstr(out.p, "\"draining\""),
              "a request mid-upload at SIGTERM: %.120s", out.p ? out.p : "no reply");
        close(fd);
        free(out.p);
        free(q.p);
        free(b);
    }
    int st = attnd_stop(&d, SIGTERM);
    CHECK(st == 0, "faults daemon: exit status %d after SIGTERM", st);
}
