/* Completion marks of the flight record: after an op's (or a copy's) work, the
 * device writes the record's seq into its completion word, in stream order.
 * Where that word is (the file's record, or pinned host memory mirrored into
 * the file) is decided here, with what the device runtime can write; see
 * flight.h. */
#ifndef CKC_DIAG_MARKS_H
#define CKC_DIAG_MARKS_H

#include <stdint.h>

#include "flight.h"
#include "status.h"

/* Queues r's completion mark (seq) on stream, on device; nothing when r is NULL. */
ckc_status ckc_queue_mark(ckc_flight_record *r, uint64_t seq, int device, uintptr_t stream, ckc_error *err);

#endif /* CKC_DIAG_MARKS_H */
