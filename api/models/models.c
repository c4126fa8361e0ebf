/* models.c - named MHA parameter sets (the built-in "demo" model, deterministic identity and
 * Xavier-uniform models) and models of layers, their vocabularies and head names, and the
 * registry the server resolves "model" names in (GET /v1/models and GET /v1/models/{name}
 * describe it).
 *
 * Legend: E embedding width, H heads, kdim/vdim the key and value widths. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models.h"

#define DEMO_SEED 24301u /* 0x5EED; documented in api.h and api/openapi.yaml */

const char *const apip_param_names[APIP_P_COUNT] = {
    "in_proj_weight", "in_proj_bias",  "out_proj.weight", "out_proj.bias", "q_proj_weight",
    "k_proj_weight",  "v_proj_weight", "bias_k",          "bias_v"};

struct api_model {
    char *name;
    const char *source; /* "builtin" or "file" */
    size_t e, h, kdim, vdim;
    bool has_bias;
    bool zero_attn; /* add_zero_attn (__metadata__.add_zero_attn) */
    float *data;    /* every tensor below, in one allocation */
    attn_mha_params params;
    /* A vocabulary (vocab.c): its tokens, token_embeddings tok (V, E) and position_embeddings
     * pos (P, E) in one allocation tables; NULL when the model takes only embeddings. */
    apip_strlist *vocab;
    float *tables, *tok, *pos;
    size_t p;                 /* 0 when there is no position table */
    apip_strlist *head_names; /* (H) or NULL */
    bool has_start;           /* a start token (__metadata__.start_token): vocab->s[start] */
    uint32_t start;
    size_t index;      /* its place in the registry that holds it (api_registry_add) */
    apip_stack *stack; /* a model of layers (layers.c); NULL for a model of one MHA */
};

/* Allocates a model whose tensors are zeroed: in_proj_weight (3E, E) when packed, else
 * q_proj_weight (E, E), k_proj_weight (E, kdim), v_proj_weight (E, vdim); in_proj_bias (3E)
 * and out_proj.bias (E) when bias; out_proj.weight (E, E); bias_k and bias_v (E) with
 * bias_kv. */
api_model *apip_model_alloc(const char *name, const char *source, size_t e, size_t h, size_t kdim,
                            size_t vdim, bool packed, bool in_bias, bool out_bias, bool bias_kv,
                            api_error *err) {
    if (!name || e == 0 || h == 0 || kdim == 0 || vdim == 0)
        return api_fail(err, 400, "invalid_model", NULL,
                        "a model needs a name and nonzero E, H, kdim and vdim"),
               NULL;
    if (e % h != 0)
        return api_fail(err, 400, "invalid_model", NULL,
                        "model %s: the embedding width E=%zu is not divisible by num_heads=%zu",
                        name, e, h),
               NULL;
    if (packed && (kdim != e || vdim != e))
        return api_fail(err, 400, "invalid_model", NULL,
                        "model %s: in_proj_weight needs kdim = vdim = E", name),
               NULL;
    size_t ee = 0, ek = 0, ev = 0, total = 0;
    bool ok = apip_mul(e, e, &ee) && apip_mul(e, kdim, &ek) && apip_mul(e, vdim, &ev) &&
              apip_add(ee, ek, &total) && apip_add(total, ev, &total) &&
              apip_add(total, ee, &total) && apip_add(total, in_bias ? 3 * e : 0, &total) &&
              apip_add(total, out_bias ? e : 0, &total) &&
              apip_add(total, bias_kv ? 2 * e : 0, &total) &&
              apip_mul(total, sizeof(float), &total) && e <= SIZE_MAX / 4;
    if (!ok)
        return api_fail(err, 400, "invalid_model", NULL, "model %s is too large", name), NULL;
    api_model *m = calloc(1, sizeof *m);
    float *data = calloc(1, total ? total : 1);
    char *nm = malloc(strlen(name) + 1);
    if (!m || !data || !nm) {
        free(m);
        free(data);
        free(nm);
        return api_fail(err, 500, "out_of_memory", NULL, "out of memory creating model %s", name),
               NULL;
    }
    memcpy(nm, name, strlen(name) + 1);
    *m = (api_model){.name = nm,
                     .source = source,
                     .e = e,
                     .h = h,
                     .kdim = kdim,
                     .vdim = vdim,
                     .has_bias = in_bias || out_bias,
                     .data = data};
    float *p = data;
    if (packed) {
        m->params.in_proj_weight = p;
        p += 3 * ee;
    } else {
        m->params.q_proj_weight = p;
        p += ee;
        m->params.k_proj_weight = p;
        p += ek;
        m->params.v_proj_weight = p;
        p += ev;
    }
    m->params.out_proj_weight = p;
    p += ee;
    if (in_bias) {
        m->params.in_proj_bias = p;
        p += 3 * e;
    }
    if (out_bias) {
        m->params.out_proj_bias = p;
        p += e;
    }
    if (bias_kv) {
        m->params.bias_k = p;
        m->params.bias_v = p + e;
    }
    return m;
}

