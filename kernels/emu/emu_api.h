/* The emulated device's C interface: what host code (C or C++) calls around
 * kernel launches.  The launch itself, ckc_emu_launch, takes a C++ callable and
 * is declared in emu.h; everything else a host caller needs is here.
 *
 * Errors follow cudaGetLastError: a failed launch records an error on the
 * calling OS thread and ckc_emu_last_error reads and clears it. */
#ifndef CKC_EMU_API_H
#define CKC_EMU_API_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes returned by ckc_emu_last_error (and by ckc_emu_launch). */
enum {
    CKC_EMU_OK = 0,
    CKC_EMU_LAUNCH_ERROR = 1, /* invalid configuration: the kernel did not run */
    CKC_EMU_KERNEL_FAULT = 2  /* the kernel ran and faulted (deadlock, bad warp mask, ...) */
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

#ifdef __cplusplus
}
#endif

#endif /* CKC_EMU_API_H */
