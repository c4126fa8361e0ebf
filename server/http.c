/* http.c - a request's life on libmicrohttpd, from its headers to its access log line: framing
 * checks, the body (capped, and decoded by body.c), the job parsed, handed to the workers
 * behind MHD_suspend_connection and its result queued, the access log and metrics; and the
 * HTTP daemon's start and stop. routes.c answers from the headers, http_job.c takes a job's body
 * from its end to its answer, reply.c builds the replies, conn.c tracks the connections.
 *
 * A request's life (one http_req per request, created on the first call of the access handler,
 * freed when both the connection and the worker have let go of it):
 *
 *   REQ_NEW     first call: framing (400 and 501, closing the connection), route, method,
 *               auth, early refusals (405, 413 from Content-Length, 415 for the media type or
 *               the content coding, 503) and the replies of the GET routes;
 *   REQ_BODY    the body arrives in pieces (kept by body.c, a coded one as sent); past
 *               --max-body-bytes it is dropped and 413 follows;
 *   (complete)  http_job.c: parsed on this thread when small and plain, else on a parse thread
 *               with the connection suspended; submitted to the workers (suspending, under
 *               r->mu), or run at once when tiny;
 *   REQ_QUEUED  a worker fills r->sj and resumes the connection (under r->mu, so never before
 *               the suspend); the access handler is called again and queues the reply;
 *   REQ_REPLIED nothing more to do; the completion callback logs, counts and lets go.
 */
#include <ctype.h>
#include <limits.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "http_internal.h"

/* libmicrohttpd's per-connection buffer (headers and body chunks). It zeroes the whole buffer
 * for each request, so a smaller one is cheaper (bench/RESULTS.md: the connection buffer). */
#define MHD_MEMORY    (32 << 10)
#define DISCARD_SLACK ((size_t)16 << 20) /* body bytes read past the cap before dropping */

/* ---- Small helpers ------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static bool id_char_ok(char c) {
    return isalnum((unsigned char)c) || strchr("-_.:/+=@", c);
}

static void set_request_id(srv_http *h, http_req *r) {
    const char *given = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Request-Id");
    if (given) {
        size_t n = strlen(given);
        bool ok = n > 0 && n <= ID_MAX;
        for (size_t i = 0; ok && i < n; i++)
            ok = id_char_ok(given[i]);
        if (ok) {
            memcpy(r->id, given, n + 1);
            return;
        }
    }
    uint64_t n = atomic_fetch_add_explicit(&h->next_id, 1, memory_order_relaxed);
    snprintf(r->id, sizeof r->id, "%016llx", (unsigned long long)mix64(h->id_salt ^ n));
}

/* ---- Request objects ---------------------------------------------------------------------- */

static http_req *req_create(srv_http *h, struct MHD_Connection *conn, const char *url,
                            const char *method) {
    http_req *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    size_t n = strlen(url);
    if (n > 2048)
        n = 2048;
    r->path = malloc(n + 1);
    if (!r->path) {
        free(r);
        return NULL;
    }
    memcpy(r->path, url, n);
    r->path[n] = '\0';
    pthread_mutex_init(&r->mu, NULL);
    atomic_init(&r->refs, 1);
    r->h = h;
    r->conn = conn;
    r->t_start = srv_now();
    snprintf(r->method, sizeof r->method, "%s", method);
    r->is_get = !strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD);
    r->is_post = !strcmp(method, MHD_HTTP_METHOD_POST);
    r->is_options = !strcmp(method, MHD_HTTP_METHOD_OPTIONS);
    r->is_delete = !strcmp(method, MHD_HTTP_METHOD_DELETE);
    r->v2_header_len = API_V2_NO_HEADER;
    r->sj.owner = r;
    r->sj.model = API_NO_MODEL;
    if (!http_route_of(url, r)) {
        free(r->model);
        free(r->version);
        pthread_mutex_destroy(&r->mu);
        free(r->path);
        free(r);
        return NULL;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    r->track = ci ? ci->socket_context : NULL;
    set_request_id(h, r);
    return r;
}

