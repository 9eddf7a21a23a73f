/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU kernels of _C as a plain C program (no Python), for running the Windows
 * build under Wine and comparing it with the same program built natively
 * (tools/windows/check.py).  On fixed pseudo-random inputs with tails (rows and
 * columns that are not multiples of the vector width, the NVFP4 block or the
 * thread split), it runs the int8 row-wise and tensor-wise quantizers, ConvRot
 * (the quantizer with the rotation, and the rotation alone), int8 dequantization
 * (with the rotation and the embedding's row index), NVFP4 quantization (padded,
 * rotated) and dequantization, and the thread pool (several callers at once).
 *
 *   cpu_kernels_test [--isa baseline|avx2|avx512] [--threads N]
 *   cpu_kernels_test --list-isas
 *
 * Prints one line per case: its name and the FNV-1a 64 digest of its output bytes,
 * then "OK".  Every case runs on 1 and on N threads (default 4); a difference
 * between the two is a failure (exit 1), as is an unknown or unsupported ISA (exit 2).
 * Every ISA must print the same lines: the vector kernels give the baseline's bits. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/status.h"
#include "cpu/cpu.h"
#include "cpu/kernels.h"
#include "cpu/parallel.h"
#include "math/float_bits.h"
#include "math/nvfp4.h"
#include "platform/threads.h"

#define MAX_OUTPUTS 3

/* ---- deterministic inputs ---- */

static uint64_t rng = 0x243F6A8885A308D3ull; /* reset per case: each case's inputs stand alone */

static uint64_t
next_u64(void) /* splitmix64 */
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float
uniform(void) /* [0, 1), 24 random bits: exact in float */
{
    return (float)(next_u64() >> 40) * 0x1.0p-24f;
}

static void
store(void *buf, ckc_float_kind kind, int64_t i, float v)
{
    if (kind == CKC_F32) {
        ((float *)buf)[i] = v;
    } else {
        ((uint16_t *)buf)[i] = kind == CKC_BF16 ? ckc_f32_to_bf16(v) : ckc_f32_to_f16(v);
    }
}

/* rows x cols values in [-3, 3) scaled per row by 2^(r % 9 - 4) (rows of very
 * different ranges), a few exact zeros, and row 5 all zeros (the scale's floor). */
static void *
make_input(ckc_float_kind kind, int64_t rows, int64_t cols)
{
    void *x = malloc((size_t)(rows * cols * ckc_kind_size(kind)));
    if (x == NULL) {
        fprintf(stderr, "FAIL: out of memory\n");
        exit(1);
    }
    for (int64_t r = 0; r < rows; r++) {
        const float row_scale = (float)(1 << (r % 9)) / 16.0f;
        for (int64_t c = 0; c < cols; c++) {
            float v = (uniform() * 6.0f - 3.0f) * row_scale;
            if (r == 5 || next_u64() % 31 == 0) {
                v = 0.0f;
            }
            store(x, kind, r * cols + c, v);
        }
    }
    return x;
}

/* Noise for stochastic rounding: uniform [0, 1) in the element type (a value that
 * rounds up to 1 is taken as 0, as it would wrap). */
static void *
make_noise(ckc_float_kind kind, int64_t n)
{
    void *x = malloc((size_t)(n * ckc_kind_size(kind)));
    if (x == NULL) {
        fprintf(stderr, "FAIL: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++) {
        const float v = ckc_round_to_kind(uniform(), kind);
        store(x, kind, i, v < 1.0f ? v : 0.0f);
    }
    return x;
}

/* ---- outputs, digests, the two runs ---- */

typedef struct {
    void *p[MAX_OUTPUTS];
    size_t size[MAX_OUTPUTS];
    int count;
} outputs;

static void
add_output(outputs *o, size_t size)
{
    o->p[o->count] = malloc(size);
    o->size[o->count] = size;
    if (o->p[o->count] == NULL) {
        fprintf(stderr, "FAIL: out of memory\n");
        exit(1);
    }
    o->count++;
}

/* Every output byte set to one value first, so bytes a kernel leaves unwritten
 * read the same in every run and still differ from what it would write. */
static void
poison(outputs *o)
{
    for (int i = 0; i < o->count; i++) {
        memset(o->p[i], 0xA5, o->size[i]);
    }
}

static uint64_t
fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ b[i]) * 0x100000001B3ull;
    }
    return h;
}

