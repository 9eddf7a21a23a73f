# SPDX-License-Identifier: Apache-2.0
"""The benchmark worker (step d, a subprocess: it loads the extension just built, and a
crash in a kernel keeps the rows written before it).  Per op and shape: the GPU time per
call of ours, comfy_kitchen's cuda and triton backends and a device copy of the same bytes,
each with the host running ahead (timing.time_queued), and their host times; ours also from
a replayed CUDA graph and, at M = 4096, with the flight record off; and the model's
prediction.  One JSON line per row."""
from __future__ import annotations

import platform
import sys
import time
from dataclasses import dataclass
from typing import Callable

from . import timing, workload
from .model import load_predictor, model_gpu, predict_us
from .records import BACKENDS, COPY, FLIGHT_OFF, FLIGHT_RIDING, OURS, Row, write_record
from .targets import TARGET_M
from .workload import (bytes_moved, input_sets, linear_arguments, linear_shapes, one_line,
                       op_arguments, FP4_GEMM_MIN_CC, OPS, LINEAR_OPS, W4A8_OPS, shapes, their_implementation,
                       w4a8_shapes,
                       backend_status)

GRAPH_REPLAYS = 3


@dataclass
class Config:
    calls: int       # calls queued per round
    rounds: int      # rounds with the host ahead, median taken
    warmup: int      # calls before timing (compilation, autotuning, first-use setup)
    graph: bool      # also time ours from a replayed CUDA graph


def rotating(fn: Callable, arg_sets: list) -> Callable[[int], None]:
    return lambda i: fn(*arg_sets[i % len(arg_sets)])


def measure(call: Callable[[int], None], clock, cfg: Config) -> tuple[timing.Timing | None, str | None]:
    import torch

    try:
        host_s = timing.warm_up(call, clock, cfg.warmup)
        return timing.time_queued(call, clock, cfg.calls, cfg.rounds, timing.first_spin_ms(host_s, cfg.calls)), None
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return None, "out of GPU memory"
    except Exception as exc:
        return None, one_line(exc)


def record(row: Row, name: str, result: tuple[timing.Timing | None, str | None]) -> None:
    t, note = result
    if t is not None:
        row.gpu_us[name], row.host_us[name], row.ahead[name] = t.gpu_us, t.host_us, t.ahead
    if note:
        row.notes[name] = note


def set_flight(on: bool) -> None:
    """Whether ops write flight records (the ring stays open), as bench_faults.py switches it."""
    import comfy_kitchen_c as ckc
    from comfy_kitchen_c import _C

    _C.flight_configure(None, on, platform.python_version(), ckc.__version__)


