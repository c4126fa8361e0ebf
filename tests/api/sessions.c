/* sessions.c - decode sessions (api/session/ and API v1's session requests): SipHash-2-4-128
 * against the reference's vectors; every open and append case kept as a data file under
 * tests/api_cases/requests/session_open and session_append; appends a row at a time, in chunks
 * and by words against one causal POST /v1/attention on the whole sequence (outputs, weights,
 * top-k and trace within 1e-6); and the store: owners (another key's 404 is an unknown id's,
 * byte for byte), one append at a time, DELETE while an append holds it, ending by least recent
 * use, by the time-out and for the memory budget, and the counts.
 *
 * Legend: T the sequence's rows, E embedding width, H heads, l an append's rows. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "session.h"
#include "api_test.h"

#define TOL 1e-6 /* of each tensor's largest magnitude: api.h's claim for sessions */

/* ---- SipHash ------------------------------------------------------------------------------- */

void test_siphash(void) {
    /* vectors_sip128 of the reference (github.com/veorq/SipHash, vectors.h): key 00..0f, the
     * message 00..(n-1) of n bytes. */
    static const struct {
        size_t n;
        const char *hex;
    } v[] = {{0, "a3817f04ba25a8e66df67214c7550293"},
             {1, "da87c1d86b99af44347659119b22fc45"},
             {2, "8177228da4a45dc7fca38bdef60affe4"},
             {8, "3b62a9ba6258f5610f83e264f31497b4"}};
    uint8_t key[16], msg[16], out[16];
    for (int i = 0; i < 16; i++)
        key[i] = msg[i] = (uint8_t)i;
    for (size_t t = 0; t < sizeof v / sizeof v[0]; t++) {
        apip_siphash128(key, msg, v[t].n, out);
        char got[33];
        for (int i = 0; i < 16; i++)
            snprintf(got + 2 * i, 3, "%02x", out[i]);
        CHECK(!strcmp(got, v[t].hex), "SipHash-2-4-128 of %zu bytes: %s, want %s", v[t].n, got,
              v[t].hex);
    }
}

/* ---- Cases from data files ----------------------------------------------------------------- */

/* A store and registry for the cases: a fresh store per case. */
typedef struct case_ctx {
    api_registry *models;
} case_ctx;

/* An open case: the body opens a session; its 201 body is the answer. */
static json_t *open_case(const char *body, size_t len, const api_limits *lim, api_error *e,
                         void *ctx) {
    case_ctx *c = ctx;
    api_sessions *st = api_sessions_create(4, 0, NULL, e);
    api_buf out = {0};
    json_t *j = NULL;
    if (st && api_session_open(st, 7, body, len, c->models, lim, &out, e) == 0) {
        j = json_loadb(out.data, out.len, 0, NULL);
        CHECK(j && strlen(json_string_value(json_object_get(j, "id"))) == 32 &&
                  json_integer_value(json_object_get(j, "length")) == 0,
              "an open's body: %.200s", out.data);
    }
    api_buf_free(&out);
    api_sessions_destroy(st);
    return j;
}

/* An append case: its first line opens the session, the rest is the append; the answer is the
 * append's 200 body. */
static json_t *append_case(const char *body, size_t len, const api_limits *lim, api_error *e,
                           void *ctx) {
    case_ctx *c = ctx;
    const char *nl = memchr(body, '\n', len);
    CHECK(nl != NULL, "an append case needs its open body on its second line");
    if (!nl)
        return NULL;
    api_sessions *st = api_sessions_create(4, 0, NULL, e);
    api_buf out = {0};
    json_t *j = NULL, *opened = NULL;
    api_error oe = {0};
    api_limits roomy = api_limits_default();
    if (st && api_session_open(st, 7, body, (size_t)(nl - body), c->models, &roomy, &out, &oe))
        CHECK(false, "the case's open: %s", oe.message);
    opened = json_loadb(out.data, out.len, 0, NULL);
    const char *id = json_string_value(json_object_get(opened, "id"));
    size_t alen = len - (size_t)(nl + 1 - body);
    char *exact = malloc(alen ? alen : 1); /* exactly the append's bytes, for ASan */
    memcpy(exact, nl + 1, alen);
    api_job *job = id ? api_session_append(st, 7, id, exact, alen, c->models, lim, e) : NULL;
    api_buf_reset(&out);
    if (job && api_job_run(job, NULL, e) == 0 && api_job_respond(job, 1, 2, &out, e) == 0)
        j = json_loadb(out.data, out.len, 0, NULL);
    api_job_destroy(job);
    json_decref(opened);
    free(exact);
    api_buf_free(&out);
    api_sessions_destroy(st);
    return j;
}

