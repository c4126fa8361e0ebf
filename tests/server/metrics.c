/* metrics.c - /metrics (every series, checked by `promtool check metrics`) and the log lines of
 * the main daemon after the other tests have run on it. */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "server_test.h"

void test_metrics(int port, const char *log_path) {
    reply r;
    get(port, "/metrics", &r);
    char *ct = header(&r, "Content-Type");
    CHECK(r.status == 200 && ct && !strncmp(ct, "text/plain", 10), "/metrics: %ld %s", r.status,
          ct ? ct : "");
    free(ct);
    static const char *const series[] = {
        "attnd_http_requests_total{route=\"/v1/attention\",code=\"200\"}",
        "attnd_http_requests_total{route=\"/v1/attention\",code=\"413\"}",
        "attnd_http_requests_total{route=\"unknown\",code=\"404\"}",
        "attnd_job_queue_seconds_bucket{op=\"attention\",le=\"+Inf\"}",
        "attnd_job_compute_seconds_count{op=\"sdpa\"}",
        "attnd_queue_depth",
        "attnd_jobs_in_flight",
        "attnd_http_request_body_bytes_total{route=\"/v1/attention\"}",
        "attnd_http_response_body_bytes_total{route=\"/v1/attention\"}",
    };
    for (size_t i = 0; i < sizeof series / sizeof series[0]; i++)
        CHECK(strstr(r.body, series[i]) != NULL, "/metrics lacks %s", series[i]);
    CHECK(metric(port, series[0]) >= 10, "/metrics: %s is %g", series[0], metric(port, series[0]));
    /* The model label, the end-to-end and per-step histograms, the sizes, process_*: each with
     * the least the traffic of the tests before must have left in it. */
    static const struct {
        const char *sample;
        double least;
    } counted[] = {
        {"attnd_model_requests_total{op=\"attention\",model=\"demo\",outcome=\"success\"}", 10},
        {"attnd_model_requests_total{op=\"attention\",model=\"demo\",outcome=\"failure\"}", 1},
        {"attnd_model_requests_total{op=\"attention\",model=\"f32\",outcome=\"success\"}", 1},
        {"attnd_model_requests_total{op=\"attention\",model=\"lesson\",outcome=\"success\"}", 1},
        {"attnd_model_requests_total{op=\"sdpa\",model=\"sdpa\",outcome=\"success\"}", 1},
        {"attnd_model_request_duration_seconds_count{op=\"attention\",model=\"demo\"}", 11},
        {"attnd_job_parse_seconds_count{op=\"attention\",model=\"demo\"}", 10},
        {"attnd_job_encode_seconds_count{op=\"attention\",model=\"lesson\"}", 1},
        {"attnd_job_queue_seconds_count{op=\"sdpa\",model=\"sdpa\"}", 1},
        {"attnd_job_compute_seconds_count{op=\"attention\",model=\"kvdim\"}", 1},
        {"attnd_job_parse_seconds_count{op=\"sdpa\"}", 1}, /* /v1/sdpa: no model */
        {"attnd_job_flops_total{op=\"attention\",model=\"demo\"}", 1e5},
        {"attnd_http_request_duration_seconds_count{route=\"/v1/attention\",code=\"200\"}", 10},
        {"attnd_http_request_duration_seconds_count{route=\"/v1/attention\",code=\"400\"}", 1},
        {"attnd_http_request_duration_seconds_bucket{route=\"/v2/models/{name}/infer\","
         "code=\"200\",le=\"+Inf\"}",
         1},
        {"attnd_http_request_size_bytes_count{route=\"/v1/attention\"}", 10},
        {"attnd_http_response_size_bytes_bucket{route=\"/v1/attention\",le=\"+Inf\"}", 10},
        {"attnd_model_executions_total{op=\"attention\",model=\"demo\"}", 1},
        {"attnd_model_executions_total{op=\"sdpa\",model=\"sdpa\"}", 1},
        {"attnd_model_rows_total{op=\"attention\",model=\"demo\"}", 10},
        {"attnd_model_rows_total{op=\"attention\",model=\"lesson\"}", 1},
        {"attnd_open_connections{place=\"live\"}", 1},
        {"process_cpu_seconds_total", 0.001},
        {"process_resident_memory_bytes", 1e6},
        {"process_virtual_memory_bytes", 1e6},
        {"process_open_fds", 4},
        {"process_max_fds", 64},
    };
    for (size_t i = 0; i < sizeof counted / sizeof counted[0]; i++) {
        double v = metric(port, counted[i].sample);
        CHECK(v >= counted[i].least, "/metrics: %s is %g, expected at least %g", counted[i].sample,
              v, counted[i].least);
    }
    /* A model's requests by outcome add up to its duration histogram's count (both counted when
     * a request completes; nothing else runs now). */
    double ok = metric(port, counted[0].sample), failed = metric(port, counted[1].sample);
    double timed = metric(port, "attnd_model_request_duration_seconds_count{op=\"attention\","
                                "model=\"demo\"}");
    CHECK(ok + failed == timed, "demo: %g successes and %g failures, but %g requests timed", ok,
          failed, timed);
    /* Executions are runs (a batch of several jobs is one; a job that fails in its compute is
     * one too), so at most the requests; the queue is empty now, for every model; the spare
     * places are free. */
    double runs = metric(port, "attnd_model_executions_total{op=\"attention\",model=\"demo\"}");
    CHECK(runs >= 1 && runs <= ok + failed, "demo: %g executions for %g requests", runs,
          ok + failed);
    static const char *const idle[] = {
        "attnd_model_pending_requests{op=\"attention\",model=\"demo\"}",
        "attnd_model_pending_requests{op=\"sdpa\",model=\"sdpa\"}",
        "attnd_model_pending_requests{op=\"attention\"}",
        "attnd_open_connections{place=\"spare\"}",
        "attnd_connections_closed_total{reason=\"spare_full\"}",
    };
    for (size_t i = 0; i < sizeof idle / sizeof idle[0]; i++)
        CHECK(metric(port, idle[i]) == 0, "/metrics: %s is %g, expected 0 now", idle[i],
              metric(port, idle[i]));
    /* process_start_time_seconds is the process's start, as attnd_start_time_seconds (when HTTP
     * started), to within the seconds start-up takes. */
    double t_proc = metric(port, "process_start_time_seconds");
    double t_attnd = metric(port, "attnd_start_time_seconds");
    CHECK(t_proc > 1e9 && t_proc <= t_attnd + 0.01 && t_attnd - t_proc < 10,
          "process_start_time_seconds %.2f against attnd_start_time_seconds %.2f", t_proc, t_attnd);
    /* promtool check metrics reads the exposition on stdin. */
    char tmp[700], cmd[1600];
    snprintf(tmp, sizeof tmp, "%s/metrics.txt", cfg.data);
    FILE *f = fopen(tmp, "wb");
    if (f) {
        fwrite(r.body, 1, r.len, f);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "%s check metrics < %s > %s.out 2>&1", cfg.promtool, tmp, tmp);
    int st = system(cmd);
    snprintf(cmd, sizeof cmd, "%s.out", tmp);
    char *out = slurp(cmd);
    CHECK(st == 0, "promtool check metrics failed (status %d): %.800s", st, out);
    free(out);
    reply_free(&r);

    /* The access log: one line per request with the fields, and our request id. */
    char *log = slurp(log_path);
    const char *line = strstr(log, "id=test-id_42.abc");
    CHECK(line != NULL, "the access log lacks the request id test-id_42.abc");
    const char *post_line = strstr(log, "method=POST path=/v1/attention status=200");
    CHECK(post_line != NULL, "the access log lacks a POST /v1/attention 200 line");
    if (post_line) {
        const char *eol = strchr(post_line, '\n');
        static const char *const fields[] = {
            "bytes_in=", "bytes_out=", "queue_ms=", "compute_ms=", " id="};
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
            const char *p = strstr(post_line, fields[i]);
            CHECK(p && (!eol || p < eol), "the access line lacks %s", fields[i]);
        }
        /* The whole line's form: the UTC time to the millisecond (of today, or of a minute
         * ago at midnight), the integers, and the times with 3 decimals. */
        const char *bol = post_line;
        while (bol > log && bol[-1] != '\n')
            bol--;
        size_t n = eol ? (size_t)(eol - bol) : strlen(bol);
        char *one = strndup(bol, n);
        regex_t re;
        int rc = regcomp(&re,
                         "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[.][0-9]{3}Z info "
                         "access method=POST path=/v1/attention status=200 bytes_in=[1-9][0-9]* "
                         "bytes_out=[1-9][0-9]* queue_ms=[0-9]+[.][0-9]{3} "
                         "compute_ms=[0-9]+[.][0-9]{3} parse_ms=[0-9]+[.][0-9]{3} "
                         "encode_ms=[0-9]+[.][0-9]{3} total_ms=[0-9]+[.][0-9]{3} id=",
                         REG_EXTENDED | REG_NOSUB);
        CHECK(rc == 0 && regexec(&re, one, 0, NULL, 0) == 0, "the access line's form: %s", one);
        if (rc == 0)
            regfree(&re);
        char day[2][16];
        for (int k = 0; k < 2; k++) {
            time_t t = time(NULL) - 60 * k;
            struct tm tm;
            gmtime_r(&t, &tm);
            strftime(day[k], sizeof day[k], "%Y-%m-%dT", &tm);
        }
        CHECK(!strncmp(one, day[0], 11) || !strncmp(one, day[1], 11),
              "the access line's date should be today's (UTC, %.11s): %.30s", day[0], one);
        free(one);
    }
    static const char *const startup[] = {"listening", "kernel=", "workers=", "name=demo",
                                          "name=f16"};
    for (size_t i = 0; i < sizeof startup / sizeof startup[0]; i++)
        CHECK(strstr(log, startup[i]) != NULL, "the start-up log lacks %s", startup[i]);
    free(log);
}