static void
check_status(const char *name, ckc_status s, const ckc_error *err)
{
    if (s != CKC_OK) {
        fprintf(stderr, "FAIL %s: status %d: %s\n", name, (int)s, err->message);
        exit(1);
    }
}

/* A case: fills its outputs from its inputs on nthreads threads. */
typedef ckc_status (*case_fn)(void *ctx, outputs *o, int nthreads, ckc_error *err);

static int threads_n = 4;

/* Runs a case on 1 thread and on threads_n, fails if they differ, prints the digest.
 * The outputs keep the second run's bytes (free_outputs). */
static void
run_case(const char *name, case_fn fn, void *ctx, outputs *o)
{
    ckc_error err;
    uint64_t h = 0xCBF29CE484222325ull;
    void *first[MAX_OUTPUTS];
    memset(&err, 0, sizeof err);
    poison(o);
    check_status(name, fn(ctx, o, 1, &err), &err);
    for (int i = 0; i < o->count; i++) {
        first[i] = malloc(o->size[i]);
        if (first[i] == NULL) {
            fprintf(stderr, "FAIL: out of memory\n");
            exit(1);
        }
        memcpy(first[i], o->p[i], o->size[i]);
    }
    poison(o);
    check_status(name, fn(ctx, o, threads_n, &err), &err);
    for (int i = 0; i < o->count; i++) {
        if (memcmp(first[i], o->p[i], o->size[i]) != 0) {
            fprintf(stderr, "FAIL %s: output %d differs between 1 and %d threads\n", name, i, threads_n);
            exit(1);
        }
        h = fnv1a(h, o->p[i], o->size[i]);
        free(first[i]);
    }
    printf("%-40s %016llx\n", name, (unsigned long long)h);
}

static void
free_outputs(outputs *o)
{
    for (int i = 0; i < o->count; i++) {
        free(o->p[i]);
    }
    o->count = 0;
}

/* ---- int8 quantizers (ConvRot: with a rotation group) ---- */

static ckc_status
rowwise(void *ctx, outputs *o, int nthreads, ckc_error *err)
{
    ckc_quantize_int8_rowwise_params p = *(ckc_quantize_int8_rowwise_params *)ctx;
    p.q = o->p[0];
    p.scale = o->p[1];
    return ckc_cpu()->quantize_int8_rowwise(&p, nthreads, err);
}

static void
case_rowwise(const char *name, ckc_float_kind kind, int64_t rows, int64_t cols, int64_t group, int noisy)
{
    ckc_quantize_int8_rowwise_params p;
    outputs o = {{NULL}, {0}, 0};
    rng = 1;
    memset(&p, 0, sizeof p);
    p.x = make_input(kind, rows, cols);
    p.kind = kind;
    p.rows = rows;
    p.cols = cols;
    p.group = group;
    p.noise = noisy ? make_noise(kind, rows * cols) : NULL;
    add_output(&o, (size_t)(rows * cols));
    add_output(&o, (size_t)rows * sizeof(float));
    run_case(name, rowwise, &p, &o);
    free_outputs(&o);
    free((void *)p.x);
    free((void *)p.noise);
}

static ckc_status
tensorwise(void *ctx, outputs *o, int nthreads, ckc_error *err)
{
    ckc_quantize_int8_tensorwise_params p = *(ckc_quantize_int8_tensorwise_params *)ctx;
    p.q = o->p[0];
    p.scale = o->p[1];
    if (!p.compute_scale) {
        *p.scale = 0.0123f;
    }
    return ckc_cpu()->quantize_int8_tensorwise(&p, nthreads, err);
}

