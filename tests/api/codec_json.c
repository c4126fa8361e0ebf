/* codec_json.c - the JSON reader (api/codec/json.c): valid and invalid documents, prefixes,
 * depth, verdicts against jansson on mutated documents and numbers, string decoding, and numbers
 * against strtod. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "codec.h"
#include "api_test.h"

/* ---- JSON reader -------------------------------------------------------------------------- */

static bool json_ok(const char *s, size_t n) {
    apip_json_root root;
    api_error e = {0};
    return apip_json_check(s, n, "the text", &root, &e) == 0;
}

/* The non-JSON literals some encoders write for non-finite floats (Python's json.dumps writes
 * -Infinity) get a message that says what to send instead; null and numbers are untouched. */
static void test_json_nonfinite(void) {
    static const char *const words[] = {"-Infinity", "Infinity", "NaN", "+Infinity",
                                        "-inf",      "inf",      "nan", "-INF"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        char doc[64];
        snprintf(doc, sizeof doc, "{\"q\": [[1, %s]]}", words[i]);
        apip_json_root root;
        api_error e = {0};
        int rc = apip_json_check(doc, strlen(doc), "the body", &root, &e);
        CHECK(rc != 0 && !strcmp(e.code, "invalid_json") && strstr(e.message, "\"-inf\"") &&
                  strstr(e.message, "NaN and Infinity"),
              "%s: %s", doc, e.message);
    }
    static const char *const fine[] = {"{\"a\": null}", "{\"a\": [-1, -0.5, 1e9]}",
                                       "{\"a\": \"-inf\"}"};
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++)
        CHECK(json_ok(fine[i], strlen(fine[i])), "rejected valid JSON %s", fine[i]);
}

