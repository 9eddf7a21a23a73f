/* SPDX-License-Identifier: Apache-2.0 */
/* GPU kernels of the W4A8 / W6A8 weights (launcher: csrc/gpu/launch_w4a8.c): the
 * decode, and w4a8_linear's GEMV (at the end of the file).  The decode: each
 * thread takes chunks of 16 columns of one row in a grid-stride loop: the
 * chunk's codes in one 8-byte load of nibbles (and one 4-byte load of the 6-bit
 * high plane) where the launcher found the codes 8-byte aligned, the records'
 * bytes one by one for the MMA-packed form; the int8 grid in one 16-byte store,
 * or the float weight through the row kernels' 16-value store.  The element
 * math is math/w4a8.h, the same as the CPU's, so both give eager's bits. */
#include "done_mark.cuh"
#include "gemv.cuh"
#include "row_tile.cuh"
#include "contract/linear_plan.h"
#include "gpu/kernel_args.h"
#include "gpu/kernel_list.h"
#include "math/linear.h"
#include "math/w4a8.h"

#define CKC_W4A8_BOUNDS __launch_bounds__(CKC_ROW_THREADS)

/* The 16 codes of canonical row n, columns c0..c0+15 (c0 % 16 == 0). */
__device__ __forceinline__ void
ckc_w4a8_chunk_codes(const ckc_dequantize_w4a8_int8_weight_params &p, int64_t n, int64_t c0, bool vec,
                     uint32_t code[CKC_CHUNK])
{
    const uint8_t *row = p.q + n * (p.k * p.bits / 8);
    if (!vec) {
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            code[e] = ckc_w4a8_code(row, p.k, p.bits, c0 + e);
        }
        return;
    }
    const ckc_bytes8 lo = *(const ckc_bytes8 *)(row + c0 / 2);
    const uint32_t hi = p.bits == 6 ? *(const uint32_t *)(row + p.k / 2 + c0 / 4) : 0u;
    CKC_UNROLL
    for (int e = 0; e < CKC_CHUNK; e++) {
        code[e] = ((lo.w[e / 8] >> (4 * (e % 8))) & 0xFu) | (((hi >> (2 * e)) & 0x3u) << 4);
    }
}

/* The chunk's int8 grid: canonical codes with s_rel, or the records' codes and scales. */
__device__ __forceinline__ void
ckc_w4a8_chunk_grid(const ckc_dequantize_w4a8_int8_weight_params &p, int64_t n, int64_t c0, bool vec,
                    int8_t q[CKC_CHUNK])
{
    if (p.packed) {
        const uint8_t *rec = p.q + ((n >> 4) * (p.k / 32) + c0 / 32) * ckc_w4a8_mma_record_bytes(p.bits);
        const int r = (int)(n & 15);
        const int half = (int)((c0 & 31) >> 4);
        const float s = ckc_e4m3_to_f32(ckc_w4a8_mma_scale(rec, p.bits, r, half));
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            const int c = 16 * half + e;
            const uint32_t code = p.bits == 6 ? ckc_w4a8_mma_code6(rec, r, c) : ckc_w4a8_mma_code4(rec, r, c);
            q[e] = ckc_w4a8_int8(ckc_w4a8_level(code, p.codebook, p.bits), s);
        }
        return;
    }
    uint32_t code[CKC_CHUNK];
    ckc_w4a8_chunk_codes(p, n, c0, vec, code);
    const int64_t groups = p.k / p.group;
    CKC_UNROLL
    for (int e = 0; e < CKC_CHUNK; e++) {
        const float s = ckc_w4a8_scale(p.s_rel, p.s_e4m3, n * groups + (c0 + e) / p.group);
        q[e] = ckc_w4a8_int8(ckc_w4a8_level(code[e], p.codebook, p.bits), s);
    }
}

