/* plan.c - libattn's plans: planning from shapes and then binding the data gives the plan made
 * with the data, limits and errors, and the FLOP count against its closed form and in bounded
 * time. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention.h"
#include "attention_test.h"

/* ---- planning from shapes, then binding the data ------------------------------------------ */

/* The name of the first field in which plans a and b differ, or NULL when they are the same in
 * every field (private ones included). */
static const char *plan_diff(const attn_plan *a, const attn_plan *b) {
#define SAME(f)                                                                                    \
    if (a->f != b->f)                                                                              \
    return #f
    SAME(workspace_bytes);
    SAME(out_elems);
    SAME(weights_elems);
    SAME(index_elems);
    SAME(job_bytes);
    SAME(flops);
    SAME(kind);
    SAME(mha.n);
    SAME(mha.l);
    SAME(mha.s);
    SAME(mha.e);
    SAME(mha.h);
    SAME(mha.kdim);
    SAME(mha.vdim);
    SAME(sd.n);
    SAME(sd.h);
    SAME(sd.l);
    SAME(sd.s);
    SAME(sd.d);
    SAME(sd.dv);
    SAME(opts.weights);
    SAME(opts.heads);
    SAME(opts.n_heads);
    SAME(opts.top_k);
    SAME(opts.has_scale);
    SAME(opts.scale);
    SAME(opts.max_bytes);
    SAME(opts.path);
    SAME(opts.block_q);
    SAME(opts.block_k);
    SAME(masks.causal);
    SAME(masks.key_lengths);
    SAME(masks.key_mask);
    SAME(masks.key_mask_n);
    SAME(masks.attn_mask);
    SAME(masks.attn_mask_n);
    SAME(masks.attn_mask_h);
    SAME(masks.attn_bias);
    SAME(masks.attn_bias_n);
    SAME(masks.attn_bias_h);
    SAME(masks.shape_only);
    SAME(nslots);
    SAME(bq);
    SAME(bk);
    SAME(nqb);
    SAME(slot_floats);
    SAME(tiled);
    SAME(scale);
#undef SAME
    return NULL;
}

/* masks with every pointer dropped: each mask present by its extents alone. */
static attn_masks shape_of(const attn_masks *m) {
    attn_masks s = *m;
    s.shape_only =
        (m->key_lengths ? ATTN_MASK_KEY_LENGTHS : 0u) | (m->key_mask ? ATTN_MASK_KEY_MASK : 0u) |
        (m->attn_mask ? ATTN_MASK_ATTN_MASK : 0u) | (m->attn_bias ? ATTN_MASK_ATTN_BIAS : 0u);
    s.key_lengths = NULL;
    s.key_mask = NULL;
    s.attn_mask = NULL;
    s.attn_bias = NULL;
    return s;
}

/* Plans an MHA (sdpa false) or SDPA job of the bind test's shapes. */
static int bind_plan(attn_plan *p, bool sdpa, const attn_opts *o, const attn_masks *m,
                     attn_error *err) {
    attn_mha_dims md = {.n = 3, .l = 5, .s = 7, .e = 16, .h = 4};
    attn_sdpa_dims sd = {.n = 3, .h = 4, .l = 5, .s = 7, .d = 3, .dv = 2};
    return sdpa ? attn_sdpa_plan(p, &sd, o, m, 2, err) : attn_mha_plan(p, &md, o, m, 2, err);
}

/* Planning from the shapes (shape-only masks, a head subset without its indices) then binding
 * the data gives the plan that planning with the data gives, in every field: MHA and SDPA, every
 * causal mode, every set of masks, four kinds of options. Then what bind refuses. */
