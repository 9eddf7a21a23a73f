/* SPDX-License-Identifier: Apache-2.0 */
/* Host logic of the ConvRot W4A4 family: each op's spec and the check of its
 * arguments into its parameter block.  Packed int4 tensors travel as uint8
 * (two codes per byte, math/int4.h); rows are the last dimension. */
#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "math/int4.h"
#include "op.h"

#define U8 CKC_DTYPE_BIT(CKC_DTYPE_UINT8)
#define I8 CKC_DTYPE_BIT(CKC_DTYPE_INT8)
#define F32 CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32)

/* A packed matrix of `rows` rows of cols / 2 bytes. */
static ckc_status
check_packed(const ckc_op_args *a, int idx, int64_t rows, int64_t cols, ckc_error *err)
{
    const int64_t shape[2] = {rows, cols / 2};
    return ckc_check_shape(a, idx, 2, shape, err);
}

/* An even row length (two codes per byte). */
static ckc_status
check_even(const ckc_op_args *a, int idx, int64_t cols, ckc_error *err)
{
    if (cols % 2 != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': row length %lld is odd (two int4 codes per byte)",
                        a->sig->tensors[idx].name, (long long)cols);
    }
    return CKC_OK;
}

/* The values' rows (tensor `values`, [rows, cols], cols even), their packed codes (`codes`) and
 * one scale per row (`scale`): the quantizer's and the dequantizer's common shapes. */
static ckc_status
check_rows_codes_scales(const ckc_op_args *a, int values, int codes, int scale, int64_t *rows, int64_t *cols,
                        ckc_error *err)
{
    CKC_TRY(ckc_check_rows(a, values, rows, cols, err));
    CKC_TRY(check_even(a, values, *cols, err));
    CKC_TRY(check_packed(a, codes, *rows, *cols, err));
    return ckc_check_numel(a, scale, *rows, err);
}

/* ---- quantize_convrot_w4a4_weight(x, q, scale, noise; group) ---- */

enum { QW_X, QW_Q, QW_SCALE, QW_NOISE };

static ckc_status
prepare_w4a4_quant(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *x = &a->t[QW_X];
    const int noise = a->present[QW_NOISE];
    int64_t rows;
    int64_t cols;
    CKC_TRY(check_rows_codes_scales(a, QW_X, QW_Q, QW_SCALE, &rows, &cols, err));
    CKC_TRY(noise ? ckc_check_same_dtype(a, QW_NOISE, QW_X, err) : CKC_OK);
    CKC_TRY(noise ? ckc_check_shape(a, QW_NOISE, x->ndim, x->shape, err) : CKC_OK);
    CKC_TRY(a->i[0] != 0 ? ckc_check_group("convrot_groupsize", a->i[0], cols, err) : CKC_OK);
    params->quantize_convrot_w4a4_weight = (ckc_quantize_convrot_w4a4_weight_params){
        .x = x->data, .rows = rows, .cols = cols, .kind = ckc_float_kind_of(x->dtype), .group = a->i[0],
        .noise = noise ? a->t[QW_NOISE].data : NULL, .q = (uint8_t *)a->t[QW_Q].data,
        .scale = (float *)a->t[QW_SCALE].data};
    return CKC_OK;
}

const ckc_op_spec ckc_op_quantize_convrot_w4a4_weight = {
    .sig = {"quantize_convrot_w4a4_weight", 4,
            {{"x", CKC_FLOATS, 0},
             {"q", U8, CKC_ARG_OUTPUT},
             {"scale", F32, CKC_ARG_OUTPUT},
             {"noise", CKC_FLOATS, CKC_ARG_OPTIONAL}},
            1, {"group"}},
    .doc = "quantize_convrot_w4a4_weight(op, x, q, scale, noise, group, stream, nthreads)\n--\n\n"
           "Row-wise signed int4 quantization of x[..., K] (codes in [-7, 7], two per byte of\n"
           "q [rows, K / 2], the even column low) with one float32 scale per row; rotates each\n"
           "group of K first when group > 0; noise (x's shape, or None) selects stochastic rounding.",
    .prepare = prepare_w4a4_quant,
    .cpu = ckc_cpu_entry_quantize_convrot_w4a4_weight,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_quantize_convrot_w4a4_weight),
};

/* ---- dequantize_convrot_w4a4_weight(q, scale, out; group) ---- */

enum { DW_Q, DW_SCALE, DW_OUT };

static ckc_status
prepare_w4a4_dequant(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    int64_t rows;
    int64_t cols;
    CKC_TRY(check_rows_codes_scales(a, DW_OUT, DW_Q, DW_SCALE, &rows, &cols, err));
    CKC_TRY(ckc_check_group("convrot_groupsize", a->i[0], cols, err));
    params->dequantize_convrot_w4a4_weight = (ckc_dequantize_convrot_w4a4_weight_params){
        .q = (const uint8_t *)a->t[DW_Q].data, .scale = (const float *)a->t[DW_SCALE].data,
        .out = a->t[DW_OUT].data, .out_kind = ckc_float_kind_of(a->t[DW_OUT].dtype), .rows = rows, .cols = cols,
        .group = a->i[0]};
    return CKC_OK;
}

const ckc_op_spec ckc_op_dequantize_convrot_w4a4_weight = {
    .sig = {"dequantize_convrot_w4a4_weight", 3,
            {{"q", U8, 0},
             {"scale", F32, 0},
             {"out", CKC_FLOATS, CKC_ARG_OUTPUT}},
            1, {"group"}},
    .doc = "dequantize_convrot_w4a4_weight(op, q, scale, out, group, stream, nthreads)\n--\n\n"
           "out[rows, K] = each group of (signed int4 codes of q [rows, K / 2] times the row's\n"
           "float32 scale) rotated back by the regular Hadamard matrix, in out's dtype.",
    .prepare = prepare_w4a4_dequant,
    .cpu = ckc_cpu_entry_dequantize_convrot_w4a4_weight,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_dequantize_convrot_w4a4_weight),
};

