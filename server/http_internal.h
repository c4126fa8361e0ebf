/* http_internal.h - private to the HTTP files of server/ (http.c, http_job.c, reply.c, routes.c):
 * the HTTP daemon's state, a request's state, and the functions these files share. */
#ifndef ATTND_HTTP_INTERNAL_H
#define ATTND_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

#include "server.h"

#define ID_MAX              64 /* longest X-Request-Id kept; longer ones are replaced */
#define HTTP_SHARE_MAX_BODY ((size_t)64 << 10) /* larger job bodies are never shared */
#define HTTP_SHARE_BUCKETS  64

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
    atomic_bool
        leaving; /* --shutdown-delay: /readyz 503, jobs still taken (srv_http_set_leaving) */
    atomic_size_t outstanding; /* requests begun (headers read) and not yet completed */
    atomic_size_t unsent;      /* bytes of job replies reserved or held, not yet sent */
    atomic_uint_fast64_t next_id;
    uint64_t id_salt;
    double start_wall;
    api_sessions *sessions; /* the decode sessions (srv_http_set_sessions), or NULL */
    srv_conns *conns;       /* the connections, as the read timeout sees them */
    srv_tasks *parsers;     /* the parse threads: large and coded bodies */
    /* Jobs in flight that identical requests may share (http_share.c) */
    pthread_mutex_t share_mu;
    struct http_share_entry *share[HTTP_SHARE_BUCKETS];
};

typedef enum req_state { REQ_NEW = 0, REQ_BODY, REQ_QUEUED, REQ_REPLIED } req_state;

typedef struct http_req {
    srv_job sj;    /* the job as the workers see it; sj.owner is this request */
    srv_task task; /* its body's decoding and parsing, on a parse thread */
    srv_http *h;
    struct MHD_Connection *conn;
    pthread_mutex_t mu; /* orders the worker's resume after the handler's suspend */
    atomic_int refs;    /* the connection's, and the worker's while the job is out */
    req_state state;
    srv_route route;
    bool is_get, is_post, is_options, is_delete;
    uint32_t key;           /* the index of the API key it carries (0 without keys) */
    const char *session_id; /* /v1/sessions/{id}: the id, in path */
    char location[64];      /* a 201's Location header, or "" */
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
    const char *etag, *cache_control; /* a static file's validator and Cache-Control */
    srv_conn *track;                  /* the connection's record; NULL when it could not be made */
    bool late;                        /* dropped for --read-timeout while its body arrived */
    /* The Open Inference Protocol (v2) */
    char *model, *version;        /* of a /v2/models/ path (version NULL when it has none) */
    size_t v2_header_len;         /* Inference-Header-Content-Length, or API_V2_NO_HEADER */
    srv_coding reply_coding;      /* the coding the job's reply may take (Accept-Encoding) */
    size_t binary_bytes;          /* raw tensor bytes at the end of the job's reply */
    size_t json_len;              /* a reply with binary_bytes: its JSON part */
    const char *content_encoding; /* of the reply being built, or NULL */
    /* Sharing a job with identical requests (http_share.c) */
    struct http_share_entry *share_lead; /* the entry this request leads, until settled */
    struct http_req *share_next;         /* the next follower of the same leader */
    bool shared;                         /* a follower: its answer is a copy of the leader's */
    bool share_hashed;                   /* share_hash holds the key's hash (http_share.c) */
    uint64_t share_hash;
} http_req;

/* ---- Shared by the HTTP files ------------------------------------------------------------- */

/* Replies (reply.c). Each queues r's reply with the headers every response carries (r->state
 * becomes REQ_REPLIED) and returns libmicrohttpd's answer; r->status and r->bytes_out say what
 * was queued (0 when nothing was). */

/* Queues body (len bytes). mode says who owns it (MUST_FREE: malloc'd, passed to
 * libmicrohttpd, which frees it, as this does when it fails). */
enum MHD_Result http_reply(http_req *r, unsigned status, const char *type, void *body, size_t len,
                           enum MHD_ResponseMemoryMode mode);

/* Replies with the bytes of *b (moved out of it; a block of the job memory cache goes back when
 * sent), or 500 out_of_memory when writing b failed. */
enum MHD_Result http_reply_buf(http_req *r, unsigned status, const char *type, api_buf *b);

/* Queues the len bytes at data, shared with other replies and left unchanged while this one
 * holds them; libmicrohttpd calls release(cls) once it is done with them (at once when the
 * reply cannot be made). */