void test_session_cases(void) {
    case_ctx c = {.models = builtin_registry()};
    size_t n = run_case_dir("session_open", open_case, &c);
    n += run_case_dir("session_append", append_case, &c);
    CHECK(n >= 30, "only %zu session cases found", n);
    printf("session cases: %zu\n", n);
    api_registry_destroy(c.models);
}

/* ---- Appends against the whole call -------------------------------------------------------- */

/* max |a - b| over max |b| of n floats. */
static double rel(const float *a, const float *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? d / m : d;
}

/* Opens a session with body on st for owner; its id into id (33 bytes). */
static bool open_session(api_sessions *st, uint32_t owner, const char *body,
                         const api_registry *models, char *id) {
    api_buf out = {0};
    api_error e = {0};
    api_limits lim = api_limits_default();
    int rc = api_session_open(st, owner, body, strlen(body), models, &lim, &out, &e);
    json_t *j = rc == 0 ? json_loadb(out.data, out.len, 0, NULL) : NULL;
    const char *s = json_string_value(json_object_get(j, "id"));
    CHECK(s && strlen(s) == 32, "open %s: %s", body, e.message);
    snprintf(id, 33, "%s", s ? s : "");
    json_decref(j);
    api_buf_free(&out);
    return s != NULL;
}

/* Appends body to session id; its answer as JSON (NULL with *e on an error). */
static json_t *append(api_sessions *st, uint32_t owner, const char *id, const char *body,
                      const api_registry *models, api_error *e) {
    api_limits lim = api_limits_default();
    api_buf out = {0};
    api_job *job = api_session_append(st, owner, id, body, strlen(body), models, &lim, e);
    json_t *j = NULL;
    if (job && api_job_run(job, NULL, e) == 0 && api_job_respond(job, 0, 0, &out, e) == 0)
        j = json_loadb(out.data, out.len, 0, NULL);
    api_job_destroy(job);
    api_buf_free(&out);
    return j;
}

/* x (T, E) appended to a session of demo in steps (ones: a row at a time; else 3 rows, then 1,
 * 2, ...) with per-head weights and the trace, against the whole sequence's causal call. */
