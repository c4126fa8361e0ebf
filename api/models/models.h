/* models.h - api/models/, the models: named nn.MultiheadAttention parameter sets and models of
 * layers (attention-only transformers), and the registry the server resolves "model" names in
 * (models.c), the safetensors format (stfile.c), model files of one MHA (safetensors.c) and of
 * layers (layers.c), the built-in lesson and induction models (lesson.c, induction.c, whose
 * weights and generators live in api/lesson/ and api/induction/), the string lists of a model
 * file's metadata (strlist.c) and the words of a request looked up in a model's vocabulary
 * (vocab.c).
 *
 * Owns: strlist.c, models.c, vocab.c, stfile.c, layers.c, safetensors.c, lesson.c, induction.c.
 * May include: codec.h (api/codec/), base.h (api/base/) and api.h, nothing above. Inside the
 * room the calls go one way: strlist.c < models.c < vocab.c < stfile.c < layers.c <
 * safetensors.c < lesson.c, induction.c. The rooms above (job, v1, v2) may include this header.
 * Nothing here is part of api.h's contract.
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
/* ---- Models of layers (models.c, layers.c) --------------------------------------------------- */

#define APIP_MAX_LAYERS       64 /* the most layers a model file may have */
#define APIP_MAX_MEASURES     8 /* the most names in __metadata__ head_scores' objects, or accuracy */
#define APIP_MEASURE_NAME_MAX 32 /* the longest such name, in bytes: [a-z0-9_] */

/* A model of layers (an attention-only transformer: attention.h's stacks), as a PyTorch module
 * saved it, and what its file says was measured on it. Made zeroed by apip_stack_alloc,
 * filled by layers.c, owned by its model (apip_model_set_stack). */
typedef struct apip_stack {
    size_t layers;            /* at least 1 */
    attn_layer_params *layer; /* (layers): what params.layers points at */
    attn_stack_params params; /* every tensor in data; a part the file lacks is NULL */
    size_t vocab;             /* V, the rows of lm_head.weight; 0 without an unembedding */
    bool layer_norm;          /* every layer has a norm before its attention */
    bool causal;       /* __metadata__.causal: a request gets the causal mask unless it says not */
    size_t token_json; /* the most bytes a token of the vocabulary takes as a JSON string */
    /* __metadata__.head_scores: per layer and head, nscores measures named score_names; and
     * __metadata__.accuracy, nacc measures. 0 when the file has none. */
    size_t nscores, nacc;
    char score_names[APIP_MAX_MEASURES][APIP_MEASURE_NAME_MAX + 1];
    char acc_names[APIP_MAX_MEASURES][APIP_MEASURE_NAME_MAX + 1];
    double *scores;                /* (layers, H, nscores) */
    double acc[APIP_MAX_MEASURES]; /* (nacc) */
    float *data;                   /* the tensors (apip_stack_alloc's layout) */
} apip_stack;

/* A stack of layers layers of width e with every part the format allows, zeroed, in one
 * allocation of data: per layer norm1.weight and .bias (E each), in_proj_weight (3E, E),
 * in_proj_bias (3E), out_proj.weight (E, E), out_proj.bias (E); then norm.weight and .bias (E
 * each), lm_head.weight (V, E) and lm_head.bias (V) with V = vocab (none when 0); every pointer
 * of params set (the caller clears those the file lacks), eps 1e-5; and scores (layers, h,
 * APIP_MAX_MEASURES). NULL with err (500 out_of_memory; 400 invalid_model when the size
 * overflows). */
apip_stack *apip_stack_alloc(size_t layers, size_t e, size_t h, size_t vocab, api_error *err);
void apip_stack_free(apip_stack *s); /* NULL does nothing */

/* Gives m the stack s (taking it): m becomes a model of layers, and apip_model_params(m) is
 * its first layer's attention. */
void apip_model_set_stack(api_model *m, apip_stack *s);

/* m's layers, borrowed; NULL for a model of one MHA. */
const apip_stack *apip_model_stack(const api_model *m);

/* ---- The safetensors format (stfile.c) ------------------------------------------------------- */

