/* SPDX-License-Identifier: Apache-2.0 */
/* The shape of every op: a static spec naming its signature (tensor arguments
 * with their dtype sets, integer arguments), the function that checks a call's
 * shapes and fills its parameter block, and the op's CPU and GPU entries.  One
 * router (ops/route.c) runs every call: it picks the entry for the tensors'
 * device, prepares the parameters, and runs the entry between the checks'
 * before- and after-hooks (csrc/diag/checked.h).  Adding an op is adding a
 * spec (csrc/ops/<family>.c, listed in ops/registry.c), its parameter block
 * (contract/params.h) and its device entries (cpu/cpu.h, gpu/gpu.h). */
#ifndef CKC_OPS_OP_H
#define CKC_OPS_OP_H

#include "contract/call.h"
#include "contract/codes.h"
#include "contract/exec.h"
#include "contract/params.h"
#include "contract/status.h"
#include "contract/tensor.h"
#include "diag/checked.h"
#include "math/float_bits.h"

/* A device's implementation of an op: reads its member of p. */
typedef ckc_status (*ckc_entry)(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);

typedef struct ckc_op_spec {
    ckc_op_signature sig;
    const char *doc;
    /* Checks the call's shapes (a->exec.gpu says which entry will run) and
     * fills the op's member of p; nothing runs on a device yet. */
    ckc_status (*prepare)(const ckc_op_args *a, ckc_op_params *p, ckc_error *err);
    ckc_entry cpu;           /* NULL: no CPU kernel */
    ckc_entry gpu;           /* NULL: no GPU kernel (or a build without them): CKC_GPU_ENTRY */
} ckc_op_spec;

/* All ops, NULL-terminated (ops/registry.c). */
extern const ckc_op_spec *const ckc_op_table[];

/* Ops that do nothing but pass the checks (ops/probe.c, for benchmarks/bench_faults.py):
 * no work, and one one-thread kernel carrying the op's completion mark. */
extern const ckc_op_spec ckc_op_probe_nothing;
extern const ckc_op_spec ckc_op_probe_mark_kernel;

/* The router: runs one call of spec (named `op` in records and errors) under
 * the checking mode (CKC_CHECK_*, diag/checked.h).  *fault is filled for
 * device faults (status CKC_ERR_LAUNCH and above). */
ckc_status ckc_op_run(const ckc_op_spec *spec, const char *op, ckc_op_args *a, int mode, ckc_error *err,
                      ckc_fault *fault);

/* ---- checks shared by the prepare functions; messages name the argument ---- */

ckc_status ckc_check_shape(const ckc_op_args *a, int idx, int ndim, const int64_t *shape, ckc_error *err);
ckc_status ckc_check_numel(const ckc_op_args *a, int idx, int64_t numel, ckc_error *err);
ckc_status ckc_check_same_dtype(const ckc_op_args *a, int idx, int like, ckc_error *err);
ckc_status ckc_check_extent(const ckc_op_args *a, int idx, int64_t rows, int64_t cols, ckc_error *err);
/* The tensor seen as [rows, cols] = [numel / shape[-1], shape[-1]] (a compact
 * row-major tensor of any rank >= 1 is that matrix), within ckc_check_extent. */
ckc_status ckc_check_rows(const ckc_op_args *a, int idx, int64_t *rows, int64_t *cols, ckc_error *err);
ckc_status ckc_check_group(const char *arg, int64_t group, int64_t cols, ckc_error *err);

static inline ckc_float_kind
ckc_float_kind_of(ckc_dtype d)
{
    return d == CKC_DTYPE_FLOAT16 ? CKC_F16 : (d == CKC_DTYPE_BFLOAT16 ? CKC_BF16 : CKC_F32);
}

#endif /* CKC_OPS_OP_H */
