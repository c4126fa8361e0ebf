/* safetensors.c - loads nn.MultiheadAttention weights from safetensors files: an 8-byte
 * little-endian header length, a JSON header naming each tensor's dtype, shape and byte range,
 * then the raw little-endian data. F32, F16 and BF16 are converted to float32.
 *
 * The input is untrusted (a fuzzer feeds this loader): every length and offset is checked
 * before use, nothing is read outside the given bytes, and any problem is one message that
 * names the file and what is wrong. Like the reference implementation, the tensors must cover
 * the data exactly: no overlaps, no gaps, nothing after the last one.
 *
 * A model that takes words carries a vocabulary: __metadata__ "vocab", a JSON list of token
 * strings held in one metadata string, with the tensors token_embeddings (V, E) and optionally
 * position_embeddings (P, E); __metadata__ "head_names" (a JSON list likewise) names the heads,
 * and __metadata__ "start_token", one token of the vocabulary, is put before the words of every
 * request (unless it says "add_special_tokens": false). __metadata__ "text_split" says how text
 * is split: "longest_match" (the default) or "words", which keeps Latin words whole (vocab.c).
 *
 * A module made with add_bias_kv has bias_k and bias_v (1, 1, E) in its state_dict; one made with
 * add_zero_attn cannot say so there, so its file says __metadata__ "add_zero_attn": "true".
 *
 * Legend: E embedding width, kdim/vdim the key and value widths, V vocabulary size, P
 * positions. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models.h"

#define MAX_HEADER (100u << 20) /* the reference implementation's limit */

/* The tensors of a file: the state_dict's (APIP_P_*), then the vocabulary's. */
enum { T_TOK = APIP_P_COUNT, T_POS, T_COUNT };

/* The name of tensor i (APIP_P_* or T_*). */
static const char *tensor_name(int i) {
    return i < APIP_P_COUNT ? apip_param_names[i]
           : i == T_TOK     ? "token_embeddings"
                            : "position_embeddings";
}

typedef struct st_tensor {
    bool present;
    int dtype; /* bytes per element: 4 (F32), 2 (F16 or BF16) */
    bool bf16;
    size_t rank, dims[3];
    uint64_t begin, end; /* byte range within the data section */
} st_tensor;

typedef struct st_ctx {
    const char *label; /* the file (or model) named in messages */
    api_error *err;
} st_ctx;

__attribute__((format(printf, 2, 3))) static int st_fail(st_ctx *c, const char *fmt, ...) {
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

/* Reads one tensor entry {"dtype", "shape", "data_offsets"}. */
static int read_entry(st_ctx *c, const char *name, const char *obj, st_tensor *t) {
    if (apip_jv_kind(obj) != '{')
        return st_fail(c, "the header entry of %s is not an object", name);
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
            return st_fail(c, "tensor %s has an unknown header field \"%s\"", name, k);
        }
        if (*slot)
            return st_fail(c, "tensor %s lists a header field twice", name);
        *slot = val;
    }
    if (!dtype || !shape || !offs)
        return st_fail(c, "tensor %s lacks %s in the header", name,
                       !dtype   ? "dtype"
                       : !shape ? "shape"
                                : "data_offsets");
    if (apip_jv_kind(dtype) != '"')
        return st_fail(c, "tensor %s: dtype is not a string", name);
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
        return st_fail(c, "tensor %s has dtype %s; only F32, F16 and BF16 are supported", name, d);
    }
    if (apip_jv_kind(shape) != '[')
        return st_fail(c, "tensor %s: shape is not an array", name);
    it = shape;
    while (apip_jv_arr_next(&it, &val)) {
        uint64_t d = 0;
        if (t->rank == 3)
            return st_fail(c, "tensor %s has more than 3 dimensions", name);
        if (!parse_u64(val, &d) || d > SIZE_MAX / 4)
            return st_fail(c, "tensor %s: shape holds something other than a dimension", name);
        t->dims[t->rank++] = (size_t)d;
    }
    if (apip_jv_kind(offs) != '[')
        return st_fail(c, "tensor %s: data_offsets is not an array", name);
    it = offs;
    size_t n = 0;
    uint64_t o[2] = {0, 0};
    while (apip_jv_arr_next(&it, &val)) {
        if (n == 2 || !parse_u64(val, &o[n]))
            return st_fail(c, "tensor %s: data_offsets must be two integers [begin, end]", name);
        n++;
    }
    if (n != 2)
        return st_fail(c, "tensor %s: data_offsets must be two integers [begin, end]", name);
    t->begin = o[0];
    t->end = o[1];
    t->present = true;
    return 0;
}

