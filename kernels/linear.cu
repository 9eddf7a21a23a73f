/* int8_linear on the GPU: per chunk of rows, the row quantizer of int8.cu (the
 * input activation fused into its load, the ConvRot rotation in registers,
 * codes written with the GEMM's padded stride; rms_norm's row factors from a
 * one-warp reduction kernel before it), the int8 GEMM of the BLAS seam
 * (cuBLASLt IMMA, int32 out) and one epilogue kernel (kernels/math/linear.h:
 * bias and residual fused).  A single row (text encoders) takes a dp4a GEMV
 * with the epilogue fused instead of the GEMM. */
#include "done_mark.cuh"
#include "elements.cuh"
#include "int8_rows.h"
#include "row_tile.cuh"

#include "gpu/blas.h"
#include "gpu/launch.h"
#include "gpu/runtime.h"
#include "math/linear.h"
#include "math/rms.h"
#include "ops/linear_plan.h"

#define CKC_GEMV_WARPS 8
#define CKC_EPILOGUE_COL_BLOCKS 64 /* column blocks per row; rows go in gridDim.y */

/* out[j] = epilogue(q . w[j, :]): one warp per output, 16 codes per lane per step
 * (four dp4a), a scalar tail; `vec`: the codes and w's rows are 16-byte aligned. */
__global__ void __launch_bounds__(CKC_GEMV_WARPS * 32)
int8_gemv_kernel(ckc_int8_linear_params p, bool vec, ckc_done_mark done)
{
    const int lane = (int)threadIdx.x % 32;
    const int64_t j = (int64_t)blockIdx.x * CKC_GEMV_WARPS + threadIdx.x / 32;
    /* The whole warp skips (j is the same for its lanes), and reaches the mark with its block. */
    if (j < p.n) {
        const int8_t *w = p.w + j * p.ldw;
        const int64_t k16 = vec ? p.k / 16 * 16 : 0;
        int32_t acc = 0;
        for (int64_t i = (int64_t)lane * 16; i < k16; i += 32 * 16) {
            const ckc_bytes16 a = *(const ckc_bytes16 *)(p.q + i);
            const ckc_bytes16 b = *(const ckc_bytes16 *)(w + i);
            for (int e = 0; e < 4; e++) {
                acc = __dp4a((int)a.w[e], (int)b.w[e], acc);
            }
        }
        for (int64_t i = k16 + lane; i < p.k; i += 32) {
            acc += (int32_t)p.q[i] * (int32_t)w[i];
        }
        for (int o = 16; o > 0; o /= 2) {
            acc += __shfl_xor_sync(0xffffffffu, acc, o);
        }
        if (lane == 0) {
            ckc_store_value(p.out, p.out_kind, j,
                            ckc_linear_output(acc, p.x_scale[0], p.w_scale[p.w_per_channel ? j : 0], p.terms,
                                              p.out_kind, 0, j, p.n));
        }
    }
    ckc_done_mark_arrive(done);
}

/* The chunk's outputs from its int32 accumulator: rows in gridDim.y steps,
 * columns in a grid-stride loop. */
__global__ void __launch_bounds__(CKC_ROW_THREADS)
linear_epilogue_kernel(ckc_linear_epilogue_params e, ckc_done_mark done)
{
    for (int64_t r = blockIdx.y; r < e.rows; r += gridDim.y) {
        const float sx = e.x_scale[r];
        const int32_t *acc = e.acc + r * e.ldacc;
        for (int64_t j = (int64_t)blockIdx.x * CKC_ROW_THREADS + threadIdx.x; j < e.n;
             j += (int64_t)gridDim.x * CKC_ROW_THREADS) {
            ckc_store_value(e.out, e.out_kind, r * e.n + j,
                            ckc_linear_output(acc[j], sx, e.w_scale[e.w_per_channel ? j : 0], e.terms, e.out_kind, r,
                                              j, e.n));
        }
    }
    ckc_done_mark_arrive(done);
}

/* rms_norm's row factor of each row (math/rms.h): one warp per row, its lanes
 * the cascade's streams, lane 0 the ending. */
