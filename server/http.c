/* http.c - the HTTP side of attnd on libmicrohttpd: framing checks, routes, auth, CORS, the
 * capped (and decoded) body, jobs handed to the workers behind MHD_suspend_connection, replies
 * and their headers, the budget of replies not yet sent, and one access log line per request.
 *
 * A request's life (one http_req per request, created on the first call of the access handler,
 * freed when both the connection and the worker have let go of it):
 *
 *   REQ_NEW     first call: framing (400 and 501, closing the connection), route, method,
 *               auth, early refusals (405, 413 from Content-Length, 415 for the media type or
 *               the content coding, 503) and the replies of the GET routes;
 *   REQ_BODY    the body arrives in pieces (body.c decodes gzip and deflate); past
 *               --max-body-bytes, decoded, it is dropped and 413 follows;
 *   (complete)  api_job_parse on this thread; submit to the workers and suspend, under r->mu;
 *   REQ_QUEUED  a worker fills r->sj and resumes the connection (under r->mu, so never before
 *               the suspend); the access handler is called again and queues the reply;
 *   REQ_REPLIED nothing more to do; the completion callback logs, counts and lets go.
 *
 * The read timeout (--read-timeout): each connection is tracked (conn_track). Between requests,
 * and before its first, a connection is idle, and only the idle timeout (--idle-timeout,
 * libmicrohttpd's own: it closes a connection that sends nothing) applies to it. A request
 * begins with its first byte, which the reaper thread sees in the socket's byte count
 * (TCP_INFO), or the access handler when the headers have come; from then on it must arrive,
 * headers and body, within the read timeout. A connection whose request is late is closed: by
 * on_access when a late body byte arrives, else by the reaper (a client still trickling its
 * headers, or stalled mid-request), since libmicrohttpd's idle timeout restarts at every byte.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/tcp.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

/* libmicrohttpd's per-connection buffer (headers and body chunks). It zeroes the whole buffer
 * for each request, so a smaller one is cheaper (bench/RESULTS.md: the connection buffer). */
#define MHD_MEMORY     (32 << 10)
#define ID_MAX         64                 /* longest X-Request-Id kept; longer ones are replaced */
#define BODY_FIRST_CAP ((size_t)1 << 20)  /* most of a body reserved before it arrives */
#define DISCARD_SLACK  ((size_t)16 << 20) /* body bytes read past the cap before dropping */
#define ALLOW_JOB      "POST, OPTIONS"
#define ALLOW_GET      "GET, HEAD, OPTIONS"
#define CORS_HEADERS                                                                               \
    "Authorization, Content-Type, Content-Encoding, X-Request-Id, Inference-Header-Content-Length"
#define CORS_EXPOSE "X-Request-Id, Retry-After, WWW-Authenticate, Inference-Header-Content-Length"
#define PAGE_CSP                                                                                   \
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "              \
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "             \
    "form-action 'self'"

/* Where a connection is, as the read timeout sees it. */
typedef enum track_state {
    TRACK_IDLE = 0, /* between requests (or before the first): no byte of the next yet */
    TRACK_READING,  /* a request is arriving (headers or body) */
    TRACK_ARRIVED,  /* the request has arrived: it is computed or its reply is being sent */
} track_state;

/* A connection as the read timeout sees it. Made when libmicrohttpd opens the connection and
 * freed when it reports it closed, which it does before it closes the socket: so fd is the
 * connection's own while the record is listed, and the reaper may read its TCP_INFO and shut
 * it down. */
typedef struct conn_track {
    int fd;
    track_state state;
    double since;     /* TRACK_READING: when the request began; TRACK_IDLE: when idleness did */
    uint64_t rx_mark; /* TRACK_IDLE: bytes the socket had received when idleness began */
    bool cut;         /* the reaper shut it down */
    bool head;        /* a request line has come and its headers are not handed over yet */
    pthread_t thread; /* the libmicrohttpd thread that serves the connection (once head) */
    struct conn_track *prev, *next;
} conn_track;

struct srv_http {
    const srv_config *cfg;
    const srv_log *log;
    srv_metrics *metrics;
    struct MHD_Daemon *daemon;
    /* Written once by srv_http_set_ready before ready is set (release); read after it. */
    const api_registry *models;
    api_limits limits;
    srv_workers *workers;
    atomic_bool ready, draining;
    atomic_size_t outstanding;  /* requests begun (headers read) and not yet completed */
    atomic_size_t unsent;       /* bytes of job replies reserved or held, not yet sent */
    atomic_bool unsent_refused; /* a job's reply did not fit since room was last given back */
    atomic_uint_fast64_t next_id;
    uint64_t id_salt;
    double start_wall;
    /* The tracked connections (under conns_mu) and the reaper of late ones. */
    pthread_mutex_t conns_mu;
    pthread_cond_t reaper_cv;
    conn_track *conns;
    bool reaper_stop, has_reaper;
    pthread_t reaper;
};

typedef enum req_state { REQ_NEW = 0, REQ_BODY, REQ_QUEUED, REQ_REPLIED } req_state;

typedef struct http_req {
    srv_job sj; /* the job as the workers see it; sj.owner is this request */
    srv_http *h;
    struct MHD_Connection *conn;
    pthread_mutex_t mu; /* orders the worker's resume after the handler's suspend */
    atomic_int refs;    /* the connection's, and the worker's while the job is out */
    req_state state;
    srv_route route;
    bool is_get, is_post, is_options;
    char method[16];
    char *path;
    char id[ID_MAX + 1];
    srv_body *body;    /* the body being received (decoded), freed once parsed */
    srv_coding coding; /* its Content-Encoding */
    bool close;        /* the reply closes the connection (Connection: close) */
    size_t bytes_in, bytes_out;
    size_t unsent; /* bytes this request's job reply reserves or holds of h->unsent */
    unsigned status;
    char code[32]; /* the error code of an error reply */
    double t_start, parse_ms;
    /* headers of the reply being built */
    const char *allow;
    const char *preflight; /* the methods an allowed CORS preflight is answered with */
    bool www_auth, bad_token, page;
    conn_track *track; /* the connection's record; NULL when it could not be made */
    bool late;         /* dropped for --read-timeout while its body arrived */
    /* The Open Inference Protocol (v2) */
    char *model, *version;        /* of a /v2/models/ path (version NULL when it has none) */
    size_t v2_header_len;         /* Inference-Header-Content-Length, or API_V2_NO_HEADER */
    srv_coding reply_coding;      /* the coding the job's reply may take (Accept-Encoding) */
    size_t binary_bytes;          /* raw tensor bytes at the end of the job's reply */
    size_t json_len;              /* a reply with binary_bytes: its JSON part */
    const char *content_encoding; /* of the reply being built, or NULL */
} http_req;

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

