/* SPDX-License-Identifier: Apache-2.0 */
/* Launcher of the W4A8 / W6A8 weight decode (kernels/w4a8.cu): one grid-stride
 * launch of 16-column chunks, 8-byte code loads and 16-byte stores where the
 * tensors' bases allow them (every row is a whole number of chunks).  Also
 * w4a8_linear's decode of a part of the weight and its GEMV of a few rows
 * (called from launch_linear.c), and the quantizer's three steps
 * (kernels/w4a8_quant.cu). */
#if defined(CKC_WITH_GPU)

#include "kernel.h"
#include "launch.h"
#include "launchers.h"

#define W4A8_DECL(k) CKC_EMU_THUNK_DECL(CKC_KNAME1(w4a8_dequant_kernel, k))
CKC_W4A8_KERNELS(W4A8_DECL)
#define W4A8_ENTRY(k) CKC_KERNEL_ENTRY(w4a8_dequant_kernel, "w4a8_dequant", "w4a8", CKC_KNAME1(w4a8_dequant_kernel, k), \
                                       k, 0, 0, 0)
static ckc_kernel dequant[] = {CKC_W4A8_KERNELS(W4A8_ENTRY)};
#define GEMV_DECL(b) CKC_EMU_THUNK_DECL(CKC_KNAME1(w4a8_gemv_kernel, b))
CKC_W4A8_GEMV_KERNELS(GEMV_DECL)
#define GEMV_ENTRY(b) CKC_KERNEL_ENTRY(w4a8_gemv_kernel, "w4a8_gemv", "w4a8", CKC_KNAME1(w4a8_gemv_kernel, b), b, 0, 0, 0)
static ckc_kernel gemv[] = {CKC_W4A8_GEMV_KERNELS(GEMV_ENTRY)};
#define QUANT_DECL(s) CKC_EMU_THUNK_DECL(CKC_KNAME1(w4a8_quant_kernel, s))
CKC_W4A8_QUANT_KERNELS(QUANT_DECL)
#define QUANT_ENTRY(s) CKC_KERNEL_ENTRY(w4a8_quant_kernel, "w4a8_quant", "w4a8_quant", \
                                        CKC_KNAME1(w4a8_quant_kernel, s), s, 0, 0, 0)
static ckc_kernel quant[] = {CKC_W4A8_QUANT_KERNELS(QUANT_ENTRY)};
#define W4A8Q_THREADS 128 /* kernels/w4a8_quant.cu's CKC_W4A8Q_THREADS */

ckc_status
ckc_gpu_w4a8_decode(const ckc_dequantize_w4a8_int8_weight_params *p, uintptr_t stream, ckc_done_mark done,
                    ckc_error *err)
{
    ckc_dequantize_w4a8_int8_weight_params params = *p;
    /* canonical rows are k/2 (+ k/4) bytes, multiples of 8: a base aligned to 8 aligns every chunk */
    bool q_vec = !p->packed && ((uintptr_t)p->q % 8) == 0;
    bool out_vec = ckc_aligned16(p->out, 0);
    const int64_t chunks = p->rows * (p->k / CKC_CHUNK);
    const int64_t needed = (chunks + CKC_ROW_THREADS - 1) / CKC_ROW_THREADS;
    const ckc_launch_cfg c = ckc_launch_1d(needed < CKC_ELEMENTWISE_BLOCKS ? needed : CKC_ELEMENTWISE_BLOCKS,
                                           CKC_ROW_THREADS, 0, stream);
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(q_vec), CKC_KARG(out_vec), CKC_KARG(done)};
    return CKC_LAUNCH_INSTANCE(dequant, p->out_int8 ? 3 : (int)p->out_kind, 0, 0, 0, &c, args, err);
}

ckc_status
ckc_gpu_w4a8_gemv(const ckc_int8_linear_params *p, ckc_done_mark done, uintptr_t stream, ckc_error *err)
{
    ckc_int8_linear_params params = *p;
    /* canonical rows of k/2 or 3k/4 bytes (k a multiple of 16, of 32 at 6 bits) and the 6-bit
     * plane at k/2: an 8-byte aligned base aligns every step's words */
    bool vec = ((uintptr_t)p->decode.q % 8) == 0;
    const ckc_launch_cfg c =
        ckc_launch_1d((p->n + CKC_GEMV_WARPS - 1) / CKC_GEMV_WARPS, CKC_GEMV_WARPS * 32, 0, stream);
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(vec), CKC_KARG(done)};
    return CKC_LAUNCH_INSTANCE(gemv, p->decode.bits, 0, 0, 0, &c, args, err);
}

static ckc_status
dequantize(const ckc_dequantize_w4a8_int8_weight_params *p, ckc_exec *exec, ckc_error *err)
{
    return ckc_gpu_w4a8_decode(p, exec->stream, ckc_exec_take_done_mark(exec), err);
}

ckc_status
ckc_gpu_dequantize_w4a8_int8_weight(const ckc_dequantize_w4a8_int8_weight_params *p, ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, dequantize(p, exec, err));
}

/* The quantizer's three steps, the completion mark on the last. */
static ckc_status
quantize(const ckc_quantize_w4a8_int8_weight_params *p, ckc_exec *exec, ckc_error *err)
{
    const ckc_done_mark none = {NULL, 0, NULL, NULL};
    ckc_quantize_w4a8_int8_weight_params params = *p;
    for (int step = 1; step <= 3; step++) {
        const int64_t count = step == 2 ? p->rows : p->rows * (p->k / p->group);
        const int64_t needed = count > 0 ? (count + W4A8Q_THREADS - 1) / W4A8Q_THREADS : 1;
        const ckc_launch_cfg c = ckc_launch_1d(needed < CKC_ELEMENTWISE_BLOCKS ? needed : CKC_ELEMENTWISE_BLOCKS,
                                               W4A8Q_THREADS, 0, exec->stream);
        ckc_done_mark mark = step == 3 ? ckc_exec_take_done_mark(exec) : none;
        const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(mark)};
        CKC_TRY(CKC_LAUNCH_INSTANCE(quant, step, 0, 0, 0, &c, args, err));
    }
    return CKC_OK;
}

ckc_status
ckc_gpu_quantize_w4a8_int8_weight(const ckc_quantize_w4a8_int8_weight_params *p, ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, quantize(p, exec, err));
}

#endif /* CKC_WITH_GPU */
