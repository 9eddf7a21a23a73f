/* SPDX-License-Identifier: Apache-2.0 */
/* Host logic of rms_gated_residual (comfy_kitchen_c/residual.py): residual +
 * gate * rms_norm(activation, norm_weight, eps) in one pass over the rows, gate
 * and residual broadcast over a block of the activation's leading dims (Python
 * gives each as rows of D values with its divisor and modulus). */
#include <string.h>

#include "cpu/cpu.h"
#include "gpu/gpu.h"
#include "math/residual.h"
#include "op.h"

enum { GR_ACT, GR_WEIGHT, GR_RES, GR_GATE, GR_OUT };

/* rows of a broadcast operand: (r / div) % mod must index its rows. */
static ckc_status
check_broadcast(const ckc_op_args *a, int idx, const char *name, int64_t rows, int64_t dim, int64_t div, int64_t mod,
                ckc_error *err)
{
    const int64_t have = a->t[idx].numel;
    if (div < 1 || mod < 1 || mod > rows || have != mod * dim || a->t[idx].shape[a->t[idx].ndim - 1] != dim) {
        return CKC_FAIL(err, CKC_ERR_VALUE,
                        "argument '%s': %lld values as %lld rows of %lld (divisor %lld) for %lld rows", name,
                        (long long)have, (long long)mod, (long long)dim, (long long)div, (long long)rows);
    }
    return CKC_OK;
}

static ckc_status
prepare_residual(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    ckc_rms_gated_residual_params *p = &params->rms_gated_residual;
    const uint32_t eps_bits = (uint32_t)a->i[4];
    if ((a->i[4] >> 32) != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'eps_bits': expected the 32 bits of a float32, got %lld",
                        (long long)a->i[4]);
    }
    CKC_TRY(ckc_check_rows(a, GR_ACT, &p->rows, &p->dim, err));
    CKC_TRY(ckc_check_shape(a, GR_WEIGHT, 1, &p->dim, err));
    p->gate_div = a->i[0];
    p->gate_mod = a->i[1];
    p->res_div = a->i[2];
    p->res_mod = a->i[3];
    CKC_TRY(check_broadcast(a, GR_GATE, "gate", p->rows, p->dim, p->gate_div, p->gate_mod, err));
    CKC_TRY(check_broadcast(a, GR_RES, "residual", p->rows, p->dim, p->res_div, p->res_mod, err));
    CKC_TRY(ckc_check_shape(a, GR_OUT, (int)a->t[GR_ACT].ndim, a->t[GR_ACT].shape, err));
    p->act = a->t[GR_ACT].data;
    p->weight = a->t[GR_WEIGHT].data;
    p->residual = a->t[GR_RES].data;
    p->gate = a->t[GR_GATE].data;
    p->out = a->t[GR_OUT].data;
    p->act_kind = ckc_float_kind_of(a->t[GR_ACT].dtype);
    p->weight_kind = ckc_float_kind_of(a->t[GR_WEIGHT].dtype);
    p->res_kind = ckc_float_kind_of(a->t[GR_RES].dtype);
    p->gate_kind = ckc_float_kind_of(a->t[GR_GATE].dtype);
    p->out_kind = ckc_float_kind_of(a->t[GR_OUT].dtype);
    p->mid_kind = ckc_promote_kind(p->gate_kind, p->act_kind);
    if (p->out_kind != ckc_promote_kind(p->res_kind, p->mid_kind)) {
        return CKC_FAIL(err, CKC_ERR_TYPE, "argument 'out': not the promoted dtype of residual, gate and activation");
    }
    memcpy(&p->eps, &eps_bits, sizeof p->eps);
    return CKC_OK;
}

const ckc_op_spec ckc_op_rms_gated_residual = {
    .sig = {"rms_gated_residual", 5,
            {{"activation", CKC_FLOATS, 0},
             {"norm_weight", CKC_FLOATS, 0},
             {"residual", CKC_FLOATS, 0},
             {"gate", CKC_FLOATS, 0},
             {"out", CKC_FLOATS, CKC_ARG_OUTPUT}},
            5, {"gate_div", "gate_mod", "res_div", "res_mod", "eps_bits"}},
    .doc = "rms_gated_residual(op, activation, norm_weight, residual, gate, out, gate_div, gate_mod, res_div, "
           "res_mod, eps_bits, stream, nthreads)\n--\n\n"
           "residual + gate * rms_norm(activation, (D,), norm_weight, eps) into out (activation's shape,\n"
           "the promoted dtype), each step rounded as comfy_kitchen's eager backend rounds it; gate's row\n"
           "for activation row r is (r / gate_div) % gate_mod, residual's likewise; eps_bits: eps's float32 bits.",
    .prepare = prepare_residual,
    .cpu = ckc_cpu_entry_rms_gated_residual,
    .gpu = CKC_GPU_ENTRY(ckc_gpu_entry_rms_gated_residual),
};
