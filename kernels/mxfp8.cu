/* SPDX-License-Identifier: Apache-2.0 */
/* GPU kernels of the MXFP8 family (launcher: csrc/gpu/launch_mxfp8.c).  One
 * thread per block of 32 values: two 16-value chunks in registers (16-byte
 * loads where the launcher found the rows aligned), the block's E8M0 scale at
 * its swizzled offset, 32 codes out in two 16-byte stores.  The quantizer's
 * grid covers the whole swizzled scale buffer, so the threads of its padding
 * entries (rows up to 128, scale columns up to 4) write scale 0 there: the op
 * allocates it uninitialized.  The math is math/mxfp8.h, the CPU kernels', so
 * both give eager's bits. */
#include "codes.cuh"
#include "done_mark.cuh"
#include "elements.cuh"
#include "row_tile.cuh"
#include "gpu/kernel_args.h"
#include "gpu/kernel_list.h"
#include "math/mxfp8.h"

#define CKC_MXFP8_BOUNDS __launch_bounds__(CKC_ROW_THREADS)

/* The largest magnitude's bits of 16 values, or m if larger (a NaN's bits are above infinity's). */
__device__ __forceinline__ uint32_t
ckc_mxfp8_absmax_bits(const float v[CKC_CHUNK], uint32_t m)
{
    CKC_UNROLL
    for (int e = 0; e < CKC_CHUNK; e++) {
        const uint32_t b = ckc_f32_bits(v[e]) & 0x7FFFFFFFu;
        m = b > m ? b : m;
    }
    return m;
}

/* The codes of 16 values of a block (its multiplier and zero flag given) into row[start..]. */
__device__ __forceinline__ void
ckc_mxfp8_store_half(uint8_t *row, int64_t start, int64_t n, bool vec, const float v[CKC_CHUNK], float inverse,
                     int zero)
{
    uint8_t c[CKC_CHUNK];
    CKC_UNROLL
    for (int e = 0; e < CKC_CHUNK; e++) {
        c[e] = ckc_mxfp8_code(v[e], inverse, zero);
    }
    ckc_fp8_store_codes(row, start, n, vec, c);
}

/* Thread b stands for entry (b / buffer_cols, b % buffer_cols) of the swizzled
 * buffer's logical [scale rows][buffer_cols] view: a block of x (zeros past x
 * for pad_32x), or padding. */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
mxfp8_quant_body(ckc_quantize_mxfp8_params p, bool x_vec, bool q_vec, ckc_done_mark done)
{
    const int64_t scale_cols = p.out_cols / CKC_MXFP8_BLOCK;
    const int64_t buffer_cols = ckc_nvfp4_scale_cols(scale_cols);
    const int64_t b = (int64_t)blockIdx.x * CKC_ROW_THREADS + threadIdx.x;
    const int64_t r = b / buffer_cols;
    const int64_t c = b % buffer_cols;
    if (r < p.out_rows && c < scale_cols) {
        const bool in_x = r < p.rows;
        const void *row = (const char *)p.x + (in_x ? r : 0) * p.cols * ckc_kind_size(KIND);
        const int64_t start = c * CKC_MXFP8_BLOCK;
        float lo[CKC_CHUNK];
        float hi[CKC_CHUNK];
        ckc_load_chunk<KIND>(row, start, in_x ? p.cols : 0, x_vec, lo);
        ckc_load_chunk<KIND>(row, start + CKC_CHUNK, in_x ? p.cols : 0, x_vec, hi);
        const uint32_t bits = ckc_mxfp8_absmax_bits(hi, ckc_mxfp8_absmax_bits(lo, 0u));
        const uint8_t scale = ckc_mxfp8_block_scale(ckc_f32_from_bits(bits));
        const int zero = bits == 0u;
        const float inverse = ckc_mxfp8_inverse(scale, zero);
        uint8_t *qrow = p.qx + r * p.out_cols;
        ckc_mxfp8_store_half(qrow, start, p.out_cols, q_vec, lo, inverse, zero);
        ckc_mxfp8_store_half(qrow, start + CKC_CHUNK, p.out_cols, q_vec, hi, inverse, zero);
        p.scales[ckc_nvfp4_scale_offset(r, c, scale_cols)] = scale;
    } else if (r < ckc_nvfp4_scale_rows(p.out_rows)) {
        p.scales[ckc_nvfp4_scale_offset(r, c, scale_cols)] = 0;
    }
    ckc_done_mark_arrive(done);
}

/* 16 codes of a block decoded against its scale and stored to out's row[start..]. */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
ckc_mxfp8_decode_half(void *row, int64_t start, int64_t n, bool vec, const uint8_t c[CKC_CHUNK], float scale)
{
    float v[CKC_CHUNK];
    CKC_UNROLL
    for (int e = 0; e < CKC_CHUNK; e++) {
        v[e] = ckc_mxfp8_decoded(c[e], scale);
    }
    ckc_store_chunk<KIND>(row, start, n, vec, v);
}

/* One thread per block of 32 codes; threads past the last block store nothing. */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
mxfp8_dequant_body(ckc_dequantize_mxfp8_params p, bool q_vec, bool out_vec, ckc_done_mark done)
{
    const int64_t scale_cols = p.cols / CKC_MXFP8_BLOCK;
    const int64_t b = (int64_t)blockIdx.x * CKC_ROW_THREADS + threadIdx.x;
    if (b < p.rows * scale_cols) {
        const int64_t r = b / scale_cols;
        const int64_t c = b % scale_cols;
        const int64_t start = c * CKC_MXFP8_BLOCK;
        const uint8_t *qrow = p.qx + r * p.cols;
        void *row = (char *)p.out + r * p.cols * ckc_kind_size(KIND);
        const float scale = ckc_e8m0_to_f32(p.scales[ckc_nvfp4_scale_offset(r, c, scale_cols)]);
        uint8_t lo[CKC_CHUNK];
        uint8_t hi[CKC_CHUNK];
        ckc_fp8_load_codes(qrow, start, p.cols, q_vec, lo);
        ckc_fp8_load_codes(qrow, start + CKC_CHUNK, p.cols, q_vec, hi);
        ckc_mxfp8_decode_half<KIND>(row, start, p.cols, out_vec, lo, scale);
        ckc_mxfp8_decode_half<KIND>(row, start + CKC_CHUNK, p.cols, out_vec, hi, scale);
    }
    ckc_done_mark_arrive(done);
}

#define CKC_MXFP8_INSTANCES(k)                                                                                  \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(mxfp8_quant_kernel, k), CKC_MXFP8_BOUNDS,                                      \
                        (ckc_quantize_mxfp8_params p, bool x_vec, bool q_vec, ckc_done_mark done),                \
                        (mxfp8_quant_body<(ckc_float_kind)k>(p, x_vec, q_vec, done)))                             \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(mxfp8_dequant_kernel, k), CKC_MXFP8_BOUNDS,                                    \
                        (ckc_dequantize_mxfp8_params p, bool q_vec, bool out_vec, ckc_done_mark done),            \
                        (mxfp8_dequant_body<(ckc_float_kind)k>(p, q_vec, out_vec, done)))
CKC_MXFP8_KERNELS(CKC_MXFP8_INSTANCES)
