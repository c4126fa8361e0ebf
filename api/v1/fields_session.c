/* fields_session.c - the fields of a decode session's requests, for fields.c: an open's model
 * or inline params (E from the tensors, or embed_dim with params init), its causal and
 * max_length (POST /v1/sessions); an append's new rows (query, key and value rows, or the words
 * of the session's model from its length on), its causal and expected_length, against the
 * session the caller has taken (POST /v1/sessions/{id}, and v2's sequences). Nothing is
 * allocated.
 *
 * Legend: L the rows an append brings, E embedding width, H heads, kdim/vdim key and value
 * widths, at the session's rows before an append, cap its max_length. */
#include <stdio.h>
#include <string.h>

#include "v1.h"
#include "request.h"

/* 400 invalid_field naming field, with a printf-style message; returns -1 (api_fail). */
#define bad(r, field, ...) api_fail((r)->err, 400, "invalid_field", (field), __VA_ARGS__)

/* causal at v (present): true, "top_left" or "bottom_right" (for a session they are one: every
 * row attends the rows before it and itself); false is refused. */
static int causal_field(apip_req *r, const char *v) {
    char k = apip_jv_kind(v);
    bool named = k == '"' && (apip_jv_streq(apip_jv_string(v), "top_left") ||
                              apip_jv_streq(apip_jv_string(v), "bottom_right"));
    if (k == 't' || named)
        return 0;
    if (k == 'f')
        return bad(r, "causal",
                   "a session is causal: each row attends the rows before it and itself (that is "
                   "why its cache is exact); leave causal out, or send true");
    return bad(r, "causal", "causal must be true, \"top_left\" or \"bottom_right\" (or left out)");
}

/* ---- An append ----------------------------------------------------------------------------- */

/* The widths of the rows against the session's: query E, key kdim and value vdim (each
 * defaulting to the one before it, as on /v1/attention). */
static int append_widths(apip_req *r, const apip_session *s) {
    if (r->e != s->e)
        return bad(r, "query", "query has width %zu; the session's rows have E=%zu", r->e, s->e);
    if (r->kdim != s->kdim)
        return bad(r, "key",
                   r->has_k ? "key has width %zu; the session's keys have kdim=%zu"
                            : "key is required: query has width %zu, and the session's keys have "
                              "kdim=%zu",
                   r->kdim, s->kdim);
    if (r->vdim != s->vdim)
        return bad(r, "value",
                   r->has_v ? "value has width %zu; the session's values have vdim=%zu"
                            : "value is required: the default value has width %zu, and the "
                              "session's values have vdim=%zu",
                   r->vdim, s->vdim);
    return 0;
}

int apip_fields_append(apip_req *r) {
    const apip_session *s = r->given->session;
    const char *v;
    r->at = s->cache.len;
    if ((v = r->f[APIP_F_EXPECTED_LENGTH])) { /* first: a retry learns it went through */
        uint64_t want = 0;
        if (apip_fields_uint(r, v, "expected_length", 0, UINT64_MAX, &want))
            return -1;
        if (want != r->at)
            return api_fail(r->err, 409, "length_mismatch", "expected_length",
                            "the session holds %zu rows, not the expected_length %llu: an earlier "
                            "append went through, or another client appends to it; GET the "
                            "session to see its length",
                            r->at, (unsigned long long)want);
    }
    if ((v = r->f[APIP_F_CAUSAL]) && causal_field(r, v))
        return -1;
    if (apip_fields_attention_inputs(r))
        return -1;
    r->model = s->model;
    r->h = s->h;
    if (r->words) {
        if (!s->model || !apip_model_vocab(s->model))
            return bad(r, r->f[APIP_F_TOKENS] ? "tokens" : "text",
                       "the session's %s has no vocabulary, so it takes no words: send query rows "
                       "(L, E)",
                       s->model ? "model" : "params");
        r->e = r->kdim = r->vdim = s->e;
        bool start = r->add_special && r->at == 0; /* the start token leads the sequence only */
        size_t count = 0;
        if (apip_words_count_at(s->model, r->f[APIP_F_TOKENS], r->f[APIP_F_TEXT], start, r->at,
                                r->lim->max_dim, &count, r->err))
            return -1;
        r->add_special = start;
        r->l = count;
        r->x[0].count = count * s->e;
    } else if (r->rank == 3 && r->n != 1) {
        char sh[96];
        apip_fields_shape_of(sh, sizeof sh, &r->x[0]);
        return bad(r, "query",
                   "query has shape %s; a session holds one sequence: send (L, E) or (1, L, E)",
                   sh);
    }
    if (r->has_k && r->s != r->l)
        return bad(r, "key",
                   "key has %zu rows; an append's key and value rows are its new rows, as many "
                   "as query's L=%zu",
                   r->s, r->l);
    if (append_widths(r, s))
        return -1;
    if (r->l > s->cache.cap - r->at)
        return api_fail(r->err, 409, "session_full", NULL,
                        "the session holds %zu of its max_length %zu rows: %zu more do not fit; "
                        "open a new session with a larger max_length and send the prefix again",
                        r->at, s->cache.cap, r->l);
    r->s = r->at + r->l; /* the keys the new rows attend: every row so far */
    return 0;
}

/* ---- An open ------------------------------------------------------------------------------- */

