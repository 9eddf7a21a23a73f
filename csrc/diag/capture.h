/* SPDX-License-Identifier: Apache-2.0 */
/* What checked execution does for work on a stream being captured into a CUDA
 * graph (capture.c explains the rules). */
#ifndef CKC_DIAG_CAPTURE_H
#define CKC_DIAG_CAPTURE_H

#include <stdint.h>

#include "check_modes.h"
#include "contract/status.h"

typedef struct {
    int capturing; /* 1, 0, or -1: the question failed (err says why: a sticky fault, a bad stream) */
    uint64_t id;   /* the capture's id, never 0 while capturing */
} ckc_capture;

/* Whether stream (of device) is being captured, and by which capture. */
ckc_capture ckc_capture_of(int device, uintptr_t stream, ckc_error *err);

/* The refusals (CKC_ERR_CAPTURE, a CaptureError): a waiting mode, a staged copy. */
ckc_status ckc_capture_refuse_mode(int mode, ckc_error *err);
ckc_status ckc_capture_refuse_stage(ckc_error *err);

/* Before a captured op queues its work: the replay-begin kernel, once per capture. */
ckc_status ckc_capture_begin_op(uint64_t capture, int device, uintptr_t stream, ckc_error *err);

#endif /* CKC_DIAG_CAPTURE_H */
