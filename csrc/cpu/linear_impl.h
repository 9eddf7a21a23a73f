/* SPDX-License-Identifier: Apache-2.0 */
/* CPU kernels of int8_linear: the int8 GEMM (int32 accumulation, exact), the
 * epilogue (csrc/math/linear.h) and the input activation pre-pass
 * (csrc/math/activation.h).  The GEMM is also the emulated device's stand-in
 * for cuBLASLt's int8 GEMM (csrc/gpu/blas_emu.c).
 * Compiled once per instruction set, inside kernels_isa.h. */
#include "act_tables.h"
#include "math/activation.h"
#include "math/linear.h"
#include "math/rms.h"

/* ---- int8 GEMM: c[m, n] = sum_k a[m, k] b[n, k] ----
 * Both operands have k contiguous, so every output is a dot product of two
 * int8 rows.  A task owns a tile of GEMM_TILE_M x GEMM_TILE_N outputs and walks
 * k in blocks of GEMM_KB, so the tile's rows of a and b stay in L1/L2 while
 * GEMM_MR x GEMM_NR outputs at a time are accumulated in registers: each loaded
 * value of a row feeds GEMM_NR (or GEMM_MR) products, which compilers turn into
 * widening multiply-adds (pmaddwd on x86). */
#define GEMM_MR 2
#define GEMM_NR 4
#define GEMM_KB 1024
#define GEMM_TILE_M 16
#define GEMM_TILE_N 64

static inline int32_t
gemm_dot(const int8_t *a, const int8_t *b, int64_t kb)
{
    int32_t s = 0;
    for (int64_t t = 0; t < kb; t++) {
        s += (int32_t)a[t] * (int32_t)b[t];
    }
    return s;
}

#if defined(__AVX2__)
#include "gemm_avx2.h"
#endif

/* GEMM_MR x GEMM_NR dot products over kb values, added to acc (row stride GEMM_TILE_N):
 * the AVX2 micro-kernel for whole 16-value blocks where this build has it, the
 * portable loop (which compilers vectorize, less well) for the rest. */
static inline void
gemm_micro(const int8_t *a0, const int8_t *a1, const int8_t *b0, const int8_t *b1, const int8_t *b2,
           const int8_t *b3, int64_t kb, int32_t *acc)
{
    int32_t s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t t0 = 0;
#if defined(__AVX2__)
    const int8_t *const b[4] = {b0, b1, b2, b3};
    t0 = kb / 16 * 16;
    gemm_micro_avx2(a0, a1, b, t0, s);
#endif
    for (int64_t t = t0; t < kb; t++) {
        const int32_t x0 = a0[t];
        const int32_t x1 = a1[t];
        const int32_t y0 = b0[t];
        const int32_t y1 = b1[t];
        const int32_t y2 = b2[t];
        const int32_t y3 = b3[t];
        s[0] += x0 * y0;
        s[1] += x0 * y1;
        s[2] += x0 * y2;
        s[3] += x0 * y3;
        s[4] += x1 * y0;
        s[5] += x1 * y1;
        s[6] += x1 * y2;
        s[7] += x1 * y3;
    }
    for (int j = 0; j < GEMM_NR; j++) {
        acc[j] += s[j];
        acc[GEMM_TILE_N + j] += s[GEMM_NR + j];
    }
}

typedef struct {
    const ckc_int8_gemm_params *p;
    int64_t tiles_n;
} gemm_job;

