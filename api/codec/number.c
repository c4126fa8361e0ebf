/* number.c - reads a JSON number as float32, as attnd always has (correctly rounded to a double,
 * then that double rounded to float32, what JSON parsers in other languages do), without
 * strtod for up to 19 digits: the tensor reader's path for nested arrays.
 *
 * Digits: one pass over the number into an integer w (19 digits always fit; more go to
 * strtod), so the value is D = w 10^e; runs of 8 digits at once (as the 17-digit numbers of
 * Python's and JavaScript's JSON writers have) where the caller says the text goes on. A row of
 * numbers is read in one loop (apip_jv_float_row), with no call per number.
 *
 * Conversion: w <= 2^53 and |e| <= 22 is Clinger's exact case (one correctly rounded division
 * or product of doubles). Otherwise (the idea of Eisel and Lemire's fast path, worked out here
 * for a float32 result): w, shifted to 64 significant bits, times a 64-bit 10^e (truncated;
 * pow10_norm below) gives the high 64 bits hi of D's product, with D/2^x in [hi, hi + 2) for a
 * known x. The top 24 bits of hi are the float's mantissa and the rest, t, says where D lies
 * between it and the next float: below the midpoint, above it, or within half a double's ulp
 * of it (1024 units of hi), where D reads as the midpoint as a double and then rounds to the
 * even float. t within 2 units of one of those edges (about once in 10^11), denormal results
 * and 20 or more digits go to strtod, which decides exactly. Exponents beyond the table give 0
 * or infinity outright (10^19 10^-66 is far below the smallest denormal's half, 10^39 above
 * the largest float).
 *
 * apip_jv_number reads a scalar field as a double with the same digit loop, exponent and exact
 * table (Clinger's case, else strtod). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

__extension__ typedef unsigned __int128 u128;

/* 10^0 to 10^22, exact as doubles. */
static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

#define POW10_MIN (-65)
#define POW10_MAX 38

/* pow10_norm[e - POW10_MIN] = floor(10^e / 2^(floor(log2 10^e) - 63)): 10^e to its first 64
 * bits, in [2^63, 2^64), for e in [POW10_MIN, POW10_MAX]. Made with Python's exact fractions,
 * floor_log2(x) being the largest k with 2^k <= x:
 *   from fractions import Fraction as F
 *   [(F(10)**e / F(2)**(floor_log2(F(10)**e) - 63)).__floor__() for e in range(-65, 39)] */
static const uint64_t pow10_norm[POW10_MAX - POW10_MIN + 1] = {
    0x86CCBB52EA94BAEAu, 0xA87FEA27A539E9A5u, 0xD29FE4B18E88640Eu, 0x83A3EEEEF9153E89u,
    0xA48CEAAAB75A8E2Bu, 0xCDB02555653131B6u, 0x808E17555F3EBF11u, 0xA0B19D2AB70E6ED6u,
    0xC8DE047564D20A8Bu, 0xFB158592BE068D2Eu, 0x9CED737BB6C4183Du, 0xC428D05AA4751E4Cu,
    0xF53304714D9265DFu, 0x993FE2C6D07B7FABu, 0xBF8FDB78849A5F96u, 0xEF73D256A5C0F77Cu,
    0x95A8637627989AADu, 0xBB127C53B17EC159u, 0xE9D71B689DDE71AFu, 0x9226712162AB070Du,
    0xB6B00D69BB55C8D1u, 0xE45C10C42A2B3B05u, 0x8EB98A7A9A5B04E3u, 0xB267ED1940F1C61Cu,
    0xDF01E85F912E37A3u, 0x8B61313BBABCE2C6u, 0xAE397D8AA96C1B77u, 0xD9C7DCED53C72255u,
    0x881CEA14545C7575u, 0xAA242499697392D2u, 0xD4AD2DBFC3D07787u, 0x84EC3C97DA624AB4u,
    0xA6274BBDD0FADD61u, 0xCFB11EAD453994BAu, 0x81CEB32C4B43FCF4u, 0xA2425FF75E14FC31u,
    0xCAD2F7F5359A3B3Eu, 0xFD87B5F28300CA0Du, 0x9E74D1B791E07E48u, 0xC612062576589DDAu,
    0xF79687AED3EEC551u, 0x9ABE14CD44753B52u, 0xC16D9A0095928A27u, 0xF1C90080BAF72CB1u,
    0x971DA05074DA7BEEu, 0xBCE5086492111AEAu, 0xEC1E4A7DB69561A5u, 0x9392EE8E921D5D07u,
    0xB877AA3236A4B449u, 0xE69594BEC44DE15Bu, 0x901D7CF73AB0ACD9u, 0xB424DC35095CD80Fu,
    0xE12E13424BB40E13u, 0x8CBCCC096F5088CBu, 0xAFEBFF0BCB24AAFEu, 0xDBE6FECEBDEDD5BEu,
    0x89705F4136B4A597u, 0xABCC77118461CEFCu, 0xD6BF94D5E57A42BCu, 0x8637BD05AF6C69B5u,
    0xA7C5AC471B478423u, 0xD1B71758E219652Bu, 0x83126E978D4FDF3Bu, 0xA3D70A3D70A3D70Au,
    0xCCCCCCCCCCCCCCCCu, 0x8000000000000000u, 0xA000000000000000u, 0xC800000000000000u,
    0xFA00000000000000u, 0x9C40000000000000u, 0xC350000000000000u, 0xF424000000000000u,
    0x9896800000000000u, 0xBEBC200000000000u, 0xEE6B280000000000u, 0x9502F90000000000u,
    0xBA43B74000000000u, 0xE8D4A51000000000u, 0x9184E72A00000000u, 0xB5E620F480000000u,
    0xE35FA931A0000000u, 0x8E1BC9BF04000000u, 0xB1A2BC2EC5000000u, 0xDE0B6B3A76400000u,
    0x8AC7230489E80000u, 0xAD78EBC5AC620000u, 0xD8D726B7177A8000u, 0x878678326EAC9000u,
    0xA968163F0A57B400u, 0xD3C21BCECCEDA100u, 0x84595161401484A0u, 0xA56FA5B99019A5C8u,
    0xCECB8F27F4200F3Au, 0x813F3978F8940984u, 0xA18F07D736B90BE5u, 0xC9F2C9CD04674EDEu,
    0xFC6F7C4045812296u, 0x9DC5ADA82B70B59Du, 0xC5371912364CE305u, 0xF684DF56C3E01BC6u,
    0x9A130B963A6C115Cu, 0xC097CE7BC90715B3u, 0xF0BDC21ABB48DB20u, 0x96769950B50D88F4u,
};

