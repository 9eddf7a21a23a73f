/* SPDX-License-Identifier: Apache-2.0 */
/* Launchers of the int8 family's general kernels (kernels/int8.cu): row-wise
 * quantization (activated and rotated), the plain rotation, dequantization and
 * tensor-wise quantization.  The row-tile kernels take the calls they serve
 * first (launch_tile.c). */
#if defined(CKC_WITH_GPU)

#include <string.h>

#include "kernel.h"
#include "launch.h"
#include "launchers.h"

#define ROWWISE_SYM(k, c, a) CKC_KNAME3(int8_rowwise_kernel, k, c, a)
#define ROWWISE_DECL(k, c, a) CKC_EMU_THUNK_DECL(ROWWISE_SYM(k, c, a))
#define ROWWISE_ENTRY(k, c, a) CKC_KERNEL_ENTRY(int8_rowwise_kernel, "int8_rowwise", "int8", ROWWISE_SYM(k, c, a), k, c, a, 0)
CKC_INT8_ROWWISE_KERNELS(ROWWISE_DECL)
static ckc_kernel k_rowwise[] = {CKC_INT8_ROWWISE_KERNELS(ROWWISE_ENTRY)};

#define HADAMARD_SYM(k, c) CKC_KNAME2(hadamard_rows_kernel, k, c)
#define HADAMARD_DECL(k, c) CKC_EMU_THUNK_DECL(HADAMARD_SYM(k, c))
#define HADAMARD_ENTRY(k, c) CKC_KERNEL_ENTRY(hadamard_rows_kernel, "hadamard_rows", "int8", HADAMARD_SYM(k, c), k, c, 0, 0)
CKC_HADAMARD_ROWS_KERNELS(HADAMARD_DECL)
static ckc_kernel k_hadamard[] = {CKC_HADAMARD_ROWS_KERNELS(HADAMARD_ENTRY)};

/* The families with one instance per element kind. */
#define KIND_TABLE(family, log, k) CKC_KERNEL_ENTRY(family, log, "int8", CKC_KNAME1(family, k), k, 0, 0, 0)
#define DEQUANT_DECL(k) CKC_EMU_THUNK_DECL(CKC_KNAME1(int8_dequant_kernel, k))
#define DEQUANT_ENTRY(k) KIND_TABLE(int8_dequant_kernel, "int8_dequant", k)
#define ROTATED_DECL(k) CKC_EMU_THUNK_DECL(CKC_KNAME1(int8_dequant_rotated_kernel, k))
#define ROTATED_ENTRY(k) KIND_TABLE(int8_dequant_rotated_kernel, "int8_dequant_rotated", k)
#define ABSMAX_DECL(k) CKC_EMU_THUNK_DECL(CKC_KNAME1(tensor_absmax_kernel, k))
#define ABSMAX_ENTRY(k) KIND_TABLE(tensor_absmax_kernel, "tensor_absmax", k)
#define TQUANT_DECL(k) CKC_EMU_THUNK_DECL(CKC_KNAME1(tensor_quantize_kernel, k))
#define TQUANT_ENTRY(k) KIND_TABLE(tensor_quantize_kernel, "tensor_quantize", k)
CKC_KIND_KERNELS(DEQUANT_DECL)
CKC_KIND_KERNELS(ROTATED_DECL)
CKC_KIND_KERNELS(ABSMAX_DECL)
CKC_KIND_KERNELS(TQUANT_DECL)
CKC_EMU_THUNK_DECL(tensor_scale_kernel)
#define WALK_SYM(k, r) CKC_KNAME2(int8_dequant_walk_kernel, k, r)
#define WALK_DECL(k, r) CKC_EMU_THUNK_DECL(WALK_SYM(k, r))
#define WALK_ENTRY(k, r) CKC_KERNEL_ENTRY(int8_dequant_walk_kernel, "int8_dequant_walk", "int8", WALK_SYM(k, r), k, r, 0, 0)
CKC_DEQUANT_WALK_KERNELS(WALK_DECL)
static ckc_kernel k_dequant_walk[] = {CKC_DEQUANT_WALK_KERNELS(WALK_ENTRY)};
static ckc_kernel k_dequant[] = {CKC_KIND_KERNELS(DEQUANT_ENTRY)};
static ckc_kernel k_dequant_rotated[] = {CKC_KIND_KERNELS(ROTATED_ENTRY)};
static ckc_kernel k_tensor_absmax[] = {CKC_KIND_KERNELS(ABSMAX_ENTRY)};
static ckc_kernel k_tensor_quantize[] = {CKC_KIND_KERNELS(TQUANT_ENTRY)};
static ckc_kernel k_tensor_scale[] = {
    CKC_KERNEL_ENTRY(tensor_scale_kernel, "tensor_scale_kernel", "int8", tensor_scale_kernel, 0, 0, 0, 0)};

