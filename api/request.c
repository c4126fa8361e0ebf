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

/* ---- Fields ------------------------------------------------------------------------------- */

static const char *const attention_fields[APIP_F_COUNT] = {
    "query",  "key",           "value",    "model",     "params",    NULL,
    "causal", "key_lengths",   "key_mask", "attn_mask", "attn_bias", "need_weights",
    "heads",  "weights_top_k", "encoding", "tokens",    "text"};

static const char *const sdpa_fields[APIP_F_COUNT] = {
    "q",           "k",        "v",         NULL,        NULL,           "scale", "causal",
    "key_lengths", "key_mask", "attn_mask", "attn_bias", "need_weights", NULL,    "weights_top_k",
    "encoding",    NULL,       NULL};

static int bad(apip_req *r, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int bad(apip_req *r, const char *field, const char *fmt, ...) {
    char msg[sizeof r->err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return api_fail(r->err, 400, "invalid_field", field, "%s", msg);
}

static const char *endpoint(const apip_req *r) {
    return r->op == API_OP_SDPA ? "POST /v1/sdpa" : "POST /v1/attention";
}

/* Maps the root members to fields. */
static int map_fields(apip_req *r, const apip_json_root *root) {
    if (root->overflow)
        return api_fail(r->err, 400, "invalid_field", NULL,
                        "the request has more than %d fields; %s takes at most %d",
                        APIP_JSON_MAX_MEMBERS, endpoint(r), APIP_F_COUNT);
    bool seen[APIP_F_COUNT] = {false};
    for (size_t i = 0; i < root->n; i++) {
        const apip_json_member *m = &root->m[i];
        int which = -1;
        for (int j = 0; j < APIP_F_COUNT && which < 0; j++)
            if (r->names[j] && apip_jv_streq(m->key, r->names[j]))
                which = j;
        if (which < 0) {
            char k[64];
            apip_jv_decode(m->key, k, sizeof k);
            char list[256] = "";
            for (int j = 0; j < APIP_F_COUNT; j++)
                if (r->names[j]) {
                    size_t at = strlen(list);
                    snprintf(list + at, sizeof list - at, "%s%s", at ? ", " : "", r->names[j]);
                }
            return bad(r, k, "unknown field \"%s\"; %s takes %s", k, endpoint(r), list);
        }
        if (seen[which])
            return bad(r, r->names[which], "%s appears twice", r->names[which]);
        seen[which] = true;
        r->f[which] = apip_jv_kind(m->val) == 'n' ? NULL : m->val;
    }
    return 0;
}

/* An integer field in [lo, hi], under the one rule of apip_jv_int: any number with an integral
 * value (2, 2.0 and 2e0 alike). */
static int get_uint(apip_req *r, const char *v, const char *field, uint64_t lo, uint64_t hi,
                    uint64_t *out) {
    bool neg = false;
    uint64_t x = 0;
    int kind = apip_jv_kind(v) == '0' ? apip_jv_int(v, &neg, &x) : APIP_INT_NOT_INTEGER;
    if (kind == APIP_INT_OK && !neg && x >= lo && x <= hi) {
        *out = x;
        return 0;
    }
    if (apip_jv_kind(v) != '0')
        return bad(r, field, "%s must be an integer from %llu to %llu", field,
                   (unsigned long long)lo, (unsigned long long)hi);
    int n = (int)(apip_jv_end(v) - v);
    return bad(r, field, "%s is %.*s%s; it must be an integer from %llu to %llu", field,
               n > 24 ? 24 : n, v,
               n > 24                         ? "..."
               : kind == APIP_INT_NOT_INTEGER ? ", not an integer"
                                              : "",
               (unsigned long long)lo, (unsigned long long)hi);
}

static int get_int(apip_req *r, const char *v, const char *field, long long lo, long long hi,
                   long long *out) {
    uint64_t x = 0;
    if (get_uint(r, v, field, (uint64_t)lo, (uint64_t)hi, &x))
        return -1;
    *out = (long long)x;
    return 0;
}

uint64_t apip_req_int(const char *v) {
    bool neg = false;
    uint64_t x = 0;
    apip_jv_int(v, &neg, &x);
    return x;
}

static int over_heads(apip_req *r, const char *field, size_t h) {
    return api_fail(r->err, 413, "job_too_large", field,
                    "%s asks for %zu heads, over the max_heads limit of %zu", field, h,
                    r->lim->max_heads);
}

/* Learns the shape of the tensor field name at val: probed here, or given already probed (its
 * dimensions were checked against max_dim and its bytes against size_t by its codec). */
static int probe(apip_req *r, apip_tensor_in *t, const char *name, const char *val,
                 size_t max_rank) {
    for (size_t i = 0; r->given && i < r->given->ntensors; i++) {
        if (r->given->keys[i] != val)
            continue;
        *t = r->given->tensors[i];
        if (t->rank > max_rank)
            return bad(r, name, "%s has %zu dimensions; it may have at most %zu", name, t->rank,
                       max_rank);
        return 0;
    }
    return apip_tensor_probe(t, name, val, max_rank, r->lim->max_dim, r->lim->max_job_bytes,
                             r->err);
}

int apip_req_heads_next(apip_req *r, const char **it, const char **el) {
    if (!(r->given && r->given->heads_csv))
        return apip_jv_arr_next(it, el) ? 1 : 0;
    const char *p = *it;
    if (p == r->f[APIP_F_HEADS] || *p == ',') /* past the opening quote, or the comma */
        p++;
    else /* at the closing quote */
        return 0;
    while (*p == ' ')
        p++;
    const char *d = p;
    while (*p >= '0' && *p <= '9')
        p++;
    const char *digits_end = p;
    while (*p == ' ')
        p++;
    if (d == digits_end || (*p != ',' && *p != '"'))
        return bad(r, "heads", "heads must be head indices separated by commas, such as \"0,2\"");
    *el = d;
    *it = p;
    return 1;
}

static void shape_of(char *out, size_t cap, const apip_tensor_in *t) {
    apip_dims_str(out, cap, t->dims, t->rank);
}

/* ---- Attention: inputs and parameters ----------------------------------------------------- */

/* "tokens" or "text" in place of query: self-attention on one text. The words are counted once
 * the model is known (words_count). */
static int words_inputs(apip_req *r) {
    const char *field = r->f[APIP_F_TOKENS] ? "tokens" : "text";
    if (r->f[APIP_F_QUERY] || (r->f[APIP_F_TOKENS] && r->f[APIP_F_TEXT]))
        return bad(r, r->f[APIP_F_QUERY] ? "query" : "text", "give one of query, tokens and text");
    for (int i = APIP_F_KEY; i <= APIP_F_VALUE; i++)
        if (r->f[i])
            return bad(r, i == APIP_F_KEY ? "key" : "value",
                       "%s is self-attention: key and value come from the same words, so leave "
                       "key and value out",
                       field);
    if (r->f[APIP_F_PARAMS])
        return bad(r, "params",
                   "%s needs a model with a vocabulary (GET /v1/models shows vocab_size), not "
                   "params",
                   field);
    r->words = true;
    r->rank = 2;
    r->n = 1;
    return 0;
}

/* Counts the words against the model's vocabulary: L = S = their number. */
static int words_count(apip_req *r) {
    size_t count = 0, elems = 0;
    if (apip_words_count(r->model, r->f[APIP_F_TOKENS], r->f[APIP_F_TEXT], r->lim->max_dim, &count,
                         r->err))
        return -1;
    if (!apip_mul(count, r->e, &elems) || elems > SIZE_MAX / sizeof(float))
        return api_fail(r->err, 413, "job_too_large", NULL,
                        "the job's working memory does not fit in size_t");
    r->l = r->s = count;
    r->x[0].count = elems;
    return 0;
}

static int attention_inputs(apip_req *r) {
    char sh[96];
    if (r->f[APIP_F_TOKENS] || r->f[APIP_F_TEXT])
        return words_inputs(r);
    if (!r->f[APIP_F_QUERY])
        return bad(r, "query", "query is required: (L, E) or (N, L, E)");
    if (probe(r, &r->x[0], "query", r->f[APIP_F_QUERY], 3))
        return -1;
    apip_tensor_in *q = &r->x[0];
    if (q->rank < 2) {
        shape_of(sh, sizeof sh, q);
        return bad(r, "query", "query has shape %s; it must be (L, E) or (N, L, E)", sh);
    }
    r->rank = q->rank;
    r->n = q->rank == 3 ? q->dims[0] : 1;
    r->l = q->dims[q->rank - 2];
    r->e = q->dims[q->rank - 1];
    r->s = r->l;
    r->kdim = r->vdim = r->e;
    const char *names[3] = {"query", "key", "value"};
    for (int i = 1; i < 3; i++) {
        const char *v = r->f[i == 1 ? APIP_F_KEY : APIP_F_VALUE];
        if (!v)
            continue;
        apip_tensor_in *t = &r->x[i];
        if (probe(r, t, names[i], v, 3))
            return -1;
        shape_of(sh, sizeof sh, t);
        if (t->rank != r->rank)
            return bad(r, names[i], "%s has shape %s; with query of rank %zu it must be %s",
                       names[i], sh, r->rank, r->rank == 3 ? "(N, S, width)" : "(S, width)");
        if (r->rank == 3 && t->dims[0] != r->n)
            return bad(r, names[i], "%s has shape %s; its batch must be N=%zu like query's",
                       names[i], sh, r->n);
        size_t s = t->dims[t->rank - 2], w = t->dims[t->rank - 1];
        if (i == 1) {
            r->has_k = true;
            r->s = s;
            r->kdim = r->vdim = w;
        } else {
            r->has_v = true;
            if (s != r->s)
                return bad(r, "value", "value has shape %s; it must have S=%zu rows like %s", sh,
                           r->s, r->has_k ? "key" : "query (the default key)");
            r->vdim = w;
        }
    }
    return 0;
}

static int attention_model(apip_req *r, const api_registry *models) {
    if (r->f[APIP_F_MODEL] && r->f[APIP_F_PARAMS])
        return bad(r, "params", "give model or params, not both");
    if (r->f[APIP_F_PARAMS])
        return 0;
    if (r->given && r->given->model) {
        r->model = r->given->model;
    } else if (r->f[APIP_F_MODEL]) {
        if (apip_jv_kind(r->f[APIP_F_MODEL]) != '"')
            return bad(r, "model", "model must be a string: the name of a model (GET /v1/models)");
        apip_span s = apip_jv_string(r->f[APIP_F_MODEL]);
        r->model = apip_registry_find_json(models, s);
        if (!r->model) {
            /* The name as far as it can be shown: up to an escaped NUL, or cut to 255 bytes
             * (a cut may fall 3 bytes short, at a character boundary). */
            char name[256];
            size_t n = apip_jv_decode(s, name, sizeof name), shown = strlen(name);
            bool nul = shown < n && (n < sizeof name || shown + 4 < sizeof name);
            return api_fail(r->err, 404, "unknown_model", "model",
                            "there is no model named \"%s%s\"; GET /v1/models lists them", name,
                            nul         ? "\\u0000..."
                            : shown < n ? "..."
                                        : "");
        }
    } else {
        r->model = api_registry_default(models);
        if (!r->model)
            return api_fail(r->err, 404, "unknown_model", "model",
                            "the server holds no default model; give model or params");
    }
    api_model_info mi = api_model_describe(r->model);
    r->h = mi.num_heads;
    r->packed = apip_model_params(r->model)->in_proj_weight != NULL;
    if (r->words) {
        r->e = r->kdim = r->vdim = mi.embed_dim;
        if (words_count(r))
            return -1;
    }
    if (r->e != mi.embed_dim)
        return bad(r, "query", "query has width %zu, but model %s has embed_dim %zu", r->e, mi.name,
                   mi.embed_dim);
    if (r->kdim != mi.kdim)
        return bad(r, "key",
                   r->has_k ? "key has width %zu, but model %s takes keys of width kdim=%zu"
                            : "key is required: query has width %zu, but model %s takes keys of "
                              "width kdim=%zu",
                   r->kdim, mi.name, mi.kdim);
    if (r->vdim != mi.vdim)
        return bad(r, "value",
                   r->has_v ? "value has width %zu, but model %s takes values of width vdim=%zu"
                            : "value is required: the default value has width %zu, but model %s "
                              "takes values of width vdim=%zu",
                   r->vdim, mi.name, mi.vdim);
    if (r->h > r->lim->max_heads)
        return over_heads(r, "model", r->h);
    return 0;
}

static int attention_params(apip_req *r) {
    const char *pv = r->f[APIP_F_PARAMS];
    if (!pv)
        return 0;
    if (apip_jv_kind(pv) != '{')
        return bad(r, "params",
                   "params must be an object: num_heads plus state_dict tensors, or "
                   "{\"init\": \"identity\" | \"random\", ...}");
    const char *it = pv, *val = NULL, *nh = NULL, *init = NULL, *seed = NULL;
    const char *pval[APIP_P_COUNT] = {NULL};
    apip_span key;
    char path[96];
    while (apip_jv_obj_next(&it, &key, &val)) {
        char k[48];
        apip_jv_decode(key, k, sizeof k);
        snprintf(path, sizeof path, "params.%s", k);
        const char **slot = NULL;
        if (apip_jv_streq(key, "num_heads"))
            slot = &nh;
        else if (apip_jv_streq(key, "init"))
            slot = &init;
        else if (apip_jv_streq(key, "seed"))
            slot = &seed;
        for (int i = 0; i < APIP_P_COUNT && !slot; i++)
            if (apip_jv_streq(key, apip_param_names[i]))
                slot = &pval[i];
        if (!slot)
            return bad(r, path,
                       "%s is not a parameter: params takes num_heads, in_proj_weight, "
                       "in_proj_bias, out_proj.weight, out_proj.bias, q_proj_weight, "
                       "k_proj_weight, v_proj_weight, or init and seed",
                       path);
        if (*slot)
            return bad(r, path, "%s appears twice", path);
        *slot = apip_jv_kind(val) == 'n' ? NULL : val;
    }
    long long h = 0;
    if (!nh)
        return bad(r, "params.num_heads", "params.num_heads is required");
    if (get_int(r, nh, "params.num_heads", 1, (long long)1 << 40, &h))
        return -1;
    r->h = (size_t)h;
    if (r->h > r->lim->max_heads)
        return over_heads(r, "params.num_heads", r->h);

    if (init) {
        if (apip_jv_kind(init) != '"')
            return bad(r, "params.init", "params.init must be \"identity\" or \"random\"");
        apip_span is = apip_jv_string(init);
        r->init = apip_jv_streq(is, "identity") ? APIP_INIT_IDENTITY
                  : apip_jv_streq(is, "random") ? APIP_INIT_RANDOM
                                                : APIP_INIT_NONE;
        if (r->init == APIP_INIT_NONE)
            return bad(r, "params.init", "params.init must be \"identity\" or \"random\"");
        for (int i = 0; i < APIP_P_COUNT; i++)
            if (pval[i]) {
                snprintf(path, sizeof path, "params.%s", apip_param_names[i]);
                return bad(r, path, "params with init take no tensors (%s)", path);
            }
        if (r->init == APIP_INIT_IDENTITY && seed)
            return bad(r, "params.seed", "params.seed goes only with init \"random\"");
        if (r->init == APIP_INIT_RANDOM) {
            if (!seed)
                return bad(r, "params.seed",
                           "params.seed is required with init \"random\" (an integer from 0 to "
                           "2^64-1)");
            if (get_uint(r, seed, "params.seed", 0, UINT64_MAX, &r->seed))
                return -1;
        }
        if (r->kdim != r->e || r->vdim != r->e)
            return bad(r, r->kdim != r->e ? "key" : "value",
                       "params with init need key and value of width E=%zu like query", r->e);
        r->packed = true;
    } else {
        if (seed)
            return bad(r, "params.seed", "params.seed goes only with init \"random\"");
        bool split = pval[APIP_P_Q_W] || pval[APIP_P_K_W] || pval[APIP_P_V_W];
        if (pval[APIP_P_IN_W] && split)
            return bad(r, "params.in_proj_weight",
                       "give params.in_proj_weight or q/k/v_proj_weight, not both");
        if (!pval[APIP_P_OUT_W])
            return bad(r, "params.out_proj.weight", "params.out_proj.weight (E, E) is required");
        if (!pval[APIP_P_IN_W] && !split)
            return bad(r, "params.in_proj_weight",
                       "params.in_proj_weight (3E, E) is required (or q_proj_weight, "
                       "k_proj_weight and v_proj_weight)");
        for (int i = APIP_P_Q_W; split && i <= APIP_P_V_W; i++)
            if (!pval[i]) {
                snprintf(path, sizeof path, "params.%s", apip_param_names[i]);
                return bad(r, path, "%s is required with the other q/k/v_proj_weight", path);
            }
        r->packed = pval[APIP_P_IN_W] != NULL;
        const size_t e = r->e;
        const size_t want[APIP_P_COUNT][2] = {{3 * e, e}, {3 * e, 0},   {e, e},      {e, 0},
                                              {e, e},     {e, r->kdim}, {e, r->vdim}};
        for (int i = 0; i < APIP_P_COUNT; i++) {
            if (!pval[i])
                continue;
            snprintf(path, sizeof path, "params.%s", apip_param_names[i]);
            size_t rank = want[i][1] ? 2 : 1;
            if (probe(r, &r->p[i], path, pval[i], rank))
                return -1;
            r->has_p[i] = true;
            const apip_tensor_in *t = &r->p[i];
            if (t->rank != rank || t->dims[0] != want[i][0] ||
                (rank == 2 && t->dims[1] != want[i][1])) {
                char got[96], exp[96];
                shape_of(got, sizeof got, t);
                apip_dims_str(exp, sizeof exp, want[i], rank);
                return bad(r, path, "%s has shape %s; with query width E=%zu it must be %s", path,
                           got, e, exp);
            }
        }
        if (r->packed && (r->kdim != e || r->vdim != e))
            return bad(r, r->kdim != e ? "key" : "value",
                       "%s has width %zu, but in_proj_weight needs key and value of width E=%zu; "
                       "give q_proj_weight, k_proj_weight and v_proj_weight for other widths",
                       r->kdim != e ? "key" : "value", r->kdim != e ? r->kdim : r->vdim, e);
    }
    if (r->e % r->h != 0)
        return bad(r, "params.num_heads",
                   "the embedding width E=%zu is not divisible by params.num_heads=%zu", r->e,
                   r->h);
    return 0;
}

/* ---- SDPA inputs -------------------------------------------------------------------------- */

static int sdpa_inputs(apip_req *r) {
    const char *names[3] = {"q", "k", "v"};
    char sh[96];
    for (int i = 0; i < 3; i++) {
        const char *v = r->f[i];
        if (!v)
            return bad(r, names[i], "%s is required", names[i]);
        if (probe(r, &r->x[i], names[i], v, 4))
            return -1;
        apip_tensor_in *t = &r->x[i];
        shape_of(sh, sizeof sh, t);
        if (t->rank < 2)
            return bad(r, names[i], "%s has shape %s; it needs at least 2 dimensions", names[i],
                       sh);
        if (i > 0 && t->rank != r->x[0].rank)
            return bad(r, names[i], "%s has shape %s; it must have the rank of q (%zu)", names[i],
                       sh, r->x[0].rank);
        for (size_t j = 0; i > 0 && j + 2 < t->rank; j++)
            if (t->dims[j] != r->x[0].dims[j])
                return bad(r, names[i], "%s has shape %s; its leading dimensions must be q's",
                           names[i], sh);
    }
    const apip_tensor_in *q = &r->x[0], *k = &r->x[1], *v = &r->x[2];
    r->rank = q->rank;
    size_t lead = q->rank - 2;
    r->n = lead == 2 ? q->dims[0] : 1;
    r->h = lead == 2 ? q->dims[1] : lead == 1 ? q->dims[0] : 1;
    r->l = q->dims[lead];
    r->d = q->dims[lead + 1];
    r->s = k->dims[lead];
    if (k->dims[lead + 1] != r->d) {
        shape_of(sh, sizeof sh, k);
        return bad(r, "k", "k has shape %s; its width must be D=%zu like q's", sh, r->d);
    }
    if (v->dims[lead] != r->s) {
        shape_of(sh, sizeof sh, v);
        return bad(r, "v", "v has shape %s; it must have S=%zu rows like k", sh, r->s);
    }
    r->dv = v->dims[lead + 1];
    r->has_k = r->has_v = true;
    if (r->h > r->lim->max_heads)
        return over_heads(r, "q", r->h);
    if (r->f[APIP_F_SCALE]) {
        if (apip_jv_kind(r->f[APIP_F_SCALE]) != '0')
            return bad(r, "scale", "scale must be a number");
        r->scale = (float)apip_jv_number(r->f[APIP_F_SCALE], &(const char *){NULL});
        if (!isfinite(r->scale))
            return api_fail(r->err, 400, "non_finite", "scale", "scale is not a finite float32");
        r->has_scale = true;
    }
    return 0;
}

/* ---- Masks and options -------------------------------------------------------------------- */

/* attn_mask or attn_bias: (L, S), (Mn, L, S) or (Mn, Mh, L, S) with Mn in {1, N}, Mh in
 * {1, H}; for SDPA with leading dims (H), (L, S) or (Mh, L, S). */
static int cell_mask(apip_req *r, int field, apip_tensor_in *t, size_t *mn, size_t *mh) {
    const char *name = r->names[field];
    if (probe(r, t, name, r->f[field], 4))
        return -1;
    size_t lead_q = r->op == API_OP_SDPA ? r->rank - 2 : 2; /* attention: always (N, H) */
    char sh[96], want[160];
    shape_of(sh, sizeof sh, t);
    if (r->op == API_OP_SDPA && lead_q == 0)
        snprintf(want, sizeof want, "(L, S) = (%zu, %zu)", r->l, r->s);
    else if (r->op == API_OP_SDPA && lead_q == 1)
        snprintf(want, sizeof want, "(L, S) or (H, L, S) = (%zu, %zu, %zu)", r->h, r->l, r->s);
    else
        snprintf(want, sizeof want,
                 "(L, S), (N, L, S) or (N, H, L, S) = (%zu, %zu, %zu, %zu) (a leading extent "
                 "may be 1)",
                 r->n, r->h, r->l, r->s);
    bool ok = t->rank >= 2 && t->dims[t->rank - 2] == r->l && t->dims[t->rank - 1] == r->s;
    *mn = *mh = 1;
    if (ok && t->rank == 3 && lead_q == 1) {
        *mh = t->dims[0];
        ok = *mh == 1 || *mh == r->h;
    } else if (ok && t->rank == 3 && lead_q == 2) {
        *mn = t->dims[0];
        ok = *mn == 1 || *mn == r->n;
    } else if (ok && t->rank == 4 && lead_q == 2) {
        *mn = t->dims[0];
        *mh = t->dims[1];
        ok = (*mn == 1 || *mn == r->n) && (*mh == 1 || *mh == r->h);
    } else if (t->rank != 2) {
        ok = false;
    }
    if (!ok)
        return bad(r, name, "%s has shape %s; it must be %s", name, sh, want);
    return 0;
}

static int masks_and_options(apip_req *r) {
    bool sdpa = r->op == API_OP_SDPA;
    const char *v;
    char sh[96];

    if ((v = r->f[APIP_F_CAUSAL])) {
        char k = apip_jv_kind(v);
        if (k == 't' || k == 'f')
            r->causal = k == 't' ? ATTN_CAUSAL_TOP_LEFT : ATTN_CAUSAL_NONE;
        else if (k == '"' && apip_jv_streq(apip_jv_string(v), "top_left"))
            r->causal = ATTN_CAUSAL_TOP_LEFT;
        else if (k == '"' && apip_jv_streq(apip_jv_string(v), "bottom_right"))
            r->causal = ATTN_CAUSAL_BOTTOM_RIGHT;
        else
            return bad(r, "causal", "causal must be false, true, \"top_left\" or \"bottom_right\"");
    }

    /* The batch of key_lengths and key_mask: N is the first dimension of a rank-3 query
     * (attention) or of a rank-4 q (N, H, L, D) (SDPA); a query or q without it is one batch
     * element, N = 1 (SDPA's (H, L, D) has heads, not a batch, in front). */
    const char *n_is = r->rank == (sdpa ? 4u : 3u) ? ""
                       : sdpa ? r->rank == 3 ? " (q (H, L, D) is one batch element: N = 1)"
                                             : " (q (L, D) is one batch element: N = 1)"
                              : " (query (L, E) is one batch element: N = 1)";
    if ((v = r->f[APIP_F_KEY_LENGTHS]) && r->given && r->given->key_lengths) {
        /* Raw int32 values. */
        const uint8_t *b = r->given->key_lengths;
        if (r->given->n_key_lengths != r->n)
            return bad(r, "key_lengths", "key_lengths holds %zu integers; it must hold N=%zu%s",
                       r->given->n_key_lengths, r->n, n_is);
        for (size_t i = 0; i < r->n; i++) {
            int32_t x = (int32_t)((uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 |
                                  (uint32_t)b[4 * i + 2] << 16 | (uint32_t)b[4 * i + 3] << 24);
            if (x < 0 || (size_t)x > r->s)
                return bad(r, "key_lengths", "key_lengths[%zu] is %d; it must be from 0 to S=%zu",
                           i, (int)x, r->s);
        }
        r->n_key_lengths = r->n;
    } else if (v) {
        if (apip_jv_kind(v) != '[')
            return bad(r, "key_lengths", "key_lengths must be an array of N=%zu integers%s", r->n,
                       n_is);
        const char *it = v, *el = NULL;
        size_t i = 0;
        char path[48];
        while (apip_jv_arr_next(&it, &el)) {
            snprintf(path, sizeof path, "key_lengths[%zu]", i);
            long long x = 0;
            if (i == r->n)
                return bad(r, "key_lengths", "key_lengths must hold N=%zu integers, not more%s",
                           r->n, n_is);
            if (get_int(r, el, path, 0, (long long)r->s, &x))
                return -1;
            i++;
        }
        if (i != r->n)
            return bad(r, "key_lengths", "key_lengths holds %zu integers; it must hold N=%zu%s", i,
                       r->n, n_is);
        r->n_key_lengths = r->n;
    }
    if ((v = r->f[APIP_F_KEY_MASK])) {
        if (probe(r, &r->km, "key_mask", v, 2))
            return -1;
        const apip_tensor_in *t = &r->km;
        shape_of(sh, sizeof sh, t);
        bool ok = t->dims[t->rank - 1] == r->s;
        r->km_n = t->rank == 2 ? t->dims[0] : 1;
        ok = ok && (r->km_n == 1 || r->km_n == r->n);
        if (!ok)
            return bad(r, "key_mask",
                       "key_mask has shape %s; it must be (S) or (N, S) = (%zu, %zu)%s", sh, r->n,
                       r->s, n_is);
        r->has_km = true;
    }
    if (r->f[APIP_F_ATTN_MASK]) {
        if (cell_mask(r, APIP_F_ATTN_MASK, &r->am, &r->am_n, &r->am_h))
            return -1;
        r->has_am = true;
    }
    if (r->f[APIP_F_ATTN_BIAS]) {
        if (cell_mask(r, APIP_F_ATTN_BIAS, &r->ab, &r->ab_n, &r->ab_h))
            return -1;
        r->has_ab = true;
    }

    if ((v = r->f[APIP_F_NEED_WEIGHTS])) {
        char k = apip_jv_kind(v);
        if (sdpa) {
            if (k != 't' && k != 'f')
                return bad(r, "need_weights", "need_weights must be true or false");
            r->weights = k == 't' ? ATTN_WEIGHTS_PER_HEAD : ATTN_WEIGHTS_NONE;
        } else if (k == 'f') {
            r->weights = ATTN_WEIGHTS_NONE;
        } else if (k == '"' && apip_jv_streq(apip_jv_string(v), "per_head")) {
            r->weights = ATTN_WEIGHTS_PER_HEAD;
        } else if (k == '"' && apip_jv_streq(apip_jv_string(v), "mean")) {
            r->weights = ATTN_WEIGHTS_MEAN;
        } else {
            return bad(r, "need_weights", "need_weights must be false, \"per_head\" or \"mean\"");
        }
    }
    if ((v = r->f[APIP_F_HEADS])) {
        if (r->weights != ATTN_WEIGHTS_PER_HEAD)
            return bad(r, "heads", "heads goes only with need_weights \"per_head\"");
        if (apip_jv_kind(v) != '[' && !(r->given && r->given->heads_csv))
            return bad(r, "heads", "heads must be a list of head indices from 0 to %zu", r->h - 1);
        const char *it = v, *el = NULL;
        char path[48];
        /* One bit per head; h <= max_heads <= API_MAX_HEADS (8 KiB of stack at most). */
        uint64_t seen[API_MAX_HEADS / 64];
        if (r->h > API_MAX_HEADS) /* cannot happen: api_job_parse caps max_heads */
            return api_fail(r->err, 500, "internal", "heads", "%zu heads are too many", r->h);
        memset(seen, 0, (r->h + 63) / 64 * sizeof seen[0]);
        int more;
        while ((more = apip_req_heads_next(r, &it, &el)) > 0) {
            snprintf(path, sizeof path, "heads[%zu]", r->n_heads);
            long long x = 0;
            if (get_int(r, el, path, 0, (long long)r->h - 1, &x))
                return -1;
            if (seen[x / 64] >> (x % 64) & 1)
                return bad(r, path, "%s repeats head %lld; list each head once", path, x);
            seen[x / 64] |= 1ull << (x % 64);
            r->n_heads++;
        }
        if (more < 0)
            return -1;
        if (r->n_heads == 0)
            return bad(r, "heads", "heads must list at least one head");
    }
    if ((v = r->f[APIP_F_TOP_K])) {
        if (r->weights == ATTN_WEIGHTS_NONE)
            return bad(r, "weights_top_k", "weights_top_k needs need_weights to be %s",
                       sdpa ? "true" : "\"per_head\" or \"mean\"");
        long long k = 0;
        if (get_int(r, v, "weights_top_k", 1, (long long)r->s, &k))
            return -1;
        r->top_k = (size_t)k;
    }
    if ((v = r->f[APIP_F_ENCODING])) {
        if (apip_jv_kind(v) == '"' && apip_jv_streq(apip_jv_string(v), "base64"))
            r->base64 = true;
        else if (!(apip_jv_kind(v) == '"' && apip_jv_streq(apip_jv_string(v), "json")))
            return bad(r, "encoding", "encoding must be \"json\" or \"base64\"");
    }
    return 0;
}

int apip_req_read(apip_req *r, const apip_json_root *root, const api_registry *models) {
    r->names = r->op == API_OP_SDPA ? sdpa_fields : attention_fields;
    if (map_fields(r, root))
        return -1;
    if (r->op == API_OP_SDPA) {
        if (sdpa_inputs(r))
            return -1;
    } else if (attention_inputs(r) || attention_model(r, models) || attention_params(r)) {
        return -1;
    }
    return masks_and_options(r);
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
