/* fmt.c - writes float32 values as the shortest JSON decimal that reads back exactly.
 *
 * The contract (api.h): the output, parsed as a double and rounded to float32 as JSON parsers
 * do, gives back f, and it has the fewest significant digits (at most 9) that do so; among
 * decimals of that length it is the nearest to f that reads back (ties to an even last digit).
 *
 * How (the idea of Schubfach and Ryu, worked out here for float32 in exact integers): f = c 2^q
 * with c < 2^24. K is chosen so that the gap between f and its neighbours, scaled by 10^K, is
 * g = 2^q 10^K in [1, 10); then y = f 10^K has 7 to 9 digits before its point, and the
 * decimals (times 10^K) that read back as f form an interval I around y: g wide, but 3/4 g at
 * a power of two, where the gap below is half as wide (K is one more there when 3/4 g < 1).
 * I holds at most one multiple of 10. If it holds one, that is the shortest decimal (its
 * trailing zeros dropped); otherwise the integers floor(y) and floor(y) + 1 have the fewest
 * digits, and the nearer of those in I is taken (ties to even). When y < 10 (tiny denormals)
 * every candidate has one digit and the nearer integer in I is taken.
 *
 * "Reads back" goes through a double, so I's edges are the midpoints between f and its
 * neighbours moved by half a double's ulp there (2^-29 of the half-gap): outwards when c is
 * even (a decimal that rounds onto a midpoint as a double then rounds to the even float),
 * inwards when it is odd. Of all float32 values, this changes the output of two only (checked
 * against an exact float32 interval on every float): 7.038531e-26 lies 3.2e-17 (relative)
 * below the midpoint between 0x15ae43fd and 0x15ae43fe, within half a double's ulp, so it
 * reads as the even 0x15ae43fe; they are written 7.0385307e-26 and 7.038531e-26.
 *
 * y, the half-widths of I and the candidates are exact integers in a common unit: for f in
 * [2^-30, 2^24) (what attention produces) from one 64-bit product c 5^K, and the choice is made
 * without branches; otherwise in 128-bit integers (a division for f >= 2^24). Below 2^-119, y
 * loses its last bits to fit, and candidates within a small window of an edge are decided by
 * strtod. Rows (apip_floats_write) run that fast path 8 floats at a time with AVX-512 on CPUs
 * that have it, and lay each number out with one byte shuffle. tests/float_ref.c keeps the previous
 * writer (which searched digit counts from 9 down); `make check-floats-exhaustive` checks that both
 * write every finite float32 alike, alone and in rows.
 *
 * Format: fixed notation for decimal exponents -5..8 ("0.00012", "1234.5", "100"), otherwise
 * "1.5e-7" / "3.4028235e38"; "-0" keeps the sign of zero. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#define FMT_AVX512 1 /* rows with AVX-512 when the CPU has it (chosen at run time) */
#include <immintrin.h>
#endif

#include "codec.h"

__extension__ typedef unsigned __int128 u128;

static const uint64_t pow5_64[28] = {1u,
                                     5u,
                                     25u,
                                     125u,
                                     625u,
                                     3125u,
                                     15625u,
                                     78125u,
                                     390625u,
                                     1953125u,
                                     9765625u,
                                     48828125u,
                                     244140625u,
                                     1220703125u,
                                     6103515625u,
                                     30517578125u,
                                     152587890625u,
                                     762939453125u,
                                     3814697265625u,
                                     19073486328125u,
                                     95367431640625u,
                                     476837158203125u,
                                     2384185791015625u,
                                     11920928955078125u,
                                     59604644775390625u,
                                     298023223876953125u,
                                     1490116119384765625u,
                                     7450580596923828125u};

static const uint32_t pow10_32[10] = {1u,      10u,      100u,      1000u,      10000u,
                                      100000u, 1000000u, 10000000u, 100000000u, 1000000000u};

/* 5^k for k <= 54. */
static u128 pow5(int k) {
    return k <= 27 ? (u128)pow5_64[k] : (u128)pow5_64[27] * pow5_64[k - 27];
}

/* floor(q log10(2)) for |q| <= 1000 (78913 / 2^18 is close enough there; checked for every
 * float32 exponent by the tests). */
