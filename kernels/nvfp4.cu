/* SPDX-License-Identifier: Apache-2.0 */
/* GPU kernels of the NVFP4 family (launchers: csrc/gpu/launch_nvfp4.c).  One thread per block of
 * 16 values: it reads them (zeros past the input for pad_16x), writes its e4m3
 * scale at the swizzled offset and 8 bytes of packed codes.  The quantizer's
 * grid also covers the padding of the swizzled scale buffer (rows up to 128,
 * scale columns up to 4), whose threads write scale 0 there: the op allocates
 * the buffer uninitialized, and a memset would be one more launch per call.
 * Every thread checks its index against the output, so no kernel touches
 * memory past its tensors whatever the tile counts (comfy_kitchen's own
 * kernels write past the end when (rows/16)*(cols/16) is odd).
 *
 * quantize_and_rotate_nvfp4 is the same kernel with the ConvRot rotation on the
 * load (row_tile.cuh): a group of G columns is held by G/16 consecutive threads,
 * which lie in one warp (G <= 256, and rows hold whole groups, so a group's first
 * thread index is a multiple of G/16); they rotate it in registers and warp
 * shuffles, round it to x's type and quantize it: one read of x, one write of
 * codes and scales. */
#include "done_mark.cuh"
#include "elements.cuh"
#include "gpu/kernel_args.h"
#include "gpu/kernel_list.h"
#include "math/nvfp4.h"
#include "row_tile.cuh"
#include "tile.cuh"


/* A block's 8 bytes of packed codes: one 8-byte access where the launcher found
 * the code rows 8-byte aligned (`vec`), else byte by byte. */
__device__ __forceinline__ void
ckc_store_packed(uint8_t *out, bool vec, const uint8_t bytes[CKC_NVFP4_BLOCK / 2])
{
    if (vec) {
        ckc_bytes8 b;
        CKC_UNROLL
        for (int w = 0; w < 2; w++) {
            b.w[w] = (uint32_t)bytes[4 * w] | (uint32_t)bytes[4 * w + 1] << 8 | (uint32_t)bytes[4 * w + 2] << 16 |
                     (uint32_t)bytes[4 * w + 3] << 24;
        }
        *(ckc_bytes8 *)out = b;
        return;
    }
    CKC_UNROLL
    for (int j = 0; j < CKC_NVFP4_BLOCK / 2; j++) {
        out[j] = bytes[j];
    }
}

/* The same 8 bytes read back (the dequantizer's codes). */
__device__ __forceinline__ void
ckc_load_packed(const uint8_t *in, bool vec, uint8_t bytes[CKC_NVFP4_BLOCK / 2])
{
    if (vec) {
        const ckc_bytes8 b = *(const ckc_bytes8 *)in;
        CKC_UNROLL
        for (int j = 0; j < CKC_NVFP4_BLOCK / 2; j++) {
            bytes[j] = (uint8_t)(b.w[j / 4] >> (8 * (j % 4)));
        }
        return;
    }
    CKC_UNROLL
    for (int j = 0; j < CKC_NVFP4_BLOCK / 2; j++) {
        bytes[j] = in[j];
    }
}


/* The work of the thread that stands for entry (r, c) of the swizzled scale
 * buffer's logical [scale rows][buffer_cols] view: a block of 16 values where that
 * is inside [out_rows][scale_cols], else padding.  `t`: the thread's index among
 * the lanes of its rotation group (a group's first thread index is a multiple of
 * G/16).  `vec`: x's rows allow vector loads; `q_vec`: the code rows allow 8-byte
 * stores.  Threads of padding entries load nothing and store no codes, but stay
 * for the rotation's shuffles and reach the completion mark with their block. */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
