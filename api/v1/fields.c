/* fields.c - reads the fields of POST /v1/attention or /v1/sdpa (or what another codec maps onto
 * them) into the request record (request.h), allocating nothing: maps the top-level fields
 * (unknown ones are refused), learns every tensor's shape, resolves the model and counts the
 * words, and checks every field and their agreement. Every error names the field by its JSON
 * path; the first one found is the request's. The inputs and parameters are read by
 * fields_inputs.c, the masks and options by fields_masks.c, on the helpers here.
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
    [APIP_F_DROPOUT] = "dropout",
    [APIP_F_ADD_ZERO_ATTN] = "add_zero_attn",
    [APIP_F_LAYERS] = "layers",
    [APIP_F_PREDICT_TOP_K] = "predict_top_k",
};

/* SDPA takes PyTorch's is_causal, dropout_p and enable_gqa too (F.scaled_dot_product_attention's);
 * its attn_mask already has F.scaled_dot_product_attention's polarity (true = may attend). */
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
    [APIP_F_DROPOUT] = "dropout_p",
    [APIP_F_ENABLE_GQA] = "enable_gqa",
};

/* A decode session's append (POST /v1/sessions/{id}): its new rows and the options of their
 * reply; causal is accepted (true only: a session is causal). */
static const char *const append_fields[APIP_F_COUNT] = {
    [APIP_F_QUERY] = "query",
    [APIP_F_KEY] = "key",
    [APIP_F_VALUE] = "value",
    [APIP_F_CAUSAL] = "causal",
    [APIP_F_NEED_WEIGHTS] = "need_weights",
    [APIP_F_HEADS] = "heads",
    [APIP_F_TOP_K] = "weights_top_k",
    [APIP_F_ENCODING] = "encoding",
    [APIP_F_TOKENS] = "tokens",
    [APIP_F_TEXT] = "text",
    [APIP_F_ADD_SPECIAL] = "add_special_tokens",
    [APIP_F_TRACE] = "trace",
    [APIP_F_OUTPUTS] = "outputs",
    [APIP_F_EXPECTED_LENGTH] = "expected_length",
};

/* A decode session's open (POST /v1/sessions). */
static const char *const open_fields[APIP_F_COUNT] = {
    [APIP_F_MODEL] = "model",         [APIP_F_PARAMS] = "params",
    [APIP_F_CAUSAL] = "causal",       [APIP_F_MAX_LENGTH] = "max_length",
    [APIP_F_EMBED_DIM] = "embed_dim",
};

/* 400 invalid_field naming field, with a printf-style message; returns -1 (api_fail). */
#define bad(r, field, ...) api_fail((r)->err, 400, "invalid_field", (field), __VA_ARGS__)

static const char *endpoint(const apip_req *r) {
    if (r->opening)
        return "POST /v1/sessions";
    if (r->given && r->given->session)
        return "an append (POST /v1/sessions/{id})";
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
int apip_fields_uint(apip_req *r, const char *v, const char *field, uint64_t lo, uint64_t hi,
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

int apip_fields_int(apip_req *r, const char *v, const char *field, long long lo, long long hi,
                    long long *out) {
    uint64_t x = 0;
    if (apip_fields_uint(r, v, field, (uint64_t)lo, (uint64_t)hi, &x))
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

int apip_fields_over_heads(apip_req *r, const char *field, size_t h) {
    return api_fail(r->err, 413, "job_too_large", field,
                    "%s asks for %zu heads, over the max_heads limit of %zu", field, h,
                    r->lim->max_heads);
}

/* Learns the shape of the tensor field name at val: probed here (query, key and value may be
 * seeded), or given already probed (its dimensions were checked against max_dim and its bytes
 * against size_t by its codec). */
int apip_fields_probe(apip_req *r, apip_tensor_in *t, const char *name, const char *val,
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

void apip_fields_shape_of(char *out, size_t cap, const apip_tensor_in *t) {
    apip_dims_str(out, cap, t->dims, t->rank);
}

/* ---- PyTorch's names ---------------------------------------------------------------------- */

/* A boolean field at v (present): 1 for true, 0 for false, -1 with a 400 naming it otherwise. */
int apip_fields_bool(apip_req *r, const char *v, const char *field, const char *means) {
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
        int b = apip_fields_bool(r, bf, "batch_first",
                                 " (true, the default: (N, L, E); false: (L, N, E), as "
                                 "nn.MultiheadAttention(batch_first=False))");
        if (b < 0)
            return -1;
        r->seq_first = b == 0; /* until the query's rank is known: a rank-2 query has no N */
    }
    return 0;
}

int apip_req_read(apip_req *r, const apip_json_root *root, const api_registry *models) {
    const bool append = r->given && r->given->session;
    r->names = r->opening             ? open_fields
               : append               ? append_fields
               : r->op == API_OP_SDPA ? sdpa_fields
                                      : attention_fields;
    if (map_fields(r, root) || one_name_each(r))
        return -1;
    if (r->opening)
        return apip_fields_open(r, models);
    if (append)
        return apip_fields_append(r) || apip_fields_masks_and_options(r) ? -1 : 0;
    if (r->op == API_OP_SDPA) {
        if (apip_fields_sdpa_inputs(r))
            return -1;
    } else if (apip_fields_attention_inputs(r) || apip_fields_attention_model(r, models) ||
               apip_fields_attention_params(r)) {
        return -1;
    }
    if (apip_fields_masks_and_options(r) || (r->op == API_OP_ATTENTION && apip_fields_stack(r)))
        return -1;
    const char *v = r->f[APIP_F_OUTPUTS];
    return v ? apip_outputs_read(v, r->weights, r->trace, r->pred_k > 0, &r->omit, r->err) : 0;
}