static inline int floor_log10_pow2(int q) {
    return q >= 0 ? (q * 78913) >> 18 : -((-q * 78913 + 262143) >> 18);
}

/* Whether the decimal d 10^e reads back as x (strtod, then float): the exact test for a
 * candidate too close to an edge of I to decide by distance (below 2^-119 only). */
__attribute__((noinline)) static bool reads_back(uint32_t d, int e, float x) {
    char buf[32];
    snprintf(buf, sizeof buf, "%ue%d", (unsigned)d, e);
    return (float)strtod(buf, NULL) == x;
}

/* Whether a candidate at distance dist from y (on a side whose half-width is h) lies in I:
 * 1 or 0 when dist is more than w from h, else -1 (for reads_back to decide). */
static inline int inside(u128 dist, u128 h, u128 w) {
    return dist + w < h ? 1 : dist > h + w ? 0 : -1;
}

/* The decimal d 10^-k chosen for x (= |f|) when y is known only to a few units (below
 * 2^-119), from y = s + r / one (0 <= r < one), the half-widths of I below (hl) and above (hu),
 * and the window w around their ends where strtod decides (all in units of 1 / one). */
__attribute__((noinline)) static uint32_t pick(uint64_t s, u128 r, u128 one, u128 hl, u128 hu,
                                               u128 w, int k, float x) {
    if (s >= 10) { /* a multiple of 10 in I is shorter than every integer there */
        uint64_t m = s % 10;
        u128 below = m * one + r, above = 10 * one - below;
        int lo = inside(below, hl, w), hi = inside(above, hu, w);
        if (lo < 0)
            lo = reads_back((uint32_t)(s - m), -k, x);
        if (hi < 0)
            hi = reads_back((uint32_t)(s - m + 10), -k, x);
        if (lo != hi)
            return (uint32_t)(lo ? s - m : s - m + 10);
    }
    int lo = inside(r, hl, w), hi = inside(one - r, hu, w);
    if (lo < 0)
        lo = reads_back((uint32_t)s, -k, x);
    if (hi < 0)
        hi = reads_back((uint32_t)s + 1, -k, x);
    if (lo && hi) /* both: the nearer, ties to even */
        return (uint32_t)s + (2 * r > one || (2 * r == one && (s & 1)));
    return (uint32_t)s + !lo;
}

/* The general path of shortest: f = c 2^q outside [2^-30, 2^24), in 128-bit integers. lc:
 * the gap below is half the gap above. Returns d and sets *k, as shortest does. */
__attribute__((noinline)) static uint32_t shortest_general(float x, uint32_t c, int q, bool lc,
                                                           int *k) {
    u128 one, r, hu;
    uint64_t s;
    int drop = 0; /* low bits of y dropped */
    if (q > 0) {
        /* y = c 2^q / 10^m = c 2^(q-m) / 5^m, in units of 1 / (4 5^m). */
        int m = floor_log10_pow2(q);
        if (lc && 3 * ((u128)1 << (q - m)) < 4 * pow5(m))
            m--;
        u128 a = (u128)c << (q - m), b = pow5(m);
        s = (uint64_t)(a / b);
        r = 4 * (a % b);
        one = 4 * b;
        hu = (u128)1 << (q + 1 - m); /* 2^(q-1) 10^-m in these units */
        *k = -m;
    } else {
        /* y = c 5^K / 2^F, in units of 2^-(F+2). */
        int kk = -floor_log10_pow2(q), f = -(q + kk);
        if (lc && 3 * pow5(kk) < (u128)1 << (f + 2)) {
            kk++;
            f--;
        }
        u128 p;
        if (kk <= 43) {
            p = (u128)c * pow5(kk); /* below 2^124 */
        } else {
            /* c 5^K reaches 2^129: keep it without its last 8 bits (y loses less than one
             * unit of r, far inside the window w). */
            u128 x27 = (u128)c * pow5_64[27];
            uint64_t z = pow5_64[kk - 27];
            p = ((u128)(uint64_t)(x27 >> 64) * z << 56) + (((u128)(uint64_t)x27 * z) >> 8);
            drop = 8;
            f -= 8;
        }
        s = (uint64_t)(p >> f);
        r = (p & (((u128)1 << f) - 1)) << 2;
        one = (u128)1 << (f + 2);
        hu = 2 * pow5(kk) >> drop; /* 2^(q-1) 10^K in these units */
        *k = kk;
    }
    u128 hl = lc ? hu / 2 : hu;
    if (drop) /* half a double's ulp at the edges is at most 2^-28 of the half-gap */
        return pick(s, r, one, hl, hu, (hu >> 28) + 8, *k, x);
    /* The edges read through a double, as on the fast path (all of these floats are normal
     * with a biased exponent of at least 4, where that 2^-29 holds). */
    bool even = !(c & 1);
    u128 lo = hl - (hl >> 29) + (even ? 2 * (hl >> 29) + 1 : 0);
    u128 hi = hu - (hu >> 29) + (even ? 2 * (hu >> 29) + 1 : 0);
    if (s >= 10) { /* a multiple of 10 in I is shorter than every integer there */
        uint64_t m = s % 10;
        u128 below = m * one + r, above = 10 * one - below;
        if (below < lo)
            return (uint32_t)(s - m);
        if (above < hi)
            return (uint32_t)(s - m + 10);
    }
    bool s_in = r < lo, t_in = one - r < hi;
    if (s_in && t_in) /* both: the nearer, ties to even */
        return (uint32_t)s + (2 * r > one || (2 * r == one && (s & 1)));
    return (uint32_t)s + !s_in;
}

