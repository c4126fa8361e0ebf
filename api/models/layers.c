/* layers.c - model files of layers: an attention-only transformer saved by PyTorch under its
 * module's names (token_embeddings, position_embeddings, layers.i.norm1.weight and .bias,
 * layers.i.self_attn.in_proj_weight, .in_proj_bias, .out_proj.weight, .out_proj.bias,
 * norm.weight and .bias, lm_head.weight and .bias), checked and converted into a model whose
 * stack (models.h) libattn runs, with what its metadata says: causal, layer_norm_eps, and what
 * was measured on it (head_scores, accuracy), which GET /v1/models shows.
 *
 * Legend: E width, H heads per layer, V vocabulary size (the rows of token_embeddings and of
 * lm_head.weight), P positions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models.h"

/* ---- Shapes ------------------------------------------------------------------------------------
 */

/* Checks tensor t (named name) against the shape want (rank); 0 or -1 with c->err. */
static int shape_is(apip_st_ctx *c, const char *name, const apip_st_tensor *t, const size_t *want,
                    size_t rank, size_t e) {
    bool fits = t->rank == rank;
    for (size_t k = 0; fits && k < rank; k++)
        fits = t->dims[k] == want[k];
    if (fits)
        return 0;
    char got[64], exp[64];
    apip_dims_str(got, sizeof got, t->dims, t->rank);
    apip_dims_str(exp, sizeof exp, want, rank);
    return apip_st_fail(c, "tensor %s has shape %s; with E=%zu it must be %s", name, got, e, exp);
}

/* Every tensor of the file against a model of layers of width *e (from layers.0's
 * out_proj.weight), num_heads f->h and the vocabulary of v tokens: what must be there, what
 * must not, and their shapes. *npos gets the rows of position_embeddings (0 when absent). */
static int check_layers(apip_st_ctx *c, const apip_st_file *f, size_t v, size_t *e, size_t *npos) {
    char name[96];
    for (int i = 0; i < APIP_P_COUNT; i++)
        if (f->t[i].present)
            return apip_st_fail(c,
                                "tensor %s belongs to a model of one MHA; a model of layers keeps "
                                "its attention in layers.i.self_attn",
                                apip_st_name(i));
    const apip_st_tensor *ow = &f->layer[0][APIP_L_OUT_W];
    if (!ow->present || ow->rank != 2 || ow->dims[0] != ow->dims[1] || ow->dims[0] == 0)
        return apip_st_fail(c, "tensor layers.0.self_attn.out_proj.weight must be (E, E) with "
                               "E >= 1");
    *e = ow->dims[0];
    if (*e % f->h != 0)
        return apip_st_fail(c, "the embedding width E=%zu is not divisible by num_heads=%zu", *e,
                            f->h);
    const size_t E = *e;
    const size_t want[APIP_L_COUNT][2] = {{E}, {E}, {3 * E, E}, {3 * E}, {E, E}, {E}};
    const size_t rank[APIP_L_COUNT] = {1, 1, 2, 1, 2, 1};
    for (size_t l = 0; l < f->layers; l++) {
        const apip_st_tensor *t = f->layer[l];
        for (int i = APIP_L_IN_W; i <= APIP_L_OUT_W; i += APIP_L_OUT_W - APIP_L_IN_W)
            if (!t[i].present)
                return apip_st_fail(c, "tensor layers.%zu.%s is missing", l, apip_st_layer_name(i));
        if (t[APIP_L_NORM_B].present && !t[APIP_L_NORM_W].present)
            return apip_st_fail(c, "tensor layers.%zu.norm1.bias needs layers.%zu.norm1.weight", l,
                                l);
        if ((l > 0) && t[APIP_L_NORM_W].present != f->layer[0][APIP_L_NORM_W].present)
            return apip_st_fail(c, "layers.%zu has %s norm1 where layers.0 has %s", l,
                                t[APIP_L_NORM_W].present ? "a" : "no",
                                t[APIP_L_NORM_W].present ? "none" : "one");
        for (int i = 0; i < APIP_L_COUNT; i++) {
            snprintf(name, sizeof name, "layers.%zu.%s", l, apip_st_layer_name(i));
            if (t[i].present && shape_is(c, name, &t[i], want[i], rank[i], E))
                return -1;
        }
    }
    const apip_st_tensor *top = f->top;
    if (top[APIP_S_NORM_B].present && !top[APIP_S_NORM_W].present)
        return apip_st_fail(c, "tensor norm.bias needs norm.weight");
    if (top[APIP_S_HEAD_B].present && !top[APIP_S_HEAD_W].present)
        return apip_st_fail(c, "tensor lm_head.bias needs lm_head.weight");
    if (!f->t[APIP_T_TOK].present || !v)
        return apip_st_fail(c, "a model of layers needs token_embeddings (V, E) and "
                               "__metadata__.vocab, the list of its V tokens");
    const size_t tw[2] = {v, E}, vb[1] = {v}, ev[1] = {E};
    if (shape_is(c, "token_embeddings", &f->t[APIP_T_TOK], tw, 2, E) ||
        (top[APIP_S_NORM_W].present && shape_is(c, "norm.weight", &top[APIP_S_NORM_W], ev, 1, E)) ||
        (top[APIP_S_NORM_B].present && shape_is(c, "norm.bias", &top[APIP_S_NORM_B], ev, 1, E)) ||
        (top[APIP_S_HEAD_W].present &&
         shape_is(c, "lm_head.weight", &top[APIP_S_HEAD_W], tw, 2, E)) ||
        (top[APIP_S_HEAD_B].present && shape_is(c, "lm_head.bias", &top[APIP_S_HEAD_B], vb, 1, E)))
        return -1;
    const apip_st_tensor *pt = &f->t[APIP_T_POS];
    *npos = pt->present && pt->rank == 2 ? pt->dims[0] : 0;
    const size_t pw[2] = {*npos, E};
    if (pt->present && (*npos == 0 || shape_is(c, "position_embeddings", pt, pw, 2, E)))
        return *npos ? -1 : apip_st_fail(c, "tensor position_embeddings must be (P, E), P >= 1");
    return 0;
}

