/* SPDX-License-Identifier: Apache-2.0 */
/* Error reporting below the Python boundary: functions return a ckc_status and
 * fill a ckc_error; module/state.c turns it into the matching Python exception once.
 * CKC_FAIL records the file, line and function where the failure was found. */
#ifndef CKC_CONTRACT_STATUS_H
#define CKC_CONTRACT_STATUS_H

#include <stddef.h>
#include <stdio.h>

/* The formats ckc_error_set's vsnprintf accepts, for the compiler to check.
 * MinGW's GCC reads `printf` as the formats of the old msvcrt.dll, which lack
 * %zu; its stdio.h names the archetype of the C runtime it was set up for (the
 * UCRT of MSVC builds, or MinGW's own ANSI stdio: C99 formats). */
#if defined(__MINGW32__)
#define CKC_PRINTF_FORMAT __MINGW_PRINTF_FORMAT
#else
#define CKC_PRINTF_FORMAT printf
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CKC_OK = 0,
    CKC_ERR_VALUE,        /* bad shape, size or value: ArgumentError (ValueError) */
    CKC_ERR_TYPE,         /* bad dtype or device: ArgumentTypeError (TypeError) */
    CKC_ERR_MEMORY,       /* host allocation failed: MemoryError */
    CKC_ERR_RUNTIME,      /* anything else: RuntimeError */
    CKC_ERR_CAPTURE,      /* not allowed while the stream is captured into a CUDA graph: CaptureError */
    /* Device faults (csrc/diag): the CudaFault exceptions. */
    CKC_ERR_LAUNCH,       /* this launch was refused: LaunchError */
    CKC_ERR_KERNEL,       /* a kernel of this op faulted: KernelFault */
    CKC_ERR_DEVICE,       /* the device reports an earlier asynchronous fault (culprit: flight record) */
    CKC_ERR_STAGING,      /* work queued before the op (copies among it) failed: StagingFault */
    CKC_ERR_HANG          /* a fence saw no progress past the watchdog's limit: HangSuspected */
} ckc_status;

typedef struct {
    ckc_status status;
    const char *op;       /* op being run when the error happened */
    const char *file;
    const char *func;
    int line;
    char message[512];
    char device_error[160]; /* the device runtime's error name and text, "" if none */
} ckc_error;

ckc_status ckc_error_set(ckc_error *err, ckc_status status, const char *file, int line,
                         const char *func, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(CKC_PRINTF_FORMAT, 6, 7)))
#endif
    ;

#define CKC_FAIL(err, status, ...) \
    ckc_error_set((err), (status), __FILE__, __LINE__, __func__, __VA_ARGS__)

/* Propagate a failing status from a call that already filled the error. */
#define CKC_TRY(expr)                    \
    do {                                 \
        ckc_status ckc_try_ = (expr);    \
        if (ckc_try_ != CKC_OK) {        \
            return ckc_try_;             \
        }                                \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif /* CKC_CONTRACT_STATUS_H */
