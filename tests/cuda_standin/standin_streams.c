/* SPDX-License-Identifier: Apache-2.0 */
/* The stand-in driver's streams, events, stream captures and graphs.
 *
 * Work runs when it is issued (every stream order allows that), except on a
 * hung stream: from the work item an injected hang struck, nothing on that
 * stream completes, and a wait on it that has no way out (a synchronize) is
 * refused instead of blocking the test forever.  Captures follow CUDA's
 * rules (cudaStreamCaptureMode): work issued to a captured stream is
 * recorded, replayed at each graph launch; what a capture forbids fails and
 * invalidates the captures it breaks. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin_state.h"

static si_stream legacy[CKCSI_MAX_DEVICES];
static si_stream *streams;
static si_event *events;
#define SI_GRAPHS 256
static si_capture *graphs[SI_GRAPHS]; /* ended captures, by id - 1 */
static si_capture *active[SI_GRAPHS]; /* captures in progress */
static uint64_t next_capture_id = 1;

static si_stream *
legacy_stream(int device)
{
    si_stream *s = &legacy[device];
    if (!s->legacy) {
        s->legacy = 1;
        s->device = device;
        s->hung_at = UINT64_MAX;
    }
    return s;
}

si_stream *
si_stream_of(void *stream, const char *call, int *code)
{
    si_stream *s;
    *code = 0;
    if (stream == NULL) {
        *code = si_need_context(call);
        return *code ? NULL : legacy_stream(si_current()->device);
    }
    for (s = streams; s != NULL && s != (si_stream *)stream; s = s->next) {
    }
    if (s == NULL || s->destroyed) {
        *code = ckcsi_refuse(CKCSI_ERROR_INVALID_HANDLE, call, "stream %p is %s", stream,
                             s == NULL ? "not a stream of this driver" : "destroyed");
        return NULL;
    }
    *code = ckcsi_sticky(s->device);
    return *code ? NULL : s;
}

