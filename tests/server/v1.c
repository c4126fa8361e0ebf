/* v1.c - API v1 over HTTP on the main daemon: every endpoint (with the page and the static
 * files), every error code with its JSON error body, results against float64 references (base64
 * in and out, rank 2 and 3, cross-attention with kdim/vdim), and the file models against
 * PyTorch's answers. */
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../harness.h"
#include "server_test.h"

void test_endpoints(int port) {
    reply r;
    get(port, "/healthz", &r);
    CHECK(r.status == 200 && strstr(r.body, "ok"), "/healthz: %ld %s", r.status, r.body);
    reply_free(&r);
    get(port, "/readyz", &r);
    CHECK(r.status == 200, "/readyz: %ld", r.status);
    reply_free(&r);

    get(port, "/v1/models", &r);
    json_t *j = json_loads(r.body, 0, NULL);
    CHECK(r.status == 200 && j, "/v1/models: %ld %.200s", r.status, r.body);
    const char *def = json_string_value(json_object_get(j, "default"));
    CHECK(def && !strcmp(def, "demo"), "/v1/models: default %s", def ? def : "none");
    json_t *models = json_object_get(j, "models");
    static const struct {
        const char *name, *source;
        long e, h;
        bool bias;
    } want[] = {{"demo", "builtin", 64, 4, false}, {"lesson", "builtin", 256, 4, false},
                {"f32", "file", 32, 4, true},      {"f16", "file", 16, 2, true},
                {"bf16", "file", 24, 3, false},    {"kvdim", "file", 16, 4, true}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        bool found = false;
        for (size_t k = 0; k < json_array_size(models); k++) {
            json_t *m = json_array_get(models, k);
            const char *n = json_string_value(json_object_get(m, "name"));
            if (!n || strcmp(n, want[i].name))
                continue;
            found = true;
            const char *src = json_string_value(json_object_get(m, "source"));
            CHECK(src && !strcmp(src, want[i].source), "model %s: source %s", n,
                  src ? src : "none");
            CHECK(json_integer_value(json_object_get(m, "embed_dim")) == want[i].e &&
                      json_integer_value(json_object_get(m, "num_heads")) == want[i].h,
                  "model %s: embed_dim/num_heads wrong", n);
            CHECK(json_is_boolean(json_object_get(m, "has_bias")) &&
                      json_is_true(json_object_get(m, "has_bias")) == want[i].bias,
                  "model %s: has_bias wrong", n);
        }
        CHECK(found, "/v1/models does not list %s", want[i].name);
    }
    json_decref(j);
    reply_free(&r);

    /* The page and the static files: built in, with security headers, nothing else served. */
    static const char *const pages[] = {"/", "/index.html"};
    for (size_t i = 0; i < 2; i++) {
        get(port, pages[i], &r);
        char *ct = header(&r, "Content-Type"), *csp = header(&r, "Content-Security-Policy"),
             *nosniff = header(&r, "X-Content-Type-Options"), *ref = header(&r, "Referrer-Policy");
        CHECK(r.status == 200 && strstr(r.body, "attnd") && strstr(r.body, "app.js"), "%s: %ld",
              pages[i], r.status);
        CHECK(ct && !strncmp(ct, "text/html", 9), "%s: Content-Type %s", pages[i], ct);
        CHECK(csp && strstr(csp, "default-src"), "%s: no Content-Security-Policy", pages[i]);
        CHECK(nosniff && !strcmp(nosniff, "nosniff"), "%s: no X-Content-Type-Options", pages[i]);
        CHECK(ref != NULL, "%s: no Referrer-Policy", pages[i]);
        free(ct);
        free(csp);
        free(nosniff);
        free(ref);
        reply_free(&r);
    }
    /* Caching (issue 34): each file has an ETag; a browser's copy that is still the file gets
     * 304 and no body (the page's files say no-cache: revalidated on every load, so a new build
     * is seen at once), a stale one the file; the icon is kept for a day. */
    static const char *const cached[] = {"/", "/app.js", "/style.css", "/favicon.ico"};
    for (size_t i = 0; i < 4; i++) {
        get(port, cached[i], &r);
        char *etag = header(&r, "ETag"), *cc = header(&r, "Cache-Control");
        bool icon = !strcmp(cached[i], "/favicon.ico");
        CHECK(r.status == 200 && etag && etag[0] == '"' && r.len > 100,
              "%s: 200 with an ETag (%ld, %s)", cached[i], r.status, etag ? etag : "none");
        CHECK(cc && !strcmp(cc, icon ? "public, max-age=86400" : "no-cache"),
              "%s: Cache-Control %s", cached[i], cc ? cc : "none");
        reply_free(&r);
        char inm[128], stale[128], list[300];
        snprintf(inm, sizeof inm, "If-None-Match: %s", etag ? etag : "\"x\"");
        snprintf(stale, sizeof stale, "If-None-Match: \"0000000000000000-1\"");
        snprintf(list, sizeof list, "If-None-Match: \"a\", W/%s", etag ? etag : "\"x\"");
        const char *tries[3] = {inm, list, stale};
        for (int t = 0; t < 3; t++) {
            req q = {.path = cached[i], .hdrs = {tries[t]}};
            http(NULL, port, &q, &r);
            char *again = header(&r, "ETag");
            if (t < 2)
                CHECK(r.status == 304 && r.len == 0 && again && etag && !strcmp(again, etag),
                      "%s with %s: 304 and no body, got %ld and %zu bytes", cached[i], tries[t],
                      r.status, r.len);
            else
                CHECK(r.status == 200 && r.len > 100, "%s with a stale tag: 200 and the file, %ld",
                      cached[i], r.status);
            free(again);
            reply_free(&r);
        }
        free(etag);
        free(cc);
    }
    /* The visualizer's script and style sheet, with their types. */
    static const char *const assets[][2] = {{"/app.js", "text/javascript"},
                                            {"/style.css", "text/css"}};
    for (size_t i = 0; i < 2; i++) {
        get(port, assets[i][0], &r);
        char *ct = header(&r, "Content-Type");
        CHECK(r.status == 200 && r.len > 1000, "%s: %ld", assets[i][0], r.status);
        CHECK(ct && !strncmp(ct, assets[i][1], strlen(assets[i][1])), "%s: Content-Type %s",
              assets[i][0], ct);
        free(ct);
        reply_free(&r);
    }
    static const char *const outside[] = {"/../Makefile", "/%2e%2e/Makefile", "/web/index.html",
                                          "/index.html/", "/server/http.c",   "//etc/passwd",
                                          "/.git/config"};
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        get(port, outside[i], &r);
        check_error(&r, 404, "not_found", NULL, outside[i]);
        reply_free(&r);
    }
    {
        req q = {.method = "HEAD", .path = "/healthz"};
        http(NULL, port, &q, &r);
        CHECK(r.status == 200 && r.len == 0, "HEAD /healthz: %ld, %zu body bytes", r.status, r.len);
        reply_free(&r);
    }

    /* /openapi.yaml: the embedded api/openapi.yaml, byte for byte, when there is one. */
    get(port, "/openapi.yaml", &r);
    struct stat st;
    if (cfg.openapi && stat(cfg.openapi, &st) == 0) {
        char *want_yaml = slurp(cfg.openapi);
        CHECK(r.status == 200 && r.len == strlen(want_yaml) && !memcmp(r.body, want_yaml, r.len),
              "/openapi.yaml: %ld, %zu bytes, expected the %zu of %s", r.status, r.len,
              strlen(want_yaml), cfg.openapi);
        free(want_yaml);
    } else {
        check_error(&r, 404, "not_found", NULL, "/openapi.yaml (none built in)");
    }
    reply_free(&r);
}

