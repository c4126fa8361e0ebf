/* v2.h - api/v2/, the Open Inference Protocol (KServe v2) on API v1's jobs: server and model
 * metadata, readiness, and infer requests turned into the job their v1 equivalent makes (v2.c),
 * answered in the protocol's form (v2_reply.c). Its public functions are api_v2_* in api.h.
 *
 * Owns: v2.c (the models' inputs, metadata, readiness), v2_config.c (Triton's configuration and
 * statistics), v2_parse.c (infer requests), v2_seq.c (Triton's sequence parameters on the decode
 * sessions), v2_reply.c (their responses). May include: v1.h (api/v1/), job.h (api/job/),
 * session.h (api/session/), models.h (api/models/), codec.h (api/codec/), base.h (api/base/),
 * api.h and attention.h: it is the top room. Inside the room the calls go one way: v2_reply.c <
 * v2.c < v2_config.c, v2_seq.c < v2_parse.c. API v1 and api_job_respond reach v2_reply.c only
 * through apip_v2_reply_ops (job.h's apip_reply_ops), which v2_parse.c hands them with the form.
 * Nothing here is part of api.h's contract.
 *
 * Legend (shapes outermost first, row-major): N batch, L query length, S key length,
 * E embedding width, H heads, K top-k count. */
#ifndef ATTND_API_V2_H
#define ATTND_API_V2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v1.h"

/* ---- The Open Inference Protocol's responses (v2_reply.c) ------------------------------------ */

/* The outputs of a job, as the protocol names them: "output", "weights", "weights_indices". */
enum { APIP_V2_OUTPUT, APIP_V2_WEIGHTS, APIP_V2_INDICES, APIP_V2_NOUTS };
extern const char *const apip_v2_out_names[APIP_V2_NOUTS]; /* by APIP_V2_* */

/* The form of a v2 response: which outputs, in which order, each as JSON data or raw bytes
 * after the JSON (the binary tensor data extension). */
typedef struct apip_v2_reply {
    const char *model; /* the model's name (borrowed: the registry's, or static "sdpa") */
    const char *id;    /* the request's "id" as raw JSON string content (escapes kept), id_len
                          bytes; NULL when it has none. In a job it is in the job's arena. */
    size_t id_len;
    bool listed;                /* the request listed its outputs (else: all there are) */
    size_t nout;                /* listed: how many */
    uint8_t out[APIP_V2_NOUTS]; /* listed: APIP_V2_* in the request's order */
    bool binary[APIP_V2_NOUTS]; /* per APIP_V2_*: raw bytes rather than JSON data */
    size_t binary_bytes;        /* raw bytes after the JSON: set by apip_v2_reply_plan */
} apip_v2_reply;

/* Checks the outputs reply asks for against a job of response shape rs (weights exist only
 * with need_weights, weights_indices with weights_top_k), settles the list (all there are when
 * none was given) and its binary_bytes, and computes the most bytes apip_v2_respond writes into
 * *bytes, and the bytes apip_v2_reply_place needs into *place. 0, or -1 with err (400; 413 when a
 * size does not fit in size_t). */
int apip_v2_reply_plan(apip_v2_reply *reply, const apip_resp_shape *rs, size_t *bytes,
                       size_t *place, api_error *err);

/* Copies reply and its id into dst (*place bytes of the job's arena, 8-byte aligned) and
 * returns the copy. */
const apip_v2_reply *apip_v2_reply_place(const apip_v2_reply *reply, void *dst);

/* api_job_respond for a job with a v2 reply form. */
int apip_v2_respond(const api_job *job, double queue_ms, double compute_ms, api_buf *out,
                    api_error *err);

/* The table of the three above, for apip_job_given.reply_ops (the form is an apip_v2_reply). */
extern const apip_reply_ops apip_v2_reply_ops;

/* ---- The models' inputs and lookups (v2.c) ---------------------------------------------- */

#define APIP_V2_DT(x) (1u << (x)) /* a bit of apip_v2_input.dtypes, for APIP_DT_* x */

/* An input of a model: its name (also the v1 field it maps onto) and the datatypes it takes. */
typedef struct apip_v2_input {
    const char *name;
    unsigned dtypes; /* APIP_V2_DT bits */
} apip_v2_input;

enum { APIP_V2_IN_KEY_LENGTHS = 3, APIP_V2_IN_COUNT = 7 };

/* The inputs of a registry model (query, key, value, key_lengths, key_mask, attn_mask,
 * attn_bias) and of "sdpa" (q, k, v, then the same), in that order. */
extern const apip_v2_input apip_v2_mha_inputs[APIP_V2_IN_COUNT];
extern const apip_v2_input apip_v2_sdpa_inputs[APIP_V2_IN_COUNT];

/* The registry model of name, or NULL for "sdpa" (*sdpa true); 0, or -1 with err (404
 * not_found for a path past the model's routes, 404 unknown_model for an unknown name or a
 * version other than API_V2_VERSION). */
int apip_v2_find_model(const api_registry *r, const char *name, const char *version,
                       const api_model **m, bool *sdpa, api_error *err);

/* Appends dims (rank) as JSON numbers separated by commas, -1 for a negative entry. */
void apip_v2_put_dims(api_buf *out, const long long *dims, size_t rank);

/* The datatype and dims of input i (or with out, of output i) of a model (m NULL: sdpa), at
 * their highest rank, -1 for a dimension the request chooses: query (N, L, E) (also (L, E)),
 * key (N, S, kdim), value (N, S, vdim), SDPA's q, k, v (N, H, L|S, D) (also (H, ..) and
 * (L|S, D)), key_lengths (N), key_mask (N, S) (also (S)), attn_mask and attn_bias
 * (N, H, L, S) (lower ranks broadcast); output as the query, weights (N, H, L, S) or
 * (N, L, S), a model of layers' (Ls, N, H, L, S), indices with top-k (.., K). Returns the
 * rank. */
size_t apip_v2_tensor_dims(const api_model *m, bool out, size_t i, const char **dt,
                           long long dims[APIP_MAX_OUT_RANK]);

/* ---- Triton's sequence parameters (v2_seq.c) ------------------------------------------------ */

/* An infer request's sequence parameters: their JSON values, NULL when absent. */
typedef struct apip_v2_seq {
    const char *id, *start, *end; /* sequence_id, sequence_start, sequence_end */
} apip_v2_seq;

/* The session of the sequence q names, for an infer request on model (NULL: sdpa) by owner:
 * with sequence_start, opened (a running one of that id ends first: the client starts over);
 * without, found; either way taken by the caller (into given->session, with given->session_end
 * from sequence_end). 0 when the request is not of a sequence (sequence_id absent, 0 or ""), 1
 * with given set, or -1 with err: 400 for a parameter's type, a flag without a sequence_id, a
 * string id over 128 bytes, sdpa, or a model that appends keys; 404 session_unknown (no such
 * sequence running: the message says to start it again); 409 session_busy; as
 * apip_session_open for the open (413, 503). */
int apip_v2_sequence(const apip_v2_seq *q, const api_model *model, api_sessions *st, uint32_t owner,
                     const api_limits *lim, apip_job_given *given, api_error *err);

#endif
