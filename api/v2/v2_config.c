/* v2_config.c - Triton's extensions of the Open Inference Protocol: a model's configuration
 * (its inputs and outputs, the serving settings given) and the statistics of every model, from
 * counters the server keeps.
 *
 * Legend: N batch, L query length, S key length, E embedding width, H heads, K top-k count. */
#include <stdio.h>
#include <string.h>

#include "v2.h"

/* ---- Model configuration and statistics (Triton's extensions) ----------------------------- */

/* One tensor of a configuration: {"name", "data_type": "TYPE_x", "dims", ...}. */
static void config_tensor(api_buf *out, bool comma, const char *name, const char *dt,
                          const long long *dims, size_t rank, int optional) {
    apip_buf_puts(out, comma ? ",{\"name\":\"" : "{\"name\":\"");
    apip_buf_puts(out, name);
    apip_buf_puts(out, "\",\"data_type\":\"TYPE_");
    apip_buf_puts(out, dt);
    apip_buf_puts(out, "\",\"dims\":[");
    apip_v2_put_dims(out, dims, rank);
    apip_buf_puts(out, "]");
    if (optional >= 0) /* an input */
        apip_buf_puts(out, optional ? ",\"format\":\"FORMAT_NONE\",\"optional\":true}"
                                    : ",\"format\":\"FORMAT_NONE\",\"optional\":false}");
    else
        apip_buf_puts(out, "}");
}

/* "key": {"string_value": "v"} */
static void config_param(api_buf *out, bool comma, const char *key, uint64_t v) {
    apip_buf_puts(out, comma ? ",\"" : "\"");
    apip_buf_puts(out, key);
    apip_buf_puts(out, "\":{\"string_value\":\"");
    apip_buf_put_u64(out, v);
    apip_buf_puts(out, "\"}");
}

int api_v2_model_config_json(const api_registry *r, const char *name, const char *version,
                             const api_v2_serving *sv, api_buf *out, api_error *err) {
    const api_model *m;
    bool sdpa;
    if (apip_v2_find_model(r, name, version, &m, &sdpa, err))
        return -1;
    const apip_v2_input *in = sdpa ? apip_v2_sdpa_inputs : apip_v2_mha_inputs;
    const char *mname = sdpa ? API_V2_SDPA_MODEL : apip_model_name(m);
    apip_buf_puts(out, "{\"name\":");
    api_buf_json_string(out, mname, strlen(mname));
    apip_buf_puts(out, ",\"platform\":\"attnd\",\"backend\":\"attnd\",\"version_policy\":{"
                       "\"latest\":{\"num_versions\":1}},\"max_batch_size\":0,"
                       "\"input\":[");
    const char *dt;
    long long d[APIP_MAX_OUT_RANK];
    for (size_t i = 0; i < APIP_V2_IN_COUNT; i++) {
        size_t rank = apip_v2_tensor_dims(m, false, i, &dt, d);
        config_tensor(out, i > 0, in[i].name, dt, d, rank, i > 0);
    }
    apip_buf_puts(out, "],\"output\":[");
    for (size_t o = 0; o < APIP_V2_NOUTS; o++) {
        size_t rank = apip_v2_tensor_dims(m, true, o, &dt, d);
        config_tensor(out, o > 0, apip_v2_out_names[o], dt, d, rank, -1);
    }
    apip_buf_puts(out, "],\"instance_group\":[{\"name\":");
    api_buf_json_string(out, mname, strlen(mname));
    apip_buf_puts(out, ",\"kind\":\"KIND_CPU\",\"count\":");
    apip_buf_put_u64(out, sv ? sv->instances : 1);
    apip_buf_puts(out, "}]");
    if (!sdpa && sv) { /* SDPA jobs always run alone: they have no batching */
        double t = sv->request_timeout * 1e6;
        apip_buf_puts(out, ",\"dynamic_batching\":{\"max_queue_delay_microseconds\":");
        apip_buf_put_u64(out, sv->batch_window_us);
        apip_buf_puts(out, ",\"preserve_ordering\":true,\"priority_levels\":0,"
                           "\"default_queue_policy\":{\"timeout_action\":\"REJECT\","
                           "\"default_timeout_microseconds\":");
        apip_buf_put_u64(out, t > 0 && t < 1.8e19 ? (uint64_t)t : 0);
        apip_buf_puts(out, ",\"allow_timeout_override\":true,\"max_queue_size\":");
        apip_buf_put_u64(out, sv->max_queue);
        apip_buf_puts(out, "}}");
    }
    apip_buf_puts(out, ",\"parameters\":{");
    if (sdpa) {
        config_param(out, false, "max_batch_rows", sv ? sv->max_batch_rows : 0);
    } else {
        api_model_info mi = api_model_describe(m);
        config_param(out, false, "embed_dim", mi.embed_dim);
        config_param(out, true, "num_heads", mi.num_heads);
        config_param(out, true, "kdim", mi.kdim);
        config_param(out, true, "vdim", mi.vdim);
        config_param(out, true, "vocab_size", mi.vocab_size);
        config_param(out, true, "max_batch_rows", sv ? sv->max_batch_rows : 0);
    }
    apip_buf_puts(out, "}}");
    if (out->failed)
        return api_fail(err, 500, "out_of_memory", NULL, "out of memory describing a model");
    return 0;
}

