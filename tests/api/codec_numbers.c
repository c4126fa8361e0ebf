/* codec_numbers.c - reading numbers (api/codec/number.c, rows.c): floats against strtod on a
 * million decimals (halfway cases, 17 to 25 digits, denormals, overflow), and rows of numbers read,
 * checked and counted by every implementation against a reference, at every alignment. */
#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "codec.h"
#include "v1.h"
#include "api_test.h"

/* ---- Float reading ------------------------------------------------------------------------ */

/* A decimal string for the reader, of kind k: random digits and exponents; float midpoints,
 * exact or cut to 1 to 30 digits (halfway cases and the double-rounding zone); neighbours of
 * midpoints as doubles; 17-digit doubles (what Python and JavaScript send) and 9-digit floats;
 * values around the denormals, FLT_MAX and the overflow threshold. */
static void dec_string(char *t, int k) {
    uint32_t u = (uint32_t)(rnd64() >> 32) & 0x7F7FFFFFu;
    float f;
    memcpy(&f, &u, sizeof f);
    double mid = (double)f + (double)(nextafterf(f, INFINITY) - f) / 2; /* exact */
    const char *sign = rnd64() & 1 ? "-" : "";
    int prec = (int)(rnd64() % 30);
    switch (k) {
    case 0: {
        int n = 0, digits = 1 + (int)(rnd64() % 25), ip = (int)(rnd64() % 4);
        n += sprintf(t, "%s", sign);
        if (ip == 0)
            t[n++] = '0';
        else
            for (int d = 0; d < ip; d++)
                t[n++] = (char)((d ? '0' : '1') + rnd64() % (d ? 10 : 9));
        if (digits > ip) {
            t[n++] = '.';
            for (int d = ip; d < digits; d++)
                t[n++] = (char)('0' + rnd64() % 10);
        }
        t[n] = '\0';
        if (rnd64() % 4) {
            int ex = (int)(rnd64() % 130) - 85;
            sprintf(t + n, "%c%s%d", rnd64() & 1 ? 'e' : 'E',
                    ex < 0        ? "-"
                    : rnd64() & 1 ? "+"
                                  : "",
                    abs(ex));
        }
        break;
    }
    case 1:
        sprintf(t, "%s%.*e", sign, prec, mid);
        break;
    case 2:
        sprintf(t, "%s%.*e", sign, 16 + prec % 4,
                rnd64() & 1 ? nextafter(mid, 0.0) : nextafter(mid, HUGE_VAL));
        break;
    case 3:
        sprintf(t, "%s%.17g", sign, (double)(rnd64() >> 11) / 9007199254740992.0);
        break;
    case 4:
        sprintf(t, "%s%.9g", sign, (double)f);
        break;
    default: {
        static const double around[] = {
            0x1p-149,       0x1p-150,       0x1.8p-150, 0x1p-126, 0x1.fffffcp-127,
            0x1.fffffep127, 0x1.ffffffp127, 0x1p128,    1e-45,    1e38};
        double x = around[rnd64() % (sizeof around / sizeof around[0])];
        x *= 1.0 + ((double)(rnd64() >> 11) / 9007199254740992.0 - 0.5) * 1e-7;
        sprintf(t, "%s%.*e", sign, prec, x);
        break;
    }
    }
}

/* Reads t with apip_jv_float, apip_jv_float_row and apip_jv_number; all must give
 * (float)strtod(t) bit for bit and end where t ends. */
static bool read_ok(const char *t) {
    char buf[160];
    size_t n = strlen(t);
    memcpy(buf, t, n);
    memcpy(buf + n, "]       ", 9);
    float want = (float)strtod(t, NULL), b = 0.0f;
    const char *e1 = NULL, *e2 = NULL, *e3 = NULL;
    float a = apip_jv_float(buf, &e1);
    size_t got = apip_jv_float_row(buf, buf + n + 9, &b, 1, &e2);
    float c = (float)apip_jv_number(buf, &e3);
    if (got == 0 && !isfinite(want)) { /* the row reader leaves infinities to its caller */
        b = want;
        e2 = buf + n;
    }
    if (memcmp(&a, &want, sizeof a) || memcmp(&b, &want, sizeof b) || memcmp(&c, &want, sizeof c) ||
        e1 != buf + n || e2 != buf + n || e3 != buf + n) {
        CHECK(false, "reading %s: strtod %a, apip_jv_float %a, _row %a, apip_jv_number %a", t,
              (double)want, (double)a, (double)b, (double)c);
        return false;
    }
    return true;
}

