/* codec_base64.c - base64 (api/codec/base64.c): the RFC's vectors, invalid texts, round trips,
 * every implementation this CPU runs against the portable one, and base64 tensors holding a value
 * that is not finite. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "codec.h"
#include "api_test.h"

/* ---- Base64 ------------------------------------------------------------------------------- */

void test_base64(void) {
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const enc[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                      "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        size_t n = strlen(plain[i]);
        char out[16] = {0};
        CHECK(api_base64_encoded_len(n) == strlen(enc[i]), "encoded_len(%zu)", n);
        api_base64_encode(out, (const uint8_t *)plain[i], n);
        CHECK(memcmp(out, enc[i], strlen(enc[i])) == 0, "encode(%s) = %.8s", plain[i], out);
        uint8_t dec[16];
        size_t got = 99;
        CHECK(api_base64_decode(dec, &got, enc[i], strlen(enc[i])) && got == n &&
                  memcmp(dec, plain[i], n) == 0,
              "decode(%s)", enc[i]);
        CHECK(api_base64_decoded_max(strlen(enc[i])) >= n, "decoded_max");
    }
    static const char *const bad[] = {"Zg=",     "Zg",        "Z===",       "Zg==Zg==", "Zm9v!A==",
                                      "Zh==",    "Zm9=",      "=Zg=",       "Zm=v",     "Zm9v\n",
                                      "Zm 9",    "Zm9-",      "Zm9_",       "====",     "Zg=a",
                                      "Zm9vZg=", "Zm9vYmFy=", "\xc3\xa9Zg="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t dec[16];
        size_t got = 0;
        CHECK(!api_base64_decode(dec, &got, bad[i], strlen(bad[i])), "decode(\"%s\") accepted",
              bad[i]);
    }
    /* Round trips of random bytes of every length up to 300. */
    for (size_t n = 0; n <= 300; n++) {
        uint8_t in[300], back[300];
        for (size_t i = 0; i < n; i++)
            in[i] = (uint8_t)rnd64();
        char e[404];
        api_base64_encode(e, in, n);
        size_t got = 0;
        CHECK(api_base64_decode(back, &got, e, api_base64_encoded_len(n)) && got == n &&
                  memcmp(in, back, n) == 0,
              "round trip of %zu bytes", n);
    }
}

/* Every base64 implementation this CPU runs against the portable one (the last): the same text
 * for random bytes of every length up to 700, the same bytes back, nothing written past either;
 * and, for lengths that are multiples of 37 and every length from 200, a character outside the
 * alphabet at every place, with the portable code's verdict. Inputs are heap blocks of exactly
 * their length (make test-asan catches a read past them); outputs have one guard byte more. */
void test_base64_impls(void) {
    size_t n_impl;
    const apip_base64_impl *im = apip_base64_impls(&n_impl);
    const apip_base64_impl *ref = &im[n_impl - 1];
    CHECK(strcmp(ref->name, "portable") == 0, "the last base64 implementation is %s", ref->name);
    if (n_impl == 1)
        printf("  base64: this CPU runs only the portable code (the AVX-512 VBMI path is not "
               "tested here)\n");
    static const char outside[] = {'=', '-', '_', ' ', '\n',       '\0',       '.',       '@',
                                   '[', '`', '{', 127, (char)0x80, (char)0xC3, (char)0xFF};
    enum { MAXN = 700 };
    for (size_t k = 0; k < n_impl; k++) {
        size_t bad = 0;
        for (size_t n = 0; n <= MAXN; n++) {
            size_t len = api_base64_encoded_len(n), room = api_base64_decoded_max(len);
            uint8_t *in = malloc(n ? n : 1), *back = malloc(room + 1), *want = malloc(room + 1);
            char *e = malloc(len + 1), *f = malloc(len + 1), *text = malloc(len ? len : 1);
            for (size_t i = 0; i < n; i++)
                in[i] = (uint8_t)rnd64();
            memset(e, '#', len + 1);
            memset(f, '#', len + 1);
            ref->encode(e, in, n);
            im[k].encode(f, in, n);
            bad += memcmp(e, f, len + 1) != 0 || e[len] != '#'; /* same text, guard intact */
            memcpy(text, e, len);
            size_t got = 0;
            memset(back, 0xA5, room + 1);
            bad += !im[k].decode(back, &got, text, len) || got != n || memcmp(back, in, n) != 0;
            for (size_t i = n; i <= room; i++)
                bad += back[i] != 0xA5; /* nothing past the decoded length */
            if (n % 37 == 0 || n >= 200) {
                for (size_t at = 0; at < len; at++) {
                    text[at] = outside[(n + at) % sizeof outside];
                    bool ok_ref = ref->decode(want, &got, text, len);
                    bool ok = im[k].decode(back, &got, text, len);
                    /* '=' in the last two places can be valid padding; elsewhere both refuse */
                    bad += ok != ok_ref || (ok && at + 2 < len);
                    text[at] = e[at];
                }
            }
            free(in);
            free(back);
            free(want);
            free(e);
            free(f);
            free(text);
        }
        CHECK(bad == 0, "base64 %s: %zu differences from the portable code", im[k].name, bad);
        printf("  base64 %s checked against portable\n", im[k].name);
    }
}