/* Constant-time in the key: the time depends only on the key's length and the token's. */
static bool key_equal(const char *token, size_t tlen, const char *key, size_t klen) {
    volatile unsigned char d = tlen != klen;
    for (size_t i = 0; i < klen; i++)
        d |= (unsigned char)(key[i] ^ (i < tlen ? token[i] : 0));
    return d == 0;
}

/* True when no key is configured, or Authorization: Bearer carries it. *had_token tells
 * whether a Bearer token was given at all. */
static bool authorized(const srv_http *h, http_req *r, bool *had_token) {
    *had_token = false;
    if (h->cfg->api_key_len == 0)
        return true;
    const char *a =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!a)
        return false;
    while (*a == ' ' || *a == '\t')
        a++;
    if (strncasecmp(a, "Bearer", 6) != 0 || (a[6] != ' ' && a[6] != '\t'))
        return false;
    a += 6;
    while (*a == ' ' || *a == '\t')
        a++;
    size_t n = strlen(a);
    while (n > 0 && (a[n - 1] == ' ' || a[n - 1] == '\t'))
        n--;
    *had_token = n > 0;
    return key_equal(a, n, h->cfg->api_key, h->cfg->api_key_len);
}

/* Content-Type is application/json, perhaps with parameters. */
static bool is_json(const char *ct) {
    if (!ct)
        return false;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    static const char want[] = "application/json";
    if (strncasecmp(ct, want, sizeof want - 1) != 0)
        return false;
    ct += sizeof want - 1;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return *ct == '\0' || *ct == ';';
}

#define V2_MODELS "/v2/models/"

/* /v2/models/{name}[/versions/{version}][/ready | /infer]: the route, and the name and version
 * as new strings (*version NULL when the path gives none); SRV_ROUTE_UNKNOWN for an empty
 * name. False when out of memory. */
static bool v2_model_route(const char *url, srv_route *route, char **name, char **version) {
    const char *p = url + sizeof V2_MODELS - 1;
    size_t n = strlen(p), vn = 0;
    static const struct {
        const char *suffix;
        srv_route route;
    } suffixes[] = {{"/infer", SRV_ROUTE_V2_INFER}, {"/ready", SRV_ROUTE_V2_MODEL_READY}};
    *route = SRV_ROUTE_V2_MODEL;
    for (size_t i = 0; i < 2 && *route == SRV_ROUTE_V2_MODEL; i++) {
        size_t sl = strlen(suffixes[i].suffix);
        if (n > sl && !strcmp(p + n - sl, suffixes[i].suffix)) {
            n -= sl;
            *route = suffixes[i].route;
        }
    }
    const char *v = NULL;
    for (const char *q = p; (q = strstr(q, "/versions/")) != NULL && q < p + n; q++)
        v = q; /* the last one: a name may not hold it, but be sure */
    if (v) {
        vn = (size_t)(p + n - v) - 10;
        n = (size_t)(v - p);
    }
    if (n == 0) {
        *route = SRV_ROUTE_UNKNOWN;
        return true;
    }
    *name = strndup(p, n);
    *version = v ? strndup(v + 10, vn) : NULL;
    return *name && (!v || *version);
}

/* The route of url; a /v2/models/ path's model name and version go to r. False when out of
 * memory. */
static bool route_of(const char *url, http_req *r) {
    static const struct {
        const char *path;
        srv_route route;
    } routes[] = {
        {"/v1/attention", SRV_ROUTE_ATTENTION},
        {"/v1/sdpa", SRV_ROUTE_SDPA},
        {"/v1/models", SRV_ROUTE_MODELS},
        {"/healthz", SRV_ROUTE_HEALTHZ},
        {"/readyz", SRV_ROUTE_READYZ},
        {"/metrics", SRV_ROUTE_METRICS},
        {"/openapi.yaml", SRV_ROUTE_OPENAPI},
        {"/v2", SRV_ROUTE_V2_SERVER},
        {"/v2/", SRV_ROUTE_V2_SERVER},
        {"/v2/health/live", SRV_ROUTE_V2_LIVE},
        {"/v2/health/ready", SRV_ROUTE_V2_READY},
        {"/v2/repository/index", SRV_ROUTE_V2_INDEX},
    };
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(url, routes[i].path)) {
            r->route = routes[i].route;
            return true;
        }
    if (!strncmp(url, "/v1/models/", 11)) { /* GET /v1/models/{name} */
        r->route = SRV_ROUTE_MODELS;
        return true;
    }
    if (!strncmp(url, V2_MODELS, sizeof V2_MODELS - 1))
        return v2_model_route(url, &r->route, &r->model, &r->version);
    r->route = srv_static_find(url) ? SRV_ROUTE_STATIC : SRV_ROUTE_UNKNOWN;
    return true;
}

/* Routes whose POST is a job for the workers. */
static bool is_job_route(srv_route r) {
    return r == SRV_ROUTE_ATTENTION || r == SRV_ROUTE_SDPA || r == SRV_ROUTE_V2_INFER;
}

/* Routes that take POST (and OPTIONS); the others take GET and HEAD (and OPTIONS). */
static bool takes_post(srv_route r) {
    return is_job_route(r) || r == SRV_ROUTE_V2_INDEX;
}

/* Routes open without the API key: the probes. */
static bool is_open(srv_route r) {
    return r == SRV_ROUTE_HEALTHZ || r == SRV_ROUTE_READYZ || r == SRV_ROUTE_V2_LIVE ||
           r == SRV_ROUTE_V2_READY;
}

/* The path is the Open Inference Protocol's (/v2 and below): its errors are {"error": msg}. */
static bool v2_path(const char *path) {
    return !strncmp(path, "/v2", 3) && (path[3] == '\0' || path[3] == '/');
}

/* ---- The read timeout --------------------------------------------------------------------- */

/* Bytes the socket fd has received so far (TCP_INFO); 0 when unknown. */
static uint64_t socket_rx_bytes(int fd) {
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received)
        return 0;
    return ti.tcpi_bytes_received;
}

/* With conns_mu held: makes track idle from now (its reply has gone). */
static void track_idle_locked(conn_track *track) {
    track->state = TRACK_IDLE;
    track->since = srv_now();
    track->rx_mark = socket_rx_bytes(track->fd);
}

/* Moves track to state: TRACK_READING starts the read timeout unless the request was already
 * seen arriving; TRACK_IDLE starts idleness. NULL does nothing. */
static void track_set(srv_http *h, conn_track *track, track_state state) {
    if (!track)
        return;
    pthread_mutex_lock(&h->conns_mu);
    track->head = false; /* the headers have been handed over, or the request is done */
    if (state == TRACK_IDLE) {
        track_idle_locked(track);
    } else if (state == TRACK_READING) {
        if (track->state != TRACK_READING)
            track->since = srv_now();
        track->state = TRACK_READING;
    } else {
        track->state = TRACK_ARRIVED;
    }
    pthread_mutex_unlock(&h->conns_mu);
}

