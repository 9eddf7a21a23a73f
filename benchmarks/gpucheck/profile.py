# SPDX-License-Identifier: Apache-2.0
"""The profile worker (step e, a subprocess like the benchmark): per kernel GPU times from
torch.profiler, for every row's implementations (ours, comfy_kitchen's cuda and triton, the
device copy).

One profiler session per shape covers every op and implementation at that shape: each makes
PROFILE_CALLS calls and synchronizes inside a record_function range of its own, so every
GPU event that falls inside the range (the profiler puts GPU and host events on one clock)
is that implementation's work.  Per call: each kernel, memcpy and memset with its count and
GPU microseconds."""
from __future__ import annotations

import re
import sys
import time
from collections import defaultdict

from . import workload
from .records import BACKENDS, COPY, OURS, Kernels, write_record
from .workload import (linear_arguments, linear_shapes, one_line, op_arguments, OPS, LINEAR_OPS,
                       shapes, their_implementation, backend_status)

PROFILE_CALLS = 3
WARMUP_CALLS = 2
RANGE_PREFIX = "gpu_check|"
KERNEL_NAME_CHARS = 64


def range_name(op: str, impl: str) -> str:
    return f"{RANGE_PREFIX}{op}|{impl}"


def attribute(events, calls: int) -> dict[tuple[str, str], list[list]]:
    """{(op, impl): [[name, count per call, us per call], ...], the most time first} from the
    profiler's events (name, device_type, time_range, is_user_annotation): the GPU events
    inside each of our ranges on the host's timeline."""
    from torch.autograd import DeviceType

    ranges = [e for e in events if e.device_type == DeviceType.CPU and e.name.startswith(RANGE_PREFIX)]
    gpu = [e for e in events if e.device_type != DeviceType.CPU and not e.name.startswith(RANGE_PREFIX)
           and not getattr(e, "is_user_annotation", False)]
    out = {}
    for r in ranges:
        _, op, impl = r.name.split("|", 2)
        totals: dict[str, list] = defaultdict(lambda: [0, 0.0])
        for e in gpu:
            if r.time_range.start <= e.time_range.start and e.time_range.end <= r.time_range.end:
                totals[e.name][0] += 1
                totals[e.name][1] += e.time_range.end - e.time_range.start
        out[(op, impl)] = sorted(([name, count / calls, us / calls] for name, (count, us) in totals.items()),
                                 key=lambda entry: -entry[2])
    return out


def argument_list_start(name: str) -> int:
    """Where the parenthesized group that ends name (ending with ")") opens; -1 when it never does."""
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            return i
    return -1


def short_kernel_name(name: str) -> str:
    """A kernel's name without its return type, argument list and namespaces, cut in the
    middle when longer than KERNEL_NAME_CHARS (cuBLASLt's and CUTLASS's run to hundreds of
    characters).  Memcpy and memset names ("Memcpy DtoD (Device -> Device)") keep their
    parenthesized part, which follows a space where an argument list does not."""
    short = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    start = argument_list_start(short) if short.endswith(")") else -1
    if start > 0 and short[start - 1] != " ":
        short = short[:start]
    short = re.sub(r"\b[A-Za-z_]\w*::", "", short)
    if len(short) > KERNEL_NAME_CHARS:
        head = KERNEL_NAME_CHARS * 2 // 3
        short = short[:head] + "..." + short[len(short) - (KERNEL_NAME_CHARS - head - 3):]
    return short


def warm_up(calls: list[tuple[str, str, object]], sync) -> tuple[list, dict]:
    """The calls whose warm-up ran, and {(op, impl): why} for those whose warm-up raised
    (triton's quantize_nvfp4 does not compile for sm_90, for one): one implementation that
    cannot run leaves the others of its group profiled."""
    kept, failed = [], {}
    for op, impl, call in calls:
        try:
            for i in range(WARMUP_CALLS):
                call(i)
            sync()
            kept.append((op, impl, call))
        except Exception as exc:
            failed[(op, impl)] = one_line(exc)
    return kept, failed


