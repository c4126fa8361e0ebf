/* api_test.h - what the files of test_api (tests/api/) share: the check macro and its counters,
 * the helpers of util.c, and the groups of tests main runs, file by file (each file tests one room
 * of api/, or one behaviour across rooms: api/README.md).
 *
 * Legend: N batch, L query length, S key length, E embedding width, H heads, kdim/vdim key and
 * value widths, D/Dv SDPA widths, K top-k count. */
#ifndef ATTND_TESTS_API_TEST_H
#define ATTND_TESTS_API_TEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "api.h"

/* Counted by CHECK; main prints them and exits 1 when failures is not 0. */
extern int failures, checks;
/* The folder of the data cases (test_api's argument; tests/api_cases by default). */
extern const char *cases_dir;

/* Counts a check; when cond is false, counts a failure and prints the first 200 of them. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            if (failures <= 200) {                                                                 \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                               \
                fprintf(stderr, __VA_ARGS__);                                                      \
                fputc('\n', stderr);                                                               \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* ---- util.c: random numbers, request bodies, requests, answers ----------------------------- */

/* One xorshift64 stream for the whole program: each group draws from it in main's order, so a
 * group's draws depend on those before it (main keeps the order of the single file it was). */
uint64_t rnd64_from(uint64_t *s);
uint64_t rnd64(void);
float frand(void);
float *frand_new(size_t n);
char *read_file(const char *path, size_t *len);

/* A growable string for building request bodies. */
typedef struct sb {
    char *s;
    size_t n, cap;
} sb;

void sb_add(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_tensor(sb *b, const float *x, const size_t *dims, size_t rank);
void sb_tensor_b64(sb *b, const float *x, const size_t *dims, size_t rank);

json_t *request(api_op op, const char *body, size_t len, const api_registry *models,
                const api_limits *lim, api_error *err);
json_t *request_str(api_op op, const char *body, const api_registry *models, api_error *err);
size_t flatten(const json_t *j, float *out, size_t cap);
size_t shape_of_json(const json_t *j, size_t *dims);
/* True when a and b hold the same n floats bit for bit; else false with *at the first that
 * differs. */
bool same_bits(const float *a, const float *b, size_t n, size_t *at);

/* A registry holding demo; one holding demo and lesson. The caller destroys it. */
api_registry *demo_registry(void);
api_registry *builtin_registry(void);
/* qsort's comparison of two char * by strcmp. */
int cmp_str(const void *a, const void *b);
bool same_strings(const json_t *a, const json_t *b);
char *answer_of(api_job *job);
double answers_diff(const char *a, const char *b);

/* v1_cases.c: runs every .case file of requests/sub (cases_dir) through fn, which answers a body
 * of len bytes under lim with the JSON of a 200 reply, or NULL and err; checks the status, code,
 * field and phrase each file's first line gives. Returns how many files it ran. */
typedef json_t *(*case_fn)(const char *body, size_t len, const api_limits *lim, api_error *err,
                           void *ctx);
size_t run_case_dir(const char *sub, case_fn fn, void *ctx);

/* ---- The groups of tests, in the order main runs them ------------------------------------- */

/* codec_fmt.c */
void test_float_write(void);
/* codec_numbers.c */
void test_float_read(void);
void test_rows_read(void);
void test_rows_check(void);
void test_rows_count(void);
/* codec_base64.c */
void test_base64(void);
void test_base64_impls(void);
void test_base64_finite(void);
/* codec_json.c */
void test_json(void);
/* codec_buf.c */
void test_errors_and_buffers(void);
/* models.c */
void test_registry(void);
void test_model_names(void);
void test_init_models(void);
void test_init_cache(void);
void test_lesson(void);
void test_words_split(void);
/* v1_cases.c */
void test_request_cases(void);
void test_integer_rule(void);
/* v1_responses.c */
void test_seed_example(void);
void test_bitwise_cross(void);
void test_bitwise_self(void);
void test_weights_views(void);
void test_fully_masked(void);
void test_sdpa_key_masks(void);
/* v1_trace.c */
void test_trace(void);
/* v1_limits.c */
void test_limits(void);
void test_declared_shapes(void);
void test_job_flops(void);
void test_response_limit(void);
void test_response_bound(void);
void test_response_bound_words(void);
void test_usage_bytes(void);
/* models_safetensors.c */
void test_safetensors(void);
/* job.c */
void test_batches(void);
void test_mem_cache(void);
void test_mem_budget(void);
void test_mem_reclaim(void);
void test_mem_jobs(void);
/* v2.c */
void test_v2(void);
/* v1_seeded.c */
void test_seeded_inputs(void);
/* v1_outputs.c */
void test_outputs(void);
/* v1_stack.c */
void test_stack_cases(void);

/* sessions.c */
void test_siphash(void);
void test_session_cases(void);
void test_sessions_exact(void);
void test_sessions_store(void);

#endif
