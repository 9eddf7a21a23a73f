/* SPDX-License-Identifier: Apache-2.0 */
/* aten's float32 sum over the last dimension of a contiguous tensor (its CPU
 * cascade_sum, `t.sum(-1)`), for a row of `count` terms given by a function:
 * the order of math/rms.h (8 lanes, four accumulators, a four-level cascade per
 * stream, then the lanes), written for any term so that a reduction eager makes
 * over a materialized float32 tensor (`(a * b).sum(-1)`) can be summed here in
 * the same order without the tensor.  The terms are recomputed where they are
 * needed, each the same float32 value eager's tensor holds.
 *
 * CKC_ATEN_SUM(name, term) defines `float name(const void *ctx, int64_t count)`
 * summing term(ctx, i): a function per term, so that each term is a direct call
 * the compilers inline, in the CUDA kernels too, rather than a call through a
 * pointer left for them to resolve.  Used by the W4A8 quantizer (math/w4a8_quant.h) for its
 * group sums; rms.h keeps its own copy of the order for the square sums of its
 * hot loops, whose CPU form runs the 32 streams side by side
 * (csrc/cpu/rms_impl.h). */
#ifndef CKC_MATH_ATEN_SUM_H
#define CKC_MATH_ATEN_SUM_H

#include "rms.h"

/* One stream's cascade: terms (j * 4 + s / lanes) * lanes + s % lanes, j < size,
 * in four levels (registers), level l flushed into l + 1 as ckc_rms_flush_top says. */
#define CKC_ATEN_STREAM_SUM(term)                                                        \
    {                                                                                    \
        const int64_t step = (int64_t)1 << level_power;                                  \
        const int64_t stride = CKC_RMS_ILP * lanes;                                      \
        float acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;                        \
        int64_t i = 0;                                                                   \
        while (i + step <= size) {                                                       \
            for (int64_t j = 0; j < step; j++, i++) {                                    \
                acc0 += term(ctx, stream + i * stride);                                  \
            }                                                                            \
            const int top = ckc_rms_flush_top(i, level_power);                           \
            acc1 += acc0;                                                                \
            acc0 = 0.0f;                                                                 \
            if (top >= 2) {                                                              \
                acc2 += acc1;                                                            \
                acc1 = 0.0f;                                                             \
            }                                                                            \
            if (top >= 3) {                                                              \
                acc3 += acc2;                                                            \
                acc2 = 0.0f;                                                             \
            }                                                                            \
        }                                                                                \
        for (; i < size; i++) {                                                          \
            acc0 += term(ctx, stream + i * stride);                                      \
        }                                                                                \
        return ((acc0 + acc1) + acc2) + acc3;                                            \
    }

/* The sum of terms 0 .. count - 1 in aten's order (ckc_rms_combine's ending:
 * per lane its four streams and the vectors past the last whole four; the
 * total is 0 + the scalars past the last whole vector + the lanes in order, so
 * the scalars are summed first and each lane is added as it is done: no array). */
#define CKC_ATEN_SUM(name, term)                                                                       \
    CKC_HD float name##_stream(const void *ctx, int64_t lanes, int64_t size, int level_power,          \
                               int64_t stream) CKC_ATEN_STREAM_SUM(term)                               \
    CKC_HD float name(const void *ctx, int64_t count)                                                  \
    {                                                                                                  \
        const int64_t lanes = ckc_rms_lanes(count);                                                    \
        const int64_t vectors = count / lanes;                                                         \
        const int64_t size = vectors / CKC_RMS_ILP;                                                    \
        const int64_t whole = size * CKC_RMS_ILP;                                                      \
        const int level_power = ckc_rms_level_power(size);                                             \
        float total = 0.0f;                                                                            \
        for (int64_t i = vectors * lanes; i < count; i++) {                                            \
            total += term(ctx, i);                                                                     \
        }                                                                                              \
        for (int64_t lane = 0; lane < lanes; lane++) {                                                 \
            float acc = size > 0 ? name##_stream(ctx, lanes, size, level_power, lane) : 0.0f;          \
            for (int64_t v = whole; v < vectors; v++) {                                                \
                acc += term(ctx, v * lanes + lane);                                                    \
            }                                                                                          \
            for (int64_t k = 1; k < CKC_RMS_ILP; k++) {                                                \
                acc += size > 0 ? name##_stream(ctx, lanes, size, level_power, k * lanes + lane) : 0.0f; \
            }                                                                                          \
            if (lanes == 1) {                                                                          \
                return acc; /* aten's scalar row_sum: the accumulators are the sum */                  \
            }                                                                                          \
            total += acc;                                                                              \
        }                                                                                              \
        return total;                                                                                  \
    }

#endif /* CKC_MATH_ATEN_SUM_H */
