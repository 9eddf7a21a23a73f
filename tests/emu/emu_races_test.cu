// SPDX-License-Identifier: Apache-2.0
// Bugs planted on purpose, each one that the emulated device used to let pass, and
// what catches it now (tests/test_emulator.py runs every case under each setting):
//   missing_barrier     a consumer reads its neighbour's shared value with no
//                       __syncthreads(): right in linear order, wrong under some
//                       shuffled schedules, a race report with the detector
//   stale_static        block 1 reads static __shared__ memory that only block 0
//                       wrote: it used to see block 0's values; now 0xCD garbage,
//                       and an uninitialized-read report with the detector
//   uninit_dynamic      the same with dynamic shared memory
//   warp_halves         divergent lanes with disjoint sub-masks: each half warp
//                       shuffles, votes and __syncwarp()s among itself
//   warp_cross_half     a lane reads a value written by a lane of the other half,
//                       which only synchronized its own half: a race report
//   barrier_ok          the fixed kernel: right under every schedule, no report
// Usage: emu_races_test CASE; prints "RESULT <case> ok|wrong|fault: <message>".
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_dialect.h"

constexpr unsigned kThreads = 128;

__global__ void missing_barrier_kernel(int *out) {
    __shared__ int values[kThreads];
    const unsigned t = threadIdx.x;
    values[t] = (int)t + 1;
    // planted: no __syncthreads() here
    out[t] = t ? values[t - 1] : values[t];
}

__global__ void barrier_kernel(int *out) {
    __shared__ int values[kThreads];
    const unsigned t = threadIdx.x;
    values[t] = (int)t + 1;
    __syncthreads();
    out[t] = t ? values[t - 1] : values[t];
}

__global__ void stale_static_kernel(unsigned *out) {
    __shared__ unsigned cache[kThreads];
    const unsigned t = threadIdx.x;
    if (blockIdx.x == 0)
        cache[t] = 42;  // planted: only block 0 fills the cache
    __syncthreads();
    out[blockIdx.x * kThreads + t] = cache[t];
}

__global__ void uninit_dynamic_kernel(unsigned *out) {
    CKC_DYNAMIC_SHARED(unsigned, scratch);
    const unsigned t = threadIdx.x;
    if (t != 5)
        scratch[t] = t;  // planted: thread 5 forgets its slot
    __syncthreads();
    out[t] = scratch[t];
}

__global__ void warp_halves_kernel(int *out) {
    __shared__ int slots[32];
    const unsigned lane = threadIdx.x;
    int v = (int)lane * 10;
    if (lane < 16) {
        v = __shfl_sync(0x0000FFFFu, v, 3);                 // lane 3's value, within the low half
        const unsigned vote = __ballot_sync(0x0000FFFFu, lane % 2 == 0);
        slots[lane] = v + (int)__popc(vote);
        __syncwarp(0x0000FFFFu);
        out[lane] = slots[(lane + 1) % 16];                  // a neighbour of its own half
    } else {
        v = __shfl_down_sync(0xFFFF0000u, v, 1, 16);         // within the high half (segments of 16)
        const unsigned vote = __ballot_sync(0xFFFF0000u, lane >= 24);
        slots[lane] = v + (int)__popc(vote);
        __syncwarp(0xFFFF0000u);
        out[lane] = slots[16 + (lane + 1) % 16];
    }
}

__global__ void warp_cross_half_kernel(int *out) {
    __shared__ int slots[32];
    const unsigned lane = threadIdx.x;
    slots[lane] = (int)lane;
    if (lane < 16)
        __syncwarp(0x0000FFFFu);
    else
        __syncwarp(0xFFFF0000u);
    // planted: the high half reads the low half's values, but the halves never synchronized
    out[lane] = lane < 16 ? slots[lane] : slots[lane ^ 16];
}

