/* reply.c - a request's reply: the headers every reply carries (security, CORS, Retry-After,
 * Connection), error bodies in v1's form or the Open Inference Protocol's, and the budget of
 * job replies not yet sent (--max-unsent-bytes). */
#include <microhttpd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_internal.h"

#define CORS_HEADERS                                                                               \
    "Authorization, Content-Type, Content-Encoding, X-Request-Id, Inference-Header-Content-Length"
#define CORS_EXPOSE                                                                                \
    "X-Request-Id, Retry-After, WWW-Authenticate, Inference-Header-Content-Length, Location"
#define PAGE_CSP                                                                                   \
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "              \
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "             \
    "form-action 'self'"

bool http_v2_path(const char *path) {
    return !strncmp(path, "/v2", 3) && (path[3] == '\0' || path[3] == '/');
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
        MHD_add_response_header(resp, "Cache-Control",
                                r->cache_control ? r->cache_control : "no-cache");
        if (r->etag)
            MHD_add_response_header(resp, "ETag", r->etag);
    } else {
        MHD_add_response_header(resp, "Cache-Control", "no-store");
    }
    if (r->allow)
        MHD_add_response_header(resp, "Allow", r->allow);
    if (r->location[0])
        MHD_add_response_header(resp, "Location", r->location);
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
    bool going = atomic_load(&h->draining) || atomic_load(&h->leaving);
    if (status == 503)
        MHD_add_response_header(resp, "Retry-After", going ? "5" : "1");
    if (r->close || going)
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
    srv_conn_sending(h->conns, r->track, len);
    enum MHD_Result rc = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
    if (rc != MHD_YES) { /* not sent: the log and metrics must not say it was */
        r->status = 0;
        r->bytes_out = 0;
    }
    return rc;
}

enum MHD_Result http_reply(http_req *r, unsigned status, const char *type, void *body, size_t len,
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
 * connection, and are not counted. A refusal leaves no trace: the next job whose reply fits is
 * admitted, however large the refused one was. No reply holds its room for ever: one taken
 * slower than --min-send-rate is cut (conn.c), and its room comes back. */

bool http_unsent_reserve(srv_http *h, http_req *r, size_t n) {
    size_t cur = atomic_load(&h->unsent), max = h->cfg->max_unsent_bytes;
    do {
        if (cur > max || n > max - cur)
            return false;
    } while (!atomic_compare_exchange_weak(&h->unsent, &cur, cur + n));
    r->unsent += n;
    return true;
}

void http_unsent_release(srv_http *h, http_req *r, size_t n) {
    if (n > r->unsent)
        n = r->unsent;
    if (n == 0)
        return;
    r->unsent -= n;
    atomic_fetch_sub(&h->unsent, n);
}

bool http_unsent_full(const srv_http *h) {
    return atomic_load(&h->unsent) >= h->cfg->max_unsent_bytes;
}

enum MHD_Result http_reply_buf(http_req *r, unsigned status, const char *type, api_buf *b) {
    if (b->failed) {
        api_buf_free(b);
        static const char oom[] = "{\"error\": {\"code\": \"out_of_memory\", \"message\": \"out of "
                                  "memory writing the reply\", \"field\": null}}";
        static const char oom_v2[] = "{\"error\": \"out of memory writing the reply\"}";
        bool v2 = http_v2_path(r->path);
        snprintf(r->code, sizeof r->code, "out_of_memory");
        r->binary_bytes = 0;
        r->content_encoding = NULL;
        return http_reply(r, 500, "application/json", (void *)(v2 ? oom_v2 : oom),
                          v2 ? sizeof oom_v2 - 1 : sizeof oom - 1, MHD_RESPMEM_PERSISTENT);
    }
    void *data = b->data;
    size_t len = b->len;
    bool block = b->block;
    *b = (api_buf){0};
    if (!data)
        return http_reply(r, status, type, (void *)"", 0, MHD_RESPMEM_PERSISTENT);
    api_mem *mem =
        atomic_load_explicit(&r->h->ready, memory_order_acquire) ? r->h->limits.mem : NULL;
    if (!block && len > SRV_SMALL_REPLY && mem) {
        /* A large reply other than a job's (a model listing): held in the job memory budget
         * while its client reads it, like a body (job replies are in --max-unsent-bytes). */
        bool over = false;
        char *d = api_mem_alloc_bounded(mem, len, len, NULL, &over);
        if (d)
            memcpy(d, data, len);
        free(data);
        if (!d && over) {
            srv_metrics_reject(r->h->metrics, SRV_REJECT_MEMORY_BUDGET);
            return http_reply_error(r, 503, "memory_budget",
                                    "the memory attnd may hold for requests (--max-memory) is "
                                    "taken; retry shortly");
        }
        if (!d)
            return http_reply_error(r, 503, "out_of_memory", "no memory for the reply now");
        data = d;
        block = true;
    }
    if (!block)
        return http_reply(r, status, type, data, len, MHD_RESPMEM_MUST_FREE);
    /* A block of the job memory cache: libmicrohttpd gives it back once the reply is sent. */
    struct MHD_Response *resp =
        MHD_create_response_from_buffer_with_free_callback_cls(len, data, api_mem_free, data);
    if (!resp) {
        api_mem_free(data);
        return MHD_NO;
    }
    return reply_resp(r, status, type, resp, len);
}

enum MHD_Result http_reply_shared(http_req *r, unsigned status, const char *type, const void *data,
                                  size_t len, MHD_ContentReaderFreeCallback release, void *cls) {
    /* libmicrohttpd only reads the buffer of a response made from one */
    struct MHD_Response *resp =
        MHD_create_response_from_buffer_with_free_callback_cls(len, (void *)data, release, cls);
    if (!resp) {
        release(cls);
        return MHD_NO;
    }
    return reply_resp(r, status, type, resp, len);
}

enum MHD_Result http_reply_api_error(http_req *r, const api_error *e) {
    api_buf b = {0};
    if (http_v2_path(r->path))
        api_v2_error_body(e, &b);
    else
        api_error_body(e, &b);
    snprintf(r->code, sizeof r->code, "%s", e->code);
    return http_reply_buf(r, e->status ? (unsigned)e->status : 500, "application/json", &b);
}

enum MHD_Result http_reply_error(http_req *r, unsigned status, const char *code, const char *fmt,
                                 ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    api_error e = {0};
    api_fail(&e, (int)status, code, NULL, "%s", msg);
    return http_reply_api_error(r, &e);
}

enum MHD_Result http_reply_json(http_req *r, unsigned status, const char *literal) {
    return http_reply(r, status, "application/json", (void *)literal, strlen(literal),
                      MHD_RESPMEM_PERSISTENT);
}

enum MHD_Result http_reply_unavailable(http_req *r) {
    if (atomic_load(&r->h->draining) || atomic_load(&r->h->leaving)) {
        if (srv_routes[r->route].job)
            srv_metrics_reject(r->h->metrics, SRV_REJECT_DRAINING);
        return http_reply_error(r, 503, "draining",
                                "attnd is shutting down and takes no new jobs; retry on another "
                                "instance");
    }
    return http_reply_error(r, 503, "not_ready",
                            "attnd is starting and not ready yet; retry shortly");
}

enum MHD_Result http_reply_budget_full(srv_http *h, http_req *r) {
    srv_metrics_reject(h->metrics, SRV_REJECT_REPLY_BUDGET);
    return http_reply_error(r, 503, "reply_budget",
                            "replies reserved or waiting for their clients to read them fill the "
                            "budget of %zu bytes (--max-unsent-bytes); retry shortly",
                            h->cfg->max_unsent_bytes);
}