void http_req_unref(http_req *r) {
    if (atomic_fetch_sub(&r->refs, 1) != 1)
        return;
    srv_body_destroy(r->body);
    api_buf_free(&r->sj.body);
    api_job_destroy(r->sj.job);
    pthread_mutex_destroy(&r->mu);
    free(r->model);
    free(r->version);
    free(r->path);
    free(r);
}

/* ---- Framing (RFC 9112 section 6.3) ------------------------------------------------------ */

/* The header lines that decide where a request's body ends, and its Host, as counted. */
typedef struct framing {
    int host, cl, te;     /* how many Host, Content-Length and Transfer-Encoding lines */
    const char *cl1;      /* the first Content-Length (the one libmicrohttpd goes by) */
    bool cl_differ;       /* another Content-Length says something else */
    const char *te1;      /* the first Transfer-Encoding */
    const char *bad_name; /* the first field name with whitespace in it (before its colon) */
    const char *odd_name; /* else the first that is not a token (empty, or another byte) */
} framing;

static enum MHD_Result framing_count(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value) {
    (void)kind;
    framing *f = cls;
    /* libmicrohttpd 0.9.75 keeps whitespace before the colon in the name ("Content-Length "),
     * and so does not frame by it, where another server may trim it and frame by it (RFC 9112
     * section 5.1: a server MUST refuse such a field with 400). wire.c refuses it off the wire
     * first; this holds for a connection wire.c could not track. So does a name that is not a
     * token (a VT, a DEL, a byte past 0x7f, or none), which libmicrohttpd keeps as it is. */
    if (!f->bad_name && key[strcspn(key, " \t")] != '\0')
        f->bad_name = key;
    else if (!f->odd_name && (!key[0] || srv_wire_token(key) != strlen(key)))
        f->odd_name = key;
    if (!strcasecmp(key, MHD_HTTP_HEADER_HOST)) {
        f->host++;
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        if (f->cl++ == 0)
            f->cl1 = value;
        else if (strcmp(value, f->cl1) != 0)
            f->cl_differ = true;
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        if (f->te++ == 0)
            f->te1 = value;
    }
    return MHD_YES;
}

/* Checks how the request says its body ends, and its Host, before anything else: a request that
 * a proxy in front could frame differently (a field name with whitespace before its colon, or
 * that is not a token, two Content-Lengths, Content-Length with Transfer-Encoding) gets 400, a
 * transfer coding other than chunked 501, an HTTP/1.1 request without exactly one Host 400; each
 * reply closes the connection. Returns true and *rc when it replied. (A Content-Length that is
 * not a number never gets here: wire.c refuses it, or on a connection wire.c does not read,
 * libmicrohttpd, and on_mhd_log answers.) */
static bool framing_refused(http_req *r, const char *version, enum MHD_Result *rc) {
    framing f = {0};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, framing_count, &f);
    r->close = true;
    if (f.bad_name) {
        size_t n = strcspn(f.bad_name, " \t");
        *rc = http_reply_error(r, 400, "invalid_request",
                               "the header field \"%.*s\" has whitespace before its colon; a field "
                               "name ends at the colon (RFC 9112 section 5.1)",
                               (int)(n > 60 ? 60 : n), f.bad_name);
    } else if (f.odd_name && !f.odd_name[0]) {
        *rc = http_reply_error(r, 400, "invalid_request",
                               "an empty field name (a line that begins with a colon); field "
                               "names are tokens (RFC 9110 section 5.1)");
    } else if (f.odd_name) {
        *rc = http_reply_error(r, 400, "invalid_request",
                               "the byte \\x%02x in a field name, where field names are tokens "
                               "(RFC 9110 section 5.1)",
                               (unsigned char)f.odd_name[srv_wire_token(f.odd_name)]);
    } else if (f.cl > 0 && f.te > 0) {
        *rc =
            http_reply_error(r, 400, "invalid_request",
                             "the request has both Content-Length and Transfer-Encoding; send one");
    } else if (f.cl_differ) {
        *rc = http_reply_error(
            r, 400, "invalid_request",
            "the request has Content-Length headers that differ (%.30s, ...); send "
            "one",
            f.cl1);
    } else if (f.te > 1 || (f.te == 1 && strcasecmp(f.te1, "chunked") != 0)) {
        *rc = http_reply_error(r, 501, "not_implemented",
                               "the Transfer-Encoding %.60s%s is not supported: send the body with "
                               "Content-Length, or chunked alone",
                               f.te1, f.te > 1 ? ", ..." : "");
    } else if (!strcmp(version, MHD_HTTP_VERSION_1_1) && f.host != 1) {
        *rc = http_reply_error(r, 400, "invalid_request",
                               f.host ? "the request has more than one Host header"
                                      : "an HTTP/1.1 request needs a Host header");
    } else {
        r->close = false;
        return false;
    }
    return true;
}

