/* response.c - writes the 200 response body of a job that has run (api_job_respond), and the
 * most bytes it can take (apip_response_bound), known from the job's shapes before it runs.
 *
 * Tensors are written by hand into the api_buf, not through a JSON library: as nested arrays of
 * shortest round-trip decimals (api_float_write), or with "encoding": "base64" as
 * {"dtype": "float32", "shape": [..], "data": "<base64 of little-endian float32>"} (top-k
 * indices as "int32"), which costs about what copying the bytes does.
 *
 * A job on a model of layers adds its layers (num_layers, and the layers whose weights and trace
 * it carries), the next-token predictions, and each kept layer's stream in the trace.
 *
 * Legend: N batch, H heads, L query length, S key length, E embedding width, K top-k count, Ls
 * the layers kept. */
#include <math.h>
#include <string.h>

#include "v1.h"

/* ---- Writers ------------------------------------------------------------------------------ */

/* The fixed text of a response, shared by the writers and apip_response_bound. */
#define T_OUTPUT     ",\"output\":"
#define T_WEIGHTS    ",\"weights\":"
#define T_INDICES    "{\"indices\":"
#define T_VALUES     ",\"values\":"
#define T_MODEL      ",\"model\":"
#define T_HEAD_NAMES ",\"head_names\":"
#define T_TOKENS     ",\"tokens\":["
#define T_NUM_HEADS  ",\"num_heads\":"
#define T_NUM_LAYERS ",\"num_layers\":"
#define T_LAYERS     ",\"layers\":["
#define T_PRED       ",\"predictions\":{\"ids\":"
#define T_PRED_TOKS  ",\"tokens\":"
#define T_PRED_PROBS ",\"probs\":"
#define T_PRED_LOGIT ",\"logits\":"
#define T_TR_RES     ",\"residual\":"
#define T_TR_ADD     ",\"attn_output\":"
#define T_SHAPE_N    ",\"shape\":{\"N\":"
#define T_SHAPE_L    ",\"L\":"
#define T_SHAPE_S    ",\"S\":"
#define T_SHAPE_E    ",\"E\":"
#define T_LENGTH     ",\"length\":"
#define T_TRACE      ",\"trace\":{\"scale\":"
#define T_TR_Q       ",\"q\":"
#define T_TR_K       ",\"k\":"
#define T_TR_V       ",\"v\":"
#define T_TR_SCORES  ",\"scores\":"
#define T_TR_MASKED  ",\"masked_scores\":"
#define T_TR_WEIGHTS ",\"weights\":"
#define T_TR_HEADS   ",\"head_outputs\":"
#define T_USAGE      ",\"usage\":{\"flops\":"
#define T_QUEUE_MS   ",\"queue_ms\":"
#define T_COMPUTE_MS ",\"compute_ms\":"
#define T_WS_BYTES   ",\"workspace_bytes\":"
#define T_JOB_BYTES  ",\"job_bytes\":"
#define T_B64_DTYPE  "{\"dtype\":\""
#define T_B64_SHAPE  "\",\"shape\":"
#define T_B64_DATA   ",\"data\":\""
#define T_B64_END    "\"}"
#define LIT(s)       (sizeof s - 1)

#define U64_MAX_DIGITS APIP_U64_DIGITS
#define I32_MAX_DIGITS APIP_I32_DIGITS
#define MS_MAX         APIP_MS_DIGITS
#define FLOAT_CHARS    (APIP_FLOAT_MAX - 1)

/* Appends the member text t (",\"name\":..."), without its leading comma when it is the
 * object's first member (*first, then cleared). */
static void put_member(api_buf *b, const char *t, bool *first) {
    apip_buf_puts(b, t + (*first ? 1 : 0));
    *first = false;
}

static void put_shape(api_buf *b, const size_t *dims, size_t rank) {
    apip_buf_puts(b, "[");
    for (size_t i = 0; i < rank; i++) {
        if (i)
            apip_buf_puts(b, ",");
        apip_buf_put_u64(b, dims[i]);
    }
    apip_buf_puts(b, "]");
}

/* The floats v[0, n) as JSON, the non-finite ones as the strings "-inf", "inf" and "nan" (no
 * longer than a number): the slow way, for the rows of a trace that hold them. */
