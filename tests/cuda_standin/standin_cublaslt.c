/* SPDX-License-Identifier: Apache-2.0 */
/* The stand-in cuBLASLt (test code, standin.h): the subset that
 * csrc/gpu/blas_cublaslt.c loads, with the real library's semantics where the
 * project depends on them and its rules held strictly:
 *
 *   - opaque handle, matmul descriptor, matrix layouts and preference, each a
 *     live object (a destroyed or unknown one is refused); every attribute
 *     cublasLt.h (CUDA 13.0) defines is stored with its exact size (unknown id,
 *     wrong size or NULL buffer: CUBLAS_STATUS_INVALID_VALUE);
 *   - column-major layouts (rows, cols, ld) with TRANSA / TRANSB, D = alpha
 *     op(A) op(B) + beta C (+ bias), beta == 0 never reading C;
 *   - the problems the project runs, and nothing else (NOT_SUPPORTED with the
 *     reason logged): int8 x int8 -> int32 on the IMMA path (COMPUTE_32I, scale
 *     type 32I, "TN", m, k and every leading dimension multiples of 4,
 *     pointers at least 4-byte aligned), and the block-scaled NVFP4 (E2M1
 *     codes, VEC16_UE4M3 scales) and MXFP8 (E4M3 codes, VEC32_UE8M0 scales)
 *     GEMMs (COMPUTE_32F, "TN", rows and leading dimensions 16-byte aligned,
 *     compute capability 10.0 or newer, bf16 / f16 / f32 output, optional
 *     bias of cuBLASLt's FP8 bias types);
 *   - a deterministic heuristic: up to six candidates (split-K with a
 *     reduction scheme, workspace or none, 4- to 16-byte vector widths)
 *     filtered by the preference (max workspace, reduction-scheme mask,
 *     minimum alignments, waves, implementation mask); each algorithm's 64
 *     bytes encode its configuration, the type signature it serves and the
 *     alignments it relies on, read back by AlgoConfigGetAttribute, AlgoCheck
 *     and cublasLtMatmul;
 *   - cublasLtMatmul validates everything (algorithm for this problem,
 *     workspace, pointer alignments the algorithm relies on, the bias
 *     pointer's alignment the heuristic saw, 16-byte aligned block scales, the
 *     stream), counts itself for CKCSI_INJECT_BLAS_FAILED (calls that pass
 *     validation), then queues the GEMM as stream work (standin_streams.c):
 *     now, never on a hung stream, or at each replay of a captured graph,
 *     device-mode alpha / beta read then; EXECUTION_FAILED when the stream
 *     refuses it (sticky fault, unknown stream) or a failure is injected;
 *   - cublasLtCreate needs a current context without a sticky fault, and is
 *     what a CUDA-graph capture forbids (ckcsi_capture_unsafe: it allocates on
 *     a real library): NOT_INITIALIZED otherwise.
 *
 * The GEMMs reproduce csrc/gpu/blas_emu.c bit for bit: the int8 sums exactly
 * (in 64 bits, wrapped to int32), the block-scaled ones with each operand
 * decoded by the same csrc/math functions (code times block scale, exact in
 * float32) and summed in float32 in k's order from +0, then alpha * sum +
 * bias (0.0f without one) rounded once to the output type.  FP4 bytes are
 * read high nibble first, as the emulated device and comfy_kitchen's packer do
 * (a real GPU reads the low nibble first: the same GEMM up to the order of
 * each pair's two products, which blas_emu.c's comment explains).  A split-K
 * algorithm sums its K chunks separately and adds the partial sums in order,
 * as a real one would: its float results differ, which the project's filter
 * (no split-K) is there to avoid.  Scale bytes that a GPU reads otherwise than
 * the emulated device (a UE4M3 scale with its sign bit set, E8M0 255 and 0)
 * are logged (ckcsi_refuse with CKCSI_SUCCESS); the GEMM runs as there. */
/* No fused multiply-add in the GEMMs, whatever the build's flags: the
 * emulated device's sums are separate roundings (setup.py builds it with
 * -ffp-contract=off); before the includes, so that the inlined csrc/math
 * helpers are compiled alike. */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

#include "math/float_bits.h"
#include "math/mxfp8.h"
#include "math/nvfp4.h"

_Static_assert(sizeof(void *) == 8, "pointer attributes are 8 bytes, as on every platform CUDA 13 supports");

/* ---- cuBLAS / cuBLASLt values (cublas_api.h, cublasLt.h, library_types.h) ---- */

enum {
    LT_OK = 0,
    LT_NOT_INITIALIZED = 1,
    LT_ALLOC_FAILED = 3,
    LT_INVALID_VALUE = 7,
    LT_ARCH_MISMATCH = 8,
    LT_EXECUTION_FAILED = 13,
    LT_NOT_SUPPORTED = 15
};

enum {
    LT_R_32F = 0,
    LT_R_16F = 2,
    LT_R_8I = 3,
    LT_R_32I = 10,
    LT_R_16BF = 14,
    LT_R_8F_E4M3 = 28,
    LT_R_4F_E2M1 = 33,
    LT_COMPUTE_32F = 68,
    LT_COMPUTE_32F_PEDANTIC = 69,
    LT_COMPUTE_32I = 72,
    LT_COMPUTE_32I_PEDANTIC = 73,
    LT_OP_N = 0,
    LT_OP_T = 1,
    LT_FILL_FULL = 2,
    LT_POINTER_HOST = 0,
    LT_POINTER_DEVICE = 1,
    LT_EPILOGUE_DEFAULT = 1,
    LT_EPILOGUE_BIAS = 4,
    LT_SCALE_SCALAR_32F = 0,
    LT_SCALE_VEC16_UE4M3 = 1,
    LT_SCALE_VEC32_UE8M0 = 2,
    LT_ORDER_COL = 0,
    LT_REDUCTION_NONE = 0,
    LT_REDUCTION_INPLACE = 1,
    LT_REDUCTION_COMPUTE_TYPE = 2,
    LT_REDUCTION_MASK = 7
};

/* cublasLtMatmulDescAttributes_t */
enum {
    D_COMPUTE_TYPE = 0, D_SCALE_TYPE = 1, D_POINTER_MODE = 2, D_TRANSA = 3, D_TRANSB = 4, D_TRANSC = 5,
    D_FILL_MODE = 6, D_EPILOGUE = 7, D_BIAS_POINTER = 8, D_BIAS_BATCH_STRIDE = 10, D_AUX_POINTER = 11,
    D_AUX_LD = 12, D_AUX_BATCH_STRIDE = 13, D_ALPHA_VECTOR_BATCH_STRIDE = 14, D_SM_COUNT_TARGET = 15,
    D_A_SCALE_POINTER = 17, D_B_SCALE_POINTER = 18, D_C_SCALE_POINTER = 19, D_D_SCALE_POINTER = 20,
    D_AMAX_D_POINTER = 21, D_AUX_DATA_TYPE = 22, D_AUX_SCALE_POINTER = 23, D_AUX_AMAX_POINTER = 24,
    D_FAST_ACCUM = 25, D_BIAS_DATA_TYPE = 26, D_A_SCALE_MODE = 31, D_B_SCALE_MODE = 32, D_C_SCALE_MODE = 33,
    D_D_SCALE_MODE = 34, D_AUX_SCALE_MODE = 35, D_D_OUT_SCALE_POINTER = 36, D_D_OUT_SCALE_MODE = 37,
    D_EMULATION_DESCRIPTOR = 38, D_COUNT = 39
};
/* Bytes of each (0: no such attribute). */
static const unsigned char desc_size[D_COUNT] = {4, 4, 4, 4, 4, 4, 4, 4, 8, 0, 8, 8, 8, 8, 8, 4, 0, 8, 8, 8,
                                                  8, 8, 4, 8, 8, 1, 4, 0, 0, 0, 0, 4, 4, 4, 4, 4, 8, 4, 8};

/* cublasLtMatrixLayoutAttribute_t */
enum { L_TYPE = 0, L_ORDER = 1, L_ROWS = 2, L_COLS = 3, L_LD = 4, L_BATCH_COUNT = 5, L_BATCH_OFFSET = 6,
       L_PLANE_OFFSET = 7, L_BATCH_MODE = 8, L_COUNT = 9 };
static const unsigned char layout_size[L_COUNT] = {4, 4, 8, 8, 8, 4, 8, 8, 4};

/* cublasLtMatmulPreferenceAttributes_t */
enum { P_SEARCH_MODE = 0, P_MAX_WORKSPACE = 1, P_REDUCTION_MASK = 3, P_ALIGN_A = 5, P_ALIGN_B = 6, P_ALIGN_C = 7,
       P_ALIGN_D = 8, P_MAX_WAVES = 9, P_IMPL_MASK = 12, P_COUNT = 13 };
static const unsigned char pref_size[P_COUNT] = {4, 8, 0, 4, 0, 4, 4, 4, 4, 4, 0, 0, 8};

/* cublasLtMatmulAlgoConfigAttributes_t: ID, TILE_ID, SPLITK_NUM, REDUCTION_SCHEME,
 * CTA_SWIZZLING, CUSTOM_OPTION, STAGES_ID, INNER_SHAPE_ID, CLUSTER_SHAPE_ID */
enum { C_ID = 0, C_TILE = 1, C_SPLITK = 2, C_REDUCTION = 3, C_STAGES = 6, C_COUNT = 9 };
static const unsigned char config_size[C_COUNT] = {4, 4, 4, 4, 4, 4, 4, 2, 2};

/* cublasLtNumericalImplFlags_t bits */
#define LT_IMPL_HMMA (0x02ull)
#define LT_IMPL_IMMA (0x04ull)
#define LT_IMPL_ACC_32F (0x02ull << 8)
#define LT_IMPL_ACC_32I (0x08ull << 8)
#define LT_IMPL_IN_8I (0x20ull << 16)
#define LT_IMPL_IN_E4M3 (0x40ull << 16)

typedef struct {
    uint64_t data[8];
} lt_algo;