/* Reads num_heads into *h, add_zero_attn into *zero_attn ("true" or "false"; false when
 * absent), and the values of vocab, head_names, start_token and text_split (NULL when
 * absent). */
static int read_num_heads(st_ctx *c, const char *meta, size_t *h, bool *zero_attn,
                          const char **vocab, const char **names, const char **start,
                          const char **split) {
    if (apip_jv_kind(meta) != '{')
        return st_fail(c, "__metadata__ is not an object");
    const char *it = meta, *val = NULL;
    apip_span key;
    bool found = false;
    while (apip_jv_obj_next(&it, &key, &val)) {
        if (apip_jv_kind(val) != '"')
            return st_fail(c, "__metadata__ values must be strings");
        const char **list = apip_jv_streq(key, "vocab")         ? vocab
                            : apip_jv_streq(key, "head_names")  ? names
                            : apip_jv_streq(key, "start_token") ? start
                            : apip_jv_streq(key, "text_split")  ? split
                                                                : NULL;
        if (list) {
            if (*list)
                return st_fail(c, "__metadata__.%s appears twice",
                               list == vocab   ? "vocab"
                               : list == names ? "head_names"
                               : list == start ? "start_token"
                                               : "text_split");
            *list = val;
            continue;
        }
        if (apip_jv_streq(key, "add_zero_attn")) {
            apip_span z = apip_jv_string(val);
            if (!apip_jv_streq(z, "true") && !apip_jv_streq(z, "false"))
                return st_fail(c, "__metadata__.add_zero_attn must be \"true\" or \"false\"");
            *zero_attn = apip_jv_streq(z, "true");
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
            return st_fail(c, "__metadata__.num_heads must be a positive integer in a string, "
                              "like \"8\"");
        *h = (size_t)v;
        found = true;
    }
    if (!found)
        return st_fail(c, "__metadata__ lacks num_heads (a string, like \"8\")");
    return 0;
}

static int cmp_begin(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static float half_to_float(uint16_t h) {
    uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    float v = exp == 0 ? ldexpf((float)man, -24) : ldexpf((float)(man | 0x400), (int)exp - 25);
    return (h & 0x8000) ? -v : v;
}

/* Converts tensor t (count elements) from the data section to float32 into dst. */
static int convert(st_ctx *c, const char *name, const st_tensor *t, const uint8_t *data,
                   size_t count, float *dst) {
    const uint8_t *p = data + t->begin;
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
                    return st_fail(c, "tensor %s holds a non-finite value at element %zu", name, i);
                float v = half_to_float(h);
                memcpy(&bits, &v, sizeof bits);
            }
        }
        if ((bits & 0x7F800000u) == 0x7F800000u)
            return st_fail(c, "tensor %s holds a non-finite value at element %zu", name, i);
        memcpy(dst + i, &bits, sizeof bits);
    }
    return 0;
}

/* Reads one list of __metadata__ (val: its JSON string) into *out. */
static int read_list(st_ctx *c, const char *val, const char *what, int kind, apip_strlist **out) {
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
    return *out ? 0 : st_fail(c, "%s", msg);
}

/* The kind of vocabulary __metadata__.text_split (val: its JSON string, NULL when absent) asks
 * for: APIP_LIST_TOKENS or APIP_LIST_WORDS, or -1 with c->err. */
static int read_split(st_ctx *c, const char *val, bool vocab) {
    if (!val)
        return APIP_LIST_TOKENS;
    if (!vocab)
        return st_fail(c, "__metadata__.text_split needs __metadata__.vocab, the list of tokens "
                          "text is split into");
    apip_span v = apip_jv_string(val);
    if (apip_jv_streq(v, "longest_match"))
        return APIP_LIST_TOKENS;
    if (apip_jv_streq(v, "words"))
        return APIP_LIST_WORDS;
    return st_fail(c, "__metadata__.text_split must be \"longest_match\" (the default) or "
                      "\"words\" (Latin words kept whole)");
}

/* The lists vocab and head_names of __metadata__ (values vocab_val and names_val, NULL when
 * absent; the vocabulary of kind vocab_kind): *vocab and *names, or -1 with nothing allocated.
 * There must be h head names. */
