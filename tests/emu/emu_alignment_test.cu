// SPDX-License-Identifier: Apache-2.0
// A 16-byte vector load from an address 8 bytes off its alignment: a GPU faults on it
// (CUDA_ERROR_MISALIGNED_ADDRESS), a CPU reads it.  With the kernels compiled for the
// alignment check (-fsanitize=alignment, CKC_EMU_ALIGNMENT_CHECK: what setup.py does for
// _C_emu), the emulated device faults as a GPU does; without it, the bug passes
// (tests/test_emulator.py runs both).  Usage: emu_alignment_test aligned|misaligned;
// prints "RESULT <case> ok|fault: <message>".
#include <cstdio>
#include <cstring>

#include "cuda_dialect.h"

struct __align__(16) bytes16 {
    unsigned w[4];
};

__global__ void copy16_kernel(const unsigned char *src, bytes16 *dst) {
    dst[threadIdx.x] = *(const bytes16 *)(src + 16 * threadIdx.x);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: emu_alignment_test aligned|misaligned\n");
        return 2;
    }
    alignas(16) unsigned char src[8 + 16 * 32] = {0};
    bytes16 dst[32];
    const size_t offset = strcmp(argv[1], "misaligned") == 0 ? 8 : 0;
    CKC_LAUNCH(copy16_kernel, 1, 32, 0, 0, (const unsigned char *)src + offset, dst);
    char message[512];
    const int code = ckc_emu_last_error(message, sizeof message);
    printf("RESULT %s %s%s%s\n", argv[1], code ? "fault" : "ok", code ? ": " : "", code ? message : "");
    return 0;
}
