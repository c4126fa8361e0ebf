/* fields_inputs.c - the tensors and parameters of a request, for fields.c: attention's query, key
 * and value (or its words: tokens, text), its model and params (a registry model, params.init or
 * inline tensors), and SDPA's q, k and v; each tensor's shape learnt and checked against the
 * others and the limits, allocating nothing.
 *
 * Legend: N batch, L query length, S key length, E embedding width, H heads, kdim/vdim key and
 * value widths, D/Dv the SDPA query-key and value widths. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "v1.h"
#include "request.h"

/* 400 invalid_field naming field, with a printf-style message; returns -1 (api_fail). */
#define bad(r, field, ...) api_fail((r)->err, 400, "invalid_field", (field), __VA_ARGS__)

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
    const char *add = r->f[APIP_F_ADD_SPECIAL];
    if (add && apip_jv_kind(add) != 't' && apip_jv_kind(add) != 'f')
        return bad(r, "add_special_tokens",
                   "add_special_tokens must be true (the default: the model's start token, if it "
                   "has one, goes first) or false");
    r->add_special = !add || apip_jv_kind(add) == 't';
    r->words = true;
    r->seq_first = false; /* words are (L, E): no batch to move */
    r->rank = 2;
    r->n = 1;
    return 0;
}

/* Counts the words against the model's vocabulary: L = S = their number. */
static int words_count(apip_req *r) {
    size_t count = 0, elems = 0;
    if (apip_words_count(r->model, r->f[APIP_F_TOKENS], r->f[APIP_F_TEXT], r->add_special,
                         r->lim->max_dim, &count, r->err))
        return -1;
    if (!apip_mul(count, r->e, &elems) || elems > SIZE_MAX / sizeof(float))
        return api_fail(r->err, 413, "job_too_large", NULL,
                        "the job's working memory does not fit in size_t");
    r->l = r->s = count;
    r->x[0].count = elems;
    return 0;
}

