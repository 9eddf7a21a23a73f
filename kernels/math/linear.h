/* The int8_linear epilogue, written once for the C and CUDA kernels:
 *
 *   y = round_out(float(acc) * (x_scale * w_scale) + bias)
 *
 * in float32 with one rounding to the output type.  The scale product is formed
 * first and the int32 sum converted to float32 as eager does
 * (`chunk.float() * (x_scale * weight_scale)`), so without a bias the result
 * equals eager's bit for bit.  Eager adds the bias afterwards in the output
 * type (a second rounding); comfy_kitchen's CUDA/CUTLASS and Triton paths add it
 * in float32 as here.  The bias arrives already rounded to the output type
 * (both of comfy_kitchen's conventions do that first). */
#ifndef CKC_LINEAR_H
#define CKC_LINEAR_H

#include "float_bits.h"

CKC_HD float
ckc_linear_value(int32_t acc, float x_scale, float w_scale, const float *bias, int64_t j)
{
    const float v = (float)acc * (x_scale * w_scale);
    /* No "+ 0.0f" without a bias: it would turn eager's -0.0 into +0.0. */
    return bias != NULL ? v + bias[j] : v;
}

#endif /* CKC_LINEAR_H */
