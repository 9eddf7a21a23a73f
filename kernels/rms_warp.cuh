/* SPDX-License-Identifier: Apache-2.0 */
/* rms_norm's row factor on one warp, for the kernels that fuse a norm into a
 * row pass (kernels/rope.cu: rms_rope, kernels/residual.cu). */
#ifndef CKC_RMS_WARP_CUH
#define CKC_RMS_WARP_CUH

#include "cuda_dialect.h"
#include "math/rms.h"

/* r of one row of n values (math/rms.h: aten's cascade): the warp's lanes sum
 * the streams into streams[] (shared, CKC_RMS_STREAMS floats), lane 0 ends the
 * sum into *factor (shared), every lane returns r.  Every read of the row here
 * is done before the second __syncwarp, so the caller may then write the row. */
template <ckc_float_kind KIND>
__device__ __forceinline__ float
ckc_warp_rms_factor(const void *row, int64_t n, float eps, int lane, float *streams, float *factor)
{
    const int64_t lanes = ckc_rms_lanes(n);
    if (lane < CKC_RMS_ILP * lanes) {
        streams[lane] = ckc_rms_stream_sum(row, KIND, lanes, n / lanes / CKC_RMS_ILP, lane);
    }
    __syncwarp();
    if (lane == 0) {
        *factor = ckc_rms_factor(ckc_rms_combine(row, KIND, n, streams), n, eps);
    }
    __syncwarp();
    return *factor;
}

#endif /* CKC_RMS_WARP_CUH */
