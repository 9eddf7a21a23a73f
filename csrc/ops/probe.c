/* SPDX-License-Identifier: Apache-2.0 */
/* Two ops that only pass the checks, for measuring the checks' own cost
 * (csrc/module/faults.c's check_overhead_ns, benchmarks/bench_faults.py): one
 * queues no work, the other one one-thread kernel carrying the op's
 * completion mark.  They take a typical op's arguments and are not exported. */
#include "gpu/gpu.h"
#include "op.h"

static ckc_status
prepare_nothing(const ckc_op_args *a, ckc_op_params *params, ckc_error *err)
{
    (void)a;
    (void)params;
    (void)err;
    return CKC_OK;
}

static ckc_status
run_nothing(const ckc_op_params *p, ckc_exec *exec, ckc_error *err)
{
    (void)p;
    (void)exec;
    (void)err;
    return CKC_OK;
}

#define PROBE_SIGNATURE(name)                                                                                   \
    {                                                                                                           \
        name, 3,                                                                                                \
            {{"x", CKC_FLOATS, 0}, {"q", CKC_DTYPE_BIT(CKC_DTYPE_INT8), CKC_ARG_OUTPUT},                        \
             {"scale", CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32), CKC_ARG_OUTPUT}},                                      \
            1, {"group"},                                                                                       \
    }

const ckc_op_spec ckc_op_probe_nothing = {
    .sig = PROBE_SIGNATURE("null"),
    .doc = "",
    .prepare = prepare_nothing,
    .cpu = run_nothing,
    .gpu = run_nothing,
};

const ckc_op_spec ckc_op_probe_mark_kernel = {
    .sig = PROBE_SIGNATURE("one_kernel"),
    .doc = "",
    .prepare = prepare_nothing,
    .cpu = run_nothing,
#if defined(CKC_WITH_GPU)
    .gpu = ckc_gpu_entry_mark_kernel,
#else
    .gpu = run_nothing,
#endif
};
