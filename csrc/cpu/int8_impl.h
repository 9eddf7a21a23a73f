/* SPDX-License-Identifier: Apache-2.0 */
/* CPU kernels of the int8 family: row-wise and tensor-wise quantization (with
 * the fused ConvRot rotation), the plain rotation, and dequantization.  Rows
 * are independent and go to the thread pool; a row is converted to float once,
 * worked on in per-thread scratch, and written once.
 * Compiled once per instruction set, inside kernels_isa.h. */
#include "math/int8_quant.h"

#if defined(__AVX2__)
#include "hadamard_avx2.h"
#include "int8_avx2.h"
#endif
#if defined(CKC_CPU_AVX512) /* set by rows.h for AVX-512 builds */
#include "int8_avx512.h"
#endif

/* ---- quantization loops ---- */

/* Stochastic codes of float values with their noise.  The element type is a
 * compile-time constant in each instance, which lets the loop vectorize;
 * quantize_stochastic picks the instance. */
static inline void
quantize_stochastic_as(const float *v, const float *noise, int8_t *q, int64_t n, float math_scale,
                       ckc_float_kind kind)
{
    for (int64_t i = 0; i < n; i++) {
        q[i] = ckc_int8_code_stochastic(v[i], noise[i], math_scale, kind);
    }
}

static void
quantize_stochastic(const float *v, const float *noise, int8_t *q, int64_t n, float math_scale,
                    ckc_float_kind kind)
{
    switch (kind) {
    case CKC_BF16:
        quantize_stochastic_as(v, noise, q, n, math_scale, CKC_BF16);
        break;
    case CKC_F16:
        quantize_stochastic_as(v, noise, q, n, math_scale, CKC_F16);
        break;
    default:
        quantize_stochastic_as(v, noise, q, n, math_scale, CKC_F32);
        break;
    }
}

/* Codes straight from elements of the element type (no float copy of the row). */
static inline void
quantize_src_as(const void *src, int8_t *q, int64_t n, float math_scale, ckc_float_kind kind)
{
    int64_t i;
    if (kind == CKC_F32) {
        const float *s = (const float *)src;
        for (i = 0; i < n; i++) {
            q[i] = ckc_int8_code(s[i], math_scale, CKC_F32);
        }
    } else {
        const uint16_t *s = (const uint16_t *)src;
        for (i = 0; i < n; i++) {
            const float x = kind == CKC_BF16 ? ckc_bf16_to_f32(s[i]) : ckc_f16_to_f32(s[i]);
            q[i] = ckc_int8_code(x, math_scale, kind);
        }
    }
}

/* own_scale: math_scale was derived from the absmax of these very values (so
 * in the reciprocal path they are bounded; see int8_avx2.h). */
static void
quantize_src(const void *src, int8_t *q, int64_t n, float math_scale, ckc_float_kind kind, int own_scale)
{
    switch (kind) {
    case CKC_BF16:
        if (ckc_int8_bf16_reciprocal_exact(math_scale)) {
            const uint16_t *s = (const uint16_t *)src;
            const float inv = 1.0f / math_scale;
            int64_t i = 0;
#if defined(CKC_CPU_AVX512)
            i = ckc_avx512_quantize_bf16(s, q, n, inv, own_scale);
#elif defined(__AVX2__)
            i = ckc_avx2_quantize_bf16(s, q, n, inv, own_scale);
#else
            (void)own_scale;
#endif
            for (; i < n; i++) {
                q[i] = ckc_int8_code_bf16_reciprocal(ckc_bf16_to_f32(s[i]), inv);
            }
            break;
        }
        quantize_src_as(src, q, n, math_scale, CKC_BF16);
        break;
    case CKC_F16:
        quantize_src_as(src, q, n, math_scale, CKC_F16);
        break;
    default:
        quantize_src_as(src, q, n, math_scale, CKC_F32);
        break;
    }
}

#if defined(__AVX2__)
/* A bfloat16 row rotated and quantized with the vector forms of this build:
 * v receives the rotated row rounded to bfloat16 (in the split layout of
 * hadamard_avx2.h, or in order with AVX-512), and the same pass gives its
 * absmax; work: k more floats (AVX-512's 1024-groups pass through it).
 * Returns 0, having written nothing, for a row whose absmax is inf or NaN or
 * whose scale is outside the reciprocal's range: the general path does those
 * rows. */
