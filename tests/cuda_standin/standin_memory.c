/* SPDX-License-Identifier: Apache-2.0 */
/* The stand-in driver's memory: device allocations (host memory), pinned and
 * registered host memory, pointer attributes, memsets and copies.  What a
 * capture forbids (allocations, registrations, a synchronous memset) goes
 * through ckcsi_capture_unsafe; the legacy stream's rules through
 * si_legacy_use. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "standin_state.h"

enum { SI_DEVICE = 1, SI_PINNED = 2, SI_REGISTERED = 3 };

typedef struct si_range {
    char *base;
    size_t bytes;
    int kind;
    unsigned flags;
    int device;
    struct si_range *next;
} si_range;

static si_range *ranges;
static int memory_full;             /* every cuMemAlloc fails (ckcsi_memory_full) */
static unsigned long long allocated; /* bytes cuMemAlloc handed out, ever */

static si_range *
range_of(const void *p, size_t bytes)
{
    for (si_range *r = ranges; r != NULL; r = r->next) {
        if ((const char *)p >= r->base && (const char *)p + bytes <= r->base + r->bytes) {
            return r;
        }
    }
    return NULL;
}

static void
add_range(void *base, size_t bytes, int kind, unsigned flags, int device)
{
    si_range *r = (si_range *)calloc(1, sizeof *r);
    r->base = (char *)base;
    r->bytes = bytes;
    r->kind = kind;
    r->flags = flags;
    r->device = device;
    r->next = ranges;
    ranges = r;
}

static int
remove_range(const void *base, int kind)
{
    for (si_range **at = &ranges; *at != NULL; at = &(*at)->next) {
        if ((*at)->base == (const char *)base && (*at)->kind == kind) {
            si_range *r = *at;
            *at = r->next;
            free(r);
            return 1;
        }
    }
    return 0;
}

void
si_memory_reset(void)
{
    memory_full = 0;
}

/* Every cuMemAlloc fails with CUDA_ERROR_OUT_OF_MEMORY while full is set: a GPU whose memory
 * torch's cache holds (until ckcsi_reset). */
CKCSI_EXPORT void
ckcsi_memory_full(int full)
{
    memory_full = full;
}

/* Bytes cuMemAlloc handed out since the process began. */
CKCSI_EXPORT unsigned long long
ckcsi_allocated_bytes(void)
{
    return allocated;
}

/* ---- device memory ---- */

CKCSI_EXPORT int
cuMemAlloc_v2(unsigned long long *p, size_t bytes)
{
    int code = si_need_context("cuMemAlloc");
    void *m;
    if (code == 0) {
        code = ckcsi_capture_unsafe("cuMemAlloc");
    }
    if (code != 0) {
        return code;
    }
    if (bytes == 0) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuMemAlloc", "0 bytes");
    }
    pthread_mutex_lock(&si_lock);
    if (memory_full || ckcsi_inject_fires(CKCSI_INJECT_OOM)) {
        pthread_mutex_unlock(&si_lock);
        return CKCSI_ERROR_OUT_OF_MEMORY;
    }
    m = aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (m != NULL) {
        add_range(m, bytes, SI_DEVICE, 0, si_current()->device);
        allocated += bytes;
        *p = (unsigned long long)(uintptr_t)m;
    }
    pthread_mutex_unlock(&si_lock);
    return m != NULL ? CKCSI_SUCCESS : CKCSI_ERROR_OUT_OF_MEMORY;
}

