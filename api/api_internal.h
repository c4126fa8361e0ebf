/* api_internal.h - private declarations shared by the api/ sources: checked sizes, the JSON reader
 * (a validating scanner plus navigation over validated text), number parsing, the tensor
 * decoder, model internals and the job record. Nothing here is part of api.h's contract.
 *
 * Legend (shapes outermost first, row-major): N batch, L query length, S key length,
 * E embedding width, H heads, D/Dv query-key and value widths (SDPA), K top-k count. */
#ifndef ATTND_API_INTERNAL_H
#define ATTND_API_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"

/* ---- Checked sizes ------------------------------------------------------------------------ */

/* *out = a * b (or a + b); false when it does not fit in size_t (then *out is unspecified). */
static inline bool apip_mul(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool apip_add(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* ---- Buffers ------------------------------------------------------------------------------ */

/* Makes room for n more bytes and returns where they start (b->len is unchanged: the caller
 * writes, then adds what it wrote to b->len). NULL, with b->failed set, when memory runs out
 * or b->failed was already set. */
char *apip_buf_reserve(api_buf *b, size_t n);

/* Makes room for n more bytes with one allocation of exactly len + n bytes when the buffer
 * has less (none when it has enough). false, with b->failed set, when memory runs out or
 * b->failed was already set. */
bool apip_buf_reserve_exact(api_buf *b, size_t n);

/* As apip_buf_reserve_exact, but a buffer that has to grow gets a block of mem (exactly len + n
 * bytes of capacity; its contents are copied, b->block set). mem NULL: apip_buf_reserve_exact. */
bool apip_buf_reserve_block(api_buf *b, size_t n, api_mem *mem);

/* Appends a NUL-terminated string. */
void apip_buf_puts(api_buf *b, const char *s);

/* ---- Job memory (mem.c) ------------------------------------------------------------------- */

/* The capacity of a block of api_mem_alloc; 0 for NULL. */
size_t apip_mem_capacity(const void *block);

/* The cache a block of api_mem_alloc returns to; NULL for NULL and for a block from malloc. */
api_mem *apip_mem_owner(const void *block);

/* Appends v in decimal. */
void apip_buf_put_u64(api_buf *b, uint64_t v);

/* Appends a job's FLOPs rounded to an integer, as both responses report it: 0 for a count that
 * is not positive (or NaN), UINT64_MAX past it. At most APIP_U64_DIGITS bytes. */
void apip_buf_put_flops(api_buf *b, double flops);

/* Appends a duration in milliseconds as api_ms_write writes it; "0.000" for -0 and for a
 * negative, NaN or absurd (> 1e12) value. At most APIP_MS_DIGITS bytes. */
void apip_buf_put_ms(api_buf *b, double ms);

#define APIP_U64_DIGITS 20 /* 18446744073709551615 */
#define APIP_I32_DIGITS 10 /* 2147483647: a top-k index */
#define APIP_MS_DIGITS  API_MS_MAX

/* ---- Numbers out -------------------------------------------------------------------------- */

/* Writes v[0, n) as api_float_write does, separated by commas; returns the end. o must have
 * room for APIP_FLOAT_MAX * n + 32 bytes (the writer may scribble up to 32 bytes past the end). */
#define APIP_FLOAT_MAX 17 /* the longest number written, plus its comma: "-0.0000123456789," */
char *apip_floats_write(char *o, const float *v, size_t n);

/* ---- JSON reader -------------------------------------------------------------------------- */

#define APIP_JSON_MAX_DEPTH   64 /* deeper nesting is invalid_json: no request needs more than 8 */
#define APIP_JSON_MAX_MEMBERS 64 /* members of the root object recorded by apip_json_check */

#define APIP_JSON_DEPTH_CAP 1024 /* the most apip_json_check_depth allows (the check recurses) */

/* A byte range [p, e). For a string it is the raw content between the quotes (escapes kept). */
typedef struct apip_span {
    const char *p, *e;
} apip_span;

typedef struct apip_json_member {
    apip_span key; /* raw key content */
    const char *val;
    const char *val_end;
} apip_json_member;

/* The root object's members, in order, as apip_json_check found them. */
typedef struct apip_json_root {
    apip_json_member m[APIP_JSON_MAX_MEMBERS];
    size_t n;
    bool overflow; /* more members than APIP_JSON_MAX_MEMBERS */
} apip_json_root;

/* Checks that s (len bytes) is one JSON value per RFC 8259 (UTF-8, no BOM, nesting at most
 * APIP_JSON_MAX_DEPTH) and that it is an object; fills root with its members. 0, or -1 with err
 * (400 invalid_json, the message giving line, column and what is wrong). what names the text
 * in messages ("the request body"). Never reads outside s[0, len). */
int apip_json_check(const char *s, size_t len, const char *what, apip_json_root *root,
                    api_error *err);

/* The same with a nesting limit of max_depth levels (the root object is level 1; 0 means
 * APIP_JSON_MAX_DEPTH, and more than APIP_JSON_DEPTH_CAP means the cap). Deeper text is 400
 * invalid_json with a message naming the max_depth limit; the check stops at the limit, so its
 * recursion (and stack) is bounded by it, whatever the text holds. */
int apip_json_check_depth(const char *s, size_t len, const char *what, size_t max_depth,
                          apip_json_root *root, api_error *err);

/* apip_json_check_depth with row_check for rows of numbers (apip_num_row_check, or one of
 * apip_rows_impls' checks; NULL: every number byte by byte). The same verdict and error
 * whatever row_check is: it only accepts valid rows, and what it refuses is checked again byte
 * by byte. For tests. */
int apip_json_check_with(const char *s, size_t len, const char *what, size_t max_depth,
                         const char *(*row_check)(const char *p, const char *e),
                         apip_json_root *root, api_error *err);

/* The functions below navigate text that apip_json_check accepted; p points at the first byte
 * of a value (never whitespace). They do not re-check syntax. */

/* The first byte at or after p that is not JSON whitespace. */
const char *apip_jv_ws(const char *p);

/* The kind of the value at p: '{', '[', '"', 't', 'f', 'n', or '0' for a number. */
char apip_jv_kind(const char *p);

/* The end (one past the last byte) of the value starting at p. */
const char *apip_jv_end(const char *p);

/* Iterates the members of the object at p ('{'): call with *it = p, then apip_jv_obj_next until
 * it returns false. key is the raw key content, *val the member's value. */
bool apip_jv_obj_next(const char **it, apip_span *key, const char **val);

/* Iterates the elements of the array at p ('['), as apip_jv_obj_next. */
bool apip_jv_arr_next(const char **it, const char **val);

/* The raw content of the string at p ('"'). */
apip_span apip_jv_string(const char *p);

/* Decodes the raw string content s (escapes resolved, UTF-8) into out, NUL-terminated and cut
 * at a character boundary to fit cap (cap >= 1). Returns the full decoded length, which is
 * >= cap when the string was cut. */
size_t apip_jv_decode(apip_span s, char *out, size_t cap);

/* Decodes characters of raw string content from *p (before e) into out, at most cap bytes and
 * never splitting a character; advances *p past what it decoded. Returns the bytes written. */
size_t apip_jv_decode_some(const char **p, const char *e, char *out, size_t cap);

/* True when the raw string content s decodes to exactly lit. */
bool apip_jv_streq(apip_span s, const char *lit);

/* Parses the number at p as a double, rounded correctly (what a JSON parser does); *end gets
 * its end. Overflow gives +-inf. */
double apip_jv_number(const char *p, const char **end);

/* The number at p as float32: exactly (float)apip_jv_number(p, end), without strtod for up to
 * 19 digits. Overflow gives +-inf. */
float apip_jv_float(const char *p, const char **end);

/* The number at p (in validated text; [p, lim) may be read in 8-byte loads) as apip_jv_float
 * reads it; *end gets its end. */
float apip_num_read(const char *p, const char *lim, const char **end);

/* The float of (-1)^neg w 10^e (w of at most 19 digits), the number [p, q) in validated text,
 * as apip_jv_float reads it. */
float apip_num_decimal(bool neg, uint64_t w, long e, const char *p, const char *q);

/* Reads up to n float numbers of an array's row from p (its first element, or the one after a
 * comma) into dst, as apip_jv_float does, and returns how many: a loop with no call per number.
 * [p, lim) may be read in 8-byte loads (lim <= p: byte by byte). It stops early at an element
 * that is not a number or not finite (for the caller's checks and messages) and at the row's
 * end; *end gets where it stopped: the next element to read, or the closing bracket. */
size_t apip_jv_float_row(const char *p, const char *lim, float *dst, size_t n, const char **end);

/* The end of the row of numbers whose first element starts at p ('-' or a digit), one past its
 * closing ']', when [p, e) holds the whole row and it is valid JSON: numbers separated by
 * commas, with whitespace around them. NULL when it is not, or when the row holds anything but
 * numbers; apip_json_check then checks it byte by byte. Never reads outside [p, e). */
const char *apip_num_row_check(const char *p, const char *e);

/* The commas in [p, e), or -1 when one of '[', '{', '}', '"' is there: for a row with no
 * nested value or string, one less than its elements. Reads exactly [p, e). */
long apip_num_row_commas(const char *p, const char *e);

/* Instruction sets the SIMD paths of api/ need (cpu.c), as bits for apip_cpu_has. */
enum {
    APIP_CPU_AVX512F = 1u << 0,
    APIP_CPU_AVX512BW = 1u << 1,
    APIP_CPU_AVX512DQ = 1u << 2,
    APIP_CPU_AVX512VL = 1u << 3,
    APIP_CPU_AVX512CD = 1u << 4,
    APIP_CPU_AVX512VBMI = 1u << 5,
    APIP_CPU_AVX512VBMI2 = 1u << 6,
    APIP_CPU_BMI = 1u << 7,
    APIP_CPU_BMI2 = 1u << 8,
    APIP_CPU_POPCNT = 1u << 9,
};

/* True when this CPU has every instruction set in features (a set of APIP_CPU_ bits; asked once,
 * then cached; thread-safe). Always false off x86-64 or without GCC's or clang's builtins. */
bool apip_cpu_has(unsigned features);

/* A way of checking and reading rows of numbers (rows.c): with AVX-512, SSE2, or neither. */
typedef struct apip_rows_impl {
    const char *name;                                   /* "avx512", "sse2", "portable" */
    const char *(*check)(const char *p, const char *e); /* as apip_num_row_check; NULL: none */
    size_t (*read)(const char *p, const char *lim, float *dst, size_t n,
                   const char **end);             /* as apip_jv_float_row, for any n and lim */
    long (*commas)(const char *p, const char *e); /* as apip_num_row_commas */
} apip_rows_impl;

/* The implementations this CPU runs, best first (the one apip_num_row_check and
 * apip_jv_float_row use), *n of them: for tests, which run them all. */
const apip_rows_impl *apip_rows_impls(size_t *n);

/* A way of encoding and decoding base64 (base64.c): with AVX-512 VBMI, or portable C. */
typedef struct apip_base64_impl {
    const char *name;                                       /* "vbmi", "portable" */
    void (*encode)(char *out, const uint8_t *in, size_t n); /* as api_base64_encode */
    bool (*decode)(uint8_t *out, size_t *out_len, const char *in,
                   size_t in_len); /* as api_base64_decode */
} apip_base64_impl;

/* The base64 implementations this CPU runs, best first (the one api_base64_encode and
 * api_base64_decode use), *n of them: for tests, which run them all. */
const apip_base64_impl *apip_base64_impls(size_t *n);

/* True when the number at p is a plain non-negative integer (digits only) that fits in a
 * uint64_t; then *out holds it. (Files' headers; request fields follow apip_jv_int.) */
bool apip_jv_u64(const char *p, uint64_t *out);

enum { APIP_INT_OK, APIP_INT_NOT_INTEGER, APIP_INT_TOO_BIG };

/* Reads the JSON number at p under the request's one rule for integer fields (num_heads,
 * seed, heads[], weights_top_k, key_lengths[], a binary tensor's shape[]): an integer is any
 * number whose value, read exactly from its decimal text, is integral, as JSON Schema's
 * "integer" says: 2, 2.0, 2e0 and 0.2e1 are 2; 2.5 and 1.0000000000000000001 are not integers.
 * Returns APIP_INT_OK with the value in *neg and *mag (0 for -0, with *neg false),
 * APIP_INT_NOT_INTEGER (also when p is not a number), or APIP_INT_TOO_BIG when the integer's
 * magnitude passes UINT64_MAX. Reads the text once, whatever its exponent. */
int apip_jv_int(const char *p, bool *neg, uint64_t *mag);

/* ---- Tensors ------------------------------------------------------------------------------ */

#define APIP_MAX_RANK 4

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
} apip_tensor_in;

/* Learns the shape of the tensor field at val (nested arrays: from the first element of each
 * level; binary: from "shape", checking "dtype" and the length of "data"). Ranks above
 * max_rank and empty dimensions are 400 invalid_field; a dimension above max_dim, or a shape
 * whose float32 bytes overflow size_t, is 413 job_too_large (the latter naming max_job_bytes,
 * the limit the job then cannot fit). 0 or -1 with err. */
int apip_tensor_probe(apip_tensor_in *t, const char *name, const char *val, size_t max_rank,
                      size_t max_dim, size_t max_job_bytes, api_error *err);

/* Decodes a probed tensor into dst: floats (count) for APIP_TENSOR_FLOAT and APIP_TENSOR_BIAS,
 * bytes (count) for APIP_TENSOR_MASK. Checks every row's length, every element's type and value
 * (400 invalid_field, 400 non_finite naming the element). A flat tensor is read as one row of
 * count elements; a raw one is copied (FP32 floats, checked as base64 data is) or checked and
 * converted (BOOL bytes and INT32 values of a mask must be 0 or 1). 0 or -1 with err. */
int apip_tensor_read(const apip_tensor_in *t, apip_tensor_kind kind, void *dst, api_error *err);

/* Writes "(a, b, c)" for dims (rank) into out (cap bytes). */
void apip_dims_str(char *out, size_t cap, const size_t *dims, size_t rank);

/* ---- Response size ------------------------------------------------------------------------ */

/* What the size of a job's 200 response depends on: known from the shapes, before compute. */
typedef struct apip_resp_shape {
    api_op op;
    bool base64;                    /* "encoding": "base64" */
    size_t out_rank;                /* the output is (out_dims) */
    size_t out_dims[APIP_MAX_RANK]; /* (out_rank) */
    size_t w_rank;                  /* 0 when no weights are returned */
    size_t w_dims[APIP_MAX_RANK];   /* (w_rank) */
    bool indices;                   /* top-k: indices (w_dims) beside the weights */
    size_t model_len;               /* attention: bytes of the registry model's name, or 0 */
    size_t words_bytes; /* attention: the most bytes of "head_names" and "tokens" (words) */
} apip_resp_shape;

/* The most bytes api_job_respond writes for a job of shape rs: every JSON float at
 * APIP_FLOAT_MAX bytes with its comma, every index and integer at its widest, base64 exact, the
 * fixed text, the model's name escaped at its widest and the usage times at theirs. Fills
 * *bytes and returns true; false when it does not fit in size_t. */
bool apip_response_bound(const apip_resp_shape *rs, size_t *bytes);

/* The most bytes of the "head_names" of model m (none when it has no names) and of the
 * "tokens" echo of nwords words (none for 0) in a response: apip_resp_shape.words_bytes. False
 * when it does not fit in size_t. */
bool apip_words_json_bound(const api_model *m, size_t nwords, size_t *bytes);

/* ---- Models ------------------------------------------------------------------------------- */

/* The tensors of a PyTorch nn.MultiheadAttention state_dict, as inline params and model files
 * name them, in attn_mha_params order of use. */
enum {
    APIP_P_IN_W,  /* in_proj_weight (3E, E) */
    APIP_P_IN_B,  /* in_proj_bias (3E) */
    APIP_P_OUT_W, /* out_proj.weight (E, E) */
    APIP_P_OUT_B, /* out_proj.bias (E) */
    APIP_P_Q_W,   /* q_proj_weight (E, E) */
    APIP_P_K_W,   /* k_proj_weight (E, kdim) */
    APIP_P_V_W,   /* v_proj_weight (E, vdim) */
    APIP_P_COUNT
};
extern const char *const apip_param_names[APIP_P_COUNT]; /* by APIP_P_* */

/* Fills in_proj (3E, E) and out_proj (E, E) with the Xavier-uniform stream of seed described
 * at api_model_init_random. */
void apip_init_random(float *in_proj, float *out_proj, size_t e, uint64_t seed);

/* What making one weight of params.init costs, counted in FLOP so that usage.flops and the
 * max_job_flops limit see it: the time of one weight over the time of one FLOP of the core's matrix
 * products at the sgemm peak. Measured on an AMD Zen 5 (2 cores, peak 190 GFLOP/s, 0.0053 ns per
 * FLOP): a random weight (splitmix64 and a conversion) 1.76 ns, an identity weight (zeroing)
 * 0.41 ns, with their pages already in memory (bench/RESULTS.md, the compute bound). */
#define APIP_INIT_RANDOM_FLOP   320.0
#define APIP_INIT_IDENTITY_FLOP 80.0

/* The cost in FLOP of making the 4 E^2 weights of init (APIP_INIT_*; 0 for APIP_INIT_NONE). */
double apip_init_flops(int init, size_t e);

/* Fills in_proj (3E, E) with three stacked identities and out_proj (E, E) with one. */
void apip_init_identity(float *in_proj, float *out_proj, size_t e);

/* Allocates a model named name (copied) whose tensors are zeroed: in_proj_weight (3E, E) when
 * packed, else q_proj_weight (E, E), k_proj_weight (E, kdim), v_proj_weight (E, vdim);
 * in_proj_bias (3E) with in_bias, out_proj.bias (E) with out_bias; out_proj.weight (E, E).
 * source is a static string. NULL with err (400 invalid_model, 500 out_of_memory). */
api_model *apip_model_alloc(const char *name, const char *source, size_t e, size_t h, size_t kdim,
                            size_t vdim, bool packed, bool in_bias, bool out_bias, api_error *err);

/* The parameters of a model, borrowed from it. */
const attn_mha_params *apip_model_params(const api_model *m);
const char *apip_model_name(const api_model *m);

/* The model (borrowed) whose whole name is what the raw JSON string content name decodes to,
 * compared in full: escapes resolved, any length, an escaped NUL (never in a model's name)
 * matching nothing. NULL when none. */
const api_model *apip_registry_find_json(const api_registry *r, apip_span name);

/* ---- Vocabularies (vocab.c) --------------------------------------------------------------- */

#define APIP_TOKEN_MAX_BYTES 128 /* the longest token of a vocabulary, in bytes of UTF-8 */
#define APIP_NAME_MAX_BYTES  64  /* the longest head name */

/* A list of distinct non-empty strings read from a JSON list in a model file's metadata. One
 * allocation; apip_strlist_free releases it. */
typedef struct apip_strlist {
    size_t n;
    const char **s;        /* (n) NUL-terminated UTF-8 */
    const size_t *len;     /* (n) bytes of each, without the NUL */
    const uint32_t *order; /* (n) indices of s in byte order (a prefix before its extensions) */
} apip_strlist;

enum { APIP_LIST_TOKENS, APIP_LIST_NAMES };

/* Parses text (n bytes: the decoded metadata string, which must be a JSON list of strings) as
 * the list what ("__metadata__.vocab") of kind APIP_LIST_TOKENS (each string 1 to
 * APIP_TOKEN_MAX_BYTES bytes, no whitespace or control characters: text splitting drops
 * whitespace, so such a token could never be matched) or APIP_LIST_NAMES (1 to
 * APIP_NAME_MAX_BYTES bytes, no control characters). NULL with msg (cap bytes, one sentence
 * naming what and the offending entry) when it is not such a list or a string repeats; msg
 * says "out of memory" when allocation failed. */
apip_strlist *apip_strlist_parse(const char *text, size_t n, const char *what, int kind, char *msg,
                                 size_t cap);
void apip_strlist_free(apip_strlist *l); /* NULL does nothing */

/* Model m's vocabulary parts (models.c), all borrowed from m: the token strings (NULL when m
 * has no vocabulary), token_embeddings (V, E) and position_embeddings (P, E) (NULL when there
 * is no position table; then *p is 0), and the head names (NULL when m has none). */
const apip_strlist *apip_model_vocab(const api_model *m);
const float *apip_model_token_embeddings(const api_model *m);
const float *apip_model_position_embeddings(const api_model *m, size_t *p);
const apip_strlist *apip_model_head_names(const api_model *m);

/* Gives m a vocabulary (taking tokens, also on failure): allocates zeroed tables of
 * tokens->n x E and, when p > 0, p x E, which the caller fills through *tok and *pos. 0, or -1
 * with err (500 out_of_memory; 400 invalid_model when the tables' size overflows). */
int apip_model_set_vocab(api_model *m, apip_strlist *tokens, size_t p, float **tok, float **pos,
                         api_error *err);
void apip_model_set_head_names(api_model *m, apip_strlist *names); /* takes names */
void apip_model_set_source(api_model *m, const char *source);      /* a static string */

/* The words of POST /v1/attention for a model with a vocabulary: tokens_val is the value of
 * "tokens" (a JSON list of strings, each looked up whole) or text_val that of "text" (a JSON
 * string split by longest match, whitespace separating and dropped); exactly one is non-NULL.
 * apip_words_count counts them, checking every word: 400 invalid_field for a malformed list or
 * no words at all, 400 unknown_token (field "tokens[i]" or "text", the message quoting the word
 * and, for text, its offset in characters) for a word the vocabulary lacks, 400 invalid_field
 * for more words than m's position table holds, 413 job_too_large for more than max_words.
 * Counting stops at the first error. 0 or -1 with err. */
int apip_words_count(const api_model *m, const char *tokens_val, const char *text_val,
                     size_t max_words, size_t *count, api_error *err);

/* For words apip_words_count accepted (count of them): writes their token ids into ids (count)
 * and their embeddings, token_embeddings row plus position_embeddings row i for word i, into x
 * (count, E). */
void apip_words_embed(const api_model *m, const char *tokens_val, const char *text_val,
                      uint32_t *ids, float *x);

/* Appends a JSON list of the strings of l ([] for NULL). */
void apip_strlist_json(const apip_strlist *l, api_buf *out);

/* ---- The Open Inference Protocol's responses (v2_reply.c) -------------------------------- */

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

/* ---- Jobs from other codecs --------------------------------------------------------------- */

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
    bool heads_csv;       /* heads is a string of comma-separated indices ("0,2") */
    apip_v2_reply *reply; /* the response's form; apip_v2_reply_plan settles it */
} apip_job_given;

