/* w6.h - workload W6 of bench_attention (--w6): a decode session of T appends of one row on a
 * key/value cache, each step timed, against the same sequence recomputed from scratch (a whole
 * causal attn_mha_forward of t rows) at every step t or at a sample of them.
 *
 * Legend: T the appends (the final sequence length), E embedding width, H heads. */
#ifndef ATTND_BENCH_W6_H
#define ATTND_BENCH_W6_H

#include <stddef.h>

#include "attention.h"

/* What W6 runs on: bench_attention's inputs and parameters (the W4 streams), borrowed. */
typedef struct w6_inputs {
    const float *x;         /* (T, E): query = key = value, row t appended at step t + 1 */
    attn_mha_params params; /* in_proj_weight (3E, E) and biases, out_proj */
    size_t t, e, h;
} w6_inputs;

typedef struct w6_config {
    size_t repeats;   /* interleaved rounds: the session, then the recomputations */
    size_t stride;    /* recompute at t = 1 and every multiple of stride; 1: every t; 0: never
                       * (the sessions alone, as the ONNX Runtime peer compares them) */
    const char *dump; /* NULL, or a file for the last session's outputs, (T, E) float32 */
} w6_config;

/* Runs W6 on pool (nslots slots) and prints its JSON lines on stdout ("w6_config", a "w6_point"
 * per 256 rows, "w6"). Returns ATTN_OK, or a libattn status with err filled (ATTN_ERR_NOMEM
 * when an allocation failed, ATTN_ERR_SYSTEM when the dump file cannot be written). */
int w6_run(const w6_inputs *in, const w6_config *cfg, attn_pool *pool, size_t nslots,
           attn_error *err);

#endif
