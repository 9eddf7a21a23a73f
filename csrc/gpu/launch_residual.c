/* SPDX-License-Identifier: Apache-2.0 */
/* Launcher of the rms_gated_residual kernels (kernels/residual.cu): one warp per row. */
#if defined(CKC_WITH_GPU)

#include <stdint.h>

#include "kernel.h"
#include "launch.h"

#define RESIDUAL_DECL(k) CKC_EMU_THUNK_DECL(CKC_KNAME1(rms_gated_residual_kernel, k))
CKC_RESIDUAL_KERNELS(RESIDUAL_DECL)
#define RESIDUAL_ENTRY(k)                                                                                      \
    CKC_KERNEL_ENTRY(rms_gated_residual_kernel, "rms_gated_residual", "residual",                               \
                     CKC_KNAME1(rms_gated_residual_kernel, k), k, 0, 0, 0)
static ckc_kernel residual[] = {CKC_RESIDUAL_KERNELS(RESIDUAL_ENTRY)};

static ckc_status
apply(const ckc_rms_gated_residual_params *p, ckc_exec *exec, ckc_error *err)
{
    ckc_rms_gated_residual_params params = *p;
    /* rows < 2^31 (the op's checks), so the grid stays below 2^28 blocks */
    const int64_t blocks = (p->rows + CKC_RMS_ROPE_WARPS - 1) / CKC_RMS_ROPE_WARPS;
    ckc_done_mark done;
    ckc_launch_cfg c;
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(done)};
    done = ckc_exec_take_done_mark(exec);
    c = ckc_launch_1d(blocks, CKC_RMS_ROPE_WARPS * 32, 0, exec->stream);
    return CKC_LAUNCH_INSTANCE(residual, p->act_kind, 0, 0, 0, &c, args, err);
}

ckc_status
ckc_gpu_rms_gated_residual(const ckc_rms_gated_residual_params *p, ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, apply(p, exec, err));
}

#endif /* CKC_WITH_GPU */
