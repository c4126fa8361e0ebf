/* sessions.c - decode sessions over HTTP (POST /v1/sessions, POST, GET, HEAD and DELETE
 * /v1/sessions/{id}, and Triton's sequence parameters on /v2/models/{m}/infer), against a live
 * attnd: appends a row at a time and in chunks against one causal POST /v1/attention on the
 * whole sequence (outputs and per-head weights, on a few shapes); expected_length (409, nothing
 * appended); every error status (400, 401, 404, 405, 409, 413, 503); another API key's 404 byte for
 * byte an unknown id's; ends by each reason (lru, deleted, ttl, budget) in
 * attnd_session_evictions_total; a client that opens sessions and vanishes gets its memory back
 * within the time-out; SIGTERM with sessions open exits 0; v2 sequences as tritonclient sends them
 * (numeric and string ids); and an append is never shared with an identical one (--share-jobs).
 *
 * Legend: T the sequence's rows, E embedding width, H heads, kd/vd key and value widths, n an
 * append's rows, t the session's length. */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "server_test.h"

#define KEY_A  "sess-Key_A_0123456789abcdef"
#define KEY_B  "sess-Key_B_0123456789abcdef"
#define AUTH_A "Authorization: Bearer " KEY_A
#define AUTH_B "Authorization: Bearer " KEY_B
#define EXACT  1e-6 /* of each tensor's largest magnitude: what api.h claims for sessions */

/* The exactness seen over every case: the largest difference over the largest magnitude, and
 * the floats compared and those not identical to the whole call's. */
static double worst_rel;
static size_t compared, differing;

/* method path (body: POST with JSON) with the key line auth (NULL: none). */
static bool call(int port, const char *method, const char *path, const char *body, const char *auth,
                 reply *r) {
    req q = {.method = method,
             .path = path,
             .ctype = body ? "application/json" : NULL,
             .body = body,
             .hdrs = {auth}};
    return http(NULL, port, &q, r);
}

/* A sample of /metrics read with key A (the daemon with keys guards /metrics), or -1. */
static double metric_a(int port, const char *sample) {
    reply r;
    double v = -1;
    if (call(port, "GET", "/metrics", NULL, AUTH_A, &r) && r.status == 200) {
        size_t n = strlen(sample);
        for (const char *p = r.body; (p = strstr(p, sample)) != NULL; p += n)
            if ((p == r.body || p[-1] == '\n') && p[n] == ' ') {
                v = atof(p + n + 1);
                break;
            }
    }
    reply_free(&r);
    return v;
}

/* A member of a reply's JSON body as an integer, or -1. */
static long long member_int(const reply *r, const char *name) {
    json_t *j = json_loads(r->body, 0, NULL);
    json_t *v = json_object_get(j, name);
    long long x = json_is_integer(v) ? json_integer_value(v) : -1;
    json_decref(j);
    return x;
}

/* Opens a session with body under auth: its id into id (33 bytes), checked as a 201 with its
 * Location, length 0 and the fields the README lists. */
static bool open_session(int port, const char *auth, const char *body, char *id) {
    reply r;
    call(port, "POST", "/v1/sessions", body, auth, &r);
    json_t *j = json_loads(r.body, 0, NULL);
    const char *s = json_string_value(json_object_get(j, "id"));
    char *loc = header(&r, "Location");
    char want[64];
    snprintf(want, sizeof want, "/v1/sessions/%s", s ? s : "?");
    bool ok =
        CHECK(r.status == 201 && s && strlen(s) == 32 && strspn(s, "0123456789abcdef") == 32,
              "open %.80s: %ld %.300s", body, r.status, r.body) &&
        CHECK(loc && !strcmp(loc, want), "open: Location %s, want %s", loc ? loc : "none", want) &&
        CHECK(json_integer_value(json_object_get(j, "length")) == 0 &&
                  json_integer_value(json_object_get(j, "max_length")) > 0 &&
                  json_integer_value(json_object_get(j, "bytes")) > 0 &&
                  json_is_number(json_object_get(j, "expires_in_s")),
              "open: the body lacks length, max_length, bytes, expires_in_s: %.300s", r.body);
    snprintf(id, 33, "%s", ok ? s : "");
    free(loc);
    json_decref(j);
    reply_free(&r);
    return ok;
}

