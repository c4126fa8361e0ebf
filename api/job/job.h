/* job.h - api/job/, the job: the record of a parsed job (struct api_job, laid out in its own
 * arena by the protocol that parsed it), running jobs on libattn one at a time or as batches on
 * the same parameters (job.c), a decode session's append on the session it has taken, and what
 * a protocol tells the job about its response: the shape the response's size depends on, and
 * the form of a protocol above API v1's.
 *
 * Owns: job.c. May include: session.h (api/session/), models.h (api/models/), codec.h
 * (api/codec/), base.h (api/base/), api.h and attention.h, nothing above. The protocol rooms (v1,
 * v2) include this header. Nothing here is part of api.h's contract.
 *
 * Legend (shapes outermost first, row-major): N batch, L query length, S key length,
 * E embedding width, H heads, D/Dv query-key and value widths (SDPA), K top-k count. */
#ifndef ATTND_API_JOB_H
#define ATTND_API_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "session.h"

#define APIP_MAX_RANK     4 /* the most dimensions of a tensor of a job's input */
#define APIP_MAX_OUT_RANK 5 /* ... and of its reply: a model of layers' (Ls, N, H, L, S) */

/* ---- Response size --------------------------------------------------------------------------- */

/* What API v1's "outputs" leaves out of a reply, as a set of these bits (0: nothing left out):
 * the job still computes them. */
enum {
    APIP_OMIT_OUTPUT = 1u << 0,      /* "output" */
    APIP_OMIT_WEIGHTS = 1u << 1,     /* "weights" (with top-k, indices and values) */
    APIP_OMIT_TRACE = 1u << 2,       /* "trace" */
    APIP_OMIT_PREDICTIONS = 1u << 3, /* "predictions" (a model of layers with an unembedding) */
    APIP_OMIT_ALL = 15u
};

/* What the size of a job's 200 response depends on: known from the shapes, before compute. */
typedef struct apip_resp_shape {
    api_op op;
    bool base64;                        /* "encoding": "base64" */
    unsigned omit;                      /* APIP_OMIT_* bits: tensors the reply leaves out */
    size_t out_rank;                    /* the output is (out_dims) */
    size_t out_dims[APIP_MAX_OUT_RANK]; /* (out_rank) */
    size_t w_rank;                      /* 0 when no weights are returned */
    size_t w_dims[APIP_MAX_OUT_RANK];   /* (w_rank); a model of layers': (Ls, ..) */
    bool indices;                       /* top-k: indices (w_dims) beside the weights */
    size_t model_len;                   /* attention: bytes of the registry model's name, or 0 */
    size_t words_bytes; /* attention: the most bytes of "head_names" and "tokens" (words) */
    /* "trace": true. The tensors share the output's leading dimensions (lead); attention:
     * q (lead, H, L, Dh), k and v (lead, H, S, Dh), the three maps (lead, H, L, S), heads
     * (lead, H, L, Dh); sdpa: the three maps only, (lead, L, S) with lead q's leading dims. */
    bool trace;
    size_t tr_rank;                    /* the rank of every trace tensor */
    size_t tr_q[APIP_MAX_OUT_RANK];    /* attention: q and head_outputs (tr_rank) */
    size_t tr_kv[APIP_MAX_OUT_RANK];   /* attention: k and v (tr_rank) */
    size_t tr_maps[APIP_MAX_OUT_RANK]; /* scores, masked_scores, weights (tr_rank) */
    /* A model of layers: its layers, the Ls it keeps ("layers"), the trace's residual and
     * attn_output (Ls, lead, L, E) (tr_res_rank), and the predictions (lead, L, K) (pred_rank;
     * 0: none), each token at most pred_token bytes as a JSON string. */
    size_t num_layers, nkeep;
    size_t tr_res_rank, tr_res[APIP_MAX_OUT_RANK];
    size_t pred_rank, pred_dims[3], pred_token;
    bool session; /* a session's append: "length" after the shape */
} apip_resp_shape;

