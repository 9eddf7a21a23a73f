/* SPDX-License-Identifier: Apache-2.0 */
/* rms_norm's row factor of a row already loaded into float32, in aten's
 * order (math/rms.h), for the CPU kernels that normalize rows: rms_rope,
 * rms_gated_residual and int8_linear's rms_norm activation.  Included by
 * kernels_isa.h into each instruction set's build before its users.
 *
 * math/rms.h sums the 32 streams one after another (ckc_rms_stream_sum), a
 * scalar loop with a stride of 32.  Every stream of a row has the same length,
 * so the same cascade (the same flushes at the same steps) runs in all of them;
 * here they run side by side, each level an array of 32 floats, and every loop
 * over the streams vectorizes.  Each stream still adds its own terms in its own
 * order, so the sum is the same bits. */
#include "math/rms.h"

/* acc[s] += t[s]^2 for the streams' next `count` terms (t: the first term's block). */
static void
rms_stream_squares(float *acc, const float *t, int64_t count)
{
    for (int64_t i = 0; i < count; i++, t += CKC_RMS_STREAMS) {
        for (int s = 0; s < CKC_RMS_STREAMS; s++) {
            acc[s] += t[s] * t[s];
        }
    }
}

/* to[s] += from[s]; from[s] = 0: one level's flush into the next. */
static void
rms_stream_flush(float *to, float *from)
{
    for (int s = 0; s < CKC_RMS_STREAMS; s++) {
        to[s] += from[s];
        from[s] = 0.0f;
    }
}

/* r of a loaded float32 row of k values (ckc_rms_row_factor's result). */
static float
cpu_rms_factor(const float *v, int64_t k, float eps)
{
    const int64_t size = k / CKC_RMS_STREAMS; /* terms per stream */
    const int level_power = ckc_rms_level_power(size);
    const int64_t step = (int64_t)1 << level_power;
    float acc[CKC_RMS_LEVELS][CKC_RMS_STREAMS];
    int64_t i = 0;
    if (k < CKC_RMS_LANES) {
        return ckc_rms_row_factor(v, CKC_F32, k, eps); /* one lane: one scalar stream */
    }
    memset(acc, 0, sizeof acc);
    while (i + step <= size) {
        rms_stream_squares(acc[0], v + i * CKC_RMS_STREAMS, step);
        i += step;
        const int top = ckc_rms_flush_top(i, level_power);
        for (int level = 1; level <= top; level++) {
            rms_stream_flush(acc[level], acc[level - 1]);
        }
    }
    rms_stream_squares(acc[0], v + i * CKC_RMS_STREAMS, size - i);
    for (int level = 1; level < CKC_RMS_LEVELS; level++) {
        for (int s = 0; s < CKC_RMS_STREAMS; s++) {
            acc[0][s] += acc[level][s];
        }
    }
    return ckc_rms_factor(ckc_rms_combine(v, CKC_F32, k, acc[0]), k, eps);
}
