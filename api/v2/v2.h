/* v2.h - api/v2/, the Open Inference Protocol (KServe v2) on API v1's jobs: server and model
 * metadata, readiness, and infer requests turned into the job their v1 equivalent makes (v2.c),
 * answered in the protocol's form (v2_reply.c). Its public functions are api_v2_* in api.h.
 *
 * Owns: v2.c, v2_reply.c. May include: v1.h (api/v1/), job.h (api/job/), models.h
 * (api/models/), codec.h (api/codec/), base.h (api/base/), api.h and attention.h: it is the top
 * room. Inside the room the calls go one way: v2_reply.c < v2.c. API v1 and api_job_respond reach
 * v2_reply.c only through apip_v2_reply_ops (job.h's apip_reply_ops), which v2.c hands them
 * with the form. Nothing here is part of api.h's contract.
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

#endif
