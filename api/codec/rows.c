/* rows.c - rows of JSON numbers, the bulk of a request's nested float arrays, 64 bytes at a
 * time: checked for apip_json_check (apip_num_row_check) and read as float32 for the tensor
 * reader (apip_jv_float_row), each number read exactly as apip_jv_float reads it (correctly
 * rounded to a double, then that double rounded to float32).
 *
 * Checking: every byte of a 64-byte block is classified (digit, '0', '-', '+', '.', 'e' or 'E',
 * ',', whitespace) into one bit mask per class, and the grammar of a row of numbers (RFC 8259:
 * -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, separated by commas with whitespace around them,
 * up to the ']') is checked on the masks: a token is a run of number bytes; each run of digits
 * must start where a token starts (after its '-'), after a '.' or after the 'e' (and its sign),
 * and must end where its kind allows (an integer part before '.', 'e' or the token's end; a
 * fraction before 'e' or the end; an exponent at the end), found with one addition per kind
 * (adding a run's first bit carries to the bit after its last); token starts and commas must
 * alternate (the parity of their count so far, a prefix XOR). What crosses into the next block
 * is carried. A row the masks accept is valid JSON; anything else (a string in the row, an
 * error) is left to the byte-by-byte check, which then finds the error and its place.
 *
 * Reading, with AVX-512 (VBMI2) where the CPU has it: 64-byte windows, 48 bytes apart; the
 * tokens that start in the first 48 bytes are found from the masks, their starts, ends and
 * points compressed into vectors of positions; per four tokens, one byte permute gathers each
 * token's digits right-aligned into a 16-byte group (the point skipped), multiply-adds make
 * 8-digit halves and then the integer w (at most 15 digits, so w < 2^53), and the value is
 * w 10^-f for f fraction digits: a double product, rounded to float32 (near_to_float says why
 * that is exact but within 3 units of a float midpoint, which goes to the exact path). Windows
 * with exponents, longer numbers or tokens that do not end in them are read number by number.
 * Elsewhere (SSE2): the tokens of a 64-byte block from its masks, then each number with one
 * 16-byte load for its shape and one for its digits.
 *
 * Bounds: loads stay inside [p, lim) (the text from the row's first number to the end of the
 * tensor's value); a block that would pass lim is copied into a padded buffer first. */
#include <math.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#define ROWS_AVX512 1 /* rows with AVX-512 where the CPU has it (chosen at run time) */
#include <immintrin.h>
#endif

#include "codec.h"

static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

/* ---- Checking ----------------------------------------------------------------------------- */

/* The classes of the bytes of a 64-byte block, bit i for byte i: digits, '0', '-', '+', '.',
 * 'e' or 'E', ',' and JSON whitespace. */
typedef struct row_masks {
    uint64_t d, z, mi, pl, dot, ex, c, w;
} row_masks;

/* What the check carries from one block to the next: bit 63 of masks of the previous block (as
 * bit 0), the carries of the three run additions, and the parity of token starts and commas. */
typedef struct row_state {
    uint64_t t, ex, dot, mi_ts, sgn, good_z;
    uint64_t ci, cf, par;
} row_state;

/* a + b + *carry, with the carry out in *carry. */
__attribute__((always_inline)) static inline uint64_t add_carry(uint64_t a, uint64_t b,
                                                                uint64_t *carry) {
    uint64_t s, t;
    uint64_t c1 = __builtin_add_overflow(a, b, &s);
    uint64_t c2 = __builtin_add_overflow(s, *carry, &t);
    *carry = c1 | c2;
    return t;
}

/* Bit i: the parity of bits 0..i of x. */
__attribute__((always_inline)) static inline uint64_t prefix_xor(uint64_t x) {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    return x;
}

/* Checks one block of a row of numbers from its masks m, with what the blocks before carried
 * in *c. Returns the offset of the first byte of no class (where the row must end: the caller
 * checks that it is ']') when everything before it is valid and the row may end there, 64 when
 * the whole block is valid and the row goes on, -1 when the text is not a valid row. */
