/* metrics_render.c - the Prometheus text exposition of the counters of metrics.c (attnd_* names,
 * and process_* in the Prometheus client libraries' convention, checked by promtool), and the
 * renderings the /metrics replies share (srv_metrics_exposition). */
#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include "metrics_internal.h"

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

static void header(api_buf *b, const char *name, const char *type, const char *help) {
    out(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One histogram's series, its labels given as text ("op=\"sdpa\",model=\"demo\"", or ""). */
static void render_histogram(api_buf *b, const char *name, const char *labels, const histogram *h) {
    const char *sep = labels[0] ? "," : "";
    uint64_t cum = 0;
    for (size_t i = 0; i <= NBUCKETS; i++) {
        cum += load(&h->counts[i]);
        if (i < NBUCKETS)
            out(b, "%s_bucket{%s%sle=\"%g\"} %" PRIu64 "\n", name, labels, sep, BUCKETS[i], cum);
        else
            out(b, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, sep, cum);
    }
    out(b, "%s_sum{%s} %.9f\n", name, labels, (double)load(&h->sum_ns) * 1e-9);
    out(b, "%s_count{%s} %" PRIu64 "\n", name, labels, cum);
}

static uint64_t hist_count(const histogram *h) {
    uint64_t n = 0;
    for (size_t i = 0; i <= NBUCKETS; i++)
        n += load(&h->counts[i]);
    return n;
}

/* The name of model slot i (NULL for the slots of no model) and its op. */
static const char *slot_name(const srv_metrics *m, size_t i, size_t *op) {
    *op = i == m->nmodels || i == m->nmodels + 2 ? 1 : 0;
    if (i < m->nmodels)
        return api_model_describe(api_registry_at(m->models, i)).name;
    return i == m->nmodels ? API_V2_SDPA_MODEL : NULL;
}

/* The labels of model slot i: op, and model when it has one (model names are file stems and
 * built-in names: no quote, backslash or newline to escape, but they are escaped all the same). */
static void slot_labels(const srv_metrics *m, size_t i, char *buf, size_t cap) {
    size_t op;
    const char *name = slot_name(m, i, &op);
    int n = snprintf(buf, cap, "op=\"%s\"", OP_NAMES[op]);
    if (!name || n < 0 || (size_t)n >= cap)
        return;
    size_t w = (size_t)n;
    const char *pre = ",model=\"";
    for (const char *p = pre; *p && w + 1 < cap; p++)
        buf[w++] = *p;
    for (const char *p = name; *p && w + 3 < cap; p++) {
        if (*p == '"' || *p == '\\' || *p == '\n') {
            buf[w++] = '\\';
            buf[w++] = *p == '\n' ? 'n' : *p;
        } else {
            buf[w++] = *p;
        }
    }
    if (w + 1 < cap)
        buf[w++] = '"';
    buf[w] = '\0';
}

/* A histogram of every model slot: the two slots of no model always (so that each op has a
 * series from the start), a model's once it has observations. which picks the histogram. */
static void render_slots(api_buf *b, const srv_metrics *m, const char *name, const char *help,
                         size_t which) {
    header(b, name, "histogram", help);
    size_t n = m->slots ? m->nmodels + 3 : 0;
    char labels[400];
    for (size_t i = 0; i < n; i++) {
        const model_slot *ms = &m->slots[i];
        const histogram *h = which == 0   ? &ms->queue
                             : which == 1 ? &ms->compute
                             : which == 2 ? &ms->parse
                                          : &ms->encode;
        if (i < m->nmodels + 1 && hist_count(h) == 0)
            continue;
        slot_labels(m, i, labels, sizeof labels);
        render_histogram(b, name, labels, h);
    }
    for (size_t o = 0; !m->slots && o < NOPS; o++) {
        const model_slot *ms = &m->none[o];
        snprintf(labels, sizeof labels, "op=\"%s\"", OP_NAMES[o]);
        render_histogram(b, name, labels,
                         which == 0   ? &ms->queue
                         : which == 1 ? &ms->compute
                         : which == 2 ? &ms->parse
                                      : &ms->encode);
    }
}

/* A counter or gauge of every model slot (which: 0 executions, 1 pending, 2 rows), or of the two
 * slots of no model while the models are not set. */
static void render_per_slot(api_buf *b, const srv_metrics *m, const char *name, const char *type,
                            const char *help, int which) {
    header(b, name, type, help);
    size_t n = m->slots ? m->nmodels + 3 : 0;
    char labels[400];
    for (size_t i = 0; i < n + (m->slots ? 0 : NOPS); i++) {
        const model_slot *ms = m->slots ? &m->slots[i] : &m->none[i];
        if (m->slots)
            slot_labels(m, i, labels, sizeof labels);
        else
            snprintf(labels, sizeof labels, "op=\"%s\"", OP_NAMES[i]);
        long long v = which == 0 ? (long long)load(&ms->executions)
                      : which == 1
                          ? (long long)atomic_load_explicit(&ms->pending, memory_order_relaxed)
                          : (long long)load(&ms->rows);
        out(b, "%s{%s} %lld\n", name, labels, v < 0 ? 0 : v);
    }
}

static void render_sizes(api_buf *b, const char *name, const char *help, const size_histogram *hs) {
    header(b, name, "histogram", help);
    for (size_t r = 0; r < SRV_ROUTE_COUNT; r++) {
        const size_histogram *h = &hs[r];
        uint64_t cum = 0, counts[NSIZES + 1];
        for (size_t i = 0; i <= NSIZES; i++)
            cum += counts[i] = load(&h->counts[i]);
        if (cum == 0 && !srv_routes[r].job)
            continue;
        cum = 0;
        for (size_t i = 0; i <= NSIZES; i++) {
            cum += counts[i];
            if (i < NSIZES)
                out(b, "%s_bucket{route=\"%s\",le=\"%g\"} %" PRIu64 "\n", name, srv_routes[r].name,
                    SIZES[i], cum);
            else
                out(b, "%s_bucket{route=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name,
                    srv_routes[r].name, cum);
        }
        out(b, "%s_sum{route=\"%s\"} %" PRIu64 "\n", name, srv_routes[r].name, load(&h->sum));
        out(b, "%s_count{route=\"%s\"} %" PRIu64 "\n", name, srv_routes[r].name, cum);
    }
}

/* process_*: the Prometheus client libraries' process collector, read from /proc now. */
static void render_process(api_buf *b, const srv_metrics *m, double start_fallback) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        header(b, "process_cpu_seconds_total", "counter",
               "Total user and system CPU time spent in seconds.");
        out(b, "process_cpu_seconds_total %.6f\n",
            (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
                (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6);
    }
    unsigned long long vsize_pages = 0, rss_pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%llu %llu", &vsize_pages, &rss_pages) == 2) {
        double page = (double)sysconf(_SC_PAGESIZE);
        header(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
        out(b, "process_resident_memory_bytes %.0f\n", (double)rss_pages * page);
        header(b, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
        out(b, "process_virtual_memory_bytes %.0f\n", (double)vsize_pages * page);
    }
    if (f)
        fclose(f);
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        size_t fds = 0;
        struct dirent *de;
        while ((de = readdir(d)) != NULL)
            fds += de->d_name[0] != '.';
        closedir(d);
        header(b, "process_open_fds", "gauge", "Number of open file descriptors.");
        out(b, "process_open_fds %zu\n", fds > 0 ? fds - 1 : 0); /* less the one reading them */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        header(b, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
        if (rl.rlim_cur == RLIM_INFINITY)
            out(b, "process_max_fds +Inf\n");
        else
            out(b, "process_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
    }
    header(b, "process_start_time_seconds", "gauge",
           "Start time of the process since unix epoch in seconds.");
    out(b, "process_start_time_seconds %.2f\n", m->start_wall > 0 ? m->start_wall : start_fallback);
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

/* The decode sessions: open, their bytes, appends, and ends by reason. */
static void sessions_render(api_buf *b, const api_sessions_stats *s) {
    header(b, "attnd_sessions", "gauge",
           "Decode sessions open now (POST /v1/sessions and v2 sequences), of --max-sessions.");
    out(b, "attnd_sessions %zu\n", s->open);
    header(b, "attnd_sessions_max", "gauge", "Decode sessions held at most (--max-sessions).");
    out(b, "attnd_sessions_max %zu\n", s->max);
    header(b, "attnd_session_bytes", "gauge",
           "Bytes the open sessions hold (their key/value caches and inline parameters), in the "
           "job memory budget.");
    out(b, "attnd_session_bytes %zu\n", s->bytes);
    header(b, "attnd_sessions_opened_total", "counter", "Decode sessions opened.");
    out(b, "attnd_sessions_opened_total %llu\n", (unsigned long long)s->opened);
    header(b, "attnd_session_appends_total", "counter",
           "Appends computed on decode sessions (POST /v1/sessions/{id}, v2 sequence requests).");
    out(b, "attnd_session_appends_total %llu\n", (unsigned long long)s->appends);
    header(b, "attnd_session_evictions_total", "counter",
           "Decode sessions ended, by reason: ttl (idle for --session-ttl), lru (the least "
           "recently used idle one, for a new one at --max-sessions), budget (idle, its memory "
           "taken for what the memory budget could not otherwise fit), deleted (DELETE, or a v2 "
           "sequence's end or restart).");
    for (int r = 0; r < API_SESSION_END_COUNT; r++)
        out(b, "attnd_session_evictions_total{reason=\"%s\"} %llu\n", api_session_end_names[r],
            (unsigned long long)s->ended[r]);
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
    header(b, "attnd_http_request_duration_seconds", "histogram",
           "Time from a request's headers to its reply sent, by route and status code (other: "
           "any status not listed, or no reply that went out whole).");
    for (size_t r = 0; r < SRV_ROUTE_COUNT; r++) {
        for (size_t s = 0; s < NSTATUS; s++) {
            const histogram *h = &m->durations[r][s];
            if (hist_count(h) == 0 && !(s == 0 && srv_routes[r].job))
                continue;
            char labels[160];
            if (s < NSTATUS - 1)
                snprintf(labels, sizeof labels, "route=\"%s\",code=\"%u\"", srv_routes[r].name,
                         STATUSES[s]);
            else
                snprintf(labels, sizeof labels, "route=\"%s\",code=\"other\"", srv_routes[r].name);
            render_histogram(b, "attnd_http_request_duration_seconds", labels, h);
        }
    }
    render_sizes(b, "attnd_http_request_size_bytes",
                 "Request body bytes received (decoded, as read), per request, by route.",
                 m->in_sizes);
    render_sizes(b, "attnd_http_response_size_bytes",
                 "Response body bytes sent (as coded), per request, by route.", m->out_sizes);
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

    header(b, "attnd_jobs_shared_total", "counter",
           "Job requests answered with a copy of the result of an identical request in flight, "
           "not computed again (--share-jobs).");
    out(b, "attnd_jobs_shared_total %" PRIu64 "\n", load(&m->shared));

    /* Per model: requests by outcome (every model, from 0), their durations, the job steps. */
    size_t nslots = m->slots ? m->nmodels + 3 : 0;
    char labels[400];
    header(b, "attnd_model_requests_total", "counter",
           "Requests of a model's jobs (a registry model's, or v2's sdpa) answered, by outcome: "
           "success (200) or failure (any other status, or no reply that went out whole).");
    for (size_t i = 0; i < nslots && i <= m->nmodels; i++) {
        slot_labels(m, i, labels, sizeof labels);
        out(b, "attnd_model_requests_total{%s,outcome=\"success\"} %" PRIu64 "\n", labels,
            load(&m->slots[i].ok));
        out(b, "attnd_model_requests_total{%s,outcome=\"failure\"} %" PRIu64 "\n", labels,
            load(&m->slots[i].failed));
    }
    header(b, "attnd_model_request_duration_seconds", "histogram",
           "Time from a request's headers to its reply sent, for a model's jobs, by model.");
    for (size_t i = 0; i < nslots && i <= m->nmodels; i++) {
        if (hist_count(&m->slots[i].duration) == 0)
            continue;
        slot_labels(m, i, labels, sizeof labels);
        render_histogram(b, "attnd_model_request_duration_seconds", labels, &m->slots[i].duration);
    }
    header(b, "attnd_job_flops_total", "counter",
           "Floating-point operations of the jobs computed, by operation and model.");
    for (size_t i = 0; i < nslots; i++) {
        if (i < m->nmodels + 1 && load(&m->slots[i].flops) == 0)
            continue;
        slot_labels(m, i, labels, sizeof labels);
        out(b, "attnd_job_flops_total{%s} %" PRIu64 "\n", labels, load(&m->slots[i].flops));
    }
    for (size_t o = 0; !m->slots && o < NOPS; o++)
        out(b, "attnd_job_flops_total{op=\"%s\"} %" PRIu64 "\n", OP_NAMES[o],
            load(&m->none[o].flops));
    /* Per model as Triton counts them (executions, pending requests), and rows as vLLM counts
     * tokens: every model from the start (a model's series with 0 until its first job), and the
     * two slots of no model. */
    render_per_slot(b, m, "attnd_model_executions_total", "counter",
                    "Runs of the compute for a model's jobs (a batch of several jobs is one), by "
                    "operation and model.",
                    0);
    render_per_slot(b, m, "attnd_model_pending_requests", "gauge",
                    "Jobs waiting in the queue for a worker now, by operation and model.", 1);
    render_per_slot(b, m, "attnd_model_rows_total", "counter",
                    "Query rows (N x L) of the jobs computed, by operation and model.", 2);
    render_slots(b, m, "attnd_job_queue_seconds",
                 "Time jobs waited in the queue for a worker, by operation and model.", 0);
    render_slots(b, m, "attnd_job_compute_seconds",
                 "Time workers spent computing jobs (api_job_run), by operation and model.", 1);
    render_slots(b, m, "attnd_job_parse_seconds",
                 "Time parsing a request's body into a job (checks and tensors decoded), by "
                 "operation and model.",
                 2);
    render_slots(b, m, "attnd_job_encode_seconds",
                 "Time writing a computed job's response body, by operation and model.", 3);

    render_counts(b, "attnd_batch_jobs",
                  "Jobs per batch a worker ran (1 for a job run alone; --batch-window-us).",
                  &m->batch_jobs, BATCH_JOBS, NBATCH_JOBS);
    render_counts(b, "attnd_batch_rows",
                  "Query rows (N*L) per batch a worker ran (at most --max-batch-tokens).",
                  &m->batch_rows, BATCH_ROWS, NBATCH_ROWS);

    header(b, "attnd_open_connections", "gauge",
           "Connections open, by place: live (within --max-connections) or spare (past it, for "
           "one probe); like process_*, up to 1 s old in a shared rendering.");
    out(b, "attnd_open_connections{place=\"live\"} %zu\n", g->conns.live);
    out(b, "attnd_open_connections{place=\"spare\"} %zu\n", g->conns.spare);
    header(b, "attnd_connections_closed_total", "counter",
           "Connections attnd shut down, by reason: evicted at --max-connections (idle, reading "
           "its request, or sending to a client below the send rule's rate), a spare place given "
           "to a newer connection, --read-timeout, and the send rule.");
    static const char *const CUTS[SRV_CUT_COUNT] = {"evicted_idle",    "evicted_reading",
                                                    "evicted_sending", "spare_full",
                                                    "read_timeout",    "send_timeout"};
    for (size_t i = 0; i < SRV_CUT_COUNT; i++)
        out(b, "attnd_connections_closed_total{reason=\"%s\"} %" PRIu64 "\n", CUTS[i],
            g->conns.cuts[i]);
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
    header(b, "attnd_job_memory_budget_bytes", "gauge",
           "The job memory budget (--max-memory less the connection places, zlib states, /metrics "
           "renderings and --max-unsent-bytes): request bodies, jobs' arenas, batch workspaces "
           "and large replies other than jobs' hold at most this much at once.");
    out(b, "attnd_job_memory_budget_bytes %zu\n",
        g->mem.budget_bytes == SIZE_MAX ? (size_t)0 : g->mem.budget_bytes);
    header(b, "attnd_job_memory_charged_bytes", "gauge",
           "Bytes of the job memory budget in use now (blocks of every size).");
    out(b, "attnd_job_memory_charged_bytes %zu\n", g->mem.charged_bytes);
    header(b, "attnd_job_memory_blocks_total", "counter",
           "Blocks the job memory cache handed out, by where they came from (reused: a cached "
           "block; mapped: a new one), cached blocks it returned to the system (trimmed: unused "
           "for 2 s; evicted: to stay within the memory bound), and blocks refused for the "
           "budget (refused: a body or job so refused gets 503 memory_budget; a batch's "
           "workspace, its jobs run one by one instead).");
    out(b, "attnd_job_memory_blocks_total{event=\"reused\"} %llu\n",
        (unsigned long long)g->mem.hits);
    out(b, "attnd_job_memory_blocks_total{event=\"mapped\"} %llu\n",
        (unsigned long long)g->mem.misses);
    out(b, "attnd_job_memory_blocks_total{event=\"trimmed\"} %llu\n",
        (unsigned long long)g->mem.trimmed);
    out(b, "attnd_job_memory_blocks_total{event=\"evicted\"} %llu\n",
        (unsigned long long)g->mem.evicted);
    out(b, "attnd_job_memory_blocks_total{event=\"refused\"} %llu\n",
        (unsigned long long)g->mem.refused);
    sessions_render(b, &g->sessions);
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
    render_process(b, m, g->start_time);
}

/* ---- Shared renderings (the /metrics replies) ---------------------------------------------- */

/* The bounds. At most SRV_METRICS_RENDERINGS renderings exist at once, the one being written
 * included (it is written only when fewer are alive, under m->mu, so one at a time), each of the
 * size of one exposition, plus, while one is written, the copy its buffer may leave behind as it
 * grows (it is cut to its length once written). A reply holds one reference and no bytes of its
 * own. Only the newest rendering ever gains references, so an older one is held only by replies
 * queued before a newer one was made, and each is freed when the last of them ends: a reply
 * ends when its client has read it, or when the send rule cuts it (--send-timeout, and its
 * bytes at --min-send-rate). So when all the renderings are held and the newest is shared past
 * SRV_METRICS_INTERVAL_S, its data is at most as old as the longest such reply lets it be
 * (with --min-send-rate 0, no reply is cut, and then only the memory is bounded). */

struct srv_exposition {
    atomic_size_t refs;  /* the replies', and m->newest's while it is the newest */
    srv_metrics *m;      /* whose alive count it is in */
    api_buf buf;         /* the exposition */
    double made;         /* srv_now() when its writing began */
    uint_fast64_t count; /* m->changes then */
    srv_gauges g;        /* the gauges it shows */
};

static bool gauges_equal(const srv_gauges *a, const srv_gauges *b) {
    return a->queue_depth == b->queue_depth && a->queue_capacity == b->queue_capacity &&
           a->jobs_in_flight == b->jobs_in_flight && a->workers == b->workers &&
           a->pool_threads == b->pool_threads && a->unsent_bytes == b->unsent_bytes &&
           a->unsent_budget == b->unsent_budget && a->mem.in_use_bytes == b->mem.in_use_bytes &&
           a->mem.in_use_blocks == b->mem.in_use_blocks &&
           a->mem.cached_bytes == b->mem.cached_bytes &&
           a->mem.cached_blocks == b->mem.cached_blocks && a->mem.hits == b->mem.hits &&
           a->mem.misses == b->mem.misses && a->mem.trimmed == b->mem.trimmed &&
           a->mem.evicted == b->mem.evicted && a->mem.charged_bytes == b->mem.charged_bytes &&
           a->mem.budget_bytes == b->mem.budget_bytes && a->mem.refused == b->mem.refused &&
           a->sessions.open == b->sessions.open && a->sessions.bytes == b->sessions.bytes &&
           a->sessions.opened == b->sessions.opened && a->sessions.appends == b->sessions.appends &&
           !memcmp(a->sessions.ended, b->sessions.ended, sizeof a->sessions.ended) &&
           !memcmp(a->conns.cuts, b->conns.cuts, sizeof a->conns.cuts) && a->ready == b->ready &&
           a->draining == b->draining && a->start_time == b->start_time;
}

void srv_exposition_release(srv_exposition *e) {
    if (!e || atomic_fetch_sub(&e->refs, 1) != 1)
        return;
    /* The last reference: e is not the newest (that one holds m->newest's), so no one can take
     * a new one. */
    atomic_fetch_sub(&e->m->alive, 1);
    api_buf_free(&e->buf);
    free(e);
}

const char *srv_exposition_data(const srv_exposition *e, size_t *len) {
    *len = e->buf.len;
    return e->buf.data ? e->buf.data : "";
}

/* A new rendering with two references (the caller's and m->newest's), counted alive; NULL when
 * out of memory. Under m->mu. */
static srv_exposition *render_new(srv_metrics *m, const srv_gauges *g, double t,
                                  uint_fast64_t count) {
    srv_exposition *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    srv_metrics_render(m, g, &e->buf);
    if (e->buf.failed) {
        api_buf_free(&e->buf);
        free(e);
        return NULL;
    }
    if (!e->buf.block && e->buf.len > 0 && e->buf.len < e->buf.cap) { /* the length, no more */
        char *p = realloc(e->buf.data, e->buf.len);
        if (p) {
            e->buf.data = p;
            e->buf.cap = e->buf.len;
        }
    }
    atomic_init(&e->refs, 2);
    e->m = m;
    e->made = t;
    e->count = count;
    e->g = *g;
    atomic_fetch_add(&m->alive, 1);
    return e;
}

srv_exposition *srv_metrics_exposition(srv_metrics *m, const srv_gauges *g) {
    pthread_mutex_lock(&m->mu);
    double t = srv_now();
    uint_fast64_t count = atomic_load_explicit(&m->changes, memory_order_acquire);
    srv_exposition *e = m->newest;
    if (e && t - e->made < SRV_METRICS_INTERVAL_S && e->count == count && gauges_equal(&e->g, g))
        goto share;
    if (e && atomic_load(&e->refs) == 1) { /* held by no reply: it goes before a new one comes */
        m->newest = NULL;
        srv_exposition_release(e);
        e = NULL;
    }
    if (e && atomic_load(&m->alive) >= SRV_METRICS_RENDERINGS)
        goto share; /* every rendering is held: the newest again, however old */
    srv_exposition *n = render_new(m, g, t, count);
    if (!n) {
        if (e)
            goto share;
        pthread_mutex_unlock(&m->mu);
        return NULL;
    }
    m->newest = n;
    pthread_mutex_unlock(&m->mu);
    srv_exposition_release(e); /* m->newest's reference to the one before (NULL: none) */
    return n;
share:
    atomic_fetch_add(&e->refs, 1);
    pthread_mutex_unlock(&m->mu);
    return e;
}
