/* SPDX-License-Identifier: Apache-2.0 */
/* CPU kernel of rms_gated_residual, included by kernels_isa.h into each
 * instruction set's build after rms_rope_impl.h, whose normalization it
 * reuses (its rms factor: rms_impl.h).  One pass per row: the activation row
 * loaded into float32 once, normalized (rounded to its type), then gate and
 * residual rows applied (math/residual.h) and the row stored once in out's
 * type. */
#include "math/residual.h"

typedef struct {
    const ckc_rms_gated_residual_params *p;
    ckc_scratch scratch; /* per worker: activation, weight, gate, residual rows (4 * dim floats) */
} residual_job;

/* o[i] = residual + gate * normed, each step rounded (math/residual.h); the
 * kinds are the loop's invariants, the common all-same-type case its own loop. */
static void
residual_combine(const ckc_rms_gated_residual_params *p, const float *v, const float *g, float *res)
{
    const int64_t n = p->dim;
    const ckc_float_kind mid = p->mid_kind;
    const ckc_float_kind out = p->out_kind;
    int64_t i;
    if (mid == CKC_BF16 && out == CKC_BF16) {
        for (i = 0; i < n; i++) {
            res[i] = ckc_gated_residual_value(res[i], g[i], v[i], CKC_BF16, CKC_BF16);
        }
    } else if (mid == CKC_F32 && out == CKC_F32) {
        for (i = 0; i < n; i++) {
            res[i] = ckc_gated_residual_value(res[i], g[i], v[i], CKC_F32, CKC_F32);
        }
    } else {
        for (i = 0; i < n; i++) {
            res[i] = ckc_gated_residual_value(res[i], g[i], v[i], mid, out);
        }
    }
}

static void
residual_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const residual_job *job = (const residual_job *)ctx;
    const ckc_rms_gated_residual_params *p = job->p;
    const int64_t n = p->dim;
    float *v = ckc_scratch_row(&job->scratch, worker);
    float *w = v + n;
    float *g = w + n;
    float *res = g + n;
    int64_t r;
    ckc_row_load(p->weight, p->weight_kind, n, w);
    for (r = r0; r < r1; r++) {
        const int64_t gr = r / p->gate_div % p->gate_mod;
        const int64_t rr = r / p->res_div % p->res_mod;
        ckc_row_load((const char *)p->act + r * n * ckc_kind_size(p->act_kind), p->act_kind, n, v);
        rms_rope_normalize(v, w, cpu_rms_factor(v, n, p->eps), p->act_kind, n);
        ckc_row_load((const char *)p->gate + gr * n * ckc_kind_size(p->gate_kind), p->gate_kind, n, g);
        ckc_row_load((const char *)p->residual + rr * n * ckc_kind_size(p->res_kind), p->res_kind, n, res);
        residual_combine(p, v, g, res);
        ckc_row_store(res, p->out_kind, n, (char *)p->out + r * n * ckc_kind_size(p->out_kind));
    }
}

static ckc_status
cpu_rms_gated_residual(const ckc_rms_gated_residual_params *p, int nthreads, ckc_error *err)
{
    residual_job job;
    job.p = p;
    return ckc_parallel_rows(p->rows, p->dim, nthreads, 4 * p->dim, &job.scratch, residual_range, &job, err);
}
