/* SPDX-License-Identifier: Apache-2.0 */
/* What the GPU launchers (gpu/launch_*.c, host C) and the kernels
 * (kernels/<family>.cu, CUDA C++) agree on: block shapes, the argument structs
 * passed by value, and the launch geometry the host computes.  Plain C, read by
 * both compilers: a struct passed to a kernel has one layout on both sides. */
#ifndef CKC_GPU_KERNEL_ARGS_H
#define CKC_GPU_KERNEL_ARGS_H

#include <stddef.h>
#include <stdint.h>
#if !defined(__cplusplus)
#include <stdbool.h>
#endif

#include "contract/params.h"
#include "math/activation.h"

/* ---- the row kernels (kernels/int8.cu, the rotated NVFP4 quantizer) ---- */

#define CKC_ROW_THREADS 256
#define CKC_CHUNK 16
#define CKC_ROW_SEGMENT(chunks) ((int64_t)CKC_ROW_THREADS * CKC_CHUNK * (chunks))
/* Registers per thread: CHUNKS chunks of 16 values; up to 4 keeps the row
 * kernels free of spills, longer rows loop over segments. */
#define CKC_MAX_CHUNKS 4
/* float16's row quantizer holds at most 2: its code pass (a software float16
 * rounding of every quotient) spilled beside 4 chunks of values.  Its longer rows
 * take the two-pass path, whose second read of the row mostly hits L2. */
#define CKC_F16_QUANT_MAX_CHUNKS 2

/* Whether rows starting at p, row_bytes apart, all start on a multiple of `bytes`. */
static inline bool
ckc_rows_aligned(const void *p, int64_t row_bytes, int64_t bytes)
{
    return ((uintptr_t)p % (uintptr_t)bytes) == 0 && row_bytes % bytes == 0;
}

/* Whether rows starting at p, row_bytes apart, allow the chunk loads' and
 * stores' 16-byte vector accesses. */
static inline bool
ckc_aligned16(const void *p, int64_t row_bytes)
{
    return ckc_rows_aligned(p, row_bytes, 16);
}

/* Bytes of dynamic shared memory a row kernel rotating by `group` needs for its
 * exchange: only a group spanning more than one warp (G = 1024) uses it. */
static inline size_t
ckc_rotation_exchange_bytes(int64_t group)
{
    return group / CKC_CHUNK > 32 ? sizeof(float) * CKC_ROW_THREADS * CKC_CHUNK : 0;
}

/* How the row quantizer lays a row (int8_linear's chunks use strides of their own). */
typedef struct {
    int64_t x_stride; /* elements from one input row to the next (2k for swiglu and situ) */
    int64_t q_stride; /* codes per output row: cols .. roundup(cols, 16), the rest zeros */
    int act;          /* ckc_act (math/activation.h) */
    ckc_act_args args; /* its arguments; args.row_factor one per row of the launch (rms_norm) */
} ckc_row_layout;

/* Which of ckc_dequantize_int8_convrot_weight_dtype_params' rows allow vector accesses. */
typedef struct {
    bool q;     /* the codes */
    bool scale; /* a full (CKC_SCALE_FULL) scale */
    bool out;
} ckc_dequant_vec;

#define CKC_ELEMENTWISE_BLOCKS 4096 /* grid-stride loops: enough blocks to fill any GPU */

/* ---- the row-tile kernels (kernels/int8_tile.cu, kernels/tile.cuh) ---- */

#define CKC_TILE 32              /* values per thread */
#define CKC_TILE_MAX_THREADS 1024 /* per block: rows of up to 32 * 1024 values in one pass */
#define CKC_TILE_MAX_ROWS 32     /* rows per block */
/* Instances with more live values (noise, swiglu's up half) are bounded to 512 threads,
 * which lets them use 128 registers where the others fit 64 (65536 per SM / 1024
 * threads). */
#define CKC_TILE_WIDE_THREADS 512

enum { CKC_TILE_CODES = 0, CKC_TILE_CODES_NOISE = 1, CKC_TILE_VALUES = 2 };

/* Threads per block at most of an instance (its register cap follows from it,
 * int8_tile.cu's CKC_TILE_REGISTERS): a macro, as the cap needs a constant expression. */
