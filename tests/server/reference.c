/* reference.c - the float64 references test_server checks answers against: one head's
 * attention, nn.MultiheadAttention, and an MHA case (its inputs, weights, request body and
 * expected answer).
 *
 * Legend: N batch, L query length, S key length, E embedding, H heads, D/Dv the SDPA widths. */
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "server_test.h"

/* ---- References (float64) ----------------------------------------------------------------- */

/* Softmax attention of one head. q (L, D) with row stride qs, k (S, D) stride ks, v (S, Dv)
 * stride vs; out (L, Dv) stride os; w (L, S) or NULL. causal: 1 top-left. */
void ref_attend(const double *q, size_t qs, const double *k, size_t ks, const double *v, size_t vs,
                size_t L, size_t S, size_t D, size_t Dv, double scale, int causal, double *out,
                size_t os, double *w) {
    double *p = malloc(S * sizeof *p);
    for (size_t i = 0; i < L; i++) {
        double m = -HUGE_VAL, z = 0;
        for (size_t j = 0; j < S; j++) {
            double s = 0;
            for (size_t c = 0; c < D; c++)
                s += q[i * qs + c] * k[j * ks + c];
            p[j] = (causal && j > i) ? -(double)INFINITY : s * scale;
            if (p[j] > m)
                m = p[j];
        }
        for (size_t j = 0; j < S; j++)
            z += (p[j] = isinf(p[j]) ? 0 : exp(p[j] - m));
        for (size_t c = 0; c < Dv; c++) {
            double acc = 0;
            for (size_t j = 0; j < S; j++)
                acc += p[j] / z * v[j * vs + c];
            out[i * os + c] = acc;
        }
        if (w)
            for (size_t j = 0; j < S; j++)
                w[i * S + j] = p[j] / z;
    }
    free(p);
}

/* y (rows, out) = x (rows, in) W^T + b; W (out, in); b may be NULL. */
static double *ref_linear(const float *x, size_t rows, size_t in, const float *W, const float *b,
                          size_t outw) {
    double *y = malloc(rows * outw * sizeof *y);
    for (size_t r = 0; r < rows; r++)
        for (size_t o = 0; o < outw; o++) {
            double s = b ? (double)b[o] : 0;
            for (size_t i = 0; i < in; i++)
                s += (double)x[r * in + i] * (double)W[o * in + i];
            y[r * outw + o] = s;
        }
    return y;
}

/* MHA of one batch element, as nn.MultiheadAttention: xq (L, E), xk (S, kd), xv (S, vd); wq
 * (E, E), wk (E, kd), wv (E, vd), bias b3 (3E) or NULL; wo (E, E), bo (E) or NULL. out (L, E),
 * w (H, L, S) or NULL. */
void ref_mha(const float *xq, const float *xk, const float *xv, size_t L, size_t S, size_t E,
             size_t H, size_t kd, size_t vd, const float *wq, const float *wk, const float *wv,
             const float *b3, const float *wo, const float *bo, double *out, double *w) {
    size_t Dh = E / H;
    double *q = ref_linear(xq, L, E, wq, b3, E);
    double *k = ref_linear(xk, S, kd, wk, b3 ? b3 + E : NULL, E);
    double *v = ref_linear(xv, S, vd, wv, b3 ? b3 + 2 * E : NULL, E);
    double *att = malloc(L * E * sizeof *att);
    for (size_t h = 0; h < H; h++)
        ref_attend(q + h * Dh, E, k + h * Dh, E, v + h * Dh, E, L, S, Dh, Dh,
                   1.0 / sqrt((double)Dh), 0, att + h * Dh, E, w ? w + h * L * S : NULL);
    for (size_t i = 0; i < L; i++)
        for (size_t o = 0; o < E; o++) {
            double s = bo ? (double)bo[o] : 0;
            for (size_t c = 0; c < E; c++)
                s += att[i * E + c] * (double)wo[o * E + c];
            out[i * E + o] = s;
        }
    free(q);
    free(k);
    free(v);
    free(att);
}

