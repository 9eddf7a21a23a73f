/* SPDX-License-Identifier: Apache-2.0 */
/* Host logic of the W4A8 / W6A8 family: the one C op that decodes the packed
 * weight codes (canonical rows, or the MMA records of w4a8_packed_linear) to the
 * int8 grid, or on to the float weight, and the check of its arguments into its
 * parameter block.  The rotation of dequantize_w4a8_int8_weight and the GEMM of
 * the linears are the int8 family's C ops, called by comfy_kitchen_c/w4a8.py. */
#include <string.h>

#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "op.h"
#include "w4a8_source.h"

#define U8 CKC_DTYPE_BIT(CKC_DTYPE_UINT8)
#define I8 CKC_DTYPE_BIT(CKC_DTYPE_INT8)
#define F32 CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32)

enum { W_Q, W_SREL, W_CODEBOOK, W_SCHANNEL, W_CORRECTION, W_OUT };
enum { I_GROUP, I_BITS, I_PACKED, I_E4M3 };

/* Where a spec holds the codes: its tensor indices of qdata, s_rel and the
 * codebook, the index of the first of its four ints (group_size, bits,
 * packed, s_e4m3), and the tensor whose shape gives K and N (named in the
 * errors about them).  The decoder's (below) and w4a8_linear's (linear.c). */
typedef struct {
    int q, s_rel, codebook, ints;
    const char *shape_from;
} w4a8_where;

static ckc_status
check_flags(const ckc_op_args *a, const w4a8_where *w, ckc_error *err)
{
    if (a->i[w->ints + I_BITS] != 4 && a->i[w->ints + I_BITS] != 6) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'bits': %lld is not 4 or 6", (long long)a->i[w->ints + I_BITS]);
    }
    for (int i = I_PACKED; i <= I_E4M3; i++) {
        if (a->i[w->ints + i] != 0 && a->i[w->ints + i] != 1) {
            return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': %lld is not 0 or 1", a->sig->ints[w->ints + i],
                            (long long)a->i[w->ints + i]);
        }
    }
    return CKC_OK;
}

/* [n, k]: k a multiple of 16 (32 at 6 bits, or packed) split in whole groups of
 * eager's sizes: at least 4, dividing 16 or a multiple of 16 (of 16 at 6 bits).
 * w4a8_linear's GEMV relies on it: a scale per 4 or 8 values, or one per 16. */
static ckc_status
check_geometry(const ckc_op_args *a, const w4a8_where *w, int64_t n, int64_t k, ckc_error *err)
{
    const int64_t group = a->i[w->ints + I_GROUP];
    const int six = a->i[w->ints + I_BITS] == 6;
    const int64_t align = six || a->i[w->ints + I_PACKED] ? 32 : 16;
    if (n < 0 || k <= 0 || k % align != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': K=%lld is not a multiple of %lld (the codes' "
                        "layout)", w->shape_from, (long long)k, (long long)align);
    }
    if (group < 4 || (16 % group != 0 && group % 16 != 0) || (six && group % 16 != 0)) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'group_size': %lld must be >= 4 and divide 16 or be a "
                        "multiple of 16 (of 16 at 6 bits)", (long long)group);
    }
    if (k % group != 0 || (a->i[w->ints + I_PACKED] && group != 16)) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'group_size': %lld does not split K=%lld%s", (long long)group,
                        (long long)k, a->i[w->ints + I_PACKED] ? " (packed records: 16)" : "");
    }
    return CKC_OK;
}

/* The codes: canonical [n, k * bits / 8] with s_rel [n, k / group], or n / 16 x k / 32 records. */
static ckc_status
check_codes(const ckc_op_args *a, const w4a8_where *w, int64_t n, int64_t k, ckc_error *err)
{
    const int64_t bits = a->i[w->ints + I_BITS];
    if (a->i[w->ints + I_PACKED]) {
        if (n % 16 != 0) {
            return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': packed records need N %% 16 == 0, got %lld",
                            w->shape_from, (long long)n);
        }
        return ckc_check_numel(a, w->q, (n / 16) * (k / 32) * (512 * bits / 8 + 32), err);
    }
    const int64_t shape[2] = {n, k * bits / 8};
    const int64_t scales[2] = {n, k / a->i[w->ints + I_GROUP]};
    const unsigned want = a->i[w->ints + I_E4M3] ? U8 : F32;
    CKC_TRY(ckc_check_shape(a, w->q, 2, shape, err));
    if (!a->present[w->s_rel] || !(CKC_DTYPE_BIT(a->t[w->s_rel].dtype) & want)) {
        return CKC_FAIL(err, CKC_ERR_TYPE, "argument 's_rel': expected %s",
                        a->i[w->ints + I_E4M3] ? "uint8 (e4m3 bytes)" : "float32");
    }
    return ckc_check_shape(a, w->s_rel, 2, scales, err);
}

/* The codes of an [n, k] weight checked into d (its output and float terms left
 * to the caller): codes, scales and the codebook (16 levels, 4 bits only). */