/* ---- Metadata ----------------------------------------------------------------------------------
 */

/* A metadata string (val) holding JSON text, checked: *text (allocated, the caller frees it)
 * holds {"v": TEXT} and *v points at TEXT's value. 0, or -1 with c->err naming key. */
static int meta_json(apip_st_ctx *c, const char *val, const char *key, char **text,
                     const char **v) {
    apip_span raw = apip_jv_string(val);
    size_t cap = (size_t)(raw.e - raw.p) + 8;
    char *t = malloc(cap);
    if (!t)
        return api_fail(c->err, 500, "out_of_memory", NULL, "%s: out of memory reading %s",
                        c->label, key);
    memcpy(t, "{\"v\":", 5);
    size_t n = 5 + apip_jv_decode(raw, t + 5, cap - 6);
    t[n++] = '}';
    apip_json_root root;
    api_error jerr = {0};
    if (apip_json_check(t, n, key, &root, &jerr) || root.n != 1) {
        free(t);
        return apip_st_fail(c, "__metadata__.%s is not JSON text: %s", key, jerr.message);
    }
    *text = t;
    *v = root.m[0].val;
    return 0;
}

/* The members of the JSON object obj as measures: 1 to APIP_MAX_MEASURES names of [a-z0-9_]
 * (1 to APIP_MEASURE_NAME_MAX bytes) with finite numbers. With names[0][0] already set (the
 * names of an earlier object), the names must be those, in that order. The count, or -1 with
 * c->err (what names the object in messages). */
