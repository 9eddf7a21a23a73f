# SPDX-License-Identifier: Apache-2.0
"""Host time per call on tiny inputs: what each op costs the calling thread apart from its kernel.

On a GPU a call's kernels run asynchronously, and a DiT-sized quantization kernel takes about
10 us on an H200 (4096 x 3072 bfloat16 is 38 MB of traffic at ~4 TB/s).  When the Python wrapper
and the C launcher take longer than that, back-to-back calls leave the GPU waiting, and CUDA
events around a call measure the host time instead of the kernel.  This benchmark measures that
host time where it can be measured without a GPU: each op on a tiny CPU tensor ([4, 256]
bfloat16, and [1, 4, 256] for the ops that take activations, as ComfyUI passes them), whose
kernel takes well under a microsecond, so the time per call is the argument checks, the output
allocations, the DLPack capsules, the flight record and the call into C.  The GPU path runs the
same Python and the same C entry, plus the device guard and the launches.

Columns: ours (``comfy_kitchen_c.ops.<op>``), eager (comfy_kitchen's eager backend, called
directly), registry (comfy_kitchen's public function with "c" first: its dispatch, our call
rule, then our op, as ComfyUI calls it; for the ops comfy_kitchen exports) and ours in units of
one ``torch.empty`` (allocating one output: a yardstick of this
machine's speed at torch calls, stable where absolute times drift).  Blocks of the three alternate,
and each value is the fastest of ``--blocks`` blocks of ``--calls`` consecutive calls, in microseconds per call: the
cost itself, since other load on the machine only ever adds to a block's time (on the 2-core
development VM, block medians moved by up to 50% between runs; the fastest block by a few %).

With ``--emulated`` the GPU path is timed instead: every call runs on the emulated device
(``testing.emulated_device()``) with its kernels and GEMMs admitted but not run
(``testing.kernels_skipped()``), so a call's time is what it costs the host on a GPU: the
wrapper, the device guard, the C launchers and the device seam.  The yardstick is then one
``torch.empty`` plus one kernel launch through the same seam (``check_overhead_ns``: an op
that launches one one-thread kernel), the least any GPU op can cost; issue 22 asks a
quantizer call through the registry for at most 3 of them and an ``int8_linear`` call for 5.
The eager column is left out there (eager runs on the CPU: no GPU path to compare).

    python benchmarks/bench_host.py [--emulated] [--out benchmarks/results/host_cpu.md]
"""
from __future__ import annotations

import argparse
import contextlib
import platform
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import comfy_kitchen  # noqa: E402
import torch  # noqa: E402
from comfy_kitchen.backends.eager import quantization as E  # noqa: E402

import comfy_kitchen_c  # noqa: E402
import comfy_kitchen_c.ops as C  # noqa: E402
from comfy_kitchen_c import faults, testing  # noqa: E402
from bench_cpu import OPS  # noqa: E402

ROWS, K, N = 4, 256, 256


def block_us(fn: Callable, args: tuple, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter() - start) / calls * 1e6


