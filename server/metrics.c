/* metrics.c - the daemon's counters and histograms, updated with relaxed atomics from any
 * thread (no lock on the request path: an observation is two or three atomic adds), and their
 * Prometheus text exposition (attnd_* names, and process_* in the Prometheus client libraries'
 * convention, checked by promtool); the Open Inference Protocol's statistics come from the same
 * counters.
 *
 * Models: a job on a registry model, or on v2's "sdpa", is counted under its model (the model
 * label); a job with none (inline or params.init parameters, POST /v1/sdpa) only under its op.
 * The slots: 0 .. n-1 the registry's models, n "sdpa", n+1 and n+2 no model (attention, sdpa).
 *
 * The /metrics replies share renderings (srv_metrics_exposition): each update also adds one to
 * a change count, so that a rendering is shared only while nothing it shows has changed (or
 * while SRV_METRICS_RENDERINGS are held by replies), and a scrape after a job, a refusal or a
 * gauge's move sees it at once. */
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

/* The process's start, Unix seconds, from /proc (as the Prometheus clients read it); 0 when
 * it cannot be read. */
static double process_start(void) {
    double boot = 0, ticks = (double)sysconf(_SC_CLK_TCK);
    char line[256];
    FILE *f = fopen("/proc/stat", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "btime ", 6))
            boot = atof(line + 6);
    if (f)
        fclose(f);
    char stat[1024] = "";
    f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(stat, 1, sizeof stat - 1, f) : 0;
    if (f)
        fclose(f);
    stat[n] = '\0';
    const char *p = strrchr(stat, ')'); /* the command may hold spaces */
    /* after ") ": state is field 3; starttime is field 22 */
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    if (!p || boot <= 0 || ticks <= 0)
        return 0;
    return boot + atof(p + 1) / ticks;
}

srv_metrics *srv_metrics_create(srv_error *err) {
    srv_metrics *m = calloc(1, sizeof *m); /* all-zero bytes are valid zero atomics here */
    if (!m) {
        srv_fail(err, "out of memory for the metrics");
        return NULL;
    }
    m->start_wall = process_start();
    if (pthread_mutex_init(&m->mu, NULL) != 0) {
        free(m);
        srv_fail(err, "could not make the metrics' lock");
        return NULL;
    }
    return m;
}

int srv_metrics_set_models(srv_metrics *m, const api_registry *models, srv_error *err) {
    size_t n = api_registry_count(models);
    model_slot *slots = calloc(n + 3, sizeof *slots);
    if (!slots)
        return srv_fail(err, "out of memory for the metrics of %zu models", n);
    m->models = models;
    m->nmodels = n;
    m->slots = slots;
    return SRV_OK;
}

size_t srv_metrics_held_max(size_t models) {
    size_t per = 0, all = 0;
    if (__builtin_mul_overflow(models, (size_t)40 << 10, &per) ||
        __builtin_add_overflow(per, (size_t)700 << 10, &per) ||
        __builtin_mul_overflow(per, (size_t)SRV_METRICS_RENDERINGS + 1, &all))
        return SIZE_MAX;
    return all;
}

void srv_metrics_destroy(srv_metrics *m) {
    if (!m)
        return;
    srv_exposition_release(m->newest);
    pthread_mutex_destroy(&m->mu);
    free(m->slots);
    free(m);
}

/* One more update counted (after it, so that a rendering that sees the count sees the update). */
static void changed(srv_metrics *m) {
    atomic_fetch_add_explicit(&m->changes, 1, memory_order_release);
}

static size_t status_slot(unsigned status) {
    for (size_t i = 0; i < NSTATUS - 1; i++)
        if (STATUSES[i] == status)
            return i;
    return NSTATUS - 1;
}

