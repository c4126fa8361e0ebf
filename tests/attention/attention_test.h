/* attention_test.h - what the files of test_attention (tests/attention/) share: the check macro
 * and its counters, the helpers of util.c (random floats, the reference SDPA in double,
 * self-attention cases), and the groups of tests main runs.
 *
 * Legend: N batch, L query length, S key length, E embedding, H heads, D/Dv head widths. */
#ifndef ATTND_TESTS_ATTENTION_TEST_H
#define ATTND_TESTS_ATTENTION_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "attention.h"

/* Counted by CHECK; main prints them and exits 1 when failures is not 0. */
extern int failures, checks;

/* Counts a check; when cond is false, counts a failure and prints it. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* ---- util.c ------------------------------------------------------------------------------- */

/* Uniform in [-1, 1) from one xorshift64 stream for the whole program (its state rng_state, which
 * test_flops_closed_form also reads for its shapes): each group draws from it in main's order,
 * so a group's draws depend on those before it. frand_new: n of them in a new array. */
extern uint64_t rng_state;
float frand(void);
float *frand_new(size_t n);
/* A workspace for plan p (64-byte aligned; the caller frees it). */
void *ws_new(const attn_plan *p);
double max_abs_diff(const float *a, const float *b, size_t n);
void ref_attend(double *out, double *w, const float *q, const float *k, const float *v, size_t L,
                size_t S, size_t D, size_t Dv, double scale, const attn_masks *m, size_t n,
                size_t h, size_t N, size_t H);
int sdpa_compare(size_t N, size_t H, size_t L, size_t S, size_t D, size_t Dv, const attn_masks *m,
                 const attn_opts *opts, attn_pool *pool, double *dout, double *dw);

/* A self-attention case: its dims and random weights. */
typedef struct mha_case {
    attn_mha_dims d;
    float *win, *bin, *wout, *bout; /* (3E, E), (3E), (E, E), (E) */
} mha_case;

mha_case mha_case_new(size_t n, size_t l, size_t e, size_t h);
void mha_case_free(mha_case *c);
int mha_run(const mha_case *c, const float *x, float *out, attn_weights_out *w, const attn_opts *o,
            const attn_masks *m, attn_pool *pool, attn_error *err);

/* ---- The groups of tests ------------------------------------------------------------------ */

/* masks.c */
void test_seed_four_tokens(void);
void test_seed_padding(void);
void test_no_leak(attn_pool *pool);
void test_fully_masked(attn_pool *pool);
void test_masks_reference(attn_pool *pool);
/* forward.c */
void test_tiled_equals_direct(attn_pool *pool);
void test_weights_modes(attn_pool *pool);
void test_cross_kdim(attn_pool *pool);
void test_near_float_max(attn_pool *pool);
void test_trace(attn_pool *pool);
/* fused.c */
void test_fused_kernels(void);
void test_fused_equals_direct(attn_pool *pool);
/* stack.c */
void test_stack(attn_pool *pool);
void test_stack_errors(void);
/* plan.c */
void test_plan_bind(void);
void test_limits_and_errors(void);
void test_flops_closed_form(void);
/* runtime.c */
void test_kernels(void);
void test_pool(void);
void test_blas_choice(void);
void test_blas_reexec(const char *self);
/* batch.c */
void test_batch(attn_pool *pool);
/* torch_options.c */
void test_gqa(attn_pool *pool);
void test_key_bias(attn_pool *pool);
void test_mha_appended(attn_pool *pool);
/* decode.c */
void test_decode(attn_pool *pool);
void test_decode_errors(attn_pool *pool);
/* decode_topk.c */
void test_decode_topk_trace(attn_pool *pool);

#endif
