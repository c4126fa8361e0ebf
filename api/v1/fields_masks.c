/* fields_masks.c - the masks and options of a request, for fields.c: key lengths and key masks,
 * attention masks and biases (and PyTorch's key_padding_mask and attn_mask), causal, heads,
 * need_weights, weights_top_k, encoding and trace, each checked against the shapes fields.c and
 * fields_inputs.c have learnt.
 *
 * Legend: N batch, L query length, S key length, H heads, K the top-k count. */
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

/* "trace": a boolean; true only for a job small enough (API_TRACE_MAX_CELLS, api.h). */
static int trace_field(apip_req *r, const char *v) {
    int k = apip_jv_kind(v);
    if (k != 't' && k != 'f')
        return bad(r, "trace", "trace must be true or false");
    r->trace = k == 't';
    if (!r->trace)
        return 0;
    /* Each of the three maps (N, H, L, S), and the widest of the other steps: attention's
     * (N, L or S, E) projections, SDPA's (N, H, L or S, D or Dv) inputs. */
    size_t maps = 0, rows = 0, ls = r->l > r->s ? r->l : r->s, w = 0;
    bool fits =
        apip_mul(r->n, r->h, &maps) && apip_mul(maps, r->l, &maps) && apip_mul(maps, r->s, &maps);
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
 * encoding, trace and outputs, checked against the shapes learnt before them. 0, or -1 with
 * r->err. */
int apip_fields_masks_and_options(apip_req *r) {
    bool sdpa = r->op == API_OP_SDPA;
    const char *v;
    char sh[96];

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
        long long k = 0;
        if (apip_fields_int(r, v, "weights_top_k", 1, (long long)r->s, &k))
            return -1;
        r->top_k = (size_t)k;
    }
    if ((v = r->f[APIP_F_ENCODING])) {
        if (apip_jv_kind(v) == '"' && apip_jv_streq(apip_jv_string(v), "base64"))
            r->base64 = true;
        else if (!(apip_jv_kind(v) == '"' && apip_jv_streq(apip_jv_string(v), "json")))
            return bad(r, "encoding", "encoding must be \"json\" or \"base64\"");
    }
    if ((v = r->f[APIP_F_TRACE]) && trace_field(r, v))
        return -1;
    return (v = r->f[APIP_F_OUTPUTS]) ? apip_outputs_read(v, r->weights, r->trace, &r->omit, r->err)
                                      : 0;
}