/* ---- Another protocol's response ------------------------------------------------------------- */

/* How a protocol above API v1 (the Open Inference Protocol, api/v2/) answers the jobs it
 * parses, as a table of its functions: API v1's parser (api/v1/) hands it the form the request
 * asked for (an object only that protocol reads), and api_job_respond hands it the job. This
 * is how a room below reaches the room above without calling it by name.
 *
 * plan checks the outputs form asks for against a job of response shape rs, settles them, and
 * puts the most bytes respond writes into *bytes and the bytes place needs into *place: 0, or
 * -1 with err. place copies form into dst (*place bytes of the job's arena, 8-byte aligned) and
 * returns the copy. respond writes the 200 body of a job that has run, as api_job_respond
 * does. */
typedef struct apip_reply_ops {
    int (*plan)(void *form, const apip_resp_shape *rs, size_t *bytes, size_t *place,
                api_error *err);
    const void *(*place)(const void *form, void *dst);
    int (*respond)(const api_job *job, double queue_ms, double compute_ms, api_buf *out,
                   api_error *err);
} apip_reply_ops;

/* ---- Jobs ------------------------------------------------------------------------------------ */

/* What a job on a model of layers adds (api_job.sj): run by api_job_run with
 * attn_mha_stack_forward, then the predictions made from the logits. */
typedef struct apip_stack_job {
    const apip_stack *stack;    /* the model's layers; NULL: the job is not on one */
    attn_stack_plan plan;       /* bound to the job's masks and head subset */
    size_t nkeep;               /* Ls: the layers whose weights and trace the reply carries */
    const uint32_t *keep;       /* (Ls) their indices, in the request's order */
    float *logits;              /* (N, L, V) with an unembedding, else NULL */
    size_t top_k;               /* K: predictions per row; 0: none */
    int32_t *pred_ids;          /* (N, L, K): the K likeliest next tokens, likeliest first */
    float *pred_probs;          /* (N, L, K): their softmax probabilities over the V tokens */
    float *pred_logits;         /* (N, L, K): their logits */
    float *residual, *attn_out; /* trace: (Ls, N, L, E) each: the stream entering each kept
                                   layer, and what the layer adds to it */
    /* The shapes the reply reports, each led by Ls: the weights (the job's w_rank), the
     * trace's (the job's tr_rank), its residual and attn_output, and the predictions. */
    size_t w_dims[APIP_MAX_OUT_RANK];
    size_t tr_q[APIP_MAX_OUT_RANK], tr_kv[APIP_MAX_OUT_RANK], tr_maps[APIP_MAX_OUT_RANK];
    size_t tr_res_rank, tr_res[APIP_MAX_OUT_RANK];
    size_t pred_rank, pred_dims[3];
} apip_stack_job;

/* One of API v1's seeded inputs ({"init": "uniform", "seed", "shape"}): its values are made in
 * the job's arena by the job's first run (api_job_run, or its batch's), not while parsing, whose
 * time is bounded by the body: element i of the tensor as sent (row-major) is output i of the
 * splitmix64 stream of seed made uniform in [-1, 1) (apip_uniform_fill with a = 1). */
typedef struct apip_seeded {
    float *dst;     /* (count) floats in the arena; NULL when the input is not seeded */
    uint64_t seed;  /* below 2^53 */
    size_t count;   /* elements */
    size_t t, n, w; /* batch_first false: sent (T, N, W), stored (N, T, W); t = 0 otherwise */
} apip_seeded;

/* A parsed job. It lives at the start of its own arena (one 64-byte aligned block of
 * api_mem_alloc, of arena_bytes): every pointer below points into that arena, or into the model it
 * borrows. */
