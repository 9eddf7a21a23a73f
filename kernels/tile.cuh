/* SPDX-License-Identifier: Apache-2.0 */
/* The row tile of the memory-bound row kernels (kernels/int8.cu): a thread holds
 * CKC_TILE = 32 values of a row in registers (consecutive ones where a rotation
 * needs them; the plain quantizer's warp walk takes 16-byte chunks T apart,
 * int8_tile.cu's ckc_tile_plain), a row is held by
 * T = K / 32 threads (threadIdx.x), and a block holds R rows (threadIdx.y), R
 * chosen so that R * T is a whole number of warps: no lane idles whatever K
 * (3072: 96 threads, 5120: 160, 5376: 4 rows of 168, 14336: 448, up to 32768 in
 * one pass).  A thread issues every 16-byte load of its 32 values (64 bytes of a
 * 16-bit row, 128 of float32) before it unpacks the first, so each thread waits
 * for DRAM once.
 *
 * The regular Hadamard rotation of a group of G = 4^n values, value i of the
 * thread with column chunk j being element 32 j + i, runs its radix-4 stages
 *   digit 0 and 1 (strides 1, 4)   in the thread's registers,
 *   digit 2 (stride 16)            half in registers (bit 4 of i), half across
 *                                  the lane pair j, j ^ 1: one shuffle per pair,
 *   digit 3 (stride 64, G >= 256)  across lanes j ^ 2, j ^ 4,
 *   digit 4 (stride 256, G = 1024) across lanes j ^ 8, j ^ 16:
 * a group spans G / 32 lanes of one warp, so no stage needs shared memory.
 * Every sum is ckc_h4_butterfly's, bit for bit (see the stage helpers).
 *
 * Hardware conversions: on sm_80 and later the rounding to bfloat16 or float16
 * is one cvt (F2FP) instead of the integer rounding of math/float_bits.h; both
 * round to nearest even and agree on every non-NaN value, and a NaN is never
 * stored through them (ckc_tile_pack falls back to the software encoders when a
 * thread holds one).  The emulated device runs the software forms. */
#ifndef CKC_TILE_CUH
#define CKC_TILE_CUH

#include "cuda_dialect.h"
#include "elements.cuh"
#include "math/float_bits.h"
#include "math/hadamard.h"
#include "row_tile.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define CKC_TILE_HW_CVT 1
#else
#define CKC_TILE_HW_CVT 0
#endif

/* A thread's raw words: 32 values of 16 bits (16 words) or of 32 bits (32 words). */
template <ckc_float_kind KIND>
struct ckc_tile_raw {
    uint32_t w[KIND == CKC_F32 ? CKC_TILE : CKC_TILE / 2];
};

/* Values of a 16-byte chunk: 8 of a 16-bit type, 4 of float32. */
template <ckc_float_kind KIND>
struct ckc_tile_chunk {
    static constexpr int values = KIND == CKC_F32 ? 4 : 8;
};

/* Loads 32 values with 16-byte loads, all issued before any use: chunk q (its
 * ckc_tile_chunk values) from row + col + q * stride, stride in elements (the
 * chunk's width for 32 consecutive values; the row's threads times it for the
 * warp walk of the plain quantizer, int8_tile.cu).  The addresses must be inside
 * the tensor: callers point threads of rows past the tensor (or of columns past
 * a row) at its first row (or column) and store nothing from them; a load under
 * a condition is one the compiler may sink below the first use of the others. */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
ckc_tile_load(const void *row, int64_t col, int64_t stride, ckc_tile_raw<KIND> &raw)
{
    constexpr int n = (int)(sizeof(raw.w) / 16);
    const char *base = (const char *)row + col * ckc_kind_size(KIND);
    CKC_UNROLL
    for (int q = 0; q < n; q++) {
        const ckc_bytes16 b = *(const ckc_bytes16 *)(base + q * stride * ckc_kind_size(KIND));
        CKC_UNROLL
        for (int i = 0; i < 4; i++) {
            raw.w[4 * q + i] = b.w[i];
        }
    }
}

