/* SPDX-License-Identifier: Apache-2.0 */
/* The emulated device's streams: queue positions, events, stream-ordered copies
 * and value writes, the device's sticky error, fault injection (for the tests of
 * comfy_kitchen_c's checking modes and flight record).  See emu_api.h for the
 * model.
 *
 * Unlike the scheduler (emu_runtime.cpp), this state is the device's: shared by
 * every OS thread, behind one mutex. */
#include "emu_api.h"
#include "emu_graphs.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace {

struct Stream {
    uint64_t position = 0; /* of the last work issued */
    uint64_t hung_at = 0;  /* position of the work that never completes; 0: none */
};

struct Injection {
    int kind;
    char op[64];
    int nth;
    int seen;
};

struct Device {
    std::mutex lock;
    std::map<uintptr_t, Stream> streams;
    std::vector<Injection> injections;
    std::vector<std::pair<const char *, size_t>> host_allocations; /* ckc_emu_alloc_host's */
    std::vector<std::pair<const char *, size_t>> registered; /* ranges ckc_emu_map_host registered */
    std::vector<uint32_t> arrivals; /* ckc_emu_mark_arrivals' */
    bool faulted = false; /* the sticky error */
    char error_name[64] = "";
    char error_text[320] = "";
};

Device &device() {
    static Device d;
    return d;
}


const char *kind_name(int kind) {
    switch (kind) {
    case CKC_EMU_INJECT_LAUNCH: return "launch";
    case CKC_EMU_INJECT_KERNEL: return "kernel";
    case CKC_EMU_INJECT_COPY: return "copy";
    default: return "hang";
    }
}

/* The armed injection this work fires, or nullptr.  Caller holds the lock. */
Injection *fire(Device &d, bool copy) {
    for (Injection &j : d.injections) {
        const bool kind_matches = j.kind == CKC_EMU_INJECT_HANG || (copy == (j.kind == CKC_EMU_INJECT_COPY));
        if (j.seen >= j.nth || !kind_matches || (j.op[0] && strcmp(j.op, ckc_emu_current_op()) != 0))
            continue;
        if (++j.seen == j.nth)
            return &j;
    }
    return nullptr;
}

void set_sticky(Device &d, const char *name, const char *text) {
    if (d.faulted) /* CUDA keeps the first */
        return;
    d.faulted = true;
    snprintf(d.error_name, sizeof d.error_name, "%s", name);
    snprintf(d.error_text, sizeof d.error_text, "%s", text);
}

} // namespace

extern "C" void ckc_emu_inject(int kind, const char *op, int nth) {
    Device &d = device();
    std::lock_guard<std::mutex> guard(d.lock);
    Injection j;
    j.kind = kind;
    snprintf(j.op, sizeof j.op, "%s", op ? op : "");
    j.nth = nth < 1 ? 1 : nth;
    j.seen = 0;
    d.injections.push_back(j);
}

extern "C" void ckc_emu_reset(void) {
    Device &d = device();
    std::lock_guard<std::mutex> guard(d.lock);
    d.injections.clear();
    d.streams.clear();
    d.faulted = false;
    d.error_name[0] = d.error_text[0] = '\0';
    /* The last counter is the flight record's replay counter (csrc/diag/flight.h), which
     * numbers replays of captured graphs: it keeps growing, so that records of replays
     * before the reset do not read as records of the replays after it. */
    if (!d.arrivals.empty())
        std::fill(d.arrivals.begin(), d.arrivals.end() - 1, 0u);
}

