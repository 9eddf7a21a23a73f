/* Function qualifiers that let one scalar-math header compile as C (CPU kernels)
 * and as CUDA C (device kernels, host launchers). */
#ifndef CKC_INLINE_H
#define CKC_INLINE_H

#include <stdint.h>

#if defined(__CUDACC__)
#define CKC_HD static __host__ __device__ __forceinline__
#else
#define CKC_HD static inline
#endif

#endif /* CKC_INLINE_H */
