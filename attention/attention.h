/* attention.h - libattn, the compute core of attnd: exact, fast multi-head attention on BLAS.
 *
 * libattn computes PyTorch nn.MultiheadAttention (batch_first) and scaled dot-product attention
 * (SDPA) in float32, with causal, padding, boolean and additive masks, and optionally returns the
 * softmax weights. It knows nothing of HTTP or JSON: it depends on libc, libm, pthreads and BLAS.
 *
 * Legend (every shape is outermost dimension first, row-major, contiguous unless stated):
 *   N  = batch                 L  = query length          S  = key length
 *   E  = embedding width       H  = heads                 Dh = E / H, the head width
 *   D  = query/key width (SDPA)  Dv = value width (SDPA)   K  = top-k count
 *
 * A job runs in three steps: plan it (sizes, checks, the byte cap), give it one workspace of
 * plan.workspace_bytes, run it. Nothing is allocated while it runs. A caller that must size the
 * job before its masks exist (attnd sizes the one arena it decodes a request into) plans from
 * the shapes, with shape-only masks (attn_masks.shape_only), then binds the data once decoded:
 *
 *     attn_masks m = {.key_mask_n = N, .shape_only = ATTN_MASK_KEY_MASK};   // no data yet
 *     attn_mha_plan(&plan, &dims, &opts, &m, nslots, &err);   // the sizes, as with the data
 *     m.key_mask = decode(arena, ...);                        // (N, S), in the caller's arena
 *     attn_plan_bind(&plan, &opts, &m, &err);                 // checks the data; then run it
 *
 * Worked example: the seed chapter's 4-token SDPA, d_k = 2.
 *
 *     float q[4 * 2] = {1, 1, 0, 1, 1, 0, .5f, .5f};   // q is (L=4, D=2); here K = Q
 *     float v[4 * 2] = {1, 0, 0, 1, 1, 1, .5f, .5f};   // v is (S=4, Dv=2)
 *     float out[4 * 2], w[4 * 4];                      // out is (L, Dv), w is (L, S)
 *     attn_sdpa_dims dims = {.n = 1, .h = 1, .l = 4, .s = 4, .d = 2, .dv = 2};
 *     attn_opts opts = {.weights = ATTN_WEIGHTS_PER_HEAD};
 *     attn_error err = {0};
 *     attn_plan plan;
 *     if (attn_sdpa_plan(&plan, &dims, &opts, NULL, 1, &err) != ATTN_OK)
 *         return fprintf(stderr, "%s\n", err.msg), 1;
 *     void *ws = malloc(plan.workspace_bytes);
 *     attn_weights_out wo = {.values = w};
 *     attn_sdpa_forward(&plan, ws, out, &wo, q, q, v, NULL, &err);
 *     free(ws);
 *     // out row 0 = [0.70, 0.50], w row 0 = [0.40, 0.20, 0.20, 0.20]
 *
 * Generation a token at a time runs as a decode session on a key/value cache the caller holds:
 * attn_mha_decode_plan, then attn_mha_decode_step per new row ("Decode sessions" below).
 *
 * Semantics worth knowing:
 *   - Masks apply to the scaled logits before the softmax and combine as AND.
 *   - Grouped-query attention (SDPA): k and v may have Hkv heads, a divisor of q's H; query
 *     head h then reads key/value head h / (H / Hkv), as F.scaled_dot_product_attention with
 *     enable_gqa=True. Nothing is copied per query head.
 *   - MHA's appended keys (attn_mha_dims.bias_kv and zero_attn, nn.MultiheadAttention's
 *     add_bias_kv and add_zero_attn): after the projections, bias_k and bias_v, then a zero
 *     key and value, become keys S and S+1 of every batch element, so the attention has
 *     S' = S + 1 or S + 2 keys and the weights are (..., L, S'). The masks, key lengths and the
 *     causal limit speak of the S keys given; every query attends the appended keys, as PyTorch
 *     pads its masks with a column that blocks nothing.
 *   - A query row whose every key is blocked gets all-zero weights and a zero attention vector
 *     (PyTorch returns NaN there). In MHA its output row is therefore out_proj.bias.
 *   - ATTN_ERR_NUMERIC means a logit (scale q.k, computed as q.k then scaled, plus the bias) of
 *     a key within the causal limit and key length, a projection, or the output is beyond
 *     float32. The weighted sum of the values never is on its own: its weights are normalised
 *     before it could pass FLT_MAX, so values up to FLT_MAX give their weighted mean.
 *   - Error records: the first error wins. A function writes *err only while err->code is
 *     ATTN_OK, so zero the record before a sequence of calls. err may be NULL.
 */
#ifndef ATTN_ATTENTION_H
#define ATTN_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum attn_status {
    ATTN_OK = 0,
    ATTN_ERR_ARG,      /* a NULL pointer, or an option or mask value out of range */
    ATTN_ERR_SHAPE,    /* dimensions that do not fit together (a zero dim, E % H != 0, ...) */
    ATTN_ERR_OVERFLOW, /* a size does not fit in size_t, or a dimension is too big for BLAS */
    ATTN_ERR_LIMIT,    /* the job needs more bytes than the caller's cap */
    ATTN_ERR_NOMEM,    /* an allocation failed */
    ATTN_ERR_NUMERIC,  /* a logit or result is not finite: inputs too large for float32 */
    ATTN_ERR_SYSTEM,   /* a thread or OS call failed */
} attn_status;

