/* SPDX-License-Identifier: Apache-2.0 */
/* A stand-in for the CUDA driver library (libcuda.so.1), for tests of how `_C`
 * finds and judges a driver (csrc/gpu/cuda_driver.c) on machines without one.
 * FAKE_CUDA_MODE selects what it pretends: "no_device" (cuInit fails with
 * CUDA_ERROR_NO_DEVICE), "old" (a CUDA 11.8 driver), anything else a working
 * CUDA 13.0 driver.  Built with -DFAKE_CUDA_MISSING_CAPTURE_INFO it lacks
 * cuStreamGetCaptureInfo_v2, as drivers before CUDA 11.3 do.  Nothing here
 * touches a GPU: every other entry point answers CUDA_ERROR_NO_DEVICE. */
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define NO_DEVICE 100

static int
mode_is(const char *mode)
{
    const char *m = getenv("FAKE_CUDA_MODE");
    return m != NULL && strcmp(m, mode) == 0;
}

EXPORT int cuInit(unsigned flags) { (void)flags; return mode_is("no_device") ? NO_DEVICE : 0; }
EXPORT int cuDriverGetVersion(int *v) { *v = mode_is("old") ? 11080 : 13000; return 0; }
EXPORT int
cuGetErrorName(int e, const char **name)
{
    *name = e == NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
    return 0;
}
EXPORT int
cuGetErrorString(int e, const char **text)
{
    *text = e == NO_DEVICE ? "no CUDA-capable device is detected" : "unknown error";
    return 0;
}

/* Every other entry point the loader binds: present, and refusing. */
#define REFUSE(name)                                                                                             \
    EXPORT int name(void) { return NO_DEVICE; }
REFUSE(cuDeviceGet)
REFUSE(cuDeviceGetAttribute)
REFUSE(cuDevicePrimaryCtxRetain)
REFUSE(cuCtxGetCurrent)
REFUSE(cuCtxSetCurrent)
REFUSE(cuCtxGetDevice)
REFUSE(cuModuleLoadData)
REFUSE(cuModuleGetFunction)
REFUSE(cuLaunchKernel)
REFUSE(cuMemsetD8Async)
REFUSE(cuMemsetD8_v2)
REFUSE(cuMemcpyHtoDAsync_v2)
REFUSE(cuMemAlloc_v2)
REFUSE(cuMemFree_v2)
REFUSE(cuEventCreate)
REFUSE(cuEventRecord)
REFUSE(cuEventQuery)
REFUSE(cuEventDestroy_v2)
REFUSE(cuEventSynchronize)
REFUSE(cuEventElapsedTime_v2)
REFUSE(cuDeviceGetName)
REFUSE(cuStreamQuery)
REFUSE(cuStreamSynchronize)
REFUSE(cuStreamIsCapturing)
REFUSE(cuStreamGetCaptureInfo_v3)
#if !defined(FAKE_CUDA_MISSING_CAPTURE_INFO)
REFUSE(cuStreamGetCaptureInfo_v2)
#endif
REFUSE(cuThreadExchangeStreamCaptureMode)
REFUSE(cuStreamCreate)
REFUSE(cuStreamDestroy_v2)
REFUSE(cuPointerGetAttribute)
REFUSE(cuMemHostGetFlags)
REFUSE(cuMemHostRegister_v2)
REFUSE(cuMemHostAlloc)
REFUSE(cuMemFreeHost)
REFUSE(cuMemHostGetDevicePointer_v2)