static int
rotated_row_bf16_vector(const uint16_t *row, int64_t k, int64_t group, float *v, float *work, int8_t *q, float *scale)
{
    float absmax, row_scale, math_scale;
#if defined(CKC_CPU_AVX512)
    __m512i absmax_bits = _mm512_setzero_si512();
    ckc_avx512_rotate_row_bf16(row, k, group, CKC_ROTATED_ROUNDED_F32, v, work, &absmax_bits);
    absmax = ckc_avx512_absmax_finish(absmax_bits);
#else
    const float norm = ckc_hadamard_norm(ckc_hadamard_log4(group));
    __m256i absmax_bits = _mm256_setzero_si256();
    (void)work;
    for (int64_t g = 0; g < k; g += group) {
        ckc_avx2_rotate_group_bf16_split(row + g, group, norm, v + g, &absmax_bits);
    }
    absmax = ckc_avx2_absmax_finish(absmax_bits);
#endif
    row_scale = ckc_int8_scale(absmax);
    math_scale = ckc_int8_math_scale(row_scale, CKC_BF16);
    if (!(absmax <= 0x1.fffffep+127f) || !ckc_int8_bf16_reciprocal_exact(math_scale)) {
        return 0;
    }
    *scale = row_scale;
#if defined(CKC_CPU_AVX512)
    ckc_avx512_quantize_rounded(v, q, k, 1.0f / math_scale);
#else
    ckc_avx2_quantize_split(v, q, k, 1.0f / math_scale);
#endif
    return 1;
}
#endif

/* ---- row-wise quantization (optionally rotated) ---- */

typedef struct {
    const ckc_quantize_int8_rowwise_params *p;
    ckc_scratch scratch;  /* 3 * cols per thread: values, noise, the rotated row */
} rowwise_job;

static void
rowwise_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const rowwise_job *job = (const rowwise_job *)ctx;
    const ckc_quantize_int8_rowwise_params *p = job->p;
    const int64_t k = p->cols;
    const int64_t elem = ckc_kind_size(p->kind);
    float *v = ckc_scratch_row(&job->scratch, worker);
    float *noise = v + k;
    void *rotated = v + 2 * k; /* k elements of x's type */
    for (int64_t r = r0; r < r1; r++) {
        const void *row = (const char *)p->x + r * k * elem;
        float scale;
        if (p->group > 0) {
#if defined(__AVX2__)
            if (p->kind == CKC_BF16 && p->group >= 16 && p->noise == NULL &&
                rotated_row_bf16_vector((const uint16_t *)row, k, p->group, v, noise, p->q + r * k, &p->scale[r])) {
                continue;
            }
#endif
            /* Rotated and rounded to x's type (eager's values before its
             * scale), the row quantizes like an unrotated one. */
            ckc_row_rotate_to_kind(row, p->kind, k, p->group, v, rotated);
            row = rotated;
        }
        if (p->noise == NULL) {
            /* Reads the row twice in place (it is in L1/L2 by then). */
            scale = ckc_int8_scale(ckc_src_absmax(row, p->kind, k));
            p->scale[r] = scale;
            quantize_src(row, p->q + r * k, k, ckc_int8_math_scale(scale, p->kind), p->kind, 1);
            continue;
        }
        ckc_row_load(row, p->kind, k, v);
        scale = ckc_int8_scale(ckc_row_absmax(v, k));
        p->scale[r] = scale;
        ckc_row_load((const char *)p->noise + r * k * elem, p->kind, k, noise);
        quantize_stochastic(v, noise, p->q + r * k, k, ckc_int8_math_scale(scale, p->kind), p->kind);
    }
}

static ckc_status
cpu_int8_rowwise(const ckc_quantize_int8_rowwise_params *p, int nthreads, ckc_error *err)
{
    rowwise_job job;
    job.p = p;
    ckc_advise_output_pages(p->q, (size_t)(p->rows * p->cols));
    return ckc_parallel_rows(p->rows, p->cols, nthreads, 3 * p->cols, &job.scratch, rowwise_range, &job, err);
}

/* ---- tensor-wise quantization ---- */

#define CKC_ELEMENT_GRAIN (1 << 15)
#define CKC_BLOCK 4096 /* elements converted per step of an elementwise loop */

typedef struct {
    const ckc_quantize_int8_tensorwise_params *p;
    float *partial_absmax; /* one per worker */
    float math_scale;
} tensorwise_job;