static char *floats_write_any(char *o, const float *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (i)
            *o++ = ',';
        const char *t = isnan(v[i]) ? "\"nan\"" : v[i] < 0 ? "\"-inf\"" : "\"inf\"";
        if (isfinite(v[i])) {
            o += api_float_write(o, v[i]);
        } else {
            memcpy(o, t, strlen(t));
            o += strlen(t);
        }
    }
    return o;
}

/* Nested arrays of floats: data is (dims) row-major. Non-finite values only where any may be
 * (a trace's masked scores): see floats_write_any. */
static void json_floats(api_buf *b, const float *data, const size_t *dims, size_t rank, bool any) {
    if (rank == 1) {
        size_t n = dims[0], room = 0;
        if (!apip_mul(n, APIP_FLOAT_MAX, &room) || !apip_add(room, 40, &room)) {
            b->failed = true;
            return;
        }
        char *o = apip_buf_reserve(b, room);
        if (!o)
            return;
        char *s = o;
        *o++ = '[';
        bool finite = true;
        for (size_t i = 0; any && i < n; i++)
            finite = finite && isfinite(data[i]);
        o = finite ? apip_floats_write(o, data, n) : floats_write_any(o, data, n);
        *o++ = ']';
        b->len += (size_t)(o - s);
        return;
    }
    size_t inner = 1;
    for (size_t i = 1; i < rank; i++)
        inner *= dims[i];
    apip_buf_puts(b, "[");
    for (size_t i = 0; i < dims[0] && !b->failed; i++) {
        if (i)
            apip_buf_puts(b, ",");
        json_floats(b, data + i * inner, dims + 1, rank - 1, any);
    }
    apip_buf_puts(b, "]");
}

static void json_ints(api_buf *b, const int32_t *data, const size_t *dims, size_t rank) {
    size_t inner = 1;
    for (size_t i = 1; i < rank; i++)
        inner *= dims[i];
    apip_buf_puts(b, "[");
    for (size_t i = 0; i < dims[0] && !b->failed; i++) {
        if (i)
            apip_buf_puts(b, ",");
        if (rank == 1)
            apip_buf_put_u64(
                b, (uint64_t)(data[i] < 0 ? 0 : data[i])); /* indices are never negative */
        else
            json_ints(b, data + i * inner, dims + 1, rank - 1);
    }
    apip_buf_puts(b, "]");
}

/* {"dtype": dtype, "shape": [..], "data": "<base64 of the little-endian 4-byte values>"} */
static void b64_tensor(api_buf *b, const char *dtype, const void *data, const size_t *dims,
                       size_t rank) {
    size_t count = 1, bytes = 0;
    for (size_t i = 0; i < rank; i++)
        count *= dims[i];
    if (!apip_mul(count, 4, &bytes) || bytes > SIZE_MAX / 4 * 3 - 3) {
        b->failed = true;
        return;
    }
    apip_buf_puts(b, T_B64_DTYPE);
    apip_buf_puts(b, dtype);
    apip_buf_puts(b, T_B64_SHAPE);
    put_shape(b, dims, rank);
    apip_buf_puts(b, T_B64_DATA);
    size_t enc = api_base64_encoded_len(bytes);
    char *o = apip_buf_reserve(b, enc);
    if (!o)
        return;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    api_base64_encode(o, data, bytes);
#else
    /* Chunks of 768 values (3072 bytes, a multiple of 3) swapped to little-endian. */
    const uint8_t *src = data;
    uint8_t tmp[3072];
    for (size_t at = 0; at < bytes; at += sizeof tmp) {
        size_t n = bytes - at < sizeof tmp ? bytes - at : sizeof tmp;
        for (size_t i = 0; i < n; i += 4)
            for (size_t j = 0; j < 4; j++)
                tmp[i + j] = src[at + i + 3 - j];
        api_base64_encode(o + at / 3 * 4, tmp, n);
    }
#endif
    b->len += enc;
    apip_buf_puts(b, T_B64_END);
}

static void put_floats(api_buf *b, bool base64, const float *data, const size_t *dims,
                       size_t rank) {
    if (base64)
        b64_tensor(b, "float32", data, dims, rank);
    else
        json_floats(b, data, dims, rank, false);
}

