/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU runtime seam on the CUDA runtime (linked statically: its own error
 * state, so every check happens here, in the module that launched).  Each
 * failing call raises with the call, file and line, the CUDA error's name and
 * text. */
#if defined(CKC_WITH_CUDA)

#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gpu/launch.h"
#include "platform/mapped_file.h"
#include "platform/threads.h"
#include "gpu.h"
#include "runtime.h"

#if defined(_MSC_VER)
#define CKC_THREAD_LOCAL __declspec(thread)
#else
#define CKC_THREAD_LOCAL _Thread_local
#endif

/* Errors that leave the context unusable: every later call returns them.  They
 * come from work that ran before (asynchronously), not from the call that
 * returns them. */
static int
is_sticky(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorUnknown:
        return 1;
    default:
        return 0;
    }
}

/* Also takes a non-sticky error off the runtime's last-error slot, where the next
 * launch check would otherwise blame it on a later op. */
static void
set_device_error(ckc_error *err, cudaError_t e)
{
    (void)cudaGetLastError();
    snprintf(err->device_error, sizeof err->device_error, "%s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
}

/* A failed runtime call: a sticky error is the device's (an earlier fault, blamed
 * through the flight record: CKC_ERR_DEVICE); any other is this call's. */
static ckc_status
cuda_failed(ckc_error *err, cudaError_t e, const char *call, const char *file, int line, const char *func)
{
    ckc_error_set(err, is_sticky(e) ? CKC_ERR_DEVICE : CKC_ERR_RUNTIME, file, line, func, "%s failed: %s: %s", call,
                  cudaGetErrorName(e), cudaGetErrorString(e));
    set_device_error(err, e);
    return err->status;
}

#define CKC_CUDA_TRY(err, call)                                                                   \
    do {                                                                                          \
        const cudaError_t ckc_cuda_ = (call);                                                     \
        if (ckc_cuda_ != cudaSuccess) {                                                           \
            return cuda_failed((err), ckc_cuda_, #call, __FILE__, __LINE__, __func__);            \
        }                                                                                         \
    } while (0)

ckc_status
ckc_gpu_launch_status(const char *kernel, ckc_error *err)
{
    const cudaError_t e = cudaGetLastError();
    const ckc_status status = is_sticky(e) ? CKC_ERR_DEVICE : CKC_ERR_LAUNCH;
    if (e == cudaSuccess) {
        return CKC_OK;
    }
    CKC_FAIL(err, status, "launch of %s failed: %s: %s", kernel, cudaGetErrorName(e), cudaGetErrorString(e));
    set_device_error(err, e);
    return status;
}

ckc_status
ckc_gpu_memset_async(void *p, int value, size_t bytes, uintptr_t stream, ckc_error *err)
{
    CKC_CUDA_TRY(err, cudaMemsetAsync(p, value, bytes, (cudaStream_t)stream));
    return CKC_OK;
}

ckc_status
ckc_gpu_versions(int *driver, int *runtime, ckc_error *err)
{
    CKC_CUDA_TRY(err, cudaDriverGetVersion(driver));
    CKC_CUDA_TRY(err, cudaRuntimeGetVersion(runtime));
    return CKC_OK;
}

ckc_status
ckc_gpu_device_enter(int device, ckc_gpu_device_guard *guard, ckc_error *err)
{
    CKC_CUDA_TRY(err, cudaGetDevice(&guard->previous));
    if (guard->previous != device) {
        CKC_CUDA_TRY(err, cudaSetDevice(device));
    }
    return CKC_OK;
}

void
ckc_gpu_device_leave(const ckc_gpu_device_guard *guard)
{
    int current = guard->previous;
    if (cudaGetDevice(&current) == cudaSuccess && current != guard->previous) {
        (void)cudaSetDevice(guard->previous);
    }
}

/* ---- what the fault checks need ---- */

/* Stored raw: formatting happens only when a record or a report needs it. */
static CKC_THREAD_LOCAL ckc_gpu_launch_info t_log;

void
ckc_gpu_begin_op(const char *op)
{
    (void)op;
    t_log.launches = 0;
    t_log.kernel = NULL;
}

void
ckc_gpu_note_launch(const char *kernel, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz)
{
    t_log.launches++;
    t_log.kernel = kernel;
    t_log.grid[0] = gx;
    t_log.grid[1] = gy;
    t_log.grid[2] = gz;
    t_log.block[0] = bx;
    t_log.block[1] = by;
    t_log.block[2] = bz;
}

void
ckc_gpu_launch_log(ckc_gpu_launch_info *info)
{
    *info = t_log;
}

ckc_status
ckc_gpu_event_record_new(uintptr_t stream, ckc_gpu_event *event, ckc_error *err)
{
    cudaEvent_t e;
    CKC_CUDA_TRY(err, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    const cudaError_t recorded = cudaEventRecord(e, (cudaStream_t)stream);
    if (recorded != cudaSuccess) {
        (void)cudaEventDestroy(e);
        return cuda_failed(err, recorded, "cudaEventRecord", __FILE__, __LINE__, __func__);
    }
    *event = (ckc_gpu_event)e;
    return CKC_OK;
}

void
ckc_gpu_event_destroy(ckc_gpu_event event)
{
    (void)cudaEventDestroy((cudaEvent_t)event);
}

static int
query_result(cudaError_t e, const char *call, ckc_error *err)
{
    if (e == cudaSuccess) {
        return 1;
    }
    if (e == cudaErrorNotReady) {
        return 0;
    }
    CKC_FAIL(err, CKC_ERR_DEVICE, "%s reports a fault: %s: %s", call, cudaGetErrorName(e), cudaGetErrorString(e));
    set_device_error(err, e);
    return -1;
}

int
ckc_gpu_event_query(ckc_gpu_event event, ckc_error *err)
{
    return query_result(cudaEventQuery((cudaEvent_t)event), "cudaEventQuery", err);
}

int
ckc_gpu_stream_query(uintptr_t stream, ckc_error *err)
{
    return query_result(cudaStreamQuery((cudaStream_t)stream), "cudaStreamQuery", err);
}

ckc_status
ckc_gpu_copy_h2d_async(void *dst, const void *src, size_t bytes, uintptr_t stream, ckc_error *err)
{
    const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)stream);
    if (e != cudaSuccess) {
        CKC_FAIL(err, is_sticky(e) ? CKC_ERR_DEVICE : CKC_ERR_LAUNCH, "cudaMemcpyAsync failed: %s: %s",
                 cudaGetErrorName(e), cudaGetErrorString(e));
        set_device_error(err, e);
        return err->status;
    }
    return CKC_OK;
}

const char *
ckc_gpu_host_memory(const void *p, size_t bytes)
{
    struct cudaPointerAttributes attributes;
    unsigned int flags;
    int file;
    if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return "unknown";
    }
    if (attributes.type == cudaMemoryTypeHost) {
        /* cudaHostGetFlags knows only cudaHostAlloc'd memory: registered memory fails it. */
        if (cudaHostGetFlags(&flags, (void *)p) == cudaSuccess) {
            return "pinned";
        }
        (void)cudaGetLastError();
        return "registered";
    }
    if (attributes.type != cudaMemoryTypeUnregistered) {
        return "unknown"; /* device or managed memory as a "host" source */
    }
    file = ckc_host_range_is_file_mapped(p, bytes);
    return file > 0 ? "file-mapped" : (file == 0 ? "pageable" : "unknown");
}

