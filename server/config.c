/* config.c - the daemon's configuration: flags, their ATTND_* environment twins, defaults,
 * validation with one clear message per bad value, and the --help text. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "server.h"

#define KEY_FILE_MAX 4096

#define AUTO_SIZE ((size_t)-1)

void srv_config_init(srv_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->host, sizeof cfg->host, "127.0.0.1");
    cfg->port = 8080;
    srv_cpu_limit cpu;
    srv_cpu_limit_read(&cpu);
    cfg->threads = cpu.threads;
    snprintf(cfg->threads_source, sizeof cfg->threads_source, "%s", cpu.source);
    cfg->pool_threads = AUTO_SIZE;
    cfg->http_threads = 2;
    cfg->parse_threads = 0; /* as --threads */
    cfg->max_body_bytes = (size_t)64 << 20;
    cfg->max_job_bytes = (size_t)256 << 20;
    api_limits lim = api_limits_default();
    cfg->max_dim = lim.max_dim;
    cfg->max_heads = lim.max_heads;
    cfg->max_depth = lim.max_depth;
    cfg->max_queue = 128;
    cfg->max_unsent_bytes = (size_t)256 << 20;
    cfg->max_connections = 1024;
    cfg->request_timeout = 30;
    cfg->drain_timeout = 30;
    cfg->idle_timeout = 60;
    cfg->read_timeout = 30;
    cfg->send_timeout = 30;
    cfg->min_send_rate = (size_t)32 << 10;
    cfg->max_send_time = 120;
    cfg->max_job_flops = (size_t)64000000000; /* bench's W4 without its mask: 43 GFLOP */
    cfg->log_format = SRV_LOG_TEXT;
    cfg->batch_window_us = 200; /* bench/RESULTS.md: the measurements behind both */
    cfg->max_batch_tokens = 4096;
    cfg->inline_max_flops = 2000000; /* libattn's ATTN_INLINE_FLOPS; workers.c says why */
    cfg->max_sessions = 256;
    cfg->session_ttl = 300;
    cfg->share_jobs = true;
}

/* ---- The options -------------------------------------------------------------------------- */

typedef enum opt_kind {
    OPT_LISTEN,
    OPT_COUNT,   /* a whole number in [lo, hi] */
    OPT_BYTES,   /* a byte count with an optional K/M/G suffix, in [lo, hi] */
    OPT_SECONDS, /* a decimal number of seconds in [lo, hi] */
    OPT_STRING,
    OPT_KEY,      /* the API key itself (environment only) */
    OPT_KEY_FILE, /* a file holding the API key */
    OPT_CORS,
    OPT_LOG_FORMAT,
    OPT_MEMORY, /* "auto" (0), or a byte count as OPT_BYTES */
    OPT_UNFIT,  /* refuse or warn */
    OPT_SWITCH, /* on or off, into a bool */
} opt_kind;

typedef struct opt {
    const char *flag; /* NULL: environment only */
    const char *env;
    const char *metavar;
    opt_kind kind;
    size_t offset; /* of the field in srv_config */
    double lo, hi;
    const char *dflt; /* the default, as --help shows it */
    const char *help;
} opt;

#define FIELD(f) offsetof(srv_config, f)

