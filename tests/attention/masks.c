/* masks.c - libattn's masks: the seed chapters' worked examples, the no-leak experiment (a causal
 * mask keeps earlier outputs bit for bit), fully masked rows (zeros), and every kind of mask
 * against the definition in double. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "attention_test.h"

/* ---- the seeds' worked examples ----------------------------------------------------------- */

void test_seed_four_tokens(void) {
    /* Chapter 5, section 2.4: n = 4, d_k = 2, Q = K. */
    const float q[4 * 2] = {1, 1, 0, 1, 1, 0, .5f, .5f};
    const float v[4 * 2] = {1, 0, 0, 1, 1, 1, .5f, .5f};
    float out[4 * 2], w[4 * 4];
    attn_sdpa_dims d = {.n = 1, .h = 1, .l = 4, .s = 4, .d = 2, .dv = 2};
    attn_opts o = {.weights = ATTN_WEIGHTS_PER_HEAD};
    attn_error err = {0};
    attn_plan p;
    CHECK(attn_sdpa_plan(&p, &d, &o, NULL, 1, &err) == ATTN_OK, "plan: %s", err.msg);
    void *ws = ws_new(&p);
    attn_weights_out wo = {.values = w};
    CHECK(attn_sdpa_forward(&p, ws, out, &wo, q, q, v, NULL, &err) == ATTN_OK, "%s", err.msg);
    /* The chapter prints two decimals: weights row 0 [0.40 0.20 0.20 0.20], output [0.70 0.50]. */
    const float want_w[4] = {0.40f, 0.20f, 0.20f, 0.20f};
    for (int j = 0; j < 4; j++)
        CHECK(fabsf(w[j] - want_w[j]) < 0.005f, "seed weight [0][%d] = %.4f, want %.2f", j,
              (double)w[j], (double)want_w[j]);
    CHECK(fabsf(out[0] - 0.70f) < 0.005f && fabsf(out[1] - 0.50f) < 0.005f,
          "seed output row 0 = [%.4f %.4f], want [0.70 0.50]", (double)out[0], (double)out[1]);
    /* And exactly, every row, against the definition in double. */
    double ro[8], rw[16];
    ref_attend(ro, rw, q, q, v, 4, 4, 2, 2, 1.0 / sqrt(2.0), NULL, 0, 0, 1, 1);
    for (int i = 0; i < 16; i++)
        CHECK(fabs(rw[i] - (double)w[i]) < 1e-6, "seed weight %d: %.8f vs %.8f", i, (double)w[i],
              rw[i]);
    for (int i = 0; i < 8; i++)
        CHECK(fabs(ro[i] - (double)out[i]) < 1e-6, "seed output %d: %.8f vs %.8f", i,
              (double)out[i], ro[i]);
    free(ws);
}

/* Chapter 5, section 3.1: logits [3.0 0.5 -1.0 2.0] with padding mask [1 1 0 0] give
 * [0.92 0.08 0 0]. The logits are made as q k^T with q = [1], k = the logits, scale 1. */
void test_seed_padding(void) {
    const float q[1] = {1}, k[4] = {3.0f, 0.5f, -1.0f, 2.0f}, v[4] = {1, 2, 3, 4};
    const uint8_t key_mask[4] = {1, 1, 0, 0};
    const int32_t key_len[1] = {2};
    attn_masks by_mask = {.key_mask = key_mask, .key_mask_n = 1};
    attn_masks by_len = {.key_lengths = key_len};
    const attn_masks *variants[2] = {&by_mask, &by_len};
    for (int t = 0; t < 2; t++) {
        float out[1], w[4];
        attn_sdpa_dims d = {.n = 1, .h = 1, .l = 1, .s = 4, .d = 1, .dv = 1};
        attn_opts o = {.weights = ATTN_WEIGHTS_PER_HEAD, .has_scale = true, .scale = 1.0f};
        attn_error err = {0};
        attn_plan p;
        CHECK(attn_sdpa_plan(&p, &d, &o, variants[t], 1, &err) == ATTN_OK, "%s", err.msg);
        void *ws = ws_new(&p);
        attn_weights_out wo = {.values = w};
        CHECK(attn_sdpa_forward(&p, ws, out, &wo, q, k, v, NULL, &err) == ATTN_OK, "%s", err.msg);
        double e = exp(2.5);
        CHECK(fabs((double)w[0] - e / (e + 1)) < 1e-6 && fabs((double)w[1] - 1 / (e + 1)) < 1e-6,
              "padding weights [%.4f %.4f], want [%.4f %.4f]", (double)w[0], (double)w[1],
              e / (e + 1), 1 / (e + 1));
        CHECK(fabsf(w[0] - 0.92f) < 0.005f && fabsf(w[1] - 0.08f) < 0.005f,
              "padding weights print as [%.2f %.2f], want [0.92 0.08]", (double)w[0], (double)w[1]);
        CHECK(w[2] == 0.0f && w[3] == 0.0f, "padding cells must weigh exactly 0: %g %g",
              (double)w[2], (double)w[3]);
        free(ws);
    }
}