__attribute__((always_inline)) static inline int row_block(const row_masks *m, row_state *c) {
    uint64_t T = m->d | m->mi | m->pl | m->dot | m->ex; /* the bytes of numbers */
    uint64_t other = ~(T | m->c | m->w);
    uint64_t endbit = other & (0 - other);
    uint64_t in = endbit ? endbit | (endbit - 1) : ~(uint64_t)0; /* up to the end byte */
    uint64_t TS = T & ~(T << 1 | c->t);                          /* token starts */
    uint64_t prev_ex = m->ex << 1 | c->ex, prev_dot = m->dot << 1 | c->dot;
    uint64_t mi_ts = m->mi & TS, sgn = m->mi | m->pl;
    uint64_t good = m->d & (TS | mi_ts << 1 | c->mi_ts); /* integer parts' first digits */
    uint64_t frac = m->d & prev_dot;                     /* fractions' */
    uint64_t good_z = good & m->z;
    /* What may come before each byte: a sign starts a token or follows 'e', a '+' follows 'e';
     * after a sign or a '.' comes a digit, after 'e' a sign or a digit; a '.' comes just after
     * an integer part, an 'e' after an integer part or a fraction; no digit follows the 0 that
     * starts an integer part. With these, a token starts with a digit or '-', every run of
     * digits starts after one of those places, and each run ends where its kind allows. */
    uint64_t int_end = add_carry(m->d, good, &c->ci) & ~m->d; /* just after each run */
    uint64_t frac_end = add_carry(m->d, frac, &c->cf) & ~m->d;
    uint64_t bad = (m->mi & ~(TS | prev_ex)) | (m->pl & ~prev_ex) |
                   ((sgn << 1 | c->sgn | prev_dot) & ~m->d) | (prev_ex & ~(m->d | sgn)) |
                   (m->dot & ~int_end) | (m->ex & ~(int_end | frac_end)) |
                   ((good_z << 1 | c->good_z) & m->d);
    /* token starts and commas alternate, a token first: odd parity at a token start */
    uint64_t par = prefix_xor(TS | m->c) ^ (0 - c->par);
    bad |= (TS & ~par) | (m->c & par);
    if (bad & in)
        return -1;
    if (endbit)
        return par & endbit ? __builtin_ctzll(endbit) : -1; /* the last was a number */
    *c = (row_state){T >> 63,      m->ex >> 63, m->dot >> 63, mi_ts >> 63, sgn >> 63,
                     good_z >> 63, c->ci,       c->cf,        par >> 63};
    return 64;
}

/* The check's loop over the blocks at p (up to e), with CLASSIFY filling the masks of 64 bytes;
 * a block that would pass e is copied into a buffer padded with NUL (of no class, so the row
 * cannot end in the padding with a ']'). */
#define ROW_CHECK_LOOP(CLASSIFY)                                                                   \
    row_state st = {0, 0, 0, 0, 0, 0, 0, 0, 0};                                                    \
    char tail[64];                                                                                 \
    for (const char *q = p;; q += 64) {                                                            \
        const char *b = q;                                                                         \
        if (e - q < 64) {                                                                          \
            memcpy(tail, q, (size_t)(e - q));                                                      \
            memset(tail + (e - q), 0, (size_t)(64 - (e - q)));                                     \
            b = tail;                                                                              \
        }                                                                                          \
        row_masks m;                                                                               \
        CLASSIFY(b, &m);                                                                           \
        int at = row_block(&m, &st);                                                               \
        if (at < 0)                                                                                \
            return NULL;                                                                           \
        if (at < 64)                                                                               \
            return at < e - q && b[at] == ']' ? q + at + 1 : NULL;                                 \
    }

#ifdef __SSE2__
static inline void classify_sse2(const char *q, row_masks *m) {
    const __m128i lo = _mm_set1_epi8('0' - 1), hi = _mm_set1_epi8('9' + 1);
    *m = (row_masks){0, 0, 0, 0, 0, 0, 0, 0};
    for (int k = 0; k < 4; k++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(q + 16 * k));
        __m128i dg = _mm_and_si128(_mm_cmpgt_epi8(x, lo), _mm_cmplt_epi8(x, hi));
        __m128i ws = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8(' ')),
                                               _mm_cmpeq_epi8(x, _mm_set1_epi8('\t'))),
                                  _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\n')),
                                               _mm_cmpeq_epi8(x, _mm_set1_epi8('\r'))));
        __m128i ex = _mm_cmpeq_epi8(_mm_or_si128(x, _mm_set1_epi8(0x20)), _mm_set1_epi8('e'));
        int s = 16 * k;
        m->d |= (uint64_t)(unsigned)_mm_movemask_epi8(dg) << s;
        m->z |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('0'))) << s;
        m->mi |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('-'))) << s;
        m->pl |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('+'))) << s;
        m->dot |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('.'))) << s;
        m->ex |= (uint64_t)(unsigned)_mm_movemask_epi8(ex) << s;
        m->c |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8(','))) << s;
        m->w |= (uint64_t)(unsigned)_mm_movemask_epi8(ws) << s;
    }
}

static const char *check_sse2(const char *p, const char *e) {
    ROW_CHECK_LOOP(classify_sse2)
}
#endif

