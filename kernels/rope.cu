/* SPDX-License-Identifier: Apache-2.0 */
/* GPU kernels of RoPE (launcher: csrc/gpu/launch_rope.c): one pass over x, each
 * thread one unit of a row.  Vector units (VEC): 16 bytes of x (8 bfloat16 or
 * float16 values, 4 float32), with the split-half layout also the 16 bytes half a
 * row further; the unit's frequencies by 16-byte loads, all issued before any
 * arithmetic.  Scalar units (rows whose length or alignment do not allow
 * those): one pair.  A thread reads every input of its unit before it writes its
 * outputs, which are the same positions, so out may be x (the in-place ops).
 * The arithmetic is math/rope.h's, as eager rounds it. */
#include "done_mark.cuh"
#include "elements.cuh"
#include "gpu/kernel_args.h"
#include "gpu/kernel_list.h"
#include "math/rms_rope.h"
#include "rms_warp.cuh"
#include "row_tile.cuh"

/* Values of x per vector unit: 16 bytes of the type. */
template <ckc_float_kind KIND>
__device__ __forceinline__ constexpr int
rope_vec_elems()
{
    return KIND == CKC_F32 ? 4 : 8;
}

/* 16 bytes of elements as float32. */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
rope_load16(const void *src, float *v)
{
    const ckc_bytes16 b = *(const ckc_bytes16 *)src;
    CKC_UNROLL
    for (int i = 0; i < 4; i++) {
        if constexpr (KIND == CKC_F32) {
            v[i] = ckc_f32_from_bits(b.w[i]);
        } else {
            v[2 * i] = ckc_half_value(KIND, (uint16_t)(b.w[i] & 0xFFFFu));
            v[2 * i + 1] = ckc_half_value(KIND, (uint16_t)(b.w[i] >> 16));
        }
    }
}

/* The same 16 bytes written back, rounded to the type (type_as). */
template <ckc_float_kind KIND>
__device__ __forceinline__ void
rope_store16(void *dst, const float *v)
{
    ckc_bytes16 b;
    CKC_UNROLL
    for (int i = 0; i < 4; i++) {
        if constexpr (KIND == CKC_F32) {
            b.w[i] = ckc_f32_bits(v[i]);
        } else {
            b.w[i] = (uint32_t)ckc_half_bits(KIND, v[2 * i]) | (uint32_t)ckc_half_bits(KIND, v[2 * i + 1]) << 16;
        }
    }
    *(ckc_bytes16 *)dst = b;
}

/* N float32 frequencies (N a multiple of 4), 16 bytes at a time. */
template <int N>
__device__ __forceinline__ void
rope_load_freqs(const float *src, float *f)
{
    CKC_UNROLL
    for (int q = 0; q < N / 4; q++) {
        const ckc_bytes16 b = ((const ckc_bytes16 *)src)[q];
        CKC_UNROLL
        for (int i = 0; i < 4; i++) {
            f[4 * q + i] = ckc_f32_from_bits(b.w[i]);
        }
    }
}

/* Vector unit u of row r: E values at u * E (interleaved), or E values at u * E
 * and E at half + u * E (split half). */
template <ckc_float_kind KIND, int SPLIT>
__device__ __forceinline__ void
rope_vec_unit(const ckc_apply_rope1_params &p, int64_t r, int64_t u)
{
    constexpr int E = rope_vec_elems<KIND>();
    const int64_t es = KIND == CKC_F32 ? 4 : 2;
    const char *x = (const char *)p.x + r * p.dim * es;
    char *out = (char *)p.out + r * p.dim * es;
    const float *f = ckc_rope_freq_row(&p, r);
    if (SPLIT) {
        const int64_t half = p.dim / 2;
        float lo[E], hi[E], fr[4 * E], olo[E], ohi[E];
        rope_load16<KIND>(x + u * E * es, lo);
        rope_load16<KIND>(x + (half + u * E) * es, hi);
        rope_load_freqs<4 * E>(f + 4 * u * E, fr);
        CKC_UNROLL
        for (int k = 0; k < E; k++) {
            olo[k] = ckc_rope_pair(fr[4 * k], fr[4 * k + 1], lo[k], hi[k]);
            ohi[k] = ckc_rope_pair(fr[4 * k + 3], fr[4 * k + 2], hi[k], lo[k]);
        }
        rope_store16<KIND>(out + u * E * es, olo);
        rope_store16<KIND>(out + (half + u * E) * es, ohi);
    } else {
        float v[E], fr[2 * E], o[E];
        rope_load16<KIND>(x + u * E * es, v);
        rope_load_freqs<2 * E>(f + 2 * u * E, fr);
        CKC_UNROLL
        for (int m = 0; m < E; m++) {
            o[m] = ckc_rope_pair(fr[2 * m], fr[2 * m + 1], v[m & ~1], v[m | 1]);
        }
        rope_store16<KIND>(out + u * E * es, o);
    }
}

