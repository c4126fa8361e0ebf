/* test_attention.c - unit tests of libattn: the seed chapters' worked examples, masks, the
 * no-leak experiment, fully masked rows, tiled = direct, weights modes, limits, the pool and the
 * BLAS kernel choice. Exits non-zero when any check fails.
 *
 * Legend: N batch, L query length, S key length, E embedding, H heads, D/Dv head widths. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attention.h"
#include "internal.h"

static int failures, checks;

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

/* ---- helpers ------------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static float frand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *frand_new(size_t n) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = frand();
    return x;
}

static void *ws_new(const attn_plan *p) {
    return aligned_alloc(64, (p->workspace_bytes + 63) / 64 * 64 + 64);
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > m || d != d)
            m = d != d ? (double)INFINITY : d;
    }
    return m;
}

/* Reference SDPA in double for one (n, h) problem with every mask, straight from the
 * definition: logits = scale q k^T (+ bias), blocked cells -inf, softmax, zero rows when all
 * blocked. q (L, D), k (S, D), v (S, Dv) -> out (L, Dv), w (L, S). */
static void ref_attend(double *out, double *w, const float *q, const float *k, const float *v,
                       size_t L, size_t S, size_t D, size_t Dv, double scale, const attn_masks *m,
                       size_t n, size_t h, size_t N, size_t H) {
    for (size_t i = 0; i < L; i++) {
        double *row = w + i * S, mx = -HUGE_VAL;
        for (size_t j = 0; j < S; j++) {
            bool ok = true;
            if (m) {
                if (m->causal == ATTN_CAUSAL_TOP_LEFT && j > i)
                    ok = false;
                if (m->causal == ATTN_CAUSAL_BOTTOM_RIGHT &&
                    (double)j > (double)i + (double)S - (double)L)
                    ok = false;
                if (m->key_lengths && j >= (size_t)m->key_lengths[n])
                    ok = false;
                if (m->key_mask && !m->key_mask[(m->key_mask_n == N ? n : 0) * S + j])
                    ok = false;
                size_t an = m->attn_mask_n == N ? n : 0, ah = m->attn_mask_h == H ? h : 0;
                size_t aH = m->attn_mask_h ? m->attn_mask_h : 1;
                if (m->attn_mask && !m->attn_mask[((an * aH + ah) * L + i) * S + j])
                    ok = false;
            }
            double x = -HUGE_VAL;
            if (ok) {
                x = 0;
                for (size_t c = 0; c < D; c++)
                    x += (double)q[i * D + c] * (double)k[j * D + c];
                x *= scale;
                if (m && m->attn_bias) {
                    size_t bn = m->attn_bias_n == N ? n : 0, bh = m->attn_bias_h == H ? h : 0;
                    size_t bH = m->attn_bias_h ? m->attn_bias_h : 1;
                    x += (double)m->attn_bias[((bn * bH + bh) * L + i) * S + j];
                }
            }
            row[j] = x;
            if (x > mx)
                mx = x;
        }
        double sum = 0;
        for (size_t j = 0; j < S; j++) {
            row[j] = mx == -(double)INFINITY ? 0.0 : exp(row[j] - mx);
            sum += row[j];
        }
        for (size_t j = 0; j < S; j++)
            row[j] = sum > 0 ? row[j] / sum : 0.0;
        for (size_t c = 0; c < Dv; c++) {
            double acc = 0;
            for (size_t j = 0; j < S; j++)
                acc += row[j] * (double)v[j * Dv + c];
            out[i * Dv + c] = acc;
        }
    }
}

/* Runs SDPA (N, H, L, S, D, Dv) through libattn and the reference; returns the largest output
 * and weight differences in *dout and *dw. */
static int sdpa_compare(size_t N, size_t H, size_t L, size_t S, size_t D, size_t Dv,
                        const attn_masks *m, const attn_opts *opts, attn_pool *pool, double *dout,
                        double *dw) {
    attn_sdpa_dims d = {N, H, L, S, D, Dv};
    float *q = frand_new(N * H * L * D), *k = frand_new(N * H * S * D),
          *v = frand_new(N * H * S * Dv);
    float *out = malloc(N * H * L * Dv * sizeof *out);
    float *w = malloc(N * H * L * S * sizeof *w);
    double *ro = malloc(L * Dv * sizeof *ro), *rw = malloc(L * S * sizeof *rw);
    attn_error err = {0};
    attn_plan p;
    int rc = attn_sdpa_plan(&p, &d, opts, m, attn_pool_slots(pool), &err);
    void *ws = rc == ATTN_OK ? ws_new(&p) : NULL;
    attn_weights_out wo = {.values = w};
    if (rc == ATTN_OK)
        rc = attn_sdpa_forward(&p, ws, out, &wo, q, k, v, pool, &err);
    if (rc != ATTN_OK)
        fprintf(stderr, "sdpa: %s\n", err.msg);
    *dout = *dw = 0;
    double scale = opts->has_scale ? (double)opts->scale : 1.0 / sqrt((double)D);
    for (size_t n = 0; rc == ATTN_OK && n < N; n++) {
        for (size_t h = 0; h < H; h++) {
            size_t pq = (n * H + h);
            ref_attend(ro, rw, q + pq * L * D, k + pq * S * D, v + pq * S * Dv, L, S, D, Dv, scale,
                       m, n, h, N, H);
            for (size_t i = 0; i < L * Dv; i++)
                *dout = fmax(*dout, fabs(ro[i] - (double)out[pq * L * Dv + i]));
            if (opts->weights == ATTN_WEIGHTS_PER_HEAD)
                for (size_t i = 0; i < L * S; i++)
                    *dw = fmax(*dw, fabs(rw[i] - (double)w[pq * L * S + i]));
        }
    }
    free(q), free(k), free(v), free(out), free(w), free(ro), free(rw), free(ws);
    return rc;
}

/* ---- the seeds' worked examples ----------------------------------------------------------- */