/* Chunks per thread for rows of `cols` values, at most `most` (2 or CKC_MAX_CHUNKS). */
static int
chunks_for(int64_t cols, int most)
{
    const int64_t needed = (cols + CKC_ROW_SEGMENT(1) - 1) / CKC_ROW_SEGMENT(1);
    return needed <= 1 ? 1 : (needed <= 2 ? 2 : most);
}

/* The instance's activation: the column-wise ones share one (lay->args.act). */
static int
instance_act(int act)
{
    switch (act) {
    case CKC_ACT_GELU_TANH:
    case CKC_ACT_SWIGLU:
    case CKC_ACT_SITU:
        return act;
    case CKC_ACT_RMS_NORM:
    case CKC_ACT_MODULATE:
    case CKC_ACT_RMS_MODULATE:
        return CKC_ACT_COLUMNWISE;
    default:
        return CKC_ACT_NONE;
    }
}

/* ---- row-wise quantization (optionally activated and rotated) ---- */

/* Quantizes under the caller's device guard.  Plain rows take 1, 2 or the most
 * chunks per thread (float16: 2), activated rows one.  `done`: the op's
 * completion mark when this is its last kernel. */
static ckc_status
quantize_rows(const ckc_quantize_int8_rowwise_params *p, const ckc_row_layout *lay, uintptr_t stream,
              ckc_done_mark done,
              ckc_error *err)
{
    const int64_t elem = ckc_kind_size(p->kind);
    ckc_quantize_int8_rowwise_params params = *p;
    ckc_row_layout layout = *lay;
    bool vec = ckc_aligned16(p->x, lay->x_stride * elem) &&
               (ckc_act_width(lay->act) == 1 || (p->cols * elem) % 16 == 0) &&
               (p->noise == NULL || ckc_aligned16(p->noise, p->cols * elem));
    bool q_vec = ckc_aligned16(p->q, lay->q_stride);
    const int most = p->kind == CKC_F16 ? CKC_F16_QUANT_MAX_CHUNKS : CKC_MAX_CHUNKS;
    const int chunks = lay->act == CKC_ACT_NONE ? chunks_for(p->cols, most) : 1;
    ckc_status status;
    if (ckc_tile_quantize_rows(p, lay, stream, done, &status, err)) {
        return status;
    }
    const ckc_launch_cfg c = ckc_launch_1d(p->rows, CKC_ROW_THREADS, ckc_rotation_exchange_bytes(p->group), stream);
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(layout), CKC_KARG(vec), CKC_KARG(q_vec), CKC_KARG(done)};
    return CKC_LAUNCH_INSTANCE(k_rowwise, p->kind, chunks, instance_act(lay->act), 0, &c, args, err);
}

ckc_status
ckc_gpu_int8_quantize_rows(const ckc_quantize_int8_rowwise_params *p, const ckc_row_layout *lay, uintptr_t stream,
                           ckc_error *err)
{
    const ckc_done_mark none = {NULL, 0, NULL, NULL};
    if (lay->q_stride < p->cols || lay->q_stride > (p->cols + CKC_CHUNK - 1) / CKC_CHUNK * CKC_CHUNK) {
        return CKC_FAIL(err, CKC_ERR_RUNTIME, "row stride %lld of the codes is not in [%lld, roundup(%lld, 16)]",
                        (long long)lay->q_stride, (long long)p->cols, (long long)p->cols);
    }
    return quantize_rows(p, lay, stream, none, err); /* the first of int8_linear's kernels */
}

