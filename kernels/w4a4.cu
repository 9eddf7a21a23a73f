/* SPDX-License-Identifier: Apache-2.0 */
/* GPU kernels of the ConvRot W4A4 family (launcher: csrc/gpu/launch_w4a4.c).
 * Quantizer and dequantizer: one block of CKC_ROW_THREADS per row, 16 values
 * per thread, the rotation of kernels/row_tile.cuh (the CPU's butterfly order,
 * so the same bits as the CPU kernels), the element math of math/int4.h.
 * The linear's GEMM: a 64 x 64 tile of outputs per block of 256 threads (4 x 4
 * per thread), k in steps of 64 values whose packed bytes (32 per row) come
 * into shared memory as they are stored; the nibbles are unpacked in registers
 * at the multiply: a word of 4 bytes gives its low nibbles as (w << 4) & 0xF0F0F0F0
 * and its high ones as w & 0xF0F0F0F0, each byte 16 times the signed nibble,
 * so one dp4a sums 4 products times 256 (exact: a step's partial sum is at
 * most 64 * 64 * 256 = 2^20), divided out once per step.  No unpacked copy of
 * either operand is ever made. */
#include "done_mark.cuh"
#include "elements.cuh"
#include "row_tile.cuh"
#include "gpu/kernel_args.h"
#include "gpu/kernel_list.h"
#include "math/int4.h"

#define CKC_W4_BOUNDS __launch_bounds__(CKC_ROW_THREADS)
#define CKC_W4_TILE 64       /* outputs per tile side */
#define CKC_W4_KSTEP_WORDS 8 /* 32-bit words of packed codes per row per k step (64 values) */

/* ---- quantize_convrot_w4a4_weight: rows rotated, absmax, packed codes ---- */

/* 16 codes as 8 bytes at byte `start / 2` of the row (k / 2 bytes): one 8-byte
 * store where whole and aligned (`vec`), else byte by byte (none past the row). */
__device__ __forceinline__ void
ckc_w4_store_codes(uint8_t *row, int64_t start, int64_t k, bool vec, const int c[CKC_CHUNK])
{
    uint32_t w[2];
    CKC_UNROLL
    for (int h = 0; h < 2; h++) {
        w[h] = 0;
        CKC_UNROLL
        for (int b = 0; b < 4; b++) {
            w[h] |= (uint32_t)ckc_int4_pack(c[8 * h + 2 * b], c[8 * h + 2 * b + 1]) << (8 * b);
        }
    }
    if (vec && start + CKC_CHUNK <= k) {
        ckc_bytes8 b8;
        b8.w[0] = w[0];
        b8.w[1] = w[1];
        *(ckc_bytes8 *)(row + start / 2) = b8;
        return;
    }
    CKC_UNROLL
    for (int e = 0; e < CKC_CHUNK; e += 2) {
        if (start + e < k) {
            row[(start + e) / 2] = (uint8_t)(w[e / 8] >> (8 * ((e % 8) / 2)));
        }
    }
}

template <ckc_float_kind KIND>
__device__ __forceinline__ void
w4_quant_body(ckc_quantize_convrot_w4a4_weight_params p, bool vec, bool q_vec, ckc_done_mark done)
{
    /* a block per row, as the int8 row quantizer (kernels/int8.cu), one chunk per thread and segment */
    CKC_DYNAMIC_SHARED(float, exchange); /* ckc_rotation_exchange_bytes(p.group) */
    __shared__ uint32_t partials[CKC_ROW_THREADS / 32];
    const int64_t k = p.cols;
    const int64_t row_bytes = k * ckc_kind_size(KIND);
    const void *row = (const char *)p.x + blockIdx.x * row_bytes;
    const int t = (int)threadIdx.x;
    const int64_t segment = CKC_ROW_SEGMENT(1);
    const int segments = (int)((k + segment - 1) / segment);
    float v[1][CKC_CHUNK];
    uint32_t bits = 0;
    for (int s = 0; s < segments; s++) {
        ckc_rotated_segment<KIND, CKC_ACT_NONE, 1>(row, s * segment, k, vec, (int)p.group, t, exchange, v);
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            const uint32_t b = ckc_f32_bits(v[0][e]) & 0x7FFFFFFFu;
            bits = b > bits ? b : bits;
        }
    }
    const float scale = ckc_int4_scale(ckc_block_absmax(bits, partials), KIND);
    if (t == 0) {
        p.scale[blockIdx.x] = scale;
    }
    for (int s = 0; s < segments; s++) {
        const int64_t start = s * segment + (int64_t)t * CKC_CHUNK;
        float noise[CKC_CHUNK];
        int c[CKC_CHUNK];
        if (segments > 1) {
            ckc_rotated_segment<KIND, CKC_ACT_NONE, 1>(row, s * segment, k, vec, (int)p.group, t, exchange, v);
        }
        if (p.noise != NULL) {
            ckc_load_chunk<KIND>((const char *)p.noise + blockIdx.x * row_bytes, start, k, vec, noise);
        }
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            c[e] = p.noise != NULL ? ckc_int4_code_stochastic(v[0][e], noise[e], scale, KIND)
                                   : ckc_int4_code(v[0][e], scale, KIND);
        }
        ckc_w4_store_codes(p.q + blockIdx.x * (k / 2), start, k, q_vec, c);
    }
    ckc_done_mark_arrive(done);
}

