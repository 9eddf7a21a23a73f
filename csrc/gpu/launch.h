/* SPDX-License-Identifier: Apache-2.0 */
/* Entry points of the GPU kernels (kernels/<family>.cu): one launcher per op, taking
 * the same validated parameter blocks as the CPU kernels plus the execution
 * context.  The same sources build for a real GPU (nvcc) and for the emulated
 * device (tests).  A launcher checks what only it knows (alignment, limits of
 * its kernels), launches on exec->stream, checks the launch, and passes the
 * op's completion mark (ckc_exec_take_done_mark) to its last kernel. */
#ifndef CKC_GPU_LAUNCH_H
#define CKC_GPU_LAUNCH_H

#include "contract/done_mark.h"
#include "contract/exec.h"
#include "contract/params.h"
#include "contract/status.h"

#ifdef __cplusplus
extern "C" {
#endif

ckc_status ckc_gpu_quantize_int8_rowwise(const ckc_quantize_int8_rowwise_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_quantize_int8_tensorwise(const ckc_quantize_int8_tensorwise_params *p, ckc_exec *exec,
                                            ckc_error *err);
ckc_status ckc_gpu_rotate_int8_convrot_weight(const ckc_rotate_int8_convrot_weight_params *p, ckc_exec *exec,
                                              ckc_error *err);
ckc_status ckc_gpu_dequantize_int8_convrot_weight_dtype(const ckc_dequantize_int8_convrot_weight_dtype_params *p,
                                                        ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_quantize_nvfp4(const ckc_quantize_nvfp4_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_dequantize_nvfp4(const ckc_dequantize_nvfp4_params *p, ckc_exec *exec, ckc_error *err);
/* int8_linear (kernels/linear.cu): activation + rotation + row quantizer, then
 * the cuBLASLt GEMM and the epilogue kernel, per chunk of rows; one row: GEMV. */
ckc_status ckc_gpu_int8_linear(const ckc_int8_linear_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_apply_rope1(const ckc_apply_rope1_params *p, ckc_exec *exec, ckc_error *err);
/* per-tensor FP8 (kernels/fp8.cu) */
ckc_status ckc_gpu_quantize_per_tensor_fp8(const ckc_quantize_per_tensor_fp8_params *p, ckc_exec *exec,
                                           ckc_error *err);
ckc_status ckc_gpu_dequantize_per_tensor_fp8(const ckc_dequantize_per_tensor_fp8_params *p, ckc_exec *exec,
                                             ckc_error *err);
ckc_status ckc_gpu_stochastic_rounding_fp8(const ckc_stochastic_rounding_fp8_params *p, ckc_exec *exec,
                                           ckc_error *err);
/* rms_rope (kernels/rope.cu, launcher gpu/launch_rope.c) */
ckc_status ckc_gpu_rms_rope1(const ckc_rms_rope1_params *p, ckc_exec *exec, ckc_error *err);
/* rms_gated_residual (kernels/residual.cu, launcher gpu/launch_residual.c) */
ckc_status ckc_gpu_rms_gated_residual(const ckc_rms_gated_residual_params *p, ckc_exec *exec, ckc_error *err);
/* MXFP8 (kernels/mxfp8.cu) */
ckc_status ckc_gpu_quantize_mxfp8(const ckc_quantize_mxfp8_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_dequantize_mxfp8(const ckc_dequantize_mxfp8_params *p, ckc_exec *exec, ckc_error *err);
/* ConvRot W4A4 (kernels/w4a4.cu) */
ckc_status ckc_gpu_quantize_convrot_w4a4_weight(const ckc_quantize_convrot_w4a4_weight_params *p, ckc_exec *exec,
                                                ckc_error *err);
ckc_status ckc_gpu_dequantize_convrot_w4a4_weight(const ckc_dequantize_convrot_w4a4_weight_params *p,
                                                  ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_prepare_int4_weight_for_int8_linear(const ckc_prepare_int4_weight_for_int8_linear_params *p,
                                                       ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_convrot_w4a4_linear(const ckc_convrot_w4a4_linear_params *p, ckc_exec *exec, ckc_error *err);
/* W4A8 / W6A8 weight decode (kernels/w4a8.cu) */
ckc_status ckc_gpu_dequantize_w4a8_int8_weight(const ckc_dequantize_w4a8_int8_weight_params *p, ckc_exec *exec,
                                               ckc_error *err);
/* W4A8 / W6A8 quantizer (kernels/w4a8_quant.cu) */
ckc_status ckc_gpu_quantize_w4a8_int8_weight(const ckc_quantize_w4a8_int8_weight_params *p, ckc_exec *exec,
                                             ckc_error *err);
/* gemv_awq_w4a16 (kernels/awq.cu) */
ckc_status ckc_gpu_gemv_awq_w4a16(const ckc_gemv_awq_w4a16_params *p, ckc_exec *exec, ckc_error *err);

/* The flight record's kernels (kernels/flight.cu) are the runtime seam's
 * (gpu/runtime.h): the diagnostics queue them. */

#ifdef __cplusplus
}
#endif

#endif /* CKC_GPU_LAUNCH_H */
