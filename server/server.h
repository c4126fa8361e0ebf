/* server.h - the attnd daemon: HTTP over libmicrohttpd, the job queue and its workers, the
 * configuration, logs, metrics and the static files built into the binary. The pieces between
 * the socket and a job (parse threads, bodies, static files, connections, the wire) are in
 * net.h, which this header includes.
 *
 * server/ is the only module that knows HTTP. api/ turns bytes into jobs and jobs into bytes;
 * attention/ computes. A POST /v1/attention or /v1/sdpa goes like this:
 *
 *   HTTP thread   reads the body (capped), has api_job_parse turn it into a validated job (a
 *                 parse thread does, for a large or coded body), submits the job to the bounded
 *                 queue and suspends the connection;
 *   worker        pops the job, checks its deadline, runs it on libattn (api_job_run, with the
 *                 shared attn_pool), writes the body (api_job_respond), resumes the connection;
 *   HTTP thread   is called again for the resumed connection and queues the reply.
 *
 * A body larger than SRV_INLINE_PARSE_BYTES, or sent with a content coding, is decoded and parsed
 * on a parse thread (tasks.c) instead, with the connection suspended meanwhile, so that an HTTP
 * thread never spends long on one request. HTTP threads compute only tiny jobs
 * (--inline-max-flops), and workers never touch a socket.
 *
 * How main wires it (error handling elided; see main.c):
 *
 *     srv_config cfg;
 *     srv_config_init(&cfg);
 *     srv_config_parse(&cfg, argc, argv, &err);               // flags, ATTND_* twins
 *     srv_log log = {.format = cfg.log_format};
 *     srv_metrics *metrics = srv_metrics_create(&err);
 *     int fd = srv_listen(&cfg, bound, sizeof bound, &err);   // the actual port, for port 0
 *     srv_http *http = srv_http_start(&cfg, &log, fd, metrics, &err);   // readyz: 503
 *     ... load the models, create the pool and the workers ...
 *     srv_http_set_ready(http, models, &limits, workers);       // readyz: 200
 *     ... SIGTERM ...
 *     srv_http_set_leaving(http);                               // readyz: 503, jobs still taken
 *     ... --shutdown-delay seconds ...
 *     srv_http_set_draining(http);                              // readyz: 503, new jobs 503
 *     srv_workers_close(workers);
 *     srv_workers_wait_idle(workers, deadline);                 // queued and running jobs end
 *     srv_http_stop(http);
 *
 * Conventions: fallible functions return SRV_OK or a negative srv_status and fill an optional
 * caller-owned srv_error (the first error wins). Times are monotonic seconds as doubles.
 */
#ifndef ATTND_SERVER_H
#define ATTND_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "api.h"
#include "attention.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SRV_VERSION "1.0.0"

typedef enum srv_status {
    SRV_OK = 0,
    SRV_ERR = -1,           /* see the error record */
    SRV_HELP = -2,          /* srv_config_parse: --help was given */
    SRV_QUEUE_FULL = -3,    /* srv_workers_submit: max_queue jobs are waiting */
    SRV_CLOSED = -4,        /* srv_workers_submit: the queue takes no more jobs (draining) */
    SRV_VERSION_ASKED = -5, /* srv_config_parse: --version was given */
    SRV_NOT_INLINE = -6,    /* srv_workers_run_inline: the job is for a worker */
} srv_status;

/* Caller-owned error record; fixed size. msg is one line a user can act on. */
typedef struct srv_error {
    int code; /* 0 = no error yet */
    char msg[512];
} srv_error;

/* ---- Errors and time (common.c) ----------------------------------------------------------- */

