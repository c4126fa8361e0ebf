/* mha.c - plans and runs attention jobs: the MHA projections, the masked softmax attention (a
 * direct path that keeps whole logit rows, and a tiled online-softmax path), and the weights out,
 * all inside one caller-given workspace.
 *
 * Legend: N batch, L query length, S key length, E embedding, H heads, Dh = E / H, D and Dv the
 * query/key and value widths of one attention problem, K the top-k count, bq the query rows of a
 * task, bk the keys of a tile. */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "internal.h"

#define PROJ_MIN_ROWS 32
#define PROJ_MIN_COLS 64

/* Keys query row i of batch n may attend before the cell masks: the causal limit and the key
 * length. Nondecreasing in i. */
static size_t row_limit(const attn_plan *p, size_t n, size_t i) {
    size_t lim = p->sd.s;
    if (p->masks.key_lengths && (size_t)p->masks.key_lengths[n] < lim)
        lim = (size_t)p->masks.key_lengths[n];
    if (p->masks.causal == ATTN_CAUSAL_TOP_LEFT && i + 1 < lim) {
        lim = i + 1;
    } else if (p->masks.causal == ATTN_CAUSAL_BOTTOM_RIGHT) {
        size_t c = i + 1 + p->sd.s > p->sd.l ? i + 1 + p->sd.s - p->sd.l : 0;
        if (c < lim)
            lim = c;
    }
    return lim;
}

/* ---- Running: shared state ---------------------------------------------------------------- */

static float *slot_scratch(const attn_run *r, size_t slot) {
    return r->slots + slot * r->p->slot_floats;
}

/* The cell masks of row i of problem (n, h), each NULL when absent. */
typedef struct row_masks {
    const uint8_t *km, *am;
    const float *bias;
} row_masks;

static row_masks masks_for_row(const attn_plan *p, size_t n, size_t h, size_t i) {
    const attn_masks *m = &p->masks;
    const size_t L = p->sd.l, S = p->sd.s;
    row_masks r = {0};
    if (m->key_mask)
        r.km = m->key_mask + (m->key_mask_n == p->sd.n ? n : 0) * S;
    if (m->attn_mask) {
        size_t mn = m->attn_mask_n == p->sd.n ? n : 0, mh = m->attn_mask_h == p->sd.h ? h : 0;
        r.am = m->attn_mask + ((mn * attn_extent(m->attn_mask_h) + mh) * L + i) * S;
    }
    if (m->attn_bias) {
        size_t bn = m->attn_bias_n == p->sd.n ? n : 0, bh = m->attn_bias_h == p->sd.h ? h : 0;
        r.bias = m->attn_bias + ((bn * attn_extent(m->attn_bias_h) + bh) * L + i) * S;
    }
    return r;
}

/* Masks the logits x[0..cols) of keys j0.. of one row: cells at or past lim (relative to j0) and
 * cells a mask blocks become -inf; the bias is added. Returns the row max (-inf when every cell
 * is blocked). Flags r->numeric when an unmasked logit is not finite. */
static float row_mask_max(attn_run *r, float *x, size_t cols, size_t lim, row_masks rm, size_t j0) {
    if (lim > cols)
        lim = cols;
    if (!r->ks->all_finite(x, lim))
        atomic_store(&r->numeric, 1);
    for (size_t j = lim; j < cols; j++)
        x[j] = -INFINITY;
    if (rm.km) {
        const uint8_t *km = rm.km + j0;
        for (size_t j = 0; j < lim; j++)
            x[j] = km[j] ? x[j] : -INFINITY;
    }
    if (rm.am) {
        const uint8_t *am = rm.am + j0;
        for (size_t j = 0; j < lim; j++)
            x[j] = am[j] ? x[j] : -INFINITY;
    }
    if (rm.bias) {
        const float *b = rm.bias + j0;
        for (size_t j = 0; j < lim; j++)
            x[j] += b[j];
    }
    float m = r->ks->row_max(x, lim);
    if (m == INFINITY)
        atomic_store(&r->numeric, 1);
    return m;
}

/* ---- Top-k -------------------------------------------------------------------------------- */

/* True when weight (a, ia) ranks above (b, ib): larger, or equal with a lower key index. */
static bool ranks_above(float a, int32_t ia, float b, int32_t ib) {
    return a > b || (a == b && ia < ib);
}

/* Restores the min-heap (lowest-ranked at 0) of n entries below position i. */
static void heap_down(float *v, int32_t *ix, size_t n, size_t i) {
    for (;;) {
        size_t lo = i, a = 2 * i + 1, b = a + 1;
        if (a < n && ranks_above(v[lo], ix[lo], v[a], ix[a]))
            lo = a;
        if (b < n && ranks_above(v[lo], ix[lo], v[b], ix[b]))
            lo = b;
        if (lo == i)
            return;
        float tv = v[i];
        int32_t ti = ix[i];
        v[i] = v[lo];
        ix[i] = ix[lo];
        v[lo] = tv;
        ix[lo] = ti;
        i = lo;
    }
}

/* The k largest of w[0..s) into vals/idx, largest first, ties by lower index. k <= s. */
static void topk_row(const float *w, size_t s, size_t k, float *vals, int32_t *idx) {
    for (size_t j = 0; j < k; j++) {
        vals[j] = w[j];
        idx[j] = (int32_t)j;
    }
    for (size_t i = k / 2; i-- > 0;)
        heap_down(vals, idx, k, i);
    for (size_t j = k; j < s; j++) {
        if (w[j] > vals[0]) { /* an equal weight has a higher index: it never ranks above */
            vals[0] = w[j];
            idx[0] = (int32_t)j;
            heap_down(vals, idx, k, 0);
        }
    }
    /* Heap sort: move the lowest-ranked to the back. */
    for (size_t n = k; n > 1; n--) {
        float tv = vals[0];
        int32_t ti = idx[0];
        vals[0] = vals[n - 1];
        idx[0] = idx[n - 1];
        vals[n - 1] = tv;
        idx[n - 1] = ti;
        heap_down(vals, idx, n - 1, 0);
    }
}

