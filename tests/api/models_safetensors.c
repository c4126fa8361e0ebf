/* models_safetensors.c - models loaded from safetensors files (api/models/safetensors.c,
 * vocab.c): the valid cases against PyTorch, with their vocabularies, the invalid cases with their
 * messages (data files under tests/api_cases/safetensors), prefixes and corruptions. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "models.h"
#include "api_test.h"

/* ---- Safetensors -------------------------------------------------------------------------- */

/* The output of a 200 response, flattened into a new array (*n floats); NULL when none. */
static float *output_of(json_t *resp, size_t *n) {
    float *o = malloc(65536 * sizeof *o);
    *n = resp ? flatten(json_object_get(resp, "output"), o, 65536) : 0;
    if (*n == 0 || *n == SIZE_MAX) {
        free(o);
        return NULL;
    }
    return o;
}

/* A model with a start token (reference.json's start_token, the model registered as "model"):
 * "add_special_tokens": false leaves it out of text and tokens; the start token counts against
 * the position table; add_special_tokens with query, or not a boolean, is a 400. */
static void check_start_token(const char *name, api_registry *reg, const json_t *ref,
                              const char *start) {
    json_t *sp = json_array_get(json_object_get(ref, "splits"), 0);
    json_t *with = json_object_get(sp, "tokens"), *without = json_deep_copy(with);
    json_array_remove(without, 0);
    api_error e = {0};
    for (int k = 0; k < 2; k++) { /* text, then tokens */
        json_t *body =
            json_pack("{s:s,s:O,s:b}", "model", "model", k ? "tokens" : "text",
                      k ? without : json_object_get(sp, "text"), "add_special_tokens", 0);
        char *bs = json_dumps(body, JSON_COMPACT);
        json_t *r = request_str(API_OP_ATTENTION, bs, reg, &e);
        json_t *out = json_object_get(r, "output");
        CHECK(r && same_strings(json_object_get(r, "tokens"), without) &&
                  json_array_size(out) == json_array_size(without),
              "%s: %s: the words alone, without %s (%s)", name, bs, start, e.message);
        json_decref(r);
        free(bs);
        /* "add_special_tokens": true is the default: the same answer as without the field. */
        json_object_set_new(body, "add_special_tokens", json_true());
        bs = json_dumps(body, JSON_COMPACT);
        r = request_str(API_OP_ATTENTION, bs, reg, &e);
        CHECK(r && same_strings(json_object_get(r, "tokens"), with),
              "%s: %s: the start token first (%s)", name, bs, e.message);
        json_decref(r);
        free(bs);
        json_decref(body);
    }
    json_decref(without);

    /* max_tokens counts the start token: max_tokens words fit only without it. */
    size_t p = (size_t)json_number_value(json_object_get(ref, "max_tokens"));
    json_t *full = json_array();
    for (size_t i = 0; i < p; i++)
        json_array_append_new(full, json_string("b"));
    json_t *body = json_pack("{s:s,s:O}", "model", "model", "tokens", full);
    char *bs = json_dumps(body, JSON_COMPACT);
    e = (api_error){0};
    json_t *r = request_str(API_OP_ATTENTION, bs, reg, &e);
    char want[64];
    snprintf(want, sizeof want, "more than %zu words", p - 1);
    CHECK(!r && e.status == 400 && !strcmp(e.code, "invalid_field") && !strcmp(e.field, "tokens") &&
              strstr(e.message, want) && strstr(e.message, "start token"),
          "%s: %zu words and the start token: %d %s", name, p, e.status, e.message);
    json_decref(r);
    free(bs);
    json_object_set_new(body, "add_special_tokens", json_false());
    bs = json_dumps(body, JSON_COMPACT);
    r = request_str(API_OP_ATTENTION, bs, reg, &e);
    CHECK(r && json_array_size(json_object_get(r, "tokens")) == p,
          "%s: %zu words without the start token: %s", name, p, e.message);
    json_decref(r);
    free(bs);
    json_decref(body);
    json_decref(full);

    /* The 400s: with query (embeddings take no token), or not a boolean. */
    static const char *const bad[][2] = {
        {"{\"model\":\"model\",\"query\":[[0,0,0,0,0,0,0,0]],\"add_special_tokens\":false}",
         "goes only with tokens or text"},
        {"{\"model\":\"model\",\"query\":[[0,0,0,0,0,0,0,0]],\"add_special_tokens\":true}",
         "goes only with tokens or text"},
        {"{\"model\":\"model\",\"text\":\"b\",\"add_special_tokens\":\"false\"}", "must be true"},
        {"{\"model\":\"model\",\"text\":\"b\",\"add_special_tokens\":0}", "must be true"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e = (api_error){0};
        r = request_str(API_OP_ATTENTION, bad[i][0], reg, &e);
        CHECK(!r && e.status == 400 && !strcmp(e.code, "invalid_field") &&
                  !strcmp(e.field, "add_special_tokens") && strstr(e.message, bad[i][1]),
              "%s: %s: %d %s %s", name, bad[i][0], e.status, e.field, e.message);
        json_decref(r);
    }
}

/* A model with a vocabulary (reference.json of a *-vocab-* case, registered in reg as "model";
 * query_resp: the answer to the reference's query): its tables bit for bit, its description,
 * every text's split, text and tokens answering what the query does, an unknown word. */
static void check_vocab_model(const char *name, api_registry *reg, const json_t *ref,
                              json_t *query_resp) {
    const api_model *m = api_registry_find(reg, "model");
    size_t p = 0;
    const float *pos = apip_model_position_embeddings(m, &p);
    const float *tables[2] = {apip_model_token_embeddings(m), pos};
    const char *tn[2] = {"token_embeddings", "position_embeddings"};
    json_t *wj = json_object_get(ref, "weights");
    for (int i = 0; i < 2; i++) {
        json_t *a = json_object_get(wj, tn[i]);
        CHECK((a != NULL) == (tables[i] != NULL), "%s: %s presence", name, tn[i]);
        size_t bad = 0;
        for (size_t k = 0; a && tables[i] && k < json_array_size(a); k++) {
            float want = (float)json_number_value(json_array_get(a, k));
            bad += memcmp(&want, tables[i] + k, 4) != 0;
        }
        CHECK(bad == 0, "%s: %zu values of %s differ after conversion", name, bad, tn[i]);
    }
    api_model_info mi = api_model_describe(m);
    size_t max_tokens = (size_t)json_number_value(json_object_get(ref, "max_tokens"));
    CHECK(mi.vocab_size == json_array_size(json_object_get(ref, "vocab")) && mi.max_tokens == p &&
              p == max_tokens,
          "%s: vocab_size %zu, max_tokens %zu", name, mi.vocab_size, mi.max_tokens);

    /* GET /v1/models/model: the vocabulary in id order, the head names. */
    api_buf b = {0};
    api_error e = {0};
    CHECK(api_registry_model_json(reg, "model", &b, &e) == 0, "%s: describe: %s", name, e.message);
    json_error_t je;
    json_t *d = json_loadb(b.data, b.len, 0, &je);
    CHECK(d && same_strings(json_object_get(d, "vocab"), json_object_get(ref, "vocab")) &&
              same_strings(json_object_get(d, "head_names"), json_object_get(ref, "head_names")) &&
              json_is_true(json_object_get(d, "default")) &&
              json_integer_value(json_object_get(d, "vocab_size")) == (json_int_t)mi.vocab_size &&
              (p ? json_integer_value(json_object_get(d, "max_tokens")) == (json_int_t)p
                 : json_object_get(d, "max_tokens") == NULL),
          "%s: GET /v1/models/model: %.*s", name, (int)b.len, b.data);
    /* start_token: the reference's (a string), or null; every model shows it. */
    const char *start = json_string_value(json_object_get(ref, "start_token"));
    json_t *ds = json_object_get(d, "start_token");
    CHECK(ds &&
              (start ? json_is_string(ds) && !strcmp(json_string_value(ds), start)
                     : json_is_null(ds)) &&
              apip_model_start_token(m, NULL) == (start != NULL),
          "%s: start_token %s, want %s", name, ds ? json_dumps(ds, JSON_ENCODE_ANY) : "absent",
          start ? start : "null");
    json_decref(d);
    api_buf_free(&b);

    /* Each text: split as the reference says (the start token first, when the model has one);
     * tokens, which get it too, answer bit for bit what text does. */
    size_t nq = 0;
    float *q_out = output_of(query_resp, &nq);
    json_t *splits = json_object_get(ref, "splits");
    for (size_t i = 0; i < json_array_size(splits); i++) {
        json_t *sp = json_array_get(splits, i);
        json_t *body =
            json_pack("{s:s,s:O}", "model", "model", "text", json_object_get(sp, "text"));
        char *text_body = json_dumps(body, JSON_COMPACT);
        json_object_del(body, "text");
        json_t *words = json_deep_copy(json_object_get(sp, "tokens"));
        if (start) /* the words as sent: attnd puts the start token before them */
            json_array_remove(words, 0);
        json_object_set_new(body, "tokens", words);
        char *tokens_body = json_dumps(body, JSON_COMPACT);
        json_t *rt = request_str(API_OP_ATTENTION, text_body, reg, &e);
        CHECK(rt && same_strings(json_object_get(rt, "tokens"), json_object_get(sp, "tokens")),
              "%s: text %s split otherwise (%s)", name, text_body, e.message);
        CHECK(rt && same_strings(json_object_get(rt, "head_names"),
                                 json_object_get(ref, "head_names")),
              "%s: the response's head_names", name);
        json_t *rk = request_str(API_OP_ATTENTION, tokens_body, reg, &e);
        CHECK(rk && same_strings(json_object_get(rk, "tokens"), json_object_get(sp, "tokens")),
              "%s: tokens echoed otherwise (%s)", name, e.message);
        size_t nt = 0, nk = 0;
        float *t_out = output_of(rt, &nt), *k_out = output_of(rk, &nk);
        CHECK(t_out && k_out && nt == nk && !memcmp(t_out, k_out, nt * sizeof *t_out),
              "%s: tokens and text answer differently for %s", name, text_body);
        /* The first text's words make the reference's query: the same answer, bit for bit. */
        if (i == 0)
            CHECK(t_out && q_out && nt == nq && !memcmp(t_out, q_out, nt * sizeof *t_out),
                  "%s: text and its embeddings as query answer differently", name);
        free(t_out);
        free(k_out);
        json_decref(rt);
        json_decref(rk);
        free(text_body);
        free(tokens_body);
        json_decref(body);
    }
    if (start) {
        check_start_token(name, reg, ref, start);
    } else { /* without a start token, add_special_tokens changes nothing */
        json_t *sp = json_array_get(splits, 0);
        json_t *body = json_pack("{s:s,s:O,s:b}", "model", "model", "text",
                                 json_object_get(sp, "text"), "add_special_tokens", 1);
        char *bs = json_dumps(body, JSON_COMPACT);
        json_t *r = request_str(API_OP_ATTENTION, bs, reg, &e);
        size_t n = 0;
        float *o = output_of(r, &n);
        CHECK(r && same_strings(json_object_get(r, "tokens"), json_object_get(sp, "tokens")) && o &&
                  n == nq && q_out && !memcmp(o, q_out, n * sizeof *o),
              "%s: %s: no start token, the same words and answer (%s)", name, bs, e.message);
        free(o);
        json_decref(r);
        free(bs);
        json_decref(body);
    }
    free(q_out);

    /* An unknown word: its character offset (code points) in the message. */
    json_t *u = json_object_get(ref, "unknown");
    json_t *body = json_pack("{s:s,s:O}", "model", "model", "text", json_object_get(u, "text"));
    char *ub = json_dumps(body, JSON_COMPACT);
    json_t *ru = request_str(API_OP_ATTENTION, ub, reg, &e);
    char at[48];
    snprintf(at, sizeof at, "at character %.0f of text",
             json_number_value(json_object_get(u, "at")));
    CHECK(!ru && e.status == 400 && !strcmp(e.code, "unknown_token") && !strcmp(e.field, "text") &&
              strstr(e.message, at),
          "%s: unknown word in %s: %d %s %s", name, ub, e.status, e.code, e.message);
    json_decref(ru);
    free(ub);
    json_decref(body);
}

/* What is not a regular file is refused, named, and never read: a directory, a FIFO (held open
 * by a writer here, so that a loader that read it would fail rather than block), /dev/null and
 * a symlink to it; a symlink to a regular file loads. */
static void test_odd_files(const char *cases) {
    char dir[] = "/tmp/attnd-odd-XXXXXX", path[1200], target[1024];
    bool made = mkdtemp(dir) != NULL;
    CHECK(made, "mkdtemp: %s", strerror(errno));
    if (!made)
        return;
    static const struct {
        const char *file, *kind; /* kind: what the message must say */
    } odd[] = {{"x.safetensors", "is a directory, not a regular file"},
               {"f.safetensors", "is a FIFO, not a regular file"},
               {"n.safetensors", "is a symlink to a character device, not a regular file"},
               {"/dev/null", "is a character device, not a regular file"}};
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    CHECK(mkdir(path, 0755) == 0, "mkdir %s", path);
    snprintf(path, sizeof path, "%s/f.safetensors", dir);
    CHECK(mkfifo(path, 0644) == 0, "mkfifo %s", path);
    int w = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    CHECK(w >= 0, "open %s", path);
    snprintf(path, sizeof path, "%s/n.safetensors", dir);
    CHECK(symlink("/dev/null", path) == 0, "symlink %s", path);
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        if (odd[i].file[0] == '/')
            snprintf(path, sizeof path, "%s", odd[i].file);
        else
            snprintf(path, sizeof path, "%s/%s", dir, odd[i].file);
        api_error e = {0};
        api_model *m = api_model_load_file(path, &e);
        char want[1400];
        snprintf(want, sizeof want, "%s %s", path, odd[i].kind);
        CHECK(!m && e.status == 400 && !strcmp(e.code, "invalid_model") && !strcmp(e.message, want),
              "%s: %d %s %s (expected 400 invalid_model \"%s\")", path, e.status, e.code, e.message,
              want);
        api_model_destroy(m);
    }
    if (w >= 0)
        close(w);
    snprintf(target, sizeof target, "%s/safetensors/valid/f32-packed-bias/model.safetensors",
             cases);
    char *abs = realpath(target, NULL);
    snprintf(path, sizeof path, "%s/linked.safetensors", dir);
    CHECK(abs && symlink(abs, path) == 0, "symlink %s -> %s", path, target);
    api_error e = {0};
    api_model *m = api_model_load_file(path, &e);
    CHECK(m && !strcmp(api_model_describe(m).name, "linked"), "a symlink to a model file: %s",
          e.message);
    api_model_destroy(m);
    free(abs);
    static const char *const names[] = {"x.safetensors", "f.safetensors", "n.safetensors",
                                        "linked.safetensors"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (unlink(path) != 0)
            rmdir(path);
    }
    rmdir(dir);
}

