/* probes.c - /healthz and /readyz answer fast beside requests that declare huge shapes in small
 * bodies, and pass the connection limit beside silent and trickling sockets; /metrics keeps to
 * its cap of replies at once. */
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../harness.h"
#include "reliability.h"

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

/* The request: q, k and v each declaring (65536, 1, 65536, 1) in about 262 KB, with
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
void test_probes(void) {
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
 * and /readyz answer within 100 ms (an idle one, then a late one, is evicted for them); with four
 * connections whose clients take their replies far below the rate, a probe evicts one of them;
 * with four whose clients read at the rate (nothing to evict), probes are served on spare places
 * and closed, and a job on a spare place gets 503 connection_limit at once. */
void test_probes_at_limit(void) {
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
        sleep_s(0.6); /* past the half second a new connection has to send its request */
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
    /* Four replies being sent to clients far below the rate (a byte every half second): a probe
     * evicts one of them. Then four clients that read their replies above the rate (32 KiB every
     * 0.1 s, about 320 KB/s): nothing to evict, so probes are served on spare places. */
    char *big = weights_body(700);
    str raw = {0};
    post_head(&raw, "/v1/sdpa", strlen(big));
    str_cat(&raw, big);
    static const char *const readers[] = {"far below the rate", "at the rate"};
    for (int kind = 0; kind < 2; kind++) {
        trickle_ctx t[4];
        pthread_t th[4];
        for (int i = 0; i < 4; i++) {
            t[i] = (trickle_ctx){.port = d.port,
                                 .raw = raw.p,
                                 .n = raw.n,
                                 .rcvbuf = kind ? 65536 : 8192,
                                 .chunk = kind ? 32768 : 1,
                                 .gap = kind ? 0.1 : 0.5,
                                 .secs = 3 * cfg.scale};
            pthread_create(&th[i], NULL, trickle_main, &t[i]);
        }
        /* Their jobs take milliseconds; then the four connections are sending, and the reaper
         * has seen how fast their clients read. */
        sleep_s(1.0 * cfg.scale);
        double worst = 0;
        int good = 0;
        for (int i = 0; i < 10; i++) {
            double secs;
            good += limit_probe(d.port, paths[i % 2], &secs) == 200;
            worst = secs > worst ? secs : worst;
        }
        printf("test_reliability: connection limit: 10 probes beside 4 replies read %s at "
               "--max-connections 4: slowest %.1f ms\n",
               readers[kind], worst * 1e3);
        CHECK(good == 10 && worst <= LIMIT_PROBE_S * cfg.scale,
              "beside 4 replies read %s: %d of 10 probes got 200, slowest %.1f ms (bound %.0f ms)",
              readers[kind], good, worst * 1e3, LIMIT_PROBE_S * 1e3);
        if (kind == 1) { /* a job on a spare place: 503 at once, and the close */
            exchange x;
            exchange_raw(d.port, raw.p, raw.n, 5 * cfg.scale, &x);
            CHECK(x.closed && x.lines == 1 && x.status == 503 &&
                      strstr(x.out.p, "connection_limit") && x.secs <= LIMIT_PROBE_S * cfg.scale,
                  "a job on a spare place should get 503 connection_limit at once: %ld after "
                  "%.1f ms, closed %d",
                  x.status, x.secs * 1e3, x.closed);
            free(x.out.p);
        }
        int whole = 0;
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            whole +=
                !t[i].closed && t[i].out.n > 400000 && !strncmp(t[i].out.p, "HTTP/1.1 200", 12);
            free(t[i].out.p);
        }
        if (kind == 1)
            CHECK(whole == 4,
                  "the 4 readers at the rate should never be evicted: %d of 4 read their replies "
                  "on, unclosed, for 3 s",
                  whole);
        sleep_s(0.3);
    }
    char *log = slurp(d.log);
    CHECK(strstr(log, "connection_evicted") && strstr(log, "state=sending"),
          "the log should name the evictions, a sending connection's among them");
    free(log);
    free(raw.p);
    free(big);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "conn-limit daemon: exit status after SIGTERM");
}

#define METRICS_MODEL_BYTES 8000 /* about what each model that ran a job adds to /metrics */

/* The most a TCP send buffer may grow to here (tcp_wmem's third field), or 4 MiB. */
static size_t wmem_max(void) {
    char *t = slurp("/proc/sys/net/ipv4/tcp_wmem");
    unsigned long a = 0, b = 0, c = 0;
    size_t m = sscanf(t, "%lu %lu %lu", &a, &b, &c) == 3 && c > 0 ? c : 4u << 20;
    free(t);
    return m;
}

