/* common.c - what every file of server/ uses, declared at the top of server.h: the error record
 * (srv_fail), the monotonic clock (srv_now) and timed waits by it (srv_cond_*). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "server.h"

int srv_fail(srv_error *err, const char *fmt, ...) {
    if (err && err->code == 0) {
        err->code = SRV_ERR;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return SRV_ERR;
}

double srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void srv_cond_init(pthread_cond_t *cv) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

void srv_cond_wait_for(pthread_cond_t *cv, pthread_mutex_t *mu, double seconds) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = ts.tv_nsec + (long long)(seconds * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait(cv, mu, &ts);
}
