/* SPDX-License-Identifier: Apache-2.0 */
/* int8_linear on the CPU: per chunk of rows, the activation pre-pass (into the
 * chunk's activated-rows buffer, rms_norm's row factors first; the row
 * quantizer then reads that buffer), the row-wise quantizer with the ConvRot
 * rotation, the int8 GEMM into the chunk's int32 accumulator, and the epilogue
 * (bias, residual form) into the output rows.  Every buffer is the caller's
 * scratch (allocated by torch, sized by the memory bound).  The quantizer and
 * the epilogue of a chunk are also entries of their own (cpu/entries.c, for
 * ops/linear_parts.c: a library's GEMM between them). */
#include "contract/linear_plan.h"
#include "kernels.h"
#include "math/activation.h"

/* The activation pre-pass and the row quantizer of the chunk of `rows` rows
 * at row r0: into p's codes and scales. */
ckc_status
ckc_cpu_linear_quantize_chunk(const ckc_int8_linear_params *p, int64_t r0, int64_t rows, int nthreads,
                              ckc_error *err)
{
    const ckc_cpu_kernels *cpu = ckc_cpu();
    const void *src = ckc_linear_chunk_x(p, r0);
    if (p->act != CKC_ACT_NONE) {
        ckc_act_rows_params a;
        a.src = src;
        a.dst = p->act_rows;
        a.kind = p->kind;
        a.act = p->act;
        a.args = ckc_linear_act_args(p);
        a.rows = rows;
        a.k = p->k;
        CKC_TRY(cpu->input_act(&a, nthreads, err));
        src = p->act_rows;
    }
    const ckc_quantize_int8_rowwise_params q = ckc_linear_quant_params(p, src, rows);
    return cpu->quantize_int8_rowwise(&q, nthreads, err);
}

/* The epilogue of the chunk at row r0 from p's accumulator into its output rows. */
ckc_status
ckc_cpu_linear_epilogue_chunk(const ckc_int8_linear_params *p, int64_t r0, int64_t rows, int nthreads,
                              ckc_error *err)
{
    const ckc_linear_epilogue_params e = ckc_linear_epilogue_for(p, r0, rows);
    return ckc_cpu()->linear_epilogue(&e, nthreads, err);
}

ckc_status
ckc_cpu_int8_linear(const ckc_int8_linear_params *p, int nthreads, ckc_error *err)
{
    const ckc_cpu_kernels *cpu = ckc_cpu();
    if (p->ldq != p->k || p->acc == NULL || (p->act != CKC_ACT_NONE && p->act_rows == NULL)) {
        return CKC_FAIL(err, CKC_ERR_RUNTIME, "scratch layout is not the CPU's (unpadded rows, an accumulator%s)",
                        p->act != CKC_ACT_NONE ? ", activated rows" : "");
    }
    for (int64_t r0 = 0; r0 < p->rows; r0 += p->chunk_rows) {
        const int64_t rows = ckc_linear_chunk_rows(p, r0);
        CKC_TRY(ckc_cpu_linear_quantize_chunk(p, r0, rows, nthreads, err));
        const ckc_int8_gemm_params g = ckc_linear_gemm_params(p, rows, p->n, p->k);
        CKC_TRY(cpu->int8_gemm(&g, nthreads, err));
        CKC_TRY(ckc_cpu_linear_epilogue_chunk(p, r0, rows, nthreads, err));
    }
    return CKC_OK;
}
