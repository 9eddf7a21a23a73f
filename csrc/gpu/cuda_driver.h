/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA driver API, opened at run time (libcuda.so.1, nvcuda.dll): the only
 * way the GPU build reaches a GPU.  No CUDA header or library is needed to build
 * `_C` (the few declarations used are written here, values from cuda.h of CUDA
 * 12.x and 13.0, identical in both), and `import comfy_kitchen_c` works on a
 * machine without a driver: the first GPU use opens it and, where it cannot,
 * every GPU op fails saying why (ckc_cuda_driver).
 *
 * Each pointer is bound to the symbol of a fixed ABI version (the _v2 names
 * cuda.h maps its calls to), so that a newer driver keeps serving this build. */
#ifndef CKC_GPU_CUDA_DRIVER_H
#define CKC_GPU_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "contract/status.h"

#if defined(_WIN32)
#define CKC_CUDA_API __stdcall
#else
#define CKC_CUDA_API
#endif

typedef int CUresult; /* CUDA_SUCCESS is 0 */
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef unsigned long long CUdeviceptr;

enum {
    CKC_CU_SUCCESS = 0,
    CKC_CU_ERROR_INVALID_VALUE = 1,
    CKC_CU_ERROR_NOT_INITIALIZED = 3,
    CKC_CU_ERROR_INVALID_CONTEXT = 201,
    CKC_CU_ERROR_NO_DEVICE = 100,
    CKC_CU_ERROR_ECC_UNCORRECTABLE = 214,
    CKC_CU_ERROR_NO_BINARY_FOR_GPU = 209,
    CKC_CU_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    CKC_CU_ERROR_NOT_FOUND = 500,
    CKC_CU_ERROR_NOT_READY = 600,
    CKC_CU_ERROR_ILLEGAL_ADDRESS = 700,
    CKC_CU_ERROR_LAUNCH_TIMEOUT = 702,
    CKC_CU_ERROR_ASSERT = 710,
    CKC_CU_ERROR_HARDWARE_STACK_ERROR = 714,
    CKC_CU_ERROR_ILLEGAL_INSTRUCTION = 715,
    CKC_CU_ERROR_MISALIGNED_ADDRESS = 716,
    CKC_CU_ERROR_INVALID_ADDRESS_SPACE = 717,
    CKC_CU_ERROR_INVALID_PC = 718,
    CKC_CU_ERROR_LAUNCH_FAILED = 719,
    CKC_CU_ERROR_UNKNOWN = 999
};

enum {
    CKC_CU_EVENT_DISABLE_TIMING = 0x2,
    CKC_CU_MEMHOST_PORTABLE = 0x1,  /* CU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTREGISTER_PORTABLE */
    CKC_CU_MEMHOST_DEVICEMAP = 0x2, /* CU_MEMHOSTALLOC_DEVICEMAP, CU_MEMHOSTREGISTER_DEVICEMAP */
    CKC_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    CKC_CU_MEMORYTYPE_HOST = 1,
    CKC_CU_DEVICE_ATTRIBUTE_CC_MAJOR = 75,
    CKC_CU_DEVICE_ATTRIBUTE_CC_MINOR = 76,
    CKC_CU_STREAM_CAPTURE_STATUS_NONE = 0,
    CKC_CU_STREAM_CAPTURE_MODE_RELAXED = 2,
    CKC_CU_STREAM_NON_BLOCKING = 1,
    CKC_CU_LAUNCH_PARAM_BUFFER_POINTER = 1,
    CKC_CU_LAUNCH_PARAM_BUFFER_SIZE = 2
};

/* The errors a stream capture gives a call it forbids (CUDA_ERROR_STREAM_CAPTURE_*):
 * a capture is in the way, not a fault. */
#define CKC_CU_CAPTURE_ERROR_FIRST 900
#define CKC_CU_CAPTURE_ERROR_LAST 908


#define CKC_CUDA_CALL(ret, name, args) ret(CKC_CUDA_API *name) args

