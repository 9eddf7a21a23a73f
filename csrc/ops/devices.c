/* SPDX-License-Identifier: Apache-2.0 */
/* The module's facade to the devices (ops/devices.h). */
#include <stdio.h>

#include "cpu/cpu.h"
#include "devices.h"
#include "gpu/gpu.h"

void
ckc_devices_init(void)
{
    static int started; /* under the GIL: module execs are serialized */
    if (started) {
        return;
    }
    started = 1;
    ckc_cpu_init();
#if defined(CKC_WITH_GPU)
    ckc_blas_init();
#endif
}

int
ckc_devices_have_cuda(void)
{
#if defined(CKC_WITH_GPU) && !defined(CKC_EMULATED)
    return 1;
#else
    return 0;
#endif
}

int
ckc_devices_have_gpu_runtime(void)
{
#if defined(CKC_WITH_GPU)
    return 1;
#else
    return 0;
#endif
}

const char *
ckc_devices_cpu_isa(void)
{
    return ckc_cpu_isa();
}

const char *const *
ckc_devices_cpu_isas(void)
{
    return ckc_cpu_available();
}

const char *
ckc_devices_cpu_threads(void)
{
    return ckc_cpu_threads();
}

int
ckc_devices_select_cpu_isa(const char *isa)
{
    return ckc_cpu_select(isa);
}

void
ckc_devices_set_blas_search_dirs(const char *dirs)
{
#if defined(CKC_WITH_GPU)
    ckc_blas_set_search_dirs(dirs);
#else
    (void)dirs;
#endif
}

ckc_status
ckc_devices_cuda_versions(int *driver, int *runtime, ckc_error *err)
{
#if defined(CKC_WITH_GPU)
    return ckc_gpu_versions(driver, runtime, err);
#else
    (void)err;
    *driver = *runtime = 0;
    return CKC_OK;
#endif
}

int
ckc_devices_cuda_driver_problem(char *why, size_t cap)
{
#if defined(CKC_WITH_GPU) && !defined(CKC_EMULATED)
    return ckc_gpu_driver_problem(why, cap);
#else
    snprintf(why, cap, "%s", "this build has no CUDA kernels");
    return 0;
#endif
}

void
ckc_devices_emulated_inject(int kind, const char *op, int nth)
{
#if defined(CKC_EMULATED)
    ckc_emu_inject(kind, op, nth);
#else
    (void)kind;
    (void)op;
    (void)nth;
#endif
}

void
ckc_devices_emulated_refuse_host_mapping(int refuse)
{
#if defined(CKC_EMULATED)
    ckc_emu_refuse_host_mapping(refuse);
#else
    (void)refuse;
#endif
}

void
ckc_devices_emulated_schedule(int shuffle, uint64_t seed)
{
#if defined(CKC_EMULATED)
    ckc_emu_set_schedule(shuffle, seed);
#else
    (void)shuffle;
    (void)seed;
#endif
}

void
ckc_devices_emulated_skip_kernels(int skip)
{
#if defined(CKC_EMULATED)
    ckc_emu_skip_kernels(skip);
#else
    (void)skip;
#endif
}

void
ckc_devices_emulated_reset(void)
{
#if defined(CKC_EMULATED)
    ckc_emu_reset();
#endif
}

int
ckc_devices_kernel_images(ckc_kernel_image *out, int cap)
{
#if defined(CKC_WITH_GPU) && !defined(CKC_EMULATED)
    return ckc_gpu_kernel_images(out, cap);
#else
    (void)out;
    (void)cap;
    return 0;
#endif
}

int
ckc_devices_kernels_driver_for(int cc)
{
#if defined(CKC_WITH_GPU) && !defined(CKC_EMULATED)
    return ckc_kernels_driver_for(cc);
#else
    (void)cc;
    return 0;
#endif
}

int
ckc_devices_kernels_driver_min(void)
{
#if defined(CKC_WITH_GPU) && !defined(CKC_EMULATED)
    return ckc_kernels_driver_min();
#else
    return 0;
#endif
}

const unsigned char *
ckc_devices_kernel_image(const char *module, size_t *bytes)
{
#if defined(CKC_WITH_GPU) && !defined(CKC_EMULATED)
    return ckc_gpu_kernel_image(module, bytes);
#else
    (void)module;
    *bytes = 0;
    return NULL;
#endif
}

int
ckc_devices_host_as_device(void)
{
#if defined(CKC_EMULATED)
    return 1;
#elif defined(CKC_WITH_GPU)
    return ckc_gpu_driver_is_standin();
#else
    return 0;
#endif
}

void
ckc_devices_blas_stats(ckc_blas_stats *s)
{
    ckc_blas_get_stats(s);
    ckc_blas_tune_counters(&s->timed, &s->tunings, &s->from_file);
}

void
ckc_devices_blas_reset(int capacity)
{
    ckc_blas_reset(capacity);
    ckc_blas_tune_reset();
}

int
ckc_devices_blas_choices(ckc_blas_choice *out, int cap)
{
    return ckc_blas_choices(out, cap);
}

void
ckc_devices_blas_tune_configure(int tuning, const char *cache_path)
{
    ckc_blas_tune_configure(tuning, cache_path);
}

void
ckc_devices_emulated_timings(const float *us, int count)
{
#if defined(CKC_EMULATED)
    ckc_blas_emu_set_timings(us, count);
#else
    (void)us;
    (void)count;
#endif
}

void
ckc_devices_emulated_heuristic(const ckc_blas_candidate *c, int count)
{
#if defined(CKC_EMULATED)
    ckc_blas_emu_set_heuristic(c, count);
#else
    (void)c;
    (void)count;
#endif
}

void
ckc_devices_emulated_capturing(int capturing)
{
#if defined(CKC_EMULATED)
    ckc_blas_emu_set_capturing(capturing);
#else
    (void)capturing;
#endif
}

void
ckc_devices_emulated_blas_plant(int bug)
{
#if defined(CKC_EMULATED)
    ckc_blas_emu_plant(bug);
#else
    (void)bug;
#endif
}

#if defined(CKC_EMULATED)
/* The facade's code is the emulator's: checked where both are seen. */
typedef char ckc_capture_code_matches[CKC_DEVICES_CAPTURE_REFUSED == CKC_EMU_CAPTURE ? 1 : -1];

int
ckc_devices_emulated_capture_begin(uintptr_t stream, int mode, char *why, size_t cap)
{
    return ckc_emu_capture_begin(stream, mode, why, cap);
}

int
ckc_devices_emulated_capture_end(uintptr_t stream, uint64_t *graph, char *why, size_t cap)
{
    return ckc_emu_capture_end(stream, graph, why, cap);
}

int
ckc_devices_emulated_graph_launch(uint64_t graph, uintptr_t stream, char *why, size_t cap)
{
    return ckc_emu_graph_launch(graph, stream, why, cap);
}

void
ckc_devices_emulated_graph_destroy(uint64_t graph)
{
    ckc_emu_graph_destroy(graph);
}

int
ckc_devices_emulated_capturing_stream(uintptr_t stream)
{
    uint64_t id;
    return ckc_emu_capture_status(stream, &id);
}
#endif
