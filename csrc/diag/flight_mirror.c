/* SPDX-License-Identifier: Apache-2.0 */
/* The mirror of the pinned completion words into the flight record's file (see
 * flight.h, flight_mirror.h): where the device cannot write the file mapping, it writes each
 * completion into pinned host memory, and this copies them into the records.
 *
 * One thread per process, started with the words.  While a record is
 * outstanding it copies every CKC_FLIGHT_MIRROR_US; once none has been for
 * CKC_FLIGHT_MIRROR_LINGER periods it sleeps on a condition variable until the
 * next mark into the words, so an idle process has no periodic wakeups.
 * Copies raise `done` (never lower it): a slot's seqs only grow, so a stale
 * copy racing a newer completion cannot undo it.  A normal exit copies once
 * more (atexit); a killed process leaves the file at most one period behind.
 *
 * Replays of captured CUDA graphs write their completions with no call of ours
 * around them, so once an op was captured the mirror also copies the capture
 * area's words and the replay words, and never sleeps for good: every
 * CKC_FLIGHT_MIRROR_US while replays are seen (the replay number moved within
 * CKC_FLIGHT_MIRROR_LINGER periods), every CKC_FLIGHT_MIRROR_IDLE_US otherwise,
 * which bounds how far the file of a killed process lags behind a replay. */
#include <stdlib.h>
#include <string.h>

#include "flight_mirror.h"

/* Copies slot's completion, if it landed, into its record. */
static void
mirror_slot(uint64_t *words, ckc_flight_record *r, uint64_t seq)
{
    if (ckc_atomic_load64(ckc_flight_word_of(words, r)) == seq) {
        (void)ckc_atomic_max64(&r->done, seq);
    }
}

/* Copies the capture area's words and the replay words (a slot's replay
 * numbers grow, but a reused slot starts over: copied as they are); returns
 * the replay number. */
static uint64_t
mirror_captures(ckc_flight *f, uint64_t *words)
{
    const uint64_t captured = ckc_atomic_load64(&f->captured);
    const uint32_t used = captured < CKC_FLIGHT_CAPTURE_CAPACITY ? (uint32_t)captured : CKC_FLIGHT_CAPTURE_CAPACITY;
    uint64_t number;
    for (uint32_t k = 0; k < used; k++) {
        const uint64_t w = ckc_atomic_load64(&words[CKC_FLIGHT_CAPACITY + k]);
        if (w != 0 && ckc_atomic_load64(&f->captures[k].done) != w) {
            ckc_atomic_store64(&f->captures[k].done, w);
        }
    }
    number = ckc_atomic_load64(&words[CKC_FLIGHT_REPLAY_NUMBER_WORD]);
    if (number > ckc_atomic_load64(&f->header->replay_number)) {
        ckc_atomic_store64(&f->header->replay_capture, ckc_atomic_load64(&words[CKC_FLIGHT_REPLAY_CAPTURE_WORD]));
        ckc_atomic_store64(&f->header->replay_number, number);
    }
    return number;
}

void
ckc_flight_mirror_now(void)
{
    ckc_flight *f = ckc_flight_ring;
    uint64_t *words;
    if (f == NULL || f->state != 1) {
        return;
    }
    words = ckc_atomic_load_ptr(&f->words);
    if (words == NULL) {
        return;
    }
    for (uint32_t k = 0; k < CKC_FLIGHT_CAPACITY; k++) {
        ckc_flight_record *r = &f->records[k];
        const uint64_t seq = ckc_atomic_load64(&r->seq);
        if (seq != 0) {
            mirror_slot(words, r, seq);
        }
    }
    (void)mirror_captures(f, words);
}

/* Mirrors the records [from, newest] (from the last device reset on); returns
 * the oldest one still outstanding (queued or hang-suspected, not completed),
 * UINT64_MAX when none is.  A slot
 * not yet published (or already reused) is skipped: its own mark, queued after
 * it is published, wakes the mirror again. */
static uint64_t
mirror_pass(ckc_flight *f, uint64_t *words, uint64_t from)
{
    const uint64_t newest = ckc_atomic_load64(&f->seq);
    const uint64_t reset_below = ckc_atomic_load64(&f->reset_below);
    uint64_t oldest = newest > CKC_FLIGHT_CAPACITY ? newest - CKC_FLIGHT_CAPACITY + 1 : 1;
    uint64_t outstanding = UINT64_MAX;
    if (oldest < reset_below) {
        oldest = reset_below; /* abandoned by a device reset: they never complete */
    }
    for (uint64_t seq = from > oldest ? from : oldest; seq <= newest; seq++) {
        ckc_flight_record *r = ckc_flight_find(seq);
        if (r == NULL) {
            continue;
        }
        mirror_slot(words, r, seq);
        if (outstanding == UINT64_MAX && ckc_atomic_load32(&r->state) != CKC_FLIGHT_FAILED &&
            ckc_atomic_load64(&r->done) != seq) {
            outstanding = seq;
        }
    }
    return outstanding;
}

