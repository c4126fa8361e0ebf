/* security.c - the API key, CORS, the security headers on every reply, and the default
 * address (loopback only). */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness.h"
#include "reliability.h"

void test_security(void) {
    static const char key[] = "k3y-0f-the-test_6a1f9c";
    char keyfile[800], auth[128];
    snprintf(keyfile, sizeof keyfile, "%s/api.key", cfg.work);
    FILE *f = fopen(keyfile, "w");
    if (!CHECK(f != NULL, "cannot write %s", keyfile))
        return;
    fprintf(f, "%s\n", key);
    fclose(f);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
    attnd d;
    const char *args[] = {"--api-key-file", keyfile, "--cors-origins", "http://allowed.example",
                          NULL};
    if (!attnd_start(&d, "security", args, NULL))
        return;
    reply r;
    const char *const allowed[] = {"Origin: http://allowed.example", NULL};
    const char *const allowed_key[] = {"Origin: http://allowed.example", auth, NULL};
    const char *const foreign_key[] = {"Origin: http://evil.example", auth, NULL};

    /* Without the key: 401 with WWW-Authenticate, and CORS headers so a page can read it. */
    request(NULL, d.port, NULL, "/v1/sdpa", SDPA_SMALL, 0, allowed, &r);
    check_error(&r, 401, "unauthorized", "Bearer", "a job without the key");
    CHECK(has_header(&r, "Access-Control-Allow-Origin", "http://allowed.example") &&
              has_header(&r, "Vary", "Origin"),
          "a 401 to an allowed origin should carry its CORS headers: %s", r.hdr);
    char *wa = header(&r, "WWW-Authenticate");
    CHECK(wa && !strncmp(wa, "Bearer realm=", 13), "401: WWW-Authenticate %s", wa ? wa : "none");
    free(wa);
    reply_free(&r);
    /* With it: 200 and the headers every answer carries. */
    request(NULL, d.port, NULL, "/v1/sdpa", SDPA_SMALL, 0, allowed_key, &r);
    CHECK(r.status == 200, "a job with the key: %ld %.200s", r.status, r.body);
    CHECK(has_header(&r, "X-Content-Type-Options", "nosniff") &&
              has_header(&r, "Referrer-Policy", "no-referrer") &&
              has_header(&r, "Cache-Control", "no-store") &&
              has_header(&r, "Access-Control-Allow-Origin", "http://allowed.example"),
          "an API answer's headers: %s", r.hdr);
    reply_free(&r);
    /* A foreign origin gets no CORS header, but Vary: Origin (caches must not mix them). */
    request(NULL, d.port, NULL, "/v1/sdpa", SDPA_SMALL, 0, foreign_key, &r);
    CHECK(r.status == 200 && has_header(&r, "Access-Control-Allow-Origin", NULL) &&
              has_header(&r, "Vary", "Origin"),
          "a foreign origin: %ld %s", r.status, r.hdr);
    reply_free(&r);
    /* Preflights need no key; a foreign origin or a method the route does not take: 403. */
    const char *const pre_ok[] = {
        "Origin: http://allowed.example", "Access-Control-Request-Method: POST",
        "Access-Control-Request-Headers: authorization, content-type", NULL};
    request(NULL, d.port, "OPTIONS", "/v1/attention", NULL, 0, pre_ok, &r);
    CHECK(r.status == 204 &&
              has_header(&r, "Access-Control-Allow-Origin", "http://allowed.example"),
          "a preflight from the allowed origin: %ld %s", r.status, r.hdr);
    reply_free(&r);
    const char *const pre_put[] = {"Origin: http://allowed.example",
                                   "Access-Control-Request-Method: PUT", NULL};
    request(NULL, d.port, "OPTIONS", "/v1/attention", NULL, 0, pre_put, &r);
    check_error(&r, 403, "cors_rejected", "PUT", "a preflight for PUT");
    reply_free(&r);
    const char *const pre_evil[] = {"Origin: http://allowed.example.evil.example",
                                    "Access-Control-Request-Method: POST", NULL};
    request(NULL, d.port, "OPTIONS", "/v1/attention", NULL, 0, pre_evil, &r);
    check_error(&r, 403, "cors_rejected", NULL,
                "a preflight from an origin that only starts alike");
    reply_free(&r);
    /* Probes stay open; everything else needs the key. */
    static const char *const open_paths[] = {"/healthz", "/readyz"};
    static const char *const closed_paths[] = {"/metrics", "/v1/models", "/", "/openapi.yaml"};
    for (size_t i = 0; i < 2; i++) {
        request(NULL, d.port, NULL, open_paths[i], NULL, 0, NULL, &r);
        CHECK(r.status == 200, "%s without the key: %ld", open_paths[i], r.status);
        reply_free(&r);
    }
    for (size_t i = 0; i < 4; i++) {
        request(NULL, d.port, NULL, closed_paths[i], NULL, 0, NULL, &r);
        CHECK(r.status == 401, "%s without the key: %ld", closed_paths[i], r.status);
        reply_free(&r);
    }
    /* Near misses: each refused, none logged. */
    char near[4][160];
    snprintf(near[0], sizeof near[0], "Authorization: Bearer %.*s", (int)sizeof key - 2, key);
    snprintf(near[1], sizeof near[1], "Authorization: Bearer %sX", key);
    snprintf(near[2], sizeof near[2], "Authorization: Basic %s", key);
    snprintf(near[3], sizeof near[3], "Authorization: Bearer%s", key);
    for (int i = 0; i < 4; i++) {
        const char *const h[] = {near[i], NULL};
        request(NULL, d.port, NULL, "/v1/models", NULL, 0, h, &r);
        CHECK(r.status == 401, "a near miss of the key (%d): %ld", i, r.status);
        reply_free(&r);
    }
    CHECK(attnd_stop(&d, SIGTERM) == 0, "security daemon: exit status after SIGTERM");
    char *log = slurp(d.log);
    CHECK(!strstr(log, key) && !strstr(log, "k3y-0f"), "the API key appears in the log");
    free(log);

    /* The default address is 127.0.0.1:8080: the daemon listens there, or says it cannot. */
    {
        attnd dd = {0};
        snprintf(dd.log, sizeof dd.log, "%s/default-listen.log", cfg.work);
        unlink(dd.log);
        dd.pid = fork();
        if (dd.pid == 0) {
            int fd = open(dd.log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(fd, 2);
            dup2(fd, 1);
            unsetenv("ATTND_LISTEN");
            execl(cfg.attnd, cfg.attnd, (char *)NULL);
            _exit(127);
        }
        double t0 = now();
        char *l = NULL;
        bool seen = false;
        while (!seen && now() - t0 < 20 * cfg.scale) {
            free(l);
            l = slurp(dd.log);
            seen = strstr(l, "address=127.0.0.1:8080") || strstr(l, "listen on 127.0.0.1:8080");
            if (!seen)
                sleep_s(0.02);
        }
        CHECK(seen, "without --listen, attnd should use 127.0.0.1:8080: %.300s", l ? l : "");
        free(l);
        attnd_stop(&dd, SIGTERM);
    }
}
