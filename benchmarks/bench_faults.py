# SPDX-License-Identifier: Apache-2.0
"""What the fault checks cost per op: each checking mode, flight record on and off.

Two measurements:

* hooks ns/op -- ``_C*.check_overhead_ns``: the checks that run around every GPU op
  (csrc/diag/checked.c: flight record written, completion mark offered to the op's last
  kernel or queued separately, fences in modes boundary and op), timed in C around an op with
  the arguments of a typical one (3 tensors [4096, 3072] / [4096, 1], one int), of two kinds:
  one that queues no work (its mark is a separate work: a one-thread kernel on CUDA, as for
  copies and ops ending in cuBLASLt), and one that launches one one-thread kernel carrying
  its mark, as the converted ops' last kernels do (the riding mark: with the record off the
  same kernel is launched with no mark).  The difference between "flight on" and "flight
  off" in launch mode is the flight record's host cost; "flight off, launch" is what remains
  of the checks when the record is off.
* flight record host cost -- the line that matters against issue 4's target (at most 1 us of
  host time per op in launch mode): hooks around the one-kernel op with the flight record on
  minus off, in launch mode, per way the completion is written.  On the emulated device both
  ways are measured (the file's own words; pinned words mirrored into the file, as where the
  OS refuses to register the file, forced with ``refuse_host_mapping``); on CUDA the way this
  machine's OS allows (``_C.flight_marks()["words"]``).
* op us -- a whole small op (``quantize_int8_rowwise`` of [4, 256]) through Python,
  median per call: on the emulated device this is dominated by the emulation of the kernel;
  on a GPU (when present) it is the host time per op, synchronised once at the end.

On the emulated device a separate completion mark is a store, a kernel launch runs the kernel
(emulated threads), and a fence is a query of the emulated stream; on CUDA a separate mark is a
one-thread kernel launch (writing the registered file, or pinned words mirrored into it when
the file cannot be registered), a riding mark is one more argument of the op's kernel, and a
fence is an event record plus polling, so the CUDA rows are the ones that matter for a real GPU.

    python benchmarks/bench_faults.py [--out benchmarks/results/faults_cpu.md]
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("COMFY_KITCHEN_C_FLIGHT_DIR", tempfile.mkdtemp(prefix="ckc-bench-faults-"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import comfy_kitchen_c as ckc  # noqa: E402
from comfy_kitchen_c import _C, faults, ops  # noqa: E402

MODES = list(faults.MODES)  # launch, boundary, op


def set_flight(on: bool) -> None:
    # The ring is already open (open_ring); only whether ops are recorded changes.
    _C.flight_configure(None, on, platform.python_version(), ckc.__version__)


def open_ring(emu) -> None:
    """Opens the process's flight record on its file, as in production (the ring opens at the
    first record; a record opened by set_flight's configure would stay in memory, which a GPU
    registers where it refuses the file)."""
    if emu is not None:
        from comfy_kitchen_c.testing import emulated_device
        with emulated_device():
            ops.quantize_int8_rowwise(torch.randn(1, 16))
    else:
        ops.quantize_int8_rowwise(torch.randn(1, 16, device="cuda"))
    assert faults.record_path() is not None, "the flight record is in memory only: no cost of the file measured"


def hooks_ns(module, device: int, stream: int, iterations: int, repeats: int, one_kernel: bool = False) -> dict:
    rows = {}
    for flight_on in (True, False):
        set_flight(flight_on)
        for mode in MODES:
            samples = [module.check_overhead_ns(iterations, faults.MODES[mode], device, stream, one_kernel)
                       for _ in range(repeats)]
            rows[(flight_on, mode)] = statistics.median(samples)
    set_flight(True)
    return rows


def op_us(device: torch.device, calls: int, repeats: int) -> dict:
    x = torch.randn(4, 256, device=device)
    rows = {}
    for flight_on in (True, False):
        set_flight(flight_on)
        for mode in MODES:
            with ckc.checking(mode):
                ops.quantize_int8_rowwise(x)
                samples = []
                for _ in range(repeats):
                    start = time.perf_counter()
                    for _ in range(calls):
                        ops.quantize_int8_rowwise(x)
                    if device.type == "cuda":
                        torch.cuda.synchronize(device)
                    samples.append((time.perf_counter() - start) / calls * 1e6)
            rows[(flight_on, mode)] = statistics.median(samples)
    set_flight(True)
    return rows


TARGET_NS = 1000  # issue 4: host overhead at most 1 us per op in launch mode


def record_cost_table(costs: list[tuple[str, str, dict]]) -> list[str]:
    """Flight record on minus off, launch mode, per (device, where completions are written), around
    the op whose one kernel carries its mark."""
    out = ["### Flight record: host cost per op whose kernel carries its mark, launch mode (on minus off)",
           "",
           "| device | completion words | on ns | off ns | record cost ns | target ns |", "|---|---|---:|---:|---:|---:|"]
    for device, words, rows in costs:
        on, off = rows[(True, "launch")], rows[(False, "launch")]
        verdict = "within" if on - off <= TARGET_NS else "OVER"
        out.append(f"| {device} | {words} | {on:.0f} | {off:.0f} | {on - off:.0f} | {TARGET_NS} ({verdict}) |")
    return out + [""]


def table(title: str, unit: str, rows: dict, digits: int) -> list[str]:
    out = [f"### {title}", "", f"| flight record | {' | '.join(f'{m} {unit}' for m in MODES)} |",
           "|---|" + "---:|" * len(MODES)]
    for flight_on in (True, False):
        cells = " | ".join(f"{rows[(flight_on, m)]:.{digits}f}" for m in MODES)
        out.append(f"| {'on' if flight_on else 'off'} | {cells} |")
    return out + [""]


def machine() -> str:
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        commit = "?"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs, load average "
            f"{load:.1f} at the start, Python {platform.python_version()}, torch {torch.__version__}, git {commit}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the markdown report here too")
    parser.add_argument("--iterations", type=int, default=100000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    lines = ["# Cost of the fault checks per op", "", machine(), ""]
    get = faults.CHECK.get
    start = time.perf_counter()
    for _ in range(args.iterations):
        get()
    lines += [f"Python side: reading the checking mode for the call (ops._run): "
              f"{(time.perf_counter() - start) / args.iterations * 1e9:.0f} ns per op.", ""]
    try:
        from comfy_kitchen_c import _C_emu
        from comfy_kitchen_c.testing import emulated_device
    except ImportError:
        _C_emu = None
    costs = []
    cuda = torch.cuda.is_available() and _C.HAS_CUDA
    if _C_emu is not None or cuda:
        open_ring(_C_emu)
    if _C_emu is not None:
        for words in ("file", "pinned"):
            _C_emu.refuse_host_mapping(words == "pinned")
            try:
                rows = hooks_ns(_C_emu, 0, 0, args.iterations, args.repeats)
                riding = hooks_ns(_C_emu, 0, 0, args.iterations // 10, args.repeats, one_kernel=True)
            finally:
                _C_emu.refuse_host_mapping(False)
            where = "" if words == "file" else ", completions in pinned words (mirrored)"
            lines += table(f"Emulated device{where}: hooks around a no-work op (separate mark)", "ns", rows, 0)
            lines += table(f"Emulated device{where}: hooks around an op launching one kernel (riding mark)", "ns",
                           riding, 0)
            costs.append(("emulated", words, riding))
        with emulated_device():
            lines += table("Emulated device: quantize_int8_rowwise [4, 256], whole op", "us",
                           op_us(torch.device("cpu"), 50, args.repeats), 1)
    if cuda:
        dev = torch.device("cuda", torch.cuda.current_device())
        stream = torch.cuda.current_stream(dev).cuda_stream
        lines += [f"GPU: {torch.cuda.get_device_name(dev)}", ""]
        rows = hooks_ns(_C, dev.index, stream, args.iterations // 10, args.repeats)
        lines += table("CUDA: hooks around a no-work op (separate mark)", "ns", rows, 0)
        riding = hooks_ns(_C, dev.index, stream, args.iterations // 10, args.repeats, one_kernel=True)
        lines += table("CUDA: hooks around an op launching one kernel (riding mark)", "ns", riding, 0)
        costs.append((torch.cuda.get_device_name(dev), _C.flight_marks()["words"], riding))
        lines += table("CUDA: quantize_int8_rowwise [4, 256], whole op", "us", op_us(dev, 200, args.repeats), 1)
    else:
        lines += ["No CUDA GPU here: the CUDA rows are not measured.", ""]
    lines += record_cost_table(costs)
    report = "\n".join(lines)
    print(report)
    if args.out:
        Path(args.out).write_text(report + "\n")


if __name__ == "__main__":
    main()
