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

/* ---- W4A8 / W6A8 weights (csrc/ops/w4a8.c): [rows, k] decoded from codes ---- */

/* out = the int8 grid of the codes (out_int8), else int8 * s_channel (+ correction)
 * rounded to out_kind (csrc/math/w4a8.h). */
typedef struct {
    const uint8_t *q;        /* canonical rows of k * bits / 8 bytes, or the MMA records (packed) */
    int64_t rows;
    int64_t k;
    int bits;                /* 4 or 6 */
    int packed;              /* 1: MMA records with their e4m3 scales (s_rel unused; group 16) */
    int64_t group;           /* columns per s_rel value */
    const void *s_rel;       /* [rows, k / group] float32, or e4m3 bytes (s_e4m3) */
    int s_e4m3;
    const float *codebook;   /* 16 levels, or NULL: uniform */
    const float *s_channel;  /* [rows] (float output only) */
    const void *correction;  /* [k / group, rows] of corr_kind, or NULL */
    ckc_float_kind corr_kind;
    void *out;
    int out_int8;            /* 1: int8 out; 0: float out of out_kind */
    ckc_float_kind out_kind;
} ckc_dequantize_w4a8_int8_weight_params;

/* The W4A8 / W6A8 quantizer on a rotated weight [rows, k] (math/w4a8_quant.h):
 * per group its scale (into scale) and largest |shifted| value (into shifted),
 * per row s_channel, then per group the stored scale s_rel, the codes into q
 * and (ASYM) the correction. */
typedef struct {
    const void *w;           /* the rotated weight [rows, k] */
    ckc_float_kind kind;
    const float *noise;      /* [rows, k] uniform noise of stochastic rounding, or NULL */
    const float *table;      /* the 16-level codebook (ALS at 4 bits), or NULL */
    int64_t rows;
    int64_t k;
    int64_t group;
    int bits;                /* 4 or 6 */
    int mode;                /* ckc_w4a8q_mode */
    int search;              /* 6 bits: the grid search of the stored scale */
    int s_e4m3;              /* s_rel as e4m3 bytes, else float32 */
    float *scale;            /* scratch [rows, k / group]: the groups' scales */
    float *shifted;          /* scratch [rows, k / group]: their largest |shifted| value */
    uint8_t *q;              /* [rows, k * bits / 8] the codes (canonical storage) */
    void *s_rel;             /* [rows, k / group] */
    float *s_channel;        /* [rows] */
    void *correction;        /* [k / group, rows] of corr_kind (ASYM), or NULL */
    ckc_float_kind corr_kind;
} ckc_quantize_w4a8_int8_weight_params;

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
    /* w4a8_linear (GPU): the weight as W4A8 / W6A8 codes, decoded to the int8
     * grid decode_rows weight rows at a time into the scratch's decode.out
     * ([decode_rows, ldw]) right before the GEMM of those rows' columns; w is
     * then NULL.  decode_rows 0: w is the int8 weight. */
    ckc_dequantize_w4a8_int8_weight_params decode;
    int64_t decode_rows;
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

/* ---- rms_rope (csrc/ops/rope.c): rms_rope1 serves the 8 rms_rope ops ---- */

/* out[r, :] = RoPE of rms_norm(x[r, :], scale, eps) (math/rms_rope.h): the row's
 * first `rope.dim` values rotated as apply_rope1 rotates a row of that length
 * (rope.dim is the rotated prefix, rot_dim; its freqs rows hold rope.dim * 2
 * floats), the rest normalized only.  rope.x and rope.out are rows of `row_len`
 * values; out may be x itself (every kernel reads a row before it writes it). */
typedef struct {
    ckc_apply_rope1_params rope;
    int64_t row_len;          /* D, the normalized length: >= rope.dim */
    const void *scale;        /* row_len values */
    ckc_float_kind scale_kind;
    float eps;
} ckc_rms_rope1_params;

/* ---- rms_gated_residual (csrc/ops/residual.c) ---- */

/* out[r, i] = residual + gate * rms_norm(act[r, :], weight, eps)[i] (math/residual.h),
 * with gate's row (r / gate_div) % gate_mod and residual's (r / res_div) % res_mod
 * (a broadcast over a block of the leading dims); every tensor rows of `dim` values. */
typedef struct {
    const void *act;
    const void *weight;
    const void *residual;
    const void *gate;
    void *out;
    ckc_float_kind act_kind, weight_kind, res_kind, gate_kind, mid_kind, out_kind;
    int64_t rows;
    int64_t dim;
    int64_t gate_div, gate_mod, res_div, res_mod;
    float eps;
} ckc_rms_gated_residual_params;

/* ---- MXFP8 (csrc/ops/mxfp8.c): blocks of 32 values with E8M0 scales ---- */

