/* SPDX-License-Identifier: Apache-2.0 */
/* The emulated device's shared-memory race detector (see emu_internal.h for how
 * it sees the kernels' accesses).
 *
 * Model: the block's barrier epochs.  Every __syncthreads() that the whole block
 * passes starts a new epoch; within one, a thread may read a shared byte only if
 * it wrote it itself, or it was written in an earlier epoch of this block, or
 * writer and reader are lanes of one warp that both passed a __syncwarp() since
 * the write (warp shuffles and votes exchange registers, not memory: they order
 * nothing here, as on GPUs with independent thread scheduling).  Per shared byte
 * the shadow keeps the last writer, its epoch and the writer's __syncwarp count
 * at the time; per thread, the count of each lane of its warp at their last
 * __syncwarp together.  Reported as kernel faults (the launch fails):
 *   - a read of a byte another thread wrote in the same epoch (a missing barrier);
 *   - a read of a byte no thread of this block has written (uninitialized shared
 *     memory: on a GPU it holds whatever the previous block left).
 * Writes are not checked against reads (a write after another thread's read in
 * one epoch is also a race; not detected).  Atomics are not tracked. */
#include "emu.h"
#include "emu_internal.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace ckc_emu {

#if defined(CKC_EMU_RACE_DETECT)

namespace {

struct Cell {
    uint32_t epoch;  /* 0: never written in this launch */
    uint32_t wseq;   /* the writer's __syncwarp count at the write */
    int32_t writer;  /* linear thread index in its block */
};

struct Detector {
    SharedRanges ranges{};
    std::vector<Cell> static_cells, dynamic_cells;
    std::vector<uint32_t> seq;     /* per thread: __syncwarp()s passed */
    std::vector<uint32_t> synced;  /* per thread and lane of its warp: that lane's seq at their last __syncwarp */
    uint32_t epoch = 0;            /* the current barrier epoch (global: blocks only increase it) */
    uint32_t block_first = 0;      /* the first epoch of the running block */
};

/* One launch at a time runs in the process (emu_runtime.cpp), so one detector. */
Detector g;

Cell *cell_of(const void *p) {
    const unsigned char *b = (const unsigned char *)p;
    if (b >= g.ranges.static_begin && b < g.ranges.static_end)
        return &g.static_cells[(size_t)(b - g.ranges.static_begin)];
    if (g.ranges.dynamic_begin && b >= g.ranges.dynamic_begin && b < g.ranges.dynamic_begin + g.ranges.dynamic_size)
        return &g.dynamic_cells[(size_t)(b - g.ranges.dynamic_begin)];
    return nullptr;
}

struct ThreadName {
    char text[40];
};

ThreadName name_of(int t) {
    ThreadName n;
    const unsigned x = blockDim.x, xy = blockDim.x * blockDim.y;
    snprintf(n.text, sizeof n.text, "(%u,%u,%u)", (unsigned)t % x, (unsigned)t % xy / x, (unsigned)t / xy);
    return n;
}

size_t offset_of(const unsigned char *b) {
    return b >= g.ranges.static_begin && b < g.ranges.static_end ? (size_t)(b - g.ranges.static_begin)
                                                                 : (size_t)(b - g.ranges.dynamic_begin);
}

const char *where(const void *p) {
    const unsigned char *b = (const unsigned char *)p;
    return b >= g.ranges.static_begin && b < g.ranges.static_end ? "static" : "dynamic";
}

void on_access(const void *p, size_t size, bool write) {
    const int t = current_thread();
    if (t < 0)
        return;
    for (size_t i = 0; i < size; i++) {
        Cell *c = cell_of((const unsigned char *)p + i);
        if (!c)
            return; /* not shared memory (an access never straddles shared and other memory) */
        if (write) {
            c->epoch = g.epoch;
            c->writer = t;
            c->wseq = g.seq[(size_t)t];
            continue;
        }
        if (c->epoch < g.block_first)
            fail_current("reads %s shared memory (byte %zu) that no thread of this block has written "
                         "(uninitialized: on a GPU it holds what an earlier block left)",
                         where(p), offset_of((const unsigned char *)p + i));
        if (c->epoch == g.epoch && c->writer != t) {
            const bool same_warp = c->writer / 32 == t / 32;
            if (same_warp && g.synced[(size_t)t * 32 + (size_t)(c->writer % 32)] > c->wseq)
                continue;
            fail_current("reads %s shared memory that thread %s wrote since the last __syncthreads()%s: a missing "
                         "barrier (read-after-write race)",
                         where(p), name_of(c->writer).text, same_warp ? " and __syncwarp()" : "");
        }
    }
}

} // namespace

