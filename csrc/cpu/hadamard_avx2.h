/* AVX2 form of the first two Hadamard stages (strides 1 and 4, which stay inside
 * each 16-value block), for the AVX2 build of the CPU kernels.  Compilers turn
 * the portable loops for these short strides into slow shuffles; here one
 * block lives in two registers.  Every sum and difference is the one of
 * ckc_h4_butterfly (a + (-b) and b + a are bit-identical to a - b and a + b),
 * so results match the portable build bit for bit. */
#ifndef CKC_CPU_HADAMARD_AVX2_H
#define CKC_CPU_HADAMARD_AVX2_H

#include <immintrin.h>

/* Stride 1 on two quads [x0 x1 x2 x3] per register:
 * t = [x0-x1, x0+x1, x2-x3, x2+x3] = [m p r q], y = [p+r, p-r, q+m, q-m]. */
static inline __m256
ckc_avx2_h4_quads(__m256 x)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 t = _mm256_addsub_ps(_mm256_permute_ps(x, 0xA0), _mm256_permute_ps(x, 0xF5));
    const __m256 a = _mm256_permute_ps(t, 0xF5);                      /* p p q q */
    const __m256 b = _mm256_xor_ps(_mm256_permute_ps(t, 0x0A), sign); /* -r -r -m -m */
    return _mm256_addsub_ps(a, b);                                     /* a - b, a + b, ... */
}

/* Stride 4 on one block held as lo = [row0 | row1], hi = [row2 | row3]. */
static inline void
ckc_avx2_h4_rows(__m256 *lo, __m256 *hi)
{
    const __m256 lo_swap = _mm256_permute2f128_ps(*lo, *lo, 0x01);
    const __m256 hi_swap = _mm256_permute2f128_ps(*hi, *hi, 0x01);
    const __m256 p = _mm256_add_ps(*lo, lo_swap);  /* [p | p]   */
    const __m256 m = _mm256_sub_ps(*lo, lo_swap);  /* [m | -m]  */
    const __m256 q = _mm256_add_ps(*hi, hi_swap);  /* [q | q]   */
    const __m256 r = _mm256_sub_ps(*hi, hi_swap);  /* [r | -r]  */
    *lo = _mm256_add_ps(p, r);                     /* [p + r | p - r] */
    *hi = _mm256_add_ps(q, m);                     /* [q + m | q - m] */
}

/* Strides 1 and 4 over a row of whole 16-value blocks, in place. */
static inline void
ckc_row_hadamard16(float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16) {
        __m256 lo = ckc_avx2_h4_quads(_mm256_loadu_ps(v + i));
        __m256 hi = ckc_avx2_h4_quads(_mm256_loadu_ps(v + i + 8));
        ckc_avx2_h4_rows(&lo, &hi);
        _mm256_storeu_ps(v + i, lo);
        _mm256_storeu_ps(v + i + 8, hi);
    }
}

/* bfloat16 load, scale by the group's 1/sqrt(G), then strides 1 and 4: one pass. */
static inline void
ckc_row_load_bf16_hadamard16(const uint16_t *src, int64_t n, float norm, float *dst)
{
    const __m256 scale = _mm256_set1_ps(norm);
    for (int64_t i = 0; i < n; i += 16) {
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(src + i));
        const __m256i lo_bits = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(raw)), 16);
        const __m256i hi_bits = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(raw, 1)), 16);
        __m256 lo = ckc_avx2_h4_quads(_mm256_mul_ps(_mm256_castsi256_ps(lo_bits), scale));
        __m256 hi = ckc_avx2_h4_quads(_mm256_mul_ps(_mm256_castsi256_ps(hi_bits), scale));
        ckc_avx2_h4_rows(&lo, &hi);
        _mm256_storeu_ps(dst + i, lo);
        _mm256_storeu_ps(dst + i + 8, hi);
    }
}

/* y = H4 (x0..x3) on 8 lanes at once: ckc_h4_butterfly's sums in its order. */
static inline void
ckc_avx2_h4(__m256 *x0, __m256 *x1, __m256 *x2, __m256 *x3)
{
    const __m256 p = _mm256_add_ps(*x0, *x1);
    const __m256 m = _mm256_sub_ps(*x0, *x1);
    const __m256 q = _mm256_add_ps(*x2, *x3);
    const __m256 r = _mm256_sub_ps(*x2, *x3);
    *x0 = _mm256_add_ps(p, r);
    *x1 = _mm256_sub_ps(p, r);
    *x2 = _mm256_add_ps(m, q);
    *x3 = _mm256_sub_ps(q, m);
}

/* Strides 16 and 64 on one 256-value block, in place, in one pass: value
 * j + 16a + 64b (j < 16) takes part in the stride-16 butterfly over a and then
 * the stride-64 butterfly over b, so for 8 lanes of j the 16 vectors (a, b)
 * go through both stages in registers. */
static inline void
ckc_avx2_h4_strides16_64(float *v)
{
    for (int j = 0; j < 16; j += 8) {
        __m256 w[16]; /* w[4b + a] */
        int i;
        for (i = 0; i < 16; i++) {
            w[i] = _mm256_loadu_ps(v + j + 16 * i);
        }
        for (i = 0; i < 16; i += 4) {
            ckc_avx2_h4(&w[i], &w[i + 1], &w[i + 2], &w[i + 3]);
        }
        for (i = 0; i < 4; i++) {
            ckc_avx2_h4(&w[i], &w[i + 4], &w[i + 8], &w[i + 12]);
        }
        for (i = 0; i < 16; i++) {
            _mm256_storeu_ps(v + j + 16 * i, w[i]);
        }
    }
}

/* bfloat16 bits of n floats (n a multiple of 16), as ckc_f32_to_bf16: round to
 * nearest even, every NaN the canonical 0x7FC0. */
static inline void
ckc_avx2_store_bf16(const float *v, int64_t n, uint16_t *dst)
{
    const __m256i round_bias = _mm256_set1_epi32(0x7FFF);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i quiet_nan = _mm256_set1_epi32(0x7FC0);
    for (int64_t i = 0; i < n; i += 16) {
        __m256i h[2];
        for (int k = 0; k < 2; k++) {
            const __m256 x = _mm256_loadu_ps(v + i + 8 * k);
            const __m256i u = _mm256_castps_si256(x);
            const __m256i r = _mm256_srli_epi32(
                _mm256_add_epi32(_mm256_add_epi32(u, round_bias), _mm256_and_si256(_mm256_srli_epi32(u, 16), one)), 16);
            h[k] = _mm256_blendv_epi8(r, quiet_nan, _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
        }
        /* packus works per 128-bit lane: [0-3 8-11 | 4-7 12-15] -> reorder qwords. */
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_permute4x64_epi64(_mm256_packus_epi32(h[0], h[1]), 0xD8));
    }
}

#endif /* CKC_CPU_HADAMARD_AVX2_H */
