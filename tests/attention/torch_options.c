/* torch_options.c - PyTorch's options that libattn computes beside the masks: grouped-query
 * attention (SDPA with fewer key/value heads, as F.scaled_dot_product_attention(enable_gqa=True)),
 * a float bias per key (nn.MultiheadAttention's float key_padding_mask), and MHA's appended keys
 * (add_bias_kv and add_zero_attn). Each against a reference in double written from PyTorch's
 * definition, on every path, with its weights, top-k and trace.
 *
 * Legend: N batch, L query length, S the keys given, S' = S + X with X appended keys, E
 * embedding, H heads, Hkv key/value heads, D/Dv head widths. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "attention_test.h"

/* ---- Reference ------------------------------------------------------------------------------ */

/* One attention problem (n, h) in double: q (L, D), k (S', D), v (S', Dv), the first S keys
 * given and the X = S' - S after them appended (attended by every query, no mask column).
 * Writes out (L, Dv) and w (L, S'). Masks as attn_masks says, key_bias included; scale q.k. */
static void ref_problem(double *out, double *w, const double *q, const double *k, const double *v,
                        size_t L, size_t S, size_t X, size_t D, size_t Dv, double scale,
                        const attn_masks *m, size_t n, size_t h, size_t N, size_t H) {
    const size_t SX = S + X;
    for (size_t i = 0; i < L; i++) {
        double *row = w + i * SX, mx = -HUGE_VAL;
        for (size_t j = 0; j < SX; j++) {
            bool ok = true;
            double bias = 0;
            if (m && j < S) {
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
                if (m->attn_bias) {
                    size_t bn = m->attn_bias_n == N ? n : 0, bh = m->attn_bias_h == H ? h : 0;
                    size_t bH = m->attn_bias_h ? m->attn_bias_h : 1;
                    bias += (double)m->attn_bias[((bn * bH + bh) * L + i) * S + j];
                }
                if (m->key_bias)
                    bias += (double)m->key_bias[(m->key_bias_n == N ? n : 0) * S + j];
            }
            double x = -HUGE_VAL;
            if (ok) {
                x = 0;
                for (size_t c = 0; c < D; c++)
                    x += q[i * D + c] * k[j * D + c];
                x = x * scale + bias;
            }
            row[j] = x;
            if (x > mx)
                mx = x;
        }
        double sum = 0;
        for (size_t j = 0; j < SX; j++) {
            row[j] = mx == -HUGE_VAL ? 0.0 : exp(row[j] - mx);
            sum += row[j];
        }
        for (size_t j = 0; j < SX; j++)
            row[j] = sum > 0 ? row[j] / sum : 0.0;
        for (size_t c = 0; c < Dv; c++) {
            double acc = 0;
            for (size_t j = 0; j < SX; j++)
                acc += row[j] * v[j * Dv + c];
            out[i * Dv + c] = acc;
        }
    }
}

static double *to_double(const float *x, size_t n) {
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = (double)x[i];
    return d;
}

static double max_diff_d(const float *a, const double *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        m = d > m || d != d ? (d != d ? (double)INFINITY : d) : m;
    }
    return m;
}

/* ---- Grouped-query attention ---------------------------------------------------------------- */

/* SDPA (N, H, L, S, D, Dv) with Hkv key/value heads through libattn on path (block_q bq), with
 * per-head weights on the direct path, and a trace when tr; returns the status. */
static int gqa_run(const attn_sdpa_dims *d, const attn_masks *m, attn_path path, size_t bq,
                   const float *q, const float *k, const float *v, float *out, float *w,
                   attn_trace *tr, attn_pool *pool) {
    attn_opts o = {.path = path, .block_q = bq};
    if (path == ATTN_PATH_DIRECT)
        o.weights = ATTN_WEIGHTS_PER_HEAD;
    attn_plan p;
    attn_error err = {0};
    int rc = attn_sdpa_plan(&p, d, &o, m, attn_pool_slots(pool), &err);
    void *ws = rc == ATTN_OK ? ws_new(&p) : NULL;
    attn_weights_out wo = {.values = w};
    if (rc == ATTN_OK)
        rc = attn_sdpa_forward_traced(&p, ws, out, w ? &wo : NULL, tr, q, k, v, pool, &err);
    if (rc != ATTN_OK)
        fprintf(stderr, "gqa: %s\n", err.msg);
    free(ws);
    return rc;
}

