/* v2.c - the Open Inference Protocol (KServe v2) on API v1's jobs: the models' inputs, server
 * and model metadata and readiness. Triton's configuration and statistics are v2_config.c's,
 * infer requests v2_parse.c's, their responses v2_reply.c's.
 *
 * Legend: N batch, L query length, S key length, E embedding width, H heads, K top-k count. */
#include <stdio.h>
#include <string.h>

#include "v2.h"

/* ---- Names -------------------------------------------------------------------------------- */

const apip_v2_input apip_v2_mha_inputs[APIP_V2_IN_COUNT] = {
    {"query", APIP_V2_DT(APIP_DT_FP32)},
    {"key", APIP_V2_DT(APIP_DT_FP32)},
    {"value", APIP_V2_DT(APIP_DT_FP32)},
    {"key_lengths", APIP_V2_DT(APIP_DT_INT32)},
    {"key_mask", APIP_V2_DT(APIP_DT_BOOL) | APIP_V2_DT(APIP_DT_INT32)},
    {"attn_mask", APIP_V2_DT(APIP_DT_BOOL)},
    {"attn_bias", APIP_V2_DT(APIP_DT_FP32)}};

const apip_v2_input apip_v2_sdpa_inputs[APIP_V2_IN_COUNT] = {
    {"q", APIP_V2_DT(APIP_DT_FP32)},
    {"k", APIP_V2_DT(APIP_DT_FP32)},
    {"v", APIP_V2_DT(APIP_DT_FP32)},
    {"key_lengths", APIP_V2_DT(APIP_DT_INT32)},
    {"key_mask", APIP_V2_DT(APIP_DT_BOOL) | APIP_V2_DT(APIP_DT_INT32)},
    {"attn_mask", APIP_V2_DT(APIP_DT_BOOL)},
    {"attn_bias", APIP_V2_DT(APIP_DT_FP32)}};

static bool is_sdpa(const char *name) {
    return name && !strcmp(name, API_V2_SDPA_MODEL);
}

/* ---- Bodies of the metadata routes -------------------------------------------------------- */

void api_v2_error_body(const api_error *err, api_buf *out) {
    const char *msg = err && err->status ? err->message : "unknown error";
    apip_buf_puts(out, "{\"error\":");
    api_buf_json_string(out, msg, strnlen(msg, sizeof err->message));
    apip_buf_puts(out, "}");
}

void api_v2_server_json(const char *version, api_buf *out) {
    apip_buf_puts(out, "{\"name\":\"attnd\",\"version\":");
    api_buf_json_string(out, version, strlen(version));
    apip_buf_puts(out, ",\"extensions\":[\"binary_tensor_data\",\"parameters\","
                       "\"schedule_policy\",\"model_configuration\",\"statistics\",\"sequence\","
                       "\"sequence(string_id)\"]}");
}

/* The registry model of name, or NULL for "sdpa" (*sdpa true); -1 with err when neither. */
int apip_v2_find_model(const api_registry *r, const char *name, const char *version,
                       const api_model **m, bool *sdpa, api_error *err) {
    size_t n = name ? strlen(name) : 0;
    *m = NULL;
    *sdpa = is_sdpa(name);
    /* No model name has a '/' (a file name): what follows one is a route attnd does not serve,
     * such as Triton's /config. */
    const char *rest = name ? strchr(name, '/') : NULL;
    if (!rest && version)
        rest = strchr(version, '/');
    if (rest)
        return api_fail(
            err, 404, "not_found", NULL,
            "there is no route .../%.*s%s; a model has /v2/models/NAME, /ready, /infer, "
            "/config and /stats, and their /versions/" API_V2_VERSION " forms",
            (int)strnlen(rest + 1, 100), rest + 1, strlen(rest + 1) > 100 ? "..." : "");
    if (!*sdpa && !(*m = api_registry_find(r, name)))
        return api_fail(err, 404, "unknown_model", NULL,
                        "there is no model named \"%.*s%s\"; POST /v2/repository/index lists them",
                        (int)(n < 200 ? n : 200), name ? name : "", n > 200 ? "..." : "");
    if (version && strcmp(version, API_V2_VERSION) != 0) {
        size_t vn = strlen(version);
        return api_fail(err, 404, "unknown_model", NULL,
                        "model %s has no version \"%.*s%s\"; its one version is " API_V2_VERSION,
                        *sdpa ? API_V2_SDPA_MODEL : apip_model_name(*m), (int)(vn < 40 ? vn : 40),
                        version, vn > 40 ? "..." : "");
    }
    return 0;
}

int api_v2_model_check(const api_registry *r, const char *name, const char *version,
                       api_error *err) {
    const api_model *m;
    bool sdpa;
    return apip_v2_find_model(r, name, version, &m, &sdpa, err);
}

/* dims (rank) as JSON numbers separated by commas, -1 for a negative entry. */
void apip_v2_put_dims(api_buf *out, const long long *dims, size_t rank) {
    for (size_t i = 0; i < rank; i++) {
        if (i)
            apip_buf_puts(out, ",");
        if (dims[i] < 0)
            apip_buf_puts(out, "-1");
        else
            apip_buf_put_u64(out, (uint64_t)dims[i]);
    }
}

