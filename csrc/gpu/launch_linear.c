/* SPDX-License-Identifier: Apache-2.0 */
/* int8_linear's launcher (kernels: kernels/linear.cu and the row quantizer of
 * kernels/int8.cu): per chunk of rows, rms_norm's row factors where asked, the
 * row quantizer with the activation fused into its load, then the int8 GEMM of
 * the BLAS seam and the epilogue kernel; a single row takes the dp4a GEMV with
 * the epilogue fused instead.  w4a8_linear's weight is decoded a part at a
 * time right before each part's GEMM (decoded_gemm). */
#if defined(CKC_WITH_GPU)

#include "blas.h"
#include "contract/linear_plan.h"
#include "kernel.h"
#include "launch.h"
#include "launchers.h"
#include "runtime.h"

#define EPILOGUE_DECL(v) CKC_EMU_THUNK_DECL(CKC_KNAME1(linear_epilogue_kernel, v))
#define EPILOGUE_ENTRY(v)                                                                                        \
    CKC_KERNEL_ENTRY(linear_epilogue_kernel, "linear_epilogue_kernel", "linear",                                 \
                     CKC_KNAME1(linear_epilogue_kernel, v), v, 0, 0, 0)
CKC_EPILOGUE_KERNELS(EPILOGUE_DECL)
CKC_EMU_THUNK_DECL(rms_factor_kernel)
CKC_EMU_THUNK_DECL(int8_gemv_kernel)
static ckc_kernel epilogue[] = {CKC_EPILOGUE_KERNELS(EPILOGUE_ENTRY)};
static ckc_kernel rms_factor[] = {
    CKC_KERNEL_ENTRY(rms_factor_kernel, "rms_factor_kernel", "linear", rms_factor_kernel, 0, 0, 0, 0)};
static ckc_kernel gemv[] = {
    CKC_KERNEL_ENTRY(int8_gemv_kernel, "int8_gemv_kernel", "linear", int8_gemv_kernel, 0, 0, 0, 0)};

/* Whether the chunk allows CKC_EPI_VEC outputs per step: n a multiple of it
 * (every row's outputs and accumulators then start 16-byte aligned, given
 * aligned bases and ldacc), and the per-channel vectors' alignment. */
static bool
lin_epilogue_vec(const ckc_linear_epilogue_params *e, lin_epilogue_layout *lay)
{
    lay->ws_vec = e->w_per_channel && (uintptr_t)e->w_scale % 16 == 0;
    lay->bias_vec = e->terms.bias != NULL && (uintptr_t)e->terms.bias % 16 == 0;
    lay->residual_vec = e->terms.residual != NULL && (uintptr_t)e->terms.residual % 16 == 0;
    lay->residual_scale_vec = e->terms.residual != NULL && e->terms.residual_scale_per_channel &&
                              (uintptr_t)e->terms.residual_scale % 16 == 0;
    return e->n % CKC_EPI_VEC == 0 && e->ldacc % 4 == 0 && (uintptr_t)e->acc % 16 == 0 &&
           (uintptr_t)e->out % 16 == 0;
}

/* The grid and the walk for `vec` outputs per step; false when the chunk is
 * too large for 32-bit column counts (never for real layers). */
static bool
lin_epilogue_grid(const ckc_linear_epilogue_params *e, int vec, lin_epilogue_layout *lay, unsigned *blocks)
{
    const int64_t per_row = e->n / vec;
    const int64_t total = per_row * e->rows;
    const int64_t want = (total + CKC_EPI_THREADS - 1) / CKC_EPI_THREADS;
    int64_t step;
    if (per_row < 1 || per_row > (int64_t)UINT32_MAX) {
        return false;
    }
    *blocks = (unsigned)(want < CKC_EPI_MAX_BLOCKS ? (want > 0 ? want : 1) : CKC_EPI_MAX_BLOCKS);
    step = (int64_t)*blocks * CKC_EPI_THREADS;
    lay->per_row = (uint32_t)per_row;
    lay->step_rows = (uint32_t)(step / per_row);
    lay->step_cols = (uint32_t)(step % per_row);
    return true;
}