nvfp4_quant_entry(const ckc_quantize_nvfp4_params &p, float pts, int64_t r, int64_t c, int t, bool vec, bool q_vec)
{
    const int64_t scale_cols = p.out_cols / CKC_NVFP4_BLOCK;
    const bool in_buffer = r < ckc_nvfp4_scale_rows(p.out_rows) && c < ckc_nvfp4_scale_cols(scale_cols);
    const bool is_block = r < p.out_rows && c < scale_cols;
    const bool in_x = is_block && r < p.rows;
    const int64_t elem = ckc_kind_size(KIND);
    const void *row = in_x ? (const void *)((const char *)p.x + r * p.cols * elem) : p.x;
    float v[CKC_NVFP4_BLOCK];
    /* Rows past x (pad_16x) read as zeros: limit 0.  G <= 256 never needs `exchange`. */
    ckc_load_chunk<KIND>(row, c * CKC_NVFP4_BLOCK, in_x ? p.cols : 0, vec, v);
    ckc_transform_chunk<KIND, CKC_ACT_NONE>(v, NULL, (int)p.group, t, NULL);
    if (is_block) {
        uint32_t bits = 0;
        CKC_UNROLL
        for (int j = 0; j < CKC_NVFP4_BLOCK; j++) {
            const uint32_t m = ckc_f32_bits(v[j]) & 0x7FFFFFFFu;
            bits = m > bits ? m : bits;
        }
        const uint8_t scale = ckc_nvfp4_block_scale(ckc_f32_from_bits(bits), pts);
        const float total = ckc_nvfp4_total_scale(scale, pts);
        p.scales[ckc_nvfp4_scale_offset(r, c, scale_cols)] = scale;
        uint8_t bytes[CKC_NVFP4_BLOCK / 2];
        CKC_UNROLL
        for (int j = 0; j < CKC_NVFP4_BLOCK; j += 2) {
            bytes[j / 2] = ckc_nvfp4_pack(ckc_nvfp4_code(v[j], total), ckc_nvfp4_code(v[j + 1], total), p.hi_first);
        }
        ckc_store_packed(p.qx + r * (p.out_cols / 2) + c * (CKC_NVFP4_BLOCK / 2), q_vec, bytes);
    } else if (in_buffer) {
        p.scales[ckc_nvfp4_scale_offset(r, c, scale_cols)] = 0;
    }
}

/* One thread per entry of the whole scale buffer, in a grid of 1-D blocks: the
 * general layout (thread b stands for entry (b / buffer_cols, b % buffer_cols)). 
 * The rotation's groups stay whole: G >= 64 makes scale_cols a multiple of G/16
 * >= 4, so buffer_cols == scale_cols and a row holds whole groups; G = 16
 * shuffles nothing.  The grid holds exactly the buffer's entries (a multiple of
 * 128 rows), but every thread still checks it is inside the buffer. */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
nvfp4_quant_body(ckc_quantize_nvfp4_params p, bool vec, bool q_vec, ckc_done_mark done)
{
    const float pts = *p.per_tensor_scale;
    const int64_t buffer_cols = ckc_nvfp4_scale_cols(p.out_cols / CKC_NVFP4_BLOCK);
    const int t = (int)threadIdx.x;
    const int64_t b = (int64_t)blockIdx.x * CKC_NVFP4_THREADS + t;
    nvfp4_quant_entry<KIND>(p, pts, b / buffer_cols, b % buffer_cols, t, vec, q_vec);
    ckc_done_mark_arrive(done);
}


/* The row layout (kernels/tile.cuh's geometry, one 16-value block per thread):
 * threadIdx.x is the entry's column, threadIdx.y its row in the block, so no
 * thread divides, and rows of buffer_cols entries fill whole warps.  The per-tensor
 * scale is loaded first, with the values.  At most 56 registers: three blocks of
 * 384 threads (rows of 3072) per SM keep the bytes in flight the model asks for;
 * the completion mark's replay stamp had pushed it to 64 (two blocks). */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
