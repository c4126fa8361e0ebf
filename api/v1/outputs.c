/* outputs.c - API v1's "outputs": which tensors the reply carries. An array of distinct names
 * from "output", "weights" (with need_weights: the dense weights, or {indices, values} with
 * weights_top_k), "trace" (with "trace": true) and "predictions" (a model of layers with an
 * unembedding); absent or null, the reply carries all the job makes; [] carries none, only usage
 * and the other metadata. The job is computed the same
 * either way (the weights and the trace too, when asked for): only the reply and its bound
 * (apip_response_bound) change. */
#include <stdio.h>

#include "v1.h"

/* The names, bit i of an APIP_OMIT_* set being NAMES[i]. */
static const char *const NAMES[] = {"output", "weights", "trace", "predictions"};

int apip_outputs_read(const char *v, bool weights, bool trace, bool predictions, unsigned *omit,
                      api_error *err) {
    const char *what = "outputs must be an array of distinct names from \"output\", \"weights\" "
                       "(with need_weights), \"trace\" (with trace: true) and \"predictions\" "
                       "(a model of layers with an unembedding)";
    if (apip_jv_kind(v) != '[')
        return api_fail(err, 400, "invalid_field", "outputs", "%s", what);
    unsigned listed = 0;
    const char *it = v, *el = NULL;
    for (size_t i = 0; apip_jv_arr_next(&it, &el); i++) {
        int which = -1;
        for (int b = 0; b < 4 && which < 0 && apip_jv_kind(el) == '"'; b++)
            if (apip_jv_streq(apip_jv_string(el), NAMES[b]))
                which = b;
        if (which < 0)
            return api_fail(err, 400, "invalid_field", "outputs", "outputs[%zu]: %s", i, what);
        unsigned bit = 1u << which;
        if (listed & bit)
            return api_fail(err, 400, "invalid_field", "outputs",
                            "outputs lists \"%s\" twice; list each output once", NAMES[which]);
        if ((bit == APIP_OMIT_WEIGHTS && !weights) || (bit == APIP_OMIT_TRACE && !trace) ||
            (bit == APIP_OMIT_PREDICTIONS && !predictions))
            return api_fail(err, 400, "invalid_field", "outputs",
                            "outputs lists \"%s\", which the job does not make: it needs %s",
                            NAMES[which],
                            bit == APIP_OMIT_WEIGHTS ? "need_weights"
                            : bit == APIP_OMIT_TRACE ? "\"trace\": true"
                                                     : "a model of layers with an unembedding and "
                                                       "predict_top_k above 0");
        listed |= bit;
    }
    *omit = APIP_OMIT_ALL & ~listed;
    return 0;
}
