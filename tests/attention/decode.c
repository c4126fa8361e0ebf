/* decode.c - decode sessions (attention.h, "Decode sessions"): a sequence appended a row at a
 * time, in chunks and in one step gives the outputs, the weights (per head, a subset, the mean)
 * and the projected keys and values of one causal attn_mha_forward on the whole sequence, and
 * of the same computed in double, within DECODE_TOL of each tensor's largest magnitude, on a
 * grid of E, H, kdim/vdim, packed or separate weights, with and without biases; a step never
 * writes a cached row; the same bits with and without a pool, after a failed step, and after
 * len is lowered and the rows appended again; the FLOPs; and every error.
 *
 * Legend: T the sequence length, E embedding, H heads, Dh = E / H, l the rows of a step, len
 * the rows cached before it, S = len + l. */
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "attention_test.h"

#define DECODE_TOL 1e-6 /* of each tensor's largest magnitude (attention.h claims it) */

/* Inputs that are one pointer: none, query = key = value (self-attention), key = value. */
enum { SHARE_NONE, SHARE_ALL, SHARE_KV };

/* One session's shapes and parameters. */
typedef struct dcase {
    const char *name;
    size_t e, h, kdim, vdim, t;
    bool packed, bias;
    int share; /* which inputs are one pointer: SHARE_NONE, SHARE_ALL or SHARE_KV */
    attn_mha_params prm;
    float *w[6];                /* the parameters' buffers, to free */
    float *xq, *xk, *xv;        /* (T, E), (T, kdim), (T, vdim), shared as share says */
    float *out_w, *out_n, *wts; /* whole call: out (T, E) with weights and without, (H, T, T) */
    float *wmean, *kt, *vt;     /* (T, T); the whole call's k and v, (H, T, Dh) */
    double *od, *wd, *kd, *vd;  /* the same in double: (T, E), (H, T, T), (H, T, Dh) twice */
} dcase;

/* max |a - b| over max |b|: the difference relative to the reference's largest magnitude. */
static double rel_f(const float *a, const float *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - (double)b[i]);
        d = x > d || x != x ? (x != x ? (double)INFINITY : x) : d;
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? d / m : d;
}

static double rel_d(const float *a, const double *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - b[i]);
        d = x > d || x != x ? (x != x ? (double)INFINITY : x) : d;
        m = fmax(m, fabs(b[i]));
    }
    return m > 0 ? d / m : d;
}

/* n floats uniform in [-a, a). */
static float *frand_scaled(size_t n, double a) {
    float *x = frand_new(n);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((double)x[i] * a);
    return x;
}

/* y (rows, out) = x (rows, in) w^T + b in double; b may be NULL. */
static void proj_d(double *y, const float *x, const float *w, const float *b, size_t rows,
                   size_t in, size_t out) {
    for (size_t i = 0; i < rows; i++)
        for (size_t o = 0; o < out; o++) {
            double s = b ? (double)b[o] : 0.0;
            for (size_t c = 0; c < in; c++)
                s += (double)x[i * in + c] * (double)w[o * in + c];
            y[i * out + o] = s;
        }
}