typedef struct {
    lt_algo algo;
    size_t workspace_size;
    int state;
    float waves;
    int reserved[4];
} lt_result;

/* ---- live objects ---- */

enum { OBJ_HANDLE = 1, OBJ_DESC = 2, OBJ_LAYOUT = 3, OBJ_PREF = 4 };
static const char *const obj_name[] = {"", "cublasLtHandle_t", "cublasLtMatmulDesc_t", "cublasLtMatrixLayout_t",
                                       "cublasLtMatmulPreference_t"};

typedef struct {
    int kind;
    int device; /* the current device at cublasLtCreate */
} lt_handle_s;

typedef struct {
    int kind;
    uint64_t v[D_COUNT];
} lt_desc_s;

typedef struct {
    int kind;
    uint64_t v[L_COUNT];
} lt_layout_s;

typedef struct {
    int kind;
    uint64_t v[P_COUNT];
} lt_pref_s;

static pthread_mutex_t lt_lock = PTHREAD_MUTEX_INITIALIZER;
static const void **lt_live;
static size_t lt_live_count, lt_live_cap;

static int
live_add(const void *p)
{
    int ok = 1;
    pthread_mutex_lock(&lt_lock);
    if (lt_live_count == lt_live_cap) {
        const size_t cap = lt_live_cap != 0 ? 2 * lt_live_cap : 64;
        const void **grown = (const void **)realloc((void *)lt_live, cap * sizeof *grown);
        if (grown == NULL) {
            ok = 0;
        } else {
            lt_live = grown;
            lt_live_cap = cap;
        }
    }
    if (ok) {
        lt_live[lt_live_count++] = p;
    }
    pthread_mutex_unlock(&lt_lock);
    return ok;
}

/* Whether p is a live object of kind (its first int); remove: and forget it. */
static int
live_find(const void *p, int kind, int remove)
{
    int found = 0;
    if (p == NULL) {
        return 0;
    }
    pthread_mutex_lock(&lt_lock);
    for (size_t i = 0; i < lt_live_count && !found; i++) {
        if (lt_live[i] == p && *(const int *)p == kind) {
            found = 1;
            if (remove) {
                lt_live[i] = lt_live[--lt_live_count];
            }
        }
    }
    pthread_mutex_unlock(&lt_lock);
    return found;
}

/* ---- attribute slots ---- */

static void
slot_set(uint64_t *slot, const void *buf, size_t size)
{
    *slot = 0;
    memcpy(slot, buf, size);
}

static int32_t
slot_i32(uint64_t slot)
{
    int32_t v;
    memcpy(&v, &slot, sizeof v);
    return v;
}

static uint32_t
slot_u32(uint64_t slot)
{
    uint32_t v;
    memcpy(&v, &slot, sizeof v);
    return v;
}

static float
slot_f32(uint64_t slot)
{
    return ckc_f32_from_bits(slot_u32(slot));
}

static const void *
slot_ptr(uint64_t slot)
{
    const void *v;
    memcpy(&v, &slot, sizeof v);
    return v;
}

/* The cuBLASLt rules of Set/GetAttribute: size must match exactly; a Get of
 * size 0 reports the size needed. */
static int
set_attribute(const char *call, uint64_t *slots, const unsigned char *sizes, int count, int attr, const void *buf,
              size_t size)
{
    if (attr < 0 || attr >= count || sizes[attr] == 0) {
        return ckcsi_refuse(LT_INVALID_VALUE, call, "unknown attribute %d (CUBLAS_STATUS_INVALID_VALUE)", attr);
    }
    if (buf == NULL) {
        return ckcsi_refuse(LT_INVALID_VALUE, call, "attribute %d: buf is NULL (CUBLAS_STATUS_INVALID_VALUE)", attr);
    }
    if (size != sizes[attr]) {
        return ckcsi_refuse(LT_INVALID_VALUE, call,
                            "attribute %d takes %u bytes, sizeInBytes is %zu (CUBLAS_STATUS_INVALID_VALUE)", attr,
                            (unsigned)sizes[attr], size);
    }
    slot_set(&slots[attr], buf, size);
    return LT_OK;
}

static int
get_attribute(const char *call, const uint64_t *slots, const unsigned char *sizes, int count, int attr, void *buf,
              size_t size, size_t *written)
{
    if (attr < 0 || attr >= count || sizes[attr] == 0) {
        return ckcsi_refuse(LT_INVALID_VALUE, call, "unknown attribute %d (CUBLAS_STATUS_INVALID_VALUE)", attr);
    }
    if (size == 0) {
        if (written == NULL) {
            return ckcsi_refuse(LT_INVALID_VALUE, call,
                                "attribute %d: sizeInBytes 0 and sizeWritten NULL (CUBLAS_STATUS_INVALID_VALUE)", attr);
        }
        *written = sizes[attr];
        return LT_OK;
    }
    if (buf == NULL || size != sizes[attr]) {
        return ckcsi_refuse(LT_INVALID_VALUE, call,
                            "attribute %d takes %u bytes, sizeInBytes is %zu%s (CUBLAS_STATUS_INVALID_VALUE)", attr,
                            (unsigned)sizes[attr], size, buf == NULL ? " and buf is NULL" : "");
    }
    memcpy(buf, &slots[attr], size);
    if (written != NULL) {
        *written = size;
    }
    return LT_OK;
}

/* ---- the handle ---- */

CKCSI_EXPORT size_t
cublasLtGetVersion(void)
{
    return 130100; /* CUBLAS_VERSION of CUDA 13.0's cuBLAS 13.1.0 */
}

