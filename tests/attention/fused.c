/* fused.c - the fused tiled path (tiles.c): each flavour's block products against sums in
 * double on ragged sizes (and the row kernels it uses on every short length), and the fused path
 * against the direct path, the tiled path on sgemm and a reference in double, within the oracle's
 * tolerance, on odd shapes: ragged blocks, both causal modes, key lengths (0 among them), key and
 * attention masks, a bias holding -inf, and rows that every key is blocked for (exact zeros).
 *
 * Legend: N batch, H heads, L query length, S key length, D and Dv the query/key and value
 * widths, W the keys of a packed panel. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "internal.h"
#include "attention_test.h"

#define ORACLE_TOL 1e-4 /* tests/oracle/run_oracle.py's TOL, absolute, for unit-scale inputs */

/* ---- The block products of each flavour ---------------------------------------------------- */

/* qk and pv of set ts on rows x cols x d (dv) against double sums; returns the worst error. */
static double tiles_case(const attnt_set *ts, size_t rows, size_t cols, size_t d, size_t dv) {
    const size_t W = ts->panel, lds = (cols + W - 1) / W * W + W, ldq = d + 3, ldk = d + 5,
                 ldv = dv + 2, lda = dv + 1;
    float *q = frand_new(rows * ldq), *k = frand_new(cols * ldk), *v = frand_new(cols * ldv);
    float *kt = malloc(lds * d * sizeof *kt), *s = malloc(rows * lds * sizeof *s);
    float *acc = frand_new(rows * lda), *acc0 = malloc(rows * lda * sizeof *acc0);
    float *rmax = malloc(rows * sizeof *rmax), *s2 = malloc(rows * lds * sizeof *s2);
    memcpy(acc0, acc, rows * lda * sizeof *acc);
    const float scale = 0.37f;
    ts->pack_kt(kt, k, ldk, cols, d);
    ts->qk(s, lds, q, ldq, rows, kt, cols, d, scale, NULL);
    ts->qk(s2, lds, q, ldq, rows, kt, cols, d, scale, rmax);
    double worst = 0;
    for (size_t i = 0; i < rows; i++) { /* the same logits, and each row's max over them */
        float m = -INFINITY;
        for (size_t j = 0; j < cols; j++) {
            m = fmaxf(m, s[i * lds + j]);
            if (s2[i * lds + j] != s[i * lds + j])
                worst = INFINITY;
        }
        if (rmax[i] != m)
            worst = INFINITY;
    }
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            double x = 0;
            for (size_t c = 0; c < d; c++)
                x += (double)q[i * ldq + c] * (double)k[j * ldk + c];
            worst = fmax(worst, fabs(x * (double)scale - (double)s[i * lds + j]));
        }
    /* pv on the logits as weights (any values do) */
    ts->pv(acc, lda, s, lds, rows, v, ldv, cols, dv);
    for (size_t i = 0; i < rows; i++)
        for (size_t c = 0; c < dv; c++) {
            double x = (double)acc0[i * lda + c];
            for (size_t j = 0; j < cols; j++)
                x += (double)s[i * lds + j] * (double)v[j * ldv + c];
            worst = fmax(worst, fabs(x - (double)acc[i * lda + c]) / (1.0 + sqrt((double)cols)));
        }
    /* the columns past dv stay as they were */
    for (size_t i = 0; i < rows; i++)
        if (acc[i * lda + dv] != acc0[i * lda + dv])
            worst = INFINITY;
    free(q), free(k), free(v), free(kt), free(s), free(acc), free(acc0), free(rmax), free(s2);
    return worst;
}

/* qk's row maxima where they are easy to get wrong: every logit negative, so that the padding
 * of the last panel (logits 0) would win; and a row whose logits are all NaN (+inf). */
