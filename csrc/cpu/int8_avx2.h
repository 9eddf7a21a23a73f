/* AVX2 form of the bfloat16 int8 quantizer (ckc_int8_code_bf16_reciprocal of
 * kernels/math/int8_quant.h), for the AVX2 build of the CPU kernels.  Compilers
 * vectorize the scalar form poorly (the narrowing to int8 and the integer
 * clamp on float bits); here 32 codes take one pass of plain vector operations.
 * Each step gives the scalar step's bits:
 *  - NaN quotients become +0 (an ordered-compare mask);
 *  - the bfloat16 rounding is the same integer add-and-mask;
 *  - clamping to [-128, 127] before rounding to an integer equals the scalar
 *    cap-round-clamp, since both bounds are integers and rounding is monotone;
 *  - the rounding names its mode (nearest even) instead of relying on MXCSR. */
#ifndef CKC_CPU_INT8_AVX2_H
#define CKC_CPU_INT8_AVX2_H

#include <immintrin.h>

/* Codes of 8 bfloat16 values, already widened to float bits (x << 16). */
static inline __m256i
ckc_avx2_int8_codes_bf16(__m256 x, __m256 inv)
{
    const __m256i round_bias = _mm256_set1_epi32(0x7FFF);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i high_half = _mm256_set1_epi32((int)0xFFFF0000u);
    __m256 t = _mm256_mul_ps(x, inv);
    __m256i u;
    t = _mm256_and_ps(t, _mm256_cmp_ps(t, t, _CMP_ORD_Q));
    u = _mm256_castps_si256(t);
    u = _mm256_add_epi32(_mm256_add_epi32(u, round_bias), _mm256_and_si256(_mm256_srli_epi32(u, 16), one));
    t = _mm256_castsi256_ps(_mm256_and_si256(u, high_half));
    t = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-128.0f)), _mm256_set1_ps(127.0f));
    return _mm256_cvttps_epi32(_mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* q[i] = ckc_int8_code_bf16_reciprocal(bf16 src[i], inv) for the first n - n % 32
 * elements; returns how many it did (the caller finishes the tail). */
static inline int64_t
ckc_avx2_quantize_bf16_reciprocal(const uint16_t *src, int8_t *q, int64_t n, float inv_math_scale)
{
    const __m256 inv = _mm256_set1_ps(inv_math_scale);
    const __m256i zero = _mm256_setzero_si256();
    int64_t i;
    for (i = 0; i + 32 <= n; i += 32) {
        const __m256i r0 = _mm256_loadu_si256((const __m256i *)(src + i));
        const __m256i r1 = _mm256_loadu_si256((const __m256i *)(src + i + 16));
        /* Interleaving with zeros widens to float bits in the order
         * [0-3 | 8-11], [4-7 | 12-15], ...; the packs below undo it. */
        const __m256i a = ckc_avx2_int8_codes_bf16(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, r0)), inv);
        const __m256i b = ckc_avx2_int8_codes_bf16(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, r0)), inv);
        const __m256i c = ckc_avx2_int8_codes_bf16(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, r1)), inv);
        const __m256i d = ckc_avx2_int8_codes_bf16(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, r1)), inv);
        /* int16 [0-7 | 8-15] and [16-23 | 24-31]; int8 [0-7 16-23 | 8-15 24-31]. */
        const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
        _mm256_storeu_si256((__m256i *)(q + i), _mm256_permute4x64_epi64(bytes, 0xD8));
    }
    return i;
}

#endif /* CKC_CPU_INT8_AVX2_H */
