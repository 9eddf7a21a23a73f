/* SPDX-License-Identifier: Apache-2.0 */
/* Per-thread float scratch rows for kernels that work on one row at a time:
 * allocated once per call, before the parallel region, so an allocation
 * failure is reported instead of happening inside a worker. */
#ifndef CKC_CPU_SCRATCH_H
#define CKC_CPU_SCRATCH_H

#include <stdlib.h>

#include "contract/status.h"
#include "parallel.h"

typedef struct {
    float *base;
    int64_t per_thread;
} ckc_scratch;

static inline ckc_status
ckc_scratch_alloc(ckc_scratch *s, int threads, int64_t per_thread, ckc_error *err)
{
    const size_t bytes = (size_t)threads * (size_t)per_thread * sizeof(float);
    s->per_thread = per_thread;
    s->base = (float *)malloc(bytes > 0 ? bytes : 1);
    if (s->base == NULL) {
        return CKC_FAIL(err, CKC_ERR_MEMORY, "cannot allocate %zu bytes of scratch memory", bytes);
    }
    return CKC_OK;
}

static inline float *
ckc_scratch_row(const ckc_scratch *s, int worker)
{
    return s->base + (int64_t)worker * s->per_thread;
}

static inline void
ckc_scratch_free(ckc_scratch *s)
{
    free(s->base);
    s->base = NULL;
}

/* Rows per task: enough elements that a task is worth a wake-up. */
static inline int64_t
ckc_row_grain(int64_t cols)
{
    const int64_t target = 1 << 14;
    return cols >= target ? 1 : target / (cols > 0 ? cols : 1);
}

/* Runs fn over `rows` rows of `cols` values, each worker with a scratch row of
 * `floats` floats in *scratch (allocated before the parallel region, freed after). */
static inline ckc_status
ckc_parallel_rows(int64_t rows, int64_t cols, int nthreads, int64_t floats, ckc_scratch *scratch,
                  ckc_range_fn fn, void *job, ckc_error *err)
{
    const int64_t grain = ckc_row_grain(cols);
    const int threads = ckc_parallel_threads(rows, grain, nthreads);
    CKC_TRY(ckc_scratch_alloc(scratch, threads, floats, err));
    ckc_parallel_for(rows, grain, threads, fn, job);
    ckc_scratch_free(scratch);
    return CKC_OK;
}

#endif /* CKC_CPU_SCRATCH_H */