void test_gqa(attn_pool *pool) {
    const size_t N = 2, H = 6, L = 37, S = 45, D = 16, Dv = 24;
    const size_t hkvs[] = {1, 2, 3, 6};
    int32_t kl[2] = {45, 20};
    uint8_t *am = malloc(H * L * S);
    float *kb = malloc(N * S * sizeof *kb);
    for (size_t i = 0; i < H * L * S; i++)
        am[i] = frand() > -0.6f;
    for (size_t i = 0; i < N * S; i++)
        kb[i] = i % 7 == 3 ? -INFINITY : frand();
    const attn_masks masks[] = {
        {0},
        {.causal = ATTN_CAUSAL_BOTTOM_RIGHT,
         .key_lengths = kl,
         .attn_mask = am,
         .attn_mask_h = H,
         .key_bias = kb,
         .key_bias_n = N},
    };
    float *q = frand_new(N * H * L * D), *out = malloc(N * H * L * Dv * sizeof *out);
    float *o2 = malloc(N * H * L * Dv * sizeof *o2), *w = malloc(N * H * L * S * sizeof *w);
    float *tk = malloc(N * H * S * D * sizeof *tk), *tw = malloc(N * H * L * S * sizeof *tw);
    double *ro = malloc(L * Dv * sizeof *ro), *rw = malloc(L * S * sizeof *rw);
    for (size_t hi = 0; hi < sizeof hkvs / sizeof hkvs[0]; hi++) {
        const size_t Hkv = hkvs[hi], G = H / Hkv;
        attn_sdpa_dims d = {N, H, L, S, D, Dv, Hkv};
        float *k = frand_new(N * Hkv * S * D), *v = frand_new(N * Hkv * S * Dv);
        for (size_t mi = 0; mi < 2; mi++) {
            const attn_masks *m = &masks[mi];
            attn_trace tr = {.k = tk, .weights = tw};
            CHECK(gqa_run(&d, m, ATTN_PATH_DIRECT, 0, q, k, v, out, w, &tr, pool) == ATTN_OK,
                  "gqa Hkv=%zu masks %zu: direct", Hkv, mi);
            double dout = 0, dw = 0, dtr = 0;
            for (size_t n = 0; n < N; n++)
                for (size_t h = 0; h < H; h++) {
                    size_t pq = n * H + h, pk = n * Hkv + h / G;
                    double *qd = to_double(q + pq * L * D, L * D);
                    double *kd = to_double(k + pk * S * D, S * D);
                    double *vd = to_double(v + pk * S * Dv, S * Dv);
                    ref_problem(ro, rw, qd, kd, vd, L, S, 0, D, Dv, 1.0 / sqrt((double)D), m, n, h,
                                N, H);
                    dout = fmax(dout, max_diff_d(out + pq * L * Dv, ro, L * Dv));
                    dw = fmax(dw, max_diff_d(w + pq * L * S, rw, L * S));
                    dw = fmax(dw, max_diff_d(tw + pq * L * S, rw, L * S));
                    dtr = fmax(dtr, max_diff_d(tk + pq * S * D, kd, S * D));
                    free(qd), free(kd), free(vd);
                }
            CHECK(dout < 1e-5 && dw < 1e-6,
                  "gqa Hkv=%zu masks %zu: direct vs double: output %.3g, weights %.3g", Hkv, mi,
                  dout, dw);
            CHECK(dtr == 0, "gqa Hkv=%zu: the trace's k is not each query head's key head", Hkv);
            /* The tiled paths, one query block and several (grouped heads share packed keys). */
            const attn_path paths[] = {ATTN_PATH_TILED, ATTN_PATH_TILED_SGEMM, ATTN_PATH_AUTO};
            const size_t bqs[] = {0, 8};
            for (size_t pi = 0; pi < 3; pi++)
                for (size_t bi = 0; bi < 2; bi++) {
                    CHECK(gqa_run(&d, m, paths[pi], bqs[bi], q, k, v, o2, NULL, NULL, pool) ==
                              ATTN_OK,
                          "gqa Hkv=%zu: path %d", Hkv, (int)paths[pi]);
                    double diff = max_abs_diff(out, o2, N * H * L * Dv);
                    CHECK(diff < 2e-6, "gqa Hkv=%zu masks %zu path %d bq %zu: %.3g from direct",
                          Hkv, mi, (int)paths[pi], bqs[bi], diff);
                }
        }
        free(k), free(v);
    }
    /* Heads that do not group. */
    attn_sdpa_dims bad = {N, H, L, S, D, Dv, 4};
    attn_plan p;
    attn_error err = {0};
    CHECK(attn_sdpa_plan(&p, &bad, &(attn_opts){0}, NULL, 1, &err) == ATTN_ERR_SHAPE &&
              strstr(err.msg, "Hkv=4"),
          "H=6 over Hkv=4 must be refused: %s", err.msg);
    free(am), free(kb), free(q), free(out), free(o2), free(w), free(tk), free(tw), free(ro),
        free(rw);
}

