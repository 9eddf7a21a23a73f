/* SPDX-License-Identifier: Apache-2.0 */
/* The emulated device's runtime: launch validation, the per-block scheduler of
 * cooperative emulated threads (in order, or shuffled), __syncthreads, the warp
 * collectives, shared-memory poisoning and error reporting.  See emu.h for the
 * execution model.
 *
 * Scheduler state is per OS thread (thread_local: its own stacks and error
 * slot), but one launch runs at a time in the process (launch_lock): static
 * __shared__ memory is one section for all kernels (emu.h). */
#include "emu.h"
#include "emu_internal.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define CKC_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CKC_EMU_ASAN 1
#endif
#endif
#ifdef CKC_EMU_ASAN
#include <sanitizer/asan_interface.h>
#endif
#if defined(__SANITIZE_THREAD__)
#define CKC_EMU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CKC_EMU_TSAN 1
#endif
#endif
#ifdef CKC_EMU_TSAN
#include <sanitizer/tsan_interface.h>
#endif

/* The section of static __shared__ arrays (emu.h); weak: a module may have none. */
extern "C" unsigned char __start_ckc_emu_shared[] __attribute__((weak));
extern "C" unsigned char __stop_ckc_emu_shared[] __attribute__((weak));

thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

using ckc_emu::WarpOp;

namespace {

/* ---- Limits ------------------------------------------------------------------
 * CUDA's for compute capability 7.0 and later (227 KiB of dynamic shared memory
 * is the opt-in maximum of sm_80/sm_90). */
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockDimZ = 64;
constexpr unsigned kMaxGridDimX = 0x7fffffffu;
constexpr unsigned kMaxGridDimYZ = 65535;
constexpr size_t kMaxDynamicSmem = 227 * 1024;
constexpr size_t kStackSize = 64 * 1024; /* per emulated thread */
constexpr int kGarbageByte = 0xCD;       /* fills shared memory at every block start */

/* ---- Errors ------------------------------------------------------------------ */
struct Error {
    int code;
    char message[512];
};
thread_local Error t_error;

/* Records "kernel '<kernel>': <context>: <problem>" and returns code. */
__attribute__((format(printf, 4, 0))) int record_error(int code, const char *kernel, const char *context,
                                                       const char *format, va_list args) {
    if (t_error.code != CKC_EMU_OK) /* keep the first: later errors tend to be its consequences */
        return code;
    t_error.code = code;
    int n = snprintf(t_error.message, sizeof t_error.message, "kernel '%s': %s: ", kernel, context);
    if (n >= 0 && (size_t)n < sizeof t_error.message)
        vsnprintf(t_error.message + n, sizeof t_error.message - (size_t)n, format, args);
    return code;
}

/* Misuse that no kernel fault describes (an intrinsic called from host code, a
 * broken invariant): stop loudly. */
[[noreturn]] void fatal(const char *what) {
    fprintf(stderr, "ckc emulated device: %s\n", what);
    abort();
}

size_t page_size() {
    static const size_t size = (size_t)sysconf(_SC_PAGESIZE);
    return size;
}

/* ---- Stacks ------------------------------------------------------------------
 * One mapping per emulated thread, with a PROT_NONE guard page below the stack
 * so that an overflow faults at once instead of corrupting the next stack.
 * Mapped on first need and kept for the OS thread's lifetime: launches reuse them. */
struct Stack {
    void *base; /* lowest usable byte */
    size_t size;
};

class StackPool {
public:
    StackPool() = default;
    StackPool(const StackPool &) = delete;
    StackPool &operator=(const StackPool &) = delete;
    ~StackPool() {
        for (const Stack &s : stacks_)
            munmap((char *)s.base - page_size(), s.size + page_size());
    }

