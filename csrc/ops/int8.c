/* SPDX-License-Identifier: Apache-2.0 */
/* Host logic of the int8 family: each op's spec and the check of its arguments
 * into its parameter block (the router, ops/route.c, runs the device's entry).
 * The row quantizer takes x of any rank >= 1 as the matrix [numel / K, K] of
 * its last dimension K (ckc_check_rows), so the Python layer passes ComfyUI's
 * [B, T, C] activations as they are, without a reshape and views back. */
#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "op.h"

#define ONE_FLOAT CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32)

/* ---- quantize_int8_rowwise(x, q, scale, noise; group) ---- */

enum { RW_X, RW_Q, RW_SCALE, RW_NOISE };

static ckc_status
prepare_int8_rowwise(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *x = &a->t[RW_X];
    ckc_quantize_int8_rowwise_params *p = &params->quantize_int8_rowwise;
    CKC_TRY(ckc_check_rows(a, RW_X, &p->rows, &p->cols, err));
    CKC_TRY(ckc_check_shape(a, RW_Q, x->ndim, x->shape, err));
    CKC_TRY(ckc_check_numel(a, RW_SCALE, p->rows, err));
    if (a->present[RW_NOISE]) {
        CKC_TRY(ckc_check_same_dtype(a, RW_NOISE, RW_X, err));
        CKC_TRY(ckc_check_shape(a, RW_NOISE, x->ndim, x->shape, err));
    }
    if (a->i[0] != 0) {
        CKC_TRY(ckc_check_group("group_size", a->i[0], p->cols, err));
    }
    p->x = x->data;
    p->kind = ckc_float_kind_of(x->dtype);
    p->group = a->i[0];
    p->noise = a->present[RW_NOISE] ? a->t[RW_NOISE].data : NULL;
    p->q = (int8_t *)a->t[RW_Q].data;
    p->scale = (float *)a->t[RW_SCALE].data;
    return CKC_OK;
}

const ckc_op_spec ckc_op_quantize_int8_rowwise = {
    .sig = {"quantize_int8_rowwise", 4,
            {{"x", CKC_FLOATS, 0},
             {"q", CKC_DTYPE_BIT(CKC_DTYPE_INT8), CKC_ARG_OUTPUT},
             {"scale", ONE_FLOAT, CKC_ARG_OUTPUT},
             {"noise", CKC_FLOATS, CKC_ARG_OPTIONAL}},
            1, {"group"}},
    .doc = "quantize_int8_rowwise(op, x, q, scale, noise, group, stream, nthreads)\n--\n\n"
           "Row-wise int8 quantization of x[..., K] into q (x's shape) and one scale per row\n"
           "of K; rotates each group of K first when group > 0; noise (x's shape, or None)\n"
           "selects stochastic rounding.",
    .prepare = prepare_int8_rowwise,
    .cpu = ckc_cpu_entry_quantize_int8_rowwise,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_quantize_int8_rowwise),
};

/* ---- quantize_int8_tensorwise(x, q, scale, noise; compute_scale) ---- */

enum { TW_X, TW_Q, TW_SCALE, TW_NOISE };

static ckc_status
prepare_int8_tensorwise(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *x = &a->t[TW_X];
    ckc_quantize_int8_tensorwise_params *p = &params->quantize_int8_tensorwise;
    if (x->numel == 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'x': empty tensor");
    }
    CKC_TRY(ckc_check_shape(a, TW_Q, x->ndim, x->shape, err));
    CKC_TRY(ckc_check_numel(a, TW_SCALE, 1, err));
    if (a->present[TW_NOISE]) {
        CKC_TRY(ckc_check_same_dtype(a, TW_NOISE, TW_X, err));
        CKC_TRY(ckc_check_shape(a, TW_NOISE, x->ndim, x->shape, err));
    }
    p->x = x->data;
    p->kind = ckc_float_kind_of(x->dtype);
    p->numel = x->numel;
    p->noise = a->present[TW_NOISE] ? a->t[TW_NOISE].data : NULL;
    p->compute_scale = a->i[0] != 0;
    p->scale = (float *)a->t[TW_SCALE].data;
    p->q = (int8_t *)a->t[TW_Q].data;
    return CKC_OK;
}

