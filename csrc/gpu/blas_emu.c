/* SPDX-License-Identifier: Apache-2.0 */
/* The GEMM seam on the emulated device: plain C references of what cuBLASLt
 * computes, independent of the CPU kernels (so the emulated int8_linear checks
 * the CPU path's GEMM against another one): the int8 GEMM a triple loop in
 * int32 (exact: the sums do not depend on their order), the NVFP4 GEMM a
 * dequantize-and-accumulate in float32.  Device memory is host memory; each
 * GEMM is stream work of the emulated device (run when issued, or recorded
 * into a CUDA-graph capture of the stream).
 *
 * The int8 GEMM goes through blas_plan.c as on a GPU: the caller's workspace
 * (what the filter may take), the plan cache, and the algorithm filter run
 * on a heuristic answer made up here (by default one to skip for split-K, one
 * needing workspace, one without: the filter must take the second); the tests
 * set others (ckc_blas_emu_set_heuristic).  Where several candidates pass the
 * filter, blas_tune.c times them at the first GEMM of a shape class: here a
 * candidate's "time" is what the tests set (ckc_blas_emu_set_timings; by
 * default 1 us each, so the heuristic's order decides, as before timing). */
#if defined(CKC_EMULATED)

#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "blas_plan.h"
#include "blas_tune.h"
#include "gpu.h"
#include "math/float_bits.h"
#include "math/mxfp8.h"
#include "math/nvfp4.h"

void
ckc_blas_init(void)
{
}

void
ckc_blas_set_search_dirs(const char *dirs)
{
    (void)dirs;
}

static ckc_blas_candidate emu_heuristic[CKC_BLAS_EMU_CANDIDATES] = {
    {1, (size_t)1 << 20, 4, 1}, /* split K, with a reduction: skipped */
    {1, (size_t)2 << 20, 1, 0}, /* workspace, no split: taken */
    {1, 0, 1, 0},
};
static int emu_heuristic_count = 3;
/* us per candidate when timed (a negative one: the candidate fails to run) */
static float emu_timings[CKC_BLAS_EMU_CANDIDATES];
static int emu_timing_count;
/* The GEMMs a real timing runs per candidate (blas_cublaslt.c: a warm-up, then LT_TIMED_RUNS). */
#define EMU_TIMED_RUNS 6
static const ckc_blas_identity emu_identity = {"emulated device", 0, 0};
static int emu_capturing;
static int emu_bug; /* CKC_BLAS_EMU_BUG_*: tests only */

void
ckc_blas_emu_set_heuristic(const ckc_blas_candidate *c, int count)
{
    emu_heuristic_count = count < CKC_BLAS_EMU_CANDIDATES ? count : CKC_BLAS_EMU_CANDIDATES;
    memcpy(emu_heuristic, c, (size_t)emu_heuristic_count * sizeof *c);
}

void
ckc_blas_emu_set_timings(const float *us, int count)
{
    emu_timing_count = count < CKC_BLAS_EMU_CANDIDATES ? count : CKC_BLAS_EMU_CANDIDATES;
    memcpy(emu_timings, us, (size_t)emu_timing_count * sizeof *us);
}

void
ckc_blas_emu_set_capturing(int capturing)
{
    emu_capturing = capturing;
}

void
ckc_blas_emu_plant(int bug)
{
    emu_bug = bug;
}

/* A candidate's time, as the tests set it (blas_tune.h's time_one). */
static int
emu_time_one(void *ctx, int i, float *us)
{
    (void)ctx;
    *us = i < emu_timing_count ? emu_timings[i] : 1.0f;
    ckc_blas_count_timed(EMU_TIMED_RUNS);
    return *us < 0.0f;
}

/* The eligible candidates of the plan being made (ckc_blas_backend's ctx). */
typedef struct {
    const int *eligible;
    int n;
} emu_pick_ctx;

/* An emulated algorithm: the candidate's index in the first bytes. */
static void
emu_algo_of(void *ctx, int i, unsigned char algo[CKC_BLAS_ALGO_BYTES])
{
    (void)ctx;
    memset(algo, 0, CKC_BLAS_ALGO_BYTES);
    memcpy(algo, &i, sizeof i);
}

/* The emulated counterpart of cublasLtMatmulAlgoCheck: a known candidate
 * serves if it is eligible for this problem. */
static int
emu_accepts(void *ctx, const unsigned char algo[CKC_BLAS_ALGO_BYTES], int chosen_at)
{
    const emu_pick_ctx *c = (const emu_pick_ctx *)ctx;
    int index;
    (void)chosen_at;
    memcpy(&index, algo, sizeof index);
    for (int j = 0; j < c->n; j++) {
        if (c->eligible[j] == index) {
            return index;
        }
    }
    return -1;
}

