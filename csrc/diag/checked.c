/* SPDX-License-Identifier: Apache-2.0 */
/* Checked execution of ops and staged copies (see checked.h): flight records,
 * completion marks, fences, the watchdog, and the attribution of a fault to
 * the work the flight record shows did not complete. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "checked.h"
#include "flight.h"
#include "flight_mirror.h"
#include "gpu/runtime.h"
#include "marks.h"
#include "platform/settings.h"


/* ---- records ---- */

/* "x bfloat16[4, 256]; q int8[4, 256]" */
static void
format_tensors(const ckc_op_args *a, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int k = 0; k < a->sig->n_tensors; k++) {
        const ckc_tensor *t = &a->t[k];
        if (!a->present[k]) {
            continue;
        }
        n = ckc_text_append(buf, cap, n, n ? "; " : "");
        n = ckc_text_append(buf, cap, n, a->sig->tensors[k].name);
        n = ckc_text_append(buf, cap, n, " ");
        n = ckc_text_append(buf, cap, n, ckc_dtype_name(t->dtype));
        n = ckc_text_append(buf, cap, n, "[");
        for (int d = 0; d < t->ndim; d++) {
            n = ckc_text_append(buf, cap, n, d ? ", " : "");
            n = ckc_text_append_int(buf, cap, n, t->shape[d]);
        }
        n = ckc_text_append(buf, cap, n, "]");
    }
}

/* The bytes the op's tensors hold: the measure of its size for the riding limit
 * (marks.h). */
static uint64_t
op_bytes(const ckc_op_args *a)
{
    uint64_t bytes = 0;
    for (int k = 0; k < a->sig->n_tensors; k++) {
        if (a->present[k]) {
            bytes += (uint64_t)a->t[k].numel * (uint64_t)ckc_dtype_size(a->t[k].dtype);
        }
    }
    return bytes;
}

/* "group=256 compute_scale=0" */
static size_t
format_ints(const ckc_op_args *a, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int k = 0; k < a->sig->n_ints; k++) {
        n = ckc_text_append(buf, cap, n, k ? " " : "");
        n = ckc_text_append(buf, cap, n, a->sig->ints[k]);
        n = ckc_text_append(buf, cap, n, "=");
        n = ckc_text_append_int(buf, cap, n, a->i[k]);
    }
    return n;
}

static size_t
append_dim3(char *buf, size_t cap, size_t n, const char *label, const unsigned v[3])
{
    n = ckc_text_append(buf, cap, n, label);
    for (int k = 0; k < 3; k++) {
        n = ckc_text_append(buf, cap, n, k ? "," : "(");
        n = ckc_text_append_int(buf, cap, n, v[k]);
    }
    return ckc_text_append(buf, cap, n, ")");
}

/* " +2 more, kernel grid=(x,y,z) block=(x,y,z)": the op's last launch. */
static void
append_launches(char *buf, size_t cap, size_t n)
{
    ckc_gpu_launch_info info;
    ckc_gpu_launch_log(&info);
    if (info.launches == 0 || info.kernel == NULL) {
        return;
    }
    n = ckc_text_append(buf, cap, n, n ? " " : "");
    if (info.launches > 1) {
        n = ckc_text_append(buf, cap, n, "+");
        n = ckc_text_append_int(buf, cap, n, info.launches - 1);
        n = ckc_text_append(buf, cap, n, " more, ");
    }
    n = ckc_text_append(buf, cap, n, info.kernel);
    n = append_dim3(buf, cap, n, " grid=", info.grid);
    (void)append_dim3(buf, cap, n, " block=", info.block);
}

/* ---- fault attribution ---- */

static void
fault_init(ckc_fault *fault, const char *op, int device, uint64_t stream)
{
    /* On every op: no memset of the whole report, no snprintf. */
    (void)ckc_text_append(fault->op, sizeof fault->op, 0, op);
    (void)ckc_text_append(fault->detected_by, sizeof fault->detected_by, 0, op);
    fault->seq = 0;
    fault->tensors[0] = fault->params[0] = fault->context[0] = '\0';
    fault->device = device;
    fault->stream = stream;
}

