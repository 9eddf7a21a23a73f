/* SPDX-License-Identifier: Apache-2.0 */
/* Launchers of the MXFP8 kernels (kernels/mxfp8.cu): one thread per block of 32
 * values (the quantizer: per entry of the whole swizzled scale buffer), 16-byte
 * accesses where the rows allow them. */
#if defined(CKC_WITH_GPU)

#include "kernel.h"
#include "launch.h"
#include "math/mxfp8.h"

#define MXFP8_DECL(k)                                                                                            \
    CKC_EMU_THUNK_DECL(CKC_KNAME1(mxfp8_quant_kernel, k))                                                        \
    CKC_EMU_THUNK_DECL(CKC_KNAME1(mxfp8_dequant_kernel, k))
CKC_MXFP8_KERNELS(MXFP8_DECL)
#define KIND_ENTRY(family, log, k) CKC_KERNEL_ENTRY(family, log, "mxfp8", CKC_KNAME1(family, k), k, 0, 0, 0)
#define QUANT_ENTRY(k) KIND_ENTRY(mxfp8_quant_kernel, "mxfp8_quant", k)
#define DEQUANT_ENTRY(k) KIND_ENTRY(mxfp8_dequant_kernel, "mxfp8_dequant", k)
static ckc_kernel quant[] = {CKC_MXFP8_KERNELS(QUANT_ENTRY)};
static ckc_kernel dequant[] = {CKC_MXFP8_KERNELS(DEQUANT_ENTRY)};

/* One thread per unit of work, in blocks of CKC_ROW_THREADS. */
static ckc_launch_cfg
mxfp8_grid(int64_t threads, uintptr_t stream)
{
    return ckc_launch_1d((threads + CKC_ROW_THREADS - 1) / CKC_ROW_THREADS, CKC_ROW_THREADS, 0, stream);
}

static ckc_status
quantize(const ckc_quantize_mxfp8_params *p, ckc_exec *exec, ckc_error *err)
{
    ckc_quantize_mxfp8_params params = *p;
    bool x_vec = ckc_aligned16(p->x, p->cols * ckc_kind_size(p->kind));
    bool q_vec = ckc_aligned16(p->qx, p->out_cols);
    const int64_t entries =
        ckc_nvfp4_scale_rows(p->out_rows) * ckc_nvfp4_scale_cols(p->out_cols / CKC_MXFP8_BLOCK);
    ckc_done_mark done = ckc_exec_take_done_mark(exec);
    const ckc_launch_cfg c = mxfp8_grid(entries, exec->stream);
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(x_vec), CKC_KARG(q_vec), CKC_KARG(done)};
    return CKC_LAUNCH_INSTANCE(quant, p->kind, 0, 0, 0, &c, args, err);
}

ckc_status
ckc_gpu_quantize_mxfp8(const ckc_quantize_mxfp8_params *p, ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, quantize(p, exec, err));
}

static ckc_status
dequantize(const ckc_dequantize_mxfp8_params *p, ckc_exec *exec, ckc_error *err)
{
    ckc_dequantize_mxfp8_params params = *p;
    bool q_vec = ckc_aligned16(p->qx, p->cols);
    bool out_vec = ckc_aligned16(p->out, p->cols * ckc_kind_size(p->out_kind));
    ckc_done_mark done = ckc_exec_take_done_mark(exec);
    const ckc_launch_cfg c = mxfp8_grid(p->rows * (p->cols / CKC_MXFP8_BLOCK), exec->stream);
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(q_vec), CKC_KARG(out_vec), CKC_KARG(done)};
    return CKC_LAUNCH_INSTANCE(dequant, p->out_kind, 0, 0, 0, &c, args, err);
}

ckc_status
ckc_gpu_dequantize_mxfp8(const ckc_dequantize_mxfp8_params *p, ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, dequantize(p, exec, err));
}

#endif /* CKC_WITH_GPU */