def copy_call(nbytes: int, sets: int) -> Callable[[int], None]:
    """A device copy moving nbytes (nbytes / 2 read, as many written), over `sets` buffers."""
    import torch

    pairs = [(torch.empty(nbytes // 2, dtype=torch.uint8, device=workload.DEVICE),
              torch.empty(nbytes // 2, dtype=torch.uint8, device=workload.DEVICE)) for _ in range(sets)]
    return lambda i: pairs[i % sets][0].copy_(pairs[i % sets][1])


def time_all(row: Row, op: str, ours_fn: Callable, our_sets: list, their_sets: list, backends: dict, clock,
             cfg: Config) -> None:
    """Every implementation of one row, on its rotating input sets."""
    ours_call = rotating(ours_fn, our_sets)
    record(row, OURS, measure(ours_call, clock, cfg))
    for b in BACKENDS:
        try:
            impl, note = their_implementation(backends, b, op, their_sets[0])
        except Exception as exc:
            impl, note = None, one_line(exc)
        if impl is None:
            if note:
                row.notes[b] = note
            continue
        record(row, b, measure(rotating(impl, their_sets), clock, cfg))
    record(row, COPY, measure(copy_call(row.nbytes, len(our_sets)), clock, cfg))
    if row.m == TARGET_M and OURS in row.gpu_us:
        set_flight(False)
        try:
            record(row, FLIGHT_OFF, measure(ours_call, clock, cfg))
        finally:
            set_flight(True)
        from comfy_kitchen_c.testing import riding_mark_limit

        with riding_mark_limit(2**64 - 1):  # every mark rides, as before the riding limit (csrc/diag/marks.h)
            record(row, FLIGHT_RIDING, measure(ours_call, clock, cfg))
    if cfg.graph and OURS in row.gpu_us:
        try:
            row.graph_us = timing.time_graph(ours_call, cfg.calls, GRAPH_REPLAYS, clock)
        except Exception as exc:
            row.notes["graph"] = one_line(exc)


def measure_op(op: str, m: int, k: int, ours, backends: dict, clock, cfg: Config, l2_bytes: int) -> Row:
    import torch

    row = Row(op, m, k)
    build = op_arguments(ours)[op]

    def inputs(seed: int):
        g = torch.Generator(device=workload.DEVICE).manual_seed(seed)
        return build(torch.randn(m, k, device=workload.DEVICE, dtype=torch.bfloat16, generator=g))

    try:
        first = inputs(0)
        row.nbytes = bytes_moved(first[0], getattr(ours, op)(*first[0]))
        sets = [first] + [inputs(s) for s in range(1, input_sets(row.nbytes, l2_bytes))]
    except Exception as exc:
        torch.cuda.empty_cache()
        row.notes[OURS] = one_line(exc)
        return row
    time_all(row, op, getattr(ours, op), [s[0] for s in sets], [s[1] for s in sets], backends, clock, cfg)
    return row


def measure_linear(op: str, m: int, k: int, n: int, ours, backends: dict, clock, cfg: Config,
                   l2_bytes: int) -> Row | None:
    import torch

    row = Row(op, m, k, n)
    try:
        first = linear_arguments(op, m, k, n, ours)
        if first is None:
            return None
        row.nbytes = bytes_moved(first, getattr(ours, op)(*first))
        sets = [first] + [linear_arguments(op, m, k, n, ours, seed=s)
                          for s in range(1, input_sets(row.nbytes, l2_bytes))]
    except Exception as exc:
        torch.cuda.empty_cache()
        row.notes[OURS] = one_line(exc)
        return row
    time_all(row, op, getattr(ours, op), sets, sets, backends, clock, cfg)
    return row


def plan_rows(capability: tuple[int, int] = (0, 0)) -> list[tuple]:
    """The rows in the order measured: M = 4096 first (the bandwidth targets), then the
    linear ops (scaled_mm_nvfp4 from compute capability 10.0), then M = 1, then the W4A8
    linear: what a budget cut short loses is the last."""
    big = [(op, m, k, 0) for m, k in shapes() if m == TARGET_M for op in OPS]
    small = [(op, m, k, 0) for m, k in shapes() if m != TARGET_M for op in OPS]
    linear = [(op, m, k, n) for m, k, n in linear_shapes() for op in LINEAR_OPS
              if op != "scaled_mm_nvfp4" or tuple(capability) >= FP4_GEMM_MIN_CC]
    w4a8 = [(op, m, k, n) for m, k, n in w4a8_shapes() for op in W4A8_OPS]
    return big + linear + small + w4a8


def cuda_ops():
    """comfy_kitchen_c.ops, or None (saying why) when the extension was built without CUDA."""
    import comfy_kitchen_c
    from comfy_kitchen_c import _C

    if not _C.HAS_CUDA:
        print(f"comfy_kitchen_c at {comfy_kitchen_c.__file__} was built without CUDA", file=sys.stderr)
        return None
    return comfy_kitchen_c.ops


def worker(path: str, budget_s: float, cfg: Config) -> int:
    import torch

    ours = cuda_ops()
    if ours is None:
        return 1
    deadline = time.monotonic() + budget_s
    backends = backend_status()
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2_bytes = getattr(props, "L2_cache_size", 50 << 20)
    gpu = model_gpu(props.name, (props.major, props.minor))
    predict = load_predictor()
    clock = timing.CudaClock.calibrate()
    with open(path, "a") as out:
        write_record(out, "backends", {"backends": backends})
        write_record(out, "device", {"l2_bytes": l2_bytes, "model_gpu": gpu, "model": predict is not None,
                                     "spin_cycles_per_ms": clock.cycles_per_ms})
        for op, m, k, n in plan_rows((props.major, props.minor)):
            if time.monotonic() > deadline:
                print(f"time budget of {budget_s:.0f} s used up", file=sys.stderr)
                return 0
            row = (measure_linear(op, m, k, n, ours, backends, clock, cfg, l2_bytes) if op in LINEAR_OPS + W4A8_OPS
                   else measure_op(op, m, k, ours, backends, clock, cfg, l2_bytes))
            if row is None:
                continue
            row.model_us = predict_us(predict, op, m, k, n, gpu)
            write_record(out, "row", row)
            print(f"  {op} {row.shape}: ours {row.gpu_us.get(OURS)} us", file=sys.stderr, flush=True)
            torch.cuda.empty_cache()
    return 0
