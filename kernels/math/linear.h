/* SPDX-License-Identifier: Apache-2.0 */
/* The int8_linear epilogue, written once for the C and CUDA kernels:
 *
 *   y = round_out(float(acc) * (x_scale * w_scale) + float(round_out(bias)))
 *
 * in float32 with one rounding to the output type.  The scale product is formed
 * first and the int32 sum converted to float32 as eager does
 * (`chunk.float() * (x_scale * weight_scale)`), so without a bias the result
 * equals eager's bit for bit.  Eager adds the bias afterwards in the output
 * type (a second rounding); comfy_kitchen's CUDA/CUTLASS and Triton paths add it
 * in float32 as here.  Both first round the bias to the output type
 * (`bias.to(out_dtype)`), so the bias comes in its own type and is rounded here,
 * which spares the Python layer the conversions on every call. */
#ifndef CKC_LINEAR_H
#define CKC_LINEAR_H

#include "float_bits.h"

/* The bias term of column j: bias[j] (of bias_kind) rounded to the output type,
 * as bias.to(out_dtype) gives it (c10 converts every type through float32). */
CKC_HD float
ckc_linear_bias(const void *bias, ckc_float_kind bias_kind, ckc_float_kind out_kind, int64_t j)
{
    float b;
    if (bias_kind == CKC_F32) {
        b = ((const float *)bias)[j];
    } else if (bias_kind == CKC_BF16) {
        b = ckc_bf16_to_f32(((const uint16_t *)bias)[j]);
    } else {
        b = ckc_f16_to_f32(((const uint16_t *)bias)[j]);
    }
    return ckc_round_to_kind(b, out_kind);
}

/* y before its rounding, given column j's bias term (ckc_linear_bias) where
 * there is a bias. */
CKC_HD float
ckc_linear_value(int32_t acc, float x_scale, float w_scale, int has_bias, float bias_term)
{
    const float v = (float)acc * (x_scale * w_scale);
    /* No "+ 0.0f" without a bias: it would turn eager's -0.0 into +0.0. */
    return has_bias ? v + bias_term : v;
}

/* ckc_linear_value with the bias term read from the bias itself, as the GPU
 * kernels do per element (the CPU epilogue converts the bias once per call into
 * a float row, which keeps its loops vectorizable). */
CKC_HD float
ckc_linear_value_of(int32_t acc, float x_scale, float w_scale, const void *bias, ckc_float_kind bias_kind,
                    ckc_float_kind out_kind, int64_t j)
{
    return bias != NULL ? ckc_linear_value(acc, x_scale, w_scale, 1, ckc_linear_bias(bias, bias_kind, out_kind, j))
                        : ckc_linear_value(acc, x_scale, w_scale, 0, 0.0f);
}

#endif /* CKC_LINEAR_H */
