/* api.h - the API codecs of attnd: request bytes -> a validated job, results -> response bytes.
 *
 * api/ turns the JSON body of POST /v1/attention or /v1/sdpa into an api_job (every field
 * checked, every tensor decoded into the job's one arena, the arena's size checked against the
 * job limit first), runs it on libattn, and writes the response body. It also holds the model
 * registry (the built-in "demo" and "lesson" models and safetensors files, which may carry a
 * vocabulary so that requests send words: "tokens" or "text") and error bodies. It depends on
 * libattn and libc only (it reads JSON itself: jansson copied an 8 MiB base64 tensor byte by
 * byte in 211 ms, twice the compute of its job), never on libmicrohttpd: the daemon (server/)
 * owns HTTP. The Open Inference Protocol (KServe v2, the section at the end of the jobs) makes
 * the same jobs from its own requests and answers in its own form.
 *
 * Worked example (error handling elided):
 *
 *     api_registry *models = api_registry_create();
 *     api_registry_add(models, api_model_demo(&err), &err);        // also the default model
 *     api_limits lim = api_limits_default();
 *     api_job *job = api_job_parse(API_OP_ATTENTION, body, len, models, &lim, &err);
 *     if (!job) { api_error_body(&err, &buf); reply(err.status, buf); }
 *     api_job_run(job, pool, &err);                               // on a worker thread
 *     api_job_respond(job, queue_ms, compute_ms, &buf, &err);     // 200 body in buf
 *     api_job_destroy(job);
 *
 * Error records are caller-owned and fixed-size; the first error wins (a function writes *err
 * only while err->status is 0). err may be NULL.
 */
#ifndef ATTND_API_H
#define ATTND_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attention.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors and buffers ------------------------------------------------------------------- */

typedef struct api_error {
    int status;        /* HTTP status to answer with: 400, 404, 413, 500, ...; 0 = no error */
    char code[32];     /* snake_case code, e.g. "invalid_json", "invalid_field", "job_too_large" */
    char message[256]; /* one clear sentence a user can act on */
    char field[128];   /* JSON path of the offending field ("attn_mask", "params.num_heads",
                          "query[2][0]"), or "" for null */
} api_error;

/* A growable byte buffer. Zero-initialise it; api_buf_free releases it. When an append fails
 * for lack of memory, failed is set and further appends do nothing. data comes from malloc and
 * realloc, so a caller may take it over and release it with free() (the daemon hands it to the
 * HTTP library that way); but when block is set (api_job_respond with a job memory cache), data
 * is a block of api_mem_alloc, released with api_mem_free. cap is the bytes data holds. */
typedef struct api_buf {
    char *data;
    size_t len, cap;
    bool failed;
    bool block; /* data is an api_mem block */
} api_buf;

void api_buf_free(api_buf *b);
void api_buf_reset(api_buf *b); /* len = 0, keeps the memory */
void api_buf_append(api_buf *b, const void *bytes, size_t n);

/* Appends s (n bytes, NULs included) as a JSON string literal with quotes: quotes, backslashes
 * and control bytes escaped, invalid UTF-8 written as U+FFFD (\ufffd), so the output is always
 * valid JSON. On a failed allocation b->failed is set. */
void api_buf_json_string(api_buf *b, const char *s, size_t n);