static void
absmax_range(void *ctx, int64_t b, int64_t e, int worker)
{
    tensorwise_job *job = (tensorwise_job *)ctx;
    const ckc_quantize_int8_tensorwise_params *p = job->p;
    const int64_t elem = ckc_kind_size(p->kind);
    job->partial_absmax[worker] = ckc_absmax_update(job->partial_absmax[worker],
                                                    ckc_src_absmax((const char *)p->x + b * elem, p->kind, e - b));
}

static void
tensorwise_quant_range(void *ctx, int64_t b, int64_t e, int worker)
{
    const tensorwise_job *job = (const tensorwise_job *)ctx;
    const ckc_quantize_int8_tensorwise_params *p = job->p;
    const int64_t elem = ckc_kind_size(p->kind);
    float buf[CKC_BLOCK];
    float noise[CKC_BLOCK];
    (void)worker;
    if (p->noise == NULL) {
        quantize_src((const char *)p->x + b * elem, p->q + b, e - b, job->math_scale, p->kind, p->compute_scale);
        return;
    }
    for (int64_t i0 = b; i0 < e; i0 += CKC_BLOCK) {
        const int64_t n = e - i0 < CKC_BLOCK ? e - i0 : CKC_BLOCK;
        ckc_row_load((const char *)p->x + i0 * elem, p->kind, n, buf);
        ckc_row_load((const char *)p->noise + i0 * elem, p->kind, n, noise);
        quantize_stochastic(buf, noise, p->q + i0, n, job->math_scale, p->kind);
    }
}

static ckc_status
cpu_int8_tensorwise(const ckc_quantize_int8_tensorwise_params *p, int nthreads, ckc_error *err)
{
    tensorwise_job job;
    const int threads = ckc_parallel_threads(p->numel, CKC_ELEMENT_GRAIN, nthreads);
    job.p = p;
    job.partial_absmax = NULL;
    if (p->compute_scale) {
        float absmax = 0.0f;
        job.partial_absmax = (float *)calloc((size_t)threads, sizeof(float));
        if (job.partial_absmax == NULL) {
            return CKC_FAIL(err, CKC_ERR_MEMORY, "cannot allocate %d partial maxima", threads);
        }
        ckc_parallel_for(p->numel, CKC_ELEMENT_GRAIN, threads, absmax_range, &job);
        for (int t = 0; t < threads; t++) {
            absmax = ckc_absmax_update(absmax, job.partial_absmax[t]);
        }
        free(job.partial_absmax);
        *p->scale = ckc_int8_scale(absmax);
    }
    job.math_scale = ckc_int8_math_scale(*p->scale, p->kind);
    ckc_advise_output_pages(p->q, (size_t)p->numel);
    ckc_parallel_for(p->numel, CKC_ELEMENT_GRAIN, threads, tensorwise_quant_range, &job);
    return CKC_OK;
}

/* ---- plain rotation (rotate_int8_convrot_weight) ---- */

typedef struct {
    const ckc_rotate_int8_convrot_weight_params *p;
    ckc_scratch scratch;
} hadamard_job;

static void
hadamard_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const hadamard_job *job = (const hadamard_job *)ctx;
    const ckc_rotate_int8_convrot_weight_params *p = job->p;
    const int64_t k = p->cols;
    const int64_t row_bytes = k * ckc_kind_size(p->kind);
    float *v = ckc_scratch_row(&job->scratch, worker);
    for (int64_t r = r0; r < r1; r++) {
        ckc_row_rotate_to_kind((const char *)p->x + r * row_bytes, p->kind, k, p->group, v,
                               (char *)p->out + r * row_bytes);
    }
}

static ckc_status
cpu_hadamard_rows(const ckc_rotate_int8_convrot_weight_params *p, int nthreads, ckc_error *err)
{
    hadamard_job job;
    job.p = p;
    ckc_advise_output_pages(p->out, (size_t)(p->rows * p->cols * ckc_kind_size(p->kind)));
    return ckc_parallel_rows(p->rows, p->cols, nthreads, p->cols, &job.scratch, hadamard_range, &job, err);
}

/* ---- dequantization (simple and ConvRot) ---- */

/* q.float() * scale (one float32 rounding, whatever the scale mode), then times
 * `norm`: 1, or the rotation's 1/sqrt(G) (a second, separate rounding, as the
 * products of eager's matmul by H_G).  `start` is the offset in q (and in a
 * full scale) of the n values, all in one row of q. */
