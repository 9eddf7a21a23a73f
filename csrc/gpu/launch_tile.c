/* SPDX-License-Identifier: Apache-2.0 */
/* Launchers of the row-tile kernels (kernels/int8_tile.cu; layout:
 * kernels/tile.cuh): the calls whose rows fit the tile (K a multiple of 32,
 * aligned rows, a group of 0, 64, 256 or 1024) go to them; the rest to the
 * general kernels of kernels/int8.cu (launch_int8.c), bit for bit the same. */
#if defined(CKC_WITH_GPU)

#include "kernel.h"
#include "launchers.h"

#define TILE_ROWS_SYM(k, g, m, a) CKC_KNAME4(ckc_tile_rows_kernel, k, g, m, a)
#define TILE_ROWS_DECL(k, g, m, a) CKC_EMU_THUNK_DECL(TILE_ROWS_SYM(k, g, m, a))
#define TILE_ROWS_ENTRY(k, g, m, a)                                                                              \
    CKC_KERNEL_ENTRY(ckc_tile_rows_kernel, "tile_rows", "int8_tile", TILE_ROWS_SYM(k, g, m, a), k, g, m, a)
CKC_TILE_ROWS_KERNELS(TILE_ROWS_DECL)
static ckc_kernel tile_rows[] = {CKC_TILE_ROWS_KERNELS(TILE_ROWS_ENTRY)};

#define TILE_DEQUANT_SYM(k, g) CKC_KNAME2(ckc_tile_dequant_kernel, k, g)
#define TILE_DEQUANT_DECL(k, g) CKC_EMU_THUNK_DECL(TILE_DEQUANT_SYM(k, g))
#define TILE_DEQUANT_ENTRY(k, g)                                                                                 \
    CKC_KERNEL_ENTRY(ckc_tile_dequant_kernel, "tile_dequant", "int8_tile", TILE_DEQUANT_SYM(k, g), k, g, 0, 0)
CKC_TILE_DEQUANT_KERNELS(TILE_DEQUANT_DECL)
static ckc_kernel tile_dequant[] = {CKC_TILE_DEQUANT_KERNELS(TILE_DEQUANT_ENTRY)};

/* Whether the tile kernels have instances for this rotation group (0: none). */
static int
tile_group(int64_t group, int plain_too)
{
    return (group == 0 && plain_too) || group == 64 || group == 256 || group == 1024;
}

static ckc_tile_rows_args
rows_args(const void *x, int64_t x_stride, const void *noise, void *out, int64_t out_stride, float *scale,
          int64_t rows, int64_t cols)
{
    ckc_tile_rows_args a;
    a.x = x;
    a.x_stride = x_stride;
    a.noise = noise;
    a.out = out;
    a.out_stride = out_stride;
    a.scale = scale;
    a.rows = rows;
    a.cols = cols;
    return a;
}

/* Launches a tile_rows instance over a.rows rows laid by g. */
static ckc_status
launch_tile_rows(ckc_float_kind kind, int64_t group, int mode, int act, ckc_tile_rows_args a, ckc_tile_geom g,
                 uintptr_t stream, ckc_done_mark done, ckc_error *err)
{
    const ckc_launch_cfg c =
        ckc_launch_2d((a.rows + g.rows_per_block - 1) / g.rows_per_block, g.threads_per_row, g.rows_per_block, 0, stream);
    const ckc_karg args[] = {CKC_KARG(a), CKC_KARG(g), CKC_KARG(done)};
    return CKC_LAUNCH_INSTANCE(tile_rows, kind, group, mode, act, &c, args, err);
}