static void tiles_max_case(const attnt_set *ts, const char *name) {
    const size_t W = ts->panel, d = 5, ldq = d;
    const size_t widths[] = {1, 7, W - 1, W, W + 3, 2 * W, 2 * W + 5};
    for (size_t rows = 1; rows <= 14; rows += 13)
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
            const size_t cols = widths[wi];
            const size_t lds = (cols + W - 1) / W * W;
            float *q = malloc(rows * d * sizeof *q), *k = malloc(cols * d * sizeof *k);
            float *kt = malloc(lds * d * sizeof *kt), *s = malloc(rows * lds * sizeof *s);
            float *rmax = malloc(rows * sizeof *rmax);
            for (size_t j = 0; j < cols; j++) /* key j = (1 + j / 8) (1, 2, 3, 4, 5) */
                for (size_t c = 0; c < d; c++)
                    k[j * d + c] = (1.0f + (float)j / 8.0f) * (float)(c + 1);
            for (size_t i = 0; i < rows; i++) /* query i = -(1, 2, 3, 4, 5) */
                for (size_t c = 0; c < d; c++)
                    q[i * d + c] = -(float)(c + 1);
            if (rows > 1) { /* +inf - inf: every logit of the last row is NaN, none is a max */
                q[(rows - 1) * d + 1] = -INFINITY;
                q[(rows - 1) * d + 2] = INFINITY;
            }
            ts->pack_kt(kt, k, d, cols, d);
            ts->qk(s, lds, q, ldq, rows, kt, cols, d, 0.5f, rmax);
            for (size_t i = 0; i < rows; i++) {
                float want = rows > 1 && i == rows - 1 ? INFINITY : -27.5f; /* key 0: -55 / 2 */
                CHECK(rmax[i] == want, "%s: qk row max, rows %zu cols %zu row %zu: %g, not %g",
                      name, rows, cols, i, (double)rmax[i], (double)want);
            }
            free(q), free(k), free(kt), free(s), free(rmax);
        }
    /* Two finite logits whose sum overflows are still finite: the max is theirs, not +inf. */
    float q1 = 1.0f, k1[2 * ATTN_TILE_PANEL_MAX], kt1[2 * ATTN_TILE_PANEL_MAX];
    float s1[2 * ATTN_TILE_PANEL_MAX], m1 = 0.0f;
    for (size_t j = 0; j < 2 * W; j++)
        k1[j] = 3e38f;
    ts->pack_kt(kt1, k1, 1, 2 * W, 1);
    ts->qk(s1, 2 * W, &q1, 1, 1, kt1, 2 * W, 1, 1.0f, &m1);
    CHECK(m1 == 3e38f, "%s: qk row max of logits 3e38 (their sum overflows): %g", name, (double)m1);
}

/* The softmax row kernels the fused path leans on, on every length from 1 to 40 (whole vectors,
 * tails, rows shorter than a vector): max_finite = row_max and all_finite, and exp_sum's tail. */
static void row_kernels_case(const attnk_set *ks, const char *name) {
    float x[40], y[40];
    for (size_t n = 1; n <= 40; n++) {
        for (size_t j = 0; j < n; j++)
            x[j] = 4.0f * frand();
        for (size_t bad = 0; bad < 3; bad++) {
            float saved = x[n - 1];
            if (bad == 1)
                x[n - 1] = INFINITY; /* in the tail */
            if (bad == 2)
                x[n - 1] = NAN;
            bool finite = !bad;
            float m = ks->max_finite(x, n, &finite);
            CHECK(finite == ks->all_finite(x, n) && finite == !bad &&
                      (bad == 2 || m == ks->row_max(x, n)),
                  "%s: max_finite on %zu (bad %zu): %g, finite %d", name, n, bad, (double)m,
                  finite);
            x[n - 1] = saved;
        }
        memcpy(y, x, sizeof x);
        float m = ks->row_max(x, n), sum = ks->exp_sum(y, n, m);
        double ref = 0, worst = 0;
        for (size_t j = 0; j < n; j++) {
            double e = exp((double)x[j] - (double)m);
            ref += e;
            worst = fmax(worst, fabs((double)y[j] - e));
        }
        CHECK(worst < 1e-6 && fabs((double)sum - ref) < 1e-5 * ref,
              "%s: exp_sum on %zu: error %.3g, sum %.8g vs %.8g", name, n, worst, (double)sum, ref);
    }
}

