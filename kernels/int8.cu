/* SPDX-License-Identifier: Apache-2.0 */
/* GPU kernels of the int8 family and their launchers: row-wise quantization
 * (fused with the ConvRot rotation: one read of the row, one write of codes and
 * scale), tensor-wise quantization, the plain rotation, dequantization.  One
 * block per row; see row_tile.cuh for the layout.  Rows longer than one
 * segment of registers are read twice (absmax pass, then quantize pass). */
#include "done_mark.cuh"
#include "elements.cuh"
#include "int8_rows.h"
#include "row_tile.cuh"
#include "tile_rows.h"

#include "gpu/launch.h"
#include "gpu/runtime.h"
#include "math/activation.h"
#include "math/int8_quant.h"

/* Registers per thread: CHUNKS chunks of 16 values; up to 4 keeps the row
 * kernels free of spills, longer rows loop over segments. */
#define CKC_MAX_CHUNKS 4
/* float16's row quantizer holds at most 2: its code pass (a software float16
 * rounding of every quotient) spilled beside 4 chunks of values.  Its longer rows
 * take the two-pass path, whose second read of the row mostly hits L2. */
#define CKC_F16_QUANT_MAX_CHUNKS 2
/* The row kernels ask for at least 2 resident blocks per SM: that lets ptxas use
 * up to 128 registers, which 4 chunks need on every target (its default budget
 * for 256-thread blocks spilled on sm_75/86/89). */
#define CKC_ROW_MIN_BLOCKS 2

/* Chunks per thread for rows of `cols` values, at most `most` (2 or CKC_MAX_CHUNKS). */
static int
chunks_for(int64_t cols, int most)
{
    const int64_t needed = (cols + CKC_ROW_SEGMENT(1) - 1) / CKC_ROW_SEGMENT(1);
    return needed <= 1 ? 1 : (needed <= 2 ? 2 : most);
}

static constexpr int
quant_max_chunks(ckc_float_kind kind)
{
    return kind == CKC_F16 ? CKC_F16_QUANT_MAX_CHUNKS : CKC_MAX_CHUNKS;
}

/* The row kernel instance for a row length: 1, 2 or the most chunks per thread. */
template <typename Kernel>
static Kernel
by_chunks(int chunks, Kernel one, Kernel two, Kernel most)
{
    return chunks == 1 ? one : (chunks == 2 ? two : most);
}

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
__global__ void __launch_bounds__(CKC_ROW_THREADS, CKC_ROW_MIN_BLOCKS)
int8_rowwise_kernel(ckc_int8_rowwise_params p, ckc_row_layout lay, bool vec, bool q_vec, ckc_done_mark done)
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

template <ckc_float_kind KIND, int ACT>
static void
launch_rowwise(const ckc_int8_rowwise_params *p, const ckc_row_layout *lay, uintptr_t stream, int chunks, bool vec,
               bool q_vec, const ckc_done_mark &done)
{
    const size_t smem = ckc_rotation_exchange_bytes(p->group);
    if constexpr (ACT == CKC_ACT_NONE) {
        const auto int8_rowwise = by_chunks(chunks, int8_rowwise_kernel<KIND, 1, ACT>,
                                            int8_rowwise_kernel<KIND, 2, ACT>,
                                            int8_rowwise_kernel<KIND, quant_max_chunks(KIND), ACT>);
        CKC_LAUNCH(int8_rowwise, dim3((unsigned)p->rows), dim3(CKC_ROW_THREADS), smem, stream, *p, *lay, vec, q_vec,
                   done);
    } else {
        /* One chunk per thread only (see int8_rows.h). */
        (void)chunks;
        const auto int8_rowwise_act = int8_rowwise_kernel<KIND, 1, ACT>;
        CKC_LAUNCH(int8_rowwise_act, dim3((unsigned)p->rows), dim3(CKC_ROW_THREADS), smem, stream, *p, *lay, vec,
                   q_vec, done);
    }
}

/* Quantizes under the caller's device guard; chunk counts and activations as
 * in the comment of ckc_gpu_int8_quantize_rows (int8_rows.h).  `done`: the
 * op's completion mark when this is its last kernel. */
