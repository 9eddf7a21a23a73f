/* SPDX-License-Identifier: Apache-2.0 */
/* The W4A8 / W6A8 weight quantizer on a rotated weight, one group and one row
 * at a time, shared by the CPU and CUDA kernels: comfy_kitchen 0.2.40's eager
 * _quantize_rotated_w4a8_int8_weight (and its _search_group_scale and
 * _assign_grid), every step a float32 operation in eager's order, so that on the
 * same rotated weight (and the same noise) the codes, scales and correction are
 * eager's bit for bit.  The codebook choice (a sampled fit) and the noise are
 * the Python side's (comfy_kitchen_c/w4a8_quant.py), as torch computes them.
 *
 * Three forms (ckc_w4a8q_mode):
 *   ALS      a level table (the 16-entry codebook, or the 63 integers -31..31 at
 *            6 bits): group scale from the absmax, two ALS passes, then the
 *            codes re-chosen on the int8 grid the stored scale decodes to (at
 *            6 bits, optionally the best of three neighbouring scales first);
 *   UNIFORM  symmetric 4-bit integers: scale absmax / 7, codes round(w / s) + 8;
 *   ASYM     4-bit integers over [min, max]: scale (max - min) / 15, codes
 *            round((w - min) / s), and a correction 8 s + min per group.
 * Rounding is to nearest even, or with noise u in [0, 1): floor(x + u) for the
 * integer forms, the upper level where x > lo + u (hi - lo) on the grid.
 * Every group sum is aten's (math/aten_sum.h); the magnitudes' maxima propagate
 * NaN as torch's amax does, the asymmetric form's min and max assume finite
 * weights (the wrapper refuses others; the results stay defined). */
#ifndef CKC_MATH_W4A8_QUANT_H
#define CKC_MATH_W4A8_QUANT_H

#include <math.h>

#include "aten_sum.h"
#include "float_bits.h"
#include "w4a8.h"

typedef enum { CKC_W4A8Q_ALS = 0, CKC_W4A8Q_UNIFORM = 1, CKC_W4A8Q_ASYM = 2 } ckc_w4a8q_mode;

#define CKC_W4A8Q_TINY 1e-8f   /* eager's clamp(min=1e-8) of every scale and ALS denominator */
#define CKC_W4A8Q_W6_LEVELS 31 /* 6-bit levels -31..31 */
#define CKC_W4A8Q_E4M3_MAX 0x7E /* the largest finite e4m3fn byte (0x7F is NaN) */

/* A table of levels as the searches read it: the level table itself (grid 0)
 * or the int8 grid it decodes to at scale s (grid 1), optionally precomputed
 * (pre: the CPU's per-group array) rather than computed at each probe. */
typedef struct {
    const float *table;      /* the codebook (16 levels), or NULL: -31..31 */
    int grid;
    float s;
    float inv_s;             /* 1 / s: the 6-bit walk's first guess only (exactness is the walk's) */
    int count;               /* 16 or 63 */
    int ascending;           /* non-decreasing, no NaN: the branchless search gives aten's index */
    const float *pre;        /* [count] the levels, or NULL */
} ckc_w4a8q_levels;

/* What a group's math reads: the rotated weight's group, the level table. */
typedef struct {
    const void *w;           /* the row's first element */
    ckc_float_kind kind;
    const float *w32;        /* the row as float32 (the CPU's copy), or NULL: read w */
    int64_t c0;              /* the group's first column */
    const float *noise;      /* the row's noise (the same columns), or NULL: nearest */
    const float *table;      /* the codebook (16 levels), or NULL: -31..31 (ALS) */
    int table_ascending;     /* the table (or -31..31) is non-decreasing with no NaN */
    float scale;             /* the scale the terms divide by (ALS passes, grid search) */
    float s_channel;         /* the grid's divisor (grid terms) */
    float *grid_pre;         /* room for 64 grid levels (CPU), or NULL */
    uint8_t *codes;          /* room for the group's ALS level indices (CPU), or NULL: recomputed */
    uint8_t *best;           /* room for the scale search's best grid indices (CPU), or NULL */
    uint8_t *row_codes;      /* the row's UNIFORM / ASYM codes, kept from phase 1 for phase 2 (CPU), or NULL */
    int have_best;           /* best holds the indices of the stored scale's grid */
    ckc_w4a8q_levels levels; /* the table's levels (ALS assignment) */
    ckc_w4a8q_levels grid;   /* the grid at the current stored scale (ckc_w4a8q_set_grid) */
} ckc_w4a8q_group;