/* 16 int8 values to out[start..] (start % 16 == 0, k % 16 == 0: whole chunks). */
__device__ __forceinline__ void
ckc_w4a8_store_int8(int8_t *out, int64_t start, bool vec, const int8_t q[CKC_CHUNK])
{
    if (vec) {
        ckc_bytes16 b;
        CKC_UNROLL
        for (int w = 0; w < 4; w++) {
            b.w[w] = (uint32_t)(uint8_t)q[4 * w] | (uint32_t)(uint8_t)q[4 * w + 1] << 8 |
                     (uint32_t)(uint8_t)q[4 * w + 2] << 16 | (uint32_t)(uint8_t)q[4 * w + 3] << 24;
        }
        *(ckc_bytes16 *)(out + start) = b;
        return;
    }
    CKC_UNROLL
    for (int e = 0; e < CKC_CHUNK; e++) {
        out[start + e] = q[e];
    }
}

template <int OUT>
__device__ __forceinline__ void
w4a8_dequant_body(ckc_dequantize_w4a8_int8_weight_params p, bool q_vec, bool out_vec, ckc_done_mark done)
{
    const int64_t per_row = p.k / CKC_CHUNK;
    const int64_t chunks = p.rows * per_row;
    for (int64_t ci = (int64_t)blockIdx.x * CKC_ROW_THREADS + threadIdx.x; ci < chunks;
         ci += (int64_t)gridDim.x * CKC_ROW_THREADS) {
        const int64_t n = ci / per_row;
        const int64_t c0 = (ci - n * per_row) * CKC_CHUNK;
        int8_t q[CKC_CHUNK];
        ckc_w4a8_chunk_grid(p, n, c0, q_vec, q);
        if (OUT == 3) {
            ckc_w4a8_store_int8((int8_t *)p.out, n * p.k + c0, out_vec, q);
            continue;
        }
        const float sc = p.s_channel[n];
        float v[CKC_CHUNK];
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            const bool corr = p.correction != NULL;
            const float add = corr ? ckc_kind_value(p.correction, p.corr_kind, ((c0 + e) / p.group) * p.rows + n) : 0.0f;
            v[e] = ckc_w4a8_weight(q[e], sc, corr, add);
        }
        ckc_store_chunk<(ckc_float_kind)(OUT == 3 ? 0 : OUT)>(p.out, n * p.k + c0, chunks * CKC_CHUNK, out_vec, v);
    }
    ckc_done_mark_arrive(done);
}

#define CKC_W4A8_INSTANCES(k)                                                                                   \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(w4a8_dequant_kernel, k), CKC_W4A8_BOUNDS,                                      \
                        (ckc_dequantize_w4a8_int8_weight_params p, bool q_vec, bool out_vec, ckc_done_mark done), \
                        (w4a8_dequant_body<k>(p, q_vec, out_vec, done)))
CKC_W4A8_KERNELS(CKC_W4A8_INSTANCES)

/* ---- w4a8_linear's GEMV (up to CKC_LINEAR_GEMV_ROWS rows, canonical codes) ----
 *
 * int8_linear's GEMV (kernels/linear.cu) with the weight read as its codes: a
 * warp per output column j, 16 values per lane and step (8 bytes of nibbles,
 * and 4 of the 6-bit plane), CKC_GEMV_DEPTH steps of loads in flight; the
 * codes become the int8 grid in registers and go through dp4a with the rows'
 * activation codes.  The GEMV reads half (4 bits) or 3/4 (6 bits) of an int8
 * weight's bytes, and nothing is written but the outputs.  The int32 sums are
 * exact in any order, so the outputs are the GEMM path's bit for bit. */

#define CKC_W4A8_GEMV_DEPTH 4

/* One step's codes (16 values at column i of row j) and their group scales, as loaded. */
struct ckc_w4a8_step {
    uint32_t lo[2]; /* nibbles, value e at bits 4 (e % 8) of lo[e / 8] */
    uint32_t hi;    /* 6 bits: the top two bits, value e at bits 2e */
    float s[4];     /* a scale per group: one for group >= 16, 16 / group for 4 and 8 */
};