static void session_path(char *path, size_t cap, const char *id) {
    snprintf(path, cap, "/v1/sessions/%s", id);
}

/* The session's length from GET, or -1. */
static long long session_length(int port, const char *auth, const char *id) {
    char path[80];
    session_path(path, sizeof path, id);
    reply r;
    call(port, "GET", path, NULL, auth, &r);
    long long n = r.status == 200 ? member_int(&r, "length") : -1;
    reply_free(&r);
    return n;
}

/* max |a - b| over max |b|, counted into the totals. */
static double rel_diff(const double *a, const double *b, size_t n, double scale) {
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        double x = fabs(a[i] - b[i]);
        d = x > d || isnan(x) ? x : d;
        differing += a[i] != b[i];
    }
    compared += n;
    return scale > 0 ? d / scale : d;
}

static double max_abs(const tens *t) {
    double m = 0;
    for (size_t i = 0; i < t->n; i++)
        m = fmax(m, fabs(t->v[i]));
    return m;
}

/* ---- Exactness ------------------------------------------------------------------------------ */

/* The sequence of an MHA case (T rows) appended in chunks of 1, 2, 1, 3, ... rows, each checked
 * against the same rows of one causal POST /v1/attention on the whole sequence: the outputs
 * (T, E) and the per-head weights (H, T, T) over the keys so far. */
static void exact_case(int port, size_t T, size_t E, size_t H, size_t kd, size_t vd, bool self,
                       bool bias, uint64_t seed) {
    char what[96];
    snprintf(what, sizeof what, "exact T=%zu E=%zu H=%zu kd=%zu vd=%zu%s%s", T, E, H, kd, vd,
             self ? " self" : "", bias ? " bias" : "");
    mha_case c;
    mha_case_make(&c, 1, T, T, E, H, kd, vd, self, bias, seed);
    char *whole_body = mha_case_body(&c, true, false, NULL, "per_head");
    json_t *wj = json_loads(whole_body, 0, NULL);
    json_object_set_new(wj, "causal", json_true());
    char *causal_body = dump(json_incref(wj));
    reply whole;
    call(port, "POST", "/v1/attention", causal_body, AUTH_A, &whole);
    tens wo, ww;
    bool have =
        reply_tensor(&whole, "output", &wo, what) && reply_tensor(&whole, "weights", &ww, what) &&
        CHECK(wo.n == T * E && ww.n == H * T * T, "%s: whole shapes %zu, %zu", what, wo.n, ww.n);
    char *open_body = dump(json_pack("{s:O}", "params", json_object_get(wj, "params")));
    char id[33], path[80];
    if (!have || !open_session(port, AUTH_A, open_body, id))
        goto done;
    session_path(path, sizeof path, id);
    double so = max_abs(&wo), sw = max_abs(&ww), dout = 0, dw = 0;
    static const size_t chunk[] = {1, 2, 1, 3};
    for (size_t t = 0, k = 0; t < T; t += chunk[k++ % 4]) {
        size_t n = chunk[k % 4] < T - t ? chunk[k % 4] : T - t;
        json_t *a = json_pack("{s:o,s:s,s:I}", "query", json_matrix(c.xq + t * E, n, E),
                              "need_weights", "per_head", "expected_length", (json_int_t)t);
        if (!self) {
            json_object_set_new(a, "key", json_matrix(c.xk + t * kd, n, kd));
            json_object_set_new(a, "value", json_matrix(c.xv + t * vd, n, vd));
        }
        char *ab = dump(a);
        reply r;
        call(port, "POST", path, ab, AUTH_A, &r);
        free(ab);
        tens o, w;
        bool ok = reply_tensor(&r, "output", &o, what) && reply_tensor(&r, "weights", &w, what);
        ok = ok &&
             CHECK(member_int(&r, "length") == (long long)(t + n) && o.n == n * E && w.rank == 3 &&
                       w.shape[0] == H && w.shape[1] == n && w.shape[2] == t + n,
                   "%s: append at %zu: length %lld, output %zu, weights rank %d (%zu, %zu, "
                   "%zu)",
                   what, t, member_int(&r, "length"), o.n, w.rank, w.shape[0], w.shape[1],
                   w.shape[2]);
        if (ok) {
            dout = fmax(dout, rel_diff(o.v, wo.v + t * E, n * E, so));
            for (size_t h = 0; h < H; h++)
                for (size_t i = 0; i < n; i++)
                    dw = fmax(dw, rel_diff(w.v + (h * n + i) * (t + n), ww.v + (h * T + t + i) * T,
                                           t + n, sw));
        }
        tens_free(&o);
        tens_free(&w);
        reply_free(&r);
        if (!ok)
            break;
    }
    CHECK(dout <= EXACT && dw <= EXACT,
          "%s: appends against the whole call: outputs %.3g, weights "
          "%.3g of the largest magnitude (at most %g)",
          what, dout, dw, EXACT);
    worst_rel = fmax(worst_rel, fmax(dout, dw));
    CHECK(session_length(port, AUTH_A, id) == (long long)T, "%s: GET's length after the appends",
          what);
    reply d;
    call(port, "DELETE", path, NULL, AUTH_A, &d);
    CHECK(d.status == 204 && d.len == 0, "%s: DELETE %ld", what, d.status);
    reply_free(&d);
done:
    free(open_body);
    tens_free(&wo);
    tens_free(&ww);
    reply_free(&whole);
    free(causal_body);
    json_decref(wj);
    free(whole_body);
    mha_case_free(&c);
}

