/* SPDX-License-Identifier: Apache-2.0 */
/* Completion marks (see marks.h).  How: riding on the op's own last kernel
 * where its launcher takes the mark, else a separate work after the op's.
 * Where: first choice, the record's own `done` word in the file mapping, which
 * the runtime registers once.  Where the OS or the driver refuses that (Linux
 * >= 6.5 pins no file-backed pages but shmem and hugetlbfs for long:
 * cudaHostRegister fails), the slot's word in the ring's pinned words, which
 * the mirror copies into the file.  Never a host function in the stream: those
 * stall it until a driver thread runs them. */
#include "marks.h"

#include "flight_mirror.h"
#include "gpu/runtime.h"

/* How this module's marks were written (ckc_mark_counts). */
static volatile uint64_t riding_marks;
static volatile uint64_t separate_marks;
/* The most bytes an op may move and still be offered a riding mark (marks.h). */
static volatile uint64_t riding_limit = CKC_RIDING_MARK_MAX_BYTES;

uint64_t
ckc_mark_riding_limit(void)
{
    return ckc_atomic_load64(&riding_limit);
}

uint64_t
ckc_mark_set_riding_limit(uint64_t bytes)
{
    const uint64_t before = ckc_atomic_load64(&riding_limit);
    ckc_atomic_store64(&riding_limit, bytes);
    return before;
}

/* Whether the device can write host memory [p, p + bytes): asking the runtime
 * (it registers the range on the first call), or, while a stream is captured
 * into a CUDA graph (no registration then), only what it answered before. */
static int
host_writable(void *p, size_t bytes, int capturing)
{
    return capturing ? ckc_gpu_host_mapped(p, bytes) == 1 : ckc_gpu_map_host(p, bytes);
}

/* The ring's pinned words: made on first use, or while capturing only if made before. */
static uint64_t *
pinned_words(int capturing)
{
    return capturing ? (uint64_t *)ckc_atomic_load_ptr(&ckc_flight_ring->words)
                     : ckc_flight_words(ckc_gpu_alloc_mapped_host);
}

/* Where the device writes completion word `slot` (ckc_flight_slot, or a replay
 * word) whose file copy is file_word; NULL (err filled) when it can write
 * neither the file nor pinned memory.  *pinned: the word is a pinned one.
 * `capturing`: a captured op's (nothing is registered or allocated). */
static uint64_t *
word_for(uint64_t *file_word, uint32_t slot, int capturing, int *pinned, ckc_error *err)
{
    const ckc_flight *f = ckc_flight_ring;
    uint64_t *words;
    *pinned = 0;
    if (host_writable(f->file.base, f->file.bytes, capturing)) {
        return file_word;
    }
    words = pinned_words(capturing);
    if (words == NULL || !host_writable(words, (size_t)CKC_FLIGHT_WORDS * sizeof *words, capturing)) {
        CKC_FAIL(err, CKC_ERR_RUNTIME,
                 capturing ? "the flight record's completion marks: the device could write neither the record file "
                             "nor pinned host memory when this op was captured into a CUDA graph (run a GPU op "
                             "outside a capture first: what the marks need is set up there)"
                           : "the flight record's completion marks: the device can write neither the record file "
                             "(registration refused) nor pinned host memory");
        return NULL;
    }
    *pinned = 1;
    return &words[slot];
}

/* Where the device writes r's completion (a captured op's: see word_for). */
static uint64_t *
mark_word(ckc_flight_record *r, int *pinned, ckc_error *err)
{
    return word_for(&r->done, ckc_flight_slot(r), r->capture != 0, pinned, err);
}

/* The device's arrival counters (one per completion slot, then the replay
 * counter): made at the first op outside a capture. */
static uint32_t *
arrival_counters(int device, int capturing)
{
    return capturing ? ckc_gpu_mark_arrivals_known(device) : ckc_gpu_mark_arrivals(device, CKC_FLIGHT_WORDS - 1);
}

ckc_done_mark
ckc_offer_mark(ckc_flight_record *r, uint64_t seq, int device, uint64_t op_bytes, int *pinned)
{
    const ckc_done_mark none = {NULL, 0, NULL, NULL};
    ckc_gpu_device_guard guard;
    ckc_error err; /* a word that cannot be had is reported by the separate mark, after the op */
    ckc_done_mark m;
    uint64_t *word = NULL;
    uint64_t *device_word = NULL;
    uint32_t *arrivals = NULL;
    *pinned = 0;
    if (r == NULL || op_bytes > ckc_mark_riding_limit() || ckc_gpu_device_enter(device, &guard, &err) != CKC_OK) {
        return none;
    }
    word = mark_word(r, pinned, &err);
    if (word != NULL) {
        arrivals = arrival_counters(device, r->capture != 0);
        device_word = arrivals != NULL ? ckc_gpu_device_word(word, device) : NULL;
    }
    ckc_gpu_device_leave(&guard);
    if (device_word == NULL) {
        return none;
    }
    m.word = device_word;
    m.seq = seq;
    m.arrivals = &arrivals[ckc_flight_slot(r)];
    m.replay = r->capture != 0 ? &arrivals[CKC_FLIGHT_REPLAY_COUNTER] : NULL;
    return m;
}

