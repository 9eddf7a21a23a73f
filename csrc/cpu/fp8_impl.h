/* SPDX-License-Identifier: Apache-2.0 */
/* CPU kernels of the per-tensor FP8 family.  Element-wise over the flat order:
 * the thread pool gets blocks of FP8_BLOCK elements as its rows.  The element
 * type and the format are compile-time constants in each loop instance (the
 * switches below), so the quantizer's loops vectorize; the dequantizer looks
 * each code up in the 256 values of this call's scale, computed first with the
 * shared element math (math/fp8.h), so its bits are that math's.
 * Compiled once per instruction set, inside kernels_isa.h. */
#include "fp8_tables.h"
#include "math/fp8.h"

#define FP8_BLOCK 4096

/* Blocks of FP8_BLOCK elements covering n, and block b's [begin, end). */
static int64_t
fp8_blocks(int64_t n)
{
    return (n + FP8_BLOCK - 1) / FP8_BLOCK;
}

/* The elements [*begin, *end) of blocks [b0, b1) of n elements. */
static void
fp8_block_range(int64_t b0, int64_t b1, int64_t n, int64_t *begin, int64_t *end)
{
    *begin = b0 * FP8_BLOCK;
    *end = b1 * FP8_BLOCK < n ? b1 * FP8_BLOCK : n;
}

static void
fp8_parallel(int64_t n, int nthreads, ckc_range_fn fn, void *job)
{
    const int64_t blocks = fp8_blocks(n);
    const int64_t grain = ckc_row_grain(FP8_BLOCK);
    ckc_parallel_for(blocks, grain, ckc_parallel_threads(blocks, grain, nthreads), fn, job);
}

/* ---- quantize_per_tensor_fp8 ---- */

typedef struct {
    const ckc_quantize_per_tensor_fp8_params *p;
    float inv;
} fp8_quant_job;

static inline void
fp8_quant_as(const void *src, uint8_t *q, int64_t n, float inv, ckc_float_kind kind, int e5m2)
{
    int64_t i;
    if (kind == CKC_F32) {
        const float *s = (const float *)src;
        for (i = 0; i < n; i++) {
            q[i] = ckc_fp8_quantize(s[i], inv, CKC_F32, e5m2);
        }
    } else {
        const uint16_t *s = (const uint16_t *)src;
        for (i = 0; i < n; i++) {
            const float x = kind == CKC_BF16 ? ckc_bf16_to_f32(s[i]) : ckc_f16_to_f32(s[i]);
            q[i] = ckc_fp8_quantize(x, inv, kind, e5m2);
        }
    }
}

/* One instance per (type, format): constant arguments let each loop vectorize. */
static void
fp8_quant_span(const void *src, uint8_t *q, int64_t n, float inv, ckc_float_kind kind, int e5m2)
{
    switch (kind * 2 + e5m2) {
    case CKC_BF16 * 2:
        fp8_quant_as(src, q, n, inv, CKC_BF16, 0);
        break;
    case CKC_BF16 * 2 + 1:
        fp8_quant_as(src, q, n, inv, CKC_BF16, 1);
        break;
    case CKC_F16 * 2:
        fp8_quant_as(src, q, n, inv, CKC_F16, 0);
        break;
    case CKC_F16 * 2 + 1:
        fp8_quant_as(src, q, n, inv, CKC_F16, 1);
        break;
    case CKC_F32 * 2 + 1:
        fp8_quant_as(src, q, n, inv, CKC_F32, 1);
        break;
    default:
        fp8_quant_as(src, q, n, inv, CKC_F32, 0);
        break;
    }
}

static void
fp8_quant_range(void *ctx, int64_t b0, int64_t b1, int worker)
{
    const fp8_quant_job *job = (const fp8_quant_job *)ctx;
    const ckc_quantize_per_tensor_fp8_params *p = job->p;
    int64_t begin;
    int64_t end;
    (void)worker;
    fp8_block_range(b0, b1, p->numel, &begin, &end);
    fp8_quant_span((const char *)p->x + begin * ckc_kind_size(p->kind), p->q + begin, end - begin, job->inv,
                   p->kind, p->e5m2);
}

