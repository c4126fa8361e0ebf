/* main.c - test_attention: unit tests of libattn, one program in files by behaviour, sharing
 * attention_test.h: the seed chapters' worked examples and masks (masks.c), forward passes
 * (forward.c: tiled = direct, weights modes, cross-attention, values near FLT_MAX), plans
 * (plan.c: binding, limits and errors, FLOP count), kernels, the pool and the BLAS kernel
 * choice (runtime.c), batches across jobs (batch.c), the fused tiled path against the direct
 * one (fused.c), PyTorch's grouped-query heads, float key bias and appended keys
 * (torch_options.c), decode sessions on a key/value cache against the whole-sequence
 * call (decode.c), and stacks of layers against a reference in double (stack.c); util.c holds
 * the helpers. This file
 * holds main, which runs them in a fixed order, and the --blas-probe that test_blas_reexec runs
 * this program with. Exits non-zero when any check fails.
 *
 * Usage: test_attention (the tests), or test_attention --blas-probe (prints "active|how" of
 * attn_blas_setup). */
#include <stdio.h>
#include <string.h>

#include "attention.h"
#include "attention_test.h"

int failures, checks;

static int blas_probe(char **argv) {
    attn_blas_info bi;
    attn_error err = {0};
    if (attn_blas_setup(argv, &bi, &err) != ATTN_OK) {
        printf("error|%s\n", err.msg);
        return 1;
    }
    printf("%s|%s\n", bi.active, bi.how);
    return 0;
}

/* The groups draw from one random stream (util.c): keep this order, or their inputs change. */
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--blas-probe") == 0)
        return blas_probe(argv);
    attn_blas_info bi;
    attn_error err = {0};
    if (attn_blas_setup(argv, &bi, &err) != ATTN_OK) {
        fprintf(stderr, "blas setup: %s\n", err.msg);
        return 1;
    }
    printf("BLAS core %s (%s)\n", bi.active, bi.how);
    attn_pool *pool = attn_pool_create(2, &err);
    if (!pool) {
        fprintf(stderr, "pool: %s\n", err.msg);
        return 1;
    }
    test_seed_four_tokens();
    test_seed_padding();
    test_kernels();
    test_pool();
    test_blas_choice();
    test_blas_reexec(argv[0]);
    for (int with_pool = 0; with_pool < 2; with_pool++) {
        attn_pool *p = with_pool ? pool : NULL;
        test_no_leak(p);
        test_fully_masked(p);
        test_masks_reference(p);
        test_tiled_equals_direct(p);
        test_weights_modes(p);
        test_cross_kdim(p);
        test_batch(p);
        test_near_float_max(p);
        test_trace(p);
        test_gqa(p);
        test_key_bias(p);
        test_mha_appended(p);
        test_decode(p);
        test_decode_errors(p);
        test_stack(p);
        test_decode_topk_trace(p);
    }
    test_stack_errors();
    test_flops_closed_form();
    test_limits_and_errors();
    test_plan_bind();
    test_fused_kernels();
    test_fused_equals_direct(NULL);
    test_fused_equals_direct(pool);
    attn_pool_destroy(pool);
    printf("test_attention: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