/* ---- A float bias per key ------------------------------------------------------------------- */

void test_key_bias(attn_pool *pool) {
    const size_t N = 3, H = 2, L = 6, S = 9;
    float *kb = malloc(N * S * sizeof *kb), *kb1 = malloc(S * sizeof *kb1);
    for (size_t i = 0; i < N * S; i++)
        kb[i] = i % 5 == 1 ? -INFINITY : 3.0f * frand();
    for (size_t j = 0; j < S; j++) /* batch 2's every key -inf: its rows are zeros */
        kb[2 * S + j] = -INFINITY;
    for (size_t j = 0; j < S; j++)
        kb1[j] = frand();
    uint8_t km[9] = {1, 1, 0, 1, 1, 1, 1, 0, 1};
    const attn_masks ms[] = {
        {.key_bias = kb, .key_bias_n = N},
        {.key_bias = kb1, .key_bias_n = 1, .key_mask = km, .key_mask_n = 1},
        {.key_bias = kb1, .causal = ATTN_CAUSAL_TOP_LEFT},
    };
    /* Against the reference with key_bias, on the direct and the fused paths. */
    attn_sdpa_dims d = {N, H, L, S, 16, 16, 0};
    float *q = frand_new(N * H * L * 16), *k = frand_new(N * H * S * 16);
    float *v = frand_new(N * H * S * 16), *out = malloc(N * H * L * 16 * sizeof *out);
    float *o2 = malloc(N * H * L * 16 * sizeof *o2), *w = malloc(N * H * L * S * sizeof *w);
    double *ro = malloc(L * 16 * sizeof *ro), *rw = malloc(L * S * sizeof *rw);
    for (size_t mi = 0; mi < 3; mi++) {
        CHECK(gqa_run(&d, &ms[mi], ATTN_PATH_DIRECT, 0, q, k, v, out, w, NULL, pool) == ATTN_OK,
              "key_bias %zu: direct", mi);
        double dout = 0, dw = 0;
        for (size_t pq = 0; pq < N * H; pq++) {
            double *qd = to_double(q + pq * L * 16, L * 16),
                   *kd = to_double(k + pq * S * 16, S * 16);
            double *vd = to_double(v + pq * S * 16, S * 16);
            ref_problem(ro, rw, qd, kd, vd, L, S, 0, 16, 16, 0.25, &ms[mi], pq / H, pq % H, N, H);
            dout = fmax(dout, max_diff_d(out + pq * L * 16, ro, L * 16));
            dw = fmax(dw, max_diff_d(w + pq * L * S, rw, L * S));
            free(qd), free(kd), free(vd);
        }
        CHECK(dout < 1e-5 && dw < 1e-6, "key_bias %zu: output %.3g, weights %.3g from double", mi,
              dout, dw);
        const attn_path paths[] = {ATTN_PATH_TILED, ATTN_PATH_TILED_SGEMM};
        for (size_t pi = 0; pi < 2; pi++) {
            CHECK(gqa_run(&d, &ms[mi], paths[pi], 0, q, k, v, o2, NULL, NULL, pool) == ATTN_OK,
                  "key_bias %zu: path %d", mi, (int)paths[pi]);
            double diff = max_abs_diff(out, o2, N * H * L * 16);
            CHECK(diff < 2e-6, "key_bias %zu path %d: %.3g from direct", mi, (int)paths[pi], diff);
        }
    }
    /* Planned from its extent alone (shape_only), then bound: the answer of a plan made with
     * the data, bit for bit. */
    attn_masks shape = {.key_bias_n = N, .shape_only = ATTN_MASK_KEY_BIAS};
    attn_plan p;
    attn_error err = {0};
    CHECK(gqa_run(&d, &ms[0], ATTN_PATH_AUTO, 0, q, k, v, out, NULL, NULL, NULL) == ATTN_OK,
          "key_bias: auto");
    CHECK(attn_sdpa_plan(&p, &d, &(attn_opts){0}, &shape, 1, &err) == ATTN_OK, "%s", err.msg);
    void *ws = ws_new(&p);
    CHECK(attn_sdpa_forward(&p, ws, o2, NULL, q, k, v, NULL, &err) == ATTN_ERR_ARG,
          "a plan without its key_bias data must not run");
    attn_masks bound = {.key_bias = kb, .key_bias_n = N};
    err = (attn_error){0};
    CHECK(attn_plan_bind(&p, &(attn_opts){0}, &bound, &err) == ATTN_OK, "%s", err.msg);
    CHECK(attn_sdpa_forward(&p, ws, o2, NULL, q, k, v, NULL, &err) == ATTN_OK, "%s", err.msg);
    CHECK(memcmp(out, o2, N * H * L * 16 * sizeof *out) == 0,
          "key_bias bound to a shape-only plan differs from it planned with its data");
    attn_masks wrong = {.key_bias = kb, .key_bias_n = 2};
    err = (attn_error){0};
    CHECK(attn_plan_bind(&p, &(attn_opts){0}, &wrong, &err) == ATTN_ERR_SHAPE,
          "key_bias of 2 rows bound to a plan of N=3: %s", err.msg);
    free(ws), free(kb), free(kb1), free(q), free(k), free(v), free(out), free(o2), free(w),
        free(ro), free(rw);
}