/* ---- Errors, owners, expected_length ------------------------------------------------------- */

static void errors_and_owners(int port) {
    const char *unknown = "/v1/sessions/00112233445566778899aabbccddeeff";
    char id[33], path[80];
    if (!open_session(port, AUTH_A, "{\"model\": \"demo\", \"max_length\": 4}", id))
        return;
    session_path(path, sizeof path, id);
    float *x = rnd_array(4 * 64, 3700);
    char *row = dump(json_pack("{s:o}", "query", json_matrix(x, 1, 64)));
    char *row_at0 =
        dump(json_pack("{s:o,s:i}", "query", json_matrix(x, 1, 64), "expected_length", 0));
    char *three = dump(json_pack("{s:o}", "query", json_matrix(x, 3, 64)));
    reply r, u;

    /* expected_length: a retry of an append that was applied gets 409 and appends nothing. */
    call(port, "POST", path, row_at0, AUTH_A, &r);
    CHECK(r.status == 200 && member_int(&r, "length") == 1, "expected_length 0: %ld %.200s",
          r.status, r.body);
    reply_free(&r);
    call(port, "POST", path, row_at0, AUTH_A, &r);
    check_error(&r, 409, "length_mismatch", "expected_length", "the same append retried");
    reply_free(&r);
    CHECK(session_length(port, AUTH_A, id) == 1, "a refused retry appended");
    /* session_full: 1 + 3 rows past max_length 4? no: 1 + 3 fits, then one more does not. */
    call(port, "POST", path, three, AUTH_A, &r);
    CHECK(r.status == 200 && member_int(&r, "length") == 4, "three rows: %ld", r.status);
    reply_free(&r);
    call(port, "POST", path, row, AUTH_A, &r);
    check_error(&r, 409, "session_full", NULL, "an append past max_length");
    reply_free(&r);

    /* 400s, on the open and on the append. */
    static const struct {
        const char *body;
        long status;
        const char *code, *field;
    } opens[] = {
        {"{\"model\": \"demo\"", 400, "invalid_json", NULL},
        {"{\"model\": \"demo\", \"causal\": false}", 400, "invalid_field", "causal"},
        {"{\"model\": \"demo\", \"max_length\": 0}", 400, "invalid_field", "max_length"},
        {"{\"model\": \"demo\", \"colour\": 1}", 400, "invalid_field", "colour"},
        {"{\"model\": \"no-such-model\"}", 404, "unknown_model", "model"},
        {"{\"model\": \"demo\", \"max_length\": 65536}", 413, "job_too_large", "max_length"}};
    for (size_t i = 0; i < sizeof opens / sizeof opens[0]; i++) {
        call(port, "POST", "/v1/sessions", opens[i].body, AUTH_A, &r);
        check_error(&r, opens[i].status, opens[i].code, opens[i].field, opens[i].body);
        reply_free(&r);
    }
    char other[33], opath[80];
    if (open_session(port, AUTH_A, "{\"model\": \"demo\"}", other)) {
        session_path(opath, sizeof opath, other);
        call(port, "POST", opath, "{\"query\": [[1, 2]]}", AUTH_A, &r);
        check_error(&r, 400, "invalid_field", "query", "an append of the wrong width");
        reply_free(&r);
        call(port, "POST", opath, "{\"query\": [[1]], \"mask\": [[0]]}", AUTH_A, &r);
        check_error(&r, 400, "invalid_field", "mask", "an append with a mask");
        reply_free(&r);
        call(port, "POST", opath, "{\"query\": ", AUTH_A, &r);
        check_error(&r, 400, "invalid_json", NULL, "an append of broken JSON");
        reply_free(&r);
        call(port, "POST", opath, row_at0 /* expected 0, length 0 */, AUTH_A, &r);
        CHECK(r.status == 200, "the other session's first append: %ld", r.status);
        reply_free(&r);
        call(port, "PUT", opath, row, AUTH_A, &r);
        char *allow = header(&r, "Allow");
        CHECK(r.status == 405 && allow && strstr(allow, "DELETE"), "PUT: %ld, Allow %s", r.status,
              allow ? allow : "none");
        free(allow);
        reply_free(&r);
        call(port, "HEAD", opath, NULL, AUTH_A, &r);
        CHECK(r.status == 200 && r.len == 0, "HEAD: %ld, %zu bytes", r.status, r.len);
        reply_free(&r);
    }

    /* The unknown id's 404, and another key's: the same status and bytes, on every method. */
    const char *methods[] = {"GET", "POST", "DELETE"};
    for (int m = 0; m < 3; m++) {
        const char *b = m == 1 ? row : NULL;
        call(port, methods[m], unknown, b, AUTH_A, &u);
        check_error(&u, 404, "session_unknown", NULL, "an unknown id");
        CHECK(strstr(u.body, "open a new session") || strstr(u.body, "again"),
              "the 404 does not say what to do: %s", u.body);
        call(port, methods[m], path, b, AUTH_B, &r);
        CHECK(r.status == u.status && r.len == u.len && !memcmp(r.body, u.body, u.len),
              "%s of another key's session: %ld %s, an unknown id's: %ld %s", methods[m], r.status,
              r.body, u.status, u.body);
        reply_free(&r);
        reply_free(&u);
        call(port, methods[m], "/v1/sessions/not-an-id", b, AUTH_A, &r);
        check_error(&r, 404, "session_unknown", NULL, "a malformed id");
        reply_free(&r);
    }
    CHECK(session_length(port, AUTH_A, id) == 4, "another key's DELETE ended the session");
    call(port, "GET", path, NULL, NULL, &r);
    CHECK(r.status == 401, "no key: %ld", r.status);
    reply_free(&r);

    /* DELETE: 204, then the id is unknown; its end counted as deleted. */
    double deleted = metric_a(port, "attnd_session_evictions_total{reason=\"deleted\"}");
    call(port, "DELETE", path, NULL, AUTH_A, &r);
    CHECK(r.status == 204, "DELETE: %ld", r.status);
    reply_free(&r);
    call(port, "GET", path, NULL, AUTH_A, &r);
    check_error(&r, 404, "session_unknown", NULL, "GET after DELETE");
    reply_free(&r);
    call(port, "DELETE", path, NULL, AUTH_A, &r);
    check_error(&r, 404, "session_unknown", NULL, "DELETE after DELETE");
    reply_free(&r);
    CHECK(metric_a(port, "attnd_session_evictions_total{reason=\"deleted\"}") == deleted + 1,
          "deleted: %g, before %g",
          metric_a(port, "attnd_session_evictions_total{reason=\"deleted\"}"), deleted);
    free(x);
    free(row);
    free(row_at0);
    free(three);
}

