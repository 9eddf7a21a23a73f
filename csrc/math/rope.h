/* SPDX-License-Identifier: Apache-2.0 */
/* The arithmetic of RoPE as comfy_kitchen's eager backend does it, shared by the
 * CPU kernels (csrc/cpu/rope_impl.h) and the GPU kernels (kernels/rope.cu).
 *
 * Eager (backends/eager/rope.py) upcasts x to freqs_cis's dtype (float32) and
 * computes, per output element, `f0 * a` (one float32 product, rounded) and then
 * `addcmul_(f1, b)`.  torch's CPU addcmul_ at capability AVX2/AVX-512 and its CUDA
 * kernel (nvcc contracts a + b * c) round that multiply-add once: an FMA.  So the
 * output element is fmaf(f1, b, f0 * a), rounded to x's dtype at the end
 * (type_as).  torch at capability DEFAULT (no AVX2) rounds the product f1 * b
 * first: there the float32 result differs by at most one float32 ulp of the sum,
 * which the final rounding to bfloat16/float16 almost always absorbs. */
#ifndef CKC_MATH_ROPE_H
#define CKC_MATH_ROPE_H

#include <math.h>

#include "math/ckc_inline.h"

/* f0 * a + f1 * b as eager rounds it: the first product, then one fused multiply-add. */
CKC_HD float
ckc_rope_pair(float f0, float f1, float a, float b)
{
    const float p = f0 * a;
    return fmaf(f1, b, p);
}

#endif /* CKC_MATH_ROPE_H */
