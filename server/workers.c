/* workers.c - the bounded job queue and the worker threads that compute its jobs.
 *
 * How the workers and libattn's pool share the cores
 * --------------------------------------------------
 * Chosen: --threads workers (default: the cores), each popping jobs from one FIFO queue, plus ONE
 * attn_pool of --pool-threads helpers (default: threads - 1) shared by all workers. A job is
 * planned for attn_pool_slots() = helpers + 1 slots and runs on its worker plus whichever
 * helpers are free: the pool serves the oldest run with unclaimed tasks, and libattn runs phases
 * under 2 MFLOP on the caller alone, so small jobs never wake a helper.
 *
 * Why: a lone large request gets every core (the pool), a flood of small ones gets one job per
 * core with no hand-offs (the workers), and nothing has to be retuned between the two. Under
 * full load up to 2 x cores - 1 threads are runnable; measured, that costs nothing visible.
 *
 * Measured on the 2-core dev machine (AMD EPYC Zen 3, OpenBLAS Zen kernels), 2026-11-30:
 * libattn alone (a throwaway harness: W3 = N 4, L 512, E 768, H 12, key_lengths; W1 = N 1, L 16,
 * E 64, H 4, per-head weights; 3 interleaved rounds), ms per job / jobs per second:
 *
 *     layout (workers:helpers)        W3 one at a time   W3 two at once    W1 two at once
 *     1:0                             167-181 ms         -                 -
 *     1:1                              99-102 ms         10.0 /s           -
 *     2:0                             -                   9.6-11.9 /s      67k-98k /s
 *     2:1 (chosen)                    (= 1:1)             9.6-11.4 /s      78k-104k /s
 *
 * Through HTTP (tests/server/measure_threads.py: W3 base64 in and out; wrk with 64 connections
 * for W1 JSON and for N 1, L 32, E 256, H 8 base64; best of 3 interleaved rounds; the clients
 * share the 2 cores, so floods vary by +-10% from run to run):
 *
 *     layout   W3 latency (compute)   W3 pairs     W1 flood          W2-small flood
 *     2:1      151 ms (109 ms)        6.1 jobs/s   7.6k req/s        1.6k req/s
 *     2:0      225 ms (186 ms)        7.3 jobs/s   8.4k req/s        1.6k req/s
 *     1:1      147 ms (104 ms)        6.6 jobs/s   7.3k req/s        1.5k req/s
 *
 * 2:0 (no pool) makes a lone large request 1.5-1.7x slower; 1:1 (one worker) serialises the
 * response encoding, the largest per-request cost of small jobs (W1: parse 0.11 ms, compute
 * 0.08 ms, encode 0.22 ms), and gains nothing on large ones. The pair and flood differences
 * through HTTP are inside the noise (libattn alone shows equal throughput). --threads and
 * --pool-threads override the choice.
 *
 * Queue: FIFO, at most --max-queue waiting jobs (submit refuses beyond, and the HTTP side answers
 * 503 at once). A job's deadline is checked when a worker pops it: past it, the job is answered
 * 503 and never computed. Shutdown: close() refuses new jobs, wait_idle() lets the queue drain,
 * expire() answers what is still queued, abandon() answers what is still running.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

typedef struct worker_arg {
    srv_workers *w;
    size_t index;
} worker_arg;

struct srv_workers {
    pthread_mutex_t mu;
    pthread_cond_t work; /* a job was queued, or stop */
    pthread_cond_t idle; /* a worker finished a job */
    srv_job *head, *tail;
    size_t queued, running, max_queue;
    bool closed, stop;
    attn_pool *pool;
    srv_metrics *metrics;
    size_t nworkers, started;
    srv_job **current; /* (nworkers): the job each worker runs; NULL when idle or abandoned */
    worker_arg *args;  /* (nworkers) */
    pthread_t *threads;
};

/* A finished job's result, built on the worker before the job is handed back. */
typedef struct result {
    unsigned status;
    char code[32];
    api_buf body;
    double queue_ms, compute_ms, encode_ms;
} result;

