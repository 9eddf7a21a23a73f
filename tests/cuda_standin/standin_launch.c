/* SPDX-License-Identifier: Apache-2.0 */
/* The stand-in driver's modules, functions and launches.  A module is the
 * real fatbin `_C` embeds: standin_image.c picks the image the driver would
 * (SASS for the device's architecture, else PTX it can JIT, under this
 * driver's version) and reads its functions' records.  A launch is checked as
 * a GPU checks it (the function's context current, its stream on that
 * device, grid, block, launch bounds, registers, shared memory, the parameter
 * buffer against the cubin's parameter records), then runs on the emulated
 * device: the kernel's runner in the library of emulated kernels
 * (ckc_emu_thunk_<name>), fed the parameters at the offsets the cubin gives,
 * as a GPU reads them from its parameter bank. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin_image.h"
#include "standin_state.h"

#define SI_PARAM_BYTES 4096 /* CUDA's limit on a kernel's parameters before 12.1's 32 KB */
#define SI_MAX_PARAMS 64

typedef struct CUmod_st {
    int device;
    ckcsi_module image; /* the entry the driver chose, its kernels read */
} si_module;

typedef struct CUfunc_st {
    si_module *module;
    const ckcsi_function *info;
    int (*thunk)(const char *log, const unsigned *grid, const unsigned *block, size_t smem, uintptr_t stream,
                 void **args);
    struct CUfunc_st *next;
} si_function;

static si_function *functions; /* every one handed out, kept for the process */

int ckcsi_smem_optin(int device);
int ckcsi_device_cc(int device);

CKCSI_EXPORT int
cuModuleLoadData(si_module **module, const void *image)
{
    int code = si_need_context("cuModuleLoadData");
    const int device = si_current() != NULL ? si_current()->device : 0;
    const int cc = ckcsi_device_cc(device);
    ckcsi_fatbin fb;
    si_module *m;
    int index = -1;
    if (code != 0) {
        return code;
    }
    m = (si_module *)calloc(1, sizeof *m);
    m->device = device;
    code = ckcsi_fatbin_parse(&fb, image, 0);
    if (code == 0) {
        code = ckcsi_fatbin_choose(&fb, cc / 10, cc % 10, si_driver_version, &index);
    }
    if (code == 0) {
        code = ckcsi_fatbin_load(&fb, index, &m->image);
        if (code != 0) {
            snprintf(fb.why, sizeof fb.why, "%s", m->image.why);
        }
    }
    if (code != 0) {
        code = ckcsi_refuse(code, "cuModuleLoadData", "device %d (compute capability %d.%d, driver %d.%d): %s",
                            device, cc / 10, cc % 10, si_driver_version / 1000, si_driver_version % 1000 / 10,
                            fb.why);
        ckcsi_module_free(&m->image);
        free(m);
    } else {
        *module = m;
    }
    ckcsi_fatbin_free(&fb);
    return code;
}

CKCSI_EXPORT int
cuModuleGetFunction(si_function **f, si_module *module, const char *name)
{
    int code = si_need_context("cuModuleGetFunction");
    const ckcsi_function *info;
    if (code != 0) {
        return code;
    }
    if (module == NULL || module->device != si_current()->device) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_HANDLE, "cuModuleGetFunction",
                            module == NULL ? "no module" : "a module of another device's context");
    }
    info = ckcsi_module_function(&module->image, name);
    if (info == NULL) {
        return ckcsi_refuse(CKCSI_ERROR_NOT_FOUND, "cuModuleGetFunction", "no function '%s' in the module's image",
                            name);
    }
    pthread_mutex_lock(&si_lock);
    *f = (si_function *)calloc(1, sizeof **f);
    (*f)->module = module;
    (*f)->info = info;
    (*f)->next = functions;
    functions = *f;
    pthread_mutex_unlock(&si_lock);
    return CKCSI_SUCCESS;
}

/* ---- the launch's checks ---- */