void test_float_read(void) {
    static const char *const edge[] = {
        "0",
        "-0",
        "0.0",
        "-0.0",
        "-0e5",
        "0e-999",
        "1",
        "-1",
        "0.1",
        "0.5",
        "1e-45",
        "-1e-45",
        "7e-46",
        "7.006492321624085e-46",
        "7.006492321624086e-46",
        "1.401298464324817e-45",
        "2.1019476964872256e-45",
        "1.1754942e-38",
        "1.17549435e-38",
        "1.1754943508222875e-38",
        "5.877471754111438e-39",
        "3.4028235e38",
        "-3.4028235e38",
        "3.4028236e38",
        "3.4028235677973362e38",
        "3.4028235677973366e38",
        "3.40282356779733661637539395458142568448e38",
        "3.402823567797336616375393954581425684479e38",
        "1e38",
        "1e39",
        "-1e39",
        "1e-65",
        "1e-66",
        "1e100000",
        "-1e-100000",
        "7.038531e-26",
        "7.0385307e-26",
        "7.0385310e-26",
        "16777216",
        "16777217",
        "16777219",
        "33554433",
        "1.00000005960464477539",
        "1.0000000596046447753906250",
        "1.0000000596046447753906250000000001",
        "1.00000005960464477539062499999999",
        "0.30000000000000004",
        "-0.5771224498748779",
        "123456789012345678901234567890",
        "9999999999999999999",
        "18446744073709551615",
        "18446744073709551616",
        "0.000000000000000000000000000000000000000000000000000000001",
        "1E+2",
        "1e+02",
        "12345678.5",
        "123456789.5",
        "0.1234567890123456789",
        "4.9e-324",
        "2.2250738585072014e-308",
        "1.7976931348623157e308",
        "-0.000000000000000000001"};
    size_t bad = 0;
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
        bad += !read_ok(edge[i]);
    for (int i = 0; i < 1000000 && bad < 20; i++) {
        char t[128];
        dec_string(t, i % 6);
        bad += !read_ok(t);
    }
    CHECK(bad == 0, "%zu decimals were read wrong", bad);

    /* Through the tensor reader: a (40, 500) array of such decimals, separated as JSON
     * writers do (",", ", ", newlines, whitespace before a comma), up to the last number before
     * the closing brackets. */
    enum { R = 40, C = 500 };
    sb body = {0};
    float *want = malloc(R * C * sizeof *want), *got = malloc(R * C * sizeof *got);
    sb_add(&body, "{\"x\": [");
    for (int r = 0; r < R; r++) {
        sb_add(&body, r ? ",\n [" : "[");
        for (int c = 0; c < C; c++) {
            char t[128];
            do /* finite ones: an infinity is refused (tested with the request cases) */
                dec_string(t, (r * C + c) % 5);
            while (!isfinite((float)strtod(t, NULL)));
            want[r * C + c] = (float)strtod(t, NULL);
            sb_add(&body, c == 0 ? "%s" : r % 3 == 1 ? ", %s" : r % 3 == 2 ? " ,\n\t%s" : ",%s", t);
        }
        sb_add(&body, "]");
    }
    sb_add(&body, "]}");
    apip_json_root root;
    api_error err = {0};
    apip_tensor_in tin;
    CHECK(apip_json_check(body.s, body.n, "body", &root, &err) == 0 &&
              apip_tensor_probe(&tin, "x", root.m[0].val, 4, 100000, SIZE_MAX, &err) == 0 &&
              apip_tensor_read(&tin, APIP_TENSOR_FLOAT, got, &err) == 0,
          "reading the tensor: %s", err.message);
    size_t at = 0;
    CHECK(tin.rank == 2 && tin.dims[0] == R && tin.dims[1] == C && same_bits(got, want, R * C, &at),
          "the tensor reader read element %zu as %a, strtod %a", at, (double)got[at],
          (double)want[at]);
    free(body.s), free(want), free(got);
}

