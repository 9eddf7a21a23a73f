/* SPDX-License-Identifier: Apache-2.0 */
/* Host logic of the linear ops: int8_linear (CPU and GPU) and the NVFP4 GEMM
 * under scaled_mm_nvfp4 (GPU; the CPU path is a dequantize-and-matmul in
 * Python).  Each op's prepare function checks the shapes and fills its
 * parameter block (int8_linear: the caller's scratch carved into the chunk
 * buffers); the router (ops/route.c) runs the device's entry. */
#include <string.h>

#include "contract/linear_plan.h"
#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "linear_args.h"
#include "math/activation.h"
#include "math/nvfp4.h"
#include "op.h"
#include "w4a8_source.h"

/* ---- int8_linear(x, weight, weight_scale, bias, out, scratch, act_weight, modulation, residual,
 *                  residual_scale; act, group, k_align, n_align, eps_bits, norm_kind) ----
 *
 * x is [..., x_stride] with x_stride = k * width(act), taken as its rows of
 * x_stride (ckc_check_rows: ComfyUI's [B, T, C] passes without a reshape); out
 * is [..., n] with x's leading dimensions; the bias, n values of any float
 * type, is rounded to out's type in the epilogue (csrc/math/linear.h).  The
 * weight is [n, k] when the GEMM needs no padding, else a zero-padded
 * [n_pad, k_pad] copy; the caller's scratch is carved into chunk buffers as
 * contract/linear_plan.h lays them out (comfy_kitchen_c/linear.py sized it with
 * the same layout, through _C.int8_linear_plan).
 *
 * The activation (csrc/math/activation.h) reads act_weight (rms_norm's k
 * values) and modulation (k values of s), eps as the bits of a float32
 * (eps_bits), and rounds rms_norm's result to norm_kind (a ckc_float_kind; -1:
 * x's).  residual is out's shape, residual_scale 1 or n values; each of any
 * float type (the epilogue rounds them to out's type, csrc/math/linear.h). */

enum { LN_X, LN_W, LN_WS, LN_BIAS, LN_OUT, LN_SCRATCH, LN_ACT_WEIGHT, LN_MODULATION, LN_RESIDUAL, LN_RESIDUAL_SCALE };
enum { LI_ACT, LI_GROUP, LI_K_ALIGN, LI_N_ALIGN, LI_EPS_BITS, LI_NORM_KIND };
/* w4a8_linear: int8_linear's tensors (the weight's place holds the codes) and
 * ints, then these. */
enum { LN_S_REL = LN_RESIDUAL_SCALE + 1, LN_CODEBOOK };
enum { LI_W_GROUP = LI_NORM_KIND + 1, LI_BITS, LI_PACKED, LI_E4M3, LI_DECODE_BYTES };

/* The tensors after x, the weight and its scale: the same in both specs (LN_BIAS on). */
#define LINEAR_TAIL_TENSORS                                                                                    \
    {"bias", CKC_FLOATS, CKC_ARG_OPTIONAL}, {"out", CKC_FLOATS, CKC_ARG_OUTPUT},                                \
        {"scratch", CKC_DTYPE_BIT(CKC_DTYPE_UINT8), CKC_ARG_OUTPUT}, {"act_weight", CKC_FLOATS, CKC_ARG_OPTIONAL}, \
        {"modulation", CKC_FLOATS, CKC_ARG_OPTIONAL}, {"residual", CKC_FLOATS, CKC_ARG_OPTIONAL},                 \
        {"residual_scale", CKC_FLOATS, CKC_ARG_OPTIONAL}

