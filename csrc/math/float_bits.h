/* SPDX-License-Identifier: Apache-2.0 */
/* Bit-exact conversions between float32 and the narrow formats the ops read and
 * write: bfloat16, float16, float8 e4m3fn and e5m2, and fp4 e2m1.  Each encoder rounds to
 * nearest even exactly as PyTorch's CPU conversions (c10) and comfy_kitchen's
 * eager encoders do, so C and CUDA kernels produce the same bits as eager.
 * Everything is branch-light integer/float arithmetic so loops vectorize. */
#ifndef CKC_FLOAT_BITS_H
#define CKC_FLOAT_BITS_H

#include <string.h>
#include "ckc_inline.h"

/* Element types the kernels handle; the values match comfy_kitchen's dtype codes
 * (0 float32, 1 float16, 2 bfloat16). */
typedef enum {
    CKC_F32 = 0,
    CKC_F16 = 1,
    CKC_BF16 = 2
} ckc_float_kind;

CKC_HD uint32_t
ckc_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

CKC_HD float
ckc_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- bfloat16 ---- */

CKC_HD float
ckc_bf16_to_f32(uint16_t h)
{
    return ckc_f32_from_bits((uint32_t)h << 16);
}

/* Round to nearest even; every NaN becomes the canonical quiet NaN 0x7FC0. */
CKC_HD uint16_t
ckc_f32_to_bf16(float f)
{
    uint32_t u = ckc_f32_bits(f);
    uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)(f != f ? 0x7FC0u : rounded);
}

/* ---- float16 (IEEE binary16, with subnormals) ---- */

