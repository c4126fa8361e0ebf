/* fuzz_v2.c - libFuzzer target: inference requests of the Open Inference Protocol (POST
 * /v2/models/{name}/infer) through api_v2_parse, and the jobs it accepts through api_job_run and
 * api_job_respond.
 *
 * Input: one byte of options, two bytes of header length (little-endian; 0xFFFF: no
 * Inference-Header-Content-Length, the whole body is JSON), then the body (JSON, and raw tensor
 * bytes after it). Bits 0-1 of the options pick the model: demo, lesson, tiny (E = 4, H = 2,
 * kdim 3, vdim 2, with biases) or sdpa; bit 2 the limits: roomy (1 MiB of job memory) or tight
 * (8 KiB, max_dim 8, max_heads 2, max_depth 5); bit 3 a version "1" in the path, bit 4 a
 * version "2" (404); bit 5 a store of decode sessions of the input's own, so that Triton's
 * sequence parameters (sequence_id, sequence_start, sequence_end) reach v2_seq.c (a refusal may
 * then be a 409 too).
 *
 * Properties checked on every input:
 *   - a refusal has status 400, 404 or 413, a code and a message, and its {"error": message}
 *     body is valid JSON; never a 500;
 *   - an accepted job fits max_job_bytes with its response bound, runs (or overflows float32:
 *     400 numeric_overflow), and its 200 body is no longer than api_job_response_bytes, its
 *     JSON part (all but api_job_binary_bytes) one valid JSON object;
 *   - the body is read in a buffer of exactly its length: any read past it (the JSON into the
 *     raw bytes, or the raw bytes past the end) is an ASan report. */
#include <string.h>

#include "fuzz_api.h"

static api_registry *models;
static api_limits roomy, tight;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_api_setup(fuzz_tiny_model(5, 13), &models, &roomy, &tight);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3)
        return 0;
    static const char *const names[4] = {"demo", "lesson", "tiny", "sdpa"};
    const char *model = names[data[0] & 3];
    const api_limits *lim = (data[0] & 4) ? &tight : &roomy;
    const char *version = (data[0] & 16) ? "2" : (data[0] & 8) ? "1" : NULL;
    size_t hl = (size_t)data[1] | (size_t)data[2] << 8;
    if (hl == 0xFFFF)
        hl = API_V2_NO_HEADER;
    char *body = fuzz_copy(data + 3, size - 3);
    api_error e = {0};
    /* Bit 5: decode sessions for Triton's sequence parameters (a store of the input's own). */
    api_sessions *st = (data[0] & 32) ? api_sessions_create(2, 0, NULL, &e) : NULL;
    api_job *job = api_v2_parse(body, size - 3, hl, model, version, models, lim, st, 0, &e);
    if (!job) {
        fuzz_check_refusal_of(&e, api_v2_error_body, st != NULL);
        api_sessions_destroy(st);
        free(body);
        return 0;
    }
    FUZZ_CHECK(e.status == 0, "a job and an error (%d %s)", e.status, e.code);
    FUZZ_CHECK(api_job_bytes(job) + api_job_response_bytes(job) <= lim->max_job_bytes,
               "job of %zu bytes and a response of %zu over the cap %zu", api_job_bytes(job),
               api_job_response_bytes(job), lim->max_job_bytes);
    if (api_job_run(job, NULL, &e) != 0) {
        FUZZ_CHECK(e.status == 400 && !strcmp(e.code, "numeric_overflow"),
                   "run failed with %d %s: %s", e.status, e.code, e.message);
        fuzz_check_refusal(&e, api_v2_error_body);
    } else {
        api_buf out = {0};
        FUZZ_CHECK(api_job_respond(job, 1.5, 2.5, &out, &e) == 0, "respond: %s", e.message);
        size_t binary = api_job_binary_bytes(job);
        FUZZ_CHECK(binary <= out.len, "%zu binary bytes in a response of %zu", binary, out.len);
        api_error je = {0};
        FUZZ_CHECK(apip_json_check(out.data, out.len - binary, "the response", NULL, &je) == 0,
                   "the response's JSON is not JSON: %s", je.message);
        FUZZ_CHECK(out.len <= api_job_response_bytes(job),
                   "a response of %zu bytes over its bound %zu", out.len,
                   api_job_response_bytes(job));
        api_buf_free(&out);
    }
    api_job_destroy(job);
    api_sessions_destroy(st);
    free(body);
    return 0;
}