static void result_error(result *r, const api_error *e) {
    r->status = e->status ? (unsigned)e->status : 500;
    snprintf(r->code, sizeof r->code, "%s", e->code);
    api_buf_reset(&r->body);
    api_error_body(e, &r->body);
}

static void hand_back(srv_job *job, result *r) {
    job->status = r->status;
    memcpy(job->code, r->code, sizeof job->code);
    job->body = r->body;
    job->queue_ms = r->queue_ms;
    job->compute_ms = r->compute_ms;
    job->encode_ms = r->encode_ms;
    job->done(job);
}

/* Computes one popped job into r. The job itself is not touched: it may be abandoned (and
 * freed by its owner) meanwhile. */
static void run(srv_workers *w, api_job *aj, api_op op, double t_queued, double deadline,
                result *r) {
    double t0 = srv_now();
    r->queue_ms = (t0 - t_queued) * 1e3;
    api_error e = {0};
    if (t0 > deadline) {
        api_fail(&e, 503, "deadline_exceeded", NULL,
                 "the job waited %.0f ms for a worker and passed its deadline (--request-timeout)"
                 " before it could start; retry later",
                 r->queue_ms);
        srv_metrics_reject(w->metrics, SRV_REJECT_DEADLINE);
        result_error(r, &e);
        return;
    }
    if (api_job_run(aj, w->pool, &e) != 0) {
        r->compute_ms = (srv_now() - t0) * 1e3;
        result_error(r, &e);
        return;
    }
    double t1 = srv_now();
    r->compute_ms = (t1 - t0) * 1e3;
    srv_metrics_job(w->metrics, op, r->queue_ms * 1e-3, r->compute_ms * 1e-3, api_job_flops(aj));
    if (api_job_respond(aj, r->queue_ms, r->compute_ms, &r->body, &e) != 0 || r->body.failed) {
        if (!e.status)
            api_fail(&e, 500, "out_of_memory", NULL, "out of memory writing the response");
        result_error(r, &e);
        return;
    }
    r->encode_ms = (srv_now() - t1) * 1e3;
    r->status = 200;
}

static void *worker_main(void *arg) {
    worker_arg *a = arg;
    srv_workers *w = a->w;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->head && !w->stop)
            pthread_cond_wait(&w->work, &w->mu);
        if (!w->head)
            break;
        srv_job *job = w->head;
        w->head = job->next;
        if (!w->head)
            w->tail = NULL;
        w->queued--;
        w->running++;
        w->current[a->index] = job;
        /* Everything the computation needs is copied now, under the lock. */
        api_job *aj = job->job;
        job->job = NULL;
        api_op op = job->op;
        double t_queued = job->t_queued, deadline = job->deadline;
        pthread_mutex_unlock(&w->mu);

        result r = {0};
        run(w, aj, op, t_queued, deadline, &r);
        api_job_destroy(aj);

        pthread_mutex_lock(&w->mu);
        bool mine = w->current[a->index] == job; /* false when abandoned meanwhile */
        w->current[a->index] = NULL;
        pthread_mutex_unlock(&w->mu);
        if (mine)
            hand_back(job, &r);
        else
            api_buf_free(&r.body);
        pthread_mutex_lock(&w->mu);
        w->running--;
        pthread_cond_broadcast(&w->idle);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

srv_workers *srv_workers_create(size_t nworkers, size_t max_queue, attn_pool *pool,
                                srv_metrics *metrics, srv_error *err) {
    if (nworkers == 0 || max_queue == 0) {
        srv_fail(err, "the worker pool needs at least one thread and a queue of at least one");
        return NULL;
    }
    srv_workers *w = calloc(1, sizeof *w);
    if (!w) {
        srv_fail(err, "out of memory for the worker pool");
        return NULL;
    }
    w->current = calloc(nworkers, sizeof *w->current);
    w->args = calloc(nworkers, sizeof *w->args);
    w->threads = calloc(nworkers, sizeof *w->threads);
    if (!w->current || !w->args || !w->threads) {
        srv_fail(err, "out of memory for %zu workers", nworkers);
        goto err;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->work, &ca);
    pthread_cond_init(&w->idle, &ca);
    pthread_condattr_destroy(&ca);
    w->max_queue = max_queue;
    w->pool = pool;
    w->metrics = metrics;
    w->nworkers = nworkers;
    for (size_t i = 0; i < nworkers; i++) {
        w->args[i] = (worker_arg){w, i};
        int rc = pthread_create(&w->threads[i], NULL, worker_main, &w->args[i]);
        if (rc != 0) {
            srv_fail(err, "cannot start worker thread %zu of %zu: %s", i + 1, nworkers,
                     strerror(rc));
            srv_workers_destroy(w);
            return NULL;
        }
        w->started = i + 1;
    }
    return w;
err:
    free(w->current);
    free(w->args);
    free(w->threads);
    free(w);
    return NULL;
}