static const opt OPTS[] = {
    {"--listen", "ATTND_LISTEN", "HOST:PORT", OPT_LISTEN, 0, 0, 0, "127.0.0.1:8080",
     "address to listen on; port 0 picks a free port (the log says which); [::1]:PORT for "
     "IPv6"},
    {"--threads", "ATTND_THREADS", "N", OPT_COUNT, FIELD(threads), 1, 1024, "the CPUs",
     "worker threads: jobs computed at once; by default the CPUs attnd may use: its affinity set, "
     "or its cgroup's CPU quota rounded up when smaller"},
    {"--pool-threads", "ATTND_POOL_THREADS", "N", OPT_COUNT, FIELD(pool_threads), 0, 1024,
     "threads - 1", "helper threads of the compute pool that every worker's job can use"},
    {"--http-threads", "ATTND_HTTP_THREADS", "N", OPT_COUNT, FIELD(http_threads), 1, 64, "2",
     "HTTP threads: they accept connections, read requests and send replies (and parse bodies of "
     "up to 64 KiB sent without a content coding)"},
    {"--parse-threads", "ATTND_PARSE_THREADS", "N", OPT_COUNT, FIELD(parse_threads), 1, 1024,
     "threads",
     "threads that decode (gzip, deflate) and parse the other request bodies; at most "
     "--max-queue bodies wait for one (503 queue_full beyond)"},
    {"--models", "ATTND_MODELS", "DIR", OPT_STRING, FIELD(models_dir), 0, 0, "none",
     "load every DIR/NAME.safetensors (a regular file or a symlink to one) as a model named "
     "NAME"},
    {"--default-model", "ATTND_DEFAULT_MODEL", "NAME", OPT_STRING, FIELD(default_model), 0, 0,
     "demo", "the model of requests that name none"},
    {"--max-body-bytes", "ATTND_MAX_BODY_BYTES", "SIZE", OPT_BYTES, FIELD(max_body_bytes), 2,
     (double)((size_t)1 << 40), "64M, or a third of the job memory budget",
     "largest request body (413 beyond)"},
    {"--max-job-bytes", "ATTND_MAX_JOB_BYTES", "SIZE", OPT_BYTES, FIELD(max_job_bytes), 1024,
     (double)((size_t)1 << 42), "256M, or half the job memory budget",
     "memory of one job: its tensors, weights, workspace and outputs, plus the most its "
     "response can take (413 beyond)"},
    {"--max-dim", "ATTND_MAX_DIM", "N", OPT_COUNT, FIELD(max_dim), 1, 1 << 24, "65536",
     "largest size of any tensor dimension (413 beyond)"},
    {"--max-heads", "ATTND_MAX_HEADS", "N", OPT_COUNT, FIELD(max_heads), 1, 1 << 16, "256",
     "largest number of heads (413 beyond)"},
    {"--max-depth", "ATTND_MAX_DEPTH", "N", OPT_COUNT, FIELD(max_depth), 1, 1024, "64",
     "deepest nesting of arrays and objects in a request body (400 beyond; requests need 6)"},
    {"--max-queue", "ATTND_MAX_QUEUE", "N", OPT_COUNT, FIELD(max_queue), 1, 1000000, "128",
     "jobs waiting for a worker (a batch's jobs after its first, and tiny jobs computing on an "
     "HTTP thread, keep their places); when full, 503 with Retry-After at once"},
    {"--max-unsent-bytes", "ATTND_MAX_UNSENT_BYTES", "SIZE", OPT_BYTES, FIELD(max_unsent_bytes),
     1024, (double)((size_t)1 << 42), "256M, or a quarter of --max-memory",
     "replies not yet sent, all together: each job's reply is reserved at its bound before "
     "it is queued and held until its client has read it; a job that does not fit gets 503 "
     "with Retry-After at once"},
    {"--max-memory", "ATTND_MAX_MEMORY", "SIZE", OPT_MEMORY, FIELD(max_memory), 16 << 20,
     (double)((size_t)1 << 46), "auto",
     "memory clients can make attnd hold, all together (bodies, jobs, replies, connections); "
     "auto: 3/4 of what the cgroup's memory limit (or the machine's memory) leaves beside attnd "
     "at rest. A request that finds it taken gets 503 memory_budget at once"},
    {"--memory-unfit", "ATTND_MEMORY_UNFIT", "refuse|warn", OPT_UNFIT, 0, 0, 0, "refuse",
     "when a flag's bound cannot fit --max-memory (a body, a job, the replies and connections): "
     "refuse to start, naming it (exit 2), or warn and start anyway"},
    {"--max-connections", "ATTND_MAX_CONNECTIONS", "N", OPT_COUNT, FIELD(max_connections), 1,
     1000000, "1024, or one per MiB of the memory limit",
     "open connections at once; past it a new one evicts the one idle the longest, else the one "
     "whose request has been arriving the longest, else the one whose client reads its reply "
     "furthest below the send rule's rate; else it takes a spare place that serves one probe "
     "(503 connection_limit for anything else)"},
    {"--request-timeout", "ATTND_REQUEST_TIMEOUT", "SEC", OPT_SECONDS, FIELD(request_timeout),
     0.001, 86400, "30",
     "deadline from a request's arrival for a worker to take its job; a job still queued past it "
     "gets 503 (compute is bounded by --max-job-flops, sending by --min-send-rate)"},
    {"--drain-timeout", "ATTND_DRAIN_TIMEOUT", "SEC", OPT_SECONDS, FIELD(drain_timeout), 0, 86400,
     "30", "on SIGTERM/SIGINT, how long queued and running jobs may take before they get 503"},
    {"--shutdown-delay", "ATTND_SHUTDOWN_DELAY", "SEC", OPT_SECONDS, FIELD(shutdown_delay), 0, 3600,
     "0",
     "on SIGTERM/SIGINT, keep taking and answering jobs for SEC while /readyz answers 503 (so a "
     "load balancer or Kubernetes stops sending first), then drain; a second signal ends it"},
    {"--idle-timeout", "ATTND_IDLE_TIMEOUT", "N", OPT_COUNT, FIELD(idle_timeout), 0, 86400, "60",
     "close a connection silent for N whole seconds (0 = never); between requests, and before "
     "the first, only this applies"},
    {"--read-timeout", "ATTND_READ_TIMEOUT", "SEC", OPT_SECONDS, FIELD(read_timeout), 0, 86400,
     "30",
     "a request's headers and body must arrive within SEC of its first byte, else the "
     "connection is closed (0 = no limit); between requests --idle-timeout applies"},
    {"--send-timeout", "ATTND_SEND_TIMEOUT", "SEC", OPT_SECONDS, FIELD(send_timeout), 0, 86400,
     "30",
     "a reply may take SEC to be read before --min-send-rate applies (0 = the rate applies from "
     "the start)"},
    {"--min-send-rate", "ATTND_MIN_SEND_RATE", "SIZE", OPT_BYTES, FIELD(min_send_rate), 0,
     (double)((size_t)1 << 40), "32K",
     "bytes per second a client must read its reply at, on average, once --send-timeout has "
     "passed, else the connection is closed and the reply's room given back (0 = no limit)"},
    {"--max-send-time", "ATTND_MAX_SEND_TIME", "SEC", OPT_SECONDS, FIELD(max_send_time), 0, 86400,
     "120",
     "a reply must be read whole within --send-timeout + SEC: one longer than --min-send-rate x "
     "SEC must be taken at its length / SEC, else the connection is closed and its room given "
     "back (0 = no limit)"},
    {"--max-job-flops", "ATTND_MAX_JOB_FLOPS", "N", OPT_COUNT, FIELD(max_job_flops), 0, 1e18,
     "64000000000",
     "compute of one job (usage.flops, random params.init weights included): 413 beyond, "
     "before its tensors are decoded (0 = no limit)"},
    {"--batch-window-us", "ATTND_BATCH_WINDOW_US", "USEC", OPT_COUNT, FIELD(batch_window_us), 0,
     1000000, "200",
     "batch attention jobs (/v1/attention, /v2 models) on the same model: wait up to USEC after a "
     "job arrives for more "
     "while others are in flight (0 = no batching)"},
    {"--inline-max-flops", "ATTND_INLINE_MAX_FLOPS", "N", OPT_COUNT, FIELD(inline_max_flops), 0,
     1000000000, "2000000",
     "a job of at most N FLOP (usage.flops) and a reply bound of at most 256 KiB runs at once on "
     "the thread that parsed it, not handed to a worker, when no job is queued (0 = never)"},
    {"--share-jobs", "ATTND_SHARE_JOBS", "on|off", OPT_SWITCH, FIELD(share_jobs), 0, 0, "on",
     "identical job requests in flight at once (the same route, model and body of at most 64 "
     "KiB) share one computation: the first is computed, the others get a copy of its reply"},
    {"--max-batch-tokens", "ATTND_MAX_BATCH_TOKENS", "N", OPT_COUNT, FIELD(max_batch_tokens), 1,
     1 << 24, "4096", "query rows (N*L) one batch takes at most"},
    {"--max-sessions", "ATTND_MAX_SESSIONS", "N", OPT_COUNT, FIELD(max_sessions), 0, 1000000, "256",
     "decode sessions held at once (POST /v1/sessions, v2 sequences); a new one past it ends the "
     "least recently used idle one, else gets 503 session_limit (0 = none)"},
    {"--session-ttl", "ATTND_SESSION_TTL", "SEC", OPT_SECONDS, FIELD(session_ttl), 0, 86400 * 7,
     "300",
     "a session without an append for SEC ends and its memory goes back (0 = never; they still "
     "end for room: --max-sessions, the memory budget)"},
    {"--api-key-file", "ATTND_API_KEY_FILE", "PATH", OPT_KEY_FILE, 0, 0, 0, "none",
     "require Authorization: Bearer <a key in PATH>, one key per line (/healthz, /readyz and "
     "/v2/health/* stay open); a session belongs to the key that opened it"},
    {NULL, "ATTND_API_KEY", "KEY", OPT_KEY, 0, 0, 0, "none",
     "the API key itself, when no key file is given"},
    {"--cors-origins", "ATTND_CORS_ORIGINS", "LIST", OPT_CORS, 0, 0, 0, "none",
     "comma-separated origins allowed by CORS (e.g. https://a.example,http://localhost:3000), "
     "or *"},
    {"--log-format", "ATTND_LOG_FORMAT", "FORMAT", OPT_LOG_FORMAT, 0, 0, 0, "text",
     "text (key=value) or json (one object per line)"},
};

