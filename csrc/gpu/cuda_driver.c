/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA driver, found at run time (see cuda_driver.h). */
#if defined(CKC_WITH_CUDA)

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/library.h"
#include "platform/mapped_file.h" /* ckc_atomic_load_ptr */
#include "platform/settings.h"
#include "platform/threads.h"
#include "cuda_driver.h"
#include "fatbin_info.h"
#include "gpu.h"

#if defined(_WIN32)
static const char *const driver_names[] = {"nvcuda.dll"};
#else
/* The driver's soname; the unversioned name is the toolkit's link stub on most systems. */
static const char *const driver_names[] = {"libcuda.so.1", "libcuda.so"};
#endif
#define DRIVER_NAME_COUNT ((int)(sizeof driver_names / sizeof driver_names[0]))

static ckc_mutex driver_lock = CKC_MUTEX_INIT;
static int driver_tried;             /* under driver_lock */
static void *volatile driver;        /* the ckc_cuda_api once usable: published once, read without the lock */
static ckc_cuda_api api;
static char driver_why[600];         /* why there is none, when driver_tried and !driver */
static int driver_standin;           /* the library is tests/cuda_standin's (it exports ckcsi_standin_marker) */

/* Binds one pointer by the symbol's exported (versioned) name; false when absent. */
static int
bind_symbol(void *lib, const char *symbol, void *slot, size_t slot_bytes)
{
    void *f = ckc_library_symbol(lib, symbol);
    if (f == NULL) {
        return 0;
    }
    memcpy(slot, &f, slot_bytes < sizeof f ? slot_bytes : sizeof f);
    return 1;
}

/* A symbol a driver may lack: NULL then. */
#define BIND_OPTIONAL(lib, field, symbol) (void)bind_symbol((lib), (symbol), &api.field, sizeof api.field)

#define BIND(lib, field, symbol)                                                                                  \
    do {                                                                                                          \
        if (!bind_symbol((lib), (symbol), &api.field, sizeof api.field)) {                                              \
            snprintf(driver_why, sizeof driver_why, "the CUDA driver %s has no %s: it is older than CUDA 12.0, " \
                     "the oldest this build supports", name, (symbol));                                          \
            return 0;                                                                                             \
        }                                                                                                         \
    } while (0)