CKCSI_EXPORT const char *
cublasLtGetStatusName(int status)
{
    switch (status) {
    case LT_OK: return "CUBLAS_STATUS_SUCCESS";
    case LT_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case LT_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case LT_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case LT_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case LT_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case LT_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

CKCSI_EXPORT const char *
cublasLtGetStatusString(int status)
{
    return cublasLtGetStatusName(status);
}

/* Allocates the library's context on the current device: refused without a
 * current context, on a context with a sticky error, and where a CUDA-graph
 * capture forbids allocations on this thread (ckcsi_capture_unsafe). */
CKCSI_EXPORT int
cublasLtCreate(void **handle)
{
    const int device = ckcsi_current_device();
    lt_handle_s *h;
    int sticky;
    if (handle == NULL) {
        return ckcsi_refuse(LT_INVALID_VALUE, "cublasLtCreate", "lightHandle is NULL (CUBLAS_STATUS_INVALID_VALUE)");
    }
    if (device < 0) {
        return ckcsi_refuse(LT_NOT_INITIALIZED, "cublasLtCreate",
                            "no current CUDA context (CUDA_ERROR_INVALID_CONTEXT: invalid device context): "
                            "CUBLAS_STATUS_NOT_INITIALIZED");
    }
    sticky = ckcsi_sticky(device);
    if (sticky != 0) {
        return ckcsi_refuse(LT_NOT_INITIALIZED, "cublasLtCreate",
                            "device %d's context holds sticky error %d: CUBLAS_STATUS_NOT_INITIALIZED", device, sticky);
    }
    if (ckcsi_capture_unsafe("cublasLtCreate") != 0) {
        /* it allocates on a real library: refused (and logged by the driver) as a capture forbids */
        return LT_NOT_INITIALIZED;
    }
    h = (lt_handle_s *)calloc(1, sizeof *h);
    if (h == NULL) {
        return ckcsi_refuse(LT_ALLOC_FAILED, "cublasLtCreate", "out of host memory (CUBLAS_STATUS_ALLOC_FAILED)");
    }
    h->kind = OBJ_HANDLE;
    h->device = device;
    if (!live_add(h)) {
        free(h);
        return ckcsi_refuse(LT_ALLOC_FAILED, "cublasLtCreate", "out of host memory (CUBLAS_STATUS_ALLOC_FAILED)");
    }
    *handle = h;
    return LT_OK;
}

CKCSI_EXPORT int
cublasLtDestroy(void *handle)
{
    if (!live_find(handle, OBJ_HANDLE, 1)) {
        return ckcsi_refuse(LT_NOT_INITIALIZED, "cublasLtDestroy",
                            "%p is not a live cuBLASLt handle (CUBLAS_STATUS_NOT_INITIALIZED)", handle);
    }
    free(handle);
    return LT_OK;
}

/* ---- descriptors, layouts, preferences ---- */

static int
destroy_object(const char *call, void *p, int kind)
{
    if (p == NULL) {
        return LT_OK;
    }
    if (!live_find(p, kind, 1)) {
        return ckcsi_refuse(LT_INVALID_VALUE, call, "%p is not a live %s (destroyed twice, or never created)", p,
                            obj_name[kind]);
    }
    free(p);
    return LT_OK;
}

static int
not_live(const char *call, const char *what, const void *p, int kind)
{
    return ckcsi_refuse(LT_INVALID_VALUE, call, "%s %p is not a live %s (CUBLAS_STATUS_INVALID_VALUE)", what, p,
                        obj_name[kind]);
}

CKCSI_EXPORT int
cublasLtMatmulDescCreate(void **desc, int compute_type, int scale_type)
{
    lt_desc_s *d;
    const int32_t zero = 0, fill = LT_FILL_FULL, unset = -1;
    const uint32_t epilogue = LT_EPILOGUE_DEFAULT;
    if (desc == NULL) {
        return ckcsi_refuse(LT_INVALID_VALUE, "cublasLtMatmulDescCreate", "matmulDesc is NULL");
    }
    d = (lt_desc_s *)calloc(1, sizeof *d);
    if (d == NULL || !live_add(d)) {
        free(d);
        return ckcsi_refuse(LT_ALLOC_FAILED, "cublasLtMatmulDescCreate", "out of host memory");
    }
    d->kind = OBJ_DESC;
    slot_set(&d->v[D_COMPUTE_TYPE], &compute_type, 4);
    slot_set(&d->v[D_SCALE_TYPE], &scale_type, 4);
    slot_set(&d->v[D_POINTER_MODE], &zero, 4);
    slot_set(&d->v[D_FILL_MODE], &fill, 4);
    slot_set(&d->v[D_EPILOGUE], &epilogue, 4);
    slot_set(&d->v[D_BIAS_DATA_TYPE], &unset, 4);
    slot_set(&d->v[D_AUX_DATA_TYPE], &unset, 4);
    *desc = d;
    return LT_OK;
}

CKCSI_EXPORT int
cublasLtMatmulDescDestroy(void *desc)
{
    return destroy_object("cublasLtMatmulDescDestroy", desc, OBJ_DESC);
}

/* Enumerated values outside their enum are refused when set. */
static int
desc_value_ok(int attr, int32_t v)
{
    switch (attr) {
    case D_POINTER_MODE: return v >= 0 && v <= 4;
    case D_TRANSA:
    case D_TRANSB:
    case D_TRANSC: return v >= LT_OP_N && v <= 2;
    case D_FILL_MODE: return v >= 0 && v <= 2;
    case D_EPILOGUE: {
        static const int32_t known[] = {1, 2, 130, 4, 6, 134, 136, 152, 32, 160, 36, 164, 192, 208, 256, 512};
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
            if (v == known[i]) {
                return 1;
            }
        }
        return 0;
    }
    case D_A_SCALE_MODE:
    case D_B_SCALE_MODE:
    case D_C_SCALE_MODE:
    case D_D_SCALE_MODE:
    case D_AUX_SCALE_MODE:
    case D_D_OUT_SCALE_MODE: return v >= 0 && v <= 6;
    default: return 1;
    }
}

CKCSI_EXPORT int
cublasLtMatmulDescSetAttribute(void *desc, int attr, const void *buf, size_t size)
{
    static const char call[] = "cublasLtMatmulDescSetAttribute";
    lt_desc_s *d = (lt_desc_s *)desc;
    if (!live_find(d, OBJ_DESC, 0)) {
        return not_live(call, "matmulDesc", desc, OBJ_DESC);
    }
    if (attr >= 0 && attr < D_COUNT && desc_size[attr] == 4 && buf != NULL && size == 4) {
        int32_t v;
        memcpy(&v, buf, sizeof v);
        if (!desc_value_ok(attr, v)) {
            return ckcsi_refuse(LT_INVALID_VALUE, call, "attribute %d: %d is not a valid value", attr, (int)v);
        }
    }
    return set_attribute(call, d->v, desc_size, D_COUNT, attr, buf, size);
}

CKCSI_EXPORT int
cublasLtMatmulDescGetAttribute(void *desc, int attr, void *buf, size_t size, size_t *written)
{
    static const char call[] = "cublasLtMatmulDescGetAttribute";
    const lt_desc_s *d = (const lt_desc_s *)desc;
    if (!live_find(d, OBJ_DESC, 0)) {
        return not_live(call, "matmulDesc", desc, OBJ_DESC);
    }
    return get_attribute(call, d->v, desc_size, D_COUNT, attr, buf, size, written);
}

CKCSI_EXPORT int
cublasLtMatrixLayoutCreate(void **layout, int type, uint64_t rows, uint64_t cols, int64_t ld)
{
    lt_layout_s *l;
    const int32_t one = 1;
    if (layout == NULL) {
        return ckcsi_refuse(LT_INVALID_VALUE, "cublasLtMatrixLayoutCreate", "matLayout is NULL");
    }
    l = (lt_layout_s *)calloc(1, sizeof *l);
    if (l == NULL || !live_add(l)) {
        free(l);
        return ckcsi_refuse(LT_ALLOC_FAILED, "cublasLtMatrixLayoutCreate", "out of host memory");
    }
    l->kind = OBJ_LAYOUT;
    slot_set(&l->v[L_TYPE], &type, 4);
    slot_set(&l->v[L_ROWS], &rows, 8);
    slot_set(&l->v[L_COLS], &cols, 8);
    slot_set(&l->v[L_LD], &ld, 8);
    slot_set(&l->v[L_BATCH_COUNT], &one, 4);
    *layout = l;
    return LT_OK;
}

CKCSI_EXPORT int
cublasLtMatrixLayoutDestroy(void *layout)
{
    return destroy_object("cublasLtMatrixLayoutDestroy", layout, OBJ_LAYOUT);
}

CKCSI_EXPORT int
cublasLtMatrixLayoutSetAttribute(void *layout, int attr, const void *buf, size_t size)
{
    static const char call[] = "cublasLtMatrixLayoutSetAttribute";
    lt_layout_s *l = (lt_layout_s *)layout;
    if (!live_find(l, OBJ_LAYOUT, 0)) {
        return not_live(call, "matLayout", layout, OBJ_LAYOUT);
    }
    return set_attribute(call, l->v, layout_size, L_COUNT, attr, buf, size);
}

CKCSI_EXPORT int
cublasLtMatrixLayoutGetAttribute(void *layout, int attr, void *buf, size_t size, size_t *written)
{
    static const char call[] = "cublasLtMatrixLayoutGetAttribute";
    const lt_layout_s *l = (const lt_layout_s *)layout;
    if (!live_find(l, OBJ_LAYOUT, 0)) {
        return not_live(call, "matLayout", layout, OBJ_LAYOUT);
    }
    return get_attribute(call, l->v, layout_size, L_COUNT, attr, buf, size, written);
}

CKCSI_EXPORT int
cublasLtMatmulPreferenceCreate(void **pref)
{
    lt_pref_s *p;
    const uint32_t mask = LT_REDUCTION_MASK, align = 256;
    const uint64_t impl = ~(uint64_t)0;
    if (pref == NULL) {
        return ckcsi_refuse(LT_INVALID_VALUE, "cublasLtMatmulPreferenceCreate", "pref is NULL");
    }
    p = (lt_pref_s *)calloc(1, sizeof *p);
    if (p == NULL || !live_add(p)) {
        free(p);
        return ckcsi_refuse(LT_ALLOC_FAILED, "cublasLtMatmulPreferenceCreate", "out of host memory");
    }
    p->kind = OBJ_PREF;
    /* the defaults: no workspace, every reduction scheme, 256-byte alignments, no waves limit */
    slot_set(&p->v[P_REDUCTION_MASK], &mask, 4);
    for (int a = P_ALIGN_A; a <= P_ALIGN_D; a++) {
        slot_set(&p->v[a], &align, 4);
    }
    slot_set(&p->v[P_IMPL_MASK], &impl, 8);
    *pref = p;
    return LT_OK;
}

CKCSI_EXPORT int
cublasLtMatmulPreferenceDestroy(void *pref)
{
    return destroy_object("cublasLtMatmulPreferenceDestroy", pref, OBJ_PREF);
}

CKCSI_EXPORT int
cublasLtMatmulPreferenceSetAttribute(void *pref, int attr, const void *buf, size_t size)
{
    static const char call[] = "cublasLtMatmulPreferenceSetAttribute";
    lt_pref_s *p = (lt_pref_s *)pref;
    if (!live_find(p, OBJ_PREF, 0)) {
        return not_live(call, "pref", pref, OBJ_PREF);
    }
    if (attr == P_SEARCH_MODE && buf != NULL && size == 4) {
        uint32_t v;
        memcpy(&v, buf, sizeof v);
        if (v > 9) {
            return ckcsi_refuse(LT_INVALID_VALUE, call, "search mode %u is not a cublasLtMatmulSearch_t", v);
        }
    }
    return set_attribute(call, p->v, pref_size, P_COUNT, attr, buf, size);
}

CKCSI_EXPORT int
cublasLtMatmulPreferenceGetAttribute(void *pref, int attr, void *buf, size_t size, size_t *written)
{
    static const char call[] = "cublasLtMatmulPreferenceGetAttribute";
    const lt_pref_s *p = (const lt_pref_s *)pref;
    if (!live_find(p, OBJ_PREF, 0)) {
        return not_live(call, "pref", pref, OBJ_PREF);
    }
    return get_attribute(call, p->v, pref_size, P_COUNT, attr, buf, size, written);
}

/* ---- the problem a descriptor and four layouts describe ---- */

enum { KIND_IMMA = 1, KIND_NVFP4 = 2, KIND_MXFP8 = 3 };

typedef struct {
    int kind;
    int device, cc;
    int32_t compute, scale_type, a_type, b_type, c_type, d_type, bias_type;
    int32_t transa, transb, pointer_mode;
    uint32_t epilogue;
    int64_t m, n, k; /* D is m x n, op(A) m x k, op(B) k x n */
    int64_t lda, ldb, ldc, ldd;
    const void *bias, *a_scale, *b_scale;
} lt_problem;

static int
type_bits(int32_t type)
{
    switch (type) {
    case LT_R_4F_E2M1: return 4;
    case LT_R_8I:
    case LT_R_8F_E4M3: return 8;
    case LT_R_16F:
    case LT_R_16BF: return 16;
    default: return 32;
    }
}

static const char *
type_name(int32_t type)
{
    switch (type) {
    case LT_R_32F: return "CUDA_R_32F";
    case LT_R_16F: return "CUDA_R_16F";
    case LT_R_16BF: return "CUDA_R_16BF";
    case LT_R_8I: return "CUDA_R_8I";
    case LT_R_32I: return "CUDA_R_32I";
    case LT_R_8F_E4M3: return "CUDA_R_8F_E4M3";
    case LT_R_4F_E2M1: return "CUDA_R_4F_E2M1";
    default: return "another cudaDataType";
    }
}

/* Largest power of two dividing bytes, at most 256 (0 divides by all). */
static uint32_t
align_of(uint64_t bytes)
{
    uint32_t a = 256;
    while (a > 1 && bytes % a != 0) {
        a /= 2;
    }
    return a;
}

/* Largest power of two not above v (v >= 1), at most 256. */
static uint32_t
pow2_floor(uint64_t v)
{
    uint32_t a = 1;
    while (a < 256 && (uint64_t)a * 2 <= v) {
        a *= 2;
    }
    return a;
}

/* The bytes of ld elements of type (a whole number of bytes for the types here). */
static uint64_t
ld_bytes(int64_t ld, int32_t type)
{
    return (uint64_t)ld * (uint64_t)type_bits(type) / 8;
}

/* Reads the layout's column-major shape: 0, or NOT_SUPPORTED / INVALID_VALUE with why. */
static int
layout_shape(const lt_layout_s *l, const char *name, int64_t *rows, int64_t *cols, int64_t *ld, int32_t *type,
             char *why, size_t why_len)
{
    const uint64_t r = l->v[L_ROWS], c = l->v[L_COLS];
    int64_t lead;
    memcpy(&lead, &l->v[L_LD], sizeof lead);
    *type = slot_i32(l->v[L_TYPE]);
    if (slot_i32(l->v[L_ORDER]) != LT_ORDER_COL || slot_i32(l->v[L_BATCH_COUNT]) != 1 || l->v[L_PLANE_OFFSET] != 0) {
        snprintf(why, why_len, "layout %s: only column-major, unbatched, real layouts are modeled", name);
        return LT_NOT_SUPPORTED;
    }
    if (r > INT32_MAX || c > INT32_MAX) {
        snprintf(why, why_len, "layout %s: %llu x %llu is beyond int32", name, (unsigned long long)r,
                 (unsigned long long)c);
        return LT_NOT_SUPPORTED;
    }
    if (lead < (int64_t)(r > 0 ? r : 1)) {
        snprintf(why, why_len, "layout %s: ld %lld is below its %llu rows (columns would overlap)", name,
                 (long long)lead, (unsigned long long)r);
        return LT_INVALID_VALUE;
    }
    *rows = (int64_t)r;
    *cols = (int64_t)c;
    *ld = lead;
    return LT_OK;
}

/* The problem of (desc, A, B, C, D) on device: LT_OK, INVALID_VALUE (shapes in
 * conflict), NOT_SUPPORTED (a combination cuBLASLt, or the stand-in, does not
 * run) or ARCH_MISMATCH (the device is too old), with the reason in why. */
static int
describe(const lt_desc_s *d, const lt_layout_s *la, const lt_layout_s *lb, const lt_layout_s *lc,
         const lt_layout_s *ld_, int device, lt_problem *p, char *why, size_t why_len)
{
    int64_t ar, ac, br, bc, cr, cc_, dr, dc;
    int32_t ct;
    int s;
    memset(p, 0, sizeof *p);
    p->device = device;
    p->cc = ckcsi_device_cc(device);
    if ((s = layout_shape(la, "A", &ar, &ac, &p->lda, &p->a_type, why, why_len)) != LT_OK ||
        (s = layout_shape(lb, "B", &br, &bc, &p->ldb, &p->b_type, why, why_len)) != LT_OK ||
        (s = layout_shape(lc, "C", &cr, &cc_, &p->ldc, &ct, why, why_len)) != LT_OK ||
        (s = layout_shape(ld_, "D", &dr, &dc, &p->ldd, &p->d_type, why, why_len)) != LT_OK) {
        return s;
    }
    p->c_type = ct;
    p->compute = slot_i32(d->v[D_COMPUTE_TYPE]);
    p->scale_type = slot_i32(d->v[D_SCALE_TYPE]);
    p->transa = slot_i32(d->v[D_TRANSA]);
    p->transb = slot_i32(d->v[D_TRANSB]);
    p->pointer_mode = slot_i32(d->v[D_POINTER_MODE]);
    p->epilogue = slot_u32(d->v[D_EPILOGUE]);
    p->bias = slot_ptr(d->v[D_BIAS_POINTER]);
    p->a_scale = slot_ptr(d->v[D_A_SCALE_POINTER]);
    p->b_scale = slot_ptr(d->v[D_B_SCALE_POINTER]);
    p->m = dr;
    p->n = dc;
    p->k = p->transa == LT_OP_N ? ac : ar;
    if ((p->transa == LT_OP_N ? ar : ac) != dr || (p->transb == LT_OP_N ? bc : br) != dc ||
        (p->transb == LT_OP_N ? br : bc) != p->k || cr != dr || cc_ != dc) {
        snprintf(why, why_len,
                 "shapes in conflict: op(A) %lld x %lld, op(B) %lld x %lld, C %lld x %lld, D %lld x %lld",
                 (long long)(p->transa == LT_OP_N ? ar : ac), (long long)(p->transa == LT_OP_N ? ac : ar),
                 (long long)(p->transb == LT_OP_N ? br : bc), (long long)(p->transb == LT_OP_N ? bc : br),
                 (long long)cr, (long long)cc_, (long long)dr, (long long)dc);
        return LT_INVALID_VALUE;
    }
    if (slot_i32(d->v[D_TRANSC]) != LT_OP_N || slot_i32(d->v[D_FILL_MODE]) != LT_FILL_FULL) {
        snprintf(why, why_len, "TRANSC must be CUBLAS_OP_N and FILL_MODE full");
        return LT_NOT_SUPPORTED;
    }
    if (p->pointer_mode != LT_POINTER_HOST && p->pointer_mode != LT_POINTER_DEVICE) {
        snprintf(why, why_len, "pointer mode %d (vector modes) is not modeled by the stand-in", (int)p->pointer_mode);
        return LT_NOT_SUPPORTED;
    }
    if (slot_ptr(d->v[D_C_SCALE_POINTER]) != NULL || slot_ptr(d->v[D_D_SCALE_POINTER]) != NULL ||
        slot_ptr(d->v[D_AMAX_D_POINTER]) != NULL || slot_ptr(d->v[D_AUX_POINTER]) != NULL ||
        slot_ptr(d->v[D_D_OUT_SCALE_POINTER]) != NULL || slot_ptr(d->v[D_EMULATION_DESCRIPTOR]) != NULL ||
        slot_i32(d->v[D_C_SCALE_MODE]) != 0 || slot_i32(d->v[D_D_SCALE_MODE]) != 0 ||
        slot_i32(d->v[D_D_OUT_SCALE_MODE]) != 0 || d->v[D_ALPHA_VECTOR_BATCH_STRIDE] != 0) {
        snprintf(why, why_len, "C/D scales, amax, aux outputs and emulation are not modeled by the stand-in");
        return LT_NOT_SUPPORTED;
    }
    if (p->epilogue != LT_EPILOGUE_DEFAULT && p->epilogue != LT_EPILOGUE_BIAS) {
        snprintf(why, why_len, "epilogue %u is not modeled by the stand-in (DEFAULT and BIAS are)",
                 (unsigned)p->epilogue);
        return LT_NOT_SUPPORTED;
    }
    if (p->a_type == LT_R_8I) {
        p->kind = KIND_IMMA;
        if ((p->compute != LT_COMPUTE_32I && p->compute != LT_COMPUTE_32I_PEDANTIC) || p->scale_type != LT_R_32I ||
            p->b_type != LT_R_8I || p->c_type != LT_R_32I || p->d_type != LT_R_32I) {
            snprintf(why, why_len,
                     "int8 inputs: the stand-in models COMPUTE_32I, scale type CUDA_R_32I, B CUDA_R_8I, C and D "
                     "CUDA_R_32I (got compute %d, scale %s, B %s, C %s, D %s)",
                     (int)p->compute, type_name(p->scale_type), type_name(p->b_type), type_name(p->c_type),
                     type_name(p->d_type));
            return LT_NOT_SUPPORTED;
        }
        if (p->epilogue != LT_EPILOGUE_DEFAULT || p->a_scale != NULL || p->b_scale != NULL ||
            slot_i32(d->v[D_A_SCALE_MODE]) != 0 || slot_i32(d->v[D_B_SCALE_MODE]) != 0) {
            snprintf(why, why_len, "int8 IMMA with an epilogue or A/B scales is not modeled by the stand-in");
            return LT_NOT_SUPPORTED;
        }
        if (p->transa != LT_OP_T || p->transb != LT_OP_N) {
            snprintf(why, why_len, "int8 IMMA with regular ordering takes only \"TN\" (A transposed, B not)");
            return LT_NOT_SUPPORTED;
        }
        if (p->m % 4 != 0 || p->k % 4 != 0 || p->lda % 4 != 0 || p->ldb % 4 != 0 || p->ldc % 4 != 0 ||
            p->ldd % 4 != 0) {
            snprintf(why, why_len,
                     "int8 IMMA needs m, k and the leading dimensions multiples of 4 (m %lld, k %lld, lda %lld, "
                     "ldb %lld, ldc %lld, ldd %lld)",
                     (long long)p->m, (long long)p->k, (long long)p->lda, (long long)p->ldb, (long long)p->ldc,
                     (long long)p->ldd);
            return LT_NOT_SUPPORTED;
        }
        return LT_OK;
    }
    if (p->a_type == LT_R_4F_E2M1 || p->a_type == LT_R_8F_E4M3) {
        const int fp4 = p->a_type == LT_R_4F_E2M1;
        const int32_t mode = fp4 ? LT_SCALE_VEC16_UE4M3 : LT_SCALE_VEC32_UE8M0;
        const int64_t block = fp4 ? CKC_NVFP4_BLOCK : CKC_MXFP8_BLOCK;
        p->kind = fp4 ? KIND_NVFP4 : KIND_MXFP8;
        if (slot_i32(d->v[D_A_SCALE_MODE]) != mode || slot_i32(d->v[D_B_SCALE_MODE]) != mode) {
            snprintf(why, why_len, "%s inputs: the stand-in models only the block-scaled GEMM (A and B scale mode %s)",
                     type_name(p->a_type), fp4 ? "VEC16_UE4M3" : "VEC32_UE8M0");
            return LT_NOT_SUPPORTED;
        }
        if (p->compute != LT_COMPUTE_32F || p->scale_type != LT_R_32F || p->b_type != p->a_type ||
            p->c_type != p->d_type ||
            (p->d_type != LT_R_16BF && p->d_type != LT_R_16F && p->d_type != LT_R_32F)) {
            snprintf(why, why_len,
                     "block-scaled %s: compute must be COMPUTE_32F, scale type CUDA_R_32F, B of A's type and C of D's, "
                     "D bf16, f16 or f32 (got compute %d, scale %s, B %s, C %s, D %s)",
                     type_name(p->a_type), (int)p->compute, type_name(p->scale_type), type_name(p->b_type),
                     type_name(p->c_type), type_name(p->d_type));
            return LT_NOT_SUPPORTED;
        }
        if (p->transa != LT_OP_T || p->transb != LT_OP_N) {
            snprintf(why, why_len, "block-scaled GEMMs take only \"TN\" (A transposed, B not)");
            return LT_NOT_SUPPORTED;
        }
        if (p->k % block != 0 || (ld_bytes(p->k, p->a_type) % 16) != 0 || ld_bytes(p->lda, p->a_type) % 16 != 0 ||
            ld_bytes(p->ldb, p->b_type) % 16 != 0 || ld_bytes(p->ldc, p->c_type) % 16 != 0 ||
            ld_bytes(p->ldd, p->d_type) % 16 != 0) {
            snprintf(why, why_len,
                     "block-scaled %s needs k a multiple of %lld and of 16 bytes, and every leading dimension "
                     "16 bytes (k %lld, lda %lld, ldb %lld, ldc %lld, ldd %lld of %s)",
                     type_name(p->a_type), (long long)block, (long long)p->k, (long long)p->lda, (long long)p->ldb,
                     (long long)p->ldc, (long long)p->ldd, type_name(p->d_type));
            return LT_NOT_SUPPORTED;
        }
        if (p->epilogue == LT_EPILOGUE_BIAS) {
            /* cuBLASLt's FP8 / block-scaled bias types: bf16 for a bf16 or f32 output, f16 for f16. */
            const int32_t allowed = p->d_type == LT_R_16F ? LT_R_16F : LT_R_16BF;
            const int32_t set = slot_i32(d->v[D_BIAS_DATA_TYPE]);
            p->bias_type = set == -1 ? allowed : set;
            if (p->bias_type != allowed) {
                snprintf(why, why_len,
                         "block-scaled GEMM with D %s: the bias must be %s (cuBLASLt's FP8 bias types), not %s",
                         type_name(p->d_type), type_name(allowed), type_name(p->bias_type));
                return LT_NOT_SUPPORTED;
            }
        }
        if (p->cc < 100) {
            snprintf(why, why_len, "block-scaled %s GEMMs need compute capability 10.0 or newer (device %d has %d.%d)",
                     fp4 ? "NVFP4" : "MXFP8", device, p->cc / 10, p->cc % 10);
            return LT_ARCH_MISMATCH;
        }
        return LT_OK;
    }
    snprintf(why, why_len, "A of type %s: only int8 IMMA and block-scaled NVFP4 / MXFP8 GEMMs are modeled",
             type_name(p->a_type));
    return LT_NOT_SUPPORTED;
}

/* ---- the candidates: what the heuristic offers, in its order ---- */

typedef struct {
    int32_t id;
    uint32_t tile, stages;
    int tile_m, tile_n;
    int32_t split_k;
    uint32_t reduction;
    size_t ws_fixed;   /* bytes */
    int ws_partials;   /* plus split_k * m * n partial sums in the compute type */
    uint32_t vec;      /* the widest access it makes, bytes: the most alignment it relies on */
} lt_cand;

static const lt_cand lt_cands[] = {
    {66, 20, 21, 128, 128, 4, LT_REDUCTION_COMPUTE_TYPE, 0, 1, 16}, /* split-K 4, partials in workspace */
    {71, 24, 21, 256, 128, 1, LT_REDUCTION_NONE, (size_t)2 << 20, 0, 16}, /* no split, 2 MiB workspace */
    {66, 18, 22, 128, 64, 2, LT_REDUCTION_INPLACE, 4096, 0, 16},      /* split-K 2, in place, counters */
    {71, 20, 21, 128, 128, 1, LT_REDUCTION_NONE, 0, 0, 16},           /* no split, no workspace */
    {64, 15, 16, 64, 64, 1, LT_REDUCTION_NONE, (size_t)1 << 20, 0, 8}, /* no split, 1 MiB, 8-byte accesses */
    {64, 15, 16, 64, 64, 1, LT_REDUCTION_NONE, 0, 0, 4},              /* the narrowest: 4-byte accesses */
};
#define LT_CANDS ((int)(sizeof lt_cands / sizeof lt_cands[0]))

/* The least alignment (bytes) of A, B, C and D every kernel of a kind needs. */
static uint32_t
kind_min_align(int kind)
{
    return kind == KIND_IMMA ? 4 : 16;
}

static uint64_t
kind_impl_flags(int kind)
{
    return kind == KIND_IMMA ? (LT_IMPL_IMMA | LT_IMPL_ACC_32I | LT_IMPL_IN_8I)
                             : (LT_IMPL_HMMA | LT_IMPL_ACC_32F | (kind == KIND_MXFP8 ? LT_IMPL_IN_E4M3 : 0));
}

static size_t
cand_workspace(const lt_cand *c, const lt_problem *p)
{
    return c->ws_fixed + (c->ws_partials ? (size_t)c->split_k * (size_t)p->m * (size_t)p->n * 4 : 0);
}

static float
cand_waves(const lt_cand *c, const lt_problem *p)
{
    const int sms = p->cc >= 100 ? 148 : (p->cc >= 90 ? 132 : (p->cc >= 80 ? 108 : 80));
    const int64_t tiles = ((p->m + c->tile_m - 1) / c->tile_m) * ((p->n + c->tile_n - 1) / c->tile_n) * c->split_k;
    return (float)tiles / (float)sms;
}

/* Alignment (bytes) a candidate relies on for a matrix: its vector width, cut
 * to what the caller promised and to what the leading dimension keeps. */
static uint32_t
rely_on(const lt_cand *c, uint32_t promised, int64_t ld, int32_t type)
{
    uint64_t a = c->vec;
    a = promised < a ? promised : a;
    a = align_of(ld_bytes(ld, type)) < a ? align_of(ld_bytes(ld, type)) : a;
    return a >= 1 ? pow2_floor(a) : 1;
}

/* ---- algorithms: a candidate's 64 bytes ----
 * data[0] magic << 32 | candidate index, data[1] the type signature it serves,
 * data[2] split-K | reduction << 32, data[3] log2 of the alignments relied on
 * (A, B, C, D, bias: a byte each), data[4] tile | stages << 32, data[5] the
 * algorithm id, data[7] a check over the rest. */

#define LT_ALGO_MAGIC 0x534c5443u /* "CTLS" */

typedef struct {
    int cand;
    uint32_t align[5]; /* A, B, C, D, bias (0: no bias) */
} lt_choice;

static uint64_t
signature(const lt_problem *p)
{
    return (uint64_t)(uint8_t)p->kind | (uint64_t)(uint8_t)p->a_type << 8 | (uint64_t)(uint8_t)p->b_type << 16 |
           (uint64_t)(uint8_t)p->c_type << 24 | (uint64_t)(uint8_t)p->d_type << 32 |
           (uint64_t)(uint8_t)p->compute << 40 | (uint64_t)(uint8_t)p->scale_type << 48 |
           (uint64_t)(p->epilogue == LT_EPILOGUE_BIAS ? (uint8_t)p->bias_type + 1u : 0u) << 56;
}

static uint64_t
algo_check(const lt_algo *a)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 7; i++) {
        h = (h ^ a->data[i]) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h;
}

