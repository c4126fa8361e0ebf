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
 * The measurements behind the choice: bench/RESULTS.md, "The workers: threads, pool and the
 * batch window". --threads and --pool-threads override it.
 *
 * Dynamic batching (--batch-window-us, --max-batch-tokens)
 * ---------------------------------------------------------
 * A worker that pops a POST /v1/attention job also takes every queued job api_jobs_batchable with
 * it (the same registry model, or the same params.init), in queue order, up to --max-batch-tokens
 * query rows, and runs them as one api_jobs_run: one projection GEMM over all their rows, the
 * attention per job, one out-projection GEMM; each job keeps its own masks, weights and errors.
 * While other jobs are in flight it waits for more, until --batch-window-us after the first job
 * was queued; a job that finds the server idle never waits, and no job waits past the window.
 * Other workers leave the jobs such a collecting worker will take alone (they pop the first job
 * nobody claims), so a flood forms a few large batches rather than many small ones. SDPA jobs,
 * and jobs with inline parameter tensors, always run alone. --batch-window-us 0 turns it off.
 *
 * Why 200 us and 4096 rows: bench/RESULTS.md, the same section.
 *
 * Tiny jobs (--inline-max-flops)
 * ------------------------------
 * A job of at most --inline-max-flops (usage.flops; parameters that cost nothing more to make:
 * api_job_params_cheap; a reply bound of at most SRV_INLINE_MAX_REPLY, since FLOPs do not count
 * the encoding: a job with key_lengths [1] has few FLOPs and full-size weight maps) that finds
 * no job queued is not queued at all: srv_workers_run_inline computes it on the thread that parsed
 * it (the HTTP thread, or a parse thread for a large or coded body), and it is answered at once. A
 * hand-off costs a worker's wake-up and the connection's suspend and resume, several system calls
 * that on a job of W1's size (0.6 MFLOP) cost more than the job; bench/RESULTS.md, "Tiny jobs on
 * the HTTP thread", has the measurement. The default bound, 2 MFLOP, is the one below which libattn
 * runs a phase on its caller rather than wake a helper (ATTN_INLINE_FLOPS). With work queued, a
 * tiny job queues too: it never overtakes a job waiting in the queue (it may pass jobs that a
 * worker has taken into a batch it is still collecting, by at most --batch-window-us), and queued
 * jobs still form batches. It counts as running while it computes.
 *
 * Queue: FIFO, at most --max-queue waiting jobs (submit refuses beyond, and the HTTP side answers
 * 503 at once). A job out of the queue keeps its place while it is a batch's second or later
 * job, or a tiny job computing on the thread that parsed it: places then bound every job in memory
 * but the first of each worker's batch, so --max-queue + --threads jobs at most (SECURITY.md). A
 * job's deadline is checked when a worker pops it: past it, the job is answered 503 and never
 * computed. Shutdown: close() refuses new jobs, wait_idle() lets the queue drain, expire() answers
 * what is still queued, abandon() answers what is still running.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

/* Most jobs one batch takes (api_jobs_run runs larger batches in chunks of this size too). */
#define MAX_BATCH 256

/* A finished job's result, built on the worker before the job is handed back. */
typedef struct result {
    unsigned status;
    char code[32];
    api_error error; /* status 0 on 200 */
    api_buf body;
    double queue_ms, compute_ms, encode_ms;
} result;

/* One job of the batch a worker runs: what it copied from the srv_job under the lock. */
typedef struct batch_item {
    srv_job *job;
    api_job *aj;
    api_op op;
    size_t model;
    double t_queued, deadline;
    bool own_deadline;
    result r;
} batch_item;

typedef struct worker_arg {
    srv_workers *w;
    size_t index;
    batch_item *items; /* (MAX_BATCH) */
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
    srv_job **current; /* (nworkers): the first job of the batch each worker runs, the rest
                          chained by next; NULL when idle or abandoned */
    worker_arg *args;  /* (nworkers) */
    pthread_t *threads;
    /* batching (srv_workers_set_batching) */
    double window;          /* seconds; 0 = off */
    size_t max_tokens;      /* query rows per batch */
    size_t max_bytes;       /* a batch's workspace cap */
    const api_job **leader; /* (nworkers): the first job of the batch a worker is collecting */
    double inline_flops;    /* srv_workers_set_inline; 0 = off */
    size_t held; /* queue places held by jobs out of the queue: a batch's jobs after its first,
                    and jobs srv_workers_run_inline is running */
};

static void result_error(result *r, const api_error *e) {
    r->status = e->status ? (unsigned)e->status : 500;
    snprintf(r->code, sizeof r->code, "%s", e->code);
    r->error = *e;
    r->error.status = (int)r->status;
    api_buf_reset(&r->body);
    api_error_body(e, &r->body);
}

