/* SPDX-License-Identifier: Apache-2.0 */
/* Between the emulated device's scheduler (emu_runtime.cpp) and its shared-memory
 * race detector (emu_races.cpp); nothing else includes this.
 *
 * The detector (built in when CKC_EMU_RACE_DETECT is defined, as the extension
 * is with COMFY_KITCHEN_C_EMU_RACES=1) sees every load and store the kernel
 * sources make: they are compiled with GCC's ThreadSanitizer instrumentation,
 * whose __tsan_read / __tsan_write calls emu_races.cpp implements itself (no
 * TSan runtime is linked).  Accesses outside shared memory return at once. */
#ifndef CKC_EMU_INTERNAL_H
#define CKC_EMU_INTERNAL_H

#include <cstddef>
#include <cstdint>

namespace ckc_emu {

/* Static __shared__ arrays of every kernel live in this section (emu.h), so a
 * block start can poison them all with one memset; empty (both NULL) when no
 * kernel of the module declares one. */
struct SharedRanges {
    unsigned char *static_begin;
    unsigned char *static_end;
    unsigned char *dynamic_begin;
    size_t dynamic_size;
};

/* ---- Provided by the scheduler (emu_runtime.cpp) ---- */

/* Linear index of the emulated thread running now in its block; -1 outside a kernel. */
int current_thread();

/* Records a kernel fault for the running emulated thread ("thread (x,y,z) ...")
 * and abandons it: the launch ends with CKC_EMU_KERNEL_FAULT.  Never returns. */
[[noreturn]] __attribute__((format(printf, 1, 2))) void fail_current(const char *format, ...);

/* ---- Provided by the detector (emu_races.cpp); no-ops without CKC_EMU_RACE_DETECT ---- */

/* A launch's shared memory and block size, before its first block. */
void races_launch(const SharedRanges &ranges, unsigned threads);

/* A new block starts: nothing of its shared memory has been written yet. */
void races_block_start();

/* Every thread of the block passed __syncthreads(): a new barrier epoch. */
void races_barrier();

/* The lanes of mask in the warp whose first thread is `first` completed a
 * __syncwarp(mask): writes before it, by any of them, are visible after it to all. */
void races_syncwarp(unsigned first, unsigned mask);

/* Whether the detector is built in. */
bool races_enabled();

} // namespace ckc_emu

#endif /* CKC_EMU_INTERNAL_H */
