/* SPDX-License-Identifier: Apache-2.0 */
/* GPU kernel of rms_gated_residual (launcher: csrc/gpu/launch_residual.c): one
 * warp per row: the row's factor (rms_warp.cuh: aten's cascade), then each
 * lane computes values lane, lane + 32, ... of the
 * row (math/rms_rope.h, math/residual.h).  The output is a new tensor. */
#include "done_mark.cuh"
#include "elements.cuh"
#include "gpu/kernel_args.h"
#include "gpu/kernel_list.h"
#include "math/residual.h"
#include "math/rms_rope.h"
#include "rms_warp.cuh"

template <ckc_float_kind KIND>
__device__ __forceinline__ void
residual_row(const ckc_rms_gated_residual_params &p, int64_t r, int lane, float *streams, float *factor)
{
    const int64_t n = p.dim;
    const char *row = (const char *)p.act + r * n * ckc_kind_size(KIND);
    const int64_t gr = r / p.gate_div % p.gate_mod;
    const int64_t rr = r / p.res_div % p.res_mod;
    const float rf = ckc_warp_rms_factor<KIND>(row, n, p.eps, lane, streams, factor);
    for (int64_t i = lane; i < n; i += 32) {
        const float normed = ckc_rms_norm_value(ckc_load_value<KIND>(row, i), rf,
                                                ckc_kind_value(p.weight, p.weight_kind, i), KIND);
        const float g = ckc_kind_value(p.gate, p.gate_kind, gr * n + i);
        const float res = ckc_kind_value(p.residual, p.res_kind, rr * n + i);
        ckc_store_value(p.out, p.out_kind, r * n + i, ckc_gated_residual_value(res, g, normed, p.mid_kind, p.out_kind));
    }
}

template <ckc_float_kind KIND>
__device__ __forceinline__ void
residual_body(ckc_rms_gated_residual_params p, ckc_done_mark done)
{
    __shared__ float streams[CKC_RMS_ROPE_WARPS][CKC_RMS_STREAMS];
    __shared__ float factor[CKC_RMS_ROPE_WARPS];
    const int warp = (int)threadIdx.x / 32;
    const int64_t r = (int64_t)blockIdx.x * CKC_RMS_ROPE_WARPS + warp;
    /* Warp-uniform: a warp past the last row skips its row whole, and all reach the mark. */
    if (r < p.rows) {
        residual_row<KIND>(p, r, (int)threadIdx.x % 32, streams[warp], &factor[warp]);
    }
    ckc_done_mark_arrive(done);
}

#define CKC_RESIDUAL_INSTANCES(k)                                                                               \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(rms_gated_residual_kernel, k), __launch_bounds__(CKC_RMS_ROPE_WARPS * 32),   \
                        (ckc_rms_gated_residual_params p, ckc_done_mark done),                                    \
                        (residual_body<(ckc_float_kind)k>(p, done)))
CKC_RESIDUAL_KERNELS(CKC_RESIDUAL_INSTANCES)