#define NOPTS (sizeof OPTS / sizeof OPTS[0])

void srv_config_usage(FILE *f) {
    fprintf(f, "Usage: attnd [FLAG VALUE | FLAG=VALUE]...\n"
               "\n"
               "attnd serves multi-head attention over HTTP (API v1: POST /v1/attention, POST "
               "/v1/sdpa,\nGET /v1/models, /v1/models/NAME, /healthz, /readyz, /metrics, "
               "/openapi.yaml, /;\nthe Open Inference Protocol (KServe v2): GET /v2, "
               "/v2/health/live|ready, /v2/models/NAME[/ready|/config|/stats],\n/v2/models/stats, "
               "POST /v2/models/NAME/infer, /v2/repository/index).\n"
               "Each flag has an environment twin; a flag wins over its twin.\n\n");
    for (size_t i = 0; i < NOPTS; i++) {
        const opt *o = &OPTS[i];
        char head[96];
        if (o->flag)
            snprintf(head, sizeof head, "%s %s", o->flag, o->metavar);
        else
            snprintf(head, sizeof head, "(environment only)");
        fprintf(f, "  %-26s env %s, default: %s\n      %s\n", head, o->env, o->dflt, o->help);
    }
    fprintf(f, "  (environment only)         env ATTND_BLAS_CORETYPE, default: auto\n"
               "      OpenBLAS kernel: auto (the best this CPU runs), keep (what OpenBLAS "
               "detected), or a core\n      name such as Haswell or SkylakeX\n"
               "  --health-check             GET /healthz of the daemon these settings describe; "
               "exit 0 if it\n      answers 200 (the container's HEALTHCHECK)\n"
               "  --help                     print this and exit\n"
               "  --version                  print the version and exit\n\n");
    fprintf(f, "SIZE is a byte count with an optional K, M or G suffix (powers of 1024); SEC "
               "may have decimals.\n"
               "A bad value stops the start with one line on stderr and exit status 2.\n"
               "Exit status: 0 after a clean shutdown (SIGTERM/SIGINT), 1 on a runtime failure "
               "or when\nthe drain timeout cut jobs short (they got 503), 2 on a bad flag or model "
               "file (one that is\nnot a regular file too), 128 + the signal (143 SIGTERM, 130 "
               "SIGINT) when one came before ready.\n");
}

