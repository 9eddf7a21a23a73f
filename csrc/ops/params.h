/* Parameter blocks handed from the op layer (csrc/ops/) to a device's kernels
 * (csrc/cpu/ now, the CUDA launchers later).  Plain pointers and sizes: shapes
 * are already validated, outputs already allocated. */
#ifndef CKC_OPS_PARAMS_H
#define CKC_OPS_PARAMS_H

#include <stdint.h>

#include "math/float_bits.h"

/* How a dequantization scale maps onto q viewed as [rows, cols]. */
typedef enum {
    CKC_SCALE_SCALAR = 0,  /* one value */
    CKC_SCALE_PER_ROW = 1, /* rows values */
    CKC_SCALE_FULL = 2     /* rows * cols values */
} ckc_scale_mode;

/* Row-wise int8 quantization of x[rows, cols], optionally after rotating each
 * group of `group` columns by the regular Hadamard matrix. */
typedef struct {
    const void *x;
    ckc_float_kind kind;
    int64_t rows;
    int64_t cols;
    int64_t group;       /* 0: no rotation */
    const void *noise;   /* NULL: nearest even; else uniform noise, same type/shape as x */
    int8_t *q;
    float *scale;        /* rows values */
} ckc_int8_rowwise_params;

/* Tensor-wise int8 quantization with one scale. */
typedef struct {
    const void *x;
    ckc_float_kind kind;
    int64_t numel;
    const void *noise;
    int compute_scale;   /* 1: write max(absmax/127, 1e-30) to *scale first */
    float *scale;        /* one value, read (and maybe written) */
    int8_t *q;
} ckc_int8_tensorwise_params;

/* out[rows, cols] = x rotated group-wise by the Hadamard matrix, in x's type. */
typedef struct {
    const void *x;
    void *out;
    ckc_float_kind kind;
    int64_t rows;
    int64_t cols;
    int64_t group;
} ckc_hadamard_rows_params;

/* out = round_out(q * scale), then optionally rotated group-wise. */
typedef struct {
    const int8_t *q;
    const float *scale;
    ckc_scale_mode scale_mode;
    void *out;
    ckc_float_kind out_kind;
    int64_t rows;
    int64_t cols;
    int64_t group;       /* 0: no rotation */
} ckc_int8_dequant_params;

/* NVFP4 quantization of x[rows, cols] into codes qx[out_rows, out_cols / 2] and
 * swizzled e4m3 scales; rows/cols past the input read as zeros (pad_16x).  With
 * group > 0 each group of columns is first rotated by the regular Hadamard
 * matrix and rounded to x's type (cols % group == 0, so only rows are padded). */
typedef struct {
    const void *x;
    ckc_float_kind kind;
    int64_t rows;
    int64_t cols;
    int64_t out_rows;
    int64_t out_cols;
    int64_t group;       /* 0: no rotation; else 16, 64 or 256 */
    const float *per_tensor_scale;
    uint8_t *qx;
    uint8_t *scales;     /* pre-zeroed, [roundup(out_rows,128), roundup(out_cols/16,4)] */
    int hi_first;
} ckc_nvfp4_quant_params;

typedef struct {
    const uint8_t *qx;
    const float *per_tensor_scale;
    const uint8_t *scales;
    void *out;
    ckc_float_kind out_kind;
    int64_t rows;
    int64_t cols;        /* output columns: 2 * qx columns */
    int hi_first;
} ckc_nvfp4_dequant_params;

#endif /* CKC_OPS_PARAMS_H */
