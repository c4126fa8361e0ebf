/* store.c - the decode sessions a server holds: their records (one array of max_sessions, made
 * once), opening (a record, then a block of the job memory budget), lookups by id and owner that
 * compare every record in constant time, taking a session for an append and giving it back, the
 * idle time-out (a thread of the store), ending the least recently used idle session for a new
 * one at the limit or for memory the budget cannot otherwise fit (the job memory's reclaimer),
 * DELETE, GET's JSON and the counts.
 *
 * One lock guards the records and counts. Blocks are freed under it: the job memory's lock is
 * always taken after it (api_mem_free), never before (the memory calls its reclaimer without
 * its own lock), so the order is one way. A session's cache and parameters are touched only by
 * its opener before it is published and by the job that has taken it, never under the lock. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "session.h"

const char *const api_session_end_names[API_SESSION_END_COUNT] = {"ttl", "lru", "budget",
                                                                  "deleted"};

struct api_sessions {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* the sweeper's sleep, cut short by destroy */
    api_mem *mem;      /* where blocks come from (NULL: malloc, no budget) */
    size_t max;        /* records */
    double ttl;        /* seconds idle before a session ends; 0: never */
    apip_session *rec; /* (max) */
    size_t open, bytes;
    uint64_t opened, appends, ended[API_SESSION_END_COUNT];
    uint8_t key[16]; /* of the v2 sequence ids: random per store */
    bool stop, has_thread;
    pthread_t thread;
};

double apip_sessions_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const uint8_t *apip_sessions_key(const api_sessions *st) {
    return st->key;
}

/* ---- Ending sessions ----------------------------------------------------------------------- */

/* With the lock held: ends session s (idle, or given back) for reason: its record is free, its
 * block goes back to the memory. */
static void end_locked(api_sessions *st, apip_session *s, int reason) {
    if (s->state == APIP_SESSION_IDLE || s->state == APIP_SESSION_BUSY) {
        st->open--;
        st->bytes -= s->bytes;
        st->ended[reason]++;
    }
    api_mem_free(s->block);
    *s = (apip_session){.store = st, .state = APIP_SESSION_FREE, .ending = -1};
}

/* With the lock held: the least recently used idle session, or NULL. */
static apip_session *lru_idle_locked(api_sessions *st) {
    apip_session *best = NULL;
    for (size_t i = 0; i < st->max; i++) {
        apip_session *s = &st->rec[i];
        if (s->state == APIP_SESSION_IDLE && (!best || s->last_use < best->last_use))
            best = s;
    }
    return best;
}

size_t apip_sessions_sweep(api_sessions *st, double now) {
    size_t n = 0;
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; st->ttl > 0 && i < st->max; i++) {
        apip_session *s = &st->rec[i];
        if (s->state == APIP_SESSION_IDLE && now - s->last_use >= st->ttl) {
            end_locked(st, s, API_SESSION_END_TTL);
            n++;
        }
    }
    pthread_mutex_unlock(&st->mu);
    return n;
}

/* The job memory's reclaimer: idle sessions end, least recently used first, until shortfall
 * bytes have come back; none when all the idle ones together hold less (they would end for
 * nothing). Returns the bytes given back. */
static size_t reclaim(void *ctx, size_t shortfall) {
    api_sessions *st = ctx;
    size_t idle = 0, freed = 0;
    pthread_mutex_lock(&st->mu);
    for (size_t i = 0; i < st->max; i++)
        if (st->rec[i].state == APIP_SESSION_IDLE)
            idle += st->rec[i].bytes;
    while (idle >= shortfall && freed < shortfall) {
        apip_session *s = lru_idle_locked(st);
        if (!s)
            break;
        freed += s->bytes;
        end_locked(st, s, API_SESSION_END_BUDGET);
    }
    pthread_mutex_unlock(&st->mu);
    return freed;
}