static int
check_geometry(const si_function *f, const unsigned g[3], const unsigned b[3], unsigned smem)
{
    const unsigned long long threads = (unsigned long long)b[0] * b[1] * b[2];
    const char *name = f->info->name;
    const int device = f->module->device;
    if (g[0] < 1 || g[1] < 1 || g[2] < 1 || g[0] > 0x7fffffffu || g[1] > 65535 || g[2] > 65535) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuLaunchKernel", "%s: grid (%u,%u,%u) beyond the limits", name,
                            g[0], g[1], g[2]);
    }
    if (threads < 1 || threads > 1024 || b[0] > 1024 || b[1] > 1024 || b[2] > 64) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuLaunchKernel", "%s: block (%u,%u,%u) beyond the limits",
                            name, b[0], b[1], b[2]);
    }
    if (f->info->max_threads > 0 && threads > (unsigned long long)f->info->max_threads) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuLaunchKernel",
                            "%s: %llu threads per block, its launch bounds allow %d", name, threads,
                            f->info->max_threads);
    }
    if (f->info->registers > 0) {
        const unsigned long long per_warp = ((unsigned long long)f->info->registers * 32 + 255) / 256 * 256;
        if ((threads + 31) / 32 * per_warp > 65536) {
            return ckcsi_refuse(CKCSI_ERROR_LAUNCH_OUT_OF_RESOURCES, "cuLaunchKernel",
                                "%s: %llu threads of %d registers exceed a block's 65536", name, threads,
                                f->info->registers);
        }
    }
    if ((unsigned long long)smem + (unsigned long long)f->info->static_shared > 48 * 1024) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuLaunchKernel",
                            "%s: %u bytes of dynamic and %d of static shared memory exceed 48 KB without "
                            "cuFuncSetAttribute (the device allows %d with it)", name, smem, f->info->static_shared,
                            ckcsi_smem_optin(device));
    }
    return 0;
}

/* The kernel's parameter bank, as the GPU sees it, from kernelParams or extra. */
static int
parameters(const si_function *f, void **params, void **extra, unsigned char *bank)
{
    const ckcsi_function *k = f->info;
    if (params != NULL && extra != NULL) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuLaunchKernel", "%s: both kernelParams and extra", k->name);
    }
    if (k->param_bytes > SI_PARAM_BYTES) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuLaunchKernel", "%s: %d bytes of parameters", k->name,
                            k->param_bytes);
    }
    if (extra != NULL) {
        const void *buffer = NULL;
        size_t size = (size_t)-1;
        for (int i = 0; extra[i] != NULL; i += 2) { /* CU_LAUNCH_PARAM_END is NULL */
            if (extra[i] == (void *)1) {
                buffer = extra[i + 1];
            } else if (extra[i] == (void *)2) {
                size = *(const size_t *)extra[i + 1];
            } else {
                return ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuLaunchKernel", "%s: unknown extra key %p",
                                    k->name, extra[i]);
            }
        }
        if (buffer == NULL || size != (size_t)k->param_bytes) {
            return ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuLaunchKernel",
                                "%s: a parameter buffer of %zu bytes; the kernel's parameters take %d (%d of them)",
                                k->name, size == (size_t)-1 ? (size_t)0 : size, k->param_bytes, k->param_count);
        }
        memcpy(bank, buffer, size);
        return 0;
    }
    if (k->param_count > 0 && params == NULL) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuLaunchKernel", "%s: no parameters for its %d", k->name,
                            k->param_count);
    }
    for (int i = 0; i < k->param_count; i++) {
        memcpy(bank + k->params[i].offset, params[i], (size_t)k->params[i].size);
    }
    return 0;
}

/* ---- running it on the emulated device ---- */

typedef struct {
    si_function *f;
    unsigned grid[3], block[3];
    size_t smem;
    unsigned char bank[SI_PARAM_BYTES];
} si_launch;


static void
run_launch(const void *ctx)
{
    const si_launch *l = (const si_launch *)ctx;
    const ckcsi_function *k = l->f->info;
    int (*last_error)(char *, size_t) = (int (*)(char *, size_t))dlsym(si_kernels_library(), "ckc_emu_last_error");
    void *args[SI_MAX_PARAMS];
    char message[512] = "";
    int code;
    for (int i = 0; i < k->param_count && i < SI_MAX_PARAMS; i++) {
        args[i] = (void *)(l->bank + k->params[i].offset);
    }
    code = l->f->thunk(k->name, l->grid, l->block, l->smem, 0, args);
    if (last_error != NULL) {
        const int recorded = last_error(message, sizeof message);
        code = code != 0 ? code : recorded;
    }
    if (code != 0) {
        char why[700];
        snprintf(why, sizeof why, "%s faulted on the emulated device: %s", k->name, message);
        ckcsi_set_sticky(l->f->module->device, strstr(message, "misaligned") != NULL ? CKCSI_ERROR_MISALIGNED_ADDRESS
                                                                                    : CKCSI_ERROR_LAUNCH_FAILED, why);
    }
}

