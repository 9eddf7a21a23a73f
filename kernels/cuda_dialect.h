/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA dialect every kernel source (kernels/<family>.cu) is written in.  Under nvcc
 * it is plain CUDA; compiled as C++17 by the host compiler with CKC_EMULATED
 * defined, kernels/emu/emu.h supplies the same names (thread and block indices,
 * __syncthreads, warp shuffles and votes, shared memory, atomics) on the CPU, so
 * the very same sources run on the emulated device in tests.
 *
 * Two spellings differ between the two and are written through macros:
 *   CKC_DYNAMIC_SHARED(type, name);                 dynamic shared memory
 *   CKC_LAUNCH(kernel, grid, block, smem, stream, args...);   a launch
 * The launch error, if any, is read with ckc_gpu_launch_status() (csrc/gpu/runtime.h). */
#ifndef CKC_CUDA_DIALECT_H
#define CKC_CUDA_DIALECT_H

/* CKC_UNROLL before a loop over a thread's register array (v[e], v[c][e]) unrolls it
 * fully, so that every index is a compile-time constant: a loop nvcc leaves rolled
 * (its body is large) indexes the array dynamically, which puts it in local memory.
 * The host compiler of the emulated device needs no such hint. */
#if defined(__CUDACC__)
#define CKC_UNROLL _Pragma("unroll")
#else
#define CKC_UNROLL
#endif

/* A kernel's register cap (CUDA 12.4's __maxnreg__, instead of __launch_bounds__): where the
 * occupancy the performance model asks for (benchmarks/gpu_model.py) needs fewer registers
 * than a block size bound alone would give.  Nothing on the emulated device. */
#if defined(__CUDACC__)
#define CKC_MAX_REGISTERS(n) __maxnreg__(n)
#else
#define CKC_MAX_REGISTERS(n)
#endif

#if defined(__CUDACC__)

#include <cuda_runtime.h>

#include "gpu/runtime.h" /* ckc_gpu_note_launch */

#define CKC_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
/* The launch is noted for the fault reports (grid and block of an op's kernels). */
#define CKC_LAUNCH(kernel, grid, block, smem, stream, ...)                                             \
    do {                                                                                                 \
        const dim3 ckc_launch_grid = (grid);                                                             \
        const dim3 ckc_launch_block = (block);                                                           \
        ckc_gpu_note_launch(#kernel, ckc_launch_grid.x, ckc_launch_grid.y, ckc_launch_grid.z,            \
                            ckc_launch_block.x, ckc_launch_block.y, ckc_launch_block.z);                 \
        kernel<<<ckc_launch_grid, ckc_launch_block, (smem), (cudaStream_t)(stream)>>>(__VA_ARGS__);      \
    } while (0)

#elif defined(CKC_EMULATED)

#include <tuple>

#include "emu/emu.h"

#ifndef __align__
#define __align__(n) alignas(n)
#endif

#define CKC_DYNAMIC_SHARED(type, name) type *name = (type *)ckc_emu_dynamic_shared()
/* The arguments are evaluated once, where the launch is written (as in CUDA),
 * and every emulated thread calls the kernel with those values. */
#define CKC_LAUNCH(kernel, grid, block, smem, stream, ...)                               \
    ckc_emu_launch(#kernel, (grid), (block), (smem), (uintptr_t)(stream),                \
                   [ckc_launch_kernel = (kernel), ckc_launch_args = std::make_tuple(__VA_ARGS__)]() { \
                       std::apply(ckc_launch_kernel, ckc_launch_args);                           \
                   })

#else
#error "kernels/<family>.cu are compiled by nvcc, or as C++ with CKC_EMULATED defined"
#endif

#endif /* CKC_CUDA_DIALECT_H */
