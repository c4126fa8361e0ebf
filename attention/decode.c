/* decode.c - decode sessions: causal self-attention MHA one step at a time on a key/value cache
 * the caller holds. A step projects its l new rows, appends their keys and values to the cache,
 * attends each new query over every cached key up to its causal limit, and projects the heads'
 * outputs; the rows already in the cache are read, never projected again.
 *
 * Legend: E embedding, H heads, Dh = E / H, l the new rows of a step, len the rows in the cache
 * before it, S = len + l the keys the step attends, cap the cache's rows, R = max_rows the most
 * rows a step may bring, bq the query rows of a task. */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

#define DECODE_BQ 64 /* query rows per task by default: the direct path's block */

/* ---- Sizes -------------------------------------------------------------------------------- */

/* Offsets, in floats from the workspace start, of a step's regions. */
typedef struct decode_layout {
    size_t proj;  /* (R, E) then kproj: [Q K V] (l, 3E) packed (one row: always), or Q (l, E) */
    size_t kproj; /* K (l, E) then V (l, E), or [K V] (l, 2E): 2 R E floats */
    size_t ob;    /* (R, E): the heads' outputs, concatenated, before out_proj */
    size_t slots; /* nslots x slot_floats: each a (bq, cap) block of logit rows */
    size_t total; /* floats */
    bool ok;
} decode_layout;

static decode_layout decode_layout_of(const attn_decode_plan *p) {
    attn_ws_layout l = {.ok = true};
    decode_layout d = {0};
    d.proj = attn_ws_take(&l, p->d.max_rows, p->d.e, 1);
    d.kproj = attn_ws_take(&l, p->d.max_rows, p->d.e, 2);
    d.ob = attn_ws_take(&l, p->d.max_rows, p->d.e, 1);
    d.slots = attn_ws_take(&l, p->nslots, p->slot_floats, 1);
    d.total = l.total;
    d.ok = l.ok;
    return d;
}

/* The weight maps a step writes: H or the subset's size per head, 1 for the mean, else 0. */
static size_t decode_maps(const attn_decode_plan *p) {
    if (p->opts.weights == ATTN_WEIGHTS_PER_HEAD)
        return p->opts.n_heads ? p->opts.n_heads : p->d.h;
    return p->opts.weights == ATTN_WEIGHTS_MEAN ? 1 : 0;
}

/* Checks the options a decode step takes: weights (per head, a subset, or the mean; dense, or
 * the top_k of each row, top_k at most the cache's cap rows), the scale, the query block; not
 * the tiled paths or shape-only heads. */
static int decode_check_opts(const attn_opts *o, const attn_decode_dims *d, attn_error *err) {
    if ((unsigned)o->weights > ATTN_WEIGHTS_MEAN)
        return attn_fail(err, ATTN_ERR_ARG, "unknown weights mode %d", (int)o->weights);
    if (o->n_heads && o->weights != ATTN_WEIGHTS_PER_HEAD)
        return attn_fail(err, ATTN_ERR_ARG, "a head subset needs per-head weights");
    if (o->n_heads && !o->heads)
        return attn_fail(err, ATTN_ERR_ARG, "a decode plan needs the head subset's indices");
    for (size_t i = 0; i < o->n_heads; i++)
        if (o->heads[i] >= d->h)
            return attn_fail(err, ATTN_ERR_ARG, "heads[%zu] is %u; heads run from 0 to %zu", i,
                             (unsigned)o->heads[i], d->h - 1);
    if (o->top_k && o->weights == ATTN_WEIGHTS_NONE)
        return attn_fail(err, ATTN_ERR_ARG, "top_k needs weights (per head or the mean)");
    if (o->top_k > d->cap)
        return attn_fail(err, ATTN_ERR_ARG,
                         "top_k=%zu is more than the cache's cap=%zu keys a step can attend",
                         o->top_k, d->cap);
    if (o->path != ATTN_PATH_AUTO && o->path != ATTN_PATH_DIRECT)
        return attn_fail(err, ATTN_ERR_ARG,
                         "a decode step runs its own row blocks: path must be AUTO or DIRECT");
    if (o->has_scale && !isfinite(o->scale))
        return attn_fail(err, ATTN_ERR_ARG, "the scale must be finite");
    return ATTN_OK;
}

