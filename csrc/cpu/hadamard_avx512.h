/* SPDX-License-Identifier: Apache-2.0 */
/* AVX-512 form of the fused rotation of bfloat16 rows, for the AVX-512 build of
 * the CPU kernels.  A 16-value block (ckc_hadamard_rows' strides 1 and 4) fills
 * one 16-lane register, so a whole 256-group is 16 registers: every stage of
 * it, and the rounding to bfloat16, happen in registers.  The int8 quantizer
 * then stores the group to L1 for its second pass (which needs the row's
 * scale); the plain rotation stores bfloat16 straight from the registers.
 * Every sum and difference is the one of ckc_h4_butterfly, so results match
 * the portable build bit for bit. */
#ifndef CKC_CPU_HADAMARD_AVX512_H
#define CKC_CPU_HADAMARD_AVX512_H

#include <immintrin.h>

#include "hadamard_avx2.h" /* every AVX-512 CPU has AVX2: its helpers apply */
#include "math/float_bits.h"
#include "math/hadamard.h"

/* Full unrolling of a loop over a register array: the array stays in registers
 * only when every index is a constant (otherwise GCC keeps it on the stack). */
#if defined(__clang__)
#define CKC_CPU_UNROLL _Pragma("clang loop unroll(full)")
#elif defined(__GNUC__)
#define CKC_CPU_UNROLL _Pragma("GCC unroll 16")
#else
#define CKC_CPU_UNROLL
#endif

/* Strides 1 and 4 of two 16-value blocks of bfloat16 (the second all zero when
 * `two` is 0, which then reads only 16 values), scaled by the group's
 * 1/sqrt(G) first: block 0 into *b0 and block 1 into *b1, in order.
 * Each 32-bit word of the input holds an even and an odd element: a shift and
 * a mask widen them to floats e and o, and per quad p, q = e + o and m, r = e - o;
 * with r, m swapped in, sum and difference hold [y0 y2] and [y1 y3] of each quad,
 * and an interleave gives the quads 0 2 4 6 | 1 3 5 7 in order.  Stride 4 then
 * combines 128-bit lanes (rows of four: block 0 is lanes 0-1 of both), and a
 * two-source permute puts each block's four rows back together. */
static inline void
ckc_avx512_load_bf16_h16x2(const uint16_t *src, int two, __m512 norm, __m512 *b0, __m512 *b1)
{
    const __m512i block0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const __m512i block1 = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    const __m512i raw = two ? _mm512_loadu_si512((const void *)src) : _mm512_maskz_loadu_epi16(0xFFFF, src);
    const __m512 e = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(raw, 16)), norm);
    const __m512 o =
        _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(raw, _mm512_set1_epi32((int)0xFFFF0000u))), norm);
    const __m512 pq = _mm512_add_ps(e, o);                    /* p q per quad */
    const __m512 mr = _mm512_sub_ps(e, o);                    /* m r */
    const __m512 rm = _mm512_permute_ps(mr, 0xB1);            /* r m */
    const __m512 even = _mm512_add_ps(pq, rm);                /* p+r q+m: y0 y2 */
    const __m512 odd = _mm512_sub_ps(pq, rm);                 /* p-r q-m: y1 y3 */
    const __m512 lo = _mm512_unpacklo_ps(even, odd);          /* quads 0 | 2 | 4 | 6 */
    const __m512 hi = _mm512_unpackhi_ps(even, odd);          /* quads 1 | 3 | 5 | 7 */
    const __m512 s = _mm512_add_ps(lo, hi);                   /* p | q | p' | q' */
    const __m512 d = _mm512_sub_ps(lo, hi);                   /* m | r | m' | r' */
    const __m512 d_swap = _mm512_shuffle_f32x4(d, d, 0xB1);   /* r | m | r' | m' */
    const __m512 rows02 = _mm512_add_ps(s, d_swap);           /* y0 | y2 | y0' | y2' */
    const __m512 rows13 = _mm512_sub_ps(s, d_swap);           /* y1 | y3 | y1' | y3' */
    *b0 = _mm512_permutex2var_ps(rows02, block0, rows13);
    *b1 = _mm512_permutex2var_ps(rows02, block1, rows13);
}

