/* SPDX-License-Identifier: Apache-2.0 */
/* The flight record's ring (see flight.h): opening the file, reserving and
 * publishing records, and the scans the fault reports use. */
#include <stdio.h>
#include <string.h>

#include "flight.h"
#include "flight_prune.h"

typedef char ckc_flight_header_is_256_bytes[sizeof(ckc_flight_header) == CKC_FLIGHT_HEADER_SIZE ? 1 : -1];
typedef char ckc_flight_record_is_512_bytes[sizeof(ckc_flight_record) == CKC_FLIGHT_RECORD_SIZE ? 1 : -1];

ckc_flight *ckc_flight_ring;

void
ckc_flight_init(ckc_flight *f)
{
    memset(f, 0, sizeof *f);
    ckc_mutex_init(&f->lock);
    ckc_mutex_init(&f->mirror_lock);
    ckc_cond_init(&f->mirror_wake);
    f->mirror_from = CKC_MIRROR_AWAKE;
    f->ops = 1;
}

void
ckc_flight_configure(const ckc_flight_config *c)
{
    ckc_flight *f = ckc_flight_ring;
    ckc_mutex_lock(&f->lock);
    if (f->state == 0) {
        snprintf(f->path, sizeof f->path, "%s", c->path ? c->path : "");
        snprintf(f->python, sizeof f->python, "%s", c->python);
        snprintf(f->package_version, sizeof f->package_version, "%s", c->package_version);
        snprintf(f->prune_prefix, sizeof f->prune_prefix, "%s", c->prune_prefix);
        snprintf(f->prune_suffix, sizeof f->prune_suffix, "%s", c->prune_suffix);
        f->keep = c->keep;
    }
    f->ops = c->ops;
    ckc_mutex_unlock(&f->lock);
}

const char *
ckc_flight_path(void)
{
    const ckc_flight *f = ckc_flight_ring;
    return f != NULL && f->state == 1 ? f->path : "";
}

/* Maps the file (or, when there is none or it cannot be created, memory) and
 * writes the header.  Caller holds the lock. */
static void
open_ring(ckc_flight *f)
{
    const size_t bytes = CKC_FLIGHT_HEADER_SIZE +
                         (size_t)(CKC_FLIGHT_CAPACITY + CKC_FLIGHT_CAPTURE_CAPACITY) * CKC_FLIGHT_RECORD_SIZE;
    ckc_flight_header *h;
    if (f->path[0] == '\0' || ckc_mapped_file_create(f->path, bytes, &f->file) != 0) {
        f->path[0] = '\0';
        if (ckc_mapped_anonymous(bytes, &f->file) != 0) {
            f->state = -1;
            return;
        }
    } else if (f->keep > 0) {
        ckc_flight_prune(f->path, f->prune_prefix, f->prune_suffix, f->keep);
    }
    h = f->file.base;
    memcpy(h->magic, CKC_FLIGHT_MAGIC, sizeof h->magic);
    h->version = CKC_FLIGHT_VERSION;
    h->header_size = CKC_FLIGHT_HEADER_SIZE;
    h->record_size = CKC_FLIGHT_RECORD_SIZE;
    h->capacity = CKC_FLIGHT_CAPACITY;
    h->capture_capacity = CKC_FLIGHT_CAPTURE_CAPACITY;
    h->pid = (uint64_t)ckc_process_id();
    h->started_unix = ckc_unix_time();
    ckc_host_name(h->host, sizeof h->host);
    snprintf(h->python, sizeof h->python, "%s", f->python);
    snprintf(h->package_version, sizeof h->package_version, "%s", f->package_version);
    f->header = h;
    f->records = (ckc_flight_record *)((char *)f->file.base + CKC_FLIGHT_HEADER_SIZE);
    f->captures = f->records + CKC_FLIGHT_CAPACITY;
    f->state = 1;
}

static ckc_flight_record *
slot(const ckc_flight *f, uint64_t seq)
{
    return &f->records[(seq - 1) % CKC_FLIGHT_CAPACITY];
}

/* Opens the ring on first use; 0 without one. */
static int
ring_open(ckc_flight *f)
{
    if (f->state != 1) {
        ckc_mutex_lock(&f->lock);
        if (f->state == 0) {
            open_ring(f);
        }
        ckc_mutex_unlock(&f->lock);
    }
    return f->state == 1;
}

