/* SPDX-License-Identifier: Apache-2.0 */
/* What the embedded fatbins (fatbins.h) hold, read from their headers, and so
 * which driver a GPU needs to load them: the build's answer to "does this GPU,
 * under this driver, run the kernels", for the driver check (cuda_driver.c),
 * the message of a module that does not load (runtime_cuda.c) and doctor.
 *
 * A fatbin holds containers (u32 magic 0xBA55ED50, u16 version, u16 header
 * size, u64 bytes that follow) of entries (u16 kind: 1 PTX, 2 ELF; u32 header
 * size; u64 payload size; +24 u16 minor, +26 u16 major: the PTX ISA, or for
 * SASS 1.<ELF ABI>; +28 u32 architecture; +40 u64 flags: 0x2000 LZ4, 0x8000
 * zstd).  A driver loads, for a device of compute capability X.Y, the newest
 * SASS sm_XZ with Z <= Y it can read, else PTX compute_VW with VW <= XY it can
 * JIT.  It reads: SASS built by a CUDA 12 toolchain from CUDA 12.0 on (minor
 * version compatibility), by CUDA 13's from 13.0 (fatbins.h records which built
 * each architecture); PTX of ISA 8.N from the CUDA 12 release that introduced
 * it, 9.N from 13.N; zstd-compressed images from 12.4 (R550), LZ4 from 12.0. */
#ifndef CKC_GPU_FATBIN_INFO_H
#define CKC_GPU_FATBIN_INFO_H

#include <stddef.h>

enum { CKC_IMAGE_PTX = 1, CKC_IMAGE_SASS = 2 };

typedef struct {
    int kind;                         /* CKC_IMAGE_PTX, CKC_IMAGE_SASS */
    int arch;                         /* 10 * major + minor: 90 for sm_90 */
    int version_major, version_minor; /* PTX ISA; SASS: 1.<ELF ABI> */
    int zstd;                         /* compressed with zstd (1) or not (LZ4, none) */
    int driver;                       /* the CUDA version a driver needs to read it (12000: 12.0) */
} ckc_image_entry;

/* The entries of the fatbin at image (bytes long): how many (at most cap are
 * filled in), or -1 when it is no fatbin. */
int ckc_fatbin_entries(const unsigned char *image, size_t bytes, ckc_image_entry *out, int cap);

/* Whether entry e runs on a device of compute capability cc (10 * major + minor). */
int ckc_image_runs_on(const ckc_image_entry *e, int cc);

/* ckc_kernels_driver_for, ckc_kernels_driver_min, ckc_gpu_kernel_images and
 * ckc_gpu_kernel_image: gpu.h. */

/* The NVIDIA driver branch of a CUDA version, for messages: "R570" for 12080. */
const char *ckc_driver_branch(int cuda_version);

#endif /* CKC_GPU_FATBIN_INFO_H */
