/* SPDX-License-Identifier: Apache-2.0 */
/* The row-tile kernels of the int8 family (layout: kernels/tile.cuh): row-wise
 * quantization (plain, activated, rotated; nearest or stochastic rounding), the
 * plain rotation, and rotated dequantization with a per-row or single scale, one
 * instance per element type, group size (0, 64, 256, 1024) and mode, so that
 * every stage unrolls to straight-line code.  Rows of up to 32768 values are read
 * once and kept in registers; longer rotated ones are read twice (absmax pass, then
 * code pass), 32768 columns at a time (longer plain ones go to the general kernels:
 * the plain quantizer's warp walk is one pass, ckc_tile_plain).  Results are bit
 * for bit those of the general kernels of kernels/int8.cu, which take every call
 * these do not.  Device code only: the launchers are csrc/gpu/launch_tile.c. */
#include "done_mark.cuh"
#include "tile.cuh"

#include "gpu/kernel_args.h"
#include "gpu/kernel_list.h"
#include "math/activation.h"
#include "math/int8_quant.h"


/* A row's quantization scale: the float32 scale returned, the divisor eager uses
 * and, for bfloat16, its reciprocal where ckc_int8_bf16_reciprocal_exact proves
 * x * inv equivalent to x / s (math/int8_quant.h). */
typedef struct {
    float scale;
    float divisor;
    float inv;
    bool reciprocal;
} ckc_tile_scale;

template <ckc_float_kind KIND>
__device__ __forceinline__ ckc_tile_scale
ckc_tile_row_scale(uint32_t absmax_bits)
{
    ckc_tile_scale s;
    s.scale = ckc_int8_scale(ckc_f32_from_bits(absmax_bits));
    s.divisor = ckc_int8_math_scale(s.scale, KIND);
    s.reciprocal = KIND == CKC_BF16 && ckc_int8_bf16_reciprocal_exact(s.divisor);
    s.inv = 1.0f / s.divisor;
    return s;
}

/* The code of a bfloat16 value in a row with the exact reciprocal, in its word's
 * low byte.  As ckc_int8_code: round_bf16(v * inv) equals round_bf16(v / s)
 * (math/int8_quant.h).  No NaN or infinity reaches here: the row's absmax, and so
 * every |v| <= A, is finite, or the scale would fail the reciprocal test.  Range:
 * s >= fl(A / 127) (1 - 2^-8) (bfloat16 rounding), inv <= (1 / s)(1 + 2^-24),
 * so |v * inv| <= 127 (1 + 2^-24)^3 / (1 - 2^-8) < 127.5 + 2^-16, whose
 * bfloat16 rounding is at most 127.5: round half to even gives at least -128
 * and at most 128, and only 128 needs the clamp.  1.5 * 2^23 + r rounds r to the
 * nearest even integer n exactly (|r| <= 2^22) and its bits are 0x4B400000 + n,
 * so the low byte is n's two's complement byte. */
__device__ __forceinline__ uint32_t
ckc_tile_code_bf16(float v, float inv)
{
    const float r = ckc_tile_round<CKC_BF16>(v * inv);
    return ckc_f32_bits((r < 127.0f ? r : 127.0f) + 12582912.0f);
}

/* ckc_int8_code in a word's low byte, with the hardware's rounding (the quotient is
 * never NaN after ckc_int8_nan_to_zero, where both roundings agree). */
template <ckc_float_kind KIND>
__device__ __forceinline__ uint32_t
ckc_tile_code(float v, float divisor)
{
    const float t = ckc_int8_nan_to_zero(v / divisor);
    return (uint8_t)ckc_int8_from_quotient(ckc_tile_round<KIND>(t));
}

/* ckc_int8_code_stochastic from the quotient q (v / s, or v * inv where that is exact). */
template <ckc_float_kind KIND>
__device__ __forceinline__ uint32_t
ckc_tile_code_noise(float q, float noise)
{
    const float t = ckc_int8_nan_to_zero(q);
    return (uint8_t)ckc_int8_from_quotient(floorf(ckc_tile_round<KIND>(ckc_tile_round<KIND>(t) + noise)));
}

/* Where a row's threads hold their 32 values.  The rotation (G > 0) needs a
 * thread's 32 consecutive values (tile.cuh); the plain quantizer (G = 0) only
 * needs the row's absmax, so it walks the row warp-coalesced: chunk q (16 bytes,
 * ckc_tile_chunk values) of thread j at column (q T + j) c, so that one load
 * instruction of a warp reads 512 contiguous bytes and one code store writes 256
 * (16-bit) or 128 (float32), where 32 consecutive values per thread make each of
 * them touch 32 lines 64 or 128 bytes apart.  Rows of one pass only (the
 * launcher gives longer plain rows to the general kernel). */