bool apip_model_zero_attn(const api_model *m) {
    return m->zero_attn;
}

void apip_model_set_zero_attn(api_model *m, bool on) {
    m->zero_attn = on;
}

void api_model_destroy(api_model *m) {
    if (!m)
        return;
    free(m->data);
    free(m->name);
    apip_strlist_free(m->vocab);
    free(m->tables);
    apip_strlist_free(m->head_names);
    apip_stack_free(m->stack);
    free(m);
}

/* ---- Models of layers --------------------------------------------------------------------- */

apip_stack *apip_stack_alloc(size_t layers, size_t e, size_t h, size_t vocab, api_error *err) {
    /* Per layer: norm1 (2E), in_proj (3E E + 3E), out_proj (E E + E); then norm (2E), lm_head
     * (V E + V). */
    size_t ee = 0, per = 0, total = 0, ve = 0, ns = 0;
    bool ok = layers > 0 && apip_mul(e, e, &ee) && apip_mul(ee, 4, &per) &&
              apip_add(per, 6 * e, &per) && e <= SIZE_MAX / 8 && apip_mul(per, layers, &total) &&
              apip_add(total, 2 * e, &total) && apip_mul(vocab, e, &ve) &&
              apip_add(total, ve, &total) && apip_add(total, vocab, &total) &&
              apip_mul(total, sizeof(float), &total) && apip_mul(layers, h, &ns) &&
              apip_mul(ns, APIP_MAX_MEASURES * sizeof(double), &ns);
    if (!ok)
        return api_fail(err, 400, "invalid_model", NULL, "the model's layers are too large"), NULL;
    apip_stack *s = calloc(1, sizeof *s);
    float *data = calloc(1, total);
    attn_layer_params *layer = calloc(layers, sizeof *layer);
    double *scores = calloc(1, ns ? ns : 1);
    if (!s || !data || !layer || !scores) {
        free(s);
        free(data);
        free(layer);
        free(scores);
        return api_fail(err, 500, "out_of_memory", NULL, "out of memory for a model's layers"),
               NULL;
    }
    *s = (apip_stack){
        .layers = layers, .layer = layer, .vocab = vocab, .scores = scores, .data = data};
    float *p = data;
    for (size_t l = 0; l < layers; l++) {
        attn_layer_params *lp = &layer[l];
        lp->norm_weight = p;
        lp->norm_bias = p + e;
        lp->mha.in_proj_weight = p + 2 * e;
        lp->mha.in_proj_bias = p + 2 * e + 3 * ee;
        lp->mha.out_proj_weight = p + 5 * e + 3 * ee;
        lp->mha.out_proj_bias = p + 5 * e + 4 * ee;
        p += per;
    }
    s->params = (attn_stack_params){.layers = layer,
                                    .norm_weight = p,
                                    .norm_bias = p + e,
                                    .unembed_weight = vocab ? p + 2 * e : NULL,
                                    .unembed_bias = vocab ? p + 2 * e + ve : NULL,
                                    .eps = 1e-5f};
    return s;
}

void apip_stack_free(apip_stack *s) {
    if (!s)
        return;
    free(s->data);
    free(s->layer);
    free(s->scores);
    free(s);
}

void apip_model_set_stack(api_model *m, apip_stack *s) {
    apip_stack_free(m->stack);
    m->stack = s;
    if (s)
        m->params = s->layer[0].mha;
}

const apip_stack *apip_model_stack(const api_model *m) {
    return m ? m->stack : NULL;
}