/* True when the request on track has been arriving for longer than --read-timeout. */
static bool track_late(srv_http *h, conn_track *track) {
    if (!track || h->cfg->read_timeout <= 0)
        return false;
    pthread_mutex_lock(&h->conns_mu);
    bool late = track->state == TRACK_READING && srv_now() - track->since > h->cfg->read_timeout;
    pthread_mutex_unlock(&h->conns_mu);
    return late;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    srv_http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_track *c = calloc(1, sizeof *c);
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!c) { /* out of memory: every connection must be tracked (see on_mhd_log) */
            if (ci)
                shutdown((int)ci->connect_fd, SHUT_RDWR);
            return;
        }
        c->fd = ci ? (int)ci->connect_fd : -1;
        c->state = TRACK_IDLE;
        c->since = srv_now();
        c->rx_mark = 0; /* any byte received is the first request's */
        pthread_mutex_lock(&h->conns_mu);
        c->next = h->conns;
        if (h->conns)
            h->conns->prev = c;
        h->conns = c;
        pthread_mutex_unlock(&h->conns_mu);
        *socket_context = c;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_track *c = *socket_context;
        if (!c)
            return;
        pthread_mutex_lock(&h->conns_mu);
        if (c->prev)
            c->prev->next = c->next;
        else
            h->conns = c->next;
        if (c->next)
            c->next->prev = c->prev;
        double idle_s = c->state == TRACK_IDLE ? srv_now() - c->since : 0;
        pthread_mutex_unlock(&h->conns_mu);
        /* libmicrohttpd closes a connection silent for --idle-timeout; a client that closed
         * its side, or a shutdown, ends idleness sooner. */
        if (h->cfg->idle_timeout > 0 && idle_s >= (double)h->cfg->idle_timeout - 0.05) {
            srv_kv kv[] = {SRV_NUM("idle_s", idle_s),
                           SRV_INT("idle_timeout_s", h->cfg->idle_timeout)};
            srv_log_write(h->log, "info", "idle_timeout", kv, 2);
        }
        free(c);
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
    conn_track *track = ci ? ci->socket_context : NULL;
    if (track) {
        pthread_mutex_lock(&h->conns_mu);
        track->head = true;
        track->thread = pthread_self();
        pthread_mutex_unlock(&h->conns_mu);
    }
    return NULL; /* on_access makes the request's object */
}

/* The reaper: a few times per timeout, marks idle connections that have received a byte as
 * reading a request (from now), and shuts down every connection whose request is late;
 * libmicrohttpd then reads the end of the stream and closes it. */
static void *reaper_main(void *arg) {
    srv_http *h = arg;
    double period = h->cfg->read_timeout / 8;
    period = period < 0.01 ? 0.01 : period > 0.25 ? 0.25 : period;
    pthread_mutex_lock(&h->conns_mu);
    while (!h->reaper_stop) {
        double now = srv_now();
        size_t cut = 0;
        for (conn_track *c = h->conns; c; c = c->next) {
            if (c->state == TRACK_IDLE && socket_rx_bytes(c->fd) > c->rx_mark) {
                c->state = TRACK_READING;
                c->since = now;
            } else if (c->state == TRACK_READING && !c->cut && c->fd >= 0 &&
                       now - c->since > h->cfg->read_timeout) {
                shutdown(c->fd, SHUT_RDWR);
                c->cut = true;
                cut++;
            }
        }
        if (cut) {
            srv_kv kv[] = {SRV_INT("connections", cut),
                           SRV_NUM("read_timeout_s", h->cfg->read_timeout)};
            srv_log_write(h->log, "warn", "read_timeout", kv, 2);
        }
        srv_cond_wait_for(&h->reaper_cv, &h->conns_mu, period);
    }
    pthread_mutex_unlock(&h->conns_mu);
    return NULL;
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
    r->v2_header_len = API_V2_NO_HEADER;
    r->sj.owner = r;
    if (!route_of(url, r)) {
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

static void req_unref(http_req *r) {
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

/* ---- Replies ------------------------------------------------------------------------------ */

static void add_cors(const srv_http *h, http_req *r, struct MHD_Response *resp) {
    if (!h->cfg->cors_origins[0])
        return;
    MHD_add_response_header(resp, "Vary", "Origin");
    const char *origin = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin");
    if (origin && srv_config_origin_allowed(h->cfg, origin, strlen(origin))) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
        MHD_add_response_header(resp, "Access-Control-Expose-Headers", CORS_EXPOSE);
    }
}

/* Queues resp (taken over) with the headers every response carries; len is its body's size. */
static enum MHD_Result reply_resp(http_req *r, unsigned status, const char *type,
                                  struct MHD_Response *resp, size_t len) {
    srv_http *h = r->h;
    MHD_add_response_header(resp, "X-Request-Id", r->id);
    if (type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    if (r->page) {
        MHD_add_response_header(resp, "Content-Security-Policy", PAGE_CSP);
        MHD_add_response_header(resp, "X-Frame-Options", "DENY");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
    } else {
        MHD_add_response_header(resp, "Cache-Control", "no-store");
    }
    if (r->allow)
        MHD_add_response_header(resp, "Allow", r->allow);
    if (r->route == SRV_ROUTE_V2_INFER && status == 200) {
        char hl[24];
        if (r->binary_bytes) {
            snprintf(hl, sizeof hl, "%zu", r->json_len);
            MHD_add_response_header(resp, "Inference-Header-Content-Length", hl);
        }
        if (r->content_encoding)
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, r->content_encoding);
        MHD_add_response_header(resp, "Vary", "Accept-Encoding");
    }
    if (r->www_auth)
        MHD_add_response_header(resp, "WWW-Authenticate",
                                r->bad_token ? "Bearer realm=\"attnd\", error=\"invalid_token\""
                                             : "Bearer realm=\"attnd\"");
    if (status == 503)
        MHD_add_response_header(resp, "Retry-After", atomic_load(&h->draining) ? "5" : "1");
    if (r->close || atomic_load(&h->draining))
        MHD_add_response_header(resp, "Connection", "close");
    add_cors(h, r, resp);
    if (r->preflight) {
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", r->preflight);
        MHD_add_response_header(resp, "Access-Control-Allow-Headers", CORS_HEADERS);
        MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    }
    r->status = status;
    r->bytes_out = len;
    r->state = REQ_REPLIED;
    track_set(h, r->track, TRACK_ARRIVED);
    enum MHD_Result rc = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
    if (rc != MHD_YES) { /* not sent: the log and metrics must not say it was */
        r->status = 0;
        r->bytes_out = 0;
    }
    return rc;
}

/* Queues a reply with the headers every response carries. mode says who owns body (MUST_FREE:
 * malloc'd, passed to libmicrohttpd). */
static enum MHD_Result reply(http_req *r, unsigned status, const char *type, void *body, size_t len,
                             enum MHD_ResponseMemoryMode mode) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, mode);
    if (!resp) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    return reply_resp(r, status, type, resp, len);
}

/* ---- Unsent replies (--max-unsent-bytes) --------------------------------------------------- */

