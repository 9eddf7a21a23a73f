/* SPDX-License-Identifier: Apache-2.0 */
/* Launchers of the NVFP4 kernels (kernels/nvfp4.cu): the row layout where the
 * scale buffer's rows fit one pass of a block, else one thread per entry of the
 * whole buffer. */
#if defined(CKC_WITH_GPU)

#include "kernel.h"
#include "launch.h"
#include "math/nvfp4.h"

#define NVFP4_DECL(k)                                                                                            \
    CKC_EMU_THUNK_DECL(CKC_KNAME1(nvfp4_quant_kernel, k))                                                        \
    CKC_EMU_THUNK_DECL(CKC_KNAME1(nvfp4_quant_rows_kernel, k))                                                   \
    CKC_EMU_THUNK_DECL(CKC_KNAME1(nvfp4_dequant_kernel, k))                                                      \
    CKC_EMU_THUNK_DECL(CKC_KNAME1(nvfp4_dequant_rows_kernel, k))
CKC_KIND_KERNELS(NVFP4_DECL)
#define KIND_ENTRY(family, log, k) CKC_KERNEL_ENTRY(family, log, "nvfp4", CKC_KNAME1(family, k), k, 0, 0, 0)
#define QUANT_ENTRY(k) KIND_ENTRY(nvfp4_quant_kernel, "nvfp4_quant", k)
#define QUANT_ROWS_ENTRY(k) KIND_ENTRY(nvfp4_quant_rows_kernel, "nvfp4_quant_rows", k)
#define DEQUANT_ENTRY(k) KIND_ENTRY(nvfp4_dequant_kernel, "nvfp4_dequant", k)
#define DEQUANT_ROWS_ENTRY(k) KIND_ENTRY(nvfp4_dequant_rows_kernel, "nvfp4_dequant_rows", k)
static ckc_kernel quant[] = {CKC_KIND_KERNELS(QUANT_ENTRY)};
static ckc_kernel quant_rows[] = {CKC_KIND_KERNELS(QUANT_ROWS_ENTRY)};
static ckc_kernel dequant[] = {CKC_KIND_KERNELS(DEQUANT_ENTRY)};
static ckc_kernel dequant_rows[] = {CKC_KIND_KERNELS(DEQUANT_ROWS_ENTRY)};

/* Whether rows of packed codes (cols / 2 bytes each) allow the kernels' 8-byte accesses. */
static bool
packed_rows_aligned(const uint8_t *qx, int64_t cols)
{
    return ckc_rows_aligned(qx, cols / 2, CKC_NVFP4_BLOCK / 2);
}

/* The grid of CKC_NVFP4_THREADS-thread blocks for `threads` threads. */
static int64_t
blocks_for(int64_t threads)
{
    return (threads + CKC_NVFP4_THREADS - 1) / CKC_NVFP4_THREADS;
}

static ckc_status
quantize(const ckc_quantize_nvfp4_params *p, ckc_exec *exec, ckc_error *err)
{
    ckc_quantize_nvfp4_params params = *p;
    bool vec = ckc_aligned16(p->x, p->cols * ckc_kind_size(p->kind));
    bool q_vec = packed_rows_aligned(p->qx, p->out_cols);
    /* One thread per entry of the whole scale buffer. */
    const int64_t scale_rows = ckc_nvfp4_scale_rows(p->out_rows);
    const int64_t buffer_cols = ckc_nvfp4_scale_cols(p->out_cols / CKC_NVFP4_BLOCK);
    ckc_tile_geom g = ckc_tile_geometry_chunks(buffer_cols, scale_rows, CKC_TILE_MAX_THREADS);
    ckc_done_mark done = ckc_exec_take_done_mark(exec);
    if (g.segments == 1) {
        const ckc_launch_cfg c = ckc_launch_2d((scale_rows + g.rows_per_block - 1) / g.rows_per_block,
                                               g.threads_per_row, g.rows_per_block, 0, exec->stream);
        const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(g), CKC_KARG(vec), CKC_KARG(q_vec), CKC_KARG(done)};
        return CKC_LAUNCH_INSTANCE(quant_rows, p->kind, 0, 0, 0, &c, args, err);
    } else {
        const ckc_launch_cfg c = ckc_launch_1d(blocks_for(scale_rows * buffer_cols), CKC_NVFP4_THREADS, 0, exec->stream);
        const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(vec), CKC_KARG(q_vec), CKC_KARG(done)};
        return CKC_LAUNCH_INSTANCE(quant, p->kind, 0, 0, 0, &c, args, err);
    }
}

ckc_status
ckc_gpu_quantize_nvfp4(const ckc_quantize_nvfp4_params *p, ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, quantize(p, exec, err));
}

static ckc_status
dequantize(const ckc_dequantize_nvfp4_params *p, ckc_exec *exec, ckc_error *err)
{
    ckc_dequantize_nvfp4_params params = *p;
    bool q_vec = packed_rows_aligned(p->qx, p->cols);
    bool out_vec = ckc_aligned16(p->out, p->cols * ckc_kind_size(p->out_kind));
    const int64_t per_thread = CKC_NVFP4_ROW_BLOCKS * CKC_NVFP4_BLOCK;
    ckc_tile_geom g = ckc_tile_geometry_chunks(p->cols / per_thread, p->rows, CKC_TILE_MAX_THREADS);
    const bool rows = p->cols % per_thread == 0 && g.segments == 1 && ckc_rows_aligned(p->qx, p->cols / 2, 16) &&
                      out_vec && (uintptr_t)p->scales % 4 == 0;
    ckc_done_mark done = ckc_exec_take_done_mark(exec);
    if (rows && p->rows > 0) {
        const ckc_launch_cfg c = ckc_launch_2d((p->rows + g.rows_per_block - 1) / g.rows_per_block,
                                               g.threads_per_row, g.rows_per_block, 0, exec->stream);
        const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(g), CKC_KARG(done)};
        return CKC_LAUNCH_INSTANCE(dequant_rows, p->out_kind, 0, 0, 0, &c, args, err);
    } else {
        const ckc_launch_cfg c =
            ckc_launch_1d(blocks_for(p->rows * (p->cols / CKC_NVFP4_BLOCK)), CKC_NVFP4_THREADS, 0, exec->stream);
        const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(q_vec), CKC_KARG(out_vec), CKC_KARG(done)};
        return CKC_LAUNCH_INSTANCE(dequant, p->out_kind, 0, 0, 0, &c, args, err);
    }
}

ckc_status
ckc_gpu_dequantize_nvfp4(const ckc_dequantize_nvfp4_params *p, ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, dequantize(p, exec, err));
}

#endif /* CKC_WITH_GPU */
