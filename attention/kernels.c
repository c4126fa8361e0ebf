/* kernels.c - the vectorised row kernels of the softmax (max, exp-and-sum, scale, finiteness).
 *
 * Each kernel is written once with GCC vector extensions and compiled three times: for AVX-512,
 * for AVX2 with FMA, and for baseline x86-64 (SSE2). attnk_init picks the widest set the CPU
 * runs. The exp is a Cephes-style polynomial accurate to about 1.3 ulp over the range the softmax
 * uses (arguments <= 0); it never produces NaN and maps -inf to exactly 0. On AVX-512 its
 * rounding and its scaling by 2^k use that ISA's own instructions (vexp_avx512_isa): the same
 * reduction and polynomial, with fewer operations than the generic form. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "internal.h"

/* exp(x) = 2^k * exp(r), k = round(x / ln 2), r = x - k ln 2 with ln 2 split in two parts so that
 * k * LN2_HI is exact. P0..P5 are the Cephes expf minimax coefficients. */
#define EXP_LOG2E  1.44269504088896341f
#define EXP_ROUND  12582912.0f /* 1.5 * 2^23: adding it rounds to an integer */
#define EXP_LN2_HI 0.693359375f
#define EXP_LN2_LO -2.12194440e-4f
#define EXP_P0     1.9875691500e-4f
#define EXP_P1     1.3981999507e-3f
#define EXP_P2     8.3334519073e-3f
#define EXP_P3     4.1665795894e-2f
#define EXP_P4     1.6666665459e-1f
#define EXP_P5     5.0000001201e-1f
#define EXP_LOWEST -87.33654f /* below this expf is subnormal; we return 0 */

