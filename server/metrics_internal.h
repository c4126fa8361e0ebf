/* metrics_internal.h - private to server/metrics.c (the counters) and server/metrics_render.c
 * (their Prometheus exposition and the shared renderings of /metrics): the counters' layout, the
 * buckets, the label names, and the small readers both use. */
#ifndef ATTND_METRICS_INTERNAL_H
#define ATTND_METRICS_INTERNAL_H

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "server.h"

/* The statuses counted one by one; anything else goes to the last slot, labelled "other". */
static const unsigned STATUSES[] = {200, 201, 204, 304, 400, 401, 403, 404,
                                    405, 409, 413, 415, 500, 501, 503};
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

/* Bucket bounds of the request and response size histograms, in bytes. */
static const double SIZES[] = {256,     1024,    4096,     16384,    65536,    262144,
                               1048576, 4194304, 16777216, 67108864, 268435456};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

typedef struct size_histogram {
    atomic_uint_fast64_t counts[NSIZES + 1]; /* per bucket, not cumulative; last is +Inf */
    atomic_uint_fast64_t sum;
} size_histogram;

/* What is counted per model slot (see the file's opening comment). */
typedef struct model_slot {
    histogram queue, compute, parse, encode; /* the job's steps */
    histogram duration;                      /* its requests, from arrival to the reply sent */
    atomic_uint_fast64_t flops;
    atomic_uint_fast64_t ok, failed;       /* requests answered 200, and otherwise */
    atomic_uint_fast64_t ok_ns, failed_ns; /* their durations */
    atomic_uint_fast64_t executions;       /* runs: a batch of several jobs is one */
    atomic_uint_fast64_t last_ms;          /* Unix ms of the last request answered */
    atomic_uint_fast64_t rows;             /* query rows (N L) of the jobs computed */
    atomic_int_fast64_t pending;           /* jobs in the queue for a worker now */
} model_slot;

struct srv_metrics {
    atomic_uint_fast64_t requests[SRV_ROUTE_COUNT][NSTATUS];
    histogram durations[SRV_ROUTE_COUNT][NSTATUS]; /* end to end, by route and status */
    size_histogram in_sizes[SRV_ROUTE_COUNT], out_sizes[SRV_ROUTE_COUNT];
    atomic_uint_fast64_t bytes_in[SRV_ROUTE_COUNT];
    atomic_uint_fast64_t bytes_out[SRV_ROUTE_COUNT];
    atomic_uint_fast64_t rejects[SRV_REJECT_COUNT];
    atomic_uint_fast64_t shared; /* job requests answered with a copy (--share-jobs) */
    count_histogram batch_jobs;  /* buckets BATCH_JOBS */
    count_histogram batch_rows;  /* buckets BATCH_ROWS */
    /* Set by srv_metrics_set_models before the server takes jobs (ready is stored after it
     * with release, and read with acquire before any job): slots has nmodels + 3 records, the
     * last two always there (the slots of no model, before any model is known). */
    const api_registry *models;
    size_t nmodels;
    model_slot *slots;
    model_slot none[2]; /* no model: attention, sdpa (used while slots is NULL) */
    double start_wall;  /* the process's start, Unix seconds; 0 = unknown */
    /* Updates counted (added with release after the update: a reader that loads it with acquire
     * sees every update it counts); a /metrics request's own is not one. */
    atomic_uint_fast64_t changes;
    /* The shared renderings: mu guards newest and orders the writing of new ones; alive rises
     * under mu only, and falls wherever a rendering's last reference goes. */
    pthread_mutex_t mu;
    srv_exposition *newest; /* NULL, or the rendering new replies get; holds a reference */
    atomic_size_t alive;    /* renderings not yet freed, newest included */
};

static const char *const REJECT_NAMES[SRV_REJECT_COUNT] = {"queue_full", "deadline", "draining",
                                                           "reply_budget", "memory_budget"};

static const char *const OP_NAMES[NOPS] = {"attention", "sdpa"};

static inline uint64_t load(const atomic_uint_fast64_t *a) {
    return (uint64_t)atomic_load_explicit(a, memory_order_relaxed);
}

#endif