enum MHD_Result http_reply_shared(http_req *r, unsigned status, const char *type, const void *data,
                                  size_t len, MHD_ContentReaderFreeCallback release, void *cls);

/* An error reply: {"error": {"code", "message", "field"}}, or on the Open Inference Protocol's
 * paths its {"error": "message"}. The code goes to r->code for the access log. */
enum MHD_Result http_reply_api_error(http_req *r, const api_error *e);

/* An error reply with status, code and a printf-style message (cut at 255 bytes). */
enum MHD_Result http_reply_error(http_req *r, unsigned status, const char *code, const char *fmt,
                                 ...) __attribute__((format(printf, 4, 5)));

/* A JSON reply whose body is the static string literal. */
enum MHD_Result http_reply_json(http_req *r, unsigned status, const char *literal);

/* 503 draining or not_ready; counted as a rejected job on the job routes. */
enum MHD_Result http_reply_unavailable(http_req *r);

/* 503 reply_budget: the replies not yet sent fill --max-unsent-bytes. */
enum MHD_Result http_reply_budget_full(srv_http *h, http_req *r);

/* The path is the Open Inference Protocol's (/v2 and below): its errors are {"error": msg}. */
bool http_v2_path(const char *path);

/* The budget of job replies not yet sent (reply.c says how it counts). */

/* Adds n bytes to r's share of the budget if they fit; false (nothing counted) when they do
 * not. */
bool http_unsent_reserve(srv_http *h, http_req *r, size_t n);

/* Gives back n bytes of r's share (at most what it holds): room for other replies, so jobs are
 * admitted again. */
void http_unsent_release(srv_http *h, http_req *r, size_t n);

/* True when the replies not yet sent fill the budget: no job's reply can fit until some room is
 * given back. */
bool http_unsent_full(const srv_http *h);

/* Routes (routes.c). */

/* The route of url (srv_routes); a /v2/models/ path's model name and version go to r. False when
 * out of memory. */
bool http_route_of(const char *url, http_req *r);

/* A request's first handling, from its headers alone (REQ_NEW): a CORS preflight, auth, the
 * method, then the route's reply, or for a job route its early refusals and, when none applies,
 * its body's buffer (r->state becomes REQ_BODY). */
enum MHD_Result http_on_new(srv_http *h, http_req *r);

/* Requests (http.c, http_job.c). */

/* Lets go of one reference to r (the connection's, a worker's or a parse thread's); the last
 * frees it. */
void http_req_unref(http_req *r);

/* The job's body has arrived whole (http_job.c): a small plain body is parsed and its job
 * admitted here, on the HTTP thread; another goes to a parse thread with the connection
 * suspended. Returns libmicrohttpd's answer. */
enum MHD_Result http_body_complete(srv_http *h, http_req *r);

/* The connection has resumed with r's job answered (r->sj's status and body): queues the reply. */
enum MHD_Result http_job_result(http_req *r);

/* r's settled result (r->sj's status and body) is held: r's share of the reply budget becomes
 * the body's capacity (none for an error body); when more is needed and does not fit, the body
 * becomes 503 reply_budget. */
void http_job_hold(http_req *r);

/* Sharing jobs (http_share.c, --share-jobs). */

/* After r's body has been decoded (srv_body_finish OK), before it is parsed: when an identical
 * request's job is queued or running and r's reply fits the budget, r joins it as a follower
 * (its body freed, r->shared set, the connection suspended when suspend says r's thread has not
 * yet) and true is returned: http_share_settle will answer r and drop the caller's reference.
 * False: r goes on alone. */
bool http_share_join(srv_http *h, http_req *r, bool suspend);

/* After r's job has been parsed, its reply's room (reply_max) reserved, and before it is
 * submitted: makes r a leader that identical requests may join, taking body (the decoded body,
 * the key) when true. False (body still the caller's): r's body is not shareable (too large,
 * --share-jobs off) or an identical job leads already. The caller must not pass a job that
 * changes state. */
bool http_share_lead(srv_http *h, http_req *r, srv_body *body, size_t reply_max);

/* r's result is settled (r->sj): when r leads, no request joins it from now on, and each
 * follower gets a copy of the result (http_job_hold), is resumed and unreferenced. Nothing when
 * r does not lead. */
void http_share_settle(srv_http *h, http_req *lead);

#endif
