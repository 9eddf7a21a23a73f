# SPDX-License-Identifier: Apache-2.0
"""How gpu_check times a call: the GPU's time with the host running ahead, and the host's
time, apart.

CUDA events recorded around one call time whatever is slower: at small shapes that is the
host (the Python wrapper, the launches), not the kernel.  So the calls are queued behind a
spin kernel (``torch.cuda._sleep``) that keeps the GPU busy while the host queues them all:
when the host has queued the last call and the GPU has still not reached the start event
(it is still spinning), the GPU never waited for the host between the calls, and the
events' difference over the number of calls is the GPU's time per call.  If the GPU had
reached the start event already, the round does not count: the spin is made longer and
the round taken again.  The host's time per call is the host clock over the same queueing
(the GPU busy spinning, so a full launch queue never blocks it), measured apart from the
GPU time.

A second way, for our ops only: the calls captured into a CUDA graph and the graph replayed
(one launch for all of them), which also shows that the op can be captured.

The clock is an object (``CudaClock`` on a GPU), so the arithmetic is tested with a fake one."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Protocol

MAX_SPIN_MS = 400.0       # longer spins only mean the host is far slower than the GPU
EXTRA_ROUNDS = 6          # rounds allowed beyond those asked for, when some do not count


class Clock(Protocol):
    def sync(self) -> None: ...
    def spin(self, ms: float) -> None: ...          # queues work keeping the GPU busy for ~ms
    def mark(self) -> object: ...                   # an event recorded on the stream
    def reached(self, mark: object) -> bool: ...    # whether the GPU has passed the mark
    def elapsed_ms(self, a: object, b: object) -> float: ...
    def now(self) -> float: ...                     # the host clock, seconds


@dataclass
class Timing:
    """One implementation's time per call, in microseconds.  ahead: every counted round had
    the host ahead of the GPU (False: no round did, and gpu_us is the slower of the two, as a
    plain event timing would be)."""
    gpu_us: float
    host_us: float
    ahead: bool
    rounds: int
    spin_ms: float


def time_queued(call: Callable[[int], None], clock: Clock, calls: int, rounds: int, spin_ms: float,
                max_spin_ms: float = MAX_SPIN_MS) -> Timing:
    """call(i) makes the i-th call (the caller rotates its inputs); `calls` of them per round
    behind a spin of spin_ms, until `rounds` rounds had the host ahead (or EXTRA_ROUNDS more
    were tried).  Medians over the counted rounds."""
    ahead_gpu, ahead_host, other_gpu, other_host = [], [], [], []
    for _ in range(rounds + EXTRA_ROUNDS):
        if len(ahead_gpu) == rounds:
            break
        clock.sync()
        clock.spin(spin_ms)
        start = clock.mark()
        t0 = clock.now()
        for i in range(calls):
            call(i)
        host_ms = (clock.now() - t0) * 1e3
        end = clock.mark()
        ahead = not clock.reached(start)
        clock.sync()
        gpu_ms = clock.elapsed_ms(start, end)
        if ahead:
            ahead_gpu.append(gpu_ms / calls)
            ahead_host.append(host_ms / calls)
        else:
            other_gpu.append(gpu_ms / calls)
            other_host.append(host_ms / calls)
            spin_ms = min(max(2 * spin_ms, 2 * host_ms), max_spin_ms)
    gpu, host = (ahead_gpu, ahead_host) if ahead_gpu else (other_gpu, other_host)
    return Timing(statistics.median(gpu) * 1e3, statistics.median(host) * 1e3, bool(ahead_gpu), len(gpu), spin_ms)


def first_spin_ms(host_s_per_call: float, calls: int) -> float:
    """A spin long enough for the host to queue `calls` calls of the given host time: three
    times their host time, at least 1 ms (the first guess comes from the warm-up calls)."""
    return min(max(3 * host_s_per_call * calls * 1e3, 1.0), MAX_SPIN_MS)


class CudaClock:
    """The clock of the current CUDA stream.  The spin kernel counts GPU clock cycles, so its
    cycles per millisecond are measured once (calibrate)."""

    def __init__(self, cycles_per_ms: float):
        self.cycles_per_ms = cycles_per_ms

    @classmethod
    def calibrate(cls) -> "CudaClock":
        import torch

        cycles = 20_000_000
        torch.cuda._sleep(cycles // 10)  # warm-up: the kernel's first launch
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        torch.cuda.synchronize()
        return cls(cycles / max(start.elapsed_time(end), 1e-3))

    def sync(self) -> None:
        import torch
        torch.cuda.synchronize()

    def spin(self, ms: float) -> None:
        import torch
        torch.cuda._sleep(int(ms * self.cycles_per_ms))

    def mark(self):
        import torch
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def reached(self, mark) -> bool:
        return mark.query()

    def elapsed_ms(self, a, b) -> float:
        return a.elapsed_time(b)

    def now(self) -> float:
        return time.perf_counter()


def warm_up(call: Callable[[int], None], clock: Clock, calls: int) -> float:
    """Makes `calls` calls (lazy initialization, compilation, autotuning stay out of the
    numbers), then `calls` more timed on the host clock before synchronizing: the host
    seconds per call, a first guess for the spin."""
    for i in range(calls):
        call(i)
    clock.sync()
    t0 = clock.now()
    for i in range(calls):
        call(i)
    host_s = (clock.now() - t0) / max(calls, 1)
    clock.sync()
    return host_s


def time_graph(call: Callable[[int], None], calls: int, replays: int, clock: Clock) -> float:
    """GPU microseconds per call from a CUDA graph of `calls` calls replayed `replays` times
    behind a spin (on a GPU only: raises where the calls cannot be captured)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(calls):  # warm-up on the side stream, as torch.cuda.graph wants
            call(i)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            call(i)
    clock.sync()
    clock.spin(1.0)
    start = clock.mark()
    for _ in range(replays):
        graph.replay()
    end = clock.mark()
    clock.sync()
    return clock.elapsed_ms(start, end) / (calls * replays) * 1e3
