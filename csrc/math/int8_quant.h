/* SPDX-License-Identifier: Apache-2.0 */
/* Scalar math of comfy_kitchen's int8 quantization, written once for the C and
 * CUDA kernels.  Semantics follow the eager backend (contract 2.2-2.3):
 *   scale  = max(absmax / 127, 1e-30)                  (float32, returned)
 *   s_math = round_T(scale), with 0 replaced by finfo(T).tiny
 *   q      = clamp(rne(round_T(x / s_math)), -128, 127)
 * Where eager's result is undefined we define it: an element whose quotient is
 * NaN (a NaN input, or an infinite input in a row whose scale is inf) gets 0. */
#ifndef CKC_INT8_QUANT_H
#define CKC_INT8_QUANT_H

#include "float_bits.h"

#if !defined(__CUDACC__)
#include <math.h>
#endif

#define CKC_INT8_SCALE_FLOOR 1e-30f

/* Magnitude ordering that lets NaN win, as torch's amax does. */
CKC_HD float
ckc_absmax_update(float acc, float v)
{
    const float a = v < 0.0f ? -v : v;
    return (a > acc || a != a) ? a : acc;
}

/* Returned float32 scale for an absmax taken in the element type. */
CKC_HD float
ckc_int8_scale(float absmax)
{
    const float s = absmax / 127.0f;
    return s < CKC_INT8_SCALE_FLOOR ? CKC_INT8_SCALE_FLOOR : s;  /* NaN passes */
}

/* The divisor eager actually uses: the scale rounded to the element type, never 0. */
CKC_HD float
ckc_int8_math_scale(float scale, ckc_float_kind kind)
{
    const float s = ckc_round_to_kind(scale, kind);
    return s == 0.0f ? ckc_kind_tiny(kind) : s;
}

/* Round half to even for |t| <= 2^22, written so compilers vectorize it. */
CKC_HD float
ckc_round_half_even(float t)
{
#if defined(__CUDA_ARCH__)
    return rintf(t);
#else
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    return (t + magic) - magic;
#endif
}

/* NaN has no code: the quotient becomes 0.  An integer test on the magnitude
 * bits, so loops stay in cheap integer vector operations. */
CKC_HD float
ckc_int8_nan_to_zero(float t)
{
    const uint32_t bits = ckc_f32_bits(t);
    return ckc_f32_from_bits((bits & 0x7FFFFFFFu) > 0x7F800000u ? 0u : bits);
}

/* Code of a quotient without NaN: round half to even, clamp to [-128, 127].
 * The magnitude is first capped at 2^22 with an unsigned min on its bits (so
 * the magic-number rounding is valid and the conversion defined), and the int8
 * range is two integer min/max.  No float compare-and-blend: compilers
 * vectorize those poorly next to a narrowing conversion. */
CKC_HD int8_t
ckc_int8_from_quotient(float t)
{
    const uint32_t bits = ckc_f32_bits(t);
    const uint32_t mag = bits & 0x7FFFFFFFu;
    const uint32_t cap = 0x4A800000u; /* 2^22 */
    int32_t i = (int32_t)ckc_round_half_even(ckc_f32_from_bits((bits & 0x80000000u) | (mag < cap ? mag : cap)));
    i = i > -128 ? i : -128;
    i = i < 127 ? i : 127;
    return (int8_t)i;
}

/* Deterministic code for one element whose value is already in float. */
CKC_HD int8_t
ckc_int8_code(float x, float math_scale, ckc_float_kind kind)
{
    const float t = ckc_int8_nan_to_zero(x / math_scale);
    return ckc_int8_from_quotient(ckc_round_to_kind_not_nan(t, kind));
}

/* Division-free form for bfloat16.  For bfloat16 x and s (s and 1/s normal
 * floats), round_bf16(x * fl32(1/s)) == round_bf16(fl32(x / s)):
 *  - the exact quotient of two 8-bit significands is never a bfloat16 rounding
 *    tie (a tie needs 9 significant bits) and lies at least 1/(255 * 2^9) > 2^-17
 *    (relative) from one;
 *  - fl32(x / s) and x * fl32(1/s) are within 2^-24 and 2^-23 of it.
 * So both round to the same bfloat16 value and the codes are identical.  Not
 * valid for float16 (11-bit significands leave no such margin) or float32. */
CKC_HD int
ckc_int8_bf16_reciprocal_exact(float math_scale)
{
    const float inv = 1.0f / math_scale;
    return math_scale >= 0x1.0p-126f && math_scale <= 0x1.0p+126f && inv >= 0x1.0p-126f;
}

CKC_HD int8_t
ckc_int8_code_bf16_reciprocal(float x, float inv_math_scale)
{
    const float t = ckc_int8_nan_to_zero(x * inv_math_scale);
    return ckc_int8_from_quotient(ckc_round_to_kind_not_nan(t, CKC_BF16));
}

/* Stochastic code: eager adds uniform noise (drawn in the element type) to the
 * rounded quotient in the element type, then floors (values are integral
 * after floorf, so the rounding inside ckc_int8_from_quotient is exact). */
CKC_HD int8_t
ckc_int8_code_stochastic(float x, float noise, float math_scale, ckc_float_kind kind)
{
    const float t = ckc_int8_nan_to_zero(x / math_scale);
    return ckc_int8_from_quotient(
        floorf(ckc_round_to_kind_not_nan(ckc_round_to_kind_not_nan(t, kind) + noise, kind)));
}

#endif /* CKC_INT8_QUANT_H */