__global__ void __launch_bounds__(32)
rms_factor_kernel(const void *x, ckc_float_kind kind, int64_t x_stride, int64_t k, float eps, float *factor)
{
    __shared__ float streams[CKC_RMS_STREAMS];
    const int t = (int)threadIdx.x;
    const int64_t r = blockIdx.x;
    const void *row = (const char *)x + r * x_stride * ckc_kind_size(kind);
    const int64_t lanes = ckc_rms_lanes(k);
    if (t < CKC_RMS_ILP * lanes) {
        streams[t] = ckc_rms_stream_sum(row, kind, lanes, k / lanes / CKC_RMS_ILP, t);
    }
    __syncthreads();
    if (t == 0) {
        factor[r] = ckc_rms_factor(ckc_rms_combine(row, kind, k, streams), k, eps);
    }
}

/* `last`: the op's last chunk, whose last kernel carries the op's completion mark. */
static ckc_status
linear_chunk(const ckc_int8_linear_params *p, int64_t r0, int64_t rows, bool last, const ckc_exec *exec,
             ckc_error *err)
{
    const ckc_row_layout lay = {p->x_stride, p->ldq, p->act, ckc_linear_act_args(p)};
    const ckc_int8_rowwise_params q = ckc_linear_quant_params(p, ckc_linear_chunk_x(p, r0), rows);
    if (ckc_act_needs_row_factor(p->act)) {
        CKC_LAUNCH(rms_factor_kernel, dim3((unsigned)rows), dim3(32), 0, exec->stream, q.x, p->kind, p->x_stride, p->k,
                   p->act_args.eps, p->row_factor);
        CKC_TRY(ckc_gpu_launch_status("rms_factor_kernel", err));
    }
    CKC_TRY(ckc_gpu_int8_quantize_rows(&q, &lay, exec->stream, err));
    if (p->acc == NULL) {
        /* The codes' base is checked too, not assumed from the scratch carving. */
        const bool vec = ckc_aligned16(p->w, p->ldw) && ckc_aligned16(p->q, 0);
        const int64_t blocks = (p->n + CKC_GEMV_WARPS - 1) / CKC_GEMV_WARPS;
        CKC_LAUNCH(int8_gemv_kernel, dim3((unsigned)blocks), dim3(CKC_GEMV_WARPS * 32), 0, exec->stream, *p, vec,
                   last ? ckc_gpu_take_done_mark() : CKC_NO_DONE_MARK);
        return ckc_gpu_launch_status("int8_gemv_kernel", err);
    }
    /* The padded problem: codes [rows, ldq] (zeros past k; rows up to a multiple
     * of CKC_GEMM_ROWS, whatever the buffer holds there, never read back) times the
     * weight's first ldacc rows of ldq values (zeros past n and k when padded). */
    const ckc_int8_gemm_params g =
        ckc_linear_gemm_params(p, (rows + CKC_GEMM_ROWS - 1) / CKC_GEMM_ROWS * CKC_GEMM_ROWS, p->ldacc, p->ldq);
    CKC_TRY(ckc_blas_int8_gemm(&g, exec, err));
    const ckc_linear_epilogue_params e = ckc_linear_epilogue_for(p, r0, rows);
    const int64_t col_blocks = (p->n + CKC_ROW_THREADS - 1) / CKC_ROW_THREADS;
    const dim3 grid((unsigned)(col_blocks < CKC_EPILOGUE_COL_BLOCKS ? col_blocks : CKC_EPILOGUE_COL_BLOCKS),
                    (unsigned)(rows < 65535 ? rows : 65535));
    CKC_LAUNCH(linear_epilogue_kernel, grid, dim3(CKC_ROW_THREADS), 0, exec->stream, e,
               last ? ckc_gpu_take_done_mark() : CKC_NO_DONE_MARK);
    return ckc_gpu_launch_status("linear_epilogue_kernel", err);
}

extern "C" ckc_status
ckc_gpu_int8_linear(const ckc_int8_linear_params *p, const ckc_exec *exec, ckc_error *err)
{
    return ckc_on_device(exec, err, [&]() {
        /* Chunks reuse the scratch buffers: the stream orders their uses. */
        for (int64_t r0 = 0; r0 < p->rows; r0 += p->chunk_rows) {
            const int64_t rows = ckc_linear_chunk_rows(p, r0);
            CKC_TRY(linear_chunk(p, r0, rows, r0 + rows >= p->rows, exec, err));
        }
        return CKC_OK;
    });
}
