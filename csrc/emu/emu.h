/* SPDX-License-Identifier: Apache-2.0 */
/* The emulated device: CUDA's kernel-side names for C++17 on the CPU, so that the
 * kernel sources (the .cu files under kernels/, in the dialect of kernels/cuda_dialect.h)
 * compile unchanged with g++ -DCKC_EMULATED and run in tests.
 *
 * Execution model (csrc/emu/emu_runtime.cpp): a launch runs its blocks one
 * after another on the calling OS thread, one launch at a time in the process;
 * the threads of a block are cooperative user-space threads, switching only
 * inside __syncthreads() and the warp collectives, visited in linear order or,
 * with COMFY_KITCHEN_C_EMU_SCHEDULE=shuffle:SEED, in a seeded random order on
 * every pass (a kernel whose result depends on the order has a race).  Hence:
 *   - __shared__ is `static` in the section ckc_emu_shared: every emulated thread
 *     of a block sees one copy, and one launch at a time uses it.  At every block
 *     start all of it (every kernel's static arrays) and the launch's dynamic
 *     shared memory are filled with 0xCD, as a GPU leaves them undefined: a block
 *     reading what it did not write sees garbage, not block 0's values.
 *   - Built with CKC_EMU_RACE_DETECT (COMFY_KITCHEN_C_EMU_RACES=1), every shared
 *     memory read is checked (emu_races.cpp): one of a value another thread wrote
 *     since the last barrier, or of memory no thread of the block wrote, is a
 *     kernel fault.
 *   - threadIdx, blockIdx, blockDim and gridDim are thread_local variables that
 *     the scheduler sets before resuming each emulated thread.
 *   - The checks are stricter than the hardware where the hardware's behavior is
 *     undefined: a __syncthreads() that some threads of the block never reach
 *     (they exited) and a warp collective whose mask names a lane that exited or
 *     does not exist are reported as kernel faults, not run through.  A shuffle
 *     reading a lane outside its mask (undefined in CUDA) gets its own value.
 *   - Atomics are real atomics (launches on several OS threads may share memory);
 *     memory orders are relaxed, as in CUDA. */
#ifndef CKC_EMU_H
#define CKC_EMU_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <atomic>
#include <functional>
#include <type_traits>

#include "emu_api.h"

/* ---- Qualifiers ----------------------------------------------------------
 * Defined after the standard headers above so that no library header sees them.
 * __forceinline__ is plain inline: it keeps device functions defined in headers
 * ODR-safe, and forcing inlining buys nothing in tests.  __restrict__ is already
 * a GCC/Clang keyword. */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ __attribute__((section("ckc_emu_shared"))) static

/* ---- Indices -------------------------------------------------------------- */
struct uint3 {
    unsigned int x, y, z;
};

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;
constexpr int warpSize = 32;

/* ---- Runtime entry points (emu_runtime.cpp) --------------------------------- */

/* Runs body once per thread of every block of grid; returns CKC_EMU_OK, or the
 * error code it recorded (see emu_api.h).  Called through CKC_LAUNCH.  The stream
 * is accepted and ignored: launches run to completion, in call order.  noexcept:
 * launchers are called from C, so nothing may unwind out of a launch. */
int ckc_emu_launch(const char *kernel_name, dim3 grid, dim3 block, size_t dynamic_smem, uintptr_t stream,
                   std::function<void()> body) noexcept;

namespace ckc_emu {

/* A launch on a stream being captured is recorded, not run (emu_graphs.cpp):
 * true when it was.  run_kernel admits and runs a launch now (the second half
 * of ckc_emu_launch, and each kernel node of a graph replay). */
bool capture_kernel(const char *kernel_name, dim3 grid, dim3 block, size_t dynamic_smem, uintptr_t stream,
                    const std::function<void()> &body);
int run_kernel(const char *kernel_name, dim3 grid, dim3 block, size_t dynamic_smem, uintptr_t stream,
               const std::function<void()> &body) noexcept;

/* Every warp-level intrinsic is one of these collectives.  Lanes meet when all
 * lanes named in the mask wait at the same kind with the same mask. */
enum class WarpOp : unsigned char { sync, shfl, shfl_up, shfl_down, shfl_xor, ballot, any, all };

void syncthreads();

/* Waits for the lanes of mask, then returns this lane's result: for shuffles the
 * value (raw bits) of the source lane that op, arg and width select, for votes
 * the ballot / any / all of the values (each nonzero or zero), for sync 0. */
uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width);

template <typename T>
inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable<T>::value,
                  "warp shuffles move trivially copyable values of at most 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof v);
    return bits;
}

template <typename T>
inline T from_bits(uint64_t bits) {
    T v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}

/* Read-modify-write by compare-and-swap, for the atomics without a builtin.
 * The generic __atomic builtins compare bytes, so a NaN in memory cannot make
 * the loop spin. */