int apip_fields_attention_inputs(apip_req *r) {
    char sh[96];
    if (r->f[APIP_F_TOKENS] || r->f[APIP_F_TEXT])
        return words_inputs(r);
    if (r->f[APIP_F_ADD_SPECIAL])
        return bad(r, "add_special_tokens",
                   "add_special_tokens goes only with tokens or text: query, key and value are "
                   "embeddings, to which no token can be added");
    if (!r->f[APIP_F_QUERY])
        return bad(r, "query", "query is required: (L, E) or (N, L, E)");
    if (apip_fields_probe(r, &r->x[0], "query", r->f[APIP_F_QUERY], 3))
        return -1;
    apip_tensor_in *q = &r->x[0];
    if (q->rank < 2) {
        apip_fields_shape_of(sh, sizeof sh, q);
        return bad(r, "query", "query has shape %s; it must be (L, E) or %s", sh,
                   r->seq_first ? "(L, N, E) (batch_first is false)" : "(N, L, E)");
    }
    r->rank = q->rank;
    /* batch_first false: (L, N, E), N in dimension 1; a rank-2 query has no N to move. */
    r->seq_first = r->seq_first && q->rank == 3;
    size_t bdim = r->seq_first ? 1 : 0, sdim = r->seq_first ? 0 : 1;
    r->n = q->rank == 3 ? q->dims[bdim] : 1;
    r->l = q->rank == 3 ? q->dims[sdim] : q->dims[0];
    r->e = q->dims[q->rank - 1];
    r->s = r->l;
    r->kdim = r->vdim = r->e;
    const char *names[3] = {"query", "key", "value"};
    for (int i = 1; i < 3; i++) {
        const char *v = r->f[i == 1 ? APIP_F_KEY : APIP_F_VALUE];
        if (!v)
            continue;
        apip_tensor_in *t = &r->x[i];
        if (apip_fields_probe(r, t, names[i], v, 3))
            return -1;
        apip_fields_shape_of(sh, sizeof sh, t);
        if (t->rank != r->rank)
            return bad(r, names[i], "%s has shape %s; with query of rank %zu it must be %s",
                       names[i], sh, r->rank,
                       r->rank != 3   ? "(S, width)"
                       : r->seq_first ? "(S, N, width) (batch_first is false)"
                                      : "(N, S, width)");
        if (r->rank == 3 && t->dims[bdim] != r->n)
            return bad(r, names[i], "%s has shape %s; its batch must be N=%zu like query's%s",
                       names[i], sh, r->n,
                       r->seq_first ? " (batch_first is false: N is dimension 1)" : "");
        size_t s = r->rank == 3 ? t->dims[sdim] : t->dims[0], w = t->dims[t->rank - 1];
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

int apip_fields_attention_model(apip_req *r, const api_registry *models) {
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
    r->bias_kv = mi.add_bias_kv;
    if ((r->stack = apip_model_stack(r->model))) { /* a model of layers: self-attention */
        if (r->has_k || r->has_v)
            return bad(r, r->has_k ? "key" : "value",
                       "model %s is a model of layers: each layer attends the stream to itself, "
                       "so leave key and value out",
                       mi.name);
        r->causal = r->stack->causal ? ATTN_CAUSAL_TOP_LEFT : ATTN_CAUSAL_NONE; /* its default */
    }
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
        return apip_fields_over_heads(r, "model", r->h);
    return 0;
}

/* params with "init": "identity", or "random" with its seed; no tensors beside it, and key and
 * value of the query's width E. 0, or -1 with r->err. */
static int params_init(apip_req *r, const char *init, const char *seed,
                       const char *const pval[APIP_P_COUNT]) {
    char path[96];
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
        if (apip_fields_uint(r, seed, "params.seed", 0, UINT64_MAX, &r->seed))
            return -1;
    }
    if (r->kdim != r->e || r->vdim != r->e)
        return bad(r, r->kdim != r->e ? "key" : "value",
                   "params with init need key and value of width E=%zu like query", r->e);
    r->packed = true;
    return 0;
}

/* params as state_dict tensors: in_proj_weight or q/k/v_proj_weight, out_proj.weight, the
 * biases, and add_bias_kv's bias_k and bias_v (1, 1, E), both or neither; each probed and its
 * shape checked against E, kdim and vdim. 0, or -1 with r->err. */
static int params_tensors(apip_req *r, const char *seed, const char *const pval[APIP_P_COUNT]) {
    char path[96];
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
    if (!pval[APIP_P_BIAS_K] != !pval[APIP_P_BIAS_V])
        return bad(r, pval[APIP_P_BIAS_K] ? "params.bias_v" : "params.bias_k",
                   "%s (1, 1, E) is required with %s: add_bias_kv appends both",
                   pval[APIP_P_BIAS_K] ? "params.bias_v" : "params.bias_k",
                   pval[APIP_P_BIAS_K] ? "params.bias_k" : "params.bias_v");
    r->packed = pval[APIP_P_IN_W] != NULL;
    r->bias_kv = pval[APIP_P_BIAS_K] != NULL;
    const size_t e = r->e;
    const size_t want[APIP_P_COUNT][3] = {{3 * e, e},   {3 * e},      {e, e},    {e},      {e, e},
                                          {e, r->kdim}, {e, r->vdim}, {1, 1, e}, {1, 1, e}};
    const size_t ranks[APIP_P_COUNT] = {2, 1, 2, 1, 2, 2, 2, 3, 3};
    for (int i = 0; i < APIP_P_COUNT; i++) {
        if (!pval[i])
            continue;
        snprintf(path, sizeof path, "params.%s", apip_param_names[i]);
        size_t rank = ranks[i];
        if (apip_fields_probe(r, &r->p[i], path, pval[i], rank))
            return -1;
        r->has_p[i] = true;
        const apip_tensor_in *t = &r->p[i];
        bool fits = t->rank == rank;
        for (size_t k = 0; fits && k < rank; k++)
            fits = t->dims[k] == want[i][k];
        if (!fits) {
            char got[96], exp[96];
            apip_fields_shape_of(got, sizeof got, t);
            apip_dims_str(exp, sizeof exp, want[i], rank);
            return bad(r, path, "%s has shape %s; with query width E=%zu it must be %s", path, got,
                       e, exp);
        }
    }
    if (r->packed && (r->kdim != e || r->vdim != e))
        return bad(r, r->kdim != e ? "key" : "value",
                   "%s has width %zu, but in_proj_weight needs key and value of width E=%zu; "
                   "give q_proj_weight, k_proj_weight and v_proj_weight for other widths",
                   r->kdim != e ? "key" : "value", r->kdim != e ? r->kdim : r->vdim, e);
    return 0;
}

/* The inline params of attention: num_heads, then init (params_init) or state_dict tensors
 * (params_tensors), and E divisible by num_heads. 0, or -1 with r->err. */
int apip_fields_attention_params(apip_req *r) {
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
                       "k_proj_weight, v_proj_weight, bias_k, bias_v, or init and seed",
                       path);
        if (*slot)
            return bad(r, path, "%s appears twice", path);
        *slot = apip_jv_kind(val) == 'n' ? NULL : val;
    }
    if (!nh)
        return bad(r, "params.num_heads", "params.num_heads is required");
    /* A whole number of heads past max_heads is a job too large (413, naming the limit); any
     * other value is invalid, and the message gives the range the limit allows. */
    bool neg = false;
    uint64_t h = 0;
    int kind = apip_jv_kind(nh) == '0' ? apip_jv_int(nh, &neg, &h) : APIP_INT_NOT_INTEGER;
    if ((kind == APIP_INT_OK && !neg && h > r->lim->max_heads) ||
        (kind == APIP_INT_TOO_BIG && !neg))
        return api_fail(r->err, 413, "job_too_large", "params.num_heads",
                        "params.num_heads asks for more heads than the max_heads limit of %zu",
                        r->lim->max_heads);
    if (apip_fields_uint(r, nh, "params.num_heads", 1, r->lim->max_heads, &h))
        return -1;
    r->h = (size_t)h;

    if (init ? params_init(r, init, seed, pval) : params_tensors(r, seed, pval))
        return -1;
    if (r->e % r->h != 0)
        return bad(r, "params.num_heads",
                   "the embedding width E=%zu is not divisible by params.num_heads=%zu", r->e,
                   r->h);
    return 0;
}