/* Empties slot r for a record of kind. */
static ckc_flight_record *
reset_slot(ckc_flight_record *r, uint32_t kind, uint64_t capture)
{
    /* Invalidate first: a reader (or a kill) in the middle sees an empty slot,
     * and a late completion of the slot's previous record (done = old seq)
     * cannot match the new seq. */
    ckc_atomic_store64(&r->seq, 0);
    r->kind = kind;
    ckc_atomic_store32(&r->state, CKC_FLIGHT_QUEUED);
    r->completed_unix = 0.0;
    r->queued_unix = ckc_unix_time();
    r->bytes = r->host_ptr = r->host_bytes = r->device_ptr = 0;
    r->capture = capture;
    r->host_memory = CKC_HOST_NONE | CKC_FLIGHT_DEVICE_KIND;
    r->tensors[0] = r->params[0] = r->error[0] = '\0';
    return r;
}

ckc_flight_record *
ckc_flight_begin(uint32_t kind, uint64_t *seq)
{
    ckc_flight *f = ckc_flight_ring;
    if (!ring_open(f)) {
        return NULL;
    }
    *seq = ckc_atomic_increment64(&f->seq);
    return reset_slot(slot(f, *seq), kind, 0);
}

ckc_flight_record *
ckc_flight_begin_captured(uint64_t capture, uint64_t *seq)
{
    ckc_flight *f = ckc_flight_ring;
    uint64_t k;
    if (!ring_open(f)) {
        return NULL;
    }
    k = ckc_atomic_increment64(&f->captured);
    *seq = ckc_atomic_increment64(&f->seq);
    /* A capture id of 0 (unknown) would read as "not captured". */
    return reset_slot(&f->captures[(k - 1) % CKC_FLIGHT_CAPTURE_CAPACITY], CKC_FLIGHT_OP, capture ? capture : 1);
}

void
ckc_flight_publish(ckc_flight_record *r, uint64_t seq)
{
    ckc_atomic_store64(&r->seq, seq);
    ckc_atomic_store64(&ckc_flight_ring->header->written, seq);
}

ckc_flight_record *
ckc_flight_find(uint64_t seq)
{
    const ckc_flight *f = ckc_flight_ring;
    ckc_flight_record *r;
    if (f->state != 1 || seq == 0) {
        return NULL;
    }
    r = slot(f, seq);
    return ckc_atomic_load64(&r->seq) == seq ? r : NULL;
}

void
ckc_flight_mark(ckc_flight_record *r, uint32_t state, const char *note)
{
    if (r == NULL) {
        return;
    }
    /* read by other threads (the mirror, scans) without the ring's lock: atomic */
    ckc_atomic_store32(&r->state, state);
    (void)ckc_text_append(r->error, sizeof r->error, 0, note);
}

/* Visits the valid records oldest first; stops when visit returns nonzero. */
static ckc_flight_record *
scan(uint64_t below, int (*visit)(const ckc_flight_record *r, uint64_t seq, const void *ctx), const void *ctx,
     int newest_first)
{
    const ckc_flight *f = ckc_flight_ring;
    uint64_t newest;
    uint64_t oldest;
    if (f == NULL || f->state != 1) {
        return NULL;
    }
    newest = ckc_atomic_load64(&f->seq);
    if (below != 0 && below - 1 < newest) {
        newest = below - 1;
    }
    oldest = newest > CKC_FLIGHT_CAPACITY ? newest - CKC_FLIGHT_CAPACITY + 1 : 1;
    for (uint64_t k = 0; newest >= oldest && k <= newest - oldest; k++) {
        const uint64_t seq = newest_first ? newest - k : oldest + k;
        ckc_flight_record *r = slot(f, seq);
        if (ckc_atomic_load64(&r->seq) == seq && visit(r, seq, ctx)) {
            return r;
        }
    }
    return NULL;
}

static int
is_incomplete_on(const ckc_flight_record *r, uint64_t seq, const void *ctx)
{
    const uint64_t stream = *(const uint64_t *)ctx;
    return ckc_atomic_load32(&r->state) == CKC_FLIGHT_QUEUED && !ckc_flight_is_done(r, seq) && (stream == UINT64_MAX || r->stream == stream);
}

ckc_flight_record *
ckc_flight_first_incomplete(uint64_t stream, uint64_t below)
{
    return scan(below, is_incomplete_on, &stream, 0);
}

static int
is_completed_kind(const ckc_flight_record *r, uint64_t seq, const void *ctx)
{
    const uint32_t kind = *(const uint32_t *)ctx;
    return ckc_flight_is_done(r, seq) && (kind == 0 || r->kind == kind);
}

ckc_flight_record *
ckc_flight_last_completed(uint32_t kind, uint64_t below)
{
    return scan(below, is_completed_kind, &kind, 1);
}

