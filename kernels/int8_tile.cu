/* SPDX-License-Identifier: Apache-2.0 */
/* The row-tile kernels of the int8 family (layout: kernels/tile.cuh): row-wise
 * quantization (plain, activated, rotated; nearest or stochastic rounding), the
 * plain rotation, and rotated dequantization with a per-row or single scale, one
 * instance per element type, group size (0, 64, 256, 1024) and mode, so that
 * every stage unrolls to straight-line code.  Rows of up to 32768 values are read
 * once and kept in registers; longer ones are read twice (absmax pass, then code
 * pass), 32768 columns at a time.  Results are bit for bit those of the general
 * kernels of kernels/int8.cu, which take every call these do not.  Device code
 * only: the launchers are csrc/gpu/launch_tile.c. */
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

/* A thread's 32 values as the quantizer (or the plain rotation) sees them: loaded
 * words unpacked, activated (rounded to the element type as eager's activation
 * returns it), rotated and rounded to the element type (ckc_transform_chunk's
 * order); returns their largest magnitude as float32 bits (codes modes). */
template <ckc_float_kind KIND, int G, int ACT, bool ABSMAX>
__device__ __forceinline__ uint32_t
ckc_tile_transform(const ckc_tile_raw<KIND> &raw, const ckc_tile_raw<KIND> &up, int j, float v[CKC_TILE])
{
    ckc_tile_unpack<KIND>(raw, v);
    if (G == 0 && ACT == CKC_ACT_NONE) {
        return ABSMAX ? ckc_tile_raw_absmax<KIND>(raw) : 0u;
    }
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

/* Codes of a thread's 32 values, 16-byte stores at out + col (when `live`). */
template <ckc_float_kind KIND, int MODE>
__device__ __forceinline__ void
ckc_tile_store_codes(int8_t *out, int64_t col, bool live, const float v[CKC_TILE],
                     const ckc_tile_raw<KIND> &noise, const ckc_tile_scale &s)
{
    uint32_t w[CKC_TILE / 4];
    if (MODE == CKC_TILE_CODES && s.reciprocal) {
        CKC_UNROLL
        for (int q = 0; q < CKC_TILE / 4; q++) {
            w[q] = ckc_low_bytes4(ckc_tile_code_bf16(v[4 * q], s.inv), ckc_tile_code_bf16(v[4 * q + 1], s.inv),
                                   ckc_tile_code_bf16(v[4 * q + 2], s.inv), ckc_tile_code_bf16(v[4 * q + 3], s.inv));
        }
    } else if (MODE == CKC_TILE_CODES) {
        CKC_UNROLL
        for (int q = 0; q < CKC_TILE / 4; q++) {
            w[q] = ckc_low_bytes4(ckc_tile_code<KIND>(v[4 * q], s.divisor),
                                   ckc_tile_code<KIND>(v[4 * q + 1], s.divisor),
                                   ckc_tile_code<KIND>(v[4 * q + 2], s.divisor),
                                   ckc_tile_code<KIND>(v[4 * q + 3], s.divisor));
        }
    } else {
        float n[CKC_TILE];
        float t[CKC_TILE];
        ckc_tile_unpack<KIND>(noise, n);
        if (s.reciprocal) {
            CKC_UNROLL
            for (int i = 0; i < CKC_TILE; i++) {
                t[i] = v[i] * s.inv;
            }
        } else {
            CKC_UNROLL
            for (int i = 0; i < CKC_TILE; i++) {
                t[i] = v[i] / s.divisor;
            }
        }
        CKC_UNROLL
        for (int q = 0; q < CKC_TILE / 4; q++) {
            w[q] = ckc_low_bytes4(ckc_tile_code_noise<KIND>(t[4 * q], n[4 * q]),
                                   ckc_tile_code_noise<KIND>(t[4 * q + 1], n[4 * q + 1]),
                                   ckc_tile_code_noise<KIND>(t[4 * q + 2], n[4 * q + 2]),
                                   ckc_tile_code_noise<KIND>(t[4 * q + 3], n[4 * q + 3]));
        }
    }
    if (live) {
        ckc_bytes16 *d = (ckc_bytes16 *)(out + col);
        d[0] = ckc_bytes16{{w[0], w[1], w[2], w[3]}};
        d[1] = ckc_bytes16{{w[4], w[5], w[6], w[7]}};
    }
}

/* Loads a thread's raw words for columns col .. col + 31 of row `row`: x, the up
 * half for swiglu, the noise.  Both inside the tensor (ckc_tile_load). */
template <ckc_float_kind KIND, int MODE, int ACT>
__device__ __forceinline__ void
ckc_tile_load_row(const ckc_tile_rows_args &a, int64_t row, int64_t col, uint32_t zero, ckc_tile_raw<KIND> &raw,
                  ckc_tile_raw<KIND> &up, ckc_tile_raw<KIND> &noise)
{
    const int64_t esize = ckc_kind_size(KIND);
    const char *x = (const char *)a.x + row * a.x_stride * esize;
    ckc_tile_load<KIND>(x, col, raw);
    if (ACT == CKC_ACT_SWIGLU) {
        ckc_tile_load<KIND>(x + a.cols * esize, col, up);
    }
    if (MODE == CKC_TILE_CODES_NOISE) {
        /* the noise is used last: tie it to x so that its loads are issued with x's */
        ckc_tile_load<KIND>((const char *)a.noise + row * a.cols * esize, col, noise);
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
    if (g.segments == 1) {
        const int64_t col = (int64_t)j * CKC_TILE;
        ckc_tile_load_row<KIND, MODE, ACT>(a, row, col, g.zero, raw, up, noise);
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
            ckc_tile_store_codes<KIND, MODE>((int8_t *)a.out + row * a.out_stride, col, live_row, v, noise, s);
        }
    } else {
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
            ckc_tile_load_row<KIND, CKC_TILE_CODES, ACT>(a, row, live ? col : 0, g.zero, raw, up, noise);
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
                ckc_tile_load_row<KIND, MODE, ACT>(a, row, live ? col : 0, g.zero, raw, up, noise);
                ckc_tile_transform<KIND, G, ACT, true>(raw, up, j, v);
                ckc_tile_store_codes<KIND, MODE>((int8_t *)a.out + row * a.out_stride, col, live, v, noise, sc);
            } while (++s < g.segments);
        }
    }
    ckc_done_mark_arrive(done);
}

#define CKC_TILE_ROWS_INSTANCE(k, g, mode, act)                                                                 \
    CKC_KERNEL_INSTANCE(CKC_KNAME4(ckc_tile_rows_kernel, k, g, mode, act),                                       \
                        __launch_bounds__(CKC_TILE_THREADS(mode, act)),                                          \
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
