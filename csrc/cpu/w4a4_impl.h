/* SPDX-License-Identifier: Apache-2.0 */
/* CPU kernels of the ConvRot W4A4 family (math: csrc/math/int4.h, rotation:
 * csrc/math/hadamard.h through rows.h).  Quantization and dequantization go a
 * row at a time in a float scratch row; the linear unpacks the int4 codes to
 * int8 and runs the int8 GEMM of linear_impl.h (int32 accumulation, exact: see
 * math/int4.h for why that is eager's float result), a chunk of rows at a time.
 * Compiled once per instruction set, inside kernels_isa.h (after linear_impl.h). */
#include "math/int4.h"

/* ---- quantize_convrot_w4a4_weight (and the linear's activation rows) ---- */

typedef struct {
    const ckc_quantize_convrot_w4a4_weight_params *p;
    ckc_scratch scratch; /* per thread: values, noise, the rotated row (x's type), int8 codes */
} w4_quant_job;

/* Scratch floats per thread for rows of k. */
static int64_t
w4_quant_scratch(int64_t k)
{
    return 3 * k + k / 4 + 1;
}

/* Two int8-range codes per byte, narrowed to int4's [-7, 7] (ckc_int4_code's clamp). */
static void
w4_pack(const int8_t *c, int64_t k, uint8_t *q)
{
    for (int64_t j = 0; j < k / 2; j++) {
        q[j] = ckc_int4_pack(ckc_int4_clamp(c[2 * j]), ckc_int4_clamp(c[2 * j + 1]));
    }
}

/* The row eager quantizes: x's row r, or its rotation rounded to T in `rotated`. */
static const void *
w4_quant_source(const ckc_quantize_convrot_w4a4_weight_params *p, int64_t r, float *work, void *rotated)
{
    const void *row = (const char *)p->x + r * p->cols * ckc_kind_size(p->kind);
    if (p->group == 0) {
        return row;
    }
    ckc_row_rotate_to_kind(row, p->kind, p->cols, p->group, work, rotated);
    return rotated;
}

static void
w4_quant_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const w4_quant_job *job = (const w4_quant_job *)ctx;
    const ckc_quantize_convrot_w4a4_weight_params *p = job->p;
    const int64_t k = p->cols;
    float *v = ckc_scratch_row(&job->scratch, worker);
    int8_t *codes = (int8_t *)(v + 3 * k);
    for (int64_t r = r0; r < r1; r++) {
        const void *row = w4_quant_source(p, r, v, v + 2 * k);
        const float s = ckc_int4_scale(ckc_src_absmax(row, p->kind, k), p->kind);
        p->scale[r] = s;
        if (p->noise == NULL) {
            /* the int8 quantizer's loops (ckc_int8_code per value; the int4 clamp nests in it):
             * own scale, so every quotient is bounded (|x / s| <= 7 (1 + 2^-7)) */
            quantize_src(row, codes, k, s, p->kind, 1);
        } else {
            ckc_row_load(row, p->kind, k, v);
            ckc_row_load((const char *)p->noise + r * k * ckc_kind_size(p->kind), p->kind, k, v + k);
            quantize_stochastic(v, v + k, codes, k, s, p->kind);
        }
        w4_pack(codes, k, p->q + r * (k / 2));
    }
}

static ckc_status
cpu_w4a4_quant(const ckc_quantize_convrot_w4a4_weight_params *p, int nthreads, ckc_error *err)
{
    w4_quant_job job;
    job.p = p;
    return ckc_parallel_rows(p->rows, p->cols, nthreads, w4_quant_scratch(p->cols), &job.scratch, w4_quant_range,
                             &job, err);
}

/* ---- dequantize_convrot_w4a4_weight ---- */

typedef struct {
    const ckc_dequantize_convrot_w4a4_weight_params *p;
    ckc_scratch scratch;
} w4_dequant_job;

static void
w4_dequant_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const w4_dequant_job *job = (const w4_dequant_job *)ctx;
    const ckc_dequantize_convrot_w4a4_weight_params *p = job->p;
    const int64_t k = p->cols;
    const float norm = ckc_hadamard_norm(ckc_hadamard_log4(p->group));
    float *v = ckc_scratch_row(&job->scratch, worker);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *q = p->q + r * (k / 2);
        const float s = p->scale[r];
        for (int64_t j = 0; j < k; j += 2) {
            /* eager: code * scale in float32 (one rounding), then the matmul's
             * products by +-1/sqrt(G), a power of two (exact) */
            v[j] = ((float)ckc_int4_lo(q[j / 2]) * s) * norm;
            v[j + 1] = ((float)ckc_int4_hi(q[j / 2]) * s) * norm;
        }
        ckc_row_hadamard(v, k, p->group);
        ckc_row_store(v, p->out_kind, k, (char *)p->out + r * k * ckc_kind_size(p->out_kind));
    }
}

static ckc_status
cpu_w4a4_dequant(const ckc_dequantize_convrot_w4a4_weight_params *p, int nthreads, ckc_error *err)
{
    w4_dequant_job job;
    job.p = p;
    ckc_advise_output_pages(p->out, (size_t)(p->rows * p->cols * ckc_kind_size(p->out_kind)));
    return ckc_parallel_rows(p->rows, p->cols, nthreads, p->cols, &job.scratch, w4_dequant_range, &job, err);
}

/* ---- prepare_int4_weight_for_int8_linear: the nibbles as int8 ---- */

