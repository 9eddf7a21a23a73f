/* SPDX-License-Identifier: Apache-2.0 */
/* The tables of contract/codes.h. */
#include "contract/codes.h"

const ckc_named_code ckc_shared_ints[] = {
    {"MAX_EXTENT", CKC_MAX_EXTENT},
    {"GEMM_ROWS", CKC_GEMM_ROWS},
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
    {NULL, 0},
};

/* comfy_kitchen's input_act names. */
const ckc_named_code ckc_activation_codes[] = {
    {"none", CKC_ACT_NONE},
    {"gelu_tanh", CKC_ACT_GELU_TANH},
    {"swiglu", CKC_ACT_SWIGLU},
    {NULL, 0},
};
