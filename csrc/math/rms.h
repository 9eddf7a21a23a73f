/* SPDX-License-Identifier: Apache-2.0 */
/* rms_norm's row factor r = 1 / sqrt(mean(x^2) + eps), bit for bit as aten's
 * CPU rms_norm (the reference of eager's `input_act="rms_norm"` and of
 * int8_linear_rms_modulated) computes it, written once for the C and CUDA
 * kernels.
 *
 * aten computes mean(x^2) as sum(x^2) / K (float32 squares of the values
 * upcast to float32, `x.pow(2).mean(-1)` = `sum().div_(K)`), adds eps as a
 * float32, and takes rsqrt as 1 / sqrt, each step rounded.  Its sum is the
 * cascade sum of aten/native/cpu/SumKernel.cpp, whose order we follow:
 *   - rows of at least CKC_RMS_LANES values are summed as vectors of
 *     CKC_RMS_LANES float lanes (aten's Vectorized<float> of the sum kernel:
 *     8 lanes on x86 with AVX2 or AVX-512 and on ARM; tests/test_int8_fused.py
 *     checks that torch's sum still follows this order), four vector
 *     accumulators side by side (ilp 4), each a four-level cascade whose level
 *     is flushed every 2^level_power steps; then the vectors left over go into
 *     the first accumulator, the accumulators are added 0 + 1, + 2, + 3, and the
 *     result is 0 + (the scalars past the last whole vector, in order) + (the
 *     lanes, in order);
 *   - shorter rows take the same cascade with one lane.
 * So one accumulator "stream" (k, lane) sums the terms
 *     x[(i * 4 + k) * lanes + lane]^2, i = 0 .. K / lanes / 4 - 1
 * in a cascade of its own, and the streams meet only at the end: the GPU
 * kernel runs them on one warp's lanes, the CPU one after another. */
#ifndef CKC_RMS_H
#define CKC_RMS_H

#include "float_bits.h"

#if !defined(__CUDACC__)
#include <math.h>
#endif

#define CKC_RMS_LANES 8
#define CKC_RMS_ILP 4
#define CKC_RMS_LEVELS 4
#define CKC_RMS_STREAMS (CKC_RMS_LANES * CKC_RMS_ILP)

/* Lanes of the row's vectors: CKC_RMS_LANES, or 1 for rows shorter than that. */
CKC_HD int64_t
ckc_rms_lanes(int64_t k)
{
    return k >= CKC_RMS_LANES ? CKC_RMS_LANES : 1;
}

/* The square of element i of a row of `kind`, as aten's pow(x.float(), 2). */
CKC_HD float
ckc_rms_square(const void *row, ckc_float_kind kind, int64_t i)
{
    const float v = ckc_kind_value(row, kind, i);
    return v * v;
}

/* aten's level power: max(4, CeilLog2(size) / 4) with CeilLog2(x <= 2) = 1. */
CKC_HD int
ckc_rms_level_power(int64_t size)
{
    int ceil_log2 = 1;
    if (size > 2) {
        uint64_t v = (uint64_t)size - 1;
        ceil_log2 = 0;
        while (v != 0) {
            v >>= 1;
            ceil_log2++;
        }
    }
    return ceil_log2 / CKC_RMS_LEVELS > 4 ? ceil_log2 / CKC_RMS_LEVELS : 4;
}

/* The top level of aten's flush after step i of a stream's cascade (i a
 * multiple of 2^level_power): level 0 always flushes into level 1, and level l
 * into l + 1 while i is a multiple of 2^((l + 1) * level_power), up to the last
 * level.  Written once for the scalar cascade below and the CPU's side-by-side
 * one (csrc/cpu/rms_impl.h). */
CKC_HD int
ckc_rms_flush_top(int64_t i, int level_power)
{
    const int64_t mask = ((int64_t)1 << level_power) - 1;
    int top = 1;
    while (top + 1 < CKC_RMS_LEVELS && (i & (mask << (top * level_power))) == 0) {
        top++;
    }
    return top;
}

