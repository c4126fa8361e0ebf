/* v2.c - the Open Inference Protocol (api/v2/): the v2 request cases kept as data files under
 * tests/api_cases/requests/v2, v1 and v2 answering the same jobs with the same bits (binary and
 * JSON), the reserved name sdpa, and model metadata. */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "v1.h"
#include "api_test.h"

/* ---- The Open Inference Protocol (v2) ----------------------------------------------------- */

static void sb_bytes(sb *b, const void *p, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->s = realloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = '\0';
}

/* A v2 response: its JSON part parsed, and a copy of the raw bytes after it. */
typedef struct v2_answer {
    json_t *j;
    uint8_t *raw;
    size_t raw_len;
} v2_answer;

static void v2_answer_free(v2_answer *a) {
    json_decref(a->j);
    free(a->raw);
    memset(a, 0, sizeof *a);
}

/* Parses, runs and answers a v2 request. On 200 fills *a and returns true; the response must
 * stay within its bound (the buffer grown once, to the bound and the writer's slack), its JSON
 * part (all but api_job_binary_bytes) be valid JSON, and the binary_data_size of its outputs add
 * up to the bytes after it. Else false with *err filled, and the error body {"error": message}
 * must be valid JSON. */
static bool v2_request(const char *body, size_t len, size_t header, const char *model,
                       const char *version, const api_registry *models, const api_limits *lim,
                       api_error *err, v2_answer *a) {
    api_error e = {0};
    api_buf out = {0};
    memset(a, 0, sizeof *a);
    api_job *job = api_v2_parse(body, len, header, model, version, models, lim, NULL, 0, &e);
    size_t binary = api_job_binary_bytes(job);
    if (job && api_job_run(job, NULL, &e) == 0) {
        api_job_respond(job, 1.5, 2.25, &out, &e);
        CHECK(e.status || (out.len <= api_job_response_bytes(job) &&
                           out.cap == api_job_response_bytes(job) + 64 && binary <= out.len),
              "v2 response of %zu bytes (buffer %zu, binary %zu) for a bound of %zu", out.len,
              out.cap, binary, api_job_response_bytes(job));
    }
    api_job_destroy(job);
    if (e.status) {
        api_buf_reset(&out);
        api_v2_error_body(&e, &out);
        json_t *j = json_loadb(out.data, out.len, 0, NULL);
        CHECK(j && json_is_string(json_object_get(j, "error")) && json_object_size(j) == 1,
              "v2 error body %.*s", (int)out.len, out.data);
        json_decref(j);
        api_buf_free(&out);
        if (err)
            *err = e;
        return false;
    }
    json_error_t je;
    a->j = json_loadb(out.data, out.len - binary, 0, &je);
    CHECK(a->j != NULL, "v2 response JSON is not valid (%s): %.300s", je.text, out.data);
    size_t sum = 0;
    json_t *outs = json_object_get(a->j, "outputs"), *o;
    size_t i;
    json_array_foreach(outs, i, o) {
        json_t *bs = json_object_get(json_object_get(o, "parameters"), "binary_data_size");
        sum += bs ? (size_t)json_integer_value(bs) : 0;
    }
    CHECK(sum == binary, "v2 outputs declare %zu binary bytes; %zu follow the JSON", sum, binary);
    a->raw_len = binary;
    a->raw = malloc(binary + 1);
    memcpy(a->raw, out.data + out.len - binary, binary);
    api_buf_free(&out);
    if (err)
        *err = e;
    return a->j != NULL;
}

/* Output name of a v2 answer as floats (or int32 indices as floats) in out (cap), from JSON data
 * or the binary part. Returns the count, or SIZE_MAX when it is missing. */