static void test_safetensors_valid(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, name);
    api_error e = {0};
    api_model *m = api_model_load_file(path, &e);
    CHECK(m != NULL, "%s: %s", path, e.message);
    if (!m)
        return;
    snprintf(path, sizeof path, "%s/%s/reference.json", dir, name);
    json_error_t je;
    json_t *ref = json_load_file(path, JSON_DECODE_INT_AS_REAL, &je);
    CHECK(ref != NULL, "%s: %s", path, je.text);
    if (!ref) {
        api_model_destroy(m);
        return;
    }
    api_model_info mi = api_model_describe(m);
    CHECK(strcmp(mi.name, "model") == 0 && strcmp(mi.source, "file") == 0, "name is the stem");
    CHECK(mi.embed_dim == (size_t)json_number_value(json_object_get(ref, "embed_dim")) &&
              mi.num_heads == (size_t)json_number_value(json_object_get(ref, "num_heads")) &&
              mi.kdim == (size_t)json_number_value(json_object_get(ref, "kdim")) &&
              mi.vdim == (size_t)json_number_value(json_object_get(ref, "vdim")) &&
              mi.has_bias == json_is_true(json_object_get(ref, "has_bias")) &&
              mi.add_bias_kv == json_is_true(json_object_get(ref, "add_bias_kv")) &&
              mi.add_zero_attn == json_is_true(json_object_get(ref, "add_zero_attn")),
          "%s: model info", name);
    /* Weights: bit-exact after the dtype conversion. */
    const attn_mha_params *pp = apip_model_params(m);
    const char *tn[] = {"in_proj_weight", "in_proj_bias",  "out_proj.weight",
                        "out_proj.bias",  "q_proj_weight", "k_proj_weight",
                        "v_proj_weight",  "bias_k",        "bias_v"};
    const float *tp[] = {pp->in_proj_weight, pp->in_proj_bias,  pp->out_proj_weight,
                         pp->out_proj_bias,  pp->q_proj_weight, pp->k_proj_weight,
                         pp->v_proj_weight,  pp->bias_k,        pp->bias_v};
    json_t *wj = json_object_get(ref, "weights");
    for (int i = 0; i < 9; i++) {
        json_t *a = json_object_get(wj, tn[i]);
        CHECK((a != NULL) == (tp[i] != NULL), "%s: %s presence", name, tn[i]);
        size_t bad = 0;
        for (size_t k = 0; a && tp[i] && k < json_array_size(a); k++) {
            float want = (float)json_number_value(json_array_get(a, k));
            bad += memcmp(&want, tp[i] + k, 4) != 0;
        }
        CHECK(bad == 0, "%s: %zu values of %s differ after conversion", name, bad, tn[i]);
    }
    /* Output against PyTorch, through a request to the registered model. */
    api_registry *reg = api_registry_create();
    api_registry_add(reg, m, &e);
    api_buf lb = {0};
    api_registry_list_json(reg, &lb);
    json_t *list = json_loadb(lb.data, lb.len, 0, &je);
    json_t *m0 = json_array_get(json_object_get(list, "models"), 0);
    CHECK(json_is_integer(json_object_get(m0, "kdim")) &&
              json_integer_value(json_object_get(m0, "kdim")) == (json_int_t)mi.kdim &&
              json_is_integer(json_object_get(m0, "vdim")) &&
              json_integer_value(json_object_get(m0, "vdim")) == (json_int_t)mi.vdim,
          "%s: GET /v1/models gives kdim %zu and vdim %zu: %.*s", name, mi.kdim, mi.vdim,
          (int)lb.len, lb.data);
    json_decref(list);
    api_buf_free(&lb);
    char *q = json_dumps(json_object_get(ref, "query"), JSON_COMPACT | JSON_REAL_PRECISION(9));
    char *k = json_object_get(ref, "key")
                  ? json_dumps(json_object_get(ref, "key"), JSON_COMPACT | JSON_REAL_PRECISION(9))
                  : NULL;
    char *v = json_object_get(ref, "value")
                  ? json_dumps(json_object_get(ref, "value"), JSON_COMPACT | JSON_REAL_PRECISION(9))
                  : NULL;
    sb body = {0};
    sb_add(&body, "{\"model\":\"model\",\"query\":%s", q);
    if (k)
        sb_add(&body, ",\"key\":%s,\"value\":%s", k, v);
    sb_add(&body, "}");
    json_t *resp = request_str(API_OP_ATTENTION, body.s, reg, &e);
    CHECK(resp != NULL, "%s: request: %s", name, e.message);
    if (resp) {
        float got[4096], want[4096];
        size_t n = flatten(json_object_get(resp, "output"), got, 4096);
        size_t nw = flatten(json_object_get(ref, "output"), want, 4096);
        CHECK(n == nw && n > 0, "%s: output sizes %zu vs %zu", name, n, nw);
        double err = 0;
        for (size_t i = 0; i < n && n == nw; i++)
            err = fmax(err, fabs((double)got[i] - (double)want[i]) / (1.0 + fabs((double)want[i])));
        CHECK(err < 2e-5, "%s: output differs from PyTorch by %g", name, err);
        if (json_object_get(ref, "vocab"))
            check_vocab_model(name, reg, ref, resp);
        json_decref(resp);
    }
    free(q), free(k), free(v), free(body.s);
    json_decref(ref);
    api_registry_destroy(reg);
}

