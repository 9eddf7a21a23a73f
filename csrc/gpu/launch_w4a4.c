/* SPDX-License-Identifier: Apache-2.0 */
/* Launchers of the ConvRot W4A4 kernels (kernels/w4a4.cu): a block per row for
 * the quantizer and the dequantizer, a grid-stride launch for the unpacking, a
 * block per 64 x 64 output tile for the linear's GEMM.  Vector accesses where
 * the launcher finds the rows aligned. */
#if defined(CKC_WITH_GPU)

#include "kernel.h"
#include "launch.h"

#define W4_DECL(k)                                                                                               \
    CKC_EMU_THUNK_DECL(CKC_KNAME1(w4_quant_kernel, k))                                                           \
    CKC_EMU_THUNK_DECL(CKC_KNAME1(w4_dequant_kernel, k))                                                         \
    CKC_EMU_THUNK_DECL(CKC_KNAME1(w4_linear_kernel, k))
CKC_W4A4_KERNELS(W4_DECL)
CKC_EMU_THUNK_DECL(w4_unpack_kernel)
#define W4_ENTRY(family, log, k) CKC_KERNEL_ENTRY(family, log, "w4a4", CKC_KNAME1(family, k), k, 0, 0, 0)
#define QUANT_ENTRY(k) W4_ENTRY(w4_quant_kernel, "w4_quant", k)
#define DEQUANT_ENTRY(k) W4_ENTRY(w4_dequant_kernel, "w4_dequant", k)
#define LINEAR_ENTRY(k) W4_ENTRY(w4_linear_kernel, "w4_linear", k)
static ckc_kernel quant[] = {CKC_W4A4_KERNELS(QUANT_ENTRY)};
static ckc_kernel dequant[] = {CKC_W4A4_KERNELS(DEQUANT_ENTRY)};
static ckc_kernel linear[] = {CKC_W4A4_KERNELS(LINEAR_ENTRY)};
static ckc_kernel unpack[] = {CKC_KERNEL_ENTRY(w4_unpack_kernel, "w4_unpack", "w4a4", w4_unpack_kernel, 0, 0, 0, 0)};

#define W4_TILE 64 /* kernels/w4a4.cu's CKC_W4_TILE */

static ckc_status
quantize(const ckc_quantize_convrot_w4a4_weight_params *p, ckc_exec *exec, ckc_error *err)
{
    const int64_t row_bytes = p->cols * ckc_kind_size(p->kind);
    ckc_quantize_convrot_w4a4_weight_params params = *p;
    bool vec = ckc_aligned16(p->x, row_bytes) && (p->noise == NULL || ckc_aligned16(p->noise, row_bytes));
    bool q_vec = ckc_rows_aligned(p->q, p->cols / 2, 8);
    ckc_done_mark done = ckc_exec_take_done_mark(exec);
    const ckc_launch_cfg c = ckc_launch_1d(p->rows, CKC_ROW_THREADS, ckc_rotation_exchange_bytes(p->group),
                                           exec->stream);
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(vec), CKC_KARG(q_vec), CKC_KARG(done)};
    return CKC_LAUNCH_INSTANCE(quant, p->kind, 0, 0, 0, &c, args, err);
}

ckc_status
ckc_gpu_quantize_convrot_w4a4_weight(const ckc_quantize_convrot_w4a4_weight_params *p, ckc_exec *exec,
                                     ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, quantize(p, exec, err));
}

static ckc_status
dequantize(const ckc_dequantize_convrot_w4a4_weight_params *p, ckc_exec *exec, ckc_error *err)
{
    ckc_dequantize_convrot_w4a4_weight_params params = *p;
    bool q_vec = ckc_rows_aligned(p->q, p->cols / 2, 8);
    bool out_vec = ckc_aligned16(p->out, p->cols * ckc_kind_size(p->out_kind));
    ckc_done_mark done = ckc_exec_take_done_mark(exec);
    const ckc_launch_cfg c = ckc_launch_1d(p->rows, CKC_ROW_THREADS, ckc_rotation_exchange_bytes(p->group),
                                           exec->stream);
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(q_vec), CKC_KARG(out_vec), CKC_KARG(done)};
    return CKC_LAUNCH_INSTANCE(dequant, p->out_kind, 0, 0, 0, &c, args, err);
}

ckc_status
ckc_gpu_dequantize_convrot_w4a4_weight(const ckc_dequantize_convrot_w4a4_weight_params *p, ckc_exec *exec,
                                       ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, dequantize(p, exec, err));
}

static ckc_status
unpack_op(const ckc_prepare_int4_weight_for_int8_linear_params *p, ckc_exec *exec, ckc_error *err)
{
    ckc_prepare_int4_weight_for_int8_linear_params params = *p;
    const int64_t n = p->rows * p->cols;
    const int64_t per_block = (int64_t)CKC_ROW_THREADS * CKC_CHUNK;
    const int64_t needed = (n + per_block - 1) / per_block;
    bool vec = ckc_aligned16(p->q, 0) && ckc_aligned16(p->out, 0);
    ckc_done_mark done = ckc_exec_take_done_mark(exec);
    const ckc_launch_cfg c = ckc_launch_1d(needed < CKC_ELEMENTWISE_BLOCKS ? needed : CKC_ELEMENTWISE_BLOCKS,
                                           CKC_ROW_THREADS, 0, exec->stream);
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(vec), CKC_KARG(done)};
    return CKC_LAUNCH_INSTANCE(unpack, 0, 0, 0, 0, &c, args, err);
}

ckc_status
ckc_gpu_prepare_int4_weight_for_int8_linear(const ckc_prepare_int4_weight_for_int8_linear_params *p,
                                            ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, unpack_op(p, exec, err));
}

static ckc_status
linear_op(const ckc_convrot_w4a4_linear_params *p, ckc_exec *exec, ckc_error *err)
{
    ckc_convrot_w4a4_linear_params params = *p;
    const int64_t tiles = ((p->m + W4_TILE - 1) / W4_TILE) * ((p->n + W4_TILE - 1) / W4_TILE);
    bool vec = ckc_aligned16(p->a, p->k / 2) && ckc_aligned16(p->w, p->k / 2);
    ckc_done_mark done;
    ckc_launch_cfg c;
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(vec), CKC_KARG(done)};
    if (tiles > 0x7FFFFFFF) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'x': %lld output tiles exceed a launch's 2^31 - 1 blocks",
                        (long long)tiles);
    }
    done = ckc_exec_take_done_mark(exec);
    c = ckc_launch_1d(tiles, CKC_ROW_THREADS, 0, exec->stream);
    return CKC_LAUNCH_INSTANCE(linear, p->out_kind, 0, 0, 0, &c, args, err);
}

ckc_status
ckc_gpu_convrot_w4a4_linear(const ckc_convrot_w4a4_linear_params *p, ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, linear_op(p, exec, err));
}

#endif /* CKC_WITH_GPU */