/* The whole sequence in double: projections, causal attention per head, out projection. */
static void reference_double(dcase *c) {
    const size_t T = c->t, E = c->e, H = c->h, Dh = E / H;
    const attn_mha_params *p = &c->prm;
    double *q = malloc(T * E * sizeof *q), *k = malloc(T * E * sizeof *k),
           *v = malloc(T * E * sizeof *v), *cat = malloc(T * E * sizeof *cat);
    const float *b = p->in_proj_bias;
    proj_d(q, c->xq, c->packed ? p->in_proj_weight : p->q_proj_weight, b, T, E, E);
    proj_d(k, c->xk, c->packed ? p->in_proj_weight + E * E : p->k_proj_weight, b ? b + E : NULL, T,
           c->kdim, E);
    proj_d(v, c->xv, c->packed ? p->in_proj_weight + 2 * E * E : p->v_proj_weight,
           b ? b + 2 * E : NULL, T, c->vdim, E);
    for (size_t h = 0; h < H; h++)
        for (size_t i = 0; i < T; i++) {
            double *w = c->wd + (h * T + i) * T, mx = -HUGE_VAL, sum = 0;
            for (size_t j = 0; j < T; j++) {
                double x = 0;
                for (size_t u = 0; u < Dh; u++)
                    x += q[i * E + h * Dh + u] * k[j * E + h * Dh + u];
                w[j] = j <= i ? x / sqrt((double)Dh) : -HUGE_VAL;
                mx = fmax(mx, w[j]);
            }
            for (size_t j = 0; j < T; j++)
                sum += w[j] = j <= i ? exp(w[j] - mx) : 0.0;
            for (size_t u = 0; u < Dh; u++) {
                double o = 0;
                for (size_t j = 0; j <= i; j++)
                    o += w[j] / sum * v[j * E + h * Dh + u];
                cat[i * E + h * Dh + u] = o;
            }
            for (size_t j = 0; j < T; j++)
                w[j] /= sum;
        }
    for (size_t h = 0; h < H; h++)
        for (size_t j = 0; j < T; j++)
            for (size_t u = 0; u < Dh; u++) {
                c->kd[(h * T + j) * Dh + u] = k[j * E + h * Dh + u];
                c->vd[(h * T + j) * Dh + u] = v[j * E + h * Dh + u];
            }
    for (size_t i = 0; i < T; i++)
        for (size_t o = 0; o < E; o++) {
            double s = p->out_proj_bias ? (double)p->out_proj_bias[o] : 0.0;
            for (size_t u = 0; u < E; u++)
                s += cat[i * E + u] * (double)p->out_proj_weight[o * E + u];
            c->od[i * E + o] = s;
        }
    free(q), free(k), free(v), free(cat);
}

/* The whole-sequence causal forward with opts o into out (and weights, trace when given). */
static int whole_run(const dcase *c, const attn_opts *o, float *out, float *w, attn_trace *tr,
                     attn_pool *pool) {
    attn_mha_dims d = {
        .n = 1, .l = c->t, .s = c->t, .e = c->e, .h = c->h, .kdim = c->kdim, .vdim = c->vdim};
    attn_masks m = {.causal = ATTN_CAUSAL_TOP_LEFT};
    attn_error err = {0};
    attn_plan p;
    int rc = attn_mha_plan(&p, &d, o, &m, attn_pool_slots(pool), &err);
    void *ws = rc == ATTN_OK ? ws_new(&p) : NULL;
    attn_weights_out wo = {.values = w};
    if (rc == ATTN_OK)
        rc =
            attn_mha_forward_traced(&p, ws, out, &wo, tr, c->xq, c->xk, c->xv, &c->prm, pool, &err);
    CHECK(rc == ATTN_OK, "%s: whole-sequence forward: %s", c->name, err.msg);
    free(ws);
    return rc;
}

/* A case with random parameters (scaled to keep activations near 1), its inputs, the whole
 * call (with weights per head and mean, and without: the fused or tiled path) and double. */
