/* SPDX-License-Identifier: Apache-2.0 */
/* CPU kernels of the NVFP4 family.  A row is converted to float once (with the
 * pad_16x zeros appended; for quantize_and_rotate_nvfp4 rotated group-wise and
 * rounded to x's type on the way, exactly as rotate_int8_convrot_weight stores
 * it), then each block of 16 gets its e4m3 scale, codes and packed bytes;
 * scales go straight to their swizzled offsets.  The padding of the swizzled
 * scale buffer gets scale 0 too (the op allocates it uninitialized): a row's
 * padding columns by the worker of that row, the padding rows before the
 * parallel part, so no two threads write the same bytes.
 * Compiled once per instruction set, inside kernels_isa.h. */
#include "math/nvfp4.h"

typedef struct {
    const ckc_quantize_nvfp4_params *p;
    ckc_scratch scratch;  /* per thread: out_cols values, out_cols divisors, out_cols codes */
    float per_tensor_scale;
} nvfp4_quant_job;

/* Per-thread scratch of both kernels, in floats: a row of values, each value's
 * block scale factor, and a row of codes (one byte each). */
static int64_t
nvfp4_scratch_floats(int64_t out_cols)
{
    return 2 * out_cols + out_cols / 4 + 1;
}

/* Scale 0 in row r's entries of the swizzled buffer from column c0 to the
 * buffer's padded width. */
static void
nvfp4_zero_scales(uint8_t *scales, int64_t r, int64_t c0, int64_t scale_cols)
{
    for (int64_t c = c0; c < ckc_nvfp4_scale_cols(scale_cols); c++) {
        scales[ckc_nvfp4_scale_offset(r, c, scale_cols)] = 0;
    }
}

static void
nvfp4_quant_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const nvfp4_quant_job *job = (const nvfp4_quant_job *)ctx;
    const ckc_quantize_nvfp4_params *p = job->p;
    const int64_t out_cols = p->out_cols;
    const int64_t scale_cols = out_cols / CKC_NVFP4_BLOCK;
    const int64_t row_bytes = p->cols * ckc_kind_size(p->kind);
    float *v = ckc_scratch_row(&job->scratch, worker);
    float *total = v + out_cols;  /* each block's divisor, repeated for its 16 values */
    uint8_t *codes = (uint8_t *)(total + out_cols);
    for (int64_t r = r0; r < r1; r++) {
        uint8_t *qrow = p->qx + r * (out_cols / 2);
        int64_t i = 0;
        if (r < p->rows && p->group > 0) {
            ckc_row_load_rotated((const char *)p->x + r * row_bytes, p->kind, p->cols, p->group, v);
            /* Rounds in place to x's type; the row's absmax it returns is not
             * needed (each block takes its own below). */
            (void)ckc_row_round_absmax(v, p->kind, p->cols);
            i = p->cols;
        } else if (r < p->rows) {
            ckc_row_load((const char *)p->x + r * row_bytes, p->kind, p->cols, v);
            i = p->cols;
        }
        for (; i < out_cols; i++) {
            v[i] = 0.0f;
        }
        for (int64_t c = 0; c < scale_cols; c++) {
            const uint8_t scale = ckc_nvfp4_block_scale(ckc_row_absmax(v + c * CKC_NVFP4_BLOCK, CKC_NVFP4_BLOCK),
                                                        job->per_tensor_scale);
            const float t = ckc_nvfp4_total_scale(scale, job->per_tensor_scale);
            p->scales[ckc_nvfp4_scale_offset(r, c, scale_cols)] = scale;
            for (int j = 0; j < CKC_NVFP4_BLOCK; j++) {
                total[c * CKC_NVFP4_BLOCK + j] = t;
            }
        }
        nvfp4_zero_scales(p->scales, r, scale_cols, scale_cols);
        /* Whole-row loops over plain arrays: each vectorizes. */
        for (i = 0; i < out_cols; i++) {
            codes[i] = ckc_nvfp4_code(v[i], total[i]);
        }
        for (i = 0; i < out_cols / 2; i++) {
            qrow[i] = ckc_nvfp4_pack(codes[2 * i], codes[2 * i + 1], p->hi_first);
        }
    }
}

static ckc_status
cpu_nvfp4_quant(const ckc_quantize_nvfp4_params *p, int nthreads, ckc_error *err)
{
    nvfp4_quant_job job;
    for (int64_t r = p->out_rows; r < ckc_nvfp4_scale_rows(p->out_rows); r++) {
        nvfp4_zero_scales(p->scales, r, 0, p->out_cols / CKC_NVFP4_BLOCK);
    }
    job.p = p;
    job.per_tensor_scale = *p->per_tensor_scale;
    return ckc_parallel_rows(p->out_rows, p->out_cols, nthreads, nvfp4_scratch_floats(p->out_cols),
                             &job.scratch, nvfp4_quant_range, &job, err);
}

typedef struct {
    const ckc_dequantize_nvfp4_params *p;
    ckc_scratch scratch;
    float per_tensor_scale; /* already rounded to the output type */
} nvfp4_dequant_job;

static void
nvfp4_dequant_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const nvfp4_dequant_job *job = (const nvfp4_dequant_job *)ctx;
    const ckc_dequantize_nvfp4_params *p = job->p;
    const int64_t cols = p->cols;
    const int64_t scale_cols = cols / CKC_NVFP4_BLOCK;
    const int64_t row_bytes = cols * ckc_kind_size(p->out_kind);
    float *v = ckc_scratch_row(&job->scratch, worker);
    float *total = v + cols;  /* each block's multiplier, repeated for its 16 values */
    uint8_t *codes = (uint8_t *)(total + cols);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *qrow = p->qx + r * (cols / 2);
        int64_t i;
        for (int64_t c = 0; c < scale_cols; c++) {
            /* Eager forms per_tensor_scale * block_scale in the output type. */
            const float block = ckc_e4m3_to_f32(p->scales[ckc_nvfp4_scale_offset(r, c, scale_cols)]);
            const float t = ckc_round_to_kind(job->per_tensor_scale * block, p->out_kind);
            for (int j = 0; j < CKC_NVFP4_BLOCK; j++) {
                total[c * CKC_NVFP4_BLOCK + j] = t;
            }
        }
        for (i = 0; i < cols / 2; i++) {
            codes[2 * i] = ckc_nvfp4_unpack_even(qrow[i], p->hi_first);
            codes[2 * i + 1] = ckc_nvfp4_unpack_odd(qrow[i], p->hi_first);
        }
        for (i = 0; i < cols; i++) {
            v[i] = ckc_e2m1_to_f32(codes[i]) * total[i];
        }
        ckc_row_store(v, p->out_kind, cols, (char *)p->out + r * row_bytes);
    }
}

static ckc_status
cpu_nvfp4_dequant(const ckc_dequantize_nvfp4_params *p, int nthreads, ckc_error *err)
{
    nvfp4_dequant_job job;
    job.p = p;
    job.per_tensor_scale = ckc_round_to_kind(*p->per_tensor_scale, p->out_kind);
    ckc_advise_output_pages(p->out, (size_t)(p->rows * p->cols * ckc_kind_size(p->out_kind)));
    return ckc_parallel_rows(p->rows, p->cols, nthreads, nvfp4_scratch_floats(p->cols), &job.scratch,
                             nvfp4_dequant_range, &job, err);
}