static void
w4_unpack_rows(const uint8_t *q, int8_t *out, int64_t bytes)
{
    for (int64_t j = 0; j < bytes; j++) {
        out[2 * j] = (int8_t)ckc_int4_lo(q[j]);
        out[2 * j + 1] = (int8_t)ckc_int4_hi(q[j]);
    }
}

typedef struct {
    const uint8_t *q;
    int8_t *out;
    int64_t cols; /* bytes per row */
} w4_unpack_job;

static void
w4_unpack_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const w4_unpack_job *job = (const w4_unpack_job *)ctx;
    (void)worker;
    w4_unpack_rows(job->q + r0 * job->cols, job->out + 2 * r0 * job->cols, (r1 - r0) * job->cols);
}

static void
w4_unpack(const uint8_t *q, int8_t *out, int64_t rows, int64_t cols, int nthreads)
{
    w4_unpack_job job;
    const int64_t grain = ckc_row_grain(2 * cols);
    job.q = q;
    job.out = out;
    job.cols = cols;
    ckc_parallel_for(rows, grain, ckc_parallel_threads(rows, grain, nthreads), w4_unpack_range, &job);
}

static ckc_status
cpu_w4a4_unpack(const ckc_prepare_int4_weight_for_int8_linear_params *p, int nthreads, ckc_error *err)
{
    (void)err;
    ckc_advise_output_pages(p->out, (size_t)(p->rows * p->cols * 2));
    w4_unpack(p->q, p->out, p->rows, p->cols, nthreads);
    return CKC_OK;
}

/* ---- convrot_w4a4_linear: int8 GEMM over the unpacked codes, then the epilogue ---- */

#define W4_LINEAR_CHUNK 256 /* rows of a per chunk: the int32 accumulator stays chunk x n */

typedef struct {
    const ckc_convrot_w4a4_linear_params *p;
    const int32_t *acc; /* the sums of rows m0.., n each */
    int64_t m0;
} w4_epilogue_job;

static void
w4_epilogue_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const w4_epilogue_job *job = (const w4_epilogue_job *)ctx;
    const ckc_convrot_w4a4_linear_params *p = job->p;
    const ckc_float_kind kind = p->out_kind;
    (void)worker;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t row = job->m0 + r;
        const float xs = ckc_round_to_kind(p->x_scale[row], kind);
        float *fout = (float *)p->out + row * p->n;
        uint16_t *hout = (uint16_t *)p->out + row * p->n;
        for (int64_t j = 0; j < p->n; j++) {
            const float ws = ckc_round_to_kind(ckc_kind_value(p->w_scale, p->w_scale_kind, j), kind);
            const float b = p->bias != NULL ? ckc_round_to_kind(ckc_kind_value(p->bias, p->bias_kind, j), kind)
                                            : 0.0f;
            const float v = ckc_int4_linear_out(job->acc[r * p->n + j], xs, ws, b, p->bias != NULL, kind);
            if (kind == CKC_F32) {
                fout[j] = v;
            } else {
                hout[j] = kind == CKC_BF16 ? ckc_f32_to_bf16(v) : ckc_f32_to_f16(v);
            }
        }
    }
}

/* The epilogue of rows [m0, m0 + rows) from their sums acc (rows x n). */
static void
w4_epilogue(const ckc_convrot_w4a4_linear_params *p, const int32_t *acc, int64_t m0, int64_t rows, int nthreads)
{
    w4_epilogue_job job;
    const int64_t grain = ckc_row_grain(p->n);
    job.p = p;
    job.acc = acc;
    job.m0 = m0;
    ckc_parallel_for(rows, grain, ckc_parallel_threads(rows, grain, nthreads), w4_epilogue_range, &job);
}

static ckc_status
cpu_w4a4_linear(const ckc_convrot_w4a4_linear_params *p, int nthreads, ckc_error *err)
{
    const int64_t chunk = p->m < W4_LINEAR_CHUNK ? p->m : W4_LINEAR_CHUNK;
    const size_t w_bytes = (size_t)(p->n * p->k);
    const size_t a_bytes = (size_t)(chunk * p->k);
    const size_t acc_bytes = (size_t)(chunk * p->n) * sizeof(int32_t);
    char *buf;
    int8_t *w8;
    int8_t *a8;
    int32_t *acc;
    if (p->acc != NULL) {
        w4_epilogue(p, p->acc, 0, p->m, nthreads);
        return CKC_OK;
    }
    buf = (char *)malloc(w_bytes + a_bytes + acc_bytes + 1);
    if (buf == NULL) {
        return CKC_FAIL(err, CKC_ERR_MEMORY, "cannot allocate %zu bytes of scratch memory",
                        w_bytes + a_bytes + acc_bytes);
    }
    acc = (int32_t *)buf; /* first: malloc's alignment for the int32 values */
    w8 = (int8_t *)(buf + acc_bytes);
    a8 = w8 + w_bytes;
    w4_unpack(p->w, w8, p->n, p->k / 2, nthreads);
    for (int64_t m0 = 0; m0 < p->m; m0 += chunk) {
        const int64_t rows = p->m - m0 < chunk ? p->m - m0 : chunk;
        ckc_int8_gemm_params g;
        w4_unpack(p->a + m0 * (p->k / 2), a8, rows, p->k / 2, nthreads);
        g.a = a8;
        g.lda = p->k;
        g.b = w8;
        g.ldb = p->k;
        g.c = acc;
        g.ldc = p->n;
        g.m = rows;
        g.n = p->n;
        g.k = p->k;
        cpu_int8_gemm(&g, nthreads, err);
        w4_epilogue(p, acc, m0, rows, nthreads);
    }
    free(buf);
    return CKC_OK;
}