static void demo_against_whole(const api_registry *models, bool ones) {
    const size_t T = 9, E = 64, H = 4, Dh = E / H;
    float *x = frand_new(T * E);
    sb body = {0}, q = {0};
    sb_tensor_b64(&q, x, (size_t[]){T, E}, 2);
    sb_add(&body, "{\"query\":%s,\"causal\":true,\"need_weights\":\"per_head\",\"trace\":true}",
           q.s);
    api_error e = {0};
    json_t *whole = request_str(API_OP_ATTENTION, body.s, models, &e);
    float *wo = malloc(T * E * 4), *ww = malloc(H * T * T * 4), *wq = malloc(T * E * 4);
    float *wk = malloc(T * E * 4), *wsc = malloc(H * T * T * 4);
    json_t *tr = json_object_get(whole, "trace");
    flatten(json_object_get(whole, "output"), wo, T * E);
    flatten(json_object_get(whole, "weights"), ww, H * T * T);
    flatten(json_object_get(tr, "q"), wq, T * E);
    flatten(json_object_get(tr, "k"), wk, T * E);
    flatten(json_object_get(tr, "scores"), wsc, H * T * T);

    api_sessions *st = api_sessions_create(2, 0, NULL, &e);
    char id[33];
    double d_out = 0, d_w = 0, d_tr = 0;
    float *got = malloc((H * T * T > T * E ? H * T * T : T * E) * 4); /* a map, or k (H, S, Dh) */
    if (open_session(st, 1, "{\"model\": \"demo\", \"max_length\": 12}", models, id)) {
        static const size_t chunks[] = {3, 1, 2, 3};
        for (size_t k = 0, t0 = 0; t0 < T; k++) {
            size_t l = ones ? 1 : chunks[k % 4], S;
            l = l < T - t0 ? l : T - t0;
            S = t0 + l;
            sb a = {0}, r = {0};
            sb_tensor_b64(&r, x + t0 * E, (size_t[]){l, E}, 2);
            sb_add(&a,
                   "{\"query\":%s,\"need_weights\":\"per_head\",\"trace\":true,\"encoding\":"
                   "\"base64\",\"expected_length\":%zu}",
                   r.s, t0);
            json_t *j = append(st, 1, id, a.s, models, &e);
            CHECK(j && (size_t)json_integer_value(json_object_get(j, "length")) == S,
                  "append at %zu: %s", t0, e.message);
            if (!j)
                break;
            flatten(json_object_get(j, "output"), got, l * E);
            d_out = fmax(d_out, rel(got, wo + t0 * E, l * E));
            flatten(json_object_get(j, "weights"), got, H * l * S);
            for (size_t h = 0; h < H; h++)
                for (size_t i = 0; i < l; i++)
                    d_w = fmax(d_w, rel(got + (h * l + i) * S, ww + (h * T + t0 + i) * T, S));
            json_t *jt = json_object_get(j, "trace");
            flatten(json_object_get(jt, "q"), got, H * l * Dh);
            for (size_t h = 0; h < H; h++)
                d_tr = fmax(d_tr, rel(got + h * l * Dh, wq + (h * T + t0) * Dh, l * Dh));
            flatten(json_object_get(jt, "k"), got, H * S * Dh);
            for (size_t h = 0; h < H; h++)
                d_tr = fmax(d_tr, rel(got + h * S * Dh, wk + h * T * Dh, S * Dh));
            flatten(json_object_get(jt, "scores"), got, H * l * S);
            for (size_t h = 0; h < H; h++)
                for (size_t i = 0; i < l; i++)
                    d_tr = fmax(d_tr, rel(got + (h * l + i) * S, wsc + (h * T + t0 + i) * T, S));
            json_decref(j);
            free(a.s), free(r.s);
            t0 += l;
        }
    }
    CHECK(whole && d_out <= TOL && d_w <= TOL && d_tr <= TOL,
          "demo, %s: outputs differ from the whole call's by %.3g, weights by %.3g, the trace by "
          "%.3g",
          ones ? "a row at a time" : "chunks", d_out, d_w, d_tr);
    api_sessions_destroy(st);
    json_decref(whole);
    free(x), free(body.s), free(q.s), free(wo), free(ww), free(wq), free(wk), free(wsc), free(got);
}

/* The lesson model's words one at a time (the start token with the first) against one tokens
 * request of the whole sentence: the same tokens echoed, outputs within TOL. */
static void lesson_words(const api_registry *models) {
    static const char *words[] = {"程序员", "把", "服务器日志", "发给", "同事"};
    const size_t n = sizeof words / sizeof words[0], E = 256;
    sb body = {0};
    sb_add(&body, "{\"model\":\"lesson\",\"causal\":true,\"tokens\":[");
    for (size_t i = 0; i < n; i++)
        sb_add(&body, "%s\"%s\"", i ? "," : "", words[i]);
    sb_add(&body, "]}");
    api_error e = {0};
    json_t *whole = request_str(API_OP_ATTENTION, body.s, models, &e);
    float *wo = malloc((n + 1) * E * 4), *got = malloc((n + 1) * E * 4);
    flatten(json_object_get(whole, "output"), wo, (n + 1) * E);
    api_sessions *st = api_sessions_create(2, 0, NULL, &e);
    char id[33];
    double d = 0;
    bool tokens_ok = true;
    if (open_session(st, 0, "{\"model\": \"lesson\"}", models, id))
        for (size_t i = 0, row = 0; i < n; i++) {
            sb a = {0};
            sb_add(&a, "{\"tokens\":[\"%s\"]}", words[i]);
            json_t *j = append(st, 0, id, a.s, models, &e);
            json_t *tok = json_object_get(j, "tokens");
            size_t l = json_array_size(tok); /* 2 with the start token first, then 1 */
            tokens_ok = tokens_ok && j && l == (i == 0 ? 2u : 1u) &&
                        !strcmp(json_string_value(json_array_get(tok, l - 1)), words[i]);
            flatten(json_object_get(j, "output"), got, l * E);
            d = fmax(d, rel(got, wo + row * E, l * E));
            row += l;
            json_decref(j);
            free(a.s);
        }
    CHECK(whole && tokens_ok && d <= TOL,
          "lesson, words one at a time: tokens echoed %d, outputs differ by %.3g (%s)", tokens_ok,
          d, e.message);
    api_sessions_destroy(st);
    json_decref(whole);
    free(body.s), free(wo), free(got);
}