CKC_HD float
ckc_w4a8q_w(const ckc_w4a8q_group *g, int64_t i)
{
    return g->w32 != NULL ? g->w32[g->c0 + i] : ckc_kind_value(g->w, g->kind, g->c0 + i);
}

/* torch.clamp(v, min=m): NaN stays NaN. */
CKC_HD float
ckc_w4a8q_at_least(float v, float m)
{
    return v < m ? m : v;
}

/* A magnitude as float32 bits: non-negative floats order as their bits, and a NaN's
 * (above infinity's) win, as torch's amax lets NaN win; so a group's largest
 * magnitude is an integer max, which the CPU's loops vectorize. */
CKC_HD uint32_t
ckc_w4a8q_abs_bits(float v)
{
    return ckc_f32_bits(v) & 0x7FFFFFFFu;
}

/* A float32 as an int32 that orders as the float does (negative ones with their magnitude
 * bits flipped; -0 just below +0): a group's min and max as integer ones.  Finite weights
 * only (the wrapper refuses others; a NaN orders as some value, a defined answer). */
CKC_HD int32_t
ckc_w4a8q_order_key(float v)
{
    const uint32_t u = ckc_f32_bits(v);
    return (int32_t)(u ^ ((uint32_t)((int32_t)u >> 31) & 0x7FFFFFFFu));
}

CKC_HD float
ckc_w4a8q_from_key(int32_t key)
{
    const uint32_t u = (uint32_t)key;
    return ckc_f32_from_bits(u ^ ((uint32_t)((int32_t)u >> 31) & 0x7FFFFFFFu));
}

/* torch's max: NaN wins. */
CKC_HD float
ckc_w4a8q_max(float a, float b)
{
    return (a != a || a > b) ? a : b;
}

/* An integer code clamp(q, lo, hi) as eager's .clamp().to(int32).  A NaN q
 * (never from a finite weight: the wrapper refuses others) takes lo, a defined
 * value where eager's cast of NaN is not one. */
CKC_HD int
ckc_w4a8q_int(float q, float lo, float hi)
{
    return (int)(q > hi ? hi : (q >= lo ? q : lo));
}

CKC_HD int
ckc_w4a8q_count(const float *table)
{
    return table != NULL ? 16 : 2 * CKC_W4A8Q_W6_LEVELS + 1;
}

/* Level i of the table: the decoder's level (math/w4a8.h) of the code index i is
 * stored as (i at 4 bits, i + 1 at 6: codes 1..63 for -31..31). */
CKC_HD float
ckc_w4a8q_level(const float *table, int i)
{
    return ckc_w4a8_level((uint32_t)(table != NULL ? i : i + 1), table, table != NULL ? 4 : 6);
}

/* Level i of the int8 grid at scale s: (level * s).round_().clamp_(-127, 127). */
CKC_HD float
ckc_w4a8q_grid(const float *table, int i, float s)
{
    const float r = rintf(ckc_w4a8q_level(table, i) * s);
    return r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r);
}

CKC_HD float
ckc_w4a8q_lv(const ckc_w4a8q_levels *l, int i)
{
    if (l->pre != NULL) {
        return l->pre[i];
    }
    return l->grid ? ckc_w4a8q_grid(l->table, i, l->s) : ckc_w4a8q_level(l->table, i);
}

/* Whether the table (NULL: -31..31) is non-decreasing with no NaN. */
CKC_HD int
ckc_w4a8q_ascending(const float *table)
{
    if (table == NULL) {
        return 1;
    }
    int ok = table[0] == table[0];
    for (int i = 1; i < 16; i++) {
        ok &= table[i] >= table[i - 1];
    }
    return ok;
}

/* torch.searchsorted (left) of v.  aten's binary search moves right while
 * !(mid >= v), so a NaN v lands past the end and an unsorted table is searched
 * as aten searches it; on a non-decreasing table without NaN its answer is the
 * first index whose level is >= v (count if none), which the branchless search
 * finds with the same comparison in fewer, predictable steps. */