/* a < b, for a, b < 2^63, as 1 or 0 computed without a branch. */
static inline uint64_t lt(uint64_t a, uint64_t b) {
    return (a - b) >> 63;
}

/* The shortest decimal d 10^-*k (d < 10^9, maybe with trailing zeros) that reads back as
 * x = c 2^q (finite, nonzero; x = |f|). lc: the gap below x is half the gap above. */
__attribute__((always_inline)) static inline uint32_t shortest(float x, uint32_t c, int q, bool lc,
                                                               int *k) {
    if (q > 0 || q < -53)
        return shortest_general(x, c, q, lc, k);
    /* The fast path (x in [2^-30, 2^24)): K <= 16 and y = c 5^K / 2^F with F = -(q + K) >= -1,
     * all in 64-bit integers in units of 2^-(F+2): Y = 4 c 5^K < 2^64 exactly, and the
     * half-gap 2^(q-1) 10^K is 2 5^K (5^K below x, at a power of two). */
    int kk = (-q * 78913 + 262143) >> 18, f = -(q + kk);
    uint64_t p5 = pow5_64[kk];
    if (lc && 3 * p5 < (uint64_t)1 << (f + 2)) { /* 3/4 g < 1 */
        kk++;
        f--;
        p5 *= 5;
        if (kk > 16)
            return shortest_general(x, c, q, lc, k);
    }
    *k = kk;
    uint64_t y = 4 * (uint64_t)c * p5, one = (uint64_t)1 << (f + 2);
    uint64_t s = y >> (f + 2), r = y & (one - 1), r_up = one - r;
    /* I read through a double: the edges are the midpoints between x and its neighbours, and a
     * decimal within half a double's ulp of one (2^-29 of the half-gap h there, every side of
     * every x on this path) rounds onto it, and from there to x only when c is even. So a
     * candidate at distance d is in I when d <= h + h / 2^29 (c even) or d < h - h / 2^29 (c
     * odd); d is an integer, so d < h + floor(h / 2^29) + 1 or d < h - floor(h / 2^29). */
    uint64_t hu = 2 * p5, hl = lc ? p5 : hu, even = ~c & 1;
    uint64_t lo = hl - (hl >> 29) + even * (2 * (hl >> 29) + 1);
    uint64_t hi = hu - (hu >> 29) + even * (2 * (hu >> 29) + 1);
    /* The choice (see the top of the file) without branches, which random digits would
     * mispredict; lt(a, b) is a < b since everything compared is below 2^42 here. */
    uint64_t m = s % 10, below = m * one + r, above = 10 * one - below;
    uint64_t m_lo = lt(below, lo), m_hi = lt(above, hi), s_in = lt(r, lo), t_in = lt(r_up, hi);
    uint64_t t_nearer = lt(r_up, r) | ((uint64_t)(r == r_up) & s); /* a tie: to even */
    uint64_t st = s + ((s_in & t_in & t_nearer) | (s_in ^ 1));
    uint64_t use_m = 0 - ((uint64_t)(s >= 10) & (m_lo | m_hi)); /* all ones or zero */
    return (uint32_t)(((s - m + 10 * (m_lo ^ 1)) & use_m) | (st & ~use_m));
}