static int read_lists(st_ctx *c, const char *vocab_val, int vocab_kind, const char *names_val,
                      size_t h, apip_strlist **vocab, apip_strlist **names) {
    *vocab = *names = NULL;
    if (vocab_val && read_list(c, vocab_val, "__metadata__.vocab", vocab_kind, vocab))
        return -1;
    if (names_val && read_list(c, names_val, "__metadata__.head_names", APIP_LIST_NAMES, names)) {
        apip_strlist_free(*vocab);
        return -1;
    }
    if (*names && (*names)->n != h) {
        st_fail(c, "__metadata__.head_names lists %zu names for num_heads=%zu", (*names)->n, h);
        apip_strlist_free(*vocab);
        apip_strlist_free(*names);
        return -1;
    }
    return 0;
}

/* The start token of __metadata__ (val: its JSON string) in vocab (NULL when the file has
 * none): true with *id, or false with c->err. */
static bool read_start(st_ctx *c, const char *val, const apip_strlist *vocab, uint32_t *id) {
    char tok[APIP_TOKEN_MAX_BYTES + 1], shown[80];
    size_t n = apip_jv_decode(apip_jv_string(val), tok, sizeof tok);
    if (!vocab)
        return st_fail(c, "__metadata__.start_token needs __metadata__.vocab, the list of tokens "
                          "it is one of"),
               false;
    if (n < sizeof tok && apip_vocab_find(vocab, tok, n, id))
        return true;
    apip_word_quote(shown, sizeof shown, tok, n < sizeof tok ? n : strlen(tok));
    return st_fail(c, "__metadata__.start_token %s is not a token of __metadata__.vocab", shown),
           false;
}

/* What a file's header says, and where its data is. */
typedef struct st_file {
    st_tensor t[T_COUNT];              /* by APIP_P_* and T_* */
    size_t h;                          /* num_heads */
    bool zero_attn;                    /* __metadata__.add_zero_attn */
    const char *vocab_val, *names_val; /* the metadata lists' JSON values; NULL when absent */
    const char *start_val;             /* __metadata__.start_token's JSON value; NULL if absent */
    const char *split_val;             /* __metadata__.text_split's JSON value; NULL if absent */
    const uint8_t *data;               /* the data section, data_len bytes */
    size_t data_len;
} st_file;

/* Reads the header of the file bytes (len): its length, its JSON, every tensor entry and
 * __metadata__ into *f. 0, or -1 with c->err. */
static int read_header(st_ctx *c, const uint8_t *bytes, size_t len, st_file *f) {
    if (!bytes || len < 8)
        return st_fail(c, "the file is %zu bytes, too short for a safetensors header", len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | bytes[i];
    if (hlen > len - 8)
        return st_fail(c, "the header length %llu runs past the end of the file (%zu bytes)",
                       (unsigned long long)hlen, len);
    if (hlen > MAX_HEADER)
        return st_fail(c, "the header length %llu is over the limit of %u bytes",
                       (unsigned long long)hlen, MAX_HEADER);
    const char *hdr = (const char *)bytes + 8;
    api_error jerr = {0};
    if (apip_json_check(hdr, (size_t)hlen, "the header", NULL, &jerr))
        return st_fail(c, "%s", jerr.message);

    st_tensor *t = f->t;
    bool have_meta = false;
    const char *it = hdr, *val = NULL;
    apip_span key;
    while (apip_jv_obj_next(&it, &key, &val)) {
        if (apip_jv_streq(key, "__metadata__")) {
            if (have_meta)
                return st_fail(c, "__metadata__ appears twice");
            have_meta = true;
            if (read_num_heads(c, val, &f->h, &f->zero_attn, &f->vocab_val, &f->names_val,
                               &f->start_val, &f->split_val))
                return -1;
            continue;
        }
        int which = -1;
        for (int i = 0; i < T_COUNT; i++)
            if (apip_jv_streq(key, tensor_name(i)))
                which = i;
        if (which < 0) {
            char k[64];
            apip_jv_decode(key, k, sizeof k);
            return st_fail(c,
                           "unexpected tensor \"%s\"; expected nn.MultiheadAttention state_dict "
                           "names (in_proj_weight, out_proj.weight, ...), token_embeddings or "
                           "position_embeddings",
                           k);
        }
        if (t[which].present)
            return st_fail(c, "tensor %s appears twice", tensor_name(which));
        if (read_entry(c, tensor_name(which), val, &t[which]))
            return -1;
    }
    if (!have_meta)
        return st_fail(c, "the header lacks __metadata__ with num_heads");
    f->data = bytes + 8 + hlen;
    f->data_len = len - 8 - (size_t)hlen;
    return 0;
}

/* Byte ranges: inside the data, the size of the shape, covering it exactly. 0, or -1 with
 * c->err. */
static int check_ranges(st_ctx *c, st_file *f) {
    st_tensor *t = f->t;
    const size_t data_len = f->data_len;
    st_tensor *order[T_COUNT];
    size_t n = 0;
    for (int i = 0; i < T_COUNT; i++) {
        if (!t[i].present)
            continue;
        size_t count = 1, bytes_needed = 0;
        for (size_t d = 0; d < t[i].rank; d++)
            if (!apip_mul(count, t[i].dims[d], &count))
                return st_fail(c, "tensor %s is too large", tensor_name(i));
        if (!apip_mul(count, (size_t)t[i].dtype, &bytes_needed))
            return st_fail(c, "tensor %s is too large", tensor_name(i));
        if (t[i].begin > t[i].end || t[i].end > data_len)
            return st_fail(c,
                           "tensor %s has data_offsets [%llu, %llu] outside the %zu bytes of "
                           "data",
                           tensor_name(i), (unsigned long long)t[i].begin,
                           (unsigned long long)t[i].end, data_len);
        if (t[i].end - t[i].begin != bytes_needed)
            return st_fail(c, "tensor %s spans %llu bytes, but its shape and dtype need %zu",
                           tensor_name(i), (unsigned long long)(t[i].end - t[i].begin),
                           bytes_needed);
        order[n++] = &t[i];
    }
    qsort(order, n, sizeof *order, cmp_begin);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const char *nm = tensor_name((int)(order[i] - t));
        if (order[i]->begin < at)
            return st_fail(c, "tensor %s overlaps the tensor before it in the data", nm);
        if (order[i]->begin > at)
            return st_fail(c, "bytes %llu to %llu of the data belong to no tensor",
                           (unsigned long long)at, (unsigned long long)order[i]->begin);
        at = order[i]->end;
    }
    if (at != data_len)
        return st_fail(c, "bytes %llu to %zu of the data belong to no tensor",
                       (unsigned long long)at, data_len);
    return 0;
}