static int
log2u(uint32_t v)
{
    int l = 0;
    while (v > 1) {
        v /= 2;
        l++;
    }
    return l;
}

static void
encode(const lt_problem *p, const lt_choice *ch, lt_algo *a)
{
    const lt_cand *c = &lt_cands[ch->cand];
    memset(a, 0, sizeof *a);
    a->data[0] = (uint64_t)LT_ALGO_MAGIC << 32 | (uint32_t)ch->cand;
    a->data[1] = signature(p);
    a->data[2] = (uint32_t)c->split_k | (uint64_t)c->reduction << 32;
    for (int i = 0; i < 5; i++) {
        a->data[3] |= (uint64_t)(ch->align[i] != 0 ? 1 + log2u(ch->align[i]) : 0) << (8 * i);
    }
    a->data[4] = c->tile | (uint64_t)c->stages << 32;
    a->data[5] = (uint32_t)c->id;
    a->data[7] = algo_check(a);
}

/* An algorithm the heuristic made (whatever the problem): 1 with its choice. */
static int
decode(const lt_algo *a, lt_choice *ch)
{
    int cand;
    if (a->data[0] >> 32 != LT_ALGO_MAGIC || a->data[7] != algo_check(a) || a->data[6] != 0) {
        return 0;
    }
    cand = (int)(uint32_t)a->data[0];
    if (cand < 0 || cand >= LT_CANDS) {
        return 0;
    }
    ch->cand = cand;
    for (int i = 0; i < 5; i++) {
        const unsigned l = (unsigned)(a->data[3] >> (8 * i)) & 0xFFu;
        ch->align[i] = l != 0 ? 1u << (l - 1) : 0;
    }
    return 1;
}

