/* SPDX-License-Identifier: Apache-2.0 */
/* Finding cuBLASLt at run time (blas_load.c), apart from its use (blas_cublaslt.c)
 * so that the search runs alone where the GEMMs cannot (tools/windows: under Wine). */
#ifndef CKC_GPU_BLAS_LOAD_H
#define CKC_GPU_BLAS_LOAD_H

#include <stddef.h>

/* cuBLASLt (CUDA 13, else 12), opened: COMFY_KITCHEN_C_CUBLASLT's file alone when set;
 * else one the process already loaded (torch usually has), the loader's own search,
 * the folders of search_dirs (os.pathsep-separated: torch's nvidia packages), CUDA_HOME's
 * (lib64; on Windows bin\x64, where CUDA 13 puts its DLLs, and bin) and the system's
 * CUDA.  NULL when none is found, with every place tried listed in searched[cap]. */
void *ckc_blas_find_library(const char *search_dirs, char *searched, size_t cap);

#endif /* CKC_GPU_BLAS_LOAD_H */