int attn_mha_decode_plan(attn_decode_plan *plan, const attn_decode_dims *dims,
                         const attn_opts *opts, size_t nslots, attn_error *err) {
    if (!plan || !dims)
        return attn_fail(err, ATTN_ERR_ARG, "attn_mha_decode_plan needs a plan and dims");
    memset(plan, 0, sizeof *plan);
    if (opts)
        plan->opts = *opts;
    attn_decode_dims d = *dims;
    if (d.kdim == 0)
        d.kdim = d.e;
    if (d.vdim == 0)
        d.vdim = d.e;
    plan->d = d;
    plan->nslots = nslots;
    if (nslots == 0)
        return attn_fail(err, ATTN_ERR_ARG, "nslots must be at least 1 (1 without a pool)");
    if (d.e == 0 || d.h == 0 || d.cap == 0 || d.max_rows == 0)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "every dimension must be at least 1 (E=%zu H=%zu cap=%zu max_rows=%zu)",
                         d.e, d.h, d.cap, d.max_rows);
    if (d.e % d.h != 0)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "the embedding width E=%zu is not divisible by the H=%zu heads", d.e, d.h);
    if (d.max_rows > d.cap)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "a step of max_rows=%zu rows cannot fit a cache of cap=%zu rows",
                         d.max_rows, d.cap);
    size_t e3 = 0, capd = 0;
    if (!attn_mul(d.e, 3, &e3) || !attn_fits_int(e3) || !attn_fits_int(d.cap) ||
        !attn_fits_int(d.kdim) || !attn_fits_int(d.vdim) || !attn_mul(d.cap, d.e, &capd))
        return attn_fail(err, ATTN_ERR_OVERFLOW,
                         "the session's dimensions exceed the BLAS limit %d", INT_MAX);
    int rc = decode_check_opts(&plan->opts, &d, err);
    if (rc != ATTN_OK)
        return rc;
    plan->scale =
        plan->opts.has_scale ? plan->opts.scale : (float)(1.0 / sqrt((double)(d.e / d.h)));
    plan->bq = plan->opts.block_q ? plan->opts.block_q : DECODE_BQ;
    if (plan->bq > d.max_rows)
        plan->bq = d.max_rows;

    /* The slots hold (bq, cap) logit rows, and with mean top-k weights a (bq, cap) mean after
     * them; the cache (H, cap, Dh) twice; out (R, E); the weights (maps, R, K or cap) at their
     * largest, and with top-k as many indices. */
    decode_layout l = {.ok = false};
    const size_t K = plan->opts.top_k, width = K ? K : d.cap;
    size_t w = 0, outs = 0, bytes = 0, idx = 0;
    bool ok = attn_mul(plan->bq, d.cap, &plan->slot_floats) && attn_fits_int(plan->bq);
    if (ok) {
        plan->slot_floats = attn_align_up(plan->slot_floats);
        if (K && plan->opts.weights == ATTN_WEIGHTS_MEAN)
            ok = attn_mul(plan->slot_floats, 2, &plan->slot_floats);
        l = decode_layout_of(plan);
    }
    ok = ok && l.ok && attn_mul(l.total, sizeof(float), &plan->workspace_bytes) &&
         attn_mul(capd, 2 * sizeof(float), &plan->cache_bytes) &&
         attn_mul(d.max_rows, d.e, &plan->out_elems) &&
         attn_mul(decode_maps(plan), d.max_rows, &w) && attn_mul(w, width, &plan->weights_elems) &&
         attn_add(plan->out_elems, plan->weights_elems, &outs) &&
         attn_mul(outs, sizeof(float), &outs) &&
         attn_mul(K ? plan->weights_elems : 0, sizeof(int32_t), &idx) &&
         attn_add(outs, idx, &outs) && attn_add(plan->workspace_bytes, plan->cache_bytes, &bytes) &&
         attn_add(bytes, outs, &plan->job_bytes);
    plan->index_elems = K ? plan->weights_elems : 0;
    if (!ok)
        return attn_fail(err, ATTN_ERR_OVERFLOW, "the session's memory size overflows");
    if (plan->opts.max_bytes && plan->job_bytes > plan->opts.max_bytes)
        return attn_fail(err, ATTN_ERR_LIMIT,
                         "the session needs %.1f MiB (its cache, a step's working memory and "
                         "outputs), over the limit of %.1f MiB",
                         (double)plan->job_bytes / 1048576.0,
                         (double)plan->opts.max_bytes / 1048576.0);
    plan->planned = true;
    return ATTN_OK;
}