static int read_measures(apip_st_ctx *c, const char *obj, const char *what,
                         char names[][APIP_MEASURE_NAME_MAX + 1], double *vals) {
    if (apip_jv_kind(obj) != '{')
        return apip_st_fail(c, "%s must be an object of named numbers", what);
    const char *it = obj, *val = NULL;
    apip_span key;
    size_t n = 0;
    bool known = names[0][0] != '\0';
    while (apip_jv_obj_next(&it, &key, &val)) {
        char k[APIP_MEASURE_NAME_MAX + 2];
        size_t kn = apip_jv_decode(key, k, sizeof k);
        bool ok = kn >= 1 && kn <= APIP_MEASURE_NAME_MAX && n < APIP_MAX_MEASURES;
        for (size_t i = 0; ok && i < kn; i++)
            ok = (k[i] >= 'a' && k[i] <= 'z') || (k[i] >= '0' && k[i] <= '9') || k[i] == '_';
        if (!ok)
            return apip_st_fail(c,
                                "%s: at most %d names of 1 to %d bytes of a-z, 0-9 and _, each "
                                "with a number",
                                what, APIP_MAX_MEASURES, APIP_MEASURE_NAME_MAX);
        if (known ? strcmp(names[n], k) != 0 : (n > 0 && !strcmp(names[n - 1], k)))
            return apip_st_fail(c, "%s: every object must have the names of the first, in order",
                                what);
        double x =
            apip_jv_kind(val) == '0' ? apip_jv_number(val, &(const char *){NULL}) : (double)NAN;
        if (!isfinite(x))
            return apip_st_fail(c, "%s.%s is not a finite number", what, k);
        memcpy(names[n], k, kn + 1);
        vals[n++] = x;
    }
    if (n == 0 || (known && names[n][0] != '\0' && n < APIP_MAX_MEASURES))
        return apip_st_fail(c, "%s: every object must have the names of the first, in order", what);
    return (int)n;
}

/* __metadata__.head_scores: a JSON list of one list per layer, each of one object per head of
 * measures (read_measures), into s. 0, or -1 with c->err. */
static int read_head_scores(apip_st_ctx *c, const char *val, apip_stack *s, size_t h) {
    char *text = NULL;
    const char *v = NULL;
    if (meta_json(c, val, "head_scores", &text, &v))
        return -1;
    bool ok = apip_jv_kind(v) == '[';
    size_t layer = 0;
    const char *li = v, *lv = NULL;
    while (ok && apip_jv_arr_next(&li, &lv)) {
        ok = layer < s->layers && apip_jv_kind(lv) == '[';
        size_t head = 0;
        const char *hi = lv, *hv = NULL;
        while (ok && apip_jv_arr_next(&hi, &hv)) {
            char what[64];
            snprintf(what, sizeof what, "__metadata__.head_scores[%zu][%zu]", layer, head);
            if (!(ok = head < h))
                break;
            int n = read_measures(c, hv, what, s->score_names,
                                  s->scores + (layer * h + head) * APIP_MAX_MEASURES);
            if (n < 0) {
                free(text);
                return -1;
            }
            s->nscores = (size_t)n; /* read_measures holds every object to the first's names */
            head++;
        }
        ok = ok && head == h;
        layer++;
    }
    free(text);
    if (ok && layer == s->layers)
        return 0;
    return apip_st_fail(c,
                        "__metadata__.head_scores must be a list of %zu lists (the layers) of %zu "
                        "objects (the heads)",
                        s->layers, h);
}

/* What the metadata says of the stack s of f: causal, layer_norm_eps, head_scores, accuracy. */
static int read_stack_meta(apip_st_ctx *c, const apip_st_file *f, apip_stack *s) {
    if (f->causal_val) {
        apip_span z = apip_jv_string(f->causal_val);
        if (!apip_jv_streq(z, "true") && !apip_jv_streq(z, "false"))
            return apip_st_fail(c, "__metadata__.causal must be \"true\" or \"false\"");
        s->causal = apip_jv_streq(z, "true");
    }
    if (f->eps_val) {
        char t[40], *end = NULL;
        size_t n = apip_jv_decode(apip_jv_string(f->eps_val), t, sizeof t);
        double eps = n < sizeof t ? strtod(t, &end) : (double)NAN;
        if (!end || end == t || *end || !isfinite(eps) || eps <= 0 || eps > 1)
            return apip_st_fail(c, "__metadata__.layer_norm_eps must be a number in (0, 1], like "
                                   "\"1e-05\"");
        s->params.eps = (float)eps;
    }
    if (f->scores_val && read_head_scores(c, f->scores_val, s, f->h))
        return -1;
    if (f->acc_val) {
        char *text = NULL;
        const char *v = NULL;
        if (meta_json(c, f->acc_val, "accuracy", &text, &v))
            return -1;
        int n = read_measures(c, v, "__metadata__.accuracy", s->acc_names, s->acc);
        free(text);
        if (n < 0)
            return -1;
        s->nacc = (size_t)n;
    }
    return 0;
}

/* ---- The model ---------------------------------------------------------------------------------
 */

