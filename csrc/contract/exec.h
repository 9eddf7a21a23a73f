/* SPDX-License-Identifier: Apache-2.0 */
/* The execution context of one op call: where and how it runs, and the
 * completion mark its last kernel may carry.  The module fills it from the
 * call's arguments, the diagnostics' before-hook offers the mark, the
 * launcher of the op's last kernel takes it, and the after-hook learns from it
 * whether the mark rode on that kernel (csrc/diag/checked.h).  Nothing in it is
 * thread-local: the context travels as an argument down the corridor. */
#ifndef CKC_CONTRACT_EXEC_H
#define CKC_CONTRACT_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "contract/done_mark.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int nthreads;            /* CPU threads (torch.get_num_threads()) */
    uintptr_t stream;        /* CUDA stream of the caller, 0 for CPU */
    int device_index;        /* CUDA device of the tensors */
    int gpu;                 /* 1: the op's GPU entry runs (CUDA tensors, or the emulated device) */
    void *workspace;         /* the GEMMs' workspace (the caller's memory: torch's allocator), or NULL */
    size_t workspace_bytes;  /* its size; 0: the GEMMs run on algorithms that need none */
    ckc_done_mark done;      /* the mark offered for the op's last kernel; word NULL: none */
    int done_taken;          /* 1 once a launcher took `done` for its kernel */
} ckc_exec;

/* For the launcher of the op's last kernel, once: the offered mark, which the
 * kernel then writes (no separate mark is queued), or a null mark when none was
 * offered or it was already taken.  Launchers of other kernels never call it. */
static inline ckc_done_mark
ckc_exec_take_done_mark(ckc_exec *exec)
{
    const ckc_done_mark m = exec->done;
    if (m.word != NULL) {
        exec->done_taken = 1;
        exec->done.word = NULL;
    }
    return m;
}

#ifdef __cplusplus
}
#endif

#endif /* CKC_CONTRACT_EXEC_H */