/* The sweeper: every eighth of the time-out (from 0.05 to 1 s), the idle sessions past it end. */
static void *sweeper_main(void *arg) {
    api_sessions *st = arg;
    double period = st->ttl / 8;
    period = period < 0.05 ? 0.05 : period > 1.0 ? 1.0 : period;
    pthread_mutex_lock(&st->mu);
    while (!st->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long long ns = ts.tv_nsec + (long long)(period * 1e9);
        ts.tv_sec += (time_t)(ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        pthread_cond_timedwait(&st->cv, &st->mu, &ts);
        if (st->stop)
            break;
        pthread_mutex_unlock(&st->mu);
        apip_sessions_sweep(st, apip_sessions_now());
        pthread_mutex_lock(&st->mu);
    }
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

/* ---- The store ----------------------------------------------------------------------------- */

api_sessions *api_sessions_create(size_t max_sessions, double ttl_s, api_mem *mem, api_error *err) {
    api_sessions *st = calloc(1, sizeof *st);
    apip_session *rec = calloc(max_sessions ? max_sessions : 1, sizeof *rec);
    if (!st || !rec) {
        free(st), free(rec);
        api_fail(err, 500, "out_of_memory", NULL, "out of memory for %zu session records",
                 max_sessions);
        return NULL;
    }
    st->rec = rec;
    st->max = max_sessions;
    st->ttl = ttl_s > 0 ? ttl_s : 0;
    st->mem = mem;
    for (size_t i = 0; i < max_sessions; i++)
        rec[i] = (apip_session){.store = st, .state = APIP_SESSION_FREE, .ending = -1};
    if (getrandom(st->key, sizeof st->key, 0) != (ssize_t)sizeof st->key) {
        free(st->rec), free(st);
        api_fail(err, 500, "internal", NULL, "getrandom failed: no key for v2 sequence ids");
        return NULL;
    }
    pthread_mutex_init(&st->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&st->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (st->ttl > 0 && max_sessions > 0) {
        if (pthread_create(&st->thread, NULL, sweeper_main, st) != 0) {
            pthread_cond_destroy(&st->cv);
            pthread_mutex_destroy(&st->mu);
            free(st->rec), free(st);
            api_fail(err, 500, "internal", NULL, "cannot start the sessions' sweeper thread");
            return NULL;
        }
        st->has_thread = true;
    }
    api_mem_set_reclaim(mem, reclaim, st);
    return st;
}

void api_sessions_destroy(api_sessions *st) {
    if (!st)
        return;
    api_mem_set_reclaim(st->mem, NULL, NULL);
    pthread_mutex_lock(&st->mu);
    st->stop = true;
    pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
    if (st->has_thread)
        pthread_join(st->thread, NULL);
    for (size_t i = 0; i < st->max; i++)
        api_mem_free(st->rec[i].block);
    pthread_cond_destroy(&st->cv);
    pthread_mutex_destroy(&st->mu);
    free(st->rec);
    free(st);
}

api_sessions_stats api_sessions_stats_get(api_sessions *st) {
    api_sessions_stats s = {0};
    if (!st)
        return s;
    pthread_mutex_lock(&st->mu);
    s.open = st->open;
    s.max = st->max;
    s.bytes = st->bytes;
    s.ttl_s = st->ttl;
    s.opened = st->opened;
    s.appends = st->appends;
    memcpy(s.ended, st->ended, sizeof s.ended);
    pthread_mutex_unlock(&st->mu);
    return s;
}

size_t api_sessions_record_bytes(size_t max_sessions) {
    return sizeof(api_sessions) + max_sessions * sizeof(apip_session);
}

/* ---- Opening ------------------------------------------------------------------------------- */

#define ALIGN_UP(x) (((x) + 63) / 64 * 64)

int apip_session_open(api_sessions *st, const apip_session_spec *spec, uint32_t owner,
                      size_t max_bytes, apip_session **out, api_error *err) {
    const size_t E = spec->e, cap = spec->cap;
    size_t half = 0, params = 0, bytes = 0;
    bool fits = apip_mul(cap, E, &half) && apip_mul(half, sizeof(float), &half) &&
                apip_mul(spec->param_floats, sizeof(float), &params) &&
                apip_add(ALIGN_UP(half), ALIGN_UP(half), &bytes) &&
                apip_add(bytes, ALIGN_UP(params), &bytes) && half <= SIZE_MAX / 4;
    if (!fits || bytes > max_bytes)
        return api_fail(err, 413, "job_too_large", "max_length",
                        "the session needs %zu bytes (%.1f MiB) for a cache of max_length=%zu "
                        "rows of keys and values of width %zu%s, over the max_job_bytes limit of "
                        "%zu bytes; ask for a smaller max_length",
                        fits ? bytes : SIZE_MAX, fits ? (double)bytes / 1048576.0 : 0.0, cap, E,
                        params ? " and its parameters" : "", max_bytes);
    uint8_t id[APIP_SESSION_ID_BYTES];
    if (spec->id)
        memcpy(id, spec->id, sizeof id);
    else if (getrandom(id, sizeof id, 0) != (ssize_t)sizeof id)
        return api_fail(err, 500, "internal", NULL, "getrandom failed: no id for the session");

    /* A record: a free one, or the least recently used idle session's. */
    pthread_mutex_lock(&st->mu);
    apip_session *s = NULL;
    for (size_t i = 0; i < st->max && !s; i++)
        if (st->rec[i].state == APIP_SESSION_FREE)
            s = &st->rec[i];
    if (!s && (s = lru_idle_locked(st)) != NULL)
        end_locked(st, s, API_SESSION_END_LRU);
    if (s)
        s->state = APIP_SESSION_OPENING;
    pthread_mutex_unlock(&st->mu);
    if (!s)
        return api_fail(err, 503, "session_limit", NULL,
                        "attnd holds %zu sessions (--max-sessions), each with an append running; "
                        "retry shortly",
                        st->max);

    /* Its block (idle sessions may end for it: the memory's reclaimer). */
    size_t got = 0;
    bool over = false;
    void *block = api_mem_alloc_bounded(st->mem, bytes, bytes, &got, &over);
    if (!block) {
        pthread_mutex_lock(&st->mu);
        s->state = APIP_SESSION_FREE;
        pthread_mutex_unlock(&st->mu);
        if (over)
            return api_fail(err, 503, "memory_budget", NULL,
                            "the session's %zu bytes do not fit in the memory left for jobs and "
                            "sessions now (the memory budget); retry shortly, or ask for a smaller "
                            "max_length",
                            bytes);
        return api_fail(err, 500, "out_of_memory", NULL,
                        "out of memory allocating the session's %zu bytes", bytes);
    }
    char *b = block;
    s->model = spec->model;
    s->params = spec->model ? *apip_model_params(spec->model) : (attn_mha_params){0};
    s->init = APIP_INIT_NONE;
    s->params_ready = spec->model != NULL;
    s->e = E;
    s->h = spec->h;
    s->kdim = spec->kdim ? spec->kdim : E;
    s->vdim = spec->vdim ? spec->vdim : E;
    s->cache = (attn_kv_cache){
        .k = (float *)(void *)b, .v = (float *)(void *)(b + ALIGN_UP(half)), .cap = cap, .len = 0};
    s->param_block = params ? (float *)(void *)(b + 2 * ALIGN_UP(half)) : NULL;
    memcpy(s->id, id, sizeof id);
    s->owner = owner;
    s->ending = -1;
    s->sequence = spec->id != NULL;
    s->block = block;
    s->bytes = got;
    s->appends = 0;
    *out = s;
    return 0;
}

void apip_session_publish(apip_session *s, api_buf *out, bool taken) {
    api_sessions *st = s->store;
    pthread_mutex_lock(&st->mu);
    double now = apip_sessions_now();
    s->last_use = now;
    s->state = taken ? APIP_SESSION_BUSY : APIP_SESSION_IDLE;
    st->open++;
    st->bytes += s->bytes;
    st->opened++;
    if (out)
        apip_session_json(s, now, out);
    pthread_mutex_unlock(&st->mu);
}

void apip_session_discard(apip_session *s) {
    api_sessions *st = s->store;
    pthread_mutex_lock(&st->mu);
    end_locked(st, s, API_SESSION_END_DELETED);
    pthread_mutex_unlock(&st->mu);
}

/* ---- Finding a session --------------------------------------------------------------------- */

/* The 16 bytes of the id spelled hex (n bytes) into id; false (id zeroed) when it is not 32 hex
 * digits. Its time depends on n alone. */
static bool id_parse(const char *hex, size_t n, uint8_t id[APIP_SESSION_ID_BYTES]) {
    unsigned bad = n != APIP_SESSION_ID_HEX;
    memset(id, 0, APIP_SESSION_ID_BYTES);
    for (size_t i = 0; i < n && i < APIP_SESSION_ID_HEX; i++) {
        unsigned c = (unsigned char)hex[i], lo = c | 0x20, v = 0;
        unsigned digit = (c >= '0') & (c <= '9'), letter = (lo >= 'a') & (lo <= 'f');
        v = digit ? c - '0' : lo - 'a' + 10;
        bad |= !(digit | letter);
        id[i / 2] |= (uint8_t)((v & 15) << (i % 2 ? 0 : 4));
    }
    return !bad;
}

/* With the lock held: the published session of id and owner, or NULL. Every record is compared
 * whole, without a branch on its contents, and the match chosen by a mask: the time depends on
 * max_sessions alone. */
static apip_session *find_locked(api_sessions *st, const uint8_t *id, uint32_t owner) {
    size_t found = SIZE_MAX;
    for (size_t i = 0; i < st->max; i++) {
        const apip_session *s = &st->rec[i];
        uint32_t d = s->owner ^ owner;
        for (size_t j = 0; j < APIP_SESSION_ID_BYTES; j++)
            d |= (uint32_t)(s->id[j] ^ id[j]);
        d |= (uint32_t)((s->state != APIP_SESSION_IDLE) & (s->state != APIP_SESSION_BUSY));
        size_t mask = (size_t)0 - (size_t)(((uint64_t)d - 1) >> 63); /* all ones when d == 0 */
        found = (found & ~mask) | (i & mask);
    }
    return found == SIZE_MAX ? NULL : &st->rec[found];
}

int api_session_unknown(api_error *err) {
    return api_fail(err, 404, "session_unknown", NULL,
                    "there is no such session for this API key: it never existed here, ended (its "
                    "idle time-out, DELETE, or evicted for room), attnd restarted, or it lives on "
                    "another replica; open a new session and send the prefix again");
}

static int busy(api_error *err) {
    return api_fail(err, 409, "session_busy", NULL,
                    "another append to this session is running; wait for its answer, then send "
                    "this one again (expected_length makes a retry safe)");
}

/* Takes the session of id for owner: 0, 1 (none), or -1 (busy). */
static int take(api_sessions *st, const uint8_t *id, bool valid, uint32_t owner, apip_session **out,
                api_error *err) {
    pthread_mutex_lock(&st->mu);
    apip_session *s = find_locked(st, id, owner);
    int rc = !s || !valid ? 1 : s->state == APIP_SESSION_BUSY ? -1 : 0;
    if (rc == 0)
        s->state = APIP_SESSION_BUSY;
    pthread_mutex_unlock(&st->mu);
    *out = rc == 0 ? s : NULL;
    return rc < 0 ? busy(err) : rc;
}

int apip_session_take(api_sessions *st, const char *hex, size_t n, uint32_t owner,
                      apip_session **out, api_error *err) {
    uint8_t id[APIP_SESSION_ID_BYTES];
    bool valid = id_parse(hex, n, id);
    int rc = take(st, id, valid, owner, out, err);
    return rc == 1 ? api_session_unknown(err) : rc;
}

int apip_session_take_id(api_sessions *st, const uint8_t *id, uint32_t owner, apip_session **out,
                         api_error *err) {
    return take(st, id, true, owner, out, err);
}

void apip_session_give(apip_session *s, bool appended, bool end) {
    api_sessions *st = s->store;
    pthread_mutex_lock(&st->mu);
    if (appended) {
        s->appends++;
        st->appends++;
    }
    s->last_use = apip_sessions_now();
    int reason = end ? API_SESSION_END_DELETED : s->ending;
    if (reason >= 0)
        end_locked(st, s, reason);
    else
        s->state = APIP_SESSION_IDLE;
    pthread_mutex_unlock(&st->mu);
}

void apip_session_end_taken(apip_session *s) {
    apip_session_give(s, false, true);
}

/* ---- GET and DELETE ------------------------------------------------------------------------ */

/* Appends "name": seconds with 3 decimals (or null when none). */
static void put_seconds(api_buf *out, const char *name, double s, bool present) {
    apip_buf_puts(out, name);
    if (!present) {
        apip_buf_puts(out, "null");
        return;
    }
    char num[API_MS_MAX];
    size_t n = api_ms_write(num, s < 0 ? 0 : s > 1e12 ? 1e12 : s);
    api_buf_append(out, num, n);
}

void apip_session_json(const apip_session *s, double now, api_buf *out) {
    const api_sessions *st = s->store;
    char hex[APIP_SESSION_ID_HEX + 1];
    for (size_t i = 0; i < APIP_SESSION_ID_BYTES; i++) {
        hex[2 * i] = "0123456789abcdef"[s->id[i] >> 4];
        hex[2 * i + 1] = "0123456789abcdef"[s->id[i] & 15];
    }
    hex[APIP_SESSION_ID_HEX] = '\0';
    apip_buf_puts(out, "{\"id\":\"");
    apip_buf_puts(out, hex);
    apip_buf_puts(out, "\",\"length\":");
    apip_buf_put_u64(out, s->cache.len);
    apip_buf_puts(out, ",\"max_length\":");
    apip_buf_put_u64(out, s->cache.cap);
    apip_buf_puts(out, ",\"bytes\":");
    apip_buf_put_u64(out, s->bytes);
    apip_buf_puts(out, ",\"model\":");
    if (s->model) {
        const char *name = apip_model_name(s->model);
        api_buf_json_string(out, name, strlen(name));
    } else {
        apip_buf_puts(out, "null");
    }
    apip_buf_puts(out, ",\"num_heads\":");
    apip_buf_put_u64(out, s->h);
    apip_buf_puts(out, ",\"embed_dim\":");
    apip_buf_put_u64(out, s->e);
    apip_buf_puts(out, ",\"kdim\":");
    apip_buf_put_u64(out, s->kdim);
    apip_buf_puts(out, ",\"vdim\":");
    apip_buf_put_u64(out, s->vdim);
    put_seconds(out, ",\"ttl_s\":", st->ttl, st->ttl > 0);
    double left = s->state == APIP_SESSION_BUSY ? st->ttl : s->last_use + st->ttl - now;
    put_seconds(out, ",\"expires_in_s\":", left, st->ttl > 0);
    apip_buf_puts(out, "}");
}

int api_session_get(api_sessions *st, uint32_t owner, const char *id, api_buf *out,
                    api_error *err) {
    if (!st)
        return api_session_unknown(err);
    uint8_t raw[APIP_SESSION_ID_BYTES];
    bool valid = id_parse(id, strlen(id), raw);
    pthread_mutex_lock(&st->mu);
    apip_session *s = find_locked(st, raw, owner);
    s = valid ? s : NULL;
    if (s)
        apip_session_json(s, apip_sessions_now(), out);
    pthread_mutex_unlock(&st->mu);
    return s ? 0 : api_session_unknown(err);
}

int api_session_delete(api_sessions *st, uint32_t owner, const char *id, api_error *err) {
    if (!st)
        return api_session_unknown(err);
    uint8_t raw[APIP_SESSION_ID_BYTES];
    bool valid = id_parse(id, strlen(id), raw);
    pthread_mutex_lock(&st->mu);
    apip_session *s = find_locked(st, raw, owner);
    s = valid ? s : NULL;
    if (s && s->state == APIP_SESSION_BUSY)
        s->ending = API_SESSION_END_DELETED; /* ends when its append's job gives it back */
    else if (s)
        end_locked(st, s, API_SESSION_END_DELETED);
    pthread_mutex_unlock(&st->mu);
    return s ? 0 : api_session_unknown(err);
}