/* The "trace" member of a traced job's response. */
static void put_trace(api_buf *b, const api_job *job, bool *first) {
    const attn_trace *t = &job->trace;
    char num[32];
    /* A model of layers' tensors have their Ls in front: their dims are in sj. */
    const size_t *tq = job->sj ? job->sj->tr_q : job->tr_q,
                 *tkv = job->sj ? job->sj->tr_kv : job->tr_kv,
                 *tmaps = job->sj ? job->sj->tr_maps : job->tr_maps;
    put_member(b, T_TRACE, first);
    size_t n = api_float_write(num, t->scale);
    num[n] = 0;
    apip_buf_puts(b, num);
    if (job->op == API_OP_ATTENTION) {
        apip_buf_puts(b, T_TR_Q);
        put_floats(b, job->base64, t->q, tq, job->tr_rank);
        apip_buf_puts(b, T_TR_K);
        put_floats(b, job->base64, t->k, tkv, job->tr_rank);
        apip_buf_puts(b, T_TR_V);
        put_floats(b, job->base64, t->v, tkv, job->tr_rank);
    }
    /* Scores past a causal limit or key length are still q.k, and may overflow: "inf". */
    const float *maps[3] = {t->scores, t->masked, t->weights};
    const char *names[3] = {T_TR_SCORES, T_TR_MASKED, T_TR_WEIGHTS};
    for (int i = 0; i < 3; i++) {
        apip_buf_puts(b, names[i]);
        if (job->base64)
            b64_tensor(b, "float32", maps[i], tmaps, job->tr_rank);
        else
            json_floats(b, maps[i], tmaps, job->tr_rank, i < 2);
    }
    if (job->op == API_OP_ATTENTION) {
        apip_buf_puts(b, T_TR_HEADS);
        put_floats(b, job->base64, t->heads, tq, job->tr_rank);
    }
    if (job->sj) { /* the stream entering each kept layer, and what the layer adds */
        const apip_stack_job *sj = job->sj;
        apip_buf_puts(b, T_TR_RES);
        put_floats(b, job->base64, sj->residual, sj->tr_res, sj->tr_res_rank);
        apip_buf_puts(b, T_TR_ADD);
        put_floats(b, job->base64, sj->attn_out, sj->tr_res, sj->tr_res_rank);
    }
    apip_buf_puts(b, "}");
}

/* Nested arrays (dims) of the vocabulary v's tokens of ids, as JSON strings. */
static void json_tokens(api_buf *b, const int32_t *ids, const size_t *dims, size_t rank,
                        const apip_strlist *v) {
    size_t inner = 1;
    for (size_t i = 1; i < rank; i++)
        inner *= dims[i];
    apip_buf_puts(b, "[");
    for (size_t i = 0; i < dims[0] && !b->failed; i++) {
        if (i)
            apip_buf_puts(b, ",");
        if (rank == 1)
            api_buf_json_string(b, v->s[ids[i]], v->len[ids[i]]);
        else
            json_tokens(b, ids + i * inner, dims + 1, rank - 1, v);
    }
    apip_buf_puts(b, "]");
}

/* The "predictions" member of a job on a model of layers: {"ids", "tokens", "probs",
 * "logits"}, each (.., L, K). */
static void put_predictions(api_buf *b, const api_job *job, bool *first) {
    const apip_stack_job *sj = job->sj;
    put_member(b, T_PRED, first);
    if (job->base64)
        b64_tensor(b, "int32", sj->pred_ids, sj->pred_dims, sj->pred_rank);
    else
        json_ints(b, sj->pred_ids, sj->pred_dims, sj->pred_rank);
    apip_buf_puts(b, T_PRED_TOKS);
    json_tokens(b, sj->pred_ids, sj->pred_dims, sj->pred_rank, apip_model_vocab(job->model));
    apip_buf_puts(b, T_PRED_PROBS);
    put_floats(b, job->base64, sj->pred_probs, sj->pred_dims, sj->pred_rank);
    apip_buf_puts(b, T_PRED_LOGIT);
    put_floats(b, job->base64, sj->pred_logits, sj->pred_dims, sj->pred_rank);
    apip_buf_puts(b, "}");
}

/* ---- Response size ------------------------------------------------------------------------ */

/* *acc += a * b + c; false on overflow. */
static bool acc_mad(size_t *acc, size_t a, size_t b, size_t c) {
    size_t t = 0;
    return apip_mul(a, b, &t) && apip_add(t, c, &t) && apip_add(*acc, t, acc);
}

static size_t digits(uint64_t v) {
    size_t n = 1;
    for (; v >= 10; v /= 10)
        n++;
    return n;
}

