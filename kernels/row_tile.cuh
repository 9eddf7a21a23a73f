/* Device helpers shared by the row kernels (kernels/int8.cu, and the rotated
 * NVFP4 quantizer in kernels/nvfp4.cu, one thread per 16 values): a block of
 * CKC_ROW_THREADS threads owns one row; each thread holds chunks of 16
 * consecutive values in registers ("elements per thread" = 16), so the
 * regular Hadamard rotation runs as
 *   strides 1 and 4   -> inside a thread's registers,
 *   strides 16 .. 64  -> warp shuffles among the G/16 lanes of a group,
 *   stride 256 (G = 1024, a group spans two warps) -> shared memory.
 * Every sum is ckc_h4_butterfly's, stage by stage in the CPU kernels' order,
 * so the GPU rotation equals the CPU one bit for bit (kernels are built
 * without FMA contraction). */
#ifndef CKC_ROW_TILE_CUH
#define CKC_ROW_TILE_CUH

#include "cuda_dialect.h"
#include "math/activation.h"
#include "math/float_bits.h"
#include "math/hadamard.h"

#define CKC_ROW_THREADS 256
#define CKC_CHUNK 16
#define CKC_ROW_SEGMENT(chunks) ((int64_t)CKC_ROW_THREADS * CKC_CHUNK * (chunks))

/* 16 bytes, for one vector load or store where alignment allows. */
struct __align__(16) ckc_bytes16 {
    uint32_t w[4];
};

/* Whether rows starting at p, row_bytes apart, allow ckc_load_chunk's vector loads. */
static inline bool
ckc_aligned16(const void *p, int64_t row_bytes)
{
    return ((uintptr_t)p % 16) == 0 && row_bytes % 16 == 0;
}

/* Loads 16 consecutive elements (those past `limit` read as 0).  `vec`: the
 * caller checked that the row base is 16-byte aligned and rows are whole. */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
ckc_load_chunk(const void *row, int64_t start, int64_t limit, bool vec, float v[CKC_CHUNK])
{
    if (KIND == CKC_F32) {
        const float *s = (const float *)row + start;
        if (vec && start + CKC_CHUNK <= limit) {
            for (int q = 0; q < 4; q++) {
                const ckc_bytes16 b = ((const ckc_bytes16 *)s)[q];
                for (int e = 0; e < 4; e++) {
                    v[4 * q + e] = ckc_f32_from_bits(b.w[e]);
                }
            }
            return;
        }
        for (int e = 0; e < CKC_CHUNK; e++) {
            v[e] = start + e < limit ? s[e] : 0.0f;
        }
    } else {
        const uint16_t *s = (const uint16_t *)row + start;
        uint16_t h[CKC_CHUNK];
        if (vec && start + CKC_CHUNK <= limit) {
            for (int q = 0; q < 2; q++) {
                const ckc_bytes16 b = ((const ckc_bytes16 *)s)[q];
                for (int e = 0; e < 4; e++) {
                    h[8 * q + 2 * e] = (uint16_t)(b.w[e] & 0xFFFFu);
                    h[8 * q + 2 * e + 1] = (uint16_t)(b.w[e] >> 16);
                }
            }
        } else {
            for (int e = 0; e < CKC_CHUNK; e++) {
                h[e] = start + e < limit ? s[e] : (uint16_t)0;
            }
        }
        for (int e = 0; e < CKC_CHUNK; e++) {
            v[e] = KIND == CKC_BF16 ? ckc_bf16_to_f32(h[e]) : ckc_f16_to_f32(h[e]);
        }
    }
}

/* One radix-4 stage across the lanes holding a group: lane digit d = (t/o) % 4;
 * every value gathers its quartet (t + (j - d) o, j = 0..3) and keeps output d. */
__device__ __forceinline__ void
ckc_rotate_shuffle_stage(float v[CKC_CHUNK], int t, int o)
{
    const int d = (t / o) % 4;
    const int lane = t % 32;
    for (int e = 0; e < CKC_CHUNK; e++) {
        float x[4];
        for (int j = 0; j < 4; j++) {
            x[j] = __shfl_sync(0xffffffffu, v[e], lane + (j - d) * o);
        }
        ckc_h4_butterfly(&x[0], &x[1], &x[2], &x[3]);
        v[e] = x[d];
    }
}

/* The same stage through shared memory, for quartets that span warps. */
__device__ __forceinline__ void
ckc_rotate_shared_stage(float v[CKC_CHUNK], int t, int o, float *exchange)
{
    const int d = (t / o) % 4;
    for (int e = 0; e < CKC_CHUNK; e++) {
        exchange[t * CKC_CHUNK + e] = v[e];
    }
    __syncthreads();
    for (int e = 0; e < CKC_CHUNK; e++) {
        float x[4];
        for (int j = 0; j < 4; j++) {
            x[j] = exchange[(t + (j - d) * o) * CKC_CHUNK + e];
        }
        ckc_h4_butterfly(&x[0], &x[1], &x[2], &x[3]);
        v[e] = x[d];
    }
    __syncthreads();
}

/* Rotates one chunk group-wise; values already scaled by 1/sqrt(group).  Every
 * thread of the block calls it (shuffles and barriers need all of them). */
__device__ __forceinline__ void
ckc_rotate_chunk(float v[CKC_CHUNK], int group, int t, float *exchange)
{
    const int lanes = group / CKC_CHUNK; /* threads per group; 0 when group == 4 */
    for (int e = 0; e < CKC_CHUNK; e += 4) {
        ckc_h4_butterfly(&v[e], &v[e + 1], &v[e + 2], &v[e + 3]);
    }
    if (group >= 16) {
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

/* A chunk loaded, activated (int8_linear's input_act: for swiglu the row is
 * [gate | up], up at column k; the activated value rounded to the element type
 * as eager's activation returns it) and, for group > 0, scaled by 1/sqrt(G),
 * rotated and rounded to the element type (as eager rounds its matmul): what
 * the int8 quantizer sees, what the plain rotation stores, and what the NVFP4
 * quantizer sees in quantize_and_rotate_nvfp4.  `exchange` is only touched for
 * group 1024. */
template <ckc_float_kind KIND, int ACT = CKC_ACT_NONE>
__device__ __forceinline__ void
ckc_rotated_chunk(const void *row, int64_t start, int64_t k, bool vec, int group, int t, float *exchange,
                    float v[CKC_CHUNK])
{
    ckc_load_chunk<KIND>(row, start, k, vec, v);
    if (ACT != CKC_ACT_NONE) {
        float up[CKC_CHUNK];
        if (ACT == CKC_ACT_SWIGLU) {
            ckc_load_chunk<KIND>((const char *)row + k * ckc_kind_size(KIND), start, k, vec, up);
        }
        for (int e = 0; e < CKC_CHUNK; e++) {
            v[e] = ckc_act_apply(ACT, v[e], ACT == CKC_ACT_SWIGLU ? up[e] : 0.0f, KIND);
        }
    }
    if (group > 0) {
        const float norm = ckc_hadamard_norm(ckc_hadamard_log4(group));
        for (int e = 0; e < CKC_CHUNK; e++) {
            v[e] *= norm;
        }
        ckc_rotate_chunk(v, group, t, exchange);
        for (int e = 0; e < CKC_CHUNK; e++) {
            v[e] = ckc_round_to_kind(v[e], KIND);
        }
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
