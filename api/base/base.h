/* base.h - api/base/, the room every other room of api/ stands on: checked sizes, the
 * first-error-wins error record (error.c: api_fail), the job memory cache whose blocks jobs,
 * buffers and bodies live in (mem.c), which instruction sets this CPU has (cpu.c), and the
 * deterministic uniform numbers of params.init and seeded tensors (uniform.c).
 *
 * Owns: error.c, mem.c, cpu.c, uniform.c. May include: libc and api.h (for api_error and
 * api_mem), nothing else of api/. Every room above (codec, models, job, v1, v2) may include
 * this header. Nothing here is part of api.h's contract. */
#ifndef ATTND_API_BASE_H
#define ATTND_API_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../api.h"

/* ---- Checked sizes --------------------------------------------------------------------------- */

/* *out = a * b (or a + b); false when it does not fit in size_t (then *out is unspecified). */
static inline bool apip_mul(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool apip_add(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* ---- Errors (error.c) ------------------------------------------------------------------------ */

/* api_fail (api.h) fills the caller's error record, the first error winning. */

/* ---- Job memory (mem.c) ---------------------------------------------------------------------- */

/* The capacity of a block of api_mem_alloc; 0 for NULL. */
size_t apip_mem_capacity(const void *block);

/* The cache a block of api_mem_alloc returns to; NULL for NULL and for a block from malloc. */
api_mem *apip_mem_owner(const void *block);

/* ---- Uniform numbers (uniform.c) ------------------------------------------------------------ */

/* splitmix64's increment (the golden gamma): the stream's state before its output i (from 0) is
 * seed + i * APIP_SPLITMIX_GAMMA (mod 2^64), so any stretch of it can be made on its own. */
#define APIP_SPLITMIX_GAMMA 0x9E3779B97F4A7C15u

/* Fills w (n floats) with the next n numbers of the splitmix64 stream at state, each output x
 * (state += APIP_SPLITMIX_GAMMA, z = state, z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9,
 * z = (z ^ z >> 27) * 0x94D049BB133111EB, x = z ^ z >> 31) made a uniform in [-a, a):
 * w[i] = (float)(a * (2u - 1)) with u = (x >> 40) / 2^24, in double. With a = 1 that is
 * (x >> 40) * 2^-23 - 1 exactly (24 bits, every value a float32). Returns the state after them,
 * state + n * APIP_SPLITMIX_GAMMA. */
uint64_t apip_uniform_fill(float *w, size_t n, double a, uint64_t state);

/* ---- Instruction sets (cpu.c) ---------------------------------------------------------------- */

/* Instruction sets the SIMD paths of api/ need, as bits for apip_cpu_has. */
enum {
    APIP_CPU_AVX512F = 1u << 0,
    APIP_CPU_AVX512BW = 1u << 1,
    APIP_CPU_AVX512DQ = 1u << 2,
    APIP_CPU_AVX512VL = 1u << 3,
    APIP_CPU_AVX512CD = 1u << 4,
    APIP_CPU_AVX512VBMI = 1u << 5,
    APIP_CPU_AVX512VBMI2 = 1u << 6,
    APIP_CPU_BMI = 1u << 7,
    APIP_CPU_BMI2 = 1u << 8,
    APIP_CPU_POPCNT = 1u << 9,
};

/* True when this CPU has every instruction set in features (a set of APIP_CPU_ bits; asked once,
 * then cached; thread-safe). Always false off x86-64 or without GCC's or clang's builtins. */
bool apip_cpu_has(unsigned features);

#endif
