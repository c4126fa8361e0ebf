/* seeded.c - seeded input tensors of API v1: query, key and value (or q, k and v) given as
 * {"init": "uniform", "seed": S, "shape": [d0, d1, ...]} rather than as data. The server makes
 * such a tensor itself: element i (row-major) is the i-th output x of the splitmix64 stream
 * seeded with S made (x >> 40) * 2^-23 - 1, a float32 uniform in [-1, 1) (apip_uniform_fill,
 * api/base/uniform.c, the stream of params.init's random weights). This file only probes the
 * object (its shape checked as a binary tensor's, against max_dim and size_t); request.c lays
 * out room for the values and the job makes them when it first runs (api/job/job.c), so a body
 * of a few hundred bytes never costs parsing time in proportion to the shape it declares. */
#include <stdio.h>
#include <string.h>

#include "v1.h"

/* "name.field" into out (cap bytes); returns out. For error paths only. */
static const char *sub_path(char *out, size_t cap, const char *name, const char *field) {
    snprintf(out, cap, "%s.%s", name, field);
    return out;
}

/* True when the object at val has an "init" or a "seed" member: the seeded form (a binary
 * tensor has neither). */
static bool is_seeded(const char *val) {
    const char *it = val, *v = NULL;
    apip_span key;
    while (apip_jv_obj_next(&it, &key, &v))
        if (apip_jv_streq(key, "init") || apip_jv_streq(key, "seed"))
            return true;
    return false;
}

/* The seed at v: digits only (no sign, fraction or exponent), below 2^53. 0, or -1 with a 400
 * naming path. */
static int read_seed(const char *v, const char *path, uint64_t *seed, api_error *err) {
    const char *e = apip_jv_kind(v) == '0' ? apip_jv_end(v) : v;
    uint64_t x = 0;
    bool ok = e > v && e - v <= 16;
    for (const char *p = v; ok && p < e; p++) {
        ok = *p >= '0' && *p <= '9';
        x = x * 10 + (uint64_t)(*p - '0');
    }
    if (ok && x < APIP_SEED_LIMIT) {
        *seed = x;
        return 0;
    }
    return api_fail(err, 400, "invalid_field", path,
                    "%s must be an integer from 0 to 2^53 - 1 (9007199254740991), written "
                    "without a sign, fraction or exponent",
                    path);
}

int apip_seeded_probe(apip_tensor_in *t, const char *name, const char *val, size_t min_rank,
                      size_t max_rank, size_t max_dim, size_t max_job_bytes, api_error *err) {
    if (apip_jv_kind(val) != '{' || !is_seeded(val))
        return 1;
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->val = val;
    char path[160], k[32];
    const char *it = val, *v = NULL, *init = NULL, *seed = NULL, *shape = NULL;
    apip_span key;
    while (apip_jv_obj_next(&it, &key, &v)) {
        const char **slot = apip_jv_streq(key, "init")    ? &init
                            : apip_jv_streq(key, "seed")  ? &seed
                            : apip_jv_streq(key, "shape") ? &shape
                                                          : NULL;
        apip_jv_decode(key, k, sizeof k);
        sub_path(path, sizeof path, name, k);
        if (!slot)
            return api_fail(err, 400, "invalid_field", path,
                            "%s is not a member of a seeded tensor {\"init\": \"uniform\", "
                            "\"seed\", \"shape\"} (its dtype is float32)",
                            path);
        if (*slot)
            return api_fail(err, 400, "invalid_field", path, "%s appears twice", path);
        *slot = v;
    }
    const char *missing = !init ? "init" : !seed ? "seed" : !shape ? "shape" : NULL;
    if (missing)
        return api_fail(err, 400, "invalid_field", sub_path(path, sizeof path, name, missing),
                        "%s is required in a seeded tensor {\"init\": \"uniform\", \"seed\": S, "
                        "\"shape\": [..]}",
                        path);
    if (apip_jv_kind(init) != '"' || !apip_jv_streq(apip_jv_string(init), "uniform"))
        return api_fail(err, 400, "invalid_field", sub_path(path, sizeof path, name, "init"),
                        "%s must be \"uniform\" (uniform in [-1, 1) from the seed)", path);
    if (read_seed(seed, sub_path(path, sizeof path, name, "seed"), &t->seed, err) ||
        apip_tensor_shape(t, shape, max_rank, max_dim, max_job_bytes, err))
        return -1;
    if (t->rank < min_rank)
        return api_fail(err, 400, "invalid_field", sub_path(path, sizeof path, name, "shape"),
                        "%s has %zu dimension%s; %s needs %zu to %zu", path, t->rank,
                        t->rank == 1 ? "" : "s", name, min_rank, max_rank);
    t->seeded = true;
    return 0;
}
