/* w6.c - workload W6 (bench_attention --w6): generation a row at a time. T appends of one row
 * to a decode session (attn_mha_decode_step on a key/value cache), each step timed, against the
 * same sequence recomputed from scratch at step t: a whole causal attn_mha_forward of the first
 * t rows (what a client without a session sends). Each round runs the session, then the
 * recomputations, so both see the same machine; figures are medians over the rounds.
 *
 * The recomputations run at t = 1 and at every multiple of the stride (every t with stride 1);
 * with a stride above 1 their total over t = 1..T is the sum of the piecewise-linear
 * interpolation of the measured times, and the "w6" line says so ("recompute": "sampled").
 * Stride 0 runs the sessions alone ("recompute": "none", the recomputation's fields null), as
 * bench/run_ort_w6.py does beside ONNX Runtime; a dump file then receives the last session's
 * outputs, which that script checks against torch.
 *
 * The "w6" line: step_ms_512, _2048 and _4096 the per-step times; total_s the median over
 * rounds of a session's time, total_s_step_medians the sum over t of step t's median (less
 * sensitive to a step the machine stalled); recompute_total_s the median over rounds of the
 * recomputations' total (recompute_total_s_half_samples: the same from every other sample;
 * _from_64: from t = 1 and the multiples of 64 alone, the default stride's estimate), ratio
 * the two totals' ratio and ratio_paired its median within rounds; fit_* a least-squares line
 * through the per-step times at every 256 rows (the goal: linear in t); out_rel_diff_vs_whole the
 * session's outputs against the whole call's at T, over the latter's largest magnitude.
 *
 * Legend: T the appends, E embedding width, H heads, t the sequence length after a step, W the
 * window of steps whose median stands for the per-step time at t (steps t - W + 1 .. t). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention.h"
#include "w6.h"

#define W6_WINDOW 16  /* W */
#define W6_POINTS 256 /* a "w6_point" line every this many rows */

static double w6_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int w6_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of t[0..n), n >= 1, without reordering t (scratch holds n). */
static double w6_median(const double *t, size_t n, double *scratch) {
    memcpy(scratch, t, n * sizeof *t);
    qsort(scratch, n, sizeof *scratch, w6_cmp);
    return n % 2 ? scratch[n / 2] : 0.5 * (scratch[n / 2 - 1] + scratch[n / 2]);
}

static int w6_nomem(attn_error *err) {
    if (err && err->code == ATTN_OK) {
        err->code = ATTN_ERR_NOMEM;
        snprintf(err->msg, sizeof err->msg, "out of memory allocating W6's buffers");
    }
    return ATTN_ERR_NOMEM;
}

/* Writes out (T, E) float32 to path. Returns ATTN_OK or ATTN_ERR_SYSTEM with err filled. */
static int w6_dump(const char *path, const float *out, size_t n, attn_error *err) {
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(out, sizeof *out, n, f) == n;
    if (f && fclose(f) != 0)
        ok = false;
    if (ok)
        return ATTN_OK;
    if (err && err->code == ATTN_OK) {
        err->code = ATTN_ERR_SYSTEM;
        snprintf(err->msg, sizeof err->msg, "cannot write W6's outputs to %s", path);
    }
    return ATTN_ERR_SYSTEM;
}

/* The recomputed lengths: 1 and the multiples of stride up to T (T itself always); none for
 * stride 0. */
static size_t w6_samples(size_t T, size_t stride, size_t *ts) {
    size_t n = 0;
    if (stride == 0)
        return 0;
    ts[n++] = 1;
    for (size_t t = stride; t <= T; t += stride)
        if (t > 1)
            ts[n++] = t;
    if (ts[n - 1] != T)
        ts[n++] = T;
    return n;
}

/* The sum over t = 1..T of the piecewise-linear interpolation of (ts[k], y[k]), ts[0] = 1. */
static double w6_interp_sum(const size_t *ts, const double *y, size_t n) {
    double sum = y[0];
    for (size_t k = 1; k < n; k++) {
        double a = (double)ts[k - 1], b = (double)ts[k];
        for (size_t t = ts[k - 1] + 1; t <= ts[k]; t++)
            sum += y[k - 1] + (y[k] - y[k - 1]) * ((double)t - a) / (b - a);
    }
    return sum;
}