#define KERNEL_SET(SUF, LANES, TARGET, VEXP)                                                       \
    typedef float vf_##SUF __attribute__((vector_size(LANES * 4)));                                \
    typedef int32_t vi_##SUF __attribute__((vector_size(LANES * 4)));                              \
                                                                                                   \
    TARGET static inline vf_##SUF sel_##SUF(vi_##SUF mask, vf_##SUF a, vf_##SUF b) {               \
        vi_##SUF ia, ib;                                                                           \
        memcpy(&ia, &a, sizeof ia);                                                                \
        memcpy(&ib, &b, sizeof ib);                                                                \
        ia = (ia & mask) | (ib & ~mask);                                                           \
        memcpy(&a, &ia, sizeof a);                                                                 \
        return a;                                                                                  \
    }                                                                                              \
                                                                                                   \
    TARGET static float row_max_##SUF(const float *x, size_t n) {                                  \
        vf_##SUF m;                                                                                \
        for (int u = 0; u < LANES; u++)                                                            \
            m[u] = -INFINITY;                                                                      \
        size_t j = 0;                                                                              \
        for (; j + LANES <= n; j += LANES) {                                                       \
            vf_##SUF v;                                                                            \
            memcpy(&v, x + j, sizeof v);                                                           \
            m = sel_##SUF(v > m, v, m);                                                            \
        }                                                                                          \
        float r = -INFINITY;                                                                       \
        for (int u = 0; u < LANES; u++)                                                            \
            r = m[u] > r ? m[u] : r;                                                               \
        for (; j < n; j++)                                                                         \
            r = x[j] > r ? x[j] : r;                                                               \
        return r;                                                                                  \
    }                                                                                              \
                                                                                                   \
    TARGET __attribute__((unused)) static inline vf_##SUF vexp_##SUF(vf_##SUF x) {                 \
        vi_##SUF keep = x >= EXP_LOWEST;                                                           \
        vf_##SUF zero = {0};                                                                       \
        x = sel_##SUF(keep, x, zero + EXP_LOWEST); /* also turns -inf and NaN into LOWEST */       \
        vf_##SUF k = (x * EXP_LOG2E + EXP_ROUND) - EXP_ROUND;                                      \
        vf_##SUF r = x - k * EXP_LN2_HI;                                                           \
        r = r - k * EXP_LN2_LO;                                                                    \
        vf_##SUF p = r * EXP_P0 + EXP_P1;                                                          \
        p = p * r + EXP_P2;                                                                        \
        p = p * r + EXP_P3;                                                                        \
        p = p * r + EXP_P4;                                                                        \
        p = p * r + EXP_P5;                                                                        \
        p = p * r * r + r + 1.0f;                                                                  \
        vi_##SUF bits = (__builtin_convertvector(k, vi_##SUF) + 127) << 23;                        \
        vf_##SUF two_k;                                                                            \
        memcpy(&two_k, &bits, sizeof two_k);                                                       \
        return sel_##SUF(keep, p * two_k, zero);                                                   \
    }                                                                                              \
                                                                                                   \
    TARGET static float exp_sum_##SUF(float *x, size_t n, float m) {                               \
        vf_##SUF acc = {0}, last;                                                                  \
        const size_t whole = n / LANES * LANES;                                                    \
        if (whole && whole < n) { /* the tail: the last whole vector, before it is overwritten */  \
            memcpy(&last, x + n - LANES, sizeof last);                                             \
            last = VEXP(last - m);                                                                 \
        }                                                                                          \
        size_t j = 0;                                                                              \
        for (; j + LANES <= n; j += LANES) {                                                       \
            vf_##SUF v;                                                                            \
            memcpy(&v, x + j, sizeof v);                                                           \
            v = VEXP(v - m);                                                                       \
            memcpy(x + j, &v, sizeof v);                                                           \
            acc += v;                                                                              \
        }                                                                                          \
        if (whole && j < n) { /* its lanes from k on are the elements j.. n - 1 */                 \
            const int k = LANES - (int)(n - j);                                                    \
            vi_##SUF lane, zero = {0};                                                             \
            for (int u = 0; u < LANES; u++)                                                        \
                lane[u] = u;                                                                       \
            vf_##SUF fz = {0};                                                                     \
            acc += sel_##SUF(lane >= zero + k, last, fz);                                          \
            memcpy(x + j, (const float *)&last + k, (n - j) * sizeof *x);                          \
            j = n;                                                                                 \
        }                                                                                          \
        if (j < n) { /* short rows go through the same polynomial, padded with -inf */             \
            vf_##SUF v;                                                                            \
            for (int u = 0; u < LANES; u++)                                                        \
                v[u] = j + (size_t)u < n ? x[j + (size_t)u] : -INFINITY;                           \
            v = VEXP(v - m);                                                                       \
            for (size_t u = 0; j + u < n; u++)                                                     \
                x[j + u] = v[u];                                                                   \
            acc += v;                                                                              \
        }                                                                                          \
        float s = 0.0f;                                                                            \
        for (int u = 0; u < LANES; u++)                                                            \
            s += acc[u];                                                                           \
        return s;                                                                                  \
    }                                                                                              \
                                                                                                   \
    TARGET static void scale_##SUF(float *x, size_t n, float a) {                                  \
        for (size_t j = 0; j < n; j++)                                                             \
            x[j] *= a;                                                                             \
    }                                                                                              \
                                                                                                   \
    TARGET static bool all_finite_##SUF(const float *x, size_t n) {                                \
        vf_##SUF acc = {0};                                                                        \
        size_t j = 0;                                                                              \
        for (; j + LANES <= n; j += LANES) {                                                       \
            vf_##SUF v;                                                                            \
            memcpy(&v, x + j, sizeof v);                                                           \
            acc += v - v; /* stays 0 unless v holds an infinity or a NaN */                        \
        }                                                                                          \
        float s = 0.0f;                                                                            \
        for (int u = 0; u < LANES; u++)                                                            \
            s += acc[u];                                                                           \
        for (; j < n; j++)                                                                         \
            s += x[j] - x[j];                                                                      \
        return s == 0.0f;                                                                          \
    }                                                                                              \
                                                                                                   \
    TARGET static float max_finite_##SUF(const float *x, size_t n, bool *finite) {                 \
        vf_##SUF m, acc = {0};                                                                     \
        for (int u = 0; u < LANES; u++)                                                            \
            m[u] = -INFINITY;                                                                      \
        size_t j = 0;                                                                              \
        for (; j + LANES <= n; j += LANES) {                                                       \
            vf_##SUF v;                                                                            \
            memcpy(&v, x + j, sizeof v);                                                           \
            m = sel_##SUF(v > m, v, m);                                                            \
            acc += v - v;                                                                          \
        }                                                                                          \
        if (j < n && n >= LANES) { /* the tail as the last whole vector: max and the check         \
                                      do not mind seeing an element twice */                       \
            vf_##SUF v;                                                                            \
            memcpy(&v, x + n - LANES, sizeof v);                                                   \
            m = sel_##SUF(v > m, v, m);                                                            \
            acc += v - v;                                                                          \
            j = n;                                                                                 \
        }                                                                                          \
        float r = -INFINITY, s = 0.0f;                                                             \
        for (int u = 0; u < LANES; u++) {                                                          \
            r = m[u] > r ? m[u] : r;                                                               \
            s += acc[u];                                                                           \
        }                                                                                          \
        for (; j < n; j++) {                                                                       \
            r = x[j] > r ? x[j] : r;                                                               \
            s += x[j] - x[j];                                                                      \
        }                                                                                          \
        *finite = s == 0.0f;                                                                       \
        return r;                                                                                  \
    }                                                                                              \
                                                                                                   \
    static const attnk_set set_##SUF = {#SUF,        row_max_##SUF,    exp_sum_##SUF,              \
                                        scale_##SUF, all_finite_##SUF, max_finite_##SUF};

