# SPDX-License-Identifier: Apache-2.0
"""CPU benchmark of quantize_w4a8_int8_weight: comfy_kitchen_c.ops against comfy_kitchen's eager
backend, side by side in one run, per form (the 4-bit codebook form, ComfyUI's default; 6-bit with
the scale search; stochastic rounding; the uniform and asymmetric 4-bit forms), weight shape
(N x K, bfloat16) and torch thread count (1 and all).

Each cell is the median of --repeats alternating pairs (ours, then eager, each one call after a
warm-up of both), wall clock in one process: the ratio eager / ours is what the issue's target
(at least 2x eager for a quantizer) is about; absolute times depend on the machine.

    python benchmarks/bench_w4a8_quant.py --out benchmarks/results/w4a8_quant_cpu.md
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

import torch
from comfy_kitchen.backends.eager import w4a8_int8 as EW

import comfy_kitchen_c.ops as C

FORMS = [("codebook (default)", {}), ("6-bit, scale search", {"bits": 6}),
         ("codebook, stochastic", {"stochastic_rounding": 7}), ("uniform", {"codebook": False}),
         ("asymmetric", {"symmetric": False})]
SHAPES = [(3072, 3072), (14336, 3072)]


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def measure(w: torch.Tensor, kw: dict, repeats: int) -> tuple[float, float]:
    ours, eager = (lambda: C.quantize_w4a8_int8_weight(w, **kw)), (lambda: EW.quantize_w4a8_int8_weight(w, **kw))
    ours()
    eager()
    pairs = [(timed(ours), timed(eager)) for _ in range(repeats)]
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def git_head() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--large-forms", type=int, default=1, help="forms measured at the large shape (default: the first)")
    p.add_argument("--out", help="also write the report here")
    args = p.parse_args(argv)
    threads = sorted({1, os.cpu_count() or 1})
    lines = [f"quantize_w4a8_int8_weight on the CPU, bfloat16 weights N x K, git {git_head()}, "
             f"{platform.processor() or platform.machine()}, torch {torch.__version__}; medians of {args.repeats} "
             "alternating pairs, wall clock.", "",
             "| form | N x K | threads | ours s | eager s | eager / ours |", "|---|---|---:|---:|---:|---:|"]
    for n, k in SHAPES:
        w = (torch.randn(n, k, generator=torch.Generator().manual_seed(n)) * 0.02).to(torch.bfloat16)
        forms = FORMS if (n, k) == SHAPES[0] else FORMS[:args.large_forms]
        for name, kw in forms:
            for t in threads:
                torch.set_num_threads(t)
                ours, eager = measure(w, kw, args.repeats if (n, k) == SHAPES[0] else 1)
                lines.append(f"| {name} | {n} x {k} | {t} | {ours:.3f} | {eager:.3f} | {eager / ours:.2f} |")
                print(lines[-1], file=sys.stderr, flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
