/* v2_seq.c - Triton's sequence extension on attnd's decode sessions: the sequence_id,
 * sequence_start and sequence_end parameters of an infer request, as Triton's protocol
 * (extension_sequence) defines them and tritonclient sends them (sequence_id, a uint64 or a
 * string, with both flags, whenever it is not 0 or ""), mapped onto the same sessions as API
 * v1's. A request of a sequence is an append to its session: its query (and key, value) rows
 * are the sequence's next rows, and the reply carries their outputs only.
 *
 * A sequence's session is named by a keyed hash (SipHash-2-4-128 under the store's random key)
 * of the API key's index, the model and the sequence id, so that two keys, or two models, never
 * share a sequence, and v1's routes cannot name one. sequence_start opens it (ending one of that
 * id that runs: the client starts over), a request without it finds it (404 when there is none:
 * it never started, ended, timed out or was evicted, or lives on another replica), and
 * sequence_end ends it once its request has run. */
#include <stdio.h>
#include <string.h>

#include "v2.h"

#define SEQ_ID_MAX 128 /* bytes of a string sequence id */

/* The flag at v (NULL: absent): 0 or 1, or -1 with a 400 naming it. */
static int flag(const char *v, const char *name, api_error *err) {
    char k = v ? apip_jv_kind(v) : 'n';
    if (k == 'n' || k == 'f' || k == 't')
        return k == 't';
    return api_fail(err, 400, "invalid_field", NULL, "the parameter %s must be true or false",
                    name);
}

/* The sequence id at v as bytes into out (its kind first: 'u' and 8 little-endian bytes, or 's'
 * and the decoded string), its text for messages into shown; *n 0 when it is no sequence (absent,
 * null, 0 or ""). 0, or -1 with err. */
static int seq_id(const char *v, uint8_t *out, size_t *n, char *shown, size_t cap, api_error *err) {
    *n = 0;
    char k = v ? apip_jv_kind(v) : 'n';
    if (k == 'n')
        return 0;
    if (k == '"') {
        char s[SEQ_ID_MAX + 2];
        size_t len = apip_jv_decode(apip_jv_string(v), s, sizeof s);
        if (len > SEQ_ID_MAX)
            return api_fail(err, 400, "invalid_field", NULL,
                            "the parameter sequence_id is a string of more than %d bytes",
                            SEQ_ID_MAX);
        if (len == 0)
            return 0;
        out[0] = 's';
        memcpy(out + 1, s, len);
        *n = 1 + len;
        snprintf(shown, cap, "\"%.*s\"", (int)(len < 40 ? len : 40), s);
        return 0;
    }
    bool neg = false;
    uint64_t x = 0;
    if (k != '0' || apip_jv_int(v, &neg, &x) != APIP_INT_OK || neg)
        return api_fail(err, 400, "invalid_field", NULL,
                        "the parameter sequence_id must be a uint64 or a string (0 and \"\": no "
                        "sequence)");
    if (x == 0)
        return 0;
    out[0] = 'u';
    for (int i = 0; i < 8; i++)
        out[1 + i] = (uint8_t)(x >> (8 * i));
    *n = 9;
    snprintf(shown, cap, "%llu", (unsigned long long)x);
    return 0;
}

int apip_v2_sequence(const apip_v2_seq *q, const api_model *model, api_sessions *st, uint32_t owner,
                     const api_limits *lim, apip_job_given *given, api_error *err) {
    uint8_t key[8 + 1 + SEQ_ID_MAX + 1];
    size_t n = 0;
    char shown[64] = "";
    int start = flag(q->start, "sequence_start", err), end = flag(q->end, "sequence_end", err);
    if (start < 0 || end < 0 || seq_id(q->id, key + 12, &n, shown, sizeof shown, err))
        return -1;
    if (n == 0 && (start || end))
        return api_fail(err, 400, "invalid_field", NULL,
                        "sequence_start and sequence_end need a sequence_id other than 0 and \"\"");
    if (n == 0)
        return 0;
    if (!model)
        return api_fail(err, 400, "invalid_field", NULL,
                        "a sequence runs on a registry model (its attention on a key/value cache), "
                        "not on " API_V2_SDPA_MODEL);
    if (!st)
        return api_fail(err, 400, "invalid_field", NULL,
                        "the parameter sequence_id needs decode sessions, and none were given to "
                        "the parser");
    /* The session's id: the owner, the model and the sequence id, under the store's key. */
    size_t mi = apip_model_index(model);
    for (int i = 0; i < 4; i++)
        key[i] = (uint8_t)(owner >> (8 * i));
    for (int i = 0; i < 8; i++)
        key[4 + i] = (uint8_t)((uint64_t)mi >> (8 * i));
    uint8_t id[APIP_SESSION_ID_BYTES];
    apip_siphash128(apip_sessions_key(st), key, 12 + n, id);

    apip_session *s = NULL;
    int rc = apip_session_take_id(st, id, owner, &s, err);
    if (rc < 0)
        return -1;
    if (rc == 0 && start) { /* a start on a running sequence: it starts over */
        apip_session_end_taken(s);
        s = NULL;
    }
    if (!start && !s)
        return api_fail(err, 404, "session_unknown", NULL,
                        "sequence %s of model %s is not running here: it never started, ended, "
                        "timed out or was evicted, attnd restarted, or it lives on another "
                        "replica; start it again with sequence_start and send the prefix again",
                        shown, apip_model_name(model));
    if (start) {
        api_model_info mi_ = api_model_describe(model);
        size_t positions = 0, most = lim->max_dim;
        apip_model_position_embeddings(model, &positions);
        most = positions && positions < most ? positions : most;
        apip_session_spec spec = {.model = model,
                                  .e = mi_.embed_dim,
                                  .h = mi_.num_heads,
                                  .kdim = mi_.kdim,
                                  .vdim = mi_.vdim,
                                  .cap = positions || APIP_SESSION_DEFAULT_LENGTH > most
                                             ? most
                                             : APIP_SESSION_DEFAULT_LENGTH,
                                  .id = id};
        if (mi_.add_bias_kv || mi_.add_zero_attn)
            return api_fail(err, 400, "invalid_field", NULL,
                            "model %s appends keys after its projections (add_bias_kv or "
                            "add_zero_attn), which a sequence does not hold",
                            mi_.name);
        if (apip_session_open(st, &spec, owner, lim->max_job_bytes, &s, err))
            return -1;
        apip_session_publish(s, NULL, true);
    }
    given->session = s;
    given->session_end = end;
    return 1;
}
