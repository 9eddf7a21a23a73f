/* SPDX-License-Identifier: Apache-2.0 */
/* cuBLASLt's search (csrc/gpu/blas_load.c) as _C.pyd has it, run under Wine
 * (tools/windows/blas_load_test.py) against a stand-in cublasLt64_13.dll put where
 * users' CUDA puts it:
 *   blas_load_test added DIR     DIR added with AddDllDirectory (os.add_dll_directory)
 *   blas_load_test cuda_home     CUDA_HOME set, the DLL in CUDA_HOME\bin\x64 (CUDA 13)
 * CUDA_HOME reaches the search as _C.configure hands it over: in the settings.
 * Prints "found <file>" (exit 0) or "missing: <searched>" (exit 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include "gpu/blas_load.h"
#include "platform/settings.h"

int
main(int argc, char **argv)
{
    char searched[2048] = "";
    char file[MAX_PATH] = "";
    ckc_settings settings;
    const char *cuda_home = getenv("CUDA_HOME");
    void *lib;
    ckc_settings_default(&settings);
    snprintf(settings.cuda_home, sizeof settings.cuda_home, "%s", cuda_home != NULL ? cuda_home : "");
    ckc_settings_set(&settings);
    if (argc == 3 && strcmp(argv[1], "added") == 0) {
        wchar_t dir[MAX_PATH];
        if (MultiByteToWideChar(CP_UTF8, 0, argv[2], -1, dir, MAX_PATH) == 0 || AddDllDirectory(dir) == NULL) {
            printf("AddDllDirectory(%s) failed\n", argv[2]);
            return 2;
        }
    } else if (argc != 2 || strcmp(argv[1], "cuda_home") != 0) {
        printf("usage: blas_load_test added DIR | cuda_home\n");
        return 2;
    }
    lib = ckc_blas_find_library("", searched, sizeof searched);
    if (lib == NULL) {
        printf("missing: %s\n", searched);
        return 1;
    }
    GetModuleFileNameA((HMODULE)lib, file, sizeof file);
    printf("found %s\n", file);
    return 0;
}