static ckc_status
carve_scratch(const ckc_op_args *a, const ckc_linear_layout *l, ckc_int8_linear_params *p, ckc_error *err)
{
    const ckc_tensor *s = &a->t[LN_SCRATCH];
    const int64_t align = CKC_LINEAR_SCRATCH_ALIGN;
    const uintptr_t base = ((uintptr_t)s->data + align - 1) / align * align;
    const int64_t avail = s->numel - (int64_t)(base - (uintptr_t)s->data);
    const int64_t c = ckc_linear_chunk_capacity(l, p->rows, avail);
    char *at = (char *)base;
    if (c == 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'scratch': %lld bytes do not hold %lld row(s) (%lld bytes)",
                        (long long)s->numel, (long long)l->row_align,
                        (long long)(ckc_linear_layout_bytes(l, l->row_align) + align));
    }
    p->decode_rows = l->decode_rows;
    p->decode.out = l->decode_rows > 0 ? (void *)at : NULL;
    at += ckc_linear_fixed_bytes(l);
    p->chunk_rows = c < p->rows ? c : p->rows;
    p->q = (int8_t *)at;
    p->ldq = l->k_pad;
    at += ckc_round_up(c * l->k_pad, align);
    p->x_scale = (float *)at;
    at += ckc_round_up(4 * c, align);
    p->acc = l->acc_cols > 0 ? (int32_t *)at : NULL;
    p->ldacc = l->acc_cols;
    at += ckc_round_up(4 * c * l->acc_cols, align);
    p->act_rows = l->act_bytes > 0 ? (void *)at : NULL;
    at += ckc_round_up(c * l->act_bytes, align);
    p->row_factor = l->factor_bytes > 0 ? (float *)at : NULL;
    return CKC_OK;
}

/* An optional per-column vector of the activation: present when the activation
 * reads it, with k values. */
static ckc_status
act_vector(const ckc_op_args *a, int idx, int needed, int64_t k, const void **data, ckc_float_kind *kind,
           ckc_error *err)
{
    *data = NULL;
    *kind = CKC_F32;
    if (!needed) {
        return CKC_OK;
    }
    if (!a->present[idx]) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s' is required by this activation", a->sig->tensors[idx].name);
    }
    CKC_TRY(ckc_check_numel(a, idx, k, err));
    *data = a->t[idx].data;
    *kind = ckc_float_kind_of(a->t[idx].dtype);
    return CKC_OK;
}

/* The activation's arguments (act validated): its vectors (the tensors at
 * weight_idx and modulation_idx), eps, norm type.  Shared with linear_parts.c. */
ckc_status
ckc_linear_act_args_of(const ckc_op_args *a, int weight_idx, int modulation_idx, int64_t eps_arg, int64_t norm_kind,
                       ckc_int8_linear_params *p, ckc_error *err)
{
    const int act = p->act;
    const uint32_t eps_bits = (uint32_t)eps_arg;
    ckc_act_args *args = &p->act_args;
    memset(args, 0, sizeof *args);
    CKC_TRY(act_vector(a, weight_idx, ckc_act_needs_row_factor(act), p->k, &args->weight, &args->weight_kind,
                       err));
    CKC_TRY(act_vector(a, modulation_idx, act == CKC_ACT_MODULATE || act == CKC_ACT_RMS_MODULATE, p->k,
                       &args->modulation, &args->modulation_kind, err));
    if (norm_kind < -1 || norm_kind > CKC_BF16 || (eps_arg >> 32) != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'norm_kind'/'eps_bits': expected -1..2 and 32 bits, got %lld, %lld",
                        (long long)norm_kind, (long long)eps_arg);
    }
    args->act = act;
    args->weight_to_row_kind = act == CKC_ACT_RMS_NORM; /* int8_linear's act_weight.to(x.dtype) */
    args->norm_kind = norm_kind < 0 ? p->kind : (ckc_float_kind)norm_kind;
    memcpy(&args->eps, &eps_bits, sizeof args->eps);
    return CKC_OK;
}

/* The epilogue's terms: bias, residual (out's shape) and its scale (1 or n
 * values), the tensors at bias_idx and residual_idx (its scale the next).
 * Shared with linear_parts.c. */
