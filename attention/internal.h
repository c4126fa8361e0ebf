/* internal.h - what the files of libattn share and nobody else sees: the row kernels,
 * overflow-checked size arithmetic, the workspace layout, and the running state of the attention
 * paths that the MHA projections and the batches drive.
 *
 * Legend: N batch, L query length, S key length, E embedding, H heads, D and Dv the query/key and
 * value widths of one attention problem. */
#ifndef ATTN_INTERNAL_H
#define ATTN_INTERNAL_H

#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attention.h"

/* One instruction-set flavour of the softmax row kernels. */
typedef struct attnk_set {
    const char *name; /* "avx512", "avx2" or "sse2" */
    /* Max of x[0..n); -INFINITY when n is 0. NaN entries are skipped. */
    float (*row_max)(const float *x, size_t n);
    /* x[j] = exp(x[j] - m) for j < n, in place; returns the sum. exp(-inf) is 0. */
    float (*exp_sum)(float *x, size_t n, float m);
    /* x[j] *= a for j < n. */
    void (*scale)(float *x, size_t n, float a);
    /* True when no x[j], j < n, is an infinity or NaN. */
    bool (*all_finite)(const float *x, size_t n);
    /* row_max and all_finite in one pass: the max, and *finite = all_finite(x, n). */
    float (*max_finite)(const float *x, size_t n, bool *finite);
} attnk_set;

/* The widest kernel set this CPU runs; chosen on first call, then cached. */
const attnk_set *attnk_get(void);

/* The set called name, or NULL; for tests that compare the flavours. */
const attnk_set *attnk_get_named(const char *name);

/* One instruction-set flavour of the block products of the fused tiled path (tiles.c). */
typedef struct attnt_set {
    const char *name; /* "avx512", "avx2" or "sse2" */
    size_t panel;     /* keys per packed panel: at most ATTN_TILE_PANEL_MAX */
    /* Packs keys k[0..cols) (rows of d floats, ld apart) into panels of `panel` keys, each key's
     * d values a column: kt[(p d + c) panel + jj] = k[(p panel + jj) ld + c]; zeros past cols. */
    void (*pack_kt)(float *kt, const float *k, size_t ld, size_t cols, size_t d);
    /* s[i][j] = scale (q_i . k_j) for i < rows and j < cols rounded up to whole panels; q rows
     * ldq apart, s rows lds apart (lds a multiple of the panel). rmax (rows) may be NULL; else
     * rmax[i] = the max of s[i][j] over j < cols, or +inf when the logits s[i'][j] of some rows
     * i' around i (a register block: at least i's) hold one that is not finite. */
    void (*qk)(float *s, size_t lds, const float *q, size_t ldq, size_t rows, const float *kt,
               size_t cols, size_t d, float scale, float *rmax);
    /* acc[i][c] += sum over j < cols of p[i][j] v[j][c], for i < rows and c < dv. */
    void (*pv)(float *acc, size_t lda, const float *p, size_t ldp, size_t rows, const float *v,
               size_t ldv, size_t cols, size_t dv);
} attnt_set;

#define ATTN_TILE_PANEL_MAX 32

/* The fused path's values and accumulators are Dv rounded up to this (the widest vector), so
 * that the products run on whole vectors; the padding is zeros. */
#define ATTN_TILE_DV_ALIGN 16

/* Dv rounded up to ATTN_TILE_DV_ALIGN. */
static inline size_t attn_tile_dvp(size_t dv) {
    return (dv + ATTN_TILE_DV_ALIGN - 1) / ATTN_TILE_DV_ALIGN * ATTN_TILE_DV_ALIGN;
}

/* The widest block-product set this CPU runs; chosen on first call, then cached. */
const attnt_set *attnt_get(void);

/* The set called name, or NULL; for tests that compare the flavours. */
const attnt_set *attnt_get_named(const char *name);

