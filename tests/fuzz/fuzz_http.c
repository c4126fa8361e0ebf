/* fuzz_http.c - libFuzzer target: raw bytes over a loopback TCP connection into attnd's HTTP
 * layer (server/http.c on libmicrohttpd) running in this process, with its workers.
 *
 * The body accumulation path of http.c has its own logic (the Content-Length check before
 * reading, the reservation, growth and cap while streaming, chunked bodies, the early replies
 * whose body is left unread), and it only means something together with libmicrohttpd's
 * framing, so the target drives the real thing: each input is sent as it is on a new
 * connection, the write side is shut, and the answer is read to the end. Our code is
 * instrumented (coverage, ASan, UBSan); libmicrohttpd is not, but runs in-process, so a memory
 * error it makes on our behalf still lands in our buffers.
 *
 * Input: one byte picking the daemon (bit 0: the one with API key "fuzz-key" and CORS origin
 * http://allowed.example; else none), then the bytes to send. Both daemons have small limits
 * (64 KiB bodies, 1 MiB jobs, max_dim 4096) so nothing big is allocated, and share one worker
 * with batching on, as attnd runs by default, and one store of decode sessions (at most 4, so
 * that opens past it end the least recently used one), so that POST /v1/sessions opens and the
 * routes of /v1/sessions/{id} (POST, GET, HEAD, DELETE) answer as attnd's do.
 *
 * Properties: the connection ends within ANSWER_SECS of the client's FIN (the server never
 * waits for a client that has stopped sending: the daemons' idle and read timeouts are far
 * longer, so a connection that only a timeout would end is a finding); whatever comes back
 * starts with an HTTP/1.x status line; no reply is a 500; the daemon stays up (a later connect
 * would fail otherwise). Its log lines go to stderr:
 * run with -close_fd_mask=2 (the make rule does). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"
#include "server.h"

#define ANSWER_SECS 3 /* well under the daemons' idle and read timeouts (30 s) */

typedef struct fuzz_daemon {
    srv_config cfg;
    srv_http *http;
    int port;
} fuzz_daemon;

static fuzz_daemon daemons[2];
static srv_log log_text = {.format = SRV_LOG_TEXT};
static srv_metrics *metrics;
static api_registry *models;
static api_limits limits;
static srv_workers *workers;
static api_sessions *sessions;

static void start(fuzz_daemon *d, bool locked) {
    srv_config_init(&d->cfg);
    snprintf(d->cfg.host, sizeof d->cfg.host, "127.0.0.1");
    d->cfg.port = 0;
    d->cfg.threads = 1;
    d->cfg.pool_threads = 0;
    d->cfg.http_threads = 1;
    d->cfg.max_body_bytes = (size_t)64 << 10;
    d->cfg.max_job_bytes = (size_t)1 << 20;
    d->cfg.max_dim = 4096;
    d->cfg.max_queue = 8;
    d->cfg.max_connections = 64;
    d->cfg.request_timeout = 5;
    d->cfg.idle_timeout = 30; /* a connection that ends only by a timeout is a finding */
    d->cfg.read_timeout = 30;
    if (locked) {
        snprintf(d->cfg.api_key, sizeof d->cfg.api_key, "fuzz-key");
        d->cfg.api_key_len = strlen(d->cfg.api_key);
        snprintf(d->cfg.cors_origins, sizeof d->cfg.cors_origins, "http://allowed.example");
    }
    srv_error err = {0};
    char bound[300];
    int fd = srv_listen(&d->cfg, bound, sizeof bound, &err);
    FUZZ_CHECK(fd >= 0, "listen: %s", err.msg);
    d->http = srv_http_start(&d->cfg, &log_text, fd, metrics, &err);
    FUZZ_CHECK(d->http != NULL, "http: %s", err.msg);
    const char *colon = strrchr(bound, ':');
    d->port = colon ? atoi(colon + 1) : 0;
    FUZZ_CHECK(d->port > 0, "no port in %s", bound);
    srv_http_set_sessions(d->http, sessions);
    srv_http_set_ready(d->http, models, &limits, workers);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    srv_error err = {0};
    api_error ae = {0};
    metrics = srv_metrics_create(&err);
    FUZZ_CHECK(metrics != NULL, "metrics: %s", err.msg);
    models = api_registry_create();
    FUZZ_CHECK(models && api_registry_add(models, api_model_demo(&ae), &ae) == 0 &&
                   api_registry_add(models, api_model_lesson(&ae), &ae) == 0,
               "models: %s", ae.message);
    limits = api_limits_default();
    limits.mem = api_mem_create(SIZE_MAX, SRV_MEM_IDLE_S, &ae); /* as attnd does: blocks reused */
    FUZZ_CHECK(limits.mem != NULL, "memory cache: %s", ae.message);
    limits.max_job_bytes = (size_t)1 << 20;
    limits.max_dim = 4096;
    limits.max_heads = 64;
    workers = srv_workers_create(1, 8, NULL, metrics, &err);
    FUZZ_CHECK(workers != NULL, "workers: %s", err.msg);
    srv_workers_set_batching(workers, 200e-6, 4096, limits.max_job_bytes); /* as attnd does */
    sessions = api_sessions_create(4, 0, limits.mem, &ae);
    FUZZ_CHECK(sessions != NULL, "sessions: %s", ae.message);
    start(&daemons[0], false);
    start(&daemons[1], true);
    return 0;
}

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A connected socket to 127.0.0.1:port, or -1 with *err. A connect interrupted by a signal
 * goes on in the background: wait for it and take its result. */
