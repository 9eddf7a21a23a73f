/* SPDX-License-Identifier: Apache-2.0 */
/* The W4A8 / W6A8 quantizer's steps over its parameter block, shared by the CPU
 * (csrc/cpu/w4a8_quant_impl.h: a row at a time, its groups in order) and the GPU
 * (kernels/w4a8_quant.cu: a thread per group, then per row, then per group):
 *   1. per group: its scale and largest |shifted| value into the scratch;
 *   2. per row: s_channel from its groups' largest values;
 *   3. per group: the stored scale, the codes, the correction.
 * The math is math/w4a8_quant.h's; each group writes only its own bytes (a group
 * is a whole number of 4 columns: 2 bytes of nibbles, 1 of the 6-bit plane). */
#ifndef CKC_CONTRACT_W4A8_QUANT_PLAN_H
#define CKC_CONTRACT_W4A8_QUANT_PLAN_H

#include "contract/params.h"
#include "math/w4a8_quant.h"

/* Where a thread keeps what it may reuse across a row's groups (the CPU's):
 * the row as float32, room for a group's grid levels and for its ALS indices;
 * all NULL on the GPU, whose threads read the weight and compute each level and
 * index where they need it. */
typedef struct {
    const float *w32;        /* the row */
    float *grid;             /* 64 floats */
    uint8_t *codes;          /* a group's worth */
    uint8_t *best;           /* a group's worth */
    uint8_t *row_codes;      /* a row's worth (UNIFORM, ASYM) */
} ckc_w4a8q_reuse;

/* Group gi of row n as the math reads it. */
CKC_HD ckc_w4a8q_group
ckc_w4a8q_group_of(const ckc_quantize_w4a8_int8_weight_params *p, int64_t n, int64_t gi, ckc_w4a8q_reuse r)
{
    ckc_w4a8q_group g;
    g.w = (const char *)p->w + n * p->k * ckc_kind_size(p->kind);
    g.kind = p->kind;
    g.w32 = r.w32;
    g.c0 = gi * p->group;
    g.noise = p->noise != NULL ? p->noise + n * p->k : NULL;
    g.table = p->table;
    g.table_ascending = ckc_w4a8q_ascending(p->table);
    g.scale = 0.0f;
    g.s_channel = 1.0f;
    g.grid_pre = r.grid;
    g.codes = r.codes;
    g.best = r.best;
    g.row_codes = p->mode == CKC_W4A8Q_ALS ? NULL : r.row_codes;
    g.have_best = 0;
    g.levels.table = p->table;
    g.levels.grid = 0;
    g.levels.s = 1.0f;
    g.levels.inv_s = 1.0f;
    g.levels.count = ckc_w4a8q_count(p->table);
    g.levels.ascending = g.table_ascending;
    g.levels.pre = NULL;
    g.grid = g.levels;
    return g;
}

/* Step 1 for group gi of row n. */
CKC_HD void
ckc_w4a8q_step_scale(const ckc_quantize_w4a8_int8_weight_params *p, int64_t n, int64_t gi, ckc_w4a8q_reuse r)
{
    ckc_w4a8q_group g = ckc_w4a8q_group_of(p, n, gi, r);
    const int64_t at = n * (p->k / p->group) + gi;
    float scale, minimum;
    p->shifted[at] = ckc_w4a8q_group_scale(&g, p->mode, p->group, &scale, &minimum);
    p->scale[at] = scale;
}

/* Step 2 for row n. */
CKC_HD void
ckc_w4a8q_step_channel(const ckc_quantize_w4a8_int8_weight_params *p, int64_t n)
{
    const int64_t groups = p->k / p->group;
    float m = 0.0f;
    for (int64_t gi = 0; gi < groups; gi++) {
        m = ckc_w4a8q_max(m, p->shifted[n * groups + gi]);
    }
    p->s_channel[n] = ckc_w4a8q_channel(m);
}

/* The group's codes packed into row n's bytes, four columns at a time. */
CKC_HD void
ckc_w4a8q_pack(const ckc_quantize_w4a8_int8_weight_params *p, const ckc_w4a8q_group *g, int64_t n, float minimum)
{
    uint8_t *row = p->q + n * (p->k * p->bits / 8);
    if (g->row_codes != NULL) { /* the uniform forms' codes, kept by phase 1: 4 bits, two to a byte */
        const uint8_t *codes = g->row_codes + g->c0;
        uint8_t *dst = row + g->c0 / 2;
        for (int64_t j = 0; j < p->group / 2; j++) {
            dst[j] = (uint8_t)((codes[2 * j] & 0xFu) | ((codes[2 * j + 1] & 0xFu) << 4));
        }
        return;
    }
    for (int64_t c = 0; c < p->group; c += 4) {
        const uint32_t q0 = ckc_w4a8q_code(g, p->mode, minimum, c), q1 = ckc_w4a8q_code(g, p->mode, minimum, c + 1);
        const uint32_t q2 = ckc_w4a8q_code(g, p->mode, minimum, c + 2), q3 = ckc_w4a8q_code(g, p->mode, minimum, c + 3);
        const int64_t col = g->c0 + c;
        row[col / 2] = (uint8_t)((q0 & 0xFu) | ((q1 & 0xFu) << 4));
        row[col / 2 + 1] = (uint8_t)((q2 & 0xFu) | ((q3 & 0xFu) << 4));
        if (p->bits == 6) {
            row[p->k / 2 + col / 4] =
                (uint8_t)(((q0 >> 4) & 3u) | (((q1 >> 4) & 3u) << 2) | (((q2 >> 4) & 3u) << 4) | (((q3 >> 4) & 3u) << 6));
        }
    }
}

/* Step 3 for group gi of row n. */
CKC_HD void
ckc_w4a8q_step_codes(const ckc_quantize_w4a8_int8_weight_params *p, int64_t n, int64_t gi, ckc_w4a8q_reuse r)
{
    ckc_w4a8q_group g = ckc_w4a8q_group_of(p, n, gi, r);
    const int64_t at = n * (p->k / p->group) + gi;
    const float scale = p->scale[at];
    float s, minimum = INFINITY;
    uint8_t byte;
    g.s_channel = p->s_channel[n];
    ckc_w4a8q_stored_scale(scale, g.s_channel, p->s_e4m3, &s, &byte);
    if (p->search) {
        s = ckc_w4a8q_search_scale(&g, p->group, s, &byte, p->s_e4m3);
    }
    /* the search's indices are the codes' unless they come by noise on the final grid */
    g.have_best = g.have_best && p->noise == NULL;
    if (p->s_e4m3) {
        ((uint8_t *)p->s_rel)[at] = byte;
    } else {
        ((float *)p->s_rel)[at] = s;
    }
    g.scale = scale;
    if (p->mode == CKC_W4A8Q_ALS) {
        ckc_w4a8q_set_grid(&g, s);
    }
    if (p->mode == CKC_W4A8Q_ASYM) {
        float maximum;
        ckc_w4a8q_range(&g, p->group, &minimum, &maximum);
        ckc_kind_store(p->correction, p->corr_kind, gi * p->rows + n, ckc_w4a8q_correction(scale, minimum));
    }
    ckc_w4a8q_pack(p, &g, n, minimum);
}

#endif /* CKC_CONTRACT_W4A8_QUANT_PLAN_H */