/* The FLOPs of a step's attention alone: q.k and p v over the cells attended. Row i of the step
 * sees len + i + 1 keys, each 2 Dh multiply-adds in each of H heads: 2 E per cell. */
static double decode_attention_flops(size_t e, size_t len, size_t l) {
    const double rows = (double)l, cells = rows * (double)len + rows * (rows + 1) / 2;
    return 2.0 * cells * 2.0 * (double)e;
}

double attn_mha_decode_flops(const attn_decode_dims *dims, size_t len, size_t l) {
    if (!dims)
        return 0;
    const double e = (double)dims->e, kd = (double)(dims->kdim ? dims->kdim : dims->e),
                 vd = (double)(dims->vdim ? dims->vdim : dims->e);
    /* the projections of the new rows (q, k, v and out), then the attention */
    return 2.0 * (double)l * e * (e + kd + vd + e) + decode_attention_flops(dims->e, len, l);
}

/* ---- Running a step ----------------------------------------------------------------------- */

typedef struct decode_run {
    const attn_decode_plan *p;
    const float *q;        /* (l, E), rows ldq apart: head h is the columns [h Dh, (h+1) Dh) */
    size_t ldq;            /* E, or 3E when Q is packed with K and V */
    const float *k, *v;    /* the cache's (H, cap, Dh), rows [0, len + l) filled */
    float *o;              /* (l, E): the heads' outputs, concatenated */
    float *slots;          /* nslots x slot_floats */
    attn_weights_out wout; /* (maps, l, S) dense */
    size_t cap, len, l, s; /* s = len + l */
    size_t dh, nqb;
    const attnk_set *ks;
    const attnt_set *ts; /* the fused path's block products: p v of one row */
    atomic_int numeric;  /* set when a logit is not finite */
} decode_run;

/* Head h, step rows [i0, i0+rows): the softmax rows into P (rows, S; whole rows written, zeros
 * past each row's causal limit) and the head's output rows. Row i sees keys 0 .. len + i. */
static void decode_block(decode_run *r, float *P, size_t h, size_t i0, size_t rows) {
    const attn_decode_plan *p = r->p;
    const size_t Dh = r->dh, S = r->s, E = p->d.e;
    const size_t ncols = r->len + i0 + rows; /* the keys of the block's last row */
    const float *q = r->q + i0 * r->ldq + h * Dh;
    const float *k = r->k + h * r->cap * Dh; /* k is (len + l, Dh): head h's keys */
    const float *v = r->v + h * r->cap * Dh; /* v is (len + l, Dh): head h's values */
    float *o = r->o + i0 * E + h * Dh;
    /* One row (a step of one token) reads its keys and values once each, with gemv and the
     * fused path's p v; more rows make GEMMs. Either way logit = scale * (q.k), as the direct
     * path computes it. */
    if (rows == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)ncols, (int)Dh, p->scale, k, (int)Dh, q, 1,
                    0.0f, P, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)ncols, (int)Dh,
                    p->scale, q, (int)r->ldq, k, (int)Dh, 0.0f, P, (int)S);
    for (size_t ri = 0; ri < rows; ri++) {
        float *x = P + ri * S;
        size_t lim = r->len + i0 + ri + 1; /* at least 1: a row always sees its own key */
        bool finite = true;
        float m = r->ks->max_finite(x, lim, &finite);
        if (!finite || m == INFINITY) {
            atomic_store(&r->numeric, 1);
            memset(x, 0, S * sizeof *x);
            continue;
        }
        float sum = r->ks->exp_sum(x, lim, m);
        r->ks->scale(x, lim, 1.0f / sum);
        memset(x + lim, 0, (S - lim) * sizeof *x);
    }
    if (rows == 1) { /* the fused path's p v (tiles.c): 1.4x sgemv's Trans kernel here */
        memset(o, 0, Dh * sizeof *o);
        r->ts->pv(o, Dh, P, S, 1, v, Dh, ncols, Dh);
    } else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)Dh, (int)ncols, 1.0f,
                    P, (int)S, v, (int)Dh, 0.0f, o, (int)E);
}

