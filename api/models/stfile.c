/* stfile.c - the safetensors format as attnd reads model files: an 8-byte little-endian header
 * length, a JSON header naming each tensor's dtype, shape and byte range, then the raw
 * little-endian data; F32, F16 and BF16 are converted to float32. Here live the names a model
 * file may hold (nn.MultiheadAttention's state_dict, the vocabulary's tables, and a model of
 * layers' layers.i.*, norm.* and lm_head.*), the header and its __metadata__, the byte ranges,
 * the conversion, and the metadata's lists (vocabulary, head names, start token).
 *
 * The input is untrusted (a fuzzer feeds this loader): every length and offset is checked
 * before use, nothing is read outside the given bytes, and any problem is one message that
 * names the file and what is wrong. Like the reference implementation, the tensors must cover
 * the data exactly: no overlaps, no gaps, nothing after the last one.
 *
 * Legend: E embedding width, V vocabulary size, P positions. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models.h"

#define MAX_HEADER (100u << 20) /* the reference implementation's limit */

/* ---- Names ------------------------------------------------------------------------------------
 */

static const char *const layer_names[APIP_L_COUNT] = {"norm1.weight",
                                                      "norm1.bias",
                                                      "self_attn.in_proj_weight",
                                                      "self_attn.in_proj_bias",
                                                      "self_attn.out_proj.weight",
                                                      "self_attn.out_proj.bias"};
static const char *const top_names[APIP_S_COUNT] = {"norm.weight", "norm.bias", "lm_head.weight",
                                                    "lm_head.bias"};

const char *apip_st_name(int i) {
    return i < APIP_P_COUNT  ? apip_param_names[i]
           : i == APIP_T_TOK ? "token_embeddings"
                             : "position_embeddings";
}

const char *apip_st_layer_name(int i) {
    return layer_names[i];
}

const char *apip_st_top_name(int i) {
    return top_names[i];
}

/* The name of tensor t of file f, into buf (cap bytes): "in_proj_weight",
 * "layers.1.self_attn.in_proj_weight", "lm_head.weight". */
static const char *entry_name(const apip_st_file *f, const apip_st_tensor *t, char *buf,
                              size_t cap) {
    if (t >= f->t && t < f->t + APIP_T_COUNT)
        return apip_st_name((int)(t - f->t));
    if (t >= f->top && t < f->top + APIP_S_COUNT)
        return top_names[t - f->top];
    size_t at = (size_t)(t - &f->layer[0][0]);
    snprintf(buf, cap, "layers.%zu.%s", at / APIP_L_COUNT, layer_names[at % APIP_L_COUNT]);
    return buf;
}

/* The slot of the tensor named k (decoded, n bytes) in f, or NULL when attnd knows no such
 * name. Layer indices are decimal without leading zeros, below APIP_MAX_LAYERS. */
static apip_st_tensor *slot_of(apip_st_file *f, const char *k, size_t n) {
    for (int i = 0; i < APIP_T_COUNT; i++)
        if (!strcmp(k, apip_st_name(i)))
            return &f->t[i];
    for (int i = 0; i < APIP_S_COUNT; i++)
        if (!strcmp(k, top_names[i]))
            return &f->top[i];
    if (n < 8 || memcmp(k, "layers.", 7) != 0)
        return NULL;
    const char *p = k + 7;
    size_t li = 0, digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 3) {
        li = li * 10 + (size_t)(*p++ - '0');
        digits++;
    }
    if (digits == 0 || *p != '.' || (digits > 1 && k[7] == '0') || li >= APIP_MAX_LAYERS)
        return NULL;
    for (int i = 0; i < APIP_L_COUNT; i++)
        if (!strcmp(p + 1, layer_names[i])) {
            if (li + 1 > f->layers)
                f->layers = li + 1;
            return &f->layer[li][i];
        }
    return NULL;
}

__attribute__((format(printf, 2, 3))) int apip_st_fail(apip_st_ctx *c, const char *fmt, ...) {
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return api_fail(c->err, 400, "invalid_model", NULL, "%s: %s", c->label, msg);
}