void test_errors(int port) {
    reply r;
    const char *ok_query = "[[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8]]";
    char body[512];

    get(port, "/v3/attention", &r); /* /v2 and below are the Open Inference Protocol's */
    check_error(&r, 404, "not_found", NULL, "404 route");
    reply_free(&r);

    get(port, "/v1/attention", &r);
    check_error(&r, 405, "method_not_allowed", NULL, "405 GET /v1/attention");
    char *allow = header(&r, "Allow");
    CHECK(allow && strstr(allow, "POST"), "405: Allow %s", allow ? allow : "missing");
    free(allow);
    reply_free(&r);
    {
        req q = {.method = "DELETE", .path = "/v1/models"};
        http(NULL, port, &q, &r);
        check_error(&r, 405, "method_not_allowed", NULL, "405 DELETE /v1/models");
        allow = header(&r, "Allow");
        CHECK(allow && strstr(allow, "GET") && !strstr(allow, "POST"), "405: Allow %s",
              allow ? allow : "missing");
        free(allow);
        reply_free(&r);
    }

    {
        req q = {.path = "/v1/sdpa", .ctype = "text/plain", .body = "{}"};
        http(NULL, port, &q, &r);
        check_error(&r, 415, "unsupported_media_type", NULL, "415 text/plain");
        reply_free(&r);
        req q2 = {.path = "/v1/attention", .body = "{}"};
        http(NULL, port, &q2, &r); /* curl sends form-urlencoded */
        check_error(&r, 415, "unsupported_media_type", NULL, "415 form");
        reply_free(&r);
        req q3 = {.path = "/v1/attention", .ctype = "application/json; charset=utf-8", .body = "{"};
        http(NULL, port, &q3, &r);
        check_error(&r, 400, "invalid_json", NULL, "400 charset param is JSON");
        reply_free(&r);
    }

    post(NULL, port, "/v1/attention", "{\"query\": [[1, 2], [3, ", &r);
    check_error(&r, 400, "invalid_json", NULL, "400 malformed JSON");
    reply_free(&r);
    post(NULL, port, "/v1/sdpa", "[1, 2, 3]", &r);
    CHECK(r.status == 400, "400 not an object: %ld %s", r.status, r.body);
    reply_free(&r);

    snprintf(body, sizeof body,
             "{\"query\": %s, \"params\": {\"init\": \"identity\", \"num_heads\": 2}, \"causal\": "
             "\"sideways\"}",
             ok_query);
    post(NULL, port, "/v1/attention", body, &r);
    check_error(&r, 400, "invalid_field", "causal", "400 invalid field causal");
    reply_free(&r);
    post(NULL, port, "/v1/attention",
         "{\"query\": [[1, 2, 3], [4, 5]], \"params\": {\"init\": \"identity\", \"num_heads\": "
         "1}}",
         &r);
    check_error(&r, 400, "invalid_field", "query", "400 ragged query");
    reply_free(&r);
    snprintf(body, sizeof body,
             "{\"query\": %s, \"params\": {\"init\": \"identity\", "
             "\"num_heads\": 3}}",
             ok_query);
    post(NULL, port, "/v1/attention", body, &r);
    check_error(&r, 400, "invalid_field", "params", "400 E not divisible by heads");
    reply_free(&r);

    snprintf(body, sizeof body, "{\"query\": %s, \"model\": \"no-such-model\"}", ok_query);
    post(NULL, port, "/v1/attention", body, &r);
    check_error(&r, 404, "unknown_model", "model", "404 unknown model");
    reply_free(&r);

    /* 413: the body, announced by Content-Length (refused before it is read) and chunked. */
    {
        size_t big = (size_t)2 << 20; /* the daemon's cap is 1 MiB */
        char *b = malloc(big + 1);
        memset(b, ' ', big);
        b[0] = '{';
        b[big - 1] = '}';
        b[big] = '\0';
        /* Sent as curl sends a body over 1 MiB, with Expect: 100-continue: attnd refuses it from
         * its Content-Length before reading it, and closes the connection. Without the wait, a
         * client still sending when that close comes can get a reset before it reads the 413
         * (seen once under ASan). */
        req big_q = {.path = "/v1/attention",
                     .ctype = "application/json",
                     .body = b,
                     .hdrs = {"Expect: 100-continue"}};
        http(NULL, port, &big_q, &r);
        check_error(&r, 413, "body_too_large", NULL, "413 body (Content-Length)");
        CHECK(strstr(r.body, "max-body-bytes") != NULL,
              "413 body: the message should name the "
              "limit: %s",
              r.body);
        reply_free(&r);
        free(b);
        req q = {.path = "/v1/attention", .ctype = "application/json", .chunked = big};
        http(NULL, port, &q, &r);
        check_error(&r, 413, "body_too_large", NULL, "413 body (chunked)");
        reply_free(&r);
    }
    /* 413: the job (per-head weights of 2 x 2048 x 2048 floats = 32 MiB > the 16 MiB cap). */
    {
        size_t L = 2048, E = 4;
        float *x = rnd_array(L * E, 7);
        size_t shape[2] = {L, E};
        json_t *j = json_pack("{s:o,s:{s:s,s:i},s:s}", "query", json_b64(x, shape, 2), "params",
                              "init", "identity", "num_heads", 2, "need_weights", "per_head");
        char *s = dump(j);
        post(NULL, port, "/v1/attention", s, &r);
        check_error(&r, 413, "job_too_large", NULL, "413 job");
        reply_free(&r);
        free(s);
        free(x);
    }
}

