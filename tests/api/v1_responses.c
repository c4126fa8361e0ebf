/* v1_responses.c - API v1's answers (api/v1/response.c): the seed chapter's worked examples,
 * JSON and base64 answers bit for bit against libattn called directly, weights subsets and top-k,
 * fully masked rows, and SDPA key masks without leading dimensions. */
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_test.h"

/* ---- Worked examples ---------------------------------------------------------------------- */

static const char *seed_q = "[[1,1],[0,1],[1,0],[0.5,0.5]]";
static const char *seed_v = "[[1,0],[0,1],[1,1],[0.5,0.5]]";

void test_seed_example(void) {
    char body[512];
    snprintf(body, sizeof body, "{\"q\":%s,\"k\":%s,\"v\":%s,\"need_weights\":true}", seed_q,
             seed_q, seed_v);
    api_error e = {0};
    json_t *j = request_str(API_OP_SDPA, body, NULL, &e);
    CHECK(j != NULL, "seed sdpa: %s", e.message);
    if (!j)
        return;
    float out[8], w[16];
    CHECK(flatten(json_object_get(j, "output"), out, 8) == 8, "output is (4, 2)");
    CHECK(flatten(json_object_get(j, "weights"), w, 16) == 16, "weights are (4, 4)");
    CHECK(fabsf(out[0] - 0.70f) < 0.005f && fabsf(out[1] - 0.50f) < 0.005f,
          "output row 0 = [%g, %g], want [0.70, 0.50]", (double)out[0], (double)out[1]);
    CHECK(fabsf(w[0] - 0.40f) < 0.005f && fabsf(w[1] - 0.20f) < 0.005f &&
              fabsf(w[2] - 0.20f) < 0.005f && fabsf(w[3] - 0.20f) < 0.005f,
          "weights row 0 = [%g, %g, %g, %g]", (double)w[0], (double)w[1], (double)w[2],
          (double)w[3]);
    size_t dims[4];
    CHECK(shape_of_json(json_object_get(j, "output"), dims) == 2 && dims[0] == 4 && dims[1] == 2,
          "sdpa rank-2 output shape");
    CHECK(json_object_get(j, "usage") && json_object_get(j, "model") == NULL &&
              json_integer_value(json_object_get(json_object_get(j, "usage"), "flops")) == 128,
          "sdpa usage");
    CHECK(json_object_size(j) == 3, "sdpa response has output, weights, usage");
    json_decref(j);

    /* Through /v1/attention with identity projections and one head: Q = K = V = query, scale
     * 1/sqrt(E = 2), so the weights are the seed's and the output is weights @ query; with the
     * seed's values as value, the output is the seed's output. Reference in double. */
    const double x[4][2] = {{1, 1}, {0, 1}, {1, 0}, {0.5, 0.5}},
                 vv[4][2] = {{1, 0}, {0, 1}, {1, 1}, {0.5, 0.5}};
    double ref_w[4][4], ref_self[4][2] = {{0}}, ref_cross[4][2] = {{0}};
    for (int i = 0; i < 4; i++) {
        double s[4], mx = -1e300, z = 0;
        for (int k = 0; k < 4; k++) {
            s[k] = (x[i][0] * x[k][0] + x[i][1] * x[k][1]) / sqrt(2.0);
            mx = s[k] > mx ? s[k] : mx;
        }
        for (int k = 0; k < 4; k++)
            z += exp(s[k] - mx);
        for (int k = 0; k < 4; k++) {
            ref_w[i][k] = exp(s[k] - mx) / z;
            for (int c = 0; c < 2; c++) {
                ref_self[i][c] += ref_w[i][k] * x[k][c];
                ref_cross[i][c] += ref_w[i][k] * vv[k][c];
            }
        }
    }
    for (int cross = 0; cross < 2; cross++) {
        snprintf(body, sizeof body,
                 "{\"query\":%s%s%s,\"params\":{\"init\":\"identity\",\"num_heads\":1},"
                 "\"need_weights\":\"per_head\"}",
                 seed_q, cross ? ",\"value\":" : "", cross ? seed_v : "");
        j = request_str(API_OP_ATTENTION, body, NULL, &e);
        CHECK(j != NULL, "identity attention: %s", e.message);
        if (!j)
            continue;
        CHECK(flatten(json_object_get(j, "output"), out, 8) == 8, "output (4, 2)");
        CHECK(flatten(json_object_get(j, "weights"), w, 16) == 16, "weights (1, 4, 4)");
        double err = 0;
        for (int i = 0; i < 4; i++)
            for (int c = 0; c < 2; c++)
                err =
                    fmax(err, fabs((double)out[i * 2 + c] - (cross ? ref_cross : ref_self)[i][c]));
        for (int i = 0; i < 16; i++)
            err = fmax(err, fabs((double)w[i] - ref_w[i / 4][i % 4]));
        CHECK(err < 1e-6, "identity attention (cross %d) off by %g", cross, err);
        CHECK(cross || (fabsf(out[0] - 0.7016775f) < 1e-6f && fabsf(out[1] - 0.7016775f) < 1e-6f),
              "self-attention row 0 = [%g, %g]: weights @ query", (double)out[0], (double)out[1]);
        CHECK(!cross || (fabsf(out[0] - 0.70f) < 0.005f && fabsf(out[1] - 0.50f) < 0.005f),
              "cross row 0 = [%g, %g]", (double)out[0], (double)out[1]);
        size_t wd[4];
        CHECK(shape_of_json(json_object_get(j, "weights"), wd) == 3 && wd[0] == 1 && wd[1] == 4 &&
                  wd[2] == 4,
              "rank-2 per-head weights are (H, L, S)");
        CHECK(json_is_null(json_object_get(j, "model")) &&
                  json_integer_value(json_object_get(j, "num_heads")) == 1,
              "model null, num_heads 1");
        json_t *sh = json_object_get(j, "shape");
        CHECK(json_integer_value(json_object_get(sh, "N")) == 1 &&
                  json_integer_value(json_object_get(sh, "L")) == 4 &&
                  json_integer_value(json_object_get(sh, "S")) == 4 &&
                  json_integer_value(json_object_get(sh, "E")) == 2,
              "shape N, L, S, E");
        json_t *us = json_object_get(j, "usage");
        CHECK(json_is_integer(json_object_get(us, "flops")) &&
                  json_real_value(json_object_get(us, "queue_ms")) == 1.5 &&
                  json_real_value(json_object_get(us, "compute_ms")) == 2.25,
              "usage flops, queue_ms, compute_ms");
        json_decref(j);
    }
}

