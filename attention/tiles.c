/* tiles.c - the block products of the fused tiled path: the logits of a block of query rows
 * against a tile of keys, and the product of a block of softmax rows with the tile's values.
 *
 * Each kernel is written once with GCC vector extensions and compiled three times, for AVX-512,
 * for AVX2 with FMA and for baseline x86-64 (SSE2), as the softmax kernels of kernels.c are;
 * attnt_get picks the widest set the CPU runs. They are attnd's own and do not go through
 * OpenBLAS, so OPENBLAS_CORETYPE does not bind them.
 *
 * Legend: D the query/key width, Dv the value width, W the keys of a packed panel (two vectors),
 * R the rows a kernel keeps in registers (QK_R for the logits, PV_R for the values, whose
 * columns go PV_NV vectors at a time); the registers hold R x 2 or R x PV_NV accumulators. Each
 * logit is q.k summed over d in order, then scaled, as sgemm with alpha = scale computes it (up to
 * the order of the additions). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "internal.h"

typedef float f4 __attribute__((vector_size(16)));
typedef int32_t i4 __attribute__((vector_size(16)));

/* The lanes i0..i3 of a and b (b's numbered from 4 on): GCC's __builtin_shuffle, or clang's
 * __builtin_shufflevector (the ASan and fuzz builds use clang, which lacks the former). */
#if defined(__clang__)
#define SHUF4(a, b, i0, i1, i2, i3) __builtin_shufflevector(a, b, i0, i1, i2, i3)
#else
#define SHUF4(a, b, i0, i1, i2, i3) __builtin_shuffle(a, b, (i4){i0, i1, i2, i3})
#endif

/* One whole panel of w keys (w a multiple of 4) from k (rows of d floats, ld apart) into dst
 * (d rows of w): 4 keys x 4 values at a time, transposed with shuffles; the last d % 4 values of
 * each key one by one. Plain 128-bit vectors, so every flavour can use it. */
static inline void pack_panel4(float *dst, const float *k, size_t ld, size_t d, size_t w) {
    const size_t d4 = d / 4 * 4;
    for (size_t jj = 0; jj < w; jj += 4) {
        const float *r = k + jj * ld;
        for (size_t c = 0; c < d4; c += 4) {
            f4 r0, r1, r2, r3;
            memcpy(&r0, r + c, sizeof r0);
            memcpy(&r1, r + ld + c, sizeof r1);
            memcpy(&r2, r + 2 * ld + c, sizeof r2);
            memcpy(&r3, r + 3 * ld + c, sizeof r3);
            f4 t0 = SHUF4(r0, r1, 0, 4, 1, 5);
            f4 t1 = SHUF4(r2, r3, 0, 4, 1, 5);
            f4 t2 = SHUF4(r0, r1, 2, 6, 3, 7);
            f4 t3 = SHUF4(r2, r3, 2, 6, 3, 7);
            f4 c0 = SHUF4(t0, t1, 0, 1, 4, 5);
            f4 c1 = SHUF4(t0, t1, 2, 3, 6, 7);
            f4 c2 = SHUF4(t2, t3, 0, 1, 4, 5);
            f4 c3 = SHUF4(t2, t3, 2, 3, 6, 7);
            memcpy(dst + c * w + jj, &c0, sizeof c0);
            memcpy(dst + (c + 1) * w + jj, &c1, sizeof c1);
            memcpy(dst + (c + 2) * w + jj, &c2, sizeof c2);
            memcpy(dst + (c + 3) * w + jj, &c3, sizeof c3);
        }
        for (size_t i = 0; i < 4; i++)
            for (size_t c = d4; c < d; c++)
                dst[c * w + jj + i] = r[i * ld + c];
    }
}

/* v[0] into every lane of v (LANES of them): GCC's one shuffle, or on clang a loop it turns into
 * the same broadcast. */
#if defined(__clang__)
#define SPLAT(v, SUF, LANES)                                                                       \
    for (int l_ = 1; l_ < (LANES); l_++)                                                           \
    (v)[l_] = (v)[0]
#else
#define SPLAT(v, SUF, LANES) (v) = __builtin_shuffle((v), (ti_##SUF){0})
#endif

