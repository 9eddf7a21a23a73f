/* SPDX-License-Identifier: Apache-2.0 */
/* Parameter blocks handed from the op layer (csrc/ops/) to a device's entry
 * (the CPU kernels of csrc/cpu/, the GPU launchers of kernels/).  Plain
 * pointers and sizes: shapes are already validated, outputs already allocated. */
#ifndef CKC_CONTRACT_PARAMS_H
#define CKC_CONTRACT_PARAMS_H

#include <stdint.h>

#include "contract/codes.h"
#include "math/float_bits.h"
#include "math/linear.h"

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
} ckc_quantize_int8_rowwise_params;

/* Tensor-wise int8 quantization with one scale. */
typedef struct {
    const void *x;
    ckc_float_kind kind;
    int64_t numel;
    const void *noise;
    int compute_scale;   /* 1: write max(absmax/127, 1e-30) to *scale first */
    float *scale;        /* one value, read (and maybe written) */
    int8_t *q;
} ckc_quantize_int8_tensorwise_params;

/* out[rows, cols] = x rotated group-wise by the Hadamard matrix, in x's type. */
typedef struct {
    const void *x;
    void *out;
    ckc_float_kind kind;
    int64_t rows;
    int64_t cols;
    int64_t group;
} ckc_rotate_int8_convrot_weight_params;

/* out = round_out(q * scale), then optionally rotated group-wise.  With an
 * index (dequantize_int8_embedding), output row r is q's row index[r] and the
 * scale's rows are q's (scalar, per q row, or per element of q). */
typedef struct {
    const int8_t *q;
    const float *scale;
    ckc_scale_mode scale_mode;
    void *out;
    ckc_float_kind out_kind;
    int64_t rows;        /* output rows */
    int64_t cols;
    int64_t group;       /* 0: no rotation */
    const void *index;   /* NULL, or `rows` indices (int32 or int64) into q's rows */
    int index_is_64;
    int64_t q_rows;      /* q's rows: rows without an index */
} ckc_dequantize_int8_convrot_weight_dtype_params;

/* The q row of output row r: r itself, or its index; -1 for an index out of
 * [0, q_rows) (the CPU op rejects those first; the GPU writes NaN rows). */
CKC_HD int64_t
ckc_dequant_source_row(const void *index, int index_is_64, int64_t q_rows, int64_t r)
{
    int64_t i;
    if (index == NULL) {
        return r;
    }
    i = index_is_64 ? ((const int64_t *)index)[r] : (int64_t)((const int32_t *)index)[r];
    return i >= 0 && i < q_rows ? i : -1;
}

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
    uint8_t *scales;     /* [roundup(out_rows,128), roundup(out_cols/16,4)], all written (padding: 0) */
    int hi_first;
} ckc_quantize_nvfp4_params;

typedef struct {
    const uint8_t *qx;
    const float *per_tensor_scale;
    const uint8_t *scales;
    void *out;
    ckc_float_kind out_kind;
    int64_t rows;
    int64_t cols;        /* output columns: 2 * qx columns */
    int hi_first;
} ckc_dequantize_nvfp4_params;

/* ---- int8_linear and the GEMMs under it (csrc/ops/linear.c) ---- */

/* c[m, n] = sum_k a[m, k] * b[n, k] in int32 (exact): a is the quantized
 * activation, b the int8 weight, both with k contiguous ("TN" for cuBLASLt). */
typedef struct {
    const int8_t *a;
    int64_t lda;
    const int8_t *b;
    int64_t ldb;
    int32_t *c;
    int64_t ldc;
    int64_t m;
    int64_t n;
    int64_t k;
} ckc_int8_gemm_params;

/* out[r, j] = the epilogue of csrc/math/linear.h on acc[r, j] (bias, residual
 * form), for the rows r of one chunk. */
typedef struct {
    const int32_t *acc;
    int64_t ldacc;
    const float *x_scale;
    const float *w_scale;
    int w_per_channel;       /* w_scale holds n values, else one */
    ckc_linear_terms terms;  /* the residual from the chunk's first row */
    void *out;               /* the chunk's first output row; row stride n */
    ckc_float_kind out_kind;
    int64_t rows;
    int64_t n;
} ckc_linear_epilogue_params;

