/* sdpa.c - runs the masked softmax attention of a plan: the masks, the top-k weights, a direct
 * path that keeps whole logit rows (and can return the weights), and a tiled online-softmax path,
 * all inside the plan's workspace; attn_sdpa_forward on given q, k, v (trace.c writes the
 * trace).
 *
 * Legend: N batch, L query length, S key length, H heads (Hkv key/value heads), D and Dv the
 * query/key and value widths of one attention problem, K the top-k count, bq the query rows of a
 * task, bk the keys of a tile. */
#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

/* ---- Running: shared state ---------------------------------------------------------------- */

size_t attn_row_limit(const attn_plan *p, size_t n, size_t i) {
    const size_t s0 = attn_keys_given(p);
    size_t lim = s0;
    if (p->masks.key_lengths && (size_t)p->masks.key_lengths[n] < lim)
        lim = (size_t)p->masks.key_lengths[n];
    if (p->masks.causal == ATTN_CAUSAL_TOP_LEFT && i + 1 < lim) {
        lim = i + 1;
    } else if (p->masks.causal == ATTN_CAUSAL_BOTTOM_RIGHT) {
        size_t c = i + 1 + s0 > p->sd.l ? i + 1 + s0 - p->sd.l : 0;
        if (c < lim)
            lim = c;
    }
    return p->kv_extra + lim;
}

static float *slot_scratch(const attn_run *r, size_t slot) {
    return r->slots + slot * r->p->slot_floats;
}

