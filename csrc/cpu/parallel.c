/* SPDX-License-Identifier: Apache-2.0 */
/* Thread pool behind ckc_parallel_for, shared by concurrent calls.  Each call
 * is a job on the caller's stack, linked into the pool's list of open jobs
 * while it runs; the caller works on its own job's chunks, and the pool's
 * workers (sleeping on a condition variable) join whichever open job has
 * chunks left and free slots, each taking the next slot index of that job.
 * So calls from several Python threads run at once, each on its calling
 * thread, and the workers spread over them where the cores allow.  After a
 * job, workers spin for a short while on a lock-free counter of published
 * jobs before sleeping, so back-to-back calls (the common case: one op after
 * another) do not pay a wake-up each.  A caller returns only once every chunk
 * of its job is done, and workers touch a job only under the lock or while
 * running one of its chunks, so no worker touches a job after its call
 * returns. */
#include <stdlib.h>
#include <string.h>

#include "parallel.h"
#include "platform/library.h"
#include "platform/settings.h"
#include "platform/threads.h"

#define CKC_POOL_MAX_THREADS 256
#define CKC_CHUNKS_PER_THREAD 4
#define CKC_SPIN_ITERATIONS 20000 /* about 100 microseconds of pause instructions */
/* On our pool (not torch's OpenMP team, below), work under this many grains runs on the calling
 * thread alone.  Our ops run between torch's, whose OpenMP workers (libgomp, OMP_WAIT_POLICY
 * unset: the default) go on spinning for a while after every torch op on the very cores our
 * workers would take; a woken worker descheduled in favour of a spinner holds its chunk for a
 * time slice while the caller waits for it.  Below about 32 grains (512K elements of the
 * element-wise ops, ckc_row_grain) that costs more than a second thread saves: 2 threads,
 * K = 1024, 256 rows (16 grains), alternating with eager: quantize_int8_tensorwise float16
 * 0.56 ms with the pool, 0.28 ms without, quantize_per_tensor_fp8 float32 0.28 / 0.14 ms,
 * rms_rope float32 2.7 / 1.65 ms; from 786K elements the pool wins
 * (benchmarks/results/cpu_pool_vs_openmp_team.md). */
#define CKC_POOL_MIN_GRAINS 32

typedef struct ckc_job {
    ckc_range_fn fn;
    void *ctx;
    int64_t n;
    int64_t chunk;
    int64_t n_chunks;
    int64_t next_chunk;
    int64_t done_chunks;
    int participants; /* slots 0..participants-1; 0 is the caller's */
    int joined;       /* slots handed out */
    struct ckc_job *next;
} ckc_job;

typedef struct {
    ckc_mutex lock; /* guards everything below but `published` and `owner_pid` */
    ckc_cond work_ready;
    ckc_cond work_done;
    ckc_atomic_counter owner_pid;  /* process that started the workers */
    int n_workers;
    ckc_job *open;                 /* jobs with chunks not yet claimed or not yet done */
    ckc_atomic_counter published;  /* jobs published so far (low bits), readable without the lock */
} ckc_pool;

static ckc_pool pool;

static void
pool_reset(void)
{
    ckc_mutex_init(&pool.lock);
    ckc_cond_init(&pool.work_ready);
    ckc_cond_init(&pool.work_done);
    pool.n_workers = 0;
    pool.open = NULL;
    ckc_atomic_store(&pool.published, 0);
    ckc_atomic_store(&pool.owner_pid, ckc_process_id());
}

void
ckc_parallel_init(void)
{
    pool_reset();
}

/* Claims and runs chunks of job as slot `worker`; lock held on entry and exit. */
static void
run_chunks(ckc_job *job, int worker)
{
    while (job->next_chunk < job->n_chunks) {
        const int64_t c = job->next_chunk++;
        const int64_t begin = c * job->chunk;
        const int64_t end = begin + job->chunk < job->n ? begin + job->chunk : job->n;
        ckc_mutex_unlock(&pool.lock);
        job->fn(job->ctx, begin, end, worker);
        ckc_mutex_lock(&pool.lock);
        if (++job->done_chunks == job->n_chunks) {
            ckc_cond_broadcast(&pool.work_done);
        }
    }
}