#define CKC_TILE_THREADS(mode, act)                                                                            \
    ((mode) == CKC_TILE_CODES_NOISE || (act) != CKC_ACT_NONE ? CKC_TILE_WIDE_THREADS : CKC_TILE_MAX_THREADS)

/* How a launch lays rows on blocks (computed by ckc_tile_geometry on the host). */
typedef struct {
    int threads_per_row; /* T = K / 32, or 1024 for longer rows (then `segments` > 1) */
    int rows_per_block;  /* R */
    int segment_lanes;   /* W: the largest power of two (<= 32) dividing T: W-lane runs of a warp share a row */
    int segments;        /* passes of 32 * T columns over a row: 1 keeps the row in registers */
    uint32_t zero;       /* 0, which the compiler cannot see (ckc_tile_together) */
} ckc_tile_geom;

/* The geometry for rows of `chunks` threads' work each, or segments = 0 when no
 * whole number of warps fits a block.  `rows`: rows of the tensor, so that a
 * small M gets small blocks. */
static inline ckc_tile_geom
ckc_tile_geometry_chunks(int64_t chunks, int64_t rows, int max_threads)
{
    ckc_tile_geom g = {0, 0, 0, 0, 0};
    int t, w = 1, least, r;
    if (chunks <= 0) {
        return g;
    }
    t = chunks > max_threads ? max_threads : (int)chunks;
    while (w < 32 && t % (2 * w) == 0) {
        w *= 2;
    }
    least = 32 / w; /* rows per whole number of warps */
    if ((int64_t)t * least > max_threads) {
        return g;
    }
    r = least;
    /* Up to 512 threads per block (two blocks per SM at 64 registers), never more rows than the tensor has. */
    while (r + least <= CKC_TILE_MAX_ROWS && (int64_t)(r + least) * t <= 512 && r < rows) {
        r += least;
    }
    g.threads_per_row = t;
    g.rows_per_block = r;
    g.segment_lanes = w;
    g.segments = (int)((chunks + t - 1) / t);
    return g;
}

/* The geometry for rows of `cols` values, 32 per thread (segments = 0: cols is not
 * a multiple of 32, or no whole number of warps fits a block). */
static inline ckc_tile_geom
ckc_tile_geometry(int64_t cols, int64_t rows, int max_threads)
{
    const ckc_tile_geom none = {0, 0, 0, 0, 0};
    return cols % CKC_TILE != 0 ? none : ckc_tile_geometry_chunks(cols / CKC_TILE, rows, max_threads);
}

typedef struct {
    const void *x;
    int64_t x_stride;  /* elements between rows (2 K for swiglu, whose up half starts at K) */
    const void *noise; /* rows of `cols` values (CKC_TILE_CODES_NOISE) */
    void *out;         /* codes, out_stride bytes apart, or values (cols apart) */
    int64_t out_stride;
    float *scale;      /* one per row (codes) */
    int64_t rows;
    int64_t cols;
} ckc_tile_rows_args;

/* ---- NVFP4 (kernels/nvfp4.cu) ---- */

#define CKC_NVFP4_THREADS 128
#define CKC_NVFP4_ROW_BLOCKS 4 /* 16-value blocks per thread in the row-layout dequantizer */

/* ---- int8_linear (kernels/linear.cu) ---- */

#define CKC_GEMV_WARPS 8
#define CKC_EPI_THREADS 256
#define CKC_EPI_VEC 8
#define CKC_EPI_MAX_BLOCKS 1024

/* The epilogue's walk over a chunk of VEC-output vectors, per_row of them in each row. */
typedef struct {
    uint32_t per_row;
    uint32_t step_rows; /* CKC_EPI_THREADS * blocks = step_rows * per_row + step_cols */
    uint32_t step_cols;
    bool ws_vec;        /* the per-channel scales allow 16-byte loads */
    bool bias_vec;      /* the bias allows 16-byte loads */
    bool residual_vec;  /* the residual's rows allow 16-byte loads */
    bool residual_scale_vec; /* the residual's per-channel scales allow 16-byte loads */
} lin_epilogue_layout;

/* ---- gemv_awq_w4a16 (kernels/awq.cu) ---- */

/* Warps per block (one output column n each) and rows of x per warp. */
#define CKC_AWQ_WARPS 4
#define CKC_AWQ_ROWS 4

#endif /* CKC_GPU_KERNEL_ARGS_H */
