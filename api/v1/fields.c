/* fields.c - reads the fields of POST /v1/attention or /v1/sdpa (or what another codec maps onto
 * them) into the request record (request.h), allocating nothing: maps the top-level fields
 * (unknown ones are refused), learns every tensor's shape, resolves the model and counts the
 * words, and checks every field and their agreement. Every error names the field by its JSON
 * path; the first one found is the request's.
 *
 * Legend: N batch, L query length, S key length, E embedding width, H heads, kdim/vdim key and
 * value widths, D/Dv the SDPA query-key and value widths, K the top-k count. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "v1.h"
#include "request.h"

/* ---- Fields ------------------------------------------------------------------------------- */

/* Each endpoint's name of each field; NULL where the endpoint has no such field. */
static const char *const attention_fields[APIP_F_COUNT] = {
    [APIP_F_QUERY] = "query",
    [APIP_F_KEY] = "key",
    [APIP_F_VALUE] = "value",
    [APIP_F_MODEL] = "model",
    [APIP_F_PARAMS] = "params",
    [APIP_F_CAUSAL] = "causal",
    [APIP_F_KEY_LENGTHS] = "key_lengths",
    [APIP_F_KEY_MASK] = "key_mask",
    [APIP_F_ATTN_MASK] = "attn_mask",
    [APIP_F_ATTN_BIAS] = "attn_bias",
    [APIP_F_NEED_WEIGHTS] = "need_weights",
    [APIP_F_HEADS] = "heads",
    [APIP_F_TOP_K] = "weights_top_k",
    [APIP_F_ENCODING] = "encoding",
    [APIP_F_TOKENS] = "tokens",
    [APIP_F_TEXT] = "text",
    [APIP_F_ADD_SPECIAL] = "add_special_tokens",
    [APIP_F_TRACE] = "trace",
    [APIP_F_BATCH_FIRST] = "batch_first",
    [APIP_F_KEY_PADDING_MASK] = "key_padding_mask",
    [APIP_F_TORCH_ATTN_MASK] = "torch_attn_mask",
    [APIP_F_IS_CAUSAL] = "is_causal",
    [APIP_F_AVG_WEIGHTS] = "average_attn_weights",
    [APIP_F_OUTPUTS] = "outputs",
};

/* SDPA takes PyTorch's is_causal too (F.scaled_dot_product_attention's); its attn_mask already
 * has F.scaled_dot_product_attention's polarity (true = may attend). */
static const char *const sdpa_fields[APIP_F_COUNT] = {
    [APIP_F_QUERY] = "q",
    [APIP_F_KEY] = "k",
    [APIP_F_VALUE] = "v",
    [APIP_F_SCALE] = "scale",
    [APIP_F_CAUSAL] = "causal",
    [APIP_F_KEY_LENGTHS] = "key_lengths",
    [APIP_F_KEY_MASK] = "key_mask",
    [APIP_F_ATTN_MASK] = "attn_mask",
    [APIP_F_ATTN_BIAS] = "attn_bias",
    [APIP_F_NEED_WEIGHTS] = "need_weights",
    [APIP_F_TOP_K] = "weights_top_k",
    [APIP_F_ENCODING] = "encoding",
    [APIP_F_TRACE] = "trace",
    [APIP_F_IS_CAUSAL] = "is_causal",
    [APIP_F_OUTPUTS] = "outputs",
};

/* 400 invalid_field naming field, with a printf-style message; returns -1 (api_fail). */
#define bad(r, field, ...) api_fail((r)->err, 400, "invalid_field", (field), __VA_ARGS__)

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
            char list[512] = "";
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

/* Learns the shape of the tensor field name at val: probed here (query, key and value may be
 * seeded), or given already probed (its dimensions were checked against max_dim and its bytes
 * against size_t by its codec). */
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
    int seeded = t == &r->x[0] || t == &r->x[1] || t == &r->x[2] /* inputs may be seeded */
                     ? apip_seeded_probe(t, name, val, 2, max_rank, r->lim->max_dim,
                                         r->lim->max_job_bytes, r->err)
                     : 1;
    return seeded <= 0 ? seeded
                       : apip_tensor_probe(t, name, val, max_rank, r->lim->max_dim,
                                           r->lim->max_job_bytes, r->err);
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

/* ---- PyTorch's names ---------------------------------------------------------------------- */

