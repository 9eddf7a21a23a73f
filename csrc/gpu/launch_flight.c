/* SPDX-License-Identifier: Apache-2.0 */
/* Launchers of the flight record's kernels (kernels/flight.cu): the runtime
 * seam's (runtime.h), queued by the diagnostics. */
#if defined(CKC_WITH_GPU)

#include "kernel.h"

CKC_EMU_THUNK_DECL(flight_mark_kernel)
CKC_EMU_THUNK_DECL(replay_begin_kernel)

static ckc_kernel flight_mark[] = {
    CKC_KERNEL_ENTRY(flight_mark_kernel, "flight_mark_kernel", "flight", flight_mark_kernel, 0, 0, 0, 0)};
static ckc_kernel replay_begin[] = {
    CKC_KERNEL_ENTRY(replay_begin_kernel, "replay_begin_kernel", "flight", replay_begin_kernel, 0, 0, 0, 0)};

ckc_status
ckc_gpu_flight_mark(const ckc_done_mark *m, uintptr_t stream, ckc_error *err)
{
    const ckc_launch_cfg c = ckc_launch_1d(1, 1, 0, stream);
    ckc_done_mark mark = *m;
    const ckc_karg args[] = {CKC_KARG(mark)};
    return ckc_gpu_launch(&flight_mark[0], &c, args, CKC_KARG_COUNT(args), err);
}

ckc_status
ckc_gpu_replay_begin(uint32_t *counter, uint64_t *capture_word, uint64_t *number_word, uint64_t capture,
                     uintptr_t stream, ckc_error *err)
{
    const ckc_launch_cfg c = ckc_launch_1d(1, 1, 0, stream);
    const ckc_karg args[] = {CKC_KARG(counter), CKC_KARG(capture_word), CKC_KARG(number_word), CKC_KARG(capture)};
    return ckc_gpu_launch(&replay_begin[0], &c, args, CKC_KARG_COUNT(args), err);
}

#if !defined(CKC_EMULATED)
/* The CUDA runtime's store in stream order (runtime.h) is the flight-mark kernel
 * writing one word, so it lives here with that kernel's launcher: the runtime
 * seam calls no launcher (the emulated device stores in its own stream). */
ckc_status
ckc_gpu_write_value64(uint64_t *word, uint64_t value, uintptr_t stream, int device, ckc_error *err)
{
    uint64_t *device_word = ckc_gpu_device_word(word, device);
    const ckc_done_mark m = {device_word, value, NULL, NULL}; /* one block: no arrival counter */
    if (device_word == NULL) {
        return CKC_FAIL(err, CKC_ERR_RUNTIME, "device %d cannot write the completion word %p", device, (void *)word);
    }
    return ckc_gpu_flight_mark(&m, stream, err);
}
#endif

#endif /* CKC_WITH_GPU */