template <int G, int ACT>
struct ckc_tile_plain {
    static constexpr bool walk = G == 0;
    /* no activation either: the codes come straight from the raw words */
    static constexpr bool value = walk && ACT == CKC_ACT_NONE;
};

/* Thread j's first column, and the columns between its chunks (ckc_tile_load). */
template <ckc_float_kind KIND, int G>
__device__ __forceinline__ int64_t
ckc_tile_first_col(int j)
{
    return (int64_t)j * (ckc_tile_plain<G, CKC_ACT_NONE>::walk ? ckc_tile_chunk<KIND>::values : CKC_TILE);
}

template <ckc_float_kind KIND, int G>
__device__ __forceinline__ int64_t
ckc_tile_chunk_stride(const ckc_tile_geom &g)
{
    return (int64_t)ckc_tile_chunk<KIND>::values * (ckc_tile_plain<G, CKC_ACT_NONE>::walk ? g.threads_per_row : 1);
}

/* A thread's 32 values as the quantizer (or the plain rotation) sees them: loaded
 * words unpacked, activated (rounded to the element type as eager's activation
 * returns it), rotated and rounded to the element type (ckc_transform_chunk's
 * order); returns their largest magnitude as float32 bits (codes modes). */
template <ckc_float_kind KIND, int G, int ACT, bool ABSMAX>
__device__ __forceinline__ uint32_t
ckc_tile_transform(const ckc_tile_raw<KIND> &raw, const ckc_tile_raw<KIND> &up, int j, float v[CKC_TILE])
{
    if (ckc_tile_plain<G, ACT>::value) {
        /* the codes read the raw words (ckc_tile_code_word): 32 floats never live */
        return ABSMAX ? ckc_tile_raw_absmax<KIND>(raw) : 0u;
    }
    ckc_tile_unpack<KIND>(raw, v);
    if (ACT != CKC_ACT_NONE) {
        /* swiglu only (ckc_tile_quantize_rows): no row factor, no column arguments */
        const ckc_act_args none = {};
        float u[CKC_TILE];
        ckc_tile_unpack<KIND>(up, u);
        CKC_UNROLL
        for (int i = 0; i < CKC_TILE; i++) {
            v[i] = ckc_act_apply(ACT, v[i], u[i], 0.0f, none, KIND, 0);
        }
    }
    if constexpr (G > 0) {
        /* The fused first stage for 16-bit values, where a NaN's sign cannot reach an
         * output: bfloat16 rounds every NaN to 0x7FC0; the quantizer keeps only
         * magnitudes and codes NaN as 0; float16 values it stores keep the sign. */
        ckc_tile_rotate<G, KIND == CKC_BF16 || (KIND == CKC_F16 && ABSMAX)>(v, j);
    }
    ckc_tile_absmax m;
    CKC_UNROLL
    for (int i = 0; i < CKC_TILE; i++) {
        if (G > 0 && ABSMAX) {
            v[i] = ckc_tile_round<KIND>(v[i]);
        }
        if (ABSMAX) {
            m.add(v[i]);
        }
    }
    return m.bits();
}

/* Codes of values 4 q .. 4 q + 3 of a thread, in one word: of v, or of the raw
 * words (RAW: the plain quantizer's, ckc_tile_plain); RECIP: the row's scale has
 * the exact reciprocal (s.reciprocal, a template argument so that each store loop
 * holds one form, not both behind a select per value). */
template <ckc_float_kind KIND, int MODE, bool RAW, bool RECIP>
__device__ __forceinline__ uint32_t
ckc_tile_code_word(int q, const float v[CKC_TILE], const ckc_tile_raw<KIND> &raw, const ckc_tile_raw<KIND> &noise,
                   const ckc_tile_scale &s)
{
    uint32_t c[4];
    CKC_UNROLL
    for (int e = 0; e < 4; e++) {
        const float x = RAW ? ckc_tile_value<KIND>(raw, 4 * q + e) : v[4 * q + e];
        if (MODE == CKC_TILE_CODES && RECIP) {
            c[e] = ckc_tile_code_bf16(x, s.inv);
        } else if (MODE == CKC_TILE_CODES) {
            c[e] = ckc_tile_code<KIND>(x, s.divisor);
        } else {
            const float t = RECIP ? x * s.inv : x / s.divisor;
            c[e] = ckc_tile_code_noise<KIND>(t, ckc_tile_value<KIND>(noise, 4 * q + e));
        }
    }
    return ckc_low_bytes4(c[0], c[1], c[2], c[3]);
}