#ifdef ROWS_AVX512
#define AVX512BW_TARGET __attribute__((target("avx512f,avx512bw,bmi2")))

/* The byte classes' constants: '0', 9, '0', '-', '+', '.', 0x20, 'e', ',', and the
 * whitespace table (the byte a table indexed by the low nibble gives is the byte itself, for
 * whitespace; a byte with the high bit set gives 0). */
static const char class_consts[9][64] __attribute__((aligned(64))) = {
#define ROW64(c)                                                                                   \
    {                                                                                              \
        c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c,  \
            c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, \
            c, c, c, c, c                                                                          \
    }
    ROW64('0'),
    ROW64(9),
    ROW64('-'),
    ROW64('+'),
    ROW64('.'),
    ROW64(0x20),
    ROW64('e'),
    ROW64(','),
#undef ROW64
#define WS16 ' ', -1, -1, -1, -1, -1, -1, -1, -1, '\t', '\n', -1, -1, '\r', -1, -1
    {WS16, WS16, WS16, WS16},
#undef WS16
};

AVX512BW_TARGET static inline void classify_avx512(const char *q, row_masks *m) {
    const __m512i *k = (const __m512i *)(const void *)class_consts;
    __m512i x = _mm512_loadu_si512((const void *)q);
    m->d = _cvtmask64_u64(_mm512_cmple_epu8_mask(_mm512_sub_epi8(x, k[0]), k[1]));
    m->z = _cvtmask64_u64(_mm512_cmpeq_epi8_mask(x, k[0]));
    m->mi = _cvtmask64_u64(_mm512_cmpeq_epi8_mask(x, k[2]));
    m->pl = _cvtmask64_u64(_mm512_cmpeq_epi8_mask(x, k[3]));
    m->dot = _cvtmask64_u64(_mm512_cmpeq_epi8_mask(x, k[4]));
    m->ex = _cvtmask64_u64(_mm512_cmpeq_epi8_mask(_mm512_or_si512(x, k[5]), k[6]));
    m->c = _cvtmask64_u64(_mm512_cmpeq_epi8_mask(x, k[7]));
    m->w = _cvtmask64_u64(_mm512_cmpeq_epi8_mask(_mm512_shuffle_epi8(k[8], x), x));
    /* keep the masks in general registers: the grammar's 64-bit logic runs faster there */
    __asm__("" : "+r"(m->d), "+r"(m->z), "+r"(m->mi), "+r"(m->pl));
    __asm__("" : "+r"(m->dot), "+r"(m->ex), "+r"(m->c), "+r"(m->w));
}

AVX512BW_TARGET static const char *check_avx512(const char *p, const char *e) {
    ROW_CHECK_LOOP(classify_avx512)
}
#endif

/* ---- Reading ------------------------------------------------------------------------------ */

static inline const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
        p++;
    return p;
}

/* The row number by number, with no SIMD: for short rows, and where there is none. */
static size_t row_bytewise(const char *p, const char *lim, float *dst, size_t n, const char **end) {
    float *d = dst, *stop = dst + n;
    while (d < stop && (*p == '-' || is_digit(*p))) {
        const char *e;
        float v = apip_num_read(p, lim, &e);
        if (!isfinite(v))
            break;
        *d++ = v;
        if (*e == ',') { /* the common case first: a comma right after the number */
            p = e + 1;
        } else {
            p = skip_ws(e);
            if (*p != ',')
                break;
            p++;
        }
        p = skip_ws(p);
    }
    *end = p;
    return (size_t)(d - dst);
}

/* 10^e for e in [-22, 22], the nearest doubles (exact for e >= 0). */
static const double pow10_near[45] = {1e-22, 1e-21, 1e-20, 1e-19, 1e-18, 1e-17, 1e-16, 1e-15, 1e-14,
                                      1e-13, 1e-12, 1e-11, 1e-10, 1e-9,  1e-8,  1e-7,  1e-6,  1e-5,
                                      1e-4,  1e-3,  1e-2,  1e-1,  1e0,   1e1,   1e2,   1e3,   1e4,
                                      1e5,   1e6,   1e7,   1e8,   1e9,   1e10,  1e11,  1e12,  1e13,
                                      1e14,  1e15,  1e16,  1e17,  1e18,  1e19,  1e20,  1e21,  1e22};

/* Whether y = w * 10^e, computed as a double product with 10^e rounded (for e < 0), rounds to
 * the float that the exact value's correctly rounded double does. Two roundings of relative
 * error 2^-53 each put y within 3 ulps of the exact value (and of its double); a float
 * rounding boundary, for floats of normal size, is a double whose low 29 bits are 0x10000000
 * (the midpoint of two floats). When y's bits are more than 3 ulps from that pattern, no
 * boundary lies between y and the exact value, or on the exact value's double: both round
 * alike. Below 2^-126 the float spacing differs: not sure (but zero is exact). */
