/* SPDX-License-Identifier: Apache-2.0 */
/* Host logic of the W4A8 / W6A8 quantizer's C op: the check of a rotated weight,
 * its noise, level table, scratch and outputs into the parameter block.  The
 * rotation, the codebook's choice and the noise are comfy_kitchen_c/w4a8_quant.py's
 * (torch's sampling, as eager's); this op does every per-value step
 * (math/w4a8_quant.h). */
#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "math/w4a8_quant.h"
#include "op.h"

#define U8 CKC_DTYPE_BIT(CKC_DTYPE_UINT8)
#define I8 CKC_DTYPE_BIT(CKC_DTYPE_INT8)
#define F32 CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32)

enum { Q_W, Q_NOISE, Q_TABLE, Q_SCRATCH, Q_Q, Q_SREL, Q_SCHANNEL, Q_CORRECTION };
enum { I_GROUP, I_BITS, I_MODE, I_SEARCH, I_E4M3 };

static ckc_status
check_ints(const ckc_op_args *a, ckc_error *err)
{
    const int64_t bits = a->i[I_BITS], mode = a->i[I_MODE];
    if (bits != 4 && bits != 6) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'bits': %lld is not 4 or 6", (long long)bits);
    }
    if (mode < CKC_W4A8Q_ALS || mode > CKC_W4A8Q_ASYM || (bits == 6 && mode != CKC_W4A8Q_ALS)) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'mode': %lld is not a form of %lld-bit codes (6 bits: "
                        "symmetric and uniform only)", (long long)mode, (long long)bits);
    }
    for (int i = I_SEARCH; i <= I_E4M3; i++) {
        if (a->i[i] != 0 && a->i[i] != 1) {
            return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': %lld is not 0 or 1", a->sig->ints[i],
                            (long long)a->i[i]);
        }
    }
    return CKC_OK;
}

/* eager's validate_w4a8_weight_shape: K % 16, whole groups of at least 4 that
 * divide 16 or are multiples of 16; at 6 bits K % 32 and groups of 16s. */
static ckc_status
check_layout(const ckc_op_args *a, int64_t k, ckc_error *err)
{
    const int64_t group = a->i[I_GROUP];
    const int six = a->i[I_BITS] == 6;
    if (k <= 0 || k % (six ? 32 : 16) != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'weight': K=%lld is not a multiple of %d", (long long)k,
                        six ? 32 : 16);
    }
    if (group < 4 || (16 % group != 0 && group % 16 != 0) || (six && group % 16 != 0) || k % group != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'group_size': %lld must be >= 4, divide 16 or be a multiple "
                        "of 16 (of 16 at 6 bits), and split K=%lld", (long long)group, (long long)k);
    }
    return CKC_OK;
}

/* The level table: the codebook for ALS at 4 bits, none otherwise; the
 * correction for ASYM only. */
static ckc_status
check_terms(const ckc_op_args *a, int64_t n, int64_t k, ckc_error *err)
{
    const int mode = (int)a->i[I_MODE];
    const int want_table = mode == CKC_W4A8Q_ALS && a->i[I_BITS] == 4;
    if (a->present[Q_TABLE] != want_table) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'table': %s", want_table ? "the 4-bit codebook form needs "
                        "its 16 levels" : "only the 4-bit codebook form takes a table");
    }
    if (want_table) {
        CKC_TRY(ckc_check_numel(a, Q_TABLE, 16, err));
    }
    if (a->present[Q_CORRECTION] != (mode == CKC_W4A8Q_ASYM)) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'correction': %s", mode == CKC_W4A8Q_ASYM ?
                        "the asymmetric form writes one" : "only the asymmetric form writes one");
    }
    if (a->present[Q_NOISE]) {
        CKC_TRY(ckc_check_numel(a, Q_NOISE, n * k, err));
    }
    return a->present[Q_CORRECTION] ? ckc_check_numel(a, Q_CORRECTION, (k / a->i[I_GROUP]) * n, err) : CKC_OK;
}

