/* v1_outputs.c - API v1's "outputs": a reply that leaves tensors out carries the others as the
 * full reply does, the same usage (flops and workspace; job_bytes less the bytes of the reply's
 * bound it saves), the job computed as without it (its output, weights and trace in the arena
 * equal the full job's), and a bound (api_job_response_bytes) that no longer grows with the job:
 * under 4 KiB for a job whose full reply could take megabytes. Bad values are data cases
 * (tests/api_cases/requests/.../outputs-*.case).
 *
 * Legend: N batch, H heads, L query length, S key length, E embedding width, D/Dv SDPA widths. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "job.h"
#include "api_test.h"

/* A job parsed from body with ",\"outputs\":OUTPUTS" (NULL: none) added before its last '}'. */
static api_job *parse_with(api_op op, const char *body, const char *outputs,
                           const api_registry *models, const api_limits *lim, api_error *e) {
    sb b = {0};
    size_t n = strlen(body) - 1; /* the closing brace */
    sb_add(&b, "%.*s", (int)n, body);
    if (outputs)
        sb_add(&b, ",\"outputs\":%s", outputs);
    sb_add(&b, "}");
    api_job *job = api_job_parse(op, b.s, b.n, models, lim, e);
    free(b.s);
    return job;
}

/* The reply of a job that has run, parsed; NULL when it is not JSON. */
static json_t *reply_of(api_job *job, size_t *len) {
    api_buf out = {0};
    api_error e = {0};
    api_job_respond(job, 1.0, 2.0, &out, &e);
    json_error_t je;
    json_t *j = e.status ? NULL : json_loadb(out.data, out.len, 0, &je);
    *len = out.len;
    api_buf_free(&out);
    return j;
}

static bool same_floats(const float *a, const float *b, size_t n) {
    return (!a && !b) || (a && b && memcmp(a, b, n * sizeof *a) == 0);
}

static size_t elems(const size_t *dims, size_t rank) {
    size_t n = rank ? 1 : 0;
    for (size_t i = 0; i < rank; i++)
        n *= dims[i];
    return n;
}

static bool same_json(const json_t *a, const json_t *b) {
    return (!a && !b) || (a && b && json_equal(a, b));
}

typedef struct outputs_case {
    api_op op;
    const char *body; /* a JSON object */
    const char *outputs;
    bool output, weights, trace; /* what the reply with outputs carries */
} outputs_case;

static const outputs_case CASES[] = {
    {API_OP_SDPA,
     "{\"q\":{\"init\":\"uniform\",\"seed\":1,\"shape\":[2,5,8]},\"k\":{\"init\":\"uniform\","
     "\"seed\":2,\"shape\":[2,7,8]},\"v\":{\"init\":\"uniform\",\"seed\":3,\"shape\":[2,7,3]},"
     "\"need_weights\":true}",
     "[]", false, false, false},
    {API_OP_SDPA,
     "{\"q\":{\"init\":\"uniform\",\"seed\":1,\"shape\":[2,5,8]},\"k\":{\"init\":\"uniform\","
     "\"seed\":2,\"shape\":[2,7,8]},\"v\":{\"init\":\"uniform\",\"seed\":3,\"shape\":[2,7,3]},"
     "\"need_weights\":true,\"trace\":true}",
     "[\"weights\"]", false, true, false},
    {API_OP_SDPA,
     "{\"q\":{\"init\":\"uniform\",\"seed\":1,\"shape\":[5,8]},\"k\":{\"init\":\"uniform\","
     "\"seed\":2,\"shape\":[7,8]},\"v\":{\"init\":\"uniform\",\"seed\":3,\"shape\":[7,3]},"
     "\"need_weights\":true,\"weights_top_k\":3,\"trace\":true,\"encoding\":\"base64\"}",
     "[\"trace\",\"output\"]", true, false, true},
    {API_OP_ATTENTION,
     "{\"query\":{\"init\":\"uniform\",\"seed\":4,\"shape\":[3,2,64]},\"batch_first\":false,"
     "\"need_weights\":\"per_head\",\"heads\":[1,3]}",
     "[]", false, false, false},
    {API_OP_ATTENTION,
     "{\"query\":{\"init\":\"uniform\",\"seed\":4,\"shape\":[3,2,64]},\"batch_first\":false,"
     "\"need_weights\":true,\"trace\":true}",
     "[\"weights\"]", false, true, false},
    {API_OP_ATTENTION,
     "{\"model\":\"lesson\",\"text\":\"程序员把服务器日志发给同事\",\"need_weights\":\"per_head\","
     "\"trace\":true}",
     "[\"output\"]", true, false, false},
    {API_OP_ATTENTION,
     "{\"model\":\"lesson\",\"text\":\"程序员把服务器日志发给同事\",\"need_weights\":\"mean\"}",
     "[\"output\",\"weights\"]", true, true, false},
};

