/* request.c - turns the body of POST /v1/attention or /v1/sdpa into a validated job.
 *
 * Order of work: check the JSON; map the top-level fields (unknown ones are refused); learn
 * every tensor's shape and check every field and their agreement, allocating nothing; plan the
 * job with libattn and add up the arena; refuse a job over max_job_bytes; allocate the one
 * arena; decode every tensor into it (rows, types and values are checked while copying); plan
 * again with the decoded masks. Every error names the field by its JSON path.
 *
 * Legend: N batch, L query length, S key length, E embedding width, H heads, kdim/vdim key and
 * value widths, D/Dv the SDPA query-key and value widths, K the top-k count. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "request.h"

#define ARENA_ALIGN 64 /* what api_mem_alloc gives */

api_limits api_limits_default(void) {
    return (api_limits){.max_job_bytes = (size_t)1 << 30,
                        .max_dim = 65536,
                        .max_heads = 256,
                        .nslots = 1,
                        .max_depth = APIP_JSON_MAX_DEPTH};
}

/* ---- Sizing, allocation, decoding --------------------------------------------------------- */

/* The arena: regions appended at 64-byte boundaries. */
typedef struct layout {
    size_t total;
    bool ok;
} layout;

static size_t take(layout *a, size_t count, size_t size) {
    size_t bytes = 0, at = a->total, end = 0;
    if (!apip_mul(count, size, &bytes) || !apip_add(at, bytes, &end) ||
        !apip_add(end, ARENA_ALIGN - 1, &end)) {
        a->ok = false;
        return 0;
    }
    a->total = end / ARENA_ALIGN * ARENA_ALIGN;
    return at;
}

static void fill_dims(const apip_req *r, attn_mha_dims *md, attn_sdpa_dims *sd) {
    *md = (attn_mha_dims){r->n, r->l, r->s, r->e, r->h, r->kdim, r->vdim};
    *sd = (attn_sdpa_dims){r->n, r->h, r->l, r->s, r->d, r->dv};
}

static int plan(const apip_req *r, attn_plan *p, const attn_opts *o, const attn_masks *m,
                api_error *err) {
    attn_mha_dims md;
    attn_sdpa_dims sd;
    fill_dims(r, &md, &sd);
    attn_error ae = {0};
    int rc = r->op == API_OP_SDPA ? attn_sdpa_plan(p, &sd, o, m, r->lim->nslots, &ae)
                                  : attn_mha_plan(p, &md, o, m, r->lim->nslots, &ae);
    if (rc == ATTN_OK)
        return 0;
    if (rc == ATTN_ERR_OVERFLOW || rc == ATTN_ERR_LIMIT)
        return api_fail(err, 413, "job_too_large", NULL, "the job is too large: %s", ae.msg);
    if (rc == ATTN_ERR_SHAPE || rc == ATTN_ERR_ARG)
        return api_fail(err, 400, "invalid_field", NULL, "%s", ae.msg);
    return api_fail(err, 500, "internal", NULL, "planning failed: %s", ae.msg);
}

api_job *api_job_parse(api_op op, const char *body, size_t len, const api_registry *models,
                       const api_limits *lim, api_error *err) {
    apip_json_root root;
    size_t depth = lim ? lim->max_depth : APIP_JSON_MAX_DEPTH;
    if (apip_json_check_depth(body, len, "the request body", depth, &root, err))
        return NULL;
    return apip_job_parse_given(op, &root, NULL, models, lim, err);
}

