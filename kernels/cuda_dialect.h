/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA dialect every kernel source (kernels/<family>.cu) is written in.  Under nvcc
 * it is plain CUDA, compiled to a fatbin of device code only (the host code that
 * launches it is C: csrc/gpu/launch_*.c, through the driver).  Compiled as C++17 by
 * the host compiler with CKC_EMULATED defined, csrc/emu/emu.h supplies the same
 * names (thread and block indices, __syncthreads, warp shuffles and votes, shared
 * memory, atomics) on the CPU, so the very same sources run on the emulated device
 * in tests.
 *
 * Spellings that differ between the two are written through macros:
 *   CKC_DYNAMIC_SHARED(type, name);                 dynamic shared memory
 *   CKC_KERNEL_INSTANCE(name, bounds, (params), (call))
 *                                                   one extern "C" kernel of the list
 *                                                   (csrc/gpu/kernel_list.h): a
 *                                                   __global__ on a GPU; on the
 *                                                   emulated device a function and
 *                                                   the runner the launchers call
 *   CKC_LAUNCH(kernel, grid, block, smem, stream, args...);   a launch from C++
 *                                                   (emulated device only: the
 *                                                   emulator's own tests) */
#ifndef CKC_CUDA_DIALECT_H
#define CKC_CUDA_DIALECT_H

/* The emulated runner's name of a kernel: ckc_emu_thunk_<kernel> (gpu/kernel.h names it alike). */
#define CKC_DIALECT_PASTE_(a, b) a##b
#define CKC_DIALECT_PASTE(a, b) CKC_DIALECT_PASTE_(a, b)

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

#define CKC_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#define CKC_KERNEL_INSTANCE(name, bounds, params, call) extern "C" __global__ void bounds name params { call; }

#elif defined(CKC_EMULATED)

#include <tuple>
#include <type_traits>
#include <utility>

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

/* A launch from the C launchers (ckc_gpu_launch, csrc/gpu/runtime_emu.c): each
 * argument is copied from args[i] as the kernel's parameter type, once, as the
 * driver copies kernel parameters at launch. */
template <typename... A, std::size_t... I>
static int
ckc_emu_run_args(void (*kernel)(A...), const char *log, const unsigned *grid, const unsigned *block, size_t smem,
                 uintptr_t stream, void **args, std::index_sequence<I...>)
{
    (void)args; /* a kernel without parameters reads none */
    return ckc_emu_launch(log, dim3(grid[0], grid[1], grid[2]), dim3(block[0], block[1], block[2]), smem, stream,
                          [kernel, values = std::make_tuple(*static_cast<const std::decay_t<A> *>(args[I])...)]() {
                              std::apply(kernel, values);
                          });
}

template <typename... A>
static int
ckc_emu_run(void (*kernel)(A...), const char *log, const unsigned *grid, const unsigned *block, size_t smem,
            uintptr_t stream, void **args)
{
    return ckc_emu_run_args(kernel, log, grid, block, smem, stream, args, std::index_sequence_for<A...>());
}

/* The runners are exported from _C_emu: the stand-in CUDA driver (tests/cuda_standin) runs a
 * kernel the driver path launches by its runner's symbol, ckc_emu_thunk_<kernel>. */
#define CKC_EMU_EXPORTED __attribute__((visibility("default")))

#define CKC_KERNEL_INSTANCE(name, bounds, params, call)                                                         \
    extern "C" void name params { call; }                                                                       \
    extern "C" CKC_EMU_EXPORTED int CKC_DIALECT_PASTE(ckc_emu_thunk_, name)(const char *log, const unsigned *grid,  \
                                                                          const unsigned *block,                  \
                                                    size_t smem, uintptr_t stream, void **args)                 \
    {                                                                                                           \
        return ckc_emu_run(name, log, grid, block, smem, stream, args);                                          \
    }

#else
#error "kernels/<family>.cu are compiled by nvcc, or as C++ with CKC_EMULATED defined"
#endif

#endif /* CKC_CUDA_DIALECT_H */
