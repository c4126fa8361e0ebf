/* float_ref.h - the previous float32 writer (tests/float_ref.c), a reference for tests and
 * benchmarks only; attnd itself uses api_float_write (api/codec/fmt.c). */
#ifndef ATTND_FLOAT_REF_H
#define ATTND_FLOAT_REF_H

#include <stddef.h>

/* Writes f (finite) as api_float_write does, into buf (at least 32 bytes); returns the
 * length (no terminating NUL). */
size_t ref_float_write(char *buf, float f);

/* Writes v[0, n) as ref_float_write does, separated by commas; returns the end. o must have
 * room for 17 * n + 32 bytes. */
char *ref_floats_write(char *o, const float *v, size_t n);

#endif
