/* SPDX-License-Identifier: Apache-2.0 */
/* CPU kernels (C, multi-threaded), built once per instruction set (baseline,
 * and AVX2 and AVX-512 on x86-64) and picked at run time for the CPU in use
 * (cpu/dispatch.c).  Each takes a validated parameter block and the thread
 * count, and returns CKC_OK or an error it filled.  The CPU device's own
 * table: the other layers see cpu/cpu.h. */
#ifndef CKC_CPU_KERNELS_H
#define CKC_CPU_KERNELS_H

#include "contract/params.h"
#include "contract/status.h"

typedef struct {
    const char *isa;
    ckc_status (*quantize_int8_rowwise)(const ckc_quantize_int8_rowwise_params *p, int nthreads, ckc_error *err);
    ckc_status (*quantize_int8_tensorwise)(const ckc_quantize_int8_tensorwise_params *p, int nthreads, ckc_error *err);
    ckc_status (*rotate_int8_convrot_weight)(const ckc_rotate_int8_convrot_weight_params *p, int nthreads,
                ckc_error *err);
    ckc_status (*dequantize_int8_convrot_weight_dtype)(const ckc_dequantize_int8_convrot_weight_dtype_params *p,
                int nthreads, ckc_error *err);
    ckc_status (*quantize_nvfp4)(const ckc_quantize_nvfp4_params *p, int nthreads, ckc_error *err);
    ckc_status (*dequantize_nvfp4)(const ckc_dequantize_nvfp4_params *p, int nthreads, ckc_error *err);
    /* int8_linear (linear_impl.h) */
    ckc_status (*int8_gemm)(const ckc_int8_gemm_params *p, int nthreads, ckc_error *err);
    ckc_status (*linear_epilogue)(const ckc_linear_epilogue_params *p, int nthreads, ckc_error *err);
    ckc_status (*input_act)(const ckc_act_rows_params *p, int nthreads, ckc_error *err);
    /* RoPE (rope_impl.h) */
    ckc_status (*apply_rope1)(const ckc_apply_rope1_params *p, int nthreads, ckc_error *err);
    /* per-tensor FP8 (fp8_impl.h) */
    ckc_status (*quantize_per_tensor_fp8)(const ckc_quantize_per_tensor_fp8_params *p, int nthreads,
                ckc_error *err);
    ckc_status (*dequantize_per_tensor_fp8)(const ckc_dequantize_per_tensor_fp8_params *p, int nthreads,
                ckc_error *err);
    ckc_status (*stochastic_rounding_fp8)(const ckc_stochastic_rounding_fp8_params *p, int nthreads,
                ckc_error *err);
    /* rms_rope (rms_rope_impl.h) */
    ckc_status (*rms_rope1)(const ckc_rms_rope1_params *p, int nthreads, ckc_error *err);
    /* rms_gated_residual (residual_impl.h) */
    ckc_status (*rms_gated_residual)(const ckc_rms_gated_residual_params *p, int nthreads, ckc_error *err);
    /* MXFP8 (mxfp8_impl.h) */
    ckc_status (*quantize_mxfp8)(const ckc_quantize_mxfp8_params *p, int nthreads, ckc_error *err);
    ckc_status (*dequantize_mxfp8)(const ckc_dequantize_mxfp8_params *p, int nthreads, ckc_error *err);
    /* ConvRot W4A4 (w4a4_impl.h) */
    ckc_status (*quantize_convrot_w4a4_weight)(const ckc_quantize_convrot_w4a4_weight_params *p, int nthreads,
                ckc_error *err);
    ckc_status (*dequantize_convrot_w4a4_weight)(const ckc_dequantize_convrot_w4a4_weight_params *p,
                int nthreads, ckc_error *err);
    ckc_status (*prepare_int4_weight_for_int8_linear)(const ckc_prepare_int4_weight_for_int8_linear_params *p,
                int nthreads, ckc_error *err);
    ckc_status (*convrot_w4a4_linear)(const ckc_convrot_w4a4_linear_params *p, int nthreads, ckc_error *err);
    /* W4A8 / W6A8 weight decode (w4a8_impl.h) */
    ckc_status (*dequantize_w4a8_int8_weight)(const ckc_dequantize_w4a8_int8_weight_params *p, int nthreads,
                ckc_error *err);
    /* W4A8 / W6A8 quantizer (w4a8_quant_impl.h) */
    ckc_status (*quantize_w4a8_int8_weight)(const ckc_quantize_w4a8_int8_weight_params *p, int nthreads,
                ckc_error *err);
    /* AWQ W4A16 (awq_impl.h) */
    ckc_status (*gemv_awq_w4a16)(const ckc_gemv_awq_w4a16_params *p, int nthreads, ckc_error *err);
} ckc_cpu_kernels;

/* The kernels in use (the best the CPU supports, unless set otherwise). */
const ckc_cpu_kernels *ckc_cpu(void);

/* int8_linear on the CPU, chunk by chunk through the scratch of p (cpu/linear.c). */
ckc_status ckc_cpu_int8_linear(const ckc_int8_linear_params *p, int nthreads, ckc_error *err);

/* One chunk's quantizer (activation, rotation, row-wise int8 into p->q and
 * p->x_scale) and epilogue (p->acc into its output rows), for ops/linear_parts.c. */
ckc_status ckc_cpu_linear_quantize_chunk(const ckc_int8_linear_params *p, int64_t r0, int64_t rows, int nthreads,
                                         ckc_error *err);
ckc_status ckc_cpu_linear_epilogue_chunk(const ckc_int8_linear_params *p, int64_t r0, int64_t rows, int nthreads,
                                         ckc_error *err);

#endif /* CKC_CPU_KERNELS_H */
