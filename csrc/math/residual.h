/* SPDX-License-Identifier: Apache-2.0 */
/* The arithmetic of rms_gated_residual as comfy_kitchen's eager backend does it
 * (backends/eager/residual.py: `residual + gate * rms_norm(activation, weight,
 * eps)`), shared by the CPU kernels (csrc/cpu/residual_impl.h) and the GPU
 * kernels (kernels/residual.cu).
 *
 * Each of eager's three ops rounds to its result's dtype: rms_norm to the
 * activation's (math/rms_rope.h: ckc_rms_norm_value), the product to the
 * promoted dtype of gate and activation, the sum to the promoted dtype of
 * residual and product.  Every such op computes in float32 (exact upcasts) and
 * rounds once, so each step is a float32 operation and one rounding. */
#ifndef CKC_MATH_RESIDUAL_H
#define CKC_MATH_RESIDUAL_H

#include "math/float_bits.h"

/* torch's promotion among float32, float16 and bfloat16: the same type, else
 * float32 (float16 with bfloat16 promotes to float32 too). */
CKC_HD ckc_float_kind
ckc_promote_kind(ckc_float_kind a, ckc_float_kind b)
{
    return a == b ? a : CKC_F32;
}

/* residual + gate * normed: the product rounded to mid, the sum to out. */
CKC_HD float
ckc_gated_residual_value(float residual, float gate, float normed, ckc_float_kind mid, ckc_float_kind out)
{
    return ckc_round_to_kind(residual + ckc_round_to_kind(gate * normed, mid), out);
}

#endif /* CKC_MATH_RESIDUAL_H */
