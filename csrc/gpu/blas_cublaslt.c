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
 * No split-K and no stream-K: the field report's prime suspect for a hang is a
 * GEMM whose blocks spin-wait on each other's partial sums.  The preference
 * allows no reduction scheme, and of the heuristic's answers only an algorithm
 * whose configuration reads SPLITK_NUM <= 1 and REDUCTION_SCHEME == NONE is
 * taken, preferring one that needs no workspace at all (stream-K's fix-up
 * partials and flags live in the workspace, so a workspace-free kernel cannot
 * be one).
 *
 * The workspace is device memory allocated once per (device, stream) and never
 * freed: work queued on that stream may still use it after a call returns, and
 * one buffer per stream keeps concurrent streams from sharing one.
 *
 * The heuristic query costs more than a small GEMM, so the chosen algorithm is
 * cached per problem (device, kind, sizes, leading dimensions, alignments,
 * workspace): a model's layers repeat a few shapes.  Descriptors are cheap and
 * made per call. */
#if defined(CKC_WITH_CUDA)

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)
#include <windows.h>
#else
#include <dlfcn.h>
#endif

#include <cuda_runtime_api.h>

#include "blas.h"
#include "gpu.h"
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
    LT_POINTER_MODE_DEVICE = 1,
    LT_EPILOGUE_BIAS = 4,
    LT_SCALE_VEC16_UE4M3 = 1,
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
    X(cublasLtMatmul, lt_status,                                                                              \
      (lt_handle, lt_desc, const void *, const void *, lt_layout, const void *, lt_layout, const void *,     \
       const void *, lt_layout, void *, lt_layout, const lt_algo *, void *, size_t, cudaStream_t))

#define LT_FIELD(name, ret, params) ret(*name) params;
static struct {
    LT_FUNCTIONS(LT_FIELD)
} lt;

static ckc_mutex lt_lock;  /* loading, handles and workspaces */
static int lt_loaded;
static char lt_load_error[2560];
static char lt_search_dirs[4096];

#define CKC_MAX_GPUS 64
static lt_handle lt_handles[CKC_MAX_GPUS];

/* Chosen algorithms by problem, replaced round-robin when full. */
#define LT_CACHE_SIZE 256
#define LT_KEY_LEN 12
typedef struct {
    int used;
    int64_t key[LT_KEY_LEN];
    lt_algo algo;
} lt_cached;
static lt_cached lt_cache[LT_CACHE_SIZE];
static int lt_cache_next;

typedef struct workspace {
    int device;
    uintptr_t stream;
    void *ptr;
    size_t bytes;
    struct workspace *next;
} workspace;
static workspace *workspaces;

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

/* ---- loading ---- */

#if defined(_WIN32)
#define LT_PATH_SEP ';'
#define LT_DIR_SEP "\\"
#define LT_CUDA_HOME_LIB "\\bin"
#define LT_SYSTEM_DIR ""
static const char *const lt_names[] = {"cublasLt64_13.dll", "cublasLt64_12.dll"};
static void *
lt_already_loaded(const char *name)
{
    return (void *)GetModuleHandleA(name);
}
static void *
lt_open(const char *path)
{
    return (void *)LoadLibraryExA(path, NULL, 0);
}
static void *
lt_symbol(void *lib, const char *name)
{
    /* ISO C has no cast from a function pointer (FARPROC) to void * (MSVC /W4: C4152):
     * copy its bytes, as LT_BIND stores dlsym's answer into a function pointer. */
    const FARPROC f = GetProcAddress((HMODULE)lib, name);
    void *p;
    _Static_assert(sizeof f == sizeof p, "a function pointer fits a void *");
    memcpy(&p, &f, sizeof p);
    return p;
}
#else
#define LT_PATH_SEP ':'
#define LT_DIR_SEP "/"
#define LT_CUDA_HOME_LIB "/lib64"
#define LT_SYSTEM_DIR "/usr/local/cuda/lib64"
static const char *const lt_names[] = {"libcublasLt.so.13", "libcublasLt.so.12"};
static void *
lt_already_loaded(const char *name)
{
    return dlopen(name, RTLD_NOW | RTLD_NOLOAD);
}
static void *
lt_open(const char *path)
{
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}
static void *
lt_symbol(void *lib, const char *name)
{
    return dlsym(lib, name);
}
#endif