/* At most SRV_METRICS_AT_ONCE (2) /metrics replies at once: with enough registry models that have
 * each run a job, the reply is larger than a TCP send buffer can grow (tcp_wmem; 637 models and
 * 4.8 MB here), so two clients with small windows that do not read hold theirs on attnd's side
 * (smaller replies, of 32 KiB and of over 512 KiB, were found to fit in the sockets' buffers);
 * a third /metrics gets 503 busy, naming the cap, while /healthz still answers; the two held
 * replies arrive whole once read; a client that vanishes gives its place back, and /metrics
 * answers 200 again. */
void test_metrics_at_once(void) {
    char dir[600], target[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/metrics-models", cfg.work);
    mkdir(dir, 0755); /* may exist */
    if (!realpath("tests/api_cases/safetensors/valid/f32-kvdim-nobias/model.safetensors", target)) {
        CHECK(false, "metrics-at-once: the model file is missing (run from the repository)");
        return;
    }
    const size_t held_bytes = wmem_max() + (256u << 10);
    const int nmodels = (int)(held_bytes / METRICS_MODEL_BYTES) + 80;
    int linked = 0;
    for (int i = 0; i < nmodels; i++) {
        char link[700];
        snprintf(link, sizeof link, "%s/m%03d.safetensors", dir, i);
        unlink(link);
        linked += symlink(target, link) == 0;
    }
    CHECK(linked == nmodels, "metrics-at-once: %d of %d model links made in %s", linked, nmodels,
          dir);
    attnd d;
    const char *args[] = {"--threads", "2", "--models", dir, NULL};
    if (!attnd_start(&d, "metrics-at-once", args, NULL))
        return;
    /* One job on each model, so that each has its series (a model's series appear with its
     * first job). The file's model: E = 12, kdim 5, vdim 7. */
    reply r;
    int ok = 0;
    for (int i = 0; i < nmodels; i++) {
        char body[300];
        snprintf(body, sizeof body,
                 "{\"model\": \"m%03d\", \"query\": [[[1,0,0,0,0,0,0,0,0,0,0,0]]], "
                 "\"key\": [[[1,0,0,0,0]]], \"value\": [[[1,0,0,0,0,0,0]]]}",
                 i);
        ok += post(NULL, d.port, "/v1/attention", body, 0, &r) && r.status == 200;
        reply_free(&r);
    }
    CHECK(ok == nmodels, "metrics-at-once: %d of %d jobs answered 200", ok, nmodels);
    bool got_it = request(NULL, d.port, NULL, "/metrics", NULL, 0, NULL, &r);
    CHECK(got_it && r.status == 200 && r.len > held_bytes,
          "metrics-at-once: /metrics alone: %ld, %zu bytes (over %zu wanted)", r.status, r.len,
          held_bytes);
    size_t full = r.len;
    reply_free(&r);

    static const char get[] =
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    int held[2];
    for (int i = 0; i < 2; i++) {
        held[i] = tcp_connect_rcvbuf(d.port, 4096);
        CHECK(held[i] >= 0 && send_all(held[i], get, sizeof get - 1),
              "metrics-at-once: held client %d not sent", i);
        struct pollfd p = {held[i], POLLIN, 0};
        CHECK(poll(&p, 1, (int)(5000 * cfg.scale)) == 1,
              "metrics-at-once: held client %d: no reply began", i);
    }
    CHECK(request(NULL, d.port, NULL, "/metrics", NULL, 0, NULL, &r), "metrics-at-once: third");
    check_error(&r, 503, "busy", "2 /metrics replies", "metrics-at-once: a third /metrics");
    reply_free(&r);
    CHECK(healthy(&d), "metrics-at-once: /healthz beside two held /metrics replies");

    /* The first held reply, read: whole. */
    str got = {0};
    CHECK(read_to_end(held[0], 20 * cfg.scale, &got), "metrics-at-once: held reply did not end");
    const char *body = got.p ? strstr(got.p, "\r\n\r\n") : NULL;
    size_t have = body ? got.n - (size_t)(body + 4 - got.p) : 0;
    CHECK(got.p && !strncmp(got.p, "HTTP/1.1 200", 12) && have + 4096 > full && have < full + 4096,
          "metrics-at-once: the held reply came as %.12s with %zu body bytes (about %zu wanted)",
          got.p ? got.p : "", have, full);
    free(got.p);
    close(held[0]);
    /* The second client vanishes; its place comes back once attnd sees it gone. */
    close_reset(held[1]);
    long status = 0;
    for (double t0 = now(); now() - t0 < 5 * cfg.scale && status != 200; sleep_s(0.05)) {
        CHECK(request(NULL, d.port, NULL, "/metrics", NULL, 0, NULL, &r), "metrics-at-once: after");
        status = r.status;
        reply_free(&r);
    }
    CHECK(status == 200, "metrics-at-once: /metrics after both held replies ended: %ld", status);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "metrics-at-once: exit status");
}
