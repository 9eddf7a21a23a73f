/* SPDX-License-Identifier: Apache-2.0 */
/* Device helpers shared by the row kernels (kernels/int8.cu, and the rotated
 * NVFP4 quantizer in kernels/nvfp4.cu, one thread per 16 values): a block of
 * CKC_ROW_THREADS threads owns one row; each thread holds chunks of 16
 * consecutive values in registers ("elements per thread" = 16), so the
 * regular Hadamard rotation runs as
 *   strides 1 and 4   -> inside a thread's registers,
 *   strides 16 .. 64  -> warp shuffles among the G/16 lanes of a group,
 *   stride 256 (G = 1024, a group spans two warps) -> a warp shuffle, then
 *                      shared memory.
 * Every sum is ckc_h4_butterfly's, stage by stage in the CPU kernels' order,
 * so the GPU rotation equals the CPU one bit for bit (kernels are built
 * without FMA contraction).
 *
 * Register arrays are only indexed by constants (loops over them carry
 * CKC_UNROLL, lane-dependent choices are selects): a dynamic index would put
 * them in local memory.  A thread's 16 values are loaded and stored with
 * 16-byte (8-byte for packed FP4) accesses wherever the launcher checked the
 * alignment, else element by element. */
#ifndef CKC_ROW_TILE_CUH
#define CKC_ROW_TILE_CUH

#include "cuda_dialect.h"
#include "elements.cuh"
#include "math/activation.h"
#include "math/float_bits.h"
#include "math/hadamard.h"

#include "gpu/kernel_args.h" /* CKC_ROW_THREADS, CKC_CHUNK, ckc_aligned16 */

/* 16 and 8 bytes, for one vector load or store where alignment allows. */
struct __align__(16) ckc_bytes16 {
    uint32_t w[4];
};

struct __align__(8) ckc_bytes8 {
    uint32_t w[2];
};

/* Loads 16 consecutive elements (those past `limit` read as 0).  `vec`: the
 * caller checked that the row base is 16-byte aligned and rows are whole. */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
ckc_load_chunk(const void *row, int64_t start, int64_t limit, bool vec, float v[CKC_CHUNK])
{
    if (KIND == CKC_F32) {
        const float *s = (const float *)row + start;
        if (vec && start + CKC_CHUNK <= limit) {
            CKC_UNROLL
            for (int q = 0; q < 4; q++) {
                const ckc_bytes16 b = ((const ckc_bytes16 *)s)[q];
                CKC_UNROLL
                for (int e = 0; e < 4; e++) {
                    v[4 * q + e] = ckc_f32_from_bits(b.w[e]);
                }
            }
            return;
        }
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            v[e] = start + e < limit ? s[e] : 0.0f;
        }
    } else {
        const uint16_t *s = (const uint16_t *)row + start;
        uint16_t h[CKC_CHUNK];
        if (vec && start + CKC_CHUNK <= limit) {
            CKC_UNROLL
            for (int q = 0; q < 2; q++) {
                const ckc_bytes16 b = ((const ckc_bytes16 *)s)[q];
                CKC_UNROLL
                for (int e = 0; e < 4; e++) {
                    h[8 * q + 2 * e] = (uint16_t)(b.w[e] & 0xFFFFu);
                    h[8 * q + 2 * e + 1] = (uint16_t)(b.w[e] >> 16);
                }
            }
        } else {
            CKC_UNROLL
            for (int e = 0; e < CKC_CHUNK; e++) {
                h[e] = start + e < limit ? s[e] : (uint16_t)0;
            }
        }
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            v[e] = ckc_half_value(KIND, h[e]);
        }
    }
}

/* Stores 16 consecutive values rounded to the element type; those at or past
 * `limit` are not written.  `vec`: as for ckc_load_chunk. */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
ckc_store_chunk(void *row, int64_t start, int64_t limit, bool vec, const float v[CKC_CHUNK])
{
    if (vec && start + CKC_CHUNK <= limit) {
        constexpr int values_per_word = KIND == CKC_F32 ? 1 : 2;
        ckc_bytes16 *d = (ckc_bytes16 *)((char *)row + start * ckc_kind_size(KIND));
        CKC_UNROLL
        for (int q = 0; q < CKC_CHUNK / (4 * values_per_word); q++) {
            ckc_bytes16 b;
            CKC_UNROLL
            for (int w = 0; w < 4; w++) {
                const int e = (4 * q + w) * values_per_word;
                if constexpr (KIND == CKC_F32) {
                    b.w[w] = ckc_f32_bits(v[e]);
                } else {
                    b.w[w] = (uint32_t)ckc_half_bits(KIND, v[e]) | (uint32_t)ckc_half_bits(KIND, v[e + 1]) << 16;
                }
            }
            d[q] = b;
        }
        return;
    }
    CKC_UNROLL
    for (int e = 0; e < CKC_CHUNK; e++) {
        if (start + e < limit) {
            ckc_store_value(row, KIND, start + e, v[e]);
        }
    }
}

