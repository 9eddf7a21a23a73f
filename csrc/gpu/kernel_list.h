/* SPDX-License-Identifier: Apache-2.0 */
/* Every kernel the fatbins hold, written once: each family's instances as an
 * X-macro list of template arguments (plain integers: element kinds as
 * ckc_float_kind's values, activations as ckc_act's, tile modes as
 * CKC_TILE_*).  Both sides expand the same list:
 *   kernels/<family>.cu   one extern "C" __global__ kernel per entry
 *                         (CKC_KERNEL_INSTANCE, kernels/cuda_dialect.h), named
 *                         by CKC_KNAME: `family__a_b_c`, a name the driver's
 *                         cuModuleGetFunction finds and the performance model
 *                         (benchmarks/gpu_model.py) reads the arguments from;
 *   gpu/launch_*.c        a table of ckc_kernel descriptors, searched by
 *                         template arguments (ckc_kernel_find).
 * An instance missing from a list is missing on both sides: the launcher's
 * search fails with the family and arguments named, never a wrong kernel. */
#ifndef CKC_GPU_KERNEL_LIST_H
#define CKC_GPU_KERNEL_LIST_H

#define CKC_KPASTE_(a, b) a##b
#define CKC_KPASTE(a, b) CKC_KPASTE_(a, b)
#define CKC_KSTR_(x) #x
#define CKC_KSTR(x) CKC_KSTR_(x)
/* family__a, family__a_b, family__a_b_c, family__a_b_c_d */
#define CKC_KNAME1(f, a) CKC_KPASTE(CKC_KPASTE(f, __), a)
#define CKC_KNAME2(f, a, b) CKC_KPASTE(CKC_KPASTE(CKC_KNAME1(f, a), _), b)
#define CKC_KNAME3(f, a, b, c) CKC_KPASTE(CKC_KPASTE(CKC_KNAME2(f, a, b), _), c)
#define CKC_KNAME4(f, a, b, c, d) CKC_KPASTE(CKC_KPASTE(CKC_KNAME3(f, a, b, c), _), d)

/* ---- kernels/int8.cu ---- */

/* int8_rowwise_kernel<KIND, CHUNKS, ACT>: plain rows by 1, 2 or the most chunks
 * (4; float16 2), activated rows by one chunk (act 7: the column-wise ones). */
#define CKC_INT8_ROWWISE_KERNELS(X)                                                                             \
    X(0, 1, 0) X(0, 2, 0) X(0, 4, 0) X(0, 1, 1) X(0, 1, 2) X(0, 1, 4) X(0, 1, 7)                                 \
    X(1, 1, 0) X(1, 2, 0) X(1, 1, 1) X(1, 1, 2) X(1, 1, 4) X(1, 1, 7)                                            \
    X(2, 1, 0) X(2, 2, 0) X(2, 4, 0) X(2, 1, 1) X(2, 1, 2) X(2, 1, 4) X(2, 1, 7)
/* hadamard_rows_kernel<KIND, CHUNKS> */
#define CKC_HADAMARD_ROWS_KERNELS(X) X(0, 1) X(0, 2) X(0, 4) X(1, 1) X(1, 2) X(1, 4) X(2, 1) X(2, 2) X(2, 4)
/* int8_dequant_walk_kernel<KIND, PER_ROW>: the plain dequantizer's warp walk, by
 * output kind, for a per-row (1) or a single (0) scale. */
#define CKC_DEQUANT_WALK_KERNELS(X) X(0, 0) X(0, 1) X(1, 0) X(1, 1) X(2, 0) X(2, 1)
/* By element kind alone: int8_dequant_kernel, int8_dequant_rotated_kernel,
 * tensor_absmax_kernel, tensor_quantize_kernel, and the four NVFP4 kernels. */
#define CKC_KIND_KERNELS(X) X(0) X(1) X(2)

/* ---- kernels/int8_tile.cu ---- */

/* ckc_tile_rows_kernel<KIND, G, MODE, ACT>: codes (nearest, noise; swiglu for
 * 16-bit rows) for G = 0, 64, 256, 1024, and rotated values (mode 2) for G > 0. */
#define CKC_TILE_ROWS_KERNELS_G(X, k, g) X(k, g, 0, 0) X(k, g, 1, 0)
#define CKC_TILE_ROWS_KERNELS_KIND(X, k)                                                                        \
    CKC_TILE_ROWS_KERNELS_G(X, k, 0) CKC_TILE_ROWS_KERNELS_G(X, k, 64) CKC_TILE_ROWS_KERNELS_G(X, k, 256)          \
    CKC_TILE_ROWS_KERNELS_G(X, k, 1024) X(k, 64, 2, 0) X(k, 256, 2, 0) X(k, 1024, 2, 0)