/* Caller-owned error record; fixed size, so filling it never allocates. */
typedef struct attn_error {
    attn_status code;
    char msg[256];
} attn_error;

/* Returns a static, human-readable name for a status ("ok", "shape", ...). */
const char *attn_status_name(attn_status status);

/* ---- Shapes ------------------------------------------------------------------------------- */

/* Dimensions of an MHA job. kdim and vdim of 0 mean E. bias_kv and zero_attn append keys after
 * the projections (see "MHA's appended keys" above): S is the keys given, before them. */
typedef struct attn_mha_dims {
    size_t n, l, s, e, h;
    size_t kdim, vdim;
    bool bias_kv;   /* add_bias_kv: params bias_k and bias_v become key and value S */
    bool zero_attn; /* add_zero_attn: a zero key and value after them */
} attn_mha_dims;

/* Dimensions of an SDPA job over (N, H) independent attention problems; use n = h = 1 for one.
 * hkv is the key/value heads of grouped-query attention: a divisor of h; 0 means h. */
typedef struct attn_sdpa_dims {
    size_t n, h, l, s, d, dv;
    size_t hkv;
} attn_sdpa_dims;

/* MHA parameters, named and shaped as PyTorch's nn.MultiheadAttention state_dict. Borrowed: the
 * caller keeps them alive during the forward. Each projection is y = x W^T + b. Give either
 * in_proj_weight, or all three of q/k/v_proj_weight. */
typedef struct attn_mha_params {
    const float *in_proj_weight;  /* (3E, E), rows Q then K then V; requires kdim = vdim = E */
    const float *q_proj_weight;   /* (E, E) */
    const float *k_proj_weight;   /* (E, kdim) */
    const float *v_proj_weight;   /* (E, vdim) */
    const float *in_proj_bias;    /* (3E) or NULL */
    const float *out_proj_weight; /* (E, E) */
    const float *out_proj_bias;   /* (E) or NULL */
    const float *bias_k;          /* (E): PyTorch's (1, 1, E); needed with dims.bias_kv */
    const float *bias_v;          /* (E): likewise */
} attn_mha_params;

/* ---- Masks -------------------------------------------------------------------------------- */

typedef enum attn_causal {
    ATTN_CAUSAL_NONE = 0,
    ATTN_CAUSAL_TOP_LEFT,     /* query i attends key j only where j <= i (PyTorch) */
    ATTN_CAUSAL_BOTTOM_RIGHT, /* j <= i + S - L (FlashAttention; a decode step with L < S) */
} attn_causal;

/* The masks as bits, for attn_masks.shape_only. */
enum {
    ATTN_MASK_KEY_LENGTHS = 1u << 0,
    ATTN_MASK_KEY_MASK = 1u << 1,
    ATTN_MASK_ATTN_MASK = 1u << 2,
    ATTN_MASK_ATTN_BIAS = 1u << 3,
    ATTN_MASK_KEY_BIAS = 1u << 4,
    ATTN_MASK_ALL = 0x1fu,
};

/* Every mask is optional (NULL or 0). Borrowed; they must stay alive until the forward returns.
 * The attn_mask and attn_bias tensors are (Mn, Mh, L, S) where Mn is 1 or N and Mh is 1 or H; an
 * extent of 1 broadcasts, so (L, S) is Mn = Mh = 1 and (N, L, S) is Mh = 1. An extent of 0 is
 * read as 1. key_mask and key_bias are (Kn, S) with Kn 1 or N. S is always the keys given (an
 * MHA job's appended keys have no mask column).
 *
 * Shape-only masks: a mask whose bit is in shape_only and whose pointer is NULL is present by its
 * extents alone. A plan made with it has the sizes it will have with the data (its flops count
 * every key until then), and must be given the data by attn_plan_bind before it runs. */
typedef struct attn_masks {
    attn_causal causal;
    const int32_t *key_lengths; /* (N): keys j >= key_lengths[n] are padding; 0 <= value <= S */
    const uint8_t *key_mask;    /* (Kn, S) with Kn = key_mask_n: nonzero = real token */
    size_t key_mask_n;
    const uint8_t *attn_mask; /* (Mn, Mh, L, S): nonzero = may attend */
    size_t attn_mask_n, attn_mask_h;
    const float *attn_bias; /* (Bn, Bh, L, S): added to the scaled logits; may hold -INFINITY */
    size_t attn_bias_n, attn_bias_h;
    const float *key_bias; /* (Kn, S) with Kn = key_bias_n: added to the scaled logits of key j,
                              for every query (PyTorch's float key_padding_mask); may hold
                              -INFINITY */
    size_t key_bias_n;
    unsigned shape_only; /* ATTN_MASK_* bits: masks present without their data (see above) */
} attn_masks;

/* ---- Options and plan --------------------------------------------------------------------- */

typedef enum attn_weights_mode {
    ATTN_WEIGHTS_NONE = 0,
    ATTN_WEIGHTS_PER_HEAD, /* (N, H, L, S), or (N, n_heads, L, S) for a chosen subset */
    ATTN_WEIGHTS_MEAN,     /* (N, L, S): the mean over all H heads */
} attn_weights_mode;

