/* SPDX-License-Identifier: Apache-2.0 */
/* The GEMM seam on cuBLASLt, loaded at first use (dlopen / LoadLibrary), so
 * `import comfy_kitchen_c` never depends on it.  Search order: a cuBLASLt that
 * the process already loaded (torch usually has), the sonames on the loader's
 * path, the directories the Python layer passes (torch's nvidia/cu13/lib,
 * nvidia/cublas/lib), CUDA_HOME and the system's CUDA.  The error for a missing
 * library names every place searched.
 *
 * The few declarations used are written here (values from cublasLt.h of CUDA
 * 12.8 and 13, identical in both), so the build needs no cuBLAS headers.
 *
 * What is shared with the emulated device lives in blas_plan.c: the filter
 * (the heuristic's order, no split-K, no reduction scheme: no blocks that
 * spin-wait on each other's partial sums; workspace allowed), the plan cache
 * (the int8 GEMM's descriptors and algorithm per problem, device included)
 * and the workspaces per (device, stream), made before any CUDA-graph capture
 * can need one.  The int8 GEMM's algorithm is chosen by timing the eligible
 * candidates once per shape class (blas_tune.h).  The int8 GEMM then costs the host one cublasLtMatmul per
 * call.  The NVFP4 GEMM caches its algorithm only: its descriptor carries the
 * call's scale and bias pointers. */
#if defined(CKC_WITH_CUDA)

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "blas_load.h"
#include "blas_plan.h"
#include "blas_tune.h"
#include "cuda_driver.h"
#include "gpu.h"
#include "platform/library.h"
#include "platform/mapped_file.h"
#include "platform/threads.h"

/* ---- cuBLASLt declarations (cublasLt.h, cublas_api.h, library_types.h) ---- */

typedef int lt_status; /* cublasStatus_t; 0 is success */
typedef void *lt_handle;
typedef void *lt_desc;
typedef void *lt_layout;
typedef void *lt_pref;
typedef struct {
    uint64_t data[8];
} lt_algo;
typedef struct {
    lt_algo algo;
    size_t workspace_size;
    lt_status state;
    float waves;
    int reserved[4];
} lt_heuristic;

enum {
    LT_COMPUTE_32F = 68, /* cublasComputeType_t */
    LT_COMPUTE_32I = 72,
    LT_R_32F = 0,        /* cudaDataType_t */
    LT_R_16F = 2,
    LT_R_8I = 3,
    LT_R_32I = 10,
    LT_R_16BF = 14,
    LT_R_4F_E2M1 = 33,
    LT_R_8F_E4M3 = 28,
    LT_OP_N = 0,
    LT_OP_T = 1,
    LT_DESC_POINTER_MODE = 2, /* cublasLtMatmulDescAttributes_t */
    LT_DESC_TRANSA = 3,
    LT_DESC_TRANSB = 4,
    LT_DESC_EPILOGUE = 7,
    LT_DESC_BIAS_POINTER = 8,
    LT_DESC_A_SCALE_POINTER = 17,
    LT_DESC_B_SCALE_POINTER = 18,
    LT_DESC_BIAS_DATA_TYPE = 26,
    LT_DESC_A_SCALE_MODE = 31,
    LT_DESC_B_SCALE_MODE = 32,
    LT_POINTER_MODE_HOST = 0,
    LT_POINTER_MODE_DEVICE = 1,
    LT_EPILOGUE_BIAS = 4,
    LT_SCALE_VEC16_UE4M3 = 1,
    LT_SCALE_VEC32_UE8M0 = 2,
    LT_PREF_MAX_WORKSPACE_BYTES = 1, /* cublasLtMatmulPreferenceAttributes_t */
    LT_PREF_REDUCTION_SCHEME_MASK = 3,
    LT_PREF_MIN_ALIGNMENT_A = 5,
    LT_PREF_MIN_ALIGNMENT_B = 6,
    LT_PREF_MIN_ALIGNMENT_C = 7,
    LT_PREF_MIN_ALIGNMENT_D = 8,
    LT_REDUCTION_NONE = 0,
    LT_CONFIG_SPLITK_NUM = 2, /* cublasLtMatmulAlgoConfigAttributes_t */
    LT_CONFIG_REDUCTION_SCHEME = 3
};

