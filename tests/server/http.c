/* http.c - HTTP behaviour around the API: X-Request-Id, keep-alive and CORS on the main
 * daemon, and the API key (from a file and from the environment). */
#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "server_test.h"

void test_request_id_keepalive_cors(int port) {
    reply r;
    {
        req q = {.path = "/healthz", .hdrs = {"X-Request-Id: test-id_42.abc"}};
        http(NULL, port, &q, &r);
        char *id = header(&r, "X-Request-Id");
        CHECK(id && !strcmp(id, "test-id_42.abc"), "X-Request-Id not echoed: %s", id);
        free(id);
        reply_free(&r);
    }
    {
        get(port, "/healthz", &r);
        char *id = header(&r, "X-Request-Id");
        CHECK(id && strlen(id) >= 8, "no X-Request-Id generated: %s", id ? id : "none");
        reply_free(&r);
        get(port, "/healthz", &r);
        char *id2 = header(&r, "X-Request-Id");
        CHECK(id && id2 && strcmp(id, id2), "generated request ids repeat: %s", id2);
        free(id);
        free(id2);
        reply_free(&r);
        req q = {.path = "/healthz", .hdrs = {"X-Request-Id: bad id \"with\" spaces"}};
        http(NULL, port, &q, &r);
        id = header(&r, "X-Request-Id");
        CHECK(id && !strchr(id, ' '), "an unsafe X-Request-Id was echoed: %s", id);
        free(id);
        reply_free(&r);
    }
    /* Keep-alive: the second request on a handle reuses the connection, also after a job. */
    {
        CURL *c = curl_easy_init();
        const char *job = "{\"q\": [[1, 0], [0, 1]], \"k\": [[1, 0], [0, 1]], \"v\": [[1, 2], "
                          "[3, 4]]}";
        req q = {.path = "/v1/models"};
        http(c, port, &q, &r);
        CHECK(r.status == 200 && r.connects == 1, "keep-alive: first request %ld, %ld connects",
              r.status, r.connects);
        reply_free(&r);
        post(c, port, "/v1/sdpa", job, &r);
        CHECK(r.status == 200 && r.connects == 0,
              "keep-alive: a job after a GET opened %ld new connections (status %ld)", r.connects,
              r.status);
        reply_free(&r);
        post(c, port, "/v1/sdpa", job, &r);
        CHECK(r.status == 200 && r.connects == 0, "keep-alive: job after job opened %ld",
              r.connects);
        reply_free(&r);
        http(c, port, &q, &r);
        CHECK(r.status == 200 && r.connects == 0, "keep-alive: GET after a job opened %ld",
              r.connects);
        reply_free(&r);
        curl_easy_cleanup(c);
    }
    /* CORS: the allow-list and the preflight. */
    {
        req pre = {.method = "OPTIONS",
                   .path = "/v1/attention",
                   .hdrs = {"Origin: http://allowed.example", "Access-Control-Request-Method: POST",
                            "Access-Control-Request-Headers: content-type, authorization"}};
        http(NULL, port, &pre, &r);
        char *acao = header(&r, "Access-Control-Allow-Origin");
        char *acam = header(&r, "Access-Control-Allow-Methods");
        char *acah = header(&r, "Access-Control-Allow-Headers");
        CHECK(r.status == 204 && acao && !strcmp(acao, "http://allowed.example"),
              "preflight: %ld, Allow-Origin %s", r.status, acao ? acao : "none");
        CHECK(acam && strstr(acam, "POST"), "preflight: Allow-Methods %s", acam);
        CHECK(acah && strcasestr(acah, "Authorization") && strcasestr(acah, "Content-Type"),
              "preflight: Allow-Headers %s", acah);
        char *xcto = header(&r, "X-Content-Type-Options"), *rp = header(&r, "Referrer-Policy");
        CHECK(xcto && !strcmp(xcto, "nosniff") && rp && !strcmp(rp, "no-referrer"),
              "preflight: X-Content-Type-Options %s, Referrer-Policy %s", xcto, rp);
        free(xcto);
        free(rp);
        free(acao);
        free(acam);
        free(acah);
        reply_free(&r);
        req bad = {.method = "OPTIONS",
                   .path = "/v1/attention",
                   .hdrs = {"Origin: http://evil.example", "Access-Control-Request-Method: POST"}};
        http(NULL, port, &bad, &r);
        acao = header(&r, "Access-Control-Allow-Origin");
        check_error(&r, 403, "cors_rejected", NULL, "preflight from a foreign origin");
        CHECK(!acao, "preflight from a foreign origin got Allow-Origin %s", acao);
        free(acao);
        reply_free(&r);
        req simple = {.path = "/v1/models", .hdrs = {"Origin: http://allowed.example"}};
        http(NULL, port, &simple, &r);
        acao = header(&r, "Access-Control-Allow-Origin");
        CHECK(r.status == 200 && acao && !strcmp(acao, "http://allowed.example"),
              "CORS GET: Allow-Origin %s", acao ? acao : "none");
        free(acao);
        reply_free(&r);
        req foreign = {.path = "/v1/models", .hdrs = {"Origin: http://evil.example"}};
        http(NULL, port, &foreign, &r);
        acao = header(&r, "Access-Control-Allow-Origin");
        CHECK(r.status == 200 && !acao, "CORS GET from a foreign origin got Allow-Origin %s", acao);
        free(acao);
        reply_free(&r);
    }
}

