/* common.c - what every file of server/ uses, declared at the top of server.h: the error record
 * (srv_fail) and the monotonic clock (srv_now). */
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
