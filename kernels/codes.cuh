/* SPDX-License-Identifier: Apache-2.0 */
/* Chunks of 16 one-byte codes (FP8 codes, noise bytes) to and from memory: one
 * 16-byte access where the caller found the bytes 16-byte aligned (`vec`) and the
 * chunk whole, else byte by byte up to n.  Shared by kernels/fp8.cu and
 * kernels/mxfp8.cu. */
#ifndef CKC_CODES_CUH
#define CKC_CODES_CUH

#include "row_tile.cuh" /* CKC_CHUNK, ckc_bytes16 */

/* 16 codes from q[start..]: zeros past n. */
__device__ __forceinline__ void
ckc_fp8_load_codes(const uint8_t *q, int64_t start, int64_t n, bool vec, uint8_t c[CKC_CHUNK])
{
    if (vec && start + CKC_CHUNK <= n) {
        const ckc_bytes16 b = *(const ckc_bytes16 *)(q + start);
        CKC_UNROLL
        for (int e = 0; e < CKC_CHUNK; e++) {
            c[e] = (uint8_t)(b.w[e / 4] >> (8 * (e % 4)));
        }
        return;
    }
    CKC_UNROLL
    for (int e = 0; e < CKC_CHUNK; e++) {
        c[e] = start + e < n ? q[start + e] : (uint8_t)0;
    }
}

/* 16 codes to q[start..]: none past n. */
__device__ __forceinline__ void
ckc_fp8_store_codes(uint8_t *q, int64_t start, int64_t n, bool vec, const uint8_t c[CKC_CHUNK])
{
    if (vec && start + CKC_CHUNK <= n) {
        ckc_bytes16 b;
        CKC_UNROLL
        for (int w = 0; w < 4; w++) {
            b.w[w] = (uint32_t)c[4 * w] | (uint32_t)c[4 * w + 1] << 8 | (uint32_t)c[4 * w + 2] << 16 |
                     (uint32_t)c[4 * w + 3] << 24;
        }
        *(ckc_bytes16 *)(q + start) = b;
        return;
    }
    CKC_UNROLL
    for (int e = 0; e < CKC_CHUNK; e++) {
        if (start + e < n) {
            q[start + e] = c[e];
        }
    }
}

#endif /* CKC_CODES_CUH */