/* int8_linear: y[m, :] = epilogue(rowwise_quant(rotate(act(x[m, :]))) . weight^T),
 * rows processed in chunks of chunk_rows through the scratch buffers below (sized
 * by the op layer from the caller's memory bound).  The activation's row
 * factors (rms_norm) are computed per chunk into row_factor. */
typedef struct {
    const void *x;           /* [rows, x_stride] */
    ckc_float_kind kind;
    int64_t x_stride;        /* k * ckc_act_width(act) */
    int act;                 /* ckc_act */
    ckc_act_args act_args;   /* row_factor: set per chunk from the scratch below */
    int64_t group;           /* ConvRot group, 0: none */
    int64_t rows;
    int64_t k;
    int64_t n;
    const int8_t *w;         /* [n, k] with row stride ldw (padded copies: ldw = k_pad) */
    int64_t ldw;
    const float *w_scale;
    int w_per_channel;
    ckc_linear_terms terms;  /* bias, residual [rows, n] and its scale */
    void *out;               /* [rows, n] */
    ckc_float_kind out_kind;
    /* scratch: chunk_rows rows of each (on the GPU GEMM path, room for chunk_rows
     * rounded up to CKC_GEMM_ROWS) */
    int64_t chunk_rows;
    int8_t *q;               /* [chunk_rows, ldq], columns k..ldq-1 zero */
    int64_t ldq;
    float *x_scale;          /* [chunk_rows] */
    int32_t *acc;            /* [chunk_rows, ldacc] (NULL on the GPU's single-row path) */
    int64_t ldacc;
    void *act_rows;          /* CPU only: [chunk_rows, k] activated rows in x's type, or NULL */
    float *row_factor;       /* GPU: [chunk_rows] rms_norm row factors, or NULL */
} ckc_int8_linear_params;

/* The CPU's activation pre-pass of int8_linear: dst[r, :k] = act(src[r, :]) in
 * the element type, for the rows of one chunk (rms_norm's row factor computed
 * per row on the way). */
typedef struct {
    const void *src;         /* [rows, k * ckc_act_width(act)] */
    void *dst;               /* [rows, k] */
    ckc_float_kind kind;
    int act;
    ckc_act_args args;
    int64_t rows;
    int64_t k;
} ckc_act_rows_params;

/* NVFP4 GEMM: out[m, n] = alpha * sum_k dec(a)[m, k] dec(b)[n, k] + bias[n], with
 * dec = e2m1 code * its block's e4m3 scale (swizzled layout), k values per row. */
typedef struct {
    const uint8_t *a;        /* [m, k/2] packed, high nibble first */
    const uint8_t *b;        /* [n, k/2] */
    const uint8_t *scale_a;  /* swizzled [roundup(m,128), roundup(k/16,4)] */
    const uint8_t *scale_b;
    const float *alpha_beta; /* device: {alpha, 0} */
    const void *bias;        /* n values of out's type, or NULL */
    void *out;
    ckc_float_kind out_kind;
    int64_t m;
    int64_t n;
    int64_t k;
} ckc_scaled_mm_nvfp4_params;

/* ---- RoPE (csrc/ops/rope.c): apply_rope1 serves the 8 apply_rope ops ---- */

#define CKC_ROPE_MAX_LEAD 6

/* out[r, :] = x[r, :] rotated by the frequencies of row r: freqs[fr][dim/2][2][2]
 * (float32) with fr = sum_d coord_d(r) * freq_stride[d] over x's leading dims
 * (collapsed where the broadcast pattern allows; last fastest).  Interleaved:
 * out[2k+j] = pair(f[k][j][0], f[k][j][1], x[2k], x[2k+1]); split half (h = dim/2):
 * out[k] = pair(f[k][0][0], f[k][0][1], x[k], x[k+h]),
 * out[k+h] = pair(f[k][1][1], f[k][1][0], x[k+h], x[k]) (math/rope.h).  out may be
 * x itself (the in-place ops): every kernel reads a pair's two inputs before it
 * writes either output. */
