/* SPDX-License-Identifier: Apache-2.0 */
/* GPU kernel of gemv_awq_w4a16 (launcher: csrc/gpu/launch_awq.c): a GEMV of
 * the packed 4-bit weight, one warp per output column n and CKC_AWQ_ROWS rows
 * of x.  VEC: each lane loads 16 bytes of the packed row (32 columns, one
 * group: the launcher asks that the group size be a multiple of 32) and x's
 * matching 128 bytes in 16-byte loads, decodes the 32 weights in registers with
 * math/awq.h (eager's bits, as on the CPU) and accumulates in float32; the
 * scalar instance takes one column per lane.  The lanes' sums meet in a fixed
 * butterfly, then math/awq.h's output rounding and bias.  The order of the sum
 * is not the CPU's nor eager's: the bound of docs/parity.md (cpu/awq_impl.h). */
#include "done_mark.cuh"
#include "elements.cuh"
#include "row_tile.cuh"
#include "gpu/kernel_args.h"
#include "gpu/kernel_list.h"
#include "math/awq.h"

/* Column e of a 16-byte unit of the packed row: low nibbles the even columns. */
__device__ __forceinline__ unsigned
ckc_awq_unit_code(const ckc_bytes16 &b, int e)
{
    return (b.w[e / 8] >> (4 * (e % 8))) & 15u;
}

/* acc[r] += x[r][k0 .. k0 + 32) . w for the live rows, x in 16-byte loads. */
__device__ __forceinline__ void
ckc_awq_rows_dot(const float *x, int64_t ldx, int rows, const float w[32], float acc[CKC_AWQ_ROWS])
{
    CKC_UNROLL
    for (int r = 0; r < CKC_AWQ_ROWS; r++) {
        if (r < rows) {
            const ckc_bytes16 *xr = (const ckc_bytes16 *)(x + r * ldx);
            CKC_UNROLL
            for (int q = 0; q < 8; q++) {
                const ckc_bytes16 v = xr[q];
                CKC_UNROLL
                for (int e = 0; e < 4; e++) {
                    acc[r] += ckc_f32_from_bits(v.w[e]) * w[4 * q + e];
                }
            }
        }
    }
}

template <ckc_float_kind KIND>
__device__ __forceinline__ void
ckc_awq_vec_columns(const ckc_gemv_awq_w4a16_params &p, int64_t n, int64_t r0, int rows, int lane,
                    float acc[CKC_AWQ_ROWS])
{
    const ckc_bytes16 *units = (const ckc_bytes16 *)(p.qweight + n * (p.k / 2));
    for (int64_t c = lane; c < p.k / 32; c += 32) {
        const int64_t g = c * 32 / p.group;
        const float s = ckc_kind_value(p.wscales, KIND, g * p.n + n);
        const float z = ckc_kind_value(p.wzeros, KIND, g * p.n + n);
        const ckc_bytes16 b = units[c];
        float w[32];
        CKC_UNROLL
        for (int e = 0; e < 32; e++) {
            w[e] = ckc_awq_weight(ckc_awq_unit_code(b, e), s, z, KIND);
        }
        ckc_awq_rows_dot(p.x + r0 * p.k + c * 32, p.k, rows, w, acc);
    }
}

template <ckc_float_kind KIND>
__device__ __forceinline__ void
ckc_awq_scalar_columns(const ckc_gemv_awq_w4a16_params &p, int64_t n, int64_t r0, int rows, int lane,
                       float acc[CKC_AWQ_ROWS])
{
    const uint8_t *row = p.qweight + n * (p.k / 2);
    for (int64_t k = lane; k < p.k; k += 32) {
        const int64_t g = k / p.group;
        const float w = ckc_awq_weight(ckc_awq_nibble(row, k), ckc_kind_value(p.wscales, KIND, g * p.n + n),
                                       ckc_kind_value(p.wzeros, KIND, g * p.n + n), KIND);
        CKC_UNROLL
        for (int r = 0; r < CKC_AWQ_ROWS; r++) {
            if (r < rows) {
                acc[r] += p.x[(r0 + r) * p.k + k] * w;
            }
        }
    }
}

template <ckc_float_kind KIND, int VEC>
__device__ __forceinline__ void
awq_gemv_body(ckc_gemv_awq_w4a16_params p, ckc_done_mark done)
{
    const int lane = (int)threadIdx.x % 32;
    const int64_t n = (int64_t)blockIdx.x * CKC_AWQ_WARPS + threadIdx.x / 32;
    const int64_t r0 = (int64_t)blockIdx.y * CKC_AWQ_ROWS;
    const int rows = p.m - r0 < CKC_AWQ_ROWS ? (int)(p.m - r0) : CKC_AWQ_ROWS;
    /* The whole warp skips (n is the same for its lanes), and reaches the mark with its block. */
    if (n < p.n) {
        float acc[CKC_AWQ_ROWS] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (VEC) {
            ckc_awq_vec_columns<KIND>(p, n, r0, rows, lane, acc);
        } else {
            ckc_awq_scalar_columns<KIND>(p, n, r0, rows, lane, acc);
        }
        CKC_UNROLL
        for (int r = 0; r < CKC_AWQ_ROWS; r++) {
            for (int o = 16; o > 0; o /= 2) {
                acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
            }
        }
        if (lane == 0) {
            const int has_bias = p.bias != NULL;
            const float b = has_bias ? ckc_kind_value(p.bias, p.bias_kind, n) : 0.0f;
            CKC_UNROLL
            for (int r = 0; r < CKC_AWQ_ROWS; r++) {
                if (r < rows) {
                    ckc_store_value(p.out, p.out_kind, (r0 + r) * p.n + n,
                                    ckc_awq_output(acc[r], has_bias, b, KIND, p.out_kind));
                }
            }
        }
    }
    ckc_done_mark_arrive(done);
}

#define CKC_AWQ_INSTANCES(k, v)                                                                                  \
    CKC_KERNEL_INSTANCE(CKC_KNAME2(awq_gemv_kernel, k, v), __launch_bounds__(CKC_AWQ_WARPS * 32),                 \
                        (ckc_gemv_awq_w4a16_params p, ckc_done_mark done),                                        \
                        (awq_gemv_body<(ckc_float_kind)k, v>(p, done)))
CKC_AWQ_KERNELS(CKC_AWQ_INSTANCES)
