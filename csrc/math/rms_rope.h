/* SPDX-License-Identifier: Apache-2.0 */
/* The arithmetic of rms_rope as comfy_kitchen's eager backend does it, shared by
 * the CPU kernels (csrc/cpu/rms_rope_impl.h) and the GPU kernels (kernels/rope.cu).
 *
 * Eager (backends/eager/rope.py, _rms_rope1) is `torch.nn.functional.rms_norm(x,
 * (D,), weight=scale, eps)` and then apply_rope1 / apply_rope_split_half1 on the
 * result.  aten's CPU rms_norm computes the row factor r = 1 / sqrt(sum(x^2) / D +
 * eps) in float32 (math/rms.h: its cascade order, bit for bit) and each value as
 * (float(x) * r) * float(scale), rounded once to x's dtype (whatever the scale's
 * dtype: tests/test_rms_rope_parity.py checks every pair).  That rounded value is
 * what RoPE reads (math/rope.h: upcast exactly, rotated, rounded to x's dtype
 * again); a value past the rotated prefix (rot_dim) is the normalized value. */
#ifndef CKC_MATH_RMS_ROPE_H
#define CKC_MATH_RMS_ROPE_H

#include "math/float_bits.h"
#include "math/rms.h"
#include "math/rope.h"

/* rms_norm's value: (v * r) * w, rounded to x's dtype (kind). */
CKC_HD float
ckc_rms_norm_value(float v, float r, float w, ckc_float_kind kind)
{
    return ckc_round_to_kind(v * r * w, kind);
}

#endif /* CKC_MATH_RMS_ROPE_H */
