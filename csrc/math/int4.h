/* SPDX-License-Identifier: Apache-2.0 */
/* Scalar math of comfy_kitchen's ConvRot W4A4 ops (eager: backends/eager/
 * convrot_w4a4.py and svdquant.py's int4 codec), written once for the C and
 * CUDA kernels.  Eager, per row of the rotated x (in x's type T):
 *   absmax = clamp(amax|x|, min=1e-10)      in T (1e-10 rounded to T: 0 in float16)
 *   s      = round_T(absmax / 7)            (returned as float32, exact)
 *   q      = clamp(rne(round_T(x / s)), -7, 7)
 *   stochastic: clamp(floor(round_T(round_T(x / s) + noise)), -7, 7)
 * NaN quotients (a NaN input; 0/0 in an all-zero float16 row; inf/inf) give
 * code 0, as eager's x86 conversion of NaN to int8 does (checked by the tests).
 * Codes are packed two per byte, the even column in the low nibble; unpacking
 * reads a nibble as two's complement in [-8, 7].
 *
 * The rotation is csrc/math/hadamard.h's: eager's W4A4 Hadamard is the same
 * regular kron(H4, ..., H4) / sqrt(G) as its int8 ConvRot one (symmetric, so
 * eager's weight @ H.T and x @ H are the same map); see that header. */
#ifndef CKC_MATH_INT4_H
#define CKC_MATH_INT4_H

#include "float_bits.h"
#include "int8_quant.h"

#define CKC_INT4_MAX 7
#define CKC_INT4_GROUP 64 /* eager's only quant_group_size ("int4 MMA kernel requires") */

/* The row's scale in T from its absmax in T: clamp(min=1e-10) then / 7, each in
 * T (eager's two tensor ops).  NaN passes both. */
CKC_HD float
ckc_int4_scale(float absmax, ckc_float_kind kind)
{
    const float floor_t = ckc_round_to_kind(1e-10f, kind);
    const float a = absmax < floor_t ? floor_t : absmax;
    return ckc_round_to_kind(a / (float)CKC_INT4_MAX, kind);
}

/* [-128, 127] code (ckc_int8_*) narrowed to eager's int4 emission range. */
CKC_HD int
ckc_int4_clamp(int c)
{
    return c < -CKC_INT4_MAX ? -CKC_INT4_MAX : (c > CKC_INT4_MAX ? CKC_INT4_MAX : c);
}

/* Nearest-even code of x (a value of T) with the row's scale s (a value of T).
 * The int8 code is clamp(rne(round_T(x / s)), -128, 127) with NaN as 0, and the
 * clamps nest (both are monotone), so this is eager's int4 code. */
CKC_HD int
ckc_int4_code(float x, float s, ckc_float_kind kind)
{
    return ckc_int4_clamp(ckc_int8_code(x, s, kind));
}

/* Stochastic code with eager's noise value (drawn in T by torch.rand). */
CKC_HD int
ckc_int4_code_stochastic(float x, float noise, float s, ckc_float_kind kind)
{
    return ckc_int4_clamp(ckc_int8_code_stochastic(x, noise, s, kind));
}

/* One byte of two codes: the even column low, the odd column high. */
CKC_HD uint8_t
ckc_int4_pack(int even, int odd)
{
    return (uint8_t)(((unsigned)even & 0x0Fu) | (((unsigned)odd & 0x0Fu) << 4));
}

/* The signed value of a nibble (two's complement), without a signed shift. */
CKC_HD int
ckc_int4_nibble(unsigned nibble)
{
    return (int)((nibble & 0x0Fu) ^ 0x08u) - 8;
}

CKC_HD int
ckc_int4_lo(uint8_t b)
{
    return ckc_int4_nibble(b);
}

CKC_HD int
ckc_int4_hi(uint8_t b)
{
    return ckc_int4_nibble((unsigned)b >> 4);
}

/* ---- convrot_w4a4_linear's epilogue (eager's int4_linear) ----
 * out = x_int @ w_int.t() in T: every product of two codes is at most 64 in
 * magnitude and K <= CKC_INT4_MAX_K, so every partial sum is an integer below
 * 2^24 and torch's float32 accumulation (its CPU GEMMs accumulate 16-bit types
 * in float32 too: the tests check it) is exact in any order; its result is the
 * exact integer sum `acc` rounded once to T.  Then, each in T:
 *   * x_scale.to(T), * w_scale.to(T), + bias.to(T)
 * (the operands' float32 products and sums are exact for 16-bit T, so each
 * rounding to T is eager's). */
#define CKC_INT4_MAX_K (1 << 18) /* 64 * 2^18 = 2^24 */

CKC_HD float
ckc_int4_linear_out(int32_t acc, float xs_t, float ws_t, float bias_t, int has_bias, ckc_float_kind kind)
{
    float v = ckc_round_to_kind((float)acc, kind);
    v = ckc_round_to_kind(v * xs_t, kind);
    v = ckc_round_to_kind(v * ws_t, kind);
    return has_bias ? ckc_round_to_kind(v + bias_t, kind) : v;
}

#endif /* CKC_MATH_INT4_H */
