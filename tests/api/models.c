/* models.c - models and their registry (api/models/): params.init weights (the documented stream,
 * identity, the per-thread cache), the demo model, the registry and its JSON, model names, and the
 * built-in lesson model (its description, its segmentation, a text job batching). */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "models.h"
#include "api_test.h"

/* ---- Models ------------------------------------------------------------------------------- */

static uint64_t sm_state;
static uint64_t sm_next(void) { /* splitmix64, written out again independently */
    uint64_t z = (sm_state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* params.init weights are kept per thread (API_INIT_CACHE_FLOATS): jobs that alternate seeds,
 * and kinds of init, on one thread each answer as the registry model of their own weights, bit
 * for bit, with E = 16 (kept) and E = 264 (over the bound: made in each job's arena). */
void test_init_cache(void) {
    const size_t H = 4, L = 3, es[2] = {16, 264};
    const uint64_t seeds[5] = {5, 6, 5, 0, 6}; /* 0: "identity" */
    for (int ei = 0; ei < 2; ei++) {
        size_t E = es[ei];
        api_error e = {0};
        api_registry *reg = api_registry_create();
        api_registry_add(reg, api_model_init_random("s5", E, H, 5, &e), &e);
        api_registry_add(reg, api_model_init_random("s6", E, H, 6, &e), &e);
        float *x = frand_new(L * E), *a = malloc(L * E * sizeof *a), *b = malloc(L * E * sizeof *b);
        for (int si = 0; si < 5; si++) {
            uint64_t seed = seeds[si];
            sb body = {0};
            sb_add(&body, "{\"query\":");
            sb_tensor(&body, x, (size_t[]){L, E}, 2);
            if (seed)
                sb_add(&body, ",\"params\":{\"init\":\"random\",\"seed\":%llu,\"num_heads\":%zu}}",
                       (unsigned long long)seed, H);
            else
                sb_add(&body, ",\"params\":{\"init\":\"identity\",\"num_heads\":%zu}}", H);
            json_t *inl = request_str(API_OP_ATTENTION, body.s, reg, &e), *ref = NULL;
            size_t at = 0, n = L * E;
            if (seed) { /* the same query on the model of the same weights */
                body.n = 0;
                sb_add(&body, "{\"query\":");
                sb_tensor(&body, x, (size_t[]){L, E}, 2);
                sb_add(&body, ",\"model\":\"s%llu\"}", (unsigned long long)seed);
                ref = request_str(API_OP_ATTENTION, body.s, reg, &e);
                CHECK(inl && ref && flatten(json_object_get(inl, "output"), a, n) == n &&
                          flatten(json_object_get(ref, "output"), b, n) == n &&
                          same_bits(a, b, n, &at),
                      "init cache: E %zu, request %d (seed %llu) differs from its model (at %zu)",
                      E, si, (unsigned long long)seed, at);
            } else { /* identity (checked in test_init_models); here it replaces the kept
                        weights between two "random" jobs */
                CHECK(inl != NULL, "init cache: E %zu, identity: %s", E, e.message);
            }
            json_decref(inl);
            json_decref(ref);
            free(body.s);
        }
        free(x), free(a), free(b);
        api_registry_destroy(reg);
    }
}

void test_init_models(void) {
    api_error e = {0};
    const size_t E = 16, H = 4;
    const uint64_t seed = 12345;
    api_model *m = api_model_init_random("r", E, H, seed, &e);
    CHECK(m != NULL, "init_random: %s", e.message);
    const attn_mha_params *pp = apip_model_params(m);
    sm_state = seed;
    size_t bad = 0;
    double a_in = sqrt(6.0 / (double)(4 * E)), a_out = sqrt(6.0 / (double)(2 * E));
    for (size_t i = 0; i < 4 * E * E; i++) {
        double u = (double)(sm_next() >> 40) / 16777216.0;
        float want = (float)((i < 3 * E * E ? a_in : a_out) * (2.0 * u - 1.0));
        float got = i < 3 * E * E ? pp->in_proj_weight[i] : pp->out_proj_weight[i - 3 * E * E];
        bad += memcmp(&want, &got, sizeof got) != 0;
    }
    CHECK(bad == 0, "%zu init_random weights differ from the documented stream", bad);
    CHECK(!pp->in_proj_bias && !pp->out_proj_bias, "no biases");
    api_model_info mi = api_model_describe(m);
    CHECK(mi.embed_dim == E && mi.num_heads == H && mi.kdim == E && mi.vdim == E && !mi.has_bias &&
              strcmp(mi.source, "builtin") == 0 && strcmp(mi.name, "r") == 0,
          "describe");

    /* The same weights inline ({"init": "random"}) give the same output bit for bit. */
    float *x = frand_new(5 * E);
    sb body = {0};
    sb_add(&body, "{\"query\":");
    sb_tensor(&body, x, (size_t[]){5, E}, 2);
    sb_add(&body,
           ",\"params\":{\"init\":\"random\",\"seed\":%llu,\"num_heads\":%zu},\"encoding\":"
           "\"base64\"}",
           (unsigned long long)seed, H);
    api_registry *reg = api_registry_create();
    api_registry_add(reg, m, &e);
    json_t *inl = request_str(API_OP_ATTENTION, body.s, reg, &e);
    CHECK(inl != NULL, "init random request: %s", e.message);
    body.n = 0;
    sb_add(&body, "{\"query\":");
    sb_tensor(&body, x, (size_t[]){5, E}, 2);
    sb_add(&body, ",\"model\":\"r\",\"encoding\":\"base64\"}");
    json_t *named = request_str(API_OP_ATTENTION, body.s, reg, &e);
    CHECK(named != NULL, "model request: %s", e.message);
    if (inl && named) {
        float a[5 * 16], b[5 * 16];
        size_t at = 0;
        CHECK(flatten(json_object_get(inl, "output"), a, 80) == 80 &&
                  flatten(json_object_get(named, "output"), b, 80) == 80 &&
                  same_bits(a, b, 80, &at),
              "init random inline != the same model by name (at %zu)", at);
        CHECK(strcmp(json_string_value(json_object_get(named, "model")), "r") == 0,
              "model name in the response");
        CHECK(json_integer_value(json_object_get(named, "num_heads")) == 4, "num_heads 4");
    }
    json_decref(inl);
    json_decref(named);

    /* Identity: output = softmax(x x^T / sqrt(Dh) per head) x, checked in double. */
    body.n = 0;
    sb_add(&body, "{\"query\":");
    sb_tensor(&body, x, (size_t[]){5, E}, 2);
    sb_add(&body, ",\"params\":{\"init\":\"identity\",\"num_heads\":%zu}}", H);
    json_t *id = request_str(API_OP_ATTENTION, body.s, NULL, &e);
    CHECK(id != NULL, "identity request: %s", e.message);
    if (id) {
        float got[80];
        CHECK(flatten(json_object_get(id, "output"), got, 80) == 80, "identity output");
        double err = 0;
        size_t dh = E / H;
        for (size_t hh = 0; hh < H; hh++)
            for (size_t i = 0; i < 5; i++) {
                double s[5], mx = -1e300, z = 0;
                for (size_t k = 0; k < 5; k++) {
                    s[k] = 0;
                    for (size_t c = 0; c < dh; c++)
                        s[k] += (double)x[i * E + hh * dh + c] * (double)x[k * E + hh * dh + c];
                    s[k] /= sqrt((double)dh);
                    mx = fmax(mx, s[k]);
                }
                for (size_t k = 0; k < 5; k++)
                    z += exp(s[k] - mx);
                for (size_t c = 0; c < dh; c++) {
                    double o = 0;
                    for (size_t k = 0; k < 5; k++)
                        o += exp(s[k] - mx) / z * (double)x[k * E + hh * dh + c];
                    err = fmax(err, fabs(o - (double)got[i * E + hh * dh + c]));
                }
            }
        CHECK(err < 2e-6, "identity MHA off by %g", err);
        json_decref(id);
    }
    api_model *idm = api_model_init_identity("i", 6, 3, &e);
    CHECK(idm && apip_model_params(idm)->in_proj_weight[0] == 1.0f &&
              apip_model_params(idm)->in_proj_weight[1] == 0.0f &&
              apip_model_params(idm)->in_proj_weight[(2 * 6 + 5) * 6 + 5] == 1.0f &&
              apip_model_params(idm)->out_proj_weight[7] == 1.0f,
          "identity weights");
    api_model_destroy(idm);
    api_error e2 = {0};
    CHECK(api_model_init_identity("bad", 6, 4, &e2) == NULL && e2.status == 400, "E %% H");

    /* The demo model is init_random("demo", 64, 4, seed 24301). */
    api_model *demo = api_model_demo(&e), *same = api_model_init_random("x", 64, 4, 24301, &e);
    mi = api_model_describe(demo);
    CHECK(mi.embed_dim == 64 && mi.num_heads == 4 && strcmp(mi.name, "demo") == 0,
          "demo is E=64 H=4");
    CHECK(memcmp(apip_model_params(demo)->in_proj_weight, apip_model_params(same)->in_proj_weight,
                 3 * 64 * 64 * 4) == 0 &&
              memcmp(apip_model_params(demo)->out_proj_weight,
                     apip_model_params(same)->out_proj_weight, 64 * 64 * 4) == 0,
          "demo weights = init_random seed 24301");
    api_model_destroy(demo);
    api_model_destroy(same);
    api_model_destroy(NULL);
    api_registry_destroy(reg);
    free(x);
    free(body.s);
}

void test_registry(void) {
    api_error e = {0};
    api_registry *r = api_registry_create();
    CHECK(api_registry_default(r) == NULL && api_registry_count(r) == 0, "empty registry");
    api_buf b = {0};
    api_registry_list_json(r, &b);
    CHECK(b.len == strlen("{\"default\":null,\"models\":[]}") &&
              memcmp(b.data, "{\"default\":null,\"models\":[]}", b.len) == 0,
          "empty list %.*s", (int)b.len, b.data);
    CHECK(api_registry_add(r, api_model_demo(&e), &e) == 0, "add demo");
    CHECK(api_registry_add(r, api_model_init_identity("id\"x", 4, 2, &e), &e) == 0, "add id");
    api_error d = {0};
    CHECK(api_registry_add(r, api_model_init_identity("demo", 4, 2, &e), &d) == -1 &&
              d.status == 500 && strcmp(d.code, "duplicate_model") == 0,
          "duplicate name");
    api_error nullm = {0};
    CHECK(api_registry_add(r, NULL, &nullm) == -1 && nullm.status != 0, "NULL model");
    CHECK(api_registry_count(r) == 2 && api_registry_at(r, 5) == NULL, "count");
    CHECK(api_registry_default(r) == api_registry_find(r, "demo"), "first is default");
    api_error u = {0};
    CHECK(api_registry_set_default(r, "nope", &u) == -1 && u.status == 404 &&
              strcmp(u.code, "unknown_model") == 0,
          "set_default unknown");
    CHECK(api_registry_set_default(r, "id\"x", &e) == 0 &&
              api_registry_default(r) == api_registry_at(r, 1),
          "set_default");
    api_buf_reset(&b);
    api_registry_list_json(r, &b);
    const char *want =
        "{\"default\":\"id\\\"x\",\"models\":[{\"name\":\"demo\",\"embed_dim\":64,"
        "\"num_heads\":4,\"kdim\":64,\"vdim\":64,\"source\":\"builtin\","
        "\"has_bias\":false,\"vocab_size\":0,\"start_token\":null},{\"name\":\"id\\\"x\","
        "\"embed_dim\":4,"
        "\"num_heads\":2,\"kdim\":4,\"vdim\":4,\"source\":\"builtin\","
        "\"has_bias\":false,\"vocab_size\":0,\"start_token\":null}]}";
    CHECK(b.len == strlen(want) && memcmp(b.data, want, b.len) == 0, "list: %.*s", (int)b.len,
          b.data);
    api_buf_free(&b);
    api_registry_destroy(r);
    api_registry_destroy(NULL);
}

/* A model is found by its whole name: not by a prefix cut at a buffer's size or at an escaped
 * NUL (tests/api_cases/requests/attention/model-nul.case has the NUL in a request). */
void test_model_names(void) {
    char n255[256], n300[301], body[512];
    memset(n255, 'a', 255);
    n255[255] = '\0';
    memset(n300, 'a', 300);
    n300[300] = '\0';
    api_error e = {0};
    api_registry *r = api_registry_create();
    CHECK(api_registry_add(r, api_model_init_identity(n255, 2, 1, &e), &e) == 0 &&
              api_registry_add(r, api_model_init_identity(n300, 2, 1, &e), &e) == 0,
          "add long names: %s", e.message);
    const char *names[] = {n255, n300};
    for (int i = 0; i < 2; i++) {
        snprintf(body, sizeof body, "{\"query\":[[1,0]],\"model\":\"%s\"}", names[i]);
        api_error me = {0};
        json_t *j = request_str(API_OP_ATTENTION, body, r, &me);
        const char *got = json_string_value(json_object_get(j, "model"));
        CHECK(got && strcmp(got, names[i]) == 0,
              "model of %zu bytes: resolved to %.20s... (%zu bytes) %s", strlen(names[i]),
              got ? got : "(none)", got ? strlen(got) : 0, me.message);
        json_decref(j);
    }
    snprintf(body, sizeof body, "{\"query\":[[1,0]],\"model\":\"%sb\"}", n255);
    api_error nf = {0};
    json_t *j = request_str(API_OP_ATTENTION, body, r, &nf);
    CHECK(!j && nf.status == 404 && strcmp(nf.code, "unknown_model") == 0 &&
              strcmp(nf.field, "model") == 0,
          "a 256-byte name that a 255-byte model's name begins: %d %s", nf.status, nf.message);
    json_decref(j);
    /* A name with an escaped NUL: no model (here the 255-byte one was found), and the message
     * shows the NUL rather than stopping at it. */
    snprintf(body, sizeof body, "{\"query\":[[1,0]],\"model\":\"%s\\u0000\"}", n255);
    api_error nul = {0};
    j = request_str(API_OP_ATTENTION, body, r, &nul);
    CHECK(!j && nul.status == 404 && strcmp(nul.code, "unknown_model") == 0,
          "the 255-byte name and an escaped NUL: %d %.40s", nul.status, nul.message);
    json_decref(j);
    api_error nul2 = {0};
    j = request_str(API_OP_ATTENTION, "{\"query\":[[1,0]],\"model\":\"ab\\u0000c\"}", r, &nul2);
    CHECK(!j && nul2.status == 404 && strstr(nul2.message, "named \"ab\\u0000...\""),
          "a name with an escaped NUL: %d %s", nul2.status, nul2.message);
    json_decref(j);
    api_registry_destroy(r);
}

/* The built-in lesson model: its description, the chapter's sentences split as documented
 * (api/lesson/README.md), a text job batching with a query job on the same model. */
void test_lesson(void) {
    api_error e = {0};
    api_registry *r = builtin_registry();
    const api_model *m = api_registry_find(r, "lesson");
    api_model_info mi = api_model_describe(m);
    CHECK(m && !strcmp(mi.source, "builtin") && mi.embed_dim == 256 && mi.num_heads == 4 &&
              mi.kdim == 256 && mi.vdim == 256 && !mi.has_bias && mi.max_tokens == 48 &&
              mi.vocab_size >= 150,
          "lesson: %s E %zu H %zu V %zu P %zu", mi.source, mi.embed_dim, mi.num_heads,
          mi.vocab_size, mi.max_tokens);
    CHECK(api_registry_default(r) == api_registry_find(r, "demo"), "demo stays the default");
    api_buf b = {0};
    CHECK(api_registry_model_json(r, "lesson", &b, &e) == 0, "describe lesson: %s", e.message);
    json_t *d = json_loadb(b.data, b.len, 0, NULL);
    json_t *names = json_pack("[ssss]", "adjacent", "subject", "structure", "coreference");
    CHECK(d && same_strings(json_object_get(d, "head_names"), names) &&
              json_array_size(json_object_get(d, "vocab")) == mi.vocab_size &&
              json_is_false(json_object_get(d, "default")) &&
              json_integer_value(json_object_get(d, "max_tokens")) == 48 &&
              json_is_string(json_object_get(d, "start_token")) &&
              !strcmp(json_string_value(json_object_get(d, "start_token")), "〈s〉") &&
              json_is_string(json_array_get(json_object_get(d, "vocab"), 0)) &&
              !strcmp(json_string_value(json_array_get(json_object_get(d, "vocab"), 0)), "〈s〉"),
          "GET /v1/models/lesson: %.300s", b.data);
    json_decref(d);
    api_buf_reset(&b);
    e = (api_error){0};
    CHECK(api_registry_model_json(r, "lesso", &b, &e) == -1 && e.status == 404 &&
              !strcmp(e.code, "unknown_model") && !e.field[0] && b.len == 0,
          "GET /v1/models/lesso: %d %s", e.status, e.code);
    api_buf_reset(&b);
    api_registry_list_json(r, &b);
    json_t *l = json_loadb(b.data, b.len, 0, NULL);
    json_t *lm = json_array_get(json_object_get(l, "models"), 1);
    json_t *dm = json_array_get(json_object_get(l, "models"), 0);
    CHECK(same_strings(json_object_get(lm, "head_names"), names) &&
              json_integer_value(json_object_get(lm, "vocab_size")) == (json_int_t)mi.vocab_size &&
              !json_object_get(lm, "vocab") && !json_object_get(dm, "head_names") &&
              json_integer_value(json_object_get(dm, "vocab_size")) == 0 &&
              json_is_integer(json_object_get(dm, "vocab_size")),
          "GET /v1/models: %.400s", b.data);
    json_decref(l);
    json_decref(names);
    api_buf_free(&b);

    /* The segmentation the README documents for the chapter's sentences, after the start token
     * 〈s〉 that attnd puts first. */
    static const char *const splits[][2] = {
        {"程序员把服务器日志发给同事，因为它记录了错误原因。",
         "〈s〉|程序员|把|服务器日志|发给|同事|，|因为|它|记录了|错误原因|。"},
        {"小王昨天提交了补丁，因为他发现缓存模块在高并发下会返回旧数据。",
         "〈s〉|小王|昨天|提交了|补丁|，|因为|他|发现|缓存模块|在|高并发|下|会|返回|旧数据|。"},
        {"张工把配置文件发给测试同学，因为它包含新的开关。",
         "〈s〉|张工|把|配置文件|发给|测试同学|，|因为|它|包含|新的开关|。"},
        {"小李把笔记本放进背包，因为它太重了。",
         "〈s〉|小李|把|笔记本|放进|背包|，|因为|它|太重了|。"},
        {"Redis 是一个内存数据库。", "〈s〉|Redis|是|一个|内存|数据库|。"},
        {"服务器 日志", "〈s〉|服务器|日志"},
        /* English: words whole, any case, multi-word entries one token, punctuation apart. */
        {"The programmer sent the server log to a colleague, because it recorded the cause of the "
         "error.",
         "〈s〉|the|programmer|sent|the|server log|to|a|colleague|,|because|it|recorded|the|cause|"
         "of|the|error|."},
        {"Xiao Wang submitted a patch yesterday, because he found the cache module would return "
         "stale data under high concurrency.",
         "〈s〉|Xiao Wang|submitted|a|patch|yesterday|,|because|he|found|the|cache module|would|"
         "return|stale data|under|high concurrency|."},
        {"Engineer Zhang sent the config file to the tester, because it contains a new switch.",
         "〈s〉|Engineer Zhang|sent|the|config file|to|the|tester|,|because|it|contains|a|new "
         "switch|."},
        {"Xiao Li put the laptop in the backpack, because it is too heavy.",
         "〈s〉|Xiao Li|put|the|laptop|in|the|backpack|,|because|it|is too heavy|."},
        {"Redis is an in-memory database.", "〈s〉|Redis|is|an|in-memory|database|."},
        {"THE SERVER  LOG\tIS TOO\nHEAVY", "〈s〉|the|server|log|is too heavy"},
        {"xiao li said: “it is too old”", "〈s〉|Xiao Li|said|:|“|it|is too old|”"},
        /* One vocabulary: each word of a mixed text finds its own. */
        {"小李 put 笔记本 in the 背包。", "〈s〉|小李|put|笔记本|in|the|背包|。"},
    };
    for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
        json_t *body = json_pack("{s:s,s:s}", "model", "lesson", "text", splits[i][0]);
        char *bs = json_dumps(body, JSON_COMPACT);
        json_t *resp = request_str(API_OP_ATTENTION, bs, r, &e);
        sb got = {0};
        json_t *toks = json_object_get(resp, "tokens");
        for (size_t k = 0; k < json_array_size(toks); k++)
            sb_add(&got, "%s%s", k ? "|" : "", json_string_value(json_array_get(toks, k)));
        CHECK(got.s && !strcmp(got.s, splits[i][1]), "split of %s: %s, want %s", splits[i][0],
              got.s ? got.s : e.message, splits[i][1]);
        free(got.s);
        free(bs);
        json_decref(body);
        json_decref(resp);
    }

    /* An unknown English word: the whole word, at its place in characters. */
    static const char *const unknown[][2] = {
        {"The programmer sent the serverlog.", "\"serverlog\" at character 24 of text"},
        {"it is too heavy, the laptops", "\"laptops\" at character 21 of text"},
        {"Its server logs", "\"Its\" at character 0 of text"},
    };
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        json_t *body = json_pack("{s:s,s:s}", "model", "lesson", "text", unknown[i][0]);
        char *bs = json_dumps(body, JSON_COMPACT);
        api_error ue = {0};
        json_t *resp = request_str(API_OP_ATTENTION, bs, r, &ue);
        CHECK(!resp && ue.status == 400 && !strcmp(ue.code, "unknown_token") &&
                  strstr(ue.message, unknown[i][1]),
              "lesson, %s: %d %s, want %s", unknown[i][0], ue.status, ue.message, unknown[i][1]);
        json_decref(resp);
        free(bs);
        json_decref(body);
    }

    /* A text job batches with a query job on lesson; each answers as when run alone. */
    api_limits lim = api_limits_default();
    const char *tb = "{\"model\":\"lesson\",\"text\":\"小李把笔记本放进背包，因为它太重了。\","
                     "\"need_weights\":\"per_head\"}";
    float *x = frand_new(3 * 256);
    sb qb = {0};
    sb_add(&qb, "{\"model\":\"lesson\",\"causal\":true,\"query\":");
    sb_tensor(&qb, x, (size_t[]){3, 256}, 2);
    sb_add(&qb, "}");
    api_job *a[2], *solo[2];
    const char *bodies[2] = {tb, qb.s};
    for (int i = 0; i < 2; i++) {
        a[i] = api_job_parse(API_OP_ATTENTION, bodies[i], strlen(bodies[i]), r, &lim, &e);
        solo[i] = api_job_parse(API_OP_ATTENTION, bodies[i], strlen(bodies[i]), r, &lim, &e);
        CHECK(a[i] && solo[i], "lesson batch body %d: %s", i, e.message);
    }
    if (a[0] && a[1] && solo[0] && solo[1]) {
        CHECK(api_jobs_batchable(a[0], a[1]), "a text job and a query job on lesson batch");
        api_error errs[2] = {{0}, {0}};
        CHECK(api_jobs_run(a, 2, NULL, 0, errs) == 0, "lesson batch: %s", errs[0].message);
        for (int i = 0; i < 2; i++) {
            CHECK(api_job_run(solo[i], NULL, &e) == 0, "lesson solo %d: %s", i, e.message);
            char *x1 = answer_of(a[i]), *x2 = answer_of(solo[i]);
            CHECK(x1 && x2 && answers_diff(x1, x2) < 1e-5, "lesson batch answer %d differs", i);
            CHECK(i != 0 || (x1 && strstr(x1, "\"tokens\":[\"〈s〉\",\"小李\",\"把\"")),
                  "batched text job lost its tokens");
            free(x1);
            free(x2);
        }
    }
    for (int i = 0; i < 2; i++) {
        api_job_destroy(a[i]);
        api_job_destroy(solo[i]);
    }
    free(x);
    free(qb.s);
    api_registry_destroy(r);
}

/* ---- Text split into words (__metadata__.text_split "words") -------------------------------- */

static const char *str_or_null(const char *s) {
    return s ? s : "(none)";
}

/* A model of E = 2, H = 1 (all weights 0) with the vocabulary vocab (a JSON list) and, when
 * split is not NULL, __metadata__.text_split = split; NULL with e when the loader refuses it. */
static api_model *words_model(const char *vocab, const char *split, api_error *e) {
    size_t v = 0;
    json_t *list = vocab ? json_loads(vocab, 0, NULL) : NULL;
    v = json_array_size(list);
    json_decref(list);
    json_t *meta = json_pack("{s:s}", "num_heads", "1");
    if (vocab)
        json_object_set_new(meta, "vocab", json_string(vocab));
    if (split)
        json_object_set_new(meta, "text_split", json_string(split));
    json_t *h =
        json_pack("{s:o,s:{s:s,s:[i,i],s:[i,i]},s:{s:s,s:[i,i],s:[i,i]}}", "__metadata__", meta,
                  "in_proj_weight", "dtype", "F32", "shape", 6, 2, "data_offsets", 0, 48,
                  "out_proj.weight", "dtype", "F32", "shape", 2, 2, "data_offsets", 48, 64);
    if (v)
        json_object_set_new(h, "token_embeddings",
                            json_pack("{s:s,s:[i,i],s:[i,i]}", "dtype", "F32", "shape", (int)v, 2,
                                      "data_offsets", 64, 64 + 8 * (int)v));
    char *text = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    size_t n = strlen(text), len = 8 + n + 64 + 8 * v;
    unsigned char *blob = calloc(1, len);
    for (int i = 0; i < 8; i++)
        blob[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(blob + 8, text, n);
    api_model *m = api_model_from_safetensors("words", blob, len, e);
    free(text);
    free(blob);
    return m;
}

/* The tokens attnd splits text (or, with tokens true, a JSON list of words) into, joined by
 * "|"; NULL with e on an error. */
static char *words_split(const api_registry *r, const char *text, bool tokens, api_error *e) {
    json_t *body = json_pack("{s:s}", "model", "words");
    json_object_set_new(body, tokens ? "tokens" : "text",
                        tokens ? json_loads(text, 0, NULL) : json_string(text));
    char *bs = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    json_t *resp = request_str(API_OP_ATTENTION, bs, r, e);
    free(bs);
    if (!resp)
        return NULL;
    sb got = {0};
    json_t *toks = json_object_get(resp, "tokens");
    for (size_t k = 0; k < json_array_size(toks); k++)
        sb_add(&got, "%s%s", k ? "|" : "", json_string_value(json_array_get(toks, k)));
    json_decref(resp);
    return got.s;
}

/* A vocabulary of words: Latin words kept whole, letters in either case, the space of a
 * multi-word token matching one whitespace character, the longest token that ends where a word
 * does; Chinese and punctuation by longest match as before; unknown words named with their place;
 * the loader's refusals. */
void test_words_split(void) {
    api_error e = {0};
    const char *vocab = "[\"it\", \"items\", \"server\", \"log\", \"server log\", \"is\", "
                        "\"is too heavy\", \"too\", \",\", \".\", \"Redis\", \"in\", "
                        "\"in-memory\", \"服务器\", \"服务器日志\", \"I\"]";
    api_registry *r = api_registry_create();
    CHECK(api_registry_add(r, words_model(vocab, "words", &e), &e) == 0, "words model: %s",
          e.message);
    static const char *const splits[][2] = {
        {"It is too heavy.", "it|is too heavy|."},
        {"SERVER LOG, Server\tLog,server  log", "server log|,|server log|,|server|log"},
        {"server\nlog.", "server log|."},
        {"Items, it", "items|,|it"},
        {"it is too", "it|is|too"},
        {"Redis in-memory in", "Redis|in-memory|in"},
        {"redis服务器日志 i", "Redis|服务器日志|I"},
    };
    for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
        e = (api_error){0};
        char *got = words_split(r, splits[i][0], false, &e);
        CHECK(got && !strcmp(got, splits[i][1]), "words: %s split as %s, want %s", splits[i][0],
              got ? got : e.message, splits[i][1]);
        free(got);
    }
    /* tokens are looked up in either case too */
    char *got = words_split(r, "[\"IT\", \"Server Log\", \"redis\"]", true, &e);
    CHECK(got && !strcmp(got, "it|server log|Redis"), "words: tokens in either case: %s",
          got ? got : e.message);
    free(got);
    /* Unknown words: the whole Latin word, at its place in characters. */
    static const char *const unknown[][2] = {
        {"its", "\"its\" at character 0 of text"},
        {"it is too heavyweight.", "\"heavyweight\" at character 10 of text"},
        {"server logs", "\"logs\" at character 7 of text"},
        {"服务器日志 is serverlog", "\"serverlog\" at character 9 of text"},
        {"it, 日志", "\"日志\" at character 4 of text"},
    };
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        e = (api_error){0};
        got = words_split(r, unknown[i][0], false, &e);
        CHECK(!got && e.status == 400 && !strcmp(e.code, "unknown_token") &&
                  !strcmp(e.field, "text") && strstr(e.message, unknown[i][1]),
              "words: %s: %d %s, want %s", unknown[i][0], e.status, e.message, unknown[i][1]);
        free(got);
    }
    api_registry_destroy(r);

    /* The loader: text_split's values, and a vocabulary of words' own rules. */
    static const char *const refused[][3] = {
        {"[\"a\"]", "latin", "text_split must be \"longest_match\" (the default) or \"words\""},
        {NULL, "words", "text_split needs __metadata__.vocab"},
        {"[\"Log\", \"it\", \"log\"]", "words", "\"Log\" and \"log\" (entries 0 and 2)"},
        {"[\"server  log\"]", "words", "holds whitespace other than one space"},
        {"[\"server \"]", "words", "holds whitespace other than one space"},
        {"[\"服务 器\"]", "words", "holds whitespace other than one space"},
        {"[\"server log\"]", "longest_match", "holds whitespace, which text splitting drops"},
        {"[\"server log\"]", NULL, "holds whitespace, which text splitting drops"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        e = (api_error){0};
        api_model *m = words_model(refused[i][0], refused[i][1], &e);
        CHECK(!m && e.status == 400 && !strcmp(e.code, "invalid_model") &&
                  strstr(e.message, refused[i][2]),
              "words: vocab %s, text_split %s: %d %s, want %s", str_or_null(refused[i][0]),
              str_or_null(refused[i][1]), e.status, e.message, refused[i][2]);
        api_model_destroy(m);
    }
    /* "longest_match", the default, splits as before: "its" is it | s where s is a token. */
    r = api_registry_create();
    CHECK(api_registry_add(r, words_model("[\"it\", \"s\", \"Log\"]", "longest_match", &e), &e) ==
              0,
          "longest_match model: %s", e.message);
    got = words_split(r, "its", false, &e);
    CHECK(got && !strcmp(got, "it|s"), "longest_match: its split as %s", got ? got : e.message);
    free(got);
    e = (api_error){0};
    got = words_split(r, "log", false, &e);
    CHECK(!got && e.status == 400 && strstr(e.message, "\"log\" at character 0"),
          "longest_match: letters keep their case: %s", got ? got : e.message);
    free(got);
    api_registry_destroy(r);
}