/* ---- MHA's appended keys: add_bias_kv, add_zero_attn ---------------------------------------- */

/* An MHA case: dims and random parameters, packed (in_proj_weight) or separate with kdim, vdim. */
typedef struct app_case {
    attn_mha_dims d;
    attn_mha_params prm;
    float *data[9];
} app_case;

static app_case app_case_new(size_t n, size_t l, size_t s, size_t e, size_t h, size_t kdim,
                             size_t vdim, bool packed, bool bias_kv, bool zero_attn) {
    app_case c = {.d = {n, l, s, e, h, kdim, vdim, bias_kv, zero_attn}};
    float **f = c.data;
    if (packed) {
        c.prm.in_proj_weight = f[0] = frand_new(3 * e * e);
    } else {
        c.prm.q_proj_weight = f[0] = frand_new(e * e);
        c.prm.k_proj_weight = f[1] = frand_new(e * kdim);
        c.prm.v_proj_weight = f[2] = frand_new(e * vdim);
    }
    c.prm.in_proj_bias = f[3] = frand_new(3 * e);
    c.prm.out_proj_weight = f[4] = frand_new(e * e);
    c.prm.out_proj_bias = f[5] = frand_new(e);
    if (bias_kv) {
        c.prm.bias_k = f[6] = frand_new(e);
        c.prm.bias_v = f[7] = frand_new(e);
    }
    return c;
}

