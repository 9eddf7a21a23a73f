/* SPDX-License-Identifier: Apache-2.0 */
/* Host logic of the W4A8 / W6A8 family: the one C op that decodes the packed
 * weight codes (canonical rows, or the MMA records of w4a8_packed_linear) to the
 * int8 grid, or on to the float weight, and the check of its arguments into its
 * parameter block.  The rotation of dequantize_w4a8_int8_weight and the GEMM of
 * the linears are the int8 family's C ops, called by comfy_kitchen_c/w4a8.py. */
#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "op.h"

#define U8 CKC_DTYPE_BIT(CKC_DTYPE_UINT8)
#define I8 CKC_DTYPE_BIT(CKC_DTYPE_INT8)
#define F32 CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32)

enum { W_Q, W_SREL, W_CODEBOOK, W_SCHANNEL, W_CORRECTION, W_OUT };
enum { I_GROUP, I_BITS, I_PACKED, I_E4M3 };

static ckc_status
check_flags(const ckc_op_args *a, ckc_error *err)
{
    if (a->i[I_BITS] != 4 && a->i[I_BITS] != 6) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'bits': %lld is not 4 or 6", (long long)a->i[I_BITS]);
    }
    for (int i = I_PACKED; i <= I_E4M3; i++) {
        if (a->i[i] != 0 && a->i[i] != 1) {
            return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': %lld is not 0 or 1", a->sig->ints[i],
                            (long long)a->i[i]);
        }
    }
    return CKC_OK;
}

/* out [n, k]: k a multiple of 16 (32 at 6 bits, or packed) split in whole groups. */
static ckc_status
check_geometry(const ckc_op_args *a, int64_t n, int64_t k, ckc_error *err)
{
    const int64_t group = a->i[I_GROUP];
    const int64_t align = a->i[I_BITS] == 6 || a->i[I_PACKED] ? 32 : 16;
    CKC_TRY(ckc_check_extent(a, W_OUT, n, k, err));
    if (a->t[W_OUT].ndim != 2 || k % align != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'out': expected [N, K] with K a multiple of %lld",
                        (long long)align);
    }
    if (group < 1 || k % group != 0 || (a->i[I_PACKED] && group != 16)) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'group_size': %lld does not split K=%lld%s", (long long)group,
                        (long long)k, a->i[I_PACKED] ? " (packed records: 16)" : "");
    }
    return CKC_OK;
}

/* The codes: canonical [n, k * bits / 8] with s_rel [n, k / group], or n / 16 x k / 32 records. */
static ckc_status
check_codes(const ckc_op_args *a, int64_t n, int64_t k, ckc_error *err)
{
    const int64_t bits = a->i[I_BITS];
    if (a->i[I_PACKED]) {
        if (n % 16 != 0) {
            return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'out': packed records need N %% 16 == 0, got %lld",
                            (long long)n);
        }
        return ckc_check_numel(a, W_Q, (n / 16) * (k / 32) * (512 * bits / 8 + 32), err);
    }
    const int64_t shape[2] = {n, k * bits / 8};
    const int64_t scales[2] = {n, k / a->i[I_GROUP]};
    const unsigned want = a->i[I_E4M3] ? U8 : F32;
    CKC_TRY(ckc_check_shape(a, W_Q, 2, shape, err));
    if (!a->present[W_SREL] || !(CKC_DTYPE_BIT(a->t[W_SREL].dtype) & want)) {
        return CKC_FAIL(err, CKC_ERR_TYPE, "argument 's_rel': expected %s", a->i[I_E4M3] ? "uint8 (e4m3 bytes)"
                                                                                         : "float32");
    }
    return ckc_check_shape(a, W_SREL, 2, scales, err);
}

/* The float output's s_channel [n] and correction [k / group, n]; codebook [16] at 4 bits. */
static ckc_status
check_vectors(const ckc_op_args *a, int64_t n, int64_t k, int out_int8, ckc_error *err)
{
    if (a->present[W_CODEBOOK]) {
        if (a->i[I_BITS] != 4) {
            return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'codebook': 6-bit codes are uniform");
        }
        CKC_TRY(ckc_check_numel(a, W_CODEBOOK, 16, err));
    }
    if (out_int8) {
        return CKC_OK;
    }
    if (!a->present[W_SCHANNEL]) {
        return CKC_FAIL(err, CKC_ERR_TYPE, "argument 's_channel' is required for a float output");
    }
    CKC_TRY(ckc_check_numel(a, W_SCHANNEL, n, err));
    return a->present[W_CORRECTION] ? ckc_check_numel(a, W_CORRECTION, (k / a->i[I_GROUP]) * n, err) : CKC_OK;
}

static ckc_status
prepare_w4a8_dequant(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *out = &a->t[W_OUT];
    ckc_dequantize_w4a8_int8_weight_params *p = &params->dequantize_w4a8_int8_weight;
    const int out_int8 = out->dtype == CKC_DTYPE_INT8;
    const int64_t n = out->ndim == 2 ? out->shape[0] : 0;
    const int64_t k = out->ndim == 2 ? out->shape[1] : 0;
    CKC_TRY(check_flags(a, err));
    CKC_TRY(check_geometry(a, n, k, err));
    CKC_TRY(check_codes(a, n, k, err));
    CKC_TRY(check_vectors(a, n, k, out_int8, err));
    p->q = (const uint8_t *)a->t[W_Q].data;
    p->rows = n;
    p->k = k;
    p->bits = (int)a->i[I_BITS];
    p->packed = (int)a->i[I_PACKED];
    p->group = a->i[I_GROUP];
    p->s_rel = a->present[W_SREL] ? a->t[W_SREL].data : NULL;
    p->s_e4m3 = (int)a->i[I_E4M3];
    p->codebook = a->present[W_CODEBOOK] ? (const float *)a->t[W_CODEBOOK].data : NULL;
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
