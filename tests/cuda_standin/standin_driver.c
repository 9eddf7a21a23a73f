/* SPDX-License-Identifier: Apache-2.0 */
/* The stand-in driver's devices, contexts, versions, errors, refusals and
 * injected faults, and the control API the tests call (ckcsi_*).
 *
 * Configured at cuInit from the environment:
 *   CKC_STANDIN_GPUS     compute capabilities, one device each ("12.0", "9.0,12.0"); default "12.0"
 *   CKC_STANDIN_DRIVER   the CUDA version the driver reports (12080 = CUDA 12.8); default 13000
 *   CKC_STANDIN_KERNELS  the shared object holding the emulated kernels (comfy_kitchen_c/_C_emu*.so),
 *                        whose runner of kernel K is ckc_emu_thunk_K */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin_state.h"

/* Recursive: a refusal logged while the state is locked takes it again. */
pthread_mutex_t si_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
si_device si_devices[CKCSI_MAX_DEVICES];
int si_device_count;
int si_driver_version = 13000;

static int initialized;
CKCSI_EXPORT int cuInit(unsigned flags);
static void *kernels_library;
static __thread si_context *t_current;
static __thread int t_capture_mode; /* CU_STREAM_CAPTURE_MODE_GLOBAL */

/* ---- refusals ---- */

#define SI_VIOLATIONS 64
static char violations[SI_VIOLATIONS][400];
static int violation_count; /* may exceed SI_VIOLATIONS: the rest are counted, not kept */

int
ckcsi_refuse(int code, const char *call, const char *rule_fmt, ...)
{
    char rule[340];
    va_list args;
    va_start(args, rule_fmt);
    vsnprintf(rule, sizeof rule, rule_fmt, args);
    va_end(args);
    pthread_mutex_lock(&si_lock);
    if (violation_count < SI_VIOLATIONS) {
        snprintf(violations[violation_count], sizeof violations[0], "%s: %s", call, rule);
    }
    violation_count++;
    pthread_mutex_unlock(&si_lock);
    return code;
}

/* Every refusal since the last read, one a line; returns the length of the whole text, and
 * clears them when all of it fit in cap (a call with cap 0 only measures). */
CKCSI_EXPORT size_t
ckcsi_violations(char *buf, size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&si_lock);
    if (cap > 0) {
        buf[0] = '\0';
    }
    for (int i = 0; i < violation_count && i < SI_VIOLATIONS; i++) {
        n += (size_t)snprintf(cap > n ? buf + n : NULL, cap > n ? cap - n : 0, "%s\n", violations[i]);
    }
    if (violation_count > SI_VIOLATIONS) {
        n += (size_t)snprintf(cap > n ? buf + n : NULL, cap > n ? cap - n : 0, "... and %d more\n",
                              violation_count - SI_VIOLATIONS);
    }
    if (cap > n) {
        violation_count = 0;
    }
    pthread_mutex_unlock(&si_lock);
    return n;
}

/* ---- injected faults ---- */

#define SI_KINDS 6
static int armed_at[SI_KINDS];  /* the event number that fires, 0: none */
static int counted[SI_KINDS];   /* events of the kind since armed */

CKCSI_EXPORT void
ckcsi_inject(int kind, int nth)
{
    if (kind > 0 && kind < SI_KINDS) {
        pthread_mutex_lock(&si_lock);
        armed_at[kind] = nth;
        counted[kind] = 0;
        pthread_mutex_unlock(&si_lock);
    }
}

int
ckcsi_inject_fires(int kind)
{
    int fires = 0;
    if (kind > 0 && kind < SI_KINDS && armed_at[kind] > 0) {
        fires = ++counted[kind] == armed_at[kind];
        if (fires) {
            armed_at[kind] = 0;
        }
    }
    return fires;
}

/* ---- devices, contexts, errors ---- */

int
si_initialized(void)
{
    return initialized;
}

si_context *
si_current(void)
{
    return t_current;
}

int
si_thread_capture_mode(void)
{
    return t_capture_mode;
}

void *
si_kernels_library(void)
{
    return kernels_library;
}

int
ckcsi_current_device(void)
{
    return t_current != NULL ? t_current->device : -1;
}

int
ckcsi_sticky(int device)
{
    return device >= 0 && device < si_device_count ? si_devices[device].sticky : 0;
}

void
ckcsi_set_sticky(int device, int code, const char *why)
{
    if (device >= 0 && device < si_device_count && si_devices[device].sticky == 0) {
        si_devices[device].sticky = code;
        snprintf(si_devices[device].sticky_why, sizeof si_devices[device].sticky_why, "%s", why);
    }
}

CKCSI_EXPORT int
ckcsi_device_cc(int device)
{
    (void)cuInit(0);
    return device >= 0 && device < si_device_count ? si_devices[device].cc : 0;
}

int
si_need_context(const char *call)
{
    if (!initialized) {
        return ckcsi_refuse(CKCSI_ERROR_NOT_INITIALIZED, call, "called before cuInit");
    }
    if (t_current == NULL) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_CONTEXT, call, "needs a current context; the calling thread has none");
    }
    return ckcsi_sticky(t_current->device);
}

