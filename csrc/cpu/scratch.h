/* Per-thread float scratch rows for kernels that work on one row at a time:
 * allocated once per call, before the parallel region, so an allocation
 * failure is reported instead of happening inside a worker. */
#ifndef CKC_CPU_SCRATCH_H
#define CKC_CPU_SCRATCH_H

#include <stdlib.h>

#include "status.h"

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

#endif /* CKC_CPU_SCRATCH_H */