/* ---- the no-leak experiment --------------------------------------------------------------- */

/* Chapter 5, exercise 04: replace the tokens after t; with a causal mask the outputs up to t
 * must not change at all (bitwise), on both paths, with and without a pool. */
void test_no_leak(attn_pool *pool) {
    const size_t N = 2, L = 37, E = 32, H = 4;
    mha_case c = mha_case_new(N, L, E, H);
    float *x = frand_new(N * L * E), *x2 = malloc(N * L * E * sizeof *x2);
    float *o1 = malloc(N * L * E * sizeof *o1), *o2 = malloc(N * L * E * sizeof *o2);
    float *w1 = malloc(N * H * L * L * sizeof *w1), *w2 = malloc(N * H * L * L * sizeof *w2);
    attn_masks m = {.causal = ATTN_CAUSAL_TOP_LEFT};
    for (int path = 0; path < 2; path++) {
        for (size_t t = 0; t < L; t += 9) {
            memcpy(x2, x, N * L * E * sizeof *x);
            for (size_t n = 0; n < N; n++)
                for (size_t i = t + 1; i < L; i++)
                    for (size_t e = 0; e < E; e++)
                        x2[(n * L + i) * E + e] = 3.0f * frand();
            attn_opts o = {.weights = path ? ATTN_WEIGHTS_PER_HEAD : ATTN_WEIGHTS_NONE,
                           .block_q = 8,
                           .block_k = 5};
            attn_weights_out wo1 = {.values = w1}, wo2 = {.values = w2};
            attn_error err = {0};
            CHECK(mha_run(&c, x, o1, &wo1, &o, &m, pool, &err) == ATTN_OK, "%s", err.msg);
            CHECK(mha_run(&c, x2, o2, &wo2, &o, &m, pool, &err) == ATTN_OK, "%s", err.msg);
            bool same = true, changed = false;
            for (size_t n = 0; n < N; n++) {
                same = same && memcmp(o1 + n * L * E, o2 + n * L * E, (t + 1) * E * 4) == 0;
                if (t + 1 < L)
                    changed = changed || memcmp(o1 + (n * L + t + 1) * E, o2 + (n * L + t + 1) * E,
                                                (L - t - 1) * E * 4) != 0;
            }
            CHECK(same, "path %d: outputs up to t=%zu changed when later tokens changed", path, t);
            CHECK(t + 1 == L || changed, "path %d: later outputs did not change (t=%zu)", path, t);
        }
    }
    mha_case_free(&c);
    free(x), free(x2), free(o1), free(o2), free(w1), free(w2);
}

/* ---- fully masked rows -------------------------------------------------------------------- */

void test_fully_masked(attn_pool *pool) {
    /* SDPA: row 2 blocked by attn_mask, batch 1 has key length 0. */
    const size_t N = 2, L = 4, S = 5, D = 3;
    uint8_t am[4 * 5];
    for (size_t i = 0; i < L * S; i++)
        am[i] = (i / S) == 2 ? 0 : 1;
    int32_t kl[2] = {5, 0};
    attn_masks m = {.attn_mask = am, .key_lengths = kl};
    attn_sdpa_dims d = {N, 1, L, S, D, D, 0};
    float *q = frand_new(N * L * D), *k = frand_new(N * S * D), *v = frand_new(N * S * D);
    float out[2 * 4 * 3], w[2 * 4 * 5];
    for (int path = 0; path < 2; path++) {
        attn_opts o = {.weights = path ? ATTN_WEIGHTS_NONE : ATTN_WEIGHTS_PER_HEAD};
        attn_error err = {0};
        attn_plan p;
        CHECK(attn_sdpa_plan(&p, &d, &o, &m, attn_pool_slots(pool), &err) == ATTN_OK, "%s",
              err.msg);
        void *ws = ws_new(&p);
        memset(out, 0x7f, sizeof out);
        memset(w, 0x7f, sizeof w);
        attn_weights_out wo = {.values = w};
        CHECK(attn_sdpa_forward(&p, ws, out, path ? NULL : &wo, q, k, v, pool, &err) == ATTN_OK,
              "%s", err.msg);
        for (size_t c = 0; c < D; c++)
            CHECK(out[2 * D + c] == 0.0f, "path %d: masked row output %g", path,
                  (double)out[2 * D + c]);
        for (size_t i = 0; i < L * D; i++)
            CHECK(out[L * D + i] == 0.0f, "path %d: key length 0 output %g", path,
                  (double)out[L * D + i]);
        CHECK(out[0] != 0.0f, "path %d: an open row came out zero", path);
        if (!path) {
            for (size_t j = 0; j < S; j++)
                CHECK(w[2 * S + j] == 0.0f, "masked row weight %g", (double)w[2 * S + j]);
            for (size_t i = 0; i < L * S; i++)
                CHECK(w[L * S + i] == 0.0f, "key length 0 weight %g", (double)w[L * S + i]);
        }
        free(ws);
    }
    free(q), free(k), free(v);

    /* MHA, bottom-right causal with L > S: rows i < L - S see no key; their output is exactly
     * out_proj.bias. */
    const size_t E = 8, H = 2, L2 = 6, S2 = 4;
    mha_case c = mha_case_new(1, L2, E, H);
    c.d.s = S2;
    float *xq = frand_new(L2 * E), *xk = frand_new(S2 * E), o2[6 * 8];
    attn_masks br = {.causal = ATTN_CAUSAL_BOTTOM_RIGHT};
    attn_opts o = {0};
    attn_error err = {0};
    attn_plan p;
    CHECK(attn_mha_plan(&p, &c.d, &o, &br, 1, &err) == ATTN_OK, "%s", err.msg);
    void *ws = ws_new(&p);
    attn_mha_params prm = {.in_proj_weight = c.win,
                           .in_proj_bias = c.bin,
                           .out_proj_weight = c.wout,
                           .out_proj_bias = c.bout};
    CHECK(attn_mha_forward(&p, ws, o2, NULL, xq, xk, xk, &prm, NULL, &err) == ATTN_OK, "%s",
          err.msg);
    for (size_t i = 0; i < L2 - S2; i++)
        for (size_t e = 0; e < E; e++)
            CHECK(o2[i * E + e] == c.bout[e], "row %zu col %zu: %g, want bias %g", i, e,
                  (double)o2[i * E + e], (double)c.bout[e]);
    CHECK(o2[(L2 - S2) * E] != c.bout[0], "the first row with a key must differ from the bias");
    free(ws), free(xq), free(xk);
    mha_case_free(&c);
}