/* Sets *err (if still clear) and returns -1. fmt is printf-style. field may be NULL. */
int api_fail(api_error *err, int status, const char *code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Appends {"error": {"code": ..., "message": ..., "field": ... or null}} to out. */
void api_error_body(const api_error *err, api_buf *out);

/* ---- Job memory --------------------------------------------------------------------------- */

/* A cache of large memory blocks, shared by threads: jobs' arenas, batch workspaces, response
 * bodies and a server's request bodies come from it and go back to it, so that a job reuses the
 * pages of the one before instead of having the kernel map, fault in and zero new ones. A block
 * left unused for idle_s seconds is unmapped (by a thread of the cache), so memory returns to
 * the system when the load goes. Blocks under 128 KiB come from malloc and are never cached.
 *
 *     api_mem *mem = api_mem_create(bound, 2.0, &err);
 *     lim.mem = mem;                   // api_job_parse, api_jobs_run, api_job_respond use it
 *     ...
 *     api_mem_destroy(mem);            // after every job and buffer from it is released */
typedef struct api_mem api_mem;

/* A cache that keeps freed blocks only while the bytes of its blocks in use and cached together
 * stay within max_bytes (cached blocks are unmapped, oldest first, to make room; blocks in use
 * are never refused for it), and unmaps a cached block unused for idle_s seconds (idle_s <= 0:
 * keeps them until evicted or destroyed; no thread is started). NULL with err (500) when out of
 * memory or the thread cannot start. */
api_mem *api_mem_create(size_t max_bytes, double idle_s, api_error *err);

/* Unmaps the cached blocks and stops the thread. Blocks still in use stay valid and are
 * unmapped when freed; the cache's record goes with the last of them. NULL does nothing. */
void api_mem_destroy(api_mem *m);

/* A 64-byte aligned block of at least bytes and at most max(bytes, most) bytes (*cap, when not
 * NULL, receives its capacity: use and count all of it), or NULL when out of memory. Its
 * contents are unspecified (a reused block holds what the last user left). m may be NULL: then
 * the block comes from aligned_alloc, capacity exactly bytes. Release with api_mem_free, from
 * any thread. */
void *api_mem_alloc(api_mem *m, size_t bytes, size_t most, size_t *cap);

/* The job memory budget: from now on api_mem_alloc_bounded's blocks in use together hold at most
 * budget bytes (SIZE_MAX, the default: no budget). Call before the blocks are asked for. NULL does
 * nothing. */
void api_mem_set_budget(api_mem *m, size_t budget);

/* As api_mem_alloc, but the block counts in the budget (api_mem_set_budget) at its capacity,
 * whatever its size (small blocks too), until it is freed; when it would pass the budget the
 * reclaimer (api_mem_set_reclaim) is asked to make room first, and if it still does not fit it
 * is refused: NULL, with *over_budget (may be NULL) set true, and counted in the stats' refused.
 * For what clients make a server hold: request bodies, jobs' arenas, batch workspaces, decode
 * sessions. m NULL: as api_mem_alloc(NULL, ...). */
void *api_mem_alloc_bounded(api_mem *m, size_t bytes, size_t most, size_t *cap, bool *over_budget);

/* Memory its holder can give back on demand (attnd's idle decode sessions): when a bounded
 * block would pass the budget, the cache calls fn(ctx, shortfall), without its lock and on the
 * asking thread, with the bytes that would make room; fn may free blocks (api_mem_free, never
 * api_mem_alloc_bounded) and returns the bytes it freed; when that is not 0 the block is asked
 * for once more. */
typedef size_t (*api_mem_reclaim_fn)(void *ctx, size_t shortfall);

/* Sets the reclaimer (fn NULL: none, the default). Call before blocks are asked for, and with
 * NULL before ctx goes. NULL m does nothing. */
void api_mem_set_reclaim(api_mem *m, api_mem_reclaim_fn fn, void *ctx);

/* Gives a block of api_mem_alloc back to its cache (or to the system). NULL does nothing. Its
 * signature fits libmicrohttpd's MHD_ContentReaderFreeCallback, with the block as the cls. */
void api_mem_free(void *block);

/* Unmaps the cached blocks that have been unused for idle_s seconds or more (0: all of them) now;
 * returns their bytes. NULL returns 0. */
size_t api_mem_trim(api_mem *m, double idle_s);

typedef struct api_mem_stats {
    size_t in_use_bytes, in_use_blocks; /* capacity handed out and not yet freed (cached sizes) */
    size_t cached_bytes, cached_blocks; /* free blocks kept for reuse */
    uint64_t hits;                      /* requests served by a cached block */
    uint64_t misses;                    /* requests that mapped a new block */
    uint64_t trimmed;                   /* cached blocks unmapped after idle_s */
    uint64_t evicted;                   /* cached blocks unmapped to stay within max_bytes */
    size_t budget_bytes;                /* the budget (api_mem_set_budget; SIZE_MAX: none) */
    size_t charged_bytes;               /* bytes of bounded blocks in use, of every size */
    uint64_t refused;                   /* bounded blocks refused for the budget */
} api_mem_stats;

/* The cache's counters now (zeros for NULL). Blocks under 128 KiB are not counted in in_use and
 * cached; bounded ones are in charged_bytes. */
api_mem_stats api_mem_stats_get(api_mem *m);

/* ---- Models ------------------------------------------------------------------------------- */

/* A named MHA parameter set (PyTorch nn.MultiheadAttention state_dict), float32, immutable once
 * made, so many jobs may read it at once. */
typedef struct api_model api_model;

/* The built-in model "demo": E = 64, H = 4, Xavier-uniform weights from the fixed seed 24301
 * (0x5EED): api_model_init_random("demo", 64, 4, 24301), so no biases. NULL with err on
 * allocation failure. */
api_model *api_model_demo(api_error *err);

/* A model of width e and h heads, named name, initialised deterministically from seed:
 * in_proj_weight (3E, E) uniform in +-sqrt(6 / (E + 3E)), then out_proj.weight (E, E) uniform in
 * +-sqrt(6 / (E + E)), both filled in row-major order from the splitmix64 stream of seed (each
 * uniform is (x >> 40) / 2^24 mapped to [-a, a)); zero biases. identity: all four projections the
 * identity, no bias, and seed ignored.
 * Exactly: state = seed; for each weight, state += 0x9E3779B97F4A7C15, z = state,
 * z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9, z = (z ^ z >> 27) * 0x94D049BB133111EB,
 * x = z ^ z >> 31, u = (x >> 40) / 2^24, weight = (float)(a * (2u - 1)) computed in double.
 * Biases are absent (has_bias false), which computes the same as zero biases. NULL with err
 * (400 invalid_model when e or h is 0 or E % H != 0, 500 out_of_memory). */
api_model *api_model_init_random(const char *name, size_t e, size_t h, uint64_t seed,
                                 api_error *err);
api_model *api_model_init_identity(const char *name, size_t e, size_t h, api_error *err);

/* The built-in model "lesson": 4 heads built by hand, named adjacent, subject, structure and
 * coreference, E = 256, with a vocabulary of Chinese words for the seed chapters' sentences and
 * 48 positions. It is api/lesson/lesson.safetensors (written by api/lesson/make_lesson.py,
 * explained in api/lesson/README.md), built into the library. NULL with err on allocation
 * failure. */
api_model *api_model_lesson(api_error *err);

/* The built-in model "induction": a 2-layer attention-only transformer (4 heads a layer,
 * E = 64) trained on random sequences of words in which a stretch repeats, with the lesson
 * model's kind of vocabulary (Chinese and English words), 64 positions, an unembedding and the
 * causal mask by default. It is api/induction/induction.safetensors (written by
 * api/induction/train_induction.py, explained with its measured heads in
 * api/induction/README.md), built into the library. NULL with err on allocation failure. */
api_model *api_model_induction(api_error *err);

/* Loads a safetensors file: the name is the file's stem, the tensors PyTorch state_dict names,
 * num_heads in __metadata__, dtypes F32, F16 or BF16 (converted to F32). A module made with
 * add_bias_kv has the tensors bias_k and bias_v (1, 1, E), both or neither; one made with
 * add_zero_attn says __metadata__ "add_zero_attn": "true" ("false", the default, without it:
 * its state_dict cannot tell). A model may carry a
 * vocabulary: __metadata__ "vocab" (a JSON list of V distinct token strings, in one metadata
 * string) with the tensor token_embeddings (V, E) and optionally position_embeddings (P, E); it
 * must then be a self-attention model (kdim = vdim = E). __metadata__ "head_names" (a JSON list
 * of num_heads distinct names) names the heads. path must be a regular file or a symlink to
 * one: anything else (a directory, FIFO, socket or device) is refused without being read, and
 * the file is opened without blocking, so a FIFO never holds the caller. NULL with err (status 0
 * is never returned; message names the file and what is wrong) on any problem: 400
 * invalid_model for the contents (also non-finite weights, overlapping or uncovered data, a bad
 * vocabulary or head name list) and for a file that is not a regular file ("PATH is a FIFO, not
 * a regular file"), 500 io_error or out_of_memory. */
api_model *api_model_load_file(const char *path, api_error *err);

/* The same from bytes in memory (the file's contents); name is the model's name. */
api_model *api_model_from_safetensors(const char *name, const uint8_t *bytes, size_t len,
                                      api_error *err);

void api_model_destroy(api_model *m); /* NULL does nothing */

typedef struct api_model_info {
    const char *name;
    const char *source; /* "builtin" or "file" */
    size_t embed_dim, num_heads, kdim, vdim;
    bool has_bias;
    bool add_bias_kv;   /* bias_k and bias_v are appended as a key and value (PyTorch's) */
    bool add_zero_attn; /* a zero key and value are appended after them (PyTorch's) */
    size_t vocab_size;  /* tokens of its vocabulary; 0 when it has none */
    size_t max_tokens;  /* rows of its position table: the most words a request may send; 0 when
                           it has none (then only max_dim limits them) */
    size_t num_layers;  /* a model of layers: how many; 0 for a model of one MHA */
    bool unembedding;   /* a model of layers with lm_head: its replies predict the next token */
} api_model_info;

api_model_info api_model_describe(const api_model *m);

/* The models a server holds. Not thread-safe to modify; read-only once serving. */
typedef struct api_registry api_registry;

api_registry *api_registry_create(void);
void api_registry_destroy(api_registry *r); /* destroys the models too; NULL does nothing */

/* Takes ownership of m (also on failure, when it destroys m). The first model added is the
 * default. Fails (status 500, code "duplicate_model") on a name already present, and (400
 * invalid_model) on the name "sdpa", which the Open Inference Protocol's SDPA model holds. */
int api_registry_add(api_registry *r, api_model *m, api_error *err);

/* Makes name the default; -1 with err (code "unknown_model") when absent. */
int api_registry_set_default(api_registry *r, const char *name, api_error *err);

const api_model *api_registry_find(const api_registry *r, const char *name); /* borrowed */

/* The index of the model named name (as api_job_model_index counts it): its place in the
 * registry, api_registry_count(r) for "sdpa", API_NO_MODEL when there is none. */
size_t api_registry_index(const api_registry *r, const char *name);
const api_model *api_registry_default(const api_registry *r); /* borrowed */
size_t api_registry_count(const api_registry *r);
const api_model *api_registry_at(const api_registry *r, size_t i);

/* Appends the GET /v1/models body to out: per model its name, widths, source, has_bias,
 * vocab_size (0 when none), max_tokens (only with a position table), head_names (only when
 * named), and add_bias_kv and add_zero_attn (only when true). */
void api_registry_list_json(const api_registry *r, api_buf *out);

/* Appends the GET /v1/models/{name} body to out: what the list says of the model, plus
 * "default" (a boolean) and "vocab" (its tokens in id order; [] when none). 0, or -1 with err:
 * 404 unknown_model (field null) when no model is named name, 500 out_of_memory. */
int api_registry_model_json(const api_registry *r, const char *name, api_buf *out, api_error *err);

/* ---- Jobs --------------------------------------------------------------------------------- */

typedef enum api_op {
    API_OP_ATTENTION, /* POST /v1/attention */
    API_OP_SDPA,      /* POST /v1/sdpa */
} api_op;

typedef struct api_limits {
    size_t max_job_bytes; /* memory of one job: decoded tensors, workspace, outputs, and the
                             bound of its response body (api_job_response_bytes) */
    size_t max_dim;       /* largest size of any one tensor dimension */
    size_t max_heads;     /* largest num_heads (and H of SDPA) */
    size_t nslots;        /* threads one job may use: attn_pool_slots of the compute pool */
    size_t max_depth;     /* deepest nesting of arrays and objects in a body; 0 = the default */
    double max_job_flops; /* most api_job_flops of one job; 0 = no limit */
    api_mem *mem; /* where the job's arena, batch workspace and response buffer come from (not
                     owned); NULL: malloc, freed after each job */
} api_limits;

#define API_MAX_HEADS 65536 /* the largest max_heads honoured; a larger one counts as this */

/* "trace": true is for small jobs: each of its maps (N, H, L, S) and its widest other step
 * (attention: N max(L,S) E; sdpa: N H max(L,S) max(D,Dv)) may hold at most this many floats;
 * a larger job with trace is 400 invalid_field naming "trace". */
#define API_TRACE_MAX_CELLS 65536

/* max_job_bytes 1 GiB, max_dim 65536, max_heads 256 (at most API_MAX_HEADS), nslots 1,
 * max_depth 64, no FLOP limit, no memory cache. A job over any of the first three, or over
 * max_job_flops, is refused with 413 job_too_large, the message naming the limit (max_job_flops:
 * from the shapes, before any tensor is decoded); a body nested deeper than max_depth (at most
 * 1024; no request needs more than 6) with 400 invalid_json naming max_depth, before anything is
 * allocated. */
api_limits api_limits_default(void);

/* A parsed, validated job. Owns one arena holding its decoded tensors, the libattn workspace and
 * the outputs; its size plus the bound of its response is checked against max_job_bytes before
 * it is allocated. With lim->mem the arena is a block of that cache, of a capacity that still
 * fits max_job_bytes with the response's bound (api_job_bytes gives the capacity). */
typedef struct api_job api_job;

/* Parses body (len bytes, JSON) for op, resolves the model (attention), checks every field
 * against the API v1 contract and lim, and decodes every tensor ("tokens" or "text": looks the
 * words up and writes their embeddings; a seeded input, {"init": "uniform", "seed", "shape"},
 * gets its room in the arena and is made by api_job_run). Returns the job, or NULL with err: 400
 * (invalid_json, invalid_field, non_finite, unknown_token, ...), 404 unknown_model, 413
 * job_too_large (the message says which limit, and for max_job_bytes the working memory and the
 * response size), 503 memory_budget (its arena, a bounded block of lim->mem, does not fit the
 * cache's budget now), 500 out_of_memory. Its time is bounded by len, never by the shapes the body
 * declares: every check against the limits costs O(1) per field (O(N) for key_lengths, given in the
 * body) and comes before any work proportional to a declared size. Borrows models: keep it alive
 * and unchanged while the job lives. */
api_job *api_job_parse(api_op op, const char *body, size_t len, const api_registry *models,
                       const api_limits *lim, api_error *err);

/* Runs the job on libattn with pool (may be NULL; at most lim->nslots slots), first making its
 * seeded inputs and params.init weights (parsing makes none: its time is bounded by the body).
 * 0, or -1 with err (400 numeric_overflow when float32 overflowed, 500 otherwise). Call once. */
int api_job_run(api_job *job, attn_pool *pool, api_error *err);

/* Appends the 200 response body of a job that ran to out, with the usage times given: at most
 * api_job_response_bytes(job) bytes. When out has less room than that plus API_RESPOND_SLACK
 * bytes, it first grows it to exactly that (one allocation; none while writing): from the job's
 * memory cache (lim->mem of its parse; out->block is then set) when it has one, else with
 * realloc. 0, or -1 with err (500 out_of_memory; out->len is then unchanged). */
int api_job_respond(const api_job *job, double queue_ms, double compute_ms, api_buf *out,
                    api_error *err);

#define API_RESPOND_SLACK 64 /* room api_job_respond's buffer has beyond the response's bound */

/* The most bytes api_job_respond appends for job: a bound computed by api_job_parse from the
 * shapes, the encoding and the tensors the reply carries ("outputs") alone, before compute
 * (JSON floats at 17 bytes each with their comma, top-k indices at 11, base64 exact, the fixed
 * text, the model's name escaped at its widest and the integers and times at theirs; a tensor
 * "outputs" leaves out counts nothing, so "outputs": [] bounds a reply by a few hundred bytes).
 * api_job_parse counts it with the arena against max_job_bytes, so a server can hold it (reserve
 * it) from parse until the reply is sent: an empty buffer given to api_job_respond ends with a
 * capacity of exactly this plus API_RESPOND_SLACK. 0 for NULL. */
size_t api_job_response_bytes(const api_job *job);

/* What usage.flops reports: the plan's FLOPs (the projections and the attended cells) plus the
 * cost of making params.init weights (4 E^2 of them, each counted as a measured number of FLOP:
 * api/models/models.h), whether or not a thread had them cached, and of making seeded inputs
 * (each element counted as a measured number of FLOP: api/v1/v1.h). 0 for NULL. */
double api_job_flops(const api_job *job);

/* The job's own work: the plan's FLOPs and making its seeded inputs, which every job makes
 * anew (api_job_flops without making params.init weights, which a thread may have cached). 0
 * for NULL. */
double api_job_plan_flops(const api_job *job);

/* The params.init weights ("identity", or "random" with a seed) of at most this many floats
 * (4 E^2: E <= 256): each thread that runs jobs (api_job_run, api_jobs_run) keeps those of its
 * last job and reuses them while its next jobs have the same init, seed and E (another set
 * replaces them): at most 1 MiB per thread, freed when the thread exits. Larger ones are made
 * in each job's (or batch's first job's) arena. */
#define API_INIT_CACHE_FLOATS ((size_t)1 << 18)

/* True when job's parameters cost little beyond its flops: a registry model's or inline
 * tensors, or params.init weights that fit the per-thread cache (API_INIT_CACHE_FLOATS: made
 * when the thread's last job had other ones, at most 1 MiB of them). False for NULL. */
bool api_job_params_cheap(const api_job *job);
size_t api_job_rows(const api_job *job); /* query rows, N*L: what a batch's size counts */

/* True when a and b can run as one batch (api_jobs_run): both are POST /v1/attention jobs that
 * have not run, on the same parameters (the same registry model, or params.init "identity", or
 * "random" with the same seed, on the same E and H), planned for the same slots. Jobs with
 * inline parameter tensors never batch (telling their weights equal would cost a pass over
 * them), nor do jobs with "trace" or with keys appended after the projections (add_bias_kv,
 * add_zero_attn). NULL is batchable with nothing. */
bool api_jobs_batchable(const api_job *a, const api_job *b);

/* Runs count jobs as one batch (attn_mha_batch_forward): their projections as one GEMM over all
 * their rows, their attention each with its own masks and options. Every job must be
 * api_jobs_batchable with jobs[0]; one that is not runs alone. Each job ends as api_job_run
 * leaves it: ran, or failed with errs[i] (count records, caller-owned, zeroed) filled, and a
 * job that fails does not affect the others. The batch's workspace (one allocation, from
 * jobs[0]'s memory cache when it has one, freed before return) is capped at max_bytes (0 = no
 * cap); over it, or when it cannot be allocated, the jobs run one by one. Returns how many jobs
 * failed. */
size_t api_jobs_run(api_job *const *jobs, size_t count, attn_pool *pool, size_t max_bytes,
                    api_error *errs);
size_t api_job_bytes(const api_job *job); /* the arena's capacity (the response not included) */

/* The request's own queue deadline in seconds from its arrival (the Open Inference Protocol's
 * "timeout" parameter, given in microseconds); 0 when it set none (then only the server's own
 * applies). 0 for NULL. */
double api_job_timeout(const api_job *job);

/* The model a job is counted under in metrics and statistics: its registry model's index
 * (api_registry_at), api_registry_count(models) for a job of the Open Inference Protocol's
 * "sdpa" model, or API_NO_MODEL for a job with none (inline or params.init parameters,
 * POST /v1/sdpa). API_NO_MODEL for NULL. */
#define API_NO_MODEL ((size_t)-1)
size_t api_job_model_index(const api_job *job, const api_registry *models);
api_op api_job_op(const api_job *job); /* attention or SDPA (API_OP_ATTENTION for NULL) */
/* Whether running the job changes state: a decode session's append (POST /v1/sessions/{id}, or
 * a v2 infer with sequence parameters). Such a job is never shared with an identical request,
 * nor repeated. False for NULL. */
bool api_job_stateful(const api_job *job);
void api_job_destroy(api_job *job); /* NULL does nothing */

/* ---- Decode sessions (api/session/, and API v1's session routes) ----------------------------- */

/* Generation a token at a time: a session keeps the keys and values of every row appended so
 * far (a key/value cache, attention.h's "Decode sessions"), so that an append computes only its
 * new rows' outputs, over every key so far, as one causal POST /v1/attention on the whole
 * sequence would give them (within 1e-6 of each tensor's largest magnitude, not bit for bit).
 *
 *     api_sessions *ss = api_sessions_create(256, 300.0, mem, &err);  // --max-sessions, -ttl
 *     api_session_open(ss, key, body, len, models, &lim, &buf, &err);  // POST /v1/sessions: 201
 *     api_job *job = api_session_append(ss, key, id, body, len, models, &lim, &err);
 *     api_job_run(job, pool, &err);                                    // on a worker
 *     api_job_respond(job, queue_ms, compute_ms, &buf, &err);          // the new rows' outputs
 *     api_job_destroy(job);                                            // the session is free
 *     api_sessions_destroy(ss);                                        // every session ends
 *
 * A session belongs to the API key that opened it (its index, owner; 0 without keys): another
 * key finds it exactly as an unknown id is found, through the same comparisons of every record
 * in constant time, and gets the same 404 session_unknown. One append at a time per session: a
 * second gets 409 session_busy until the first's job ends. A session's bytes (its cache and
 * inline parameters) are a bounded block of the job memory (api_mem_alloc_bounded); idle
 * sessions give way to whatever the budget cannot otherwise fit (the memory's reclaimer), least
 * recently used first. */
typedef struct api_sessions api_sessions;

/* Why a session ended (its counts in api_sessions_stats). */
typedef enum api_session_end {
    API_SESSION_END_TTL = 0, /* idle for the time-out */
    API_SESSION_END_LRU,     /* the least recently used idle one, for a new one at the limit */
    API_SESSION_END_BUDGET,  /* idle, its memory taken for a block the budget could not fit */
    API_SESSION_END_DELETED, /* DELETE, or a v2 sequence's end or restart */
    API_SESSION_END_COUNT
} api_session_end;

/* The names of the reasons, by api_session_end: "ttl", "lru", "budget", "deleted". */
extern const char *const api_session_end_names[API_SESSION_END_COUNT];

/* A store of at most max_sessions sessions (0: none may open) that end after ttl_s seconds
 * without an append (ttl_s <= 0: never; a thread of the store ends them), whose blocks come
 * from mem (the store becomes mem's reclaimer: see api_mem_set_reclaim; mem NULL: malloc'd,
 * no budget). NULL with err (500) when out of memory or the thread cannot start. */
api_sessions *api_sessions_create(size_t max_sessions, double ttl_s, api_mem *mem, api_error *err);

/* Ends every session (their blocks go back to mem) and frees the store. Call when no job holds
 * a session (after the workers are idle). NULL does nothing. */
void api_sessions_destroy(api_sessions *s);

typedef struct api_sessions_stats {
    size_t open;      /* sessions now (idle or busy) */
    size_t max;       /* max_sessions */
    size_t bytes;     /* their blocks' capacities: what they hold of the job memory */
    double ttl_s;     /* the time-out (0: none) */
    uint64_t opened;  /* sessions opened */
    uint64_t appends; /* appends computed */
    uint64_t ended[API_SESSION_END_COUNT]; /* sessions ended, by reason */
} api_sessions_stats;

/* The store's counts now (zeros for NULL). */
api_sessions_stats api_sessions_stats_get(api_sessions *s);

/* The bytes of the store's records for max_sessions sessions, beside their blocks (the memory
 * plan's fixed share). */
size_t api_sessions_record_bytes(size_t max_sessions);

/* POST /v1/sessions: opens a session for owner from the body (len bytes: model or params with
 * num_heads, max_length; see api/openapi.yaml), and appends the 201 body (apip_session_json's:
 * id, length 0, max_length, bytes, model, widths, ttl_s, expires_in_s) to out. 0, or -1 with
 * err: 400 (invalid_json, invalid_field), 404 unknown_model, 413 job_too_large (the session's
 * bytes over lim->max_job_bytes), 503 session_limit, 503 memory_budget, 500 out_of_memory. */
int api_session_open(api_sessions *s, uint32_t owner, const char *body, size_t len,
                     const api_registry *models, const api_limits *lim, api_buf *out,
                     api_error *err);

/* POST /v1/sessions/{id}: the append of the body (query rows, or tokens / text for a model with
 * a vocabulary; need_weights, heads, weights_top_k, trace, encoding, outputs; expected_length)
 * to owner's session id (a NUL-terminated string), as a job that holds the session until
 * api_job_destroy: api_job_run appends the rows, api_job_respond writes their outputs (as
 * POST /v1/attention's body, and "length", the session's rows after it). NULL with err: as
 * api_job_parse, and 404 session_unknown, 409 session_busy, 409 length_mismatch (expected_length
 * is not the length), 409 session_full (the rows do not fit max_length). */
api_job *api_session_append(api_sessions *s, uint32_t owner, const char *id, const char *body,
                            size_t len, const api_registry *models, const api_limits *lim,
                            api_error *err);

/* GET /v1/sessions/{id}: appends owner's session id's JSON (as api_session_open's) to out. 0,
 * or -1 with err: 404 session_unknown. */
int api_session_get(api_sessions *s, uint32_t owner, const char *id, api_buf *out, api_error *err);

/* DELETE /v1/sessions/{id}: ends owner's session id, its block given back at once (when an
 * append holds it, when that append's job ends). 0, or -1 with err: 404 session_unknown. */
int api_session_delete(api_sessions *s, uint32_t owner, const char *id, api_error *err);

/* The 404 every unknown, ended or other key's session gets (its code, session_unknown, and its
 * one message), for v1 and v2 alike. Returns -1. */
int api_session_unknown(api_error *err);

/* ---- The Open Inference Protocol (KServe v2: v2.c, v2_reply.c) ---------------------------- */

/* The REST routes of the Open Inference Protocol ("KServe v2"), beside API v1, as Triton and
 * KServe serve them: server and model metadata, readiness, and inference on the registry's
 * models (MHA with the model's weights) and on "sdpa" (scaled dot-product attention on given
 * q, k and v), with tensors as flat JSON "data" arrays or as raw little-endian bytes after the
 * JSON (the binary tensor data extension). An infer request becomes the same api_job as the
 * equivalent POST /v1/attention or /v1/sdpa request: the same checks, limits, plan and
 * batching, so the answers are the same bits; only the response's form differs.
 *
 *     // POST /v2/models/demo/infer, Inference-Header-Content-Length: hlen
 *     api_job *job = api_v2_parse(body, len, hlen, "demo", NULL, models, &lim, NULL, 0, &err);
 *     if (!job) { api_v2_error_body(&err, &buf); reply(err.status, buf); }
 *     api_job_run(job, pool, &err);
 *     api_job_respond(job, queue_ms, compute_ms, &buf, &err);  // the v2 response
 *     reply(200, buf, "Inference-Header-Content-Length: " buf.len - api_job_binary_bytes(job));
 */

#define API_V2_SDPA_MODEL "sdpa"       /* the model name of raw SDPA; no registry model takes it */
#define API_V2_VERSION    "1"          /* the one version every model has */
#define API_V2_NO_HEADER  ((size_t)-1) /* api_v2_parse: no Inference-Header-Content-Length */

/* Appends {"error": message} (the protocol's error body) to out. */
void api_v2_error_body(const api_error *err, api_buf *out);

/* Appends the server metadata (GET /v2): {"name": "attnd", "version": version, "extensions":
 * [...]}, the extensions attnd serves: binary_tensor_data, parameters, schedule_policy (the
 * priority and timeout parameters), model_configuration, statistics, and sequence and
 * sequence(string_id) (sequence_id, a uint64 or a string, sequence_start and sequence_end, on
 * the decode sessions). */
void api_v2_server_json(const char *version, api_buf *out);

/* How the server runs jobs, as a model's configuration reports it (Triton's instance_group and
 * dynamic_batching). */
typedef struct api_v2_serving {
    size_t instances;       /* worker threads: jobs computed at once */
    size_t batch_window_us; /* how long a batch waits for more jobs; 0 = no batching */
    size_t max_batch_rows;  /* query rows (N*L) one batch takes at most */
    size_t max_queue;       /* jobs waiting for a worker at most */
    double request_timeout; /* seconds a job may wait from its arrival (a "timeout" lowers it) */
} api_v2_serving;

/* Appends the model configuration (GET /v2/models/{name}[/versions/{version}]/config, Triton's
 * model configuration extension, its JSON form of model_config.proto as far as it applies):
 * name, platform and backend "attnd", max_batch_size 0 (N is a dimension of the tensors), input
 * and output with data_type and dims as the metadata gives them, instance_group, and for a
 * registry model dynamic_batching with its default queue policy; parameters hold the model's
 * widths and heads as strings. 0, or -1 with err as api_v2_model_check. */
int api_v2_model_config_json(const api_registry *r, const char *name, const char *version,
                             const api_v2_serving *serving, api_buf *out, api_error *err);

/* A cumulative count of events and their nanoseconds (Triton's duration statistic). */
typedef struct api_v2_duration {
    uint64_t count, ns;
} api_v2_duration;

/* One model's inference statistics since the server started. */
typedef struct api_v2_model_stats {
    uint64_t last_inference_ms;     /* Unix milliseconds of the last request answered; 0 = none */
    uint64_t inference_count;       /* successful requests */
    uint64_t execution_count;       /* runs of the model: a batch of several requests is one */
    api_v2_duration success;        /* successful requests, from arrival to the reply sent */
    api_v2_duration fail;           /* failed requests (any status but 200), likewise */
    api_v2_duration queue;          /* jobs' waits for a worker */
    api_v2_duration compute_input;  /* parsing the request into a job */
    api_v2_duration compute_infer;  /* computing */
    api_v2_duration compute_output; /* writing the response */
} api_v2_model_stats;

/* Appends the inference statistics (GET /v2/models/stats, and /v2/models/{name}[/versions/
 * {version}]/stats: Triton's statistics extension) {"model_stats": [...]}: of every model
 * (name NULL; registry order, "sdpa" last) or of the one named. stats holds
 * api_registry_count(r) + 1 records, in api_registry_index's order. 0, or -1 with err as
 * api_v2_model_check. */
int api_v2_stats_json(const api_registry *r, const char *name, const char *version,
                      const api_v2_model_stats *stats, api_buf *out, api_error *err);

/* Checks that the model name (and version, NULL when the path gives none) can be served: 0,
 * or -1 with err (404 unknown_model for a model the registry lacks, other than "sdpa", or a
 * version other than "1"). */
int api_v2_model_check(const api_registry *r, const char *name, const char *version,
                       api_error *err);

/* Appends the model metadata (GET /v2/models/{name}[/versions/{version}]): name, versions,
 * platform, and its inputs and outputs with datatype and shape (-1 for a dimension the request
 * chooses). 0, or -1 with err as api_v2_model_check. */
int api_v2_model_json(const api_registry *r, const char *name, const char *version, api_buf *out,
                      api_error *err);

/* Appends the model readiness body {"name", "ready": true}; as api_v2_model_json. */
int api_v2_model_ready_json(const api_registry *r, const char *name, const char *version,
                            api_buf *out, api_error *err);

/* Appends the repository index (POST /v2/repository/index): every model with its version and
 * state "READY", "sdpa" last. */
void api_v2_index_json(const api_registry *r, api_buf *out);

/* Parses the body (len bytes) of POST /v2/models/{name}[/versions/{version}]/infer: its first
 * header_len bytes are the JSON inference request (API_V2_NO_HEADER: the whole body), followed
 * by the raw bytes of the inputs that declare "binary_data_size", in the order of "inputs".
 * Every input, parameter and output is checked (datatype, shape against the data, sizes of
 * binary data against the bytes after the JSON, which must be used up exactly), then the job
 * is made as api_job_parse makes the equivalent v1 job. With Triton's sequence parameters
 * (sequence_id other than 0 or "", sequence_start, sequence_end) the request is an append to
 * the sequence's session in sessions, owner's (api_session_append's job: its rows' outputs;
 * sequence_start opens it, sequence_end ends it after the job); sessions NULL refuses them. NULL
 * with err: 400 (the message says what is wrong), 404 unknown model or version, 404
 * session_unknown (a sequence not running), 409 session_busy, 413 job_too_large, 503
 * memory_budget or session_limit, 500 out_of_memory. */
api_job *api_v2_parse(const char *body, size_t len, size_t header_len, const char *name,
                      const char *version, const api_registry *models, const api_limits *lim,
                      api_sessions *sessions, uint32_t owner, api_error *err);

/* The raw tensor bytes at the end of job's response (the binary tensor data extension): its
 * JSON part is the response's length less these. 0 for NULL, a v1 job, or a v2 job whose
 * outputs are all JSON. */
size_t api_job_binary_bytes(const api_job *job);

/* ---- Encodings (exposed for tests and fuzzing) -------------------------------------------- */

/* Writes the shortest decimal that reads back as f when parsed as a double and rounded to
 * float32 (what JSON parsers do), at most 9 significant digits, into buf (at least 32 bytes).
 * Among decimals of that length it is the nearest that reads back: the correctly rounded one,
 * or, at a power of two where that one misses below (the gap below f is half the gap above),
 * the decimal a unit above it ("1.2621775e-29" for 2^-96). Fixed notation for decimal
 * exponents -5 to 8 ("0.00012", "1234.5"), else "1.5e-7" / "3.4028235e38"; "-0" for -0.
 * f must be finite. Returns the length (no terminating NUL). */
size_t api_float_write(char *buf, float f);

/* Writes ms (in [0, 1e12]) with 3 decimals, the last rounded half up from the double's product
 * by 1000 ("12.345"; printf's "%.3f", which rounds the exact value, is one thousandth lower
 * where that product rounds onto a half, as for 1.0005), into buf (at least API_MS_MAX bytes).
 * The replies' usage and the access log write their milliseconds so. Returns the length (no
 * terminating NUL). */
#define API_MS_MAX 17 /* "1000000000000.000" */
size_t api_ms_write(char *buf, double ms);

/* Standard base64 (RFC 4648, with padding). api_base64_decode fails (returns false) on a
 * character outside the alphabet, bad padding (also nonzero bits in a padded group) or a length
 * that is not a multiple of 4; *out_len receives the decoded length. out must hold
 * api_base64_decoded_max(in_len) bytes; nothing is written past the decoded length. */
size_t api_base64_encoded_len(size_t n);
void api_base64_encode(char *out, const uint8_t *in, size_t n);
size_t api_base64_decoded_max(size_t in_len);
bool api_base64_decode(uint8_t *out, size_t *out_len, const char *in, size_t in_len);

#ifdef __cplusplus
}
#endif

#endif
