/* SPDX-License-Identifier: Apache-2.0 */
/* Kernels that exercise the emulated device (csrc/emu/), written only in the
 * dialect of kernels/cuda_dialect.h, and a host main() that launches each one,
 * checks the results and prints one PASS (or FAIL) line per check.
 * tests/test_emulator.py builds it with:
 *   g++ -std=c++17 -x c++ -DCKC_EMULATED -Icsrc -Ikernels tests/emu/emu_kernels_test.cu csrc/emu/emu_runtime.cpp */
#include "cuda_dialect.h"

/* ---- Indices ---------------------------------------------------------------
 * Every thread of a 2-D grid of 3-D blocks records what it sees, 8 words each. */
__global__ void indices_kernel(unsigned *out) {
    unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned *slot = out + 8 * (block * blockDim.x * blockDim.y * blockDim.z + thread);
    slot[0] = threadIdx.x;
    slot[1] = threadIdx.y;
    slot[2] = threadIdx.z;
    slot[3] = blockIdx.x;
    slot[4] = blockIdx.y;
    slot[5] = blockIdx.z;
    slot[6] = blockDim.x * 100 + blockDim.y * 10 + blockDim.z;
    slot[7] = gridDim.x * 100 + gridDim.y * 10 + gridDim.z;
}

/* ---- Block-wide reduction ----------------------------------------------------
 * Tree sum in dynamic shared memory, __syncthreads between the steps; the total
 * reaches every thread through static shared memory.  Thread 0 also records the
 * dynamic shared memory's first word before anything is written to it. */
__global__ void block_sum_kernel(const float *in, float *out, unsigned *first_word) {
    CKC_DYNAMIC_SHARED(float, partial);
    __shared__ float total;
    unsigned t = threadIdx.x;
    if (t == 0)
        first_word[blockIdx.x] = __float_as_uint(partial[0]);
    __syncthreads();
    partial[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (t < stride)
            partial[t] += partial[t + stride];
        __syncthreads();
    }
    if (t == 0)
        total = partial[0];
    __syncthreads();
    out[blockIdx.x * blockDim.x + t] = total;
}

/* ---- Warp shuffles ------------------------------------------------------------ */
__device__ __forceinline__ unsigned global_id() { return blockIdx.x * blockDim.x + threadIdx.x; }

/* Every lane ends with the warp's sum. */
__global__ void xor_sum_kernel(const float *in, float *out) {
    float v = in[global_id()];
    for (int offset = 16; offset > 0; offset /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    out[global_id()] = v;
}

/* Lane 0 ends with the warp's sum. */
__global__ void down_sum_kernel(const int *in, int *out) {
    int v = in[global_id()];
    for (unsigned offset = 16; offset > 0; offset /= 2)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    out[global_id()] = v;
}

/* Lane 7's float and 64-bit values reach every lane. */
__global__ void broadcast_kernel(const float *in, float *out, unsigned long long *out64) {
    float v = __shfl_sync(0xffffffffu, in[global_id()], 7);
    unsigned long long wide = 0x100000000ull * global_id() + 3;
    out[global_id()] = v;
    out64[global_id()] = __shfl_sync(0xffffffffu, wide, 7);
}

/* Butterfly within 16-lane halves: each half ends with its own sum. */
__global__ void xor_width16_kernel(const int *in, int *out) {
    int v = in[global_id()];
    for (int offset = 8; offset > 0; offset /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, offset, 16);
    out[global_id()] = v;
}

/* Inclusive prefix sum with __shfl_up_sync. */
__global__ void up_scan_kernel(const int *in, int *out) {
    int lane = threadIdx.x % warpSize;
    int v = in[global_id()];
    for (unsigned offset = 1; offset < 32; offset *= 2) {
        int other = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= (int)offset)
            v += other;
    }
    out[global_id()] = v;
}

/* Sources outside the lane's range or segment: the lane keeps its own value,
 * except that xor may read an earlier segment. */
__global__ void shuffle_edges_kernel(const int *in, int *out) {
    int v = in[global_id()];
    int *slot = out + 4 * global_id();
    slot[0] = __shfl_down_sync(0xffffffffu, v, 3);
    slot[1] = __shfl_up_sync(0xffffffffu, v, 2, 8);
    slot[2] = __shfl_xor_sync(0xffffffffu, v, 16, 16);
    slot[3] = __shfl_sync(0xffffffffu, v, 11, 8);
}

