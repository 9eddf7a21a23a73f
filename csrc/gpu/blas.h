/* SPDX-License-Identifier: Apache-2.0 */
/* The GEMM seam under the GPU launchers: cuBLASLt on a real GPU
 * (blas_cublaslt.c, loaded lazily at first use), C references on the emulated
 * device (blas_emu.c).  Work is ordered on exec->stream; the caller holds the
 * device guard (ckc_gpu_device_enter) for exec->device_index. */
#ifndef CKC_GPU_BLAS_H
#define CKC_GPU_BLAS_H

#include "contract/exec.h"
#include "contract/params.h"
#include "contract/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* int8 x int8 -> int32, c[m, n] = a[m, :] . b[n, :].  cuBLASLt's IMMA needs k and
 * n multiples of 4, leading dimensions multiples of 4 and 4-byte aligned
 * pointers: the launcher pads (see contract/linear_plan.h). */
ckc_status ckc_blas_int8_gemm(const ckc_int8_gemm_params *p, const ckc_exec *exec, ckc_error *err);

/* Block-scaled NVFP4 GEMM (compute capability 10.0 and newer on a real GPU). */
ckc_status ckc_blas_nvfp4_gemm(const ckc_scaled_mm_nvfp4_params *p, const ckc_exec *exec, ckc_error *err);

/* Block-scaled MXFP8 GEMM (e4m3 with E8M0 scales per 32 values; compute capability
 * 10.0 and newer on a real GPU). */
ckc_status ckc_blas_mxfp8_gemm(const ckc_scaled_mm_mxfp8_params *p, const ckc_exec *exec, ckc_error *err);

#ifdef __cplusplus
}
#endif

#endif /* CKC_GPU_BLAS_H */