/* ---- The API key -------------------------------------------------------------------------- */

void test_auth(void) {
    const char *key = "s3cret-Key_0123456789";
    char keyfile[700];
    snprintf(keyfile, sizeof keyfile, "%s/api.key", cfg.data);
    FILE *f = fopen(keyfile, "w");
    if (f) {
        fprintf(f, "%s\n", key);
        fclose(f);
    }
    for (int variant = 0; variant < 2; variant++) {
        attnd d;
        const char *args_file[] = {"--api-key-file", keyfile, "--log-format", "json", NULL};
        const char *env_key[] = {"ATTND_API_KEY=s3cret-Key_0123456789", NULL};
        bool up = variant == 0 ? attnd_start(&d, "auth-file", args_file, NULL)
                               : attnd_start(&d, "auth-env", NULL, env_key);
        if (!up)
            continue;
        reply r;
        get(d.port, "/v1/models", &r);
        check_error(&r, 401, "unauthorized", NULL, "401 without a key");
        char *wa = header(&r, "WWW-Authenticate");
        CHECK(wa && !strncmp(wa, "Bearer", 6), "401: WWW-Authenticate %s", wa ? wa : "missing");
        free(wa);
        reply_free(&r);
        req wrong = {.path = "/v1/models", .hdrs = {"Authorization: Bearer s3cret-Key_012345678X"}};
        http(NULL, d.port, &wrong, &r);
        check_error(&r, 401, "unauthorized", NULL, "401 with a wrong key");
        wa = header(&r, "WWW-Authenticate");
        CHECK(wa && strstr(wa, "invalid_token"), "401 wrong key: WWW-Authenticate %s", wa);
        free(wa);
        reply_free(&r);
        req prefix = {.path = "/v1/models", .hdrs = {"Authorization: Bearer s3cret"}};
        http(NULL, d.port, &prefix, &r);
        check_error(&r, 401, "unauthorized", NULL, "401 with a prefix of the key");
        reply_free(&r);
        req longer = {.path = "/v1/models",
                      .hdrs = {"Authorization: Bearer s3cret-Key_0123456789X"}};
        http(NULL, d.port, &longer, &r);
        check_error(&r, 401, "unauthorized", NULL, "401 with the key and more");
        reply_free(&r);
        req basic = {.path = "/v1/models", .hdrs = {"Authorization: Basic czNjcmV0"}};
        http(NULL, d.port, &basic, &r);
        check_error(&r, 401, "unauthorized", NULL, "401 with Basic auth");
        reply_free(&r);
        req right = {.path = "/v1/models", .hdrs = {"Authorization: Bearer s3cret-Key_0123456789"}};
        http(NULL, d.port, &right, &r);
        CHECK(r.status == 200, "the right key: %ld %s", r.status, r.body);
        reply_free(&r);
        req job = {.path = "/v1/sdpa",
                   .ctype = "application/json",
                   .body = "{\"q\": [[1]], \"k\": [[1]], \"v\": [[2]]}",
                   .hdrs = {"authorization: bearer s3cret-Key_0123456789"}};
        http(NULL, d.port, &job, &r);
        CHECK(r.status == 200, "a job with the right key: %ld %s", r.status, r.body);
        reply_free(&r);
        job.hdrs[0] = NULL;
        http(NULL, d.port, &job, &r);
        check_error(&r, 401, "unauthorized", NULL, "401 job without a key");
        reply_free(&r);
        get(d.port, "/healthz", &r);
        CHECK(r.status == 200, "/healthz needs no key: %ld", r.status);
        reply_free(&r);
        get(d.port, "/readyz", &r);
        CHECK(r.status == 200, "/readyz needs no key: %ld", r.status);
        reply_free(&r);
        get(d.port, "/metrics", &r);
        check_error(&r, 401, "unauthorized", NULL, "401 /metrics without a key");
        reply_free(&r);
        /* The protocol's probes are open; the rest needs the key, and says so its way. */
        get(d.port, "/v2/health/live", &r);
        CHECK(r.status == 200, "/v2/health/live needs no key: %ld", r.status);
        reply_free(&r);
        get(d.port, "/v2/health/ready", &r);
        CHECK(r.status == 200, "/v2/health/ready needs no key: %ld", r.status);
        reply_free(&r);
        get(d.port, "/v2/models/demo", &r);
        CHECK(r.status == 401 && !strncmp(r.body, "{\"error\":\"", 10),
              "v2 metadata without a key: %ld %.200s", r.status, r.body);
        reply_free(&r);
        req v2 = {.path = "/v2/models/sdpa/infer",
                  .ctype = "application/json",
                  .body = "{\"inputs\": [{\"name\": \"q\", \"shape\": [1, 1], \"datatype\": "
                          "\"FP32\", \"data\": [1]}, {\"name\": \"k\", \"shape\": [1, 1], "
                          "\"datatype\": \"FP32\", \"data\": [1]}, {\"name\": \"v\", \"shape\": "
                          "[1, 1], \"datatype\": \"FP32\", \"data\": [2]}]}",
                  .hdrs = {"Authorization: Bearer s3cret-Key_0123456789"}};
        http(NULL, d.port, &v2, &r);
        CHECK(r.status == 200, "a v2 job with the right key: %ld %.200s", r.status, r.body);
        reply_free(&r);
        v2.hdrs[0] = NULL;
        http(NULL, d.port, &v2, &r);
        CHECK(r.status == 401 && strstr(r.body, "{\"error\":\"this server needs an API key"),
              "a v2 job without a key: %ld %.200s", r.status, r.body);
        reply_free(&r);
        get(d.port, "/%ff%fe", &r); /* a path that is not UTF-8, logged below */
        CHECK(r.status == 401, "/%%ff%%fe without a key: %ld", r.status);
        reply_free(&r);
        CHECK(attnd_stop(&d, SIGINT) == 0, "auth daemon: exit status after SIGINT");
        char *log = slurp(d.log);
        CHECK(!strstr(log, key) && !strstr(log, "s3cret"), "the API key appears in the log");
        if (variant == 0) { /* JSON logs: every line is one object (jansson wants UTF-8) */
            int lines = 0, good = 0, replaced = 0;
            for (char *p = log; *p;) {
                char *eol = strchr(p, '\n');
                if (eol)
                    *eol = '\0';
                json_t *j = json_loads(p, 0, NULL);
                lines++;
                good += j && json_is_string(json_object_get(j, "msg"));
                const char *path = json_string_value(json_object_get(j, "path"));
                replaced += path && !strcmp(path, "/\xef\xbf\xbd\xef\xbf\xbd"); /* U+FFFD x2 */
                json_decref(j);
                if (!eol)
                    break;
                p = eol + 1;
            }
            CHECK(lines > 5 && good == lines, "JSON log: %d of %d lines are objects", good, lines);
            CHECK(replaced == 1, "JSON log: the path /%%ff%%fe should read \"/\\ufffd\\ufffd\"");
        } else { /* text logs: ASCII only, the bytes escaped */
            bool ascii = true;
            for (const char *p = log; *p; p++)
                ascii &= (unsigned char)*p < 0x80;
            CHECK(ascii && strstr(log, " path=\"/\\xff\\xfe\" "),
                  "text log: the path /%%ff%%fe should read \"/\\xff\\xfe\" in ASCII");
        }
        free(log);
    }
}
