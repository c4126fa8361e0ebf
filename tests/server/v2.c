/* v2.c - the Open Inference Protocol (/v2) on the main daemon, route by route: metadata, JSON,
 * binary and mixed tensors, compressed bodies and replies, bad framing, its error form, and its
 * answers against v1's bit for bit; and a gzip-coded reply under a tight reply budget. */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../harness.h"
#include "server_test.h"

void test_v2_routes(int port) {
    reply r;
    get(port, "/v2", &r);
    json_t *j = json_loads(r.body, 0, NULL);
    json_t *ext = json_object_get(j, "extensions");
    bool binary_ext = false;
    for (size_t i = 0; i < json_array_size(ext); i++)
        binary_ext |= !strcmp(json_string_value(json_array_get(ext, i)), "binary_tensor_data");
    CHECK(r.status == 200 && binary_ext && json_string_value(json_object_get(j, "name")) &&
              json_string_value(json_object_get(j, "version")),
          "GET /v2: %ld %.300s", r.status, r.body);
    json_decref(j);
    reply_free(&r);
    static const char *const live[] = {"/v2/health/live", "/v2/health/ready"};
    for (int i = 0; i < 2; i++) {
        get(port, live[i], &r);
        CHECK(r.status == 200, "GET %s: %ld", live[i], r.status);
        reply_free(&r);
    }

    /* Every model's metadata and readiness: demo, lesson, the files, sdpa. */
    static const char *const models[] = {"demo", "lesson", "f32", "f16", "bf16", "kvdim", "sdpa"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char path[128];
        bool sdpa = !strcmp(models[i], "sdpa");
        snprintf(path, sizeof path, "/v2/models/%s", models[i]);
        get(port, path, &r);
        j = json_loads(r.body, 0, NULL);
        json_t *in = json_object_get(j, "inputs"), *outs = json_object_get(j, "outputs");
        const char *first = json_string_value(json_object_get(json_array_get(in, 0), "name"));
        CHECK(
            r.status == 200 && !strcmp(json_string_value(json_object_get(j, "name")), models[i]) &&
                json_array_size(in) == 7 && json_array_size(outs) == 3 && first &&
                !strcmp(first, sdpa ? "q" : "query") &&
                !strcmp(json_string_value(json_array_get(json_object_get(j, "versions"), 0)), "1"),
            "GET %s: %ld %.300s", path, r.status, r.body);
        if (!strcmp(models[i], "kvdim")) { /* key (N, S, 8), value (N, S, 12) */
            json_t *ks = json_object_get(json_array_get(in, 1), "shape");
            json_t *vs = json_object_get(json_array_get(in, 2), "shape");
            CHECK(json_integer_value(json_array_get(ks, 2)) == 8 &&
                      json_integer_value(json_array_get(vs, 2)) == 12 &&
                      json_integer_value(json_array_get(ks, 0)) == -1,
                  "kvdim metadata: key and value shapes %.300s", r.body);
        }
        json_decref(j);
        reply_free(&r);
        snprintf(path, sizeof path, "/v2/models/%s/versions/1/ready", models[i]);
        get(port, path, &r);
        j = json_loads(r.body, 0, NULL);
        CHECK(r.status == 200 && json_is_true(json_object_get(j, "ready")), "GET %s: %ld %s", path,
              r.status, r.body);
        json_decref(j);
        reply_free(&r);
    }
    get(port, "/v2/models/demo/ready", &r);
    CHECK(r.status == 200, "GET /v2/models/demo/ready: %ld", r.status);
    reply_free(&r);
    get(port, "/v2/models/demo/versions/1", &r);
    CHECK(r.status == 200, "GET /v2/models/demo/versions/1: %ld", r.status);
    reply_free(&r);
    get(port, "/v2/models/nope", &r);
    check_v2_error(&r, 404, "no model named \"nope\"", "metadata of an unknown model");
    reply_free(&r);
    get(port, "/v2/models/nope/ready", &r);
    check_v2_error(&r, 404, "nope", "readiness of an unknown model");
    reply_free(&r);
    get(port, "/v2/models/demo/versions/2/ready", &r);
    check_v2_error(&r, 404, "no version \"2\"", "readiness of version 2");
    reply_free(&r);
    get(port, "/v2/models/", &r);
    check_v2_error(&r, 404, NULL, "/v2/models/ without a name");
    reply_free(&r);
    get(port, "/v2/nothing", &r);
    check_v2_error(&r, 404, NULL, "an unknown /v2 route");
    reply_free(&r);
    /* Triton's model configuration: the metadata's tensors in its form, the server's workers and
     * queue policy. */
    get(port, "/v2/models/kvdim/versions/1/config", &r);
    j = json_loads(r.body, 0, NULL);
    json_t *cin = json_object_get(j, "input");
    json_t *dyn = json_object_get(j, "dynamic_batching");
    CHECK(r.status == 200 && !strcmp(json_string_value(json_object_get(j, "name")), "kvdim") &&
              json_integer_value(json_object_get(j, "max_batch_size")) == 0 &&
              json_array_size(cin) == 7 &&
              json_integer_value(
                  json_array_get(json_object_get(json_array_get(cin, 1), "dims"), 2)) == 8 &&
              !strcmp(json_string_value(json_object_get(json_array_get(cin, 4), "data_type")),
                      "TYPE_BOOL") &&
              json_integer_value(json_object_get(
                  json_array_get(json_object_get(j, "instance_group"), 0), "count")) == 2 &&
              json_integer_value(json_object_get(dyn, "max_queue_delay_microseconds")) == 200,
          "GET /v2/models/kvdim/versions/1/config: %ld %.400s", r.status, r.body);
    json_decref(j);
    reply_free(&r);
    get(port, "/v2/models/sdpa/config", &r);
    CHECK(r.status == 200 && strstr(r.body, "\"name\":\"sdpa\"") &&
              !strstr(r.body, "dynamic_batching"),
          "GET /v2/models/sdpa/config (sdpa never batches): %ld %.300s", r.status, r.body);
    reply_free(&r);
    get(port, "/v2/models/nope/config", &r);
    check_v2_error(&r, 404, "no model named \"nope\"", "the config of an unknown model");
    reply_free(&r);
    /* The statistics: of every model, or of one. */
    get(port, "/v2/models/stats", &r);
    j = json_loads(r.body, 0, NULL);
    CHECK(r.status == 200 &&
              json_array_size(json_object_get(j, "model_stats")) == 8, /* +induction */
          "GET /v2/models/stats: %ld %.300s", r.status, r.body);
    json_decref(j);
    reply_free(&r);
    get(port, "/v2/models/lesson/versions/2/stats", &r);
    check_v2_error(&r, 404, "no version \"2\"", "the statistics of version 2");
    reply_free(&r);
    /* A route attnd does not serve: the route, not a model, is missing (a model named
     * "demo/trace/setting" was blamed before). */
    get(port, "/v2/models/demo/trace/setting", &r);
    check_v2_error(&r, 404, "no route .../trace/setting", "Triton's trace setting of a model");
    reply_free(&r);
    req head = {.method = "HEAD", .path = "/v2/models/lesson"};
    http(NULL, port, &head, &r);
    CHECK(r.status == 200 && r.len == 0, "HEAD /v2/models/lesson: %ld, %zu bytes", r.status, r.len);
    reply_free(&r);

    /* The repository index lists every model and sdpa; v1's list never has sdpa. */
    req index = {.method = "POST", .path = "/v2/repository/index", .body = "", .len = 0};
    http(NULL, port, &index, &r);
    j = json_loads(r.body, 0, NULL);
    size_t found = 0;
    for (size_t i = 0; i < json_array_size(j); i++) {
        json_t *m = json_array_get(j, i);
        for (size_t k = 0; k < sizeof models / sizeof models[0]; k++)
            found += !strcmp(json_string_value(json_object_get(m, "name")), models[k]) &&
                     !strcmp(json_string_value(json_object_get(m, "state")), "READY");
    }
    bool induction = false; /* the built-in model of layers, listed as the others are */
    for (size_t i = 0; i < json_array_size(j); i++) {
        const char *n = json_string_value(json_object_get(json_array_get(j, i), "name"));
        induction |= n && !strcmp(n, "induction");
    }
    CHECK(r.status == 200 && found == 7 && induction && json_array_size(j) == 8,
          "POST /v2/repository/index: %ld %.400s", r.status, r.body);
    json_decref(j);
    reply_free(&r);
    get(port, "/v1/models", &r);
    CHECK(r.status == 200 && !strstr(r.body, "\"sdpa\""), "/v1/models lists sdpa: %.300s", r.body);
    reply_free(&r);

    /* Methods: 405 with Allow, in the protocol's error form. */
    post(NULL, port, "/v2/models/demo", "{}", &r);
    check_v2_error(&r, 405, "takes GET", "POST to model metadata");
    char *allow = header(&r, "Allow");
    CHECK(allow && strstr(allow, "GET") && !strstr(allow, "POST"), "405 Allow %s", allow);
    free(allow);
    reply_free(&r);
    get(port, "/v2/models/demo/infer", &r);
    check_v2_error(&r, 405, "takes POST", "GET of infer");
    allow = header(&r, "Allow");
    CHECK(allow && strstr(allow, "POST"), "405 Allow %s", allow);
    free(allow);
    reply_free(&r);

    /* CORS: a preflight may send the protocol's headers, and the reply exposes its own. */
    req pre = {.method = "OPTIONS",
               .path = "/v2/models/demo/infer",
               .hdrs = {"Origin: http://allowed.example", "Access-Control-Request-Method: POST",
                        "Access-Control-Request-Headers: inference-header-content-length"}};
    http(NULL, port, &pre, &r);
    char *acah = header(&r, "Access-Control-Allow-Headers");
    CHECK(r.status == 204 && acah && strcasestr(acah, "Inference-Header-Content-Length"),
          "v2 preflight: %ld, Allow-Headers %s", r.status, acah ? acah : "none");
    free(acah);
    reply_free(&r);
}

