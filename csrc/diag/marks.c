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

#include "gpu/runtime.h"

/* How this module's marks were written (ckc_mark_counts). */
static volatile uint64_t riding_marks;
static volatile uint64_t separate_marks;

/* Where the device writes r's completion; NULL (err filled) when it can write
 * neither the file nor pinned memory.  *pinned: the word is a pinned one. */
static uint64_t *
mark_word(ckc_flight_record *r, int *pinned, ckc_error *err)
{
    const ckc_flight *f = ckc_flight_ring;
    uint64_t *words;
    *pinned = 0;
    if (ckc_gpu_map_host(f->file.base, f->file.bytes)) {
        return &r->done;
    }
    words = ckc_flight_words(ckc_gpu_alloc_mapped_host);
    if (words == NULL || !ckc_gpu_map_host(words, (size_t)CKC_FLIGHT_CAPACITY * sizeof *words)) {
        CKC_FAIL(err, CKC_ERR_RUNTIME,
                 "the flight record's completion marks: the device can write neither the record file "
                 "(registration refused) nor pinned host memory");
        return NULL;
    }
    *pinned = 1;
    return ckc_flight_word_of(words, r);
}

ckc_done_mark
ckc_offer_mark(ckc_flight_record *r, uint64_t seq, int device, int *pinned)
{
    const ckc_done_mark none = {NULL, 0, NULL};
    ckc_gpu_device_guard guard;
    ckc_error err; /* a word that cannot be had is reported by the separate mark, after the op */
    ckc_done_mark m;
    uint64_t *word = NULL;
    uint64_t *device_word = NULL;
    uint32_t *arrivals = NULL;
    *pinned = 0;
    if (r == NULL || ckc_gpu_device_enter(device, &guard, &err) != CKC_OK) {
        return none;
    }
    word = mark_word(r, pinned, &err);
    if (word != NULL) {
        arrivals = ckc_gpu_mark_arrivals(device, CKC_FLIGHT_CAPACITY);
        device_word = arrivals != NULL ? ckc_gpu_device_word(word, device) : NULL;
    }
    ckc_gpu_device_leave(&guard);
    if (device_word == NULL) {
        return none;
    }
    m.word = device_word;
    m.seq = seq;
    m.arrivals = &arrivals[r - ckc_flight_ring->records];
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
    if (pinned) {
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
        ckc_flight_mark(r, CKC_FLIGHT_FAILED, "no completion mark: the device can write no host memory");
        status = err->status;
    } else {
        status = ckc_gpu_write_value64(word, seq, stream, device, err);
        (void)ckc_atomic_increment64(&separate_marks);
    }
    ckc_gpu_device_leave(&guard);
    if (status == CKC_OK && pinned) {
        ckc_flight_word_marked(seq);
    }
    return status;
}