/* ---- Warp votes --------------------------------------------------------------- */
__global__ void vote_kernel(const int *in, unsigned *ballot, int *any_negative, int *all_small) {
    int v = in[global_id()];
    ballot[global_id()] = __ballot_sync(0xffffffffu, v % 3 == 0);
    any_negative[global_id()] = __any_sync(0xffffffffu, v < 0);
    all_small[global_id()] = __all_sync(0xffffffffu, v < 100);
}

/* ---- Atomics across blocks ----------------------------------------------------- */
struct Counters {
    float sum;
    int count;
    int max;
    unsigned min;
    int winner;
};

__global__ void atomics_kernel(Counters *c) {
    int id = (int)global_id();
    atomicAdd(&c->sum, 0.5f);
    atomicAdd(&c->count, 1);
    atomicMax(&c->max, id);
    atomicMin(&c->min, 1000u + (unsigned)id);
    atomicCAS(&c->winner, -1, id); /* only the first succeeds */
}

/* ---- Faults ------------------------------------------------------------------------ */

/* Only thread 0 reaches the barrier: the others exit, so it can never complete. */
__global__ void deadlock_kernel(int *out) {
    if (threadIdx.x == 0)
        __syncthreads();
    out[threadIdx.x] = 1;
}

/* Lane 5 exits before a full-warp shuffle that names it. */
__global__ void exited_lane_kernel(int *out) {
    if (threadIdx.x == 5)
        return;
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
}

/* Launched with 48 threads per block: the second warp has 16 lanes, and the
 * full mask names lanes that do not exist.  The launch stops at the first block. */
__global__ void partial_warp_kernel(int *block_ran) {
    block_ran[blockIdx.x] = 1;
    block_ran[4] += __shfl_xor_sync(0xffffffffu, 1, 1);
}

/* Launched with too many threads per block: must not run. */
__global__ void oversized_kernel(int *ran) { *ran = 1; }

/* ---- Context-switch cost ----------------------------------------------------------- */
__global__ void barriers_kernel(int rounds, int *out) {
    int v = 0;
    for (int i = 0; i < rounds; i++) {
        v += i;
        __syncthreads();
    }
    out[threadIdx.x] = v;
}

/* ---- Host ---------------------------------------------------------------------------
 * Only under emulation: there, host memory is device memory, so the kernels can
 * take plain host arrays.  Under nvcc this file contributes only the kernels.
 *
 * CKC_LAUNCH evaluates its arguments inside a [=] lambda, on copies of the
 * variables they name; so kernel arguments are plain pointer variables, never
 * expressions such as v.data() (which would point into a const copy of v). */
#if defined(CKC_EMULATED)

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

static int failures = 0;

static void report(bool ok, const char *name, const char *detail = "") {
    printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name, *detail ? ": " : "", detail);
    if (!ok)
        failures++;
}

/* True when the launch returned 0 and left no error behind. */
static bool launched_cleanly(int status, const char *name) {
    char message[512];
    int error = ckc_emu_last_error(message, sizeof message);
    if (status == 0 && error == 0)
        return true;
    char detail[640];
    snprintf(detail, sizeof detail, "launch returned %d, error %d: %s", status, error, message);
    report(false, name, detail);
    return false;
}

static void test_indices() {
    const dim3 grid(3, 2), block(4, 3, 2);
    const unsigned threads = 3 * 2 * 4 * 3 * 2;
    std::vector<unsigned> out(8 * threads, 0xffffffffu);
    unsigned *d_out = out.data();
    if (!launched_cleanly(CKC_LAUNCH(indices_kernel, grid, block, 0, 0, d_out), "indices"))
        return;
    bool ok = true;
    for (unsigned by = 0; by < 2; by++)
        for (unsigned bx = 0; bx < 3; bx++)
            for (unsigned tz = 0; tz < 2; tz++)
                for (unsigned ty = 0; ty < 3; ty++)
                    for (unsigned tx = 0; tx < 4; tx++) {
                        unsigned b = bx + 3 * by, t = tx + 4 * (ty + 3 * tz);
                        const unsigned *slot = &out[8 * (b * 24 + t)];
                        const unsigned want[8] = {tx, ty, tz, bx, by, 0, 432, 321};
                        ok = ok && memcmp(slot, want, sizeof want) == 0;
                    }
    report(ok, "indices over a 2-D grid of 3-D blocks");
}

