/* SPDX-License-Identifier: Apache-2.0 */
/* Thread pool behind ckc_parallel_for.  Workers sleep on a condition variable;
 * a call publishes a job (a new generation), and every participant claims
 * chunks under the pool lock until none are left.  After a job, workers spin
 * for a short while on a lock-free copy of the generation before sleeping, so
 * back-to-back calls (the common case: one op after another) do not pay a
 * wake-up each.  The caller waits for the
 * last chunk, so no worker touches a job after its call returns.  A second
 * mutex serializes whole calls, which keeps the state to one job. */
#include <stdlib.h>

#include "parallel.h"
#include "platform/threads.h"

#define CKC_POOL_MAX_THREADS 256
#define CKC_CHUNKS_PER_THREAD 4
#define CKC_SPIN_ITERATIONS 20000 /* about 100 microseconds of pause instructions */

typedef struct {
    ckc_mutex call_lock;   /* one parallel call at a time */
    ckc_mutex lock;        /* guards everything below */
    ckc_cond work_ready;
    ckc_cond work_done;
    long owner_pid;        /* process that started the workers */
    int n_workers;
    uint64_t generation;
    ckc_atomic_counter published; /* low bits of generation, readable without the lock */
    /* the current job */
    ckc_range_fn fn;
    void *ctx;
    int64_t n;
    int64_t chunk;
    int64_t next_chunk;
    int64_t n_chunks;
    int64_t done_chunks;
    int participants;      /* workers 1..participants-1 may join; 0 is the caller */
} ckc_pool;

static ckc_pool pool;

static void
pool_reset(void)
{
    ckc_mutex_init(&pool.call_lock);
    ckc_mutex_init(&pool.lock);
    ckc_cond_init(&pool.work_ready);
    ckc_cond_init(&pool.work_done);
    pool.owner_pid = ckc_process_id();
    pool.n_workers = 0;
    pool.generation = 0;
    ckc_atomic_store(&pool.published, 0);
    pool.n_chunks = 0;
    pool.next_chunk = 0;
    pool.done_chunks = 0;
}

void
ckc_parallel_init(void)
{
    pool_reset();
}

/* Claims and runs chunks of the current job as `worker`; lock held on entry and exit. */
static void
run_chunks(int worker)
{
    while (pool.next_chunk < pool.n_chunks) {
        const int64_t c = pool.next_chunk++;
        const int64_t begin = c * pool.chunk;
        const int64_t end = begin + pool.chunk < pool.n ? begin + pool.chunk : pool.n;
        ckc_mutex_unlock(&pool.lock);
        pool.fn(pool.ctx, begin, end, worker);
        ckc_mutex_lock(&pool.lock);
        if (++pool.done_chunks == pool.n_chunks) {
            ckc_cond_broadcast(&pool.work_done);
        }
    }
}

static void
worker_main(void *arg)
{
    const int worker = (int)(intptr_t)arg;
    uint64_t seen = 0;
    ckc_mutex_lock(&pool.lock);
    for (;;) {
        if (pool.generation == seen) {
            ckc_mutex_unlock(&pool.lock);
            for (int k = 0; k < CKC_SPIN_ITERATIONS && ckc_atomic_load(&pool.published) == (long)seen; k++) {
                ckc_cpu_relax();
            }
            ckc_mutex_lock(&pool.lock);
        }
        while (pool.generation == seen) {
            ckc_cond_wait(&pool.work_ready, &pool.lock);
        }
        seen = pool.generation;
        if (worker < pool.participants) {
            run_chunks(worker);
        }
    }
}

int
ckc_parallel_threads(int64_t n, int64_t grain, int nthreads)
{
    int64_t by_work;
    if (nthreads > CKC_POOL_MAX_THREADS) {
        nthreads = CKC_POOL_MAX_THREADS;
    }
    if (grain < 1) {
        grain = 1;
    }
    by_work = n / grain;
    if (by_work < nthreads) {
        nthreads = (int)by_work;
    }
    return nthreads < 1 ? 1 : nthreads;
}

void
ckc_parallel_for(int64_t n, int64_t grain, int nthreads, ckc_range_fn fn, void *ctx)
{
    int64_t chunks;
    if (n <= 0) {
        return;
    }
    nthreads = ckc_parallel_threads(n, grain, nthreads);
    if (nthreads == 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    if (pool.owner_pid != ckc_process_id()) {
        /* Forked child: the parent's workers do not exist here. */
        pool_reset();
    }
    ckc_mutex_lock(&pool.call_lock);
    ckc_mutex_lock(&pool.lock);
    while (pool.n_workers < nthreads - 1) {
        if (ckc_thread_start(worker_main, (void *)(intptr_t)(pool.n_workers + 1)) != 0) {
            break;
        }
        pool.n_workers++;
    }
    if (pool.n_workers + 1 < nthreads) {
        nthreads = pool.n_workers + 1;
    }
    chunks = (int64_t)nthreads * CKC_CHUNKS_PER_THREAD;
    if (chunks > n / grain) {
        chunks = n / grain > nthreads ? n / grain : nthreads;
    }
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.chunk = (n + chunks - 1) / chunks;
    pool.n_chunks = (n + pool.chunk - 1) / pool.chunk;
    pool.next_chunk = 0;
    pool.done_chunks = 0;
    pool.participants = nthreads;
    pool.generation++;
    ckc_atomic_store(&pool.published, (long)pool.generation);
    ckc_cond_broadcast(&pool.work_ready);
    run_chunks(0);
    while (pool.done_chunks < pool.n_chunks) {
        ckc_cond_wait(&pool.work_done, &pool.lock);
    }
    ckc_mutex_unlock(&pool.lock);
    ckc_mutex_unlock(&pool.call_lock);
}
