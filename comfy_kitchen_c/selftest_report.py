# SPDX-License-Identifier: Apache-2.0
"""The selftest report's measurements: the header (versions, CPU, GPU and driver), the error
columns (int8/uint8 codes: how many differ and by how much; scales and other floats: the
largest difference relative to eager's largest magnitude) and the timing, in blocks.

Timing in blocks, as benchmarks/bench_cpu.py ``measure``: a warm-up call, then a block of
consecutive calls of one implementation, then a block of the other, alternated for ROUNDS
rounds; each column is the median over its calls.  Calls interleaved one by one charge each
implementation with the other's aftermath (torch's OpenMP workers keep spinning after each
op and take a core from whatever runs next on a 2-core machine), which is how the same op
read 0.95x in one run and 154x in the next.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
import platform
import statistics
import sys
import time

import torch

from . import _C

ROUNDS = 4                  # alternating blocks of ours and eager (the speedup's spread is over them)
BLOCK_S = 0.01              # a block runs for about this long ...
MIN_CALLS, MAX_CALLS = 1, 40  # ... with this many calls (and a warm-up call before each block)


# ---- header -------------------------------------------------------------------------------------

def nvidia_driver() -> str | None:
    """The NVIDIA driver's version ("580.65.06") from NVML, or None (no driver, no NVML)."""
    names = ["nvml.dll"] if sys.platform == "win32" else ["libnvidia-ml.so.1", ctypes.util.find_library("nvidia-ml")]
    for name in filter(None, names):
        try:
            nvml = ctypes.CDLL(name)
        except OSError:
            continue
        if nvml.nvmlInit_v2() != 0:
            return None
        try:
            text = ctypes.create_string_buffer(96)
            return text.value.decode() if nvml.nvmlSystemGetDriverVersion(text, 96) == 0 else None
        finally:
            nvml.nvmlShutdown()
    return None


def _version(module: str) -> str:
    from importlib import metadata
    try:
        return metadata.version(module)
    except metadata.PackageNotFoundError:
        return "not installed"


def header_lines(devices) -> list[str]:
    from . import __version__
    cuda = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU only"
    lines = [f"comfy-kitchen-c {__version__} selftest: every op against comfy_kitchen's eager backend",
             f"  Python {platform.python_version()} ({platform.python_implementation()}), torch {torch.__version__} "
             f"({cuda}), comfy_kitchen {_version('comfy-kitchen')}, comfy-kitchen-c {__version__} "
             f"({os.path.dirname(os.path.abspath(__file__))})",
             f"  CPU: {platform.machine()}, kernels for {_C.cpu_isa()} (this CPU runs {', '.join(_C.cpu_isas())}), "
             f"{torch.get_num_threads()} threads (torch.get_num_threads())"]
    if "cuda" in devices:
        driver = nvidia_driver()
        versions = _C.cuda_versions() if hasattr(_C, "cuda_versions") else None
        api = f"CUDA driver API {versions[0] // 1000}.{versions[0] % 1000 // 10}" if versions else "CUDA driver API ?"
        for index in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(index)
            lines.append(f"  GPU {index}: {p.name}, compute capability {p.major}.{p.minor}, "
                         f"{p.total_memory / 2**30:.1f} GiB; NVIDIA driver {driver or 'unknown'} ({api})")
    else:
        problem = _C.cuda_driver() if _C.HAS_CUDA and hasattr(_C, "cuda_driver") else None
        lines.append("  GPU: none used (" + ("this build has no CUDA kernels" if not _C.HAS_CUDA else
                                             "torch sees no CUDA device") + ")"
                     + (f"; the GPU kernels cannot run here: {problem}" if problem else ""))
    return lines


# ---- differences --------------------------------------------------------------------------------