static void app_case_free(app_case *c) {
    for (size_t i = 0; i < 9; i++)
        free(c->data[i]);
}

/* y (rows, E) = x (rows, in) W^T + b, in double; W is (E, in), b (E) or NULL. */
static void ref_linear(double *y, const float *x, size_t rows, size_t in, const float *W,
                       const float *b, size_t E) {
    for (size_t r = 0; r < rows; r++)
        for (size_t o = 0; o < E; o++) {
            double acc = b ? (double)b[o] : 0.0;
            for (size_t c = 0; c < in; c++)
                acc += (double)x[r * in + c] * (double)W[o * in + c];
            y[r * E + o] = acc;
        }
}

/* nn.MultiheadAttention's forward in double, as torch.nn.functional.multi_head_attention_forward
 * writes it: the projections, bias_k and bias_v concatenated after the keys, then a zero key and
 * value, the masks padded with a column that blocks nothing; out (N, L, E), per-head weights w
 * (N, H, L, S') and the keys of each head tk (N, H, S', Dh). */
static void ref_mha_appended(double *out, double *w, double *tk, const app_case *c, const float *xq,
                             const float *xk, const float *xv, const attn_masks *m) {
    const attn_mha_dims *d = &c->d;
    const size_t N = d->n, L = d->l, S = d->s, E = d->e, H = d->h, Dh = E / H;
    const size_t X = (size_t)d->bias_kv + (size_t)d->zero_attn, SX = S + X;
    const attn_mha_params *p = &c->prm;
    const float *b = p->in_proj_bias;
    double *Q = malloc(N * L * E * sizeof *Q), *K = malloc(N * S * E * sizeof *K);
    double *V = malloc(N * S * E * sizeof *V), *ob = malloc(N * L * E * sizeof *ob);
    ref_linear(Q, xq, N * L, E, p->in_proj_weight ? p->in_proj_weight : p->q_proj_weight, b, E);
    ref_linear(K, xk, N * S, d->kdim,
               p->in_proj_weight ? p->in_proj_weight + E * E : p->k_proj_weight, b + E, E);
    ref_linear(V, xv, N * S, d->vdim,
               p->in_proj_weight ? p->in_proj_weight + 2 * E * E : p->v_proj_weight, b + 2 * E, E);
    double *qd = malloc(L * Dh * sizeof *qd), *kd = calloc(SX * Dh, sizeof *kd);
    double *vd = calloc(SX * Dh, sizeof *vd), *ro = malloc(L * Dh * sizeof *ro);
    for (size_t n = 0; n < N; n++)
        for (size_t h = 0; h < H; h++) {
            for (size_t i = 0; i < L; i++)
                for (size_t c2 = 0; c2 < Dh; c2++)
                    qd[i * Dh + c2] = Q[(n * L + i) * E + h * Dh + c2];
            for (size_t j = 0; j < SX; j++)
                for (size_t c2 = 0; c2 < Dh; c2++) {
                    bool given = j < S, bias = d->bias_kv && j == S;
                    kd[j * Dh + c2] = given  ? K[(n * S + j) * E + h * Dh + c2]
                                      : bias ? (double)p->bias_k[h * Dh + c2]
                                             : 0.0;
                    vd[j * Dh + c2] = given  ? V[(n * S + j) * E + h * Dh + c2]
                                      : bias ? (double)p->bias_v[h * Dh + c2]
                                             : 0.0;
                }
            memcpy(tk + (n * H + h) * SX * Dh, kd, SX * Dh * sizeof *kd);
            ref_problem(ro, w + (n * H + h) * L * SX, qd, kd, vd, L, S, X, Dh, Dh,
                        1.0 / sqrt((double)Dh), m, n, h, N, H);
            for (size_t i = 0; i < L; i++)
                for (size_t c2 = 0; c2 < Dh; c2++)
                    ob[(n * L + i) * E + h * Dh + c2] = ro[i * Dh + c2];
        }
    for (size_t r = 0; r < N * L; r++)
        for (size_t o = 0; o < E; o++) {
            double acc = (double)p->out_proj_bias[o];
            for (size_t c2 = 0; c2 < E; c2++)
                acc += ob[r * E + c2] * (double)p->out_proj_weight[o * E + c2];
            out[r * E + o] = acc;
        }
    free(Q), free(K), free(V), free(ob), free(qd), free(kd), free(vd), free(ro);
}

