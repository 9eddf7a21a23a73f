/* SPDX-License-Identifier: Apache-2.0 */
/* The table of every op the extension exposes (see op.h). */
#include "op.h"

extern const ckc_op_spec ckc_op_int8_rowwise;
extern const ckc_op_spec ckc_op_int8_tensorwise;
extern const ckc_op_spec ckc_op_rotate_rows;
extern const ckc_op_spec ckc_op_int8_dequant;
extern const ckc_op_spec ckc_op_int8_embedding;
extern const ckc_op_spec ckc_op_nvfp4_quant;
extern const ckc_op_spec ckc_op_nvfp4_dequant;
extern const ckc_op_spec ckc_op_int8_linear;
extern const ckc_op_spec ckc_op_int8_linear_quantize;
extern const ckc_op_spec ckc_op_int8_linear_epilogue;
extern const ckc_op_spec ckc_op_nvfp4_gemm;

const ckc_op_spec *const ckc_op_table[] = {
    &ckc_op_int8_rowwise,
    &ckc_op_int8_tensorwise,
    &ckc_op_rotate_rows,
    &ckc_op_int8_dequant,
    &ckc_op_int8_embedding,
    &ckc_op_nvfp4_quant,
    &ckc_op_nvfp4_dequant,
    &ckc_op_int8_linear,
    &ckc_op_int8_linear_quantize,
    &ckc_op_int8_linear_epilogue,
    &ckc_op_nvfp4_gemm,
    NULL,
};
