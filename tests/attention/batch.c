/* batch.c - batches across jobs (attn_mha_batch_plan): jobs of one batch answer as each run
 * alone, with masks, weights modes, kdim/vdim and shared tensors, and plans that cannot batch are
 * refused. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "attention_test.h"

/* ---- batches across jobs ------------------------------------------------------------------ */

/* One job of the batch tests: its dims, masks, options, inputs and both answers. */
typedef struct batch_case {
    attn_mha_dims d;
    attn_masks m;
    attn_opts o;
    int32_t kl[4];
    uint8_t *am;
    float *bias;
    float *xq, *xk, *xv; /* xk == xq for self-attention; xv == xk when shared */
    attn_plan p;
    float *out, *out1; /* batched, alone: (N, L, E) */
    float *w, *w1;     /* weights_elems, or NULL */
    int32_t *ix, *ix1; /* index_elems, or NULL */
    attn_weights_out wo, wo1;
} batch_case;

/* Builds case k of a batch on E, H, kdim, vdim: varied shapes, masks and weights modes. */
static void batch_case_make(batch_case *c, size_t k, size_t e, size_t h, size_t kdim, size_t vdim,
                            bool self, bool kv_shared, size_t nslots) {
    memset(c, 0, sizeof *c);
    size_t n = 1 + k % 3, l = 3 + 5 * k % 17, s = self ? l : 2 + 7 * k % 13;
    c->d = (attn_mha_dims){.n = n, .l = l, .s = s, .e = e, .h = h, .kdim = kdim, .vdim = vdim};
    switch (k % 6) {
    case 0:
        break;
    case 1:
        c->m.causal = ATTN_CAUSAL_TOP_LEFT;
        c->o.weights = ATTN_WEIGHTS_PER_HEAD;
        break;
    case 2:
        for (size_t i = 0; i < n; i++)
            c->kl[i] = (int32_t)(i == 1 ? 0 : s - i);
        c->m.key_lengths = c->kl;
        c->o.weights = ATTN_WEIGHTS_MEAN;
        break;
    case 3:
        c->am = malloc(l * s);
        for (size_t i = 0; i < l * s; i++)
            c->am[i] = (uint8_t)(frand() > -0.6f);
        c->m.attn_mask = c->am;
        c->o.weights = ATTN_WEIGHTS_PER_HEAD;
        c->o.top_k = s < 3 ? s : 3;
        break;
    case 4:
        c->bias = frand_new(n * h * l * s);
        c->m.attn_bias = c->bias;
        c->m.attn_bias_n = n;
        c->m.attn_bias_h = h;
        c->m.causal = ATTN_CAUSAL_BOTTOM_RIGHT;
        break;
    default:
        c->o.path = ATTN_PATH_TILED;
        c->o.block_q = 4;
        c->o.block_k = 5;
        c->o.has_scale = true;
        c->o.scale = 0.3f;
        break;
    }
    attn_error err = {0};
    CHECK(attn_mha_plan(&c->p, &c->d, &c->o, &c->m, nslots, &err) == ATTN_OK, "batch case %zu: %s",
          k, err.msg);
    c->xq = frand_new(n * l * e);
    c->xk = self ? c->xq : frand_new(n * s * kdim);
    c->xv = self || kv_shared ? c->xk : frand_new(n * s * vdim);
    c->out = calloc(c->p.out_elems, sizeof(float));
    c->out1 = calloc(c->p.out_elems, sizeof(float));
    if (c->p.weights_elems) {
        c->w = calloc(c->p.weights_elems, sizeof(float));
        c->w1 = calloc(c->p.weights_elems, sizeof(float));
        c->wo.values = c->w;
        c->wo1.values = c->w1;
    }
    if (c->p.index_elems) {
        c->ix = calloc(c->p.index_elems, sizeof(int32_t));
        c->ix1 = calloc(c->p.index_elems, sizeof(int32_t));
        c->wo.indices = c->ix;
        c->wo1.indices = c->ix1;
    }
}

static void batch_case_free(batch_case *c) {
    if (c->xv != c->xk)
        free(c->xv);
    if (c->xk != c->xq)
        free(c->xk);
    free(c->xq), free(c->am), free(c->bias), free(c->out), free(c->out1);
    free(c->w), free(c->w1), free(c->ix), free(c->ix1);
}

