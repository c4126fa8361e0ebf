/* error.c - the first-error-wins error record of api.h (api_fail): the one piece every room of
 * api/ shares, so it sits in the lowest room, below the job memory cache and the buffers that
 * report through it. */
#include <stdarg.h>
#include <stdio.h>

#include "base.h"

int api_fail(api_error *err, int status, const char *code, const char *field, const char *fmt,
             ...) {
    if (!err || err->status != 0)
        return -1;
    err->status = status;
    snprintf(err->code, sizeof err->code, "%s", code);
    snprintf(err->field, sizeof err->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return -1;
}