/* The alignments (bytes) of the preference, A B C D. */
static void
promised_of(const lt_pref_s *pref, uint32_t promised[4])
{
    for (int i = 0; i < 4; i++) {
        promised[i] = slot_u32(pref->v[P_ALIGN_A + i]);
    }
}

/* Candidate c for problem p under promised alignments: 1 with the choice, else 0. */
static int
choose(const lt_problem *p, int c, const uint32_t promised[4], const void *bias, lt_choice *ch)
{
    const lt_cand *cand = &lt_cands[c];
    const int64_t lds[4] = {p->lda, p->ldb, p->ldc, p->ldd};
    const int32_t types[4] = {p->a_type, p->b_type, p->c_type, p->d_type};
    const uint32_t least = kind_min_align(p->kind);
    ch->cand = c;
    for (int i = 0; i < 4; i++) {
        ch->align[i] = rely_on(cand, promised[i], lds[i], types[i]);
        if (ch->align[i] < least) {
            return 0;
        }
    }
    ch->align[4] = 0;
    if (p->epilogue == LT_EPILOGUE_BIAS) {
        /* the bias pointer's value tells the heuristic its alignment (cublasLt.h) */
        const uint32_t bias_align = align_of((uint64_t)(uintptr_t)bias);
        ch->align[4] = pow2_floor(bias_align < cand->vec ? bias_align : cand->vec);
        if (ch->align[4] < (uint32_t)(type_bits(p->bias_type) / 8)) {
            return 0;
        }
    }
    return 1;
}