/* Scalar unit k of row r: one pair. */
template <ckc_float_kind KIND, int SPLIT>
__device__ __forceinline__ void
rope_pair_unit(const ckc_apply_rope1_params &p, int64_t r, int64_t k)
{
    const int64_t base = r * p.dim;
    const int64_t ia = base + (SPLIT ? k : 2 * k);
    const int64_t ib = base + (SPLIT ? p.dim / 2 + k : 2 * k + 1);
    const float *f = ckc_rope_freq_row(&p, r) + 4 * k;
    const float a = ckc_load_value<KIND>(p.x, ia);
    const float b = ckc_load_value<KIND>(p.x, ib);
    const float oa = ckc_rope_pair(f[0], f[1], a, b);
    const float ob = SPLIT ? ckc_rope_pair(f[3], f[2], b, a) : ckc_rope_pair(f[2], f[3], a, b);
    ckc_store_value(p.out, KIND, ia, oa);
    ckc_store_value(p.out, KIND, ib, ob);
}

template <ckc_float_kind KIND, int SPLIT, int VEC>
__device__ __forceinline__ void
rope_body(ckc_apply_rope1_params p, int64_t units, ckc_done_mark done)
{
    const int64_t t = (int64_t)blockIdx.x * CKC_ROW_THREADS + threadIdx.x;
    /* Threads past the last unit store nothing, but reach the mark with their block. */
    if (t < p.rows * units) {
        if (VEC) {
            rope_vec_unit<KIND, SPLIT>(p, t / units, t % units);
        } else {
            rope_pair_unit<KIND, SPLIT>(p, t / units, t % units);
        }
    }
    ckc_done_mark_arrive(done);
}

#define CKC_ROPE_INSTANCES(k, s, v)                                                                             \
    CKC_KERNEL_INSTANCE(CKC_KNAME3(rope_kernel, k, s, v), __launch_bounds__(CKC_ROW_THREADS),                     \
                        (ckc_apply_rope1_params p, int64_t units, ckc_done_mark done),                            \
                        (rope_body<(ckc_float_kind)k, s, v>(p, units, done)))
CKC_ROPE_KERNELS(CKC_ROPE_INSTANCES)

/* ---- rms_rope (launcher: csrc/gpu/launch_rope.c) ----
 * One warp per row: the row's factor r (rms_warp.cuh: aten's cascade); then
 * each lane normalizes and rotates pairs lane, lane + 32, ... of the prefix and
 * normalizes the rest (math/rms_rope.h).  Every read of the row's sum is done
 * before ckc_warp_rms_factor returns and every write after it, and each output
 * position is written by the one lane that read it there, so out may be x. */
template <ckc_float_kind KIND, int SPLIT>
__device__ __forceinline__ void
rms_rope_row(const ckc_rms_rope1_params &p, int64_t r, int lane, float *streams, float *factor)
{
    const int64_t n = p.row_len;
    const char *row = (const char *)p.rope.x + r * n * ckc_kind_size(KIND);
    const int64_t half = p.rope.dim / 2;
    const float *f = ckc_rope_freq_row(&p.rope, r);
    const float rf = ckc_warp_rms_factor<KIND>(row, n, p.eps, lane, streams, factor);
    char *out = (char *)p.rope.out + r * n * ckc_kind_size(KIND);
    for (int64_t k = lane; k < half; k += 32) {
        const int64_t ia = SPLIT ? k : 2 * k;
        const int64_t ib = SPLIT ? half + k : 2 * k + 1;
        const float *fk = f + 4 * k;
        const float a = ckc_rms_norm_value(ckc_load_value<KIND>(row, ia), rf, ckc_kind_value(p.scale, p.scale_kind, ia),
                                           KIND);
        const float b = ckc_rms_norm_value(ckc_load_value<KIND>(row, ib), rf, ckc_kind_value(p.scale, p.scale_kind, ib),
                                           KIND);
        ckc_store_value(out, KIND, ia, ckc_rope_pair(fk[0], fk[1], a, b));
        ckc_store_value(out, KIND, ib, SPLIT ? ckc_rope_pair(fk[3], fk[2], b, a) : ckc_rope_pair(fk[2], fk[3], a, b));
    }
    for (int64_t i = 2 * half + lane; i < n; i += 32) {
        ckc_store_value(out, KIND, i,
                        ckc_rms_norm_value(ckc_load_value<KIND>(row, i), rf, ckc_kind_value(p.scale, p.scale_kind, i),
                                           KIND));
    }
}

template <ckc_float_kind KIND, int SPLIT>
__device__ __forceinline__ void
rms_rope_body(ckc_rms_rope1_params p, ckc_done_mark done)
{
    __shared__ float streams[CKC_RMS_ROPE_WARPS][CKC_RMS_STREAMS];
    __shared__ float factor[CKC_RMS_ROPE_WARPS];
    const int warp = (int)threadIdx.x / 32;
    const int64_t r = (int64_t)blockIdx.x * CKC_RMS_ROPE_WARPS + warp;
    /* Warp-uniform: a warp past the last row skips its row whole, and all reach the mark. */
    if (r < p.rope.rows) {
        rms_rope_row<KIND, SPLIT>(p, r, (int)threadIdx.x % 32, streams[warp], &factor[warp]);
    }
    ckc_done_mark_arrive(done);
}

#define CKC_RMS_ROPE_INSTANCES(k, s)                                                                            \
    CKC_KERNEL_INSTANCE(CKC_KNAME2(rms_rope_kernel, k, s), __launch_bounds__(CKC_RMS_ROPE_WARPS * 32),          \
                        (ckc_rms_rope1_params p, ckc_done_mark done), (rms_rope_body<(ckc_float_kind)k, s>(p, done)))
CKC_RMS_ROPE_KERNELS(CKC_RMS_ROPE_INSTANCES)