/* ---- Direct path -------------------------------------------------------------------------- */

/* Softmax of rows [i0, i0+rows) of problem (n, h) held in P (ldp apart, ncols computed logits
 * each, the rest of each row up to zero_to is zeroed). */
static void softmax_rows(attn_run *r, float *P, size_t ldp, size_t rows, size_t ncols,
                         size_t zero_to, size_t n, size_t h, size_t i0) {
    for (size_t ri = 0; ri < rows; ri++) {
        float *x = P + ri * ldp;
        size_t lim = row_limit(r->p, n, i0 + ri);
        float m = row_mask_max(r, x, ncols, lim, masks_for_row(r->p, n, h, i0 + ri), 0);
        if (m == -INFINITY) {
            memset(x, 0, zero_to * sizeof *x);
            continue;
        }
        float sum = r->ks->exp_sum(x, lim, m);
        r->ks->scale(x, lim, 1.0f / sum);
        memset(x + lim, 0, (zero_to - lim) * sizeof *x);
    }
}

/* Computes problem (n, h), query rows [i0, i0+rows): softmax rows into P (ld S, whole rows
 * written) and the attention output rows. */
static void direct_block(attn_run *r, float *P, size_t n, size_t h, size_t i0, size_t rows) {
    const attn_plan *p = r->p;
    const attn_view *v = &r->view;
    const size_t S = p->sd.s;
    size_t ncols = row_limit(p, n, i0 + rows - 1); /* the widest row of the block */
    const float *q = v->q + n * v->q_sn + h * v->q_sh + i0 * v->ldq;
    const float *k = v->k + n * v->k_sn + h * v->k_sh;
    const float *vv = v->v + n * v->v_sn + h * v->v_sh;
    float *o = v->o + n * v->o_sn + h * v->o_sh + i0 * v->ldo;
    if (ncols == 0) {
        for (size_t ri = 0; ri < rows; ri++) {
            memset(P + ri * S, 0, S * sizeof *P);
            memset(o + ri * v->ldo, 0, p->sd.dv * sizeof *o);
        }
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)ncols, (int)p->sd.d,
                p->scale, q, (int)v->ldq, k, (int)v->ldk, 0.0f, P, (int)S);
    softmax_rows(r, P, S, rows, ncols, S, n, h, i0);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)p->sd.dv, (int)ncols,
                1.0f, P, (int)S, vv, (int)v->ldv, 0.0f, o, (int)v->ldo);
}

/* Where map m (a head slot, or 0 for the mean) of batch n, row i, starts in the weights. */
static size_t weights_row(const attn_plan *p, size_t maps, size_t n, size_t m, size_t i) {
    size_t width = p->opts.top_k ? p->opts.top_k : p->sd.s;
    return ((n * maps + m) * p->sd.l + i) * width;
}

/* Writes rows [i0, i0+rows) of P (ld S) as weights map m of batch n: dense or top-k. */
static void store_weights(attn_run *r, const float *P, size_t maps, size_t n, size_t m, size_t i0,
                          size_t rows) {
    const attn_plan *p = r->p;
    const size_t S = p->sd.s, K = p->opts.top_k;
    for (size_t ri = 0; ri < rows; ri++) {
        size_t at = weights_row(p, maps, n, m, i0 + ri);
        if (K)
            topk_row(P + ri * S, S, K, r->wout.values + at, r->wout.indices + at);
        else if (r->wout.values + at != P + ri * S)
            memcpy(r->wout.values + at, P + ri * S, S * sizeof *P);
    }
}

/* Task of the direct path without mean weights: problem (n, h), query block qb. */
static void direct_task(void *ctx, size_t task, size_t slot) {
    attn_run *r = ctx;
    const attn_plan *p = r->p;
    size_t qb = task % p->nqb, h = task / p->nqb % p->sd.h, n = task / p->nqb / p->sd.h;
    size_t i0 = qb * p->bq, rows = p->bq < p->sd.l - i0 ? p->bq : p->sd.l - i0;
    bool per_head = p->opts.weights == ATTN_WEIGHTS_PER_HEAD;
    size_t maps = per_head ? (p->opts.n_heads ? p->opts.n_heads : p->sd.h) : 0;

    /* Dense per-head maps are computed in place in the output, at the head's first slot. */
    float *P = slot_scratch(r, slot);
    size_t first = SIZE_MAX;
    if (per_head) {
        for (size_t m = 0; m < maps && first == SIZE_MAX; m++)
            if ((p->opts.n_heads ? p->opts.heads[m] : m) == h)
                first = m;
        if (first != SIZE_MAX && !p->opts.top_k)
            P = r->wout.values + weights_row(p, maps, n, first, i0);
    }
    direct_block(r, P, n, h, i0, rows);
    if (first == SIZE_MAX)
        return;
    for (size_t m = first; m < maps; m++)
        if ((p->opts.n_heads ? p->opts.heads[m] : m) == h)
            store_weights(r, P, maps, n, m, i0, rows);
}

/* Task of the direct path with mean weights: batch n, query block qb, every head in turn, so
 * the mean rows have one owner. */