/* True when the request announces a body (a Content-Length above 0, or chunked). */
static bool has_body(struct MHD_Connection *conn) {
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    return te || (cl && strspn(cl, "0") != strlen(cl));
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls) {
    srv_http *h = cls;
    http_req *r = *con_cls;
    if (!r) {
        r = req_create(h, conn, url, method);
        if (!r)
            return MHD_NO; /* out of memory: drop the connection */
        *con_cls = r;
        atomic_fetch_add(&h->outstanding, 1); /* until on_completed */
        /* begun, if the reaper has not seen it yet */
        srv_conn_set(h->conns, r->track, SRV_CONN_READING);
        enum MHD_Result rc;
        if (framing_refused(r, version, &rc))
            return rc;
        /* A spare place past --max-connections (conn.c) serves one probe, then closes. */
        if (srv_conn_spare(r->track)) {
            r->close = true;
            if (!srv_routes[r->route].open || !r->is_get)
                return http_reply_error(r, 503, "connection_limit",
                                        "all %zu connections attnd takes are busy "
                                        "(--max-connections); retry shortly",
                                        h->cfg->max_connections);
        }
        /* A request with a body is judged now, before its body is read (a reply now closes the
         * connection after it). One without waits for the next call: a reply queued then keeps
         * the connection alive. */
        return has_body(conn) ? http_on_new(h, r) : MHD_YES;
    }
    switch (r->state) {
    case REQ_NEW:
        return http_on_new(h, r);
    case REQ_BODY:
        if (*upload_data_size) {
            r->bytes_in += *upload_data_size;
            srv_body_state st = srv_body_append(r->body, upload_data, *upload_data_size);
            *upload_data_size = 0;
            /* A failed body far past the cap is not read to its end: drop the connection. */
            if (st != SRV_BODY_OK && r->bytes_in > h->cfg->max_body_bytes &&
                r->bytes_in - h->cfg->max_body_bytes > DISCARD_SLACK)
                return MHD_NO;
            /* A body still arriving past the read timeout: drop the connection (libmicrohttpd
             * cannot queue a reply before the body has ended). */
            if (srv_conn_late(h->conns, r->track)) {
                r->late = true;
                return MHD_NO;
            }
            return MHD_YES;
        }
        return http_body_complete(h, r);
    case REQ_QUEUED:
        return http_job_result(r);
    case REQ_REPLIED:
        break;
    }
    /* A body sent to a route that replied at once: ignore it. */
    *upload_data_size = 0;
    return MHD_YES;
}