/* Where map m, row i of the step's weights starts: dense (maps, l, S), or top-k (maps, l, K). */
static size_t decode_weights_at(const decode_run *r, size_t m, size_t i) {
    return (m * r->l + i) * (r->p->opts.top_k ? r->p->opts.top_k : r->s);
}

/* Writes rows [i0, i0 + rows) of P (rows S apart) as map m of the top-k weights. */
static void decode_store_topk(const decode_run *r, const float *P, size_t m, size_t i0,
                              size_t rows) {
    const size_t K = r->p->opts.top_k;
    for (size_t ri = 0; ri < rows; ri++) {
        size_t at = decode_weights_at(r, m, i0 + ri);
        attn_topk_row(P + ri * r->s, r->s, K, r->wout.values + at, r->wout.indices + at);
    }
}

/* Task without mean weights: head h, query block qb. Dense per-head maps are computed in place
 * in the weights, at the head's first map, and copied to its later ones (a subset may repeat
 * a head); top-k maps are computed in the slot and selected into each of the head's maps. */
static void decode_task(void *ctx, size_t task, size_t slot) {
    decode_run *r = ctx;
    const attn_decode_plan *p = r->p;
    size_t qb = task % r->nqb, h = task / r->nqb;
    size_t i0 = qb * p->bq, rows = p->bq < r->l - i0 ? p->bq : r->l - i0;
    const size_t maps =
        p->opts.weights == ATTN_WEIGHTS_PER_HEAD ? (p->opts.n_heads ? p->opts.n_heads : p->d.h) : 0;
    const bool topk = p->opts.top_k != 0;
    float *P = r->slots + slot * p->slot_floats;
    size_t first = SIZE_MAX;
    for (size_t m = 0; m < maps && first == SIZE_MAX; m++)
        if ((p->opts.n_heads ? p->opts.heads[m] : m) == h)
            first = m;
    if (first != SIZE_MAX && !topk)
        P = r->wout.values + decode_weights_at(r, first, i0);
    decode_block(r, P, h, i0, rows);
    for (size_t m = topk ? first : first + 1; first != SIZE_MAX && m < maps; m++) {
        if ((p->opts.n_heads ? p->opts.heads[m] : m) != h)
            continue;
        if (topk)
            decode_store_topk(r, P, m, i0, rows);
        else
            memcpy(r->wout.values + decode_weights_at(r, m, i0), P, rows * r->s * sizeof *P);
    }
}

/* Task with mean weights: query block qb, every head in turn, so the mean rows have one owner.
 * Dense: the mean is summed in the weights; top-k: in the slot's second half, then selected. */
static void decode_mean_task(void *ctx, size_t task, size_t slot) {
    decode_run *r = ctx;
    const attn_decode_plan *p = r->p;
    const size_t H = p->d.h, S = r->s;
    size_t i0 = task * p->bq, rows = p->bq < r->l - i0 ? p->bq : r->l - i0;
    float *P = r->slots + slot * p->slot_floats;
    float *mean =
        p->opts.top_k ? P + p->slot_floats / 2 : r->wout.values + decode_weights_at(r, 0, i0);
    const float inv_h = 1.0f / (float)H;
    for (size_t h = 0; h < H; h++) {
        decode_block(r, P, h, i0, rows);
        for (size_t j = 0; j < rows * S; j++)
            mean[j] = h == 0 ? P[j] * inv_h : mean[j] + P[j] * inv_h;
    }
    if (p->opts.top_k)
        decode_store_topk(r, mean, 0, i0, rows);
}

