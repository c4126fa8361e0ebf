/* decode_topk.c - a decode session's top-k weights and trace (attention.h, "Decode sessions"):
 * a sequence appended in steps (its first K rows at once, so that every step has at least K
 * keys, then a row at a time or in chunks) gives, per step, the top-k weights of the whole
 * causal attn_mha_forward's rows (per head, a subset, the mean): the values within DECODE_TOL
 * of the whole call's, each index naming a key whose dense weight in the whole call is its
 * value; and with the trace, the whole call's trace rows, their first S columns and rows of k
 * and v. The plan and step refuse top_k without weights, over cap, and over a step's S.
 *
 * Legend: T the sequence length, E embedding, H heads, Dh = E / H, K the top-k count, l the
 * rows of a step, S = len + l the keys it attends. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "attention_test.h"

#define DECODE_TOL 1e-6 /* of each tensor's largest magnitude */

/* max |a - b| over max |b| of n values of b, a and b each strided (rows of w, lda and ldb
 * apart); -inf matches -inf only. */
static double rel_rows(const float *a, size_t lda, const float *b, size_t ldb, size_t rows,
                       size_t w) {
    double d = 0, m = 0;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < w; j++) {
            double x = a[i * lda + j], y = b[i * ldb + j];
            if (isinf(x) || isinf(y)) {
                d = x == y ? d : (double)INFINITY;
                continue;
            }
            d = fmax(d, fabs(x - y));
            m = fmax(m, fabs(y));
        }
    return m > 0 ? d / m : d;
}

/* The whole sequence x (T, E) in one causal forward with opts o: out (T, E), weights and the
 * trace when given. */
static int whole(const mha_case *c, const float *x, const attn_opts *o, float *out,
                 attn_weights_out *w, attn_trace *tr, attn_pool *pool) {
    attn_masks m = {.causal = ATTN_CAUSAL_TOP_LEFT};
    attn_plan p;
    attn_error err = {0};
    int rc = attn_mha_plan(&p, &c->d, o, &m, attn_pool_slots(pool), &err);
    void *ws = rc == ATTN_OK ? ws_new(&p) : NULL;
    attn_mha_params prm = {.in_proj_weight = c->win,
                           .in_proj_bias = c->bin,
                           .out_proj_weight = c->wout,
                           .out_proj_bias = c->bout};
    if (rc == ATTN_OK)
        rc = attn_mha_forward_traced(&p, ws, out, w, tr, x, x, x, &prm, pool, &err);
    CHECK(rc == ATTN_OK, "whole call: %s", err.msg);
    free(ws);
    return rc;
}

/* The rows of step k: the first K at once, then 1 (ones) or a cycle of chunks. */
static size_t step_rows(bool ones, size_t k, size_t t0, size_t T, size_t K) {
    static const size_t cycle[] = {2, 5, 1, 3};
    size_t l = k == 0 ? K : ones ? 1 : cycle[k % 4];
    return l < T - t0 ? l : T - t0;
}

/* Appends x (T, E) with top-k opts o (maps of them) and checks each step's values and indices
 * against the whole call's top-k (wv, wi: (maps, T, K)) and dense weights (dense: (maps, T,
 * T)); with the trace, each step's against the whole call's (tw). */
