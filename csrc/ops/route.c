/* SPDX-License-Identifier: Apache-2.0 */
/* The router: every op call, whatever the op, takes this one path.  The
 * spec's entry for the tensors' device is picked, the call's shapes are
 * checked into the op's parameter block, and the entry runs; on the GPU
 * between the checks' before- and after-hooks (diag/checked.h), which record
 * the op in the flight record, offer its completion mark through the execution
 * context and attribute faults. */
#include "hazards.h"
#include "op.h"

/* Whether a call runs the GPU entry: CUDA tensors in a CUDA build, every call
 * in the emulated-device build (its "device memory" is host memory). */
static int
runs_on_gpu(ckc_device_type device)
{
#if defined(CKC_EMULATED)
    (void)device;
    return 1;
#else
    return device == CKC_DEVICE_CUDA;
#endif
}

static ckc_status
no_entry(const ckc_op_spec *spec, const ckc_op_args *a, ckc_error *err)
{
    const char *first = spec->sig.tensors[0].name;
#if defined(CKC_WITH_GPU)
    if (a->exec.gpu) { /* a GPU build (or the emulated device): the op itself is CPU-only */
        return CKC_FAIL(err, CKC_ERR_TYPE, "argument '%s': %s has no GPU kernel; it runs on CPU tensors of the "
                        "native build", first, spec->sig.name);
    }
#endif
    if (a->exec.gpu) {
        return CKC_FAIL(err, CKC_ERR_TYPE,
                        "argument '%s': CUDA tensors need comfy-kitchen-c built with its GPU path; "
                        "this build is CPU-only", first);
    }
    return CKC_FAIL(err, CKC_ERR_TYPE, "argument '%s': %s has no CPU kernel; it runs on CUDA tensors", first,
                    spec->sig.name);
}

/* The GEMMs' workspace: the tensor the signature marks CKC_ARG_WORKSPACE, if given. */
static void
take_workspace(const ckc_op_spec *spec, ckc_op_args *a)
{
    for (int k = 0; k < spec->sig.n_tensors; k++) {
        if ((spec->sig.tensors[k].flags & CKC_ARG_WORKSPACE) && a->present[k]) {
            a->exec.workspace = a->t[k].data;
            a->exec.workspace_bytes = (size_t)a->t[k].numel;
        }
    }
}

ckc_status
ckc_op_run(const ckc_op_spec *spec, const char *op, ckc_op_args *a, int mode, ckc_error *err, ckc_fault *fault)
{
    ckc_op_params params;
    ckc_op_check check;
    ckc_entry entry;
    ckc_status status;
    a->exec.gpu = runs_on_gpu(a->device);
    entry = a->exec.gpu ? spec->gpu : spec->cpu;
    if (entry == NULL) {
        return no_entry(spec, a, err);
    }
    CKC_TRY(spec->prepare(a, &params, err));
    if (!a->exec.gpu) {
        return entry(&params, &a->exec, err);
    }
    take_workspace(spec, a);
    CKC_TRY(ckc_op_check_before(op, a, mode, &check, &a->exec, err, fault));
    ckc_op_hazards(op, a, 1);
    status = entry(&params, &a->exec, err);
    ckc_op_hazards(op, a, 0);
    return ckc_op_check_after(op, a, &check, &a->exec, status, err, fault);
}