/* ---- dequantize_convrot_w4a4_weight: code * scale, rotated back ---- */

/* 16 codes from byte start / 2 of the row (zeros past k). */
__device__ __forceinline__ void
ckc_w4_load_codes(const uint8_t *row, int64_t start, int64_t k, bool vec, float v[CKC_CHUNK])
{
    uint32_t w[2] = {0u, 0u};
    if (vec && start + CKC_CHUNK <= k) {
        const ckc_bytes8 b8 = *(const ckc_bytes8 *)(row + start / 2);
        w[0] = b8.w[0];
        w[1] = b8.w[1];
    } else {
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e += 2) {
            const uint32_t b = start + e < k ? row[(start + e) / 2] : 0u;
            w[e / 8] |= b << (8 * ((e % 8) / 2));
        }
    }
    CKC_UNROLL
    for (int e = 0; e < CKC_CHUNK; e += 2) {
        const uint8_t b = (uint8_t)(w[e / 8] >> (8 * ((e % 8) / 2)));
        v[e] = (float)ckc_int4_lo(b);
        v[e + 1] = (float)ckc_int4_hi(b);
    }
}

template <ckc_float_kind KIND>
__device__ __forceinline__ void
w4_dequant_body(ckc_dequantize_convrot_w4a4_weight_params p, bool q_vec, bool out_vec, ckc_done_mark done)
{
    CKC_DYNAMIC_SHARED(float, exchange);
    const int t = (int)threadIdx.x;
    const int64_t r = blockIdx.x;
    const int64_t k = p.cols;
    const float s = p.scale[r];
    const float norm = ckc_hadamard_norm(ckc_hadamard_log4(p.group));
    for (int64_t seg = 0; seg < k; seg += CKC_ROW_SEGMENT(1)) {
        const int64_t start = seg + (int64_t)t * CKC_CHUNK;
        float v[CKC_CHUNK];
        ckc_w4_load_codes(p.q + r * (k / 2), start, k, q_vec, v);
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            v[e] = (v[e] * s) * norm; /* as the CPU: eager's float32 product, then an exact power of two */
        }
        ckc_rotate_chunk(v, (int)p.group, t, exchange);
        ckc_store_chunk<KIND>((char *)p.out + r * k * ckc_kind_size(KIND), start, k, out_vec, v);
    }
    ckc_done_mark_arrive(done);
}

/* ---- prepare_int4_weight_for_int8_linear: 16 bytes to 32 int8 values ---- */