/* ---- Bitwise agreement with libattn ------------------------------------------------------- */

/* Random cross-attention with kdim/vdim, biases, every mask kind and per-head weights, sent as
 * JSON and as base64; the response (base64) must equal libattn's own result bit for bit. */
void test_bitwise_cross(void) {
    enum { N = 2, L = 5, S = 7, E = 8, H = 2, KD = 3, VD = 6 };
    float *q = frand_new(N * L * E), *k = frand_new(N * S * KD), *v = frand_new(N * S * VD);
    float *wq = frand_new(E * E), *wk = frand_new(E * KD), *wv = frand_new(E * VD);
    float *bin = frand_new(3 * E), *wo = frand_new(E * E), *bo = frand_new(E);
    float bias[N * L * S];
    for (int i = 0; i < N * L * S; i++)
        bias[i] = i % 11 == 3 ? -INFINITY : frand();
    int32_t kl[N] = {6, 4};
    uint8_t km[S] = {1, 1, 0, 1, 1, 1, 1};
    for (int b64 = 0; b64 < 2; b64++) {
        sb body = {0};
        void (*put)(sb *, const float *, const size_t *, size_t) = b64 ? sb_tensor_b64 : sb_tensor;
        sb_add(&body, "{\"query\":");
        put(&body, q, (size_t[]){N, L, E}, 3);
        sb_add(&body, ",\"key\":");
        put(&body, k, (size_t[]){N, S, KD}, 3);
        sb_add(&body, ",\"value\":");
        put(&body, v, (size_t[]){N, S, VD}, 3);
        sb_add(&body, ",\"params\":{\"num_heads\":%d,\"q_proj_weight\":", H);
        put(&body, wq, (size_t[]){E, E}, 2);
        sb_add(&body, ",\"k_proj_weight\":");
        put(&body, wk, (size_t[]){E, KD}, 2);
        sb_add(&body, ",\"v_proj_weight\":");
        put(&body, wv, (size_t[]){E, VD}, 2);
        sb_add(&body, ",\"in_proj_bias\":");
        put(&body, bin, (size_t[]){3 * E}, 1);
        sb_add(&body, ",\"out_proj.weight\":");
        put(&body, wo, (size_t[]){E, E}, 2);
        sb_add(&body, ",\"out_proj.bias\":");
        put(&body, bo, (size_t[]){E}, 1);
        sb_add(&body, "},\"causal\":\"bottom_right\",\"key_lengths\":[6,4],"
                      "\"key_mask\":[1,1,0,1,1,1,1],\"attn_bias\":");
        if (b64) {
            sb_tensor_b64(&body, bias, (size_t[]){N, L, S}, 3);
        } else { /* JSON cannot hold -inf: the string "-inf" stands for it */
            sb_add(&body, "[");
            for (int i = 0; i < N * L * S; i++) {
                char t[40];
                t[api_float_write(t, bias[i])] = '\0';
                sb_add(&body, "%s%s%s%s%s", i % (L * S) == 0 ? (i ? "]],[[" : "[[") : "",
                       i % S == 0 && i % (L * S) ? "],[" : "", i % S ? "," : "",
                       isinf(bias[i]) ? "\"-inf\"" : t, "");
            }
            sb_add(&body, "]]]");
        }
        sb_add(&body, ",\"need_weights\":\"per_head\",\"encoding\":\"base64\"}");
        api_error e = {0};
        json_t *j = request_str(API_OP_ATTENTION, body.s, NULL, &e);
        CHECK(j != NULL, "cross request (base64 in: %d): %s", b64, e.message);

        attn_mha_dims dims = {.n = N, .l = L, .s = S, .e = E, .h = H, .kdim = KD, .vdim = VD};
        attn_masks m = {.causal = ATTN_CAUSAL_BOTTOM_RIGHT,
                        .key_lengths = kl,
                        .key_mask = km,
                        .key_mask_n = 1,
                        .attn_bias = bias,
                        .attn_bias_n = N,
                        .attn_bias_h = 1};
        attn_opts o = {.weights = ATTN_WEIGHTS_PER_HEAD};
        attn_plan p;
        attn_error ae = {0};
        CHECK(attn_mha_plan(&p, &dims, &o, &m, 1, &ae) == ATTN_OK, "plan: %s", ae.msg);
        void *ws = aligned_alloc(64, (p.workspace_bytes + 63) / 64 * 64 + 64);
        float out[N * L * E], w[N * H * L * S];
        attn_weights_out wo_ = {.values = w};
        attn_mha_params pr = {.q_proj_weight = wq,
                              .k_proj_weight = wk,
                              .v_proj_weight = wv,
                              .in_proj_bias = bin,
                              .out_proj_weight = wo,
                              .out_proj_bias = bo};
        CHECK(attn_mha_forward(&p, ws, out, &wo_, q, k, v, &pr, NULL, &ae) == ATTN_OK,
              "forward: %s", ae.msg);
        float got[N * L * E], gw[N * H * L * S];
        size_t at = 0;
        if (j) {
            CHECK(flatten(json_object_get(j, "output"), got, N * L * E) == N * L * E,
                  "output size");
            CHECK(flatten(json_object_get(j, "weights"), gw, N * H * L * S) == N * H * L * S,
                  "weights size");
            CHECK(same_bits(got, out, N * L * E, &at), "output differs from libattn at %zu", at);
            CHECK(same_bits(gw, w, N * H * L * S, &at), "weights differ from libattn at %zu", at);
            /* usage.flops counts the cells the key lengths leave, as the plan made with them. */
            json_t *fl = json_object_get(json_object_get(j, "usage"), "flops");
            CHECK(json_is_integer(fl) && (double)json_integer_value(fl) == p.flops,
                  "usage.flops is %lld; libattn's plan has %.0f", (long long)json_integer_value(fl),
                  p.flops);
            size_t d[4];
            CHECK(shape_of_json(json_object_get(j, "weights"), d) == 4 && d[0] == N && d[1] == H &&
                      d[2] == L && d[3] == S,
                  "weights shape (N, H, L, S)");
            CHECK(strcmp(json_string_value(json_object_get(json_object_get(j, "output"), "dtype")),
                         "float32") == 0,
                  "base64 output dtype");
            json_decref(j);
        }
        free(ws);
        free(body.s);
    }
    free(q), free(k), free(v), free(wq), free(wk), free(wv), free(bin), free(wo), free(bo);
}