/* The most bytes of nested JSON arrays (dims) whose leaves take at most leaf bytes each: a
 * level of n children of at most c bytes takes n (c + 1) + 1 (brackets, commas between). */
static bool nested_bound(const size_t *dims, size_t rank, size_t leaf, size_t *bytes) {
    size_t c = leaf;
    for (size_t i = rank; i-- > 0;) {
        size_t level = 0;
        if (!apip_add(c, 1, &c) || !acc_mad(&level, dims[i], c, 1))
            return false;
        c = level;
    }
    *bytes = c;
    return true;
}

/* The bytes of b64_tensor for (dims) 4-byte values of dtype: exact. */
static bool b64_bound(const size_t *dims, size_t rank, const char *dtype, size_t *bytes) {
    size_t count = 1, n = LIT(T_B64_DTYPE T_B64_SHAPE T_B64_DATA T_B64_END) + strlen(dtype) + 2;
    for (size_t i = 0; i < rank; i++)
        if (!apip_mul(count, dims[i], &count) || !apip_add(n, digits(dims[i]) + (i > 0), &n))
            return false;
    if (!apip_mul(count, 4, &count) || count > SIZE_MAX / 4 * 3 - 3)
        return false;
    return apip_add(n, api_base64_encoded_len(count), bytes);
}

static bool tensor_bound(const size_t *dims, size_t rank, bool base64, bool ints, size_t *bytes) {
    if (base64)
        return b64_bound(dims, rank, ints ? "int32" : "float32", bytes);
    return nested_bound(dims, rank, ints ? I32_MAX_DIGITS : FLOAT_CHARS, bytes);
}

/* What a model of layers adds to a reply's bound *n: num_layers, the kept layers, the
 * predictions and the trace's residual and attn_output. */
static bool stack_bound(const apip_resp_shape *rs, size_t *n) {
    size_t t = 0;
    if (!acc_mad(n, rs->nkeep, U64_MAX_DIGITS + 1, LIT(T_NUM_LAYERS T_LAYERS "]") + U64_MAX_DIGITS))
        return false;
    if (rs->pred_rank && !(rs->omit & APIP_OMIT_PREDICTIONS)) {
        if (!tensor_bound(rs->pred_dims, rs->pred_rank, rs->base64, true, &t) ||
            !apip_add(*n, LIT(T_PRED T_PRED_TOKS T_PRED_PROBS T_PRED_LOGIT "}") + t, n) ||
            !nested_bound(rs->pred_dims, rs->pred_rank, rs->pred_token, &t) ||
            !apip_add(*n, t, n) ||
            !tensor_bound(rs->pred_dims, rs->pred_rank, rs->base64, false, &t) ||
            !acc_mad(n, t, 2, 0))
            return false;
    }
    if (rs->trace && !(rs->omit & APIP_OMIT_TRACE))
        return tensor_bound(rs->tr_res, rs->tr_res_rank, rs->base64, false, &t) &&
               acc_mad(n, t, 2, LIT(T_TR_RES T_TR_ADD));
    return true;
}

