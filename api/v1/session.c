/* session.c - API v1's decode sessions: POST /v1/sessions (api_session_open: the body read by
 * fields_session.c, the session opened in the store, its inline parameters decoded into its
 * block, the 201 body) and POST /v1/sessions/{id} (api_session_append: the session taken from
 * the store, then the append's job made by request.c on it). GET and DELETE are the store's
 * (api/session/store.c).
 *
 * Legend: E embedding width, H heads, kdim/vdim key and value widths. */
#include <string.h>

#include "v1.h"
#include "request.h"

/* The limits of a request, as apip_job_parse_given settles them (nslots at least 1, max_heads
 * at most API_MAX_HEADS). */
static api_limits settled(const api_limits *lim) {
    api_limits l = lim ? *lim : api_limits_default();
    l.nslots = l.nslots ? l.nslots : 1;
    l.max_heads = l.max_heads < API_MAX_HEADS ? l.max_heads : API_MAX_HEADS;
    return l;
}

/* The inline params of r decoded into the session's block, its params pointing at them; with
 * init, room for them (the first append makes them); a model's are the model's. 0, or -1 with
 * err. */
static int open_params(const apip_req *r, apip_session *s, api_error *err) {
    if (r->model) /* the model's, borrowed (apip_session_open) */
        return 0;
    if (r->init) {
        s->init = r->init;
        s->seed = r->seed;
        s->params_ready = false;
        return 0;
    }
    const float *pp[APIP_P_COUNT] = {NULL};
    float *at = s->param_block;
    for (int i = 0; i < APIP_P_COUNT; i++) {
        if (!r->has_p[i])
            continue;
        if (apip_tensor_read(&r->p[i], APIP_TENSOR_FLOAT, at, err))
            return -1;
        pp[i] = at;
        at += r->p[i].count;
    }
    s->params = (attn_mha_params){.in_proj_weight = pp[APIP_P_IN_W],
                                  .in_proj_bias = pp[APIP_P_IN_B],
                                  .out_proj_weight = pp[APIP_P_OUT_W],
                                  .out_proj_bias = pp[APIP_P_OUT_B],
                                  .q_proj_weight = pp[APIP_P_Q_W],
                                  .k_proj_weight = pp[APIP_P_K_W],
                                  .v_proj_weight = pp[APIP_P_V_W]};
    s->params_ready = true;
    return 0;
}

int api_session_open(api_sessions *st, uint32_t owner, const char *body, size_t len,
                     const api_registry *models, const api_limits *lim, api_buf *out,
                     api_error *err) {
    api_limits l = settled(lim);
    apip_json_root root;
    if (apip_json_check_depth(body, len, "the request body", l.max_depth, &root, err))
        return -1;
    apip_req rq = {.op = API_OP_ATTENTION, .lim = &l, .err = err, .opening = true}, *r = &rq;
    if (apip_req_read(r, &root, models))
        return -1;
    if (!st)
        return api_fail(err, 503, "session_limit", NULL, "this server holds no sessions");
    apip_session_spec spec = {.model = r->model,
                              .e = r->e,
                              .h = r->h,
                              .kdim = r->kdim,
                              .vdim = r->vdim,
                              .cap = r->max_length};
    if (r->init)
        spec.param_floats = 4 * r->e * r->e; /* in_proj (3E, E), out_proj (E, E) */
    for (int i = 0; i < APIP_P_COUNT; i++)
        spec.param_floats += r->has_p[i] ? r->p[i].count : 0;
    apip_session *s = NULL;
    if (apip_session_open(st, &spec, owner, l.max_job_bytes, &s, err))
        return -1;
    if (open_params(r, s, err)) {
        apip_session_discard(s);
        return -1;
    }
    apip_session_publish(s, out, false);
    if (out->failed)
        return api_fail(err, 500, "out_of_memory", NULL, "out of memory writing the reply");
    return 0;
}

api_job *api_session_append(api_sessions *st, uint32_t owner, const char *id, const char *body,
                            size_t len, const api_registry *models, const api_limits *lim,
                            api_error *err) {
    api_limits l = settled(lim);
    apip_json_root root;
    if (apip_json_check_depth(body, len, "the request body", l.max_depth, &root, err))
        return NULL;
    apip_session *s = NULL;
    if (!st) {
        api_session_unknown(err);
        return NULL;
    }
    if (apip_session_take(st, id, strlen(id), owner, &s, err))
        return NULL;
    apip_job_given given = {.session = s};
    api_job *job = apip_job_parse_given(API_OP_ATTENTION, &root, &given, models, &l, err);
    if (!job)
        apip_session_give(s, false, false);
    return job;
}
