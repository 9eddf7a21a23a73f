/* SPDX-License-Identifier: Apache-2.0 */
/* The flight record's completion mark as a kernel of its own: one thread,
 * queued after work whose own kernels carry no mark (copies, cuBLASLt last, no
 * work at all, kernels not converted; see csrc/diag/marks.c).  It runs only
 * when the work before it on the stream has completed, so the word says what
 * the GPU finished, even if the device is lost or the process killed
 * afterwards.  The emulated device writes such separate marks itself
 * (csrc/gpu/runtime_emu.c); there this kernel serves the benchmark's op that
 * launches one kernel carrying its mark (csrc/module/faults.c). */
#include "cuda_dialect.h"
#include "done_mark.cuh"

#include "gpu/launch.h"
#include "gpu/runtime.h"

__global__ void
flight_mark_kernel(ckc_done_mark m)
{
    ckc_done_mark_arrive(m);
}

extern "C" ckc_status
ckc_gpu_flight_mark(const ckc_done_mark *m, uintptr_t stream, ckc_error *err)
{
    CKC_LAUNCH(flight_mark_kernel, dim3(1), dim3(1), 0, stream, *m);
    return ckc_gpu_launch_status("flight_mark_kernel", err);
}