nvfp4_quant_rows_body(ckc_quantize_nvfp4_params p, ckc_tile_geom g, bool vec, bool q_vec, ckc_done_mark done)
{
    const float pts = *p.per_tensor_scale;
    const int64_t r = (int64_t)blockIdx.x * g.rows_per_block + threadIdx.y;
    nvfp4_quant_entry<KIND>(p, pts, r, threadIdx.x, (int)threadIdx.x, vec, q_vec);
    ckc_done_mark_arrive(done);
}

#define CKC_NVFP4_QUANT_INSTANCES(k)                                                                            \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(nvfp4_quant_kernel, k), __launch_bounds__(CKC_NVFP4_THREADS),                  \
                        (ckc_quantize_nvfp4_params p, bool vec, bool q_vec, ckc_done_mark done),                     \
                        (nvfp4_quant_body<(ckc_float_kind)k>(p, vec, q_vec, done)))                               \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(nvfp4_quant_rows_kernel, k), CKC_MAX_REGISTERS(56),                            \
                        (ckc_quantize_nvfp4_params p, ckc_tile_geom g, bool vec, bool q_vec, ckc_done_mark done),    \
                        (nvfp4_quant_rows_body<(ckc_float_kind)k>(p, g, vec, q_vec, done)))
CKC_KIND_KERNELS(CKC_NVFP4_QUANT_INSTANCES)

/* `q_vec`: the code rows allow 8-byte loads; `out_vec`: out's rows allow vector stores. */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
nvfp4_dequant_body(ckc_dequantize_nvfp4_params p, bool q_vec, bool out_vec, ckc_done_mark done)
{
    const int64_t scale_cols = p.cols / CKC_NVFP4_BLOCK;
    const int64_t b = (int64_t)blockIdx.x * CKC_NVFP4_THREADS + threadIdx.x;
    /* Threads past the last block store nothing, but reach the mark with their block. */
    if (b < p.rows * scale_cols) {
        const int64_t r = b / scale_cols;
        const int64_t c = b % scale_cols;
        /* Eager forms per_tensor_scale * block_scale in the output type. */
        const float pts = ckc_round_to_kind(*p.per_tensor_scale, KIND);
        const float block = ckc_e4m3_to_f32(p.scales[ckc_nvfp4_scale_offset(r, c, scale_cols)]);
        const float total = ckc_round_to_kind(pts * block, KIND);
        uint8_t bytes[CKC_NVFP4_BLOCK / 2];
        ckc_load_packed(p.qx + r * (p.cols / 2) + c * (CKC_NVFP4_BLOCK / 2), q_vec, bytes);
        float v[CKC_NVFP4_BLOCK];
        CKC_UNROLL
        for (int j = 0; j < CKC_NVFP4_BLOCK / 2; j++) {
            v[2 * j] = ckc_e2m1_to_f32(ckc_nvfp4_unpack_even(bytes[j], p.hi_first)) * total;
            v[2 * j + 1] = ckc_e2m1_to_f32(ckc_nvfp4_unpack_odd(bytes[j], p.hi_first)) * total;
        }
        ckc_store_chunk<KIND>((char *)p.out + r * p.cols * ckc_kind_size(KIND), c * CKC_NVFP4_BLOCK, p.cols, out_vec,
                              v);
    }
    ckc_done_mark_arrive(done);
}

/* ckc_e2m1_to_f32 without a conversion instruction: magnitudes 2..7 are
 * 0x3F000000 + (m << 22) (1, 1.5, 2, 3, 4, 6), 1 is 0.5, 0 is 0. */
__device__ __forceinline__ float
ckc_nvfp4_value(uint32_t code)
{
    const uint32_t m = code & 0x7u;
    const uint32_t mag = m >= 2u ? 0x3F000000u + (m << 22) : (m != 0u ? 0x3F000000u : 0u);
    return ckc_f32_from_bits(mag | (code & 0x8u) << 28);
}