ckc_status
ckc_linear_terms_of(const ckc_op_args *a, int bias_idx, int residual_idx, ckc_int8_linear_params *p, ckc_error *err)
{
    const int scale_idx = residual_idx + 1;
    ckc_linear_terms *t = &p->terms;
    memset(t, 0, sizeof *t);
    if (a->present[bias_idx]) {
        CKC_TRY(ckc_check_numel(a, bias_idx, p->n, err));
        t->bias = a->t[bias_idx].data;
        t->bias_kind = ckc_float_kind_of(a->t[bias_idx].dtype);
    }
    if (!a->present[residual_idx]) {
        return CKC_OK;
    }
    if (!a->present[scale_idx]) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'residual_scale' is required with a residual");
    }
    CKC_TRY(ckc_check_numel(a, residual_idx, p->rows * p->n, err));
    if (a->t[scale_idx].numel != 1) {
        CKC_TRY(ckc_check_numel(a, scale_idx, p->n, err));
    }
    t->residual = a->t[residual_idx].data;
    t->residual_kind = ckc_float_kind_of(a->t[residual_idx].dtype);
    t->residual_scale = a->t[scale_idx].data;
    t->residual_scale_kind = ckc_float_kind_of(a->t[scale_idx].dtype);
    t->residual_scale_per_channel = a->t[scale_idx].numel != 1;
    return CKC_OK;
}

/* x's rows, k and the activation into p; the output's shape checked. */
static ckc_status
check_rows(const ckc_op_args *a, int64_t act, ckc_int8_linear_params *p, ckc_error *err)
{
    const ckc_tensor *x = &a->t[LN_X];
    const ckc_tensor *out = &a->t[LN_OUT];
    int64_t out_shape[CKC_MAX_DIMS];
    int64_t width;
    int64_t x_cols;
    if (act < CKC_ACT_NONE || act > CKC_ACT_LAST) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'input_act': unknown activation code %lld", (long long)act);
    }
    CKC_TRY(ckc_check_rows(a, LN_X, &p->rows, &x_cols, err));
    width = ckc_act_width((int)act);
    if (x_cols % width != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'x': a gated activation needs an even row length, got %lld",
                        (long long)x_cols);
    }
    p->x = x->data;
    p->kind = ckc_float_kind_of(x->dtype);
    p->x_stride = x_cols;
    p->act = (int)act;
    p->k = x_cols / width;
    /* n is out's last dimension (the weight may be padded); the others must be x's. */
    p->n = out->ndim > 0 ? out->shape[out->ndim - 1] : 0;
    memcpy(out_shape, x->shape, (size_t)x->ndim * sizeof out_shape[0]);
    out_shape[x->ndim - 1] = p->n;
    CKC_TRY(ckc_check_shape(a, LN_OUT, x->ndim, out_shape, err));
    p->out = out->data;
    p->out_kind = ckc_float_kind_of(out->dtype);
    return ckc_check_extent(a, LN_OUT, p->rows, p->n, err);
}

/* The weight ([n, k] as given, or padded to [n_pad, k_pad] where the GEMM
 * needs it) and its scale into p. */
static ckc_status
check_weight(const ckc_op_args *a, const ckc_linear_layout *l, ckc_int8_linear_params *p, ckc_error *err)
{
    const ckc_tensor *w = &a->t[LN_W];
    const int64_t n = p->n;
    const int64_t k = p->k;
    if (w->ndim != 2) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'weight': expected 2 dimensions, got %d", (int)w->ndim);
    }
    if (!(w->shape[0] == n && w->shape[1] == k && (l->acc_cols == 0 || (l->k_pad == k && l->n_pad == n))) &&
        !(l->acc_cols > 0 && w->shape[0] == l->n_pad && w->shape[1] == l->k_pad)) {
        return CKC_FAIL(err, CKC_ERR_VALUE,
                        "argument 'weight': expected shape (%lld, %lld) (or zero-padded (%lld, %lld)), got (%lld, %lld)",
                        (long long)n, (long long)k, (long long)l->n_pad, (long long)l->k_pad,
                        (long long)w->shape[0], (long long)w->shape[1]);
    }
    p->w = (const int8_t *)w->data;
    p->ldw = w->shape[1];
    if (a->t[LN_WS].numel != 1 && a->t[LN_WS].numel != n) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'weight_scale': expected 1 or %lld values, got %lld",
                        (long long)n, (long long)a->t[LN_WS].numel);
    }
    p->w_scale = (const float *)a->t[LN_WS].data;
    p->w_per_channel = a->t[LN_WS].numel != 1;
    return CKC_OK;
}

