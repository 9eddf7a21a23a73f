/* SPDX-License-Identifier: Apache-2.0 */
/* int8_linear on the GPU: per chunk of rows, the row quantizer of int8.cu (the
 * input activation fused into its load, the ConvRot rotation in registers,
 * codes written with the GEMM's padded stride; rms_norm's row factors from a
 * one-warp reduction kernel before it), the int8 GEMM of the BLAS seam
 * (cuBLASLt IMMA, int32 out; a cached plan per shape) and one epilogue kernel
 * (csrc/math/linear.h: bias and residual fused), 8 outputs per thread and
 * step.  Up to CKC_LINEAR_GEMV_ROWS rows (text encoders, single-image steps) take a
 * dp4a GEMV with the epilogue fused instead of the GEMM: the weight, the bytes
 * that matter there, is read once for all the rows.  Device code only: the launcher is
 * csrc/gpu/launch_linear.c. */
#include "done_mark.cuh"
#include "elements.cuh"
#include "gemv.cuh"

#include "contract/linear_plan.h"
#include "gpu/kernel_args.h"
#include "gpu/kernel_list.h"
#include "math/linear.h"
#include "math/rms.h"


/* 16 bytes, for one vector access where the alignment allows. */
struct __align__(16) lin_bytes16 {
    uint32_t w[4];
};

/* Weight loads a lane has in flight per step of the GEMV (below). */
#define CKC_GEMV_DEPTH 4

/* acc[r] += q[r, i .. i + 15] . b for the chunk's rows (the activation codes are
 * L1/L2 hits: every warp of the grid reads the same few rows). */
__device__ __forceinline__ void
int8_gemv_step(const ckc_int8_linear_params &p, int rows, int64_t i, const lin_bytes16 &b,
               int32_t acc[CKC_LINEAR_GEMV_ROWS])
{
    lin_bytes16 a[CKC_LINEAR_GEMV_ROWS] = {};
    CKC_UNROLL
    for (int r = 0; r < CKC_LINEAR_GEMV_ROWS; r++) {
        if (r < rows) { /* the same for every lane: no divergence */
            a[r] = *(const lin_bytes16 *)(p.q + r * p.ldq + i);
        }
    }
    CKC_UNROLL
    for (int r = 0; r < CKC_LINEAR_GEMV_ROWS; r++) {
        if (r < rows) {
            for (int e = 0; e < 4; e++) {
                acc[r] = __dp4a((int)a[r].w[e], (int)b.w[e], acc[r]);
            }
        }
    }
}

/* out[r, j] = epilogue(q[r, :] . w[j, :]) for the chunk's p.rows <= CKC_LINEAR_GEMV_ROWS
 * rows: one warp per output column j, 16 codes of w per lane and step (four dp4a
 * per row, each 16 weight bytes loaded once for every row), a scalar tail; `vec`:
 * the codes' rows and w's rows are 16-byte aligned.  A lane issues the weight
 * loads of CKC_GEMV_DEPTH steps before the first dp4a: with one (1cdf9a7) a warp
 * waited a DRAM round trip per 512 bytes of its column, and the H200 ran
 * 1 x 14336 x 5120 in 50.7 us against comfy_kitchen cuda's 36.6.  The sums are
 * exact int32 in any order (the GEMM's, bit for bit). */
__device__ __forceinline__ void
int8_gemv_body(ckc_int8_linear_params p, bool vec, ckc_done_mark done)
{
    const int lane = (int)threadIdx.x % 32;
    const int64_t j = (int64_t)blockIdx.x * CKC_GEMV_WARPS + threadIdx.x / 32;
    const int rows = (int)p.rows;
    /* The whole warp skips (j is the same for its lanes), and reaches the mark with its block. */
    if (j < p.n) {
        const int8_t *w = p.w + j * p.ldw;
        const int64_t k16 = vec ? p.k / 16 * 16 : 0;
        int32_t acc[CKC_LINEAR_GEMV_ROWS];
        for (int r = 0; r < CKC_LINEAR_GEMV_ROWS; r++) {
            acc[r] = 0;
        }
        int64_t i = (int64_t)lane * 16;
        for (; i + (CKC_GEMV_DEPTH - 1) * 32 * 16 < k16; i += CKC_GEMV_DEPTH * 32 * 16) {
            lin_bytes16 b[CKC_GEMV_DEPTH];
            CKC_UNROLL
            for (int d = 0; d < CKC_GEMV_DEPTH; d++) {
                b[d] = *(const lin_bytes16 *)(w + i + d * 32 * 16);
            }
            CKC_UNROLL
            for (int d = 0; d < CKC_GEMV_DEPTH; d++) {
                int8_gemv_step(p, rows, i + d * 32 * 16, b[d], acc);
            }
        }
        for (; i < k16; i += 32 * 16) {
            int8_gemv_step(p, rows, i, *(const lin_bytes16 *)(w + i), acc);
        }
        for (int64_t t = k16 + lane; t < p.k; t += 32) {
            const int32_t wi = (int32_t)w[t];
            int32_t a[CKC_LINEAR_GEMV_ROWS] = {};
            CKC_UNROLL
            for (int r = 0; r < CKC_LINEAR_GEMV_ROWS; r++) {
                if (r < rows) {
                    a[r] = (int32_t)p.q[r * p.ldq + t];
                }
            }
            CKC_UNROLL
            for (int r = 0; r < CKC_LINEAR_GEMV_ROWS; r++) {
                acc[r] += a[r] * wi; /* rows past the chunk's add 0 and are never stored */
            }
        }
        ckc_gemv_store(p, rows, lane, j, acc);
    }
    ckc_done_mark_arrive(done);
}

