/* plan.c - plans attention jobs: checks the dimensions, masks and options, chooses the path and
 * its blocks, and sizes the workspace (its layout), the outputs and the FLOPs, before anything
 * is allocated.
 *
 * Legend: N batch, L query length, S key length, E embedding, H heads, Dh = E / H, D and Dv the
 * query/key and value widths of one attention problem, K the top-k count, bq the query rows of a
 * task, bk the keys of a tile. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "internal.h"

#define DIRECT_BQ   64
#define TILED_BQ    128
#define TILED_BK    512
#define FUSED_BQ    128
#define FUSED_BK    512
#define FUSED_MIN_D 16 /* AUTO fuses when D and Dv are at least this */

/* ---- Workspace layout --------------------------------------------------------------------- */

size_t attn_ws_take(attn_ws_layout *l, size_t a, size_t b, size_t c) {
    size_t n = 0, at = l->total, end = 0;
    if (!attn_mul(a, b, &n) || !attn_mul(n, c, &n) || !attn_add(at, n, &end) ||
        !attn_add(end, ATTN_WS_ALIGN_FLOATS, &end)) {
        l->ok = false;
        return 0;
    }
    l->total = attn_align_up(end - ATTN_WS_ALIGN_FLOATS);
    return at;
}

attn_ws_layout attn_plan_layout(const attn_plan *p) {
    attn_ws_layout l = {.ok = true};
    if (p->kind == ATTN_PLAN_MHA) {
        const attn_mha_dims *d = &p->mha;
        /* checked in the plan; ns counts the appended keys */
        size_t nl = d->n * d->l, ns = d->n * p->sd.s;
        /* Packed self-attention (L = S) and separate Q, K, V take the same room when L = S. */
        l.proj = attn_ws_take(&l, nl, d->e, 1);
        l.kproj = attn_ws_take(&l, ns, d->e, 1);
        l.vproj = attn_ws_take(&l, ns, d->e, 1);
        l.ob = attn_ws_take(&l, nl, d->e, 1);
    }
    l.slots = attn_ws_take(&l, p->nslots, p->slot_floats, 1);
    l.kt = attn_ws_take(&l, p->kt_floats, 1, 1);
    return l;
}

/* ---- Planning ----------------------------------------------------------------------------- */

/* The sum over j = 1..x of min(lim, j). x and lim are at most INT_MAX, so it stays below
 * 2^62. */
static uint64_t capped_sum(uint64_t x, uint64_t lim) {
    if (x <= lim)
        return x * (x + 1) / 2;
    return lim * (lim + 1) / 2 + (x - lim) * lim;
}

/* The sum over the L query rows of one batch element of attn_row_limit (sdpa.c): the cells left by
 * the causal mode and a key length lim <= S. Row i attends min(lim, i + 1) keys top-left, min(lim,
 * max(0, i + 1 + S - L)) bottom-right and lim otherwise; it is below L * S < 2^62. */
static uint64_t row_cells(attn_causal causal, size_t l, size_t s, size_t lim) {
    if (causal == ATTN_CAUSAL_TOP_LEFT)
        return capped_sum(l, lim);
    if (causal == ATTN_CAUSAL_BOTTOM_RIGHT) /* j = i + 1 + S - L runs from S - L + 1 to S */
        return capped_sum(s, lim) - capped_sum(s > l ? s - l : 0, lim);
    return (uint64_t)l * lim;
}

/* The masks m has data for, as ATTN_MASK_* bits. */
static unsigned mask_data(const attn_masks *m) {
    return (m->key_lengths ? ATTN_MASK_KEY_LENGTHS : 0u) | (m->key_mask ? ATTN_MASK_KEY_MASK : 0u) |
           (m->attn_mask ? ATTN_MASK_ATTN_MASK : 0u) | (m->attn_bias ? ATTN_MASK_ATTN_BIAS : 0u) |
           (m->key_bias ? ATTN_MASK_KEY_BIAS : 0u);
}

/* The masks m has, with their data or by their extents alone (shape_only), as ATTN_MASK_* bits. */
static unsigned mask_present(const attn_masks *m) {
    return mask_data(m) | (m->shape_only & ATTN_MASK_ALL);
}