/* The fault is attributed to record r. */
static void
attribute(ckc_fault *fault, const ckc_flight_record *r, uint64_t seq)
{
    snprintf(fault->op, sizeof fault->op, "%s", r->op);
    fault->seq = seq;
    fault->device = r->device;
    fault->stream = r->stream;
    snprintf(fault->tensors, sizeof fault->tensors, "%s", r->tensors);
    snprintf(fault->params, sizeof fault->params, "%s", r->params);
}

static size_t
describe_record(char *buf, size_t cap, size_t n, const char *label, const ckc_flight_record *r)
{
    n = ckc_text_append(buf, cap, n, label);
    if (r == NULL) {
        return ckc_text_append(buf, cap, n, "none");
    }
    n = ckc_text_append(buf, cap, n, r->op);
    n = ckc_text_append(buf, cap, n, " (seq ");
    n = ckc_text_append_int(buf, cap, n, (long long)r->seq);
    if (r->kind == CKC_FLIGHT_COPY) {
        n = ckc_text_append(buf, cap, n, ", ");
        n = ckc_text_append_int(buf, cap, n, (long long)r->bytes);
        n = ckc_text_append(buf, cap, n, " bytes from ");
        n = ckc_text_append(buf, cap, n, r->tensors);
    }
    return ckc_text_append(buf, cap, n, ")");
}

/* What the flight record shows before seq `below` (0: everything), and about
 * the latest replay of a captured graph. */
static void
describe_context(ckc_fault *fault, uint64_t below)
{
    char *buf = fault->context;
    const size_t cap = sizeof fault->context;
    size_t n = 0;
    uint64_t capture;
    uint64_t replay;
    n = describe_record(buf, cap, n, "last completed: ", ckc_flight_last_completed(0, below));
    n = describe_record(buf, cap, n, "; last staged and completed: ",
                        ckc_flight_last_completed(CKC_FLIGHT_COPY, below));
    n = describe_record(buf, cap, n, "; first incomplete: ", ckc_flight_first_incomplete(UINT64_MAX, below));
    if (ckc_flight_latest_replay(&capture, &replay)) {
        n = ckc_text_append(buf, cap, n, "; latest CUDA-graph replay #");
        n = ckc_text_append_int(buf, cap, n, (long long)replay);
        n = ckc_text_append(buf, cap, n, " (capture ");
        n = ckc_text_append_int(buf, cap, n, (long long)capture);
        n = describe_record(buf, cap, n, "): last completed in it: ", ckc_flight_replay_last_completed());
        (void)describe_record(buf, cap, n, ", first not completed in it: ", ckc_flight_replay_first_incomplete());
    }
}

/* A sticky device fault found before seq `below` is blamed on the earliest
 * record that did not complete (any stream: the fault is the device's).
 * Returns the status of its class: STAGING for a copy, KERNEL for an op. */
static ckc_status
blame(ckc_fault *fault, ckc_error *err, uint64_t below)
{
    /* A replay of a captured graph that did not complete ran after everything
     * queued before it on its stream: its first incomplete op is the culprit. */
    ckc_flight_record *r = ckc_flight_replay_first_incomplete();
    describe_context(fault, below);
    if (r != NULL) {
        attribute(fault, r, r->seq);
        ckc_flight_mark(r, CKC_FLIGHT_FAILED, err->device_error[0] ? err->device_error : err->message);
        return CKC_ERR_KERNEL;
    }
    r = ckc_flight_first_incomplete(UINT64_MAX, below);
    if (r == NULL) {
        return CKC_ERR_KERNEL;
    }
    attribute(fault, r, r->seq);
    ckc_flight_mark(r, CKC_FLIGHT_FAILED, err->device_error[0] ? err->device_error : err->message);
    return r->kind == CKC_FLIGHT_COPY ? CKC_ERR_STAGING : CKC_ERR_KERNEL;
}

/* Marks this op's own slot (r may be NULL: the log was full) failed with
 * `note` and publishes it, so the log shows it though it never completes. */
static void
publish_failed(ckc_flight_record *r, uint64_t seq, const char *note)
{
    ckc_flight_mark(r, CKC_FLIGHT_FAILED, note);
    if (r != NULL) {
        ckc_flight_publish(r, seq);
    }
}

/* The device already held a fault when this op (slot r, seq) queued its work:
 * its slot says it did not run, the fault is blamed on the record that caused
 * it, and err says so, with `where` the op noticed. */