/* A boolean field at v (present): 1 for true, 0 for false, -1 with a 400 naming it otherwise. */
static int get_bool(apip_req *r, const char *v, const char *field, const char *means) {
    char k = apip_jv_kind(v);
    if (k == 't' || k == 'f')
        return k == 't';
    return bad(r, field, "%s must be true or false%s", field, means);
}

/* PyTorch's names beside attnd's: each thing is named once, in either convention. A request
 * that names one thing both ways is ambiguous (the two differ in polarity or in what they
 * combine with), so it is refused before anything else is read, naming both. 0, or -1. */
static int one_name_each(apip_req *r) {
    static const struct {
        int torch, ours;
        const char *why;
    } pairs[] = {
        {APIP_F_KEY_PADDING_MASK, APIP_F_KEY_MASK,
         "key_padding_mask is PyTorch's (true = ignore the key) and key_mask attnd's (1 = a real "
         "token): the same padding in opposite polarities. Send one of them"},
        {APIP_F_KEY_PADDING_MASK, APIP_F_KEY_LENGTHS,
         "key_padding_mask (PyTorch's, true = ignore the key) and key_lengths both say which keys "
         "are padding. Send one of them"},
        {APIP_F_TORCH_ATTN_MASK, APIP_F_ATTN_MASK,
         "torch_attn_mask is nn.MultiheadAttention's boolean attn_mask (true = blocked) and "
         "attn_mask attnd's (1 = may attend): the same mask in opposite polarities. Send one of "
         "them"},
        {APIP_F_IS_CAUSAL, APIP_F_CAUSAL,
         "is_causal (PyTorch's) and causal (attnd's) both set the causal mask. Send one of them"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        if (r->names[pairs[i].torch] && r->f[pairs[i].torch] && r->f[pairs[i].ours])
            return bad(r, r->names[pairs[i].torch], "%s", pairs[i].why);
    const char *bf = r->f[APIP_F_BATCH_FIRST];
    if (bf) {
        int b = get_bool(r, bf, "batch_first",
                         " (true, the default: (N, L, E); false: (L, N, E), as "
                         "nn.MultiheadAttention(batch_first=False))");
        if (b < 0)
            return -1;
        r->seq_first = b == 0; /* until the query's rank is known: a rank-2 query has no N */
    }
    return 0;
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

static int attention_inputs(apip_req *r) {
    char sh[96];
    if (r->f[APIP_F_TOKENS] || r->f[APIP_F_TEXT])
        return words_inputs(r);
    if (r->f[APIP_F_ADD_SPECIAL])
        return bad(r, "add_special_tokens",
                   "add_special_tokens goes only with tokens or text: query, key and value are "
                   "embeddings, to which no token can be added");
    if (!r->f[APIP_F_QUERY])
        return bad(r, "query", "query is required: (L, E) or (N, L, E)");
    if (probe(r, &r->x[0], "query", r->f[APIP_F_QUERY], 3))
        return -1;
    apip_tensor_in *q = &r->x[0];
    if (q->rank < 2) {
        shape_of(sh, sizeof sh, q);
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
        if (probe(r, t, names[i], v, 3))
            return -1;
        shape_of(sh, sizeof sh, t);
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
        if (get_uint(r, seed, "params.seed", 0, UINT64_MAX, &r->seed))
            return -1;
    }
    if (r->kdim != r->e || r->vdim != r->e)
        return bad(r, r->kdim != r->e ? "key" : "value",
                   "params with init need key and value of width E=%zu like query", r->e);
    r->packed = true;
    return 0;
}

/* params as state_dict tensors: in_proj_weight or q/k/v_proj_weight, out_proj.weight, the
 * biases; each probed and its shape checked against E, kdim and vdim. 0, or -1 with r->err. */
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
    if (get_uint(r, nh, "params.num_heads", 1, r->lim->max_heads, &h))
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

/* torch_attn_mask: nn.MultiheadAttention's shapes, (L, S) or (N*H, L, S) (batch element n's
 * head h at n*H + h; for a rank-2 query N = 1, so (H, L, S)), read as attn_mask's (L, S) or
 * (N, H, L, S): the same bytes. */
static int torch_cell_mask(apip_req *r) {
    const char *name = "torch_attn_mask";
    apip_tensor_in *t = &r->am;
    if (probe(r, t, name, r->f[APIP_F_TORCH_ATTN_MASK], 3))
        return -1;
    char sh[96];
    shape_of(sh, sizeof sh, t);
    bool ok = t->rank >= 2 && t->dims[t->rank - 2] == r->l && t->dims[t->rank - 1] == r->s &&
              (t->rank == 2 || t->dims[0] == r->n * r->h);
    if (!ok)
        return bad(r, name,
                   "torch_attn_mask has shape %s; as nn.MultiheadAttention's attn_mask it must be "
                   "(L, S) = (%zu, %zu) or (N*num_heads, L, S) = (%zu, %zu, %zu)",
                   sh, r->l, r->s, r->n * r->h, r->l, r->s);
    r->am_n = t->rank == 3 ? r->n : 1;
    r->am_h = t->rank == 3 ? r->h : 1;
    r->am_torch = true;
    return 0;
}

/* key_lengths (value v): N integers from 0 to S, in a JSON array or (given->key_lengths) raw
 * int32. n_is says how N follows from the query's shape, for messages. 0, or -1 with r->err. */
static int key_lengths_field(apip_req *r, const char *v, const char *n_is) {
    if (r->given && r->given->key_lengths) {
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
    } else {
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
    return 0;
}

/* heads (value v): distinct head indices from 0 to H-1, at least one, with per-head weights; a
 * JSON array, or (given->heads_csv) a string of comma-separated indices. Counts them into
 * r->n_heads. 0, or -1 with r->err. */
static int heads_field(apip_req *r, const char *v) {
    if (r->weights != ATTN_WEIGHTS_PER_HEAD)
        return bad(r, "heads",
                   "heads goes only with per-head weights: need_weights \"per_head\" (or true "
                   "with average_attn_weights false)");
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
    return 0;
}

/* "trace": a boolean; true only for a job small enough (API_TRACE_MAX_CELLS, api.h). */
static int trace_field(apip_req *r, const char *v) {
    int k = apip_jv_kind(v);
    if (k != 't' && k != 'f')
        return bad(r, "trace", "trace must be true or false");
    r->trace = k == 't';
    if (!r->trace)
        return 0;
    /* Each of the three maps (N, H, L, S), and the widest of the other steps: attention's
     * (N, L or S, E) projections, SDPA's (N, H, L or S, D or Dv) inputs. */
    size_t maps = 0, rows = 0, ls = r->l > r->s ? r->l : r->s, w = 0;
    bool fits =
        apip_mul(r->n, r->h, &maps) && apip_mul(maps, r->l, &maps) && apip_mul(maps, r->s, &maps);
    if (r->op == API_OP_SDPA)
        fits = fits && apip_mul(r->n, r->h, &rows) && apip_mul(rows, ls, &rows) &&
               apip_mul(rows, r->d > r->dv ? r->d : r->dv, &w);
    else
        fits = fits && apip_mul(r->n, ls, &rows) && apip_mul(rows, r->e, &w);
    if (!fits || maps > API_TRACE_MAX_CELLS || w > API_TRACE_MAX_CELLS)
        return bad(r, "trace",
                   "a trace is for small jobs: its maps hold N*H*L*S = %zu cells and its widest "
                   "step %s = %zu floats, and each may hold at most %d; send fewer or shorter "
                   "sequences, or leave trace out",
                   fits ? maps : (size_t)-1,
                   r->op == API_OP_SDPA ? "N*H*max(L,S)*max(D,Dv)" : "N*max(L,S)*E",
                   fits ? w : (size_t)-1, API_TRACE_MAX_CELLS);
    return 0;
}

/* causal, key_lengths, key_mask, attn_mask, attn_bias, need_weights, heads, weights_top_k,
 * encoding, trace and outputs, checked against the shapes learnt before them. 0, or -1 with
 * r->err. */
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
    if ((v = r->f[APIP_F_IS_CAUSAL])) { /* PyTorch's: the causal mask, top-left as SDPA's */
        int b = get_bool(r, v, "is_causal", " (true: the causal mask, j <= i)");
        if (b < 0)
            return -1;
        r->causal = b ? ATTN_CAUSAL_TOP_LEFT : ATTN_CAUSAL_NONE;
    }

    /* The batch of key_lengths and key_mask: N is the first dimension of a rank-3 query
     * (attention) or of a rank-4 q (N, H, L, D) (SDPA); a query or q without it is one batch
     * element, N = 1 (SDPA's (H, L, D) has heads, not a batch, in front). */
    const char *n_is = r->rank == (sdpa ? 4u : 3u) ? ""
                       : sdpa ? r->rank == 3 ? " (q (H, L, D) is one batch element: N = 1)"
                                             : " (q (L, D) is one batch element: N = 1)"
                              : " (query (L, E) is one batch element: N = 1)";
    if ((v = r->f[APIP_F_KEY_LENGTHS]) && key_lengths_field(r, v, n_is))
        return -1;
    /* key_mask, or PyTorch's key_padding_mask (one_name_each refused both). */
    int kmf = r->f[APIP_F_KEY_PADDING_MASK] ? APIP_F_KEY_PADDING_MASK : APIP_F_KEY_MASK;
    if ((v = r->f[kmf])) {
        const char *name = r->names[kmf];
        if (probe(r, &r->km, name, v, 2))
            return -1;
        const apip_tensor_in *t = &r->km;
        shape_of(sh, sizeof sh, t);
        bool ok = t->dims[t->rank - 1] == r->s;
        r->km_n = t->rank == 2 ? t->dims[0] : 1;
        ok = ok && (r->km_n == 1 || r->km_n == r->n);
        if (!ok)
            return bad(r, name, "%s has shape %s; it must be (S) or (N, S) = (%zu, %zu)%s", name,
                       sh, r->n, r->s, n_is);
        r->has_km = true;
        r->km_torch = kmf == APIP_F_KEY_PADDING_MASK;
    }
    if (r->f[APIP_F_ATTN_MASK]) {
        if (cell_mask(r, APIP_F_ATTN_MASK, &r->am, &r->am_n, &r->am_h))
            return -1;
        r->has_am = true;
    } else if (r->f[APIP_F_TORCH_ATTN_MASK]) {
        if (torch_cell_mask(r))
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
        } else if (k == 't') { /* PyTorch's: averaged, unless average_attn_weights is false */
            r->weights = ATTN_WEIGHTS_MEAN;
        } else if (k == '"' && apip_jv_streq(apip_jv_string(v), "per_head")) {
            r->weights = ATTN_WEIGHTS_PER_HEAD;
        } else if (k == '"' && apip_jv_streq(apip_jv_string(v), "mean")) {
            r->weights = ATTN_WEIGHTS_MEAN;
        } else {
            return bad(r, "need_weights",
                       "need_weights must be false, true (PyTorch's: the weights averaged over "
                       "the heads), \"per_head\" or \"mean\"");
        }
    }
    if ((v = r->f[APIP_F_AVG_WEIGHTS])) {
        int b = get_bool(r, v, "average_attn_weights", "");
        if (b < 0)
            return -1;
        const char *nw = r->f[APIP_F_NEED_WEIGHTS];
        if (!nw || apip_jv_kind(nw) != 't')
            return bad(r, "average_attn_weights",
                       "average_attn_weights chooses the form of need_weights: true (PyTorch's), "
                       "so it needs need_weights: true; attnd's default is false (PyTorch's is "
                       "true), and \"per_head\" and \"mean\" already say the form");
        r->weights = b ? ATTN_WEIGHTS_MEAN : ATTN_WEIGHTS_PER_HEAD;
    }
    if ((v = r->f[APIP_F_HEADS]) && heads_field(r, v))
        return -1;
    if ((v = r->f[APIP_F_TOP_K])) {
        if (r->weights == ATTN_WEIGHTS_NONE)
            return bad(r, "weights_top_k", "weights_top_k needs need_weights to be %s",
                       sdpa ? "true" : "true, \"per_head\" or \"mean\"");
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
    if ((v = r->f[APIP_F_TRACE]) && trace_field(r, v))
        return -1;
    return (v = r->f[APIP_F_OUTPUTS]) ? apip_outputs_read(v, r->weights, r->trace, &r->omit, r->err)
                                      : 0;
}

int apip_req_read(apip_req *r, const apip_json_root *root, const api_registry *models) {
    r->names = r->op == API_OP_SDPA ? sdpa_fields : attention_fields;
    if (map_fields(r, root) || one_name_each(r))
        return -1;
    if (r->op == API_OP_SDPA) {
        if (sdpa_inputs(r))
            return -1;
    } else if (attention_inputs(r) || attention_model(r, models) || attention_params(r)) {
        return -1;
    }
    return masks_and_options(r);
}
