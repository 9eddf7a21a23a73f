/* SPDX-License-Identifier: Apache-2.0 */
/* CPU kernel of gemv_awq_w4a16: the small-batch GEMM of the 4-bit AWQ weight,
 * decoded group by group inside the dot products (no dequantized copy of the
 * weight).  Each group of an output row has 16 possible weight values, made
 * once per group by math/awq.h (eager's bits), then looked up per column.
 * The thread pool takes blocks of outputs n; each output's rows of x go in
 * tiles of AWQ_ROWS (all of a small batch: each 16 columns of the weight are
 * decoded once per tile), each row with AWQ_LANES float32 partial sums (column
 * k of a 16-column block into lane k mod 16, so the lane loops vectorize
 * without reassociation), summed in a fixed order at the end.
 *
 * The bound (docs/parity.md): every product x[k] W[n, k] is exact in float32
 * for 16-bit compute types (8 + 8 or 11 + 11 significant bits), rounded once
 * for float32; a float32 sum of K terms in any order is within gamma_K S of the
 * exact sum, S = sum_k |x[k] W[n, k]|, gamma_K = K u / (1 - K u), u = 2^-24.
 * Eager's GEMM accumulates in float32 too, in its own order: the two sums are
 * within 2 gamma_K S, and after the one rounding to the compute type (unit
 * roundoff u_c: 2^-8 bfloat16, 2^-11 float16, 2^-24 float32) the outputs are
 * within 2 gamma_K S + 2 u_c (1 + gamma_K) S (+ the type's smallest subnormal
 * step for results near zero, + what eager's BLAS drops when it flushes float32
 * subnormals to zero: products with a subnormal factor, (K + 1) 2^-126); a bias adds u_out' |y + bias| per side, u_out' =
 * u_out + u (1 + u_out) (the add rounds to float32, then to the output type).
 * tests/test_awq_parity.py checks every output against eager with this bound.
 * Compiled once per instruction set, inside kernels_isa.h. */
#include "math/awq.h"

#define AWQ_LANES 16
#define AWQ_ROWS 32

typedef struct {
    const ckc_gemv_awq_w4a16_params *p;
} awq_job;

/* The 16 weight values of group g of output n. */
static void
awq_group_values(const ckc_gemv_awq_w4a16_params *p, int64_t g, int64_t n, float lut[16])
{
    const float s = ckc_kind_value(p->wscales, p->kind, g * p->n + n);
    const float z = ckc_kind_value(p->wzeros, p->kind, g * p->n + n);
    for (unsigned q = 0; q < 16; q++) {
        lut[q] = ckc_awq_weight(q, s, z, p->kind);
    }
}

/* The weights of columns [k0, k0 + len) of a packed row, len <= AWQ_LANES: the codes first
 * (as int32, so that the lookups below can be one vector gather), then their values. */
static inline void
awq_decode(const uint8_t *row, int64_t k0, int64_t len, const float lut[16], float w[AWQ_LANES])
{
    int32_t c[AWQ_LANES];
    if (len == AWQ_LANES && (k0 & 1) == 0) {
        const uint8_t *b = row + (k0 >> 1);
        for (int j = 0; j < AWQ_LANES; j++) {
            c[j] = (b[j >> 1] >> ((j & 1) * 4)) & 15;
        }
        for (int j = 0; j < AWQ_LANES; j++) {
            w[j] = lut[c[j]];
        }
        return;
    }
    for (int64_t j = 0; j < len; j++) {
        w[j] = lut[ckc_awq_nibble(row, k0 + j)];
    }
}

/* Lane sums of rows [r0, r0 + rows) of x against the columns of group g, each block of 16
 * columns decoded once for all the rows. */
static inline void
awq_group_dot(const ckc_gemv_awq_w4a16_params *p, const uint8_t *row, int64_t g, const float lut[16], int64_t r0,
              int rows, float acc[AWQ_ROWS][AWQ_LANES])
{
    const int64_t end = (g + 1) * p->group;
    float w[AWQ_LANES];
    for (int64_t k0 = g * p->group; k0 < end; k0 += AWQ_LANES) {
        const int64_t len = end - k0 < AWQ_LANES ? end - k0 : AWQ_LANES;
        awq_decode(row, k0, len, lut, w);
        for (int r = 0; r < rows; r++) {
            const float *x = p->x + (r0 + r) * p->k + k0;
            if (len == AWQ_LANES) {
                for (int j = 0; j < AWQ_LANES; j++) {
                    acc[r][j] += x[j] * w[j];
                }
            } else {
                for (int64_t j = 0; j < len; j++) {
                    acc[r][j] += x[j] * w[j];
                }
            }
        }
    }
}

/* The lanes' sum in a fixed order (a tree of halves). */
static inline float
awq_lane_sum(float lanes[AWQ_LANES])
{
    for (int width = AWQ_LANES / 2; width > 0; width /= 2) {
        for (int j = 0; j < width; j++) {
            lanes[j] += lanes[j + width];
        }
    }
    return lanes[0];
}

static void
awq_store(const ckc_gemv_awq_w4a16_params *p, int64_t r, int64_t n, float acc)
{
    const int has_bias = p->bias != NULL;
    const float b = has_bias ? ckc_kind_value(p->bias, p->bias_kind, n) : 0.0f;
    const float y = ckc_awq_output(acc, has_bias, b, p->kind, p->out_kind);
    const int64_t i = r * p->n + n;
    if (p->out_kind == CKC_F32) {
        ((float *)p->out)[i] = y;
    } else {
        ((uint16_t *)p->out)[i] = p->out_kind == CKC_BF16 ? ckc_f32_to_bf16(y) : ckc_f32_to_f16(y);
    }
}

/* Outputs [n0, n1): every row of x, AWQ_ROWS at a time. */
static void
awq_range(void *ctx, int64_t n0, int64_t n1, int worker)
{
    const ckc_gemv_awq_w4a16_params *p = ((const awq_job *)ctx)->p;
    const int64_t groups = p->k / p->group;
    (void)worker;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = p->qweight + n * (p->k / 2);
        for (int64_t r0 = 0; r0 < p->m; r0 += AWQ_ROWS) {
            const int rows = p->m - r0 < AWQ_ROWS ? (int)(p->m - r0) : AWQ_ROWS;
            float acc[AWQ_ROWS][AWQ_LANES];
            float lut[16];
            memset(acc, 0, sizeof acc[0] * (size_t)rows);
            for (int64_t g = 0; g < groups; g++) {
                awq_group_values(p, g, n, lut);
                awq_group_dot(p, row, g, lut, r0, rows, acc);
            }
            for (int r = 0; r < rows; r++) {
                awq_store(p, r0 + r, n, awq_lane_sum(acc[r]));
            }
        }
    }
}

static ckc_status
cpu_awq_gemv(const ckc_gemv_awq_w4a16_params *p, int nthreads, ckc_error *err)
{
    awq_job job;
    const int64_t grain = ckc_row_grain(p->k * p->m);
    (void)err;
    job.p = p;
    ckc_parallel_for(p->n, grain, ckc_parallel_threads(p->n, grain, nthreads), awq_range, &job);
    return CKC_OK;
}
