/* fuzz_api.h - what the API fuzz targets (fuzz_request.c, fuzz_v2.c) share: their registry of
 * models (demo, lesson and a tiny one) and the two sets of limits they parse under. */
#ifndef ATTND_FUZZ_API_H
#define ATTND_FUZZ_API_H

#include "api.h"
#include "codec.h"
#include "models.h"
#include "fuzz.h"

/* A model "tiny" of E = 4, H = 2, kdim 3, vdim 2 with biases, its weights small fixed values:
 * element i of weight t is ((i * mul + t * 3) % mod) / mod - 0.5. */
static inline api_model *fuzz_tiny_model(unsigned mul, unsigned mod) {
    api_error e = {0};
    api_model *m = apip_model_alloc("tiny", "builtin", 4, 2, 3, 2, false, true, true, false, &e);
    FUZZ_CHECK(m != NULL, "tiny model: %s", e.message);
    const attn_mha_params *p = apip_model_params(m);
    float *w[] = {(float *)p->q_proj_weight,   (float *)p->k_proj_weight,
                  (float *)p->v_proj_weight,   (float *)p->in_proj_bias,
                  (float *)p->out_proj_weight, (float *)p->out_proj_bias};
    size_t n[] = {16, 12, 8, 12, 16, 4};
    for (size_t t = 0; t < sizeof n / sizeof n[0]; t++)
        for (size_t i = 0; i < n[t]; i++)
            w[t][i] = (float)((i * mul + t * 3) % mod) / (float)mod - 0.5f;
    return m;
}

/* The registry (demo, lesson, tiny) into *models; roomy limits (1 MiB jobs, dimensions up to
 * 4096, 64 heads) and tight ones (8 KiB, 8, 2 heads, depth 5). */
static inline void fuzz_api_setup(api_model *tiny, api_registry **models, api_limits *roomy,
                                  api_limits *tight) {
    api_error e = {0};
    *models = api_registry_create();
    FUZZ_CHECK(*models != NULL, "no registry");
    FUZZ_CHECK(api_registry_add(*models, api_model_demo(&e), &e) == 0, "demo: %s", e.message);
    FUZZ_CHECK(api_registry_add(*models, api_model_lesson(&e), &e) == 0, "lesson: %s", e.message);
    FUZZ_CHECK(api_registry_add(*models, tiny, &e) == 0, "tiny: %s", e.message);
    *roomy = api_limits_default();
    roomy->max_job_bytes = (size_t)1 << 20;
    roomy->max_dim = 4096;
    roomy->max_heads = 64;
    *tight = *roomy;
    tight->max_job_bytes = (size_t)8 << 10;
    tight->max_dim = 8;
    tight->max_heads = 2;
    tight->max_depth = 5;
}

/* The error record of a refusal is complete, and the error body that write_body makes of it
 * (api_error_body for API v1, api_v2_error_body for the Open Inference Protocol) is JSON. A
 * session's request (conflicts) may also get 409 (length_mismatch, session_full). */
static inline void fuzz_check_refusal_of(const api_error *e,
                                         void (*write_body)(const api_error *, api_buf *),
                                         bool conflicts) {
    FUZZ_CHECK(e->status == 400 || e->status == 404 || e->status == 413 ||
                   (conflicts && e->status == 409),
               "refused with status %d (%s: %s)", e->status, e->code, e->message);
    FUZZ_CHECK(e->code[0] && e->message[0], "refusal without code or message (status %d)",
               e->status);
    api_buf b = {0};
    write_body(e, &b);
    api_error je = {0};
    FUZZ_CHECK(!b.failed && apip_json_check(b.data, b.len, "the error body", NULL, &je) == 0,
               "error body is not JSON: %s", je.message);
    api_buf_free(&b);
}

static inline void fuzz_check_refusal(const api_error *e,
                                      void (*write_body)(const api_error *, api_buf *)) {
    fuzz_check_refusal_of(e, write_body, false);
}

#endif
