/* float_ref.c - the previous float32 writer of api/codec/fmt.c, kept as a test-only reference: the
 * tests and `make check-floats-exhaustive` compare api_float_write with it, and bench_api times
 * both side by side. It has the same contract and writes every finite float32 alike (checked
 * exhaustively), from another method, so a slip in either shows up as a difference.
 *
 * The contract (api.h): the output, parsed as a double and rounded to float32 as JSON parsers
 * do, gives back f, and it has the fewest significant digits (at most 9) that do so; among
 * decimals of that length it is the nearest that reads back: the correctly rounded one, i.e.
 * what printf("%.*e") prints, or, at a power of two (where the gap below f is half the gap
 * above) when that one misses below, the decimal a unit above it.
 *
 * How: f = M 2^E exactly (M < 2^24). Scaling by 10^k (k = 8 - e10, e10 the decimal exponent)
 * gives y = f 10^k in [1e8, 1e9); y's integer part T and the position of its fraction (zero,
 * below, at or above one half) are computed exactly in 128/192-bit integers. The p-digit
 * candidates are T rounded to p digits; a candidate reads back as f when its distance to y is
 * below the half-gap to f's neighbours (also in units of y), which is known in closed form.
 * Candidates within 1e-6 of the half-gap (where double rounding or ties could decide) are
 * checked exactly by strtod instead; that happens about once in a million numbers. When the
 * nearest candidate lies below y and misses, the one a unit above may still fall inside the
 * wider gap above (powers of two only), so it is tried too. Digit counts are searched from 8
 * down, since a p-digit decimal that reads back is also a (p + 1)-digit one, and then the
 * nearest (p + 1)-digit candidate or the one a unit above it reads back.
 *
 * Format: fixed notation for decimal exponents -5..8 ("0.00012", "1234.5", "100"), otherwise
 * "1.5e-7" / "3.4028235e38"; "-0" keeps the sign of zero. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "float_ref.h"

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

static const double pow10_d[56] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11, 1e12, 1e13,
    1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27,
    1e28, 1e29, 1e30, 1e31, 1e32, 1e33, 1e34, 1e35, 1e36, 1e37, 1e38, 1e39, 1e40, 1e41,
    1e42, 1e43, 1e44, 1e45, 1e46, 1e47, 1e48, 1e49, 1e50, 1e51, 1e52, 1e53, 1e54, 1e55};

static const double pow10_neg_d[56] = {
    1e-0,  1e-1,  1e-2,  1e-3,  1e-4,  1e-5,  1e-6,  1e-7,  1e-8,  1e-9,  1e-10, 1e-11,
    1e-12, 1e-13, 1e-14, 1e-15, 1e-16, 1e-17, 1e-18, 1e-19, 1e-20, 1e-21, 1e-22, 1e-23,
    1e-24, 1e-25, 1e-26, 1e-27, 1e-28, 1e-29, 1e-30, 1e-31, 1e-32, 1e-33, 1e-34, 1e-35,
    1e-36, 1e-37, 1e-38, 1e-39, 1e-40, 1e-41, 1e-42, 1e-43, 1e-44, 1e-45, 1e-46, 1e-47,
    1e-48, 1e-49, 1e-50, 1e-51, 1e-52, 1e-53, 1e-54, 1e-55};

static const uint32_t pow10_32[10] = {1u,      10u,      100u,      1000u,      10000u,
                                      100000u, 1000000u, 10000000u, 100000000u, 1000000000u};

/* 2^n as a double, for n in [-1022, 1023]: exact, and far cheaper than ldexp. */
static double pow2(int n) {
    uint64_t bits = (uint64_t)(n + 1023) << 52;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* 5^k for k <= 54. */
static u128 pow5(int k) {
    return k <= 27 ? (u128)pow5_64[k] : (u128)pow5_64[27] * pow5_64[k - 27];
}

/* y = f 10^k split as its integer part t and its fraction: frac (approximate, for distances),
 * half (-1, 0, +1: the fraction compared with 1/2, exact) and zero (the fraction is 0, exact). */
typedef struct scaled {
    uint64_t t;
    double frac;
    int half;
    bool zero;
} scaled;

/* x = m 2^e with m < 2^24; k in [-30, 54]. */
static scaled scale(uint32_t m, int e, int k) {
    scaled r = {0, 0.0, -1, true};
    if (k >= 0 && k <= 27 && e + k < 0 && e + k > -64) {
        /* The common case (about 1e-19 to 1e9): n = m 5^k fits in 88 bits, the shift in 63. */
        u128 n = (u128)m * pow5_64[k];
        int s = -(e + k);
        uint64_t rl = (uint64_t)n & ((1ull << s) - 1), hl = 1ull << (s - 1);
        r.t = (uint64_t)(n >> s);
        r.zero = rl == 0;
        r.half = rl < hl ? -1 : rl > hl ? 1 : 0;
        r.frac = (double)(int64_t)rl * pow2(-s);
        return r;
    }
    if (k >= 0) {
        /* y = m 5^k 2^(e+k); the product n = m 5^k has up to 148 bits: n = nh 2^64 + nl. */
        u128 p = pow5(k);
        u128 lo = (u128)m * (uint64_t)p;
        u128 nh = (u128)m * (uint64_t)(p >> 64) + (lo >> 64);
        uint64_t nl = (uint64_t)lo;
        int sh = e + k;
        if (sh >= 0) {
            r.t = (uint64_t)(((nh << 64) | nl) << sh); /* y < 2^34 here, so n < 2^34 too */
            return r;
        }
        int s = -sh;
        u128 rh; /* the remainder n mod 2^s is rh 2^64 + rl */
        uint64_t rl;
        if (s < 64) {
            r.t = (uint64_t)(nh << (64 - s)) | (nl >> s);
            rh = 0;
            rl = nl & ((1ull << s) - 1);
        } else {
            r.t = (uint64_t)(nh >> (s - 64));
            rh = s == 64 ? 0 : nh & (((u128)1 << (s - 64)) - 1);
            rl = nl;
        }
        r.zero = rh == 0 && rl == 0;
        /* half = 2^(s-1) */
        if (s - 1 >= 64) {
            u128 hh = (u128)1 << (s - 1 - 64);
            r.half = rh < hh ? -1 : rh > hh ? 1 : (rl ? 1 : 0);
        } else {
            uint64_t hl = 1ull << (s - 1);
            r.half = rh ? 1 : rl < hl ? -1 : rl > hl ? 1 : 0;
        }
        r.frac = (double)(uint64_t)(rh >> 64) * pow2(128 - s) +
                 (double)(uint64_t)rh * pow2(64 - s) + (double)rl * pow2(-s);
        return r;
    }
    /* y = m 2^e / 10^-k, e >= 0 here. */
    u128 num = (u128)m << e;
    u128 div = pow5(-k) << -k;
    u128 q, rem;
    if ((num >> 64) == 0 && (div >> 64) == 0) {
        q = (uint64_t)num / (uint64_t)div;
        rem = (uint64_t)num % (uint64_t)div;
    } else {
        q = num / div;
        rem = num % div;
    }
    r.t = (uint64_t)q;
    r.zero = rem == 0;
    r.half = 2 * rem < div ? -1 : 2 * rem > div ? 1 : 0;
    r.frac = (double)rem / (double)div;
    return r;
}

/* A decimal d 10^(x - p + 1): p significant digits, the first of weight 10^x. */
typedef struct dec {
    uint32_t d;
    int p, x;
} dec;

/* The two ASCII digits of 0..99 as a little-endian pair: tens in the low byte. */
static const uint16_t digit_pairs[100] = {
    0x3030, 0x3130, 0x3230, 0x3330, 0x3430, 0x3530, 0x3630, 0x3730, 0x3830, 0x3930, 0x3031, 0x3131,
    0x3231, 0x3331, 0x3431, 0x3531, 0x3631, 0x3731, 0x3831, 0x3931, 0x3032, 0x3132, 0x3232, 0x3332,
    0x3432, 0x3532, 0x3632, 0x3732, 0x3832, 0x3932, 0x3033, 0x3133, 0x3233, 0x3333, 0x3433, 0x3533,
    0x3633, 0x3733, 0x3833, 0x3933, 0x3034, 0x3134, 0x3234, 0x3334, 0x3434, 0x3534, 0x3634, 0x3734,
    0x3834, 0x3934, 0x3035, 0x3135, 0x3235, 0x3335, 0x3435, 0x3535, 0x3635, 0x3735, 0x3835, 0x3935,
    0x3036, 0x3136, 0x3236, 0x3336, 0x3436, 0x3536, 0x3636, 0x3736, 0x3836, 0x3936, 0x3037, 0x3137,
    0x3237, 0x3337, 0x3437, 0x3537, 0x3637, 0x3737, 0x3837, 0x3937, 0x3038, 0x3138, 0x3238, 0x3338,
    0x3438, 0x3538, 0x3638, 0x3738, 0x3838, 0x3938, 0x3039, 0x3139, 0x3239, 0x3339, 0x3439, 0x3539,
    0x3639, 0x3739, 0x3839, 0x3939,
};

/* Writes r without sign; returns the end. Writes up to 17 bytes past o, whatever the length.
 * The digits are assembled in a register and stored at once: staging them in a small array
 * and copying it out stalled on store forwarding (a third of the cost). */
__attribute__((always_inline)) static inline char *put_dec(char *o, dec r) {
    /* The 9 digits of d 10^(9-p) (so '0' past the p-th), byte i = digit i. */
    uint32_t d9 = r.d * pow10_32[9 - r.p];
    uint32_t rest = d9 % 100000000u, hi = rest / 10000, lo = rest % 10000;
    uint64_t w = (uint64_t)digit_pairs[hi / 100] | (uint64_t)digit_pairs[hi % 100] << 16 |
                 (uint64_t)digit_pairs[lo / 100] << 32 | (uint64_t)digit_pairs[lo % 100] << 48;
    u128 digs = (u128)('0' + d9 / 100000000u) | (u128)w << 8;
    int p = r.p, x = r.x;
    u128 v;
    char *end;
    if (x < 0 && x >= -5) { /* 0.000ddd */
        memcpy(o, "0.0000", 6);
        o += 1 - x;
        v = digs;
        end = o + p;
    } else if (x >= 0 && x <= 8) {
        int k = x + 1; /* digits before the point */
        if (p <= k) {  /* an integer; the padding supplies its trailing zeros */
            v = digs;
            end = o + k;
        } else {
            u128 low = ((u128)1 << (8 * k)) - 1;
            v = (digs & low) | (u128)'.' << (8 * k) | (digs & ~low) << 8;
            end = o + p + 1;
        }
    } else { /* d.ddde-X */
        v = (digs & 0xFF) | (u128)'.' << 8 | (digs >> 8) << 16;
        end = o + (p > 1 ? p + 1 : 1);
    }
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(o, &v, sizeof v);
#else
    for (size_t i = 0; i < sizeof v; i++)
        o[i] = (char)(v >> (8 * i));
#endif
    if (x >= -5 && x <= 8)
        return end;
    o = end;
    *o++ = 'e';
    if (x < 0) {
        *o++ = '-';
        x = -x;
    }
    if (x >= 10)
        *o++ = (char)('0' + x / 10);
    *o++ = (char)('0' + x % 10);
    return o;
}

/* Whether the decimal d (p digits, exponent e10 of its first digit) reads back as x, checked
 * exactly by strtod: for candidates too close to the edge of the rounding interval to call. */
static bool reads_back_exact(uint32_t d, int p, int e10, float x) {
    char buf[48];
    if (d == pow10_32[p]) { /* rounded up to the next power of ten */
        d = pow10_32[p - 1];
        e10++;
    }
    char *e = put_dec(buf, (dec){d, p, e10});
    *e = '\0';
    return (float)strtod(buf, NULL) == x;
}

/* floor(2^64 / 10^j) + 1: q = (t * recip10[j]) >> 64 is t / 10^j exactly for t < 2^34. */
static const uint64_t recip10[9] = {0,
                                    0x199999999999999Au,
                                    0x028F5C28F5C28F5Du,
                                    0x004189374BC6A7F0u,
                                    0x00068DB8BAC710CCu,
                                    0x0000A7C5AC471B48u,
                                    0x000010C6F7A0B5EEu,
                                    0x000001AD7F29ABCBu,
                                    0x0000002AF31DC462u};

/* T rounded half-even (on the exact y) to p < 9 digits; *dist gets the candidate's distance to
 * y in units of y and *up whether it rounded up. */
static inline uint32_t shorter(const scaled *y, int p, double *dist, bool *up) {
    uint32_t t = (uint32_t)y->t, pw = pow10_32[9 - p];
    uint32_t q = (uint32_t)(((u128)t * recip10[9 - p]) >> 64), r = t - q * pw;
    bool u = r > pw / 2 || (r == pw / 2 && (!y->zero || (q & 1)));
    double below = (double)r + y->frac; /* y minus the rounded-down candidate */
    *dist = u ? (double)pw - below : below;
    *up = u;
    return q + u;
}

static dec shortest_general(float x, uint32_t m, int e, bool lower_closer, int e10);

/* The shortest decimal of x = m 2^e (finite, nonzero; x = |f|). */
__attribute__((always_inline)) static inline dec shortest(float x, uint32_t m, int e,
                                                          bool lower_closer) {
    /* e10 = floor(log10 x): floor(log2 x) log10(2) (exact for these exponents) is e10 or
     * e10 - 1, and one comparison settles it but for x within 1e-16 of a power of ten, which
     * the range check after scaling catches. */
    int l2 = 31 - __builtin_clz(m) + e;
    long t10 = (long)l2 * 78913;
    int e10 = (int)(t10 >= 0 ? t10 / 262144 : -((-t10 + 262143) / 262144));
    e10 += (double)x >= (e10 + 1 >= 0 ? pow10_d[e10 + 1] : pow10_neg_d[-e10 - 1]);
    int k = 8 - e10, s = -(e + k);
    if (k < 0 || k > 27 || s > 31 || s < -31)
        return shortest_general(x, m, e, lower_closer, e10);

    /* The fast path (about 5e-8 to 1e9), all in 64-bit integers with 32 fraction bits:
     * Y = y 2^32 exactly, and the half-gaps 2^(e-1) 10^k 2^32 = 5^k 2^(31-s) exactly. */
    u128 n = (u128)m * pow5_64[k];
    uint64_t Y = (uint64_t)(n << (32 - s));
    uint32_t t = (uint32_t)(Y >> 32);
    if ((n >> (32 + s)) != 0 || t >= 1000000000u || t < 100000000u)
        return shortest_general(x, m, e, lower_closer, e10);
    uint64_t w_up = (uint64_t)pow5_64[k] << (31 - s);
    uint64_t w_down = lower_closer ? w_up / 2 : w_up;

    /* The p-digit candidate is T rounded half-even (on the exact y) to p digits; it reads back
     * when its distance to y is below the half-gap on its side, by more than the double
     * rounding of a decimal could move it (about 480 units here; 2048 are allowed); closer
     * calls go to strtod. When that candidate is below y and misses, the one a unit above is
     * tried against the gap above, which is wider at a power of two. Distances are at most
     * 10^(9-p) / 2, so from some p_sure on every candidate reads back; below it, a p-digit
     * decimal that reads back implies a (p+1)-digit one does (see the top of the file), so
     * the search goes down from p_sure and stops at the first p where none does. */
    const uint64_t slack = 2048;
    int p = 9;
    while (p > 1 && ((uint64_t)pow10_32[10 - p] << 31) + slack < w_down)
        p--;
    uint32_t d = 0;
    for (int c = p; c >= 1; c--) {
        uint32_t pw = pow10_32[9 - c];
        uint32_t q = c == 9 ? t : (uint32_t)(((u128)t * recip10[9 - c]) >> 64);
        uint64_t below = Y - ((uint64_t)(q * pw) << 32), whole = (uint64_t)pw << 32;
        bool up = below > whole / 2 || (below == whole / 2 && (q & 1));
        uint64_t dist = up ? whole - below : below, w = up ? w_up : w_down;
        bool ok = c == p || dist + slack < w;
        if (!ok && dist <= w + slack)
            ok = reads_back_exact(q + up, c, e10, x);
        if (!ok && !up && lower_closer) { /* the gap above is twice as wide: try a unit up */
            up = true;
            dist = whole - below;
            ok =
                dist + slack < w_up || (dist <= w_up + slack && reads_back_exact(q + 1, c, e10, x));
        }
        if (!ok)
            break;
        d = q + up;
        p = c;
    }
    if (d == pow10_32[p]) { /* rounded up to the next power of ten */
        d = pow10_32[p - 1];
        e10++;
    }
    while (p > 1 && d % 10 == 0) { /* only after such a round-up */
        d /= 10;
        p--;
    }
    return (dec){d, p, e10};
}

/* The general path of shortest (tiny, huge and denormal values): y in 128/192-bit integers, the
 * distances in doubles. e10 is the estimate of shortest. */
__attribute__((noinline)) static dec shortest_general(float x, uint32_t m, int e, bool lower_closer,
                                                      int e10) {
    int k = 8 - e10;
    scaled y = scale(m, e, k);
    while (y.t >= 1000000000u || y.t < 100000000u) { /* rare: see above */
        e10 += y.t >= 1000000000u ? 1 : -1;
        k = 8 - e10;
        y = scale(m, e, k);
    }

    /* Half-gaps to the neighbours in units of y: 2^(e-1) 10^k; the gap below is half as wide
     * at a power of two above the smallest normal exponent. */
    double w_up = k >= 0 ? pow10_d[k] * pow2(e - 1) : pow2(e - 1) * pow10_neg_d[-k];
    double w_down = lower_closer ? w_up / 2 : w_up;

    /* The p-digit candidate is T rounded half-even (on the exact y) to p digits, and it reads
     * back when its distance to y is below the half-gap on its side; when it is below y and
     * misses, the one a unit above is tried against the (wider) gap above. Distances are at
     * most 10^(9-p) / 2, so from some p_sure on every candidate reads back; below it, a p-digit
     * decimal that reads back implies a (p+1)-digit one does (see the top of the file), so the
     * search goes down from p_sure and stops at the first p where none does. Candidates within
     * 1e-6 of the half-gap go to strtod (double rounding or a tie may decide them). */
    uint32_t t = (uint32_t)y.t;
    double w_min = w_down * (1.0 - 1e-6);
    int p = 9;
    while (p > 1 && (double)(pow10_32[10 - p] / 2) < w_min)
        p--;
    double dist;
    bool up;
    uint32_t d = p == 9 ? t + (y.half > 0 || (y.half == 0 && (t & 1))) : shorter(&y, p, &dist, &up);
    while (p > 1) {
        uint32_t d1 = shorter(&y, p - 1, &dist, &up);
        double w = up ? w_up : w_down;
        bool ok = dist < w * (1.0 - 1e-6);
        if (!ok && dist <= w * (1.0 + 1e-6))
            ok = reads_back_exact(d1, p - 1, e10, x);
        if (!ok && !up && lower_closer) { /* the gap above is twice as wide: try a unit up */
            d1++;
            dist = (double)pow10_32[10 - p] - dist;
            ok = dist < w_up * (1.0 - 1e-6) ||
                 (dist <= w_up * (1.0 + 1e-6) && reads_back_exact(d1, p - 1, e10, x));
        }
        if (!ok)
            break;
        d = d1;
        p--;
    }
    if (d == pow10_32[p]) { /* rounded up to the next power of ten */
        d = pow10_32[p - 1];
        e10++;
    }
    while (p > 1 && d % 10 == 0) { /* only after such a round-up */
        d /= 10;
        p--;
    }
    return (dec){d, p, e10};
}

/* Writes f (finite) at o; returns the end. Writes up to 17 bytes past o. */
static inline char *put_float(char *o, float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    *o = '-';
    o += bits >> 31;
    uint32_t be = (bits >> 23) & 0xFF, fr = bits & 0x7FFFFF;
    if ((be == 0 && fr == 0) || be == 0xFF) { /* zero; a non-finite f breaks the contract */
        *o = '0';
        return o + 1;
    }
    uint32_t m = be ? fr | 0x800000 : fr;
    int e = be ? (int)be - 150 : -149;
    return put_dec(o, shortest(fabsf(f), m, e, fr == 0 && be > 1));
}

size_t ref_float_write(char *buf, float f) {
    char tmp[40];
    size_t n = (size_t)(put_float(tmp, f) - tmp);
    memcpy(buf, tmp, n);
    return n;
}

char *ref_floats_write(char *o, const float *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        o = put_float(o, v[i]);
        *o = ',';
        o += i + 1 < n;
    }
    return o;
}
