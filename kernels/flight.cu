/* SPDX-License-Identifier: Apache-2.0 */
/* The flight record's completion mark as a kernel of its own: one thread,
 * queued after work whose own kernels carry no mark (copies, cuBLASLt last, no
 * work at all, kernels not converted; see csrc/diag/marks.c).  It runs only
 * when the work before it on the stream has completed, so the word says what
 * the GPU finished, even if the device is lost or the process killed
 * afterwards.  The emulated device writes such separate marks itself
 * (csrc/gpu/runtime_emu.c); there this kernel serves the benchmark's op that
 * launches one kernel carrying its mark (csrc/module/faults.c).  Launched by
 * csrc/gpu/launch_flight.c. */
#include "cuda_dialect.h"
#include "done_mark.cuh"

CKC_KERNEL_INSTANCE(flight_mark_kernel, , (ckc_done_mark m), (ckc_done_mark_arrive(m)))

/* The start of a replay of a captured CUDA graph (csrc/diag/capture.c): the
 * first kernel of the graph's recorded work bumps the device's replay counter
 * and writes (capture, n) into the replay words of the flight record (the
 * capture first, so that a reader who sees the new number sees its capture). */
__device__ __forceinline__ void
replay_begin(uint32_t *counter, uint64_t *capture_word, uint64_t *number_word, uint64_t capture)
{
    const uint32_t n = atomicAdd(counter, 1u) + 1u;
    *(volatile uint64_t *)capture_word = capture;
    __threadfence_system();
    *(volatile uint64_t *)number_word = n;
}

CKC_KERNEL_INSTANCE(replay_begin_kernel, ,
                    (uint32_t * counter, uint64_t *capture_word, uint64_t *number_word, uint64_t capture),
                    (replay_begin(counter, capture_word, number_word, capture)))
