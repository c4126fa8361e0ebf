/* session.h - api/session/, decode sessions: the store of the sessions a server holds (store.c:
 * their records, ids, owners, lookups in constant time, the idle time-out, ending them by least
 * recent use and for the memory budget, their counts, and what GET and DELETE answer), each
 * session's key/value cache and parameters in one block of the job memory budget, and the keyed
 * hash that names a v2 sequence's session (siphash.c).
 *
 * A session is a record of the store: what it was opened with (its model or inline parameters,
 * E, H, kdim, vdim, its cap of rows) and its cache (attn_kv_cache, attention.h's "Decode
 * sessions"), in one block charged to the job memory budget. An append takes the session
 * (apip_session_take: it is busy), the job computes on its cache, and gives it back when the
 * job ends (apip_session_give). One append at a time: a second one finds it busy (409). A busy
 * session is never ended under its job: DELETE, sequence_end and shutdown mark it, and it ends
 * when it is given back; the time-out and eviction pass it by.
 *
 * Owns: store.c, siphash.c. May include: models.h (api/models/), codec.h (api/codec/), base.h
 * (api/base/), api.h and attention.h. The job room (api/job/) and those above it include this
 * header. Nothing here is part of api.h's contract but what api.h declares.
 *
 * Legend: E embedding width, H heads, Dh = E / H, cap the rows a session holds at most. */
#ifndef ATTND_API_SESSION_H
#define ATTND_API_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "models.h"

#define APIP_SESSION_ID_BYTES 16 /* 128 bits from getrandom (v1), or a keyed hash (v2) */
#define APIP_SESSION_ID_HEX   32 /* as the routes spell it: lowercase hex */

/* The max_length of a session whose model has no position table, when none is asked for (a
 * model with one: its positions); at most max_dim either way. */
#define APIP_SESSION_DEFAULT_LENGTH 1024

/* ---- Keyed hash (siphash.c) ------------------------------------------------------------------ */

/* SipHash-2-4 with its 128-bit output (Aumasson and Bernstein; the reference's vectors_sip128):
 * the n bytes at msg under the 16-byte key into out (16 bytes: the two 64-bit words, each
 * little-endian). */
void apip_siphash128(const uint8_t key[16], const void *msg, size_t n, uint8_t out[16]);

/* ---- Sessions (store.c) ---------------------------------------------------------------------- */

/* What a session is opened with (plain data; the v1 and v2 parsers fill it). */
typedef struct apip_session_spec {
    const api_model *model;  /* a registry model (borrowed), or NULL: inline parameters */
    size_t e, h, kdim, vdim; /* E, H, and the key and value widths (0: E) */
    size_t cap;              /* the most rows it holds (max_length) */
    size_t param_floats;     /* inline parameters copied into the block (0 with a model) */
    const uint8_t *id;       /* a v2 sequence's id (APIP_SESSION_ID_BYTES), or NULL: random */
} apip_session_spec;

/* A session: a record of the store. The fields above "store" are the session's own, set by its
 * opener and read by its job while it is taken; the rest are the store's, under its lock. */
typedef struct apip_session {
    const api_model *model;  /* a registry model, or NULL: params are the block's */
    attn_mha_params params;  /* the model's (borrowed) or pointers into the block */
    int init;                /* params.init (APIP_INIT_*): made by the first append */
    uint64_t seed;           /* params.init "random"'s seed */
    bool params_ready;       /* params hold their weights */
    size_t e, h, kdim, vdim; /* the MHA's widths (kdim and vdim set: never 0) */
    attn_kv_cache cache;     /* k, v (H, cap, Dh) in the block; cap; len, the rows held */
    float *param_block;      /* spec.param_floats floats in the block, 64-byte aligned */
    /* store */
    struct api_sessions *store;
    uint8_t id[APIP_SESSION_ID_BYTES];
    uint32_t owner;   /* the API key's index that opened it */
    int state;        /* APIP_SESSION_FREE, _OPENING, _IDLE, _BUSY */
    int ending;       /* an end asked while busy (API_SESSION_END_*), or -1 */
    bool sequence;    /* a v2 sequence's session (its id is a hash, not random) */
    void *block;      /* the cache and params, a bounded block of the job memory budget */
    size_t bytes;     /* the block's capacity: what the session holds */
    double last_use;  /* monotonic seconds of its open or its last append's end */
    uint64_t appends; /* appends computed */
} apip_session;

