/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU runtime seam in a build without a GPU runtime (no nvcc): only the
 * diagnostics wing (csrc/diag) reaches it, for stage/fence, which the Python
 * layer refuses before it gets here without a device; every call fails or
 * reports nothing queued. */
#if !defined(CKC_WITH_GPU)

#include "runtime.h"

static ckc_status
no_gpu(ckc_error *err)
{
    return CKC_FAIL(err, CKC_ERR_RUNTIME, "this build of comfy_kitchen_c has no GPU support");
}

ckc_status
ckc_gpu_memset_async(void *p, int value, size_t bytes, uintptr_t stream, ckc_error *err)
{
    (void)p;
    (void)value;
    (void)bytes;
    (void)stream;
    return no_gpu(err);
}

ckc_status
ckc_gpu_device_enter(int device, ckc_gpu_device_guard *guard, ckc_error *err)
{
    (void)device;
    guard->previous = 0;
    return no_gpu(err);
}

void
ckc_gpu_device_leave(const ckc_gpu_device_guard *guard)
{
    (void)guard;
}

void
ckc_gpu_begin_op(const char *op)
{
    (void)op;
}

void
ckc_gpu_launch_log(ckc_gpu_launch_info *info)
{
    info->launches = 0;
    info->kernel = NULL;
}

void
ckc_gpu_note_launch(const char *kernel, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz)
{
    (void)kernel;
    (void)gx;
    (void)gy;
    (void)gz;
    (void)bx;
    (void)by;
    (void)bz;
}

ckc_status
ckc_gpu_event_record_new(uintptr_t stream, ckc_gpu_event *event, ckc_error *err)
{
    (void)stream;
    *event = NULL;
    return no_gpu(err);
}

void
ckc_gpu_event_destroy(ckc_gpu_event event)
{
    (void)event;
}

int
ckc_gpu_event_query(int device, ckc_gpu_event event, ckc_error *err)
{
    (void)device;
    (void)event;
    (void)err;
    return 1;
}

int
ckc_gpu_stream_query(int device, uintptr_t stream, ckc_error *err)
{
    (void)device;
    (void)stream;
    (void)err;
    return 1;
}

ckc_status
ckc_gpu_copy_h2d_async(void *dst, const void *src, size_t bytes, uintptr_t stream, ckc_error *err)
{
    (void)dst;
    (void)src;
    (void)bytes;
    (void)stream;
    return no_gpu(err);
}

const char *
ckc_gpu_host_memory(const void *p, size_t bytes)
{
    (void)p;
    (void)bytes;
    return "unknown";
}

int
ckc_gpu_map_host(void *base, size_t bytes)
{
    (void)base;
    (void)bytes;
    return 0;
}

void *
ckc_gpu_alloc_mapped_host(size_t bytes)
{
    (void)bytes;
    return NULL;
}

ckc_status
ckc_gpu_write_value64(uint64_t *word, uint64_t value, uintptr_t stream, int device, ckc_error *err)
{
    (void)word;
    (void)value;
    (void)stream;
    (void)device;
    (void)err;
    return CKC_OK;
}

uint64_t *
ckc_gpu_device_word(uint64_t *word, int device)
{
    (void)word;
    (void)device;
    return NULL;
}

uint32_t *
ckc_gpu_mark_arrivals(int device, size_t count)
{
    (void)device;
    (void)count;
    return NULL;
}

int
ckc_gpu_stream_capture(int device, uintptr_t stream, uint64_t *capture_id, ckc_error *err)
{
    (void)device;
    (void)stream;
    (void)err;
    *capture_id = 0;
    return 0;
}

int
ckc_gpu_host_mapped(const void *base, size_t bytes)
{
    (void)base;
    (void)bytes;
    return 0;
}

uint32_t *
ckc_gpu_mark_arrivals_known(int device)
{
    (void)device;
    return NULL;
}

#endif /* !CKC_WITH_GPU */
