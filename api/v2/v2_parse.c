/* v2_parse.c - infer requests of the Open Inference Protocol turned into the api_job their v1
 * equivalent makes.
 *
 * An infer request's JSON (the whole body, or its first Inference-Header-Content-Length bytes)
 * is checked once by apip_json_check, then read member by member. Each input becomes a tensor
 * whose shape it declares and whose data is a flat JSON array (read as one row of count
 * elements) or raw little-endian bytes after the JSON, decoded from where they lie, never
 * through text or base64; nested arrays matching the shape are read as v1 reads them. The
 * request's parameters keep their JSON values: causal, need_weights, weights_top_k and scale
 * read as v1 reads them; heads is a string "0,2". All of it is laid out as the members of a v1
 * request and handed to apip_job_parse_given, so every check of v1 (the shapes against each
 * other and the model, the masks, the limits) applies unchanged, and the job is planned, sized
 * and batched as v1's. The response's form (which outputs, each JSON or binary) rides in the
 * job's arena, counted with it against max_job_bytes, and api_job_respond writes it
 * (v2_reply.c).
 *
 * Legend: N batch, L query length, S key length, E embedding width, H heads, K top-k count. */
#include <stdio.h>
#include <string.h>

#include "v2.h"

/* ---- Names -------------------------------------------------------------------------------- */

static const char *const DT_NAMES[] = {
    [APIP_DT_FP32] = "FP32", [APIP_DT_INT32] = "INT32", [APIP_DT_BOOL] = "BOOL"};
static const size_t DT_BYTES[] = {[APIP_DT_FP32] = 4, [APIP_DT_INT32] = 4, [APIP_DT_BOOL] = 1};

/* The request parameters taken (besides binary_data_output), each a v1 field of that name. */
enum { P_CAUSAL, P_NEED_WEIGHTS, P_HEADS, P_TOP_K, P_SCALE, P_COUNT };
static const char *const PARAM_NAMES[P_COUNT] = {"causal", "need_weights", "heads", "weights_top_k",
                                                 "scale"};

/* ---- Parsing an infer request ------------------------------------------------------------- */

/* What parsing has learnt so far. */
typedef struct v2p {
    const char *body;
    size_t len, header_len; /* the JSON is body[0, header_len); raw bytes follow */
    size_t raw_used;        /* raw bytes claimed by inputs so far */
    bool has_header;        /* Inference-Header-Content-Length was given */
    const api_limits *lim;
    api_error *err;
    const apip_v2_input *inputs;
    bool sdpa;
    const char *in_val[APIP_V2_IN_COUNT]; /* the v1 field value of each input given, else NULL */
    const char *param[P_COUNT];           /* each parameter's JSON value, else NULL */
    bool binary_output;                   /* binary_data_output */
    uint64_t timeout_us;                  /* timeout (the schedule policy extension); 0 = none */
    bool seen_sched[2];                   /* priority, timeout */
    apip_v2_seq seq;                      /* the sequence extension's parameters (v2_seq.c) */
    apip_job_given given;
    apip_v2_reply reply;
} v2p;

/* 400 invalid_field with a printf-style message; returns -1 (api_fail). */
#define bad(c, ...) api_fail((c)->err, 400, "invalid_field", NULL, __VA_ARGS__)

/* The decoded key of a member, cut to fit, for messages. */
static void key_str(apip_span key, char *out, size_t cap) {
    apip_jv_decode(key, out, cap);
}

/* Elements of the flat JSON array [p, end) (validated text): commas plus one, or 0 for an empty
 * array. Elements holding commas of their own (strings, arrays) are miscounted, and then refused
 * as not numbers when read. The commas are counted 8 bytes at a time: a byte of x is zero
 * exactly where the text has a comma, ((x & 7F..) + 7F..) | x has its high bit clear exactly at
 * the zero bytes of x, so its complement shifted by 7 and masked has a 1 in each comma's byte;
 * those add up per byte over 31 words (8 x 31 < 256), then the 8 byte sums are added by a
 * multiply into the top byte. */