static dcase dcase_new(const char *name, size_t e, size_t h, size_t kdim, size_t vdim, size_t t,
                       bool packed, bool bias, int share, attn_pool *pool) {
    dcase c = {.name = name, .e = e, .h = h, .kdim = kdim, .vdim = vdim, .t = t};
    c.packed = packed, c.bias = bias, c.share = share;
    const double a = 1.0 / sqrt((double)e);
    if (packed) {
        c.prm.in_proj_weight = c.w[0] = frand_scaled(3 * e * e, a);
    } else {
        c.prm.q_proj_weight = c.w[0] = frand_scaled(e * e, a);
        c.prm.k_proj_weight = c.w[1] = frand_scaled(e * kdim, 1.0 / sqrt((double)kdim));
        c.prm.v_proj_weight = c.w[2] = frand_scaled(e * vdim, 1.0 / sqrt((double)vdim));
    }
    c.prm.out_proj_weight = c.w[3] = frand_scaled(e * e, a);
    if (bias) {
        c.prm.in_proj_bias = c.w[4] = frand_scaled(3 * e, 0.5);
        c.prm.out_proj_bias = c.w[5] = frand_scaled(e, 0.5);
    }
    c.xq = frand_scaled(t * e, 2.0);
    c.xk = share == SHARE_ALL ? c.xq : frand_scaled(t * kdim, 2.0);
    c.xv = share == SHARE_ALL ? c.xq : share == SHARE_KV ? c.xk : frand_scaled(t * vdim, 2.0);
    c.out_w = malloc(t * e * sizeof *c.out_w), c.out_n = malloc(t * e * sizeof *c.out_n);
    c.wts = malloc(h * t * t * sizeof *c.wts), c.wmean = malloc(t * t * sizeof *c.wmean);
    c.kt = malloc(t * e * sizeof *c.kt), c.vt = malloc(t * e * sizeof *c.vt);
    c.od = malloc(t * e * sizeof *c.od), c.wd = malloc(h * t * t * sizeof *c.wd);
    c.kd = malloc(t * e * sizeof *c.kd), c.vd = malloc(t * e * sizeof *c.vd);
    float *scratch = malloc(t * e * sizeof *scratch);
    attn_opts per_head = {.weights = ATTN_WEIGHTS_PER_HEAD}, mean = {.weights = ATTN_WEIGHTS_MEAN};
    attn_opts none = {0};
    attn_trace tr = {.k = c.kt, .v = c.vt};
    whole_run(&c, &per_head, c.out_w, c.wts, &tr, pool);
    whole_run(&c, &mean, scratch, c.wmean, NULL, pool);
    whole_run(&c, &none, c.out_n, NULL, NULL, pool);
    free(scratch);
    reference_double(&c);
    return c;
}

static void dcase_free(dcase *c) {
    for (int i = 0; i < 6; i++)
        free(c->w[i]);
    if (c->share != SHARE_ALL)
        free(c->xk);
    if (c->share == SHARE_NONE)
        free(c->xv);
    free(c->xq), free(c->out_w), free(c->out_n), free(c->wts), free(c->wmean), free(c->kt);
    free(c->vt), free(c->od), free(c->wd), free(c->kd), free(c->vd);
}

/* A decode session's buffers. */
typedef struct session {
    attn_decode_plan plan;
    attn_kv_cache cache;
    void *ws;
    float *wstep; /* one step's weights: (maps, l, S) */
} session;

static bool session_open(session *s, const dcase *c, size_t cap, size_t max_rows,
                         const attn_opts *o, size_t nslots) {
    attn_decode_dims d = {
        .e = c->e, .h = c->h, .kdim = c->kdim, .vdim = c->vdim, .cap = cap, .max_rows = max_rows};
    attn_error err = {0};
    memset(s, 0, sizeof *s);
    int rc = attn_mha_decode_plan(&s->plan, &d, o, nslots, &err);
    CHECK(rc == ATTN_OK, "%s: decode plan: %s", c->name, err.msg);
    if (rc != ATTN_OK)
        return false;
    s->cache = (attn_kv_cache){
        .k = malloc(s->plan.cache_bytes / 2), .v = malloc(s->plan.cache_bytes / 2), .cap = cap};
    s->ws = aligned_alloc(64, s->plan.workspace_bytes);
    s->wstep = malloc((s->plan.weights_elems + 1) * sizeof *s->wstep);
    return true;
}

static void session_close(session *s) {
    free(s->cache.k), free(s->cache.v), free(s->ws), free(s->wstep);
}

/* Appends rows [t0, t0 + l) of c; out is (T, E), the step writes rows t0.. */
static int session_step(session *s, const dcase *c, size_t t0, size_t l, float *out,
                        attn_pool *pool, attn_error *err) {
    attn_weights_out wo = {.values = s->wstep};
    return attn_mha_decode_step(&s->plan, s->ws, &s->cache, out + t0 * c->e, &wo, c->xq + t0 * c->e,
                                c->xk + t0 * c->kdim, c->xv + t0 * c->vdim, l, &c->prm, pool, err);
}

/* How a run appends the sequence: a row at a time, in chunks of 1 to 9, or in one step. */
enum { ONES, CHUNKS, WHOLE };

