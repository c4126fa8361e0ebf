/* v1.h - api/v1/, API v1: the bodies of POST /v1/attention and /v1/sdpa turned into a validated
 * job (request.c, which plans it and lays out its arena, with fields.c reading and checking
 * every field into the request record of request.h: the inputs and parameters in
 * fields_inputs.c, the masks and options in fields_masks.c, a model of layers' own in
 * fields_stack.c), their tensor fields decoded (tensor.c) or seeded (seeded.c), the tensors the
 * reply carries ("outputs", outputs.c), the 200 body of a job that has run (response.c), and
 * the decode sessions' opens and appends (session.c, with fields_session.c reading their
 * fields). Its contract is api/openapi.yaml.
 *
 * Owns: request.c, request.h (private to request.c and the fields files), fields.c,
 * fields_inputs.c, fields_masks.c, fields_stack.c, fields_session.c, tensor.c, seeded.c,
 * outputs.c, response.c, session.c. May include: job.h (api/job/), session.h (api/session/),
 * models.h (api/models/), codec.h (api/codec/), base.h (api/base/), api.h and attention.h,
 * nothing above. Inside the room the calls go one way: tensor.c < seeded.c < fields_inputs.c,
 * fields_masks.c, fields_stack.c, fields_session.c < fields.c < request.c < session.c,
 * outputs.c < fields.c, and response.c beside them (the fields_*.c files call fields.c's
 * helpers, and fields.c calls them). A protocol above (v2)
 * enters at apip_job_parse_given and may include this header. Nothing here is part of api.h's
 * contract.
 *
 * Legend (shapes outermost first, row-major): N batch, L query length, S key length,
 * E embedding width, H heads, D/Dv query-key and value widths (SDPA), K top-k count. */
#ifndef ATTND_API_V1_H
#define ATTND_API_V1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"

/* ---- Tensors (tensor.c) ---------------------------------------------------------------------- */

typedef enum apip_tensor_kind {
    APIP_TENSOR_FLOAT, /* finite float32 */
    APIP_TENSOR_BIAS,  /* float32; -inf allowed (the string "-inf" in JSON) */
    APIP_TENSOR_MASK,  /* 0/1 or false/true, stored as uint8 */
} apip_tensor_kind;

/* A tensor field of a request, probed (shape known, nothing decoded yet). */
/* The element types of raw tensor bytes (the Open Inference Protocol's FP32, INT32, BOOL). */
enum { APIP_DT_FP32, APIP_DT_INT32, APIP_DT_BOOL };

typedef struct apip_tensor_in {
    char name[80];   /* JSON path of the field: "query", "params.in_proj_weight" */
    const char *val; /* its value in the body */
    const char *end; /* nested arrays: one past the value (the reader's loads stay below it) */
    bool binary;     /* {"dtype", "shape", "data"} rather than nested arrays */
    size_t rank;
    size_t dims[APIP_MAX_RANK]; /* dims is (rank) */
    size_t count;               /* elements: the product of dims */
    apip_span b64;              /* binary: the raw content of the data string */
    bool b64_escaped;           /* it contains JSON escapes ("\/") */
    /* Tensors of the Open Inference Protocol (v2.c) declare their shape (dims) and hold: */
    bool flat;          /* a flat JSON array of count elements at val, ending at end; or */
    const uint8_t *raw; /* count little-endian elements of type dtype (APIP_DT_*), unaligned */
    int dtype;
    /* API v1's seeded inputs (seeded.c): {"init": "uniform", "seed", "shape"}, made from the
     * seed when the job runs (apip_seeded, job.h); nothing to decode. */
    bool seeded;
    uint64_t seed;
} apip_tensor_in;

/* Learns the shape of the tensor field at val (nested arrays: from the first element of each
 * level; binary: from "shape", checking "dtype" and the length of "data"). Ranks above
 * max_rank and empty dimensions are 400 invalid_field; a dimension above max_dim, or a shape
 * whose float32 bytes overflow size_t, is 413 job_too_large (the latter naming max_job_bytes,
 * the limit the job then cannot fit). 0 or -1 with err. */
int apip_tensor_probe(apip_tensor_in *t, const char *name, const char *val, size_t max_rank,
                      size_t max_dim, size_t max_job_bytes, api_error *err);

/* Reads the "shape" member at shape of the tensor t (t->name set, t->rank 0) as a binary
 * tensor's shape is read: 1 to max_rank positive integers (by the integer rule: 2, 2.0 and 2e0
 * alike) into t->dims and t->rank, and their product into t->count. 400 invalid_field naming
 * "NAME.shape" or "NAME.shape[i]"; 413 job_too_large for a dimension over max_dim (naming
 * "NAME.shape[i]"), or a count whose float32 bytes overflow size_t (naming max_job_bytes).
 * 0 or -1 with err. */
int apip_tensor_shape(apip_tensor_in *t, const char *shape, size_t max_rank, size_t max_dim,
                      size_t max_job_bytes, api_error *err);

/* Decodes a probed tensor into dst: floats (count) for APIP_TENSOR_FLOAT and APIP_TENSOR_BIAS,
 * bytes (count) for APIP_TENSOR_MASK. Checks every row's length, every element's type and value
 * (400 invalid_field, 400 non_finite naming the element). A flat tensor is read as one row of
 * count elements; a raw one is copied (FP32 floats, checked as base64 data is) or checked and
 * converted (BOOL bytes and INT32 values of a mask must be 0 or 1). 0 or -1 with err. */