/* ---- prepare_int4_weight_for_int8_linear(q, out) ---- */

enum { UW_Q, UW_OUT };

static ckc_status
prepare_w4a4_unpack(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    ckc_prepare_int4_weight_for_int8_linear_params *p = &params->prepare_int4_weight_for_int8_linear;
    int64_t shape[2];
    CKC_TRY(ckc_check_rows(a, UW_Q, &p->rows, &p->cols, err));
    shape[0] = p->rows;
    shape[1] = 2 * p->cols;
    CKC_TRY(ckc_check_shape(a, UW_OUT, 2, shape, err));
    p->q = (const uint8_t *)a->t[UW_Q].data;
    p->out = (int8_t *)a->t[UW_OUT].data;
    return CKC_OK;
}

const ckc_op_spec ckc_op_prepare_int4_weight_for_int8_linear = {
    .sig = {"prepare_int4_weight_for_int8_linear", 2,
            {{"q", U8, 0},
             {"out", I8, CKC_ARG_OUTPUT}},
            0, {NULL}},
    .doc = "prepare_int4_weight_for_int8_linear(op, q, out, stream, nthreads)\n--\n\n"
           "The signed nibbles of q [rows, C] (low first) as int8 values in out [rows, 2C].",
    .prepare = prepare_w4a4_unpack,
    .cpu = ckc_cpu_entry_prepare_int4_weight_for_int8_linear,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_prepare_int4_weight_for_int8_linear),
};

/* ---- convrot_w4a4_linear(a, x_scale, w, w_scale, bias, acc, out) ---- */

enum { LW_A, LW_XS, LW_W, LW_WS, LW_BIAS, LW_ACC, LW_OUT };

static ckc_status
prepare_w4a4_linear(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    ckc_convrot_w4a4_linear_params *p = &params->convrot_w4a4_linear;
    int64_t bytes;
    int64_t shape[2];
    CKC_TRY(ckc_check_rows(a, LW_A, &p->m, &bytes, err));
    CKC_TRY(ckc_check_rows(a, LW_W, &p->n, &bytes, err));
    p->k = 2 * bytes;
    CKC_TRY(check_packed(a, LW_A, p->m, p->k, err));
    if (p->k > CKC_INT4_MAX_K) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'w': K = %lld is above %d (the exact accumulation's bound)",
                        (long long)p->k, CKC_INT4_MAX_K);
    }
    CKC_TRY(ckc_check_numel(a, LW_XS, p->m, err));
    CKC_TRY(ckc_check_numel(a, LW_WS, p->n, err));
    if (a->present[LW_BIAS]) {
        CKC_TRY(ckc_check_numel(a, LW_BIAS, p->n, err));
    }
    shape[0] = p->m;
    shape[1] = p->n;
    CKC_TRY(ckc_check_shape(a, LW_OUT, 2, shape, err));
    p->acc = NULL;
    if (a->present[LW_ACC]) {
        if (a->exec.gpu) {
            return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'acc': the GPU kernel accumulates itself (CPU only)");
        }
        CKC_TRY(ckc_check_shape(a, LW_ACC, 2, shape, err));
        p->acc = (const int32_t *)a->t[LW_ACC].data;
    }
    p->a = (const uint8_t *)a->t[LW_A].data;
    p->x_scale = (const float *)a->t[LW_XS].data;
    p->w = (const uint8_t *)a->t[LW_W].data;
    p->w_scale = a->t[LW_WS].data;
    p->w_scale_kind = ckc_float_kind_of(a->t[LW_WS].dtype);
    p->bias = a->present[LW_BIAS] ? a->t[LW_BIAS].data : NULL;
    p->bias_kind = a->present[LW_BIAS] ? ckc_float_kind_of(a->t[LW_BIAS].dtype) : CKC_F32;
    p->out = a->t[LW_OUT].data;
    p->out_kind = ckc_float_kind_of(a->t[LW_OUT].dtype);
    return CKC_OK;
}

const ckc_op_spec ckc_op_convrot_w4a4_linear = {
    .sig = {"convrot_w4a4_linear", 7,
            {{"a", U8, 0},
             {"x_scale", F32, 0},
             {"w", U8, 0},
             {"w_scale", CKC_FLOATS, 0},
             {"bias", CKC_FLOATS, CKC_ARG_OPTIONAL},
             {"acc", CKC_DTYPE_BIT(CKC_DTYPE_INT32), CKC_ARG_OPTIONAL},
             {"out", CKC_FLOATS, CKC_ARG_OUTPUT}},
            0, {NULL}},
    .doc = "convrot_w4a4_linear(op, a, x_scale, w, w_scale, bias, acc, out, stream, nthreads)\n--\n\n"
           "out[m, n] = eager's int4_linear: sum_k a[m, k] w[n, k] over packed signed int4 codes\n"
           "(a [m, K / 2], w [n, K / 2]), exact, rounded to out's dtype, times x_scale[m] and\n"
           "w_scale[n], plus bias[n] (or None), each rounded to out's dtype as eager's tensor ops.\n"
           "acc (CPU only, int32 [m, n], or None): those sums given (a library's GEMM), the epilogue only.",
    .prepare = prepare_w4a4_linear,
    .cpu = ckc_cpu_entry_convrot_w4a4_linear,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_convrot_w4a4_linear),
};
