/* SPDX-License-Identifier: Apache-2.0 */
/* CPU kernels of the W4A8 / W6A8 weight decode: each row's codes to the int8
 * grid (math/w4a8.h), then either stored as int8 (the linears' weight) or
 * scaled by the row's s_channel, corrected, and rounded to the output type (the
 * dequantizer's weight before its rotation).  The thread pool gets rows; a row
 * is decoded one group at a time, its scale read once.  Compiled once per
 * instruction set, inside kernels_isa.h. */
#include "math/w4a8.h"

/* The levels of every code before its group scale (math/w4a8.h), once per call. */
static void
w4a8_levels(const ckc_dequantize_w4a8_int8_weight_params *p, float level[64])
{
    for (uint32_t c = 0; c < (1u << p->bits); c++) {
        level[c] = ckc_w4a8_level(c, p->codebook, p->bits);
    }
}

/* The int8 grid of a canonical row, group by group: each group's codes looked up in a table
 * of its scale's int8 values (ckc_w4a8_int8 of every level: the same math, computed once per
 * group instead of once per element).  6-bit groups with fewer columns than levels are
 * computed per element. */
static void
w4a8_decode_canonical(const ckc_dequantize_w4a8_int8_weight_params *p, int64_t n, const float *level, int8_t *dst)
{
    const int64_t k = p->k, group = p->group, groups = k / group;
    const int bits = p->bits;
    const uint8_t *row = p->q + n * (k * bits / 8);
    int8_t lut[64];
    for (int64_t g = 0; g < groups; g++) {
        const float s = ckc_w4a8_scale(p->s_rel, p->s_e4m3, n * groups + g);
        const int64_t c0 = g * group;
        if (bits == 6 && group < 64) {
            for (int64_t j = 0; j < group; j++) {
                dst[c0 + j] = ckc_w4a8_int8(level[ckc_w4a8_code(row, k, 6, c0 + j)], s);
            }
            continue;
        }
        for (int c = 0; c < (1 << bits); c++) {
            lut[c] = ckc_w4a8_int8(level[c], s);
        }
        if (bits == 4) {
            for (int64_t j = 0; j < group; j += 2) {
                const uint8_t byte = row[(c0 + j) >> 1];
                dst[c0 + j] = lut[byte & 0xF];
                dst[c0 + j + 1] = lut[byte >> 4];
            }
        } else {
            for (int64_t j = 0; j < group; j++) {
                dst[c0 + j] = lut[ckc_w4a8_code(row, k, 6, c0 + j)];
            }
        }
    }
}

/* Row n of the MMA records: record (n / 16, c / 32), its row n % 16, group (c % 32) / 16. */
static void
w4a8_decode_mma_row(const ckc_dequantize_w4a8_int8_weight_params *p, int64_t n, const float *level, int8_t *dst)
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
                dst[32 * kr + c] = ckc_w4a8_int8(level[code], s);
            }
        }
    }
}

/* Row n's int8 grid into dst (k values). */
static void
w4a8_decode_row(const ckc_dequantize_w4a8_int8_weight_params *p, int64_t n, const float *level, int8_t *dst)
{
    if (p->packed) {
        w4a8_decode_mma_row(p, n, level, dst);
    } else {
        w4a8_decode_canonical(p, n, level, dst);
    }
}

/* Row n's float weight from its int8 grid q: q * s_channel (+ correction[g, n]), rounded
 * to the output type, a group at a time (its correction read once). */
static void
w4a8_scale_row(const ckc_dequantize_w4a8_int8_weight_params *p, int64_t n, const int8_t *q)
{
    const float sc = p->s_channel[n];
    const int has_corr = p->correction != NULL;
    const int64_t k = p->k, group = p->group;
    const ckc_float_kind kind = p->out_kind;
    for (int64_t c0 = 0; c0 < k; c0 += group) {
        const float corr = has_corr ? ckc_kind_value(p->correction, p->corr_kind, (c0 / group) * p->rows + n) : 0.0f;
        if (kind == CKC_F32) {
            float *out = (float *)p->out + n * k + c0;
            for (int64_t j = 0; j < group; j++) {
                out[j] = ckc_w4a8_weight(q[c0 + j], sc, has_corr, corr);
            }
        } else {
            uint16_t *out = (uint16_t *)p->out + n * k + c0;
            for (int64_t j = 0; j < group; j++) {
                const float w = ckc_w4a8_weight(q[c0 + j], sc, has_corr, corr);
                out[j] = kind == CKC_BF16 ? ckc_f32_to_bf16(w) : ckc_f32_to_f16(w);
            }
        }
    }
}

static void
w4a8_dequant_range(void *ctx, int64_t n0, int64_t n1, int worker)
{
    const ckc_dequantize_w4a8_int8_weight_params *p = (const ckc_dequantize_w4a8_int8_weight_params *)ctx;
    int8_t buf[4096];
    float level[64];
    (void)worker;
    w4a8_levels(p, level);
    for (int64_t n = n0; n < n1; n++) {
        if (p->out_int8) {
            w4a8_decode_row(p, n, level, (int8_t *)p->out + n * p->k);
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
        w4a8_decode_row(p, n, level, q);
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