ckc_status
ckc_settle_mark(ckc_flight_record *r, uint64_t seq, int device, uintptr_t stream, int taken, int pinned,
                ckc_error *err)
{
    if (!taken) {
        return ckc_queue_mark(r, seq, device, stream, err);
    }
    (void)ckc_atomic_increment64(&riding_marks);
    if (pinned && r->capture == 0) {
        ckc_flight_word_marked(seq); /* after the record was published, as for a separate mark */
    }
    return CKC_OK;
}

void
ckc_mark_counts(uint64_t *riding, uint64_t *separate)
{
    *riding = ckc_atomic_load64(&riding_marks);
    *separate = ckc_atomic_load64(&separate_marks);
}

/* A captured op's separate mark: a kernel (what a capture records), which
 * reads the replay counter when it runs. */
static ckc_status
queue_replay_mark(ckc_flight_record *r, uint64_t seq, uint64_t *word, int device, uintptr_t stream, ckc_error *err)
{
#if defined(CKC_WITH_GPU)
    uint32_t *arrivals = ckc_gpu_mark_arrivals_known(device);
    uint64_t *device_word = ckc_gpu_device_word(word, device);
    ckc_done_mark m;
    if (arrivals == NULL || device_word == NULL) {
        ckc_flight_mark(r, CKC_FLIGHT_FAILED, "no completion mark: captured before the device could write it");
        return CKC_OK;
    }
    m.word = device_word;
    m.seq = seq;
    m.arrivals = NULL; /* one block */
    m.replay = &arrivals[CKC_FLIGHT_REPLAY_COUNTER];
    return ckc_gpu_flight_mark(&m, stream, err);
#else
    (void)r;
    (void)seq;
    (void)word;
    (void)device;
    (void)stream;
    return CKC_FAIL(err, CKC_ERR_RUNTIME, "a captured op's mark in a build without a GPU");
#endif
}

ckc_status
ckc_queue_mark(ckc_flight_record *r, uint64_t seq, int device, uintptr_t stream, ckc_error *err)
{
    ckc_gpu_device_guard guard;
    uint64_t *word;
    int pinned;
    ckc_status status = CKC_OK;
    if (r == NULL) {
        return CKC_OK;
    }
    CKC_TRY(ckc_gpu_device_enter(device, &guard, err));
    word = mark_word(r, &pinned, err);
    if (word == NULL) {
        /* The work is queued but nothing will say it completed. */
        ckc_flight_mark(r, CKC_FLIGHT_FAILED, r->capture != 0 ? "no completion mark: captured before the device "
                                                                "could write a completion word"
                                                              : "no completion mark: the device can write no host memory");
        status = r->capture != 0 ? CKC_OK : err->status;
    } else if (r->capture != 0) {
        status = queue_replay_mark(r, seq, word, device, stream, err);
        (void)ckc_atomic_increment64(&separate_marks);
    } else {
        status = ckc_gpu_write_value64(word, seq, stream, device, err);
        (void)ckc_atomic_increment64(&separate_marks);
    }
    ckc_gpu_device_leave(&guard);
    if (status == CKC_OK && pinned && r->capture == 0) {
        ckc_flight_word_marked(seq);
    }
    return status;
}

ckc_status
ckc_queue_replay_begin(uint64_t capture, int device, uintptr_t stream, ckc_error *err)
{
#if defined(CKC_WITH_GPU)
    ckc_flight *f = ckc_flight_ring;
    ckc_gpu_device_guard guard;
    uint32_t *arrivals;
    uint64_t *capture_word;
    uint64_t *number_word;
    int pinned;
    ckc_status status = CKC_OK;
    if (f == NULL || f->state != 1) {
        return CKC_OK;
    }
    CKC_TRY(ckc_gpu_device_enter(device, &guard, err));
    arrivals = ckc_gpu_mark_arrivals_known(device);
    capture_word = word_for(&f->header->replay_capture, CKC_FLIGHT_REPLAY_CAPTURE_WORD, 1, &pinned, err);
    number_word = word_for(&f->header->replay_number, CKC_FLIGHT_REPLAY_NUMBER_WORD, 1, &pinned, err);
    capture_word = capture_word != NULL ? ckc_gpu_device_word(capture_word, device) : NULL;
    number_word = number_word != NULL ? ckc_gpu_device_word(number_word, device) : NULL;
    if (arrivals != NULL && capture_word != NULL && number_word != NULL) {
        status = ckc_gpu_replay_begin(&arrivals[CKC_FLIGHT_REPLAY_COUNTER], capture_word, number_word, capture, stream,
                                      err);
    }
    ckc_gpu_device_leave(&guard);
    return status;
#else
    (void)capture;
    (void)device;
    (void)stream;
    (void)err;
    return CKC_OK;
#endif
}
