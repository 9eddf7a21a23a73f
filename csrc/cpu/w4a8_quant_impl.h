/* SPDX-License-Identifier: Apache-2.0 */
/* The W4A8 / W6A8 quantizer on the CPU: the rows in parallel, each row's steps
 * (contract/w4a8_quant_plan.h) one after another: its groups' scales, its
 * s_channel, its groups' codes.  A thread keeps the row in float32, a group's
 * grid levels and its ALS indices (ckc_w4a8q_reuse), so each value is
 * converted once, each index found once per scale, and the uniform forms'
 * codes kept from the scales' pass to the packing; the per-value math is
 * math/w4a8_quant.h's, the GPU's.  Included by kernels_isa.h (each
 * instruction set's build: the searches' selects and the roundings become its
 * instructions). */
#include <stdlib.h>

#include "contract/w4a8_quant_plan.h"

/* Row n of the weight as float32 (a loop per element type, which vectorizes). */
static void
w4a8_quant_row_f32(const ckc_quantize_w4a8_int8_weight_params *p, int64_t n, float *row)
{
    if (p->kind == CKC_F32) {
        memcpy(row, (const float *)p->w + n * p->k, (size_t)p->k * sizeof(float));
        return;
    }
    const uint16_t *src = (const uint16_t *)p->w + n * p->k;
    if (p->kind == CKC_BF16) {
        for (int64_t c = 0; c < p->k; c++) {
            row[c] = ckc_bf16_to_f32(src[c]);
        }
        return;
    }
    for (int64_t c = 0; c < p->k; c++) {
        row[c] = ckc_f16_to_f32(src[c]);
    }
}

static void
w4a8_quant_rows(void *ctx, int64_t n0, int64_t n1, int worker)
{
    const ckc_quantize_w4a8_int8_weight_params *p = (const ckc_quantize_w4a8_int8_weight_params *)ctx;
    const int64_t groups = p->k / p->group;
    float grid[64];
    /* the row, a group's indices (twice: the search's winner), the row's uniform codes; without
     * them (no memory) the math reads and recomputes in place */
    float *row = (float *)malloc((size_t)p->k * sizeof(float));
    uint8_t *codes = (uint8_t *)malloc((size_t)(p->group * 2 + p->k));
    const ckc_w4a8q_reuse reuse = {row, grid, codes, codes != NULL ? codes + p->group : NULL,
                                   codes != NULL ? codes + 2 * p->group : NULL};
    (void)worker;
    for (int64_t n = n0; n < n1; n++) {
        if (row != NULL) {
            w4a8_quant_row_f32(p, n, row);
        }
        for (int64_t gi = 0; gi < groups; gi++) {
            ckc_w4a8q_step_scale(p, n, gi, reuse);
        }
        ckc_w4a8q_step_channel(p, n);
        for (int64_t gi = 0; gi < groups; gi++) {
            ckc_w4a8q_step_codes(p, n, gi, reuse);
        }
    }
    free(codes);
    free(row);
}

static ckc_status
cpu_w4a8_quant(const ckc_quantize_w4a8_int8_weight_params *p, int nthreads, ckc_error *err)
{
    (void)err;
    ckc_parallel_for(p->rows, 1, ckc_parallel_threads(p->rows, 1, nthreads), w4a8_quant_rows, (void *)p);
    return CKC_OK;
}