static ckc_status
linear_epilogue(const ckc_linear_epilogue_params *e, const ckc_exec *exec, ckc_done_mark done, ckc_error *err)
{
    ckc_linear_epilogue_params params = *e;
    lin_epilogue_layout lay;
    unsigned blocks = 1;
    const bool vec = lin_epilogue_vec(e, &lay);
    if (!lin_epilogue_grid(e, vec ? CKC_EPI_VEC : 1, &lay, &blocks)) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'weight': %lld output features are too many for the "
                        "epilogue", (long long)e->n);
    }
    const ckc_launch_cfg c = ckc_launch_1d(blocks, CKC_EPI_THREADS, 0, exec->stream);
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(lay), CKC_KARG(done)};
    return CKC_LAUNCH_INSTANCE(epilogue, vec ? CKC_EPI_VEC : 1, 0, 0, 0, &c, args, err);
}

/* rms_norm's row factor of each row (math/rms.h): one warp per row. */
static ckc_status
row_factors(const ckc_int8_linear_params *p, const ckc_quantize_int8_rowwise_params *q, int64_t rows,
            const ckc_exec *exec,
            ckc_error *err)
{
    const void *x = q->x;
    ckc_float_kind kind = p->kind;
    int64_t x_stride = p->x_stride;
    int64_t k = p->k;
    float eps = p->act_args.eps;
    float *factor = p->row_factor;
    const ckc_launch_cfg c = ckc_launch_1d(rows, 32, 0, exec->stream);
    const ckc_karg args[] = {CKC_KARG(x), CKC_KARG(kind), CKC_KARG(x_stride), CKC_KARG(k), CKC_KARG(eps), CKC_KARG(factor)};
    return ckc_gpu_launch(&rms_factor[0], &c, args, CKC_KARG_COUNT(args), err);
}

/* The few-row GEMV with the epilogue fused, for the chunk of `rows` rows at r0
 * (its outputs and residual rows from there, its codes and scales the
 * scratch's).  The codes' base and stride are checked too, not assumed from
 * the scratch carving. */
static ckc_status
linear_gemv(const ckc_int8_linear_params *p, int64_t r0, int64_t rows, ckc_done_mark done, const ckc_exec *exec,
            ckc_error *err)
{
    const ckc_linear_epilogue_params e = ckc_linear_epilogue_for(p, r0, rows);
    ckc_int8_linear_params params = *p;
    bool vec = (uintptr_t)p->w % 16 == 0 && p->ldw % 16 == 0 && (uintptr_t)p->q % 16 == 0 && p->ldq % 16 == 0;
    params.rows = rows;
    params.out = e.out;
    params.terms = e.terms;
    if (p->decode.q != NULL) { /* w4a8_linear: the codes decoded in registers */
        return ckc_gpu_w4a8_gemv(&params, done, exec->stream, err);
    }
    const ckc_launch_cfg c =
        ckc_launch_1d((p->n + CKC_GEMV_WARPS - 1) / CKC_GEMV_WARPS, CKC_GEMV_WARPS * 32, 0, exec->stream);
    const ckc_karg args[] = {CKC_KARG(params), CKC_KARG(vec), CKC_KARG(done)};
    return ckc_gpu_launch(&gemv[0], &c, args, CKC_KARG_COUNT(args), err);
}

/* w4a8_linear's GEMM: per part of decode_rows weight rows, their codes decoded
 * into the scratch, then the GEMM of those rows into the accumulator's columns
 * n0.. (ldacc apart, as the whole one's).  Parts but the last are whole
 * multiples of n_align columns (ckc_linear_decode_rows); the last's GEMM runs
 * to n_pad, so its decoded rows past n are zeroed first (their sums land in
 * columns n.. n_pad, never read, but the GEMM reads them). */
