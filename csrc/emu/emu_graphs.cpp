/* SPDX-License-Identifier: Apache-2.0 */
/* The emulated device's CUDA graphs: stream capture (work issued to a captured
 * stream is recorded as nodes), the graphs it ends in, and the calls CUDA
 * forbids while a capture is active.  Their replay is emu_replay.cpp's.  See
 * emu_api.h for the model.
 *
 * Like CUDA: a capture belongs to one stream and, in thread-local mode, to the
 * thread that began it; a forbidden call invalidates the capture (its end then
 * fails) and fails itself. */
#include "emu_api.h"
#include "emu_graphs.h"

#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using ckc_emu::Node;

namespace {

struct Capture {
    uint64_t id;
    uintptr_t stream;
    int mode;
    std::thread::id owner;
    bool invalidated = false;
    char why[240] = "";
    std::vector<Node> nodes;
};

struct Graphs {
    std::mutex lock;
    std::vector<Capture> active;
    std::map<uint64_t, std::vector<Node>> graphs;
    uint64_t next_capture = 1;
    uint64_t next_graph = 1;
};

Graphs &graphs() {
    static Graphs g;
    return g;
}

/* The active capture of stream, or nullptr.  Caller holds the lock. */
Capture *find(Graphs &g, uintptr_t stream) {
    for (Capture &c : g.active)
        if (c.stream == stream)
            return &c;
    return nullptr;
}

/* Appends node to stream's capture: true when there is one. */
bool record(uintptr_t stream, Node &&node) {
    Graphs &g = graphs();
    std::lock_guard<std::mutex> guard(g.lock);
    Capture *c = find(g, stream);
    if (c == nullptr)
        return false;
    node.op = ckc_emu_current_op();
    c->nodes.push_back(std::move(node));
    return true;
}

const char *mode_name(int mode) {
    return mode == CKC_EMU_CAPTURE_THREAD_LOCAL ? "thread-local" : (mode == CKC_EMU_CAPTURE_RELAXED ? "relaxed"
                                                                                                     : "global");
}

} // namespace

bool ckc_emu::capture_kernel(const char *kernel_name, dim3 grid, dim3 block, size_t dynamic_smem, uintptr_t stream,
                             const std::function<void()> &body) {
    Node n;
    n.kind = Node::Kind::kernel;
    n.name = kernel_name;
    n.grid = grid;
    n.block = block;
    n.smem = dynamic_smem;
    n.body = body;
    return record(stream, std::move(n));
}

bool ckc_emu::capture_memset(uintptr_t stream, void *p, int value, size_t bytes) {
    Node n;
    n.kind = Node::Kind::memset;
    n.p = p;
    n.value = value;
    n.bytes = bytes;
    return record(stream, std::move(n));
}

bool ckc_emu::capture_write(uintptr_t stream, uint64_t *p, uint64_t value) {
    Node n;
    n.kind = Node::Kind::write;
    n.word = p;
    n.word_value = value;
    return record(stream, std::move(n));
}

bool ckc_emu::capture_work(uintptr_t stream, const char *what, void (*run)(const void *ctx), const void *ctx,
                           size_t bytes) {
    Node n;
    n.kind = Node::Kind::work;
    n.name = what;
    n.run = run;
    n.ctx.assign((const unsigned char *)ctx, (const unsigned char *)ctx + bytes);
    return record(stream, std::move(n));
}

bool ckc_emu::capturing(uintptr_t stream) {
    Graphs &g = graphs();
    std::lock_guard<std::mutex> guard(g.lock);
    return find(g, stream) != nullptr;
}

bool ckc_emu::forbidden(const char *what, char *why, size_t cap) {
    Graphs &g = graphs();
    std::lock_guard<std::mutex> guard(g.lock);
    const std::thread::id self = std::this_thread::get_id();
    for (Capture &c : g.active) {
        if (c.mode == CKC_EMU_CAPTURE_RELAXED || (c.mode == CKC_EMU_CAPTURE_THREAD_LOCAL && c.owner != self))
            continue;
        snprintf(why, cap,
                 "cudaErrorStreamCaptureUnsupported: %s is not permitted while stream 0x%llx is captured (%s mode); "
                 "the capture is invalidated",
                 what, (unsigned long long)c.stream, mode_name(c.mode));
        if (!c.invalidated) {
            c.invalidated = true;
            snprintf(c.why, sizeof c.why, "%s during the capture", what);
        }
        return true;
    }
    return false;
}