/* The tensors of a model file besides the state_dict's (APIP_P_*): the vocabulary's. */
enum { APIP_T_TOK = APIP_P_COUNT, APIP_T_POS, APIP_T_COUNT };
/* A layer's tensors, layers.i.NAME. */
enum {
    APIP_L_NORM_W,
    APIP_L_NORM_B,
    APIP_L_IN_W,
    APIP_L_IN_B,
    APIP_L_OUT_W,
    APIP_L_OUT_B,
    APIP_L_COUNT
};
/* A model of layers' own: the final norm and the unembedding. */
enum { APIP_S_NORM_W, APIP_S_NORM_B, APIP_S_HEAD_W, APIP_S_HEAD_B, APIP_S_COUNT };

const char *apip_st_name(int i);       /* APIP_P_* or APIP_T_*: "in_proj_weight", ... */
const char *apip_st_layer_name(int i); /* APIP_L_*: "self_attn.in_proj_weight", ... */
const char *apip_st_top_name(int i);   /* APIP_S_*: "norm.weight", "lm_head.weight", ... */

/* One tensor of a file's header. */
typedef struct apip_st_tensor {
    bool present;
    int dtype; /* bytes per element: 4 (F32), 2 (F16 or BF16) */
    bool bf16;
    size_t rank, dims[3];
    uint64_t begin, end; /* byte range within the data section */
} apip_st_tensor;

/* Where a file's messages go: "LABEL: what is wrong", 400 invalid_model, into err. */
typedef struct apip_st_ctx {
    const char *label; /* the file (or model) named in messages */
    api_error *err;
} apip_st_ctx;

/* What a file's header says, and where its data is. */
typedef struct apip_st_file {
    apip_st_tensor t[APIP_T_COUNT];                      /* by APIP_P_* and APIP_T_* */
    apip_st_tensor top[APIP_S_COUNT];                    /* norm.*, lm_head.* */
    apip_st_tensor layer[APIP_MAX_LAYERS][APIP_L_COUNT]; /* layers.i.* */
    size_t layers;  /* one more than the highest layer index named; 0: none */
    size_t h;       /* __metadata__.num_heads */
    bool zero_attn; /* __metadata__.add_zero_attn */
    /* The JSON values of the other metadata keys attnd reads; NULL when absent. */
    const char *vocab_val, *names_val, *start_val, *split_val;
    const char *causal_val, *eps_val, *scores_val, *acc_val;
    const uint8_t *data; /* the data section, data_len bytes */
    size_t data_len;
} apip_st_file;

/* Fails with "c->label: message" (400 invalid_model); returns -1. */
int apip_st_fail(apip_st_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reads the file bytes (len) into *f (zeroed by the caller): the header length, its JSON,
 * every tensor entry (a name attnd does not know is refused) and __metadata__ (num_heads
 * required), then the byte ranges (inside the data, each the size of its shape, covering the
 * data exactly). 0, or -1 with c->err. */
int apip_st_read(apip_st_ctx *c, const uint8_t *bytes, size_t len, apip_st_file *f);

/* Converts tensor t (named name in messages) from data to float32 into dst (its element
 * count): F32 as it is, F16 and BF16 widened. 0, or -1 with c->err for a non-finite value. */
int apip_st_convert(apip_st_ctx *c, const char *name, const apip_st_tensor *t, const uint8_t *data,
                    float *dst);

/* The lists of f's metadata: *vocab (__metadata__.vocab split as text_split says; NULL when
 * absent), *names (head_names, f->h of them; NULL when absent) and *start (start_token's id in
 * the vocabulary, when f->start_val). 0, or -1 with c->err and nothing allocated. */
int apip_st_lists(apip_st_ctx *c, const apip_st_file *f, apip_strlist **vocab, apip_strlist **names,
                  uint32_t *start);

/* ---- Model files of layers (layers.c) -------------------------------------------------------- */

/* The model named name of the layers f holds (f->layers > 0), with the vocabulary and head
 * names given (taken, also on failure) and start token start when has_start: every layer's
 * tensors present and shaped for E (from layers.0.self_attn.out_proj.weight) and num_heads,
 * token_embeddings required, no tensor of a one-MHA model; __metadata__ causal ("true" or
 * "false"), layer_norm_eps (a positive number), head_scores and accuracy read. m, or NULL with
 * c->err. */
api_model *apip_layers_model(apip_st_ctx *c, const char *name, const apip_st_file *f,
                             apip_strlist *vocab, apip_strlist *names, bool has_start,
                             uint32_t start);

#endif