static ckc_status
earlier_fault(ckc_flight_record *r, uint64_t seq, const char *where, ckc_error *err, ckc_fault *fault)
{
    char message[sizeof err->message];
    ckc_status kind;
    publish_failed(r, seq, "not run: the device holds an earlier fault");
    kind = blame(fault, err, seq);
    snprintf(message, sizeof message, "%s", err->message);
    return CKC_FAIL(err, kind, "an earlier fault surfaced %s: %s", where, message);
}

/* ---- the watchdog ---- */

/* 1: done, 0: not yet, -1: fault (err filled). */
typedef int (*ckc_poll)(void *ctx, ckc_error *err);

/* Polls until done; on no progress past the thresholds, writes the hang record
 * (the oldest unfinished record of stream) and fails with CKC_ERR_HANG.  Called
 * without the GIL. */
static ckc_status
wait_for(ckc_poll poll, void *ctx, uint64_t stream, const char *where, ckc_error *err, ckc_fault *fault)
{
    ckc_settings settings;
    unsigned hang_ms, raise_ms;
    const uint64_t start = ckc_monotonic_ns();
    ckc_flight_record *hung = NULL;
    int flagged = 0;
    ckc_settings_read(&settings);
    hang_ms = settings.hang_ms;
    raise_ms = settings.hang_raise_ms > hang_ms ? settings.hang_raise_ms : hang_ms;
    for (unsigned polls = 0;; polls++) {
        const int state = poll(ctx, err);
        uint64_t elapsed_ms;
        if (state > 0) {
            return CKC_OK;
        }
        if (state < 0) {
            return err->status;
        }
        elapsed_ms = (ckc_monotonic_ns() - start) / 1000000u;
        if (!flagged && elapsed_ms >= hang_ms) {
            char note[160];
            size_t n = ckc_text_append(note, sizeof note, 0, "hang suspected: no progress for ");
            n = ckc_text_append_int(note, sizeof note, n, hang_ms);
            n = ckc_text_append(note, sizeof note, n, " ms (watchdog at ");
            n = ckc_text_append(note, sizeof note, n, where);
            (void)ckc_text_append(note, sizeof note, n, ")");
            /* A replay that did not complete ran after what was queued before it
             * (its records name the capture's stream, not the replay's). */
            hung = ckc_flight_replay_first_incomplete();
            if (hung == NULL) {
                hung = ckc_flight_first_incomplete(stream, 0);
            }
            ckc_flight_mark(hung, CKC_FLIGHT_HANG, note);
            ckc_flight_flush(); /* before the driver can reset the device */
            flagged = 1;
        }
        if (elapsed_ms >= raise_ms) {
            describe_context(fault, 0);
            if (hung != NULL) {
                attribute(fault, hung, hung->seq);
            }
            return CKC_FAIL(err, CKC_ERR_HANG,
                            "no progress on stream 0x%llx for %u ms at %s (the hang record was written after %u ms)",
                            (unsigned long long)stream, raise_ms, where, hang_ms);
        }
        /* Spin briefly (most fences end within microseconds), then back off. */
        ckc_sleep_us(polls < 64 ? 0 : (polls < 512 ? 50 : 500));
    }
}

typedef struct {
    ckc_gpu_event event;
    int device;
} event_wait;

static int
poll_event(void *ctx, ckc_error *err)
{
    const event_wait *w = (const event_wait *)ctx;
    return ckc_gpu_event_query(w->device, w->event, err);
}

/* Waits for the work queued on stream so far: CKC_OK, CKC_ERR_DEVICE or CKC_ERR_HANG. */
static ckc_status
fence_queued(int device, uint64_t stream, const char *where, ckc_error *err, ckc_fault *fault)
{
    ckc_gpu_device_guard guard;
    event_wait w;
    ckc_status status;
    w.device = device;
    CKC_TRY(ckc_gpu_device_enter(device, &guard, err));
    status = ckc_gpu_event_record_new(stream, &w.event, err);
    ckc_gpu_device_leave(&guard);
    if (status != CKC_OK) {
        return status;
    }
    status = wait_for(poll_event, &w, stream, where, err, fault);
    ckc_gpu_event_destroy(w.event);
    return status;
}