typedef enum attn_path {
    ATTN_PATH_AUTO = 0,    /* tiled when no weights are requested (fused when D and Dv are at
                              least 16, on sgemm below), direct otherwise */
    ATTN_PATH_DIRECT,      /* whole logit rows (block_q, S) per task; required for weights */
    ATTN_PATH_TILED,       /* online softmax over key blocks, fused: scores, softmax and x V per
                              tile on attnd's own kernels; memory O(block x (Dv + block)) per
                              thread, plus the keys and values packed once, O(N H S (D + Dv)) */
    ATTN_PATH_TILED_SGEMM, /* the same online softmax with the tile products on sgemm; memory
                              O(block x (Dv + block)) per thread */
} attn_path;

typedef struct attn_opts {
    attn_weights_mode weights;
    const uint32_t *heads; /* (n_heads) with PER_HEAD: return these heads, in this order; NULL
                              with n_heads > 0: the subset's size only (shape-only, as masks) */
    size_t n_heads;        /* 0 = all heads */
    size_t top_k;          /* 0 = dense maps; else the K largest weights of each query row */
    bool has_scale;        /* false: scale is 1/sqrt(Dh) (MHA) or 1/sqrt(D) (SDPA) */
    float scale;
    size_t max_bytes; /* cap on workspace + outputs (plan.job_bytes); 0 = no cap */
    attn_path path;
    size_t block_q, block_k; /* query rows per task and keys per tile; 0 = tuned defaults */
} attn_opts;

/* Where a forward writes the weights. values is dense (..., L, S) floats, or with top_k the
 * (..., L, K) largest weights, largest first (ties: lower key index first); indices is then the
 * (..., L, K) key indices. "..." is (N, H), (N, n_heads) or (N) as attn_weights_mode says. */
typedef struct attn_weights_out {
    float *values;
    int32_t *indices;
} attn_weights_out;

enum { ATTN_PLAN_MHA = 1, ATTN_PLAN_SDPA = 2 };

/* A planned job. The size fields are for the caller; the rest is private to libattn. The plan
 * borrows opts->heads and the masks' arrays: keep them alive until the forward returns. */
typedef struct attn_plan {
    size_t workspace_bytes; /* scratch the forward needs; give it 64-byte aligned */
    size_t out_elems;       /* floats in the output: N*L*E (MHA) or N*H*L*Dv (SDPA) */
    size_t weights_elems;   /* floats in attn_weights_out.values; 0 when none are requested */
    size_t index_elems;     /* int32 in attn_weights_out.indices; nonzero only with top_k */
    size_t job_bytes;       /* workspace + outputs: what opts.max_bytes caps */
    double flops;           /* 2 x multiply-adds of the projections and of the attended cells */
    /* private */
    int kind;
    attn_mha_dims mha;
    attn_sdpa_dims sd; /* the attention problem: for MHA, (N, H, L, S', Dh, Dh, H) with S' = S
                          + kv_extra; hkv is set (never 0) */
    attn_opts opts;
    attn_masks masks;
    size_t nslots, bq, bk, nqb;
    size_t slot_floats; /* floats of scratch per slot */
    size_t kt_floats;   /* the fused path's packed keys and values: (N, Hkv, Sp, D + Dvp),
                           Sp = S rounded up to 32, Dvp = Dv rounded up to 16 */
    size_t kv_extra;    /* MHA's appended keys (bias_kv + zero_attn): sd.s counts them */
    bool tiled;
    bool fused; /* tiled, with attnd's own block products (tiles.c) */
    float scale;
} attn_plan;

/* Plans an MHA job for up to nslots threads (attn_pool_slots of the pool to be used; 1 without
 * one). masks may be NULL. Returns ATTN_OK and fills *plan, or an error: ATTN_ERR_SHAPE for
 * dimensions that do not fit, ATTN_ERR_ARG for a bad option or mask value, ATTN_ERR_OVERFLOW, or
 * ATTN_ERR_LIMIT when plan.job_bytes would exceed opts.max_bytes. Allocates nothing. */
int attn_mha_plan(attn_plan *plan, const attn_mha_dims *dims, const attn_opts *opts,
                  const attn_masks *masks, size_t nslots, attn_error *err);

/* Plans an SDPA job; as attn_mha_plan. The key_lengths and key_mask masks are per n. */
int attn_sdpa_plan(attn_plan *plan, const attn_sdpa_dims *dims, const attn_opts *opts,
                   const attn_masks *masks, size_t nslots, attn_error *err);

/* Binds a plan made from a job's shapes and options (shape-only masks or head subset allowed) to
 * the job's own mask data and head subset, so that the job can be sized before its data exists
 * and planned once. opts and masks are those the plan was made from, now with data for every
 * mask present and the subset's indices; either may be NULL, read as all zero. Checks that they
 * match what was planned: the same options apart from the heads pointer, the same masks present
 * with the same extents (0 and 1 alike) and the same causal mode. Checks what only the data can
 * tell, as planning with it would: key_lengths in [0, S] and head indices below H. Then the plan
 * is the one attn_mha_plan or attn_sdpa_plan would have made with these opts and masks (flops
 * included); its sizes never change. A bound plan may be bound again to other data. Returns
 * ATTN_OK; ATTN_ERR_ARG for a missing plan, options that differ, a mask present on one side
 * only, a mask without data, another causal mode or a bad value; ATTN_ERR_SHAPE for other
 * extents. On error the plan is unchanged. The plan borrows the data as the planners' do. */
