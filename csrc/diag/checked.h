/* SPDX-License-Identifier: Apache-2.0 */
/* Checked execution: what runs around every GPU op and every staged copy,
 * whatever the op.  For ops, two hooks that the op layer's router runs around
 * every op's GPU entry (csrc/ops/route.c), so present and future ops get them
 * without code of their own; everything they need comes as arguments (the
 * call, the execution context), nothing is left in thread-local state:
 *   launch   (default)  launches are checked at once; the op's flight record is
 *                       written and its completion mark queued after its work;
 *                       a sticky fault found at a launch is blamed, through the
 *                       flight record, on the earliest work that did not complete.
 *   boundary            also, before the op, the work already queued on its
 *                       stream is fenced (an event, waited on under the watchdog).
 *   op                  also, after the op, its stream is fenced.
 * The watchdog (at every fence): after COMFY_KITCHEN_C_HANG_MS (1500) without
 * progress the oldest unfinished record of the stream is marked hang-suspected
 * and the file flushed; after COMFY_KITCHEN_C_HANG_RAISE_MS (5000) the fence
 * fails with CKC_ERR_HANG. */
#ifndef CKC_DIAG_CHECKED_H
#define CKC_DIAG_CHECKED_H

#include <stddef.h>
#include <stdint.h>

#include "check_modes.h"
#include "contract/call.h"
#include "contract/exec.h"
#include "contract/status.h"
#include "diag/flight.h"

/* What a fault report names, beside err (status, message, device error). */
typedef struct {
    char op[40];            /* the op, or "stage", the fault is attributed to */
    uint64_t seq;           /* its flight-record seq; 0 if unknown */
    char detected_by[40];   /* the op (or "stage", "fence") whose check found it */
    int device;
    uint64_t stream;
    char tensors[192];
    char params[160];
    char context[512];      /* what the flight record says around it */
} ckc_fault;

/* What the before-hook leaves for the after-hook of the same op. */
typedef struct {
    ckc_flight_record *record; /* the op's flight record, NULL when none is kept */
    uint64_t seq;
    size_t params_used;      /* of record->params, before the launch log is appended */
    int pinned;              /* the offered mark's word is a pinned one */
    int mode;
} ckc_op_check;

/* Before the op `op` (call a) queues its work on exec's stream: in boundary and
 * op modes, fences the work already queued; writes the op's flight record;
 * offers the op's completion mark in exec->done, for the launcher of its last
 * kernel (ckc_exec_take_done_mark); clears the launch log.  A failure (a fault
 * found at the fence) is the op's result: the op must not run. */
ckc_status ckc_op_check_before(const char *op, const ckc_op_args *a, int mode, ckc_op_check *c, ckc_exec *exec,
                               ckc_error *err, ckc_fault *fault);

/* After the op's GPU entry returned `status`: publishes the record, queues the
 * completion mark unless the op's last kernel took it, attributes a fault, and
 * in op mode fences the op's work.  Returns the op's final status. */
ckc_status ckc_op_check_after(const char *op, const ckc_op_args *a, ckc_op_check *c, const ckc_exec *exec,
                              ckc_status status, ckc_error *err, ckc_fault *fault);

typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
    int device;
    uintptr_t stream;
    int mode;
    int non_blocking;
    const char *tensors;    /* description for the record */
    const char *op;         /* the record's op; NULL: "stage" */
    int issued;             /* the copy is already queued on stream by its caller: record it only */
} ckc_stage_args;

/* A checked, recorded host-to-device copy; *memory gets the source's kind. */
ckc_status ckc_checked_stage(const ckc_stage_args *s, const char **memory, ckc_error *err, ckc_fault *fault);

/* Waits until every recorded copy from [p, p + bytes) has completed. */
ckc_status ckc_fence_host(const void *p, size_t bytes, ckc_error *err, ckc_fault *fault);

/* Waits for the work queued on stream so far (on behalf of op). */
ckc_status ckc_fence_stream(const char *op, int device, uintptr_t stream, ckc_error *err, ckc_fault *fault);

#endif /* CKC_DIAG_CHECKED_H */