static size_t flat_count(const char *p, const char *end) {
    const char *q = apip_jv_ws(p + 1);
    if (*q == ']')
        return 0;
    const uint64_t low7 = 0x7F7F7F7F7F7F7F7Full, ones = 0x0101010101010101ull;
    const uint64_t commas = ones * ',';
    size_t n = 1;
    while (end - q >= 8) {
        uint64_t acc = 0;
        for (int k = 0; k < 31 && end - q >= 8; k++, q += 8) {
            uint64_t x;
            memcpy(&x, q, sizeof x);
            x ^= commas;
            acc += (~(((x & low7) + low7) | x) >> 7) & ones;
        }
        n += (size_t)((acc * ones) >> 56);
    }
    for (; q < end; q++)
        n += *q == ',';
    return n;
}

/* The declared shape of an input: 1 to APIP_MAX_RANK dimensions, each at least 1 and at most
 * max_dim, their elements' float32 bytes within size_t. */
static int read_shape(v2p *c, const char *name, const char *shape, apip_tensor_in *t) {
    if (!shape || apip_jv_kind(shape) != '[')
        return bad(c, "input %s needs a shape: an array of its dimensions", name);
    const char *it = shape, *el = NULL;
    size_t count = 1;
    bool fits = true;
    while (apip_jv_arr_next(&it, &el)) {
        if (t->rank == APIP_MAX_RANK)
            return bad(c, "input %s has a shape of more than %d dimensions", name, APIP_MAX_RANK);
        bool neg = false;
        uint64_t d = 0;
        int kind = apip_jv_kind(el) == '0' ? apip_jv_int(el, &neg, &d) : APIP_INT_NOT_INTEGER;
        if (kind == APIP_INT_NOT_INTEGER || neg || (kind == APIP_INT_OK && d == 0))
            return bad(c, "input %s: shape[%zu] must be a positive integer (a dimension)", name,
                       t->rank);
        if (kind == APIP_INT_TOO_BIG || d > c->lim->max_dim)
            return api_fail(c->err, 413, "job_too_large", NULL,
                            "input %s: shape[%zu] is over the max_dim limit of %zu per dimension",
                            name, t->rank, c->lim->max_dim);
        t->dims[t->rank++] = (size_t)d;
        fits = fits && apip_mul(count, (size_t)d, &count);
    }
    if (t->rank == 0)
        return bad(c, "input %s has an empty shape; it needs at least one dimension", name);
    size_t bytes = 0;
    if (!fits || !apip_mul(count, sizeof(float), &bytes))
        return api_fail(c->err, 413, "job_too_large", NULL,
                        "input %s has more elements than size_t holds, over the max_job_bytes "
                        "limit of %zu bytes",
                        name, c->lim->max_job_bytes);
    t->count = count;
    return 0;
}

static void shape_text(char *out, size_t cap, const apip_tensor_in *t) {
    size_t w = 0;
    int n = snprintf(out, cap, "[");
    w = n > 0 ? (size_t)n : 0;
    for (size_t i = 0; i < t->rank && w < cap; i++) {
        n = snprintf(out + w, cap - w, i ? ",%zu" : "%zu", t->dims[i]);
        w += n > 0 ? (size_t)n : 0;
    }
    if (w < cap)
        snprintf(out + w, cap - w, "]");
}

/* The data of an input: raw bytes after the JSON (binary_data_size) or its JSON data [data,
 * data_end). */