/* ---- Value parsers ------------------------------------------------------------------------ */

static bool parse_u64(const char *s, unsigned long long *out, const char **rest) {
    if (!isdigit((unsigned char)s[0]))
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE)
        return false;
    *out = v;
    *rest = end;
    return true;
}

static int set_count(size_t *dst, const char *name, const char *v, double lo, double hi,
                     srv_error *err) {
    unsigned long long x;
    const char *rest;
    if (!parse_u64(v, &x, &rest) || *rest || (double)x < lo || (double)x > hi)
        return srv_fail(err, "%s: '%s' is not a whole number from %.0f to %.0f", name, v, lo, hi);
    *dst = (size_t)x;
    return SRV_OK;
}

static int set_bytes(size_t *dst, const char *name, const char *v, double lo, double hi,
                     srv_error *err) {
    unsigned long long x;
    const char *rest;
    int shift = -1;
    if (parse_u64(v, &x, &rest)) {
        if (!*rest || !strcasecmp(rest, "B"))
            shift = 0;
        else if (!strcasecmp(rest, "K") || !strcasecmp(rest, "KiB") || !strcasecmp(rest, "KB"))
            shift = 10;
        else if (!strcasecmp(rest, "M") || !strcasecmp(rest, "MiB") || !strcasecmp(rest, "MB"))
            shift = 20;
        else if (!strcasecmp(rest, "G") || !strcasecmp(rest, "GiB") || !strcasecmp(rest, "GB"))
            shift = 30;
    }
    if (shift < 0 || (shift > 0 && x > (unsigned long long)(SIZE_MAX >> shift)))
        return srv_fail(err,
                        "%s: '%s' is not a byte count (a whole number with an optional K, M or "
                        "G suffix)",
                        name, v);
    x <<= shift;
    if ((double)x < lo || (double)x > hi)
        return srv_fail(err, "%s: %s is out of range: give %.0f to %.0f bytes", name, v, lo, hi);
    *dst = (size_t)x;
    return SRV_OK;
}

