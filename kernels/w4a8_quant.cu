/* SPDX-License-Identifier: Apache-2.0 */
/* GPU kernels of the W4A8 / W6A8 quantizer (launcher: csrc/gpu/launch_w4a8.c):
 * its three steps (contract/w4a8_quant_plan.h), a grid-stride thread per group,
 * per row, per group.  A load-time op (a weight is quantized once when a model
 * or a LoRA is loaded): each group's thread rereads its 4..64 values from L1
 * for every ALS pass, and the math is math/w4a8_quant.h, the CPU's, so both give
 * eager's bits on the same rotated weight. */
#include "done_mark.cuh"
#include "contract/w4a8_quant_plan.h"
#include "gpu/kernel_args.h"
#include "gpu/kernel_list.h"

/* 128 threads and at least one block per SM: without the second bound ptxas holds a
 * group's state (its scale, the searches' bounds, the sums' accumulators) in 48-64
 * registers and spills the rest (100-230 bytes) in the loops; with it, 62-88 registers
 * and no spill (benchmarks/gpu_model.py --check). */
#define CKC_W4A8Q_THREADS 128

template <int STEP>
__device__ __forceinline__ void
w4a8_quant_body(ckc_quantize_w4a8_int8_weight_params p, ckc_done_mark done)
{
    const int64_t groups = p.k / p.group;
    const int64_t count = STEP == 2 ? p.rows : p.rows * groups;
    const ckc_w4a8q_reuse reuse = {NULL, NULL, NULL, NULL, NULL};
    for (int64_t i = (int64_t)blockIdx.x * CKC_W4A8Q_THREADS + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * CKC_W4A8Q_THREADS) {
        if (STEP == 2) {
            ckc_w4a8q_step_channel(&p, i);
            continue;
        }
        /* a 32-bit division where the indices allow it (the 64-bit one is a library call) */
        const int64_t n = count <= INT32_MAX ? (int64_t)((int32_t)i / (int32_t)groups) : i / groups;
        if (STEP == 1) {
            ckc_w4a8q_step_scale(&p, n, i - n * groups, reuse);
        } else {
            ckc_w4a8q_step_codes(&p, n, i - n * groups, reuse);
        }
    }
    ckc_done_mark_arrive(done);
}

#define CKC_W4A8_QUANT_INSTANCES(s)                                                                    \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(w4a8_quant_kernel, s), __launch_bounds__(CKC_W4A8Q_THREADS, 1),     \
                        (ckc_quantize_w4a8_int8_weight_params p, ckc_done_mark done),                 \
                        (w4a8_quant_body<s>(p, done)))
CKC_W4A8_QUANT_KERNELS(CKC_W4A8_QUANT_INSTANCES)
