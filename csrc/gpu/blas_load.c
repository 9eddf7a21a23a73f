/* SPDX-License-Identifier: Apache-2.0 */
/* Finding cuBLASLt at run time (see blas_load.h). */
#if defined(CKC_WITH_CUDA)

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)
#include <windows.h>
#else
#include <dlfcn.h>
#endif

#include "blas_load.h"
#include "platform/settings.h"


#if defined(_WIN32)
#define LT_PATH_SEP ';'
#define LT_DIR_SEP "\\"
/* CUDA_HOME's folders of DLLs: CUDA 13 puts them in bin\x64, CUDA 12 in bin. */
static const char *const lt_cuda_home_dirs[] = {"\\bin\\x64", "\\bin"};
#define LT_SYSTEM_DIR ""
static const char *const lt_names[] = {"cublasLt64_13.dll", "cublasLt64_12.dll"};
static void *
lt_already_loaded(const char *name)
{
    return (void *)GetModuleHandleA(name);
}
/* The folders os.add_dll_directory added (LOAD_LIBRARY_SEARCH_USER_DIRS, as Python 3.8+ loads
 * extensions), the application's and System32, and a full path's own folder for its
 * dependencies; then the classic search (PATH), where a caller relies on it. */
static void *
lt_open(const char *path)
{
    HMODULE m = LoadLibraryExA(path, NULL, LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR);
    if (m == NULL && GetLastError() == ERROR_INVALID_PARAMETER) { /* DLL_LOAD_DIR takes full paths only */
        m = LoadLibraryExA(path, NULL, LOAD_LIBRARY_SEARCH_DEFAULT_DIRS);
    }
    return (void *)(m != NULL ? m : LoadLibraryExA(path, NULL, 0));
}
#else
#define LT_PATH_SEP ':'
#define LT_DIR_SEP "/"
static const char *const lt_cuda_home_dirs[] = {"/lib64"};
#define LT_SYSTEM_DIR "/usr/local/cuda/lib64"
static const char *const lt_names[] = {"libcublasLt.so.13", "libcublasLt.so.12"};
static void *
lt_already_loaded(const char *name)
{
    return dlopen(name, RTLD_NOW | RTLD_NOLOAD);
}
static void *
lt_open(const char *path)
{
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}
#endif

#define LT_NAME_COUNT ((int)(sizeof lt_names / sizeof lt_names[0]))

/* Appends text to the NUL-terminated buf of cap bytes, cut short where it does not fit. */
static void
append(char *buf, size_t cap, const char *text)
{
    const size_t used = strlen(buf);
    size_t n = strlen(text);
    if (used + 1 >= cap) {
        return;
    }
    n = n < cap - used - 1 ? n : cap - used - 1;
    memcpy(buf + used, text, n);
    buf[used + n] = '\0';
}

/* Tries every file name in one directory ("" for the loader's own search). */
static void *
lt_open_in(const char *dir, size_t dir_len, char *searched, size_t cap)
{
    for (int i = 0; i < LT_NAME_COUNT; i++) {
        char path[1200];
        void *lib;
        if (dir_len + 64 > sizeof path) {
            continue; /* no library lives in a directory with so long a name */
        }
        if (dir_len > 0) {
            snprintf(path, sizeof path, "%.*s" LT_DIR_SEP "%s", (int)dir_len, dir, lt_names[i]);
        } else {
            snprintf(path, sizeof path, "%s", lt_names[i]);
        }
        lib = lt_open(path);
        if (lib != NULL) {
            return lib;
        }
        append(searched, cap, searched[0] != '\0' ? ", " : "");
        append(searched, cap, path);
    }
    return NULL;
}

void *
ckc_blas_find_library(const char *search_dirs, char *searched, size_t cap)
{
    ckc_settings settings;
    const char *cuda_home;
    const char *chosen;
    char dirs[4096 + 512];
    void *lib = NULL;
    ckc_settings_read(&settings);
    cuda_home = settings.cuda_home[0] != '\0' ? settings.cuda_home : NULL;
    chosen = settings.cublaslt;
    if (chosen[0] != '\0') { /* the setting's file, and no other */
        lib = lt_open(chosen);
        if (lib == NULL) {
            append(searched, cap, chosen);
            append(searched, cap, " (COMFY_KITCHEN_C_CUBLASLT)");
        }
        return lib;
    }
    for (int i = 0; i < LT_NAME_COUNT && lib == NULL; i++) {
        lib = lt_already_loaded(lt_names[i]);
    }
    if (lib == NULL) {
        lib = lt_open_in("", 0, searched, cap);
    }
    /* The caller's directories, then CUDA_HOME's and the system's CUDA libraries. */
    snprintf(dirs, sizeof dirs, "%s", search_dirs != NULL ? search_dirs : "");
    for (size_t i = 0; cuda_home != NULL && i < sizeof lt_cuda_home_dirs / sizeof lt_cuda_home_dirs[0]; i++) {
        const size_t used = strlen(dirs);
        snprintf(dirs + used, sizeof dirs - used, "%c%s%s", LT_PATH_SEP, cuda_home, lt_cuda_home_dirs[i]);
    }
    {
        const size_t used = strlen(dirs);
        snprintf(dirs + used, sizeof dirs - used, "%c%s", LT_PATH_SEP, LT_SYSTEM_DIR);
    }
    for (const char *d = dirs; lib == NULL && *d != '\0';) {
        const char *end = strchr(d, LT_PATH_SEP);
        const size_t len = end != NULL ? (size_t)(end - d) : strlen(d);
        if (len > 1) {
            lib = lt_open_in(d, len, searched, cap);
        }
        d += len + (end != NULL ? 1 : 0);
    }
    return lib;
}

#endif /* CKC_WITH_CUDA */
