/* request.h - the record of an API v1 request (or of what another codec maps onto one) on its
 * way to a job: shared by fields.c, which fills it from the request's fields, and request.c,
 * which lays out the job's arena, decodes the tensors into it and plans the job. Private to
 * those two files.
 *
 * Legend: N batch, L query length, S key length, E embedding width, H heads, kdim/vdim key and
 * value widths, D/Dv the SDPA query-key and value widths, K the top-k count. */
#ifndef ATTND_API_REQUEST_H
#define ATTND_API_REQUEST_H

#include "v1.h"

/* The fields of a request (fields.c names them per endpoint). */
enum {
    APIP_F_QUERY, /* "query" or "q" */
    APIP_F_KEY,   /* "key" or "k" */
    APIP_F_VALUE, /* "value" or "v" */
    APIP_F_MODEL,
    APIP_F_PARAMS,
    APIP_F_SCALE,
    APIP_F_CAUSAL,
    APIP_F_KEY_LENGTHS,
    APIP_F_KEY_MASK,
    APIP_F_ATTN_MASK,
    APIP_F_ATTN_BIAS,
    APIP_F_NEED_WEIGHTS,
    APIP_F_HEADS,
    APIP_F_TOP_K,
    APIP_F_ENCODING,
    APIP_F_TOKENS, /* attention on a model with a vocabulary: words instead of query */
    APIP_F_TEXT,
    APIP_F_ADD_SPECIAL, /* "add_special_tokens": with tokens or text, the model's start token */
    APIP_F_TRACE,       /* "trace": true, every step of the attention in the response */
    /* PyTorch's names with PyTorch's meanings (nn.MultiheadAttention.forward's arguments), each
     * refused beside attnd's name for the same thing: */
    APIP_F_BATCH_FIRST,      /* "batch_first": false = (L, N, E) in and out */
    APIP_F_KEY_PADDING_MASK, /* "key_padding_mask": true = ignore (key_mask inverted) */
    APIP_F_TORCH_ATTN_MASK,  /* "torch_attn_mask": bool, true = blocked (attn_mask inverted) */
    APIP_F_IS_CAUSAL,        /* "is_causal": true = causal top-left */
    APIP_F_AVG_WEIGHTS,      /* "average_attn_weights": with need_weights true, mean or per head */
    APIP_F_OUTPUTS,          /* "outputs": the tensors the reply carries (outputs.c) */
    APIP_F_DROPOUT,          /* "dropout" (attention), "dropout_p" (SDPA): only 0, inference */
    APIP_F_ENABLE_GQA,       /* "enable_gqa" (SDPA): k and v with fewer heads than q */
    APIP_F_ADD_ZERO_ATTN,    /* "add_zero_attn" (attention): a zero key and value appended */
    /* A model of layers (fields_stack.c): */
    APIP_F_LAYERS,        /* "layers": the layers whose weights and trace the reply carries */
    APIP_F_PREDICT_TOP_K, /* "predict_top_k": next-token predictions per row (an unembedding) */
    /* A decode session's (fields_session.c): */
    APIP_F_EXPECTED_LENGTH, /* an append's "expected_length": the session's rows before it */
    APIP_F_MAX_LENGTH,      /* an open's "max_length": the most rows the session holds */
    APIP_F_EMBED_DIM,       /* an open's "embed_dim": E of params "init" (no tensor says it) */
    APIP_F_COUNT
};