static ckc_status
quantize_rows(const ckc_int8_rowwise_params *p, const ckc_row_layout *lay, uintptr_t stream,
              const ckc_done_mark &done, ckc_error *err)
{
    const int64_t elem = ckc_kind_size(p->kind);
    const bool vec = ckc_aligned16(p->x, lay->x_stride * elem) &&
                     (ckc_act_width(lay->act) == 1 || (p->cols * elem) % 16 == 0) &&
                     (p->noise == NULL || ckc_aligned16(p->noise, p->cols * elem));
    const bool q_vec = ckc_aligned16(p->q, lay->q_stride);
    const int chunks = lay->act == CKC_ACT_NONE ? chunks_for(p->cols, quant_max_chunks(p->kind)) : 1;
    if (const char *tile = ckc_tile_quantize_rows(p, lay, stream, done)) {
        return ckc_gpu_launch_status(tile, err);
    }
    return ckc_with_kind(p->kind, [&](auto kind) {
        constexpr ckc_float_kind KIND = decltype(kind)::value;
        switch (lay->act) {
        case CKC_ACT_GELU_TANH:
            launch_rowwise<KIND, CKC_ACT_GELU_TANH>(p, lay, stream, chunks, vec, q_vec, done);
            break;
        case CKC_ACT_SWIGLU:
            launch_rowwise<KIND, CKC_ACT_SWIGLU>(p, lay, stream, chunks, vec, q_vec, done);
            break;
        case CKC_ACT_SITU:
            launch_rowwise<KIND, CKC_ACT_SITU>(p, lay, stream, chunks, vec, q_vec, done);
            break;
        case CKC_ACT_RMS_NORM:
        case CKC_ACT_MODULATE:
        case CKC_ACT_RMS_MODULATE: /* one instance for the three (lay->args.act) */
            launch_rowwise<KIND, CKC_ACT_COLUMNWISE>(p, lay, stream, chunks, vec, q_vec, done);
            break;
        default:
            launch_rowwise<KIND, CKC_ACT_NONE>(p, lay, stream, chunks, vec, q_vec, done);
            break;
        }
        return ckc_gpu_launch_status("int8_rowwise_kernel", err);
    });
}

ckc_status
ckc_gpu_int8_quantize_rows(const ckc_int8_rowwise_params *p, const ckc_row_layout *lay, uintptr_t stream,
                           ckc_error *err)
{
    if (lay->q_stride < p->cols || lay->q_stride > (p->cols + CKC_CHUNK - 1) / CKC_CHUNK * CKC_CHUNK) {
        return CKC_FAIL(err, CKC_ERR_RUNTIME, "row stride %lld of the codes is not in [%lld, roundup(%lld, 16)]",
                        (long long)lay->q_stride, (long long)p->cols, (long long)p->cols);
    }
    return quantize_rows(p, lay, stream, CKC_NO_DONE_MARK, err); /* the first of int8_linear's kernels */
}

extern "C" ckc_status
ckc_gpu_int8_rowwise(const ckc_int8_rowwise_params *p, ckc_exec *exec, ckc_error *err)
{
    ckc_row_layout lay;
    memset(&lay, 0, sizeof lay);
    lay.x_stride = p->cols;
    lay.q_stride = p->cols;
    lay.act = CKC_ACT_NONE;
    return ckc_on_device(exec, err,
                         [&]() { return quantize_rows(p, &lay, exec->stream, ckc_exec_take_done_mark(exec), err); });
}

/* ---- plain rotation (rotate_int8_convrot_weight) ---- */

/* `vec`, `out_vec`: x's and out's rows allow vector loads and stores. */
template <ckc_float_kind KIND, int CHUNKS>
__global__ void __launch_bounds__(CKC_ROW_THREADS, CKC_ROW_MIN_BLOCKS)
hadamard_rows_kernel(ckc_hadamard_rows_params p, bool vec, bool out_vec, ckc_done_mark done)
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

template <ckc_float_kind KIND>
static void
launch_hadamard_rows(const ckc_hadamard_rows_params *p, uintptr_t stream, int chunks, bool vec, bool out_vec,
                     const ckc_done_mark &done)
{
    const auto hadamard_rows = by_chunks(chunks, hadamard_rows_kernel<KIND, 1>, hadamard_rows_kernel<KIND, 2>,
                                         hadamard_rows_kernel<KIND, CKC_MAX_CHUNKS>);
    CKC_LAUNCH(hadamard_rows, dim3((unsigned)p->rows), dim3(CKC_ROW_THREADS), ckc_rotation_exchange_bytes(p->group),
               stream, *p, vec, out_vec, done);
}

