/* SPDX-License-Identifier: Apache-2.0 */
/* Shared libraries opened at run time, one implementation per OS
 * (library_posix.c, library_win32.c): the CUDA driver (gpu/cuda_driver.c) is
 * found this way, so that `_C` links no CUDA library and imports on machines
 * without a GPU. */
#ifndef CKC_PLATFORM_LIBRARY_H
#define CKC_PLATFORM_LIBRARY_H

#include <stddef.h>

/* The library at `name` (a file name searched the OS's way, or a path), or NULL
 * with the OS's reason in why[cap] (cut where it does not fit).  Never closed:
 * the process keeps what it loaded. */
void *ckc_library_open(const char *name, char *why, size_t cap);

/* The address of `symbol` in lib, NULL when it has none.  A function address as
 * a void *: POSIX guarantees the round trip, and Windows' FARPROC is copied
 * bytewise (ISO C has no cast between the two). */
void *ckc_library_symbol(void *lib, const char *symbol);

/* A library already loaded into the process whose file name contains `part`
 * (torch's OpenMP runtime: "libgomp"), opened again without loading anything,
 * or NULL where none is loaded or this OS's implementation cannot find it
 * (Linux finds it; the others return NULL). */
void *ckc_library_loaded(const char *part);

#endif /* CKC_PLATFORM_LIBRARY_H */
