/* codec_fmt.c - the float writer (api/codec/fmt.c): api_float_write against printf, strtod and
 * jansson, and against the previous writer (tests/float_ref.c) byte for byte on millions of
 * floats; the row writer apip_floats_write, its layouts and the room it writes in. */
#include <ctype.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../float_ref.h"
#include "api.h"
#include "codec.h"
#include "api_test.h"

/* ---- Floats ------------------------------------------------------------------------------- */

/* Fewest digits p such that a p-digit decimal reads back (via strtod then float) as f, written
 * into out as "%.{p-1}e". At each p the nearest decimal (printf's "%.{p-1}e") is tried, then the
 * one a unit above it in magnitude: at a power of two the gap below f is half the gap above, so
 * the nearest can miss below while the next one up still reads back. The one a unit below the
 * nearest never does (it is on a side the nearest already missed on, and farther). */
static int ref_shortest(char *out, float f) {
    for (int p = 1; p <= 9; p++) {
        snprintf(out, 64, "%.*e", p - 1, (double)f);
        if ((float)strtod(out, NULL) == f)
            return p;
        long long d = 0;
        const char *c = out + (out[0] == '-');
        for (; *c != 'e'; c++)
            if (isdigit((unsigned char)*c))
                d = d * 10 + (*c - '0');
        char up[64];
        snprintf(up, sizeof up, "%s%llde%d", f < 0 ? "-" : "", d + 1, atoi(c + 1) - (p - 1));
        double v = strtod(up, NULL);
        if ((float)v == f) {
            snprintf(out, 64, "%.*e", p - 1, v);
            return p;
        }
    }
    return -1;
}

static int sig_digits(const char *s) {
    char m[64];
    int n = 0;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9')
            m[n++] = *s;
    int a = 0, b = n;
    while (a < n && m[a] == '0')
        a++;
    while (b > a && m[b - 1] == '0')
        b--;
    return b - a;
}

/* Checks one float: round trip, digit count and digits against the reference, and the bytes
 * against the previous writer (tests/float_ref.c). */
static bool float_ok(float f, bool against_ref) {
    char b[64], old[64];
    size_t n = api_float_write(b, f), on = ref_float_write(old, f);
    b[n] = '\0';
    old[on] = '\0';
    if (strcmp(b, old) != 0) {
        CHECK(false, "api_float_write(%a) = %s, the previous writer wrote %s", (double)f, b, old);
        return false;
    }
    float g = (float)strtod(b, NULL);
    if (memcmp(&f, &g, sizeof f) != 0) {
        CHECK(false, "api_float_write(%a) = %s reads back as %a", (double)f, b, (double)g);
        return false;
    }
    json_error_t je;
    char doc[80];
    snprintf(doc, sizeof doc, "[%s]", b);
    json_t *j = json_loads(doc, JSON_DECODE_INT_AS_REAL, &je);
    bool valid = j != NULL;
    json_decref(j);
    if (!valid) {
        CHECK(false, "api_float_write(%a) = %s is not a JSON number", (double)f, b);
        return false;
    }
    if (!against_ref || f == 0.0f)
        return true;
    char r[64], c[64];
    int p = ref_shortest(r, f), q = sig_digits(b);
    snprintf(c, sizeof c, "%.*e", q - 1, strtod(b, NULL));
    if (p != q || strcmp(c, r) != 0) {
        CHECK(false, "api_float_write(%.9g) = %s; the shortest round trip is %s", (double)f, b, r);
        return false;
    }
    return true;
}

/* The layout of a float's text t[0, n): its sign, the decimal exponent of its first significant
 * digit and its number of significant digits ("-0.00125": 1, -3, 3; "1.5e-7": 0, -7, 2). */
static void float_layout(const char *t, size_t n, int *neg, int *x, int *p) {
    size_t i = *neg = t[0] == '-';
    int point = -1, first = -1, last = -1, nd = 0;
    for (; i < n && t[i] != 'e'; i++) {
        if (t[i] == '.') {
            point = nd;
            continue;
        }
        if (t[i] != '0') {
            first = first < 0 ? nd : first;
            last = nd;
        }
        nd++;
    }
    int e = 0;
    for (size_t j = i + 1 + (i + 1 < n && t[i + 1] == '-'); j < n; j++)
        e = 10 * e + (t[j] - '0');
    *p = last - first + 1;
    *x = (point < 0 ? nd : point) - 1 - first + (i + 1 < n && t[i + 1] == '-' ? -e : e);
}

/* v[0, n) in rows of 1, 2, ..., 40, 1, ... floats, then in one row, each written by
 * apip_floats_write into got and by the previous writer into want (each with room for n floats);
 * returns how many of those rows differ. */