    bool reserve(size_t count) {
        while (stacks_.size() < count) {
            size_t guard = page_size();
            void *map = mmap(nullptr, guard + kStackSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (map == MAP_FAILED)
                return false;
            if (mprotect(map, guard, PROT_NONE) != 0) {
                munmap(map, guard + kStackSize);
                return false;
            }
            stacks_.push_back(Stack{(char *)map + guard, kStackSize});
        }
        return true;
    }

    const Stack &operator[](size_t i) const { return stacks_[i]; }

private:
    std::vector<Stack> stacks_;
};

/* ---- Context switching --------------------------------------------------------
 * The only code that knows how an emulated thread is suspended: POSIX ucontext.
 * A Windows port would implement these three functions with CreateFiber and
 * SwitchToFiber.
 *
 * Contexts switch in a star: the scheduler resumes an emulated thread, which
 * runs until it switches back.  So whoever resumes a context is the one it
 * switched to, which is how the ASan annotations learn the scheduler's stack
 * (the OS thread's own, which ASan knows and we do not). */
struct Context {
    ucontext_t uc{};
    const void *stack_bottom = nullptr; /* for ASan: the stack this context runs on */
    size_t stack_size = 0;
    void *fake_stack = nullptr; /* for ASan: its fake stack while suspended */
    void *tsan_fiber = nullptr; /* for TSan (the C core's thread tests): this context's fiber */
};

#ifdef CKC_EMU_TSAN
/* TSan follows the switches as fibers; switching synchronizes (the emulated
 * threads of a block share memory through the scheduler, like a GPU's). */
void *tsan_fiber_of(Context *c) {
    if (!c->tsan_fiber)
        c->tsan_fiber = c->stack_bottom ? __tsan_create_fiber(0) : __tsan_get_current_fiber();
    return c->tsan_fiber;
}
#endif

void context_start(Context *c, const Stack &stack, void (*entry)()) {
    if (getcontext(&c->uc) != 0)
        fatal("getcontext failed");
    c->uc.uc_stack.ss_sp = stack.base;
    c->uc.uc_stack.ss_size = stack.size;
    c->uc.uc_link = nullptr; /* entry never returns: it switches back itself */
    makecontext(&c->uc, entry, 0);
    c->stack_bottom = stack.base;
    c->stack_size = stack.size;
    c->fake_stack = nullptr;
#ifdef CKC_EMU_TSAN
    if (c->tsan_fiber)
        __tsan_destroy_fiber(c->tsan_fiber);
    c->tsan_fiber = nullptr;
#endif
#ifdef CKC_EMU_ASAN
    /* A thread abandoned by a kernel fault left its frames' redzones poisoned. */
    __asan_unpoison_memory_region(stack.base, stack.size);
#endif
}

/* Suspends from and resumes to.  finishing: from is never resumed again, so
 * ASan may release its fake stack. */
void context_switch(Context *from, Context *to, bool finishing) {
#ifdef CKC_EMU_ASAN
    __sanitizer_start_switch_fiber(finishing ? nullptr : &from->fake_stack, to->stack_bottom, to->stack_size);
#else
    (void)finishing;
#endif
#ifdef CKC_EMU_TSAN
    tsan_fiber_of(from);
    __tsan_switch_to_fiber(tsan_fiber_of(to), 0);
#endif
    swapcontext(&from->uc, &to->uc);
#ifdef CKC_EMU_ASAN
    __sanitizer_finish_switch_fiber(from->fake_stack, &to->stack_bottom, &to->stack_size);
#endif
}

/* The first thing a started context does: completes the switch from `from`. */
void context_entered(Context *from) {
#ifdef CKC_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &from->stack_bottom, &from->stack_size);
#else
    (void)from;
#endif
}

/* ---- Scheduler state ------------------------------------------------------------ */
enum class State : unsigned char { runnable, at_syncthreads, at_warp, exited };

struct EmuThread {
    Context context;
    uint3 index;
    State state;
    /* The warp collective it waits at (while at_warp), and its result. */
    WarpOp op;
    unsigned mask;
    uint64_t value;
    int arg;
    int width;
    uint64_t result;
};

struct Scheduler {
    Context context; /* the launching OS thread's own */
    StackPool stacks;
    std::vector<EmuThread> threads; /* of the running block, in linear thread order */
    /* Set while a launch runs on this OS thread. */
    const char *kernel = nullptr;
    const std::function<void()> *body = nullptr;
    unsigned char *dynamic_smem = nullptr;
    EmuThread *current = nullptr; /* the emulated thread running now */
    unsigned at_syncthreads = 0;  /* threads of the block waiting there */
    unsigned exited = 0;
    bool faulted = false;
    std::vector<unsigned> order;  /* the order of a pass over the block's threads */
    uint64_t rng = 0;             /* shuffled schedule: the block's generator state */
};
thread_local Scheduler t_sched;

/* ---- Schedule ------------------------------------------------------------------
 * COMFY_KITCHEN_C_EMU_SCHEDULE (ckc_emu_set_schedule): "order" (default) runs a
 * block's runnable threads in linear order, each until it blocks; "shuffle:SEED"
 * visits them in a new random order on every pass, from a generator seeded by
 * SEED, the launch's number in the process and the block's index, so a consumer
 * that a missing barrier lets run before its producer does so under some seeds. */
std::atomic<bool> schedule_shuffle{false};
std::atomic<uint64_t> schedule_seed{0};

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Fisher-Yates over s.order with the block's generator. */
void shuffle_order(Scheduler &s) {
    for (size_t i = s.order.size(); i > 1; i--) {
        s.rng = splitmix64(s.rng);
        std::swap(s.order[i - 1], s.order[(size_t)(s.rng % i)]);
    }
}

/* One launch at a time in the process (see the top of this file). */
std::mutex launch_lock;
uint64_t launches = 0; /* guarded by launch_lock */

const char *op_name(WarpOp op) {
    static const char *const names[] = {"__syncwarp",      "__shfl_sync",   "__shfl_up_sync", "__shfl_down_sync",
                                        "__shfl_xor_sync", "__ballot_sync", "__any_sync",     "__all_sync"};
    return names[(int)op]; /* in WarpOp's order */
}

struct Name {
    char text[40];
};
Name name_of(const EmuThread &t) {
    Name n;
    snprintf(n.text, sizeof n.text, "(%u,%u,%u)", t.index.x, t.index.y, t.index.z);
    return n;
}

Scheduler &running(const char *intrinsic) {
    if (!t_sched.current) {
        char what[96];
        snprintf(what, sizeof what, "%s called outside a kernel", intrinsic);
        fatal(what);
    }
    return t_sched;
}

__attribute__((format(printf, 2, 3))) void record_fault(Scheduler &s, const char *format, ...) {
    char block[48];
    snprintf(block, sizeof block, "block (%u,%u,%u)", blockIdx.x, blockIdx.y, blockIdx.z);
    va_list args;
    va_start(args, format);
    record_error(CKC_EMU_KERNEL_FAULT, s.kernel, block, format, args);
    va_end(args);
    s.faulted = true;
}

/* ---- Emulated threads ------------------------------------------------------------ */

/* Returns to the scheduler; comes back when the scheduler resumes this thread. */
void suspend(Scheduler &s) { context_switch(&s.current->context, &s.context, false); }

/* After record_fault from inside a kernel: gives up the calling thread; the
 * scheduler sees the fault and ends the launch. */
[[noreturn]] void abandon(Scheduler &s) {
    context_switch(&s.current->context, &s.context, true);
    fatal("an abandoned emulated thread was resumed");
}

void thread_entry() noexcept {
    Scheduler &s = t_sched;
    context_entered(&s.context);
    (*s.body)();
    s.current->state = State::exited;
    s.exited++;
    context_switch(&s.current->context, &s.context, true);
    fatal("an exited emulated thread was resumed");
}

/* ---- Warp collectives -------------------------------------------------------------
 * Each lane records what it brings; the last lane of the mask to arrive computes
 * every lane's result and releases them. */

/* The lane a shuffle reads, as PTX's shfl.sync defines it: the offset is taken
 * modulo 32, width splits the warp into segments, and a source before the
 * lane's segment (up) or after it (down, xor) gives the lane its own value. */
unsigned shuffle_source(WarpOp op, unsigned lane, int arg, int width) {
    int first = (int)lane & ~(width - 1);
    int last = first + width - 1;
    int offset = arg & 31;
    int source;
    switch (op) {
    case WarpOp::shfl: return (unsigned)(first | (offset & (width - 1)));
    case WarpOp::shfl_up: source = (int)lane - offset; return source >= first ? (unsigned)source : lane;
    case WarpOp::shfl_down: source = (int)lane + offset; return source <= last ? (unsigned)source : lane;
    default: source = (int)(lane ^ (unsigned)offset); return source <= last ? (unsigned)source : lane;
    }
}

void complete_collective(EmuThread *warp, unsigned mask) {
    if (warp[__builtin_ctz(mask)].op == WarpOp::sync) /* every lane of mask waits at the same op */
        ckc_emu::races_syncwarp((unsigned)(warp - t_sched.threads.data()), mask);
    unsigned ballot = 0;
    for (unsigned j = 0; j < 32; j++)
        if ((mask >> j & 1) && warp[j].value != 0)
            ballot |= 1u << j;
    for (unsigned j = 0; j < 32; j++) {
        if (!(mask >> j & 1))
            continue;
        EmuThread &t = warp[j];
        switch (t.op) {
        case WarpOp::sync: t.result = 0; break;
        case WarpOp::ballot: t.result = ballot; break;
        case WarpOp::any: t.result = ballot != 0; break;
        case WarpOp::all: t.result = ballot == mask; break;
        default: {
            /* CUDA leaves a read from a lane outside the mask undefined; we give the lane its own value. */
            unsigned source = shuffle_source(t.op, j, t.arg, t.width);
            t.result = (mask >> source & 1) ? warp[source].value : t.value;
        }
        }
        t.state = State::runnable;
    }
}

bool waits_at(const EmuThread &t, WarpOp op, unsigned mask) {
    return t.state == State::at_warp && t.op == op && t.mask == mask;
}

} // namespace

uint64_t ckc_emu::warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width) {
    Scheduler &s = running(op_name(op));
    EmuThread &self = *s.current;
    unsigned index = (unsigned)(&self - s.threads.data());
    unsigned lane = index % 32;
    size_t lanes = s.threads.size() - (index - lane); /* threads from this warp's first on: 32 or more in a full warp */
    if (!(mask >> lane & 1)) {
        record_fault(s, "thread %s (lane %u) calls %s with mask 0x%08x, which does not name it", name_of(self).text,
                     lane, op_name(op), mask);
        abandon(s);
    }
    if (lanes < 32 && (mask >> lanes) != 0) {
        record_fault(
            s,
            "thread %s calls %s with mask 0x%08x, which names lane %u: it does not exist (the block has %zu threads)",
            name_of(self).text, op_name(op), mask, (unsigned)lanes + (unsigned)__builtin_ctz(mask >> lanes),
            s.threads.size());
        abandon(s);
    }
    if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
        record_fault(s, "thread %s calls %s with width %d: not a power of 2 in [1, 32]", name_of(self).text,
                     op_name(op), width);
        abandon(s);
    }

    self.state = State::at_warp;
    self.op = op;
    self.mask = mask;
    self.value = value;
    self.arg = arg;
    self.width = width;
    EmuThread *warp = &self - lane;
    for (unsigned j = 0; j < 32; j++) {
        if ((mask >> j & 1) && !waits_at(warp[j], op, mask)) {
            suspend(s); /* a later lane completes the collective, or the scheduler reports a deadlock */
            return self.result;
        }
    }
    complete_collective(warp, mask);
    return self.result;
}