static int report(const char *name, bool ok) {
    char message[512];
    const int error = ckc_emu_last_error(message, sizeof message);
    if (error != 0)
        printf("RESULT %s fault: %s\n", name, message);
    else
        printf("RESULT %s %s\n", name, ok ? "ok" : "wrong");
    return 0;
}

static bool neighbours_right(const std::vector<int> &out) {
    for (unsigned t = 0; t < kThreads; t++)
        if (out[t] != (t ? (int)t : 1))
            return false;
    return true;
}

int main(int argc, char **argv) {
    const char *name = argc > 1 ? argv[1] : "";
    /* The schedule the runner names (COMFY_KITCHEN_C_EMU_SCHEDULE, as _C.configure hands it over). */
    const char *schedule = getenv("COMFY_KITCHEN_C_EMU_SCHEDULE");
    if (schedule != nullptr && strncmp(schedule, "shuffle", 7) == 0)
        ckc_emu_set_schedule(1, schedule[7] == ':' ? strtoull(schedule + 8, nullptr, 10) : 1);
    if (!strcmp(name, "missing_barrier") || !strcmp(name, "barrier_ok")) {
        std::vector<int> out(kThreads, -1);
        int *d_out = out.data();
        if (!strcmp(name, "missing_barrier"))
            CKC_LAUNCH(missing_barrier_kernel, 1, kThreads, 0, 0, d_out);
        else
            CKC_LAUNCH(barrier_kernel, 1, kThreads, 0, 0, d_out);
        return report(name, neighbours_right(out));
    }
    if (!strcmp(name, "stale_static")) {
        std::vector<unsigned> out(2 * kThreads, 0);
        unsigned *d_out = out.data();
        CKC_LAUNCH(stale_static_kernel, 2, kThreads, 0, 0, d_out);
        // right would be: block 1 sees 42 too (what the emulator used to give, and a GPU need not)
        bool block1_sees_42 = true;
        for (unsigned t = 0; t < kThreads; t++)
            block1_sees_42 = block1_sees_42 && out[kThreads + t] == 42;
        if (!block1_sees_42 && out[kThreads] == 0xCDCDCDCDu)
            printf("POISON block 1 read 0x%08x\n", out[kThreads]);
        return report(name, block1_sees_42);
    }
    if (!strcmp(name, "uninit_dynamic")) {
        std::vector<unsigned> out(kThreads, 0);
        unsigned *d_out = out.data();
        CKC_LAUNCH(uninit_dynamic_kernel, 1, kThreads, kThreads * sizeof(unsigned), 0, d_out);
        if (out[5] == 0xCDCDCDCDu)
            printf("POISON thread 5 read 0x%08x\n", out[5]);
        return report(name, out[5] == 5);
    }
    if (!strcmp(name, "warp_halves")) {
        std::vector<int> out(32, -1);
        int *d_out = out.data();
        CKC_LAUNCH(warp_halves_kernel, 1, 32, 0, 0, d_out);
        bool ok = true;
        for (unsigned lane = 0; lane < 32; lane++) {
            const unsigned next = lane < 16 ? (lane + 1) % 16 : 16 + (lane + 1) % 16;
            // low half: lane 3's 30 plus 8 even lanes; high half: the next lane's value in its
            // segment (the last lane keeps its own) plus 8 lanes >= 24
            const int v = next < 16 ? 30 + 8 : (next == 31 ? 310 : (int)(next + 1) * 10) + 8;
            ok = ok && out[lane] == v;
        }
        return report(name, ok);
    }
    if (!strcmp(name, "warp_cross_half")) {
        std::vector<int> out(32, -1);
        int *d_out = out.data();
        CKC_LAUNCH(warp_cross_half_kernel, 1, 32, 0, 0, d_out);
        bool ok = true;
        for (unsigned lane = 0; lane < 32; lane++)
            ok = ok && out[lane] == (int)(lane < 16 ? lane : lane ^ 16);
        return report(name, ok);
    }
    fprintf(stderr, "unknown case '%s'\n", name);
    return 2;
}