static inline bool near_sure(uint64_t bits) {
    uint64_t ex = bits >> 52 & 0x7FF;
    return (ex - 1 >= 1023 - 126 - 1) && (bits & 0x1FFFFFFFu) - (0x10000000u - 3) > 6;
}

#ifdef __SSE2__
/* Lanes i >= 16 - n of a load at lane_mask + n are all ones. */
static const char lane_mask[32] = {0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
                                   -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};

/* The number at s (in validated text), when it has at most 15 digits before any exponent and
 * [s + m - 16, s + 16) lies in [lo, lim) for its mantissa's end m: *out and true. Else false. */
static inline bool number16(const char *s, const char *lo, const char *lim, float *out) {
    if (lim - s < 16)
        return false;
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)s);
    /* the mantissa's bytes: digits and '.' ('/' never follows a number) */
    __m128i mb = _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8('-')),
                               _mm_cmplt_epi8(x, _mm_set1_epi8('9' + 1)));
    unsigned mm = (unsigned)_mm_movemask_epi8(mb),
             mp = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('.')));
    unsigned neg = ~mm & 1;                              /* a '-' first */
    unsigned m = (unsigned)__builtin_ctz(~(mm | 1));     /* the mantissa is [neg, m) */
    unsigned k = (unsigned)__builtin_ctz(mp | 1u << 16); /* the point, if before m */
    unsigned has_dot = k < m;
    unsigned nf = has_dot ? m - k - 1 : 0, nd = m - neg - has_dot;
    if (m >= 16 || (size_t)(s + m - lo) < 16)
        return false;
    long e10 = -(long)nf;
    if ((s[m] | 0x20) == 'e') { /* the exponent */
        const char *q = s + m + 1;
        bool eneg = *q == '-';
        if (*q == '+' || *q == '-')
            q++;
        long v = 0;
        for (; is_digit(*q); q++)
            if (v < 100000)
                v = v * 10 + (*q - '0');
        e10 += eneg ? -v : v;
    }
    /* The mantissa's last 16 bytes, its last digit in lane 15; the point taken out (lanes up to
     * it take their left neighbour's digit); lanes before the first digit zeroed. */
    __m128i y = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)(const void *)(s + m - 16)),
                             _mm_set1_epi8('0'));
    __m128i keep =
        _mm_loadu_si128((const __m128i *)(const void *)(lane_mask + (has_dot ? nf : 16)));
    y = _mm_or_si128(_mm_and_si128(keep, y), _mm_andnot_si128(keep, _mm_slli_si128(y, 1)));
    y = _mm_and_si128(y, _mm_loadu_si128((const __m128i *)(const void *)(lane_mask + nd)));
    /* 16 digits to two 8-digit numbers: pairs, fours, eights */
    const __m128i zero = _mm_setzero_si128(), m10 = _mm_set1_epi32(0x1000A);
    __m128i p2 = _mm_packs_epi32(_mm_madd_epi16(_mm_unpacklo_epi8(y, zero), m10),
                                 _mm_madd_epi16(_mm_unpackhi_epi8(y, zero), m10));
    __m128i p4 = _mm_madd_epi16(p2, _mm_set1_epi32(0x10064));
    __m128i p8 = _mm_madd_epi16(_mm_packs_epi32(p4, p4), _mm_set1_epi32(0x12710));
    uint64_t hl = (uint64_t)_mm_cvtsi128_si64(p8);
    uint64_t w = (hl & 0xFFFFFFFFu) * 100000000u + (hl >> 32);
    if (e10 >= -22 && e10 <= 22) {
        double v = (double)w * pow10_near[e10 + 22];
        v = neg ? -v : v;
        uint64_t bits;
        memcpy(&bits, &v, sizeof bits);
        if (__builtin_expect(near_sure(bits), 1)) {
            *out = (float)v;
            return true;
        }
    }
    const char *q = s + m; /* the exact path needs the number's end */
    while (*q == 'e' || *q == 'E' || *q == '+' || *q == '-' || is_digit(*q))
        q++;
    *out = apip_num_decimal(neg, w, e10, s, q);
    return true;
}

/* The number at s into *out; false when it is not finite (the caller stops there). */
static inline bool one_number(const char *s, const char *lo, const char *lim, float *out) {
    const char *e;
    if (!number16(s, lo, lim, out))
        *out = apip_num_read(s, lim, &e);
    return isfinite(*out);
}

