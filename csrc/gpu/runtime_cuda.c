/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU runtime seam on the CUDA driver API (gpu/cuda_driver.c opens it at
 * run time): torch's primary context per device, the kernels' fatbins loaded
 * into it at the first launch there, launches on torch's stream.  The driver
 * answers each call at once (a launch's status included; there is no last-error
 * slot to clear): each failing call fails with the call, file and line, the
 * CUDA error's name and text, and a sticky error is the device's (an earlier
 * fault). */
#if defined(CKC_WITH_CUDA)

#include <stdio.h>
#include <string.h>

#include "platform/mapped_file.h"
#include "platform/threads.h"
#include "cuda_driver.h"
#include "fatbins.h"
#include "gpu.h"
#include "runtime.h"

#define CKC_MAX_DEVICES 64

/* The driver, or fail naming why there is none (gpu/cuda_driver.c). */
#define CKC_DRIVER(d, err)                                                                                       \
    const ckc_cuda_api *d = ckc_cuda_driver(err);                                                                \
    if (d == NULL) {                                                                                             \
        return (err)->status;                                                                                    \
    }

/* Errors that leave the context unusable: every later call returns them.  They
 * come from work that ran before (asynchronously), not from the call that
 * returns them. */
static int
is_sticky(CUresult e)
{
    switch (e) {
    case CKC_CU_ERROR_ILLEGAL_ADDRESS:
    case CKC_CU_ERROR_LAUNCH_FAILED:
    case CKC_CU_ERROR_HARDWARE_STACK_ERROR:
    case CKC_CU_ERROR_ILLEGAL_INSTRUCTION:
    case CKC_CU_ERROR_MISALIGNED_ADDRESS:
    case CKC_CU_ERROR_INVALID_ADDRESS_SPACE:
    case CKC_CU_ERROR_INVALID_PC:
    case CKC_CU_ERROR_ASSERT:
    case CKC_CU_ERROR_LAUNCH_TIMEOUT:
    case CKC_CU_ERROR_ECC_UNCORRECTABLE:
    case CKC_CU_ERROR_UNKNOWN:
        return 1;
    default:
        return 0;
    }
}

/* A failed driver call: a sticky error is the device's (an earlier fault, blamed
 * through the flight record: CKC_ERR_DEVICE); any other is this call's (`other`). */
static ckc_status
cuda_failed(ckc_error *err, CUresult e, ckc_status other, const char *call, const char *file, int line,
            const char *func)
{
    char text[300];
    ckc_cuda_error_text(e, text, sizeof text);
    ckc_error_set(err, is_sticky(e) ? CKC_ERR_DEVICE : other, file, line, func, "%s failed: %s", call, text);
    ckc_cuda_error_text(e, err->device_error, sizeof err->device_error);
    return err->status;
}