/* Runs count cases as one batch and each alone; the answers must agree to float32 rounding.
 * bad: the index of a case given inputs that overflow float32 (it alone must fail), or count. */
static void batch_compare(const char *what, batch_case *cs, size_t count,
                          const attn_mha_params *prm, attn_pool *pool, size_t bad) {
    attn_mha_batch_job jobs[16];
    attn_error errs[16];
    for (size_t i = 0; i < count; i++) {
        errs[i] = (attn_error){0};
        jobs[i] = (attn_mha_batch_job){.plan = &cs[i].p,
                                       .out = cs[i].out,
                                       .weights = cs[i].p.weights_elems ? &cs[i].wo : NULL,
                                       .query = cs[i].xq,
                                       .key = cs[i].xk,
                                       .value = cs[i].xv,
                                       .err = &errs[i],
                                       .status = -1};
    }
    attn_batch_plan bp;
    attn_error err = {0};
    if (attn_mha_batch_plan(&bp, jobs, count, prm, 0, &err) != ATTN_OK) {
        CHECK(false, "%s: batch plan: %s", what, err.msg);
        return;
    }
    void *ws = aligned_alloc(64, (bp.workspace_bytes + 63) / 64 * 64);
    int rc = attn_mha_batch_forward(&bp, ws, jobs, count, prm, pool, &err);
    CHECK(rc == ATTN_OK, "%s: batch forward: %s", what, err.msg);
    free(ws);
    size_t rows = 0;
    for (size_t i = 0; i < count && rc == ATTN_OK; i++) {
        batch_case *c = &cs[i];
        rows += c->d.n * c->d.l;
        attn_error e1 = {0};
        void *ws1 = ws_new(&c->p);
        int rc1 = attn_mha_forward(&c->p, ws1, c->out1, c->p.weights_elems ? &c->wo1 : NULL, c->xq,
                                   c->xk, c->xv, prm, pool, &e1);
        free(ws1);
        if (i == bad) {
            CHECK(jobs[i].status == ATTN_ERR_NUMERIC && errs[i].code == ATTN_ERR_NUMERIC &&
                      rc1 == ATTN_ERR_NUMERIC,
                  "%s: job %zu overflows: batch status %s, alone %s", what, i,
                  attn_status_name(jobs[i].status), attn_status_name(rc1));
            continue;
        }
        CHECK(jobs[i].status == ATTN_OK && errs[i].code == ATTN_OK,
              "%s: job %zu failed in the batch: %s", what, i, errs[i].msg);
        CHECK(rc1 == ATTN_OK, "%s: job %zu alone: %s", what, i, e1.msg);
        double dout = max_abs_diff(c->out, c->out1, c->p.out_elems);
        double dw = c->w ? max_abs_diff(c->w, c->w1, c->p.weights_elems) : 0;
        bool ix_same = !c->ix || !memcmp(c->ix, c->ix1, c->p.index_elems * sizeof(int32_t));
        CHECK(dout < 2e-6 && dw < 1e-6 && ix_same,
              "%s: job %zu batched vs alone: output %.3g, weights %.3g, indices %s", what, i, dout,
              dw, ix_same ? "same" : "differ");
    }
    CHECK(rc != ATTN_OK || bp.rows == rows, "%s: plan rows %zu, want %zu", what, bp.rows, rows);
}

