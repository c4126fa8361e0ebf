/* cpu.c - which of the instruction sets api/'s SIMD paths use this CPU has: asked once, with
 * GCC's and clang's __builtin_cpu_supports (which also checks that the OS saves the AVX-512
 * registers), then cached. Off x86-64, or with another compiler, the answer is always none. */
#include "base.h"

#define CPU_KNOWN (1u << 31) /* set once the features have been asked */

static unsigned cpu_detect(void) {
    unsigned f = CPU_KNOWN;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    f |= __builtin_cpu_supports("avx512f") ? APIP_CPU_AVX512F : 0;
    f |= __builtin_cpu_supports("avx512bw") ? APIP_CPU_AVX512BW : 0;
    f |= __builtin_cpu_supports("avx512dq") ? APIP_CPU_AVX512DQ : 0;
    f |= __builtin_cpu_supports("avx512vl") ? APIP_CPU_AVX512VL : 0;
    f |= __builtin_cpu_supports("avx512cd") ? APIP_CPU_AVX512CD : 0;
    f |= __builtin_cpu_supports("avx512vbmi") ? APIP_CPU_AVX512VBMI : 0;
    f |= __builtin_cpu_supports("avx512vbmi2") ? APIP_CPU_AVX512VBMI2 : 0;
    f |= __builtin_cpu_supports("bmi") ? APIP_CPU_BMI : 0;
    f |= __builtin_cpu_supports("bmi2") ? APIP_CPU_BMI2 : 0;
    f |= __builtin_cpu_supports("popcnt") ? APIP_CPU_POPCNT : 0;
#endif
    return f;
}

bool apip_cpu_has(unsigned features) {
    static unsigned known; /* 0 until asked; every thread that asks finds the same answer */
    unsigned f = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (!f) {
        f = cpu_detect();
        __atomic_store_n(&known, f, __ATOMIC_RELAXED);
    }
    return (f & features) == features;
}
