/* request.c - turns the body of POST /v1/attention or /v1/sdpa into a validated job.
 *
 * Stages: check the JSON; read every field into the request record (fields.c: shapes and
 * values checked, nothing allocated); plan the job with libattn from its shapes and options,
 * once; lay out the arena and the output shapes, and refuse a job whose arena and response bound
 * exceed max_job_bytes; allocate the one arena; decode every tensor into it (rows, types and
 * values are checked while copying); bind the plan to the decoded masks and head subset. The v2
 * codec (v2.c) enters at apip_job_parse_given, after the JSON check, and goes through the same
 * stages.
 *
 * Legend: N batch, L query length, S key length, E embedding width, H heads, kdim/vdim key and
 * value widths, D/Dv the SDPA query-key and value widths, K the top-k count. */
#include <string.h>

#include "v1.h"
#include "request.h"

#define ARENA_ALIGN 64 /* what api_mem_alloc gives */

api_limits api_limits_default(void) {
    return (api_limits){.max_job_bytes = (size_t)1 << 30,
                        .max_dim = 65536,
                        .max_heads = 256,
                        .nslots = 1,
                        .max_depth = APIP_JSON_MAX_DEPTH};
}

/* ---- The plan ----------------------------------------------------------------------------- */

/* The masks of r: causal, and the masks it has by their extents alone (shape-only, every pointer
 * NULL; decode_masks points them at the decoded arrays). */
static attn_masks req_masks(const apip_req *r) {
    /* a float key_padding_mask is libattn's key_bias, a bool one its key_mask */
    bool km = r->has_km && !r->km_float, kb = r->has_km && r->km_float;
    return (attn_masks){.causal = r->causal,
                        .key_mask_n = km ? r->km_n : 0,
                        .key_bias_n = kb ? r->km_n : 0,
                        .attn_mask_n = r->am_n,
                        .attn_mask_h = r->am_h,
                        .attn_bias_n = r->ab_n,
                        .attn_bias_h = r->ab_h,
                        .shape_only = (r->n_key_lengths ? ATTN_MASK_KEY_LENGTHS : 0u) |
                                      (km ? ATTN_MASK_KEY_MASK : 0u) |
                                      (kb ? ATTN_MASK_KEY_BIAS : 0u) |
                                      (r->has_am ? ATTN_MASK_ATTN_MASK : 0u) |
                                      (r->has_ab ? ATTN_MASK_ATTN_BIAS : 0u)};
}

/* The options of r, its head subset by its size alone (decode_masks points opts.heads at it). */
static attn_opts req_opts(const apip_req *r) {
    return (attn_opts){.weights = r->weights,
                       .n_heads = r->n_heads,
                       .top_k = r->top_k,
                       .has_scale = r->has_scale,
                       .scale = r->scale};
}

static void fill_dims(const apip_req *r, attn_mha_dims *md, attn_sdpa_dims *sd) {
    *md = (attn_mha_dims){r->n, r->l, r->s, r->e, r->h, r->kdim, r->vdim, r->bias_kv, r->zero_attn};
    *sd = (attn_sdpa_dims){r->n, r->h, r->l, r->s, r->d, r->dv, r->hkv};
}

/* libattn's status rc and error ae of planning or binding as the api's error: 413 job_too_large
 * for a job too large, 400 invalid_field for a bad field, 500 internal otherwise. Returns -1. */
static int plan_failed(int rc, const attn_error *ae, api_error *err) {
    if (rc == ATTN_ERR_OVERFLOW || rc == ATTN_ERR_LIMIT)
        return api_fail(err, 413, "job_too_large", NULL, "the job is too large: %s", ae->msg);
    if (rc == ATTN_ERR_SHAPE || rc == ATTN_ERR_ARG)
        return api_fail(err, 400, "invalid_field", NULL, "%s", ae->msg);
    return api_fail(err, 500, "internal", NULL, "planning failed: %s", ae->msg);
}

/* The job's plan, made once from r's shapes and options before the arena exists: its masks and
 * head subset are present by their extents and size alone, so it has the job's sizes (workspace,
 * outputs, weights); bind_job gives it their data once decoded. A job on a model of layers is
 * planned as a stack into *sp, and *p is then its plan of a layer that keeps its weights. 0, or
 * -1 with r->err as plan_failed says. */