/* Checks the dimensions of the attention problem p->sd and the masks against them. */
static int plan_check_shape(const attn_plan *p, attn_error *err) {
    const attn_sdpa_dims *d = &p->sd;
    const attn_masks *m = &p->masks;
    if (d->n == 0 || d->h == 0 || d->l == 0 || d->s == 0 || d->d == 0 || d->dv == 0)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "every dimension must be at least 1 (N=%zu H=%zu L=%zu S=%zu D=%zu "
                         "Dv=%zu)",
                         d->n, d->h, d->l, d->s, d->d, d->dv);
    if (d->hkv == 0 || d->h % d->hkv != 0)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "the H=%zu query heads are not a multiple of the Hkv=%zu key/value heads",
                         d->h, d->hkv);
    if (!attn_fits_int(d->l) || !attn_fits_int(d->s) || !attn_fits_int(d->d) ||
        !attn_fits_int(d->dv))
        return attn_fail(err, ATTN_ERR_OVERFLOW, "a dimension exceeds %d, the BLAS limit", INT_MAX);
    if (p->nslots == 0)
        return attn_fail(err, ATTN_ERR_ARG, "nslots must be at least 1");

    /* Masks. */
    unsigned has = mask_present(m);
    if ((unsigned)m->causal > ATTN_CAUSAL_BOTTOM_RIGHT)
        return attn_fail(err, ATTN_ERR_ARG, "unknown causal mode %d", (int)m->causal);
    if (m->shape_only & ~ATTN_MASK_ALL)
        return attn_fail(err, ATTN_ERR_ARG, "unknown mask bits %#x in shape_only",
                         m->shape_only & ~ATTN_MASK_ALL);
    const size_t s0 = attn_keys_given(p);
    if (m->key_lengths)
        for (size_t n = 0; n < d->n; n++)
            if (m->key_lengths[n] < 0 || (size_t)m->key_lengths[n] > s0)
                return attn_fail(err, ATTN_ERR_ARG,
                                 "key_lengths[%zu] is %ld; it must lie in [0, S=%zu]", n,
                                 (long)m->key_lengths[n], s0);
    if ((has & ATTN_MASK_KEY_MASK) && attn_extent(m->key_mask_n) != 1 && m->key_mask_n != d->n)
        return attn_fail(err, ATTN_ERR_SHAPE, "key_mask has %zu rows; it needs 1 or N=%zu",
                         m->key_mask_n, d->n);
    if ((has & ATTN_MASK_KEY_BIAS) && attn_extent(m->key_bias_n) != 1 && m->key_bias_n != d->n)
        return attn_fail(err, ATTN_ERR_SHAPE, "key_bias has %zu rows; it needs 1 or N=%zu",
                         m->key_bias_n, d->n);
    if ((has & ATTN_MASK_ATTN_MASK) &&
        ((attn_extent(m->attn_mask_n) != 1 && m->attn_mask_n != d->n) ||
         (attn_extent(m->attn_mask_h) != 1 && m->attn_mask_h != d->h)))
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "attn_mask leading extents (%zu, %zu) must be 1 or (N=%zu, H=%zu)",
                         m->attn_mask_n, m->attn_mask_h, d->n, d->h);
    if ((has & ATTN_MASK_ATTN_BIAS) &&
        ((attn_extent(m->attn_bias_n) != 1 && m->attn_bias_n != d->n) ||
         (attn_extent(m->attn_bias_h) != 1 && m->attn_bias_h != d->h)))
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "attn_bias leading extents (%zu, %zu) must be 1 or (N=%zu, H=%zu)",
                         m->attn_bias_n, m->attn_bias_h, d->n, d->h);
    return ATTN_OK;
}

