/* SPDX-License-Identifier: Apache-2.0 */
/* AVX2 forms of the Hadamard stages, for the AVX2 build of the CPU kernels.
 * Compilers turn the portable loops for the short strides into slow shuffles;
 * here a 16-value block lives in two registers (strides 1 and 4), and for
 * bfloat16 rows a whole group is rotated in L1 with strides 16 and 64 fused.
 * Every sum and difference is the one of ckc_h4_butterfly (a + (-b) and b + a
 * are bit-identical to a - b and a + b), so results match the portable build
 * bit for bit. */
#ifndef CKC_CPU_HADAMARD_AVX2_H
#define CKC_CPU_HADAMARD_AVX2_H

#include <immintrin.h>

#include "math/float_bits.h"

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

/* ---- whole bfloat16 groups in the split layout ----
 * The rotation for quantization holds each 16-value block as two vectors
 * [0-3 | 8-11] and [4-7 | 12-15]: the stride-1 stage below produces that order
 * for free, the stride-4 stage needs one lane swap in it (instead of two),
 * stages of stride 16 and more act on whole vectors and do not care, and the
 * int8 and bfloat16 packs (which work per 128-bit lane) put the values back in
 * order. */

/* Stride 4 on one block in the split layout, lo = [x0 | x2], hi = [x1 | x3]
 * (rows of four): with s = lo + hi = [p | q], d = lo - hi = [m | r] and d
 * swapped = [r | m], s + d' = [p + r | q + m] and s - d' = [p - r | q - m]:
 * ckc_h4_butterfly's y0..y3, in the same layout. */
static inline void
ckc_avx2_h4_rows_split(__m256 *lo, __m256 *hi)
{
    const __m256 s = _mm256_add_ps(*lo, *hi);
    const __m256 d = _mm256_sub_ps(*lo, *hi);
    const __m256 d_swap = _mm256_permute2f128_ps(d, d, 0x01);
    *lo = _mm256_add_ps(s, d_swap);
    *hi = _mm256_sub_ps(s, d_swap);
}

/* bfloat16 load, scale by 1/sqrt(G), strides 1 and 4: n values into dst, split.
 * Each 32-bit word of the input holds an even and an odd element, so a shift
 * and a mask widen them to e = [x0 x2 of quads 0 and 1 | of quads 2 and 3] and
 * o = [x1 x3 ...]; then per quad p, q = e + o and m, r = e - o, and with
 * r, m swapped in (b), e + o + b and e + o - b hold [y0 y2] and [y1 y3] of each
 * quad, which an interleave puts in order: no shuffle to widen or split. */
static inline void
ckc_avx2_load_bf16_hadamard16_split(const uint16_t *src, int64_t n, float norm, float *dst)
{
    const __m256 scale = _mm256_set1_ps(norm);
    const __m256i odd_mask = _mm256_set1_epi32((int)0xFFFF0000u);
    for (int64_t i = 0; i < n; i += 16) {
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(src + i));
        const __m256 e = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(raw, 16)), scale);
        const __m256 o = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(raw, odd_mask)), scale);
        const __m256 pq = _mm256_add_ps(e, o);                      /* p q p q */
        const __m256 mr = _mm256_sub_ps(e, o);                      /* m r m r */
        const __m256 rm = _mm256_permute_ps(mr, 0xB1);              /* r m r m */
        const __m256 even = _mm256_add_ps(pq, rm);                  /* p+r q+m (y0 y2) */
        const __m256 odd = _mm256_sub_ps(pq, rm);                   /* p-r q-m (y1 y3) */
        __m256 lo = _mm256_unpacklo_ps(even, odd);                  /* quads 0 | 2 */
        __m256 hi = _mm256_unpackhi_ps(even, odd);                  /* quads 1 | 3 */
        ckc_avx2_h4_rows_split(&lo, &hi);
        _mm256_storeu_ps(dst + i, lo);
        _mm256_storeu_ps(dst + i + 8, hi);
    }
}

/* Float bits rounded to nearest even at bfloat16 precision (low 16 bits left
 * to the caller): ckc_f32_to_bf16's add, valid for all but NaN. */
static inline __m256i
ckc_avx2_bf16_round_bits(__m256i u)
{
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    return _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb);
}

/* x rounded to a bfloat16 value, and *absmax raised to its magnitude bits
 * before rounding (NaN above infinity, as in torch's amax).  Rounding is
 * monotone, so the largest magnitude before rounding, rounded, is the largest
 * after.  A NaN x gives an arbitrary value: a row with a NaN absmax does not
 * use its values. */
