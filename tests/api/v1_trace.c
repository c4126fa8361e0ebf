/* v1_trace.c - "trace": true on POST /v1/attention and /v1/sdpa (api/v1/): the members and their
 * shapes, the seed chapter's example step by step, "-inf" in the masked scores, the same trace
 * in base64, the bound, and the batches a traced job stays out of. The trace's values against
 * float64 on the whole oracle grid are tests/server/trace_oracle.py's. */
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_test.h"

static const char *seed_q = "[[1,1],[0,1],[1,0],[0.5,0.5]]";
static const char *seed_v = "[[1,0],[0,1],[1,1],[0.5,0.5]]";

/* The names of j's members in order, comma-separated, into out. */
static void member_names(const json_t *j, char *out, size_t cap) {
    out[0] = 0;
    for (void *it = json_object_iter((json_t *)j); it;
         it = json_object_iter_next((json_t *)j, it)) {
        size_t at = strlen(out);
        snprintf(out + at, cap - at, "%s%s", at ? "," : "", json_object_iter_key(it));
    }
}

/* The shape of trace member name as "a,b,c". */
static void shape_str(const json_t *tr, const char *name, char *out, size_t cap) {
    size_t dims[8];
    size_t rank = shape_of_json(json_object_get(tr, name), dims);
    out[0] = 0;
    for (size_t i = 0; i < rank && i < 8; i++) {
        size_t at = strlen(out);
        snprintf(out + at, cap - at, "%s%zu", i ? "," : "", dims[i]);
    }
}

/* The seed's SDPA with the causal mask: scores, "-inf" above the diagonal, weights equal to the
 * response's own, and weights x v = output. */
static void trace_seed(bool base64) {
    char body[512];
    snprintf(body, sizeof body,
             "{\"q\":%s,\"k\":%s,\"v\":%s,\"causal\":true,\"need_weights\":true,\"trace\":true%s}",
             seed_q, seed_q, seed_v, base64 ? ",\"encoding\":\"base64\"" : "");
    api_error e = {0};
    json_t *j = request_str(API_OP_SDPA, body, NULL, &e);
    CHECK(j != NULL, "seed sdpa with trace: %s", e.message);
    if (!j)
        return;
    const json_t *tr = json_object_get(j, "trace");
    char names[256];
    member_names(tr, names, sizeof names);
    CHECK(!strcmp(names, "scale,scores,masked_scores,weights"), "sdpa trace members: %s", names);
    CHECK(fabs(json_number_value(json_object_get(tr, "scale")) - 1 / sqrt(2.0)) < 1e-7,
          "sdpa trace scale 1/sqrt(2)");
    float sc[16], ms[16], w[16], rw[16], out[8];
    CHECK(flatten(json_object_get(tr, "scores"), sc, 16) == 16, "scores are (4, 4)");
    CHECK(flatten(json_object_get(tr, "weights"), w, 16) == 16, "trace weights are (4, 4)");
    CHECK(flatten(json_object_get(j, "weights"), rw, 16) == 16, "weights are (4, 4)");
    CHECK(flatten(json_object_get(j, "output"), out, 8) == 8, "output is (4, 2)");
    const json_t *m = json_object_get(tr, "masked_scores");
    if (base64) {
        CHECK(flatten(m, ms, 16) == 16, "masked scores in base64 are (4, 4)");
    } else { /* nested arrays with "-inf" strings: read cell by cell */
        for (size_t i = 0; i < 16; i++) {
            const json_t *c = json_array_get(json_array_get(m, i / 4), i % 4);
            ms[i] = json_is_string(c) && !strcmp(json_string_value(c), "-inf") ? -INFINITY
                    : json_is_number(c) ? (float)json_number_value(c)
                                        : NAN;
        }
    }
    const double x[4][2] = {{1, 1}, {0, 1}, {1, 0}, {0.5, 0.5}};
    const double vv[4][2] = {{1, 0}, {0, 1}, {1, 1}, {0.5, 0.5}};
    double err_s = 0, err_w = 0, err_o = 0;
    int inf_ok = 1;
    for (int i = 0; i < 4; i++) {
        double o[2] = {0, 0};
        for (int k = 0; k < 4; k++) {
            double s = (x[i][0] * x[k][0] + x[i][1] * x[k][1]) / sqrt(2.0);
            err_s = fmax(err_s, fabs((double)sc[i * 4 + k] - s));
            if (k > i)
                inf_ok &= isinf(ms[i * 4 + k]) && ms[i * 4 + k] < 0 && w[i * 4 + k] == 0;
            else
                err_s = fmax(err_s, fabs((double)ms[i * 4 + k] - s));
            err_w = fmax(err_w, fabs((double)(w[i * 4 + k] - rw[i * 4 + k])));
            o[0] += (double)w[i * 4 + k] * vv[k][0];
            o[1] += (double)w[i * 4 + k] * vv[k][1];
        }
        err_o =
            fmax(err_o, fmax(fabs(o[0] - (double)out[i * 2]), fabs(o[1] - (double)out[i * 2 + 1])));
    }
    CHECK(err_s < 1e-6, "%s: scores and masked scores off by %g", base64 ? "base64" : "json",
          err_s);
    CHECK(inf_ok, "%s: the masked scores are -inf above the diagonal, the weights 0",
          base64 ? "base64" : "json");
    CHECK(err_w < 1e-6, "trace weights against the response's weights: %g", err_w);
    CHECK(err_o < 1e-6, "trace weights x v against the output: %g", err_o);
    /* Row 2, the chapter's: weights 0.40, 0.20, 0.40 over the three keys it may see. */
    CHECK(fabsf(w[8] - 0.401f) < 1e-3f && fabsf(w[9] - 0.198f) < 1e-3f &&
              fabsf(w[10] - 0.401f) < 1e-3f,
          "row 2 weights %g %g %g", (double)w[8], (double)w[9], (double)w[10]);
    json_decref(j);
}

