/* test_reliability.c - attnd under hostile and faulty clients: every limit answered with its
 * status and a message naming it, bodies that stop mid-way, clients that vanish before the
 * reply, slow clients (idle, trickling headers, trickling bodies), HTTP framing (RFC 9112) and
 * content codings (gzip, deflate, bombs), SIGPIPE, the API key, CORS
 * and the security headers, the default address, the daemon's memory over 20 000 mixed
 * good and bad requests, its memory with clients that never read their replies (and the reply
 * budget reserved before compute), and its job memory: reused from a large job to the next,
 * returned to the system when idle.
 *
 * Starts build/attnd itself on 127.0.0.1:0 for each scenario (with tests/harness.c, as
 * tests/test_server.c does) and talks to it with libcurl and with raw sockets where a client
 * must misbehave. Every wait is bounded; every scenario ends with the daemon exiting 0 on
 * SIGTERM.
 *
 * Usage: test_reliability --attnd build/attnd --work DIR [--only NAMES] [--time-scale F]
 *   NAMES: some of limits, faults, slow, framing, security, rss, unsent, jobmem, probes
 *   (comma-separated; default all).
 *   --time-scale multiplies every time bound, for a daemon under valgrind (rss is then
 *   skipped: meaningless there). Prints one line per failed check and "N passed, N failed";
 *   exits 1 on any failure.
 *
 * RSS bound: after a warm-up of 2 000 requests, the daemon's VmRSS may grow by at most
 * RSS_GROWTH_MAX over the next 20 000 (a leak of 100 bytes per request would be 2 MB; one of
 * a small job's arenas per request would be tens of MB). */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "../harness.h"

#define RSS_GROWTH_MAX (4 << 20) /* bytes */
#define RSS_WARMUP     2000
#define RSS_REQUESTS   20000
#define RSS_THREADS    4
#define SLOWLORIS      200 /* connections trickling headers */

typedef struct settings {
    const char *attnd, *work, *only;
    double scale; /* every time bound is multiplied by it */
} settings;

static settings cfg = {.scale = 1.0};

/* ---- Text --------------------------------------------------------------------------------- */

/* A growable string. */
typedef struct str {
    char *p;
    size_t n, cap;
} str;

static void str_add(str *s, const char *b, size_t n) {
    if (s->n + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        while (cap < s->n + n + 1)
            cap *= 2;
        char *p = realloc(s->p, cap);
        if (!p)
            abort(); /* a test helper: out of memory ends the test */
        s->p = p;
        s->cap = cap;
    }
    memcpy(s->p + s->n, b, n);
    s->n += n;
    s->p[s->n] = '\0';
}

static void str_cat(str *s, const char *text) {
    str_add(s, text, strlen(text));
}

static void str_printf(str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void str_printf(str *s, const char *fmt, ...) {
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        str_add(s, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void str_repeat(str *s, const char *piece, size_t times) {
    for (size_t i = 0; i < times; i++)
        str_add(s, piece, strlen(piece));
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Appends the base64 of n float32 values (x[i] = (i % 7) / 7) to s. */
static void str_b64_floats(str *s, size_t n) {
    unsigned char *b = malloc(n * 4 + 3);
    for (size_t i = 0; i < n; i++) {
        float f = (float)(i % 7) / 7.0f;
        memcpy(b + 4 * i, &f, 4);
    }
    size_t len = n * 4;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < len ? (uint32_t)b[i + 1] << 8 : 0) |
                     (i + 2 < len ? b[i + 2] : 0);
        char q[4] = {B64[v >> 18], B64[(v >> 12) & 63], i + 1 < len ? B64[(v >> 6) & 63] : '=',
                     i + 2 < len ? B64[v & 63] : '='};
        str_add(s, q, 4);
    }
    free(b);
}

static size_t count_lines_with(const char *text, const char *a, const char *b) {
    size_t n = 0;
    for (const char *p = text; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char *line = strndup(p, len);
        if (strstr(line, a) && (!b || strstr(line, b)))
            n++;
        free(line);
        p = eol ? eol + 1 : NULL;
    }
    return n;
}

/* ---- The daemon --------------------------------------------------------------------------- */

static bool alive(const attnd *d) {
    int st;
    return d->pid > 0 && waitpid(d->pid, &st, WNOHANG) == 0;
}

/* The daemon's resident set in bytes, from /proc; 0 when unknown. */
static size_t rss_bytes(const attnd *d) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)d->pid);
    char *s = slurp(path);
    const char *p = strstr(s, "VmRSS:");
    size_t kb = p ? (size_t)strtoull(p + 6, NULL, 10) : 0;
    free(s);
    return kb * 1024;
}

/* ---- HTTP (over the harness's libcurl requests) ------------------------------------------- */

/* Sends method path (with body, of len bytes or strlen(body) when len is 0, as JSON, and extra
 * header lines, NULL-terminated; each may be NULL) on handle c (NULL: a new one). False on a
 * transport error. */
static bool request(CURL *c, int port, const char *method, const char *path, const char *body,
                    size_t len, const char *const *hdrs, reply *r) {
    req q = {.method = method,
             .path = path,
             .ctype = body ? "application/json" : NULL,
             .body = body,
             .len = len,
             .hdr_list = hdrs};
    return http(c, port, &q, r);
}

static bool post(CURL *c, int port, const char *path, const char *body, size_t len, reply *r) {
    return request(c, port, NULL, path, body, len, NULL, r);
}

static bool healthy(const attnd *d) {
    reply r;
    bool ok = request(NULL, d->port, NULL, "/healthz", NULL, 0, NULL, &r) && r.status == 200;
    reply_free(&r);
    return ok && alive(d);
}

/* True when r has header name with exactly value (value NULL: when r lacks it). */
static bool has_header(const reply *r, const char *name, const char *value) {
    char *v = header(r, name);
    bool ok = value ? v && !strcmp(v, value) : v == NULL;
    free(v);
    return ok;
}

/* Checks an error reply: status, code, and (when given) text the message must hold. */
static void check_error(const reply *r, long status, const char *code, const char *needle,
                        const char *what) {
    CHECK(r->rc == CURLE_OK, "%s: transport error %s", what, curl_easy_strerror(r->rc));
    char want[64];
    snprintf(want, sizeof want, "\"code\":\"%s\"", code);
    CHECK(r->status == status && strstr(r->body, want), "%s: %ld %.300s; expected %ld with code %s",
          what, r->status, r->body, status, code);
    if (needle)
        CHECK(strstr(r->body, needle) != NULL, "%s: the message should name %s: %.300s", what,
              needle, r->body);
}

/* ---- Raw sockets -------------------------------------------------------------------------- */

static int tcp_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool send_all(int fd, const void *p, size_t n) {
    const char *b = p;
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w <= 0)
            return false;
        b += w;
        n -= (size_t)w;
    }
    return true;
}

/* Reads until the peer closes (true) or secs pass (false); what came is appended to out (may be
 * NULL). A reset counts as closed. */
static bool read_to_end(int fd, double secs, str *out) {
    double t0 = now();
    char buf[65536];
    for (;;) {
        double left = secs - (now() - t0);
        if (left <= 0)
            return false;
        struct pollfd p = {fd, POLLIN, 0};
        int rc = poll(&p, 1, (int)(left * 1000) + 1);
        if (rc == 0)
            continue;
        if (rc < 0)
            return false;
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return true;
        if (r > 0 && out)
            str_add(out, buf, (size_t)r);
    }
}

