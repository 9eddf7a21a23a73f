/* SPDX-License-Identifier: Apache-2.0 */
/* GPU kernels of the int8 family: row-wise quantization (fused with the ConvRot
 * rotation: one read of the row, one write of codes and scale), tensor-wise
 * quantization, the plain rotation, dequantization.  One block per row; see
 * row_tile.cuh for the layout.  Rows longer than one segment of registers are
 * read twice (absmax pass, then quantize pass).  Device code only: the launchers
 * are csrc/gpu/launch_int8.c, the instances csrc/gpu/kernel_list.h. */
#include "done_mark.cuh"
#include "elements.cuh"
#include "row_tile.cuh"
#include "tile.cuh" /* the dequantizer's codes to floats and 16-bit stores */

#include "gpu/kernel_args.h"
#include "gpu/kernel_list.h"
#include "math/activation.h"
#include "math/int8_quant.h"

/* The row kernels ask for at least 2 resident blocks per SM: that lets ptxas use
 * up to 128 registers, which 4 chunks need on every target (its default budget
 * for 256-thread blocks spilled on sm_75/86/89). */
#define CKC_ROW_MIN_BLOCKS 2
#define CKC_ROW_BOUNDS __launch_bounds__(CKC_ROW_THREADS, CKC_ROW_MIN_BLOCKS)
#define CKC_ONE_ROW_BOUNDS __launch_bounds__(CKC_ROW_THREADS)

/* ---- row-wise quantization (optionally activated and rotated) ---- */

/* Stores a chunk's codes at row + start, those at or past `limit` left out.
 * `vec`: the rows are 16-byte aligned, so a whole chunk is one store. */
__device__ __forceinline__ void
ckc_store_codes(int8_t *row, int64_t start, int64_t limit, bool vec, const int8_t codes[CKC_CHUNK])
{
    if (vec && start + CKC_CHUNK <= limit) {
        ckc_bytes16 b;
        CKC_UNROLL
        for (int w = 0; w < 4; w++) {
            b.w[w] = 0;
            CKC_UNROLL
            for (int i = 0; i < 4; i++) {
                b.w[w] |= (uint32_t)(uint8_t)codes[4 * w + i] << (8 * i);
            }
        }
        *(ckc_bytes16 *)(row + start) = b;
        return;
    }
    CKC_UNROLL
    for (int e = 0; e < CKC_CHUNK; e++) {
        if (start + e < limit) {
            row[start + e] = codes[e];
        }
    }
}

/* `vec`: x's rows (and noise's, and the up halves for swiglu) allow vector loads;
 * `q_vec`: the code rows (q_stride apart) allow vector stores. */
template <ckc_float_kind KIND, int CHUNKS, int ACT>
__device__ __forceinline__ void
int8_rowwise_body(ckc_quantize_int8_rowwise_params p, ckc_row_layout lay, bool vec, bool q_vec, ckc_done_mark done)
{
    CKC_DYNAMIC_SHARED(float, exchange); /* ckc_rotation_exchange_bytes(p.group) */
    __shared__ uint32_t partials[CKC_ROW_THREADS / 32];
    const int t = (int)threadIdx.x;
    const int64_t r = blockIdx.x;
    const int64_t k = p.cols;
    const int64_t elem = ckc_kind_size(KIND);
    const void *row = (const char *)p.x + r * lay.x_stride * elem;
    const int64_t segment = CKC_ROW_SEGMENT(CHUNKS);
    const int segments = (int)((k + segment - 1) / segment);
    const ckc_row_act act = {lay.args, ACT == CKC_ACT_COLUMNWISE && lay.args.row_factor != NULL ? lay.args.row_factor[r]
                                                                                              : 0.0f};
    float v[CHUNKS][CKC_CHUNK];
    uint32_t bits = 0;

    /* Pass 1: the quantizer's values and their absmax. */
    for (int s = 0; s < segments; s++) {
        ckc_rotated_segment<KIND, ACT, CHUNKS>(row, s * segment, k, vec, (int)p.group, t, exchange, v, act);
        CKC_UNROLL
        for (int c = 0; c < CHUNKS; c++) {
            CKC_UNROLL
            for (int e = 0; e < CKC_CHUNK; e++) {
                const uint32_t b = ckc_f32_bits(v[c][e]) & 0x7FFFFFFFu;
                bits = b > bits ? b : bits;
            }
        }
    }
    const float scale = ckc_int8_scale(ckc_block_absmax(bits, partials));
    const float math_scale = ckc_int8_math_scale(scale, KIND);
    if (t == 0) {
        p.scale[r] = scale;
    }

    /* Pass 2: codes (the values are still in registers when the row is one
     * segment); the padding columns k .. q_stride - 1, all inside the chunk
     * holding column k - 1, get zeros. */
    for (int s = 0; s < segments; s++) {
        if (segments > 1) {
            ckc_rotated_segment<KIND, ACT, CHUNKS>(row, s * segment, k, vec, (int)p.group, t, exchange, v, act);
        }
        CKC_UNROLL
        for (int c = 0; c < CHUNKS; c++) {
            const int64_t start = s * segment + ((int64_t)c * CKC_ROW_THREADS + t) * CKC_CHUNK;
            float noise[CKC_CHUNK];
            if (p.noise != NULL) {
                ckc_load_chunk<KIND>((const char *)p.noise + r * k * elem, start, k, vec, noise);
            }
            int8_t codes[CKC_CHUNK];
            CKC_UNROLL
            for (int e = 0; e < CKC_CHUNK; e++) {
                codes[e] = start + e >= k      ? (int8_t)0
                           : p.noise != NULL ? ckc_int8_code_stochastic(v[c][e], noise[e], math_scale, KIND)
                                             : ckc_int8_code(v[c][e], math_scale, KIND);
            }
            ckc_store_codes(p.q + r * lay.q_stride, start, lay.q_stride, q_vec, codes);
        }
    }
    ckc_done_mark_arrive(done);
}