def profile_group(calls: list[tuple[str, str, object]]) -> tuple[dict, str | None, dict]:
    """calls: (op, impl, call(i)); one profiler session over those whose warm-up ran.
    Returns the kernels per (op, impl), why the session failed (None if it did not), and
    why each dropped call was dropped."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    gpu = workload.DEVICE == "cuda"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    calls, dropped = warm_up(calls, sync)
    try:
        with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])) as prof:
            for op, impl, call in calls:
                with record_function(range_name(op, impl)):
                    for i in range(PROFILE_CALLS):
                        call(i)
                    sync()
        return attribute(prof.events(), PROFILE_CALLS), None, dropped
    except Exception as exc:
        return {}, one_line(exc), dropped


def implementations(op: str, our_args: tuple, their_args: tuple, ours, backends: dict, nbytes: int):
    """(impl, call(i) or None, note) for ours, each backend and the copy."""
    import torch

    out = [(OURS, lambda i: getattr(ours, op)(*our_args), None)]
    for b in BACKENDS:
        try:
            impl, note = their_implementation(backends, b, op, their_args)
        except Exception as exc:
            impl, note = None, one_line(exc)
        out.append((b, (lambda i, f=impl: f(*their_args)) if impl else None, note))
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device=workload.DEVICE)
    dst = torch.empty_like(src)
    out.append((COPY, lambda i: dst.copy_(src), None))
    return out


def group_items(shape: tuple, ops: tuple, ours, backends: dict) -> tuple[list, list[Kernels]]:
    """The calls of every op at one shape, and notes for what cannot be called."""
    import torch

    from .workload import bytes_moved

    m, k, n = shape
    calls, notes = [], []
    for op in ops:
        try:
            if op in LINEAR_OPS:
                args = linear_arguments(op, m, k, n, ours)
                if args is None:
                    continue
                our_args = their_args = args
            else:
                x = torch.randn(m, k, device=workload.DEVICE, dtype=torch.bfloat16)
                our_args, their_args = op_arguments(ours)[op](x)
            nbytes = bytes_moved(our_args, getattr(ours, op)(*our_args))
        except Exception as exc:
            notes.append(Kernels(op, m, k, n, OURS, [], one_line(exc)))
            continue
        for impl, call, note in implementations(op, our_args, their_args, ours, backends, nbytes):
            if call is None:
                if note:
                    notes.append(Kernels(op, m, k, n, impl, [], note))
                continue
            calls.append((op, impl, call))
    return calls, notes


def worker(path: str, budget_s: float) -> int:
    import torch

    from .bench import cuda_ops

    ours = cuda_ops()
    if ours is None:
        return 1
    deadline = time.monotonic() + budget_s
    backends = backend_status()
    groups = [((m, k, 0), OPS) for m, k in shapes()] + [(s, LINEAR_OPS) for s in linear_shapes()]
    with open(path, "a") as out:
        for shape, ops in groups:
            if time.monotonic() > deadline:
                print(f"time budget of {budget_s:.0f} s used up", file=sys.stderr)
                return 0
            calls, notes = group_items(shape, ops, ours, backends)
            kernels, failure, dropped = profile_group(calls)
            m, k, n = shape
            for op, impl, _ in calls:
                if (op, impl) in dropped:
                    notes.append(Kernels(op, m, k, n, impl, [], dropped[(op, impl)]))
                elif failure:
                    notes.append(Kernels(op, m, k, n, impl, [], failure))
                elif (op, impl) in kernels:
                    write_record(out, "kernels", Kernels(op, m, k, n, impl, kernels[(op, impl)]))
            for item in notes:
                write_record(out, "kernels", item)
            print(f"  profiled {'x'.join(map(str, shape))}", file=sys.stderr, flush=True)
            del calls
            torch.cuda.empty_cache()
    return 0