/* ---- Rows of numbers (api/codec/rows.c) --------------------------------------------------- */

/* A number for the row tests, of kind k: dec_string's kinds (0-5), attnd's own output (6),
 * short decimals as Python writes round(x, 6) (7), zeros (8), and float midpoints that have at
 * most 15 digits in fixed notation, or the decimals one unit in their last digit away (9: the
 * doubtful case of the product with a rounded power of ten in rows.c). */
static void row_number(char *t, int k) {
    switch (k) {
    case 6: {
        float f = frand() * (rnd64() % 4 ? 1.0f : 1e-4f);
        t[api_float_write(t, f)] = '\0';
        break;
    }
    case 7:
        sprintf(t, "%.6f", (double)frand());
        break;
    case 8:
        sprintf(t, "%s", rnd64() % 2 ? "0" : rnd64() % 2 ? "-0" : "-0.0");
        break;
    case 9: { /* a float midpoint in [2^13, 2^49), exact in at most 15 digits, or next to it */
        int x = 13 + (int)(rnd64() % 36);
        uint32_t u = (uint32_t)(127 + x) << 23 | (uint32_t)(rnd64() & 0x7FFFFFu);
        float f;
        memcpy(&f, &u, sizeof f);
        double mid = (double)f + (double)(nextafterf(f, INFINITY) - f) / 2;
        int n = sprintf(t, "%s%.*f", rnd64() % 2 ? "-" : "", x < 24 ? 24 - x : 0, mid);
        if (n > 16) {
            sprintf(t, "%.0f", mid);
            n = (int)strlen(t);
        }
        int step = (int)(rnd64() % 3) - 1; /* the last digit one down, as is, one up */
        if (t[n - 1] > '0' && t[n - 1] < '9')
            t[n - 1] = (char)(t[n - 1] + step);
        break;
    }
    default:
        dec_string(t, k);
    }
}

static bool row_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The reference reading of a row (apip_jv_float_row's contract): (float)strtod per number, up to
 * n of them, stopping at a number that is not finite or an element that is not a number; *end
 * where it stopped (the next element, or the ']'). */
static size_t ref_row_read(const char *p, float *dst, size_t n, const char **end) {
    size_t k = 0;
    while (k < n && (*p == '-' || (*p >= '0' && *p <= '9'))) {
        char *e;
        float v = (float)strtod(p, &e);
        if (!isfinite(v))
            break;
        dst[k++] = v;
        p = e;
        while (row_ws(*p))
            p++;
        if (*p != ',')
            break;
        p++;
        while (row_ws(*p))
            p++;
    }
    *end = p;
    return k;
}

/* RFC 8259's number at p (before e), or NULL. */
static const char *ref_number(const char *p, const char *e) {
    if (p < e && *p == '-')
        p++;
    if (p >= e || !isdigit((unsigned char)*p))
        return NULL;
    if (*p == '0')
        p++;
    else
        while (p < e && isdigit((unsigned char)*p))
            p++;
    if (p < e && *p == '.') {
        if (++p >= e || !isdigit((unsigned char)*p))
            return NULL;
        while (p < e && isdigit((unsigned char)*p))
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || !isdigit((unsigned char)*p))
            return NULL;
        while (p < e && isdigit((unsigned char)*p))
            p++;
    }
    return p;
}

/* The reference check of a row (apip_num_row_check's contract): one past the ']' when [p, e)
 * starts with numbers separated by commas, whitespace around them, up to a ']'; else NULL. */
static const char *ref_row_check(const char *p, const char *e) {
    for (;;) {
        if (!(p = ref_number(p, e)))
            return NULL;
        while (p < e && row_ws(*p))
            p++;
        if (p < e && *p == ']')
            return p + 1;
        if (p >= e || *p != ',')
            return NULL;
        p++;
        while (p < e && row_ws(*p))
            p++;
    }
}