/* Makes words a[0..n) depend on words b[0..n) (a ^= b & zero, zero being 0 that the
 * compiler cannot see): no use of a loaded chunk can then be scheduled before the
 * load of the other is issued.  ptxas for sm_120 otherwise issued a thread's second
 * 16-byte load only after unpacking its first, into the same registers. */
__device__ __forceinline__ void
ckc_tile_together(uint32_t *a, const uint32_t *b, int n, uint32_t zero)
{
    for (int i = 0; i < n; i++) {
        a[i] ^= b[i] & zero;
    }
}

/* Four int8 codes (one word, little-endian) as floats: the biased byte b + 128
 * placed under the exponent of 2^23 is the float 2^23 + b + 128, exactly, and
 * subtracting 2^23 + 128 leaves b: a PRMT and an FADD per value instead of an
 * I2F on the conversion pipe.  The int8 dequantizers' (int8_tile.cu, int8.cu). */
__device__ __forceinline__ void
ckc_tile_word_floats(uint32_t w, float v[4])
{
    const uint32_t biased = w ^ 0x80808080u;
    CKC_UNROLL
    for (int e = 0; e < 4; e++) {
#if defined(__CUDA_ARCH__)
        const uint32_t bits = __byte_perm(biased, 0x4B000000u, 0x7540 + e);
#else
        const uint32_t bits = 0x4B000000u | (biased >> (8 * e) & 0xFFu);
#endif
        v[e] = ckc_f32_from_bits(bits) - 8388736.0f;
    }
}

/* Value i of the raw words as a float. */
template <ckc_float_kind KIND>
__device__ __forceinline__ float
ckc_tile_value(const ckc_tile_raw<KIND> &raw, int i)
{
    if constexpr (KIND == CKC_F32) {
        return ckc_f32_from_bits(raw.w[i]);
    } else if constexpr (KIND == CKC_BF16) {
        const uint32_t w = raw.w[i / 2];
        return ckc_f32_from_bits(i % 2 == 0 ? w << 16 : w & 0xFFFF0000u);
    } else {
        return ckc_half_value(KIND, (uint16_t)(raw.w[i / 2] >> (16 * (i % 2))));
    }
}

/* The values of the raw words as floats. */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
ckc_tile_unpack(const ckc_tile_raw<KIND> &raw, float v[CKC_TILE])
{
    CKC_UNROLL
    for (int i = 0; i < CKC_TILE; i++) {
        v[i] = ckc_tile_value<KIND>(raw, i);
    }
}

/* Largest magnitude of the raw values as float32 bits (NaN above infinity), as
 * math/int8_quant.h orders them: an integer max of magnitude bits.  16-bit values
 * two at a time (a 16x2 SIMD max: one instruction per two words on sm_90). */
template <ckc_float_kind KIND>
__device__ __forceinline__ uint32_t
ckc_tile_raw_absmax(const ckc_tile_raw<KIND> &raw)
{
    uint32_t m = 0;
    if constexpr (KIND == CKC_F32) {
        CKC_UNROLL
        for (int i = 0; i < CKC_TILE; i++) {
            const uint32_t b = raw.w[i] & 0x7FFFFFFFu;
            m = b > m ? b : m;
        }
        return m;
    } else {
        CKC_UNROLL
        for (int i = 0; i < CKC_TILE / 2; i++) {
#if defined(__CUDA_ARCH__)
            m = __vmaxu2(m, raw.w[i] & 0x7FFF7FFFu);
#else
            const uint32_t w = raw.w[i] & 0x7FFF7FFFu;
            const uint32_t lo = (w & 0xFFFFu) > (m & 0xFFFFu) ? (w & 0xFFFFu) : (m & 0xFFFFu);
            const uint32_t hi = (w >> 16) > (m >> 16) ? (w >> 16) : (m >> 16);
            m = lo | hi << 16;
#endif
        }
        const uint16_t h = (uint16_t)((m & 0xFFFFu) > (m >> 16) ? (m & 0xFFFFu) : (m >> 16));
        return ckc_f32_bits(ckc_half_value(KIND, h)); /* monotone in the magnitude bits, NaN payloads too */
    }
}