/* The widths of the projections: E from out_proj.weight, kdim and vdim from k_proj_weight and
 * v_proj_weight (E when packed, with in_proj_weight). 0, or -1 with c->err. */
static int projection_dims(st_ctx *c, const st_file *f, size_t *e, size_t *kdim, size_t *vdim,
                           bool *packed) {
    const st_tensor *t = f->t;
    if (!t[APIP_P_OUT_W].present)
        return st_fail(c, "tensor out_proj.weight is missing");
    *packed = t[APIP_P_IN_W].present;
    bool split = t[APIP_P_Q_W].present || t[APIP_P_K_W].present || t[APIP_P_V_W].present;
    if (*packed && split)
        return st_fail(c, "give in_proj_weight or q/k/v_proj_weight, not both");
    if (!*packed && !split)
        return st_fail(c, "tensor in_proj_weight (or q/k/v_proj_weight) is missing");
    for (int i = APIP_P_Q_W; split && i <= APIP_P_V_W; i++)
        if (!t[i].present)
            return st_fail(c, "tensor %s is missing", tensor_name(i));
    if (t[APIP_P_BIAS_K].present != t[APIP_P_BIAS_V].present)
        return st_fail(c, "tensor %s is missing: add_bias_kv gives bias_k and bias_v together",
                       tensor_name(t[APIP_P_BIAS_K].present ? APIP_P_BIAS_V : APIP_P_BIAS_K));
    const st_tensor *ow = &t[APIP_P_OUT_W];
    if (ow->rank != 2 || ow->dims[0] != ow->dims[1] || ow->dims[0] == 0)
        return st_fail(c, "tensor out_proj.weight must be (E, E) with E >= 1");
    *e = *kdim = *vdim = ow->dims[0];
    if (split) {
        *kdim = t[APIP_P_K_W].rank == 2 ? t[APIP_P_K_W].dims[1] : 0;
        *vdim = t[APIP_P_V_W].rank == 2 ? t[APIP_P_V_W].dims[1] : 0;
    }
    return 0;
}

/* The vocabulary's tables against its list (vocab, NULL when none), then every tensor's shape
 * against E, kdim, vdim and the vocabulary, and E against num_heads; *npos gets the rows of
 * position_embeddings (0 when absent). 0, or -1 with c->err. */
