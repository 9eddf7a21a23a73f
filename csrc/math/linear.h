/* SPDX-License-Identifier: Apache-2.0 */
/* The int8_linear epilogue, written once for the C and CUDA kernels, in eager's
 * steps and roundings (comfy_kitchen/backends/eager/quantization.py int8_linear,
 * backends/_activations.py apply_residual):
 *
 *   y = round_out(float(acc) * (x_scale * w_scale))          chunk.float() * scales, .to(out_dtype)
 *   y = round_out(y + float(round_out(bias)))                result + bias.to(out_dtype), in out's type
 *   y = round_out(fma(y, round_out(s), round_out(residual))) addcmul(residual.to(out), y, s.to(out))
 *
 * The scale product is formed first and the int32 sum converted to float32 as
 * eager does, so the result equals eager's bit for bit.  aten adds two 16-bit
 * values in float32 and rounds once to their type, as here.  Its addcmul
 * computes self + value * t1 * t2 in float32 (value 1): for float32 its kernel
 * contracts that to one fused multiply-add (measured: a separate product and
 * sum differ on ~25% of float32 outputs, fmaf on none), and for 16-bit types
 * the product of two 16-bit values is exact in float32, so fmaf gives the same
 * bits there too.  The bias, the residual and its scale come in their own float
 * types and are rounded to the output type here (`.to(out_dtype)`), which
 * spares the Python layer a conversion per call. */
#ifndef CKC_LINEAR_H
#define CKC_LINEAR_H

#include "float_bits.h"

#if !defined(__CUDACC__)
#include <math.h>
#endif

/* Element j of a float vector of `kind` rounded to the output type, as
 * `t.to(out_dtype)` gives it (c10 converts every type through float32). */
CKC_HD float
ckc_linear_operand(const void *t, ckc_float_kind kind, ckc_float_kind out_kind, int64_t j)
{
    return ckc_round_to_kind(ckc_kind_value(t, kind, j), out_kind);
}

/* The bias term of column j (ckc_linear_operand of the bias). */
CKC_HD float
ckc_linear_bias(const void *bias, ckc_float_kind bias_kind, ckc_float_kind out_kind, int64_t j)
{
    return ckc_linear_operand(bias, bias_kind, out_kind, j);
}

/* y, in the output type, given column j's bias term (ckc_linear_bias) where
 * there is a bias. */
CKC_HD float
ckc_linear_value(int32_t acc, float x_scale, float w_scale, int has_bias, float bias_term, ckc_float_kind out_kind)
{
    const float v = ckc_round_to_kind((float)acc * (x_scale * w_scale), out_kind);
    /* No "+ 0.0f" without a bias: it would turn eager's -0.0 into +0.0. */
    return has_bias ? ckc_round_to_kind(v + bias_term, out_kind) : v;
}

/* The residual form of y (already in the output type): residual + y * scale,
 * one rounding (to float32; the store rounds to the output type). */
CKC_HD float
ckc_linear_residual(float y, float residual_term, float scale_term)
{
    return fmaf(y, scale_term, residual_term);
}

/* What the epilogue adds after the product: the bias, the residual form. */
typedef struct {
    const void *bias;            /* n values of bias_kind, or NULL */
    ckc_float_kind bias_kind;
    const void *residual;        /* [rows, n] of residual_kind (row stride n), or NULL */
    ckc_float_kind residual_kind;
    const void *residual_scale;  /* n values (or one) of residual_scale_kind */
    ckc_float_kind residual_scale_kind;
    int residual_scale_per_channel;
} ckc_linear_terms;

/* Output (r, j) of a chunk, reading its bias and residual terms itself (the GPU
 * kernels do so per element; the CPU epilogue converts the per-column terms once). */
CKC_HD float
ckc_linear_output(int32_t acc, float x_scale, float w_scale, ckc_linear_terms t, ckc_float_kind out_kind,
                  int64_t r, int64_t j, int64_t n)
{
    const float y = ckc_linear_value(acc, x_scale, w_scale, t.bias != NULL,
                                     t.bias != NULL ? ckc_linear_bias(t.bias, t.bias_kind, out_kind, j) : 0.0f,
                                     out_kind);
    if (t.residual == NULL) {
        return y;
    }
    return ckc_linear_residual(
        y, ckc_linear_operand(t.residual, t.residual_kind, out_kind, r * n + j),
        ckc_linear_operand(t.residual_scale, t.residual_scale_kind, out_kind, t.residual_scale_per_channel ? j : 0));
}

#endif /* CKC_LINEAR_H */