static bool parse_u64(const char *v, uint64_t *out) {
    return apip_jv_kind(v) == '0' && apip_jv_u64(v, out);
}

/* ---- The header ------------------------------------------------------------------------------ */

/* Reads one tensor entry {"dtype", "shape", "data_offsets"}. */
static int read_entry(apip_st_ctx *c, const char *name, const char *obj, apip_st_tensor *t) {
    if (apip_jv_kind(obj) != '{')
        return apip_st_fail(c, "the header entry of %s is not an object", name);
    const char *it = obj, *val = NULL, *dtype = NULL, *shape = NULL, *offs = NULL;
    apip_span key;
    while (apip_jv_obj_next(&it, &key, &val)) {
        const char **slot = apip_jv_streq(key, "dtype")          ? &dtype
                            : apip_jv_streq(key, "shape")        ? &shape
                            : apip_jv_streq(key, "data_offsets") ? &offs
                                                                 : NULL;
        if (!slot) {
            char k[48];
            apip_jv_decode(key, k, sizeof k);
            return apip_st_fail(c, "tensor %s has an unknown header field \"%s\"", name, k);
        }
        if (*slot)
            return apip_st_fail(c, "tensor %s lists a header field twice", name);
        *slot = val;
    }
    if (!dtype || !shape || !offs)
        return apip_st_fail(c, "tensor %s lacks %s in the header", name,
                            !dtype   ? "dtype"
                            : !shape ? "shape"
                                     : "data_offsets");
    if (apip_jv_kind(dtype) != '"')
        return apip_st_fail(c, "tensor %s: dtype is not a string", name);
    apip_span ds = apip_jv_string(dtype);
    if (apip_jv_streq(ds, "F32"))
        t->dtype = 4;
    else if (apip_jv_streq(ds, "F16"))
        t->dtype = 2;
    else if (apip_jv_streq(ds, "BF16")) {
        t->dtype = 2;
        t->bf16 = true;
    } else {
        char d[24];
        apip_jv_decode(ds, d, sizeof d);
        return apip_st_fail(c, "tensor %s has dtype %s; only F32, F16 and BF16 are supported", name,
                            d);
    }
    if (apip_jv_kind(shape) != '[')
        return apip_st_fail(c, "tensor %s: shape is not an array", name);
    it = shape;
    while (apip_jv_arr_next(&it, &val)) {
        uint64_t d = 0;
        if (t->rank == 3)
            return apip_st_fail(c, "tensor %s has more than 3 dimensions", name);
        if (!parse_u64(val, &d) || d > SIZE_MAX / 4)
            return apip_st_fail(c, "tensor %s: shape holds something other than a dimension", name);
        t->dims[t->rank++] = (size_t)d;
    }
    if (apip_jv_kind(offs) != '[')
        return apip_st_fail(c, "tensor %s: data_offsets is not an array", name);
    it = offs;
    size_t n = 0;
    uint64_t o[2] = {0, 0};
    while (apip_jv_arr_next(&it, &val)) {
        if (n == 2 || !parse_u64(val, &o[n]))
            return apip_st_fail(c, "tensor %s: data_offsets must be two integers [begin, end]",
                                name);
        n++;
    }
    if (n != 2)
        return apip_st_fail(c, "tensor %s: data_offsets must be two integers [begin, end]", name);
    t->begin = o[0];
    t->end = o[1];
    t->present = true;
    return 0;
}

/* Reads __metadata__ (meta, a JSON value) into f: num_heads into f->h, add_zero_attn into
 * f->zero_attn ("true" or "false"; false when absent), and the values of the other keys attnd
 * knows (NULL when absent). Other keys are ignored. */