/* The loads of a step: `vec`, whole words (every base and row 8-byte aligned),
 * else the codes byte by byte (math/w4a8.h's reader). */
template <int BITS>
__device__ __forceinline__ void
ckc_w4a8_gemv_load(const ckc_dequantize_w4a8_int8_weight_params &d, int64_t j, int64_t i, bool vec, ckc_w4a8_step &st)
{
    const uint8_t *row = d.q + j * (d.k * BITS / 8);
    const int64_t s0 = j * (d.k / d.group);
    if (vec) {
        const ckc_bytes8 b8 = *(const ckc_bytes8 *)(row + i / 2);
        st.lo[0] = b8.w[0];
        st.lo[1] = b8.w[1];
        st.hi = BITS == 6 ? *(const uint32_t *)(row + d.k / 2 + i / 4) : 0u;
    } else {
        st.lo[0] = st.lo[1] = st.hi = 0u;
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            const uint32_t c = ckc_w4a8_code(row, d.k, BITS, i + e);
            st.lo[e / 8] |= (c & 0xFu) << (4 * (e % 8));
            st.hi |= (c >> 4) << (2 * e);
        }
    }
    /* 32-bit divisions: k <= CKC_W4A8_GEMV_MAX_K (the layout's condition for this GEMV) */
    const uint32_t group = (uint32_t)d.group;
    if (group >= CKC_CHUNK) {
        st.s[0] = ckc_w4a8_scale(d.s_rel, d.s_e4m3, s0 + (uint32_t)i / group);
    } else {
        CKC_UNROLL
        for (int g = 0; g < 4; g++) {
            st.s[g] = g * group < CKC_CHUNK ? ckc_w4a8_scale(d.s_rel, d.s_e4m3, s0 + (uint32_t)i / group + g)
                                            : 0.0f;
        }
    }
}

/* The int8 grid value of a level and scale as a byte in the low 8 bits:
 * ckc_w4a8_int8's value (eager's round, then clamp to +-127; NaN to 0) by a
 * clamp first, then a round by adding 1.5 * 2^23 (to nearest even, as rintf),
 * whose low byte is then the two's complement value.  Clamping before
 * rounding gives the same value for every finite product (anything past 127
 * rounds to 127 either way) and for an infinity; a NaN (a NaN scale or level,
 * 0 * inf) is selected to 0 first.  No conversion instruction, no branch. */
__device__ __forceinline__ uint32_t
ckc_w4a8_gemv_byte(float level, float s)
{
    const float x = level * s;
    const float c = x == x ? fminf(fmaxf(x, -127.0f), 127.0f) : 0.0f;
    return ckc_f32_bits(c + 12582912.0f);
}

/* acc[r] += q[r, i .. i + 15] . (the step's 16 grid values), lv: the levels by code.  The
 * rows' codes are loaded first (L1/L2 hits: every warp reads the same few rows), as in
 * int8_gemv_step, so their round trip overlaps the grid's arithmetic. */