/* ---- masks against the definition ---------------------------------------------------------- */

void test_masks_reference(attn_pool *pool) {
    const size_t N = 2, H = 3, L = 11, S = 13, D = 4, Dv = 5;
    int32_t kl[2] = {13, 9};
    uint8_t *km = malloc(N * S), *am = malloc(N * H * L * S);
    float *bias = malloc(N * H * L * S * sizeof *bias);
    for (size_t i = 0; i < N * S; i++)
        km[i] = (i % 4) != 1;
    for (size_t i = 0; i < N * H * L * S; i++) {
        am[i] = (i * 7 % 5) != 0;
        bias[i] = (i % 17 == 3) ? -INFINITY : 0.5f * frand();
    }
    struct {
        const char *name;
        attn_masks m;
    } cases[] = {
        {"none", {0}},
        {"causal top-left", {.causal = ATTN_CAUSAL_TOP_LEFT}},
        {"causal bottom-right", {.causal = ATTN_CAUSAL_BOTTOM_RIGHT}},
        {"key lengths", {.key_lengths = kl}},
        {"key mask (N,S)", {.key_mask = km, .key_mask_n = N}},
        {"key mask (S)", {.key_mask = km, .key_mask_n = 1}},
        {"attn mask (L,S)", {.attn_mask = am}},
        {"attn mask (N,L,S)", {.attn_mask = am, .attn_mask_n = N}},
        {"attn mask (N,H,L,S)", {.attn_mask = am, .attn_mask_n = N, .attn_mask_h = H}},
        {"bias (L,S)", {.attn_bias = bias}},
        {"bias (N,H,L,S) with -inf", {.attn_bias = bias, .attn_bias_n = N, .attn_bias_h = H}},
        {"all combined",
         {.causal = ATTN_CAUSAL_TOP_LEFT,
          .key_lengths = kl,
          .key_mask = km,
          .key_mask_n = N,
          .attn_mask = am,
          .attn_mask_n = N,
          .attn_mask_h = H,
          .attn_bias = bias,
          .attn_bias_n = N,
          .attn_bias_h = 1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int path = 0; path < 3; path++) {
            /* direct with weights; tiled with ragged tiles; tiled with default tiles */
            attn_opts o = {.weights = path == 0 ? ATTN_WEIGHTS_PER_HEAD : ATTN_WEIGHTS_NONE,
                           .block_q = path == 1 ? 4 : 0,
                           .block_k = path == 1 ? 3 : 0};
            double dout, dw;
            int rc = sdpa_compare(N, H, L, S, D, Dv, &cases[c].m, &o, pool, &dout, &dw);
            CHECK(rc == ATTN_OK && dout < 1e-5 && dw < 1e-5,
                  "%s, path %d: rc %d, output diff %.3g, weights diff %.3g", cases[c].name, path,
                  rc, dout, dw);
        }
    }
    free(km), free(am), free(bias);
}