/* Checks the options: the weights asked for, top-k, the path and the scale. */
static int plan_check_opts(const attn_plan *p, attn_error *err) {
    const attn_sdpa_dims *d = &p->sd;
    const attn_opts *o = &p->opts;
    if ((unsigned)o->weights > ATTN_WEIGHTS_MEAN)
        return attn_fail(err, ATTN_ERR_ARG, "unknown weights mode %d", (int)o->weights);
    if (o->n_heads && o->weights != ATTN_WEIGHTS_PER_HEAD)
        return attn_fail(err, ATTN_ERR_ARG, "a head subset needs per-head weights");
    for (size_t i = 0; o->heads && i < o->n_heads; i++)
        if (o->heads[i] >= d->h)
            return attn_fail(err, ATTN_ERR_ARG, "heads[%zu] is %u; heads run from 0 to %zu", i,
                             (unsigned)o->heads[i], d->h - 1);
    if (o->top_k && o->weights == ATTN_WEIGHTS_NONE)
        return attn_fail(err, ATTN_ERR_ARG, "top_k needs weights to be requested");
    if (o->top_k > d->s)
        return attn_fail(err, ATTN_ERR_ARG, "top_k is %zu but there are only S=%zu keys", o->top_k,
                         d->s);
    if ((unsigned)o->path > ATTN_PATH_TILED_SGEMM)
        return attn_fail(err, ATTN_ERR_ARG, "unknown path %d", (int)o->path);
    if ((o->path == ATTN_PATH_TILED || o->path == ATTN_PATH_TILED_SGEMM) &&
        o->weights != ATTN_WEIGHTS_NONE)
        return attn_fail(err, ATTN_ERR_ARG, "the tiled path cannot return weights");
    if (o->has_scale && !isfinite(o->scale))
        return attn_fail(err, ATTN_ERR_ARG, "the scale must be finite");
    return ATTN_OK;
}

/* Chooses the path, the scale and the blocks, and sizes the per-slot scratch. */
static int plan_blocks(attn_plan *p, attn_error *err) {
    const attn_sdpa_dims *d = &p->sd;
    const attn_opts *o = &p->opts;
    p->tiled = o->path == ATTN_PATH_TILED || o->path == ATTN_PATH_TILED_SGEMM ||
               (o->path == ATTN_PATH_AUTO && o->weights == ATTN_WEIGHTS_NONE);
    /* Fused unless asked for sgemm tiles; by default only where it measured faster: with head
     * widths below 16 its products are mostly loads and stores (bench/RESULTS.md). */
    p->fused = o->path == ATTN_PATH_TILED || (p->tiled && o->path == ATTN_PATH_AUTO &&
                                              d->d >= FUSED_MIN_D && d->dv >= FUSED_MIN_D);
    p->scale = o->has_scale ? o->scale : (float)(1.0 / sqrt((double)d->d));
    p->bq = o->block_q ? o->block_q : p->fused ? FUSED_BQ : p->tiled ? TILED_BQ : DIRECT_BQ;
    if (p->bq > d->l)
        p->bq = d->l;
    p->bk = o->block_k ? o->block_k : p->fused ? FUSED_BK : TILED_BK;
    if (p->bk > d->s)
        p->bk = d->s;
    if (p->fused) /* the fused path's tiles start on whole panels of packed keys */
        p->bk = (p->bk + ATTN_TILE_PANEL_MAX - 1) / ATTN_TILE_PANEL_MAX * ATTN_TILE_PANEL_MAX;
    p->nqb = (d->l + p->bq - 1) / p->bq;

    /* Per-slot scratch. */
    size_t a = 0, b = 0, c = 0;
    bool ok = true;
    if (p->fused) {
        /* logits tile (bq, bk), accumulator (bq, Dv), running max and sum (bq) each; and once
         * for the job, every key/value head's keys packed in panels and its values in rows,
         * (N, Hkv, S rounded up, D + Dv rounded up); Dv rounded up in the accumulator too */
        const size_t pan = ATTN_TILE_PANEL_MAX, sp = (d->s + pan - 1) / pan * pan;
        size_t dd = 0, dvp = attn_tile_dvp(d->dv);
        ok = d->dv < dvp + ATTN_TILE_DV_ALIGN && attn_mul(p->bq, p->bk, &a) &&
             attn_mul(p->bq, dvp, &b) && attn_mul(p->bq, 2, &c) && attn_add(d->d, dvp, &dd) &&
             attn_mul(d->n, d->hkv, &p->kt_floats) && attn_mul(p->kt_floats, sp, &p->kt_floats) &&
             attn_mul(p->kt_floats, dd, &p->kt_floats);
    } else if (p->tiled) {
        /* logits tile (bq, bk), accumulator (bq, Dv), running max and sum (bq) each */
        ok = attn_mul(p->bq, p->bk, &a) && attn_mul(p->bq, d->dv, &b) && attn_mul(p->bq, 2, &c);
    } else {
        /* logit rows (bq, S), plus the head-mean rows (bq, S) for mean weights */
        ok = attn_mul(p->bq, d->s, &a);
        if (ok && o->weights == ATTN_WEIGHTS_MEAN)
            b = a;
    }
    ok = ok && attn_add(attn_align_up(a), attn_align_up(b), &p->slot_floats) &&
         attn_add(p->slot_floats, attn_align_up(c), &p->slot_floats);
    if (!ok || !attn_fits_int(p->bq) || !attn_fits_int(p->bk))
        return attn_fail(err, ATTN_ERR_OVERFLOW, "the scratch size overflows");
    return ATTN_OK;
}

