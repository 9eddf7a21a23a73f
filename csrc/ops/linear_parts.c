/* SPDX-License-Identifier: Apache-2.0 */
/* int8_linear on the CPU in two parts, with a library's int8 GEMM between them
 * (comfy_kitchen_c/linear.py calls torch._int_mm, oneDNN's VNNI/AMX kernels):
 * the quantizer of a chunk of rows (activation, ConvRot rotation, row-wise
 * int8) and the epilogue over the chunk's int32 accumulator (scales, bias,
 * residual form).  The same CPU code as the one-call op (cpu/linear.c) runs
 * both parts, so only the GEMM differs, and int32 sums of int8 products are
 * exact in any order: the results are the one-call op's, bit for bit.
 * CPU only (no GPU entry: the router refuses CUDA tensors and the emulated
 * device): the GPU's int8_linear is one call (linear.c).  Both parts fill
 * int8_linear's parameter block (contract/params.h) with all rows as one chunk. */
#include <string.h>

#include "cpu/cpu.h"
#include "linear_args.h"
#include "math/activation.h"
#include "op.h"

/* ---- int8_linear_quantize(x, q, x_scale, act_rows, act_weight, modulation; act, group, eps_bits,
 *                           norm_kind) ----
 * x [..., k * width(act)] by rows; q [rows, k] int8 and x_scale [rows] float32
 * receive the codes and scales; act_rows holds rows * k values of x's type
 * (the activated rows; required with an activation).  The activation's
 * arguments are int8_linear's (linear.c). */

enum { LQ_X, LQ_Q, LQ_SCALE, LQ_ACT_ROWS, LQ_ACT_WEIGHT, LQ_MODULATION };
enum { LQI_ACT, LQI_GROUP, LQI_EPS_BITS, LQI_NORM_KIND };

static ckc_status
prepare_int8_linear_quantize(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const int64_t act = a->i[LQI_ACT];
    ckc_int8_linear_params *p = &params->int8_linear;
    int64_t x_cols;
    int64_t shape[2];
    memset(p, 0, sizeof *p);
    if (act < CKC_ACT_NONE || act > CKC_ACT_LAST) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'act': unknown activation code %lld", (long long)act);
    }
    CKC_TRY(ckc_check_rows(a, LQ_X, &p->rows, &x_cols, err));
    if (x_cols % ckc_act_width((int)act) != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'x': a gated activation needs an even row length, got %lld",
                        (long long)x_cols);
    }
    p->x = a->t[LQ_X].data;
    p->kind = ckc_float_kind_of(a->t[LQ_X].dtype);
    p->x_stride = x_cols;
    p->act = (int)act;
    p->k = x_cols / ckc_act_width((int)act);
    p->group = a->i[LQI_GROUP];
    if (p->group != 0) {
        CKC_TRY(ckc_check_group("group", p->group, p->k, err));
    }
    shape[0] = p->rows;
    shape[1] = p->k;
    CKC_TRY(ckc_check_shape(a, LQ_Q, 2, shape, err));
    CKC_TRY(ckc_check_numel(a, LQ_SCALE, p->rows, err));
    CKC_TRY(ckc_linear_act_args_of(a, LQ_ACT_WEIGHT, LQ_MODULATION, a->i[LQI_EPS_BITS], a->i[LQI_NORM_KIND], p, err));
    if (p->act != CKC_ACT_NONE) {
        if (!a->present[LQ_ACT_ROWS]) {
            return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'act_rows' is required by this activation");
        }
        CKC_TRY(ckc_check_numel(a, LQ_ACT_ROWS, p->rows * p->k * ckc_kind_size(p->kind), err));
        p->act_rows = a->t[LQ_ACT_ROWS].data;
    }
    p->q = (int8_t *)a->t[LQ_Q].data;
    p->ldq = p->k;
    p->x_scale = (float *)a->t[LQ_SCALE].data;
    p->chunk_rows = p->rows;
    return CKC_OK;
}