static ckc_status
cpu_fp8_quant(const ckc_quantize_per_tensor_fp8_params *p, int nthreads, ckc_error *err)
{
    fp8_quant_job job;
    (void)err;
    job.p = p;
    job.inv = ckc_fp8_inverse_scale(*p->scale, p->kind);
    fp8_parallel(p->numel, nthreads, fp8_quant_range, &job);
    return CKC_OK;
}

/* ---- dequantize_per_tensor_fp8: a 256-entry table of the output's bits ---- */

typedef struct {
    const ckc_dequantize_per_tensor_fp8_params *p;
    float values[256];
    uint16_t halves[256];
} fp8_dequant_job;

static void
fp8_dequant_range(void *ctx, int64_t b0, int64_t b1, int worker)
{
    const fp8_dequant_job *job = (const fp8_dequant_job *)ctx;
    const ckc_dequantize_per_tensor_fp8_params *p = job->p;
    const uint8_t *x = p->x;
    int64_t begin;
    int64_t end;
    int64_t i;
    (void)worker;
    fp8_block_range(b0, b1, p->numel, &begin, &end);
    if (p->out_kind == CKC_F32) {
        float *out = (float *)p->out;
        for (i = begin; i < end; i++) {
            out[i] = job->values[x[i]];
        }
    } else {
        uint16_t *out = (uint16_t *)p->out;
        for (i = begin; i < end; i++) {
            out[i] = job->halves[x[i]];
        }
    }
}

static ckc_status
cpu_fp8_dequant(const ckc_dequantize_per_tensor_fp8_params *p, int nthreads, ckc_error *err)
{
    fp8_dequant_job job;
    const float scale = ckc_round_to_kind(*p->scale, p->out_kind);
    (void)err;
    job.p = p;
    for (int c = 0; c < 256; c++) {
        const float v = ckc_fp8_dequantize((uint8_t)c, scale, p->out_kind, p->e5m2);
        job.values[c] = v;
        job.halves[c] = p->out_kind == CKC_BF16 ? ckc_f32_to_bf16(v) : ckc_f32_to_f16(v);
    }
    ckc_advise_output_pages(p->out, (size_t)(p->numel * ckc_kind_size(p->out_kind)));
    fp8_parallel(p->numel, nthreads, fp8_dequant_range, &job);
    return CKC_OK;
}

/* ---- stochastic_rounding_fp8: one load of cpu/fp8_tables.c's entry ---- */

typedef struct {
    const ckc_stochastic_rounding_fp8_params *p;
    const uint32_t *table;
} fp8_stochastic_job;

/* The float16 bits of x.half() for element i of the input. */
static inline uint16_t
fp8_half_bits(const void *x, ckc_float_kind kind, int64_t i)
{
    if (kind == CKC_F16) {
        return ((const uint16_t *)x)[i];
    }
    return ckc_f32_to_f16(ckc_kind_value(x, kind, i));
}

/* Element i's code: its table entry's, or computed where the entry says so. */
static inline uint8_t
fp8_stochastic_code(const fp8_stochastic_job *job, int64_t i)
{
    const ckc_stochastic_rounding_fp8_params *p = job->p;
    const uint16_t h = fp8_half_bits(p->x, p->kind, i);
    const uint32_t t = job->table[h];
    const uint8_t r = p->rng[i];
    if (t == CKC_FP8_SR_DIRECT) {
        return ckc_fp8_stochastic(ckc_f16_to_f32(h), r, p->e5m2);
    }
    return (uint8_t)(r >= (t >> 16) ? t >> 8 : t);
}

static void
fp8_stochastic_range(void *ctx, int64_t b0, int64_t b1, int worker)
{
    const fp8_stochastic_job *job = (const fp8_stochastic_job *)ctx;
    int64_t i;
    int64_t end;
    (void)worker;
    fp8_block_range(b0, b1, job->p->numel, &i, &end);
    for (; i < end; i++) {
        job->p->q[i] = fp8_stochastic_code(job, i);
    }
}

static ckc_status
cpu_fp8_stochastic(const ckc_stochastic_rounding_fp8_params *p, int nthreads, ckc_error *err)
{
    fp8_stochastic_job job;
    (void)err;
    job.p = p;
    job.table = ckc_fp8_sr_table(p->e5m2);
    fp8_parallel(p->numel, nthreads, fp8_stochastic_range, &job);
    return CKC_OK;
}
