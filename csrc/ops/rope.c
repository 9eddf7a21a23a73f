/* SPDX-License-Identifier: Apache-2.0 */
/* Host logic of the RoPE family: one C op, apply_rope1, serves comfy_kitchen's
 * eight apply_rope ops (comfy_kitchen_c/rope.py): one tensor per call (the
 * paired ops call it twice), the split-half layout by a flag, the in-place ops
 * by passing x itself as out.  Another, rms_rope1, serves the eight rms_rope ops
 * (comfy_kitchen_c/rms_rope.py) the same way, rms_norm fused before the rotation. */
#include <string.h>

#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "op.h"

#define F32 CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32)

/* ---- apply_rope1(x, freqs_cis, out; split_half) ---- */

enum { AR_X, AR_FREQS, AR_OUT };

/* freqs_cis: x's rank + 2 dims (Python prepends the 1s eager's broadcast
 * implies), [..., half, 2, 2] for `half` rotated pairs, each leading dim 1 or x's. */
static ckc_status
check_freqs(const ckc_tensor *x, const ckc_tensor *f, int64_t half, ckc_error *err)
{
    const int n = (int)x->ndim - 1;
    int d;
    if (f->ndim != x->ndim + 2 || f->shape[n] != half || f->shape[n + 1] != 2 || f->shape[n + 2] != 2) {
        return CKC_FAIL(err, CKC_ERR_VALUE,
                        "argument 'freqs_cis': expected %d dimensions ending in [%lld, 2, 2] for %lld rotated "
                        "values of x, got %d", (int)x->ndim + 2, (long long)half, (long long)(2 * half),
                        (int)f->ndim);
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

/* The RoPE block of x (index xi), freqs_cis (fi) and out (oi) for a rotated
 * prefix of `rot` values (0: the whole row): shapes checked, p filled. */
static ckc_status
fill_rope(const ckc_op_args *a, int xi, int fi, int oi, int64_t rot, int split_half, ckc_apply_rope1_params *p,
          ckc_error *err)
{
    const ckc_tensor *x = &a->t[xi];
    const ckc_tensor *f = &a->t[fi];
    int64_t rows;
    int64_t dim;
    if (x->ndim < 1 || x->ndim > CKC_ROPE_MAX_LEAD + 1 || x->ndim + 2 > CKC_MAX_DIMS) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'x': expected 1 to %d dimensions, got %d",
                        CKC_MAX_DIMS - 2, (int)x->ndim);
    }
    CKC_TRY(ckc_check_rows(a, xi, &rows, &dim, err));
    if (rot == 0) {
        rot = dim;
    }
    if (rot < 0 || rot > dim || rot % 2 != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'x': %lld rotated values of a last dimension of %lld (RoPE "
                        "rotates pairs)", (long long)rot, (long long)dim);
    }
    CKC_TRY(check_freqs(x, f, rot / 2, err));
    CKC_TRY(ckc_check_same_dtype(a, oi, xi, err));
    CKC_TRY(ckc_check_shape(a, oi, (int)x->ndim, x->shape, err));
    p->x = x->data;
    p->out = a->t[oi].data;
    p->freqs = (const float *)f->data;
    p->kind = ckc_float_kind_of(x->dtype);
    p->split_half = split_half != 0;
    p->rows = rows;
    p->dim = rot;
    fill_lead(x, f, p);
    return CKC_OK;
}

static ckc_status
prepare_rope(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    return fill_rope(a, AR_X, AR_FREQS, AR_OUT, 0, a->i[0] != 0, &params->apply_rope1, err);
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

/* ---- rms_rope1(x, freqs_cis, scale, out; split_half, rot, eps_bits) ---- */

enum { RR_X, RR_FREQS, RR_SCALE, RR_OUT };

static ckc_status
prepare_rms_rope(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    ckc_rms_rope1_params *p = &params->rms_rope1;
    const ckc_tensor *x = &a->t[RR_X];
    const uint32_t eps_bits = (uint32_t)a->i[2];
    if ((a->i[2] >> 32) != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'eps_bits': expected the 32 bits of a float32, got %lld",
                        (long long)a->i[2]);
    }
    CKC_TRY(fill_rope(a, RR_X, RR_FREQS, RR_OUT, a->i[1], (int)a->i[0], &p->rope, err));
    p->row_len = x->shape[x->ndim - 1];
    CKC_TRY(ckc_check_shape(a, RR_SCALE, 1, &p->row_len, err));
    p->scale = a->t[RR_SCALE].data;
    p->scale_kind = ckc_float_kind_of(a->t[RR_SCALE].dtype);
    memcpy(&p->eps, &eps_bits, sizeof p->eps);
    return CKC_OK;
}

const ckc_op_spec ckc_op_rms_rope1 = {
    .sig = {"rms_rope1", 4,
            {{"x", CKC_FLOATS, 0},
             {"freqs_cis", F32, 0},
             {"scale", CKC_FLOATS, 0},
             {"out", CKC_FLOATS, CKC_ARG_OUTPUT}},
            3, {"split_half", "rot", "eps_bits"}},
    .doc = "rms_rope1(op, x, freqs_cis, scale, out, split_half, rot, eps_bits, stream, nthreads)\n--\n\n"
           "rms_norm(x, (D,), scale, eps) then RoPE of its first `rot` values (0: all D) by\n"
           "freqs_cis[..., rot/2, 2, 2] (float32), into out (x's shape and dtype; may be x itself), as\n"
           "comfy_kitchen's eager _rms_rope1 rounds it; eps_bits: eps's float32 bits.",
    .prepare = prepare_rms_rope,
    .cpu = ckc_cpu_entry_rms_rope1,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_rms_rope1),
};
