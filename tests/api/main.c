/* main.c - test_api: unit tests of api/, one program in files by the room of api/ they test
 * (api/README.md), sharing api_test.h. This file holds main, which runs every group in a fixed
 * order: codec (codec_fmt.c, codec_numbers.c, codec_base64.c, codec_json.c, codec_buf.c),
 * models (models.c, models_safetensors.c), API v1 (v1_cases.c, v1_responses.c, v1_limits.c,
 * v1_seeded.c, v1_outputs.c, v1_stack.c), the job and its memory (job.c) and the Open Inference
 * Protocol (v2.c); util.c holds the helpers.
 *
 * What they cover: float formatting (against printf and strtod, and the previous writer
 * tests/float_ref.c, on millions of floats), float reading (against strtod on a million decimals:
 * halfway cases, 17 to 25 digits, denormals, overflow), base64, the JSON reader (against
 * jansson), every request field's validation (the cases are data files under
 * tests/api_cases/requests), responses (JSON and base64, checked bitwise against libattn called
 * directly), the seed chapter's worked example, models (identity, random, demo, safetensors files
 * written from PyTorch weights) and the registry.
 *
 * Usage: test_api [CASES_DIR] (default tests/api_cases). Exits non-zero when any check fails and
 * ends with the line "N passed, N failed". */
#include <stdio.h>

#include "api_test.h"

int failures, checks;
const char *cases_dir = "tests/api_cases";

/* The groups draw from one random stream (util.c): keep this order, or their inputs change. */
int main(int argc, char **argv) {
    if (argc > 1)
        cases_dir = argv[1];
    test_float_write();
    test_float_read();
    test_rows_read();
    test_rows_check();
    test_rows_count();
    test_base64();
    test_base64_impls();
    test_base64_finite();
    test_json();
    test_errors_and_buffers();
    test_registry();
    test_model_names();
    test_request_cases();
    test_seed_example();
    test_bitwise_cross();
    test_bitwise_self();
    test_init_models();
    test_init_cache();
    test_weights_views();
    test_fully_masked();
    test_limits();
    test_safetensors();
    test_batches();
    test_lesson();
    test_words_split();
    test_declared_shapes();
    test_job_flops();
    test_response_limit();
    test_response_bound();
    test_response_bound_words();
    test_usage_bytes();
    test_sdpa_key_masks();
    test_trace();
    test_integer_rule();
    test_mem_cache();
    test_mem_budget();
    test_mem_reclaim();
    test_mem_jobs();
    test_v2();
    test_seeded_inputs();
    test_outputs();
    test_stack_cases();
    test_siphash();
    test_session_cases();
    test_sessions_exact();
    test_sessions_store();
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