/* Fills err (if it is still clear) with code and a printf-style message; returns code. */
int attn_fail(attn_error *err, attn_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* a * b into *out; false on overflow. */
static inline bool attn_mul(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}

/* a + b into *out; false on overflow. */
static inline bool attn_add(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* ---- Sizes ------------------------------------------------------------------------------- */

#define ATTN_WS_ALIGN_FLOATS 16 /* 64 bytes */

/* Below this many FLOPs a phase runs on the caller: waking helpers costs more. */
#define ATTN_INLINE_FLOPS 2e6

/* x rounded up to a multiple of ATTN_WS_ALIGN_FLOATS. */
static inline size_t attn_align_up(size_t x) {
    return (x + ATTN_WS_ALIGN_FLOATS - 1) / ATTN_WS_ALIGN_FLOATS * ATTN_WS_ALIGN_FLOATS;
}

/* True when x fits the int that BLAS takes. */
static inline bool attn_fits_int(size_t x) {
    return x <= (size_t)INT_MAX;
}

/* A mask's leading extent as used: 0 is read as 1. */
static inline size_t attn_extent(size_t x) {
    return x == 0 ? 1 : x;
}

/* ---- Workspace layout and binding (plan.c) ----------------------------------------------- */

/* Offsets, in floats from the workspace start, of each region. Derived from the plan alone, so
 * plan and forward agree. */
typedef struct attn_ws_layout {
    size_t proj;  /* MHA projections: (N*L, 3E) packed, or Q (N*L, E) + K (N*S, E) + V (N*S, E) */
    size_t kproj; /* start of K within proj when not packed */
    size_t vproj; /* start of V within proj when not packed */
    size_t ob;    /* (N*L, E): the heads' outputs, concatenated, before out_proj */
    size_t slots; /* nslots x slot_floats of per-thread scratch */
    size_t kt;    /* kt_floats: the fused path's packed keys */
    size_t total; /* floats */
    bool ok;
} attn_ws_layout;

/* Appends a region of a*b*c floats, 64-byte aligned; records overflow in l->ok. */
size_t attn_ws_take(attn_ws_layout *l, size_t a, size_t b, size_t c);

/* The workspace layout of plan p (checked when p was planned). */
attn_ws_layout attn_plan_layout(const attn_plan *p);

/* True when plan p has the data of every mask it has and the indices of its head subset: made
 * with them, or given them by attn_plan_bind. Only such a plan may run. */
bool attn_plan_bound(const attn_plan *p);

/* The keys a plan's masks, key lengths and causal limit speak of: S, before MHA's appended
 * keys. */
static inline size_t attn_keys_given(const attn_plan *p) {
    return p->sd.s - p->kv_extra;
}

/* The key/value head that query head h reads (grouped-query attention: h / (H / Hkv)). */
static inline size_t attn_kv_head(const attn_plan *p, size_t h) {
    return h / (p->sd.h / p->sd.hkv);
}

/* ---- Running the attention (sdpa.c) ------------------------------------------------------ */

/* Where the attention keeps its keys. MHA's appended keys come first in its buffers (keys
 * 0..kv_extra-1, then the S keys given), so that every row's keys are still a prefix whose
 * length attn_row_limit gives; the weights and the trace put them last, as PyTorch does
 * (attn_rows_rotate). */

/* One batch of attention problems: for (n, h) the rows of q start at q + n*q_sn + h*q_sh and are
 * ldq apart; likewise o, and k and v for key/value head attn_kv_head(h). */
typedef struct attn_view {
    const float *q, *k, *v;
    float *o;
    size_t q_sn, q_sh, ldq;
    size_t k_sn, k_sh, ldk;
    size_t v_sn, v_sh, ldv;
    size_t o_sn, o_sh, ldo;
} attn_view;

typedef struct attn_run {
    const attn_plan *p;
    attn_view view;
    attn_weights_out wout;
    float *slots; /* nslots x slot_floats */
    float *kt;    /* the fused path's packed keys (kt_floats of the plan) */
    const attnk_set *ks;
    const attnt_set *ts; /* the fused path's block products */
    atomic_int numeric;  /* set when a logit is not finite */
} attn_run;

/* Keys query row i of batch n may attend before the cell masks: the appended keys, and the
 * given ones up to the causal limit and the key length. Nondecreasing in i. */
size_t attn_row_limit(const attn_plan *p, size_t n, size_t i);

/* The cell masks of row i of problem (n, h), each NULL when absent; off is the keys before the
 * first one they speak of (kv_extra). */
typedef struct attn_row_masks {
    const uint8_t *km, *am;
    const float *bias, *kb;
    size_t off;
} attn_row_masks;

attn_row_masks attn_masks_for_row(const attn_plan *p, size_t n, size_t h, size_t i);

/* Masks the logits x[0..cols) of keys j0.. of one row: cells at or past lim (relative to j0) and
 * cells a mask blocks become -inf; the biases are added. Returns the row max (-inf when every
 * cell is blocked). Flags r->numeric when an unmasked logit is not finite. */
float attn_row_mask_max(attn_run *r, float *x, size_t cols, size_t lim, attn_row_masks rm,
                        size_t j0);

/* (sdpa.c) The k largest of w[0..s) into vals and idx (k each), largest first, ties by lower
 * key index. k <= s. */
void attn_topk_row(const float *w, size_t s, size_t k, float *vals, int32_t *idx);

/* Moves the appended keys of rows rows of weights (ld apart, s wide) from first to last: row
 * j becomes row (j + x) mod s. */
void attn_rows_rotate(float *w, size_t ld, size_t rows, size_t s, size_t x);

/* Runs the attention problems of r (p, view, wout and slots set) over pool, which may be NULL.
 * Returns ATTN_OK, or ATTN_ERR_NUMERIC (err filled) when a logit or a row was not finite. */
int attn_run_attention(attn_run *r, attn_pool *pool, attn_error *err);

/* (trace.c) Writes the trace of r's attention problems into *t (t->scale too), on the calling
 * thread, after attn_run_attention has run them: q, k, v and the heads' outputs copied from r's
 * view, scores, masked scores and weights computed again with the direct path's row code. */
void attn_trace_write(attn_run *r, attn_trace *t);

/* Checks a forward's arguments against plan p of the given kind: the workspace (64-byte aligned),
 * out, the weights buffers the plan needs, and the pool's slots. ATTN_OK or ATTN_ERR_ARG. */
int attn_check_run_args(const attn_plan *p, int kind, void *ws, float *out,
                        const attn_weights_out *w, attn_pool *pool, attn_error *err);

/* ---- MHA projections (mha.c) ------------------------------------------------------------- */

/* The input projections of rows query rows and krows key rows, for one job or a gathered batch.
 * self: query = key = value (packed weights), [Q K V] in one GEMM; kv_one: key = value, and
 * with packed weights [K V] in one GEMM. */
typedef struct attn_in_proj {
    const float *xq; /* (rows, E) */
    const float *xk; /* (krows, kdim) */
    const float *xv; /* (krows, vdim) */
    float *proj;     /* self: [Q K V] (rows, 3E); else Q (rows, E) */
    float *kproj;    /* K (krows, E), or [K V] (krows, 2E) over kproj and vproj */
    float *vproj;    /* V (krows, E); must follow kproj (krows * E floats after it) */
    size_t rows, krows, e, kdim, vdim;
    bool self, kv_one;
} attn_in_proj;

/* Runs the input projections of ip on pool, and points v's q, k, v (row 0, leading dimensions)
 * at their results. */
void attn_in_proj_run(attn_view *v, const attn_in_proj *ip, const attn_mha_params *prm,
                      size_t nslots, attn_pool *pool);

/* Completes v for MHA plan p: head h of batch n is a column slice of width Dh in each
 * projection (S' rows a batch element in K and V), and the heads write their slices of ob
 * (N*L, E). */
void attn_view_strides(attn_view *v, const attn_plan *p, float *ob);

/* Appends MHA plan p's keys (attn_mha_dims.bias_kv, zero_attn) to the projections v points at,
 * which hold N*S rows of K and V (ldk and ldv apart, batch after batch): moves each batch
 * element's rows to S' = S + kv_extra apart, after room for the appended keys, and writes them
 * there (bias_k and bias_v, then zeros). The K and V buffers must have room for N*S' rows. */
void attn_kv_append(const attn_view *v, const attn_plan *p, const attn_mha_params *prm);

/* out (rows, outdim) = x (rows, in) w^T + b, with w (outdim, in) and b (outdim) or NULL, run
 * on pool: the projections' GEMM, for a stack's unembedding. */
void attn_linear_run(float *out, const float *x, size_t rows, size_t in, size_t outdim,
                     const float *w, const float *b, size_t nslots, attn_pool *pool);

/* out (rows, E) = ob (rows, E) W_out^T + b_out, run on pool. */
void attn_out_proj_run(float *out, const float *ob, size_t rows, size_t e,
                       const attn_mha_params *prm, size_t nslots, attn_pool *pool);

#endif