#define TILE_SET(SUF, LANES, QK_R, PV_R, PV_NV, TARGET, VMAX)                                      \
    typedef float tf_##SUF __attribute__((vector_size(LANES * 4)));                                \
                                                                                                   \
    typedef int32_t ti_##SUF __attribute__((vector_size(LANES * 4)));                              \
                                                                                                   \
    /* x in every lane (a broadcast; x + 0 would round -0 and cost an add). */                     \
    TARGET static inline tf_##SUF splat_##SUF(float x) {                                           \
        tf_##SUF v = {x};                                                                          \
        SPLAT(v, SUF, LANES);                                                                      \
        return v;                                                                                  \
    }                                                                                              \
                                                                                                   \
    TARGET static void pack_kt_##SUF(float *kt, const float *k, size_t ld, size_t cols,            \
                                     size_t d) {                                                   \
        const size_t w = 2 * LANES;                                                                \
        for (size_t p0 = 0; p0 < cols; p0 += w) {                                                  \
            float *dst = kt + p0 * d;                                                              \
            size_t n = cols - p0 < w ? cols - p0 : w;                                              \
            if (n == w) { /* a whole panel: 4 x 4 blocks transposed in registers */                \
                pack_panel4(dst, k + p0 * ld, ld, d, w);                                           \
                continue;                                                                          \
            }                                                                                      \
            for (size_t jj = 0; jj < n; jj++) {                                                    \
                const float *src = k + (p0 + jj) * ld;                                             \
                for (size_t c = 0; c < d; c++)                                                     \
                    dst[c * w + jj] = src[c];                                                      \
            }                                                                                      \
            for (size_t jj = n; jj < w; jj++)                                                      \
                for (size_t c = 0; c < d; c++)                                                     \
                    dst[c * w + jj] = 0.0f;                                                        \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* R rows of logits against npan panels, of which cols keys are real (the rest of the last     \
     * panel is padding). With rmax, also each row's max over its real keys, or +inf in every      \
     * row when one of their logits is not finite: the online softmax then needs no pass of its    \
     * own for them. Whole panels take it from the registers, a partial last one from s. */        \
    TARGET static inline __attribute__((always_inline)) void qk_rows_##SUF(                        \
        float *s, size_t lds, const float *q, size_t ldq, const float *kt, size_t npan,            \
        size_t cols, size_t d, float scale, float *rmax, const int R) {                            \
        const size_t w = 2 * LANES;                                                                \
        const tf_##SUF zero = {0};                                                                 \
        tf_##SUF mx[QK_R], nf = zero; /* running maxima; nf stays 0 while all are finite */        \
        for (int r = 0; r < R; r++)                                                                \
            mx[r] = splat_##SUF(-INFINITY);                                                        \
        for (size_t pn = 0; pn < npan; pn++) {                                                     \
            const float *kp = kt + pn * d * w;                                                     \
            tf_##SUF a[QK_R][2];                                                                   \
            for (int r = 0; r < R; r++)                                                            \
                a[r][0] = a[r][1] = (tf_##SUF){0};                                                 \
            for (size_t c = 0; c < d; c++) {                                                       \
                tf_##SUF k0, k1;                                                                   \
                memcpy(&k0, kp + c * w, sizeof k0);                                                \
                memcpy(&k1, kp + c * w + LANES, sizeof k1);                                        \
                for (int r = 0; r < R; r++) {                                                      \
                    tf_##SUF b = splat_##SUF(q[(size_t)r * ldq + c]);                              \
                    a[r][0] += b * k0;                                                             \
                    a[r][1] += b * k1;                                                             \
                }                                                                                  \
            }                                                                                      \
            const bool whole = rmax && (pn + 1) * w <= cols;                                       \
            for (int r = 0; r < R; r++) {                                                          \
                tf_##SUF x0 = a[r][0] * scale, x1 = a[r][1] * scale;                               \
                memcpy(s + (size_t)r * lds + pn * w, &x0, sizeof x0);                              \
                memcpy(s + (size_t)r * lds + pn * w + LANES, &x1, sizeof x1);                      \
                if (whole) { /* the max skips NaN; x * 0 keeps it (and an infinity) in nf, */      \
                    mx[r] = VMAX(VMAX(mx[r], x0), x1); /* each alone: x0 + x1 may overflow */      \
                    nf += x0 * zero;                                                               \
                    nf += x1 * zero;                                                               \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        if (!rmax)                                                                                 \
            return;                                                                                \
        float z = 0.0f;                                                                            \
        for (int u = 0; u < LANES; u++)                                                            \
            z += nf[u];                                                                            \
        const size_t tail = npan * w > cols ? (npan - 1) * w : cols; /* the partial panel */       \
        for (int r = 0; r < R; r++) {                                                              \
            float m = -INFINITY;                                                                   \
            for (int u = 0; u < LANES; u++)                                                        \
                m = mx[r][u] > m ? mx[r][u] : m;                                                   \
            for (size_t j = tail; j < cols; j++) {                                                 \
                float x = s[(size_t)r * lds + j];                                                  \
                z += x * 0.0f;                                                                     \
                m = x > m ? x : m;                                                                 \
            }                                                                                      \
            rmax[r] = m;                                                                           \
        }                                                                                          \
        if (z != 0.0f)                                                                             \
            for (int r = 0; r < R; r++)                                                            \
                rmax[r] = INFINITY;                                                                \
    }                                                                                              \
                                                                                                   \
    TARGET static void qk_##SUF(float *s, size_t lds, const float *q, size_t ldq, size_t rows,     \
                                const float *kt, size_t cols, size_t d, float scale,               \
                                float *rmax) {                                                     \
        const size_t npan = (cols + 2 * LANES - 1) / (2 * LANES);                                  \
        size_t i = 0;                                                                              \
        for (; i + QK_R <= rows; i += QK_R)                                                        \
            qk_rows_##SUF(s + i * lds, lds, q + i * ldq, ldq, kt, npan, cols, d, scale,            \
                          rmax ? rmax + i : NULL, QK_R);                                           \
        for (; i + 4 <= rows; i += 4) /* the rest in fours, then ones */                           \
            qk_rows_##SUF(s + i * lds, lds, q + i * ldq, ldq, kt, npan, cols, d, scale,            \
                          rmax ? rmax + i : NULL, 4);                                              \
        for (; i < rows; i++)                                                                      \
            qk_rows_##SUF(s + i * lds, lds, q + i * ldq, ldq, kt, npan, cols, d, scale,            \
                          rmax ? rmax + i : NULL, 1);                                              \
    }                                                                                              \
                                                                                                   \
    /* R rows of acc, NV vectors of columns from c0: acc += p v over cols keys. */                 \
    TARGET static inline __attribute__((always_inline)) void pv_tile_##SUF(                        \
        float *acc, size_t lda, const float *p, size_t ldp, const float *v, size_t ldv,            \
        size_t cols, size_t c0, const int R, const int NV) {                                       \
        tf_##SUF a[PV_R][PV_NV];                                                                   \
        for (int r = 0; r < R; r++)                                                                \
            for (int u = 0; u < NV; u++)                                                           \
                memcpy(&a[r][u], acc + (size_t)r * lda + c0 + (size_t)u * LANES, sizeof a[r][u]);  \
        for (size_t j = 0; j < cols; j++) {                                                        \
            tf_##SUF b[PV_NV];                                                                     \
            for (int u = 0; u < NV; u++)                                                           \
                memcpy(&b[u], v + j * ldv + c0 + (size_t)u * LANES, sizeof b[u]);                  \
            for (int r = 0; r < R; r++) {                                                          \
                tf_##SUF x = splat_##SUF(p[(size_t)r * ldp + j]);                                  \
                for (int u = 0; u < NV; u++)                                                       \
                    a[r][u] += x * b[u];                                                           \
            }                                                                                      \
        }                                                                                          \
        for (int r = 0; r < R; r++)                                                                \
            for (int u = 0; u < NV; u++)                                                           \
                memcpy(acc + (size_t)r * lda + c0 + (size_t)u * LANES, &a[r][u], sizeof a[r][u]);  \
    }                                                                                              \
                                                                                                   \
    /* R rows of acc, every column: whole chunks of PV_NV vectors, then single vectors, then the   \
     * scalar columns. */                                                                          \
    TARGET static inline __attribute__((always_inline)) void pv_rows_##SUF(                        \
        float *acc, size_t lda, const float *p, size_t ldp, const float *v, size_t ldv,            \
        size_t cols, size_t dv, const int R) {                                                     \
        size_t c0 = 0;                                                                             \
        for (; c0 + PV_NV * LANES <= dv; c0 += PV_NV * LANES)                                      \
            pv_tile_##SUF(acc, lda, p, ldp, v, ldv, cols, c0, R, PV_NV);                           \
        for (; c0 + 2 * LANES <= dv; c0 += 2 * LANES)                                              \
            pv_tile_##SUF(acc, lda, p, ldp, v, ldv, cols, c0, R, 2);                               \
        for (; c0 + LANES <= dv; c0 += LANES)                                                      \
            pv_tile_##SUF(acc, lda, p, ldp, v, ldv, cols, c0, R, 1);                               \
        for (int r = 0; r < R; r++)                                                                \
            for (size_t c = c0; c < dv; c++) {                                                     \
                float x = acc[(size_t)r * lda + c];                                                \
                for (size_t j = 0; j < cols; j++)                                                  \
                    x += p[(size_t)r * ldp + j] * v[j * ldv + c];                                  \
                acc[(size_t)r * lda + c] = x;                                                      \
            }                                                                                      \
    }                                                                                              \
                                                                                                   \
    TARGET static void pv_##SUF(float *acc, size_t lda, const float *p, size_t ldp, size_t rows,   \
                                const float *v, size_t ldv, size_t cols, size_t dv) {              \
        size_t i = 0;                                                                              \
        for (; i + PV_R <= rows; i += PV_R)                                                        \
            pv_rows_##SUF(acc + i * lda, lda, p + i * ldp, ldp, v, ldv, cols, dv, PV_R);           \
        for (; i + 2 <= rows; i += 2) /* the rest in twos, then ones */                            \
            pv_rows_##SUF(acc + i * lda, lda, p + i * ldp, ldp, v, ldv, cols, dv, 2);              \
        for (; i < rows; i++)                                                                      \
            pv_rows_##SUF(acc + i * lda, lda, p + i * ldp, ldp, v, ldv, cols, dv, 1);              \
    }                                                                                              \
                                                                                                   \
    static const attnt_set tiles_##SUF = {#SUF, 2 * LANES, pack_kt_##SUF, qk_##SUF, pv_##SUF};

/* VMAX(m, x): lane by lane, x where x > m, else m (so a NaN x leaves m): the ISA's max, whose
 * second operand wins when either is NaN. */
#define VMAX_AVX512(m, x) ((tf_avx512)_mm512_max_ps((__m512)(x), (__m512)(m)))
#define VMAX_AVX2(m, x)   ((tf_avx2)_mm256_max_ps((__m256)(x), (__m256)(m)))
#define VMAX_SSE2(m, x)   ((tf_sse2)_mm_max_ps((__m128)(x), (__m128)(m)))

TILE_SET(avx512, 16, 12, 6, 4, __attribute__((target("avx512f,avx512dq,fma"))), VMAX_AVX512)
TILE_SET(avx2, 8, 4, 6, 2, __attribute__((target("avx2,fma"))), VMAX_AVX2)
TILE_SET(sse2, 4, 4, 3, 3, , VMAX_SSE2)

/* Chosen once, as attnk_get chooses the softmax kernels. */
static const attnt_set *attnt_active;

const attnt_set *attnt_get(void) {
    const attnt_set *s = __atomic_load_n(&attnt_active, __ATOMIC_ACQUIRE);
    if (s)
        return s;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
        s = &tiles_avx512;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        s = &tiles_avx2;
    else
        s = &tiles_sse2;
    __atomic_store_n(&attnt_active, s, __ATOMIC_RELEASE);
    return s;
}

const attnt_set *attnt_get_named(const char *name) {
    const attnt_set *all[] = {&tiles_avx512, &tiles_avx2, &tiles_sse2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(all[i]->name, name) == 0)
            return all[i];
    return NULL;
}
