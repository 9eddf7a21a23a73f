/* SPDX-License-Identifier: Apache-2.0 */
/* Activations an int8 linear layer can absorb into its quantizer's load
 * (comfy_kitchen's `input_act`, and the modulations of int8_linear_modulated /
 * int8_linear_rms_modulated), written once for the C and CUDA kernels.
 *
 *   CKC_ACT_GELU_TANH     gelu(v, approximate="tanh")
 *   CKC_ACT_SWIGLU        silu(gate) * up, the row being [gate | up] (width 2K -> K)
 *   CKC_ACT_RMS_NORM      v * r * w[j], r = rsqrt(mean(v^2) + eps) of the row (math/rms.h)
 *   CKC_ACT_SITU          4 tanh(gate/4) sigmoid(gate) * 25 tanh(hidden/25), the row
 *                         being [hidden | gate] (width 2K -> K)
 *   CKC_ACT_MODULATE      v * (1 + s[j])                 (int8_linear_modulated)
 *   CKC_ACT_RMS_MODULATE  rms_norm(v) * (1 + s[j])       (int8_linear_rms_modulated)
 *
 * Codes 0-4 are comfy_kitchen's (backends/_activations.py); 5 and 6 are this
 * package's own, for the fused modulated ops.
 *
 * Evaluated in float32 in torch's order, and rounded to an element type where
 * eager rounds: eager applies each step to a tensor of x's dtype, so every
 * intermediate result of gelu, silu*up and situ is rounded to that dtype.
 * rms_norm follows aten's CPU rms_norm, which works in float32 throughout and
 * rounds once: (float(v) * r) * float(w) -> x's type (int8_linear casts w to x's
 * dtype first: `act_weight.to(x.dtype)`; int8_linear_rms_modulated passes the
 * norm weight as it is).  The modulation `x * (1.0 + s)`: 1 + s in s's dtype,
 * the product in the promoted dtype of the two, the type the row is evaluated
 * in (the Python layer hands such rows over in that type). */
#ifndef CKC_ACTIVATION_H
#define CKC_ACTIVATION_H

#include "float_bits.h"

#if !defined(__CUDACC__)
#include <math.h>
#endif

typedef enum {
    CKC_ACT_NONE = 0,
    CKC_ACT_GELU_TANH = 1,
    CKC_ACT_SWIGLU = 2,
    CKC_ACT_RMS_NORM = 3,
    CKC_ACT_SITU = 4,
    CKC_ACT_MODULATE = 5,
    CKC_ACT_RMS_MODULATE = 6,
    /* Not an activation of its own: the GPU row kernels are instantiated once for
     * the per-column activations (rms_norm and the modulations), which read
     * args.act at run time (each instance costs the build a kernel per type). */
    CKC_ACT_COLUMNWISE = 7
} ckc_act;

#define CKC_ACT_LAST CKC_ACT_RMS_MODULATE

/* What an activation reads beside the row's own values: per-column vectors of
 * k values in their own types, and per-row factors.  Uniform over a launch. */
typedef struct {
    int act;                       /* the activation (what CKC_ACT_COLUMNWISE kernels apply) */
    const void *weight;            /* rms_norm's weight, or NULL */
    ckc_float_kind weight_kind;
    int weight_to_row_kind;        /* 1: the weight is first rounded to the row's type (input_act) */
    const void *modulation;        /* the modulation scale s, or NULL */
    ckc_float_kind modulation_kind;
    ckc_float_kind norm_kind;      /* the type rms_norm's result is rounded to (x's) */
    float eps;                     /* rms_norm's eps, as a float32 */
    const float *row_factor;       /* rms_norm's r per row of the launch (math/rms.h), or NULL */
} ckc_act_args;

/* Input columns per activated column. */
CKC_HD int
ckc_act_width(int act)
{
    return act == CKC_ACT_SWIGLU || act == CKC_ACT_SITU ? 2 : 1;
}

