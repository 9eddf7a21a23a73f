/* SPDX-License-Identifier: Apache-2.0 */
/* GPU kernels of the per-tensor FP8 family (launcher: csrc/gpu/launch_fp8.c).
 * Element-wise over the flat order: each thread takes chunks of 16 elements in
 * a grid-stride loop, one 16-byte access for the 16 codes and 16-byte accesses
 * for the values where the launcher found the tensors 16-byte aligned (`vec`),
 * element by element at the tail.  The element math is math/fp8.h, the same as
 * the CPU's, so both give eager's bits. */
#include "codes.cuh"
#include "done_mark.cuh"
#include "elements.cuh"
#include "row_tile.cuh"
#include "gpu/kernel_args.h"
#include "gpu/kernel_list.h"
#include "math/fp8.h"

#define CKC_FP8_BOUNDS __launch_bounds__(CKC_ROW_THREADS)

/* The first chunk of this thread and the grid's stride, in elements. */
#define CKC_FP8_LOOP(n)                                                                                        \
    for (int64_t start = ((int64_t)blockIdx.x * CKC_ROW_THREADS + threadIdx.x) * CKC_CHUNK; start < (n);       \
         start += (int64_t)gridDim.x * CKC_ROW_THREADS * CKC_CHUNK)

template <ckc_float_kind KIND>
__device__ __forceinline__ void
fp8_quant_body(ckc_quantize_per_tensor_fp8_params p, bool x_vec, bool q_vec, ckc_done_mark done)
{
    const float inv = ckc_fp8_inverse_scale(*p.scale, KIND);
    CKC_FP8_LOOP(p.numel)
    {
        float v[CKC_CHUNK];
        uint8_t c[CKC_CHUNK];
        ckc_load_chunk<KIND>(p.x, start, p.numel, x_vec, v);
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            c[e] = ckc_fp8_quantize(v[e], inv, KIND, p.e5m2);
        }
        ckc_fp8_store_codes(p.q, start, p.numel, q_vec, c);
    }
    ckc_done_mark_arrive(done);
}

template <ckc_float_kind KIND>
__device__ __forceinline__ void
fp8_dequant_body(ckc_dequantize_per_tensor_fp8_params p, bool x_vec, bool out_vec, ckc_done_mark done)
{
    const float scale = ckc_round_to_kind(*p.scale, KIND);
    CKC_FP8_LOOP(p.numel)
    {
        uint8_t c[CKC_CHUNK];
        float v[CKC_CHUNK];
        ckc_fp8_load_codes(p.x, start, p.numel, x_vec, c);
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            v[e] = ckc_fp8_dequantize(c[e], scale, KIND, p.e5m2);
        }
        ckc_store_chunk<KIND>(p.out, start, p.numel, out_vec, v);
    }
    ckc_done_mark_arrive(done);
}

template <ckc_float_kind KIND>
__device__ __forceinline__ void
fp8_stochastic_body(ckc_stochastic_rounding_fp8_params p, bool x_vec, bool q_vec, ckc_done_mark done)
{
    CKC_FP8_LOOP(p.numel)
    {
        float v[CKC_CHUNK];
        uint8_t r[CKC_CHUNK];
        uint8_t c[CKC_CHUNK];
        ckc_load_chunk<KIND>(p.x, start, p.numel, x_vec, v);
        ckc_fp8_load_codes(p.rng, start, p.numel, q_vec, r);
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            /* x.half(): the op's arithmetic is float16's whatever x's type */
            c[e] = ckc_fp8_stochastic(ckc_round_to_kind(v[e], CKC_F16), r[e], p.e5m2);
        }
        ckc_fp8_store_codes(p.q, start, p.numel, q_vec, c);
    }
    ckc_done_mark_arrive(done);
}

#define CKC_FP8_INSTANCES(k)                                                                                    \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(fp8_quant_kernel, k), CKC_FP8_BOUNDS,                                          \
                        (ckc_quantize_per_tensor_fp8_params p, bool x_vec, bool q_vec, ckc_done_mark done),       \
                        (fp8_quant_body<(ckc_float_kind)k>(p, x_vec, q_vec, done)))                               \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(fp8_dequant_kernel, k), CKC_FP8_BOUNDS,                                        \
                        (ckc_dequantize_per_tensor_fp8_params p, bool x_vec, bool out_vec, ckc_done_mark done),   \
                        (fp8_dequant_body<(ckc_float_kind)k>(p, x_vec, out_vec, done)))                           \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(fp8_stochastic_kernel, k), CKC_FP8_BOUNDS,                                     \
                        (ckc_stochastic_rounding_fp8_params p, bool x_vec, bool q_vec, ckc_done_mark done),       \
                        (fp8_stochastic_body<(ckc_float_kind)k>(p, x_vec, q_vec, done)))
CKC_FP8_KERNELS(CKC_FP8_INSTANCES)
