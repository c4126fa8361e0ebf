/* stack.c - stacks of layers (attn_mha_stack_*) against a reference in double: 1 to 3 layers,
 * with and without LayerNorms, a final norm, an unembedding and its bias, causal or with key
 * lengths; the weights of kept layers; the same output bits whichever layers keep their weights
 * or trace; the trace's residual and attn_output; and the plan's refusals.
 *
 * Legend: N batch, L rows, E width, H heads, V vocabulary (the unembedding's rows). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_test.h"

enum { N = 2, L = 7, E = 16, H = 4, V = 11, MAXL = 3 };

/* A random stack of nl layers: every tensor drawn, the parts not asked for left NULL. */
typedef struct stack_case {
    attn_layer_params layer[MAXL];
    attn_stack_params p;
    float *mem[MAXL * 6 + 4];
    size_t nmem;
} stack_case;

static float *drawn(stack_case *c, size_t n, float scale, float shift) {
    float *x = frand_new(n);
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] * scale + shift;
    return c->mem[c->nmem++] = x;
}

static void case_new(stack_case *c, size_t nl, bool norm, bool fnorm, bool bias) {
    memset(c, 0, sizeof *c);
    for (size_t l = 0; l < nl; l++) {
        attn_layer_params *lp = &c->layer[l];
        lp->mha.in_proj_weight = drawn(c, 3 * E * E, 0.8f, 0);
        lp->mha.in_proj_bias = drawn(c, 3 * E, 0.1f, 0);
        lp->mha.out_proj_weight = drawn(c, E * E, 0.5f, 0);
        lp->mha.out_proj_bias = l == 1 ? NULL : drawn(c, E, 0.1f, 0);
        if (norm) {
            lp->norm_weight = drawn(c, E, 0.3f, 1);
            lp->norm_bias = l == 2 ? NULL : drawn(c, E, 0.2f, 0);
        }
    }
    c->p = (attn_stack_params){.layers = c->layer, .eps = 1e-5f};
    if (fnorm) {
        c->p.norm_weight = drawn(c, E, 0.3f, 1);
        c->p.norm_bias = drawn(c, E, 0.2f, 0);
    }
    c->p.unembed_weight = drawn(c, V * E, 1, 0);
    c->p.unembed_bias = bias ? drawn(c, V, 0.5f, 0) : NULL;
}

static void case_free(stack_case *c) {
    for (size_t i = 0; i < c->nmem; i++)
        free(c->mem[i]);
}

/* y (rows, E) = LayerNorm of x in double. */
static void ref_norm(double *y, const double *x, size_t rows, const float *w, const float *b) {
    for (size_t i = 0; i < rows; i++) {
        double mean = 0, var = 0;
        for (size_t j = 0; j < E; j++)
            mean += x[i * E + j];
        mean /= E;
        for (size_t j = 0; j < E; j++)
            var += (x[i * E + j] - mean) * (x[i * E + j] - mean);
        var /= E;
        for (size_t j = 0; j < E; j++)
            y[i * E + j] =
                (x[i * E + j] - mean) / sqrt(var + 1e-5) * (double)w[j] + (b ? (double)b[j] : 0.0);
    }
}

/* out (rows, out_dim) = x (rows, in) w^T + b, in double. */
static void ref_linear(double *out, const double *x, size_t rows, size_t in, size_t od,
                       const float *w, const float *b) {
    for (size_t i = 0; i < rows; i++)
        for (size_t o = 0; o < od; o++) {
            double s = b ? (double)b[o] : 0.0;
            for (size_t k = 0; k < in; k++)
                s += x[i * in + k] * (double)w[o * in + k];
            out[i * od + o] = s;
        }
}