void ckc_emu::syncthreads() {
    Scheduler &s = running("__syncthreads()");
    if (s.at_syncthreads + 1 < s.threads.size()) {
        s.current->state = State::at_syncthreads;
        s.at_syncthreads++;
        suspend(s);
        return;
    }
    /* The last thread of the block to arrive releases the others. */
    for (EmuThread &t : s.threads)
        if (t.state == State::at_syncthreads)
            t.state = State::runnable;
    s.at_syncthreads = 0;
    ckc_emu::races_barrier();
}

namespace {

/* ---- Deadlock diagnosis ---------------------------------------------------------------
 * Called when no thread of the block can run and some have not exited: names
 * the first waiting thread and what keeps it waiting. */
void diagnose_deadlock(Scheduler &s) {
    const EmuThread *waiting = s.threads.data();
    while (waiting->state == State::exited)
        waiting++;
    const EmuThread &w = *waiting;

    if (w.state == State::at_syncthreads) {
        if (s.exited > 0) {
            record_fault(s,
                         "deadlock: thread %s waits at __syncthreads() but %u of the block's %zu threads have exited",
                         name_of(w).text, s.exited, s.threads.size());
            return;
        }
        /* All others wait too, and not all at __syncthreads (it would have released): one is in a warp collective. */
        for (const EmuThread &t : s.threads) {
            if (t.state == State::at_warp) {
                record_fault(s,
                             "deadlock: thread %s waits at __syncthreads() while thread %s waits at %s (mask 0x%08x)",
                             name_of(w).text, name_of(t).text, op_name(t.op), t.mask);
                return;
            }
        }
        fatal("a block deadlocked at __syncthreads() with every thread there");
    }

    /* w waits at a warp collective; some lane of its mask is not at the same one, or it would have completed. */
    const EmuThread *warp = &w - (&w - s.threads.data()) % 32;
    for (unsigned j = 0; j < 32; j++) {
        const EmuThread &t = warp[j];
        if (!(w.mask >> j & 1) || waits_at(t, w.op, w.mask))
            continue;
        char where[96];
        if (t.state == State::exited)
            snprintf(where, sizeof where, "has exited");
        else if (t.state == State::at_syncthreads)
            snprintf(where, sizeof where, "waits at __syncthreads()");
        else
            snprintf(where, sizeof where, "waits at %s with mask 0x%08x", op_name(t.op), t.mask);
        record_fault(s, "deadlock: thread %s waits at %s with mask 0x%08x, but lane %u (thread %s) %s", name_of(w).text,
                     op_name(w.op), w.mask, j, name_of(t).text, where);
        return;
    }
    fatal("a warp collective deadlocked with every lane of its mask there");
}

/* ---- Launch ------------------------------------------------------------------------------ */
__attribute__((format(printf, 2, 3))) int launch_error(const char *kernel, const char *format, ...) {
    va_list args;
    va_start(args, format);
    record_error(CKC_EMU_LAUNCH_ERROR, kernel, "invalid launch", format, args);
    va_end(args);
    return CKC_EMU_LAUNCH_ERROR;
}

/* An error the stream layer described (an injected launch failure, a sticky fault). */
__attribute__((format(printf, 3, 4))) int refused(int code, const char *kernel, const char *format, ...) {
    va_list args;
    va_start(args, format);
    record_error(code, kernel, "not launched", format, args);
    va_end(args);
    return code;
}

int check_configuration(const char *kernel, dim3 grid, dim3 block, size_t dynamic_smem) {
    uint64_t threads = (uint64_t)block.x * block.y * block.z;
    if (threads < 1 || threads > kMaxThreadsPerBlock)
        return launch_error(kernel, "block (%u,%u,%u) has %llu threads; CUDA allows 1 to %u", block.x, block.y, block.z,
                            (unsigned long long)threads, kMaxThreadsPerBlock);
    if (block.z > kMaxBlockDimZ)
        return launch_error(kernel, "block (%u,%u,%u): z is at most %u", block.x, block.y, block.z, kMaxBlockDimZ);
    if (grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.x > kMaxGridDimX || grid.y > kMaxGridDimYZ ||
        grid.z > kMaxGridDimYZ)
        return launch_error(kernel, "grid (%u,%u,%u): each dimension is at least 1, x at most %u, y and z at most %u",
                            grid.x, grid.y, grid.z, kMaxGridDimX, kMaxGridDimYZ);
    if (dynamic_smem > kMaxDynamicSmem)
        return launch_error(kernel, "%zu bytes of dynamic shared memory; at most %zu", dynamic_smem, kMaxDynamicSmem);
    return CKC_EMU_OK;
}

/* Shared memory as a block finds it: static __shared__ arrays (one section for
 * every kernel) and the launch's dynamic shared memory, all poisoned. */
ckc_emu::SharedRanges shared_ranges(const Scheduler &s, size_t dynamic_smem) {
    ckc_emu::SharedRanges r{};
    if (__start_ckc_emu_shared && __stop_ckc_emu_shared) {
        r.static_begin = __start_ckc_emu_shared;
        r.static_end = __stop_ckc_emu_shared;
    }
    r.dynamic_begin = s.dynamic_smem;
    r.dynamic_size = s.dynamic_smem ? dynamic_smem : 0;
    return r;
}

void start_block(Scheduler &s, const ckc_emu::SharedRanges &shared) {
    unsigned x = blockDim.x, xy = blockDim.x * blockDim.y;
    if (shared.static_begin)
        memset(shared.static_begin, kGarbageByte, (size_t)(shared.static_end - shared.static_begin));
    if (shared.dynamic_begin)
        memset(shared.dynamic_begin, kGarbageByte, shared.dynamic_size);
    ckc_emu::races_block_start();
    if (schedule_shuffle.load(std::memory_order_relaxed)) {
        const uint64_t block = ((uint64_t)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
        s.rng = splitmix64(schedule_seed.load(std::memory_order_relaxed) ^ splitmix64(launches ^ splitmix64(block)));
    }
    for (unsigned i = 0; i < s.threads.size(); i++) {
        EmuThread &t = s.threads[i];
        t.index = uint3{i % x, i % xy / x, i / xy};
        t.state = State::runnable;
        context_start(&t.context, s.stacks[i], thread_entry);
    }
    s.at_syncthreads = 0;
    s.exited = 0;
}

/* Runs one block in passes (each visiting every runnable thread once, in order or
 * shuffled) until every thread has exited or it faulted (s.faulted). */
void run_block(Scheduler &s) {
    s.order.resize(s.threads.size());
    for (unsigned i = 0; i < s.order.size(); i++)
        s.order[i] = i;
    for (;;) {
        bool progressed = false;
        if (schedule_shuffle.load(std::memory_order_relaxed))
            shuffle_order(s);
        for (unsigned i : s.order) {
            EmuThread &t = s.threads[i];
            if (t.state != State::runnable)
                continue;
            s.current = &t;
            threadIdx = t.index;
            context_switch(&s.context, &t.context, false);
            progressed = true;
            if (s.faulted)
                return;
        }
        if (s.exited == s.threads.size())
            return;
        if (!progressed) {
            diagnose_deadlock(s);
            return;
        }
    }
}

} // namespace

int ckc_emu_launch(const char *kernel_name, dim3 grid, dim3 block, size_t dynamic_smem, uintptr_t stream,
                   std::function<void()> body) noexcept {
    /* Launches run to completion in call order, which every stream order allows;
     * emu_streams.cpp only decides whether this one runs (hangs, injected faults). */
    Scheduler &s = t_sched;
    if (s.kernel)
        return launch_error(
            kernel_name, "launched from inside kernel '%s'; the emulated device has no dynamic parallelism", s.kernel);
    std::lock_guard<std::mutex> one_launch_at_a_time(launch_lock);
    launches++;
    ckc_emu_note_launch(kernel_name, grid.x, grid.y, grid.z, block.x, block.y, block.z);
    if (int error = check_configuration(kernel_name, grid, block, dynamic_smem))
        return error;
    if (ckc_emu::capture_kernel(kernel_name, grid, block, dynamic_smem, stream, body))
        return CKC_EMU_OK; /* recorded into the stream's capture; runs at each replay */
    return ckc_emu::run_kernel(kernel_name, grid, block, dynamic_smem, stream, body);
}

int ckc_emu::run_kernel(const char *kernel_name, dim3 grid, dim3 block, size_t dynamic_smem, uintptr_t stream,
                        const std::function<void()> &body) noexcept {
    Scheduler &s = t_sched;
    char why[400];
    const int admitted = ckc_emu_admit(kernel_name, stream, 0, why, sizeof why);
    if (admitted == CKC_EMU_SKIP)
        return CKC_EMU_OK;
    if (admitted != CKC_EMU_OK)
        return refused(admitted, kernel_name, "%s", why);
    if (ckc_emu_kernels_skipped())
        return CKC_EMU_OK;
    size_t threads = (size_t)block.x * block.y * block.z;
    if (!s.stacks.reserve(threads))
        return launch_error(kernel_name, "cannot map stacks for %zu emulated threads", threads);

    /* Exactly the requested size, so that ASan reports a kernel overrunning it. */
    const std::align_val_t align{16};
    s.dynamic_smem = dynamic_smem ? (unsigned char *)::operator new(dynamic_smem, align) : nullptr;
    s.kernel = kernel_name;
    s.body = &body;
    s.faulted = false;
    s.threads.resize(threads);
    gridDim = grid;
    blockDim = block;
    const ckc_emu::SharedRanges shared = shared_ranges(s, dynamic_smem);
    ckc_emu::races_launch(shared, (unsigned)threads);
    for (unsigned z = 0; z < grid.z && !s.faulted; z++) {
        for (unsigned y = 0; y < grid.y && !s.faulted; y++) {
            for (unsigned x = 0; x < grid.x && !s.faulted; x++) {
                blockIdx = uint3{x, y, z};
                start_block(s, shared);
                run_block(s);
            }
        }
    }
    if (s.dynamic_smem)
        ::operator delete(s.dynamic_smem, align);
    s.dynamic_smem = nullptr;
    s.kernel = nullptr;
    s.body = nullptr;
    s.current = nullptr;
    return s.faulted ? CKC_EMU_KERNEL_FAULT : CKC_EMU_OK;
}

extern "C" void *ckc_emu_dynamic_shared(void) { return t_sched.current ? t_sched.dynamic_smem : nullptr; }

int ckc_emu::current_thread() {
    return t_sched.current ? (int)(t_sched.current - t_sched.threads.data()) : -1;
}

void ckc_emu::fail_current(const char *format, ...) {
    Scheduler &s = running("a shared-memory check");
    char what[400];
    va_list args;
    va_start(args, format);
    vsnprintf(what, sizeof what, format, args);
    va_end(args);
    record_fault(s, "thread %s %s", name_of(*s.current).text, what);
    abandon(s);
}

#if defined(CKC_EMU_ALIGNMENT_CHECK)
/* The kernels are compiled with -fsanitize=alignment (setup.py, for _C_emu): every access
 * through a pointer is checked against its type's alignment, as a GPU checks it and faults
 * (CUDA_ERROR_MISALIGNED_ADDRESS) where a CPU would read.  UBSan's runtime is not linked:
 * these are the handlers the check calls (GCC's layout of the report). */
namespace {
struct UbsanLocation {
    const char *file;
    uint32_t line, column;
};
struct UbsanType {
    uint16_t kind, info;
    char name[1];
};
struct UbsanMismatch {
    UbsanLocation where;
    const UbsanType *type;
    unsigned char log_alignment, check_kind;
};

void misaligned(const UbsanMismatch *m, uintptr_t p) {
    const uintptr_t alignment = (uintptr_t)1 << m->log_alignment;
    if (p == 0 || (p & (alignment - 1)) == 0 || ckc_emu::current_thread() < 0)
        return; /* not an alignment report, or not in a kernel */
    ckc_emu::fail_current("misaligned address: a %u-byte aligned access of %s at %p (%s:%u)", (unsigned)alignment,
                          m->type->name, (void *)p, m->where.file, m->where.line);
}
} // namespace

extern "C" __attribute__((visibility("default"))) void __ubsan_handle_type_mismatch_v1(void *m, uintptr_t p) {
    misaligned((const UbsanMismatch *)m, p);
}
extern "C" __attribute__((visibility("default"))) void __ubsan_handle_type_mismatch_v1_abort(void *m, uintptr_t p) {
    misaligned((const UbsanMismatch *)m, p);
}
#endif

/* Exported, for the stand-in CUDA driver (tests/cuda_standin), which runs kernels through _C_emu's runners. */
extern "C" __attribute__((visibility("default"))) int ckc_emu_last_error(char *message, size_t cap) {
    int code = t_error.code;
    if (message && cap > 0)
        snprintf(message, cap, "%s", code != CKC_EMU_OK ? t_error.message : "");
    t_error.code = CKC_EMU_OK;
    t_error.message[0] = '\0';
    return code;
}

extern "C" void ckc_emu_set_schedule(int shuffle, uint64_t seed) {
    schedule_seed.store(seed, std::memory_order_relaxed);
    schedule_shuffle.store(shuffle != 0, std::memory_order_relaxed);
}