/* The 8 ASCII digits of v < 10^8, the first in the lowest byte: split in two 4-digit halves,
 * each half into two 2-digit lanes, each lane into two digits, with multiplications by
 * reciprocals (v * 10486 >> 20 is v / 100 below 10^4, v * 103 >> 10 is v / 10 below 100). */
static inline uint64_t digits8(uint32_t v) {
    uint64_t x = (uint64_t)(v / 10000) | (uint64_t)(v % 10000) << 32;
    uint64_t h = ((x * 10486) >> 20) & 0x0000007F0000007Fu;
    x = h | (x - h * 100) << 16;
    h = ((x * 103) >> 10) & 0x000F000F000F000Fu;
    x = h | (x - h * 10) << 8;
    return x | 0x3030303030303030u;
}

/* Stores the 8 bytes of w at o, its lowest byte first. */
static inline void store8(char *o, uint64_t w) {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    memcpy(o, &w, sizeof w);
}

/* Writes the decimal whose 9 digits are first and w (digits 2 to 9 in ASCII, the second in
 * w's lowest byte), p of them significant, the first of weight 10^x, without sign; returns the
 * end. Writes up to 17 bytes past o, whatever the length: the digits are stored whole, in a few
 * overlapping stores (never read back, which would stall on store forwarding). */
__attribute__((always_inline)) static inline char *put_digits(char *o, char first, uint64_t w,
                                                              int p, int x) {
    if (x < 0 && x >= -5) { /* 0.000ddd */
        memcpy(o, "0.0000", 6);
        o += 1 - x;
        o[0] = first;
        store8(o + 1, w);
        return o + p;
    }
    if (x >= 0 && x <= 8) {
        o[0] = first;
        store8(o + 1, w);
        int before = x + 1; /* digits before the point; the padding gives an integer's zeros */
        if (p <= before)
            return o + before;
        uint64_t tail = w >> (8 * (before - 1)); /* the digits after the point */
        o[before] = '.';
        store8(o + before + 1, tail);
        return o + p + 1;
    }
    o[0] = first; /* d.ddde-X */
    o[1] = '.';
    store8(o + 2, w);
    o += p > 1 ? p + 1 : 1;
    /* e, a '-' kept only for x < 0, then one or two digits (|x| <= 45), without branches. */
    o[0] = 'e';
    o[1] = '-';
    o += 1 + (x < 0);
    unsigned ax = (unsigned)(x < 0 ? -x : x), tens = ax * 103 >> 10, ones = ax - 10 * tens;
    o[0] = (char)('0' + (ax >= 10 ? tens : ones));
    o[1] = (char)('0' + ones);
    return o + 1 + (ax >= 10);
}

/* The number of significant digits among first (never '0') and w: up to w's last byte that is
 * not '0'. */
static inline int significant(uint64_t w) {
    uint64_t nz = w ^ 0x3030303030303030u;
    return 9 - (int)(((unsigned)__builtin_clzll(nz | 1) + (nz == 0)) / 8);
}

/* Writes d 10^-k (0 < d < 10^9) without sign; returns the end; as put_digits. */
__attribute__((always_inline)) static inline char *put_dec(char *o, uint32_t d, int k) {
    /* n digits (7 to 9 from the fast path; else bit length * log10(2), then one compare); x
     * the exponent of the first. */
    int n;
    if (d >= 1000000) {
        n = 7 + (d >= 10000000) + (d >= 100000000);
    } else {
        n = ((32 - __builtin_clz(d)) * 1233) >> 12;
        n += d >= pow10_32[n];
    }
    uint32_t d9 = d * pow10_32[9 - n];
    uint64_t w = digits8(d9 % 100000000u); /* digits 2 to 9 */
    return put_digits(o, (char)('0' + d9 / 100000000u), w, significant(w), n - 1 - k);
}