/* Checks a step's arguments against plan p; ATTN_OK, or the error with err filled. */
static int decode_check_step(const attn_decode_plan *p, void *ws, const attn_kv_cache *c,
                             const float *out, const attn_weights_out *w, const float *query,
                             const float *key, const float *value, size_t l,
                             const attn_mha_params *prm, attn_pool *pool, attn_error *err) {
    if (!p || !p->planned)
        return attn_fail(err, ATTN_ERR_ARG, "the step needs a plan made by attn_mha_decode_plan");
    if (!ws || !c || !out || !query || !key || !value || !prm)
        return attn_fail(err, ATTN_ERR_ARG,
                         "the workspace, cache, out, query, key, value and params must not be "
                         "NULL");
    if ((uintptr_t)ws % 64 != 0)
        return attn_fail(err, ATTN_ERR_ARG, "the workspace must be 64-byte aligned");
    if (p->weights_elems && (!w || !w->values || (p->index_elems && !w->indices)))
        return attn_fail(err, ATTN_ERR_ARG, "the plan requests weights but no buffer was given");
    if (attn_pool_slots(pool) > p->nslots)
        return attn_fail(err, ATTN_ERR_ARG, "the pool has %zu slots but the plan allows %zu",
                         attn_pool_slots(pool), p->nslots);
    const bool packed = prm->in_proj_weight != NULL;
    if (!prm->out_proj_weight ||
        (!packed && (!prm->q_proj_weight || !prm->k_proj_weight || !prm->v_proj_weight)))
        return attn_fail(err, ATTN_ERR_ARG,
                         "params need out_proj.weight and in_proj_weight, or all of "
                         "q_proj_weight, k_proj_weight and v_proj_weight");
    if (packed && (p->d.kdim != p->d.e || p->d.vdim != p->d.e))
        return attn_fail(err, ATTN_ERR_ARG,
                         "in_proj_weight needs kdim = vdim = E; give q/k/v_proj_weight instead");
    if (!c->k || !c->v || c->cap == 0 || c->cap > p->d.cap || c->len > c->cap)
        return attn_fail(err, ATTN_ERR_ARG,
                         "the cache needs k and v, and len <= cap, 0 < cap <= the plan's cap=%zu "
                         "(it has len=%zu cap=%zu)",
                         p->d.cap, c->len, c->cap);
    if (l == 0 || l > p->d.max_rows)
        return attn_fail(err, ATTN_ERR_SHAPE, "a step appends 1 to max_rows=%zu rows, not %zu",
                         p->d.max_rows, l);
    if (p->opts.top_k > c->len + l)
        return attn_fail(
            err, ATTN_ERR_ARG,
            "top_k=%zu is more than the %zu keys the step attends (len %zu + %zu rows)",
            p->opts.top_k, c->len + l, c->len, l);
    if (l > c->cap - c->len)
        return attn_fail(err, ATTN_ERR_LIMIT,
                         "the cache holds %zu of its %zu rows: %zu more do not fit; start a new "
                         "session or a larger cache",
                         c->len, c->cap, l);
    return ATTN_OK;
}

/* y (outdim) = w (outdim, in) x + b for one row, as gemv; b may be NULL. A GEMM of one row
 * packs w before it multiplies, which costs several times the product itself. */
static void decode_gemv(float *y, const float *w, const float *b, const float *x, size_t outdim,
                        size_t in) {
    if (b)
        memcpy(y, b, outdim * sizeof *y);
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)outdim, (int)in, 1.0f, w, (int)in, x, 1,
                b ? 1.0f : 0.0f, y, 1);
}