static int connect_to(int port, int *err) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = connect(fd, (struct sockaddr *)&a, sizeof a);
    *err = rc == 0 ? 0 : errno;
    if (rc != 0 && *err == EINTR) {
        struct pollfd p = {fd, POLLOUT, 0};
        while (poll(&p, 1, ANSWER_SECS * 1000) < 0 && errno == EINTR)
            ;
        socklen_t len = sizeof *err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &len) != 0)
            *err = errno;
    }
    if (*err != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* True when the reply (n bytes) holds a status line "HTTP/1.x 500". */
static bool has_500(const char *buf, size_t n) {
    for (size_t i = 0; i + 12 <= n; i++)
        if ((i == 0 || buf[i - 1] == '\n') && !memcmp(buf + i, "HTTP/1.", 7) &&
            !memcmp(buf + i + 8, " 500", 4))
            return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    const fuzz_daemon *d = &daemons[data[0] & 1];
    /* A refused or address-less connect is retried for a while (loopback ports in TIME_WAIT);
     * a daemon that is down keeps refusing. Signals (libFuzzer's timer) interrupt the calls
     * below: each goes on after EINTR. */
    int fd = -1, err = 0;
    for (int tries = 0; tries < 200 && fd < 0; tries++) {
        fd = connect_to(d->port, &err);
        if (fd < 0 && (err == ECONNREFUSED || err == EADDRNOTAVAIL || err == EAGAIN)) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        break;
    }
    FUZZ_CHECK(fd >= 0, "connect: %s (is the daemon down?)", strerror(err));
    /* Send it all, corked, so that the FIN goes out with the last bytes (the case libmicrohttpd
     * on epoll missed); the server may reply early and close, which ends the sending. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_CORK, &one, sizeof one);
    size_t off = 1;
    while (off < size) {
        ssize_t w = send(fd, data + off, size - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    /* Read to the end; the first sizeof head bytes are kept for the checks. */
    static char head[1 << 16], chunk[1 << 16];
    size_t got = 0, total = 0;
    double deadline = mono_now() + ANSWER_SECS;
    for (;;) {
        double left = deadline - mono_now();
        FUZZ_CHECK(left > 0,
                   "the connection did not end within %d s of the client's last byte (%zu bytes "
                   "came back)",
                   ANSWER_SECS, total);
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
            continue; /* interrupted, or the time is up (checked above) */
        ssize_t r = recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
        if (r > 0) {
            size_t keep = sizeof head - got < (size_t)r ? sizeof head - got : (size_t)r;
            memcpy(head + got, chunk, keep);
            got += keep;
            total += (size_t)r;
            continue;
        }
        if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        break; /* EOF, or reset after an early reply */
    }
    if (got > 0) {
        FUZZ_CHECK(got >= 5 && !memcmp(head, "HTTP/", 5), "the reply starts with '%.20s'", head);
        FUZZ_CHECK(!has_500(head, got), "a 500 reply: %.300s", head);
    }
    struct linger lg = {1, 0}; /* reset: no TIME_WAIT left behind per input */
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
    return 0;
}