/* floor(e log2(10)) for |e| <= 70 (217706 / 2^16 is close enough there). */
static inline int floor_log2_pow10(int e) {
    return e >= 0 ? (e * 217706) >> 16 : -((-e * 217706 + 65535) >> 16);
}

static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

/* Whether the 8 bytes at p are all digits. */
static inline bool eight_digits(uint64_t x) {
    /* each byte 0x30..0x39: high nibble 3, and adding 6 does not carry out of the low one */
    return ((x & 0xF0F0F0F0F0F0F0F0u) | (((x + 0x0606060606060606u) & 0xF0F0F0F0F0F0F0F0u) >> 4)) ==
           0x3333333333333333u;
}

/* The value of 8 digits, the first in the lowest byte: pairs, fours, then eight. */
static inline uint64_t eight_value(uint64_t x) {
    x -= 0x3030303030303030u;
    x = (x * 10 + (x >> 8)) & 0x00FF00FF00FF00FFu;
    x = (x * 100 + (x >> 16)) & 0x0000FFFF0000FFFFu;
    return (x * 10000 + (x >> 32)) & 0xFFFFFFFFu;
}

/* Reads the digits at q into *w (w = 10 w + digit, wrapping past 2^64: the caller counts the
 * digits, and more than 19 go to strtod); returns the end. While the text goes on for 8 bytes
 * (q + 8 <= lim) and they are all digits, 8 at a time. */
static inline const char *digit_run(const char *q, const char *lim, uint64_t *w) {
    uint64_t v = *w;
    while (lim - q >= 8) {
        uint64_t x;
        memcpy(&x, q, sizeof x);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        x = __builtin_bswap64(x);
#endif
        if (!eight_digits(x))
            break;
        v = v * 100000000u + eight_value(x);
        q += 8;
    }
    for (; is_digit(*q); q++)
        v = v * 10 + (uint64_t)(*q - '0');
    *w = v;
    return q;
}

/* The exponent part at *q ('e' or 'E', a sign, digits), or 0 when there is none; *q goes past
 * it. Its magnitude stops growing at 100000, far past any float's or double's range. */
static inline long exponent(const char **qp) {
    const char *q = *qp;
    if (*q != 'e' && *q != 'E')
        return 0;
    q++;
    bool neg = *q == '-';
    if (*q == '+' || *q == '-')
        q++;
    long x = 0;
    for (; is_digit(*q); q++)
        if (x < 100000)
            x = x * 10 + (*q - '0');
    *qp = q;
    return neg ? -x : x;
}

/* The exact reading: strtod, then float. The token [p, q) is a complete JSON number followed
 * by a delimiter, so strtod reads exactly it; a locale with another decimal point would not,
 * and gives NaN rather than a misread. */
__attribute__((noinline)) static float read_strtod(const char *p, const char *q) {
    char *se = NULL;
    double v = strtod(p, &se);
    return se == q ? (float)v : NAN;
}

