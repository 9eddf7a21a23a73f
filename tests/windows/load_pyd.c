/* SPDX-License-Identifier: Apache-2.0 */
/* Loads a Python extension module the way CPython >= 3.8 does on Windows and looks
 * up its init function, without calling it (tools/windows/load_test.py runs it under
 * Wine, next to a stub python3.dll).
 *
 *   load_pyd PATH\TO\_C.pyd [PyInit__C]
 *
 * LoadLibraryExW with LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR,
 * CPython's flags (Python/dynload_win.c): the module's own folder and the system's,
 * not PATH.  Loading maps every DLL of the import table and runs the module's C
 * runtime start-up, so success means nothing beyond those DLLs is needed.
 * Exit 0: loaded and the symbol found; 1: either failed (the Windows error printed);
 * 2: usage. */
#include <stdint.h>
#include <stdio.h>
#include <windows.h>

int
main(int argc, char **argv)
{
    wchar_t arg[MAX_PATH];
    wchar_t path[MAX_PATH];
    const char *symbol = argc > 2 ? argv[2] : "PyInit__C";
    HMODULE module;
    FARPROC init;
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: load_pyd PATH [SYMBOL]\n");
        return 2;
    }
    /* The search flags need an absolute path. */
    if (MultiByteToWideChar(CP_UTF8, 0, argv[1], -1, arg, MAX_PATH) == 0 ||
        GetFullPathNameW(arg, MAX_PATH, path, NULL) == 0) {
        printf("load_pyd: bad path %s (error %lu)\n", argv[1], (unsigned long)GetLastError());
        return 1;
    }
    module = LoadLibraryExW(path, NULL, LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR);
    if (module == NULL) {
        printf("load_pyd: LoadLibraryExW(%s) failed: error %lu\n", argv[1], (unsigned long)GetLastError());
        return 1;
    }
    init = GetProcAddress(module, symbol);
    if (init == NULL) {
        printf("load_pyd: %s loaded, but GetProcAddress(%s) failed: error %lu\n", argv[1], symbol,
               (unsigned long)GetLastError());
        return 1;
    }
    printf("load_pyd: %s loaded; %s at module base + 0x%llx\n", argv[1], symbol,
           (unsigned long long)((uintptr_t)init - (uintptr_t)module));
    FreeLibrary(module);
    return 0;
}