/* api_job_parse from a root object already checked (its values point into text that
 * apip_json_check accepted) and what given adds; as api_job_parse otherwise. given may be
 * NULL. */
api_job *apip_job_parse_given(api_op op, const apip_json_root *root, apip_job_given *given,
                              const api_registry *models, const api_limits *lim, api_error *err);

/* ---- Jobs --------------------------------------------------------------------------------- */

/* How a job's inline params were given: tensors, or made from params.init. */
enum { APIP_INIT_NONE, APIP_INIT_IDENTITY, APIP_INIT_RANDOM };

/* A parsed job. It lives at the start of its own arena (one 64-byte aligned block of
 * api_mem_alloc, of arena_bytes): every pointer below points into that arena, or into the model it
 * borrows. */
struct api_job {
    api_op op;
    size_t arena_bytes;    /* the arena's capacity */
    api_mem *mem;          /* where its arena, batch workspace and response come from; or NULL */
    size_t response_bytes; /* apip_response_bound of its shapes: counted with the arena */
    bool base64;           /* "encoding": "base64" */
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
    float *out;             /* (out_dims) */
    attn_weights_out wout;  /* values (w_dims), indices (w_dims) with top-k */
    size_t out_rank, out_dims[APIP_MAX_RANK];
    size_t w_rank, w_dims[APIP_MAX_RANK]; /* 0 when no weights are returned */
    size_t n, l, s, e, h;                 /* attention: what "shape" and "num_heads" report */
    /* attention with params "init": the weights are made in the arena by the first run that
     * needs them (api_job_run, or once per batch by api_jobs_run), not while parsing. */
    int init;          /* APIP_INIT_* */
    uint64_t seed;     /* APIP_INIT_RANDOM's seed */
    bool params_ready; /* params holds its weights */
    double init_flops; /* making them, in FLOP (apip_init_flops); 0 without init */
    /* attention: the registry model (NULL for inline params), and with "tokens" or "text" the
     * words' token ids, tokens (l), whose strings the response echoes. */
    const api_model *model;
    const uint32_t *tokens;
    const apip_v2_reply *v2; /* the Open Inference Protocol's response form; NULL for v1 */
};

#endif