static int read_data(v2p *c, int which, apip_tensor_in *t, const char *data, const char *data_end,
                     bool binary, uint64_t binary_size, const char *obj) {
    const char *name = c->inputs[which].name;
    char shape[96]; /* the shape's text, made only for an error */
    if (binary) {
        if (data)
            return bad(c, "input %s has both data and the binary_data_size parameter; give one",
                       name);
        if (!c->has_header)
            return bad(c,
                       "input %s has binary data (binary_data_size), but the request has no "
                       "Inference-Header-Content-Length header saying where its JSON ends",
                       name);
        size_t want = t->count * DT_BYTES[t->dtype];
        if (binary_size != want) {
            shape_text(shape, sizeof shape, t);
            return bad(c, "input %s: binary_data_size is %llu, but shape %s of %s needs %zu bytes",
                       name, (unsigned long long)binary_size, shape, DT_NAMES[t->dtype], want);
        }
        size_t left = c->len - c->header_len - c->raw_used;
        if (want > left)
            return bad(c,
                       "input %s needs %zu bytes of binary data, but only %zu are left after the "
                       "JSON (Inference-Header-Content-Length %zu, body %zu bytes)",
                       name, want, left, c->header_len, c->len);
        t->raw = (const uint8_t *)c->body + c->header_len + c->raw_used;
        c->raw_used += want;
        c->in_val[which] = obj;
        return 0;
    }
    if (!data)
        return bad(c,
                   "input %s needs data, or the binary_data_size parameter with its bytes after "
                   "the JSON",
                   name);
    if (apip_jv_kind(data) != '[')
        return bad(c, "input %s: data must be an array of the tensor's elements in row-major order",
                   name);
    const char *first = apip_jv_ws(data + 1);
    if (*first == '[') { /* nested arrays: their shape must be the declared one */
        apip_tensor_in nested;
        if (apip_tensor_probe(&nested, name, data, APIP_MAX_RANK, c->lim->max_dim,
                              c->lim->max_job_bytes, c->err))
            return -1;
        if (nested.rank != t->rank || memcmp(nested.dims, t->dims, t->rank * sizeof t->dims[0])) {
            char got[96];
            shape_text(got, sizeof got, &nested);
            shape_text(shape, sizeof shape, t);
            return bad(c, "input %s: data nests as %s, but its shape is %s", name, got, shape);
        }
        int dtype = t->dtype;
        *t = nested;
        t->dtype = dtype;
    } else {
        size_t n = flat_count(data, data_end);
        if (n != t->count) {
            shape_text(shape, sizeof shape, t);
            return bad(c, "input %s: data holds %zu values, but shape %s needs %zu", name, n, shape,
                       t->count);
        }
        t->val = data;
        t->end = data_end;
        t->flat = true;
    }
    c->in_val[which] = which == APIP_V2_IN_KEY_LENGTHS ? data : obj;
    return 0;
}

