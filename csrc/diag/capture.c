/* SPDX-License-Identifier: Apache-2.0 */
/* Ops captured into CUDA graphs (ComfyUI captures model blocks): what the
 * checked execution (checked.c) does when an op's stream is being captured.
 *
 * - Mode `launch` (the default) captures: the op's kernels, its flight record
 *   (written once, at capture, in the record's capture area) and its
 *   completion mark (which says which replay completed it) all go into the
 *   graph; nothing waits, allocates or registers memory meanwhile (marks.c
 *   takes only what was set up before).
 * - Modes `boundary` and `op` wait for the stream before or after the op (an
 *   event query), which a capture forbids and which would invalidate it: they
 *   refuse, with an exception naming the op and the mode, before queuing
 *   anything.  Staged copies refuse too (they copy host memory, tracked for
 *   fence, which a graph would copy again at every replay).
 * - The first captured op of each capture queues the replay-begin kernel (see
 *   marks.h), so that the flight record tells replays apart. */
#include <stdio.h>

#include "capture.h"
#include "gpu/runtime.h"
#include "marks.h"
#include "platform/threads.h" /* CKC_THREAD_LOCAL */

/* The capture whose replay-begin kernel this thread queued last. */
static CKC_THREAD_LOCAL uint64_t t_begun;

ckc_capture
ckc_capture_of(int device, uintptr_t stream, ckc_error *err)
{
    ckc_capture c;
    c.id = 0;
    c.capturing = ckc_gpu_stream_capture(device, stream, &c.id, err);
    if (c.capturing && c.id == 0) {
        c.id = 1; /* the runtime could not say: one id for all such captures (0 means "not captured") */
    }
    return c;
}

static const char *
mode_name(int mode)
{
    return mode == CKC_CHECK_OP ? "op" : (mode == CKC_CHECK_BOUNDARY ? "boundary" : "launch");
}

ckc_status
ckc_capture_refuse_mode(int mode, ckc_error *err)
{
    return CKC_FAIL(err, CKC_ERR_CAPTURE,
                    "checking mode '%s' cannot run while its stream is captured into a CUDA graph: it waits for the "
                    "stream %s the op, which a capture forbids (the capture would be invalidated).  Capture in mode "
                    "'launch' (the default), or look for the fault with COMFY_KITCHEN_C_CHECK=%s and CUDA graphs "
                    "off (ComfyUI: --disable-cuda-graphs)",
                    mode_name(mode), mode == CKC_CHECK_OP ? "before and after" : "before", mode_name(mode));
}

ckc_status
ckc_capture_refuse_stage(ckc_error *err)
{
    return CKC_FAIL(err, CKC_ERR_CAPTURE,
                    "a staged copy cannot be captured into a CUDA graph (it copies host memory that fence() "
                    "tracks, and a graph would copy it again at every replay): stage before the capture");
}

ckc_status
ckc_capture_begin_op(uint64_t capture, int device, uintptr_t stream, ckc_error *err)
{
    if (t_begun == capture) {
        return CKC_OK;
    }
    ckc_gpu_begin_op("replay_begin");
    /* Remembered only once queued: after a failure the next op of the capture tries again. */
    CKC_TRY(ckc_queue_replay_begin(capture, device, stream, err));
    t_begun = capture;
    return CKC_OK;
}