/* Writes f (finite) at o; returns the end. Writes up to 17 bytes past o. */
__attribute__((always_inline)) static inline char *put_float(char *o, float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    *o = '-';
    o += bits >> 31;
    uint32_t be = (bits >> 23) & 0xFF, fr = bits & 0x7FFFFF;
    if ((be == 0 && fr == 0) || be == 0xFF) { /* zero; a non-finite f breaks the contract */
        *o = '0';
        return o + 1;
    }
    uint32_t c = be ? fr | 0x800000 : fr;
    int q = be ? (int)be - 150 : -149, k;
    bits &= 0x7FFFFFFFu;
    float x;
    memcpy(&x, &bits, sizeof x);
    uint32_t d = shortest(x, c, q, fr == 0 && be > 1, &k);
    return put_dec(o, d, k);
}

size_t api_float_write(char *buf, float f) {
    char tmp[40];
    size_t n = (size_t)(put_float(tmp, f) - tmp);
    memcpy(buf, tmp, n);
    return n;
}

#ifdef FMT_AVX512
/* apip_floats_write for 8 floats at a time with AVX-512 (F, DQ, CD), in two passes over up to
 * FMT_CHUNK floats. The first runs the fast path of shortest and the digits of put_dec in
 * 64-bit lanes (the same operations as the scalar code), and leaves, for each float, the 16
 * bytes its text is made of (src) and the number of its layout (id). The second lays each
 * float out with one byte shuffle: the layout for its sign, decimal exponent and number of
 * significant digits (made once by put_digits itself, see layouts_make) picks its bytes from
 * src, and one 16-byte store writes them. (A shuffle per lane inside the first pass ran slower
 * than put_digits; apart, the two passes overlap: bench/RESULTS.md.) A group of 8 with no lane
 * on the fast path (zeros where a mask was) runs the first pass as well: a branch around it
 * made every row 1.7 ns per float slower, and rows of a causal map, half zeros, are still
 * written faster than before. Lanes off the fast path
 * (zeros, powers of two, values outside [2^-30, 2^24), non-finite) and texts longer than 16 bytes
 * are written by put_float. Apart from those, the passes have no branch that depends on the values,
 * and the second carries from float to float only its output position. */

/* The bytes of a float's text, as src holds them: digits 2 to 9 at 0-7, the first at 8,
 * then the constant characters and the first digit of the exponent. */
enum {
    SRC_FIRST = 8,
    SRC_ZERO = 9,
    SRC_POINT = 10,
    SRC_MINUS = 11,
    SRC_E = 12,
    SRC_COMMA = 13,
    SRC_EXP = 14
};
#define FMT_XMIN    (-10) /* decimal exponents on the fast path: 2^-30 > 9.3e-10 */
#define FMT_XMAX    7     /* 2^24 < 1.7e7 */
#define FMT_NX      (FMT_XMAX - FMT_XMIN + 1)
#define FMT_LAYOUTS (2 * FMT_NX * 9) /* sign, exponent, significant digits (1 to 9) */
#define FMT_SLOW    FMT_LAYOUTS      /* the id of a float put_float writes */
#define FMT_CHUNK   64

/* Layout id: the shuffle control that makes the text plus its comma from src, and its
 * length (0: longer than 16 bytes, for put_float). */
static _Alignas(16) uint8_t layout_shuf[FMT_LAYOUTS + 1][16];
static uint8_t layout_len[FMT_LAYOUTS + 1];
static pthread_once_t layouts_once = PTHREAD_ONCE_INIT;

/* Writes each layout with put_digits itself, on digits that name their place in src
 * (bytes 0xF0 + place), and reads the places back from its text. */