int attn_plan_bind(attn_plan *plan, const attn_opts *opts, const attn_masks *masks,
                   attn_error *err);

typedef struct attn_pool attn_pool;

/* Runs a planned MHA job. out is (N, L, E); query is (N, L, E), key (N, S, kdim), value
 * (N, S, vdim). Passing the same pointer for all three (with in_proj_weight) computes the three
 * projections as one GEMM (not with appended keys: then Q is one GEMM, and K and V another).
 * A plan with bias_kv needs params->bias_k and bias_v. weights may be NULL when the plan requests
 * none. workspace holds plan->workspace_bytes; pool may be NULL (run on the calling thread) and
 * must have at most plan->nslots slots. Returns ATTN_OK, ATTN_ERR_ARG for missing buffers or
 * parameters or a plan still waiting for its data (attn_plan_bind), ATTN_ERR_NUMERIC when float32
 * overflowed, or ATTN_ERR_SYSTEM. On error the outputs are unspecified. */
int attn_mha_forward(const attn_plan *plan, void *workspace, float *out, attn_weights_out *weights,
                     const float *query, const float *key, const float *value,
                     const attn_mha_params *params, attn_pool *pool, attn_error *err);

/* Runs a planned SDPA job: q is (N, H, L, D), k (N, Hkv, S, D), v (N, Hkv, S, Dv), out
 * (N, H, L, Dv). As attn_mha_forward otherwise. */
int attn_sdpa_forward(const attn_plan *plan, void *workspace, float *out, attn_weights_out *weights,
                      const float *q, const float *k, const float *v, attn_pool *pool,
                      attn_error *err);

/* ---- Trace -------------------------------------------------------------------------------- */

/* Every step of a job's attention, for a lesson or a check: where a traced forward writes the
 * intermediate tensors. Each pointer may be NULL (that tensor is not written). Shapes are per
 * attention problem (n, h); for MHA, D = Dv = Dh and head h is the columns [h Dh, (h+1) Dh) of
 * each projection. The steps, as a traced forward computes them after the job has run:
 *   scores  = scale * q k^T              (q.k, then scaled, as the forward does)
 *   masked  = scores + bias, -INFINITY where a mask, the causal limit or key_lengths blocks it
 *   weights = softmax of each row of masked (a fully blocked row is zeros)
 *   heads   = weights v                  (MHA: concatenated over h, then out_proj, is out)
 * q, k, v and heads are copied from the forward's own buffers; scores, masked and weights are
 * computed again by the row code of the direct path, so they match a forward that returns
 * weights. A trace costs about 3 N H L S floats and one more QK^T: it is for small jobs. S is
 * the attention's keys: S' with MHA's appended keys (last, as in the weights). With grouped
 * query heads, k and v are each query head's key/value head (repeated over its group). */
typedef struct attn_trace {
    float *q;       /* (N, H, L, D): MHA, the projected queries; SDPA, a copy of q */
    float *k;       /* (N, H, S, D) */
    float *v;       /* (N, H, S, Dv) */
    float *scores;  /* (N, H, L, S) */
    float *masked;  /* (N, H, L, S) */
    float *weights; /* (N, H, L, S) */
    float *heads;   /* (N, H, L, Dv): each head's output, before concat and out_proj (MHA) */
    float scale;    /* set by the forward: the scale of the scores */
} attn_trace;

/* attn_mha_forward, and then the trace of the job into *trace (which may be NULL: then it is
 * attn_mha_forward). The trace runs on the calling thread. Same returns; on error the trace is
 * unspecified. */
int attn_mha_forward_traced(const attn_plan *plan, void *workspace, float *out,
                            attn_weights_out *weights, attn_trace *trace, const float *query,
                            const float *key, const float *value, const attn_mha_params *params,
                            attn_pool *pool, attn_error *err);

/* attn_sdpa_forward, and then the trace of the job into *trace (NULL: none); as above. */
int attn_sdpa_forward_traced(const attn_plan *plan, void *workspace, float *out,
                             attn_weights_out *weights, attn_trace *trace, const float *q,
                             const float *k, const float *v, attn_pool *pool, attn_error *err);

/* ---- Batches of MHA jobs ------------------------------------------------------------------ */

/* Many small MHA jobs on the same parameters make poor GEMMs one by one. A batch runs them
 * together: the rows of every job are gathered into one buffer, the input projections run as one
 * GEMM over all of them (Q, K and V together when every job is self-attention on a packed
 * in_proj_weight; else Q, then K and V), the attention runs per job with the job's own plan
 * (masks, weights, options), the out-projection runs as one GEMM, and the rows go back to each
 * job's out. Each job's answer equals its own attn_mha_forward up to float32 rounding, and a job
 * that fails (ATTN_ERR_NUMERIC) fails alone.
 *
 *     attn_mha_batch_job jobs[2] = {{.plan = &p0, .out = o0, .query = x0, .key = x0, .value = x0},
 *                                   {.plan = &p1, .out = o1, .query = x1, .key = x1, .value = x1,
 *                                    .weights = &w1}};
 *     attn_batch_plan bp;
 *     attn_mha_batch_plan(&bp, jobs, 2, &params, 0, &err);      // sizes and checks
 *     void *ws = aligned_alloc(64, bp.workspace_bytes);
 *     attn_mha_batch_forward(&bp, ws, jobs, 2, &params, pool, &err);
 *     // jobs[i].status is ATTN_OK, or that job's error (also in *jobs[i].err)
 */