/* Bit i: byte i of the 64 at q belongs to a number (a digit, '-', '+', '.', 'e', 'E'); *sep:
 * it is a comma or whitespace. For validated text before any string: there, '/' and the bytes
 * below 0x20 that are not whitespace do not occur. */
static inline uint64_t row_tokens(const char *q, uint64_t *sep) {
    uint64_t t = 0, s = 0;
    for (int k = 0; k < 4; k++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(q + 16 * k));
        __m128i comma = _mm_cmpeq_epi8(x, _mm_set1_epi8(','));
        __m128i num =
            _mm_andnot_si128(comma, _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8('+' - 1)),
                                                  _mm_cmplt_epi8(x, _mm_set1_epi8('9' + 1))));
        num = _mm_or_si128(
            num, _mm_cmpeq_epi8(_mm_or_si128(x, _mm_set1_epi8(0x20)), _mm_set1_epi8('e')));
        __m128i ws = _mm_or_si128(comma, _mm_cmplt_epi8(x, _mm_set1_epi8(0x21)));
        t |= (uint64_t)(unsigned)_mm_movemask_epi8(num) << (16 * k);
        s |= (uint64_t)(unsigned)_mm_movemask_epi8(ws) << (16 * k);
    }
    *sep = s;
    return t;
}

/* The tokens of each 64-byte block from its masks, then each number by one_number. */
static size_t row_sse2(const char *p, const char *lim, float *dst, size_t n, const char **end) {
    size_t k = 0;
    uint64_t prev_t = 0;
    char tail[64];
    for (const char *q = p;; q += 64) {
        uint64_t sep, T;
        if (lim - q >= 64) {
            T = row_tokens(q, &sep);
        } else {
            size_t r = lim > q ? (size_t)(lim - q) : 0;
            memcpy(tail, q, r);
            memset(tail + r, 'x', 64 - r); /* of no class: the row stops there */
            T = row_tokens(tail, &sep);
        }
        uint64_t other = ~(T | sep);
        uint64_t before = other ? (other & (0 - other)) - 1 : ~(uint64_t)0;
        for (uint64_t ts = T & ~(T << 1 | prev_t) & before; ts; ts &= ts - 1) {
            const char *s = q + __builtin_ctzll(ts);
            if (k == n || !one_number(s, p, lim, &dst[k])) {
                *end = s;
                return k;
            }
            k++;
        }
        if (other) {
            *end = q + __builtin_ctzll(other);
            return k;
        }
        prev_t = T >> 63;
    }
}
#endif

#ifdef ROWS_AVX512
#define AVX512_TARGET                                                                              \
    __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx512vbmi2,bmi,bmi2,"    \
                          "popcnt")))

/* 10^-i for i in [0, 16), the nearest doubles, for a 16-entry permute. */
static const double pow10_neg[16] = {1e0,  1e-1, 1e-2,  1e-3,  1e-4,  1e-5,  1e-6,  1e-7,
                                     1e-8, 1e-9, 1e-10, 1e-11, 1e-12, 1e-13, 1e-14, 1e-15};

/* Four tokens, one per 16-lane group; in every lane of group g, token g's end bE (in the
 * window), its fraction digits bSH (16 when it has no point) and its digits bND; xd is the
 * window less '0'. Gathers each
 * token's digits right-aligned into its group (lanes before the point take the byte before:
 * the point is skipped; lanes before the first digit are zero) and sums them into four 4-digit
 * numbers per group (32-bit lanes, the most significant first). */
AVX512_TARGET static inline __m512i digits_quads(__m512i bE, __m512i bSH, __m512i bND, __m512i xd,
                                                 __m512i lane16) {
    const __m512i c16 = _mm512_set1_epi8(16), one = _mm512_set1_epi8(1);
    __mmask64 before_dot = _mm512_cmplt_epi8_mask(lane16, _mm512_sub_epi8(c16, bSH));
    __m512i idx = _mm512_add_epi8(bE, _mm512_sub_epi8(lane16, c16));
    idx = _mm512_mask_sub_epi8(idx, before_dot, idx, one);
    __mmask64 digit = _mm512_cmpge_epi8_mask(lane16, _mm512_sub_epi8(c16, bND));
    __m512i dg = _mm512_maskz_permutexvar_epi8(digit, idx, xd);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(dg, _mm512_set1_epi16(0x010A)),
                             _mm512_set1_epi32(0x00010064));
}