static void
configure(void)
{
    const char *gpus = getenv("CKC_STANDIN_GPUS");
    const char *driver = getenv("CKC_STANDIN_DRIVER");
    const char *kernels = getenv("CKC_STANDIN_KERNELS");
    const char *p = gpus != NULL && *gpus ? gpus : "12.0";
    si_device_count = 0;
    while (*p != '\0' && si_device_count < CKCSI_MAX_DEVICES) {
        char *end;
        const long major = strtol(p, &end, 10);
        long minor = 0;
        if (*end == '.') {
            minor = strtol(end + 1, &end, 10);
        }
        si_devices[si_device_count].cc = (int)(10 * major + minor);
        si_devices[si_device_count].context.device = si_device_count;
        si_device_count++;
        p = *end == ',' ? end + 1 : end + strlen(end);
    }
    si_driver_version = driver != NULL && *driver ? atoi(driver) : 13000;
    kernels_library = kernels != NULL && *kernels ? dlopen(kernels, RTLD_NOW | RTLD_LOCAL) : NULL;
}

CKCSI_EXPORT int
cuInit(unsigned flags)
{
    if (flags != 0) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuInit", "flags must be 0 (got %u)", flags);
    }
    pthread_mutex_lock(&si_lock);
    if (!initialized) {
        configure();
        initialized = 1;
    }
    pthread_mutex_unlock(&si_lock);
    return si_device_count > 0 ? CKCSI_SUCCESS : CKCSI_ERROR_NO_DEVICE;
}

CKCSI_EXPORT int
cuDriverGetVersion(int *version)
{
    if (version == NULL) {
        return CKCSI_ERROR_INVALID_VALUE;
    }
    *version = initialized ? si_driver_version : (getenv("CKC_STANDIN_DRIVER") ? atoi(getenv("CKC_STANDIN_DRIVER"))
                                                                            : 13000);
    return CKCSI_SUCCESS;
}

CKCSI_EXPORT int
cuDeviceGet(int *device, int ordinal)
{
    if (!initialized) {
        return ckcsi_refuse(CKCSI_ERROR_NOT_INITIALIZED, "cuDeviceGet", "called before cuInit");
    }
    if (ordinal < 0 || ordinal >= si_device_count) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_DEVICE, "cuDeviceGet", "device %d of %d", ordinal, si_device_count);
    }
    *device = ordinal;
    return CKCSI_SUCCESS;
}

CKCSI_EXPORT int
cuDeviceGetName(char *name, int len, int device)
{
    if (device < 0 || device >= si_device_count || name == NULL || len <= 0) {
        return CKCSI_ERROR_INVALID_VALUE;
    }
    snprintf(name, (size_t)len, "Stand-in GPU (compute capability %d.%d)", si_devices[device].cc / 10,
             si_devices[device].cc % 10);
    return CKCSI_SUCCESS;
}

/* The largest dynamic + static shared memory a block may opt into, per compute capability (bytes). */
static int
smem_optin(int cc)
{
    switch (cc) {
    case 75: return 64 * 1024;
    case 80: case 87: return 163 * 1024;
    case 86: case 89: case 120: case 121: return 99 * 1024;
    default: return 227 * 1024;
    }
}

CKCSI_EXPORT int
cuDeviceGetAttribute(int *value, int attribute, int device)
{
    if (!initialized) {
        return ckcsi_refuse(CKCSI_ERROR_NOT_INITIALIZED, "cuDeviceGetAttribute", "called before cuInit");
    }
    if (device < 0 || device >= si_device_count || value == NULL) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_DEVICE, "cuDeviceGetAttribute", "no device %d", device);
    }
    switch (attribute) {
    case 75: *value = si_devices[device].cc / 10; return CKCSI_SUCCESS;
    case 76: *value = si_devices[device].cc % 10; return CKCSI_SUCCESS;
    case 1: *value = 1024; return CKCSI_SUCCESS;               /* MAX_THREADS_PER_BLOCK */
    case 8: *value = 48 * 1024; return CKCSI_SUCCESS;          /* MAX_SHARED_MEMORY_PER_BLOCK */
    case 16: *value = 16; return CKCSI_SUCCESS;                /* MULTIPROCESSOR_COUNT */
    case 97: *value = smem_optin(si_devices[device].cc); return CKCSI_SUCCESS; /* ..._OPTIN */
    default:
        return ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuDeviceGetAttribute", "attribute %d is not modelled",
                            attribute);
    }
}

int
ckcsi_smem_optin(int device)
{
    return smem_optin(si_devices[device].cc);
}