/* Each case against the same job without outputs. */
static void outputs_against_full(const api_registry *models) {
    api_limits lim = api_limits_default();
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        const outputs_case *k = &CASES[c];
        api_error ef = {0}, es = {0};
        api_job *full = parse_with(k->op, k->body, NULL, models, &lim, &ef);
        api_job *sel = parse_with(k->op, k->body, k->outputs, models, &lim, &es);
        CHECK(full && sel, "outputs case %zu parses: %s / %s", c, ef.message, es.message);
        if (!full || !sel) {
            api_job_destroy(full);
            api_job_destroy(sel);
            continue;
        }
        bool all = k->output && (k->weights || !full->w_rank) && (k->trace || !full->traced);
        CHECK(all ? api_job_response_bytes(sel) == api_job_response_bytes(full)
                  : api_job_response_bytes(sel) < api_job_response_bytes(full),
              "outputs case %zu: a bound of %zu against the full reply's %zu", c,
              api_job_response_bytes(sel), api_job_response_bytes(full));
        CHECK(api_job_run(full, NULL, &ef) == 0 && api_job_run(sel, NULL, &es) == 0,
              "outputs case %zu runs", c);
        /* Computed as without outputs: the same output, weights and trace in the arena. */
        CHECK(same_floats(full->out, sel->out, elems(full->out_dims, full->out_rank)) &&
                  same_floats(full->wout.values, sel->wout.values,
                              elems(full->w_dims, full->w_rank)) &&
                  full->traced == sel->traced &&
                  same_floats(full->trace.weights, sel->trace.weights,
                              elems(full->tr_maps, full->tr_rank)),
              "outputs case %zu: the job is computed as without outputs", c);
        size_t lf = 0, ls = 0;
        json_t *jf = reply_of(full, &lf), *js = reply_of(sel, &ls);
        CHECK(jf && js, "outputs case %zu: both replies are JSON", c);
        CHECK(ls <= api_job_response_bytes(sel), "outputs case %zu: %zu bytes for a bound of %zu",
              c, ls, api_job_response_bytes(sel));
        if (jf && js) {
            static const char *const tensors[] = {"output", "weights", "trace"};
            const bool want[] = {k->output, k->weights, k->trace};
            for (int t = 0; t < 3; t++) {
                json_t *f = json_object_get(jf, tensors[t]), *s = json_object_get(js, tensors[t]);
                CHECK(want[t] ? f && same_json(f, s) : s == NULL, "outputs case %zu (%s): %s %s", c,
                      k->outputs, tensors[t],
                      want[t] ? "differs from the full reply's" : "is in the reply");
            }
            /* Everything but the tensors is the full reply's: the metadata, and usage but for
             * job_bytes, which counts the smaller reply bound. */
            const char *key;
            json_t *v;
            json_object_foreach(jf, key, v) {
                if (!strcmp(key, "output") || !strcmp(key, "weights") || !strcmp(key, "trace"))
                    continue;
                if (strcmp(key, "usage") != 0) {
                    CHECK(same_json(v, json_object_get(js, key)),
                          "outputs case %zu: %s differs from the full reply's", c, key);
                    continue;
                }
                json_t *u = json_object_get(js, "usage");
                CHECK(u && json_equal(json_object_get(v, "flops"), json_object_get(u, "flops")) &&
                          json_equal(json_object_get(v, "workspace_bytes"),
                                     json_object_get(u, "workspace_bytes")) &&
                          json_integer_value(json_object_get(v, "job_bytes")) -
                                  json_integer_value(json_object_get(u, "job_bytes")) ==
                              (json_int_t)(api_job_response_bytes(full) -
                                           api_job_response_bytes(sel)),
                      "outputs case %zu: usage differs from the full reply's", c);
            }
            CHECK(json_object_size(js) + (k->output ? 0 : 1) +
                          (k->weights || !json_object_get(jf, "weights") ? 0 : 1) +
                          (k->trace || !json_object_get(jf, "trace") ? 0 : 1) ==
                      json_object_size(jf),
                  "outputs case %zu: the reply has members the full one lacks", c);
        }
        json_decref(jf);
        json_decref(js);
        api_job_destroy(full);
        api_job_destroy(sel);
    }
}