/* Converts f's layers into s, clearing the pointers of the parts f lacks. */
static int fill_stack(apip_st_ctx *c, const apip_st_file *f, apip_stack *s) {
    char name[96];
    for (size_t l = 0; l < s->layers; l++) {
        attn_layer_params *lp = &s->layer[l];
        float *dst[APIP_L_COUNT] = {
            (float *)lp->norm_weight,         (float *)lp->norm_bias,
            (float *)lp->mha.in_proj_weight,  (float *)lp->mha.in_proj_bias,
            (float *)lp->mha.out_proj_weight, (float *)lp->mha.out_proj_bias};
        const apip_st_tensor *t = f->layer[l];
        for (int i = 0; i < APIP_L_COUNT; i++) {
            snprintf(name, sizeof name, "layers.%zu.%s", l, apip_st_layer_name(i));
            if (t[i].present && apip_st_convert(c, name, &t[i], f->data, dst[i]))
                return -1;
        }
        lp->norm_weight = t[APIP_L_NORM_W].present ? lp->norm_weight : NULL;
        lp->norm_bias = t[APIP_L_NORM_B].present ? lp->norm_bias : NULL;
        lp->mha.in_proj_bias = t[APIP_L_IN_B].present ? lp->mha.in_proj_bias : NULL;
        lp->mha.out_proj_bias = t[APIP_L_OUT_B].present ? lp->mha.out_proj_bias : NULL;
    }
    attn_stack_params *p = &s->params;
    float *dst[APIP_S_COUNT] = {(float *)p->norm_weight, (float *)p->norm_bias,
                                (float *)p->unembed_weight, (float *)p->unembed_bias};
    for (int i = 0; i < APIP_S_COUNT; i++)
        if (f->top[i].present &&
            apip_st_convert(c, apip_st_top_name(i), &f->top[i], f->data, dst[i]))
            return -1;
    p->norm_weight = f->top[APIP_S_NORM_W].present ? p->norm_weight : NULL;
    p->norm_bias = f->top[APIP_S_NORM_B].present ? p->norm_bias : NULL;
    p->unembed_bias = f->top[APIP_S_HEAD_B].present ? p->unembed_bias : NULL;
    s->layer_norm = f->layer[0][APIP_L_NORM_W].present;
    return 0;
}

api_model *apip_layers_model(apip_st_ctx *c, const char *name, const apip_st_file *f,
                             apip_strlist *vocab, apip_strlist *names, bool has_start,
                             uint32_t start) {
    size_t e = 0, npos = 0, v = vocab ? vocab->n : 0;
    apip_stack *s = NULL;
    api_model *m = NULL;
    float *tok = NULL, *pos = NULL;
    if (check_layers(c, f, v, &e, &npos))
        goto err;
    bool in_bias = false, out_bias = false;
    for (size_t l = 0; l < f->layers; l++) {
        in_bias |= f->layer[l][APIP_L_IN_B].present;
        out_bias |= f->layer[l][APIP_L_OUT_B].present;
    }
    s = apip_stack_alloc(f->layers, e, f->h, f->top[APIP_S_HEAD_W].present ? v : 0, c->err);
    if (!s || read_stack_meta(c, f, s) || fill_stack(c, f, s))
        goto err;
    m = apip_model_alloc(name, "file", e, f->h, e, e, true, in_bias, out_bias, false, c->err);
    if (!m)
        goto err;
    for (size_t i = 0; i < v; i++) /* api_buf_json_string: at most 6 bytes a byte, quoted */
        s->token_json =
            6 * vocab->len[i] + 2 > s->token_json ? 6 * vocab->len[i] + 2 : s->token_json;
    if (names)
        apip_model_set_head_names(m, names);
    names = NULL;
    int rc = apip_model_set_vocab(m, vocab, npos, &tok, &pos, c->err);
    vocab = NULL;
    if (rc || apip_st_convert(c, "token_embeddings", &f->t[APIP_T_TOK], f->data, tok) ||
        (pos && apip_st_convert(c, "position_embeddings", &f->t[APIP_T_POS], f->data, pos)))
        goto err;
    if (has_start)
        apip_model_set_start_token(m, start);
    apip_model_set_stack(m, s);
    return m;
err:
    apip_stack_free(s);
    api_model_destroy(m);
    apip_strlist_free(vocab);
    apip_strlist_free(names);
    return NULL;
}