/* The budget counts the replies of jobs by reservation: when a job has been parsed, before it
 * is queued, the most its reply buffer can take (api_job_response_bytes + API_RESPOND_SLACK,
 * known from the shapes) is reserved, and a job whose reply does not fit is refused at once,
 * never computed and then refused. When the worker hands the reply back, the reservation comes
 * down to the buffer's capacity (what is really held); it is released when the request completes
 * (libmicrohttpd has written the reply out, or the connection has gone), or at once when the job
 * ends in an error. Other replies (errors, /metrics, /v1/models) are small, at most one per
 * connection, and are not counted. */

/* Adds n bytes to r's share of the budget if they fit; false (nothing counted) when they do
 * not. */
static bool unsent_reserve(srv_http *h, http_req *r, size_t n) {
    size_t cur = atomic_load(&h->unsent), max = h->cfg->max_unsent_bytes;
    do {
        if (cur > max || n > max - cur)
            return false;
    } while (!atomic_compare_exchange_weak(&h->unsent, &cur, cur + n));
    r->unsent += n;
    return true;
}

/* Gives back n bytes of r's share (at most what it holds): room for other replies, so jobs are
 * admitted again. */
static void unsent_release(srv_http *h, http_req *r, size_t n) {
    if (n > r->unsent)
        n = r->unsent;
    if (n == 0)
        return;
    r->unsent -= n;
    atomic_fetch_sub(&h->unsent, n);
    atomic_store(&h->unsent_refused, false);
}

/* True when the replies not yet sent fill the budget (they reach it, or a job's reply did not
 * fit since room was last given back): new jobs are refused until some is. */
static bool unsent_full(const srv_http *h) {
    return atomic_load(&h->unsent) >= h->cfg->max_unsent_bytes || atomic_load(&h->unsent_refused);
}

/* Replies with body (moved out of *b). */
static enum MHD_Result reply_buf(http_req *r, unsigned status, const char *type, api_buf *b) {
    if (b->failed) {
        api_buf_free(b);
        static const char oom[] = "{\"error\": {\"code\": \"out_of_memory\", \"message\": \"out of "
                                  "memory writing the reply\", \"field\": null}}";
        static const char oom_v2[] = "{\"error\": \"out of memory writing the reply\"}";
        bool v2 = v2_path(r->path);
        snprintf(r->code, sizeof r->code, "out_of_memory");
        r->binary_bytes = 0;
        r->content_encoding = NULL;
        return reply(r, 500, "application/json", (void *)(v2 ? oom_v2 : oom),
                     v2 ? sizeof oom_v2 - 1 : sizeof oom - 1, MHD_RESPMEM_PERSISTENT);
    }
    void *data = b->data;
    size_t len = b->len;
    bool block = b->block;
    *b = (api_buf){0};
    if (!data)
        return reply(r, status, type, (void *)"", 0, MHD_RESPMEM_PERSISTENT);
    if (!block)
        return reply(r, status, type, data, len, MHD_RESPMEM_MUST_FREE);
    /* A block of the job memory cache: libmicrohttpd gives it back once the reply is sent. */
    struct MHD_Response *resp =
        MHD_create_response_from_buffer_with_free_callback_cls(len, data, api_mem_free, data);
    if (!resp) {
        api_mem_free(data);
        return MHD_NO;
    }
    return reply_resp(r, status, type, resp, len);
}

/* An error reply: {"error": {"code", "message", "field"}}, or on the Open Inference Protocol's
 * paths its {"error": "message"}. */
static enum MHD_Result reply_api_error(http_req *r, const api_error *e) {
    api_buf b = {0};
    if (v2_path(r->path))
        api_v2_error_body(e, &b);
    else
        api_error_body(e, &b);
    snprintf(r->code, sizeof r->code, "%s", e->code);
    return reply_buf(r, e->status ? (unsigned)e->status : 500, "application/json", &b);
}

static enum MHD_Result reply_error(http_req *r, unsigned status, const char *code, const char *fmt,
                                   ...) __attribute__((format(printf, 4, 5)));

static enum MHD_Result reply_error(http_req *r, unsigned status, const char *code, const char *fmt,
                                   ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    api_error e = {0};
    api_fail(&e, (int)status, code, NULL, "%s", msg);
    return reply_api_error(r, &e);
}

static enum MHD_Result reply_json(http_req *r, unsigned status, const char *literal) {
    return reply(r, status, "application/json", (void *)literal, strlen(literal),
                 MHD_RESPMEM_PERSISTENT);
}

/* 503 draining or not_ready; counted as a rejected job on the job routes. */
static enum MHD_Result reply_unavailable(http_req *r) {
    if (atomic_load(&r->h->draining)) {
        if (is_job_route(r->route))
            srv_metrics_reject(r->h->metrics, SRV_REJECT_DRAINING);
        return reply_error(r, 503, "draining",
                           "attnd is shutting down and takes no new jobs; retry on another "
                           "instance");
    }
    return reply_error(r, 503, "not_ready", "attnd is starting and not ready yet; retry shortly");
}

/* 503 reply_budget: the replies not yet sent fill --max-unsent-bytes. */
static enum MHD_Result reply_budget_full(srv_http *h, http_req *r) {
    srv_metrics_reject(h->metrics, SRV_REJECT_REPLY_BUDGET);
    return reply_error(r, 503, "reply_budget",
                       "replies reserved or waiting for their clients to read them fill the "
                       "budget of %zu bytes (--max-unsent-bytes); retry shortly",
                       h->cfg->max_unsent_bytes);
}

/* ---- Routes ------------------------------------------------------------------------------- */

static srv_gauges gauges(const srv_http *h) {
    srv_gauges g = {0};
    bool ready = atomic_load_explicit(&h->ready, memory_order_acquire);
    if (ready)
        srv_workers_stats(h->workers, &g.queue_depth, &g.jobs_in_flight);
    g.queue_capacity = h->cfg->max_queue;
    g.unsent_bytes = atomic_load(&h->unsent);
    g.unsent_budget = h->cfg->max_unsent_bytes;
    if (ready)
        g.mem = api_mem_stats_get(h->limits.mem);
    g.workers = h->cfg->threads;
    g.pool_threads = h->cfg->pool_threads;
    g.draining = atomic_load(&h->draining);
    g.ready = ready && !g.draining;
    g.start_time = h->start_wall;
    return g;
}

/* True when method is one of the comma-separated list. */
static bool method_listed(const char *list, const char *method) {
    size_t mn = strlen(method);
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        if (n == mn && !strncmp(p, method, n))
            return true;
        p += n;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return false;
}

/* OPTIONS: a CORS preflight (Origin and Access-Control-Request-Method given), or a plain one
 * that lists the route's methods. Needs no API key: browsers send none with a preflight. */