static void test_seed_four_tokens(void) {
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
static void test_seed_padding(void) {
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

/* ---- MHA helpers -------------------------------------------------------------------------- */

typedef struct mha_case {
    attn_mha_dims d;
    float *win, *bin, *wout, *bout; /* (3E, E), (3E), (E, E), (E) */
} mha_case;

static mha_case mha_case_new(size_t n, size_t l, size_t e, size_t h) {
    mha_case c = {.d = {.n = n, .l = l, .s = l, .e = e, .h = h}};
    c.win = frand_new(3 * e * e);
    c.bin = frand_new(3 * e);
    c.wout = frand_new(e * e);
    c.bout = frand_new(e);
    return c;
}

static void mha_case_free(mha_case *c) {
    free(c->win), free(c->bin), free(c->wout), free(c->bout);
}

/* Self-attention on x (N, L, E) into out (N, L, E), optional weights; returns the status. */
static int mha_run(const mha_case *c, const float *x, float *out, attn_weights_out *w,
                   const attn_opts *o, const attn_masks *m, attn_pool *pool, attn_error *err) {
    attn_plan p;
    int rc = attn_mha_plan(&p, &c->d, o, m, attn_pool_slots(pool), err);
    if (rc != ATTN_OK)
        return rc;
    void *ws = ws_new(&p);
    attn_mha_params prm = {.in_proj_weight = c->win,
                           .in_proj_bias = c->bin,
                           .out_proj_weight = c->wout,
                           .out_proj_bias = c->bout};
    rc = attn_mha_forward(&p, ws, out, w, x, x, x, &prm, pool, err);
    free(ws);
    return rc;
}

/* ---- the no-leak experiment --------------------------------------------------------------- */

/* Chapter 5, exercise 04: replace the tokens after t; with a causal mask the outputs up to t
 * must not change at all (bitwise), on both paths, with and without a pool. */
static void test_no_leak(attn_pool *pool) {
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

static void test_fully_masked(attn_pool *pool) {
    /* SDPA: row 2 blocked by attn_mask, batch 1 has key length 0. */
    const size_t N = 2, L = 4, S = 5, D = 3;
    uint8_t am[4 * 5];
    for (size_t i = 0; i < L * S; i++)
        am[i] = (i / S) == 2 ? 0 : 1;
    int32_t kl[2] = {5, 0};
    attn_masks m = {.attn_mask = am, .key_lengths = kl};
    attn_sdpa_dims d = {N, 1, L, S, D, D};
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

static void test_masks_reference(attn_pool *pool) {
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

/* ---- tiled = direct, weights modes -------------------------------------------------------- */

static void test_tiled_equals_direct(attn_pool *pool) {
    const size_t N = 3, L = 70, E = 48, H = 6;
    mha_case c = mha_case_new(N, L, E, H);
    float *x = frand_new(N * L * E);
    float *od = malloc(N * L * E * 4), *ot = malloc(N * L * E * 4);
    float *w = malloc(N * H * L * L * 4);
    int32_t kl[3] = {70, 33, 1};
    attn_masks ms[] = {{0}, {.causal = ATTN_CAUSAL_TOP_LEFT, .key_lengths = kl}};
    size_t blocks[][2] = {{0, 0}, {16, 16}, {7, 9}, {64, 3}};
    for (size_t mi = 0; mi < 2; mi++) {
        attn_opts od_o = {.weights = ATTN_WEIGHTS_PER_HEAD};
        attn_weights_out wo = {.values = w};
        attn_error err = {0};
        CHECK(mha_run(&c, x, od, &wo, &od_o, &ms[mi], pool, &err) == ATTN_OK, "%s", err.msg);
        for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
            attn_opts ot_o = {
                .path = ATTN_PATH_TILED, .block_q = blocks[b][0], .block_k = blocks[b][1]};
            CHECK(mha_run(&c, x, ot, NULL, &ot_o, &ms[mi], pool, &err) == ATTN_OK, "%s", err.msg);
            double diff = max_abs_diff(od, ot, N * L * E);
            CHECK(diff < 2e-5, "masks %zu blocks %zux%zu: tiled vs direct differ by %.3g", mi,
                  blocks[b][0], blocks[b][1], diff);
        }
    }
    mha_case_free(&c);
    free(x), free(od), free(ot), free(w);
}

static void test_weights_modes(attn_pool *pool) {
    const size_t N = 2, L = 9, E = 16, H = 4, S = 9;
    mha_case c = mha_case_new(N, L, E, H);
    float *x = frand_new(N * L * E), *out = malloc(N * L * E * 4), *out2 = malloc(N * L * E * 4);
    float *all = malloc(N * H * L * S * 4), *mean = malloc(N * L * S * 4);
    float *sub = malloc(N * 3 * L * S * 4);
    attn_masks m = {.causal = ATTN_CAUSAL_TOP_LEFT};
    attn_error err = {0};

    attn_opts o_all = {.weights = ATTN_WEIGHTS_PER_HEAD};
    attn_weights_out wo = {.values = all};
    CHECK(mha_run(&c, x, out, &wo, &o_all, &m, pool, &err) == ATTN_OK, "%s", err.msg);
    /* rows sum to 1 */
    for (size_t r = 0; r < N * H * L; r++) {
        double s = 0;
        for (size_t j = 0; j < S; j++)
            s += (double)all[r * S + j];
        CHECK(fabs(s - 1.0) < 1e-5, "weights row %zu sums to %.7f", r, s);
    }

    attn_opts o_mean = {.weights = ATTN_WEIGHTS_MEAN};
    attn_weights_out wm = {.values = mean};
    CHECK(mha_run(&c, x, out2, &wm, &o_mean, &m, pool, &err) == ATTN_OK, "%s", err.msg);
    CHECK(memcmp(out, out2, N * L * E * 4) == 0, "the output depends on the weights mode");
    double dmean = 0;
    for (size_t n = 0; n < N; n++)
        for (size_t i = 0; i < L * S; i++) {
            double s = 0;
            for (size_t h = 0; h < H; h++)
                s += (double)all[(n * H + h) * L * S + i];
            dmean = fmax(dmean, fabs(s / (double)H - (double)mean[n * L * S + i]));
        }
    CHECK(dmean < 1e-6, "mean weights differ from the mean of per-head weights by %.3g", dmean);

    const uint32_t heads[3] = {2, 0, 2};
    attn_opts o_sub = {.weights = ATTN_WEIGHTS_PER_HEAD, .heads = heads, .n_heads = 3};
    attn_weights_out ws_ = {.values = sub};
    CHECK(mha_run(&c, x, out2, &ws_, &o_sub, &m, pool, &err) == ATTN_OK, "%s", err.msg);
    bool same = true;
    for (size_t n = 0; n < N; n++)
        for (size_t k = 0; k < 3; k++)
            same = same && memcmp(sub + (n * 3 + k) * L * S, all + (n * H + heads[k]) * L * S,
                                  L * S * 4) == 0;
    CHECK(same, "the head subset [2, 0, 2] does not match the per-head maps");

    /* top-k of per-head and mean maps */
    const size_t K = 3;
    float *tv = malloc(N * H * L * K * 4);
    int32_t *ti = malloc(N * H * L * K * 4);
    for (int mode = 0; mode < 2; mode++) {
        attn_opts o_k = {.weights = mode ? ATTN_WEIGHTS_MEAN : ATTN_WEIGHTS_PER_HEAD, .top_k = K};
        attn_weights_out wk = {.values = tv, .indices = ti};
        CHECK(mha_run(&c, x, out2, &wk, &o_k, &m, pool, &err) == ATTN_OK, "%s", err.msg);
        const float *dense = mode ? mean : all;
        size_t rows = mode ? N * L : N * H * L;
        bool ok = true;
        for (size_t r = 0; r < rows && ok; r++) {
            /* expected: sort indices by (weight desc, index asc) */
            int32_t order[9];
            for (int j = 0; j < 9; j++)
                order[j] = j;
            for (int a = 0; a < 9; a++)
                for (int b = a + 1; b < 9; b++) {
                    float wa = dense[r * S + (size_t)order[a]],
                          wb = dense[r * S + (size_t)order[b]];
                    if (wb > wa || (wb == wa && order[b] < order[a])) {
                        int32_t t = order[a];
                        order[a] = order[b];
                        order[b] = t;
                    }
                }
            for (size_t j = 0; j < K; j++)
                ok = ok && ti[r * K + j] == order[j] &&
                     tv[r * K + j] == dense[r * S + (size_t)order[j]];
            if (!ok)
                fprintf(stderr, "top-k row %zu: got %d %d %d\n", r, ti[r * K], ti[r * K + 1],
                        ti[r * K + 2]);
        }
        CHECK(ok, "top-%zu (%s) does not match the dense maps", K, mode ? "mean" : "per head");
    }
    /* Row 0 under causal has one allowed key: its top-3 is key 0, then zero-weight keys 1, 2. */
    CHECK(ti[0] == 0 && ti[1] == 1 && ti[2] == 2 && tv[1] == 0.0f,
          "top-k ties must go to the lower index: %d %d %d", ti[0], ti[1], ti[2]);
    free(tv), free(ti);
    mha_case_free(&c);
    free(x), free(out), free(out2), free(all), free(mean), free(sub);
}

/* Cross-attention with kdim, vdim != E and separate projection weights, against a double
 * reference built from the SDPA reference. */
static void test_cross_kdim(attn_pool *pool) {
    const size_t N = 2, L = 5, S = 7, E = 12, H = 3, KD = 5, VD = 9, Dh = E / H;
    float *wq = frand_new(E * E), *wk = frand_new(E * KD), *wv = frand_new(E * VD);
    float *bin = frand_new(3 * E), *wo = frand_new(E * E), *bo = frand_new(E);
    float *xq = frand_new(N * L * E), *xk = frand_new(N * S * KD), *xv = frand_new(N * S * VD);
    float *out = malloc(N * L * E * 4);
    attn_mha_dims d = {.n = N, .l = L, .s = S, .e = E, .h = H, .kdim = KD, .vdim = VD};
    attn_opts o = {0};
    attn_error err = {0};
    attn_plan p;
    CHECK(attn_mha_plan(&p, &d, &o, NULL, attn_pool_slots(pool), &err) == ATTN_OK, "%s", err.msg);
    void *ws = ws_new(&p);
    attn_mha_params prm = {.q_proj_weight = wq,
                           .k_proj_weight = wk,
                           .v_proj_weight = wv,
                           .in_proj_bias = bin,
                           .out_proj_weight = wo,
                           .out_proj_bias = bo};
    CHECK(attn_mha_forward(&p, ws, out, NULL, xq, xk, xv, &prm, pool, &err) == ATTN_OK, "%s",
          err.msg);
    double worst = 0;
    for (size_t n = 0; n < N; n++) {
        /* project in double, then per head in float for the SDPA reference */
        float q[5 * 12], k[7 * 12], v[7 * 12], qh[5 * 4], kh[7 * 4], vh[7 * 4];
        double cat[5 * 12], ro[5 * 4], rw[5 * 7];
        for (size_t i = 0; i < L; i++)
            for (size_t e = 0; e < E; e++) {
                double s = (double)bin[e];
                for (size_t c = 0; c < E; c++)
                    s += (double)xq[(n * L + i) * E + c] * (double)wq[e * E + c];
                q[i * E + e] = (float)s;
            }
        for (size_t j = 0; j < S; j++)
            for (size_t e = 0; e < E; e++) {
                double sk = (double)bin[E + e], sv = (double)bin[2 * E + e];
                for (size_t c = 0; c < KD; c++)
                    sk += (double)xk[(n * S + j) * KD + c] * (double)wk[e * KD + c];
                for (size_t c = 0; c < VD; c++)
                    sv += (double)xv[(n * S + j) * VD + c] * (double)wv[e * VD + c];
                k[j * E + e] = (float)sk;
                v[j * E + e] = (float)sv;
            }
        for (size_t h = 0; h < H; h++) {
            for (size_t i = 0; i < L; i++)
                memcpy(qh + i * Dh, q + i * E + h * Dh, Dh * 4);
            for (size_t j = 0; j < S; j++) {
                memcpy(kh + j * Dh, k + j * E + h * Dh, Dh * 4);
                memcpy(vh + j * Dh, v + j * E + h * Dh, Dh * 4);
            }
            ref_attend(ro, rw, qh, kh, vh, L, S, Dh, Dh, 1.0 / sqrt((double)Dh), NULL, 0, 0, 1, 1);
            for (size_t i = 0; i < L; i++)
                for (size_t c = 0; c < Dh; c++)
                    cat[i * E + h * Dh + c] = ro[i * Dh + c];
        }
        for (size_t i = 0; i < L; i++)
            for (size_t e = 0; e < E; e++) {
                double s = (double)bo[e];
                for (size_t c = 0; c < E; c++)
                    s += cat[i * E + c] * (double)wo[e * E + c];
                worst = fmax(worst, fabs(s - (double)out[(n * L + i) * E + e]));
            }
    }
    CHECK(worst < 1e-4, "cross-attention with kdim/vdim differs from the reference by %.3g", worst);
    free(ws), free(wq), free(wk), free(wv), free(bin), free(wo), free(bo), free(xq), free(xk),
        free(xv), free(out);
}

/* ---- planning from shapes, then binding the data ------------------------------------------ */

/* The name of the first field in which plans a and b differ, or NULL when they are the same in
 * every field (private ones included). */
static const char *plan_diff(const attn_plan *a, const attn_plan *b) {
#define SAME(f)                                                                                    \
    if (a->f != b->f)                                                                              \
    return #f
    SAME(workspace_bytes);
    SAME(out_elems);
    SAME(weights_elems);
    SAME(index_elems);
    SAME(job_bytes);
    SAME(flops);
    SAME(kind);
    SAME(mha.n);
    SAME(mha.l);
    SAME(mha.s);
    SAME(mha.e);
    SAME(mha.h);
    SAME(mha.kdim);
    SAME(mha.vdim);
    SAME(sd.n);
    SAME(sd.h);
    SAME(sd.l);
    SAME(sd.s);
    SAME(sd.d);
    SAME(sd.dv);
    SAME(opts.weights);
    SAME(opts.heads);
    SAME(opts.n_heads);
    SAME(opts.top_k);
    SAME(opts.has_scale);
    SAME(opts.scale);
    SAME(opts.max_bytes);
    SAME(opts.path);
    SAME(opts.block_q);
    SAME(opts.block_k);
    SAME(masks.causal);
    SAME(masks.key_lengths);
    SAME(masks.key_mask);
    SAME(masks.key_mask_n);
    SAME(masks.attn_mask);
    SAME(masks.attn_mask_n);
    SAME(masks.attn_mask_h);
    SAME(masks.attn_bias);
    SAME(masks.attn_bias_n);
    SAME(masks.attn_bias_h);
    SAME(masks.shape_only);
    SAME(nslots);
    SAME(bq);
    SAME(bk);
    SAME(nqb);
    SAME(slot_floats);
    SAME(tiled);
    SAME(scale);
#undef SAME
    return NULL;
}

/* masks with every pointer dropped: each mask present by its extents alone. */
static attn_masks shape_of(const attn_masks *m) {
    attn_masks s = *m;
    s.shape_only =
        (m->key_lengths ? ATTN_MASK_KEY_LENGTHS : 0u) | (m->key_mask ? ATTN_MASK_KEY_MASK : 0u) |
        (m->attn_mask ? ATTN_MASK_ATTN_MASK : 0u) | (m->attn_bias ? ATTN_MASK_ATTN_BIAS : 0u);
    s.key_lengths = NULL;
    s.key_mask = NULL;
    s.attn_mask = NULL;
    s.attn_bias = NULL;
    return s;
}

/* Plans an MHA (sdpa false) or SDPA job of the bind test's shapes. */
static int bind_plan(attn_plan *p, bool sdpa, const attn_opts *o, const attn_masks *m,
                     attn_error *err) {
    attn_mha_dims md = {.n = 3, .l = 5, .s = 7, .e = 16, .h = 4};
    attn_sdpa_dims sd = {.n = 3, .h = 4, .l = 5, .s = 7, .d = 3, .dv = 2};
    return sdpa ? attn_sdpa_plan(p, &sd, o, m, 2, err) : attn_mha_plan(p, &md, o, m, 2, err);
}

/* Planning from the shapes (shape-only masks, a head subset without its indices) then binding
 * the data gives the plan that planning with the data gives, in every field: MHA and SDPA, every
 * causal mode, every set of masks, four kinds of options. Then what bind refuses. */
static void test_plan_bind(void) {
    enum { N = 3, H = 4, L = 5, S = 7 };
    int32_t kl[N] = {S, 0, 3};
    uint8_t km[N * S], am[H * L * S];
    float ab[N * L * S];
    for (size_t i = 0; i < sizeof km; i++)
        km[i] = (uint8_t)(i % 3 != 0);
    for (size_t i = 0; i < sizeof am; i++)
        am[i] = (uint8_t)(i % 5 != 1);
    for (size_t i = 0; i < N * L * S; i++)
        ab[i] = frand();
    uint32_t heads[2] = {3, 1};
    const attn_opts optss[4] = {
        {0},
        {.weights = ATTN_WEIGHTS_PER_HEAD, .heads = heads, .n_heads = 2},
        {.weights = ATTN_WEIGHTS_MEAN, .top_k = 3, .has_scale = true, .scale = 0.5f},
        {.path = ATTN_PATH_DIRECT, .block_q = 2, .max_bytes = 1u << 20},
    };
    size_t cases = 0, bad = 0;
    for (int sdpa = 0; sdpa < 2; sdpa++)
        for (int causal = 0; causal < 3; causal++)
            for (unsigned which = 0; which < 16; which++)
                for (size_t oi = 0; oi < 4; oi++) {
                    attn_masks m = {.causal = (attn_causal)causal};
                    if (which & 1)
                        m.key_lengths = kl;
                    if (which & 2)
                        m.key_mask = km, m.key_mask_n = N;
                    if (which & 4)
                        m.attn_mask = am, m.attn_mask_n = 1, m.attn_mask_h = H;
                    if (which & 8)
                        m.attn_bias = ab, m.attn_bias_n = N, m.attn_bias_h = 0;
                    attn_masks shape = shape_of(&m);
                    attn_opts o_shape = optss[oi];
                    o_shape.heads = NULL;
                    attn_plan want, p;
                    attn_error err = {0};
                    cases++;
                    int rc = bind_plan(&want, sdpa, &optss[oi], &m, &err);
                    if (rc == ATTN_OK)
                        rc = bind_plan(&p, sdpa, &o_shape, &shape, &err);
                    if (rc == ATTN_OK) {
                        CHECK(p.job_bytes == want.job_bytes &&
                                  p.weights_elems == want.weights_elems,
                              "the shapes' plan has other sizes than the data's");
                        rc = attn_plan_bind(&p, &optss[oi], &m, &err);
                    }
                    const char *diff = rc == ATTN_OK ? plan_diff(&p, &want) : "status";
                    if (diff && bad++ < 5)
                        CHECK(false, "%s causal %d masks %#x opts %zu: bound plan differs in %s %s",
                              sdpa ? "sdpa" : "mha", causal, which, oi, diff, err.msg);
                }
    CHECK(bad == 0, "%zu of %zu bound plans differ from the plans made with the data", bad, cases);

    /* A plan made with data can be bound again, to other data of the same shapes. */
    attn_masks m = {.causal = ATTN_CAUSAL_TOP_LEFT, .key_lengths = kl};
    int32_t kl2[N] = {1, 2, 3};
    attn_masks m2 = {.causal = ATTN_CAUSAL_TOP_LEFT, .key_lengths = kl2};
    attn_plan p, want;
    attn_error err = {0};
    CHECK(bind_plan(&p, true, NULL, &m, &err) == ATTN_OK &&
              bind_plan(&want, true, NULL, &m2, &err) == ATTN_OK &&
              attn_plan_bind(&p, NULL, &m2, &err) == ATTN_OK && !plan_diff(&p, &want),
          "rebinding to other key lengths: %s", err.msg);

    /* What bind refuses: ATTN_ERR_ARG or ATTN_ERR_SHAPE, a message naming the cause, and the
     * plan unchanged. */
    uint32_t bad_heads[2] = {1, H};
    int32_t bad_kl[N] = {2, S + 1, 0};
    attn_opts per_head = {.weights = ATTN_WEIGHTS_PER_HEAD, .heads = heads, .n_heads = 2};
    attn_opts per_head_bad = per_head, per_head_1 = per_head, top2 = {.top_k = 2};
    per_head_bad.heads = bad_heads;
    per_head_1.n_heads = 1;
    attn_opts per_head_shape = per_head;
    per_head_shape.heads = NULL;
    attn_masks km1 = {.key_mask = km, .key_mask_n = 1}, kmN = {.key_mask = km, .key_mask_n = N};
    attn_masks am1 = {.attn_mask = am, .attn_mask_n = 1, .attn_mask_h = H};
    attn_masks am11 = {.attn_mask = am, .attn_mask_n = 0, .attn_mask_h = 1};
    attn_masks klm = {.key_lengths = kl}, bad_klm = {.key_lengths = bad_kl};
    attn_masks klkm = {.key_lengths = kl, .key_mask = km, .key_mask_n = N};
    attn_masks causal = {.causal = ATTN_CAUSAL_BOTTOM_RIGHT, .key_lengths = kl};
    attn_masks none = {0}, kmN_shape = shape_of(&kmN);
    struct {
        const char *what;
        bool sdpa;
        const attn_opts *plan_o, *bind_o;
        attn_masks plan_m; /* given by its shape only */
        const attn_masks *bind_m;
        int code;
        const char *says;
    } refused[] = {
        {"a mask not planned", true, NULL, NULL, shape_of(&klm), &klkm, ATTN_ERR_ARG, "key_mask"},
        {"a planned mask missing", false, NULL, NULL, shape_of(&kmN), &none, ATTN_ERR_ARG,
         "key_mask"},
        {"a mask without data", true, NULL, NULL, shape_of(&kmN), &kmN_shape, ATTN_ERR_ARG,
         "no data"},
        {"other key_mask rows", true, NULL, NULL, shape_of(&km1), &kmN, ATTN_ERR_SHAPE, "key_mask"},
        {"other attn_mask extents", false, NULL, NULL, shape_of(&am1), &am11, ATTN_ERR_SHAPE,
         "attn_mask"},
        {"a key length over S", true, NULL, NULL, shape_of(&klm), &bad_klm, ATTN_ERR_ARG,
         "key_lengths[1]"},
        {"another causal mode", false, NULL, NULL, shape_of(&klm), &causal, ATTN_ERR_ARG, "causal"},
        {"a head out of range", false, &per_head_shape, &per_head_bad, none, &none, ATTN_ERR_ARG,
         "heads[1]"},
        {"another head count", true, &per_head_shape, &per_head_1, none, &none, ATTN_ERR_ARG,
         "options"},
        {"heads without indices", true, &per_head_shape, &per_head_shape, none, &none, ATTN_ERR_ARG,
         "head subset"},
        {"other options", false, NULL, &top2, none, &none, ATTN_ERR_ARG, "options"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        attn_plan before;
        err = (attn_error){0};
        CHECK(bind_plan(&p, refused[i].sdpa, refused[i].plan_o, &refused[i].plan_m, &err) ==
                  ATTN_OK,
              "%s: plan: %s", refused[i].what, err.msg);
        before = p;
        int rc = attn_plan_bind(&p, refused[i].bind_o, refused[i].bind_m, &err);
        CHECK(rc == refused[i].code && strstr(err.msg, refused[i].says),
              "%s: bind gave %s \"%s\", want %s naming %s", refused[i].what,
              attn_status_name((attn_status)rc), err.msg,
              attn_status_name((attn_status)refused[i].code), refused[i].says);
        CHECK(!plan_diff(&p, &before), "%s: a refused bind changed the plan", refused[i].what);
    }
    err = (attn_error){0};
    attn_masks odd = {.shape_only = 1u << 7};
    CHECK(bind_plan(&p, true, NULL, &odd, &err) == ATTN_ERR_ARG && strstr(err.msg, "shape_only"),
          "unknown shape_only bits must be refused: %s", err.msg);
    err = (attn_error){0};
    CHECK(attn_plan_bind(NULL, NULL, NULL, &err) == ATTN_ERR_ARG, "bind without a plan: %s",
          err.msg);

    /* Only a bound plan runs: the forwards and the batch refuse one that waits for its data, and
     * once bound it computes what the plan made with the data computes, bit for bit. */
    enum { D = 3, Dv = 2, E = 16 };
    attn_masks all = {.causal = ATTN_CAUSAL_BOTTOM_RIGHT,
                      .key_lengths = kl,
                      .key_mask = km,
                      .key_mask_n = N,
                      .attn_mask = am,
                      .attn_mask_n = 1,
                      .attn_mask_h = H,
                      .attn_bias = ab,
                      .attn_bias_n = N};
    attn_masks all_shape = shape_of(&all);
    float *q = frand_new(N * H * L * D), *k = frand_new(N * H * S * D),
          *v = frand_new(N * H * S * Dv);
    float out[N * H * L * Dv], out_want[N * H * L * Dv];
    err = (attn_error){0};
    CHECK(bind_plan(&want, true, NULL, &all, &err) == ATTN_OK &&
              bind_plan(&p, true, NULL, &all_shape, &err) == ATTN_OK,
          "plan: %s", err.msg);
    void *ws = ws_new(&p);
    CHECK(attn_sdpa_forward(&p, ws, out, NULL, q, k, v, NULL, &err) == ATTN_ERR_ARG &&
              strstr(err.msg, "attn_plan_bind"),
          "an SDPA forward on an unbound plan: %s", err.msg);
    err = (attn_error){0};
    CHECK(attn_plan_bind(&p, NULL, &all, &err) == ATTN_OK &&
              attn_sdpa_forward(&p, ws, out, NULL, q, k, v, NULL, &err) == ATTN_OK &&
              attn_sdpa_forward(&want, ws, out_want, NULL, q, k, v, NULL, &err) == ATTN_OK,
          "bound SDPA: %s", err.msg);
    CHECK(memcmp(out, out_want, sizeof out) == 0, "the bound plan computes something else");
    free(ws), free(q), free(k), free(v);

    float *x = frand_new(N * L * E), *win = frand_new(3 * E * E), *wout = frand_new(E * E);
    float mout[N * L * E];
    attn_mha_params prm = {.in_proj_weight = win, .out_proj_weight = wout};
    err = (attn_error){0};
    CHECK(bind_plan(&p, false, &per_head_shape, &none, &err) == ATTN_OK, "plan: %s", err.msg);
    ws = ws_new(&p);
    CHECK(attn_mha_forward(&p, ws, mout, NULL, x, x, x, &prm, NULL, &err) == ATTN_ERR_ARG &&
              strstr(err.msg, "attn_plan_bind"),
          "an MHA forward on an unbound plan: %s", err.msg);
    attn_mha_batch_job job = {.plan = &p, .out = mout, .query = x, .key = x, .value = x};
    attn_batch_plan bp;
    err = (attn_error){0};
    CHECK(attn_mha_batch_plan(&bp, &job, 1, &prm, 0, &err) == ATTN_OK, "batch plan: %s", err.msg);
    void *bws = aligned_alloc(64, (bp.workspace_bytes + 63) / 64 * 64);
    CHECK(attn_mha_batch_forward(&bp, bws, &job, 1, &prm, NULL, &err) == ATTN_ERR_ARG &&
              strstr(err.msg, "attn_plan_bind"),
          "a batch with an unbound plan: %s", err.msg);
    free(bws), free(ws), free(x), free(win), free(wout);
}

/* ---- limits and errors -------------------------------------------------------------------- */

static void test_limits_and_errors(void) {
    attn_error err = {0};
    attn_plan p;
    attn_mha_dims big = {.n = 1, .l = 4096, .s = 4096, .e = 512, .h = 8};
    attn_opts o = {.weights = ATTN_WEIGHTS_PER_HEAD, .max_bytes = 64u << 20};
    CHECK(attn_mha_plan(&p, &big, &o, NULL, 2, &err) == ATTN_ERR_LIMIT,
          "an over-cap job must be refused (job %zu bytes)", p.job_bytes);
    CHECK(strstr(err.msg, "limit") != NULL, "the message must name the limit: %s", err.msg);
    /* The same job without weights fits: the tiled path needs O(block) scratch. */
    attn_opts o2 = {.max_bytes = 64u << 20};
    err = (attn_error){0};
    CHECK(attn_mha_plan(&p, &big, &o2, NULL, 2, &err) == ATTN_OK, "%s", err.msg);
    CHECK(p.workspace_bytes - (size_t)4 * 4 * 4096 * 512 < (1u << 20),
          "tiled scratch beyond the projections should be small, is %zu bytes",
          p.workspace_bytes - (size_t)4 * 4 * 4096 * 512);

    attn_mha_dims bad = {.n = 1, .l = 4, .s = 4, .e = 10, .h = 3};
    err = (attn_error){0};
    CHECK(attn_mha_plan(&p, &bad, NULL, NULL, 1, &err) == ATTN_ERR_SHAPE, "E %% H != 0: %s",
          err.msg);
    attn_mha_dims zero = {.n = 1, .l = 0, .s = 4, .e = 8, .h = 2};
    err = (attn_error){0};
    CHECK(attn_mha_plan(&p, &zero, NULL, NULL, 1, &err) == ATTN_ERR_SHAPE, "L = 0: %s", err.msg);
    attn_mha_dims huge = {.n = SIZE_MAX / 2, .l = 4, .s = 4, .e = 8, .h = 2};
    err = (attn_error){0};
    CHECK(attn_mha_plan(&p, &huge, NULL, NULL, 1, &err) == ATTN_ERR_OVERFLOW, "overflow: %s",
          err.msg);
    attn_sdpa_dims sd = {1, 1, 3, 4, 2, 2};
    int32_t kl[1] = {5};
    attn_masks m = {.key_lengths = kl};
    err = (attn_error){0};
    CHECK(attn_sdpa_plan(&p, &sd, NULL, &m, 1, &err) == ATTN_ERR_ARG, "key length > S: %s",
          err.msg);
    attn_opts ok5 = {.weights = ATTN_WEIGHTS_PER_HEAD, .top_k = 5};
    err = (attn_error){0};
    CHECK(attn_sdpa_plan(&p, &sd, &ok5, NULL, 1, &err) == ATTN_ERR_ARG, "top_k > S: %s", err.msg);
    uint32_t hd[1] = {1};
    attn_opts oh = {.weights = ATTN_WEIGHTS_PER_HEAD, .heads = hd, .n_heads = 1};
    err = (attn_error){0};
    CHECK(attn_sdpa_plan(&p, &sd, &oh, NULL, 1, &err) == ATTN_ERR_ARG, "head 1 of 1: %s", err.msg);
    /* first error wins */
    err = (attn_error){0};
    attn_sdpa_plan(&p, &sd, &ok5, NULL, 1, &err);
    attn_mha_plan(&p, &bad, NULL, NULL, 1, &err);
    CHECK(err.code == ATTN_ERR_ARG, "the first error must win, got %s", attn_status_name(err.code));

    /* float32 overflow is reported, not returned as garbage */
    attn_sdpa_dims d1 = {1, 1, 2, 2, 2, 2};
    float q[4] = {1e30f, 1e30f, 1, 1}, v[4] = {1, 2, 3, 4}, out[4];
    attn_opts on = {0};
    err = (attn_error){0};
    CHECK(attn_sdpa_plan(&p, &d1, &on, NULL, 1, &err) == ATTN_OK, "%s", err.msg);
    void *ws = ws_new(&p);
    CHECK(attn_sdpa_forward(&p, ws, out, NULL, q, q, v, NULL, &err) == ATTN_ERR_NUMERIC,
          "overflowing logits must give ATTN_ERR_NUMERIC, got %s", attn_status_name(err.code));
    free(ws);
}

/* ---- FLOP count --------------------------------------------------------------------------- */

/* The FLOP count as the plan defined it before it was closed-form: every row's limit (the
 * causal limit and the key length; cell masks not counted), one row at a time. */
static double flops_by_rows(const attn_sdpa_dims *d, const attn_masks *m) {
    double cells = 0;
    for (size_t n = 0; n < d->n; n++)
        for (size_t i = 0; i < d->l; i++) {
            size_t lim = d->s;
            if (m->key_lengths && (size_t)m->key_lengths[n] < lim)
                lim = (size_t)m->key_lengths[n];
            if (m->causal == ATTN_CAUSAL_TOP_LEFT && i + 1 < lim)
                lim = i + 1;
            if (m->causal == ATTN_CAUSAL_BOTTOM_RIGHT) {
                size_t c = i + 1 + d->s > d->l ? i + 1 + d->s - d->l : 0;
                lim = c < lim ? c : lim;
            }
            cells += (double)lim;
        }
    return 2.0 * cells * (double)d->h * (double)(d->d + d->dv);
}

static double thread_cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* plan.flops is closed-form and equals the row-by-row count exactly: every causal mode, L below,
 * equal to and above S, with and without key lengths (0 and S included), SDPA and MHA. And
 * planning a huge job costs no time proportional to N x L. */
static void test_flops_closed_form(void) {
    int32_t kl[7];
    size_t mismatches = 0, cases = 0;
    for (size_t t = 0; t < 3000; t++) {
        attn_sdpa_dims d = {.n = 1 + t % 7,
                            .h = 1 + t % 3,
                            .l = 1 + (rng_state >> 7) % 97,
                            .s = 1 + (rng_state >> 23) % 97,
                            .d = 1 + t % 5,
                            .dv = 1 + t % 4};
        frand();
        attn_masks m = {.causal = (attn_causal)(t % 3)};
        if (t % 2) {
            for (size_t n = 0; n < d.n; n++)
                kl[n] = (int32_t)(n == 0 ? d.s : n == 1 ? 0 : (rng_state >> (n * 5)) % (d.s + 1));
            m.key_lengths = kl;
        }
        attn_plan p;
        attn_error err = {0};
        cases++;
        if (attn_sdpa_plan(&p, &d, NULL, &m, 1, &err) != ATTN_OK ||
            p.flops != flops_by_rows(&d, &m)) {
            if (mismatches++ < 5)
                CHECK(false, "sdpa N=%zu L=%zu S=%zu causal %d%s: flops %.17g, rows give %.17g %s",
                      d.n, d.l, d.s, (int)m.causal, m.key_lengths ? " key lengths" : "", p.flops,
                      flops_by_rows(&d, &m), err.msg);
        }
        attn_mha_dims md = {.n = d.n, .l = d.l, .s = d.s, .e = 4 * d.h, .h = d.h};
        attn_sdpa_dims hd = {d.n, d.h, d.l, d.s, 4, 4};
        double proj = 2.0 * (double)(d.n * d.l) * (double)md.e * (double)md.e * 2.0 +
                      2.0 * (double)(d.n * d.s) * (double)md.e * (double)(2 * md.e);
        err = (attn_error){0};
        if (attn_mha_plan(&p, &md, NULL, &m, 1, &err) != ATTN_OK ||
            p.flops != flops_by_rows(&hd, &m) + proj) {
            if (mismatches++ < 5)
                CHECK(false, "mha N=%zu L=%zu S=%zu causal %d: flops %.17g, rows give %.17g %s",
                      d.n, d.l, d.s, (int)m.causal, p.flops, flops_by_rows(&hd, &m) + proj,
                      err.msg);
        }
    }
    CHECK(mismatches == 0, "%zu of %zu closed-form FLOP counts differ from the rows' sum",
          mismatches, 2 * cases);

    /* The request: N = L = S = 65536, bottom-right. Counting row by row took seconds;
     * closed-form it is microseconds. Thread CPU time, so other processes' load does not count. */
    attn_sdpa_dims big = {.n = 65536, .h = 1, .l = 65536, .s = 65536, .d = 1, .dv = 1};
    for (int c = 0; c < 3; c++) {
        attn_masks m = {.causal = (attn_causal)c};
        attn_plan p;
        attn_error err = {0};
        double t0 = thread_cpu_ms();
        int rc = attn_sdpa_plan(&p, &big, NULL, &m, 1, &err);
        double ms = thread_cpu_ms() - t0;
        CHECK(rc == ATTN_OK && ms < 20.0, "planning N = L = S = 65536 (causal %d) took %.1f ms: %s",
              c, ms, err.msg);
        double l = 65536.0, want = c ? l * (l + 1) / 2 : l * l;
        CHECK(p.flops == 2.0 * 65536.0 * want * 2.0, "causal %d: flops %.17g, want %.17g", c,
              p.flops, 2.0 * 65536.0 * want * 2.0);
    }
    /* L != S at the largest sizes: bottom-right with L > S leaves the first L - S rows empty. */
    attn_sdpa_dims wide = {.n = 3, .h = 1, .l = 65535, .s = 1000, .d = 1, .dv = 1};
    attn_masks br = {.causal = ATTN_CAUSAL_BOTTOM_RIGHT};
    attn_plan p;
    attn_error err = {0};
    CHECK(attn_sdpa_plan(&p, &wide, NULL, &br, 1, &err) == ATTN_OK &&
              p.flops == flops_by_rows(&wide, &br),
          "bottom-right L > S: %.17g vs %.17g", p.flops, flops_by_rows(&wide, &br));
}

/* ---- values near FLT_MAX ------------------------------------------------------------------ */

/* Runs SDPA (N=1, H, L, S, D, Dv) on the given tensors; returns the status. */
static int sdpa_run(size_t H, size_t L, size_t S, size_t D, size_t Dv, const float *q,
                    const float *k, const float *v, const attn_masks *m, const attn_opts *o,
                    float *out, float *w, attn_pool *pool, attn_error *err) {
    attn_sdpa_dims d = {1, H, L, S, D, Dv};
    attn_plan p;
    int rc = attn_sdpa_plan(&p, &d, o, m, attn_pool_slots(pool), err);
    if (rc != ATTN_OK)
        return rc;
    void *ws = ws_new(&p);
    attn_weights_out wo = {.values = w};
    rc = attn_sdpa_forward(&p, ws, out, w ? &wo : NULL, q, k, v, pool, err);
    free(ws);
    return rc;
}

/* The paths an SDPA job can take: direct (with weights), tiled with one tile, tiled with many
 * small tiles (the running max and sum carried across them). */
static attn_opts path_opts(int path, float *scale) {
    attn_opts o = {.has_scale = scale != NULL, .scale = scale ? *scale : 0.0f};
    if (path == 0) {
        o.weights = ATTN_WEIGHTS_PER_HEAD;
    } else {
        o.path = ATTN_PATH_TILED;
        if (path == 2)
            o.block_q = 3, o.block_k = 4;
    }
    return o;
}

/* The weighted mean of values near FLT_MAX is finite, and so is the answer: the sum must not
 * overflow before it is normalised (the q [[0]], k [[0], [0]], v [[3e38], [3e38]]); in
 * V, in the bias, on every path. A result really beyond float32 is still refused. */
static void test_near_float_max(attn_pool *pool) {
    const char *paths[3] = {"direct", "tiled", "tiled, small tiles"};
    for (int path = 0; path < 3; path++) {
        /* The request. */
        const float q0[1] = {0}, k0[2] = {0, 0}, v0[2] = {3e38f, 3e38f};
        float out[128], w[4096]; /* out holds (H, L, Dv) = (2, 7, 5) below */
        attn_opts o = path_opts(path, NULL);
        attn_error err = {0};
        int rc = sdpa_run(1, 1, 2, 1, 1, q0, k0, v0, NULL, &o, out, path ? NULL : w, pool, &err);
        CHECK(rc == ATTN_OK && out[0] == 3e38f, "%s: v [3e38, 3e38] gives %s %g: %s", paths[path],
              attn_status_name(rc), (double)out[0], err.msg);

        /* Many keys near +-FLT_MAX against the double reference (L 7, S 29, D 3, Dv 5, H 2),
         * with a causal mask so that rows have different numbers of keys. */
        enum { H = 2, L = 7, S = 29, D = 3, Dv = 5 };
        float q[H * L * D], k[H * S * D], v[H * S * Dv];
        for (size_t i = 0; i < H * L * D; i++)
            q[i] = frand();
        for (size_t i = 0; i < H * S * D; i++)
            k[i] = frand();
        for (size_t i = 0; i < H * S * Dv; i++) {
            float u = frand();
            v[i] = (u < -0.8f ? -1.0f : 1.0f) * (0.9f + 0.1f * fabsf(u)) * 3.4028235e38f;
        }
        attn_masks m = {.causal = ATTN_CAUSAL_BOTTOM_RIGHT};
        err = (attn_error){0};
        rc = sdpa_run(H, L, S, D, Dv, q, k, v, &m, &o, out, path ? NULL : w, pool, &err);
        CHECK(rc == ATTN_OK, "%s: values near FLT_MAX: %s", paths[path], err.msg);
        double worst = 0, ro[L * Dv], rw[L * S];
        for (size_t h = 0; rc == ATTN_OK && h < H; h++) {
            ref_attend(ro, rw, q + h * L * D, k + h * S * D, v + h * S * Dv, L, S, D, Dv,
                       1.0 / sqrt((double)D), &m, 0, h, 1, H);
            for (size_t i = 0; i < L * Dv; i++)
                worst = fmax(worst, fabs(ro[i] - (double)out[h * L * Dv + i]) / 3.4028235e38);
        }
        CHECK(worst < 1e-6, "%s: values near FLT_MAX differ from the reference by %.3g FLT_MAX",
              paths[path], worst);

        /* attn_bias near +-FLT_MAX: the cells with +3e38 dominate, equally (the small logits
         * vanish beside it in float32, as in PyTorch); -3e38 and -inf cells weigh nothing. */
        float bias[L * S];
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < S; j++)
                bias[i * S + j] = (i + j) % 3 == 0   ? 3e38f
                                  : (i + j) % 3 == 1 ? -3e38f
                                  : j % 2            ? -INFINITY
                                                     : 0.0f;
        attn_masks mb = {.attn_bias = bias};
        err = (attn_error){0};
        rc = sdpa_run(1, L, S, D, Dv, q, k, v, &mb, &o, out, path ? NULL : w, pool, &err);
        CHECK(rc == ATTN_OK, "%s: bias near FLT_MAX: %s", paths[path], err.msg);
        worst = 0;
        for (size_t i = 0; rc == ATTN_OK && i < L; i++) {
            size_t cnt = 0;
            double mean[Dv] = {0};
            for (size_t j = 0; j < S; j++)
                if ((i + j) % 3 == 0) {
                    cnt++;
                    for (size_t c = 0; c < Dv; c++)
                        mean[c] += (double)v[j * Dv + c];
                }
            for (size_t c = 0; c < Dv; c++)
                worst = fmax(worst,
                             fabs(mean[c] / (double)cnt - (double)out[i * Dv + c]) / 3.4028235e38);
            for (size_t j = 0; path == 0 && j < S; j++)
                worst = fmax(worst, fabs((double)w[i * S + j] - ((i + j) % 3 ? 0.0 : 1.0 / cnt)));
        }
        CHECK(worst < 1e-6, "%s: bias near FLT_MAX: off by %.3g", paths[path], worst);
    }

    /* MHA: a value projection that makes V near FLT_MAX (W_v = 1e38 I, inputs in [2, 3.4]);
     * the output projection is the identity, so the output is each head's weighted mean of V.
     * Direct, tiled and batched (two jobs). */
    enum { E = 4, HH = 2, LL = 6 };
    float win[3 * E * E] = {0}, wout[E * E] = {0}, x[LL * E], x2[LL * E];
    for (size_t e = 0; e < E; e++) {
        win[e * E + e] = 0.5f;            /* W_q */
        win[(E + e) * E + e] = 0.5f;      /* W_k */
        win[(2 * E + e) * E + e] = 1e38f; /* W_v */
        wout[e * E + e] = 1.0f;           /* out_proj */
    }
    for (size_t i = 0; i < LL * E; i++) {
        x[i] = 2.0f + 0.7f * (frand() + 1.0f);
        x2[i] = 2.0f + 0.7f * (frand() + 1.0f);
    }
    attn_mha_params prm = {.in_proj_weight = win, .out_proj_weight = wout};
    attn_mha_dims md = {.n = 1, .l = LL, .s = LL, .e = E, .h = HH};
    for (int path = 0; path < 3; path++) {
        attn_opts o = path_opts(path, NULL);
        attn_masks m = {.causal = ATTN_CAUSAL_TOP_LEFT};
        attn_plan p1, p2;
        attn_error err = {0};
        CHECK(attn_mha_plan(&p1, &md, &o, &m, attn_pool_slots(pool), &err) == ATTN_OK &&
                  attn_mha_plan(&p2, &md, &o, &m, attn_pool_slots(pool), &err) == ATTN_OK,
              "%s", err.msg);
        float out1[LL * E], out2[LL * E], wa[HH * LL * LL], wb[HH * LL * LL];
        attn_weights_out wo1 = {.values = wa}, wo2 = {.values = wb};
        void *ws = ws_new(&p1);
        int rc = attn_mha_forward(&p1, ws, out1, path ? NULL : &wo1, x, x, x, &prm, pool, &err);
        free(ws);
        CHECK(rc == ATTN_OK, "mha %s: V near FLT_MAX: %s", paths[path], err.msg);
        /* The reference: V = 1e38 x in float32; head h's output is its weighted mean. */
        double worst = 0;
        for (size_t h = 0; rc == ATTN_OK && h < HH; h++) {
            float qh[LL * 2], vh[LL * 2];
            double ro[LL * 2], rw[LL * LL];
            for (size_t i = 0; i < LL; i++)
                for (size_t c = 0; c < 2; c++) {
                    qh[i * 2 + c] = 0.5f * x[i * E + h * 2 + c];
                    vh[i * 2 + c] = 1e38f * x[i * E + h * 2 + c];
                }
            ref_attend(ro, rw, qh, qh, vh, LL, LL, 2, 2, 1.0 / sqrt(2.0), &m, 0, 0, 1, 1);
            for (size_t i = 0; i < LL; i++)
                for (size_t c = 0; c < 2; c++)
                    worst = fmax(worst, fabs(ro[i * 2 + c] - (double)out1[i * E + h * 2 + c]) /
                                            3.4028235e38);
        }
        CHECK(worst < 1e-6, "mha %s: V near FLT_MAX off by %.3g FLT_MAX", paths[path], worst);

        attn_error e1 = {0}, e2 = {0};
        attn_mha_batch_job jobs[2] = {{.plan = &p1,
                                       .out = out1,
                                       .weights = path ? NULL : &wo1,
                                       .query = x,
                                       .key = x,
                                       .value = x,
                                       .err = &e1},
                                      {.plan = &p2,
                                       .out = out2,
                                       .weights = path ? NULL : &wo2,
                                       .query = x2,
                                       .key = x2,
                                       .value = x2,
                                       .err = &e2}};
        float single[LL * E];
        memcpy(single, out1, sizeof single);
        attn_batch_plan bp;
        CHECK(attn_mha_batch_plan(&bp, jobs, 2, &prm, 0, &err) == ATTN_OK, "%s", err.msg);
        ws = aligned_alloc(64, (bp.workspace_bytes + 63) / 64 * 64);
        rc = attn_mha_batch_forward(&bp, ws, jobs, 2, &prm, pool, &err);
        free(ws);
        CHECK(rc == ATTN_OK && jobs[0].status == ATTN_OK && jobs[1].status == ATTN_OK,
              "mha %s batched: V near FLT_MAX: %s %s", paths[path], e1.msg, e2.msg);
        CHECK(max_abs_diff(single, out1, LL * E) <= 1e-6 * 3.4028235e38,
              "mha %s: batched and alone differ by %.3g", paths[path],
              max_abs_diff(single, out1, LL * E));

        /* An output projection that adds two heads' 3e38-sized outputs: beyond float32. */
        float wsum[E * E] = {0};
        for (size_t e = 0; e < E; e++)
            wsum[e * E + e] = 1.0f, wsum[e * E + (e + 2) % E] = 1.0f;
        attn_mha_params over = {.in_proj_weight = win, .out_proj_weight = wsum};
        err = (attn_error){0};
        ws = ws_new(&p1);
        rc = attn_mha_forward(&p1, ws, out1, path ? NULL : &wo1, x, x, x, &over, pool, &err);
        free(ws);
        CHECK(rc == ATTN_ERR_NUMERIC, "mha %s: an output beyond float32 must be refused, got %s",
              paths[path], attn_status_name(rc));
    }
}

/* ---- kernels, pool, BLAS choice ----------------------------------------------------------- */

static void test_kernels(void) {
    const char *names[] = {"avx512", "avx2", "sse2"};
    __builtin_cpu_init();
    bool can[] = {__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"),
                  __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), true};
    enum { n = 1003 };
    static float x[n], y[n];
    for (size_t i = 0; i < n; i++)
        x[i] = -100.0f + 100.0f * (float)i / (float)(n - 1);
    x[5] = -INFINITY;
    for (int s = 0; s < 3; s++) {
        if (!can[s])
            continue;
        const attnk_set *ks = attnk_get_named(names[s]);
        CHECK(ks != NULL, "kernel set %s missing", names[s]);
        if (!ks)
            continue;
        memcpy(y, x, sizeof x);
        float sum = ks->exp_sum(y, n, 0.0f);
        double worst = 0, ref = 0;
        for (size_t i = 0; i < n; i++) {
            double e = exp((double)x[i]);
            ref += e;
            if (e > 1.2e-38)
                worst = fmax(worst, fabs((double)y[i] - e) / e);
            else
                CHECK(y[i] >= 0.0f && y[i] < 1.2e-38f, "%s: exp(%g) = %g", names[s], (double)x[i],
                      (double)y[i]);
        }
        CHECK(y[5] == 0.0f, "%s: exp(-inf) = %g", names[s], (double)y[5]);
        CHECK(worst < 3.0 * 5.96e-8, "%s: exp relative error %.3g (over 3 ulp)", names[s], worst);
        CHECK(fabs((double)sum - ref) / ref < 1e-6, "%s: exp sum %.8g vs %.8g", names[s],
              (double)sum, ref);
        CHECK(ks->row_max(x, n) == 0.0f && ks->row_max(x, 0) == -INFINITY, "%s: row_max", names[s]);
        CHECK(ks->all_finite(y, n) && !ks->all_finite(x, n), "%s: all_finite", names[s]);
    }
}

typedef struct pool_probe {
    atomic_int hits[1000];
    atomic_int bad_slot;
    size_t slots;
} pool_probe;

static void probe_task(void *ctx, size_t t, size_t slot) {
    pool_probe *pp = ctx;
    atomic_fetch_add(&pp->hits[t], 1);
    if (slot >= pp->slots)
        atomic_store(&pp->bad_slot, 1);
}

typedef struct pool_caller {
    attn_pool *pool;
    pool_probe probe;
} pool_caller;

static void *pool_caller_main(void *arg) {
    pool_caller *pc = arg;
    for (int r = 0; r < 50; r++)
        attn_pool_run(pc->pool, 1000, probe_task, &pc->probe);
    return NULL;
}

static void test_pool(void) {
    attn_error err = {0};
    attn_pool *pool = attn_pool_create(3, &err);
    CHECK(pool != NULL, "%s", err.msg);
    if (!pool)
        return;
    CHECK(attn_pool_slots(pool) == 4 && attn_pool_slots(NULL) == 1, "slots");
    /* two callers at once, each counting its own tasks */
    static pool_caller pc[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        memset(&pc[i], 0, sizeof pc[i]);
        pc[i].pool = pool;
        pc[i].probe.slots = attn_pool_slots(pool);
        pthread_create(&th[i], NULL, pool_caller_main, &pc[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        bool all50 = true;
        for (int t = 0; t < 1000; t++)
            all50 = all50 && atomic_load(&pc[i].probe.hits[t]) == 50;
        CHECK(all50, "caller %d: every task must run exactly once per run", i);
        CHECK(!atomic_load(&pc[i].probe.bad_slot), "caller %d: slot out of range", i);
    }
    attn_pool_destroy(pool);
    attn_pool_destroy(NULL);
}

/* ---- batches across jobs ------------------------------------------------------------------ */

/* One job of the batch tests: its dims, masks, options, inputs and both answers. */
typedef struct batch_case {
    attn_mha_dims d;
    attn_masks m;
    attn_opts o;
    int32_t kl[4];
    uint8_t *am;
    float *bias;
    float *xq, *xk, *xv; /* xk == xq for self-attention; xv == xk when shared */
    attn_plan p;
    float *out, *out1; /* batched, alone: (N, L, E) */
    float *w, *w1;     /* weights_elems, or NULL */
    int32_t *ix, *ix1; /* index_elems, or NULL */
    attn_weights_out wo, wo1;
} batch_case;

/* Builds case k of a batch on E, H, kdim, vdim: varied shapes, masks and weights modes. */
static void batch_case_make(batch_case *c, size_t k, size_t e, size_t h, size_t kdim, size_t vdim,
                            bool self, bool kv_shared, size_t nslots) {
    memset(c, 0, sizeof *c);
    size_t n = 1 + k % 3, l = 3 + 5 * k % 17, s = self ? l : 2 + 7 * k % 13;
    c->d = (attn_mha_dims){.n = n, .l = l, .s = s, .e = e, .h = h, .kdim = kdim, .vdim = vdim};
    switch (k % 6) {
    case 0:
        break;
    case 1:
        c->m.causal = ATTN_CAUSAL_TOP_LEFT;
        c->o.weights = ATTN_WEIGHTS_PER_HEAD;
        break;
    case 2:
        for (size_t i = 0; i < n; i++)
            c->kl[i] = (int32_t)(i == 1 ? 0 : s - i);
        c->m.key_lengths = c->kl;
        c->o.weights = ATTN_WEIGHTS_MEAN;
        break;
    case 3:
        c->am = malloc(l * s);
        for (size_t i = 0; i < l * s; i++)
            c->am[i] = (uint8_t)(frand() > -0.6f);
        c->m.attn_mask = c->am;
        c->o.weights = ATTN_WEIGHTS_PER_HEAD;
        c->o.top_k = s < 3 ? s : 3;
        break;
    case 4:
        c->bias = frand_new(n * h * l * s);
        c->m.attn_bias = c->bias;
        c->m.attn_bias_n = n;
        c->m.attn_bias_h = h;
        c->m.causal = ATTN_CAUSAL_BOTTOM_RIGHT;
        break;
    default:
        c->o.path = ATTN_PATH_TILED;
        c->o.block_q = 4;
        c->o.block_k = 5;
        c->o.has_scale = true;
        c->o.scale = 0.3f;
        break;
    }
    attn_error err = {0};
    CHECK(attn_mha_plan(&c->p, &c->d, &c->o, &c->m, nslots, &err) == ATTN_OK, "batch case %zu: %s",
          k, err.msg);
    c->xq = frand_new(n * l * e);
    c->xk = self ? c->xq : frand_new(n * s * kdim);
    c->xv = self || kv_shared ? c->xk : frand_new(n * s * vdim);
    c->out = calloc(c->p.out_elems, sizeof(float));
    c->out1 = calloc(c->p.out_elems, sizeof(float));
    if (c->p.weights_elems) {
        c->w = calloc(c->p.weights_elems, sizeof(float));
        c->w1 = calloc(c->p.weights_elems, sizeof(float));
        c->wo.values = c->w;
        c->wo1.values = c->w1;
    }
    if (c->p.index_elems) {
        c->ix = calloc(c->p.index_elems, sizeof(int32_t));
        c->ix1 = calloc(c->p.index_elems, sizeof(int32_t));
        c->wo.indices = c->ix;
        c->wo1.indices = c->ix1;
    }
}

static void batch_case_free(batch_case *c) {
    if (c->xv != c->xk)
        free(c->xv);
    if (c->xk != c->xq)
        free(c->xk);
    free(c->xq), free(c->am), free(c->bias), free(c->out), free(c->out1);
    free(c->w), free(c->w1), free(c->ix), free(c->ix1);
}

/* Runs count cases as one batch and each alone; the answers must agree to float32 rounding.
 * bad: the index of a case given inputs that overflow float32 (it alone must fail), or count. */
static void batch_compare(const char *what, batch_case *cs, size_t count,
                          const attn_mha_params *prm, attn_pool *pool, size_t bad) {
    attn_mha_batch_job jobs[16];
    attn_error errs[16];
    for (size_t i = 0; i < count; i++) {
        errs[i] = (attn_error){0};
        jobs[i] = (attn_mha_batch_job){.plan = &cs[i].p,
                                       .out = cs[i].out,
                                       .weights = cs[i].p.weights_elems ? &cs[i].wo : NULL,
                                       .query = cs[i].xq,
                                       .key = cs[i].xk,
                                       .value = cs[i].xv,
                                       .err = &errs[i],
                                       .status = -1};
    }
    attn_batch_plan bp;
    attn_error err = {0};
    if (attn_mha_batch_plan(&bp, jobs, count, prm, 0, &err) != ATTN_OK) {
        CHECK(false, "%s: batch plan: %s", what, err.msg);
        return;
    }
    void *ws = aligned_alloc(64, (bp.workspace_bytes + 63) / 64 * 64);
    int rc = attn_mha_batch_forward(&bp, ws, jobs, count, prm, pool, &err);
    CHECK(rc == ATTN_OK, "%s: batch forward: %s", what, err.msg);
    free(ws);
    size_t rows = 0;
    for (size_t i = 0; i < count && rc == ATTN_OK; i++) {
        batch_case *c = &cs[i];
        rows += c->d.n * c->d.l;
        attn_error e1 = {0};
        void *ws1 = ws_new(&c->p);
        int rc1 = attn_mha_forward(&c->p, ws1, c->out1, c->p.weights_elems ? &c->wo1 : NULL, c->xq,
                                   c->xk, c->xv, prm, pool, &e1);
        free(ws1);
        if (i == bad) {
            CHECK(jobs[i].status == ATTN_ERR_NUMERIC && errs[i].code == ATTN_ERR_NUMERIC &&
                      rc1 == ATTN_ERR_NUMERIC,
                  "%s: job %zu overflows: batch status %s, alone %s", what, i,
                  attn_status_name(jobs[i].status), attn_status_name(rc1));
            continue;
        }
        CHECK(jobs[i].status == ATTN_OK && errs[i].code == ATTN_OK,
              "%s: job %zu failed in the batch: %s", what, i, errs[i].msg);
        CHECK(rc1 == ATTN_OK, "%s: job %zu alone: %s", what, i, e1.msg);
        double dout = max_abs_diff(c->out, c->out1, c->p.out_elems);
        double dw = c->w ? max_abs_diff(c->w, c->w1, c->p.weights_elems) : 0;
        bool ix_same = !c->ix || !memcmp(c->ix, c->ix1, c->p.index_elems * sizeof(int32_t));
        CHECK(dout < 2e-6 && dw < 1e-6 && ix_same,
              "%s: job %zu batched vs alone: output %.3g, weights %.3g, indices %s", what, i, dout,
              dw, ix_same ? "same" : "differ");
    }
    CHECK(rc != ATTN_OK || bp.rows == rows, "%s: plan rows %zu, want %zu", what, bp.rows, rows);
}

static void test_batch(attn_pool *pool) {
    const size_t E = 24, H = 3, ns = attn_pool_slots(pool);
    float *win = frand_new(3 * E * E), *bin = frand_new(3 * E), *wout = frand_new(E * E);
    float *bout = frand_new(E), *wk = frand_new(E * 7), *wv = frand_new(E * 5);
    for (size_t i = 0; i < 3 * E * E; i++)
        win[i] *= 0.3f;
    attn_mha_params packed = {
        .in_proj_weight = win, .in_proj_bias = bin, .out_proj_weight = wout, .out_proj_bias = bout};
    attn_mha_params split = {.q_proj_weight = win,
                             .k_proj_weight = wk,
                             .v_proj_weight = wv,
                             .out_proj_weight = wout,
                             .out_proj_bias = bout};
    batch_case cs[12];

    /* Self-attention on in_proj_weight: one QKV GEMM; every mask and weights mode. */
    for (size_t k = 0; k < 12; k++)
        batch_case_make(&cs[k], k, E, H, E, E, true, true, ns);
    batch_compare("self", cs, 12, &packed, pool, 12);
    /* One job whose logits overflow float32 fails alone. */
    for (size_t i = 0; i < cs[4].d.n * cs[4].d.l * E; i++)
        cs[4].xq[i] = 1e30f;
    batch_compare("self, one overflowing", cs, 6, &packed, pool, 4);
    for (size_t k = 0; k < 12; k++)
        batch_case_free(&cs[k]);

    /* Cross-attention: key == value (one KV GEMM); separate values; self and cross mixed. */
    for (size_t k = 0; k < 6; k++)
        batch_case_make(&cs[k], k, E, H, E, E, false, true, ns);
    batch_compare("cross, key = value", cs, 6, &packed, pool, 6);
    for (size_t k = 0; k < 6; k++)
        batch_case_free(&cs[k]);
    for (size_t k = 0; k < 6; k++)
        batch_case_make(&cs[k], k, E, H, E, E, k % 2 == 0, k % 3 == 0, ns);
    batch_compare("self and cross mixed", cs, 6, &packed, pool, 6);
    for (size_t k = 0; k < 6; k++)
        batch_case_free(&cs[k]);
    /* q/k/v_proj_weight with kdim 7, vdim 5. */
    for (size_t k = 0; k < 5; k++)
        batch_case_make(&cs[k], k, E, H, 7, 5, false, false, ns);
    batch_compare("kdim and vdim", cs, 5, &split, pool, 5);

    /* Contracts: plans that differ, the cap, a count that does not match, no params. */
    attn_mha_batch_job jobs[2] = {
        {.plan = &cs[0].p, .out = cs[0].out, .query = cs[0].xq, .key = cs[0].xk, .value = cs[0].xv},
        {.plan = &cs[1].p, .out = cs[1].out, .query = cs[1].xq, .key = cs[1].xk, .value = cs[1].xv},
    };
    attn_batch_plan bp;
    attn_error err = {0};
    CHECK(attn_mha_batch_plan(&bp, jobs, 2, &split, 64, &err) == ATTN_ERR_LIMIT &&
              strstr(err.msg, "limit"),
          "a batch over max_bytes: %s", err.msg);
    err = (attn_error){0};
    CHECK(attn_mha_batch_plan(&bp, jobs, 2, &packed, 0, &err) == ATTN_ERR_ARG,
          "in_proj_weight with kdim != E must be refused: %s", err.msg);
    err = (attn_error){0};
    CHECK(attn_mha_batch_plan(&bp, jobs, 0, &split, 0, &err) == ATTN_ERR_ARG, "no jobs: %s",
          err.msg);
    err = (attn_error){0};
    CHECK(attn_mha_batch_plan(&bp, jobs, 2, &split, 0, &err) == ATTN_OK, "%s", err.msg);
    void *ws = aligned_alloc(64, (bp.workspace_bytes + 63) / 64 * 64);
    CHECK(attn_mha_batch_forward(&bp, ws, jobs, 1, &split, pool, &err) == ATTN_ERR_ARG,
          "a count other than planned: %s", err.msg);
    err = (attn_error){0};
    CHECK(attn_mha_batch_forward(&bp, ws, jobs, 2, NULL, pool, &err) == ATTN_ERR_ARG,
          "no params: %s", err.msg);
    free(ws);
    attn_plan other;
    attn_mha_dims d2 = cs[0].d;
    d2.h = 1;
    err = (attn_error){0};
    CHECK(attn_mha_plan(&other, &d2, NULL, NULL, ns, &err) == ATTN_OK, "%s", err.msg);
    jobs[1].plan = &other;
    CHECK(attn_mha_batch_plan(&bp, jobs, 2, &split, 0, &err) == ATTN_ERR_ARG &&
              strstr(err.msg, "does not match"),
          "plans with other heads: %s", err.msg);
    for (size_t k = 0; k < 5; k++)
        batch_case_free(&cs[k]);
    free(win), free(bin), free(wout), free(bout), free(wk), free(wv);
}

static void test_blas_choice(void) {
    static const char *table[][3] = {
        /* detected, best the CPU supports, expected choice */
        {"Prescott", "SkylakeX", "SkylakeX"}, /* the misdetected Xeon */
        {"Prescott", "Haswell", "Haswell"},       {"Haswell", "SkylakeX", "SkylakeX"},
        {"SkylakeX", "SkylakeX", "SkylakeX"},     {"Zen", "Haswell", "Zen"},
        {"Cooperlake", "SkylakeX", "Cooperlake"}, {"Sandybridge", "Haswell", "Haswell"},
        {"Core2", "Nehalem", "Nehalem"},          {"NewCore2099", "SkylakeX", "NewCore2099"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        char out[32];
        attn_blas_choose(table[i][0], table[i][1], out);
        CHECK(strcmp(out, table[i][2]) == 0, "detected %s, best %s: chose %s, want %s", table[i][0],
              table[i][1], out, table[i][2]);
    }
}

/* Runs this program's BLAS probe with ATTND_BLAS_CORETYPE=core (OPENBLAS_CORETYPE unset) into
 * line. False when it produced nothing or failed. */
static bool blas_probe_run(const char *self, const char *core, char *line, size_t n) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "env -u OPENBLAS_CORETYPE ATTND_BLAS_CORETYPE=%s '%s' --blas-probe",
             core, self);
    FILE *f = popen(cmd, "r");
    line[0] = '\0';
    bool got = f && fgets(line, (int)n, f);
    int rc = f ? pclose(f) : -1;
    return got && rc == 0;
}

/* Re-executes this program with ATTND_BLAS_CORETYPE forcing a core other than the one OpenBLAS
 * detects (Prescott, or Nehalem where OpenBLAS detects Prescott, as on some Xeons): attn_blas_setup
 * must re-exec and the child must then run the forced core. */
static void test_blas_reexec(const char *self) {
    char line[256];
    CHECK(blas_probe_run(self, "keep", line, sizeof line), "blas probe (keep) failed: %s", line);
    const char *forced = strncmp(line, "Prescott|", 9) == 0 ? "Nehalem" : "Prescott";
    char want[32];
    snprintf(want, sizeof want, "%s|", forced);
    CHECK(blas_probe_run(self, forced, line, sizeof line), "blas probe (%s) failed: %s", forced,
          line);
    CHECK(strncmp(line, want, strlen(want)) == 0 && strstr(line, "re-executed"),
          "forced core %s not active after re-exec: %s", forced, line);
}

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
    }
    test_flops_closed_form();
    test_limits_and_errors();
    test_plan_bind();
    attn_pool_destroy(pool);
    printf("test_attention: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