def us_per_call(calls_to_time: dict[str, tuple[Callable, tuple]], calls: int, blocks: int) -> dict[str, float]:
    """{name: us per call}: blocks of the named calls alternate, so that each ratio compares
    timings taken side by side (the VM's speed drifts between runs)."""
    for fn, args in calls_to_time.values():
        block_us(fn, args, calls // 10 + 1)
    samples: dict[str, list[float]] = {name: [] for name in calls_to_time}
    for _ in range(blocks):
        for name, (fn, args) in calls_to_time.items():
            samples[name].append(block_us(fn, args, calls))
    return {name: min(values) for name, values in samples.items()}


def cases() -> list[tuple[str, Callable, Callable, tuple]]:
    """(label, ours, eager, args): every op of the CPU benchmark on [ROWS, K], the activation ops
    also on [1, ROWS, K], and int8_linear."""
    torch.manual_seed(0)
    x = torch.randn(ROWS, K, dtype=torch.bfloat16)
    out = [(op.name, op.ours, op.eager, op.make_args(x)) for op in OPS]
    x3 = x.view(1, ROWS, K)
    for name in ("quantize_int8_rowwise", "quantize_and_rotate_rowwise"):
        op = next(o for o in OPS if o.name == name)
        out.append((f"{name} (3-D x)", op.ours, op.eager, op.make_args(x3)))
    weight, weight_scale = C.quantize_int8_rowwise(torch.randn(N, K, dtype=torch.bfloat16))
    bias = torch.randn(N, dtype=torch.bfloat16)
    out.append(("int8_linear (3-D x, bias)", C.int8_linear, E.int8_linear, (x3, weight, weight_scale, bias)))
    # From LIBRARY_GEMM_MIN_ROWS rows the CPU GEMM is torch._int_mm between two C calls
    # (COMFY_KITCHEN_C_CPU_GEMM=ours: the one-call op, for comparison).
    x16 = torch.randn(1, 16, K, dtype=torch.bfloat16)
    out.append(("int8_linear (16 rows, bias)", C.int8_linear, E.int8_linear, (x16, weight, weight_scale, bias)))
    # K and N not multiples of 16: on the GPU path the GEMM takes a zero-padded copy of the weight
    # (made once per weight, comfy_kitchen_c/weight_cache.py).
    odd_w, odd_scale = C.quantize_int8_rowwise(torch.randn(N - 6, K - 6, dtype=torch.bfloat16))
    x_odd = torch.randn(1, 16, K - 6, dtype=torch.bfloat16)  # 16 rows: the GEMM (up to 8 take the GEMV)
    out.append((f"int8_linear (16 rows, weight {N - 6} x {K - 6})", C.int8_linear, E.int8_linear,
                (x_odd, odd_w, odd_scale)))
    return out


def launch_yardstick():
    """One torch.empty and one launch of a one-thread kernel through the emulated device's seam."""
    emu = testing._emu()
    mode = faults.MODES["launch"]
    return lambda: (torch.empty((ROWS, K), dtype=torch.int8), emu.check_overhead_ns(1, mode, 0, 0, True))


FLOOR = "bench_floor"


@contextlib.contextmanager
def dispatch_floor(name: str, result):
    """comfy_kitchen's public function `name` served first by a backend whose op returns `result`
    at once (what ours returned): a call then costs comfy_kitchen's own dispatch (its kwargs,
    the backend walk, the rule, any post-processing of the result), the floor under any
    backend's registry column."""
    from comfy_kitchen.constraints import FunctionConstraints, ValidationResult
    from comfy_kitchen.registry import registry

    module = types.SimpleNamespace(**{name: lambda *a, **k: result})
    rule = FunctionConstraints(params={}, default_devices=frozenset({"cpu", "cuda"}),
                               call_rules=(lambda kwargs: ValidationResult.ok(),))
    registry.register(FLOOR, module, {name: rule})
    registry.enable(FLOOR)  # disabled after the previous case
    before = list(registry._priority)
    registry.set_priority([FLOOR, *before])
    try:
        yield
    finally:
        registry.set_priority(before)
        registry.disable(FLOOR)


def floor_us(public, ours, op_args, calls: int, blocks: int) -> float | None:
    """us per call of public through dispatch_floor (None where comfy_kitchen calls no backend
    for it: a torch.ops custom op routes through torch's dispatcher first, and still lands in
    the registry, so it is timed too)."""
    result = ours(*op_args)
    with dispatch_floor(ours.__name__, result):
        try:
            public(*op_args)
        except Exception:  # noqa: BLE001 - a wrapper that checks the result's type: no floor
            return None
        return us_per_call({"floor": (public, op_args)}, calls, blocks)["floor"]


def table(args, yardstick, yard_name: str, eager: bool) -> list[str]:
    """The markdown rows: each case's us per call, and in units of the yardstick."""
    lines = ["| op | ours us |" + (" eager us | eager / ours |" if eager else "")
             + f" ours / {yard_name} | registry us | registry / {yard_name} |"
             + ("" if eager else " comfy_kitchen's dispatch floor us |"),
             "|---|---:|" + ("---:|---:|" if eager else "") + "---:|---:|---:|" + ("" if eager else "---:|")]
    for label, ours, eager_fn, op_args in cases():
        if args.only and not any(text in label for text in args.only):
            continue
        public = getattr(comfy_kitchen, ours.__name__, None)
        if not eager:
            try:
                ours(*op_args)
            except comfy_kitchen_c.KitchenError:  # an op served on the CPU only (w4a8_int8_linear)
                lines.append(f"| {label} | no GPU path | - | - | - | - |")
                print(lines[-1], flush=True)
                continue
        timed = {"ours": (ours, op_args), "yard": yardstick}
        if eager:
            timed["eager"] = (eager_fn, op_args)
        if public is not None:
            timed["registry"] = (public, op_args)
        us = us_per_call(timed, args.calls, args.blocks)
        reg = (f"{us['registry']:.1f} | {us['registry'] / us['yard']:.1f}" if public is not None else "- | -")
        cells = f" {us['eager']:.1f} | {us['eager'] / us['ours']:.2f} |" if eager else ""
        floor = ""
        if not eager:
            f = None if public is None else floor_us(public, ours, op_args, args.calls, args.blocks)
            floor = " - |" if f is None else f" {f:.1f} |"
        lines.append(f"| {label} | {us['ours']:.1f} |{cells} {us['ours'] / us['yard']:.1f} | {reg} |{floor}")
        print(lines[-1], flush=True)
    lines.append(f"| ({yard_name}) | {us['yard']:.1f} |" + (" - | - |" if eager else "") + " 1.0 | - | - |"
                 + ("" if eager else " - |"))
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--blocks", type=int, default=7)
    parser.add_argument("--out", type=Path, help="also write the table to this markdown file")
    parser.add_argument("--emulated", action="store_true",
                        help="time the GPU path on the emulated device, kernels not run (see above)")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="time only the cases whose label contains TEXT (repeatable)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # tiny inputs: no worker wake-ups in either implementation
    comfy_kitchen_c.activate()
    if args.emulated:
        with testing.emulated_device(), testing.kernels_skipped():
            lines = table(args, (launch_yardstick(), ()), "one torch.empty + one launch", eager=False)
    else:
        lines = table(args, (lambda: torch.empty((ROWS, K), dtype=torch.int8), ()), "one torch.empty", eager=True)
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                         cwd=Path(__file__).parent).stdout.strip()
    where = ("the GPU path on the emulated device, kernels not run (`python benchmarks/bench_host.py --emulated`)"
             if args.emulated else "CPU tensors (`python benchmarks/bench_host.py`)")
    report = "\n".join([
        f"Host time per call on [{ROWS}, {K}] bfloat16 tensors, {where}, "
        f"git {git}, Python {platform.python_version()}, torch {torch.__version__}, 1 torch thread, "
        f"fastest of {args.blocks} blocks of {args.calls} calls (blocks of each column and the yardstick "
        "alternating).",
        "", *lines, ""])
    print(report)
    if args.out:
        args.out.write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
