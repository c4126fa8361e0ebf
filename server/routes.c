/* routes.c - what a request gets from its headers alone: its route, the method and the API key
 * checked, CORS preflights, a job route's early refusals (media type, coding, Content-Length,
 * the queue and the reply budget) before its body is read, and the replies of the GET routes
 * (probes, models, metrics, static files, the Open Inference Protocol's metadata). */
#include <errno.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_internal.h"

#define BODY_FIRST_CAP ((size_t)64 << 10) /* most of a body reserved before it arrives */
#define ALLOW_JOB      "POST, OPTIONS"
#define ALLOW_GET      "GET, HEAD, OPTIONS"
#define ALLOW_SESSION  "GET, HEAD, POST, DELETE, OPTIONS"
#define SESSIONS       "/v1/sessions/"

/* Constant-time in the key: the time depends only on the key's length and the token's. */
static bool key_equal(const char *token, size_t tlen, const char *key, size_t klen) {
    volatile unsigned char d = tlen != klen;
    for (size_t i = 0; i < klen; i++)
        d |= (unsigned char)(key[i] ^ (i < tlen ? token[i] : 0));
    return d == 0;
}

/* True when no key is configured, or Authorization: Bearer carries one of the keys; r->key is
 * then its index (a session belongs to the key that opened it), 0 without keys. *had_token
 * tells whether a Bearer token was given at all. Every key is compared whole, whichever
 * matches, and the match chosen by a mask: the time depends only on the keys' lengths and the
 * token's. */
