/* batch.c - runs many small MHA jobs on the same parameters as one: their rows gathered, the
 * input and output projections as one GEMM each over all of them, the attention job by job with
 * each job's own plan, and the rows scattered back.
 *
 * Legend: N batch, L query length, S key length, E embedding, H heads, R the query rows of all
 * jobs (the sum of N*L), RS their key rows (the sum of N*S). */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

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
    size_t kt;    /* kt_floats: the fused path's packed keys, shared by the jobs in turn */
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
    b.kt = attn_ws_take(&l, bp->kt_floats, 1, 1);
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
        if (p->kv_extra)
            return attn_fail(err, ATTN_ERR_ARG,
                             "job %zu appends keys (bias_kv, zero_attn): run it alone with "
                             "attn_mha_forward",
                             i);
        bp->self &= j->query == j->key && j->key == j->value && d->l == d->s;
        bp->kv_one &= j->key == j->value;
        if (!attn_add(rows, d->n * d->l, &rows) || !attn_add(key_rows, d->n * d->s, &key_rows))
            return attn_fail(err, ATTN_ERR_OVERFLOW, "the batch's rows overflow");
        if (p->slot_floats > bp->slot_floats)
            bp->slot_floats = p->slot_floats;
        if (p->kt_floats > bp->kt_floats)
            bp->kt_floats = p->kt_floats;
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
            p->mha.vdim != bp->vdim || p->nslots != bp->nslots || p->kv_extra || !j->query ||
            !j->key || !j->value)
            return attn_fail(err, ATTN_ERR_ARG, "job %zu does not match the batch plan", i);
        if (!attn_plan_bound(p))
            return attn_fail(err, ATTN_ERR_ARG,
                             "job %zu's plan has masks or heads without their data "
                             "(attn_plan_bind)",
                             i);
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
        attn_run run = {.p = p, .slots = ws + b.slots, .kt = ws + b.kt};
        if (j->weights)
            run.wout = *j->weights;
        run.view = all;
        run.view.q += r * all.ldq;
        run.view.k += rk * all.ldk;
        run.view.v += rk * all.ldv;
        attn_view_strides(&run.view, p, ws + b.ob + r * E);
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