#define CKC_ROWWISE_INSTANCE(k, c, a)                                                                          \
    CKC_KERNEL_INSTANCE(CKC_KNAME3(int8_rowwise_kernel, k, c, a), CKC_ROW_BOUNDS,                                \
                        (ckc_quantize_int8_rowwise_params p, ckc_row_layout lay, bool vec, bool q_vec,                 \
                         ckc_done_mark done),                                                                          \
                        (int8_rowwise_body<(ckc_float_kind)k, c, a>(p, lay, vec, q_vec, done)))
CKC_INT8_ROWWISE_KERNELS(CKC_ROWWISE_INSTANCE)

/* ---- plain rotation (rotate_int8_convrot_weight) ---- */

/* `vec`, `out_vec`: x's and out's rows allow vector loads and stores. */
template <ckc_float_kind KIND, int CHUNKS>
__device__ __forceinline__ void
hadamard_rows_body(ckc_rotate_int8_convrot_weight_params p, bool vec, bool out_vec, ckc_done_mark done)
{
    CKC_DYNAMIC_SHARED(float, exchange); /* ckc_rotation_exchange_bytes(p.group) */
    const int t = (int)threadIdx.x;
    const int64_t r = blockIdx.x;
    const int64_t k = p.cols;
    const int64_t elem = ckc_kind_size(KIND);
    const int64_t segment = CKC_ROW_SEGMENT(CHUNKS);
    float v[CHUNKS][CKC_CHUNK];
    for (int64_t s = 0; s < k; s += segment) {
        ckc_rotated_segment<KIND, CKC_ACT_NONE, CHUNKS>((const char *)p.x + r * k * elem, s, k, vec, (int)p.group, t,
                                                        exchange, v);
        CKC_UNROLL
        for (int c = 0; c < CHUNKS; c++) {
            const int64_t start = s + ((int64_t)c * CKC_ROW_THREADS + t) * CKC_CHUNK;
            ckc_store_chunk<KIND>((char *)p.out + r * k * elem, start, k, out_vec, v[c]);
        }
    }
    ckc_done_mark_arrive(done);
}

#define CKC_HADAMARD_INSTANCE(k, c)                                                                             \
    CKC_KERNEL_INSTANCE(CKC_KNAME2(hadamard_rows_kernel, k, c), CKC_ROW_BOUNDS,                                   \
                        (ckc_rotate_int8_convrot_weight_params p, bool vec, bool out_vec,                              \
                         ckc_done_mark done),                                                                          \
                        (hadamard_rows_body<(ckc_float_kind)k, c>(p, vec, out_vec, done)))
CKC_HADAMARD_ROWS_KERNELS(CKC_HADAMARD_INSTANCE)

/* ---- dequantization ---- */

