/* SPDX-License-Identifier: Apache-2.0 */
/* AVX2 form of the bfloat16 int8 quantizer (ckc_int8_code_bf16_reciprocal of
 * csrc/math/int8_quant.h), for the AVX2 build of the CPU kernels.  Compilers
 * vectorize the scalar form poorly (the narrowing to int8 and the integer
 * clamp on float bits); here 32 codes take one pass of plain vector operations.
 * Each step gives the scalar step's bits:
 *  - NaN quotients become +0 (an ordered-compare mask);
 *  - the bfloat16 rounding is an integer add of half an ulp and a mask, without
 *    the scalar form's ties-to-even term: a normal quotient x * fl(1/s) is never
 *    a bfloat16 tie (math/int8_quant.h: it lies more than 2^-18 relative from one),
 *    and a subnormal one gives code 0 whichever way it rounds; infinities and
 *    the largest floats round to infinity either way (three fewer
 *    operations per vector in the hottest loop);
 *  - clamping to [-128, 127] before rounding to an integer equals the scalar
 *    cap-round-clamp, since both bounds are integers and rounding is monotone;
 *  - the conversion rounds in the current mode (nearest even unless a caller
 *    changed it), as the scalar magic-number rounding does.
 *
 * Bounded rows skip the NaN mask and the clamp.  A row is bounded when its
 * scale comes from its own finite absmax A: then every |x| <= A, the divisor
 * s = round_bf16(fl(A / 127)) >= (A / 127)(1 - 2^-8)(1 - 2^-24), so
 * |x * fl(1/s)| < 127.6 and no quotient is NaN; its bfloat16 rounding is at most
 * 128, and the saturating packs below turn 128 into 127, as the clamp would. */
#ifndef CKC_CPU_INT8_AVX2_H
#define CKC_CPU_INT8_AVX2_H

#include <immintrin.h>

/* Codes of 8 values of bfloat16 precision, as int32. */
static inline __m256i
ckc_avx2_int8_codes_bf16(__m256 x, __m256 inv, int bounded)
{
    const __m256i high_half = _mm256_set1_epi32((int)0xFFFF0000u);
    __m256 t = _mm256_mul_ps(x, inv);
    if (!bounded) {
        t = _mm256_and_ps(t, _mm256_cmp_ps(t, t, _CMP_ORD_Q));
    }
    t = _mm256_castsi256_ps(
        _mm256_and_si256(_mm256_add_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x8000)), high_half));
    if (!bounded) {
        t = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-128.0f)), _mm256_set1_ps(127.0f));
    }
    return _mm256_cvtps_epi32(t);
}

/* Stores 32 codes given as int32 vectors in the split order [0-3 | 8-11],
 * [4-7 | 12-15], [16-19 | 24-27], [20-23 | 28-31] (saturating to int8). */
static inline void
ckc_avx2_store_codes32(int8_t *q, __m256i a, __m256i b, __m256i c, __m256i d)
{
    /* int16 [0-7 | 8-15] and [16-23 | 24-31]; int8 [0-7 16-23 | 8-15 24-31]. */
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
    _mm256_storeu_si256((__m256i *)q, _mm256_permute4x64_epi64(bytes, 0xD8));
}

/* q[i] = ckc_int8_code_bf16_reciprocal(bf16 src[i], inv) for the first n - n % 32
 * elements; returns how many it did (the caller finishes the tail). */
static inline int64_t
ckc_avx2_quantize_bf16(const uint16_t *src, int8_t *q, int64_t n, float inv_math_scale, int bounded)
{
    const __m256 inv = _mm256_set1_ps(inv_math_scale);
    const __m256i zero = _mm256_setzero_si256();
    int64_t i;
    for (i = 0; i + 32 <= n; i += 32) {
        /* Interleaving with zeros widens to float bits in the split order. */
        const __m256i r0 = _mm256_loadu_si256((const __m256i *)(src + i));
        const __m256i r1 = _mm256_loadu_si256((const __m256i *)(src + i + 16));
        ckc_avx2_store_codes32(q + i,
                               ckc_avx2_int8_codes_bf16(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, r0)), inv, bounded),
                               ckc_avx2_int8_codes_bf16(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, r0)), inv, bounded),
                               ckc_avx2_int8_codes_bf16(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, r1)), inv, bounded),
                               ckc_avx2_int8_codes_bf16(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, r1)), inv, bounded));
    }
    return i;
}

/* Codes of a bounded row of n values (n a multiple of 16) of bfloat16
 * precision, held as floats in the split layout of hadamard_avx2.h. */
static inline void
ckc_avx2_quantize_split(const float *v, int8_t *q, int64_t n, float inv_math_scale)
{
    const __m256 inv = _mm256_set1_ps(inv_math_scale);
    int64_t i;
    for (i = 0; i + 32 <= n; i += 32) {
        ckc_avx2_store_codes32(q + i, ckc_avx2_int8_codes_bf16(_mm256_loadu_ps(v + i), inv, 1),
                               ckc_avx2_int8_codes_bf16(_mm256_loadu_ps(v + i + 8), inv, 1),
                               ckc_avx2_int8_codes_bf16(_mm256_loadu_ps(v + i + 16), inv, 1),
                               ckc_avx2_int8_codes_bf16(_mm256_loadu_ps(v + i + 24), inv, 1));
    }
    if (i < n) {
        /* One block of 16 left: int16 [0-7 | 8-15], int8 [0-7 0-7 | 8-15 8-15]. */
        const __m256i w = _mm256_packs_epi32(ckc_avx2_int8_codes_bf16(_mm256_loadu_ps(v + i), inv, 1),
                                             ckc_avx2_int8_codes_bf16(_mm256_loadu_ps(v + i + 8), inv, 1));
        const __m256i bytes = _mm256_permute4x64_epi64(_mm256_packs_epi16(w, w), 0x08);
        _mm_storeu_si128((__m128i *)(q + i), _mm256_castsi256_si128(bytes));
    }
}

#endif /* CKC_CPU_INT8_AVX2_H */