/* Sizes the weights and their indices. */
static int plan_outputs(attn_plan *p, attn_error *err) {
    const attn_sdpa_dims *d = &p->sd;
    const attn_opts *o = &p->opts;
    size_t maps = 0, w = 0;
    if (o->weights == ATTN_WEIGHTS_PER_HEAD)
        maps = o->n_heads ? o->n_heads : d->h;
    else if (o->weights == ATTN_WEIGHTS_MEAN)
        maps = 1;
    if (maps && (!attn_mul(d->n, maps, &w) || !attn_mul(w, d->l, &w) ||
                 !attn_mul(w, o->top_k ? o->top_k : d->s, &w)))
        return attn_fail(err, ATTN_ERR_OVERFLOW, "the weights size overflows");
    p->weights_elems = w;
    p->index_elems = o->top_k ? w : 0;
    return ATTN_OK;
}

/* Sets the FLOPs: those of the attended cells (the causal limit and key lengths; cell masks not
 * counted), the sum over n and i of attn_row_limit(n, i) (sdpa.c), in closed form, so that
 * planning costs O(1) (O(N) with key lengths) whatever L and S are; then for MHA the
 * projections'. Key lengths without their data (shape_only) count every key; every row attends
 * MHA's appended keys. */
static void plan_flops(attn_plan *p) {
    const attn_sdpa_dims *d = &p->sd;
    const attn_masks *m = &p->masks;
    const size_t s0 = attn_keys_given(p);
    double cells = (double)d->n * (double)d->l * (double)p->kv_extra;
    if (m->key_lengths) {
        for (size_t n = 0; n < d->n; n++)
            cells += (double)row_cells(m->causal, d->l, s0, (size_t)m->key_lengths[n]);
    } else {
        cells += (double)d->n * (double)row_cells(m->causal, d->l, s0, s0);
    }
    p->flops = 2.0 * cells * (double)d->h * (double)(d->d + d->dv);
    if (p->kind == ATTN_PLAN_MHA) { /* N*L and N*S checked in attn_mha_plan */
        const attn_mha_dims *md = &p->mha;
        double e = (double)md->e;
        p->flops += 2.0 * (double)(md->n * md->l) * e * e * 2.0 +
                    2.0 * (double)(md->n * md->s) * e * (double)(md->kdim + md->vdim);
    }
}

/* Checks and completes the attention problem part of a plan (p->sd, opts, masks set). */
static int plan_attention(attn_plan *p, attn_error *err) {
    int rc = plan_check_shape(p, err);
    if (rc == ATTN_OK)
        rc = plan_check_opts(p, err);
    if (rc == ATTN_OK)
        rc = plan_blocks(p, err);
    if (rc == ATTN_OK)
        rc = plan_outputs(p, err);
    if (rc == ATTN_OK)
        plan_flops(p);
    return rc;
}

/* Sums workspace and outputs into job_bytes and applies the cap. */
static int plan_finish(attn_plan *p, attn_error *err) {
    attn_ws_layout l = attn_plan_layout(p);
    size_t bytes = 0, outs = 0;
    if (!l.ok || !attn_mul(l.total, sizeof(float), &p->workspace_bytes) ||
        !attn_add(p->out_elems, p->weights_elems, &outs) ||
        !attn_add(outs, p->index_elems, &outs) || !attn_mul(outs, 4, &outs) ||
        !attn_add(p->workspace_bytes, outs, &bytes))
        return attn_fail(err, ATTN_ERR_OVERFLOW, "the job's memory size overflows");
    p->job_bytes = bytes;
    if (p->opts.max_bytes && bytes > p->opts.max_bytes)
        return attn_fail(err, ATTN_ERR_LIMIT,
                         "the job needs %.1f MiB of working memory (weights included), over the "
                         "limit of %.1f MiB",
                         (double)bytes / 1048576.0, (double)p->opts.max_bytes / 1048576.0);
    return ATTN_OK;
}