/* Everything learnt from a request before its arena exists. */
typedef struct apip_req {
    api_op op;
    const api_limits *lim;
    api_error *err;
    const char *const *names;
    const char *f[APIP_F_COUNT]; /* each field's value, NULL when absent or null */

    apip_tensor_in x[3]; /* query, key, value (or q, k, v) */
    bool has_k, has_v;
    size_t rank; /* of query / q */
    size_t n, h, l, s, e, kdim, vdim, d, dv;
    size_t hkv;      /* SDPA: the heads of k and v (grouped-query attention: fewer than H) */
    bool bias_kv;    /* attention: bias_k and bias_v appended as a key and value */
    bool zero_attn;  /* attention: add_zero_attn, a zero key and value after them */
    size_t kv_extra; /* the keys appended: the weights and the trace have S + kv_extra */

    const api_model *model;  /* attention with a registry model */
    const apip_stack *stack; /* ... that is a model of layers (its stack); NULL otherwise */
    size_t n_keep;           /* Ls: the layers the reply carries ("layers", or every one) */
    size_t pred_k;           /* K of "predict_top_k": predictions per row; 0: none */
    int init;                /* APIP_INIT_* for inline params */
    uint64_t seed;
    apip_tensor_in p[APIP_P_COUNT];
    bool has_p[APIP_P_COUNT];
    bool packed; /* in_proj_weight (or init) rather than q/k/v_proj_weight */

    attn_causal causal;
    size_t n_key_lengths; /* 0 or N */
    apip_tensor_in km, am, ab;
    bool has_km, has_am, has_ab;
    size_t km_n, am_n, am_h, ab_n, ab_h;
    bool km_torch, am_torch; /* key_padding_mask, torch_attn_mask: PyTorch's polarity, true =
                                blocked; inverted into attnd's 1 = may attend when decoded */
    bool km_float;           /* key_padding_mask is PyTorch's float mask: added to the scores
                                (libattn's key_bias), decoded as floats */
    /* "batch_first": false with a rank-3 query: query (L, N, E), key and value (S, N, width)
     * and the output (L, N, E), as nn.MultiheadAttention(batch_first=False); decoded into and
     * computed in attnd's (N, L, E) through a scratch of seq_floats floats. */
    bool seq_first;

    attn_weights_mode weights;
    size_t n_heads; /* 0 = all */
    size_t top_k;
    bool has_scale;
    float scale;
    bool base64;
    bool trace;            /* "trace": true */
    unsigned omit;         /* "outputs": the APIP_OMIT_* bits of the tensors the reply leaves out */
    bool words;            /* "tokens" or "text": query is made from them (L words, N = 1) */
    bool add_special;      /* words: the model's start token (if any) leads them; default true */
    apip_job_given *given; /* what another codec adds (apip_job_parse_given); NULL for v1 */
    /* Decode sessions (fields_session.c): the body is an open's (POST /v1/sessions), or with
     * given->session an append's; at is the session's rows before the append. */
    bool opening;
    size_t at;
    size_t max_length; /* an open's: the rows the session holds at most */
} apip_req;

/* Reads every field of the request whose root object is root into r (r->op, lim, err and given
 * set, the rest zeroed): maps the fields (unknown ones are refused), learns every tensor's shape
 * (and for attention the model and its words) and checks every field and their agreement,
 * allocating nothing. 0, or -1 with r->err: the first error found, in the order the checks are
 * written. */
int apip_req_read(apip_req *r, const apip_json_root *root, const api_registry *models);

/* The value of an integer field that apip_req_read accepted. */
uint64_t apip_req_int(const char *v);

/* The next index of the heads field: an element of its array, or with given->heads_csv a run
 * of digits of its string ("0,2", spaces allowed around each). 1 with *el at it, 0 at the end,
 * -1 with err when the string is not such a list. *it starts at the field's value. */
int apip_req_heads_next(apip_req *r, const char **it, const char **el);

/* ---- Reading the fields: fields.c's helpers, and the groups of fields_inputs.c and
 * fields_masks.c (each 0, or -1 with r->err naming the field) --------------------------- */

/* An integer field in [lo, hi], under the one rule of apip_jv_int: any number with an integral
 * value (2, 2.0 and 2e0 alike). */
int apip_fields_uint(apip_req *r, const char *v, const char *field, uint64_t lo, uint64_t hi,
                     uint64_t *out);
int apip_fields_int(apip_req *r, const char *v, const char *field, long long lo, long long hi,
                    long long *out);

/* 413 job_too_large: field asks for h heads, over max_heads. Returns -1. */
int apip_fields_over_heads(apip_req *r, const char *field, size_t h);

/* Learns the shape of the tensor field name at val: probed here (query, key and value may be
 * seeded), or given already probed by another codec; at most max_rank. */
int apip_fields_probe(apip_req *r, apip_tensor_in *t, const char *name, const char *val,
                      size_t max_rank);

/* t's dims as "(2, 3, 4)" in out. */
void apip_fields_shape_of(char *out, size_t cap, const apip_tensor_in *t);

/* A boolean field at v (present): 1 for true, 0 for false, -1 with a 400 naming it (what it
 * means, for the message) otherwise. */
int apip_fields_bool(apip_req *r, const char *v, const char *field, const char *means);

/* Attention's inputs (query, key, value, or the words), its model, its params (fields_inputs.c). */
int apip_fields_attention_inputs(apip_req *r);
int apip_fields_attention_model(apip_req *r, const api_registry *models);
int apip_fields_attention_params(apip_req *r);

/* A model of layers' own fields, layers and predict_top_k, and its trace's size; "layers" and
 * "predict_top_k" refused on other models (fields_stack.c). */
int apip_fields_stack(apip_req *r);

/* SDPA's q, k and v (fields_inputs.c). */
int apip_fields_sdpa_inputs(apip_req *r);

/* The masks and options, against the shapes learnt (fields_masks.c). */
int apip_fields_masks_and_options(apip_req *r);

/* A decode session's (fields_session.c): an append's inputs (query rows, or the words of a
 * model with a vocabulary, from the session's length on) against the session given, its
 * causal (true only) and expected_length; an open's model or params (E from the tensors, or
 * embed_dim with init), its causal and max_length. */
int apip_fields_append(apip_req *r);
int apip_fields_open(apip_req *r, const api_registry *models);

#endif
