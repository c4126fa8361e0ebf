/* stack.c - stacks of self-attention layers over a residual stream (attention-only
 * transformers): each layer's LayerNorm, its MHA on mha.c's forward, the residual sums, the final
 * LayerNorm and the unembedding to logits.
 *
 * Legend: N batch, L rows (queries = keys: self-attention), E width, H heads, V vocabulary (the
 * unembedding's rows). */
#include <math.h>
#include <string.h>

#include "internal.h"

/* FLOPs counted per element of a LayerNorm row (mean, variance, normalise, scale and shift). */
#define NORM_FLOPS_PER_ELEM 8.0

/* The workspace: a layer's MHA scratch, then the normed input (N*L, E) and the layer's output
 * (N*L, E), each 64-byte aligned. Offsets in floats. */
typedef struct stack_layout {
    size_t mha, normed, added, total;
    bool ok;
} stack_layout;

static stack_layout layout_of(const attn_stack_plan *p) {
    attn_ws_layout w = {.ok = true};
    size_t mha = p->kept.workspace_bytes > p->plain.workspace_bytes ? p->kept.workspace_bytes
                                                                    : p->plain.workspace_bytes;
    stack_layout s = {0};
    s.mha = attn_ws_take(&w, (mha + sizeof(float) - 1) / sizeof(float), 1, 1);
    s.normed = attn_ws_take(&w, p->d.n * p->d.l, p->d.e, 1);
    s.added = attn_ws_take(&w, p->d.n * p->d.l, p->d.e, 1);
    s.total = w.total;
    s.ok = w.ok;
    return s;
}

int attn_mha_stack_plan(attn_stack_plan *plan, const attn_stack_dims *dims, const attn_opts *opts,
                        const attn_masks *masks, size_t nslots, attn_error *err) {
    if (!plan || !dims)
        return attn_fail(err, ATTN_ERR_ARG, "attn_mha_stack_plan needs a plan and dims");
    memset(plan, 0, sizeof *plan);
    plan->d = *dims;
    const attn_stack_dims *d = dims;
    if (d->layers == 0)
        return attn_fail(err, ATTN_ERR_SHAPE, "a stack needs at least one layer");
    attn_opts o = opts ? *opts : (attn_opts){0};
    if (o.path != ATTN_PATH_AUTO && o.path != ATTN_PATH_DIRECT)
        return attn_fail(err, ATTN_ERR_ARG,
                         "a stack runs on the direct path: path must be AUTO "
                         "or DIRECT");
    const size_t cap = o.max_bytes;
    o.path = ATTN_PATH_DIRECT;
    o.max_bytes = 0;
    attn_mha_dims md = {d->n, d->l, d->l, d->e, d->h, d->e, d->e, false, false};
    int rc = attn_mha_plan(&plan->kept, &md, &o, masks, nslots, err);
    if (rc != ATTN_OK)
        return rc;
    attn_opts plain = o;
    plain.weights = ATTN_WEIGHTS_NONE;
    plain.heads = NULL;
    plain.n_heads = 0;
    plain.top_k = 0;
    rc = attn_mha_plan(&plan->plain, &md, &plain, masks, nslots, err);
    if (rc != ATTN_OK)
        return rc;
    size_t nl = d->n * d->l; /* checked by attn_mha_plan */
    plan->out_elems = plan->kept.out_elems;
    if (!attn_mul(nl, d->vocab, &plan->logits_elems) || !attn_fits_int(d->vocab))
        return attn_fail(err, ATTN_ERR_OVERFLOW, "the logits' size overflows");
    plan->weights_elems = plan->kept.weights_elems;
    plan->index_elems = plan->kept.index_elems;
    stack_layout l = layout_of(plan);
    size_t bytes = 0, outs = 0;
    if (!l.ok || !attn_mul(l.total, sizeof(float), &plan->workspace_bytes) ||
        !attn_add(plan->out_elems, plan->logits_elems, &outs) ||
        !attn_mul(outs, sizeof(float), &outs) || !attn_add(plan->workspace_bytes, outs, &bytes))
        return attn_fail(err, ATTN_ERR_OVERFLOW, "the stack's workspace size overflows");
    if (cap && bytes > cap)
        return attn_fail(err, ATTN_ERR_LIMIT,
                         "the stack needs %zu bytes of workspace and outputs, over the cap of %zu",
                         bytes, cap);
    /* Each layer's attention, norm and sum; the final norm and the unembedding. */
    const double rows = (double)nl, e = (double)d->e, v = (double)d->vocab;
    plan->flops = (double)d->layers * (plan->kept.flops + (NORM_FLOPS_PER_ELEM + 1.0) * rows * e);
    if (d->vocab)
        plan->flops += NORM_FLOPS_PER_ELEM * rows * e + 2.0 * rows * e * v + rows * v;
    return ATTN_OK;
}

int attn_mha_stack_bind(attn_stack_plan *plan, const attn_opts *opts, const attn_masks *masks,
                        attn_error *err) {
    if (!plan || plan->d.layers == 0)
        return attn_fail(err, ATTN_ERR_ARG, "attn_mha_stack_bind needs a stack's plan");
    attn_opts o = opts ? *opts : (attn_opts){0};
    o.path = ATTN_PATH_DIRECT;
    o.max_bytes = 0;
    attn_opts plain = plan->plain.opts;
    attn_plan kept = plan->kept, pl = plan->plain;
    int rc = attn_plan_bind(&kept, &o, masks, err);
    if (rc == ATTN_OK)
        rc = attn_plan_bind(&pl, &plain, masks, err);
    if (rc != ATTN_OK)
        return rc;
    plan->kept = kept;
    plan->plain = pl;
    /* The layers' attended cells may change with the data (key lengths): count them again. */
    const double rows = (double)(plan->d.n * plan->d.l), e = (double)plan->d.e,
                 v = (double)plan->d.vocab;
    plan->flops =
        (double)plan->d.layers * (plan->kept.flops + (NORM_FLOPS_PER_ELEM + 1.0) * rows * e);
    if (plan->d.vocab)
        plan->flops += NORM_FLOPS_PER_ELEM * rows * e + 2.0 * rows * e * v + rows * v;
    return ATTN_OK;
}

