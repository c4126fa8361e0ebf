/* http_share.c - identical job requests in flight share one computation (--share-jobs).
 *
 * A class walking the guided path sends the same requests at the same moment: 60 students at
 * step 8 ask for the same seeded n = 8k job, and each would be computed once per student. Here
 * a job request whose decoded body is at most HTTP_SHARE_MAX_BODY bytes, once parsed and handed
 * to the workers, becomes a leader: its key goes into a table until its result is settled. A
 * request with the same key that arrives meanwhile joins it as a follower: it is neither parsed
 * nor computed; it reserves its reply's room as the leader did, waits suspended, and when the
 * leader's result is settled gets a copy of it: status, body, coding. The key is everything the
 * result depends on: the route, a v2 path's model and version, the binary header's length, the
 * coding the reply may take, and the body's bytes (compared whole, not by hash alone). A job
 * that changes state (a decode session's append) must not lead: the caller says so.
 *
 * The leader's body is kept in its entry (it is counted in the memory budget as it was while
 * it arrived) and freed with it. Lock order: h->share_mu, then a request's r->mu. */
#include <microhttpd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "http_internal.h"

struct http_share_entry {
    struct http_share_entry *next; /* in its bucket */
    uint64_t hash;
    srv_route route;
    srv_coding reply_coding;
    size_t v2_header_len;
    const char *model, *version; /* the leader's (it outlives the entry) */
    srv_body *body;              /* the leader's decoded body, the key's bytes */
    const char *text;
    size_t len;
    size_t reply_max;    /* the reply's room the leader reserved, reserved by each follower */
    api_op op;           /* for a follower's metrics */
    size_t model_index;  /* (api_job_model_index) */
    http_req *followers; /* linked through share_next, newest first */
};

/* A multiply-rotate hash of n bytes in four lanes of 8 (the lanes' multiplies run side by side:
 * about 0.2 cycles per byte, where a byte at a time took 4 and cost W1 a fifth of its CPU). Not
 * a cryptographic hash: the table's salt keeps a client from choosing a bucket, and equal keys
 * are compared whole. */
#define MIX_K 0x9e3779b97f4a7c15ull

static uint64_t rotl(uint64_t x, int r) {
    return (x << r) | (x >> (64 - r));
}

