/* SPDX-License-Identifier: Apache-2.0 */
/* Host logic of the MXFP8 family: each op's spec and the check of its arguments
 * into its parameter block (the router, ops/route.c, runs the device's entry).
 * Codes and E8M0 scales reach C as their bytes (uint8). */
#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "math/mxfp8.h"
#include "op.h"

#define U8 CKC_DTYPE_BIT(CKC_DTYPE_UINT8)

/* The swizzled scale buffer of a [rows, cols] code matrix. */
static ckc_status
check_scales(const ckc_op_args *a, int idx, int64_t rows, int64_t cols, ckc_error *err)
{
    const int64_t shape[2] = {ckc_nvfp4_scale_rows(rows), ckc_nvfp4_scale_cols(cols / CKC_MXFP8_BLOCK)};
    return ckc_check_shape(a, idx, 2, shape, err);
}

/* ---- quantize_mxfp8(x, qx, scales) ---- */

enum { QM_X, QM_QX, QM_SCALES };

static ckc_status
prepare_mxfp8_quant(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *x = &a->t[QM_X];
    const ckc_tensor *qx = &a->t[QM_QX];
    ckc_quantize_mxfp8_params *p = &params->quantize_mxfp8;
    if (x->ndim != 2 || qx->ndim != 2) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "arguments 'x', 'qx': expected 2 dimensions each, got %d and %d",
                        (int)x->ndim, (int)qx->ndim);
    }
    CKC_TRY(ckc_check_extent(a, QM_X, x->shape[0], x->shape[1], err));
    /* The output is x's shape, or x's shape padded to 32 (pad_32x); whole blocks of 32. */
    if ((qx->shape[0] != x->shape[0] && qx->shape[0] != ckc_round_up(x->shape[0], 32)) ||
        (qx->shape[1] != x->shape[1] && qx->shape[1] != ckc_round_up(x->shape[1], 32)) ||
        qx->shape[1] % CKC_MXFP8_BLOCK != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE,
                        "argument 'qx': shape (%lld, %lld) does not fit x of shape (%lld, %lld); "
                        "columns must be a multiple of 32 (or use pad_32x)",
                        (long long)qx->shape[0], (long long)qx->shape[1], (long long)x->shape[0],
                        (long long)x->shape[1]);
    }
    CKC_TRY(check_scales(a, QM_SCALES, qx->shape[0], qx->shape[1], err));
    p->x = x->data;
    p->kind = ckc_float_kind_of(x->dtype);
    p->rows = x->shape[0];
    p->cols = x->shape[1];
    p->out_rows = qx->shape[0];
    p->out_cols = qx->shape[1];
    p->qx = (uint8_t *)qx->data;
    p->scales = (uint8_t *)a->t[QM_SCALES].data;
    return CKC_OK;
}

const ckc_op_spec ckc_op_quantize_mxfp8 = {
    .sig = {"quantize_mxfp8", 3,
            {{"x", CKC_FLOATS, 0},
             {"qx", U8, CKC_ARG_OUTPUT},
             {"scales", U8, CKC_ARG_OUTPUT}},
            0, {NULL}},
    .doc = "quantize_mxfp8(op, x, qx, scales, stream, nthreads)\n--\n\n"
           "MXFP8 codes (e4m3fn) of x[rows, cols] into qx[R, C] (R, C = rows, cols, or both\n"
           "padded to 32) and E8M0 block scales (one per 32 values) into the swizzled buffer\n"
           "scales, whose padding entries get 0 (csrc/math/mxfp8.h).",
    .prepare = prepare_mxfp8_quant,
    .cpu = ckc_cpu_entry_quantize_mxfp8,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_quantize_mxfp8),
};

/* ---- dequantize_mxfp8(qx, scales, out) ---- */

enum { DM_QX, DM_SCALES, DM_OUT };

static ckc_status
prepare_mxfp8_dequant(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *qx = &a->t[DM_QX];
    ckc_dequantize_mxfp8_params *p = &params->dequantize_mxfp8;
    if (qx->ndim != 2) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'qx': expected 2 dimensions, got %d", (int)qx->ndim);
    }
    CKC_TRY(ckc_check_extent(a, DM_QX, qx->shape[0], qx->shape[1], err));
    if (qx->shape[1] % CKC_MXFP8_BLOCK != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'qx': %lld columns, not a multiple of 32",
                        (long long)qx->shape[1]);
    }
    CKC_TRY(check_scales(a, DM_SCALES, qx->shape[0], qx->shape[1], err));
    CKC_TRY(ckc_check_shape(a, DM_OUT, 2, qx->shape, err));
    p->qx = (const uint8_t *)qx->data;
    p->scales = (const uint8_t *)a->t[DM_SCALES].data;
    p->out = a->t[DM_OUT].data;
    p->out_kind = ckc_float_kind_of(a->t[DM_OUT].dtype);
    p->rows = qx->shape[0];
    p->cols = qx->shape[1];
    return CKC_OK;
}