/* Runs case c on path with options o (weights into wo, a trace into tr); returns the status. */
static int app_run(const app_case *c, const attn_opts *o, const attn_masks *m, const float *xq,
                   const float *xk, const float *xv, float *out, attn_weights_out *wo,
                   attn_trace *tr, attn_pool *pool, attn_error *err) {
    attn_plan p;
    int rc = attn_mha_plan(&p, &c->d, o, m, attn_pool_slots(pool), err);
    if (rc != ATTN_OK)
        return rc;
    void *ws = ws_new(&p);
    rc = attn_mha_forward_traced(&p, ws, out, wo, tr, xq, xk, xv, &c->prm, pool, err);
    free(ws);
    return rc;
}

/* The top k of row (s) in double, largest first, ties to the lower index: vals and idx (k). */
static void ref_topk(const double *row, size_t s, size_t k, double *vals, int32_t *idx) {
    for (size_t t = 0; t < k; t++) {
        size_t best = SIZE_MAX;
        for (size_t j = 0; j < s; j++) {
            bool taken = false;
            for (size_t u = 0; u < t; u++)
                taken |= (size_t)idx[u] == j;
            if (!taken && (best == SIZE_MAX || row[j] > row[best]))
                best = j;
        }
        vals[t] = row[best];
        idx[t] = (int32_t)best;
    }
}

/* One configuration (self, kv_one or separate weights) with bias_kv and zero_attn as given,
 * under masks m: direct per-head weights and trace, mean top-k, and the tiled paths. */
