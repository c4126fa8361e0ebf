/* siphash.c - SipHash-2-4 with its 128-bit output (Jean-Philippe Aumasson and Daniel J.
 * Bernstein, "SipHash: a fast short-input PRF", 2012, and the reference's 128-bit variant):
 * the keyed hash that names a v2 sequence's session, so that a sequence id a client chooses
 * maps to a session id no one can guess without the store's key. */
#include <string.h>

#include "session.h"

static uint64_t rotl(uint64_t x, int b) {
    return (x << b) | (x >> (64 - b));
}

static uint64_t load_le(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void store_le(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* One SipRound on the state v[0..3]. */
static void sip_round(uint64_t v[4]) {
    v[0] += v[1];
    v[1] = rotl(v[1], 13);
    v[1] ^= v[0];
    v[0] = rotl(v[0], 32);
    v[2] += v[3];
    v[3] = rotl(v[3], 16);
    v[3] ^= v[2];
    v[0] += v[3];
    v[3] = rotl(v[3], 21);
    v[3] ^= v[0];
    v[2] += v[1];
    v[1] = rotl(v[1], 17);
    v[1] ^= v[2];
    v[2] = rotl(v[2], 32);
}

void apip_siphash128(const uint8_t key[16], const void *msg, size_t n, uint8_t out[16]) {
    const uint8_t *m = msg;
    const uint64_t k0 = load_le(key), k1 = load_le(key + 8);
    uint64_t v[4] = {k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL,
                     k0 ^ 0x6c7967656e657261ULL, k1 ^ 0x7465646279746573ULL};
    v[1] ^= 0xee; /* the 128-bit output */
    size_t whole = n - n % 8;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t w = load_le(m + i);
        v[3] ^= w;
        sip_round(v), sip_round(v);
        v[0] ^= w;
    }
    uint8_t last[8] = {0};
    memcpy(last, m + whole, n % 8);
    uint64_t b = (uint64_t)n << 56 | load_le(last);
    v[3] ^= b;
    sip_round(v), sip_round(v);
    v[0] ^= b;
    v[2] ^= 0xee;
    for (int i = 0; i < 4; i++)
        sip_round(v);
    store_le(out, v[0] ^ v[1] ^ v[2] ^ v[3]);
    v[1] ^= 0xdd;
    for (int i = 0; i < 4; i++)
        sip_round(v);
    store_le(out + 8, v[0] ^ v[1] ^ v[2] ^ v[3]);
}
