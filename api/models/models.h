/* models.h - api/models/, the models: named nn.MultiheadAttention parameter sets and the
 * registry the server resolves "model" names in (models.c), their loader from safetensors files
 * (safetensors.c), the built-in lesson model (lesson.c, whose weights and generator live in
 * api/lesson/), the string lists of a model file's metadata (strlist.c) and the words of a
 * request looked up in a model's vocabulary (vocab.c).
 *
 * Owns: strlist.c, models.c, vocab.c, safetensors.c, lesson.c. May include: codec.h (api/codec/),
 * base.h (api/base/) and api.h, nothing above. Inside the room the calls go one way:
 * strlist.c < models.c < vocab.c, and safetensors.c < lesson.c on top of them. The rooms above
 * (job, v1, v2) may include this header. Nothing here is part of api.h's contract.
 *
 * Legend: E embedding width, H heads, kdim/vdim the key and value widths, V vocabulary size,
 * P positions, L words. */
#ifndef ATTND_API_MODELS_H
#define ATTND_API_MODELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "codec.h"

/* ---- Models ---------------------------------------------------------------------------------- */

/* The tensors of a PyTorch nn.MultiheadAttention state_dict, as inline params and model files
 * name them, in attn_mha_params order of use. */
enum {
    APIP_P_IN_W,   /* in_proj_weight (3E, E) */
    APIP_P_IN_B,   /* in_proj_bias (3E) */
    APIP_P_OUT_W,  /* out_proj.weight (E, E) */
    APIP_P_OUT_B,  /* out_proj.bias (E) */
    APIP_P_Q_W,    /* q_proj_weight (E, E) */
    APIP_P_K_W,    /* k_proj_weight (E, kdim) */
    APIP_P_V_W,    /* v_proj_weight (E, vdim) */
    APIP_P_BIAS_K, /* bias_k (1, 1, E): add_bias_kv's appended key */
    APIP_P_BIAS_V, /* bias_v (1, 1, E): its value */
    APIP_P_COUNT
};
extern const char *const apip_param_names[APIP_P_COUNT]; /* by APIP_P_* */

/* How a job's inline params were given: tensors, or made from params.init. */
enum { APIP_INIT_NONE, APIP_INIT_IDENTITY, APIP_INIT_RANDOM };

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
 * in_proj_bias (3E) with in_bias, out_proj.bias (E) with out_bias; out_proj.weight (E, E);
 * bias_k and bias_v (E each) with bias_kv. source is a static string. NULL with err (400
 * invalid_model, 500 out_of_memory). */
api_model *apip_model_alloc(const char *name, const char *source, size_t e, size_t h, size_t kdim,
                            size_t vdim, bool packed, bool in_bias, bool out_bias, bool bias_kv,
                            api_error *err);

/* Whether m appends a zero key and value (PyTorch's add_zero_attn); false until set. */
bool apip_model_zero_attn(const api_model *m);
void apip_model_set_zero_attn(api_model *m, bool on);

/* The parameters of a model, borrowed from it. */
const attn_mha_params *apip_model_params(const api_model *m);
const char *apip_model_name(const api_model *m);

/* m's place in the registry that holds it (api_registry_index); API_NO_MODEL for NULL. */
size_t apip_model_index(const api_model *m);

/* The model (borrowed) whose whole name is what the raw JSON string content name decodes to,
 * compared in full: escapes resolved, any length, an escaped NUL (never in a model's name)
 * matching nothing. NULL when none. */
const api_model *apip_registry_find_json(const api_registry *r, apip_span name);

/* ---- String lists (strlist.c) ---------------------------------------------------------------- */

#define APIP_TOKEN_MAX_BYTES 128 /* the longest token of a vocabulary, in bytes of UTF-8 */
#define APIP_NAME_MAX_BYTES  64  /* the longest head name */

/* A list of distinct non-empty strings read from a JSON list in a model file's metadata. One
 * allocation; apip_strlist_free releases it. */
typedef struct apip_strlist {
    size_t n;
    const char **s;        /* (n) NUL-terminated UTF-8 */
    const size_t *len;     /* (n) bytes of each, without the NUL */
    const uint32_t *order; /* (n) indices of s in byte order (a prefix before its extensions),
                              with apip_word_fold applied to every byte when words */
    bool words;            /* a vocabulary of APIP_LIST_WORDS */
} apip_strlist;

/* The kinds of list: a vocabulary split by longest match alone (TOKENS, __metadata__.text_split
 * "longest_match", the default), a vocabulary whose Latin words are kept whole (WORDS,
 * "words": see vocab.c), head names (NAMES). */
enum { APIP_LIST_TOKENS, APIP_LIST_NAMES, APIP_LIST_WORDS };

/* Parses text (n bytes: the decoded metadata string, which must be a JSON list of strings) as
 * the list what ("__metadata__.vocab") of kind APIP_LIST_TOKENS (each string 1 to
 * APIP_TOKEN_MAX_BYTES bytes, no whitespace or control characters: text splitting drops
 * whitespace, so such a token could never be matched), APIP_LIST_WORDS (the same, but a single
 * space between two ASCII letters or digits is allowed, "server log", and no two strings may be
 * the same but for the case of ASCII letters) or APIP_LIST_NAMES (1 to APIP_NAME_MAX_BYTES
 * bytes, no control characters). NULL with msg (cap bytes, one sentence naming what and the
 * offending entry) when it is not such a list or a string repeats; msg says "out of memory"
 * when allocation failed. */