static int plan_shapes(const apip_req *r, attn_plan *p, attn_stack_plan *sp) {
    attn_mha_dims md;
    attn_sdpa_dims sd;
    fill_dims(r, &md, &sd);
    attn_opts o = req_opts(r);
    attn_masks m = req_masks(r);
    attn_error ae = {0};
    int rc;
    if (r->stack) {
        attn_stack_dims d = {r->n, r->l, r->e, r->h, r->stack->layers, r->stack->vocab};
        rc = attn_mha_stack_plan(sp, &d, &o, &m, r->lim->nslots, &ae);
        *p = sp->kept;
    } else {
        rc = r->op == API_OP_SDPA ? attn_sdpa_plan(p, &sd, &o, &m, r->lim->nslots, &ae)
                                  : attn_mha_plan(p, &md, &o, &m, r->lim->nslots, &ae);
    }
    return rc == ATTN_OK ? 0 : plan_failed(rc, &ae, r->err);
}

/* A decode session's append (r->given->session): the step's plan from the session's widths and
 * cap and the rows it brings, without the head subset's indices (its sizes do not depend on
 * them; bind_job plans it again with them), into *dp; and into *p the sizes of the step's
 * workspace and outputs, as a job's plan has them for lay_out, and its FLOPs. 0, or -1 with
 * r->err as plan_failed says. */
static int plan_append(const apip_req *r, attn_plan *p, attn_decode_plan *dp) {
    const apip_session *s = r->given->session;
    attn_decode_dims d = {.e = s->e,
                          .h = s->h,
                          .kdim = s->kdim,
                          .vdim = s->vdim,
                          .cap = s->cache.cap,
                          .max_rows = r->l};
    attn_opts o = req_opts(r);
    o.n_heads = 0;
    attn_error ae = {0};
    int rc = attn_mha_decode_plan(dp, &d, &o, r->lim->nslots, &ae);
    if (rc != ATTN_OK)
        return plan_failed(rc, &ae, r->err);
    size_t maps = r->weights == ATTN_WEIGHTS_MEAN ? 1 : r->n_heads ? r->n_heads : r->h;
    *p = (attn_plan){.workspace_bytes = dp->workspace_bytes,
                     .out_elems = r->l * s->e,
                     .weights_elems = r->weights ? maps * r->l * (r->top_k ? r->top_k : r->s) : 0,
                     .flops = attn_mha_decode_flops(&d, r->at, r->l)};
    p->index_elems = r->top_k ? p->weights_elems : 0;
    return 0;
}

/* ---- Output shapes ------------------------------------------------------------------------ */

/* What a model of layers adds to the shapes of rs (out_shapes made them for one layer): the
 * kept layers Ls in front of the weights and of the trace's tensors, the trace's residual and
 * attn_output (Ls, lead, L, E), and the predictions (lead, L, K). */
static void stack_shapes(const apip_req *r, const size_t *lead, size_t nlead, apip_resp_shape *rs) {
    rs->num_layers = r->stack->layers;
    rs->nkeep = r->n_keep;
    if (rs->w_rank) {
        memmove(rs->w_dims + 1, rs->w_dims, rs->w_rank * sizeof rs->w_dims[0]);
        rs->w_dims[0] = r->n_keep;
        rs->w_rank++;
    }
    if (rs->trace) {
        size_t *t[3] = {rs->tr_q, rs->tr_kv, rs->tr_maps};
        for (int i = 0; i < 3; i++) {
            memmove(t[i] + 1, t[i], rs->tr_rank * sizeof t[i][0]);
            t[i][0] = r->n_keep;
        }
        rs->tr_rank++;
        rs->tr_res[rs->tr_res_rank++] = r->n_keep;
        for (size_t i = 0; i < nlead; i++)
            rs->tr_res[rs->tr_res_rank++] = lead[i];
        rs->tr_res[rs->tr_res_rank++] = r->l;
        rs->tr_res[rs->tr_res_rank++] = r->e;
    }
    if (r->pred_k) {
        for (size_t i = 0; i < nlead; i++)
            rs->pred_dims[rs->pred_rank++] = lead[i];
        rs->pred_dims[rs->pred_rank++] = r->l;
        rs->pred_dims[rs->pred_rank++] = r->pred_k;
        rs->pred_token = r->stack->token_json;
    }
}

/* The shapes of a job's outputs, as its response reports them, and what else the response's
 * size depends on, into *rs: the output (.., L, E), or SDPA's (.., L, Dv), led by the query's
 * leading dimensions (attention: N when the query has it; SDPA: all of q's); the weights
 * (.., maps, L, K or S') with the same lead (maps only for attention's per-head weights; S' =
 * S + the keys appended after the projections); the
 * model's name and words for attention on a registry model. False when the bound of the words
 * does not fit in size_t (the caller refuses the job). */
