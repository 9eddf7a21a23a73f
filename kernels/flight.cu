/* The flight record's completion marks on a real GPU: a one-thread kernel,
 * queued after an op's (or a copy's) work, stores the record's sequence number
 * into the record's completion word in host-mapped memory (the registered
 * flight-record file).  It runs only when the work before it on the stream has
 * completed, so the word says what the GPU finished, even if the device is lost
 * or the process killed afterwards.  The emulated device writes the word itself
 * (csrc/gpu/runtime_emu.c), so this file is empty there. */
#if defined(__CUDACC__)

#include "cuda_dialect.h"

#include "gpu/launch.h"
#include "gpu/runtime.h"

__global__ void
flight_mark_kernel(unsigned long long *word, unsigned long long seq)
{
    /* The work before this kernel is complete; make its results visible first. */
    __threadfence_system();
    *(volatile unsigned long long *)word = seq;
}

extern "C" ckc_status
ckc_gpu_flight_mark(uint64_t *device_word, uint64_t seq, uintptr_t stream, ckc_error *err)
{
    CKC_LAUNCH(flight_mark_kernel, dim3(1), dim3(1), 0, stream, (unsigned long long *)device_word,
               (unsigned long long)seq);
    return ckc_gpu_launch_status("flight_mark_kernel", err);
}

#endif /* __CUDACC__ */
