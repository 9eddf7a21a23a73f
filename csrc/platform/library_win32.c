/* SPDX-License-Identifier: Apache-2.0 */
/* Shared libraries on Windows (see library.h). */
#include <stdio.h>
#include <string.h>

#include <windows.h>

#include "library.h"

void *
ckc_library_open(const char *name, char *why, size_t cap)
{
    /* System32 first for a bare name (nvcuda.dll is installed there by the driver),
     * never the current folder. */
    const DWORD flags = strchr(name, '\\') != NULL || strchr(name, '/') != NULL ? 0 : LOAD_LIBRARY_SEARCH_DEFAULT_DIRS;
    HMODULE lib = LoadLibraryExA(name, NULL, flags);
    if (lib == NULL && cap > 0) {
        snprintf(why, cap, "LoadLibraryExA failed with Windows error %lu", (unsigned long)GetLastError());
    }
    return (void *)lib;
}

void *
ckc_library_symbol(void *lib, const char *symbol)
{
    const FARPROC f = GetProcAddress((HMODULE)lib, symbol);
    void *p;
    _Static_assert(sizeof f == sizeof p, "a function pointer fits a void *");
    memcpy(&p, &f, sizeof p);
    return p;
}

void *
ckc_library_loaded(const char *part)
{
    /* torch's Windows builds link Intel's OpenMP runtime (libiomp5md.dll), which has no
     * GOMP_parallel: our own pool runs the CPU kernels' loops there (cpu/parallel.c). */
    (void)part;
    return NULL;
}