/* MHA: members, and shapes with and without the batch; head_outputs through out_proj (the
 * identity here) are the output. */
static void trace_mha_shapes(void) {
    const char *bodies[2] = {
        "{\"query\":[[1,2,3,4],[0,1,0,1],[2,0,1,1]],\"key\":[[1,0,0,1],[0,1,1,0]],"
        "\"params\":{\"init\":\"identity\",\"num_heads\":2},\"trace\":true}",
        "{\"query\":[[[1,2,3,4],[0,1,0,1],[2,0,1,1]]],\"key\":[[[1,0,0,1],[0,1,1,0]]],"
        "\"params\":{\"init\":\"identity\",\"num_heads\":2},\"trace\":true,"
        "\"encoding\":\"base64\"}"};
    const char *lead[2] = {"", "1,"};
    for (int b = 0; b < 2; b++) {
        api_error e = {0};
        json_t *j = request_str(API_OP_ATTENTION, bodies[b], NULL, &e);
        CHECK(j != NULL, "mha with trace: %s", e.message);
        if (!j)
            continue;
        const json_t *tr = json_object_get(j, "trace");
        char names[256], got[64], want[64];
        member_names(tr, names, sizeof names);
        CHECK(!strcmp(names, "scale,q,k,v,scores,masked_scores,weights,head_outputs"),
              "mha trace members: %s", names);
        const char *shapes[][2] = {{"q", "2,3,2"},
                                   {"k", "2,2,2"},
                                   {"v", "2,2,2"},
                                   {"scores", "2,3,2"},
                                   {"masked_scores", "2,3,2"},
                                   {"weights", "2,3,2"},
                                   {"head_outputs", "2,3,2"}};
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            shape_str(tr, shapes[i][0], got, sizeof got);
            snprintf(want, sizeof want, "%s%s", lead[b], shapes[i][1]);
            CHECK(!strcmp(got, want), "trace %s shape (%s), want (%s)", shapes[i][0], got, want);
        }
        /* Identity weights: q is the query split into heads, and head h's output rows, side
         * by side, are the output (out_proj is the identity, without bias). */
        float q[12], ho[12], out[12];
        CHECK(flatten(json_object_get(tr, "q"), q, 12) == 12 &&
                  flatten(json_object_get(tr, "head_outputs"), ho, 12) == 12 &&
                  flatten(json_object_get(j, "output"), out, 12) == 12,
              "q, head_outputs and output hold 12 floats");
        const float x[3][4] = {{1, 2, 3, 4}, {0, 1, 0, 1}, {2, 0, 1, 1}};
        int same_q = 1, same_o = 1;
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 3; i++)
                for (int c = 0; c < 2; c++) {
                    same_q &= q[(h * 3 + i) * 2 + c] == x[i][h * 2 + c];
                    same_o &= fabsf(ho[(h * 3 + i) * 2 + c] - out[i * 4 + h * 2 + c]) < 1e-6f;
                }
        CHECK(same_q, "trace q is the query split into heads (identity in_proj)");
        CHECK(same_o, "head_outputs side by side are the output (identity out_proj)");
        json_decref(j);
    }
}