/* Running largest magnitude of float values (NaN wins).  On the GPU a float max
 * that propagates NaN (sm_80+); the emulated device keeps the integer max of
 * magnitude bits.  They agree on every non-NaN value; for a NaN they give
 * different NaN bits, and the only use, the scale absmax / 127, is the GPU's
 * canonical NaN either way. */
struct ckc_tile_absmax {
#if CKC_TILE_HW_CVT
    float f = 0.0f;
    __device__ __forceinline__ void add(float v)
    {
        asm("max.NaN.f32 %0, %1, %2;" : "=f"(f) : "f"(f), "f"(fabsf(v)));
    }
    __device__ __forceinline__ uint32_t bits() const { return ckc_f32_bits(f); }
#else
    uint32_t m = 0;
    __device__ __forceinline__ void add(float v)
    {
        const uint32_t b = ckc_f32_bits(v) & 0x7FFFFFFFu;
        m = b > m ? b : m;
    }
    __device__ __forceinline__ uint32_t bits() const { return m; }
#endif
};

/* v rounded to the element type, as a float: ckc_round_to_kind for every non-NaN
 * value; a NaN stays a NaN (its bits may differ: see the file comment). */
template <ckc_float_kind KIND>
__device__ __forceinline__ float
ckc_tile_round(float v)
{
#if CKC_TILE_HW_CVT
    if constexpr (KIND == CKC_BF16) {
        uint32_t d;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(v), "f"(0.0f));
        return ckc_f32_from_bits(d);
    } else if constexpr (KIND == CKC_F16) {
        unsigned short h;
        float f;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
        return f;
    }
#endif
    return ckc_round_to_kind(v, KIND);
}

/* Elements lo, hi (in that order) rounded to a 16-bit element type, as one word.
 * `exact`: the software encoders (canonical NaNs 0x7FC0 / 0x7E00, as every other
 * path); else the hardware's, valid only when neither value is a NaN. */
template <ckc_float_kind KIND>
__device__ __forceinline__ uint32_t
ckc_tile_pack(float lo, float hi, bool exact)
{
#if CKC_TILE_HW_CVT
    if (!exact) {
        uint32_t d;
        if constexpr (KIND == CKC_BF16) {
            asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
        } else {
            asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
        }
        return d;
    }
#endif
    (void)exact;
    return (uint32_t)ckc_half_bits(KIND, lo) | (uint32_t)ckc_half_bits(KIND, hi) << 16;
}

/* Whether any of the values is a NaN (two per compare on the GPU). */
__device__ __forceinline__ bool
ckc_tile_any_nan(const float v[CKC_TILE])
{
    bool nan = false;
    CKC_UNROLL
    for (int i = 0; i < CKC_TILE; i += 2) {
        nan |= !(v[i] == v[i]) || !(v[i + 1] == v[i + 1]);
    }
    return nan;
}

/* Stores 32 values rounded to the element type with 16-byte stores; nothing when
 * `live` is false.  `exact`: some value may be a NaN (ckc_tile_pack). */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