bool ckc_emu::refuse_capture(uintptr_t stream, const char *what, char *why, size_t cap) {
    Graphs &g = graphs();
    std::lock_guard<std::mutex> guard(g.lock);
    Capture *c = find(g, stream);
    if (c == nullptr)
        return false;
    snprintf(why, cap, "cudaErrorStreamCaptureUnsupported: %s cannot be captured (stream 0x%llx); the capture is "
             "invalidated", what, (unsigned long long)stream);
    if (!c->invalidated) {
        c->invalidated = true;
        snprintf(c->why, sizeof c->why, "%s", what);
    }
    return true;
}

extern "C" int ckc_emu_unsafe_call(const char *what, char *why, size_t cap) {
    return ckc_emu::forbidden(what, why, cap) ? (int)CKC_EMU_CAPTURE : (int)CKC_EMU_OK;
}

extern "C" int ckc_emu_capture_begin(uintptr_t stream, int mode, char *why, size_t cap) {
    Graphs &g = graphs();
    std::lock_guard<std::mutex> guard(g.lock);
    if (mode < CKC_EMU_CAPTURE_GLOBAL || mode > CKC_EMU_CAPTURE_RELAXED) {
        snprintf(why, cap, "cudaErrorInvalidValue: capture mode %d", mode);
        return CKC_EMU_LAUNCH_ERROR;
    }
    if (find(g, stream) != nullptr) {
        snprintf(why, cap, "cudaErrorIllegalState: stream 0x%llx is already being captured",
                 (unsigned long long)stream);
        return CKC_EMU_LAUNCH_ERROR;
    }
    Capture c;
    c.id = g.next_capture++;
    c.stream = stream;
    c.mode = mode;
    c.owner = std::this_thread::get_id();
    g.active.push_back(std::move(c));
    return CKC_EMU_OK;
}

extern "C" int ckc_emu_capture_end(uintptr_t stream, uint64_t *graph, char *why, size_t cap) {
    Graphs &g = graphs();
    std::lock_guard<std::mutex> guard(g.lock);
    *graph = 0;
    for (size_t k = 0; k < g.active.size(); k++) {
        Capture &c = g.active[k];
        if (c.stream != stream)
            continue;
        if (c.mode != CKC_EMU_CAPTURE_RELAXED && c.owner != std::this_thread::get_id()) {
            snprintf(why, cap, "cudaErrorStreamCaptureWrongThread: the capture of stream 0x%llx began on another "
                     "thread", (unsigned long long)stream);
            return CKC_EMU_LAUNCH_ERROR;
        }
        const bool invalidated = c.invalidated;
        if (invalidated)
            snprintf(why, cap, "cudaErrorStreamCaptureInvalidated: the capture was invalidated (%s)", c.why);
        else {
            *graph = g.next_graph++;
            g.graphs[*graph] = std::move(c.nodes);
        }
        g.active.erase(g.active.begin() + (std::ptrdiff_t)k);
        return invalidated ? (int)CKC_EMU_CAPTURE : (int)CKC_EMU_OK;
    }
    snprintf(why, cap, "cudaErrorIllegalState: stream 0x%llx is not being captured", (unsigned long long)stream);
    return CKC_EMU_LAUNCH_ERROR;
}

int ckc_emu::graph_nodes(uint64_t graph, uintptr_t stream, std::vector<Node> &nodes, char *why, size_t cap) {
    Graphs &g = graphs();
    std::lock_guard<std::mutex> guard(g.lock);
    auto it = g.graphs.find(graph);
    if (it == g.graphs.end()) {
        snprintf(why, cap, "cudaErrorInvalidValue: no graph %llu", (unsigned long long)graph);
        return CKC_EMU_LAUNCH_ERROR;
    }
    if (find(g, stream) != nullptr) {
        snprintf(why, cap, "a graph launched into a captured stream is not emulated");
        return CKC_EMU_LAUNCH_ERROR;
    }
    nodes = it->second; /* a copy: the graph may be destroyed or replayed by another thread meanwhile */
    return CKC_EMU_OK;
}

extern "C" void ckc_emu_graph_destroy(uint64_t graph) {
    Graphs &g = graphs();
    std::lock_guard<std::mutex> guard(g.lock);
    g.graphs.erase(graph);
}

extern "C" int ckc_emu_capture_status(uintptr_t stream, uint64_t *id) {
    Graphs &g = graphs();
    std::lock_guard<std::mutex> guard(g.lock);
    const Capture *c = find(g, stream);
    *id = c != nullptr ? c->id : 0;
    return c != nullptr;
}