/* One session: T steps of one row on a fresh cache; step k's time into steps[k], its output
 * into out row k. */
static int w6_session(const w6_inputs *in, const attn_decode_plan *dp, void *ws,
                      attn_kv_cache *cache, float *out, double *steps, attn_pool *pool,
                      attn_error *err) {
    cache->len = 0;
    for (size_t k = 0; k < in->t; k++) {
        const float *row = in->x + k * in->e;
        double t0 = w6_now();
        int rc = attn_mha_decode_step(dp, ws, cache, out + k * in->e, NULL, row, row, row, 1,
                                      &in->params, pool, err);
        steps[k] = w6_now() - t0;
        if (rc != ATTN_OK)
            return rc;
    }
    return ATTN_OK;
}

/* The whole causal forward of the first t rows into out (t, E); its time into *sec. */
static int w6_recompute(const w6_inputs *in, size_t t, void *ws, float *out, double *sec,
                        attn_pool *pool, size_t nslots, attn_error *err) {
    attn_mha_dims d = {.n = 1, .l = t, .s = t, .e = in->e, .h = in->h};
    attn_masks m = {.causal = ATTN_CAUSAL_TOP_LEFT};
    double t0 = w6_now();
    attn_plan p;
    int rc = attn_mha_plan(&p, &d, NULL, &m, nslots, err);
    if (rc == ATTN_OK)
        rc = attn_mha_forward(&p, ws, out, NULL, in->x, in->x, in->x, &in->params, pool, err);
    *sec = w6_now() - t0;
    return rc;
}

/* Least squares y = a + b x over n points; r2 the coefficient of determination. */
static void w6_fit(const double *x, const double *y, size_t n, double *a, double *b, double *r2) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        sx += x[i], sy += y[i], sxx += x[i] * x[i], sxy += x[i] * y[i], syy += y[i] * y[i];
    }
    double dn = (double)n, vx = sxx - sx * sx / dn, vy = syy - sy * sy / dn,
           cxy = sxy - sx * sy / dn;
    *b = vx > 0 ? cxy / vx : 0;
    *a = (sy - *b * sx) / dn;
    *r2 = vx > 0 && vy > 0 ? cxy * cxy / (vx * vy) : 1;
}

/* The median over the R rounds of f(r) for r < R; col holds R, scratch R. */
#define W6_OVER_ROUNDS(out, expr)                                                                  \
    do {                                                                                           \
        for (size_t r = 0; r < R; r++)                                                             \
            col[r] = (expr);                                                                       \
        (out) = w6_median(col, R, scratch);                                                        \
    } while (0)