__device__ __forceinline__ void
w4_unpack_body(ckc_prepare_int4_weight_for_int8_linear_params p, bool vec, ckc_done_mark done)
{
    const int64_t n = p.rows * p.cols; /* packed bytes, contiguous rows */
    for (int64_t start = ((int64_t)blockIdx.x * CKC_ROW_THREADS + threadIdx.x) * CKC_CHUNK; start < n;
         start += (int64_t)gridDim.x * CKC_ROW_THREADS * CKC_CHUNK) {
        if (vec && start + CKC_CHUNK <= n) {
            const ckc_bytes16 in = *(const ckc_bytes16 *)(p.q + start);
            ckc_bytes16 out[2];
            CKC_UNROLL
            for (int w = 0; w < 4; w++) {
                uint32_t lo = 0;
                uint32_t hi = 0;
                CKC_UNROLL
                for (int b = 0; b < 2; b++) {
                    const uint8_t x0 = (uint8_t)(in.w[w] >> (16 * b));
                    const uint8_t x1 = (uint8_t)(in.w[w] >> (16 * b + 8));
                    const uint32_t four = (uint32_t)(uint8_t)ckc_int4_lo(x0) | (uint32_t)(uint8_t)ckc_int4_hi(x0) << 8 |
                                          (uint32_t)(uint8_t)ckc_int4_lo(x1) << 16 |
                                          (uint32_t)(uint8_t)ckc_int4_hi(x1) << 24;
                    if (b == 0) {
                        lo = four;
                    } else {
                        hi = four;
                    }
                }
                out[w / 2].w[2 * (w % 2)] = lo;
                out[w / 2].w[2 * (w % 2) + 1] = hi;
            }
            *(ckc_bytes16 *)(p.out + 2 * start) = out[0];
            *(ckc_bytes16 *)(p.out + 2 * start + 16) = out[1];
            continue;
        }
        for (int64_t i = start; i < n && i < start + CKC_CHUNK; i++) {
            p.out[2 * i] = (int8_t)ckc_int4_lo(p.q[i]);
            p.out[2 * i + 1] = (int8_t)ckc_int4_hi(p.q[i]);
        }
    }
    ckc_done_mark_arrive(done);
}

/* ---- convrot_w4a4_linear: the int4 GEMM with the epilogue ---- */

/* 16 bytes of packed row `row` (of `rows`, k / 2 bytes each) from byte b0 into
 * four words of a shared tile row (zeros past the matrix). */
__device__ __forceinline__ void
ckc_w4_tile_load(const uint8_t *m, int64_t row, int64_t rows, int64_t row_bytes, int64_t b0, bool vec,
                 uint32_t *dst)
{
    uint32_t w[4] = {0u, 0u, 0u, 0u};
    if (row < rows) {
        const uint8_t *src = m + row * row_bytes;
        if (vec && b0 + 16 <= row_bytes) {
            const ckc_bytes16 b = *(const ckc_bytes16 *)(src + b0);
            CKC_UNROLL
            for (int i = 0; i < 4; i++) {
                w[i] = b.w[i];
            }
        } else {
            CKC_UNROLL
            for (int i = 0; i < 16; i++) {
                w[i / 4] |= (b0 + i < row_bytes ? (uint32_t)src[b0 + i] : 0u) << (8 * (i % 4));
            }
        }
    }
    CKC_UNROLL
    for (int i = 0; i < 4; i++) {
        dst[i] = w[i];
    }
}

/* One k step of a thread's 4 x 4 outputs: acc += the step's sums. */
__device__ __forceinline__ void
ckc_w4_tile_step(const uint32_t (*as)[CKC_W4_KSTEP_WORDS + 1], const uint32_t (*bs)[CKC_W4_KSTEP_WORDS + 1], int ty,
                 int tx, int32_t acc[4][4])
{
    int32_t part[4][4] = {{0}};
    CKC_UNROLL
    for (int w = 0; w < CKC_W4_KSTEP_WORDS; w++) {
        int a_lo[4], a_hi[4], b_lo[4], b_hi[4];
        CKC_UNROLL
        for (int i = 0; i < 4; i++) {
            const uint32_t a = as[ty + 16 * i][w];
            const uint32_t b = bs[tx + 16 * i][w];
            a_lo[i] = (int)((a << 4) & 0xF0F0F0F0u);
            a_hi[i] = (int)(a & 0xF0F0F0F0u);
            b_lo[i] = (int)((b << 4) & 0xF0F0F0F0u);
            b_hi[i] = (int)(b & 0xF0F0F0F0u);
        }
        CKC_UNROLL
        for (int i = 0; i < 4; i++) {
            CKC_UNROLL
            for (int j = 0; j < 4; j++) {
                part[i][j] = __dp4a(a_lo[i], b_lo[j], part[i][j]);
                part[i][j] = __dp4a(a_hi[i], b_hi[j], part[i][j]);
            }
        }
    }
    CKC_UNROLL
    for (int i = 0; i < 4; i++) {
        CKC_UNROLL
        for (int j = 0; j < 4; j++) {
            acc[i][j] += part[i][j] / 256; /* a multiple of 256: exact */
        }
    }
}