template <int BITS>
__device__ __forceinline__ void
ckc_w4a8_gemv_step(const ckc_int8_linear_params &p, int rows, int64_t i, const ckc_w4a8_step &st, const float *lv,
                   int32_t acc[CKC_LINEAR_GEMV_ROWS])
{
    ckc_bytes16 a[CKC_LINEAR_GEMV_ROWS] = {};
    CKC_UNROLL
    for (int r = 0; r < CKC_LINEAR_GEMV_ROWS; r++) {
        if (r < rows) { /* the same for every lane: no divergence */
            a[r] = *(const ckc_bytes16 *)(p.q + r * p.ldq + i);
        }
    }
    uint32_t w[4];
    CKC_UNROLL
    for (int q = 0; q < 4; q++) {
        uint32_t b[4];
        CKC_UNROLL
        for (int e = 0; e < 4; e++) {
            const int v = 4 * q + e;
            uint32_t code = (st.lo[v / 8] >> (4 * (v % 8))) & 0xFu;
            if (BITS == 6) {
                code |= ((st.hi >> (2 * v)) & 0x3u) << 4;
            }
            /* v is a constant here, so each index is too (a runtime index would put st.s in local memory) */
            const float s = p.decode.group == 4 ? st.s[v / 4] : (p.decode.group == 8 ? st.s[v / 8] : st.s[0]);
            b[e] = ckc_w4a8_gemv_byte(lv[code], s);
        }
        w[q] = ckc_low_bytes4(b[0], b[1], b[2], b[3]);
    }
    CKC_UNROLL
    for (int r = 0; r < CKC_LINEAR_GEMV_ROWS; r++) {
        if (r < rows) {
            CKC_UNROLL
            for (int q = 0; q < 4; q++) {
                acc[r] = __dp4a((int)a[r].w[q], (int)w[q], acc[r]);
            }
        }
    }
}

template <int BITS>
__device__ __forceinline__ void
w4a8_gemv_body(ckc_int8_linear_params p, bool vec, ckc_done_mark done)
{
    __shared__ float lv[1 << BITS];
    const int lane = (int)threadIdx.x % 32;
    const int64_t j = (int64_t)blockIdx.x * CKC_GEMV_WARPS + threadIdx.x / 32;
    const int rows = (int)p.rows;
    for (int c = (int)threadIdx.x; c < (1 << BITS); c += (int)blockDim.x) {
        lv[c] = ckc_w4a8_level((uint32_t)c, p.decode.codebook, BITS);
    }
    __syncthreads();
    /* The whole warp skips (j is the same for its lanes), and reaches the mark with its block. */
    if (j < p.n) {
        int32_t acc[CKC_LINEAR_GEMV_ROWS];
        for (int r = 0; r < CKC_LINEAR_GEMV_ROWS; r++) {
            acc[r] = 0;
        }
        int64_t i = (int64_t)lane * CKC_CHUNK;
        for (; i + (CKC_W4A8_GEMV_DEPTH - 1) * 32 * CKC_CHUNK < p.k; i += CKC_W4A8_GEMV_DEPTH * 32 * CKC_CHUNK) {
            ckc_w4a8_step st[CKC_W4A8_GEMV_DEPTH];
            CKC_UNROLL
            for (int s = 0; s < CKC_W4A8_GEMV_DEPTH; s++) {
                ckc_w4a8_gemv_load<BITS>(p.decode, j, i + s * 32 * CKC_CHUNK, vec, st[s]);
            }
            CKC_UNROLL
            for (int s = 0; s < CKC_W4A8_GEMV_DEPTH; s++) {
                ckc_w4a8_gemv_step<BITS>(p, rows, i + s * 32 * CKC_CHUNK, st[s], lv, acc);
            }
        }
        for (; i < p.k; i += 32 * CKC_CHUNK) { /* k is a multiple of 16: whole steps */
            ckc_w4a8_step st;
            ckc_w4a8_gemv_load<BITS>(p.decode, j, i, vec, st);
            ckc_w4a8_gemv_step<BITS>(p, rows, i, st, lv, acc);
        }
        ckc_gemv_store(p, rows, lane, j, acc);
    }
    ckc_done_mark_arrive(done);
}

#define CKC_W4A8_GEMV_INSTANCE(bits)                                                                          \
    CKC_KERNEL_INSTANCE(CKC_KNAME1(w4a8_gemv_kernel, bits), __launch_bounds__(CKC_GEMV_WARPS * 32),           \
                        (ckc_int8_linear_params p, bool vec, ckc_done_mark done), (w4a8_gemv_body<bits>(p, vec, done)))
CKC_W4A8_GEMV_KERNELS(CKC_W4A8_GEMV_INSTANCE)