/* Moves a result into its job. */
static void take_result(srv_job *job, result *r) {
    job->status = r->status;
    memcpy(job->code, r->code, sizeof job->code);
    job->error = r->error;
    job->body = r->body;
    job->queue_ms = r->queue_ms;
    job->compute_ms = r->compute_ms;
    job->encode_ms = r->encode_ms;
}

static void hand_back(srv_job *job, result *r) {
    take_result(job, r);
    job->done(job);
}

/* The error result of a job that passed its deadline in the queue: --request-timeout's, or the
 * request's own (own: v2's timeout parameter). */
static void result_expired(srv_workers *w, result *r, bool own) {
    api_error e = {0};
    api_fail(&e, 503, "deadline_exceeded", NULL,
             own ? "the job waited %.0f ms for a worker and passed the request's own deadline (its "
                   "timeout parameter) before it could start; retry later, or allow more time"
                 : "the job waited %.0f ms for a worker and passed its deadline "
                   "(--request-timeout) before it could start; retry later",
             r->queue_ms);
    srv_metrics_reject(w->metrics, SRV_REJECT_DEADLINE);
    result_error(r, &e);
}

/* Computes the popped jobs it[0, n) into their results, as one batch when batching is on (a
 * job alone otherwise). The srv_jobs themselves are not touched: they may be abandoned (and
 * freed by their owners) meanwhile. */
static void run(srv_workers *w, batch_item *it, size_t n) {
    double t0 = srv_now();
    api_job *jobs[MAX_BATCH];
    api_error errs[MAX_BATCH];
    size_t m = 0, rows = 0;
    for (size_t i = 0; i < n; i++) {
        it[i].r.queue_ms = (t0 - it[i].t_queued) * 1e3;
        if (t0 > it[i].deadline) {
            result_expired(w, &it[i].r, it[i].own_deadline);
            continue;
        }
        errs[m] = (api_error){0};
        jobs[m++] = it[i].aj;
        rows += api_job_rows(it[i].aj);
    }
    if (m == 0)
        return;
    if (w->window > 0)
        api_jobs_run(jobs, m, w->pool, w->max_bytes, errs);
    else
        api_job_run(jobs[0], w->pool, &errs[0]);
    double t1 = srv_now();
    for (size_t i = 0; i < n; i++) /* the batch's model: that of any job computed in it */
        if (!it[i].r.status) {
            srv_metrics_batch(w->metrics, it[i].op, it[i].model, m, rows);
            break;
        }
    for (size_t i = 0, k = 0; i < n; i++) {
        result *r = &it[i].r;
        if (r->status) /* expired */
            continue;
        api_error *e = &errs[k++];
        r->compute_ms = (t1 - t0) * 1e3;
        if (e->status) {
            result_error(r, e);
            continue;
        }
        double t2 = srv_now();
        if (api_job_respond(it[i].aj, r->queue_ms, r->compute_ms, &r->body, e) != 0 ||
            r->body.failed) {
            if (!e->status)
                api_fail(e, 500, "out_of_memory", NULL, "out of memory writing the response");
            result_error(r, e);
            continue;
        }
        r->encode_ms = (srv_now() - t2) * 1e3;
        r->status = 200;
        srv_metrics_job(w->metrics, it[i].op, it[i].model, r->queue_ms * 1e-3, r->compute_ms * 1e-3,
                        r->encode_ms * 1e-3, api_job_flops(it[i].aj), api_job_rows(it[i].aj));
    }
}

/* Unlinks job from the queue; prev is the job before it (NULL at the head). */
static void unlink_job(srv_workers *w, srv_job *prev, srv_job *job) {
    if (prev)
        prev->next = job->next;
    else
        w->head = job->next;
    if (w->tail == job)
        w->tail = prev;
    w->queued--;
    srv_metrics_pending(w->metrics, job->op, job->model, -1);
}

/* True when another worker is collecting a batch that job belongs in. */
static bool claimed(const srv_workers *w, const srv_job *job) {
    for (size_t i = 0; i < w->nworkers; i++)
        if (w->leader[i] && api_jobs_batchable(w->leader[i], job->job))
            return true;
    return false;
}

/* The first queued job no collecting worker has claimed, unlinked; NULL when there is none. */
static srv_job *pop_unclaimed(srv_workers *w) {
    for (srv_job *prev = NULL, *job = w->head; job; prev = job, job = job->next)
        if (w->window == 0 || !claimed(w, job)) {
            unlink_job(w, prev, job);
            return job;
        }
    return NULL;
}