/* An emulated plan: the index of the candidate taken. */
static ckc_status
emu_plan(const ckc_int8_gemm_params *p, const ckc_exec *exec, ckc_blas_entry **entry, ckc_error *err)
{
    const size_t ws_bytes = exec->workspace != NULL ? exec->workspace_bytes : 0;
    ckc_blas_key key;
    int *choice;
    int eligible[CKC_BLAS_EMU_CANDIDATES];
    int n;
    int final = 1;
    uint64_t capture;
    const int capturing = emu_capturing || ckc_emu_capture_status(exec->stream, &capture);
    ckc_blas_note_workspace(ws_bytes);
    key = ckc_blas_int8_key(p, exec->device_index, ws_bytes);
    *entry = ckc_blas_find(&key);
    if (*entry != NULL) {
        return CKC_OK;
    }
    n = ckc_blas_eligible(emu_heuristic, emu_heuristic_count, ws_bytes, eligible);
    if (n == 0) {
        ckc_blas_note_choice(-1);
        return CKC_FAIL(err, CKC_ERR_RUNTIME, "emulated cublasLtMatmulAlgoGetHeuristic offered no algorithm without "
                        "split-K or a reduction scheme (%d candidates)", emu_heuristic_count);
    }
    choice = (int *)malloc(sizeof *choice);
    if (choice == NULL) {
        return CKC_FAIL(err, CKC_ERR_MEMORY, "emulated plan: out of memory");
    }
    {
        emu_pick_ctx ctx = {eligible, n};
        const ckc_blas_backend backend = {emu_algo_of, emu_accepts, emu_time_one, &ctx};
        unsigned char algo[CKC_BLAS_ALGO_BYTES];
        *choice = ckc_blas_pick(&emu_identity, &key, eligible, n, capturing, &backend, algo, &final);
    }
    *entry = final ? ckc_blas_insert(&key, choice, free) : NULL;
    if (*entry == NULL) {
        free(choice); /* used once */
    }
    return CKC_OK;
}

/* The int8 GEMM when the stream runs it. */
static void
run_int8_gemm(const void *ctx)
{
    const ckc_int8_gemm_params *p = (const ckc_int8_gemm_params *)ctx;
    /* the planted bug: each sum misses its last term (an off-by-one a GEMM could have) */
    const int64_t k = emu_bug == CKC_BLAS_EMU_BUG_LAST_TERM && p->k > 0 ? p->k - 1 : p->k;
    for (int64_t i = 0; i < p->m; i++) {
        for (int64_t j = 0; j < p->n; j++) {
            int64_t acc = 0; /* summed in 64 bits: no signed overflow on the way, whatever k */
            for (int64_t t = 0; t < k; t++) {
                acc += (int32_t)p->a[i * p->lda + t] * (int32_t)p->b[j * p->ldb + t];
            }
            p->c[i * p->ldc + j] = (int32_t)acc;
        }
    }
}

/* Issues run(ctx) (ctx_bytes of parameters, copied) on the caller's stream. */
static ckc_status
stream_work(void (*run)(const void *ctx), const void *ctx, size_t ctx_bytes, const ckc_exec *exec, ckc_error *err)
{
    char why[400];
    const int code = ckc_emu_stream_work("cublasLtMatmul", exec->stream, run, ctx, ctx_bytes, why, sizeof why);
    if (code != CKC_EMU_OK) {
        return CKC_FAIL(err, code == CKC_EMU_STICKY ? CKC_ERR_DEVICE : CKC_ERR_LAUNCH, "%s", why);
    }
    return CKC_OK;
}

ckc_status
ckc_blas_int8_gemm(const ckc_int8_gemm_params *p, const ckc_exec *exec, ckc_error *err)
{
    ckc_blas_entry *entry = NULL;
    ckc_status status;
    /* What cuBLASLt's IMMA kernels accept (blas_cublaslt.c): the launcher must pad. */
    if (p->k % 4 != 0 || p->n % 4 != 0 || p->lda % 4 != 0 || p->ldb % 4 != 0 || p->ldc % 4 != 0 ||
        (uintptr_t)p->a % 4 != 0 || (uintptr_t)p->b % 4 != 0 || (uintptr_t)p->c % 4 != 0) {
        return CKC_FAIL(err, CKC_ERR_RUNTIME,
                        "emulated cublasLtMatmul: int8 IMMA needs k, n and leading dimensions multiples of 4 and "
                        "4-byte aligned pointers (k %lld, n %lld, lda %lld, ldb %lld, ldc %lld)",
                        (long long)p->k, (long long)p->n, (long long)p->lda, (long long)p->ldb, (long long)p->ldc);
    }
    CKC_TRY(emu_plan(p, exec, &entry, err));
    status = stream_work(run_int8_gemm, p, sizeof *p, exec, err);
    if (entry != NULL) {
        ckc_blas_release(entry);
    }
    return status;
}

/* Values of one row of NVFP4 codes times their block scales (exact in float32:
 * a 2-bit by 3-bit significand product). */