/* Host memory the devices write completion marks into: the flight record's
 * file mapping (registered, when the OS allows) or pinned words.  A few ranges
 * at most, each tried once; published with count, so that every op's lookup
 * takes no lock. */
#define CKC_MAX_DEVICES 64
#define CKC_HOST_RANGES 8

typedef struct {
    char *base;
    size_t bytes;
    int mapped;                             /* 1: the devices can write it; 0: refused */
    void *volatile device_base[CKC_MAX_DEVICES]; /* per device, filled on first use */
} host_range;

static ckc_mutex ranges_lock = CKC_MUTEX_INIT;
static host_range ranges[CKC_HOST_RANGES];
static ckc_atomic_counter range_count;

/* The range holding [p, p + bytes), or NULL. */
static host_range *
find_range(const void *p, size_t bytes)
{
    const long n = ckc_atomic_load(&range_count);
    for (long k = 0; k < n; k++) {
        host_range *h = &ranges[k];
        if ((const char *)p >= h->base && (const char *)p + bytes <= h->base + h->bytes) {
            return h;
        }
    }
    return NULL;
}

/* Adds a range (caller holds ranges_lock); NULL when the table is full. */
static host_range *
add_range(void *base, size_t bytes, int mapped)
{
    const long n = ckc_atomic_load(&range_count);
    host_range *h;
    if (n == CKC_HOST_RANGES) {
        return NULL;
    }
    h = &ranges[n];
    h->base = base;
    h->bytes = bytes;
    h->mapped = mapped;
    ckc_atomic_store(&range_count, n + 1);
    return h;
}