/* With the lock held: makes job (already unlinked from the queue) item n of the batch of the
 * worker at index: copies what the computation needs, chains it for srv_workers_abandon and
 * counts it as running, so that a worker collecting a batch is never taken for idle. */
static void batch_add(srv_workers *w, size_t index, batch_item *it, size_t n, srv_job *job) {
    it[n] = (batch_item){.job = job,
                         .aj = job->job,
                         .op = job->op,
                         .model = job->model,
                         .t_queued = job->t_queued,
                         .deadline = job->deadline,
                         .own_deadline = job->own_deadline};
    job->job = NULL;
    job->next = NULL;
    if (n == 0) {
        w->current[index] = job;
    } else {
        it[n - 1].job->next = job;
        w->held++; /* its queue place stays taken until the batch ends */
    }
    w->running++;
}

/* Moves the queued jobs that can join the batch it[0, *n) (of *rows query rows) into it, in
 * queue order, while the batch has room. */
static void take_batchable(srv_workers *w, size_t index, batch_item *it, size_t *n, size_t *rows) {
    srv_job *prev = NULL, *job = w->head;
    while (job && *n < MAX_BATCH && *rows < w->max_tokens) {
        srv_job *next = job->next;
        size_t r = api_job_rows(job->job);
        if (*rows + r <= w->max_tokens && api_jobs_batchable(it[0].aj, job->job)) {
            unlink_job(w, prev, job);
            batch_add(w, index, it, (*n)++, job);
            *rows += r;
        } else {
            prev = job;
        }
        job = next;
    }
}

/* Waits on the work condition until the monotonic time t (or a signal). */
static void wait_until(srv_workers *w, double t) {
    double left = t - srv_now();
    if (left > 0)
        srv_cond_wait_for(&w->work, &w->mu, left);
}

/* With the lock held: pops the next job and, when batching is on, the jobs that join it.
 * Returns how many are in it[]; 0 when stopping. */
static size_t pop_batch(srv_workers *w, worker_arg *a) {
    batch_item *it = a->items;
    srv_job *first = NULL;
    while (!(first = pop_unclaimed(w)) && !w->stop)
        pthread_cond_wait(&w->work, &w->mu);
    if (!first)
        return 0;
    size_t n = 1, rows = api_job_rows(first->job);
    batch_add(w, a->index, it, 0, first);
    if (w->window > 0 && api_jobs_batchable(it[0].aj, it[0].aj)) {
        /* Collect: take what is queued, then wait for more while other jobs are in flight
         * (a request to an idle server never waits), until the window after the first job
         * was queued has passed. */
        w->leader[a->index] = it[0].aj;
        double until = it[0].t_queued + w->window;
        while (w->current[a->index] == it[0].job) { /* else abandoned: its jobs are answered */
            take_batchable(w, a->index, it, &n, &rows);
            if (n == MAX_BATCH || rows >= w->max_tokens || w->running == n || w->stop ||
                srv_now() >= until)
                break;
            wait_until(w, until);
        }
        w->leader[a->index] = NULL;
        if (w->head) /* jobs this batch had no room for, or of other models */
            pthread_cond_broadcast(&w->work);
    }
    return n;
}

/* With the lock held: n running jobs have ended. */
static void finished(srv_workers *w, size_t n) {
    w->running -= n;
    pthread_cond_broadcast(&w->idle);
    /* A collecting worker waits only while other jobs are in flight: tell it. */
    for (size_t i = 0; i < w->nworkers; i++) {
        if (w->leader[i]) {
            pthread_cond_broadcast(&w->work);
            break;
        }
    }
}