static inline __m256
ckc_avx2_round_bf16_track(__m256 x, __m256i *absmax)
{
    const __m256i u = _mm256_castps_si256(x);
    *absmax = _mm256_max_epu32(*absmax, _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)));
    return _mm256_castsi256_ps(_mm256_and_si256(ckc_avx2_bf16_round_bits(u), _mm256_set1_epi32((int)0xFFFF0000u)));
}

/* The largest of n lanes of magnitude bits, rounded to a bfloat16 value: the
 * row's absmax from a vector of per-lane maxima (once per row). */
static inline float
ckc_lanes_absmax_bf16(const uint32_t *lanes, int n)
{
    uint32_t top = 0;
    for (int k = 0; k < n; k++) {
        top = lanes[k] > top ? lanes[k] : top;
    }
    return ckc_round_to_kind(ckc_f32_from_bits(top), CKC_BF16);
}

/* The absmax tracked by ckc_avx2_round_bf16_track, as the rounded float. */
static inline float
ckc_avx2_absmax_finish(__m256i absmax)
{
    uint32_t lanes[8];
    _mm256_storeu_si256((__m256i *)lanes, absmax);
    return ckc_lanes_absmax_bf16(lanes, 8);
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
 * go through both stages in registers.  With absmax given, the results are
 * also rounded to bfloat16 there (ckc_avx2_round_bf16_track). */
static inline void
ckc_avx2_h4_strides16_64(float *v, __m256i *absmax)
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
            _mm256_storeu_ps(v + j + 16 * i, absmax != NULL ? ckc_avx2_round_bf16_track(w[i], absmax) : w[i]);
        }
    }
}

/* All stages of one group of G >= 16 bfloat16 values into dst (split).  With
 * absmax given, the results are rounded to bfloat16 and tracked in it
 * (ckc_avx2_round_bf16_track). */
static inline void
ckc_avx2_rotate_group_bf16_split(const uint16_t *src, int64_t group, float norm, float *dst, __m256i *absmax)
{
    ckc_avx2_load_bf16_hadamard16_split(src, group, norm, dst);
    if (group == 256) {
        /* The common case: the rounding rides on the last stage. */
        ckc_avx2_h4_strides16_64(dst, absmax);
        return;
    }
    if (group > 256) {
        for (int64_t b = 0; b < group; b += 256) {
            ckc_avx2_h4_strides16_64(dst + b, NULL);
        }
    }
    for (int64_t s = group > 256 ? 256 : 16; s < group; s *= 4) {
        for (int64_t i = 0; i < group; i += 4 * s) {
            for (int64_t j = 0; j < s; j += 8) {
                __m256 x0 = _mm256_loadu_ps(dst + i + j);
                __m256 x1 = _mm256_loadu_ps(dst + i + j + s);
                __m256 x2 = _mm256_loadu_ps(dst + i + j + 2 * s);
                __m256 x3 = _mm256_loadu_ps(dst + i + j + 3 * s);
                ckc_avx2_h4(&x0, &x1, &x2, &x3);
                _mm256_storeu_ps(dst + i + j, x0);
                _mm256_storeu_ps(dst + i + j + s, x1);
                _mm256_storeu_ps(dst + i + j + 2 * s, x2);
                _mm256_storeu_ps(dst + i + j + 3 * s, x3);
            }
        }
    }
    if (absmax != NULL) {
        for (int64_t i = 0; i < group; i += 8) {
            _mm256_storeu_ps(dst + i, ckc_avx2_round_bf16_track(_mm256_loadu_ps(dst + i), absmax));
        }
    }
}

/* bfloat16 bits of n floats held split, in order, as ckc_f32_to_bf16 (every
 * NaN the canonical 0x7FC0). */
static inline void
ckc_avx2_store_bf16_split(const float *v, int64_t n, uint16_t *dst)
{
    const __m256i quiet_nan = _mm256_set1_epi32(0x7FC0);
    for (int64_t i = 0; i < n; i += 16) {
        __m256i h[2];
        for (int k = 0; k < 2; k++) {
            const __m256 x = _mm256_loadu_ps(v + i + 8 * k);
            const __m256i r = _mm256_srli_epi32(ckc_avx2_bf16_round_bits(_mm256_castps_si256(x)), 16);
            h[k] = _mm256_blendv_epi8(r, quiet_nan, _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
        }
        /* Per 128-bit lane: [0-3 | 8-11] with [4-7 | 12-15] gives 0-7 | 8-15. */
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_packus_epi32(h[0], h[1]));
    }
}

#endif /* CKC_CPU_HADAMARD_AVX2_H */
