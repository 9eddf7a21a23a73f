/* SPDX-License-Identifier: Apache-2.0 */
/* Host logic of the NVFP4 family: each op's spec and the check of its
 * arguments into its parameter block (the router, ops/route.c, runs the device's entry). */
#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "math/hadamard.h"
#include "math/nvfp4.h"
#include "op.h"

#define U8 CKC_DTYPE_BIT(CKC_DTYPE_UINT8)
#define F32 CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32)

/* Per-tensor scale and swizzled scale buffer agreement, shared by both ops. */
static ckc_status
check_scales(const ckc_op_args *a, int pts_idx, int scales_idx, int64_t rows, int64_t cols, ckc_error *err)
{
    const int64_t scale_shape[2] = {ckc_nvfp4_scale_rows(rows),
                                    ckc_nvfp4_scale_cols(cols / CKC_NVFP4_BLOCK)};
    CKC_TRY(ckc_check_numel(a, pts_idx, 1, err));
    return ckc_check_shape(a, scales_idx, 2, scale_shape, err);
}

/* ---- quantize_nvfp4(x, per_tensor_scale, qx, scales; hi_first, group) ----
 * group > 0: quantize_and_rotate_nvfp4, each group of columns rotated first. */

enum { QN_X, QN_PTS, QN_QX, QN_SCALES };

static ckc_status
prepare_nvfp4_quant(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *x = &a->t[QN_X];
    const ckc_tensor *qx = &a->t[QN_QX];
    ckc_quantize_nvfp4_params *p = &params->quantize_nvfp4;
    int64_t out_rows;
    int64_t out_cols;
    if (x->ndim != 2) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'x': expected 2 dimensions, got %d", (int)x->ndim);
    }
    CKC_TRY(ckc_check_extent(a, QN_X, x->shape[0], x->shape[1], err));
    if (qx->ndim != 2) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'qx': expected 2 dimensions, got %d", (int)qx->ndim);
    }
    out_rows = qx->shape[0];
    out_cols = 2 * qx->shape[1];
    /* The output is x's shape, or x's shape padded to 16 (pad_16x). */
    if ((out_rows != x->shape[0] && out_rows != ckc_round_up(x->shape[0], 16)) ||
        (out_cols != x->shape[1] && out_cols != ckc_round_up(x->shape[1], 16)) ||
        out_cols % CKC_NVFP4_BLOCK != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE,
                        "argument 'qx': shape (%lld, %lld) does not fit x of shape (%lld, %lld); "
                        "columns must be a multiple of 16 (or use pad_16x)",
                        (long long)qx->shape[0], (long long)qx->shape[1],
                        (long long)x->shape[0], (long long)x->shape[1]);
    }
    CKC_TRY(check_scales(a, QN_PTS, QN_SCALES, out_rows, out_cols, err));
    if (a->i[1] != 0) {
        if (ckc_hadamard_log4(a->i[1]) < 0 || a->i[1] < CKC_NVFP4_MIN_GROUP || a->i[1] > CKC_NVFP4_MAX_GROUP) {
            return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'group_size': %lld is not 16, 64 or 256",
                            (long long)a->i[1]);
        }
        /* Whole groups in every row, so no column is padded (cols % 16 == 0). */
        CKC_TRY(ckc_check_group("group_size", a->i[1], x->shape[1], err));
    }
    p->x = x->data;
    p->kind = ckc_float_kind_of(x->dtype);
    p->rows = x->shape[0];
    p->cols = x->shape[1];
    p->out_rows = out_rows;
    p->out_cols = out_cols;
    p->per_tensor_scale = (const float *)a->t[QN_PTS].data;
    p->qx = (uint8_t *)qx->data;
    p->scales = (uint8_t *)a->t[QN_SCALES].data;
    p->hi_first = a->i[0] != 0;
    p->group = a->i[1];
    return CKC_OK;
}

const ckc_op_spec ckc_op_quantize_nvfp4 = {
    .sig = {"quantize_nvfp4", 4,
            {{"x", CKC_FLOATS, 0},
             {"per_tensor_scale", F32, 0},
             {"qx", U8, CKC_ARG_OUTPUT},
             {"scales", U8, CKC_ARG_OUTPUT}},
            2, {"hi_first", "group"}},
    .doc = "quantize_nvfp4(op, x, per_tensor_scale, qx, scales, hi_first, group, stream, nthreads)\n--\n\n"
           "NVFP4 codes of x[rows, cols] into qx[R, C/2] (R, C = rows, cols, or both padded\n"
           "to 16) and e4m3 block scales into the swizzled buffer scales, whose padding\n"
           "entries get scale 0; with group 16, 64 or 256, each group of columns is rotated\n"
           "by the regular Hadamard matrix and rounded to x's dtype first.",
    .prepare = prepare_nvfp4_quant,
    .cpu = ckc_cpu_entry_quantize_nvfp4,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_quantize_nvfp4),
};

/* ---- dequantize_nvfp4(qx, per_tensor_scale, scales, out; hi_first) ---- */

enum { DN_QX, DN_PTS, DN_SCALES, DN_OUT };

static ckc_status
prepare_nvfp4_dequant(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *qx = &a->t[DN_QX];
    ckc_dequantize_nvfp4_params *p = &params->dequantize_nvfp4;
    int64_t out_shape[2];
    if (qx->ndim != 2) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'qx': expected 2 dimensions, got %d", (int)qx->ndim);
    }
    CKC_TRY(ckc_check_extent(a, DN_QX, qx->shape[0], 2 * qx->shape[1], err));
    out_shape[0] = qx->shape[0];
    out_shape[1] = 2 * qx->shape[1];
    if (out_shape[1] % CKC_NVFP4_BLOCK != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'qx': %lld packed columns hold %lld values, "
                        "not a multiple of 16", (long long)qx->shape[1], (long long)out_shape[1]);
    }
    CKC_TRY(check_scales(a, DN_PTS, DN_SCALES, out_shape[0], out_shape[1], err));
    CKC_TRY(ckc_check_shape(a, DN_OUT, 2, out_shape, err));
    p->qx = (const uint8_t *)qx->data;
    p->per_tensor_scale = (const float *)a->t[DN_PTS].data;
    p->scales = (const uint8_t *)a->t[DN_SCALES].data;
    p->out = a->t[DN_OUT].data;
    p->out_kind = ckc_float_kind_of(a->t[DN_OUT].dtype);
    p->rows = out_shape[0];
    p->cols = out_shape[1];
    p->hi_first = a->i[0] != 0;
    return CKC_OK;
}

const ckc_op_spec ckc_op_dequantize_nvfp4 = {
    .sig = {"dequantize_nvfp4", 4,
            {{"qx", U8, 0},
             {"per_tensor_scale", F32, 0},
             {"scales", U8, 0},
             {"out", CKC_FLOATS, CKC_ARG_OUTPUT}},
            1, {"hi_first"}},
    .doc = "dequantize_nvfp4(op, qx, per_tensor_scale, scales, out, hi_first, stream, nthreads)\n--\n\n"
           "Decodes NVFP4 codes qx[R, C/2] with swizzled e4m3 block scales into out[R, C].",
    .prepare = prepare_nvfp4_dequant,
    .cpu = ckc_cpu_entry_dequantize_nvfp4,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_dequantize_nvfp4),
};