/* The scale of q's element i. */
__device__ __forceinline__ float
ckc_dequant_scale(const ckc_dequantize_int8_convrot_weight_dtype_params &p, int64_t i)
{
    return p.scale[p.scale_mode == CKC_SCALE_FULL ? i : (p.scale_mode == CKC_SCALE_PER_ROW ? i / p.cols : 0)];
}

/* The codes row[start .. start + 15] as floats, those at or past `limit` 0.
 * `vec`: the rows are 16-byte aligned, so a whole chunk is one load. */
__device__ __forceinline__ void
ckc_load_codes(const int8_t *row, int64_t start, int64_t limit, bool vec, float c[CKC_CHUNK])
{
    if (vec && start + CKC_CHUNK <= limit) {
        const ckc_bytes16 b = *(const ckc_bytes16 *)(row + start);
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            c[e] = (float)(int8_t)(uint8_t)(b.w[e / 4] >> (8 * (e % 4)));
        }
        return;
    }
    CKC_UNROLL
    for (int e = 0; e < CKC_CHUNK; e++) {
        c[e] = start + e < limit ? (float)row[start + e] : 0.0f;
    }
}

/* q's offset of output element i (its row through the index), -1 for a row
 * whose index is out of range. */
__device__ __forceinline__ int64_t
ckc_dequant_source(const ckc_dequantize_int8_convrot_weight_dtype_params &p, int64_t i)
{
    const int64_t r = i / p.cols;
    const int64_t src = ckc_dequant_source_row(p.index, p.index_is_64, p.q_rows, r);
    return src < 0 ? -1 : src * p.cols + (i - r * p.cols);
}

/* The plain dequantizer's warp walk, for a per-row or single scale without an
 * index (everything int8 weights and activations use): the warp takes 512
 * consecutive output elements at a time, lane l the quads of four at 4 l + 128 i,
 * i = 0..3, so each warp load of codes reads 128 contiguous bytes and each store
 * writes 512 (float32) or 256 (16-bit).  A thread holding 16 consecutive elements
 * instead made each warp store touch 32 lines 64 or 128 bytes apart: on the H200
 * at 1cdf9a7, dequantize_int8_simple to float32 (then the tile kernel's 32 values
 * per thread) moved 18% of the device copy's bandwidth, 0.21x comfy_kitchen cuda.
 *
 * A quad is found by its offset; for a per-row scale also by (row, column), the
 * launcher keeping rows of whole chunks of 16 and at least 128 values, so a step
 * of 128 crosses at most one row end, and a pass's stride split into rows and
 * columns once: no division in the loop.  Every quad is whole (one aligned 32-bit
 * load of codes): rows of whole chunks, or (one scale) a whole number of quads.
 * A lane issues its four code loads and scale loads before its first
 * store (a store to `out` could alias them for the compiler). */

/* (row, col) moved by add_rows rows and add_cols <= cols columns, in rows of
 * `cols` values: at most one row end crossed (add_cols is 128, at most the
 * launcher's least row, or a pass's stride less its whole rows). */
__device__ __forceinline__ void
ckc_walk_step(int64_t *row, int32_t *col, int64_t cols, int64_t add_rows, int32_t add_cols)
{
    *row += add_rows;
    *col += add_cols;
    if (*col >= cols) {
        *col -= (int32_t)cols;
        *row += 1;
    }
}

/* Values v[4 i .. 4 i + 3] rounded to the output type at out[start ..]: one 16-byte
 * (float32) or 8-byte store.  `exact`: some value of the pass is a NaN, so the
 * software encoders write 16-bit values (ckc_tile_pack: their canonical NaN). */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
ckc_quad_store(void *out, int64_t start, const float *v, bool exact)
{
    if constexpr (KIND == CKC_F32) {
        (void)exact;
        ckc_bytes16 b;
        CKC_UNROLL
        for (int e = 0; e < 4; e++) {
            b.w[e] = ckc_f32_bits(v[e]);
        }
        *(ckc_bytes16 *)((float *)out + start) = b;
    } else {
        ckc_bytes8 b;
        b.w[0] = ckc_tile_pack<KIND>(v[0], v[1], exact);
        b.w[1] = ckc_tile_pack<KIND>(v[2], v[3], exact);
        *(ckc_bytes8 *)((uint16_t *)out + start) = b;
    }
}

