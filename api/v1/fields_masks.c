/* fields_masks.c - the masks and options of a request, for fields.c: key lengths and key masks,
 * attention masks and biases (and PyTorch's key_padding_mask, bool or float, and attn_mask),
 * causal, PyTorch's add_zero_attn and dropout, heads, need_weights, weights_top_k, encoding and
 * trace, each checked against the shapes fields.c and fields_inputs.c have learnt.
 *
 * Legend: N batch, L query length, S key length (S' with the keys appended after the
 * projections), H heads, K the top-k count. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "v1.h"
#include "request.h"

/* 400 invalid_field naming field, with a printf-style message; returns -1 (api_fail). */
#define bad(r, field, ...) api_fail((r)->err, 400, "invalid_field", (field), __VA_ARGS__)

/* ---- Masks and options -------------------------------------------------------------------- */

/* attn_mask or attn_bias: (L, S), (Mn, L, S) or (Mn, Mh, L, S) with Mn in {1, N}, Mh in
 * {1, H}; for SDPA with leading dims (H), (L, S) or (Mh, L, S). */
static int cell_mask(apip_req *r, int field, apip_tensor_in *t, size_t *mn, size_t *mh) {
    const char *name = r->names[field];
    if (apip_fields_probe(r, t, name, r->f[field], 4))
        return -1;
    size_t lead_q = r->op == API_OP_SDPA ? r->rank - 2 : 2; /* attention: always (N, H) */
    char sh[96], want[160];
    apip_fields_shape_of(sh, sizeof sh, t);
    if (r->op == API_OP_SDPA && lead_q == 0)
        snprintf(want, sizeof want, "(L, S) = (%zu, %zu)", r->l, r->s);
    else if (r->op == API_OP_SDPA && lead_q == 1)
        snprintf(want, sizeof want, "(L, S) or (H, L, S) = (%zu, %zu, %zu)", r->h, r->l, r->s);
    else
        snprintf(want, sizeof want,
                 "(L, S), (N, L, S) or (N, H, L, S) = (%zu, %zu, %zu, %zu) (a leading extent "
                 "may be 1)",
                 r->n, r->h, r->l, r->s);
    bool ok = t->rank >= 2 && t->dims[t->rank - 2] == r->l && t->dims[t->rank - 1] == r->s;
    *mn = *mh = 1;
    if (ok && t->rank == 3 && lead_q == 1) {
        *mh = t->dims[0];
        ok = *mh == 1 || *mh == r->h;
    } else if (ok && t->rank == 3 && lead_q == 2) {
        *mn = t->dims[0];
        ok = *mn == 1 || *mn == r->n;
    } else if (ok && t->rank == 4 && lead_q == 2) {
        *mn = t->dims[0];
        *mh = t->dims[1];
        ok = (*mn == 1 || *mn == r->n) && (*mh == 1 || *mh == r->h);
    } else if (t->rank != 2) {
        ok = false;
    }
    if (!ok)
        return bad(r, name, "%s has shape %s; it must be %s", name, sh, want);
    return 0;
}

/* torch_attn_mask: nn.MultiheadAttention's shapes, (L, S) or (N*H, L, S) (batch element n's
 * head h at n*H + h; for a rank-2 query N = 1, so (H, L, S)), read as attn_mask's (L, S) or
 * (N, H, L, S): the same bytes. */
static int torch_cell_mask(apip_req *r) {
    const char *name = "torch_attn_mask";
    apip_tensor_in *t = &r->am;
    if (apip_fields_probe(r, t, name, r->f[APIP_F_TORCH_ATTN_MASK], 3))
        return -1;
    char sh[96];
    apip_fields_shape_of(sh, sizeof sh, t);
    bool ok = t->rank >= 2 && t->dims[t->rank - 2] == r->l && t->dims[t->rank - 1] == r->s &&
              (t->rank == 2 || t->dims[0] == r->n * r->h);
    if (!ok)
        return bad(r, name,
                   "torch_attn_mask has shape %s; as nn.MultiheadAttention's attn_mask it must be "
                   "(L, S) = (%zu, %zu) or (N*num_heads, L, S) = (%zu, %zu, %zu)",
                   sh, r->l, r->s, r->n * r->h, r->l, r->s);
    r->am_n = t->rank == 3 ? r->n : 1;
    r->am_h = t->rank == 3 ? r->h : 1;
    r->am_torch = true;
    return 0;
}

