/* base64.c - standard base64 (RFC 4648, alphabet A-Z a-z 0-9 + /, '=' padding), the wire form
 * of binary tensors. Decoding checks every character, the padding and that the bits a padded
 * group leaves unused are zero (so every byte string has exactly one encoding).
 *
 * Two implementations, chosen at run time (apip_base64_impls):
 *   - portable: encoding 6 bytes to 8 characters at a time through a table of character pairs;
 *     decoding 4 characters to 3 bytes through four tables of shifted values;
 *   - vbmi (AVX-512 VBMI): 48 bytes to 64 characters, and back, per step. Encoding places each
 *     3-byte group in a 32-bit lane, cuts the four 6-bit fields out with one multishift and looks
 *     them up in the alphabet with one byte permute. Decoding looks all 64 characters up in a
 *     128-entry table by their low 7 bits (two-register byte permute; a character outside the
 *     alphabet gets 0xFF), flags any lane where the value or the character itself (above 127)
 *     has its high bit set, packs each lane's four 6-bit values with two multiply-adds and
 *     gathers the 48 bytes with a byte permute. The portable code does what is left: the
 *     tail, and the last group with its padding.
 * Both are measured side by side in bench/RESULTS.md (run of 2026-11-30 19:40 UTC). */
#include <pthread.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#define B64_VBMI 1 /* AVX-512 VBMI where the CPU has it (chosen at run time) */
#include <immintrin.h>
#endif

#include "codec.h"

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The 6-bit value of a base64 character, or 0xFF. */
#define X 0xFF
static const uint8_t b64_value[256] = {
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  62, X,  X,  X,  63,
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, X,  X,  X,  X,  X,  X,  X,  0,  1,  2,  3,  4,  5,  6,
    7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, X,  X,  X,  X,  X,
    X,  26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48,
    49, 50, 51, X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
    X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,  X,
};
#undef X

size_t api_base64_encoded_len(size_t n) {
    return (n + 2) / 3 * 4;
}

/* Pairs of characters for each 12-bit value, first character in the low byte; built once. */
static uint16_t b64_pairs[4096];
static pthread_once_t b64_pairs_once = PTHREAD_ONCE_INIT;

static void b64_pairs_init(void) {
    for (unsigned i = 0; i < 4096; i++)
        b64_pairs[i] = (uint16_t)((unsigned char)b64_alphabet[i >> 6] |
                                  (unsigned)(unsigned char)b64_alphabet[i & 63] << 8);
}

static void encode_portable(char *out, const uint8_t *in, size_t n) {
    const char *a = b64_alphabet;
    size_t i = 0;
    pthread_once(&b64_pairs_once, b64_pairs_init);
    /* Six input bytes, read as one big-endian 48-bit number, to eight characters: four
     * lookups of character pairs and one 8-byte store. */
    for (; i + 6 <= n; i += 6, out += 8) {
        uint64_t v = (uint64_t)in[i] << 40 | (uint64_t)in[i + 1] << 32 | (uint64_t)in[i + 2] << 24 |
                     (uint64_t)in[i + 3] << 16 | (uint64_t)in[i + 4] << 8 | (uint64_t)in[i + 5];
        uint64_t w =
            (uint64_t)b64_pairs[(v >> 36) & 4095] | (uint64_t)b64_pairs[(v >> 24) & 4095] << 16 |
            (uint64_t)b64_pairs[(v >> 12) & 4095] << 32 | (uint64_t)b64_pairs[v & 4095] << 48;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(out, &w, sizeof w);
#else
        for (int k = 0; k < 8; k++)
            out[k] = (char)(w >> (8 * k));
#endif
    }
    for (; i + 3 <= n; i += 3, out += 4) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[0] = a[(v >> 18) & 63];
        out[1] = a[(v >> 12) & 63];
        out[2] = a[(v >> 6) & 63];
        out[3] = a[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[0] = a[(v >> 18) & 63];
        out[1] = a[(v >> 12) & 63];
        out[2] = '=';
        out[3] = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        out[0] = a[(v >> 18) & 63];
        out[1] = a[(v >> 12) & 63];
        out[2] = a[(v >> 6) & 63];
        out[3] = '=';
    }
}

size_t api_base64_decoded_max(size_t in_len) {
    return in_len / 4 * 3;
}

/* Decoding tables: for a quad of characters a b c d, d0[a] | d1[b] | d2[c] | d3[d] is the
 * little-endian word whose bytes 0..2 are the three decoded bytes in order; a character
 * outside the alphabet sets bit 24. */