/* Reads the tokens t in [g, g + cnt) of a window (ends E, fraction digits NF, the same or 16
 * without a point SH, digits ND, signs neg as bit t) into dst[t - g]: 8 at a time, two groups of
 * four. Returns the lanes (bit i of the 8-bit mask, lane i holding token g + i / 2 + 4 (i & 1))
 * that near_sure doubts. */
AVX512_TARGET static inline unsigned window_eight(float *dst, unsigned g, unsigned cnt, __m512i E,
                                                  __m512i NF, __m512i SH, __m512i ND, uint64_t neg,
                                                  __m512i xd, __m512i lane16, __m512i group) {
    __m512i bia = _mm512_add_epi8(group, _mm512_set1_epi8((char)g));
    __m512i bib = _mm512_add_epi8(bia, _mm512_set1_epi8(4));
    __m512i bNFa = _mm512_permutexvar_epi8(bia, NF), bNFb = _mm512_permutexvar_epi8(bib, NF);
    __m512i qa = digits_quads(_mm512_permutexvar_epi8(bia, E), _mm512_permutexvar_epi8(bia, SH),
                              _mm512_permutexvar_epi8(bia, ND), xd, lane16);
    __m512i qb = digits_quads(_mm512_permutexvar_epi8(bib, E), _mm512_permutexvar_epi8(bib, SH),
                              _mm512_permutexvar_epi8(bib, ND), xd, lane16);
    /* 8-digit halves; then w in 64-bit lane 2L for token g + L, 2L + 1 for g + 4 + L */
    __m512i p8 = _mm512_madd_epi16(_mm512_packus_epi32(qa, qb), _mm512_set1_epi32(0x00012710));
    __m512i w = _mm512_add_epi64(_mm512_mul_epu32(p8, _mm512_set1_epi64(100000000)),
                                 _mm512_srli_epi64(p8, 32));
    __m512i nf =
        _mm512_and_si512(_mm512_mask_blend_epi64(0xAA, bNFa, bNFb), _mm512_set1_epi64(0xFF));
    __m512d y = _mm512_mul_pd(
        _mm512_cvtepu64_pd(w),
        _mm512_permutex2var_pd(_mm512_loadu_pd(pow10_neg), nf, _mm512_loadu_pd(pow10_neg + 8)));
    unsigned nb = (unsigned)(neg >> g);
    y = _mm512_mask_xor_pd(y, (__mmask8)(_pdep_u32(nb & 15, 0x55) | _pdep_u32(nb >> 4 & 15, 0xAA)),
                           y, _mm512_set1_pd(-0.0));
    /* near_sure on every lane */
    __m512i bits = _mm512_castpd_si512(y);
    __m512i ex = _mm512_and_si512(_mm512_srli_epi64(bits, 52), _mm512_set1_epi64(0x7FF));
    __mmask8 doubt = _mm512_cmplt_epu64_mask(_mm512_sub_epi64(ex, _mm512_set1_epi64(1)),
                                             _mm512_set1_epi64(1023 - 126 - 1)) |
                     _mm512_cmple_epu64_mask(
                         _mm512_sub_epi64(_mm512_and_si512(bits, _mm512_set1_epi64(0x1FFFFFFF)),
                                          _mm512_set1_epi64(0x10000000 - 3)),
                         _mm512_set1_epi64(6));
    __m256 f = _mm256_permutexvar_ps(_mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7), _mm512_cvtpd_ps(y));
    _mm256_mask_storeu_ps(dst, (__mmask8)((1u << cnt) - 1), f);
    return doubt;
}