void races_launch(const SharedRanges &ranges, unsigned threads) {
    g.ranges = ranges;
    g.static_cells.assign((size_t)(ranges.static_end - ranges.static_begin), Cell{0, 0, -1});
    g.dynamic_cells.assign(ranges.dynamic_size, Cell{0, 0, -1});
    g.seq.assign(threads, 0);
    g.synced.assign((size_t)threads * 32, 0);
    g.epoch = 0;
}

void races_block_start() {
    g.block_first = ++g.epoch;
    std::fill(g.seq.begin(), g.seq.end(), 0u);
    std::fill(g.synced.begin(), g.synced.end(), 0u);
}

void races_barrier() { ++g.epoch; }

void races_syncwarp(unsigned first, unsigned mask) {
    for (unsigned j = 0; j < 32; j++)
        if (mask >> j & 1)
            g.seq[first + j]++;
    for (unsigned i = 0; i < 32; i++) {
        if (!(mask >> i & 1))
            continue;
        for (unsigned j = 0; j < 32; j++)
            if (mask >> j & 1)
                g.synced[(size_t)(first + i) * 32 + j] = g.seq[first + j];
    }
}

bool races_enabled() { return true; }

#else

void races_launch(const SharedRanges &, unsigned) {}
void races_block_start() {}
void races_barrier() {}
void races_syncwarp(unsigned, unsigned) {}
bool races_enabled() { return false; }

#endif

} // namespace ckc_emu

#if defined(CKC_EMU_RACE_DETECT)
/* ---- The instrumentation's entry points (GCC -fsanitize=thread, no TSan runtime) ---- */
extern "C" {
#define CKC_ACCESS(n)                                                                     \
    void __tsan_read##n(void *p) { ckc_emu::on_access(p, n, false); }                    \
    void __tsan_write##n(void *p) { ckc_emu::on_access(p, n, true); }                    \
    void __tsan_unaligned_read##n(void *p) { ckc_emu::on_access(p, n, false); }          \
    void __tsan_unaligned_write##n(void *p) { ckc_emu::on_access(p, n, true); }
CKC_ACCESS(1)
CKC_ACCESS(2)
CKC_ACCESS(4)
CKC_ACCESS(8)
CKC_ACCESS(16)
#undef CKC_ACCESS
void __tsan_read_range(void *p, unsigned long n) { ckc_emu::on_access(p, n, false); }
void __tsan_write_range(void *p, unsigned long n) { ckc_emu::on_access(p, n, true); }
void __tsan_init(void) {}
void __tsan_func_entry(void *) {}
void __tsan_func_exit(void) {}
void __tsan_vptr_update(void **, void *) {}
void __tsan_vptr_read(void **) {}

/* Atomics: performed, not tracked (sequentially consistent whatever was asked). */
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
#define CKC_ATOMICS(bits, T)                                                                                  \
    T __tsan_atomic##bits##_load(const volatile T *a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); }  \
    void __tsan_atomic##bits##_store(volatile T *a, T v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); }   \
    T __tsan_atomic##bits##_exchange(volatile T *a, T v, int) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); } \
    T __tsan_atomic##bits##_fetch_add(volatile T *a, T v, int) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); } \
    T __tsan_atomic##bits##_fetch_sub(volatile T *a, T v, int) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); } \
    T __tsan_atomic##bits##_fetch_and(volatile T *a, T v, int) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); } \
    T __tsan_atomic##bits##_fetch_or(volatile T *a, T v, int) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }   \
    T __tsan_atomic##bits##_fetch_xor(volatile T *a, T v, int) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); } \
    int __tsan_atomic##bits##_compare_exchange_strong(volatile T *a, T *c, T v, int, int) {                   \
        return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);               \
    }                                                                                                         \
    int __tsan_atomic##bits##_compare_exchange_weak(volatile T *a, T *c, T v, int, int) {                     \
        return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                \
    }                                                                                                         \
    T __tsan_atomic##bits##_compare_exchange_val(volatile T *a, T c, T v, int, int) {                         \
        __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                     \
        return c;                                                                                             \
    }
CKC_ATOMICS(8, char)
CKC_ATOMICS(16, short)
CKC_ATOMICS(32, int)
CKC_ATOMICS(64, long)
#undef CKC_ATOMICS
}
#endif