static void appended_case(const char *what, const app_case *c, const float *xq, const float *xk,
                          const float *xv, const attn_masks *m, attn_pool *pool) {
    const attn_mha_dims *d = &c->d;
    const size_t N = d->n, L = d->l, E = d->e, H = d->h, Dh = E / H, K = 3;
    const size_t SX = d->s + (size_t)d->bias_kv + (size_t)d->zero_attn;
    double *ro = malloc(N * L * E * sizeof *ro), *rw = malloc(N * H * L * SX * sizeof *rw);
    double *rk = malloc(N * H * SX * Dh * sizeof *rk);
    float *out = malloc(N * L * E * sizeof *out), *o2 = malloc(N * L * E * sizeof *o2);
    float *w = malloc(N * H * L * SX * sizeof *w), *tw = malloc(N * H * L * SX * sizeof *tw);
    float *tk = malloc(N * H * SX * Dh * sizeof *tk), *tv = malloc(N * L * K * sizeof *tv);
    int32_t *ti = malloc(N * L * K * sizeof *ti);
    ref_mha_appended(ro, rw, rk, c, xq, xk, xv, m);
    attn_error err = {0};

    attn_opts per_head = {.weights = ATTN_WEIGHTS_PER_HEAD};
    attn_weights_out wo = {.values = w};
    attn_trace tr = {.k = tk, .weights = tw};
    CHECK(app_run(c, &per_head, m, xq, xk, xv, out, &wo, &tr, pool, &err) == ATTN_OK, "%s: %s",
          what, err.msg);
    double dout = max_diff_d(out, ro, N * L * E), dw = max_diff_d(w, rw, N * H * L * SX);
    double dtw = max_diff_d(tw, rw, N * H * L * SX), dtk = max_diff_d(tk, rk, N * H * SX * Dh);
    CHECK(dout < 2e-4 && dw < 2e-5 && dtw < 2e-5 && dtk < 2e-4,
          "%s: against double: output %.3g, weights %.3g, trace weights %.3g, trace k %.3g", what,
          dout, dw, dtw, dtk);

    /* Mean weights, top-k: the appended keys are the last indices, S and S+1. */
    attn_opts mean_k = {.weights = ATTN_WEIGHTS_MEAN, .top_k = K};
    attn_weights_out wk = {.values = tv, .indices = ti};
    err = (attn_error){0};
    CHECK(app_run(c, &mean_k, m, xq, xk, xv, o2, &wk, NULL, pool, &err) == ATTN_OK, "%s: %s", what,
          err.msg);
    double *mrow = malloc(SX * sizeof *mrow), vals[3], dk = 0;
    int32_t idx[3];
    bool same_idx = true;
    for (size_t n = 0; n < N; n++)
        for (size_t i = 0; i < L; i++) {
            for (size_t j = 0; j < SX; j++) {
                mrow[j] = 0;
                for (size_t h = 0; h < H; h++)
                    mrow[j] += rw[((n * H + h) * L + i) * SX + j] / (double)H;
            }
            ref_topk(mrow, SX, K, vals, idx);
            for (size_t t = 0; t < K; t++) {
                dk = fmax(dk, fabs(vals[t] - (double)tv[(n * L + i) * K + t]));
                same_idx &= vals[t] < 1e-6 || idx[t] == ti[(n * L + i) * K + t];
            }
        }
    CHECK(dk < 2e-5 && same_idx, "%s: mean top-%zu: values %.3g from double, indices %s", what, K,
          dk, same_idx ? "the same" : "differ");
    free(mrow);

    /* The tiled paths (fused: Dh = 16), one query block and several. */
    const attn_path paths[] = {ATTN_PATH_AUTO, ATTN_PATH_TILED, ATTN_PATH_TILED_SGEMM};
    for (size_t pi = 0; pi < 3; pi++)
        for (size_t bq = 0; bq < 3; bq += 2) {
            attn_opts o = {.path = paths[pi], .block_q = bq};
            err = (attn_error){0};
            CHECK(app_run(c, &o, m, xq, xk, xv, o2, NULL, NULL, pool, &err) == ATTN_OK, "%s: %s",
                  what, err.msg);
            double diff = max_abs_diff(out, o2, N * L * E);
            CHECK(diff < 2e-5, "%s: path %d bq %zu: %.3g from direct", what, (int)paths[pi], bq,
                  diff);
        }
    free(ro), free(rw), free(rk), free(out), free(o2), free(w), free(tw), free(tk), free(tv),
        free(ti);
}

