/* SPDX-License-Identifier: Apache-2.0 */
/* What the emulated device's stream work asks of its CUDA-graph captures
 * (emu_graphs.cpp), C++ only: each kind of stream work is recorded into the
 * stream's capture instead of running, when the stream is being captured. */
#ifndef CKC_EMU_GRAPHS_H
#define CKC_EMU_GRAPHS_H

#include "emu.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ckc_emu {

/* One piece of work recorded into a capture, replayed in capture order. */
struct Node {
    enum class Kind { kernel, memset, write, work } kind = Kind::kernel;
    std::string op; /* the op it was issued under (injection, launch log) */
    const char *name = nullptr;
    dim3 grid, block;
    size_t smem = 0;
    std::function<void()> body;
    void *p = nullptr;
    int value = 0;
    size_t bytes = 0;
    uint64_t *word = nullptr;
    uint64_t word_value = 0;
    void (*run)(const void *ctx) = nullptr;
    std::vector<unsigned char> ctx;
};

/* A copy of graph's nodes, to replay on stream: CKC_EMU_OK, or an error code
 * with why (no such graph; stream itself being captured). */
int graph_nodes(uint64_t graph, uintptr_t stream, std::vector<Node> &nodes, char *why, size_t cap);

/* Each returns true when stream is being captured and the work was recorded. */
bool capture_memset(uintptr_t stream, void *p, int value, size_t bytes);
bool capture_write(uintptr_t stream, uint64_t *p, uint64_t value);
bool capture_work(uintptr_t stream, const char *what, void (*run)(const void *ctx), const void *ctx, size_t bytes);

/* Whether stream is being captured. */
bool capturing(uintptr_t stream);

/* Work CUDA cannot capture into stream (a copy from pageable memory): when the
 * stream is being captured, invalidates its capture, fills why and returns true. */
bool refuse_capture(uintptr_t stream, const char *what, char *why, size_t cap);

/* Whether a call that CUDA forbids during a capture is forbidden now, on the
 * calling thread (a global capture forbids it on every thread, a thread-local
 * one on its own thread, a relaxed one never); if so the capture is
 * invalidated and why names the call. */
bool forbidden(const char *what, char *why, size_t cap);

} // namespace ckc_emu

#endif /* CKC_EMU_GRAPHS_H */