static int
abandon_one(const ckc_flight_record *r, uint64_t seq, const void *ctx)
{
    if (ckc_atomic_load32(&r->state) == CKC_FLIGHT_QUEUED && !ckc_flight_is_done(r, seq)) {
        ckc_flight_mark((ckc_flight_record *)r, CKC_FLIGHT_FAILED, ctx);
    }
    return 0;
}

void
ckc_flight_abandon(const char *note)
{
    ckc_flight *f = ckc_flight_ring;
    if (f != NULL && f->state == 1) {
        uint64_t *words = (uint64_t *)ckc_atomic_load_ptr(&f->words);
        (void)ckc_atomic_max64(&f->reset_below, ckc_atomic_load64(&f->seq) + 1);
        /* No replay is in flight after a reset either: a graph's replay left
         * incomplete then must not be blamed for a later fault. */
        ckc_atomic_store64(&f->header->replay_number, 0);
        ckc_atomic_store64(&f->header->replay_capture, 0);
        if (words != NULL) {
            ckc_atomic_store64(&words[CKC_FLIGHT_REPLAY_NUMBER_WORD], 0);
            ckc_atomic_store64(&words[CKC_FLIGHT_REPLAY_CAPTURE_WORD], 0);
        }
    }
    (void)scan(0, abandon_one, note, 0);
}

/* ---- replays of captured graphs ---- */

int
ckc_flight_latest_replay(uint64_t *capture, uint64_t *number)
{
    const ckc_flight *f = ckc_flight_ring;
    const uint64_t *words;
    uint64_t n;
    *capture = *number = 0;
    if (f == NULL || f->state != 1) {
        return 0;
    }
    /* The replay-begin kernel writes the capture word before the number. */
    n = ckc_atomic_load64(&f->header->replay_number);
    *capture = ckc_atomic_load64(&f->header->replay_capture);
    words = (const uint64_t *)ckc_atomic_load_ptr(&f->words);
    if (words != NULL && ckc_atomic_load64(&words[CKC_FLIGHT_REPLAY_NUMBER_WORD]) > n) {
        n = ckc_atomic_load64(&words[CKC_FLIGHT_REPLAY_NUMBER_WORD]);
        *capture = ckc_atomic_load64(&words[CKC_FLIGHT_REPLAY_CAPTURE_WORD]);
    }
    *number = n;
    return n != 0;
}

int
ckc_flight_done_in_replay(const ckc_flight_record *r, uint64_t seq, uint64_t n)
{
    const uint64_t *words = (const uint64_t *)ckc_atomic_load_ptr(&ckc_flight_ring->words);
    const uint64_t want = CKC_FLIGHT_REPLAY_DONE(n, seq);
    return ckc_atomic_load64(&r->done) == want ||
           (words != NULL && ckc_atomic_load64(&words[ckc_flight_slot(r)]) == want);
}

/* The latest replay's records, lowest seq first (first != 0) or highest first,
 * the first one that is (done != 0) or is not complete in it. */
static ckc_flight_record *
replay_scan(int first, int done)
{
    const ckc_flight *f = ckc_flight_ring;
    uint64_t capture;
    uint64_t n;
    ckc_flight_record *best = NULL;
    uint64_t best_seq = 0;
    if (!ckc_flight_latest_replay(&capture, &n)) {
        return NULL;
    }
    for (uint32_t k = 0; k < CKC_FLIGHT_CAPTURE_CAPACITY; k++) {
        ckc_flight_record *r = &f->captures[k];
        const uint64_t seq = ckc_atomic_load64(&r->seq);
        if (seq == 0 || r->capture != capture || ckc_flight_done_in_replay(r, seq, n) != done) {
            continue;
        }
        if (best == NULL || (first ? seq < best_seq : seq > best_seq)) {
            best = r;
            best_seq = seq;
        }
    }
    return best;
}

ckc_flight_record *
ckc_flight_replay_first_incomplete(void)
{
    return replay_scan(1, 0);
}

ckc_flight_record *
ckc_flight_replay_last_completed(void)
{
    return replay_scan(0, 1);
}

size_t
ckc_text_append(char *buf, size_t cap, size_t used, const char *s)
{
    while (*s != '\0' && used + 1 < cap) {
        buf[used++] = *s++;
    }
    buf[used < cap ? used : cap - 1] = '\0';
    return used;
}

size_t
ckc_text_append_int(char *buf, size_t cap, size_t used, long long v)
{
    char digits[24];
    int n = 0;
    unsigned long long m = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do {
        digits[n++] = (char)('0' + m % 10);
        m /= 10;
    } while (m != 0);
    if (v < 0) {
        digits[n++] = '-';
    }
    while (n > 0 && used + 1 < cap) {
        buf[used++] = digits[--n];
    }
    buf[used < cap ? used : cap - 1] = '\0';
    return used;
}
