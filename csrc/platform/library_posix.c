/* SPDX-License-Identifier: Apache-2.0 */
/* Shared libraries on POSIX (see library.h). */
#include <dlfcn.h>
#include <stdio.h>

#include "library.h"

void *
ckc_library_open(const char *name, char *why, size_t cap)
{
    /* RTLD_LOCAL: our names never leak into other libraries' lookups. */
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL && cap > 0) {
        const char *reason = dlerror();
        snprintf(why, cap, "%s", reason != NULL ? reason : "not found");
    }
    return lib;
}

void *
ckc_library_symbol(void *lib, const char *symbol)
{
    return dlsym(lib, symbol);
}