void test_v2_infer(int port, const char *log_path) {
    enum { N = 2, L = 6, S = 4, E = 64, H = 4 };
    float *q = rnd_array(N * L * E, 4100), *kv = rnd_array(N * S * E, 4101);
    float *lq = rnd_array(5 * 256, 4102), *bias = rnd_array(L * L, 4103);
    for (size_t i = 0; i < L; i++)
        for (size_t k = i + 1; k < L; k++)
            bias[i * L + k] = -INFINITY;
    int32_t kl[N] = {3, 6}, km[N * L] = {1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1};
    uint8_t am[N * H * L * L];
    uint64_t st = 4104;
    for (size_t i = 0; i < sizeof am; i++)
        am[i] = rnd(&st) > -0.6f;
    v2_in qin = {"query", "FP32", 3, {N, L, E}, q};
    v2_in q2 = {"query", "FP32", 2, {L, E}, q};
    v2_in kin = {"key", "FP32", 3, {N, S, E}, kv};
    v2_in vin = {"value", "FP32", 3, {N, S, E}, kv};
    v2_in klin = {"key_lengths", "INT32", 1, {N}, kl};
    v2_in kmin = {"key_mask", "INT32", 2, {N, L}, km};
    v2_in amin = {"attn_mask", "BOOL", 4, {N, H, L, L}, am};
    v2_in abin = {"attn_bias", "FP32", 2, {L, L}, bias};

    /* v1 and v2 agree to the bit on the same job. */
    v2_agrees(port, "self-attention", "demo", (v2_in[]){qin}, 1, "{}", "{}");
    v2_agrees(port, "causal, per-head weights", "demo", (v2_in[]){qin}, 1,
              "{\"causal\": true, \"need_weights\": \"per_head\"}",
              "{\"causal\": true, \"need_weights\": \"per_head\"}");
    v2_agrees(port, "cross, bottom-right, mean", "demo", (v2_in[]){qin, kin, vin}, 3,
              "{\"causal\": \"bottom_right\", \"need_weights\": \"mean\"}",
              "{\"causal\": \"bottom_right\", \"need_weights\": \"mean\"}");
    v2_agrees(port, "key lengths and key mask", "demo", (v2_in[]){qin, klin, kmin}, 3,
              "{\"need_weights\": \"per_head\", \"causal\": \"top_left\"}",
              "{\"need_weights\": \"per_head\", \"causal\": \"top_left\"}");
    v2_agrees(port, "attn mask and bias", "demo", (v2_in[]){q2, abin}, 2,
              "{\"need_weights\": \"mean\"}", "{\"need_weights\": \"mean\"}");
    v2_agrees(port, "per-head attn mask", "demo", (v2_in[]){qin, amin}, 2,
              "{\"need_weights\": \"per_head\"}", "{\"need_weights\": \"per_head\"}");
    v2_agrees(port, "heads subset and top-k", "demo", (v2_in[]){qin, kmin}, 2,
              "{\"need_weights\": \"per_head\", \"heads\": [2, 0], \"weights_top_k\": 3}",
              "{\"need_weights\": \"per_head\", \"heads\": \"2,0\", \"weights_top_k\": 3}");
    v2_agrees(port, "lesson", "lesson", (v2_in[]){{"query", "FP32", 2, {5, 256}, lq}}, 1,
              "{\"need_weights\": \"per_head\"}", "{\"need_weights\": \"per_head\"}");
    float *kq = rnd_array(3 * 16 + 5 * 8 + 5 * 12, 4105);
    v2_agrees(port, "file model kvdim (cross)", "kvdim",
              (v2_in[]){{"query", "FP32", 2, {3, 16}, kq},
                        {"key", "FP32", 2, {5, 8}, kq + 48},
                        {"value", "FP32", 2, {5, 12}, kq + 88}},
              3, "{\"need_weights\": \"per_head\"}", "{\"need_weights\": \"per_head\"}");
    float *sq = rnd_array(2 * 3 * 4 * 8 + 2 * 3 * 5 * 8 * 2, 4106);
    int32_t skm[2 * 5] = {1, 1, 0, 1, 1, 0, 1, 1, 1, 1};
    v2_in sdpa[4] = {{"q", "FP32", 4, {2, 3, 4, 8}, sq},
                     {"k", "FP32", 4, {2, 3, 5, 8}, sq + 192},
                     {"v", "FP32", 4, {2, 3, 5, 8}, sq + 432},
                     {"key_mask", "INT32", 2, {2, 5}, skm}};
    v2_agrees(port, "sdpa", "sdpa", sdpa, 4,
              "{\"scale\": 0.25, \"need_weights\": true, \"weights_top_k\": 2}",
              "{\"scale\": 0.25, \"need_weights\": \"per_head\", \"weights_top_k\": 2}");

    /* The request as a tritonclient user sends it, by its parts: outputs chosen, one binary and
     * one JSON, an id, no Content-Type; the id comes back, the outputs in the asked order. */
    size_t len, hl;
    char *b = v2_body((v2_in[]){qin}, 1, true, "{\"need_weights\": \"per_head\"}",
                      "[{\"name\": \"weights\", \"parameters\": {\"binary_data\": true}}, "
                      "{\"name\": \"output\", \"parameters\": {\"binary_data\": false}}]",
                      &len, &hl);
    /* "id" is added by hand at the front of the JSON: {"id": "r-7", ... */
    char *withid = malloc(len + 32);
    int idl = snprintf(withid, 32, "{\"id\": \"r-7\", ");
    memcpy(withid + idl, b + 1, len - 1);
    reply r;
    v2_post(port, "/v2/models/demo/infer", withid, len + (size_t)idl - 1, hl + (size_t)idl - 1,
            NULL, NULL, NULL, &r);
    v2_out o;
    if (v2_read(&r, &o, "outputs chosen")) {
        json_t *outs = json_object_get(o.j, "outputs");
        const char *o0 = json_string_value(json_object_get(json_array_get(outs, 0), "name"));
        const char *id = json_string_value(json_object_get(o.j, "id"));
        tens w, out;
        bool wb = false, ob = true;
        CHECK(json_array_size(outs) == 2 && o0 && !strcmp(o0, "weights") && id &&
                  !strcmp(id, "r-7") && v2_tensor(&o, "weights", &w, &wb) && wb &&
                  v2_tensor(&o, "output", &out, &ob) && !ob && w.n == N * H * L * L &&
                  out.n == N * L * E,
              "outputs chosen: %.400s", (char *)o.body);
        tens_free(&w);
        tens_free(&out);
    }
    v2_out_free(&o);
    reply_free(&r);
    free(withid);

    /* Media types: any is taken, as Triton takes it (issue 36): the binary form is known by its
     * Inference-Header-Content-Length, whatever the type says (fetch sends text/plain for a
     * string body, urllib application/x-www-form-urlencoded). */
    static const char *const types[] = {"application/octet-stream", "text/plain",
                                        "application/x-www-form-urlencoded", "application/json"};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        v2_post(port, "/v2/models/demo/infer", b, len, hl, types[t], NULL, NULL, &r);
        CHECK(r.status == 200, "the binary form as %s: %ld %.200s", types[t], r.status, r.body);
        reply_free(&r);
    }
    static const char json_body[] =
        "{\"inputs\": [{\"name\": \"query\", \"shape\": [1, 64], \"datatype\": \"FP32\", "
        "\"data\": [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "
        "0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "
        "0, 0, 0, 0, 0, 0, 0, 0]}]}";
    for (size_t t = 1; t < 3; t++) {
        v2_post(port, "/v2/models/demo/infer", json_body, strlen(json_body), 0, types[t], NULL,
                NULL, &r);
        CHECK(r.status == 200, "the JSON form as %s: %ld %.200s", types[t], r.status, r.body);
        reply_free(&r);
    }

    /* The answer to compare the coded ones with: binary in, binary out. */
    reply plain;
    v2_post(port, "/v2/models/demo/infer", b, len, hl, NULL, NULL, NULL, &plain);
    v2_out po;
    bool plain_ok = v2_read(&plain, &po, "plain");
    tens want;
    bool wb;
    plain_ok = plain_ok && v2_tensor(&po, "weights", &want, &wb);

    /* Request bodies sent with gzip and deflate: the same answer. The JSON length stays that
     * of the decoded body. */
    for (int gz = 0; gz < 2; gz++) {
        size_t zl;
        unsigned char *z = deflate_all(b, len, gz, &zl);
        v2_post(port, "/v2/models/demo/infer", (char *)z, zl, hl, NULL,
                gz ? "Content-Encoding: gzip" : "Content-Encoding: deflate", NULL, &r);
        tens got;
        size_t at;
        if (v2_read(&r, &o, gz ? "gzip body" : "deflate body") && plain_ok)
            CHECK(v2_tensor(&o, "weights", &got, &wb) && same_bits_tens(&got, &want, &at),
                  "%s body: weights differ", gz ? "gzip" : "deflate");
        tens_free(&got);
        v2_out_free(&o);
        reply_free(&r);
        free(z);
    }
    /* Replies coded as the client accepts: gzip, deflate (gzip refused by q=0), or none. */
    static const char *const accepts[][2] = {{"Accept-Encoding: gzip", "gzip"},
                                             {"Accept-Encoding: gzip;q=0, deflate", "deflate"},
                                             {"Accept-Encoding: br", NULL}};
    for (int k = 0; k < 3; k++) {
        v2_post(port, "/v2/models/demo/infer", b, len, hl, NULL, accepts[k][0], NULL, &r);
        tens got;
        size_t at;
        if (v2_read(&r, &o, accepts[k][0])) {
            char *vary = header(&r, "Vary");
            CHECK(accepts[k][1] ? o.encoding && !strcmp(o.encoding, accepts[k][1]) : !o.encoding,
                  "%s: Content-Encoding %s", accepts[k][0], o.encoding ? o.encoding : "none");
            CHECK(vary && strstr(vary, "Accept-Encoding"), "%s: Vary %s", accepts[k][0], vary);
            CHECK(!accepts[k][1] || r.len < o.len, "%s: %zu bytes sent for %zu", accepts[k][0],
                  r.len, o.len);
            if (plain_ok)
                CHECK(v2_tensor(&o, "weights", &got, &wb) && same_bits_tens(&got, &want, &at),
                      "%s: weights differ", accepts[k][0]);
            free(vary);
        }
        tens_free(&got);
        v2_out_free(&o);
        reply_free(&r);
    }
    tens_free(&want);
    v2_out_free(&po);
    reply_free(&plain);

    /* A gzip bomb: 64 MiB of zeros in about 64 KiB, over the 1 MiB body limit once decoded. */
    {
        size_t n = (size_t)64 << 20, zl;
        char *zeros = calloc(1, n);
        unsigned char *z = deflate_all(zeros, n, true, &zl);
        v2_post(port, "/v2/models/demo/infer", (char *)z, zl, 100, NULL, "Content-Encoding: gzip",
                NULL, &r);
        check_v2_error(&r, 413, "decoded to more than", "a gzip bomb");
        CHECK(zl < 200000, "the bomb is %zu bytes", zl);
        reply_free(&r);
        free(z);
        free(zeros);
    }

    /* Framing of the binary body. */
    v2_post(port, "/v2/models/demo/infer", b, len, len + 1, NULL, NULL, NULL, &r);
    check_v2_error(&r, 400, "past the end of the body", "a header length past the body");
    reply_free(&r);
    v2_post(port, "/v2/models/demo/infer", b, len, 0, NULL, "Inference-Header-Content-Length: 1x",
            NULL, &r);
    check_v2_error(&r, 400, "Inference-Header-Content-Length", "a header length not a number");
    reply_free(&r);
    v2_post(port, "/v2/models/demo/infer", b, len - 4, hl, NULL, NULL, NULL, &r);
    check_v2_error(&r, 400, "are left after the JSON", "binary data cut short");
    reply_free(&r);
    {
        char *more = malloc(len + 8);
        memcpy(more, b, len);
        memset(more + len, 0, 8);
        v2_post(port, "/v2/models/demo/infer", more, len + 8, hl, NULL, NULL, NULL, &r);
        check_v2_error(&r, 400, "add up to", "bytes left over after the binary data");
        reply_free(&r);
        free(more);
    }
    {
        /* binary_data_size that disagrees with shape x datatype: 4 bytes short */
        char *bad = malloc(len + 8);
        size_t want_b = (size_t)N * L * E * 4;
        char from[40], to[40];
        snprintf(from, sizeof from, "\"binary_data_size\":%zu", want_b);
        snprintf(to, sizeof to, "\"binary_data_size\":%zu", want_b - 4);
        char *at = strstr(b, from);
        size_t pre = at ? (size_t)(at - b) : 0, d = strlen(from) - strlen(to);
        if (CHECK(at != NULL, "binary_data_size not found in %.200s", b)) {
            memcpy(bad, b, pre);
            memcpy(bad + pre, to, strlen(to));
            memcpy(bad + pre + strlen(to), at + strlen(from), len - pre - strlen(from));
            v2_post(port, "/v2/models/demo/infer", bad, len - d - 4, hl - d, NULL, NULL, NULL, &r);
            check_v2_error(&r, 400, "binary_data_size is", "binary_data_size against the shape");
            reply_free(&r);
        }
        free(bad);
    }
    free(b);

    /* Errors in the protocol's form: HTTP's (404, 413), the parser's (400), a worker's (400). */
    b = v2_body((v2_in[]){q2}, 1, false, NULL, NULL, &len, &hl);
    v2_post(port, "/v2/models/nope/infer", b, len, 0, "application/json", NULL, NULL, &r);
    check_v2_error(&r, 404, "nope", "infer on an unknown model");
    reply_free(&r);
    v2_post(port, "/v2/models/demo/versions/3/infer", b, len, 0, NULL, NULL, NULL, &r);
    check_v2_error(&r, 404, "version", "infer on version 3");
    reply_free(&r);
    v2_post(port, "/v2/models/demo/versions/1/infer", b, len, 0, NULL, NULL, NULL, &r);
    CHECK(r.status == 200, "infer on version 1: %ld %.200s", r.status, r.body);
    reply_free(&r);
    /* "/versions/" whose end reaches into "/infer": no version (its length once underflowed
     * and the rest was read as version "infer"), so "demo/versions" is a path attnd does not
     * route. */
    v2_post(port, "/v2/models/demo/versions/infer", b, len, 0, NULL, NULL, NULL, &r);
    check_v2_error(&r, 404, "no route .../versions;", "infer on /v2/models/demo/versions/infer");
    reply_free(&r);
    v2_post(port, "/v2/models/demo/infer", "{\"inputs\": [", 12, 0, NULL, NULL, NULL, &r);
    check_v2_error(&r, 400, "not valid JSON", "broken JSON");
    reply_free(&r);
    free(b);
    {
        char cl[64];
        snprintf(cl, sizeof cl, "Content-Length: %d", 2 << 20);
        req big = {.path = "/v2/models/demo/infer", .ctype = "application/json", .hdrs = {cl}};
        big.body = "{}";
        big.len = 2;
        http(NULL, port, &big, &r);
        check_v2_error(&r, 413, "--max-body-bytes", "a body over the limit");
        reply_free(&r);
    }
    float *huge = malloc(L * E * sizeof *huge);
    for (size_t i = 0; i < L * E; i++)
        huge[i] = 1e30f;
    b = v2_body((v2_in[]){{"query", "FP32", 2, {L, E}, huge}}, 1, true, NULL, NULL, &len, &hl);
    v2_post(port, "/v2/models/demo/infer", b, len, hl, NULL, NULL, NULL, &r);
    check_v2_error(&r, 400, "overflows float32", "a job that overflows (from the worker)");
    reply_free(&r);
    free(b);
    free(huge);

    /* Metrics label the routes; the access log has the v2 lines. */
    CHECK(
        metric(port, "attnd_http_requests_total{route=\"/v2/models/{name}/infer\",code=\"200\"}") >=
            25,
        "metrics: v2 infer 200s %g",
        metric(port, "attnd_http_requests_total{route=\"/v2/models/{name}/infer\",code=\"200\"}"));
    CHECK(
        metric(port, "attnd_http_requests_total{route=\"/v2/models/{name}\",code=\"404\"}") >= 1 &&
            metric(port,
                   "attnd_http_requests_total{route=\"/v2/repository/index\",code=\"200\"}") >= 1 &&
            metric(port, "attnd_http_requests_total{route=\"/v2/health/ready\",code=\"200\"}") >= 1,
        "metrics: v2 metadata routes");
    char *log = slurp(log_path);
    CHECK(strstr(log, "method=POST path=/v2/models/demo/infer status=200") &&
              strstr(log, "path=/v2/models/sdpa/infer status=200"),
          "the access log lacks v2 infer lines");
    free(log);
    free(q), free(kv), free(lq), free(bias), free(kq), free(sq);
}