static size_t v2_output(const v2_answer *a, const char *name, float *out, size_t cap,
                        bool *binary) {
    size_t off = 0, i;
    json_t *o;
    json_array_foreach(json_object_get(a->j, "outputs"), i, o) {
        json_t *bs = json_object_get(json_object_get(o, "parameters"), "binary_data_size");
        size_t n = bs ? (size_t)json_integer_value(bs) : 0;
        if (strcmp(json_string_value(json_object_get(o, "name")), name) != 0) {
            off += n;
            continue;
        }
        bool ints = !strcmp(json_string_value(json_object_get(o, "datatype")), "INT32");
        *binary = bs != NULL;
        if (bs) {
            if (n / 4 > cap || off + n > a->raw_len)
                return SIZE_MAX;
            for (size_t k = 0; k < n / 4; k++) {
                int32_t x;
                memcpy(ints ? (void *)&x : (void *)&out[k], a->raw + off + 4 * k, 4);
                if (ints)
                    out[k] = (float)x;
            }
            return n / 4;
        }
        return flatten(json_object_get(o, "data"), out, cap);
    }
    return SIZE_MAX;
}

static size_t run_v2_cases(const api_registry *models) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/requests/v2", cases_dir);
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (!d)
        return 0;
    char *names[512];
    size_t count = 0;
    struct dirent *de;
    while ((de = readdir(d)) && count < 512)
        if (strstr(de->d_name, ".case"))
            names[count++] = strdup(de->d_name);
    closedir(d);
    qsort(names, count, sizeof *names, cmp_str);
    for (size_t i = 0; i < count; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t len = 0;
        char *text = read_file(path, &len);
        CHECK(text != NULL, "cannot read %s", path);
        if (!text)
            continue;
        char *nl = memchr(text, '\n', len);
        size_t hl = nl ? (size_t)(nl - text) : len;
        char head[256] = "", phrase[160] = "", code[64] = "", model[64] = "", version[16] = "";
        snprintf(head, sizeof head, "%.*s", (int)hl, text);
        char *bar = strstr(head, " | ");
        if (bar) {
            snprintf(phrase, sizeof phrase, "%s", bar + 3);
            *bar = '\0';
        }
        const char *body = nl ? nl + 1 : text + len;
        size_t blen = len - (size_t)(body - text), header = API_V2_NO_HEADER;
        int status = 0;
        bool has_version = false;
        api_limits lim = api_limits_default();
        char *save = NULL;
        for (char *tok = strtok_r(head, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
            const char *eq = strchr(tok, '=');
            size_t v = eq ? (size_t)strtoull(eq + 1, NULL, 10) : 0;
            if (!status)
                status = atoi(tok);
            else if (!strncmp(tok, "model=", 6))
                snprintf(model, sizeof model, "%s", eq + 1);
            else if (!strncmp(tok, "version=", 8))
                has_version = snprintf(version, sizeof version, "%s", eq + 1) >= 0;
            else if (!strncmp(tok, "header=", 7))
                header = v;
            else if (!strncmp(tok, "max_job_bytes=", 14))
                lim.max_job_bytes = v;
            else if (!strncmp(tok, "max_dim=", 8))
                lim.max_dim = v;
            else if (!eq)
                snprintf(code, sizeof code, "%s", tok);
        }
        char *exact = malloc(blen ? blen : 1); /* exactly blen bytes: ASan sees a read past */
        memcpy(exact, body, blen);
        api_error e = {0};
        v2_answer a;
        bool ok = v2_request(exact, blen, header, model, has_version ? version : NULL, models, &lim,
                             &e, &a);
        int got = ok ? 200 : e.status;
        CHECK(got == status, "%s: status %d, want %d (%s: %s)", path, got, status, e.code,
              e.message);
        if (status != 200 && got == status) {
            CHECK(!strcmp(e.code, code), "%s: code %s, want %s (%s)", path, e.code, code,
                  e.message);
            CHECK(e.message[0] && !strchr(e.message, '\n'), "%s: message must be one line", path);
            CHECK(!phrase[0] || strstr(e.message, phrase), "%s: the message \"%s\" lacks \"%s\"",
                  path, e.message, phrase);
        }
        if (ok) {
            const char *mn = json_string_value(json_object_get(a.j, "model_name"));
            CHECK(mn && !strcmp(mn, model) && json_array_size(json_object_get(a.j, "outputs")) > 0,
                  "%s: model_name %s, outputs %zu", path, mn ? mn : "none",
                  json_array_size(json_object_get(a.j, "outputs")));
        }
        v2_answer_free(&a);
        free(exact);
        free(text);
        free(names[i]);
    }
    return count;
}

