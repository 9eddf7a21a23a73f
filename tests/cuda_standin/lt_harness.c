/* SPDX-License-Identifier: Apache-2.0 */
/* A fake of the driver side of the stand-in (standin.h: the calls
 * standin_cublaslt.c makes), for tests/test_standin_cublaslt.py, which builds
 * it with standin_cublaslt.c into one shared library and drives both through
 * ctypes.  Everything is switchable from the test (lt_harness_*): the current
 * device and compute capabilities, sticky errors, whether a capture forbids
 * allocations, the stream's behaviour (work runs now, is recorded as a
 * graph's and replayed on demand, never runs on a hung stream, or is refused
 * with a CUresult), injected cublasLtMatmul failures; refusals are counted
 * and the last one kept.
 *
 * Only compiled with -DCKCSI_LT_HARNESS: a build of libckc_standin.so that
 * takes every .c file here gets an empty unit, not a second driver. */
#if defined(CKCSI_LT_HARNESS)

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

#define H_DEVICES 4
#define H_BAD_STREAM ((void *)(uintptr_t)0xBAD)

enum { H_RUN = 0, H_CAPTURE = 1, H_HANG = 2, H_FAIL = 3 };

typedef struct h_rec {
    void (*fn)(const void *ctx);
    void *ctx;
    struct h_rec *next;
} h_rec;

static int h_device = 0;
static int h_cc[H_DEVICES] = {100, 100, 90, 120};
static int h_sticky[H_DEVICES];
static int h_capture_refuses;
static int h_stream_mode = H_RUN;
static int h_stream_error = CKCSI_ERROR_ILLEGAL_ADDRESS;
static int h_inject_kind, h_inject_at;
static int h_counts[8];
static int h_refusals;
static char h_last[2048];
static h_rec *h_graph;
static int h_ran, h_recorded, h_dropped;

/* ---- the driver side standin_cublaslt.c calls ---- */

int
ckcsi_inject_fires(int kind)
{
    if (kind < 0 || kind >= 8) {
        return 0;
    }
    h_counts[kind]++;
    if (kind == h_inject_kind && h_counts[kind] == h_inject_at) {
        h_inject_kind = 0;
        return 1;
    }
    return 0;
}

int
ckcsi_refuse(int code, const char *call, const char *rule_fmt, ...)
{
    va_list ap;
    int n = snprintf(h_last, sizeof h_last, "%s: ", call);
    va_start(ap, rule_fmt);
    if (n > 0 && (size_t)n < sizeof h_last) {
        vsnprintf(h_last + n, sizeof h_last - (size_t)n, rule_fmt, ap);
    }
    va_end(ap);
    h_refusals++;
    if (getenv("LT_HARNESS_VERBOSE") != NULL) {
        fprintf(stderr, "refused (%d) %s\n", code, h_last);
    }
    return code;
}

int
ckcsi_current_device(void)
{
    return h_device;
}

int
ckcsi_device_cc(int device)
{
    return device >= 0 && device < H_DEVICES ? h_cc[device] : 0;
}

int
ckcsi_sticky(int device)
{
    return device >= 0 && device < H_DEVICES ? h_sticky[device] : 0;
}

void
ckcsi_set_sticky(int device, int code, const char *why)
{
    (void)why;
    if (device >= 0 && device < H_DEVICES) {
        h_sticky[device] = code;
    }
}

int
ckcsi_stream_check(void *stream, const char *call)
{
    if (stream == H_BAD_STREAM) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_HANDLE, call, "unknown stream %p", stream);
    }
    return h_device >= 0 && h_sticky[h_device] != 0 ? h_sticky[h_device] : 0;
}

