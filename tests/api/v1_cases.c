/* v1_cases.c - API v1's request fields (api/v1/): every request case kept as a data file under
 * tests/api_cases/requests (status, code, field and message), and the one rule for integers. */
#include <dirent.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "codec.h"
#include "api_test.h"

/* ---- Request cases from data files -------------------------------------------------------- */

/* Each .case file: the first line "STATUS [CODE FIELD] [limit=value ...]" (FIELD "-" for
 * null), then the body, answered by fn. */
size_t run_case_dir(const char *sub, case_fn fn, void *ctx) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/requests/%s", cases_dir, sub);
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (!d)
        return 0;
    char *names[1024];
    size_t count = 0;
    struct dirent *de;
    while ((de = readdir(d)) && count < 1024)
        if (strstr(de->d_name, ".case"))
            names[count++] = strdup(de->d_name);
    closedir(d);
    qsort(names, count, sizeof *names, cmp_str);
    for (size_t i = 0; i < count; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t len = 0;
        char *text = read_file(path, &len);
        CHECK(text != NULL, "cannot read %s", path);
        if (!text)
            continue;
        char *nl = memchr(text, '\n', len);
        size_t hl = nl ? (size_t)(nl - text) : len;
        char head[256] = "", phrase[160] = "";
        snprintf(head, sizeof head, "%.*s", (int)hl, text);
        char *bar = strstr(head, " | "); /* the rest is a phrase the message must contain */
        if (bar) {
            snprintf(phrase, sizeof phrase, "%s", bar + 3);
            *bar = '\0';
        }
        const char *body = nl ? nl + 1 : text + len;
        size_t blen = len - (size_t)(body - text);
        int status = 0;
        char code[64] = "", field[160] = "";
        api_limits lim = api_limits_default();
        char *save = NULL;
        for (char *tok = strtok_r(head, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
            if (!status)
                status = atoi(tok);
            else if (strchr(tok, '=')) {
                size_t v = (size_t)strtoull(strchr(tok, '=') + 1, NULL, 10);
                if (!strncmp(tok, "max_job_bytes=", 14))
                    lim.max_job_bytes = v;
                else if (!strncmp(tok, "max_dim=", 8))
                    lim.max_dim = v;
                else if (!strncmp(tok, "max_heads=", 10))
                    lim.max_heads = v;
                else if (!strncmp(tok, "max_depth=", 10))
                    lim.max_depth = v;
            } else if (!code[0])
                snprintf(code, sizeof code, "%s", tok);
            else
                snprintf(field, sizeof field, "%s", strcmp(tok, "-") ? tok : "");
        }
        api_error e = {0};
        /* A copy of exactly blen bytes, so a read past the body is caught under ASan. */
        char *exact = malloc(blen ? blen : 1);
        memcpy(exact, body, blen);
        json_t *j = fn(exact, blen, &lim, &e, ctx);
        int got = j ? 200 : e.status;
        CHECK(got == status, "%s: status %d, want %d (%s %s: %s)", path, got, status, e.code,
              e.field, e.message);
        if (status != 200 && got == status) {
            CHECK(strcmp(e.code, code) == 0, "%s: code %s, want %s (%s)", path, e.code, code,
                  e.message);
            CHECK(strcmp(e.field, field) == 0, "%s: field \"%s\", want \"%s\" (%s)", path, e.field,
                  field, e.message);
            CHECK(e.message[0] && !strchr(e.message, '\n'), "%s: message must be one line", path);
            CHECK(!phrase[0] || strstr(e.message, phrase), "%s: the message \"%s\" lacks \"%s\"",
                  path, e.message, phrase);
        }
        json_decref(j);
        free(exact);
        free(text);
        free(names[i]);
    }
    return count;
}

static json_t *attention_case(const char *body, size_t len, const api_limits *lim, api_error *e,
                              void *ctx) {
    return request(API_OP_ATTENTION, body, len, ctx, lim, e);
}

static json_t *sdpa_case(const char *body, size_t len, const api_limits *lim, api_error *e,
                         void *ctx) {
    return request(API_OP_SDPA, body, len, ctx, lim, e);
}

void test_request_cases(void) {
    api_registry *models = builtin_registry();
    size_t n = run_case_dir("attention", attention_case, models);
    n += run_case_dir("sdpa", sdpa_case, models);
    CHECK(n >= 250, "only %zu request cases found", n);
    printf("request cases: %zu\n", n);
    api_registry_destroy(models);
}

/* ---- Integers (issue 10, item 7) --------------------------------------------------------- */