/* One pass of a lane: the quads at off + 128 i, i = 0..3, the first in row `row`
 * at column `col` (PER_ROW).  TAIL: the grid's last pass, where quads may lie past
 * the tensor's n values; every other pass loads and stores without a check.  A
 * NaN (the only value whose 16-bit bits the hardware rounds differently) needs a
 * NaN or infinite scale (q is finite; inf * 0 is a NaN): such a scale sends the
 * pass to the software encoders, bit-identical for every other value. */
template <ckc_float_kind KIND, bool PER_ROW, bool TAIL>
__device__ __forceinline__ void
ckc_dequant_walk_pass(const ckc_dequantize_int8_convrot_weight_dtype_params &p, int64_t n, int64_t off, int64_t row,
                      int32_t col, uint32_t zero)
{
    uint32_t codes[4];
    float scale[4];
    float v[16];
    bool live[4];
    bool finite = true;
    CKC_UNROLL
    for (int i = 0; i < 4; i++) {
        live[i] = !TAIL || off + 128 * i < n;
        if (PER_ROW && i > 0) {
            ckc_walk_step(&row, &col, p.cols, 0, 128);
        }
        codes[i] = live[i] ? *(const uint32_t *)(p.q + off + 128 * i) : 0u;
        scale[i] = p.scale[PER_ROW && live[i] ? row : 0];
    }
    /* no value is used before the last load is issued (ptxas would otherwise start
     * on the first quad between the loads: the tile kernels' ckc_tile_together) */
    {
        uint32_t scale_bits[4];
        CKC_UNROLL
        for (int i = 0; i < 4; i++) {
            scale_bits[i] = ckc_f32_bits(scale[i]);
        }
        ckc_tile_together(codes, scale_bits, 4, zero);
    }
    CKC_UNROLL
    for (int i = 0; i < 4; i++) {
        finite = finite && (ckc_f32_bits(scale[i]) & 0x7FFFFFFFu) < 0x7F800000u;
        ckc_tile_word_floats(codes[i], v + 4 * i);
        CKC_UNROLL
        for (int e = 0; e < 4; e++) {
            v[4 * i + e] *= scale[i];
        }
    }
    CKC_UNROLL
    for (int i = 0; i < 4; i++) {
        if (live[i]) {
            ckc_quad_store<KIND>(p.out, off + 128 * i, v + 4 * i, KIND != CKC_F32 && !finite);
        }
    }
}

/* PER_ROW: the scale's row of each quad is tracked as (row, column) beside its
 * offset (a column and a column plus a step fit 32 bits: the launcher keeps rows
 * to at most 2^30 values); without, the walk is one flat
 * row and needs only the offset. */
template <ckc_float_kind KIND, bool PER_ROW>
__device__ __forceinline__ void
int8_dequant_walk(const ckc_dequantize_int8_convrot_weight_dtype_params &p, uint32_t zero, ckc_done_mark done)
{
    const int64_t n = p.rows * p.cols;
    const int64_t threads = (int64_t)gridDim.x * CKC_ROW_THREADS;
    const int64_t first = (int64_t)blockIdx.x * CKC_ROW_THREADS + threadIdx.x;
    const int64_t stride = threads / 32 * 512;
    const int64_t stride_rows = PER_ROW ? stride / p.cols : 0;
    const int32_t stride_cols = PER_ROW ? (int32_t)(stride - stride_rows * p.cols) : 0;
    int64_t off = first / 32 * 512 + first % 32 * 4;
    int64_t row = PER_ROW ? off / p.cols : 0;
    int32_t col = PER_ROW ? (int32_t)(off - row * p.cols) : 0;
    for (; off < n; off += stride) {
        if (off + 3 * 128 < n) {
            ckc_dequant_walk_pass<KIND, PER_ROW, false>(p, n, off, row, col, zero);
        } else {
            ckc_dequant_walk_pass<KIND, PER_ROW, true>(p, n, off, row, col, zero);
        }
        if (PER_ROW) {
            ckc_walk_step(&row, &col, p.cols, stride_rows, stride_cols);
        }
    }
    ckc_done_mark_arrive(done);
}

#define CKC_DEQUANT_WALK_INSTANCE(k, per_row)                                                                   \
    CKC_KERNEL_INSTANCE(CKC_KNAME2(int8_dequant_walk_kernel, k, per_row), CKC_ONE_ROW_BOUNDS,                    \
                        (ckc_dequantize_int8_convrot_weight_dtype_params p, uint32_t zero, ckc_done_mark done),        \
                        (int8_dequant_walk<(ckc_float_kind)k, per_row != 0>(p, zero, done)))