/* What int8_linear and w4a8_linear read alike: x's rows and the activation,
 * the ConvRot group, the alignments (into *l, with decode_bytes: w4a8_linear's). */
static ckc_status
prepare_rows(const ckc_op_args *a, int64_t decode_bytes, int decode_gemv, ckc_int8_linear_params *p,
             ckc_linear_layout *l, ckc_error *err)
{
    const int64_t act = a->i[LI_ACT];
    const int64_t k_align = a->i[LI_K_ALIGN];
    const int64_t n_align = a->i[LI_N_ALIGN];
    if (k_align < 1 || k_align > 256 || n_align < 1 || n_align > 256) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'k_align'/'n_align': expected 1..256, got %lld, %lld",
                        (long long)k_align, (long long)n_align);
    }
    CKC_TRY(check_rows(a, act, p, err));
    p->group = a->i[LI_GROUP];
    if (p->group != 0) {
        CKC_TRY(ckc_check_group("convrot_groupsize", p->group, p->k, err));
    }
    CKC_TRY(ckc_linear_act_args_of(a, LN_ACT_WEIGHT, LN_MODULATION, a->i[LI_EPS_BITS], a->i[LI_NORM_KIND], p,
                                   err));
    *l = ckc_linear_layout_of(p->rows, p->k, p->n, k_align, n_align, a->exec.gpu, (int)act, ckc_kind_size(p->kind),
                              decode_bytes, decode_gemv);
    return CKC_OK;
}

static ckc_status
prepare_int8_linear(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    ckc_int8_linear_params *p = &params->int8_linear;
    ckc_linear_layout l;
    memset(&p->decode, 0, sizeof p->decode);
    CKC_TRY(prepare_rows(a, 0, 0, p, &l, err));
    CKC_TRY(check_weight(a, &l, p, err));
    CKC_TRY(ckc_linear_terms_of(a, LN_BIAS, LN_RESIDUAL, p, err));
    return carve_scratch(a, &l, p, err);
}

const ckc_op_spec ckc_op_int8_linear = {
    .sig = {"int8_linear", 11,
            {{"x", CKC_FLOATS, 0},
             {"weight", CKC_DTYPE_BIT(CKC_DTYPE_INT8), 0},
             {"weight_scale", CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32), 0},
             LINEAR_TAIL_TENSORS,
             {"workspace", CKC_DTYPE_BIT(CKC_DTYPE_UINT8), CKC_ARG_OUTPUT | CKC_ARG_OPTIONAL | CKC_ARG_WORKSPACE}},
            6, {"act", "group", "k_align", "n_align", "eps_bits", "norm_kind"}},
    .doc = "int8_linear(op, x, weight, weight_scale, bias, out, scratch, act_weight, modulation, residual,\n"
           "            residual_scale, workspace, act, group, k_align, n_align, eps_bits, norm_kind, stream,\n"
           "            nthreads)\n"
           "--\n\n"
           "out = (rowwise_int8(rotate(act(x))) . weight^T) * x_scale * weight_scale + bias, then\n"
           "residual + residual_scale * out (csrc/math/linear.h); x [..., K] and out [..., n] by rows\n"
           "of their last dimension, in chunks through scratch (contract/linear_plan.h lays it out).",
    .prepare = prepare_int8_linear,
    .cpu = ckc_cpu_entry_int8_linear,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_int8_linear),
};