extern "C" int ckc_emu_admit(const char *what, uintptr_t stream, int copy, char *why, size_t cap) {
    ckc_emu_hazard_work(what, stream);
    Device &d = device();
    std::lock_guard<std::mutex> guard(d.lock);
    if (d.faulted) {
        snprintf(why, cap, "%s refused: the device reported an earlier fault: %s: %s", what, d.error_name,
                 d.error_text);
        return CKC_EMU_STICKY;
    }
    Stream &s = d.streams[stream];
    s.position++;
    if (s.hung_at != 0)
        return CKC_EMU_SKIP; /* queued behind work that never completes */
    if (copy == 2)
        return CKC_EMU_OK; /* stream work: injections target kernels and copies */
    Injection *j = fire(d, copy != 0);
    if (j == nullptr)
        return CKC_EMU_OK;
    char text[256];
    switch (j->kind) {
    case CKC_EMU_INJECT_LAUNCH:
        s.position--; /* a refused launch queues nothing */
        snprintf(why, cap, "injected launch failure of %s (op '%s')", what, ckc_emu_current_op());
        return CKC_EMU_LAUNCH_ERROR;
    case CKC_EMU_INJECT_HANG:
        s.hung_at = s.position;
        return CKC_EMU_SKIP;
    default:
        snprintf(text, sizeof text, "injected %s fault in %s (op '%s'): an illegal memory access was encountered",
                 kind_name(j->kind), what, ckc_emu_current_op());
        set_sticky(d, "cudaErrorIllegalAddress", text);
        return CKC_EMU_SKIP;
    }
}

extern "C" int ckc_emu_copy_async(void *dst, const void *src, size_t bytes, uintptr_t stream, char *why,
                                  size_t cap) {
    /* The copies issued here (stage) come from host memory CUDA does not capture a copy of. */
    if (ckc_emu::refuse_capture(stream, "a copy from host memory into the stream", why, cap))
        return CKC_EMU_CAPTURE;
    const int admitted = ckc_emu_admit("memcpy", stream, 1, why, cap);
    ckc_emu_hazard_access(dst, bytes, stream, 1, "a host-to-device copy");
    if (admitted == CKC_EMU_OK)
        memcpy(dst, src, bytes);
    return admitted == CKC_EMU_SKIP ? CKC_EMU_OK : admitted;
}

extern "C" void ckc_emu_write_value64(uint64_t *p, uint64_t value, uintptr_t stream) {
    if (ckc_emu::capture_write(stream, p, value))
        return;
    Device &d = device();
    std::lock_guard<std::mutex> guard(d.lock);
    Stream &s = d.streams[stream];
    s.position++;
    if (!d.faulted && s.hung_at == 0)
        __atomic_store_n(p, value, __ATOMIC_RELEASE);
}

namespace {
std::atomic<bool> refuse_host_mapping{false};

bool refuses_host_mapping() { return refuse_host_mapping.load(std::memory_order_acquire); }
} // namespace

extern "C" void ckc_emu_refuse_host_mapping(int refuse) {
    refuse_host_mapping.store(refuse != 0, std::memory_order_release);
}

namespace {
bool within(const std::vector<std::pair<const char *, size_t>> &ranges, const void *p, size_t bytes) {
    const char *c = static_cast<const char *>(p);
    for (const auto &a : ranges)
        if (c >= a.first && c + bytes <= a.first + a.second)
            return true;
    return false;
}
} // namespace

extern "C" int ckc_emu_host_mapped(const void *p, size_t bytes) {
    Device &d = device();
    std::lock_guard<std::mutex> guard(d.lock);
    if (within(d.host_allocations, p, bytes))
        return 1;
    if (!within(d.registered, p, bytes))
        return -1;
    return refuses_host_mapping() ? 0 : 1;
}

extern "C" int ckc_emu_map_host(const void *p, size_t bytes) {
    if (ckc_emu_host_mapped(p, bytes) < 0) {
        char why[320];
        if (ckc_emu::forbidden("cudaHostRegister", why, sizeof why))
            return 0;
        Device &d = device();
        std::lock_guard<std::mutex> guard(d.lock);
        if (!within(d.registered, p, bytes))
            d.registered.emplace_back(static_cast<const char *>(p), bytes);
    }
    return ckc_emu_host_mapped(p, bytes) == 1;
}