void test_results(int port) {
    reply r;
    tens t;
    /* The seed chapter's worked example through /v1/sdpa: output row 0 = [0.70, 0.50]. */
    {
        const float q[8] = {1, 1, 0, 1, 1, 0, .5f, .5f}, v[8] = {1, 0, 0, 1, 1, 1, .5f, .5f};
        json_t *j = json_pack("{s:o,s:o,s:o,s:b}", "q", json_matrix(q, 4, 2), "k",
                              json_matrix(q, 4, 2), "v", json_matrix(v, 4, 2), "need_weights", 1);
        char *s = dump(j);
        post(NULL, port, "/v1/sdpa", s, &r);
        double out[8], w[16];
        double qd[8], vd[8];
        for (int i = 0; i < 8; i++)
            qd[i] = (double)q[i], vd[i] = (double)v[i];
        ref_attend(qd, 2, qd, 2, vd, 2, 4, 4, 2, 2, 1 / sqrt(2.0), 0, out, 2, w);
        if (reply_tensor(&r, "output", &t, "sdpa seed example")) {
            CHECK(t.rank == 2 && t.shape[0] == 4 && t.shape[1] == 2, "sdpa: output shape");
            CHECK(fabs(t.v[0] - 0.70) < 0.01 && fabs(t.v[1] - 0.50) < 0.01,
                  "sdpa: row 0 is [%g, %g], expected about [0.70, 0.50]", t.v[0], t.v[1]);
            CHECK(max_diff(&t, out, 8) < TOL, "sdpa: output off by %g", max_diff(&t, out, 8));
            tens_free(&t);
        }
        if (reply_tensor(&r, "weights", &t, "sdpa seed weights"))
            CHECK(max_diff(&t, w, 16) < TOL, "sdpa: weights off by %g", max_diff(&t, w, 16));
        tens_free(&t);
        reply_free(&r);
        free(s);
    }
    /* MHA with inline parameters: rank 2 and 3, self and cross, with and without biases,
     * kdim/vdim, JSON and base64 in and out, per-head weights. */
    static const struct {
        size_t N, L, S, E, H, kd, vd;
        bool self, bias, rank2, b64in;
        const char *encoding;
    } cases[] = {
        {1, 5, 5, 8, 2, 8, 8, true, true, true, false, NULL},
        {3, 6, 6, 16, 4, 16, 16, true, false, false, false, "json"},
        {2, 4, 7, 12, 3, 12, 12, false, true, false, true, "base64"},
        {1, 3, 9, 16, 4, 5, 11, false, true, true, false, NULL},
        {2, 6, 4, 16, 2, 9, 9, false, false, false, true, "base64"},
        {1, 33, 33, 64, 8, 64, 64, true, true, true, true, "base64"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mha_case c;
        mha_case_make(&c, cases[i].N, cases[i].L, cases[i].S, cases[i].E, cases[i].H, cases[i].kd,
                      cases[i].vd, cases[i].self, cases[i].bias, 100 + 10 * i);
        size_t on = c.N * c.L * c.E, wn = c.N * c.H * c.L * c.S;
        double *out = malloc(on * sizeof *out), *w = malloc(wn * sizeof *w);
        mha_case_ref(&c, out, w);
        char *s = mha_case_body(&c, cases[i].rank2, cases[i].b64in, cases[i].encoding, "per_head");
        post(NULL, port, "/v1/attention", s, &r);
        char what[96];
        snprintf(what, sizeof what, "mha case %zu (N %zu, L %zu, S %zu, E %zu, kdim %zu, vdim %zu)",
                 i, c.N, c.L, c.S, c.E, c.kd, c.vd);
        if (reply_tensor(&r, "output", &t, what)) {
            int rank = cases[i].rank2 ? 2 : 3;
            CHECK(t.rank == rank, "%s: output rank %d, expected %d", what, t.rank, rank);
            CHECK(t.shape[t.rank - 1] == c.E && t.shape[t.rank - 2] == c.L, "%s: output shape",
                  what);
            CHECK(max_diff(&t, out, on) < TOL, "%s: output off by %g", what, max_diff(&t, out, on));
            json_t *j = json_loads(r.body, 0, NULL);
            json_t *o = json_object_get(j, "output");
            bool b64 = cases[i].encoding && !strcmp(cases[i].encoding, "base64");
            CHECK(b64 == json_is_object(o), "%s: output encoding is not %s", what,
                  b64 ? "base64" : "json");
            CHECK(json_is_null(json_object_get(j, "model")),
                  "%s: model should be null with inline params", what);
            CHECK(json_integer_value(json_object_get(j, "num_heads")) == (json_int_t)c.H,
                  "%s: num_heads", what);
            json_t *usage = json_object_get(j, "usage");
            CHECK(json_is_number(json_object_get(usage, "compute_ms")) &&
                      json_is_number(json_object_get(usage, "queue_ms")) &&
                      json_number_value(json_object_get(usage, "flops")) > 0,
                  "%s: usage incomplete", what);
            json_decref(j);
            tens_free(&t);
        }
        if (reply_tensor(&r, "weights", &t, what))
            CHECK(max_diff(&t, w, wn) < TOL, "%s: weights off by %g", what, max_diff(&t, w, wn));
        tens_free(&t);
        reply_free(&r);
        free(s);
        /* base64 out is bit-for-bit what JSON out says (shortest round-trip floats). */
        if (cases[i].encoding && !strcmp(cases[i].encoding, "base64")) {
            char *sj = mha_case_body(&c, cases[i].rank2, false, "json", NULL);
            char *sb = mha_case_body(&c, cases[i].rank2, true, "base64", NULL);
            reply rj, rb;
            tens tj, tb;
            post(NULL, port, "/v1/attention", sj, &rj);
            post(NULL, port, "/v1/attention", sb, &rb);
            /* JSON floats are the shortest decimals that round to the same float32. */
            size_t diff = 0;
            if (reply_tensor(&rj, "output", &tj, what) && reply_tensor(&rb, "output", &tb, what) &&
                tj.n == tb.n)
                for (size_t k = 0; k < tj.n; k++)
                    diff += (float)tj.v[k] != (float)tb.v[k];
            CHECK(tj.n == tb.n && tj.n > 0 && diff == 0,
                  "%s: base64 and JSON outputs differ in %zu of %zu values", what, diff, tj.n);
            tens_free(&tj);
            tens_free(&tb);
            reply_free(&rj);
            reply_free(&rb);
            free(sj);
            free(sb);
        }
        free(out);
        free(w);
        mha_case_free(&c);
    }
}

/* The file models (F32, F16, BF16, kvdim) against torch's float64 answers. */
void test_file_models(int port) {
    static const char *const names[] = {"f32", "f16", "bf16", "kvdim"};
    for (size_t i = 0; i < 4; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/cases/%s.json", cfg.data, names[i]);
        json_t *c = json_load_file(path, 0, NULL);
        if (!CHECK(c != NULL, "no case file %s", path))
            continue;
        char *body = json_dumps(json_object_get(c, "request"), JSON_COMPACT);
        reply r;
        post(NULL, port, "/v1/attention", body, &r);
        tens want, got;
        char what[64];
        snprintf(what, sizeof what, "file model %s", names[i]);
        if (tens_from_json(json_object_get(c, "output"), &want) &&
            reply_tensor(&r, "output", &got, what)) {
            CHECK(got.rank == 2 && got.n == want.n, "%s: output shape", what);
            CHECK(max_diff(&got, want.v, want.n) < TOL, "%s: output off torch by %g", what,
                  max_diff(&got, want.v, want.n));
            json_t *j = json_loads(r.body, 0, NULL);
            const char *m = json_string_value(json_object_get(j, "model"));
            CHECK(m && !strcmp(m, names[i]), "%s: model %s", what, m ? m : "none");
            json_decref(j);
        }
        tens_free(&want);
        tens_free(&got);
        if (tens_from_json(json_object_get(c, "weights"), &want) &&
            reply_tensor(&r, "weights", &got, what))
            CHECK(max_diff(&got, want.v, want.n) < TOL, "%s: weights off torch by %g", what,
                  max_diff(&got, want.v, want.n));
        tens_free(&want);
        tens_free(&got);
        reply_free(&r);
        free(body);
        json_decref(c);
    }
}