/* Self-attention without key and value (libattn's packed path, same pointer), rank 2 and
 * rank 3, against libattn with query == key == value, in JSON out (exact by round trip). */
void test_bitwise_self(void) {
    enum { N = 3, L = 6, E = 12, H = 3 };
    float *q = frand_new(N * L * E), *win = frand_new(3 * E * E), *wo = frand_new(E * E);
    float *bin = frand_new(3 * E), *bo = frand_new(E);
    for (int rank = 2; rank <= 3; rank++) {
        size_t n = rank == 3 ? N : 1;
        sb body = {0};
        sb_add(&body, "{\"query\":");
        sb_tensor(&body, q, rank == 3 ? (size_t[]){N, L, E} : (size_t[]){L, E}, (size_t)rank);
        sb_add(&body, ",\"params\":{\"num_heads\":%d,\"in_proj_weight\":", H);
        sb_tensor(&body, win, (size_t[]){3 * E, E}, 2);
        sb_add(&body, ",\"in_proj_bias\":");
        sb_tensor(&body, bin, (size_t[]){3 * E}, 1);
        sb_add(&body, ",\"out_proj.weight\":");
        sb_tensor(&body, wo, (size_t[]){E, E}, 2);
        sb_add(&body, ",\"out_proj.bias\":");
        sb_tensor(&body, bo, (size_t[]){E}, 1);
        sb_add(&body, "},\"causal\":true,\"need_weights\":\"mean\"}");
        api_error e = {0};
        json_t *j = request_str(API_OP_ATTENTION, body.s, NULL, &e);
        CHECK(j != NULL, "self request: %s", e.message);
        attn_mha_dims dims = {.n = n, .l = L, .s = L, .e = E, .h = H};
        attn_masks m = {.causal = ATTN_CAUSAL_TOP_LEFT};
        attn_opts o = {.weights = ATTN_WEIGHTS_MEAN};
        attn_plan p;
        attn_error ae = {0};
        attn_mha_plan(&p, &dims, &o, &m, 1, &ae);
        void *ws = aligned_alloc(64, (p.workspace_bytes + 63) / 64 * 64 + 64);
        float out[N * L * E], w[N * L * L], got[N * L * E], gw[N * L * L];
        attn_weights_out wout = {.values = w};
        attn_mha_params pr = {
            .in_proj_weight = win, .in_proj_bias = bin, .out_proj_weight = wo, .out_proj_bias = bo};
        attn_mha_forward(&p, ws, out, &wout, q, q, q, &pr, NULL, &ae);
        if (j) {
            size_t at = 0, d[4];
            CHECK(flatten(json_object_get(j, "output"), got, N * L * E) == n * L * E, "size");
            CHECK(flatten(json_object_get(j, "weights"), gw, N * L * L) == n * L * L, "size");
            CHECK(same_bits(got, out, n * L * E, &at), "rank %d output differs at %zu", rank, at);
            CHECK(same_bits(gw, w, n * L * L, &at), "rank %d weights differ at %zu", rank, at);
            CHECK(shape_of_json(json_object_get(j, "output"), d) == (size_t)rank, "out rank");
            CHECK(shape_of_json(json_object_get(j, "weights"), d) == (size_t)rank - 1 + 0 + 1 &&
                      d[rank - 2] == L && d[rank - 1] == L,
                  "mean weights rank");
            json_decref(j);
        }
        free(ws);
        free(body.s);
    }
    free(q), free(win), free(wo), free(bin), free(bo);
}

