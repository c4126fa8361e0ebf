/* v1_stack.c - models of layers through API v1 (api/v1/, api/models/layers.c): the request
 * cases of tests/api_cases/requests/stack on the registry attnd holds (demo, lesson, induction),
 * each 200 answer within its reply's bound (util.c's request); the induction model's description
 * (its layers, causal default, unembedding and measured heads); and that jobs on it do not batch.
 * The forward against PyTorch is tests/server/stack_torch.py's. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "api_test.h"

/* demo, lesson and induction, as attnd holds them. */
static api_registry *stack_registry(void) {
    api_error e = {0};
    api_registry *r = builtin_registry();
    CHECK(api_registry_add(r, api_model_induction(&e), &e) == 0, "add induction: %s", e.message);
    return r;
}

/* A request case of requests/stack, on the registry ctx. */
static json_t *stack_case(const char *body, size_t len, const api_limits *lim, api_error *e,
                          void *ctx) {
    return request(API_OP_ATTENTION, body, len, ctx, lim, e);
}

void test_stack_cases(void) {
    api_registry *models = stack_registry();
    size_t n = run_case_dir("stack", stack_case, models);
    CHECK(n >= 20, "only %zu stack request cases found", n);
    printf("stack request cases: %zu\n", n);

    /* The induction model's description. */
    api_buf b = {0};
    api_error e = {0};
    CHECK(api_registry_model_json(models, "induction", &b, &e) == 0, "describe induction: %s",
          e.message);
    json_t *j = json_loadb(b.data, b.len, 0, NULL);
    json_t *scores = json_object_get(j, "head_scores");
    CHECK(j && json_integer_value(json_object_get(j, "num_layers")) == 2 &&
              json_is_true(json_object_get(j, "causal")) &&
              json_is_true(json_object_get(j, "unembedding")) &&
              json_integer_value(json_object_get(j, "vocab_size")) == 129 &&
              json_integer_value(json_object_get(j, "max_tokens")) == 64,
          "induction: %.300s", b.data);
    CHECK(json_array_size(scores) == 2 && json_array_size(json_array_get(scores, 1)) == 4 &&
              json_is_number(
                  json_object_get(json_array_get(json_array_get(scores, 1), 0), "induction")) &&
              json_is_number(json_object_get(json_object_get(j, "accuracy"), "repeated_half")),
          "induction's head_scores and accuracy: %.300s", b.data);
    api_model_info mi = api_model_describe(api_registry_find(models, "induction"));
    CHECK(mi.num_layers == 2 && mi.unembedding && mi.embed_dim == 64 && mi.num_heads == 4,
          "induction: %zu layers, E %zu, H %zu", mi.num_layers, mi.embed_dim, mi.num_heads);
    json_decref(j);
    api_buf_free(&b);

    /* Jobs on a model of layers run alone. */
    const char *body = "{\"model\":\"induction\",\"tokens\":[\"log\",\"code\"]}";
    api_limits lim = api_limits_default();
    api_job *a = api_job_parse(API_OP_ATTENTION, body, strlen(body), models, &lim, &e);
    api_job *c = api_job_parse(API_OP_ATTENTION, body, strlen(body), models, &lim, &e);
    CHECK(a && c && !api_jobs_batchable(a, c), "two jobs on induction are not batchable");
    api_error errs[2] = {{0}};
    api_job *both[2] = {a, c};
    CHECK(a && c && api_jobs_run(both, 2, NULL, 0, errs) == 0, "induction jobs one by one: %s",
          errs[0].message);
    api_job_destroy(a);
    api_job_destroy(c);
    api_registry_destroy(models);
}