/* X(name, return type, parameter list) for each function used. */
#define LT_FUNCTIONS(X)                                                                                       \
    X(cublasLtCreate, lt_status, (lt_handle *))                                                               \
    X(cublasLtGetVersion, size_t, (void))                                                                     \
    X(cublasLtMatmulDescCreate, lt_status, (lt_desc *, int, int))                                             \
    X(cublasLtMatmulDescDestroy, lt_status, (lt_desc))                                                        \
    X(cublasLtMatmulDescSetAttribute, lt_status, (lt_desc, int, const void *, size_t))                       \
    X(cublasLtMatrixLayoutCreate, lt_status, (lt_layout *, int, uint64_t, uint64_t, int64_t))                 \
    X(cublasLtMatrixLayoutDestroy, lt_status, (lt_layout))                                                    \
    X(cublasLtMatmulPreferenceCreate, lt_status, (lt_pref *))                                                 \
    X(cublasLtMatmulPreferenceDestroy, lt_status, (lt_pref))                                                  \
    X(cublasLtMatmulPreferenceSetAttribute, lt_status, (lt_pref, int, const void *, size_t))                 \
    X(cublasLtMatmulAlgoGetHeuristic, lt_status,                                                              \
      (lt_handle, lt_desc, lt_layout, lt_layout, lt_layout, lt_layout, lt_pref, int, lt_heuristic *, int *))  \
    X(cublasLtMatmulAlgoConfigGetAttribute, lt_status, (const lt_algo *, int, void *, size_t, size_t *))    \
    X(cublasLtMatmulAlgoCheck, lt_status,                                                                     \
      (lt_handle, lt_desc, lt_layout, lt_layout, lt_layout, lt_layout, const lt_algo *, lt_heuristic *))       \
    X(cublasLtMatmul, lt_status,                                                                              \
      (lt_handle, lt_desc, const void *, const void *, lt_layout, const void *, lt_layout, const void *,     \
       const void *, lt_layout, void *, lt_layout, const lt_algo *, void *, size_t, CUstream))

#define LT_FIELD(name, ret, params) ret(*name) params;
static struct {
    LT_FUNCTIONS(LT_FIELD)
} lt;

static ckc_mutex lt_lock;  /* loading and handles (blas_plan.c locks the rest) */
static int lt_loaded;
static char lt_load_error[2560];
static char lt_search_dirs[4096];

#define CKC_MAX_GPUS 64
static lt_handle lt_handles[CKC_MAX_GPUS];

void
ckc_blas_init(void)
{
    ckc_mutex_init(&lt_lock);
}

void
ckc_blas_set_search_dirs(const char *dirs)
{
    ckc_mutex_lock(&lt_lock);
    snprintf(lt_search_dirs, sizeof lt_search_dirs, "%s", dirs != NULL ? dirs : "");
    ckc_mutex_unlock(&lt_lock);
}

/* ---- loading (blas_load.c finds the library) ---- */

