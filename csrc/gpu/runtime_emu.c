/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU runtime seam on the emulated device (csrc/emu): device memory is
 * host memory, work runs synchronously when issued, one device; streams keep
 * queue positions so that injected hangs and asynchronous faults behave as on
 * a GPU (csrc/emu/emu_streams.cpp). */
#if defined(CKC_EMULATED)

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/emu_api.h"
#include "platform/mapped_file.h"
#include "gpu.h"
#include "runtime.h"

/* The status of the launch just made: what the emulator recorded for it. */
static ckc_status
launch_status(const char *kernel, ckc_error *err)
{
    char message[400];
    const int code = ckc_emu_last_error(message, sizeof message);
    ckc_status status;
    if (code == 0) {
        return CKC_OK;
    }
    status = code == CKC_EMU_LAUNCH_ERROR ? CKC_ERR_LAUNCH : (code == CKC_EMU_STICKY ? CKC_ERR_DEVICE : CKC_ERR_KERNEL);
    CKC_FAIL(err, status, "%s of %s on the emulated device: %s",
             code == CKC_EMU_LAUNCH_ERROR ? "launch" : (code == CKC_EMU_STICKY ? "launch" : "kernel fault"), kernel,
             message);
    if (code == CKC_EMU_STICKY) {
        char text[320];
        (void)ckc_emu_query(0, 0, err->device_error, sizeof err->device_error, text, sizeof text);
        snprintf(err->device_error + strlen(err->device_error), sizeof err->device_error - strlen(err->device_error),
                 ": %s", text);
    }
    return status;
}

ckc_status
ckc_gpu_launch(ckc_kernel *k, const ckc_launch_cfg *cfg, const ckc_karg *args, size_t nargs, ckc_error *err)
{
    void *values[CKC_MAX_KARGS];
    if (nargs > CKC_MAX_KARGS) {
        return CKC_FAIL(err, CKC_ERR_LAUNCH, "%s takes %zu arguments, more than %d", k->family, nargs, CKC_MAX_KARGS);
    }
    for (size_t i = 0; i < nargs; i++) {
        values[i] = (void *)args[i].p;
    }
    /* The runner notes the launch (under the log name) and runs it, as CUDA
     * would in stream order; a fault it recorded is read back as on a GPU. */
    (void)k->emu(k->log, cfg->grid, cfg->block, cfg->smem, cfg->stream, values);
    return launch_status(k->family, err);
}

ckc_status
ckc_gpu_memset_async(void *p, int value, size_t bytes, uintptr_t stream, ckc_error *err)
{
    char why[400];
    const int code = ckc_emu_memset_async(p, value, bytes, stream, why, sizeof why);
    if (code != CKC_EMU_OK) {
        return CKC_FAIL(err, code == CKC_EMU_STICKY ? CKC_ERR_DEVICE : CKC_ERR_LAUNCH, "%s", why);
    }
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

/* ---- what the fault checks need ---- */

void
ckc_gpu_begin_op(const char *op)
{
    ckc_emu_set_op(op);
}

void
ckc_gpu_launch_log(ckc_gpu_launch_info *info)
{
    info->launches = ckc_emu_launch_log(&info->kernel, info->grid, info->block);
}

void
ckc_gpu_note_launch(const char *kernel, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz)
{
    ckc_emu_note_launch(kernel, gx, gy, gz, bx, by, bz);
}

struct ckc_gpu_event_s {
    uintptr_t stream;
    uint64_t position;
};

ckc_status
ckc_gpu_event_record_new(uintptr_t stream, ckc_gpu_event *event, ckc_error *err)
{
    *event = malloc(sizeof **event);
    if (*event == NULL) {
        return CKC_FAIL(err, CKC_ERR_MEMORY, "out of memory for an event");
    }
    (*event)->stream = stream;
    (*event)->position = ckc_emu_event_record(stream);
    return CKC_OK;
}

void
ckc_gpu_event_destroy(ckc_gpu_event event)
{
    free(event);
}

static int
query(uintptr_t stream, uint64_t position, ckc_error *err)
{
    char text[320];
    const int state = ckc_emu_query(stream, position, err->device_error, sizeof err->device_error, text, sizeof text);
    if (state == CKC_EMU_CAPTURE) {
        CKC_FAIL(err, CKC_ERR_CAPTURE, "%s", text);
        return -1;
    }
    if (state == CKC_EMU_STICKY) {
        CKC_FAIL(err, CKC_ERR_DEVICE, "the emulated device reports a fault: %s: %s", err->device_error, text);
        snprintf(err->device_error + strlen(err->device_error), sizeof err->device_error - strlen(err->device_error),
                 ": %s", text);
        return -1;
    }
    return state == 0;
}

int
ckc_gpu_event_query(int device, ckc_gpu_event event, ckc_error *err)
{
    (void)device;
    return query(event->stream, event->position, err);
}

int
ckc_gpu_stream_query(int device, uintptr_t stream, ckc_error *err)
{
    (void)device;
    return query(stream, UINT64_MAX, err);
}

ckc_status
ckc_gpu_copy_h2d_async(void *dst, const void *src, size_t bytes, uintptr_t stream, ckc_error *err)
{
    char why[400];
    const int code = ckc_emu_copy_async(dst, src, bytes, stream, why, sizeof why);
    if (code != CKC_EMU_OK) {
        return CKC_FAIL(err, code == CKC_EMU_STICKY ? CKC_ERR_DEVICE
                                                    : (code == CKC_EMU_CAPTURE ? CKC_ERR_CAPTURE : CKC_ERR_LAUNCH),
                        "%s", why);
    }
    return CKC_OK;
}

const char *
ckc_gpu_host_memory(const void *p, size_t bytes)
{
    /* Nothing is pinned on the emulated device; the OS tells file mappings apart. */
    const int file = ckc_host_range_is_file_mapped(p, bytes);
    return file > 0 ? "file-mapped" : (file == 0 ? "pageable" : "unknown");
}

int
ckc_gpu_map_host(void *base, size_t bytes)
{
    return ckc_emu_map_host(base, bytes);
}

void *
ckc_gpu_alloc_mapped_host(size_t bytes)
{
    return ckc_emu_alloc_host(bytes);
}

ckc_status
ckc_gpu_write_value64(uint64_t *word, uint64_t value, uintptr_t stream, int device, ckc_error *err)
{
    (void)device;
    (void)err;
    ckc_emu_write_value64(word, value, stream);
    return CKC_OK;
}

uint64_t *
ckc_gpu_device_word(uint64_t *word, int device)
{
    (void)device;
    return word; /* the emulated device addresses host memory directly */
}

uint32_t *
ckc_gpu_mark_arrivals(int device, size_t count)
{
    (void)device;
    return ckc_emu_mark_arrivals(count);
}

int
ckc_gpu_stream_capture(int device, uintptr_t stream, uint64_t *capture_id, ckc_error *err)
{
    (void)device;
    (void)err;
    return ckc_emu_capture_status(stream, capture_id);
}

int
ckc_gpu_host_mapped(const void *base, size_t bytes)
{
    return ckc_emu_host_mapped(base, bytes);
}

uint32_t *
ckc_gpu_mark_arrivals_known(int device)
{
    (void)device;
    return ckc_emu_mark_arrivals_known();
}

#endif /* CKC_EMULATED */
