/* SPDX-License-Identifier: Apache-2.0 */
/* The device side of a riding completion mark (csrc/contract/done_mark.h): every
 * block of a kernel that carries one calls ckc_done_mark_arrive at its end,
 * with all its threads (kernels whose threads have nothing to do past the
 * bounds skip their work, never return early).  The block that arrives last
 * resets the counter for the slot's next use and writes the seq, after a
 * system-wide fence, so that whoever sees the word also sees every block's
 * results.
 *
 * What a block pays: a barrier (its threads' results are stored), then its
 * first thread's arrival, one atomic add with release semantics at GPU scope
 * (PTX atom.release.gpu: a MEMBAR.ALL.GPU before the ATOMG).  Before, every
 * block fenced with sequential consistency (__threadfence: MEMBAR.SC.GPU) and
 * invalidated its SM's L1 (CCTL.IVALL) before the atomic.  Only the last block
 * pays the acquire (a fence.acq_rel.gpu after its add, which synchronizes with
 * every earlier block's release: the adds form one release sequence on the
 * counter) and the system-scope fence before the word.  A one-block grid
 * skips the counter.  The emulated device keeps the fence-and-atomic form (its
 * fences are C++ sequentially consistent fences, its atomics relaxed). */
#ifndef CKC_DONE_MARK_CUH
#define CKC_DONE_MARK_CUH

#include "cuda_dialect.h"

#include "contract/done_mark.h"

/* The argument of a kernel that carries no mark (not its op's last). */
constexpr ckc_done_mark CKC_NO_DONE_MARK = {NULL, 0, NULL, NULL};

/* The block's arrival: the number of blocks that arrived before it. */
__device__ __forceinline__ unsigned
ckc_done_mark_add(unsigned *arrivals)
{
#if defined(__CUDA_ARCH__)
    unsigned before;
    asm volatile("atom.release.gpu.global.add.u32 %0, [%1], 1;" : "=r"(before) : "l"(arrivals) : "memory");
    return before;
#else
    __threadfence();
    return atomicAdd(arrivals, 1u);
#endif
}

/* After the last arrival: every block's results are visible to this block. */
__device__ __forceinline__ void
ckc_done_mark_acquire(void)
{
#if defined(__CUDA_ARCH__)
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
#else
    __threadfence();
#endif
}

__device__ __forceinline__ void
ckc_done_mark_arrive(ckc_done_mark m)
{
    if (m.word == NULL) {
        return; /* the same for every thread of the grid */
    }
    __syncthreads(); /* every thread of the block has stored its results */
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
        const unsigned blocks = gridDim.x * gridDim.y * gridDim.z;
        bool last = blocks == 1;
        if (!last && ckc_done_mark_add(m.arrivals) == blocks - 1) {
            ckc_done_mark_acquire();
            *m.arrivals = 0; /* the kernel boundary orders this before the slot's next launch */
            last = true;
        }
        if (last) {
            __threadfence_system();
            /* A captured op's mark says which replay completed it: the counter's
             * value, which this replay's begin kernel set before (stream order). */
            *(volatile uint64_t *)m.word =
                m.replay != NULL ? ((uint64_t)*(const volatile uint32_t *)m.replay << 32) | (m.seq & 0xFFFFFFFFull)
                                 : m.seq;
        }
    }
}

#endif /* CKC_DONE_MARK_CUH */