enum { APIP_SESSION_FREE, APIP_SESSION_OPENING, APIP_SESSION_IDLE, APIP_SESSION_BUSY };

/* Opens a session of spec for owner: a record (at --max-sessions, the least recently used idle
 * session ends for it, API_SESSION_END_LRU), then its block (a bounded block of the store's job
 * memory: past the budget, idle sessions end for it, least recently used first,
 * API_SESSION_END_BUDGET, through the memory's reclaimer), laid out as k, v (H, cap, Dh) and the
 * inline parameters; the session's widths, cache and param_block set, params empty. It is not
 * found by id until apip_session_publish; the caller fills params (and param_block) meanwhile.
 * Then 0 with *out; or -1 with err: 413 job_too_large (the block over max_bytes: the message
 * says the cap of rows and the bytes), 503 session_limit (every session busy), 503
 * memory_budget, 500 out_of_memory. */
int apip_session_open(struct api_sessions *st, const apip_session_spec *spec, uint32_t owner,
                      size_t max_bytes, apip_session **out, api_error *err);

/* Makes an opened session findable (idle, last use now; with taken, busy: taken by the caller
 * as apip_session_take would) and, when out is not NULL, appends its JSON (apip_session_json)
 * to out, under the store's lock. */
void apip_session_publish(apip_session *s, api_buf *out, bool taken);

/* Gives up a session opened but not published: its block and record go back. */
void apip_session_discard(apip_session *s);

/* Finds owner's session of the id spelled hex (n bytes: 32 lowercase or uppercase hex digits)
 * and takes it for an append (busy). Every record is compared, in constant time, whatever the
 * id: a malformed id, an unknown one, one that ended and another owner's all take the same
 * path and the same time, and answer the same 404 session_unknown. 0 with *out; or -1 with err:
 * 404 session_unknown, 409 session_busy (another append holds it). */
int apip_session_take(struct api_sessions *st, const char *hex, size_t n, uint32_t owner,
                      apip_session **out, api_error *err);

/* As apip_session_take, for an id of APIP_SESSION_ID_BYTES (a v2 sequence's); 0 with *out, 1
 * (*out NULL, nothing taken) when there is no such session, or -1 with err: 409 session_busy. */
int apip_session_take_id(struct api_sessions *st, const uint8_t *id, uint32_t owner,
                         apip_session **out, api_error *err);

/* Gives a taken session back (the end of its append's job): appended counts an append; its last
 * use is now. It ends now (its block freed, API_SESSION_END_DELETED) when end is true or an end
 * was asked while it was busy (with that reason). */
void apip_session_give(apip_session *s, bool appended, bool end);

/* Ends a session taken by the caller at once (a v2 sequence_start on a running sequence), as
 * DELETE would: API_SESSION_END_DELETED. */
void apip_session_end_taken(apip_session *s);

/* Appends the JSON of a session: {"id", "length", "max_length", "bytes", "model", "num_heads",
 * "embed_dim", "kdim", "vdim", "ttl_s", "expires_in_s"} (model null for inline parameters;
 * ttl_s and expires_in_s null without a time-out; expires_in_s the time left if left idle). With
 * the store's lock held, or on a session the caller holds. */
void apip_session_json(const apip_session *s, double now, api_buf *out);

/* Ends the idle sessions unused for the time-out as of the monotonic time now
 * (API_SESSION_END_TTL) and returns how many (the store's thread calls it; tests call it with
 * a time of their choosing). */
size_t apip_sessions_sweep(struct api_sessions *st, double now);

/* Monotonic seconds, the store's clock. */
double apip_sessions_now(void);

/* The key of the store's v2 sequence ids (random per store), for apip_siphash128. */
const uint8_t *apip_sessions_key(const struct api_sessions *st);

#endif