CKCSI_EXPORT int
cuMemFree_v2(unsigned long long p)
{
    int code = si_need_context("cuMemFree");
    if (code != 0) {
        return code;
    }
    pthread_mutex_lock(&si_lock);
    if (!remove_range((void *)(uintptr_t)p, SI_DEVICE)) {
        code = ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuMemFree", "0x%llx is not an allocation's start", p);
    } else {
        free((void *)(uintptr_t)p);
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

typedef struct {
    void *dst;
    const void *src; /* NULL: a memset of `value` */
    size_t bytes;
    int value;
} si_fill;

static void
run_fill(const void *ctx)
{
    const si_fill *f = (const si_fill *)ctx;
    if (f->src != NULL) {
        memcpy(f->dst, f->src, f->bytes);
    } else {
        memset(f->dst, f->value, f->bytes);
    }
}

/* A memset or copy queued on stream (si_lock not held). */
static int
queue_fill(const char *call, void *stream, const si_fill *f)
{
    int code;
    si_stream *s;
    pthread_mutex_lock(&si_lock);
    s = si_stream_of(stream, call, &code);
    if (s != NULL && si_current() != NULL && s->device != si_current()->device) {
        code = ckcsi_refuse(CKCSI_ERROR_INVALID_HANDLE, call, "a stream of device %d used while device %d's context "
                            "is current", s->device, si_current()->device);
    }
    if (s != NULL && code == 0) {
        code = si_legacy_use(s, call);
    }
    if (s != NULL && code == 0 && s->capture != NULL && f->src != NULL) {
        const si_range *r = range_of(f->src, f->bytes);
        if (r == NULL || r->kind == SI_DEVICE) {
            s->capture->invalidated = 1;
            code = ckcsi_refuse(CKCSI_ERROR_STREAM_CAPTURE_UNSUPPORTED, call,
                                "a capture may copy only from pinned or registered host memory");
        }
    }
    if (s != NULL && code == 0) {
        code = si_issue(s, call, run_fill, f, sizeof *f, 0);
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

CKCSI_EXPORT int
cuMemsetD8Async(unsigned long long p, unsigned char value, size_t n, void *stream)
{
    si_fill f = {(void *)(uintptr_t)p, NULL, n, value};
    int code = stream == NULL ? si_need_context("cuMemsetD8Async") : 0;
    return code != 0 ? code : queue_fill("cuMemsetD8Async", stream, &f);
}

CKCSI_EXPORT int
cuMemsetD8_v2(unsigned long long p, unsigned char value, size_t n)
{
    si_fill f = {(void *)(uintptr_t)p, NULL, n, value};
    int code = si_need_context("cuMemsetD8");
    if (code == 0) {
        code = ckcsi_capture_unsafe("cuMemsetD8 (a synchronous memset on the legacy stream)");
    }
    return code != 0 ? code : queue_fill("cuMemsetD8", NULL, &f);
}

CKCSI_EXPORT int
cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src, size_t n, void *stream)
{
    si_fill f = {(void *)(uintptr_t)dst, src, n, 0};
    int code = stream == NULL ? si_need_context("cuMemcpyHtoDAsync") : 0;
    return code != 0 ? code : queue_fill("cuMemcpyHtoDAsync", stream, &f);
}

/* ---- host memory ---- */

CKCSI_EXPORT int
cuMemHostRegister_v2(void *p, size_t bytes, unsigned flags)
{
    int code = si_need_context("cuMemHostRegister");
    if (code == 0) {
        code = ckcsi_capture_unsafe("cuMemHostRegister");
    }
    if (code != 0) {
        return code;
    }
    pthread_mutex_lock(&si_lock);
    if (range_of(p, 1) != NULL) {
        code = ckcsi_refuse(712 /* CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED */, "cuMemHostRegister",
                            "%p is already registered or pinned", p);
    } else {
        add_range(p, bytes, SI_REGISTERED, flags, si_current()->device);
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

CKCSI_EXPORT int
cuMemHostAlloc(void **p, size_t bytes, unsigned flags)
{
    int code = si_need_context("cuMemHostAlloc");
    if (code == 0) {
        code = ckcsi_capture_unsafe("cuMemHostAlloc");
    }
    if (code != 0) {
        return code;
    }
    pthread_mutex_lock(&si_lock);
    *p = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (*p != NULL) {
        memset(*p, 0, bytes);
        add_range(*p, bytes, SI_PINNED, flags, si_current()->device);
    }
    pthread_mutex_unlock(&si_lock);
    return *p != NULL ? CKCSI_SUCCESS : CKCSI_ERROR_OUT_OF_MEMORY;
}

CKCSI_EXPORT int
cuMemFreeHost(void *p)
{
    int code = 0;
    pthread_mutex_lock(&si_lock);
    if (!remove_range(p, SI_PINNED)) {
        code = ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuMemFreeHost", "%p is not from cuMemHostAlloc", p);
    } else {
        free(p);
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

CKCSI_EXPORT int
cuMemHostGetFlags(unsigned *flags, void *p)
{
    int code = 0;
    const si_range *r;
    pthread_mutex_lock(&si_lock);
    r = range_of(p, 1);
    if (r == NULL || r->kind != SI_PINNED) {
        code = CKCSI_ERROR_INVALID_VALUE; /* registered memory too: only cuMemHostAlloc's has flags */
    } else {
        *flags = r->flags;
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

CKCSI_EXPORT int
cuMemHostGetDevicePointer_v2(unsigned long long *d, void *p, unsigned flags)
{
    int code = si_need_context("cuMemHostGetDevicePointer");
    const si_range *r;
    if (code != 0) {
        return code;
    }
    if (flags != 0) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuMemHostGetDevicePointer", "flags must be 0");
    }
    pthread_mutex_lock(&si_lock);
    r = range_of(p, 1);
    if (r == NULL || r->kind == SI_DEVICE || !(r->flags & 2)) {
        code = ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuMemHostGetDevicePointer",
                            "%p is not pinned or registered with CU_MEMHOSTALLOC_DEVICEMAP", p);
    } else {
        *d = (unsigned long long)(uintptr_t)p;
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

CKCSI_EXPORT int
cuPointerGetAttribute(void *data, int attribute, unsigned long long p)
{
    int code = 0;
    const si_range *r;
    if (attribute != 2) { /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE */
        return ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuPointerGetAttribute", "attribute %d is not modelled",
                            attribute);
    }
    pthread_mutex_lock(&si_lock);
    r = range_of((void *)(uintptr_t)p, 1);
    if (r == NULL) {
        code = CKCSI_ERROR_INVALID_VALUE; /* memory the driver does not know: pageable */
    } else {
        *(unsigned *)data = r->kind == SI_DEVICE ? 2u : 1u; /* CU_MEMORYTYPE_DEVICE / _HOST */
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}