/* ckc_tile_store_codes for one form of the scale (RECIP). */
template <ckc_float_kind KIND, int G, int MODE, int ACT, bool RECIP>
__device__ __forceinline__ void
ckc_tile_put_codes(int8_t *out, int64_t col, int64_t stride, bool live, const float v[CKC_TILE],
                   const ckc_tile_raw<KIND> &raw, const ckc_tile_raw<KIND> &noise, const ckc_tile_scale &s)
{
    constexpr bool RAW = ckc_tile_plain<G, ACT>::value;
    if constexpr (ckc_tile_plain<G, ACT>::walk) {
        constexpr int words = ckc_tile_chunk<KIND>::values / 4;
        CKC_UNROLL
        for (int q = 0; q < CKC_TILE / ckc_tile_chunk<KIND>::values; q++) {
            int8_t *d = out + col + q * stride;
            if constexpr (words == 2) {
                const ckc_bytes8 b = {{ckc_tile_code_word<KIND, MODE, RAW, RECIP>(2 * q, v, raw, noise, s),
                                       ckc_tile_code_word<KIND, MODE, RAW, RECIP>(2 * q + 1, v, raw, noise, s)}};
                if (live) {
                    *(ckc_bytes8 *)d = b;
                }
            } else {
                const uint32_t w = ckc_tile_code_word<KIND, MODE, RAW, RECIP>(q, v, raw, noise, s);
                if (live) {
                    *(uint32_t *)d = w;
                }
            }
        }
    } else {
        uint32_t w[CKC_TILE / 4];
        CKC_UNROLL
        for (int q = 0; q < CKC_TILE / 4; q++) {
            w[q] = ckc_tile_code_word<KIND, MODE, RAW, RECIP>(q, v, raw, noise, s);
        }
        if (live) {
            ckc_bytes16 *d = (ckc_bytes16 *)(out + col);
            d[0] = ckc_bytes16{{w[0], w[1], w[2], w[3]}};
            d[1] = ckc_bytes16{{w[4], w[5], w[6], w[7]}};
        }
    }
}

/* Codes of a thread's 32 values at out + col (when `live`): chunk by chunk at
 * col + q * stride for the walk (8- or 4-byte stores), else two 16-byte stores. */
template <ckc_float_kind KIND, int G, int MODE, int ACT>
__device__ __forceinline__ void
ckc_tile_store_codes(int8_t *out, int64_t col, int64_t stride, bool live, const float v[CKC_TILE],
                     const ckc_tile_raw<KIND> &raw, const ckc_tile_raw<KIND> &noise, const ckc_tile_scale &s)
{
    if (s.reciprocal) {
        ckc_tile_put_codes<KIND, G, MODE, ACT, true>(out, col, stride, live, v, raw, noise, s);
    } else {
        ckc_tile_put_codes<KIND, G, MODE, ACT, false>(out, col, stride, live, v, raw, noise, s);
    }
}

/* Loads a thread's raw words of row `row`, chunks at col + q * stride
 * (ckc_tile_load): x, the up half for swiglu, the noise.  All inside the tensor. */
template <ckc_float_kind KIND, int MODE, int ACT>
__device__ __forceinline__ void
ckc_tile_load_row(const ckc_tile_rows_args &a, int64_t row, int64_t col, int64_t stride, uint32_t zero,
                  ckc_tile_raw<KIND> &raw, ckc_tile_raw<KIND> &up, ckc_tile_raw<KIND> &noise)
{
    const int64_t esize = ckc_kind_size(KIND);
    const char *x = (const char *)a.x + row * a.x_stride * esize;
    ckc_tile_load<KIND>(x, col, stride, raw);
    if (ACT == CKC_ACT_SWIGLU) {
        ckc_tile_load<KIND>(x + a.cols * esize, col, stride, up);
    }
    if (MODE == CKC_TILE_CODES_NOISE) {
        /* the noise is used last: tie it to x so that its loads are issued with x's */
        ckc_tile_load<KIND>((const char *)a.noise + row * a.cols * esize, col, stride, noise);
        ckc_tile_together(raw.w, noise.w, 4, zero);
    }
}