/* E, kdim and vdim of inline params, for apip_fields_attention_params to check them against:
 * from out_proj.weight (E, E), k_proj_weight (E, kdim) and v_proj_weight (E, vdim) as sent, or
 * with init from embed_dim. 0, or -1 with r->err. */
static int params_widths(apip_req *r) {
    const char *it = r->f[APIP_F_PARAMS], *val = NULL, *init = NULL;
    const char *w[3] = {NULL, NULL, NULL}; /* out_proj.weight, k_proj_weight, v_proj_weight */
    apip_span key;
    if (apip_jv_kind(it) == '{')
        while (apip_jv_obj_next(&it, &key, &val)) {
            if (apip_jv_kind(val) == 'n')
                continue;
            if (apip_jv_streq(key, "init"))
                init = val;
            for (int i = 0; i < 3; i++)
                if (apip_jv_streq(key, (const char *[]){"out_proj.weight", "k_proj_weight",
                                                        "v_proj_weight"}[i]))
                    w[i] = val;
        }
    const char *ed = r->f[APIP_F_EMBED_DIM];
    if (init) {
        uint64_t e = 0;
        if (!ed)
            return bad(r, "embed_dim",
                       "embed_dim is required with params init: no tensor says the width E");
        if (apip_fields_uint(r, ed, "embed_dim", 1, r->lim->max_dim, &e))
            return -1;
        r->e = r->kdim = r->vdim = (size_t)e;
        return 0;
    }
    if (ed)
        return bad(r, "embed_dim",
                   "embed_dim goes only with params init: tensors say their width themselves");
    const char *names[3] = {"params.out_proj.weight", "params.k_proj_weight",
                            "params.v_proj_weight"};
    size_t dim[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        apip_tensor_in t = {0};
        if (!w[i])
            continue;
        if (apip_tensor_probe(&t, names[i], w[i], 2, r->lim->max_dim, r->lim->max_job_bytes,
                              r->err))
            return -1;
        dim[i] = t.dims[t.rank - 1];
        if (i == 0)
            dim[0] = t.dims[0];
    }
    r->e = dim[0];
    r->kdim = dim[1] ? dim[1] : r->e;
    r->vdim = dim[2] ? dim[2] : r->e;
    return 0;
}

/* The registry model named by "model" (or the default). 0, or -1 with r->err. */
static int open_model(apip_req *r, const api_registry *models) {
    const char *v = r->f[APIP_F_MODEL];
    if (v) {
        if (apip_jv_kind(v) != '"')
            return bad(r, "model", "model must be a string: the name of a model (GET /v1/models)");
        r->model = apip_registry_find_json(models, apip_jv_string(v));
        if (!r->model) {
            char name[128];
            apip_jv_decode(apip_jv_string(v), name, sizeof name);
            return api_fail(r->err, 404, "unknown_model", "model",
                            "there is no model named \"%s\"; GET /v1/models lists them", name);
        }
    } else if (!(r->model = api_registry_default(models))) {
        return api_fail(r->err, 404, "unknown_model", "model",
                        "the server holds no default model; give model or params");
    }
    api_model_info mi = api_model_describe(r->model);
    if (mi.add_bias_kv || mi.add_zero_attn)
        return bad(r, "model",
                   "model %s appends keys after its projections (add_bias_kv or add_zero_attn), "
                   "which a session does not hold; use POST /v1/attention",
                   mi.name);
    if (mi.num_heads > r->lim->max_heads)
        return apip_fields_over_heads(r, "model", mi.num_heads);
    r->e = mi.embed_dim;
    r->h = mi.num_heads;
    r->kdim = mi.kdim;
    r->vdim = mi.vdim;
    return 0;
}

int apip_fields_open(apip_req *r, const api_registry *models) {
    const char *v;
    if ((v = r->f[APIP_F_CAUSAL]) && causal_field(r, v))
        return -1;
    if (r->f[APIP_F_MODEL] && r->f[APIP_F_PARAMS])
        return bad(r, "params", "give model or params, not both");
    if (r->f[APIP_F_PARAMS]) {
        if (params_widths(r) || apip_fields_attention_params(r))
            return -1;
        if (r->bias_kv)
            return bad(r, "params.bias_k",
                       "params.bias_k and bias_v (add_bias_kv) append a key after the "
                       "projections, which a session does not hold; use POST /v1/attention");
    } else {
        if (r->f[APIP_F_EMBED_DIM])
            return bad(r, "embed_dim", "embed_dim goes only with params init");
        if (open_model(r, models))
            return -1;
    }
    size_t positions = 0;
    if (r->model)
        apip_model_position_embeddings(r->model, &positions);
    size_t most = positions && positions < r->lim->max_dim ? positions : r->lim->max_dim;
    r->max_length = positions                            ? most
                    : APIP_SESSION_DEFAULT_LENGTH < most ? APIP_SESSION_DEFAULT_LENGTH
                                                         : most;
    if ((v = r->f[APIP_F_MAX_LENGTH])) {
        uint64_t n = 0;
        if (apip_fields_uint(r, v, "max_length", 1, r->lim->max_dim, &n))
            return -1;
        if (positions && n > positions)
            return bad(r, "max_length",
                       "max_length is %llu, but model %s has positions for %zu rows "
                       "(position_embeddings)",
                       (unsigned long long)n, apip_model_name(r->model), positions);
        r->max_length = (size_t)n;
    }
    return 0;
}
