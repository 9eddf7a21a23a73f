/* SPDX-License-Identifier: Apache-2.0 */
/* CPU kernels of rms_rope (rms_rope1, both layouts, a rotated prefix), included
 * by kernels_isa.h into each instruction set's build after rope_impl.h, whose
 * block rotations they reuse.  One pass per row: the row is loaded into float32
 * once, its rms factor summed in aten's order (rms_impl.h), each value
 * normalized and rounded to x's type, the prefix rotated (math/rope.h), and the
 * row stored once.  The row is loaded before it is stored, so out may be x. */
#include "math/rms_rope.h"

typedef struct {
    const ckc_rms_rope1_params *p;
    ckc_scratch scratch; /* per worker: the row, the scale, the output row (3 * row_len floats) */
} rms_rope_job;

/* v[i] = (v[i] * r) * w[i] rounded to kind: one loop per kind, so each vectorizes. */
static void
rms_rope_normalize(float *v, const float *w, float r, ckc_float_kind kind, int64_t n)
{
    int64_t i;
    if (kind == CKC_BF16) {
        for (i = 0; i < n; i++) {
            v[i] = ckc_rms_norm_value(v[i], r, w[i], CKC_BF16);
        }
    } else if (kind == CKC_F16) {
        for (i = 0; i < n; i++) {
            v[i] = ckc_rms_norm_value(v[i], r, w[i], CKC_F16);
        }
    } else {
        for (i = 0; i < n; i++) {
            v[i] = ckc_rms_norm_value(v[i], r, w[i], CKC_F32);
        }
    }
}

static void
rms_rope_row(const ckc_rms_rope1_params *p, int64_t r, const float *w, float *v, float *o)
{
    const ckc_float_kind kind = p->rope.kind;
    const int64_t es = ckc_kind_size(kind);
    const int64_t n = p->row_len;
    const int64_t half = p->rope.dim / 2; /* pairs in the rotated prefix */
    const float *f = ckc_rope_freq_row(&p->rope, r);
    ckc_row_load((const char *)p->rope.x + r * n * es, kind, n, v);
    rms_rope_normalize(v, w, cpu_rms_factor(v, n, p->eps), kind, n);
    if (p->rope.split_half) {
        rope_block_split(f, v, v + half, half, o, o + half);
    } else {
        rope_block_interleaved(f, v, half, o);
    }
    memcpy(o + 2 * half, v + 2 * half, (size_t)(n - 2 * half) * sizeof(float));
    ckc_row_store(o, kind, n, (char *)p->rope.out + r * n * es);
}

static void
rms_rope_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const rms_rope_job *job = (const rms_rope_job *)ctx;
    const ckc_rms_rope1_params *p = job->p;
    float *v = ckc_scratch_row(&job->scratch, worker);
    float *w = v + p->row_len;
    float *o = w + p->row_len;
    int64_t r;
    ckc_row_load(p->scale, p->scale_kind, p->row_len, w);
    for (r = r0; r < r1; r++) {
        rms_rope_row(p, r, w, v, o);
    }
}

static ckc_status
cpu_rms_rope1(const ckc_rms_rope1_params *p, int nthreads, ckc_error *err)
{
    rms_rope_job job;
    ckc_status status;
    job.p = p;
    status = ckc_parallel_rows(p->rope.rows, p->row_len, nthreads, 3 * p->row_len, &job.scratch, rms_rope_range,
                               &job, err);
    return status;
}
