/* SPDX-License-Identifier: Apache-2.0 */
/* The device side of a riding completion mark (csrc/contract/done_mark.h): every
 * block of a kernel that carries one calls ckc_done_mark_arrive at its end,
 * with all its threads (kernels whose threads have nothing to do past the
 * bounds skip their work, never return early).  The block that arrives last
 * resets the counter for the slot's next use and writes the seq: after a
 * system-wide fence, so that whoever sees the word also sees every block's
 * results. */
#ifndef CKC_DONE_MARK_CUH
#define CKC_DONE_MARK_CUH

#include "cuda_dialect.h"

#include "contract/done_mark.h"

/* The argument of a kernel that carries no mark (not its op's last). */
constexpr ckc_done_mark CKC_NO_DONE_MARK = {NULL, 0, NULL, NULL};

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
        if (!last) {
            __threadfence(); /* the block's results before its arrival, device-wide */
            last = atomicAdd(m.arrivals, 1u) == blocks - 1;
        }
        if (last) {
            if (blocks != 1) {
                *m.arrivals = 0; /* the kernel boundary orders this before the slot's next launch */
            }
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
