/* SPDX-License-Identifier: Apache-2.0 */
/* Function qualifiers that let one scalar-math header compile as C (CPU kernels)
 * and as CUDA C (device kernels, host launchers). */
#ifndef CKC_INLINE_H
#define CKC_INLINE_H

#include <stdint.h>

/* Always inlined: the CPU kernels rely on it so that loops calling these
 * helpers vectorize (a call left in a loop body blocks that). */
#if defined(__CUDACC__)
#define CKC_HD static __host__ __device__ __forceinline__
#elif defined(_MSC_VER)
#define CKC_HD static __forceinline
#elif defined(__GNUC__)
#define CKC_HD static inline __attribute__((always_inline))
#else
#define CKC_HD static inline
#endif

/* No FMA contraction in the CPU kernels: they must round exactly like eager (GCC
 * and clang: -ffp-contract=off in setup.py).  MSVC before Visual Studio 2022 may
 * fuse a * b + c into a vector FMA under /fp:precise when /arch:AVX2 allows it,
 * and has no flag to forbid that: only this pragma (which clang-cl does not know). */
#if defined(_MSC_VER) && !defined(__clang__) && !defined(__CUDACC__)
#pragma fp_contract(off)
#endif

/* v rounded up to a multiple of m (v >= 0, m > 0): every padded extent (the
 * NVFP4 scale tiles, pad_16x, the GEMM's alignments; Python asks _C.round_up)
 * is this one helper. */
CKC_HD int64_t
ckc_round_up(int64_t v, int64_t m)
{
    return (v + m - 1) / m * m;
}

#endif /* CKC_INLINE_H */
