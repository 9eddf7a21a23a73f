/* SPDX-License-Identifier: Apache-2.0 */
/* Shared libraries on POSIX (see library.h). */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* dl_iterate_phdr and RTLD_NOLOAD: Linux's loader interface */
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#if defined(__linux__)
#include <link.h>
#endif

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

#if defined(__linux__)
typedef struct {
    const char *part;
    void *lib;
} loaded_search;

static int
match_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
    loaded_search *search = (loaded_search *)arg;
    const char *name = info->dlpi_name;
    const char *base;
    (void)size;
    if (name == NULL || name[0] == '\0') {
        return 0;
    }
    base = strrchr(name, '/');
    base = base != NULL ? base + 1 : name;
    if (strstr(base, search->part) == NULL) {
        return 0;
    }
    /* RTLD_NOLOAD: a handle to the copy already mapped, never a second one */
    search->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    return search->lib != NULL;
}

void *
ckc_library_loaded(const char *part)
{
    loaded_search search;
    search.part = part;
    search.lib = NULL;
    dl_iterate_phdr(match_loaded, &search);
    return search.lib;
}
#else
void *
ckc_library_loaded(const char *part)
{
    (void)part;
    return NULL;
}
#endif
