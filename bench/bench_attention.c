/* bench_attention.c - the core benchmark: times libattn's MHA forward on fixed workloads and, in
 * the same run, the sgemm peak of the same cores, so that ratios compare like with like.
 *
 * Legend: N = batch, L = query length, S = key length (S = L: self-attention), E = embedding
 * width, H = heads, Dh = E / H, M = the side of the square sgemm of the peak measurement.
 *
 * Usage: bench_attention [--time SECONDS] [--only NAME] [--threading pool|blas]
 *        bench_attention --w6 [--w6-repeats N] [--w6-stride S] [--w6-dump FILE]
 *   --time       seconds of timed runs to aim for per workload (default 1.5; at least 5 runs)
 *   --only       run only the named workload (W1, W2, W3, W4, W4-nocausal or W5)
 *   --threading  pool (default): libattn's pool of cores - 1 helpers, single-threaded BLAS in
 *                its tasks; blas: the alternative, no pool and OpenBLAS on every core
 *   --w6         run W6 alone (bench/w6.c): 4,096 appends of one row to a decode session at
 *                E = 512, H = 8 (W4's inputs), each step timed, against the sequence recomputed
 *                from scratch; --w6-repeats interleaved rounds (default 5), recomputing at
 *                t = 1 and every multiple of --w6-stride (default 64; 1 = every t, slow; 0 =
 *                never: the sessions alone); --w6-dump writes the last session's outputs,
 *                (4096, 512) float32, to FILE
 *
 * Prints one JSON object per line on stdout, each with a "type": "blas" (the OpenBLAS core),
 * "machine", "peak" (phase "before" and "after" the workloads), one "workload" per workload, then
 * "done" (with --w6: "w6_config", "w6_point" lines and "w6" in place of the workloads). On
 * any libattn or system error it prints an "error" line, the message on stderr, and
 * exits 1.
 *
 * The inputs come from a counter-based generator (splitmix64 of the element index, see
 * gen_uniform) that bench/torch_mha.py reproduces bit for bit, so run_bench.py can compare
 * checksums of attnd's and PyTorch's outputs. */
#include <cblas.h>
#include <malloc.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attention.h"
#include "w6.h"

#define BENCH_SEED 0x5EED2024ULL
#define GOLDEN     0x9E3779B97F4A7C15ULL
#define MAX_REPS   10000
#define MIN_REPS   5
#define PEAK_M     1024 /* the peak sgemm is (M, M) x (M, M) per slot */
#define PEAK_REPS  7
#define WS_ALIGN   64

/* Generator tags: one stream per tensor, shared with bench/torch_mha.py. */
enum {
    TAG_X = 1,       /* the input x, (N, L, E), uniform on [-2, 2) */
    TAG_IN_W = 2,    /* in_proj_weight, (3E, E), uniform on [-sqrt(3/E), sqrt(3/E)) */
    TAG_IN_B = 3,    /* in_proj_bias, (3E), uniform on [-0.1, 0.1) */
    TAG_OUT_W = 4,   /* out_proj.weight, (E, E), as in_proj_weight */
    TAG_OUT_B = 5,   /* out_proj.bias, (E), as in_proj_bias */
    TAG_CHK_OUT = 9, /* checksum coefficients of the output, uniform on [-1, 1) */
    TAG_CHK_W = 10,  /* checksum coefficients of the weights, uniform on [-1, 1) */
    TAG_PEAK = 11,   /* the sgemm operands */
};

/* One benchmark workload: MHA self-attention (query = key = value) with packed in_proj_weight. */
typedef struct workload {
    const char *name;
    const char *label;
    size_t n, l, e, h;
    attn_causal causal;
    const int32_t *key_lengths; /* (N) or NULL */
    attn_weights_mode weights;
} workload;

static const int32_t W3_KEY_LENGTHS[4] = {512, 448, 384, 320};

static const workload WORKLOADS[] = {
    {"W1", "classroom", 1, 16, 64, 4, ATTN_CAUSAL_NONE, NULL, ATTN_WEIGHTS_PER_HEAD},
    {"W2", "small batch", 8, 128, 256, 8, ATTN_CAUSAL_TOP_LEFT, NULL, ATTN_WEIGHTS_NONE},
    {"W3", "BERT-base", 4, 512, 768, 12, ATTN_CAUSAL_NONE, W3_KEY_LENGTHS, ATTN_WEIGHTS_NONE},
    {"W4", "long", 1, 4096, 512, 8, ATTN_CAUSAL_TOP_LEFT, NULL, ATTN_WEIGHTS_NONE},
    {"W4-nocausal", "long, no mask", 1, 4096, 512, 8, ATTN_CAUSAL_NONE, NULL, ATTN_WEIGHTS_NONE},
    {"W5", "weights", 1, 512, 768, 12, ATTN_CAUSAL_NONE, NULL, ATTN_WEIGHTS_PER_HEAD},
};