static void
gemm_tile(const ckc_int8_gemm_params *p, int64_t m0, int64_t n0)
{
    int32_t acc[GEMM_TILE_M * GEMM_TILE_N];
    const int64_t mt = p->m - m0 < GEMM_TILE_M ? p->m - m0 : GEMM_TILE_M;
    const int64_t nt = p->n - n0 < GEMM_TILE_N ? p->n - n0 : GEMM_TILE_N;
    memset(acc, 0, sizeof acc);
    for (int64_t k0 = 0; k0 < p->k; k0 += GEMM_KB) {
        const int64_t kb = p->k - k0 < GEMM_KB ? p->k - k0 : GEMM_KB;
        for (int64_t j = 0; j < nt; j += GEMM_NR) {
            const int8_t *b = p->b + (n0 + j) * p->ldb + k0;
            for (int64_t i = 0; i < mt; i += GEMM_MR) {
                const int8_t *a = p->a + (m0 + i) * p->lda + k0;
                int32_t *c = acc + i * GEMM_TILE_N + j;
                if (i + GEMM_MR <= mt && j + GEMM_NR <= nt) {
                    gemm_micro(a, a + p->lda, b, b + p->ldb, b + 2 * p->ldb, b + 3 * p->ldb, kb, c);
                    continue;
                }
                for (int64_t ii = 0; ii < GEMM_MR && i + ii < mt; ii++) {
                    for (int64_t jj = 0; jj < GEMM_NR && j + jj < nt; jj++) {
                        c[ii * GEMM_TILE_N + jj] += gemm_dot(a + ii * p->lda, b + jj * p->ldb, kb);
                    }
                }
            }
        }
    }
    for (int64_t i = 0; i < mt; i++) {
        memcpy(p->c + (m0 + i) * p->ldc + n0, acc + i * GEMM_TILE_N, (size_t)nt * sizeof(int32_t));
    }
}

static void
gemm_range(void *ctx, int64_t t0, int64_t t1, int worker)
{
    const gemm_job *job = (const gemm_job *)ctx;
    (void)worker;
    for (int64_t t = t0; t < t1; t++) {
        gemm_tile(job->p, (t / job->tiles_n) * GEMM_TILE_M, (t % job->tiles_n) * GEMM_TILE_N);
    }
}

static ckc_status
cpu_int8_gemm(const ckc_int8_gemm_params *p, int nthreads, ckc_error *err)
{
    gemm_job job;
    const int64_t tiles_m = (p->m + GEMM_TILE_M - 1) / GEMM_TILE_M;
    /* Enough tiles for every thread even when a is one row or a few. */
    const int64_t tile_work = GEMM_TILE_M * GEMM_TILE_N * (p->k > 0 ? p->k : 1);
    (void)err;
    job.p = p;
    job.tiles_n = (p->n + GEMM_TILE_N - 1) / GEMM_TILE_N;
    ckc_parallel_for(tiles_m * job.tiles_n, tile_work >= (1 << 18) ? 1 : (1 << 18) / tile_work, nthreads,
                     gemm_range, &job);
    return CKC_OK;
}

/* ---- epilogue ---- */

typedef struct {
    const ckc_linear_epilogue_params *p;
    const float *bias_terms;  /* n values (ckc_linear_bias), or NULL without a bias */
    const float *scale_terms; /* n values of the residual's scale in out's type, or NULL */
    ckc_scratch scratch;
} epilogue_job;

/* The residual form of a row already in v (out's type). */
static void
epilogue_residual(const ckc_linear_epilogue_params *p, const float *scale_terms, int64_t r, float *v)
{
    const ckc_linear_terms *t = &p->terms;
    for (int64_t j = 0; j < p->n; j++) {
        v[j] = ckc_linear_residual(v[j], ckc_linear_operand(t->residual, t->residual_kind, p->out_kind, r * p->n + j),
                                   scale_terms[j]);
    }
}

static void
epilogue_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const epilogue_job *job = (const epilogue_job *)ctx;
    const ckc_linear_epilogue_params *p = job->p;
    const float *b = job->bias_terms;
    const int has_bias = b != NULL;
    const ckc_float_kind ok = p->out_kind;
    const int64_t out_row = p->n * ckc_kind_size(ok);
    float *v = ckc_scratch_row(&job->scratch, worker);
    for (int64_t r = r0; r < r1; r++) {
        const int32_t *acc = p->acc + r * p->ldacc;
        const float sx = p->x_scale[r];
        if (p->w_per_channel) {
            for (int64_t j = 0; j < p->n; j++) {
                v[j] = ckc_linear_value(acc[j], sx, p->w_scale[j], has_bias, has_bias ? b[j] : 0.0f, ok);
            }
        } else {
            for (int64_t j = 0; j < p->n; j++) {
                v[j] = ckc_linear_value(acc[j], sx, p->w_scale[0], has_bias, has_bias ? b[j] : 0.0f, ok);
            }
        }
        if (job->scale_terms != NULL) {
            epilogue_residual(p, job->scale_terms, r, v);
        }
        ckc_row_store(v, ok, p->n, (char *)p->out + r * out_row);
    }
}