static float make_float(bool neg, uint32_t be, uint32_t mant) {
    uint32_t bits = (uint32_t)neg << 31 | be << 23 | (mant & 0x7FFFFFu);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The float of (-1)^neg w 10^e, the number [p, q) (for strtod when it must decide). */
__attribute__((always_inline)) static inline float decimal_to_float(bool neg, uint64_t w, long e,
                                                                    const char *p, const char *q) {
    if (w == 0 || e < POW10_MIN)
        return neg ? -0.0f : 0.0f;
    if (e > POW10_MAX)
        return neg ? -INFINITY : INFINITY;
    if (w <= (uint64_t)1 << 53 && e >= -22 && e <= 22) {
        /* Clinger: both operands exact, so one rounding, the correct one. */
        double v = (double)w;
        v = e < 0 ? v / pow10_exact[-e] : v * pow10_exact[e];
        return (float)(neg ? -v : v);
    }

    /* D / 2^x in [hi, hi + 2), hi in [2^62, 2^64). */
    int lz = __builtin_clzll(w);
    u128 prod = (u128)(w << lz) * pow10_norm[e - POW10_MIN];
    uint64_t hi = (uint64_t)(prod >> 64);
    int sh = 63 - __builtin_clzll(hi) - 23; /* bits below the float's 24: 39 or 40 */
    uint64_t mant = hi >> sh, t = hi & (((uint64_t)1 << sh) - 1);
    /* D = (mant + t / 2^sh) 2^e2; the float of mant has biased exponent e2 + 150. */
    int e2 = sh + floor_log2_pow10((int)e) + 1 - lz;
    if (e2 + 150 <= 0) /* a denormal (or zero) float: its spacing is not mant's */
        return read_strtod(p, q);
    uint64_t half = (uint64_t)1 << (sh - 1), dbl = (uint64_t)1 << (sh - 30); /* half ulps */
    uint64_t lo_e = half - dbl, hi_e = half + dbl;
    if (__builtin_expect(t + 1 == lo_e || t - (hi_e - 1) <= 1, 0))
        return read_strtod(p, q);
    mant += (uint64_t)(t > hi_e) | ((uint64_t)(t >= lo_e) & mant & 1);
    uint32_t be = (uint32_t)(e2 + 150);
    if (mant >> 24) { /* rounded up to the next power of two */
        mant >>= 1;
        be++;
    }
    if (be >= 255)
        return neg ? -INFINITY : INFINITY;
    return make_float(neg, be, (uint32_t)mant);
}

/* The number at p: *out and its end. [p, lim) may be read. */
__attribute__((always_inline)) static inline const char *number(const char *p, const char *lim,
                                                                float *out) {
    const char *q = p;
    bool neg = *q == '-';
    q += neg;
    uint64_t w = 0;
    const char *d0 = q;
    q = digit_run(q, lim, &w);
    long digits = q - d0, frac = 0, e10 = 0;
    if (*q == '.') {
        const char *f0 = ++q;
        q = digit_run(q, lim, &w);
        frac = q - f0;
        digits += frac;
    }
    e10 = exponent(&q);
    *out = digits > 19 ? read_strtod(p, q) : decimal_to_float(neg, w, e10 - frac, p, q);
    return q;
}

double apip_jv_number(const char *p, const char **end) {
    const char *q = p;
    bool neg = *q == '-';
    if (neg)
        q++;
    /* All digits into m (exact while there are at most 19); the point shifts the exponent. */
    uint64_t m = 0;
    const char *d0 = q;
    q = digit_run(q, q, &m);
    size_t ndig = (size_t)(q - d0);
    long exp10 = 0;
    if (*q == '.') {
        const char *f0 = ++q;
        q = digit_run(q, q, &m);
        ndig += (size_t)(q - f0);
        exp10 = -(long)(q - f0);
    }
    exp10 += exponent(&q);
    *end = q;
    if (ndig <= 19) {
        if (m == 0)
            return neg ? -0.0 : 0.0;
        if (m <= (1ull << 53) && exp10 >= -22 && exp10 <= 22) {
            /* Clinger's fast path: both operands exact, so one rounding, the correct one. */
            double v = (double)m;
            v = exp10 < 0 ? v / pow10_exact[-exp10] : v * pow10_exact[exp10];
            return neg ? -v : v;
        }
    }
    /* The token is a complete JSON number followed by a delimiter, so strtod reads exactly it. */
    char *se = NULL;
    double v = strtod(p, &se);
    if (se != q) /* a locale with another decimal point: never silently misread */
        return (double)NAN;
    return v;
}

float apip_jv_float(const char *p, const char **end) {
    float v;
    *end = number(p, p, &v);
    return v;
}

float apip_num_read(const char *p, const char *lim, const char **end) {
    float v;
    *end = number(p, lim, &v);
    return v;
}

float apip_num_decimal(bool neg, uint64_t w, long e, const char *p, const char *q) {
    return decimal_to_float(neg, w, e, p, q);
}