/* Appends a row of count elements to b (its '[' and ']' too), numbers of kinds from the mask
 * kinds (bit k: row_number's kind k), separators of every kind; with odd > 0, one element in
 * about odd is something else (a string, a literal, an array, an object, an infinity). */
static void sb_row(sb *b, size_t count, unsigned kinds, unsigned odd) {
    static const char *const seps[] = {
        ",", ", ", " ,", ",\n  ", "\t,\t", ",\r\n", ",                              "};
    static const char *const others[] = {"\"-inf\"", "true", "null",  "[1]",
                                         "{}",       "1e39", "-1e39", "false"};
    sb_add(b, "%s", rnd64() % 4 ? "[" : "[ \n");
    unsigned sep = (unsigned)(rnd64() % 7); /* mostly one kind per row, as writers do */
    for (size_t i = 0; i < count; i++) {
        char t[160];
        int k;
        do
            k = (int)(rnd64() % 10);
        while (!(kinds >> k & 1));
        row_number(t, k);
        if (odd && rnd64() % odd == 0)
            sprintf(t, "%s", others[rnd64() % 8]);
        if (i)
            sb_add(b, "%s", seps[rnd64() % 8 == 0 ? rnd64() % 7 : sep]);
        sb_add(b, "%s", t);
    }
    sb_add(b, "%s", rnd64() % 4 ? "]" : " \n]");
}

/* Every implementation reads rows as strtod does: rows of 1 to 40 numbers and long ones, every
 * kind of number, at every alignment to the 64-byte blocks (a prefix of 0 to 69 spaces), with
 * n at, below and above the row's length, odd elements inside, and the row at the very end of
 * an allocation of its exact size (so that ASan sees any read past it). */
void test_rows_read(void) {
    size_t nimpl = 0;
    const apip_rows_impl *impls = apip_rows_impls(&nimpl);
    CHECK(nimpl >= 1 && !strcmp(impls[nimpl - 1].name, "portable"),
          "the implementations end with the portable one");
    size_t bad = 0, rows = 0;
    for (int it = 0; it < 60000 && bad < 10; it++) {
        size_t count = it % 3 == 0 ? 40 + rnd64() % 200 : 1 + (size_t)(it % 40);
        unsigned kinds = it % 4 == 0 ? 0x3FFu : it % 4 == 1 ? 1u << 6 : 1u << (rnd64() % 10);
        unsigned odd = it % 5 == 0 ? 20 : 0;
        sb row = {0};
        size_t pad = rnd64() % 70;
        for (size_t i = 0; i < pad; i++)
            sb_add(&row, " ");
        sb_row(&row, count, kinds, odd);
        /* the exact size: nothing after the ']' (a tensor's text ends right there) */
        char *text = malloc(row.n);
        memcpy(text, row.s, row.n);
        const char *p = text + pad + 1, *lim = text + row.n;
        while (row_ws(*p))
            p++;
        size_t n = it % 7 == 0 ? rnd64() % (count + 1) : it % 7 == 1 ? count + 3 : count;
        float *want = malloc((count + 3) * sizeof *want), *got = malloc((count + 3) * sizeof *got);
        const char *we = NULL;
        size_t wn = ref_row_read(p, want, n, &we);
        for (size_t m = 0; m < nimpl; m++) {
            const char *ge = NULL;
            size_t gn = impls[m].read(p, lim, got, n, &ge);
            size_t at = 0;
            if (gn != wn || ge != we || !same_bits(got, want, wn, &at)) {
                if (bad++ < 10)
                    CHECK(false,
                          "%s read %zu numbers (strtod %zu), ended at byte %td (strtod %td), "
                          "number %zu %a (strtod %a), n %zu, row %.*s",
                          impls[m].name, gn, wn, ge - p, we - p, at, (double)got[at],
                          (double)want[at], n, (int)(lim - p), p);
            }
        }
        rows++;
        free(text), free(row.s), free(want), free(got);
    }
    CHECK(bad == 0, "%zu of %zu rows were read differently from strtod", bad, rows);
}

/* Every implementation's check of a row gives the reference grammar's verdict (and end) on
 * valid rows and on rows with one to three random edits; and apip_json_check gives the same
 * result and message with each implementation as byte by byte, for documents with such rows. */