/* ---- Weights subsets, top-k, masked rows -------------------------------------------------- */

void test_weights_views(void) {
    enum { L = 6, S = 6, E = 8, H = 4 };
    float *x = frand_new(L * E);
    sb base = {0};
    sb_add(&base, "{\"query\":");
    sb_tensor(&base, x, (size_t[]){L, E}, 2);
    sb_add(&base, ",\"params\":{\"init\":\"random\",\"seed\":5,\"num_heads\":%d}", H);
    char body[8192];
    api_error e = {0};
    snprintf(body, sizeof body, "%s,\"need_weights\":\"per_head\"}", base.s);
    json_t *dense = request_str(API_OP_ATTENTION, body, NULL, &e);
    snprintf(body, sizeof body, "%s,\"need_weights\":\"per_head\",\"heads\":[3,1]}", base.s);
    json_t *sub = request_str(API_OP_ATTENTION, body, NULL, &e);
    snprintf(body, sizeof body,
             "%s,\"need_weights\":\"per_head\",\"heads\":[2],\"weights_top_k\":3}", base.s);
    json_t *topk = request_str(API_OP_ATTENTION, body, NULL, &e);
    snprintf(body, sizeof body,
             "%s,\"need_weights\":\"mean\",\"weights_top_k\":2,"
             "\"encoding\":\"base64\"}",
             base.s);
    json_t *mean = request_str(API_OP_ATTENTION, body, NULL, &e);
    CHECK(dense && sub && topk && mean, "weights requests: %s", e.message);
    if (dense && sub && topk && mean) {
        float w[H * L * S], ws[2 * L * S], vals[L * 3], mv[L * 2];
        CHECK(flatten(json_object_get(dense, "weights"), w, H * L * S) == H * L * S, "dense");
        CHECK(flatten(json_object_get(sub, "weights"), ws, 2 * L * S) == 2 * L * S, "subset");
        CHECK(memcmp(ws, w + 3 * L * S, L * S * 4) == 0 &&
                  memcmp(ws + L * S, w + 1 * L * S, L * S * 4) == 0,
              "heads [3, 1] are the dense maps 3 and 1, in that order");
        size_t d[4];
        CHECK(shape_of_json(json_object_get(sub, "weights"), d) == 3 && d[0] == 2 && d[1] == L,
              "subset shape (2, L, S)");
        json_t *tw = json_object_get(topk, "weights");
        float idx[L * 3];
        CHECK(flatten(json_object_get(tw, "values"), vals, L * 3) == L * 3 &&
                  flatten(json_object_get(tw, "indices"), idx, L * 3) == L * 3,
              "top-k values and indices");
        CHECK(json_is_integer(json_array_get(
                  json_array_get(json_array_get(json_object_get(tw, "indices"), 0), 0), 0)),
              "top-k indices are JSON integers");
        for (int i = 0; i < L; i++) {
            const float *row = w + (2 * L + i) * S;
            for (int r = 0; r < 3; r++) {
                int j = (int)idx[i * 3 + r];
                CHECK(j >= 0 && j < S && vals[i * 3 + r] == row[j], "top-k value = dense");
                CHECK(r == 0 || vals[i * 3 + r] <= vals[i * 3 + r - 1], "descending");
                int above = 0;
                for (int c = 0; c < S; c++)
                    above += row[c] > row[j];
                CHECK(above <= r, "top-k entry %d of row %d is not among the largest", r, i);
            }
        }
        json_t *mw = json_object_get(mean, "weights");
        CHECK(strcmp(json_string_value(json_object_get(json_object_get(mw, "indices"), "dtype")),
                     "int32") == 0,
              "base64 indices are int32");
        CHECK(flatten(json_object_get(mw, "values"), mv, L * 2) == L * 2, "mean top-2");
        const char *idata =
            json_string_value(json_object_get(json_object_get(mw, "indices"), "data"));
        int32_t ii[L * 2];
        size_t got = 0;
        CHECK(idata && api_base64_decode((uint8_t *)ii, &got, idata, strlen(idata)) &&
                  got == sizeof ii,
              "indices decode");
        for (int i = 0; i < L; i++) {
            double mean0 = 0;
            for (int hh = 0; hh < H; hh++)
                mean0 += (double)w[(hh * L + i) * S + ii[i * 2]];
            mean0 /= H;
            CHECK(fabs(mean0 - (double)mv[i * 2]) < 1e-6,
                  "mean top-1 of row %d = %g, dense mean %g", i, (double)mv[i * 2], mean0);
        }
    }
    json_decref(dense), json_decref(sub), json_decref(topk), json_decref(mean);
    free(base.s);
    free(x);
}