/* The projections of one new row into proj, [q k v] (3E), and v pointed at them. */
static void decode_proj_row(attn_view *v, float *proj, const float *query, const float *key,
                            const float *value, const attn_mha_params *prm,
                            const attn_decode_dims *d) {
    const size_t E = d->e;
    const float *b = prm->in_proj_bias, *w = prm->in_proj_weight;
    if (w && query == key && key == value) {
        decode_gemv(proj, w, b, query, 3 * E, E);
    } else {
        decode_gemv(proj, w ? w : prm->q_proj_weight, b, query, E, E);
        decode_gemv(proj + E, w ? w + E * E : prm->k_proj_weight, b ? b + E : NULL, key, E,
                    d->kdim);
        decode_gemv(proj + 2 * E, w ? w + 2 * E * E : prm->v_proj_weight, b ? b + 2 * E : NULL,
                    value, E, d->vdim);
    }
    *v = (attn_view){
        .q = proj, .k = proj + E, .v = proj + 2 * E, .ldq = 3 * E, .ldk = 3 * E, .ldv = 3 * E};
}

/* Copies the new rows' keys and values (l rows of E, ldk and ldv apart) into the cache at rows
 * len.. of each head; false, and nothing copied, when one of them is not finite. */
static bool decode_append(attn_kv_cache *c, const attn_view *v, size_t l, size_t e, size_t h,
                          const attnk_set *ks) {
    const size_t dh = e / h;
    for (size_t i = 0; i < l; i++)
        if (!ks->all_finite(v->k + i * v->ldk, e) || !ks->all_finite(v->v + i * v->ldv, e))
            return false;
    for (size_t hh = 0; hh < h; hh++) {
        float *kd = c->k + (hh * c->cap + c->len) * dh, *vd = c->v + (hh * c->cap + c->len) * dh;
        for (size_t i = 0; i < l; i++) {
            memcpy(kd + i * dh, v->k + i * v->ldk + hh * dh, dh * sizeof *kd);
            memcpy(vd + i * dh, v->v + i * v->ldv + hh * dh, dh * sizeof *vd);
        }
    }
    return true;
}

/* The trace of a step that has run (rows len .. len + l - 1, S = len + l keys): q and the heads'
 * outputs copied from the step's buffers (q rows ldq apart, ob (l, E)), k and v from the cache,
 * and the scores, masked scores and weights computed again, as trace.c does for a forward: the
 * scores by sgemm (scale folded into it), -inf past each row's causal limit, the softmax with
 * the row kernels. */
static void decode_trace(const attn_decode_plan *p, const attn_kv_cache *c, const float *q,
                         size_t ldq, const float *ob, size_t len, size_t l, attn_trace *t) {
    const size_t E = p->d.e, H = p->d.h, Dh = E / H, S = len + l;
    const attnk_set *ks = attnk_get();
    t->scale = p->scale;
    for (size_t h = 0; h < H; h++) {
        for (size_t i = 0; i < l; i++) {
            if (t->q)
                memcpy(t->q + (h * l + i) * Dh, q + i * ldq + h * Dh, Dh * sizeof *q);
            if (t->heads)
                memcpy(t->heads + (h * l + i) * Dh, ob + i * E + h * Dh, Dh * sizeof *ob);
        }
        if (t->k)
            memcpy(t->k + h * S * Dh, c->k + h * c->cap * Dh, S * Dh * sizeof *t->k);
        if (t->v)
            memcpy(t->v + h * S * Dh, c->v + h * c->cap * Dh, S * Dh * sizeof *t->v);
        if (!t->scores && !t->masked && !t->weights)
            continue;
        const size_t at = h * l * S;
        float *sc = t->scores ? t->scores + at : t->masked ? t->masked + at : t->weights + at;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)l, (int)S, (int)Dh, p->scale,
                    q + h * Dh, (int)ldq, c->k + h * c->cap * Dh, (int)Dh, 0.0f, sc, (int)S);
        for (size_t i = 0; i < l && (t->masked || t->weights); i++) {
            const size_t lim = len + i + 1; /* row i sees keys 0 .. len + i */
            float *xm = t->masked ? t->masked + at + i * S : t->weights + at + i * S;
            if (xm != sc + i * S)
                memcpy(xm, sc + i * S, S * sizeof *xm);
            for (size_t j = lim; j < S; j++)
                xm[j] = -INFINITY;
            if (!t->weights)
                continue;
            float *w = t->weights + at + i * S;
            if (w != xm)
                memcpy(w, xm, S * sizeof *w);
            float sum = ks->exp_sum(w, lim, ks->row_max(w, lim));
            ks->scale(w, lim, 1.0f / sum);
            memset(w + lim, 0, (S - lim) * sizeof *w);
        }
    }
}