static ckc_status
lt_load(ckc_error *err)
{
    ckc_mutex_lock(&lt_lock);
    if (!lt_loaded && lt_load_error[0] == '\0') {
        char searched[2048] = "";
        void *lib = ckc_blas_find_library(lt_search_dirs, searched, sizeof searched);
        if (lib == NULL) {
            snprintf(lt_load_error, sizeof lt_load_error,
                     "cuBLASLt (CUDA 12 or 13) was not found; searched: %s. Install torch's CUDA libraries "
                     "(pip package nvidia-cublas) or the CUDA toolkit", searched);
        } else {
#define LT_BIND(name, ret, params)                                                                                   \
    if (lt_load_error[0] == '\0' && (*(void **)&lt.name = ckc_library_symbol(lib, #name)) == NULL) {                   \
        snprintf(lt_load_error, sizeof lt_load_error, "cuBLASLt has no symbol %s (version too old?)", #name); \
    }
            LT_FUNCTIONS(LT_BIND)
#undef LT_BIND
            lt_loaded = lt_load_error[0] == '\0';
        }
    }
    ckc_mutex_unlock(&lt_lock);
    if (!lt_loaded) {
        return CKC_FAIL(err, CKC_ERR_RUNTIME, "%s", lt_load_error);
    }
    return CKC_OK;
}

/* ---- checked calls ---- */

static const char *
lt_status_name(lt_status s)
{
    switch (s) {
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS error";
    }
}

/* Fails naming the call, the status, and where (the op is added by module/state.c). */
#define LT_TRY(err, call)                                                                                     \
    do {                                                                                                      \
        const lt_status ckc_lt_ = (call);                                                                     \
        if (ckc_lt_ != 0) {                                                                                   \
            return ckc_error_set((err), CKC_ERR_RUNTIME, __FILE__, __LINE__, __func__,                        \
                                 "%s failed: %s (%d) at %s:%d", #call, lt_status_name(ckc_lt_), ckc_lt_,       \
                                 __FILE__, __LINE__);                                                         \
        }                                                                                                     \
    } while (0)

/* A cuBLASLt call failed (status s): when the device holds a sticky fault (an
 * earlier kernel's: cuBLASLt answers EXECUTION_FAILED or INTERNAL_ERROR), that
 * fault, as CKC_ERR_DEVICE with the driver's error, so that the checks blame it
 * on the work that caused it; else cuBLASLt's own error.  The caller has
 * entered the stream's device. */
static ckc_status
lt_failed(ckc_error *err, uintptr_t stream, const char *call, lt_status s)
{
    const ckc_cuda_api *d = ckc_cuda_driver(NULL);
    const CUresult e = d != NULL ? d->cuStreamQuery((CUstream)stream) : CKC_CU_SUCCESS;
    if (e != CKC_CU_SUCCESS && e != CKC_CU_ERROR_NOT_READY && e != CKC_CU_ERROR_INVALID_VALUE &&
        !(e >= CKC_CU_CAPTURE_ERROR_FIRST && e <= CKC_CU_CAPTURE_ERROR_LAST)) {
        char text[300];
        ckc_cuda_error_text(e, text, sizeof text);
        CKC_FAIL(err, CKC_ERR_DEVICE, "%s failed (%s): the device holds an earlier fault: %s", call,
                 lt_status_name(s), text);
        ckc_cuda_error_text(e, err->device_error, sizeof err->device_error);
        return err->status;
    }
    return CKC_FAIL(err, CKC_ERR_RUNTIME, "%s failed: %s (%d)", call, lt_status_name(s), s);
}

/* ---- per-device handle, the caller's workspace ---- */

/* Whether work queued on stream is being captured into a CUDA graph (the
 * tuning then does not time: a capture forbids waiting): the driver's one
 * capture query (cuda_driver.c).  A failed query counts as a capture (nothing
 * is waited for); the GEMM's own call then meets the failure. */
static int
lt_capturing(uintptr_t stream)
{
    uint64_t capture_id;
    CUresult e;
    return ckc_cuda_stream_capturing(stream, &capture_id, &e) != 0;
}

/* The device's handle (made at its first GEMM), and the GEMM's workspace: the
 * caller's (exec: torch's allocator; the Python layer sizes it as comfy_kitchen
 * does, 32 MiB from Hopper on, else 4 MiB), or none, when the caller could not
 * have one: the heuristic then offers only algorithms that need none. */
static ckc_status
lt_context(const ckc_exec *exec, lt_handle *handle, void **ws, size_t *ws_bytes, ckc_error *err)
{
    const int device = exec->device_index;
    const ckc_cuda_api *d = ckc_cuda_driver(err);
    if (d == NULL) {
        return err->status;
    }
    if (device < 0 || device >= CKC_MAX_GPUS) {
        return CKC_FAIL(err, CKC_ERR_RUNTIME, "device index %d is beyond %d", device, CKC_MAX_GPUS);
    }
    CKC_TRY(lt_load(err));
    ckc_mutex_lock(&lt_lock);
    if (lt_handles[device] == NULL) {
        /* Once per device, perhaps inside a capture: in relaxed mode, so that what it
         * allocates neither fails the capture nor invalidates another thread's. */
        const int mode = ckc_cuda_capture_relax();
        const lt_status s = lt.cublasLtCreate(&lt_handles[device]);
        ckc_cuda_capture_restore(mode);
        if (s != 0) {
            lt_handles[device] = NULL;
            ckc_mutex_unlock(&lt_lock);
            return lt_failed(err, exec->stream, "cublasLtCreate", s);
        }
    }
    *handle = lt_handles[device];
    ckc_mutex_unlock(&lt_lock);
    *ws = exec->workspace;
    *ws_bytes = exec->workspace != NULL ? exec->workspace_bytes : 0;
    return CKC_OK;
}

/* ---- plans: descriptors and an algorithm ---- */

typedef struct {
    lt_desc desc;
    lt_layout a, b, c;
    lt_algo algo;
} lt_plan;

static void
lt_plan_free(void *p)
{
    lt_plan *pl = (lt_plan *)p;
    if (pl->c != NULL) (void)lt.cublasLtMatrixLayoutDestroy(pl->c);
    if (pl->b != NULL) (void)lt.cublasLtMatrixLayoutDestroy(pl->b);
    if (pl->a != NULL) (void)lt.cublasLtMatrixLayoutDestroy(pl->a);
    if (pl->desc != NULL) (void)lt.cublasLtMatmulDescDestroy(pl->desc);
    free(pl);
}

/* Both GEMMs multiply row-major [m, k] activations by [n, k] weights into a
 * row-major [m, n] output: in cuBLASLt's column-major view that is
 * C[n, m] = W^T[n, k] . X[k, m], "TN", so cuBLASLt's A is our weight and its B
 * our activation.  Creates the descriptor (compute and scale types, TN) and
 * the three layouts (leading dimensions ldw, ldx, ldc). */
static ckc_status
lt_describe_tn(lt_plan *pl, int compute, int scale_type, int in_type, int out_type, int64_t m, int64_t n, int64_t k,
               int64_t ldw, int64_t ldx, int64_t ldc, ckc_error *err)
{
    const int32_t trans_a = LT_OP_T, trans_b = LT_OP_N;
    LT_TRY(err, lt.cublasLtMatmulDescCreate(&pl->desc, compute, scale_type));
    LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_TRANSA, &trans_a, sizeof trans_a));
    LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_TRANSB, &trans_b, sizeof trans_b));
    LT_TRY(err, lt.cublasLtMatrixLayoutCreate(&pl->a, in_type, (uint64_t)k, (uint64_t)n, ldw));
    LT_TRY(err, lt.cublasLtMatrixLayoutCreate(&pl->b, in_type, (uint64_t)k, (uint64_t)m, ldx));
    LT_TRY(err, lt.cublasLtMatrixLayoutCreate(&pl->c, out_type, (uint64_t)n, (uint64_t)m, ldc));
    return CKC_OK;
}