static void direct_mean_task(void *ctx, size_t task, size_t slot) {
    attn_run *r = ctx;
    const attn_plan *p = r->p;
    const size_t S = p->sd.s, H = p->sd.h;
    size_t qb = task % p->nqb, n = task / p->nqb;
    size_t i0 = qb * p->bq, rows = p->bq < p->sd.l - i0 ? p->bq : p->sd.l - i0;
    float *P = slot_scratch(r, slot);
    float *mean =
        p->opts.top_k ? P + attn_align_up(p->bq * S) : r->wout.values + weights_row(p, 1, n, 0, i0);
    const float inv_h = 1.0f / (float)H;
    for (size_t h = 0; h < H; h++) {
        direct_block(r, P, n, h, i0, rows);
        for (size_t ri = 0; ri < rows; ri++) {
            float *dst = mean + ri * S;
            const float *src = P + ri * S;
            if (h == 0)
                for (size_t j = 0; j < S; j++)
                    dst[j] = src[j] * inv_h;
            else
                for (size_t j = 0; j < S; j++)
                    dst[j] += src[j] * inv_h;
        }
    }
    if (p->opts.top_k)
        store_weights(r, mean, 1, n, 0, i0, rows);
}

/* ---- Tiled path --------------------------------------------------------------------------- */

/* Problem (n, h), query block qb of the tiled path: keys in tiles of bk with a running max M
 * and running sum Z per row (online softmax); tiles past the causal limit are skipped.
 *
 * The fast form keeps acc unnormalised (the sum of exp(x - M) v over the keys so far) and
 * divides by Z at the end. That sum can pass FLT_MAX when the values are near it although the
 * weighted mean cannot (two keys of value 3e38 sum to 6e38 before the division by 2). The
 * normalised form keeps acc as the weighted mean itself: each tile's exp(x - M) are divided by
 * the new Z before the PV product, and acc is rescaled by Z_old / Z_new, so acc stays within
 * the values' range. It costs a pass over each tile, so it runs only when the fast form's acc
 * is not finite. Returns whether acc stayed finite (then o holds the rows). */
static bool tiled_block(attn_run *r, size_t slot, size_t n, size_t h, size_t qb, bool normalised) {
    const attn_plan *p = r->p;
    const attn_view *v = &r->view;
    const size_t bq = p->bq, bk = p->bk, Dv = p->sd.dv;
    size_t i0 = qb * bq, rows = bq < p->sd.l - i0 ? bq : p->sd.l - i0;

    float *P = slot_scratch(r, slot);        /* P is (bq, bk): one tile of logits */
    float *acc = P + attn_align_up(bq * bk); /* acc is (bq, Dv): the output so far */
    float *M = acc + attn_align_up(bq * Dv); /* M is (bq): running max */
    float *Z = M + bq;                       /* Z is (bq): running sum of exp(x - M) */
    memset(acc, 0, rows * Dv * sizeof *acc);
    for (size_t ri = 0; ri < rows; ri++) {
        M[ri] = -INFINITY;
        Z[ri] = 0.0f;
    }
    const float *q = v->q + n * v->q_sn + h * v->q_sh + i0 * v->ldq;
    const float *k = v->k + n * v->k_sn + h * v->k_sh;
    const float *vv = v->v + n * v->v_sn + h * v->v_sh;
    float *o = v->o + n * v->o_sn + h * v->o_sh + i0 * v->ldo;
    size_t ncols = row_limit(p, n, i0 + rows - 1);
    size_t r0 = 0; /* rows before r0 have no keys left in this or later tiles */

    for (size_t j0 = 0; j0 < ncols; j0 += bk) {
        size_t cols = bk < ncols - j0 ? bk : ncols - j0;
        while (r0 < rows && row_limit(p, n, i0 + r0) <= j0)
            r0++;
        size_t nr = rows - r0;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)cols, (int)p->sd.d,
                    p->scale, q + r0 * v->ldq, (int)v->ldq, k + j0 * v->ldk, (int)v->ldk, 0.0f,
                    P + r0 * bk, (int)bk);
        for (size_t ri = r0; ri < rows; ri++) {
            float *x = P + ri * bk;
            size_t lim = row_limit(p, n, i0 + ri) - j0;
            if (lim > cols)
                lim = cols;
            float m = row_mask_max(r, x, cols, lim, masks_for_row(p, n, h, i0 + ri), j0);
            if (m == -INFINITY) {
                memset(x, 0, cols * sizeof *x);
                continue;
            }
            float m_new = m > M[ri] ? m : M[ri];
            float sum = r->ks->exp_sum(x, lim, m_new);
            memset(x + lim, 0, (cols - lim) * sizeof *x);
            float alpha = 1.0f; /* rescales what acc and Z hold to the new max */
            if (m_new != M[ri]) {
                alpha = M[ri] == -INFINITY ? 0.0f : expf(M[ri] - m_new);
                M[ri] = m_new;
            }
            if (normalised) {
                float z_old = Z[ri] * alpha, z_new = z_old + sum;
                r->ks->scale(x, lim, 1.0f / z_new);
                r->ks->scale(acc + ri * Dv, Dv, z_old / z_new);
                Z[ri] = z_new;
            } else {
                if (alpha != 1.0f) {
                    Z[ri] *= alpha;
                    r->ks->scale(acc + ri * Dv, Dv, alpha);
                }
                Z[ri] += sum;
            }
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nr, (int)Dv, (int)cols, 1.0f,
                    P + r0 * bk, (int)bk, vv + j0 * v->ldv, (int)v->ldv, 1.0f, acc + r0 * Dv,
                    (int)Dv);
    }
    if (!r->ks->all_finite(acc, rows * Dv))
        return false;
    for (size_t ri = 0; ri < rows; ri++) {
        float inv = normalised ? 1.0f : Z[ri] > 0.0f ? 1.0f / Z[ri] : 0.0f;
        for (size_t c = 0; c < Dv; c++)
            o[ri * v->ldo + c] = acc[ri * Dv + c] * inv;
    }
    return true;
}