void test_sessions_exact(void) {
    api_registry *models = builtin_registry();
    demo_against_whole(models, true);
    demo_against_whole(models, false);
    lesson_words(models);
    api_registry_destroy(models);
}

/* ---- The store ----------------------------------------------------------------------------- */

/* The error body of e, as a string (for comparing refusals byte for byte). */
static char *error_text(const api_error *e) {
    api_buf b = {0};
    api_error_body(e, &b);
    api_buf_append(&b, "", 1);
    char *s = strdup(b.data ? b.data : "");
    api_buf_free(&b);
    return s;
}

/* Owners, busy sessions, DELETE, GET. */
static void store_owners(const api_registry *models) {
    api_error e = {0};
    api_sessions *st = api_sessions_create(4, 0, NULL, &e);
    char id[33];
    const char *row = "{\"query\": [[1, 0, 0, 0]]}";
    if (!open_session(st, 3,
                      "{\"params\": {\"init\": \"identity\", \"num_heads\": 2}, "
                      "\"embed_dim\": 4}",
                      models, id))
        return;
    api_buf out = {0};
    api_error e1 = {0}, e2 = {0}, e3 = {0}, e4 = {0};
    api_session_get(st, 4, id, &out, &e1);                                 /* another key */
    api_session_get(st, 3, "0123456789abcdef0123456789abcdef", &out, &e2); /* unknown */
    api_session_get(st, 3, "not-an-id", &out, &e3);                        /* malformed */
    json_t *j = append(st, 4, id, row, models, &e4);
    char *a = error_text(&e1), *b = error_text(&e2), *c = error_text(&e3), *d = error_text(&e4);
    CHECK(!j && e1.status == 404 && !strcmp(e1.code, "session_unknown") && !strcmp(a, b) &&
              !strcmp(a, c) && !strcmp(a, d),
          "another key's session, an unknown id, a malformed one and another key's append must "
          "get the same 404: %s / %s / %s / %s",
          a, b, c, d);
    free(a), free(b), free(c), free(d);
    CHECK(api_session_get(st, 3, id, &out, &e) == 0 && out.len > 0, "GET: %s", e.message);

    /* One append at a time: a second is 409 while the first's job holds it; DELETE then ends it
     * when that job ends. */
    api_limits lim = api_limits_default();
    e = (api_error){0};
    api_job *held = api_session_append(st, 3, id, row, strlen(row), models, &lim, &e);
    api_error busy = {0};
    json_t *second = append(st, 3, id, row, models, &busy);
    CHECK(held && !second && busy.status == 409 && !strcmp(busy.code, "session_busy"),
          "a second append while one is held: %d %s", busy.status, busy.code);
    e = (api_error){0};
    CHECK(api_session_delete(st, 3, id, &e) == 0, "DELETE while busy: %s", e.message);
    api_sessions_stats s = api_sessions_stats_get(st);
    CHECK(s.open == 1, "a busy session ends when its append ends, not before: %zu open", s.open);
    CHECK(held && api_job_run(held, NULL, &e) == 0, "the held append runs: %s", e.message);
    api_job_destroy(held);
    s = api_sessions_stats_get(st);
    e = (api_error){0};
    CHECK(s.open == 0 && s.bytes == 0 && s.ended[API_SESSION_END_DELETED] == 1 && s.appends == 1 &&
              api_session_get(st, 3, id, &out, &e) == -1 && e.status == 404,
          "after DELETE and its append: open %zu, bytes %zu, deleted %llu, appends %llu, GET %d",
          s.open, s.bytes, (unsigned long long)s.ended[API_SESSION_END_DELETED],
          (unsigned long long)s.appends, e.status);
    json_decref(j);
    api_buf_free(&out);
    api_sessions_destroy(st);
}