/* One job of a batch. The caller fills the first part; the forward sets status. */
typedef struct attn_mha_batch_job {
    const attn_plan *plan;     /* from attn_mha_plan; borrowed */
    float *out;                /* (N, L, E) */
    attn_weights_out *weights; /* NULL when the plan requests none */
    const float *query;        /* (N, L, E) */
    const float *key;          /* (N, S, kdim); the query pointer itself for self-attention */
    const float *value;        /* (N, S, vdim); the key pointer itself to share the K/V GEMM */
    attn_error *err;           /* this job's error record, or NULL */
    int status;                /* set by attn_mha_batch_forward: ATTN_OK or this job's error */
} attn_mha_batch_job;

/* A planned batch. The size fields are for the caller; the rest is private to libattn. */
typedef struct attn_batch_plan {
    size_t workspace_bytes; /* scratch of the whole batch; give it 64-byte aligned */
    size_t rows;            /* query rows of all jobs: the sum of N*L */
    size_t key_rows;        /* key rows: the sum of N*S (0 when the batch is self-attention) */
    double flops;           /* the sum of the jobs' plan.flops */
    /* private */
    size_t count, e, kdim, vdim, nslots, slot_floats, kt_floats;
    bool self;   /* every job is self-attention on in_proj_weight: one QKV GEMM */
    bool kv_one; /* cross: every job has key == value on in_proj_weight: one KV GEMM */
} attn_batch_plan;

/* Plans a batch of count jobs sharing params. Every plan must be an MHA plan with the same E, H,
 * kdim, vdim and nslots, and none may append keys (bias_kv, zero_attn: run those alone).
 * max_bytes caps workspace_bytes (0 = no cap). Reads the jobs' pointers (self-attention or
 * not), not their data. Returns ATTN_OK and fills *bp; ATTN_ERR_ARG for a missing job, plan or
 * parameter, plans that differ or append keys; ATTN_ERR_OVERFLOW; ATTN_ERR_LIMIT over
 * max_bytes. Allocates nothing. */
int attn_mha_batch_plan(attn_batch_plan *bp, const attn_mha_batch_job *jobs, size_t count,
                        const attn_mha_params *params, size_t max_bytes, attn_error *err);

/* Runs a planned batch: the same jobs (same pointers), in the same order, as planned. workspace
 * holds bp->workspace_bytes; the jobs' own plan workspaces are not used. pool may be NULL and
 * must have at most bp->nslots slots. Returns ATTN_OK when the batch ran; then each job's status
 * says whether it succeeded (ATTN_ERR_NUMERIC, with its err filled, when its float32 overflowed;
 * its outputs are then unspecified). Returns ATTN_ERR_ARG (no job ran, statuses unset) for
 * missing buffers, parameters, jobs that do not match the plan, or a job's plan still waiting
 * for its data (attn_plan_bind). */
int attn_mha_batch_forward(const attn_batch_plan *bp, void *workspace, attn_mha_batch_job *jobs,
                           size_t count, const attn_mha_params *params, attn_pool *pool,
                           attn_error *err);

/* ---- Decode sessions: causal self-attention one step at a time ----------------------------- */

/* A model that generates text computes its attention once per new token. Recomputing the
 * whole prefix every time costs O(t^2 E) at step t; because of the causal mask the rows already
 * computed never change, so a decode session keeps every row's projected keys and values in a
 * cache and a step costs O(t E) for the attention plus the projections of its new rows only.
 *
 * A step appends l >= 1 new rows (query (l, E), key (l, kdim), value (l, vdim); the same
 * pointer three times for self-attention): it projects their q, k and v, writes k and v into
 * the cache at rows len .. len + l - 1, attends new row i (row len + i of the sequence) over keys
 * 0 .. len + i, projects the heads' outputs into out (l, E), and adds l to len. Appending a
 * sequence x (T, E) this way, a row at a time or in chunks, gives the out (and weights) of one
 * attn_mha_forward of x with ATTN_CAUSAL_TOP_LEFT:
 *
 *     attn_decode_dims dims = {.e = 512, .h = 8, .cap = 4096, .max_rows = 1};
 *     attn_opts opts = {0};                                   // no weights
 *     attn_decode_plan plan;
 *     if (attn_mha_decode_plan(&plan, &dims, &opts, attn_pool_slots(pool), &err) != ATTN_OK)
 *         return fprintf(stderr, "%s\n", err.msg), 1;
 *     attn_kv_cache cache = {.k = malloc(plan.cache_bytes / 2), .v = malloc(plan.cache_bytes / 2),
 *                            .cap = 4096, .len = 0};         // an empty session
 *     void *ws = aligned_alloc(64, plan.workspace_bytes);
 *     for (size_t t = 0; t < T; t++) {                        // x is (T, E), out (T, E)
 *         const float *row = x + t * 512;
 *         if (attn_mha_decode_step(&plan, ws, &cache, out + t * 512, NULL, row, row, row, 1,
 *                                  &params, pool, &err) != ATTN_OK)
 *             break;                                          // cache.len is still t
 *     }
 *     // out = attn_mha_forward(x, causal top-left) within 1e-6; cache.len = T; each step read
 *     // the cache once and projected one row
 *     free(ws), free(cache.k), free(cache.v);
 *
 * Exactness. A step is not bit for bit the whole-sequence call: a step of one row runs its
 * projections and attention as gemv, a step of more rows as GEMMs of l rows and row blocks on
 * sgemm, where the whole call runs GEMMs of T rows and may run the fused tiled path (BLAS and the
 * kernels sum in another order). The outputs, the weights and the cached keys and values agree
 * with the whole call, and with the same computed in double, within 1e-6 of each tensor's
 * largest magnitude (tests/attention/decode.c, for several E, H, kdim and vdim, with and
 * without biases, a row at a time and in chunks; decode_topk.c for top-k and the trace). What
 * is bit for bit: a step never writes a
 * cached row (rows below len), so no earlier output changes; and the same plan, cache and
 * appends give the same bits with or without a pool.
 *
 * A cache is plain data owned by the caller, who may lower len to forget the last rows (len = 0
 * starts over): a step reads rows below len and writes rows len and up only. One step at a time
 * per cache. A plan allocates nothing and costs O(1): plan each append with the options it
 * needs (the weights mode, say) on the same cache; workspace_bytes depends only on dims, nslots
 * and block_q. To grow a cache, copy each head's len rows into a larger one. */