#define B64_BAD 0x01000000u
static const uint32_t d0[256] = {
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x000000f8, 0x01000000, 0x01000000, 0x01000000, 0x000000fc,
    0x000000d0, 0x000000d4, 0x000000d8, 0x000000dc, 0x000000e0, 0x000000e4, 0x000000e8, 0x000000ec,
    0x000000f0, 0x000000f4, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x00000000, 0x00000004, 0x00000008, 0x0000000c, 0x00000010, 0x00000014, 0x00000018,
    0x0000001c, 0x00000020, 0x00000024, 0x00000028, 0x0000002c, 0x00000030, 0x00000034, 0x00000038,
    0x0000003c, 0x00000040, 0x00000044, 0x00000048, 0x0000004c, 0x00000050, 0x00000054, 0x00000058,
    0x0000005c, 0x00000060, 0x00000064, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x00000068, 0x0000006c, 0x00000070, 0x00000074, 0x00000078, 0x0000007c, 0x00000080,
    0x00000084, 0x00000088, 0x0000008c, 0x00000090, 0x00000094, 0x00000098, 0x0000009c, 0x000000a0,
    0x000000a4, 0x000000a8, 0x000000ac, 0x000000b0, 0x000000b4, 0x000000b8, 0x000000bc, 0x000000c0,
    0x000000c4, 0x000000c8, 0x000000cc, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
};
static const uint32_t d1[256] = {
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x0000e003, 0x01000000, 0x01000000, 0x01000000, 0x0000f003,
    0x00004003, 0x00005003, 0x00006003, 0x00007003, 0x00008003, 0x00009003, 0x0000a003, 0x0000b003,
    0x0000c003, 0x0000d003, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x00000000, 0x00001000, 0x00002000, 0x00003000, 0x00004000, 0x00005000, 0x00006000,
    0x00007000, 0x00008000, 0x00009000, 0x0000a000, 0x0000b000, 0x0000c000, 0x0000d000, 0x0000e000,
    0x0000f000, 0x00000001, 0x00001001, 0x00002001, 0x00003001, 0x00004001, 0x00005001, 0x00006001,
    0x00007001, 0x00008001, 0x00009001, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x0000a001, 0x0000b001, 0x0000c001, 0x0000d001, 0x0000e001, 0x0000f001, 0x00000002,
    0x00001002, 0x00002002, 0x00003002, 0x00004002, 0x00005002, 0x00006002, 0x00007002, 0x00008002,
    0x00009002, 0x0000a002, 0x0000b002, 0x0000c002, 0x0000d002, 0x0000e002, 0x0000f002, 0x00000003,
    0x00001003, 0x00002003, 0x00003003, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
};
static const uint32_t d2[256] = {
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x00800f00, 0x01000000, 0x01000000, 0x01000000, 0x00c00f00,
    0x00000d00, 0x00400d00, 0x00800d00, 0x00c00d00, 0x00000e00, 0x00400e00, 0x00800e00, 0x00c00e00,
    0x00000f00, 0x00400f00, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x00000000, 0x00400000, 0x00800000, 0x00c00000, 0x00000100, 0x00400100, 0x00800100,
    0x00c00100, 0x00000200, 0x00400200, 0x00800200, 0x00c00200, 0x00000300, 0x00400300, 0x00800300,
    0x00c00300, 0x00000400, 0x00400400, 0x00800400, 0x00c00400, 0x00000500, 0x00400500, 0x00800500,
    0x00c00500, 0x00000600, 0x00400600, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x00800600, 0x00c00600, 0x00000700, 0x00400700, 0x00800700, 0x00c00700, 0x00000800,
    0x00400800, 0x00800800, 0x00c00800, 0x00000900, 0x00400900, 0x00800900, 0x00c00900, 0x00000a00,
    0x00400a00, 0x00800a00, 0x00c00a00, 0x00000b00, 0x00400b00, 0x00800b00, 0x00c00b00, 0x00000c00,
    0x00400c00, 0x00800c00, 0x00c00c00, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
};
static const uint32_t d3[256] = {
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x003e0000, 0x01000000, 0x01000000, 0x01000000, 0x003f0000,
    0x00340000, 0x00350000, 0x00360000, 0x00370000, 0x00380000, 0x00390000, 0x003a0000, 0x003b0000,
    0x003c0000, 0x003d0000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x00000000, 0x00010000, 0x00020000, 0x00030000, 0x00040000, 0x00050000, 0x00060000,
    0x00070000, 0x00080000, 0x00090000, 0x000a0000, 0x000b0000, 0x000c0000, 0x000d0000, 0x000e0000,
    0x000f0000, 0x00100000, 0x00110000, 0x00120000, 0x00130000, 0x00140000, 0x00150000, 0x00160000,
    0x00170000, 0x00180000, 0x00190000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x001a0000, 0x001b0000, 0x001c0000, 0x001d0000, 0x001e0000, 0x001f0000, 0x00200000,
    0x00210000, 0x00220000, 0x00230000, 0x00240000, 0x00250000, 0x00260000, 0x00270000, 0x00280000,
    0x00290000, 0x002a0000, 0x002b0000, 0x002c0000, 0x002d0000, 0x002e0000, 0x002f0000, 0x00300000,
    0x00310000, 0x00320000, 0x00330000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
    0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000, 0x01000000,
};

