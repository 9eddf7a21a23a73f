/* SPDX-License-Identifier: Apache-2.0 */
/* Completion marks of the flight record: after an op's (or a copy's) work, the
 * device writes the record's seq into its completion word, in stream order.
 * Where that word is (the file's record, or pinned host memory mirrored into
 * the file) is decided here, with what the device runtime can write; see
 * flight.h. */
#ifndef CKC_DIAG_MARKS_H
#define CKC_DIAG_MARKS_H

#include <stdint.h>

#include "contract/done_mark.h"
#include "contract/status.h"
#include "flight.h"

/* Queues r's completion mark (seq) on stream, on device, as a work of its own
 * after the op's (or the copy's); nothing when r is NULL. */
ckc_status ckc_queue_mark(ckc_flight_record *r, uint64_t seq, int device, uintptr_t stream, ckc_error *err);

/* A mark that rides on the op's own last kernel (contract/done_mark.h), for
 * one op, carried by its execution context (contract/exec.h):
 *   ckc_offer_mark before the op: resolves where the device writes r's
 *     completion and returns the mark to offer in exec->done (a null mark when
 *     r is NULL, when the op moves more than the riding limit (below), or when
 *     the device can write no word: the separate mark then says why);
 *     *pinned: the word is a pinned one;
 *   the launcher of the op's last kernel takes it (ckc_exec_take_done_mark);
 *   ckc_settle_mark after the op queued its work and r was published: when no
 *     launcher took the mark (`taken` 0: copies, cuBLASLt last, no work, a
 *     kernel not converted), queues the separate one; either way tells the
 *     mirror.  A failed op settles nothing: its mark is simply not written. */
ckc_done_mark ckc_offer_mark(ckc_flight_record *r, uint64_t seq, int device, uint64_t op_bytes, int *pinned);

/* Ops whose tensors hold more than this many bytes are offered no riding mark:
 * their mark is the separate one.  Every block of a riding kernel arrives with
 * a release (a fence that waits for the block's stores) before it retires, and
 * on the H200 at 1cdf9a7 that cost grew with the grid's waves: +2 to +4 us at
 * 32-50 MB (quantize_int8_rowwise 4096 x 3072: 17.3 us against 14.6 off),
 * +10 to +21 us at 150-235 MB (quantize_nvfp4 4096 x 14336: 142 against 121),
 * where a separate one-thread kernel costs one launch.  32 MiB is where the two
 * meet by that run's figures; gpu_check measures both beside "off". */
#define CKC_RIDING_MARK_MAX_BYTES ((uint64_t)32 << 20)

/* The limit in force, and setting it (tests and benchmarks; UINT64_MAX: every
 * mark may ride, 0: none).  Returns the previous limit. */
uint64_t ckc_mark_riding_limit(void);
uint64_t ckc_mark_set_riding_limit(uint64_t bytes);
ckc_status ckc_settle_mark(ckc_flight_record *r, uint64_t seq, int device, uintptr_t stream, int taken, int pinned,
                           ckc_error *err);

/* Queues the replay-begin kernel of a CUDA-graph capture on stream (being
 * captured): at every replay of the graph it bumps the device's replay counter
 * and writes (capture, n) into the flight record's replay words (flight.h).
 * Nothing when what it needs was not set up before the capture. */
ckc_status ckc_queue_replay_begin(uint64_t capture, int device, uintptr_t stream, ckc_error *err);

/* How many of this module's marks rode on an op's kernel, and how many were
 * queued separately (tests and benchmarks). */
void ckc_mark_counts(uint64_t *riding, uint64_t *separate);

#endif /* CKC_DIAG_MARKS_H */
