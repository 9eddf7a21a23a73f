/* The per-chunk parameter blocks of int8_linear, built once for both devices
 * (csrc/cpu/linear.c and kernels/linear.cu): a chunk of `rows` rows starting at
 * row r0 is quantized into the scratch codes, multiplied by the weight into the
 * int32 accumulator and finished by the epilogue into its output rows. */
#ifndef CKC_OPS_LINEAR_PLAN_H
#define CKC_OPS_LINEAR_PLAN_H

#include <stddef.h>

#include "ops/params.h"

/* Rows in the chunk that starts at row r0 (the last chunk may be short). */
static inline int64_t
ckc_linear_chunk_rows(const ckc_int8_linear_params *p, int64_t r0)
{
    return p->rows - r0 < p->chunk_rows ? p->rows - r0 : p->chunk_rows;
}

/* The chunk's first input row in x. */
static inline const void *
ckc_linear_chunk_x(const ckc_int8_linear_params *p, int64_t r0)
{
    return (const char *)p->x + r0 * p->x_stride * ckc_kind_size(p->kind);
}

/* Row-wise quantization of the chunk's rows read from `x` (x itself, or the
 * CPU's activated copy of it) into the scratch codes and scales. */
static inline ckc_int8_rowwise_params
ckc_linear_quant_params(const ckc_int8_linear_params *p, const void *x, int64_t rows)
{
    ckc_int8_rowwise_params q;
    q.x = x;
    q.kind = p->kind;
    q.rows = rows;
    q.cols = p->k;
    q.group = p->group;
    q.noise = NULL;
    q.q = p->q;
    q.scale = p->x_scale;
    return q;
}

/* codes . weight^T into the accumulator, for an m x n x k problem: the CPU's
 * exact one (rows, n, k) or the GPU's padded one (see kernels/linear.cu). */
static inline ckc_int8_gemm_params
ckc_linear_gemm_params(const ckc_int8_linear_params *p, int64_t m, int64_t n, int64_t k)
{
    ckc_int8_gemm_params g;
    g.a = p->q;
    g.lda = p->ldq;
    g.b = p->w;
    g.ldb = p->ldw;
    g.c = p->acc;
    g.ldc = p->ldacc;
    g.m = m;
    g.n = n;
    g.k = k;
    return g;
}

/* The activation's arguments for the chunk: its rows' factors in the scratch. */
static inline ckc_act_args
ckc_linear_act_args(const ckc_int8_linear_params *p)
{
    ckc_act_args a = p->act_args;
    a.row_factor = p->row_factor;
    return a;
}

/* The epilogue from the accumulator into the chunk's output rows. */
static inline ckc_linear_epilogue_params
ckc_linear_epilogue_for(const ckc_int8_linear_params *p, int64_t r0, int64_t rows)
{
    ckc_linear_epilogue_params e;
    e.acc = p->acc;
    e.ldacc = p->ldacc;
    e.x_scale = p->x_scale;
    e.w_scale = p->w_scale;
    e.w_per_channel = p->w_per_channel;
    e.terms = p->terms;
    if (e.terms.residual != NULL) {
        e.terms.residual = (const char *)e.terms.residual + r0 * p->n * ckc_kind_size(e.terms.residual_kind);
    }
    e.out = (char *)p->out + r0 * p->n * ckc_kind_size(p->out_kind);
    e.out_kind = p->out_kind;
    e.rows = rows;
    e.n = p->n;
    return e;
}

#endif /* CKC_OPS_LINEAR_PLAN_H */