int
ckc_tile_quantize_rows(const ckc_quantize_int8_rowwise_params *p, const ckc_row_layout *lay, uintptr_t stream,
                       ckc_done_mark done, ckc_status *status, ckc_error *err)
{
    const int64_t esize = ckc_kind_size(p->kind);
    const int mode = p->noise != NULL ? CKC_TILE_CODES_NOISE : CKC_TILE_CODES;
    const ckc_tile_geom g = ckc_tile_geometry(p->cols, p->rows, CKC_TILE_THREADS(mode, lay->act));
    ckc_tile_rows_args a;
    if (g.segments == 0 || p->rows == 0 || lay->q_stride != p->cols || !ckc_aligned16(p->x, lay->x_stride * esize) ||
        !ckc_aligned16(p->q, p->cols) || (p->noise != NULL && !ckc_aligned16(p->noise, p->cols * esize)) ||
        (p->noise != NULL && lay->act != CKC_ACT_NONE) || (p->kind == CKC_F32 && lay->act != CKC_ACT_NONE) ||
        (lay->act != CKC_ACT_NONE && lay->act != CKC_ACT_SWIGLU) || !tile_group(p->group, 1) ||
        (p->group == 0 && g.segments > 1)) {
        /* Activated float32 rows (no hot path: int8_linear's inputs are 16-bit) stay with the
         * general kernels: their tile instances spilled around the division's and expf's
         * slow-path calls on sm_75, sm_100 and sm_120 (tests/test_kernel_resources.py).  So do
         * gelu_tanh rows (its 16-bit instances spilled 8 bytes around tanhf's slow path on
         * sm_100) and the activations with per-column arguments or row factors (rms_norm,
         * situ, the modulations): the tile instances know swiglu only.  Plain rows longer than
         * one pass (over 32768 values, 16384 for swiglu and stochastic rounding, whose instances
         * take 512 threads) too: the plain instances walk a row in one pass (int8_tile.cu,
         * ckc_tile_plain). */
        return 0;
    }
    a = rows_args(p->x, lay->x_stride, p->noise, p->q, lay->q_stride, p->scale, p->rows, p->cols);
    *status = launch_tile_rows(p->kind, p->group, mode, lay->act, a, g, stream, done, err);
    return 1;
}

int
ckc_tile_hadamard_rows(const ckc_rotate_int8_convrot_weight_params *p, uintptr_t stream, ckc_done_mark done,
                       ckc_status *status,
                       ckc_error *err)
{
    const int64_t row_bytes = p->cols * ckc_kind_size(p->kind);
    const ckc_tile_geom g =
        ckc_tile_geometry(p->cols, p->rows, CKC_TILE_THREADS(CKC_TILE_VALUES, CKC_ACT_NONE));
    ckc_tile_rows_args a;
    if (g.segments == 0 || p->rows == 0 || !ckc_aligned16(p->x, row_bytes) || !ckc_aligned16(p->out, row_bytes) ||
        !tile_group(p->group, 0)) {
        return 0;
    }
    a = rows_args(p->x, p->cols, NULL, p->out, p->cols, NULL, p->rows, p->cols);
    *status = launch_tile_rows(p->kind, p->group, CKC_TILE_VALUES, CKC_ACT_NONE, a, g, stream, done, err);
    return 1;
}

/* Rotated dequantization: out = round(q * scale * 1/sqrt(G), rotated), per-row or single
 * scale.  Plain rows (G = 0) are not taken: a tile thread's 32 consecutive values make every
 * warp store touch 32 lines (launch_int8.c's dequant_plain walks them warp-coalesced). */
int
ckc_tile_dequant(const ckc_dequantize_int8_convrot_weight_dtype_params *p, uintptr_t stream, ckc_done_mark done,
                 ckc_status *status,
                 ckc_error *err)
{
    ckc_tile_geom g = ckc_tile_geometry(p->cols, p->rows, CKC_TILE_MAX_THREADS);
    ckc_dequantize_int8_convrot_weight_dtype_params args_p = *p;
    /* An index (dequantize_int8_embedding's gather) stays with the general kernel, which maps
     * each output row to its q row (ckc_dequant_source_row). */
    if (g.segments == 0 || p->rows == 0 || p->scale_mode == CKC_SCALE_FULL || p->index != NULL ||
        !ckc_aligned16(p->q, p->cols) || !ckc_aligned16(p->out, p->cols * ckc_kind_size(p->out_kind)) ||
        !tile_group(p->group, 0)) {
        return 0;
    }
    {
        const ckc_launch_cfg c = ckc_launch_2d((p->rows + g.rows_per_block - 1) / g.rows_per_block,
                                               g.threads_per_row, g.rows_per_block, 0, stream);
        const ckc_karg args[] = {CKC_KARG(args_p), CKC_KARG(g), CKC_KARG(done)};
        *status = CKC_LAUNCH_INSTANCE(tile_dequant, p->out_kind, p->group, 0, 0, &c, args, err);
    }
    return 1;
}

#endif /* CKC_WITH_GPU */