/* The cascade of one stream: terms x[(i * 4 + k) * lanes + lane]^2 for
 * i < size, where size = k_total / lanes / 4 (aten's multi_row_sum). */
CKC_HD float
ckc_rms_stream_sum(const void *row, ckc_float_kind kind, int64_t lanes, int64_t size, int64_t stream)
{
    const int level_power = ckc_rms_level_power(size);
    const int64_t step = (int64_t)1 << level_power;
    const int64_t first = stream; /* (i * 4 + k) * lanes + lane = i * stride + stream */
    const int64_t stride = CKC_RMS_ILP * lanes;
    float acc[CKC_RMS_LEVELS] = {0.0f, 0.0f, 0.0f, 0.0f};
    int64_t i = 0;
    while (i + step <= size) {
        for (int64_t j = 0; j < step; j++, i++) {
            acc[0] += ckc_rms_square(row, kind, first + i * stride);
        }
        const int top = ckc_rms_flush_top(i, level_power);
        for (int level = 1; level <= top; level++) {
            acc[level] += acc[level - 1];
            acc[level - 1] = 0.0f;
        }
    }
    for (; i < size; i++) {
        acc[0] += ckc_rms_square(row, kind, first + i * stride);
    }
    for (int level = 1; level < CKC_RMS_LEVELS; level++) {
        acc[0] += acc[level];
    }
    return acc[0];
}

/* The sum of the row's squares from its streams' sums (stream s = k * lanes +
 * lane, CKC_RMS_ILP * lanes of them; the first `lanes` are overwritten): the
 * ending of aten's row_sum and vectorized_inner_sum. */
CKC_HD float
ckc_rms_combine(const void *row, ckc_float_kind kind, int64_t k_total, float *streams)
{
    const int64_t lanes = ckc_rms_lanes(k_total);
    const int64_t vectors = k_total / lanes;
    const int64_t whole = vectors / CKC_RMS_ILP * CKC_RMS_ILP;
    float total = 0.0f;
    for (int64_t lane = 0; lane < lanes; lane++) {
        float acc = streams[lane];
        for (int64_t v = whole; v < vectors; v++) {
            acc += ckc_rms_square(row, kind, v * lanes + lane);
        }
        for (int64_t k = 1; k < CKC_RMS_ILP; k++) {
            acc += streams[k * lanes + lane];
        }
        if (lanes == 1) {
            return acc; /* aten's scalar row_sum: the accumulators are the sum */
        }
        streams[lane] = acc; /* the lanes are added after the scalar tail */
    }
    for (int64_t i = vectors * lanes; i < k_total; i++) {
        total += ckc_rms_square(row, kind, i);
    }
    for (int64_t lane = 0; lane < lanes; lane++) {
        total += streams[lane];
    }
    return total;
}

/* r = 1 / sqrt(sum / k + eps), each step rounded to float32 as aten's
 * `rsqrt(mean.add_(eps))` (aten's rsqrt divides 1 by a correctly rounded sqrt). */
CKC_HD float
ckc_rms_factor(float sum, int64_t k, float eps)
{
    return 1.0f / sqrtf(sum / (float)k + eps);
}

/* r of a whole row, its streams one after another (the CPU's way). */
CKC_HD float
ckc_rms_row_factor(const void *row, ckc_float_kind kind, int64_t k, float eps)
{
    const int64_t lanes = ckc_rms_lanes(k);
    const int64_t size = k / lanes / CKC_RMS_ILP;
    float streams[CKC_RMS_STREAMS];
    for (int64_t s = 0; s < CKC_RMS_ILP * lanes; s++) {
        streams[s] = ckc_rms_stream_sum(row, kind, lanes, size, s);
    }
    return ckc_rms_factor(ckc_rms_combine(row, kind, k, streams), k, eps);
}

#endif /* CKC_RMS_H */