#define CKC_CUDA_TRY(err, call)                                                                                  \
    do {                                                                                                         \
        const CUresult ckc_cuda_ = (call);                                                                       \
        if (ckc_cuda_ != CKC_CU_SUCCESS) {                                                                       \
            return cuda_failed((err), ckc_cuda_, CKC_ERR_RUNTIME, #call, __FILE__, __LINE__, __func__);          \
        }                                                                                                        \
    } while (0)

ckc_status
ckc_gpu_memset_async(void *p, int value, size_t bytes, uintptr_t stream, ckc_error *err)
{
    CKC_DRIVER(d, err);
    CKC_CUDA_TRY(err, d->cuMemsetD8Async((CUdeviceptr)(uintptr_t)p, (unsigned char)value, bytes, (CUstream)stream));
    return CKC_OK;
}

ckc_status
ckc_gpu_versions(int *driver, int *runtime, ckc_error *err)
{
    const ckc_cuda_api *d = ckc_cuda_driver(NULL);
    (void)err;
    *driver = d != NULL ? d->version : 0; /* no usable driver: 0, and cuda_driver() says why */
    *runtime = ckc_kernels_cuda_version;
    return CKC_OK;
}

/* Primary contexts retained once per device, never released (torch's too). */
static ckc_mutex contexts_lock = CKC_MUTEX_INIT;
static CUcontext contexts[CKC_MAX_DEVICES];

static ckc_status
primary_context(const ckc_cuda_api *d, int device, CUcontext *ctx, ckc_error *err)
{
    CUresult e = CKC_CU_SUCCESS;
    if (device < 0 || device >= CKC_MAX_DEVICES) {
        return CKC_FAIL(err, CKC_ERR_RUNTIME, "device index %d is beyond %d", device, CKC_MAX_DEVICES);
    }
    ckc_mutex_lock(&contexts_lock);
    if (contexts[device] == NULL) {
        CUdevice dev = 0;
        e = d->cuDeviceGet(&dev, device);
        if (e == CKC_CU_SUCCESS) {
            e = d->cuDevicePrimaryCtxRetain(&contexts[device], dev);
        }
    }
    *ctx = contexts[device];
    ckc_mutex_unlock(&contexts_lock);
    if (e != CKC_CU_SUCCESS) {
        return cuda_failed(err, e, CKC_ERR_RUNTIME, "cuDevicePrimaryCtxRetain", __FILE__, __LINE__, __func__);
    }
    return CKC_OK;
}

/* The device's primary context made current (torch's, which its streams
 * belong to); the caller's context is restored on leaving. */
ckc_status
ckc_gpu_device_enter(int device, ckc_gpu_device_guard *guard, ckc_error *err)
{
    CUcontext current = NULL;
    CUcontext wanted = NULL;
    CKC_DRIVER(d, err);
    CKC_CUDA_TRY(err, d->cuCtxGetCurrent(&current));
    CKC_TRY(primary_context(d, device, &wanted, err));
    guard->previous = current;
    if (current != wanted) {
        CKC_CUDA_TRY(err, d->cuCtxSetCurrent(wanted));
    }
    guard->entered = wanted;
    return CKC_OK;
}

/* A caller without a context keeps the device's primary context current, as the
 * CUDA runtime leaves one after any call: the stream queries of the fault checks
 * that follow an op (stream 0 needs a current context) then find it. */
void
ckc_gpu_device_leave(const ckc_gpu_device_guard *guard)
{
    const ckc_cuda_api *d = ckc_cuda_driver(NULL);
    if (d != NULL && guard->previous != NULL && guard->previous != guard->entered) {
        (void)d->cuCtxSetCurrent((CUcontext)guard->previous);
    }
}

/* ---- kernels: the fatbins loaded per device, functions found per device ---- */

static ckc_mutex modules_lock = CKC_MUTEX_INIT;
static CUmodule modules[CKC_MAX_DEVICES][CKC_FATBIN_MAX];

/* The fatbin named `module` loaded into the current context (device `device`). */
static ckc_status
load_module(const ckc_cuda_api *d, int device, const char *module, CUmodule *out, ckc_error *err)
{
    int index = -1;
    CUresult e = CKC_CU_SUCCESS;
    for (int i = 0; i < ckc_fatbin_count; i++) {
        if (strcmp(ckc_fatbins[i].name, module) == 0) {
            index = i;
        }
    }
    if (index < 0) {
        return CKC_FAIL(err, CKC_ERR_RUNTIME, "this build has no fatbin '%s'", module);
    }
    ckc_mutex_lock(&modules_lock);
    if (modules[device][index] == NULL) {
        e = d->cuModuleLoadData(&modules[device][index], ckc_fatbins[index].data);
    }
    *out = modules[device][index];
    ckc_mutex_unlock(&modules_lock);
    if (e != CKC_CU_SUCCESS) {
        char text[300];
        int major = 0, minor = 0;
        ckc_cuda_error_text(e, text, sizeof text);
        (void)d->cuDeviceGetAttribute(&major, CKC_CU_DEVICE_ATTRIBUTE_CC_MAJOR, device);
        (void)d->cuDeviceGetAttribute(&minor, CKC_CU_DEVICE_ATTRIBUTE_CC_MINOR, device);
        CKC_FAIL(err, is_sticky(e) ? CKC_ERR_DEVICE : CKC_ERR_RUNTIME,
                 "the kernels of this build (%s.cu, built for compute capability %s) cannot be loaded on device %d "
                 "(compute capability %d.%d, CUDA driver %d.%d): cuModuleLoadData: %s", module, ckc_kernels_archs,
                 device, major, minor, d->version / 1000, d->version % 1000 / 10, text);
        ckc_cuda_error_text(e, err->device_error, sizeof err->device_error);
        return err->status;
    }
    return CKC_OK;
}

static ckc_status
find_function(const ckc_cuda_api *d, ckc_kernel *k, CUfunction *f, ckc_error *err)
{
    CUdevice device = 0;
    CUmodule module = NULL;
    CKC_CUDA_TRY(err, d->cuCtxGetDevice(&device));
    if (device < 0 || device >= CKC_KERNEL_DEVICES) {
        return CKC_FAIL(err, CKC_ERR_RUNTIME, "device %d is beyond %d", (int)device, CKC_KERNEL_DEVICES);
    }
    *f = (CUfunction)ckc_atomic_load_ptr(&k->function[device]);
    if (*f != NULL) {
        return CKC_OK;
    }
    CKC_TRY(load_module(d, device, k->module, &module, err));
    {
        const CUresult e = d->cuModuleGetFunction(f, module, k->symbol);
        if (e == CKC_CU_ERROR_NOT_FOUND) {
            return CKC_FAIL(err, CKC_ERR_RUNTIME, "kernel %s is not in this build's %s fatbin", k->symbol, k->module);
        }
        if (e != CKC_CU_SUCCESS) { /* a sticky error is an earlier fault's: CKC_ERR_DEVICE */
            return cuda_failed(err, e, CKC_ERR_RUNTIME, "cuModuleGetFunction", __FILE__, __LINE__, __func__);
        }
    }
    ckc_atomic_store_ptr(&k->function[device], (void *)*f);
    return CKC_OK;
}

ckc_status
ckc_gpu_launch(ckc_kernel *k, const ckc_launch_cfg *c, void **args, ckc_error *err)
{
    CUfunction f = NULL;
    CUresult e;
    CKC_DRIVER(d, err);
    CKC_TRY(find_function(d, k, &f, err));
    ckc_gpu_note_launch(k->log, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2]);
    e = d->cuLaunchKernel(f, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2],
                          (unsigned)c->smem, (CUstream)c->stream, args, NULL);
    if (e != CKC_CU_SUCCESS) {
        char text[300];
        ckc_cuda_error_text(e, text, sizeof text);
        CKC_FAIL(err, is_sticky(e) ? CKC_ERR_DEVICE : CKC_ERR_LAUNCH, "launch of %s failed: %s", k->family, text);
        ckc_cuda_error_text(e, err->device_error, sizeof err->device_error);
        return err->status;
    }
    return CKC_OK;
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
    CUevent e = NULL;
    CUresult recorded;
    CKC_DRIVER(d, err);
    CKC_CUDA_TRY(err, d->cuEventCreate(&e, CKC_CU_EVENT_DISABLE_TIMING));
    recorded = d->cuEventRecord(e, (CUstream)stream);
    if (recorded != CKC_CU_SUCCESS) {
        (void)d->cuEventDestroy(e);
        return cuda_failed(err, recorded, CKC_ERR_RUNTIME, "cuEventRecord", __FILE__, __LINE__, __func__);
    }
    *event = (ckc_gpu_event)e;
    return CKC_OK;
}