/* Closes fd with a reset (no FIN): a client that vanishes. */
static void close_reset(int fd) {
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

static void post_head(str *s, const char *path, size_t len) {
    str_printf(s,
               "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               "Connection: close\r\nContent-Length: %zu\r\n\r\n",
               path, len);
}

/* ---- Bodies ------------------------------------------------------------------------------- */

static const char *const SDPA_SMALL = "{\"q\": [[1, 0], [0, 1]], \"k\": [[1, 0], [0, 1]], "
                                      "\"v\": [[1, 2], [3, 4]], \"need_weights\": true}";

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

/* Self-attention of identity projections, H = 1, E = 64, on L tokens, in base64: a job that
 * computes for a while (tens of ms at L = 1024). */
static char *slow_body(size_t L) {
    str s = {0};
    str_printf(&s, "{\"query\": {\"dtype\": \"float32\", \"shape\": [%zu, 64], \"data\": \"", L);
    str_b64_floats(&s, L * 64);
    str_cat(&s, "\"}, \"params\": {\"init\": \"identity\", \"num_heads\": 1}}");
    return s.p;
}

/* ---- limits ------------------------------------------------------------------------------- */

static void test_limits(void) {
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

/* ---- faults ------------------------------------------------------------------------------- */

static void test_faults(void) {
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

/* ---- slow clients ------------------------------------------------------------------------- */

static void test_slow(void) {
    attnd d;
    const char *args[] = {
        "--threads", "1", "--pool-threads", "0", "--idle-timeout", "1", "--read-timeout",
        "2",         NULL};
    if (!attnd_start(&d, "slow", args, NULL))
        return;
    /* One idle connection, and SLOWLORIS connections sending a header byte every 100 ms. */
    int idle = tcp_connect(d.port);
    int fds[SLOWLORIS];
    size_t at[SLOWLORIS] = {0};
    bool cut[SLOWLORIS] = {false};
    double cut_at[SLOWLORIS] = {0};
    static const char head[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
                               "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                               "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    int opened = 0;
    for (int i = 0; i < SLOWLORIS; i++) {
        fds[i] = tcp_connect(d.port);
        opened += fds[i] >= 0;
    }
    CHECK(opened == SLOWLORIS, "only %d of %d slow connections opened", opened, SLOWLORIS);
    /* Meanwhile a good client sends 100 jobs on one kept-alive connection. */
    CURL *c = curl_easy_init();
    double t0 = now(), worst = 0, next_trickle = t0, idle_closed = -1;
    int good = 0, sent = 0;
    while (now() - t0 < 3.5 * cfg.scale) {
        if (now() >= next_trickle) {
            for (int i = 0; i < SLOWLORIS; i++) {
                if (fds[i] < 0 || cut[i])
                    continue;
                /* A reset or EOF from the server means it closed the connection. */
                char b;
                ssize_t rr = recv(fds[i], &b, 1, MSG_DONTWAIT);
                bool gone = rr == 0 || (rr < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
                if (!gone && at[i] < sizeof head - 1)
                    gone = send(fds[i], head + at[i], 1, MSG_NOSIGNAL) != 1;
                if (gone) {
                    cut[i] = true;
                    cut_at[i] = now() - t0;
                } else {
                    at[i]++;
                }
            }
            next_trickle += 0.1;
        }
        if (idle_closed < 0 && idle >= 0) {
            char b;
            ssize_t rr = recv(idle, &b, 1, MSG_DONTWAIT);
            if (rr == 0 || (rr < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
                idle_closed = now() - t0;
        }
        if (sent < 100) {
            reply r;
            post(c, d.port, "/v1/sdpa", SDPA_SMALL, 0, &r);
            sent++;
            good += r.status == 200;
            if (r.secs > worst)
                worst = r.secs;
            reply_free(&r);
        } else {
            sleep_s(0.01);
        }
    }
    curl_easy_cleanup(c);
    CHECK(good == 100, "%d of 100 jobs answered 200 during the slowloris", good);
    CHECK(worst < 0.25 * cfg.scale, "the slowest job took %.3f s during the slowloris", worst);
    CHECK(idle_closed > 0.5 && idle_closed < 1.8 * cfg.scale,
          "the idle connection was closed after %.2f s (--idle-timeout 1)", idle_closed);
    int ncut = 0;
    double first = 1e9, last = 0;
    for (int i = 0; i < SLOWLORIS; i++) {
        if (cut[i]) {
            ncut++;
            first = cut_at[i] < first ? cut_at[i] : first;
            last = cut_at[i] > last ? cut_at[i] : last;
        }
        if (fds[i] >= 0)
            close(fds[i]);
    }
    CHECK(ncut == SLOWLORIS && first > 1.9 && last < 3.0 * cfg.scale,
          "%d of %d trickling connections closed by --read-timeout 2, between %.2f and %.2f s",
          ncut, SLOWLORIS, ncut ? first : 0, last);
    if (idle >= 0)
        close(idle);

    /* A body trickled past the read timeout: the connection is closed (libmicrohttpd cannot
     * answer before the body ends), and the log says why. */
    {
        int fd = tcp_connect(d.port);
        str q = {0};
        post_head(&q, "/v1/sdpa", strlen(SDPA_SMALL));
        send_all(fd, q.p, q.n);
        double t1 = now(), closed_at = -1;
        for (size_t i = 0; i < strlen(SDPA_SMALL) && now() - t1 < 6 * cfg.scale; i++) {
            struct pollfd p = {fd, POLLIN, 0};
            if (poll(&p, 1, 150) > 0 || !send_all(fd, SDPA_SMALL + i, 1)) {
                closed_at = now() - t1;
                break;
            }
        }
        CHECK(closed_at > 1.9 && closed_at < 3.0 * cfg.scale,
              "a body trickled past --read-timeout 2: closed after %.2f s", closed_at);
        close(fd);
        free(q.p);
    }
    CHECK(healthy(&d), "the daemon after slow clients");
    char *log = slurp(d.log);
    CHECK(strstr(log, "read_timeout connections=") != NULL, "the log tells the cut connections");
    CHECK(count_lines_with(log, "path=/v1/sdpa", "end=read_timeout") == 1,
          "the access line of the trickled body should say end=read_timeout");
    free(log);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "slow daemon: exit status after SIGTERM");
}

/* Seconds from t0 until the server closes fd (EOF or reset), waiting at most secs; -1 if it
 * stays open. Sends one byte of text (may be NULL) every 100 ms meanwhile, from its start. */
static double closed_after(int fd, double t0, double secs, const char *text) {
    size_t at = 0;
    double next = now();
    while (now() - t0 < secs) {
        char b;
        ssize_t rr = recv(fd, &b, 1, MSG_DONTWAIT);
        if (rr == 0 || (rr < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            return now() - t0;
        if (text && text[at] && now() >= next) {
            if (send(fd, text + at, 1, MSG_NOSIGNAL) != 1)
                return now() - t0;
            at++;
            next += 0.1;
        }
        sleep_s(0.01);
    }
    return -1;
}

/* Between requests a connection is idle: --idle-timeout closes it, not --read-timeout, which
 * times a request from its first byte. */
static void test_idle(void) {
    attnd d;
    const char *args[] = {
        "--threads", "1", "--pool-threads", "0", "--idle-timeout", "3", "--read-timeout",
        "1",         NULL};
    if (!attnd_start(&d, "idle", args, NULL))
        return;
    static const char get[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    /* A kept-alive connection after a reply, and one that never sends a byte. */
    int kept = tcp_connect(d.port), fresh = tcp_connect(d.port);
    send_all(kept, get, sizeof get - 1);
    char buf[512];
    struct pollfd p = {kept, POLLIN, 0};
    poll(&p, 1, (int)(5000 * cfg.scale));
    CHECK(recv(kept, buf, sizeof buf, 0) > 0 && !strncmp(buf, "HTTP/1.1 200", 12),
          "the kept-alive connection's first reply");
    double t0 = now();
    double kept_at = closed_after(kept, t0, 6 * cfg.scale, NULL);
    double fresh_at = closed_after(fresh, t0, 6 * cfg.scale, NULL);
    CHECK(kept_at > 2.5 && kept_at < 4.5 * cfg.scale,
          "an idle kept-alive connection closed after %.2f s (--idle-timeout 3, --read-timeout "
          "1)",
          kept_at);
    CHECK(fresh_at > 2.5 && fresh_at < 4.5 * cfg.scale,
          "a connection that sent nothing closed after %.2f s (--idle-timeout 3, --read-timeout "
          "1)",
          fresh_at);
    close(kept);
    close(fresh);

    /* A request begun after 1.5 s of idleness and trickled: cut 1 s after its first byte. */
    int fd = tcp_connect(d.port);
    send_all(fd, get, sizeof get - 1);
    poll(&(struct pollfd){fd, POLLIN, 0}, 1, (int)(5000 * cfg.scale));
    CHECK(recv(fd, buf, sizeof buf, 0) > 0, "the second connection's first reply");
    sleep_s(1.5);
    double cut = closed_after(fd, now(), 6 * cfg.scale,
                              "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaa"
                              "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n");
    CHECK(cut > 0.9 && cut < 2.0 * cfg.scale,
          "a request trickled after 1.5 s of idleness was cut %.2f s after its first byte "
          "(--read-timeout 1)",
          cut);
    close(fd);
    CHECK(healthy(&d), "the daemon after idle connections");
    CHECK(attnd_stop(&d, SIGTERM) == 0, "idle daemon: exit status after SIGTERM");
    char *log = slurp(d.log);
    CHECK(count_lines_with(log, "info idle_timeout ", NULL) >= 2,
          "the log should say idle_timeout for the two idle connections");
    CHECK(count_lines_with(log, "read_timeout connections=1", NULL) == 1,
          "the log should say read_timeout only for the trickled request");
    free(log);
}

/* Requests begun soon after a reply on a kept-alive connection, then stalled: the read timeout
 * cuts them, as it cuts one begun later. The byte count at which idleness began is read by the
 * reaper (every 0.25 s here), so on most connections it looks only after the next request's
 * first bytes have come, and must still tell them from the last request's. First, part of a
 * request line sent 120 ms after the reply (seen by the byte count: fails with a reaper that
 * takes its first count as the baseline); then a whole request line and part of the headers
 * sent at once (seen by the request line, within the 20 ms the byte count cannot tell). */
static void stalled_after_reply(int port, const char *part, double gap, const char *what) {
    static const char get[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    enum { CONNS = 10 };
    int fd[CONNS];
    double first[CONNS], closed[CONNS];
    for (int i = 0; i < CONNS; i++) {
        fd[i] = tcp_connect(port);
        send_all(fd[i], get, sizeof get - 1);
        char buf[512];
        poll(&(struct pollfd){fd[i], POLLIN, 0}, 1, (int)(5000 * cfg.scale));
        CHECK(recv(fd[i], buf, sizeof buf, 0) > 0 && !strncmp(buf, "HTTP/1.1 200", 12),
              "%s, connection %d: the first reply", what, i);
        if (gap > 0)
            sleep_s(gap);
        first[i] = now();
        send_all(fd[i], part, strlen(part));
        closed[i] = -1;
    }
    for (int open = CONNS; open > 0 && now() - first[0] < 12 * cfg.scale;) {
        for (int i = 0; i < CONNS; i++) {
            char b;
            ssize_t r = closed[i] < 0 ? recv(fd[i], &b, 1, MSG_DONTWAIT) : 1;
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                closed[i] = now() - first[i];
                open--;
            }
        }
        sleep_s(0.01);
    }
    for (int i = 0; i < CONNS; i++) {
        CHECK(closed[i] > 1.9 && closed[i] < 3.0 * cfg.scale,
              "%s, connection %d: closed %.2f s after its first byte (--read-timeout 2, "
              "--idle-timeout 6)",
              what, i, closed[i]);
        close(fd[i]);
    }
}

static void test_begun_after_reply(void) {
    attnd d;
    const char *args[] = {
        "--threads", "1", "--pool-threads", "0", "--idle-timeout", "6", "--read-timeout",
        "2",         NULL};
    if (!attnd_start(&d, "after_reply", args, NULL))
        return;
    stalled_after_reply(d.port, "GET /healthz HTT", 0.12,
                        "part of a request line 120 ms after a reply, stalled");
    stalled_after_reply(d.port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Stalled: 1", 0,
                        "a request line at once after a reply, its headers stalled");
    CHECK(healthy(&d), "the daemon after requests stalled after a reply");
    CHECK(attnd_stop(&d, SIGTERM) == 0, "after_reply daemon: exit status after SIGTERM");
}

/* ---- security ----------------------------------------------------------------------------- */

static void test_security(void) {
    static const char key[] = "k3y-0f-the-test_6a1f9c";
    char keyfile[800], auth[128];
    snprintf(keyfile, sizeof keyfile, "%s/api.key", cfg.work);
    FILE *f = fopen(keyfile, "w");
    if (!CHECK(f != NULL, "cannot write %s", keyfile))
        return;
    fprintf(f, "%s\n", key);
    fclose(f);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
    attnd d;
    const char *args[] = {"--api-key-file", keyfile, "--cors-origins", "http://allowed.example",
                          NULL};
    if (!attnd_start(&d, "security", args, NULL))
        return;
    reply r;
    const char *const allowed[] = {"Origin: http://allowed.example", NULL};
    const char *const allowed_key[] = {"Origin: http://allowed.example", auth, NULL};
    const char *const foreign_key[] = {"Origin: http://evil.example", auth, NULL};

    /* Without the key: 401 with WWW-Authenticate, and CORS headers so a page can read it. */
    request(NULL, d.port, NULL, "/v1/sdpa", SDPA_SMALL, 0, allowed, &r);
    check_error(&r, 401, "unauthorized", "Bearer", "a job without the key");
    CHECK(has_header(&r, "Access-Control-Allow-Origin", "http://allowed.example") &&
              has_header(&r, "Vary", "Origin"),
          "a 401 to an allowed origin should carry its CORS headers: %s", r.hdr);
    char *wa = header(&r, "WWW-Authenticate");
    CHECK(wa && !strncmp(wa, "Bearer realm=", 13), "401: WWW-Authenticate %s", wa ? wa : "none");
    free(wa);
    reply_free(&r);
    /* With it: 200 and the headers every answer carries. */
    request(NULL, d.port, NULL, "/v1/sdpa", SDPA_SMALL, 0, allowed_key, &r);
    CHECK(r.status == 200, "a job with the key: %ld %.200s", r.status, r.body);
    CHECK(has_header(&r, "X-Content-Type-Options", "nosniff") &&
              has_header(&r, "Referrer-Policy", "no-referrer") &&
              has_header(&r, "Cache-Control", "no-store") &&
              has_header(&r, "Access-Control-Allow-Origin", "http://allowed.example"),
          "an API answer's headers: %s", r.hdr);
    reply_free(&r);
    /* A foreign origin gets no CORS header, but Vary: Origin (caches must not mix them). */
    request(NULL, d.port, NULL, "/v1/sdpa", SDPA_SMALL, 0, foreign_key, &r);
    CHECK(r.status == 200 && has_header(&r, "Access-Control-Allow-Origin", NULL) &&
              has_header(&r, "Vary", "Origin"),
          "a foreign origin: %ld %s", r.status, r.hdr);
    reply_free(&r);
    /* Preflights need no key; a foreign origin or a method the route does not take: 403. */
    const char *const pre_ok[] = {
        "Origin: http://allowed.example", "Access-Control-Request-Method: POST",
        "Access-Control-Request-Headers: authorization, content-type", NULL};
    request(NULL, d.port, "OPTIONS", "/v1/attention", NULL, 0, pre_ok, &r);
    CHECK(r.status == 204 &&
              has_header(&r, "Access-Control-Allow-Origin", "http://allowed.example"),
          "a preflight from the allowed origin: %ld %s", r.status, r.hdr);
    reply_free(&r);
    const char *const pre_put[] = {"Origin: http://allowed.example",
                                   "Access-Control-Request-Method: PUT", NULL};
    request(NULL, d.port, "OPTIONS", "/v1/attention", NULL, 0, pre_put, &r);
    check_error(&r, 403, "cors_rejected", "PUT", "a preflight for PUT");
    reply_free(&r);
    const char *const pre_evil[] = {"Origin: http://allowed.example.evil.example",
                                    "Access-Control-Request-Method: POST", NULL};
    request(NULL, d.port, "OPTIONS", "/v1/attention", NULL, 0, pre_evil, &r);
    check_error(&r, 403, "cors_rejected", NULL,
                "a preflight from an origin that only starts alike");
    reply_free(&r);
    /* Probes stay open; everything else needs the key. */
    static const char *const open_paths[] = {"/healthz", "/readyz"};
    static const char *const closed_paths[] = {"/metrics", "/v1/models", "/", "/openapi.yaml"};
    for (size_t i = 0; i < 2; i++) {
        request(NULL, d.port, NULL, open_paths[i], NULL, 0, NULL, &r);
        CHECK(r.status == 200, "%s without the key: %ld", open_paths[i], r.status);
        reply_free(&r);
    }
    for (size_t i = 0; i < 4; i++) {
        request(NULL, d.port, NULL, closed_paths[i], NULL, 0, NULL, &r);
        CHECK(r.status == 401, "%s without the key: %ld", closed_paths[i], r.status);
        reply_free(&r);
    }
    /* Near misses: each refused, none logged. */
    char near[4][160];
    snprintf(near[0], sizeof near[0], "Authorization: Bearer %.*s", (int)sizeof key - 2, key);
    snprintf(near[1], sizeof near[1], "Authorization: Bearer %sX", key);
    snprintf(near[2], sizeof near[2], "Authorization: Basic %s", key);
    snprintf(near[3], sizeof near[3], "Authorization: Bearer%s", key);
    for (int i = 0; i < 4; i++) {
        const char *const h[] = {near[i], NULL};
        request(NULL, d.port, NULL, "/v1/models", NULL, 0, h, &r);
        CHECK(r.status == 401, "a near miss of the key (%d): %ld", i, r.status);
        reply_free(&r);
    }
    CHECK(attnd_stop(&d, SIGTERM) == 0, "security daemon: exit status after SIGTERM");
    char *log = slurp(d.log);
    CHECK(!strstr(log, key) && !strstr(log, "k3y-0f"), "the API key appears in the log");
    free(log);

    /* The default address is 127.0.0.1:8080: the daemon listens there, or says it cannot. */
    {
        attnd dd = {0};
        snprintf(dd.log, sizeof dd.log, "%s/default-listen.log", cfg.work);
        unlink(dd.log);
        dd.pid = fork();
        if (dd.pid == 0) {
            int fd = open(dd.log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(fd, 2);
            dup2(fd, 1);
            unsetenv("ATTND_LISTEN");
            execl(cfg.attnd, cfg.attnd, (char *)NULL);
            _exit(127);
        }
        double t0 = now();
        char *l = NULL;
        bool seen = false;
        while (!seen && now() - t0 < 20 * cfg.scale) {
            free(l);
            l = slurp(dd.log);
            seen = strstr(l, "address=127.0.0.1:8080") || strstr(l, "listen on 127.0.0.1:8080");
            if (!seen)
                sleep_s(0.02);
        }
        CHECK(seen, "without --listen, attnd should use 127.0.0.1:8080: %.300s", l ? l : "");
        free(l);
        attnd_stop(&dd, SIGTERM);
    }
}

/* ---- rss ---------------------------------------------------------------------------------- */

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

static void test_rss(void) {
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

/* ---- HTTP framing and content codings ------------------------------------------------------ */

/* What one raw exchange brought back. */
typedef struct exchange {
    str out;     /* every byte the server sent */
    bool closed; /* the server closed the connection */
    double secs; /* until it closed, or the wait ran out */
    int lines;   /* status lines ("HTTP/1.x NNN " at the start of a line) */
    long status; /* the first one's code */
} exchange;

/* Sends raw (n bytes) on a new connection and reads until the server closes it or secs pass.
 * The write side stays open: whatever closes the connection is the server. */
static void exchange_raw(int port, const char *raw, size_t n, double secs, exchange *x) {
    memset(x, 0, sizeof *x);
    int fd = tcp_connect(port);
    double t0 = now();
    send_all(fd, raw, n);
    x->closed = read_to_end(fd, secs, &x->out);
    x->secs = now() - t0;
    close(fd);
    if (!x->out.p)
        str_add(&x->out, "", 0);
    for (const char *p = x->out.p; (p = strstr(p, "HTTP/1.")) != NULL; p += 7)
        if ((p == x->out.p || p[-1] == '\n') && p[8] == ' ') {
            if (x->lines++ == 0)
                x->status = atol(p + 9);
        }
}

/* Checks an exchange: one status line with status, a JSON error with code (NULL: no JSON body is
 * asked for), and the connection closed (close) within 2 s, or left open. */
static void check_exchange(const exchange *x, long status, const char *code, bool close_it,
                           const char *what) {
    CHECK(x->lines == 1 && x->status == status,
          "%s: %d status lines, the first %ld; expected one %ld: %.300s", what, x->lines, x->status,
          status, x->out.p);
    if (code) {
        char want[64];
        snprintf(want, sizeof want, "\"code\":\"%s\"", code);
        CHECK(strstr(x->out.p, want) != NULL, "%s: expected the JSON error %s: %.300s", what, code,
              x->out.p);
    }
    if (close_it)
        CHECK(x->closed && x->secs < 2 * cfg.scale,
              "%s: the connection should be closed at once "
              "(closed %d after %.2f s)",
              what, x->closed, x->secs);
    else
        CHECK(!x->closed, "%s: the connection should stay open", what);
}

/* body (n bytes) compressed as gzip (gzip true) or zlib (deflate), appended to out. */
static void compress_to(str *out, const void *body, size_t n, bool gzip) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 9, Z_DEFLATED, gzip ? 31 : 15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return;
    z.next_in = (Bytef *)body;
    z.avail_in = (uInt)n;
    unsigned char buf[65536];
    int rc;
    do {
        z.next_out = buf;
        z.avail_out = sizeof buf;
        rc = deflate(&z, Z_FINISH);
        str_add(out, (const char *)buf, sizeof buf - z.avail_out);
    } while (rc == Z_OK);
    deflateEnd(&z);
}

/* A POST of body (n bytes) to path with extra header lines (each ending in \r\n). */
static void post_with(str *q, const char *path, const char *extra, const void *body, size_t n) {
    str_printf(q,
               "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               "Content-Length: %zu\r\n%s\r\n",
               path, n, extra);
    str_add(q, body, n);
}

static void test_framing(void) {
    attnd d;
    const char *args[] = {
        "--threads", "1", "--pool-threads", "0", "--http-threads", "1", "--max-body-bytes",
        "1M",        NULL};
    if (!attnd_start(&d, "framing", args, NULL))
        return;
    exchange x;
    str q = {0};
    const char *body = SDPA_SMALL;
    size_t bl = strlen(body);
    static const char head[] = "POST /v1/sdpa HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "Content-Type: application/json\r\n";

    /* Request smuggling: two different Content-Lengths, or Content-Length with chunked. */
    str_printf(&q, "%sContent-Length: %zu\r\nContent-Length: 5\r\n\r\n%s", head, bl, body);
    exchange_raw(d.port, q.p, q.n, 5 * cfg.scale, &x);
    check_exchange(&x, 400, "invalid_request", true, "two different Content-Lengths");
    CHECK(strstr(x.out.p, "Content-Length") != NULL, "the 400 should name Content-Length");
    free(x.out.p);
    q.n = 0;
    str_printf(&q, "%sContent-Length: %zu\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
               head, bl, bl, body);
    exchange_raw(d.port, q.p, q.n, 5 * cfg.scale, &x);
    check_exchange(&x, 200, NULL, true, "two equal Content-Lengths (accepted as one)");
    free(x.out.p);
    q.n = 0;
    str_printf(&q,
               "%sContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n",
               head, bl, body);
    exchange_raw(d.port, q.p, q.n, 5 * cfg.scale, &x);
    check_exchange(&x, 400, "invalid_request", true, "Content-Length with chunked");
    free(x.out.p);
    /* Whitespace between a field name and its colon (RFC 9112 section 5.1: 400). libmicrohttpd
     * keeps it in the name and frames by neither field, so the body would be read as a second
     * request: here a GET /metrics behind each. One status line, and the connection closed. */
    static const char smuggled[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    static const struct {
        const char *fields, *what;
    } ws[] = {
        {"Content-Length : %zu\r\n", "Content-Length followed by a space"},
        {"Content-Length\t: %zu\r\n", "Content-Length followed by a tab"},
        {"Transfer-Encoding : chunked\r\nContent-Length: %zu\r\n", "TE.CL: Transfer-Encoding "
                                                                   "followed by a space"},
        {"Content-Length: %zu\r\nX-Pad : 1\r\n", "another field followed by a space"},
    };
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        q.n = 0;
        str_cat(&q, head);
        str_printf(&q, ws[i].fields, sizeof smuggled - 1);
        str_printf(&q, "\r\n%s", smuggled);
        exchange_raw(d.port, q.p, q.n, 5 * cfg.scale, &x);
        check_exchange(&x, 400, "invalid_request", true, ws[i].what);
        CHECK(strstr(x.out.p, "whitespace before") != NULL &&
                  strstr(x.out.p, "attnd_requests_total") == NULL,
              "%s: the 400 should name the whitespace, and no /metrics follow: %.300s", ws[i].what,
              x.out.p);
        free(x.out.p);
    }
    /* Line endings and folding, read off the wire (wire.c): libmicrohttpd takes a bare LF as the
     * end of a header, chunk-size or trailer line and after a chunk's data, and folds a line
     * that begins with whitespace; attnd refuses each with 400 and closes, and the request
     * hidden behind it (a GET /metrics) is never read. */
    static const struct {
        const char *head, *chunks, *why; /* head fields; then the chunked body (%zx, %s) */
    } wire[] = {
        {"Transfer-Encoding: chunked\r\n", "%zx\n%s\r\n0\r\n\r\n", "chunk-size line"},
        {"Transfer-Encoding: chunked\r\n", "%zx\r\n%s\n0\r\n\r\n", "chunk's data"},
        {"Transfer-Encoding: chunked\r\n", "%zx\r\n%s\r\n0\n\r\n", "chunk-size line"},
        {"Transfer-Encoding: chunked\r\n", "%zx\r\n%s\r\n0\r\nX-T: 1\n\r\n", "trailer line"},
        {"Transfer-Encoding: chunked\r\n", "%zx\r\n%sXY\r\n0\r\n\r\n", "longer than its size"},
        {"X-Pad: 1\n", NULL, "request head"},
        {"X-Pad: 1\r\n  2\r\n", NULL, "folded"},
        {"X-Pad: 1\r2\r\n", NULL, "CR not followed by LF"},
    };
    for (size_t i = 0; i < sizeof wire / sizeof wire[0]; i++) {
        q.n = 0;
        str_printf(&q, "%s%s", head, wire[i].head);
        if (wire[i].chunks) {
            str_cat(&q, "\r\n");
            str_printf(&q, wire[i].chunks, bl, body);
        } else {
            str_printf(&q, "Content-Length: %zu\r\n\r\n%s", bl, body);
        }
        str_cat(&q, smuggled);
        exchange_raw(d.port, q.p, q.n, 5 * cfg.scale, &x);
        char what[96];
        snprintf(what, sizeof what, "wire case %zu (%s)", i, wire[i].why);
        check_exchange(&x, 400, "invalid_request", true, what);
        CHECK(strstr(x.out.p, wire[i].why) != NULL && strstr(x.out.p, "attnd_requests") == NULL,
              "%s: the 400 should say why, and no /metrics follow: %.300s", what, x.out.p);
        free(x.out.p);
    }
    /* The same framings done right, one after another on one keep-alive connection: a body by
     * Content-Length, a chunked one with an extension and a trailer, a GET; each answered. */
    {
        int fd = tcp_connect(d.port);
        str one = {0};
        for (int k = 0; k < 3; k++) {
            one.n = 0;
            if (k == 0)
                str_printf(&one, "%sContent-Length: %zu\r\n\r\n%s", head, bl, body);
            else if (k == 1)
                str_printf(&one,
                           "%sTransfer-Encoding: chunked\r\n\r\n%zx;ext=1\r\n%s\r\n0\r\nX-T: "
                           "1\r\n\r\n",
                           head, bl, body);
            else
                str_cat(&one,
                        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
            send_all(fd, one.p, one.n);
            str got = {0};
            double t0 = now();
            while (now() - t0 < 5 * cfg.scale) { /* until this reply's body has come */
                struct pollfd pf = {fd, POLLIN, 0};
                if (poll(&pf, 1, 100) != 1)
                    continue;
                char b[4096];
                ssize_t r = recv(fd, b, sizeof b, 0);
                if (r <= 0)
                    break;
                str_add(&got, b, (size_t)r);
                const char *end = strstr(got.p, "\r\n\r\n");
                const char *cl = got.p ? strstr(got.p, "Content-Length: ") : NULL;
                if (end && cl && (size_t)(got.p + got.n - (end + 4)) >= (size_t)atol(cl + 16))
                    break;
            }
            str_add(&got, "", 1);
            CHECK(strncmp(got.p, "HTTP/1.1 200", 12) == 0,
                  "keep-alive request %d (%s) should get 200: %.200s", k,
                  k == 0   ? "Content-Length"
                  : k == 1 ? "chunked, extension, trailer"
                           : "GET",
                  got.p);
            free(got.p);
        }
        free(one.p);
        close(fd);
    }
    /* Transfer codings other than plain chunked: 501 at once, not a wait for the read timeout. */
    static const char *const te[] = {"gzip, chunked", "identity", "chunked, chunked", "br"};
    for (size_t i = 0; i < sizeof te / sizeof te[0]; i++) {
        q.n = 0;
        str_printf(&q, "%sTransfer-Encoding: %s\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n", head, te[i], bl,
                   body);
        exchange_raw(d.port, q.p, q.n, 5 * cfg.scale, &x);
        char what[80];
        snprintf(what, sizeof what, "Transfer-Encoding: %s", te[i]);
        check_exchange(&x, 501, "not_implemented", true, what);
        free(x.out.p);
    }
    q.n = 0;
    str_cat(&q, "GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n");
    exchange_raw(d.port, q.p, q.n, 5 * cfg.scale, &x);
    check_exchange(&x, 501, "not_implemented", true, "GET with Transfer-Encoding: identity");
    free(x.out.p);
    /* Host: required once in HTTP/1.1 (kept open in HTTP/1.0 without it). */
    static const char *const hosts[] = {
        "GET /healthz HTTP/1.1\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    };
    for (size_t i = 0; i < 2; i++) {
        exchange_raw(d.port, hosts[i], strlen(hosts[i]), 5 * cfg.scale, &x);
        check_exchange(&x, 400, "invalid_request", true, i ? "two Host headers" : "no Host");
        CHECK(strstr(x.out.p, "Host") != NULL, "the 400 should name Host: %.300s", x.out.p);
        free(x.out.p);
    }
    exchange_raw(d.port, "GET /healthz HTTP/1.0\r\n\r\n", 25, 5 * cfg.scale, &x);
    check_exchange(&x, 200, NULL, true, "HTTP/1.0 without Host");
    free(x.out.p);
    /* A Content-Length that is not a number, or past 2^64: one reply (libmicrohttpd 0.9.75 wrote
     * its own, with its status line and headers twice), attnd's JSON. */
    static const struct {
        const char *value, *code;
        long status;
    } bad_cl[] = {{"abc", "invalid_request", 400},
                  {"-1", "invalid_request", 400},
                  {"12345678901234567890123", "body_too_large", 413}};
    for (size_t i = 0; i < 3; i++) {
        q.n = 0;
        str_printf(&q, "%sContent-Length: %s\r\n\r\n%s", head, bad_cl[i].value, body);
        exchange_raw(d.port, q.p, q.n, 5 * cfg.scale, &x);
        char what[80];
        snprintf(what, sizeof what, "Content-Length: %s", bad_cl[i].value);
        check_exchange(&x, bad_cl[i].status, bad_cl[i].code, true, what);
        CHECK(strstr(x.out.p, "Content-Length is") != NULL, "%s: the message: %.300s", what,
              x.out.p);
        free(x.out.p);
    }
    /* ...but never to another connection: with a second request line waiting on the same HTTP
     * thread, which of the two is refused cannot be told, and that one request ends as
     * libmicrohttpd ends it, while the other goes on unharmed. */
    {
        int other = tcp_connect(d.port);
        send_all(other, head, 24); /* "POST /v1/sdpa HTTP/1.1\r\n" */
        sleep_s(0.1);
        q.n = 0;
        str_printf(&q, "%sContent-Length: abc\r\n\r\n", head);
        exchange_raw(d.port, q.p, q.n, 5 * cfg.scale, &x);
        CHECK(x.closed && x.status == 400,
              "a bad Content-Length beside another request line: %.200s", x.out.p);
        free(x.out.p);
        q.n = 0;
        str_printf(&q, "%sContent-Length: %zu\r\nConnection: close\r\n\r\n%s", head + 24, bl, body);
        send_all(other, q.p, q.n);
        str out = {0};
        read_to_end(other, 5 * cfg.scale, &out);
        CHECK(out.p && !strncmp(out.p, "HTTP/1.1 200 ", 13) && strstr(out.p, "\"output\""),
              "the other request, finished after the refusal: %.200s", out.p ? out.p : "nothing");
        free(out.p);
        close(other);
    }

    /* Content-Encoding: gzip and deflate bodies decoded, on a kept-alive connection too. */
    reply plain;
    post(NULL, d.port, "/v1/sdpa", body, bl, &plain);
    CHECK(plain.status == 200, "the plain request: %ld", plain.status);
    static const char *const codings[] = {"gzip", "deflate", "x-gzip", "GZip"};
    for (size_t i = 0; i < 4; i++) {
        str z = {0};
        compress_to(&z, body, bl, i != 1);
        char ce[64];
        snprintf(ce, sizeof ce, "Content-Encoding: %s", codings[i]);
        const char *const hdrs[] = {ce, NULL};
        reply r;
        request(NULL, d.port, NULL, "/v1/sdpa", z.p, z.n, hdrs, &r);
        /* The usage times differ; the answer before them must not. */
        const char *u1 = strstr(r.body, "\"usage\""), *u2 = strstr(plain.body, "\"usage\"");
        CHECK(r.status == 200 && u1 && u2 && u1 - r.body == u2 - plain.body &&
                  !strncmp(r.body, plain.body, (size_t)(u1 - r.body)),
              "a %s body: %ld %.200s", codings[i], r.status, r.body);
        reply_free(&r);
        free(z.p);
    }
    reply_free(&plain);
    /* A gzip bomb: 64 MiB of spaces in about 64 KB, against --max-body-bytes 1M: 413 without
     * inflating past the limit. */
    {
        size_t n = (size_t)64 << 20;
        char *spaces = malloc(n);
        memset(spaces, ' ', n);
        memcpy(spaces, "{", 1);
        str z = {0};
        compress_to(&z, spaces, n, true);
        free(spaces);
        q.n = 0;
        post_with(&q, "/v1/sdpa", "Content-Encoding: gzip\r\nConnection: close\r\n", z.p, z.n);
        size_t rss0 = rss_bytes(&d);
        exchange_raw(d.port, q.p, q.n, 10 * cfg.scale, &x);
        size_t rss1 = rss_bytes(&d);
        check_exchange(&x, 413, "body_too_large", true, "a gzip bomb (64 MiB in 64 KB)");
        CHECK(strstr(x.out.p, "decoded") != NULL, "the 413 should say the decoded body: %.300s",
              x.out.p);
        CHECK(cfg.scale > 1 || rss1 < rss0 + ((size_t)8 << 20),
              "a gzip bomb grew RSS from %zu to %zu", rss0, rss1); /* not under valgrind */
        printf("test_reliability: gzip bomb of %zu bytes (64 MiB decoded): %.3f s to its 413\n",
               z.n, x.secs);
        free(x.out.p);
        free(z.p);
    }
    /* Bad streams: 400 naming the coding; codings attnd does not know: 415 naming them. */
    {
        str z = {0};
        compress_to(&z, body, bl, true);
        static const struct {
            const char *what, *extra;
            size_t len; /* of the gzip stream sent; 0 = garbage instead */
            const char *needle;
        } bad[] = {
            {"garbage labelled gzip", "Content-Encoding: gzip\r\nConnection: close\r\n", 0, "gzip"},
            {"a truncated gzip stream", "Content-Encoding: gzip\r\nConnection: close\r\n", 1,
             "gzip"},
            {"gzip labelled deflate", "Content-Encoding: deflate\r\nConnection: close\r\n", 2,
             "deflate"},
        };
        for (size_t i = 0; i < 3; i++) {
            q.n = 0;
            const char *data = bad[i].len ? z.p : body;
            size_t len = bad[i].len == 1 ? z.n / 2 : bad[i].len ? z.n : bl;
            post_with(&q, "/v1/sdpa", bad[i].extra, data, len);
            exchange_raw(d.port, q.p, q.n, 5 * cfg.scale, &x);
            check_exchange(&x, 400, "invalid_encoding", true, bad[i].what);
            CHECK(strstr(x.out.p, bad[i].needle) != NULL, "%s: the 400 should name %s: %.300s",
                  bad[i].what, bad[i].needle, x.out.p);
            free(x.out.p);
        }
        static const char *const unknown[] = {"br", "zstd", "gzip, gzip", "compress"};
        for (size_t i = 0; i < 4; i++) {
            char extra[64];
            snprintf(extra, sizeof extra, "Content-Encoding: %s\r\n", unknown[i]);
            q.n = 0;
            post_with(&q, "/v1/sdpa", extra, body, bl);
            exchange_raw(d.port, q.p, q.n, 5 * cfg.scale, &x);
            check_exchange(&x, 415, "unsupported_media_type", true, unknown[i]);
            CHECK(strstr(x.out.p, unknown[i]) != NULL, "the 415 should name %s: %.300s", unknown[i],
                  x.out.p);
            free(x.out.p);
        }
        free(z.p);
    }
    /* The replies libmicrohttpd writes itself: 414, 505 and 431, no JSON body, then closed. */
    {
        str big = {0};
        str_cat(&big, "GET /");
        str_repeat(&big, "a", 40000);
        str_cat(&big, " HTTP/1.1\r\nHost: x\r\n\r\n");
        exchange_raw(d.port, big.p, big.n, 5 * cfg.scale, &x);
        check_exchange(&x, 414, NULL, true, "a 40 kB URI");
        free(x.out.p);
        big.n = 0;
        str_cat(&big, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ");
        str_repeat(&big, "a", 40000);
        str_cat(&big, "\r\n\r\n");
        exchange_raw(d.port, big.p, big.n, 5 * cfg.scale, &x);
        check_exchange(&x, 431, NULL, true, "40 kB of headers");
        free(x.out.p);
        free(big.p);
        exchange_raw(d.port, "GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 35, 5 * cfg.scale, &x);
        check_exchange(&x, 505, NULL, true, "HTTP/2.0 in a request line");
        free(x.out.p);
    }
    free(q.p);
    CHECK(healthy(&d), "the daemon after framing errors");
    CHECK(attnd_stop(&d, SIGTERM) == 0, "framing daemon: exit status after SIGTERM");
}

/* ---- probes beside costly requests ---------------------------------------------------------- */

#define PROBE_BOUND_S 0.5 /* far below the seconds such requests held the HTTP threads */
#define DOS_CLIENTS   4
#define DOS_WINDOW_S  3.0

/* A tensor whose nested arrays declare (m, 1, m, 1) by their first elements, though the body
 * holds only about 4 m bytes of it: "[[[[0],0,...]],0,...]". */
static void str_declared_4d(str *s, size_t m) {
    str_cat(s, "[[[[0]");
    str_repeat(s, ",0", m - 1);
    str_cat(s, "]]");
    str_repeat(s, ",0", m - 1);
    str_cat(s, "]");
}

/* The issue's request: q, k and v each declaring (65536, 1, 65536, 1) in about 262 KB, with
 * bottom-right causal masking. */
static char *declared_body(size_t m) {
    str s = {0};
    const char *names[3] = {"q", "k", "v"};
    for (int t = 0; t < 3; t++) {
        str_printf(&s, "%s\"%s\": ", t ? ", " : "{", names[t]);
        str_declared_4d(&s, m);
    }
    str_cat(&s, ", \"causal\": \"bottom_right\"}");
    return s.p;
}

typedef struct dos_ctx {
    int port;
    const char *req; /* the whole request, headers and body */
    size_t len;
    double until;
    int sent;
} dos_ctx;

/* Sends the request again and again on new connections until ctx->until, each time reading the
 * answer only until then. */
static void *dos_main(void *arg) {
    dos_ctx *c = arg;
    while (now() < c->until) {
        int fd = tcp_connect(c->port);
        if (fd < 0)
            break;
        if (send_all(fd, c->req, c->len))
            c->sent++;
        read_to_end(fd, c->until - now(), NULL);
        close_reset(fd);
    }
    return NULL;
}

/* GET /healthz and /readyz stay fast while requests that declare huge shapes in small bodies
 * arrive on several connections: refusing such a request costs time bounded by its body, not
 * by its declared shape, and never holds the HTTP threads. */
static void test_probes(void) {
    attnd d;
    if (!attnd_start(&d, "probes", NULL, NULL)) /* the defaults: 2 HTTP threads */
        return;
    char *body = declared_body(65536);
    str raw = {0};
    post_head(&raw, "/v1/sdpa", strlen(body));
    str_cat(&raw, body);
    pthread_t th[DOS_CLIENTS];
    dos_ctx ctx[DOS_CLIENTS];
    double t0 = now();
    for (int i = 0; i < DOS_CLIENTS; i++) {
        ctx[i] = (dos_ctx){d.port, raw.p, raw.n, t0 + DOS_WINDOW_S * cfg.scale, 0};
        pthread_create(&th[i], NULL, dos_main, &ctx[i]);
    }
    sleep_s(0.2);          /* the first bodies are in */
    harness_http_secs = 5; /* a liveness probe's patience, or more */
    double worst = 0;
    int probes = 0, good = 0;
    const char *worst_path = "";
    while (now() - t0 < DOS_WINDOW_S * cfg.scale) {
        static const char *const paths[] = {"/healthz", "/readyz"};
        for (int k = 0; k < 2; k++) {
            reply r;
            request(NULL, d.port, NULL, paths[k], NULL, 0, NULL, &r);
            probes++;
            good += r.status == 200;
            if (r.secs > worst) {
                worst = r.secs;
                worst_path = paths[k];
            }
            reply_free(&r);
        }
        sleep_s(0.05);
    }
    harness_http_secs = 30;
    int sent = 0;
    for (int i = 0; i < DOS_CLIENTS; i++) {
        pthread_join(th[i], NULL);
        sent += ctx[i].sent;
    }
    printf("test_reliability: probes: %d probes beside %d requests of %zu bytes declaring "
           "(65536, 1, 65536, 1) on %d connections: slowest %.1f ms (%s; bound %.0f ms)\n",
           probes, sent, strlen(body), DOS_CLIENTS, worst * 1e3, worst_path, PROBE_BOUND_S * 1e3);
    CHECK(good == probes, "%d of %d probes answered 200", good, probes);
    CHECK(worst <= PROBE_BOUND_S * cfg.scale,
          "the slowest probe (%s) took %.1f ms beside requests declaring huge shapes (bound %.0f "
          "ms)",
          worst_path, worst * 1e3, PROBE_BOUND_S * 1e3);
    free(raw.p);
    free(body);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "probes daemon: exit status after SIGTERM");
}

/* ---- unsent replies ------------------------------------------------------------------------ */

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

/* SDPA on n x 2 base64 tensors with need_weights: a body of about 32 n bytes whose JSON reply
 * (the n x n weights) is about 13 n^2 bytes. */
static char *weights_body(size_t n) {
    str s = {0};
    const char *names[3] = {"q", "k", "v"};
    for (int t = 0; t < 3; t++) {
        str_printf(&s, "%s\"%s\": {\"dtype\": \"float32\", \"shape\": [%zu, 2], \"data\": \"",
                   t ? "\"}, " : "{", names[t], n);
        str_b64_floats(&s, 2 * n);
    }
    str_cat(&s, "\"}, \"need_weights\": true}");
    return s.p;
}

/* Clients that send jobs with large replies and never read them: the replies held for them stay
 * within --max-unsent-bytes, the daemon's RSS within the bound SECURITY.md states, later jobs get
 * 503 reply_budget, and the budget frees when the clients go away. */
static void test_unsent(void) {
    enum { CLIENTS = 24 };
    const size_t conns = 32, body_max = 256 << 10, queue = 2, threads = 1;
    const size_t job_max = 16 << 20, unsent_max = 16 << 20, per_conn = 88 << 10;
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
    /* SECURITY.md's six terms: a reply being coded per worker is at most min(job_max,
     * unsent_max) plus 1/1024 of it and 512 KiB of zlib's, and per HTTP thread (2 by default)
     * that of a tiny job's reply of at most 256 KiB. */
    const size_t http = 2, inline_reply = (size_t)256 << 10;
    size_t reply_max = job_max < unsent_max ? job_max : unsent_max;
    /* Bodies: the connections and up to 8 per HTTP thread being closed, each with a body that
     * may hold its old and new block while it grows (1.5 x the cap). */
    size_t bound = (conns + 8 * http) * (body_max + body_max / 2 + per_conn) +
                   (queue + 2 * threads + http) * job_max + unsent_max +
                   threads * (reply_max + reply_max / 1024 + ((size_t)512 << 10)) +
                   http * (inline_reply + inline_reply / 1024 + ((size_t)512 << 10));
    char *log = slurp(d.log), want_bound[64];
    snprintf(want_bound, sizeof want_bound, " memory_bound=%zu ", bound);
    CHECK(strstr(log, want_bound) != NULL, "attnd should log%s(SECURITY.md's bound)", want_bound);
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

/* A client that takes its reply slowly: a receive buffer of rcvbuf bytes (so that what TCP
 * acknowledges is what it has read, give or take the buffer), the request sent whole, then at
 * most chunk bytes read every gap seconds, until the server closes or secs pass. */
typedef struct trickle_ctx {
    int port;
    const char *raw;
    size_t n;
    int rcvbuf;
    size_t chunk;
    double gap, secs;
    str out;        /* every byte read */
    bool closed;    /* the server closed (or reset) the connection */
    double t_close; /* seconds from the request to the close */
} trickle_ctx;

static void *trickle_main(void *arg) {
    trickle_ctx *t = arg;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &t->rcvbuf, sizeof t->rcvbuf);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)t->port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 || !send_all(fd, t->raw, t->n)) {
        close(fd);
        return NULL;
    }
    double t0 = now();
    char *buf = malloc(t->chunk);
    while (now() - t0 < t->secs) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t r = recv(fd, buf, t->chunk, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
            t->closed = true;
            t->t_close = now() - t0;
            break;
        }
        if (r > 0)
            str_add(&t->out, buf, (size_t)r);
        sleep_s(t->gap);
    }
    free(buf);
    close(fd);
    return NULL;
}

/* memory_bound=N from the daemon's limits line; 0 when absent. */
static size_t logged_bound(const attnd *d) {
    char *log = slurp(d->log);
    const char *p = strstr(log, " memory_bound=");
    size_t v = p ? (size_t)strtoull(p + 14, NULL, 10) : 0;
    free(log);
    return v;
}

/* The issue's repro, scaled to a 16 MiB budget: client A's job reserves most of the budget for
 * its reply and A reads it at 40 KB/s; client B's job does not fit beside it and gets 503. A
 * third client's tiny jobs must still get 200 (they fit: a refusal leaves no trace), A must be
 * cut by the send rule (--send-timeout 1, --min-send-rate 256K) and its room come back, a reader
 * just above the rate must get its reply whole, and RSS must stay within the logged bound. */
static void test_slow_reader(void) {
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
    pthread_t tc;
    pthread_create(&tc, NULL, trickle_main, &c);
    pthread_join(tc, NULL);
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

/* ---- the connection limit (issue 23, item 3) ------------------------------------------------- */

#define LIMIT_PROBE_S 0.1 /* a probe's bound at a saturated --max-connections */

/* One probe on a new connection (Connection: close): its status, and the seconds to the close. */
static long limit_probe(int port, const char *path, double *secs) {
    str q = {0};
    str_printf(&q, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    exchange x;
    exchange_raw(port, q.p, q.n, 5 * cfg.scale, &x);
    free(q.p);
    *secs = x.secs;
    long status = x.lines == 1 && x.closed ? x.status : 0;
    free(x.out.p);
    return status;
}

/* Probes past --max-connections 4: with four silent sockets, then four trickling ones, /healthz
 * and /readyz answer within 100 ms (an idle one, then a late one, is evicted for them); with
 * four connections whose replies are being sent, a new connection is shut at once, not left in
 * the backlog. */
static void test_probes_at_limit(void) {
    attnd d;
    const char *args[] = {"--max-connections", "4", "--threads", "1", "--pool-threads", "0", NULL};
    if (!attnd_start(&d, "conn-limit", args, NULL))
        return;
    static const char *const paths[] = {"/healthz", "/readyz"};
    static const char *const kinds[] = {"silent", "trickling"};
    for (int kind = 0; kind < 2; kind++) {
        int fds[4];
        for (int i = 0; i < 4; i++) {
            fds[i] = tcp_connect(d.port);
            if (kind == 1)
                send_all(fds[i], "GET /healthz HTTP/1.1\r\nHo", 25);
            sleep_s(0.01);
        }
        sleep_s(0.3);
        double worst = 0;
        int good = 0;
        for (int i = 0; i < 10; i++) {
            double secs;
            good += limit_probe(d.port, paths[i % 2], &secs) == 200;
            worst = secs > worst ? secs : worst;
        }
        int evicted = 0;
        for (int i = 0; i < 4; i++) {
            struct pollfd p = {fds[i], POLLIN, 0};
            char b[256];
            evicted += poll(&p, 1, 0) == 1 && recv(fds[i], b, sizeof b, MSG_DONTWAIT) <= 0;
            close(fds[i]);
        }
        printf("test_reliability: connection limit: 10 probes beside 4 %s sockets at "
               "--max-connections 4: slowest %.1f ms, %d of 4 sockets evicted\n",
               kinds[kind], worst * 1e3, evicted);
        CHECK(good == 10 && worst <= LIMIT_PROBE_S * cfg.scale,
              "beside 4 %s sockets at the limit: %d of 10 probes got 200, slowest %.1f ms (bound "
              "%.0f ms)",
              kinds[kind], good, worst * 1e3, LIMIT_PROBE_S * 1e3);
        CHECK(evicted >= 1, "%s sockets: one should have been evicted for the probes", kinds[kind]);
        sleep_s(0.2);
    }
    /* Four replies being sent to clients that do not read: nothing to evict; a new connection is
     * shut at once. */
    char *big = weights_body(700);
    str raw = {0};
    post_head(&raw, "/v1/sdpa", strlen(big));
    str_cat(&raw, big);
    trickle_ctx t[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        t[i] = (trickle_ctx){.port = d.port,
                             .raw = raw.p,
                             .n = raw.n,
                             .rcvbuf = 8192,
                             .chunk = 1,
                             .gap = 0.5,
                             .secs = 10 * cfg.scale};
        pthread_create(&th[i], NULL, trickle_main, &t[i]);
    }
    /* Their jobs take milliseconds; then the four connections are sending (a /metrics poll
     * would itself be refused now). */
    sleep_s(1.5 * cfg.scale);
    exchange x;
    str q = {0};
    str_cat(&q, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    exchange_raw(d.port, q.p, q.n, 5 * cfg.scale, &x);
    CHECK(x.closed && x.lines == 0 && x.secs <= LIMIT_PROBE_S * cfg.scale,
          "with 4 replies being sent at --max-connections 4, a new connection should be shut at "
          "once: closed %d after %.1f ms, %d status lines",
          x.closed, x.secs * 1e3, x.lines);
    free(x.out.p);
    free(q.p);
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        free(t[i].out.p);
    }
    char *log = slurp(d.log);
    CHECK(strstr(log, "connection_evicted") && strstr(log, "connection_refused"),
          "the log should name the evictions and the refusal");
    free(log);
    free(raw.p);
    free(big);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "conn-limit daemon: exit status after SIGTERM");
}

/* ---- job memory ---------------------------------------------------------------------------- */

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

static void test_small_job_faults(void) {
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
static void test_job_memory(void) {
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

/* SIGTERM while a large reply is still on its way to a client that reads it late: the drain
 * waits for the reply within --drain-timeout (not a fixed grace of a few seconds), the client
 * gets it whole, and attnd exits 0. */
static void test_drain_reader(void) {
    attnd d;
    const char *args[] = {"--threads", "1", "--pool-threads", "0", "--drain-timeout", "30", NULL};
    if (!attnd_start(&d, "drain-reader", args, NULL))
        return;
    char *big = weights_body(700); /* a reply of about 6.4 MB */
    size_t big_len = strlen(big);
    int fd = tcp_connect(d.port);
    /* A small receive buffer, so that most of the reply waits on attnd's side of the socket. */
    int rcv = 32 << 10;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
    str q = {0}, got = {0};
    post_head(&q, "/v1/sdpa", big_len);
    str_add(&q, big, big_len);
    CHECK(fd >= 0 && send_all(fd, q.p, q.n), "drain-reader: the request was not sent");
    struct pollfd p = {fd, POLLIN, 0};
    CHECK(poll(&p, 1, (int)(20000 * cfg.scale)) == 1, "drain-reader: no reply began");
    kill(d.pid, SIGTERM);
    sleep_s(7.0); /* longer than the 5 s attnd gave replies after its workers went idle */
    CHECK(read_to_end(fd, 30 * cfg.scale, &got), "drain-reader: the reply did not end");
    const char *cl = got.p ? strstr(got.p, "Content-Length: ") : NULL;
    const char *body = got.p ? strstr(got.p, "\r\n\r\n") : NULL;
    size_t want = cl ? strtoull(cl + 16, NULL, 10) : 0;
    size_t have = body ? got.n - (size_t)(body + 4 - got.p) : 0;
    CHECK(want > 6000000 && have == want,
          "drain-reader: %zu of the reply's %zu body bytes arrived after the drain", have, want);
    /* It exits by itself once the reply is out (a second SIGTERM would cut the drain short). */
    int st = -1;
    for (double t0 = now(); now() - t0 < 10 * cfg.scale; sleep_s(0.01)) {
        int ws;
        if (waitpid(d.pid, &ws, WNOHANG) == d.pid) {
            d.pid = 0;
            st = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
            break;
        }
    }
    if (d.pid > 0)
        attnd_stop(&d, SIGTERM);
    CHECK(st == 0, "drain-reader: exit status %d after a drain that sent every reply", st);
    close(fd);
    free(q.p), free(got.p), free(big);
}

/* ---- Main --------------------------------------------------------------------------------- */

static bool want(const char *name) {
    return !cfg.only || strstr(cfg.only, name) != NULL;
}

int main(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--attnd"))
            cfg.attnd = argv[i + 1];
        else if (!strcmp(argv[i], "--work"))
            cfg.work = argv[i + 1];
        else if (!strcmp(argv[i], "--only"))
            cfg.only = argv[i + 1];
        else if (!strcmp(argv[i], "--time-scale"))
            cfg.scale = atof(argv[i + 1]);
    }
    if (!cfg.attnd || !cfg.work || !(cfg.scale >= 1)) {
        fprintf(stderr,
                "usage: test_reliability --attnd PATH --work DIR [--only "
                "limits,faults,slow,framing,security,rss,unsent,jobmem,probes] [--time-scale F >= "
                "1]\n");
        return 2;
    }
    mkdir(cfg.work, 0755); /* may exist */
    harness_init(cfg.attnd, cfg.work, cfg.scale);
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    double t0 = now();
    if (want("limits"))
        test_limits();
    if (want("faults"))
        test_faults();
    if (want("slow")) {
        test_slow();
        test_idle();
        test_begun_after_reply();
        test_drain_reader();
    }
    if (want("framing"))
        test_framing();
    if (want("security"))
        test_security();
    if (want("rss"))
        test_rss();
    if (want("unsent")) {
        test_unsent();
        test_slow_reader();
    }
    if (want("jobmem")) {
        test_job_memory();
        test_small_job_faults();
    }
    if (want("probes")) {
        test_probes();
        test_probes_at_limit();
    }
    curl_global_cleanup();
    return harness_summary("test_reliability", t0);
}