static size_t rows_differ(const float *v, size_t n, char *got, char *want) {
    size_t bad = 0;
    for (size_t at = 0, len = 1; at < n; at += len, len = len % 40 + 1) {
        size_t k = at + len <= n ? len : n - at;
        char *ge = apip_floats_write(got, v + at, k), *we = ref_floats_write(want, v + at, k);
        bad += !(ge - got == we - want && memcmp(got, want, (size_t)(ge - got)) == 0);
    }
    char *ge = apip_floats_write(got, v, n), *we = ref_floats_write(want, v, n);
    return bad + !(ge - got == we - want && memcmp(got, want, (size_t)(ge - got)) == 0);
}

void test_float_write(void) {
    static const struct {
        float f;
        const char *want;
    } edge[] = {{0.0f, "0"},
                {-0.0f, "-0"},
                {1e-45f, "1e-45"},
                {-1e-45f, "-1e-45"},
                {FLT_MIN, "1.1754944e-38"},
                {1.1754942e-38f, "1.1754942e-38"},
                {FLT_MAX, "3.4028235e38"},
                {-FLT_MAX, "-3.4028235e38"},
                {0.1f, "0.1"},
                {0.4f, "0.4"},
                {1.0f / 3.0f, "0.33333334"},
                {2.0f / 3.0f, "0.6666667"},
                {1.0f, "1"},
                {-2.5f, "-2.5"},
                {100.0f, "100"},
                {123456792.0f, "123456790"},
                {1e9f, "1e9"},
                {1e10f, "1e10"},
                {16777216.0f, "16777216"},
                {0.5f, "0.5"},
                {0.25f, "0.25"},
                {1e-5f, "0.00001"},
                {1.5e-5f, "0.000015"},
                {1e-6f, "1e-6"},
                {1e-14f, "1e-14"},
                {3.14159265f, "3.1415927"},
                {0.70167750f, "0.7016775"},
                /* Powers of two where the nearest 8-digit decimal misses below (the gap below is
                 * half as wide) but the next one up reads back. */
                {0x1p-96f, "1.2621775e-29"},
                {-0x1p-96f, "-1.2621775e-29"},
                {0x1p87f, "1.5474251e26"},
                {-0x1p87f, "-1.5474251e26"},
                {0x1p90f, "1.2379401e27"},
                {-0x1p90f, "-1.2379401e27"},
                /* 7.038531e-26 lies within half a double's ulp of the midpoint between these
                 * two: strtod rounds it onto the midpoint as a double, and then to the even
                 * float, the second. So the first needs 8 digits (a reader that rounds decimals
                 * straight to float32 would give it 7.038531e-26). */
                {0x1.5c87fap-84f, "7.0385307e-26"},
                {0x1.5c87fcp-84f, "7.038531e-26"},
                {-0x1.5c87fap-84f, "-7.0385307e-26"},
                /* The fast path's ends and its neighbours: 2^-30 and 2^24. */
                {0x1p-30f, "9.313226e-10"},
                {0x1.fffffep-31f, "9.313225e-10"},
                {0x1p24f, "16777216"},
                {0x1.fffffep23f, "16777215"},
                {16777218.0f, "16777218"},
                {0x1p-126f, "1.1754944e-38"},
                {0x1p-127f, "5.877472e-39"},
                {0x1p-119f, "1.5046328e-36"}};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        char b[64];
        size_t n = api_float_write(b, edge[i].f);
        b[n] = '\0';
        CHECK(strcmp(b, edge[i].want) == 0, "api_float_write(%.9g) = %s, want %s",
              (double)edge[i].f, b, edge[i].want);
        float_ok(edge[i].f, true);
    }
    /* Random bit patterns (every exponent, denormals included) against the reference. */
    size_t bad = 0;
    for (int i = 0; i < 2000000 && bad < 20; i++) {
        uint32_t u = (uint32_t)(rnd64() >> 32);
        if ((u & 0x7F800000u) == 0x7F800000u)
            continue;
        float f;
        memcpy(&f, &u, sizeof f);
        bad += !float_ok(f, true);
    }
    /* Every power of two, both signs (denormals included), against the reference. */
    for (int k = -149; k <= 127; k++) {
        bad += !float_ok(ldexpf(1.0f, k), true);
        bad += !float_ok(-ldexpf(1.0f, k), true);
    }
    /* Values attention produces: weights in [0, 1], outputs near 0, softmax tails. */
    for (int i = 0; i < 300000 && bad < 20; i++) {
        float f = i % 3 == 0   ? fabsf(frand())
                  : i % 3 == 1 ? frand() * 4.0f
                               : expf(-40.0f * fabsf(frand()));
        bad += !float_ok(f, true);
    }
    /* Every float of the binades [1, 2) and [2^-130, 2^-126) (denormals): round trip, and the
     * bytes of the previous writer. */
    for (uint32_t u = 0x3F800000u; u < 0x40000000u && bad < 20; u++) {
        float f;
        memcpy(&f, &u, sizeof f);
        char b[64], old[64];
        b[api_float_write(b, f)] = '\0';
        old[ref_float_write(old, f)] = '\0';
        if ((float)strtod(b, NULL) != f || strcmp(b, old) != 0) {
            CHECK(false, "api_float_write(%a) = %s (previous writer: %s)", (double)f, b, old);
            bad++;
        }
    }
    for (uint32_t u = 0x00100000u; u < 0x00800000u && bad < 20; u += 3) {
        float f;
        memcpy(&f, &u, sizeof f);
        char b[64], old[64];
        b[api_float_write(b, f)] = '\0';
        old[ref_float_write(old, f)] = '\0';
        if ((float)strtod(b, NULL) != f || strcmp(b, old) != 0) {
            CHECK(false, "api_float_write(%a) = %s (previous writer: %s)", (double)f, b, old);
            bad++;
        }
    }
    CHECK(bad == 0, "%zu floats were written wrong", bad);
    /* The row writer joins with commas and writes what api_float_write writes. */
    float row[4] = {1.0f, -0.5f, 0.1f, 3e-7f};
    char buf[4 * APIP_FLOAT_MAX + 32];
    char *e = apip_floats_write(buf, row, 4);
    *e = '\0';
    CHECK(strcmp(buf, "1,-0.5,0.1,3e-7") == 0, "apip_floats_write gave %s", buf);
    /* A long row of every kind of float, against the previous writer's. */
    enum { ROW = 4096 };
    float *v = malloc(ROW * sizeof *v);
    char *got = malloc(ROW * APIP_FLOAT_MAX + 32), *want = malloc(ROW * APIP_FLOAT_MAX + 32);
    for (size_t i = 0; i < ROW; i++) {
        uint32_t u = (uint32_t)(rnd64() >> 32);
        if (i % 2 == 0 || (u & 0x7F800000u) == 0x7F800000u)
            v[i] = frand() * (i % 3 ? 1.0f : 1e-3f);
        else
            memcpy(&v[i], &u, sizeof u);
    }
    v[0] = -0.0f;
    v[1] = 0.0f;
    char *ge = apip_floats_write(got, v, ROW), *we = ref_floats_write(want, v, ROW);
    CHECK(ge - got == we - want && memcmp(got, want, (size_t)(ge - got)) == 0,
          "apip_floats_write differs from the previous writer on a row of %d floats", ROW);
    /* The layouts the row writer shuffles (sign, decimal exponent -10 to 7, 1 to 9 digits),
     * and those it leaves to put_float (the longest, "-0.0000123456789", and the exponents
     * beyond): magnitudes spread evenly in log from 1e-11 to 1e8, in rows of 1 to 40 and one
     * of all (about four fifths of the layouts, few of 5 or 9 digits; every one below). */
    for (size_t i = 0; i < ROW; i++) {
        double mag = pow(10.0, -11.0 + 19.0 * (double)(rnd64() >> 11) * 0x1p-53);
        v[i] = (float)(rnd64() & 1 ? -mag : mag);
        if (i % 5 == 0) { /* short decimals: 1 to 4 significant digits */
            char d[32];
            snprintf(d, sizeof d, "%.*e", (int)(i / 5 % 4), (double)v[i]);
            v[i] = strtof(d, NULL);
        }
    }
    size_t bad_rows = rows_differ(v, ROW, got, want);
    CHECK(bad_rows == 0,
          "apip_floats_write differs from the previous writer on %zu rows of "
          "magnitudes from 1e-11 to 1e8",
          bad_rows);
    /* Every layout the row writer shuffles that a float has: for each sign, decimal exponent
     * -10 to 7 and count of 1 to 9 significant digits, a float on its fast path (in [2^-30,
     * 2^24), not a power of two) found from random decimals of that shape (and their
     * neighbours, for 8 and 9 digits), all written in rows of 1 to 40 and one of all, in a
     * random order. No such float has the 8 others of each sign (found by writing every one of
     * them): 1, 8 or 9 digits at 1e-10 (from 9.3e-10 only) and 9 at 1e-9, 1e-6, 1e-3, 1, 1e7. */
    enum { LAYOUTS = 2 * 18 * 9, NO_FLOAT = 2 * 8 };
    uint64_t lay_rng = 0x9E3779B97F4A7C15u; /* its own, so the tests after draw as before */
    float lay[LAYOUTS];
    size_t nlay = 0;
    for (int neg = 0; neg < 2; neg++)
        for (int x = -10; x <= 7; x++)
            for (int p = 1; p <= 9; p++)
                for (int t = 0; t < 20000; t++) {
                    char d[32], out[32];
                    int k = 0;
                    d[k++] = neg ? '-' : '+';
                    d[k++] = (char)('1' + rnd64_from(&lay_rng) % 9);
                    d[k++] = '.';
                    for (int j = 1; j < p; j++) /* the last digit is not 0 */
                        d[k++] = (char)(j + 1 == p ? '1' + rnd64_from(&lay_rng) % 9
                                                   : '0' + rnd64_from(&lay_rng) % 10);
                    snprintf(d + k, sizeof d - (size_t)k, "e%d", x);
                    float f = strtof(d, NULL);
                    uint32_t u;
                    memcpy(&u, &f, sizeof u);
                    if (p >= 8 && t % 2)
                        u += (uint32_t)(rnd64_from(&lay_rng) % 64) - 32;
                    memcpy(&f, &u, sizeof f);
                    float a = fabsf(f);
                    if (!(a >= 0x1p-30f && a < 0x1p24f) || (u & 0x7FFFFFu) == 0)
                        continue;
                    int gn, gx, gp;
                    float_layout(out, api_float_write(out, f), &gn, &gx, &gp);
                    if (gn == neg && gx == x && gp == p) {
                        lay[nlay++] = f;
                        break;
                    }
                }
    CHECK(nlay == LAYOUTS - NO_FLOAT, "floats found for %zu layouts, not %d", nlay,
          LAYOUTS - NO_FLOAT);
    for (size_t i = nlay; i > 1; i--) {
        size_t j = (size_t)(rnd64_from(&lay_rng) % i);
        float t = lay[i - 1];
        lay[i - 1] = lay[j], lay[j] = t;
    }
    bad_rows = rows_differ(lay, nlay, got, want);
    CHECK(bad_rows == 0,
          "apip_floats_write differs from the previous writer on %zu rows of layouts", bad_rows);
    /* The row writer's room (api/codec/codec.h): it writes nothing before o, at most 32 bytes from
     * its end on, and nothing past APIP_FLOAT_MAX * n + 32 bytes (a block of exactly that size,
     * for test-asan), in rows of 1 to 140 floats (1 to 2 chunks of 64, every tail) of every
     * kind, each row ended by each kind: a shuffled text, the 16-byte one, 1-byte ones, and
     * others put_float writes (powers of two, denormals, outside [2^-30, 2^24)). */
    enum { GUARD = 64, ROOM_N = 140 };
    const float tiny16 = -0x1.4febcap-17f; /* "-0.0000100112275", the longest text */
    char t16[32];
    CHECK(api_float_write(t16, tiny16) == 16, "%a is not written in 16 bytes", (double)tiny16);
    const float kinds[] = {0.0f,    -0.0f,  tiny16,   1.0f,     -2.0f, 0x1p-149f,
                           3.0e38f, 1.0e8f, 0.15625f, 1.5e-10f, 9.0f,  -123456.79f};
    enum { NKINDS = sizeof kinds / sizeof kinds[0] };
    char *blk = malloc(GUARD + APIP_FLOAT_MAX * ROOM_N + 32 + GUARD);
    size_t bad_room = 0, bad_text = 0;
    for (size_t n = 1; n <= ROOM_N; n++) {
        for (size_t last = 0; last < NKINDS; last++) {
            float row_v[ROOM_N];
            for (size_t i = 0; i < n; i++)
                row_v[i] = i % 3 ? v[(n * 7 + i) % ROW] : kinds[(n + i) % NKINDS];
            row_v[n - 1] = kinds[last];
            size_t room = APIP_FLOAT_MAX * n + 32;
            memset(blk, 0x5A, GUARD + room + GUARD);
            char *o = blk + GUARD, *end = apip_floats_write(o, row_v, n);
            we = ref_floats_write(want, row_v, n);
            bad_text += !(end - o == we - want && memcmp(o, want, (size_t)(we - want)) == 0);
            for (const char *q = blk; q < blk + GUARD + room + GUARD; q++)
                if ((q < o || q >= end + 32) && *q != 0x5A) {
                    bad_room++;
                    break;
                }
            char *exact = malloc(room);
            apip_floats_write(exact, row_v, n);
            free(exact);
        }
    }
    free(blk);
    CHECK(bad_text == 0 && bad_room == 0,
          "apip_floats_write: %zu rows differ from the previous writer, %zu write outside their "
          "room (before o, or 32 bytes past the end and beyond)",
          bad_text, bad_room);
    free(v), free(got), free(want);
}
