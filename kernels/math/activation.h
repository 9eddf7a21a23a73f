/* SPDX-License-Identifier: Apache-2.0 */
/* Activations an int8 linear layer can absorb into its quantizer's load
 * (comfy_kitchen's `input_act`), written once for the C and CUDA kernels.
 *
 *   CKC_ACT_GELU_TANH  gelu(v, approximate="tanh")
 *   CKC_ACT_SWIGLU     silu(gate) * up, the row being [gate | up] (width 2K -> K)
 *
 * Evaluated in float32 in torch's order (aten's CPU activation kernels), and
 * rounded to the input's element type where eager rounds: eager applies the
 * activation to a tensor of x's dtype, so gelu's result, silu(gate), and the
 * product with up are each rounded to that dtype before the rotation and the
 * quantizer see them. */
#ifndef CKC_ACTIVATION_H
#define CKC_ACTIVATION_H

#include "float_bits.h"

#if !defined(__CUDACC__)
#include <math.h>
#endif

/* comfy_kitchen's activation codes (backends/_activations.py). */
typedef enum {
    CKC_ACT_NONE = 0,
    CKC_ACT_GELU_TANH = 1,
    CKC_ACT_SWIGLU = 2
} ckc_act;

/* Input columns per activated column. */
CKC_HD int
ckc_act_width(int act)
{
    return act == CKC_ACT_SWIGLU ? 2 : 1;
}

/* 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))), as aten computes it. */
CKC_HD float
ckc_gelu_tanh(float v)
{
    const float beta = 0.7978845608028654f; /* sqrt(2) * 2/sqrt(pi) * 0.5 */
    const float kappa = 0.044715f;
    const float cube = v * v * v;
    const float inner = beta * (v + kappa * cube);
    return 0.5f * v * (1.0f + tanhf(inner));
}

/* silu(g) = g / (1 + exp(-g)), as aten computes it. */
CKC_HD float
ckc_silu(float g)
{
    return g / (1.0f + expf(-g));
}

/* One activated value from its input value(s), rounded as eager rounds. */
CKC_HD float
ckc_act_apply(int act, float v, float up, ckc_float_kind kind)
{
    if (act == CKC_ACT_GELU_TANH) {
        return ckc_round_to_kind(ckc_gelu_tanh(v), kind);
    }
    if (act == CKC_ACT_SWIGLU) {
        return ckc_round_to_kind(ckc_round_to_kind(ckc_silu(v), kind) * up, kind);
    }
    return v;
}

#endif /* CKC_ACTIVATION_H */
