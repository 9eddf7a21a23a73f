/* SPDX-License-Identifier: Apache-2.0 */
/* Conversions of whole rows between an element type and float32, one tight
 * loop per type so compilers vectorize them.  Shared by the CPU kernels. */
#ifndef CKC_CPU_ROWS_H
#define CKC_CPU_ROWS_H

#include <string.h>

#include "math/float_bits.h"
#include "math/hadamard.h"

static inline void
ckc_row_load(const void *src, ckc_float_kind kind, int64_t n, float *dst)
{
    int64_t i;
    if (kind == CKC_BF16) {
        const uint16_t *s = (const uint16_t *)src;
        for (i = 0; i < n; i++) {
            dst[i] = ckc_bf16_to_f32(s[i]);
        }
    } else if (kind == CKC_F16) {
        const uint16_t *s = (const uint16_t *)src;
        for (i = 0; i < n; i++) {
            dst[i] = ckc_f16_to_f32(s[i]);
        }
    } else {
        memcpy(dst, src, (size_t)n * sizeof(float));
    }
}

static inline void
ckc_row_store(const float *src, ckc_float_kind kind, int64_t n, void *dst)
{
    int64_t i;
    if (kind == CKC_BF16) {
        uint16_t *d = (uint16_t *)dst;
        for (i = 0; i < n; i++) {
            d[i] = ckc_f32_to_bf16(src[i]);
        }
    } else if (kind == CKC_F16) {
        uint16_t *d = (uint16_t *)dst;
        for (i = 0; i < n; i++) {
            d[i] = ckc_f32_to_f16(src[i]);
        }
    } else {
        memcpy(dst, src, (size_t)n * sizeof(float));
    }
}

/* x * scale for each element, as float (a load fused with ConvRot's 1/sqrt(G)). */
static inline void
ckc_row_load_scaled(const void *src, ckc_float_kind kind, int64_t n, float scale, float *dst)
{
    int64_t i;
    if (kind == CKC_BF16) {
        const uint16_t *s = (const uint16_t *)src;
        for (i = 0; i < n; i++) {
            dst[i] = ckc_bf16_to_f32(s[i]) * scale;
        }
    } else if (kind == CKC_F16) {
        const uint16_t *s = (const uint16_t *)src;
        for (i = 0; i < n; i++) {
            dst[i] = ckc_f16_to_f32(s[i]) * scale;
        }
    } else {
        const float *s = (const float *)src;
        for (i = 0; i < n; i++) {
            dst[i] = s[i] * scale;
        }
    }
}

/* Largest magnitude of n elements of the element type, read in place.  For
 * IEEE formats the magnitude bits order like the values and every NaN sits
 * above infinity, so an integer max (which vectorizes) finds it; NaN wins, as
 * in torch's amax. */
static inline float
ckc_src_absmax(const void *src, ckc_float_kind kind, int64_t n)
{
    int64_t i;
    if (kind == CKC_F32) {
        const uint32_t *s = (const uint32_t *)src;
        uint32_t m = 0;
        for (i = 0; i < n; i++) {
            const uint32_t b = s[i] & 0x7FFFFFFFu;
            m = b > m ? b : m;
        }
        return ckc_f32_from_bits(m);
    } else {
        const uint16_t *s = (const uint16_t *)src;
        uint16_t m = 0;
        for (i = 0; i < n; i++) {
            const uint16_t b = (uint16_t)(s[i] & 0x7FFFu);
            m = b > m ? b : m;
        }
        return kind == CKC_BF16 ? ckc_bf16_to_f32(m) : ckc_f16_to_f32(m);
    }
}

/* Largest magnitude of a float row (see ckc_src_absmax). */
static inline float
ckc_row_absmax(const float *v, int64_t n)
{
    return ckc_src_absmax(v, CKC_F32, n);
}

/* One stage of stride s on one block of 4s values: four disjoint streams, which
 * `restrict` tells the compiler, so the loop vectorizes without alias checks. */
static inline void
ckc_row_stage_block(float *restrict a, float *restrict b, float *restrict c, float *restrict d, int64_t s)
{
    for (int64_t j = 0; j < s; j++) {
        ckc_h4_butterfly(&a[j], &b[j], &c[j], &d[j]);
    }
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define CKC_CPU_AVX512 1
#include "hadamard_avx512.h"
#endif
#if defined(__AVX2__)
#include "hadamard_avx2.h"
#else
/* Strides 1 and 4 over a row of whole 16-value blocks, in place (fixed-length
 * inner loops the compiler unrolls into short vectors). */
static inline void
ckc_row_hadamard16(float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16) {
        for (int j = 0; j < 16; j += 4) {
            ckc_h4_butterfly(&v[i + j], &v[i + j + 1], &v[i + j + 2], &v[i + j + 3]);
        }
        for (int j = 0; j < 4; j++) {
            ckc_h4_butterfly(&v[i + j], &v[i + 4 + j], &v[i + 8 + j], &v[i + 12 + j]);
        }
    }
}
#endif