/* Whether choice ch (decoded from an algorithm) serves problem p: 0, or
 * INVALID_VALUE with why. */
static int
serves(const lt_problem *p, const lt_algo *a, const lt_choice *ch, char *why, size_t why_len)
{
    const int64_t lds[4] = {p->lda, p->ldb, p->ldc, p->ldd};
    const int32_t types[4] = {p->a_type, p->b_type, p->c_type, p->d_type};
    static const char names[] = "ABCD";
    if (a->data[1] != signature(p)) {
        snprintf(why, why_len,
                 "the algorithm was made for another type combination or epilogue (its signature %016llx, the "
                 "problem's %016llx)",
                 (unsigned long long)a->data[1], (unsigned long long)signature(p));
        return LT_INVALID_VALUE;
    }
    for (int i = 0; i < 4; i++) {
        if (ch->align[i] < kind_min_align(p->kind) || align_of(ld_bytes(lds[i], types[i])) < ch->align[i]) {
            snprintf(why, why_len, "the algorithm relies on %u-byte aligned %c columns; ld %lld of %s breaks that",
                     ch->align[i], names[i], (long long)lds[i], type_name(types[i]));
            return LT_INVALID_VALUE;
        }
    }
    if ((p->epilogue == LT_EPILOGUE_BIAS) != (ch->align[4] != 0)) {
        snprintf(why, why_len, "the algorithm was made %s a bias epilogue", ch->align[4] != 0 ? "for" : "without");
        return LT_INVALID_VALUE;
    }
    return LT_OK;
}

/* ---- cublasLtMatmulAlgoGetHeuristic, AlgoCheck, ConfigGetAttribute ---- */

/* The device a call runs for: the current one, else the handle's. */
static int
call_device(const lt_handle_s *h)
{
    const int device = ckcsi_current_device();
    return device >= 0 ? device : h->device;
}

static int
check_objects(const char *call, const void *handle, const void *desc, const void *a, const void *b, const void *c,
              const void *d)
{
    if (!live_find(handle, OBJ_HANDLE, 0)) {
        return ckcsi_refuse(LT_NOT_INITIALIZED, call,
                            "%p is not a live cuBLASLt handle (CUBLAS_STATUS_NOT_INITIALIZED)", handle);
    }
    if (!live_find(desc, OBJ_DESC, 0)) {
        return not_live(call, "operationDesc", desc, OBJ_DESC);
    }
    if (!live_find(a, OBJ_LAYOUT, 0)) {
        return not_live(call, "Adesc", a, OBJ_LAYOUT);
    }
    if (!live_find(b, OBJ_LAYOUT, 0)) {
        return not_live(call, "Bdesc", b, OBJ_LAYOUT);
    }
    if (!live_find(c, OBJ_LAYOUT, 0)) {
        return not_live(call, "Cdesc", c, OBJ_LAYOUT);
    }
    if (!live_find(d, OBJ_LAYOUT, 0)) {
        return not_live(call, "Ddesc", d, OBJ_LAYOUT);
    }
    return LT_OK;
}

/* The heuristic's answer for p under a preference's values: up to max results. */
static int
heuristic(const lt_problem *p, const uint32_t promised[4], uint64_t max_ws, uint32_t mask, float max_waves,
          uint64_t impl_mask, int max, lt_result *results)
{
    int count = 0;
    const uint64_t flags = kind_impl_flags(p->kind);
    for (int c = 0; c < LT_CANDS && count < max; c++) {
        const lt_cand *cand = &lt_cands[c];
        lt_choice ch;
        size_t ws;
        float waves;
        if ((cand->reduction != LT_REDUCTION_NONE && (mask & cand->reduction) == 0) || (flags & ~impl_mask) != 0 ||
            !choose(p, c, promised, p->bias, &ch)) {
            continue;
        }
        ws = cand_workspace(cand, p);
        waves = cand_waves(cand, p);
        if (ws > max_ws || (max_waves > 0.0f && waves > max_waves)) {
            continue;
        }
        memset(&results[count], 0, sizeof results[count]);
        encode(p, &ch, &results[count].algo);
        results[count].workspace_size = ws;
        results[count].state = LT_OK;
        results[count].waves = waves;
        count++;
    }
    return count;
}

CKCSI_EXPORT int
cublasLtMatmulAlgoGetHeuristic(void *handle, void *desc, void *adesc, void *bdesc, void *cdesc, void *ddesc,
                               void *pref, int requested, lt_result *results, int *returned)
{
    static const char call[] = "cublasLtMatmulAlgoGetHeuristic";
    const lt_pref_s *pr = (const lt_pref_s *)pref;
    lt_problem p;
    char why[512];
    uint32_t promised[4];
    int s, count;
    if ((s = check_objects(call, handle, desc, adesc, bdesc, cdesc, ddesc)) != LT_OK) {
        return s;
    }
    if (!live_find(pref, OBJ_PREF, 0)) {
        return not_live(call, "preference", pref, OBJ_PREF);
    }
    if (requested <= 0 || results == NULL || returned == NULL) {
        return ckcsi_refuse(LT_INVALID_VALUE, call,
                            "requestedAlgoCount %d, heuristicResultsArray %p, returnAlgoCount %p: a count above 0 and "
                            "both arrays are needed (CUBLAS_STATUS_INVALID_VALUE)",
                            requested, (void *)results, (void *)returned);
    }
    *returned = 0;
    s = describe((const lt_desc_s *)desc, (const lt_layout_s *)adesc, (const lt_layout_s *)bdesc,
                 (const lt_layout_s *)cdesc, (const lt_layout_s *)ddesc, call_device((const lt_handle_s *)handle), &p,
                 why, sizeof why);
    if (s == LT_INVALID_VALUE) {
        return ckcsi_refuse(LT_INVALID_VALUE, call, "%s (CUBLAS_STATUS_INVALID_VALUE)", why);
    }
    if (s != LT_OK) {
        return ckcsi_refuse(LT_NOT_SUPPORTED, call, "%s: no algorithm (CUBLAS_STATUS_NOT_SUPPORTED, 0 results)", why);
    }
    promised_of(pr, promised);
    for (int i = 0; i < 4; i++) {
        if (promised[i] < kind_min_align(p.kind)) {
            return ckcsi_refuse(LT_NOT_SUPPORTED, call,
                                "the preference promises %c aligned to only %u bytes; %s kernels need %u: no algorithm "
                                "(CUBLAS_STATUS_NOT_SUPPORTED, 0 results)",
                                "ABCD"[i], promised[i], p.kind == KIND_IMMA ? "int8 IMMA" : "block-scaled",
                                kind_min_align(p.kind));
        }
    }
    if (slot_u32(pr->v[P_SEARCH_MODE]) != 0) {
        return ckcsi_refuse(LT_NOT_SUPPORTED, call, "search mode %u is not modeled by the stand-in",
                            slot_u32(pr->v[P_SEARCH_MODE]));
    }
    if (p.kind != KIND_IMMA && (((uintptr_t)p.a_scale | (uintptr_t)p.b_scale) % 16) != 0) {
        return ckcsi_refuse(LT_NOT_SUPPORTED, call,
                            "block scale pointers %p and %p must be 16-byte aligned: no algorithm "
                            "(CUBLAS_STATUS_NOT_SUPPORTED, 0 results)",
                            p.a_scale, p.b_scale);
    }
    count = heuristic(&p, promised, pr->v[P_MAX_WORKSPACE], slot_u32(pr->v[P_REDUCTION_MASK]),
                      slot_f32(pr->v[P_MAX_WAVES]), pr->v[P_IMPL_MASK], requested, results);
    if (count == 0) {
        return ckcsi_refuse(LT_NOT_SUPPORTED, call,
                            "no algorithm within the preference (max workspace %llu bytes, reduction mask 0x%x, "
                            "alignments %u/%u/%u/%u, bias %p): CUBLAS_STATUS_NOT_SUPPORTED, 0 results",
                            (unsigned long long)pr->v[P_MAX_WORKSPACE], slot_u32(pr->v[P_REDUCTION_MASK]),
                            promised[0], promised[1], promised[2], promised[3], p.bias);
    }
    *returned = count;
    return LT_OK;
}

/* An algorithm for a problem, as AlgoCheck and cublasLtMatmul judge it: 0 with
 * its choice, or the status with why. */
static int
judge_algo(const lt_problem *p, const lt_algo *algo, lt_choice *ch, char *why, size_t why_len)
{
    if (!decode(algo, ch)) {
        snprintf(why, why_len, "the algorithm is not one the heuristic returned (garbage or uninitialized bytes)");
        return LT_INVALID_VALUE;
    }
    return serves(p, algo, ch, why, why_len);
}

