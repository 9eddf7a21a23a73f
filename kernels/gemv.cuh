/* SPDX-License-Identifier: Apache-2.0 */
/* The end the two GEMVs share (int8_linear's, kernels/linear.cu; w4a8_linear's,
 * kernels/w4a8.cu): a warp per output column j, each lane holding its partial
 * int32 sum of every row. */
#ifndef CKC_KERNELS_GEMV_CUH
#define CKC_KERNELS_GEMV_CUH

#include "elements.cuh"

#include "contract/linear_plan.h"
#include "math/linear.h"

/* The warp's sums of the chunk's rows (the xor butterfly: every lane ends with
 * every sum), then lane r stores row r's output: ckc_linear_output's epilogue
 * (csrc/math/linear.h) on column j. */
__device__ __forceinline__ void
ckc_gemv_store(const ckc_int8_linear_params &p, int rows, int lane, int64_t j, int32_t acc[CKC_LINEAR_GEMV_ROWS])
{
    CKC_UNROLL
    for (int r = 0; r < CKC_LINEAR_GEMV_ROWS; r++) {
        if (r < rows) {
            for (int o = 16; o > 0; o /= 2) {
                acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
            }
            if (lane == r) {
                ckc_store_value(p.out, p.out_kind, r * p.n + j,
                                ckc_linear_output(acc[r], p.x_scale[r], p.w_scale[p.w_per_channel ? j : 0], p.terms,
                                                  p.out_kind, r, j, p.n));
            }
        }
    }
}

#endif /* CKC_KERNELS_GEMV_CUH */