/* The entry fence of boundary mode: a fault there happened before op started. */
static ckc_status
fence_before(const char *op, int device, uint64_t stream, ckc_error *err, ckc_fault *fault)
{
    char where[64];
    ckc_status status;
    snprintf(where, sizeof where, "the fence before %s", op);
    status = fence_queued(device, stream, where, err, fault);
    if (status == CKC_ERR_DEVICE) {
        char message[sizeof err->message];
        (void)blame(fault, err, 0);
        snprintf(message, sizeof message, "%s", err->message);
        return CKC_FAIL(err, CKC_ERR_STAGING, "the fault happened before %s started: %s", op, message);
    }
    return status;
}

/* The exit fence (op mode, blocking stages): a fault is blamed on the record
 * itself or on earlier work that did not complete. */
static ckc_status
fence_after(const char *op, int device, uint64_t stream, uint64_t seq, ckc_error *err, ckc_fault *fault)
{
    char where[64];
    ckc_status status;
    snprintf(where, sizeof where, "the fence after %s", op);
    status = fence_queued(device, stream, where, err, fault);
    if (status == CKC_ERR_DEVICE) {
        char message[sizeof err->message];
        const ckc_status kind = blame(fault, err, seq + 1);
        snprintf(message, sizeof message, "%s", err->message);
        return CKC_FAIL(err, kind, "%s (found at the fence after %s)", message, op);
    }
    return status;
}

ckc_status
ckc_fence_stream(const char *op, int device, uintptr_t stream, ckc_error *err, ckc_fault *fault)
{
    fault_init(fault, op, device, stream);
    return fence_before(op, device, stream, err, fault);
}

/* ---- ops ---- */

/* A failed op: classify, attribute, record. */
static ckc_status
op_failed(const char *op, const ckc_op_args *a, ckc_flight_record *r, uint64_t seq, ckc_status status,
          ckc_error *err, ckc_fault *fault)
{
    format_tensors(a, fault->tensors, sizeof fault->tensors);
    append_launches(fault->params, sizeof fault->params, format_ints(a, fault->params, sizeof fault->params));
    fault->seq = seq;
    switch (status) {
    case CKC_ERR_LAUNCH:
    case CKC_ERR_KERNEL:
        publish_failed(r, seq, err->device_error[0] ? err->device_error : err->message);
        describe_context(fault, seq);
        return status;
    case CKC_ERR_DEVICE: {
        char where[96];
        snprintf(where, sizeof where, "at the launch check of %s", op);
        return earlier_fault(r, seq, where, err, fault);
    }
    default:
        return status; /* bad arguments: nothing was queued, the slot stays empty */
    }
}

/* The question "is the stream captured?" failed before op queued anything: a
 * sticky fault is an earlier kernel's, blamed as any fault found at a launch;
 * anything else (a destroyed stream) is the call's own error. */
static ckc_status
capture_query_failed(const char *op, ckc_error *err, ckc_fault *fault)
{
    char where[96];
    if (err->status != CKC_ERR_DEVICE) {
        return err->status;
    }
    snprintf(where, sizeof where, "when %s asked whether its stream is captured", op);
    return earlier_fault(NULL, 0, where, err, fault);
}

ckc_status
ckc_op_check_before(const char *op, const ckc_op_args *a, int mode, ckc_op_check *c, ckc_exec *exec,
                    ckc_error *err, ckc_fault *fault)
{
    const int device = exec->device_index;
    const uint64_t stream = exec->stream;
    ckc_flight_record *r = NULL;
    ckc_capture capture;
    c->record = NULL;
    c->seq = 0;
    c->params_used = 0;
    c->pinned = 0;
    c->mode = mode;
    fault_init(fault, op, device, stream);
    capture = ckc_capture_of(device, stream, err);
    if (capture.capturing < 0) {
        return capture_query_failed(op, err, fault);
    }
    if (capture.capturing) {
        /* capture.c: the waiting modes refuse; the first op begins the replays' bookkeeping */
        if (mode >= CKC_CHECK_BOUNDARY) {
            return ckc_capture_refuse_mode(mode, err);
        }
        if (ckc_flight_ring->ops) {
            CKC_TRY(ckc_capture_begin_op(capture.id, device, stream, err));
        }
    }
    if (mode >= CKC_CHECK_BOUNDARY) {
        CKC_TRY(fence_before(op, device, stream, err, fault));
    }
    if (ckc_flight_ring->ops) {
        r = capture.capturing ? ckc_flight_begin_captured(capture.id, &c->seq)
                              : ckc_flight_begin(CKC_FLIGHT_OP, &c->seq);
    }
    if (r != NULL) {
        (void)ckc_text_append(r->op, sizeof r->op, 0, op);
        r->device = device;
        r->stream = stream;
        format_tensors(a, r->tensors, sizeof r->tensors);
        c->params_used = format_ints(a, r->params, sizeof r->params);
    }
    c->record = r;
    exec->done = ckc_offer_mark(r, c->seq, device, r != NULL ? op_bytes(a) : 0, &c->pinned);
    exec->done_taken = 0;
    ckc_gpu_begin_op(op);
    return CKC_OK;
}