apip_strlist *apip_strlist_parse(const char *text, size_t n, const char *what, int kind, char *msg,
                                 size_t cap);
void apip_strlist_free(apip_strlist *l); /* NULL does nothing */

/* Appends a JSON list of the strings of l ([] for NULL). */
void apip_strlist_json(const apip_strlist *l, api_buf *out);

/* Byte order, a string before its extensions: the order of apip_strlist.order. */
static inline int apip_strlist_cmp(const char *a, size_t na, const char *b, size_t nb) {
    int c = memcmp(a, b, na < nb ? na : nb);
    return c ? c : (na > nb) - (na < nb);
}

/* A byte as a vocabulary of words compares it: A-Z as a-z, and tab, CR and LF as a space (the
 * space of a multi-word token matches any one of them in text). */
static inline unsigned char apip_word_fold(unsigned char c) {
    return c >= 'A' && c <= 'Z'                  ? (unsigned char)(c + ('a' - 'A'))
           : c == '\t' || c == '\n' || c == '\r' ? ' '
                                                 : c;
}

/* True for the bytes of a Latin word: ASCII letters and digits. */
static inline bool apip_word_char(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* The order of a vocabulary of words: apip_strlist_cmp on folded bytes (apip_word_fold). */
static inline int apip_strlist_cmp_fold(const char *a, size_t na, const char *b, size_t nb) {
    for (size_t i = 0; i < na && i < nb; i++) {
        int c = apip_word_fold((unsigned char)a[i]) - apip_word_fold((unsigned char)b[i]);
        if (c)
            return c;
    }
    return (na > nb) - (na < nb);
}

/* True for the whitespace that separates words in text: space, tab, CR, LF, U+3000. *n gets
 * its length in bytes. (No token may hold it.) */
static inline bool apip_word_space(const char *p, size_t avail, size_t *n) {
    if (avail >= 1 && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        return *n = 1, true;
    if (avail >= 3 && !memcmp(p, "\xE3\x80\x80", 3))
        return *n = 3, true;
    return false;
}

/* Shows s (n bytes) in msg form: cut at a character boundary to at most 40 bytes. */
static inline void apip_word_quote(char *out, size_t cap, const char *s, size_t n) {
    size_t k = n < 40 ? n : 40;
    while (k < n && k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--;
    snprintf(out, cap, "\"%.*s%s\"", (int)k, s, k < n ? "..." : "");
}

/* ---- A model's vocabulary (models.c) --------------------------------------------------------- */

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

/* Model m's start token (__metadata__.start_token): true with its index in the vocabulary in *id
 * (id may be NULL), false when m has none. A request's tokens or text get it at position 0 unless
 * the request says "add_special_tokens": false. */
bool apip_model_start_token(const api_model *m, uint32_t *id);

/* Makes token id (< the vocabulary's size) m's start token. m must have a vocabulary. */
void apip_model_set_start_token(api_model *m, uint32_t id);
void apip_model_set_source(api_model *m, const char *source); /* a static string */

/* ---- Words of a request (vocab.c) ------------------------------------------------------------ */

/* The token of vocabulary v that is exactly s (n bytes), or in a vocabulary of words
 * (apip_strlist.words) the same but for the case of ASCII letters: true with *id, false when
 * none. */
bool apip_vocab_find(const apip_strlist *v, const char *s, size_t n, uint32_t *id);

/* The words of POST /v1/attention for a model with a vocabulary: tokens_val is the value of
 * "tokens" (a JSON list of strings, each looked up whole as apip_vocab_find does) or text_val
 * that of "text" (a JSON string split by longest match, whitespace separating and dropped, Latin
 * words kept whole in a vocabulary of words: vocab.c); exactly one is non-NULL.
 * With start true and a model that has a start token (apip_model_start_token), that token comes
 * first, at position 0, before the request's words, and counts as one of them.
 * apip_words_count counts them, checking every word: 400 invalid_field for a malformed list or
 * no words at all (the start token alone is not a text), 400 unknown_token (field "tokens[i]" or
 * "text", the message quoting the word and, for text, its offset in characters) for a word the
 * vocabulary lacks, 400 invalid_field for more words than m's position table holds (the start
 * token included), 413 job_too_large for more than max_words. Counting stops at the first
 * error. 0 or -1 with err. */
int apip_words_count(const api_model *m, const char *tokens_val, const char *text_val, bool start,
                     size_t max_words, size_t *count, api_error *err);

/* For words apip_words_count accepted (count of them, with the same start): writes their token
 * ids into ids (count) and their embeddings, token_embeddings row plus position_embeddings row i
 * for word i, into x (count, E). */
void apip_words_embed(const api_model *m, const char *tokens_val, const char *text_val, bool start,
                      uint32_t *ids, float *x);

/* The same for words that follow from rows already held (a decode session's append): their
 * positions are from, from + 1, ... (the model's table must hold them: counting refuses more
 * words than the positions left, p - from), word i's embedding with position_embeddings row
 * from + i. from 0 is apip_words_count and apip_words_embed. */
int apip_words_count_at(const api_model *m, const char *tokens_val, const char *text_val,
                        bool start, size_t from, size_t max_words, size_t *count, api_error *err);
void apip_words_embed_at(const api_model *m, const char *tokens_val, const char *text_val,
                         bool start, size_t from, uint32_t *ids, float *x);

#endif