/* --max-sessions 3: a fourth session ends the least recently used idle one (lru). */
static void lru(int port) {
    double before = metric_a(port, "attnd_session_evictions_total{reason=\"lru\"}");
    char id[4][33];
    bool ok = true;
    for (int i = 0; i < 4 && ok; i++)
        ok = open_session(port, AUTH_A, "{\"model\": \"demo\", \"max_length\": 8}", id[i]);
    if (!ok)
        return;
    CHECK(metric_a(port, "attnd_sessions") == 3, "sessions at the limit: %g",
          metric_a(port, "attnd_sessions"));
    CHECK(metric_a(port, "attnd_session_evictions_total{reason=\"lru\"}") >= before + 1,
          "lru: %g, before %g", metric_a(port, "attnd_session_evictions_total{reason=\"lru\"}"),
          before);
    CHECK(session_length(port, AUTH_A, id[0]) == -1 && session_length(port, AUTH_A, id[3]) == 0,
          "the oldest session should have ended, the newest be there");
}

/* ---- v2: Triton's sequence parameters ------------------------------------------------------ */

/* One request of a sequence, as tritonclient's infer() sends it in binary mode (sequence_id
 * with both flags, binary_data_output); the output row into out (E floats). */
static long v2_step(int port, const char *auth, const char *seq, bool start, bool end,
                    const float *x, float *out, char **body_out) {
    v2_in in = {"query", "FP32", 2, {1, 64}, x};
    char params[160];
    snprintf(params, sizeof params,
             "{\"sequence_id\":%s,\"sequence_start\":%s,\"sequence_end\":%s,"
             "\"binary_data_output\":true}",
             seq, start ? "true" : "false", end ? "true" : "false");
    size_t len, hl;
    char *b = v2_body(&in, 1, true, params, NULL, &len, &hl);
    reply r;
    v2_post(port, "/v2/models/demo/infer", b, len, hl, "application/octet-stream", auth, NULL, &r);
    free(b);
    long st = r.status;
    if (st == 200) {
        v2_out o;
        tens t;
        bool bin = false;
        if (CHECK(v2_read(&r, &o, "v2 sequence") && v2_tensor(&o, "output", &t, &bin) &&
                      t.n == 64 && bin,
                  "v2 sequence %s: no binary output of 64 floats", seq)) {
            for (size_t i = 0; i < 64; i++)
                out[i] = (float)t.v[i];
            tens_free(&t);
            v2_out_free(&o);
        }
    }
    if (body_out)
        *body_out = strdup(r.body);
    reply_free(&r);
    return st;
}

