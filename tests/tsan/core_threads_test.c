/* SPDX-License-Identifier: Apache-2.0 */
/* The C core's concurrency under ThreadSanitizer (tests/tsan/run_tsan.py builds it with
 * -fsanitize=thread from the sources of _C_emu without the Python layer):
 *   pool       8 threads call ckc_parallel_for at once (the pool serves concurrent
 *              calls) while another switches the CPU kernels' instruction set;
 *   ops        8 threads run the rowwise quantizer through the router (ckc_op_run) on the
 *              emulated device, in every checking mode, each on its own stream: flight
 *              records written concurrently, completion words in pinned memory (the
 *              host mapping is refused) copied by the mirror thread, fences;
 *   watchdog   meanwhile one thread's stream hangs (injected) and its next fence
 *              runs into the watchdog (hang record, flush, then CKC_ERR_HANG).
 * Every result is checked against a single-threaded run.  Prints "OK" and exits 0;
 * any ThreadSanitizer report makes the process exit 66 (TSAN_OPTIONS in the runner). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/kernels.h"
#include "cpu/parallel.h"
#include "diag/checked.h"
#include "diag/flight.h"
#include "diag/flight_mirror.h"
#include "emu/emu_api.h"
#include "ops/op.h"
#include "platform/settings.h"

#define THREADS 8
#define ROWS 2
#define COLS 64
#define CHECK(cond, ...)                                                \
    do {                                                                \
        if (!(cond)) {                                                  \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);        \
            fprintf(stderr, __VA_ARGS__);                               \
            fprintf(stderr, "\n");                                      \
            exit(1);                                                    \
        }                                                               \
    } while (0)

static ckc_flight ring;

/* ---- pool ---- */

typedef struct {
    const int *values;
    long long partial[16]; /* per worker slot */
} sum_job;

static void
sum_range(void *ctx, int64_t b, int64_t e, int worker)
{
    sum_job *job = ctx;
    for (int64_t i = b; i < e; i++) {
        job->partial[worker] += job->values[i];
    }
}

static int values[100000];
static volatile int stop_switching;

static void *
pool_worker(void *arg)
{
    const int k = (int)(intptr_t)arg;
    for (int round = 0; round < 60; round++) {
        sum_job job;
        const int64_t n = 1000 + (k * 977 + round * 131) % 99000;
        long long want = 0;
        long long got = 0;
        memset(&job, 0, sizeof job);
        job.values = values;
        for (int64_t i = 0; i < n; i++) {
            want += values[i];
        }
        ckc_parallel_for(n, 64, 2 + (k + round) % 6, sum_range, &job);
        for (int w = 0; w < 16; w++) {
            got += job.partial[w];
        }
        CHECK(got == want, "pool: thread %d round %d: %lld != %lld", k, round, got, want);
        CHECK(strlen(ckc_cpu()->isa) > 0, "no ISA");
    }
    return NULL;
}

static void *
isa_switcher(void *arg)
{
    const char *const *isas = ckc_cpu_available();
    int n = 0;
    (void)arg;
    while (isas[n] != NULL) {
        n++;
    }
    for (int k = 0; !__atomic_load_n(&stop_switching, __ATOMIC_ACQUIRE); k++) {
        CHECK(ckc_cpu_select(isas[k % n]), "select %s", isas[k % n]);
    }
    return NULL;
}

/* ---- ops through the checked path on the emulated device ---- */

static const ckc_op_spec *
find_op(const char *name)
{
    for (int i = 0; ckc_op_table[i] != NULL; i++) {
        if (strcmp(ckc_op_table[i]->sig.name, name) == 0) {
            return ckc_op_table[i];
        }
    }
    fprintf(stderr, "no op %s\n", name);
    exit(1);
}

static ckc_tensor
tensor(void *data, ckc_dtype dtype, int64_t rows, int64_t cols)
{
    ckc_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.ndim = cols ? 2 : 1;
    t.shape[0] = rows;
    t.shape[1] = cols;
    t.numel = rows * (cols ? cols : 1);
    t.dtype = dtype;
    t.device = CKC_DEVICE_CPU;
    return t;
}

static float x_in[ROWS * COLS];
static int8_t q_ref[ROWS * COLS];
static float s_ref[ROWS];

static ckc_status
rowwise(const char *op, int8_t *q, float *s, uintptr_t stream, int mode, ckc_error *err)
{
    const ckc_op_spec *spec = find_op("quantize_int8_rowwise");
    ckc_op_args a;
    ckc_fault fault;
    memset(&a, 0, sizeof a);
    a.sig = &spec->sig;
    a.t[0] = tensor(x_in, CKC_DTYPE_FLOAT32, ROWS, COLS);
    a.t[1] = tensor(q, CKC_DTYPE_INT8, ROWS, COLS);
    a.t[2] = tensor(s, CKC_DTYPE_FLOAT32, ROWS, 0);
    a.present[0] = a.present[1] = a.present[2] = 1;
    a.i[0] = 16; /* rotated by groups of 16 */
    a.device = CKC_DEVICE_CPU;
    a.exec.nthreads = 2;
    a.exec.stream = stream;
    err->status = CKC_OK;
    err->device_error[0] = '\0';
    return ckc_op_run(spec, op, &a, mode, err, &fault);
}

