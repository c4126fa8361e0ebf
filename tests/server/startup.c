/* startup.c - what attnd refuses at start-up: bad flags and environment, each refusal one clear
 * line with exit status 2, --help, and model files that are broken. */
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "server_test.h"

/* The lines of out that are not info lines of the log (the refusal itself). */
static int error_lines(const char *out, char *first, size_t cap) {
    int n = 0;
    first[0] = '\0';
    for (const char *p = out; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        bool info = len > 30 && (strstr(p, " info ") && strstr(p, " info ") < p + len);
        if (len && !info) {
            if (!n)
                snprintf(first, cap, "%.*s", (int)len, p);
            n++;
        }
        if (!eol)
            break;
        p = eol + 1;
    }
    return n;
}

void test_startup_refusals(void) {
    static const struct {
        const char *args[4];
        const char *env;
        const char *names; /* the line must contain this */
    } bad[] = {
        {{"--threads", "0"}, NULL, "--threads"},
        {{"--threads", "many"}, NULL, "--threads"},
        {{"--log-format", "xml"}, NULL, "--log-format"},
        {{"--max-body-bytes", "12Q"}, NULL, "--max-body-bytes"},
        {{"--request-timeout", "-1"}, NULL, "--request-timeout"},
        {{"--listen", "127.0.0.1:99999"}, NULL, "--listen"},
        {{"--listen", "nocolon"}, NULL, "--listen"},
        {{"--cors-origins", "example.org/path"}, NULL, "--cors-origins"},
        {{"--api-key-file", "/nonexistent/key"}, NULL, "--api-key-file"},
        {{"--default-model", "nope"}, NULL, "nope"},
        {{"--frobnicate"}, NULL, "--frobnicate"},
        {{"--threads"}, NULL, "--threads"},
        {{NULL}, "ATTND_MAX_QUEUE=lots", "ATTND_MAX_QUEUE"},
        {{NULL}, "ATTND_LOG_FORMAT=yaml", "ATTND_LOG_FORMAT"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[8] = {"--listen", "127.0.0.1:0"};
        int n = 2;
        for (int k = 0; k < 4 && bad[i].args[k]; k++)
            args[n++] = bad[i].args[k];
        args[n] = NULL;
        const char *env[] = {bad[i].env, NULL};
        char *out;
        int st = attnd_run(args, env, "refuse", &out);
        char line[600];
        int nerr = error_lines(out, line, sizeof line);
        CHECK(st == 2, "refusal %s %s: exit status %d, expected 2",
              bad[i].args[0] ? bad[i].args[0] : bad[i].env, bad[i].args[1] ? bad[i].args[1] : "",
              st);
        CHECK(nerr == 1 && strstr(line, bad[i].names),
              "refusal %zu: expected one line naming %s, got %d: %s", i, bad[i].names, nerr, out);
        free(out);
    }
    /* A flag wins over a bad environment twin. */
    {
        const char *env[] = {"ATTND_THREADS=bogus", NULL};
        const char *args[] = {"--threads", "1", NULL};
        attnd d;
        if (attnd_start(&d, "flagwins", args, env))
            CHECK(attnd_stop(&d, SIGTERM) == 0, "flag over env: exit status");
    }
    /* --help documents every flag with its default. */
    {
        const char *args[] = {"--help", NULL};
        char *out;
        int st = attnd_run(args, NULL, "help", &out);
        CHECK(st == 0, "--help: exit status %d", st);
        static const char *const flags[] = {
            "--listen",        "--threads",         "--models",
            "--default-model", "--max-body-bytes",  "--max-job-bytes",
            "--max-queue",     "--request-timeout", "--drain-timeout",
            "--api-key-file",  "--cors-origins",    "--log-format",
            "ATTND_API_KEY",   "127.0.0.1:8080",    "64M",
            "default"};
        for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
            CHECK(strstr(out, flags[i]) != NULL, "--help does not mention %s", flags[i]);
        free(out);
    }
}

void test_broken_models(void) {
    char path[700];
    snprintf(path, sizeof path, "%s/broken/expect.json", cfg.data);
    json_t *expect = json_load_file(path, 0, NULL);
    if (!CHECK(json_object_size(expect) >= 5, "no broken-model list at %s", path))
        return;
    const char *name;
    json_t *file;
    json_object_foreach(expect, name, file) {
        char dir[700];
        snprintf(dir, sizeof dir, "%s/broken/%s", cfg.data, name);
        const char *args[] = {"--listen", "127.0.0.1:0", "--models", dir, NULL};
        char *out;
        int st = attnd_run(args, NULL, "broken", &out);
        char line[600];
        int nerr = error_lines(out, line, sizeof line);
        CHECK(st == 2, "broken model %s: exit status %d, expected 2", name, st);
        CHECK(nerr == 1 && strstr(line, json_string_value(file)),
              "broken model %s: expected one line naming %s, got %d lines: %.600s", name,
              json_string_value(file), nerr, out);
        free(out);
    }
    json_decref(expect);
}