/* y (rows, E) = LayerNorm of x (rows, E) with weight w and bias b (E; b may be NULL): each row
 * less its mean, over the square root of its biased variance plus eps, times w, plus b. The
 * moments are summed in double. y may be x. */
static void layer_norm(float *y, const float *x, size_t rows, size_t e, const float *w,
                       const float *b, float eps) {
    for (size_t i = 0; i < rows; i++) {
        const float *xi = x + i * e;
        float *yi = y + i * e;
        double mean = 0, var = 0;
        for (size_t j = 0; j < e; j++)
            mean += (double)xi[j];
        mean /= (double)e;
        for (size_t j = 0; j < e; j++)
            var += ((double)xi[j] - mean) * ((double)xi[j] - mean);
        var /= (double)e;
        const double inv = 1.0 / sqrt(var + (double)eps);
        for (size_t j = 0; j < e; j++)
            yi[j] = (float)(((double)xi[j] - mean) * inv * (double)w[j] + (b ? (double)b[j] : 0.0));
    }
}

/* Checks the forward's arguments: the plan bound, the buffers, every layer's parameters. */
static int check_args(const attn_stack_plan *p, void *ws, float *out, const float *x,
                      const attn_stack_params *prm, attn_stack_layer_out *layers, attn_error *err) {
    if (!p || p->d.layers == 0 || !ws || !out || !x || !prm || !prm->layers)
        return attn_fail(err, ATTN_ERR_ARG,
                         "attn_mha_stack_forward needs a plan, workspace, out, x and params");
    if (((uintptr_t)ws & 63) != 0)
        return attn_fail(err, ATTN_ERR_ARG, "the workspace must be 64-byte aligned");
    if (!attn_plan_bound(&p->kept) || !attn_plan_bound(&p->plain))
        return attn_fail(err, ATTN_ERR_ARG, "the plan waits for its data: attn_mha_stack_bind");
    for (size_t l = 0; l < p->d.layers; l++) {
        const attn_mha_params *m = &prm->layers[l].mha;
        if (!m->in_proj_weight || !m->out_proj_weight)
            return attn_fail(err, ATTN_ERR_ARG,
                             "layer %zu needs in_proj_weight and out_proj.weight", l);
        const attn_weights_out *w = layers ? layers[l].weights : NULL;
        if (w && p->weights_elems && (!w->values || (p->index_elems && !w->indices)))
            return attn_fail(err, ATTN_ERR_ARG, "layer %zu keeps weights without buffers", l);
    }
    if (p->d.vocab && !prm->unembed_weight)
        return attn_fail(err, ATTN_ERR_ARG, "the plan has an unembedding: params need it");
    return ATTN_OK;
}

int attn_mha_stack_forward(const attn_stack_plan *plan, void *workspace, float *out, float *logits,
                           attn_stack_layer_out *layers, const float *x,
                           const attn_stack_params *params, attn_pool *pool, attn_error *err) {
    int rc = check_args(plan, workspace, out, x, params, layers, err);
    if (rc != ATTN_OK)
        return rc;
    const attn_stack_dims *d = &plan->d;
    const size_t rows = d->n * d->l, count = rows * d->e;
    stack_layout sl = layout_of(plan);
    float *ws = workspace, *normed = ws + sl.normed, *added = ws + sl.added;
    if (out != x)
        memcpy(out, x, count * sizeof *out);
    for (size_t l = 0; l < d->layers; l++) {
        const attn_layer_params *lp = &params->layers[l];
        attn_stack_layer_out *keep = layers ? &layers[l] : NULL;
        if (keep && keep->residual)
            memcpy(keep->residual, out, count * sizeof *out);
        const float *in = out;
        if (lp->norm_weight) {
            layer_norm(normed, out, rows, d->e, lp->norm_weight, lp->norm_bias, params->eps);
            in = normed;
        }
        attn_weights_out *w = keep && plan->weights_elems ? keep->weights : NULL;
        rc = attn_mha_forward_traced(w ? &plan->kept : &plan->plain, ws + sl.mha, added, w,
                                     keep ? keep->trace : NULL, in, in, in, &lp->mha, pool, err);
        if (rc != ATTN_OK)
            return rc;
        if (keep && keep->attn_out)
            memcpy(keep->attn_out, added, count * sizeof *added);
        for (size_t i = 0; i < count; i++)
            out[i] += added[i];
    }
    if (!attnk_get()->all_finite(out, count))
        return attn_fail(err, ATTN_ERR_NUMERIC,
                         "the residual stream is not finite: float32 "
                         "overflowed");
    if (!d->vocab || !logits)
        return ATTN_OK;
    const float *y = out;
    if (params->norm_weight) {
        layer_norm(normed, out, rows, d->e, params->norm_weight, params->norm_bias, params->eps);
        y = normed;
    }
    attn_linear_run(logits, y, rows, d->e, d->vocab, params->unembed_weight, params->unembed_bias,
                    plan->kept.nslots, pool);
    if (!attnk_get()->all_finite(logits, plan->logits_elems))
        return attn_fail(err, ATTN_ERR_NUMERIC, "the logits are not finite: float32 overflowed");
    return ATTN_OK;
}
