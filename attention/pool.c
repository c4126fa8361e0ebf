/* pool.c - a fork-join thread pool: attn_pool_run spreads one job's tasks over helper threads,
 * with the caller working too. Several callers may share one pool; helpers serve the oldest run
 * that still has unclaimed tasks. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct pool_run {
    attn_task_fn fn;
    void *ctx;
    size_t ntasks;
    atomic_size_t next;  /* next task to claim */
    atomic_size_t done;  /* tasks finished */
    atomic_size_t slots; /* slots handed out; the caller holds slot 0 */
    struct pool_run *link;
} pool_run;

struct attn_pool {
    pthread_mutex_t mu;
    pthread_cond_t work;     /* a run was posted, or stop */
    pthread_cond_t finished; /* some run's last task finished */
    pool_run *runs;          /* runs with tasks possibly unclaimed, oldest first */
    bool stop;
    size_t nthreads;
    pthread_t threads[];
};

/* Marks one task of run (of ntasks) finished. From then on the run's owner may free it unless
 * this thread holds another unfinished task, so nothing here reads run after the increment. */
static void run_finish_one(attn_pool *pool, pool_run *run, size_t ntasks) {
    if (atomic_fetch_add(&run->done, 1) + 1 == ntasks) {
        pthread_mutex_lock(&pool->mu);
        pthread_cond_broadcast(&pool->finished);
        pthread_mutex_unlock(&pool->mu);
    }
}

/* Runs task t of run, then keeps claiming until none is left. The next task is claimed before
 * the current one is marked finished, so the run stays alive while it is touched. */
static void run_work(attn_pool *pool, pool_run *run, size_t t, size_t slot) {
    const size_t ntasks = run->ntasks;
    while (t < ntasks) {
        run->fn(run->ctx, t, slot);
        size_t next = atomic_fetch_add(&run->next, 1);
        run_finish_one(pool, run, ntasks);
        t = next;
    }
}

static void *pool_main(void *arg) {
    attn_pool *pool = arg;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        pool_run *run = pool->runs;
        while (run && atomic_load(&run->next) >= run->ntasks)
            run = run->link;
        if (!run) {
            if (pool->stop)
                break;
            pthread_cond_wait(&pool->work, &pool->mu);
            continue;
        }
        /* Claim under the lock: the run cannot finish (and be freed) while we hold a task. */
        size_t t = atomic_fetch_add(&run->next, 1);
        if (t >= run->ntasks)
            continue;
        size_t slot = atomic_fetch_add(&run->slots, 1);
        pthread_mutex_unlock(&pool->mu);
        run_work(pool, run, t, slot);
        pthread_mutex_lock(&pool->mu);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

attn_pool *attn_pool_create(size_t nthreads, attn_error *err) {
    if (nthreads > 1024) {
        attn_fail(err, ATTN_ERR_ARG, "a pool of %zu threads is too many (at most 1024)", nthreads);
        return NULL;
    }
    attn_pool *pool = calloc(1, sizeof *pool + nthreads * sizeof(pthread_t));
    if (!pool) {
        attn_fail(err, ATTN_ERR_NOMEM, "out of memory creating a pool of %zu threads", nthreads);
        return NULL;
    }
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->work, NULL);
    pthread_cond_init(&pool->finished, NULL);
    for (size_t i = 0; i < nthreads; i++) {
        int rc = pthread_create(&pool->threads[i], NULL, pool_main, pool);
        if (rc != 0) {
            attn_fail(err, ATTN_ERR_SYSTEM, "cannot start pool thread %zu of %zu: %s", i + 1,
                      nthreads, strerror(rc));
            attn_pool_destroy(pool);
            return NULL;
        }
        pool->nthreads = i + 1;
    }
    return pool;
}

void attn_pool_destroy(attn_pool *pool) {
    if (!pool)
        return;
    pthread_mutex_lock(&pool->mu);
    pool->stop = true;
    pthread_cond_broadcast(&pool->work);
    pthread_mutex_unlock(&pool->mu);
    for (size_t i = 0; i < pool->nthreads; i++)
        pthread_join(pool->threads[i], NULL);
    pthread_cond_destroy(&pool->finished);
    pthread_cond_destroy(&pool->work);
    pthread_mutex_destroy(&pool->mu);
    free(pool);
}

size_t attn_pool_slots(const attn_pool *pool) {
    return pool ? pool->nthreads + 1 : 1;
}

void attn_pool_run(attn_pool *pool, size_t ntasks, attn_task_fn fn, void *ctx) {
    if (ntasks == 0)
        return;
    if (!pool || pool->nthreads == 0 || ntasks == 1) {
        for (size_t t = 0; t < ntasks; t++)
            fn(ctx, t, 0);
        return;
    }
    pool_run run = {.fn = fn, .ctx = ctx, .ntasks = ntasks};
    atomic_init(&run.next, 1); /* the caller owns task 0 */
    atomic_init(&run.done, 0);
    atomic_init(&run.slots, 1);

    pthread_mutex_lock(&pool->mu);
    pool_run **tail = &pool->runs;
    while (*tail)
        tail = &(*tail)->link;
    *tail = &run;
    pthread_cond_broadcast(&pool->work);
    pthread_mutex_unlock(&pool->mu);

    run_work(pool, &run, 0, 0);

    pthread_mutex_lock(&pool->mu);
    for (pool_run **p = &pool->runs; *p; p = &(*p)->link) {
        if (*p == &run) {
            *p = run.link;
            break;
        }
    }
    while (atomic_load(&run.done) < ntasks)
        pthread_cond_wait(&pool->finished, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}