static int set_seconds(double *dst, const char *name, const char *v, double lo, double hi,
                       srv_error *err) {
    errno = 0;
    char *end;
    double x = strtod(v, &end);
    if (!v[0] || isspace((unsigned char)v[0]) || *end || errno == ERANGE || !isfinite(x) ||
        x < lo || x > hi)
        return srv_fail(err, "%s: '%s' is not a number of seconds from %g to %g", name, v, lo, hi);
    *dst = x;
    return SRV_OK;
}

static int set_string(char *dst, size_t cap, const char *name, const char *v, srv_error *err) {
    size_t n = strlen(v);
    if (n == 0)
        return srv_fail(err, "%s: the value is empty", name);
    if (n >= cap)
        return srv_fail(err, "%s: the value is longer than %zu bytes", name, cap - 1);
    memcpy(dst, v, n + 1);
    return SRV_OK;
}

static int set_listen(srv_config *cfg, const char *name, const char *v, srv_error *err) {
    const char *host = v, *colon;
    size_t hlen;
    if (v[0] == '[') {
        const char *close = strchr(v, ']');
        if (!close || close[1] != ':')
            return srv_fail(err, "%s: '%s' is not HOST:PORT ([ADDRESS]:PORT for IPv6)", name, v);
        host = v + 1;
        hlen = (size_t)(close - host);
        colon = close + 1;
    } else {
        colon = strrchr(v, ':');
        if (!colon)
            return srv_fail(err, "%s: '%s' is not HOST:PORT (for example 127.0.0.1:8080)", name, v);
        hlen = (size_t)(colon - v);
    }
    if (hlen == 0)
        return srv_fail(err, "%s: '%s' has no host; use 0.0.0.0:PORT to listen everywhere", name,
                        v);
    if (hlen >= sizeof cfg->host)
        return srv_fail(err, "%s: the host is too long", name);
    unsigned long long port;
    const char *rest;
    if (!parse_u64(colon + 1, &port, &rest) || *rest || port > 65535)
        return srv_fail(err, "%s: '%s' has no port from 0 to 65535 after the colon", name, v);
    memcpy(cfg->host, host, hlen);
    cfg->host[hlen] = '\0';
    cfg->port = (uint16_t)port;
    return SRV_OK;
}

/* Appends one key (n bytes) to the keys: printable ASCII without spaces, as an HTTP
 * token68-ish credential; the keys are one buffer, each but the last followed by '\n'. */
static int set_key(srv_config *cfg, const char *name, const char *key, size_t n, srv_error *err) {
    if (n == 0)
        return srv_fail(err, "%s: the API key is empty", name);
    if (cfg->api_key_len + (cfg->api_key_len ? 1 : 0) + n >= sizeof cfg->api_key)
        return srv_fail(err, "%s: the API keys are longer than %zu bytes", name,
                        sizeof cfg->api_key - 1);
    for (size_t i = 0; i < n; i++)
        if (key[i] <= ' ' || key[i] > '~')
            return srv_fail(err,
                            "%s: the API key holds a space or a byte outside printable ASCII "
                            "(at offset %zu)",
                            name, i);
    if (cfg->api_key_len)
        cfg->api_key[cfg->api_key_len++] = '\n';
    memcpy(cfg->api_key + cfg->api_key_len, key, n);
    cfg->api_key_len += n;
    cfg->api_key[cfg->api_key_len] = '\0';
    cfg->api_keys++;
    return SRV_OK;
}