typedef struct {
    CKC_CUDA_CALL(CUresult, cuInit, (unsigned flags));
    CKC_CUDA_CALL(CUresult, cuDriverGetVersion, (int *version));
    CKC_CUDA_CALL(CUresult, cuGetErrorName, (CUresult e, const char **name));
    CKC_CUDA_CALL(CUresult, cuGetErrorString, (CUresult e, const char **text));
    CKC_CUDA_CALL(CUresult, cuDeviceGet, (CUdevice * device, int ordinal));
    CKC_CUDA_CALL(CUresult, cuDeviceGetAttribute, (int *value, int attribute, CUdevice device));
    CKC_CUDA_CALL(CUresult, cuDevicePrimaryCtxRetain, (CUcontext * ctx, CUdevice device));
    CKC_CUDA_CALL(CUresult, cuCtxGetCurrent, (CUcontext * ctx));
    CKC_CUDA_CALL(CUresult, cuCtxSetCurrent, (CUcontext ctx));
    CKC_CUDA_CALL(CUresult, cuCtxGetDevice, (CUdevice * device));
    CKC_CUDA_CALL(CUresult, cuModuleLoadData, (CUmodule * module, const void *image));
    CKC_CUDA_CALL(CUresult, cuModuleGetFunction, (CUfunction * f, CUmodule module, const char *name));
    CKC_CUDA_CALL(CUresult, cuLaunchKernel,
                  (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned smem, CUstream stream, void **params, void **extra));
    CKC_CUDA_CALL(CUresult, cuMemsetD8Async, (CUdeviceptr p, unsigned char value, size_t n, CUstream stream));
    CKC_CUDA_CALL(CUresult, cuMemsetD8, (CUdeviceptr p, unsigned char value, size_t n)); /* _v2 */
    CKC_CUDA_CALL(CUresult, cuMemcpyHtoDAsync, (CUdeviceptr dst, const void *src, size_t n, CUstream s)); /* _v2 */
    CKC_CUDA_CALL(CUresult, cuMemAlloc, (CUdeviceptr * p, size_t bytes));                                /* _v2 */
    CKC_CUDA_CALL(CUresult, cuMemFree, (CUdeviceptr p));                                                 /* _v2 */
    CKC_CUDA_CALL(CUresult, cuEventCreate, (CUevent * event, unsigned flags));
    CKC_CUDA_CALL(CUresult, cuEventRecord, (CUevent event, CUstream stream));
    CKC_CUDA_CALL(CUresult, cuEventQuery, (CUevent event));
    CKC_CUDA_CALL(CUresult, cuEventDestroy, (CUevent event)); /* _v2 */
    CKC_CUDA_CALL(CUresult, cuEventSynchronize, (CUevent event));
    CKC_CUDA_CALL(CUresult, cuEventElapsedTime, (float *ms, CUevent start, CUevent end)); /* _v2, else the first */
    CKC_CUDA_CALL(CUresult, cuDeviceGetName, (char *name, int len, CUdevice device));
    CKC_CUDA_CALL(CUresult, cuStreamQuery, (CUstream stream));
    CKC_CUDA_CALL(CUresult, cuStreamSynchronize, (CUstream stream));
    CKC_CUDA_CALL(CUresult, cuStreamIsCapturing, (CUstream stream, int *status));
    CKC_CUDA_CALL(CUresult, cuStreamGetCaptureInfo,
                  (CUstream stream, int *status, unsigned long long *id, void *graph, const void **deps,
                   const void **edges, size_t *count)); /* _v3, from CUDA 12.3 on; NULL before */
    CKC_CUDA_CALL(CUresult, cuStreamGetCaptureInfo_v2,
                  (CUstream stream, int *status, unsigned long long *id, void *graph, const void **deps,
                   size_t *count)); /* drivers before CUDA 12.3 */
    CKC_CUDA_CALL(CUresult, cuThreadExchangeStreamCaptureMode, (int *mode));
    CKC_CUDA_CALL(CUresult, cuStreamCreate, (CUstream * stream, unsigned flags));
    CKC_CUDA_CALL(CUresult, cuStreamDestroy, (CUstream stream)); /* _v2 */
    CKC_CUDA_CALL(CUresult, cuPointerGetAttribute, (void *data, int attribute, CUdeviceptr p));
    CKC_CUDA_CALL(CUresult, cuMemHostGetFlags, (unsigned *flags, void *p));
    CKC_CUDA_CALL(CUresult, cuMemHostRegister, (void *p, size_t bytes, unsigned flags)); /* _v2 */
    CKC_CUDA_CALL(CUresult, cuMemHostAlloc, (void **p, size_t bytes, unsigned flags));
    CKC_CUDA_CALL(CUresult, cuMemFreeHost, (void *p));
    CKC_CUDA_CALL(CUresult, cuMemHostGetDevicePointer, (CUdeviceptr * d, void *p, unsigned flags)); /* _v2 */
    int version; /* cuDriverGetVersion's answer */
} ckc_cuda_api;

/* The driver, opened and initialized on the first call (thread-safe; later
 * calls answer from the first).  NULL when there is none usable, err saying
 * why: no driver library, a symbol missing, cuInit failing (no GPU), or a
 * driver older than every image of the kernels needs (fatbin_info.h: which GPU
 * needs which driver is decided per device when its kernels load).  COMFY_KITCHEN_C_CUDA_DRIVER names
 * the library to open instead of the OS's (tests load stand-ins with it). */
const ckc_cuda_api *ckc_cuda_driver(ckc_error *err);

/* Whether work queued on stream is being captured into a CUDA graph: 1 with the
 * capture's id (0 when the driver cannot say), 0 when not, -1 when the query
 * failed (*error: the driver's answer; a sticky fault, a destroyed stream).  A
 * capture error (CKC_CU_CAPTURE_ERROR_*) counts as a capture: the driver gives
 * one only when a capture forbids the question.  No driver: 0.  The caller has
 * entered the stream's device (stream 0 is the current context's). */
int ckc_cuda_stream_capturing(uintptr_t stream, uint64_t *capture_id, CUresult *error);

/* The calling thread's stream-capture mode made relaxed: the one-time set-up
 * calls that a capture elsewhere would forbid (allocations, host registration,
 * cuBLASLt's handle) neither fail nor invalidate another thread's capture.
 * Returns the mode to restore with ckc_cuda_capture_restore (-1: none to restore). */
int ckc_cuda_capture_relax(void);
void ckc_cuda_capture_restore(int mode);

/* The driver's name and text for e, "NAME: text" into buf. */
void ckc_cuda_error_text(CUresult e, char *buf, size_t cap);

#endif /* CKC_GPU_CUDA_DRIVER_H */