static ckc_status
cpu_linear_epilogue(const ckc_linear_epilogue_params *p, int nthreads, ckc_error *err)
{
    const ckc_linear_terms *t = &p->terms;
    epilogue_job job;
    ckc_scratch terms = {NULL, 0}; /* stays empty without a bias or residual */
    ckc_status status;
    job.p = p;
    job.bias_terms = NULL;
    job.scale_terms = NULL;
    if (t->bias != NULL || t->residual != NULL) {
        /* The per-column terms are converted once per chunk, so that the per-row
         * loops above read float rows (and vectorize) instead of converting per
         * element: row 0 the bias's, row 1 the residual scale's. */
        CKC_TRY(ckc_scratch_alloc(&terms, 2, p->n, err));
        if (t->bias != NULL) {
            float *b = ckc_scratch_row(&terms, 0);
            for (int64_t j = 0; j < p->n; j++) {
                b[j] = ckc_linear_bias(t->bias, t->bias_kind, p->out_kind, j);
            }
            job.bias_terms = b;
        }
        if (t->residual != NULL) {
            float *s = ckc_scratch_row(&terms, 1);
            for (int64_t j = 0; j < p->n; j++) {
                s[j] = ckc_linear_operand(t->residual_scale, t->residual_scale_kind, p->out_kind,
                                          t->residual_scale_per_channel ? j : 0);
            }
            job.scale_terms = s;
        }
    }
    status = ckc_parallel_rows(p->rows, p->n, nthreads, p->n, &job.scratch, epilogue_range, &job, err);
    ckc_scratch_free(&terms);
    return status;
}

/* ---- input activation: dst[r, :k] = act(src[r, :]) in the element type ---- */

typedef struct {
    const ckc_act_rows_params *p;
    const float *table[2]; /* act_tables.h: the activation by lookup, or NULL */
    const float *norm_w;   /* the columnwise activations' factors per column (act_columns), or NULL */
    const float *mod;
    ckc_scratch scratch;
} act_job;

/* ---- the columnwise activations (rms_norm, the modulations), a row at a time ----
 * ckc_act_columnwise (math/activation.h) per element reads its column's weight and 1 + s
 * through the vectors' types and rounds through a switch on the type: none of it
 * vectorizes.  Here the column factors are computed once per call, exactly as it computes
 * them, and each row is one multiply-and-round loop per type: the same operations on the
 * same float32 values in the same order, so the same bits. */

/* norm_w[j]: rms_norm's weight as ckc_rms_value uses it; mod[j]: ckc_modulate_value's m. */
static void
act_columns(const ckc_act_rows_params *p, float *norm_w, float *mod)
{
    const ckc_act_args *a = &p->args;
    for (int64_t j = 0; j < p->k; j++) {
        if (norm_w != NULL) {
            const float w = ckc_kind_value(a->weight, a->weight_kind, j);
            norm_w[j] = a->weight_to_row_kind ? ckc_round_to_kind(w, p->kind) : w;
        }
        if (mod != NULL) {
            mod[j] = ckc_round_to_kind(1.0f + ckc_kind_value(a->modulation, a->modulation_kind, j),
                                       a->modulation_kind);
        }
    }
}

/* v[i] = round((v[i] * r) * f[i]) to kind; r = 1 for the modulation's v[i] * m[i] (an exact
 * multiply by one, so the product rounds as ckc_modulate_value's). */
static void
act_scale_row(float *v, float r, const float *f, int64_t k, ckc_float_kind kind)
{
    if (kind == CKC_F32) {
        for (int64_t i = 0; i < k; i++) {
            v[i] = (v[i] * r) * f[i];
        }
    } else if (kind == CKC_BF16) {
        for (int64_t i = 0; i < k; i++) {
            v[i] = ckc_bf16_to_f32(ckc_f32_to_bf16((v[i] * r) * f[i]));
        }
    } else {
        for (int64_t i = 0; i < k; i++) {
            v[i] = ckc_f16_to_f32(ckc_f32_to_f16((v[i] * r) * f[i]));
        }
    }
}

