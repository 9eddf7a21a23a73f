/* SPDX-License-Identifier: Apache-2.0 */
/* Kernels with memory errors the emulated device must make loud: run with the
 * name of one case, the program is expected to die (AddressSanitizer's report,
 * or SIGSEGV on a stack's guard page) before it prints "survived".
 * tests/test_emulator.py builds and runs it. */
#include "cuda_dialect.h"

/* The last thread writes one element past the dynamic shared memory. */
__global__ void smem_overrun_kernel(int *out) {
    CKC_DYNAMIC_SHARED(int, s);
    s[threadIdx.x + 1] = 1;
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x];
}

/* Reads past a local array, on a stack that was switched out and back in at
 * the __syncthreads. */
__global__ void stack_overrun_kernel(int *out, int index) {
    int local[8];
    for (int i = 0; i < 8; i++)
        local[i] = (int)threadIdx.x + i;
    __syncthreads();
    out[threadIdx.x] = local[index];
}

/* Recurses far past the 64 KiB stack of an emulated thread. */
__device__ int deep(int depth) {
    volatile char frame[1024];
    frame[0] = (char)depth;
    return depth > 0 ? deep(depth - 1) + frame[0] : 0;
}
__global__ void stack_overflow_kernel(int *out) { out[threadIdx.x] = deep(1000); }

#if defined(CKC_EMULATED)

#include <cstdio>
#include <cstring>

int main(int argc, char **argv) {
    static int out[64];
    int *d_out = out;
    const char *which = argc > 1 ? argv[1] : "";
    if (strcmp(which, "smem_overrun") == 0)
        CKC_LAUNCH(smem_overrun_kernel, 1, 64, 64 * sizeof(int), 0, d_out);
    else if (strcmp(which, "stack_overrun") == 0)
        CKC_LAUNCH(stack_overrun_kernel, 1, 64, 0, 0, d_out, 8);
    else if (strcmp(which, "stack_overflow") == 0)
        CKC_LAUNCH(stack_overflow_kernel, 1, 4, 0, 0, d_out);
    else {
        fprintf(stderr, "usage: %s smem_overrun|stack_overrun|stack_overflow\n", argv[0]);
        return 2;
    }
    printf("survived %s (%d)\n", which, out[0]);
    return 0;
}

#endif /* CKC_EMULATED */
