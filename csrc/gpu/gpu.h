/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU device as the op layer sees it (csrc/ops): one entry per op with GPU
 * kernels, taking the op's parameter block and the execution context, the
 * device's start and its libraries, and, in the emulated-device build, the
 * emulator's fault controls.  Built only with CKC_WITH_GPU (CUDA, or the
 * emulated device); the diagnostics use the runtime seam (gpu/runtime.h). */
#ifndef CKC_GPU_GPU_H
#define CKC_GPU_GPU_H

#include "contract/blas_report.h"
#include "contract/exec.h"
#include "contract/kernel_image.h"
#include "contract/params.h"
#include "contract/status.h"

/* ---- the GEMM seam's counters (gpu/blas_plan.c, in every build) ---- */

void ckc_blas_get_stats(ckc_blas_stats *s);

/* Frees every cached plan not busy and zeroes the counters; capacity 1 .. CKC_BLAS_CACHE_MAX slots from now on
 * (0: keep).  Workspaces stay. */
void ckc_blas_reset(int capacity);

/* The int8 GEMM's algorithm choices per shape class (gpu/blas_tune.c, in
 * every build): at most cap into out, returns how many there are; and the
 * settings' override (tuning 1/0, -1 the settings'; cache_path NULL the
 * settings', "" none), which forgets every choice. */
int ckc_blas_choices(ckc_blas_choice *out, int cap);
void ckc_blas_tune_configure(int tuning, const char *cache_path);
/* Its counters (ckc_blas_stats' timed, tunings, from_file), and their reset with the choices. */
void ckc_blas_tune_counters(long *timed, long *tunings, long *from_file);
void ckc_blas_tune_reset(void);

#if defined(CKC_WITH_GPU)

/* ---- entries (gpu/entries.c): the launchers of kernels/<family>.cu, and the BLAS seam ---- */
ckc_status ckc_gpu_entry_quantize_int8_rowwise(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_quantize_int8_tensorwise(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_rotate_int8_convrot_weight(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_dequantize_int8_convrot_weight_dtype(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_quantize_nvfp4(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_dequantize_nvfp4(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_int8_linear(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_scaled_mm_nvfp4(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_apply_rope1(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_quantize_per_tensor_fp8(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_dequantize_per_tensor_fp8(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_stochastic_rounding_fp8(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_rms_rope1(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_rms_gated_residual(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_quantize_mxfp8(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_dequantize_mxfp8(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_scaled_mm_mxfp8(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_quantize_convrot_w4a4_weight(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_dequantize_convrot_w4a4_weight(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_prepare_int4_weight_for_int8_linear(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_convrot_w4a4_linear(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_dequantize_w4a8_int8_weight(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_quantize_w4a8_int8_weight(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
ckc_status ckc_gpu_entry_gemv_awq_w4a16(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);
/* One one-thread kernel carrying the op's completion mark, nothing else: the
 * least an op can launch (the checks' own cost, benchmarks/bench_faults.py). */
ckc_status ckc_gpu_entry_mark_kernel(const ckc_op_params *p, ckc_exec *exec, ckc_error *err);

/* ---- the device ---- */

/* Once, at module import (gpu/blas_*.c: cuBLASLt itself is loaded at first use). */
void ckc_blas_init(void);

/* Directories to search for cuBLASLt after the plain sonames ("dir1;dir2" on
 * Windows, "dir1:dir2" elsewhere), set by the Python layer before the first use.
 * No effect on the emulated device. */
void ckc_blas_set_search_dirs(const char *dirs);

/* Versions as CUDA encodes them (1000*major + 10*minor): the installed driver's
 * (0 when no driver is installed) and the runtime this module was built with;
 * both 0 on the emulated device.  Needs no GPU: `doctor` reports them
 * (gpu/runtime_*.c). */
ckc_status ckc_gpu_versions(int *driver, int *runtime, ckc_error *err);

#if !defined(CKC_EMULATED)
/* 0 when the CUDA driver is usable, else 1 with why it is not in why[cap]
 * (gpu/cuda_driver.c: opened on the first call). */
int ckc_gpu_driver_problem(char *why, size_t cap);

/* The kernels' images (fatbin_info.c reads the embedded fatbins' headers): one
 * per (fatbin, entry), at most cap filled, how many returned; the oldest CUDA
 * driver under which every fatbin loads on a GPU of compute capability cc
 * (10 * major + minor; 0: none can), and on any GPU; a fatbin's bytes. */
int ckc_gpu_kernel_images(ckc_kernel_image *out, int cap);
int ckc_kernels_driver_for(int cc);
int ckc_kernels_driver_min(void);
const unsigned char *ckc_gpu_kernel_image(const char *module, size_t *bytes);

/* Whether the driver in use is the test suite's stand-in (tests/cuda_standin),
 * which alone may be handed host memory as device memory. */
int ckc_gpu_driver_is_standin(void);
#endif

#if defined(CKC_EMULATED)
#include "emu/emu_api.h" /* fault injection: ckc_emu_inject, ckc_emu_refuse_host_mapping, ckc_emu_reset */

/* The emulated device's heuristic answer (at most CKC_BLAS_EMU_CANDIDATES),
 * and whether its streams pretend to be captured (gpu/blas_emu.c). */
void ckc_blas_emu_set_heuristic(const ckc_blas_candidate *c, int count);
void ckc_blas_emu_set_capturing(int capturing);
/* The emulated time of each candidate when timed, in us (a negative one fails
 * to run; beyond count: 1 us), gpu/blas_emu.c. */
void ckc_blas_emu_set_timings(const float *us, int count);
/* A bug planted in the emulated int8 GEMM (CKC_BLAS_EMU_BUG_*, contract/blas_report.h). */
void ckc_blas_emu_plant(int bug);
#endif

#endif /* CKC_WITH_GPU */

/* The GPU entry `f` of an op spec, NULL in a build without GPU kernels. */
#if defined(CKC_WITH_GPU)
#define CKC_GPU_ENTRY(f) f
#else
#define CKC_GPU_ENTRY(f) NULL
#endif

#endif /* CKC_GPU_GPU_H */
