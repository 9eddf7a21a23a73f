/* SPDX-License-Identifier: Apache-2.0 */
/* Host logic of gemv_awq_w4a16: its spec and the check of its arguments into
 * its parameter block.  x arrives as float32 (x in the compute type: Python
 * rounds it there first, as eager's x.to(compute) does), qweight as the uint8
 * bytes of eager's int8 packing. */
#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "op.h"

#define U8 CKC_DTYPE_BIT(CKC_DTYPE_UINT8)
#define F32 CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32)

enum { AW_X, AW_QWEIGHT, AW_WSCALES, AW_WZEROS, AW_BIAS, AW_OUT };

/* The group size: positive and dividing k (eager's ValueError otherwise). */
static ckc_status
check_awq_group(int64_t group, int64_t k, ckc_error *err)
{
    if (group <= 0 || k % group != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'group_size': %lld does not divide K=%lld",
                        (long long)group, (long long)k);
    }
    return CKC_OK;
}

static ckc_status
prepare_awq(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    ckc_gemv_awq_w4a16_params *p = &params->gemv_awq_w4a16;
    int64_t m, k, n;
    CKC_TRY(ckc_check_rows(a, AW_X, &m, &k, err));
    n = a->t[AW_QWEIGHT].ndim == 2 ? a->t[AW_QWEIGHT].shape[0] : 0;
    if (k % 2 != 0 || n <= 0 || n > CKC_MAX_EXTENT) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'qweight': expected (N, K/2) for K=%lld", (long long)k);
    }
    {
        const int64_t qshape[2] = {n, k / 2};
        CKC_TRY(ckc_check_shape(a, AW_QWEIGHT, 2, qshape, err));
    }
    CKC_TRY(check_awq_group(a->i[0], k, err));
    {
        const int64_t gshape[2] = {k / a->i[0], n};
        const int64_t oshape[2] = {m, n};
        CKC_TRY(ckc_check_shape(a, AW_WSCALES, 2, gshape, err));
        CKC_TRY(ckc_check_shape(a, AW_WZEROS, 2, gshape, err));
        CKC_TRY(ckc_check_same_dtype(a, AW_WZEROS, AW_WSCALES, err));
        CKC_TRY(ckc_check_shape(a, AW_OUT, 2, oshape, err));
    }
    if (a->present[AW_BIAS]) {
        CKC_TRY(ckc_check_numel(a, AW_BIAS, n, err));
    }
    p->x = (const float *)a->t[AW_X].data;
    p->qweight = (const uint8_t *)a->t[AW_QWEIGHT].data;
    p->wscales = a->t[AW_WSCALES].data;
    p->wzeros = a->t[AW_WZEROS].data;
    p->bias = a->present[AW_BIAS] ? a->t[AW_BIAS].data : NULL;
    p->out = a->t[AW_OUT].data;
    p->kind = ckc_float_kind_of(a->t[AW_WSCALES].dtype);
    p->bias_kind = a->present[AW_BIAS] ? ckc_float_kind_of(a->t[AW_BIAS].dtype) : p->kind;
    p->out_kind = ckc_float_kind_of(a->t[AW_OUT].dtype);
    p->m = m;
    p->n = n;
    p->k = k;
    p->group = a->i[0];
    return CKC_OK;
}

const ckc_op_spec ckc_op_gemv_awq_w4a16 = {
    .sig = {"gemv_awq_w4a16", 6,
            {{"x", F32, 0},
             {"qweight", U8, 0},
             {"wscales", CKC_FLOATS, 0},
             {"wzeros", CKC_FLOATS, 0},
             {"bias", CKC_FLOATS, CKC_ARG_OPTIONAL},
             {"out", CKC_FLOATS, CKC_ARG_OUTPUT}},
            1, {"group"}},
    .doc = "gemv_awq_w4a16(op, x, qweight, wscales, wzeros, bias, out, group, stream, nthreads)\n--\n\n"
           "out = x @ W.T (+ bias) with W[n, k] = (q - 8) * wscales[k/group, n] + wzeros[k/group, n]\n"
           "rounded as eager rounds it; x: float32 (M, K) holding values of wscales' dtype; qweight:\n"
           "uint8 (N, K/2), low nibble even columns; out (M, N) of torch's promotion with bias.",
    .prepare = prepare_awq,
    .cpu = ckc_cpu_entry_gemv_awq_w4a16,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_gemv_awq_w4a16),
};