/* The stages of stride 16 and more (those that cross 16-value blocks). */
static inline void
ckc_row_hadamard_wide(float *v, int64_t n, int64_t group)
{
    for (int64_t s = 16; s < group; s *= 4) {
        for (int64_t i = 0; i < n; i += 4 * s) {
            ckc_row_stage_block(v + i, v + i + s, v + i + 2 * s, v + i + 3 * s, s);
        }
    }
}

/* Rotates each group of a row in place, the CPU form of csrc/math/hadamard.h,
 * on values already scaled by ckc_hadamard_norm.  Each stage sweeps the whole
 * row (groups are contiguous and 4*stride divides the group): strides 1 and 4
 * inside 16-value blocks, longer strides as long loops. */
static inline void
ckc_row_hadamard(float *v, int64_t n, int64_t group)
{
    if (group >= 16) {
        ckc_row_hadamard16(v, n);
    } else {
        for (int64_t i = 0; i < n; i += 4) {
            ckc_h4_butterfly(&v[i], &v[i + 1], &v[i + 2], &v[i + 3]);
        }
    }
    ckc_row_hadamard_wide(v, n, group);
}

/* dst = the row of src rotated group-wise (load, 1/sqrt(G), all stages); the
 * first stages are fused into the load where this build has a kernel for it. */
static inline void
ckc_row_load_rotated(const void *src, ckc_float_kind kind, int64_t n, int64_t group, float *dst)
{
    const float norm = ckc_hadamard_norm(ckc_hadamard_log4(group));
#if defined(__AVX2__)
    if (kind == CKC_BF16 && group >= 16) {
        ckc_row_load_bf16_hadamard16((const uint16_t *)src, n, norm, dst);
        ckc_row_hadamard_wide(dst, n, group);
        return;
    }
#endif
    ckc_row_load_scaled(src, kind, n, norm, dst);
    ckc_row_hadamard(dst, n, group);
}

#if defined(__AVX2__)
/* bfloat16 rotation group by group in a G-float buffer that stays in L1 (see
 * ckc_avx2_rotate_group_bf16_split).  Each value sees the stages in the order
 * of ckc_row_hadamard, so the bits are the same. */
static inline void
ckc_row_rotate_bf16_avx2(const uint16_t *src, int64_t n, int64_t group, float *work, uint16_t *dst)
{
    const float norm = ckc_hadamard_norm(ckc_hadamard_log4(group));
    for (int64_t g = 0; g < n; g += group) {
        ckc_avx2_rotate_group_bf16_split(src + g, group, norm, work, NULL);
        ckc_avx2_store_bf16_split(work, group, dst + g);
    }
}
#endif

/* dst = the row of src rotated group-wise and rounded to the element type,
 * stored in that type: the values eager's rotation leaves, before any scale.
 * work: scratch of n floats. */
static inline void
ckc_row_rotate_to_kind(const void *src, ckc_float_kind kind, int64_t n, int64_t group, float *work, void *dst)
{
#if defined(CKC_CPU_AVX512)
    if (kind == CKC_BF16 && group >= 16) {
        ckc_avx512_rotate_row_bf16((const uint16_t *)src, n, group, CKC_ROTATED_BF16, dst, work, NULL);
        return;
    }
#elif defined(__AVX2__)
    if (kind == CKC_BF16 && group >= 16) {
        ckc_row_rotate_bf16_avx2((const uint16_t *)src, n, group, work, (uint16_t *)dst);
        return;
    }
#endif
    ckc_row_load_rotated(src, kind, n, group, work);
    ckc_row_store(work, kind, n, dst);
}

/* Rounds a row to the element type in place and returns the largest rounded
 * magnitude (NaN wins): eager's two steps before a rotated row's scale, in one
 * pass.  The instances with a constant type each vectorize. */
static inline float
ckc_row_round_absmax_as(float *v, int64_t n, ckc_float_kind kind)
{
    uint32_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        const float r = ckc_round_to_kind(v[i], kind);
        const uint32_t b = ckc_f32_bits(r) & 0x7FFFFFFFu;
        v[i] = r;
        m = b > m ? b : m;
    }
    return ckc_f32_from_bits(m);
}

static inline float
ckc_row_round_absmax(float *v, ckc_float_kind kind, int64_t n)
{
    switch (kind) {
    case CKC_BF16:
        return ckc_row_round_absmax_as(v, n, CKC_BF16);
    case CKC_F16:
        return ckc_row_round_absmax_as(v, n, CKC_F16);
    default:
        return ckc_row_round_absmax_as(v, n, CKC_F32);
    }
}

#endif /* CKC_CPU_ROWS_H */