static void v2_sequences(int port) {
    reply r;
    req meta = {.path = "/v2", .hdrs = {AUTH_A}};
    http(NULL, port, &meta, &r);
    CHECK(r.status == 200 && strstr(r.body, "\"sequence\"") &&
              strstr(r.body, "\"sequence(string_id)\""),
          "GET /v2 does not name the sequence extensions: %.300s", r.body);
    reply_free(&r);
    const size_t T = 5, E = 64;
    float *x = rnd_array(T * E, 3800), *got = malloc(T * E * sizeof *got);
    char *whole = dump(
        json_pack("{s:s,s:o,s:b}", "model", "demo", "query", json_matrix(x, T, E), "causal", 1));
    call(port, "POST", "/v1/attention", whole, AUTH_A, &r);
    tens wo;
    bool have = reply_tensor(&r, "output", &wo, "v2 sequence's whole call");
    reply_free(&r);
    const char *ids[] = {"42", "\"chat-7\""};
    for (int s = 0; s < 2 && have; s++) {
        bool ok = true;
        for (size_t t = 0; t < T && ok; t++)
            ok = CHECK(v2_step(port, AUTH_A, ids[s], t == 0, t == T - 1, x + t * E, got + t * E,
                               NULL) == 200,
                       "sequence %s step %zu", ids[s], t);
        if (ok) {
            double *d = malloc(T * E * sizeof *d);
            for (size_t i = 0; i < T * E; i++)
                d[i] = (double)got[i];
            double rd = rel_diff(d, wo.v, T * E, max_abs(&wo));
            free(d);
            worst_rel = fmax(worst_rel, rd);
            CHECK(rd <= EXACT, "sequence %s against the whole causal call: %.3g", ids[s], rd);
        }
        /* Ended by sequence_end: a request without sequence_start finds nothing. */
        char *body = NULL;
        CHECK(v2_step(port, AUTH_A, ids[s], false, false, x, got, &body) == 404 && body &&
                  strstr(body, "sequence_start"),
              "sequence %s after its end: %s", ids[s], body ? body : "");
        free(body);
    }
    /* Another key's sequence of the same id is its own: B's start does not touch A's rows. */
    float o2[64];
    CHECK(v2_step(port, AUTH_A, "7", true, false, x, got, NULL) == 200 &&
              v2_step(port, AUTH_B, "7", false, false, x, o2, NULL) == 404 &&
              v2_step(port, AUTH_B, "7", true, false, x + E, o2, NULL) == 200 &&
              v2_step(port, AUTH_A, "7", false, true, x + E, got + E, NULL) == 200,
          "sequence 7 under two keys");
    if (have) {
        double d[2 * 64];
        for (size_t i = 0; i < 2 * E; i++)
            d[i] = (double)got[i];
        CHECK(rel_diff(d, wo.v, 2 * E, max_abs(&wo)) <= EXACT,
              "A's sequence 7 saw B's rows (or lost its own)");
    }
    char *body = NULL;
    CHECK(v2_step(port, AUTH_A, "-3", true, false, x, got, &body) == 400,
          "a negative sequence_id: %s", body ? body : "");
    free(body);
    CHECK(v2_step(port, AUTH_A, "true", true, false, x, got, NULL) == 400, "sequence_id true");
    tens_free(&wo);
    free(whole);
    free(x);
    free(got);
}