static void
decode_nvfp4_row(const uint8_t *codes, const uint8_t *scales, int64_t r, int64_t k, float *v)
{
    const int64_t scale_cols = k / CKC_NVFP4_BLOCK;
    for (int64_t i = 0; i < k / 2; i++) {
        const float s = ckc_e4m3_to_f32(scales[ckc_nvfp4_scale_offset(r, (2 * i) / CKC_NVFP4_BLOCK, scale_cols)]);
        /* Either nibble order gives the same GEMM as long as a and b share it: a
         * pair's two values swap in both operands, inside one block. */
        v[2 * i] = ckc_e2m1_to_f32(ckc_nvfp4_unpack_even(codes[r * (k / 2) + i], 1)) * s;
        v[2 * i + 1] = ckc_e2m1_to_f32(ckc_nvfp4_unpack_odd(codes[r * (k / 2) + i], 1)) * s;
    }
}

/* Values of one row of MXFP8 codes times their E8M0 block scales (math/mxfp8.h). */
static void
decode_mxfp8_row(const uint8_t *codes, const uint8_t *scales, int64_t r, int64_t k, float *v)
{
    const int64_t scale_cols = k / CKC_MXFP8_BLOCK;
    for (int64_t i = 0; i < k; i++) {
        const float s = ckc_e8m0_to_f32(scales[ckc_nvfp4_scale_offset(r, i / CKC_MXFP8_BLOCK, scale_cols)]);
        v[i] = ckc_mxfp8_decoded(codes[r * k + i], s);
    }
}

/* A block-scaled GEMM as the reference computes it: out = alpha * dec(a) . dec(b)^T + bias
 * (alpha 1 without alpha_beta), each row decoded by `decode`, summed in float32 in k's order. */
typedef struct {
    ckc_scaled_mm_nvfp4_params p;
    void (*decode)(const uint8_t *codes, const uint8_t *scales, int64_t r, int64_t k, float *v);
} scaled_gemm_ref;

/* The GEMM when the stream runs it (its memory was checked to be had when it
 * was issued; a failure now leaves the output unwritten).  alpha is read then:
 * a CUDA-graph replay reads it anew. */
static void
run_scaled_gemm(const void *ctx)
{
    const scaled_gemm_ref *g = (const scaled_gemm_ref *)ctx;
    const ckc_scaled_mm_nvfp4_params *p = &g->p;
    /* b's values, a's current row and the bias, in float32. */
    float *vb = (float *)malloc((size_t)(p->n * p->k + p->k + p->n) * sizeof(float));
    float *va = vb + p->n * p->k;
    float *bias = va + p->k;
    const float alpha = p->alpha_beta != NULL ? p->alpha_beta[0] : 1.0f;
    if (vb == NULL) {
        return;
    }
    for (int64_t j = 0; j < p->n; j++) {
        g->decode(p->b, p->scale_b, j, p->k, vb + j * p->k);
        bias[j] = p->bias != NULL ? ckc_kind_value(p->bias, p->out_kind, j) : 0.0f;
    }
    for (int64_t i = 0; i < p->m; i++) {
        g->decode(p->a, p->scale_a, i, p->k, va);
        for (int64_t j = 0; j < p->n; j++) {
            float acc = 0.0f;
            for (int64_t t = 0; t < p->k; t++) {
                acc += va[t] * vb[j * p->k + t];
            }
            ckc_kind_store(p->out, p->out_kind, i * p->n + j, alpha * acc + bias[j]);
        }
    }
    free(vb);
}

static ckc_status
scaled_gemm(const scaled_gemm_ref *g, const char *name, const ckc_exec *exec, ckc_error *err)
{
    const size_t floats = (size_t)(g->p.n * g->p.k + g->p.k + g->p.n);
    void *probe = malloc(floats * sizeof(float));
    if (probe == NULL) {
        return CKC_FAIL(err, CKC_ERR_MEMORY, "emulated %s GEMM: cannot allocate %zu floats", name, floats);
    }
    free(probe);
    return stream_work(run_scaled_gemm, g, sizeof *g, exec, err);
}

ckc_status
ckc_blas_nvfp4_gemm(const ckc_scaled_mm_nvfp4_params *p, const ckc_exec *exec, ckc_error *err)
{
    scaled_gemm_ref g;
    g.p = *p;
    g.decode = decode_nvfp4_row;
    return scaled_gemm(&g, "NVFP4", exec, err);
}

ckc_status
ckc_blas_mxfp8_gemm(const ckc_scaled_mm_mxfp8_params *p, const ckc_exec *exec, ckc_error *err)
{
    scaled_gemm_ref g;
    g.p = *p;
    g.decode = decode_mxfp8_row;
    return scaled_gemm(&g, "MXFP8", exec, err);
}

#endif /* CKC_EMULATED */