CKC_KERNEL_INSTANCE(int8_gemv_kernel, __launch_bounds__(CKC_GEMV_WARPS * 32),
                    (ckc_int8_linear_params p, bool vec, ckc_done_mark done), (int8_gemv_body(p, vec, done)))

/* ---- the epilogue: out = round(float(acc) * (x_scale * w_scale) + round(bias)) ----
 *
 * Memory-bound: it reads the chunk's int32 accumulator (4 bytes per output)
 * and writes the output (2 or 4).  A thread finishes CKC_EPI_VEC consecutive
 * outputs per step, with 16-byte accesses (two loads of acc, one store of a
 * 16-bit output, two of float32), where the launcher checked the alignment
 * (lin_epilogue_layout); else one output per step.  The grid is capped at
 * CKC_EPI_MAX_BLOCKS (about eight 256-thread blocks per SM on an H200, enough
 * bytes in flight to cover DRAM latency) and threads walk the chunk's
 * [rows, n / VEC] vectors in grid-sized strides, carried as (rows, columns)
 * the host divided out once: no division in the loop.
 *
 * Fusing this into cuBLASLt's GEMM would need its epilogue to form
 * float(acc) * (x_scale[r] * w_scale[j]) in that order, from a per-row and a
 * per-column vector: cuBLASLt's int8 epilogues scale by alpha (one value, or
 * one vector) only, so the outer product would need a second rounding, and
 * the results would no longer be eager's bit for bit.  So it stays a kernel. */


/* VEC int32 accumulators from a (16-byte aligned when VEC = 8). */
template <int VEC>
__device__ __forceinline__ void
lin_load_acc(const int32_t *a, int32_t v[VEC])
{
    if (VEC == CKC_EPI_VEC) {
        CKC_UNROLL
        for (int q = 0; q < VEC / 4; q++) {
            const lin_bytes16 b = ((const lin_bytes16 *)a)[q];
            CKC_UNROLL
            for (int e = 0; e < 4; e++) {
                v[4 * q + e] = (int32_t)b.w[e];
            }
        }
    } else {
        CKC_UNROLL
        for (int e = 0; e < VEC; e++) {
            v[e] = a[e];
        }
    }
}

/* VEC float values of kind (float32, or a 16-bit type converted) from p[j..];
 * `vec`: p + j is 16-byte aligned. */
template <int VEC>
__device__ __forceinline__ void
lin_load_floats(const void *p, ckc_float_kind kind, int64_t j, bool vec, float v[VEC])
{
    if (VEC == CKC_EPI_VEC && vec && kind == CKC_F32) {
        CKC_UNROLL
        for (int q = 0; q < VEC / 4; q++) {
            const lin_bytes16 b = ((const lin_bytes16 *)((const float *)p + j))[q];
            CKC_UNROLL
            for (int e = 0; e < 4; e++) {
                v[4 * q + e] = ckc_f32_from_bits(b.w[e]);
            }
        }
    } else if (VEC == CKC_EPI_VEC && vec) {
        const lin_bytes16 b = *(const lin_bytes16 *)((const uint16_t *)p + j);
        CKC_UNROLL
        for (int e = 0; e < VEC; e++) {
            v[e] = ckc_half_value(kind, (uint16_t)(b.w[e / 2] >> (16 * (e % 2))));
        }
    } else {
        CKC_UNROLL
        for (int e = 0; e < VEC; e++) {
            v[e] = kind == CKC_F32 ? ((const float *)p)[j + e] : ckc_half_value(kind, ((const uint16_t *)p)[j + e]);
        }
    }
}

/* y rounded to out's kind into out[i..i + VEC) (16-byte aligned when VEC = 8). */
template <int VEC>
__device__ __forceinline__ void
lin_store(void *out, ckc_float_kind kind, int64_t i, const float y[VEC])
{
    if (VEC == CKC_EPI_VEC && kind == CKC_F32) {
        CKC_UNROLL
        for (int q = 0; q < VEC / 4; q++) {
            lin_bytes16 b;
            CKC_UNROLL
            for (int e = 0; e < 4; e++) {
                b.w[e] = ckc_f32_bits(y[4 * q + e]);
            }
            ((lin_bytes16 *)((float *)out + i))[q] = b;
        }
    } else if (VEC == CKC_EPI_VEC) {
        lin_bytes16 b;
        CKC_UNROLL
        for (int q = 0; q < 4; q++) {
            b.w[q] = (uint32_t)ckc_half_bits(kind, y[2 * q]) | ((uint32_t)ckc_half_bits(kind, y[2 * q + 1]) << 16);
        }
        *(lin_bytes16 *)((uint16_t *)out + i) = b;
    } else {
        CKC_UNROLL
        for (int e = 0; e < VEC; e++) {
            ckc_store_value(out, kind, i + e, y[e]);
        }
    }
}