static enum MHD_Result on_options(srv_http *h, http_req *r) {
    if (r->route == SRV_ROUTE_UNKNOWN)
        return reply_error(r, 404, "not_found", "there is no route %.200s; see /openapi.yaml",
                           r->path);
    const char *allow = takes_post(r->route) ? ALLOW_JOB : ALLOW_GET;
    const char *origin = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin");
    const char *want =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Access-Control-Request-Method");
    if (!origin || !want) { /* not a CORS preflight */
        r->allow = allow;
        return reply(r, 204, NULL, (void *)"", 0, MHD_RESPMEM_PERSISTENT);
    }
    if (!srv_config_origin_allowed(h->cfg, origin, strlen(origin)))
        return reply_error(r, 403, "cors_rejected",
                           "the origin %.100s is not allowed (--cors-origins)", origin);
    if (!method_listed(allow, want))
        return reply_error(r, 403, "cors_rejected", "%s does not take the method %.20s (only %s)",
                           r->path, want, allow);
    r->preflight = allow; /* reply() adds the CORS headers: the origin is allowed */
    return reply(r, 204, NULL, (void *)"", 0, MHD_RESPMEM_PERSISTENT);
}

/* Content-Type is application/octet-stream, perhaps with parameters. */
static bool is_octets(const char *ct) {
    while (ct && (*ct == ' ' || *ct == '\t'))
        ct++;
    static const char want[] = "application/octet-stream";
    return ct && !strncasecmp(ct, want, sizeof want - 1) &&
           (ct[sizeof want - 1] == '\0' || ct[sizeof want - 1] == ';' ||
            ct[sizeof want - 1] == ' ');
}

/* The headers of an infer request of the Open Inference Protocol: the model and version of
 * the path, the media type (none, JSON, or octets with binary tensors), the length of the JSON
 * part (Inference-Header-Content-Length) and the coding the reply may take. Replies and
 * returns true when they are refused. */
static bool v2_infer_refused(srv_http *h, http_req *r, enum MHD_Result *rc) {
    api_error e = {0};
    if (api_v2_model_check(h->models, r->model, r->version, &e) != 0) {
        *rc = reply_api_error(r, &e);
        return true;
    }
    const char *ct =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ct && !is_json(ct) && !is_octets(ct)) {
        *rc = reply_error(r, 415, "unsupported_media_type",
                          "send the inference request as application/json, or as "
                          "application/octet-stream with binary tensors (got %.60s)",
                          ct);
        return true;
    }
    const char *hl =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Inference-Header-Content-Length");
    if (hl) {
        errno = 0;
        char *end;
        unsigned long long v = strtoull(hl, &end, 10);
        if (errno || end == hl || *end || !(*hl >= '0' && *hl <= '9') || v > SIZE_MAX - 1) {
            *rc = reply_error(r, 400, "invalid_request",
                              "Inference-Header-Content-Length must be the length in bytes of "
                              "the request's JSON (got %.40s)",
                              hl);
            return true;
        }
        r->v2_header_len = (size_t)v;
    }
    r->reply_coding = srv_coding_accepted(
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING));
    return false;
}

static enum MHD_Result on_job_headers(srv_http *h, http_req *r) {
    if (!atomic_load_explicit(&h->ready, memory_order_acquire) || atomic_load(&h->draining))
        return reply_unavailable(r);
    const char *ct =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    enum MHD_Result refused;
    if (r->route == SRV_ROUTE_V2_INFER) {
        if (v2_infer_refused(h, r, &refused))
            return refused;
    } else if (!is_json(ct)) {
        return reply_error(r, 415, "unsupported_media_type",
                           "send the body as JSON with Content-Type: application/json (got %.60s)",
                           ct ? ct : "none");
    }
    const char *ce =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING);
    if (ce && !srv_coding_parse(ce, &r->coding))
        return reply_error(r, 415, "unsupported_media_type",
                           "the Content-Encoding %.60s is not supported: send the body as it is, "
                           "or with gzip or deflate",
                           ce);
    const char *cl =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    size_t expect = 0;
    if (cl) {
        errno = 0;
        char *end;
        unsigned long long v = strtoull(cl, &end, 10);
        if (!errno && end != cl && !*end && v > h->cfg->max_body_bytes)
            return reply_error(r, 413, "body_too_large",
                               "the request body is %llu bytes, over the limit of %zu bytes "
                               "(--max-body-bytes)",
                               v, h->cfg->max_body_bytes);
        if (!errno && end != cl && !*end)
            expect = (size_t)v;
    }
    if (unsent_full(h))
        return reply_budget_full(h, r);
    size_t queued, running;
    srv_workers_stats(h->workers, &queued, &running);
    if (queued >= h->cfg->max_queue) {
        srv_metrics_reject(h->metrics, SRV_REJECT_QUEUE_FULL);
        return reply_error(r, 503, "queue_full",
                           "all %zu places of the job queue are taken (--max-queue); retry "
                           "shortly",
                           h->cfg->max_queue);
    }
    /* What Content-Length announces is only reserved up to BODY_FIRST_CAP: a client that
     * announces much and sends little holds little; past it, the body grows to the announced
     * length at once. A coded body grows from 64 KiB. */
    size_t cap = expect && expect < BODY_FIRST_CAP ? expect : BODY_FIRST_CAP;
    if (r->coding != SRV_CODING_IDENTITY)
        cap = (size_t)64 << 10;
    if (cap > h->cfg->max_body_bytes)
        cap = h->cfg->max_body_bytes;
    r->body = srv_body_create(r->coding, h->cfg->max_body_bytes, cap, expect, h->limits.mem);
    if (!r->body)
        return reply_error(r, 503, "out_of_memory",
                           "no memory for a body of %zu bytes now; retry later", cap);
    r->state = REQ_BODY;
    return MHD_YES;
}

/* A worker's result: the reply's reservation comes down to the capacity of the buffer that holds
 * it (all of it, when the job ended in an error: error bodies are not counted). A buffer larger
 * than the reservation (never, as api_job_respond sizes it) must fit the budget for the rest,
 * else the reply is replaced by 503 reply_budget. */
static void on_job_done(srv_job *sj) {
    http_req *r = sj->owner;
    srv_http *h = r->h;
    /* A v2 reply: its JSON part's length, then the coding the client accepts (here, on the
     * worker's thread: the HTTP threads never compute). */
    if (sj->status == 200 && !sj->body.failed && r->route == SRV_ROUTE_V2_INFER) {
        r->json_len = sj->body.len - (r->binary_bytes < sj->body.len ? r->binary_bytes : 0);
        if (srv_coding_encode(r->reply_coding, &sj->body))
            r->content_encoding = srv_coding_name(r->reply_coding);
    }
    size_t held = sj->status == 200 && !sj->body.failed ? sj->body.cap : 0;
    if (held <= r->unsent) {
        unsent_release(h, r, r->unsent - held);
    } else if (!unsent_reserve(h, r, held - r->unsent)) {
        api_error e = {0};
        api_fail(&e, 503, "reply_budget", NULL,
                 "the reply of %zu bytes was computed, but replies waiting for their clients "
                 "fill the budget of %zu bytes (--max-unsent-bytes); retry shortly",
                 sj->body.len, h->cfg->max_unsent_bytes);
        srv_metrics_reject(h->metrics, SRV_REJECT_REPLY_BUDGET);
        unsent_release(h, r, r->unsent);
        atomic_store(&h->unsent_refused, true); /* held replies exist: they will go */
        api_buf_free(&sj->body);
        api_error_body(&e, &sj->body);
        sj->status = (unsigned)e.status;
        sj->error = e;
        snprintf(sj->code, sizeof sj->code, "%s", e.code);
    }
    pthread_mutex_lock(&r->mu);
    MHD_resume_connection(r->conn);
    pthread_mutex_unlock(&r->mu);
    req_unref(r);
}