/* qx[out_rows, out_cols] = e4m3 codes of x[rows, cols] (zeros past x: pad_32x)
 * with each block's E8M0 scale at its swizzled offset in scales (padding: 0). */
typedef struct {
    const void *x;           /* [rows, cols] of kind */
    uint8_t *qx;             /* [out_rows, out_cols] */
    uint8_t *scales;         /* swizzled [roundup(out_rows,128), roundup(out_cols/32,4)] */
    ckc_float_kind kind;
    int64_t rows;
    int64_t cols;
    int64_t out_rows;        /* rows, or rows rounded up to 32 */
    int64_t out_cols;        /* cols, or cols rounded up to 32; a multiple of 32 */
} ckc_quantize_mxfp8_params;

/* out[rows, cols] = round_out(e4m3(qx) * e8m0(scale of its block)). */
typedef struct {
    const uint8_t *qx;
    const uint8_t *scales;
    void *out;
    ckc_float_kind out_kind;
    int64_t rows;
    int64_t cols;
} ckc_dequantize_mxfp8_params;

/* MXFP8 GEMM: out[m, n] = sum_k dec(a)[m, k] dec(b)[n, k] + bias[n], the NVFP4
 * GEMM's block read as another block-scaled format: a [m, k] and b [n, k] e4m3
 * codes, dec = code * its block's E8M0 scale, scale_a and scale_b swizzled
 * [roundup(m or n, 128), roundup(k/32, 4)], alpha_beta NULL (alpha 1, beta 0). */
typedef ckc_scaled_mm_nvfp4_params ckc_scaled_mm_mxfp8_params;

/* ---- ConvRot W4A4 (csrc/ops/w4a4.c): int4 codes two per byte (math/int4.h) ---- */

/* Row-wise int4 quantization of x[rows, cols], each group of `group` columns
 * rotated first (0: none); q[rows, cols / 2] packed, scale[rows] float32. */
typedef struct {
    const void *x;       /* rows x cols values of kind */
    int64_t rows;        /* one scale each */
    int64_t cols;        /* even: two codes a byte */
    ckc_float_kind kind;
    int64_t group;
    const void *noise;   /* NULL: nearest even; else eager's uniform noise, x's type and shape */
    uint8_t *q;
    float *scale;
} ckc_quantize_convrot_w4a4_weight_params;

/* out[rows, cols] = round_out(rotate(float32(code) * scale[row])). */
typedef struct {
    const uint8_t *q;    /* [rows, cols / 2] */
    const float *scale;  /* rows values */
    void *out;
    ckc_float_kind out_kind;
    int64_t rows;
    int64_t cols;
    int64_t group;
} ckc_dequantize_convrot_w4a4_weight_params;

/* out[rows, 2 * cols] int8 = the signed nibbles of q[rows, cols]. */
typedef struct {
    const uint8_t *q;
    int8_t *out;
    int64_t rows;
    int64_t cols;
} ckc_prepare_int4_weight_for_int8_linear_params;

/* out[m, n] = int4_linear epilogue (math/int4.h) of sum_k a[m, k] w[n, k], a and
 * w packed int4 [., k / 2]; x_scale float32 [m]; w_scale and bias [n] of
 * their own types (rounded to out's); out of out_kind. */
typedef struct {
    const uint8_t *a;
    const float *x_scale;
    const uint8_t *w;
    const void *w_scale;
    ckc_float_kind w_scale_kind;
    const void *bias;    /* NULL: none */
    ckc_float_kind bias_kind;
    const int32_t *acc;  /* CPU only: the sums [m, n] given (a library's GEMM), epilogue only; else NULL */
    void *out;
    ckc_float_kind out_kind;
    int64_t m;
    int64_t n;
    int64_t k;           /* unpacked; even */
} ckc_convrot_w4a4_linear_params;


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
    ckc_rms_rope1_params rms_rope1;
    ckc_rms_gated_residual_params rms_gated_residual;
    ckc_quantize_mxfp8_params quantize_mxfp8;
    ckc_dequantize_mxfp8_params dequantize_mxfp8;
    ckc_scaled_mm_mxfp8_params scaled_mm_mxfp8;
    ckc_quantize_convrot_w4a4_weight_params quantize_convrot_w4a4_weight;
    ckc_dequantize_convrot_w4a4_weight_params dequantize_convrot_w4a4_weight;
    ckc_prepare_int4_weight_for_int8_linear_params prepare_int4_weight_for_int8_linear;
    ckc_convrot_w4a4_linear_params convrot_w4a4_linear;
    ckc_dequantize_w4a8_int8_weight_params dequantize_w4a8_int8_weight;
    ckc_quantize_w4a8_int8_weight_params quantize_w4a8_int8_weight;
    ckc_gemv_awq_w4a16_params gemv_awq_w4a16;
} ckc_op_params;

#endif /* CKC_CONTRACT_PARAMS_H */