/* ---- The daemons --------------------------------------------------------------------------- */

/* Waits until metric(sample) == want; false after secs. */
static bool wait_equal(int port, const char *sample, double want, double secs) {
    double t0 = now();
    while (metric(port, sample) != want) {
        if (now() - t0 > secs)
            return false;
        sleep_s(0.1);
    }
    return true;
}

/* A client opens sessions, appends, and vanishes: --session-ttl gives their memory back. */
static void ttl(void) {
    attnd d;
    const char *args[] = {"--threads", "1", "--session-ttl", "1", NULL};
    if (!attnd_start(&d, "sessions-ttl", args, NULL))
        return;
    float *x = rnd_array(64, 3900);
    char *row = dump(json_pack("{s:o}", "query", json_matrix(x, 1, 64)));
    for (int i = 0; i < 4; i++) {
        char id[33], path[80];
        if (!open_session(d.port, NULL, "{\"model\": \"demo\", \"max_length\": 64}", id))
            break;
        session_path(path, sizeof path, id);
        reply r;
        call(d.port, "POST", path, row, NULL, &r);
        CHECK(r.status == 200, "ttl: append %ld", r.status);
        reply_free(&r);
    }
    CHECK(metric(d.port, "attnd_session_bytes") > 0 && metric(d.port, "attnd_sessions") == 4,
          "ttl: 4 sessions, %g bytes", metric(d.port, "attnd_session_bytes"));
    double t0 = now();
    CHECK(wait_equal(d.port, "attnd_session_bytes", 0, 4) &&
              metric(d.port, "attnd_sessions") == 0 &&
              metric(d.port, "attnd_session_evictions_total{reason=\"ttl\"}") == 4,
          "ttl: after %.1f s, %g bytes and %g sessions held, %g ended by ttl", now() - t0,
          metric(d.port, "attnd_session_bytes"), metric(d.port, "attnd_sessions"),
          metric(d.port, "attnd_session_evictions_total{reason=\"ttl\"}"));
    free(row);
    free(x);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "sessions-ttl: exit status");
}