/* A radix-4 stage of stride o across lanes takes two exchanges per value, not
 * four gathers.  The lane with digit d = (t/o) % 4 holds x_d of its quartet.
 * The partners across o (x0 with x1, x2 with x3) both form their pair's sum and
 * difference in ckc_h4_butterfly's operand order, so both get the same bits:
 * lanes 0/1 hold p = x0 + x1 and m = x0 - x1, lanes 2/3 q = x2 + x3 and
 * r = x2 - x3.  Swapping the differences across 2o gives lanes 0/1 r and lanes
 * 2/3 m, and each lane ends with its own output of the butterfly:
 * y0 = p + r, y1 = p - r, y2 = m + q, y3 = q - m. */
__device__ __forceinline__ float
ckc_pair_sum(float own, float other, int d)
{
    return d % 2 == 0 ? own + other : other + own;
}

__device__ __forceinline__ float
ckc_pair_difference(float own, float other, int d)
{
    return d % 2 == 0 ? own - other : other - own;
}

/* Output d of the butterfly from the lane's pair sum and the other pair's difference. */
__device__ __forceinline__ float
ckc_quartet_output(float sum, float difference, int d)
{
    const float first = d == 2 ? difference : sum; /* y2 = m + q: the difference first */
    const float second = d == 2 ? sum : difference;
    return d % 2 == 0 ? first + second : first - second;
}

/* One radix-4 stage of stride o (4 o <= 32: the quartet lies in one warp). */
__device__ __forceinline__ void
ckc_rotate_shuffle_stage(float v[CKC_CHUNK], int t, int o)
{
    const int d = (t / o) % 4;
    CKC_UNROLL
    for (int e = 0; e < CKC_CHUNK; e++) {
        const float other = __shfl_xor_sync(0xffffffffu, v[e], o);
        const float sum = ckc_pair_sum(v[e], other, d);
        const float difference =
            __shfl_xor_sync(0xffffffffu, ckc_pair_difference(v[e], other, d), 2 * o);
        v[e] = ckc_quartet_output(sum, difference, d);
    }
}

/* The same stage for quartets that span two warps (o = 16, G = 1024): the pairs
 * (lanes o apart) still meet by shuffle, the differences cross warps (2 o = 32
 * threads apart) through `exchange`, CKC_ROW_THREADS * CKC_CHUNK floats laid out
 * value-major so that a warp's accesses hit 32 distinct banks. */
__device__ __forceinline__ void
ckc_rotate_shared_stage(float v[CKC_CHUNK], int t, int o, float *exchange)
{
    const int d = (t / o) % 4;
    CKC_UNROLL
    for (int e = 0; e < CKC_CHUNK; e++) {
        const float other = __shfl_xor_sync(0xffffffffu, v[e], o);
        exchange[e * CKC_ROW_THREADS + t] = ckc_pair_difference(v[e], other, d);
        v[e] = ckc_pair_sum(v[e], other, d);
    }
    __syncthreads();
    CKC_UNROLL
    for (int e = 0; e < CKC_CHUNK; e++) {
        v[e] = ckc_quartet_output(v[e], exchange[e * CKC_ROW_THREADS + (t ^ (2 * o))], d);
    }
    __syncthreads();
}

/* Rotates one chunk group-wise; values already scaled by 1/sqrt(group).  Every
 * thread of the block calls it (shuffles and barriers need all of them). */
__device__ __forceinline__ void
ckc_rotate_chunk(float v[CKC_CHUNK], int group, int t, float *exchange)
{
    const int lanes = group / CKC_CHUNK; /* threads per group; 0 when group == 4 */
    CKC_UNROLL
    for (int e = 0; e < CKC_CHUNK; e += 4) {
        ckc_h4_butterfly(&v[e], &v[e + 1], &v[e + 2], &v[e + 3]);
    }
    if (group >= 16) {
        CKC_UNROLL
        for (int e = 0; e < 4; e++) {
            ckc_h4_butterfly(&v[e], &v[e + 4], &v[e + 8], &v[e + 12]);
        }
    }
    for (int o = 1; o < lanes; o *= 4) {
        if (4 * o <= 32) {
            ckc_rotate_shuffle_stage(v, t, o);
        } else {
            ckc_rotate_shared_stage(v, t, o, exchange);
        }
    }
}

/* The load-time activation of one row (csrc/math/activation.h): its
 * arguments and the row's factor (rms_norm's r).  Value-initialized (the
 * default of the functions below): no activation. */
