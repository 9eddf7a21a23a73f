/* SPDX-License-Identifier: Apache-2.0 */
/* The tables of contract/codes.h. */
#include "contract/codes.h"
#include "contract/tensor.h"

/* Python reads a float dtype's code (DTYPES) as the kernels' float kind too
 * (norm_kind, comfy_kitchen's output_dtype_code): the two numberings agree. */
typedef char ckc_float_kinds_are_dtype_codes[CKC_F32 == (int)CKC_DTYPE_FLOAT32 && CKC_F16 == (int)CKC_DTYPE_FLOAT16 &&
                                                     CKC_BF16 == (int)CKC_DTYPE_BFLOAT16
                                                 ? 1
                                                 : -1];

const ckc_named_code ckc_shared_ints[] = {
    {"MAX_EXTENT", CKC_MAX_EXTENT},
    {"GEMM_ROWS", CKC_GEMM_ROWS},
    {"CALL_HOST_AS_DEVICE", CKC_CALL_HOST_AS_DEVICE},
    {"CALL_DEVICE_SHIFT", CKC_CALL_DEVICE_SHIFT},
    {"SCALE_SCALAR", CKC_SCALE_SCALAR},
    {"SCALE_PER_ROW", CKC_SCALE_PER_ROW},
    {"SCALE_FULL", CKC_SCALE_FULL},
    {"HADAMARD_MIN_GROUP", CKC_HADAMARD_MIN_GROUP},
    {"HADAMARD_MAX_GROUP", CKC_HADAMARD_MAX_GROUP},
    {"NVFP4_BLOCK", CKC_NVFP4_BLOCK},
    {"NVFP4_MIN_GROUP", CKC_NVFP4_MIN_GROUP},
    {"NVFP4_MAX_GROUP", CKC_NVFP4_MAX_GROUP},
    {"NVFP4_SCALE_TILE_ROWS", CKC_NVFP4_SCALE_TILE_ROWS},
    {"NVFP4_SCALE_TILE_COLS", CKC_NVFP4_SCALE_TILE_COLS},
    /* the modulations: this package's activation codes, not comfy_kitchen input_act names */
    {"ACT_MODULATE", CKC_ACT_MODULATE},
    {"ACT_RMS_MODULATE", CKC_ACT_RMS_MODULATE},
    {"MXFP8_BLOCK", CKC_MXFP8_BLOCK},
    {NULL, 0},
};

/* comfy_kitchen's input_act names. */
const ckc_named_code ckc_activation_codes[] = {
    {"none", CKC_ACT_NONE},
    {"gelu_tanh", CKC_ACT_GELU_TANH},
    {"swiglu", CKC_ACT_SWIGLU},
    {"rms_norm", CKC_ACT_RMS_NORM},
    {"situ", CKC_ACT_SITU},
    {NULL, 0},
};