static void *
op_worker(void *arg)
{
    const int k = (int)(intptr_t)arg;
    int8_t q[ROWS * COLS];
    float s[ROWS];
    for (int round = 0; round < 4; round++) {
        ckc_error err;
        memset(q, 0, sizeof q);
        const ckc_status st = rowwise("quantize_and_rotate_rowwise", q, s, 0x1000 + (uintptr_t)k, round % 3, &err);
        CHECK(st == CKC_OK, "op: thread %d round %d: status %d: %s", k, round, st, err.message);
        CHECK(memcmp(q, q_ref, sizeof q) == 0 && memcmp(s, s_ref, sizeof s) == 0, "op: thread %d: results differ",
              k);
    }
    return NULL;
}

static void *
watchdog_victim(void *arg)
{
    int8_t q[ROWS * COLS];
    float s[ROWS];
    ckc_error err;
    ckc_status st;
    (void)arg;
    ckc_emu_inject(CKC_EMU_INJECT_HANG, "watchdog_victim", 1);
    st = rowwise("watchdog_victim", q, s, 0x5000, CKC_CHECK_LAUNCH, &err); /* queued, never completes */
    CHECK(st == CKC_OK, "victim: first launch: status %d: %s", st, err.message);
    st = rowwise("after_the_hang", q, s, 0x5000, CKC_CHECK_BOUNDARY, &err); /* its fence meets the watchdog */
    CHECK(st == CKC_ERR_HANG, "victim: expected a hang, got status %d: %s", st, err.message);
    return NULL;
}

int
main(int argc, char **argv)
{
    pthread_t threads[THREADS + 2];
    ckc_flight_config flight;
    ckc_error err;
    const char *path = argc > 1 ? argv[1] : "";
    ckc_settings settings;
    setvbuf(stdout, NULL, _IOLBF, 0);
    ckc_settings_default(&settings);
    settings.hang_ms = 50;
    settings.hang_raise_ms = 300;
    ckc_settings_set(&settings);
    for (int i = 0; i < (int)(sizeof values / sizeof values[0]); i++) {
        values[i] = (i * 7919) % 1000 - 500;
    }
    for (int i = 0; i < ROWS * COLS; i++) {
        x_in[i] = (float)((i * 37) % 101) - 50.0f + 0.25f * (float)(i % 3);
    }
    ckc_cpu_init(); /* the pool and the ISA */
    /* the pool's threshold (parallel.c CKC_POOL_MIN_GRAINS): below 32 grains the caller alone */
    CHECK(ckc_parallel_threads(31 * 64 + 63, 64, 8) == 1, "pool: 31 grains use %d threads", ckc_parallel_threads(31 * 64 + 63, 64, 8));
    CHECK(ckc_parallel_threads(32 * 64, 64, 8) == 8, "pool: 32 grains use %d threads", ckc_parallel_threads(32 * 64, 64, 8));
    CHECK(ckc_parallel_threads(1 << 20, 64, 3) == 3, "pool: the thread count is a ceiling");
    ckc_flight_init(&ring);
    ckc_flight_ring = &ring;
    memset(&flight, 0, sizeof flight);
    flight.path = path;
    flight.ops = 1;
    flight.python = "tsan";
    flight.package_version = "0";
    ckc_flight_configure(&flight);
    ckc_emu_refuse_host_mapping(1); /* completions through the pinned words and the mirror thread */

    /* pool */
    for (intptr_t k = 0; k < THREADS; k++) {
        CHECK(pthread_create(&threads[k], NULL, pool_worker, (void *)k) == 0, "pthread_create");
    }
    CHECK(pthread_create(&threads[THREADS], NULL, isa_switcher, NULL) == 0, "pthread_create");
    for (int k = 0; k < THREADS; k++) {
        pthread_join(threads[k], NULL);
    }
    __atomic_store_n(&stop_switching, 1, __ATOMIC_RELEASE);
    pthread_join(threads[THREADS], NULL);
    printf("pool: %d workers served %d threads at once\n", ckc_parallel_workers(), THREADS);

    /* ops and the watchdog */
    CHECK(rowwise("quantize_and_rotate_rowwise", q_ref, s_ref, 0, CKC_CHECK_OP, &err) == CKC_OK, "reference: %s",
          err.message);
    for (intptr_t k = 0; k < THREADS; k++) {
        CHECK(pthread_create(&threads[k], NULL, op_worker, (void *)k) == 0, "pthread_create");
    }
    CHECK(pthread_create(&threads[THREADS], NULL, watchdog_victim, NULL) == 0, "pthread_create");
    for (int k = 0; k <= THREADS; k++) {
        pthread_join(threads[k], NULL);
    }
    ckc_flight_mirror_now();
    ckc_flight_flush();
    {
        int hangs = 0;
        int completed = 0;
        for (uint64_t seq = 1; seq <= ring.seq; seq++) {
            const ckc_flight_record *r = ckc_flight_find(seq);
            CHECK(r != NULL, "record %llu missing", (unsigned long long)seq);
            hangs += r->state == CKC_FLIGHT_HANG && strcmp(r->op, "watchdog_victim") == 0;
            completed += ckc_flight_is_done(r, seq) && strcmp(r->op, "quantize_and_rotate_rowwise") == 0;
        }
        CHECK(hangs == 1, "the hung op's record is not marked hang-suspected (%d)", hangs);
        CHECK(completed == 1 + THREADS * 4, "%d of %d ops completed", completed, 1 + THREADS * 4);
        CHECK(ckc_flight_first_incomplete(0x1000, 0) == NULL, "a record of a healthy stream is incomplete");
    }
    ckc_emu_reset();
    printf("OK\n");
    return 0;
}
