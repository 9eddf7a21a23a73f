/* SPDX-License-Identifier: Apache-2.0 */
/* The emulated device's cross-stream hazard detector (emu_api.h, "Cross-stream
 * hazards"): off until ckc_emu_hazards_track(1).
 *
 * Why: the emulated device runs all work synchronously when it is issued, so a
 * missing stream wait never shows in the results; on a GPU the same program lets
 * a kernel read a weight before the copy that fills it has landed (ComfyUI's
 * async weight offload: copies on an offload stream, kernels on the compute
 * stream, ordered by an event that the compute stream waits on).  This checks the
 * order instead of the timing, as a happens-before race detector does.
 *
 * Model: vector clocks.  Each tracked access by work on stream S is one tick of
 * S's own clock.  An event recorded on S snapshots S's vector (what S's queue has
 * done or waited for so far); a wait of T on it merges the snapshot into T's
 * vector.  A device byte range remembers its last writes and reads (stream, tick).
 * An access by T conflicts with an earlier one by S != T unless T's vector holds
 * S's tick: read after write (the caller's missing wait before the kernel), write
 * after read and write after write (a buffer refilled while a kernel still reads
 * it, the fix of ComfyUI PR #10501).  Host synchronisation is not modelled: the
 * tests order streams with events only.  Besides, work an op issues on a stream
 * other than its caller's is reported: it would be "c"'s own cross-stream work.
 *
 * Granularity: what ops read and write is their tensor arguments (ops/hazards.c
 * reports inputs as reads, outputs as writes, on the op's stream); copies and
 * memsets report their destination.  Test code: built into _C_emu only. */
#include "emu_api.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

using Clock = std::map<uintptr_t, uint64_t>;

struct Access {
    uintptr_t begin, end;
    uintptr_t stream;
    uint64_t tick;
    bool write;
    std::string what;
};

struct Hazards {
    std::mutex lock;
    std::atomic<bool> on{false}; /* read without the lock by ckc_emu_hazards_on */
    std::map<uintptr_t, Clock> clocks;
    std::vector<Clock> events; /* event id - 1 -> snapshot */
    std::vector<Access> accesses;
    std::string reports;
};

Hazards &hz() {
    static Hazards h;
    return h;
}

thread_local uintptr_t t_op_stream;
thread_local bool t_in_op;
thread_local char t_op[64];

bool ordered(Hazards &h, uintptr_t reader, const Access &a) {
    if (a.stream == reader)
        return true;
    Clock &c = h.clocks[reader];
    auto it = c.find(a.stream);
    return it != c.end() && it->second >= a.tick;
}

void report(Hazards &h, const Access &earlier, uintptr_t stream, bool write, const char *what) {
    char line[600];
    const char *kind = earlier.write ? (write ? "write after write" : "read after write") : "write after read";
    snprintf(line, sizeof line,
             "%s on stream %#llx %s bytes [%#llx, +%llu) that %s on stream %#llx %s, with no event recorded on "
             "stream %#llx after that and waited on by stream %#llx: a cross-stream race (%s)\n",
             what, (unsigned long long)stream, write ? "writes" : "reads", (unsigned long long)earlier.begin,
             (unsigned long long)(earlier.end - earlier.begin), earlier.what.c_str(),
             (unsigned long long)earlier.stream, earlier.write ? "wrote" : "reads", (unsigned long long)earlier.stream,
             (unsigned long long)stream, kind);
    h.reports += line;
}

} // namespace

extern "C" int ckc_emu_hazards_on(void) {
    return hz().on.load(std::memory_order_relaxed) ? 1 : 0;
}

extern "C" void ckc_emu_hazards_track(int on) {
    Hazards &h = hz();
    std::lock_guard<std::mutex> guard(h.lock);
    h.on = on != 0;
    h.clocks.clear();
    h.events.clear();
    h.accesses.clear();
    h.reports.clear();
}

extern "C" void ckc_emu_hazard_access(const void *p, size_t bytes, uintptr_t stream, int write, const char *what) {
    Hazards &h = hz();
    std::lock_guard<std::mutex> guard(h.lock);
    if (!h.on || bytes == 0)
        return;
    const uintptr_t begin = (uintptr_t)p, end = begin + bytes;
    for (const Access &a : h.accesses)
        if (a.begin < end && begin < a.end && (write || a.write) && !ordered(h, stream, a))
            report(h, a, stream, write != 0, what);
    /* Inside the range a write supersedes every access; a read only this stream's earlier reads
     * (a write stays: a later reader on another stream is checked against it). */
    h.accesses.erase(std::remove_if(h.accesses.begin(), h.accesses.end(),
                                    [&](const Access &a) {
                                        return a.begin >= begin && a.end <= end &&
                                               (write || (a.stream == stream && !a.write));
                                    }),
                     h.accesses.end());
    const uint64_t tick = ++h.clocks[stream][stream];
    h.accesses.push_back(Access{begin, end, stream, tick, write != 0, what});
}

extern "C" uint64_t ckc_emu_hazard_record(uintptr_t stream) {
    Hazards &h = hz();
    std::lock_guard<std::mutex> guard(h.lock);
    h.events.push_back(h.clocks[stream]);
    return h.events.size();
}

extern "C" int ckc_emu_hazard_wait(uintptr_t stream, uint64_t event) {
    Hazards &h = hz();
    std::lock_guard<std::mutex> guard(h.lock);
    if (event == 0 || event > h.events.size())
        return -1;
    Clock &c = h.clocks[stream];
    for (const auto &kv : h.events[event - 1])
        c[kv.first] = std::max(c[kv.first], kv.second);
    return 0;
}

extern "C" void ckc_emu_hazard_op(const char *op, uintptr_t stream, int begin) {
    t_in_op = begin != 0;
    t_op_stream = stream;
    snprintf(t_op, sizeof t_op, "%s", op ? op : "");
}

extern "C" void ckc_emu_hazard_work(const char *what, uintptr_t stream) {
    if (!t_in_op || stream == t_op_stream)
        return;
    Hazards &h = hz();
    std::lock_guard<std::mutex> guard(h.lock);
    if (!h.on)
        return;
    char line[300];
    snprintf(line, sizeof line, "%s issued %s on stream %#llx, not on its caller's stream %#llx: work of its own "
             "on another stream\n", t_op, what, (unsigned long long)stream, (unsigned long long)t_op_stream);
    h.reports += line;
}

extern "C" size_t ckc_emu_hazard_take(char *buf, size_t cap) {
    Hazards &h = hz();
    std::lock_guard<std::mutex> guard(h.lock);
    const size_t n = h.reports.size();
    if (buf != nullptr && cap > 0) {
        const size_t k = std::min(n, cap - 1);
        memcpy(buf, h.reports.data(), k);
        buf[k] = '\0';
        if (k == n)
            h.reports.clear();
    }
    return n;
}