/* Base64 tensors' values: an infinity or a NaN at any place of tensors of many lengths (the
 * check works 16 values at a time, then the rest) is refused with its index; -inf is allowed
 * in attn_bias, +inf is not. */
void test_base64_finite(void) {
    static const uint32_t nonfinite[] = {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFFFFFFFu};
    api_limits lim = api_limits_default();
    size_t bad = 0, tried = 0;
    for (size_t n = 1; n <= 70; n += n < 40 ? 1 : 15) {
        float *x = malloc(n * n * sizeof *x);
        for (size_t p = 0; p < n; p++) {
            for (size_t i = 0; i < n; i++)
                x[i] = (float)i * 0.25f - 1.0f;
            uint32_t u = nonfinite[(n + p) % 4];
            memcpy(&x[p], &u, sizeof u);
            sb b = {0};
            size_t dims[2] = {n, 1};
            sb_add(&b, "{\"query\":");
            sb_tensor_b64(&b, x, dims, 2);
            sb_add(&b, ",\"params\":{\"init\":\"identity\",\"num_heads\":1}}");
            api_error e = {0};
            api_job *job = api_job_parse(API_OP_ATTENTION, b.s, b.n, NULL, &lim, &e);
            char want[64];
            snprintf(want, sizeof want, " at [%zu][0];", p);
            bad += job != NULL || strcmp(e.code, "non_finite") != 0 || !strstr(e.message, want);
            api_job_destroy(job);
            /* the same place in a bias: -inf goes, +inf does not */
            for (int sign = 0; sign < 2; sign++) {
                for (size_t i = 0; i < n * n; i++)
                    x[i] = 0.5f;
                u = sign ? 0xFF800000u : 0x7F800000u;
                memcpy(&x[p * n + (p + 1) % n], &u, sizeof u);
                b.n = 0;
                size_t one[2] = {n, 1}, nn[2] = {n, n};
                float *q = calloc(n, sizeof *q);
                sb_add(&b, "{\"query\":");
                sb_tensor_b64(&b, q, one, 2);
                sb_add(&b, ",\"attn_bias\":");
                sb_tensor_b64(&b, x, nn, 2);
                sb_add(&b, ",\"params\":{\"init\":\"identity\",\"num_heads\":1}}");
                free(q);
                e = (api_error){0};
                job = api_job_parse(API_OP_ATTENTION, b.s, b.n, NULL, &lim, &e);
                bad += sign ? (n > 1 && job == NULL) : job != NULL;
                api_job_destroy(job);
            }
            free(b.s);
            tried++;
        }
        free(x);
    }
    CHECK(bad == 0, "%zu wrong answers for base64 tensors with a non-finite value at %zu places",
          bad, tried);
}