/* y = H4 (x0..x3) on 16 lanes at once: ckc_h4_butterfly's sums in its order. */
static inline void
ckc_avx512_h4(__m512 *x0, __m512 *x1, __m512 *x2, __m512 *x3)
{
    const __m512 p = _mm512_add_ps(*x0, *x1);
    const __m512 m = _mm512_sub_ps(*x0, *x1);
    const __m512 q = _mm512_add_ps(*x2, *x3);
    const __m512 r = _mm512_sub_ps(*x2, *x3);
    *x0 = _mm512_add_ps(p, r);
    *x1 = _mm512_sub_ps(p, r);
    *x2 = _mm512_add_ps(m, q);
    *x3 = _mm512_sub_ps(q, m);
}

/* Float bits rounded to nearest even at bfloat16 precision, low 16 bits left
 * to the caller: ckc_f32_to_bf16's add, valid for all but NaN. */
static inline __m512i
ckc_avx512_bf16_round_bits(__m512i u)
{
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    return _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb);
}

/* x rounded to a bfloat16 value, and *absmax raised to its magnitude bits
 * before rounding (NaN above infinity, as in torch's amax).  Rounding is
 * monotone, so the largest magnitude before rounding, rounded, is the largest
 * after.  A NaN x gives an arbitrary value: a row with a NaN absmax does not
 * use its values. */
static inline __m512
ckc_avx512_round_bf16_track(__m512 x, __m512i *absmax)
{
    const __m512i u = _mm512_castps_si512(x);
    *absmax = _mm512_max_epu32(*absmax, _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)));
    return _mm512_castsi512_ps(
        _mm512_and_si512(ckc_avx512_bf16_round_bits(u), _mm512_set1_epi32((int)0xFFFF0000u)));
}

/* bfloat16 bits of 16 floats, as ckc_f32_to_bf16 (every NaN the canonical 0x7FC0). */
static inline __m256i
ckc_avx512_to_bf16(__m512 x)
{
    const __m512i bits = _mm512_srli_epi32(ckc_avx512_bf16_round_bits(_mm512_castps_si512(x)), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(bits, nan, _mm512_set1_epi32(0x7FC0)));
}

/* The absmax tracked by ckc_avx512_round_bf16_track, as the rounded float. */
static inline float
ckc_avx512_absmax_finish(__m512i absmax)
{
    uint32_t lanes[16];
    _mm512_storeu_si512((void *)lanes, absmax);
    return ckc_lanes_absmax_bf16(lanes, 16);
}

/* What a rotated row becomes: floats rounded to bfloat16 with their absmax
 * tracked (for the int8 quantizer's second pass), or bfloat16 (the rotation
 * alone). */
typedef enum { CKC_ROTATED_ROUNDED_F32, CKC_ROTATED_BF16 } ckc_rotated_out;

/* Stores `blocks` rotated blocks at element `at` of dst, in the form `out`. */
CKC_HD void
ckc_avx512_store_blocks(const __m512 *w, int blocks, ckc_rotated_out out, void *dst, int64_t at, __m512i *absmax)
{
    CKC_CPU_UNROLL
    for (int i = 0; i < blocks; i++) {
        if (out == CKC_ROTATED_BF16) {
            _mm256_storeu_si256((__m256i *)((uint16_t *)dst + at + 16 * i), ckc_avx512_to_bf16(w[i]));
        } else {
            _mm512_storeu_ps((float *)dst + at + 16 * i, ckc_avx512_round_bf16_track(w[i], absmax));
        }
    }
}

/* Rotates one piece of n bfloat16 values (n = 16, 32, 64 or 256, a whole number
 * of groups, or a quarter of a 1024-group) by every stage of stride below
 * min(group, 256), in registers: block b into w[b].  Always inlined into callers
 * that pass constant n and group, so that the loops unroll and w stays in
 * registers. */