/* Whether the activation needs its row's r (a reduction over the row first). */
CKC_HD int
ckc_act_needs_row_factor(int act)
{
    return act == CKC_ACT_RMS_NORM || act == CKC_ACT_RMS_MODULATE;
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

/* gelu_tanh and silu rounded to the row's type: functions of one input value
 * (the CPU tabulates them for 16-bit types, cpu/act_tables.c). */
CKC_HD float
ckc_gelu_tanh_value(float v, ckc_float_kind kind)
{
    return ckc_round_to_kind(ckc_gelu_tanh(v), kind);
}

CKC_HD float
ckc_silu_value(float g, ckc_float_kind kind)
{
    return ckc_round_to_kind(ckc_silu(g), kind);
}

/* sigmoid(g) = 1 / (1 + exp(-g)), as aten computes it. */
CKC_HD float
ckc_sigmoid(float g)
{
    return 1.0f / (1.0f + expf(-g));
}

/* MOSS-Image's soft-capped gate in eager's steps, each rounded to the row's
 * type: gate.div(4).tanh_().mul_(4).mul_(sigmoid(gate)) (ckc_situ_gate), then
 * hidden.div(25).tanh_().mul_(25).mul_(gated).  Each factor is a function of
 * one input value (the CPU tabulates them for 16-bit types, cpu/act_tables.c).  The divisions are true
 * divisions (aten divides by a scalar, it does not multiply by its inverse). */
CKC_HD float
ckc_situ_gate(float gate, ckc_float_kind kind)
{
    const float capped = ckc_round_to_kind(tanhf(ckc_round_to_kind(gate / 4.0f, kind)), kind);
    return ckc_round_to_kind(ckc_round_to_kind(capped * 4.0f, kind) * ckc_round_to_kind(ckc_sigmoid(gate), kind),
                             kind);
}

/* The hidden half's factor: hidden.div(25).tanh_().mul_(25). */
CKC_HD float
ckc_situ_hidden(float hidden, ckc_float_kind kind)
{
    const float soft = ckc_round_to_kind(tanhf(ckc_round_to_kind(hidden / 25.0f, kind)), kind);
    return ckc_round_to_kind(soft * 25.0f, kind);
}

CKC_HD float
ckc_situ(float hidden, float gate, ckc_float_kind kind)
{
    return ckc_round_to_kind(ckc_situ_hidden(hidden, kind) * ckc_situ_gate(gate, kind), kind);
}

/* rms_norm of one value: (v * r) * w, rounded to the norm's type. */
CKC_HD float
ckc_rms_value(float v, float r, ckc_act_args a, ckc_float_kind kind, int64_t j)
{
    float w = ckc_kind_value(a.weight, a.weight_kind, j);
    if (a.weight_to_row_kind) {
        w = ckc_round_to_kind(w, kind);
    }
    return ckc_round_to_kind((v * r) * w, a.norm_kind);
}

/* v * (1 + s[j]): 1 + s rounded to s's type, the product to the row's type. */
CKC_HD float
ckc_modulate_value(float v, ckc_act_args a, ckc_float_kind kind, int64_t j)
{
    const float m = ckc_round_to_kind(1.0f + ckc_kind_value(a.modulation, a.modulation_kind, j), a.modulation_kind);
    return ckc_round_to_kind(v * m, kind);
}

/* The per-column activations (act: one of them). */
CKC_HD float
ckc_act_columnwise(int act, float v, float r, ckc_act_args a, ckc_float_kind kind, int64_t j)
{
    if (act == CKC_ACT_MODULATE) {
        return ckc_modulate_value(v, a, kind, j);
    }
    v = ckc_rms_value(v, r, a, kind, j);
    return act == CKC_ACT_RMS_MODULATE ? ckc_modulate_value(v, a, kind, j) : v;
}

/* One activated value of column j (< k) from its input value v, its partner
 * `other` (up for swiglu, gate for situ; else unused) and the row's factor r
 * (rms_norm; else unused), rounded as eager rounds.  The arguments go by value
 * (inlined, they cost nothing; a pointer to a kernel parameter would put it in
 * local memory). */
CKC_HD float
ckc_act_apply(int act, float v, float other, float r, ckc_act_args a, ckc_float_kind kind, int64_t j)
{
    switch (act) {
    case CKC_ACT_GELU_TANH:
        return ckc_gelu_tanh_value(v, kind);
    case CKC_ACT_SWIGLU:
        return ckc_round_to_kind(ckc_silu_value(v, kind) * other, kind);
    case CKC_ACT_SITU:
        return ckc_situ(v, other, kind);
    case CKC_ACT_RMS_NORM:
    case CKC_ACT_MODULATE:
    case CKC_ACT_RMS_MODULATE:
        return ckc_act_columnwise(act, v, r, a, kind, j);
    case CKC_ACT_COLUMNWISE:
        return ckc_act_columnwise(a.act, v, r, a, kind, j);
    default:
        return v;
    }
}

#endif /* CKC_ACTIVATION_H */