/* The window reader (see the file's opening comment). */
AVX512_TARGET static size_t row_avx512(const char *p, const char *lim, float *dst, size_t n,
                                       const char **end) {
    const __m512i iota = _mm512_set_epi8(
        63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41,
        40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18,
        17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i lane16 = _mm512_and_si512(iota, _mm512_set1_epi8(15)); /* lane in its group */
    const __m512i group = _mm512_srli_epi16(_mm512_andnot_si512(_mm512_set1_epi8(15), iota), 4);
    const __m512i one = _mm512_set1_epi8(1);
    size_t k = 0;
    uint64_t prev_t = 0; /* byte 47 of the window before is a number's */
    char tail[64];
    for (const char *q = p;; q += 48) {
        const char *b = q;
        if (lim - q < 64) {
            size_t r = lim > q ? (size_t)(lim - q) : 0;
            memcpy(tail, q, r);
            memset(tail + r, 'x', 64 - r); /* of no class: the row stops there */
            b = tail;
        }
        __m512i x = _mm512_loadu_si512((const void *)b);
        __m512i xd = _mm512_sub_epi8(x, _mm512_set1_epi8('0'));
        uint64_t D = _mm512_cmple_epu8_mask(xd, _mm512_set1_epi8(9));
        uint64_t Dot = _mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8('.'));
        uint64_t Mi = _mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8('-'));
        uint64_t ExPl = _mm512_cmpeq_epi8_mask(_mm512_or_si512(x, _mm512_set1_epi8(0x20)),
                                               _mm512_set1_epi8('e')) |
                        _mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8('+'));
        uint64_t Sep = _mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8(',')) |
                       _mm512_cmple_epu8_mask(x, _mm512_set1_epi8(' '));
        uint64_t T = D | Dot | Mi | ExPl;
        uint64_t other = ~(T | Sep);
        unsigned stop = other ? (unsigned)__builtin_ctzll(other) : 64;
        uint64_t after_t = T << 1 | prev_t;
        uint64_t TS = T & ~after_t & _bzhi_u64(~(uint64_t)0, stop < 48 ? stop : 48);
        uint64_t TE = ~T & after_t; /* just after each token */
        prev_t = T >> 47 & 1;
        uint64_t run = D & D >> 1; /* bit i: digits i..i+15 (a number too long for the vectors) */
        run &= run >> 2;
        run &= run >> 4;
        run &= run >> 8;
        if (TS && run) {
            for (uint64_t ts = TS; ts; ts &= ts - 1) { /* number by number */
                const char *s = q + __builtin_ctzll(ts);
                const char *e;
                if (k == n || !isfinite(dst[k] = apip_num_read(s, lim, &e))) {
                    *end = s;
                    return k;
                }
                k++;
            }
        } else if (TS) {
            unsigned s0 = (unsigned)__builtin_ctzll(TS), nt = (unsigned)__builtin_popcountll(TS);
            uint64_t after_s0 = ~_bzhi_u64(~(uint64_t)0, s0 + 1);
            uint64_t ends = TE & after_s0;
            uint64_t last = _pdep_u64((uint64_t)1 << (nt - 1), ends); /* 0: not in the window */
            uint64_t span = (last - 1) & after_s0;
            __m512i S = _mm512_maskz_compress_epi8(TS, iota);
            __m512i E = _mm512_maskz_compress_epi8(ends, iota);
            uint64_t dot_end = (T + Dot) & ~T; /* the ends of tokens with a point */
            __m512i P = _mm512_maskz_compress_epi8((Dot | (TE & ~dot_end)) & (span | last), iota);
            uint64_t neg =
                _mm512_cmpeq_epi8_mask(_mm512_permutexvar_epi8(S, x), _mm512_set1_epi8('-'));
            uint64_t has_dot = _mm512_cmplt_epu8_mask(P, E);
            __m512i NF = _mm512_maskz_sub_epi8(has_dot, _mm512_sub_epi8(E, P), one);
            /* the lanes before the point (in 16): 16 - NF, and none without a point */
            __m512i SH = _mm512_mask_blend_epi8(has_dot, _mm512_set1_epi8(16), NF);
            __m512i ND = _mm512_sub_epi8(E, S);
            ND = _mm512_mask_sub_epi8(ND, neg, ND, one);
            ND = _mm512_mask_sub_epi8(ND, has_dot, ND, one);
            bool per_number =
                !last || (ExPl & span) ||
                (_mm512_cmpgt_epu8_mask(ND, _mm512_set1_epi8(15)) & _bzhi_u64(~(uint64_t)0, nt));
            if (per_number) {
                for (uint64_t ts = TS; ts; ts &= ts - 1) {
                    const char *s = q + __builtin_ctzll(ts);
                    const char *e;
                    if (k == n || !isfinite(dst[k] = apip_num_read(s, lim, &e))) {
                        *end = s;
                        return k;
                    }
                    k++;
                }
            } else {
                for (unsigned g = 0; g < nt; g += 8) {
                    unsigned cnt = nt - g < 8 ? nt - g : 8;
                    if (cnt > n - k)
                        cnt = (unsigned)(n - k);
                    unsigned doubt =
                        window_eight(dst + k, g, cnt, E, NF, SH, ND, neg, xd, lane16, group);
                    for (; doubt; doubt &= doubt - 1) { /* the exact path */
                        unsigned i = (unsigned)__builtin_ctz(doubt), t = i / 2 + (i & 1) * 4;
                        const char *e;
                        if (t < cnt)
                            dst[k + t] = apip_num_read(
                                q + __builtin_ctzll(_pdep_u64((uint64_t)1 << (g + t), TS)), lim,
                                &e);
                    }
                    k += cnt;
                    if (k == n && g + cnt < nt) {
                        *end = q + __builtin_ctzll(_pdep_u64((uint64_t)1 << (g + cnt), TS));
                        return k;
                    }
                }
            }
        }
        if (stop < 48) {
            *end = q + stop;
            return k;
        }
    }
}
#endif