/* key_lengths (value v): N integers from 0 to S, in a JSON array or (given->key_lengths) raw
 * int32. n_is says how N follows from the query's shape, for messages. 0, or -1 with r->err. */
static int key_lengths_field(apip_req *r, const char *v, const char *n_is) {
    if (r->given && r->given->key_lengths) {
        /* Raw int32 values. */
        const uint8_t *b = r->given->key_lengths;
        if (r->given->n_key_lengths != r->n)
            return bad(r, "key_lengths", "key_lengths holds %zu integers; it must hold N=%zu%s",
                       r->given->n_key_lengths, r->n, n_is);
        for (size_t i = 0; i < r->n; i++) {
            int32_t x = (int32_t)((uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 |
                                  (uint32_t)b[4 * i + 2] << 16 | (uint32_t)b[4 * i + 3] << 24);
            if (x < 0 || (size_t)x > r->s)
                return bad(r, "key_lengths", "key_lengths[%zu] is %d; it must be from 0 to S=%zu",
                           i, (int)x, r->s);
        }
        r->n_key_lengths = r->n;
    } else {
        if (apip_jv_kind(v) != '[')
            return bad(r, "key_lengths", "key_lengths must be an array of N=%zu integers%s", r->n,
                       n_is);
        const char *it = v, *el = NULL;
        size_t i = 0;
        char path[48];
        while (apip_jv_arr_next(&it, &el)) {
            snprintf(path, sizeof path, "key_lengths[%zu]", i);
            long long x = 0;
            if (i == r->n)
                return bad(r, "key_lengths", "key_lengths must hold N=%zu integers, not more%s",
                           r->n, n_is);
            if (apip_fields_int(r, el, path, 0, (long long)r->s, &x))
                return -1;
            i++;
        }
        if (i != r->n)
            return bad(r, "key_lengths", "key_lengths holds %zu integers; it must hold N=%zu%s", i,
                       r->n, n_is);
        r->n_key_lengths = r->n;
    }
    return 0;
}

/* ---- PyTorch's float key_padding_mask -------------------------------------------------------- */

/* What the values of a key_padding_mask say of its kind: a boolean (seen), a value other than 0
 * and 1 or a string (other). */
typedef struct kpm_seen {
    bool boolean, other;
} kpm_seen;

/* Scans JSON text [p, end) of arrays: its booleans, strings and numbers (validated text). */
static void kpm_scan_text(kpm_seen *k, const char *p, const char *end) {
    while (p < end && !k->boolean) {
        char c = *p;
        if (c == 't' || c == 'f') {
            k->boolean = true;
        } else if (c == '"') {
            k->other = true;
            p = apip_jv_end(p);
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            double x = apip_jv_number(p, &p);
            k->other |= x != 0.0 && x != 1.0;
        } else {
            p++;
        }
    }
}

/* Scans n little-endian float32 values at b. */
static void kpm_scan_floats(kpm_seen *k, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n && !k->other; i++) {
        uint32_t u = (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 |
                     (uint32_t)b[4 * i + 2] << 16 | (uint32_t)b[4 * i + 3] << 24;
        float x;
        memcpy(&x, &u, sizeof x);
        k->other = x != 0.0f && x != 1.0f;
    }
}

/* True when key_padding_mask t is PyTorch's float mask (added to the scores) rather than its bool
 * one: it holds no boolean, and some value is neither 0 nor 1 (such as "-inf" or -1e9). The bool
 * mask's every form (true/false, 0/1, float32 0.0/1.0 as the clients send it) stays the bool
 * mask. Base64 that does not decode is left to the reader (false here). Reads, allocates
 * nothing. */
static bool kpm_is_float(const apip_tensor_in *t) {
    kpm_seen k = {0};
    if (t->raw) {
        if (t->dtype == APIP_DT_FP32)
            kpm_scan_floats(&k, t->raw, t->count);
    } else if (t->binary) {
        const char *p = t->b64.p, *e = t->b64.e;
        char chars[1024 + 4];
        uint8_t bytes[768];
        while (p < e && !k.other) { /* chunks of 1024 characters, as the reader takes them */
            size_t n, got = 0;
            const char *c = p;
            if (t->b64_escaped) {
                n = apip_jv_decode_some(&p, e, chars, 1024);
                c = chars;
            } else {
                n = (size_t)(e - p) < 1024 ? (size_t)(e - p) : 1024;
                p += n;
            }
            if (n % 4 != 0 || !api_base64_decode(bytes, &got, c, n))
                return false;
            kpm_scan_floats(&k, bytes, got / 4);
        }
    } else {
        kpm_scan_text(&k, t->val, t->end);
    }
    return !k.boolean && k.other;
}

/* heads (value v): distinct head indices from 0 to H-1, at least one, with per-head weights; a
 * JSON array, or (given->heads_csv) a string of comma-separated indices. Counts them into
 * r->n_heads. 0, or -1 with r->err. */
static int heads_field(apip_req *r, const char *v) {
    if (r->weights != ATTN_WEIGHTS_PER_HEAD)
        return bad(r, "heads",
                   "heads goes only with per-head weights: need_weights \"per_head\" (or true "
                   "with average_attn_weights false)");
    if (apip_jv_kind(v) != '[' && !(r->given && r->given->heads_csv))
        return bad(r, "heads", "heads must be a list of head indices from 0 to %zu", r->h - 1);
    const char *it = v, *el = NULL;
    char path[48];
    /* One bit per head; h <= max_heads <= API_MAX_HEADS (8 KiB of stack at most). */
    uint64_t seen[API_MAX_HEADS / 64];
    if (r->h > API_MAX_HEADS) /* cannot happen: api_job_parse caps max_heads */
        return api_fail(r->err, 500, "internal", "heads", "%zu heads are too many", r->h);
    memset(seen, 0, (r->h + 63) / 64 * sizeof seen[0]);
    int more;
    while ((more = apip_req_heads_next(r, &it, &el)) > 0) {
        snprintf(path, sizeof path, "heads[%zu]", r->n_heads);
        long long x = 0;
        if (apip_fields_int(r, el, path, 0, (long long)r->h - 1, &x))
            return -1;
        if (seen[x / 64] >> (x % 64) & 1)
            return bad(r, path, "%s repeats head %lld; list each head once", path, x);
        seen[x / 64] |= 1ull << (x % 64);
        r->n_heads++;
    }
    if (more < 0)
        return -1;
    if (r->n_heads == 0)
        return bad(r, "heads", "heads must list at least one head");
    return 0;
}

/* ---- PyTorch's options ----------------------------------------------------------------------- */

/* The keys attention appends after the projections: bias_k and bias_v when the params or the
 * model have them (fields_inputs.c set r->bias_kv), then add_zero_attn's zero key, from the
 * field (v, NULL when absent) or the model's __metadata__.add_zero_attn. A request that says
 * otherwise than its model is refused: the model was saved (and trained) the one way. 0, or -1
 * with r->err. */
static int appended_keys(apip_req *r, const char *v) {
    bool model_zero = r->model && apip_model_zero_attn(r->model);
    r->zero_attn = model_zero;
    if (v) {
        int b = apip_fields_bool(r, v, "add_zero_attn",
                                 " (true: a zero key and value after the keys, as "
                                 "nn.MultiheadAttention(add_zero_attn=True))");
        if (b < 0)
            return -1;
        if (r->model && (b == 1) != model_zero)
            return bad(r, "add_zero_attn",
                       "add_zero_attn is %s, but model %s was saved with add_zero_attn=%s "
                       "(its __metadata__); leave add_zero_attn out",
                       b ? "true" : "false", apip_model_name(r->model),
                       model_zero ? "true" : "false");
        r->zero_attn = b == 1;
    }
    r->kv_extra = (size_t)r->bias_kv + (size_t)r->zero_attn;
    return 0;
}

/* dropout (attention) or dropout_p (SDPA), at v: 0 only. attnd serves inference, where PyTorch's
 * modules are in eval mode and dropout is off; nanoGPT and others pass dropout_p=0.0 there. */
static int dropout_field(apip_req *r, const char *v) {
    const char *name = r->names[APIP_F_DROPOUT];
    if (apip_jv_kind(v) != '0')
        return bad(r, name, "%s must be a number, and 0: attnd serves inference only", name);
    double x = apip_jv_number(v, &(const char *){NULL});
    if (x == 0.0)
        return 0;
    int n = (int)(apip_jv_end(v) - v);
    return bad(r, name,
               "%s is %.*s: attnd serves inference only (PyTorch's eval mode, where dropout is "
               "off); send 0 or leave %s out",
               name, n > 24 ? 24 : n, v, name);
}

/* "trace": a boolean; true only for a job small enough (API_TRACE_MAX_CELLS, api.h). */
static int trace_field(apip_req *r, const char *v) {
    int k = apip_jv_kind(v);
    if (k != 't' && k != 'f')
        return bad(r, "trace", "trace must be true or false");
    r->trace = k == 't';
    if (!r->trace)
        return 0;
    /* Each of the three maps (N, H, L, S'), and the widest of the other steps: attention's
     * (N, L or S', E) projections, SDPA's (N, H, L or S, D or Dv) inputs. */
    const size_t sx = r->s + r->kv_extra; /* S <= max_dim: no overflow */
    size_t maps = 0, rows = 0, ls = r->l > sx ? r->l : sx, w = 0;
    bool fits =
        apip_mul(r->n, r->h, &maps) && apip_mul(maps, r->l, &maps) && apip_mul(maps, sx, &maps);
    if (r->op == API_OP_SDPA)
        fits = fits && apip_mul(r->n, r->h, &rows) && apip_mul(rows, ls, &rows) &&
               apip_mul(rows, r->d > r->dv ? r->d : r->dv, &w);
    else
        fits = fits && apip_mul(r->n, ls, &rows) && apip_mul(rows, r->e, &w);
    if (!fits || maps > API_TRACE_MAX_CELLS || w > API_TRACE_MAX_CELLS)
        return bad(r, "trace",
                   "a trace is for small jobs: its maps hold N*H*L*S = %zu cells and its widest "
                   "step %s = %zu floats, and each may hold at most %d; send fewer or shorter "
                   "sequences, or leave trace out",
                   fits ? maps : (size_t)-1,
                   r->op == API_OP_SDPA ? "N*H*max(L,S)*max(D,Dv)" : "N*max(L,S)*E",
                   fits ? w : (size_t)-1, API_TRACE_MAX_CELLS);
    return 0;
}

/* causal, key_lengths, key_mask, attn_mask, attn_bias, need_weights, heads, weights_top_k,
 * encoding and trace, checked against the shapes learnt before them. 0, or -1 with
 * r->err. */
int apip_fields_masks_and_options(apip_req *r) {
    bool sdpa = r->op == API_OP_SDPA;
    const char *v;
    char sh[96];

    if (!sdpa && appended_keys(r, r->f[APIP_F_ADD_ZERO_ATTN]))
        return -1;
    if ((v = r->f[APIP_F_DROPOUT]) && dropout_field(r, v))
        return -1;

    if ((v = r->f[APIP_F_CAUSAL])) {
        char k = apip_jv_kind(v);
        if (k == 't' || k == 'f')
            r->causal = k == 't' ? ATTN_CAUSAL_TOP_LEFT : ATTN_CAUSAL_NONE;
        else if (k == '"' && apip_jv_streq(apip_jv_string(v), "top_left"))
            r->causal = ATTN_CAUSAL_TOP_LEFT;
        else if (k == '"' && apip_jv_streq(apip_jv_string(v), "bottom_right"))
            r->causal = ATTN_CAUSAL_BOTTOM_RIGHT;
        else
            return bad(r, "causal", "causal must be false, true, \"top_left\" or \"bottom_right\"");
    }
    if ((v = r->f[APIP_F_IS_CAUSAL])) { /* PyTorch's: the causal mask, top-left as SDPA's */
        int b = apip_fields_bool(r, v, "is_causal", " (true: the causal mask, j <= i)");
        if (b < 0)
            return -1;
        r->causal = b ? ATTN_CAUSAL_TOP_LEFT : ATTN_CAUSAL_NONE;
    }

    /* The batch of key_lengths and key_mask: N is the first dimension of a rank-3 query
     * (attention) or of a rank-4 q (N, H, L, D) (SDPA); a query or q without it is one batch
     * element, N = 1 (SDPA's (H, L, D) has heads, not a batch, in front). */
    const char *n_is = r->rank == (sdpa ? 4u : 3u) ? ""
                       : sdpa ? r->rank == 3 ? " (q (H, L, D) is one batch element: N = 1)"
                                             : " (q (L, D) is one batch element: N = 1)"
                              : " (query (L, E) is one batch element: N = 1)";
    if ((v = r->f[APIP_F_KEY_LENGTHS]) && key_lengths_field(r, v, n_is))
        return -1;
    /* key_mask, or PyTorch's key_padding_mask (one_name_each refused both). */
    int kmf = r->f[APIP_F_KEY_PADDING_MASK] ? APIP_F_KEY_PADDING_MASK : APIP_F_KEY_MASK;
    if ((v = r->f[kmf])) {
        const char *name = r->names[kmf];
        if (apip_fields_probe(r, &r->km, name, v, 2))
            return -1;
        const apip_tensor_in *t = &r->km;
        apip_fields_shape_of(sh, sizeof sh, t);
        bool ok = t->dims[t->rank - 1] == r->s;
        r->km_n = t->rank == 2 ? t->dims[0] : 1;
        ok = ok && (r->km_n == 1 || r->km_n == r->n);
        if (!ok)
            return bad(r, name, "%s has shape %s; it must be (S) or (N, S) = (%zu, %zu)%s", name,
                       sh, r->n, r->s, n_is);
        r->has_km = true;
        r->km_torch = kmf == APIP_F_KEY_PADDING_MASK;
        r->km_float = r->km_torch && kpm_is_float(t);
    }
    if (r->f[APIP_F_ATTN_MASK]) {
        if (cell_mask(r, APIP_F_ATTN_MASK, &r->am, &r->am_n, &r->am_h))
            return -1;
        r->has_am = true;
    } else if (r->f[APIP_F_TORCH_ATTN_MASK]) {
        if (torch_cell_mask(r))
            return -1;
        r->has_am = true;
    }
    if (r->f[APIP_F_ATTN_BIAS]) {
        if (cell_mask(r, APIP_F_ATTN_BIAS, &r->ab, &r->ab_n, &r->ab_h))
            return -1;
        r->has_ab = true;
    }

    if ((v = r->f[APIP_F_NEED_WEIGHTS])) {
        char k = apip_jv_kind(v);
        if (sdpa) {
            if (k != 't' && k != 'f')
                return bad(r, "need_weights", "need_weights must be true or false");
            r->weights = k == 't' ? ATTN_WEIGHTS_PER_HEAD : ATTN_WEIGHTS_NONE;
        } else if (k == 'f') {
            r->weights = ATTN_WEIGHTS_NONE;
        } else if (k == 't') { /* PyTorch's: averaged, unless average_attn_weights is false */
            r->weights = ATTN_WEIGHTS_MEAN;
        } else if (k == '"' && apip_jv_streq(apip_jv_string(v), "per_head")) {
            r->weights = ATTN_WEIGHTS_PER_HEAD;
        } else if (k == '"' && apip_jv_streq(apip_jv_string(v), "mean")) {
            r->weights = ATTN_WEIGHTS_MEAN;
        } else {
            return bad(r, "need_weights",
                       "need_weights must be false, true (PyTorch's: the weights averaged over "
                       "the heads), \"per_head\" or \"mean\"");
        }
    }
    if ((v = r->f[APIP_F_AVG_WEIGHTS])) {
        int b = apip_fields_bool(r, v, "average_attn_weights", "");
        if (b < 0)
            return -1;
        const char *nw = r->f[APIP_F_NEED_WEIGHTS];
        if (!nw || apip_jv_kind(nw) != 't')
            return bad(r, "average_attn_weights",
                       "average_attn_weights chooses the form of need_weights: true (PyTorch's), "
                       "so it needs need_weights: true; attnd's default is false (PyTorch's is "
                       "true), and \"per_head\" and \"mean\" already say the form");
        r->weights = b ? ATTN_WEIGHTS_MEAN : ATTN_WEIGHTS_PER_HEAD;
    }
    if ((v = r->f[APIP_F_HEADS]) && heads_field(r, v))
        return -1;
    if ((v = r->f[APIP_F_TOP_K])) {
        if (r->weights == ATTN_WEIGHTS_NONE)
            return bad(r, "weights_top_k", "weights_top_k needs need_weights to be %s",
                       sdpa ? "true" : "true, \"per_head\" or \"mean\"");
        long long k = 0; /* up to S', the appended keys included */
        if (apip_fields_int(r, v, "weights_top_k", 1, (long long)(r->s + r->kv_extra), &k))
            return -1;
        r->top_k = (size_t)k;
    }
    if ((v = r->f[APIP_F_ENCODING])) {
        if (apip_jv_kind(v) == '"' && apip_jv_streq(apip_jv_string(v), "base64"))
            r->base64 = true;
        else if (!(apip_jv_kind(v) == '"' && apip_jv_streq(apip_jv_string(v), "json")))
            return bad(r, "encoding", "encoding must be \"json\" or \"base64\"");
    }
    return (v = r->f[APIP_F_TRACE]) ? trace_field(r, v) : 0;
}