static void layouts_make(void) {
    uint64_t w = 0;
    for (int b = 0; b < 8; b++)
        w |= (uint64_t)(0xF0 + b) << (8 * b);
    for (int id = 0; id < FMT_LAYOUTS; id++) {
        int neg = id / (FMT_NX * 9), x = id / 9 % FMT_NX + FMT_XMIN, p = id % 9 + 1;
        char text[64];
        char *o = text;
        *o = '-';
        o += neg;
        o = put_digits(o, (char)(0xF0 + SRC_FIRST), w, p, x);
        *o++ = ',';
        size_t len = (size_t)(o - text);
        memset(layout_shuf[id], 0x80, 16);
        layout_len[id] = len <= 16 ? (uint8_t)len : 0;
        for (size_t j = 0; j < len && j < 16; j++) {
            unsigned char ch = (unsigned char)text[j];
            int place = ch >= 0xF0 && ch <= 0xF0 + SRC_FIRST ? ch - 0xF0
                        : ch == '0'                          ? SRC_ZERO
                        : ch == '.'                          ? SRC_POINT
                        : ch == '-'                          ? SRC_MINUS
                        : ch == 'e'                          ? SRC_E
                        : ch == ','                          ? SRC_COMMA
                        : ch >= '1' && ch <= '9'             ? SRC_EXP
                                                             : -1;
            if (place < 0) /* not a byte of src: never, but put_float would write it */
                layout_len[id] = 0;
            layout_shuf[id][j] = (uint8_t)(place < 0 ? 0x80 : place);
        }
    }
    memset(layout_shuf[FMT_SLOW], 0x80, 16);
    layout_len[FMT_SLOW] = 0;
}

/* The first pass over v[0, n) (n a multiple of 8, at most FMT_CHUNK): each float's 16 bytes
 * into src and its layout id into id. */
