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
/* The CUDA version of the nvcc that compiled them (1000 * major + 10 * minor), and
 * the architectures they hold as SASS ("7.5 8.0 ... 12.0"; PTX of the last). */
extern const int ckc_kernels_cuda_version;
extern const char ckc_kernels_archs[];

#endif /* CKC_GPU_FATBINS_H */