static bool out_shapes(const apip_req *r, size_t maps, apip_resp_shape *rs) {
    *rs = (apip_resp_shape){
        .op = r->op, .base64 = r->base64, .omit = r->omit, .indices = r->top_k != 0};
    const size_t sx = r->s + r->kv_extra;
    size_t lead[2], nlead = 0;
    if (r->op == API_OP_SDPA) {
        for (size_t i = 0; i + 2 < r->rank; i++)
            lead[nlead++] = r->x[0].dims[i];
    } else if (r->rank == 3) {
        lead[nlead++] = r->n;
    }
    for (size_t i = 0; i < nlead; i++)
        rs->out_dims[i] = lead[i];
    rs->out_rank = nlead + 2;
    rs->out_dims[nlead] = r->l;
    rs->out_dims[nlead + 1] = r->op == API_OP_SDPA ? r->dv : r->e;
    if (r->seq_first) { /* (L, N, E); the weights keep (N, ..), as PyTorch returns them */
        rs->out_dims[0] = r->l;
        rs->out_dims[1] = r->n;
    }
    if (r->weights) {
        for (size_t i = 0; i < nlead; i++)
            rs->w_dims[rs->w_rank++] = lead[i];
        if (r->op == API_OP_ATTENTION && r->weights == ATTN_WEIGHTS_PER_HEAD)
            rs->w_dims[rs->w_rank++] = maps;
        rs->w_dims[rs->w_rank++] = r->l;
        rs->w_dims[rs->w_rank++] = r->top_k ? r->top_k : sx;
    }
    if (r->trace) {
        rs->trace = true;
        size_t dh = r->op == API_OP_SDPA ? 0 : r->e / r->h;
        for (size_t i = 0; i < nlead; i++)
            rs->tr_q[i] = rs->tr_kv[i] = rs->tr_maps[i] = lead[i];
        rs->tr_rank = nlead;
        if (r->op == API_OP_ATTENTION) {
            rs->tr_q[nlead] = rs->tr_kv[nlead] = rs->tr_maps[nlead] = r->h;
            rs->tr_rank++;
        }
        size_t t = rs->tr_rank;
        rs->tr_q[t] = r->l;
        rs->tr_q[t + 1] = dh;
        rs->tr_kv[t] = sx;
        rs->tr_kv[t + 1] = dh;
        rs->tr_maps[t] = r->l;
        rs->tr_maps[t + 1] = sx;
        rs->tr_rank += 2;
    }
    if (r->stack)
        stack_shapes(r, lead, nlead, rs);
    if (r->op == API_OP_ATTENTION && r->model) {
        rs->model_len = strlen(apip_model_name(r->model));
        return apip_words_json_bound(r->model, r->words ? r->l : 0, &rs->words_bytes);
    }
    return true;
}

/* ---- Arena layout ------------------------------------------------------------------------- */

/* The arena of a job: the offset of each part from its start (the job record is at 0), each at
 * a 64-byte boundary, and their total. A part the job does not have is at 0. */
typedef struct layout {
    size_t total;
    bool ok;                  /* false when a size overflowed size_t */
    size_t x[3];              /* query, key, value (or q, k, v): floats (x[i].count) */
    size_t init_in, init_out; /* params init: in_proj (3E, E) and out_proj (E, E) */
    size_t p[APIP_P_COUNT];   /* inline params: floats (p[i].count) */
    size_t kl;                /* key_lengths (N) int32 */
    size_t km, am, ab;        /* key_mask, attn_mask (bytes; a float key_padding_mask: floats),
                                 attn_bias (floats): their counts */
    size_t heads;             /* the head subset (n_heads) uint32 */
    size_t ids;               /* the words' token ids (L) uint32 */
    size_t ws;                /* libattn's workspace: workspace_bytes */
    size_t out, w, ix;        /* output, weights and top-k indices: the plan's elems of each */
    size_t reply;             /* another protocol's reply form (reply_ops->place's bytes) */
    size_t tq, tk, tv, th;    /* trace, attention: q and heads (N*L*E), k and v (N*S*E) */
    size_t seq;               /* batch_first false: the largest input, or the output (floats) */
    size_t dplan;             /* a session's append: its step's plan */
    size_t ts, tm, tw;        /* trace: scores, masked scores, weights (N*H*L*S each) */
    /* A model of layers: the kept layers' indices (Ls) uint32, the logits (N*L*V), the
     * predictions' ids, probabilities and logits (N*L*K each), the trace's residual and
     * attn_output (Ls*N*L*E each); its weights, indices and trace hold Ls layers. */
    size_t sj, keep, logits, pid, pprob, plogit, tres, tadd;
} layout;