struct ckc_row_act {
    ckc_act_args args;
    float factor;
};

/* Whether the activation reads a partner half of the row ([gate | up] for
 * swiglu, [hidden | gate] for situ). */
template <int ACT>
struct ckc_act_paired {
    static constexpr bool value = ACT == CKC_ACT_SWIGLU || ACT == CKC_ACT_SITU;
};

/* A loaded chunk (columns start .. start + 15 of k) activated (int8_linear's
 * input_act and the modulations: `other` the chunk's partner values for the
 * paired activations; the activated value rounded to the element type as
 * eager's activation returns it; columns at or past k stay 0) and, for
 * group > 0, scaled by 1/sqrt(G), rotated and rounded to the element type (as
 * eager rounds its matmul): what the int8 quantizer sees, what the plain
 * rotation stores, and what the NVFP4 quantizer sees in
 * quantize_and_rotate_nvfp4.  `exchange` is only touched for group 1024
 * (ckc_rotation_exchange_bytes). */
template <ckc_float_kind KIND, int ACT>
__device__ __forceinline__ void
ckc_transform_chunk(float v[CKC_CHUNK], const float other[CKC_CHUNK], int group, int t, float *exchange,
                    const ckc_row_act &act = ckc_row_act(), int64_t start = 0, int64_t k = 0)
{
    if (ACT != CKC_ACT_NONE) {
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            v[e] = start + e < k ? ckc_act_apply(ACT, v[e], ckc_act_paired<ACT>::value ? other[e] : 0.0f, act.factor,
                                                 act.args, KIND, start + e)
                                 : 0.0f;
        }
    }
    if (group > 0) {
        const float norm = ckc_hadamard_norm(ckc_hadamard_log4(group));
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            v[e] *= norm;
        }
        ckc_rotate_chunk(v, group, t, exchange);
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            v[e] = ckc_round_to_kind(v[e], KIND);
        }
    }
}

/* The chunks of one segment of a row (segment start s, chunk c at
 * s + (c * CKC_ROW_THREADS + t) * CKC_CHUNK), loaded and transformed
 * (ckc_transform_chunk).  Every load of the segment is issued before the first
 * transform: the rotation's shuffles and barriers keep the compiler from
 * hoisting a later chunk's loads above an earlier chunk's rotation, and one
 * chunk at a time leaves a thread only 32 bytes in flight, which at the row
 * kernels' occupancy cannot cover DRAM latency. */
template <ckc_float_kind KIND, int ACT, int CHUNKS>
__device__ __forceinline__ void
ckc_rotated_segment(const void *row, int64_t s, int64_t k, bool vec, int group, int t, float *exchange,
                    float v[CHUNKS][CKC_CHUNK], const ckc_row_act &act = ckc_row_act())
{
    float other[ckc_act_paired<ACT>::value ? CHUNKS : 1][CKC_CHUNK];
    CKC_UNROLL
    for (int c = 0; c < CHUNKS; c++) {
        const int64_t start = s + ((int64_t)c * CKC_ROW_THREADS + t) * CKC_CHUNK;
        ckc_load_chunk<KIND>(row, start, k, vec, v[c]);
        if (ckc_act_paired<ACT>::value) {
            ckc_load_chunk<KIND>((const char *)row + k * ckc_kind_size(KIND), start, k, vec, other[c]);
        }
    }
    CKC_UNROLL
    for (int c = 0; c < CHUNKS; c++) {
        const int64_t start = s + ((int64_t)c * CKC_ROW_THREADS + t) * CKC_CHUNK;
        ckc_transform_chunk<KIND, ACT>(v[c], other[ckc_act_paired<ACT>::value ? c : 0], group, t, exchange, act, start, k);
    }
}

/* Largest magnitude over the block (NaN wins): integer max of magnitude bits,
 * in a warp then across warps through `partials` (one per warp). */
__device__ __forceinline__ float
ckc_block_absmax(uint32_t bits, uint32_t *partials)
{
    const int t = (int)threadIdx.x;
    for (int o = 16; o > 0; o /= 2) {
        const uint32_t other = __shfl_xor_sync(0xffffffffu, bits, o);
        bits = other > bits ? other : bits;
    }
    if (t % 32 == 0) {
        partials[t / 32] = bits;
    }
    __syncthreads();
    bits = 0;
    for (int w = 0; w < CKC_ROW_THREADS / 32; w++) {
        bits = partials[w] > bits ? partials[w] : bits;
    }
    __syncthreads(); /* partials may be reused by the caller */
    return ckc_f32_from_bits(bits);
}

#endif /* CKC_ROW_TILE_CUH */