/* A query row whose every key is blocked: output = out_proj.bias exactly, weights zeros. */
void test_fully_masked(void) {
    enum { N = 2, L = 3, E = 4, H = 2 };
    float *x = frand_new(N * L * E), *win = frand_new(3 * E * E), *wo = frand_new(E * E);
    float *bo = frand_new(E), *bin = frand_new(3 * E);
    const char *masks[] = {
        "\"key_mask\":[[1,1,1],[0,0,0]]", "\"key_lengths\":[3,0]",
        "\"attn_mask\":[[[1,1,1],[1,1,1],[1,1,1]],[[0,0,0],[0,0,0],[0,0,0]]]",
        ("\"attn_bias\":[[[0,0,0],[0,0,0],[0,0,0]],[[\"-inf\",\"-inf\",\"-inf\"],"
         "[\"-inf\",\"-inf\",\"-inf\"],[\"-inf\",\"-inf\",\"-inf\"]]]")};
    for (int mi = 0; mi < 4; mi++) {
        sb b = {0};
        sb_add(&b, "{\"query\":");
        sb_tensor(&b, x, (size_t[]){N, L, E}, 3);
        sb_add(&b, ",\"params\":{\"num_heads\":%d,\"in_proj_weight\":", H);
        sb_tensor(&b, win, (size_t[]){3 * E, E}, 2);
        sb_add(&b, ",\"in_proj_bias\":");
        sb_tensor(&b, bin, (size_t[]){3 * E}, 1);
        sb_add(&b, ",\"out_proj.weight\":");
        sb_tensor(&b, wo, (size_t[]){E, E}, 2);
        sb_add(&b, ",\"out_proj.bias\":");
        sb_tensor(&b, bo, (size_t[]){E}, 1);
        sb_add(&b, "},%s,\"need_weights\":\"per_head\"}", masks[mi]);
        api_error e = {0};
        json_t *j = request_str(API_OP_ATTENTION, b.s, NULL, &e);
        CHECK(j != NULL, "masked request %d: %s", mi, e.message);
        if (j) {
            float out[N * L * E], w[N * H * L * L];
            CHECK(flatten(json_object_get(j, "output"), out, N * L * E) == N * L * E, "out");
            CHECK(flatten(json_object_get(j, "weights"), w, N * H * L * L) == N * H * L * L, "w");
            size_t at = 0;
            for (int i = 0; i < L; i++)
                CHECK(same_bits(out + (L + i) * E, bo, E, &at),
                      "mask %d: masked row %d is not out_proj.bias (at %zu)", mi, i, at);
            bool zeros = true, finite = true;
            for (int i = 0; i < H * L * L; i++)
                zeros &= w[H * L * L + i] == 0.0f;
            for (int i = 0; i < N * L * E; i++)
                finite &= isfinite(out[i]) != 0;
            CHECK(zeros, "mask %d: weights of masked rows are not zero", mi);
            CHECK(finite, "mask %d: NaN in the output", mi);
            json_decref(j);
        }
        free(b.s);
    }
    free(x), free(win), free(wo), free(bo), free(bin);
}