/* Appends count items of size bytes at the next 64-byte boundary; returns their offset. */
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

/* Lays out the arena of a job of r: the job record, then what r decodes (inputs, params or room
 * for params init, masks, the head subset, the words' ids), then libattn's workspace and
 * outputs (output, weights, top-k indices) as the job's plan p sizes them; a model of layers'
 * as its stack's plan sp does, with Ls layers kept. */
static void lay_out(const apip_req *r, const attn_plan *p, const attn_stack_plan *sp, layout *a) {
    const size_t ls = r->stack ? r->n_keep : 1; /* the layers whose weights and trace are kept */
    take(a, 1, sizeof(api_job));
    if (r->given && r->given->session)
        a->dplan = take(a, 1, sizeof(attn_decode_plan));
    for (int i = 0; i < 3; i++)
        a->x[i] = i == 0 || (i == 1 && r->has_k) || (i == 2 && r->has_v)
                      ? take(a, r->x[i].count, sizeof(float))
                      : 0;
    if (r->init) {
        a->init_in = take(a, 3 * r->e, r->e * sizeof(float));
        a->init_out = take(a, r->e, r->e * sizeof(float));
    }
    for (int i = 0; i < APIP_P_COUNT; i++)
        if (r->has_p[i])
            a->p[i] = take(a, r->p[i].count, sizeof(float));
    if (r->n_key_lengths)
        a->kl = take(a, r->n_key_lengths, sizeof(int32_t));
    if (r->has_km)
        a->km = take(a, r->km.count, r->km_float ? sizeof(float) : 1);
    if (r->has_am)
        a->am = take(a, r->am.count, 1);
    if (r->has_ab)
        a->ab = take(a, r->ab.count, sizeof(float));
    if (r->n_heads)
        a->heads = take(a, r->n_heads, sizeof(uint32_t));
    a->ids = r->words ? take(a, r->l, sizeof(uint32_t)) : 0;
    a->ws = take(a, r->stack ? sp->workspace_bytes : p->workspace_bytes, 1);
    a->out = take(a, p->out_elems, sizeof(float));
    a->w = r->weights ? take(a, ls * p->weights_elems, sizeof(float)) : 0;
    a->ix = r->top_k ? take(a, ls * p->index_elems, sizeof(int32_t)) : 0;
    if (r->stack) { /* ls <= APIP_MAX_LAYERS, and each layer's sizes were checked by the plan */
        size_t nl = r->n * r->l;
        a->sj = take(a, 1, sizeof(apip_stack_job));
        a->keep = take(a, r->n_keep ? r->n_keep : 1, sizeof(uint32_t));
        a->logits = take(a, sp->logits_elems, sizeof(float));
        a->pid = take(a, nl * r->pred_k, sizeof(int32_t));
        a->pprob = take(a, nl * r->pred_k, sizeof(float));
        a->plogit = take(a, nl * r->pred_k, sizeof(float));
    }
    if (r->seq_first) { /* inputs are read here, then moved; the output is moved here */
        size_t most = p->out_elems;
        for (int i = 0; i < 3; i++)
            most = r->x[i].count > most ? r->x[i].count : most;
        a->seq = take(a, most, sizeof(float));
    }
    if (r->trace) { /* trace_field (and apip_fields_stack, with ls) bounded each of these */
        const size_t sx = r->s + r->kv_extra;
        size_t maps = ls * r->n * r->h * r->l * sx;
        if (r->op == API_OP_ATTENTION) {
            a->tq = take(a, ls * r->n * r->l * r->e, sizeof(float));
            a->tk = take(a, ls * r->n * sx * r->e, sizeof(float));
            a->tv = take(a, ls * r->n * sx * r->e, sizeof(float));
            a->th = take(a, ls * r->n * r->l * r->e, sizeof(float));
        }
        a->ts = take(a, maps, sizeof(float));
        a->tm = take(a, maps, sizeof(float));
        a->tw = take(a, maps, sizeof(float));
        if (r->stack) {
            a->tres = take(a, ls * r->n * r->l * r->e, sizeof(float));
            a->tadd = take(a, ls * r->n * r->l * r->e, sizeof(float));
        }
    }
}