CKC_DEQUANT_WALK_KERNELS(CKC_DEQUANT_WALK_INSTANCE)

/* Without rotation, the general kernel (the warp walk above takes a per-row or
 * single scale without an index): a grid-stride loop over 64-bit indices.
 * With `chunks` (the launcher checked 16-byte alignment of every tensor and,
 * for a per-row scale or an index, rows of whole chunks), a thread takes 16
 * elements at a time: one 16-byte load of codes, one scale (or a chunk of
 * them), 16-byte stores, and one division per chunk to find its row; otherwise
 * one element at a time.  A row whose index is out of range is NaN. */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
int8_dequant_body(ckc_dequantize_int8_convrot_weight_dtype_params p, bool chunks, ckc_done_mark done)
{
    const int64_t n = p.rows * p.cols;
    const int64_t stride = (int64_t)gridDim.x * CKC_ROW_THREADS;
    const int64_t first = (int64_t)blockIdx.x * CKC_ROW_THREADS + threadIdx.x;
    const float nan = ckc_f32_from_bits(0x7FC00000u);
    if (!chunks) {
        for (int64_t i = first; i < n; i += stride) {
            const int64_t src = ckc_dequant_source(p, i);
            ckc_store_value(p.out, KIND, i, src < 0 ? nan : (float)p.q[src] * ckc_dequant_scale(p, src));
        }
    } else {
        for (int64_t start = first * CKC_CHUNK; start < n; start += stride * CKC_CHUNK) {
            const int64_t src = ckc_dequant_source(p, start);
            const int64_t limit = src - start + n; /* n in q's offsets: the chunk is whole */
            float v[CKC_CHUNK];
            float scale[CKC_CHUNK];
            ckc_load_codes(p.q, src < 0 ? 0 : src, src < 0 ? 0 : limit, true, v);
            if (p.scale_mode == CKC_SCALE_FULL) {
                ckc_load_chunk<CKC_F32>(p.scale, src < 0 ? 0 : src, src < 0 ? 0 : limit, true, scale);
            } else {
                const float s = ckc_dequant_scale(p, src < 0 ? 0 : src);
                CKC_UNROLL
                for (int e = 0; e < CKC_CHUNK; e++) {
                    scale[e] = s;
                }
            }
            CKC_UNROLL
            for (int e = 0; e < CKC_CHUNK; e++) {
                v[e] = src < 0 ? nan : v[e] * scale[e];
            }
            ckc_store_chunk<KIND>(p.out, start, n, true, v);
        }
    }
    ckc_done_mark_arrive(done);
}

#define CKC_DEQUANT_INSTANCE(k)                                                                                 \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(int8_dequant_kernel, k), CKC_ONE_ROW_BOUNDS,                                   \
                        (ckc_dequantize_int8_convrot_weight_dtype_params p, bool chunks,                               \
                         ckc_done_mark done),                                                                          \
                        (int8_dequant_body<(ckc_float_kind)k>(p, chunks, done)))
CKC_KIND_KERNELS(CKC_DEQUANT_INSTANCE)


/* With rotation: one block per row, (q * scale) * 1/sqrt(G), then the rotation. */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
int8_dequant_rotated_body(ckc_dequantize_int8_convrot_weight_dtype_params p, ckc_dequant_vec vec, ckc_done_mark done)
{
    CKC_DYNAMIC_SHARED(float, exchange); /* ckc_rotation_exchange_bytes(p.group) */
    const int t = (int)threadIdx.x;
    const int64_t r = blockIdx.x;
    const int64_t k = p.cols;
    const float norm = ckc_hadamard_norm(ckc_hadamard_log4(p.group));
    const bool full = p.scale_mode == CKC_SCALE_FULL;
    const int64_t src = ckc_dequant_source_row(p.index, p.index_is_64, p.q_rows, r);
    const int64_t q_row = src < 0 ? 0 : src; /* a NaN row reads row 0 and discards it */
    const float row_scale = full ? 0.0f : p.scale[p.scale_mode == CKC_SCALE_PER_ROW ? q_row : 0];
    for (int64_t s = 0; s < k; s += CKC_ROW_SEGMENT(1)) {
        const int64_t start = s + (int64_t)t * CKC_CHUNK;
        float v[CKC_CHUNK];
        float scale[CKC_CHUNK];
        ckc_load_codes(p.q + q_row * k, start, k, vec.q, v);
        if (full) {
            ckc_load_chunk<CKC_F32>(p.scale + q_row * k, start, k, vec.scale, scale);
        } else {
            CKC_UNROLL
            for (int e = 0; e < CKC_CHUNK; e++) {
                scale[e] = row_scale;
            }
        }
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            const float d = start + e < k ? v[e] * scale[e] : 0.0f;
            v[e] = src < 0 ? ckc_f32_from_bits(0x7FC00000u) : d * norm;
        }
        ckc_rotate_chunk(v, (int)p.group, t, exchange);
        ckc_store_chunk<KIND>((char *)p.out + r * k * ckc_kind_size(KIND), start, k, vec.out, v);
    }
    ckc_done_mark_arrive(done);
}