static void test_block_sum() {
    const unsigned blocks = 4, threads = 256;
    std::vector<float> in(blocks * threads), out(blocks * threads, -1.0f);
    std::vector<unsigned> first_word(blocks, 0);
    for (unsigned i = 0; i < in.size(); i++)
        in[i] = (float)(i % 97);
    const float *d_in = in.data();
    float *d_out = out.data();
    unsigned *d_first_word = first_word.data();
    int status = CKC_LAUNCH(block_sum_kernel, blocks, threads, threads * sizeof(float), 0, d_in, d_out, d_first_word);
    if (!launched_cleanly(status, "block sum"))
        return;
    bool sums = true, garbage = true;
    for (unsigned b = 0; b < blocks; b++) {
        float want = 0;
        for (unsigned t = 0; t < threads; t++)
            want += in[b * threads + t];
        for (unsigned t = 0; t < threads; t++)
            sums = sums && out[b * threads + t] == want;
        garbage = garbage && first_word[b] == 0xCDCDCDCDu;
    }
    report(sums, "__syncthreads block reduction in dynamic shared memory, broadcast through static __shared__");
    report(garbage, "dynamic shared memory is refilled with 0xCD for every block");
}

/* Warp kernels run on 2 blocks of 64 threads: 4 warps. */
static const unsigned kWarpBlocks = 2, kWarpThreads = 64, kWarpTotal = kWarpBlocks * kWarpThreads;

static std::vector<int> warp_input() {
    std::vector<int> in(kWarpTotal);
    for (unsigned i = 0; i < kWarpTotal; i++)
        in[i] = (int)((i * 37) % 101) - 20;
    return in;
}

static void test_shuffles() {
    std::vector<int> in = warp_input(), out(kWarpTotal);
    std::vector<float> fin(in.begin(), in.end()), fout(kWarpTotal);
    std::vector<unsigned long long> out64(kWarpTotal);
    const int *d_in = in.data();
    int *d_out = out.data();
    const float *d_fin = fin.data();
    float *d_fout = fout.data();
    unsigned long long *d_out64 = out64.data();
    auto warp_sum = [&](unsigned w, unsigned first, unsigned count) {
        int s = 0;
        for (unsigned l = first; l < first + count; l++)
            s += in[w * 32 + l];
        return s;
    };

    if (launched_cleanly(CKC_LAUNCH(xor_sum_kernel, kWarpBlocks, kWarpThreads, 0, 0, d_fin, d_fout), "xor sum")) {
        bool ok = true;
        for (unsigned i = 0; i < kWarpTotal; i++)
            ok = ok && fout[i] == (float)warp_sum(i / 32, 0, 32);
        report(ok, "__shfl_xor_sync butterfly sum (float)");
    }

    if (launched_cleanly(CKC_LAUNCH(down_sum_kernel, kWarpBlocks, kWarpThreads, 0, 0, d_in, d_out), "down sum")) {
        bool ok = true;
        for (unsigned w = 0; w < kWarpTotal / 32; w++)
            ok = ok && out[w * 32] == warp_sum(w, 0, 32);
        report(ok, "__shfl_down_sync reduction (int)");
    }

    if (launched_cleanly(CKC_LAUNCH(broadcast_kernel, kWarpBlocks, kWarpThreads, 0, 0, d_fin, d_fout, d_out64),
                         "broadcast")) {
        bool ok = true;
        for (unsigned i = 0; i < kWarpTotal; i++) {
            unsigned source = i / 32 * 32 + 7;
            ok = ok && fout[i] == fin[source] && out64[i] == 0x100000000ull * source + 3;
        }
        report(ok, "__shfl_sync broadcast from lane 7 (float and 64-bit)");
    }

    if (launched_cleanly(CKC_LAUNCH(xor_width16_kernel, kWarpBlocks, kWarpThreads, 0, 0, d_in, d_out), "width 16")) {
        bool ok = true;
        for (unsigned i = 0; i < kWarpTotal; i++)
            ok = ok && out[i] == warp_sum(i / 32, i % 32 / 16 * 16, 16);
        report(ok, "__shfl_xor_sync with width 16 sums each half-warp");
    }

    if (launched_cleanly(CKC_LAUNCH(up_scan_kernel, kWarpBlocks, kWarpThreads, 0, 0, d_in, d_out), "up scan")) {
        bool ok = true;
        for (unsigned i = 0; i < kWarpTotal; i++)
            ok = ok && out[i] == warp_sum(i / 32, 0, i % 32 + 1);
        report(ok, "__shfl_up_sync inclusive scan");
    }

    std::vector<int> edges(4 * kWarpTotal);
    int *d_edges = edges.data();
    if (launched_cleanly(CKC_LAUNCH(shuffle_edges_kernel, kWarpBlocks, kWarpThreads, 0, 0, d_in, d_edges), "edges")) {
        bool ok = true;
        for (unsigned i = 0; i < kWarpTotal; i++) {
            unsigned lane = i % 32, first = i - lane;
            int down = in[lane + 3 < 32 ? i + 3 : i];
            int up = in[lane % 8 >= 2 ? i - 2 : i];
            int xor16 = in[lane >= 16 ? i - 16 : i];
            int idx8 = in[first + (lane & ~7u) + 3];
            ok = ok && edges[4 * i] == down && edges[4 * i + 1] == up && edges[4 * i + 2] == xor16 &&
                 edges[4 * i + 3] == idx8;
        }
        report(ok, "shuffle sources outside the warp or the segment");
    }
}

