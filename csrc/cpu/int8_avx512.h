/* SPDX-License-Identifier: Apache-2.0 */
/* AVX-512 form of the bfloat16 int8 quantizer, for the AVX-512 build of the CPU
 * kernels: the steps and their exactness argument are int8_avx2.h's, on 16
 * lanes, and the narrowing to int8 is one saturating down-convert (which turns
 * a bounded row's 128 into 127, as the AVX2 packs do). */
#ifndef CKC_CPU_INT8_AVX512_H
#define CKC_CPU_INT8_AVX512_H

#include <immintrin.h>

/* Codes of 16 values of bfloat16 precision, saturated to int8. */
static inline __m128i
ckc_avx512_int8_codes_bf16(__m512 x, __m512 inv, int bounded)
{
    __m512 t = _mm512_mul_ps(x, inv);
    if (!bounded) {
        t = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(t, t, _CMP_ORD_Q), t);
    }
    t = _mm512_castsi512_ps(_mm512_and_si512(_mm512_add_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(0x8000)),
                                             _mm512_set1_epi32((int)0xFFFF0000u)));
    if (!bounded) {
        t = _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(-128.0f)), _mm512_set1_ps(127.0f));
    }
    return _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(t));
}

/* q[i] = ckc_int8_code_bf16_reciprocal(bf16 src[i], inv) for the first n - n % 16
 * elements; returns how many it did (the caller finishes the tail). */
static inline int64_t
ckc_avx512_quantize_bf16(const uint16_t *src, int8_t *q, int64_t n, float inv_math_scale, int bounded)
{
    const __m512 inv = _mm512_set1_ps(inv_math_scale);
    int64_t i;
    for (i = 0; i + 16 <= n; i += 16) {
        const __m512i bits = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i))), 16);
        _mm_storeu_si128((__m128i *)(q + i), ckc_avx512_int8_codes_bf16(_mm512_castsi512_ps(bits), inv, bounded));
    }
    return i;
}

/* Codes of a bounded row of n values (n a multiple of 16) of bfloat16
 * precision, held as floats in order. */
static inline void
ckc_avx512_quantize_rounded(const float *v, int8_t *q, int64_t n, float inv_math_scale)
{
    const __m512 inv = _mm512_set1_ps(inv_math_scale);
    for (int64_t i = 0; i < n; i += 16) {
        _mm_storeu_si128((__m128i *)(q + i), ckc_avx512_int8_codes_bf16(_mm512_loadu_ps(v + i), inv, 1));
    }
}

#endif /* CKC_CPU_INT8_AVX512_H */
