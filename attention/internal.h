/* internal.h - what the files of libattn share and nobody else sees: the row kernels and
 * overflow-checked size arithmetic. */
#ifndef ATTN_INTERNAL_H
#define ATTN_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attention.h"

/* One instruction-set flavour of the softmax row kernels. */
typedef struct attnk_set {
    const char *name; /* "avx512", "avx2" or "sse2" */
    /* Max of x[0..n); -INFINITY when n is 0. NaN entries are skipped. */
    float (*row_max)(const float *x, size_t n);
    /* x[j] = exp(x[j] - m) for j < n, in place; returns the sum. exp(-inf) is 0. */
    float (*exp_sum)(float *x, size_t n, float m);
    /* x[j] *= a for j < n. */
    void (*scale)(float *x, size_t n, float a);
    /* True when no x[j], j < n, is an infinity or NaN. */
    bool (*all_finite)(const float *x, size_t n);
} attnk_set;

/* The widest kernel set this CPU runs; chosen on first call, then cached. */
const attnk_set *attnk_get(void);

/* The set called name, or NULL; for tests that compare the flavours. */
const attnk_set *attnk_get_named(const char *name);

/* Fills err (if it is still clear) with code and a printf-style message; returns code. */
int attn_fail(attn_error *err, attn_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* a * b into *out; false on overflow. */
static inline bool attn_mul(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}

/* a + b into *out; false on overflow. */
static inline bool attn_add(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

#endif