static int read_metadata(apip_st_ctx *c, const char *meta, apip_st_file *f) {
    if (apip_jv_kind(meta) != '{')
        return apip_st_fail(c, "__metadata__ is not an object");
    static const char *const keys[] = {"vocab",  "head_names",     "start_token", "text_split",
                                       "causal", "layer_norm_eps", "head_scores", "accuracy"};
    const char **vals[] = {&f->vocab_val,  &f->names_val, &f->start_val,  &f->split_val,
                           &f->causal_val, &f->eps_val,   &f->scores_val, &f->acc_val};
    const char *it = meta, *val = NULL;
    apip_span key;
    bool found = false;
    while (apip_jv_obj_next(&it, &key, &val)) {
        if (apip_jv_kind(val) != '"')
            return apip_st_fail(c, "__metadata__ values must be strings");
        const char **list = NULL;
        size_t which = 0;
        for (size_t i = 0; i < sizeof keys / sizeof keys[0] && !list; i++)
            if (apip_jv_streq(key, keys[i])) {
                list = vals[i];
                which = i;
            }
        if (list) {
            if (*list)
                return apip_st_fail(c, "__metadata__.%s appears twice", keys[which]);
            *list = val;
            continue;
        }
        if (apip_jv_streq(key, "add_zero_attn")) {
            apip_span z = apip_jv_string(val);
            if (!apip_jv_streq(z, "true") && !apip_jv_streq(z, "false"))
                return apip_st_fail(c, "__metadata__.add_zero_attn must be \"true\" or \"false\"");
            f->zero_attn = apip_jv_streq(z, "true");
            continue;
        }
        if (!apip_jv_streq(key, "num_heads"))
            continue;
        char s[24];
        size_t n = apip_jv_decode(apip_jv_string(val), s, sizeof s);
        uint64_t v = 0;
        bool digits = n > 0 && n <= 9;
        for (size_t i = 0; digits && i < n; i++) {
            digits = s[i] >= '0' && s[i] <= '9';
            v = v * 10 + (uint64_t)(s[i] - '0');
        }
        if (!digits || v == 0)
            return apip_st_fail(c, "__metadata__.num_heads must be a positive integer in a "
                                   "string, like \"8\"");
        f->h = (size_t)v;
        found = true;
    }
    if (!found)
        return apip_st_fail(c, "__metadata__ lacks num_heads (a string, like \"8\")");
    return 0;
}