extern "C" ckc_status
ckc_gpu_hadamard_rows(const ckc_hadamard_rows_params *p, ckc_exec *exec, ckc_error *err)
{
    const int64_t row_bytes = p->cols * ckc_kind_size(p->kind);
    const bool vec = ckc_aligned16(p->x, row_bytes);
    const bool out_vec = ckc_aligned16(p->out, row_bytes);
    return ckc_on_device(exec, err, [&]() {
        const ckc_done_mark done = ckc_exec_take_done_mark(exec);
        if (const char *tile = ckc_tile_hadamard_rows(p, exec->stream, done)) {
            return ckc_gpu_launch_status(tile, err);
        }
        return ckc_with_kind(p->kind, [&](auto kind) {
            launch_hadamard_rows<decltype(kind)::value>(p, exec->stream, chunks_for(p->cols, CKC_MAX_CHUNKS), vec,
                                                        out_vec, done);
            return ckc_gpu_launch_status("hadamard_rows_kernel", err);
        });
    });
}

/* ---- dequantization ---- */

/* The scale of q's element i. */
__device__ __forceinline__ float
ckc_dequant_scale(const ckc_int8_dequant_params &p, int64_t i)
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

/* Which of ckc_int8_dequant_params' rows allow vector accesses. */
typedef struct {
    bool q;     /* the codes */
    bool scale; /* a full (CKC_SCALE_FULL) scale */
    bool out;
} ckc_dequant_vec;

/* q's offset of output element i (its row through the index), -1 for a row
 * whose index is out of range. */
__device__ __forceinline__ int64_t
ckc_dequant_source(const ckc_int8_dequant_params &p, int64_t i)
{
    const int64_t r = i / p.cols;
    const int64_t src = ckc_dequant_source_row(p.index, p.index_is_64, p.q_rows, r);
    return src < 0 ? -1 : src * p.cols + (i - r * p.cols);
}

/* Without rotation: a grid-stride loop over 64-bit indices.  With `chunks`
 * (the launcher checked 16-byte alignment of every tensor and, for a per-row
 * scale or an index, rows of whole chunks), a thread takes 16 elements at a
 * time: one 16-byte load of codes, one scale (or a chunk of them), 16-byte
 * stores, and one division per chunk to find its row; otherwise one element at
 * a time.  A row whose index is out of range is NaN. */
template <ckc_float_kind KIND>
__global__ void __launch_bounds__(CKC_ROW_THREADS)
int8_dequant_kernel(ckc_int8_dequant_params p, bool chunks, ckc_done_mark done)
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

/* With rotation: one block per row, (q * scale) * 1/sqrt(G), then the rotation. */
template <ckc_float_kind KIND>
__global__ void __launch_bounds__(CKC_ROW_THREADS)
int8_dequant_rotated_kernel(ckc_int8_dequant_params p, ckc_dequant_vec vec, ckc_done_mark done)
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