#define LT_HEURISTICS 16

/* The heuristic's answers as the filter reads them. */
static ckc_status
lt_candidates(const lt_heuristic *r, int count, ckc_blas_candidate *c, ckc_error *err)
{
    for (int i = 0; i < count; i++) {
        size_t written = 0;
        c[i].ok = r[i].state == 0;
        c[i].workspace = r[i].workspace_size;
        c[i].split_k = 1;
        c[i].reduction = 0;
        LT_TRY(err, lt.cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, LT_CONFIG_SPLITK_NUM, &c[i].split_k,
                                                              sizeof c[i].split_k, &written));
        LT_TRY(err, lt.cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, LT_CONFIG_REDUCTION_SCHEME, &c[i].reduction,
                                                              sizeof c[i].reduction, &written));
    }
    return CKC_OK;
}

/* The heuristic's answers for pl's problem (pointers of these alignments,
 * ws_bytes of workspace): up to LT_HEURISTICS into results, *count of them. */
static ckc_status
lt_heuristics(lt_handle handle, lt_plan *pl, const uint32_t align[3], size_t ws_bytes, lt_pref pref,
              lt_heuristic *results, int *count, ckc_error *err)
{
    const uint64_t ws = ws_bytes;
    const uint32_t reduction = LT_REDUCTION_NONE;
    LT_TRY(err, lt.cublasLtMatmulPreferenceSetAttribute(pref, LT_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    LT_TRY(err, lt.cublasLtMatmulPreferenceSetAttribute(pref, LT_PREF_REDUCTION_SCHEME_MASK, &reduction,
                                                         sizeof reduction));
    LT_TRY(err, lt.cublasLtMatmulPreferenceSetAttribute(pref, LT_PREF_MIN_ALIGNMENT_A, &align[0], sizeof align[0]));
    LT_TRY(err, lt.cublasLtMatmulPreferenceSetAttribute(pref, LT_PREF_MIN_ALIGNMENT_B, &align[1], sizeof align[1]));
    LT_TRY(err, lt.cublasLtMatmulPreferenceSetAttribute(pref, LT_PREF_MIN_ALIGNMENT_C, &align[2], sizeof align[2]));
    LT_TRY(err, lt.cublasLtMatmulPreferenceSetAttribute(pref, LT_PREF_MIN_ALIGNMENT_D, &align[2], sizeof align[2]));
    LT_TRY(err, lt.cublasLtMatmulAlgoGetHeuristic(handle, pl->desc, pl->a, pl->b, pl->c, pl->c, pref, LT_HEURISTICS,
                                                   results, count));
    return CKC_OK;
}

/* Asks the heuristic and takes the filter's first choice into pl->algo. */
static ckc_status
lt_choose(lt_handle handle, lt_plan *pl, const uint32_t align[3], size_t ws_bytes, lt_pref pref, ckc_error *err)
{
    lt_heuristic results[LT_HEURISTICS];
    ckc_blas_candidate candidates[LT_HEURISTICS];
    int count = 0;
    int chosen;
    CKC_TRY(lt_heuristics(handle, pl, align, ws_bytes, pref, results, &count, err));
    CKC_TRY(lt_candidates(results, count, candidates, err));
    chosen = ckc_blas_choose(candidates, count, ws_bytes);
    if (chosen < 0) {
        return CKC_FAIL(err, CKC_ERR_RUNTIME,
                        "cublasLtMatmulAlgoGetHeuristic offered no algorithm without split-K or a reduction scheme "
                        "(%d candidates; cuBLASLt %zu)", count, lt.cublasLtGetVersion());
    }
    pl->algo = results[chosen].algo;
    return CKC_OK;
}

static ckc_status
lt_choose_with_pref(lt_handle handle, lt_plan *pl, const uint32_t align[3], size_t ws_bytes, ckc_error *err)
{
    lt_pref pref = NULL;
    ckc_status status;
    LT_TRY(err, lt.cublasLtMatmulPreferenceCreate(&pref));
    status = lt_choose(handle, pl, align, ws_bytes, pref, err);
    (void)lt.cublasLtMatmulPreferenceDestroy(pref);
    return status;
}

/* ---- the int8 GEMM's algorithm: timed once per shape class (blas_tune.h) ---- */

/* GEMMs timed per candidate after one warm-up run (which also weeds out a
 * candidate that fails to launch). */
#define LT_TIMED_RUNS 5
/* How long a timing waits for its GEMMs (and the work queued before them on
 * the stream) before it gives up timing: the wait polls, as checked.c's fences
 * do, so a hung stream never blocks the op here; the hang is then found where
 * the checks look for it.  Far above any GEMM's time (a 16k-cubed int8 GEMM
 * takes about 10 ms on a consumer GPU). */
#define LT_TIMING_WAIT_NS ((uint64_t)1000 * 1000 * 1000)

typedef struct {
    const ckc_cuda_api *d;
    lt_handle handle;
    const lt_plan *pl;
    const lt_heuristic *results;
    const ckc_int8_gemm_params *p;
    void *ws;
    size_t ws_bytes;
    int count; /* of results */
    CUstream stream;
    CUevent start, stop; /* made at the first timing */
    int abandoned; /* a wait timed out, or no events: no more candidates are timed */
} lt_timing;

static int
lt_run(const lt_timing *t, const lt_algo *algo)
{
    const int32_t alpha = 1, beta = 0;
    return lt.cublasLtMatmul(t->handle, t->pl->desc, &alpha, t->p->b, t->pl->a, t->p->a, t->pl->b, &beta, t->p->c,
                             t->pl->c, t->p->c, t->pl->c, algo, t->ws, t->ws_bytes, t->stream) != 0;
}

/* blas_tune.h's time_one: candidate i's time per GEMM on the caller's stream
 * (its output is the call's own, written again by the GEMM that follows). */
/* Waits for the stop event by polling, at most LT_TIMING_WAIT_NS: 0 when it
 * completed, else nonzero (a timeout also abandons the timing). */
static int
lt_wait(lt_timing *t)
{
    const uint64_t deadline = ckc_monotonic_ns() + LT_TIMING_WAIT_NS;
    for (;;) {
        const CUresult e = t->d->cuEventQuery(t->stop);
        if (e != CKC_CU_ERROR_NOT_READY) {
            return e != CKC_CU_SUCCESS;
        }
        if (ckc_monotonic_ns() > deadline) {
            t->abandoned = 1;
            return 1;
        }
        ckc_sleep_us(50);
    }
}

static int
lt_time_one(void *ctx, int i, float *us)
{
    lt_timing *t = (lt_timing *)ctx;
    const lt_algo *algo = &t->results[i].algo;
    float ms = 0.0f;
    if (t->start == NULL && !t->abandoned &&
        (t->d->cuEventCreate(&t->start, 0) != CKC_CU_SUCCESS || t->d->cuEventCreate(&t->stop, 0) != CKC_CU_SUCCESS)) {
        t->abandoned = 1;
    }
    if (t->abandoned || lt_run(t, algo) || t->d->cuEventRecord(t->start, t->stream) != CKC_CU_SUCCESS) {
        return 1;
    }
    for (int r = 0; r < LT_TIMED_RUNS; r++) {
        if (lt_run(t, algo)) {
            return 1;
        }
    }
    if (t->d->cuEventRecord(t->stop, t->stream) != CKC_CU_SUCCESS || lt_wait(t) ||
        t->d->cuEventElapsedTime(&ms, t->start, t->stop) != CKC_CU_SUCCESS) {
        return 1;
    }
    ckc_blas_count_timed(1 + LT_TIMED_RUNS);
    *us = ms * 1000.0f / LT_TIMED_RUNS;
    return 0;
}

/* What a cached choice is valid for: this GPU model, driver and cuBLASLt. */
static void
lt_identity(const ckc_cuda_api *d, int device, ckc_blas_identity *id)
{
    CUdevice dev = 0;
    memset(id, 0, sizeof *id);
    if (d->cuDeviceGet(&dev, device) != CKC_CU_SUCCESS ||
        d->cuDeviceGetName(id->gpu, (int)sizeof id->gpu - 1, dev) != CKC_CU_SUCCESS) {
        snprintf(id->gpu, sizeof id->gpu, "device %d", device);
    }
    for (char *c = id->gpu; *c != '\0'; c++) {
        *c = *c == '\t' || *c == '\n' ? ' ' : *c; /* the cache file's separators */
    }
    id->driver = d->version;
    id->library = lt.cublasLtGetVersion();
}

/* ckc_blas_backend's algo_of: candidate i of the heuristic's answer. */
static void
lt_algo_of(void *ctx, int i, unsigned char algo[CKC_BLAS_ALGO_BYTES])
{
    memcpy(algo, &((const lt_timing *)ctx)->results[i].algo, sizeof(lt_algo));
}

/* ckc_blas_backend's accepts: cuBLASLt checks a known algorithm for this exact
 * problem (and the stream's workspace). */
static int
lt_accepts(void *ctx, const unsigned char algo[CKC_BLAS_ALGO_BYTES], int chosen_at)
{
    const lt_timing *t = (const lt_timing *)ctx;
    lt_algo a;
    lt_heuristic checked;
    memcpy(&a, algo, sizeof a);
    if (lt.cublasLtMatmulAlgoCheck(t->handle, t->pl->desc, t->pl->a, t->pl->b, t->pl->c, t->pl->c, &a, &checked) != 0 ||
        checked.workspace_size > t->ws_bytes) {
        return -1;
    }
    for (int i = 0; i < t->count; i++) {
        if (memcmp(&t->results[i].algo, &a, sizeof a) == 0) {
            return i;
        }
    }
    return chosen_at;
}

/* ---- the int8 GEMM: a cached plan, one cublasLtMatmul per call ---- */

static ckc_status
int8_plan_new(lt_handle handle, const ckc_int8_gemm_params *p, const ckc_exec *exec, const ckc_blas_key *key, void *ws,
              size_t ws_bytes, lt_plan **out, int *final, ckc_error *err)
{
    const uint32_t align[3] = {ckc_blas_alignment(p->b), ckc_blas_alignment(p->a), ckc_blas_alignment(p->c)};
    lt_heuristic results[LT_HEURISTICS];
    ckc_blas_candidate candidates[LT_HEURISTICS];
    int eligible[LT_HEURISTICS];
    int count = 0, n = 0;
    lt_pref pref = NULL;
    lt_plan *pl = (lt_plan *)calloc(1, sizeof *pl);
    ckc_status status;
    if (pl == NULL) {
        return CKC_FAIL(err, CKC_ERR_MEMORY, "cannot allocate a cuBLASLt plan");
    }
    status = lt_describe_tn(pl, LT_COMPUTE_32I, LT_R_32I, LT_R_8I, LT_R_32I, p->m, p->n, p->k, p->ldb, p->lda, p->ldc,
                            err);
    if (status == CKC_OK && lt.cublasLtMatmulPreferenceCreate(&pref) != 0) {
        status = CKC_FAIL(err, CKC_ERR_RUNTIME, "cublasLtMatmulPreferenceCreate failed");
    }
    if (status == CKC_OK) {
        status = lt_heuristics(handle, pl, align, ws_bytes, pref, results, &count, err);
    }
    if (pref != NULL) {
        (void)lt.cublasLtMatmulPreferenceDestroy(pref);
    }
    if (status == CKC_OK) {
        status = lt_candidates(results, count, candidates, err);
    }
    if (status == CKC_OK && (n = ckc_blas_eligible(candidates, count, ws_bytes, eligible)) == 0) {
        ckc_blas_note_choice(-1);
        status = CKC_FAIL(err, CKC_ERR_RUNTIME,
                          "cublasLtMatmulAlgoGetHeuristic offered no algorithm without split-K or a reduction scheme "
                          "(%d candidates; cuBLASLt %zu)", count, lt.cublasLtGetVersion());
    }
    if (status == CKC_OK) {
        lt_timing t = {ckc_cuda_driver(err), handle, pl, results, p, ws, ws_bytes, count, (CUstream)exec->stream,
                       NULL, NULL, 0};
        const ckc_blas_backend backend = {lt_algo_of, lt_accepts, lt_time_one, &t};
        unsigned char algo[CKC_BLAS_ALGO_BYTES];
        ckc_blas_identity id;
        lt_identity(t.d, exec->device_index, &id);
        (void)ckc_blas_pick(&id, key, eligible, n, lt_capturing(exec->stream), &backend, algo, final);
        memcpy(&pl->algo, algo, sizeof pl->algo);
        if (t.start != NULL) {
            (void)t.d->cuEventDestroy(t.start);
        }
        if (t.stop != NULL) {
            (void)t.d->cuEventDestroy(t.stop);
        }
    }
    if (status != CKC_OK) {
        lt_plan_free(pl);
        return status;
    }
    *out = pl;
    return CKC_OK;
}

ckc_status
ckc_blas_int8_gemm(const ckc_int8_gemm_params *p, const ckc_exec *exec, ckc_error *err)
{
    const int32_t alpha = 1, beta = 0;
    lt_handle handle = NULL;
    void *ws = NULL;
    size_t ws_bytes = 0;
    lt_plan *pl = NULL;
    ckc_blas_key key;
    ckc_blas_entry *entry;
    lt_status s;
    CKC_TRY(lt_context(exec, &handle, &ws, &ws_bytes, err));
    ckc_blas_note_workspace(ws_bytes);
    key = ckc_blas_int8_key(p, exec->device_index, ws_bytes);
    entry = ckc_blas_find(&key);
    if (entry == NULL) {
        int final = 1;
        CKC_TRY(int8_plan_new(handle, p, exec, &key, ws, ws_bytes, &pl, &final, err));
        entry = final ? ckc_blas_insert(&key, pl, lt_plan_free) : NULL;
    }
    if (entry != NULL) {
        pl = (lt_plan *)ckc_blas_plan(entry);
    }
    s = lt.cublasLtMatmul(handle, pl->desc, &alpha, p->b, pl->a, p->a, pl->b, &beta, p->c, pl->c, p->c, pl->c,
                          &pl->algo, ws, ws_bytes, (CUstream)exec->stream);
    if (entry != NULL) {
        ckc_blas_release(entry);
    } else {
        lt_plan_free(pl); /* its slot, or every slot, was busy: used once */
    }
    return s != 0 ? lt_failed(err, exec->stream, "cublasLtMatmul (int8)", s) : CKC_OK;
}

/* ---- the block-scaled GEMMs (NVFP4, MXFP8): descriptors per call (they carry
 * their pointers), the algorithm cached ---- */

static int
lt_type_of(ckc_float_kind kind)
{
    return kind == CKC_BF16 ? LT_R_16BF : (kind == CKC_F16 ? LT_R_16F : LT_R_32F);
}

/* The format of a block-scaled GEMM's operands and scales. */
typedef struct {
    const char *name;
    int in_type;
    int32_t scale_mode;
} lt_block_format;

static const lt_block_format lt_nvfp4 = {"NVFP4", LT_R_4F_E2M1, LT_SCALE_VEC16_UE4M3};
static const lt_block_format lt_mxfp8 = {"MXFP8", LT_R_8F_E4M3, LT_SCALE_VEC32_UE8M0};

/* alpha and beta: the block's, on the device, or (none given) 1 and 0 from the host. */
static const float lt_one_zero[2] = {1.0f, 0.0f};

static ckc_status
scaled_describe(const ckc_scaled_mm_nvfp4_params *g, const lt_block_format *f, lt_plan *pl, ckc_error *err)
{
    const int out_type = lt_type_of(g->out_kind);
    const int32_t pointer_mode = g->alpha_beta != NULL ? LT_POINTER_MODE_DEVICE : LT_POINTER_MODE_HOST;
    CKC_TRY(lt_describe_tn(pl, LT_COMPUTE_32F, LT_R_32F, f->in_type, out_type, g->m, g->n, g->k, g->k, g->k, g->n,
                           err));
    /* cuBLASLt's A is our b (the weight), so its A scales are scale_b. */
    LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_POINTER_MODE, &pointer_mode,
                                                  sizeof pointer_mode));
    LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_A_SCALE_MODE, &f->scale_mode,
                                                  sizeof f->scale_mode));
    LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_B_SCALE_MODE, &f->scale_mode,
                                                  sizeof f->scale_mode));
    LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_A_SCALE_POINTER, &g->scale_b,
                                                  sizeof g->scale_b));
    LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_B_SCALE_POINTER, &g->scale_a,
                                                  sizeof g->scale_a));
    if (g->bias != NULL) {
        const int32_t epilogue = LT_EPILOGUE_BIAS;
        LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_EPILOGUE, &epilogue, sizeof epilogue));
        LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_BIAS_POINTER, &g->bias, sizeof g->bias));
        LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_BIAS_DATA_TYPE, &out_type,
                                                      sizeof out_type));
    }
    return CKC_OK;
}

