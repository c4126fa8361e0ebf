/* v2_reply.c - the Open Inference Protocol's response to an infer request: the outputs it lists
 * (apip_v2_reply_plan settles which, and the most bytes they take, while the job is parsed), the
 * form's copy in the job's arena, and the body api_job_respond writes for a v2 job: JSON data as
 * flat arrays of v1's shortest decimals, binary outputs as their bytes after the JSON.
 *
 * Legend: N batch, L query length, S key length, E embedding width, H heads, K top-k count. */
#include <string.h>

#include "v2.h"

const char *const apip_v2_out_names[APIP_V2_NOUTS] = {"output", "weights", "weights_indices"};

/* The v2 form of job, or NULL when the job answers in another protocol's form (v1: none). */
static const apip_v2_reply *v2_form(const api_job *job) {
    return job && job->reply_ops == &apip_v2_reply_ops ? job->reply : NULL;
}

/* ---- The response ------------------------------------------------------------------------- */

/* The fixed text of a response, shared by the writer and the bound. */
#define T_MODEL    "{\"model_name\":"
#define T_VERSION  ",\"model_version\":\"" API_V2_VERSION "\""
#define T_ID       ",\"id\":\""
#define T_FLOPS    ",\"parameters\":{\"flops\":"
#define T_QUEUE    ",\"queue_ms\":"
#define T_COMPUTE  ",\"compute_ms\":"
#define T_OUTPUTS  "},\"outputs\":["
#define T_NAME     "{\"name\":\""
#define T_DATATYPE "\",\"datatype\":\""
#define T_SHAPE    "\",\"shape\":["
#define T_BINARY   "],\"parameters\":{\"binary_data_size\":"
#define T_DATA     "],\"data\":["
#define LIT(s)     (sizeof s - 1)

#define U64_DIGITS APIP_U64_DIGITS
#define I32_DIGITS APIP_I32_DIGITS
#define MS_MAX     APIP_MS_DIGITS

/* The shape (dims) and datatype of output o of a job of response shape rs. */
static const size_t *out_dims(const apip_resp_shape *rs, int o, size_t *rank) {
    *rank = o == APIP_V2_OUTPUT ? rs->out_rank : rs->w_rank;
    return o == APIP_V2_OUTPUT ? rs->out_dims : rs->w_dims;
}

int apip_v2_reply_plan(apip_v2_reply *rp, const apip_resp_shape *rs, size_t *bytes, size_t *place,
                       api_error *err) {
    bool there[APIP_V2_NOUTS] = {true, rs->w_rank > 0, rs->w_rank > 0 && rs->indices};
    if (rp->listed) {
        for (size_t i = 0; i < rp->nout; i++)
            if (!there[rp->out[i]])
                return api_fail(err, 400, "invalid_field", NULL,
                                rp->out[i] == APIP_V2_WEIGHTS
                                    ? "output weights needs the parameter need_weights "
                                      "(\"per_head\" or \"mean\"; true for sdpa)"
                                    : "output weights_indices needs the parameters need_weights "
                                      "and weights_top_k");
    } else { /* all there are, as binary_data_output says (rp->binary) */
        rp->nout = 0;
        for (int o = 0; o < APIP_V2_NOUTS; o++)
            if (there[o])
                rp->out[rp->nout++] = (uint8_t)o;
    }
    /* The most bytes: the fixed text, the model's name and the id as JSON strings (the id is
     * copied as it came, escapes and all), the numbers at their widest, and per output its
     * header and either its raw bytes or its data at 17 bytes a float, 11 an index. */
    size_t n = LIT(T_MODEL T_VERSION T_FLOPS T_QUEUE T_COMPUTE T_OUTPUTS "]}") + U64_DIGITS +
               2 * MS_MAX,
           t = 0, binary = 0;
    bool ok = apip_mul(strlen(rp->model), 6, &t) && apip_add(n, t + 2, &n);
    if (rp->id)
        ok = ok && apip_add(n, LIT(T_ID "\"") + rp->id_len, &n);
    for (size_t i = 0; ok && i < rp->nout; i++) {
        int o = rp->out[i];
        size_t rank, count = 1, elem = 0;
        const size_t *d = out_dims(rs, o, &rank);
        ok = apip_add(n, LIT("," T_NAME T_DATATYPE T_SHAPE "}") + strlen(apip_v2_out_names[o]) + 5,
                      &n);
        for (size_t k = 0; ok && k < rank; k++)
            ok = apip_mul(count, d[k], &count) && apip_add(n, U64_DIGITS + 1, &n);
        if (rp->binary[o]) {
            ok = ok && apip_mul(count, 4, &elem) && apip_add(binary, elem, &binary) &&
                 apip_add(n, LIT(T_BINARY "}") + U64_DIGITS, &n);
        } else {
            size_t leaf = o == APIP_V2_INDICES ? I32_DIGITS + 1 : APIP_FLOAT_MAX;
            ok = ok && apip_mul(count, leaf, &elem) && apip_add(n, LIT(T_DATA "]") + elem, &n);
        }
    }
    *place = (sizeof *rp + 7) / 8 * 8 + rp->id_len;
    if (!ok || !apip_add(n, binary, bytes))
        return api_fail(err, 413, "job_too_large", NULL,
                        "the job's response does not fit in size_t");
    rp->binary_bytes = binary;
    return 0;
}