template <ckc_float_kind KIND>
__device__ __forceinline__ void
w4_linear_body(ckc_convrot_w4a4_linear_params p, bool vec, ckc_done_mark done)
{
    __shared__ uint32_t as[CKC_W4_TILE][CKC_W4_KSTEP_WORDS + 1]; /* +1: no bank conflicts down a column */
    __shared__ uint32_t bs[CKC_W4_TILE][CKC_W4_KSTEP_WORDS + 1];
    const int t = (int)threadIdx.x;
    const int tx = t % 16;
    const int ty = t / 16;
    const int64_t tiles_n = (p.n + CKC_W4_TILE - 1) / CKC_W4_TILE;
    const int64_t m0 = (int64_t)(blockIdx.x / tiles_n) * CKC_W4_TILE;
    const int64_t n0 = (int64_t)(blockIdx.x % tiles_n) * CKC_W4_TILE;
    const int64_t row_bytes = p.k / 2;
    /* threads 0..127 load a's tile, 128..255 w's: a row's 32 bytes are two threads' 16 */
    const int lr = (t % 128) / 2;
    const int lh = t % 2;
    int32_t acc[4][4] = {{0}};
    for (int64_t b0 = 0; b0 < row_bytes; b0 += 4 * CKC_W4_KSTEP_WORDS) {
        if (t < 128) {
            ckc_w4_tile_load(p.a, m0 + lr, p.m, row_bytes, b0 + 16 * lh, vec, &as[lr][4 * lh]);
        } else {
            ckc_w4_tile_load(p.w, n0 + lr, p.n, row_bytes, b0 + 16 * lh, vec, &bs[lr][4 * lh]);
        }
        __syncthreads();
        ckc_w4_tile_step(as, bs, ty, tx, acc);
        __syncthreads();
    }
    CKC_UNROLL
    for (int i = 0; i < 4; i++) {
        const int64_t row = m0 + ty + 16 * i;
        if (row >= p.m) {
            continue;
        }
        const float xs = ckc_round_to_kind(p.x_scale[row], KIND);
        CKC_UNROLL
        for (int j = 0; j < 4; j++) {
            const int64_t col = n0 + tx + 16 * j;
            if (col < p.n) {
                const float ws = ckc_round_to_kind(ckc_kind_value(p.w_scale, p.w_scale_kind, col), KIND);
                const float b =
                    p.bias != NULL ? ckc_round_to_kind(ckc_kind_value(p.bias, p.bias_kind, col), KIND) : 0.0f;
                ckc_store_value(p.out, KIND, row * p.n + col,
                                      ckc_int4_linear_out(acc[i][j], xs, ws, b, p.bias != NULL, KIND));
            }
        }
    }
    ckc_done_mark_arrive(done);
}

#define CKC_W4A4_INSTANCES(k)                                                                                     \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(w4_quant_kernel, k), CKC_W4_BOUNDS,                                             \
                        (ckc_quantize_convrot_w4a4_weight_params p, bool vec, bool q_vec, ckc_done_mark done),      \
                        (w4_quant_body<(ckc_float_kind)k>(p, vec, q_vec, done)))                                    \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(w4_dequant_kernel, k), CKC_W4_BOUNDS,                                           \
                        (ckc_dequantize_convrot_w4a4_weight_params p, bool q_vec, bool out_vec, ckc_done_mark done), \
                        (w4_dequant_body<(ckc_float_kind)k>(p, q_vec, out_vec, done)))                              \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(w4_linear_kernel, k), CKC_W4_BOUNDS,                                            \
                        (ckc_convrot_w4a4_linear_params p, bool vec, ckc_done_mark done),                          \
                        (w4_linear_body<(ckc_float_kind)k>(p, vec, done)))
CKC_W4A4_KERNELS(CKC_W4A4_INSTANCES)

CKC_KERNEL_INSTANCE(w4_unpack_kernel, CKC_W4_BOUNDS,
                    (ckc_prepare_int4_weight_for_int8_linear_params p, bool vec, ckc_done_mark done),
                    (w4_unpack_body(p, vec, done)))