/* The rows of step k of schedule kind, with t0 of T rows appended. */
static size_t sched_rows(int kind, size_t k, size_t t0, size_t T) {
    static const size_t cycle[] = {3, 1, 7, 2, 9, 4};
    size_t l = kind == ONES ? 1 : kind == WHOLE ? T : cycle[k % 6];
    return l < T - t0 ? l : T - t0;
}

/* Appends c's sequence by schedule kind on session s into out (T, E) and, when the plan asks,
 * the weights into w (maps, T, T) (zeros past each step's S); *flops sums the steps' FLOPs.
 * Checks after each step that no cached row (below the old len) was written. */
static bool run_session(session *s, const dcase *c, int kind, float *out, float *w, size_t maps,
                        double *flops, attn_pool *pool) {
    const size_t T = c->t, E = c->e, H = c->h, Dh = E / H, cap = s->cache.cap;
    float *k0 = malloc(H * cap * Dh * sizeof *k0), *v0 = malloc(H * cap * Dh * sizeof *v0);
    if (w)
        memset(w, 0, maps * T * T * sizeof *w);
    *flops = 0;
    bool ok = true;
    for (size_t k = 0, t0 = 0; ok && t0 < T; k++) {
        size_t l = sched_rows(kind, k, t0, T), len = s->cache.len, S = t0 + l;
        memcpy(k0, s->cache.k, H * cap * Dh * sizeof *k0);
        memcpy(v0, s->cache.v, H * cap * Dh * sizeof *v0);
        attn_error err = {0};
        int rc = session_step(s, c, t0, l, out, pool, &err);
        CHECK(rc == ATTN_OK && s->cache.len == t0 + l, "%s: step at %zu of %zu rows: %s (len %zu)",
              c->name, t0, l, err.msg, s->cache.len);
        ok = rc == ATTN_OK && len == t0;
        bool kept = true;
        for (size_t h = 0; h < H; h++)
            kept =
                kept &&
                memcmp(k0 + h * cap * Dh, s->cache.k + h * cap * Dh, len * Dh * sizeof *k0) == 0 &&
                memcmp(v0 + h * cap * Dh, s->cache.v + h * cap * Dh, len * Dh * sizeof *v0) == 0;
        CHECK(kept, "%s: the step at %zu wrote a cached row", c->name, t0);
        for (size_t m = 0; w && m < maps; m++)
            for (size_t i = 0; i < l; i++)
                memcpy(w + (m * T + t0 + i) * T, s->wstep + (m * l + i) * S, S * sizeof *w);
        *flops += attn_mha_decode_flops(&s->plan.d, len, l);
        t0 += l;
    }
    free(k0), free(v0);
    return ok;
}

/* The cache's keys or values (H, cap, Dh), rows [0, T), as (H, T, Dh). */
static float *cache_rows(const float *x, size_t H, size_t cap, size_t T, size_t Dh) {
    float *y = malloc(H * T * Dh * sizeof *y);
    for (size_t h = 0; h < H; h++)
        memcpy(y + h * T * Dh, x + h * cap * Dh, T * Dh * sizeof *y);
    return y;
}

/* out against the whole call with weights, without (another path) and double. */
static void check_out(const dcase *c, const float *out, const char *run) {
    const size_t n = c->t * c->e;
    double a = rel_f(out, c->out_w, n), b = rel_f(out, c->out_n, n), d = rel_d(out, c->od, n);
    CHECK(a <= DECODE_TOL && b <= DECODE_TOL && d <= DECODE_TOL,
          "%s, %s: out differs from the whole call by %.3g (weights) and %.3g (none), from "
          "double by %.3g",
          c->name, run, a, b, d);
}

