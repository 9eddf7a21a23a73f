/* The GPU runtime seam on the CUDA runtime (linked statically: its own error
 * state, so every check happens here, in the module that launched).  Each
 * failing call raises with the call, file and line, the CUDA error's name and
 * text. */
#if defined(CKC_WITH_CUDA)

#include <cuda_runtime_api.h>

#include "runtime.h"

#define CKC_CUDA_TRY(err, call)                                                                   \
    do {                                                                                          \
        const cudaError_t ckc_cuda_ = (call);                                                     \
        if (ckc_cuda_ != cudaSuccess) {                                                           \
            return ckc_error_set((err), CKC_ERR_RUNTIME, __FILE__, __LINE__, __func__,            \
                                 "%s failed: %s: %s", #call, cudaGetErrorName(ckc_cuda_),         \
                                 cudaGetErrorString(ckc_cuda_));                                  \
        }                                                                                         \
    } while (0)

ckc_status
ckc_gpu_launch_status(const char *kernel, ckc_error *err)
{
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) {
        return CKC_OK;
    }
    return CKC_FAIL(err, CKC_ERR_RUNTIME, "launch of %s failed: %s: %s", kernel, cudaGetErrorName(e),
                    cudaGetErrorString(e));
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

#endif /* CKC_WITH_CUDA */