const ckc_op_spec ckc_op_quantize_int8_tensorwise = {
    .sig = {"quantize_int8_tensorwise", 4,
            {{"x", CKC_FLOATS, 0},
             {"q", CKC_DTYPE_BIT(CKC_DTYPE_INT8), CKC_ARG_OUTPUT},
             {"scale", ONE_FLOAT, CKC_ARG_OUTPUT},
             {"noise", CKC_FLOATS, CKC_ARG_OPTIONAL}},
            1, {"compute_scale"}},
    .doc = "quantize_int8_tensorwise(op, x, q, scale, noise, compute_scale, stream, nthreads)\n--\n\n"
           "Tensor-wise int8 quantization of x into q with the one-element float32 scale;\n"
           "compute_scale=1 first sets scale to max(absmax(x) / 127, 1e-30).",
    .prepare = prepare_int8_tensorwise,
    .cpu = ckc_cpu_entry_quantize_int8_tensorwise,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_quantize_int8_tensorwise),
};

/* ---- rotate_int8_convrot_weight(x, out; group) ---- */

enum { ROT_X, ROT_OUT };

static ckc_status
prepare_rotate_rows(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *x = &a->t[ROT_X];
    ckc_rotate_int8_convrot_weight_params *p = &params->rotate_int8_convrot_weight;
    if (x->ndim != 2) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'weight': expected 2 dimensions, got %d", (int)x->ndim);
    }
    CKC_TRY(ckc_check_extent(a, ROT_X, x->shape[0], x->shape[1], err));
    CKC_TRY(ckc_check_same_dtype(a, ROT_OUT, ROT_X, err));
    CKC_TRY(ckc_check_shape(a, ROT_OUT, 2, x->shape, err));
    CKC_TRY(ckc_check_group("group_size", a->i[0], x->shape[1], err));
    p->x = x->data;
    p->out = a->t[ROT_OUT].data;
    p->kind = ckc_float_kind_of(x->dtype);
    p->rows = x->shape[0];
    p->cols = x->shape[1];
    p->group = a->i[0];
    return CKC_OK;
}

const ckc_op_spec ckc_op_rotate_int8_convrot_weight = {
    .sig = {"rotate_int8_convrot_weight", 2,
            {{"weight", CKC_FLOATS, 0},
             {"out", CKC_FLOATS, CKC_ARG_OUTPUT}},
            1, {"group"}},
    .doc = "rotate_int8_convrot_weight(op, weight, out, group, stream, nthreads)\n--\n\n"
           "out = weight with each group of columns rotated by the regular Hadamard matrix.",
    .prepare = prepare_rotate_rows,
    .cpu = ckc_cpu_entry_rotate_int8_convrot_weight,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_rotate_int8_convrot_weight),
};

/* ---- dequantize_int8_convrot_weight_dtype(q, scale, out; scale_mode, group) ---- */

enum { DQ_Q, DQ_SCALE, DQ_OUT };

/* The scale's element count for a scale mode over q rows of cols. */
static ckc_status
check_scale(const ckc_op_args *a, int idx, int64_t mode, int64_t rows, int64_t cols, ckc_error *err)
{
    if (mode == CKC_SCALE_SCALAR) {
        return ckc_check_numel(a, idx, 1, err);
    }
    if (mode == CKC_SCALE_PER_ROW) {
        return ckc_check_numel(a, idx, rows, err);
    }
    if (mode == CKC_SCALE_FULL) {
        return ckc_check_numel(a, idx, rows * cols, err);
    }
    return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'scale_mode': unknown mode %lld", (long long)mode);
}

/* q of the two dequantizers: [q_rows, cols] within the limits (checked before
 * each op's own check of out, which reads q's shape). */
static ckc_status
check_codes(const ckc_op_args *a, int iq, ckc_error *err)
{
    const ckc_tensor *q = &a->t[iq];
    if (q->ndim != 2) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'q': expected 2 dimensions, got %d", (int)q->ndim);
    }
    return ckc_check_extent(a, iq, q->shape[0], q->shape[1], err);
}

/* The rest the two dequantizers share: the scale of q's rows and the group
 * checked, the block filled for `rows` output rows read from q's rows in order
 * (the embedding then sets the rows' index). */