/* Ending by least recent use at the limit, by the time-out, and for the memory budget. */
static void store_ends(const api_registry *models) {
    const size_t MiB = (size_t)1 << 20;
    api_error e = {0};
    api_mem *mem = api_mem_create(SIZE_MAX, 0, &e);
    api_mem_set_budget(mem, 4 * MiB);
    api_sessions *st = api_sessions_create(2, 100.0, mem, &e);
    char a[33], b[33], c[33];
    /* demo's cache of 1024 rows: 512 KiB each */
    const char *demo = "{\"model\": \"demo\"}";
    open_session(st, 0, demo, models, a);
    open_session(st, 0, demo, models, b);
    api_buf out = {0};
    e = (api_error){0};
    api_session_get(st, 0, a, &out, &e); /* a GET does not count as a use */
    json_decref(append(st, 0, a,
                       "{\"query\": {\"init\": \"uniform\", \"seed\": 1, \"shape\": [1, "
                       "64]}}",
                       models, &e));
    open_session(st, 0, demo, models, c); /* b, the least recently used, ends */
    api_sessions_stats s = api_sessions_stats_get(st);
    e = (api_error){0};
    CHECK(s.open == 2 && s.ended[API_SESSION_END_LRU] == 1 &&
              api_session_get(st, 0, b, &out, &e) == -1 && e.status == 404,
          "at the limit of 2: open %zu, lru %llu, the least recently used GET %d", s.open,
          (unsigned long long)s.ended[API_SESSION_END_LRU], e.status);
    CHECK(apip_sessions_sweep(st, apip_sessions_now() + 50) == 0,
          "nothing ends before the time-out");
    CHECK(apip_sessions_sweep(st, apip_sessions_now() + 101) == 2 &&
              api_sessions_stats_get(st).ended[API_SESSION_END_TTL] == 2,
          "both end after the time-out");
    CHECK(api_mem_stats_get(mem).charged_bytes == 0, "their memory is back: %zu charged",
          api_mem_stats_get(mem).charged_bytes);

    /* The budget: two idle sessions hold 1 MiB of 4; a block of 3.5 MiB ends the least recently
     * used one (and not more), then one of 4 MiB cannot fit even with both gone. */
    open_session(st, 0, demo, models, a);
    open_session(st, 0, demo, models, b);
    bool over = false;
    void *big = api_mem_alloc_bounded(mem, 3 * MiB + MiB / 2, 3 * MiB + MiB / 2, NULL, &over);
    s = api_sessions_stats_get(st);
    e = (api_error){0};
    CHECK(big && s.open == 1 && s.ended[API_SESSION_END_BUDGET] == 1 &&
              api_session_get(st, 0, a, &out, &e) == -1 && api_session_get(st, 0, b, &out, &e) == 0,
          "a block past the budget ends the least recently used idle session: %p, open %zu, "
          "budget %llu",
          big, s.open, (unsigned long long)s.ended[API_SESSION_END_BUDGET]);
    e = (api_error){0};
    api_buf_reset(&out);
    const char *large = "{\"model\": \"demo\", \"max_length\": 4096}"; /* 2 MiB */
    CHECK(api_session_open(st, 0, large, strlen(large), models, NULL, &out, &e) == -1 &&
              e.status == 503 && !strcmp(e.code, "memory_budget") &&
              api_sessions_stats_get(st).open == 1,
          "a session that cannot fit even with every idle one gone: %d %s, the idle one kept",
          e.status, e.code);
    api_mem_free(big);
    api_buf_free(&out);
    api_sessions_destroy(st);
    CHECK(api_mem_stats_get(mem).charged_bytes == 0, "destroy gives every block back");
    api_mem_destroy(mem);
}

void test_sessions_store(void) {
    api_registry *models = builtin_registry();
    store_owners(models);
    store_ends(models);
    api_registry_destroy(models);
}
