/* SPDX-License-Identifier: Apache-2.0 */
/* Host logic of the per-tensor FP8 family: each op's spec and the check of its
 * arguments into its parameter block.  FP8 tensors travel as uint8 (the bytes of
 * float8_e4m3fn or float8_e5m2; the flag e5m2 says which).  Every op is
 * element-wise over the flat contiguous order, so any rank is one length. */
#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "op.h"

#define U8 CKC_DTYPE_BIT(CKC_DTYPE_UINT8)
#define F32 CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32)

/* The format flag (0 e4m3fn, 1 e5m2) and a non-empty first tensor, which every
 * op checks the same way (Python returns empty results without a call). */
static ckc_status
check_common(const ckc_op_args *a, int flag_idx, ckc_error *err)
{
    if (a->t[0].numel == 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': empty tensor", a->sig->tensors[0].name);
    }
    if (a->i[flag_idx] != 0 && a->i[flag_idx] != 1) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'e5m2': %lld is not 0 (e4m3fn) or 1 (e5m2)",
                        (long long)a->i[flag_idx]);
    }
    return CKC_OK;
}

/* ---- quantize_per_tensor_fp8(x, scale, q; e5m2) ---- */

enum { QF_X, QF_SCALE, QF_Q };

static ckc_status
prepare_fp8_quant(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *x = &a->t[QF_X];
    ckc_quantize_per_tensor_fp8_params *p = &params->quantize_per_tensor_fp8;
    CKC_TRY(check_common(a, 0, err));
    CKC_TRY(ckc_check_numel(a, QF_SCALE, 1, err));
    CKC_TRY(ckc_check_shape(a, QF_Q, x->ndim, x->shape, err));
    p->x = x->data;
    p->kind = ckc_float_kind_of(x->dtype);
    p->numel = x->numel;
    p->scale = (const float *)a->t[QF_SCALE].data;
    p->q = (uint8_t *)a->t[QF_Q].data;
    p->e5m2 = (int)a->i[0];
    return CKC_OK;
}

const ckc_op_spec ckc_op_quantize_per_tensor_fp8 = {
    .sig = {"quantize_per_tensor_fp8", 3,
            {{"x", CKC_FLOATS, 0},
             {"scale", F32, 0},
             {"q", U8, CKC_ARG_OUTPUT}},
            1, {"e5m2"}},
    .doc = "quantize_per_tensor_fp8(op, x, scale, q, e5m2, stream, nthreads)\n--\n\n"
           "FP8 codes (e4m3fn, or e5m2 when e5m2=1) of clamp(x * (1/scale in x's type), -max, max)\n"
           "into the uint8 tensor q of x's shape; scale: one float32.",
    .prepare = prepare_fp8_quant,
    .cpu = ckc_cpu_entry_quantize_per_tensor_fp8,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_quantize_per_tensor_fp8),
};

/* ---- dequantize_per_tensor_fp8(x, scale, out; e5m2) ---- */

enum { DF_X, DF_SCALE, DF_OUT };

static ckc_status
prepare_fp8_dequant(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *x = &a->t[DF_X];
    ckc_dequantize_per_tensor_fp8_params *p = &params->dequantize_per_tensor_fp8;
    CKC_TRY(check_common(a, 0, err));
    CKC_TRY(ckc_check_numel(a, DF_SCALE, 1, err));
    CKC_TRY(ckc_check_shape(a, DF_OUT, x->ndim, x->shape, err));
    p->x = (const uint8_t *)x->data;
    p->e5m2 = (int)a->i[0];
    p->numel = x->numel;
    p->scale = (const float *)a->t[DF_SCALE].data;
    p->out = a->t[DF_OUT].data;
    p->out_kind = ckc_float_kind_of(a->t[DF_OUT].dtype);
    return CKC_OK;
}

const ckc_op_spec ckc_op_dequantize_per_tensor_fp8 = {
    .sig = {"dequantize_per_tensor_fp8", 3,
            {{"x", U8, 0},
             {"scale", F32, 0},
             {"out", CKC_FLOATS, CKC_ARG_OUTPUT}},
            1, {"e5m2"}},
    .doc = "dequantize_per_tensor_fp8(op, x, scale, out, e5m2, stream, nthreads)\n--\n\n"
           "Values of the FP8 codes x (e4m3fn, or e5m2 when e5m2=1) times scale (one float32),\n"
           "the scale rounded to out's dtype first, into out of x's shape.",
    .prepare = prepare_fp8_dequant,
    .cpu = ckc_cpu_entry_dequantize_per_tensor_fp8,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_dequantize_per_tensor_fp8),
};

/* ---- stochastic_rounding_fp8(x, rng, q; e5m2) ---- */

enum { SF_X, SF_RNG, SF_Q };

static ckc_status
prepare_fp8_stochastic(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *x = &a->t[SF_X];
    ckc_stochastic_rounding_fp8_params *p = &params->stochastic_rounding_fp8;
    CKC_TRY(check_common(a, 0, err));
    CKC_TRY(ckc_check_shape(a, SF_RNG, x->ndim, x->shape, err));
    CKC_TRY(ckc_check_shape(a, SF_Q, x->ndim, x->shape, err));
    p->x = x->data;
    p->kind = ckc_float_kind_of(x->dtype);
    p->numel = x->numel;
    p->rng = (const uint8_t *)a->t[SF_RNG].data;
    p->q = (uint8_t *)a->t[SF_Q].data;
    p->e5m2 = (int)a->i[0];
    return CKC_OK;
}

const ckc_op_spec ckc_op_stochastic_rounding_fp8 = {
    .sig = {"stochastic_rounding_fp8", 3,
            {{"x", CKC_FLOATS, 0},
             {"rng", U8, 0},
             {"q", U8, CKC_ARG_OUTPUT}},
            1, {"e5m2"}},
    .doc = "stochastic_rounding_fp8(op, x, rng, q, e5m2, stream, nthreads)\n--\n\n"
           "FP8 codes (e4m3fn, or e5m2 when e5m2=1) of x rounded stochastically as eager does:\n"
           "x as float16, its mantissa floored after adding rng/256 (rng: uint8, x's shape).",
    .prepare = prepare_fp8_stochastic,
    .cpu = ckc_cpu_entry_stochastic_rounding_fp8,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_stochastic_rounding_fp8),
};