bool apip_response_bound(const apip_resp_shape *rs, size_t *bytes) {
    /* "{", then every member with its leading comma but the first, which has none: as many
     * bytes as the members with their commas (usage is always there). */
    size_t n = LIT(T_USAGE T_QUEUE_MS T_COMPUTE_MS T_WS_BYTES T_JOB_BYTES) + 3 * U64_MAX_DIGITS +
               2 * MS_MAX + 2, /* "}}" */
        t = 0;
    if (!(rs->omit & APIP_OMIT_OUTPUT) &&
        (!tensor_bound(rs->out_dims, rs->out_rank, rs->base64, false, &t) ||
         !apip_add(n, LIT(T_OUTPUT) + t, &n)))
        return false;
    if (rs->w_rank && !(rs->omit & APIP_OMIT_WEIGHTS)) {
        if (!tensor_bound(rs->w_dims, rs->w_rank, rs->base64, false, &t) ||
            !apip_add(n, LIT(T_WEIGHTS) + t, &n))
            return false;
        if (rs->indices && (!tensor_bound(rs->w_dims, rs->w_rank, rs->base64, true, &t) ||
                            !apip_add(n, LIT(T_INDICES T_VALUES) + 1 + t, &n)))
            return false;
    }
    if (rs->trace && !(rs->omit & APIP_OMIT_TRACE)) {
        /* scale, then q, k, v and head_outputs (attention) and the three maps */
        size_t fixed = LIT(T_TRACE T_TR_SCORES T_TR_MASKED T_TR_WEIGHTS "}") + FLOAT_CHARS;
        if (!apip_add(n, fixed, &n) ||
            !tensor_bound(rs->tr_maps, rs->tr_rank, rs->base64, false, &t) || !acc_mad(&n, t, 3, 0))
            return false;
        if (rs->op == API_OP_ATTENTION) {
            size_t tk = 0;
            if (!tensor_bound(rs->tr_q, rs->tr_rank, rs->base64, false, &t) ||
                !tensor_bound(rs->tr_kv, rs->tr_rank, rs->base64, false, &tk) ||
                !acc_mad(&n, t, 2, LIT(T_TR_Q T_TR_K T_TR_V T_TR_HEADS)) || !acc_mad(&n, tk, 2, 0))
                return false;
        }
    }
    if (rs->num_layers && !stack_bound(rs, &n))
        return false;
    if (rs->op == API_OP_ATTENTION) {
        /* The name as a JSON string: at most 6 bytes per byte ("\ufffd", "\u001f"), quoted. */
        size_t name = rs->model_len ? 0 : LIT("null");
        if (rs->model_len && !acc_mad(&name, rs->model_len, 6, 2))
            return false;
        /* head_names and the words echoed: rs->words_bytes, from the parser. */
        if (!apip_add(n, name, &n) || !apip_add(n, rs->words_bytes, &n) ||
            !apip_add(n,
                      LIT(T_MODEL T_NUM_HEADS T_SHAPE_N T_SHAPE_L T_SHAPE_S T_SHAPE_E "}") +
                          5 * U64_MAX_DIGITS,
                      &n) ||
            (rs->session && !apip_add(n, LIT(T_LENGTH) + U64_MAX_DIGITS, &n)))
            return false;
    }
    *bytes = n;
    return true;
}

bool apip_words_json_bound(const api_model *m, size_t nwords, size_t *bytes) {
    /* A string as api_buf_json_string writes it: at most 6 bytes per byte, quoted; a comma. */
    size_t n = 0;
    const apip_strlist *names = apip_model_head_names(m);
    if (names) {
        n = LIT(T_HEAD_NAMES) + 2;
        for (size_t i = 0; i < names->n; i++)
            if (!acc_mad(&n, names->len[i], 6, 3))
                return false;
    }
    if (nwords && !acc_mad(&n, nwords, 6 * APIP_TOKEN_MAX_BYTES + 3, LIT(T_TOKENS) + 1))
        return false;
    *bytes = n;
    return true;
}

size_t api_job_response_bytes(const api_job *job) {
    return job ? job->response_bytes : 0;
}

/* API_RESPOND_SLACK: room the float writer may use past what it writes (json_floats reserves 40
 * bytes beyond a row's bound, of which the row's own brackets and the text after it cover the
 * rest). */