static const char *end_name(enum MHD_RequestTerminationCode toe) {
    switch (toe) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK:
        return NULL;
    case MHD_REQUEST_TERMINATED_WITH_ERROR:
        return "error";
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED:
        return "timeout";
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN:
        return "shutdown";
    case MHD_REQUEST_TERMINATED_READ_ERROR:
        return "read_error";
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT:
        return "client_abort";
    }
    return "unknown";
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)conn;
    srv_http *h = cls;
    http_req *r = *con_cls;
    if (!r)
        return;
    *con_cls = NULL;
    double total_ms = (srv_now() - r->t_start) * 1e3;
    srv_kv kv[16];
    size_t n = 0;
    kv[n++] = SRV_STR("method", r->method);
    kv[n++] = SRV_STR("path", r->path);
    kv[n++] = SRV_INT("status", r->status);
    kv[n++] = SRV_INT("bytes_in", r->bytes_in);
    kv[n++] = SRV_INT("bytes_out", r->bytes_out);
    kv[n++] = SRV_NUM("queue_ms", r->sj.queue_ms);
    kv[n++] = SRV_NUM("compute_ms", r->sj.compute_ms);
    kv[n++] = SRV_NUM("parse_ms", r->parse_ms);
    kv[n++] = SRV_NUM("encode_ms", r->sj.encode_ms);
    kv[n++] = SRV_NUM("total_ms", total_ms);
    kv[n++] = SRV_STR("id", r->id);
    if (r->code[0])
        kv[n++] = SRV_STR("code", r->code);
    const char *end = end_name(toe);
    srv_conn_end cut = srv_conn_cut(h->conns, r->track);
    if (r->late)
        end = "read_timeout";
    else if (cut != SRV_CONN_LIVE)
        end = srv_conn_end_name(cut);
    if (end)
        kv[n++] = SRV_STR("end", end);
    srv_log_write(h->log, "info", "access", kv, n);
    /* The log keeps the status attnd meant to send (end= says it was not); the metrics count
     * only replies that went out whole. */
    bool sent = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK;
    srv_metrics_request(h->metrics, r->route, sent ? r->status : 0, r->bytes_in,
                        sent ? r->bytes_out : 0, total_ms * 1e-3, r->sj.model);
    http_unsent_release(h, r, r->unsent); /* libmicrohttpd frees the body next: room for a reply */
    atomic_fetch_sub(&h->outstanding, 1);
    /* the connection now waits for its next request */
    srv_conn_set(h->conns, r->track, SRV_CONN_IDLE);
    http_req_unref(r);
}

/* A reply written to the socket fd at once, in place of libmicrohttpd's, and the socket's
 * sending side shut, so that nothing libmicrohttpd may write after it goes out: for what wire.c
 * refuses (on_wire_refused), and for a Content-Length libmicrohttpd 0.9.75 cannot read (not a
 * number, or past 2^64 - 1) on a connection wire.c could not read. libmicrohttpd answers that
 * itself, before attnd sees the request, and writes its status line and headers twice (it
 * builds the reply's head when it refuses the request, and again when it sends the reply); it
 * logs the refusal first, on the thread that serves the connection (on_mhd_log). The connection
 * is then the one on this thread whose request line has come and whose headers are not handed
 * over: when there are several, they cannot be told apart, and libmicrohttpd's reply goes out
 * as it is. */