/* The most bytes of the job's response, into *resp: v1's bound, or the reply form given->reply
 * settles (its copy then gets a place in the arena). Then the arena and the response together
 * against max_job_bytes: they count together, since the response is held until the client has
 * read it. 0, or -1 with r->err: the reply form's error, or 413 job_too_large. */
static int fit_limit(const apip_req *r, apip_resp_shape *rs, bool words_fit, layout *a,
                     size_t *resp) {
    size_t total = 0, reply_place = 0;
    bool resp_fits = true;
    if (r->given && r->given->reply) { /* the response of another protocol */
        if (r->given->reply_ops->plan(r->given->reply, rs, resp, &reply_place, r->err))
            return -1;
        a->reply = take(a, reply_place, 1);
    } else {
        resp_fits = apip_response_bound(rs, resp);
    }
    if (!a->ok || !words_fit || !resp_fits || !apip_add(a->total, *resp, &total))
        return api_fail(r->err, 413, "job_too_large", NULL,
                        "the job's working memory and response do not fit in size_t; the "
                        "max_job_bytes limit is %zu bytes",
                        r->lim->max_job_bytes);
    if (total > r->lim->max_job_bytes)
        return api_fail(r->err, 413, "job_too_large", NULL,
                        "the job needs %zu bytes (%.1f MiB): %zu of working memory and up to %zu "
                        "for its response, over the max_job_bytes limit of %zu bytes (%.1f MiB)%s",
                        total, (double)total / 1048576.0, a->total, *resp, r->lim->max_job_bytes,
                        (double)r->lim->max_job_bytes / 1048576.0,
                        !r->base64 && !r->given && *resp > a->total
                            ? "; \"encoding\": \"base64\" makes the response about 3 times smaller"
                            : "");
    return 0;
}

/* ---- Decoding ----------------------------------------------------------------------------- */

/* Decodes the inputs into the arena (query, key and value; or the words' embeddings and ids)
 * and points the job at them; a seeded input gets its place and its seed, and is made when the
 * job first runs. 0, or -1 with r->err. */
static int decode_inputs(const apip_req *r, const layout *a, api_job *job, char *arena) {
    float *x[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        if (i > 0 && !(i == 1 ? r->has_k : r->has_v))
            continue;
        x[i] = (float *)(void *)(arena + a->x[i]);
        if (i == 0 && r->words) {
            uint32_t *ids = (uint32_t *)(void *)(arena + a->ids);
            apip_words_embed_at(r->model, r->f[APIP_F_TOKENS], r->f[APIP_F_TEXT], r->add_special,
                                r->at, ids, x[0]);
            job->tokens = ids;
            continue;
        }
        if (r->x[i].seeded) { /* made by the job's first run */
            const apip_tensor_in *t = &r->x[i];
            job->seeded[i] = (apip_seeded){.dst = x[i], .seed = t->seed, .count = t->count};
            if (r->seq_first) { /* sent (T, N, W), stored (N, T, W) */
                job->seeded[i].t = t->dims[0];
                job->seeded[i].n = t->dims[1];
                job->seeded[i].w = t->dims[2];
            }
            job->inputs_ready = false;
            continue;
        }
        if (!r->seq_first) {
            if (apip_tensor_read(&r->x[i], APIP_TENSOR_FLOAT, x[i], r->err))
                return -1;
            continue;
        }
        /* batch_first false: (T, N, W) as sent, read into the scratch, moved to (N, T, W). */
        const apip_tensor_in *t = &r->x[i];
        float *seq = (float *)(void *)(arena + a->seq);
        if (apip_tensor_read(t, APIP_TENSOR_FLOAT, seq, r->err))
            return -1;
        size_t tn = t->dims[0], n = t->dims[1], w = t->dims[2];
        for (size_t b = 0; b < n; b++)
            for (size_t j = 0; j < tn; j++)
                memcpy(x[i] + (b * tn + j) * w, seq + (j * n + b) * w, w * sizeof(float));
    }
    if (r->seq_first)
        job->out_seq = (float *)(void *)(arena + a->seq);
    job->q = x[0];
    job->k = x[1] ? x[1] : job->q; /* the same pointer: libattn shares the projection GEMM */
    job->v = x[2] ? x[2] : job->k;
    return 0;
}

/* The job's parameters: the registry model's, room for params init, or the inline tensors
 * decoded into the arena. 0, or -1 with r->err. */
