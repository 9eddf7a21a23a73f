/* SPDX-License-Identifier: Apache-2.0 */
/* CPU kernels of RoPE (apply_rope1, both layouts), included by kernels_isa.h
 * into each instruction set's build.  Rows are split among the threads; a row is
 * done in blocks of CKC_ROPE_BLOCK pairs: loaded into float32 (the stack arrays
 * keep the arithmetic loops free of element-type branches, so they vectorize),
 * rotated (math/rope.h), stored rounded to x's type.  A block's inputs are all
 * loaded before its outputs are stored, so out may be x itself. */
#include "math/rope.h"

#define CKC_ROPE_BLOCK 64

/* Interleaved: pair k is (x[2k], x[2k+1]); f holds [k][j][2] for output j. */
static void
rope_block_interleaved(const float *f, const float *v, int64_t n, float *o)
{
    int64_t m;
    for (m = 0; m < 2 * n; m++) {
        o[m] = ckc_rope_pair(f[2 * m], f[2 * m + 1], v[m & ~(int64_t)1], v[m | 1]);
    }
}

/* Split half: pair k is (lo[k], hi[k]); f holds [k][2][2]. */
static void
rope_block_split(const float *f, const float *lo, const float *hi, int64_t n, float *olo, float *ohi)
{
    int64_t k;
    for (k = 0; k < n; k++) {
        olo[k] = ckc_rope_pair(f[4 * k], f[4 * k + 1], lo[k], hi[k]);
        ohi[k] = ckc_rope_pair(f[4 * k + 3], f[4 * k + 2], hi[k], lo[k]);
    }
}

static void
rope_row(const ckc_apply_rope1_params *p, int64_t r)
{
    const int64_t es = ckc_kind_size(p->kind);
    const int64_t half = p->dim / 2;
    const char *x = (const char *)p->x + r * p->dim * es;
    char *out = (char *)p->out + r * p->dim * es;
    const float *f = ckc_rope_freq_row(p, r);
    float v[2 * CKC_ROPE_BLOCK];
    float o[2 * CKC_ROPE_BLOCK];
    int64_t k0;
    for (k0 = 0; k0 < half; k0 += CKC_ROPE_BLOCK) {
        const int64_t n = half - k0 < CKC_ROPE_BLOCK ? half - k0 : CKC_ROPE_BLOCK;
        if (p->split_half) {
            ckc_row_load(x + k0 * es, p->kind, n, v);
            ckc_row_load(x + (half + k0) * es, p->kind, n, v + CKC_ROPE_BLOCK);
            rope_block_split(f + 4 * k0, v, v + CKC_ROPE_BLOCK, n, o, o + CKC_ROPE_BLOCK);
            ckc_row_store(o, p->kind, n, out + k0 * es);
            ckc_row_store(o + CKC_ROPE_BLOCK, p->kind, n, out + (half + k0) * es);
        } else {
            ckc_row_load(x + 2 * k0 * es, p->kind, 2 * n, v);
            rope_block_interleaved(f + 4 * k0, v, n, o);
            ckc_row_store(o, p->kind, 2 * n, out + 2 * k0 * es);
        }
    }
}

static void
rope_range(void *ctx, int64_t r0, int64_t r1, int worker)
{
    const ckc_apply_rope1_params *p = (const ckc_apply_rope1_params *)ctx;
    int64_t r;
    (void)worker;
    for (r = r0; r < r1; r++) {
        rope_row(p, r);
    }
}

static ckc_status
cpu_apply_rope1(const ckc_apply_rope1_params *p, int nthreads, ckc_error *err)
{
    /* About 32K elements per range at least: below that a thread's start costs more than it saves. */
    const int64_t grain = p->dim >= (1 << 15) ? 1 : (1 << 15) / p->dim;
    (void)err;
    ckc_parallel_for(p->rows, grain, nthreads, rope_range, (void *)p);
    return CKC_OK;
}
