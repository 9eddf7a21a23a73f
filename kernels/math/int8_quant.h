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

/* Deterministic code for one element whose value is already in float. */
CKC_HD int8_t
ckc_int8_code(float x, float math_scale, ckc_float_kind kind)
{
    float t = ckc_round_to_kind(x / math_scale, kind);
    t = t < -128.0f ? -128.0f : t;
    t = t > 127.0f ? 127.0f : t;
    t = t == t ? t : 0.0f;
    return (int8_t)(int32_t)ckc_round_half_even(t);
}

/* Stochastic code: eager adds uniform noise (drawn in the element type) to the
 * rounded quotient in the element type, then floors. */
CKC_HD int8_t
ckc_int8_code_stochastic(float x, float noise, float math_scale, ckc_float_kind kind)
{
    float t = ckc_round_to_kind(x / math_scale, kind);
    t = floorf(ckc_round_to_kind(t + noise, kind));
    t = t < -128.0f ? -128.0f : t;
    t = t > 127.0f ? 127.0f : t;
    t = t == t ? t : 0.0f;
    return (int8_t)(int32_t)t;
}

#endif /* CKC_INT8_QUANT_H */