/* trace false is no trace; trace must be a boolean; the bound, at it and past it. */
static void trace_options(void) {
    api_error e = {0};
    json_t *j =
        request_str(API_OP_SDPA, "{\"q\":[[1]],\"k\":[[1]],\"v\":[[1]],\"trace\":false}", NULL, &e);
    CHECK(j && !json_object_get(j, "trace"), "trace false: no trace member");
    json_decref(j);
    const char *bad[] = {"1", "\"true\"", "[true]", "{}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[128];
        snprintf(body, sizeof body, "{\"q\":[[1]],\"k\":[[1]],\"v\":[[1]],\"trace\":%s}", bad[i]);
        e = (api_error){0};
        j = request_str(API_OP_SDPA, body, NULL, &e);
        CHECK(!j && e.status == 400 && !strcmp(e.field, "trace"), "trace %s: 400 on trace (%d)",
              bad[i], e.status);
        json_decref(j);
    }
    /* SDPA (H, L, 1) x (H, S, 1): maps of H L S cells, at API_TRACE_MAX_CELLS and one head
     * past it. */
    for (int past = 0; past < 2; past++) {
        size_t h = API_TRACE_MAX_CELLS / (64 * 64) + (size_t)past, l = 64;
        sb b = {0};
        sb_add(&b, "{\"trace\":true,\"encoding\":\"base64\",\"q\":");
        size_t dims[3] = {h, l, 1};
        float *ones = malloc(h * l * sizeof *ones);
        for (size_t i = 0; i < h * l; i++)
            ones[i] = (float)(i % 7) / 7.0f;
        sb_tensor_b64(&b, ones, dims, 3);
        sb_add(&b, ",\"k\":");
        sb_tensor_b64(&b, ones, dims, 3);
        sb_add(&b, ",\"v\":");
        sb_tensor_b64(&b, ones, dims, 3);
        sb_add(&b, "}");
        e = (api_error){0};
        j = request_str(API_OP_SDPA, b.s, NULL, &e);
        if (past)
            CHECK(!j && e.status == 400 && !strcmp(e.field, "trace") &&
                      strstr(e.message, "N*H*L*S = 69632"),
                  "one head past the bound: 400 on trace naming the cells (%d %s)", e.status,
                  e.message);
        else
            CHECK(j != NULL, "a trace at the bound (65536 cells): %s", e.message);
        json_decref(j);
        free(ones);
        free(b.s);
    }
}

/* A traced job never joins a batch (api_jobs_batchable), and alone it still runs. */
static void trace_batches(void) {
    api_limits lim = api_limits_default();
    const char *plain = "{\"query\":[[1,2]],\"params\":{\"init\":\"identity\",\"num_heads\":1}}";
    const char *traced =
        "{\"query\":[[1,2]],\"params\":{\"init\":\"identity\",\"num_heads\":1},\"trace\":true}";
    api_error e = {0};
    api_job *a = api_job_parse(API_OP_ATTENTION, plain, strlen(plain), NULL, &lim, &e);
    api_job *b = api_job_parse(API_OP_ATTENTION, plain, strlen(plain), NULL, &lim, &e);
    api_job *t = api_job_parse(API_OP_ATTENTION, traced, strlen(traced), NULL, &lim, &e);
    CHECK(a && b && t, "three jobs parse: %s", e.message);
    if (a && b && t) {
        CHECK(api_jobs_batchable(a, b), "two plain jobs on identity weights batch");
        CHECK(!api_jobs_batchable(a, t) && !api_jobs_batchable(t, a) && !api_jobs_batchable(t, t),
              "a traced job batches with nothing");
        api_job *jobs[3] = {t, a, b};
        api_error errs[3] = {{0}};
        CHECK(api_jobs_run(jobs, 3, NULL, lim.max_job_bytes, errs) == 0,
              "a traced job first, then two that batch: all run");
        api_buf out = {0};
        e = (api_error){0};
        CHECK(api_job_respond(t, 0, 0, &out, &e) == 0 &&
                  memmem(out.data, out.len, "\"trace\":{", 9),
              "the traced job of a run answers with its trace");
        api_buf_free(&out);
    }
    api_job_destroy(a);
    api_job_destroy(b);
    api_job_destroy(t);
}

void test_trace(void) {
    trace_seed(false);
    trace_seed(true);
    trace_mha_shapes();
    trace_options();
    trace_batches();
}