static void
case_tensorwise(const char *name, ckc_float_kind kind, int64_t numel, int compute_scale, int noisy)
{
    ckc_quantize_int8_tensorwise_params p;
    outputs o = {{NULL}, {0}, 0};
    rng = 2;
    memset(&p, 0, sizeof p);
    p.x = make_input(kind, 1, numel);
    p.kind = kind;
    p.numel = numel;
    p.compute_scale = compute_scale;
    p.noise = noisy ? make_noise(kind, numel) : NULL;
    add_output(&o, (size_t)numel);
    add_output(&o, sizeof(float));
    run_case(name, tensorwise, &p, &o);
    free_outputs(&o);
    free((void *)p.x);
    free((void *)p.noise);
}

static ckc_status
hadamard(void *ctx, outputs *o, int nthreads, ckc_error *err)
{
    ckc_rotate_int8_convrot_weight_params p = *(ckc_rotate_int8_convrot_weight_params *)ctx;
    p.out = o->p[0];
    return ckc_cpu()->rotate_int8_convrot_weight(&p, nthreads, err);
}

static void
case_hadamard(const char *name, ckc_float_kind kind, int64_t rows, int64_t cols, int64_t group)
{
    ckc_rotate_int8_convrot_weight_params p;
    outputs o = {{NULL}, {0}, 0};
    rng = 3;
    memset(&p, 0, sizeof p);
    p.x = make_input(kind, rows, cols);
    p.kind = kind;
    p.rows = rows;
    p.cols = cols;
    p.group = group;
    add_output(&o, (size_t)(rows * cols * ckc_kind_size(kind)));
    run_case(name, hadamard, &p, &o);
    free_outputs(&o);
    free((void *)p.x);
}

/* ---- int8 dequantization ---- */

static ckc_status
dequant(void *ctx, outputs *o, int nthreads, ckc_error *err)
{
    ckc_dequantize_int8_convrot_weight_dtype_params p = *(ckc_dequantize_int8_convrot_weight_dtype_params *)ctx;
    p.out = o->p[0];
    return ckc_cpu()->dequantize_int8_convrot_weight_dtype(&p, nthreads, err);
}

/* q and scale from the row-wise quantizer's own output on this machine's inputs;
 * index_bits 32 or 64: an embedding of rows gathered from q (0: none). */
static void
case_dequant(const char *name, ckc_float_kind out_kind, int64_t rows, int64_t cols, int64_t group,
             ckc_scale_mode mode, int index_bits)
{
    const int64_t out_rows = index_bits ? 29 : rows;
    const int64_t n_scale = mode == CKC_SCALE_SCALAR ? 1 : mode == CKC_SCALE_PER_ROW ? rows : rows * cols;
    ckc_dequantize_int8_convrot_weight_dtype_params p;
    outputs o = {{NULL}, {0}, 0};
    int8_t *q = malloc((size_t)(rows * cols));
    float *scale = malloc((size_t)n_scale * sizeof(float));
    int64_t *index64 = malloc((size_t)out_rows * sizeof(int64_t));
    int32_t *index32 = malloc((size_t)out_rows * sizeof(int32_t));
    if (q == NULL || scale == NULL || index64 == NULL || index32 == NULL) {
        fprintf(stderr, "FAIL: out of memory\n");
        exit(1);
    }
    rng = 4;
    for (int64_t i = 0; i < rows * cols; i++) {
        q[i] = (int8_t)((int)(next_u64() % 255) - 127);
    }
    for (int64_t i = 0; i < n_scale; i++) {
        scale[i] = (uniform() + 0.01f) / 127.0f * (float)(1 << (i % 5));
    }
    for (int64_t r = 0; r < out_rows; r++) {
        index64[r] = (int64_t)(next_u64() % (uint64_t)rows);
        index32[r] = (int32_t)index64[r];
    }
    memset(&p, 0, sizeof p);
    p.q = q;
    p.scale = scale;
    p.scale_mode = mode;
    p.out_kind = out_kind;
    p.rows = out_rows;
    p.cols = cols;
    p.group = group;
    p.index = index_bits == 64 ? (const void *)index64 : index_bits == 32 ? (const void *)index32 : NULL;
    p.index_is_64 = index_bits == 64;
    p.q_rows = rows;
    add_output(&o, (size_t)(out_rows * cols * ckc_kind_size(out_kind)));
    run_case(name, dequant, &p, &o);
    free_outputs(&o);
    free(q);
    free(scale);
    free(index64);
    free(index32);
}

