/* SPDX-License-Identifier: Apache-2.0 */
/* int8_linear's plan, written once for every layer that needs it:
 *   - the scratch layout: how many bytes a call needs (comfy_kitchen_c/linear.py
 *     asks _C, which asks ckc_linear_plan_call) and how the op layer carves the
 *     caller's scratch into chunk buffers (csrc/ops/linear.c);
 *   - the per-chunk parameter blocks of both devices (csrc/cpu/linear.c and
 *     kernels/linear.cu): a chunk of `rows` rows starting at row r0 is quantized
 *     into the scratch codes, multiplied by the weight into the int32
 *     accumulator and finished by the epilogue into its output rows.
 *
 * Scratch layout per chunk of c rows, each region CKC_LINEAR_SCRATCH_ALIGN-byte
 * aligned (as cuBLASLt prefers):
 *   q [c, k_pad] int8 | x_scale [c] f32 | acc [c, n_pad] i32 (unless GEMV)
 *   | activated rows [c, k] in x's type (CPU with an activation)
 *   | row factors [c] f32 (GPU with rms_norm: ckc_act_needs_row_factor)
 * On the GPU the quantized rows and the accumulator are padded to k_pad =
 * roundup(k, k_align) and n_pad = roundup(n, n_align) columns for cuBLASLt, and
 * the GEMM runs on a row count rounded up to CKC_GEMM_ROWS (as comfy_kitchen
 * pads M for cuBLASLt's int8 GEMM), so there the buffers hold a multiple of
 * CKC_GEMM_ROWS rows, at least one such block; the rows past a chunk's are never
 * read back.  The GPU's few-row path (GEMV, up to CKC_LINEAR_GEMV_ROWS rows)
 * needs no accumulator.  The CPU
 * passes alignments of 1.
 *
 * w4a8_linear (a W4A8 / W6A8 weight, GPU) adds one region ahead of the chunks:
 * decode_rows weight rows of k_pad int8 values, the codes of that many rows
 * decoded there before each GEMM of their columns (ckc_linear_decode_rows:
 * within a byte budget, so a call never holds the whole decoded weight).  Its
 * few-row calls take the GEMV that decodes in registers where it reads the
 * codes' layout (decode_gemv: the canonical rows; the MMA records take the
 * GEMM), with neither region. */
#ifndef CKC_CONTRACT_LINEAR_PLAN_H
#define CKC_CONTRACT_LINEAR_PLAN_H

#include <stddef.h>

#include "contract/params.h"
#include "math/ckc_inline.h"

#define CKC_LINEAR_SCRATCH_ALIGN 256
/* The regions of a chunk (above), and what alignment may waste: the base's
 * alignment and each region's round-up. */
#define CKC_LINEAR_SCRATCH_REGIONS 6
#define CKC_LINEAR_SCRATCH_SLACK ((CKC_LINEAR_SCRATCH_REGIONS + 1) * CKC_LINEAR_SCRATCH_ALIGN)
/* Rows up to this take the GPU's GEMV (no accumulator, the weight read as it is,
 * never a padded copy) instead of the GEMM: bound by reading the weight, which
 * the GEMV reads once for all of them (kernels/linear.cu: one int32 sum per row
 * in each lane's registers). */
#define CKC_LINEAR_GEMV_ROWS 8
/* w4a8_linear's GEMV finds a column's group scale by a 32-bit division (a
 * 64-bit one is a library call per step): rows past this take the GEMM. */
#define CKC_W4A8_GEMV_MAX_K 0x7FFFFFFF

typedef struct {
    int64_t k_pad;
    int64_t n_pad;
    int64_t acc_cols;  /* n_pad, or 0 without an accumulator (GEMV) */
    int64_t act_bytes; /* per row */
    int64_t factor_bytes; /* per row: 4 for rms_norm's row factor on the GPU, else 0 */
    int64_t row_align; /* rows per chunk a multiple of this (the GPU GEMM's padded m), else 1 */
    int64_t decode_rows; /* w4a8_linear's decoded weight rows (k_pad bytes each), else 0 */
    int gpu;
} ckc_linear_layout;

/* Weight rows decoded at a time: as many as decode_bytes hold (a multiple of
 * n_align, so each GEMM but the last is of whole aligned columns; at least
 * n_align rows), at most n_pad. */