static void test_votes() {
    std::vector<int> in = warp_input(), any_negative(kWarpTotal), all_small(kWarpTotal);
    in[40] = 500; /* warp 1 is not all below 100 */
    for (unsigned l = 64; l < 96; l++)
        in[l] = (int)l; /* warp 2 has no negative value */
    std::vector<unsigned> ballot(kWarpTotal);
    const int *d_in = in.data();
    unsigned *d_ballot = ballot.data();
    int *d_any = any_negative.data(), *d_all = all_small.data();
    int status = CKC_LAUNCH(vote_kernel, kWarpBlocks, kWarpThreads, 0, 0, d_in, d_ballot, d_any, d_all);
    if (!launched_cleanly(status, "votes"))
        return;
    bool ok = true;
    for (unsigned i = 0; i < kWarpTotal; i++) {
        unsigned w = i / 32, want_ballot = 0;
        bool want_any = false, want_all = true;
        for (unsigned l = 0; l < 32; l++) {
            int v = in[w * 32 + l];
            want_ballot |= (unsigned)(v % 3 == 0) << l;
            want_any = want_any || v < 0;
            want_all = want_all && v < 100;
        }
        ok = ok && ballot[i] == want_ballot && any_negative[i] == (int)want_any && all_small[i] == (int)want_all;
    }
    report(ok && any_negative[64] == 0 && all_small[32] == 0 && any_negative[0] == 1 && all_small[0] == 1,
           "__ballot_sync, __any_sync, __all_sync");
}

static void test_atomics() {
    Counters c = {0.0f, 0, -1, 0xffffffffu, -1};
    Counters *d_c = &c;
    const unsigned blocks = 16, threads = 128;
    if (!launched_cleanly(CKC_LAUNCH(atomics_kernel, blocks, threads, 0, 0, d_c), "atomics"))
        return;
    report(c.sum == 0.5f * blocks * threads && c.count == (int)(blocks * threads),
           "atomicAdd on float and int across blocks");
    report(c.max == (int)(blocks * threads) - 1 && c.min == 1000u && c.winner == 0, "atomicMax, atomicMin, atomicCAS");
}

/* A launch that must fail with `code`, leaving a message that names the kernel and contains `phrase`. */
static void expect_error(int status, int code, const char *kernel, const char *phrase, const char *name) {
    char message[512];
    int error = ckc_emu_last_error(message, sizeof message);
    int after = ckc_emu_last_error(nullptr, 0);
    char detail[700];
    snprintf(detail, sizeof detail, "launch returned %d, error %d (want %d), then %d: %s", status, error, code, after,
             message);
    bool ok = status == code && error == code && after == 0 && strstr(message, kernel) && strstr(message, phrase);
    report(ok, name, ok ? message : detail);
}