static int check_shapes(st_ctx *c, const st_file *f, size_t e, size_t kdim, size_t vdim,
                        const apip_strlist *vocab, size_t *npos) {
    const st_tensor *t = f->t;
    size_t v = vocab ? vocab->n : 0;
    *npos = t[T_POS].rank == 2 ? t[T_POS].dims[0] : 0;
    const char *problem = vocab && !t[T_TOK].present ? "__metadata__.vocab needs the tensor "
                                                       "token_embeddings (V, E)"
                          : !vocab && t[T_TOK].present
                              ? "the tensor token_embeddings needs __metadata__.vocab, the list of "
                                "its tokens"
                          : t[T_POS].present && !t[T_TOK].present
                              ? "the tensor position_embeddings needs token_embeddings and "
                                "__metadata__.vocab"
                          : vocab && (kdim != e || vdim != e)
                              ? "a model with a vocabulary does self-attention: kdim and vdim must "
                                "equal E"
                              : NULL;
    if (problem || (t[T_POS].present && *npos == 0))
        return st_fail(c, "%s",
                       problem ? problem : "tensor position_embeddings must be (P, E), P >= 1");
    const size_t want[T_COUNT][3] = {{3 * e, e}, {3 * e},   {e, e},    {e},    {e, e},    {e, kdim},
                                     {e, vdim},  {1, 1, e}, {1, 1, e}, {v, e}, {*npos, e}};
    const size_t want_rank[T_COUNT] = {2, 1, 2, 1, 2, 2, 2, 3, 3, 2, 2};
    for (int i = 0; i < T_COUNT; i++) {
        if (!t[i].present)
            continue;
        size_t rank = want_rank[i];
        bool fits = t[i].rank == rank;
        for (size_t k = 0; fits && k < rank; k++)
            fits = t[i].dims[k] == want[i][k] && (k == 0 || want[i][k] != 0);
        if (!fits) {
            char got[64], exp[64];
            apip_dims_str(got, sizeof got, t[i].dims, t[i].rank);
            apip_dims_str(exp, sizeof exp, want[i], rank);
            if (i == T_TOK)
                return st_fail(c,
                               "tensor %s has shape %s; with E=%zu and the %zu tokens of "
                               "__metadata__.vocab it must be %s",
                               tensor_name(i), got, e, v, exp);
            return st_fail(c, "tensor %s has shape %s; with E=%zu it must be %s", tensor_name(i),
                           got, e, exp);
        }
    }
    if (e % f->h != 0)
        return st_fail(c, "the embedding width E=%zu is not divisible by num_heads=%zu", e, f->h);
    return 0;
}

/* Gives m its head names and vocabulary (taking names and vocab) and converts every tensor of
 * the file into it. m, or NULL with c->err (m destroyed). */
static api_model *fill_model(st_ctx *c, api_model *m, const st_file *f, apip_strlist *vocab,
                             apip_strlist *names, size_t npos) {
    const st_tensor *t = f->t;
    const attn_mha_params *pp = apip_model_params(m);
    float *tok = NULL, *pos = NULL;
    if (names)
        apip_model_set_head_names(m, names);
    if (vocab && apip_model_set_vocab(m, vocab, npos, &tok, &pos, c->err)) {
        api_model_destroy(m);
        return NULL;
    }
    float *dst[T_COUNT] = {(float *)pp->in_proj_weight,
                           (float *)pp->in_proj_bias,
                           (float *)pp->out_proj_weight,
                           (float *)pp->out_proj_bias,
                           (float *)pp->q_proj_weight,
                           (float *)pp->k_proj_weight,
                           (float *)pp->v_proj_weight,
                           (float *)pp->bias_k,
                           (float *)pp->bias_v,
                           tok,
                           pos};
    for (int i = 0; i < T_COUNT; i++) {
        if (!t[i].present)
            continue;
        size_t count = (size_t)(t[i].end - t[i].begin) / (size_t)t[i].dtype;
        if (convert(c, tensor_name(i), &t[i], f->data, count, dst[i])) {
            api_model_destroy(m);
            return NULL;
        }
    }
    return m;
}

