/* SPDX-License-Identifier: Apache-2.0 */
/* Per-element math of the W4A8 / W6A8 weight decode, shared by the CPU and CUDA
 * kernels: comfy_kitchen 0.2.40's eager _dequant_int4_grouped_to_int8 and
 * _dequantize_w4a8_int8_weight_from_int8, one element at a time, every step in
 * float32 as eager computes it, so the bits are eager's.
 *
 * Storage (tensor/w4a8_packed.py): a row of K codes is K/2 bytes of nibbles
 * (even column = low nibble); at 6 bits a K/4-byte plane follows with each
 * code's top two bits (column c: byte c/4, bits 2*(c%4)).  The MMA-packed form
 * (unpack_w4a8_mma_weight) holds 16-row x 32-column records: the codes in
 * fragment order, then 32 e4m3 group scales (groups of 16 columns). */
#ifndef CKC_MATH_W4A8_H
#define CKC_MATH_W4A8_H

#include <math.h>

#include "float_bits.h"

/* ---- codes of the canonical storage ---- */

/* Code of column c of a row (its first byte at row): 0..15, or 0..63 at 6 bits. */
CKC_HD uint32_t
ckc_w4a8_code(const uint8_t *row, int64_t k, int bits, int64_t c)
{
    uint32_t code = (uint32_t)(row[c >> 1] >> ((c & 1) * 4)) & 0xFu;
    if (bits == 6) {
        code |= ((uint32_t)(row[k / 2 + (c >> 2)] >> ((c & 3) * 2)) & 0x3u) << 4;
    }
    return code;
}

/* The level a code decodes to before its group scale: the codebook's entry, or
 * the uniform code minus its mid-range zero point (eager: q.float() - 2^(bits-1)). */
CKC_HD float
ckc_w4a8_level(uint32_t code, const float *codebook, int bits)
{
    if (codebook != NULL) {
        return codebook[code];
    }
    return (float)code - (float)(1 << (bits - 1));
}

/* A group scale from s_rel's storage: float32, or the e4m3fn byte. */
CKC_HD float
ckc_w4a8_scale(const void *s_rel, int e4m3, int64_t i)
{
    return e4m3 ? ckc_e4m3_to_f32(((const uint8_t *)s_rel)[i]) : ((const float *)s_rel)[i];
}

/* The int8 grid value: (level * s_rel).round().clamp(-127, 127).to(int8).  Eager's
 * float -> int8 cast of a NaN (0 * inf, or a NaN scale) gives 0 on the CPU and on CUDA
 * (the conversion of NaN to an integer), so NaN decodes to 0 here. */
CKC_HD int8_t
ckc_w4a8_int8(float level, float scale)
{
    const float r = rintf(level * scale);
    if (r != r) {
        return 0;
    }
    return (int8_t)(r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r));
}

/* The float32 weight before its final rounding: int8 * s_channel (+ correction),
 * two float32 operations as eager's two tensor ops. */
CKC_HD float
ckc_w4a8_weight(int8_t q, float s_channel, int has_correction, float correction)
{
    const float w = (float)q * s_channel;
    return has_correction ? w + correction : w;
}

/* ---- the MMA-packed records (16 rows x 32 columns each) ---- */

/* Bytes of one record: 512 codes and 32 scale bytes (288 at 4 bits, 416 at 6). */
CKC_HD int64_t
ckc_w4a8_mma_record_bytes(int bits)
{
    return 512 * bits / 8 + 32;
}

/* Code (r, c) of a record (r < 16, c < 32) at 4 bits: fragment f = (r >= 8) +
 * 2 (byte >= 8) of row bytes, lane (a = r % 8, b = byte % 8 / 2), byte e = byte % 2. */
CKC_HD uint32_t
ckc_w4a8_mma_code4(const uint8_t *rec, int r, int c)
{
    const int byte = c >> 1;
    const int f = (r >> 3) | ((byte >> 3) << 1);
    const int off = (((r & 7) * 4 + ((byte & 7) >> 1)) * 4 + f) * 2 + (byte & 1);
    return (uint32_t)(rec[off] >> ((c & 1) * 4)) & 0xFu;
}

/* Code (r, c) at 6 bits: lane a * 4 + b (a = r % 8, b = c % 16 / 4) holds 12 bytes
 * (8 in the first plane, 4 in the second), fragment f = (r >= 8) + 2 (c >= 16) in
 * its bytes 3f..3f+2, four 6-bit codes little-endian (s = c % 4). */
CKC_HD uint32_t
ckc_w4a8_mma_code6(const uint8_t *rec, int r, int c)
{
    const int lane = (r & 7) * 4 + ((c & 15) >> 2);
    const int f = (r >> 3) | ((c >> 4) << 1);
    uint32_t word = 0;
    for (int j = 0; j < 3; j++) {
        const int byte = 3 * f + j;
        const uint8_t v = byte < 8 ? rec[lane * 8 + byte] : rec[256 + lane * 4 + byte - 8];
        word |= (uint32_t)v << (8 * j);
    }
    return (word >> (6 * (c & 3))) & 0x3Fu;
}

/* The e4m3 scale byte of row r's group g (g < 2: columns 16g..16g+15) of a record. */
CKC_HD uint8_t
ckc_w4a8_mma_scale(const uint8_t *rec, int bits, int r, int g)
{
    return rec[512 * bits / 8 + (r & 7) * 4 + ((r >> 3) | (g << 1))];
}

#endif /* CKC_MATH_W4A8_H */