/* Task of the tiled path: problem (n, h), query block qb; the normalised form when the fast
 * one overflows (and the logits themselves did not: then the job fails anyway). */
static void tiled_task(void *ctx, size_t task, size_t slot) {
    attn_run *r = ctx;
    const attn_plan *p = r->p;
    size_t qb = task % p->nqb, h = task / p->nqb % p->sd.h, n = task / p->nqb / p->sd.h;
    if (!tiled_block(r, slot, n, h, qb, false) && !atomic_load(&r->numeric) &&
        !tiled_block(r, slot, n, h, qb, true))
        atomic_store(&r->numeric, 1);
}

int attn_run_attention(attn_run *r, attn_pool *pool, attn_error *err) {
    const attn_plan *p = r->p;
    r->ks = attnk_get();
    atomic_init(&r->numeric, 0);
    const attn_sdpa_dims *d = &p->sd;
    if (2.0 * (double)(d->n * d->h) * (double)d->l * (double)d->s * (double)(d->d + d->dv) <
        ATTN_INLINE_FLOPS)
        pool = NULL;
    if (p->tiled)
        attn_pool_run(pool, p->sd.n * p->sd.h * p->nqb, tiled_task, r);
    else if (p->opts.weights == ATTN_WEIGHTS_MEAN)
        attn_pool_run(pool, p->sd.n * p->nqb, direct_mean_task, r);
    else
        attn_pool_run(pool, p->sd.n * p->sd.h * p->nqb, direct_task, r);
    if (atomic_load(&r->numeric))
        return attn_fail(err, ATTN_ERR_NUMERIC,
                         "a logit or an attention row is not finite: the inputs are too large for "
                         "float32");
    return ATTN_OK;
}

int attn_check_run_args(const attn_plan *p, int kind, void *ws, float *out,
                        const attn_weights_out *w, attn_pool *pool, attn_error *err) {
    if (!p || p->kind != kind)
        return attn_fail(err, ATTN_ERR_ARG, "the plan is missing or of another kind");
    if (!ws || !out)
        return attn_fail(err, ATTN_ERR_ARG, "the workspace and output must not be NULL");
    if ((uintptr_t)ws % 64 != 0)
        return attn_fail(err, ATTN_ERR_ARG, "the workspace must be 64-byte aligned");
    if (p->weights_elems && (!w || !w->values || (p->index_elems && !w->indices)))
        return attn_fail(err, ATTN_ERR_ARG, "the plan requests weights but no buffer was given");
    if (attn_pool_slots(pool) > p->nslots)
        return attn_fail(err, ATTN_ERR_ARG, "the pool has %zu slots but the plan allows %zu",
                         attn_pool_slots(pool), p->nslots);
    return ATTN_OK;
}

int attn_sdpa_forward(const attn_plan *plan, void *workspace, float *out, attn_weights_out *weights,
                      const float *q, const float *k, const float *v, attn_pool *pool,
                      attn_error *err) {
    int rc = attn_check_run_args(plan, ATTN_PLAN_SDPA, workspace, out, weights, pool, err);
    if (rc != ATTN_OK)
        return rc;
    if (!q || !k || !v)
        return attn_fail(err, ATTN_ERR_ARG, "q, k and v must not be NULL");
    const attn_sdpa_dims *d = &plan->sd;
    attn_ws_layout l = attn_plan_layout(plan);
    attn_run r = {.p = plan, .slots = (float *)workspace + l.slots};
    if (weights)
        r.wout = *weights;
    r.view = (attn_view){
        .q = q,
        .q_sh = d->l * d->d,
        .q_sn = d->h * d->l * d->d,
        .ldq = d->d,
        .k = k,
        .k_sh = d->s * d->d,
        .k_sn = d->h * d->s * d->d,
        .ldk = d->d,
        .v = v,
        .v_sh = d->s * d->dv,
        .v_sn = d->h * d->s * d->dv,
        .ldv = d->dv,
        .o = out,
        .o_sh = d->l * d->dv,
        .o_sn = d->h * d->l * d->dv,
        .ldo = d->dv,
    };
    rc = attn_run_attention(&r, pool, err);
    if (rc == ATTN_OK && !attnk_get()->all_finite(out, plan->out_elems))
        rc = attn_fail(err, ATTN_ERR_NUMERIC, "the output is not finite: float32 overflowed");
    return rc;
}

/* ---- MHA projections ---------------------------------------------------------------------- */

/* c (rows, outdim; ld ldc) = x (rows, in; ld ldx) w^T + b, with w (outdim, in) and b (outdim)
 * or NULL. */
typedef struct proj_gemm {
    const float *x, *w, *b;
    float *c;
    size_t rows, in, outdim, ldx, ldc;
    size_t rb, cb; /* row and column block */
    size_t ncb;    /* column blocks */
    size_t ntasks; /* row blocks x column blocks */
} proj_gemm;

typedef struct proj_run {
    proj_gemm g[3];
    size_t ng;
} proj_run;