void test_safetensors(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/safetensors/valid", cases_dir);
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    size_t nvalid = 0, ninvalid = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.') {
            test_safetensors_valid(dir, de->d_name);
            nvalid++;
        }
    if (d)
        closedir(d);
    CHECK(nvalid >= 6, "only %zu valid safetensors cases", nvalid);

    snprintf(dir, sizeof dir, "%s/safetensors/invalid", cases_dir);
    d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[1024], epath[1024];
        snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, de->d_name);
        snprintf(epath, sizeof epath, "%s/%s/expect", dir, de->d_name);
        size_t el = 0;
        char *expect = read_file(epath, &el);
        CHECK(expect != NULL, "cannot read %s", epath);
        if (!expect)
            continue;
        while (el && (expect[el - 1] == '\n'))
            expect[--el] = '\0';
        api_error e = {0};
        api_model *m = api_model_load_file(path, &e);
        CHECK(m == NULL, "%s was accepted", path);
        CHECK(e.status == 400 && strcmp(e.code, "invalid_model") == 0, "%s: %d %s", path, e.status,
              e.code);
        CHECK(strncmp(e.message, path, strlen(path)) == 0, "%s: message does not name the file",
              path);
        CHECK(strstr(e.message, expect) != NULL, "%s: message \"%s\" lacks \"%s\"", path, e.message,
              expect);
        CHECK(!strchr(e.message, '\n'), "%s: message is not one line", path);
        api_model_destroy(m);
        free(expect);
        ninvalid++;
    }
    if (d)
        closedir(d);
    CHECK(ninvalid >= 60, "only %zu invalid safetensors cases", ninvalid);
    printf("safetensors cases: %zu valid, %zu invalid\n", nvalid, ninvalid);

    /* A missing file is an I/O error naming it. */
    api_error e = {0};
    CHECK(!api_model_load_file("/nonexistent/x.safetensors", &e) && e.status == 500 &&
              strstr(e.message, "/nonexistent/x.safetensors"),
          "missing file: %s", e.message);
    test_odd_files(cases_dir);
    /* Every prefix and random corruptions of a valid file fail cleanly or load (ASan watches
     * the reads: each copy is exactly as long as claimed). */
    char path[1024];
    snprintf(path, sizeof path, "%s/safetensors/valid/bf16-kvdim-bias/model.safetensors",
             cases_dir);
    size_t len = 0;
    char *ok = read_file(path, &len);
    CHECK(ok != NULL, "read %s", path);
    for (size_t n = 0; ok && n < len; n++) {
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, ok, n);
        api_error ce = {0};
        api_model *m = api_model_from_safetensors("cut", cut, n, &ce);
        CHECK(!m && ce.status == 400 && strncmp(ce.message, "cut: ", 5) == 0,
              "prefix of %zu bytes: %s", n, ce.message);
        api_model_destroy(m);
        free(cut);
    }
    size_t loaded = 0;
    for (int it = 0; ok && it < 3000; it++) {
        uint8_t *c = malloc(len);
        memcpy(c, ok, len);
        int flips = 1 + (int)(rnd64() % 4);
        for (int f = 0; f < flips; f++) {
            size_t at = (size_t)(rnd64() % (it % 2 ? len : (len < 400 ? len : 400)));
            c[at] = (uint8_t)rnd64();
        }
        api_error ce = {0};
        api_model *m = api_model_from_safetensors("fuzz", c, len, &ce);
        CHECK(m || (ce.status && ce.message[0]), "corrupt file: no model and no error");
        loaded += m != NULL;
        api_model_destroy(m);
        free(c);
    }
    free(ok);
    CHECK(loaded > 0, "no corrupted file loaded at all (data flips should still load)");
}