const apip_v2_reply *apip_v2_reply_place(const apip_v2_reply *rp, void *dst) {
    apip_v2_reply *copy = dst;
    *copy = *rp;
    if (rp->id) {
        char *id = (char *)dst + (sizeof *rp + 7) / 8 * 8;
        memcpy(id, rp->id, rp->id_len);
        copy->id = id;
    }
    return copy;
}

size_t api_job_binary_bytes(const api_job *job) {
    const apip_v2_reply *rp = v2_form(job);
    return rp ? rp->binary_bytes : 0;
}

/* Appends the (count) values at data as raw little-endian 4-byte values. */
static void put_raw(api_buf *b, const void *data, size_t count) {
    size_t bytes = count * 4;
    char *o = apip_buf_reserve(b, bytes);
    if (!o)
        return;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(o, data, bytes);
#else
    const uint8_t *s = data;
    for (size_t i = 0; i < bytes; i += 4)
        for (size_t j = 0; j < 4; j++)
            o[i + j] = (char)s[i + 3 - j];
#endif
    b->len += bytes;
}

int apip_v2_respond(const api_job *job, double queue_ms, double compute_ms, api_buf *out,
                    api_error *err) {
    const apip_v2_reply *rp = v2_form(job);
    size_t start = out->len, room = 0;
    /* As api_job_respond: all the room at once (API_RESPOND_SLACK for the float writer's
     * scribbling), a block of the job memory cache when the job has one. */
    if (!apip_add(job->response_bytes, API_RESPOND_SLACK, &room) ||
        !apip_buf_reserve_block(out, room, job->mem))
        return api_fail(err, 500, "out_of_memory", NULL,
                        "out of memory reserving %zu bytes for the response", job->response_bytes);
    apip_buf_puts(out, T_MODEL);
    api_buf_json_string(out, rp->model, strlen(rp->model));
    apip_buf_puts(out, T_VERSION);
    if (rp->id) { /* raw JSON string content: valid as it stands */
        apip_buf_puts(out, T_ID);
        api_buf_append(out, rp->id, rp->id_len);
        apip_buf_puts(out, "\"");
    }
    apip_buf_puts(out, T_FLOPS);
    apip_buf_put_flops(out, api_job_flops(job));
    apip_buf_puts(out, T_QUEUE);
    apip_buf_put_ms(out, queue_ms);
    apip_buf_puts(out, T_COMPUTE);
    apip_buf_put_ms(out, compute_ms);
    apip_buf_puts(out, T_OUTPUTS);
    for (size_t i = 0; i < rp->nout; i++) {
        int o = rp->out[i];
        const size_t *d = o == APIP_V2_OUTPUT ? job->out_dims : apip_job_w_dims(job);
        size_t rank = o == APIP_V2_OUTPUT ? job->out_rank : job->w_rank, count = 1;
        apip_buf_puts(out, i ? "," T_NAME : T_NAME);
        apip_buf_puts(out, apip_v2_out_names[o]);
        apip_buf_puts(out, T_DATATYPE);
        apip_buf_puts(out, o == APIP_V2_INDICES ? "INT32" : "FP32");
        apip_buf_puts(out, T_SHAPE);
        for (size_t k = 0; k < rank; k++) {
            if (k)
                apip_buf_puts(out, ",");
            apip_buf_put_u64(out, d[k]);
            count *= d[k];
        }
        if (rp->binary[o]) {
            apip_buf_puts(out, T_BINARY);
            apip_buf_put_u64(out, (uint64_t)count * 4);
            apip_buf_puts(out, "}}");
            continue;
        }
        apip_buf_puts(out, T_DATA);
        if (o == APIP_V2_INDICES) {
            for (size_t k = 0; k < count; k++) {
                if (k)
                    apip_buf_puts(out, ",");
                int32_t x = job->wout.indices[k];
                apip_buf_put_u64(out, (uint64_t)(x < 0 ? 0 : x)); /* never negative */
            }
        } else {
            const float *v = o == APIP_V2_OUTPUT ? job->out : job->wout.values;
            char *p = apip_buf_reserve(out, count * APIP_FLOAT_MAX + 40);
            if (p) {
                char *e = apip_floats_write(p, v, count);
                out->len += (size_t)(e - p);
            }
        }
        apip_buf_puts(out, "]}");
    }
    apip_buf_puts(out, "]}");
    /* The binary tensor data, in the order of the outputs above. */
    for (size_t i = 0; i < rp->nout; i++) {
        int o = rp->out[i];
        if (!rp->binary[o])
            continue;
        size_t count = 1;
        const size_t *d = o == APIP_V2_OUTPUT ? job->out_dims : apip_job_w_dims(job);
        size_t rank = o == APIP_V2_OUTPUT ? job->out_rank : job->w_rank;
        for (size_t k = 0; k < rank; k++)
            count *= d[k];
        put_raw(out,
                o == APIP_V2_OUTPUT    ? (const void *)job->out
                : o == APIP_V2_WEIGHTS ? (const void *)job->wout.values
                                       : (const void *)job->wout.indices,
                count);
    }
    if (out->failed) {
        out->len = start;
        return api_fail(err, 500, "out_of_memory", NULL, "out of memory writing the response");
    }
    return 0;
}

/* ---- The table API v1 and api_job_respond call through ------------------------------------ */

static int plan_form(void *form, const apip_resp_shape *rs, size_t *bytes, size_t *place,
                     api_error *err) {
    return apip_v2_reply_plan(form, rs, bytes, place, err);
}

static const void *place_form(const void *form, void *dst) {
    return apip_v2_reply_place(form, dst);
}

const apip_reply_ops apip_v2_reply_ops = {plan_form, place_form, apip_v2_respond};
