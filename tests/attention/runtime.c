/* runtime.c - what libattn runs on: the softmax kernel sets against libm, the thread pool with two
 * callers at once, and the BLAS kernel choice, with the re-execution that applies it (this program
 * run again with --blas-probe, which main answers). */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "attention.h"
#include "internal.h"
#include "attention_test.h"

/* ---- kernels, pool, BLAS choice ----------------------------------------------------------- */

void test_kernels(void) {
    const char *names[] = {"avx512", "avx2", "sse2"};
    __builtin_cpu_init();
    bool can[] = {__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"),
                  __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), true};
    enum { n = 1003 };
    static float x[n], y[n];
    for (size_t i = 0; i < n; i++)
        x[i] = -100.0f + 100.0f * (float)i / (float)(n - 1);
    x[5] = -INFINITY;
    for (int s = 0; s < 3; s++) {
        if (!can[s])
            continue;
        const attnk_set *ks = attnk_get_named(names[s]);
        CHECK(ks != NULL, "kernel set %s missing", names[s]);
        if (!ks)
            continue;
        memcpy(y, x, sizeof x);
        float sum = ks->exp_sum(y, n, 0.0f);
        double worst = 0, ref = 0;
        for (size_t i = 0; i < n; i++) {
            double e = exp((double)x[i]);
            ref += e;
            if (e > 1.2e-38)
                worst = fmax(worst, fabs((double)y[i] - e) / e);
            else
                CHECK(y[i] >= 0.0f && y[i] < 1.2e-38f, "%s: exp(%g) = %g", names[s], (double)x[i],
                      (double)y[i]);
        }
        CHECK(y[5] == 0.0f, "%s: exp(-inf) = %g", names[s], (double)y[5]);
        CHECK(worst < 3.0 * 5.96e-8, "%s: exp relative error %.3g (over 3 ulp)", names[s], worst);
        CHECK(fabs((double)sum - ref) / ref < 1e-6, "%s: exp sum %.8g vs %.8g", names[s],
              (double)sum, ref);
        CHECK(ks->row_max(x, n) == 0.0f && ks->row_max(x, 0) == -INFINITY, "%s: row_max", names[s]);
        CHECK(ks->all_finite(y, n) && !ks->all_finite(x, n), "%s: all_finite", names[s]);
    }
}

typedef struct pool_probe {
    atomic_int hits[1000];
    atomic_int bad_slot;
    size_t slots;
} pool_probe;

static void probe_task(void *ctx, size_t t, size_t slot) {
    pool_probe *pp = ctx;
    atomic_fetch_add(&pp->hits[t], 1);
    if (slot >= pp->slots)
        atomic_store(&pp->bad_slot, 1);
}

typedef struct pool_caller {
    attn_pool *pool;
    pool_probe probe;
} pool_caller;

static void *pool_caller_main(void *arg) {
    pool_caller *pc = arg;
    for (int r = 0; r < 50; r++)
        attn_pool_run(pc->pool, 1000, probe_task, &pc->probe);
    return NULL;
}

void test_pool(void) {
    attn_error err = {0};
    attn_pool *pool = attn_pool_create(3, &err);
    CHECK(pool != NULL, "%s", err.msg);
    if (!pool)
        return;
    CHECK(attn_pool_slots(pool) == 4 && attn_pool_slots(NULL) == 1, "slots");
    /* two callers at once, each counting its own tasks */
    static pool_caller pc[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        memset(&pc[i], 0, sizeof pc[i]);
        pc[i].pool = pool;
        pc[i].probe.slots = attn_pool_slots(pool);
        pthread_create(&th[i], NULL, pool_caller_main, &pc[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        bool all50 = true;
        for (int t = 0; t < 1000; t++)
            all50 = all50 && atomic_load(&pc[i].probe.hits[t]) == 50;
        CHECK(all50, "caller %d: every task must run exactly once per run", i);
        CHECK(!atomic_load(&pc[i].probe.bad_slot), "caller %d: slot out of range", i);
    }
    attn_pool_destroy(pool);
    attn_pool_destroy(NULL);
}

void test_blas_choice(void) {
    static const char *table[][3] = {
        /* detected, best the CPU supports, expected choice */
        {"Prescott", "SkylakeX", "SkylakeX"}, /* the misdetected Xeon */
        {"Prescott", "Haswell", "Haswell"},       {"Haswell", "SkylakeX", "SkylakeX"},
        {"SkylakeX", "SkylakeX", "SkylakeX"},     {"Zen", "Haswell", "Zen"},
        {"Cooperlake", "SkylakeX", "Cooperlake"}, {"Sandybridge", "Haswell", "Haswell"},
        {"Core2", "Nehalem", "Nehalem"},          {"NewCore2099", "SkylakeX", "NewCore2099"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        char out[32];
        attn_blas_choose(table[i][0], table[i][1], out);
        CHECK(strcmp(out, table[i][2]) == 0, "detected %s, best %s: chose %s, want %s", table[i][0],
              table[i][1], out, table[i][2]);
    }
}

/* Runs this program's BLAS probe with ATTND_BLAS_CORETYPE=core (OPENBLAS_CORETYPE unset) into
 * line. False when it produced nothing or failed. */
static bool blas_probe_run(const char *self, const char *core, char *line, size_t n) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "env -u OPENBLAS_CORETYPE ATTND_BLAS_CORETYPE=%s '%s' --blas-probe",
             core, self);
    FILE *f = popen(cmd, "r");
    line[0] = '\0';
    bool got = f && fgets(line, (int)n, f);
    int rc = f ? pclose(f) : -1;
    return got && rc == 0;
}

/* Re-executes this program with ATTND_BLAS_CORETYPE forcing a core other than the one OpenBLAS
 * detects (Prescott, or Nehalem where OpenBLAS detects Prescott, as on some Xeons): attn_blas_setup
 * must re-exec and the child must then run the forced core. */
void test_blas_reexec(const char *self) {
    char line[256];
    CHECK(blas_probe_run(self, "keep", line, sizeof line), "blas probe (keep) failed: %s", line);
    const char *forced = strncmp(line, "Prescott|", 9) == 0 ? "Nehalem" : "Prescott";
    char want[32];
    snprintf(want, sizeof want, "%s|", forced);
    CHECK(blas_probe_run(self, forced, line, sizeof line), "blas probe (%s) failed: %s", forced,
          line);
    CHECK(strncmp(line, want, strlen(want)) == 0 && strstr(line, "re-executed"),
          "forced core %s not active after re-exec: %s", forced, line);
}
