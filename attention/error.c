/* error.c - libattn's errors: attn_fail fills a caller's error record, attn_status_name names a
 * status. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

int attn_fail(attn_error *err, attn_status code, const char *fmt, ...) {
    if (err && err->code == ATTN_OK) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

const char *attn_status_name(attn_status status) {
    switch (status) {
    case ATTN_OK:
        return "ok";
    case ATTN_ERR_ARG:
        return "argument";
    case ATTN_ERR_SHAPE:
        return "shape";
    case ATTN_ERR_OVERFLOW:
        return "overflow";
    case ATTN_ERR_LIMIT:
        return "limit";
    case ATTN_ERR_NOMEM:
        return "nomem";
    case ATTN_ERR_NUMERIC:
        return "numeric";
    case ATTN_ERR_SYSTEM:
        return "system";
    }
    return "unknown";
}
