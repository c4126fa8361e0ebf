/* http_internal.h - private to the HTTP files of server/ (http.c, reply.c, routes.c):
 * the HTTP daemon's state, a request's state, and the functions these files share. */
#ifndef ATTND_HTTP_INTERNAL_H
#define ATTND_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

#include "server.h"

#define ID_MAX 64 /* longest X-Request-Id kept; longer ones are replaced */

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
    srv_conns *conns; /* the connections, as the read timeout sees them */
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
    srv_conn *track; /* the connection's record; NULL when it could not be made */
    bool late;       /* dropped for --read-timeout while its body arrived */
    /* The Open Inference Protocol (v2) */
    char *model, *version;        /* of a /v2/models/ path (version NULL when it has none) */
    size_t v2_header_len;         /* Inference-Header-Content-Length, or API_V2_NO_HEADER */
    srv_coding reply_coding;      /* the coding the job's reply may take (Accept-Encoding) */
    size_t binary_bytes;          /* raw tensor bytes at the end of the job's reply */
    size_t json_len;              /* a reply with binary_bytes: its JSON part */
    const char *content_encoding; /* of the reply being built, or NULL */
} http_req;

/* ---- Shared by the HTTP files ------------------------------------------------------------- */

/* reply.c */
bool v2_path(const char *path);
enum MHD_Result reply(http_req *r, unsigned status, const char *type, void *body, size_t len,
                      enum MHD_ResponseMemoryMode mode);
bool unsent_reserve(srv_http *h, http_req *r, size_t n);
void unsent_release(srv_http *h, http_req *r, size_t n);
bool unsent_full(const srv_http *h);
enum MHD_Result reply_buf(http_req *r, unsigned status, const char *type, api_buf *b);
enum MHD_Result reply_api_error(http_req *r, const api_error *e);
enum MHD_Result reply_error(http_req *r, unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
enum MHD_Result reply_json(http_req *r, unsigned status, const char *literal);
enum MHD_Result reply_unavailable(http_req *r);
enum MHD_Result reply_budget_full(srv_http *h, http_req *r);

/* routes.c */
bool route_of(const char *url, http_req *r);
enum MHD_Result on_new(srv_http *h, http_req *r);

#endif
