/* probes.c - /healthz and /readyz answer fast beside requests that declare huge shapes in small
 * bodies, and pass the connection limit beside silent and trickling sockets; /metrics answers
 * any number of scrapers beside clients that do not read, from shared renderings. */
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
    /* /metrics counts them by reason */
    static const char *const reasons[] = {"evicted_idle", "evicted_reading", "evicted_sending"};
    for (int i = 0; i < 3; i++) {
        char sample[96];
        snprintf(sample, sizeof sample, "attnd_connections_closed_total{reason=\"%s\"}",
                 reasons[i]);
        CHECK(metric(d.port, sample) >= 1, "/metrics: %s is %g after the evictions", sample,
              metric(d.port, sample));
    }
    free(log);
    free(raw.p);
    free(big);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "conn-limit daemon: exit status after SIGTERM");
}

/* ---- /metrics for any number of scrapers (issue 33, finding 4) ------------------------------ */

#define METRICS_MODEL_BYTES 8000 /* about what each model that ran a job adds to /metrics */
#define METRICS_HELD        8    /* clients that ask for /metrics and do not read */
#define METRICS_RENDERINGS  4    /* SRV_METRICS_RENDERINGS: renderings alive at once, at most */
#define METRICS_INTERVAL_S  1.0  /* SRV_METRICS_INTERVAL_S: the longest a rendering is shared */
#define METRICS_SCRAPES     40   /* by a client that reads, over about 4 s */
#define SCRAPE_BOUND_S      0.5  /* each of them, beside the held replies */

/* The most a TCP send buffer may grow to here (tcp_wmem's third field), or 4 MiB. */
static size_t wmem_max(void) {
    char *t = slurp("/proc/sys/net/ipv4/tcp_wmem");
    unsigned long a = 0, b = 0, c = 0;
    size_t m = sscanf(t, "%lu %lu %lu", &a, &b, &c) == 3 && c > 0 ? c : 4u << 20;
    free(t);
    return m;
}

/* The value of sample ("name" or "name{labels}") in an exposition, or -1. */
static double sample_in(const char *text, const char *sample) {
    size_t n = strlen(sample);
    for (const char *p = text; p && (p = strstr(p, sample)) != NULL; p += n)
        if ((p == text || p[-1] == '\n') && p[n] == ' ')
            return atof(p + n + 1);
    return -1;
}

/* A whole exposition: it opens with the first family's HELP and ends with the last sample's
 * line (render_process's process_start_time_seconds). */
static bool exposition_whole(const char *body, size_t len) {
    static const char first[] = "# HELP attnd_http_requests_total ";
    static const char last[] = "\nprocess_start_time_seconds ";
    if (len < sizeof first || strncmp(body, first, sizeof first - 1) || body[len - 1] != '\n')
        return false;
    const char *l = len >= 2 ? body + len - 2 : body;
    while (l > body && *l != '\n')
        l--;
    return !strncmp(l, last, sizeof last - 1);
}

typedef struct scraper_ctx {
    int port;
    size_t full; /* the exposition's size alone, about */
    int ok, whole;
    double worst; /* seconds */
    long bad_status;
} scraper_ctx;

