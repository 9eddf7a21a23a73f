/* SPDX-License-Identifier: Apache-2.0 */
/* Per-element math of the per-tensor FP8 ops, shared by the CPU and CUDA
 * kernels: each function is one element of comfy_kitchen's eager op, step by
 * step, every intermediate rounded to the type eager computes it in, so the
 * bits are eager's (NaN: any NaN code, as eager's own vector and scalar paths
 * give NaNs of either sign). */
#ifndef CKC_MATH_FP8_H
#define CKC_MATH_FP8_H

#include <math.h>

#include "float_bits.h"

/* The largest finite value of the format (torch.finfo(...).max). */
CKC_HD float
ckc_fp8_max(int e5m2)
{
    return e5m2 ? 57344.0f : 448.0f;
}

CKC_HD uint8_t
ckc_fp8_encode(float v, int e5m2)
{
    return e5m2 ? ckc_f32_to_e5m2(v) : ckc_f32_to_e4m3(v);
}

CKC_HD float
ckc_fp8_decode(uint8_t code, int e5m2)
{
    return e5m2 ? ckc_e5m2_to_f32(code) : ckc_e4m3_to_f32(code);
}

/* torch.clamp(v, -m, m): NaN stays NaN (both comparisons are false). */
CKC_HD float
ckc_fp8_clamp(float v, float m)
{
    return v > m ? m : (v < -m ? -m : v);
}

/* ---- quantize_per_tensor_fp8: (x * (1/scale).to(x.dtype)).clamp(-max, max).to(fp8) ---- */

/* The multiplier eager forms once: 1/scale in float32, rounded to x's type. */
CKC_HD float
ckc_fp8_inverse_scale(float scale, ckc_float_kind kind)
{
    return ckc_round_to_kind(1.0f / scale, kind);
}

/* One code; inv from ckc_fp8_inverse_scale.  The product of two 16-bit values
 * is exact in float32, so one rounding to x's type is eager's product. */
CKC_HD uint8_t
ckc_fp8_quantize(float x, float inv, ckc_float_kind kind, int e5m2)
{
    return ckc_fp8_encode(ckc_fp8_clamp(ckc_round_to_kind(x * inv, kind), ckc_fp8_max(e5m2)), e5m2);
}

/* ---- dequantize_per_tensor_fp8: x.to(out) * scale.to(out) ---- */

/* scale_out: the scale already rounded to the output type.  Codes are exact in
 * every output type, so the one rounding is the product's. */
CKC_HD float
ckc_fp8_dequantize(uint8_t code, float scale_out, ckc_float_kind out_kind, int e5m2)
{
    return ckc_round_to_kind(ckc_fp8_decode(code, e5m2) * scale_out, out_kind);
}

/* ---- stochastic_rounding_fp8: eager's bit-level construction, in float16 ---- */

/* 2^n as float16 (n an integer in [-24, 16]; 2^16 overflows to infinity as
 * eager's torch.pow in float16 does), built from bits, not exp2f. */
CKC_HD float
ckc_fp8_pow2_h(float n)
{
    return ckc_round_to_kind(ckc_f32_from_bits((uint32_t)((int32_t)n + 127) << 23), CKC_F16);
}

/* Eager's exponent field: clamp(floor(log2(|x|)) + bias, 0, 2^E - 1), with
 * log2 rounded to float16 first.  That rounding can carry a value just below
 * 2^(k+1) up to exponent k+1 (94 float16 inputs), which eager keeps and so do
 * we.  Every float16 log2 lies at least 339 float32 ulps from the float16
 * midpoints next to an integer, so any log2f within a few ulps (glibc, Sleef,
 * CUDA) gives the same floor.  |x| = 0 gives -inf, clamped to 0. */
CKC_HD float
ckc_fp8_sr_exponent(float a, int e5m2)
{
    const float l = ckc_round_to_kind(log2f(a), CKC_F16);
    const float e = floorf(l) + (e5m2 ? 15.0f : 7.0f);
    const float top = e5m2 ? 31.0f : 15.0f;
    return e < 0.0f ? 0.0f : (e > top ? top : e);
}

/* Eager's op in two steps, so that the CPU can tabulate it (cpu/fp8_tables.c):
 * ckc_fp8_sr_mantissa gives the scaled mantissa m0 of x (the noise not yet
 * added: a function of x alone), ckc_fp8_sr_code the code of x once the noisy
 * mantissa round16(m0 + r/256) is known.  x arrives rounded to float16
 * (x.half()); NaN gives m0 = 0 and the NaN code below.  *e_out: the
 * exponent field, which ckc_fp8_sr_code takes. */
CKC_HD float
ckc_fp8_sr_mantissa(float x, int e5m2, float *e_out)
{
    const int mbits = e5m2 ? 2 : 3;
    const float bias = e5m2 ? 15.0f : 7.0f;
    const float mscale = (float)(1 << mbits);
    const float a = x < 0.0f ? -x : x;
    float e;
    *e_out = 0.0f;
    if (x != x) {
        return 0.0f;
    }
    e = ckc_fp8_sr_exponent(a, e5m2);
    *e_out = e;
    if (e != 0.0f) {
        const float p = ckc_fp8_pow2_h(e - bias);
        return ckc_round_to_kind(ckc_round_to_kind(ckc_round_to_kind(a / p, CKC_F16) - 1.0f, CKC_F16) * mscale,
                                 CKC_F16);
    }
    /* a / 2^(1 - bias - M): a power of two, exact */
    return a * ckc_f32_from_bits((uint32_t)(127 - (1 - (int)bias - mbits)) << 23);
}

/* The noisy mantissa: m0 plus r/256, in float16. */
CKC_HD float
ckc_fp8_sr_noisy(float m0, uint8_t r)
{
    return ckc_round_to_kind(m0 + (float)r * (1.0f / 256.0f), CKC_F16);
}

/* The code of x (exponent field e, from ckc_fp8_sr_mantissa) whose noisy
 * mantissa is m: m floored to an integer, rescaled. */
CKC_HD uint8_t
ckc_fp8_sr_code(float x, float e, float m, int e5m2)
{
    const int mbits = e5m2 ? 2 : 3;
    const float bias = e5m2 ? 15.0f : 7.0f;
    const float mscale = (float)(1 << mbits);
    const float sign = x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
    float mag;
    if (x != x) {
        return 0x7Fu; /* eager: sign(NaN) = 0, and 0 * NaN is NaN */
    }
    m = floorf(m) / mscale;
    if (e != 0.0f) {
        mag = ckc_round_to_kind(ckc_fp8_pow2_h(e - bias) * ckc_round_to_kind(1.0f + m, CKC_F16), CKC_F16);
    } else {
        mag = ckc_round_to_kind(ckc_f32_from_bits((uint32_t)(127 + 1 - (int)bias) << 23) * m, CKC_F16);
    }
    return ckc_fp8_encode(ckc_fp8_clamp(ckc_round_to_kind(sign * mag, CKC_F16), ckc_fp8_max(e5m2)), e5m2);
}

/* One code of x rounded with the noise byte r: mantissa bits scaled to
 * integers, r/256 added, floored. */
CKC_HD uint8_t
ckc_fp8_stochastic(float x, uint8_t r, int e5m2)
{
    float e;
    const float m0 = ckc_fp8_sr_mantissa(x, e5m2, &e);
    return ckc_fp8_sr_code(x, e, ckc_fp8_sr_noisy(m0, r), e5m2);
}

#endif /* CKC_MATH_FP8_H */
