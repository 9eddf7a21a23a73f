/* SPDX-License-Identifier: Apache-2.0 */
/* The replay of a captured graph (emu_graphs.cpp records it): its nodes run in
 * capture order, each admitted by the stream layer (emu_streams.cpp) as if
 * issued then, under the op it was issued under, so a hang injected into a
 * replay stops it there and everything after it on the stream.  It sits above
 * both: the graphs only record, the streams only run.  See emu_api.h. */
#include "emu_api.h"
#include "emu_graphs.h"

#include <cstdio>
#include <string>
#include <vector>

using ckc_emu::Node;

namespace {

/* Runs one node on stream; CKC_EMU_OK or an error code with why. */
int replay_node(const Node &n, uintptr_t stream, char *why, size_t cap) {
    switch (n.kind) {
    case Node::Kind::kernel: {
        const int code = ckc_emu::run_kernel(n.name, n.grid, n.block, n.smem, stream, n.body);
        if (code != CKC_EMU_OK)
            ckc_emu_last_error(why, cap);
        return code;
    }
    case Node::Kind::memset:
        return ckc_emu_memset_async(n.p, n.value, n.bytes, stream, why, cap);
    case Node::Kind::write:
        ckc_emu_write_value64(n.word, n.word_value, stream);
        return CKC_EMU_OK;
    default:
        return ckc_emu_stream_work(n.name, stream, n.run, n.ctx.data(), n.ctx.size(), why, cap);
    }
}

} // namespace

extern "C" int ckc_emu_graph_launch(uint64_t graph, uintptr_t stream, char *why, size_t cap) {
    std::vector<Node> nodes;
    const int taken = ckc_emu::graph_nodes(graph, stream, nodes, why, cap);
    if (taken != CKC_EMU_OK)
        return taken;
    /* Like cudaGraphLaunch: refused when the device already holds a fault; a fault
     * of the replay's own work surfaces later (its nodes after it do not run). */
    char name[64];
    if (ckc_emu_query(stream, 0, name, sizeof name, why, cap) == CKC_EMU_STICKY)
        return CKC_EMU_STICKY;
    const std::string saved = ckc_emu_current_op();
    int code = CKC_EMU_OK;
    for (const Node &n : nodes) {
        ckc_emu_set_op(n.op.c_str());
        code = replay_node(n, stream, why, cap);
        if (code == CKC_EMU_STICKY) {
            ckc_emu_last_error(nullptr, 0); /* refused after the replay's own fault: asynchronous */
            code = CKC_EMU_OK;
        }
        if (code != CKC_EMU_OK)
            break;
    }
    ckc_emu_set_op(saved.c_str());
    return code;
}
