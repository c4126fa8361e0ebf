/* mha.c - runs MHA jobs (PyTorch's nn.MultiheadAttention forward): the input projections, the
 * keys appended after them (add_bias_kv, add_zero_attn), the attention of sdpa.c on each head's
 * column slice of them, and the out-projection; each GEMM is split into blocks over the pool.
 * The batches of batch.c run the same projections.
 *
 * Legend: N batch, L query length, S key length, E embedding, H heads, Dh = E / H, kdim and vdim
 * the key and value widths before projection. */
#include <cblas.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

#define PROJ_MIN_ROWS 32
#define PROJ_MIN_COLS 64

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

void attn_view_strides(attn_view *v, const attn_plan *p, float *ob) {
    const attn_mha_dims *d = &p->mha;
    const size_t dh = p->sd.d;
    v->q_sn = d->l * v->ldq;
    v->k_sn = p->sd.s * v->ldk;
    v->v_sn = p->sd.s * v->ldv;
    v->q_sh = v->k_sh = v->v_sh = dh;
    v->o = ob;
    v->ldo = d->e;
    v->o_sn = d->l * d->e;
    v->o_sh = dh;
}

/* Spreads the N batch elements of S rows (ld apart, w wide, at base) to S' rows apart, each
 * after x free rows, and writes the free rows: fill (w floats) or zeros for row 0 with bias (a
 * bias row, then zero_attn's zeros), zeros for the others. Last batch element first, so that
 * no row is overwritten before it has moved. */
static void kv_spread(float *base, size_t ld, size_t w, size_t n, size_t s, size_t x,
                      const float *fill) {
    const size_t sx = s + x;
    for (size_t b = n; b-- > 0;) {
        float *dst = base + b * sx * ld;
        memmove(dst + x * ld, base + b * s * ld, (s * ld - (ld - w)) * sizeof *dst);
        for (size_t e = 0; e < x; e++) {
            if (e == 0 && fill)
                memcpy(dst, fill, w * sizeof *dst);
            else
                memset(dst + e * ld, 0, w * sizeof *dst);
        }
    }
}

void attn_kv_append(const attn_view *v, const attn_plan *p, const attn_mha_params *prm) {
    const attn_mha_dims *d = &p->mha;
    const size_t x = p->kv_extra, E = d->e;
    if (x == 0)
        return;
    const float *bk = d->bias_kv ? prm->bias_k : NULL, *bv = d->bias_kv ? prm->bias_v : NULL;
    float *k = (float *)v->k, *vv = (float *)v->v;
    if (vv == k + E && v->ldk == 2 * E && v->ldv == 2 * E) { /* [K V] rows: one move */
        kv_spread(k, 2 * E, 2 * E, d->n, d->s, x, NULL);
        for (size_t b = 0; b < d->n; b++) {
            float *row = k + b * (d->s + x) * 2 * E;
            if (bk) {
                memcpy(row, bk, E * sizeof *row);
                memcpy(row + E, bv, E * sizeof *row);
            }
        }
        return;
    }
    kv_spread(k, v->ldk, E, d->n, d->s, x, bk);
    kv_spread(vv, v->ldv, E, d->n, d->s, x, bv);
}

void attn_linear_run(float *out, const float *x, size_t rows, size_t in, size_t outdim,
                     const float *w, const float *b, size_t nslots, attn_pool *pool) {
    proj_run po = {.ng = 0};
    proj_add(&po,
             (proj_gemm){.x = x,
                         .w = w,
                         .b = b,
                         .c = out,
                         .rows = rows,
                         .in = in,
                         .outdim = outdim,
                         .ldx = in,
                         .ldc = outdim},
             nslots);
    proj_exec(&po, pool);
}

void attn_out_proj_run(float *out, const float *ob, size_t rows, size_t e,
                       const attn_mha_params *prm, size_t nslots, attn_pool *pool) {
    attn_linear_run(out, ob, rows, e, e, prm->out_proj_weight, prm->out_proj_bias, nslots, pool);
}

int attn_mha_forward(const attn_plan *plan, void *workspace, float *out, attn_weights_out *weights,
                     const float *query, const float *key, const float *value,
                     const attn_mha_params *params, attn_pool *pool, attn_error *err) {
    return attn_mha_forward_traced(plan, workspace, out, weights, NULL, query, key, value, params,
                                   pool, err);
}

int attn_mha_forward_traced(const attn_plan *plan, void *workspace, float *out,
                            attn_weights_out *weights, attn_trace *trace, const float *query,
                            const float *key, const float *value, const attn_mha_params *params,
                            attn_pool *pool, attn_error *err) {
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
    if (d->bias_kv && (!params->bias_k || !params->bias_v))
        return attn_fail(err, ATTN_ERR_ARG, "the plan has bias_kv: params need bias_k and bias_v");

    float *ws = workspace;
    attn_ws_layout l = attn_plan_layout(plan);
    attn_run r = {.p = plan, .slots = ws + l.slots, .kt = ws + l.kt};
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
                       /* one [Q K V] GEMM, unless keys are appended after K and V */
                       .self = packed && query == key && key == value && d->l == d->s &&
                               plan->kv_extra == 0,
                       .kv_one = key == value};
    attn_in_proj_run(&r.view, &ip, params, plan->nslots, pool);
    attn_kv_append(&r.view, plan, params);

    attn_view_strides(&r.view, plan, ws + l.ob);
    rc = attn_run_attention(&r, pool, err);
    if (rc != ATTN_OK)
        return rc;
    if (trace)
        attn_trace_write(&r, trace);

    attn_out_proj_run(out, ws + l.ob, NL, d->e, params, plan->nslots, pool);
    if (!attnk_get()->all_finite(out, plan->out_elems))
        return attn_fail(err, ATTN_ERR_NUMERIC, "the output is not finite: float32 overflowed");
    return ATTN_OK;
}