/* ---- SDPA key masks without leading dimensions (issue 10, item 6) ----------------------- */

/* The seed chapter's padding example (chapter 5, 3.1) as a user writes it: logits [3.0, 0.5,
 * -1.0, 2.0] (q [[1]], k the logits, scale 1) and key_mask [1, 1, 0, 0] give the weights
 * [0.92, 0.08, 0, 0]. The same with key_mask (1, S), key_lengths [2], and for q of rank 3 and
 * 4, where key_mask (S) broadcasts over every head and batch element. */
void test_sdpa_key_masks(void) {
    const char *bodies[] = {
        "{\"q\":[[1]],\"k\":[[3.0],[0.5],[-1.0],[2.0]],\"v\":[[1],[2],[3],[4]],\"scale\":1,"
        "\"key_mask\":[1,1,0,0],\"need_weights\":true}",
        "{\"q\":[[1]],\"k\":[[3.0],[0.5],[-1.0],[2.0]],\"v\":[[1],[2],[3],[4]],\"scale\":1,"
        "\"key_mask\":[[1,1,0,0]],\"need_weights\":true}",
        "{\"q\":[[1]],\"k\":[[3.0],[0.5],[-1.0],[2.0]],\"v\":[[1],[2],[3],[4]],\"scale\":1,"
        "\"key_lengths\":[2],\"need_weights\":true}",
        "{\"q\":[[[1]],[[1]]],\"k\":[[[3.0],[0.5],[-1.0],[2.0]],[[3.0],[0.5],[-1.0],[2.0]]],"
        "\"v\":[[[1],[2],[3],[4]],[[1],[2],[3],[4]]],\"scale\":1,\"key_mask\":[1,1,0,0],"
        "\"need_weights\":true}",
        "{\"q\":[[[1]],[[1]]],\"k\":[[[3.0],[0.5],[-1.0],[2.0]],[[3.0],[0.5],[-1.0],[2.0]]],"
        "\"v\":[[[1],[2],[3],[4]],[[1],[2],[3],[4]]],\"scale\":1,\"key_lengths\":[2],"
        "\"need_weights\":true}",
        "{\"q\":[[[[1]]],[[[1]]]],\"k\":[[[[3.0],[0.5],[-1.0],[2.0]]],[[[3.0],[0.5],[-1.0],"
        "[2.0]]]],\"v\":[[[[1],[2],[3],[4]]],[[[1],[2],[3],[4]]]],\"scale\":1,"
        "\"key_mask\":[1,1,0,0],\"need_weights\":true}",
        "{\"q\":[[[[1]]],[[[1]]]],\"k\":[[[[3.0],[0.5],[-1.0],[2.0]]],[[[3.0],[0.5],[-1.0],"
        "[2.0]]]],\"v\":[[[[1],[2],[3],[4]]],[[[1],[2],[3],[4]]]],\"scale\":1,"
        "\"key_mask\":[[1,1,0,0],[1,1,0,0]],\"need_weights\":true}",
        "{\"q\":[[[[1]]],[[[1]]]],\"k\":[[[[3.0],[0.5],[-1.0],[2.0]]],[[[3.0],[0.5],[-1.0],"
        "[2.0]]]],\"v\":[[[[1],[2],[3],[4]]],[[[1],[2],[3],[4]]]],\"scale\":1,"
        "\"key_lengths\":[2,2],\"need_weights\":true}",
    };
    const double e25 = exp(2.5), w0 = e25 / (e25 + 1.0), w1 = 1.0 / (e25 + 1.0);
    for (size_t c = 0; c < sizeof bodies / sizeof bodies[0]; c++) {
        api_error e = {0};
        json_t *j = request_str(API_OP_SDPA, bodies[c], NULL, &e);
        CHECK(j != NULL, "padding example %zu: %d %s", c, e.status, e.message);
        if (!j)
            continue;
        float w[8], o[2];
        size_t nw = flatten(json_object_get(j, "weights"), w, 8);
        size_t no = flatten(json_object_get(j, "output"), o, 2);
        CHECK(nw == 4 * no && no >= 1, "padding example %zu: %zu weights, %zu outputs", c, nw, no);
        for (size_t r = 0; r < no && nw == 4 * no; r++) {
            const float *x = w + 4 * r;
            CHECK(fabs((double)x[0] - w0) < 1e-6 && fabs((double)x[1] - w1) < 1e-6 &&
                      x[2] == 0.0f && x[3] == 0.0f,
                  "padding example %zu row %zu: weights [%g %g %g %g], want [%.6f %.6f 0 0]", c, r,
                  (double)x[0], (double)x[1], (double)x[2], (double)x[3], w0, w1);
            char a[32], b2[32];
            snprintf(a, sizeof a, "%.2f", (double)x[0]);
            snprintf(b2, sizeof b2, "%.2f", (double)x[1]);
            CHECK(!strcmp(a, "0.92") && !strcmp(b2, "0.08"), "the chapter prints [%s %s]", a, b2);
            CHECK(fabs((double)o[r] - (w0 * 1 + w1 * 2)) < 1e-6, "padding example %zu: output %g",
                  c, (double)o[r]);
        }
        json_decref(j);
    }
}