static int
find_thunk(si_function *f)
{
    char symbol[300];
    if (f->thunk != NULL) {
        return 0;
    }
    snprintf(symbol, sizeof symbol, "ckc_emu_thunk_%s", f->info->name);
    if (si_kernels_library() != NULL) {
        *(void **)&f->thunk = dlsym(si_kernels_library(), symbol);
    }
    return f->thunk != NULL ? 0
                            : ckcsi_refuse(CKCSI_ERROR_INVALID_VALUE, "cuLaunchKernel",
                                           "the stand-in has no emulated runner %s (CKC_STANDIN_KERNELS names the "
                                           "library of emulated kernels)", symbol);
}

CKCSI_EXPORT int
cuLaunchKernel(si_function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
               unsigned smem, void *stream, void **params, void **extra)
{
    si_launch *l;
    si_stream *s;
    int code = si_need_context("cuLaunchKernel");
    if (code != 0) {
        return code;
    }
    if (f == NULL || f->module->device != si_current()->device) {
        return ckcsi_refuse(CKCSI_ERROR_INVALID_CONTEXT, "cuLaunchKernel",
                            f == NULL ? "no function" : "a function of another device's context");
    }
    l = (si_launch *)calloc(1, sizeof *l);
    l->f = f;
    l->grid[0] = gx, l->grid[1] = gy, l->grid[2] = gz;
    l->block[0] = bx, l->block[1] = by, l->block[2] = bz;
    l->smem = smem;
    code = check_geometry(f, l->grid, l->block, smem);
    if (code == 0) {
        code = parameters(f, params, extra, l->bank);
    }
    pthread_mutex_lock(&si_lock);
    s = code == 0 ? si_stream_of(stream, "cuLaunchKernel", &code) : NULL;
    if (s != NULL && s->device != si_current()->device) {
        code = ckcsi_refuse(CKCSI_ERROR_INVALID_HANDLE, "cuLaunchKernel", "%s: a stream of device %d used while device "
                            "%d's context is current", f->info->name, s->device, si_current()->device);
    }
    if (s != NULL && code == 0) {
        code = si_legacy_use(s, "cuLaunchKernel");
    }
    if (s != NULL && code == 0) {
        code = find_thunk(f); /* the stand-in's own need, after every check a driver makes */
    }
    if (s != NULL && code == 0) {
        if (ckcsi_inject_fires(CKCSI_INJECT_ILLEGAL_ADDRESS)) {
            char why[300];
            snprintf(why, sizeof why, "injected: %s hit an illegal address", f->info->name);
            ckcsi_set_sticky(s->device, CKCSI_ERROR_ILLEGAL_ADDRESS, why); /* surfaces at a later call */
        } else {
            const int hang = ckcsi_inject_fires(CKCSI_INJECT_HANG);
            code = si_issue(s, f->info->name, run_launch, l, sizeof *l, hang);
            if (ckcsi_inject_fires(CKCSI_INJECT_DESTROY_STREAM) && !s->legacy) {
                s->destroyed = 1;
            }
        }
    }
    pthread_mutex_unlock(&si_lock);
    free(l);
    return code;
}

void
si_launch_reset(void)
{
}

/* What cuModuleLoadData would answer for image (size bytes) on a GPU of compute capability
 * (major, minor) under a driver of version `driver`, without a context: 0 when an image
 * loads, else its CUresult (tests compare it with the build's own prediction). */
CKCSI_EXPORT int
ckcsi_image_verdict(const void *image, size_t size, int major, int minor, int driver)
{
    ckcsi_fatbin fb;
    ckcsi_module m;
    int index = -1;
    int code = ckcsi_fatbin_parse(&fb, image, size);
    memset(&m, 0, sizeof m);
    if (code == 0) {
        code = ckcsi_fatbin_choose(&fb, major, minor, driver, &index);
    }
    if (code == 0) {
        code = ckcsi_fatbin_load(&fb, index, &m);
    }
    ckcsi_module_free(&m);
    ckcsi_fatbin_free(&fb);
    return code;
}