template <ckc_float_kind KIND, int G, int MODE, int ACT>
__device__ __forceinline__ void
ckc_tile_rows_body(ckc_tile_rows_args a, ckc_tile_geom g, ckc_done_mark done)
{
    constexpr bool CODES = MODE != CKC_TILE_VALUES;
    __shared__ uint32_t row_max[CKC_TILE_MAX_ROWS];
    const int j = (int)threadIdx.x;
    const int64_t r = (int64_t)blockIdx.x * g.rows_per_block + threadIdx.y;
    const bool live_row = r < a.rows;
    const int64_t row = live_row ? r : 0;
    ckc_tile_raw<KIND> raw = {}, up = {}, noise = {};
    float v[CKC_TILE];
    if (CODES && j == 0) {
        row_max[threadIdx.y] = 0;
    }
    /* the walk (G = 0) has no values mode and one pass only: the launcher gives longer plain
     * rows to the general kernels, so the segments' branch below is not even compiled for it */
    static_assert(!(ckc_tile_plain<G, ACT>::walk && MODE == CKC_TILE_VALUES), "plain rows: codes only");
    if (ckc_tile_plain<G, ACT>::walk || g.segments == 1) {
        const int64_t col = ckc_tile_first_col<KIND, G>(j);
        const int64_t stride = ckc_tile_chunk_stride<KIND, G>(g);
        ckc_tile_load_row<KIND, MODE, ACT>(a, row, col, stride, g.zero, raw, up, noise);
        if (!CODES) {
            ckc_tile_transform<KIND, G, ACT, false>(raw, up, j, v);
            ckc_tile_store_values<KIND>((char *)a.out + row * a.cols * ckc_kind_size(KIND), col, live_row, v);
        } else {
            __syncthreads(); /* row_max zeroed */
            uint32_t bits = ckc_tile_transform<KIND, G, ACT, true>(raw, up, j, v);
            const ckc_tile_scale s = ckc_tile_row_scale<KIND>(ckc_tile_row_max(bits, g, row_max));
            if (j == 0 && live_row) {
                a.scale[r] = s.scale;
            }
            ckc_tile_store_codes<KIND, G, MODE, ACT>((int8_t *)a.out + row * a.out_stride, col, stride, live_row, v,
                                                     raw, noise, s);
        }
    } else if constexpr (!ckc_tile_plain<G, ACT>::walk) {
        /* Rows longer than one pass of the block: 32 * T columns at a time; columns
         * past the row are whole rotation groups, read as copies of its first
         * columns and never stored.  The loops run at least once (do-while, which
         * also keeps the model's hot path, benchmarks/sass_paths.py, through them). */
        const int64_t step = (int64_t)g.threads_per_row * CKC_TILE;
        uint32_t bits = 0;
        int s = 0;
        do {
            const int64_t col = s * step + (int64_t)j * CKC_TILE;
            const bool live = live_row && col < a.cols;
            ckc_tile_load_row<KIND, CKC_TILE_CODES, ACT>(a, row, live ? col : 0, ckc_tile_chunk<KIND>::values, g.zero,
                                                         raw, up, noise);
            if (!CODES) {
                ckc_tile_transform<KIND, G, ACT, false>(raw, up, j, v);
                ckc_tile_store_values<KIND>((char *)a.out + row * a.cols * ckc_kind_size(KIND), col, live, v);
            } else {
                /* columns past the row hold copies of its first ones: not part of its absmax */
                const uint32_t b = ckc_tile_transform<KIND, G, ACT, true>(raw, up, j, v);
                bits = live && b > bits ? b : bits;
            }
        } while (++s < g.segments);
        if (CODES) {
            __syncthreads(); /* row_max zeroed */
            const ckc_tile_scale sc = ckc_tile_row_scale<KIND>(ckc_tile_row_max(bits, g, row_max));
            if (j == 0 && live_row) {
                a.scale[r] = sc.scale;
            }
            s = 0;
            do {
                const int64_t col = s * step + (int64_t)j * CKC_TILE;
                const bool live = live_row && col < a.cols;
                ckc_tile_load_row<KIND, MODE, ACT>(a, row, live ? col : 0, ckc_tile_chunk<KIND>::values, g.zero, raw,
                                                   up, noise);
                ckc_tile_transform<KIND, G, ACT, true>(raw, up, j, v);
                ckc_tile_store_codes<KIND, G, MODE, ACT>((int8_t *)a.out + row * a.out_stride, col,
                                                         ckc_tile_chunk<KIND>::values, live, v, raw, noise, sc);
            } while (++s < g.segments);
        }
    }
    ckc_done_mark_arrive(done);
}