static void test_faults() {
    std::vector<int> out(64, 0);
    int *d_out = out.data();
    expect_error(CKC_LAUNCH(deadlock_kernel, 1, 64, 0, 0, d_out), CKC_EMU_KERNEL_FAULT, "'deadlock_kernel'",
                 "__syncthreads", "deadlock at __syncthreads is a kernel fault");
    expect_error(CKC_LAUNCH(exited_lane_kernel, 1, 32, 0, 0, d_out), CKC_EMU_KERNEL_FAULT, "'exited_lane_kernel'",
                 "lane 5", "warp collective naming an exited lane is a kernel fault");

    int ran = 0;
    int *d_ran = &ran;
    expect_error(CKC_LAUNCH(oversized_kernel, 1, 2048, 0, 0, d_ran), CKC_EMU_LAUNCH_ERROR, "'oversized_kernel'", "2048",
                 "2048 threads per block is a launch error");
    report(ran == 0, "a launch with a bad configuration does not run");
    expect_error(CKC_LAUNCH(oversized_kernel, dim3(1, 70000), 32, 0, 0, d_ran), CKC_EMU_LAUNCH_ERROR,
                 "'oversized_kernel'", "grid", "grid.y of 70000 is a launch error");

    int block_ran[5] = {0, 0, 0, 0, 0};
    int *d_block_ran = block_ran;
    expect_error(CKC_LAUNCH(partial_warp_kernel, 4, 48, 0, 0, d_block_ran), CKC_EMU_KERNEL_FAULT,
                 "'partial_warp_kernel'", "lane 16: it does not exist",
                 "full mask in a partial warp is a kernel fault");
    report(block_ran[0] == 1 && block_ran[1] == 0 && block_ran[3] == 0, "a kernel fault ends the launch");

    /* Two failures before a read: each launch returns its own, the read gives the first. */
    int first = CKC_LAUNCH(deadlock_kernel, 1, 64, 0, 0, d_out);
    int second = CKC_LAUNCH(oversized_kernel, 1, 2048, 0, 0, d_ran);
    char message[512];
    int error = ckc_emu_last_error(message, sizeof message);
    report(first == CKC_EMU_KERNEL_FAULT && second == CKC_EMU_LAUNCH_ERROR && error == CKC_EMU_KERNEL_FAULT &&
               strstr(message, "'deadlock_kernel'") != nullptr,
           "the first of two errors is kept", message);

    /* The device keeps working after faults. */
    test_block_sum();
}

/* Two OS threads launch at once, each checking its own results. */
static void test_concurrent_launches() {
    bool ok[2] = {false, false};
    auto worker = [](bool *result) {
        const unsigned threads = 128;
        std::vector<float> in(threads, 1.0f), out(threads);
        std::vector<unsigned> first_word(1);
        const float *d_in = in.data();
        float *d_out = out.data();
        unsigned *d_first_word = first_word.data();
        bool all = true;
        for (int round = 0; round < 50; round++) {
            int status =
                CKC_LAUNCH(block_sum_kernel, 1, threads, threads * sizeof(float), 0, d_in, d_out, d_first_word);
            all = all && status == 0 && out[threads - 1] == (float)threads;
        }
        *result = all && ckc_emu_last_error(nullptr, 0) == 0;
    };
    std::thread a(worker, &ok[0]), b(worker, &ok[1]);
    a.join();
    b.join();
    report(ok[0] && ok[1], "launches from two OS threads at once");
}

/* Not a check: the cost of one __syncthreads wait, which is two context switches
 * (into the scheduler and back). */
static void measure_switch_cost() {
    const unsigned threads = 256;
    const int rounds = 1000;
    std::vector<int> out(threads);
    int *d_out = out.data();
    auto start = std::chrono::steady_clock::now();
    int status = CKC_LAUNCH(barriers_kernel, 1, threads, 0, 0, rounds, d_out);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!launched_cleanly(status, "barriers"))
        return;
    report(out[threads - 1] == rounds * (rounds - 1) / 2, "256 threads x 1000 __syncthreads");
    double waits = (double)threads * rounds;
    printf("INFO %d __syncthreads x %u threads: %.3f s, %.0f ns per wait, %.0f ns per context switch\n", rounds,
           threads, seconds, seconds / waits * 1e9, seconds / waits / 2 * 1e9);
}

int main() {
    test_indices();
    test_block_sum();
    test_shuffles();
    test_votes();
    test_atomics();
    test_faults();
    test_concurrent_launches();
    measure_switch_cost();
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "OK", failures);
    return failures ? 1 : 0;
}

#endif /* CKC_EMULATED */