/* One element of "inputs". */
static int read_input(v2p *c, size_t index, const char *obj) {
    if (apip_jv_kind(obj) != '{')
        return bad(c,
                   "inputs[%zu] must be an object: {\"name\", \"shape\", \"datatype\", \"data\"}",
                   index);
    const char *it = obj, *val = NULL, *name = NULL, *shape = NULL, *dtype = NULL, *params = NULL,
               *data = NULL, *data_end = NULL;
    apip_span key;
    char k[48];
    while (apip_jv_obj_next(&it, &key, &val)) {
        const char **slot = apip_jv_streq(key, "name")         ? &name
                            : apip_jv_streq(key, "shape")      ? &shape
                            : apip_jv_streq(key, "datatype")   ? &dtype
                            : apip_jv_streq(key, "parameters") ? &params
                            : apip_jv_streq(key, "data")       ? &data
                                                               : NULL;
        key_str(key, k, sizeof k);
        if (!slot)
            return bad(c,
                       "inputs[%zu] has a member \"%s\"; an input has name, shape, datatype, "
                       "parameters and data",
                       index, k);
        if (*slot)
            return bad(c, "inputs[%zu] has %s twice", index, k);
        *slot = apip_jv_kind(val) == 'n' ? NULL : val;
        if (slot == &data)
            data_end = it; /* apip_jv_obj_next left it at the value's end */
    }
    if (!name || apip_jv_kind(name) != '"')
        return bad(c, "inputs[%zu] needs a name (a string)", index);
    apip_span ns = apip_jv_string(name);
    int which = -1;
    for (int i = 0; i < APIP_V2_IN_COUNT && which < 0; i++)
        if (apip_jv_streq(ns, c->inputs[i].name))
            which = i;
    if (which < 0) {
        char n[64];
        apip_jv_decode(ns, n, sizeof n);
        return bad(c, "inputs[%zu] is named \"%s\"; %s takes %s", index, n,
                   c->sdpa ? "sdpa" : "a model",
                   c->sdpa ? "q, k, v, key_lengths, key_mask, attn_mask and attn_bias"
                           : "query, key, value, key_lengths, key_mask, attn_mask and attn_bias");
    }
    const char *in = c->inputs[which].name;
    if (c->in_val[which])
        return bad(c, "input %s is given twice", in);

    apip_tensor_in *t = &c->given.tensors[c->given.ntensors];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", in);
    int dt = -1;
    if (dtype && apip_jv_kind(dtype) == '"')
        for (int i = 0; i < 3 && dt < 0; i++)
            if (apip_jv_streq(apip_jv_string(dtype), DT_NAMES[i]))
                dt = i;
    if (dt < 0 || !(c->inputs[which].dtypes & APIP_V2_DT(dt))) {
        char got[32] = "none";
        if (dtype && apip_jv_kind(dtype) == '"')
            apip_jv_decode(apip_jv_string(dtype), got, sizeof got);
        unsigned ok = c->inputs[which].dtypes;
        return bad(c, "input %s has datatype %s; it must be %s%s%s", in, got,
                   ok & APIP_V2_DT(APIP_DT_BOOL)   ? "BOOL"
                   : ok & APIP_V2_DT(APIP_DT_FP32) ? "FP32"
                                                   : "INT32",
                   ok & APIP_V2_DT(APIP_DT_BOOL) && ok & APIP_V2_DT(APIP_DT_INT32) ? " or " : "",
                   ok & APIP_V2_DT(APIP_DT_BOOL) && ok & APIP_V2_DT(APIP_DT_INT32) ? "INT32" : "");
    }
    t->dtype = dt;
    if (read_shape(c, in, shape, t))
        return -1;
    if (which == APIP_V2_IN_KEY_LENGTHS && t->rank != 1)
        return bad(c, "input key_lengths has %zu dimensions; it must be [N]", t->rank);

    bool binary = false;
    uint64_t size = 0;
    if (params) {
        if (apip_jv_kind(params) != '{')
            return bad(c, "the parameters of input %s must be an object", in);
        const char *pit = params, *pv = NULL;
        while (apip_jv_obj_next(&pit, &key, &pv)) {
            key_str(key, k, sizeof k);
            if (!apip_jv_streq(key, "binary_data_size"))
                return bad(c,
                           "input %s has the parameter \"%s\"; an input takes only "
                           "binary_data_size%s",
                           in, k,
                           !strncmp(k, "shared_memory", 13) ? " (attnd has no shared memory)" : "");
            bool neg = false;
            int kind =
                apip_jv_kind(pv) == '0' ? apip_jv_int(pv, &neg, &size) : APIP_INT_NOT_INTEGER;
            if (binary || kind != APIP_INT_OK || neg)
                return bad(c,
                           binary ? "input %s has binary_data_size twice"
                                  : "input %s: binary_data_size must be a number of bytes",
                           in);
            binary = true;
        }
    }
    if (read_data(c, which, t, data, data_end, binary, size, obj))
        return -1;
    if (which == APIP_V2_IN_KEY_LENGTHS) { /* a v1 integer list: JSON, or raw int32 */
        if (binary) {
            c->given.key_lengths = t->raw;
            c->given.n_key_lengths = t->count;
        }
        return 0;
    }
    c->given.keys[c->given.ntensors++] = obj;
    return 0;
}

/* The schedule policy extension's parameter k (priority or timeout) of value val: an integer
 * of at least 0, as Triton takes them. timeout is the job's queue deadline in microseconds from
 * the request's arrival (0: none but the server's own). priority is accepted and has no effect:
 * attnd serves one priority level (as Triton does for a model whose configuration sets no
 * priority_levels), every job in arrival order. null is as absent. */