static ckc_status
fill_dequant(const ckc_op_args *a, int iq, int iscale, int iout, int64_t rows,
             ckc_dequantize_int8_convrot_weight_dtype_params *p, ckc_error *err)
{
    const ckc_tensor *q = &a->t[iq];
    const int64_t mode = a->i[0];
    CKC_TRY(check_scale(a, iscale, mode, q->shape[0], q->shape[1], err));
    if (a->i[1] != 0) {
        CKC_TRY(ckc_check_group("group_size", a->i[1], q->shape[1], err));
    }
    p->q = (const int8_t *)q->data;
    p->scale = (const float *)a->t[iscale].data;
    p->scale_mode = (ckc_scale_mode)mode;
    p->out = a->t[iout].data;
    p->out_kind = ckc_float_kind_of(a->t[iout].dtype);
    p->rows = rows;
    p->cols = q->shape[1];
    p->group = a->i[1];
    p->index = NULL;
    p->index_is_64 = 0;
    p->q_rows = q->shape[0];
    return CKC_OK;
}

static ckc_status
prepare_int8_dequant(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *q = &a->t[DQ_Q];
    CKC_TRY(check_codes(a, DQ_Q, err));
    CKC_TRY(ckc_check_shape(a, DQ_OUT, 2, q->shape, err));
    return fill_dequant(a, DQ_Q, DQ_SCALE, DQ_OUT, q->shape[0], &params->dequantize_int8_convrot_weight_dtype, err);
}

const ckc_op_spec ckc_op_dequantize_int8_convrot_weight_dtype = {
    .sig = {"dequantize_int8_convrot_weight_dtype", 3,
            {{"q", CKC_DTYPE_BIT(CKC_DTYPE_INT8), 0},
             {"scale", ONE_FLOAT, 0},
             {"out", CKC_FLOATS, CKC_ARG_OUTPUT}},
            2, {"scale_mode", "group"}},
    .doc = "dequantize_int8_convrot_weight_dtype(op, q, scale, out, scale_mode, group, stream, nthreads)\n--\n\n"
           "out = q * scale (scale_mode 0 scalar, 1 per row, 2 per element), then rotated\n"
           "group-wise when group > 0; rounded once to out's dtype.",
    .prepare = prepare_int8_dequant,
    .cpu = ckc_cpu_entry_dequantize_int8_convrot_weight_dtype,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_dequantize_int8_convrot_weight_dtype),
};

/* ---- dequantize_int8_embedding(q, scale, indices, out; scale_mode, group) ----
 * dequantize_int8_embedding: out[r, :] = q[indices[r], :] * its scale, rotated
 * back when group > 0; out holds indices.numel() rows of q's columns. */

enum { EM_Q, EM_SCALE, EM_INDICES, EM_OUT };

static ckc_status
prepare_int8_embedding(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *q = &a->t[EM_Q];
    const ckc_tensor *idx = &a->t[EM_INDICES];
    ckc_dequantize_int8_convrot_weight_dtype_params *p = &params->dequantize_int8_convrot_weight_dtype;
    CKC_TRY(check_codes(a, EM_Q, err));
    CKC_TRY(ckc_check_extent(a, EM_OUT, idx->numel, q->shape[1], err));
    CKC_TRY(ckc_check_numel(a, EM_OUT, idx->numel * q->shape[1], err));
    CKC_TRY(fill_dequant(a, EM_Q, EM_SCALE, EM_OUT, idx->numel, p, err));
    p->index = idx->data;
    p->index_is_64 = idx->dtype == CKC_DTYPE_INT64;
    return CKC_OK;
}

/* The dequantizer's entries: an index is part of its parameters. */
const ckc_op_spec ckc_op_dequantize_int8_embedding = {
    .sig = {"dequantize_int8_embedding", 4,
            {{"q", CKC_DTYPE_BIT(CKC_DTYPE_INT8), 0},
             {"scale", ONE_FLOAT, 0},
             {"indices", CKC_DTYPE_BIT(CKC_DTYPE_INT32) | CKC_DTYPE_BIT(CKC_DTYPE_INT64), 0},
             {"out", CKC_FLOATS, CKC_ARG_OUTPUT}},
            2, {"scale_mode", "group"}},
    .doc = "dequantize_int8_embedding(op, q, scale, indices, out, scale_mode, group, stream, nthreads)\n--\n\n"
           "out[r] = q[indices[r]] * scale (scale_mode 0 scalar, 1 per q row, 2 per element of q), then\n"
           "rotated group-wise when group > 0; rounded once to out's dtype.  An index out of range is an\n"
           "ArgumentError on the CPU and a NaN row on the GPU (no host sync to check it there).",
    .prepare = prepare_int8_embedding,
    .cpu = ckc_cpu_entry_dequantize_int8_convrot_weight_dtype,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_dequantize_int8_convrot_weight_dtype),
};
