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
#include "fatbin_info.h"
#include "fatbins.h"
#include "gpu.h"
#include "runtime.h"

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
static CUcontext contexts[CKC_KERNEL_DEVICES];

static ckc_status
primary_context(const ckc_cuda_api *d, int device, CUcontext *ctx, ckc_error *err)
{
    CUresult e = CKC_CU_SUCCESS;
    if (device < 0 || device >= CKC_KERNEL_DEVICES) {
        return CKC_FAIL(err, CKC_ERR_RUNTIME, "device index %d is beyond %d", device, CKC_KERNEL_DEVICES);
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

/* The caller's context is restored, none included: a thread without one keeps
 * none, so torch's current device on that thread (the runtime reads it from the
 * current context) is what it was.  Whatever needs a context later enters it
 * (the queries of the fault checks too). */
void
ckc_gpu_device_leave(const ckc_gpu_device_guard *guard)
{
    const ckc_cuda_api *d = ckc_cuda_driver(NULL);
    if (d != NULL && guard->previous != guard->entered) {
        (void)d->cuCtxSetCurrent((CUcontext)guard->previous);
    }
}

/* ---- kernels: the fatbins loaded per device, functions found per device ---- */

static ckc_mutex modules_lock = CKC_MUTEX_INIT;
static CUmodule modules[CKC_KERNEL_DEVICES][CKC_FATBIN_MAX];

/* Why the kernels do not load on device: what the build serves it with
 * (fatbin_info.h) against the driver, then the driver's own answer. */
static ckc_status
load_failed(const ckc_cuda_api *d, int device, const char *module, CUresult e, ckc_error *err)
{
    char text[300];
    char serves[200];
    int major = 0, minor = 0;
    int needed;
    ckc_cuda_error_text(e, text, sizeof text);
    (void)d->cuDeviceGetAttribute(&major, CKC_CU_DEVICE_ATTRIBUTE_CC_MAJOR, device);
    (void)d->cuDeviceGetAttribute(&minor, CKC_CU_DEVICE_ATTRIBUTE_CC_MINOR, device);
    needed = ckc_kernels_driver_for(10 * major + minor);
    if (needed == 0) {
        snprintf(serves, sizeof serves, "this build has no code for compute capability %d.%d", major, minor);
    } else if (needed > d->version) {
        snprintf(serves, sizeof serves, "on compute capability %d.%d they need a CUDA %d.%d driver (%s or newer)",
                 major, minor, needed / 1000, needed % 1000 / 10, ckc_driver_branch(needed));
    } else {
        snprintf(serves, sizeof serves, "the driver should read them");
    }
    CKC_FAIL(err, is_sticky(e) ? CKC_ERR_DEVICE : CKC_ERR_RUNTIME,
             "the kernels of this build (%s.cu; SASS for compute capability %s, PTX of the last) cannot be loaded on "
             "device %d (compute capability %d.%d, CUDA driver %d.%d): %s; cuModuleLoadData: %s", module,
             ckc_kernels_archs, device, major, minor, d->version / 1000, d->version % 1000 / 10, serves, text);
    ckc_cuda_error_text(e, err->device_error, sizeof err->device_error);
    return err->status;
}

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
        return load_failed(d, device, module, e, err);
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

/* The parameter buffer of a launch: each argument at the next multiple of its
 * alignment, as the compiler lays a kernel's parameters out; *bytes its size
 * (the end of the last), which the driver checks against the kernel's. */
typedef union {
    unsigned char bytes[CKC_MAX_KARG_BYTES];
    unsigned long long align; /* the buffer itself 8-byte aligned */
} karg_buffer;

static ckc_status
pack_arguments(const ckc_kernel *k, const ckc_karg *args, size_t nargs, karg_buffer *b, size_t *bytes,
               ckc_error *err)
{
    size_t at = 0;
    for (size_t i = 0; i < nargs; i++) {
        at = (at + args[i].align - 1) / args[i].align * args[i].align;
        if (args[i].size > sizeof b->bytes - at) {
            return CKC_FAIL(err, CKC_ERR_LAUNCH, "%s: its arguments take more than %d bytes", k->family,
                            CKC_MAX_KARG_BYTES);
        }
        memcpy(b->bytes + at, args[i].p, args[i].size);
        at += args[i].size;
    }
    *bytes = at;
    return CKC_OK;
}

ckc_status
ckc_gpu_launch(ckc_kernel *k, const ckc_launch_cfg *c, const ckc_karg *args, size_t nargs, ckc_error *err)
{
    CUfunction f = NULL;
    CUresult e;
    karg_buffer buffer;
    size_t bytes = 0;
    void *extra[5];
    CKC_DRIVER(d, err);
    CKC_TRY(find_function(d, k, &f, err));
    CKC_TRY(pack_arguments(k, args, nargs, &buffer, &bytes, err));
    extra[0] = (void *)(uintptr_t)CKC_CU_LAUNCH_PARAM_BUFFER_POINTER;
    extra[1] = buffer.bytes;
    extra[2] = (void *)(uintptr_t)CKC_CU_LAUNCH_PARAM_BUFFER_SIZE;
    extra[3] = &bytes;
    extra[4] = NULL; /* CU_LAUNCH_PARAM_END */
    ckc_gpu_note_launch(k->log, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2]);
    e = d->cuLaunchKernel(f, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2],
                          (unsigned)c->smem, (CUstream)c->stream, NULL, extra);
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

/* A query's answer: a sticky error is the device's fault (CKC_ERR_DEVICE); any
 * other error is the query's own (CKC_ERR_RUNTIME: a destroyed stream), never
 * passed off as a fault of the work it asked about. */
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
    if (is_sticky(e)) {
        CKC_FAIL(err, CKC_ERR_DEVICE, "%s reports a fault: %s", call, text);
        ckc_cuda_error_text(e, err->device_error, sizeof err->device_error);
    } else {
        CKC_FAIL(err, CKC_ERR_RUNTIME, "%s failed: %s", call, text);
    }
    return -1;
}