#define CKC_DEQUANT_ROTATED_INSTANCE(k)                                                                         \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(int8_dequant_rotated_kernel, k), CKC_ONE_ROW_BOUNDS,                           \
                        (ckc_dequantize_int8_convrot_weight_dtype_params p, ckc_dequant_vec vec,                       \
                         ckc_done_mark done),                                                                          \
                        (int8_dequant_rotated_body<(ckc_float_kind)k>(p, vec, done)))
CKC_KIND_KERNELS(CKC_DEQUANT_ROTATED_INSTANCE)

/* ---- tensor-wise quantization ---- */


/* absmax of x into *absmax_bits (pre-zeroed) as magnitude bits: integer atomicMax
 * orders IEEE magnitudes like the values, NaN above infinity. */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
tensor_absmax_body(const void *x, int64_t n, uint32_t *absmax_bits)
{
    __shared__ uint32_t partials[CKC_ROW_THREADS / 32];
    const int64_t stride = (int64_t)gridDim.x * CKC_ROW_THREADS;
    uint32_t bits = 0;
    for (int64_t i = (int64_t)blockIdx.x * CKC_ROW_THREADS + threadIdx.x; i < n; i += stride) {
        const uint32_t b = ckc_f32_bits(ckc_load_value<KIND>(x, i)) & 0x7FFFFFFFu;
        bits = b > bits ? b : bits;
    }
    bits = ckc_f32_bits(ckc_block_absmax(bits, partials));
    if (threadIdx.x == 0) {
        atomicMax(absmax_bits, bits);
    }
}

/* The absmax bits in *scale become the float32 scale max(absmax / 127, 1e-30). */
CKC_KERNEL_INSTANCE(tensor_scale_kernel, , (float *scale),
                    (*scale = ckc_int8_scale(ckc_f32_from_bits(*(const uint32_t *)scale))))

template <ckc_float_kind KIND>
__device__ __forceinline__ void
tensor_quantize_body(ckc_quantize_int8_tensorwise_params p, ckc_done_mark done)
{
    const float math_scale = ckc_int8_math_scale(*p.scale, KIND);
    const int64_t stride = (int64_t)gridDim.x * CKC_ROW_THREADS;
    for (int64_t i = (int64_t)blockIdx.x * CKC_ROW_THREADS + threadIdx.x; i < p.numel; i += stride) {
        const float v = ckc_load_value<KIND>(p.x, i);
        p.q[i] = p.noise != NULL ? ckc_int8_code_stochastic(v, ckc_load_value<KIND>(p.noise, i), math_scale, KIND)
                                 : ckc_int8_code(v, math_scale, KIND);
    }
    ckc_done_mark_arrive(done);
}

#define CKC_TENSORWISE_INSTANCES(k)                                                                             \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(tensor_absmax_kernel, k), CKC_ONE_ROW_BOUNDS,                                  \
                        (const void *x, int64_t n, uint32_t *absmax_bits),                                        \
                        (tensor_absmax_body<(ckc_float_kind)k>(x, n, absmax_bits)))                               \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(tensor_quantize_kernel, k), CKC_ONE_ROW_BOUNDS,                                \
                        (ckc_quantize_int8_tensorwise_params p,                                                        \
                         ckc_done_mark done),                                                                          \
                        (tensor_quantize_body<(ckc_float_kind)k>(p, done)))
CKC_KIND_KERNELS(CKC_TENSORWISE_INSTANCES)