/* The keys of a key file: one per line, whitespace around each dropped, blank lines skipped. */
static int set_key_file(srv_config *cfg, const char *name, const char *path, srv_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return srv_fail(err, "%s: cannot open %s: %s", name, path, strerror(errno));
    char buf[KEY_FILE_MAX + 1];
    size_t n = fread(buf, 1, sizeof buf, f);
    bool bad = ferror(f);
    fclose(f);
    if (bad)
        return srv_fail(err, "%s: cannot read %s", name, path);
    if (n > KEY_FILE_MAX)
        return srv_fail(err, "%s: %s is larger than %d bytes; it should hold only the keys", name,
                        path, KEY_FILE_MAX);
    char what[160];
    snprintf(what, sizeof what, "%s (%s)", name, path);
    cfg->api_key_len = cfg->api_keys = 0;
    int rc = SRV_OK;
    for (size_t at = 0; at < n && rc == SRV_OK;) {
        size_t end = at;
        while (end < n && buf[end] != '\n')
            end++;
        size_t a = at, b = end;
        while (a < b && isspace((unsigned char)buf[a]))
            a++;
        while (b > a && isspace((unsigned char)buf[b - 1]))
            b--;
        if (b > a)
            rc = set_key(cfg, what, buf + a, b - a, err);
        at = end + 1;
    }
    if (rc == SRV_OK && cfg->api_keys == 0)
        rc = srv_fail(err, "%s: the API key is empty", what);
    memset(buf, 0, sizeof buf);
    return rc;
}

static int set_cors(srv_config *cfg, const char *name, const char *v, srv_error *err) {
    char out[sizeof cfg->cors_origins];
    size_t len = 0;
    const char *p = v;
    while (*p) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        const char *a = p, *b = end;
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        size_t n = (size_t)(b - a);
        if (n == 0)
            return srv_fail(err, "%s: an empty entry in '%s'", name, v);
        bool star = n == 1 && *a == '*';
        const char *sep = memchr(a, ':', n);
        bool origin = sep && b - sep > 3 && sep[1] == '/' && sep[2] == '/' &&
                      !memchr(sep + 3, '/', (size_t)(b - sep - 3));
        for (const char *c = a; c < b; c++)
            if (*c <= ' ' || *c > '~')
                origin = false;
        if (!star && !origin)
            return srv_fail(err,
                            "%s: '%.*s' is not an origin such as https://example.org or "
                            "http://localhost:3000 (no path, no trailing slash), nor *",
                            name, (int)n, a);
        if (len + n + 2 > sizeof out)
            return srv_fail(err, "%s: the list is longer than %zu bytes", name, sizeof out - 1);
        if (len)
            out[len++] = ',';
        memcpy(out + len, a, n);
        len += n;
        p = comma ? comma + 1 : end;
    }
    if (len == 0)
        return srv_fail(err, "%s: the list is empty", name);
    out[len] = '\0';
    memcpy(cfg->cors_origins, out, len + 1);
    return SRV_OK;
}

/* a + b and a * b, saturating at SIZE_MAX. */
static size_t sat_add(size_t a, size_t b) {
    size_t r;
    return __builtin_add_overflow(a, b, &r) ? SIZE_MAX : r;
}
static size_t sat_mul(size_t a, size_t b) {
    size_t r;
    return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

size_t srv_config_connections_max(const srv_config *cfg) {
    return sat_add(cfg->max_connections,
                   sat_mul(SRV_CONN_SLACK + SRV_CONN_SPARE, cfg->http_threads));
}

bool srv_config_origin_allowed(const srv_config *cfg, const char *origin, size_t len) {
    const char *p = cfg->cors_origins;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if ((n == 1 && p[0] == '*') || (n == len && strncasecmp(p, origin, n) == 0))
            return true;
        if (!comma)
            break;
        p = comma + 1;
    }
    return false;
}