/* The projected keys and values of every row so far, per head. Each head's rows are contiguous,
 * so a step reads each head's keys and values as one block, front to back; an append scatters
 * l rows of E into H places. Row j of head h is k[(h cap + j) Dh .. + Dh), and so for v. */
typedef struct attn_kv_cache {
    float *k;   /* (H, cap, Dh): keys; rows [0, len) of each head hold the sequence */
    float *v;   /* (H, cap, Dh): values */
    size_t cap; /* rows each head has room for: at most the plan's cap */
    size_t len; /* rows held; the next row appended is row len */
} attn_kv_cache;

/* Dimensions of a decode session: an MHA of width E with H heads (kdim and vdim of 0 mean E),
 * a cache of cap rows, steps of 1 to max_rows new rows (max_rows <= cap). */
typedef struct attn_decode_dims {
    size_t e, h, kdim, vdim;
    size_t cap;
    size_t max_rows;
} attn_decode_dims;

/* A planned decode session. The size fields are for the caller; the rest is private. */
typedef struct attn_decode_plan {
    size_t workspace_bytes; /* scratch of a step; give it 64-byte aligned */
    size_t cache_bytes;     /* attn_kv_cache.k and .v at cap rows: 2 cap E floats, half each */
    size_t out_elems;       /* floats of out at max_rows: max_rows E (a step writes l E) */
    size_t weights_elems;   /* floats of the weights at max_rows rows over cap keys (or top_k);
                               0: none */
    size_t index_elems;     /* int32 of the top-k indices (weights_elems); 0 without top_k */
    size_t job_bytes;       /* workspace + cache + outputs at their largest: what max_bytes caps */
    /* private */
    attn_decode_dims d;
    attn_opts opts;
    size_t nslots, bq, slot_floats;
    float scale;
    bool planned;
} attn_decode_plan;

/* Plans a decode session's steps for up to nslots threads (attn_pool_slots of the pool to be
 * used; 1 without one). opts may be NULL; of attn_opts a step takes weights (NONE, PER_HEAD
 * with or without a subset of heads, whose indices must be given, or MEAN), top_k (with
 * weights, at most cap: each row's K largest weights, as attn_mha_forward gives them), the
 * scale, block_q (query rows per task, 64 by default) and max_bytes (caps job_bytes); path must
 * be AUTO or DIRECT, and block_k is not used. The plan borrows opts->heads. Returns ATTN_OK and
 * fills *plan; ATTN_ERR_SHAPE for a zero dimension, E % H != 0 or max_rows > cap;
 * ATTN_ERR_ARG for top_k without weights or over cap, a tiled path or another bad option;
 * ATTN_ERR_OVERFLOW; ATTN_ERR_LIMIT over max_bytes. Allocates nothing. */
int attn_mha_decode_plan(attn_decode_plan *plan, const attn_decode_dims *dims,
                         const attn_opts *opts, size_t nslots, attn_error *err);

/* Runs one step: appends l rows, query (l, E), key (l, kdim), value (l, vdim), to the cache and
 * writes out (l, E) and, when the plan asks, the weights: dense (maps, l, S) with S = len + l
 * (len before the step) and maps = H, the subset's size, or 1 for the mean, row i zero past key
 * len + i; or with top_k, values and indices (maps, l, K), as attn_weights_out says (K must be
 * at most S). workspace holds plan->workspace_bytes; pool may be NULL and must have at most
 * plan->nslots slots. params as attn_mha_forward's. Returns ATTN_OK and adds l to cache->len;
 * ATTN_ERR_ARG for missing buffers or parameters, a cache that does not fit the plan, or top_k
 * over S; ATTN_ERR_SHAPE for l of 0 or over max_rows; ATTN_ERR_LIMIT when l rows do not fit
 * (len + l > cap); ATTN_ERR_NUMERIC when float32 overflowed (a projected key or value, a
 * logit, or the output). On error cache->len and rows below it are unchanged (rows from len
 * up may have been written), so the step may be retried; out and weights are unspecified. */