static enum MHD_Result on_body_complete(srv_http *h, http_req *r) {
    track_set(h, r->track, TRACK_ARRIVED);
    switch (srv_body_finish(r->body)) {
    case SRV_BODY_OK:
        break;
    case SRV_BODY_OVER:
        if (r->coding != SRV_CODING_IDENTITY)
            return reply_error(r, 413, "body_too_large",
                               "the %s request body decoded to more than the limit of %zu bytes "
                               "(--max-body-bytes)",
                               srv_coding_name(r->coding), h->cfg->max_body_bytes);
        return reply_error(r, 413, "body_too_large",
                           "the request body is over the limit of %zu bytes (--max-body-bytes)",
                           h->cfg->max_body_bytes);
    case SRV_BODY_BAD:
        return reply_error(r, 400, "invalid_encoding", "%s (Content-Encoding: %s)",
                           srv_body_error(r->body), srv_coding_name(r->coding));
    case SRV_BODY_OOM:
        return reply_error(r, 503, "out_of_memory",
                           "no memory to hold the request body now; retry later");
    }
    if (atomic_load(&h->draining))
        return reply_unavailable(r);
    if (unsent_full(h))
        return reply_budget_full(h, r);
    api_op op = r->route == SRV_ROUTE_SDPA ? API_OP_SDPA : API_OP_ATTENTION;
    size_t len;
    const char *text = srv_body_data(r->body, &len);
    double t0 = srv_now();
    api_error e = {0};
    api_job *job = r->route == SRV_ROUTE_V2_INFER
                       ? api_v2_parse(text, len, r->v2_header_len, r->model, r->version, h->models,
                                      &h->limits, &e)
                       : api_job_parse(op, text, len, h->models, &h->limits, &e);
    r->parse_ms = (srv_now() - t0) * 1e3;
    op = api_job_op(job);
    r->binary_bytes = api_job_binary_bytes(job);
    srv_body_destroy(r->body);
    r->body = NULL;
    if (!job) {
        if (!e.status)
            api_fail(&e, 500, "internal", NULL, "the job could not be parsed");
        return reply_api_error(r, &e);
    }
    /* The reply's room in the budget, before the job is queued and computed. */
    size_t reply_max = api_job_response_bytes(job), max = h->cfg->max_unsent_bytes;
    reply_max = reply_max > SIZE_MAX - API_RESPOND_SLACK ? SIZE_MAX : reply_max + API_RESPOND_SLACK;
    if (reply_max > max) {
        api_job_destroy(job);
        return reply_error(r, 413, "job_too_large",
                           "the reply can take up to %zu bytes, over the budget for unsent "
                           "replies of %zu bytes (--max-unsent-bytes); ask for less "
                           "(need_weights, \"encoding\": \"base64\")",
                           reply_max, max);
    }
    if (!unsent_reserve(h, r, reply_max)) {
        api_job_destroy(job);
        atomic_store(&h->unsent_refused, true); /* reserved and held replies exist: they go */
        srv_metrics_reject(h->metrics, SRV_REJECT_REPLY_BUDGET);
        return reply_error(r, 503, "reply_budget",
                           "the reply can take up to %zu bytes, and the replies reserved or "
                           "waiting for their clients fill the budget of %zu bytes "
                           "(--max-unsent-bytes); retry shortly",
                           reply_max, max);
    }

    r->sj.job = job;
    r->sj.op = op;
    r->sj.deadline = r->t_start + h->cfg->request_timeout;
    r->sj.done = on_job_done;
    atomic_fetch_add(&r->refs, 1);
    pthread_mutex_lock(&r->mu);
    int rc = srv_workers_submit(h->workers, &r->sj);
    if (rc == SRV_OK) {
        MHD_suspend_connection(r->conn);
        r->state = REQ_QUEUED;
    }
    pthread_mutex_unlock(&r->mu);
    if (rc == SRV_OK)
        return MHD_YES;

    /* Not taken: undo, and say why. */
    atomic_fetch_sub(&r->refs, 1);
    api_job_destroy(job);
    r->sj.job = NULL;
    unsent_release(h, r, r->unsent);
    if (rc == SRV_QUEUE_FULL) {
        srv_metrics_reject(h->metrics, SRV_REJECT_QUEUE_FULL);
        return reply_error(r, 503, "queue_full",
                           "all %zu places of the job queue are taken (--max-queue); retry "
                           "shortly",
                           h->cfg->max_queue);
    }
    return reply_unavailable(r);
}

static enum MHD_Result on_job_result(http_req *r) {
    srv_job *sj = &r->sj;
    if (sj->status != 200 && v2_path(r->path)) { /* the error in the protocol's form */
        api_buf_free(&sj->body);
        return reply_api_error(r, &sj->error);
    }
    if (sj->status != 200)
        snprintf(r->code, sizeof r->code, "%s", sj->code);
    return reply_buf(r, sj->status,
                     r->binary_bytes ? "application/octet-stream" : "application/json", &sj->body);
}

static enum MHD_Result on_static(http_req *r) {
    const srv_static_file *f = srv_static_find(r->path);
    if (!f && r->route == SRV_ROUTE_OPENAPI)
        return reply_error(r, 404, "not_found",
                           "this build has no OpenAPI description (api/openapi.yaml was missing "
                           "when attnd was built)");
    if (!f)
        return reply_error(r, 404, "not_found", "there is no file %.200s", r->path);
    r->page = true;
    return reply(r, 200, srv_static_mime(f->path), (void *)f->data, (size_t)(f->end - f->data),
                 MHD_RESPMEM_PERSISTENT);
}