/* The cached keys and values against the whole call's (its trace) and double. */
static void check_cache(const dcase *c, const attn_kv_cache *kv, const char *run) {
    const size_t T = c->t, H = c->h, Dh = c->e / c->h, n = H * T * Dh;
    float *k = cache_rows(kv->k, H, kv->cap, T, Dh), *v = cache_rows(kv->v, H, kv->cap, T, Dh);
    double a = fmax(rel_f(k, c->kt, n), rel_f(v, c->vt, n));
    double d = fmax(rel_d(k, c->kd, n), rel_d(v, c->vd, n));
    CHECK(kv->len == T && a <= DECODE_TOL && d <= DECODE_TOL,
          "%s, %s: len %zu; the cached keys and values differ from the whole call's by %.3g, "
          "from double by %.3g",
          c->name, run, kv->len, a, d);
    free(k), free(v);
}

/* Every way of appending case c, against the whole call and double. */
static void decode_case(const dcase *c, attn_pool *pool) {
    const size_t T = c->t, E = c->e, H = c->h, nslots = attn_pool_slots(pool);
    float *out = malloc(T * E * sizeof *out), *out2 = malloc(T * E * sizeof *out2);
    float *w = malloc((H > 3 ? H : 3) * T * T * sizeof *w); /* H maps, or the subset's 3 */
    double flops = 0, *wmd = malloc(T * T * sizeof *wmd);
    session s;

    /* A row at a time, per-head weights, a cache with room to spare. */
    attn_opts per_head = {.weights = ATTN_WEIGHTS_PER_HEAD};
    if (session_open(&s, c, T + 3, 1, &per_head, nslots) &&
        run_session(&s, c, ONES, out, w, H, &flops, pool)) {
        check_out(c, out, "rows one at a time");
        check_cache(c, &s.cache, "rows one at a time");
        double a = rel_f(w, c->wts, H * T * T), d = rel_d(w, c->wd, H * T * T);
        CHECK(a <= DECODE_TOL && d <= DECODE_TOL,
              "%s, rows one at a time: the weights differ from the whole call's by %.3g, from "
              "double by %.3g",
              c->name, a, d);
        attn_mha_dims md = {
            .n = 1, .l = T, .s = T, .e = E, .h = H, .kdim = c->kdim, .vdim = c->vdim};
        attn_masks m = {.causal = ATTN_CAUSAL_TOP_LEFT};
        attn_plan p;
        attn_error err = {0};
        CHECK(attn_mha_plan(&p, &md, NULL, &m, 1, &err) == ATTN_OK &&
                  fabs(flops - p.flops) <= 1e-9 * p.flops,
              "%s: the steps' FLOPs sum to %.17g, the whole call's are %.17g", c->name, flops,
              p.flops);
    }
    session_close(&s);

    /* In chunks of 1 to 9 rows, 4 query rows per task, mean weights, a cache just full. */
    attn_opts mean = {.weights = ATTN_WEIGHTS_MEAN, .block_q = 4};
    if (session_open(&s, c, T, T < 9 ? T : 9, &mean, nslots) &&
        run_session(&s, c, CHUNKS, out, w, 1, &flops, pool)) {
        check_out(c, out, "chunks");
        check_cache(c, &s.cache, "chunks");
        for (size_t i = 0; i < T * T; i++) {
            wmd[i] = 0;
            for (size_t h = 0; h < H; h++)
                wmd[i] += c->wd[h * T * T + i] / (double)H;
        }
        double a = rel_f(w, c->wmean, T * T), d = rel_d(w, wmd, T * T);
        CHECK(a <= DECODE_TOL && d <= DECODE_TOL,
              "%s, chunks: the mean weights differ from the whole call's by %.3g, from double "
              "by %.3g",
              c->name, a, d);
        if (pool) { /* the same bits without the pool */
            float *w2 = malloc(T * T * sizeof *w2);
            s.cache.len = 0;
            run_session(&s, c, CHUNKS, out2, w2, 1, &flops, NULL);
            CHECK(memcmp(out, out2, T * E * sizeof *out) == 0 &&
                      memcmp(w, w2, T * T * sizeof *w) == 0,
                  "%s, chunks: other bits with a pool than without", c->name);
            free(w2);
        }
    }
    session_close(&s);

    /* In one step, the weights of a subset of heads (one of them twice). */
    const uint32_t heads[3] = {(uint32_t)H - 1, 0, (uint32_t)H - 1};
    attn_opts sub = {.weights = ATTN_WEIGHTS_PER_HEAD, .heads = heads, .n_heads = 3};
    if (session_open(&s, c, T, T, &sub, nslots) &&
        run_session(&s, c, WHOLE, out, w, 3, &flops, pool)) {
        check_out(c, out, "one step");
        double a = 0;
        for (size_t m = 0; m < 3; m++)
            a = fmax(a, rel_f(w + m * T * T, c->wts + heads[m] * T * T, T * T));
        CHECK(a <= DECODE_TOL, "%s, one step: the subset's weights differ by %.3g", c->name, a);
    }
    session_close(&s);

    /* A row at a time without weights; with a pool, the same bits as without one. */
    attn_opts none = {0};
    if (session_open(&s, c, T, 1, &none, nslots) &&
        run_session(&s, c, ONES, out, NULL, 0, &flops, pool)) {
        check_out(c, out, "rows one at a time, no weights");
        if (pool) {
            s.cache.len = 0;
            run_session(&s, c, ONES, out2, NULL, 0, &flops, NULL);
            CHECK(memcmp(out, out2, T * E * sizeof *out) == 0,
                  "%s: a session gives other bits with a pool than without", c->name);
        }
    }
    session_close(&s);
    free(out), free(out2), free(w), free(wmd);
}