static void proj_task(void *ctx, size_t task, size_t slot) {
    (void)slot;
    proj_run *pr = ctx;
    size_t gi = 0;
    while (task >= pr->g[gi].ntasks)
        task -= pr->g[gi++].ntasks;
    const proj_gemm *g = &pr->g[gi];
    size_t r0 = task / g->ncb * g->rb, rows = g->rb < g->rows - r0 ? g->rb : g->rows - r0;
    size_t c0 = task % g->ncb * g->cb, cols = g->cb < g->outdim - c0 ? g->cb : g->outdim - c0;
    float *c = g->c + r0 * g->ldc + c0;
    float beta = 0.0f;
    if (g->b) {
        for (size_t i = 0; i < rows; i++)
            memcpy(c + i * g->ldc, g->b + c0, cols * sizeof *c);
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)cols, (int)g->in, 1.0f,
                g->x + r0 * g->ldx, (int)g->ldx, g->w + c0 * g->in, (int)g->in, beta, c,
                (int)g->ldc);
}

static size_t ceil_div(size_t a, size_t b) {
    return (a + b - 1) / b;
}

/* Adds GEMM g to pr, split into a grid of row x column blocks, about two per slot. Each task
 * packs its rows of x and its rows of w, so the grid minimises rows_split * outdim +
 * cols_split * rows: row splits re-pack w, column splits re-pack x. */
static void proj_add(proj_run *pr, proj_gemm g, size_t nslots) {
    size_t want = nslots == 1 ? 1 : 2 * nslots, best = SIZE_MAX;
    g.rb = g.rows;
    g.cb = g.outdim;
    for (size_t tr = 1; tr <= want; tr++) {
        if (want % tr)
            continue;
        size_t tc = want / tr;
        size_t rb = ceil_div(g.rows, tr), cb = ceil_div(ceil_div(g.outdim, tc), 16) * 16;
        if ((tr > 1 && rb < PROJ_MIN_ROWS) || (tc > 1 && cb < PROJ_MIN_COLS))
            continue;
        size_t cost = tr * g.outdim + tc * g.rows;
        if (cost < best) {
            best = cost;
            g.rb = rb;
            g.cb = cb;
        }
    }
    g.ncb = ceil_div(g.outdim, g.cb);
    g.ntasks = ceil_div(g.rows, g.rb) * g.ncb;
    pr->g[pr->ng++] = g;
}

static void proj_exec(proj_run *pr, attn_pool *pool) {
    size_t total = 0;
    double flops = 0;
    for (size_t i = 0; i < pr->ng; i++) {
        total += pr->g[i].ntasks;
        flops += 2.0 * (double)pr->g[i].rows * (double)pr->g[i].outdim * (double)pr->g[i].in;
    }
    attn_pool_run(flops < ATTN_INLINE_FLOPS ? NULL : pool, total, proj_task, pr);
}

/* Adds the input projections of ip to pr, and points v's q, k, v (row 0, leading dimensions) at
 * their results. */
static void in_proj_add(proj_run *pr, attn_view *v, const attn_in_proj *ip,
                        const attn_mha_params *prm, size_t nslots) {
    const size_t E = ip->e;
    const bool packed = prm->in_proj_weight != NULL;
    const float *bias = prm->in_proj_bias;
    if (ip->self) {
        proj_add(pr,
                 (proj_gemm){.x = ip->xq,
                             .w = prm->in_proj_weight,
                             .b = bias,
                             .c = ip->proj,
                             .rows = ip->rows,
                             .in = E,
                             .outdim = 3 * E,
                             .ldx = E,
                             .ldc = 3 * E},
                 nslots);
        *v = (attn_view){.q = ip->proj,
                         .ldq = 3 * E,
                         .k = ip->proj + E,
                         .ldk = 3 * E,
                         .v = ip->proj + 2 * E,
                         .ldv = 3 * E};
        return;
    }
    proj_add(pr,
             (proj_gemm){.x = ip->xq,
                         .w = packed ? prm->in_proj_weight : prm->q_proj_weight,
                         .b = bias,
                         .c = ip->proj,
                         .rows = ip->rows,
                         .in = E,
                         .outdim = E,
                         .ldx = E,
                         .ldc = E},
             nslots);
    if (packed && ip->kv_one) {
        /* Rows E..3E of in_proj_weight are contiguous, and so are kproj and vproj. */
        proj_add(pr,
                 (proj_gemm){.x = ip->xk,
                             .w = prm->in_proj_weight + E * E,
                             .b = bias ? bias + E : NULL,
                             .c = ip->kproj,
                             .rows = ip->krows,
                             .in = E,
                             .outdim = 2 * E,
                             .ldx = E,
                             .ldc = 2 * E},
                 nslots);
        *v = (attn_view){.q = ip->proj,
                         .ldq = E,
                         .k = ip->kproj,
                         .ldk = 2 * E,
                         .v = ip->kproj + E,
                         .ldv = 2 * E};
        return;
    }
    proj_add(pr,
             (proj_gemm){.x = ip->xk,
                         .w = packed ? prm->in_proj_weight + E * E : prm->k_proj_weight,
                         .b = bias ? bias + E : NULL,
                         .c = ip->kproj,
                         .rows = ip->krows,
                         .in = ip->kdim,
                         .outdim = E,
                         .ldx = ip->kdim,
                         .ldc = E},
             nslots);
    proj_add(pr,
             (proj_gemm){.x = ip->xv,
                         .w = packed ? prm->in_proj_weight + 2 * E * E : prm->v_proj_weight,
                         .b = bias ? bias + 2 * E : NULL,
                         .c = ip->vproj,
                         .rows = ip->krows,
                         .in = ip->vdim,
                         .outdim = E,
                         .ldx = ip->vdim,
                         .ldc = E},
             nslots);
    *v = (attn_view){.q = ip->proj, .ldq = E, .k = ip->kproj, .ldk = E, .v = ip->vproj, .ldv = E};
}