void test_fused_kernels(void) {
    const char *names[] = {"avx512", "avx2", "sse2"};
    __builtin_cpu_init();
    bool can[] = {__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"),
                  __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), true};
    const size_t shapes[][4] = {{1, 1, 1, 1},    {13, 33, 7, 5},   {8, 32, 64, 64},
                                {6, 31, 17, 70}, {25, 70, 19, 23}, {3, 16, 3, 129}};
    for (int s = 0; s < 3; s++) {
        if (!can[s])
            continue;
        row_kernels_case(attnk_get_named(names[s]), names[s]);
        const attnt_set *ts = attnt_get_named(names[s]);
        CHECK(ts != NULL && ts->panel <= ATTN_TILE_PANEL_MAX &&
                  ATTN_TILE_PANEL_MAX % ts->panel == 0,
              "tile set %s missing or its panel does not divide %d", names[s], ATTN_TILE_PANEL_MAX);
        if (!ts)
            continue;
        tiles_max_case(ts, names[s]);
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            const size_t *x = shapes[i];
            double worst = tiles_case(ts, x[0], x[1], x[2], x[3]);
            CHECK(worst < 2e-5, "%s: rows %zu cols %zu d %zu dv %zu: error %.3g", names[s], x[0],
                  x[1], x[2], x[3], worst);
        }
    }
}

/* ---- The fused path against the others ----------------------------------------------------- */

/* One SDPA job on path with blocks (bq, bk): out (N, H, L, Dv); returns the status. */
static int run_path(const attn_sdpa_dims *d, const attn_masks *m, attn_path path, size_t bq,
                    size_t bk, const float *q, const float *k, const float *v, float *out,
                    attn_pool *pool, attn_error *err) {
    attn_opts o = {.path = path, .block_q = bq, .block_k = bk};
    attn_plan p;
    int rc = attn_sdpa_plan(&p, d, &o, m, attn_pool_slots(pool), err);
    if (rc != ATTN_OK)
        return rc;
    CHECK(p.fused == (path != ATTN_PATH_DIRECT && path != ATTN_PATH_TILED_SGEMM),
          "path %d: fused is %d", (int)path, (int)p.fused);
    void *ws = ws_new(&p);
    rc = attn_sdpa_forward(&p, ws, out, NULL, q, k, v, pool, err);
    free(ws);
    return rc;
}

/* The masks of case mi for (N, H, L, S), in the buffers given; "what" names them. */
static attn_masks fused_masks(int mi, size_t N, size_t H, size_t L, size_t S, int32_t *kl,
                              uint8_t *km, uint8_t *am, float *bias, const char **what) {
    attn_masks m = {0};
    for (size_t n = 0; n < N; n++)
        kl[n] = (int32_t)(n == 1 ? 0 : S - (n * 7) % S); /* batch 1: no keys at all */
    for (size_t i = 0; i < N * S; i++)
        km[i] = i % S != 0 && (i * 5 + 1) % 7 != 0; /* key 0 never: row 0 of a causal job */
    for (size_t i = 0; i < N * H * L * S; i++)
        am[i] = (i * 11 + 3) % 13 != 0;
    for (size_t i = 0; i < H * L * S; i++)
        bias[i] = (i * 3) % 17 == 0 ? -INFINITY : 0.5f * frand();
    for (size_t j = 0; j < S; j++) { /* row 2 of head 0 is blocked by the bias alone */
        bias[2 * S + j] = -INFINITY;
        am[(0 * H + 1) * L * S + 4 * S + j] = 0; /* row 4 of (n 0, h 1) by the mask alone */
    }
    switch (mi) {
    case 0:
        *what = "none";
        break;
    case 1:
        *what = "causal top-left, key lengths";
        m.causal = ATTN_CAUSAL_TOP_LEFT;
        m.key_lengths = kl;
        break;
    case 2:
        *what = "causal bottom-right, key mask";
        m.causal = ATTN_CAUSAL_BOTTOM_RIGHT;
        m.key_mask = km;
        m.key_mask_n = N;
        break;
    case 3:
        *what = "attn_mask (N, H), bias (1, H) with -inf";
        m.attn_mask = am;
        m.attn_mask_n = N;
        m.attn_mask_h = H;
        m.attn_bias = bias;
        m.attn_bias_h = H;
        break;
    default:
        *what = "everything, causal top-left";
        m.causal = ATTN_CAUSAL_TOP_LEFT;
        m.key_lengths = kl;
        m.key_mask = km;
        m.key_mask_n = N;
        m.attn_mask = am;
        m.attn_mask_n = N;
        m.attn_mask_h = H;
        m.attn_bias = bias;
        m.attn_bias_h = H;
        break;
    }
    return m;
}

