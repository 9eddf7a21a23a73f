/* SPDX-License-Identifier: Apache-2.0 */
/* The devices as the module sees them: the one facade through which csrc/module
 * reaches the CPU and GPU layers, for what is not an op (start, the CPU's
 * instruction set, where cuBLASLt is and its plan cache, CUDA versions, the
 * emulated device's fault controls).  Ops reach the devices through the router (op.h). */
#ifndef CKC_OPS_DEVICES_H
#define CKC_OPS_DEVICES_H

#include <stddef.h>
#include <stdint.h>

#include "contract/blas_report.h"
#include "contract/kernel_image.h"
#include "contract/status.h"

/* Once per process (later calls do nothing): the CPU's thread pool and
 * instruction set; the GPU's libraries are loaded at first use. */
void ckc_devices_init(void);

/* Whether this build has GPU kernels for CUDA tensors (not the emulated device's). */
int ckc_devices_have_cuda(void);

/* Whether this build has a GPU runtime (CUDA, or the emulated device). */
int ckc_devices_have_gpu_runtime(void);

/* The CPU kernels' instruction set: in use, available (best first,
 * NULL-terminated), and selection by name (0: not available here). */
const char *ckc_devices_cpu_isa(void);
const char *const *ckc_devices_cpu_isas(void);
int ckc_devices_select_cpu_isa(const char *isa);

/* Who runs the CPU kernels' parallel loops: "openmp" (torch's team) or "pool" (cpu/parallel.c). */
const char *ckc_devices_cpu_threads(void);

/* Where to look for cuBLASLt (os.pathsep-separated); no effect without a GPU build. */
void ckc_devices_set_blas_search_dirs(const char *dirs);

/* (driver, runtime) CUDA versions as 1000*major + 10*minor (driver 0: none
 * installed; both 0 on the emulated device and without a GPU runtime). */
ckc_status ckc_devices_cuda_versions(int *driver, int *runtime, ckc_error *err);

/* Why the GPU cannot be used: 0 when the CUDA driver is usable (or the build has
 * no CUDA kernels: why[] says which), else 1 with the reason (no driver library,
 * a driver too old for the kernels, cuInit failing) in why[cap]. */
int ckc_devices_cuda_driver_problem(char *why, size_t cap);

/* The GPU kernels' images (gpu/fatbin_info.h), one per (fatbin, entry): at most
 * cap filled, how many returned (0 in a build without CUDA kernels).  And the
 * oldest CUDA driver under which they all load on a GPU of compute capability
 * cc (10 * major + minor; 0: none can), and on any GPU. */
int ckc_devices_kernel_images(ckc_kernel_image *out, int cap);
int ckc_devices_kernels_driver_for(int cc);
int ckc_devices_kernels_driver_min(void);
/* fatbin `module`'s bytes (NULL, 0 when there is none) */
const unsigned char *ckc_devices_kernel_image(const char *module, size_t *bytes);

/* Whether a call may run host memory as device memory (contract/codes.h's
 * CKC_CALL_HOST_AS_DEVICE): only under the test suite's stand-in CUDA driver,
 * and on the emulated device (where every call does). */
int ckc_devices_host_as_device(void);

/* The GEMM seam's counters, and a reset of its plan cache (capacity 1 ..
 * CKC_BLAS_CACHE_MAX slots from now on; 0: keep). */
void ckc_devices_blas_stats(ckc_blas_stats *s);
void ckc_devices_blas_reset(int capacity);
int ckc_devices_blas_choices(ckc_blas_choice *out, int cap);
void ckc_devices_blas_tune_configure(int tuning, const char *cache_path);

/* The emulated device's fault controls and its GEMM heuristic's answer (no
 * effect in other builds). */
void ckc_devices_emulated_inject(int kind, const char *op, int nth);
void ckc_devices_emulated_refuse_host_mapping(int refuse);
void ckc_devices_emulated_schedule(int shuffle, uint64_t seed);
void ckc_devices_emulated_skip_kernels(int skip);
void ckc_devices_emulated_reset(void);
void ckc_devices_emulated_heuristic(const ckc_blas_candidate *c, int count);
void ckc_devices_emulated_capturing(int capturing);
void ckc_devices_emulated_blas_plant(int bug);
void ckc_devices_emulated_timings(const float *us, int count);

/* The emulated device's CUDA-graph capture and replay (csrc/emu/emu_api.h,
 * CUDA's rules): 0 when done, CKC_DEVICES_CAPTURE_REFUSED for what a capture
 * forbids (a CaptureError), another non-zero code otherwise; why says what.
 * Defined in the emulated-device build only (its module alone calls them). */
#define CKC_DEVICES_CAPTURE_REFUSED 4
int ckc_devices_emulated_capture_begin(uintptr_t stream, int mode, char *why, size_t cap);
int ckc_devices_emulated_capture_end(uintptr_t stream, uint64_t *graph, char *why, size_t cap);
int ckc_devices_emulated_graph_launch(uint64_t graph, uintptr_t stream, char *why, size_t cap);
void ckc_devices_emulated_graph_destroy(uint64_t graph);
int ckc_devices_emulated_capturing_stream(uintptr_t stream);

#endif /* CKC_OPS_DEVICES_H */