/* The stack in double: out (N, L, E), logits (N, L, V), weights (nl, N, H, L, L). */
static void ref_stack(double *out, double *logits, double *wts, const float *x, size_t nl,
                      const stack_case *c, const int32_t *lens, bool causal) {
    double y[N * L * E], qkv[N * L * 3 * E], heads[N * L * E], add[N * L * E];
    const size_t dh = E / H;
    for (size_t i = 0; i < N * L * E; i++)
        out[i] = x[i];
    for (size_t l = 0; l < nl; l++) {
        const attn_layer_params *lp = &c->layer[l];
        if (lp->norm_weight)
            ref_norm(y, out, N * L, lp->norm_weight, lp->norm_bias);
        else
            memcpy(y, out, sizeof y);
        ref_linear(qkv, y, N * L, E, 3 * E, lp->mha.in_proj_weight, lp->mha.in_proj_bias);
        for (size_t n = 0; n < N; n++)
            for (size_t h = 0; h < H; h++)
                for (size_t i = 0; i < L; i++) {
                    double s[L], m = -(double)INFINITY, z = 0;
                    size_t lim = causal ? i + 1 : (size_t)lens[n];
                    for (size_t j = 0; j < L; j++) {
                        s[j] = -(double)INFINITY;
                        if (j >= lim)
                            continue;
                        double d = 0;
                        for (size_t k = 0; k < dh; k++)
                            d += qkv[(n * L + i) * 3 * E + h * dh + k] *
                                 qkv[(n * L + j) * 3 * E + E + h * dh + k];
                        s[j] = d / sqrt((double)dh);
                        m = s[j] > m ? s[j] : m;
                    }
                    for (size_t j = 0; j < L; j++)
                        z += s[j] == -(double)INFINITY ? 0 : exp(s[j] - m);
                    double *w = wts + (((l * N + n) * H + h) * L + i) * L;
                    for (size_t j = 0; j < L; j++)
                        w[j] = s[j] == -(double)INFINITY ? 0 : exp(s[j] - m) / z;
                    for (size_t k = 0; k < dh; k++) {
                        double o = 0;
                        for (size_t j = 0; j < L; j++)
                            o += w[j] * qkv[(n * L + j) * 3 * E + 2 * E + h * dh + k];
                        heads[(n * L + i) * E + h * dh + k] = o;
                    }
                }
        ref_linear(add, heads, N * L, E, E, lp->mha.out_proj_weight, lp->mha.out_proj_bias);
        for (size_t i = 0; i < N * L * E; i++)
            out[i] += add[i];
    }
    if (c->p.norm_weight)
        ref_norm(y, out, N * L, c->p.norm_weight, c->p.norm_bias);
    else
        memcpy(y, out, sizeof y);
    ref_linear(logits, y, N * L, E, V, c->p.unembed_weight, c->p.unembed_bias);
}

/* The largest |a - b| over the largest |b| (at least 1): float32 against double, scaled to
 * the tensor. */
static double diff_d(const float *a, const double *b, size_t n) {
    double m = 0, top = 1;
    for (size_t i = 0; i < n; i++) {
        m = fmax(m, fabs((double)a[i] - b[i]));
        top = fmax(top, fabs(b[i]));
    }
    return m / top;
}

/* One configuration: the forward against the reference; kept weights; outputs the same bits
 * with other layers kept; the trace's streams. */