/* ---- SDPA inputs -------------------------------------------------------------------------- */

/* k's and v's heads against q's, with enable_gqa (value g, NULL when absent): the same, or with
 * enable_gqa true fewer that divide them (grouped-query attention, as
 * F.scaled_dot_product_attention(enable_gqa=True)), v's the same as k's. 0, or -1 with r->err. */
static int sdpa_heads(apip_req *r, const char *g) {
    const apip_tensor_in *k = &r->x[1], *v = &r->x[2];
    const size_t lead = r->rank - 2; /* the heads are dimension lead - 1 */
    char sh[96];
    bool gqa = false;
    if (g) {
        int b = apip_fields_bool(r, g, "enable_gqa",
                                 " (true: k and v may have fewer heads than q, a divisor of them)");
        if (b < 0)
            return -1;
        gqa = b == 1;
    }
    r->hkv = lead ? k->dims[lead - 1] : 1;
    apip_fields_shape_of(sh, sizeof sh, k);
    if (r->hkv != r->h && !gqa)
        return bad(r, "k",
                   "k has shape %s: %zu heads, where q has %zu; send \"enable_gqa\": true for "
                   "grouped-query attention (as F.scaled_dot_product_attention), or as many heads "
                   "as q",
                   sh, r->hkv, r->h);
    if (r->h % r->hkv != 0)
        return bad(r, "k",
                   "k has shape %s: %zu heads, which do not divide q's %zu; with enable_gqa each "
                   "key/value head serves H / Hkv query heads",
                   sh, r->hkv, r->h);
    if (lead && v->dims[lead - 1] != r->hkv) {
        apip_fields_shape_of(sh, sizeof sh, v);
        return bad(r, "v", "v has shape %s; it must have the %zu heads of k", sh, r->hkv);
    }
    return 0;
}

int apip_fields_sdpa_inputs(apip_req *r) {
    const char *names[3] = {"q", "k", "v"};
    char sh[96];
    for (int i = 0; i < 3; i++) {
        const char *v = r->f[i];
        if (!v)
            return bad(r, names[i], "%s is required", names[i]);
        if (apip_fields_probe(r, &r->x[i], names[i], v, 4))
            return -1;
        apip_tensor_in *t = &r->x[i];
        apip_fields_shape_of(sh, sizeof sh, t);
        if (t->rank < 2)
            return bad(r, names[i], "%s has shape %s; it needs at least 2 dimensions", names[i],
                       sh);
        if (i > 0 && t->rank != r->x[0].rank)
            return bad(r, names[i], "%s has shape %s; it must have the rank of q (%zu)", names[i],
                       sh, r->x[0].rank);
        for (size_t j = 0; i > 0 && j + 3 < t->rank; j++) /* the heads: sdpa_heads */
            if (t->dims[j] != r->x[0].dims[j])
                return bad(r, names[i], "%s has shape %s; its batch must be q's", names[i], sh);
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
        apip_fields_shape_of(sh, sizeof sh, k);
        return bad(r, "k", "k has shape %s; its width must be D=%zu like q's", sh, r->d);
    }
    if (v->dims[lead] != r->s) {
        apip_fields_shape_of(sh, sizeof sh, v);
        return bad(r, "v", "v has shape %s; it must have S=%zu rows like k", sh, r->s);
    }
    r->dv = v->dims[lead + 1];
    r->has_k = r->has_v = true;
    if (r->h > r->lim->max_heads)
        return apip_fields_over_heads(r, "q", r->h);
    if (sdpa_heads(r, r->f[APIP_F_ENABLE_GQA]))
        return -1;
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
