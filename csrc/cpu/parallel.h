/* SPDX-License-Identifier: Apache-2.0 */
/* A small persistent thread pool for the CPU kernels.  Portable (pthreads or
 * Win32 through platform/threads.h), honours the thread count each call asks
 * for (the Python layer passes torch.get_num_threads()), survives fork. */
#ifndef CKC_CPU_PARALLEL_H
#define CKC_CPU_PARALLEL_H

#include <stdint.h>

/* A piece of work: indices [begin, end) of the iteration space, run by worker
 * `worker` (0 <= worker < nthreads, unique among concurrently running ranges,
 * so it can index per-thread scratch memory). */
typedef void (*ckc_range_fn)(void *ctx, int64_t begin, int64_t end, int worker);

/* Covers [0, n) with ranges of at least `grain` indices on up to `nthreads`
 * threads, the calling thread included, and returns when all are done.  Runs
 * inline when one thread suffices.  Concurrent callers run at once, each on
 * its own thread, sharing the pool's workers. */
void ckc_parallel_for(int64_t n, int64_t grain, int nthreads, ckc_range_fn fn, void *ctx);

/* Who runs the parallel loops: "openmp" (torch's libgomp team, parallel.c) or "pool". */
const char *ckc_parallel_runtime(void);

/* Workers the pool has started (for tests). */
int ckc_parallel_workers(void);

/* Threads a call will actually use for n indices at this grain: on our pool 1 below
 * CKC_POOL_MIN_GRAINS grains (parallel.c says why). */
int ckc_parallel_threads(int64_t n, int64_t grain, int nthreads);

/* Once, at module import (under the GIL, before any call). */
void ckc_parallel_init(void);

#endif /* CKC_CPU_PARALLEL_H */