int attn_mha_decode_step(const attn_decode_plan *plan, void *workspace, attn_kv_cache *cache,
                         float *out, attn_weights_out *weights, const float *query,
                         const float *key, const float *value, size_t l,
                         const attn_mha_params *params, attn_pool *pool, attn_error *err);

/* attn_mha_decode_step, and then the trace of the step into *trace (NULL: none), as
 * attn_mha_forward_traced gives the whole call's, for the step's l rows over its S = len + l
 * keys: q and head_outputs (H, l, Dh); k and v (H, S, Dh), every cached row; scores, masked
 * and weights (H, l, S), masked -inf past each row's causal limit (key len + i for row i). They
 * are the rows len .. len + l - 1 of the whole call's trace, its first S columns (its k and v,
 * rows 0 .. S - 1). On the calling thread; same returns; on error the trace is unspecified. */
int attn_mha_decode_step_traced(const attn_decode_plan *plan, void *workspace, attn_kv_cache *cache,
                                float *out, attn_weights_out *weights, attn_trace *trace,
                                const float *query, const float *key, const float *value, size_t l,
                                const attn_mha_params *params, attn_pool *pool, attn_error *err);

/* The FLOPs (2 x multiply-adds) of a step of l rows on a cache of len rows: the projections of
 * the l rows and the attention over len + i + 1 keys for row i. Pure; 0 for NULL dims. */
double attn_mha_decode_flops(const attn_decode_dims *dims, size_t len, size_t l);

/* ---- Stacks of layers: attention-only transformers ----------------------------------------- */

/* A stack runs layers of self-attention over a residual stream, as a PyTorch module of
 * nn.MultiheadAttention layers with pre-norm (the attention block of
 * nn.TransformerEncoderLayer(norm_first=True), without a feed-forward block) computes it:
 *
 *     x = input                                   // (N, L, E): token plus position embeddings
 *     for each layer l:  x = x + MHA_l(LN_l(x))    // LN_l only when the layer has a norm
 *     out = x;  logits = LN_f(x) W_U^T + b_U       // LN_f and b_U optional; logits with W_U
 *
 * LN(x) = (x - mean) / sqrt(var + eps) * weight + bias over each row's E values, var biased, as
 * nn.LayerNorm. Every layer attends with the plan's masks and options, and on the direct path:
 * the outputs are the same bits whichever layers keep their weights or trace.
 *
 *     attn_stack_dims dims = {.n = 1, .l = 33, .e = 64, .h = 4, .layers = 2, .vocab = 129};
 *     attn_opts opts = {.weights = ATTN_WEIGHTS_PER_HEAD};
 *     attn_masks m = {.causal = ATTN_CAUSAL_TOP_LEFT};
 *     attn_mha_stack_plan(&plan, &dims, &opts, &m, 1, &err);
 *     attn_stack_layer_out keep[2] = {{.weights = &w0}, {.weights = &w1}};  // (N, H, L, L) each
 *     attn_mha_stack_forward(&plan, ws, out, logits, keep, x, &params, NULL, &err);
 *     // out (1, 33, 64) is the stream after layer 1, logits (1, 33, 129) */

/* One layer's parameters. */
typedef struct attn_layer_params {
    attn_mha_params mha;      /* in_proj_weight packed (kdim = vdim = E), no bias_k or bias_v */
    const float *norm_weight; /* (E): LN_l's weight; NULL: the layer has no norm */
    const float *norm_bias;   /* (E): LN_l's bias, or NULL (zeros) */
} attn_layer_params;

/* A stack's parameters, borrowed for the forward. */
typedef struct attn_stack_params {
    const attn_layer_params *layers; /* (layers) */
    const float *norm_weight;        /* (E): LN_f's weight; NULL: no final norm */
    const float *norm_bias;          /* (E) or NULL */
    const float *unembed_weight;     /* (V, E): W_U, PyTorch's lm_head.weight; NULL: no logits */
    const float *unembed_bias;       /* (V) or NULL */
    float eps;                       /* every LayerNorm's epsilon (PyTorch's default: 1e-5) */
} attn_stack_params;

/* Dimensions of a stack: N sequences of L rows of width E, H heads per layer. */
typedef struct attn_stack_dims {
    size_t n, l, e, h;
    size_t layers; /* at least 1 */
    size_t vocab;  /* V, the rows of W_U; 0: no unembedding */
} attn_stack_dims;

/* A planned stack. The size fields are for the caller; the rest is private to libattn. */
typedef struct attn_stack_plan {
    size_t workspace_bytes; /* scratch of the forward; give it 64-byte aligned */
    size_t out_elems;       /* N*L*E */
    size_t logits_elems;    /* N*L*V; 0 without an unembedding */
    size_t weights_elems;   /* floats of one layer's weights (as attn_plan's); 0: none asked */
    size_t index_elems;     /* int32 of one layer's top-k indices */
    double flops;           /* every layer's attn_plan.flops, the norms, sums and unembedding */
    /* private */
    attn_stack_dims d;
    attn_plan kept;  /* a layer whose weights are kept: the options given, on the direct path */
    attn_plan plain; /* a layer whose weights are not: no weights, on the direct path */
} attn_stack_plan;