CKC_HD float
ckc_f16_to_f32(uint16_t h)
{
    const uint32_t w = (uint32_t)h << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    /* Normal: re-bias the exponent by shifting into a float and scaling by
     * 2^-112; subnormal: place the mantissa under a 0.5 exponent and subtract. */
    const float normal = ckc_f32_from_bits((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    const float subnormal = ckc_f32_from_bits((two_w >> 17) | (126u << 23)) - 0.5f;
    const uint32_t mag = two_w < (1u << 27) ? ckc_f32_bits(subnormal) : ckc_f32_bits(normal);
    return ckc_f32_from_bits(sign | mag);
}

/* Round to nearest even with overflow to infinity; NaN becomes 0x7E00. */
CKC_HD uint16_t
ckc_f32_to_f16(float f)
{
    const uint32_t w = ckc_f32_bits(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    /* Scaling up then down by powers of two lets the FPU do the rounding at
     * the binary16 mantissa width, including for results that are subnormal. */
    float base = ((f < 0.0f ? -f : f) * 0x1.0p+112f) * 0x1.0p-110f;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) {
        bias = 0x71000000u;
    }
    base = ckc_f32_from_bits((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = ckc_f32_bits(base);
    const uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
    return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

/* Value of a float after a round trip through the element type: the rounding
 * that eager's arithmetic in x.dtype applies to every intermediate result. */
CKC_HD float
ckc_round_to_kind(float f, ckc_float_kind kind)
{
    if (kind == CKC_BF16) {
        return ckc_bf16_to_f32(ckc_f32_to_bf16(f));
    }
    if (kind == CKC_F16) {
        return ckc_f16_to_f32(ckc_f32_to_f16(f));
    }
    return f;
}

/* ckc_round_to_kind for a value known not to be NaN: bfloat16 skips the NaN
 * test (infinities round to themselves). */
CKC_HD float
ckc_round_to_kind_not_nan(float f, ckc_float_kind kind)
{
    if (kind == CKC_BF16) {
        const uint32_t u = ckc_f32_bits(f);
        return ckc_f32_from_bits((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);
    }
    return ckc_round_to_kind(f, kind);
}

/* Element i of an array of the element type, as float32 (exact). */
CKC_HD float
ckc_kind_value(const void *p, ckc_float_kind kind, int64_t i)
{
    if (kind == CKC_F32) {
        return ((const float *)p)[i];
    }
    return kind == CKC_BF16 ? ckc_bf16_to_f32(((const uint16_t *)p)[i]) : ckc_f16_to_f32(((const uint16_t *)p)[i]);
}

/* v rounded to the element type into element i of an array of it (the store of
 * ckc_kind_value's read). */
CKC_HD void
ckc_kind_store(void *p, ckc_float_kind kind, int64_t i, float v)
{
    if (kind == CKC_F32) {
        ((float *)p)[i] = v;
    } else {
        ((uint16_t *)p)[i] = kind == CKC_BF16 ? ckc_f32_to_bf16(v) : ckc_f32_to_f16(v);
    }
}

/* Bytes of one element of the type. */
CKC_HD int64_t
ckc_kind_size(ckc_float_kind kind)
{
    return kind == CKC_F32 ? 4 : 2;
}

/* Smallest positive normal value of the element type (torch.finfo(dtype).tiny). */
CKC_HD float
ckc_kind_tiny(ckc_float_kind kind)
{
    return kind == CKC_F16 ? 0x1.0p-14f : 0x1.0p-126f;
}

/* ---- float8 e4m3fn (max 448, subnormals down to 2^-9, one NaN per sign) ---- */

/* Round to nearest even.  Magnitudes of 480 and above (the first value that
 * rounds past 448), infinities and NaN encode as NaN (0x7F | sign), as in c10. */
CKC_HD uint8_t
ckc_f32_to_e4m3(float f)
{
    uint32_t bits = ckc_f32_bits(f);
    const uint32_t sign = bits & 0x80000000u;
    uint32_t code;
    bits ^= sign;
    if (bits >= (1087u << 20)) {
        code = 0x7Fu;
    } else if (bits < (121u << 23)) {
        /* Below 2^-6 the result is subnormal: adding 2^14 leaves the rounded
         * 2^-9 multiples in the low mantissa bits. */
        const uint32_t denorm_magic = 141u << 23;
        code = ckc_f32_bits(ckc_f32_from_bits(bits) + ckc_f32_from_bits(denorm_magic)) - denorm_magic;
    } else {
        const uint32_t mant_odd = (bits >> 20) & 1u;
        bits += ((uint32_t)(7 - 127) << 23) + 0x7FFFFu + mant_odd;
        code = bits >> 20;
    }
    return (uint8_t)((code & 0xFFu) | (sign >> 24));
}

CKC_HD float
ckc_e4m3_to_f32(uint8_t code)
{
    const uint32_t sign = (uint32_t)(code & 0x80u) << 24;
    const uint32_t exp = (code >> 3) & 0xFu;
    const uint32_t mant = code & 0x7u;
    float mag;
    if ((code & 0x7Fu) == 0x7Fu) {
        return ckc_f32_from_bits(sign | 0x7FC00000u);
    }
    if (exp == 0) {
        mag = (float)mant * 0x1.0p-9f;
    } else {
        mag = ckc_f32_from_bits(((exp + 120u) << 23) | (mant << 20));
    }
    return ckc_f32_from_bits(sign | ckc_f32_bits(mag));
}

/* ---- float8 e5m2 (max 57344, subnormals down to 2^-16, infinities) ---- */

/* Round to nearest even, a port of c10's fp8e5m2_from_fp32_value: magnitudes
 * of 2^16 and above (61440 already rounds there) and infinities encode as
 * infinity (0x7C | sign), NaN as 0x7F | sign. */
CKC_HD uint8_t
ckc_f32_to_e5m2(float f)
{
    uint32_t bits = ckc_f32_bits(f);
    const uint32_t sign = bits & 0x80000000u;
    uint32_t code;
    bits ^= sign;
    if (bits >= (143u << 23)) {
        code = bits > (255u << 23) ? 0x7Fu : 0x7Cu;
    } else if (bits < (113u << 23)) {
        /* Below 2^-14 the result is subnormal: adding 2^7 leaves the rounded
         * 2^-16 multiples in the low mantissa bits. */
        const uint32_t denorm_magic = 134u << 23;
        code = ckc_f32_bits(ckc_f32_from_bits(bits) + ckc_f32_from_bits(denorm_magic)) - denorm_magic;
    } else {
        const uint32_t mant_odd = (bits >> 21) & 1u;
        bits += ((uint32_t)(15 - 127) << 23) + 0xFFFFFu + mant_odd;
        code = bits >> 21;
    }
    return (uint8_t)((code & 0xFFu) | (sign >> 24));
}

/* e5m2 is float16 with the low 8 mantissa bits cut: the decoder is f16's. */
CKC_HD float
ckc_e5m2_to_f32(uint8_t code)
{
    return ckc_f16_to_f32((uint16_t)((uint16_t)code << 8));
}

/* ---- fp4 e2m1 (values 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign) ---- */

/* Port of comfy_kitchen's _f32_to_floatx_unpacked(x, 2, 1): round to nearest
 * even, saturate at 6.  NaN has no code; callers map it first (see nvfp4.h). */
CKC_HD uint8_t
ckc_f32_to_e2m1(float f)
{
    const uint32_t bits = ckc_f32_bits(f);
    const uint32_t sign = bits & 0x80000000u;
    const uint32_t mag_bits = bits ^ sign;
    const float mag = ckc_f32_from_bits(mag_bits);
    /* Below 1 the result is subnormal: adding 2^22 rounds to a multiple of 0.5. */
    const uint32_t denorm_magic = 149u << 23;
    const uint32_t subnormal = ckc_f32_bits(mag + ckc_f32_from_bits(denorm_magic)) - denorm_magic;
    const uint32_t normal = (mag_bits + ((uint32_t)(1 - 127) << 23) + 0x1FFFFFu + ((mag_bits >> 22) & 1u)) >> 22;
    /* All three candidates are computed so the selection compiles without branches. */
    const uint32_t code = mag >= 6.0f ? 0x7u : (mag < 1.0f ? subnormal : normal);
    return (uint8_t)((code & 0xFFu) | (sign >> 28));
}

/* Value of a code, built from bits so loops over codes vectorize: magnitudes
 * 0 and 0.5 are subnormal (m * 0.5); 2..7 are 2^(m/2 - 1) * (1 + (m & 1) / 2). */
CKC_HD float
ckc_e2m1_to_f32(uint8_t code)
{
    const uint32_t m = code & 0x7u;
    const uint32_t normal = (((m >> 1) + 126u) << 23) | ((m & 1u) << 22);
    const uint32_t mag = m < 2u ? ckc_f32_bits((float)m * 0.5f) : normal;
    return ckc_f32_from_bits(mag | ((uint32_t)(code & 0x8u) << 28));
}

#endif /* CKC_FLOAT_BITS_H */