CKCSI_EXPORT int
cublasLtMatmulAlgoCheck(void *handle, void *desc, void *adesc, void *bdesc, void *cdesc, void *ddesc,
                        const lt_algo *algo, lt_result *result)
{
    static const char call[] = "cublasLtMatmulAlgoCheck";
    lt_problem p;
    lt_choice ch;
    lt_algo copy;
    char why[512];
    int s;
    if ((s = check_objects(call, handle, desc, adesc, bdesc, cdesc, ddesc)) != LT_OK) {
        return s;
    }
    if (algo == NULL || result == NULL) {
        return ckcsi_refuse(LT_INVALID_VALUE, call, "algo %p, result %p: both are needed", (const void *)algo,
                            (void *)result);
    }
    copy = *algo; /* algo may point to result->algo */
    s = describe((const lt_desc_s *)desc, (const lt_layout_s *)adesc, (const lt_layout_s *)bdesc,
                 (const lt_layout_s *)cdesc, (const lt_layout_s *)ddesc, call_device((const lt_handle_s *)handle), &p,
                 why, sizeof why);
    if (s == LT_OK) {
        s = judge_algo(&p, &copy, &ch, why, sizeof why);
    }
    /* The check's answer, not a refusal: nothing logged. */
    if (s != LT_OK) {
        return s;
    }
    result->workspace_size = cand_workspace(&lt_cands[ch.cand], &p);
    result->state = LT_OK;
    result->waves = cand_waves(&lt_cands[ch.cand], &p);
    memset(result->reserved, 0, sizeof result->reserved);
    return LT_OK;
}

CKCSI_EXPORT int
cublasLtMatmulAlgoConfigGetAttribute(const lt_algo *algo, int attr, void *buf, size_t size, size_t *written)
{
    static const char call[] = "cublasLtMatmulAlgoConfigGetAttribute";
    uint64_t slots[C_COUNT];
    lt_choice ch;
    if (algo == NULL || !decode(algo, &ch)) {
        return ckcsi_refuse(LT_INVALID_VALUE, call, "algo %p is not one the heuristic returned", (const void *)algo);
    }
    memset(slots, 0, sizeof slots);
    {
        const int32_t id = (int32_t)algo->data[5], split = (int32_t)(uint32_t)algo->data[2];
        const uint32_t tile = (uint32_t)algo->data[4], stages = (uint32_t)(algo->data[4] >> 32),
                       reduction = (uint32_t)(algo->data[2] >> 32);
        slot_set(&slots[C_ID], &id, 4);
        slot_set(&slots[C_TILE], &tile, 4);
        slot_set(&slots[C_SPLITK], &split, 4);
        slot_set(&slots[C_REDUCTION], &reduction, 4);
        slot_set(&slots[C_STAGES], &stages, 4);
    }
    return get_attribute(call, slots, config_size, C_COUNT, attr, buf, size, written);
}

/* ---- cublasLtMatmul ---- */

/* A queued GEMM: everything by value (the descriptors may be destroyed before it runs). */
typedef struct {
    int kind;
    int32_t split_k;
    int32_t pointer_mode;
    int32_t c_type, d_type, bias_type;
    int64_t m, n, k, lda, ldb, ldc, ldd;
    const void *a, *b, *c;
    void *d;
    const uint8_t *a_scale, *b_scale;
    const void *bias;
    const void *alpha_ptr, *beta_ptr; /* device pointer mode: read when the GEMM runs */
    int32_t alpha_i, beta_i;          /* host pointer mode: read at the call */
    float alpha_f, beta_f;
    unsigned char *ws;
    size_t ws_need;
} lt_work;

static float
load_float(const void *p, int32_t type, int64_t i)
{
    if (type == LT_R_16BF) {
        return ckc_bf16_to_f32(((const uint16_t *)p)[i]);
    }
    if (type == LT_R_16F) {
        return ckc_f16_to_f32(((const uint16_t *)p)[i]);
    }
    return ((const float *)p)[i];
}

static void
store_float(void *p, int32_t type, int64_t i, float v)
{
    if (type == LT_R_16BF) {
        ((uint16_t *)p)[i] = ckc_f32_to_bf16(v);
    } else if (type == LT_R_16F) {
        ((uint16_t *)p)[i] = ckc_f32_to_f16(v);
    } else {
        ((float *)p)[i] = v;
    }
}

/* Scale bytes the emulated device reads one way and a GPU another (logged,
 * not refused: the GEMM runs as on the emulated device). */
enum {
    SCALE_SIGNED_UE4M3 = 1, /* VEC16_UE4M3 scales are unsigned: bit 7 set means no negative scale on a GPU */
    SCALE_E8M0_NAN = 2,     /* E8M0 255 is NaN (OCP MX); the emulated device reads infinity */
    SCALE_E8M0_ZERO = 4     /* E8M0 0 is 2^-127 (OCP MX); the emulated device reads 0.0 (non-zero codes only) */
};

/* Column col of a block-scaled operand (k values, column-major with ld), decoded
 * as blas_emu.c decodes a row: code times its block's scale, exact in float32.
 * Returns the SCALE_* found. */
static unsigned
decode_column(int kind, const uint8_t *codes, const uint8_t *scales, int64_t ld, int64_t col, int64_t k, float *v)
{
    unsigned found = 0;
    if (kind == KIND_NVFP4) {
        const int64_t scale_cols = k / CKC_NVFP4_BLOCK;
        const uint8_t *bytes = codes + col * (ld / 2);
        for (int64_t t = 0; t < k; t += 2) {
            const uint8_t sb = scales[ckc_nvfp4_scale_offset(col, t / CKC_NVFP4_BLOCK, scale_cols)];
            const float s = ckc_e4m3_to_f32(sb);
            found |= (sb & 0x80u) != 0 ? SCALE_SIGNED_UE4M3 : 0u;
            /* high nibble first, as the emulated device reads them */
            v[t] = ckc_e2m1_to_f32(ckc_nvfp4_unpack_even(bytes[t / 2], 1)) * s;
            v[t + 1] = ckc_e2m1_to_f32(ckc_nvfp4_unpack_odd(bytes[t / 2], 1)) * s;
        }
    } else {
        const int64_t scale_cols = k / CKC_MXFP8_BLOCK;
        const uint8_t *bytes = codes + col * ld;
        for (int64_t t = 0; t < k; t++) {
            const uint8_t sb = scales[ckc_nvfp4_scale_offset(col, t / CKC_MXFP8_BLOCK, scale_cols)];
            const float s = ckc_e8m0_to_f32(sb);
            found |= sb == 255 ? SCALE_E8M0_NAN : 0u;
            found |= sb == 0 && (bytes[t] & 0x7Fu) != 0 ? SCALE_E8M0_ZERO : 0u;
            v[t] = ckc_mxfp8_decoded(bytes[t], s);
        }
    }
    return found;
}

/* Sum of x[t] * y[t] in float32 in t's order from +0 (blas_emu.c's sum), or,
 * for a split-K algorithm, per K chunk (each from +0), the chunks' sums then
 * added in order. */
static float
dot_f32(const float *x, const float *y, int64_t k, int32_t split_k)
{
    float total = 0.0f;
    int64_t chunk;
    if (split_k <= 1) {
        float acc = 0.0f;
        for (int64_t t = 0; t < k; t++) {
            acc += x[t] * y[t];
        }
        return acc;
    }
    chunk = (k + split_k - 1) / split_k;
    for (int64_t t0 = 0; t0 < k; t0 += chunk) {
        const int64_t t1 = t0 + chunk < k ? t0 + chunk : k;
        float acc = 0.0f;
        for (int64_t t = t0; t < t1; t++) {
            acc += x[t] * y[t];
        }
        total = t0 == 0 ? acc : total + acc;
    }
    return total;
}

static void
run_scaled(const lt_work *w)
{
    float alpha = w->alpha_f, beta = w->beta_f;
    float *va, *vb;
    unsigned found = 0;
    if (w->pointer_mode == LT_POINTER_DEVICE) {
        memcpy(&alpha, w->alpha_ptr, sizeof alpha);
        memcpy(&beta, w->beta_ptr, sizeof beta);
    }
    va = (float *)malloc(((size_t)w->m * (size_t)w->k + (size_t)w->k + 1) * sizeof(float));
    if (va == NULL) {
        return; /* as on the emulated device: the output stays unwritten */
    }
    vb = va + w->m * w->k;
    for (int64_t i = 0; i < w->m; i++) {
        found |= decode_column(w->kind, (const uint8_t *)w->a, w->a_scale, w->lda, i, w->k, va + i * w->k);
    }
    for (int64_t j = 0; j < w->n; j++) {
        found |= decode_column(w->kind, (const uint8_t *)w->b, w->b_scale, w->ldb, j, w->k, vb);
        for (int64_t i = 0; i < w->m; i++) {
            const float acc = dot_f32(va + i * w->k, vb, w->k, w->split_k);
            float v = alpha * acc;
            if (beta != 0.0f) {
                v = v + beta * load_float(w->c, w->c_type, i + j * w->ldc);
            }
            /* blas_emu.c adds 0.0f without a bias: the same bits here */
            v = v + (w->bias != NULL ? load_float(w->bias, w->bias_type, i) : 0.0f);
            store_float(w->d, w->d_type, i + j * w->ldd, v);
        }
    }
    free(va);
    if (found != 0) {
        (void)ckcsi_refuse(CKCSI_SUCCESS, "cublasLtMatmul",
                           "block scales a GPU reads otherwise than the emulated device (logged, the GEMM ran as "
                           "there):%s%s%s",
                           (found & SCALE_SIGNED_UE4M3) != 0 ? " a VEC16_UE4M3 scale with its sign bit set "
                                                               "(UE4M3 is unsigned);" : "",
                           (found & SCALE_E8M0_NAN) != 0 ? " an E8M0 scale 255 (NaN on a GPU, infinity here);" : "",
                           (found & SCALE_E8M0_ZERO) != 0 ? " an E8M0 scale 0 on non-zero codes (2^-127 on a GPU, "
                                                            "0 here);" : "");
    }
}