/* What a stack's forward writes of one layer; a NULL member is not written. */
typedef struct attn_stack_layer_out {
    attn_weights_out *weights; /* the layer's weights, as attn_mha_forward writes them (the
                                  plan's weights_elems and index_elems each) */
    attn_trace *trace;         /* the layer's trace, as attn_mha_forward_traced writes it */
    float *residual;           /* (N, L, E): the stream entering the layer */
    float *attn_out;           /* (N, L, E): what the layer adds to it, MHA_l(LN_l(x)) */
} attn_stack_layer_out;

/* Plans a stack for up to nslots threads. opts and masks as attn_mha_plan's (every layer has
 * them); opts->path must be AUTO or DIRECT (a stack runs on the direct path), and max_bytes caps
 * workspace_bytes plus out and logits. Returns ATTN_OK; ATTN_ERR_SHAPE for a zero dimension or
 * E % H != 0; ATTN_ERR_ARG for a bad option or mask; ATTN_ERR_OVERFLOW; ATTN_ERR_LIMIT. Plans
 * from shape-only masks and head subsets as attn_mha_plan does; bind them with
 * attn_mha_stack_bind. Allocates nothing. */
int attn_mha_stack_plan(attn_stack_plan *plan, const attn_stack_dims *dims, const attn_opts *opts,
                        const attn_masks *masks, size_t nslots, attn_error *err);

/* attn_plan_bind for a stack's plan: both of its layer plans get the data. As attn_plan_bind. */
int attn_mha_stack_bind(attn_stack_plan *plan, const attn_opts *opts, const attn_masks *masks,
                        attn_error *err);

/* Runs a planned stack on x (N, L, E) into out (N, L, E), and with an unembedding the logits
 * (N, L, V) (logits may be NULL: then not computed). layers holds one record per layer (NULL:
 * keep nothing); a layer whose weights member is set runs with the plan's weights options, the
 * others without. out may be x. Returns ATTN_OK; ATTN_ERR_ARG for missing buffers or
 * parameters, or a plan still waiting for its data; ATTN_ERR_NUMERIC when float32 overflowed
 * (a layer's attention, the stream, or the logits). On error the outputs are unspecified. */
int attn_mha_stack_forward(const attn_stack_plan *plan, void *workspace, float *out, float *logits,
                           attn_stack_layer_out *layers, const float *x,
                           const attn_stack_params *params, attn_pool *pool, attn_error *err);

/* ---- Thread pool -------------------------------------------------------------------------- */

/* A task of a parallel run: task is in [0, ntasks), slot in [0, attn_pool_slots) and no two
 * tasks running at once in one run share a slot, so slot can index per-thread scratch. */
typedef void (*attn_task_fn)(void *ctx, size_t task, size_t slot);

/* Creates a pool of nthreads helper threads. Several callers may run on one pool at once; each
 * caller works on its own run too, so nthreads = cores - 1 keeps every core busy. Returns NULL
 * and fills err (ATTN_ERR_SYSTEM or ATTN_ERR_NOMEM) on failure. Free with attn_pool_destroy. */
attn_pool *attn_pool_create(size_t nthreads, attn_error *err);

/* Stops and joins the helpers; a run still in progress is a caller bug. NULL does nothing. */
void attn_pool_destroy(attn_pool *pool);

/* Slots a run on this pool can use: helpers + 1 (the caller). 1 for NULL. */
size_t attn_pool_slots(const attn_pool *pool);

/* Runs fn(ctx, t, slot) for every t in [0, ntasks) and returns when all have finished. The caller
 * takes part; with pool NULL or ntasks 1 everything runs on the calling thread. */
void attn_pool_run(attn_pool *pool, size_t ntasks, attn_task_fn fn, void *ctx);

/* ---- BLAS kernel -------------------------------------------------------------------------- */

typedef struct attn_blas_info {
    char detected[32]; /* the core OpenBLAS chose by itself ("Prescott", "Zen", ...) */
    char best[32];     /* the best core this CPU supports, as an OpenBLAS core name */
    char active[32];   /* the core in use now */
    char how[160];     /* one sentence on why the active core was chosen */
} attn_blas_info;

/* Makes OpenBLAS use the best kernel this CPU supports, and runs BLAS single-threaded (libattn
 * parallelises over its own pool). Call first thing in main, before any thread starts, with
 * main's argv. OpenBLAS reads OPENBLAS_CORETYPE only as it loads, so when it under-detects the
 * CPU this sets the variable and re-executes the program once (it does not return then).
 * ATTND_BLAS_CORETYPE overrides the choice: "auto" (default), "keep" (use what OpenBLAS
 * detected), or a core name to force. An OPENBLAS_CORETYPE the user set is respected. Returns
 * ATTN_OK and fills *info, or ATTN_ERR_ARG when a forced core is unknown or needs instructions
 * this CPU lacks. */
int attn_blas_setup(char **argv, attn_blas_info *info, attn_error *err);

/* The core attn_blas_setup would choose for a CPU whose best core is best_core when OpenBLAS
 * detected detected_core; writes the name to out (size 32). Pure; exposed for tests. */
void attn_blas_choose(const char *detected_core, const char *best_core, char out[32]);

/* The best OpenBLAS core name this CPU supports ("SkylakeX", "Haswell", ...). */
const char *attn_blas_cpu_best(void);

#ifdef __cplusplus
}
#endif

#endif
