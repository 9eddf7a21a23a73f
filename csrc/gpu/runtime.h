/* The one seam between the GPU launchers (kernels/<family>.cu) and a device runtime.
 * Two implementations: runtime_cuda.c (the CUDA runtime, for real GPUs) and
 * runtime_emu.c (the emulated device of the tests).  Nothing else calls a
 * device runtime. */
#ifndef CKC_GPU_RUNTIME_H
#define CKC_GPU_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Status of the launch just made: fails, naming the op and the kernel, when the
 * launch was rejected (or, on the emulated device, when the kernel faulted). */
ckc_status ckc_gpu_launch_status(const char *kernel, ckc_error *err);

/* Fills bytes of device memory with value, in stream order. */
ckc_status ckc_gpu_memset_async(void *p, int value, size_t bytes, uintptr_t stream, ckc_error *err);

/* Versions as CUDA encodes them (1000*major + 10*minor): the installed driver's
 * (0 when no driver is installed) and the runtime this module was built with;
 * both 0 on the emulated device.  Needs no GPU: `doctor` reports them. */
ckc_status ckc_gpu_versions(int *driver, int *runtime, ckc_error *err);

/* Makes `device` current for the calling thread; ckc_gpu_device_leave restores
 * the previous one (calls on several GPUs each run on their tensors' device). */
typedef struct {
    int previous;
} ckc_gpu_device_guard;

ckc_status ckc_gpu_device_enter(int device, ckc_gpu_device_guard *guard, ckc_error *err);
void ckc_gpu_device_leave(const ckc_gpu_device_guard *guard);

#ifdef __cplusplus
}
#endif

#endif /* CKC_GPU_RUNTIME_H */