/* METRICS_SCRAPES GETs of /metrics, one every 0.1 s, each read whole. */
static void *scraper_main(void *arg) {
    scraper_ctx *c = arg;
    for (int i = 0; i < METRICS_SCRAPES; i++) {
        double t0 = now();
        reply r;
        request(NULL, c->port, NULL, "/metrics", NULL, 0, NULL, &r);
        if (r.status == 200)
            c->ok++;
        else
            c->bad_status = r.status;
        c->whole += r.status == 200 && exposition_whole(r.body, r.len) && r.len + 65536 > c->full &&
                    r.len < c->full + 65536;
        c->worst = r.secs > c->worst ? r.secs : c->worst;
        reply_free(&r);
        double left = 0.1 - (now() - t0);
        if (left > 0)
            sleep_s(left);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* /metrics for any number of scrapers. With enough registry models that have each run a job, the
 * exposition is larger than a TCP send buffer can grow (tcp_wmem; 637 models and 4.8 MB here),
 * so a client with a small window that does not read holds its reply on attnd's side (smaller
 * replies, of 32 KiB and of over 512 KiB, were found to fit in the sockets' buffers).
 *
 * Sharing: two scrapes within the interval get the same rendering byte for byte; one after the
 * interval sees the first two counted; one after a /healthz sees it at once. Then 8 clients ask
 * for /metrics and never read, a /healthz before each (a change, so that each would want a
 * rendering of its own); beside them, 40 scrapes over about 4 s all get 200 and a whole
 * exposition within 0.5 s each, /healthz answers (within 100 ms at the 99th percentile, and
 * its latencies are printed), attnd's RSS stays within METRICS_RENDERINGS renderings of where
 * it was, and the 8 held replies arrive whole once read. */
void test_metrics_scrapers(void) {
    char dir[600], target[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/metrics-models", cfg.work);
    mkdir(dir, 0755); /* may exist */
    if (!realpath("tests/api_cases/safetensors/valid/f32-kvdim-nobias/model.safetensors", target)) {
        CHECK(false, "metrics: the model file is missing (run from the repository)");
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
    CHECK(linked == nmodels, "metrics: %d of %d model links made in %s", linked, nmodels, dir);
    attnd d;
    const char *args[] = {"--threads", "2", "--models", dir, NULL};
    if (!attnd_start(&d, "metrics-scrapers", args, NULL))
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
    CHECK(ok == nmodels, "metrics: %d of %d jobs answered 200", ok, nmodels);
    bool got_it = request(NULL, d.port, NULL, "/metrics", NULL, 0, NULL, &r);
    CHECK(got_it && r.status == 200 && r.len > held_bytes && exposition_whole(r.body, r.len),
          "metrics: /metrics alone: %ld, %zu bytes (over %zu wanted)", r.status, r.len, held_bytes);
    size_t full = r.len;
    reply_free(&r);

    /* Sharing within the interval, a new rendering after it or after a change. */
    static const char *const scrapes_200 =
        "attnd_http_requests_total{route=\"/metrics\",code=\"200\"}";
    static const char *const healthz_200 =
        "attnd_http_requests_total{route=\"/healthz\",code=\"200\"}";
    sleep_s(METRICS_INTERVAL_S + 0.1);
    reply s1, s2, s3, s4;
    request(NULL, d.port, NULL, "/metrics", NULL, 0, NULL, &s1);
    request(NULL, d.port, NULL, "/metrics", NULL, 0, NULL, &s2);
    CHECK(s1.status == 200 && s2.status == 200 && s1.len == s2.len &&
              !memcmp(s1.body, s2.body, s1.len),
          "metrics: two scrapes within the interval should get one rendering: %ld and %ld, %zu "
          "and %zu bytes, /metrics counted %g then %g",
          s1.status, s2.status, s1.len, s2.len, sample_in(s1.body, scrapes_200),
          sample_in(s2.body, scrapes_200));
    sleep_s(METRICS_INTERVAL_S + 0.1);
    request(NULL, d.port, NULL, "/metrics", NULL, 0, NULL, &s3);
    CHECK(s3.status == 200 &&
              sample_in(s3.body, scrapes_200) >= sample_in(s2.body, scrapes_200) + 2,
          "metrics: a scrape after the interval should see the two before it: %s %g after %g",
          scrapes_200, sample_in(s3.body, scrapes_200), sample_in(s2.body, scrapes_200));
    CHECK(healthy(&d), "metrics: /healthz");
    /* The /healthz is counted when libmicrohttpd reports its reply done, which may come a moment
     * after the client has read it: a scrape within 0.3 s (well inside the interval, so not a
     * rendering reused past the change) must count it. */
    double t_change = now();
    request(NULL, d.port, NULL, "/metrics", NULL, 0, NULL, &s4);
    while (now() - t_change < 0.3 &&
           sample_in(s4.body, healthz_200) != sample_in(s3.body, healthz_200) + 1) {
        reply_free(&s4);
        sleep_s(0.02);
        request(NULL, d.port, NULL, "/metrics", NULL, 0, NULL, &s4);
    }
    CHECK(s4.status == 200 &&
              sample_in(s4.body, healthz_200) == sample_in(s3.body, healthz_200) + 1,
          "metrics: a scrape within 0.3 s after a /healthz should count it: %s %g after %g",
          healthz_200, sample_in(s4.body, healthz_200), sample_in(s3.body, healthz_200));
    reply_free(&s1);
    reply_free(&s2);
    reply_free(&s3);
    reply_free(&s4);

    /* Clients that ask and never read, each after a change. */
    size_t rss0 = rss_bytes(&d);
    static const char get[] =
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    int held[METRICS_HELD], began = 0;
    for (int i = 0; i < METRICS_HELD; i++) {
        healthy(&d);
        held[i] = tcp_connect_rcvbuf(d.port, 4096);
        CHECK(held[i] >= 0 && send_all(held[i], get, sizeof get - 1),
              "metrics: held client %d not sent", i);
        struct pollfd p = {held[i], POLLIN, 0};
        began += poll(&p, 1, (int)(5000 * cfg.scale)) == 1;
    }
    CHECK(began == METRICS_HELD, "metrics: %d of %d held clients got a reply begun", began,
          METRICS_HELD);
    /* A scraper that reads, and probes beside it. */
    scraper_ctx sc = {.port = d.port, .full = full};
    pthread_t th;
    pthread_create(&th, NULL, scraper_main, &sc);
    enum { MAX_PROBES = 400 };
    double lat[MAX_PROBES];
    int probes = 0, good = 0;
    size_t rss_max = rss_bytes(&d);
    double t0 = now();
    while (now() - t0 < METRICS_SCRAPES * 0.1 && probes < MAX_PROBES) {
        request(NULL, d.port, NULL, "/healthz", NULL, 0, NULL, &r);
        good += r.status == 200;
        lat[probes++] = r.secs;
        reply_free(&r);
        size_t rss = rss_bytes(&d);
        rss_max = rss > rss_max ? rss : rss_max;
        sleep_s(0.015);
    }
    pthread_join(th, NULL);
    size_t rss = rss_bytes(&d);
    rss_max = rss > rss_max ? rss : rss_max;
    qsort(lat, (size_t)probes, sizeof lat[0], cmp_double);
    double p50 = probes ? lat[probes / 2] : 0, p99 = probes ? lat[(probes * 99) / 100] : 0,
           pmax = probes ? lat[probes - 1] : 0;
    printf("test_reliability: metrics: %d /healthz probes beside %d unread /metrics replies of "
           "%zu bytes and a scraper: p50 %.2f ms, p99 %.2f ms, max %.2f ms; %d of %d scrapes "
           "200 and whole, slowest %.1f ms; RSS %.1f MiB before, at most %.1f MiB beside them\n",
           probes, METRICS_HELD, full, p50 * 1e3, p99 * 1e3, pmax * 1e3, sc.whole, METRICS_SCRAPES,
           sc.worst * 1e3, (double)rss0 / 1048576, (double)rss_max / 1048576);
    CHECK(sc.ok == METRICS_SCRAPES && sc.whole == METRICS_SCRAPES,
          "metrics: beside %d held replies, %d of %d scrapes got 200 (another: %ld) and %d a "
          "whole exposition",
          METRICS_HELD, sc.ok, METRICS_SCRAPES, sc.bad_status, sc.whole);
    CHECK(sc.worst <= SCRAPE_BOUND_S * cfg.scale,
          "metrics: the slowest scrape beside %d held replies took %.1f ms (bound %.0f ms)",
          METRICS_HELD, sc.worst * 1e3, SCRAPE_BOUND_S * 1e3);
    CHECK(probes >= 100 && good == probes && p99 <= LIMIT_PROBE_S * cfg.scale,
          "metrics: %d of %d /healthz probes got 200 beside the held replies and the scraper, "
          "p99 %.1f ms (bound %.0f ms)",
          good, probes, p99 * 1e3, LIMIT_PROBE_S * 1e3);
    size_t bound = rss0 + METRICS_RENDERINGS * full + (4u << 20);
    CHECK(rss_max <= bound,
          "metrics: RSS rose from %.1f to %.1f MiB beside %d held replies of %.1f MiB (bound "
          "%.1f MiB: %d renderings and 4 MiB)",
          (double)rss0 / 1048576, (double)rss_max / 1048576, METRICS_HELD, (double)full / 1048576,
          (double)bound / 1048576, METRICS_RENDERINGS);

    /* The held replies, read at last: each whole, as its Content-Length says. */
    int whole = 0;
    for (int i = 0; i < METRICS_HELD; i++) {
        str got = {0};
        bool ended = read_to_end(held[i], 20 * cfg.scale, &got);
        const char *body = got.p ? strstr(got.p, "\r\n\r\n") : NULL;
        size_t have = body ? got.n - (size_t)(body + 4 - got.p) : 0;
        const char *cl = got.p ? strcasestr(got.p, "\r\nContent-Length: ") : NULL;
        size_t want = cl && cl < body ? (size_t)strtoull(cl + 18, NULL, 10) : 0;
        bool ok1 = ended && !strncmp(got.p ? got.p : "", "HTTP/1.1 200", 12) && have == want &&
                   exposition_whole(body + 4, have) && have + 65536 > full;
        CHECK(ok1,
              "metrics: held reply %d came as %.12s with %zu body bytes of %zu (about %zu "
              "wanted)%s",
              i, got.p ? got.p : "", have, want, full, ended ? "" : ", and did not end");
        whole += ok1;
        free(got.p);
        close(held[i]);
    }
    printf("test_reliability: metrics: %d of %d held replies arrived whole once read\n", whole,
           METRICS_HELD);
    CHECK(request(NULL, d.port, NULL, "/metrics", NULL, 0, NULL, &r) && r.status == 200,
          "metrics: /metrics after the held replies ended: %ld", r.status);
    reply_free(&r);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "metrics: exit status");
}