ckc_tile_store_values(void *row, int64_t col, bool live, const float v[CKC_TILE], bool exact)
{
    ckc_bytes16 *d = (ckc_bytes16 *)((char *)row + col * ckc_kind_size(KIND));
    if constexpr (KIND == CKC_F32) {
        CKC_UNROLL
        for (int q = 0; q < CKC_TILE / 4; q++) {
            ckc_bytes16 b;
            CKC_UNROLL
            for (int i = 0; i < 4; i++) {
                b.w[i] = ckc_f32_bits(v[4 * q + i]);
            }
            if (live) {
                d[q] = b;
            }
        }
    } else {
        CKC_UNROLL
        for (int q = 0; q < CKC_TILE / 8; q++) {
            ckc_bytes16 b;
            CKC_UNROLL
            for (int i = 0; i < 4; i++) {
                b.w[i] = ckc_tile_pack<KIND>(v[8 * q + 2 * i], v[8 * q + 2 * i + 1], exact);
            }
            if (live) {
                d[q] = b;
            }
        }
    }
}

/* The same, NaNs written as the software encoders write them. */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
ckc_tile_store_values(void *row, int64_t col, bool live, const float v[CKC_TILE])
{
    ckc_tile_store_values<KIND>(row, col, live, v, KIND != CKC_F32 && ckc_tile_any_nan(v));
}

/* ---- the rotation (see the file comment) ---- */

/* a + b with the operands in ckc_h4_butterfly's order: `swap` puts b first.  The
 * GPU's floating-point additions are commutative bit for bit (a NaN result is
 * the canonical NaN whatever the operands), so only the emulated device, whose
 * x86 arithmetic keeps the first NaN operand's payload, needs the order. */
__device__ __forceinline__ float
ckc_tile_add(float a, float b, bool swap)
{
#if defined(__CUDA_ARCH__)
    (void)swap;
    return a + b;
#else
    return swap ? b + a : a + b;
#endif
}

/* Digit 2: pairs (v[p], v[p + 16]) are (x0, x1) on even lanes and (x2, x3) on odd
 * ones; both form s = a + b and d = a - b (p, m on even lanes, q, r on odd ones),
 * swap d, and end with y0 = p + r, y1 = p - r (even) or y2 = m + q, y3 = q - m (odd). */
__device__ __forceinline__ void
ckc_tile_half_stage(float v[CKC_TILE], int j)
{
    const bool odd = (j & 1) != 0;
    CKC_UNROLL
    for (int p = 0; p < CKC_TILE / 2; p++) {
        const float s = v[p] + v[p + 16];
        const float d = v[p] - v[p + 16];
        const float other = __shfl_xor_sync(0xffffffffu, d, 1);
        v[p] = ckc_tile_add(s, other, odd);
        v[p + 16] = s - other;
    }
}

/* A radix-4 stage across lanes j ^ o, j ^ 2o (4 o <= 32).  Each lane sums and
 * subtracts with its partner across o and swaps the difference across 2 o; with
 * digit d = (j / o) % 4 it ends with the butterfly's output d.  On the GPU:
 * own + other and own - other on every lane (x1 - x0 = -(x0 - x1) and x + (-y) =
 * x - y exactly), so y = sum + received: p + r, p + (-r), q + m, q + (-m).  The
 * emulated device keeps row_tile.cuh's operand order for NaN payloads. */
__device__ __forceinline__ void
ckc_tile_lane_stage(float v[CKC_TILE], int j, int o)
{
#if defined(__CUDA_ARCH__)
    (void)j;
    CKC_UNROLL
    for (int e = 0; e < CKC_TILE; e++) {
        const float other = __shfl_xor_sync(0xffffffffu, v[e], o);
        const float sum = v[e] + other;
        const float received = __shfl_xor_sync(0xffffffffu, v[e] - other, 2 * o);
        v[e] = sum + received;
    }
#else
    const int d = (j / o) % 4;
    CKC_UNROLL
    for (int e = 0; e < CKC_TILE; e++) {
        const float other = __shfl_xor_sync(0xffffffffu, v[e], o);
        const float sum = ckc_pair_sum(v[e], other, d);
        const float difference = __shfl_xor_sync(0xffffffffu, ckc_pair_difference(v[e], other, d), 2 * o);
        v[e] = ckc_quartet_output(sum, difference, d);
    }
#endif
}