static int read_sched(v2p *c, const char *k, const char *val) {
    int which = k[0] == 't';
    if (c->seen_sched[which])
        return bad(c, "parameters has %s twice", k);
    c->seen_sched[which] = true;
    if (apip_jv_kind(val) == 'n')
        return 0;
    bool neg = false;
    uint64_t v = 0;
    int kind = apip_jv_kind(val) == '0' ? apip_jv_int(val, &neg, &v) : APIP_INT_NOT_INTEGER;
    if (kind != APIP_INT_OK || neg)
        return bad(c, which ? "the parameter timeout must be a whole number of microseconds, 0 or "
                              "more (0: no timeout of its own)"
                            : "the parameter priority must be a whole number, 0 or more (attnd has "
                              "one priority level: it is accepted and changes nothing)");
    if (which)
        c->timeout_us = v;
    return 0;
}

/* The request's "parameters". */
static int read_params(v2p *c, const char *params) {
    if (apip_jv_kind(params) != '{')
        return bad(c, "parameters must be an object");
    const char *it = params, *val = NULL;
    apip_span key;
    char k[48];
    bool seen_bdo = false;
    while (apip_jv_obj_next(&it, &key, &val)) {
        key_str(key, k, sizeof k);
        if (apip_jv_streq(key, "binary_data_output")) {
            char kind = apip_jv_kind(val);
            if (seen_bdo || (kind != 't' && kind != 'f'))
                return bad(c, seen_bdo ? "parameters has binary_data_output twice"
                                       : "the parameter binary_data_output must be true or false");
            seen_bdo = true;
            c->binary_output = kind == 't';
            continue;
        }
        if (apip_jv_streq(key, "priority") || apip_jv_streq(key, "timeout")) {
            if (read_sched(c, k, val))
                return -1;
            continue;
        }
        const char **sq = apip_jv_streq(key, "sequence_id")      ? &c->seq.id
                          : apip_jv_streq(key, "sequence_start") ? &c->seq.start
                          : apip_jv_streq(key, "sequence_end")   ? &c->seq.end
                                                                 : NULL;
        if (sq) { /* Triton's sequence extension: read by apip_v2_sequence */
            if (*sq)
                return bad(c, "parameters has %s twice", k);
            *sq = val;
            continue;
        }
        int which = -1;
        for (int i = 0; i < P_COUNT && which < 0; i++)
            if (apip_jv_streq(key, PARAM_NAMES[i]))
                which = i;
        if (which < 0 || (which == P_SCALE && !c->sdpa) || (which == P_HEADS && c->sdpa))
            return bad(c,
                       "the parameter \"%s\" is not one %s takes: %s, and binary_data_output, "
                       "priority, timeout, sequence_id, sequence_start and sequence_end",
                       k, c->sdpa ? "sdpa" : "a model",
                       c->sdpa ? "causal, need_weights, weights_top_k, scale"
                               : "causal, need_weights, heads, weights_top_k");
        if (c->param[which])
            return bad(c, "parameters has %s twice", k);
        char kind = apip_jv_kind(val);
        if (kind == 'n')
            continue; /* null: as if absent */
        if (which == P_HEADS) {
            if (kind != '"')
                return bad(c, "the parameter heads must be a string of head indices, such as "
                              "\"0,2\"");
            c->given.heads_csv = true;
        } else if (which == P_NEED_WEIGHTS && c->sdpa && kind == '"') {
            /* SDPA's weights are per head: "per_head" is v1's true. */
            if (!apip_jv_streq(apip_jv_string(val), "per_head"))
                return bad(c, "need_weights of sdpa is true, false or \"per_head\" (the weights "
                              "of every head)");
            val = "true";
        }
        c->param[which] = val;
    }
    return 0;
}

