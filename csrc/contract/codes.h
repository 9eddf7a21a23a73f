/* SPDX-License-Identifier: Apache-2.0 */
/* Codes and limits that Python and C share, written here once: the module
 * exports them as attributes of _C (csrc/module/shared.c) and
 * comfy_kitchen_c reads them from there, so a change here reaches both.  Codes
 * the scalar math owns (activations, group sizes, NVFP4 constants) stay in
 * csrc/math and are listed from there. */
#ifndef CKC_CONTRACT_CODES_H
#define CKC_CONTRACT_CODES_H

#include <stdint.h>

#include "math/activation.h"
#include "math/hadamard.h"
#include "math/mxfp8.h"
#include "math/nvfp4.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest row count and row length the kernels index (rows and columns each
 * stay below 2^31, so CUDA grids and in-row offsets fit 32 bits). */
#define CKC_MAX_EXTENT INT64_C(2147483647)

/* The GPU GEMM's row count is padded to a multiple of this (comfy_kitchen pads M
 * to 32 for the int8 GEMM: cuBLASLt has rejected small M). */
#define CKC_GEMM_ROWS 32

/* Bits of an op function's `check` argument above its checking mode: the call
 * runs host memory as the device memory of CUDA device (check >> 8), through
 * the GPU entry and the CUDA driver.  Only the test suite's stand-in driver
 * (tests/cuda_standin) accepts it: it is how the driver path runs on a machine
 * without a GPU (comfy_kitchen_c/testing.py, standin_driver()). */
#define CKC_CALL_HOST_AS_DEVICE 16
#define CKC_CALL_DEVICE_SHIFT 8

/* How a dequantization scale maps onto q viewed as [rows, cols]. */
typedef enum {
    CKC_SCALE_SCALAR = 0,  /* one value */
    CKC_SCALE_PER_ROW = 1, /* rows values */
    CKC_SCALE_FULL = 2     /* rows * cols values */
} ckc_scale_mode;

/* A named code, for the tables below (NULL-terminated). */
typedef struct {
    const char *name;
    int64_t value;
} ckc_named_code;

/* Integer limits and codes, exported under their names (MAX_EXTENT, ...). */
extern const ckc_named_code ckc_shared_ints[];

/* input_act names of int8_linear and their codes (ckc_act). */
extern const ckc_named_code ckc_activation_codes[];

#ifdef __cplusplus
}
#endif

#endif /* CKC_CONTRACT_CODES_H */
