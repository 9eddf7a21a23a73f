/* Conversions of whole rows between an element type and float32, one tight
 * loop per type so compilers vectorize them.  Shared by the CPU kernels. */
#ifndef CKC_CPU_ROWS_H
#define CKC_CPU_ROWS_H

#include <string.h>

#include "math/float_bits.h"

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

/* Rounds every value to the element type in place (eager's x.dtype results). */
static inline void
ckc_row_round(float *v, ckc_float_kind kind, int64_t n)
{
    int64_t i;
    if (kind == CKC_BF16) {
        for (i = 0; i < n; i++) {
            v[i] = ckc_bf16_to_f32(ckc_f32_to_bf16(v[i]));
        }
    } else if (kind == CKC_F16) {
        for (i = 0; i < n; i++) {
            v[i] = ckc_f16_to_f32(ckc_f32_to_f16(v[i]));
        }
    }
}

/* Largest magnitude of a row; NaN wins (as torch's amax).  Compares magnitude
 * bits as integers: for IEEE floats they order like the values, every NaN sits
 * above infinity, and an integer max reduction vectorizes. */
static inline float
ckc_row_absmax(const float *v, int64_t n)
{
    uint32_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint32_t b = ckc_f32_bits(v[i]) & 0x7FFFFFFFu;
        m = b > m ? b : m;
    }
    return ckc_f32_from_bits(m);
}

/* Rotates each group of a row in place: scale by 1/sqrt(group), butterflies. */
void ckc_row_hadamard(float *v, int64_t n, int64_t group);

static inline int64_t
ckc_kind_size(ckc_float_kind kind)
{
    return kind == CKC_F32 ? 4 : 2;
}

#endif /* CKC_CPU_ROWS_H */