void test_rows_check(void) {
    size_t nimpl = 0;
    const apip_rows_impl *impls = apip_rows_impls(&nimpl);
    const char alphabet[] = "0123456789.eE+-, \t\n]x[\"}";
    size_t bad = 0, accepted = 0, total = 0;
    for (int it = 0; it < 150000 && bad < 10; it++) {
        sb row = {0};
        size_t count = 1 + rnd64() % (it % 2 ? 12 : 60);
        sb_row(&row, count, 0x3FFu & ~(1u << 5), it % 9 == 0 ? 8 : 0);
        int edits = it % 4 == 0 ? 0 : 1 + (int)(rnd64() % 3);
        for (int k = 0; k < edits && row.n > 2; k++) {
            size_t at = 1 + rnd64() % (row.n - 1);
            char c = alphabet[rnd64() % (sizeof alphabet - 1)];
            int op = (int)(rnd64() % 3);
            if (op == 0) {
                row.s[at] = c;
            } else if (op == 1) {
                sb_add(&row, " ");
                memmove(row.s + at + 1, row.s + at, row.n - at - 1);
                row.s[at] = c;
            } else {
                memmove(row.s + at, row.s + at + 1, row.n - at - 1);
                row.n--;
            }
        }
        /* the row alone, cut at a random place one time in four, at the end of its allocation */
        size_t len = it % 4 == 3 ? 1 + rnd64() % row.n : row.n;
        char *text = malloc(len);
        memcpy(text, row.s, len);
        const char *p = text + 1, *e = text + len;
        while (p < e && row_ws(*p))
            p++;
        if (p < e && (*p == '-' || isdigit((unsigned char)*p))) {
            const char *want = ref_row_check(p, e);
            accepted += want != NULL;
            total++;
            for (size_t m = 0; m < nimpl; m++) {
                if (!impls[m].check)
                    continue;
                const char *got = impls[m].check(p, e);
                if (got != want && bad++ < 10)
                    CHECK(false, "%s checks the row %.*s as %s (the grammar: %s)", impls[m].name,
                          (int)(e - p), p, got ? "valid" : "invalid", want ? "valid" : "invalid");
            }
        }
        free(text);
        /* in a document: the same verdict and message whatever checks the rows */
        sb doc = {0};
        sb_add(&doc, "{\"a\": %.*s, \"b\": [", (int)row.n, row.s);
        sb_row(&doc, 1 + rnd64() % 30, 1u << 6, 0);
        sb_add(&doc, ", ");
        sb_row(&doc, 1 + rnd64() % 30, 1u << 7, 0);
        sb_add(&doc, "]}");
        char *d = malloc(doc.n);
        memcpy(d, doc.s, doc.n);
        apip_json_root r0;
        api_error e0 = {0};
        int rc0 = apip_json_check_with(d, doc.n, "the body", 64, NULL, &r0, &e0);
        for (size_t m = 0; m < nimpl; m++) {
            apip_json_root r1;
            api_error e1 = {0};
            int rc1 = apip_json_check_with(d, doc.n, "the body", 64, impls[m].check, &r1, &e1);
            if ((rc0 != rc1 || strcmp(e0.message, e1.message) || r0.n != r1.n) && bad++ < 10)
                CHECK(false, "%s: apip_json_check says \"%s\", byte by byte \"%s\": %.*s",
                      impls[m].name, e1.message, e0.message, (int)doc.n, d);
        }
        free(d), free(doc.s), free(row.s);
    }
    CHECK(bad == 0, "%zu row checks differ from the grammar or from byte by byte", bad);
    CHECK(accepted > total / 5 && accepted < total, "valid rows %zu of %zu: both kinds tested",
          accepted, total);
}

/* Appends a random JSON value for the probe test: numbers, literals, strings with brackets
 * in them, and arrays of 0 to 5 of these (of any shape) down to depth levels. */