/* Four consecutive blocks of a row per thread (kernels/tile.cuh's geometry over
 * cols / 64 threads per row): two 16-byte code loads, their four scales (adjacent
 * bytes of the swizzled buffer: one 4-byte load) and the per-tensor scale, all
 * issued first; then two blocks at a time decoded and stored with 16-byte stores.
 * Eager forms per_tensor_scale * block_scale in the output type; a value is a NaN
 * only when its block's total scale is not finite (e2m1 values are finite, and
 * 0 * inf is a NaN). */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
nvfp4_dequant_rows_body(ckc_dequantize_nvfp4_params p, ckc_tile_geom g, ckc_done_mark done)
{
    const float pts_in = *p.per_tensor_scale;
    const int64_t r = (int64_t)blockIdx.x * g.rows_per_block + threadIdx.y;
    const bool live = r < p.rows;
    const int64_t row = live ? r : 0; /* threads of rows past the tensor read its first row, store nothing */
    const int64_t scale_cols = p.cols / CKC_NVFP4_BLOCK;
    const int64_t c = (int64_t)threadIdx.x * CKC_NVFP4_ROW_BLOCKS;
    const ckc_bytes16 *src = (const ckc_bytes16 *)(p.qx + row * (p.cols / 2) + c * (CKC_NVFP4_BLOCK / 2));
    const ckc_bytes16 lo = src[0], hi = src[1];
    const uint32_t scales = *(const uint32_t *)(p.scales + ckc_nvfp4_scale_offset(row, c, scale_cols));
    uint32_t w[8] = {lo.w[0], lo.w[1], lo.w[2], lo.w[3], hi.w[0], hi.w[1], hi.w[2], hi.w[3]};
    ckc_tile_together(w, w + 4, 4, g.zero);
    const float pts = ckc_round_to_kind(pts_in, KIND);
    char *out = (char *)p.out + row * p.cols * ckc_kind_size(KIND);
    CKC_UNROLL
    for (int half = 0; half < 2; half++) {
        bool finite = true;
        float v[CKC_TILE];
        CKC_UNROLL
        for (int b = 0; b < 2; b++) {
            const int block = 2 * half + b;
            const float total = ckc_round_to_kind(pts * ckc_e4m3_to_f32((uint8_t)(scales >> (8 * block))), KIND);
            finite = finite && total - total == 0.0f;
            CKC_UNROLL
            for (int j = 0; j < CKC_NVFP4_BLOCK / 2; j++) {
                const uint8_t byte = (uint8_t)(w[2 * block + j / 4] >> (8 * (j % 4)));
                v[16 * b + 2 * j] = ckc_nvfp4_value(ckc_nvfp4_unpack_even(byte, p.hi_first)) * total;
                v[16 * b + 2 * j + 1] = ckc_nvfp4_value(ckc_nvfp4_unpack_odd(byte, p.hi_first)) * total;
            }
        }
        ckc_tile_store_values<KIND>(out, (c + 2 * half) * CKC_NVFP4_BLOCK, live, v, !finite);
    }
    ckc_done_mark_arrive(done);
}

#define CKC_NVFP4_DEQUANT_INSTANCES(k)                                                                          \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(nvfp4_dequant_kernel, k), __launch_bounds__(CKC_NVFP4_THREADS),                \
                        (ckc_dequantize_nvfp4_params p, bool q_vec, bool out_vec, ckc_done_mark done),               \
                        (nvfp4_dequant_body<(ckc_float_kind)k>(p, q_vec, out_vec, done)))                         \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(nvfp4_dequant_rows_kernel, k), __launch_bounds__(CKC_TILE_MAX_THREADS),        \
                        (ckc_dequantize_nvfp4_params p, ckc_tile_geom g, ckc_done_mark done),                        \
                        (nvfp4_dequant_rows_body<(ckc_float_kind)k>(p, g, done)))
CKC_KIND_KERNELS(CKC_NVFP4_DEQUANT_INSTANCES)