/* A small memory budget: a new session ends the least recently used idle one for its block. */
static void budget(void) {
    attnd d;
    const char *args[] = {"--threads",
                          "1",
                          "--max-memory",
                          "256M",
                          "--max-connections",
                          "64",
                          "--max-unsent-bytes",
                          "8M",
                          "--max-body-bytes",
                          "1M",
                          "--max-sessions",
                          "200",
                          NULL};
    if (!attnd_start(&d, "sessions-budget", args, NULL))
        return;
    int opened = 0;
    for (; opened < 200; opened++) {
        char id[33];
        if (!open_session(d.port, NULL, "{\"model\": \"demo\", \"max_length\": 2048}", id) ||
            metric(d.port, "attnd_session_evictions_total{reason=\"budget\"}") >= 1)
            break;
    }
    CHECK(metric(d.port, "attnd_session_evictions_total{reason=\"budget\"}") >= 1 &&
              metric(d.port, "attnd_session_evictions_total{reason=\"lru\"}") == 0,
          "budget: %d sessions opened, %g ended for the budget", opened + 1,
          metric(d.port, "attnd_session_evictions_total{reason=\"budget\"}"));
    CHECK(attnd_stop(&d, SIGTERM) == 0, "sessions-budget: exit status");
}

/* Two identical appends at once, behind a slow job on the only worker, with --share-jobs on:
 * the second is never a copy of the first. It finds the session taken (409 session_busy, at
 * once), and sent again once the first has run, appends its own row: the length grows by 2.
 * The same for a v2 sequence's request. attnd_jobs_shared_total stays 0. */
