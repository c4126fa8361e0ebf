/* codec_buf.c - the error record and the byte buffer (api/base/error.c, api/codec/buf.c): the
 * first error wins, the error body as JSON, usage durations, and the buffer's growth and free. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "codec.h"
#include "api_test.h"

/* ---- Errors and buffers ------------------------------------------------------------------ */

void test_errors_and_buffers(void) {
    api_error e = {0};
    CHECK(api_fail(&e, 400, "invalid_field", "query", "first %d", 1) == -1, "api_fail -1");
    api_fail(&e, 500, "internal", NULL, "second");
    CHECK(e.status == 400 && strcmp(e.message, "first 1") == 0 && strcmp(e.field, "query") == 0,
          "first error wins");
    CHECK(api_fail(NULL, 400, "x", NULL, "no record") == -1, "NULL record");
    /* Durations in usage: 3 decimals, half up, and 0 for what is not a duration. Half up is
     * from the double's product by 1000, where "%.3f" rounds the exact value, ties to even:
     * 0.0625 is a tie (62.5 thousandths exactly; "%.3f" gives 0.062), and the double 1.0005 lies
     * just below one but its product is 1000.5 ("%.3f" gives 1.000). -0 is written without its
     * sign ("%.3f" gives -0.000), and the longest, 1e12, takes all of APIP_MS_DIGITS. */
    static const struct {
        double ms;
        const char *text;
    } durations[] = {{0.0, "0.000"},
                     {1.5, "1.500"},
                     {12.3456, "12.346"},
                     {0.0004, "0.000"},
                     {0.0005, "0.001"},
                     {0.0125, "0.013"},
                     {0.0625, "0.063"},
                     {1.0005, "1.001"},
                     {999.9996, "1000.000"},
                     {123456789.25, "123456789.250"},
                     {1e12, "1000000000000.000"},
                     {999999999999.9995, "1000000000000.000"},
                     {-0.0, "0.000"},
                     {-1.0, "0.000"},
                     {2e12, "0.000"},
                     {NAN, "0.000"}};
    for (size_t i = 0; i < sizeof durations / sizeof durations[0]; i++) {
        api_buf t = {0};
        apip_buf_put_ms(&t, durations[i].ms);
        CHECK(t.len == strlen(durations[i].text) && memcmp(t.data, durations[i].text, t.len) == 0 &&
                  t.len <= APIP_MS_DIGITS,
              "apip_buf_put_ms(%g) gave %.*s, not %s", durations[i].ms, (int)t.len,
              t.data ? t.data : "", durations[i].text);
        api_buf_free(&t);
    }
    api_buf b = {0};
    api_error w = {.status = 400, .code = "invalid_field", .field = "a\"b"};
    snprintf(w.message, sizeof w.message,
             "ctl \x01 tab\t nl\n bad \xff utf8 \xc3\xa9 quote \" bs \\");
    api_error_body(&w, &b);
    json_error_t je;
    json_t *j = json_loadb(b.data, b.len, 0, &je);
    CHECK(j != NULL, "error body is JSON: %s", je.text);
    json_t *er = json_object_get(j, "error");
    CHECK(
        er && strcmp(json_string_value(json_object_get(er, "field")), "a\"b") == 0 &&
            strcmp(json_string_value(json_object_get(er, "code")), "invalid_field") == 0 &&
            strstr(json_string_value(json_object_get(er, "message")), "\xef\xbf\xbd utf8 \xc3\xa9"),
        "error body fields");
    json_decref(j);
    api_buf_reset(&b);
    api_error nf = {.status = 404, .code = "unknown_model", .message = "m"};
    api_error_body(&nf, &b);
    const char *want = "{\"error\":{\"code\":\"unknown_model\",\"message\":\"m\",\"field\":null}}";
    CHECK(b.len == strlen(want) && memcmp(b.data, want, b.len) == 0, "null field: %.*s", (int)b.len,
          b.data);
    for (int i = 0; i < 10000; i++)
        api_buf_append(&b, "0123456789", 10);
    CHECK(b.len == strlen(want) + 100000 && !b.failed, "growth");
    api_buf_free(&b);
    CHECK(b.data == NULL && b.len == 0, "free");
    api_buf_free(NULL);
}