static void plan_start(attn_plan *p, const attn_opts *opts, const attn_masks *masks,
                       size_t nslots) {
    memset(p, 0, sizeof *p);
    if (opts)
        p->opts = *opts;
    if (masks)
        p->masks = *masks;
    p->nslots = nslots;
}

int attn_sdpa_plan(attn_plan *plan, const attn_sdpa_dims *dims, const attn_opts *opts,
                   const attn_masks *masks, size_t nslots, attn_error *err) {
    if (!plan || !dims)
        return attn_fail(err, ATTN_ERR_ARG, "attn_sdpa_plan needs a plan and dims");
    plan_start(plan, opts, masks, nslots);
    plan->kind = ATTN_PLAN_SDPA;
    plan->sd = *dims;
    if (plan->sd.hkv == 0)
        plan->sd.hkv = plan->sd.h;
    int rc = plan_attention(plan, err);
    if (rc != ATTN_OK)
        return rc;
    const attn_sdpa_dims *d = dims;
    if (!attn_mul(d->n, d->h, &plan->out_elems) ||
        !attn_mul(plan->out_elems, d->l, &plan->out_elems) ||
        !attn_mul(plan->out_elems, d->dv, &plan->out_elems))
        return attn_fail(err, ATTN_ERR_OVERFLOW, "the output size overflows");
    return plan_finish(plan, err);
}

int attn_mha_plan(attn_plan *plan, const attn_mha_dims *dims, const attn_opts *opts,
                  const attn_masks *masks, size_t nslots, attn_error *err) {
    if (!plan || !dims)
        return attn_fail(err, ATTN_ERR_ARG, "attn_mha_plan needs a plan and dims");
    plan_start(plan, opts, masks, nslots);
    plan->kind = ATTN_PLAN_MHA;
    attn_mha_dims d = *dims;
    if (d.kdim == 0)
        d.kdim = d.e;
    if (d.vdim == 0)
        d.vdim = d.e;
    plan->mha = d;
    if (d.n == 0 || d.l == 0 || d.s == 0 || d.e == 0 || d.h == 0)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "every dimension must be at least 1 (N=%zu L=%zu S=%zu E=%zu H=%zu)", d.n,
                         d.l, d.s, d.e, d.h);
    if (d.e % d.h != 0)
        return attn_fail(err, ATTN_ERR_SHAPE,
                         "the embedding width E=%zu is not divisible by the H=%zu heads", d.e, d.h);
    plan->kv_extra = (size_t)d.bias_kv + (size_t)d.zero_attn;
    size_t nl = 0, ns = 0, e3 = 0, sx = 0, nsx = 0;
    if (!attn_mul(d.n, d.l, &nl) || !attn_mul(d.n, d.s, &ns) || !attn_mul(d.e, 3, &e3) ||
        !attn_add(d.s, plan->kv_extra, &sx) || !attn_mul(d.n, sx, &nsx) || !attn_fits_int(nl) ||
        !attn_fits_int(nsx) || !attn_fits_int(e3) || !attn_fits_int(d.kdim) ||
        !attn_fits_int(d.vdim))
        return attn_fail(err, ATTN_ERR_OVERFLOW, "the job's dimensions exceed the BLAS limit %d",
                         INT_MAX);
    plan->sd = (attn_sdpa_dims){d.n, d.h, d.l, sx, d.e / d.h, d.e / d.h, d.h};
    int rc = plan_attention(plan, err);
    if (rc != ATTN_OK)
        return rc;
    if (!attn_mul(nl, d.e, &plan->out_elems))
        return attn_fail(err, ATTN_ERR_OVERFLOW, "the output size overflows");
    return plan_finish(plan, err);
}

/* ---- Binding ------------------------------------------------------------------------------ */