int apip_model_set_vocab(api_model *m, apip_strlist *tokens, size_t p, float **tok, float **pos,
                         api_error *err) {
    size_t rows = 0, count = 0, bytes = 0;
    if (!m || !tokens || !apip_add(tokens->n, p, &rows) || !apip_mul(rows, m->e, &count) ||
        !apip_mul(count, sizeof(float), &bytes)) {
        apip_strlist_free(tokens);
        return api_fail(err, 400, "invalid_model", NULL, "the vocabulary's tables are too large");
    }
    float *tables = calloc(1, bytes ? bytes : 1);
    if (!tables) {
        apip_strlist_free(tokens);
        return api_fail(err, 500, "out_of_memory", NULL, "out of memory for model %s's vocabulary",
                        m->name);
    }
    apip_strlist_free(m->vocab);
    free(m->tables);
    m->vocab = tokens;
    m->tables = m->tok = tables;
    m->pos = p ? tables + tokens->n * m->e : NULL;
    m->p = p;
    *tok = m->tok;
    *pos = m->pos;
    return 0;
}

void apip_model_set_head_names(api_model *m, apip_strlist *names) {
    apip_strlist_free(m->head_names);
    m->head_names = names;
}

bool apip_model_start_token(const api_model *m, uint32_t *id) {
    if (m->has_start && id)
        *id = m->start;
    return m->has_start;
}

void apip_model_set_start_token(api_model *m, uint32_t id) {
    m->has_start = m->vocab && id < m->vocab->n;
    m->start = id;
}

void apip_model_set_source(api_model *m, const char *source) {
    m->source = source;
}

const apip_strlist *apip_model_vocab(const api_model *m) {
    return m->vocab;
}

const float *apip_model_token_embeddings(const api_model *m) {
    return m->tok;
}

const float *apip_model_position_embeddings(const api_model *m, size_t *p) {
    *p = m->p;
    return m->pos;
}

const apip_strlist *apip_model_head_names(const api_model *m) {
    return m->head_names;
}

void apip_init_random(float *in_proj, float *out_proj, size_t e, uint64_t seed) {
    double ed = (double)e;
    uint64_t state = apip_uniform_fill(in_proj, 3 * e * e, sqrt(6.0 / (ed + 3.0 * ed)), seed);
    apip_uniform_fill(out_proj, e * e, sqrt(6.0 / (ed + ed)), state);
}

double apip_init_flops(int init, size_t e) {
    double weights = 4.0 * (double)e * (double)e;
    return init == APIP_INIT_RANDOM     ? weights * APIP_INIT_RANDOM_FLOP
           : init == APIP_INIT_IDENTITY ? weights * APIP_INIT_IDENTITY_FLOP
                                        : 0.0;
}

void apip_init_identity(float *in_proj, float *out_proj, size_t e) {
    memset(in_proj, 0, 3 * e * e * sizeof *in_proj);
    memset(out_proj, 0, e * e * sizeof *out_proj);
    for (size_t i = 0; i < e; i++) {
        for (size_t b = 0; b < 3; b++)
            in_proj[(b * e + i) * e + i] = 1.0f;
        out_proj[i * e + i] = 1.0f;
    }
}

api_model *api_model_init_random(const char *name, size_t e, size_t h, uint64_t seed,
                                 api_error *err) {
    api_model *m = apip_model_alloc(name, "builtin", e, h, e, e, true, false, false, false, err);
    if (m)
        apip_init_random((float *)m->params.in_proj_weight, (float *)m->params.out_proj_weight, e,
                         seed);
    return m;
}

api_model *api_model_init_identity(const char *name, size_t e, size_t h, api_error *err) {
    api_model *m = apip_model_alloc(name, "builtin", e, h, e, e, true, false, false, false, err);
    if (m)
        apip_init_identity((float *)m->params.in_proj_weight, (float *)m->params.out_proj_weight,
                           e);
    return m;
}

api_model *api_model_demo(api_error *err) {
    return api_model_init_random("demo", 64, 4, DEMO_SEED, err);
}

api_model_info api_model_describe(const api_model *m) {
    if (!m)
        return (api_model_info){0};
    return (api_model_info){.name = m->name,
                            .source = m->source,
                            .embed_dim = m->e,
                            .num_heads = m->h,
                            .kdim = m->kdim,
                            .vdim = m->vdim,
                            .has_bias = m->has_bias,
                            .add_bias_kv = m->params.bias_k != NULL,
                            .add_zero_attn = m->zero_attn,
                            .vocab_size = m->vocab ? m->vocab->n : 0,
                            .max_tokens = m->p,
                            .num_layers = m->stack ? m->stack->layers : 0,
                            .unembedding = m->stack && m->stack->vocab > 0};
}

const attn_mha_params *apip_model_params(const api_model *m) {
    return &m->params;
}

const char *apip_model_name(const api_model *m) {
    return m->name;
}

