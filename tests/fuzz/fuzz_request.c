/* fuzz_request.c - libFuzzer target: request bodies of POST /v1/attention and /v1/sdpa through
 * api_job_parse, and the jobs it accepts through api_job_run and api_job_respond.
 *
 * Input: one byte of options, then the body. Bit 0 of the options picks the endpoint (0
 * attention, 1 sdpa); bit 1 picks the limits: the roomy ones (1 MiB of job memory, so nothing
 * big is allocated and a job computes in microseconds) or tight ones (8 KiB, max_dim 8,
 * max_heads 2, max_depth 5), so that every limit is reached; bit 2 (over bit 1) the wide ones:
 * attnd's max_dim 65536 and max_heads 256 with 1 MiB of job memory, where a small body can
 * declare a huge shape (N = L = 65536 in 0.5 MB: the regression inputs keep such bodies, which
 * must be refused in time bounded by their size). Bit 3: a decode session instead (POST
 * /v1/sessions and POST /v1/sessions/{id}): the body up to its first newline opens a session
 * (api_session_open), the rest is appended to it (api_session_append), and the session is
 * deleted; an append's refusal may then be 409 (length_mismatch, session_full).
 *
 * Properties checked on every input:
 *   - a refusal has status 400, 404 or 413, a code and a message, and its error body is valid
 *     JSON; never a 500;
 *   - an accepted job fits max_job_bytes with its response bound, runs (or overflows float32:
 *     400 numeric_overflow), and its 200 body is one valid JSON object (checked with api/'s
 *     own validator) no longer than api_job_response_bytes;
 *   - the body is read in a buffer of exactly its length: any read past it is an ASan report.
 *
 * The registry holds the built-in "demo" (E = 64, H = 4), "lesson" (E = 256, H = 4, with a
 * vocabulary, so that "tokens" and "text" reach the splitter) and "tiny" (E = 4, H = 2, kdim 3,
 * vdim 2, with biases), so that model requests reach both packed and split projections. */
#include <string.h>

#include "fuzz_api.h"

static api_registry *models;
static api_limits roomy, tight, wide;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_api_setup(fuzz_tiny_model(7, 11), &models, &roomy, &tight);
    wide = roomy;
    wide.max_dim = 65536;
    wide.max_heads = 256;
    return 0;
}

/* Bit 3's input: the session opened by the first line of body (n bytes) for the job appending
 * the rest, or NULL (the open refused, or none). *st and *append are the caller's to free. */
static api_job *session_job(const char *data, size_t n, const api_limits *lim, api_sessions **st,
                            char **append, api_error *e) {
    const char *nl = memchr(data, '\n', n);
    size_t open_len = nl ? (size_t)(nl - data) : n, rest = nl ? n - open_len - 1 : 0;
    char *open_body = fuzz_copy((const uint8_t *)data, open_len);
    *append = fuzz_copy((const uint8_t *)data + n - rest, rest);
    *st = api_sessions_create(1, 0, NULL, e);
    FUZZ_CHECK(*st != NULL, "sessions: %s", e->message);
    api_buf out = {0};
    api_job *job = NULL;
    if (api_session_open(*st, 1, open_body, open_len, models, lim, &out, e) != 0) {
        FUZZ_CHECK(e->status != 409, "an open refused with 409 (%s)", e->code);
        fuzz_check_refusal_of(e, api_error_body, false);
    } else {
        FUZZ_CHECK(out.len > 40 && !memcmp(out.data, "{\"id\":\"", 7), "the 201 body: %.60s",
                   out.data);
        char id[33];
        memcpy(id, out.data + 7, 32);
        id[32] = 0;
        job = api_session_append(*st, 1, id, *append, rest, models, lim, e);
        if (!job)
            fuzz_check_refusal_of(e, api_error_body, true);
    }
    api_buf_free(&out);
    free(open_body);
    return job;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    api_op op = (data[0] & 1) ? API_OP_SDPA : API_OP_ATTENTION;
    const api_limits *lim = (data[0] & 4) ? &wide : (data[0] & 2) ? &tight : &roomy;
    char *body = fuzz_copy(data + 1, size - 1);
    api_error e = {0};
    api_sessions *st = NULL;
    char *append = NULL;
    api_job *job = (data[0] & 8) ? session_job(body, size - 1, lim, &st, &append, &e)
                                 : api_job_parse(op, body, size - 1, models, lim, &e);
    if (!job) {
        if (!st)
            fuzz_check_refusal(&e, api_error_body);
        api_sessions_destroy(st);
        free(append);
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
        fuzz_check_refusal(&e, api_error_body);
    } else {
        api_buf out = {0};
        FUZZ_CHECK(api_job_respond(job, 1.5, 2.5, &out, &e) == 0, "respond: %s", e.message);
        api_error je = {0};
        FUZZ_CHECK(apip_json_check(out.data, out.len, "the response", NULL, &je) == 0,
                   "the response is not JSON: %s", je.message);
        FUZZ_CHECK(out.len <= api_job_response_bytes(job),
                   "a response of %zu bytes over its bound %zu", out.len,
                   api_job_response_bytes(job));
        api_buf_free(&out);
    }
    api_job_destroy(job);
    api_sessions_destroy(st); /* its session ends */
    free(append);
    free(body);
    return 0;
}