bool attn_plan_bound(const attn_plan *p) {
    return (mask_present(&p->masks) & ~mask_data(&p->masks)) == 0 &&
           (p->opts.n_heads == 0 || p->opts.heads);
}

/* True when a and b are the same options, apart from the heads pointer. */
static bool opts_match(const attn_opts *a, const attn_opts *b) {
    return a->weights == b->weights && a->n_heads == b->n_heads && a->top_k == b->top_k &&
           a->has_scale == b->has_scale && (!a->has_scale || a->scale == b->scale) &&
           a->max_bytes == b->max_bytes && a->path == b->path && a->block_q == b->block_q &&
           a->block_k == b->block_k;
}

/* Checks that masks m can be bound to a plan made with masks pm: the same causal mode, the same
 * masks present, each with its data, and the same extents. */
static int bind_check_masks(const attn_masks *pm, const attn_masks *m, attn_error *err) {
    static const char *const names[] = {"key_lengths", "key_mask", "attn_mask", "attn_bias",
                                        "key_bias"};
    if (m->causal != pm->causal)
        return attn_fail(err, ATTN_ERR_ARG, "the causal mode is %d but the plan was made with %d",
                         (int)m->causal, (int)pm->causal);
    unsigned planned = mask_present(pm), given = mask_present(m), data = mask_data(m);
    for (unsigned i = 0; i < 5; i++) {
        unsigned bit = 1u << i;
        if ((planned ^ given) & bit)
            return attn_fail(err, ATTN_ERR_ARG, "%s is %s but the plan was made %s it", names[i],
                             given & bit ? "given" : "missing", given & bit ? "without" : "with");
        if ((given & bit) && !(data & bit))
            return attn_fail(err, ATTN_ERR_ARG, "%s has no data to bind", names[i]);
    }
    /* The leading extents of key_mask, attn_mask, attn_bias and key_bias, as bound and as
     * planned. */
    const size_t ext[4][4] = {
        {m->key_mask_n, 1, pm->key_mask_n, 1},
        {m->attn_mask_n, m->attn_mask_h, pm->attn_mask_n, pm->attn_mask_h},
        {m->attn_bias_n, m->attn_bias_h, pm->attn_bias_n, pm->attn_bias_h},
        {m->key_bias_n, 1, pm->key_bias_n, 1},
    };
    for (unsigned i = 0; i < 4; i++) {
        const size_t *x = ext[i];
        if ((given & (ATTN_MASK_KEY_MASK << i)) &&
            (attn_extent(x[0]) != attn_extent(x[2]) || attn_extent(x[1]) != attn_extent(x[3])))
            return attn_fail(err, ATTN_ERR_SHAPE,
                             "%s has leading extents (%zu, %zu) but the plan was made with "
                             "(%zu, %zu)",
                             names[i + 1], attn_extent(x[0]), attn_extent(x[1]), attn_extent(x[2]),
                             attn_extent(x[3]));
    }
    return ATTN_OK;
}

int attn_plan_bind(attn_plan *plan, const attn_opts *opts, const attn_masks *masks,
                   attn_error *err) {
    if (!plan || (plan->kind != ATTN_PLAN_MHA && plan->kind != ATTN_PLAN_SDPA))
        return attn_fail(err, ATTN_ERR_ARG,
                         "attn_plan_bind needs a plan made by attn_mha_plan or attn_sdpa_plan");
    attn_plan b = *plan;
    b.opts = opts ? *opts : (attn_opts){0};
    b.masks = masks ? *masks : (attn_masks){0};
    if (!opts_match(&b.opts, &plan->opts))
        return attn_fail(err, ATTN_ERR_ARG, "the options differ from those the plan was made with");
    if (b.opts.n_heads && !b.opts.heads)
        return attn_fail(err, ATTN_ERR_ARG, "the head subset has no indices to bind");
    int rc = bind_check_masks(&plan->masks, &b.masks, err);
    /* The planner's own checks, now with the data: key lengths and head indices. */
    if (rc == ATTN_OK)
        rc = plan_check_shape(&b, err);
    if (rc == ATTN_OK)
        rc = plan_check_opts(&b, err);
    if (rc != ATTN_OK)
        return rc;
    plan_flops(&b);
    *plan = b;
    return ATTN_OK;
}