size_t apip_model_index(const api_model *m) {
    return m ? m->index : API_NO_MODEL;
}

/* ---- Registry ----------------------------------------------------------------------------- */

struct api_registry {
    api_model **m;
    size_t n, cap;
    size_t def; /* index of the default model; meaningful when n > 0 */
};

api_registry *api_registry_create(void) {
    return calloc(1, sizeof(api_registry));
}

void api_registry_destroy(api_registry *r) {
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        api_model_destroy(r->m[i]);
    free(r->m);
    free(r);
}

int api_registry_add(api_registry *r, api_model *m, api_error *err) {
    if (!m)
        return api_fail(err, 500, "invalid_model", NULL, "no model to add");
    if (!r) {
        api_fail(err, 500, "internal", NULL, "no registry to add model %s to", m->name);
        api_model_destroy(m);
        return -1;
    }
    if (!strcmp(m->name, API_V2_SDPA_MODEL)) {
        api_fail(err, 400, "invalid_model", NULL,
                 "the model name %s is reserved: /v2/models/%s is scaled dot-product attention on "
                 "given q, k and v; rename the model (its file)",
                 m->name, m->name);
        api_model_destroy(m);
        return -1;
    }
    if (api_registry_find(r, m->name)) {
        api_fail(err, 500, "duplicate_model", NULL, "two models are named %s", m->name);
        api_model_destroy(m);
        return -1;
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 8;
        api_model **mm = realloc(r->m, cap * sizeof *mm);
        if (!mm) {
            api_fail(err, 500, "out_of_memory", NULL, "out of memory adding model %s", m->name);
            api_model_destroy(m);
            return -1;
        }
        r->m = mm;
        r->cap = cap;
    }
    m->index = r->n;
    r->m[r->n++] = m;
    return 0;
}

size_t api_registry_index(const api_registry *r, const char *name) {
    if (!r || !name)
        return API_NO_MODEL;
    if (!strcmp(name, API_V2_SDPA_MODEL))
        return r->n;
    const api_model *m = api_registry_find(r, name);
    return m ? m->index : API_NO_MODEL;
}

int api_registry_set_default(api_registry *r, const char *name, api_error *err) {
    for (size_t i = 0; r && name && i < r->n; i++)
        if (strcmp(r->m[i]->name, name) == 0) {
            r->def = i;
            return 0;
        }
    return api_fail(err, 404, "unknown_model", "model", "there is no model named %s",
                    name ? name : "(null)");
}

const api_model *api_registry_find(const api_registry *r, const char *name) {
    for (size_t i = 0; r && name && i < r->n; i++)
        if (strcmp(r->m[i]->name, name) == 0)
            return r->m[i];
    return NULL;
}

const api_model *apip_registry_find_json(const api_registry *r, apip_span name) {
    for (size_t i = 0; r && i < r->n; i++)
        if (apip_jv_streq(name, r->m[i]->name))
            return r->m[i];
    return NULL;
}

const api_model *api_registry_default(const api_registry *r) {
    return r && r->n ? r->m[r->def] : NULL;
}

size_t api_registry_count(const api_registry *r) {
    return r ? r->n : 0;
}

const api_model *api_registry_at(const api_registry *r, size_t i) {
    return r && i < r->n ? r->m[i] : NULL;
}

/* A measure, as the shortest float32 that reads back (a file's measures have 4 decimals). */
static void put_measure(api_buf *out, const char *name, double v) {
    char num[32];
    api_buf_json_string(out, name, strlen(name));
    apip_buf_puts(out, ":");
    float f = (float)v;
    if (!isfinite(f)) {
        apip_buf_puts(out, "null");
        return;
    }
    size_t n = api_float_write(num, f);
    num[n] = '\0';
    apip_buf_puts(out, num);
}

/* A model of layers' part of its description: its layers, causal default, norms and
 * unembedding, and what its file says was measured (head_scores, accuracy) when it says. */