#define LT_NAME_COUNT ((int)(sizeof lt_names / sizeof lt_names[0]))

/* Appends text to the NUL-terminated buf of cap bytes, cut short where it does not fit. */
static void
append(char *buf, size_t cap, const char *text)
{
    const size_t used = strlen(buf);
    size_t n = strlen(text);
    if (used + 1 >= cap) {
        return;
    }
    n = n < cap - used - 1 ? n : cap - used - 1;
    memcpy(buf + used, text, n);
    buf[used + n] = '\0';
}

/* Tries every file name in one directory ("" for the loader's own search). */
static void *
lt_open_in(const char *dir, size_t dir_len, char *searched, size_t cap)
{
    for (int i = 0; i < LT_NAME_COUNT; i++) {
        char path[1200];
        void *lib;
        if (dir_len + 64 > sizeof path) {
            continue; /* no library lives in a directory with so long a name */
        }
        if (dir_len > 0) {
            snprintf(path, sizeof path, "%.*s" LT_DIR_SEP "%s", (int)dir_len, dir, lt_names[i]);
        } else {
            snprintf(path, sizeof path, "%s", lt_names[i]);
        }
        lib = lt_open(path);
        if (lib != NULL) {
            return lib;
        }
        append(searched, cap, searched[0] != '\0' ? ", " : "");
        append(searched, cap, path);
    }
    return NULL;
}

static void *
lt_find_library(char *searched, size_t cap)
{
    const char *cuda_home = getenv("CUDA_HOME");
    char dirs[4096 + 512];
    void *lib = NULL;
    for (int i = 0; i < LT_NAME_COUNT && lib == NULL; i++) {
        lib = lt_already_loaded(lt_names[i]);
    }
    if (lib == NULL) {
        lib = lt_open_in("", 0, searched, cap);
    }
    /* The caller's directories, then CUDA_HOME's and the system's CUDA libraries. */
    snprintf(dirs, sizeof dirs, "%s%c%s%s%c%s", lt_search_dirs, LT_PATH_SEP, cuda_home != NULL ? cuda_home : "",
             cuda_home != NULL ? LT_CUDA_HOME_LIB : "", LT_PATH_SEP, LT_SYSTEM_DIR);
    for (const char *d = dirs; lib == NULL && *d != '\0';) {
        const char *end = strchr(d, LT_PATH_SEP);
        const size_t len = end != NULL ? (size_t)(end - d) : strlen(d);
        if (len > 1) {
            lib = lt_open_in(d, len, searched, cap);
        }
        d += len + (end != NULL ? 1 : 0);
    }
    return lib;
}

