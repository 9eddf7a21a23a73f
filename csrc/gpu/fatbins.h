/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU kernels as data: one fatbin per kernels/<family>.cu (SASS for every
 * architecture built, PTX of the newest), written into a C file by the build
 * (setup.py, build/generated/fatbins.c) and loaded into each device's context by
 * the driver at the first launch there (runtime_cuda.c). */
#ifndef CKC_GPU_FATBINS_H
#define CKC_GPU_FATBINS_H

#include <stddef.h>

#define CKC_FATBIN_MAX 16

typedef struct {
    const char *name;           /* the .cu file's stem: "int8" */
    const unsigned char *data;  /* 8-byte aligned, as cuModuleLoadData wants */
    size_t size;
} ckc_fatbin;

extern const ckc_fatbin ckc_fatbins[CKC_FATBIN_MAX];
extern const int ckc_fatbin_count;
/* The CUDA version of the nvcc that compiled them (1000 * major + 10 * minor), of
 * the CUDA 12 ptxas that assembled the SASS of the architectures it knows (0: none,
 * nvcc's own SASS throughout; setup.py's fatbin_commands), and the architectures they
 * hold as SASS ("7.5 8.0 ... 12.0"; PTX of the last).  Which driver each image needs
 * is read from the fatbins themselves (fatbin_info.h). */
extern const int ckc_kernels_cuda_version;
extern const int ckc_kernels_ptxas12_version;
extern const char ckc_kernels_archs[];

/* Per architecture built as SASS, the CUDA version of the toolchain that
 * assembled it: a driver of that major reads it (minor version compatibility). */
typedef struct {
    int arch;    /* 10 * major + minor */
    int cuda;    /* 12090: CUDA 12.9's ptxas */
} ckc_sass_toolchain;

extern const ckc_sass_toolchain ckc_kernels_sass[];
extern const int ckc_kernels_sass_count;

#endif /* CKC_GPU_FATBINS_H */
