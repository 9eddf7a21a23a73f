/* The GPU runtime seam on the emulated device (kernels/emu): device memory is
 * host memory, work runs synchronously at launch, one device. */
#if defined(CKC_EMULATED)

#include <string.h>

#include "emu/emu_api.h"
#include "runtime.h"

ckc_status
ckc_gpu_launch_status(const char *kernel, ckc_error *err)
{
    char message[400];
    const int code = ckc_emu_last_error(message, sizeof message);
    if (code == 0) {
        return CKC_OK;
    }
    return CKC_FAIL(err, CKC_ERR_RUNTIME, "%s of %s on the emulated device: %s",
                    code == 1 ? "launch" : "kernel fault", kernel, message);
}

ckc_status
ckc_gpu_memset_async(void *p, int value, size_t bytes, uintptr_t stream, ckc_error *err)
{
    (void)stream;
    (void)err;
    memset(p, value, bytes);
    return CKC_OK;
}

ckc_status
ckc_gpu_device_enter(int device, ckc_gpu_device_guard *guard, ckc_error *err)
{
    (void)device;
    (void)err;
    guard->previous = 0;
    return CKC_OK;
}

ckc_status
ckc_gpu_versions(int *driver, int *runtime, ckc_error *err)
{
    (void)err;
    *driver = 0;
    *runtime = 0;
    return CKC_OK;
}

void
ckc_gpu_device_leave(const ckc_gpu_device_guard *guard)
{
    (void)guard;
}

#endif /* CKC_EMULATED */