void test_batch(attn_pool *pool) {
    const size_t E = 24, H = 3, ns = attn_pool_slots(pool);
    float *win = frand_new(3 * E * E), *bin = frand_new(3 * E), *wout = frand_new(E * E);
    float *bout = frand_new(E), *wk = frand_new(E * 7), *wv = frand_new(E * 5);
    for (size_t i = 0; i < 3 * E * E; i++)
        win[i] *= 0.3f;
    attn_mha_params packed = {
        .in_proj_weight = win, .in_proj_bias = bin, .out_proj_weight = wout, .out_proj_bias = bout};
    attn_mha_params split = {.q_proj_weight = win,
                             .k_proj_weight = wk,
                             .v_proj_weight = wv,
                             .out_proj_weight = wout,
                             .out_proj_bias = bout};
    batch_case cs[12];

    /* Self-attention on in_proj_weight: one QKV GEMM; every mask and weights mode. */
    for (size_t k = 0; k < 12; k++)
        batch_case_make(&cs[k], k, E, H, E, E, true, true, ns);
    batch_compare("self", cs, 12, &packed, pool, 12);
    /* One job whose logits overflow float32 fails alone. */
    for (size_t i = 0; i < cs[4].d.n * cs[4].d.l * E; i++)
        cs[4].xq[i] = 1e30f;
    batch_compare("self, one overflowing", cs, 6, &packed, pool, 4);
    for (size_t k = 0; k < 12; k++)
        batch_case_free(&cs[k]);

    /* Cross-attention: key == value (one KV GEMM); separate values; self and cross mixed. */
    for (size_t k = 0; k < 6; k++)
        batch_case_make(&cs[k], k, E, H, E, E, false, true, ns);
    batch_compare("cross, key = value", cs, 6, &packed, pool, 6);
    for (size_t k = 0; k < 6; k++)
        batch_case_free(&cs[k]);
    for (size_t k = 0; k < 6; k++)
        batch_case_make(&cs[k], k, E, H, E, E, k % 2 == 0, k % 3 == 0, ns);
    batch_compare("self and cross mixed", cs, 6, &packed, pool, 6);
    for (size_t k = 0; k < 6; k++)
        batch_case_free(&cs[k]);
    /* q/k/v_proj_weight with kdim 7, vdim 5. */
    for (size_t k = 0; k < 5; k++)
        batch_case_make(&cs[k], k, E, H, 7, 5, false, false, ns);
    batch_compare("kdim and vdim", cs, 5, &split, pool, 5);

    /* Contracts: plans that differ, the cap, a count that does not match, no params. */
    attn_mha_batch_job jobs[2] = {
        {.plan = &cs[0].p, .out = cs[0].out, .query = cs[0].xq, .key = cs[0].xk, .value = cs[0].xv},
        {.plan = &cs[1].p, .out = cs[1].out, .query = cs[1].xq, .key = cs[1].xk, .value = cs[1].xv},
    };
    attn_batch_plan bp;
    attn_error err = {0};
    CHECK(attn_mha_batch_plan(&bp, jobs, 2, &split, 64, &err) == ATTN_ERR_LIMIT &&
              strstr(err.msg, "limit"),
          "a batch over max_bytes: %s", err.msg);
    err = (attn_error){0};
    CHECK(attn_mha_batch_plan(&bp, jobs, 2, &packed, 0, &err) == ATTN_ERR_ARG,
          "in_proj_weight with kdim != E must be refused: %s", err.msg);
    err = (attn_error){0};
    CHECK(attn_mha_batch_plan(&bp, jobs, 0, &split, 0, &err) == ATTN_ERR_ARG, "no jobs: %s",
          err.msg);
    err = (attn_error){0};
    CHECK(attn_mha_batch_plan(&bp, jobs, 2, &split, 0, &err) == ATTN_OK, "%s", err.msg);
    void *ws = aligned_alloc(64, (bp.workspace_bytes + 63) / 64 * 64);
    CHECK(attn_mha_batch_forward(&bp, ws, jobs, 1, &split, pool, &err) == ATTN_ERR_ARG,
          "a count other than planned: %s", err.msg);
    err = (attn_error){0};
    CHECK(attn_mha_batch_forward(&bp, ws, jobs, 2, NULL, pool, &err) == ATTN_ERR_ARG,
          "no params: %s", err.msg);
    free(ws);
    attn_plan other;
    attn_mha_dims d2 = cs[0].d;
    d2.h = 1;
    err = (attn_error){0};
    CHECK(attn_mha_plan(&other, &d2, NULL, NULL, ns, &err) == ATTN_OK, "%s", err.msg);
    jobs[1].plan = &other;
    CHECK(attn_mha_batch_plan(&bp, jobs, 2, &split, 0, &err) == ATTN_ERR_ARG &&
              strstr(err.msg, "does not match"),
          "plans with other heads: %s", err.msg);
    for (size_t k = 0; k < 5; k++)
        batch_case_free(&cs[k]);
    free(win), free(bin), free(wout), free(bout), free(wk), free(wv);
}
