/* SPDX-License-Identifier: Apache-2.0 */
/* Launchers of the per-tensor FP8 kernels (kernels/fp8.cu): one grid-stride
 * launch of 16-element chunks per op, 16-byte accesses where the tensors'
 * bases are 16-byte aligned. */
#if defined(CKC_WITH_GPU)

#include "kernel.h"
#include "launch.h"

#define FP8_DECL(k)                                                                                              \
    CKC_EMU_THUNK_DECL(CKC_KNAME1(fp8_quant_kernel, k))                                                          \
    CKC_EMU_THUNK_DECL(CKC_KNAME1(fp8_dequant_kernel, k))                                                        \
    CKC_EMU_THUNK_DECL(CKC_KNAME1(fp8_stochastic_kernel, k))
CKC_FP8_KERNELS(FP8_DECL)
#define KIND_ENTRY(family, log, k) CKC_KERNEL_ENTRY(family, log, "fp8", CKC_KNAME1(family, k), k, 0, 0, 0)
#define QUANT_ENTRY(k) KIND_ENTRY(fp8_quant_kernel, "fp8_quant", k)
#define DEQUANT_ENTRY(k) KIND_ENTRY(fp8_dequant_kernel, "fp8_dequant", k)
#define STOCHASTIC_ENTRY(k) KIND_ENTRY(fp8_stochastic_kernel, "fp8_stochastic", k)
static ckc_kernel quant[] = {CKC_FP8_KERNELS(QUANT_ENTRY)};
static ckc_kernel dequant[] = {CKC_FP8_KERNELS(DEQUANT_ENTRY)};
static ckc_kernel stochastic[] = {CKC_FP8_KERNELS(STOCHASTIC_ENTRY)};

/* The grid for n elements in chunks of CKC_CHUNK, capped (the loop strides). */
static ckc_launch_cfg
fp8_grid(int64_t n, uintptr_t stream)
{
    const int64_t per_block = (int64_t)CKC_ROW_THREADS * CKC_CHUNK;
    const int64_t needed = (n + per_block - 1) / per_block;
    return ckc_launch_1d(needed < CKC_ELEMENTWISE_BLOCKS ? needed : CKC_ELEMENTWISE_BLOCKS, CKC_ROW_THREADS, 0,
                         stream);
}

static ckc_status
quantize(const ckc_quantize_per_tensor_fp8_params *p, ckc_exec *exec, ckc_error *err)
{
    ckc_quantize_per_tensor_fp8_params params = *p;
    bool x_vec = ckc_aligned16(p->x, 0);
    bool q_vec = ckc_aligned16(p->q, 0);
    ckc_done_mark done = ckc_exec_take_done_mark(exec);
    const ckc_launch_cfg c = fp8_grid(p->numel, exec->stream);
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(x_vec), CKC_KARG(q_vec), CKC_KARG(done)};
    return CKC_LAUNCH_INSTANCE(quant, p->kind, 0, 0, 0, &c, args, err);
}

ckc_status
ckc_gpu_quantize_per_tensor_fp8(const ckc_quantize_per_tensor_fp8_params *p, ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, quantize(p, exec, err));
}

static ckc_status
dequantize(const ckc_dequantize_per_tensor_fp8_params *p, ckc_exec *exec, ckc_error *err)
{
    ckc_dequantize_per_tensor_fp8_params params = *p;
    bool x_vec = ckc_aligned16(p->x, 0);
    bool out_vec = ckc_aligned16(p->out, 0);
    ckc_done_mark done = ckc_exec_take_done_mark(exec);
    const ckc_launch_cfg c = fp8_grid(p->numel, exec->stream);
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(x_vec), CKC_KARG(out_vec), CKC_KARG(done)};
    return CKC_LAUNCH_INSTANCE(dequant, p->out_kind, 0, 0, 0, &c, args, err);
}

ckc_status
ckc_gpu_dequantize_per_tensor_fp8(const ckc_dequantize_per_tensor_fp8_params *p, ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, dequantize(p, exec, err));
}

static ckc_status
stochastic_op(const ckc_stochastic_rounding_fp8_params *p, ckc_exec *exec, ckc_error *err)
{
    ckc_stochastic_rounding_fp8_params params = *p;
    bool x_vec = ckc_aligned16(p->x, 0);
    /* rng and q share the code accesses: both must allow 16 bytes */
    bool q_vec = ckc_aligned16(p->q, 0) && ckc_aligned16(p->rng, 0);
    ckc_done_mark done = ckc_exec_take_done_mark(exec);
    const ckc_launch_cfg c = fp8_grid(p->numel, exec->stream);
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(x_vec), CKC_KARG(q_vec), CKC_KARG(done)};
    return CKC_LAUNCH_INSTANCE(stochastic, p->kind, 0, 0, 0, &c, args, err);
}

ckc_status
ckc_gpu_stochastic_rounding_fp8(const ckc_stochastic_rounding_fp8_params *p, ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, stochastic_op(p, exec, err));
}

#endif /* CKC_WITH_GPU */