/* A large job: with "outputs": [] its reply bound is a few hundred bytes whatever its size, so
 * it fits a max_job_bytes its full reply does not, and the server reserves next to nothing. */
static void outputs_bound(void) {
    const char *body =
        "{\"q\":{\"init\":\"uniform\",\"seed\":1,\"shape\":[2,4,4096,64]},"
        "\"k\":{\"init\":\"uniform\",\"seed\":2,\"shape\":[2,4,4096,64]},"
        "\"v\":{\"init\":\"uniform\",\"seed\":3,\"shape\":[2,4,4096,64]},\"need_weights\":true}";
    api_limits lim = api_limits_default();
    lim.max_job_bytes = SIZE_MAX / 2;
    api_error e = {0};
    api_job *full = parse_with(API_OP_SDPA, body, NULL, NULL, &lim, &e);
    api_job *none = parse_with(API_OP_SDPA, body, "[]", NULL, &lim, &e);
    CHECK(full && none, "the large jobs parse: %s", e.message);
    size_t rf = api_job_response_bytes(full), rn = api_job_response_bytes(none);
    CHECK(rn > 0 && rn < 4096 && rf > ((size_t)1 << 30), "a reply bound of %zu, %zu in full", rn,
          rf);
    /* Only the reply's bound differs: the arena holds the same outputs and weights. */
    CHECK(full && none && full->need_bytes == none->need_bytes, "the same arena");
    lim.max_job_bytes = none ? none->need_bytes + rn : 1;
    api_job_destroy(full);
    api_job_destroy(none);
    e = (api_error){0};
    full = parse_with(API_OP_SDPA, body, NULL, NULL, &lim, &e);
    CHECK(!full && e.status == 413, "the full reply is over max_job_bytes: %d", e.status);
    e = (api_error){0};
    none = parse_with(API_OP_SDPA, body, "[]", NULL, &lim, &e);
    CHECK(none != NULL, "the job without its tensors fits exactly: %s", e.message);
    api_job_destroy(full);
    api_job_destroy(none);
    /* ["weights"] alone: the bound of the weights, not of the output. */
    lim = api_limits_default();
    lim.max_job_bytes = SIZE_MAX / 2;
    api_job *w = parse_with(API_OP_SDPA, body, "[\"weights\"]", NULL, &lim, &e);
    api_job *o = parse_with(API_OP_SDPA, body, "[\"output\"]", NULL, &lim, &e);
    CHECK(w && o && api_job_response_bytes(w) + api_job_response_bytes(o) > rf &&
              api_job_response_bytes(w) + api_job_response_bytes(o) < rf + 4096 &&
              api_job_response_bytes(o) < rf / 50,
          "the bounds of weights (%zu) and output (%zu) make up the full one's (%zu)",
          api_job_response_bytes(w), api_job_response_bytes(o), rf);
    api_job_destroy(w);
    api_job_destroy(o);
}

void test_outputs(void) {
    api_registry *models = builtin_registry();
    outputs_against_full(models);
    outputs_bound();
    api_registry_destroy(models);
}