static inline int64_t
ckc_linear_decode_rows(int64_t n_pad, int64_t k_pad, int64_t n_align, int64_t decode_bytes)
{
    const int64_t fit = decode_bytes / k_pad / n_align * n_align;
    const int64_t rows = fit > n_align ? fit : n_align;
    return rows < n_pad ? rows : n_pad;
}

/* The layout of a call of `rows` rows of k activated values (x's elements of
 * x_bytes bytes; act: ckc_act) times an [n, k] weight; decode_bytes > 0: the
 * weight is W4A8 codes decoded within that many bytes at a time (GPU), or in
 * the GEMV's registers for few rows where decode_gemv says it reads them. */
static inline ckc_linear_layout
ckc_linear_layout_of(int64_t rows, int64_t k, int64_t n, int64_t k_align, int64_t n_align, int gpu, int act,
                     int64_t x_bytes, int64_t decode_bytes, int decode_gemv)
{
    ckc_linear_layout l;
    const int gemv = gpu && rows <= CKC_LINEAR_GEMV_ROWS &&
                     (decode_bytes <= 0 || (decode_gemv && k <= CKC_W4A8_GEMV_MAX_K));
    l.k_pad = ckc_round_up(k, k_align);
    l.n_pad = ckc_round_up(n, n_align);
    l.decode_rows = gpu && decode_bytes > 0 && !gemv ? ckc_linear_decode_rows(l.n_pad, l.k_pad, n_align, decode_bytes)
                                                     : 0;
    l.acc_cols = gemv ? 0 : l.n_pad;
    l.act_bytes = !gpu && act != CKC_ACT_NONE ? k * x_bytes : 0;
    l.factor_bytes = gpu && ckc_act_needs_row_factor(act) ? 4 : 0;
    l.row_align = gpu && l.acc_cols > 0 ? CKC_GEMM_ROWS : 1;
    l.gpu = gpu;
    return l;
}

/* Scratch bytes per row, over all regions. */
static inline int64_t
ckc_linear_row_bytes(const ckc_linear_layout *l)
{
    return l->k_pad + 4 + 4 * l->acc_cols + l->act_bytes + l->factor_bytes;
}

/* Bytes of the region before the chunks' (w4a8_linear's decoded rows). */
static inline int64_t
ckc_linear_fixed_bytes(const ckc_linear_layout *l)
{
    return ckc_round_up(l->decode_rows * l->k_pad, CKC_LINEAR_SCRATCH_ALIGN);
}

/* Bytes the regions of c rows take, from an aligned base. */
static inline int64_t
ckc_linear_layout_bytes(const ckc_linear_layout *l, int64_t c)
{
    const int64_t a = CKC_LINEAR_SCRATCH_ALIGN;
    return ckc_linear_fixed_bytes(l) + ckc_round_up(c * l->k_pad, a) + ckc_round_up(4 * c, a) +
           ckc_round_up(4 * c * l->acc_cols, a) + ckc_round_up(c * l->act_bytes, a) +
           ckc_round_up(c * l->factor_bytes, a);
}

/* Whether the GPU GEMM reads a zero-padded [n_pad, k_pad] copy of the [n, k]
 * weight instead of the weight itself: cuBLASLt needs the padded shape, and
 * 16-byte aligned rows (w_aligned16: the weight's base is). */
static inline int
ckc_linear_pads_weight(const ckc_linear_layout *l, int64_t k, int64_t n, int w_aligned16)
{
    return l->gpu && l->acc_cols > 0 && (l->k_pad != k || l->n_pad != n || !w_aligned16);
}

/* Scratch bytes to allocate for `rows` rows: all of them at once when that
 * fits `budget`, else as many as fit (at least one block of row_align rows). */
static inline int64_t
ckc_linear_scratch_bytes(const ckc_linear_layout *l, int64_t rows, int64_t budget)
{
    const int64_t per_row = ckc_linear_row_bytes(l);
    const int64_t fixed = ckc_linear_fixed_bytes(l) + CKC_LINEAR_SCRATCH_SLACK;
    const int64_t all = ckc_round_up(rows, l->row_align) * per_row + fixed;
    const int64_t least = l->row_align * per_row + fixed;
    const int64_t cap = budget > least ? budget : least;
    return all < cap ? all : cap;
}

/* Rows per chunk that `avail` bytes from an aligned base hold: a multiple of
 * row_align, at most the call's rows rounded up to it (0: not even one block). */
