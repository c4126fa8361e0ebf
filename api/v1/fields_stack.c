/* fields_stack.c - a model of layers' own fields, for fields.c: "layers" (the layers whose
 * weights and trace the reply carries) and "predict_top_k" (the next-token predictions of a
 * model with an unembedding), each refused on other models; and a traced job's size with the
 * layers it keeps.
 *
 * Legend: N batch, L rows (self-attention: S = L), E width, H heads per layer, Ls the layers
 * kept, V vocabulary size, K the predictions per row. */
#include <stdio.h>
#include <string.h>

#include "v1.h"
#include "request.h"

/* 400 invalid_field naming field, with a printf-style message; returns -1 (api_fail). */
#define bad(r, field, ...) api_fail((r)->err, 400, "invalid_field", (field), __VA_ARGS__)

#define PREDICT_TOP_K_DEFAULT 5 /* predictions per row when the request names none */

/* "layers" (value v): distinct layer indices from 0 to layers - 1, at least one, with weights or
 * a trace to carry. Counts them into r->n_keep. */
static int layers_field(apip_req *r, const char *v) {
    const size_t layers = r->stack->layers;
    if (!r->weights && !r->trace)
        return bad(r, "layers",
                   "layers chooses the layers whose weights and trace the reply carries: it "
                   "needs need_weights or \"trace\": true");
    if (apip_jv_kind(v) != '[')
        return bad(r, "layers", "layers must be a list of layer indices from 0 to %zu", layers - 1);
    bool seen[APIP_MAX_LAYERS] = {false};
    const char *it = v, *el = NULL;
    char path[48];
    r->n_keep = 0;
    while (apip_jv_arr_next(&it, &el)) {
        snprintf(path, sizeof path, "layers[%zu]", r->n_keep);
        long long x = 0;
        if (apip_fields_int(r, el, path, 0, (long long)layers - 1, &x))
            return -1;
        if (seen[x])
            return bad(r, path, "%s repeats layer %lld; list each layer once", path, x);
        seen[x] = true;
        r->n_keep++;
    }
    if (r->n_keep == 0)
        return bad(r, "layers", "layers must list at least one layer");
    return 0;
}

/* A traced job keeps every step of Ls layers: each map, Ls*N*H*L*L cells, and the widest other
 * step, Ls*N*L*E, within API_TRACE_MAX_CELLS (trace_field checked one layer's). */
static int stack_trace_size(apip_req *r) {
    size_t maps = 0, w = 0;
    bool fits = apip_mul(r->n_keep, r->n, &maps) && apip_mul(maps, r->h, &maps) &&
                apip_mul(maps, r->l, &maps) && apip_mul(maps, r->l, &maps) &&
                apip_mul(r->n_keep, r->n, &w) && apip_mul(w, r->l, &w) && apip_mul(w, r->e, &w);
    if (fits && maps <= API_TRACE_MAX_CELLS && w <= API_TRACE_MAX_CELLS)
        return 0;
    return bad(r, "trace",
               "a trace is for small jobs: over the %zu layers it keeps, its maps hold "
               "Ls*N*H*L*S = %zu cells and its widest step Ls*N*L*E = %zu floats, and each may "
               "hold at most %d; keep fewer layers (\"layers\"), send shorter sequences, or leave "
               "trace out",
               r->n_keep, fits ? maps : (size_t)-1, fits ? w : (size_t)-1, API_TRACE_MAX_CELLS);
}

int apip_fields_stack(apip_req *r) {
    const char *layers = r->f[APIP_F_LAYERS], *topk = r->f[APIP_F_PREDICT_TOP_K];
    if (!r->stack) {
        if (layers || topk)
            return bad(r, layers ? "layers" : "predict_top_k",
                       "%s goes only with a model of layers (GET /v1/models shows num_layers)",
                       layers ? "layers" : "predict_top_k");
        return 0;
    }
    r->n_keep = r->weights || r->trace ? r->stack->layers : 0;
    if (layers && layers_field(r, layers))
        return -1;
    const size_t v = r->stack->vocab;
    r->pred_k = v < PREDICT_TOP_K_DEFAULT ? v : PREDICT_TOP_K_DEFAULT;
    if (topk) {
        if (!v)
            return bad(r, "predict_top_k",
                       "predict_top_k needs a model with an unembedding (lm_head.weight); model "
                       "%s has none",
                       apip_model_name(r->model));
        long long k = 0;
        if (apip_fields_int(r, topk, "predict_top_k", 0, (long long)v, &k))
            return -1;
        r->pred_k = (size_t)k;
    }
    return r->trace ? stack_trace_size(r) : 0;
}