static ckc_status
lt_load(ckc_error *err)
{
    ckc_mutex_lock(&lt_lock);
    if (!lt_loaded && lt_load_error[0] == '\0') {
        char searched[2048] = "";
        void *lib = lt_find_library(searched, sizeof searched);
        if (lib == NULL) {
            snprintf(lt_load_error, sizeof lt_load_error,
                     "cuBLASLt (CUDA 12 or 13) was not found; searched: %s. Install torch's CUDA libraries "
                     "(pip package nvidia-cublas) or the CUDA toolkit", searched);
        } else {
#define LT_BIND(name, ret, params)                                                                                   \
    if (lt_load_error[0] == '\0' && (*(void **)&lt.name = lt_symbol(lib, #name)) == NULL) {                   \
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

/* Fails naming the call, the status, and where (the op is added by module.c). */
#define LT_TRY(err, call)                                                                                     \
    do {                                                                                                      \
        const lt_status ckc_lt_ = (call);                                                                     \
        if (ckc_lt_ != 0) {                                                                                   \
            return ckc_error_set((err), CKC_ERR_RUNTIME, __FILE__, __LINE__, __func__,                        \
                                 "%s failed: %s (%d) at %s:%d", #call, lt_status_name(ckc_lt_), ckc_lt_,       \
                                 __FILE__, __LINE__);                                                         \
        }                                                                                                     \
    } while (0)

/* ---- per-device handle, per-(device, stream) workspace ---- */

static ckc_status
lt_context(const ckc_exec *exec, lt_handle *handle, void **ws, size_t *ws_bytes, ckc_error *err)
{
    const int device = exec->device_index;
    ckc_status status = CKC_OK;
    workspace *w;
    if (device < 0 || device >= CKC_MAX_GPUS) {
        return CKC_FAIL(err, CKC_ERR_RUNTIME, "device index %d is beyond %d", device, CKC_MAX_GPUS);
    }
    CKC_TRY(lt_load(err));
    ckc_mutex_lock(&lt_lock);
    if (lt_handles[device] == NULL) {
        const lt_status s = lt.cublasLtCreate(&lt_handles[device]);
        if (s != 0) {
            lt_handles[device] = NULL;
            status = ckc_error_set(err, CKC_ERR_RUNTIME, __FILE__, __LINE__, __func__,
                                   "cublasLtCreate failed: %s (%d) at %s:%d", lt_status_name(s), s, __FILE__,
                                   __LINE__);
        }
    }
    for (w = workspaces; status == CKC_OK && w != NULL; w = w->next) {
        if (w->device == device && w->stream == exec->stream) {
            break;
        }
    }
    if (status == CKC_OK && w == NULL) {
        int major = 0;
        cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
        w = (workspace *)calloc(1, sizeof *w);
        if (w == NULL) {
            status = CKC_FAIL(err, CKC_ERR_MEMORY, "cannot allocate a workspace record");
        } else {
            /* comfy_kitchen's sizes: 32 MiB from Hopper on (the FP4 GEMM wants it), else 4 MiB. */
            w->bytes = (size_t)(major >= 9 ? 32 : 4) << 20;
            if (e == cudaSuccess) {
                e = cudaMalloc(&w->ptr, w->bytes);
            }
            if (e != cudaSuccess) {
                (void)cudaGetLastError(); /* else the next launch check blames this on a kernel */
                free(w);
                w = NULL;
                status = ckc_error_set(err, CKC_ERR_RUNTIME, __FILE__, __LINE__, __func__,
                                       "cuBLASLt workspace (cudaDeviceGetAttribute, cudaMalloc) failed: %s: %s at "
                                       "%s:%d", cudaGetErrorName(e), cudaGetErrorString(e), __FILE__, __LINE__);
            } else {
                w->device = device;
                w->stream = exec->stream;
                w->next = workspaces;
                workspaces = w;
            }
        }
    }
    if (status == CKC_OK) {
        *handle = lt_handles[device];
        *ws = w->ptr;
        *ws_bytes = w->bytes;
    }
    ckc_mutex_unlock(&lt_lock);
    return status;
}

/* ---- one matmul: descriptors, an algorithm without split-K, the call ---- */

typedef struct {
    lt_handle handle;   /* the device's, with the stream's workspace */
    void *ws;
    size_t ws_bytes;
    lt_desc desc;
    lt_layout a, b, c;
    lt_pref pref;
} lt_plan;

/* Frees what a GEMM created in its plan, whether it succeeded or not, and
 * passes its status on. */
static ckc_status
lt_plan_done(lt_plan *pl, ckc_status status)
{
    if (pl->pref != NULL) (void)lt.cublasLtMatmulPreferenceDestroy(pl->pref);
    if (pl->c != NULL) (void)lt.cublasLtMatrixLayoutDestroy(pl->c);
    if (pl->b != NULL) (void)lt.cublasLtMatrixLayoutDestroy(pl->b);
    if (pl->a != NULL) (void)lt.cublasLtMatrixLayoutDestroy(pl->a);
    if (pl->desc != NULL) (void)lt.cublasLtMatmulDescDestroy(pl->desc);
    return status;
}

static uint32_t
alignment_of(const void *p)
{
    uint32_t a = 256;
    while (a > 1 && (uintptr_t)p % a != 0) {
        a /= 2;
    }
    return a;
}

/* The cached algorithm of a problem, if any (lock held by the caller). */
static const lt_cached *
lt_cache_find(const int64_t key[LT_KEY_LEN])
{
    for (int i = 0; i < LT_CACHE_SIZE; i++) {
        if (lt_cache[i].used && memcmp(lt_cache[i].key, key, sizeof lt_cache[i].key) == 0) {
            return &lt_cache[i];
        }
    }
    return NULL;
}

/* Picks an algorithm for the plan's problem: the cached one, or the heuristic's
 * first with no reduction scheme and split-K of at most 1, preferring one
 * without workspace (see the top of the file).  `problem` holds kind, device,
 * m, n, k, lda, ldb, ldc; the alignments and workspace size complete the key. */
static ckc_status
lt_pick(lt_plan *pl, const int64_t problem[8], const void *a, const void *b, const void *c, lt_algo *algo,
        ckc_error *err)
{
    const size_t ws_bytes = pl->ws_bytes;
    const uint64_t ws = ws_bytes;
    const uint32_t reduction = LT_REDUCTION_NONE;
    const uint32_t align_a = alignment_of(a), align_b = alignment_of(b), align_c = alignment_of(c);
    int64_t key[LT_KEY_LEN];
    const lt_cached *hit;
    lt_heuristic results[16];
    int count = 0;
    int chosen = -1;
    memcpy(key, problem, 8 * sizeof key[0]);
    key[8] = align_a;
    key[9] = align_b;
    key[10] = align_c;
    key[11] = (int64_t)ws_bytes;
    ckc_mutex_lock(&lt_lock);
    hit = lt_cache_find(key);
    if (hit != NULL) {
        *algo = hit->algo;
    }
    ckc_mutex_unlock(&lt_lock);
    if (hit != NULL) {
        return CKC_OK;
    }
    LT_TRY(err, lt.cublasLtMatmulPreferenceCreate(&pl->pref));
    LT_TRY(err, lt.cublasLtMatmulPreferenceSetAttribute(pl->pref, LT_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    LT_TRY(err, lt.cublasLtMatmulPreferenceSetAttribute(pl->pref, LT_PREF_REDUCTION_SCHEME_MASK, &reduction,
                                                         sizeof reduction));
    LT_TRY(err, lt.cublasLtMatmulPreferenceSetAttribute(pl->pref, LT_PREF_MIN_ALIGNMENT_A, &align_a, sizeof align_a));
    LT_TRY(err, lt.cublasLtMatmulPreferenceSetAttribute(pl->pref, LT_PREF_MIN_ALIGNMENT_B, &align_b, sizeof align_b));
    LT_TRY(err, lt.cublasLtMatmulPreferenceSetAttribute(pl->pref, LT_PREF_MIN_ALIGNMENT_C, &align_c, sizeof align_c));
    LT_TRY(err, lt.cublasLtMatmulPreferenceSetAttribute(pl->pref, LT_PREF_MIN_ALIGNMENT_D, &align_c, sizeof align_c));
    LT_TRY(err, lt.cublasLtMatmulAlgoGetHeuristic(pl->handle, pl->desc, pl->a, pl->b, pl->c, pl->c, pl->pref, 16,
                                                   results, &count));
    for (int pass = 0; pass < 2 && chosen < 0; pass++) {
        for (int i = 0; i < count && chosen < 0; i++) {
            int32_t splitk = 1;
            uint32_t scheme = LT_REDUCTION_NONE;
            size_t written = 0;
            if (results[i].state != 0 || (pass == 0 && results[i].workspace_size != 0)) {
                continue;
            }
            LT_TRY(err, lt.cublasLtMatmulAlgoConfigGetAttribute(&results[i].algo, LT_CONFIG_SPLITK_NUM, &splitk,
                                                                  sizeof splitk, &written));
            LT_TRY(err, lt.cublasLtMatmulAlgoConfigGetAttribute(&results[i].algo, LT_CONFIG_REDUCTION_SCHEME,
                                                                  &scheme, sizeof scheme, &written));
            if (splitk <= 1 && scheme == LT_REDUCTION_NONE) {
                chosen = i;
            }
        }
    }
    if (chosen < 0) {
        return CKC_FAIL(err, CKC_ERR_RUNTIME,
                        "cublasLtMatmulAlgoGetHeuristic offered no algorithm without split-K (%d candidates; "
                        "cuBLASLt %zu)", count, lt.cublasLtGetVersion());
    }
    *algo = results[chosen].algo;
    ckc_mutex_lock(&lt_lock);
    if (lt_cache_find(key) == NULL) {
        lt_cached *slot = &lt_cache[lt_cache_next];
        lt_cache_next = (lt_cache_next + 1) % LT_CACHE_SIZE;
        slot->used = 1;
        memcpy(slot->key, key, sizeof slot->key);
        slot->algo = *algo;
    }
    ckc_mutex_unlock(&lt_lock);
    return CKC_OK;
}

/* Both GEMMs multiply row-major [m, k] activations by [n, k] weights into a
 * row-major [m, n] output: in cuBLASLt's column-major view that is
 * C[n, m] = W^T[n, k] . X[k, m], "TN", so cuBLASLt's A is our weight and its B
 * our activation.  This loads cuBLASLt and the device's handle and workspace
 * (lt_context), then creates the descriptor (compute and scale types, TN) and
 * the three layouts (leading dimensions ldw, ldx, ldc). */
static ckc_status
lt_begin_tn(const ckc_exec *exec, lt_plan *pl, int compute, int scale_type, int in_type, int out_type, int64_t m,
            int64_t n, int64_t k, int64_t ldw, int64_t ldx, int64_t ldc, ckc_error *err)
{
    const int32_t trans_a = LT_OP_T, trans_b = LT_OP_N;
    CKC_TRY(lt_context(exec, &pl->handle, &pl->ws, &pl->ws_bytes, err));
    LT_TRY(err, lt.cublasLtMatmulDescCreate(&pl->desc, compute, scale_type));
    LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_TRANSA, &trans_a, sizeof trans_a));
    LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_TRANSB, &trans_b, sizeof trans_b));
    LT_TRY(err, lt.cublasLtMatrixLayoutCreate(&pl->a, in_type, (uint64_t)k, (uint64_t)n, ldw));
    LT_TRY(err, lt.cublasLtMatrixLayoutCreate(&pl->b, in_type, (uint64_t)k, (uint64_t)m, ldx));
    LT_TRY(err, lt.cublasLtMatrixLayoutCreate(&pl->c, out_type, (uint64_t)n, (uint64_t)m, ldc));
    return CKC_OK;
}

/* out = alpha * (w . x) + beta * out with the plan, on the caller's stream,
 * through an algorithm lt_pick chose (or recalled) for `problem`. */
static ckc_status
lt_run(const ckc_exec *exec, lt_plan *pl, const int64_t problem[8], const void *alpha, const void *w, const void *x,
       const void *beta, void *out, ckc_error *err)
{
    lt_algo algo;
    CKC_TRY(lt_pick(pl, problem, w, x, out, &algo, err));
    LT_TRY(err, lt.cublasLtMatmul(pl->handle, pl->desc, alpha, w, pl->a, x, pl->b, beta, out, pl->c, out, pl->c, &algo,
                                  pl->ws, pl->ws_bytes, (cudaStream_t)exec->stream));
    return CKC_OK;
}

static ckc_status
int8_gemm(const ckc_int8_gemm_params *p, const ckc_exec *exec, lt_plan *pl, ckc_error *err)
{
    const int32_t alpha = 1, beta = 0;
    CKC_TRY(lt_begin_tn(exec, pl, LT_COMPUTE_32I, LT_R_32I, LT_R_8I, LT_R_32I, p->m, p->n, p->k, p->ldb, p->lda,
                        p->ldc, err));
    const int64_t problem[8] = {0, exec->device_index, p->m, p->n, p->k, p->lda, p->ldb, p->ldc};
    return lt_run(exec, pl, problem, &alpha, p->b, p->a, &beta, p->c, err);
}

ckc_status
ckc_blas_int8_gemm(const ckc_int8_gemm_params *p, const ckc_exec *exec, ckc_error *err)
{
    lt_plan pl;
    memset(&pl, 0, sizeof pl);
    return lt_plan_done(&pl, int8_gemm(p, exec, &pl, err));
}

static int
lt_type_of(ckc_float_kind kind)
{
    return kind == CKC_BF16 ? LT_R_16BF : (kind == CKC_F16 ? LT_R_16F : LT_R_32F);
}

static ckc_status
nvfp4_gemm(const ckc_nvfp4_gemm_params *p, const ckc_exec *exec, lt_plan *pl, ckc_error *err)
{
    const int32_t pointer_mode = LT_POINTER_MODE_DEVICE;
    const int32_t scale_mode = LT_SCALE_VEC16_UE4M3;
    const int out_type = lt_type_of(p->out_kind);
    CKC_TRY(lt_begin_tn(exec, pl, LT_COMPUTE_32F, LT_R_32F, LT_R_4F_E2M1, out_type, p->m, p->n, p->k, p->k, p->k,
                        p->n, err));
    /* cuBLASLt's A is our b (the weight), so its A scales are scale_b. */
    LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_POINTER_MODE, &pointer_mode,
                                                  sizeof pointer_mode));
    LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_A_SCALE_MODE, &scale_mode, sizeof scale_mode));
    LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_B_SCALE_MODE, &scale_mode, sizeof scale_mode));
    LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_A_SCALE_POINTER, &p->scale_b,
                                                  sizeof p->scale_b));
    LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_B_SCALE_POINTER, &p->scale_a,
                                                  sizeof p->scale_a));
    if (p->bias != NULL) {
        const int32_t epilogue = LT_EPILOGUE_BIAS;
        LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_EPILOGUE, &epilogue, sizeof epilogue));
        LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_BIAS_POINTER, &p->bias, sizeof p->bias));
        LT_TRY(err, lt.cublasLtMatmulDescSetAttribute(pl->desc, LT_DESC_BIAS_DATA_TYPE, &out_type,
                                                      sizeof out_type));
    }
    /* kind: 1 + output type, and whether the bias epilogue is on */
    const int64_t problem[8] = {1 + 2 * out_type + (p->bias != NULL), exec->device_index, p->m, p->n, p->k,
                                p->k, p->k, p->n};
    return lt_run(exec, pl, problem, p->alpha_beta, p->b, p->a, p->alpha_beta + 1, p->out, err);
}

ckc_status
ckc_blas_nvfp4_gemm(const ckc_nvfp4_gemm_params *p, const ckc_exec *exec, ckc_error *err)
{
    lt_plan pl;
    memset(&pl, 0, sizeof pl);
    return lt_plan_done(&pl, nvfp4_gemm(p, exec, &pl, err));
}

#endif /* CKC_WITH_CUDA */