/* Sleeps until a mark into the words, unless one came since the last look. */
static void
sleep_until_marked(ckc_flight *f)
{
    ckc_mutex_lock(&f->mirror_lock);
    if (ckc_atomic_cas64(&f->mirror_from, CKC_MIRROR_AWAKE, CKC_MIRROR_ASLEEP) == CKC_MIRROR_AWAKE) {
        /* A mark that finds ASLEEP broadcasts under this lock: no wakeup is lost. */
        while (ckc_atomic_load64(&f->mirror_from) == CKC_MIRROR_ASLEEP) {
            ckc_cond_wait(&f->mirror_wake, &f->mirror_lock);
        }
    }
    ckc_mutex_unlock(&f->mirror_lock);
}

static void
mirror_main(void *arg)
{
    ckc_flight *f = arg;
    uint64_t *words = ckc_atomic_load_ptr(&f->words);
    uint64_t from = UINT64_MAX; /* oldest record that may be outstanding; UINT64_MAX: none */
    unsigned idle = 0;          /* periods since one was (or a replay moved) */
    uint64_t replay = 0;        /* the replay number last seen */
    for (;;) {
        const uint64_t marked = ckc_atomic_exchange64(&f->mirror_from, CKC_MIRROR_AWAKE);
        const int captures = ckc_atomic_load64(&f->captured) != 0;
        ckc_atomic_increment64(&f->mirror_wakeups);
        if (marked < CKC_MIRROR_ASLEEP && marked < from) {
            from = marked;
        }
        if (captures) {
            const uint64_t now = mirror_captures(f, words);
            idle = now != replay ? 0 : idle;
            replay = now;
        }
        if (from != UINT64_MAX) {
            from = mirror_pass(f, words, from);
            idle = 0;
        } else if (++idle > CKC_FLIGHT_MIRROR_LINGER) {
            if (!captures) {
                sleep_until_marked(f);
                idle = 0;
                continue;
            }
            ckc_sleep_us(CKC_FLIGHT_MIRROR_IDLE_US); /* replays need no call of ours: keep looking */
            continue;
        }
        ckc_sleep_us(CKC_FLIGHT_MIRROR_US);
    }
}

uint64_t *
ckc_flight_words(void *(*alloc)(size_t bytes))
{
    ckc_flight *f = ckc_flight_ring;
    uint64_t *words = ckc_atomic_load_ptr(&f->words);
    if (words != NULL) {
        return words;
    }
    ckc_mutex_lock(&f->lock);
    words = ckc_atomic_load_ptr(&f->words);
    if (words == NULL) {
        words = alloc((size_t)CKC_FLIGHT_WORDS * sizeof *words);
        if (words != NULL) {
            /* Completions the device wrote into the file before stay there (readers look at both). */
            memset(words, 0, (size_t)CKC_FLIGHT_WORDS * sizeof *words);
            ckc_atomic_store_ptr(&f->words, words);
            f->mirror = ckc_thread_start(mirror_main, f) == 0 ? 1 : -1;
            /* A normal exit leaves the file exact, whatever the mirror had not copied yet. */
            (void)atexit(ckc_flight_mirror_now);
        }
    }
    ckc_mutex_unlock(&f->lock);
    return words;
}

void
ckc_flight_word_marked(uint64_t seq)
{
    ckc_flight *f = ckc_flight_ring;
    if (ckc_atomic_min64(&f->mirror_from, seq) == CKC_MIRROR_ASLEEP) {
        /* The mirror is asleep (or about to wait): wake it. */
        ckc_mutex_lock(&f->mirror_lock);
        ckc_cond_broadcast(&f->mirror_wake);
        ckc_mutex_unlock(&f->mirror_lock);
    }
}

void
ckc_flight_flush(void)
{
    const ckc_flight *f = ckc_flight_ring;
    if (f != NULL && f->state == 1) {
        ckc_flight_mirror_now();
        ckc_mapped_file_flush(&f->file, f->file.base, f->file.bytes);
    }
}
