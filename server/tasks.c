/* tasks.c - a small pool of threads with a bounded FIFO of tasks: the parse threads, which
 * decode request bodies (content codings) and parse them into jobs off the HTTP threads, so that
 * an HTTP thread never spends long on one request and probes are answered at once (http.c).
 * A task is a caller-owned record (srv_task), so submitting allocates nothing. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

struct srv_tasks {
    pthread_mutex_t mu;
    pthread_cond_t work; /* a task was queued, or stop */
    srv_task *head, *tail;
    size_t queued, max_queued, running;
    bool closed; /* srv_tasks_destroy has begun: submit refuses */
    size_t nthreads, started;
    pthread_t *threads;
};

static void *tasks_main(void *arg) {
    srv_tasks *t = arg;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->head && !t->closed)
            pthread_cond_wait(&t->work, &t->mu);
        srv_task *k = t->head;
        if (!k) /* closed, and nothing left */
            break;
        t->head = k->next;
        if (!t->head)
            t->tail = NULL;
        t->queued--;
        t->running++;
        pthread_mutex_unlock(&t->mu);
        k->next = NULL;
        k->fn(k); /* may free k: it is not touched after */
        pthread_mutex_lock(&t->mu);
        t->running--;
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

srv_tasks *srv_tasks_create(size_t nthreads, size_t max_queued, srv_error *err) {
    srv_tasks *t = calloc(1, sizeof *t);
    pthread_t *threads = calloc(nthreads ? nthreads : 1, sizeof *threads);
    if (!t || !threads) {
        free(t);
        free(threads);
        srv_fail(err, "out of memory for the parse threads");
        return NULL;
    }
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->work, NULL);
    t->max_queued = max_queued;
    t->threads = threads;
    t->nthreads = nthreads;
    for (; t->started < nthreads; t->started++) {
        int rc = pthread_create(&t->threads[t->started], NULL, tasks_main, t);
        if (rc != 0) {
            srv_fail(err, "cannot start a parse thread: %s", strerror(rc));
            srv_tasks_destroy(t);
            return NULL;
        }
    }
    return t;
}

int srv_tasks_submit(srv_tasks *t, srv_task *k) {
    pthread_mutex_lock(&t->mu);
    int rc = t->closed ? SRV_CLOSED : t->queued >= t->max_queued ? SRV_QUEUE_FULL : SRV_OK;
    if (rc == SRV_OK) {
        k->next = NULL;
        if (t->tail)
            t->tail->next = k;
        else
            t->head = k;
        t->tail = k;
        t->queued++;
        pthread_cond_signal(&t->work);
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

void srv_tasks_stats(srv_tasks *t, size_t *queued, size_t *running) {
    pthread_mutex_lock(&t->mu);
    *queued = t->queued;
    *running = t->running;
    pthread_mutex_unlock(&t->mu);
}

void srv_tasks_destroy(srv_tasks *t) {
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->closed = true;
    pthread_cond_broadcast(&t->work);
    pthread_mutex_unlock(&t->mu);
    for (size_t i = 0; i < t->started; i++)
        pthread_join(t->threads[i], NULL);
    pthread_cond_destroy(&t->work);
    pthread_mutex_destroy(&t->mu);
    free(t->threads);
    free(t);
}