static inline int64_t
ckc_linear_chunk_capacity(const ckc_linear_layout *l, int64_t rows, int64_t avail)
{
    const int64_t all = ckc_round_up(rows, l->row_align);
    int64_t c = (avail - ckc_linear_fixed_bytes(l) - CKC_LINEAR_SCRATCH_REGIONS * CKC_LINEAR_SCRATCH_ALIGN) /
                ckc_linear_row_bytes(l) / l->row_align * l->row_align;
    c = c < all ? c : all;
    return c >= l->row_align && ckc_linear_layout_bytes(l, c) <= avail ? c : 0;
}

/* Rows in the chunk that starts at row r0 (the last chunk may be short). */
static inline int64_t
ckc_linear_chunk_rows(const ckc_int8_linear_params *p, int64_t r0)
{
    return p->rows - r0 < p->chunk_rows ? p->rows - r0 : p->chunk_rows;
}

/* The chunk's first input row in x. */
static inline const void *
ckc_linear_chunk_x(const ckc_int8_linear_params *p, int64_t r0)
{
    return (const char *)p->x + r0 * p->x_stride * ckc_kind_size(p->kind);
}

/* Row-wise quantization of the chunk's rows read from `x` (x itself, or the
 * CPU's activated copy of it) into the scratch codes and scales. */
static inline ckc_quantize_int8_rowwise_params
ckc_linear_quant_params(const ckc_int8_linear_params *p, const void *x, int64_t rows)
{
    ckc_quantize_int8_rowwise_params q;
    q.x = x;
    q.kind = p->kind;
    q.rows = rows;
    q.cols = p->k;
    q.group = p->group;
    q.noise = NULL;
    q.q = p->q;
    q.scale = p->x_scale;
    return q;
}

/* codes . weight^T into the accumulator, for an m x n x k problem: the CPU's
 * exact one (rows, n, k) or the GPU's padded one (see kernels/linear.cu). */
static inline ckc_int8_gemm_params
ckc_linear_gemm_params(const ckc_int8_linear_params *p, int64_t m, int64_t n, int64_t k)
{
    ckc_int8_gemm_params g;
    g.a = p->q;
    g.lda = p->ldq;
    g.b = p->w;
    g.ldb = p->ldw;
    g.c = p->acc;
    g.ldc = p->ldacc;
    g.m = m;
    g.n = n;
    g.k = k;
    return g;
}

/* The activation's arguments for the chunk: its rows' factors in the scratch. */
static inline ckc_act_args
ckc_linear_act_args(const ckc_int8_linear_params *p)
{
    ckc_act_args a = p->act_args;
    a.row_factor = p->row_factor;
    return a;
}

/* The epilogue from the accumulator into the chunk's output rows. */
static inline ckc_linear_epilogue_params
ckc_linear_epilogue_for(const ckc_int8_linear_params *p, int64_t r0, int64_t rows)
{
    ckc_linear_epilogue_params e;
    e.acc = p->acc;
    e.ldacc = p->ldacc;
    e.x_scale = p->x_scale;
    e.w_scale = p->w_scale;
    e.w_per_channel = p->w_per_channel;
    e.terms = p->terms;
    if (e.terms.residual != NULL) {
        e.terms.residual = (const char *)e.terms.residual + r0 * p->n * ckc_kind_size(e.terms.residual_kind);
    }
    e.out = (char *)p->out + r0 * p->n * ckc_kind_size(p->out_kind);
    e.out_kind = p->out_kind;
    e.rows = rows;
    e.n = p->n;
    return e;
}

/* The decode of weight rows n0 .. n0 + rows - 1 into the scratch's decoded rows:
 * the codes (canonical rows of k * bits / 8 bytes, or the 16-row records, n0 a
 * multiple of 16 then) and scales from row n0 on. */
static inline ckc_dequantize_w4a8_int8_weight_params
ckc_linear_decode_part(const ckc_int8_linear_params *p, int64_t n0, int64_t rows)
{
    ckc_dequantize_w4a8_int8_weight_params d = p->decode;
    const int64_t k = d.k;
    if (d.packed) {
        d.q += (n0 / 16) * (k / 32) * (512 * d.bits / 8 + 32);
    } else {
        d.q += n0 * (k * d.bits / 8);
        d.s_rel = (const char *)d.s_rel + n0 * (k / d.group) * (d.s_e4m3 ? 1 : 4);
    }
    d.rows = rows;
    return d;
}

#endif /* CKC_CONTRACT_LINEAR_PLAN_H */
