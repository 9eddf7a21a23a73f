/* SPDX-License-Identifier: Apache-2.0 */
/* The emulated device's C interface: what host code (C or C++) calls around
 * kernel launches.  The launch itself, ckc_emu_launch, takes a C++ callable and
 * is declared in emu.h; everything else a host caller needs is here.
 *
 * Errors follow cudaGetLastError: a failed launch records an error on the
 * calling OS thread and ckc_emu_last_error reads and clears it. */
#ifndef CKC_EMU_API_H
#define CKC_EMU_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes returned by ckc_emu_last_error (and by ckc_emu_launch). */
enum {
    CKC_EMU_OK = 0,
    CKC_EMU_LAUNCH_ERROR = 1, /* invalid configuration: the kernel did not run */
    CKC_EMU_KERNEL_FAULT = 2, /* the kernel ran and faulted (deadlock, bad warp mask, ...) */
    CKC_EMU_STICKY = 3        /* refused: the device holds an earlier asynchronous fault */
};

/* Returns the calling OS thread's pending error code (CKC_EMU_OK when none) and
 * clears it.  When message is not NULL and cap > 0, copies a description naming
 * the kernel and the problem (NUL-terminated, truncated to cap bytes; "" when
 * there is no error).  When several launches fail before a read, the first
 * error is kept: later ones are usually its consequences. */
int ckc_emu_last_error(char *message, size_t cap);

/* The running block's dynamic shared memory: as many bytes as the launch asked
 * for, 16-byte aligned, filled with 0xCD at the start of every block so that a
 * kernel reading it before writing sees garbage.  NULL when the launch asked for
 * none, or outside a kernel. */
void *ckc_emu_dynamic_shared(void);

/* ---- Streams, events, copies and injected faults (emu_streams.cpp) -----------
 * Work still runs synchronously when it is issued, but each stream keeps a
 * queue position and the device a sticky error, so that the emulated device can
 * model work that never completes (an injected hang: that work and everything
 * later on its stream never run, events recorded after it never signal, value
 * writes after it never land) and faults that surface later, at the next query
 * or launch, as CUDA's asynchronous errors do.  Until ckc_emu_reset. */

/* Kinds of injected fault. */
enum {
    CKC_EMU_INJECT_LAUNCH = 1, /* the launch is refused at once */
    CKC_EMU_INJECT_KERNEL = 2, /* the kernel runs nothing; the device reports a sticky fault later */
    CKC_EMU_INJECT_COPY = 3,   /* the async copy copies nothing; sticky fault reported later */
    CKC_EMU_INJECT_HANG = 4    /* the kernel or copy never completes */
};

/* Arms a fault for the nth kernel launch (copy, for CKC_EMU_INJECT_COPY) made
 * while op is the thread's current op (NULL or "": any op); a hang arms
 * kernels and copies alike.  Each armed fault fires once. */
void ckc_emu_inject(int kind, const char *op, int nth);

/* Disarms every fault, clears the sticky error and every stream's hang: a
 * device reset (work that was never completed is dropped). */
void ckc_emu_reset(void);

/* Names the op whose work the calling OS thread issues next (injection
 * matching, launch log); clears the thread's launch log. */
void ckc_emu_set_op(const char *op);

/* The calling thread's launches since ckc_emu_set_op: returns how many, and
 * the last one's kernel name (NULL if none), grid and block. */
int ckc_emu_launch_log(const char **kernel, unsigned grid[3], unsigned block[3]);

/* Admits one unit of stream work (what: the kernel's name, "memcpy" or
 * "memset"; copy: 1 counts as a copy for injection, 2 is stream work that no
 * injection targets).  Returns CKC_EMU_OK: run it;
 * CKC_EMU_SKIP: run nothing and report success (queued behind a hang, or an
 * injected kernel/copy fault that the device reports later); or an error code
 * with its description in why. */
enum { CKC_EMU_SKIP = -1 };
int ckc_emu_admit(const char *what, uintptr_t stream, int copy, char *why, size_t cap);

/* Records what a launch asked for, for the launch log. */
void ckc_emu_note_launch(const char *kernel, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz);

/* Copies bytes from src to dst in stream order (host memory on both sides). */
int ckc_emu_copy_async(void *dst, const void *src, size_t bytes, uintptr_t stream, char *why, size_t cap);

/* Stores value into *p in stream order (a write that never lands after a hang or fault). */
void ckc_emu_write_value64(uint64_t *p, uint64_t value, uintptr_t stream);

/* Host memory the emulated device writes completion marks into.  By default it
 * can write any host memory, as a GPU can write registered memory.  With
 * refusal on (ckc_emu_refuse_host_mapping(1): COMFY_KITCHEN_C_EMU_REFUSE_HOST_MAPPING
 * arrives that way with the other settings), it refuses to map any host memory but
 * its own allocations, as Linux >= 6.5 refuses CUDA to pin the file-backed
 * flight record: the tests exercise the pinned completion words that way. */
void ckc_emu_refuse_host_mapping(int refuse);

/* The order a block's threads run in (COMFY_KITCHEN_C_EMU_SCHEDULE): shuffle 0
 * in order; else shuffled from seed (emu_runtime.cpp, "Schedule"). */
void ckc_emu_set_schedule(int shuffle, uint64_t seed);
/* Host-timing mode (benchmarks/bench_host.py --emulated): with skip on, a kernel
 * launch, or an emulated GEMM (ckc_emu_stream_work), is checked, logged and
 * admitted to its stream as usual, then not run, so that a call's time is its
 * host path (wrapper, launchers, the device seam) and not the emulation of its
 * kernels.  Results are garbage meanwhile.  Copies and memsets still run. */