typedef struct {
    const void *x;
    void *out;
    const float *freqs;
    ckc_float_kind kind;     /* of x and out */
    int split_half;
    int64_t rows;
    int64_t dim;             /* even */
    int32_t lead_ndim;       /* 1 .. CKC_ROPE_MAX_LEAD */
    int64_t lead[CKC_ROPE_MAX_LEAD];
    int64_t freq_stride[CKC_ROPE_MAX_LEAD];  /* in freq rows; 0: broadcast */
} ckc_apply_rope1_params;

/* The first of row r's dim * 2 frequencies. */
CKC_HD const float *
ckc_rope_freq_row(const ckc_apply_rope1_params *p, int64_t r)
{
    int64_t fr = 0;
    int d;
    for (d = p->lead_ndim - 1; d >= 0; d--) {
        fr += (r % p->lead[d]) * p->freq_stride[d];
        r /= p->lead[d];
    }
    return p->freqs + fr * p->dim * 2;
}
/* ---- per-tensor FP8 (csrc/ops/fp8.c): numel elements in the flat order ---- */

/* q = e4m3/e5m2 of clamp(x * round_x(1 / *scale)). */
typedef struct {
    const void *x;
    ckc_float_kind kind;
    int64_t numel;
    const float *scale;      /* one value */
    uint8_t *q;
    int e5m2;                /* 0: float8_e4m3fn, 1: float8_e5m2 */
} ckc_quantize_per_tensor_fp8_params;

/* out = round_out(decode(x) * round_out(*scale)). */
typedef struct {
    const uint8_t *x;
    int e5m2;
    int64_t numel;
    const float *scale;      /* one value (exact float32 of eager's scale) */
    void *out;
    ckc_float_kind out_kind;
} ckc_dequantize_per_tensor_fp8_params;

/* q = eager's stochastic rounding of x (as float16) with one noise byte each. */
typedef struct {
    const void *x;
    ckc_float_kind kind;
    int64_t numel;
    const uint8_t *rng;
    uint8_t *q;
    int e5m2;
} ckc_stochastic_rounding_fp8_params;

/* ---- gemv_awq_w4a16 (csrc/ops/awq.c) ---- */

/* out[m, n] = ckc_awq_output(sum_k x[m, k] W[n, k]) with W of math/awq.h:
 * qweight (n, k/2) packed 4-bit codes, wscales and wzeros (k/group, n). */
typedef struct {
    const float *x;              /* (m, k): x in the compute type, as float32 */
    const uint8_t *qweight;      /* (n, k/2) */
    const void *wscales;         /* (k/group, n), kind */
    const void *wzeros;          /* (k/group, n), kind */
    const void *bias;            /* (n), bias_kind; NULL: none */
    void *out;                   /* (m, n), out_kind */
    ckc_float_kind kind;
    ckc_float_kind bias_kind;
    ckc_float_kind out_kind;
    int64_t m, n, k, group;
} ckc_gemv_awq_w4a16_params;

/* One block of any op, as the router holds it: the op's prepare function fills
 * its member and the device entry reads it.  An op with a new parameter block
 * adds it here. */
typedef union {
    ckc_quantize_int8_rowwise_params quantize_int8_rowwise;
    ckc_quantize_int8_tensorwise_params quantize_int8_tensorwise;
    ckc_rotate_int8_convrot_weight_params rotate_int8_convrot_weight;
    ckc_dequantize_int8_convrot_weight_dtype_params dequantize_int8_convrot_weight_dtype;
    ckc_quantize_nvfp4_params quantize_nvfp4;
    ckc_dequantize_nvfp4_params dequantize_nvfp4;
    ckc_int8_linear_params int8_linear;
    ckc_scaled_mm_nvfp4_params scaled_mm_nvfp4;
    ckc_apply_rope1_params apply_rope1;
    ckc_quantize_per_tensor_fp8_params quantize_per_tensor_fp8;
    ckc_dequantize_per_tensor_fp8_params dequantize_per_tensor_fp8;
    ckc_stochastic_rounding_fp8_params stochastic_rounding_fp8;
    ckc_gemv_awq_w4a16_params gemv_awq_w4a16;
} ckc_op_params;

#endif /* CKC_CONTRACT_PARAMS_H */
