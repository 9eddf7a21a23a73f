/* SPDX-License-Identifier: Apache-2.0 */
/* CPU kernels of the W4A8 / W6A8 weight decode: each row's codes to the int8
 * grid (math/w4a8.h), then either stored as int8 (the linears' weight) or
 * scaled by the row's s_channel, corrected, and rounded to the output type (the
 * dequantizer's weight before its rotation).  The thread pool gets rows; a row
 * is decoded one group at a time, its scale read once.  Compiled once per
 * instruction set, inside kernels_isa.h. */
#include "math/w4a8.h"

/* The int8 grid of row n's columns [c0, c0 + len) (len within one group of the
 * canonical storage) with the group's scale s. */
static void
w4a8_decode_span(const ckc_dequantize_w4a8_int8_weight_params *p, const uint8_t *row, int64_t c0, int64_t len,
                 float s, int8_t *dst)
{
    for (int64_t j = 0; j < len; j++) {
        dst[j] = ckc_w4a8_int8(ckc_w4a8_level(ckc_w4a8_code(row, p->k, p->bits, c0 + j), p->codebook, p->bits),
                               s);
    }
}

/* Row n of the MMA records: record (n / 16, c / 32), its row n % 16, group (c % 32) / 16. */
static void
w4a8_decode_mma_row(const ckc_dequantize_w4a8_int8_weight_params *p, int64_t n, int8_t *dst)
{
    const int64_t record = ckc_w4a8_mma_record_bytes(p->bits);
    const int r = (int)(n & 15);
    for (int64_t kr = 0; kr < p->k / 32; kr++) {
        const uint8_t *rec = p->q + ((n >> 4) * (p->k / 32) + kr) * record;
        for (int g = 0; g < 2; g++) {
            const float s = ckc_e4m3_to_f32(ckc_w4a8_mma_scale(rec, p->bits, r, g));
            for (int j = 0; j < 16; j++) {
                const int c = 16 * g + j;
                const uint32_t code = p->bits == 6 ? ckc_w4a8_mma_code6(rec, r, c) : ckc_w4a8_mma_code4(rec, r, c);
                dst[32 * kr + c] = ckc_w4a8_int8(ckc_w4a8_level(code, p->codebook, p->bits), s);
            }
        }
    }
}

/* Row n's int8 grid into dst (k values). */
static void
w4a8_decode_row(const ckc_dequantize_w4a8_int8_weight_params *p, int64_t n, int8_t *dst)
{
    if (p->packed) {
        w4a8_decode_mma_row(p, n, dst);
        return;
    }
    const uint8_t *row = p->q + n * (p->k * p->bits / 8);
    const int64_t groups = p->k / p->group;
    for (int64_t g = 0; g < groups; g++) {
        const float s = ckc_w4a8_scale(p->s_rel, p->s_e4m3, n * groups + g);
        w4a8_decode_span(p, row, g * p->group, p->group, s, dst + g * p->group);
    }
}

/* Row n's float weight from its int8 grid q: q * s_channel (+ correction[g, n]),
 * rounded to the output type. */
static void
w4a8_scale_row(const ckc_dequantize_w4a8_int8_weight_params *p, int64_t n, const int8_t *q)
{
    const float sc = p->s_channel[n];
    const int has_corr = p->correction != NULL;
    for (int64_t c = 0; c < p->k; c++) {
        const float corr = has_corr ? ckc_kind_value(p->correction, p->corr_kind, (c / p->group) * p->rows + n) : 0.0f;
        const float w = ckc_w4a8_weight(q[c], sc, has_corr, corr);
        const int64_t i = n * p->k + c;
        if (p->out_kind == CKC_F32) {
            ((float *)p->out)[i] = w;
        } else {
            ((uint16_t *)p->out)[i] = p->out_kind == CKC_BF16 ? ckc_f32_to_bf16(w) : ckc_f32_to_f16(w);
        }
    }
}

static void
w4a8_dequant_range(void *ctx, int64_t n0, int64_t n1, int worker)
{
    const ckc_dequantize_w4a8_int8_weight_params *p = (const ckc_dequantize_w4a8_int8_weight_params *)ctx;
    int8_t buf[4096];
    (void)worker;
    for (int64_t n = n0; n < n1; n++) {
        if (p->out_int8) {
            w4a8_decode_row(p, n, (int8_t *)p->out + n * p->k);
            continue;
        }
        /* The float path decodes a row through a stack buffer when it fits, else in
         * the back of the row's own output bytes (s >= 2 bytes a value): value c is
         * read from byte k(s-1) + c before it is written to bytes [cs, cs+s), and
         * every later read, at k(s-1) + c' with c < c' < k, lies past cs + s - 1. */
        int8_t *q = buf;
        if (p->k > (int64_t)sizeof buf) {
            q = (int8_t *)p->out + n * p->k * ckc_kind_size(p->out_kind) + p->k * (ckc_kind_size(p->out_kind) - 1);
        }
        w4a8_decode_row(p, n, q);
        w4a8_scale_row(p, n, q);
    }
}

static ckc_status
cpu_w4a8_dequant(const ckc_dequantize_w4a8_int8_weight_params *p, int nthreads, ckc_error *err)
{
    (void)err;
    const int64_t row_bytes = p->k * (p->out_int8 ? 1 : ckc_kind_size(p->out_kind));
    ckc_advise_output_pages(p->out, (size_t)(p->rows * row_bytes));
    const int64_t grain = ckc_row_grain(p->k);
    ckc_parallel_for(p->rows, grain, ckc_parallel_threads(p->rows, grain, nthreads), w4a8_dequant_range, (void *)p);
    return CKC_OK;
}