CKC_HD void
ckc_avx512_rotate_piece_bf16(const uint16_t *src, int n, int64_t group, __m512 norm, __m512 *w)
{
    const int blocks = n / 16;
    int i;
    CKC_CPU_UNROLL
    for (i = 0; i < n; i += 32) {
        ckc_avx512_load_bf16_h16x2(src + i, n - i >= 32, norm, &w[i / 16], &w[i / 16 + 1]);
    }
    if (group >= 64) {
        CKC_CPU_UNROLL
        for (i = 0; i < blocks; i += 4) {
            ckc_avx512_h4(&w[i], &w[i + 1], &w[i + 2], &w[i + 3]);
        }
    }
    if (group >= 256) {
        CKC_CPU_UNROLL
        for (i = 0; i < 4; i++) {
            ckc_avx512_h4(&w[i], &w[i + 4], &w[i + 8], &w[i + 12]);
        }
    }
}

/* A piece of n values at element g, rotated and stored in the form `out`. */
CKC_HD void
ckc_avx512_rotate_store_piece(const uint16_t *src, int64_t g, int n, int64_t group, __m512 norm, ckc_rotated_out out,
                              void *dst, __m512i *absmax)
{
    __m512 w[16];
    ckc_avx512_rotate_piece_bf16(src + g, n, group, norm, w);
    ckc_avx512_store_blocks(w, n / 16, out, dst, g, absmax);
}

/* A bfloat16 row of k values (a multiple of group >= 16) rotated in groups
 * into dst in the form `out` (with the absmax in *absmax for rounded floats).
 * work: 1024 floats apart from dst, for 1024-groups. */
static inline void
ckc_avx512_rotate_row_bf16(const uint16_t *src, int64_t k, int64_t group, ckc_rotated_out out, void *dst,
                           float *work, __m512i *absmax)
{
    const __m512 norm = _mm512_set1_ps(ckc_hadamard_norm(ckc_hadamard_log4(group)));
    int64_t g;
    switch (group) {
    case 16:
        /* Two groups per piece; a row of an odd number of groups ends with one. */
        for (g = 0; g + 32 <= k; g += 32) {
            ckc_avx512_rotate_store_piece(src, g, 32, 16, norm, out, dst, absmax);
        }
        if (g < k) {
            ckc_avx512_rotate_store_piece(src, g, 16, 16, norm, out, dst, absmax);
        }
        break;
    case 64:
        for (g = 0; g < k; g += 64) {
            ckc_avx512_rotate_store_piece(src, g, 64, 64, norm, out, dst, absmax);
        }
        break;
    case 256:
        for (g = 0; g < k; g += 256) {
            ckc_avx512_rotate_store_piece(src, g, 256, 256, norm, out, dst, absmax);
        }
        break;
    default: /* 1024: four 256-pieces into work, then stride 256 from there */
        for (g = 0; g < k; g += 1024) {
            int64_t j;
            for (j = 0; j < 1024; j += 256) {
                __m512 w[16];
                ckc_avx512_rotate_piece_bf16(src + g + j, 256, 1024, norm, w);
                CKC_CPU_UNROLL
                for (int i = 0; i < 16; i++) {
                    _mm512_storeu_ps(work + j + 16 * i, w[i]);
                }
            }
            for (j = 0; j < 256; j += 16) {
                __m512 x[4];
                int i;
                for (i = 0; i < 4; i++) {
                    x[i] = _mm512_loadu_ps(work + j + 256 * i);
                }
                ckc_avx512_h4(&x[0], &x[1], &x[2], &x[3]);
                for (i = 0; i < 4; i++) {
                    ckc_avx512_store_blocks(&x[i], 1, out, dst, g + j + 256 * i, absmax);
                }
            }
        }
        break;
    }
}

#endif /* CKC_CPU_HADAMARD_AVX512_H */
