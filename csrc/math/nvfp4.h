/* SPDX-License-Identifier: Apache-2.0 */
/* Scalar math of NVFP4 (contract 2.11), written once for C and CUDA: per block
 * of 16 values an e4m3 block scale relative to a float32 per-tensor scale, e2m1
 * codes packed two per byte, and cuBLAS's swizzled block-scale layout.  The
 * arithmetic order is eager's, so codes and scales match it bit for bit. */
#ifndef CKC_NVFP4_H
#define CKC_NVFP4_H

#include "float_bits.h"

#define CKC_NVFP4_BLOCK 16
#define CKC_E2M1_MAX 6.0f
#define CKC_E4M3_MAX 448.0f

/* Hadamard group sizes of the rotated quantizer: from one block of 16 (the
 * rotation evens out each block, whose scale is its own) to 16 blocks, the
 * most whose rotation stays inside one warp of the GPU kernel (16 lanes). */
#define CKC_NVFP4_MIN_GROUP 16
#define CKC_NVFP4_MAX_GROUP 256

/* e4m3 block scale for a block whose absmax (taken in the element type) is
 * given: round_e4m3(min(absmax / 6 / per_tensor_scale, 448)).  NaN stays NaN.
 * A negative per-tensor scale makes it negative: eager's float8_e4m3fn cast
 * saturates there, so below -448 it is -448 (the fuzzer found it). */
CKC_HD uint8_t
ckc_nvfp4_block_scale(float absmax, float per_tensor_scale)
{
    float s = (absmax / CKC_E2M1_MAX) / per_tensor_scale;
    s = s > CKC_E4M3_MAX ? CKC_E4M3_MAX : s;
    s = s < -CKC_E4M3_MAX ? -CKC_E4M3_MAX : s;
    return ckc_f32_to_e4m3(s);
}

/* Divisor of the block's values: per_tensor_scale * block scale.  A zero
 * divisor means the block encodes as +0 codes (eager's zero-block rule). */
CKC_HD float
ckc_nvfp4_total_scale(uint8_t block_scale, float per_tensor_scale)
{
    return per_tensor_scale * ckc_e4m3_to_f32(block_scale);
}

/* Code of one value.  A NaN quotient (a NaN input, or any value of a block whose
 * scale is NaN) has no E2M1 code and no defined result in eager: it gets +0,
 * and the block's NaN scale still decodes the whole block to NaN. */
CKC_HD uint8_t
ckc_nvfp4_code(float x, float total_scale)
{
    float t = x / total_scale;
    /* +0 encodes as code 0.  Separate float-typed selects (not '&&') keep this
     * branch-free, so loops over values vectorize. */
    t = t == t ? t : 0.0f;
    t = total_scale != 0.0f ? t : 0.0f;
    t = t < -CKC_E2M1_MAX ? -CKC_E2M1_MAX : t;
    t = t > CKC_E2M1_MAX ? CKC_E2M1_MAX : t;
    return ckc_f32_to_e2m1(t);
}

/* Byte of two consecutive codes (elements 2j, 2j+1 of a row). */
CKC_HD uint8_t
ckc_nvfp4_pack(uint8_t even, uint8_t odd, int hi_first)
{
    return hi_first ? (uint8_t)((even << 4) | odd) : (uint8_t)((odd << 4) | even);
}

CKC_HD uint8_t
ckc_nvfp4_unpack_even(uint8_t byte, int hi_first)
{
    return hi_first ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 0xF);
}

CKC_HD uint8_t
ckc_nvfp4_unpack_odd(uint8_t byte, int hi_first)
{
    return hi_first ? (uint8_t)(byte & 0xF) : (uint8_t)(byte >> 4);
}

/* Shape of the swizzled scale buffer for rows x scale_cols logical scales:
 * whole tiles of CKC_NVFP4_SCALE_TILE_ROWS x CKC_NVFP4_SCALE_TILE_COLS. */
#define CKC_NVFP4_SCALE_TILE_ROWS 128
#define CKC_NVFP4_SCALE_TILE_COLS 4

CKC_HD int64_t
ckc_nvfp4_scale_rows(int64_t rows)
{
    return ckc_round_up(rows, CKC_NVFP4_SCALE_TILE_ROWS);
}

CKC_HD int64_t
ckc_nvfp4_scale_cols(int64_t scale_cols)
{
    return ckc_round_up(scale_cols, CKC_NVFP4_SCALE_TILE_COLS);
}

/* Offset of logical scale (r, c) in cuBLAS's "1D block scaling" layout: tiles
 * of 128 rows x 4 columns, each stored as [32][4][4] (row % 32, row / 32 % 4,
 * column % 4). */
CKC_HD int64_t
ckc_nvfp4_scale_offset(int64_t r, int64_t c, int64_t scale_cols)
{
    const int64_t col_tiles = (scale_cols + 3) / 4;
    return (((r / 128) * col_tiles + c / 4) * 32 + r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

#endif /* CKC_NVFP4_H */
