/* SPDX-License-Identifier: Apache-2.0 */
/* Each OS thread's launch log: the op its work is issued under (fault injection
 * matches it, graph nodes record it) and its launches since the op began (the
 * tests read the last one's grid).  Thread-local, so it takes no lock; it sits
 * below the streams and the graphs, which both read it.  See emu_api.h. */
#include "emu_api.h"

#include <cstring>

namespace {

struct LaunchLog {
    char op[64];
    int launches;
    const char *kernel;
    unsigned grid[3];
    unsigned block[3];
};
thread_local LaunchLog t_log;

} // namespace

extern "C" void ckc_emu_set_op(const char *op) {
    size_t n = 0;
    for (; op && op[n] && n + 1 < sizeof t_log.op; n++) /* per op: cheaper than snprintf */
        t_log.op[n] = op[n];
    t_log.op[n] = '\0';
    t_log.launches = 0;
    t_log.kernel = nullptr;
}

extern "C" const char *ckc_emu_current_op(void) { return t_log.op; }

extern "C" void ckc_emu_note_launch(const char *kernel, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                    unsigned by, unsigned bz) {
    t_log.launches++;
    t_log.kernel = kernel;
    t_log.grid[0] = gx, t_log.grid[1] = gy, t_log.grid[2] = gz;
    t_log.block[0] = bx, t_log.block[1] = by, t_log.block[2] = bz;
}

extern "C" int ckc_emu_launch_log(const char **kernel, unsigned grid[3], unsigned block[3]) {
    *kernel = t_log.kernel;
    memcpy(grid, t_log.grid, sizeof t_log.grid);
    memcpy(block, t_log.block, sizeof t_log.block);
    return t_log.launches;
}
