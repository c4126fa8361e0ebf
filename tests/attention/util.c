/* util.c - test_attention's shared helpers: deterministic random floats, workspaces, the reference
 * SDPA in double straight from the definition (every mask), SDPA run against it, and
 * self-attention cases run through libattn. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "attention.h"
#include "attention_test.h"

/* ---- helpers ------------------------------------------------------------------------------ */

uint64_t rng_state = 0x9E3779B97F4A7C15u;

float frand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

float *frand_new(size_t n) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = frand();
    return x;
}

void *ws_new(const attn_plan *p) {
    return aligned_alloc(64, (p->workspace_bytes + 63) / 64 * 64 + 64);
}

double max_abs_diff(const float *a, const float *b, size_t n) {
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
void ref_attend(double *out, double *w, const float *q, const float *k, const float *v, size_t L,
                size_t S, size_t D, size_t Dv, double scale, const attn_masks *m, size_t n,
                size_t h, size_t N, size_t H) {
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
int sdpa_compare(size_t N, size_t H, size_t L, size_t S, size_t D, size_t Dv, const attn_masks *m,
                 const attn_opts *opts, attn_pool *pool, double *dout, double *dw) {
    attn_sdpa_dims d = {N, H, L, S, D, Dv, 0};
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

/* ---- MHA helpers -------------------------------------------------------------------------- */

mha_case mha_case_new(size_t n, size_t l, size_t e, size_t h) {
    mha_case c = {.d = {.n = n, .l = l, .s = l, .e = e, .h = h}};
    c.win = frand_new(3 * e * e);
    c.bin = frand_new(3 * e);
    c.wout = frand_new(e * e);
    c.bout = frand_new(e);
    return c;
}

void mha_case_free(mha_case *c) {
    free(c->win), free(c->bin), free(c->wout), free(c->bout);
}

/* Self-attention on x (N, L, E) into out (N, L, E), optional weights; returns the status. */
int mha_run(const mha_case *c, const float *x, float *out, attn_weights_out *w, const attn_opts *o,
            const attn_masks *m, attn_pool *pool, attn_error *err) {
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