int
ckc_gpu_map_host(void *base, size_t bytes)
{
    const host_range *h = find_range(base, bytes);
    if (h == NULL) {
        ckc_mutex_lock(&ranges_lock);
        h = find_range(base, bytes);
        if (h == NULL) {
            const cudaError_t e =
                cudaHostRegister(base, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
            (void)cudaGetLastError(); /* a refusal is an answer, not an error for the next launch check */
            h = add_range(base, bytes, e == cudaSuccess);
        }
        ckc_mutex_unlock(&ranges_lock);
    }
    return h != NULL && h->mapped;
}

void *
ckc_gpu_alloc_mapped_host(size_t bytes)
{
    void *p = NULL;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    ckc_mutex_lock(&ranges_lock);
    if (add_range(p, bytes, 1) == NULL) {
        (void)cudaFreeHost(p);
        p = NULL;
    }
    ckc_mutex_unlock(&ranges_lock);
    return p;
}

/* Where device sees h (NULL when it cannot). */
static char *
device_view(host_range *h, int device)
{
    void *d = NULL;
    if (device < 0 || device >= CKC_MAX_DEVICES) {
        return NULL;
    }
    d = ckc_atomic_load_ptr(&h->device_base[device]);
    if (d == NULL) {
        /* The current device is `device` (marks.c entered it). */
        if (cudaHostGetDevicePointer(&d, h->base, 0) != cudaSuccess) {
            (void)cudaGetLastError();
            return NULL;
        }
        ckc_atomic_store_ptr(&h->device_base[device], d);
    }
    return d;
}

uint64_t *
ckc_gpu_device_word(uint64_t *word, int device)
{
    host_range *h = find_range(word, sizeof *word);
    char *view = h != NULL && h->mapped ? device_view(h, device) : NULL;
    return view != NULL ? (uint64_t *)(view + ((char *)word - h->base)) : NULL;
}

ckc_status
ckc_gpu_write_value64(uint64_t *word, uint64_t value, uintptr_t stream, int device, ckc_error *err)
{
    uint64_t *device_word = ckc_gpu_device_word(word, device);
    const ckc_done_mark m = {device_word, value, NULL, NULL}; /* one block: no arrival counter */
    if (device_word == NULL) {
        return CKC_FAIL(err, CKC_ERR_RUNTIME, "device %d cannot write the completion word %p", device, (void *)word);
    }
    return ckc_gpu_flight_mark(&m, stream, err);
}

/* Per device, published once allocated: every op's lookup takes no lock. */
static void *volatile arrivals[CKC_MAX_DEVICES];

uint32_t *
ckc_gpu_mark_arrivals(int device, size_t count)
{
    uint32_t *a;
    if (device < 0 || device >= CKC_MAX_DEVICES) {
        return NULL;
    }
    a = (uint32_t *)ckc_atomic_load_ptr(&arrivals[device]);
    if (a != NULL) {
        return a;
    }
    ckc_mutex_lock(&ranges_lock);
    a = (uint32_t *)ckc_atomic_load_ptr(&arrivals[device]);
    if (a == NULL) {
        void *p = NULL;
        /* Zeroed once and waited for: cudaMemset runs on the legacy stream, which
         * does not order a non-blocking stream's kernels (torch's side streams). */
        if (cudaMalloc(&p, count * sizeof *a) == cudaSuccess && cudaMemset(p, 0, count * sizeof *a) == cudaSuccess &&
            cudaStreamSynchronize(0) == cudaSuccess) {
            a = p;
            ckc_atomic_store_ptr(&arrivals[device], a);
        } else {
            (void)cudaGetLastError(); /* marks fall back to separate kernels; not an error of the next launch */
            if (p != NULL) {
                (void)cudaFree(p);
            }
        }
    }
    ckc_mutex_unlock(&ranges_lock);
    return a;
}

uint32_t *
ckc_gpu_mark_arrivals_known(int device)
{
    return device >= 0 && device < CKC_MAX_DEVICES ? (uint32_t *)ckc_atomic_load_ptr(&arrivals[device]) : NULL;
}

int
ckc_gpu_host_mapped(const void *base, size_t bytes)
{
    const host_range *h = find_range(base, bytes);
    return h == NULL ? -1 : h->mapped;
}

int
ckc_gpu_stream_capture(uintptr_t stream, uint64_t *capture_id)
{
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
#if CUDART_VERSION >= 13000
    const cudaError_t e = cudaStreamGetCaptureInfo((cudaStream_t)stream, &status, &id, NULL, NULL, NULL, NULL);
#else
    const cudaError_t e = cudaStreamGetCaptureInfo((cudaStream_t)stream, &status, &id, NULL, NULL, NULL);
#endif
    *capture_id = 0;
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* an answer, not an error of the next launch check */
        return 1;
    }
    *capture_id = (uint64_t)id;
    return status != cudaStreamCaptureStatusNone;
}

#endif /* CKC_WITH_CUDA */