/* Outputs (r, j .. j + VEC): ckc_linear_output's arithmetic (csrc/math/linear.h), with
 * the per-column vectors (weight scales, bias, the residual's scale) and the
 * residual's row loaded VEC at a time. */
template <int VEC>
__device__ __forceinline__ void
lin_epilogue_vector(const ckc_linear_epilogue_params &e, const lin_epilogue_layout &lay, int64_t r, int64_t j)
{
    int32_t acc[VEC];
    float ws[VEC];
    float bias[VEC];
    float y[VEC];
    const float sx = e.x_scale[r];
    lin_load_acc<VEC>(e.acc + r * e.ldacc + j, acc);
    if (e.w_per_channel) {
        lin_load_floats<VEC>(e.w_scale, CKC_F32, j, lay.ws_vec, ws);
    } else {
        CKC_UNROLL
        for (int i = 0; i < VEC; i++) {
            ws[i] = e.w_scale[0];
        }
    }
    if (e.terms.bias != NULL) {
        lin_load_floats<VEC>(e.terms.bias, e.terms.bias_kind, j, lay.bias_vec, bias);
    }
    CKC_UNROLL
    for (int i = 0; i < VEC; i++) {
        y[i] = ckc_linear_value(acc[i], sx, ws[i], e.terms.bias != NULL,
                                e.terms.bias != NULL ? ckc_round_to_kind(bias[i], e.out_kind) : 0.0f, e.out_kind);
    }
    if (e.terms.residual != NULL) {
        float res[VEC];
        float scale[VEC];
        lin_load_floats<VEC>(e.terms.residual, e.terms.residual_kind, r * e.n + j, lay.residual_vec, res);
        if (e.terms.residual_scale_per_channel) {
            lin_load_floats<VEC>(e.terms.residual_scale, e.terms.residual_scale_kind, j, lay.residual_scale_vec, scale);
        } else {
            lin_load_floats<1>(e.terms.residual_scale, e.terms.residual_scale_kind, 0, false, scale);
            CKC_UNROLL
            for (int i = 1; i < VEC; i++) {
                scale[i] = scale[0];
            }
        }
        CKC_UNROLL
        for (int i = 0; i < VEC; i++) {
            y[i] = ckc_linear_residual(y[i], ckc_round_to_kind(res[i], e.out_kind),
                                       ckc_round_to_kind(scale[i], e.out_kind));
        }
    }
    lin_store<VEC>(e.out, e.out_kind, r * e.n + j, y);
}

/* The chunk's outputs from its int32 accumulator, VEC at a time. */
template <int VEC>
__device__ __forceinline__ void
linear_epilogue_body(ckc_linear_epilogue_params e, lin_epilogue_layout lay, ckc_done_mark done)
{
    const uint32_t t = blockIdx.x * CKC_EPI_THREADS + threadIdx.x;
    int64_t r = t / lay.per_row;
    uint32_t c = t % lay.per_row;
    while (r < e.rows) {
        lin_epilogue_vector<VEC>(e, lay, r, (int64_t)c * VEC);
        c += lay.step_cols;
        r += lay.step_rows;
        if (c >= lay.per_row) {
            c -= lay.per_row;
            r++;
        }
    }
    ckc_done_mark_arrive(done);
}

#define CKC_EPILOGUE_INSTANCE(vec)                                                                              \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(linear_epilogue_kernel, vec), __launch_bounds__(CKC_EPI_THREADS),              \
                        (ckc_linear_epilogue_params e, lin_epilogue_layout lay, ckc_done_mark done),              \
                        (linear_epilogue_body<vec>(e, lay, done)))
CKC_EPILOGUE_KERNELS(CKC_EPILOGUE_INSTANCE)

/* rms_norm's row factor of each row (math/rms.h): one warp per row, its lanes
 * the cascade's streams, lane 0 the ending. */
__device__ __forceinline__ void
rms_factor_body(const void *x, ckc_float_kind kind, int64_t x_stride, int64_t k, float eps, float *factor)
{
    __shared__ float streams[CKC_RMS_STREAMS];
    const int t = (int)threadIdx.x;
    const int64_t r = blockIdx.x;
    const void *row = (const char *)x + r * x_stride * ckc_kind_size(kind);
    const int64_t lanes = ckc_rms_lanes(k);
    if (t < CKC_RMS_ILP * lanes) {
        streams[t] = ckc_rms_stream_sum(row, kind, lanes, k / lanes / CKC_RMS_ILP, t);
    }
    __syncthreads();
    if (t == 0) {
        factor[r] = ckc_rms_factor(ckc_rms_combine(row, kind, k, streams), k, eps);
    }
}

CKC_KERNEL_INSTANCE(rms_factor_kernel, __launch_bounds__(32),
                    (const void *x, ckc_float_kind kind, int64_t x_stride, int64_t k, float eps, float *factor),
                    (rms_factor_body(x, kind, x_stride, k, eps, factor)))