/* An open job a worker can join (chunks left, a free slot), or NULL; lock held. */
static ckc_job *
joinable(void)
{
    for (ckc_job *j = pool.open; j != NULL; j = j->next) {
        if (j->next_chunk < j->n_chunks && j->joined < j->participants) {
            return j;
        }
    }
    return NULL;
}

static void
worker_main(void *arg)
{
    long seen = 0;
    (void)arg;
    ckc_mutex_lock(&pool.lock);
    for (;;) {
        ckc_job *job = joinable();
        if (job == NULL) {
            seen = ckc_atomic_load(&pool.published);
            ckc_mutex_unlock(&pool.lock);
            for (int k = 0; k < CKC_SPIN_ITERATIONS && ckc_atomic_load(&pool.published) == seen; k++) {
                ckc_cpu_relax();
            }
            ckc_mutex_lock(&pool.lock);
            while ((job = joinable()) == NULL) {
                ckc_cond_wait(&pool.work_ready, &pool.lock);
            }
        }
        run_chunks(job, job->joined++);
    }
}

static int omp_usable(void);

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
    if (by_work < CKC_POOL_MIN_GRAINS && by_work >= 2 && !omp_usable()) {
        return 1; /* torch's team has no such cost: its threads are the spinning ones */
    }
    if (by_work < nthreads) {
        nthreads = (int)by_work;
    }
    return nthreads < 1 ? 1 : nthreads;
}

/* Starts workers until the pool has `wanted`; returns how many it has.  Lock held. */
static int
grow(int wanted)
{
    while (pool.n_workers < wanted) {
        if (ckc_thread_start(worker_main, NULL) != 0) {
            break;
        }
        pool.n_workers++;
    }
    return pool.n_workers;
}

static void
unlink_job(ckc_job *job)
{
    ckc_job **p = &pool.open;
    while (*p != job) {
        p = &(*p)->next;
    }
    *p = job->next;
}

/* ---- torch's OpenMP team ----
 * Where torch's libgomp is loaded (its Linux wheels), our loops run on its team through
 * GOMP_parallel (what GCC compiles `#pragma omp parallel` to): the very threads torch's ops run
 * on.  After a torch op they spin, waiting for the next parallel region, so ours starts at once,
 * and no thread of ours competes with them for the cores
 * (benchmarks/results/cpu_pool_vs_openmp_team.md).  Elsewhere (Windows and macOS builds of torch
 * use other runtimes), in a forked child (a parent's libgomp team does not survive fork), or with
 * COMFY_KITCHEN_C_CPU_THREADS=pool: our pool below. */
typedef void (*omp_parallel_fn)(void (*body)(void *), void *data, unsigned num_threads, unsigned flags);
typedef int (*omp_thread_num_fn)(void);

static struct {
    omp_parallel_fn parallel; /* NULL: none found, or not to be used */
    omp_thread_num_fn thread_num;
    long pid;                 /* the process that found it */
} omp;
static ckc_atomic_counter omp_looked; /* 1 once omp is set (under pool.lock) */

typedef struct {
    ckc_range_fn fn;
    void *ctx;
    int64_t n;
    int64_t chunk;
    int64_t n_chunks;
    ckc_atomic_counter next_chunk;
} omp_job;

/* What each thread of the team runs: chunks claimed one at a time, as the pool's workers do. */
static void
omp_body(void *arg)
{
    omp_job *job = (omp_job *)arg;
    const int worker = omp.thread_num();
    for (;;) {
        const int64_t c = (int64_t)ckc_atomic_add(&job->next_chunk, 1);
        int64_t begin;
        if (c >= job->n_chunks) {
            return;
        }
        begin = c * job->chunk;
        job->fn(job->ctx, begin, begin + job->chunk < job->n ? begin + job->chunk : job->n, worker);
    }
}