/* The request's "outputs": [{"name", "parameters": {"binary_data": bool}}]. */
static int read_outputs(v2p *c, const char *outputs) {
    if (apip_jv_kind(outputs) != '[')
        return bad(c, "outputs must be an array of {\"name\", \"parameters\"} objects");
    apip_v2_reply *rp = &c->reply;
    rp->listed = true;
    bool seen[APIP_V2_NOUTS] = {false};
    const char *it = outputs, *obj = NULL;
    size_t index = 0;
    for (; apip_jv_arr_next(&it, &obj); index++) {
        if (apip_jv_kind(obj) != '{')
            return bad(c, "outputs[%zu] must be an object: {\"name\", \"parameters\"}", index);
        const char *oit = obj, *val = NULL, *name = NULL, *params = NULL;
        apip_span key;
        char k[48];
        while (apip_jv_obj_next(&oit, &key, &val)) {
            key_str(key, k, sizeof k);
            const char **slot = apip_jv_streq(key, "name")         ? &name
                                : apip_jv_streq(key, "parameters") ? &params
                                                                   : NULL;
            if (!slot)
                return bad(c, "outputs[%zu] has a member \"%s\"; an output has name and parameters",
                           index, k);
            if (*slot)
                return bad(c, "outputs[%zu] has %s twice", index, k);
            *slot = val;
        }
        if (!name || apip_jv_kind(name) != '"')
            return bad(c, "outputs[%zu] needs a name (a string)", index);
        int which = -1;
        for (int i = 0; i < APIP_V2_NOUTS && which < 0; i++)
            if (apip_jv_streq(apip_jv_string(name), apip_v2_out_names[i]))
                which = i;
        if (which < 0) {
            char n[64];
            apip_jv_decode(apip_jv_string(name), n, sizeof n);
            return bad(c,
                       "outputs[%zu] is named \"%s\"; the outputs are output, weights and "
                       "weights_indices",
                       index, n);
        }
        if (seen[which])
            return bad(c, "output %s is listed twice", apip_v2_out_names[which]);
        seen[which] = true;
        bool binary = c->binary_output;
        if (params && apip_jv_kind(params) != 'n') {
            if (apip_jv_kind(params) != '{')
                return bad(c, "the parameters of output %s must be an object",
                           apip_v2_out_names[which]);
            const char *pit = params, *pv = NULL;
            bool seen_bd = false;
            while (apip_jv_obj_next(&pit, &key, &pv)) {
                key_str(key, k, sizeof k);
                char kind = apip_jv_kind(pv);
                if (!apip_jv_streq(key, "binary_data"))
                    return bad(c,
                               "output %s has the parameter \"%s\"; an output takes only "
                               "binary_data%s",
                               apip_v2_out_names[which], k,
                               !strcmp(k, "classification") ? " (attnd does not classify)" : "");
                if (seen_bd || (kind != 't' && kind != 'f'))
                    return bad(c, "output %s: binary_data must be true or false, once",
                               apip_v2_out_names[which]);
                seen_bd = true;
                binary = kind == 't';
            }
        }
        rp->out[rp->nout++] = (uint8_t)which;
        rp->binary[which] = binary;
    }
    if (index == 0)
        rp->listed = false; /* an empty list asks for nothing in particular: all */
    return 0;
}

/* The v1 request the v2 one stands for: fields in v1's names, pointing into the v2 JSON. */
static void v1_root(const v2p *c, apip_json_root *root) {
    root->n = 0;
    root->overflow = false;
    for (int i = 0; i < APIP_V2_IN_COUNT; i++)
        if (c->in_val[i]) {
            const char *n = c->inputs[i].name;
            root->m[root->n++] = (apip_json_member){{n, n + strlen(n)}, c->in_val[i], NULL};
        }
    for (int i = 0; i < P_COUNT; i++)
        if (c->param[i]) {
            const char *n = PARAM_NAMES[i];
            root->m[root->n++] = (apip_json_member){{n, n + strlen(n)}, c->param[i], NULL};
        }
}