static int cmp_begin(const void *a, const void *b) {
    const apip_st_tensor *x = *(const apip_st_tensor *const *)a,
                         *y = *(const apip_st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Byte ranges: inside the data, the size of the shape, covering it exactly. 0, or -1 with
 * c->err. */
static int check_ranges(apip_st_ctx *c, apip_st_file *f) {
    enum { MOST = APIP_T_COUNT + APIP_S_COUNT + APIP_MAX_LAYERS * APIP_L_COUNT };
    apip_st_tensor *order[MOST];
    size_t n = 0;
    char nm[96];
    for (size_t i = 0; i < MOST; i++) {
        apip_st_tensor *t = i < APIP_T_COUNT ? &f->t[i]
                            : i < APIP_T_COUNT + APIP_S_COUNT
                                ? &f->top[i - APIP_T_COUNT]
                                : &f->layer[0][0] + (i - APIP_T_COUNT - APIP_S_COUNT);
        if (!t->present)
            continue;
        const char *name = entry_name(f, t, nm, sizeof nm);
        size_t count = 1, bytes_needed = 0;
        for (size_t d = 0; d < t->rank; d++)
            if (!apip_mul(count, t->dims[d], &count))
                return apip_st_fail(c, "tensor %s is too large", name);
        if (!apip_mul(count, (size_t)t->dtype, &bytes_needed))
            return apip_st_fail(c, "tensor %s is too large", name);
        if (t->begin > t->end || t->end > f->data_len)
            return apip_st_fail(c,
                                "tensor %s has data_offsets [%llu, %llu] outside the %zu bytes "
                                "of data",
                                name, (unsigned long long)t->begin, (unsigned long long)t->end,
                                f->data_len);
        if (t->end - t->begin != bytes_needed)
            return apip_st_fail(c, "tensor %s spans %llu bytes, but its shape and dtype need %zu",
                                name, (unsigned long long)(t->end - t->begin), bytes_needed);
        order[n++] = t;
    }
    qsort(order, n, sizeof *order, cmp_begin);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = entry_name(f, order[i], nm, sizeof nm);
        if (order[i]->begin < at)
            return apip_st_fail(c, "tensor %s overlaps the tensor before it in the data", name);
        if (order[i]->begin > at)
            return apip_st_fail(c, "bytes %llu to %llu of the data belong to no tensor",
                                (unsigned long long)at, (unsigned long long)order[i]->begin);
        at = order[i]->end;
    }
    if (at != f->data_len)
        return apip_st_fail(c, "bytes %llu to %zu of the data belong to no tensor",
                            (unsigned long long)at, f->data_len);
    return 0;
}

int apip_st_read(apip_st_ctx *c, const uint8_t *bytes, size_t len, apip_st_file *f) {
    if (!bytes || len < 8)
        return apip_st_fail(c, "the file is %zu bytes, too short for a safetensors header", len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | bytes[i];
    if (hlen > len - 8)
        return apip_st_fail(c, "the header length %llu runs past the end of the file (%zu bytes)",
                            (unsigned long long)hlen, len);
    if (hlen > MAX_HEADER)
        return apip_st_fail(c, "the header length %llu is over the limit of %u bytes",
                            (unsigned long long)hlen, MAX_HEADER);
    const char *hdr = (const char *)bytes + 8;
    api_error jerr = {0};
    if (apip_json_check(hdr, (size_t)hlen, "the header", NULL, &jerr))
        return apip_st_fail(c, "%s", jerr.message);

    bool have_meta = false;
    const char *it = hdr, *val = NULL;
    apip_span key;
    char k[96], nm[96];
    while (apip_jv_obj_next(&it, &key, &val)) {
        if (apip_jv_streq(key, "__metadata__")) {
            if (have_meta)
                return apip_st_fail(c, "__metadata__ appears twice");
            have_meta = true;
            if (read_metadata(c, val, f))
                return -1;
            continue;
        }
        size_t n = apip_jv_decode(key, k, sizeof k);
        apip_st_tensor *t = n < sizeof k ? slot_of(f, k, n) : NULL;
        if (!t) {
            k[63] = '\0';
            return apip_st_fail(c,
                                "unexpected tensor \"%s\"; expected nn.MultiheadAttention "
                                "state_dict names (in_proj_weight, out_proj.weight, ...), "
                                "token_embeddings or position_embeddings, or a model of layers' "
                                "layers.0.self_attn.in_proj_weight, ...",
                                k);
        }
        const char *name = entry_name(f, t, nm, sizeof nm);
        if (t->present)
            return apip_st_fail(c, "tensor %s appears twice", name);
        if (read_entry(c, name, val, t))
            return -1;
    }
    if (!have_meta)
        return apip_st_fail(c, "the header lacks __metadata__ with num_heads");
    f->data = bytes + 8 + hlen;
    f->data_len = len - 8 - (size_t)hlen;
    return check_ranges(c, f);
}

/* ---- The data -------------------------------------------------------------------------------- */

static float half_to_float(uint16_t h) {
    uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    float v = exp == 0 ? ldexpf((float)man, -24) : ldexpf((float)(man | 0x400), (int)exp - 25);
    return (h & 0x8000) ? -v : v;
}

int apip_st_convert(apip_st_ctx *c, const char *name, const apip_st_tensor *t, const uint8_t *data,
                    float *dst) {
    const uint8_t *p = data + t->begin;
    size_t count = (size_t)(t->end - t->begin) / (size_t)t->dtype;
    for (size_t i = 0; i < count; i++) {
        uint32_t bits;
        if (t->dtype == 4) {
            const uint8_t *b = p + 4 * i;
            bits =
                (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        } else {
            uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
            if (t->bf16) {
                bits = (uint32_t)h << 16;
            } else {
                if (((h >> 10) & 0x1F) == 0x1F)
                    return apip_st_fail(c, "tensor %s holds a non-finite value at element %zu",
                                        name, i);
                float v = half_to_float(h);
                memcpy(&bits, &v, sizeof bits);
            }
        }
        if ((bits & 0x7F800000u) == 0x7F800000u)
            return apip_st_fail(c, "tensor %s holds a non-finite value at element %zu", name, i);
        memcpy(dst + i, &bits, sizeof bits);
    }
    return 0;
}

/* ---- The metadata's lists -------------------------------------------------------------------- */

/* Reads one list of __metadata__ (val: its JSON string) into *out. */
static int read_list(apip_st_ctx *c, const char *val, const char *what, int kind,
                     apip_strlist **out) {
    apip_span raw = apip_jv_string(val);
    size_t cap = (size_t)(raw.e - raw.p) + 1; /* decoding never makes text longer */
    char *text = malloc(cap);
    if (!text)
        return api_fail(c->err, 500, "out_of_memory", NULL, "%s: out of memory reading %s",
                        c->label, what);
    size_t n = apip_jv_decode(raw, text, cap);
    char msg[200];
    *out = apip_strlist_parse(text, n, what, kind, msg, sizeof msg);
    free(text);
    if (!*out && !strncmp(msg, "out of memory", 13))
        return api_fail(c->err, 500, "out_of_memory", NULL, "%s: %s", c->label, msg);
    return *out ? 0 : apip_st_fail(c, "%s", msg);
}

/* The kind of vocabulary __metadata__.text_split (val: its JSON string, NULL when absent) asks
 * for: APIP_LIST_TOKENS or APIP_LIST_WORDS, or -1 with c->err. */
static int read_split(apip_st_ctx *c, const char *val, bool vocab) {
    if (!val)
        return APIP_LIST_TOKENS;
    if (!vocab)
        return apip_st_fail(c, "__metadata__.text_split needs __metadata__.vocab, the list of "
                               "tokens text is split into");
    apip_span v = apip_jv_string(val);
    if (apip_jv_streq(v, "longest_match"))
        return APIP_LIST_TOKENS;
    if (apip_jv_streq(v, "words"))
        return APIP_LIST_WORDS;
    return apip_st_fail(c, "__metadata__.text_split must be \"longest_match\" (the default) or "
                           "\"words\" (Latin words kept whole)");
}

/* The start token of __metadata__ (val: its JSON string) in vocab (NULL when the file has
 * none): true with *id, or false with c->err. */
static bool read_start(apip_st_ctx *c, const char *val, const apip_strlist *vocab, uint32_t *id) {
    char tok[APIP_TOKEN_MAX_BYTES + 1], shown[80];
    size_t n = apip_jv_decode(apip_jv_string(val), tok, sizeof tok);
    if (!vocab)
        return apip_st_fail(c, "__metadata__.start_token needs __metadata__.vocab, the list of "
                               "tokens it is one of"),
               false;
    if (n < sizeof tok && apip_vocab_find(vocab, tok, n, id))
        return true;
    apip_word_quote(shown, sizeof shown, tok, n < sizeof tok ? n : strlen(tok));
    return apip_st_fail(c, "__metadata__.start_token %s is not a token of __metadata__.vocab",
                        shown),
           false;
}

int apip_st_lists(apip_st_ctx *c, const apip_st_file *f, apip_strlist **vocab, apip_strlist **names,
                  uint32_t *start) {
    *vocab = *names = NULL;
    int kind = read_split(c, f->split_val, f->vocab_val != NULL);
    if (kind < 0)
        return -1;
    if (f->vocab_val && read_list(c, f->vocab_val, "__metadata__.vocab", kind, vocab))
        return -1;
    if (f->names_val &&
        read_list(c, f->names_val, "__metadata__.head_names", APIP_LIST_NAMES, names))
        goto err;
    if (*names && (*names)->n != f->h) {
        apip_st_fail(c, "__metadata__.head_names lists %zu names for num_heads=%zu", (*names)->n,
                     f->h);
        goto err;
    }
    if (f->start_val && !read_start(c, f->start_val, *vocab, start))
        goto err;
    return 0;
err:
    apip_strlist_free(*vocab);
    apip_strlist_free(*names);
    *vocab = *names = NULL;
    return -1;
}