static void
dequant_values(const ckc_dequantize_int8_convrot_weight_dtype_params *p, int64_t start, int64_t n, float norm, float *v)
{
    const int8_t *q = p->q + start;
    int64_t i;
    if (p->scale_mode == CKC_SCALE_FULL) {
        const float *s = p->scale + start;
        for (i = 0; i < n; i++) {
            const float d = (float)q[i] * s[i];
            v[i] = d * norm;
        }
    } else {
        const float s = p->scale[p->scale_mode == CKC_SCALE_PER_ROW ? start / p->cols : 0];
        for (i = 0; i < n; i++) {
            const float d = (float)q[i] * s;
            v[i] = d * norm;
        }
    }
}

/* q's offset of the output's flat element i (its row mapped through the index). */
static int64_t
dequant_source(const ckc_dequantize_int8_convrot_weight_dtype_params *p, int64_t i)
{
    const int64_t r = i / p->cols;
    return ckc_dequant_source_row(p->index, p->index_is_64, p->q_rows, r) * p->cols + (i - r * p->cols);
}

typedef struct {
    const ckc_dequantize_int8_convrot_weight_dtype_params *p;
    ckc_scratch scratch;
} dequant_job;

/* Without rotation the op is elementwise: blocks of the flat tensor, split at
 * row ends where a block's values must come from one row (a per-row scale, an
 * index). */
static void
dequant_flat_range(void *ctx, int64_t b, int64_t e, int worker)
{
    const dequant_job *job = (const dequant_job *)ctx;
    const ckc_dequantize_int8_convrot_weight_dtype_params *p = job->p;
    const int64_t elem = ckc_kind_size(p->out_kind);
    const int split = p->scale_mode == CKC_SCALE_PER_ROW || p->index != NULL;
    float v[CKC_BLOCK];
    (void)worker;
    for (int64_t i0 = b; i0 < e;) {
        int64_t n = e - i0 < CKC_BLOCK ? e - i0 : CKC_BLOCK;
        if (split) {
            const int64_t row_end = (i0 / p->cols + 1) * p->cols;
            n = row_end - i0 < n ? row_end - i0 : n;
        }
        if (p->out_kind == CKC_F32) {
            dequant_values(p, dequant_source(p, i0), n, 1.0f, (float *)p->out + i0);
        } else {
            dequant_values(p, dequant_source(p, i0), n, 1.0f, v);
            ckc_row_store(v, p->out_kind, n, (char *)p->out + i0 * elem);
        }
        i0 += n;
    }
}

static void
dequant_rotated_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const dequant_job *job = (const dequant_job *)ctx;
    const ckc_dequantize_int8_convrot_weight_dtype_params *p = job->p;
    const int64_t k = p->cols;
    const int64_t row_bytes = k * ckc_kind_size(p->out_kind);
    float *v = ckc_scratch_row(&job->scratch, worker);
    const float norm = ckc_hadamard_norm(ckc_hadamard_log4(p->group));
    for (int64_t r = r0; r < r1; r++) {
        dequant_values(p, ckc_dequant_source_row(p->index, p->index_is_64, p->q_rows, r) * k, k, norm, v);
        ckc_row_hadamard(v, k, p->group);
        ckc_row_store(v, p->out_kind, k, (char *)p->out + r * row_bytes);
    }
}

static ckc_status
cpu_int8_dequant(const ckc_dequantize_int8_convrot_weight_dtype_params *p, int nthreads, ckc_error *err)
{
    dequant_job job;
    for (int64_t r = 0; p->index != NULL && r < p->rows; r++) {
        if (ckc_dequant_source_row(p->index, p->index_is_64, p->q_rows, r) < 0) {
            const int64_t i = p->index_is_64 ? ((const int64_t *)p->index)[r] : ((const int32_t *)p->index)[r];
            return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'indices': index %lld is out of range for %lld rows",
                            (long long)i, (long long)p->q_rows);
        }
    }
    job.p = p;
    job.scratch.base = NULL;
    ckc_advise_output_pages(p->out, (size_t)(p->rows * p->cols * ckc_kind_size(p->out_kind)));
    if (p->group == 0) {
        ckc_parallel_for(p->rows * p->cols, CKC_ELEMENT_GRAIN, nthreads, dequant_flat_range, &job);
        return CKC_OK;
    }
    return ckc_parallel_rows(p->rows, p->cols, nthreads, p->cols, &job.scratch, dequant_rotated_range, &job, err);
}