int api_job_respond(const api_job *job, double queue_ms, double compute_ms, api_buf *out,
                    api_error *err) {
    if (!job || !out || !job->ran)
        return api_fail(err, 500, "internal", NULL, "the job has not run");
    if (job->reply_ops) /* another protocol's response (the Open Inference Protocol's) */
        return job->reply_ops->respond(job, queue_ms, compute_ms, out, err);
    size_t start = out->len;
    /* All the room the response can take, at once and exactly: the buffer never grows past
     * start + response_bytes + API_RESPOND_SLACK, and never reallocates while writing. */
    size_t room = 0;
    if (!apip_add(job->response_bytes, API_RESPOND_SLACK, &room) ||
        !apip_buf_reserve_block(out, room, job->mem)) {
        return api_fail(err, 500, "out_of_memory", NULL,
                        "out of memory reserving %zu bytes for the response", job->response_bytes);
    }
    bool first = true; /* the members below lead with a comma, but for the first */
    apip_buf_puts(out, "{");
    if (!(job->omit & APIP_OMIT_OUTPUT)) {
        put_member(out, T_OUTPUT, &first);
        const float *output = job->out;
        if (job->out_seq) { /* batch_first false: (N, L, E) computed, (L, N, E) = out_dims */
            size_t l = job->out_dims[0], n = job->out_dims[1], e = job->out_dims[2];
            for (size_t b = 0; b < n; b++)
                for (size_t i = 0; i < l; i++)
                    memcpy(job->out_seq + (i * n + b) * e, job->out + (b * l + i) * e,
                           e * sizeof(float));
            output = job->out_seq;
        }
        put_floats(out, job->base64, output, job->out_dims, job->out_rank);
    }
    if (job->w_rank && !(job->omit & APIP_OMIT_WEIGHTS)) {
        const size_t *w_dims = apip_job_w_dims(job);
        put_member(out, T_WEIGHTS, &first);
        if (job->wout.indices) {
            apip_buf_puts(out, T_INDICES);
            if (job->base64)
                b64_tensor(out, "int32", job->wout.indices, w_dims, job->w_rank);
            else
                json_ints(out, job->wout.indices, w_dims, job->w_rank);
            apip_buf_puts(out, T_VALUES);
            put_floats(out, job->base64, job->wout.values, w_dims, job->w_rank);
            apip_buf_puts(out, "}");
        } else {
            put_floats(out, job->base64, job->wout.values, w_dims, job->w_rank);
        }
    }
    if (job->sj && job->sj->top_k && !(job->omit & APIP_OMIT_PREDICTIONS))
        put_predictions(out, job, &first);
    if (job->op == API_OP_ATTENTION) {
        put_member(out, T_MODEL, &first);
        if (job->model_name)
            api_buf_json_string(out, job->model_name, strlen(job->model_name));
        else
            apip_buf_puts(out, "null");
        if (job->model && apip_model_head_names(job->model)) {
            apip_buf_puts(out, T_HEAD_NAMES);
            apip_strlist_json(apip_model_head_names(job->model), out);
        }
        if (job->tokens) { /* the words of "tokens" or "text", as the vocabulary spells them */
            const apip_strlist *v = apip_model_vocab(job->model);
            apip_buf_puts(out, T_TOKENS);
            for (size_t i = 0; i < job->l; i++) {
                if (i)
                    apip_buf_puts(out, ",");
                api_buf_json_string(out, v->s[job->tokens[i]], v->len[job->tokens[i]]);
            }
            apip_buf_puts(out, "]");
        }
        apip_buf_puts(out, T_NUM_HEADS);
        apip_buf_put_u64(out, job->h);
        if (job->sj) { /* its layers, and those whose weights and trace the reply holds */
            apip_buf_puts(out, T_NUM_LAYERS);
            apip_buf_put_u64(out, job->sj->stack->layers);
            apip_buf_puts(out, T_LAYERS);
            for (size_t i = 0; i < job->sj->nkeep; i++) {
                if (i)
                    apip_buf_puts(out, ",");
                apip_buf_put_u64(out, job->sj->keep[i]);
            }
            apip_buf_puts(out, "]");
        }
        apip_buf_puts(out, T_SHAPE_N);
        apip_buf_put_u64(out, job->n);
        apip_buf_puts(out, T_SHAPE_L);
        apip_buf_put_u64(out, job->l);
        apip_buf_puts(out, T_SHAPE_S);
        apip_buf_put_u64(out, job->s);
        apip_buf_puts(out, T_SHAPE_E);
        apip_buf_put_u64(out, job->e);
        apip_buf_puts(out, "}");
        if (job->session) { /* the session's rows after this append (it still holds it) */
            apip_buf_puts(out, T_LENGTH);
            apip_buf_put_u64(out, job->session->cache.len);
        }
    }
    if (job->traced && !(job->omit & APIP_OMIT_TRACE))
        put_trace(out, job, &first);
    put_member(out, T_USAGE, &first);
    apip_buf_put_flops(out, api_job_flops(job));
    apip_buf_puts(out, T_QUEUE_MS);
    apip_buf_put_ms(out, queue_ms);
    apip_buf_puts(out, T_COMPUTE_MS);
    apip_buf_put_ms(out, compute_ms);
    apip_buf_puts(out, T_WS_BYTES);
    apip_buf_put_u64(out, job->sj ? job->sj->plan.workspace_bytes : job->plan.workspace_bytes);
    apip_buf_puts(out, T_JOB_BYTES);
    apip_buf_put_u64(out, job->need_bytes + job->response_bytes);
    apip_buf_puts(out, "}}");
    if (out->failed) {
        out->len = start;
        return api_fail(err, 500, "out_of_memory", NULL, "out of memory writing the response");
    }
    return 0;
}