int attn_mha_decode_step(const attn_decode_plan *plan, void *workspace, attn_kv_cache *cache,
                         float *out, attn_weights_out *weights, const float *query,
                         const float *key, const float *value, size_t l,
                         const attn_mha_params *params, attn_pool *pool, attn_error *err) {
    return attn_mha_decode_step_traced(plan, workspace, cache, out, weights, NULL, query, key,
                                       value, l, params, pool, err);
}

int attn_mha_decode_step_traced(const attn_decode_plan *plan, void *workspace, attn_kv_cache *cache,
                                float *out, attn_weights_out *weights, attn_trace *trace,
                                const float *query, const float *key, const float *value, size_t l,
                                const attn_mha_params *params, attn_pool *pool, attn_error *err) {
    int rc = decode_check_step(plan, workspace, cache, out, weights, query, key, value, l, params,
                               pool, err);
    if (rc != ATTN_OK)
        return rc;
    const attn_decode_dims *d = &plan->d;
    const size_t E = d->e;
    float *ws = workspace;
    decode_layout lay = decode_layout_of(plan);
    const attnk_set *ks = attnk_get();

    /* The new rows' q, k and v (one row: gemv; more: the MHA's GEMMs), then k and v into the
     * cache (not yet counted in len). */
    attn_view view;
    attn_in_proj ip = {.xq = query,
                       .xk = key,
                       .xv = value,
                       .proj = ws + lay.proj,
                       .kproj = ws + lay.kproj,
                       .vproj = ws + lay.kproj + l * E,
                       .rows = l,
                       .krows = l,
                       .e = E,
                       .kdim = d->kdim,
                       .vdim = d->vdim,
                       .self = params->in_proj_weight && query == key && key == value,
                       .kv_one = key == value};
    if (l == 1)
        decode_proj_row(&view, ws + lay.proj, query, key, value, params, d);
    else
        attn_in_proj_run(&view, &ip, params, plan->nslots, pool);
    if (!decode_append(cache, &view, l, E, d->h, ks))
        return attn_fail(err, ATTN_ERR_NUMERIC,
                         "a projected key or value is not finite: float32 overflowed");

    decode_run r = {.p = plan,
                    .q = view.q,
                    .ldq = view.ldq,
                    .k = cache->k,
                    .v = cache->v,
                    .o = ws + lay.ob,
                    .slots = ws + lay.slots,
                    .cap = cache->cap,
                    .len = cache->len,
                    .l = l,
                    .s = cache->len + l,
                    .dh = E / d->h,
                    .nqb = (l + plan->bq - 1) / plan->bq,
                    .ks = ks,
                    .ts = attnt_get()};
    if (weights)
        r.wout = *weights;
    atomic_init(&r.numeric, 0);
    attn_pool *ap = decode_attention_flops(E, cache->len, l) < ATTN_INLINE_FLOPS ? NULL : pool;
    if (plan->opts.weights == ATTN_WEIGHTS_MEAN)
        attn_pool_run(ap, r.nqb, decode_mean_task, &r);
    else
        attn_pool_run(ap, d->h * r.nqb, decode_task, &r);
    if (atomic_load(&r.numeric))
        return attn_fail(err, ATTN_ERR_NUMERIC,
                         "a logit is not finite: the inputs are too large for float32");

    if (l == 1)
        decode_gemv(out, params->out_proj_weight, params->out_proj_bias, ws + lay.ob, E, E);
    else
        attn_out_proj_run(out, ws + lay.ob, l, E, params, plan->nslots, pool);
    if (!ks->all_finite(out, l * E))
        return attn_fail(err, ATTN_ERR_NUMERIC, "the output is not finite: float32 overflowed");
    if (trace)
        decode_trace(plan, cache, view.q, view.ldq, ws + lay.ob, cache->len, l, trace);
    cache->len += l;
    return ATTN_OK;
}