void test_mha_appended(attn_pool *pool) {
    const size_t N = 2, L = 5, E = 32, H = 2;
    const bool extras[3][2] = {{true, false}, {false, true}, {true, true}};
    for (size_t cfg = 0; cfg < 3; cfg++) {
        /* 0: self-attention on in_proj_weight; 1: cross, key = value; 2: q/k/v_proj_weight with
         * kdim 8 and vdim 12 */
        const size_t S = cfg == 0 ? L : 7, kdim = cfg == 2 ? 8 : E, vdim = cfg == 2 ? 12 : E;
        float *xq = frand_new(N * L * E), *xk = frand_new(N * S * kdim);
        float *xv = cfg == 2 ? frand_new(N * S * vdim) : xk;
        const float *kq = cfg == 0 ? xq : xk, *vq = cfg == 0 ? xq : xv;
        int32_t kl[2] = {(int32_t)S, 0}; /* batch 1 attends only the appended keys */
        uint8_t *km = malloc(N * S), *am = malloc(L * S);
        float *kb = malloc(N * S * sizeof *kb), *ab = frand_new(N * H * L * S);
        for (size_t i = 0; i < N * S; i++) {
            km[i] = i % 4 != 2;
            kb[i] = i % 5 == 3 ? -INFINITY : frand();
        }
        for (size_t i = 0; i < L * S; i++)
            am[i] = i % 3 != 1;
        const attn_masks ms[] = {
            {0},
            {.causal = ATTN_CAUSAL_TOP_LEFT, .key_lengths = kl},
            {.key_mask = km,
             .key_mask_n = N,
             .attn_mask = am,
             .attn_bias = ab,
             .attn_bias_n = N,
             .attn_bias_h = H,
             .key_bias = kb,
             .key_bias_n = N},
        };
        for (size_t x = 0; x < 3; x++) {
            app_case c =
                app_case_new(N, L, S, E, H, kdim, vdim, cfg != 2, extras[x][0], extras[x][1]);
            for (size_t mi = 0; mi < 3; mi++) {
                char what[96];
                snprintf(what, sizeof what,
                         "appended keys: config %zu, bias_kv %d zero_attn %d, "
                         "masks %zu",
                         cfg, extras[x][0], extras[x][1], mi);
                appended_case(what, &c, xq, kq, vq, &ms[mi], pool);
            }
            /* Without bias_k, a plan with bias_kv does not run; in a batch, no such job runs. */
            if (extras[x][0]) {
                attn_plan p;
                attn_error err = {0};
                CHECK(attn_mha_plan(&p, &c.d, &(attn_opts){0}, NULL, 1, &err) == ATTN_OK, "%s",
                      err.msg);
                void *ws = ws_new(&p);
                float *out = malloc(N * L * E * sizeof *out);
                attn_mha_params nob = c.prm;
                nob.bias_k = NULL;
                CHECK(attn_mha_forward(&p, ws, out, NULL, xq, kq, vq, &nob, NULL, &err) ==
                          ATTN_ERR_ARG,
                      "bias_kv without params.bias_k must be refused");
                attn_mha_batch_job jobs[2] = {
                    {.plan = &p, .out = out, .query = xq, .key = kq, .value = vq},
                    {.plan = &p, .out = out, .query = xq, .key = kq, .value = vq}};
                attn_batch_plan bp;
                err = (attn_error){0};
                CHECK(attn_mha_batch_plan(&bp, jobs, 2, &c.prm, 0, &err) == ATTN_ERR_ARG &&
                          strstr(err.msg, "appends keys"),
                      "a batch must refuse jobs with appended keys: %s", err.msg);
                free(ws), free(out);
            }
            /* FLOPs: every row attends the appended keys. */
            attn_plan p0, p1;
            attn_error err = {0};
            attn_mha_dims d0 = c.d;
            d0.bias_kv = d0.zero_attn = false;
            attn_masks causal = {.causal = ATTN_CAUSAL_TOP_LEFT};
            attn_mha_plan(&p0, &d0, &(attn_opts){0}, &causal, 1, &err);
            attn_mha_plan(&p1, &c.d, &(attn_opts){0}, &causal, 1, &err);
            double want = p0.flops + 2.0 * (double)(N * L * H) *
                                         (double)((size_t)extras[x][0] + (size_t)extras[x][1]) *
                                         (double)(2 * E / H);
            CHECK(p1.flops == want && p1.weights_elems == 0 && p1.sd.s == S + p1.kv_extra,
                  "appended keys: flops %.6g, want %.6g", p1.flops, want);
            app_case_free(&c);
        }
        free(xq), free(xk), free(km), free(am), free(kb), free(ab);
        if (cfg == 2)
            free(xv);
    }
}