static int
bind_all(void *lib, const char *name)
{
    BIND(lib, cuInit, "cuInit");
    BIND(lib, cuDriverGetVersion, "cuDriverGetVersion");
    BIND(lib, cuGetErrorName, "cuGetErrorName");
    BIND(lib, cuGetErrorString, "cuGetErrorString");
    BIND(lib, cuDeviceGet, "cuDeviceGet");
    BIND(lib, cuDeviceGetAttribute, "cuDeviceGetAttribute");
    BIND(lib, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    BIND(lib, cuCtxGetCurrent, "cuCtxGetCurrent");
    BIND(lib, cuCtxSetCurrent, "cuCtxSetCurrent");
    BIND(lib, cuCtxGetDevice, "cuCtxGetDevice");
    BIND(lib, cuModuleLoadData, "cuModuleLoadData");
    BIND(lib, cuModuleGetFunction, "cuModuleGetFunction");
    BIND(lib, cuLaunchKernel, "cuLaunchKernel");
    BIND(lib, cuMemsetD8Async, "cuMemsetD8Async");
    BIND(lib, cuMemsetD8, "cuMemsetD8_v2");
    BIND(lib, cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    BIND(lib, cuMemAlloc, "cuMemAlloc_v2");
    BIND(lib, cuMemFree, "cuMemFree_v2");
    BIND(lib, cuEventCreate, "cuEventCreate");
    BIND(lib, cuEventRecord, "cuEventRecord");
    BIND(lib, cuEventQuery, "cuEventQuery");
    BIND(lib, cuEventDestroy, "cuEventDestroy_v2");
    BIND(lib, cuEventSynchronize, "cuEventSynchronize");
    if (!bind_symbol(lib, "cuEventElapsedTime_v2", &api.cuEventElapsedTime, sizeof api.cuEventElapsedTime)) {
        BIND(lib, cuEventElapsedTime, "cuEventElapsedTime");
    }
    BIND(lib, cuDeviceGetName, "cuDeviceGetName");
    BIND(lib, cuStreamQuery, "cuStreamQuery");
    BIND(lib, cuStreamSynchronize, "cuStreamSynchronize");
    BIND(lib, cuStreamIsCapturing, "cuStreamIsCapturing");
    BIND_OPTIONAL(lib, cuStreamGetCaptureInfo, "cuStreamGetCaptureInfo_v3");
    BIND(lib, cuStreamGetCaptureInfo_v2, "cuStreamGetCaptureInfo_v2");
    BIND(lib, cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode");
    BIND(lib, cuStreamCreate, "cuStreamCreate");
    BIND(lib, cuStreamDestroy, "cuStreamDestroy_v2");
    BIND(lib, cuPointerGetAttribute, "cuPointerGetAttribute");
    BIND(lib, cuMemHostGetFlags, "cuMemHostGetFlags");
    BIND(lib, cuMemHostRegister, "cuMemHostRegister_v2");
    BIND(lib, cuMemHostAlloc, "cuMemHostAlloc");
    BIND(lib, cuMemFreeHost, "cuMemFreeHost");
    BIND(lib, cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2");
    return 1;
}

/* COMFY_KITCHEN_C_CUDA_DRIVER's file as the driver was opened from it (driver_lock held). */
static char chosen_path[CKC_SETTING_PATH];

/* Opens the library: the setting's, else the OS's names in order.  why: each refusal.
 * Called under driver_lock; *name stays valid after it returns. */
static void *
open_driver(const char **name)
{
    ckc_settings settings;
    const char *chosen;
    char reason[300];
    size_t used;
    ckc_settings_read(&settings);
    memcpy(chosen_path, settings.cuda_driver, sizeof chosen_path);
    chosen = chosen_path[0] != '\0' ? chosen_path : NULL;
    snprintf(driver_why, sizeof driver_why, "no CUDA driver could be loaded (is the NVIDIA driver installed?):");
    for (int i = 0; i < (chosen != NULL && chosen[0] != '\0' ? 1 : DRIVER_NAME_COUNT); i++) {
        void *lib;
        *name = chosen != NULL && chosen[0] != '\0' ? chosen : driver_names[i];
        lib = ckc_library_open(*name, reason, sizeof reason);
        if (lib != NULL) {
            return lib;
        }
        used = strlen(driver_why);
        snprintf(driver_why + used, sizeof driver_why - used, "%s %s: %s", i > 0 ? ";" : "", *name, reason);
    }
    return NULL;
}

/* Opens, binds and initializes the driver once; fills driver_why when it fails. */
static void
try_driver(void)
{
    const char *name = "";
    void *lib = open_driver(&name);
    CUresult e;
    if (lib == NULL || !bind_all(lib, name)) {
        return;
    }
    driver_standin = ckc_library_symbol(lib, "ckcsi_standin_marker") != NULL;
    e = api.cuInit(0);
    if (e != CKC_CU_SUCCESS) {
        char text[300];
        ckc_cuda_error_text(e, text, sizeof text);
        snprintf(driver_why, sizeof driver_why, "the CUDA driver %s did not start: cuInit: %s", name, text);
        return;
    }
    if (api.cuDriverGetVersion(&api.version) != CKC_CU_SUCCESS || api.version < ckc_kernels_driver_min()) {
        const int needed = ckc_kernels_driver_min();
        snprintf(driver_why, sizeof driver_why, "the CUDA driver %s supports CUDA %d.%d; this build's kernels need "
                 "CUDA %d.%d (NVIDIA driver %s or newer) on any GPU", name, api.version / 1000,
                 api.version % 1000 / 10, needed / 1000, needed % 1000 / 10, ckc_driver_branch(needed));
        return;
    }
    ckc_atomic_store_ptr(&driver, &api);
}

const ckc_cuda_api *
ckc_cuda_driver(ckc_error *err)
{
    const ckc_cuda_api *d = (const ckc_cuda_api *)ckc_atomic_load_ptr((void *const volatile *)&driver);
    if (d != NULL) {
        return d; /* every call of every op once the driver is up: no lock */
    }
    ckc_mutex_lock(&driver_lock);
    if (!driver_tried) {
        try_driver();
        driver_tried = 1;
    }
    d = (const ckc_cuda_api *)driver;
    ckc_mutex_unlock(&driver_lock);
    if (d == NULL && err != NULL) {
        CKC_FAIL(err, CKC_ERR_RUNTIME, "%s", driver_why);
    }
    return d;
}

int
ckc_cuda_stream_capturing(uintptr_t stream, uint64_t *capture_id, CUresult *error)
{
    const ckc_cuda_api *d = ckc_cuda_driver(NULL);
    int status = CKC_CU_STREAM_CAPTURE_STATUS_NONE;
    unsigned long long id = 0;
    CUresult e;
    *capture_id = 0;
    *error = CKC_CU_SUCCESS;
    if (d == NULL) {
        return 0;
    }
    /* _v3 from CUDA 12.3 on; an older driver has _v2, which a driver that has both still serves */
    e = d->cuStreamGetCaptureInfo != NULL && d->version >= 12030
            ? d->cuStreamGetCaptureInfo((CUstream)stream, &status, &id, NULL, NULL, NULL, NULL)
            : d->cuStreamGetCaptureInfo_v2((CUstream)stream, &status, &id, NULL, NULL, NULL);
    if (e >= CKC_CU_CAPTURE_ERROR_FIRST && e <= CKC_CU_CAPTURE_ERROR_LAST) {
        return 1; /* a capture forbade the question */
    }
    if (e != CKC_CU_SUCCESS) {
        *error = e;
        return -1;
    }
    *capture_id = (uint64_t)id;
    return status != CKC_CU_STREAM_CAPTURE_STATUS_NONE;
}

int
ckc_cuda_capture_relax(void)
{
    const ckc_cuda_api *d = ckc_cuda_driver(NULL);
    int mode = CKC_CU_STREAM_CAPTURE_MODE_RELAXED;
    return d != NULL && d->cuThreadExchangeStreamCaptureMode(&mode) == CKC_CU_SUCCESS ? mode : -1;
}

void
ckc_cuda_capture_restore(int mode)
{
    const ckc_cuda_api *d = ckc_cuda_driver(NULL);
    if (d != NULL && mode >= 0) {
        (void)d->cuThreadExchangeStreamCaptureMode(&mode);
    }
}

int
ckc_gpu_driver_problem(char *why, size_t cap)
{
    ckc_error err;
    err.status = CKC_OK;
    if (ckc_cuda_driver(&err) != NULL) {
        snprintf(why, cap, "%s", "");
        return 0;
    }
    snprintf(why, cap, "%s", err.message);
    return 1;
}

int
ckc_gpu_driver_is_standin(void)
{
    (void)ckc_cuda_driver(NULL); /* opened (or refused: too old, say) once; the library is known either way */
    return driver_standin;
}

void
ckc_cuda_error_text(CUresult e, char *buf, size_t cap)
{
    const char *name = NULL;
    const char *text = NULL;
    if (api.cuGetErrorName != NULL) {
        (void)api.cuGetErrorName(e, &name);
        (void)api.cuGetErrorString(e, &text);
    }
    snprintf(buf, cap, "%s: %s", name != NULL ? name : "CUDA_ERROR", text != NULL ? text : "unknown error");
    if (name == NULL) {
        const size_t used = strlen(buf);
        snprintf(buf + used, cap - used, " (%d)", (int)e);
    }
}

#endif /* CKC_WITH_CUDA */