ckc_status
ckc_op_check_after(const char *op, const ckc_op_args *a, ckc_op_check *c, const ckc_exec *exec,
                   ckc_status status, ckc_error *err, ckc_fault *fault)
{
    ckc_flight_record *r = c->record;
    if (status != CKC_OK) {
        return op_failed(op, a, r, c->seq, status, err, fault);
    }
    if (r != NULL) {
        append_launches(r->params, sizeof r->params, c->params_used);
        ckc_flight_publish(r, c->seq);
        status = ckc_settle_mark(r, c->seq, exec->device_index, exec->stream, exec->done_taken, c->pinned, err);
        if (status != CKC_OK) {
            return op_failed(op, a, r, c->seq, status, err, fault);
        }
    }
    if (c->mode >= CKC_CHECK_OP) {
        status = fence_after(op, exec->device_index, exec->stream, c->seq, err, fault);
        if (status != CKC_OK && fault->seq == 0) {
            format_tensors(a, fault->tensors, sizeof fault->tensors);
        }
        if (status == CKC_OK && r != NULL) {
            r->completed_unix = ckc_unix_time();
        }
    }
    return status;
}

/* ---- staged copies ---- */

static uint32_t
memory_code(const char *memory)
{
    static const char *const names[] = {"pinned", "registered", "pageable", "file-mapped"};
    for (uint32_t k = 0; k < 4; k++) {
        if (strcmp(memory, names[k]) == 0) {
            return CKC_HOST_PINNED + k;
        }
    }
    return CKC_HOST_UNKNOWN;
}

ckc_status
ckc_checked_stage(const ckc_stage_args *s, const char **memory, ckc_error *err, ckc_fault *fault)
{
    ckc_gpu_device_guard guard;
    ckc_capture capture;
    ckc_flight_record *r;
    uint64_t seq = 0;
    ckc_status status;
    fault_init(fault, "stage", s->device, s->stream);
    snprintf(fault->tensors, sizeof fault->tensors, "%s", s->tensors);
    capture = ckc_capture_of(s->device, s->stream, err);
    if (capture.capturing < 0) {
        return capture_query_failed("stage", err, fault);
    }
    if (capture.capturing) {
        return ckc_capture_refuse_stage(err);
    }
    *memory = ckc_gpu_host_memory(s->src, s->bytes);
    /* An issued copy is already on the stream: a fence before its record would
     * blame its fault on earlier work, so in boundary mode it is fenced after. */
    if (s->mode >= CKC_CHECK_BOUNDARY && !s->issued) {
        CKC_TRY(fence_before("stage", s->device, s->stream, err, fault));
    }
    r = ckc_flight_begin(CKC_FLIGHT_COPY, &seq);
    if (r != NULL) {
        (void)ckc_text_append(r->op, sizeof r->op, 0, s->op != NULL ? s->op : "stage");
        r->device = s->device;
        r->stream = s->stream;
        r->bytes = s->bytes;
        r->host_ptr = (uint64_t)(uintptr_t)s->src;
        r->host_bytes = s->bytes;
        r->device_ptr = (uint64_t)(uintptr_t)s->dst;
        r->host_memory = memory_code(*memory) | CKC_FLIGHT_DEVICE_KIND;
        (void)ckc_text_append(r->tensors, sizeof r->tensors, 0, s->tensors);
    }
    fault->seq = seq;
    ckc_gpu_begin_op("stage");
    status = ckc_gpu_device_enter(s->device, &guard, err);
    if (status == CKC_OK) {
        /* An issued copy was queued by someone else (comfy-aimdo, torch): only its
         * record and completion mark are queued behind it, in stream order. */
        if (!s->issued) {
            status = ckc_gpu_copy_h2d_async(s->dst, s->src, s->bytes, s->stream, err);
        }
        ckc_gpu_device_leave(&guard);
    }
    if (status == CKC_OK && r != NULL) {
        ckc_flight_publish(r, seq);
        status = ckc_queue_mark(r, seq, s->device, s->stream, err);
    }
    if (status == CKC_ERR_DEVICE) {
        return earlier_fault(r, seq, "when stage queued its copy", err, fault);
    }
    if (status != CKC_OK) {
        char message[sizeof err->message]; /* err->message cannot format into itself */
        publish_failed(r, seq, err->device_error[0] ? err->device_error : err->message);
        snprintf(message, sizeof message, "%s", err->message);
        return status == CKC_ERR_LAUNCH ? CKC_FAIL(err, CKC_ERR_STAGING, "the copy was refused: %s", message)
                                        : status;
    }
    if (s->mode >= CKC_CHECK_OP || !s->non_blocking || (s->issued && s->mode >= CKC_CHECK_BOUNDARY)) {
        status = fence_after("stage", s->device, s->stream, seq, err, fault);
        if (status == CKC_OK && r != NULL) {
            r->completed_unix = ckc_unix_time();
        }
    }
    return status;
}