/* ---- NVFP4 ---- */

static int64_t
round_up16(int64_t v)
{
    return (v + 15) / 16 * 16;
}

static size_t
scales_size(int64_t rows, int64_t cols)
{
    return (size_t)(ckc_nvfp4_scale_rows(rows) * ckc_nvfp4_scale_cols(cols / CKC_NVFP4_BLOCK));
}

static ckc_status
quantize_nvfp4(void *ctx, outputs *o, int nthreads, ckc_error *err)
{
    ckc_quantize_nvfp4_params p = *(ckc_quantize_nvfp4_params *)ctx;
    p.qx = o->p[0];
    p.scales = o->p[1];
    return ckc_cpu()->quantize_nvfp4(&p, nthreads, err);
}

static ckc_status
dequantize_nvfp4(void *ctx, outputs *o, int nthreads, ckc_error *err)
{
    ckc_dequantize_nvfp4_params p = *(ckc_dequantize_nvfp4_params *)ctx;
    p.out = o->p[0];
    return ckc_cpu()->dequantize_nvfp4(&p, nthreads, err);
}

/* Quantizes x[rows, cols] (padded to 16 both ways: pad_16x), digests codes and
 * swizzled scales, then dequantizes them into out_kind and digests that. */
static void
case_nvfp4(const char *name, ckc_float_kind kind, int64_t rows, int64_t cols, int64_t group, int hi_first,
           ckc_float_kind out_kind)
{
    char dq_name[64];
    ckc_quantize_nvfp4_params p;
    ckc_dequantize_nvfp4_params d;
    outputs o = {{NULL}, {0}, 0};
    outputs dq = {{NULL}, {0}, 0};
    float amax = 0.0f;
    float per_tensor_scale;
    rng = 5;
    memset(&p, 0, sizeof p);
    p.x = make_input(kind, rows, cols);
    for (int64_t i = 0; i < rows * cols; i++) {
        const float v = ckc_kind_value(p.x, kind, i);
        amax = v > amax ? v : -v > amax ? -v : amax;
    }
    per_tensor_scale = amax / (6.0f * 448.0f);
    p.kind = kind;
    p.rows = rows;
    p.cols = cols;
    p.out_rows = round_up16(rows);
    p.out_cols = round_up16(cols);
    p.group = group;
    p.per_tensor_scale = &per_tensor_scale;
    p.hi_first = hi_first;
    add_output(&o, (size_t)(p.out_rows * p.out_cols / 2));
    add_output(&o, scales_size(p.out_rows, p.out_cols));
    run_case(name, quantize_nvfp4, &p, &o);

    memset(&d, 0, sizeof d);
    d.qx = o.p[0];
    d.per_tensor_scale = &per_tensor_scale;
    d.scales = o.p[1];
    d.out_kind = out_kind;
    d.rows = p.out_rows;
    d.cols = p.out_cols;
    d.hi_first = hi_first;
    add_output(&dq, (size_t)(d.rows * d.cols * ckc_kind_size(out_kind)));
    snprintf(dq_name, sizeof dq_name, "%s/dequant", name);
    run_case(dq_name, dequantize_nvfp4, &d, &dq);
    free_outputs(&dq);
    free_outputs(&o);
    free((void *)p.x);
}

/* ---- the thread pool ---- */