/* {"name": name, "datatype": dt, "shape": [dims, -1 for a negative entry]} */
static void meta_tensor(api_buf *out, bool comma, const char *name, const char *dt,
                        const long long *dims, size_t rank) {
    apip_buf_puts(out, comma ? ",{\"name\":\"" : "{\"name\":\"");
    apip_buf_puts(out, name);
    apip_buf_puts(out, "\",\"datatype\":\"");
    apip_buf_puts(out, dt);
    apip_buf_puts(out, "\",\"shape\":[");
    apip_v2_put_dims(out, dims, rank);
    apip_buf_puts(out, "]}");
}

/* The datatype and dims of input i (or with out, of output i) of a model (m NULL: sdpa), at
 * their highest rank, -1 for a dimension the request chooses: query (N, L, E) (also (L, E)),
 * key (N, S, kdim), value (N, S, vdim), SDPA's q, k, v (N, H, L|S, D) (also (H, ..) and
 * (L|S, D)), key_lengths (N), key_mask (N, S) (also (S)), attn_mask and attn_bias
 * (N, H, L, S) (lower ranks broadcast); output as the query, weights (N, H, L, S) or
 * (N, L, S), a model of layers' (Ls, N, H, L, S), indices with top-k (.., K). Returns the
 * rank. */
size_t apip_v2_tensor_dims(const api_model *m, bool out, size_t i, const char **dt,
                           long long dims[APIP_MAX_OUT_RANK]) {
    bool sdpa = m == NULL;
    api_model_info mi = api_model_describe(m);
    long long e = sdpa ? -1 : (long long)mi.embed_dim;
    const long long widths[3] = {e, sdpa ? -1 : (long long)mi.kdim, sdpa ? -1 : (long long)mi.vdim};
    for (size_t k = 0; k < APIP_MAX_OUT_RANK; k++)
        dims[k] = -1;
    if (out) {
        *dt = i == APIP_V2_INDICES ? "INT32" : "FP32";
        if (i == APIP_V2_OUTPUT && !sdpa) {
            dims[2] = e;
            return 3;
        }
        return mi.num_layers ? 5 : 4; /* a model of layers': (Ls, N, H, L, S) */
    }
    const apip_v2_input *in = sdpa ? apip_v2_sdpa_inputs : apip_v2_mha_inputs;
    *dt = in[i].dtypes & APIP_V2_DT(APIP_DT_FP32)   ? "FP32"
          : in[i].dtypes & APIP_V2_DT(APIP_DT_BOOL) ? "BOOL"
                                                    : "INT32";
    if (i < 3) {
        if (sdpa)
            return 4;
        dims[2] = widths[i];
        return 3;
    }
    return i == APIP_V2_IN_KEY_LENGTHS ? 1 : !strcmp(in[i].name, "key_mask") ? 2 : 4;
}

int api_v2_model_json(const api_registry *r, const char *name, const char *version, api_buf *out,
                      api_error *err) {
    const api_model *m;
    bool sdpa;
    if (apip_v2_find_model(r, name, version, &m, &sdpa, err))
        return -1;
    const apip_v2_input *in = sdpa ? apip_v2_sdpa_inputs : apip_v2_mha_inputs;
    const char *mname = sdpa ? API_V2_SDPA_MODEL : apip_model_name(m);
    apip_buf_puts(out, "{\"name\":");
    api_buf_json_string(out, mname, strlen(mname));
    apip_buf_puts(out,
                  ",\"versions\":[\"" API_V2_VERSION "\"],\"platform\":\"attnd\",\"inputs\":[");
    const char *dt;
    long long d[APIP_MAX_OUT_RANK];
    for (size_t i = 0; i < APIP_V2_IN_COUNT; i++) {
        size_t rank = apip_v2_tensor_dims(m, false, i, &dt, d);
        meta_tensor(out, i > 0, in[i].name, dt, d, rank);
    }
    apip_buf_puts(out, "],\"outputs\":[");
    for (size_t o = 0; o < APIP_V2_NOUTS; o++) {
        size_t rank = apip_v2_tensor_dims(m, true, o, &dt, d);
        meta_tensor(out, o > 0, apip_v2_out_names[o], dt, d, rank);
    }
    apip_buf_puts(out, "]}");
    if (out->failed)
        return api_fail(err, 500, "out_of_memory", NULL, "out of memory describing a model");
    return 0;
}

int api_v2_model_ready_json(const api_registry *r, const char *name, const char *version,
                            api_buf *out, api_error *err) {
    const api_model *m;
    bool sdpa;
    if (apip_v2_find_model(r, name, version, &m, &sdpa, err))
        return -1;
    const char *n = sdpa ? API_V2_SDPA_MODEL : apip_model_name(m);
    apip_buf_puts(out, "{\"name\":");
    api_buf_json_string(out, n, strlen(n));
    apip_buf_puts(out, ",\"ready\":true}");
    return 0;
}

static void index_entry(api_buf *out, bool comma, const char *name) {
    apip_buf_puts(out, comma ? ",{\"name\":" : "{\"name\":");
    api_buf_json_string(out, name, strlen(name));
    apip_buf_puts(out, ",\"version\":\"" API_V2_VERSION "\",\"state\":\"READY\"}");
}

void api_v2_index_json(const api_registry *r, api_buf *out) {
    apip_buf_puts(out, "[");
    size_t n = api_registry_count(r);
    for (size_t i = 0; i < n; i++)
        index_entry(out, i > 0, apip_model_name(api_registry_at(r, i)));
    index_entry(out, n > 0, API_V2_SDPA_MODEL);
    apip_buf_puts(out, "]");
}