void test_decode(attn_pool *pool) {
    /* name, E, H, kdim, vdim, T, packed, bias, which inputs are one */
    dcase cases[] = {
        dcase_new("E 16 H 4, in_proj, bias", 16, 4, 16, 16, 37, true, true, SHARE_ALL, pool),
        dcase_new("E 24 H 3, kdim 7 vdim 11", 24, 3, 7, 11, 29, false, false, SHARE_NONE, pool),
        dcase_new("E 96 H 2, q/k/v weights, bias", 96, 2, 96, 96, 70, false, true, SHARE_ALL, pool),
        dcase_new("E 64 H 8, in_proj, bias, key = value", 64, 8, 64, 64, 70, true, true, SHARE_KV,
                  pool),
        dcase_new("E 8 H 1, in_proj, bias", 8, 1, 8, 8, 5, true, true, SHARE_ALL, pool),
        dcase_new("E 32 H 4, q/k/v weights, kdim 40", 32, 4, 40, 32, 45, false, true, SHARE_NONE,
                  pool),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        decode_case(&cases[i], pool);
        dcase_free(&cases[i]);
    }
}

/* A plan of dims d and opts o (NULL: none) must fail with want. */
static void plan_fails(const attn_decode_dims *d, const attn_opts *o, size_t nslots, int want,
                       const char *what) {
    attn_decode_plan p;
    attn_error err = {0};
    int rc = attn_mha_decode_plan(&p, d, o, nslots, &err);
    CHECK(rc == want && (int)err.code == want && err.msg[0], "decode plan, %s: %s (%s), not %s",
          what, attn_status_name(rc), err.msg, attn_status_name(want));
}

/* A step of l rows from row t0 must fail with want and leave the cache as it was. */
static void step_fails(session *s, const dcase *c, size_t t0, size_t l, attn_pool *pool, int want,
                       const char *what) {
    const size_t n = s->plan.cache_bytes / 2 / sizeof(float), len = s->cache.len;
    float *k0 = malloc(n * sizeof *k0), *v0 = malloc(n * sizeof *v0),
          *out = malloc((c->t + l) * c->e * 4);
    memcpy(k0, s->cache.k, n * sizeof *k0), memcpy(v0, s->cache.v, n * sizeof *v0);
    attn_error err = {0};
    int rc = session_step(s, c, t0, l, out, pool, &err);
    bool kept = s->cache.len == len;
    for (size_t h = 0; kept && h < c->h; h++) {
        size_t at = h * s->cache.cap * (c->e / c->h), rows = len * (c->e / c->h);
        kept = memcmp(k0 + at, s->cache.k + at, rows * 4) == 0 &&
               memcmp(v0 + at, s->cache.v + at, rows * 4) == 0;
    }
    CHECK(rc == want && (int)err.code == want && err.msg[0] && kept,
          "decode step, %s: %s (%s), not %s; len %zu, was %zu; cached rows kept %d", what,
          attn_status_name(rc), err.msg, attn_status_name(want), s->cache.len, len, kept);
    free(k0), free(v0), free(out);
}