/* The Open Inference Protocol's routes other than infer: metadata and readiness. */
static enum MHD_Result on_v2(srv_http *h, http_req *r, bool ready, bool serving) {
    api_buf b = {0};
    api_error e = {0};
    int rc = 0;
    switch (r->route) {
    case SRV_ROUTE_V2_SERVER:
        api_v2_server_json(SRV_VERSION, &b);
        break;
    case SRV_ROUTE_V2_LIVE: /* as /healthz */
        return reply_json(r, 200, "{\"live\":true}");
    case SRV_ROUTE_V2_READY: /* as /readyz */
        return serving ? reply_json(r, 200, "{\"ready\":true}") : reply_unavailable(r);
    case SRV_ROUTE_V2_MODEL:
        if (!ready)
            return reply_unavailable(r);
        rc = api_v2_model_json(h->models, r->model, r->version, &b, &e);
        break;
    case SRV_ROUTE_V2_MODEL_READY: /* ready while the server takes jobs */
        if (!serving)
            return reply_unavailable(r);
        rc = api_v2_model_ready_json(h->models, r->model, r->version, &b, &e);
        break;
    case SRV_ROUTE_V2_INDEX:
        if (!ready)
            return reply_unavailable(r);
        api_v2_index_json(h->models, &b);
        break;
    default:
        break;
    }
    if (rc != 0) {
        api_buf_free(&b);
        return reply_api_error(r, &e);
    }
    return reply_buf(r, 200, "application/json", &b);
}

static enum MHD_Result on_new(srv_http *h, http_req *r) {
    if (r->is_options)
        return on_options(h, r);
    bool had_token;
    if (!is_open(r->route) && !authorized(h, r, &had_token)) {
        r->www_auth = true;
        r->bad_token = had_token;
        return reply_error(r, 401, "unauthorized",
                           had_token ? "the API key is wrong"
                                     : "this server needs an API key: send Authorization: "
                                       "Bearer <key>");
    }
    if (r->route == SRV_ROUTE_UNKNOWN)
        return reply_error(r, 404, "not_found", "there is no route %.200s; see /openapi.yaml",
                           r->path);
    bool post = takes_post(r->route);
    if ((post && !r->is_post) || (!post && !r->is_get)) {
        r->allow = post ? ALLOW_JOB : ALLOW_GET;
        return reply_error(r, 405, "method_not_allowed", "%s takes %s, not %s", r->path,
                           post ? "POST" : "GET", r->method);
    }
    bool ready = atomic_load_explicit(&h->ready, memory_order_acquire);
    bool serving = ready && !atomic_load(&h->draining);
    switch (r->route) {
    case SRV_ROUTE_ATTENTION:
    case SRV_ROUTE_SDPA:
    case SRV_ROUTE_V2_INFER:
        return on_job_headers(h, r);
    case SRV_ROUTE_V2_SERVER:
    case SRV_ROUTE_V2_LIVE:
    case SRV_ROUTE_V2_READY:
    case SRV_ROUTE_V2_MODEL:
    case SRV_ROUTE_V2_MODEL_READY:
    case SRV_ROUTE_V2_INDEX:
        return on_v2(h, r, ready, serving);
    case SRV_ROUTE_HEALTHZ:
        return reply_json(r, 200, "{\"status\": \"ok\"}");
    case SRV_ROUTE_READYZ:
        if (ready && !atomic_load(&h->draining))
            return reply_json(r, 200, "{\"status\": \"ready\"}");
        return reply_unavailable(r);
    case SRV_ROUTE_MODELS: {
        if (!ready)
            return reply_unavailable(r);
        api_buf b = {0};
        if (r->path[10] == '/') { /* /v1/models/{name} */
            api_error e = {0};
            if (api_registry_model_json(h->models, r->path + 11, &b, &e) != 0) {
                api_buf_free(&b);
                return reply_api_error(r, &e);
            }
            return reply_buf(r, 200, "application/json", &b);
        }
        api_registry_list_json(h->models, &b);
        return reply_buf(r, 200, "application/json", &b);
    }
    case SRV_ROUTE_METRICS: {
        api_buf b = {0};
        srv_gauges g = gauges(h);
        srv_metrics_render(h->metrics, &g, &b);
        return reply_buf(r, 200, "text/plain; version=0.0.4; charset=utf-8", &b);
    }
    case SRV_ROUTE_OPENAPI:
    case SRV_ROUTE_STATIC:
        return on_static(r);
    case SRV_ROUTE_UNKNOWN:
    case SRV_ROUTE_COUNT:
        break;
    }
    return reply_error(r, 404, "not_found", "there is no route %.200s", r->path);
}

/* ---- Framing (RFC 9112 section 6.3) ------------------------------------------------------ */

/* The header lines that decide where a request's body ends, and its Host, as counted. */
typedef struct framing {
    int host, cl, te; /* how many Host, Content-Length and Transfer-Encoding lines */
    const char *cl1;  /* the first Content-Length (the one libmicrohttpd goes by) */
    bool cl_differ;   /* another Content-Length says something else */
    const char *te1;  /* the first Transfer-Encoding */
} framing;