void ckc_emu_skip_kernels(int skip);
int ckc_emu_kernels_skipped(void);
/* 1: the device can write [p, p + bytes); 0: refused.  The first call for a
 * range registers it (forbidden during a capture: refused, not remembered). */
int ckc_emu_map_host(const void *p, size_t bytes);
/* What ckc_emu_map_host would answer, without registering: -1 not yet asked. */
int ckc_emu_host_mapped(const void *p, size_t bytes);
/* The device's own host memory (its "pinned" memory), zeroed; NULL when out of memory.  Never freed. */
void *ckc_emu_alloc_host(size_t bytes);

/* The device's arrival counters of riding completion marks (csrc/contract/done_mark.h):
 * count of them, zeroed, allocated on the first call (every call asks the same
 * count); NULL when out of memory.  A reset zeroes them again, as it drops the
 * arrivals of work that never completed, but the last, the flight record's
 * replay counter (replay numbers only grow). */
uint32_t *ckc_emu_mark_arrivals(size_t count);
/* The arrival counters if allocated, else NULL (allocates nothing). */
uint32_t *ckc_emu_mark_arrivals_known(void);

/* An event: the queue position of the stream when it was recorded. */
uint64_t ckc_emu_event_record(uintptr_t stream);

/* 0: everything of stream up to position (UINT64_MAX: all of it) completed;
 * 1: not yet; CKC_EMU_STICKY: the device holds a fault (name and text filled). */
int ckc_emu_query(uintptr_t stream, uint64_t position, char *name, size_t name_cap, char *text, size_t text_cap);

/* Stream-ordered host work (the emulated cuBLASLt's GEMMs): runs now, or is
 * recorded when stream is being captured; admitted as stream work (it never
 * runs behind a hang or a sticky fault; injected faults do not count it).
 * ctx (bytes of it) is copied.  Returns CKC_EMU_OK or an error with why. */
int ckc_emu_stream_work(const char *what, uintptr_t stream, void (*run)(const void *ctx), const void *ctx,
                        size_t bytes, char *why, size_t cap);

/* Fills bytes at p with value in stream order (recorded when stream is captured). */
int ckc_emu_memset_async(void *p, int value, size_t bytes, uintptr_t stream, char *why, size_t cap);

/* ---- CUDA-graph capture and replay (emu_graphs.cpp) --------------------------
 * As CUDA's stream capture: between ckc_emu_capture_begin and _end, the work
 * issued to the stream (kernel launches, memsets, copies, value writes, stream
 * work) is recorded, not run; ckc_emu_graph_launch replays it in order on a
 * stream, each node admitted as if issued then (hangs, injected faults and the
 * sticky error apply at replay; a node's op is the one it was captured under).
 * What CUDA forbids while a capture is active fails as CUDA fails: queries and
 * waits on streams or events, device and pinned allocations, host
 * registrations, copies from pageable memory into the captured stream.  Such a
 * call returns CKC_EMU_CAPTURE ("cudaErrorStreamCaptureUnsupported") and
 * invalidates the capture, whose end then fails
 * ("cudaErrorStreamCaptureInvalidated"); which threads are held to it follows
 * the capture's mode, as CUDA's cudaStreamCaptureMode. */
enum { CKC_EMU_CAPTURE = 4 };
enum { CKC_EMU_CAPTURE_GLOBAL = 0, CKC_EMU_CAPTURE_THREAD_LOCAL = 1, CKC_EMU_CAPTURE_RELAXED = 2 };

int ckc_emu_capture_begin(uintptr_t stream, int mode, char *why, size_t cap);
/* Ends the capture and returns its graph (*graph, never 0) or an error. */
int ckc_emu_capture_end(uintptr_t stream, uint64_t *graph, char *why, size_t cap);
int ckc_emu_graph_launch(uint64_t graph, uintptr_t stream, char *why, size_t cap);
void ckc_emu_graph_destroy(uint64_t graph);
/* 1 and the capture's id (never 0) when stream is being captured, else 0. */
int ckc_emu_capture_status(uintptr_t stream, uint64_t *id);
/* Checks a call CUDA forbids during a capture (see above): CKC_EMU_OK, or
 * CKC_EMU_CAPTURE with why filled and the capture invalidated. */
int ckc_emu_unsafe_call(const char *what, char *why, size_t cap);
/* The op the calling thread's work is issued under (ckc_emu_set_op's). */
const char *ckc_emu_current_op(void);


/* ---- Cross-stream hazards (emu_hazards.cpp; the model is described there) ----
 * Off until ckc_emu_hazards_track(1); either call clears every clock, access and
 * report.  Reports accumulate as lines; ckc_emu_hazard_take reads and clears them. */
void ckc_emu_hazards_track(int on);
/* Whether tracking is on: callers skip their per-call reporting (ops/hazards.c) while it is off. */
int ckc_emu_hazards_on(void);
/* Work on stream reads (write 0) or writes [p, p + bytes); what names it in reports. */
void ckc_emu_hazard_access(const void *p, size_t bytes, uintptr_t stream, int write, const char *what);
/* An event recorded on stream (its id, never 0), and a wait of stream on one: 0, or -1 for an unknown id. */
uint64_t ckc_emu_hazard_record(uintptr_t stream);
int ckc_emu_hazard_wait(uintptr_t stream, uint64_t event);
/* The calling thread runs op for a caller on stream (begin 1) or finished it (begin 0). */
void ckc_emu_hazard_op(const char *op, uintptr_t stream, int begin);
/* Stream work admitted (ckc_emu_admit): reported when an op issues it on another stream than its caller's. */
void ckc_emu_hazard_work(const char *what, uintptr_t stream);
/* Copies the reports (NUL-terminated, at most cap - 1 bytes; cleared when they all fit); returns their length. */
size_t ckc_emu_hazard_take(char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* CKC_EMU_API_H */