typedef struct {
    uint32_t *out;
    int64_t n;
    uint32_t salt;
} fill_job;

static void
fill_range(void *ctx, int64_t begin, int64_t end, int worker)
{
    fill_job *job = ctx;
    (void)worker;
    for (int64_t i = begin; i < end; i++) {
        /* += : an index run twice or never shows in the output */
        job->out[i] += (uint32_t)(i * 2654435761u) ^ job->salt;
    }
}

typedef struct {
    fill_job job;
    int nthreads;
    ckc_mutex *lock;
    ckc_cond *done;
    int *running;
} caller;

/* One of several callers of ckc_parallel_for at once, on a thread of its own. */
static void
caller_main(void *arg)
{
    caller *c = arg;
    for (int round = 0; round < 20; round++) {
        ckc_parallel_for(c->job.n, 97, c->nthreads, fill_range, &c->job);
    }
    ckc_mutex_lock(c->lock);
    (*c->running)--;
    ckc_cond_broadcast(c->done);
    ckc_mutex_unlock(c->lock);
}

#define CALLERS 4

typedef struct {
    int64_t n;
} pool_case;

static ckc_status
pool(void *ctx, outputs *o, int nthreads, ckc_error *err)
{
    const pool_case *pc = ctx;
    static ckc_mutex lock = CKC_MUTEX_INIT;
    ckc_cond done;
    caller callers[CALLERS];
    int running = CALLERS;
    ckc_cond_init(&done);
    for (int k = 0; k < CALLERS; k++) {
        uint32_t *out = (uint32_t *)o->p[0] + k * pc->n;
        memset(out, 0, (size_t)pc->n * sizeof(uint32_t));
        callers[k].job.out = out;
        callers[k].job.n = pc->n - 13 * k; /* a different tail each */
        callers[k].job.salt = 0x9E3779B9u * (uint32_t)(k + 1);
        callers[k].nthreads = nthreads + k;
        callers[k].lock = &lock;
        callers[k].done = &done;
        callers[k].running = &running;
    }
    for (int k = 0; k < CALLERS; k++) {
        if (ckc_thread_start(caller_main, &callers[k]) != 0) {
            return CKC_FAIL(err, CKC_ERR_RUNTIME, "could not start caller thread %d", k);
        }
    }
    ckc_mutex_lock(&lock);
    while (running > 0) {
        ckc_cond_wait(&done, &lock);
    }
    ckc_mutex_unlock(&lock);
    return CKC_OK;
}

static void
case_pool(const char *name, int64_t n)
{
    pool_case pc = {n};
    outputs o = {{NULL}, {0}, 0};
    add_output(&o, (size_t)(CALLERS * n) * sizeof(uint32_t));
    run_case(name, pool, &pc, &o);
    free_outputs(&o);
}

/* ---- main ---- */

static int
usage(void)
{
    fprintf(stderr, "usage: cpu_kernels_test [--isa NAME] [--threads N] | --list-isas\n");
    return 2;
}