/* Digit 0 of values of a 16-bit type scaled by norm (a power of two, 2^-2 ..
 * 2^-5): x * norm is exact for them (8 or 11 significant bits, none below 2^-133,
 * the smallest bfloat16: 2^-138 is still a float32), so fma(x0, norm, x1 * norm)
 * rounds x0 * norm + x1 * norm once, as ckc_h4_butterfly's p = x0' + x1' does:
 * ten instructions per quartet instead of twelve. */
__device__ __forceinline__ void
ckc_tile_scaled_butterfly(float *x0, float *x1, float *x2, float *x3, float norm)
{
    const float a1 = *x1 * norm;
    const float a3 = *x3 * norm;
    const float p = fmaf(*x0, norm, a1);
    const float m = fmaf(*x0, norm, -a1);
    const float q = fmaf(*x2, norm, a3);
    const float r = fmaf(*x2, norm, -a3);
    *x0 = p + r;
    *x1 = p - r;
    *x2 = m + q;
    *x3 = q - m;
}

/* Rotates a thread's 32 values (of column chunk j) group-wise by the regular
 * Hadamard matrix of size G (64, 256 or 1024), scaled by 1/sqrt(G) first.
 * HALF: the values are of a 16-bit type (ckc_tile_scaled_butterfly; a NaN's sign
 * may then differ from ckc_h4_butterfly's on the emulated device: callers take it
 * only where that sign cannot reach an output). */
template <int G, bool HALF>
__device__ __forceinline__ void
ckc_tile_rotate(float v[CKC_TILE], int j)
{
    static_assert(G == 64 || G == 256 || G == 1024, "tile rotation: G in {64, 256, 1024}");
    const float norm = ckc_hadamard_norm(ckc_hadamard_log4(G));
    if (HALF) {
        CKC_UNROLL
        for (int i = 0; i < CKC_TILE; i += 4) {
            ckc_tile_scaled_butterfly(&v[i], &v[i + 1], &v[i + 2], &v[i + 3], norm);
        }
    } else {
        CKC_UNROLL
        for (int i = 0; i < CKC_TILE; i++) {
            v[i] *= norm;
        }
        CKC_UNROLL
        for (int i = 0; i < CKC_TILE; i += 4) {
            ckc_h4_butterfly(&v[i], &v[i + 1], &v[i + 2], &v[i + 3]);
        }
    }
    CKC_UNROLL
    for (int h = 0; h < CKC_TILE; h += 16) {
        CKC_UNROLL
        for (int i = 0; i < 4; i++) {
            ckc_h4_butterfly(&v[h + i], &v[h + i + 4], &v[h + i + 8], &v[h + i + 12]);
        }
    }
    ckc_tile_half_stage(v, j);
    if (G >= 256) {
        ckc_tile_lane_stage(v, j, 2);
    }
    if (G >= 1024) {
        ckc_tile_lane_stage(v, j, 8);
    }
}

/* ---- the row's absmax across its threads ---- */

/* Largest of `bits` over the threads of row threadIdx.y, for every thread of it:
 * a shuffle max over the row's runs of W lanes, one shared-memory atomic per run,
 * a barrier.  `row_max` (R words) was zeroed before a barrier this block passed.
 * Every thread of the block calls it. */
__device__ __forceinline__ uint32_t
ckc_tile_row_max(uint32_t bits, const ckc_tile_geom &g, uint32_t *row_max)
{
    const int lane = (int)(threadIdx.y * blockDim.x + threadIdx.x) % 32;
    CKC_UNROLL
    for (int o = 1; o < 32; o *= 2) {
        if (o < g.segment_lanes) {
            const uint32_t other = __shfl_xor_sync(0xffffffffu, bits, o);
            bits = other > bits ? other : bits;
        }
    }
    if (lane % g.segment_lanes == 0) {
        atomicMax(&row_max[threadIdx.y], bits);
    }
    __syncthreads();
    return row_max[threadIdx.y];
}

#endif /* CKC_TILE_CUH */