__attribute__((target("avx512f,avx512dq,avx512cd"))) static void
floats_prepare_avx512(uint8_t (*src)[16], uint16_t *id, const float *v, size_t n) {
#define V1(x) _mm512_set1_epi64((long long)(x))
    const __m512i pow5_lo = _mm512_loadu_si512((const void *)pow5_64),
                  pow5_hi = _mm512_loadu_si512((const void *)(pow5_64 + 8));
    const __m512i first4 = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0),
                  last4 = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
    /* src bytes 8 to 15: '0' at byte 8 (the first digit is added to it), then '0', '.', '-',
     * 'e' and ','; the exponent's digit (byte 14) is added below */
    const uint64_t consts = (uint64_t)'0' << 8 | (uint64_t)'.' << 16 | (uint64_t)'-' << 24 |
                            (uint64_t)'e' << 32 | (uint64_t)',' << 40 | (uint64_t)'0';
    for (size_t i = 0; i < n; i += 8) {
        __m512i bits = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(v + i)));
        __m512i be = _mm512_and_si512(_mm512_srli_epi64(bits, 23), V1(0xFF));
        __m512i fr = _mm512_and_si512(bits, V1(0x7FFFFF));
        __mmask8 fast = _mm512_cmpge_epu64_mask(be, V1(97)) & _mm512_cmple_epu64_mask(be, V1(150)) &
                        _mm512_test_epi64_mask(fr, fr);
        /* shortest's fast path; lc is false (powers of two are not fast here). */
        __m512i c = _mm512_or_si512(fr, V1(0x800000)), nq = _mm512_sub_epi64(V1(150), be);
        __m512i kk =
            _mm512_srli_epi64(_mm512_add_epi64(_mm512_mul_epu32(nq, V1(78913)), V1(262143)), 18);
        __m512i p5 = _mm512_permutex2var_epi64(pow5_lo, kk, pow5_hi); /* kk in [0, 16] */
        p5 = _mm512_mask_mov_epi64(p5, _mm512_cmpeq_epu64_mask(kk, V1(16)), V1(pow5_64[16]));
        __m512i sh = _mm512_add_epi64(_mm512_sub_epi64(nq, kk), V1(2)); /* F + 2 */
        __m512i y = _mm512_mullo_epi64(_mm512_slli_epi64(c, 2), p5);
        __m512i one = _mm512_sllv_epi64(V1(1), sh), s = _mm512_srlv_epi64(y, sh);
        __m512i r = _mm512_and_si512(y, _mm512_sub_epi64(one, V1(1))),
                r_up = _mm512_sub_epi64(one, r);
        __m512i hu = _mm512_slli_epi64(p5, 1), adj = _mm512_srli_epi64(hu, 29);
        __m512i lim = _mm512_sub_epi64(hu, adj); /* odd c: h - floor(h / 2^29) */
        lim = _mm512_mask_add_epi64(lim, _mm512_testn_epi64_mask(c, V1(1)), lim,
                                    _mm512_add_epi64(_mm512_slli_epi64(adj, 1), V1(1)));
        __m512i q10 = _mm512_srli_epi64(_mm512_mul_epu32(s, V1(0xCCCCCCCDu)), 35);
        __m512i m = _mm512_sub_epi64(
            s, _mm512_add_epi64(_mm512_slli_epi64(q10, 3), _mm512_slli_epi64(q10, 1)));
        __m512i below = _mm512_add_epi64(_mm512_sllv_epi64(m, sh), r);
        __m512i above = _mm512_sub_epi64(_mm512_sllv_epi64(V1(10), sh), below);
        __mmask8 m_lo = _mm512_cmplt_epu64_mask(below, lim),
                 m_hi = _mm512_cmplt_epu64_mask(above, lim);
        __mmask8 s_in = _mm512_cmplt_epu64_mask(r, lim), t_in = _mm512_cmplt_epu64_mask(r_up, lim);
        __mmask8 t_nearer = _mm512_cmplt_epu64_mask(r_up, r) |
                            (_mm512_cmpeq_epu64_mask(r, r_up) & _mm512_test_epi64_mask(s, V1(1)));
        __m512i st = _mm512_mask_add_epi64(s, (s_in & t_in & t_nearer) | (__mmask8)~s_in, s, V1(1));
        __m512i sm = _mm512_sub_epi64(s, m);
        sm = _mm512_mask_add_epi64(sm, (__mmask8)~m_lo, sm, V1(10));
        __m512i d = _mm512_mask_mov_epi64(st, m_lo | m_hi, sm);
        /* put_dec's digits: d has 7 to 9. */
        __mmask8 ge7 = _mm512_cmpge_epu64_mask(d, V1(10000000)),
                 ge8 = _mm512_cmpge_epu64_mask(d, V1(100000000));
        __m512i scale =
            _mm512_mask_mov_epi64(_mm512_mask_mov_epi64(V1(100), ge7, V1(10)), ge8, V1(1));
        __m512i d9 = _mm512_mul_epu32(d, scale);
        __m512i first = _mm512_srli_epi64(_mm512_mul_epu32(d9, V1(0x55E63B89u)), 57);
        __m512i rest = _mm512_sub_epi64(d9, _mm512_mul_epu32(first, V1(100000000)));
        __m512i hi4 = _mm512_srli_epi64(_mm512_mul_epu32(rest, V1(0xD1B71759u)), 45);
        __m512i x = _mm512_or_si512(
            hi4, _mm512_slli_epi64(_mm512_sub_epi64(rest, _mm512_mul_epu32(hi4, V1(10000))), 32));
        __m512i h = _mm512_and_si512(_mm512_srli_epi64(_mm512_mullo_epi64(x, V1(10486)), 20),
                                     V1(0x0000007F0000007Fu));
        x = _mm512_or_si512(
            h, _mm512_slli_epi64(_mm512_sub_epi64(x, _mm512_mullo_epi64(h, V1(100))), 16));
        h = _mm512_and_si512(_mm512_srli_epi64(_mm512_mullo_epi64(x, V1(103)), 10),
                             V1(0x000F000F000F000Fu));
        x = _mm512_or_si512(
            h, _mm512_slli_epi64(_mm512_sub_epi64(x, _mm512_mullo_epi64(h, V1(10))), 8));
        /* significant(): 9 - (leading zero bytes of the digit values, 8 when all are zero) */
        __m512i lz = _mm512_lzcnt_epi64(_mm512_or_si512(x, V1(1)));
        lz = _mm512_mask_add_epi64(lz, _mm512_testn_epi64_mask(x, x), lz, V1(1));
        __m512i p = _mm512_sub_epi64(V1(9), _mm512_srli_epi64(lz, 3));
        __m512i nd = _mm512_mask_add_epi64(V1(6), ge7, V1(6), V1(1)); /* n - 1 */
        __m512i xe = _mm512_sub_epi64(_mm512_mask_add_epi64(nd, ge8, nd, V1(1)), kk);
        /* src: digits 2 to 9, then the first, the constants and the exponent's first digit
         * ('1' for -10, else -xe; used only for xe in [-10, -6]) */
        __m512i ax = _mm512_sub_epi64(V1(0), xe);
        ax = _mm512_mask_mov_epi64(ax, _mm512_cmpge_epi64_mask(ax, V1(10)), V1(1));
        __m512i top = _mm512_or_si512(
            _mm512_add_epi64(first, V1(consts)),
            _mm512_slli_epi64(_mm512_and_si512(_mm512_add_epi64(ax, V1('0')), V1(0xFF)), 48));
        __m512i low = _mm512_or_si512(x, V1(0x3030303030303030u));
        _mm512_storeu_si512((void *)src[i], _mm512_permutex2var_epi64(low, first4, top));
        _mm512_storeu_si512((void *)src[i + 4], _mm512_permutex2var_epi64(low, last4, top));
        /* the layout: (sign, xe - FMT_XMIN, p - 1) */
        __m512i lid = _mm512_add_epi64(
            _mm512_mullo_epi64(_mm512_srli_epi64(bits, 31), V1(FMT_NX * 9)),
            _mm512_add_epi64(_mm512_mullo_epi64(_mm512_sub_epi64(xe, V1(FMT_XMIN)), V1(9)),
                             _mm512_sub_epi64(p, V1(1))));
        __mmask8 in_x =
            _mm512_cmpge_epi64_mask(xe, V1(FMT_XMIN)) & _mm512_cmple_epi64_mask(xe, V1(FMT_XMAX));
        lid = _mm512_mask_mov_epi64(V1(FMT_SLOW), fast & in_x, lid);
        _mm_storeu_si128((__m128i *)(id + i), _mm512_cvtepi64_epi16(lid));
    }
