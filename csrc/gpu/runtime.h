/* SPDX-License-Identifier: Apache-2.0 */
/* The one seam between the GPU launchers (gpu/launch_*.c) and a device runtime.
 * Two implementations: runtime_cuda.c (the CUDA driver, for real GPUs) and
 * runtime_emu.c (the emulated device of the tests).  Nothing else calls a
 * device runtime. */
#ifndef CKC_GPU_RUNTIME_H
#define CKC_GPU_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "contract/done_mark.h"
#include "contract/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- kernels and their launches ------------------------------------------
 * A kernel of the fatbins (kernels/<family>.cu, one extern "C" symbol per
 * template instance: gpu/kernel_list.h), as the launchers (gpu/launch_*.c) hold
 * it.  On a GPU the driver loads its fatbin into the device's context and finds
 * the symbol on the first launch there; on the emulated device `emu` runs the
 * same kernel source compiled for the CPU.  CKC_KERNEL_DEVICES: the most devices
 * the runtime serves (per-device tables: kernel handles, contexts, mapped host ranges). */
#define CKC_KERNEL_DEVICES 64

typedef int (*ckc_emu_thunk)(const char *log, const unsigned grid[3], const unsigned block[3], size_t smem,
                             uintptr_t stream, void **args);

typedef struct {
    const char *symbol;  /* its name in the fatbin, e.g. "int8_rowwise_kernel__1_2_0" */
    const char *family;  /* the template's name, in messages: "int8_rowwise_kernel" */
    const char *log;     /* its name in the launch log and fault reports: "int8_rowwise" */
    const char *module;  /* the fatbin holding it: its .cu file's stem, "int8" */
    int args[4];         /* template arguments (unused ones 0) */
    ckc_emu_thunk emu;   /* the emulated device's runner; NULL in GPU builds */
    void *volatile function[CKC_KERNEL_DEVICES]; /* the driver's handle per device, once found */
} ckc_kernel;

typedef struct {
    unsigned grid[3];
    unsigned block[3];
    size_t smem;        /* dynamic shared memory, bytes */
    uintptr_t stream;
} ckc_launch_cfg;

/* One kernel argument, in the kernel's order: the value, its size and its
 * alignment, from which the parameter buffer is laid out as the kernel's
 * parameters are (each at the next multiple of its alignment), for the driver
 * (which checks the buffer's size against the kernel's) and the emulated
 * device alike.  CKC_KARG(x) of an lvalue x. */
typedef struct {
    const void *p;
    size_t size;
    size_t align;
} ckc_karg;

#if defined(_MSC_VER) && !defined(__clang__)
#define CKC_ALIGNOF_EXPR(x) __alignof(x)
#else
#define CKC_ALIGNOF_EXPR(x) __alignof__(x)
#endif
#define CKC_KARG(x) {&(x), sizeof(x), CKC_ALIGNOF_EXPR(x)}
#define CKC_KARG_COUNT(args) (sizeof(args) / sizeof((args)[0]))
/* The most arguments a kernel takes, and the most bytes they fill (CUDA's limit). */
#define CKC_MAX_KARGS 16
#define CKC_MAX_KARG_BYTES 4096

/* Launches k on the current device with its nargs arguments, notes it in the
 * launch log, and returns its status:
 * fails naming the kernel when the launch was refused (or, on the emulated
 * device, when the kernel faulted), when the device holds an earlier sticky
 * fault, or when the fatbin has no code for this GPU. */
ckc_status ckc_gpu_launch(ckc_kernel *k, const ckc_launch_cfg *cfg, const ckc_karg *args, size_t nargs,
                          ckc_error *err);


/* Fills bytes of device memory with value, in stream order. */
ckc_status ckc_gpu_memset_async(void *p, int value, size_t bytes, uintptr_t stream, ckc_error *err);

/* Makes `device` current for the calling thread; ckc_gpu_device_leave restores
 * the previous one (calls on several GPUs each run on their tensors' device). */
typedef struct {
    void *previous; /* the caller's context (CUDA) */
    void *entered;  /* the device's */
} ckc_gpu_device_guard;

ckc_status ckc_gpu_device_enter(int device, ckc_gpu_device_guard *guard, ckc_error *err);
void ckc_gpu_device_leave(const ckc_gpu_device_guard *guard);

/* ---- What the fault checks need (csrc/diag) -------------------------------
 * Failures that the device reports fill err->device_error with the runtime's
 * error name and text.  ckc_gpu_launch classifies a failed launch:
 * CKC_ERR_LAUNCH (this launch was refused), CKC_ERR_KERNEL (this launch's
 * kernel faulted; only the emulated device knows at launch), CKC_ERR_DEVICE
 * (the device holds an earlier asynchronous, sticky fault). */

/* Starts an op's work on the calling thread: clears its launch log (and, on
 * the emulated device, names the op for fault injection). */
void ckc_gpu_begin_op(const char *op);

/* The calling thread's launches since ckc_gpu_begin_op: how many, and the last one. */
typedef struct {
    int launches;
    const char *kernel;      /* NULL when none */
    unsigned grid[3];
    unsigned block[3];
} ckc_gpu_launch_info;