static bool decode_portable(uint8_t *out, size_t *out_len, const char *in, size_t in_len) {
    const unsigned char *s = (const unsigned char *)in;
    const uint8_t *t = b64_value;
    if (out_len)
        *out_len = 0;
    if (in_len % 4 != 0)
        return false;
    if (in_len == 0)
        return true;
    size_t full = in_len / 4 - 1, o = 0; /* groups before the last, which may be padded */
    uint32_t bad = 0;
    size_t g = 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* Each group stores a 4-byte word, one byte past its 3; the next group (or the last one,
     * decoded exactly below) overwrites it, so nothing lands past the decoded length. */
    for (; g + 2 <= full; g += 2, s += 8, o += 6) {
        uint32_t x = d0[s[0]] | d1[s[1]] | d2[s[2]] | d3[s[3]];
        uint32_t y = d0[s[4]] | d1[s[5]] | d2[s[6]] | d3[s[7]];
        bad |= x | y;
        memcpy(out + o, &x, 4);
        memcpy(out + o + 3, &y, 4);
    }
    if (bad & B64_BAD)
        return false;
#endif
    for (; g < full; g++, s += 4, o += 3) {
        uint32_t a = t[s[0]], b = t[s[1]], c = t[s[2]], d = t[s[3]];
        if ((a | b | c | d) & 0x80)
            return false;
        uint32_t v = a << 18 | b << 12 | c << 6 | d;
        out[o] = (uint8_t)(v >> 16);
        out[o + 1] = (uint8_t)(v >> 8);
        out[o + 2] = (uint8_t)v;
    }
    uint32_t a = t[s[0]], b = t[s[1]];
    if ((a | b) & 0x80)
        return false;
    if (s[2] == '=') {
        if (s[3] != '=' || (b & 15))
            return false;
        out[o++] = (uint8_t)(a << 2 | b >> 4);
    } else if (s[3] == '=') {
        uint32_t c = t[s[2]];
        if ((c & 0x80) || (c & 3))
            return false;
        uint32_t v = a << 18 | b << 12 | c << 6;
        out[o++] = (uint8_t)(v >> 16);
        out[o++] = (uint8_t)(v >> 8);
    } else {
        uint32_t c = t[s[2]], d = t[s[3]];
        if ((c | d) & 0x80)
            return false;
        uint32_t v = a << 18 | b << 12 | c << 6 | d;
        out[o++] = (uint8_t)(v >> 16);
        out[o++] = (uint8_t)(v >> 8);
        out[o++] = (uint8_t)v;
    }
    if (out_len)
        *out_len = o;
    return true;
}

/* ---- AVX-512 VBMI ------------------------------------------------------------------------- */

#ifdef B64_VBMI
#define VBMI_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi")))

/* The byte permutes' indices. enc_spread: 48 bytes to 16 lanes of [b1 b0 b2 b1] (lane g holds
 * bytes 3g+1, 3g, 3g+2, 3g+1). dec_gather: 16 lanes' 24-bit values to 48 bytes, most significant
 * first (output byte 3g+r is byte 2-r of lane g); the last 16 entries are unused. */
