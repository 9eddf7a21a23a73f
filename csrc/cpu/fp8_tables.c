/* SPDX-License-Identifier: Apache-2.0 */
/* stochastic_rounding_fp8 tabulated over its float16 inputs.  Eager's op is a
 * function of x.half() and the noise byte r; r enters once, as the noisy
 * mantissa m(r) = round16(m0 + r/256) (math/fp8.h), and the code depends on
 * m(r) only through floor(m(r)).  m(r) is non-decreasing in r (a sum, then a
 * monotone rounding), so floor(m(r)) steps up at most where r crosses fixed
 * thresholds; m0 < 9 and m0 + 255/256 stays below floor(m0) + 2 by more than
 * half of float16's spacing there (at most 1/128), so it steps at most once, and
 * the table keeps the two codes and the first r of the upper one.  The build
 * checks that per entry: one where it does not hold (x infinite: m0 is
 * infinite) says so, and the kernel computes that code directly.  Every
 * code in the table comes from math/fp8.h's functions themselves (ckc_fp8_sr_code
 * at the noise bytes 0 and 255), so the table's bits are that math's, which is
 * eager's bit for bit; the per-element libm log2f and nine float16 roundings
 * become one load (the op ran at 0.15x eager on the CPU).  256 KiB per format,
 * in static storage (the kernels do not allocate). */
#include <math.h>

#include "fp8_tables.h"
#include "math/fp8.h"
#include "platform/threads.h"

#define SR_SIZE 65536

static uint32_t tables[2][SR_SIZE];
static ckc_atomic_counter ready[2];
static ckc_mutex build_lock = CKC_MUTEX_INIT;

/* The first noise byte whose floor(m(r)) is k_hi (k_hi = floor(m(255))). */
static uint32_t
first_upper(float m0, float k_hi)
{
    uint32_t lo = 0;
    uint32_t hi = 255;
    while (lo < hi) {
        const uint32_t mid = (lo + hi) / 2;
        if (floorf(ckc_fp8_sr_noisy(m0, (uint8_t)mid)) == k_hi) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return lo;
}

static uint32_t
entry(uint16_t h, int e5m2)
{
    const float x = ckc_f16_to_f32(h);
    float e;
    const float m0 = ckc_fp8_sr_mantissa(x, e5m2, &e);
    const float m_lo = ckc_fp8_sr_noisy(m0, 0);
    const float m_hi = ckc_fp8_sr_noisy(m0, 255);
    const float steps = floorf(m_hi) - floorf(m_lo);
    uint32_t lo;
    uint32_t hi;
    if (x != x) {
        return 0x7Fu | 0x7Fu << 8 | 256u << 16;
    }
    if (!(steps <= 1.0f)) { /* also NaN: x infinite */
        return CKC_FP8_SR_DIRECT;
    }
    lo = ckc_fp8_sr_code(x, e, m_lo, e5m2);
    hi = ckc_fp8_sr_code(x, e, m_hi, e5m2);
    if (steps == 0.0f) {
        return lo | lo << 8 | 256u << 16;
    }
    return lo | hi << 8 | first_upper(m0, floorf(m_hi)) << 16;
}

const uint32_t *
ckc_fp8_sr_table(int e5m2)
{
    const int slot = e5m2 != 0;
    if (ckc_atomic_load(&ready[slot]) == 0) {
        ckc_mutex_lock(&build_lock);
        if (ckc_atomic_load(&ready[slot]) == 0) {
            for (uint32_t h = 0; h < SR_SIZE; h++) {
                tables[slot][h] = entry((uint16_t)h, slot);
            }
            ckc_atomic_store(&ready[slot], 1);
        }
        ckc_mutex_unlock(&build_lock);
    }
    return tables[slot];
}