int
ckcsi_stream_work(void *stream, const char *what, void (*fn)(const void *ctx), const void *ctx, size_t ctx_bytes)
{
    const int checked = ckcsi_stream_check(stream, what);
    if (checked != 0) {
        return checked;
    }
    switch (h_stream_mode) {
    case H_FAIL:
        return h_stream_error;
    case H_HANG:
        h_dropped++;
        return 0;
    case H_CAPTURE: {
        h_rec *r = (h_rec *)calloc(1, sizeof *r);
        h_rec **tail = &h_graph;
        if (r == NULL || (r->ctx = malloc(ctx_bytes)) == NULL) {
            free(r);
            return CKCSI_ERROR_OUT_OF_MEMORY;
        }
        memcpy(r->ctx, ctx, ctx_bytes);
        r->fn = fn;
        while (*tail != NULL) {
            tail = &(*tail)->next;
        }
        *tail = r;
        h_recorded++;
        return 0;
    }
    default:
        fn(ctx);
        h_ran++;
        return 0;
    }
}

int
ckcsi_capture_unsafe(const char *call)
{
    if (h_capture_refuses) {
        return ckcsi_refuse(CKCSI_ERROR_STREAM_CAPTURE_UNSUPPORTED, call,
                            "not permitted while a stream capture is active (cudaStreamCaptureMode): the capture "
                            "is invalidated");
    }
    return 0;
}

/* ---- the test's controls ---- */

CKCSI_EXPORT void
lt_harness_reset(void)
{
    h_device = 0;
    h_cc[0] = 100;
    h_cc[1] = 100;
    h_cc[2] = 90;
    h_cc[3] = 120;
    memset(h_sticky, 0, sizeof h_sticky);
    h_capture_refuses = 0;
    h_stream_mode = H_RUN;
    h_stream_error = CKCSI_ERROR_ILLEGAL_ADDRESS;
    h_inject_kind = h_inject_at = 0;
    memset(h_counts, 0, sizeof h_counts);
    h_refusals = 0;
    h_last[0] = '\0';
    while (h_graph != NULL) {
        h_rec *next = h_graph->next;
        free(h_graph->ctx);
        free(h_graph);
        h_graph = next;
    }
    h_ran = h_recorded = h_dropped = 0;
}

CKCSI_EXPORT void
lt_harness_set_device(int device)
{
    h_device = device;
}

CKCSI_EXPORT void
lt_harness_set_cc(int device, int cc)
{
    if (device >= 0 && device < H_DEVICES) {
        h_cc[device] = cc;
    }
}

CKCSI_EXPORT void
lt_harness_set_sticky(int device, int code)
{
    ckcsi_set_sticky(device, code, "test");
}

CKCSI_EXPORT void
lt_harness_set_capture_refuses(int refuses)
{
    h_capture_refuses = refuses;
}

/* 0: work runs now, 1: recorded (a capture), 2: never runs (a hung stream),
 * 3: refused with CUresult error. */
CKCSI_EXPORT void
lt_harness_set_stream(int mode, int error)
{
    h_stream_mode = mode;
    h_stream_error = error;
}

/* The n-th event of kind from now fires (once). */
CKCSI_EXPORT void
lt_harness_inject(int kind, int n)
{
    if (kind > 0 && kind < 8) {
        h_inject_kind = kind;
        h_inject_at = h_counts[kind] + n;
    }
}

/* Runs the recorded work in order (a graph launch); returns how much. */
CKCSI_EXPORT int
lt_harness_replay(void)
{
    int n = 0;
    for (const h_rec *r = h_graph; r != NULL; r = r->next) {
        r->fn(r->ctx);
        n++;
    }
    return n;
}

CKCSI_EXPORT int
lt_harness_counter(int which)
{
    switch (which) {
    case 0: return h_refusals;
    case 1: return h_ran;
    case 2: return h_recorded;
    case 3: return h_dropped;
    default: return which >= 8 && which < 16 ? h_counts[which - 8] : -1;
    }
}

CKCSI_EXPORT const char *
lt_harness_last_refusal(void)
{
    return h_last;
}

#endif /* CKCSI_LT_HARNESS */

/* Not empty without the harness (ISO C wants a declaration in every unit). */
typedef int ckcsi_lt_harness_unit;