void mha_case_make(mha_case *c, size_t N, size_t L, size_t S, size_t E, size_t H, size_t kd,
                   size_t vd, bool self, bool bias, uint64_t seed) {
    memset(c, 0, sizeof *c);
    c->N = N;
    c->L = L;
    c->S = S;
    c->E = E;
    c->H = H;
    c->kd = kd;
    c->vd = vd;
    c->self = self;
    c->bias = bias;
    c->split = kd != E || vd != E;
    c->xq = rnd_array(N * L * E, seed);
    c->xk = self ? c->xq : rnd_array(N * S * kd, seed + 1);
    c->xv = self ? c->xq : rnd_array(N * S * vd, seed + 2);
    float *all = rnd_array(3 * E * E, seed + 3);
    float sc = 1.0f / sqrtf((float)E);
    for (size_t i = 0; i < 3 * E * E; i++)
        all[i] *= sc;
    if (c->split) {
        c->wq = all;
        c->wk = rnd_array(E * kd, seed + 4);
        c->wv = rnd_array(E * vd, seed + 5);
    } else {
        c->w_in = all;
        c->wq = all;
        c->wk = all + E * E;
        c->wv = all + 2 * E * E;
    }
    c->wo = rnd_array(E * E, seed + 6);
    for (size_t i = 0; i < E * E; i++)
        c->wo[i] *= sc;
    if (bias) {
        c->b_in = rnd_array(3 * E, seed + 7);
        c->bo = rnd_array(E, seed + 8);
    }
}

void mha_case_free(mha_case *c) {
    if (!c->self) {
        free(c->xk);
        free(c->xv);
    }
    free(c->xq);
    if (c->split) {
        free(c->wq);
        free(c->wk);
        free(c->wv);
    } else {
        free(c->w_in);
    }
    free(c->wo);
    free(c->b_in);
    free(c->bo);
}

/* The request body: rank 2 when N == 1 and rank2; base64 inputs when b64in. */
char *mha_case_body(const mha_case *c, bool rank2, bool b64in, const char *encoding,
                    const char *weights) {
    json_t *j = json_object();
    size_t E = c->E;
    size_t sq[3] = {c->N, c->L, E}, sk[3] = {c->N, c->S, c->kd}, sv[3] = {c->N, c->S, c->vd};
    const size_t *sqp = rank2 ? sq + 1 : sq, *skp = rank2 ? sk + 1 : sk, *svp = rank2 ? sv + 1 : sv;
    int rank = rank2 ? 2 : 3;
#define TENSOR(a, shp, rows, cols)                                                                 \
    (b64in   ? json_b64((a), (shp), rank)                                                          \
     : rank2 ? json_matrix((a), (rows), (cols))                                                    \
             : json_tensor3((a), c->N, (rows), (cols)))
    json_object_set_new(j, "query", TENSOR(c->xq, sqp, c->L, E));
    if (!c->self) {
        json_object_set_new(j, "key", TENSOR(c->xk, skp, c->S, c->kd));
        json_object_set_new(j, "value", TENSOR(c->xv, svp, c->S, c->vd));
    }
#undef TENSOR
    json_t *p = json_object();
    json_object_set_new(p, "num_heads", json_integer((json_int_t)c->H));
    if (c->split) {
        json_object_set_new(p, "q_proj_weight", json_matrix(c->wq, E, E));
        json_object_set_new(p, "k_proj_weight", json_matrix(c->wk, E, c->kd));
        json_object_set_new(p, "v_proj_weight", json_matrix(c->wv, E, c->vd));
    } else {
        json_object_set_new(p, "in_proj_weight", json_matrix(c->w_in, 3 * E, E));
    }
    json_object_set_new(p, "out_proj.weight", json_matrix(c->wo, E, E));
    if (c->bias) {
        json_object_set_new(p, "in_proj_bias", json_vector(c->b_in, 3 * E));
        json_object_set_new(p, "out_proj.bias", json_vector(c->bo, E));
    }
    json_object_set_new(j, "params", p);
    if (encoding)
        json_object_set_new(j, "encoding", json_string(encoding));
    if (weights)
        json_object_set_new(j, "need_weights", json_string(weights));
    return dump(j);
}

/* ref_mha over the batch: out (N, L, E), w (N, H, L, S). */
void mha_case_ref(const mha_case *c, double *out, double *w) {
    for (size_t b = 0; b < c->N; b++)
        ref_mha(c->xq + b * c->L * c->E, c->xk + b * c->S * c->kd, c->xv + b * c->S * c->vd, c->L,
                c->S, c->E, c->H, c->kd, c->vd, c->wq, c->wk, c->wv, c->b_in, c->wo, c->bo,
                out + b * c->L * c->E, w ? w + b * c->H * c->L * c->S : NULL);
}