static int decode_params(const apip_req *r, const layout *a, api_job *job, char *arena) {
    if (r->op == API_OP_ATTENTION && r->model) {
        job->params = *apip_model_params(r->model);
        job->model_name = apip_model_name(r->model);
        job->model = r->model;
    } else if (r->op == API_OP_ATTENTION && r->init) {
        /* The weights are made when the job first runs (api_job_run, api_jobs_run): a batch
         * of jobs on the same init makes them once. */
        float *in = (float *)(void *)(arena + a->init_in);
        float *out = (float *)(void *)(arena + a->init_out);
        job->params = (attn_mha_params){.in_proj_weight = in, .out_proj_weight = out};
        job->init = r->init;
        job->seed = r->seed;
    } else if (r->op == API_OP_ATTENTION) {
        const float *pp[APIP_P_COUNT] = {NULL};
        for (int i = 0; i < APIP_P_COUNT; i++) {
            if (!r->has_p[i])
                continue;
            float *dst = (float *)(void *)(arena + a->p[i]);
            if (apip_tensor_read(&r->p[i], APIP_TENSOR_FLOAT, dst, r->err))
                return -1;
            pp[i] = dst;
        }
        job->params = (attn_mha_params){.in_proj_weight = pp[APIP_P_IN_W],
                                        .in_proj_bias = pp[APIP_P_IN_B],
                                        .out_proj_weight = pp[APIP_P_OUT_W],
                                        .out_proj_bias = pp[APIP_P_OUT_B],
                                        .q_proj_weight = pp[APIP_P_Q_W],
                                        .k_proj_weight = pp[APIP_P_K_W],
                                        .v_proj_weight = pp[APIP_P_V_W],
                                        .bias_k = pp[APIP_P_BIAS_K], /* (1, 1, E): E floats */
                                        .bias_v = pp[APIP_P_BIAS_V]};
    }
    job->params_ready = job->init == APIP_INIT_NONE;
    return 0;
}

/* The masks and the head subset decoded into the arena, job->masks and job->opts pointing at
 * them. 0, or -1 with r->err. */
static int decode_masks(apip_req *r, const layout *a, api_job *job, char *arena) {
    job->masks = req_masks(r);
    if (r->n_key_lengths) {
        int32_t *kl = (int32_t *)(void *)(arena + a->kl);
        const char *it = r->f[APIP_F_KEY_LENGTHS], *el = NULL;
        if (r->given && r->given->key_lengths) /* raw int32, checked */
            for (size_t i = 0; i < r->n; i++) {
                const uint8_t *b = r->given->key_lengths + 4 * i;
                kl[i] = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                                  (uint32_t)b[3] << 24);
            }
        else
            for (size_t i = 0; apip_jv_arr_next(&it, &el); i++)
                kl[i] = (int32_t)apip_req_int(el);
        job->masks.key_lengths = kl;
    }
    if (r->has_km && r->km_float) { /* PyTorch's float key_padding_mask: added as it is */
        float *kb = (float *)(void *)(arena + a->km);
        if (apip_tensor_read(&r->km, APIP_TENSOR_BIAS, kb, r->err))
            return -1;
        job->masks.key_bias = kb;
    } else if (r->has_km) {
        uint8_t *km = (uint8_t *)(arena + a->km);
        if (apip_tensor_read(&r->km, APIP_TENSOR_MASK, km, r->err))
            return -1;
        for (size_t i = 0; r->km_torch && i < r->km.count; i++)
            km[i] = !km[i]; /* PyTorch's true = ignore, into 1 = a real token */
        job->masks.key_mask = km;
    }
    if (r->has_am) {
        uint8_t *am = (uint8_t *)(arena + a->am);
        if (apip_tensor_read(&r->am, APIP_TENSOR_MASK, am, r->err))
            return -1;
        for (size_t i = 0; r->am_torch && i < r->am.count; i++)
            am[i] = !am[i]; /* PyTorch's true = blocked, into 1 = may attend */
        job->masks.attn_mask = am;
    }
    if (r->has_ab) {
        float *ab = (float *)(void *)(arena + a->ab);
        if (apip_tensor_read(&r->ab, APIP_TENSOR_BIAS, ab, r->err))
            return -1;
        job->masks.attn_bias = ab;
    }
    job->opts = req_opts(r);
    if (r->n_heads) {
        uint32_t *hs = (uint32_t *)(void *)(arena + a->heads);
        const char *it = r->f[APIP_F_HEADS], *el = NULL;
        for (size_t i = 0; apip_req_heads_next(r, &it, &el) > 0; i++)
            hs[i] = (uint32_t)apip_req_int(el);
        job->opts.heads = hs;
    }
    return 0;
}

/* A job on a model of layers: the layers it keeps (the "layers" field's, or every one, in
 * order), its logits, predictions and the trace's residual and attn_output in the arena, and
 * their shapes as the response reports them (rs). */