/* Fills err (when it is still clear) with a printf-style message; returns SRV_ERR. */
int srv_fail(srv_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Monotonic seconds. */
double srv_now(void);

/* Initialises cv for srv_cond_wait_for: its timed waits go by the monotonic clock. */
void srv_cond_init(pthread_cond_t *cv);

/* With mu held: waits on cv (initialised by srv_cond_init) until it is signalled or seconds
 * (from 0 to a few days) have passed, as pthread_cond_timedwait does. */
void srv_cond_wait_for(pthread_cond_t *cv, pthread_mutex_t *mu, double seconds);

/* ---- Configuration (config.c) ------------------------------------------------------------- */

typedef enum srv_log_format {
    SRV_LOG_TEXT = 0, /* key=value lines */
    SRV_LOG_JSON,     /* one JSON object per line */
} srv_log_format;

/* The daemon's configuration: plain data, immutable once parsed. */
typedef struct srv_config {
    char host[256];           /* what to bind: an IPv4/IPv6 address or a host name */
    uint16_t port;            /* 0 = an ephemeral port */
    size_t threads;           /* worker threads: jobs computed at once */
    size_t pool_threads;      /* helper threads of the shared libattn pool */
    size_t http_threads;      /* libmicrohttpd threads: read, reply (and parse small bodies) */
    size_t parse_threads;     /* threads that decode and parse the other bodies (0: threads) */
    char models_dir[1024];    /* "" = only the built-in demo model */
    char default_model[128];  /* "" = the first model (demo) */
    size_t max_body_bytes;    /* request body cap (413) */
    size_t max_job_bytes;     /* working memory of one job (413, from api/) */
    size_t max_dim;           /* largest tensor dimension */
    size_t max_heads;         /* largest num_heads */
    size_t max_queue;         /* jobs waiting for a worker (503 beyond) */
    size_t max_unsent_bytes;  /* job replies reserved or held, not yet sent (503 beyond) */
    size_t max_memory;        /* what clients can make attnd hold; 0 = auto (srv_memory_plan) */
    bool memory_unfit_warn;   /* --memory-unfit warn: start even when a flag cannot fit */
    unsigned given;           /* SRV_GIVEN_* of the flags set by a flag or variable, not defaults */
    char threads_source[600]; /* where the default --threads came from (srv_cpu_limit) */
    size_t max_connections;   /* open connections; a new one past it evicts one (conn.c) */
    double request_timeout;   /* seconds from arrival; a job still queued past it gets 503 */
    double drain_timeout;     /* seconds SIGTERM waits for queued and running jobs */
    double shutdown_delay;    /* seconds after SIGTERM that jobs are still taken, /readyz 503 */
    size_t idle_timeout;      /* seconds before an idle connection is closed; 0 = never */
    char api_key[4096];      /* the API keys, each followed by one '\n' but the last ("" = no auth);
                                never logged */
    size_t api_key_len;      /* bytes of api_key: 0 = no auth */
    size_t api_keys;         /* how many keys (a session belongs to the key that opened it) */
    char cors_origins[1024]; /* comma-separated allow-list; "*" allows any; "" = none */
    srv_log_format log_format;
    size_t batch_window_us;  /* how long a batch waits for more jobs; 0 = no batching */
    size_t max_batch_tokens; /* query rows (N*L) one batch takes at most */
    size_t inline_max_flops; /* jobs up to this run on their HTTP thread; 0 = never */
    bool share_jobs;         /* identical job requests in flight share one computation */
    size_t max_depth;        /* deepest nesting of arrays and objects in a body (400 beyond) */
    double read_timeout;     /* seconds one request may take to arrive, headers and body, from
                                its first byte; 0 = no limit */
    double send_timeout;     /* seconds a reply may take before --min-send-rate applies */
    size_t min_send_rate;    /* bytes per second a reply must be taken at, on average, once
                                send_timeout has passed; 0 = no limit */
    double max_send_time;    /* seconds after send_timeout by which a reply must be read whole
                                (it must be taken at its length / this when that is faster
                                than min_send_rate); 0 = no limit */
    size_t max_job_flops;    /* largest api_job_flops of one job (413 beyond); 0 = no limit */
    size_t max_sessions;     /* decode sessions held at once (api_sessions); 0 = none */
    double session_ttl;      /* seconds a session may stay idle before it ends; 0 = never */
} srv_config;

/* The sizes whose defaults follow the memory limit when they are not given (srv_config.given). */
#define SRV_GIVEN_MAX_BODY        1u
#define SRV_GIVEN_MAX_JOB         2u
#define SRV_GIVEN_MAX_UNSENT      4u
#define SRV_GIVEN_MAX_CONNECTIONS 8u
#define SRV_GIVEN_THREADS         16u

/* Fills cfg with the defaults (threads = the CPUs this process may use: srv_cpu_limit). */
void srv_config_init(srv_config *cfg);

/* Sets each option of cfg from its flag in argv, or else from its ATTND_* environment twin (an
 * empty variable counts as unset; a bad variable is an error only when no flag overrides it).
 * Returns SRV_OK; SRV_HELP for --help (print srv_config_usage); SRV_VERSION_ASKED for
 * --version; or SRV_ERR with err naming the flag or variable and what is wrong. Reads the API
 * key file. */
int srv_config_parse(srv_config *cfg, int argc, char **argv, srv_error *err);

/* Writes the --help text (every flag, its environment twin and its default) to f. */
void srv_config_usage(FILE *f);

/* `attnd --health-check`: GET /healthz of the daemon configured by cfg (a wildcard host is
 * reached on loopback). Returns 0 on a 200, 1 otherwise with one line on out. */
int srv_health_check(const srv_config *cfg, FILE *out);

/* Connections libmicrohttpd may hold at once: --max-connections live ones, SRV_CONN_SPARE spare
 * places per HTTP thread (a connection past the limit that nothing could be evicted for is served
 * one probe there: conn.c), and up to SRV_CONN_SLACK per HTTP thread that attnd has shut down
 * (evicted, or a spare pushed out) and libmicrohttpd has not closed yet. Saturates at SIZE_MAX. */
#define SRV_CONN_SLACK 8
#define SRV_CONN_SPARE 4
size_t srv_config_connections_max(const srv_config *cfg);

/* Room zlib's state and the rounding of deflateBound take when a reply is coded (gzip or
 * deflate): 256 KiB of deflate state at windowBits 15, memLevel 8, and more than enough for the
 * rest (inflate's state and window, for a body, are under 48 KiB). */
#define SRV_CODING_BYTES ((size_t)512 << 10)

/* The most free memory a thread's malloc heap may keep at its top before glibc returns it
 * (mallopt M_TRIM_THRESHOLD, set at start; less under a small memory limit:
 * srv_memory_heap_trim): small jobs reuse their heaps' pages instead of faulting them in anew
 * per request. Idle memory above rest stays below this per heap. */
#define SRV_HEAP_TRIM_BYTES (16 << 20)

/* Bytes a connection place holds beside what the job memory budget counts: libmicrohttpd's
 * 32 KiB buffer, the request's records, and a small reply (an error, a probe's; larger replies
 * come from the budget). */
#define SRV_CONN_BYTES ((size_t)48 << 10)

/* A reply other than a job's that is larger than this is held in the job memory budget (reply.c);
 * smaller ones (errors, probes) are counted in SRV_CONN_BYTES. */
#define SRV_SMALL_REPLY ((size_t)8 << 10)

/* ---- Sizing (sizing.c) -------------------------------------------------------------------- */

/* The memory attnd may use: its cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes), else
 * the machine's memory; plain data. */
typedef struct srv_memory_limit {
    size_t bytes;     /* the limit */
    size_t machine;   /* the machine's memory */
    char source[600]; /* where the limit comes from: "cgroup v2 /sys/fs/cgroup/.../memory.max",
                         "cgroup v1 ...", or "the machine's memory" */
} srv_memory_limit;

/* Reads the limit of the calling process (sizing.c says how). Never fails: without a cgroup
 * limit it is the machine's memory. */
void srv_memory_limit_read(srv_memory_limit *out);

/* The CPUs attnd may use: the smaller of its affinity set and its cgroup's CPU quota (v2
 * cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us, of the cgroup or a parent), rounded up;
 * plain data. */
typedef struct srv_cpu_limit {
    size_t cores;     /* the affinity set's size */
    double quota;     /* CPUs the quota allows (0: no quota) */
    size_t threads;   /* the default --threads: cores, or the quota rounded up when smaller */
    char source[600]; /* where threads comes from, for the log */
} srv_cpu_limit;

/* Reads the calling process's CPU limit (sizing.c says how). Never fails. */
void srv_cpu_limit_read(srv_cpu_limit *out);

/* The process's resident memory now (VmRSS), in bytes; 0 when it cannot be read. */
size_t srv_memory_rss(void);

/* How attnd shares out its memory (SECURITY.md, "Memory"); plain data. */
typedef struct srv_memory_plan {
    size_t limit;     /* the memory limit */
    size_t rest;      /* attnd's resident size when planned (at rest, models loaded) */
    size_t budget;    /* --max-memory, or by default 3/4 of limit - rest: the most clients can
                         make attnd hold above rest (logged as memory_bound) */
    bool auto_budget; /* budget is the default, not --max-memory */
    size_t heap_trim; /* the free memory glibc may keep atop each malloc heap (M_TRIM_THRESHOLD) */
    size_t fixed;     /* connection places (SRV_CONN_BYTES each), zlib states, /metrics,
                         metadata replies being written, free memory atop the malloc heaps, the
                         decode sessions' records */
    size_t replies;   /* --max-unsent-bytes: job replies reserved or held, coded copies included */
    size_t jobs;      /* the rest: the job memory cache's budget for bodies, arenas, batch
                         workspaces, large replies other than jobs' and the decode sessions'
                         blocks (0 when nothing is left) */
    char unfit[256];  /* the flags whose bound cannot fit, comma-separated; "" when all fit */
} srv_memory_plan;

/* The free memory glibc may keep atop each malloc heap (M_TRIM_THRESHOLD) under a limit of limit
 * bytes: 1/128 of it, from 1 MiB to SRV_HEAP_TRIM_BYTES. */
size_t srv_memory_heap_trim(size_t limit);

/* Sets --max-connections, when it was not given, from the limit: a place (48 KiB) per MiB, from
 * 64 to 1024. Call before HTTP starts. */
void srv_memory_size_connections(srv_config *cfg, const srv_memory_limit *lim);

/* Shares out the memory by cfg, for a registry of models models (the /metrics renderings grow
 * with them), under lim, with attnd's resident size rest; first sets the sizes that were not
 * given (srv_config.given) from the budget: --max-unsent-bytes a quarter of it, --max-job-bytes
 * half of what the jobs' share is, --max-body-bytes a third (at most their fixed defaults:
 * 256M, 256M, 64M), so that they fit. Names in out->unfit the flags that cannot fit. */
void srv_memory_plan_make(srv_config *cfg, size_t models, const srv_memory_limit *lim, size_t rest,
                          srv_memory_plan *out);

/* Seconds a cached job memory block may stay unused before it returns to the system (the help of
 * attnd_job_memory_bytes in metrics.c says 2 s). */
#define SRV_MEM_IDLE_S 2.0

/* True when origin (len bytes, from an Origin header) is in the CORS allow-list. */
bool srv_config_origin_allowed(const srv_config *cfg, const char *origin, size_t len);

/* ---- Logs (log.c) ------------------------------------------------------------------------- */

/* Where and how to log; plain data. Lines go to stderr, each with one write(2). */
typedef struct srv_log {
    srv_log_format format;
} srv_log;

typedef enum srv_kv_type { SRV_KV_STR, SRV_KV_INT, SRV_KV_NUM, SRV_KV_BOOL } srv_kv_type;

/* One field of a log line. */
typedef struct srv_kv {
    const char *key;
    srv_kv_type type;
    const char *s; /* SRV_KV_STR; NULL is written as null / - */
    long long i;   /* SRV_KV_INT; SRV_KV_BOOL: 0 false, else true */
    double d;      /* SRV_KV_NUM, written with 3 decimals */
} srv_kv;

#define SRV_STR(k, v) ((srv_kv){.key = (k), .type = SRV_KV_STR, .s = (v)})
#define SRV_INT(k, v) ((srv_kv){.key = (k), .type = SRV_KV_INT, .i = (long long)(v)})
#define SRV_NUM(k, v) ((srv_kv){.key = (k), .type = SRV_KV_NUM, .d = (double)(v)})
/* A yes-or-no field: JSON's true or false, never a string. */
#define SRV_BOOL(k, v) ((srv_kv){.key = (k), .type = SRV_KV_BOOL, .i = (v) ? 1 : 0})

/* Writes one line: time, level ("info", "warn", "error"), msg, then the fields. Values are
 * escaped: text quotes a value that holds spaces, quotes, backslashes, '=' or bytes outside
 * printable ASCII, and writes those bytes as \xNN (the line stays ASCII); JSON writes strings
 * with api_buf_json_string (invalid UTF-8 as \ufffd, so the line stays valid JSON) and
 * SRV_BOOL's values as JSON's true and false (text: true and false too). Values are
 * cut after 1 KiB and lines after 8 KiB. Thread-safe. */
void srv_log_write(const srv_log *log, const char *level, const char *msg, const srv_kv *kv,
                   size_t n);

/* ---- Routes (routes.c) ------------------------------------------------------------------- */

/* The routes attnd answers. */
typedef enum srv_route {
    SRV_ROUTE_ATTENTION = 0,  /* POST /v1/attention */
    SRV_ROUTE_SDPA,           /* POST /v1/sdpa */
    SRV_ROUTE_MODELS,         /* GET /v1/models and /v1/models/{name} */
    SRV_ROUTE_HEALTHZ,        /* GET /healthz */
    SRV_ROUTE_READYZ,         /* GET /readyz */
    SRV_ROUTE_METRICS,        /* GET /metrics */
    SRV_ROUTE_OPENAPI,        /* GET /openapi.yaml */
    SRV_ROUTE_V2_SERVER,      /* GET /v2: the Open Inference Protocol's server metadata */
    SRV_ROUTE_V2_LIVE,        /* GET /v2/health/live */
    SRV_ROUTE_V2_READY,       /* GET /v2/health/ready */
    SRV_ROUTE_V2_MODEL,       /* GET /v2/models/{name}[/versions/{v}] */
    SRV_ROUTE_V2_MODEL_READY, /* GET /v2/models/{name}[/versions/{v}]/ready */
    SRV_ROUTE_V2_INFER,       /* POST /v2/models/{name}[/versions/{v}]/infer */
    SRV_ROUTE_V2_CONFIG,      /* GET /v2/models/{name}[/versions/{v}]/config */
    SRV_ROUTE_V2_STATS,       /* GET /v2/models/stats, /v2/models/{name}[/versions/{v}]/stats */
    SRV_ROUTE_V2_INDEX,       /* POST /v2/repository/index */
    SRV_ROUTE_SESSIONS,       /* POST /v1/sessions: open a decode session */
    SRV_ROUTE_SESSION,        /* /v1/sessions/{id}: POST appends, GET (HEAD) says, DELETE ends */
    SRV_ROUTE_STATIC,         /* GET / and the other built-in files */
    SRV_ROUTE_UNKNOWN,        /* anything else (404) */
    SRV_ROUTE_COUNT
} srv_route;

/* A route as the route table describes it. */
typedef struct srv_route_info {
    const char *name; /* its label in /metrics: the path ("/v1/attention"), the template of its
                         paths ("/v2/models/{name}/infer"), "static" or "unknown" */
    bool exact;       /* the path name selects the route (others are found by routes.c) */
    bool post;        /* takes POST (and OPTIONS); the others take GET and HEAD (and OPTIONS) */
    bool get, del;    /* a POST route that also takes GET and HEAD, and DELETE */
    bool job;         /* a POST carries a body the job path parses: a job for the workers (or a
                         session's open, answered at once) */
    bool open;        /* answered without the API key (the probes) */
} srv_route_info;

/* The route table: every route, indexed by srv_route. */
extern const srv_route_info srv_routes[SRV_ROUTE_COUNT];

/* ---- Metrics (metrics.c) ------------------------------------------------------------------ */

/* Why a job was refused or dropped with 503. */
typedef enum srv_reject {
    SRV_REJECT_QUEUE_FULL = 0,
    SRV_REJECT_DEADLINE,
    SRV_REJECT_DRAINING,
    SRV_REJECT_REPLY_BUDGET,  /* the replies not yet sent fill --max-unsent-bytes */
    SRV_REJECT_MEMORY_BUDGET, /* bodies and jobs fill the job memory budget (--max-memory) */
    SRV_REJECT_COUNT
} srv_reject;

/* Counters and histograms, updated with atomics from any thread. Opaque. */
typedef struct srv_metrics srv_metrics;

/* NULL with err when out of memory. Free with srv_metrics_destroy (NULL does nothing). */
srv_metrics *srv_metrics_create(srv_error *err);
void srv_metrics_destroy(srv_metrics *m);

/* Makes the per-model counters of the models of the registry (borrowed: keep it alive and
 * unchanged), named by it. Call once, before any job is counted (a job counted before goes
 * under no model). SRV_OK, or SRV_ERR with err when out of memory. */
int srv_metrics_set_models(srv_metrics *m, const api_registry *models, srv_error *err);

/* Models are given as api_job_model_index counts them (API_NO_MODEL: none). */

/* One finished request: its route, HTTP status (0 when none was sent), body bytes in and out,
 * seconds from its headers to its end, and the model of its job (or of a v2 infer path). */
void srv_metrics_request(srv_metrics *m, srv_route route, unsigned status, size_t bytes_in,
                         size_t bytes_out, double seconds, size_t model);

/* One request body parsed into a job of op on model, in seconds. */
void srv_metrics_parse(srv_metrics *m, api_op op, size_t model, double seconds);

/* One job computed: seconds it waited in the queue, computed and took to encode its reply, its
 * FLOPs and its query rows (N L). */
void srv_metrics_job(srv_metrics *m, api_op op, size_t model, double queue_s, double compute_s,
                     double encode_s, double flops, size_t rows);

/* delta jobs of op on model entered (+1) or left (-1) the queue for a worker. */
void srv_metrics_pending(srv_metrics *m, api_op op, size_t model, int delta);

/* One batch that a worker ran, of jobs of op on model: its jobs and their query rows (1 job for
 * an unbatched run). */
void srv_metrics_batch(srv_metrics *m, api_op op, size_t model, size_t jobs, size_t rows);

/* The Open Inference Protocol's statistics of every model, from the counters: out holds
 * api_registry_count(models) + 1 records (the registry's models, then "sdpa"). */
void srv_metrics_v2_stats(const srv_metrics *m, api_v2_model_stats *out);

/* One job refused or dropped with 503. */
void srv_metrics_reject(srv_metrics *m, srv_reject why);

/* A job request answered with a copy of an identical request's result (--share-jobs). */
void srv_metrics_shared(srv_metrics *m);

/* Point-in-time values the exposition also shows. */
/* How often attnd has shut connections down, by why (srv_conns_stats). */
typedef enum srv_cut {
    SRV_CUT_EVICTED_IDLE = 0, /* evicted at --max-connections: idle */
    SRV_CUT_EVICTED_READING,  /* evicted: its request still arriving */
    SRV_CUT_EVICTED_SENDING,  /* evicted: its client taking its reply below the rate */
    SRV_CUT_SPARE_FULL,       /* a spare place given to a newer connection */
    SRV_CUT_READ_TIMEOUT,     /* --read-timeout */
    SRV_CUT_SEND_TIMEOUT,     /* the send rule (--min-send-rate, --max-send-time) */
    SRV_CUT_COUNT
} srv_cut;

/* The connections now, and the shut-downs so far. */
typedef struct srv_conn_stats {
    size_t live, spare; /* open connections: in the --max-connections, on spare places */
    uint64_t cuts[SRV_CUT_COUNT];
} srv_conn_stats;

typedef struct srv_gauges {
    size_t queue_depth, queue_capacity, jobs_in_flight, workers, pool_threads;
    srv_conn_stats conns;               /* the connections */
    size_t unsent_bytes, unsent_budget; /* replies reserved or held and not yet sent; the budget */
    api_mem_stats mem;                  /* the job memory cache */
    api_sessions_stats sessions;        /* the decode sessions */
    bool ready, draining; /* draining: from SIGTERM on (the --shutdown-delay included) */
    double start_time;    /* wall-clock seconds since the epoch */
} srv_gauges;

/* Appends the Prometheus text exposition (format 0.0.4) of m and g to out. */
void srv_metrics_render(const srv_metrics *m, const srv_gauges *g, api_buf *out);

/* The exposition the /metrics replies send: one rendering shared, read-only, by every reply made
 * while nothing changed, each reply holding a reference that it gives back when libmicrohttpd
 * is done with it. So a client that does not read holds a reference to bytes already counted,
 * never a rendering of its own nor a place that other scrapers need. */
typedef struct srv_exposition srv_exposition;

/* A rendering is shared for at most this many seconds: process_* (and the /metrics route's own
 * series, whose requests count as no change) are at most this old in a shared one. */
#define SRV_METRICS_INTERVAL_S 1.0

/* At most this many renderings are alive at once, the one being written included: the newest,
 * and older ones that replies still hold. When all are held, the newest is shared whatever its
 * age, until a holder lets go (SECURITY.md gives the bounds). */
#define SRV_METRICS_RENDERINGS 4

/* The most the /metrics renderings hold at once, for a registry of models models:
 * SRV_METRICS_RENDERINGS + 1 renderings (one growing by realloc is briefly held twice), each at
 * most 700 KiB and 40 KiB per model (SECURITY.md). Saturates at SIZE_MAX. */
size_t srv_metrics_held_max(size_t models);

/* A new reference (the caller's; give it back with srv_exposition_release) to the exposition of
 * m with the gauges g: the newest rendering when it is younger than SRV_METRICS_INTERVAL_S and
 * nothing has been counted since (a /metrics request aside) and g equals its gauges, or when
 * SRV_METRICS_RENDERINGS renderings are held; else a new rendering, written under m's lock
 * (one at a time). NULL when out of memory. Thread-safe. */
srv_exposition *srv_metrics_exposition(srv_metrics *m, const srv_gauges *g);

/* The rendering's bytes (*len of them, not NUL-terminated), unchanged and valid until the
 * reference is given back. */
const char *srv_exposition_data(const srv_exposition *e, size_t *len);

/* Gives back one reference; the last frees the rendering. From any thread; takes no lock. NULL
 * does nothing. m must outlive every reference (srv_metrics_destroy comes after the HTTP daemon
 * has stopped). */
void srv_exposition_release(srv_exposition *e);

/* ---- Workers and the job queue (workers.c) ------------------------------------------------ */

typedef struct srv_job srv_job;

/* Called once per submitted job, from a worker or from srv_workers_expire/_abandon, when the
 * job's result (status, body, times) is in place. From then on the workers never touch it. */
typedef void (*srv_job_done_fn)(srv_job *job);

/* A job as the queue holds it. The submitter allocates it (it is usually part of a request)
 * and keeps it alive until done() is called. */
struct srv_job {
    /* set by the submitter */
    api_job *job; /* the parsed job; owned by the workers from a successful submit on */
    api_op op;
    size_t model;         /* api_job_model_index, for the metrics */
    double deadline;      /* srv_now() past which a still-queued job is answered 503 */
    bool own_deadline;    /* the deadline is the request's own timeout, not --request-timeout */
    srv_job_done_fn done; /* see srv_job_done_fn */
    void *owner;          /* for done() */
    /* set before done() is called */
    unsigned status;   /* 200, or the error's status */
    char code[32];     /* the error code ("deadline_exceeded", ...), "" on 200 */
    api_error error;   /* the error itself (status 0 on 200), for a route with other error
                          bodies than v1's (the Open Inference Protocol) */
    api_buf body;      /* the response body (JSON; v1's error body on an error); the owner frees
                          it */
    double t_queued;   /* srv_now() at submit */
    double queue_ms;   /* time spent waiting for a worker */
    double compute_ms; /* api_job_run */
    double encode_ms;  /* api_job_respond */
    /* private to workers.c */
    srv_job *next;
};

typedef struct srv_workers srv_workers;

/* Starts nworkers threads serving a FIFO queue of at most max_queue waiting jobs. Each job runs
 * on the calling worker plus the helpers of pool (may be NULL), as limits->nslots allows.
 * metrics (borrowed) records queue and compute times. NULL with err on failure. */
srv_workers *srv_workers_create(size_t nworkers, size_t max_queue, attn_pool *pool,
                                srv_metrics *metrics, srv_error *err);

/* Turns on dynamic batching (call before the first submit; off by default): a worker that pops
 * a POST /v1/attention job also takes every queued job api_jobs_batchable with it, up to
 * max_tokens query rows in all, and runs them as one batch (api_jobs_run, its workspace capped
 * at max_bytes). While other jobs are in flight it waits for more until window_s after the first
 * job was queued; a job that arrives to an idle server never waits. window_s 0 leaves batching
 * off. */
void srv_workers_set_batching(srv_workers *w, double window_s, size_t max_tokens, size_t max_bytes);

/* Queues job. SRV_OK: a worker will call job->done (possibly before this returns, on another
 * thread). SRV_QUEUE_FULL or SRV_CLOSED: nothing was taken; the caller still owns job->job. */
int srv_workers_submit(srv_workers *w, srv_job *job);

/* The largest reply bound (api_job_response_bytes) of a job srv_workers_run_inline runs: about
 * 15,000 JSON floats, a fraction of a millisecond to encode on the HTTP thread. */
#define SRV_INLINE_MAX_REPLY ((size_t)256 << 10)

/* Lets srv_workers_run_inline run jobs of at most max_flops (api_job_plan_flops: the plan's
 * FLOPs; params.init weights are judged by api_job_params_cheap) on the caller's thread; 0 (the
 * default) never does. */
void srv_workers_set_inline(srv_workers *w, double max_flops);

/* Runs job at once on the calling thread, without queueing it, when it is tiny: its flops are
 * within srv_workers_set_inline's bound, its parameters cost nothing more to make
 * (api_job_params_cheap), its reply bound is at most SRV_INLINE_MAX_REPLY, and no job is
 * waiting in the queue (so a tiny job never overtakes one that waits there, and queued work
 * keeps forming batches). While it runs it counts as running
 * (stats, wait_idle). SRV_OK: it ran; job->job is consumed and job's result fields (status,
 * body, times) are set, but job->done is NOT called: the caller answers from them.
 * SRV_NOT_INLINE or SRV_CLOSED: nothing was done; submit it (SRV_CLOSED: it would be refused). */
int srv_workers_run_inline(srv_workers *w, srv_job *job);

/* Jobs waiting, and jobs a worker (or srv_workers_run_inline) is running. */
void srv_workers_stats(srv_workers *w, size_t *queued, size_t *running);

/* From now on submit returns SRV_CLOSED; queued jobs still run. */
void srv_workers_close(srv_workers *w);

/* Waits until no job is queued or running, or until the monotonic time deadline. True when
 * idle. */
bool srv_workers_wait_idle(srv_workers *w, double deadline);

/* Answers every queued job 503 (draining) without running it. Returns how many. */
size_t srv_workers_expire(srv_workers *w);

/* Answers every running job 503 now; its worker finishes computing and then drops the result
 * without touching the job again. Returns how many. For a shutdown that cannot wait longer. */
size_t srv_workers_abandon(srv_workers *w);

/* Stops and joins the workers. Call only when idle (or after abandon, when the process exits
 * anyway). NULL does nothing. */
void srv_workers_destroy(srv_workers *w);

#include "net.h" /* parse threads, bodies, static files, connections, the wire */

/* ---- HTTP (http.c, with reply.c and routes.c) --------------------------------------------- */

typedef struct srv_http srv_http;

/* Starts libmicrohttpd on listen_fd (taken over) with cfg's thread count and limits. Until
 * srv_http_set_ready, /readyz and the job routes answer 503. cfg, log and metrics are
 * borrowed. NULL with err on failure (listen_fd is then closed). */
srv_http *srv_http_start(const srv_config *cfg, const srv_log *log, int listen_fd,
                         srv_metrics *metrics, srv_error *err);

/* Starts serving jobs against models and limits, queued on workers (all borrowed; keep them
 * alive and unchanged until srv_http_stop). */
void srv_http_set_ready(srv_http *h, const api_registry *models, const api_limits *limits,
                        srv_workers *workers);

/* The decode sessions the session routes and v2's sequences use (borrowed; NULL, the default:
 * none). Call before srv_http_set_ready. */
void srv_http_set_sessions(srv_http *h, api_sessions *sessions);

/* Says the server is going (the --shutdown-delay after SIGTERM): /readyz and the v2 readiness
 * routes answer 503 draining, so that load balancers stop sending new requests, while jobs are
 * still taken and answered; replies carry Connection: close, so that clients open their next
 * connection elsewhere. */
void srv_http_set_leaving(srv_http *h);

/* Stops taking jobs: /readyz and new job requests answer 503, replies carry Connection:
 * close. */
void srv_http_set_draining(srv_http *h);

/* Waits until every request begun so far (its headers read: given to the workers, being
 * uploaded or parsed, or with its reply being sent) has completed, or until the monotonic time
 * deadline. True when none is left. During the drain a request still arriving is answered 503
 * draining, and this waits for that answer to be sent. */
bool srv_http_wait_replied(srv_http *h, double deadline);

/* Stops libmicrohttpd and frees h. Every job must have been answered (done() called). NULL does
 * nothing. */
void srv_http_stop(srv_http *h);

#ifdef __cplusplus
}
#endif

#endif
