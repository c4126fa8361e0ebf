/* fuzz_base64.c - libFuzzer target: api/'s base64 codec (the wire form of binary tensors).
 *
 * Each input is used twice:
 *   - as text to decode into a buffer of exactly api_base64_decoded_max bytes, pre-filled with
 *     a canary: nothing may be written past the decoded length, the decoded length fits the
 *     buffer, and text that decodes must be the one canonical encoding of its bytes
 *     (re-encoding gives the same text back);
 *   - as bytes to encode: the text has api_base64_encoded_len characters, all of the alphabet
 *     or '=', and decodes back to the same bytes. */
#include <string.h>

#include "api.h"
#include "fuzz.h"

#define CANARY 0xA5

static void decode_text(const uint8_t *data, size_t size) {
    char *text = fuzz_copy(data, size);
    size_t max = api_base64_decoded_max(size);
    uint8_t *out = malloc(max ? max : 1);
    FUZZ_CHECK(out != NULL, "out of memory");
    memset(out, CANARY, max);
    size_t n = (size_t)-1;
    if (api_base64_decode(out, &n, text, size)) {
        FUZZ_CHECK(n <= max, "decoded %zu bytes, more than the %zu promised", n, max);
        for (size_t i = n; i < max; i++)
            FUZZ_CHECK(out[i] == CANARY, "byte %zu written past the decoded length %zu", i, n);
        size_t elen = api_base64_encoded_len(n);
        FUZZ_CHECK(elen == size, "%zu characters decode to %zu bytes, which encode to %zu", size, n,
                   elen);
        char *again = malloc(elen ? elen : 1);
        FUZZ_CHECK(again != NULL, "out of memory");
        api_base64_encode(again, out, n);
        FUZZ_CHECK(memcmp(again, text, size) == 0, "accepted a non-canonical encoding");
        free(again);
    }
    free(out);
    free(text);
}

static void encode_bytes(const uint8_t *data, size_t size) {
    size_t elen = api_base64_encoded_len(size);
    char *text = malloc(elen ? elen : 1);
    FUZZ_CHECK(text != NULL, "out of memory");
    api_base64_encode(text, data, size);
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=";
    for (size_t i = 0; i < elen; i++)
        FUZZ_CHECK(text[i] && strchr(alphabet, text[i]), "encoded a byte 0x%02x outside base64",
                   (unsigned char)text[i]);
    size_t max = api_base64_decoded_max(elen);
    uint8_t *back = malloc(max ? max : 1);
    FUZZ_CHECK(back != NULL, "out of memory");
    size_t n = 0;
    FUZZ_CHECK(api_base64_decode(back, &n, text, elen), "its own encoding of %zu bytes refused",
               size);
    FUZZ_CHECK(n == size && memcmp(back, data, size) == 0, "round trip of %zu bytes gave %zu", size,
               n);
    free(back);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    decode_text(data, size);
    encode_bytes(data, size);
    return 0;
}