api_job *apip_job_parse_given(api_op op, const apip_json_root *root, apip_job_given *given,
                              const api_registry *models, const api_limits *lim, api_error *err) {
    api_limits dflt = api_limits_default();
    if (!lim)
        lim = &dflt;
    if (lim->nslots == 0 || lim->max_heads > API_MAX_HEADS) {
        dflt = *lim;
        dflt.nslots = dflt.nslots ? dflt.nslots : 1;
        dflt.max_heads = dflt.max_heads < API_MAX_HEADS ? dflt.max_heads : API_MAX_HEADS;
        lim = &dflt;
    }
    /* The scratch of parsing (about 5 KiB) lives on the stack: the arena is the job's only
     * allocation. */
    apip_req rq = {0}, *r = &rq;
    api_job *job = NULL;
    r->op = op;
    r->lim = lim;
    r->err = err;
    r->given = given;
    if (apip_req_read(r, root, models))
        goto done;

    /* Plan with the shapes alone (the masks' contents are not needed for sizes), then lay out
     * the arena and check it against the limit. */
    static const uint8_t dummy_u8 = 1;
    static const float dummy_f = 0.0f;
    attn_opts o = {
        .weights = r->weights, .top_k = r->top_k, .has_scale = r->has_scale, .scale = r->scale};
    attn_masks m = {.causal = r->causal,
                    .key_mask = r->has_km ? &dummy_u8 : NULL,
                    .key_mask_n = r->km_n,
                    .attn_mask = r->has_am ? &dummy_u8 : NULL,
                    .attn_mask_n = r->am_n,
                    .attn_mask_h = r->am_h,
                    .attn_bias = r->has_ab ? &dummy_f : NULL,
                    .attn_bias_n = r->ab_n,
                    .attn_bias_h = r->ab_h};
    attn_plan p0;
    if (plan(r, &p0, &o, &m, err))
        goto done;
    size_t maps = r->weights == ATTN_WEIGHTS_MEAN ? 1 : r->n_heads ? r->n_heads : r->h;
    size_t wcount = 0;
    bool wok = r->weights == ATTN_WEIGHTS_NONE ||
               (apip_mul(r->n, maps, &wcount) && apip_mul(wcount, r->l, &wcount) &&
                apip_mul(wcount, r->top_k ? r->top_k : r->s, &wcount));
    layout a = {0, wok};
    take(&a, 1, sizeof(api_job));
    size_t at_x[3], at_p[APIP_P_COUNT] = {0}, at_kl = 0, at_km = 0, at_am = 0, at_ab = 0,
                    at_heads = 0;
    for (int i = 0; i < 3; i++)
        at_x[i] = i == 0 || (i == 1 && r->has_k) || (i == 2 && r->has_v)
                      ? take(&a, r->x[i].count, sizeof(float))
                      : 0;
    size_t at_init_in = 0, at_init_out = 0;
    if (r->init) {
        at_init_in = take(&a, 3 * r->e, r->e * sizeof(float));
        at_init_out = take(&a, r->e, r->e * sizeof(float));
    }
    for (int i = 0; i < APIP_P_COUNT; i++)
        if (r->has_p[i])
            at_p[i] = take(&a, r->p[i].count, sizeof(float));
    if (r->n_key_lengths)
        at_kl = take(&a, r->n_key_lengths, sizeof(int32_t));
    if (r->has_km)
        at_km = take(&a, r->km.count, 1);
    if (r->has_am)
        at_am = take(&a, r->am.count, 1);
    if (r->has_ab)
        at_ab = take(&a, r->ab.count, sizeof(float));
    if (r->n_heads)
        at_heads = take(&a, r->n_heads, sizeof(uint32_t));
    size_t at_ids = r->words ? take(&a, r->l, sizeof(uint32_t)) : 0;
    size_t at_ws = take(&a, p0.workspace_bytes, 1);
    size_t at_out = take(&a, p0.out_elems, sizeof(float));
    size_t at_w = r->weights ? take(&a, wcount, sizeof(float)) : 0;
    size_t at_ix = r->top_k ? take(&a, wcount, sizeof(int32_t)) : 0;

    /* The response's shapes, and the most bytes it can take: it counts against the limit with
     * the arena, since it is held until the client has read it. */
    apip_resp_shape rs = {.op = op, .base64 = r->base64, .indices = r->top_k != 0};
    size_t lead[2], nlead = 0;
    if (op == API_OP_SDPA) {
        for (size_t i = 0; i + 2 < r->rank; i++)
            lead[nlead++] = r->x[0].dims[i];
    } else if (r->rank == 3) {
        lead[nlead++] = r->n;
    }
    for (size_t i = 0; i < nlead; i++)
        rs.out_dims[i] = lead[i];
    rs.out_rank = nlead + 2;
    rs.out_dims[nlead] = r->l;
    rs.out_dims[nlead + 1] = op == API_OP_SDPA ? r->dv : r->e;
    if (r->weights) {
        for (size_t i = 0; i < nlead; i++)
            rs.w_dims[rs.w_rank++] = lead[i];
        if (op == API_OP_ATTENTION && r->weights == ATTN_WEIGHTS_PER_HEAD)
            rs.w_dims[rs.w_rank++] = maps;
        rs.w_dims[rs.w_rank++] = r->l;
        rs.w_dims[rs.w_rank++] = r->top_k ? r->top_k : r->s;
    }
    bool words_fit = true;
    if (op == API_OP_ATTENTION && r->model) {
        rs.model_len = strlen(apip_model_name(r->model));
        words_fit = apip_words_json_bound(r->model, r->words ? r->l : 0, &rs.words_bytes);
    }
    size_t resp = 0, total = 0, at_reply = 0, reply_place = 0;
    bool resp_fits = true;
    if (given && given->reply) { /* the response of another protocol */
        if (apip_v2_reply_plan(given->reply, &rs, &resp, &reply_place, err))
            goto done;
        at_reply = take(&a, reply_place, 1);
    } else {
        resp_fits = apip_response_bound(&rs, &resp);
    }
    if (!a.ok || !words_fit || !resp_fits || !apip_add(a.total, resp, &total)) {
        api_fail(err, 413, "job_too_large", NULL,
                 "the job's working memory and response do not fit in size_t; the "
                 "max_job_bytes limit is %zu bytes",
                 lim->max_job_bytes);
        goto done;
    }
    if (total > lim->max_job_bytes) {
        api_fail(err, 413, "job_too_large", NULL,
                 "the job needs %zu bytes (%.1f MiB): %zu of working memory and up to %zu for "
                 "its response, over the max_job_bytes limit of %zu bytes (%.1f MiB)%s",
                 total, (double)total / 1048576.0, a.total, resp, lim->max_job_bytes,
                 (double)lim->max_job_bytes / 1048576.0,
                 !r->base64 && !given && resp > a.total
                     ? "; \"encoding\": \"base64\" makes the response about 3 times smaller"
                     : "");
        goto done;
    }

    /* One arena; the job record is at its start. From the memory cache it may be a block a
     * little larger than asked, but never past what the limit leaves beside the response. */
    size_t cap = 0;
    char *arena = api_mem_alloc(lim->mem, a.total, lim->max_job_bytes - resp, &cap);
    if (!arena) {
        api_fail(err, 500, "out_of_memory", NULL, "out of memory allocating %zu bytes for the job",
                 a.total);
        goto done;
    }
    job = (api_job *)(void *)arena;
    memset(job, 0, sizeof *job);
    job->op = op;
    job->arena_bytes = cap;
    job->mem = lim->mem;
    job->response_bytes = resp;
    job->base64 = r->base64;
    if (given && given->reply)
        job->v2 = apip_v2_reply_place(given->reply, arena + at_reply);

    float *x[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        if (i > 0 && !(i == 1 ? r->has_k : r->has_v))
            continue;
        x[i] = (float *)(void *)(arena + at_x[i]);
        if (i == 0 && r->words) {
            uint32_t *ids = (uint32_t *)(void *)(arena + at_ids);
            apip_words_embed(r->model, r->f[APIP_F_TOKENS], r->f[APIP_F_TEXT], ids, x[0]);
            job->tokens = ids;
            continue;
        }
        if (apip_tensor_read(&r->x[i], APIP_TENSOR_FLOAT, x[i], err))
            goto fail;
    }
    job->q = x[0];
    job->k = x[1] ? x[1] : job->q; /* the same pointer: libattn shares the projection GEMM */
    job->v = x[2] ? x[2] : job->k;

    if (op == API_OP_ATTENTION && r->model) {
        job->params = *apip_model_params(r->model);
        job->model_name = apip_model_name(r->model);
        job->model = r->model;
    } else if (op == API_OP_ATTENTION && r->init) {
        /* The weights are made when the job first runs (api_job_run, api_jobs_run): a batch
         * of jobs on the same init makes them once. */
        float *in = (float *)(void *)(arena + at_init_in);
        float *out = (float *)(void *)(arena + at_init_out);
        job->params = (attn_mha_params){.in_proj_weight = in, .out_proj_weight = out};
        job->init = r->init;
        job->seed = r->seed;
    } else if (op == API_OP_ATTENTION) {
        const float *pp[APIP_P_COUNT] = {NULL};
        for (int i = 0; i < APIP_P_COUNT; i++) {
            if (!r->has_p[i])
                continue;
            float *dst = (float *)(void *)(arena + at_p[i]);
            if (apip_tensor_read(&r->p[i], APIP_TENSOR_FLOAT, dst, err))
                goto fail;
            pp[i] = dst;
        }
        job->params = (attn_mha_params){.in_proj_weight = pp[APIP_P_IN_W],
                                        .in_proj_bias = pp[APIP_P_IN_B],
                                        .out_proj_weight = pp[APIP_P_OUT_W],
                                        .out_proj_bias = pp[APIP_P_OUT_B],
                                        .q_proj_weight = pp[APIP_P_Q_W],
                                        .k_proj_weight = pp[APIP_P_K_W],
                                        .v_proj_weight = pp[APIP_P_V_W]};
    }

    job->params_ready = job->init == APIP_INIT_NONE;

    /* Masks and the head subset. */
    job->masks = m;
    if (r->n_key_lengths) {
        int32_t *kl = (int32_t *)(void *)(arena + at_kl);
        const char *it = r->f[APIP_F_KEY_LENGTHS], *el = NULL;
        if (given && given->key_lengths) /* raw int32, checked */
            for (size_t i = 0; i < r->n; i++) {
                const uint8_t *b = given->key_lengths + 4 * i;
                kl[i] = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                                  (uint32_t)b[3] << 24);
            }
        else
            for (size_t i = 0; apip_jv_arr_next(&it, &el); i++)
                kl[i] = (int32_t)apip_req_int(el);
        job->masks.key_lengths = kl;
    }
    if (r->has_km) {
        uint8_t *km = (uint8_t *)(arena + at_km);
        if (apip_tensor_read(&r->km, APIP_TENSOR_MASK, km, err))
            goto fail;
        job->masks.key_mask = km;
    }
    if (r->has_am) {
        uint8_t *am = (uint8_t *)(arena + at_am);
        if (apip_tensor_read(&r->am, APIP_TENSOR_MASK, am, err))
            goto fail;
        job->masks.attn_mask = am;
    }
    if (r->has_ab) {
        float *ab = (float *)(void *)(arena + at_ab);
        if (apip_tensor_read(&r->ab, APIP_TENSOR_BIAS, ab, err))
            goto fail;
        job->masks.attn_bias = ab;
    }
    job->opts = o;
    if (r->n_heads) {
        uint32_t *hs = (uint32_t *)(void *)(arena + at_heads);
        const char *it = r->f[APIP_F_HEADS], *el = NULL;
        for (size_t i = 0; apip_req_heads_next(r, &it, &el) > 0; i++)
            hs[i] = (uint32_t)apip_req_int(el);
        job->opts.heads = hs;
        job->opts.n_heads = r->n_heads;
    }

    /* The real plan, with the decoded masks; it must fit the room set aside. */
    if (plan(r, &job->plan, &job->opts, &job->masks, err))
        goto fail;
    if (job->plan.workspace_bytes > p0.workspace_bytes || job->plan.out_elems != p0.out_elems ||
        job->plan.weights_elems != (r->weights ? wcount : 0)) {
        api_fail(err, 500, "internal", NULL, "the job's plan changed size after decoding");
        goto fail;
    }
    job->workspace = arena + at_ws;
    job->out = (float *)(void *)(arena + at_out);
    if (r->weights)
        job->wout.values = (float *)(void *)(arena + at_w);
    if (r->top_k)
        job->wout.indices = (int32_t *)(void *)(arena + at_ix);

    /* Shapes of the response. */
    job->n = r->n;
    job->l = r->l;
    job->s = r->s;
    job->e = r->e;
    job->h = r->h;
    job->out_rank = rs.out_rank;
    memcpy(job->out_dims, rs.out_dims, sizeof job->out_dims);
    job->w_rank = rs.w_rank;
    memcpy(job->w_dims, rs.w_dims, sizeof job->w_dims);
    goto done;
fail:
    api_mem_free(job);
    job = NULL;
done:
    return job;
}