def _same(o: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    return (o == r) | (o.isnan() & r.isnan())


def differences(ours, ref) -> tuple[str, float]:
    """(codes, float error): codes are the integer outputs (int8 codes, packed FP4 bytes):
    "exact", or how many differ (of how many) and the largest difference; the float error is
    max |ours - eager| / max |eager| over the floating outputs (scales, dequantized values,
    float8 block scales), 0.0 when they are equal (NaN pairs and equal infinities count as
    equal), inf when one side has a NaN or an infinity the other lacks; NaN when there are none."""
    code_count, code_total, code_max = 0, 0, 0
    float_err, floats = 0.0, False
    for o, r in zip(ours, ref):
        if not o.numel():
            continue
        if o.dtype.is_floating_point:
            floats = True
            od, rd = o.double(), r.double()
            equal = _same(od, rd)
            if bool((~equal & ~(od.isfinite() & rd.isfinite())).any()):
                return _codes(code_count, code_total, code_max), math.inf
            scale = float(rd[rd.isfinite()].abs().max()) if bool(rd.isfinite().any()) else 0.0
            d = float(torch.where(equal, 0.0, (od - rd).abs()).max())
            float_err = max(float_err, d / scale if scale > 0 else (0.0 if d == 0 else math.inf))
        else:
            diff = (o.int() - r.int()).abs()
            code_count += int((diff > 0).sum())
            code_total += diff.numel()
            code_max = max(code_max, int(diff.max()))
    return _codes(code_count, code_total, code_max), (float_err if floats else math.nan)


def _codes(count: int, total: int, largest: int) -> str:
    if total == 0:
        return "-"
    if count == 0:
        return "exact"
    return f"{count}/{total} off, max {largest}"


# ---- timing -------------------------------------------------------------------------------------

def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _block(fn, args: tuple, device: torch.device, calls: int, warm_up: bool = True) -> list[float]:
    """A warm-up call, then calls timed one by one (ms)."""
    if warm_up:
        fn(*args)
        _sync(device)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(*args)
        _sync(device)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def time_blocks(ours_fn, eager_fn, args: tuple, device: torch.device) -> tuple[float, float, float, float]:
    """(ours ms, eager ms, lowest and highest round's speedup): the medians per call of each
    implementation over ROUNDS alternating rounds of blocks (the caller has run both once already;
    one more call of each sizes the blocks), and the spread of the per-round speedups (a round's
    eager median / its ours median).  The column is the median of the rounds, not one block: a
    block that a neighbour's load or torch's spinning OpenMP workers hit moves the spread, not
    the median, which is how the same op read 999x in one run and 1.4x in the next."""
    calls = {}
    for name, fn in (("eager", eager_fn), ("ours", ours_fn)):
        one = _block(fn, args, device, 1, warm_up=False)[0] / 1e3
        calls[name] = max(MIN_CALLS, min(MAX_CALLS, math.ceil(BLOCK_S / max(one, 1e-6))))
    samples = {"ours": [], "eager": []}
    rounds = []
    for _ in range(ROUNDS):  # a block's first call warms it up (the other one ran in between)
        o = _block(ours_fn, args, device, calls["ours"])
        e = _block(eager_fn, args, device, calls["eager"])
        samples["ours"] += o
        samples["eager"] += e
        rounds.append(statistics.median(e) / max(statistics.median(o), 1e-9))
    return statistics.median(samples["ours"]), statistics.median(samples["eager"]), min(rounds), max(rounds)


# ---- a busy machine -----------------------------------------------------------------------------

DISTURBED = 2.0     # a row whose rounds' speedups spread wider than this (highest / lowest) was disturbed
OTHER_LOAD = 0.10   # other processes' share of all cores above which the times are not this machine's alone


class OtherLoad:
    """CPU time other processes used while the selftest ran, as a share of all cores (Linux: /proc/stat
    less this process's own time; None elsewhere); benchmarks/bench_cpu.py measures with it too."""

    def __init__(self):
        self.start = self._sample()

    @staticmethod
    def _sample():
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
            hz = os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, AttributeError):
            return None
        idle = fields[3] + fields[4]  # idle + iowait
        own = os.times()
        return (sum(fields[:8]) - idle) / hz, sum(fields[:8]) / hz, own.user + own.system

    def share(self) -> float | None:
        end = self._sample()
        if self.start is None or end is None:
            return None
        busy, total, own = (e - s for e, s in zip(end, self.start))
        return max(busy - own, 0.0) / total if total > 0 else None


def busy_note(spreads: list[tuple[float, float]], other: float | None) -> str | None:
    """What to say below the table when the times were not the machine's alone: rows whose rounds
    spread over DISTURBED, other processes' share of the cores; None on a quiet run."""
    timed = [(lo, hi) for lo, hi in spreads if lo == lo and hi == hi and lo > 0]
    disturbed = sum(1 for lo, hi in timed if hi / lo > DISTURBED)
    busy = other is not None and other > OTHER_LOAD
    if not disturbed and not busy:
        return None
    parts = []
    if busy:
        parts.append(f"other processes used {other:.0%} of all cores")
    if disturbed:
        parts.append(f"{disturbed} of {len(timed)} rows' rounds spread over {DISTURBED:g}x")
    policy = os.environ.get("OMP_WAIT_POLICY")
    advice = ("" if policy and policy.lower() == "passive" else
              "; or set OMP_WAIT_POLICY=PASSIVE before Python starts (torch's OpenMP threads then sleep between ops "
              "instead of spinning on the cores the other side needs)")
    return (f"The machine was busy while timing ({', '.join(parts)}): the speedups measure the load, not \"c\"; "
            f"run the selftest again on an idle machine{advice}.  benchmarks/ has the measured ratios.")