/* Looks for torch's libgomp once, under pool.lock. */
static void
omp_lookup(void)
{
    ckc_settings settings;
    void *lib;
    void *parallel;
    void *thread_num;
    ckc_settings_read(&settings);
    if (settings.cpu_threads_pool) {
        return;
    }
    lib = ckc_library_loaded("libgomp");
    if (lib == NULL) {
        return;
    }
    parallel = ckc_library_symbol(lib, "GOMP_parallel");
    thread_num = ckc_library_symbol(lib, "omp_get_thread_num");
    if (parallel == NULL || thread_num == NULL) {
        return;
    }
    /* a function address as a void *: copied bytewise (library.h) */
    memcpy(&omp.parallel, &parallel, sizeof parallel);
    memcpy(&omp.thread_num, &thread_num, sizeof thread_num);
    omp.pid = ckc_process_id();
}

static int
omp_usable(void)
{
    if (ckc_atomic_load(&omp_looked) == 0) {
        ckc_mutex_lock(&pool.lock);
        if (ckc_atomic_load(&omp_looked) == 0) {
            omp_lookup();
            ckc_atomic_store(&omp_looked, 1);
        }
        ckc_mutex_unlock(&pool.lock);
    }
    return omp.parallel != NULL && omp.pid == ckc_process_id();
}

const char *
ckc_parallel_runtime(void)
{
    return omp_usable() ? "openmp" : "pool";
}

/* Chunks for nthreads at this grain: CKC_CHUNKS_PER_THREAD each, none below a grain. */
static int64_t
chunk_count(int64_t n, int64_t grain, int nthreads)
{
    int64_t chunks = (int64_t)nthreads * CKC_CHUNKS_PER_THREAD;
    if (grain < 1) {
        grain = 1;
    }
    if (chunks > n / grain) {
        chunks = n / grain > nthreads ? n / grain : nthreads;
    }
    return chunks;
}

static void
omp_run(int64_t n, int64_t grain, int nthreads, ckc_range_fn fn, void *ctx)
{
    omp_job job;
    const int64_t chunks = chunk_count(n, grain, nthreads);
    job.fn = fn;
    job.ctx = ctx;
    job.n = n;
    job.chunk = (n + chunks - 1) / chunks;
    job.n_chunks = (n + job.chunk - 1) / job.chunk;
    ckc_atomic_store(&job.next_chunk, 0);
    omp.parallel(omp_body, &job, (unsigned)nthreads, 0);
}

void
ckc_parallel_for(int64_t n, int64_t grain, int nthreads, ckc_range_fn fn, void *ctx)
{
    ckc_job job;
    int64_t chunks;
    if (n <= 0) {
        return;
    }
    nthreads = ckc_parallel_threads(n, grain, nthreads);
    if (nthreads == 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    if (omp_usable()) {
        omp_run(n, grain, nthreads, fn, ctx);
        return;
    }
    if (ckc_atomic_load(&pool.owner_pid) != ckc_process_id()) {
        /* Forked child: the parent's workers do not exist here.  (A child that
         * calls from several threads before its first call has returned is not
         * supported; fork with threads running is unsafe anyway.) */
        pool_reset();
    }
    ckc_mutex_lock(&pool.lock);
    if (grow(nthreads - 1) + 1 < nthreads) {
        nthreads = pool.n_workers + 1;
    }
    chunks = chunk_count(n, grain, nthreads);
    job.fn = fn;
    job.ctx = ctx;
    job.n = n;
    job.chunk = (n + chunks - 1) / chunks;
    job.n_chunks = (n + job.chunk - 1) / job.chunk;
    job.next_chunk = 0;
    job.done_chunks = 0;
    job.participants = nthreads;
    job.joined = 1; /* slot 0: this thread */
    job.next = pool.open;
    pool.open = &job;
    ckc_atomic_store(&pool.published, ckc_atomic_load(&pool.published) + 1);
    ckc_cond_broadcast(&pool.work_ready);
    run_chunks(&job, 0);
    while (job.done_chunks < job.n_chunks) {
        ckc_cond_wait(&pool.work_done, &pool.lock);
    }
    unlink_job(&job);
    ckc_mutex_unlock(&pool.lock);
}

int
ckc_parallel_workers(void)
{
    int n;
    ckc_mutex_lock(&pool.lock);
    n = pool.n_workers;
    ckc_mutex_unlock(&pool.lock);
    return n;
}
