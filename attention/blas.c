/* blas.c - makes OpenBLAS run the best kernel this CPU supports, and runs it single-threaded.
 *
 * Debian's OpenBLAS 0.3.21 falls back to its generic "Prescott" kernels on CPUs it does not know
 * (an AVX-512 Xeon of family 6, model 207, for one), a 4x loss for sgemm. It reads
 * OPENBLAS_CORETYPE only while the library loads, so when the core it detected is below what the
 * CPU supports, we set the variable and re-execute the program once. */
#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "internal.h"

/* Set in the environment of the re-executed process: the core OpenBLAS detected first. */
#define REEXEC_ENV   "ATTND_BLAS_REEXEC"
#define OVERRIDE_ENV "ATTND_BLAS_CORETYPE"

/* Instruction-set rank of OpenBLAS x86-64 core names: 5 AVX-512, 4 AVX2+FMA, 3 AVX, 2 SSE4.2,
 * 1 older. 0 = a name we do not know (never overridden). */
static int core_rank(const char *name) {
    static const struct {
        const char *name;
        int rank;
    } cores[] = {
        {"SkylakeX", 5},    {"Cooperlake", 5},   {"SapphireRapids", 5}, {"Haswell", 4},
        {"Zen", 4},         {"Sandybridge", 3},  {"Bulldozer", 3},      {"Piledriver", 3},
        {"Steamroller", 3}, {"Excavator", 3},    {"Nehalem", 2},        {"Prescott", 1},
        {"Core2", 1},       {"Penryn", 1},       {"Dunnington", 1},     {"Atom", 1},
        {"Opteron", 1},     {"Opteron_SSE3", 1}, {"Barcelona", 1},      {"Bobcat", 1},
        {"Katmai", 1},      {"Coppermine", 1},   {"Northwood", 1},      {"Banias", 1},
        {"Athlon", 1},      {"Nano", 1},
    };
    for (size_t i = 0; i < sizeof cores / sizeof cores[0]; i++)
        if (strcasecmp(cores[i].name, name) == 0)
            return cores[i].rank;
    return 0;
}

const char *attn_blas_cpu_best(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
    if (__builtin_cpu_supports("avx"))
        return "Sandybridge";
    if (__builtin_cpu_supports("sse4.2"))
        return "Nehalem";
    return "Prescott";
}

void attn_blas_choose(const char *detected_core, const char *best_core, char out[32]) {
    int have = core_rank(detected_core);
    const char *pick = (have != 0 && have < core_rank(best_core)) ? best_core : detected_core;
    snprintf(out, 32, "%s", pick);
}

static void copy_name(char dst[32], const char *src) {
    snprintf(dst, 32, "%s", src ? src : "unknown");
}

/* Re-executes the program with OPENBLAS_CORETYPE=core. Returns only on failure. */
static void reexec_with(char **argv, const char *core, const char *detected) {
    if (!argv || !argv[0])
        return;
    setenv("OPENBLAS_CORETYPE", core, 1);
    setenv(REEXEC_ENV, detected, 1);
    execv("/proc/self/exe", argv);
    int e = errno;
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(REEXEC_ENV);
    errno = e;
}

int attn_blas_setup(char **argv, attn_blas_info *info, attn_error *err) {
    attn_blas_info local;
    if (!info)
        info = &local;
    memset(info, 0, sizeof *info);
    const char *now = openblas_get_corename();
    const char *best = attn_blas_cpu_best();
    const char *override = getenv(OVERRIDE_ENV);
    const char *marker = getenv(REEXEC_ENV);
    const char *user = getenv("OPENBLAS_CORETYPE");
    copy_name(info->best, best);
    copy_name(info->active, now);
    copy_name(info->detected, marker ? marker : now);

    if (marker) {
        /* We are the re-executed process; say what happened and do not loop. */
        if (strcasecmp(now, user ? user : "") == 0)
            snprintf(info->how, sizeof info->how,
                     "OpenBLAS detected %s; re-executed with OPENBLAS_CORETYPE=%s", info->detected,
                     now);
        else
            snprintf(info->how, sizeof info->how,
                     "OpenBLAS detected %s; asked for %s but it runs %s", info->detected,
                     user ? user : "?", now);
        unsetenv(REEXEC_ENV);
    } else if (override && *override && strcasecmp(override, "auto") != 0) {
        if (strcasecmp(override, "keep") == 0) {
            snprintf(info->how, sizeof info->how, "%s=keep: using %s as OpenBLAS detected it",
                     OVERRIDE_ENV, now);
        } else if (core_rank(override) == 0) {
            return attn_fail(err, ATTN_ERR_ARG,
                             "%s=%s is not an OpenBLAS core this program knows (try SkylakeX, "
                             "Haswell, Sandybridge, Nehalem, Prescott, auto or keep)",
                             OVERRIDE_ENV, override);
        } else if (core_rank(override) > core_rank(best)) {
            return attn_fail(err, ATTN_ERR_ARG,
                             "%s=%s needs instructions this CPU lacks (its best core is %s)",
                             OVERRIDE_ENV, override, best);
        } else if (strcasecmp(override, now) == 0) {
            snprintf(info->how, sizeof info->how, "%s=%s forces the core in use", OVERRIDE_ENV,
                     override);
        } else {
            reexec_with(argv, override, now);
            snprintf(info->how, sizeof info->how, "%s=%s, but re-executing failed (%s); using %s",
                     OVERRIDE_ENV, override, strerror(errno), now);
        }
    } else if (user && *user) {
        if (core_rank(now) > core_rank(best))
            return attn_fail(err, ATTN_ERR_ARG,
                             "OPENBLAS_CORETYPE=%s makes OpenBLAS run %s, which needs "
                             "instructions this CPU lacks (its best core is %s)",
                             user, now, best);
        snprintf(info->how, sizeof info->how, "OPENBLAS_CORETYPE=%s was set by the user; using %s",
                 user, now);
    } else {
        char pick[32];
        attn_blas_choose(now, best, pick);
        if (strcasecmp(pick, now) == 0) {
            snprintf(info->how, sizeof info->how,
                     "OpenBLAS detected %s, which matches this CPU (best: %s)", now, best);
        } else {
            reexec_with(argv, pick, now);
            snprintf(info->how, sizeof info->how,
                     "OpenBLAS detected %s below this CPU's %s, but re-executing failed (%s)", now,
                     pick, strerror(errno));
        }
    }
    openblas_set_num_threads(1);
    return ATTN_OK;
}