extern "C" ckc_status
ckc_gpu_int8_dequant(const ckc_int8_dequant_params *p, ckc_exec *exec, ckc_error *err)
{
    return ckc_on_device(exec, err, [&]() {
        const ckc_done_mark done = ckc_exec_take_done_mark(exec);
        if (const char *tile = ckc_tile_dequant(p, exec->stream, done)) {
            return ckc_gpu_launch_status(tile, err);
        }
        if (p->group > 0) {
            const ckc_dequant_vec vec = {ckc_aligned16(p->q, p->cols),
                                         ckc_aligned16(p->scale, p->cols * (int64_t)sizeof(float)),
                                         ckc_aligned16(p->out, p->cols * ckc_kind_size(p->out_kind))};
            return ckc_with_kind(p->out_kind, [&](auto kind) {
                void (*int8_dequant_rotated)(ckc_int8_dequant_params, ckc_dequant_vec, ckc_done_mark) =
                    int8_dequant_rotated_kernel<decltype(kind)::value>;
                CKC_LAUNCH(int8_dequant_rotated, dim3((unsigned)p->rows), dim3(CKC_ROW_THREADS),
                           ckc_rotation_exchange_bytes(p->group), exec->stream, *p, vec, done);
                return ckc_gpu_launch_status("int8_dequant_rotated_kernel", err);
            });
        }
        const auto aligned16 = [](const void *x) { return (uintptr_t)x % 16 == 0; };
        const bool chunks = aligned16(p->q) && aligned16(p->out) &&
                            (p->scale_mode != CKC_SCALE_FULL || aligned16(p->scale)) &&
                            ((p->scale_mode != CKC_SCALE_PER_ROW && p->index == NULL) || p->cols % CKC_CHUNK == 0);
        const int64_t per_thread = chunks ? CKC_CHUNK : 1;
        const int64_t threads = (p->rows * p->cols + per_thread - 1) / per_thread;
        const int64_t blocks = (threads + CKC_ROW_THREADS - 1) / CKC_ROW_THREADS;
        return ckc_with_kind(p->out_kind, [&](auto kind) {
            void (*int8_dequant)(ckc_int8_dequant_params, bool, ckc_done_mark) =
                int8_dequant_kernel<decltype(kind)::value>;
            CKC_LAUNCH(int8_dequant, dim3((unsigned)(blocks < 65536 ? blocks : 65536)), dim3(CKC_ROW_THREADS), 0,
                       exec->stream, *p, chunks, done);
            return ckc_gpu_launch_status("int8_dequant_kernel", err);
        });
    });
}

/* ---- tensor-wise quantization ---- */

#define CKC_ELEMENTWISE_BLOCKS 4096 /* grid-stride loops: enough blocks to fill any GPU */

/* absmax of x into *absmax_bits (pre-zeroed) as magnitude bits: integer atomicMax
 * orders IEEE magnitudes like the values, NaN above infinity. */
template <ckc_float_kind KIND>
__global__ void __launch_bounds__(CKC_ROW_THREADS)
tensor_absmax_kernel(const void *x, int64_t n, uint32_t *absmax_bits)
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
__global__ void
tensor_scale_kernel(float *scale)
{
    *scale = ckc_int8_scale(ckc_f32_from_bits(*(const uint32_t *)scale));
}

template <ckc_float_kind KIND>
__global__ void __launch_bounds__(CKC_ROW_THREADS)
tensor_quantize_kernel(ckc_int8_tensorwise_params p, ckc_done_mark done)
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

template <ckc_float_kind KIND>
static ckc_status
run_tensorwise(const ckc_int8_tensorwise_params *p, ckc_exec *exec, ckc_error *err)
{
    const uintptr_t stream = exec->stream;
    const int64_t needed = (p->numel + CKC_ROW_THREADS - 1) / CKC_ROW_THREADS;
    const dim3 grid((unsigned)(needed < CKC_ELEMENTWISE_BLOCKS ? needed : CKC_ELEMENTWISE_BLOCKS));
    if (p->compute_scale) {
        void (*tensor_absmax)(const void *, int64_t, uint32_t *) = tensor_absmax_kernel<KIND>;
        CKC_TRY(ckc_gpu_memset_async(p->scale, 0, sizeof(float), stream, err));
        CKC_LAUNCH(tensor_absmax, grid, dim3(CKC_ROW_THREADS), 0, stream, p->x, p->numel,
                   (uint32_t *)p->scale);
        CKC_TRY(ckc_gpu_launch_status("tensor_absmax_kernel", err));
        CKC_LAUNCH(tensor_scale_kernel, dim3(1), dim3(1), 0, stream, p->scale);
        CKC_TRY(ckc_gpu_launch_status("tensor_scale_kernel", err));
    }
    void (*tensor_quantize)(ckc_int8_tensorwise_params, ckc_done_mark) = tensor_quantize_kernel<KIND>;
    CKC_LAUNCH(tensor_quantize, grid, dim3(CKC_ROW_THREADS), 0, stream, *p, ckc_exec_take_done_mark(exec));
    return ckc_gpu_launch_status("tensor_quantize_kernel", err);
}

extern "C" ckc_status
ckc_gpu_int8_tensorwise(const ckc_int8_tensorwise_params *p, ckc_exec *exec, ckc_error *err)
{
    return ckc_on_device(exec, err, [&]() {
        return ckc_with_kind(p->kind, [&](auto kind) {
            return run_tensorwise<decltype(kind)::value>(p, exec, err);
        });
    });
}