/* ---- Small helpers ------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* The stream key of tensor tag. */
static uint64_t gen_key(uint64_t tag) {
    return mix64(BENCH_SEED ^ (tag * GOLDEN));
}

/* Element i of the stream key: a float uniform on [-amp, amp) in steps of amp / 2^23. The
 * step is rounded to float first and the product is exact-then-rounded once, so numpy computes
 * the same bits. */
static float gen_uniform(uint64_t key, size_t i, float step) {
    int32_t r = (int32_t)(mix64(key + (uint64_t)i * GOLDEN) >> 40) - 8388608;
    return (float)r * step;
}

/* Fills x (n) with the stream of tag, uniform on [-amp, amp). */
static void fill_uniform(float *x, size_t n, uint64_t tag, double amp) {
    const uint64_t key = gen_key(tag);
    const float step = (float)(amp / 8388608.0);
    for (size_t i = 0; i < n; i++)
        x[i] = gen_uniform(key, i, step);
}

static double now_sec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts t (n >= 1) in place and returns its median. */
static double median(double *t, size_t n) {
    qsort(t, n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Prints s as a JSON string. */
static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

/* The field ("VmRSS:", "VmHWM:") of /proc/self/status in bytes, or -1 when unreadable. */
static long long proc_status_bytes(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long long kb = -1;
    size_t len = strlen(field);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, field, len) == 0) {
            kb = strtoll(line + len, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

/* Resets the peak-RSS mark (VmHWM) to the current RSS; false when the kernel refuses. */
static bool hwm_reset(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return false;
    bool ok = fputs("5", f) >= 0;
    return (fclose(f) == 0) && ok;
}

/* Fills err, if still clear, with ATTN_ERR_NOMEM for an allocation of what; returns the code. */
static int bench_nomem(attn_error *err, const char *what) {
    if (err && err->code == ATTN_OK) {
        err->code = ATTN_ERR_NOMEM;
        snprintf(err->msg, sizeof err->msg, "out of memory allocating %s", what);
    }
    return ATTN_ERR_NOMEM;
}

/* Prints an "error" line and the message on stderr. */
static void report_error(const char *where, const attn_error *err) {
    fprintf(stderr, "bench_attention: %s: %s error: %s\n", where, attn_status_name(err->code),
            err->msg);
    printf("{\"type\":\"error\",\"where\":");
    json_str(where);
    printf(",\"code\":");
    json_str(attn_status_name(err->code));
    printf(",\"msg\":");
    json_str(err->msg);
    printf("}\n");
    fflush(stdout);
}

static const char *causal_name(attn_causal c) {
    return c == ATTN_CAUSAL_TOP_LEFT       ? "top_left"
           : c == ATTN_CAUSAL_BOTTOM_RIGHT ? "bottom_right"
                                           : "none";
}

static const char *weights_name(attn_weights_mode w) {
    return w == ATTN_WEIGHTS_PER_HEAD ? "per_head" : w == ATTN_WEIGHTS_MEAN ? "mean" : "none";
}

/* ---- sgemm peak --------------------------------------------------------------------------- */

/* Each task multiplies its own operands: buf is (ntasks, 3, M, M), A then B then C. */
typedef struct peak_ctx {
    float *buf;
    size_t *slot_of; /* (ntasks): the slot each task ran on */
} peak_ctx;

static void peak_task(void *ctx, size_t task, size_t slot) {
    peak_ctx *pc = ctx;
    const size_t mm = (size_t)PEAK_M * PEAK_M;
    float *a = pc->buf + task * 3 * mm, *b = a + mm, *c = b + mm;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, PEAK_M, PEAK_M, PEAK_M, 1.0f, a, PEAK_M,
                b, PEAK_M, 0.0f, c, PEAK_M);
    pc->slot_of[task] = slot;
}

/* Runs one sgemm per slot at once, PEAK_REPS times after a warm-up, and prints a "peak" line:
 * the aggregate GFLOP/s of the median wall time. Returns the aggregate GFLOP/s, or -1 when out
 * of memory. */
static double peak_measure(const char *phase, attn_pool *pool, size_t nslots) {
    const size_t mm = (size_t)PEAK_M * PEAK_M;
    float *buf = malloc(nslots * 3 * mm * sizeof(float));
    size_t *slot_of = calloc(nslots, sizeof *slot_of);
    double t[PEAK_REPS];
    if (!buf || !slot_of) {
        free(buf);
        free(slot_of);
        return -1;
    }
    for (size_t i = 0; i < nslots; i++) {
        fill_uniform(buf + i * 3 * mm, 2 * mm, TAG_PEAK, 1.0);
        memset(buf + i * 3 * mm + 2 * mm, 0, mm * sizeof(float));
    }
    peak_ctx pc = {buf, slot_of};
    attn_pool_run(pool, nslots, peak_task, &pc); /* warm-up: faults the pages, wakes helpers */
    size_t concurrent = 0;
    for (size_t r = 0; r < PEAK_REPS; r++) {
        for (size_t i = 0; i < nslots; i++)
            slot_of[i] = SIZE_MAX;
        double t0 = now_sec();
        attn_pool_run(pool, nslots, peak_task, &pc);
        t[r] = now_sec() - t0;
        /* The run was concurrent when no slot ran two of the tasks. */
        bool distinct = true;
        for (size_t i = 0; i < nslots; i++)
            for (size_t j = i + 1; j < nslots; j++)
                distinct = distinct && slot_of[i] != slot_of[j];
        concurrent += distinct;
    }
    const double flops = 2.0 * (double)PEAK_M * PEAK_M * PEAK_M * (double)nslots;
    double tmin = t[0];
    for (size_t r = 1; r < PEAK_REPS; r++)
        tmin = t[r] < tmin ? t[r] : tmin;
    double tmed = median(t, PEAK_REPS);
    double gflops = flops / tmed * 1e-9;
    printf("{\"type\":\"peak\",\"phase\":\"%s\",\"m\":%d,\"slots\":%zu,\"reps\":%d,"
           "\"median_ms\":%.4f,\"min_ms\":%.4f,\"gflops\":%.3f,\"gflops_best\":%.3f,"
           "\"concurrent_reps\":%zu}\n",
           phase, PEAK_M, nslots, PEAK_REPS, tmed * 1e3, tmin * 1e3, gflops, flops / tmin * 1e-9,
           concurrent);
    fflush(stdout);
    free(buf);
    free(slot_of);
    return gflops;
}

/* ---- Workloads ---------------------------------------------------------------------------- */

/* Checksums of a tensor x (n): dot = sum x[i] c[i] with c the coefficients of tag, dotabs =
 * sum |x[i] c[i]|, abs = sum |x[i]|; finite is false when any x[i] is not finite. */
typedef struct checksum {
    double dot, dotabs, abs;
    bool finite;
} checksum;

static checksum checksum_of(const float *x, size_t n, uint64_t tag) {
    checksum c = {0, 0, 0, true};
    const uint64_t key = gen_key(tag);
    const float step = (float)(1.0 / 8388608.0);
    for (size_t i = 0; i < n; i++) {
        double v = (double)x[i], p = v * (double)gen_uniform(key, i, step);
        c.finite = c.finite && isfinite(v);
        c.dot += p;
        c.dotabs += fabs(p);
        c.abs += fabs(v);
    }
    return c;
}

/* Largest |row sum - 1| of the weight rows w (rows, s); a row a mask blocks entirely sums to 0
 * and is skipped (none of these workloads has one). */
static double rowsum_err(const float *w, size_t rows, size_t s) {
    double worst = 0;
    for (size_t r = 0; r < rows; r++) {
        double sum = 0;
        for (size_t j = 0; j < s; j++)
            sum += (double)w[r * s + j];
        if (sum != 0 && fabs(sum - 1) > worst)
            worst = fabs(sum - 1);
    }
    return worst;
}

/* Times workload w and prints its "workload" line. times holds MAX_REPS. Returns ATTN_OK, or a
 * libattn status (ATTN_ERR_NOMEM when an allocation failed) with err filled. */
static int workload_run(const workload *w, attn_pool *pool, size_t nslots, double target,
                        double *times, attn_error *err) {
    const size_t N = w->n, L = w->l, E = w->e;
    float *arena = NULL, *ws = NULL, *out = NULL, *wts = NULL;
    int rc = ATTN_OK;

    /* Inputs and parameters in one arena, outside the measured memory (the fixed workload sizes
     * are far from overflowing size_t). */
    const size_t nx = N * L * E, nin_w = 3 * E * E, nin_b = 3 * E, nout_w = E * E, nout_b = E;
    arena = malloc((nx + nin_w + nin_b + nout_w + nout_b) * sizeof(float));
    if (!arena) {
        rc = bench_nomem(err, "the inputs and parameters");
        goto done;
    }
    float *x = arena;              /* x is (N, L, E): query = key = value */
    float *in_w = x + nx;          /* in_proj_weight is (3E, E) */
    float *in_b = in_w + nin_w;    /* in_proj_bias is (3E) */
    float *out_w = in_b + nin_b;   /* out_proj.weight is (E, E) */
    float *out_b = out_w + nout_w; /* out_proj.bias is (E) */
    const double wamp = sqrt(3.0 / (double)E);
    fill_uniform(x, nx, TAG_X, 2.0);
    fill_uniform(in_w, nin_w, TAG_IN_W, wamp);
    fill_uniform(in_b, nin_b, TAG_IN_B, 0.1);
    fill_uniform(out_w, nout_w, TAG_OUT_W, wamp);
    fill_uniform(out_b, nout_b, TAG_OUT_B, 0.1);
    attn_mha_params params = {.in_proj_weight = in_w,
                              .in_proj_bias = in_b,
                              .out_proj_weight = out_w,
                              .out_proj_bias = out_b};

    attn_mha_dims dims = {.n = N, .l = L, .s = L, .e = E, .h = w->h};
    attn_opts opts = {.weights = w->weights};
    attn_masks masks = {.causal = w->causal, .key_lengths = w->key_lengths};
    attn_plan plan;
    rc = attn_mha_plan(&plan, &dims, &opts, &masks, nslots, err);
    if (rc != ATTN_OK)
        goto done;

    /* Peak RSS growth: from here to the end of the timed runs. */
    malloc_trim(0);
    bool hwm_ok = hwm_reset();
    long long rss0 = proc_status_bytes("VmRSS:");

    size_t ws_bytes = (plan.workspace_bytes + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN;
    ws = aligned_alloc(WS_ALIGN, ws_bytes ? ws_bytes : WS_ALIGN);
    out = malloc(plan.out_elems * sizeof(float));
    if (plan.weights_elems)
        wts = malloc(plan.weights_elems * sizeof(float));
    if (!ws || !out || (plan.weights_elems && !wts)) {
        rc = bench_nomem(err, "the workspace and outputs");
        goto done;
    }
    attn_weights_out wout = {.values = wts};
    attn_weights_out *wp = wts ? &wout : NULL;

    /* Two warm-ups; the second sizes the timed runs. */
    double t1 = 0;
    for (int i = 0; i < 2; i++) {
        double t0 = now_sec();
        rc = attn_mha_forward(&plan, ws, out, wp, x, x, x, &params, pool, err);
        if (rc != ATTN_OK)
            goto done;
        t1 = now_sec() - t0;
    }
    double want = ceil(target / (t1 > 1e-9 ? t1 : 1e-9));
    size_t reps = want < MIN_REPS ? MIN_REPS : want > MAX_REPS ? MAX_REPS : (size_t)want;
    for (size_t r = 0; r < reps; r++) {
        double t0 = now_sec();
        rc = attn_mha_forward(&plan, ws, out, wp, x, x, x, &params, pool, err);
        times[r] = now_sec() - t0;
        if (rc != ATTN_OK)
            goto done;
    }
    long long hwm = proc_status_bytes("VmHWM:");
    double tmin = times[0];
    for (size_t r = 1; r < reps; r++)
        tmin = times[r] < tmin ? times[r] : tmin;
    double tmed = median(times, reps);

    checksum co = checksum_of(out, plan.out_elems, TAG_CHK_OUT);
    checksum cw = {0, 0, 0, true};
    double werr = 0;
    if (wts) {
        cw = checksum_of(wts, plan.weights_elems, TAG_CHK_W);
        werr = rowsum_err(wts, plan.weights_elems / L, L);
    }

    printf("{\"type\":\"workload\",\"name\":");
    json_str(w->name);
    printf(",\"label\":");
    json_str(w->label);
    printf(",\"n\":%zu,\"l\":%zu,\"s\":%zu,\"e\":%zu,\"h\":%zu,\"causal\":\"%s\","
           "\"key_lengths\":",
           N, L, L, E, w->h, causal_name(w->causal));
    if (w->key_lengths) {
        for (size_t i = 0; i < N; i++)
            printf("%c%ld", i ? ',' : '[', (long)w->key_lengths[i]);
        printf("]");
    } else {
        printf("null");
    }
    printf(",\"weights\":\"%s\",\"slots\":%zu,\"reps\":%zu,\"median_ms\":%.4f,\"min_ms\":%.4f,"
           "\"flops\":%.0f,\"gflops\":%.3f,\"workspace_bytes\":%zu,\"job_bytes\":%zu,"
           "\"rss_before\":%lld,\"rss_peak_growth\":",
           weights_name(w->weights), nslots, reps, tmed * 1e3, tmin * 1e3, plan.flops,
           plan.flops / tmed * 1e-9, plan.workspace_bytes, plan.job_bytes, rss0);
    if (hwm_ok && rss0 >= 0 && hwm >= 0)
        printf("%lld", hwm - rss0);
    else
        printf("null");
    printf(",\"finite\":%s,\"out_dot\":%.17g,\"out_dotabs\":%.17g,\"out_abs\":%.17g",
           co.finite && cw.finite ? "true" : "false", co.dot, co.dotabs, co.abs);
    if (wts)
        printf(",\"w_dot\":%.17g,\"w_dotabs\":%.17g,\"w_rowsum_err\":%.3g", cw.dot, cw.dotabs,
               werr);
    printf("}\n");
    fflush(stdout);

done:
    free(wts);
    free(out);
    free(ws);
    free(arena);
    return rc;
}

/* ---- W6 ----------------------------------------------------------------------------------- */

/* W6 on W4's inputs and parameters (T = 4096, E = 512, H = 8, in_proj with biases). */
static int w6_main(attn_pool *pool, size_t nslots, const w6_config *cfg, attn_error *err) {
    const size_t T = 4096, E = 512, H = 8;
    const size_t nx = T * E, nin_w = 3 * E * E, nin_b = 3 * E, nout_w = E * E;
    float *arena = malloc((nx + nin_w + nin_b + nout_w + E) * sizeof(float));
    if (!arena)
        return bench_nomem(err, "W6's inputs and parameters");
    float *x = arena;              /* x is (T, E): row t is step t + 1's query, key and value */
    float *in_w = x + nx;          /* in_proj_weight is (3E, E) */
    float *in_b = in_w + nin_w;    /* in_proj_bias is (3E) */
    float *out_w = in_b + nin_b;   /* out_proj.weight is (E, E) */
    float *out_b = out_w + nout_w; /* out_proj.bias is (E) */
    const double wamp = sqrt(3.0 / (double)E);
    fill_uniform(x, nx, TAG_X, 2.0);
    fill_uniform(in_w, nin_w, TAG_IN_W, wamp);
    fill_uniform(in_b, nin_b, TAG_IN_B, 0.1);
    fill_uniform(out_w, nout_w, TAG_OUT_W, wamp);
    fill_uniform(out_b, E, TAG_OUT_B, 0.1);
    w6_inputs in = {.x = x,
                    .params = {.in_proj_weight = in_w,
                               .in_proj_bias = in_b,
                               .out_proj_weight = out_w,
                               .out_proj_bias = out_b},
                    .t = T,
                    .e = E,
                    .h = H};
    int rc = w6_run(&in, cfg, pool, nslots, err);
    free(arena);
    return rc;
}

/* ---- Main --------------------------------------------------------------------------------- */

static void usage(void) {
    fprintf(stderr,
            "usage: bench_attention [--time SECONDS] [--only NAME] [--threading pool|blas]\n"
            "       bench_attention --w6 [--w6-repeats N] [--w6-stride S] [--w6-dump FILE]\n");
}

int main(int argc, char **argv) {
    attn_error err = {0};
    attn_blas_info info;
    if (attn_blas_setup(argv, &info, &err) != ATTN_OK) {
        report_error("attn_blas_setup", &err);
        return 1;
    }

    double target = 1.5;
    const char *only = NULL;
    bool blas_threads = false, w6 = false;
    w6_config w6c = {.repeats = 5, .stride = 64, .dump = NULL};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--time") == 0 && i + 1 < argc) {
            char *end;
            target = strtod(argv[++i], &end);
            if (*end || !(target > 0 && target < 3600)) {
                usage();
                return 2;
            }
        } else if (strcmp(argv[i], "--w6") == 0) {
            w6 = true;
        } else if ((strcmp(argv[i], "--w6-repeats") == 0 || strcmp(argv[i], "--w6-stride") == 0) &&
                   i + 1 < argc) {
            char *end;
            bool rep = strcmp(argv[i], "--w6-repeats") == 0;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < (rep ? 1 : 0) || v > (rep ? 99 : 4096)) {
                usage();
                return 2;
            }
            *(rep ? &w6c.repeats : &w6c.stride) = (size_t)v;
        } else if (strcmp(argv[i], "--w6-dump") == 0 && i + 1 < argc) {
            w6c.dump = argv[++i];
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(argv[i], "--threading") == 0 && i + 1 < argc &&
                   (strcmp(argv[i + 1], "pool") == 0 || strcmp(argv[i + 1], "blas") == 0)) {
            blas_threads = strcmp(argv[++i], "blas") == 0;
        } else {
            usage();
            return 2;
        }
    }

    bool known = !only;
    for (size_t i = 0; i < sizeof WORKLOADS / sizeof WORKLOADS[0]; i++)
        known = known || strcmp(only, WORKLOADS[i].name) == 0;
    if (!known) {
        fprintf(stderr, "bench_attention: no workload is called %s\n", only);
        return 2;
    }

    int status = 1;
    attn_pool *pool = NULL;
    double *times = malloc(MAX_REPS * sizeof *times);
    long ncores = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncores < 1)
        ncores = 1;
    if (!times) {
        bench_nomem(&err, "the timings");
        report_error("main", &err);
        goto done;
    }

    printf("{\"type\":\"blas\",\"detected\":");
    json_str(info.detected);
    printf(",\"best\":");
    json_str(info.best);
    printf(",\"active\":");
    json_str(info.active);
    printf(",\"how\":");
    json_str(info.how);
    printf("}\n");
    fprintf(stderr, "bench_attention: OpenBLAS core %s (%s)\n", info.active, info.how);

    pool = attn_pool_create((size_t)ncores - 1, &err);
    if (!pool) {
        report_error("attn_pool_create", &err);
        goto done;
    }
    const size_t nslots = attn_pool_slots(pool);
    printf("{\"type\":\"machine\",\"cores\":%ld,\"helpers\":%ld,\"slots\":%zu,"
           "\"target_s\":%.3f,\"threading\":\"%s\"}\n",
           ncores, ncores - 1, nslots, target, blas_threads ? "blas" : "pool");
    fflush(stdout);

    if (peak_measure("before", pool, nslots) < 0) {
        bench_nomem(&err, "the sgemm operands");
        report_error("peak", &err);
        goto done;
    }
    size_t ran = 0;
    if (w6) {
        fprintf(stderr, "bench_attention: W6 (decode session)\n");
        if (w6_main(pool, nslots, &w6c, &err) != ATTN_OK) {
            report_error("W6", &err);
            goto done;
        }
        ran++;
    }
    for (size_t i = 0; i < sizeof WORKLOADS / sizeof WORKLOADS[0] && !w6; i++) {
        const workload *w = &WORKLOADS[i];
        if (only && strcmp(only, w->name) != 0)
            continue;
        fprintf(stderr, "bench_attention: %s (%s)\n", w->name, w->label);
        /* The sgemm peak always uses the pool; the workloads use the chosen threading. */
        if (blas_threads)
            openblas_set_num_threads((int)ncores);
        int wrc = workload_run(w, blas_threads ? NULL : pool, blas_threads ? 1 : nslots, target,
                               times, &err);
        openblas_set_num_threads(1);
        if (wrc != ATTN_OK) {
            report_error(w->name, &err);
            goto done;
        }
        ran++;
    }
    if (peak_measure("after", pool, nslots) < 0) {
        bench_nomem(&err, "the sgemm operands");
        report_error("peak", &err);
        goto done;
    }
    printf("{\"type\":\"done\",\"workloads\":%zu}\n", ran);
    status = 0;

done:
    attn_pool_destroy(pool);
    free(times);
    return status;
}
