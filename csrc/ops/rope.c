/* SPDX-License-Identifier: Apache-2.0 */
/* Host logic of the RoPE family: one C op, apply_rope1, serves comfy_kitchen's
 * eight apply_rope ops (comfy_kitchen_c/rope.py): one tensor per call (the
 * paired ops call it twice), the split-half layout by a flag, the in-place ops
 * by passing x itself as out. */
#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "op.h"

#define F32 CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32)

/* ---- apply_rope1(x, freqs_cis, out; split_half) ---- */

enum { AR_X, AR_FREQS, AR_OUT };

/* freqs_cis: x's rank + 2 dims (Python prepends the 1s eager's broadcast
 * implies), [..., dim/2, 2, 2], each leading dim 1 or x's. */
static ckc_status
check_freqs(const ckc_tensor *x, const ckc_tensor *f, ckc_error *err)
{
    const int n = (int)x->ndim - 1;
    int d;
    if (f->ndim != x->ndim + 2 || f->shape[n] != x->shape[n] / 2 || f->shape[n + 1] != 2 || f->shape[n + 2] != 2) {
        return CKC_FAIL(err, CKC_ERR_VALUE,
                        "argument 'freqs_cis': expected %d dimensions ending in [%lld, 2, 2] for x's last "
                        "dimension %lld, got %d", (int)x->ndim + 2, (long long)(x->shape[n] / 2),
                        (long long)x->shape[n], (int)f->ndim);
    }
    for (d = 0; d < n; d++) {
        if (f->shape[d] != 1 && f->shape[d] != x->shape[d]) {
            return CKC_FAIL(err, CKC_ERR_VALUE,
                            "argument 'freqs_cis': dimension %d is %lld, neither 1 nor x's %lld", d,
                            (long long)f->shape[d], (long long)x->shape[d]);
        }
    }
    return CKC_OK;
}

/* x's leading dims into p->lead, those of size 1 dropped and neighbours with the
 * same broadcast pattern merged (fewer divisions per row in the kernels). */
static void
fill_lead(const ckc_tensor *x, const ckc_tensor *f, ckc_apply_rope1_params *p)
{
    int64_t stride = 1;
    int d;
    int prev_bcast = -1;
    p->lead_ndim = 0;
    for (d = (int)x->ndim - 2; d >= 0; d--) {
        const int bcast = f->shape[d] == 1;
        if (x->shape[d] == 1) {
            continue;
        }
        if (bcast == prev_bcast) {
            p->lead[p->lead_ndim - 1] *= x->shape[d];
        } else {
            p->lead[p->lead_ndim] = x->shape[d];
            p->freq_stride[p->lead_ndim] = bcast ? 0 : stride;
            p->lead_ndim++;
        }
        if (!bcast) {
            stride *= f->shape[d];
        }
        prev_bcast = bcast;
    }
    if (p->lead_ndim == 0) {
        p->lead[0] = 1;
        p->freq_stride[0] = 0;
        p->lead_ndim = 1;
    }
    /* Collected last dim first: reverse into last-fastest order. */
    for (d = 0; d < p->lead_ndim / 2; d++) {
        const int e = p->lead_ndim - 1 - d;
        int64_t t = p->lead[d];
        p->lead[d] = p->lead[e];
        p->lead[e] = t;
        t = p->freq_stride[d];
        p->freq_stride[d] = p->freq_stride[e];
        p->freq_stride[e] = t;
    }
}

static ckc_status
prepare_rope(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *x = &a->t[AR_X];
    const ckc_tensor *f = &a->t[AR_FREQS];
    ckc_apply_rope1_params *p = &params->apply_rope1;
    int64_t rows;
    int64_t dim;
    if (x->ndim < 1 || x->ndim > CKC_ROPE_MAX_LEAD + 1 || x->ndim + 2 > CKC_MAX_DIMS) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'x': expected 1 to %d dimensions, got %d",
                        CKC_MAX_DIMS - 2, (int)x->ndim);
    }
    CKC_TRY(ckc_check_rows(a, AR_X, &rows, &dim, err));
    if (dim % 2 != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'x': last dimension %lld is odd (RoPE rotates pairs)",
                        (long long)dim);
    }
    CKC_TRY(check_freqs(x, f, err));
    CKC_TRY(ckc_check_same_dtype(a, AR_OUT, AR_X, err));
    CKC_TRY(ckc_check_shape(a, AR_OUT, (int)x->ndim, x->shape, err));
    p->x = x->data;
    p->out = a->t[AR_OUT].data;
    p->freqs = (const float *)f->data;
    p->kind = ckc_float_kind_of(x->dtype);
    p->split_half = a->i[0] != 0;
    p->rows = rows;
    p->dim = dim;
    fill_lead(x, f, p);
    return CKC_OK;
}

const ckc_op_spec ckc_op_apply_rope1 = {
    .sig = {"apply_rope1", 3,
            {{"x", CKC_FLOATS, 0},
             {"freqs_cis", F32, 0},
             {"out", CKC_FLOATS, CKC_ARG_OUTPUT}},
            1, {"split_half"}},
    .doc = "apply_rope1(op, x, freqs_cis, out, split_half, stream, nthreads)\n--\n\n"
           "x[..., D] rotated pair by pair by freqs_cis[..., D/2, 2, 2] (float32, leading dims 1\n"
           "or x's) into out (x's shape and dtype; may be x itself), as comfy_kitchen's eager\n"
           "apply_rope1 rounds it: pairs (2k, 2k+1), or (k, k + D/2) with split_half.",
    .prepare = prepare_rope,
    .cpu = ckc_cpu_entry_apply_rope1,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_apply_rope1),
};