template <typename T, typename F>
inline T atomic_update(T *address, F update) {
    T old;
    __atomic_load(address, &old, __ATOMIC_RELAXED);
    T desired = update(old);
    while (!__atomic_compare_exchange(address, &old, &desired, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        desired = update(old);
    return old;
}

template <typename T>
inline T atomic_cas(T *address, T compare, T val) {
    __atomic_compare_exchange_n(address, &compare, val, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return compare; /* on failure the builtin stored the current value here */
}

} // namespace ckc_emu

/* ---- Synchronization --------------------------------------------------------- */
inline void __syncthreads() { ckc_emu::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    ckc_emu::warp_collective(ckc_emu::WarpOp::sync, mask, 0, 0, warpSize);
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }

/* ---- Warp shuffles (any trivially copyable type of at most 8 bytes) ----------- */
template <typename T>
inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize) {
    return ckc_emu::from_bits<T>(
        ckc_emu::warp_collective(ckc_emu::WarpOp::shfl, mask, ckc_emu::to_bits(var), srcLane, width));
}

template <typename T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned int delta, int width = warpSize) {
    return ckc_emu::from_bits<T>(
        ckc_emu::warp_collective(ckc_emu::WarpOp::shfl_up, mask, ckc_emu::to_bits(var), (int)delta, width));
}

template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned int delta, int width = warpSize) {
    return ckc_emu::from_bits<T>(
        ckc_emu::warp_collective(ckc_emu::WarpOp::shfl_down, mask, ckc_emu::to_bits(var), (int)delta, width));
}

template <typename T>
inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize) {
    return ckc_emu::from_bits<T>(
        ckc_emu::warp_collective(ckc_emu::WarpOp::shfl_xor, mask, ckc_emu::to_bits(var), laneMask, width));
}

/* ---- Warp votes --------------------------------------------------------------- */
inline unsigned __ballot_sync(unsigned mask, int predicate) {
    return (unsigned)ckc_emu::warp_collective(ckc_emu::WarpOp::ballot, mask, predicate != 0, 0, warpSize);
}
inline int __any_sync(unsigned mask, int predicate) {
    return (int)ckc_emu::warp_collective(ckc_emu::WarpOp::any, mask, predicate != 0, 0, warpSize);
}
inline int __all_sync(unsigned mask, int predicate) {
    return (int)ckc_emu::warp_collective(ckc_emu::WarpOp::all, mask, predicate != 0, 0, warpSize);
}

/* ---- Atomics (each returns the old value, as in CUDA) --------------------------- */
inline int atomicAdd(int *address, int val) { return __atomic_fetch_add(address, val, __ATOMIC_RELAXED); }
inline unsigned atomicAdd(unsigned *address, unsigned val) {
    return __atomic_fetch_add(address, val, __ATOMIC_RELAXED);
}
inline unsigned long long atomicAdd(unsigned long long *address, unsigned long long val) {
    return __atomic_fetch_add(address, val, __ATOMIC_RELAXED);
}
inline float atomicAdd(float *address, float val) {
    return ckc_emu::atomic_update(address, [val](float old) { return old + val; });
}

inline int atomicMax(int *address, int val) {
    return ckc_emu::atomic_update(address, [val](int old) { return old > val ? old : val; });
}
inline unsigned atomicMax(unsigned *address, unsigned val) {
    return ckc_emu::atomic_update(address, [val](unsigned old) { return old > val ? old : val; });
}
inline int atomicMin(int *address, int val) {
    return ckc_emu::atomic_update(address, [val](int old) { return old < val ? old : val; });
}
inline unsigned atomicMin(unsigned *address, unsigned val) {
    return ckc_emu::atomic_update(address, [val](unsigned old) { return old < val ? old : val; });
}

inline int atomicCAS(int *address, int compare, int val) { return ckc_emu::atomic_cas(address, compare, val); }
inline unsigned atomicCAS(unsigned *address, unsigned compare, unsigned val) {
    return ckc_emu::atomic_cas(address, compare, val);
}
inline unsigned long long atomicCAS(unsigned long long *address, unsigned long long compare, unsigned long long val) {
    return ckc_emu::atomic_cas(address, compare, val);
}

inline int atomicExch(int *address, int val) { return __atomic_exchange_n(address, val, __ATOMIC_RELAXED); }
inline unsigned atomicExch(unsigned *address, unsigned val) {
    return __atomic_exchange_n(address, val, __ATOMIC_RELAXED);
}
inline unsigned long long atomicExch(unsigned long long *address, unsigned long long val) {
    return __atomic_exchange_n(address, val, __ATOMIC_RELAXED);
}
inline float atomicExch(float *address, float val) {
    float old;
    __atomic_exchange(address, &val, &old, __ATOMIC_RELAXED);
    return old;
}

/* ---- Bit helpers ---------------------------------------------------------------- */
inline unsigned __float_as_uint(float x) { return ckc_emu::from_bits<unsigned>(ckc_emu::to_bits(x)); }
inline float __uint_as_float(unsigned x) { return ckc_emu::from_bits<float>(ckc_emu::to_bits(x)); }
inline int __float_as_int(float x) { return ckc_emu::from_bits<int>(ckc_emu::to_bits(x)); }
inline float __int_as_float(int x) { return ckc_emu::from_bits<float>(ckc_emu::to_bits(x)); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }

/* ---- Integer dot product --------------------------------------------------------- */
/* c + the sum of the products of the four signed bytes of a and b. */
inline int __dp4a(int a, int b, int c) {
    for (int i = 0; i < 4; i++)
        c += (int)(int8_t)(unsigned)(a >> (8 * i)) * (int)(int8_t)(unsigned)(b >> (8 * i));
    return c;
}

#endif /* CKC_EMU_H */
