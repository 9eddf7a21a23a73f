/* SPDX-License-Identifier: Apache-2.0 */
/* The launchers' side of gpu/kernel_list.h: tables of ckc_kernel descriptors
 * (gpu/runtime.h) built from a family's list, the search by template arguments,
 * and the launch configuration.  Host C only. */
#ifndef CKC_GPU_KERNEL_H
#define CKC_GPU_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "contract/status.h"
#include "kernel_args.h"
#include "kernel_list.h"
#include "runtime.h"

/* The emulated device's runner of a kernel (CKC_KERNEL_INSTANCE defines it in
 * the kernel's source); none in GPU builds, where the driver finds the symbol. */
#if defined(CKC_EMULATED)
#define CKC_EMU_THUNK(sym) CKC_KPASTE(ckc_emu_thunk_, sym)
#define CKC_EMU_THUNK_DECL(sym)                                                                                  \
    int CKC_EMU_THUNK(sym)(const char *log, const unsigned *grid, const unsigned *block, size_t smem,              \
                           uintptr_t stream, void **args);
#else
#define CKC_EMU_THUNK(sym) NULL
#define CKC_EMU_THUNK_DECL(sym)
#endif

/* One descriptor of a table: symbol sym of the fatbin `module`, template `family`. */
#define CKC_KERNEL_ENTRY(family, log, module, sym, a0, a1, a2, a3)                                              \
    {CKC_KSTR(sym), #family, log, module, {a0, a1, a2, a3}, CKC_EMU_THUNK(sym), {NULL}},

/* The instance of table[0 .. n) with template arguments a0 .. a3 (unused ones
 * 0), or NULL with err naming the family and the arguments: a combination the
 * list (and so the fatbin) lacks, which the launchers never ask for. */
ckc_kernel *ckc_kernel_find(ckc_kernel *table, size_t n, int a0, int a1, int a2, int a3, ckc_error *err);

#define CKC_KERNEL_COUNT(table) (sizeof(table) / sizeof((table)[0]))

/* Launches the instance of table[0 .. n) with template arguments a0 .. a3
 * (ckc_kernel_find, then ckc_gpu_launch); CKC_LAUNCH_INSTANCE counts the table
 * and the arguments (an array of CKC_KARG). */
ckc_status ckc_kernel_launch(ckc_kernel *table, size_t n, int a0, int a1, int a2, int a3, const ckc_launch_cfg *cfg,
                             const ckc_karg *args, size_t nargs, ckc_error *err);
#define CKC_LAUNCH_INSTANCE(table, a0, a1, a2, a3, cfg, args, err)                                               \
    ckc_kernel_launch(table, CKC_KERNEL_COUNT(table), (int)(a0), (int)(a1), (int)(a2), (int)(a3), cfg, args,      \
                      CKC_KARG_COUNT(args), err)

/* A launch configuration: a grid of gx blocks (1-D) or gx x gy, blocks of bx x by. */
static inline ckc_launch_cfg
ckc_launch_2d(int64_t gx, int64_t bx, int64_t by, size_t smem, uintptr_t stream)
{
    ckc_launch_cfg c;
    c.grid[0] = (unsigned)gx;
    c.grid[1] = 1;
    c.grid[2] = 1;
    c.block[0] = (unsigned)bx;
    c.block[1] = (unsigned)by;
    c.block[2] = 1;
    c.smem = smem;
    c.stream = stream;
    return c;
}

static inline ckc_launch_cfg
ckc_launch_1d(int64_t blocks, int64_t threads, size_t smem, uintptr_t stream)
{
    return ckc_launch_2d(blocks, threads, 1, smem, stream);
}

/* Runs the device guard around a launcher's body (the tensors' device current). */
#define CKC_ON_DEVICE(exec, err, call)                                                                           \
    do {                                                                                                         \
        ckc_gpu_device_guard ckc_guard_;                                                                         \
        ckc_status ckc_on_device_status_;                                                                        \
        CKC_TRY(ckc_gpu_device_enter((exec)->device_index, &ckc_guard_, (err)));                                 \
        ckc_on_device_status_ = (call);                                                                          \
        ckc_gpu_device_leave(&ckc_guard_);                                                                       \
        return ckc_on_device_status_;                                                                            \
    } while (0)

#endif /* CKC_GPU_KERNEL_H */