/* "key": {"count": n, "ns": n} */
static void stats_duration(api_buf *out, const char *key, api_v2_duration d) {
    apip_buf_puts(out, "\"");
    apip_buf_puts(out, key);
    apip_buf_puts(out, "\":{\"count\":");
    apip_buf_put_u64(out, d.count);
    apip_buf_puts(out, ",\"ns\":");
    apip_buf_put_u64(out, d.ns);
    apip_buf_puts(out, "}");
}

static void stats_model(api_buf *out, bool comma, const char *name, const api_v2_model_stats *s) {
    static const api_v2_duration none = {0, 0};
    apip_buf_puts(out, comma ? ",{\"name\":" : "{\"name\":");
    api_buf_json_string(out, name, strlen(name));
    apip_buf_puts(out, ",\"version\":\"" API_V2_VERSION "\",\"last_inference\":");
    apip_buf_put_u64(out, s->last_inference_ms);
    apip_buf_puts(out, ",\"inference_count\":");
    apip_buf_put_u64(out, s->inference_count);
    apip_buf_puts(out, ",\"execution_count\":");
    apip_buf_put_u64(out, s->execution_count);
    apip_buf_puts(out, ",\"inference_stats\":{");
    stats_duration(out, "success", s->success);
    apip_buf_puts(out, ",");
    stats_duration(out, "fail", s->fail);
    apip_buf_puts(out, ",");
    stats_duration(out, "queue", s->queue);
    apip_buf_puts(out, ",");
    stats_duration(out, "compute_input", s->compute_input);
    apip_buf_puts(out, ",");
    stats_duration(out, "compute_infer", s->compute_infer);
    apip_buf_puts(out, ",");
    stats_duration(out, "compute_output", s->compute_output);
    apip_buf_puts(out, ",");
    stats_duration(out, "cache_hit", none); /* attnd caches no results */
    apip_buf_puts(out, ",");
    stats_duration(out, "cache_miss", none);
    apip_buf_puts(out, "},\"batch_stats\":[],\"memory_usage\":[]}");
}

int api_v2_stats_json(const api_registry *r, const char *name, const char *version,
                      const api_v2_model_stats *stats, api_buf *out, api_error *err) {
    size_t n = api_registry_count(r), only = API_NO_MODEL;
    if (name) {
        const api_model *m;
        bool sdpa;
        if (apip_v2_find_model(r, name, version, &m, &sdpa, err))
            return -1;
        only = sdpa ? n : apip_model_index(m);
    }
    apip_buf_puts(out, "{\"model_stats\":[");
    bool comma = false;
    for (size_t i = 0; i <= n; i++) {
        if (only != API_NO_MODEL && i != only)
            continue;
        stats_model(out, comma, i < n ? apip_model_name(api_registry_at(r, i)) : API_V2_SDPA_MODEL,
                    &stats[i]);
        comma = true;
    }
    apip_buf_puts(out, "]}");
    if (out->failed)
        return api_fail(err, 500, "out_of_memory", NULL, "out of memory writing the statistics");
    return 0;
}
