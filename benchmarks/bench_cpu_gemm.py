# SPDX-License-Identifier: Apache-2.0
"""CPU int8_linear side by side: eager, ours with our C GEMM (the one-call op, which
COMFY_KITCHEN_C_CPU_GEMM=ours runs at every row count), ours with torch._int_mm (oneDNN) between
our quantizer and epilogue.  The three alternate in blocks (a warm-up call, then --reps timed
calls), --rounds times, and each value is the median of a name's timed calls; the ratios compare
timings taken side by side.  Inputs: bench_cpu.py's int8_linear arguments (x [M, K] bfloat16, weight [K, K]).

    python benchmarks/bench_cpu_gemm.py --m 1 256 1024 --k 3072 [--threads 1]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from comfy_kitchen.backends.eager import quantization as E  # noqa: E402

import comfy_kitchen_c.linear as L  # noqa: E402
from bench_cpu import LINEAR_ACTS, _linear_args  # noqa: E402


def gemm(rows_from: int):
    """int8_linear with the library GEMM from rows_from rows on."""
    def run(*args):
        saved, L.LIBRARY_GEMM_MIN_ROWS = L.LIBRARY_GEMM_MIN_ROWS, rows_from
        try:
            return L.int8_linear(*args)
        finally:
            L.LIBRARY_GEMM_MIN_ROWS = saved
    return run


def block(fn, args, reps: int) -> list[float]:
    fn(*args)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--m", type=int, nargs="+", default=[1, 256, 1024])
    p.add_argument("--k", type=int, nargs="+", default=[3072])
    p.add_argument("--acts", nargs="+", default=["none", "gelu_tanh", "swiglu"])
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--no-c-gemm", action="store_true", help="leave out our C GEMM (slow at large M)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    calls = {"eager": E.int8_linear, "ours C GEMM": gemm(1 << 62), "ours library": gemm(1)}
    if args.no_c_gemm:
        del calls["ours C GEMM"]
    print(f"torch {torch.__version__}, {args.threads} thread(s), LIBRARY_GEMM_MIN_ROWS = {L.LIBRARY_GEMM_MIN_ROWS}")
    print("| act | M | K = N | eager ms | ours C GEMM ms | ours library ms | eager / C GEMM | eager / library |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for k in args.k:
        for m in args.m:
            x = torch.randn(m, k).to(torch.bfloat16)
            for act in args.acts:
                fn_args = _linear_args(None if act == "none" else act)(x)
                if "ours C GEMM" in calls:
                    c, lib = calls["ours C GEMM"](*fn_args), calls["ours library"](*fn_args)
                    assert torch.equal(c.view(torch.int16), lib.view(torch.int16)), "the GEMMs disagree"
                samples: dict[str, list[float]] = {name: [] for name in calls}
                for _ in range(args.rounds):
                    for name, fn in calls.items():
                        samples[name] += block(fn, fn_args, args.reps)
                med = {name: statistics.median(v) for name, v in samples.items()}
                med.setdefault("ours C GEMM", float("nan"))
                print(f"| {act} | {m} | {k} | {med['eager']:.2f} | {med['ours C GEMM']:.2f} | "
                      f"{med['ours library']:.2f} | {med['eager'] / med['ours C GEMM']:.2f}x | "
                      f"{med['eager'] / med['ours library']:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