static ckc_status
decoded_gemm(const ckc_int8_linear_params *p, const ckc_int8_gemm_params *whole, ckc_exec *exec, ckc_error *err)
{
    const ckc_done_mark none = {NULL, 0, NULL, NULL};
    for (int64_t n0 = 0; n0 < p->n; n0 += p->decode_rows) {
        const int64_t rows = p->n - n0 < p->decode_rows ? p->n - n0 : p->decode_rows;
        const int64_t cols = p->ldacc - n0 < p->decode_rows ? p->ldacc - n0 : p->decode_rows;
        const ckc_dequantize_w4a8_int8_weight_params d = ckc_linear_decode_part(p, n0, rows);
        ckc_int8_gemm_params g = *whole;
        if (cols > rows) {
            CKC_TRY(ckc_gpu_memset_async((int8_t *)d.out + rows * p->ldw, 0, (size_t)((cols - rows) * p->ldw),
                                         exec->stream, err));
        }
        CKC_TRY(ckc_gpu_w4a8_decode(&d, exec->stream, none, err));
        g.b = (const int8_t *)d.out;
        g.ldb = p->ldw;
        g.c = whole->c + n0;
        g.n = cols;
        CKC_TRY(ckc_blas_int8_gemm(&g, exec, err));
    }
    return CKC_OK;
}

/* `last`: the op's last chunk, whose last kernel carries the op's completion mark. */
static ckc_status
linear_chunk(const ckc_int8_linear_params *p, int64_t r0, int64_t rows, bool last, ckc_exec *exec, ckc_error *err)
{
    const ckc_done_mark none = {NULL, 0, NULL, NULL};
    const ckc_row_layout lay = {p->x_stride, p->ldq, p->act, ckc_linear_act_args(p)};
    const ckc_quantize_int8_rowwise_params q = ckc_linear_quant_params(p, ckc_linear_chunk_x(p, r0), rows);
    ckc_int8_gemm_params g;
    ckc_linear_epilogue_params e;
    if (ckc_act_needs_row_factor(p->act)) {
        CKC_TRY(row_factors(p, &q, rows, exec, err));
    }
    CKC_TRY(ckc_gpu_int8_quantize_rows(&q, &lay, exec->stream, err));
    if (p->acc == NULL) {
        return linear_gemv(p, r0, rows, last ? ckc_exec_take_done_mark(exec) : none, exec, err);
    }
    /* The padded problem: codes [rows, ldq] (zeros past k; rows up to a multiple
     * of CKC_GEMM_ROWS, whatever the buffer holds there, never read back) times the
     * weight's first ldacc rows of ldq values (zeros past n and k when padded). */
    g = ckc_linear_gemm_params(p, (rows + CKC_GEMM_ROWS - 1) / CKC_GEMM_ROWS * CKC_GEMM_ROWS, p->ldacc, p->ldq);
    CKC_TRY(p->decode_rows > 0 ? decoded_gemm(p, &g, exec, err) : ckc_blas_int8_gemm(&g, exec, err));
    e = ckc_linear_epilogue_for(p, r0, rows);
    return linear_epilogue(&e, exec, last ? ckc_exec_take_done_mark(exec) : none, err);
}

static ckc_status
linear_chunks(const ckc_int8_linear_params *p, ckc_exec *exec, ckc_error *err)
{
    /* Chunks reuse the scratch buffers: the stream orders their uses. */
    for (int64_t r0 = 0; r0 < p->rows; r0 += p->chunk_rows) {
        const int64_t rows = ckc_linear_chunk_rows(p, r0);
        CKC_TRY(linear_chunk(p, r0, rows, r0 + rows >= p->rows, exec, err));
    }
    return CKC_OK;
}

ckc_status
ckc_gpu_int8_linear(const ckc_int8_linear_params *p, ckc_exec *exec, ckc_error *err)
{
    CKC_ON_DEVICE(exec, err, linear_chunks(p, exec, err));
}

#endif /* CKC_WITH_GPU */