void
ckc_gpu_event_destroy(ckc_gpu_event event)
{
    const ckc_cuda_api *d = ckc_cuda_driver(NULL);
    if (d != NULL) {
        (void)d->cuEventDestroy((CUevent)event);
    }
}

static int
query_result(CUresult e, const char *call, ckc_error *err)
{
    char text[300];
    if (e == CKC_CU_SUCCESS) {
        return 1;
    }
    if (e == CKC_CU_ERROR_NOT_READY) {
        return 0;
    }
    ckc_cuda_error_text(e, text, sizeof text);
    CKC_FAIL(err, CKC_ERR_DEVICE, "%s reports a fault: %s", call, text);
    ckc_cuda_error_text(e, err->device_error, sizeof err->device_error);
    return -1;
}

int
ckc_gpu_event_query(ckc_gpu_event event, ckc_error *err)
{
    const ckc_cuda_api *d = ckc_cuda_driver(err);
    return d == NULL ? -1 : query_result(d->cuEventQuery((CUevent)event), "cuEventQuery", err);
}

int
ckc_gpu_stream_query(uintptr_t stream, ckc_error *err)
{
    const ckc_cuda_api *d = ckc_cuda_driver(err);
    return d == NULL ? -1 : query_result(d->cuStreamQuery((CUstream)stream), "cuStreamQuery", err);
}

ckc_status
ckc_gpu_copy_h2d_async(void *dst, const void *src, size_t bytes, uintptr_t stream, ckc_error *err)
{
    CUresult e;
    CKC_DRIVER(d, err);
    e = d->cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, bytes, (CUstream)stream);
    if (e != CKC_CU_SUCCESS) {
        return cuda_failed(err, e, CKC_ERR_LAUNCH, "cuMemcpyHtoDAsync", __FILE__, __LINE__, __func__);
    }
    return CKC_OK;
}