static void sb_value(sb *b, int depth) {
    static const char *const scalars[] = {"1",      "-2.5e-3",         "0", "true", "null", "\"]\"",
                                          "\"[,\"", "{\"a\": [1, 2]}", "17"};
    if (depth == 0 || rnd64() % 5 == 0) {
        sb_add(b, "%s", scalars[rnd64() % 9]);
        return;
    }
    size_t n = rnd64() % 6;
    sb_add(b, "%s", rnd64() % 3 ? "[" : "[ ");
    for (size_t i = 0; i < n; i++) {
        if (i)
            sb_add(b, "%s", rnd64() % 2 ? "," : " , ");
        sb_value(b, depth - 1);
    }
    sb_add(b, "%s", rnd64() % 3 ? "]" : " ]");
}

/* The shape of the nested arrays at val from the first element of each level, counting the
 * elements one by one (as apip_tensor_probe did before it counted rows of numbers by their
 * commas): rank, dims and where the outer array ends. 1 when a level is empty. */
static int ref_probe(const char *val, size_t *rank, size_t *dims, const char **end) {
    *rank = 0;
    for (const char *p = val; apip_jv_kind(p) == '[' && *rank < APIP_MAX_RANK;) {
        size_t n = 0;
        const char *it = p, *el = NULL, *first = NULL;
        while (apip_jv_arr_next(&it, &el))
            if (n++ == 0)
                first = el;
        if (*rank == 0)
            *end = apip_jv_ws(it) + 1;
        if (n == 0)
            return 1;
        dims[(*rank)++] = n;
        p = first;
    }
    return 0;
}

/* apip_num_row_commas (every implementation) against a byte loop, and apip_tensor_probe's shapes
 * against counting elements one by one, on random values. */
void test_rows_count(void) {
    size_t nimpl = 0;
    const apip_rows_impl *impls = apip_rows_impls(&nimpl);
    const char alphabet[] = "0123456789.,- e,,,,[{}\"]";
    size_t bad = 0;
    for (int it = 0; it < 20000 && bad < 10; it++) {
        size_t n = rnd64() % (it % 2 ? 40 : 300);
        char *t = malloc(n ? n : 1);
        for (size_t i = 0; i < n; i++)
            t[i] =
                rnd64() % 50 ? alphabet[rnd64() % 15] : alphabet[rnd64() % (sizeof alphabet - 1)];
        long want = 0;
        for (size_t i = 0; i < n && want >= 0; i++)
            want = strchr("[{}\"", t[i]) ? -1 : want + (t[i] == ',');
        for (size_t m = 0; m < nimpl; m++) {
            long got = impls[m].commas(t, t + n);
            if (got != want && bad++ < 10)
                CHECK(false, "%s counts %ld commas (%ld) in %.*s", impls[m].name, got, want, (int)n,
                      t);
        }
        free(t);
    }
    for (int it = 0; it < 20000 && bad < 10; it++) {
        sb doc = {0};
        sb_add(&doc, "{\"x\": ");
        sb_value(&doc, 1 + (int)(rnd64() % 4));
        sb_add(&doc, "}");
        apip_json_root root;
        api_error err = {0};
        apip_tensor_in tin;
        if (apip_json_check(doc.s, doc.n, "body", &root, &err) != 0) {
            CHECK(false, "the probe test made invalid JSON: %s", doc.s);
            free(doc.s);
            continue;
        }
        size_t rank = 0, dims[APIP_MAX_RANK] = {0};
        const char *end = NULL;
        int empty = ref_probe(root.m[0].val, &rank, dims, &end);
        int rc = apip_tensor_probe(&tin, "x", root.m[0].val, APIP_MAX_RANK, 100, SIZE_MAX, &err);
        bool same = empty       ? rc != 0 && strstr(err.message, "is an empty array")
                    : rank == 0 ? rc != 0
                                : rc == 0 && tin.rank == rank && tin.end == end &&
                                      !memcmp(tin.dims, dims, rank * sizeof *dims);
        if (!same && bad++ < 10)
            CHECK(false,
                  "probing %s: rank %zu, dims %zu %zu (counted one by one: rank %zu, %zu %zu): %s",
                  doc.s, tin.rank, tin.dims[0], tin.dims[1], rank, dims[0], dims[1],
                  rc ? err.message : "ok");
        free(doc.s);
    }
    CHECK(bad == 0, "%zu comma counts or probes differ", bad);
}