/* An event's (event 1) or a stream's query, run on `device` (entered for it). */
static int
query_on(int device, int event, void *handle, ckc_error *err)
{
    ckc_gpu_device_guard guard;
    CUresult e;
    const ckc_cuda_api *d = ckc_cuda_driver(err);
    if (d == NULL || ckc_gpu_device_enter(device, &guard, err) != CKC_OK) {
        return -1;
    }
    e = event ? d->cuEventQuery((CUevent)handle) : d->cuStreamQuery((CUstream)handle);
    ckc_gpu_device_leave(&guard);
    return query_result(e, event ? "cuEventQuery" : "cuStreamQuery", err);
}

int
ckc_gpu_event_query(int device, ckc_gpu_event event, ckc_error *err)
{
    return query_on(device, 1, (void *)event, err);
}

int
ckc_gpu_stream_query(int device, uintptr_t stream, ckc_error *err)
{
    return query_on(device, 0, (void *)stream, err);
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
#define CKC_HOST_RANGES 8

typedef struct {
    char *base;
    size_t bytes;
    int mapped;                             /* 1: the devices can write it; 0: refused */
    void *volatile device_base[CKC_KERNEL_DEVICES]; /* per device, filled on first use */
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
            const int mode = ckc_cuda_capture_relax(); /* once per range: never a capture's business */
            /* a refusal is an answer (the flight record then mirrors pinned words) */
            const int mapped = d != NULL && d->cuMemHostRegister(base, bytes, CKC_CU_MEMHOST_DEVICEMAP |
                                                                                 CKC_CU_MEMHOST_PORTABLE) ==
                                                CKC_CU_SUCCESS;
            ckc_cuda_capture_restore(mode);
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
    int mode;
    CUresult e;
    if (d == NULL) {
        return NULL;
    }
    mode = ckc_cuda_capture_relax(); /* once per process: never a capture's business */
    e = d->cuMemHostAlloc(&p, bytes, CKC_CU_MEMHOST_DEVICEMAP | CKC_CU_MEMHOST_PORTABLE);
    ckc_cuda_capture_restore(mode);
    if (e != CKC_CU_SUCCESS) {
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
    if (device < 0 || device >= CKC_KERNEL_DEVICES) {
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
static void *volatile arrivals[CKC_KERNEL_DEVICES];

/* How long the zeroing of a device's arrival counters may take (a healthy GPU:
 * microseconds); past it, marks fall back to separate kernels. */
#define ARRIVALS_WAIT_NS ((uint64_t)2000 * 1000 * 1000)

/* Waits for stream s by polling, at most ARRIVALS_WAIT_NS: whether it completed. */
static int
wait_private_stream(const ckc_cuda_api *d, CUstream s)
{
    const uint64_t deadline = ckc_monotonic_ns() + ARRIVALS_WAIT_NS;
    for (;;) {
        const CUresult e = d->cuStreamQuery(s);
        if (e != CKC_CU_ERROR_NOT_READY) {
            return e == CKC_CU_SUCCESS;
        }
        if (ckc_monotonic_ns() > deadline) {
            return 0;
        }
        ckc_sleep_us(20);
    }
}

/* bytes of zeroed device memory on the current device, or NULL.  Zeroed on a
 * stream of its own (non-blocking: it neither waits for torch's default stream
 * nor makes it wait), in relaxed capture mode (another thread's capture is
 * neither refused to us nor invalidated), waited for by polling with a deadline
 * (a hung GPU costs this call ARRIVALS_WAIT_NS, then the fault checks find it). */
static uint32_t *
zeroed_device_memory(const ckc_cuda_api *d, size_t bytes)
{
    const int mode = ckc_cuda_capture_relax();
    CUdeviceptr p = 0;
    CUstream s = NULL;
    int zeroed = 0;
    if (d->cuMemAlloc(&p, bytes) != CKC_CU_SUCCESS) {
        ckc_cuda_capture_restore(mode);
        return NULL;
    }
    if (d->cuStreamCreate(&s, CKC_CU_STREAM_NON_BLOCKING) == CKC_CU_SUCCESS) {
        zeroed = d->cuMemsetD8Async(p, 0, bytes, s) == CKC_CU_SUCCESS && wait_private_stream(d, s);
        (void)d->cuStreamDestroy(s);
    }
    if (!zeroed && s == NULL) {
        (void)d->cuMemFree(p); /* nothing was queued on it */
    }
    /* zeroing queued but not seen done: the memory stays allocated, never used */
    ckc_cuda_capture_restore(mode);
    return zeroed ? (uint32_t *)(uintptr_t)p : NULL;
}

uint32_t *
ckc_gpu_mark_arrivals(int device, size_t count)
{
    uint32_t *a;
    if (device < 0 || device >= CKC_KERNEL_DEVICES) {
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
        /* When it cannot be had, marks fall back to separate kernels. */
        a = d != NULL ? zeroed_device_memory(d, count * sizeof *a) : NULL;
        if (a != NULL) {
            ckc_atomic_store_ptr(&arrivals[device], a);
        }
    }
    ckc_mutex_unlock(&ranges_lock);
    return a;
}

uint32_t *
ckc_gpu_mark_arrivals_known(int device)
{
    return device >= 0 && device < CKC_KERNEL_DEVICES ? (uint32_t *)ckc_atomic_load_ptr(&arrivals[device]) : NULL;
}

int
ckc_gpu_host_mapped(const void *base, size_t bytes)
{
    const host_range *h = find_range(base, bytes);
    return h == NULL ? -1 : h->mapped;
}

int
ckc_gpu_stream_capture(int device, uintptr_t stream, uint64_t *capture_id, ckc_error *err)
{
    ckc_gpu_device_guard guard;
    CUresult e = CKC_CU_SUCCESS;
    int capturing;
    if (ckc_gpu_device_enter(device, &guard, err) != CKC_OK) {
        return -1;
    }
    capturing = ckc_cuda_stream_capturing(stream, capture_id, &e);
    ckc_gpu_device_leave(&guard);
    if (capturing < 0) {
        char text[300];
        ckc_cuda_error_text(e, text, sizeof text);
        if (is_sticky(e)) {
            CKC_FAIL(err, CKC_ERR_DEVICE, "cuStreamGetCaptureInfo reports a fault: %s", text);
            ckc_cuda_error_text(e, err->device_error, sizeof err->device_error);
        } else {
            CKC_FAIL(err, CKC_ERR_RUNTIME, "stream 0x%llx of device %d cannot be used (destroyed, or not a stream "
                     "of that device?): cuStreamGetCaptureInfo: %s", (unsigned long long)stream, device, text);
        }
    }
    return capturing;
}

#endif /* CKC_WITH_CUDA */