void attn_in_proj_run(attn_view *v, const attn_in_proj *ip, const attn_mha_params *prm,
                      size_t nslots, attn_pool *pool) {
    proj_run pr = {.ng = 0};
    in_proj_add(&pr, v, ip, prm, nslots);
    proj_exec(&pr, pool);
}

void attn_view_strides(attn_view *v, const attn_mha_dims *d, size_t dh, float *ob) {
    v->q_sn = d->l * v->ldq;
    v->k_sn = d->s * v->ldk;
    v->v_sn = d->s * v->ldv;
    v->q_sh = v->k_sh = v->v_sh = dh;
    v->o = ob;
    v->ldo = d->e;
    v->o_sn = d->l * d->e;
    v->o_sh = dh;
}

void attn_out_proj_run(float *out, const float *ob, size_t rows, size_t e,
                       const attn_mha_params *prm, size_t nslots, attn_pool *pool) {
    proj_run po = {.ng = 0};
    proj_add(&po,
             (proj_gemm){.x = ob,
                         .w = prm->out_proj_weight,
                         .b = prm->out_proj_bias,
                         .c = out,
                         .rows = rows,
                         .in = e,
                         .outdim = e,
                         .ldx = e,
                         .ldc = e},
             nslots);
    proj_exec(&po, pool);
}

int attn_mha_forward(const attn_plan *plan, void *workspace, float *out, attn_weights_out *weights,
                     const float *query, const float *key, const float *value,
                     const attn_mha_params *params, attn_pool *pool, attn_error *err) {
    int rc = attn_check_run_args(plan, ATTN_PLAN_MHA, workspace, out, weights, pool, err);
    if (rc != ATTN_OK)
        return rc;
    if (!query || !key || !value || !params)
        return attn_fail(err, ATTN_ERR_ARG, "query, key, value and params must not be NULL");
    const attn_mha_dims *d = &plan->mha;
    const size_t NL = d->n * d->l;
    const bool packed = params->in_proj_weight != NULL;
    if (!params->out_proj_weight ||
        (!packed && (!params->q_proj_weight || !params->k_proj_weight || !params->v_proj_weight)))
        return attn_fail(err, ATTN_ERR_ARG,
                         "params need out_proj.weight and in_proj_weight, or all of "
                         "q_proj_weight, k_proj_weight and v_proj_weight");
    if (packed && (d->kdim != d->e || d->vdim != d->e))
        return attn_fail(err, ATTN_ERR_ARG,
                         "in_proj_weight needs kdim = vdim = E; give q/k/v_proj_weight instead");

    float *ws = workspace;
    attn_ws_layout l = attn_plan_layout(plan);
    attn_run r = {.p = plan, .slots = ws + l.slots};
    if (weights)
        r.wout = *weights;
    attn_in_proj ip = {.xq = query,
                       .xk = key,
                       .xv = value,
                       .proj = ws + l.proj,
                       .kproj = ws + l.kproj,
                       .vproj = ws + l.vproj,
                       .rows = NL,
                       .krows = d->n * d->s,
                       .e = d->e,
                       .kdim = d->kdim,
                       .vdim = d->vdim,
                       .self = packed && query == key && key == value && d->l == d->s,
                       .kv_one = key == value};
    attn_in_proj_run(&r.view, &ip, params, plan->nslots, pool);

    attn_view_strides(&r.view, d, plan->sd.d, ws + l.ob);
    rc = attn_run_attention(&r, pool, err);
    if (rc != ATTN_OK)
        return rc;

    attn_out_proj_run(out, ws + l.ob, NL, d->e, params, plan->nslots, pool);
    if (!attnk_get()->all_finite(out, plan->out_elems))
        return attn_fail(err, ATTN_ERR_NUMERIC, "the output is not finite: float32 overflowed");
    return ATTN_OK;
}

/* ---- Batches of MHA jobs ------------------------------------------------------------------ */

/* Offsets, in floats from the workspace start, of a batch's regions. R = bp->rows query rows,
 * RS = bp->key_rows key rows. */
typedef struct batch_layout {
    size_t xq;    /* (R, E): the gathered queries; later the out-projection's result */
    size_t xk;    /* (RS, kdim): the gathered keys (cross only) */
    size_t xv;    /* (RS, vdim): the gathered values (cross only; = xk when kv_one) */
    size_t proj;  /* self: [Q K V] (R, 3E); cross: Q (R, E) */
    size_t kproj; /* cross: K (RS, E), or [K V] (RS, 2E) over kproj and vproj */
    size_t vproj; /* cross: V (RS, E) */
    size_t ob;    /* (R, E): the heads' outputs, concatenated, before out_proj */
    size_t slots; /* nslots x slot_floats of per-thread scratch, shared by the jobs in turn */
    size_t total; /* floats */
    bool ok;
} batch_layout;