/* A /v2 reply coded for the client (gzip) under a budget of unsent replies that just holds the
 * reply's bound: the coded copy is kept only when smaller, at its own length, so a job that was
 * admitted is never computed and then refused. (Before, the coded buffer was charged at zlib's
 * worst case, deflateBound + 64, past the reservation: 503 reply_budget every time, with
 * nothing else held.) One key: every output row is the same, and the reply codes small. */
void test_v2_coded_budget(void) {
    enum { L = 16384, E = 64 };
    attnd d;
    const char *args[] = {"--threads", "1", "--max-unsent-bytes", "4194800", NULL};
    if (!attnd_start(&d, "v2-coded-budget", args, NULL))
        return;
    float *q = rnd_array(L * E, 4300), *k = rnd_array(E, 4301);
    v2_in in[2] = {{"query", "FP32", 3, {1, L, E}, q}, {"key", "FP32", 3, {1, 1, E}, k}};
    size_t len, hl;
    char *b = v2_body(in, 2, true, "{\"binary_data_output\": true}", NULL, &len, &hl);
    reply plain, coded;
    v2_post(d.port, "/v2/models/demo/infer", b, len, hl, NULL, NULL, NULL, &plain);
    v2_post(d.port, "/v2/models/demo/infer", b, len, hl, NULL, "Accept-Encoding: gzip", NULL,
            &coded);
    v2_out po, co;
    bool pok = v2_read(&plain, &po, "plain reply under a tight budget");
    bool cok = v2_read(&coded, &co, "gzip reply under a tight budget");
    if (pok && cok) {
        tens a, c;
        bool ab, cb;
        size_t at;
        CHECK(co.encoding && !strcmp(co.encoding, "gzip") && coded.len < plain.len / 10,
              "the reply should come gzip-coded and small: %s, %zu bytes for %zu",
              co.encoding ? co.encoding : "not coded", coded.len, plain.len);
        CHECK(v2_tensor(&po, "output", &a, &ab) && v2_tensor(&co, "output", &c, &cb) &&
                  same_bits_tens(&a, &c, &at),
              "the coded reply's output differs from the plain one");
        tens_free(&a);
        tens_free(&c);
    }
    CHECK(metric(d.port, "attnd_jobs_rejected_total{reason=\"reply_budget\"}") == 0,
          "no job refused for the reply budget");
    v2_out_free(&po);
    v2_out_free(&co);
    reply_free(&plain);
    reply_free(&coded);
    free(b);
    free(q);
    free(k);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "v2-coded-budget: exit status after SIGTERM");
}
