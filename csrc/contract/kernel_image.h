/* SPDX-License-Identifier: Apache-2.0 */
/* One image of the GPU kernels' fatbins, as the GPU layer reads it
 * (gpu/fatbin_info.c) and the module shows it (kernel_images(), doctor): what
 * it holds and the oldest CUDA driver that reads it. */
#ifndef CKC_CONTRACT_KERNEL_IMAGE_H
#define CKC_CONTRACT_KERNEL_IMAGE_H

typedef struct {
    const char *module;               /* the fatbin: "int8" */
    int sass;                         /* 1: SASS, 0: PTX */
    int arch;                         /* 10 * major + minor: 90 */
    int version_major, version_minor; /* PTX ISA; SASS: 1.<ELF ABI> */
    int zstd;                         /* zstd-compressed (CUDA 12.4 drivers on) */
    int driver;                       /* the oldest CUDA driver that reads it: 12000 for 12.0 */
} ckc_kernel_image;

#endif /* CKC_CONTRACT_KERNEL_IMAGE_H */