static void
run_imma(const lt_work *w)
{
    int32_t alpha = w->alpha_i, beta = w->beta_i;
    const int8_t *a = (const int8_t *)w->a, *b = (const int8_t *)w->b;
    const int64_t chunk = w->split_k > 1 ? (w->k + w->split_k - 1) / w->split_k : (w->k > 0 ? w->k : 1);
    if (w->pointer_mode == LT_POINTER_DEVICE) {
        memcpy(&alpha, w->alpha_ptr, sizeof alpha);
        memcpy(&beta, w->beta_ptr, sizeof beta);
    }
    for (int64_t j = 0; j < w->n; j++) {
        for (int64_t i = 0; i < w->m; i++) {
            int64_t acc = 0; /* exact: the order does not matter, split or not */
            uint32_t r;
            int32_t out;
            for (int64_t t0 = 0; t0 < w->k; t0 += chunk) {
                const int64_t t1 = t0 + chunk < w->k ? t0 + chunk : w->k;
                int64_t part = 0;
                for (int64_t t = t0; t < t1; t++) {
                    part += (int32_t)a[i * w->lda + t] * (int32_t)b[j * w->ldb + t];
                }
                acc += part;
            }
            /* int32 arithmetic wraps, as the emulated device's (int32_t) of its int64 sum */
            r = (uint32_t)alpha * (uint32_t)(uint64_t)acc;
            if (beta != 0) {
                int32_t c;
                memcpy(&c, (const int32_t *)w->c + i + j * w->ldc, sizeof c);
                r += (uint32_t)beta * (uint32_t)c;
            }
            memcpy(&out, &r, sizeof out);
            ((int32_t *)w->d)[i + j * w->ldd] = out;
        }
    }
}

static void
run_gemm(const void *ctx)
{
    const lt_work *w = (const lt_work *)ctx;
    if (w->ws_need > 0) {
        /* a kernel uses its workspace: touch both ends of what it needs */
        const size_t n = w->ws_need < 64 ? w->ws_need : 64;
        memset(w->ws, 0x5A, n);
        memset(w->ws + w->ws_need - n, 0x5A, n);
    }
    if (w->kind == KIND_IMMA) {
        run_imma(w);
    } else {
        run_scaled(w);
    }
}

/* Whether p is aligned to a bytes. */
static int
aligned(const void *p, uint32_t a)
{
    return a <= 1 || (uintptr_t)p % a == 0;
}

CKCSI_EXPORT int
cublasLtMatmul(void *handle, void *desc, const void *alpha, const void *A, void *adesc, const void *B, void *bdesc,
               const void *beta, const void *C, void *cdesc, void *D, void *ddesc, const lt_algo *algo,
               void *workspace, size_t workspace_bytes, void *stream)
{
    static const char call[] = "cublasLtMatmul";
    const lt_handle_s *h = (const lt_handle_s *)handle;
    const int device = ckcsi_current_device();
    lt_problem p;
    lt_choice ch = {0, {0, 0, 0, 0, 0}};
    lt_algo chosen;
    lt_work w;
    char why[512];
    int s;
    if ((s = check_objects(call, handle, desc, adesc, bdesc, cdesc, ddesc)) != LT_OK) {
        return s;
    }
    if (device < 0) {
        return ckcsi_refuse(LT_NOT_INITIALIZED, call,
                            "no current CUDA context (CUDA_ERROR_INVALID_CONTEXT): CUBLAS_STATUS_NOT_INITIALIZED");
    }
    if (device != h->device) {
        return ckcsi_refuse(LT_INVALID_VALUE, call,
                            "the handle was made on device %d, the current device is %d (a cuBLASLt handle serves "
                            "the device current at cublasLtCreate)",
                            h->device, device);
    }
    if (alpha == NULL || beta == NULL) {
        return ckcsi_refuse(LT_INVALID_VALUE, call, "alpha %p, beta %p: both are needed", alpha, beta);
    }
    s = describe((const lt_desc_s *)desc, (const lt_layout_s *)adesc, (const lt_layout_s *)bdesc,
                 (const lt_layout_s *)cdesc, (const lt_layout_s *)ddesc, device, &p, why, sizeof why);
    if (s != LT_OK) {
        return ckcsi_refuse(s, call, "%s (%s)", why, cublasLtGetStatusName(s));
    }
    if (algo != NULL) {
        chosen = *algo;
        if ((s = judge_algo(&p, &chosen, &ch, why, sizeof why)) != LT_OK) {
            return ckcsi_refuse(s, call, "%s (%s)", why, cublasLtGetStatusName(s));
        }
    } else {
        /* cuBLASLt's implicit heuristic: the actual pointers' alignments and workspace */
        const uint32_t promised[4] = {align_of((uintptr_t)A), align_of((uintptr_t)B), align_of((uintptr_t)C),
                                      align_of((uintptr_t)D)};
        lt_result r;
        if (heuristic(&p, promised, workspace_bytes, LT_REDUCTION_MASK, 0.0f, ~(uint64_t)0, 1, &r) == 0) {
            return ckcsi_refuse(LT_NOT_SUPPORTED, call,
                                "algo NULL and no algorithm fits (CUBLAS_STATUS_NOT_SUPPORTED)");
        }
        chosen = r.algo;
        (void)decode(&chosen, &ch);
    }
    memset(&w, 0, sizeof w);
    w.ws_need = cand_workspace(&lt_cands[ch.cand], &p);
    if (workspace_bytes < w.ws_need || (w.ws_need > 0 && workspace == NULL)) {
        return ckcsi_refuse(LT_INVALID_VALUE, call,
                            "the algorithm needs %zu bytes of workspace; it was given %zu at %p "
                            "(CUBLAS_STATUS_INVALID_VALUE)",
                            w.ws_need, workspace_bytes, workspace);
    }
    {
        const void *ptrs[4] = {A, B, C, D};
        int32_t beta_i = 1;
        float beta_f = 1.0f;
        int c_unread;
        memcpy(p.kind == KIND_IMMA ? (void *)&beta_i : (void *)&beta_f, beta, 4);
        /* a host-mode beta of 0: C is not read, and may be NULL */
        c_unread = p.pointer_mode == LT_POINTER_HOST && (p.kind == KIND_IMMA ? beta_i == 0 : beta_f == 0.0f);
        for (int i = 0; i < 4; i++) {
            if (ptrs[i] == NULL && !(i == 2 && c_unread) && p.m > 0 && p.n > 0 && (p.k > 0 || i >= 2)) {
                return ckcsi_refuse(LT_INVALID_VALUE, call, "matrix %c is NULL", "ABCD"[i]);
            }
            if (ptrs[i] != NULL && !aligned(ptrs[i], ch.align[i])) {
                return ckcsi_refuse(LT_INVALID_VALUE, call,
                                    "matrix %c at %p: the algorithm relies on %u-byte alignment, which the preference "
                                    "promised (CUBLAS_STATUS_INVALID_VALUE)",
                                    "ABCD"[i], ptrs[i], ch.align[i]);
            }
        }
    }
    if (C == D && C != NULL && p.ldc != p.ldd) {
        return ckcsi_refuse(LT_INVALID_VALUE, call, "in place (C == D at %p) with ldc %lld != ldd %lld", D,
                            (long long)p.ldc, (long long)p.ldd);
    }
    if (p.epilogue == LT_EPILOGUE_BIAS && (p.bias == NULL || !aligned(p.bias, ch.align[4]))) {
        return ckcsi_refuse(LT_INVALID_VALUE, call,
                            "bias at %p: the algorithm relies on a non-NULL bias aligned to %u bytes, as the bias "
                            "pointer was when the heuristic chose it (CUBLAS_STATUS_INVALID_VALUE)",
                            p.bias, ch.align[4]);
    }
    if (p.kind != KIND_IMMA && (p.a_scale == NULL || p.b_scale == NULL || !aligned(p.a_scale, 16) ||
                                !aligned(p.b_scale, 16))) {
        return ckcsi_refuse(LT_INVALID_VALUE, call,
                            "block scales at %p and %p: both needed, 16-byte aligned (CUBLAS_STATUS_INVALID_VALUE)",
                            p.a_scale, p.b_scale);
    }
    if (p.pointer_mode == LT_POINTER_DEVICE && (!aligned(alpha, 4) || !aligned(beta, 4))) {
        return ckcsi_refuse(LT_INVALID_VALUE, call, "device alpha %p / beta %p not 4-byte aligned", alpha, beta);
    }
    s = ckcsi_stream_check(stream, call);
    if (s != 0) {
        return ckcsi_refuse(LT_EXECUTION_FAILED, call,
                            "stream %p refused (CUresult %d): CUBLAS_STATUS_EXECUTION_FAILED", stream, s);
    }
    if (ckcsi_inject_fires(CKCSI_INJECT_BLAS_FAILED)) {
        return ckcsi_refuse(LT_EXECUTION_FAILED, call, "injected failure (CUBLAS_STATUS_EXECUTION_FAILED)");
    }
    w.kind = p.kind;
    w.split_k = lt_cands[ch.cand].split_k;
    w.pointer_mode = p.pointer_mode;
    w.c_type = p.c_type;
    w.d_type = p.d_type;
    w.bias_type = p.bias_type;
    w.m = p.m;
    w.n = p.n;
    w.k = p.k;
    w.lda = p.lda;
    w.ldb = p.ldb;
    w.ldc = p.ldc;
    w.ldd = p.ldd;
    w.a = A;
    w.b = B;
    w.c = C;
    w.d = D;
    w.a_scale = (const uint8_t *)p.a_scale;
    w.b_scale = (const uint8_t *)p.b_scale;
    w.bias = p.epilogue == LT_EPILOGUE_BIAS ? p.bias : NULL;
    w.ws = (unsigned char *)workspace;
    if (p.pointer_mode == LT_POINTER_DEVICE) {
        w.alpha_ptr = alpha;
        w.beta_ptr = beta;
    } else if (p.kind == KIND_IMMA) {
        memcpy(&w.alpha_i, alpha, sizeof w.alpha_i);
        memcpy(&w.beta_i, beta, sizeof w.beta_i);
    } else {
        memcpy(&w.alpha_f, alpha, sizeof w.alpha_f);
        memcpy(&w.beta_f, beta, sizeof w.beta_f);
    }
    s = ckcsi_stream_work(stream, call, run_gemm, &w, sizeof w);
    if (s != 0) {
        return ckcsi_refuse(LT_EXECUTION_FAILED, call,
                            "the GEMM could not be queued on stream %p (CUresult %d): CUBLAS_STATUS_EXECUTION_FAILED",
                            stream, s);
    }
    return LT_OK;
}