ckc_status
ckc_gpu_quantize_int8_rowwise(const ckc_quantize_int8_rowwise_params *p, ckc_exec *exec, ckc_error *err)
{
    ckc_row_layout lay;
    memset(&lay, 0, sizeof lay);
    lay.x_stride = p->cols;
    lay.q_stride = p->cols;
    lay.act = CKC_ACT_NONE;
    CKC_ON_DEVICE(exec, err, quantize_rows(p, &lay, exec->stream, ckc_exec_take_done_mark(exec), err));
}

/* ---- plain rotation (rotate_int8_convrot_weight) ---- */

static ckc_status
rotate_int8_convrot_weight(const ckc_rotate_int8_convrot_weight_params *p, ckc_exec *exec, ckc_error *err)
{
    const int64_t row_bytes = p->cols * ckc_kind_size(p->kind);
    ckc_rotate_int8_convrot_weight_params params = *p;
    bool vec = ckc_aligned16(p->x, row_bytes);
    bool out_vec = ckc_aligned16(p->out, row_bytes);
    ckc_done_mark done = ckc_exec_take_done_mark(exec);
    ckc_status status;
    if (ckc_tile_hadamard_rows(p, exec->stream, done, &status, err)) {
        return status;
    }
    const ckc_launch_cfg c =
        ckc_launch_1d(p->rows, CKC_ROW_THREADS, ckc_rotation_exchange_bytes(p->group), exec->stream);
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(vec), CKC_KARG(out_vec), CKC_KARG(done)};
    return CKC_LAUNCH_INSTANCE(k_hadamard, p->kind, chunks_for(p->cols, CKC_MAX_CHUNKS), 0, 0, &c, args, err);
}

ckc_status
ckc_gpu_rotate_int8_convrot_weight(const ckc_rotate_int8_convrot_weight_params *p, ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, rotate_int8_convrot_weight(p, exec, err));
}

/* ---- dequantization ---- */

/* With rotation: one block per row, (q * scale) * 1/sqrt(G), then the rotation. */
static ckc_status
dequant_rotated(const ckc_dequantize_int8_convrot_weight_dtype_params *p, ckc_done_mark done, uintptr_t stream,
                ckc_error *err)
{
    ckc_dequantize_int8_convrot_weight_dtype_params params = *p;
    ckc_dequant_vec vec;
    const ckc_launch_cfg c = ckc_launch_1d(p->rows, CKC_ROW_THREADS, ckc_rotation_exchange_bytes(p->group), stream);
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(vec), CKC_KARG(done)};
    vec.q = ckc_aligned16(p->q, p->cols);
    vec.scale = ckc_aligned16(p->scale, p->cols * (int64_t)sizeof(float));
    vec.out = ckc_aligned16(p->out, p->cols * ckc_kind_size(p->out_kind));
    return CKC_LAUNCH_INSTANCE(k_dequant_rotated, p->out_kind, 0, 0, 0, &c, args, err);
}

/* Without rotation, grid-stride loops, 16 values per thread and pass where every tensor
 * is 16-byte aligned: the warp walk (int8_dequant_walk_kernel, coalesced) for a per-row
 * scale on rows of whole chunks of 128 to 2^30 values, or a single scale on a whole
 * number of quads of four; else int8_dequant_kernel, 16 consecutive values per thread
 * (a full scale, an index: rows of whole chunks) or one. */