void test_decode_errors(attn_pool *pool) {
    const size_t nslots = attn_pool_slots(pool);
    attn_decode_dims d = {.e = 16, .h = 4, .cap = 8, .max_rows = 2};
    plan_fails(NULL, NULL, 1, ATTN_ERR_ARG, "no dims");
    plan_fails(&d, NULL, 0, ATTN_ERR_ARG, "no slots");
    attn_decode_dims bad = d;
    bad.h = 3;
    plan_fails(&bad, NULL, 1, ATTN_ERR_SHAPE, "E % H");
    bad = d, bad.cap = 0;
    plan_fails(&bad, NULL, 1, ATTN_ERR_SHAPE, "cap 0");
    bad = d, bad.max_rows = 0;
    plan_fails(&bad, NULL, 1, ATTN_ERR_SHAPE, "max_rows 0");
    bad = d, bad.max_rows = 9;
    plan_fails(&bad, NULL, 1, ATTN_ERR_SHAPE, "max_rows over cap");
    bad = d, bad.cap = SIZE_MAX / 8;
    plan_fails(&bad, NULL, 1, ATTN_ERR_OVERFLOW, "cap beyond int");
    bad = d, bad.cap = bad.max_rows = INT_MAX;
    attn_opts all = {.weights = ATTN_WEIGHTS_PER_HEAD};
    plan_fails(&bad, &all, 1, ATTN_ERR_OVERFLOW, "weights (H, max_rows, cap) beyond size_t");
    const uint32_t five = 5;
    attn_opts o[] = {{.top_k = 2},
                     {.path = ATTN_PATH_TILED},
                     {.weights = ATTN_WEIGHTS_PER_HEAD, .n_heads = 1},
                     {.weights = ATTN_WEIGHTS_PER_HEAD, .heads = &five, .n_heads = 1},
                     {.weights = ATTN_WEIGHTS_MEAN, .heads = &five, .n_heads = 1},
                     {.weights = (attn_weights_mode)7},
                     {.has_scale = true, .scale = INFINITY}};
    for (size_t i = 0; i < sizeof o / sizeof o[0]; i++)
        plan_fails(&d, &o[i], 1, ATTN_ERR_ARG, "a bad option");
    attn_decode_plan p;
    attn_error err = {0};
    CHECK(attn_mha_decode_plan(&p, &d, NULL, 1, &err) == ATTN_OK && p.cache_bytes == 2 * 8 * 16 * 4,
          "decode plan: %s; cache_bytes %zu", err.msg, p.cache_bytes);
    attn_opts cap = {.max_bytes = p.job_bytes - 1};
    plan_fails(&d, &cap, 1, ATTN_ERR_LIMIT, "max_bytes one under job_bytes");
    cap.max_bytes = p.job_bytes;
    CHECK(attn_mha_decode_plan(&p, &d, &cap, 1, &err) == ATTN_OK, "at max_bytes: %s", err.msg);

    /* The steps' errors: each leaves len and the cached rows as they were. */
    dcase c = dcase_new("errors", 16, 4, 16, 16, 8, true, true, SHARE_ALL, pool);
    dcase cd = dcase_new("errors, q/k/v weights", 16, 4, 12, 16, 8, false, true, SHARE_NONE, pool);
    session s;
    attn_opts per_head = {.weights = ATTN_WEIGHTS_PER_HEAD};
    float *ref = malloc(8 * 16 * sizeof *ref), *out = malloc(8 * 16 * sizeof *out);
    if (session_open(&s, &c, 8, 2, &per_head, nslots)) {
        double flops = 0;
        CHECK(run_session(&s, &c, ONES, ref, NULL, 0, &flops, pool), "the errors' reference");
        s.cache.len = 5;
        step_fails(&s, &c, 5, 0, pool, ATTN_ERR_SHAPE, "no rows");
        step_fails(&s, &c, 5, 3, pool, ATTN_ERR_SHAPE, "over max_rows");
        s.cache.len = 7;
        step_fails(&s, &c, 7, 2, pool, ATTN_ERR_LIMIT, "the cache full");
        s.cache.len = 5;
        attn_weights_out wo = {.values = NULL};
        CHECK(attn_mha_decode_step(&s.plan, s.ws, &s.cache, out, &wo, c.xq, c.xq, c.xq, 1, &c.prm,
                                   pool, &err) == ATTN_ERR_ARG &&
                  s.cache.len == 5,
              "a step without its weights buffer");
        err = (attn_error){0};
        CHECK(attn_mha_decode_step(&s.plan, (char *)s.ws + 4, &s.cache, out, NULL, c.xq, c.xq, c.xq,
                                   1, &c.prm, pool, &err) == ATTN_ERR_ARG,
              "a misaligned workspace");
        attn_kv_cache big = s.cache;
        big.cap = 9;
        err = (attn_error){0};
        CHECK(attn_mha_decode_step(&s.plan, s.ws, &big, out, NULL, c.xq, c.xq, c.xq, 1, &c.prm,
                                   pool, &err) == ATTN_ERR_ARG,
              "a cache larger than the plan's");
        err = (attn_error){0};
        CHECK(attn_mha_decode_step(&s.plan, s.ws, &s.cache, out, NULL, c.xq, c.xq, c.xq, 1, &cd.prm,
                                   pool, &err) == ATTN_ERR_ARG,
              "in_proj_weight missing");
        attn_decode_plan unplanned = {0};
        err = (attn_error){0};
        CHECK(attn_mha_decode_step(&unplanned, s.ws, &s.cache, out, NULL, c.xq, c.xq, c.xq, 1,
                                   &c.prm, pool, &err) == ATTN_ERR_ARG,
              "a plan never made");

        /* Float32 overflow in row 5: refused, then row 5 as it is gives the reference's bits, and
         * so do rows 6 and 7 after it: a failed step changes nothing. */
        float saved[16];
        memcpy(saved, c.xq + 5 * 16, sizeof saved);
        for (size_t i = 0; i < 16; i++)
            c.xq[5 * 16 + i] = 3e38f;
        step_fails(&s, &c, 5, 1, pool, ATTN_ERR_NUMERIC, "a row beyond float32");
        memcpy(c.xq + 5 * 16, saved, sizeof saved);
        memcpy(out, ref, 8 * 16 * sizeof *out);
        memset(out + 5 * 16, 0, 3 * 16 * sizeof *out);
        for (size_t t = 5; t < 8; t++) {
            err = (attn_error){0};
            CHECK(session_step(&s, &c, t, 1, out, pool, &err) == ATTN_OK, "row %zu: %s", t,
                  err.msg);
        }
        CHECK(s.cache.len == 8 && memcmp(out, ref, 8 * 16 * sizeof *out) == 0,
              "after a failed step (and len lowered from 8 to 5), rows 5 to 7 give other bits");
    }
    session_close(&s);

    /* Separate weights with kdim 12: the plan must say so (a plan of kdim E refuses them). */
    attn_decode_dims dd = {.e = 16, .h = 4, .kdim = 12, .cap = 8, .max_rows = 1};
    if (session_open(&s, &cd, 8, 1, NULL, nslots)) {
        double flops = 0;
        CHECK(run_session(&s, &cd, ONES, out, NULL, 0, &flops, pool), "kdim 12: the session");
        check_out(&cd, out, "kdim 12");
        CHECK(dd.kdim == s.plan.d.kdim, "kdim 12: the plan has kdim %zu", s.plan.d.kdim);
        s.cache.len = 0;
        step_fails(&s, &c, 0, 1, pool, ATTN_ERR_ARG, "in_proj_weight with kdim 12");
    }
    session_close(&s);
    CHECK(attn_mha_decode_flops(NULL, 1, 1) == 0, "the FLOPs of no dims");
    free(ref), free(out);
    dcase_free(&c), dcase_free(&cd);
}