static void topk_session(const mha_case *c, const float *x, const attn_opts *o, size_t maps,
                         bool ones, const float *wv, const float *dense, const attn_trace *tw,
                         attn_pool *pool, const char *what) {
    const size_t T = c->d.l, E = c->d.e, H = c->d.h, Dh = E / H, K = o->top_k;
    attn_decode_dims d = {.e = E, .h = H, .cap = T, .max_rows = T};
    attn_decode_plan p;
    attn_error err = {0};
    if (attn_mha_decode_plan(&p, &d, o, attn_pool_slots(pool), &err) != ATTN_OK) {
        CHECK(false, "%s: plan: %s", what, err.msg);
        return;
    }
    CHECK(p.index_elems == p.weights_elems && p.weights_elems == maps * T * K,
          "%s: the plan's weights %zu and indices %zu, not %zu", what, p.weights_elems,
          p.index_elems, maps * T * K);
    attn_kv_cache kv = {.k = malloc(p.cache_bytes / 2), .v = malloc(p.cache_bytes / 2), .cap = T};
    void *ws = aligned_alloc(64, p.workspace_bytes);
    float *out = malloc(T * E * sizeof *out), *vals = malloc(p.weights_elems * sizeof *vals);
    int32_t *idx = malloc(p.index_elems * sizeof *idx);
    const size_t tcells = H * T * T + 1;
    attn_trace tr = {0};
    if (tw)
        tr = (attn_trace){.q = malloc(T * E * 4),
                          .k = malloc(T * E * 4),
                          .v = malloc(T * E * 4),
                          .scores = malloc(tcells * 4),
                          .masked = malloc(tcells * 4),
                          .weights = malloc(tcells * 4),
                          .heads = malloc(T * E * 4)};
    attn_mha_params prm = {.in_proj_weight = c->win,
                           .in_proj_bias = c->bin,
                           .out_proj_weight = c->wout,
                           .out_proj_bias = c->bout};
    double dv = 0, di = 0, dt = 0;
    for (size_t k = 0, t0 = 0; t0 < T; k++) {
        size_t l = step_rows(ones, k, t0, T, K), S = t0 + l;
        attn_weights_out wo = {.values = vals, .indices = idx};
        const float *row = x + t0 * E;
        int rc = attn_mha_decode_step_traced(&p, ws, &kv, out + t0 * E, &wo, tw ? &tr : NULL, row,
                                             row, row, l, &prm, pool, &err);
        CHECK(rc == ATTN_OK, "%s: step at %zu: %s", what, t0, err.msg);
        if (rc != ATTN_OK)
            break;
        for (size_t m = 0; m < maps; m++) {
            dv = fmax(dv, rel_rows(vals + m * l * K, K, wv + (m * T + t0) * K, K, l, K));
            for (size_t i = 0; i < l; i++) /* each index names a key of that weight */
                for (size_t j = 0; j < K; j++) {
                    int32_t at = idx[(m * l + i) * K + j];
                    double want = at >= 0 && (size_t)at < S
                                      ? (double)dense[(m * T + t0 + i) * T + (size_t)at]
                                      : (double)INFINITY;
                    di = fmax(di, fabs(want - (double)vals[(m * l + i) * K + j]));
                }
        }
        for (size_t h = 0; tw && h < H; h++) {
            const size_t hq = h * T * Dh, hm = h * T * T;
            dt = fmax(dt, rel_rows(tr.q + h * l * Dh, Dh, tw->q + hq + t0 * Dh, Dh, l, Dh));
            dt = fmax(dt, rel_rows(tr.heads + h * l * Dh, Dh, tw->heads + hq + t0 * Dh, Dh, l, Dh));
            dt = fmax(dt, rel_rows(tr.k + h * S * Dh, Dh, tw->k + hq, Dh, S, Dh));
            dt = fmax(dt, rel_rows(tr.v + h * S * Dh, Dh, tw->v + hq, Dh, S, Dh));
            dt = fmax(dt, rel_rows(tr.scores + h * l * S, S, tw->scores + hm + t0 * T, T, l, S));
            dt = fmax(dt, rel_rows(tr.masked + h * l * S, S, tw->masked + hm + t0 * T, T, l, S));
            dt = fmax(dt, rel_rows(tr.weights + h * l * S, S, tw->weights + hm + t0 * T, T, l, S));
        }
        CHECK(!tw || tr.scale == tw->scale, "%s: the trace's scale %g, the whole call's %g", what,
              (double)tr.scale, tw ? (double)tw->scale : 0.0);
        t0 += l;
    }
    CHECK(dv <= DECODE_TOL && di <= DECODE_TOL && dt <= DECODE_TOL,
          "%s: top-k values differ from the whole call's by %.3g, an index's dense weight from "
          "its value by %.3g, the trace by %.3g",
          what, dv, di, dt);
    free(kv.k), free(kv.v), free(ws), free(out), free(vals), free(idx);
    free(tr.q), free(tr.k), free(tr.v), free(tr.scores), free(tr.masked), free(tr.weights);
    free(tr.heads);
}

/* The refusals of top-k: without weights, over cap, over the first step's keys. */
static void topk_errors(const mha_case *c, const float *x) {
    attn_decode_dims d = {.e = c->d.e, .h = c->d.h, .cap = 8, .max_rows = 2};
    attn_decode_plan p;
    attn_error err = {0};
    attn_opts none = {.top_k = 2}, over = {.weights = ATTN_WEIGHTS_MEAN, .top_k = 9};
    CHECK(attn_mha_decode_plan(&p, &d, &none, 1, &err) == ATTN_ERR_ARG, "top_k without weights");
    err = (attn_error){0};
    CHECK(attn_mha_decode_plan(&p, &d, &over, 1, &err) == ATTN_ERR_ARG, "top_k over cap");
    attn_opts three = {.weights = ATTN_WEIGHTS_PER_HEAD, .top_k = 3};
    err = (attn_error){0};
    if (attn_mha_decode_plan(&p, &d, &three, 1, &err) != ATTN_OK) {
        CHECK(false, "top_k 3: %s", err.msg);
        return;
    }
    attn_kv_cache kv = {.k = malloc(p.cache_bytes / 2), .v = malloc(p.cache_bytes / 2), .cap = 8};
    void *ws = aligned_alloc(64, p.workspace_bytes);
    float *out = malloc(2 * c->d.e * sizeof *out), *vals = malloc(p.weights_elems * 4);
    int32_t *idx = malloc(p.index_elems * 4);
    attn_mha_params prm = {.in_proj_weight = c->win, .out_proj_weight = c->wout};
    attn_weights_out wo = {.values = vals, .indices = idx}, no_idx = {.values = vals};
    CHECK(attn_mha_decode_step(&p, ws, &kv, out, &wo, x, x, x, 2, &prm, NULL, &err) ==
                  ATTN_ERR_ARG &&
              kv.len == 0,
          "top_k 3 over a first step of 2 keys: %s", err.msg);
    err = (attn_error){0};
    CHECK(attn_mha_decode_step(&p, ws, &kv, out, &no_idx, x, x, x, 1, &prm, NULL, &err) ==
              ATTN_ERR_ARG,
          "top-k weights without an indices buffer");
    free(kv.k), free(kv.v), free(ws), free(out), free(vals), free(idx);
}