const char *
ckc_gpu_host_memory(const void *p, size_t bytes)
{
    const ckc_cuda_api *d = ckc_cuda_driver(NULL);
    unsigned int memory_type = 0;
    unsigned int flags;
    int file;
    CUresult e;
    if (d == NULL) {
        return "unknown";
    }
    e = d->cuPointerGetAttribute(&memory_type, CKC_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p);
    if (e == CKC_CU_SUCCESS) {
        if (memory_type != CKC_CU_MEMORYTYPE_HOST) {
            return "unknown"; /* device or managed memory as a "host" source */
        }
        /* cuMemHostGetFlags knows only cuMemHostAlloc'd memory: registered memory fails it. */
        return d->cuMemHostGetFlags(&flags, (void *)p) == CKC_CU_SUCCESS ? "pinned" : "registered";
    }
    if (e != CKC_CU_ERROR_INVALID_VALUE) {
        return "unknown";
    }
    /* Memory the driver does not know: pageable host memory. */
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
            const ckc_cuda_api *d = ckc_cuda_driver(NULL);
            /* a refusal is an answer (the flight record then mirrors pinned words) */
            const int mapped = d != NULL && d->cuMemHostRegister(base, bytes, CKC_CU_MEMHOST_DEVICEMAP |
                                                                                 CKC_CU_MEMHOST_PORTABLE) ==
                                                CKC_CU_SUCCESS;
            h = add_range(base, bytes, mapped);
        }
        ckc_mutex_unlock(&ranges_lock);
    }
    return h != NULL && h->mapped;
}

void *
ckc_gpu_alloc_mapped_host(size_t bytes)
{
    void *p = NULL;
    const ckc_cuda_api *d = ckc_cuda_driver(NULL);
    if (d == NULL || d->cuMemHostAlloc(&p, bytes, CKC_CU_MEMHOST_DEVICEMAP | CKC_CU_MEMHOST_PORTABLE) != CKC_CU_SUCCESS) {
        return NULL;
    }
    ckc_mutex_lock(&ranges_lock);
    if (add_range(p, bytes, 1) == NULL) {
        (void)d->cuMemFreeHost(p);
        p = NULL;
    }
    ckc_mutex_unlock(&ranges_lock);
    return p;
}

/* Where device sees h (NULL when it cannot). */
static char *
device_view(host_range *h, int device)
{
    void *view = NULL;
    if (device < 0 || device >= CKC_MAX_DEVICES) {
        return NULL;
    }
    view = ckc_atomic_load_ptr(&h->device_base[device]);
    if (view == NULL) {
        /* The current device is `device` (diag/marks.c entered it). */
        const ckc_cuda_api *d = ckc_cuda_driver(NULL);
        CUdeviceptr p = 0;
        if (d == NULL || d->cuMemHostGetDevicePointer(&p, h->base, 0) != CKC_CU_SUCCESS) {
            return NULL;
        }
        view = (void *)(uintptr_t)p;
        ckc_atomic_store_ptr(&h->device_base[device], view);
    }
    return view;
}

uint64_t *
ckc_gpu_device_word(uint64_t *word, int device)
{
    host_range *h = find_range(word, sizeof *word);
    char *view = h != NULL && h->mapped ? device_view(h, device) : NULL;
    return view != NULL ? (uint64_t *)(view + ((char *)word - h->base)) : NULL;
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
        const ckc_cuda_api *d = ckc_cuda_driver(NULL);
        CUdeviceptr p = 0;
        /* Zeroed once and waited for: cuMemsetD8 runs on the legacy stream, which
         * does not order a non-blocking stream's kernels (torch's side streams).
         * When it fails, marks fall back to separate kernels. */
        if (d != NULL && d->cuMemAlloc(&p, count * sizeof *a) == CKC_CU_SUCCESS) {
            if (d->cuMemsetD8(p, 0, count * sizeof *a) == CKC_CU_SUCCESS &&
                d->cuStreamSynchronize(NULL) == CKC_CU_SUCCESS) {
                a = (uint32_t *)(uintptr_t)p;
                ckc_atomic_store_ptr(&arrivals[device], a);
            } else {
                (void)d->cuMemFree(p);
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
    return ckc_cuda_stream_capturing(stream, capture_id);
}

#endif /* CKC_WITH_CUDA */