/* Applies one option's value; name is the flag or variable, for messages. */
static int apply(srv_config *cfg, const opt *o, const char *name, const char *v, srv_error *err) {
    char *base = (char *)cfg;
    switch (o->kind) {
    case OPT_LISTEN:
        return set_listen(cfg, name, v, err);
    case OPT_COUNT:
        return set_count((size_t *)(base + o->offset), name, v, o->lo, o->hi, err);
    case OPT_BYTES:
        return set_bytes((size_t *)(base + o->offset), name, v, o->lo, o->hi, err);
    case OPT_UNFIT:
        if (strcmp(v, "refuse") && strcmp(v, "warn"))
            return srv_fail(err, "%s: '%s' is neither refuse nor warn", name, v);
        cfg->memory_unfit_warn = !strcmp(v, "warn");
        return SRV_OK;
    case OPT_SWITCH:
        if (strcmp(v, "on") && strcmp(v, "off"))
            return srv_fail(err, "%s: '%s' is neither on nor off", name, v);
        *(bool *)(base + o->offset) = !strcmp(v, "on");
        return SRV_OK;
    case OPT_MEMORY:
        if (!strcmp(v, "auto")) {
            *(size_t *)(base + o->offset) = 0;
            return SRV_OK;
        }
        return set_bytes((size_t *)(base + o->offset), name, v, o->lo, o->hi, err);
    case OPT_SECONDS:
        return set_seconds((double *)(base + o->offset), name, v, o->lo, o->hi, err);
    case OPT_STRING:
        return set_string(base + o->offset,
                          o->offset == FIELD(models_dir) ? sizeof cfg->models_dir
                                                         : sizeof cfg->default_model,
                          name, v, err);
    case OPT_KEY:
        return set_key(cfg, name, v, strlen(v), err);
    case OPT_KEY_FILE:
        return set_key_file(cfg, name, v, err);
    case OPT_CORS:
        return set_cors(cfg, name, v, err);
    case OPT_LOG_FORMAT:
        if (!strcmp(v, "text"))
            cfg->log_format = SRV_LOG_TEXT;
        else if (!strcmp(v, "json"))
            cfg->log_format = SRV_LOG_JSON;
        else
            return srv_fail(err, "%s: '%s' is not a log format; use text or json", name, v);
        return SRV_OK;
    }
    return srv_fail(err, "%s: unhandled option", name);
}

int srv_config_parse(srv_config *cfg, int argc, char **argv, srv_error *err) {
    /* The flags first, only to know which are given (the last of a repeated flag counts)... */
    const char *given[NOPTS] = {0};
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h"))
            return SRV_HELP;
        if (!strcmp(arg, "--version"))
            return SRV_VERSION_ASKED;
        size_t which = NOPTS;
        const char *value = NULL;
        for (size_t i = 0; i < NOPTS && which == NOPTS; i++) {
            const char *f = OPTS[i].flag;
            size_t n = f ? strlen(f) : 0;
            if (f && !strncmp(arg, f, n) && (arg[n] == '\0' || arg[n] == '=')) {
                which = i;
                value = arg[n] == '=' ? arg + n + 1 : NULL;
            }
        }
        if (which == NOPTS)
            return srv_fail(err, "unknown argument '%s' (attnd --help lists the flags)", arg);
        if (!value) {
            if (a + 1 >= argc)
                return srv_fail(err, "%s needs a value (%s)", OPTS[which].flag,
                                OPTS[which].metavar);
            value = argv[++a];
        }
        given[which] = value;
    }
    /* ...then each option from its flag, or else from its environment twin. A key file, from
     * either, wins over ATTND_API_KEY. */
    bool key_file = false;
    for (size_t i = 0; i < NOPTS; i++) {
        const opt *o = &OPTS[i];
        const char *v = given[i], *name = o->flag;
        if (!v) {
            v = getenv(o->env);
            name = o->env;
            if (v && !*v)
                v = NULL; /* an empty variable counts as unset */
        }
        if (!v || (o->kind == OPT_KEY && key_file))
            continue;
        if (apply(cfg, o, name, v, err) != SRV_OK)
            return SRV_ERR;
        cfg->given |=
            o->offset == FIELD(max_body_bytes) && o->kind == OPT_BYTES     ? SRV_GIVEN_MAX_BODY
            : o->offset == FIELD(max_job_bytes) && o->kind == OPT_BYTES    ? SRV_GIVEN_MAX_JOB
            : o->offset == FIELD(max_unsent_bytes) && o->kind == OPT_BYTES ? SRV_GIVEN_MAX_UNSENT
            : o->offset == FIELD(max_connections) && o->kind == OPT_COUNT
                ? SRV_GIVEN_MAX_CONNECTIONS
            : o->offset == FIELD(threads) && o->kind == OPT_COUNT ? SRV_GIVEN_THREADS
                                                                  : 0u;
        key_file |= o->kind == OPT_KEY_FILE;
    }
    if (cfg->pool_threads == AUTO_SIZE)
        cfg->pool_threads = cfg->threads - 1;
    if (cfg->parse_threads == 0)
        cfg->parse_threads = cfg->threads;
    return SRV_OK;
}