const ckc_op_spec ckc_op_dequantize_mxfp8 = {
    .sig = {"dequantize_mxfp8", 3,
            {{"qx", U8, 0},
             {"scales", U8, 0},
             {"out", CKC_FLOATS, CKC_ARG_OUTPUT}},
            0, {NULL}},
    .doc = "dequantize_mxfp8(op, qx, scales, out, stream, nthreads)\n--\n\n"
           "Decodes MXFP8 codes qx[R, C] with swizzled E8M0 block scales into out[R, C].",
    .prepare = prepare_mxfp8_dequant,
    .cpu = ckc_cpu_entry_dequantize_mxfp8,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_dequantize_mxfp8),
};

/* ---- scaled_mm_mxfp8(a, b, scale_a, scale_b, bias, out) ----
 * The GPU's cuBLASLt GEMM only: on the CPU comfy_kitchen_c/mxfp8.py
 * dequantizes both operands (dequantize_mxfp8) and multiplies them. */

enum { XG_A, XG_B, XG_SA, XG_SB, XG_BIAS, XG_OUT };

static ckc_status
prepare_mxfp8_gemm(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *ta = &a->t[XG_A];
    const ckc_tensor *tb = &a->t[XG_B];
    ckc_scaled_mm_mxfp8_params *p = &params->scaled_mm_mxfp8;
    int64_t shape[2];
    if (ta->ndim != 2 || tb->ndim != 2) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "arguments 'a', 'b': expected 2 dimensions each");
    }
    CKC_TRY(ckc_check_extent(a, XG_A, ta->shape[0], ta->shape[1], err));
    CKC_TRY(ckc_check_extent(a, XG_B, tb->shape[0], tb->shape[1], err));
    p->m = ta->shape[0];
    p->n = tb->shape[0];
    p->k = ta->shape[1];
    if (tb->shape[1] != p->k || p->k % CKC_MXFP8_BLOCK != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'b': row length %lld must equal a's (%lld), "
                        "a multiple of 32", (long long)tb->shape[1], (long long)p->k);
    }
    CKC_TRY(check_scales(a, XG_SA, p->m, p->k, err));
    CKC_TRY(check_scales(a, XG_SB, p->n, p->k, err));
    shape[0] = p->m;
    shape[1] = p->n;
    CKC_TRY(ckc_check_shape(a, XG_OUT, 2, shape, err));
    if (a->present[XG_BIAS]) {
        CKC_TRY(ckc_check_numel(a, XG_BIAS, p->n, err));
        CKC_TRY(ckc_check_same_dtype(a, XG_BIAS, XG_OUT, err));
    }
    p->a = (const uint8_t *)ta->data;
    p->b = (const uint8_t *)tb->data;
    p->scale_a = (const uint8_t *)a->t[XG_SA].data;
    p->scale_b = (const uint8_t *)a->t[XG_SB].data;
    p->alpha_beta = NULL;
    p->bias = a->present[XG_BIAS] ? a->t[XG_BIAS].data : NULL;
    p->out = a->t[XG_OUT].data;
    p->out_kind = ckc_float_kind_of(a->t[XG_OUT].dtype);
    return CKC_OK;
}

const ckc_op_spec ckc_op_scaled_mm_mxfp8 = {
    .sig = {"scaled_mm_mxfp8", 7,
            {{"a", U8, 0},
             {"b", U8, 0},
             {"scale_a", U8, 0},
             {"scale_b", U8, 0},
             {"bias", CKC_FLOATS, CKC_ARG_OPTIONAL},
             {"out", CKC_FLOATS, CKC_ARG_OUTPUT},
             {"workspace", U8, CKC_ARG_OUTPUT | CKC_ARG_OPTIONAL | CKC_ARG_WORKSPACE}},
            0, {NULL}},
    .doc = "scaled_mm_mxfp8(op, a, b, scale_a, scale_b, bias, out, workspace, stream, nthreads)\n--\n\n"
           "out = dec(a) . dec(b)^T + bias: block-scaled MXFP8 GEMM on the GPU.",
    .prepare = prepare_mxfp8_gemm,
    .cpu = NULL,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_scaled_mm_mxfp8),
};
