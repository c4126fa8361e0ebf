/* metrics.c - the daemon's counters and histograms, updated with relaxed atomics from any
 * thread, and their Prometheus text exposition (attnd_* names, checked by promtool). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

/* The statuses counted one by one; anything else goes to the last slot, labelled "other". */
static const unsigned STATUSES[] = {200, 204, 400, 401, 403, 404, 405, 413, 415, 500, 501, 503};
#define NSTATUS (sizeof STATUSES / sizeof STATUSES[0] + 1)

/* Histogram bucket bounds in seconds (the +Inf bucket is implicit). */
static const double BUCKETS[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                 0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
#define NBUCKETS (sizeof BUCKETS / sizeof BUCKETS[0])
#define NOPS     2 /* API_OP_ATTENTION, API_OP_SDPA */

/* Bucket bounds of the batch histograms: jobs per batch, and query rows per batch. */
static const double BATCH_JOBS[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
static const double BATCH_ROWS[] = {16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
#define NBATCH_JOBS (sizeof BATCH_JOBS / sizeof BATCH_JOBS[0])
#define NBATCH_ROWS (sizeof BATCH_ROWS / sizeof BATCH_ROWS[0])

/* A histogram of whole numbers, per bucket (not cumulative); the last slot is +Inf. */
typedef struct count_histogram {
    atomic_uint_fast64_t counts[NBATCH_ROWS + 1];
    atomic_uint_fast64_t sum;
} count_histogram;

typedef struct histogram {
    atomic_uint_fast64_t counts[NBUCKETS + 1]; /* per bucket, not cumulative; last is +Inf */
    atomic_uint_fast64_t sum_ns;
} histogram;

struct srv_metrics {
    atomic_uint_fast64_t requests[SRV_ROUTE_COUNT][NSTATUS];
    atomic_uint_fast64_t bytes_in[SRV_ROUTE_COUNT];
    atomic_uint_fast64_t bytes_out[SRV_ROUTE_COUNT];
    atomic_uint_fast64_t rejects[SRV_REJECT_COUNT];
    atomic_uint_fast64_t flops[NOPS];
    histogram queue[NOPS];
    histogram compute[NOPS];
    count_histogram batch_jobs; /* buckets BATCH_JOBS */
    count_histogram batch_rows; /* buckets BATCH_ROWS */
};

static const char *const REJECT_NAMES[SRV_REJECT_COUNT] = {"queue_full", "deadline", "draining",
                                                           "reply_budget"};

static const char *const OP_NAMES[NOPS] = {"attention", "sdpa"};

srv_metrics *srv_metrics_create(srv_error *err) {
    srv_metrics *m = calloc(1, sizeof *m); /* all-zero bytes are valid zero atomics here */
    if (!m)
        srv_fail(err, "out of memory for the metrics");
    return m;
}

void srv_metrics_destroy(srv_metrics *m) {
    free(m);
}

static size_t status_slot(unsigned status) {
    for (size_t i = 0; i < NSTATUS - 1; i++)
        if (STATUSES[i] == status)
            return i;
    return NSTATUS - 1;
}

void srv_metrics_request(srv_metrics *m, srv_route route, unsigned status, size_t bytes_in,
                         size_t bytes_out) {
    if ((unsigned)route >= SRV_ROUTE_COUNT)
        route = SRV_ROUTE_UNKNOWN;
    atomic_fetch_add_explicit(&m->requests[route][status_slot(status)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->bytes_in[route], bytes_in, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->bytes_out[route], bytes_out, memory_order_relaxed);
}

static void observe(histogram *h, double seconds) {
    if (!(seconds >= 0))
        seconds = 0;
    size_t b = 0;
    while (b < NBUCKETS && seconds > BUCKETS[b])
        b++;
    atomic_fetch_add_explicit(&h->counts[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, (uint_fast64_t)(seconds * 1e9), memory_order_relaxed);
}

void srv_metrics_job(srv_metrics *m, api_op op, double queue_s, double compute_s, double flops) {
    size_t o = op == API_OP_SDPA ? 1 : 0;
    observe(&m->queue[o], queue_s);
    observe(&m->compute[o], compute_s);
    if (flops > 0)
        atomic_fetch_add_explicit(&m->flops[o], (uint_fast64_t)flops, memory_order_relaxed);
}

static void observe_count(count_histogram *h, const double *bounds, size_t nb, size_t v) {
    size_t b = 0;
    while (b < nb && (double)v > bounds[b])
        b++;
    atomic_fetch_add_explicit(&h->counts[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum, v, memory_order_relaxed);
}

void srv_metrics_batch(srv_metrics *m, size_t jobs, size_t rows) {
    observe_count(&m->batch_jobs, BATCH_JOBS, NBATCH_JOBS, jobs);
    observe_count(&m->batch_rows, BATCH_ROWS, NBATCH_ROWS, rows);
}

void srv_metrics_reject(srv_metrics *m, srv_reject why) {
    if ((unsigned)why < SRV_REJECT_COUNT)
        atomic_fetch_add_explicit(&m->rejects[why], 1, memory_order_relaxed);
}

/* ---- Exposition --------------------------------------------------------------------------- */

static void out(api_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void out(api_buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        api_buf_append(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static uint64_t load(const atomic_uint_fast64_t *a) {
    return (uint64_t)atomic_load_explicit(a, memory_order_relaxed);
}

static void header(api_buf *b, const char *name, const char *type, const char *help) {
    out(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void render_histograms(api_buf *b, const char *name, const char *help, const histogram *hs) {
    header(b, name, "histogram", help);
    for (size_t o = 0; o < NOPS; o++) {
        const histogram *h = &hs[o];
        uint64_t cum = 0;
        for (size_t i = 0; i <= NBUCKETS; i++) {
            cum += load(&h->counts[i]);
            if (i < NBUCKETS)
                out(b, "%s_bucket{op=\"%s\",le=\"%g\"} %" PRIu64 "\n", name, OP_NAMES[o],
                    BUCKETS[i], cum);
            else
                out(b, "%s_bucket{op=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name, OP_NAMES[o], cum);
        }
        out(b, "%s_sum{op=\"%s\"} %.9f\n", name, OP_NAMES[o], (double)load(&h->sum_ns) * 1e-9);
        out(b, "%s_count{op=\"%s\"} %" PRIu64 "\n", name, OP_NAMES[o], cum);
    }
}

static void render_counts(api_buf *b, const char *name, const char *help, const count_histogram *h,
                          const double *bounds, size_t nb) {
    header(b, name, "histogram", help);
    uint64_t cum = 0;
    for (size_t i = 0; i <= nb; i++) {
        cum += load(&h->counts[i]);
        if (i < nb)
            out(b, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name, bounds[i], cum);
        else
            out(b, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, cum);
    }
    out(b, "%s_sum %" PRIu64 "\n", name, load(&h->sum));
    out(b, "%s_count %" PRIu64 "\n", name, cum);
}

void srv_metrics_render(const srv_metrics *m, const srv_gauges *g, api_buf *b) {
    header(b, "attnd_http_requests_total", "counter",
           "HTTP requests answered, by route and status code.");
    for (size_t r = 0; r < SRV_ROUTE_COUNT; r++) {
        for (size_t s = 0; s < NSTATUS; s++) {
            uint64_t v = load(&m->requests[r][s]);
            /* Every route shows its 200 series, so that rates start from a sample. */
            if (v == 0 && !(s == 0 && r != SRV_ROUTE_UNKNOWN))
                continue;
            if (s < NSTATUS - 1)
                out(b, "attnd_http_requests_total{route=\"%s\",code=\"%u\"} %" PRIu64 "\n",
                    srv_routes[r].name, STATUSES[s], v);
            else
                out(b, "attnd_http_requests_total{route=\"%s\",code=\"other\"} %" PRIu64 "\n",
                    srv_routes[r].name, v);
        }
    }
    header(b, "attnd_http_request_body_bytes_total", "counter",
           "Request body bytes received, by route.");
    for (size_t r = 0; r < SRV_ROUTE_COUNT; r++)
        out(b, "attnd_http_request_body_bytes_total{route=\"%s\"} %" PRIu64 "\n",
            srv_routes[r].name, load(&m->bytes_in[r]));
    header(b, "attnd_http_response_body_bytes_total", "counter",
           "Response body bytes sent, by route.");
    for (size_t r = 0; r < SRV_ROUTE_COUNT; r++)
        out(b, "attnd_http_response_body_bytes_total{route=\"%s\"} %" PRIu64 "\n",
            srv_routes[r].name, load(&m->bytes_out[r]));
    header(b, "attnd_jobs_rejected_total", "counter",
           "Jobs answered 503, by reason (all before computing, except reply_budget: also a "
           "computed reply that found the budget full).");
    for (size_t i = 0; i < SRV_REJECT_COUNT; i++)
        out(b, "attnd_jobs_rejected_total{reason=\"%s\"} %" PRIu64 "\n", REJECT_NAMES[i],
            load(&m->rejects[i]));
    header(b, "attnd_job_flops_total", "counter",
           "Floating-point operations of the jobs computed, by operation.");
    for (size_t o = 0; o < NOPS; o++)
        out(b, "attnd_job_flops_total{op=\"%s\"} %" PRIu64 "\n", OP_NAMES[o], load(&m->flops[o]));
    render_histograms(b, "attnd_job_queue_seconds",
                      "Time jobs waited in the queue for a worker, by operation.", m->queue);
    render_histograms(b, "attnd_job_compute_seconds",
                      "Time workers spent computing jobs (api_job_run), by operation.", m->compute);

    render_counts(b, "attnd_batch_jobs",
                  "Jobs per batch a worker ran (1 for a job run alone; --batch-window-us).",
                  &m->batch_jobs, BATCH_JOBS, NBATCH_JOBS);
    render_counts(b, "attnd_batch_rows",
                  "Query rows (N*L) per batch a worker ran (at most --max-batch-tokens).",
                  &m->batch_rows, BATCH_ROWS, NBATCH_ROWS);

    header(b, "attnd_queue_depth", "gauge", "Jobs waiting in the queue for a worker.");
    out(b, "attnd_queue_depth %zu\n", g->queue_depth);
    header(b, "attnd_queue_capacity", "gauge", "Most jobs the queue holds (--max-queue).");
    out(b, "attnd_queue_capacity %zu\n", g->queue_capacity);
    header(b, "attnd_jobs_in_flight", "gauge", "Jobs a worker is computing now.");
    out(b, "attnd_jobs_in_flight %zu\n", g->jobs_in_flight);
    header(b, "attnd_unsent_reply_bytes", "gauge",
           "Bytes of job replies not yet sent: reserved at their bound from admission, then the "
           "capacity of the buffers held until their clients read them.");
    out(b, "attnd_unsent_reply_bytes %zu\n", g->unsent_bytes);
    header(b, "attnd_unsent_reply_budget_bytes", "gauge",
           "Most bytes of unsent replies reserved and held (--max-unsent-bytes).");
    out(b, "attnd_unsent_reply_budget_bytes %zu\n", g->unsent_budget);
    header(b, "attnd_job_memory_bytes", "gauge",
           "Bytes of the job memory cache's blocks (arenas, workspaces, bodies of 128 KiB and "
           "more): in use, or cached for reuse (returned to the system after 2 s unused).");
    out(b, "attnd_job_memory_bytes{state=\"in_use\"} %zu\n", g->mem.in_use_bytes);
    out(b, "attnd_job_memory_bytes{state=\"cached\"} %zu\n", g->mem.cached_bytes);
    header(b, "attnd_job_memory_blocks_total", "counter",
           "Blocks the job memory cache handed out, by where they came from (reused: a cached "
           "block; mapped: a new one), and cached blocks it returned to the system (trimmed: "
           "unused for 2 s; evicted: to stay within the memory bound).");
    out(b, "attnd_job_memory_blocks_total{event=\"reused\"} %llu\n",
        (unsigned long long)g->mem.hits);
    out(b, "attnd_job_memory_blocks_total{event=\"mapped\"} %llu\n",
        (unsigned long long)g->mem.misses);
    out(b, "attnd_job_memory_blocks_total{event=\"trimmed\"} %llu\n",
        (unsigned long long)g->mem.trimmed);
    out(b, "attnd_job_memory_blocks_total{event=\"evicted\"} %llu\n",
        (unsigned long long)g->mem.evicted);
    header(b, "attnd_workers", "gauge", "Worker threads (--threads).");
    out(b, "attnd_workers %zu\n", g->workers);
    header(b, "attnd_pool_threads", "gauge", "Helper threads of the compute pool.");
    out(b, "attnd_pool_threads %zu\n", g->pool_threads);
    header(b, "attnd_ready", "gauge", "1 when attnd accepts jobs, 0 while starting or draining.");
    out(b, "attnd_ready %d\n", g->ready ? 1 : 0);
    header(b, "attnd_draining", "gauge", "1 after SIGTERM or SIGINT, while jobs drain.");
    out(b, "attnd_draining %d\n", g->draining ? 1 : 0);
    header(b, "attnd_start_time_seconds", "gauge", "Start time of the process, Unix seconds.");
    out(b, "attnd_start_time_seconds %.3f\n", g->start_time);
    header(b, "attnd_build_info", "gauge", "Always 1; the version is a label.");
    out(b, "attnd_build_info{version=\"%s\"} 1\n", SRV_VERSION);
}
