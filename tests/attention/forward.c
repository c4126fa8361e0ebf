/* forward.c - libattn's forward passes: the tiled path equals the direct one, the weights modes
 * (per head, mean, head subsets, top-k), cross-attention with kdim and vdim, and values near
 * FLT_MAX (their weighted mean stays finite on every path; a result beyond float32 is refused). */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "attention_test.h"

/* ---- tiled = direct, weights modes -------------------------------------------------------- */

void test_tiled_equals_direct(attn_pool *pool) {
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

void test_weights_modes(attn_pool *pool) {
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
void test_cross_kdim(attn_pool *pool) {
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

/* ---- values near FLT_MAX ------------------------------------------------------------------ */

/* Runs SDPA (N=1, H, L, S, D, Dv) on the given tensors; returns the status. */
static int sdpa_run(size_t H, size_t L, size_t S, size_t D, size_t Dv, const float *q,
                    const float *k, const float *v, const attn_masks *m, const attn_opts *o,
                    float *out, float *w, attn_pool *pool, attn_error *err) {
    attn_sdpa_dims d = {1, H, L, S, D, Dv, 0};
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
void test_near_float_max(attn_pool *pool) {
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

/* attn_mha_forward_traced: the trace leaves the output bit for bit as it was, on both paths;
 * its weights are the forward's own; q is x W_Q^T + b; the heads' outputs through out_proj are
 * the output; masked cells are -inf; and any one map alone (which the forward computes in
 * that map's buffer) is the same as with all three. */
void test_trace(attn_pool *pool) {
    const size_t N = 2, L = 9, E = 16, H = 4, S = 9, Dh = E / H;
    mha_case c = mha_case_new(N, L, E, H);
    float *x = frand_new(N * L * E), *bias = frand_new(L * S);
    float *out = malloc(N * L * E * 4), *out_t = malloc(N * L * E * 4);
    float *w = malloc(N * H * L * S * 4);
    float *tq = malloc(N * L * E * 4), *tk = malloc(N * S * E * 4), *tv = malloc(N * S * E * 4);
    float *th = malloc(N * L * E * 4), *ts = malloc(N * H * L * S * 4);
    float *tm = malloc(N * H * L * S * 4), *tw = malloc(N * H * L * S * 4);
    float *alone = malloc(N * H * L * S * 4);
    int32_t kl[2] = {9, 5};
    attn_masks m = {.causal = ATTN_CAUSAL_TOP_LEFT, .key_lengths = kl, .attn_bias = bias};
    attn_mha_params prm = {.in_proj_weight = c.win,
                           .in_proj_bias = c.bin,
                           .out_proj_weight = c.wout,
                           .out_proj_bias = c.bout};
    for (int path = ATTN_PATH_DIRECT; path <= ATTN_PATH_TILED; path++) {
        bool direct = path == ATTN_PATH_DIRECT;
        attn_opts o = {.weights = direct ? ATTN_WEIGHTS_PER_HEAD : ATTN_WEIGHTS_NONE,
                       .path = (attn_path)path};
        attn_weights_out wo = {.values = w};
        attn_plan p;
        attn_error err = {0};
        CHECK(attn_mha_plan(&p, &c.d, &o, &m, attn_pool_slots(pool), &err) == ATTN_OK, "%s",
              err.msg);
        void *ws = ws_new(&p);
        CHECK(attn_mha_forward(&p, ws, out, direct ? &wo : NULL, x, x, x, &prm, pool, &err) ==
                  ATTN_OK,
              "%s", err.msg);
        attn_trace t = {
            .q = tq, .k = tk, .v = tv, .scores = ts, .masked = tm, .weights = tw, .heads = th};
        CHECK(attn_mha_forward_traced(&p, ws, out_t, direct ? &wo : NULL, &t, x, x, x, &prm, pool,
                                      &err) == ATTN_OK,
              "%s", err.msg);
        CHECK(memcmp(out, out_t, N * L * E * 4) == 0, "path %d: the trace changed the output",
              path);
        CHECK(t.scale == 0.5f, "trace scale %g, want 1/sqrt(16 / 4)", (double)t.scale);
        if (direct)
            CHECK(max_abs_diff(w, tw, N * H * L * S) < 1e-6,
                  "the trace's weights differ from the forward's by %.3g",
                  max_abs_diff(w, tw, N * H * L * S));
        /* q against x W_Q^T + b, the heads through out_proj against the output, in double;
         * blocked cells -inf in masked and 0 in weights. */
        double eq = 0, eo = 0;
        bool blocked_ok = true;
        for (size_t n = 0; n < N; n++)
            for (size_t i = 0; i < L; i++) {
                for (size_t col = 0; col < E; col++) {
                    double q = (double)c.bin[col], o_ = (double)c.bout[col];
                    for (size_t e = 0; e < E; e++) {
                        q += (double)x[(n * L + i) * E + e] * (double)c.win[col * E + e];
                        o_ += (double)th[((n * H + e / Dh) * L + i) * Dh + e % Dh] *
                              (double)c.wout[col * E + e];
                    }
                    eq = fmax(eq,
                              fabs(q - (double)tq[((n * H + col / Dh) * L + i) * Dh + col % Dh]));
                    eo = fmax(eo, fabs(o_ - (double)out[(n * L + i) * E + col]));
                }
                for (size_t h = 0; h < H; h++)
                    for (size_t j = 0; j < S; j++) {
                        size_t at = ((n * H + h) * L + i) * S + j;
                        bool blocked = j > i || (int32_t)j >= kl[n];
                        if (blocked)
                            blocked_ok &= isinf(tm[at]) && tm[at] < 0 && tw[at] == 0;
                        else
                            blocked_ok &= tm[at] == ts[at] + bias[i * S + j];
                    }
            }
        CHECK(eq < 1e-5, "path %d: trace q off x W_Q^T + b by %.3g", path, eq);
        CHECK(eo < 1e-5, "path %d: trace heads through out_proj off the output by %.3g", path, eo);
        CHECK(blocked_ok, "path %d: masked = scores + bias, -inf and weight 0 where blocked", path);
        /* One map alone. */
        float *want[3] = {ts, tm, tw};
        for (int k = 0; k < 3; k++) {
            attn_trace t1 = {0};
            *(k == 0 ? &t1.scores : k == 1 ? &t1.masked : &t1.weights) = alone;
            CHECK(attn_mha_forward_traced(&p, ws, out_t, direct ? &wo : NULL, &t1, x, x, x, &prm,
                                          pool, &err) == ATTN_OK,
                  "%s", err.msg);
            CHECK(memcmp(alone, want[k], N * H * L * S * 4) == 0,
                  "path %d: map %d alone differs from the full trace's", path, k);
        }
        free(ws);
    }
    mha_case_free(&c);
    free(x), free(bias), free(out), free(out_t), free(w), free(tq), free(tk), free(tv), free(th);
    free(ts), free(tm), free(tw), free(alone);
}
