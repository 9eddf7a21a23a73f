/* Checked execution: what runs around every GPU op and every staged copy,
 * whatever the op (module.c calls it for each op spec, so present and future
 * ops get it without code of their own):
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

#include "ops/op.h"

enum { CKC_CHECK_LAUNCH = 0, CKC_CHECK_BOUNDARY = 1, CKC_CHECK_OP = 2 };

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

/* Runs spec->run(a) under the checks of mode. */
ckc_status ckc_checked_op(const char *op, ckc_op_args *a, int mode, ckc_error *err, ckc_fault *fault);

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
