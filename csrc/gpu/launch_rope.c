/* SPDX-License-Identifier: Apache-2.0 */
/* Launcher of the RoPE kernels (kernels/rope.cu): vector units of 16 bytes
 * where the rows' length and the pointers allow them, else one pair per thread;
 * and of the rms_rope kernels, one warp per row. */
#if defined(CKC_WITH_GPU)

#include <stdint.h>

#include "kernel.h"
#include "launch.h"

#define ROPE_DECL(k, s, v) CKC_EMU_THUNK_DECL(CKC_KNAME3(rope_kernel, k, s, v))
CKC_ROPE_KERNELS(ROPE_DECL)
#define ROPE_ENTRY(k, s, v) CKC_KERNEL_ENTRY(rope_kernel, "rope", "rope", CKC_KNAME3(rope_kernel, k, s, v), k, s, v, 0)
static ckc_kernel rope[] = {CKC_ROPE_KERNELS(ROPE_ENTRY)};

/* Whether the 16-byte units fit: x's values per unit divide the span they tile
 * (the row, or half of it), and every pointer is 16-byte aligned. */
static bool
vector_units(const ckc_apply_rope1_params *p)
{
    const int64_t per_unit = 16 / ckc_kind_size(p->kind);
    const int64_t span = p->split_half ? p->dim / 2 : p->dim;
    return span % per_unit == 0 && (uintptr_t)p->x % 16 == 0 && (uintptr_t)p->out % 16 == 0 &&
           (uintptr_t)p->freqs % 16 == 0;
}

static ckc_status
apply(const ckc_apply_rope1_params *p, ckc_exec *exec, ckc_error *err)
{
    ckc_apply_rope1_params params = *p;
    const int vec = vector_units(p);
    const int64_t span = p->split_half ? p->dim / 2 : p->dim;
    /* Vector units: span / per_unit per row; pairs: dim / 2 per row. */
    int64_t units = vec ? span / (16 / ckc_kind_size(p->kind)) : p->dim / 2;
    const int64_t blocks = (p->rows * units + CKC_ROW_THREADS - 1) / CKC_ROW_THREADS;
    ckc_done_mark done;
    ckc_launch_cfg c;
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(units), CKC_KARG(done)};
    if (blocks > INT32_MAX) { /* one thread per unit: the grid's x extent is below 2^31 */
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'x': %lld rows of %lld values need more than 2^31 blocks",
                        (long long)p->rows, (long long)p->dim);
    }
    done = ckc_exec_take_done_mark(exec);
    c = ckc_launch_1d(blocks, CKC_ROW_THREADS, 0, exec->stream);
    return CKC_LAUNCH_INSTANCE(rope, p->kind, p->split_half, vec, 0, &c, args, err);
}

ckc_status
ckc_gpu_apply_rope1(const ckc_apply_rope1_params *p, ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, apply(p, exec, err));
}

/* ---- rms_rope: one warp per row (kernels/rope.cu) ---- */

#define RMS_ROPE_DECL(k, s) CKC_EMU_THUNK_DECL(CKC_KNAME2(rms_rope_kernel, k, s))
CKC_RMS_ROPE_KERNELS(RMS_ROPE_DECL)
#define RMS_ROPE_ENTRY(k, s) \
    CKC_KERNEL_ENTRY(rms_rope_kernel, "rms_rope", "rope", CKC_KNAME2(rms_rope_kernel, k, s), k, s, 0, 0)
static ckc_kernel rms_rope[] = {CKC_RMS_ROPE_KERNELS(RMS_ROPE_ENTRY)};

static ckc_status
apply_rms(const ckc_rms_rope1_params *p, ckc_exec *exec, ckc_error *err)
{
    ckc_rms_rope1_params params = *p;
    /* rows < 2^31 (the op's checks), so the grid stays below 2^28 blocks */
    const int64_t blocks = (p->rope.rows + CKC_RMS_ROPE_WARPS - 1) / CKC_RMS_ROPE_WARPS;
    ckc_done_mark done;
    ckc_launch_cfg c;
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(done)};
    done = ckc_exec_take_done_mark(exec);
    c = ckc_launch_1d(blocks, CKC_RMS_ROPE_WARPS * 32, 0, exec->stream);
    return CKC_LAUNCH_INSTANCE(rms_rope, p->rope.kind, p->rope.split_half, 0, 0, &c, args, err);
}

ckc_status
ckc_gpu_rms_rope1(const ckc_rms_rope1_params *p, ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, apply_rms(p, exec, err));
}

#endif /* CKC_WITH_GPU */