CKC_HD int
ckc_w4a8q_search(const ckc_w4a8q_levels *l, float v)
{
    if (l->ascending && l->grid && l->table == NULL) {
        /* the 6-bit grid, round((i - 31) s) clamped: start at v's own level and
         * walk to the first index >= v (a step or two; runs of equal levels
         * where s < 1 or at the clamps) */
        const float q = v * l->inv_s;
        int pos = q > -40.0f && q < 40.0f ? (int)q + CKC_W4A8Q_W6_LEVELS : (q >= 40.0f ? l->count : 0);
        pos = pos < 0 ? 0 : (pos > l->count ? l->count : pos);
        while (pos > 0 && ckc_w4a8q_lv(l, pos - 1) >= v) {
            pos--;
        }
        while (pos < l->count && !(ckc_w4a8q_lv(l, pos) >= v)) {
            pos++;
        }
        return pos;
    }
    if (l->ascending) {
        int base = 0, n = l->count;
        while (n > 1) {
            const int half = n >> 1;
            base = !(ckc_w4a8q_lv(l, base + half) >= v) ? base + half : base;
            n -= half;
        }
        return base + (!(ckc_w4a8q_lv(l, base) >= v) ? 1 : 0);
    }
    int lo = 0, hi = l->count;
    while (lo < hi) {
        const int mid = lo + ((hi - lo) >> 1);
        if (!(ckc_w4a8q_lv(l, mid) >= v)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* Nearest level (eager's _assign_codes / _assign_grid): of the two neighbours
 * of the insertion point, the upper only if strictly nearer. */
CKC_HD int
ckc_w4a8q_nearest(const ckc_w4a8q_levels *l, float v)
{
    const int last = l->count - 1;
    const int pos = ckc_w4a8q_search(l, v);
    const int lo = pos > 0 ? pos - 1 : 0; /* pos <= count: pos - 1 <= last */
    const int hi = pos > last ? last : pos;
    const float dlo = fabsf(v - ckc_w4a8q_lv(l, lo));
    const float dhi = fabsf(v - ckc_w4a8q_lv(l, hi));
    return dhi < dlo ? hi : lo;
}

/* Stochastic grid level (eager's _assign_grid with a seed): the bracket
 * [lo, lo + 1] of the insertion point, the upper level where v > lo + u * width
 * (thr.mul_(width).add_(level_lo): two roundings). */
CKC_HD int
ckc_w4a8q_stochastic(const ckc_w4a8q_levels *l, float v, float u)
{
    const int last = l->count - 1;
    const int pos = ckc_w4a8q_search(l, v);
    const int lo = pos - 1 < 0 ? 0 : (pos - 1 > last - 1 ? last - 1 : pos - 1);
    const float level_lo = ckc_w4a8q_lv(l, lo);
    const float width = ckc_w4a8q_lv(l, lo + 1) - level_lo;
    const float thr = u * width + level_lo;
    const int idx = lo + (v > thr ? 1 : 0);
    return idx > last ? last : idx;
}

/* The grid view of g at stored scale s (filling g->grid_pre when the caller
 * gave room): non-decreasing when the table is and s is a finite s >= 0. */
CKC_HD void
ckc_w4a8q_set_grid(ckc_w4a8q_group *g, float s)
{
    g->grid.table = g->table;
    g->grid.grid = 1;
    g->grid.s = s;
    g->grid.inv_s = 1.0f / s;
    g->grid.count = ckc_w4a8q_count(g->table);
    g->grid.ascending = g->table_ascending && s >= 0.0f && s < INFINITY;
    g->grid.pre = NULL;
    if (g->grid_pre != NULL) {
        for (int i = 0; i < g->grid.count; i++) {
            g->grid_pre[i] = ckc_w4a8q_grid(g->table, i, s);
        }
        g->grid.pre = g->grid_pre;
    }
}

/* ALS's level index of w / scale: nearest codebook entry, or at 6 bits
 * round(w / scale) clamped to +-31, plus 31. */
CKC_HD int
ckc_w4a8q_assign(const ckc_w4a8q_group *g, int64_t i)
{
    const float v = ckc_w4a8q_w(g, i) / g->scale;
    if (g->table != NULL) {
        return ckc_w4a8q_nearest(&g->levels, v);
    }
    return ckc_w4a8q_int(rintf(v), -31.0f, 31.0f) + CKC_W4A8Q_W6_LEVELS;
}

/* ALS's level index of value i at g->scale: from the cache the caller filled
 * for this scale (ckc_w4a8q_fill), or computed. */
CKC_HD int
ckc_w4a8q_index(const ckc_w4a8q_group *g, int64_t i)
{
    return g->codes != NULL ? (int)g->codes[i] : ckc_w4a8q_assign(g, i);
}

/* Sets g->scale and, with a cache, fills it: each value's index once per scale. */
CKC_HD void
ckc_w4a8q_fill(ckc_w4a8q_group *g, float scale, int64_t size)
{
    g->scale = scale;
    for (int64_t i = 0; g->codes != NULL && i < size; i++) {
        g->codes[i] = (uint8_t)ckc_w4a8q_assign(g, i);
    }
}

/* ALS's two sums' terms: w * level and level * level of w's level at g->scale. */
CKC_HD float
ckc_w4a8q_term_wl(const void *ctx, int64_t i)
{
    const ckc_w4a8q_group *g = (const ckc_w4a8q_group *)ctx;
    return ckc_w4a8q_w(g, i) * ckc_w4a8q_level(g->table, ckc_w4a8q_index(g, i));
}

CKC_HD float
ckc_w4a8q_term_ll(const void *ctx, int64_t i)
{
    const ckc_w4a8q_group *g = (const ckc_w4a8q_group *)ctx;
    const float l = ckc_w4a8q_level(g->table, ckc_w4a8q_index(g, i));
    return l * l;
}

/* The grid search's error term: (grid[nearest] - target)^2 on the grid g->grid,
 * target = w / s_channel. */
CKC_HD float
ckc_w4a8q_term_err(const void *ctx, int64_t i)
{
    const ckc_w4a8q_group *g = (const ckc_w4a8q_group *)ctx;
    const float t = ckc_w4a8q_w(g, i) / g->s_channel;
    const int idx = ckc_w4a8q_nearest(&g->grid, t);
    const float d = ckc_w4a8q_lv(&g->grid, idx) - t;
    if (g->codes != NULL) {
        g->codes[i] = (uint8_t)idx; /* kept if this grid wins (ckc_w4a8q_search_scale) */
    }
    return d * d;
}

/* The group sums of ALS and of the scale search, in aten's order. */
CKC_ATEN_SUM(ckc_w4a8q_sum_wl, ckc_w4a8q_term_wl)
CKC_ATEN_SUM(ckc_w4a8q_sum_ll, ckc_w4a8q_term_ll)
CKC_ATEN_SUM(ckc_w4a8q_sum_err, ckc_w4a8q_term_err)

/* ---- phase 1: a group's scale, and the largest |shifted weight| it gives ---- */

/* round(x) to nearest even, or floor(x + u) with noise. */
CKC_HD float
ckc_w4a8q_round(float x, const float *noise, int64_t i)
{
    return noise != NULL ? floorf(x + noise[i]) : rintf(x);
}

/* The group's largest magnitude (NaN wins). */
CKC_HD float
ckc_w4a8q_absmax(const ckc_w4a8q_group *g, int64_t size)
{
    uint32_t m = 0;
    for (int64_t i = 0; i < size; i++) {
        const uint32_t b = ckc_w4a8q_abs_bits(ckc_w4a8q_w(g, i));
        m = b > m ? b : m;
    }
    return ckc_f32_from_bits(m);
}

/* The group's minimum and maximum (finite weights: ckc_w4a8q_order_key). */
CKC_HD void
ckc_w4a8q_range(const ckc_w4a8q_group *g, int64_t size, float *lo, float *hi)
{
    int32_t mn = INT32_MAX, mx = INT32_MIN;
    for (int64_t i = 0; i < size; i++) {
        const int32_t key = ckc_w4a8q_order_key(ckc_w4a8q_w(g, i));
        mn = key < mn ? key : mn;
        mx = key > mx ? key : mx;
    }
    *lo = ckc_w4a8q_from_key(mn);
    *hi = ckc_w4a8q_from_key(mx);
}

/* UNIFORM's and ASYM's integer code of value i before its offset: round((w - offset) /
 * scale) (or with noise) clamped to [lo, hi]. */
CKC_HD int
ckc_w4a8q_uniform(const ckc_w4a8q_group *g, int64_t i, float offset, float lo, float hi)
{
    return ckc_w4a8q_int(ckc_w4a8q_round((ckc_w4a8q_w(g, i) - offset) / g->scale, g->noise, g->c0 + i), lo, hi);
}

/* UNIFORM (asym 0: codes -8..7, stored + 8) and ASYM (codes 0..15, shifted - 8): the
 * largest |shifted| of the group at g->scale, its codes kept in g->row_codes when the
 * caller gave room.  (w - 0) is w for every finite w, so one loop serves both.  The
 * group's fields are read into locals first, and the codes stored by a loop of their
 * own: a byte store may alias anything, which would keep the CPU's loop scalar. */
CKC_HD float
ckc_w4a8q_uniform_shifted(ckc_w4a8q_group *g, int64_t size, int asym, float minimum)
{
    const float offset = asym ? minimum : 0.0f, lo = asym ? 0.0f : -8.0f, hi = asym ? 15.0f : 7.0f;
    const float scale = g->scale, shift = asym ? -8.0f : 0.0f;
    const float *w32 = g->w32 != NULL ? g->w32 + g->c0 : NULL;
    const float *noise = g->noise != NULL ? g->noise + g->c0 : NULL;
    uint32_t m = 0;
    if (w32 != NULL && noise == NULL) {
        for (int64_t i = 0; i < size; i++) {
            const float c = (float)ckc_w4a8q_int(rintf((w32[i] - offset) / scale), lo, hi);
            const uint32_t b = ckc_w4a8q_abs_bits((c + shift) * scale);
            m = b > m ? b : m;
        }
    } else {
        for (int64_t i = 0; i < size; i++) {
            const float c = (float)ckc_w4a8q_uniform(g, i, offset, lo, hi);
            const uint32_t b = ckc_w4a8q_abs_bits((c + shift) * scale);
            m = b > m ? b : m;
        }
    }
    if (g->row_codes != NULL) {
        uint8_t *codes = g->row_codes + g->c0;
        const int stored = asym ? 0 : 8;
        if (w32 != NULL && noise == NULL) {
            for (int64_t i = 0; i < size; i++) {
                codes[i] = (uint8_t)(ckc_w4a8q_int(rintf((w32[i] - offset) / scale), lo, hi) + stored);
            }
        } else {
            for (int64_t i = 0; i < size; i++) {
                codes[i] = (uint8_t)(ckc_w4a8q_uniform(g, i, offset, lo, hi) + stored);
            }
        }
    }
    return ckc_f32_from_bits(m);
}

/* The group's scale (ALS: after the two passes) into *scale, and for ASYM its
 * minimum into *minimum; returns max |shifted| over the group, the row's
 * s_channel term. */
CKC_HD float
ckc_w4a8q_group_scale(ckc_w4a8q_group *g, int mode, int64_t size, float *scale, float *minimum)
{
    float shifted = 0.0f, mn = 0.0f, mx = 0.0f;
    if (mode == CKC_W4A8Q_ALS) {
        const float amax = ckc_w4a8q_absmax(g, size);
        ckc_w4a8q_fill(g, g->table != NULL ? ckc_w4a8q_at_least(amax, CKC_W4A8Q_TINY)
                       : ckc_w4a8q_at_least(amax / (float)CKC_W4A8Q_W6_LEVELS, CKC_W4A8Q_TINY), size);
        for (int pass = 0; pass < 2; pass++) {
            const float num = ckc_w4a8q_sum_wl(g, size);
            const float den = ckc_w4a8q_at_least(ckc_w4a8q_sum_ll(g, size), CKC_W4A8Q_TINY);
            ckc_w4a8q_fill(g, ckc_w4a8q_at_least(num / den, CKC_W4A8Q_TINY), size);
        }
        for (int64_t i = 0; i < size; i++) {
            shifted = ckc_w4a8q_max(shifted, fabsf(ckc_w4a8q_level(g->table, ckc_w4a8q_index(g, i)) * g->scale));
        }
    } else if (mode == CKC_W4A8Q_UNIFORM) {
        g->scale = ckc_w4a8q_at_least(ckc_w4a8q_absmax(g, size) / 7.0f, CKC_W4A8Q_TINY);
        shifted = ckc_w4a8q_uniform_shifted(g, size, 0, 0.0f);
    } else {
        ckc_w4a8q_range(g, size, &mn, &mx);
        g->scale = ckc_w4a8q_at_least((mx - mn) / 15.0f, CKC_W4A8Q_TINY);
        shifted = ckc_w4a8q_uniform_shifted(g, size, 1, mn);
    }
    *scale = g->scale;
    *minimum = mn;
    return shifted;
}

/* The row's s_channel from its groups' largest |shifted| (amax / 127, clamped). */
CKC_HD float
ckc_w4a8q_channel(float shifted_max)
{
    return ckc_w4a8q_at_least(shifted_max / 127.0f, CKC_W4A8Q_TINY);
}

/* ---- phase 2: the stored scale and the codes ---- */

/* The stored group scale (float32 scale / s_channel, or its e4m3 byte) as
 * float32 into *s, its byte into *byte. */
CKC_HD void
ckc_w4a8q_stored_scale(float scale, float s_channel, int e4m3, float *s, uint8_t *byte)
{
    const float r = scale / s_channel;
    *byte = e4m3 ? ckc_f32_to_e4m3(r) : 0;
    *s = e4m3 ? ckc_e4m3_to_f32(*byte) : r;
}

/* Candidate c (1, 2) of the 6-bit scale search around the stored s: the e4m3
 * byte one below (at least 1) or above (at most 0x7E), in uint8 arithmetic as
 * eager's, or s * (1 -+ 0.03) for float32 scales. */
CKC_HD float
ckc_w4a8q_candidate(float s, uint8_t byte, int e4m3, int c)
{
    if (e4m3) {
        const uint8_t down = (uint8_t)(byte - 1u), up = (uint8_t)(byte + 1u);
        return ckc_e4m3_to_f32(c == 1 ? (down < 1 ? 1 : down) : (up > CKC_W4A8Q_E4M3_MAX ? CKC_W4A8Q_E4M3_MAX : up));
    }
    return s * (c == 1 ? (float)(1.0 - 0.03) : (float)(1.0 + 0.03));
}

/* Swaps the search's two index buffers: the indices just found become the best's. */
CKC_HD void
ckc_w4a8q_keep_best(ckc_w4a8q_group *g)
{
    uint8_t *t = g->best;
    g->best = g->codes;
    g->codes = t;
}

/* The 6-bit search: of the stored scale and its two candidates (in that
 * order), the one whose grid reconstructs w / s_channel with the least
 * squared error (a later one only if strictly less).  Returns the scale;
 * *byte is its e4m3 byte. */
CKC_HD float
ckc_w4a8q_search_scale(ckc_w4a8q_group *g, int64_t size, float s, uint8_t *byte, int e4m3)
{
    float best = s;
    const int keep = g->codes != NULL && g->best != NULL;
    ckc_w4a8q_set_grid(g, s);
    float best_err = ckc_w4a8q_sum_err(g, size);
    const uint8_t base = *byte;
    if (keep) {
        ckc_w4a8q_keep_best(g); /* the winner's indices into best, the room for the next into codes */
    }
    for (int c = 1; c <= 2; c++) {
        const float candidate = ckc_w4a8q_candidate(s, base, e4m3, c);
        ckc_w4a8q_set_grid(g, candidate);
        const float err = ckc_w4a8q_sum_err(g, size);
        if (err < best_err) {
            best_err = err;
            best = candidate;
            if (keep) {
                ckc_w4a8q_keep_best(g);
            }
        }
    }
    g->have_best = keep;
    if (e4m3) {
        *byte = ckc_f32_to_e4m3(best); /* an e4m3 value: its own byte back */
    }
    return best;
}

/* Code of column i of the group: ALS on the grid g->grid of the stored scale
 * (+1 at 6 bits: codes 1..63), UNIFORM round(w / g->scale) + 8, ASYM round
 * over the minimum. */
CKC_HD uint32_t
ckc_w4a8q_code(const ckc_w4a8q_group *g, int mode, float minimum, int64_t i)
{
    if (mode == CKC_W4A8Q_ALS) {
        const float t = ckc_w4a8q_w(g, i) / g->s_channel;
        const int idx = g->noise != NULL ? ckc_w4a8q_stochastic(&g->grid, t, g->noise[g->c0 + i])
                        : (g->have_best ? (int)g->best[i] : ckc_w4a8q_nearest(&g->grid, t));
        return (uint32_t)(g->table != NULL ? idx : idx + 1);
    }
    if (g->row_codes != NULL) {
        return g->row_codes[g->c0 + i]; /* phase 1's */
    }
    if (mode == CKC_W4A8Q_UNIFORM) {
        return (uint32_t)(ckc_w4a8q_uniform(g, i, 0.0f, -8.0f, 7.0f) + 8);
    }
    return (uint32_t)ckc_w4a8q_uniform(g, i, minimum, 0.0f, 15.0f);
}

/* ASYM's correction of a group: (8 * scale + min) before its rounding to the
 * weight's dtype. */
CKC_HD float
ckc_w4a8q_correction(float scale, float minimum)
{
    return 8.0f * scale + minimum;
}

#endif /* CKC_MATH_W4A8_QUANT_H */