static void *worker_main(void *arg) {
    worker_arg *a = arg;
    srv_workers *w = a->w;
    batch_item *it = a->items;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        /* Everything the computation needs was copied under the lock (batch_add). */
        size_t n = pop_batch(w, a);
        if (n == 0)
            break;
        bool abandoned = w->current[a->index] != it[0].job; /* while collecting */
        pthread_mutex_unlock(&w->mu);

        if (!abandoned)
            run(w, it, n);
        for (size_t i = 0; i < n; i++)
            api_job_destroy(it[i].aj);

        pthread_mutex_lock(&w->mu);
        bool mine = !abandoned && w->current[a->index] == it[0].job; /* abandoned meanwhile? */
        w->current[a->index] = NULL;
        pthread_mutex_unlock(&w->mu);
        for (size_t i = 0; i < n; i++) {
            if (mine)
                hand_back(it[i].job, &it[i].r);
            else
                api_buf_free(&it[i].r.body);
        }
        pthread_mutex_lock(&w->mu);
        w->held -= n - 1;
        finished(w, n);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

void srv_workers_set_batching(srv_workers *w, double window_s, size_t max_tokens,
                              size_t max_bytes) {
    pthread_mutex_lock(&w->mu);
    w->window = window_s > 0 ? window_s : 0;
    w->max_tokens = max_tokens ? max_tokens : 1;
    w->max_bytes = max_bytes;
    pthread_mutex_unlock(&w->mu);
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
    /* From here on srv_workers_destroy undoes whatever is done: it joins the started threads
     * and frees what was allocated. */
    pthread_mutex_init(&w->mu, NULL);
    srv_cond_init(&w->work);
    srv_cond_init(&w->idle);
    w->nworkers = nworkers;
    w->current = calloc(nworkers, sizeof *w->current);
    w->args = calloc(nworkers, sizeof *w->args);
    w->threads = calloc(nworkers, sizeof *w->threads);
    w->leader = calloc(nworkers, sizeof *w->leader);
    bool items = w->args != NULL;
    for (size_t i = 0; i < nworkers && items; i++)
        items = (w->args[i].items = calloc(MAX_BATCH, sizeof *w->args[i].items)) != NULL;
    if (!w->current || !w->args || !w->threads || !w->leader || !items) {
        srv_fail(err, "out of memory for %zu workers", nworkers);
        goto err;
    }
    w->max_queue = max_queue;
    w->max_tokens = 1;
    w->pool = pool;
    w->metrics = metrics;
    for (size_t i = 0; i < nworkers; i++) {
        w->args[i].w = w;
        w->args[i].index = i;
        int rc = pthread_create(&w->threads[i], NULL, worker_main, &w->args[i]);
        if (rc != 0) {
            srv_fail(err, "cannot start worker thread %zu of %zu: %s", i + 1, nworkers,
                     strerror(rc));
            goto err;
        }
        w->started = i + 1;
    }
    return w;
err:
    srv_workers_destroy(w);
    return NULL;
}

int srv_workers_submit(srv_workers *w, srv_job *job) {
    pthread_mutex_lock(&w->mu);
    int rc = SRV_OK;
    if (w->closed) {
        rc = SRV_CLOSED;
    } else if (w->queued + w->held >= w->max_queue) {
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
        srv_metrics_pending(w->metrics, job->op, job->model, +1);
        if (w->window > 0) /* a collecting worker may want it, an idle one may not */
            pthread_cond_broadcast(&w->work);
        else
            pthread_cond_signal(&w->work);
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void srv_workers_set_inline(srv_workers *w, double max_flops) {
    pthread_mutex_lock(&w->mu);
    w->inline_flops = max_flops > 0 ? max_flops : 0;
    pthread_mutex_unlock(&w->mu);
}

int srv_workers_run_inline(srv_workers *w, srv_job *job) {
    pthread_mutex_lock(&w->mu);
    int rc = SRV_OK;
    if (w->closed)
        rc = SRV_CLOSED;
    else if (w->queued || w->held >= w->max_queue || w->inline_flops <= 0 || /* 0: never */
             !(api_job_plan_flops(job->job) <= w->inline_flops) ||
             !api_job_params_cheap(job->job) ||
             api_job_response_bytes(job->job) > SRV_INLINE_MAX_REPLY)
        rc = SRV_NOT_INLINE;
    else /* seen by wait_idle, stats and a collecting worker as a worker's job, and holding a
            queue place (so that --max-queue + --threads still bounds the jobs in memory) */
        w->running++, w->held++;
    pthread_mutex_unlock(&w->mu);
    if (rc != SRV_OK)
        return rc;
    job->t_queued = srv_now();
    batch_item it = {.job = job,
                     .aj = job->job,
                     .op = job->op,
                     .model = job->model,
                     .t_queued = job->t_queued,
                     .deadline = job->deadline,
                     .own_deadline = job->own_deadline};
    job->job = NULL;
    run(w, &it, 1);
    api_job_destroy(it.aj);
    take_result(job, &it.r);
    pthread_mutex_lock(&w->mu);
    w->held--;
    finished(w, 1);
    pthread_mutex_unlock(&w->mu);
    return SRV_OK;
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
        srv_cond_wait_for(&w->idle, &w->mu, left < 0.1 ? left : 0.1);
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
        srv_metrics_pending(w->metrics, job->op, job->model, -1);
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
        while (job) {                  /* the jobs of one batch, chained */
            srv_job *next = job->next; /* job may be freed once answered */
            srv_metrics_reject(w->metrics, SRV_REJECT_DRAINING);
            answer_503(job, "attnd is shutting down and its drain timeout (--drain-timeout) "
                            "passed before this job finished; retry on another instance");
            n++;
            job = next;
        }
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
    for (size_t i = 0; w->args && i < w->nworkers; i++)
        free(w->args[i].items);
    free(w->args);
    free(w->threads);
    free(w->leader);
    free(w);
}