void test_fused_equals_direct(attn_pool *pool) {
    const size_t shapes[][6] = {
        {2, 3, 37, 53, 19, 23}, /* N H L S D Dv: ragged everywhere, S > L */
        {3, 2, 53, 37, 64, 64}, /* S < L: bottom-right leaves rows with no key */
        {2, 2, 130, 130, 32, 7},
    };
    const size_t blocks[][2] = {{0, 0}, {7, 9}, {24, 33}, {5, 1}, {128, 256}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const size_t *x = shapes[si];
        const size_t N = x[0], H = x[1], L = x[2], S = x[3], D = x[4], Dv = x[5];
        attn_sdpa_dims d = {N, H, L, S, D, Dv, 0};
        float *q = frand_new(N * H * L * D), *k = frand_new(N * H * S * D),
              *v = frand_new(N * H * S * Dv);
        const size_t no = N * H * L * Dv;
        float *od = malloc(no * sizeof *od), *of = malloc(no * sizeof *of),
              *os = malloc(no * sizeof *os);
        double *ro = malloc(L * Dv * sizeof *ro), *rw = malloc(L * S * sizeof *rw);
        int32_t *kl = malloc(N * sizeof *kl);
        uint8_t *km = malloc(N * S), *am = malloc(N * H * L * S);
        float *bias = malloc(H * L * S * sizeof *bias);
        for (int mi = 0; mi < 5; mi++) {
            const char *what = "";
            attn_masks m = fused_masks(mi, N, H, L, S, kl, km, am, bias, &what);
            attn_error err = {0};
            CHECK(run_path(&d, &m, ATTN_PATH_DIRECT, 0, 0, q, k, v, od, pool, &err) == ATTN_OK,
                  "direct: %s", err.msg);
            /* the reference in double, and which rows no key reaches */
            double ref_diff = 0;
            bool *blocked = calloc(N * H * L, sizeof *blocked);
            for (size_t n = 0; n < N; n++)
                for (size_t h = 0; h < H; h++) {
                    size_t pq = n * H + h;
                    ref_attend(ro, rw, q + pq * L * D, k + pq * S * D, v + pq * S * Dv, L, S, D, Dv,
                               1.0 / sqrt((double)D), &m, n, h, N, H);
                    for (size_t i = 0; i < L; i++) {
                        double rs = 0;
                        for (size_t j = 0; j < S; j++)
                            rs += rw[i * S + j];
                        blocked[pq * L + i] = rs == 0;
                    }
                    for (size_t i = 0; i < L * Dv; i++)
                        ref_diff = fmax(ref_diff, fabs(ro[i] - (double)od[pq * L * Dv + i]));
                }
            CHECK(ref_diff < ORACLE_TOL, "shape %zu masks %s: direct vs double %.3g", si, what,
                  ref_diff);
            for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
                size_t bq = blocks[b][0], bk = blocks[b][1];
                err = (attn_error){0};
                CHECK(run_path(&d, &m, ATTN_PATH_TILED, bq, bk, q, k, v, of, pool, &err) == ATTN_OK,
                      "fused: %s", err.msg);
                CHECK(run_path(&d, &m, ATTN_PATH_TILED_SGEMM, bq, bk, q, k, v, os, pool, &err) ==
                          ATTN_OK,
                      "tiled on sgemm: %s", err.msg);
                double fd = max_abs_diff(of, od, no), sd = max_abs_diff(os, od, no);
                CHECK(fd < ORACLE_TOL && sd < ORACLE_TOL,
                      "shape %zu masks %s blocks %zux%zu: fused vs direct %.3g, sgemm tiles vs "
                      "direct %.3g",
                      si, what, bq, bk, fd, sd);
                size_t nonzero = 0, nblocked = 0;
                for (size_t r = 0; r < N * H * L; r++) {
                    if (!blocked[r])
                        continue;
                    nblocked++;
                    for (size_t c = 0; c < Dv; c++)
                        nonzero += of[r * Dv + c] != 0.0f;
                }
                CHECK(nonzero == 0,
                      "shape %zu masks %s blocks %zux%zu: %zu nonzero values in "
                      "fully masked rows",
                      si, what, bq, bk, nonzero);
                CHECK(mi == 0 || (mi == 2 && si == 0) || nblocked > 0,
                      "shape %zu masks %s: no fully masked row", si, what);
            }
            free(blocked);
        }
        free(q), free(k), free(v), free(od), free(of), free(os), free(ro), free(rw), free(kl);
        free(km), free(am), free(bias);
    }

    /* AUTO fuses only with head widths of 16 and more, and never with weights. */
    const size_t widths[][3] = {{64, 64, 1}, {16, 16, 1}, {8, 64, 0}, {64, 8, 0}};
    for (size_t i = 0; i < 4; i++) {
        attn_sdpa_dims wd = {1, 1, 40, 40, widths[i][0], widths[i][1], 0};
        attn_opts o = {0}, ow = {.weights = ATTN_WEIGHTS_PER_HEAD};
        attn_plan p, pw;
        attn_error e = {0};
        CHECK(attn_sdpa_plan(&p, &wd, &o, NULL, 1, &e) == ATTN_OK &&
                  attn_sdpa_plan(&pw, &wd, &ow, NULL, 1, &e) == ATTN_OK,
              "%s", e.msg);
        CHECK(p.tiled && p.fused == (widths[i][2] != 0) && !pw.fused && !pw.tiled,
              "AUTO with D=%zu Dv=%zu: tiled %d fused %d, with weights fused %d", widths[i][0],
              widths[i][1], (int)p.tiled, (int)p.fused, (int)pw.fused);
    }

    /* A logit beyond float32 is ATTN_ERR_NUMERIC on the fused path as on the others. */
    attn_sdpa_dims d = {1, 1, 5, 40, 3, 2, 0};
    float q[15], k[120], v[80], out[10];
    for (size_t i = 0; i < 15; i++)
        q[i] = 1e20f;
    for (size_t i = 0; i < 120; i++)
        k[i] = i == 100 ? 1e20f : 0.0f; /* key 33 against every query */
    for (size_t i = 0; i < 80; i++)
        v[i] = 1.0f;
    attn_error err = {0};
    int rc = run_path(&d, NULL, ATTN_PATH_TILED, 2, 16, q, k, v, out, pool, &err);
    CHECK(rc == ATTN_ERR_NUMERIC, "fused: an infinite logit gave %d (%s)", rc, err.msg);
    attn_masks causal = {.causal = ATTN_CAUSAL_TOP_LEFT};
    err = (attn_error){0};
    rc = run_path(&d, &causal, ATTN_PATH_TILED, 2, 16, q, k, v, out, pool, &err);
    CHECK(rc == ATTN_OK, "fused: the infinite logit is past the causal limit, yet %d (%s)", rc,
          err.msg);
}