static ckc_status
dequant_plain(const ckc_dequantize_int8_convrot_weight_dtype_params *p, ckc_done_mark done, uintptr_t stream,
              ckc_error *err)
{
    ckc_dequantize_int8_convrot_weight_dtype_params params = *p;
    const bool aligned = (uintptr_t)p->q % 16 == 0 && (uintptr_t)p->out % 16 == 0;
    const bool per_row = p->scale_mode == CKC_SCALE_PER_ROW;
    const bool walk = aligned && p->index == NULL && p->scale_mode != CKC_SCALE_FULL &&
                      (per_row ? p->cols % CKC_CHUNK == 0 && p->cols >= 128 && p->cols <= ((int64_t)1 << 30)
                               : p->rows * p->cols % 4 == 0);
    bool chunks = aligned && (p->scale_mode != CKC_SCALE_FULL || (uintptr_t)p->scale % 16 == 0) &&
                  ((!per_row && p->index == NULL) || p->cols % CKC_CHUNK == 0);
    const int64_t per_thread = walk || chunks ? CKC_CHUNK : 1;
    const int64_t threads = (p->rows * p->cols + per_thread - 1) / per_thread;
    const int64_t blocks = (threads + CKC_ROW_THREADS - 1) / CKC_ROW_THREADS;
    const ckc_launch_cfg c = ckc_launch_1d(blocks < 65536 ? blocks : 65536, CKC_ROW_THREADS, 0, stream);
    if (walk) {
        uint32_t zero = 0; /* ckc_tile_together's */
        const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(zero), CKC_KARG(done)};
        return CKC_LAUNCH_INSTANCE(k_dequant_walk, p->out_kind, per_row, 0, 0, &c, args, err);
    } else {
        const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(chunks), CKC_KARG(done)};
        return CKC_LAUNCH_INSTANCE(k_dequant, p->out_kind, 0, 0, 0, &c, args, err);
    }
}

static ckc_status
dequant_op(const ckc_dequantize_int8_convrot_weight_dtype_params *p, ckc_exec *exec, ckc_error *err)
{
    const ckc_done_mark done = ckc_exec_take_done_mark(exec);
    ckc_status status;
    if (ckc_tile_dequant(p, exec->stream, done, &status, err)) {
        return status;
    }
    return p->group > 0 ? dequant_rotated(p, done, exec->stream, err) : dequant_plain(p, done, exec->stream, err);
}

ckc_status
ckc_gpu_dequantize_int8_convrot_weight_dtype(const ckc_dequantize_int8_convrot_weight_dtype_params *p,
                                             ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, dequant_op(p, exec, err));
}

/* ---- tensor-wise quantization ---- */

/* absmax into *scale (as magnitude bits), the scale from it, then the codes. */
static ckc_status
tensorwise(const ckc_quantize_int8_tensorwise_params *p, ckc_exec *exec, ckc_error *err)
{
    const uintptr_t stream = exec->stream;
    const int64_t needed = (p->numel + CKC_ROW_THREADS - 1) / CKC_ROW_THREADS;
    const ckc_launch_cfg c =
        ckc_launch_1d(needed < CKC_ELEMENTWISE_BLOCKS ? needed : CKC_ELEMENTWISE_BLOCKS, CKC_ROW_THREADS, 0, stream);
    ckc_quantize_int8_tensorwise_params params = *p;
    ckc_done_mark done;
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(done)};
    if (p->compute_scale) {
        const void *x = p->x;
        int64_t n = p->numel;
        uint32_t *bits = (uint32_t *)(void *)p->scale;
        float *scale = p->scale;
        const ckc_launch_cfg one = ckc_launch_1d(1, 1, 0, stream);
        const ckc_karg absmax_args[] = {CKC_KARG(x), CKC_KARG(n), CKC_KARG(bits)};
        const ckc_karg scale_args[] = {CKC_KARG(scale)};
        CKC_TRY(ckc_gpu_memset_async(p->scale, 0, sizeof(float), stream, err));
        CKC_TRY(CKC_LAUNCH_INSTANCE(k_tensor_absmax, p->kind, 0, 0, 0, &c, absmax_args, err));
        CKC_TRY(ckc_gpu_launch(&k_tensor_scale[0], &one, scale_args, CKC_KARG_COUNT(scale_args), err));
    }
    done = ckc_exec_take_done_mark(exec);
    return CKC_LAUNCH_INSTANCE(k_tensor_quantize, p->kind, 0, 0, 0, &c, args, err);
}

ckc_status
ckc_gpu_quantize_int8_tensorwise(const ckc_quantize_int8_tensorwise_params *p, ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, tensorwise(p, exec, err));
}

#endif /* CKC_WITH_GPU */