static void answer_raw(srv_http *h, int fd, const api_error *e, const char *reason,
                       const char *event, const char *why) {
    api_buf body = {0};
    api_error_body(e, &body);
    char id[ID_MAX + 1], head[512];
    uint64_t k = atomic_fetch_add_explicit(&h->next_id, 1, memory_order_relaxed);
    snprintf(id, sizeof id, "%016llx", (unsigned long long)mix64(h->id_salt ^ k));
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nConnection: close\r\nX-Request-Id: %s\r\n"
                     "Content-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n"
                     "Referrer-Policy: no-referrer\r\nCache-Control: no-store\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     e->status, reason, id, body.len);
    if (n > 0 && (size_t)n < sizeof head && !body.failed) {
        struct iovec iov[2] = {{head, (size_t)n}, {body.data, body.len}};
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
        sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    shutdown(fd, SHUT_WR); /* a partial reply, if any, ends here too */
    srv_kv kv[4] = {SRV_INT("status", e->status), SRV_STR("code", e->code), SRV_STR("id", id)};
    size_t nkv = 3;
    if (why)
        kv[nkv++] = SRV_STR("why", why);
    srv_log_write(h->log, "warn", event, kv, nkv);
    srv_metrics_request(h->metrics, SRV_ROUTE_UNKNOWN, (unsigned)e->status, 0, body.len, 0,
                        API_NO_MODEL);
    api_buf_free(&body);
}

/* A Content-Length that is not a number (too_large: digits past 2^64 - 1), refused on fd. */
static void answer_bad_length(srv_http *h, int fd, bool too_large, const char *why) {
    api_error e = {0};
    if (too_large)
        api_fail(&e, 413, "body_too_large", NULL,
                 "the Content-Length is past 2^64 - 1 bytes, over the limit of %zu bytes "
                 "(--max-body-bytes)",
                 h->cfg->max_body_bytes);
    else
        api_fail(&e, 400, "invalid_request", NULL,
                 "the Content-Length is not a number of bytes; send digits only, once");
    answer_raw(h, fd, &e, too_large ? "Content Too Large" : "Bad Request", "bad_content_length",
               why);
}

/* wire.c refused the bytes of the connection on fd, before libmicrohttpd parsed them: a line
 * that breaks HTTP/1.1's framing (400), or a Content-Length that is not a number (400) or past
 * 2^64 - 1 (413), answered on fd, the connection that sent it. Then what is left of the request
 * in the socket is read and dropped (at most 64 KiB, without waiting), so that libmicrohttpd's
 * close ends the connection with FIN after the reply, not with a reset that could destroy it.
 * libmicrohttpd reads the connection as ended. */
static void on_wire_refused(void *ctx, int fd, srv_wire_refusal what, const char *why) {
    srv_http *h = ctx;
    if (what == SRV_WIRE_FRAMING) {
        api_error e = {0};
        api_fail(&e, 400, "invalid_request", NULL,
                 "the request's framing is refused: %s (RFC 9112); the connection is closed", why);
        answer_raw(h, fd, &e, "Bad Request", "framing_refused", why);
    } else {
        answer_bad_length(h, fd, what == SRV_WIRE_LENGTH_TOO_LARGE, why);
    }
    char drop[4096];
    for (int i = 0; i < 16 && recvfrom(fd, drop, sizeof drop, MSG_DONTWAIT, NULL, NULL) > 0; i++)
        ;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    srv_http *h = cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    srv_kv kv[] = {SRV_STR("detail", msg)};
    srv_log_write(h->log, "warn", "libmicrohttpd", kv, 1);
    /* A Content-Length libmicrohttpd refused: on a connection wire.c could not read (it refuses
     * them first on the others), and only when the connection can be told (see answer_raw). */
    bool bad = !strncmp(msg, "Failed to parse `Content-Length' header", 39);
    bool big = !bad && !strncmp(msg, "Too large value of 'Content-Length' header", 42);
    int fd = bad || big ? srv_conns_take_head(h->conns) : -1;
    if (fd >= 0)
        answer_bad_length(h, fd, big, NULL);
}

/* ---- Connections (conn.c tracks them) ----------------------------------------------------- */

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    srv_http *h = cls;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    int fd = ci ? (int)ci->connect_fd : -1;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        srv_wire_open(fd, on_wire_refused, h);
        *socket_context = srv_conn_open(h->conns, fd);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        srv_wire_close(fd);
        srv_conn_close(h->conns, *socket_context);
        *socket_context = NULL;
    }
}

/* libmicrohttpd has read a request line: until its headers are handed over (on_access), the
 * connection's record says so, and which thread serves it. */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *conn) {
    (void)uri;
    srv_http *h = cls;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    srv_conn_request_line(h->conns, ci ? ci->socket_context : NULL);
    return NULL; /* on_access makes the request's object */
}

/* ---- Life cycle --------------------------------------------------------------------------- */

