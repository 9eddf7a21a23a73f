/* SPDX-License-Identifier: Apache-2.0 */
/* The regular Hadamard rotation of ConvRot, written once for C and CUDA.
 *
 * comfy_kitchen's H_G is kron(H4, ..., H4) / sqrt(G) with the regular (all rows
 * of sum 2) H4 = [[1,1,1,-1],[1,1,-1,1],[1,-1,1,1],[-1,1,1,1]], for G a power
 * of 4.  Because every factor is H4, x @ H_G applies H4 along each base-4 digit
 * of the index: log4(G) radix-4 butterfly stages with strides 1, 4, 16, ...
 * H_G is symmetric and orthogonal, so the same map rotates and un-rotates.
 *
 * Inputs are multiplied by 1/sqrt(G) (a power of two, so exact) before the
 * butterflies, which gives the same products as eager's matmul by H_G and keeps
 * partial sums as small as eager's. */
#ifndef CKC_HADAMARD_H
#define CKC_HADAMARD_H

#include "ckc_inline.h"

#define CKC_HADAMARD_MIN_GROUP 4
#define CKC_HADAMARD_MAX_GROUP 1024

/* log4(g) for a power of four in [4, 1024], else -1. */
CKC_HD int
ckc_hadamard_log4(int64_t g)
{
    int n = 0;
    int64_t p = 1;
    while (p < g && n < 6) {
        p *= 4;
        n++;
    }
    return (p == g && g >= CKC_HADAMARD_MIN_GROUP && g <= CKC_HADAMARD_MAX_GROUP) ? n : -1;
}

/* 1/sqrt(g) = 2^-log4(g). */
CKC_HD float
ckc_hadamard_norm(int log4_g)
{
    return 1.0f / (float)(1 << log4_g);
}

/* One radix-4 butterfly: (y0..y3) = H4 (x0..x3). */
CKC_HD void
ckc_h4_butterfly(float *x0, float *x1, float *x2, float *x3)
{
    const float p = *x0 + *x1;
    const float m = *x0 - *x1;
    const float q = *x2 + *x3;
    const float r = *x2 - *x3;
    *x0 = p + r;
    *x1 = p - r;
    *x2 = m + q;
    *x3 = q - m;
}

#endif /* CKC_HADAMARD_H */