#undef V1
}

/* The second pass: lays out v[0, n) at o from src and id, each float followed by a comma;
 * returns the end. Writes up to 16 bytes past it. */
__attribute__((target("avx512f"))) static char *
floats_place(char *o, const uint8_t (*src)[16], const uint16_t *id, const float *v, size_t n) {
    for (size_t j = 0; j < n; j++) {
        unsigned len = layout_len[id[j]];
        if (__builtin_expect(len == 0, 0)) {
            o = put_float(o, v[j]);
            *o++ = ',';
            continue;
        }
        __m128i t = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)src[j]),
                                     _mm_load_si128((const __m128i *)layout_shuf[id[j]]));
        _mm_storeu_si128((__m128i *)o, t);
        o += len;
    }
    return o;
}

__attribute__((target("avx512f,avx512dq,avx512cd"))) static char *
floats_write_avx512(char *o, const float *v, size_t n) {
    pthread_once(&layouts_once, layouts_make);
    _Alignas(64) uint8_t src[FMT_CHUNK][16];
    _Alignas(64) uint16_t id[FMT_CHUNK];
    size_t i = 0;
    while (i + 8 <= n) {
        size_t m = n - i < FMT_CHUNK ? (n - i) & ~(size_t)7 : FMT_CHUNK;
        floats_prepare_avx512(src, id, v + i, m);
        o = floats_place(o, (const uint8_t(*)[16])src, id, v + i, m);
        i += m;
    }
    for (; i < n; i++) {
        o = put_float(o, v[i]);
        *o++ = ',';
    }
    return o - 1; /* no comma after the last */
}
#endif

char *apip_floats_write(char *o, const float *v, size_t n) {
#ifdef FMT_AVX512
    if (n >= 8 && apip_cpu_has(APIP_CPU_AVX512F | APIP_CPU_AVX512DQ | APIP_CPU_AVX512CD))
        return floats_write_avx512(o, v, n);
#endif
    for (size_t i = 0; i < n; i++) {
        o = put_float(o, v[i]);
        *o = ',';
        o += i + 1 < n;
    }
    return o;
}