static batch_layout batch_layout_of(const attn_batch_plan *bp) {
    attn_ws_layout l = {.ok = true};
    batch_layout b = {0};
    b.xq = attn_ws_take(&l, bp->rows, bp->e, 1);
    if (bp->self) {
        b.proj = attn_ws_take(&l, bp->rows, bp->e, 3);
    } else {
        b.xk = attn_ws_take(&l, bp->key_rows, bp->kdim, 1);
        b.xv = bp->kv_one ? b.xk : attn_ws_take(&l, bp->key_rows, bp->vdim, 1);
        b.proj = attn_ws_take(&l, bp->rows, bp->e, 1);
        b.kproj = attn_ws_take(&l, bp->key_rows, bp->e, 1);
        b.vproj = attn_ws_take(&l, bp->key_rows, bp->e, 1);
    }
    b.ob = attn_ws_take(&l, bp->rows, bp->e, 1);
    b.slots = attn_ws_take(&l, bp->nslots, bp->slot_floats, 1);
    b.total = l.total;
    b.ok = l.ok;
    return b;
}

static bool params_usable(const attn_mha_params *prm, size_t e, size_t kdim, size_t vdim) {
    bool packed = prm->in_proj_weight != NULL;
    return prm->out_proj_weight &&
           (packed ? kdim == e && vdim == e
                   : prm->q_proj_weight && prm->k_proj_weight && prm->v_proj_weight);
}

int attn_mha_batch_plan(attn_batch_plan *bp, const attn_mha_batch_job *jobs, size_t count,
                        const attn_mha_params *params, size_t max_bytes, attn_error *err) {
    if (!bp || !jobs || count == 0 || !params)
        return attn_fail(err, ATTN_ERR_ARG,
                         "attn_mha_batch_plan needs a plan, at least one job and the params");
    memset(bp, 0, sizeof *bp);
    const attn_plan *p0 = jobs[0].plan;
    if (!p0 || p0->kind != ATTN_PLAN_MHA)
        return attn_fail(err, ATTN_ERR_ARG, "job 0 has no MHA plan");
    const attn_mha_dims *d0 = &p0->mha;
    if (!params_usable(params, d0->e, d0->kdim, d0->vdim))
        return attn_fail(err, ATTN_ERR_ARG,
                         "params need out_proj.weight and in_proj_weight (with kdim = vdim = E), "
                         "or all of q_proj_weight, k_proj_weight and v_proj_weight");
    bool packed = params->in_proj_weight != NULL;
    bp->count = count;
    bp->e = d0->e;
    bp->kdim = d0->kdim;
    bp->vdim = d0->vdim;
    bp->nslots = p0->nslots;
    bp->self = packed;
    bp->kv_one = d0->kdim == d0->vdim;
    size_t rows = 0, key_rows = 0;
    for (size_t i = 0; i < count; i++) {
        const attn_mha_batch_job *j = &jobs[i];
        const attn_plan *p = j->plan;
        if (!p || p->kind != ATTN_PLAN_MHA)
            return attn_fail(err, ATTN_ERR_ARG, "job %zu has no MHA plan", i);
        const attn_mha_dims *d = &p->mha;
        if (d->e != bp->e || d->h != d0->h || d->kdim != bp->kdim || d->vdim != bp->vdim ||
            p->nslots != bp->nslots)
            return attn_fail(err, ATTN_ERR_ARG,
                             "job %zu (E=%zu H=%zu kdim=%zu vdim=%zu, %zu slots) does not match "
                             "job 0 (E=%zu H=%zu kdim=%zu vdim=%zu, %zu slots)",
                             i, d->e, d->h, d->kdim, d->vdim, p->nslots, bp->e, d0->h, bp->kdim,
                             bp->vdim, bp->nslots);
        if (!j->query || !j->key || !j->value)
            return attn_fail(err, ATTN_ERR_ARG, "job %zu: query, key and value must not be NULL",
                             i);
        bp->self &= j->query == j->key && j->key == j->value && d->l == d->s;
        bp->kv_one &= j->key == j->value;
        if (!attn_add(rows, d->n * d->l, &rows) || !attn_add(key_rows, d->n * d->s, &key_rows))
            return attn_fail(err, ATTN_ERR_OVERFLOW, "the batch's rows overflow");
        if (p->slot_floats > bp->slot_floats)
            bp->slot_floats = p->slot_floats;
        bp->flops += p->flops;
    }
    bp->rows = rows;
    bp->key_rows = bp->self ? 0 : key_rows;
    size_t e3 = 0;
    if (!attn_fits_int(bp->rows) || !attn_fits_int(bp->key_rows) || !attn_mul(bp->e, 3, &e3) ||
        !attn_fits_int(e3))
        return attn_fail(err, ATTN_ERR_OVERFLOW, "the batch's %zu rows exceed the BLAS limit %d",
                         bp->rows > bp->key_rows ? bp->rows : bp->key_rows, INT_MAX);
    batch_layout b = batch_layout_of(bp);
    if (!b.ok || !attn_mul(b.total, sizeof(float), &bp->workspace_bytes))
        return attn_fail(err, ATTN_ERR_OVERFLOW, "the batch's workspace size overflows");
    if (max_bytes && bp->workspace_bytes > max_bytes)
        return attn_fail(err, ATTN_ERR_LIMIT,
                         "the batch needs %.1f MiB of workspace, over the limit of %.1f MiB",
                         (double)bp->workspace_bytes / 1048576.0, (double)max_bytes / 1048576.0);
    return ATTN_OK;
}