int srv_workers_submit(srv_workers *w, srv_job *job) {
    pthread_mutex_lock(&w->mu);
    int rc = SRV_OK;
    if (w->closed) {
        rc = SRV_CLOSED;
    } else if (w->queued >= w->max_queue) {
        rc = SRV_QUEUE_FULL;
    } else {
        job->next = NULL;
        job->t_queued = srv_now();
        if (w->tail)
            w->tail->next = job;
        else
            w->head = job;
        w->tail = job;
        w->queued++;
        pthread_cond_signal(&w->work);
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void srv_workers_stats(srv_workers *w, size_t *queued, size_t *running) {
    pthread_mutex_lock(&w->mu);
    *queued = w->queued;
    *running = w->running;
    pthread_mutex_unlock(&w->mu);
}

void srv_workers_close(srv_workers *w) {
    pthread_mutex_lock(&w->mu);
    w->closed = true;
    pthread_mutex_unlock(&w->mu);
}

bool srv_workers_wait_idle(srv_workers *w, double deadline) {
    pthread_mutex_lock(&w->mu);
    while (w->queued || w->running) {
        double left = deadline - srv_now();
        if (left <= 0)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double wait = left < 0.1 ? left : 0.1;
        long ns = ts.tv_nsec + (long)(wait * 1e9);
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&w->idle, &w->mu, &ts);
    }
    bool idle = !w->queued && !w->running;
    pthread_mutex_unlock(&w->mu);
    return idle;
}

static void answer_503(srv_job *job, const char *msg) {
    api_error e = {0};
    api_fail(&e, 503, "draining", NULL, "%s", msg);
    result r = {0};
    result_error(&r, &e);
    hand_back(job, &r);
}

size_t srv_workers_expire(srv_workers *w) {
    pthread_mutex_lock(&w->mu);
    w->closed = true;
    srv_job *list = w->head;
    w->head = w->tail = NULL;
    w->queued = 0;
    pthread_cond_broadcast(&w->idle);
    pthread_mutex_unlock(&w->mu);
    size_t n = 0;
    while (list) {
        srv_job *job = list;
        list = job->next;
        api_job_destroy(job->job);
        job->job = NULL;
        srv_metrics_reject(w->metrics, SRV_REJECT_DRAINING);
        answer_503(job, "attnd is shutting down and its drain timeout (--drain-timeout) passed "
                        "before this job could start; retry on another instance");
        n++;
    }
    return n;
}

size_t srv_workers_abandon(srv_workers *w) {
    size_t n = 0;
    for (;;) {
        srv_job *job = NULL;
        pthread_mutex_lock(&w->mu);
        for (size_t i = 0; i < w->nworkers && !job; i++) {
            job = w->current[i];
            w->current[i] = NULL;
        }
        pthread_mutex_unlock(&w->mu);
        if (!job)
            return n;
        srv_metrics_reject(w->metrics, SRV_REJECT_DRAINING);
        answer_503(job, "attnd is shutting down and its drain timeout (--drain-timeout) passed "
                        "before this job finished; retry on another instance");
        n++;
    }
}

void srv_workers_destroy(srv_workers *w) {
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->work);
    pthread_mutex_unlock(&w->mu);
    for (size_t i = 0; i < w->started; i++)
        pthread_join(w->threads[i], NULL);
    pthread_cond_destroy(&w->idle);
    pthread_cond_destroy(&w->work);
    pthread_mutex_destroy(&w->mu);
    free(w->current);
    free(w->args);
    free(w->threads);
    free(w);
}
