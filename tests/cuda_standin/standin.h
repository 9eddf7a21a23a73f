/* SPDX-License-Identifier: Apache-2.0 */
/* The stand-in CUDA driver and cuBLASLt (test code): one shared library,
 * libckc_standin.so, that exports the CUDA driver API entry points `_C` binds
 * (csrc/gpu/cuda_driver.c) and the cuBLASLt functions it loads
 * (csrc/gpu/blas_cublaslt.c), so that the real driver path of `_C` runs on a
 * machine without a GPU: COMFY_KITCHEN_C_CUDA_DRIVER and COMFY_KITCHEN_C_CUBLASLT
 * name it.  Device memory is host memory; kernels run on the emulated device
 * (`_C_emu`'s kernels, found by their symbols); GEMMs are plain C references.
 *
 * Unlike the emulated device, it holds the caller to the driver's rules: a
 * call that a real driver refuses, or that would break on one, fails with the
 * driver's error code and is logged with the call and the rule named
 * (ckcsi_violations); faults can be injected (ckcsi_inject).
 *
 * This header is what the parts of the stand-in share:
 *   standin_driver.c   contexts, devices, versions, errors, the control API
 *   standin_memory.c   allocations, host registration, pointer attributes
 *   standin_streams.c  streams, events, stream-ordered work, captures, hangs
 *   standin_launch.c   modules (the real fatbins, standin_image.c), functions,
 *                      launches checked against the cubin's records
 *   standin_image.c    fatbin, cubin and PTX reading; the driver's choice of image
 *   standin_cublaslt.c the cuBLASLt subset, GEMMs as stream work */
#ifndef CKC_STANDIN_H
#define CKC_STANDIN_H

#include <stddef.h>
#include <stdint.h>

#define CKCSI_EXPORT __attribute__((visibility("default")))

/* CUresult values (cuda.h) the stand-in returns. */
enum {
    CKCSI_SUCCESS = 0,
    CKCSI_ERROR_INVALID_VALUE = 1,
    CKCSI_ERROR_OUT_OF_MEMORY = 2,
    CKCSI_ERROR_NOT_INITIALIZED = 3,
    CKCSI_ERROR_NO_DEVICE = 100,
    CKCSI_ERROR_INVALID_DEVICE = 101,
    CKCSI_ERROR_INVALID_IMAGE = 200,
    CKCSI_ERROR_INVALID_CONTEXT = 201,
    CKCSI_ERROR_NO_BINARY_FOR_GPU = 209,
    CKCSI_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    CKCSI_ERROR_INVALID_HANDLE = 400,
    CKCSI_ERROR_NOT_FOUND = 500,
    CKCSI_ERROR_NOT_READY = 600,
    CKCSI_ERROR_ILLEGAL_ADDRESS = 700,
    CKCSI_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CKCSI_ERROR_LAUNCH_FAILED = 719,
    CKCSI_ERROR_MISALIGNED_ADDRESS = 716,
    CKCSI_ERROR_ILLEGAL_INSTRUCTION = 715,
    CKCSI_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
    CKCSI_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
    CKCSI_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
    CKCSI_ERROR_UNKNOWN = 999
};

/* ---- faults to inject (ckcsi_inject) ---- */
enum {
    CKCSI_INJECT_ILLEGAL_ADDRESS = 1, /* launch n runs nothing; the context holds a sticky 700 from then on */
    CKCSI_INJECT_OOM = 2,             /* cuMemAlloc call n fails with CUDA_ERROR_OUT_OF_MEMORY */
    CKCSI_INJECT_HANG = 3,            /* launch n never completes, nor anything after it on its stream */
    CKCSI_INJECT_DESTROY_STREAM = 4,  /* the stream of launch n is destroyed after that launch */
    CKCSI_INJECT_BLAS_FAILED = 5      /* cublasLtMatmul call n returns CUBLAS_STATUS_EXECUTION_FAILED */
};

/* Counts one event of `kind` (launches, cuMemAlloc calls, cublasLtMatmul
 * calls) and says whether an injected fault of that kind fires now (1), once. */
int ckcsi_inject_fires(int kind);

/* A call the driver refuses (or that would break on a real one): logs
 * "call: rule" (formatted) for ckcsi_violations and returns code.  Some
 * refusals are only logged, where a real driver returns success but the
 * program is wrong (pass code CKCSI_SUCCESS). */
int ckcsi_refuse(int code, const char *call, const char *rule_fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The calling thread's current context's device (>= 0), or -1 with none
 * current (the call is then refused by the caller with
 * CUDA_ERROR_INVALID_CONTEXT). */
int ckcsi_current_device(void);

/* device's compute capability as 10 * major + minor (90 for an H100, 100 for
 * a B200), for the checks that depend on it (cuBLASLt's block-scaled GEMMs
 * need 100 or more); 0 for no such device. */
int ckcsi_device_cc(int device);

/* The sticky error of device's context (0: none): a fault that every later
 * call on that context returns. */
int ckcsi_sticky(int device);
void ckcsi_set_sticky(int device, int code, const char *why);

/* ---- streams (standin_streams.c) ---- */

/* Checks stream for a call `call` made on the current context: 0, or the
 * refusal's code (unknown or destroyed stream, a stream of another device,
 * no current context, a sticky error). */
int ckcsi_stream_check(void *stream, const char *call);

/* Queues fn(ctx) on stream, as a kernel or copy would be: it runs now unless
 * the stream is hung (then never) or being captured (then recorded, with ctx
 * copied, and run at each replay).  `what` names it in logs.  0 or a CUresult. */
int ckcsi_stream_work(void *stream, const char *what, void (*fn)(const void *ctx), const void *ctx,
                      size_t ctx_bytes);

/* Whether an operation that a capture forbids (a legacy-stream sync, an
 * allocation, a memset on the legacy stream, a host registration) may run on
 * this thread now: 0, or CKCSI_ERROR_STREAM_CAPTURE_UNSUPPORTED after
 * invalidating the captures it breaks (global ones from any thread, the
 * thread's own thread-local ones), as cudaStreamCaptureMode defines;
 * a thread in relaxed mode (cuThreadExchangeStreamCaptureMode) may. */
int ckcsi_capture_unsafe(const char *call);

#endif /* CKC_STANDIN_H */
