/* SPDX-License-Identifier: Apache-2.0 */
/* Loads cuBLASLt the way csrc/gpu/blas_cublaslt.c does at first use (the files are
 * included, so their static loader is called directly) and prints what it found.
 * Needs no GPU: only the library.  Prints "searched: <list>" for a directory
 * without it, then "loaded <version>" or "FAIL <message>". */
#include "gpu/blas_load.c"
#include "gpu/blas_cublaslt.c"
#include "gpu/fatbins.h"

/* No kernels: the driver's loader (cuda_driver.c) reads what they need of a driver from these. */
const ckc_fatbin ckc_fatbins[CKC_FATBIN_MAX];
const int ckc_fatbin_count = 0;
const int ckc_kernels_cuda_version = 0;
const int ckc_kernels_ptxas12_version = 0;
const char ckc_kernels_archs[] = "";
const ckc_sass_toolchain ckc_kernels_sass[] = {{0, 0}};
const int ckc_kernels_sass_count = 0;

int
main(int argc, char **argv)
{
    char searched[512] = "";
    ckc_error err;
    ckc_blas_init();
    if (lt_open_in("/nonexistent", strlen("/nonexistent"), searched, sizeof searched) != NULL) {
        printf("FAIL a library was opened from /nonexistent\n");
        return 1;
    }
    printf("searched: %s\n", searched);
    ckc_blas_set_search_dirs(argc > 1 ? argv[1] : "");
    if (lt_load(&err) != CKC_OK) {
        printf("FAIL %s\n", err.message);
        return 1;
    }
    printf("loaded %zu\n", lt.cublasLtGetVersion());
    return 0;
}