static bool authorized(const srv_http *h, http_req *r, bool *had_token) {
    *had_token = false;
    r->key = 0;
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
    const char *k = h->cfg->api_key, *end = k + h->cfg->api_key_len;
    uint32_t index = 0, found = 0;
    bool any = false;
    for (;; index++) {
        const char *nl = memchr(k, '\n', (size_t)(end - k));
        size_t kl = nl ? (size_t)(nl - k) : (size_t)(end - k);
        bool eq = key_equal(a, n, k, kl);
        found |= (0u - (uint32_t)eq) & index;
        any |= eq;
        if (!nl)
            break;
        k = nl + 1;
    }
    r->key = found;
    return any;
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

/* /v2/models/{name}[/versions/{version}][/ready | /infer | /config | /stats]: the route, and
 * the name and version as new strings (*version NULL when the path gives none);
 * SRV_ROUTE_UNKNOWN for an empty name. /v2/models/stats is the statistics of every model (name
 * NULL), as Triton has it. False when out of memory. */
static bool v2_model_route(const char *url, srv_route *route, char **name, char **version) {
    const char *p = url + sizeof V2_MODELS - 1;
    size_t n = strlen(p), vn = 0;
    static const struct {
        const char *suffix;
        srv_route route;
    } suffixes[] = {{"/infer", SRV_ROUTE_V2_INFER},
                    {"/ready", SRV_ROUTE_V2_MODEL_READY},
                    {"/config", SRV_ROUTE_V2_CONFIG},
                    {"/stats", SRV_ROUTE_V2_STATS}};
    if (!strcmp(p, "stats")) {
        *route = SRV_ROUTE_V2_STATS;
        return true;
    }
    *route = SRV_ROUTE_V2_MODEL;
    for (size_t i = 0; i < 4 && *route == SRV_ROUTE_V2_MODEL; i++) {
        size_t sl = strlen(suffixes[i].suffix);
        if (n > sl && !strcmp(p + n - sl, suffixes[i].suffix)) {
            n -= sl;
            *route = suffixes[i].route;
        }
    }
    const char *v = NULL;
    /* the last "/versions/" that ends within the name's n bytes ("demo/versions/infer" has
     * none: its "/versions/" reaches into the "/infer" taken off) */
    for (const char *q = p; (q = strstr(q, "/versions/")) != NULL && q + 10 <= p + n; q++)
        v = q;
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

const srv_route_info srv_routes[SRV_ROUTE_COUNT] = {
    [SRV_ROUTE_ATTENTION] = {.name = "/v1/attention", .exact = true, .post = true, .job = true},
    [SRV_ROUTE_SDPA] = {.name = "/v1/sdpa", .exact = true, .post = true, .job = true},
    [SRV_ROUTE_MODELS] = {.name = "/v1/models", .exact = true}, /* and /v1/models/{name} */
    [SRV_ROUTE_HEALTHZ] = {.name = "/healthz", .exact = true, .open = true},
    [SRV_ROUTE_READYZ] = {.name = "/readyz", .exact = true, .open = true},
    [SRV_ROUTE_METRICS] = {.name = "/metrics", .exact = true},
    [SRV_ROUTE_OPENAPI] = {.name = "/openapi.yaml", .exact = true},
    [SRV_ROUTE_V2_SERVER] = {.name = "/v2", .exact = true}, /* and /v2/ */
    [SRV_ROUTE_V2_LIVE] = {.name = "/v2/health/live", .exact = true, .open = true},
    [SRV_ROUTE_V2_READY] = {.name = "/v2/health/ready", .exact = true, .open = true},
    [SRV_ROUTE_V2_MODEL] = {.name = "/v2/models/{name}"},
    [SRV_ROUTE_V2_MODEL_READY] = {.name = "/v2/models/{name}/ready"},
    [SRV_ROUTE_V2_INFER] = {.name = "/v2/models/{name}/infer", .post = true, .job = true},
    [SRV_ROUTE_V2_CONFIG] = {.name = "/v2/models/{name}/config"},
    [SRV_ROUTE_V2_STATS] = {.name = "/v2/models/{name}/stats"}, /* and /v2/models/stats */
    [SRV_ROUTE_V2_INDEX] = {.name = "/v2/repository/index", .exact = true, .post = true},
    [SRV_ROUTE_SESSIONS] = {.name = "/v1/sessions", .exact = true, .post = true, .job = true},
    [SRV_ROUTE_SESSION] =
        {.name = "/v1/sessions/{id}", .post = true, .get = true, .del = true, .job = true},
    [SRV_ROUTE_STATIC] = {.name = "static"},
    [SRV_ROUTE_UNKNOWN] = {.name = "unknown"},
};

bool http_route_of(const char *url, http_req *r) {
    for (size_t i = 0; i < SRV_ROUTE_COUNT; i++)
        if (srv_routes[i].exact && !strcmp(url, srv_routes[i].name)) {
            r->route = (srv_route)i;
            return true;
        }
    if (!strcmp(url, "/v2/")) {
        r->route = SRV_ROUTE_V2_SERVER;
        return true;
    }
    if (!strncmp(url, "/v1/models/", 11)) { /* GET /v1/models/{name} */
        r->route = SRV_ROUTE_MODELS;
        return true;
    }
    if (!strncmp(url, SESSIONS, sizeof SESSIONS - 1)) { /* the id: what follows, whatever it is */
        r->route = SRV_ROUTE_SESSION;
        r->session_id = r->path + sizeof SESSIONS - 1;
        return true;
    }
    if (!strncmp(url, V2_MODELS, sizeof V2_MODELS - 1))
        return v2_model_route(url, &r->route, &r->model, &r->version);
    r->route = srv_static_find(url) ? SRV_ROUTE_STATIC : SRV_ROUTE_UNKNOWN;
    return true;
}

/* ---- Routes ------------------------------------------------------------------------------- */

static srv_gauges gauges(const srv_http *h) {
    srv_gauges g = {0};
    bool ready = atomic_load_explicit(&h->ready, memory_order_acquire);
    if (ready)
        srv_workers_stats(h->workers, &g.queue_depth, &g.jobs_in_flight);
    g.queue_capacity = h->cfg->max_queue;
    g.conns = srv_conns_stats(h->conns);
    g.unsent_bytes = atomic_load(&h->unsent);
    g.unsent_budget = h->cfg->max_unsent_bytes;
    if (ready)
        g.mem = api_mem_stats_get(h->limits.mem);
    g.sessions = api_sessions_stats_get(h->sessions);
    g.workers = h->cfg->threads;
    g.pool_threads = h->cfg->pool_threads;
    g.draining = atomic_load(&h->draining) || atomic_load(&h->leaving);
    g.ready = ready && !g.draining;
    g.start_time = h->start_wall;
    return g;
}

/* libmicrohttpd's free callback of a /metrics reply: its reference goes back. */
static void exposition_release(void *cls) {
    srv_exposition_release(cls);
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

/* The methods a route takes, as Allow lists them. */
static const char *allow_of(const srv_route_info *ri) {
    return ri->post && ri->del ? ALLOW_SESSION : ri->post ? ALLOW_JOB : ALLOW_GET;
}

/* OPTIONS: a CORS preflight (Origin and Access-Control-Request-Method given), or a plain one
 * that lists the route's methods. Needs no API key: browsers send none with a preflight. */
static enum MHD_Result on_options(srv_http *h, http_req *r) {
    if (r->route == SRV_ROUTE_UNKNOWN)
        return http_reply_error(r, 404, "not_found", "there is no route %.200s; see /openapi.yaml",
                                r->path);
    const char *allow = allow_of(&srv_routes[r->route]);
    const char *origin = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin");
    const char *want =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Access-Control-Request-Method");
    if (!origin || !want) { /* not a CORS preflight */
        r->allow = allow;
        return http_reply(r, 204, NULL, (void *)"", 0, MHD_RESPMEM_PERSISTENT);
    }
    if (!srv_config_origin_allowed(h->cfg, origin, strlen(origin)))
        return http_reply_error(r, 403, "cors_rejected",
                                "the origin %.100s is not allowed (--cors-origins)", origin);
    if (!method_listed(allow, want))
        return http_reply_error(r, 403, "cors_rejected",
                                "%s does not take the method %.20s (only %s)", r->path, want,
                                allow);
    r->preflight = allow; /* http_reply() adds the CORS headers: the origin is allowed */
    return http_reply(r, 204, NULL, (void *)"", 0, MHD_RESPMEM_PERSISTENT);
}

/* The headers of an infer request of the Open Inference Protocol: the model and version of
 * the path, the length of the JSON part (Inference-Header-Content-Length: the binary form) and
 * the coding the reply may take. Any Content-Type is taken, as Triton takes it: the body is JSON
 * unless Inference-Header-Content-Length says where its JSON ends (clients send none, a generic
 * type such as text/plain or application/x-www-form-urlencoded, JSON or octets). Replies and
 * returns true when they are refused. */
static bool v2_infer_refused(srv_http *h, http_req *r, enum MHD_Result *rc) {
    api_error e = {0};
    if (api_v2_model_check(h->models, r->model, r->version, &e) != 0) {
        *rc = http_reply_api_error(r, &e);
        return true;
    }
    r->sj.model = api_registry_index(h->models, r->model); /* counted under it from here on */
    const char *hl =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Inference-Header-Content-Length");
    if (hl) {
        errno = 0;
        char *end;
        unsigned long long v = strtoull(hl, &end, 10);
        if (errno || end == hl || *end || !(*hl >= '0' && *hl <= '9') || v > SIZE_MAX - 1) {
            *rc = http_reply_error(r, 400, "invalid_request",
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
        return http_reply_unavailable(r);
    const char *ct =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    enum MHD_Result refused;
    if (r->route == SRV_ROUTE_V2_INFER) {
        if (v2_infer_refused(h, r, &refused))
            return refused;
    } else if (!is_json(ct)) {
        return http_reply_error(
            r, 415, "unsupported_media_type",
            "send the body as JSON with Content-Type: application/json (got %.60s)",
            ct ? ct : "none");
    }
    const char *ce =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING);
    if (ce && !srv_coding_parse(ce, &r->coding))
        return http_reply_error(
            r, 415, "unsupported_media_type",
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
            return http_reply_error(r, 413, "body_too_large",
                                    "the request body is %llu bytes, over the limit of %zu bytes "
                                    "(--max-body-bytes)",
                                    v, h->cfg->max_body_bytes);
        if (!errno && end != cl && !*end)
            expect = (size_t)v;
    }
    if (http_unsent_full(h))
        return http_reply_budget_full(h, r);
    size_t queued, running;
    srv_workers_stats(h->workers, &queued, &running);
    if (queued >= h->cfg->max_queue) {
        srv_metrics_reject(h->metrics, SRV_REJECT_QUEUE_FULL);
        return http_reply_error(r, 503, "queue_full",
                                "all %zu places of the job queue are taken (--max-queue); retry "
                                "shortly",
                                h->cfg->max_queue);
    }
    /* What Content-Length announces is only reserved up to BODY_FIRST_CAP: a client that
     * announces much and sends little holds little; past it, the body grows by doubling as it
     * comes (body.c). */
    size_t cap = expect && expect < BODY_FIRST_CAP ? expect : BODY_FIRST_CAP;
    if (cap > h->cfg->max_body_bytes)
        cap = h->cfg->max_body_bytes;
    bool over = false;
    r->body = srv_body_create(r->coding, h->cfg->max_body_bytes, cap, expect, h->limits.mem, &over);
    if (!r->body && over) {
        srv_metrics_reject(h->metrics, SRV_REJECT_MEMORY_BUDGET);
        return http_reply_error(r, 503, "memory_budget",
                                "the memory attnd may hold for requests (--max-memory) is taken; "
                                "retry shortly");
    }
    if (!r->body)
        return http_reply_error(r, 503, "out_of_memory",
                                "no memory for a body of %zu bytes now; retry later", cap);
    r->state = REQ_BODY;
    return MHD_YES;
}

static enum MHD_Result on_static(http_req *r) {
    const srv_static_file *f = srv_static_find(r->path);
    if (!f && r->route == SRV_ROUTE_OPENAPI)
        return http_reply_error(
            r, 404, "not_found",
            "this build has no OpenAPI description (api/openapi.yaml was missing "
            "when attnd was built)");
    if (!f)
        return http_reply_error(r, 404, "not_found", "there is no file %.200s", r->path);
    r->page = true;
    r->etag = srv_static_etag(f);
    r->cache_control = srv_static_cache_control(f);
    /* A browser's copy that is still the file: 304, no body (RFC 9110 section 13.1.2). */
    const char *inm = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "If-None-Match");
    if (srv_static_etag_matches(inm, r->etag))
        return http_reply(r, 304, NULL, (void *)"", 0, MHD_RESPMEM_PERSISTENT);
    return http_reply(r, 200, srv_static_mime(f->path), (void *)f->data, (size_t)(f->end - f->data),
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
        return http_reply_json(r, 200, "{\"live\":true}");
    case SRV_ROUTE_V2_READY: /* as /readyz */
        return serving ? http_reply_json(r, 200, "{\"ready\":true}") : http_reply_unavailable(r);
    case SRV_ROUTE_V2_MODEL:
        if (!ready)
            return http_reply_unavailable(r);
        rc = api_v2_model_json(h->models, r->model, r->version, &b, &e);
        break;
    case SRV_ROUTE_V2_MODEL_READY: /* ready while the server takes jobs */
        if (!serving)
            return http_reply_unavailable(r);
        rc = api_v2_model_ready_json(h->models, r->model, r->version, &b, &e);
        break;
    case SRV_ROUTE_V2_INDEX:
        if (!ready)
            return http_reply_unavailable(r);
        api_v2_index_json(h->models, &b);
        break;
    case SRV_ROUTE_V2_CONFIG: {
        if (!ready)
            return http_reply_unavailable(r);
        const srv_config *c = h->cfg;
        api_v2_serving sv = {.instances = c->threads,
                             .batch_window_us = c->batch_window_us,
                             .max_batch_rows = c->max_batch_tokens,
                             .max_queue = c->max_queue,
                             .request_timeout = c->request_timeout};
        rc = api_v2_model_config_json(h->models, r->model, r->version, &sv, &b, &e);
        break;
    }
    case SRV_ROUTE_V2_STATS: {
        if (!ready)
            return http_reply_unavailable(r);
        api_v2_model_stats *st = calloc(api_registry_count(h->models) + 1, sizeof *st);
        if (!st)
            return http_reply_error(r, 503, "out_of_memory", "no memory for the statistics now");
        srv_metrics_v2_stats(h->metrics, st);
        rc = api_v2_stats_json(h->models, r->model, r->version, st, &b, &e);
        free(st);
        break;
    }
    default:
        break;
    }
    if (rc != 0) {
        api_buf_free(&b);
        return http_reply_api_error(r, &e);
    }
    return http_reply_buf(r, 200, "application/json", &b);
}

/* GET (HEAD) and DELETE /v1/sessions/{id}: the session's JSON, or its end (204). Another key's
 * session, an ended one and an unknown id get the same 404 (api_session_get, _delete). */
static enum MHD_Result on_session(srv_http *h, http_req *r, bool ready) {
    if (!ready)
        return http_reply_unavailable(r);
    api_error e = {0};
    if (r->is_delete) {
        if (api_session_delete(h->sessions, r->key, r->session_id, &e) != 0)
            return http_reply_api_error(r, &e);
        return http_reply(r, 204, NULL, (void *)"", 0, MHD_RESPMEM_PERSISTENT);
    }
    api_buf b = {0};
    if (api_session_get(h->sessions, r->key, r->session_id, &b, &e) != 0) {
        api_buf_free(&b);
        return http_reply_api_error(r, &e);
    }
    return http_reply_buf(r, 200, "application/json", &b);
}

enum MHD_Result http_on_new(srv_http *h, http_req *r) {
    if (r->is_options)
        return on_options(h, r);
    bool had_token;
    if (!srv_routes[r->route].open && !authorized(h, r, &had_token)) {
        r->www_auth = true;
        r->bad_token = had_token;
        return http_reply_error(r, 401, "unauthorized",
                                had_token ? "the API key is wrong"
                                          : "this server needs an API key: send Authorization: "
                                            "Bearer <key>");
    }
    if (r->route == SRV_ROUTE_UNKNOWN)
        return http_reply_error(r, 404, "not_found", "there is no route %.200s; see /openapi.yaml",
                                r->path);
    const srv_route_info *ri = &srv_routes[r->route];
    if (!(r->is_post && ri->post) && !(r->is_get && (!ri->post || ri->get)) &&
        !(r->is_delete && ri->del)) {
        r->allow = allow_of(ri);
        return http_reply_error(r, 405, "method_not_allowed", "%s takes %s, not %s", r->path,
                                ri->del    ? "GET, POST and DELETE"
                                : ri->post ? "POST"
                                           : "GET",
                                r->method);
    }
    bool ready = atomic_load_explicit(&h->ready, memory_order_acquire);
    bool serving = ready && !atomic_load(&h->draining) && !atomic_load(&h->leaving);
    switch (r->route) {
    case SRV_ROUTE_ATTENTION:
    case SRV_ROUTE_SDPA:
    case SRV_ROUTE_V2_INFER:
    case SRV_ROUTE_SESSIONS:
        return on_job_headers(h, r);
    case SRV_ROUTE_SESSION:
        return r->is_post ? on_job_headers(h, r) : on_session(h, r, ready);
    case SRV_ROUTE_V2_SERVER:
    case SRV_ROUTE_V2_LIVE:
    case SRV_ROUTE_V2_READY:
    case SRV_ROUTE_V2_MODEL:
    case SRV_ROUTE_V2_MODEL_READY:
    case SRV_ROUTE_V2_INDEX:
    case SRV_ROUTE_V2_CONFIG:
    case SRV_ROUTE_V2_STATS:
        return on_v2(h, r, ready, serving);
    case SRV_ROUTE_HEALTHZ:
        return http_reply_json(r, 200, "{\"status\": \"ok\"}");
    case SRV_ROUTE_READYZ:
        if (serving)
            return http_reply_json(r, 200, "{\"status\": \"ready\"}");
        return http_reply_unavailable(r);
    case SRV_ROUTE_MODELS: {
        if (!ready)
            return http_reply_unavailable(r);
        api_buf b = {0};
        if (r->path[10] == '/') { /* /v1/models/{name} */
            api_error e = {0};
            if (api_registry_model_json(h->models, r->path + 11, &b, &e) != 0) {
                api_buf_free(&b);
                return http_reply_api_error(r, &e);
            }
            return http_reply_buf(r, 200, "application/json", &b);
        }
        api_registry_list_json(h->models, &b);
        return http_reply_buf(r, 200, "application/json", &b);
    }
    case SRV_ROUTE_METRICS: { /* a shared rendering: the reply holds a reference, no copy */
        srv_gauges g = gauges(h);
        srv_exposition *e = srv_metrics_exposition(h->metrics, &g);
        if (!e)
            return http_reply_error(r, 500, "out_of_memory", "out of memory writing the reply");
        size_t len;
        const char *data = srv_exposition_data(e, &len);
        return http_reply_shared(r, 200, "text/plain; version=0.0.4; charset=utf-8", data, len,
                                 exposition_release, e);
    }
    case SRV_ROUTE_OPENAPI:
    case SRV_ROUTE_STATIC:
        return on_static(r);
    case SRV_ROUTE_UNKNOWN:
    case SRV_ROUTE_COUNT:
        break;
    }
    return http_reply_error(r, 404, "not_found", "there is no route %.200s", r->path);
}