int apip_tensor_read(const apip_tensor_in *t, apip_tensor_kind kind, void *dst, api_error *err);

/* ---- Seeded tensors (seeded.c) -------------------------------------------------------------- */

#define APIP_SEED_LIMIT ((uint64_t)1 << 53) /* seeds are below it: exact in a double */

/* What making one seeded element costs, counted in FLOP in usage.flops and against
 * max_job_flops, as params.init's weights are (APIP_INIT_RANDOM_FLOP, models.h): the time of one
 * element (apip_uniform_fill, one thread) over the time of one FLOP of the core's matrix
 * products at the sgemm peak of both slots. It is the loop of a random weight, and costs what
 * one does (same-run ratio 0.77 to 1.09, median 0.99: bench_api --seeded-only; bench/RESULTS.md,
 * "Seeded inputs"), so it counts as one: 320. */
#define APIP_SEEDED_FLOP 320.0

/* Probes the tensor field name at val when it is a seeded tensor: an object with an "init" or a
 * "seed" member, {"init": "uniform", "seed": S, "shape": [d0, ...]}. Returns 1 (t untouched)
 * when val is not such an object: probe it as data (apip_tensor_probe). Else 0 with t->seeded,
 * t->seed, its shape and count set, or -1 with err: 400 invalid_field naming "NAME.init" (not
 * "uniform"), "NAME.seed" (not digits alone, or 2^53 or more: no sign, fraction or exponent),
 * "NAME.shape" (fewer than min_rank dimensions) or "NAME.shape[i]", an unknown or repeated
 * member, or a missing one; as apip_tensor_shape for the shape's dimensions and size (413
 * past max_dim). O(1) per member: nothing is made here. */
int apip_seeded_probe(apip_tensor_in *t, const char *name, const char *val, size_t min_rank,
                      size_t max_rank, size_t max_dim, size_t max_job_bytes, api_error *err);

/* ---- The reply's tensors (outputs.c) -------------------------------------------------------- */

/* Reads "outputs" (its value v, not null): an array of distinct names from "output", "weights",
 * "trace" and "predictions", into *omit, the APIP_OMIT_* bits (job.h) of the tensors it leaves
 * out ([] leaves out all of them). weights, trace and predictions say whether the job makes them
 * (need_weights, "trace": true, a model of layers' predictions): naming one it does not make is
 * refused. 0, or -1 with err: 400 invalid_field naming "outputs" (not an array, a name that is
 * not one of the four or not a string, a name listed twice, or a tensor the job does not make). */
int apip_outputs_read(const char *v, bool weights, bool trace, bool predictions, unsigned *omit,
                      api_error *err);

/* ---- Response size (response.c) -------------------------------------------------------------- */

/* The most bytes api_job_respond writes for a job of shape rs: every JSON float at
 * APIP_FLOAT_MAX bytes with its comma, every index and integer at its widest, base64 exact, the
 * fixed text, the model's name escaped at its widest and the usage times at theirs; the
 * tensors rs->omit leaves out count nothing. Fills
 * *bytes and returns true; false when it does not fit in size_t. */
bool apip_response_bound(const apip_resp_shape *rs, size_t *bytes);

/* The most bytes of the "head_names" of model m (none when it has no names) and of the
 * "tokens" echo of nwords words (none for 0) in a response: apip_resp_shape.words_bytes. False
 * when it does not fit in size_t. */
bool apip_words_json_bound(const api_model *m, size_t nwords, size_t *bytes);

/* ---- Jobs from other codecs (request.c) ------------------------------------------------------ */

#define APIP_GIVEN_TENSORS 8

/* What a codec other than API v1's JSON (the Open Inference Protocol, v2.c) hands the job
 * parser beside a root object whose members map onto v1's fields: a field whose value is
 * keys[i] is the tensor tensors[i], already probed (its shape declared, its data flat JSON,
 * raw bytes or nested arrays); the other fields are read as v1 reads them. */
typedef struct apip_job_given {
    const api_model *model; /* attention: the model (in place of "model" and the default) */
    size_t ntensors;
    const char *keys[APIP_GIVEN_TENSORS];
    apip_tensor_in tensors[APIP_GIVEN_TENSORS];
    const uint8_t *key_lengths; /* (n_key_lengths) raw int32 for key_lengths, or NULL */
    size_t n_key_lengths;
    bool heads_csv;                  /* heads is a string of comma-separated indices ("0,2") */
    void *reply;                     /* the response's form; reply_ops->plan settles it */
    const apip_reply_ops *reply_ops; /* the protocol that answers with it (job.h): set with reply */
    /* A decode session's append: the session the caller has taken (the job holds it from its
     * parse on; the caller gives it back when the parse fails), and whether the session ends
     * with the job (v2's sequence_end). */
    apip_session *session;
    bool session_end;
} apip_job_given;

/* api_job_parse from a root object already checked (its values point into text that
 * apip_json_check accepted) and what given adds; as api_job_parse otherwise. given may be
 * NULL. */
api_job *apip_job_parse_given(api_op op, const apip_json_root *root, apip_job_given *given,
                              const api_registry *models, const api_limits *lim, api_error *err);

#endif
