/* SPDX-License-Identifier: Apache-2.0 */
/* Single-element access by element type for the GPU kernels. */
#ifndef CKC_ELEMENTS_CUH
#define CKC_ELEMENTS_CUH

#include <type_traits>

#include "cuda_dialect.h"
#include "math/float_bits.h"

/* The value of a 16-bit element. */
__device__ __forceinline__ float
ckc_half_value(ckc_float_kind kind, uint16_t h)
{
    return kind == CKC_BF16 ? ckc_bf16_to_f32(h) : ckc_f16_to_f32(h);
}

template <ckc_float_kind KIND>
__device__ __forceinline__ float
ckc_load_value(const void *x, int64_t i)
{
    if (KIND == CKC_F32) {
        return ((const float *)x)[i];
    }
    return ckc_half_value(KIND, ((const uint16_t *)x)[i]);
}

/* The bits of v rounded (to nearest even) to a 16-bit element type. */
__device__ __forceinline__ uint16_t
ckc_half_bits(ckc_float_kind kind, float v)
{
    return kind == CKC_BF16 ? ckc_f32_to_bf16(v) : ckc_f32_to_f16(v);
}

/* Stores v rounded to the element type (round to nearest even). */
__device__ __forceinline__ void
ckc_store_value(void *out, ckc_float_kind kind, int64_t i, float v)
{
    if (kind == CKC_F32) {
        ((float *)out)[i] = v;
    } else {
        ((uint16_t *)out)[i] = ckc_half_bits(kind, v);
    }
}

/* The low bytes of a, b, c, d as one word (a in the lowest byte): four int8
 * codes packed for a 32-bit store or a dp4a. */
__device__ __forceinline__ uint32_t
ckc_low_bytes4(uint32_t a, uint32_t b, uint32_t c, uint32_t d)
{
#if defined(__CUDA_ARCH__)
    return __byte_perm(__byte_perm(a, b, 0x0040), __byte_perm(c, d, 0x0040), 0x5410);
#else
    return (a & 0xFFu) | (b & 0xFFu) << 8 | (c & 0xFFu) << 16 | (d & 0xFFu) << 24;
#endif
}

#endif /* CKC_ELEMENTS_CUH */
