/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU device's entries (cpu/cpu.h): each hands its member of the op's
 * parameter block to the kernels of the instruction set in use.  The union
 * member, the kernel table's member and the entry share the op's name. */
#include "cpu.h"
#include "kernels.h"

#define CKC_CPU_ENTRY(op)                                                                 \
    ckc_status ckc_cpu_entry_##op(const ckc_op_params *p, ckc_exec *exec, ckc_error *err) \
    {                                                                                     \
        return ckc_cpu()->op(&p->op, exec->nthreads, err);                                \
    }

CKC_CPU_ENTRY(quantize_int8_rowwise)
CKC_CPU_ENTRY(quantize_int8_tensorwise)
CKC_CPU_ENTRY(rotate_int8_convrot_weight)
CKC_CPU_ENTRY(dequantize_int8_convrot_weight_dtype)
CKC_CPU_ENTRY(quantize_nvfp4)
CKC_CPU_ENTRY(dequantize_nvfp4)

/* int8_linear chains several kernels of the table (cpu/linear.c). */
ckc_status
ckc_cpu_entry_int8_linear(const ckc_op_params *p, ckc_exec *exec, ckc_error *err)
{
    return ckc_cpu_int8_linear(&p->int8_linear, exec->nthreads, err);
}

/* Its quantizer and epilogue, all of p's rows as one chunk (cpu/linear.c). */
ckc_status
ckc_cpu_entry_int8_linear_quantize(const ckc_op_params *p, ckc_exec *exec, ckc_error *err)
{
    return ckc_cpu_linear_quantize_chunk(&p->int8_linear, 0, p->int8_linear.rows, exec->nthreads, err);
}

ckc_status
ckc_cpu_entry_int8_linear_epilogue(const ckc_op_params *p, ckc_exec *exec, ckc_error *err)
{
    return ckc_cpu_linear_epilogue_chunk(&p->int8_linear, 0, p->int8_linear.rows, exec->nthreads, err);
}

CKC_CPU_ENTRY(apply_rope1)
CKC_CPU_ENTRY(quantize_per_tensor_fp8)
CKC_CPU_ENTRY(dequantize_per_tensor_fp8)
CKC_CPU_ENTRY(stochastic_rounding_fp8)
CKC_CPU_ENTRY(rms_rope1)
CKC_CPU_ENTRY(rms_gated_residual)
CKC_CPU_ENTRY(quantize_mxfp8)
CKC_CPU_ENTRY(dequantize_mxfp8)
CKC_CPU_ENTRY(quantize_convrot_w4a4_weight)
CKC_CPU_ENTRY(dequantize_convrot_w4a4_weight)
CKC_CPU_ENTRY(prepare_int4_weight_for_int8_linear)
CKC_CPU_ENTRY(convrot_w4a4_linear)
CKC_CPU_ENTRY(dequantize_w4a8_int8_weight)
CKC_CPU_ENTRY(quantize_w4a8_int8_weight)
CKC_CPU_ENTRY(gemv_awq_w4a16)