attn_row_masks attn_masks_for_row(const attn_plan *p, size_t n, size_t h, size_t i) {
    const attn_masks *m = &p->masks;
    const size_t L = p->sd.l, S = attn_keys_given(p);
    attn_row_masks r = {.off = p->kv_extra};
    if (m->key_mask)
        r.km = m->key_mask + (m->key_mask_n == p->sd.n ? n : 0) * S;
    if (m->key_bias)
        r.kb = m->key_bias + (m->key_bias_n == p->sd.n ? n : 0) * S;
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

/* The masks speak of keys off.. of the row (an MHA job's appended keys come first and have no
 * mask column): mask column c is key c + off, so the tile's column j is mask column
 * j0 + j - off, for j from js on. */
float attn_row_mask_max(attn_run *r, float *x, size_t cols, size_t lim, attn_row_masks rm,
                        size_t j0) {
    if (lim > cols)
        lim = cols;
    for (size_t j = lim; j < cols; j++)
        x[j] = -INFINITY;
    if (!rm.km && !rm.am && !rm.bias && !rm.kb) { /* no cell mask: one pass */
        bool finite = true;
        float m = r->ks->max_finite(x, lim, &finite);
        if (!finite || m == INFINITY)
            atomic_store(&r->numeric, 1);
        return m;
    }
    if (!r->ks->all_finite(x, lim))
        atomic_store(&r->numeric, 1);
    size_t js = rm.off > j0 ? rm.off - j0 : 0, c0 = j0 + js - rm.off; /* c0: js's mask column */
    if (js > lim)
        js = lim;
    float *xs = x + js;
    const size_t nm = lim - js;
    if (rm.km) {
        const uint8_t *km = rm.km + c0;
        for (size_t j = 0; j < nm; j++)
            xs[j] = km[j] ? xs[j] : -INFINITY;
    }
    if (rm.am) {
        const uint8_t *am = rm.am + c0;
        for (size_t j = 0; j < nm; j++)
            xs[j] = am[j] ? xs[j] : -INFINITY;
    }
    if (rm.bias) {
        const float *b = rm.bias + c0;
        for (size_t j = 0; j < nm; j++)
            xs[j] += b[j];
    }
    if (rm.kb) {
        const float *b = rm.kb + c0;
        for (size_t j = 0; j < nm; j++)
            xs[j] += b[j];
    }
    float m = r->ks->row_max(x, lim);
    if (m == INFINITY)
        atomic_store(&r->numeric, 1);
    return m;
}

void attn_rows_rotate(float *w, size_t ld, size_t rows, size_t s, size_t x) {
    float first[2]; /* x is at most 2: bias_kv and zero_attn */
    if (x == 0 || x > 2 || x >= s)
        return;
    for (size_t ri = 0; ri < rows; ri++) {
        float *row = w + ri * ld;
        memcpy(first, row, x * sizeof *row);
        memmove(row, row + x, (s - x) * sizeof *row);
        memcpy(row + s - x, first, x * sizeof *row);
    }
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

void attn_topk_row(const float *w, size_t s, size_t k, float *vals, int32_t *idx) {
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
        size_t lim = attn_row_limit(r->p, n, i0 + ri);
        float m = attn_row_mask_max(r, x, ncols, lim, attn_masks_for_row(r->p, n, h, i0 + ri), 0);
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
    size_t ncols = attn_row_limit(p, n, i0 + rows - 1); /* the widest row of the block */
    const size_t hk = attn_kv_head(p, h);
    const float *q = v->q + n * v->q_sn + h * v->q_sh + i0 * v->ldq;
    const float *k = v->k + n * v->k_sn + hk * v->k_sh;
    const float *vv = v->v + n * v->v_sn + hk * v->v_sh;
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
            attn_topk_row(P + ri * S, S, K, r->wout.values + at, r->wout.indices + at);
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
    attn_rows_rotate(P, p->sd.s, rows, p->sd.s, p->kv_extra);
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
    attn_rows_rotate(mean, S, rows, S, p->kv_extra);
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
    const size_t hk = attn_kv_head(p, h);
    const float *q = v->q + n * v->q_sn + h * v->q_sh + i0 * v->ldq;
    const float *k = v->k + n * v->k_sn + hk * v->k_sh;
    const float *vv = v->v + n * v->v_sn + hk * v->v_sh;
    float *o = v->o + n * v->o_sn + h * v->o_sh + i0 * v->ldo;
    size_t ncols = attn_row_limit(p, n, i0 + rows - 1);
    size_t r0 = 0; /* rows before r0 have no keys left in this or later tiles */

    for (size_t j0 = 0; j0 < ncols; j0 += bk) {
        size_t cols = bk < ncols - j0 ? bk : ncols - j0;
        while (r0 < rows && attn_row_limit(p, n, i0 + r0) <= j0)
            r0++;
        size_t nr = rows - r0;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)cols, (int)p->sd.d,
                    p->scale, q + r0 * v->ldq, (int)v->ldq, k + j0 * v->ldk, (int)v->ldk, 0.0f,
                    P + r0 * bk, (int)bk);
        for (size_t ri = r0; ri < rows; ri++) {
            float *x = P + ri * bk;
            size_t lim = attn_row_limit(p, n, i0 + ri) - j0;
            if (lim > cols)
                lim = cols;
            float m = attn_row_mask_max(r, x, cols, lim, attn_masks_for_row(p, n, h, i0 + ri), j0);
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

/* ---- Fused tiled path --------------------------------------------------------------------- */

/* Query rows a group of the fused path takes through logits, softmax and the values while its
 * logit rows stay in L1. */
#define FUSED_GROUP 24

/* Keys a task of the fused path's packing takes (a multiple of ATTN_TILE_PANEL_MAX). */
#define FUSED_PACK_KEYS 1024

/* Where the packed keys of key/value head hk of batch n start in r->kt: Sp D floats of key
 * panels (Sp = S rounded up to whole panels), then its values, Sp rows of Dv. */
static float *fused_kt(const attn_run *r, size_t n, size_t hk) {
    const attn_sdpa_dims *d = &r->p->sd;
    const size_t pan = ATTN_TILE_PANEL_MAX, sp = (d->s + pan - 1) / pan * pan;
    return r->kt + (n * d->hkv + hk) * sp * (d->d + attn_tile_dvp(d->dv));
}

/* Task of the fused path's packing: keys and values [c FUSED_PACK_KEYS, ...) of key/value head
 * h of batch n, once for the job, so that every query block (of every query head reading it)
 * reads them packed: the keys in panels, the values in contiguous rows (strided rows, 3E apart
 * in MHA, cost the products a TLB entry each). Keys past the last a query attends (the key
 * length, the causal limit of the last row) are not packed. */
static void fused_pack_task(void *ctx, size_t task, size_t slot) {
    (void)slot;
    attn_run *r = ctx;
    const attn_plan *p = r->p;
    const attn_view *v = &r->view;
    const size_t chunks = (p->sd.s + FUSED_PACK_KEYS - 1) / FUSED_PACK_KEYS;
    size_t c = task % chunks, h = task / chunks % p->sd.hkv, n = task / chunks / p->sd.hkv;
    size_t j0 = c * FUSED_PACK_KEYS, lim = attn_row_limit(p, n, p->sd.l - 1);
    if (j0 >= lim)
        return;
    size_t cols = lim - j0 < FUSED_PACK_KEYS ? lim - j0 : FUSED_PACK_KEYS;
    const size_t pan = ATTN_TILE_PANEL_MAX, sp = (p->sd.s + pan - 1) / pan * pan;
    const size_t D = p->sd.d, Dv = p->sd.dv, Dvp = attn_tile_dvp(Dv);
    float *kt = fused_kt(r, n, h);
    r->ts->pack_kt(kt + j0 * D, v->k + n * v->k_sn + h * v->k_sh + j0 * v->ldk, v->ldk, cols, D);
    const float *src = v->v + n * v->v_sn + h * v->v_sh + j0 * v->ldv;
    float *dst = kt + sp * D + j0 * Dvp;
    for (size_t j = 0; j < cols; j++) {
        for (size_t u = 0; u < Dv; u++) /* rows of Dv floats: a loop, not a memcpy call each */
            dst[j * Dvp + u] = src[j * v->ldv + u];
        for (size_t u = Dv; u < Dvp; u++)
            dst[j * Dvp + u] = 0.0f;
    }
}

/* Online-softmax update of a row (tiled_block's row code) on its logits x[0..cols) of a tile,
 * with lim keys attended in it and m their max after the masks (row_mask_max's, or the logits'
 * kernel's: +inf when one is not finite); x becomes the tile's exp(x - M), zeros past lim. */
static void online_row(attn_run *r, float *x, size_t cols, size_t lim, float m, float *acc,
                       size_t dv, float *M, float *Z, bool normalised) {
    if (m == INFINITY)
        atomic_store(&r->numeric, 1); /* row_mask_max has flagged it too */
    if (m == -INFINITY) {
        memset(x, 0, cols * sizeof *x);
        return;
    }
    float m_new = m > *M ? m : *M;
    float sum = r->ks->exp_sum(x, lim, m_new);
    memset(x + lim, 0, (cols - lim) * sizeof *x);
    float alpha = 1.0f; /* rescales what acc and Z hold to the new max */
    if (m_new != *M) {
        alpha = *M == -INFINITY ? 0.0f : expf(*M - m_new);
        *M = m_new;
    }
    if (normalised) {
        float z_old = *Z * alpha, z_new = z_old + sum;
        r->ks->scale(x, lim, 1.0f / z_new);
        r->ks->scale(acc, dv, z_old / z_new);
        *Z = z_new;
    } else {
        if (alpha != 1.0f) {
            *Z *= alpha;
            r->ks->scale(acc, dv, alpha);
        }
        *Z += sum;
    }
}

/* Problem (n, h), query block qb of the fused path: the tiled path's online softmax, with the
 * block products on attnd's own kernels (tiles.c) instead of sgemm, on the keys packed once for
 * the job (fused_pack_task). For each key tile, each group of FUSED_GROUP query rows computes
 * its logits against the tile, their softmax update and their product with the tile's values
 * while its rows are in L1. A group computes only the keys its last row attends (the causal
 * triangle is skipped group by group). Forms and returns as tiled_block. */
static bool fused_block(attn_run *r, size_t slot, size_t n, size_t h, size_t qb, bool normalised) {
    const attn_plan *p = r->p;
    const attn_view *v = &r->view;
    const attnt_set *ts = r->ts;
    const size_t bq = p->bq, bk = p->bk, D = p->sd.d, Dv = p->sd.dv, lds = bk;
    const size_t Dvp = attn_tile_dvp(Dv); /* the width of acc and of the packed values */
    size_t i0 = qb * bq, rows = bq < p->sd.l - i0 ? bq : p->sd.l - i0;

    float *P = slot_scratch(r, slot);                     /* P is (bq, bk): the tile's logits */
    float *acc = P + attn_align_up(bq * lds);             /* acc is (bq, Dvp): the output so far */
    float *M = acc + attn_align_up(bq * Dvp);             /* M is (bq): running max */
    float *Z = M + bq;                                    /* Z is (bq): running sum of exp(x - M) */
    const float *kt = fused_kt(r, n, attn_kv_head(p, h)); /* the keys, in panels (S, D) */
    memset(acc, 0, rows * Dvp * sizeof *acc);
    for (size_t ri = 0; ri < rows; ri++) {
        M[ri] = -INFINITY;
        Z[ri] = 0.0f;
    }
    const float *q = v->q + n * v->q_sn + h * v->q_sh + i0 * v->ldq;
    const size_t sp =
        (p->sd.s + ATTN_TILE_PANEL_MAX - 1) / ATTN_TILE_PANEL_MAX * ATTN_TILE_PANEL_MAX;
    const float *vv = kt + sp * D; /* the values, packed (S, Dvp) */
    float *o = v->o + n * v->o_sn + h * v->o_sh + i0 * v->ldo;
    size_t ncols = attn_row_limit(p, n, i0 + rows - 1);
    size_t r0 = 0; /* rows before r0 have no keys left in this or later tiles */
    const bool cellfree =
        !p->masks.key_mask && !p->masks.attn_mask && !p->masks.attn_bias && !p->masks.key_bias;
    float gmax[FUSED_GROUP]; /* gmax is (FUSED_GROUP): the row maxima of a group's logits */

    for (size_t j0 = 0; j0 < ncols; j0 += bk) { /* bk is whole panels: j0 starts one */
        size_t cols = bk < ncols - j0 ? bk : ncols - j0;
        while (r0 < rows && attn_row_limit(p, n, i0 + r0) <= j0)
            r0++;
        for (size_t g = r0; g < rows; g += FUSED_GROUP) {
            size_t nr = FUSED_GROUP < rows - g ? FUSED_GROUP : rows - g;
            size_t gcols = attn_row_limit(p, n, i0 + g + nr - 1) - j0; /* > 0: g >= r0 */
            if (gcols > cols)
                gcols = cols;
            float *pg = P + g * lds;
            /* Without cell masks, and with every row of the group attending all gcols keys, the
             * logits' kernel gives each row's max (and finiteness) on the way. */
            bool gm = cellfree && attn_row_limit(p, n, i0 + g) - j0 >= gcols;
            ts->qk(pg, lds, q + g * v->ldq, v->ldq, nr, kt + j0 * D, gcols, D, p->scale,
                   gm ? gmax : NULL);
            for (size_t ri = g; ri < g + nr; ri++) {
                size_t lim = attn_row_limit(p, n, i0 + ri) - j0;
                if (lim > gcols)
                    lim = gcols;
                float *x = P + ri * lds;
                float m = gm ? gmax[ri - g]
                             : attn_row_mask_max(r, x, gcols, lim,
                                                 attn_masks_for_row(p, n, h, i0 + ri), j0);
                online_row(r, x, gcols, lim, m, acc + ri * Dvp, Dvp, M + ri, Z + ri, normalised);
            }
            ts->pv(acc + g * Dvp, Dvp, pg, lds, nr, vv + j0 * Dvp, Dvp, gcols, Dvp);
        }
    }
    if (!r->ks->all_finite(acc, rows * Dvp))
        return false;
    for (size_t ri = 0; ri < rows; ri++) {
        float inv = normalised ? 1.0f : Z[ri] > 0.0f ? 1.0f / Z[ri] : 0.0f;
        memcpy(o + ri * v->ldo, acc + ri * Dvp, Dv * sizeof *o);
        r->ks->scale(o + ri * v->ldo, Dv, inv);
    }
    return true;
}

/* True when the fused path's tasks pack their own keys: one query block, and a key/value head
 * per query head (grouped heads share theirs, packed once before them). */
static bool fused_packs_alone(const attn_plan *p) {
    return p->fused && p->nqb == 1 && p->sd.hkv == p->sd.h;
}

/* Task of the tiled path: problem (n, h), query block qb; the normalised form when the fast
 * one overflows (and the logits themselves did not: then the job fails anyway). */
static void tiled_task(void *ctx, size_t task, size_t slot) {
    attn_run *r = ctx;
    const attn_plan *p = r->p;
    size_t qb = task % p->nqb, h = task / p->nqb % p->sd.h, n = task / p->nqb / p->sd.h;
    bool (*block)(attn_run *, size_t, size_t, size_t, size_t, bool) =
        p->fused ? fused_block : tiled_block;
    if (fused_packs_alone(p)) { /* the only task of problem (n, h) packs its keys itself:
                                   one pool run less, and they are in its cache */
        const size_t chunks = (p->sd.s + FUSED_PACK_KEYS - 1) / FUSED_PACK_KEYS;
        for (size_t c = 0; c < chunks; c++)
            fused_pack_task(r, (n * p->sd.h + h) * chunks + c, slot);
    }
    if (!block(r, slot, n, h, qb, false) && !atomic_load(&r->numeric) &&
        !block(r, slot, n, h, qb, true))
        atomic_store(&r->numeric, 1);
}

int attn_run_attention(attn_run *r, attn_pool *pool, attn_error *err) {
    const attn_plan *p = r->p;
    r->ks = attnk_get();
    r->ts = attnt_get();
    atomic_init(&r->numeric, 0);
    const attn_sdpa_dims *d = &p->sd;
    if (2.0 * (double)(d->n * d->h) * (double)d->l * (double)d->s * (double)(d->d + d->dv) <
        ATTN_INLINE_FLOPS)
        pool = NULL;
    if (p->fused && !fused_packs_alone(p)) /* else each task packs its own (tiled_task) */
        attn_pool_run(pool, d->n * d->hkv * ((d->s + FUSED_PACK_KEYS - 1) / FUSED_PACK_KEYS),
                      fused_pack_task, r);
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

/* ---- Checks and the SDPA forward ----------------------------------------------------------- */

int attn_check_run_args(const attn_plan *p, int kind, void *ws, float *out,
                        const attn_weights_out *w, attn_pool *pool, attn_error *err) {
    if (!p || p->kind != kind)
        return attn_fail(err, ATTN_ERR_ARG, "the plan is missing or of another kind");
    if (!attn_plan_bound(p))
        return attn_fail(err, ATTN_ERR_ARG,
                         "the plan has masks or heads without their data (attn_plan_bind)");
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
    return attn_sdpa_forward_traced(plan, workspace, out, weights, NULL, q, k, v, pool, err);
}

int attn_sdpa_forward_traced(const attn_plan *plan, void *workspace, float *out,
                             attn_weights_out *weights, attn_trace *trace, const float *q,
                             const float *k, const float *v, attn_pool *pool, attn_error *err) {
    int rc = attn_check_run_args(plan, ATTN_PLAN_SDPA, workspace, out, weights, pool, err);
    if (rc != ATTN_OK)
        return rc;
    if (!q || !k || !v)
        return attn_fail(err, ATTN_ERR_ARG, "q, k and v must not be NULL");
    const attn_sdpa_dims *d = &plan->sd;
    attn_ws_layout l = attn_plan_layout(plan);
    attn_run r = {
        .p = plan, .slots = (float *)workspace + l.slots, .kt = (float *)workspace + l.kt};
    if (weights)
        r.wout = *weights;
    r.view = (attn_view){
        .q = q,
        .q_sh = d->l * d->d,
        .q_sn = d->h * d->l * d->d,
        .ldq = d->d,
        .k = k,
        .k_sh = d->s * d->d,
        .k_sn = d->hkv * d->s * d->d,
        .ldk = d->d,
        .v = v,
        .v_sh = d->s * d->dv,
        .v_sn = d->hkv * d->s * d->dv,
        .ldv = d->dv,
        .o = out,
        .o_sh = d->l * d->dv,
        .o_sn = d->h * d->l * d->dv,
        .ldo = d->dv,
    };
    rc = attn_run_attention(&r, pool, err);
    if (rc == ATTN_OK && !attnk_get()->all_finite(out, plan->out_elems))
        rc = attn_fail(err, ATTN_ERR_NUMERIC, "the output is not finite: float32 overflowed");
    if (rc == ATTN_OK && trace)
        attn_trace_write(&r, trace);
    return rc;
}
