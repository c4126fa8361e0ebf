/* codec.h - api/codec/, the JSON and number codec: the validating JSON reader and its navigation
 * over validated text (json.c), rows of numbers 64 bytes at a time (rows.c), numbers read as
 * float32 (number.c), float32 written as the shortest decimal that reads back (fmt.c), base64
 * (base64.c), and the growable byte buffer responses are written into, with JSON string
 * literals and error bodies (buf.c). It knows nothing of requests, models or jobs.
 *
 * Owns: json.c, rows.c, number.c, fmt.c, base64.c, buf.c. May include: base.h (api/base/) and
 * api.h, nothing else of api/. Inside the room the calls go one way: number.c < rows.c <
 * json.c (json.c checks rows of numbers with rows.c, which reads them with number.c); fmt.c,
 * base64.c and buf.c call none of the others.
 * The rooms above (models, job, v1, v2) may include this header. Nothing here is part of
 * api.h's contract.
 *
 * Legend (shapes outermost first, row-major): N batch, L query length, S key length,
 * E embedding width, H heads, D/Dv query-key and value widths (SDPA), K top-k count. */
#ifndef ATTND_API_CODEC_H
#define ATTND_API_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* ---- Buffers --------------------------------------------------------------------------------- */

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

/* Writes "(a, b, c)" for dims (rank) into out (cap bytes): the shapes of messages. */
void apip_dims_str(char *out, size_t cap, const size_t *dims, size_t rank);

/* ---- Numbers out ----------------------------------------------------------------------------- */

/* Writes v[0, n) as api_float_write does, separated by commas; returns the end. o must have
 * room for APIP_FLOAT_MAX * n + 32 bytes (the writer may scribble up to 32 bytes past the end). */
#define APIP_FLOAT_MAX 17 /* the longest number written, plus its comma: "-0.0000123456789," */
char *apip_floats_write(char *o, const float *v, size_t n);

/* ---- JSON reader ----------------------------------------------------------------------------- */

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

#endif