static void stack_case_run(size_t nl, bool norm, bool fnorm, bool bias, bool causal,
                           attn_pool *pool) {
    stack_case c;
    case_new(&c, nl, norm, fnorm, bias);
    int32_t lens[N] = {L, 4};
    attn_masks m =
        causal ? (attn_masks){.causal = ATTN_CAUSAL_TOP_LEFT} : (attn_masks){.key_lengths = lens};
    attn_stack_dims d = {N, L, E, H, nl, V};
    attn_opts o = {.weights = ATTN_WEIGHTS_PER_HEAD};
    attn_stack_plan p;
    attn_error err = {0};
    int rc = attn_mha_stack_plan(&p, &d, &o, &m, pool ? attn_pool_slots(pool) : 1, &err);
    CHECK(rc == ATTN_OK, "stack plan: %s", err.msg);
    if (rc != ATTN_OK) {
        case_free(&c);
        return;
    }
    float *x = frand_new(N * L * E), out[N * L * E], out2[N * L * E], logits[N * L * V];
    float *w = malloc(nl * p.weights_elems * sizeof *w), res[MAXL][N * L * E], add[MAXL][N * L * E];
    void *ws = aligned_alloc(64, (p.workspace_bytes + 63) / 64 * 64);
    attn_weights_out wo[MAXL];
    attn_stack_layer_out keep[MAXL];
    for (size_t l = 0; l < nl; l++) {
        wo[l] = (attn_weights_out){.values = w + l * p.weights_elems};
        keep[l] = (attn_stack_layer_out){.weights = &wo[l], .residual = res[l], .attn_out = add[l]};
    }
    rc = attn_mha_stack_forward(&p, ws, out, logits, keep, x, &c.p, pool, &err);
    CHECK(rc == ATTN_OK, "stack forward: %s", err.msg);
    double rout[N * L * E], rlog[N * L * V], *rw = malloc(nl * N * H * L * L * sizeof *rw);
    ref_stack(rout, rlog, rw, x, nl, &c, lens, causal);
    double e_out = diff_d(out, rout, N * L * E), e_log = diff_d(logits, rlog, N * L * V);
    double e_w = diff_d(w, rw, nl * N * H * L * L);
    CHECK(e_out < 1e-5 && e_log < 1e-5 && e_w < 1e-5,
          "stack of %zu (norm %d, final %d, bias %d, causal %d): out %.2e, logits %.2e, weights "
          "%.2e",
          nl, norm, fnorm, bias, causal, e_out, e_log, e_w);
    /* The stream adds up: residual[l + 1] = residual[l] + attn_out[l]; the input first. */
    bool sums = memcmp(res[0], x, sizeof res[0]) == 0;
    for (size_t l = 0; l + 1 < nl; l++)
        for (size_t i = 0; i < N * L * E; i++)
            sums = sums && res[l + 1][i] == res[l][i] + add[l][i];
    CHECK(sums, "stack of %zu: the kept streams add up", nl);
    /* Keeping only the last layer, or none, gives the same bits. */
    attn_stack_layer_out last[MAXL] = {{0}};
    last[nl - 1].weights = &wo[nl - 1];
    rc = attn_mha_stack_forward(&p, ws, out2, NULL, last, x, &c.p, pool, &err);
    CHECK(rc == ATTN_OK && !memcmp(out, out2, sizeof out), "stack of %zu: one layer kept", nl);
    rc = attn_mha_stack_forward(&p, ws, out2, NULL, NULL, x, &c.p, pool, &err);
    CHECK(rc == ATTN_OK && !memcmp(out, out2, sizeof out), "stack of %zu: none kept", nl);
    free(ws);
    free(w);
    free(rw);
    free(x);
    case_free(&c);
}

void test_stack(attn_pool *pool) {
    for (size_t nl = 1; nl <= MAXL; nl++)
        for (int cfg = 0; cfg < 4; cfg++)
            stack_case_run(nl, cfg & 1, cfg == 3, cfg >= 2, cfg != 1, pool);
}

void test_stack_errors(void) {
    attn_stack_plan p;
    attn_error err = {0};
    attn_stack_dims d = {1, 4, 8, 2, 0, 0};
    CHECK(attn_mha_stack_plan(&p, &d, NULL, NULL, 1, &err) == ATTN_ERR_SHAPE,
          "a stack of no layers is refused");
    d.layers = 2;
    err = (attn_error){0};
    attn_opts tiled = {.path = ATTN_PATH_TILED};
    CHECK(attn_mha_stack_plan(&p, &d, &tiled, NULL, 1, &err) == ATTN_ERR_ARG,
          "a stack on the tiled path is refused");
    err = (attn_error){0};
    attn_opts cap = {.max_bytes = 64};
    CHECK(attn_mha_stack_plan(&p, &d, &cap, NULL, 1, &err) == ATTN_ERR_LIMIT,
          "a stack over its byte cap is refused");
    err = (attn_error){0};
    int32_t kl[1] = {3};
    attn_masks shape = {.shape_only = ATTN_MASK_KEY_LENGTHS};
    CHECK(attn_mha_stack_plan(&p, &d, NULL, &shape, 1, &err) == ATTN_OK, "shape-only plan");
    float x[32] = {0}, out[32];
    void *ws = aligned_alloc(64, (p.workspace_bytes + 63) / 64 * 64);
    attn_layer_params lp[2];
    memset(lp, 0, sizeof lp);
    attn_stack_params prm = {.layers = lp};
    CHECK(attn_mha_stack_forward(&p, ws, out, NULL, NULL, x, &prm, NULL, &err) == ATTN_ERR_ARG,
          "an unbound stack plan does not run");
    err = (attn_error){0};
    attn_masks bound = {.key_lengths = kl};
    CHECK(attn_mha_stack_bind(&p, NULL, &bound, &err) == ATTN_OK, "bind: %s", err.msg);
    CHECK(attn_mha_stack_forward(&p, ws, out, NULL, NULL, x, &prm, NULL, &err) == ATTN_ERR_ARG,
          "a layer without weights is refused");
    free(ws);
}