static const uint8_t enc_spread[64] = {
    1,  0,  2,  1,  4,  3,  5,  4,  7,  6,  8,  7,  10, 9,  11, 10, 13, 12, 14, 13, 16, 15,
    17, 16, 19, 18, 20, 19, 22, 21, 23, 22, 25, 24, 26, 25, 28, 27, 29, 28, 31, 30, 32, 31,
    34, 33, 35, 34, 37, 36, 38, 37, 40, 39, 41, 40, 43, 42, 44, 43, 46, 45, 47, 46,
};
static const uint8_t dec_gather[64] = {
    2,  1,  0,  6,  5,  4,  10, 9,  8,  14, 13, 12, 18, 17, 16, 22, 21, 20, 26, 25, 24, 30,
    29, 28, 34, 33, 32, 38, 37, 36, 42, 41, 40, 46, 45, 44, 50, 49, 48, 54, 53, 52, 58, 57,
    56, 62, 61, 60, 0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
};

/* Encodes n bytes, 48 at a time, then the rest (a whole number of 3-byte groups went before it,
 * so the portable code finishes it as if from the start). */
VBMI_TARGET static void encode_vbmi(char *out, const uint8_t *in, size_t n) {
    const __m512i spread = _mm512_loadu_si512(enc_spread);
    const __m512i alphabet = _mm512_loadu_si512(b64_alphabet);
    /* In a lane holding bytes b1 b0 b2 b1 (bits 0-7, 8-15, 16-23, 24-31), the four characters'
     * values start at bits 10, 4, 22 and 16; plus 32 for the second lane of each 64 bits. */
    const __m512i shifts = _mm512_set1_epi64(0x3036242a1016040aLL);
    size_t i = 0;
    for (; i + 48 <= n; i += 48, out += 64) {
        __m512i x = _mm512_maskz_loadu_epi8(0x0000FFFFFFFFFFFFULL, in + i);
        x = _mm512_permutexvar_epi8(spread, x);
        x = _mm512_multishift_epi64_epi8(shifts, x);
        _mm512_storeu_si512(out, _mm512_permutexvar_epi8(x, alphabet));
    }
    encode_portable(out, in + i, n - i);
}

/* Decodes 64 characters at a time while more than the last group follows, then the rest. */
VBMI_TARGET static bool decode_vbmi(uint8_t *out, size_t *out_len, const char *in, size_t in_len) {
    if (out_len)
        *out_len = 0;
    if (in_len % 4 != 0)
        return false;
    const __m512i lo = _mm512_loadu_si512(b64_value), hi = _mm512_loadu_si512(b64_value + 64);
    const __m512i gather = _mm512_loadu_si512(dec_gather);
    const __m512i w16 = _mm512_set1_epi32(0x01400140), w32 = _mm512_set1_epi32(0x00011000);
    __mmask64 bad = 0;
    size_t i = 0, o = 0;
    for (; i + 64 < in_len; i += 64, o += 48) {
        __m512i c = _mm512_loadu_si512(in + i);
        __m512i v = _mm512_permutex2var_epi8(lo, c, hi);
        /* the table flags a character outside the alphabet; its own high bit one above 127 */
        bad |= _mm512_movepi8_mask(_mm512_or_si512(c, v));
        v = _mm512_madd_epi16(_mm512_maddubs_epi16(v, w16), w32); /* a<<18 | b<<12 | c<<6 | d */
        _mm512_mask_storeu_epi8(out + o, 0x0000FFFFFFFFFFFFULL, _mm512_permutexvar_epi8(gather, v));
    }
    if (bad)
        return false;
    size_t rest = 0;
    if (!decode_portable(out + o, &rest, in + i, in_len - i))
        return false;
    if (out_len)
        *out_len = o + rest;
    return true;
}
#endif

/* ---- Choosing ----------------------------------------------------------------------------- */

static const apip_base64_impl impls[] = {
#ifdef B64_VBMI
    {"vbmi", encode_vbmi, decode_vbmi},
#endif
    {"portable", encode_portable, decode_portable},
};

/* Index of the best of impls this CPU runs. */
static size_t best_impl(void) {
#ifdef B64_VBMI
    if (!apip_cpu_has(APIP_CPU_AVX512F | APIP_CPU_AVX512BW | APIP_CPU_AVX512VBMI))
        return 1;
#endif
    return 0;
}

const apip_base64_impl *apip_base64_impls(size_t *n) {
    size_t b = best_impl();
    *n = sizeof impls / sizeof impls[0] - b;
    return impls + b;
}

void api_base64_encode(char *out, const uint8_t *in, size_t n) {
    impls[best_impl()].encode(out, in, n);
}

bool api_base64_decode(uint8_t *out, size_t *out_len, const char *in, size_t in_len) {
    return impls[best_impl()].decode(out, out_len, in, in_len);
}
