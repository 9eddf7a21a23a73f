/* SPDX-License-Identifier: Apache-2.0 */
/* GPU kernel of the W4A8 / W6A8 weight decode (launcher: csrc/gpu/launch_w4a8.c).
 * Each thread takes chunks of 16 columns of one row in a grid-stride loop: the
 * chunk's codes in one 8-byte load of nibbles (and one 4-byte load of the 6-bit
 * high plane) where the launcher found the codes 8-byte aligned, the records'
 * bytes one by one for the MMA-packed form; the int8 grid in one 16-byte store,
 * or the float weight through the row kernels' 16-value store.  The element
 * math is math/w4a8.h, the same as the CPU's, so both give eager's bits. */
#include "done_mark.cuh"
#include "row_tile.cuh"
#include "gpu/kernel_args.h"
#include "gpu/kernel_list.h"
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
