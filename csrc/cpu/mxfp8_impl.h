/* SPDX-License-Identifier: Apache-2.0 */
/* CPU kernels of the MXFP8 family.  A row is converted to float once (the
 * pad_32x zeros appended), then each block of 32 gets its E8M0 scale (at its
 * swizzled offset) and its codes, in a 32-wide loop with the block's multiplier
 * fixed, which vectorizes.  The scale buffer's padding gets 0 as NVFP4's does
 * (nvfp4_impl.h's nvfp4_zero_scales: the same buffer layout), so no two threads
 * write the same bytes.  The dequantizer decodes a row's codes against their
 * blocks' scales and stores the row in the output type.
 * Compiled once per instruction set, inside kernels_isa.h (after nvfp4_impl.h). */
#include "math/mxfp8.h"

typedef struct {
    const ckc_quantize_mxfp8_params *p;
    ckc_scratch scratch;  /* per thread: one row of out_cols floats */
} mxfp8_quant_job;

/* The codes and scale of the block of 32 values v. */
static uint8_t
mxfp8_quant_block(const float *v, uint8_t *q)
{
    const float absmax = ckc_row_absmax(v, CKC_MXFP8_BLOCK);
    const uint8_t scale = ckc_mxfp8_block_scale(absmax);
    const int zero = absmax == 0.0f;
    const float inverse = ckc_mxfp8_inverse(scale, zero);
    for (int j = 0; j < CKC_MXFP8_BLOCK; j++) {
        q[j] = ckc_mxfp8_code(v[j], inverse, zero);
    }
    return scale;
}

/* Row r of x as floats in v, zeros past x (pad_32x: past its columns, and whole rows past its rows). */
static void
mxfp8_load_row(const ckc_quantize_mxfp8_params *p, int64_t r, float *v)
{
    const int64_t loaded = r < p->rows ? p->cols : 0;
    if (loaded > 0) {
        ckc_row_load((const char *)p->x + r * p->cols * ckc_kind_size(p->kind), p->kind, p->cols, v);
    }
    memset(v + loaded, 0, (size_t)(p->out_cols - loaded) * sizeof *v);
}

static void
mxfp8_quant_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const mxfp8_quant_job *job = (const mxfp8_quant_job *)ctx;
    const ckc_quantize_mxfp8_params *p = job->p;
    const int64_t scale_cols = p->out_cols / CKC_MXFP8_BLOCK;
    float *v = ckc_scratch_row(&job->scratch, worker);
    for (int64_t r = r0; r < r1; r++) {
        mxfp8_load_row(p, r, v);
        for (int64_t c = 0; c < scale_cols; c++) {
            p->scales[ckc_nvfp4_scale_offset(r, c, scale_cols)] =
                mxfp8_quant_block(v + c * CKC_MXFP8_BLOCK, p->qx + r * p->out_cols + c * CKC_MXFP8_BLOCK);
        }
        nvfp4_zero_scales(p->scales, r, scale_cols, scale_cols);
    }
}

static ckc_status
cpu_mxfp8_quant(const ckc_quantize_mxfp8_params *p, int nthreads, ckc_error *err)
{
    mxfp8_quant_job job;
    for (int64_t r = p->out_rows; r < ckc_nvfp4_scale_rows(p->out_rows); r++) {
        nvfp4_zero_scales(p->scales, r, 0, p->out_cols / CKC_MXFP8_BLOCK);
    }
    job.p = p;
    return ckc_parallel_rows(p->out_rows, p->out_cols, nthreads, p->out_cols, &job.scratch, mxfp8_quant_range, &job,
                             err);
}

typedef struct {
    const ckc_dequantize_mxfp8_params *p;
    ckc_scratch scratch;  /* per thread: one row of cols floats */
} mxfp8_dequant_job;

/* The 32 values of a block of codes with its E8M0 scale, in float32 (rounded by the row's store). */
static void
mxfp8_decode_block(const uint8_t *q, uint8_t scale_code, float *v)
{
    const float scale = ckc_e8m0_to_f32(scale_code);
    for (int j = 0; j < CKC_MXFP8_BLOCK; j++) {
        v[j] = ckc_mxfp8_decoded(q[j], scale);
    }
}

static void
mxfp8_dequant_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const mxfp8_dequant_job *job = (const mxfp8_dequant_job *)ctx;
    const ckc_dequantize_mxfp8_params *p = job->p;
    const int64_t scale_cols = p->cols / CKC_MXFP8_BLOCK;
    const int64_t row_bytes = p->cols * ckc_kind_size(p->out_kind);
    float *v = ckc_scratch_row(&job->scratch, worker);
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t c = 0; c < scale_cols; c++) {
            mxfp8_decode_block(p->qx + r * p->cols + c * CKC_MXFP8_BLOCK,
                               p->scales[ckc_nvfp4_scale_offset(r, c, scale_cols)], v + c * CKC_MXFP8_BLOCK);
        }
        /* the one rounding to the output type (eager's .to(output_type)) */
        ckc_row_store(v, p->out_kind, p->cols, (char *)p->out + r * row_bytes);
    }
}

static ckc_status
cpu_mxfp8_dequant(const ckc_dequantize_mxfp8_params *p, int nthreads, ckc_error *err)
{
    mxfp8_dequant_job job;
    job.p = p;
    ckc_advise_output_pages(p->out, (size_t)(p->rows * p->cols * ckc_kind_size(p->out_kind)));
    return ckc_parallel_rows(p->rows, p->cols, nthreads, p->cols, &job.scratch, mxfp8_dequant_range, &job, err);
}
