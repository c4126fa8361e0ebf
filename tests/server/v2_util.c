/* v2_util.c - a client of the Open Inference Protocol for test_server: v2 request bodies as
 * Triton's client lays them out, replies read (decoded, JSON and binary outputs), compression,
 * the v1 request of the same job, and the check that v1 and v2 agree bit for bit. */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../harness.h"
#include "server_test.h"

static size_t v2_count(const v2_in *t) {
    size_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

static size_t v2_width(const v2_in *t) {
    return !strcmp(t->dtype, "BOOL") ? 1 : 4;
}

static json_t *v2_shape(const v2_in *t) {
    json_t *s = json_array();
    for (int i = 0; i < t->rank; i++)
        json_array_append_new(s, json_integer((json_int_t)t->dims[i]));
    return s;
}

/* A v2 infer request laid out as Triton's Python client lays it out: the JSON request (each
 * input with its data, or with "binary_data_size"), then each binary input's raw little-endian
 * bytes in input order. params and outputs are JSON texts (NULL: none). Returns the body (new)
 * and its length; *hlen is the JSON's length when an input is binary (the request's
 * Inference-Header-Content-Length), else 0. */
char *v2_body(const v2_in *in, size_t n, bool binary, const char *params, const char *outputs,
              size_t *len, size_t *hlen) {
    json_t *rq = json_object(), *inputs = json_array();
    for (size_t k = 0; k < n; k++) {
        const v2_in *t = &in[k];
        json_t *o =
            json_pack("{s:s,s:o,s:s}", "name", t->name, "shape", v2_shape(t), "datatype", t->dtype);
        size_t c = v2_count(t);
        if (binary) {
            json_object_set_new(
                o, "parameters",
                json_pack("{s:I}", "binary_data_size", (json_int_t)(c * v2_width(t))));
        } else {
            json_t *d = json_array();
            for (size_t e = 0; e < c; e++) {
                bool fp = !strcmp(t->dtype, "FP32");
                float f = fp ? ((const float *)t->data)[e] : 0.0f;
                json_array_append_new(d, fp && isinf(f) ? json_string("-inf") /* attnd's -inf */
                                         : fp           ? json_real((double)f)
                                         : !strcmp(t->dtype, "INT32")
                                             ? json_integer(((const int32_t *)t->data)[e])
                                             : json_boolean(((const uint8_t *)t->data)[e]));
            }
            json_object_set_new(o, "data", d);
        }
        json_array_append_new(inputs, o);
    }
    json_object_set_new(rq, "inputs", inputs);
    if (params)
        json_object_set_new(rq, "parameters", json_loads(params, 0, NULL));
    if (outputs)
        json_object_set_new(rq, "outputs", json_loads(outputs, 0, NULL));
    char *js = dump(rq);
    size_t jl = strlen(js), total = jl;
    for (size_t k = 0; binary && k < n; k++)
        total += v2_count(&in[k]) * v2_width(&in[k]);
    char *body = malloc(total + 1);
    memcpy(body, js, jl);
    size_t at = jl;
    for (size_t k = 0; binary && k < n; k++) {
        size_t b = v2_count(&in[k]) * v2_width(&in[k]);
        memcpy(body + at, in[k].data, b); /* the test runs on little-endian machines */
        at += b;
    }
    body[total] = '\0';
    free(js);
    *len = total;
    *hlen = binary && n ? jl : 0;
    return body;
}

/* POSTs a v2 body: with Inference-Header-Content-Length when hlen > 0, and no Content-Type (as
 * Triton's client sends it) unless ctype is given; h1 and h2 are more header lines (NULL: none). */
bool v2_post(int port, const char *path, const char *body, size_t len, size_t hlen,
             const char *ctype, const char *h1, const char *h2, reply *r) {
    char hl[80];
    snprintf(hl, sizeof hl, "Inference-Header-Content-Length: %zu", hlen);
    req q = {.path = path, .ctype = ctype, .body = body, .len = len};
    int k = 0;
    q.hdrs[k++] = ctype ? "X-Test: v2" : "Content-Type:"; /* "Content-Type:" removes curl's */
    if (hlen)
        q.hdrs[k++] = hl;
    if (h1)
        q.hdrs[k++] = h1;
    if (h2)
        q.hdrs[k++] = h2;
    return http(NULL, port, &q, r);
}

/* Inflates gzip or zlib data (zlib detects which). NULL when it does not decode. */
static unsigned char *inflate_all(const void *in, size_t n, size_t *out_len) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 32) != Z_OK)
        return NULL;
    size_t cap = n * 4 + 1024, len = 0;
    unsigned char *out = malloc(cap);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    int rc = Z_OK;
    while (rc == Z_OK) {
        if (len == cap) {
            cap *= 2;
            out = realloc(out, cap);
        }
        z.next_out = out + len;
        z.avail_out = (uInt)(cap - len);
        rc = inflate(&z, Z_NO_FLUSH);
        len = cap - z.avail_out;
    }
    inflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    *out_len = len;
    return out;
}

