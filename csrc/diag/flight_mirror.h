/* SPDX-License-Identifier: Apache-2.0 */
/* Completion words in pinned host memory, and their mirror into the flight
 * record's file (flight_mirror.c; the ring itself: flight.h).  The mirror is
 * built on the ring, never the other way round: the ring's own code calls
 * nothing here. */
#ifndef CKC_DIAG_FLIGHT_MIRROR_H
#define CKC_DIAG_FLIGHT_MIRROR_H

#include <stddef.h>
#include <stdint.h>

#include "flight.h"

/* The mirror's period while a record is outstanding (microseconds), and how
 * many more periods it stays awake once none is (a mark then wakes nobody:
 * the ops of a busy stream pay no system call). */
#define CKC_FLIGHT_MIRROR_US 1000u
#define CKC_FLIGHT_MIRROR_LINGER 50u
/* Its period, once an op was captured into a CUDA graph, while no replay is seen. */
#define CKC_FLIGHT_MIRROR_IDLE_US 10000u

/* The ring's pinned completion words: allocated (and zeroed) on first call with
 * alloc (host memory the device can write, never freed; NULL on failure), which
 * also starts the mirror.  NULL when alloc failed. */
uint64_t *ckc_flight_words(void *(*alloc)(size_t bytes));

/* r's word in words. */
static inline uint64_t *
ckc_flight_word_of(uint64_t *words, const ckc_flight_record *r)
{
    return &words[ckc_flight_slot(r)];
}

/* Tells the mirror that the completion of seq will land in its pinned word
 * (after the mark was queued).  Costs an atomic on every op; a lock only when
 * the mirror has to be woken. */
void ckc_flight_word_marked(uint64_t seq);

/* Copies every completion that has landed in a pinned word into its record now. */
void ckc_flight_mirror_now(void);

/* Brings the records up to date with the pinned words and writes the ring's
 * pages back to the file now. */
void ckc_flight_flush(void);

#endif /* CKC_DIAG_FLIGHT_MIRROR_H */