static void stack_json(const api_model *m, api_buf *out) {
    const apip_stack *s = m->stack;
    apip_buf_puts(out, ",\"num_layers\":");
    apip_buf_put_u64(out, s->layers);
    apip_buf_puts(out, s->causal ? ",\"causal\":true" : ",\"causal\":false");
    apip_buf_puts(out, s->layer_norm ? ",\"layer_norm\":true" : ",\"layer_norm\":false");
    apip_buf_puts(out, s->vocab ? ",\"unembedding\":true" : ",\"unembedding\":false");
    if (s->nscores) {
        apip_buf_puts(out, ",\"head_scores\":[");
        for (size_t l = 0; l < s->layers; l++) {
            apip_buf_puts(out, l ? ",[" : "[");
            for (size_t h = 0; h < m->h; h++) {
                apip_buf_puts(out, h ? ",{" : "{");
                for (size_t k = 0; k < s->nscores; k++) {
                    if (k)
                        apip_buf_puts(out, ",");
                    put_measure(out, s->score_names[k],
                                s->scores[(l * m->h + h) * APIP_MAX_MEASURES + k]);
                }
                apip_buf_puts(out, "}");
            }
            apip_buf_puts(out, "]");
        }
        apip_buf_puts(out, "]");
    }
    if (s->nacc) {
        apip_buf_puts(out, ",\"accuracy\":{");
        for (size_t k = 0; k < s->nacc; k++) {
            if (k)
                apip_buf_puts(out, ",");
            put_measure(out, s->acc_names[k], s->acc[k]);
        }
        apip_buf_puts(out, "}");
    }
}

/* One model's description; with full, its vocabulary too and whether it is the default. */
static void model_json(const api_registry *r, const api_model *m, bool full, api_buf *out) {
    apip_buf_puts(out, "{\"name\":");
    api_buf_json_string(out, m->name, strlen(m->name));
    if (full)
        apip_buf_puts(out,
                      m == api_registry_default(r) ? ",\"default\":true" : ",\"default\":false");
    apip_buf_puts(out, ",\"embed_dim\":");
    apip_buf_put_u64(out, m->e);
    apip_buf_puts(out, ",\"num_heads\":");
    apip_buf_put_u64(out, m->h);
    apip_buf_puts(out, ",\"kdim\":");
    apip_buf_put_u64(out, m->kdim);
    apip_buf_puts(out, ",\"vdim\":");
    apip_buf_put_u64(out, m->vdim);
    apip_buf_puts(out, ",\"source\":");
    api_buf_json_string(out, m->source, strlen(m->source));
    apip_buf_puts(out, m->has_bias ? ",\"has_bias\":true" : ",\"has_bias\":false");
    if (m->params.bias_k) /* PyTorch's add_bias_kv and add_zero_attn: only when true */
        apip_buf_puts(out, ",\"add_bias_kv\":true");
    if (m->zero_attn)
        apip_buf_puts(out, ",\"add_zero_attn\":true");
    apip_buf_puts(out, ",\"vocab_size\":");
    apip_buf_put_u64(out, m->vocab ? m->vocab->n : 0);
    if (m->vocab && m->p) {
        apip_buf_puts(out, ",\"max_tokens\":");
        apip_buf_put_u64(out, m->p);
    }
    if (m->head_names) {
        apip_buf_puts(out, ",\"head_names\":");
        apip_strlist_json(m->head_names, out);
    }
    apip_buf_puts(out, ",\"start_token\":"); /* every model: a token, or null */
    if (m->has_start)
        api_buf_json_string(out, m->vocab->s[m->start], m->vocab->len[m->start]);
    else
        apip_buf_puts(out, "null");
    if (m->stack)
        stack_json(m, out);
    if (full) {
        apip_buf_puts(out, ",\"vocab\":");
        apip_strlist_json(m->vocab, out);
    }
    apip_buf_puts(out, "}");
}

void api_registry_list_json(const api_registry *r, api_buf *out) {
    const api_model *d = api_registry_default(r);
    apip_buf_puts(out, "{\"default\":");
    if (d)
        api_buf_json_string(out, d->name, strlen(d->name));
    else
        apip_buf_puts(out, "null");
    apip_buf_puts(out, ",\"models\":[");
    for (size_t i = 0; i < api_registry_count(r); i++) {
        if (i)
            apip_buf_puts(out, ",");
        model_json(r, r->m[i], false, out);
    }
    apip_buf_puts(out, "]}");
}

int api_registry_model_json(const api_registry *r, const char *name, api_buf *out, api_error *err) {
    const api_model *m = api_registry_find(r, name);
    if (!m) {
        size_t n = name ? strlen(name) : 0;
        return api_fail(err, 404, "unknown_model", NULL,
                        "there is no model named \"%.*s%s\"; GET /v1/models lists them",
                        (int)(n < 200 ? n : 200), name ? name : "", n > 200 ? "..." : "");
    }
    model_json(r, m, true, out);
    if (out->failed)
        return api_fail(err, 500, "out_of_memory", NULL, "out of memory describing model %s",
                        m->name);
    return 0;
}
