/* SPDX-License-Identifier: Apache-2.0 */
/* GPU kernels of the NVFP4 family and their launchers.  One thread per block of
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
#include "gpu/launch.h"
#include "math/nvfp4.h"
#include "row_tile.cuh"

#define CKC_NVFP4_THREADS 128

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

/* Whether rows of packed codes (cols / 2 bytes each) allow ckc_store_packed's and
 * ckc_load_packed's 8-byte accesses. */
static bool
packed_rows_aligned(const uint8_t *qx, int64_t cols)
{
    return ckc_rows_aligned(qx, cols / 2, CKC_NVFP4_BLOCK / 2);
}

/* `vec`: x's rows allow vector loads; `q_vec`: the code rows allow 8-byte stores.
 * Thread b stands for entry (b / buffer_cols, b % buffer_cols) of the swizzled
 * scale buffer's logical [scale rows][buffer_cols] view: a block of 16 values
 * where that is inside [out_rows][scale_cols], else padding. */
template <ckc_float_kind KIND>
__global__ void __launch_bounds__(CKC_NVFP4_THREADS)
nvfp4_quant_kernel(ckc_nvfp4_quant_params p, bool vec, bool q_vec, ckc_done_mark done)
{
    const int64_t scale_cols = p.out_cols / CKC_NVFP4_BLOCK;
    const int64_t buffer_cols = ckc_nvfp4_scale_cols(scale_cols);
    const int t = (int)threadIdx.x;
    const int64_t b = (int64_t)blockIdx.x * CKC_NVFP4_THREADS + t;
    const int64_t r = b / buffer_cols;
    const int64_t c = b % buffer_cols;
    /* Threads of padding entries load nothing and store no codes, but stay for
     * the rotation's shuffles and reach the completion mark with their block.
     * The rotation's groups stay whole: G >= 64 makes scale_cols a multiple of
     * G/16 >= 4, so buffer_cols == scale_cols and a row holds whole groups (a
     * group's first thread index is a multiple of G/16); G = 16 shuffles
     * nothing.  The grid holds exactly the buffer's entries (a multiple of 128
     * rows), but every thread still checks it is inside the buffer. */
    const bool in_buffer = r < ckc_nvfp4_scale_rows(p.out_rows);
    const bool is_block = r < p.out_rows && c < scale_cols;
    const bool in_x = is_block && r < p.rows;
    const int64_t elem = ckc_kind_size(KIND);
    const void *row = in_x ? (const void *)((const char *)p.x + r * p.cols * elem) : p.x;
    float v[CKC_NVFP4_BLOCK];
    /* Rows past x (pad_16x) read as zeros: limit 0.  G <= 256 never needs `exchange`. */
    ckc_load_chunk<KIND>(row, c * CKC_NVFP4_BLOCK, in_x ? p.cols : 0, vec, v);
    ckc_transform_chunk<KIND, CKC_ACT_NONE>(v, NULL, (int)p.group, t, NULL);
    if (is_block) {
        const float pts = *p.per_tensor_scale;
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
    ckc_done_mark_arrive(done);
}

/* The grid of CKC_NVFP4_THREADS-thread blocks for `threads` threads. */
static dim3
grid_for(int64_t threads)
{
    return dim3((unsigned)((threads + CKC_NVFP4_THREADS - 1) / CKC_NVFP4_THREADS));
}

extern "C" ckc_status
ckc_gpu_nvfp4_quant(const ckc_nvfp4_quant_params *p, ckc_exec *exec, ckc_error *err)
{
    const bool vec = ckc_aligned16(p->x, p->cols * ckc_kind_size(p->kind));
    const bool q_vec = packed_rows_aligned(p->qx, p->out_cols);
    /* One thread per entry of the whole scale buffer (nvfp4_quant_kernel). */
    const int64_t threads =
        ckc_nvfp4_scale_rows(p->out_rows) * ckc_nvfp4_scale_cols(p->out_cols / CKC_NVFP4_BLOCK);
    return ckc_on_device(exec, err, [&]() {
        return ckc_with_kind(p->kind, [&](auto kind) {
            void (*nvfp4_quant)(ckc_nvfp4_quant_params, bool, bool, ckc_done_mark) =
                nvfp4_quant_kernel<decltype(kind)::value>;
            CKC_LAUNCH(nvfp4_quant, grid_for(threads), dim3(CKC_NVFP4_THREADS), 0, exec->stream, *p, vec, q_vec,
                       ckc_exec_take_done_mark(exec));
            return ckc_gpu_launch_status("nvfp4_quant_kernel", err);
        });
    });
}

/* `q_vec`: the code rows allow 8-byte loads; `out_vec`: out's rows allow vector stores. */
template <ckc_float_kind KIND>
__global__ void __launch_bounds__(CKC_NVFP4_THREADS)
nvfp4_dequant_kernel(ckc_nvfp4_dequant_params p, bool q_vec, bool out_vec, ckc_done_mark done)
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

extern "C" ckc_status
ckc_gpu_nvfp4_dequant(const ckc_nvfp4_dequant_params *p, ckc_exec *exec, ckc_error *err)
{
    const bool q_vec = packed_rows_aligned(p->qx, p->cols);
    const bool out_vec = ckc_aligned16(p->out, p->cols * ckc_kind_size(p->out_kind));
    return ckc_on_device(exec, err, [&]() {
        return ckc_with_kind(p->out_kind, [&](auto kind) {
            void (*nvfp4_dequant)(ckc_nvfp4_dequant_params, bool, bool, ckc_done_mark) =
                nvfp4_dequant_kernel<decltype(kind)::value>;
            CKC_LAUNCH(nvfp4_dequant, grid_for(p->rows * (p->cols / CKC_NVFP4_BLOCK)), dim3(CKC_NVFP4_THREADS), 0,
                       exec->stream, *p, q_vec, out_vec, ckc_exec_take_done_mark(exec));
            return ckc_gpu_launch_status("nvfp4_dequant_kernel", err);
        });
    });
}
