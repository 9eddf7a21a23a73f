/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU device's entries (gpu/gpu.h): each hands its member of the op's
 * parameter block and the execution context to the op's launcher
 * (kernels/<family>.cu) or to the BLAS seam.  The union member and the
 * launcher share the op's name. */
#include "blas.h"
#include "gpu.h"
#include "launch.h"
#include "runtime.h"

#define CKC_GPU_LAUNCHER_ENTRY(op)                                                        \
    ckc_status ckc_gpu_entry_##op(const ckc_op_params *p, ckc_exec *exec, ckc_error *err) \
    {                                                                                     \
        return ckc_gpu_##op(&p->op, exec, err);                                           \
    }

CKC_GPU_LAUNCHER_ENTRY(quantize_int8_rowwise)
CKC_GPU_LAUNCHER_ENTRY(quantize_int8_tensorwise)
CKC_GPU_LAUNCHER_ENTRY(rotate_int8_convrot_weight)
CKC_GPU_LAUNCHER_ENTRY(dequantize_int8_convrot_weight_dtype)
CKC_GPU_LAUNCHER_ENTRY(quantize_nvfp4)
CKC_GPU_LAUNCHER_ENTRY(dequantize_nvfp4)
CKC_GPU_LAUNCHER_ENTRY(int8_linear)

/* The block-scaled FP4 GEMM is cuBLASLt's alone (no kernel of ours), on the
 * tensors' device.  Its last work is the library's, so the op's completion
 * mark is queued separately after it. */
ckc_status
ckc_gpu_entry_scaled_mm_nvfp4(const ckc_op_params *p, ckc_exec *exec, ckc_error *err)
{
    ckc_gpu_device_guard guard;
    ckc_status status;
    CKC_TRY(ckc_gpu_device_enter(exec->device_index, &guard, err));
    status = ckc_blas_nvfp4_gemm(&p->scaled_mm_nvfp4, exec, err);
    ckc_gpu_device_leave(&guard);
    return status;
}

ckc_status
ckc_gpu_entry_mark_kernel(const ckc_op_params *p, ckc_exec *exec, ckc_error *err)
{
    const ckc_done_mark m = ckc_exec_take_done_mark(exec);
    ckc_gpu_device_guard guard;
    ckc_status status;
    (void)p;
    CKC_TRY(ckc_gpu_device_enter(exec->device_index, &guard, err)); /* the launch needs the device's context */
    status = ckc_gpu_flight_mark(&m, exec->stream, err);
    ckc_gpu_device_leave(&guard);
    return status;
}

CKC_GPU_LAUNCHER_ENTRY(apply_rope1)
CKC_GPU_LAUNCHER_ENTRY(quantize_per_tensor_fp8)
CKC_GPU_LAUNCHER_ENTRY(dequantize_per_tensor_fp8)
CKC_GPU_LAUNCHER_ENTRY(stochastic_rounding_fp8)
CKC_GPU_LAUNCHER_ENTRY(gemv_awq_w4a16)