static void
lt_algo_free(void *p)
{
    free(p);
}

/* pl->algo for the problem: the cached one, or the filter's choice, cached. */
static ckc_status
scaled_algo(lt_handle handle, const ckc_scaled_mm_nvfp4_params *g, int in_type, int device, size_t ws_bytes,
            lt_plan *pl, ckc_error *err)
{
    const uint32_t align[3] = {ckc_blas_alignment(g->b), ckc_blas_alignment(g->a), ckc_blas_alignment(g->out)};
    ckc_blas_key key;
    ckc_blas_entry *entry;
    lt_algo *algo;
    memset(&key, 0, sizeof key);
    /* kind: 1 + 2 * output type + whether the bias epilogue is on; then the operands' type */
    key.v[0] = 1 + 2 * lt_type_of(g->out_kind) + (g->bias != NULL);
    key.v[1] = device;
    key.v[2] = g->m;
    key.v[3] = g->n;
    key.v[4] = g->k;
    key.v[5] = in_type;
    /* the heuristic reads the bias and scale pointers too: a choice made for aligned ones may not serve others */
    key.v[6] = g->bias != NULL ? ckc_blas_alignment(g->bias) : 0;
    key.v[7] = ckc_blas_alignment(g->scale_a) < ckc_blas_alignment(g->scale_b) ? ckc_blas_alignment(g->scale_a)
                                                                                : ckc_blas_alignment(g->scale_b);
    key.v[8] = align[0];
    key.v[9] = align[1];
    key.v[10] = align[2];
    key.v[11] = (int64_t)ws_bytes;
    entry = ckc_blas_find(&key);
    if (entry == NULL) {
        CKC_TRY(lt_choose_with_pref(handle, pl, align, ws_bytes, err));
        algo = (lt_algo *)malloc(sizeof *algo);
        if (algo != NULL) { /* without memory, the choice is simply not kept */
            *algo = pl->algo;
            entry = ckc_blas_insert(&key, algo, lt_algo_free);
            if (entry == NULL) {
                free(algo);
            }
        }
    } else {
        pl->algo = *(const lt_algo *)ckc_blas_plan(entry);
    }
    if (entry != NULL) {
        ckc_blas_release(entry);
    }
    return CKC_OK;
}