CKCSI_EXPORT int
cuDevicePrimaryCtxRetain(si_context **ctx, int device)
{
    if (!initialized) {
        return ckcsi_refuse(CKCSI_ERROR_NOT_INITIALIZED, "cuDevicePrimaryCtxRetain", "called before cuInit");
    }
    if (device < 0 || device >= si_device_count) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_DEVICE, "cuDevicePrimaryCtxRetain", "no device %d", device);
    }
    pthread_mutex_lock(&si_lock);
    si_devices[device].retained++;
    pthread_mutex_unlock(&si_lock);
    *ctx = &si_devices[device].context;
    return CKCSI_SUCCESS;
}

CKCSI_EXPORT int
cuCtxGetCurrent(si_context **ctx)
{
    if (!initialized) {
        return ckcsi_refuse(CKCSI_ERROR_NOT_INITIALIZED, "cuCtxGetCurrent", "called before cuInit");
    }
    *ctx = t_current;
    return CKCSI_SUCCESS;
}

static int
known_context(const si_context *ctx)
{
    for (int d = 0; d < si_device_count; d++) {
        if (ctx == &si_devices[d].context) {
            return si_devices[d].retained > 0;
        }
    }
    return 0;
}

CKCSI_EXPORT int
cuCtxSetCurrent(si_context *ctx)
{
    if (!initialized) {
        return ckcsi_refuse(CKCSI_ERROR_NOT_INITIALIZED, "cuCtxSetCurrent", "called before cuInit");
    }
    if (ctx != NULL && !known_context(ctx)) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_CONTEXT, "cuCtxSetCurrent",
                            "not a context of this driver, or a primary context never retained");
    }
    t_current = ctx;
    return CKCSI_SUCCESS;
}

CKCSI_EXPORT int
cuCtxGetDevice(int *device)
{
    if (!initialized) {
        return ckcsi_refuse(CKCSI_ERROR_NOT_INITIALIZED, "cuCtxGetDevice", "called before cuInit");
    }
    if (t_current == NULL) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_CONTEXT, "cuCtxGetDevice", "the calling thread has no current context");
    }
    *device = t_current->device;
    return CKCSI_SUCCESS;
}

CKCSI_EXPORT int
cuThreadExchangeStreamCaptureMode(int *mode)
{
    int previous;
    if (mode == NULL || *mode < 0 || *mode > 2) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuThreadExchangeStreamCaptureMode", "mode must be 0, 1 or 2");
    }
    previous = t_capture_mode;
    t_capture_mode = *mode;
    *mode = previous;
    return CKCSI_SUCCESS;
}

/* ---- error names and texts ---- */

typedef struct {
    int code;
    const char *name;
    const char *text;
} si_error_name;

static const si_error_name error_names[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered"},
    {716, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
    {906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static const si_error_name *
error_name(int code)
{
    for (size_t i = 0; i < sizeof error_names / sizeof error_names[0]; i++) {
        if (error_names[i].code == code) {
            return &error_names[i];
        }
    }
    return NULL;
}

CKCSI_EXPORT int
cuGetErrorName(int e, const char **name)
{
    const si_error_name *n = error_name(e);
    *name = n != NULL ? n->name : NULL;
    return n != NULL ? CKCSI_SUCCESS : CKCSI_ERROR_INVALID_VALUE;
}

CKCSI_EXPORT int
cuGetErrorString(int e, const char **text)
{
    const si_error_name *n = error_name(e);
    *text = n != NULL ? n->text : NULL;
    return n != NULL ? CKCSI_SUCCESS : CKCSI_ERROR_INVALID_VALUE;
}

/* ---- control API (tests) ---- */

/* Present in the stand-in only: `_C` looks for it before serving host memory as device memory. */
CKCSI_EXPORT int
ckcsi_standin_marker(void)
{
    return 1;
}

/* Makes device's primary context current on the calling thread (-1: none), as torch's runtime leaves it. */
CKCSI_EXPORT int
ckcsi_set_context(int device)
{
    si_context *ctx = NULL;
    (void)cuInit(0);
    if (device >= 0) {
        const int e = cuDevicePrimaryCtxRetain(&ctx, device);
        if (e != CKCSI_SUCCESS) {
            return e;
        }
    }
    t_current = ctx;
    return CKCSI_SUCCESS;
}

/* Clears sticky errors, injected faults, hangs, captures and the refusal log: a fresh device. */
CKCSI_EXPORT void
ckcsi_reset(void)
{
    pthread_mutex_lock(&si_lock);
    for (int d = 0; d < si_device_count; d++) {
        si_devices[d].sticky = 0;
        si_devices[d].sticky_why[0] = '\0';
    }
    memset(armed_at, 0, sizeof armed_at);
    memset(counted, 0, sizeof counted);
    violation_count = 0;
    si_streams_reset();
    si_memory_reset();
    si_launch_reset();
    pthread_mutex_unlock(&si_lock);
}

/* The sticky error of device (0: none) and why, for the tests. */
CKCSI_EXPORT int
ckcsi_device_sticky(int device, char *why, size_t cap)
{
    int code;
    pthread_mutex_lock(&si_lock);
    code = ckcsi_sticky(device);
    if (why != NULL && cap > 0) {
        snprintf(why, cap, "%s", code ? si_devices[device].sticky_why : "");
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}