void test_decode_topk_trace(attn_pool *pool) {
    const uint64_t saved = rng_state; /* the groups after this one draw as before it */
    const size_t shapes[][3] = {{19, 16, 4}, {26, 24, 3}, {12, 8, 1}}; /* T, E, H */
    for (size_t sc = 0; sc < sizeof shapes / sizeof shapes[0]; sc++) {
        const size_t T = shapes[sc][0], E = shapes[sc][1], H = shapes[sc][2], K = 4;
        mha_case c = mha_case_new(1, T, E, H);
        for (size_t i = 0; i < 3 * E * E; i++) /* activations near 1, as decode.c's cases */
            c.win[i] /= sqrtf((float)E);
        for (size_t i = 0; i < E * E; i++)
            c.wout[i] /= sqrtf((float)E);
        float *x = frand_new(T * E), *out = malloc(T * E * sizeof *out);
        for (size_t i = 0; i < T * E; i++)
            x[i] *= 2.0f;
        float *dense = malloc(H * T * T * sizeof *dense), *mean = malloc(T * T * sizeof *mean);
        const size_t maps = H > 2 ? H : 2; /* every head, or the subset's 2 */
        float *wv = malloc(maps * T * K * sizeof *wv);
        int32_t *wi = malloc(maps * T * K * sizeof *wi);
        attn_trace tw = {.q = malloc(T * E * 4),
                         .k = malloc(T * E * 4),
                         .v = malloc(T * E * 4),
                         .scores = malloc(H * T * T * 4),
                         .masked = malloc(H * T * T * 4),
                         .weights = malloc(H * T * T * 4),
                         .heads = malloc(T * E * 4)};
        attn_opts dh = {.weights = ATTN_WEIGHTS_PER_HEAD}, dm = {.weights = ATTN_WEIGHTS_MEAN};
        attn_weights_out w1 = {.values = dense}, w2 = {.values = mean};
        whole(&c, x, &dh, out, &w1, &tw, pool);
        whole(&c, x, &dm, out, &w2, NULL, pool);

        attn_opts th = {.weights = ATTN_WEIGHTS_PER_HEAD, .top_k = K};
        attn_weights_out wk = {.values = wv, .indices = wi};
        if (whole(&c, x, &th, out, &wk, NULL, pool) == ATTN_OK) {
            topk_session(&c, x, &th, H, true, wv, dense, &tw, pool, "per-head top-k, traced");
            topk_session(&c, x, &th, H, false, wv, dense, NULL, pool, "per-head top-k, chunks");
        }
        const uint32_t heads[2] = {(uint32_t)H - 1, 0};
        attn_opts ts = {.weights = ATTN_WEIGHTS_PER_HEAD, .heads = heads, .n_heads = 2, .top_k = K};
        float *sub = malloc(2 * T * T * sizeof *sub);
        for (size_t m = 0; m < 2; m++)
            memcpy(sub + m * T * T, dense + heads[m] * T * T, T * T * sizeof *sub);
        if (whole(&c, x, &ts, out, &wk, NULL, pool) == ATTN_OK)
            topk_session(&c, x, &ts, 2, false, wv, sub, NULL, pool, "a subset's top-k");
        attn_opts tm = {.weights = ATTN_WEIGHTS_MEAN, .top_k = K, .block_q = 3};
        if (whole(&c, x, &tm, out, &wk, NULL, pool) == ATTN_OK)
            topk_session(&c, x, &tm, 1, false, wv, mean, &tw, pool, "mean top-k, traced");
        if (sc == 0)
            topk_errors(&c, x);
        free(x), free(out), free(dense), free(mean), free(wv), free(wi), free(sub);
        free(tw.q), free(tw.k), free(tw.v), free(tw.scores), free(tw.masked), free(tw.weights);
        free(tw.heads);
        mha_case_free(&c);
    }
    rng_state = saved;
}