/* One tensor of a v2/v1 pair of requests. */
typedef struct pair_in {
    const char *v1, *v2; /* the field's names (sdpa: q/k/v in both) */
    int dt;              /* APIP_DT_* */
    size_t rank, dims[4];
    const float *f;   /* FP32 (may hold -inf in attn_bias) */
    const int32_t *i; /* INT32 (key_lengths, an INT32 key_mask) */
    const uint8_t *b; /* BOOL */
} pair_in;

static size_t pair_count(const pair_in *t) {
    size_t n = 1;
    for (size_t k = 0; k < t->rank; k++)
        n *= t->dims[k];
    return n;
}

/* Nested JSON arrays of the integers (or bools as 0/1) of t. */
static void sb_ints(sb *b, const pair_in *t, size_t lvl, size_t *at) {
    sb_add(b, "[");
    for (size_t i = 0; i < t->dims[lvl]; i++) {
        if (i)
            sb_add(b, ",");
        if (lvl + 1 < t->rank)
            sb_ints(b, t, lvl + 1, at);
        else
            sb_add(b, "%d", t->i ? (int)t->i[*at] : (int)t->b[*at]), (*at)++;
    }
    sb_add(b, "]");
}

/* The v1 body: base64 floats, nested integer lists, the extra fields, base64 out. */
static void pair_v1(sb *b, const pair_in *in, size_t n, const char *extra) {
    sb_add(b, "{\"encoding\":\"base64\"%s", extra);
    for (size_t k = 0; k < n; k++) {
        sb_add(b, ",\"%s\":", in[k].v1);
        size_t at = 0;
        if (in[k].dt == APIP_DT_FP32)
            sb_tensor_b64(b, in[k].f, in[k].dims, in[k].rank);
        else
            sb_ints(b, &in[k], 0, &at);
    }
    sb_add(b, "}");
}

/* The v2 body: binary inputs and outputs, or JSON data and outputs. Returns the header length
 * (API_V2_NO_HEADER for JSON). */
static size_t pair_v2(sb *b, const pair_in *in, size_t n, const char *params, bool binary) {
    static const char *const dts[] = {"FP32", "INT32", "BOOL"};
    sb_add(b, "{\"parameters\":{%s%s\"binary_data_output\":%s},\"inputs\":[", params,
           params[0] ? "," : "", binary ? "true" : "false");
    for (size_t k = 0; k < n; k++) {
        const pair_in *t = &in[k];
        size_t c = pair_count(t);
        sb_add(b, "%s{\"name\":\"%s\",\"datatype\":\"%s\",\"shape\":[", k ? "," : "", t->v2,
               dts[t->dt]);
        for (size_t d = 0; d < t->rank; d++)
            sb_add(b, "%s%zu", d ? "," : "", t->dims[d]);
        if (binary) {
            sb_add(b, "],\"parameters\":{\"binary_data_size\":%zu}}",
                   c * (t->dt == APIP_DT_BOOL ? 1 : 4));
            continue;
        }
        sb_add(b, "],\"data\":[");
        for (size_t e = 0; e < c; e++) {
            char num[40];
            if (t->dt == APIP_DT_FP32 && isinf(t->f[e]))
                snprintf(num, sizeof num, "\"-inf\"");
            else if (t->dt == APIP_DT_FP32)
                num[api_float_write(num, t->f[e])] = '\0';
            else if (t->dt == APIP_DT_BOOL)
                snprintf(num, sizeof num, "%s", t->b[e] ? "true" : "false");
            else
                snprintf(num, sizeof num, "%d", (int)t->i[e]);
            sb_add(b, "%s%s", e ? "," : "", num);
        }
        sb_add(b, "]}");
    }
    sb_add(b, "]}");
    if (!binary)
        return API_V2_NO_HEADER;
    size_t hl = b->n;
    for (size_t k = 0; k < n; k++) {
        const pair_in *t = &in[k];
        size_t c = pair_count(t);
        if (t->dt == APIP_DT_FP32)
            sb_bytes(b, t->f, c * 4);
        else if (t->dt == APIP_DT_INT32)
            sb_bytes(b, t->i, c * 4);
        else
            sb_bytes(b, t->b, c);
    }
    return hl;
}