static enum MHD_Result framing_count(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value) {
    (void)kind;
    framing *f = cls;
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
 * a proxy in front could frame differently (two Content-Lengths, Content-Length with
 * Transfer-Encoding) gets 400, a transfer coding other than chunked 501, an HTTP/1.1 request
 * without exactly one Host 400; each reply closes the connection. Returns true and *rc when it
 * replied. (A Content-Length libmicrohttpd cannot read never gets here: it answers that itself.) */
static bool framing_refused(http_req *r, const char *version, enum MHD_Result *rc) {
    framing f = {0};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, framing_count, &f);
    r->close = true;
    if (f.cl > 0 && f.te > 0) {
        *rc = reply_error(r, 400, "invalid_request",
                          "the request has both Content-Length and Transfer-Encoding; send one");
    } else if (f.cl_differ) {
        *rc = reply_error(r, 400, "invalid_request",
                          "the request has Content-Length headers that differ (%.30s, ...); send "
                          "one",
                          f.cl1);
    } else if (f.te > 1 || (f.te == 1 && strcasecmp(f.te1, "chunked") != 0)) {
        *rc = reply_error(r, 501, "not_implemented",
                          "the Transfer-Encoding %.60s%s is not supported: send the body with "
                          "Content-Length, or chunked alone",
                          f.te1, f.te > 1 ? ", ..." : "");
    } else if (!strcmp(version, MHD_HTTP_VERSION_1_1) && f.host != 1) {
        *rc = reply_error(r, 400, "invalid_request",
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
        atomic_fetch_add(&h->outstanding, 1);  /* until on_completed */
        track_set(h, r->track, TRACK_READING); /* begun, if the reaper has not seen it yet */
        enum MHD_Result rc;
        if (framing_refused(r, version, &rc))
            return rc;
        /* A request with a body is judged now, before its body is read (a reply now closes the
         * connection after it). One without waits for the next call: a reply queued then keeps
         * the connection alive. */
        return has_body(conn) ? on_new(h, r) : MHD_YES;
    }
    switch (r->state) {
    case REQ_NEW:
        return on_new(h, r);
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
            if (track_late(h, r->track)) {
                r->late = true;
                return MHD_NO;
            }
            return MHD_YES;
        }
        return on_body_complete(h, r);
    case REQ_QUEUED:
        return on_job_result(r);
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
    if (r->track) {
        pthread_mutex_lock(&h->conns_mu);
        if (r->track->cut || r->late)
            end = "read_timeout";
        pthread_mutex_unlock(&h->conns_mu);
    }
    if (end)
        kv[n++] = SRV_STR("end", end);
    srv_log_write(h->log, "info", "access", kv, n);
    /* The log keeps the status attnd meant to send (end= says it was not); the metrics count
     * only replies that went out whole. */
    bool sent = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK;
    srv_metrics_request(h->metrics, r->route, sent ? r->status : 0, r->bytes_in,
                        sent ? r->bytes_out : 0);
    unsent_release(h, r, r->unsent); /* libmicrohttpd frees the body next: room for a reply */
    atomic_fetch_sub(&h->outstanding, 1);
    track_set(h, r->track, TRACK_IDLE); /* the connection now waits for its next request */
    req_unref(r);
}

/* libmicrohttpd 0.9.75 answers a Content-Length it cannot read (not a number, or past 2^64)
 * itself, before attnd sees the request, and writes its status line and headers twice (it
 * builds the reply's head when it refuses the request, and again when it sends the reply). It
 * logs the refusal first, on the thread that serves the connection; from here attnd sends its
 * own single reply (JSON) and shuts the socket's sending side, so libmicrohttpd's reply goes
 * nowhere. The connection is the one on this thread whose request line has come and whose
 * headers are not handed over: when there are several, they cannot be told apart, and
 * libmicrohttpd's reply goes out as it is. */
static void answer_bad_length(srv_http *h, bool too_large) {
    int fd = -1;
    pthread_mutex_lock(&h->conns_mu);
    for (conn_track *c = h->conns; c; c = c->next) {
        if (!c->head || !pthread_equal(c->thread, pthread_self()))
            continue;
        if (fd != -1) { /* a second candidate */
            fd = -2;
            break;
        }
        fd = c->fd;
        c->head = false;
    }
    pthread_mutex_unlock(&h->conns_mu);
    if (fd < 0)
        return;
    api_error e = {0};
    if (too_large)
        api_fail(&e, 413, "body_too_large", NULL,
                 "the Content-Length is beyond 2^64 bytes, over the limit of %zu bytes "
                 "(--max-body-bytes)",
                 h->cfg->max_body_bytes);
    else
        api_fail(&e, 400, "invalid_request", NULL,
                 "the Content-Length is not a number of bytes; send digits only, once");
    api_buf body = {0};
    api_error_body(&e, &body);
    char id[ID_MAX + 1], head[512];
    uint64_t k = atomic_fetch_add_explicit(&h->next_id, 1, memory_order_relaxed);
    snprintf(id, sizeof id, "%016llx", (unsigned long long)mix64(h->id_salt ^ k));
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nConnection: close\r\nX-Request-Id: %s\r\n"
                     "Content-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n"
                     "Referrer-Policy: no-referrer\r\nCache-Control: no-store\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     e.status, too_large ? "Content Too Large" : "Bad Request", id, body.len);
    if (n > 0 && (size_t)n < sizeof head && !body.failed) {
        struct iovec iov[2] = {{head, (size_t)n}, {body.data, body.len}};
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
        sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    shutdown(fd, SHUT_WR); /* a partial reply, if any, ends here too */
    srv_kv kv[] = {SRV_INT("status", e.status), SRV_STR("code", e.code), SRV_STR("id", id)};
    srv_log_write(h->log, "warn", "bad_content_length", kv, 3);
    srv_metrics_request(h->metrics, SRV_ROUTE_UNKNOWN, (unsigned)e.status, 0, body.len);
    api_buf_free(&body);
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
    if (!strncmp(msg, "Failed to parse `Content-Length' header", 39))
        answer_bad_length(h, false);
    else if (!strncmp(msg, "Too large value of 'Content-Length' header", 42))
        answer_bad_length(h, true);
}

/* ---- Life cycle --------------------------------------------------------------------------- */

int srv_listen(const srv_config *cfg, char *bound, size_t bound_len, srv_error *err) {
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[8];
    snprintf(port, sizeof port, "%u", (unsigned)cfg->port);
    int rc = getaddrinfo(cfg->host, port, &hints, &res);
    if (rc != 0)
        return srv_fail(err, "--listen: cannot resolve the host '%s': %s", cfg->host,
                        gai_strerror(rc));
    int fd = -1, last = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            last = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
            last = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        return srv_fail(err, "--listen: cannot listen on %s:%u: %s", cfg->host, (unsigned)cfg->port,
                        strerror(last));
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned p = cfg->port;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
            p = ntohs(a->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
            p = ntohs(a->sin6_port);
        }
    }
    snprintf(bound, bound_len, ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host, p);
    return fd;
}

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
    atomic_init(&h->outstanding, 0);
    atomic_init(&h->unsent, 0);
    atomic_init(&h->unsent_refused, false);
    atomic_init(&h->next_id, 1);
    struct timeval tv;
    gettimeofday(&tv, NULL);
    h->start_wall = (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
    if (getrandom(&h->id_salt, sizeof h->id_salt, GRND_NONBLOCK) != sizeof h->id_salt)
        h->id_salt = mix64((uint64_t)tv.tv_usec ^ ((uint64_t)getpid() << 32));
    pthread_mutex_init(&h->conns_mu, NULL);
    srv_cond_init(&h->reaper_cv);

    /* poll(2), not epoll: with epoll, libmicrohttpd 0.9.75 misses a client's FIN that arrives
     * together with its last bytes (a client that sends and closes at once) and holds the
     * connection until the idle timeout; tests/reliability checks it is closed at once. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG;
    h->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_access, h, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)listen_fd, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)cfg->http_threads, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->idle_timeout, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, h, MHD_OPTION_URI_LOG_CALLBACK, on_request_line, h,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MHD_MEMORY, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)cfg->max_connections, MHD_OPTION_END);
    if (!h->daemon) {
        close(listen_fd);
        pthread_cond_destroy(&h->reaper_cv);
        pthread_mutex_destroy(&h->conns_mu);
        free(h);
        srv_fail(err, "libmicrohttpd failed to start (see the lines above)");
        return NULL;
    }
    if (cfg->read_timeout > 0) {
        int rc = pthread_create(&h->reaper, NULL, reaper_main, h);
        if (rc != 0) {
            srv_http_stop(h);
            srv_fail(err, "cannot start the read-timeout thread: %s", strerror(rc));
            return NULL;
        }
        h->has_reaper = true;
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
    if (h->has_reaper) {
        pthread_mutex_lock(&h->conns_mu);
        h->reaper_stop = true;
        pthread_cond_signal(&h->reaper_cv);
        pthread_mutex_unlock(&h->conns_mu);
        pthread_join(h->reaper, NULL);
    }
    MHD_stop_daemon(h->daemon); /* reports every connection closed: frees their records */
    pthread_cond_destroy(&h->reaper_cv);
    pthread_mutex_destroy(&h->conns_mu);
    free(h);
}