int
ckcsi_stream_check(void *stream, const char *call)
{
    int code;
    si_stream *s;
    pthread_mutex_lock(&si_lock);
    s = si_stream_of(stream, call, &code);
    if (s != NULL && si_current() != NULL && s->device != si_current()->device) {
        code = ckcsi_refuse(CKCSI_ERROR_INVALID_HANDLE, call, "a stream of device %d used while device %d's "
                            "context is current", s->device, si_current()->device);
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

/* ---- captures ---- */

static void
invalidate(si_capture *c, const char *call)
{
    if (!c->invalidated) {
        c->invalidated = 1;
        snprintf(c->why, sizeof c->why, "invalidated by %s", call);
    }
}

int
ckcsi_capture_unsafe(const char *call)
{
    const int mode = si_thread_capture_mode();
    const pthread_t self = pthread_self();
    int refused = 0;
    if (mode == 2) {
        return 0; /* relaxed: this thread may */
    }
    pthread_mutex_lock(&si_lock);
    for (int i = 0; i < SI_GRAPHS; i++) {
        si_capture *c = active[i];
        const int own = c != NULL && pthread_equal(c->thread, self);
        if (c == NULL || c->invalidated || (c->mode == 2 && !own)) {
            continue;
        }
        if ((own && c->mode != 2) || (mode == 0 && c->mode == 0)) {
            invalidate(c, call);
            refused = 1;
        }
    }
    pthread_mutex_unlock(&si_lock);
    return refused ? ckcsi_refuse(CKCSI_ERROR_STREAM_CAPTURE_UNSUPPORTED, call,
                                  "not permitted while a stream capture is active (cudaStreamCaptureMode): "
                                  "the capture is invalidated")
                   : 0;
}

int
si_legacy_use(si_stream *s, const char *call)
{
    if (!s->legacy) {
        return 0;
    }
    for (si_stream *o = streams; o != NULL; o = o->next) {
        if (o->device == s->device && !o->destroyed && o->capture != NULL && !(o->flags & 1) &&
            !o->capture->invalidated) {
            invalidate(o->capture, call);
            return ckcsi_refuse(CKCSI_ERROR_STREAM_CAPTURE_IMPLICIT, call,
                                "uses the legacy stream while a blocking stream of its device is captured");
        }
    }
    return 0;
}

/* A wait on a stream being captured: forbidden, and it invalidates the capture. */
static int
captured_wait(si_stream *s, const char *call)
{
    if (s->capture == NULL) {
        return 0;
    }
    invalidate(s->capture, call);
    return ckcsi_refuse(CKCSI_ERROR_STREAM_CAPTURE_UNSUPPORTED, call, "waits on a stream that is being captured");
}

static si_work *
work_copy(const char *what, void (*fn)(const void *ctx), const void *ctx, size_t bytes)
{
    si_work *w = (si_work *)calloc(1, sizeof *w);
    w->fn = fn;
    w->ctx = malloc(bytes ? bytes : 1);
    memcpy(w->ctx, ctx, bytes);
    snprintf(w->what, sizeof w->what, "%s", what);
    return w;
}

int
si_issue(si_stream *s, const char *what, void (*fn)(const void *ctx), const void *ctx, size_t bytes, int hang)
{
    uint64_t index;
    if (s->capture != NULL) {
        si_capture *c = s->capture;
        si_work *w;
        if (c->invalidated) {
            return ckcsi_refuse(CKCSI_ERROR_STREAM_CAPTURE_INVALIDATED, what, "the stream's capture was %s", c->why);
        }
        w = work_copy(what, fn, ctx, bytes);
        if (c->last != NULL) {
            c->last->next = w;
        } else {
            c->first = w;
        }
        c->last = w;
        return 0;
    }
    index = s->issued++;
    if (hang && s->hung_at == UINT64_MAX) {
        s->hung_at = index;
    }
    if (s->hung_at <= index) {
        return 0; /* queued behind work that never completes */
    }
    fn(ctx);
    return 0;
}

int
si_completed(const si_stream *s, uint64_t position)
{
    return s->hung_at >= position;
}

int
ckcsi_stream_work(void *stream, const char *what, void (*fn)(const void *ctx), const void *ctx, size_t ctx_bytes)
{
    int code;
    si_stream *s;
    pthread_mutex_lock(&si_lock);
    s = si_stream_of(stream, what, &code);
    if (s != NULL) {
        code = si_legacy_use(s, what);
    }
    if (s != NULL && code == 0) {
        code = si_issue(s, what, fn, ctx, ctx_bytes, 0);
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

/* ---- streams ---- */

static si_stream *
stream_new(int device, int flags)
{
    si_stream *s = (si_stream *)calloc(1, sizeof *s);
    s->device = device;
    s->flags = flags;
    s->hung_at = UINT64_MAX;
    s->next = streams;
    streams = s;
    return s;
}

CKCSI_EXPORT int
cuStreamCreate(si_stream **stream, unsigned flags)
{
    int code = si_need_context("cuStreamCreate");
    if (code == 0 && flags > 1) {
        code = ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuStreamCreate", "flags %u (0 or CU_STREAM_NON_BLOCKING)",
                            flags);
    }
    if (code != 0) {
        return code;
    }
    pthread_mutex_lock(&si_lock);
    *stream = stream_new(si_current()->device, (int)flags);
    pthread_mutex_unlock(&si_lock);
    return CKCSI_SUCCESS;
}

CKCSI_EXPORT int
cuStreamDestroy_v2(si_stream *stream)
{
    int code;
    si_stream *s;
    pthread_mutex_lock(&si_lock);
    s = stream == NULL ? NULL : si_stream_of(stream, "cuStreamDestroy", &code);
    if (stream == NULL) {
        code = ckcsi_refuse(CKCSI_ERROR_INVALID_HANDLE, "cuStreamDestroy", "the legacy stream cannot be destroyed");
    } else if (s != NULL) {
        s->destroyed = 1;
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

CKCSI_EXPORT int
cuStreamQuery(si_stream *stream)
{
    int code;
    si_stream *s;
    pthread_mutex_lock(&si_lock);
    s = si_stream_of(stream, "cuStreamQuery", &code);
    if (s != NULL && (code = captured_wait(s, "cuStreamQuery")) == 0) {
        code = si_legacy_use(s, "cuStreamQuery");
    }
    if (s != NULL && code == 0) {
        code = s->hung_at == UINT64_MAX ? CKCSI_SUCCESS : CKCSI_ERROR_NOT_READY;
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

CKCSI_EXPORT int
cuStreamSynchronize(si_stream *stream)
{
    int code;
    si_stream *s;
    if (stream == NULL && (code = ckcsi_capture_unsafe("cuStreamSynchronize(legacy stream)")) != 0) {
        return code;
    }
    pthread_mutex_lock(&si_lock);
    s = si_stream_of(stream, "cuStreamSynchronize", &code);
    if (s != NULL && (code = captured_wait(s, "cuStreamSynchronize")) == 0) {
        code = si_legacy_use(s, "cuStreamSynchronize");
    }
    if (s != NULL && code == 0 && s->hung_at != UINT64_MAX) {
        code = ckcsi_refuse(CKCSI_ERROR_UNKNOWN, "cuStreamSynchronize",
                            "would block forever: %s stream never completes, and nothing watches the wait",
                            s->legacy ? "the legacy" : "the");
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

CKCSI_EXPORT int
cuStreamIsCapturing(si_stream *stream, int *status)
{
    int code;
    si_stream *s;
    pthread_mutex_lock(&si_lock);
    s = si_stream_of(stream, "cuStreamIsCapturing", &code);
    if (s != NULL) {
        *status = s->capture == NULL ? 0 : (s->capture->invalidated ? 2 : 1);
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

static int capture_info(si_stream *stream, int *status, unsigned long long *id, const void **deps,
                        const void **edges, size_t *count);

CKCSI_EXPORT int
cuStreamGetCaptureInfo_v3(si_stream *stream, int *status, unsigned long long *id, void *graph, const void **deps,
                          const void **edges, size_t *count)
{
    (void)graph;
    if (si_driver_version < 12030) {
        return ckcsi_refuse(CKCSI_ERROR_NOT_FOUND, "cuStreamGetCaptureInfo_v3",
                            "a CUDA %d.%d driver has no such entry point (it came with 12.3)", si_driver_version / 1000,
                            si_driver_version % 1000 / 10);
    }
    return capture_info(stream, status, id, deps, edges, count);
}

CKCSI_EXPORT int
cuStreamGetCaptureInfo_v2(si_stream *stream, int *status, unsigned long long *id, void *graph, const void **deps,
                          size_t *count)
{
    (void)graph;
    return capture_info(stream, status, id, deps, NULL, count);
}

static int
capture_info(si_stream *stream, int *status, unsigned long long *id, const void **deps, const void **edges,
             size_t *count)
{
    int code;
    si_stream *s;
    pthread_mutex_lock(&si_lock);
    s = si_stream_of(stream, "cuStreamGetCaptureInfo", &code);
    if (s != NULL && status != NULL) {
        *status = s->capture == NULL ? 0 : (s->capture->invalidated ? 2 : 1);
    }
    if (s != NULL && id != NULL) {
        *id = s->capture != NULL ? s->capture->id : 0;
    }
    if (deps != NULL) {
        *deps = NULL;
    }
    if (edges != NULL) {
        *edges = NULL;
    }
    if (count != NULL) {
        *count = 0;
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

/* ---- events ---- */

static si_event *
event_of(si_event *e)
{
    si_event *k;
    for (k = events; k != NULL && k != e; k = k->next) {
    }
    return k != NULL && !k->destroyed ? k : NULL;
}

CKCSI_EXPORT int
cuEventCreate(si_event **event, unsigned flags)
{
    int code = si_need_context("cuEventCreate");
    if (code != 0) {
        return code;
    }
    pthread_mutex_lock(&si_lock);
    *event = (si_event *)calloc(1, sizeof **event);
    (*event)->flags = (int)flags;
    (*event)->next = events;
    events = *event;
    pthread_mutex_unlock(&si_lock);
    return CKCSI_SUCCESS;
}

CKCSI_EXPORT int
cuEventRecord(si_event *event, si_stream *stream)
{
    int code;
    si_stream *s;
    si_event *e;
    pthread_mutex_lock(&si_lock);
    e = event_of(event);
    s = si_stream_of(stream, "cuEventRecord", &code);
    if (e == NULL) {
        code = ckcsi_refuse(CKCSI_ERROR_INVALID_HANDLE, "cuEventRecord", "not a live event");
    } else if (s != NULL && (code = si_legacy_use(s, "cuEventRecord")) == 0) {
        e->stream = s;
        e->position = s->capture != NULL ? UINT64_MAX : s->issued;
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

/* 0: complete; NOT_READY; or a refusal / the sticky error. */
static int
event_state(si_event *event, const char *call)
{
    si_event *e = event_of(event);
    if (e == NULL) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_HANDLE, call, "not a live event");
    }
    if (e->stream == NULL) {
        return CKCSI_SUCCESS; /* never recorded */
    }
    if (ckcsi_sticky(e->stream->device)) {
        return ckcsi_sticky(e->stream->device);
    }
    if (e->position == UINT64_MAX) {
        return ckcsi_refuse(CKCSI_ERROR_STREAM_CAPTURE_UNSUPPORTED, call, "the event was recorded into a capture");
    }
    return si_completed(e->stream, e->position) ? CKCSI_SUCCESS : CKCSI_ERROR_NOT_READY;
}

CKCSI_EXPORT int
cuEventQuery(si_event *event)
{
    int code;
    pthread_mutex_lock(&si_lock);
    code = event_state(event, "cuEventQuery");
    pthread_mutex_unlock(&si_lock);
    return code;
}

CKCSI_EXPORT int
cuEventSynchronize(si_event *event)
{
    int code;
    pthread_mutex_lock(&si_lock);
    code = event_state(event, "cuEventSynchronize");
    if (code == CKCSI_ERROR_NOT_READY) {
        code = ckcsi_refuse(CKCSI_ERROR_UNKNOWN, "cuEventSynchronize",
                            "would block forever: the event's stream never completes");
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

CKCSI_EXPORT int
cuEventElapsedTime_v2(float *ms, si_event *start, si_event *end)
{
    int code;
    pthread_mutex_lock(&si_lock);
    code = event_state(start, "cuEventElapsedTime");
    if (code == 0) {
        code = event_state(end, "cuEventElapsedTime");
    }
    if (code == 0 && ((start->flags | end->flags) & 2)) {
        code = ckcsi_refuse(CKCSI_ERROR_INVALID_HANDLE, "cuEventElapsedTime",
                            "an event created with CU_EVENT_DISABLE_TIMING");
    }
    if (code == 0 && (start->stream == NULL || end->stream == NULL)) {
        code = ckcsi_refuse(CKCSI_ERROR_INVALID_HANDLE, "cuEventElapsedTime", "an event never recorded");
    }
    if (code == 0) {
        *ms = 0.001f * (float)(end->position > start->position ? end->position - start->position : 0);
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

CKCSI_EXPORT int
cuEventDestroy_v2(si_event *event)
{
    int code = 0;
    pthread_mutex_lock(&si_lock);
    if (event_of(event) == NULL) {
        code = ckcsi_refuse(CKCSI_ERROR_INVALID_HANDLE, "cuEventDestroy", "not a live event");
    } else {
        event->destroyed = 1; /* kept: a later use is refused, not a use after free */
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

/* ---- control API: streams, hangs, captures, graphs ---- */

int cuInit(unsigned flags);

CKCSI_EXPORT void *
ckcsi_stream_new(int device, int flags)
{
    si_stream *s = NULL;
    (void)cuInit(0); /* a test may make streams before `_C` first reaches the driver */
    pthread_mutex_lock(&si_lock);
    if (device >= 0 && device < si_device_count) {
        s = stream_new(device, flags);
    }
    pthread_mutex_unlock(&si_lock);
    return s;
}

/* Makes stream (NULL: device's legacy stream) hang from now on, as if work queued on it
 * before (torch's) never completes. */
CKCSI_EXPORT void
ckcsi_hang_stream(void *stream, int device)
{
    si_stream *s;
    (void)cuInit(0);
    pthread_mutex_lock(&si_lock);
    s = stream != NULL ? (si_stream *)stream : legacy_stream(device);
    if (s->hung_at == UINT64_MAX) {
        s->hung_at = s->issued++;
    }
    pthread_mutex_unlock(&si_lock);
}

/* Whether stream (NULL: device's legacy stream) is hung. */
CKCSI_EXPORT int
ckcsi_stream_hung(void *stream, int device)
{
    int hung;
    pthread_mutex_lock(&si_lock);
    hung = (stream != NULL ? (si_stream *)stream : legacy_stream(device))->hung_at != UINT64_MAX;
    pthread_mutex_unlock(&si_lock);
    return hung;
}

CKCSI_EXPORT int
ckcsi_capture_begin(void *stream, int mode)
{
    int code = 0;
    si_stream *s = (si_stream *)stream;
    pthread_mutex_lock(&si_lock);
    if (s == NULL || s->capture != NULL) {
        code = ckcsi_refuse(CKCSI_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuStreamBeginCapture",
                            s == NULL ? "the legacy stream cannot be captured" : "the stream is already captured");
    } else {
        si_capture *c = (si_capture *)calloc(1, sizeof *c);
        c->id = next_capture_id++;
        c->mode = mode;
        c->thread = pthread_self();
        s->capture = c;
        for (int i = 0; i < SI_GRAPHS; i++) {
            if (active[i] == NULL) {
                active[i] = c;
                break;
            }
        }
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

CKCSI_EXPORT int
ckcsi_capture_end(void *stream, uint64_t *graph)
{
    int code = 0;
    si_stream *s = (si_stream *)stream;
    si_capture *c;
    pthread_mutex_lock(&si_lock);
    c = s != NULL ? s->capture : NULL;
    if (c == NULL) {
        code = ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuStreamEndCapture", "the stream is not being captured");
    } else {
        s->capture = NULL;
        for (int i = 0; i < SI_GRAPHS; i++) {
            active[i] = active[i] == c ? NULL : active[i];
        }
        if (c->invalidated) {
            code = CKCSI_ERROR_STREAM_CAPTURE_INVALIDATED;
        } else if (c->id <= SI_GRAPHS) {
            graphs[c->id - 1] = c;
            *graph = c->id;
        }
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

CKCSI_EXPORT int
ckcsi_graph_launch(uint64_t graph, void *stream)
{
    int code = 0;
    si_stream *s;
    pthread_mutex_lock(&si_lock);
    s = si_stream_of(stream, "cuGraphLaunch", &code);
    if (s != NULL && (graph == 0 || graph > SI_GRAPHS || graphs[graph - 1] == NULL)) {
        code = ckcsi_refuse(CKCSI_ERROR_INVALID_HANDLE, "cuGraphLaunch", "no graph %llu", (unsigned long long)graph);
    }
    if (s != NULL && code == 0) {
        for (si_work *w = graphs[graph - 1]->first; w != NULL && code == 0; w = w->next) {
            code = si_issue(s, w->what, w->fn, w->ctx, 0, 0);
        }
    }
    pthread_mutex_unlock(&si_lock);
    return code;
}

void
si_streams_reset(void)
{
    for (int d = 0; d < CKCSI_MAX_DEVICES; d++) {
        legacy[d].hung_at = UINT64_MAX;
    }
    for (si_stream *s = streams; s != NULL; s = s->next) {
        s->hung_at = UINT64_MAX;
        s->capture = NULL;
    }
    memset(active, 0, sizeof active);
}