/* v1 (base64) and v2 (binary, and JSON) answers to the same job agree bit for bit. */
static void pair_check(const char *what, const char *model, const pair_in *in, size_t n,
                       const char *v1_extra, const char *v2_params, const api_registry *models) {
    api_op op = strcmp(model, API_V2_SDPA_MODEL) ? API_OP_ATTENTION : API_OP_SDPA;
    sb b1 = {0};
    pair_v1(&b1, in, n, v1_extra);
    if (op == API_OP_ATTENTION) { /* the model by name */
        sb named = {0};
        sb_add(&named, "{\"model\":\"%s\",%s", model, b1.s + 1);
        free(b1.s);
        b1 = named;
    }
    api_error e = {0};
    json_t *r1 = request_str(op, b1.s, models, &e);
    CHECK(r1 != NULL, "%s: v1 failed: %s", what, e.message);
    static const char *const v1_names[3] = {"output", "weights", "indices"};
    static const char *const v2_names[3] = {"output", "weights", "weights_indices"};
    for (int mode = 0; mode < 2 && r1; mode++) {
        sb b2 = {0};
        size_t hl = pair_v2(&b2, in, n, v2_params, mode == 0);
        api_limits lim = api_limits_default();
        v2_answer a;
        bool ok = v2_request(b2.s, b2.n, hl, model, NULL, models, &lim, &e, &a);
        CHECK(ok, "%s (%s): v2 failed: %s", what, mode ? "JSON" : "binary", e.message);
        for (int o = 0; ok && o < 3; o++) {
            const json_t *t1 = json_object_get(r1, v1_names[o]);
            if (o == 1 && json_object_get(t1, "values"))
                t1 = json_object_get(t1, "values");
            if (o == 2)
                t1 = json_object_get(json_object_get(r1, "weights"), "indices");
            size_t cap = 1 << 20;
            float *x1 = malloc(cap * sizeof *x1), *x2 = malloc(cap * sizeof *x2);
            size_t n1 = t1 ? flatten(t1, x1, cap) : SIZE_MAX;
            if (o == 2 && n1 != SIZE_MAX) /* int32 bits read as floats: back to values */
                for (size_t k = 0; k < n1; k++) {
                    int32_t v;
                    memcpy(&v, &x1[k], 4);
                    x1[k] = (float)v;
                }
            bool bin = false;
            size_t n2 = v2_output(&a, v2_names[o], x2, cap, &bin), at = 0;
            bool wanted = o == 0 || (o == 1 && strstr(v1_extra, "need_weights")) ||
                          (o == 2 && strstr(v1_extra, "top_k"));
            CHECK(n1 == n2 && (n1 != SIZE_MAX) == wanted,
                  "%s (%s): %s has %zu values in v1, %zu in v2", what, mode ? "JSON" : "binary",
                  v2_names[o], n1, n2);
            CHECK(n2 == SIZE_MAX || bin == (mode == 0), "%s: %s binary %d in mode %d", what,
                  v2_names[o], bin, mode);
            if (n1 == n2 && n1 != SIZE_MAX)
                CHECK(same_bits(x1, x2, n1, &at), "%s (%s): %s[%zu] is %.9g in v1, %.9g in v2",
                      what, mode ? "JSON" : "binary", v2_names[o], at, (double)x1[at],
                      (double)x2[at]);
            free(x1);
            free(x2);
        }
        v2_answer_free(&a);
        free(b2.s);
    }
    json_decref(r1);
    free(b1.s);
}

