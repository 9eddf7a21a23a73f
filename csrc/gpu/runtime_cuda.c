/* The GPU runtime seam on the CUDA runtime (linked statically: its own error
 * state, so every check happens here, in the module that launched).  Each
 * failing call raises with the call, file and line, the CUDA error's name and
 * text. */
#if defined(CKC_WITH_CUDA)

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gpu/launch.h"
#include "platform/mapped_file.h"
#include "platform/threads.h"
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

/* The flight ring, as the devices see it.  Registered once, on first use (it
 * needs a CUDA context); when the OS or driver refuses to register the file
 * mapping, completions are written by a host function in stream order instead. */
#define CKC_MAX_DEVICES 64

static struct {
    ckc_mutex lock;
    int lock_ready;
    void *base;
    size_t bytes;
    int state; /* 0: not tried, 1: registered, -1: host-function fallback */
    char *device_base[CKC_MAX_DEVICES];
} flight_region;

void
ckc_gpu_set_flight_region(void *base, size_t bytes)
{
    if (!flight_region.lock_ready) {
        ckc_mutex_init(&flight_region.lock);
        flight_region.lock_ready = 1;
    }
    flight_region.base = base;
    flight_region.bytes = bytes;
}

static void
register_region(void)
{
    const cudaError_t e = cudaHostRegister(flight_region.base, flight_region.bytes,
                                           cudaHostRegisterMapped | cudaHostRegisterPortable);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        flight_region.state = -1;
        return;
    }
    flight_region.state = 1;
}

static char *
device_view(int device)
{
    void *d = NULL;
    if (device < 0 || device >= CKC_MAX_DEVICES) {
        return NULL;
    }
    if (flight_region.device_base[device] == NULL) {
        if (cudaHostGetDevicePointer(&d, flight_region.base, 0) != cudaSuccess) {
            (void)cudaGetLastError();
            return NULL;
        }
        flight_region.device_base[device] = d;
    }
    return flight_region.device_base[device];
}

typedef struct {
    uint64_t *word;
    uint64_t value;
} host_write;

static void CUDART_CB
write_from_host(void *data)
{
    host_write *w = data;
    ckc_atomic_store64(w->word, w->value);
    free(w);
}

ckc_status
ckc_gpu_write_value64(uint64_t *word, uint64_t value, uintptr_t stream, int device, ckc_error *err)
{
    char *view = NULL;
    host_write *w;
    cudaError_t e;
    if (flight_region.base == NULL) {
        return CKC_OK;
    }
    if (flight_region.state == 0) {
        ckc_mutex_lock(&flight_region.lock);
        if (flight_region.state == 0) {
            register_region();
        }
        ckc_mutex_unlock(&flight_region.lock);
    }
    if (flight_region.state == 1) {
        ckc_mutex_lock(&flight_region.lock);
        view = device_view(device);
        ckc_mutex_unlock(&flight_region.lock);
    }
    if (view != NULL) {
        return ckc_gpu_flight_mark((uint64_t *)(view + ((char *)word - (char *)flight_region.base)), value, stream,
                                   err);
    }
    w = malloc(sizeof *w);
    if (w == NULL) {
        return CKC_FAIL(err, CKC_ERR_MEMORY, "out of memory for a flight-record completion");
    }
    w->word = word;
    w->value = value;
    e = cudaLaunchHostFunc((cudaStream_t)stream, write_from_host, w);
    if (e != cudaSuccess) {
        free(w);
        CKC_FAIL(err, is_sticky(e) ? CKC_ERR_DEVICE : CKC_ERR_LAUNCH, "cudaLaunchHostFunc failed: %s: %s",
                 cudaGetErrorName(e), cudaGetErrorString(e));
        set_device_error(err, e);
        return err->status;
    }
    return CKC_OK;
}

#endif /* CKC_WITH_CUDA */