#define CKC_TILE_ROWS_SWIGLU(X, k) X(k, 0, 0, 2) X(k, 64, 0, 2) X(k, 256, 0, 2) X(k, 1024, 0, 2)
#define CKC_TILE_ROWS_KERNELS(X)                                                                                \
    CKC_TILE_ROWS_KERNELS_KIND(X, 0) CKC_TILE_ROWS_KERNELS_KIND(X, 1) CKC_TILE_ROWS_KERNELS_KIND(X, 2)             \
    CKC_TILE_ROWS_SWIGLU(X, 1) CKC_TILE_ROWS_SWIGLU(X, 2)
/* ckc_tile_dequant_kernel<KIND, G>: rotated only (G > 0); plain rows take
 * int8_dequant_kernel's warp-coalesced walk. */
#define CKC_TILE_DEQUANT_KERNELS(X)                                                                             \
    X(0, 64) X(0, 256) X(0, 1024) X(1, 64) X(1, 256) X(1, 1024) X(2, 64) X(2, 256) X(2, 1024)

/* ---- kernels/linear.cu ---- */

/* linear_epilogue_kernel<VEC> */
#define CKC_EPILOGUE_KERNELS(X) X(1) X(8)

/* ---- kernels/rope.cu ---- */

/* rope_kernel<KIND, SPLIT, VEC>: every element kind, both layouts, vector units or pairs. */
#define CKC_ROPE_KERNELS(X)                                                                                     \
    X(0, 0, 0) X(0, 0, 1) X(0, 1, 0) X(0, 1, 1) X(1, 0, 0) X(1, 0, 1) X(1, 1, 0) X(1, 1, 1) X(2, 0, 0) X(2, 0, 1) \
    X(2, 1, 0) X(2, 1, 1)

/* ---- kernels/fp8.cu ---- */

/* fp8_quant_kernel, fp8_dequant_kernel, fp8_stochastic_kernel<KIND>: by x's (the
 * dequantizer: out's) element kind; the FP8 format is an argument. */
#define CKC_FP8_KERNELS(X) X(0) X(1) X(2)

/* ---- kernels/rope.cu: rms_rope ---- */

/* rms_rope_kernel<KIND, SPLIT>: every element kind, both layouts; one warp per row. */
#define CKC_RMS_ROPE_WARPS 8
#define CKC_RMS_ROPE_KERNELS(X) X(0, 0) X(0, 1) X(1, 0) X(1, 1) X(2, 0) X(2, 1)

/* ---- kernels/residual.cu ---- */

/* rms_gated_residual_kernel<KIND>: by the activation's kind; one warp per row
 * (CKC_RMS_ROPE_WARPS warps per block). */
#define CKC_RESIDUAL_KERNELS(X) X(0) X(1) X(2)

/* ---- kernels/mxfp8.cu ---- */

/* mxfp8_quant_kernel, mxfp8_dequant_kernel<KIND>: by x's (the dequantizer: out's) element kind. */
#define CKC_MXFP8_KERNELS(X) X(0) X(1) X(2)

/* ---- kernels/w4a4.cu ---- */

/* w4_quant_kernel, w4_dequant_kernel, w4_linear_kernel<KIND>: by x's (the
 * dequantizer's and the linear's: out's) element kind; w4_unpack_kernel is one. */
#define CKC_W4A4_KERNELS(X) X(0) X(1) X(2)

/* ---- kernels/w4a8.cu ---- */

/* w4a8_dequant_kernel<OUT>: the output's element kind (0 float32, 1 float16, 2 bfloat16)
 * or 3, the int8 grid. */
#define CKC_W4A8_KERNELS(X) X(0) X(1) X(2) X(3)
/* w4a8_gemv_kernel<BITS>: the codes' width (4 or 6). */
#define CKC_W4A8_GEMV_KERNELS(X) X(4) X(6)

/* ---- kernels/w4a8_quant.cu ---- */

/* w4a8_quant_kernel<STEP>: the quantizer's step (contract/w4a8_quant_plan.h): 1 a
 * thread per group (scales), 2 a thread per row (s_channel), 3 a thread per group
 * (stored scales, codes, correction). */
#define CKC_W4A8_QUANT_KERNELS(X) X(1) X(2) X(3)

/* ---- kernels/awq.cu ---- */

/* awq_gemv_kernel<KIND, VEC>: by the compute kind; VEC 1: 16-byte loads of the
 * packed weight (K and the group size multiples of 32, bases aligned), 0: one
 * column per lane (the scalar fallback). */
#define CKC_AWQ_KERNELS(X) X(0, 0) X(0, 1) X(1, 0) X(1, 1) X(2, 0) X(2, 1)

#endif /* CKC_GPU_KERNEL_LIST_H */