void test_plan_bind(void) {
    enum { N = 3, H = 4, L = 5, S = 7 };
    int32_t kl[N] = {S, 0, 3};
    uint8_t km[N * S], am[H * L * S];
    float ab[N * L * S];
    for (size_t i = 0; i < sizeof km; i++)
        km[i] = (uint8_t)(i % 3 != 0);
    for (size_t i = 0; i < sizeof am; i++)
        am[i] = (uint8_t)(i % 5 != 1);
    for (size_t i = 0; i < N * L * S; i++)
        ab[i] = frand();
    uint32_t heads[2] = {3, 1};
    const attn_opts optss[4] = {
        {0},
        {.weights = ATTN_WEIGHTS_PER_HEAD, .heads = heads, .n_heads = 2},
        {.weights = ATTN_WEIGHTS_MEAN, .top_k = 3, .has_scale = true, .scale = 0.5f},
        {.path = ATTN_PATH_DIRECT, .block_q = 2, .max_bytes = 1u << 20},
    };
    size_t cases = 0, bad = 0;
    for (int sdpa = 0; sdpa < 2; sdpa++)
        for (int causal = 0; causal < 3; causal++)
            for (unsigned which = 0; which < 16; which++)
                for (size_t oi = 0; oi < 4; oi++) {
                    attn_masks m = {.causal = (attn_causal)causal};
                    if (which & 1)
                        m.key_lengths = kl;
                    if (which & 2)
                        m.key_mask = km, m.key_mask_n = N;
                    if (which & 4)
                        m.attn_mask = am, m.attn_mask_n = 1, m.attn_mask_h = H;
                    if (which & 8)
                        m.attn_bias = ab, m.attn_bias_n = N, m.attn_bias_h = 0;
                    attn_masks shape = shape_of(&m);
                    attn_opts o_shape = optss[oi];
                    o_shape.heads = NULL;
                    attn_plan want, p;
                    attn_error err = {0};
                    cases++;
                    int rc = bind_plan(&want, sdpa, &optss[oi], &m, &err);
                    if (rc == ATTN_OK)
                        rc = bind_plan(&p, sdpa, &o_shape, &shape, &err);
                    if (rc == ATTN_OK) {
                        CHECK(p.job_bytes == want.job_bytes &&
                                  p.weights_elems == want.weights_elems,
                              "the shapes' plan has other sizes than the data's");
                        rc = attn_plan_bind(&p, &optss[oi], &m, &err);
                    }
                    const char *diff = rc == ATTN_OK ? plan_diff(&p, &want) : "status";
                    if (diff && bad++ < 5)
                        CHECK(false, "%s causal %d masks %#x opts %zu: bound plan differs in %s %s",
                              sdpa ? "sdpa" : "mha", causal, which, oi, diff, err.msg);
                }
    CHECK(bad == 0, "%zu of %zu bound plans differ from the plans made with the data", bad, cases);

    /* A plan made with data can be bound again, to other data of the same shapes. */
    attn_masks m = {.causal = ATTN_CAUSAL_TOP_LEFT, .key_lengths = kl};
    int32_t kl2[N] = {1, 2, 3};
    attn_masks m2 = {.causal = ATTN_CAUSAL_TOP_LEFT, .key_lengths = kl2};
    attn_plan p, want;
    attn_error err = {0};
    CHECK(bind_plan(&p, true, NULL, &m, &err) == ATTN_OK &&
              bind_plan(&want, true, NULL, &m2, &err) == ATTN_OK &&
              attn_plan_bind(&p, NULL, &m2, &err) == ATTN_OK && !plan_diff(&p, &want),
          "rebinding to other key lengths: %s", err.msg);

    /* What bind refuses: ATTN_ERR_ARG or ATTN_ERR_SHAPE, a message naming the cause, and the
     * plan unchanged. */
    uint32_t bad_heads[2] = {1, H};
    int32_t bad_kl[N] = {2, S + 1, 0};
    attn_opts per_head = {.weights = ATTN_WEIGHTS_PER_HEAD, .heads = heads, .n_heads = 2};
    attn_opts per_head_bad = per_head, per_head_1 = per_head, top2 = {.top_k = 2};
    per_head_bad.heads = bad_heads;
    per_head_1.n_heads = 1;
    attn_opts per_head_shape = per_head;
    per_head_shape.heads = NULL;
    attn_masks km1 = {.key_mask = km, .key_mask_n = 1}, kmN = {.key_mask = km, .key_mask_n = N};
    attn_masks am1 = {.attn_mask = am, .attn_mask_n = 1, .attn_mask_h = H};
    attn_masks am11 = {.attn_mask = am, .attn_mask_n = 0, .attn_mask_h = 1};
    attn_masks klm = {.key_lengths = kl}, bad_klm = {.key_lengths = bad_kl};
    attn_masks klkm = {.key_lengths = kl, .key_mask = km, .key_mask_n = N};
    attn_masks causal = {.causal = ATTN_CAUSAL_BOTTOM_RIGHT, .key_lengths = kl};
    attn_masks none = {0}, kmN_shape = shape_of(&kmN);
    struct {
        const char *what;
        bool sdpa;
        const attn_opts *plan_o, *bind_o;
        attn_masks plan_m; /* given by its shape only */
        const attn_masks *bind_m;
        int code;
        const char *says;
    } refused[] = {
        {"a mask not planned", true, NULL, NULL, shape_of(&klm), &klkm, ATTN_ERR_ARG, "key_mask"},
        {"a planned mask missing", false, NULL, NULL, shape_of(&kmN), &none, ATTN_ERR_ARG,
         "key_mask"},
        {"a mask without data", true, NULL, NULL, shape_of(&kmN), &kmN_shape, ATTN_ERR_ARG,
         "no data"},
        {"other key_mask rows", true, NULL, NULL, shape_of(&km1), &kmN, ATTN_ERR_SHAPE, "key_mask"},
        {"other attn_mask extents", false, NULL, NULL, shape_of(&am1), &am11, ATTN_ERR_SHAPE,
         "attn_mask"},
        {"a key length over S", true, NULL, NULL, shape_of(&klm), &bad_klm, ATTN_ERR_ARG,
         "key_lengths[1]"},
        {"another causal mode", false, NULL, NULL, shape_of(&klm), &causal, ATTN_ERR_ARG, "causal"},
        {"a head out of range", false, &per_head_shape, &per_head_bad, none, &none, ATTN_ERR_ARG,
         "heads[1]"},
        {"another head count", true, &per_head_shape, &per_head_1, none, &none, ATTN_ERR_ARG,
         "options"},
        {"heads without indices", true, &per_head_shape, &per_head_shape, none, &none, ATTN_ERR_ARG,
         "head subset"},
        {"other options", false, NULL, &top2, none, &none, ATTN_ERR_ARG, "options"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        attn_plan before;
        err = (attn_error){0};
        CHECK(bind_plan(&p, refused[i].sdpa, refused[i].plan_o, &refused[i].plan_m, &err) ==
                  ATTN_OK,
              "%s: plan: %s", refused[i].what, err.msg);
        before = p;
        int rc = attn_plan_bind(&p, refused[i].bind_o, refused[i].bind_m, &err);
        CHECK(rc == refused[i].code && strstr(err.msg, refused[i].says),
              "%s: bind gave %s \"%s\", want %s naming %s", refused[i].what,
              attn_status_name((attn_status)rc), err.msg,
              attn_status_name((attn_status)refused[i].code), refused[i].says);
        CHECK(!plan_diff(&p, &before), "%s: a refused bind changed the plan", refused[i].what);
    }
    err = (attn_error){0};
    attn_masks odd = {.shape_only = 1u << 7};
    CHECK(bind_plan(&p, true, NULL, &odd, &err) == ATTN_ERR_ARG && strstr(err.msg, "shape_only"),
          "unknown shape_only bits must be refused: %s", err.msg);
    err = (attn_error){0};
    CHECK(attn_plan_bind(NULL, NULL, NULL, &err) == ATTN_ERR_ARG, "bind without a plan: %s",
          err.msg);

    /* Only a bound plan runs: the forwards and the batch refuse one that waits for its data, and
     * once bound it computes what the plan made with the data computes, bit for bit. */
    enum { D = 3, Dv = 2, E = 16 };
    attn_masks all = {.causal = ATTN_CAUSAL_BOTTOM_RIGHT,
                      .key_lengths = kl,
                      .key_mask = km,
                      .key_mask_n = N,
                      .attn_mask = am,
                      .attn_mask_n = 1,
                      .attn_mask_h = H,
                      .attn_bias = ab,
                      .attn_bias_n = N};
    attn_masks all_shape = shape_of(&all);
    float *q = frand_new(N * H * L * D), *k = frand_new(N * H * S * D),
          *v = frand_new(N * H * S * Dv);
    float out[N * H * L * Dv], out_want[N * H * L * Dv];
    err = (attn_error){0};
    CHECK(bind_plan(&want, true, NULL, &all, &err) == ATTN_OK &&
              bind_plan(&p, true, NULL, &all_shape, &err) == ATTN_OK,
          "plan: %s", err.msg);
    void *ws = ws_new(&p);
    CHECK(attn_sdpa_forward(&p, ws, out, NULL, q, k, v, NULL, &err) == ATTN_ERR_ARG &&
              strstr(err.msg, "attn_plan_bind"),
          "an SDPA forward on an unbound plan: %s", err.msg);
    err = (attn_error){0};
    CHECK(attn_plan_bind(&p, NULL, &all, &err) == ATTN_OK &&
              attn_sdpa_forward(&p, ws, out, NULL, q, k, v, NULL, &err) == ATTN_OK &&
              attn_sdpa_forward(&want, ws, out_want, NULL, q, k, v, NULL, &err) == ATTN_OK,
          "bound SDPA: %s", err.msg);
    CHECK(memcmp(out, out_want, sizeof out) == 0, "the bound plan computes something else");
    free(ws), free(q), free(k), free(v);

    float *x = frand_new(N * L * E), *win = frand_new(3 * E * E), *wout = frand_new(E * E);
    float mout[N * L * E];
    attn_mha_params prm = {.in_proj_weight = win, .out_proj_weight = wout};
    err = (attn_error){0};
    CHECK(bind_plan(&p, false, &per_head_shape, &none, &err) == ATTN_OK, "plan: %s", err.msg);
    ws = ws_new(&p);
    CHECK(attn_mha_forward(&p, ws, mout, NULL, x, x, x, &prm, NULL, &err) == ATTN_ERR_ARG &&
              strstr(err.msg, "attn_plan_bind"),
          "an MHA forward on an unbound plan: %s", err.msg);
    attn_mha_batch_job job = {.plan = &p, .out = mout, .query = x, .key = x, .value = x};
    attn_batch_plan bp;
    err = (attn_error){0};
    CHECK(attn_mha_batch_plan(&bp, &job, 1, &prm, 0, &err) == ATTN_OK, "batch plan: %s", err.msg);
    void *bws = aligned_alloc(64, (bp.workspace_bytes + 63) / 64 * 64);
    CHECK(attn_mha_batch_forward(&bp, bws, &job, 1, &prm, NULL, &err) == ATTN_ERR_ARG &&
              strstr(err.msg, "attn_plan_bind"),
          "a batch with an unbound plan: %s", err.msg);
    free(bws), free(ws), free(x), free(win), free(wout);
}

/* ---- limits and errors -------------------------------------------------------------------- */

void test_limits_and_errors(void) {
    attn_error err = {0};
    attn_plan p;
    attn_mha_dims big = {.n = 1, .l = 4096, .s = 4096, .e = 512, .h = 8};
    attn_opts o = {.weights = ATTN_WEIGHTS_PER_HEAD, .max_bytes = 64u << 20};
    CHECK(attn_mha_plan(&p, &big, &o, NULL, 2, &err) == ATTN_ERR_LIMIT,
          "an over-cap job must be refused (job %zu bytes)", p.job_bytes);
    CHECK(strstr(err.msg, "limit") != NULL, "the message must name the limit: %s", err.msg);
    /* The same job without weights fits: the tiled path needs O(block) scratch, and the fused
     * one the keys and values packed once more (2 N S E floats, as two projections). */
    attn_opts o2 = {.max_bytes = 64u << 20};
    err = (attn_error){0};
    CHECK(attn_mha_plan(&p, &big, &o2, NULL, 2, &err) == ATTN_OK, "%s", err.msg);
    CHECK(p.workspace_bytes - (size_t)6 * 4 * 4096 * 512 < (1u << 20),
          "tiled scratch beyond the projections and packed keys should be small, is %zu bytes",
          p.workspace_bytes - (size_t)6 * 4 * 4096 * 512);

    attn_mha_dims bad = {.n = 1, .l = 4, .s = 4, .e = 10, .h = 3};
    err = (attn_error){0};
    CHECK(attn_mha_plan(&p, &bad, NULL, NULL, 1, &err) == ATTN_ERR_SHAPE, "E %% H != 0: %s",
          err.msg);
    attn_mha_dims zero = {.n = 1, .l = 0, .s = 4, .e = 8, .h = 2};
    err = (attn_error){0};
    CHECK(attn_mha_plan(&p, &zero, NULL, NULL, 1, &err) == ATTN_ERR_SHAPE, "L = 0: %s", err.msg);
    attn_mha_dims huge = {.n = SIZE_MAX / 2, .l = 4, .s = 4, .e = 8, .h = 2};
    err = (attn_error){0};
    CHECK(attn_mha_plan(&p, &huge, NULL, NULL, 1, &err) == ATTN_ERR_OVERFLOW, "overflow: %s",
          err.msg);
    attn_sdpa_dims sd = {1, 1, 3, 4, 2, 2, 0};
    int32_t kl[1] = {5};
    attn_masks m = {.key_lengths = kl};
    err = (attn_error){0};
    CHECK(attn_sdpa_plan(&p, &sd, NULL, &m, 1, &err) == ATTN_ERR_ARG, "key length > S: %s",
          err.msg);
    attn_opts ok5 = {.weights = ATTN_WEIGHTS_PER_HEAD, .top_k = 5};
    err = (attn_error){0};
    CHECK(attn_sdpa_plan(&p, &sd, &ok5, NULL, 1, &err) == ATTN_ERR_ARG, "top_k > S: %s", err.msg);
    uint32_t hd[1] = {1};
    attn_opts oh = {.weights = ATTN_WEIGHTS_PER_HEAD, .heads = hd, .n_heads = 1};
    err = (attn_error){0};
    CHECK(attn_sdpa_plan(&p, &sd, &oh, NULL, 1, &err) == ATTN_ERR_ARG, "head 1 of 1: %s", err.msg);
    /* first error wins */
    err = (attn_error){0};
    attn_sdpa_plan(&p, &sd, &ok5, NULL, 1, &err);
    attn_mha_plan(&p, &bad, NULL, NULL, 1, &err);
    CHECK(err.code == ATTN_ERR_ARG, "the first error must win, got %s", attn_status_name(err.code));

    /* float32 overflow is reported, not returned as garbage */
    attn_sdpa_dims d1 = {1, 1, 2, 2, 2, 2, 0};
    float q[4] = {1e30f, 1e30f, 1, 1}, v[4] = {1, 2, 3, 4}, out[4];
    attn_opts on = {0};
    err = (attn_error){0};
    CHECK(attn_sdpa_plan(&p, &d1, &on, NULL, 1, &err) == ATTN_OK, "%s", err.msg);
    void *ws = ws_new(&p);
    CHECK(attn_sdpa_forward(&p, ws, out, NULL, q, q, v, NULL, &err) == ATTN_ERR_NUMERIC,
          "overflowing logits must give ATTN_ERR_NUMERIC, got %s", attn_status_name(err.code));
    free(ws);
}

/* ---- FLOP count --------------------------------------------------------------------------- */

/* The FLOP count as the plan defined it before it was closed-form: every row's limit (the
 * causal limit and the key length; cell masks not counted), one row at a time. */
static double flops_by_rows(const attn_sdpa_dims *d, const attn_masks *m) {
    double cells = 0;
    for (size_t n = 0; n < d->n; n++)
        for (size_t i = 0; i < d->l; i++) {
            size_t lim = d->s;
            if (m->key_lengths && (size_t)m->key_lengths[n] < lim)
                lim = (size_t)m->key_lengths[n];
            if (m->causal == ATTN_CAUSAL_TOP_LEFT && i + 1 < lim)
                lim = i + 1;
            if (m->causal == ATTN_CAUSAL_BOTTOM_RIGHT) {
                size_t c = i + 1 + d->s > d->l ? i + 1 + d->s - d->l : 0;
                lim = c < lim ? c : lim;
            }
            cells += (double)lim;
        }
    return 2.0 * cells * (double)d->h * (double)(d->d + d->dv);
}

static double thread_cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* plan.flops is closed-form and equals the row-by-row count exactly: every causal mode, L below,
 * equal to and above S, with and without key lengths (0 and S included), SDPA and MHA. And
 * planning a huge job costs no time proportional to N x L. */
void test_flops_closed_form(void) {
    int32_t kl[7];
    size_t mismatches = 0, cases = 0;
    for (size_t t = 0; t < 3000; t++) {
        attn_sdpa_dims d = {.n = 1 + t % 7,
                            .h = 1 + t % 3,
                            .l = 1 + (rng_state >> 7) % 97,
                            .s = 1 + (rng_state >> 23) % 97,
                            .d = 1 + t % 5,
                            .dv = 1 + t % 4};
        frand();
        attn_masks m = {.causal = (attn_causal)(t % 3)};
        if (t % 2) {
            for (size_t n = 0; n < d.n; n++)
                kl[n] = (int32_t)(n == 0 ? d.s : n == 1 ? 0 : (rng_state >> (n * 5)) % (d.s + 1));
            m.key_lengths = kl;
        }
        attn_plan p;
        attn_error err = {0};
        cases++;
        if (attn_sdpa_plan(&p, &d, NULL, &m, 1, &err) != ATTN_OK ||
            p.flops != flops_by_rows(&d, &m)) {
            if (mismatches++ < 5)
                CHECK(false, "sdpa N=%zu L=%zu S=%zu causal %d%s: flops %.17g, rows give %.17g %s",
                      d.n, d.l, d.s, (int)m.causal, m.key_lengths ? " key lengths" : "", p.flops,
                      flops_by_rows(&d, &m), err.msg);
        }
        attn_mha_dims md = {.n = d.n, .l = d.l, .s = d.s, .e = 4 * d.h, .h = d.h};
        attn_sdpa_dims hd = {d.n, d.h, d.l, d.s, 4, 4, 0};
        double proj = 2.0 * (double)(d.n * d.l) * (double)md.e * (double)md.e * 2.0 +
                      2.0 * (double)(d.n * d.s) * (double)md.e * (double)(2 * md.e);
        err = (attn_error){0};
        if (attn_mha_plan(&p, &md, NULL, &m, 1, &err) != ATTN_OK ||
            p.flops != flops_by_rows(&hd, &m) + proj) {
            if (mismatches++ < 5)
                CHECK(false, "mha N=%zu L=%zu S=%zu causal %d: flops %.17g, rows give %.17g %s",
                      d.n, d.l, d.s, (int)m.causal, p.flops, flops_by_rows(&hd, &m) + proj,
                      err.msg);
        }
    }
    CHECK(mismatches == 0, "%zu of %zu closed-form FLOP counts differ from the rows' sum",
          mismatches, 2 * cases);

    /* The request: N = L = S = 65536, bottom-right. Counting row by row took seconds;
     * closed-form it is microseconds. Thread CPU time, so other processes' load does not count. */
    attn_sdpa_dims big = {.n = 65536, .h = 1, .l = 65536, .s = 65536, .d = 1, .dv = 1};
    for (int c = 0; c < 3; c++) {
        attn_masks m = {.causal = (attn_causal)c};
        attn_plan p;
        attn_error err = {0};
        double t0 = thread_cpu_ms();
        int rc = attn_sdpa_plan(&p, &big, NULL, &m, 1, &err);
        double ms = thread_cpu_ms() - t0;
        CHECK(rc == ATTN_OK && ms < 20.0, "planning N = L = S = 65536 (causal %d) took %.1f ms: %s",
              c, ms, err.msg);
        double l = 65536.0, want = c ? l * (l + 1) / 2 : l * l;
        CHECK(p.flops == 2.0 * 65536.0 * want * 2.0, "causal %d: flops %.17g, want %.17g", c,
              p.flops, 2.0 * 65536.0 * want * 2.0);
    }
    /* L != S at the largest sizes: bottom-right with L > S leaves the first L - S rows empty. */
    attn_sdpa_dims wide = {.n = 3, .h = 1, .l = 65535, .s = 1000, .d = 1, .dv = 1};
    attn_masks br = {.causal = ATTN_CAUSAL_BOTTOM_RIGHT};
    attn_plan p;
    attn_error err = {0};
    CHECK(attn_sdpa_plan(&p, &wide, NULL, &br, 1, &err) == ATTN_OK &&
              p.flops == flops_by_rows(&wide, &br),
          "bottom-right L > S: %.17g vs %.17g", p.flops, flops_by_rows(&wide, &br));
}
