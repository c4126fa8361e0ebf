/* fuzz_safetensors.c - libFuzzer target: api_model_from_safetensors, the loader of model files
 * (an 8-byte header length, a JSON header, raw tensor data).
 *
 * Properties: a refusal is 400 invalid_model (or 500 out_of_memory) and its message starts with
 * the model's name; a model that loads has E >= 1, H >= 1 and E % H == 0, and answers a
 * self-attention job on a (2, E) query (when kdim = vdim = E) or a cross-attention job with key
 * (2, kdim) and value (2, vdim), through the same path as a request, with a valid JSON response;
 * a model of layers, a job on a (2, E) query alone.
 * The file is given in a buffer of exactly its length. */
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "codec.h"
#include "fuzz.h"

/* Appends a (rows, cols) JSON matrix of small values. */
static void matrix(api_buf *b, size_t rows, size_t cols) {
    apip_buf_puts(b, "[");
    for (size_t i = 0; i < rows; i++) {
        apip_buf_puts(b, i ? ",[" : "[");
        for (size_t j = 0; j < cols; j++) {
            char num[32];
            snprintf(num, sizeof num, "%s%.2f", j ? "," : "", (double)((i + 3 * j) % 5) * 0.25);
            apip_buf_puts(b, num);
        }
        apip_buf_puts(b, "]");
    }
    apip_buf_puts(b, "]");
}

static void run_model(api_model *m) {
    api_model_info info = api_model_describe(m);
    api_error e = {0};
    api_registry *reg = api_registry_create();
    FUZZ_CHECK(reg != NULL, "no registry");
    FUZZ_CHECK(api_registry_add(reg, m, &e) == 0, "registry: %s", e.message);
    api_buf body = {0};
    apip_buf_puts(&body, "{\"model\": \"fuzz\", \"need_weights\": \"per_head\", \"query\": ");
    matrix(&body, 2, info.embed_dim);
    if (info.num_layers == 0) { /* a model of layers attends its stream to itself: no key */
        apip_buf_puts(&body, ", \"key\": ");
        matrix(&body, 2, info.kdim);
        apip_buf_puts(&body, ", \"value\": ");
        matrix(&body, 2, info.vdim);
    }
    apip_buf_puts(&body, "}");
    FUZZ_CHECK(!body.failed, "out of memory");
    api_limits lim = api_limits_default();
    lim.max_job_bytes = (size_t)16 << 20;
    api_job *job = api_job_parse(API_OP_ATTENTION, body.data, body.len, reg, &lim, &e);
    FUZZ_CHECK(job != NULL, "a job on a loaded model (E=%zu H=%zu kdim=%zu vdim=%zu) refused: %s",
               info.embed_dim, info.num_heads, info.kdim, info.vdim, e.message);
    if (api_job_run(job, NULL, &e) == 0) {
        api_buf out = {0};
        FUZZ_CHECK(api_job_respond(job, 0, 0, &out, &e) == 0, "respond: %s", e.message);
        api_error je = {0};
        FUZZ_CHECK(apip_json_check(out.data, out.len, "the response", NULL, &je) == 0,
                   "the response is not JSON: %s", je.message);
        api_buf_free(&out);
    } else {
        FUZZ_CHECK(!strcmp(e.code, "numeric_overflow"), "run: %d %s %s", e.status, e.code,
                   e.message);
    }
    api_job_destroy(job);
    api_buf_free(&body);
    api_registry_destroy(reg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *bytes = fuzz_copy(data, size);
    api_error e = {0};
    api_model *m = api_model_from_safetensors("fuzz", (const uint8_t *)bytes, size, &e);
    if (!m) {
        FUZZ_CHECK((e.status == 400 && !strcmp(e.code, "invalid_model")) ||
                       (e.status == 500 && !strcmp(e.code, "out_of_memory")),
                   "refused with %d %s", e.status, e.code);
        FUZZ_CHECK(!strncmp(e.message, "fuzz: ", 6), "the message does not name the model: %s",
                   e.message);
    } else {
        api_model_info info = api_model_describe(m);
        FUZZ_CHECK(info.embed_dim >= 1 && info.num_heads >= 1 &&
                       info.embed_dim % info.num_heads == 0 && info.kdim >= 1 && info.vdim >= 1,
                   "loaded E=%zu H=%zu kdim=%zu vdim=%zu", info.embed_dim, info.num_heads,
                   info.kdim, info.vdim);
        run_model(m); /* takes m over */
    }
    free(bytes);
    return 0;
}