void ckc_gpu_launch_log(ckc_gpu_launch_info *info);

/* Notes a launch for the launch log (ckc_gpu_launch calls it). */
void ckc_gpu_note_launch(const char *kernel, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz);

/* An event recorded on a stream: completes when the work queued before it has. */
typedef struct ckc_gpu_event_s *ckc_gpu_event;

ckc_status ckc_gpu_event_record_new(uintptr_t stream, ckc_gpu_event *event, ckc_error *err);
void ckc_gpu_event_destroy(ckc_gpu_event event);

/* 1: completed; 0: not yet; -1: the device reports a fault (err filled,
 * CKC_ERR_DEVICE) or the query failed (CKC_ERR_RUNTIME: a destroyed stream).
 * The query runs on `device` (entered for it: the calling thread need not have
 * a current context; stream 0 is that device's legacy stream). */
int ckc_gpu_event_query(int device, ckc_gpu_event event, ckc_error *err);
int ckc_gpu_stream_query(int device, uintptr_t stream, ckc_error *err);

/* Copies bytes of host memory to device memory in stream order. */
ckc_status ckc_gpu_copy_h2d_async(void *dst, const void *src, size_t bytes, uintptr_t stream, ckc_error *err);

/* What host memory [p, p + bytes) is: "pinned" (cudaHostAlloc), "registered"
 * (cudaHostRegister), "file-mapped" (a pageable file-backed mapping),
 * "pageable", or "unknown". */
const char *ckc_gpu_host_memory(const void *p, size_t bytes);

/* ---- Completion marks of the flight record (csrc/diag/marks.c) ---- */

/* Makes host memory [base, base + bytes) writable by the device (every device,
 * for ckc_gpu_write_value64): 1 when it is, 0 when the OS or the driver refuses.
 * Tried once per range (CUDA: cudaHostRegister, mapped and portable); later calls
 * answer from the first, cheaply enough for every op. */
int ckc_gpu_map_host(void *base, size_t bytes);

/* Host memory that every device can write (ckc_gpu_map_host accepts it); NULL
 * when none can be had (CUDA: cudaHostAlloc, mapped and portable).  Never freed. */
void *ckc_gpu_alloc_mapped_host(size_t bytes);

/* Stores value into *word (in host memory that ckc_gpu_map_host accepted) in
 * stream order, from the device's side: the store lands only when the work
 * queued before it has completed (CUDA: a one-thread kernel, kernels/flight.cu). */
ckc_status ckc_gpu_write_value64(uint64_t *word, uint64_t value, uintptr_t stream, int device, ckc_error *err);

/* For marks that ride on an op's last kernel (contract/done_mark.h): where device
 * addresses *word (host memory that ckc_gpu_map_host accepted), NULL when it
 * cannot; the caller has entered device. */
uint64_t *ckc_gpu_device_word(uint64_t *word, int device);

/* count arrival counters in device memory of device, zeroed: allocated on the
 * first call per device (the caller has entered it), never freed; NULL when
 * the memory cannot be had.  Every call for a device asks the same count. */
uint32_t *ckc_gpu_mark_arrivals(int device, size_t count);

/* ---- CUDA graphs (csrc/diag/capture.c) ------------------------------------
 * While a stream is captured into a graph, nothing may wait for the device,
 * allocate device or pinned memory, or register host memory: the two lookups
 * below answer from what was set up before, without asking the runtime. */

/* Whether work queued on stream (of `device`, entered for the query) is being
 * captured into a CUDA graph: 1 with the capture's id (the runtime's unique id
 * of the capture sequence; 0 when it cannot say), 0 when not, -1 when the
 * query failed: err CKC_ERR_DEVICE for a sticky fault (an earlier kernel's),
 * else CKC_ERR_RUNTIME (a destroyed or unknown stream).  A refusal because of a
 * capture counts as a capture. */
int ckc_gpu_stream_capture(int device, uintptr_t stream, uint64_t *capture_id, ckc_error *err);

/* What ckc_gpu_map_host answered for [base, base + bytes): 1 mapped, 0
 * refused, -1 not asked yet. */
int ckc_gpu_host_mapped(const void *base, size_t bytes);

/* The arrival counters ckc_gpu_mark_arrivals made for device, or NULL. */
uint32_t *ckc_gpu_mark_arrivals_known(int device);

/* ---- the flight record's kernels (kernels/flight.cu; GPU builds only) ----- */
/* A one-thread kernel writing mark m (a null mark: nothing). */
ckc_status ckc_gpu_flight_mark(const ckc_done_mark *m, uintptr_t stream, ckc_error *err);
/* A one-thread kernel beginning a replay of the captured work of `capture`:
 * n = ++*counter (device memory), then *capture_word = capture and
 * *number_word = n (host words the device can write). */
ckc_status ckc_gpu_replay_begin(uint32_t *counter, uint64_t *capture_word, uint64_t *number_word, uint64_t capture,
                                uintptr_t stream, ckc_error *err);

#ifdef __cplusplus
}
#endif

#endif /* CKC_GPU_RUNTIME_H */
