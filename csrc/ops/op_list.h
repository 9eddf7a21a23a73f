/* SPDX-License-Identifier: Apache-2.0 */
/* The op functions of _C and _C_emu, each named as the comfy_kitchen op it
 * runs (the most general one where one C op serves several: the int8
 * dequantizer takes a group size and an output dtype).  X(name) stands for the
 * spec ckc_op_<name> (csrc/ops/<family>.c) and the module function <name>
 * (module/calls.c).  Which comfy_kitchen op each serves is said once, in
 * comfy_kitchen_c/op_list.py; tests/test_op_list.py holds the two lists
 * together: a C op that serves no op there, or an op there whose C op is
 * missing, fails with both named.  A name here without its spec fails the link. */
#ifndef CKC_OPS_OP_LIST_H
#define CKC_OPS_OP_LIST_H

#define CKC_OP_LIST(X)                                                                                   \
    X(quantize_int8_rowwise)                                                                             \
    X(quantize_int8_tensorwise)                                                                          \
    X(rotate_int8_convrot_weight)                                                                        \
    X(dequantize_int8_convrot_weight_dtype)                                                              \
    X(dequantize_int8_embedding)                                                                         \
    X(quantize_nvfp4)                                                                                    \
    X(dequantize_nvfp4)                                                                                  \
    X(int8_linear)                                                                                       \
    X(int8_linear_quantize)                                                                              \
    X(int8_linear_epilogue)                                                                              \
    X(w4a8_linear)                                                                                       \
    X(scaled_mm_nvfp4)                                                                                   \
    X(apply_rope1)                                                                                       \
    X(quantize_per_tensor_fp8)                                                                           \
    X(dequantize_per_tensor_fp8)                                                                         \
    X(stochastic_rounding_fp8)                                                                           \
    X(rms_rope1)                                                                                         \
    X(rms_gated_residual)                                                                                \
    X(quantize_mxfp8)                                                                                    \
    X(dequantize_mxfp8)                                                                                  \
    X(scaled_mm_mxfp8)                                                                                   \
    X(quantize_convrot_w4a4_weight)                                                                      \
    X(dequantize_convrot_w4a4_weight)                                                                    \
    X(prepare_int4_weight_for_int8_linear)                                                               \
    X(convrot_w4a4_linear)                                                                               \
    X(dequantize_w4a8_int8_weight)                                                                       \
    X(quantize_w4a8_int8_weight)                                                                         \
    X(gemv_awq_w4a16)

#endif /* CKC_OPS_OP_LIST_H */
