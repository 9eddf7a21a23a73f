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

static void
mxfp8_quant_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const mxfp8_quant_job *job = (const mxfp8_quant_job *)ctx;
    const ckc_quantize_mxfp8_params *p = job->p;
    const int64_t out_cols = p->out_cols;
    const int64_t scale_cols = out_cols / CKC_MXFP8_BLOCK;
    const int64_t row_bytes = p->cols * ckc_kind_size(p->kind);
    float *v = ckc_scratch_row(&job->scratch, worker);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i = 0;
        if (r < p->rows) {
            ckc_row_load((const char *)p->x + r * row_bytes, p->kind, p->cols, v);
            i = p->cols;
        }
        for (; i < out_cols; i++) {
            v[i] = 0.0f;
        }
        for (int64_t c = 0; c < scale_cols; c++) {
            p->scales[ckc_nvfp4_scale_offset(r, c, scale_cols)] =
                mxfp8_quant_block(v + c * CKC_MXFP8_BLOCK, p->qx + r * out_cols + c * CKC_MXFP8_BLOCK);
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

static void
mxfp8_dequant_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const mxfp8_dequant_job *job = (const mxfp8_dequant_job *)ctx;
    const ckc_dequantize_mxfp8_params *p = job->p;
    const int64_t cols = p->cols;
    const int64_t scale_cols = cols / CKC_MXFP8_BLOCK;
    const int64_t row_bytes = cols * ckc_kind_size(p->out_kind);
    float *v = ckc_scratch_row(&job->scratch, worker);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *qrow = p->qx + r * cols;
        for (int64_t c = 0; c < scale_cols; c++) {
            const float scale = ckc_e8m0_to_f32(p->scales[ckc_nvfp4_scale_offset(r, c, scale_cols)]);
            float *vb = v + c * CKC_MXFP8_BLOCK;
            const uint8_t *qb = qrow + c * CKC_MXFP8_BLOCK;
            for (int j = 0; j < CKC_MXFP8_BLOCK; j++) {
                vb[j] = ckc_mxfp8_decoded(qb[j], scale);
            }
        }
        /* the one rounding to the output type (eager's .to(output_type)) */
        ckc_row_store(v, p->out_kind, cols, (char *)p->out + r * row_bytes);
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