static void bind_stack(const apip_req *r, const apip_resp_shape *rs, const layout *a, api_job *job,
                       char *arena) {
    apip_stack_job *sj = job->sj;
    uint32_t *keep = (uint32_t *)(void *)(arena + a->keep);
    const char *it = r->f[APIP_F_LAYERS], *el = NULL;
    for (size_t i = 0; i < r->n_keep; i++)
        keep[i] = it && apip_jv_arr_next(&it, &el) ? (uint32_t)apip_req_int(el) : (uint32_t)i;
    sj->keep = keep;
    sj->nkeep = r->n_keep;
    sj->logits = sj->plan.logits_elems ? (float *)(void *)(arena + a->logits) : NULL;
    sj->top_k = r->pred_k;
    if (r->pred_k) {
        sj->pred_ids = (int32_t *)(void *)(arena + a->pid);
        sj->pred_probs = (float *)(void *)(arena + a->pprob);
        sj->pred_logits = (float *)(void *)(arena + a->plogit);
        sj->pred_rank = rs->pred_rank;
        memcpy(sj->pred_dims, rs->pred_dims, sizeof sj->pred_dims);
    }
    memcpy(sj->w_dims, rs->w_dims, sizeof sj->w_dims);
    if (r->trace) {
        sj->residual = (float *)(void *)(arena + a->tres);
        sj->attn_out = (float *)(void *)(arena + a->tadd);
        memcpy(sj->tr_q, rs->tr_q, sizeof sj->tr_q);
        memcpy(sj->tr_kv, rs->tr_kv, sizeof sj->tr_kv);
        memcpy(sj->tr_maps, rs->tr_maps, sizeof sj->tr_maps);
        sj->tr_res_rank = rs->tr_res_rank;
        memcpy(sj->tr_res, rs->tr_res, sizeof sj->tr_res);
    }
}

/* The job's plan (job->plan, made by plan_shapes) bound to its decoded masks and head subset:
 * it checks their values and counts the FLOPs with them, and keeps the sizes the arena was laid
 * out with. Then the job's workspace and outputs in the arena, and the shapes its response
 * reports (rs). 0, or -1 with r->err as plan_failed says. */
static int bind_job(const apip_req *r, const apip_resp_shape *rs, const layout *a, api_job *job,
                    char *arena) {
    attn_error ae = {0};
    int rc = ATTN_OK;
    if (r->given && r->given->session) { /* the step planned again, with the subset's indices */
        attn_decode_dims d = job->dplan->d;
        rc = attn_mha_decode_plan(job->dplan, &d, &job->opts, r->lim->nslots, &ae);
    } else if (job->sj) {
        rc = attn_mha_stack_bind(&job->sj->plan, &job->opts, &job->masks, &ae);
    } else {
        rc = attn_plan_bind(&job->plan, &job->opts, &job->masks, &ae);
    }
    if (rc != ATTN_OK)
        return plan_failed(rc, &ae, r->err);
    if (job->sj) {
        job->plan = job->sj->plan.kept;
        bind_stack(r, rs, a, job, arena);
    }
    job->workspace = arena + a->ws;
    job->out = (float *)(void *)(arena + a->out);
    if (r->weights)
        job->wout.values = (float *)(void *)(arena + a->w);
    if (r->top_k)
        job->wout.indices = (int32_t *)(void *)(arena + a->ix);
    job->n = r->n;
    job->l = r->l;
    job->s = r->s;
    job->e = r->e;
    job->h = r->h;
    job->omit = rs->omit;
    job->out_rank = rs->out_rank;
    memcpy(job->out_dims, rs->out_dims, sizeof job->out_dims);
    job->w_rank = rs->w_rank;
    memcpy(job->w_dims, rs->w_dims, sizeof job->w_dims);
    if (r->trace) {
        job->traced = true;
        if (r->op == API_OP_ATTENTION)
            job->trace = (attn_trace){.q = (float *)(void *)(arena + a->tq),
                                      .k = (float *)(void *)(arena + a->tk),
                                      .v = (float *)(void *)(arena + a->tv),
                                      .heads = (float *)(void *)(arena + a->th)};
        job->trace.scores = (float *)(void *)(arena + a->ts);
        job->trace.masked = (float *)(void *)(arena + a->tm);
        job->trace.weights = (float *)(void *)(arena + a->tw);
        job->tr_rank = rs->tr_rank;
        memcpy(job->tr_q, rs->tr_q, sizeof job->tr_q);
        memcpy(job->tr_kv, rs->tr_kv, sizeof job->tr_kv);
        memcpy(job->tr_maps, rs->tr_maps, sizeof job->tr_maps);
    }
    return 0;
}