void test_v2(void) {
    api_registry *models = builtin_registry();
    size_t n = run_v2_cases(models);
    CHECK(n >= 60, "only %zu v2 request cases found", n);
    printf("v2 request cases: %zu\n", n);

    /* v1 and v2 answer the same job with the same bits. */
    enum { N = 2, L = 5, S = 3, E = 64, H = 4 };
    float *q = frand_new(N * L * E), *kv = frand_new(N * S * E), *lq = frand_new(6 * 256);
    float *bias = frand_new(L * L);
    for (size_t i = 0; i < L; i++)
        for (size_t j = i + 1; j < L; j++)
            bias[i * L + j] = -INFINITY;
    int32_t kl[N] = {2, 5}, km[N * L] = {1, 0, 1, 1, 0, 1, 1, 1, 1, 1};
    uint8_t am[N * H * L * L];
    for (size_t i = 0; i < sizeof am; i++)
        am[i] = (uint8_t)(rnd64() % 4 != 0);
    pair_in qin = {"query", "query", APIP_DT_FP32, 3, {N, L, E}, .f = q};
    pair_in q2in = {"query", "query", APIP_DT_FP32, 2, {L, E}, .f = q};
    pair_in kin = {"key", "key", APIP_DT_FP32, 3, {N, S, E}, .f = kv};
    pair_in vin = {"value", "value", APIP_DT_FP32, 3, {N, S, E}, .f = kv};
    pair_in klin = {"key_lengths", "key_lengths", APIP_DT_INT32, 1, {N}, .i = kl};
    pair_in kmin = {"key_mask", "key_mask", APIP_DT_INT32, 2, {N, L}, .i = km};
    pair_in amin = {"attn_mask", "attn_mask", APIP_DT_BOOL, 4, {N, H, L, L}, .b = am};
    pair_in abin = {"attn_bias", "attn_bias", APIP_DT_FP32, 2, {L, L}, .f = bias};
    pair_in lin = {"query", "query", APIP_DT_FP32, 3, {1, 6, 256}, .f = lq};

    pair_check("self", "demo", (pair_in[]){qin}, 1, "", "", models);
    pair_check("causal per-head", "demo", (pair_in[]){qin}, 1,
               ",\"causal\":true,\"need_weights\":\"per_head\"",
               "\"causal\":true,\"need_weights\":\"per_head\"", models);
    pair_check("cross bottom-right mean", "demo", (pair_in[]){qin, kin, vin}, 3,
               ",\"causal\":\"bottom_right\",\"need_weights\":\"mean\"",
               "\"causal\":\"bottom_right\",\"need_weights\":\"mean\"", models);
    pair_check("key lengths and mask", "demo", (pair_in[]){qin, klin, kmin}, 3,
               ",\"need_weights\":\"per_head\"", "\"need_weights\":\"per_head\"", models);
    pair_check("attn mask and bias", "demo", (pair_in[]){qin, amin, abin}, 3,
               ",\"need_weights\":\"per_head\"", "\"need_weights\":\"per_head\"", models);
    pair_check("heads and top-k", "demo", (pair_in[]){qin}, 1,
               ",\"need_weights\":\"per_head\",\"heads\":[3,1],\"weights_top_k\":2",
               "\"need_weights\":\"per_head\",\"heads\":\"3,1\",\"weights_top_k\":2", models);
    pair_check("rank 2, mean top-k", "demo", (pair_in[]){q2in}, 1,
               ",\"need_weights\":\"mean\",\"weights_top_k\":3",
               "\"need_weights\":\"mean\",\"weights_top_k\":3", models);
    pair_check("lesson", "lesson", (pair_in[]){lin}, 1, ",\"need_weights\":\"per_head\"",
               "\"need_weights\":\"per_head\"", models);

    float *sq = frand_new(2 * 3 * 4 * 8), *sk = frand_new(2 * 3 * 6 * 8),
          *sv = frand_new(2 * 3 * 6 * 5);
    int32_t skm[2 * 6] = {1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 0, 1};
    pair_in sdpa[4] = {{"q", "q", APIP_DT_FP32, 4, {2, 3, 4, 8}, .f = sq},
                       {"k", "k", APIP_DT_FP32, 4, {2, 3, 6, 8}, .f = sk},
                       {"v", "v", APIP_DT_FP32, 4, {2, 3, 6, 5}, .f = sv},
                       {"key_mask", "key_mask", APIP_DT_INT32, 2, {2, 6}, .i = skm}};
    pair_check("sdpa", "sdpa", sdpa, 4,
               ",\"scale\":0.3,\"causal\":\"bottom_right\",\"need_weights\":true",
               "\"scale\":0.3,\"causal\":\"bottom_right\",\"need_weights\":\"per_head\"", models);
    pair_check("sdpa top-k", "sdpa", sdpa, 3, ",\"need_weights\":true,\"weights_top_k\":2",
               "\"need_weights\":true,\"weights_top_k\":2", models);

    /* The name sdpa is the protocol's: no registry model takes it. */
    api_error e = {0};
    api_registry *r = api_registry_create();
    CHECK(api_registry_add(r, api_model_init_identity("sdpa", 4, 1, &e), &e) != 0 &&
              e.status == 400 && strstr(e.message, "reserved") && api_registry_count(r) == 0,
          "a model named sdpa: %d %s", e.status, e.message);
    api_registry_destroy(r);

    /* Metadata: every model and sdpa; unknown names and versions are 404. */
    api_buf b = {0};
    CHECK(api_v2_model_json(models, "lesson", "1", &b, &e) == 0, "lesson metadata: %s", e.message);
    json_t *j = json_loadb(b.data, b.len, 0, NULL);
    json_t *in0 = json_array_get(json_object_get(j, "inputs"), 0);
    CHECK(j && !strcmp(json_string_value(json_object_get(in0, "name")), "query") &&
              json_integer_value(json_array_get(json_object_get(in0, "shape"), 2)) == 256 &&
              json_array_size(json_object_get(j, "outputs")) == 3,
          "lesson metadata: %.*s", (int)b.len, b.data);
    json_decref(j);
    api_buf_reset(&b);
    e = (api_error){0};
    CHECK(api_v2_model_json(models, "sdpa", NULL, &b, &e) == 0 && memmem(b.data, b.len, "\"q\"", 3),
          "sdpa metadata");
    e = (api_error){0};
    CHECK(api_v2_model_check(models, "nope", NULL, &e) != 0 && e.status == 404, "unknown model");
    e = (api_error){0};
    CHECK(api_v2_model_check(models, "demo", "2", &e) != 0 && e.status == 404, "version 2");
    api_buf_reset(&b);
    api_v2_index_json(models, &b);
    j = json_loadb(b.data, b.len, 0, NULL);
    CHECK(json_array_size(j) == 3 &&
              !strcmp(json_string_value(json_object_get(json_array_get(j, 2), "name")), "sdpa"),
          "repository index: %.*s", (int)b.len, b.data);
    json_decref(j);
    api_buf_free(&b);
    free(q);
    free(kv);
    free(lq);
    free(bias);
    free(sq);
    free(sk);
    free(sv);
    api_registry_destroy(models);
}