static uint64_t fmix(uint64_t x) { /* MurmurHash3's finaliser */
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static uint64_t mix(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t l[4] = {h, h ^ 0x5851f42d4c957f2dull, h + MIX_K, rotl(h, 29)};
    for (; n >= 32; b += 32, n -= 32)
        for (int i = 0; i < 4; i++) {
            uint64_t w;
            memcpy(&w, b + 8 * i, 8);
            l[i] = rotl((l[i] ^ w) * MIX_K, 31);
        }
    for (int i = 0; n > 0; i = (i + 1) & 3) {
        uint64_t w = 0;
        size_t k = n < 8 ? n : 8;
        memcpy(&w, b, k);
        l[i] = rotl((l[i] ^ w ^ ((uint64_t)k << 56)) * MIX_K, 31);
        b += k;
        n -= k;
    }
    return fmix(l[0] ^ rotl(l[1], 16) ^ rotl(l[2], 32) ^ rotl(l[3], 48));
}

/* The key's hash, computed once per request (join, then lead, ask for it). */
static uint64_t key_hash(const srv_http *h, http_req *r, const char *text, size_t len) {
    if (r->share_hashed)
        return r->share_hash;
    uint64_t x = mix(h->id_salt, &r->route, sizeof r->route);
    x = mix(x, &r->reply_coding, sizeof r->reply_coding);
    x = mix(x, &r->v2_header_len, sizeof r->v2_header_len);
    if (r->model)
        x = mix(x, r->model, strlen(r->model) + 1);
    if (r->version)
        x = mix(x, r->version, strlen(r->version) + 1);
    r->share_hash = mix(x ^ len, text, len);
    r->share_hashed = true;
    return r->share_hash;
}

static bool same_str(const char *a, const char *b) {
    return a == b || (a && b && !strcmp(a, b));
}

static bool key_equal(const struct http_share_entry *e, uint64_t hash, const http_req *r,
                      const char *text, size_t len) {
    return e->hash == hash && e->route == r->route && e->reply_coding == r->reply_coding &&
           e->v2_header_len == r->v2_header_len && e->len == len && same_str(e->model, r->model) &&
           same_str(e->version, r->version) && !memcmp(e->text, text, len);
}

static bool shareable(const srv_http *h, const http_req *r, size_t len) {
    return h->cfg->share_jobs && len <= HTTP_SHARE_MAX_BODY &&
           (r->route == SRV_ROUTE_SDPA || r->route == SRV_ROUTE_ATTENTION ||
            r->route == SRV_ROUTE_V2_INFER);
}

/* The entry of key in its bucket (under share_mu), or NULL. */
static struct http_share_entry **find(srv_http *h, uint64_t hash, const http_req *r,
                                      const char *text, size_t len) {
    struct http_share_entry **p = &h->share[hash % HTTP_SHARE_BUCKETS];
    while (*p && !key_equal(*p, hash, r, text, len))
        p = &(*p)->next;
    return p;
}

bool http_share_join(srv_http *h, http_req *r, bool suspend) {
    size_t len;
    const char *text = srv_body_data(r->body, &len);
    if (!shareable(h, r, len))
        return false;
    uint64_t hash = key_hash(h, r, text, len);
    pthread_mutex_lock(&h->share_mu);
    struct http_share_entry *e = *find(h, hash, r, text, len);
    if (!e || !http_unsent_reserve(h, r, e->reply_max)) {
        pthread_mutex_unlock(&h->share_mu);
        return false; /* computed alone (and refused there when the budget is full) */
    }
    r->sj.op = e->op;
    r->sj.model = e->model_index;
    r->share_next = e->followers;
    e->followers = r;
    r->shared = true;
    if (suspend) { /* before the leader can settle and resume it: share_mu is held */
        pthread_mutex_lock(&r->mu);
        MHD_suspend_connection(r->conn);
        r->state = REQ_QUEUED;
        pthread_mutex_unlock(&r->mu);
    }
    pthread_mutex_unlock(&h->share_mu);
    srv_body_destroy(r->body);
    r->body = NULL;
    srv_metrics_shared(h->metrics);
    return true;
}

bool http_share_lead(srv_http *h, http_req *r, srv_body *body, size_t reply_max) {
    size_t len;
    const char *text = srv_body_data(body, &len);
    if (!shareable(h, r, len))
        return false;
    struct http_share_entry *e = calloc(1, sizeof *e);
    if (!e)
        return false;
    *e = (struct http_share_entry){.hash = key_hash(h, r, text, len),
                                   .route = r->route,
                                   .reply_coding = r->reply_coding,
                                   .v2_header_len = r->v2_header_len,
                                   .model = r->model,
                                   .version = r->version,
                                   .body = body,
                                   .text = text,
                                   .len = len,
                                   .reply_max = reply_max,
                                   .op = r->sj.op,
                                   .model_index = r->sj.model};
    pthread_mutex_lock(&h->share_mu);
    struct http_share_entry **slot = find(h, e->hash, r, text, len);
    if (*slot) { /* an identical job parsed at the same time leads already: this one runs alone */
        pthread_mutex_unlock(&h->share_mu);
        free(e);
        return false;
    }
    *slot = e;
    r->share_lead = e;
    pthread_mutex_unlock(&h->share_mu);
    return true;
}

/* A follower's copy of the leader's settled result, held as a computed reply is
 * (http_job_hold); 503 out_of_memory when no copy can be made. */
static void follow(http_req *f, const http_req *lead) {
    srv_job *sj = &f->sj;
    const srv_job *from = &lead->sj;
    sj->status = from->status;
    memcpy(sj->code, from->code, sizeof sj->code);
    sj->error = from->error;
    sj->queue_ms = from->queue_ms;
    sj->compute_ms = from->compute_ms;
    sj->encode_ms = from->encode_ms;
    f->binary_bytes = lead->binary_bytes;
    f->json_len = lead->json_len;
    f->content_encoding = lead->content_encoding;
    api_buf_free(&sj->body);
    api_buf_append(&sj->body, from->body.data, from->body.len);
    if (from->body.len && (sj->body.failed || !sj->body.data)) {
        api_error e = {0};
        api_fail(&e, 503, "out_of_memory", NULL, "no memory to copy the reply now; retry later");
        api_buf_free(&sj->body);
        api_error_body(&e, &sj->body);
        sj->status = 503;
        sj->error = e;
        snprintf(sj->code, sizeof sj->code, "%s", e.code);
        f->binary_bytes = 0;
        f->content_encoding = NULL;
    }
    http_job_hold(f);
}

void http_share_settle(srv_http *h, http_req *lead) {
    struct http_share_entry *e = lead->share_lead;
    if (!e)
        return;
    pthread_mutex_lock(&h->share_mu);
    struct http_share_entry **p = &h->share[e->hash % HTTP_SHARE_BUCKETS];
    while (*p != e)
        p = &(*p)->next;
    *p = e->next;
    lead->share_lead = NULL;
    pthread_mutex_unlock(&h->share_mu);
    /* No follower can join from here on: each resumes with its copy. */
    for (http_req *f = e->followers, *next; f; f = next) {
        next = f->share_next;
        f->share_next = NULL;
        follow(f, lead);
        pthread_mutex_lock(&f->mu);
        MHD_resume_connection(f->conn);
        pthread_mutex_unlock(&f->mu);
        http_req_unref(f);
    }
    srv_body_destroy(e->body);
    free(e);
}