/* ---- Jobs --------------------------------------------------------------------------------- */

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
    r->op = op;
    r->lim = lim;
    r->err = err;
    r->given = given;
    if (apip_req_read(r, root, models))
        return NULL;

    /* The plan from the shapes, the arena laid out with its sizes, the response's shapes and
     * bound, all of it checked against the limit before anything is allocated. A session's
     * append plans its step instead; its first append makes a params.init session's weights. */
    attn_plan plan;
    attn_stack_plan splan = {0};
    attn_decode_plan dplan = {0};
    apip_session *session = given ? given->session : NULL;
    if (session ? plan_append(r, &plan, &dplan) : plan_shapes(r, &plan, &splan))
        return NULL;
    double init_flops = apip_init_flops(r->init, r->e), seeded_flops = 0;
    if (session && !session->params_ready)
        init_flops = apip_init_flops(session->init, session->e);
    for (int i = 0; i < 3; i++)
        seeded_flops += r->x[i].seeded ? (double)r->x[i].count * APIP_SEEDED_FLOP : 0.0;
    double flops = (r->stack ? splan.flops : plan.flops) + init_flops + seeded_flops;
    if (lim->max_job_flops > 0 && flops > lim->max_job_flops) {
        api_fail(err, 413, "job_too_large", NULL,
                 "the job takes %.4g FLOP (usage.flops%s%s), over the max_job_flops limit of "
                 "%.4g; send fewer or shorter sequences",
                 flops, init_flops > 0 ? ", making params.init weights included" : "",
                 seeded_flops > 0 ? ", making the seeded inputs included" : "", lim->max_job_flops);
        return NULL;
    }
    size_t maps = r->weights == ATTN_WEIGHTS_MEAN ? 1 : r->n_heads ? r->n_heads : r->h;
    size_t resp = 0;
    layout a = {.ok = true};
    lay_out(r, &plan, &splan, &a);
    apip_resp_shape rs;
    bool words_fit = out_shapes(r, maps, &rs);
    rs.session = session != NULL;
    if (fit_limit(r, &rs, words_fit, &a, &resp))
        return NULL;

    /* One arena; the job record is at its start. From the memory cache it may be a block a
     * little larger than asked, but never past what the limit leaves beside the response. */
    size_t cap = 0;
    bool over = false;
    char *arena = api_mem_alloc_bounded(lim->mem, a.total, lim->max_job_bytes - resp, &cap, &over);
    if (!arena && over) {
        api_fail(err, 503, "memory_budget", NULL,
                 "the job's %zu bytes do not fit in the memory left for jobs now (the memory "
                 "budget); retry shortly",
                 a.total);
        return NULL;
    }
    if (!arena) {
        api_fail(err, 500, "out_of_memory", NULL, "out of memory allocating %zu bytes for the job",
                 a.total);
        return NULL;
    }
    api_job *job = (api_job *)(void *)arena;
    memset(job, 0, sizeof *job);
    job->op = op;
    job->plan = plan;
    if (r->stack) {
        job->sj = (apip_stack_job *)(void *)(arena + a.sj);
        *job->sj = (apip_stack_job){.stack = r->stack, .plan = splan};
    }
    job->init_flops = init_flops;
    job->seeded_flops = seeded_flops;
    job->inputs_ready = true; /* until decode_inputs places a seeded one */
    job->arena_bytes = cap;
    job->need_bytes = a.total;
    job->mem = lim->mem;
    job->response_bytes = resp;
    job->base64 = r->base64;
    if (given && given->reply) {
        job->reply = given->reply_ops->place(given->reply, arena + a.reply);
        job->reply_ops = given->reply_ops;
    }
    if (session) { /* the job holds the session from here on (bind_job plans its step) */
        job->dplan = (attn_decode_plan *)(void *)(arena + a.dplan);
        *job->dplan = dplan;
        job->session_end = given->session_end;
    }

    /* The tensors decoded into the arena, then the job's plan bound to its masks. */
    if (decode_inputs(r, &a, job, arena) || decode_params(r, &a, job, arena) ||
        decode_masks(r, &a, job, arena) || bind_job(r, &rs, &a, job, arena)) {
        api_mem_free(job); /* not api_job_destroy: the caller gives a session back */
        return NULL;
    }
    job->session = session;
    return job;
}
