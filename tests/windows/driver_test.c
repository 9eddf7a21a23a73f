/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA driver's loader (csrc/gpu/cuda_driver.c) as _C.pyd has it, run under Wine
 * where no NVIDIA driver is: it must look for nvcuda.dll, fail without crashing, and
 * say why, as every GPU op of "c" then does (tools/windows/driver_test.py).  Prints
 * "driver: unavailable: <why>" and exits 0 on that; exits 1 when the driver loads (no
 * GPU is here) or the reason is empty. */
#include <stdio.h>
#include <string.h>

#include "gpu/cuda_driver.h"

int
main(void)
{
    ckc_error err;
    const ckc_cuda_api *d;
    memset(&err, 0, sizeof err);
    d = ckc_cuda_driver(&err);
    if (d != NULL) {
        printf("driver: loaded, CUDA %d (unexpected: no GPU here)\n", d->version);
        return 1;
    }
    if (err.status == CKC_OK || err.message[0] == '\0') {
        printf("driver: unavailable, but no reason given\n");
        return 1;
    }
    /* The second call answers from the first (the loader tries once per process). */
    memset(&err, 0, sizeof err);
    if (ckc_cuda_driver(&err) != NULL || err.message[0] == '\0') {
        printf("driver: the second call disagrees with the first\n");
        return 1;
    }
    printf("driver: unavailable: %s\n", err.message);
    return 0;
}
