/* int8_linear on the CPU: per chunk of rows, the activation pre-pass (into the
 * chunk's activated-rows buffer; the row quantizer then reads that buffer), the
 * row-wise quantizer with the ConvRot rotation, the int8 GEMM into the chunk's
 * int32 accumulator, and the epilogue into the output rows.  Every buffer is
 * the caller's scratch (allocated by torch, sized by the memory bound). */
#include "kernels.h"
#include "math/activation.h"

ckc_status
ckc_cpu_int8_linear(const ckc_int8_linear_params *p, int nthreads, ckc_error *err)
{
    const ckc_cpu_kernels *cpu = ckc_cpu();
    const int64_t elem = p->kind == CKC_F32 ? 4 : 2;
    const int64_t out_elem = p->out_kind == CKC_F32 ? 4 : 2;
    if (p->ldq != p->k || p->acc == NULL || (p->act != CKC_ACT_NONE && p->act_rows == NULL)) {
        return CKC_FAIL(err, CKC_ERR_RUNTIME, "scratch layout is not the CPU's (unpadded rows, an accumulator%s)",
                        p->act != CKC_ACT_NONE ? ", activated rows" : "");
    }
    for (int64_t r0 = 0; r0 < p->rows; r0 += p->chunk_rows) {
        const int64_t rows = p->rows - r0 < p->chunk_rows ? p->rows - r0 : p->chunk_rows;
        const char *src = (const char *)p->x + r0 * p->x_stride * elem;
        ckc_int8_rowwise_params q;
        ckc_int8_gemm_params g;
        ckc_linear_epilogue_params e;
        if (p->act != CKC_ACT_NONE) {
            CKC_TRY(cpu->input_act(src, p->act_rows, p->kind, p->act, rows, p->k, nthreads, err));
            src = (const char *)p->act_rows;
        }
        q.x = src;
        q.kind = p->kind;
        q.rows = rows;
        q.cols = p->k;
        q.group = p->group;
        q.noise = NULL;
        q.q = p->q;
        q.scale = p->x_scale;
        CKC_TRY(cpu->int8_rowwise(&q, nthreads, err));
        g.a = p->q;
        g.lda = p->ldq;
        g.b = p->w;
        g.ldb = p->ldw;
        g.c = p->acc;
        g.ldc = p->ldacc;
        g.m = rows;
        g.n = p->n;
        g.k = p->k;
        CKC_TRY(cpu->int8_gemm(&g, nthreads, err));
        e.acc = p->acc;
        e.ldacc = p->ldacc;
        e.x_scale = p->x_scale;
        e.w_scale = p->w_scale;
        e.w_per_channel = p->w_per_channel;
        e.bias = p->bias;
        e.out = (char *)p->out + r0 * p->n * out_elem;
        e.out_kind = p->out_kind;
        e.rows = rows;
        e.n = p->n;
        CKC_TRY(cpu->linear_epilogue(&e, nthreads, err));
    }
    return CKC_OK;
}