int
main(int argc, char **argv)
{
    const char *isa = NULL;
    ckc_parallel_init();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list-isas") == 0) {
            for (const char *const *a = ckc_cpu_available(); *a != NULL; a++) {
                printf("%s%s", a == ckc_cpu_available() ? "" : " ", *a);
            }
            printf("\n");
            return 0;
        } else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
            isa = argv[++i];
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads_n = atoi(argv[++i]);
        } else {
            return usage();
        }
    }
    if (threads_n < 2) {
        fprintf(stderr, "--threads: at least 2 (the cases compare 1 thread with N)\n");
        return 2;
    }
    if (!ckc_cpu_select(isa != NULL ? isa : ckc_cpu_available()[0])) {
        fprintf(stderr, "ISA %s: unknown, or not supported by this CPU or build\n", isa);
        return 2;
    }

    case_rowwise("int8_rowwise/f32/37x203", CKC_F32, 37, 203, 0, 0);
    case_rowwise("int8_rowwise/f16/37x203", CKC_F16, 37, 203, 0, 0);
    case_rowwise("int8_rowwise/bf16/37x203", CKC_BF16, 37, 203, 0, 0);
    case_rowwise("int8_rowwise/bf16/3x7", CKC_BF16, 3, 7, 0, 0);
    case_rowwise("int8_rowwise/bf16/37x203/noise", CKC_BF16, 37, 203, 0, 1);
    case_rowwise("int8_rowwise/f32/37x203/noise", CKC_F32, 37, 203, 0, 1);
    case_tensorwise("int8_tensorwise/bf16/1001", CKC_BF16, 1001, 1, 0);
    case_tensorwise("int8_tensorwise/f32/1001", CKC_F32, 1001, 1, 0);
    case_tensorwise("int8_tensorwise/f16/1001/given_scale", CKC_F16, 1001, 0, 0);
    case_tensorwise("int8_tensorwise/bf16/1001/noise", CKC_BF16, 1001, 1, 1);
    case_rowwise("convrot_quant/bf16/37x192/g64", CKC_BF16, 37, 192, 64, 0);
    case_rowwise("convrot_quant/f16/37x80/g16", CKC_F16, 37, 80, 16, 0);
    case_rowwise("convrot_quant/f32/19x512/g256", CKC_F32, 19, 512, 256, 0);
    case_rowwise("convrot_quant/bf16/13x12/g4", CKC_BF16, 13, 12, 4, 0);
    case_rowwise("convrot_quant/bf16/37x192/g16/noise", CKC_BF16, 37, 192, 16, 1);
    case_hadamard("hadamard_rows/bf16/37x192/g64", CKC_BF16, 37, 192, 64);
    case_hadamard("hadamard_rows/f32/37x48/g16", CKC_F32, 37, 48, 16);
    case_hadamard("hadamard_rows/f16/7x2048/g1024", CKC_F16, 7, 2048, 1024);
    case_dequant("int8_dequant/bf16/37x203/row", CKC_BF16, 37, 203, 0, CKC_SCALE_PER_ROW, 0);
    case_dequant("int8_dequant/f32/37x203/scalar", CKC_F32, 37, 203, 0, CKC_SCALE_SCALAR, 0);
    case_dequant("int8_dequant/f16/37x203/full", CKC_F16, 37, 203, 0, CKC_SCALE_FULL, 0);
    case_dequant("int8_dequant/bf16/37x192/row/g64", CKC_BF16, 37, 192, 64, CKC_SCALE_PER_ROW, 0);
    case_dequant("int8_dequant/f32/37x80/full/g16", CKC_F32, 37, 80, 16, CKC_SCALE_FULL, 0);
    case_dequant("int8_embedding/bf16/37x203/i32", CKC_BF16, 37, 203, 0, CKC_SCALE_PER_ROW, 32);
    case_dequant("int8_embedding/f16/37x192/i64/g64", CKC_F16, 37, 192, 64, CKC_SCALE_PER_ROW, 64);
    case_nvfp4("nvfp4/bf16/37x80", CKC_BF16, 37, 80, 0, 0, CKC_BF16);
    case_nvfp4("nvfp4/f32/37x70/pad", CKC_F32, 37, 70, 0, 1, CKC_F32);
    case_nvfp4("nvfp4/f16/130x208", CKC_F16, 130, 208, 0, 0, CKC_F16);
    case_nvfp4("nvfp4/bf16/37x64/g16", CKC_BF16, 37, 64, 16, 0, CKC_F32);
    case_nvfp4("nvfp4/bf16/21x256/g64", CKC_BF16, 21, 256, 64, 1, CKC_BF16);
    case_nvfp4("nvfp4/f32/9x512/g256", CKC_F32, 9, 512, 256, 0, CKC_BF16);
    case_pool("parallel_for/4_callers/10007", 10007);
    printf("OK\n");
    return 0;
}