/* One rule for every integer field: a number whose value, read exactly, is integral. */
void test_integer_rule(void) {
    static const struct {
        const char *text;
        int kind;
        uint64_t value;
    } t[] = {{"2", APIP_INT_OK, 2},
             {"2.0", APIP_INT_OK, 2},
             {"2e0", APIP_INT_OK, 2},
             {"2E+0", APIP_INT_OK, 2},
             {"0.2e1", APIP_INT_OK, 2},
             {"200e-2", APIP_INT_OK, 2},
             {"-0", APIP_INT_OK, 0},
             {"-0.0e-7", APIP_INT_OK, 0},
             {"0e99999999999999999999", APIP_INT_OK, 0},
             {"1e19", APIP_INT_OK, 10000000000000000000u},
             {"18446744073709551615", APIP_INT_OK, UINT64_MAX},
             {"18446744073709551615.000", APIP_INT_OK, UINT64_MAX},
             {"1.8446744073709551615e19", APIP_INT_OK, UINT64_MAX},
             {"18446744073709551616", APIP_INT_TOO_BIG, 0},
             {"1e20", APIP_INT_TOO_BIG, 0},
             {"1e400", APIP_INT_TOO_BIG, 0},
             {"1234567890123456789012345678900000000000e-10", APIP_INT_TOO_BIG, 0},
             {"123456789012345678901234567890e-10", APIP_INT_NOT_INTEGER, 0},
             {"2.5", APIP_INT_NOT_INTEGER, 0},
             {"1.0000000000000000001", APIP_INT_NOT_INTEGER, 0}, /* a double would say 1 */
             {"25e-1", APIP_INT_NOT_INTEGER, 0},
             {"1e-400", APIP_INT_NOT_INTEGER, 0},
             {"-3.5", APIP_INT_NOT_INTEGER, 0}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char buf[64];
        snprintf(buf, sizeof buf, "%s,", t[i].text); /* a delimiter after, as in a body */
        bool neg = false;
        uint64_t v = 0;
        int kind = apip_jv_int(buf, &neg, &v);
        CHECK(kind == t[i].kind && (kind != APIP_INT_OK || v == t[i].value),
              "apip_jv_int(%s): kind %d value %llu, want %d %llu", t[i].text, kind,
              (unsigned long long)v, t[i].kind, (unsigned long long)t[i].value);
    }
    bool neg = false;
    uint64_t v = 0;
    CHECK(apip_jv_int("-7,", &neg, &v) == APIP_INT_OK && neg && v == 7, "-7");

    /* Every integer field takes 2.0 as it takes 2, and refuses 2.5 (or 0.5). */
    static const struct {
        api_op op;
        const char *body; /* %s is the number */
        const char *field;
    } f[] = {
        {API_OP_ATTENTION,
         "{\"query\":[[1,0],[0,1]],\"params\":{\"init\":\"identity\",\"num_heads\":%s}}",
         "params.num_heads"},
        {API_OP_ATTENTION,
         "{\"query\":[[1,0],[0,1]],\"params\":{\"init\":\"random\",\"num_heads\":1,\"seed\":%s}}",
         "params.seed"},
        {API_OP_ATTENTION,
         "{\"query\":[[1,0],[0,1]],\"params\":{\"init\":\"identity\",\"num_heads\":2},"
         "\"need_weights\":\"per_head\",\"heads\":[%s]}",
         "heads[0]"},
        {API_OP_ATTENTION,
         "{\"query\":[[1,0],[0,1]],\"params\":{\"init\":\"identity\",\"num_heads\":1},"
         "\"need_weights\":\"mean\",\"weights_top_k\":%s}",
         "weights_top_k"},
        {API_OP_ATTENTION,
         "{\"query\":[[1,0],[0,1]],\"params\":{\"init\":\"identity\",\"num_heads\":1},"
         "\"key_lengths\":[%s]}",
         "key_lengths[0]"},
        {API_OP_ATTENTION,
         "{\"query\":{\"dtype\":\"float32\",\"shape\":[%s,1],\"data\":\"AACAPwAAAEA=\"},"
         "\"params\":{\"init\":\"identity\",\"num_heads\":1}}",
         "query.shape[0]"},
        {API_OP_SDPA, "{\"q\":[[1]],\"k\":[[1],[2]],\"v\":[[1],[2]],\"key_lengths\":[%s]}",
         "key_lengths[0]"},
        {API_OP_SDPA,
         "{\"q\":[[1]],\"k\":[[1],[2]],\"v\":[[1],[2]],\"need_weights\":true,\"weights_top_k\":%s}",
         "weights_top_k"},
    };
    static const char *same[] = {"2", "2.0", "2e0", "0.2e1", "200E-2"};
    static const char *refused[] = {"2.5", "1.0000000000000000001", "2e-1", "\"2\"", "true"};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        char *first = NULL;
        for (size_t k = 0; k < sizeof same / sizeof same[0]; k++) {
            char body[512];
            const char *num = same[k];
            if (!strcmp(f[i].field, "heads[0]")) /* heads run 0..1 here */
                num = k == 0 ? "1" : k == 1 ? "1.0" : k == 2 ? "1e0" : k == 3 ? "0.1e1" : "100E-2";
            snprintf(body, sizeof body, f[i].body, num);
            api_error e = {0};
            json_t *j = request_str(f[i].op, body, NULL, &e);
            CHECK(j != NULL, "%s = %s must be accepted: %s", f[i].field, num, e.message);
            char *text = j ? json_dumps(json_object_get(j, "output"), JSON_COMPACT) : NULL;
            if (text && !first)
                first = text;
            else if (text) {
                CHECK(!strcmp(first, text), "%s = %s answers otherwise than %s", f[i].field, num,
                      same[0]);
                free(text);
            }
            json_decref(j);
        }
        free(first);
        for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
            char body[512];
            snprintf(body, sizeof body, f[i].body, refused[k]);
            api_error e = {0};
            json_t *j = request_str(f[i].op, body, NULL, &e);
            CHECK(!j && e.status == 400 && !strcmp(e.field, f[i].field),
                  "%s = %s must be refused naming the field: %d %s %s", f[i].field, refused[k],
                  e.status, e.field, e.message);
            json_decref(j);
        }
    }
}