static ckc_status
check_outputs(const ckc_op_args *a, int64_t n, int64_t k, ckc_error *err)
{
    const int64_t groups = k / a->i[I_GROUP];
    const int64_t q_shape[2] = {n, k * a->i[I_BITS] / 8};
    const int64_t s_shape[2] = {n, groups};
    const unsigned want = a->i[I_E4M3] ? U8 : F32;
    CKC_TRY(ckc_check_numel(a, Q_SCRATCH, 2 * n * groups, err));
    CKC_TRY(ckc_check_shape(a, Q_Q, 2, q_shape, err));
    if (!(CKC_DTYPE_BIT(a->t[Q_SREL].dtype) & want)) {
        return CKC_FAIL(err, CKC_ERR_TYPE, "argument 's_rel': expected %s", a->i[I_E4M3] ? "uint8 (e4m3 bytes)"
                        : "float32");
    }
    CKC_TRY(ckc_check_shape(a, Q_SREL, 2, s_shape, err));
    return ckc_check_numel(a, Q_SCHANNEL, n, err);
}

static ckc_status
prepare_w4a8_quant(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    ckc_quantize_w4a8_int8_weight_params *p = &params->quantize_w4a8_int8_weight;
    const ckc_tensor *w = &a->t[Q_W];
    const int64_t n = w->ndim == 2 ? w->shape[0] : 0, k = w->ndim == 2 ? w->shape[1] : 0;
    if (w->ndim != 2) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'weight': expected [N, K], got %d dimensions", (int)w->ndim);
    }
    CKC_TRY(ckc_check_extent(a, Q_W, n, k, err));
    CKC_TRY(check_ints(a, err));
    CKC_TRY(check_layout(a, k, err));
    CKC_TRY(check_terms(a, n, k, err));
    CKC_TRY(check_outputs(a, n, k, err));
    p->w = w->data;
    p->kind = ckc_float_kind_of(w->dtype);
    p->noise = a->present[Q_NOISE] ? (const float *)a->t[Q_NOISE].data : NULL;
    p->table = a->present[Q_TABLE] ? (const float *)a->t[Q_TABLE].data : NULL;
    p->rows = n;
    p->k = k;
    p->group = a->i[I_GROUP];
    p->bits = (int)a->i[I_BITS];
    p->mode = (int)a->i[I_MODE];
    p->search = p->bits == 6 && a->i[I_SEARCH];
    p->s_e4m3 = (int)a->i[I_E4M3];
    p->scale = (float *)a->t[Q_SCRATCH].data;
    p->shifted = p->scale + n * (k / p->group);
    p->q = (uint8_t *)a->t[Q_Q].data;
    p->s_rel = a->t[Q_SREL].data;
    p->s_channel = (float *)a->t[Q_SCHANNEL].data;
    p->correction = a->present[Q_CORRECTION] ? a->t[Q_CORRECTION].data : NULL;
    p->corr_kind = p->correction != NULL ? ckc_float_kind_of(a->t[Q_CORRECTION].dtype) : CKC_F32;
    return CKC_OK;
}

const ckc_op_spec ckc_op_quantize_w4a8_int8_weight = {
    .sig = {"quantize_w4a8_int8_weight", 8,
            {{"weight", CKC_FLOATS, 0},
             {"noise", F32, CKC_ARG_OPTIONAL},
             {"table", F32, CKC_ARG_OPTIONAL},
             {"scratch", F32, CKC_ARG_OUTPUT},
             {"qdata", I8 | U8, CKC_ARG_OUTPUT},
             {"s_rel", F32 | U8, CKC_ARG_OUTPUT},
             {"s_channel", F32, CKC_ARG_OUTPUT},
             {"correction", CKC_FLOATS, CKC_ARG_OPTIONAL | CKC_ARG_OUTPUT}},
            5, {"group_size", "bits", "mode", "scale_search", "s_e4m3"}},
    .doc = "quantize_w4a8_int8_weight(op, weight, noise, table, scratch, qdata, s_rel, s_channel, correction,\n"
           "group_size, bits, mode, scale_search, s_e4m3, stream, nthreads)\n--\n\n"
           "The W4A8/W6A8 codes of a rotated weight [N, K] (eager's _quantize_rotated_w4a8_int8_weight): mode 0\n"
           "ALS over the level table (the 16-level codebook at 4 bits, -31..31 at 6 bits) then the int8 grid\n"
           "(scale_search: the best of three stored scales at 6 bits), 1 symmetric uniform 4-bit, 2 asymmetric\n"
           "4-bit with its correction [K/group_size, N].  noise [N, K] (optional): stochastic rounding's\n"
           "uniform values.  scratch: 2 * N * K/group_size float32.  s_rel float32, or e4m3 bytes (s_e4m3=1).",
    .prepare = prepare_w4a8_quant,
    .cpu = ckc_cpu_entry_quantize_w4a8_int8_weight,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_quantize_w4a8_int8_weight),
};