/* ---- Counting ---------------------------------------------------------------------------- */

/* The commas in [p, e), or -1 when one of '[', '{', '}', '"' is there (a row of numbers, or of
 * literals, has none: its elements are then the commas plus one). */
static long commas_bytewise(const char *p, const char *e) {
    long n = 0;
    for (; p < e; p++) {
        if (*p == '[' || *p == '{' || *p == '}' || *p == '"')
            return -1;
        n += *p == ',';
    }
    return n;
}

#ifdef __SSE2__
/* The commas of the 16 bytes at p whose bits are set in keep, or -1 (see commas_bytewise). */
static inline long commas16(const char *p, unsigned keep) {
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i nest = _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('[')), _mm_cmpeq_epi8(x, _mm_set1_epi8('{'))),
        _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('}')), _mm_cmpeq_epi8(x, _mm_set1_epi8('"'))));
    if ((unsigned)_mm_movemask_epi8(nest) & keep)
        return -1;
    return __builtin_popcount((unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8(','))) &
                              keep);
}

static long commas_sse2(const char *p, const char *e) {
    if (e - p < 16)
        return commas_bytewise(p, e);
    long n = 0;
    for (; e - p >= 16; p += 16) {
        long c = commas16(p, 0xFFFF);
        if (c < 0)
            return -1;
        n += c;
    }
    if (p < e) { /* the last 16 bytes, but those counted already */
        long c = commas16(e - 16, 0xFFFFu << (16 - (e - p)) & 0xFFFF);
        n = c < 0 ? -1 : n + c;
    }
    return n;
}
#endif

#ifdef ROWS_AVX512
AVX512BW_TARGET static long commas_avx512(const char *p, const char *e) {
    long n = 0;
    for (;; p += 64) {
        /* the bytes up to e only: a masked load reads nothing past them */
        __mmask64 k = e - p >= 64 ? ~(__mmask64)0 : _bzhi_u64(~(uint64_t)0, (unsigned)(e - p));
        __m512i x = _mm512_maskz_loadu_epi8(k, (const void *)p);
        /* '[' and '{' are 0x5B and 0x7B: the same with bit 5 set */
        if (_mm512_mask_cmpeq_epi8_mask(k, _mm512_or_si512(x, _mm512_set1_epi8(0x20)),
                                        _mm512_set1_epi8('{')) |
            _mm512_mask_cmpeq_epi8_mask(k, x, _mm512_set1_epi8('}')) |
            _mm512_mask_cmpeq_epi8_mask(k, x, _mm512_set1_epi8('"')))
            return -1;
        n += __builtin_popcountll(_mm512_mask_cmpeq_epi8_mask(k, x, _mm512_set1_epi8(',')));
        if (e - p <= 64)
            return n;
    }
}
#endif

/* ---- Choosing ----------------------------------------------------------------------------- */

static const apip_rows_impl impls[] = {
#ifdef ROWS_AVX512
    {"avx512", check_avx512, row_avx512, commas_avx512},
#endif
#ifdef __SSE2__
    {"sse2", check_sse2, row_sse2, commas_sse2},
#endif
    {"portable", NULL, row_bytewise, commas_bytewise},
};

/* Index of the best of impls this CPU runs. */
static size_t best_impl(void) {
#ifdef ROWS_AVX512
    if (!apip_cpu_has(APIP_CPU_AVX512F | APIP_CPU_AVX512BW | APIP_CPU_AVX512DQ | APIP_CPU_AVX512VL |
                      APIP_CPU_AVX512VBMI | APIP_CPU_AVX512VBMI2 | APIP_CPU_BMI | APIP_CPU_BMI2 |
                      APIP_CPU_POPCNT))
        return 1;
#endif
    return 0;
}

const apip_rows_impl *apip_rows_impls(size_t *n) {
    size_t b = best_impl();
    *n = sizeof impls / sizeof impls[0] - b;
    return impls + b;
}

const char *apip_num_row_check(const char *p, const char *e) {
    const apip_rows_impl *r = &impls[best_impl()];
    return r->check ? r->check(p, e) : NULL;
}

long apip_num_row_commas(const char *p, const char *e) {
    return impls[best_impl()].commas(p, e);
}

size_t apip_jv_float_row(const char *p, const char *lim, float *dst, size_t n, const char **end) {
    if (lim - p < 64 || n < 4)
        return row_bytewise(p, lim, dst, n, end);
    return impls[best_impl()].read(p, lim, dst, n, end);
}
