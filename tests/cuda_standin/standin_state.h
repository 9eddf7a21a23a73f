/* SPDX-License-Identifier: Apache-2.0 */
/* The stand-in driver's state, shared by its parts (standin.h lists them):
 * devices and their primary contexts, streams, events, the one lock.  Not part
 * of the interface the cuBLASLt part sees (standin.h). */
#ifndef CKC_STANDIN_STATE_H
#define CKC_STANDIN_STATE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "standin.h"

#define CKCSI_MAX_DEVICES 8

typedef struct CUctx_st {
    int device;
} si_context;

typedef struct {
    int cc;            /* 10 * major + minor */
    int sticky;        /* the context's sticky error, 0: none */
    char sticky_why[300];
    int retained;      /* cuDevicePrimaryCtxRetain calls */
    si_context context;
} si_device;

/* A piece of stream work (a kernel, a copy, a GEMM): fn(ctx), ctx owned. */
typedef struct si_work {
    void (*fn)(const void *ctx);
    void *ctx;
    char what[96];
    struct si_work *next;
} si_work;

/* A capture in progress on a stream (cuStreamBeginCapture's), or a graph made of one. */
typedef struct si_capture {
    uint64_t id;
    int mode;          /* 0 global, 1 thread-local, 2 relaxed (CUstreamCaptureMode) */
    pthread_t thread;  /* the thread that began it */
    int invalidated;
    char why[300];
    si_work *first, *last;
} si_capture;

typedef struct CUstream_st {
    int device;
    int flags;         /* 1: CU_STREAM_NON_BLOCKING */
    int legacy;        /* the context's NULL stream */
    int destroyed;
    uint64_t issued;   /* work items issued so far */
    uint64_t hung_at;  /* index of the first work item that never completes; UINT64_MAX: none */
    si_capture *capture;
    struct CUstream_st *next;
} si_stream;

typedef struct CUevent_st {
    si_stream *stream; /* NULL until recorded */
    uint64_t position; /* the stream's `issued` when recorded */
    int flags;
    int destroyed;
    struct CUevent_st *next;
} si_event;

/* ---- standin_driver.c ---- */
extern pthread_mutex_t si_lock;
extern si_device si_devices[CKCSI_MAX_DEVICES];
extern int si_device_count;
extern int si_driver_version;

/* Whether cuInit ran: else every call answers CUDA_ERROR_NOT_INITIALIZED. */
int si_initialized(void);
/* The calling thread's current context, NULL when none. */
si_context *si_current(void);
/* The calling thread's capture mode (cuThreadExchangeStreamCaptureMode). */
int si_thread_capture_mode(void);
/* 0, or the code to return: not initialized, no current context, or the context's sticky error. */
int si_need_context(const char *call);
/* The named library of emulated kernels (CKC_STANDIN_KERNELS), dlopen'd; NULL when unset. */
void *si_kernels_library(void);

/* ---- standin_streams.c ---- */
/* The stream a call names (NULL: the current context's legacy stream); NULL when invalid (code in *code). */
si_stream *si_stream_of(void *stream, const char *call, int *code);
/* Legacy-stream use while a capture is active on a blocking stream of its context: 0 or the refusal. */
int si_legacy_use(si_stream *s, const char *call);
/* Issues one work item on s; runs it now unless s is hung or captured (si_lock held on entry and exit). */
int si_issue(si_stream *s, const char *what, void (*fn)(const void *ctx), const void *ctx, size_t bytes,
             int hang);
/* Whether every work item of s issued before `position` completed. */
int si_completed(const si_stream *s, uint64_t position);
void si_streams_reset(void);

/* ---- standin_memory.c ---- */
void si_memory_reset(void);

/* ---- standin_launch.c ---- */
void si_launch_reset(void);

#endif /* CKC_STANDIN_STATE_H */
