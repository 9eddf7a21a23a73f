/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU device as the op layer sees it (csrc/ops): one entry per op with a
 * CPU kernel, taking the op's parameter block and the execution context (the
 * thread count), and the choice of the kernels' instruction set.  Everything
 * else in csrc/cpu/ is this device's own. */
#ifndef CKC_CPU_CPU_H
#define CKC_CPU_CPU_H

#include "contract/exec.h"
#include "contract/params.h"
#include "contract/status.h"

/* ---- entries (cpu/entries.c) ---- */
ckc_status ckc_cpu_entry_quantize_int8_rowwise(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_quantize_int8_tensorwise(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_rotate_int8_convrot_weight(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_dequantize_int8_convrot_weight_dtype(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_quantize_nvfp4(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_dequantize_nvfp4(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_int8_linear(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
/* int8_linear's quantizer and epilogue on their own, over p->int8_linear as one chunk
 * (ops/linear_parts.c: a library's GEMM between them). */
ckc_status ckc_cpu_entry_int8_linear_quantize(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_int8_linear_epilogue(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_apply_rope1(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_quantize_per_tensor_fp8(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_dequantize_per_tensor_fp8(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_stochastic_rounding_fp8(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_rms_rope1(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_rms_gated_residual(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_quantize_mxfp8(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_dequantize_mxfp8(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_quantize_convrot_w4a4_weight(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_dequantize_convrot_w4a4_weight(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_prepare_int4_weight_for_int8_linear(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_convrot_w4a4_linear(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_dequantize_w4a8_int8_weight(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_quantize_w4a8_int8_weight(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_cpu_entry_gemv_awq_w4a16(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);

/* ---- the device (cpu/dispatch.c) ---- */

/* Once per process: starts the thread pool and picks the best instruction set
 * (the one COMFY_KITCHEN_C_CPU_ISA names is selected when the settings arrive). */
void ckc_cpu_init(void);

/* The instruction set of the kernels in use ("baseline", "avx2", "avx512"). */
const char *ckc_cpu_isa(void);

/* Selects an instruction set by name; 0 if unknown or not supported by this CPU or build. */
int ckc_cpu_select(const char *isa);

/* Names of the instruction sets this build and CPU can run, best first, NULL-terminated. */
const char *const *ckc_cpu_available(void);

/* Who runs the kernels' parallel loops: "openmp" (torch's OpenMP team) or "pool" (parallel.c). */
const char *ckc_cpu_threads(void);

#endif /* CKC_CPU_CPU_H */