struct api_job {
    api_op op;
    size_t arena_bytes;    /* the arena's capacity */
    api_mem *mem;          /* where its arena, batch workspace and response come from; or NULL */
    size_t response_bytes; /* apip_response_bound of its shapes: counted with the arena */
    size_t need_bytes;     /* the arena's size as laid out (arena_bytes may be more) */
    bool base64;           /* "encoding": "base64" */
    unsigned omit;         /* APIP_OMIT_* bits: tensors the reply leaves out ("outputs") */
    bool ran;              /* api_job_run succeeded */
    attn_plan plan;        /* made from the shapes, bound to the decoded masks and opts.heads */
    attn_opts opts;
    attn_masks masks;
    /* attention: query (N, L, E), key (N, S, kdim), value (N, S, vdim); key may equal query and
     * value may equal key (then libattn shares the projection GEMMs).
     * sdpa: q (N, H, L, D), k (N, H, S, D), v (N, H, S, Dv). */
    const float *q, *k, *v;
    attn_mha_params params; /* attention: borrowed from the model or in the arena */
    const char *model_name; /* attention: the registry model's name; NULL for inline params */
    void *workspace;        /* plan.workspace_bytes, 64-byte aligned */
    float *out;             /* (out_dims); attention with out_seq: (N, L, E) */
    /* API v1's batch_first false: room for the output as (L, N, E) = (out_dims), which the
     * response fills from out (N, L, E) as it writes it; NULL otherwise. */
    float *out_seq;
    attn_weights_out wout; /* values (w_dims), indices (w_dims) with top-k */
    size_t out_rank, out_dims[APIP_MAX_RANK];
    size_t w_rank, w_dims[APIP_MAX_RANK]; /* 0 when no weights are returned; a model of layers'
                                             rank, with its dims in sj (apip_job_w_dims) */
    size_t n, l, s, e, h;                 /* attention: what "shape" and "num_heads" report */
    /* attention with params "init": the weights are made in the arena by the first run that
     * needs them (api_job_run, or once per batch by api_jobs_run), not while parsing. */
    int init;          /* APIP_INIT_* */
    uint64_t seed;     /* APIP_INIT_RANDOM's seed */
    bool params_ready; /* params holds its weights */
    double init_flops; /* making them, in FLOP (apip_init_flops); 0 without init */
    /* API v1's seeded inputs: query, key, value (or q, k, v); made by the first run. */
    apip_seeded seeded[3];
    bool inputs_ready;   /* made (true when none is seeded) */
    double seeded_flops; /* making them, in FLOP (APIP_SEEDED_FLOP each, api/v1/v1.h) */
    /* attention: the registry model (NULL for inline params), and with "tokens" or "text" the
     * words' token ids, tokens (l), whose strings the response echoes. */
    const api_model *model;
    const uint32_t *tokens;
    /* "trace": true: the steps of the attention (attn_trace's buffers in the arena, each
     * NULL when not traced), and their shapes as the response reports them. */
    bool traced;
    attn_trace trace;
    size_t tr_rank, tr_q[APIP_MAX_RANK], tr_kv[APIP_MAX_RANK], tr_maps[APIP_MAX_RANK];
    /* A job on a model of layers: what it adds, in the arena (plan is then the plan of a layer
     * that keeps its weights); NULL for other jobs. */
    apip_stack_job *sj;
    /* Another protocol's response form (its copy in the arena) and the functions that answer
     * with it; both NULL for API v1's response. */
    const void *reply;
    const apip_reply_ops *reply_ops;
    /* The request's own queue deadline, seconds from its arrival (v2's "timeout"); 0 = none. */
    double timeout_s;
    /* A decode session's append: the session it has taken (api_job_destroy gives it back, and
     * ends it with session_end: v2's sequence_end; until then its cache.len is the rows after
     * the append once it has run) and the step's plan (in the arena, bound to opts.heads).
     * plan then holds the step's sizes and FLOPs only (workspace_bytes, out_elems,
     * weights_elems, index_elems, flops). NULL for every other job. */
    apip_session *session;
    attn_decode_plan *dplan;
    bool session_end;
};

/* The dims of job's weights (its w_rank of them): a model of layers' are in its sj. */
static inline const size_t *apip_job_w_dims(const api_job *job) {
    return job->sj ? job->sj->w_dims : job->w_dims;
}

#endif
