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

/* The block-scaled GEMMs (FP4, MXFP8) are cuBLASLt's alone (no kernel of ours),
 * on the tensors' device.  Their last work is the library's, so the op's
 * completion mark is queued separately after it. */
#define CKC_GPU_BLAS_ENTRY(op, gemm)                                                      \
    ckc_status ckc_gpu_entry_##op(const ckc_op_params *p, ckc_exec *exec, ckc_error *err) \
    {                                                                                     \
        ckc_gpu_device_guard guard;                                                       \
        ckc_status status;                                                                \
        CKC_TRY(ckc_gpu_device_enter(exec->device_index, &guard, err));                   \
        status = gemm(&p->op, exec, err);                                                 \
        ckc_gpu_device_leave(&guard);                                                     \
        return status;                                                                    \
    }

CKC_GPU_BLAS_ENTRY(scaled_mm_nvfp4, ckc_blas_nvfp4_gemm)

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
CKC_GPU_LAUNCHER_ENTRY(rms_rope1)
CKC_GPU_LAUNCHER_ENTRY(rms_gated_residual)
CKC_GPU_LAUNCHER_ENTRY(quantize_mxfp8)
CKC_GPU_LAUNCHER_ENTRY(dequantize_mxfp8)

CKC_GPU_BLAS_ENTRY(scaled_mm_mxfp8, ckc_blas_mxfp8_gemm)
CKC_GPU_LAUNCHER_ENTRY(quantize_convrot_w4a4_weight)
CKC_GPU_LAUNCHER_ENTRY(dequantize_convrot_w4a4_weight)
CKC_GPU_LAUNCHER_ENTRY(prepare_int4_weight_for_int8_linear)
CKC_GPU_LAUNCHER_ENTRY(convrot_w4a4_linear)
CKC_GPU_LAUNCHER_ENTRY(dequantize_w4a8_int8_weight)
CKC_GPU_LAUNCHER_ENTRY(quantize_w4a8_int8_weight)
CKC_GPU_LAUNCHER_ENTRY(gemv_awq_w4a16)
