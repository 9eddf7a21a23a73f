/* SPDX-License-Identifier: Apache-2.0 */
/* Scalar math of MXFP8, written once for C and CUDA: per block of 32 values an
 * E8M0 (power of two) block scale, e4m3fn codes, and cuBLAS's swizzled
 * block-scale layout (the NVFP4 one: math/nvfp4.h's tiles and offsets).  Each
 * step is comfy_kitchen 0.2.40's eager quantize_mxfp8 / dequantize_mxfp8 on the
 * CPU, so codes, scales and values match it bit for bit:
 *
 *   s     = max(absmax / 448 (float32), 2^-127)
 *   code  = clamp(int32(ceil(log2(s))) + 127, 0, 254)     (a NaN or infinite s: 0)
 *   value = clamp(x / 2^(code - 127), -448, 448) as e4m3  (scale 2^-127 is read as 0)
 *
 * and a block whose absmax is 0 gets code 0 and +0 codes.  An E8M0 code c
 * decodes as the float32 of bits c << 23 (eager's e8m0_to_f32): 0 is 0.0, 255
 * infinity. */
#ifndef CKC_MXFP8_H
#define CKC_MXFP8_H

#include "fp8.h"
#include "nvfp4.h"

#define CKC_MXFP8_BLOCK 32
#define CKC_E8M0_BIAS 127

/* Eager's float32 value of an E8M0 code. */
CKC_HD float
ckc_e8m0_to_f32(uint8_t code)
{
    return ckc_f32_from_bits((uint32_t)code << 23);
}

/* ceil(log2(s)) as eager computes it: log2 rounded to float32 first (torch's
 * Sleef and glibc log2f give the correctly rounded float here, checked over the
 * inputs where it matters in tests/test_mxfp8_parity.py), then ceil.  So for
 * s = 2^e (1 + j 2^-23), j > 0, the answer is e + 1 unless e + log2(1 + j 2^-23)
 * rounds to e in float32: log2's fraction is below half an ulp of the sum, which
 * happens for the first few j when |e| is large.  limit[q - 18] is the largest
 * such j for half an ulp of 2^-q: floor(2^23 (2^(2^-q) - 1)) = 22, 11, 5, 2, 1,
 * then 0 (the real bounds 22.18, 11.09, 5.55, 2.77, 1.39, 0.69 are far from
 * integers, so no j lies on one).  s is finite and at least 2^-127. */
CKC_HD int
ckc_mxfp8_ceil_log2(float s)
{
    const uint32_t bits = ckc_f32_bits(s);
    const int field = (int)(bits >> 23);
    /* below 2^-126, s = m 2^-149 with m in [2^22, 2^23): as 2^-127 (1 + j 2^-23) */
    const int e = field == 0 ? -127 : field - 127;
    const uint32_t j = field == 0 ? 2u * ((bits & 0x7FFFFFu) - 0x400000u) : (bits & 0x7FFFFFu);
    const int a = e < 0 ? -e : e;
    int b = 0; /* floor(log2 |e|) */
    int q;
    if (j == 0u) {
        return e;
    }
    if (e == 0) {
        return 1;
    }
    while ((2 << b) <= a) {
        b++;
    }
    /* Half an ulp of the float32 sum: just below |e| when e < 0, where a power of two has a finer ulp. */
    q = (e < 0 && a == (1 << b)) ? 25 - b : 24 - b;
    {
        const int limit = q == 18 ? 22 : q == 19 ? 11 : q == 20 ? 5 : q == 21 ? 2 : q == 22 ? 1 : 0;
        return j <= (uint32_t)limit ? e : e + 1;
    }
}

/* The E8M0 code of a block whose absmax (taken in the element type, exact in
 * float32) is given.  A NaN or infinite absmax gives 0: eager's int32 cast of a
 * NaN or infinite ceil is INT_MIN on the CPU, which its clamp takes to 0. */
CKC_HD uint8_t
ckc_mxfp8_block_scale(float absmax)
{
    float s = absmax / CKC_E4M3_MAX;
    int code;
    if (!(s <= 3.402823466e38f)) {
        return 0;
    }
    /* 2^-127, the clamp's floor (a float32 subnormal) */
    s = s < ckc_f32_from_bits(0x00400000u) ? ckc_f32_from_bits(0x00400000u) : s;
    code = ckc_mxfp8_ceil_log2(s) + CKC_E8M0_BIAS;
    return (uint8_t)(code < 0 ? 0 : (code > 254 ? 254 : code));
}

/* The multiplier of a block's values: 1 / its scale, exact (a power of two,
 * 2^-127 as a subnormal), so x * inverse is eager's x / scale bit for bit;
 * code 0 (scale 0.0) gives infinity, so x * inverse is x / 0 (0 * inf is NaN, as
 * 0 / 0).  A block of zeros is eager's where(): its multiplier is 0 and
 * ckc_mxfp8_code gives +0 codes. */
CKC_HD float
ckc_mxfp8_inverse(uint8_t code, int zero_block)
{
    return zero_block ? 0.0f : 1.0f / ckc_e8m0_to_f32(code);
}

/* Code of one value of a block (inverse from ckc_mxfp8_inverse). */
CKC_HD uint8_t
ckc_mxfp8_code(float x, float inverse, int zero_block)
{
    const float t = zero_block ? 0.0f : x * inverse;
    return ckc_fp8_encode(ckc_fp8_clamp(t, CKC_E4M3_MAX), 0);
}

/* One value in float32, e4m3 value * its block's scale (ckc_e8m0_to_f32): eager's
 * product, before its one rounding to the output type (the callers' store). */
CKC_HD float
ckc_mxfp8_decoded(uint8_t code, float scale)
{
    return ckc_e4m3_to_f32(code) * scale;
}

#endif /* CKC_MXFP8_H */