/* ---- w4a8_linear(x, qdata, s_channel, bias, out, scratch, act_weight, modulation, residual, residual_scale,
 *                  s_rel, codebook; int8_linear's ints, w_group, bits, packed, s_e4m3, decode_bytes) ----
 *
 * int8_linear on the GPU with a W4A8 / W6A8 weight (comfy_kitchen's
 * w4a8_int8_linear and w4a8_packed_linear without a correction): the codes are
 * decoded to the int8 grid (math/w4a8.h, eager's) a part of the weight's rows at
 * a time into the scratch (contract/linear_plan.h), each part multiplied right
 * after, so the int32 sums, and with them the outputs, are int8_linear's on
 * the whole decoded weight, bit for bit.  The weight scale is s_channel ([n]).
 * GPU only: the spec has no CPU entry, so the router refuses a CPU call (the
 * CPU decodes, then runs int8_linear: comfy_kitchen_c/w4a8.py). */

static ckc_status
prepare_w4a8_linear(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    ckc_int8_linear_params *p = &params->int8_linear;
    const int64_t decode_bytes = a->i[LI_DECODE_BYTES];
    ckc_linear_layout l = {0};
    if (decode_bytes < 1 || a->i[LI_N_ALIGN] % 16 != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'decode_bytes'/'n_align': expected > 0 and a multiple of 16, "
                        "got %lld, %lld", (long long)decode_bytes, (long long)a->i[LI_N_ALIGN]);
    }
    /* the GEMV reads canonical rows (kernels/w4a8.cu); the records take the GEMM */
    CKC_TRY(prepare_rows(a, decode_bytes, a->i[LI_PACKED] == 0, p, &l, err));
    if (l.k_pad != p->k) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'k_align': %lld does not divide K=%lld (decoded rows are not "
                        "padded)", (long long)a->i[LI_K_ALIGN], (long long)p->k);
    }
    CKC_TRY(ckc_w4a8_source_of(a, LN_W, LN_S_REL, LN_CODEBOOK, LI_W_GROUP, "x", p->n, p->k, &p->decode, err));
    p->w = NULL;
    p->ldw = l.k_pad;
    CKC_TRY(ckc_check_numel(a, LN_WS, p->n, err));
    p->w_scale = (const float *)a->t[LN_WS].data;
    p->w_per_channel = 1;
    CKC_TRY(ckc_linear_terms_of(a, LN_BIAS, LN_RESIDUAL, p, err));
    return carve_scratch(a, &l, p, err);
}

const ckc_op_spec ckc_op_w4a8_linear = {
    .sig = {"w4a8_linear", 13,
            {{"x", CKC_FLOATS, 0},
             {"qdata", CKC_DTYPE_BIT(CKC_DTYPE_INT8) | CKC_DTYPE_BIT(CKC_DTYPE_UINT8), 0},
             {"s_channel", CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32), 0},
             LINEAR_TAIL_TENSORS,
             {"s_rel", CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32) | CKC_DTYPE_BIT(CKC_DTYPE_UINT8), CKC_ARG_OPTIONAL},
             {"codebook", CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32), CKC_ARG_OPTIONAL},
             {"workspace", CKC_DTYPE_BIT(CKC_DTYPE_UINT8), CKC_ARG_OUTPUT | CKC_ARG_OPTIONAL | CKC_ARG_WORKSPACE}},
            11, {"act", "group", "k_align", "n_align", "eps_bits", "norm_kind", "group_size", "bits", "packed",
                 "s_e4m3", "decode_bytes"}},
    .doc = "w4a8_linear(op, x, qdata, s_channel, bias, out, scratch, act_weight, modulation, residual,\n"
           "            residual_scale, s_rel, codebook, workspace, act, group, k_align, n_align, eps_bits, norm_kind,\n"
           "            group_size, bits, packed, s_e4m3, decode_bytes, stream, nthreads)\n"
           "--\n\n"
           "int8_linear (GPU) with the weight as W4A8 / W6A8 codes (dequantize_w4a8_int8_weight's), decoded\n"
           "to the int8 grid within decode_bytes of the scratch at a time, each part multiplied at once;\n"
           "up to 8 rows of canonical codes (packed=0), decoded in the GEMV's registers instead.",
    .prepare = prepare_w4a8_linear,
    .cpu = NULL,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_int8_linear),
};

/* ---- scaled_mm_nvfp4(a, b, scale_a, scale_b, alpha_beta, bias, out) ---- */

