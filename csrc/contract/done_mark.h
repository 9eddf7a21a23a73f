/* SPDX-License-Identifier: Apache-2.0 */
/* A completion mark that rides on an op's own last kernel (see
 * kernels/done_mark.cuh and csrc/diag/marks.c): instead of a separate
 * one-thread kernel after the op, the last block of the op's last kernel to
 * finish writes the flight record's seq into its completion word.  Shared by
 * the host (C) and the kernels (CUDA C, or C++ on the emulated device); it
 * reaches the launchers in the execution context (contract/exec.h). */
#ifndef CKC_CONTRACT_DONE_MARK_H
#define CKC_CONTRACT_DONE_MARK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A kernel argument.  word NULL: no mark (the kernel writes nothing). */
typedef struct {
    uint64_t *word;     /* the completion word, as the device addresses it */
    uint64_t seq;       /* written into *word when every block has finished */
    uint32_t *arrivals; /* device memory, 0 between launches: blocks finished so far (unused by a one-block grid) */
    const uint32_t *replay; /* an op captured into a CUDA graph: the device's replay counter, and the word
                               gets CKC_FLIGHT_REPLAY_DONE(*replay, seq) (csrc/diag/flight.h); NULL: seq */
} ckc_done_mark;

#ifdef __cplusplus
}
#endif

#endif /* CKC_CONTRACT_DONE_MARK_H */