int w6_run(const w6_inputs *in, const w6_config *cfg, attn_pool *pool, size_t nslots,
           attn_error *err) {
    const size_t T = in->t, E = in->e, R = cfg->repeats ? cfg->repeats : 1;
    const size_t stride = cfg->stride, NP = T / W6_POINTS;
    int rc = ATTN_OK;
    attn_decode_dims dd = {.e = E, .h = in->h, .cap = T, .max_rows = 1};
    attn_decode_plan dp;
    attn_plan big;
    attn_mha_dims bd = {.n = 1, .l = T, .s = T, .e = E, .h = in->h};
    attn_masks causal = {.causal = ATTN_CAUSAL_TOP_LEFT};
    if ((rc = attn_mha_decode_plan(&dp, &dd, NULL, nslots, err)) != ATTN_OK ||
        (rc = attn_mha_plan(&big, &bd, NULL, &causal, nslots, err)) != ATTN_OK)
        return rc;

    size_t *ts = malloc((T + 2) * sizeof *ts);
    size_t ns = ts ? w6_samples(T, stride, ts) : 0;
    double *steps = malloc(R * T * sizeof *steps), *rec = malloc(R * (ns + 1) * sizeof *rec);
    double *scratch = malloc((T + R + 1) * sizeof *scratch), *tot = malloc(4 * R * sizeof *tot);
    double *half_y = malloc((ns + 1) * sizeof *half_y);
    size_t *half_ts = malloc((ns + 1) * sizeof *half_ts);
    double *col = malloc(R * sizeof *col), *pt = malloc((NP + 1) * sizeof *pt),
           *py = malloc((NP + 1) * sizeof *py);
    float *out = malloc(T * E * sizeof *out), *whole = malloc(T * E * sizeof *whole);
    void *dws = aligned_alloc(64, dp.workspace_bytes);
    void *bws = aligned_alloc(64, (big.workspace_bytes + 63) / 64 * 64);
    attn_kv_cache cache = {
        .k = malloc(dp.cache_bytes / 2), .v = malloc(dp.cache_bytes / 2), .cap = T};
    if (!ts || !steps || !rec || !scratch || !tot || !half_y || !half_ts || !col || !pt || !py ||
        !out || !whole || !dws || !bws || !cache.k || !cache.v) {
        rc = w6_nomem(err);
        goto done;
    }
    printf("{\"type\":\"w6_config\",\"t\":%zu,\"e\":%zu,\"h\":%zu,\"repeats\":%zu,\"stride\":%zu,"
           "\"samples\":%zu,\"slots\":%zu,\"cache_bytes\":%zu,\"workspace_bytes\":%zu,"
           "\"recompute_job_bytes_at_t\":%zu}\n",
           T, E, in->h, R, stride, ns, nslots, dp.cache_bytes, dp.workspace_bytes, big.job_bytes);
    fflush(stdout);

    /* A warm-up session (faults the pages in), then the rounds. */
    if ((rc = w6_session(in, &dp, dws, &cache, out, steps, pool, err)) != ATTN_OK)
        goto done;
    for (size_t r = 0; r < R; r++) {
        fprintf(stderr, "bench_attention: W6 round %zu of %zu\n", r + 1, R);
        double *st = steps + r * T, *rt = rec + r * ns;
        if ((rc = w6_session(in, &dp, dws, &cache, out, st, pool, err)) != ATTN_OK)
            goto done;
        tot[r] = 0;
        for (size_t k = 0; k < T; k++)
            tot[r] += st[k];
        /* Odd rounds recompute longest first, so that no length always runs first. */
        for (size_t i = 0; i < ns; i++) {
            size_t k = r % 2 ? ns - 1 - i : i;
            if ((rc = w6_recompute(in, ts[k], bws, whole, &rt[k], pool, nslots, err)) != ATTN_OK)
                goto done;
        }
        if (ns == 0)
            continue;
        tot[R + r] = w6_interp_sum(ts, rt, ns);
        /* The same from every other sample (the first and last kept): how much the estimate
         * leans on the interpolation. */
        size_t nh = 0;
        for (size_t k = 0; k < ns; k++)
            if (k % 2 == 0 || k == ns - 1)
                half_ts[nh] = ts[k], half_y[nh++] = rt[k];
        tot[2 * R + r] = w6_interp_sum(half_ts, half_y, nh);
        /* And from t = 1 and the multiples of 64 alone: with stride 1, what the default stride
         * would have estimated from the same measurements. */
        nh = 0;
        for (size_t k = 0; k < ns; k++)
            if (k == 0 || ts[k] % 64 == 0 || k == ns - 1)
                half_ts[nh] = ts[k], half_y[nh++] = rt[k];
        tot[3 * R + r] = w6_interp_sum(half_ts, half_y, nh);
    }

    /* The last session's outputs against the whole call on T rows (untimed). */
    double dmax = 0, mref = 0, unused = 0;
    if (cfg->dump && (rc = w6_dump(cfg->dump, out, T * E, err)) != ATTN_OK)
        goto done;
    if ((rc = w6_recompute(in, T, bws, whole, &unused, pool, nslots, err)) != ATTN_OK)
        goto done;
    for (size_t i = 0; i < T * E; i++) {
        dmax = fmax(dmax, fabs((double)out[i] - (double)whole[i]));
        mref = fmax(mref, fabs((double)whole[i]));
    }

    /* Per-step time at t: the median over rounds of the median of the W steps ending at t. */
    size_t np = 0;
    for (size_t t = W6_POINTS; t <= T; t += W6_POINTS) {
        double win = 0, exact = 0, recm = -1;
        W6_OVER_ROUNDS(win, w6_median(steps + r * T + t - W6_WINDOW, W6_WINDOW, scratch + R));
        W6_OVER_ROUNDS(exact, steps[r * T + t - 1]);
        for (size_t k = 0; k < ns; k++)
            if (ts[k] == t)
                W6_OVER_ROUNDS(recm, rec[r * ns + k]);
        pt[np] = (double)t, py[np++] = win;
        printf("{\"type\":\"w6_point\",\"t\":%zu,\"step_ms\":%.5f,\"step_ms_at_t\":%.5f,"
               "\"cache_bytes\":%zu,\"recompute_ms\":",
               t, win * 1e3, exact * 1e3, 2 * t * E * sizeof(float));
        if (recm >= 0)
            printf("%.4f}\n", recm * 1e3);
        else
            printf("null}\n");
    }
    double a = 0, b = 0, r2 = 0, fit_err = 0; /* fit_err: the largest gap to the line, relative */
    w6_fit(pt, py, np, &a, &b, &r2);
    for (size_t i = 0; i < np; i++)
        fit_err = fmax(fit_err, fabs(py[i] - (a + b * pt[i])) / py[i]);
    double dec_total = w6_median(tot, R, scratch);
    double dec_medians = 0; /* the sum over t of step t's median over the rounds */
    for (size_t k = 0; k < T; k++) {
        double m = 0;
        W6_OVER_ROUNDS(m, steps[r * T + k]);
        dec_medians += m;
    }
    double at[3] = {0, 0, 0}; /* the per-step times at t = 512, 2048 and 4096 */
    const size_t want[3] = {512, 2048, 4096};
    for (size_t i = 0; i < np; i++)
        for (size_t j = 0; j < 3; j++)
            if ((size_t)pt[i] == want[j])
                at[j] = py[i];
    printf("{\"type\":\"w6\",\"t\":%zu,\"e\":%zu,\"h\":%zu,\"repeats\":%zu,\"window\":%d,"
           "\"step_ms_512\":%.5f,\"step_ms_2048\":%.5f,\"step_ms_4096\":%.5f,",
           T, E, in->h, R, W6_WINDOW, at[0] * 1e3, at[1] * 1e3, at[2] * 1e3);
    printf("\"total_s\":%.4f,\"total_s_step_medians\":%.4f,\"recompute\":\"%s\",", dec_total,
           dec_medians,
           ns == 0       ? "none"
           : stride == 1 ? "every"
                         : "sampled");
    if (ns > 0) {
        double rec_total = w6_median(tot + R, R, scratch);
        double rec_half = w6_median(tot + 2 * R, R, scratch);
        double rec_64 = w6_median(tot + 3 * R, R, scratch);
        double paired = 0, lo = INFINITY, hi = 0;
        W6_OVER_ROUNDS(paired, tot[R + r] / tot[r]);
        for (size_t r = 0; r < R; r++)
            lo = fmin(lo, tot[R + r] / tot[r]), hi = fmax(hi, tot[R + r] / tot[r]);
        printf("\"recompute_total_s\":%.3f,\"recompute_total_s_half_samples\":%.3f,"
               "\"recompute_total_s_from_64\":%.3f,",
               rec_total, rec_half, rec_64);
        printf("\"ratio\":%.2f,\"ratio_paired\":%.2f,\"ratio_paired_min\":%.2f,"
               "\"ratio_paired_max\":%.2f,",
               rec_total / dec_total, paired, lo, hi);
    } else {
        printf("\"recompute_total_s\":null,\"recompute_total_s_half_samples\":null,"
               "\"recompute_total_s_from_64\":null,\"ratio\":null,\"ratio_paired\":null,"
               "\"ratio_paired_min\":null,\"ratio_paired_max\":null,");
    }
    printf("\"cache_bytes\":%zu,", dp.cache_bytes);
    printf("\"fit_intercept_ms\":%.5f,\"fit_ms_per_1k_rows\":%.5f,\"fit_r2\":%.5f,"
           "\"fit_worst_rel\":%.3f,\"out_rel_diff_vs_whole\":%.3g}\n",
           a * 1e3, b * 1e6, r2, fit_err, mref > 0 ? dmax / mref : dmax);
    fflush(stdout);

done:
    free(half_y), free(half_ts), free(ts), free(steps), free(rec), free(scratch), free(tot),
        free(col), free(pt), free(py);
    free(out), free(whole), free(dws), free(bws), free(cache.k), free(cache.v);
    return rc;
}