/* The slot of a job of op on model (api_job_model_index). */
static model_slot *slot_of(srv_metrics *m, api_op op, size_t model) {
    size_t none = op == API_OP_SDPA ? 1 : 0;
    if (!m->slots)
        return &m->none[none];
    return &m->slots[model <= m->nmodels ? model : m->nmodels + 1 + none];
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

static void observe_size(size_histogram *h, size_t bytes) {
    size_t b = 0;
    while (b < NSIZES && (double)bytes > SIZES[b])
        b++;
    atomic_fetch_add_explicit(&h->counts[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum, bytes, memory_order_relaxed);
}

static uint64_t wall_ms(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

void srv_metrics_request(srv_metrics *m, srv_route route, unsigned status, size_t bytes_in,
                         size_t bytes_out, double seconds, size_t model) {
    if ((unsigned)route >= SRV_ROUTE_COUNT)
        route = SRV_ROUTE_UNKNOWN;
    size_t s = status_slot(status);
    atomic_fetch_add_explicit(&m->requests[route][s], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->bytes_in[route], bytes_in, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->bytes_out[route], bytes_out, memory_order_relaxed);
    observe(&m->durations[route][s], seconds);
    observe_size(&m->in_sizes[route], bytes_in);
    observe_size(&m->out_sizes[route], bytes_out);
    if (m->slots && model < m->nmodels + 1) { /* a model's requests */
        model_slot *ms = &m->slots[model];
        uint_fast64_t ns = seconds > 0 ? (uint_fast64_t)(seconds * 1e9) : 0;
        observe(&ms->duration, seconds);
        atomic_fetch_add_explicit(status == 200 ? &ms->ok : &ms->failed, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(status == 200 ? &ms->ok_ns : &ms->failed_ns, ns,
                                  memory_order_relaxed);
        atomic_store_explicit(&ms->last_ms, wall_ms(), memory_order_relaxed);
    }
    if (route != SRV_ROUTE_METRICS) /* so that scrapes alone share a rendering */
        changed(m);
}

void srv_metrics_parse(srv_metrics *m, api_op op, size_t model, double seconds) {
    observe(&slot_of(m, op, model)->parse, seconds);
    changed(m);
}

void srv_metrics_pending(srv_metrics *m, api_op op, size_t model, int delta) {
    if (!m)
        return;
    atomic_fetch_add_explicit(&slot_of(m, op, model)->pending, delta, memory_order_relaxed);
    changed(m);
}

void srv_metrics_job(srv_metrics *m, api_op op, size_t model, double queue_s, double compute_s,
                     double encode_s, double flops, size_t rows) {
    model_slot *ms = slot_of(m, op, model);
    atomic_fetch_add_explicit(&ms->rows, rows, memory_order_relaxed);
    observe(&ms->queue, queue_s);
    observe(&ms->compute, compute_s);
    observe(&ms->encode, encode_s);
    if (flops > 0)
        atomic_fetch_add_explicit(&ms->flops, (uint_fast64_t)flops, memory_order_relaxed);
    changed(m);
}

static void observe_count(count_histogram *h, const double *bounds, size_t nb, size_t v) {
    size_t b = 0;
    while (b < nb && (double)v > bounds[b])
        b++;
    atomic_fetch_add_explicit(&h->counts[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum, v, memory_order_relaxed);
}

void srv_metrics_batch(srv_metrics *m, api_op op, size_t model, size_t jobs, size_t rows) {
    observe_count(&m->batch_jobs, BATCH_JOBS, NBATCH_JOBS, jobs);
    observe_count(&m->batch_rows, BATCH_ROWS, NBATCH_ROWS, rows);
    atomic_fetch_add_explicit(&slot_of(m, op, model)->executions, 1, memory_order_relaxed);
    changed(m);
}

void srv_metrics_reject(srv_metrics *m, srv_reject why) {
    if ((unsigned)why < SRV_REJECT_COUNT)
        atomic_fetch_add_explicit(&m->rejects[why], 1, memory_order_relaxed);
    changed(m);
}

void srv_metrics_shared(srv_metrics *m) {
    atomic_fetch_add_explicit(&m->shared, 1, memory_order_relaxed);
    changed(m);
}

static api_v2_duration hist_duration(const histogram *h) {
    api_v2_duration d = {0, load(&h->sum_ns)};
    for (size_t i = 0; i <= NBUCKETS; i++)
        d.count += load(&h->counts[i]);
    return d;
}

void srv_metrics_v2_stats(const srv_metrics *m, api_v2_model_stats *out) {
    for (size_t i = 0; i <= m->nmodels; i++) {
        const model_slot *ms = m->slots ? &m->slots[i] : &m->none[0];
        out[i] = (api_v2_model_stats){
            .last_inference_ms = load(&ms->last_ms),
            .inference_count = load(&ms->ok),
            .execution_count = load(&ms->executions),
            .success = {load(&ms->ok), load(&ms->ok_ns)},
            .fail = {load(&ms->failed), load(&ms->failed_ns)},
            .queue = hist_duration(&ms->queue),
            .compute_input = hist_duration(&ms->parse),
            .compute_infer = hist_duration(&ms->compute),
            .compute_output = hist_duration(&ms->encode),
        };
        if (!m->slots)
            out[i] = (api_v2_model_stats){0};
    }
}