srv_http *srv_http_start(const srv_config *cfg, const srv_log *log, int listen_fd,
                         srv_metrics *metrics, srv_error *err) {
    srv_http *h = calloc(1, sizeof *h);
    if (!h) {
        close(listen_fd);
        srv_fail(err, "out of memory starting HTTP");
        return NULL;
    }
    h->cfg = cfg;
    h->log = log;
    h->metrics = metrics;
    atomic_init(&h->ready, false);
    atomic_init(&h->draining, false);
    atomic_init(&h->leaving, false);
    atomic_init(&h->outstanding, 0);
    atomic_init(&h->unsent, 0);
    atomic_init(&h->next_id, 1);
    pthread_mutex_init(&h->share_mu, NULL);
    struct timeval tv;
    gettimeofday(&tv, NULL);
    h->start_wall = (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
    if (getrandom(&h->id_salt, sizeof h->id_salt, GRND_NONBLOCK) != sizeof h->id_salt)
        h->id_salt = mix64((uint64_t)tv.tv_usec ^ ((uint64_t)getpid() << 32));
    if (srv_wire_start() != SRV_OK) {
        close(listen_fd);
        free(h);
        srv_fail(err, "out of memory starting HTTP");
        return NULL;
    }
    if (!(h->conns = srv_conns_create(cfg, log, err))) {
        close(listen_fd);
        free(h);
        return NULL;
    }
    size_t parsers = cfg->parse_threads ? cfg->parse_threads : cfg->threads;
    if (!(h->parsers = srv_tasks_create(parsers ? parsers : 1, cfg->max_queue, err))) {
        close(listen_fd);
        srv_conns_destroy(h->conns);
        free(h);
        return NULL;
    }

    /* poll(2), not epoll: with epoll, libmicrohttpd 0.9.75 misses a client's FIN that arrives
     * together with its last bytes (a client that sends and closes at once) and holds the
     * connection until the idle timeout; tests/reliability checks it is closed at once. */
    /* --max-connections is kept by conn.c (a connection past it evicts an idle or late one, or
     * is shut down at once), not by libmicrohttpd, which would leave new connections waiting in
     * the kernel's backlog, probes among them. Its own limit, split between its threads, leaves
     * room beside them for the connections attnd has shut down and it has not closed yet. */
    size_t all = srv_config_connections_max(cfg);
    unsigned mhd_limit = all > UINT_MAX ? UINT_MAX : (unsigned)all;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG;
    h->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_access, h, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)listen_fd, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)cfg->http_threads, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->idle_timeout, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, h, MHD_OPTION_URI_LOG_CALLBACK, on_request_line, h,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MHD_MEMORY, MHD_OPTION_CONNECTION_LIMIT,
        mhd_limit, MHD_OPTION_END);
    if (!h->daemon) {
        close(listen_fd);
        srv_tasks_destroy(h->parsers);
        srv_conns_destroy(h->conns);
        free(h);
        srv_fail(err, "libmicrohttpd failed to start (see the lines above)");
        return NULL;
    }
    return h;
}

void srv_http_set_ready(srv_http *h, const api_registry *models, const api_limits *limits,
                        srv_workers *workers) {
    h->models = models;
    h->limits = *limits;
    h->workers = workers;
    atomic_store_explicit(&h->ready, true, memory_order_release);
}

void srv_http_set_sessions(srv_http *h, api_sessions *sessions) {
    h->sessions = sessions;
}

void srv_http_set_leaving(srv_http *h) {
    atomic_store(&h->leaving, true);
}

void srv_http_set_draining(srv_http *h) {
    atomic_store(&h->draining, true);
}

bool srv_http_wait_replied(srv_http *h, double deadline) {
    while (atomic_load(&h->outstanding) > 0) {
        if (srv_now() >= deadline)
            return false;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return true;
}

void srv_http_stop(srv_http *h) {
    if (!h)
        return;
    srv_conns_stop(h->conns);
    /* The bodies still queued for parsing are answered (503 draining) and their connections
     * resumed while libmicrohttpd still runs. */
    srv_tasks_destroy(h->parsers);
    MHD_stop_daemon(h->daemon); /* reports every connection closed: frees their records */
    srv_conns_destroy(h->conns);
    pthread_mutex_destroy(&h->share_mu);
    free(h);
}