api_job *api_v2_parse(const char *body, size_t len, size_t header_len, const char *name,
                      const char *version, const api_registry *models, const api_limits *lim,
                      api_sessions *sessions, uint32_t owner, api_error *err) {
    api_limits dflt = api_limits_default();
    if (!lim)
        lim = &dflt;
    v2p cs, *c = &cs;
    memset(c, 0, sizeof *c);
    c->body = body;
    c->len = len;
    c->lim = lim;
    c->err = err;
    const api_model *model = NULL;
    if (apip_v2_find_model(models, name, version, &model, &c->sdpa, err))
        return NULL;
    c->inputs = c->sdpa ? apip_v2_sdpa_inputs : apip_v2_mha_inputs;
    c->has_header = header_len != API_V2_NO_HEADER;
    c->header_len = c->has_header ? header_len : len;
    if (c->header_len > len)
        return bad(c,
                   "Inference-Header-Content-Length is %zu, past the end of the body of %zu bytes",
                   header_len, len),
               NULL;

    apip_json_root root;
    if (apip_json_check_depth(body, c->header_len, "the request's JSON", lim->max_depth, &root,
                              err))
        return NULL;
    if (root.overflow)
        return bad(c,
                   "the request has more than %d members; it takes id, parameters, inputs and "
                   "outputs",
                   APIP_JSON_MAX_MEMBERS),
               NULL;
    const char *id = NULL, *params = NULL, *inputs = NULL, *outputs = NULL;
    for (size_t i = 0; i < root.n; i++) {
        const apip_json_member *m = &root.m[i];
        const char **slot = apip_jv_streq(m->key, "id")           ? &id
                            : apip_jv_streq(m->key, "parameters") ? &params
                            : apip_jv_streq(m->key, "inputs")     ? &inputs
                            : apip_jv_streq(m->key, "outputs")    ? &outputs
                                                                  : NULL;
        char k[48];
        key_str(m->key, k, sizeof k);
        if (!slot)
            return bad(c,
                       "the request has a member \"%s\"; it takes id, parameters, inputs and "
                       "outputs",
                       k),
                   NULL;
        if (*slot)
            return bad(c, "the request has %s twice", k), NULL;
        *slot = apip_jv_kind(m->val) == 'n' ? NULL : m->val;
    }
    if (id) {
        if (apip_jv_kind(id) != '"')
            return bad(c, "id must be a string"), NULL;
        apip_span s = apip_jv_string(id);
        c->reply.id = s.p;
        c->reply.id_len = (size_t)(s.e - s.p);
    }
    if (params && read_params(c, params))
        return NULL;
    if (!inputs || apip_jv_kind(inputs) != '[')
        return bad(c, "inputs is required: an array of {\"name\", \"shape\", \"datatype\", "
                      "\"data\"} objects"),
               NULL;
    const char *it = inputs, *obj = NULL;
    for (size_t i = 0; apip_jv_arr_next(&it, &obj); i++)
        if (i >= APIP_V2_IN_COUNT ? bad(c, "inputs lists more than %d inputs", APIP_V2_IN_COUNT)
                                  : read_input(c, i, obj))
            return NULL;
    if (c->header_len + c->raw_used != len)
        return bad(c,
                   "%zu bytes follow the JSON (Inference-Header-Content-Length %zu, body %zu "
                   "bytes), but the inputs' binary_data_size add up to %zu",
                   len - c->header_len, c->header_len, len, c->raw_used),
               NULL;
    if (outputs && read_outputs(c, outputs))
        return NULL;
    for (int o = 0; o < APIP_V2_NOUTS && !c->reply.listed; o++)
        c->reply.binary[o] = c->binary_output;

    c->reply.model = c->sdpa ? API_V2_SDPA_MODEL : apip_model_name(model);
    c->given.model = model;
    c->given.reply = &c->reply;
    c->given.reply_ops = &apip_v2_reply_ops;
    v1_root(c, &root);
    /* A request of a sequence appends to its session, taken here until its job ends. */
    if (apip_v2_sequence(&c->seq, model, sessions, owner, lim, &c->given, err) < 0)
        return NULL;
    api_job *job = apip_job_parse_given(c->sdpa ? API_OP_SDPA : API_OP_ATTENTION, &root, &c->given,
                                        models, lim, err);
    if (job)
        job->timeout_s = (double)c->timeout_us * 1e-6;
    else if (c->given.session) /* the sequence as it was */
        apip_session_give(c->given.session, false, false);
    return job;
}
