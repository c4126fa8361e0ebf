/* shutdown.c - --shutdown-delay: after SIGTERM, /readyz and the v2 readiness routes answer 503
 * while jobs are still taken and answered (their replies closing the connection), then the
 * drain refuses new jobs as before; a second signal cuts the delay short. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "server_test.h"

#define SDPA_JOB "{\"q\": [[1]], \"k\": [[1]], \"v\": [[2]]}"

void test_shutdown_delay(void) {
    {
        attnd d;
        const char *args[] = {"--threads", "1", "--shutdown-delay", "1.5", NULL};
        if (!attnd_start(&d, "shutdown-delay", args, NULL))
            return;
        double t_kill = now();
        kill(d.pid, SIGTERM);
        reply r = {0};
        while (now() - t_kill < 5) {
            get(d.port, "/readyz", &r);
            if (r.status == 503)
                break;
            reply_free(&r);
            sleep_s(0.005);
        }
        check_error(&r, 503, "draining", NULL, "/readyz in the shutdown delay");
        reply_free(&r);
        /* Within the delay: jobs (v1 and v2) are answered, with Connection: close. */
        post(NULL, d.port, "/v1/sdpa", SDPA_JOB, &r);
        char *conn = header(&r, "Connection");
        CHECK(r.status == 200 && conn && !strcmp(conn, "close"),
              "a job in the shutdown delay: %ld, Connection %s: %.200s", r.status,
              conn ? conn : "none", r.body);
        free(conn);
        reply_free(&r);
        req v2 = {
            .path = "/v2/models/sdpa/infer",
            .ctype = "application/json",
            .body =
                "{\"inputs\": ["
                "{\"name\": \"q\", \"shape\": [1, 1], \"datatype\": \"FP32\", \"data\": [1]},"
                "{\"name\": \"k\", \"shape\": [1, 1], \"datatype\": \"FP32\", \"data\": [1]},"
                "{\"name\": \"v\", \"shape\": [1, 1], \"datatype\": \"FP32\", \"data\": [1]}]}"};
        http(NULL, d.port, &v2, &r);
        CHECK(r.status == 200, "a v2 job in the shutdown delay: %ld %.200s", r.status, r.body);
        reply_free(&r);
        get(d.port, "/v2/health/ready", &r);
        CHECK(r.status == 503, "/v2/health/ready in the shutdown delay: %ld", r.status);
        reply_free(&r);
        get(d.port, "/v2/models/demo/ready", &r);
        CHECK(r.status == 503, "/v2/models/demo/ready in the shutdown delay: %ld", r.status);
        reply_free(&r);
        get(d.port, "/healthz", &r);
        CHECK(r.status == 200, "/healthz in the shutdown delay: %ld", r.status);
        reply_free(&r);
        CHECK(metric(d.port, "attnd_ready") == 0 && metric(d.port, "attnd_draining") == 1,
              "the gauges in the shutdown delay: ready %g, draining %g",
              metric(d.port, "attnd_ready"), metric(d.port, "attnd_draining"));
        double inside = now() - t_kill;
        CHECK(inside < 1.4, "the checks in the delay took until %.2f s after SIGTERM", inside);
        /* After it: the drain refuses new jobs. */
        while (now() - t_kill < 6) {
            post(NULL, d.port, "/v1/sdpa", SDPA_JOB, &r);
            if (r.status != 200)
                break;
            reply_free(&r);
            sleep_s(0.01);
        }
        double refused = now() - t_kill;
        /* 503 draining, or no answer at all once the drain, with nothing to wait for, is over */
        if (r.status != 0)
            check_error(&r, 503, "draining", NULL, "a job after the shutdown delay");
        CHECK(refused >= 1.45, "jobs were refused %.2f s after SIGTERM, before the 1.5 s delay",
              refused);
        reply_free(&r);
        int st = attnd_stop(&d, 0);
        CHECK(st == 0, "exit status after the shutdown delay: %d, expected 0", st);
        char *log = slurp(d.log);
        CHECK(strstr(log, "leaving") && strstr(log, "shutdown_delay_s=1.500"),
              "the log does not tell the shutdown delay");
        free(log);
    }
    /* A second signal ends a long delay at once. */
    {
        attnd d;
        const char *args[] = {"--shutdown-delay", "60", NULL};
        if (!attnd_start(&d, "shutdown-delay-cut", args, NULL))
            return;
        kill(d.pid, SIGTERM);
        CHECK(wait_metric(d.port, "attnd_draining", 1, 5), "no shutdown delay after SIGTERM");
        double t0 = now();
        kill(d.pid, SIGTERM);
        int st = attnd_stop(&d, 0);
        CHECK(st == 0 && now() - t0 < 5,
              "a second SIGTERM in the delay: exit %d after %.2f s, expected 0 at once", st,
              now() - t0);
    }
}