extern "C" void *ckc_emu_alloc_host(size_t bytes) {
    char why[320];
    if (ckc_emu::forbidden("cudaHostAlloc", why, sizeof why))
        return nullptr;
    void *p = std::calloc(1, bytes);
    if (p == nullptr)
        return nullptr;
    Device &d = device();
    std::lock_guard<std::mutex> guard(d.lock);
    d.host_allocations.emplace_back(static_cast<const char *>(p), bytes);
    return p;
}

extern "C" uint32_t *ckc_emu_mark_arrivals(size_t count) {
    Device &d = device();
    std::unique_lock<std::mutex> guard(d.lock);
    if (d.arrivals.empty()) {
        char why[320];
        guard.unlock();
        if (ckc_emu::forbidden("cudaMalloc", why, sizeof why))
            return nullptr;
        guard.lock();
    }
    if (d.arrivals.empty()) {
        try {
            d.arrivals.assign(count, 0u);
        } catch (const std::bad_alloc &) {
            return nullptr;
        }
    }
    return d.arrivals.data();
}

extern "C" uint64_t ckc_emu_event_record(uintptr_t stream) {
    Device &d = device();
    std::lock_guard<std::mutex> guard(d.lock);
    return ++d.streams[stream].position;
}

extern "C" uint32_t *ckc_emu_mark_arrivals_known(void) {
    Device &d = device();
    std::lock_guard<std::mutex> guard(d.lock);
    return d.arrivals.empty() ? nullptr : d.arrivals.data();
}

extern "C" int ckc_emu_memset_async(void *p, int value, size_t bytes, uintptr_t stream, char *why, size_t cap) {
    if (ckc_emu::capture_memset(stream, p, value, bytes))
        return CKC_EMU_OK;
    const int admitted = ckc_emu_admit("memset", stream, 0, why, cap);
    ckc_emu_hazard_access(p, bytes, stream, 1, "a memset");
    if (admitted == CKC_EMU_OK)
        memset(p, value, bytes);
    return admitted == CKC_EMU_SKIP ? CKC_EMU_OK : admitted;
}

namespace {
/* ckc_emu_skip_kernels's switch: read per launch, set between runs of a benchmark. */
std::atomic<int> skip_kernels{0};
} // namespace

extern "C" void ckc_emu_skip_kernels(int skip) { skip_kernels.store(skip != 0, std::memory_order_relaxed); }

extern "C" int ckc_emu_kernels_skipped(void) { return skip_kernels.load(std::memory_order_relaxed); }

extern "C" int ckc_emu_stream_work(const char *what, uintptr_t stream, void (*run)(const void *ctx), const void *ctx,
                                   size_t bytes, char *why, size_t cap) {
    if (ckc_emu::capture_work(stream, what, run, ctx, bytes))
        return CKC_EMU_OK;
    const int admitted = ckc_emu_admit(what, stream, 2, why, cap);
    if (admitted == CKC_EMU_OK && !ckc_emu_kernels_skipped())
        run(ctx);
    return admitted == CKC_EMU_SKIP ? CKC_EMU_OK : admitted;
}

extern "C" int ckc_emu_query(uintptr_t stream, uint64_t position, char *name, size_t name_cap, char *text,
                             size_t text_cap) {
    if (ckc_emu::forbidden("a stream or event query", text, text_cap)) {
        snprintf(name, name_cap, "cudaErrorStreamCaptureUnsupported");
        return CKC_EMU_CAPTURE;
    }
    Device &d = device();
    std::lock_guard<std::mutex> guard(d.lock);
    if (d.faulted) {
        snprintf(name, name_cap, "%s", d.error_name);
        snprintf(text, text_cap, "%s", d.error_text);
        return CKC_EMU_STICKY;
    }
    auto it = d.streams.find(stream);
    if (it == d.streams.end())
        return 0;
    return it->second.hung_at != 0 && position >= it->second.hung_at ? 1 : 0;
}