static ckc_status
scaled_gemm(const ckc_scaled_mm_nvfp4_params *g, const lt_block_format *f, const ckc_exec *exec, ckc_error *err)
{
    const float *alpha_beta = g->alpha_beta != NULL ? g->alpha_beta : lt_one_zero;
    lt_handle handle = NULL;
    void *ws = NULL;
    size_t ws_bytes = 0;
    lt_plan pl;
    ckc_status status;
    lt_status s = 0;
    memset(&pl, 0, sizeof pl);
    CKC_TRY(lt_context(exec, &handle, &ws, &ws_bytes, err));
    status = scaled_describe(g, f, &pl, err);
    if (status == CKC_OK) {
        status = scaled_algo(handle, g, f->in_type, exec->device_index, ws_bytes, &pl, err);
    }
    if (status == CKC_OK) {
        s = lt.cublasLtMatmul(handle, pl.desc, alpha_beta, g->b, pl.a, g->a, pl.b, alpha_beta + 1, g->out, pl.c,
                              g->out, pl.c, &pl.algo, ws, ws_bytes, (CUstream)exec->stream);
    }
    if (pl.c != NULL) (void)lt.cublasLtMatrixLayoutDestroy(pl.c);
    if (pl.b != NULL) (void)lt.cublasLtMatrixLayoutDestroy(pl.b);
    if (pl.a != NULL) (void)lt.cublasLtMatrixLayoutDestroy(pl.a);
    if (pl.desc != NULL) (void)lt.cublasLtMatmulDescDestroy(pl.desc);
    if (status == CKC_OK && s != 0) {
        char call[48];
        snprintf(call, sizeof call, "cublasLtMatmul (%s)", f->name);
        return lt_failed(err, exec->stream, call, s);
    }
    return status;
}

ckc_status
ckc_blas_nvfp4_gemm(const ckc_scaled_mm_nvfp4_params *p, const ckc_exec *exec, ckc_error *err)
{
    return scaled_gemm(p, &lt_nvfp4, exec, err);
}

ckc_status
ckc_blas_mxfp8_gemm(const ckc_scaled_mm_mxfp8_params *p, const ckc_exec *exec, ckc_error *err)
{
    return scaled_gemm(p, &lt_mxfp8, exec, err);
}

#endif /* CKC_WITH_CUDA */