void test_json(void) {
    test_json_nonfinite();
    static const char *const good[] = {"{}",
                                       " {\"a\":1} ",
                                       "{\"a\":[1,-2.5e+3,0,0.0,1E-2,-0]}",
                                       "{\"\\u00e9\\ud83d\\ude00\":\"\"}",
                                       "{\"a\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}",
                                       "{\"a\":{\"b\":[true,false,null]}}",
                                       "{\"a\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}",
                                       "{\r\n\t\"a\" : [ ] , \"b\" : { } }"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK(json_ok(good[i], strlen(good[i])), "rejected valid JSON %s", good[i]);
    static const char *const badj[] = {"",
                                       "{",
                                       "}",
                                       "[]",
                                       "{\"a\"}",
                                       "{\"a\":}",
                                       "{a:1}",
                                       "{\"a\":1,}",
                                       "{\"a\":01}",
                                       "{\"a\":1.}",
                                       "{\"a\":.5}",
                                       "{\"a\":-}",
                                       "{\"a\":1e}",
                                       "{\"a\":+1}",
                                       "{\"a\":tru}",
                                       "{\"a\":\"\\u12\"}",
                                       "{\"a\":\"\\ud800x\"}",
                                       "{\"a\":\"\\udc00\"}",
                                       "{\"a\":\"\xed\xa0\x80\"}",
                                       "{\"a\":\"\xf4\x90\x80\x80\"}",
                                       "{\"a\":\"\xe0\x80\xaf\"}",
                                       "{\"a\":\"\x80\"}",
                                       "{\"a\":\"\xc3\"}",
                                       "{\"a\":1}}",
                                       "{\"a\":[1 2]}",
                                       "{\"a\":\"b\" \"c\":1}",
                                       "{\"a\":0x10}",
                                       "{\"a\":\"\t\"}"};
    for (size_t i = 0; i < sizeof badj / sizeof badj[0]; i++)
        CHECK(!json_ok(badj[i], strlen(badj[i])), "accepted invalid JSON %s", badj[i]);
    /* Never reads past the given length: the same texts cut short must all fail. */
    const char *full = "{\"a\":[1,2,{\"b\":\"c\\u0041\"}],\"d\":-1.5e3}";
    for (size_t n = 0; n < strlen(full); n++) {
        char *cut = malloc(n ? n : 1);
        memcpy(cut, full, n);
        CHECK(!json_ok(cut, n), "accepted a prefix of %zu bytes", n);
        free(cut);
    }
    /* Depth: 64 levels pass, 65 fail, 100000 fail cleanly. */
    for (size_t depth = 63; depth <= 100000; depth = depth == 65 ? 100000 : depth + 1) {
        size_t n = 2 * depth + 8;
        char *s = malloc(n);
        size_t k = 0;
        k += (size_t)sprintf(s, "{\"a\":");
        for (size_t i = 1; i < depth; i++)
            s[k++] = '[';
        for (size_t i = 1; i < depth; i++)
            s[k++] = ']';
        s[k++] = '}';
        CHECK(json_ok(s, k) == (depth <= 64), "depth %zu", depth);
        free(s);
    }
    /* Differential test against jansson on mutated documents. */
    static const char *const seeds[] = {
        "{\"query\":[[1,0.5,-2e-3],[3,4,5]],\"params\":{\"init\":\"identity\",\"num_heads\":1}}",
        "{\"a\":\"\\u00e9\\n\",\"b\":[true,false,null,{}],\"c\":{\"d\":[[]]}}",
        "{\"q\":{\"dtype\":\"float32\",\"shape\":[1,2],\"data\":\"AACAPwAAAEA=\"}}",
        "{\"a\":[[1,2,3],[4,\"]\",6],[[7]],[8,{\"b\":[9]}],[\"[\"]],\"c\":[[1.5,-2e3]]}"};
    const char alphabet[] = "{}[]\",:\\/0123456789.eE+-tfnul aA\x80\xc3\xa9\xed\t\n";
    size_t mismatches = 0;
    for (int it = 0; it < 200000; it++) {
        const char *seed = seeds[it % 4];
        char s[256];
        size_t n = strlen(seed);
        memcpy(s, seed, n);
        int edits = 1 + (int)(rnd64() % 3);
        for (int k = 0; k < edits; k++) {
            size_t at = (size_t)(rnd64() % (n + 1));
            int op = (int)(rnd64() % 3);
            char c = alphabet[rnd64() % (sizeof alphabet - 1)];
            if (op == 0 && at < n)
                s[at] = c;
            else if (op == 1 && n < sizeof s - 1) {
                memmove(s + at + 1, s + at, n - at);
                s[at] = c;
                n++;
            } else if (at < n) {
                memmove(s + at, s + at + 1, n - at - 1);
                n--;
            }
        }
        json_error_t je;
        json_t *j = json_loadb(s, n, JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, &je);
        bool theirs = j && json_is_object(j), mine = json_ok(s, n);
        json_decref(j);
        if (mine) { /* navigation: the object ends where the text does, but for whitespace */
            const char *start = apip_jv_ws(s), *end = apip_jv_end(start), *last = s + n;
            while (last > s && strchr(" \t\r\n", last[-1]))
                last--;
            CHECK(end == last, "apip_jv_end stops at byte %td of %.*s", end - s, (int)n, s);
        }
        if (!j && strstr(je.text, "overflow"))
            continue; /* jansson refuses numbers beyond double; for us that is non_finite later */
        if (mine != theirs && mismatches++ < 5)
            CHECK(false, "JSON verdict differs from jansson (ours %d): %.*s (%s)", mine, (int)n, s,
                  je.text);
    }
    CHECK(mismatches == 0, "%zu JSON verdicts differ from jansson", mismatches);

    /* Numbers of up to 18 characters made of number characters, then a delimiter and enough
     * text after them for the 16-byte check (and without it, at the end), against jansson. */
    const char numchars[] = "0123456789012345678901234567890123456789.eE+--";
    mismatches = 0;
    for (int it = 0; it < 300000; it++) {
        char tok[24], s[128];
        size_t tn = 1 + (size_t)(rnd64() % 18);
        for (size_t k = 0; k < tn; k++)
            tok[k] = numchars[rnd64() % (sizeof numchars - 1)];
        tok[tn] = '\0';
        const char *delim = it % 3 == 0 ? "]" : it % 3 == 1 ? ",1]" : " ]";
        int n = it % 5
                    ? snprintf(s, sizeof s, "{\"a\":[%s%s,\"b\":\"0123456789abcdef\"}", tok, delim)
                    : snprintf(s, sizeof s, "{\"a\":%s}", tok);
        json_error_t je;
        json_t *j = json_loadb(s, (size_t)n, JSON_DECODE_INT_AS_REAL, &je);
        bool theirs = j != NULL, mine = json_ok(s, (size_t)n);
        json_decref(j);
        if (!j && strstr(je.text, "overflow"))
            continue;
        if (mine != theirs && mismatches++ < 5)
            CHECK(false, "number verdict differs from jansson (ours %d): %s (%s)", mine, s,
                  je.text);
    }
    CHECK(mismatches == 0, "%zu number verdicts differ from jansson", mismatches);

    /* Strings: decoding, comparison. */
    const char *doc = "{\"k\\u0065y\":\"a\\u00e9\\ud83d\\ude00\\n\\/\"}";
    apip_json_root root;
    api_error e = {0};
    CHECK(apip_json_check(doc, strlen(doc), "doc", &root, &e) == 0 && root.n == 1, "doc");
    CHECK(apip_jv_streq(root.m[0].key, "key"), "escaped key compares equal");
    CHECK(!apip_jv_streq(root.m[0].key, "ke"), "prefix is not equal");
    char out[32];
    size_t n = apip_jv_decode(apip_jv_string(root.m[0].val), out, sizeof out);
    CHECK(n == 9 && strcmp(out, "a\xc3\xa9\xf0\x9f\x98\x80\n/") == 0, "decode gave %zu %s", n, out);
    n = apip_jv_decode(apip_jv_string(root.m[0].val), out, 4); /* cut at a character boundary */
    CHECK(n == 9 && strcmp(out, "a\xc3\xa9") == 0, "cut decode gave %s", out);

    /* Numbers: the fast path agrees with strtod on random decimals. */
    size_t nbad = 0;
    for (int i = 0; i < 300000; i++) {
        char t[64];
        int digits = 1 + (int)(rnd64() % 20), ex = (int)(rnd64() % 80) - 40;
        int k = 0;
        if (rnd64() & 1)
            t[k++] = '-';
        t[k++] = (char)('1' + rnd64() % 9);
        if (digits > 1) {
            t[k++] = '.';
            for (int d = 1; d < digits; d++)
                t[k++] = (char)('0' + rnd64() % 10);
        }
        k += sprintf(t + k, "e%d,", ex);
        const char *end = NULL;
        double mine = apip_jv_number(t, &end), ref = strtod(t, NULL);
        if (memcmp(&mine, &ref, sizeof mine) != 0 || *end != ',')
            nbad += 1;
        if (nbad && nbad < 3 && memcmp(&mine, &ref, sizeof mine) != 0)
            CHECK(false, "apip_jv_number(%s) = %.17g, strtod = %.17g", t, mine, ref);
    }
    CHECK(nbad == 0, "%zu numbers parsed differently from strtod", nbad);
    const char *ints = "18446744073709551615,18446744073709551616,0,007,1.0,";
    uint64_t u = 0;
    CHECK(apip_jv_u64(ints, &u) && u == UINT64_MAX, "u64 max");
    CHECK(!apip_jv_u64(ints + 21, &u), "u64 overflow");
    CHECK(apip_jv_u64(ints + 42, &u) && u == 0, "u64 zero");
    CHECK(!apip_jv_u64(ints + 44, &u), "leading zero");
    CHECK(!apip_jv_u64(ints + 48, &u), "fraction");
}