/* Registers per thread of an instance, a cap (__maxnreg__) where a block size bound would
 * only give 65536 per SM over CKC_TILE_THREADS:
 *   48 for the plain 16-bit quantizer, whose live values are its 16 raw words: three blocks
 *      of a 14336-value row (448 threads) per SM instead of two.  float32's 32 raw words do
 *      not fit 48 without spilling (sm_120), nor does float16's walk on Thor (sm_110, CUDA
 *      13's ptxas: 20 bytes), which takes 56 (CKC_TILE_PLAIN_REGISTERS);
 *   128 for the noise and swiglu instances, as their 512-thread bound allowed (64 spills
 *      float16 swiglu's and float32 noise's plain walks on every target);
 *   64 for the rest, as their 1024-thread bound allowed. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 1100
#define CKC_TILE_PLAIN_REGISTERS 56
#else
#define CKC_TILE_PLAIN_REGISTERS 48
#endif
#define CKC_TILE_REGISTERS(k, g, mode, act)                                                                   \
    ((g) == 0 && (k) != 0 && (mode) == CKC_TILE_CODES && (act) == CKC_ACT_NONE ? CKC_TILE_PLAIN_REGISTERS      \
     : CKC_TILE_THREADS(mode, act) == CKC_TILE_WIDE_THREADS                    ? 128                           \
                                                                               : 64)

#define CKC_TILE_ROWS_INSTANCE(k, g, mode, act)                                                                 \
    CKC_KERNEL_INSTANCE(CKC_KNAME4(ckc_tile_rows_kernel, k, g, mode, act),                                       \
                        CKC_MAX_REGISTERS(CKC_TILE_REGISTERS(k, g, mode, act)),                                   \
                        (ckc_tile_rows_args a, ckc_tile_geom geom, ckc_done_mark done),                          \
                        (ckc_tile_rows_body<(ckc_float_kind)k, g, mode, act>(a, geom, done)))
CKC_TILE_ROWS_KERNELS(CKC_TILE_ROWS_INSTANCE)

/* ---- dequantization: out = round(q * scale) (* 1/sqrt(G), rotated), per-row or single scale ---- */

/* 32 codes (two 16-byte loads) as floats (ckc_tile_word_floats, word by word). */
__device__ __forceinline__ void
ckc_tile_codes_to_floats(const uint32_t w[CKC_TILE / 4], float v[CKC_TILE])
{
    CKC_UNROLL
    for (int q = 0; q < CKC_TILE / 4; q++) {
        ckc_tile_word_floats(w[q], v + 4 * q);
    }
}

template <ckc_float_kind KIND, int G>
__device__ __forceinline__ void
ckc_tile_dequant_body(ckc_dequantize_int8_convrot_weight_dtype_params p, ckc_tile_geom g, ckc_done_mark done)
{
    const int j = (int)threadIdx.x;
    const int64_t r = (int64_t)blockIdx.x * g.rows_per_block + threadIdx.y;
    const bool live_row = r < p.rows;
    const int64_t row = live_row ? r : 0;
    const float scale = p.scale[p.scale_mode == CKC_SCALE_PER_ROW ? row : 0];
    const int64_t step = (int64_t)g.threads_per_row * CKC_TILE;
    int s = 0;
    do {
        const int64_t col = s * step + (int64_t)j * CKC_TILE;
        const bool live = live_row && col < p.cols;
        uint32_t w[CKC_TILE / 4];
        /* threads of rows past the tensor (or columns past the row) read its first codes, store nothing */
        const ckc_bytes16 *src = (const ckc_bytes16 *)(p.q + row * p.cols + (live ? col : 0));
        CKC_UNROLL
        for (int q = 0; q < 2; q++) {
            const ckc_bytes16 b = src[q];
            CKC_UNROLL
            for (int i = 0; i < 4; i++) {
                w[4 * q + i] = b.w[i];
            }
        }
        ckc_tile_together(w, w + 4, 4, g.zero);
        float v[CKC_TILE];
        ckc_tile_codes_to_floats(w, v);
        CKC_UNROLL
        for (int i = 0; i < CKC_TILE; i++) {
            v[i] *= scale;
        }
        if constexpr (G > 0) {
            ckc_tile_rotate<G, false>(v, j); /* q * scale: any float */
        }
        ckc_tile_store_values<KIND>((char *)p.out + row * p.cols * ckc_kind_size(KIND), col, live, v);
    } while (++s < g.segments);
    ckc_done_mark_arrive(done);
}

#define CKC_TILE_DEQUANT_INSTANCE(k, g)                                                                         \
    CKC_KERNEL_INSTANCE(CKC_KNAME2(ckc_tile_dequant_kernel, k, g), __launch_bounds__(CKC_TILE_MAX_THREADS),       \
                        (ckc_dequantize_int8_convrot_weight_dtype_params p, ckc_tile_geom geom,                        \
                         ckc_done_mark done),                                                                          \
                        (ckc_tile_dequant_body<(ckc_float_kind)k, g>(p, geom, done)))
CKC_TILE_DEQUANT_KERNELS(CKC_TILE_DEQUANT_INSTANCE)
