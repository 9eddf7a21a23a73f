/* SPDX-License-Identifier: Apache-2.0 */
/* Launcher of the AWQ W4A16 GEMV (kernels/awq.cu): blocks of CKC_AWQ_WARPS
 * output columns by CKC_AWQ_ROWS rows of x; the 16-byte instance where K and
 * the group size are multiples of 32 and the bases 16-byte aligned (the rows'
 * strides then are too), else the one-column-per-lane instance. */
#if defined(CKC_WITH_GPU)

#include <stdint.h>

#include "kernel.h"
#include "launch.h"

#define AWQ_DECL(k, v) CKC_EMU_THUNK_DECL(CKC_KNAME2(awq_gemv_kernel, k, v))
CKC_AWQ_KERNELS(AWQ_DECL)
#define AWQ_ENTRY(k, v) CKC_KERNEL_ENTRY(awq_gemv_kernel, "awq_gemv", "awq", CKC_KNAME2(awq_gemv_kernel, k, v), k, v, 0, 0)
static ckc_kernel awq[] = {CKC_AWQ_KERNELS(AWQ_ENTRY)};

static ckc_status
gemv(const ckc_gemv_awq_w4a16_params *p, ckc_exec *exec, ckc_error *err)
{
    ckc_gemv_awq_w4a16_params params = *p;
    const int vec = p->k % 32 == 0 && p->group % 32 == 0 && ckc_aligned16(p->qweight, 0) && ckc_aligned16(p->x, 0);
    const int64_t blocks = (p->n + CKC_AWQ_WARPS - 1) / CKC_AWQ_WARPS;
    const int64_t tiles = (p->m + CKC_AWQ_ROWS - 1) / CKC_AWQ_ROWS;
    ckc_done_mark done;
    ckc_launch_cfg c;
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(done)};
    if (tiles > 65535) { /* the grid's y extent */
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'x': %lld rows; the GEMV takes at most %d",
                        (long long)p->m, 65535 * CKC_AWQ_ROWS);
    }
    done = ckc_exec_take_done_mark(exec);
    c = ckc_launch_1d(blocks, CKC_AWQ_WARPS * 32, 0, exec->stream);
    c.grid[1] = (unsigned)tiles;
    return CKC_LAUNCH_INSTANCE(awq, p->kind, vec, 0, 0, &c, args, err);
}

ckc_status
ckc_gpu_gemv_awq_w4a16(const ckc_gemv_awq_w4a16_params *p, ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, gemv(p, exec, err));
}

#endif /* CKC_WITH_GPU */