enum { FG_A, FG_B, FG_SA, FG_SB, FG_AB, FG_BIAS, FG_OUT };

static ckc_status
prepare_nvfp4_gemm(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    const ckc_tensor *ta = &a->t[FG_A];
    const ckc_tensor *tb = &a->t[FG_B];
    const ckc_tensor *out = &a->t[FG_OUT];
    ckc_scaled_mm_nvfp4_params *p = &params->scaled_mm_nvfp4;
    int64_t shape[2];
    if (ta->ndim != 2 || tb->ndim != 2) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "arguments 'a', 'b': expected 2 dimensions each");
    }
    CKC_TRY(ckc_check_extent(a, FG_A, ta->shape[0], ta->shape[1], err));
    CKC_TRY(ckc_check_extent(a, FG_B, tb->shape[0], tb->shape[1], err));
    p->m = ta->shape[0];
    p->n = tb->shape[0];
    p->k = 2 * ta->shape[1];
    if (tb->shape[1] != ta->shape[1] || p->k % CKC_NVFP4_BLOCK != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'b': packed row length %lld must equal a's (%lld) and hold "
                        "a multiple of 16 values", (long long)tb->shape[1], (long long)ta->shape[1]);
    }
    shape[0] = ckc_nvfp4_scale_rows(p->m);
    shape[1] = ckc_nvfp4_scale_cols(p->k / CKC_NVFP4_BLOCK);
    CKC_TRY(ckc_check_shape(a, FG_SA, 2, shape, err));
    shape[0] = ckc_nvfp4_scale_rows(p->n);
    CKC_TRY(ckc_check_shape(a, FG_SB, 2, shape, err));
    CKC_TRY(ckc_check_numel(a, FG_AB, 2, err));
    shape[0] = p->m;
    shape[1] = p->n;
    CKC_TRY(ckc_check_shape(a, FG_OUT, 2, shape, err));
    if (a->present[FG_BIAS]) {
        CKC_TRY(ckc_check_numel(a, FG_BIAS, p->n, err));
        CKC_TRY(ckc_check_same_dtype(a, FG_BIAS, FG_OUT, err));
    }
    p->a = (const uint8_t *)ta->data;
    p->b = (const uint8_t *)tb->data;
    p->scale_a = (const uint8_t *)a->t[FG_SA].data;
    p->scale_b = (const uint8_t *)a->t[FG_SB].data;
    p->alpha_beta = (const float *)a->t[FG_AB].data;
    p->bias = a->present[FG_BIAS] ? a->t[FG_BIAS].data : NULL;
    p->out = out->data;
    p->out_kind = ckc_float_kind_of(out->dtype);
    return CKC_OK;
}

const ckc_op_spec ckc_op_scaled_mm_nvfp4 = {
    .sig = {"scaled_mm_nvfp4", 8,
            {{"a", CKC_DTYPE_BIT(CKC_DTYPE_UINT8), 0},
             {"b", CKC_DTYPE_BIT(CKC_DTYPE_UINT8), 0},
             {"scale_a", CKC_DTYPE_BIT(CKC_DTYPE_UINT8), 0},
             {"scale_b", CKC_DTYPE_BIT(CKC_DTYPE_UINT8), 0},
             {"alpha_beta", CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32), 0},
             {"bias", CKC_FLOATS, CKC_ARG_OPTIONAL},
             {"out", CKC_FLOATS, CKC_ARG_OUTPUT},
             {"workspace", CKC_DTYPE_BIT(CKC_DTYPE_UINT8), CKC_ARG_OUTPUT | CKC_ARG_OPTIONAL | CKC_ARG_WORKSPACE}},
            0, {NULL}},
    .doc = "scaled_mm_nvfp4(op, a, b, scale_a, scale_b, alpha_beta, bias, out, workspace, stream, nthreads)\n--\n\n"
           "out = alpha_beta[0] * (dec(a) . dec(b)^T) + bias: block-scaled NVFP4 GEMM on the GPU.",
    .prepare = prepare_nvfp4_gemm,
    .cpu = NULL,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_scaled_mm_nvfp4),
};