/* Checks that jobs are the ones bp was planned for, with their buffers. */
static int batch_check(const attn_batch_plan *bp, const attn_mha_batch_job *jobs, size_t count,
                       attn_error *err) {
    if (count != bp->count)
        return attn_fail(err, ATTN_ERR_ARG, "the batch was planned for %zu jobs, not %zu",
                         bp->count, count);
    size_t rows = 0;
    for (size_t i = 0; i < count; i++) {
        const attn_mha_batch_job *j = &jobs[i];
        const attn_plan *p = j->plan;
        if (!p || p->kind != ATTN_PLAN_MHA || p->mha.e != bp->e || p->mha.kdim != bp->kdim ||
            p->mha.vdim != bp->vdim || p->nslots != bp->nslots || !j->query || !j->key || !j->value)
            return attn_fail(err, ATTN_ERR_ARG, "job %zu does not match the batch plan", i);
        if (bp->self && !(j->query == j->key && j->key == j->value && p->mha.l == p->mha.s))
            return attn_fail(err, ATTN_ERR_ARG,
                             "job %zu is not self-attention, but the batch was planned so", i);
        if (bp->kv_one && !bp->self && j->key != j->value)
            return attn_fail(err, ATTN_ERR_ARG,
                             "job %zu has key != value, but the batch was planned with one", i);
        if (!j->out)
            return attn_fail(err, ATTN_ERR_ARG, "job %zu has no output buffer", i);
        if (p->weights_elems &&
            (!j->weights || !j->weights->values || (p->index_elems && !j->weights->indices)))
            return attn_fail(err, ATTN_ERR_ARG, "job %zu requests weights but no buffer was given",
                             i);
        rows += p->mha.n * p->mha.l;
    }
    if (rows != bp->rows)
        return attn_fail(err, ATTN_ERR_ARG, "the jobs have %zu rows; the batch was planned for %zu",
                         rows, bp->rows);
    return ATTN_OK;
}

int attn_mha_batch_forward(const attn_batch_plan *bp, void *workspace, attn_mha_batch_job *jobs,
                           size_t count, const attn_mha_params *params, attn_pool *pool,
                           attn_error *err) {
    if (!bp || !workspace || !jobs || !params)
        return attn_fail(err, ATTN_ERR_ARG,
                         "attn_mha_batch_forward needs a plan, a workspace, jobs and params");
    if ((uintptr_t)workspace % 64 != 0)
        return attn_fail(err, ATTN_ERR_ARG, "the workspace must be 64-byte aligned");
    if (attn_pool_slots(pool) > bp->nslots)
        return attn_fail(err, ATTN_ERR_ARG, "the pool has %zu slots but the plan allows %zu",
                         attn_pool_slots(pool), bp->nslots);
    const bool packed = params->in_proj_weight != NULL;
    if (!params_usable(params, bp->e, bp->kdim, bp->vdim) || (bp->self && !packed))
        return attn_fail(err, ATTN_ERR_ARG, "the params do not fit the batch plan");
    int rc = batch_check(bp, jobs, count, err);
    if (rc != ATTN_OK)
        return rc;

    float *ws = workspace;
    const batch_layout b = batch_layout_of(bp);
    const size_t E = bp->e, KD = bp->kdim, VD = bp->vdim;

    /* Gather every job's rows. */
    for (size_t i = 0, r = 0, rk = 0; i < count; i++) {
        const attn_mha_dims *d = &jobs[i].plan->mha;
        size_t nl = d->n * d->l, ns = d->n * d->s;
        memcpy(ws + b.xq + r * E, jobs[i].query, nl * E * sizeof(float));
        if (!bp->self) {
            memcpy(ws + b.xk + rk * KD, jobs[i].key, ns * KD * sizeof(float));
            if (!bp->kv_one)
                memcpy(ws + b.xv + rk * VD, jobs[i].value, ns * VD * sizeof(float));
        }
        r += nl;
        rk += ns;
    }

    /* The input projections, once over all rows. */
    attn_in_proj ip = {.xq = ws + b.xq,
                       .xk = ws + b.xk,
                       .xv = ws + b.xv,
                       .proj = ws + b.proj,
                       .kproj = ws + b.kproj,
                       .vproj = ws + b.vproj,
                       .rows = bp->rows,
                       .krows = bp->key_rows,
                       .e = E,
                       .kdim = KD,
                       .vdim = VD,
                       .self = bp->self,
                       .kv_one = bp->kv_one};
    attn_view all;
    attn_in_proj_run(&all, &ip, params, bp->nslots, pool);

    /* The attention, job by job, each with its own plan (masks, weights, options), on its rows
     * of the projections. */
    for (size_t i = 0, r = 0, rk = 0; i < count; i++) {
        attn_mha_batch_job *j = &jobs[i];
        const attn_plan *p = j->plan;
        attn_run run = {.p = p, .slots = ws + b.slots};
        if (j->weights)
            run.wout = *j->weights;
        run.view = all;
        run.view.q += r * all.ldq;
        run.view.k += rk * all.ldk;
        run.view.v += rk * all.ldv;
        attn_view_strides(&run.view, &p->mha, p->sd.d, ws + b.ob + r * E);
        j->status = attn_run_attention(&run, pool, j->err);
        r += p->mha.n * p->mha.l;
        rk += p->mha.n * p->mha.s;
    }

    /* Out-projection once, into the gathered queries' room; then scattered. */
    attn_out_proj_run(ws + b.xq, ws + b.ob, bp->rows, E, params, bp->nslots, pool);
    for (size_t i = 0, r = 0; i < count; i++) {
        attn_mha_batch_job *j = &jobs[i];
        const attn_plan *p = j->plan;
        memcpy(j->out, ws + b.xq + r * E, p->out_elems * sizeof(float));
        r += p->mha.n * p->mha.l;
        if (j->status == ATTN_OK && !attnk_get()->all_finite(j->out, p->out_elems))
            j->status =
                attn_fail(j->err, ATTN_ERR_NUMERIC, "the output is not finite: float32 overflowed");
    }
    return ATTN_OK;
}