/* ---- fences on host ranges ---- */

typedef struct {
    uint64_t seq;
    uint64_t stream;
    int device;
} copy_wait;

static int
poll_copy(void *ctx, ckc_error *err)
{
    const copy_wait *w = ctx;
    ckc_flight_record *r = ckc_flight_find(w->seq);
    if (r == NULL) {
        return 1; /* the slot was reused: far older than the ring; long complete */
    }
    if (ckc_flight_is_done(r, w->seq)) {
        if (r->completed_unix == 0.0) {
            r->completed_unix = ckc_unix_time();
        }
        return 1;
    }
    if (ckc_atomic_load32(&r->state) == CKC_FLIGHT_FAILED) {
        CKC_FAIL(err, CKC_ERR_DEVICE, "the copy failed: %s", r->error);
        return -1;
    }
    return ckc_gpu_stream_query(w->device, w->stream, err) < 0 ? -1 : 0;
}

static int
overlaps(const ckc_flight_record *r, const void *p, size_t bytes)
{
    const uint64_t lo = (uint64_t)(uintptr_t)p;
    return r->kind == CKC_FLIGHT_COPY && r->host_ptr < lo + bytes && lo < r->host_ptr + r->host_bytes;
}

ckc_status
ckc_fence_host(const void *p, size_t bytes, ckc_error *err, ckc_fault *fault)
{
    const ckc_flight *f = ckc_flight_ring;
    uint64_t newest;
    uint64_t oldest;
    fault_init(fault, "fence", 0, 0);
    if (f == NULL || f->state != 1) {
        return CKC_OK;
    }
    newest = ckc_atomic_load64(&f->seq);
    oldest = newest > CKC_FLIGHT_CAPACITY ? newest - CKC_FLIGHT_CAPACITY + 1 : 1;
    if (oldest < ckc_atomic_load64(&f->reset_below)) {
        oldest = ckc_atomic_load64(&f->reset_below); /* copies from before a device reset never complete */
    }
    for (uint64_t seq = oldest; seq != 0 && seq <= newest; seq++) {
        ckc_flight_record *r = ckc_flight_find(seq);
        copy_wait w;
        ckc_status status;
        if (r == NULL || !overlaps(r, p, bytes) || ckc_flight_is_done(r, seq)) {
            continue;
        }
        w.seq = seq;
        w.stream = r->stream;
        w.device = r->device;
        status = wait_for(poll_copy, &w, r->stream, "fence", err, fault);
        if (status == CKC_ERR_DEVICE) {
            char message[sizeof err->message];
            (void)blame(fault, err, seq + 1);
            if (fault->seq == 0) {
                attribute(fault, r, seq);
            }
            snprintf(message, sizeof message, "%s", err->message);
            return CKC_FAIL(err, CKC_ERR_STAGING, "a copy from the fenced host range did not complete: %s", message);
        }
        if (status != CKC_OK) {
            return status;
        }
    }
    return CKC_OK;
}