const ckc_op_spec ckc_op_int8_linear_quantize = {
    .sig = {"int8_linear_quantize", 6,
            {{"x", CKC_FLOATS, 0},
             {"q", CKC_DTYPE_BIT(CKC_DTYPE_INT8), CKC_ARG_OUTPUT},
             {"x_scale", CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32), CKC_ARG_OUTPUT},
             {"act_rows", CKC_DTYPE_BIT(CKC_DTYPE_UINT8), CKC_ARG_OUTPUT | CKC_ARG_OPTIONAL},
             {"act_weight", CKC_FLOATS, CKC_ARG_OPTIONAL},
             {"modulation", CKC_FLOATS, CKC_ARG_OPTIONAL}},
            4, {"act", "group", "eps_bits", "norm_kind"}},
    .doc = "int8_linear_quantize(op, x, q, x_scale, act_rows, act_weight, modulation, act, group, eps_bits,\n"
           "                     norm_kind, stream, nthreads)\n"
           "--\n\n"
           "q, x_scale = rowwise_int8(rotate(act(x))): int8_linear's quantizer on the CPU, for a\n"
           "library GEMM after it (see csrc/ops/linear_parts.c).",
    .prepare = prepare_int8_linear_quantize,
    .cpu = ckc_cpu_entry_int8_linear_quantize,
    .gpu = NULL,
};

/* ---- int8_linear_epilogue(acc, x_scale, weight_scale, bias, residual, residual_scale, out) ----
 * acc [rows, n] int32 (contiguous), x_scale [rows], weight_scale 1 or n
 * float32 values; bias, residual and residual_scale as int8_linear's
 * (linear.c), residual with out's rows * n values; out [rows, n] by rows. */

enum { LE_ACC, LE_SCALE, LE_WS, LE_BIAS, LE_RESIDUAL, LE_RESIDUAL_SCALE, LE_OUT };

static ckc_status
prepare_int8_linear_epilogue(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *acc = &a->t[LE_ACC];
    ckc_int8_linear_params *p = &params->int8_linear;
    int64_t rows;
    memset(p, 0, sizeof *p);
    if (acc->ndim != 2) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'acc': expected 2 dimensions, got %d", (int)acc->ndim);
    }
    p->rows = acc->shape[0];
    p->n = acc->shape[1];
    CKC_TRY(ckc_check_rows(a, LE_OUT, &rows, &p->n, err));
    if (rows != p->rows || acc->shape[1] != p->n) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'out': expected %lld rows of %lld, got %lld of %lld",
                        (long long)acc->shape[0], (long long)acc->shape[1], (long long)rows, (long long)p->n);
    }
    CKC_TRY(ckc_check_extent(a, LE_OUT, p->rows, p->n, err));
    CKC_TRY(ckc_check_numel(a, LE_SCALE, p->rows, err));
    if (a->t[LE_WS].numel != 1) {
        CKC_TRY(ckc_check_numel(a, LE_WS, p->n, err));
    }
    CKC_TRY(ckc_linear_terms_of(a, LE_BIAS, LE_RESIDUAL, p, err));
    p->acc = (int32_t *)acc->data;
    p->ldacc = p->n;
    p->x_scale = (float *)a->t[LE_SCALE].data;
    p->w_scale = (const float *)a->t[LE_WS].data;
    p->w_per_channel = a->t[LE_WS].numel != 1;
    p->out = a->t[LE_OUT].data;
    p->out_kind = ckc_float_kind_of(a->t[LE_OUT].dtype);
    p->chunk_rows = p->rows;
    return CKC_OK;
}

const ckc_op_spec ckc_op_int8_linear_epilogue = {
    .sig = {"int8_linear_epilogue", 7,
            {{"acc", CKC_DTYPE_BIT(CKC_DTYPE_INT32), 0},
             {"x_scale", CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32), 0},
             {"weight_scale", CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32), 0},
             {"bias", CKC_FLOATS, CKC_ARG_OPTIONAL},
             {"residual", CKC_FLOATS, CKC_ARG_OPTIONAL},
             {"residual_scale", CKC_FLOATS, CKC_ARG_OPTIONAL},
             {"out", CKC_FLOATS, CKC_ARG_OUTPUT}},
            0, {NULL}},
    .doc = "int8_linear_epilogue(op, acc, x_scale, weight_scale, bias, residual, residual_scale, out, stream,\n"
           "                     nthreads)\n"
           "--\n\n"
           "out = acc * x_scale * weight_scale + bias (then residual + residual_scale * out):\n"
           "int8_linear's epilogue on the CPU over a library GEMM's accumulator (csrc/ops/linear_parts.c).",
    .prepare = prepare_int8_linear_epilogue,
    .cpu = ckc_cpu_entry_int8_linear_epilogue,
    .gpu = NULL,
};