static void never_shared(void) {
    attnd d;
    const char *args[] = {"--threads",         "1",  "--pool-threads",     "0",
                          "--batch-window-us", "0",  "--inline-max-flops", "0",
                          "--share-jobs",      "on", "--max-sessions",     "2",
                          SLOW_FLOPS,          NULL};
    if (!attnd_start(&d, "sessions-share", args, NULL))
        return;
    int runs = 0;
    size_t slow_l = calibrate_slow(d.port, &runs);
    char id[33], path[80];
    float *x = rnd_array(64, 4000), o1[64];
    if (!slow_l || !open_session(d.port, NULL, "{\"model\": \"demo\"}", id) ||
        v2_step(d.port, NULL, "77", true, false, x, o1, NULL) != 200)
        goto done;
    session_path(path, sizeof path, id);
    char *row =
        dump(json_pack("{s:o,s:s}", "query", json_matrix(x, 1, 64), "need_weights", "per_head"));
    v2_in in = {"query", "FP32", 2, {1, 64}, x};
    size_t len, hl;
    char *v2 = v2_body(&in, 1, false,
                       "{\"sequence_id\":77,\"sequence_start\":false,"
                       "\"sequence_end\":false}",
                       NULL, &len, &hl);
    req v2q = {.path = "/v2/models/demo/infer", .ctype = "application/json", .body = v2};
    async_req slow = {0}, a[2], b[2];
    memset(a, 0, sizeof a), memset(b, 0, sizeof b);
    async_start(&slow, d.port, "/v1/attention", slow_body(slow_l));
    CHECK(wait_metric(d.port, "attnd_jobs_in_flight", 1, 20), "never shared: no slow job");
    async_start(&a[0], d.port, path, row);
    CHECK(wait_metric(d.port, "attnd_queue_depth", 1, 20), "never shared: append not queued");
    b[0].q = &v2q;
    async_start(&b[0], d.port, NULL, NULL);
    CHECK(wait_metric(d.port, "attnd_queue_depth", 2, 20), "never shared: v2 not queued");
    async_start(&a[1], d.port, path, row);
    b[1].q = &v2q;
    async_start(&b[1], d.port, NULL, NULL);
    pthread_join(a[1].th, NULL);
    pthread_join(b[1].th, NULL);
    check_error(&a[1].r, 409, "session_busy", NULL, "the second identical append");
    check_v2_error(&b[1].r, 409, "another append", "the second identical v2 sequence request");
    reply full; /* --max-sessions 2, both appending: no idle one to end */
    call(d.port, "POST", "/v1/sessions", "{\"model\": \"demo\"}", NULL, &full);
    check_error(&full, 503, "session_limit", NULL, "an open while every session appends");
    char *retry = header(&full, "Retry-After");
    CHECK(retry != NULL, "503 session_limit without Retry-After");
    free(retry);
    reply_free(&full);
    pthread_join(slow.th, NULL);
    pthread_join(a[0].th, NULL);
    pthread_join(b[0].th, NULL);
    CHECK(a[0].r.status == 200 && member_int(&a[0].r, "length") == 1 && b[0].r.status == 200,
          "the first identical append: %ld %.200s; v2 %ld", a[0].r.status, a[0].r.body,
          b[0].r.status);
    reply again;
    call(d.port, "POST", path, row, NULL, &again);
    tens w1 = {0}, w2 = {0}; /* (H, 1, 1) and (H, 1, 2): each its own row, over its keys */
    if (CHECK(again.status == 200 && member_int(&again, "length") == 2,
              "the second append sent again: %ld %.200s", again.status, again.body) &&
        reply_tensor(&a[0].r, "weights", &w1, "first") &&
        reply_tensor(&again, "weights", &w2, "second"))
        CHECK(w1.rank == 3 && w1.shape[2] == 1 && w2.rank == 3 && w2.shape[2] == 2,
              "the appends' weights: over %zu and %zu keys, not 1 and 2", w1.shape[2], w2.shape[2]);
    tens_free(&w1);
    tens_free(&w2);
    reply_free(&again);
    CHECK(session_length(d.port, NULL, id) == 2, "never shared: the length is not 2");
    CHECK(metric(d.port, "attnd_jobs_shared_total") == 0, "never shared: %g shared",
          metric(d.port, "attnd_jobs_shared_total"));
    reply_free(&slow.r);
    for (int i = 0; i < 2; i++) {
        reply_free(&a[i].r);
        reply_free(&b[i].r);
    }
    free(slow.body);
    free(v2);
    free(row);
done:
    free(x);
    CHECK(attnd_stop(&d, SIGTERM) == 0, "sessions-share: exit status");
}

void test_sessions(void) {
    char keyfile[700];
    snprintf(keyfile, sizeof keyfile, "%s/sessions.keys", cfg.data);
    FILE *f = fopen(keyfile, "w");
    if (!CHECK(f != NULL, "cannot write %s", keyfile))
        return;
    fputs(KEY_A "\n" KEY_B "\n", f);
    fclose(f);
    attnd d;
    const char *args[] = {
        "--threads", "2", "--max-sessions", "3", "--api-key-file", keyfile, "--max-job-bytes",
        "16M",       NULL};
    if (attnd_start(&d, "sessions", args, NULL)) {
        exact_case(d.port, 7, 8, 2, 8, 8, true, true, 4100);
        exact_case(d.port, 6, 12, 3, 5, 7, false, false, 4200);
        exact_case(d.port, 9, 16, 4, 16, 16, false, true, 4300);
        exact_case(d.port, 5, 64, 8, 64, 64, true, false, 4400);
        printf("sessions: appends against the whole call: %zu floats, %zu not identical, at "
               "most %.3g of the largest magnitude\n",
               compared, differing, worst_rel);
        errors_and_owners(d.port);
        lru(d.port);
        v2_sequences(d.port);
        CHECK(metric_a(d.port, "attnd_sessions") > 0, "no session open before SIGTERM");
        CHECK(attnd_stop(&d, SIGTERM) == 0, "sessions: exit status after SIGTERM, sessions open");
    }
    ttl();
    budget();
    never_shared();
}
