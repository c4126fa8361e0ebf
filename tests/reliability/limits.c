/* limits.c - each limit of attnd answered with its status and a message that names it: JSON
 * nesting, base64 data, dimensions and heads, job memory, FLOPs, bodies (announced or streamed
 * over the cap, or stopping mid-way) and headers; and the daemon healthy after them. */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../harness.h"
#include "reliability.h"

void test_limits(void) {
    attnd d;
    const char *args[] = {"--threads",
                          "1",
                          "--pool-threads",
                          "0",
                          "--max-body-bytes",
                          "1M",
                          "--max-job-bytes",
                          "4M",
                          "--max-dim",
                          "1024",
                          "--max-heads",
                          "8",
                          "--max-depth",
                          "32",
                          "--read-timeout",
                          "5",
                          "--max-job-flops",
                          "10000000",
                          NULL};
    if (!attnd_start(&d, "limits", args, NULL))
        return;
    reply r;
    str s = {0};

    /* Nesting: 100 000 deep, arrays and objects; and a request at the limit passes. */
    str_cat(&s, "{\"q\": ");
    str_repeat(&s, "[", 100000);
    str_repeat(&s, "]", 100000);
    str_cat(&s, "}");
    post(NULL, d.port, "/v1/sdpa", s.p, s.n, &r);
    check_error(&r, 400, "invalid_json", "max_depth", "100000-deep arrays");
    reply_free(&r);
    s.n = 0;
    str_cat(&s, "{\"q\": ");
    str_repeat(&s, "{\"a\": ", 100000);
    str_cat(&s, "1");
    str_repeat(&s, "}", 100000);
    str_cat(&s, "}");
    post(NULL, d.port, "/v1/attention", s.p, s.n, &r);
    check_error(&r, 400, "invalid_json", "max_depth", "100000-deep objects");
    reply_free(&r);
    s.n = 0;
    str_cat(&s, "{\"q\": ");
    str_repeat(&s, "[", 33);
    str_repeat(&s, "]", 33);
    str_cat(&s, "}");
    post(NULL, d.port, "/v1/sdpa", s.p, s.n, &r);
    check_error(&r, 400, "invalid_json", "32 levels", "33 levels under --max-depth 32");
    reply_free(&r);
    CHECK(healthy(&d), "the daemon after deep nesting");

    /* Base64 data shorter, longer, or not base64 at all. */
    static const struct {
        const char *data, *needle, *what;
    } b64[] = {
        {"AACAPwAAgD8=", "decodes to 8 bytes", "base64 shorter than its shape"},
        {"AACAPwAAgD8AAIA/AACAPwAAgD8AAIA/", "decodes to 24 bytes", "base64 longer than its shape"},
        {"AACAPwAAgD8AAIA/AACAP", "multiple of 4", "base64 of a bad length"},
        {"AACAPwAAgD8AAIA/AACA*w==", "not valid base64", "base64 with a bad character"},
    };
    for (size_t i = 0; i < sizeof b64 / sizeof b64[0]; i++) {
        s.n = 0;
        str_printf(&s,
                   "{\"q\": {\"dtype\": \"float32\", \"shape\": [2, 2], \"data\": \"%s\"}, "
                   "\"k\": [[1, 0], [0, 1]], \"v\": [[1, 0], [0, 1]]}",
                   b64[i].data);
        post(NULL, d.port, "/v1/sdpa", s.p, s.n, &r);
        check_error(&r, 400, "invalid_field", b64[i].needle, b64[i].what);
        CHECK(strstr(r.body, "\"field\":\"q.data\"") != NULL, "%s: field %.200s", b64[i].what,
              r.body);
        reply_free(&r);
    }

    /* Dimensions, heads, job memory, rank. */
    s.n = 0;
    str_cat(&s, "{\"q\": [");
    for (int i = 0; i < 1100; i++)
        str_cat(&s, i ? ",[1]" : "[1]");
    str_cat(&s, "], \"k\": [[1]], \"v\": [[1]]}");
    post(NULL, d.port, "/v1/sdpa", s.p, s.n, &r);
    check_error(&r, 413, "job_too_large", "max_dim", "1100 rows under --max-dim 1024");
    reply_free(&r);
    post(NULL, d.port, "/v1/attention",
         "{\"query\": [[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]], \"params\": {\"init\": "
         "\"identity\", \"num_heads\": 16}}",
         0, &r);
    check_error(&r, 413, "job_too_large", "max_heads", "16 heads under --max-heads 8");
    reply_free(&r);
    /* Job memory: 500 x 500 weights (1 MB) fit --max-job-bytes 4M; 1024 x 1024 (4 MiB) do
     * not. */
    for (int big = 0; big < 2; big++) {
        size_t n = big ? 1024 : 500;
        s.n = 0;
        const char *names[3] = {"q", "k", "v"};
        for (int t = 0; t < 3; t++) {
            str_printf(&s, "%s\"%s\": {\"dtype\": \"float32\", \"shape\": [%zu, 2], \"data\": \"",
                       t ? "\"}, " : "{", names[t], n);
            str_b64_floats(&s, 2 * n);
        }
        str_cat(&s, "\"}, \"need_weights\": true, \"encoding\": \"base64\"}");
        post(NULL, d.port, "/v1/sdpa", s.p, s.n, &r);
        if (big)
            check_error(&r, 413, "job_too_large", "max_job_bytes",
                        "1024 x 1024 weights over --max-job-bytes 4M");
        else
            CHECK(r.status == 200, "500 x 500 weights under --max-job-bytes 4M: %ld %.200s",
                  r.status, r.body);
        reply_free(&r);
    }
    /* Compute: SDPA on (1024, 8) is 2 x (8 + 8) x 1024^2 = 33.6 MFLOP, over --max-job-flops 10M;
     * (512, 8) is 8.4 MFLOP, within it. */
    for (int big = 0; big < 2; big++) {
        size_t n = big ? 1024 : 512;
        s.n = 0;
        for (int t = 0; t < 3; t++) {
            str_printf(&s, "%s\"%c\": [", t ? "], " : "{", "qkv"[t]);
            for (size_t i = 0; i < n; i++)
                str_cat(&s, i ? ",[0,1,0,1,0,1,0,1]" : "[0,1,0,1,0,1,0,1]");
        }
        str_cat(&s, "]}");
        post(NULL, d.port, "/v1/sdpa", s.p, s.n, &r);
        if (big)
            check_error(&r, 413, "job_too_large", "max_job_flops",
                        "33.6 MFLOP over --max-job-flops 10000000");
        else
            CHECK(r.status == 200, "8.4 MFLOP under --max-job-flops 10000000: %ld %.200s", r.status,
                  r.body);
        reply_free(&r);
    }
    post(NULL, d.port, "/v1/sdpa", "{\"q\": [[[[[1]]]]], \"k\": [[[[[1]]]]], \"v\": [[[[[1]]]]]}",
         0, &r);
    check_error(&r, 400, "invalid_field", "dimensions", "q of rank 5 (the API takes 2 to 4)");
    reply_free(&r);

    /* Bodies: announced over the cap (refused before a byte is sent), streamed over it in
     * chunks, and one that stops mid-way (full close, then half close). */
    {
        int fd = tcp_connect(d.port);
        str q = {0};
        post_head(&q, "/v1/sdpa", (size_t)2 << 20);
        double t0 = now();
        send_all(fd, q.p, q.n);
        str out = {0};
        bool closed = read_to_end(fd, 5 * cfg.scale, &out);
        CHECK(closed && out.p && strstr(out.p, " 413 ") && strstr(out.p, "max-body-bytes"),
              "Content-Length 2 MiB over --max-body-bytes 1M: %.200s", out.p ? out.p : "nothing");
        CHECK(now() - t0 < 2 * cfg.scale, "the 413 took %.2f s without a body byte sent",
              now() - t0);
        close(fd);
        free(q.p);
        free(out.p);
    }
    {
        int fd = tcp_connect(d.port);
        str q = {0};
        str_cat(&q, "POST /v1/sdpa HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    "Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n");
        send_all(fd, q.p, q.n);
        char chunk[8200];
        int n = snprintf(chunk, sizeof chunk, "%x\r\n", 8192);
        memset(chunk + n, ' ', 8192);
        memcpy(chunk + n + 8192, "\r\n", 2);
        for (int i = 0; i < 160 && send_all(fd, chunk, (size_t)n + 8194); i++)
            ; /* 1.25 MiB, or until the server stops reading */
        send_all(fd, "0\r\n\r\n", 5);
        str out = {0};
        read_to_end(fd, 5 * cfg.scale, &out);
        CHECK(out.p && strstr(out.p, " 413 ") && strstr(out.p, "body_too_large"),
              "a chunked body over --max-body-bytes: %.200s", out.p ? out.p : "nothing");
        close(fd);
        free(q.p);
        free(out.p);
    }
    /* Content-Length 1000, 10 bytes, gone; then ten times the same ending with a FIN in the
     * same segment as the last bytes (TCP_CORK), which the server must see at once (on epoll
     * it held such connections until the idle timeout). */
    double worst_fin = 0;
    for (int i = 0; i < 11; i++) {
        int fd = tcp_connect(d.port);
        int one = 1;
        if (i > 0)
            setsockopt(fd, IPPROTO_TCP, TCP_CORK, &one, sizeof one);
        str q = {0};
        post_head(&q, "/v1/sdpa", 1000);
        str_cat(&q, "{\"q\": [[1,");
        send_all(fd, q.p, q.n);
        if (i == 0) {
            sleep_s(0.05);
            close(fd);
        } else {
            double t0 = now();
            shutdown(fd, SHUT_WR);
            read_to_end(fd, 3 * cfg.scale, NULL);
            worst_fin = now() - t0 > worst_fin ? now() - t0 : worst_fin;
            close(fd);
        }
        free(q.p);
    }
    CHECK(worst_fin < 1.0 * cfg.scale,
          "a body that stops mid-way with a FIN: the server took %.2f s to close (at once "
          "expected)",
          worst_fin);
    CHECK(healthy(&d), "the daemon after bodies that stop mid-way");
    sleep_s(0.2 * cfg.scale);
    char *log = slurp(d.log);
    CHECK(count_lines_with(log, "bytes_in=10 ", "status=0") == 11,
          "the 11 cut bodies should be logged with status 0 and 10 bytes in");
    free(log);

    /* Headers over libmicrohttpd's 32 KiB connection memory. */
    {
        int fd = tcp_connect(d.port);
        str q = {0};
        str_cat(&q, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ");
        str_repeat(&q, "a", 200000);
        str_cat(&q, "\r\n\r\n");
        send_all(fd, q.p, q.n);
        str out = {0};
        read_to_end(fd, 5 * cfg.scale, &out);
        CHECK(out.p && (strstr(out.p, " 431 ") || strstr(out.p, " 413 ") || strstr(out.p, " 400 ")),
              "200 kB of headers: %.100s", out.p ? out.p : "nothing");
        close(fd);
        free(q.p);
        free(out.p);
    }
    CHECK(healthy(&d), "the daemon after huge headers");
    free(s.p);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "limits daemon: exit status after SIGTERM");
}
