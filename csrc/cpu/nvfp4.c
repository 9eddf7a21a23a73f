/* CPU kernels of the NVFP4 family.  A row is converted to float once (with the
 * pad_16x zeros appended), then each block of 16 gets its e4m3 scale, codes
 * and packed bytes; scales go straight to their swizzled offsets. */
#include "kernels.h"
#include "math/int8_quant.h"
#include "math/nvfp4.h"
#include "parallel.h"
#include "rows.h"
#include "scratch.h"

#define CKC_NVFP4_ROW_GRAIN_ELEMS (1 << 14)

static int64_t
nvfp4_row_grain(int64_t cols)
{
    return cols >= CKC_NVFP4_ROW_GRAIN_ELEMS ? 1 : CKC_NVFP4_ROW_GRAIN_ELEMS / (cols > 0 ? cols : 1);
}

typedef struct {
    const ckc_nvfp4_quant_params *p;
    ckc_scratch scratch;
    float per_tensor_scale;
} quant_job;

static void
quant_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const quant_job *job = (const quant_job *)ctx;
    const ckc_nvfp4_quant_params *p = job->p;
    const int64_t out_cols = p->out_cols;
    const int64_t scale_cols = out_cols / CKC_NVFP4_BLOCK;
    const int64_t row_bytes = p->cols * ckc_kind_size(p->kind);
    float *v = ckc_scratch_row(&job->scratch, worker);
    for (int64_t r = r0; r < r1; r++) {
        uint8_t *qrow = p->qx + r * (out_cols / 2);
        int64_t i = 0;
        if (r < p->rows) {
            ckc_row_load((const char *)p->x + r * row_bytes, p->kind, p->cols, v);
            i = p->cols;
        }
        for (; i < out_cols; i++) {
            v[i] = 0.0f;
        }
        for (int64_t c = 0; c < scale_cols; c++) {
            const float *blk = v + c * CKC_NVFP4_BLOCK;
            float absmax = 0.0f;
            uint8_t scale;
            float total;
            int j;
            for (j = 0; j < CKC_NVFP4_BLOCK; j++) {
                absmax = ckc_absmax_update(absmax, blk[j]);
            }
            scale = ckc_nvfp4_block_scale(absmax, job->per_tensor_scale);
            total = ckc_nvfp4_total_scale(scale, job->per_tensor_scale);
            p->scales[ckc_nvfp4_scale_offset(r, c, scale_cols)] = scale;
            for (j = 0; j < CKC_NVFP4_BLOCK; j += 2) {
                qrow[(c * CKC_NVFP4_BLOCK + j) / 2] = ckc_nvfp4_pack(
                    ckc_nvfp4_code(blk[j], total), ckc_nvfp4_code(blk[j + 1], total), p->hi_first);
            }
        }
    }
}

ckc_status
ckc_cpu_nvfp4_quant(const ckc_nvfp4_quant_params *p, int nthreads, ckc_error *err)
{
    quant_job job;
    const int64_t grain = nvfp4_row_grain(p->out_cols);
    const int threads = ckc_parallel_threads(p->out_rows, grain, nthreads);
    job.p = p;
    job.per_tensor_scale = *p->per_tensor_scale;
    CKC_TRY(ckc_scratch_alloc(&job.scratch, threads, p->out_cols, err));
    ckc_parallel_for(p->out_rows, grain, threads, quant_range, &job);
    ckc_scratch_free(&job.scratch);
    return CKC_OK;
}

typedef struct {
    const ckc_nvfp4_dequant_params *p;
    ckc_scratch scratch;
    float per_tensor_scale; /* already rounded to the output type */
} dequant_job;

static void
dequant_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const dequant_job *job = (const dequant_job *)ctx;
    const ckc_nvfp4_dequant_params *p = job->p;
    const int64_t cols = p->cols;
    const int64_t scale_cols = cols / CKC_NVFP4_BLOCK;
    const int64_t row_bytes = cols * ckc_kind_size(p->out_kind);
    float *v = ckc_scratch_row(&job->scratch, worker);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *qrow = p->qx + r * (cols / 2);
        for (int64_t c = 0; c < scale_cols; c++) {
            /* Eager forms per_tensor_scale * block_scale in the output type. */
            const float block = ckc_e4m3_to_f32(p->scales[ckc_nvfp4_scale_offset(r, c, scale_cols)]);
            const float total = ckc_round_to_kind(job->per_tensor_scale * block, p->out_kind);
            float *out = v + c * CKC_NVFP4_BLOCK;
            const uint8_t *bytes = qrow + c * (CKC_NVFP4_BLOCK / 2);
            for (int j = 0; j < CKC_NVFP4_BLOCK / 2; j++) {
                out[2 * j] = ckc_e2m1_to_f32(ckc_nvfp4_unpack_even(bytes[j], p->hi_first)) * total;
                out[2 * j + 1] = ckc_e2m1_to_f32(ckc_nvfp4_unpack_odd(bytes[j], p->hi_first)) * total;
            }
        }
        ckc_row_store(v, p->out_kind, cols, (char *)p->out + r * row_bytes);
    }
}

ckc_status
ckc_cpu_nvfp4_dequant(const ckc_nvfp4_dequant_params *p, int nthreads, ckc_error *err)
{
    dequant_job job;
    const int64_t grain = nvfp4_row_grain(p->cols);
    const int threads = ckc_parallel_threads(p->rows, grain, nthreads);
    job.p = p;
    job.per_tensor_scale = ckc_round_to_kind(*p->per_tensor_scale, p->out_kind);
    CKC_TRY(ckc_scratch_alloc(&job.scratch, threads, p->cols, err));
    ckc_parallel_for(p->rows, grain, threads, dequant_range, &job);
    ckc_scratch_free(&job.scratch);
    return CKC_OK;
}