static ckc_status
w4a8_source(const ckc_op_args *a, const w4a8_where *w, int64_t n, int64_t k, ckc_dequantize_w4a8_int8_weight_params *d,
            ckc_error *err)
{
    CKC_TRY(check_flags(a, w, err));
    CKC_TRY(check_geometry(a, w, n, k, err));
    CKC_TRY(check_codes(a, w, n, k, err));
    if (a->present[w->codebook]) {
        if (a->i[w->ints + I_BITS] != 4) {
            return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'codebook': 6-bit codes are uniform");
        }
        CKC_TRY(ckc_check_numel(a, w->codebook, 16, err));
    }
    memset(d, 0, sizeof *d);
    d->q = (const uint8_t *)a->t[w->q].data;
    d->rows = n;
    d->k = k;
    d->bits = (int)a->i[w->ints + I_BITS];
    d->packed = (int)a->i[w->ints + I_PACKED];
    d->group = a->i[w->ints + I_GROUP];
    d->s_rel = a->present[w->s_rel] ? a->t[w->s_rel].data : NULL;
    d->s_e4m3 = (int)a->i[w->ints + I_E4M3];
    d->codebook = a->present[w->codebook] ? (const float *)a->t[w->codebook].data : NULL;
    d->out_int8 = 1;
    return CKC_OK;
}

ckc_status
ckc_w4a8_source_of(const ckc_op_args *a, int q_idx, int s_rel_idx, int codebook_idx, int first_int,
                   const char *shape_from, int64_t n, int64_t k, ckc_dequantize_w4a8_int8_weight_params *d,
                   ckc_error *err)
{
    const w4a8_where w = {q_idx, s_rel_idx, codebook_idx, first_int, shape_from};
    return w4a8_source(a, &w, n, k, d, err);
}

/* The float output's s_channel [n] and correction [k / group, n]. */
static ckc_status
check_vectors(const ckc_op_args *a, int64_t n, int64_t k, ckc_error *err)
{
    if (!a->present[W_SCHANNEL]) {
        return CKC_FAIL(err, CKC_ERR_TYPE, "argument 's_channel' is required for a float output");
    }
    CKC_TRY(ckc_check_numel(a, W_SCHANNEL, n, err));
    return a->present[W_CORRECTION] ? ckc_check_numel(a, W_CORRECTION, (k / a->i[I_GROUP]) * n, err) : CKC_OK;
}

static ckc_status
prepare_w4a8_dequant(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    static const w4a8_where here = {W_Q, W_SREL, W_CODEBOOK, I_GROUP, "out"};
    const ckc_tensor *out = &a->t[W_OUT];
    ckc_dequantize_w4a8_int8_weight_params *p = &params->dequantize_w4a8_int8_weight;
    const int out_int8 = out->dtype == CKC_DTYPE_INT8;
    const int64_t n = out->ndim == 2 ? out->shape[0] : 0;
    const int64_t k = out->ndim == 2 ? out->shape[1] : 0;
    if (out->ndim != 2) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'out': expected [N, K], got %d dimensions", (int)out->ndim);
    }
    CKC_TRY(ckc_check_extent(a, W_OUT, n, k, err));
    CKC_TRY(w4a8_source(a, &here, n, k, p, err));
    if (!out_int8) {
        CKC_TRY(check_vectors(a, n, k, err));
    }
    p->s_channel = !out_int8 ? (const float *)a->t[W_SCHANNEL].data : NULL;
    p->correction = !out_int8 && a->present[W_CORRECTION] ? a->t[W_CORRECTION].data : NULL;
    p->corr_kind = p->correction != NULL ? ckc_float_kind_of(a->t[W_CORRECTION].dtype) : CKC_F32;
    p->out = out->data;
    p->out_int8 = out_int8;
    p->out_kind = ckc_float_kind_of(out->dtype);
    return CKC_OK;
}

const ckc_op_spec ckc_op_dequantize_w4a8_int8_weight = {
    .sig = {"dequantize_w4a8_int8_weight", 6,
            {{"qdata", I8 | U8, 0},
             {"s_rel", F32 | U8, CKC_ARG_OPTIONAL},
             {"codebook", F32, CKC_ARG_OPTIONAL},
             {"s_channel", F32, CKC_ARG_OPTIONAL},
             {"correction", CKC_FLOATS, CKC_ARG_OPTIONAL},
             {"out", CKC_FLOATS | I8, CKC_ARG_OUTPUT}},
            4, {"group_size", "bits", "packed", "s_e4m3"}},
    .doc = "dequantize_w4a8_int8_weight(op, qdata, s_rel, codebook, s_channel, correction, out, group_size,\n"
           "bits, packed, s_e4m3, stream, nthreads)\n--\n\n"
           "The W4A8/W6A8 codes qdata (canonical [N, K*bits/8] with s_rel [N, K/group_size], float32 or\n"
           "e4m3 bytes when s_e4m3=1; or, packed=1, the MMA records with their own scales) decoded to\n"
           "round(clamp(level * s_rel)) (level: codebook[code], or code - 2^(bits-1)) into out [N, K]:\n"
           "as int8 when out is int8, else times s_channel (+ correction [K/group_size, N]) in out's dtype.",
    .prepare = prepare_w4a8_dequant,
    .cpu = ckc_cpu_entry_dequantize_w4a8_int8_weight,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_dequantize_w4a8_int8_weight),
};