/* Compresses data as gzip (gzip true) or zlib (Content-Encoding: deflate). */
unsigned char *deflate_all(const void *in, size_t n, bool gzip, size_t *out_len) {
    z_stream z;
    memset(&z, 0, sizeof z);
    deflateInit2(&z, 6, Z_DEFLATED, gzip ? 15 + 16 : 15, 8, Z_DEFAULT_STRATEGY);
    size_t cap = deflateBound(&z, (uLong)n) + 64;
    unsigned char *out = malloc(cap);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    deflate(&z, Z_FINISH);
    *out_len = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

void v2_out_free(v2_out *o) {
    json_decref(o->j);
    free(o->body);
    free(o->encoding);
    memset(o, 0, sizeof *o);
}

/* Reads a 200 v2 reply as a client of the protocol does: decodes the body by its
 * Content-Encoding, takes Inference-Header-Content-Length bytes of JSON (all when absent). */
bool v2_read(const reply *r, v2_out *o, const char *what) {
    memset(o, 0, sizeof *o);
    if (!CHECK(r->status == 200, "%s: status %ld (%.300s)", what, r->status, r->body))
        return false;
    o->encoding = header(r, "Content-Encoding");
    if (o->encoding) {
        o->body = inflate_all(r->body, r->len, &o->len);
        if (!CHECK(o->body != NULL, "%s: the %s body does not decode", what, o->encoding))
            return false;
    } else {
        o->body = malloc(r->len + 1);
        memcpy(o->body, r->body, r->len);
        o->len = r->len;
    }
    char *hl = header(r, "Inference-Header-Content-Length");
    o->json_len = hl ? (size_t)strtoull(hl, NULL, 10) : o->len;
    free(hl);
    if (!CHECK(o->json_len <= o->len, "%s: Inference-Header-Content-Length %zu of %zu bytes", what,
               o->json_len, o->len))
        return false;
    json_error_t je;
    o->j = json_loadb((const char *)o->body, o->json_len, 0, &je);
    return CHECK(o->j != NULL, "%s: the JSON part does not parse: %s", what, je.text);
}

/* Output name of a v2 reply (raw bytes after the JSON, in the order of the outputs, or JSON
 * data). *binary says which. False when it is missing or malformed. */
bool v2_tensor(const v2_out *o, const char *name, tens *t, bool *binary) {
    memset(t, 0, sizeof *t);
    size_t off = o->json_len, i;
    json_t *x;
    json_array_foreach(json_object_get(o->j, "outputs"), i, x) {
        json_t *bs = json_object_get(json_object_get(x, "parameters"), "binary_data_size");
        size_t nb = bs ? (size_t)json_integer_value(bs) : 0;
        if (strcmp(json_string_value(json_object_get(x, "name")), name) != 0) {
            off += nb;
            continue;
        }
        json_t *shape = json_object_get(x, "shape");
        bool ints = !strcmp(json_string_value(json_object_get(x, "datatype")), "INT32");
        size_t n = 1;
        t->rank = (int)json_array_size(shape);
        for (int k = 0; k < t->rank && k < 8; k++)
            n *= t->shape[k] = (size_t)json_integer_value(json_array_get(shape, (size_t)k));
        t->v = malloc((n ? n : 1) * sizeof *t->v);
        t->n = n;
        *binary = bs != NULL;
        if (bs) {
            if (nb != n * 4 || off + nb > o->len) {
                tens_free(t);
                return false;
            }
            for (size_t k = 0; k < n; k++) {
                float f;
                int32_t v;
                memcpy(ints ? (void *)&v : (void *)&f, o->body + off + 4 * k, 4);
                t->v[k] = ints ? (double)v : (double)f;
            }
            return true;
        }
        json_t *d = json_object_get(x, "data");
        if (json_array_size(d) != n) {
            tens_free(t);
            return false;
        }
        for (size_t k = 0; k < n; k++) /* a JSON float is read as float32, as clients do */
            t->v[k] = ints ? json_number_value(json_array_get(d, k))
                           : (double)(float)json_number_value(json_array_get(d, k));
        return true;
    }
    return false;
}

/* Output name ("output", "weights", "weights_indices") of a v1 reply with base64 tensors. */
bool v1_tensor(const reply *r, const char *name, tens *t) {
    memset(t, 0, sizeof *t);
    json_t *j = json_loads(r->body, 0, NULL);
    json_t *x = json_object_get(j, !strcmp(name, "output") ? "output" : "weights");
    if (json_object_get(x, "indices"))
        x = json_object_get(x, strcmp(name, "weights_indices") ? "values" : "indices");
    else if (!strcmp(name, "weights_indices"))
        x = NULL;
    const char *dtype = json_string_value(json_object_get(x, "dtype"));
    const char *data = json_string_value(json_object_get(x, "data"));
    json_t *shape = json_object_get(x, "shape");
    size_t bytes = 0, n = 1;
    unsigned char *raw = data ? b64_decode(data, &bytes) : NULL;
    t->rank = (int)json_array_size(shape);
    for (int k = 0; k < t->rank && k < 8; k++)
        n *= t->shape[k] = (size_t)json_integer_value(json_array_get(shape, (size_t)k));
    bool ok = raw && dtype && bytes == n * 4;
    if (ok) {
        t->v = malloc((n ? n : 1) * sizeof *t->v);
        t->n = n;
        for (size_t k = 0; k < n; k++) {
            float f;
            int32_t v;
            memcpy(!strcmp(dtype, "int32") ? (void *)&v : (void *)&f, raw + 4 * k, 4);
            t->v[k] = !strcmp(dtype, "int32") ? (double)v : (double)f;
        }
    }
    free(raw);
    json_decref(j);
    return ok;
}

/* The same float32 bits (or integers) and the same shape. */
bool same_bits_tens(const tens *a, const tens *b, size_t *at) {
    *at = 0;
    if (a->n != b->n || a->rank != b->rank || memcmp(a->shape, b->shape, sizeof a->shape))
        return false;
    for (size_t i = 0; i < a->n; i++) {
        float x = (float)a->v[i], y = (float)b->v[i];
        if (memcmp(&x, &y, sizeof x) != 0) {
            *at = i;
            return false;
        }
    }
    return true;
}

/* The integers (or bools as 0 and 1) of t from level lvl on, as nested JSON lists. */
static json_t *nested_ints(const v2_in *t, int lvl, size_t *at) {
    json_t *a = json_array();
    for (size_t i = 0; i < t->dims[lvl]; i++) {
        if (lvl + 1 < t->rank) {
            json_array_append_new(a, nested_ints(t, lvl + 1, at));
            continue;
        }
        bool ints = !strcmp(t->dtype, "INT32");
        json_array_append_new(a, json_integer(ints ? ((const int32_t *)t->data)[*at]
                                                   : ((const uint8_t *)t->data)[*at]));
        ++*at;
    }
    return a;
}

/* The v1 request for the same job: base64 floats, integer and mask lists, v1's own fields
 * (extra, a JSON object text), the model by name, base64 out. */
char *v1_body_for(const char *model, const v2_in *in, size_t n, const char *extra) {
    json_t *o = json_loads(extra, 0, NULL);
    if (strcmp(model, "sdpa") != 0)
        json_object_set_new(o, "model", json_string(model));
    json_object_set_new(o, "encoding", json_string("base64"));
    for (size_t k = 0; k < n; k++) {
        const v2_in *t = &in[k];
        if (!strcmp(t->dtype, "FP32")) {
            json_object_set_new(o, t->name, json_b64(t->data, t->dims, t->rank));
            continue;
        }
        size_t at = 0;
        json_object_set_new(o, t->name, nested_ints(t, 0, &at));
    }
    return dump(o);
}

/* One job sent through v1 (base64) and through v2 three ways (binary in and out; JSON in and
 * out; binary in, JSON out): every output v1 returns must be in v2's replies with the same
 * bits, and v2 must return no other. */
void v2_agrees(int port, const char *what, const char *model, const v2_in *in, size_t n,
               const char *v1_extra, const char *params) {
    char *b1 = v1_body_for(model, in, n, v1_extra);
    reply r1;
    post(NULL, port, strcmp(model, "sdpa") ? "/v1/attention" : "/v1/sdpa", b1, &r1);
    CHECK(r1.status == 200, "%s: v1 %ld %.300s", what, r1.status, r1.body);
    char path[128];
    snprintf(path, sizeof path, "/v2/models/%s/infer", model);
    static const char *const outs[] = {"output", "weights", "weights_indices"};
    for (int mode = 0; mode < 3 && r1.status == 200; mode++) {
        json_t *p = json_loads(params, 0, NULL);
        if (mode == 0)
            json_object_set_new(p, "binary_data_output", json_true());
        char *ptext = dump(p), m[160];
        size_t len, hl;
        char *b2 = v2_body(in, n, mode != 1, ptext, NULL, &len, &hl);
        reply r2;
        v2_post(port, path, b2, len, hl, NULL, NULL, NULL, &r2);
        snprintf(m, sizeof m, "%s (%s)", what,
                 mode == 0   ? "binary"
                 : mode == 1 ? "JSON"
                             : "binary in, JSON out");
        v2_out o;
        if (v2_read(&r2, &o, m)) {
            char *ct = header(&r2, "Content-Type");
            CHECK(ct && !strcmp(ct, mode == 0 ? "application/octet-stream" : "application/json"),
                  "%s: Content-Type %s", m, ct ? ct : "none");
            free(ct);
            for (int k = 0; k < 3; k++) {
                tens a, b;
                bool bin = false, in1 = v1_tensor(&r1, outs[k], &a),
                     in2 = v2_tensor(&o, outs[k], &b, &bin);
                size_t at = 0;
                CHECK(in1 == in2, "%s: %s in v1 %d, in v2 %d", m, outs[k], in1, in2);
                if (in1 && in2) {
                    CHECK(bin == (mode == 0), "%s: %s binary %d", m, outs[k], bin);
                    CHECK(same_bits_tens(&a, &b, &at), "%s: %s differs at %zu: %.9g, %.9g", m,
                          outs[k], at, at < a.n ? a.v[at] : 0.0, at < b.n ? b.v[at] : 0.0);
                }
                tens_free(&a);
                tens_free(&b);
            }
            const char *mn = json_string_value(json_object_get(o.j, "model_name"));
            CHECK(mn && !strcmp(mn, model), "%s: model_name %s", m, mn ? mn : "none");
        }
        v2_out_free(&o);
        reply_free(&r2);
        free(b2);
        free(ptext);
    }
    reply_free(&r1);
    free(b1);
}

/* A v2 error reply: status, JSON {"error": "message"} and nothing else; the message holds
 * phrase (NULL: any). */
void check_v2_error(const reply *r, long status, const char *phrase, const char *what) {
    CHECK(r->rc == CURLE_OK, "%s: transport error %s", what, curl_easy_strerror(r->rc));
    CHECK(r->status == status, "%s: status %ld, expected %ld (body %.300s)", what, r->status,
          status, r->body);
    char *ct = header(r, "Content-Type");
    CHECK(ct && !strncmp(ct, "application/json", 16), "%s: Content-Type %s", what,
          ct ? ct : "none");
    free(ct);
    json_t *j = json_loads(r->body, 0, NULL);
    const char *msg = json_string_value(json_object_get(j, "error"));
    CHECK(msg && json_object_size(j) == 1 && strlen(msg) > 10, "%s: not a v2 error body: %.300s",
          what, r->body);
    if (phrase)
        CHECK(msg && strstr(msg, phrase), "%s: the message \"%s\" lacks \"%s\"", what,
              msg ? msg : "", phrase);
    json_decref(j);
}
