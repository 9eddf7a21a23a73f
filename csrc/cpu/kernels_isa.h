/* SPDX-License-Identifier: Apache-2.0 */
/* One instruction-set build of all CPU kernels: included by kernels_<isa>.c,
 * which defines CKC_CPU_ISA first and is compiled with that ISA's flags.
 * Everything here is static except the table ckc_cpu_kernels_<isa>. */
#include <string.h>

#include "platform/fresh_pages.h"
#include "kernels.h"
#include "parallel.h"
#include "rows.h"
#include "scratch.h"

#include "rms_impl.h"
#include "int8_impl.h"
#include "nvfp4_impl.h"
#include "linear_impl.h"
#include "rope_impl.h"
#include "fp8_impl.h"
#include "rms_rope_impl.h"
#include "residual_impl.h"
#include "mxfp8_impl.h"
#include "w4a4_impl.h"
#include "w4a8_impl.h"
#include "w4a8_quant_impl.h"
#include "awq_impl.h"

#define CKC_CPU_TABLE_NAME2(isa) ckc_cpu_kernels_##isa
#define CKC_CPU_TABLE_NAME(isa) CKC_CPU_TABLE_NAME2(isa)
#define CKC_CPU_STR2(isa) #isa
#define CKC_CPU_STR(isa) CKC_CPU_STR2(isa)

const ckc_cpu_kernels CKC_CPU_TABLE_NAME(CKC_CPU_ISA) = {
    CKC_CPU_STR(CKC_CPU_ISA),
    cpu_int8_rowwise,
    cpu_int8_tensorwise,
    cpu_hadamard_rows,
    cpu_int8_dequant,
    cpu_nvfp4_quant,
    cpu_nvfp4_dequant,
    cpu_int8_gemm,
    cpu_linear_epilogue,
    cpu_input_act,
    cpu_apply_rope1,
    cpu_fp8_quant,
    cpu_fp8_dequant,
    cpu_fp8_stochastic,
    cpu_rms_rope1,
    cpu_rms_gated_residual,
    cpu_mxfp8_quant,
    cpu_mxfp8_dequant,
    cpu_w4a4_quant,
    cpu_w4a4_dequant,
    cpu_w4a4_unpack,
    cpu_w4a4_linear,
    cpu_w4a8_dequant,
    cpu_w4a8_quant,
    cpu_awq_gemv,
};
