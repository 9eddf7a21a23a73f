/* SPDX-License-Identifier: Apache-2.0 */
/* The int8 GEMM's micro-kernel for AVX2 (included by linear_impl.h in the AVX2
 * build): 16 k at a time, each row's bytes sign-extended to 16 bits once
 * (vpmovsxbw) and multiplied pairwise into 32-bit sums (vpmaddwd), so each
 * loaded row feeds GEMM_NR (or GEMM_MR) multiply-adds.  Sums of int8 products
 * in int32 are exact, in any order. */
#ifndef CKC_CPU_GEMM_AVX2_H
#define CKC_CPU_GEMM_AVX2_H

#include <immintrin.h>

static inline __m256i
gemm_load16(const int8_t *p)
{
    return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p));
}

static inline int32_t
gemm_hsum(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* The 16-value blocks of a 2 x 4 micro-tile: the k values [0, kb16) of each dot product. */
static inline void
gemm_micro_avx2(const int8_t *a0, const int8_t *a1, const int8_t *const b[4], int64_t kb16, int32_t s[8])
{
    __m256i acc[8];
    for (int i = 0; i < 8; i++) {
        acc[i] = _mm256_setzero_si256();
    }
    for (int64_t t = 0; t < kb16; t += 16) {
        const __m256i x0 = gemm_load16(a0 + t);
        const __m256i x1 = gemm_load16(a1 + t);
        for (int j = 0; j < 4; j++) {
            const __m256i y = gemm_load16(b[j] + t);
            acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(x0, y));
            acc[4 + j] = _mm256_add_epi32(acc[4 + j], _mm256_madd_epi16(x1, y));
        }
    }
    for (int i = 0; i < 8; i++) {
        s[i] = gemm_hsum(acc[i]);
    }
}

#endif /* CKC_CPU_GEMM_AVX2_H */