/* A row of a tabulated activation (act_tables.h): t[0] of the first half's bits,
 * then swiglu's product with up (other) or situ's with t[1] of the gate's bits,
 * rounded as ckc_act_apply rounds. */
static void
act_row_tabulated(const act_job *job, const uint16_t *first, const float *other, float *v)
{
    const ckc_act_rows_params *p = job->p;
    const float *t0 = job->table[0];
    const float *t1 = job->table[1];
    const uint16_t *second = first + p->k;
    if (p->act == CKC_ACT_GELU_TANH) {
        for (int64_t i = 0; i < p->k; i++) {
            v[i] = t0[first[i]];
        }
    } else if (p->act == CKC_ACT_SWIGLU) {
        for (int64_t i = 0; i < p->k; i++) {
            v[i] = ckc_round_to_kind(t0[first[i]] * other[i], p->kind);
        }
    } else {
        for (int64_t i = 0; i < p->k; i++) {
            v[i] = ckc_round_to_kind(t0[first[i]] * t1[second[i]], p->kind);
        }
    }
}

static void
act_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const act_job *job = (const act_job *)ctx;
    const ckc_act_rows_params *p = job->p;
    const int64_t elem = ckc_kind_size(p->kind);
    const int64_t width = ckc_act_width(p->act);
    float *v = ckc_scratch_row(&job->scratch, worker);
    float *other = v + p->k;
    for (int64_t r = r0; r < r1; r++) {
        const char *row = (const char *)p->src + r * width * p->k * elem;
        float factor = 0.0f;
        ckc_row_load(row, p->kind, p->k, v);
        if (width == 2) {
            ckc_row_load(row + p->k * elem, p->kind, p->k, other);
        }
        if (ckc_act_needs_row_factor(p->act)) {
            factor = cpu_rms_factor(v, p->k, p->args.eps); /* v: the row in float32 */
        }
        if (job->table[0] != NULL) {
            act_row_tabulated(job, (const uint16_t *)row, other, v);
            ckc_row_store(v, p->kind, p->k, (char *)p->dst + r * p->k * elem);
            continue;
        }
        if (job->norm_w != NULL || job->mod != NULL) {
            if (job->norm_w != NULL) {
                act_scale_row(v, factor, job->norm_w, p->k, p->args.norm_kind);
            }
            if (job->mod != NULL) {
                act_scale_row(v, 1.0f, job->mod, p->k, p->kind);
            }
            ckc_row_store(v, p->kind, p->k, (char *)p->dst + r * p->k * elem);
            continue;
        }
        for (int64_t i = 0; i < p->k; i++) {
            v[i] = ckc_act_apply(p->act, v[i], width == 2 ? other[i] : 0.0f, factor, p->args, p->kind, i);
        }
        ckc_row_store(v, p->kind, p->k, (char *)p->dst + r * p->k * elem);
    }
}

static ckc_status
cpu_input_act(const ckc_act_rows_params *p, int nthreads, ckc_error *err)
{
    const int act = p->act == CKC_ACT_COLUMNWISE ? p->args.act : p->act;
    const int rms = act == CKC_ACT_RMS_NORM || act == CKC_ACT_RMS_MODULATE;
    const int modulate = act == CKC_ACT_MODULATE || act == CKC_ACT_RMS_MODULATE;
    float *columns = NULL;
    ckc_status status;
    act_job job;
    job.p = p;
    job.norm_w = job.mod = NULL;
    ckc_act_tables(p->act, p->kind, job.table);
    if ((rms || modulate) && p->k > 0) {
        columns = (float *)malloc((size_t)p->k * 2 * sizeof(float));
        if (columns == NULL) {
            return CKC_FAIL(err, CKC_ERR_MEMORY, "cannot allocate %lld bytes of scratch memory",
                            (long long)p->k * 2 * (long long)sizeof(float));
        }
        job.norm_w = rms ? columns : NULL;
        job.mod = modulate ? columns + p->k : NULL;
        act_columns(p, rms ? columns : NULL, modulate ? columns + p->k : NULL);
    }
    status = ckc_parallel_rows(p->rows, p->k, nthreads, 2 * p->k, &job.scratch, act_range, &job, err);
    free(columns);
    return status;
}