static api_model *parse(const char *label, const char *name, const uint8_t *bytes, size_t len,
                        api_error *err) {
    st_ctx cx = {.label = label, .err = err}, *c = &cx;
    st_file f = {0};
    size_t e = 0, kdim = 0, vdim = 0, npos = 0;
    bool packed = false;
    if (read_header(c, bytes, len, &f) || check_ranges(c, &f) ||
        projection_dims(c, &f, &e, &kdim, &vdim, &packed))
        return NULL;
    /* The vocabulary: its lists first, then the shapes of its tables. */
    apip_strlist *vocab = NULL, *names = NULL;
    uint32_t start = 0;
    int kind = read_split(c, f.split_val, f.vocab_val != NULL);
    if (kind < 0 || read_lists(c, f.vocab_val, kind, f.names_val, f.h, &vocab, &names))
        return NULL;
    api_model *m = NULL;
    if ((!f.start_val || read_start(c, f.start_val, vocab, &start)) &&
        !check_shapes(c, &f, e, kdim, vdim, vocab, &npos))
        m = apip_model_alloc(name, "file", e, f.h, kdim, vdim, packed, f.t[APIP_P_IN_B].present,
                             f.t[APIP_P_OUT_B].present, f.t[APIP_P_BIAS_K].present, err);
    if (!m) {
        apip_strlist_free(vocab);
        apip_strlist_free(names);
        return NULL;
    }
    m = fill_model(c, m, &f, vocab, names, npos);
    if (m && f.start_val)
        apip_model_set_start_token(m, start);
    if (m)
        apip_model_set_zero_attn(m, f.zero_attn);
    return m;
}

api_model *api_model_from_safetensors(const char *name, const uint8_t *bytes, size_t len,
                                      api_error *err) {
    if (!name)
        return api_fail(err, 400, "invalid_model", NULL, "a model needs a name"), NULL;
    return parse(name, name, bytes, len, err);
}

/* Refuses path, whose mode says it is not a regular file: "PATH is a FIFO, not a regular file".
 * Returns -1. */
static int not_regular(const char *path, mode_t mode, api_error *err) {
    const char *kind = S_ISDIR(mode)    ? "a directory"
                       : S_ISFIFO(mode) ? "a FIFO"
                       : S_ISSOCK(mode) ? "a socket"
                       : S_ISCHR(mode)  ? "a character device"
                       : S_ISBLK(mode)  ? "a block device"
                                        : "a file of an unknown kind";
    struct stat lst;
    bool link = lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode);
    return api_fail(err, 400, "invalid_model", NULL, "%s is %s%s, not a regular file", path,
                    link ? "a symlink to " : "", kind);
}

api_model *api_model_load_file(const char *path, api_error *err) {
    if (!path)
        return api_fail(err, 400, "invalid_model", NULL, "no model file given"), NULL;
    /* The name is the file's stem: its base name without the last extension. */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t nlen = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    char name[256];
    if (nlen == 0 || nlen >= sizeof name)
        return api_fail(err, 400, "invalid_model", NULL,
                        "%s: the file name makes no usable model name", path),
               NULL;
    memcpy(name, base, nlen);
    name[nlen] = '\0';

    /* Only a regular file (or a symlink to one) is read. The path is looked at first, so that
     * nothing else is even opened (opening a device can act on it; opening a FIFO releases a
     * writer waiting on it); then the descriptor, opened without blocking (a FIFO would wait
     * for a writer), is what decides, in case the path changed in between. */
    struct stat st;
    if (stat(path, &st) != 0)
        return api_fail(err, 500, "io_error", NULL, "%s: cannot open: %s", path, strerror(errno)),
               NULL;
    if (!S_ISREG(st.st_mode))
        return not_regular(path, st.st_mode, err), NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return api_fail(err, 500, "io_error", NULL, "%s: cannot open: %s", path, strerror(errno)),
               NULL;
    uint8_t *bytes = NULL;
    api_model *m = NULL;
    size_t size = 0, got = 0;
    if (fstat(fd, &st) != 0)
        goto io;
    if (!S_ISREG(st.st_mode)) {
        not_regular(path, st.st_mode, err);
        goto done;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
        goto io;
    if ((uintmax_t)st.st_size > SIZE_MAX - 1) {
        api_fail(err, 500, "out_of_memory", NULL, "%s: out of memory reading %jd bytes", path,
                 (intmax_t)st.st_size);
        goto done;
    }
    size = (size_t)st.st_size;
    bytes = malloc(size ? size : 1);
    if (!bytes) {
        api_fail(err, 500, "out_of_memory", NULL, "%s: out of memory reading %zu bytes", path,
                 size);
        goto done;
    }
    while (got < size) {
        ssize_t r = read(fd, bytes + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = 0; /* the file shrank */
            goto io;
        }
        got += (size_t)r;
    }
    m = parse(path, name, bytes, size, err);
    goto done;
io:
    api_fail(err, 500, "io_error", NULL, "%s: cannot read: %s", path,
             errno ? strerror(errno) : "short read");
done:
    free(bytes);
    close(fd);
    return m;
}