/* The same exp on AVX-512 with its own instructions where the generic form takes several: the
 * rounding of k (vrndscaleps), and 2^k times the polynomial with the zeros below EXP_LOWEST
 * (one masked vscalefps, where the generic form builds 2^k's bits, multiplies and selects). The
 * reduction and the polynomial are the generic form's. */
typedef float vf16 __attribute__((vector_size(64)));

__attribute__((target("avx512f,avx512dq,fma"))) static inline vf16 vexp_avx512_isa(vf16 xv) {
    __m512 x = (__m512)xv;
    /* Lanes below EXP_LOWEST, -inf and NaN come out 0 through the mask, whatever the arithmetic
     * made of them on the way (-inf turns into NaN at r: no trap, no slow path). */
    __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(EXP_LOWEST), _CMP_GE_OQ);
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(EXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(EXP_LN2_LO), r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(EXP_P0), r, _mm512_set1_ps(EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_P5));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
    return (vf16)_mm512_maskz_scalef_ps(keep, p, k);
}

KERNEL_SET(avx512, 16, __attribute__((target("avx512f,avx512dq,fma"))), vexp_avx512_isa)
KERNEL_SET(avx2, 8, __attribute__((target("avx2,fma"))), vexp_avx2)
KERNEL_SET(sse2, 4, , vexp_sse2)

/* Chosen once, before any worker runs (see attnk_get). */
static const attnk_set *attnk_active;

const attnk_set *attnk_get(void) {
    const attnk_set *s = __atomic_load_n(&attnk_active, __ATOMIC_ACQUIRE);
    if (s)
        return s;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
        s = &set_avx512;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        s = &set_avx2;
    else
        s = &set_sse2;
    __atomic_store_n(&attnk_active, s, __ATOMIC_RELEASE);
    return s;
}

const attnk_set *attnk_get_named(const char *name) {
    const attnk_set *all[] = {&set_avx512, &set_avx2, &set_sse2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(all[i]->name, name) == 0)
            return all[i];
    return NULL;
}
