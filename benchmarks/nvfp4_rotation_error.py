# SPDX-License-Identifier: Apache-2.0
"""NVFP4 linear with and without the ConvRot rotation: error on activations with outlier
channels, and the cost of the fused rotation in the quantizer.

Error table.  For each shape (M tokens, K in-features, N out-features) and outlier factor:

* x [M, K] is randn with a few channels (OUTLIER_CHANNELS of K, chosen at random) multiplied
  by factors drawn uniformly from [factor / 5, factor] (factor 100: channels 20-100x larger,
  as the massive activations of DiT blocks), or none; bfloat16.  W [N, K] is randn / sqrt(K),
  bfloat16.
* reference: ``torch.nn.functional.linear(x, W)`` in bfloat16 (the unquantized model).
* unrotated: ``nvfp4_linear(x, *quantize_nvfp4(W))``; rotated G: ``nvfp4_linear(x,
  *quantize_and_rotate_nvfp4(W, G), convrot=True, convrot_groupsize=G)``.  Weight per-tensor
  scales are amax / (448 * 6) of the weight as quantized (rotated or not).
* the number is the relative Frobenius error ||y - reference|| / ||reference||.

Timing table (CPU, and CUDA when present): quantize_and_rotate_nvfp4 against quantize_nvfp4
(the same kernel without the rotation) and against the unfused composition
quantize_nvfp4(rotate_int8_convrot_weight(x, G)); median of --repeats calls after a warm-up.

    python benchmarks/nvfp4_rotation_error.py            # writes benchmarks/results/nvfp4_rotation_error.md
    python benchmarks/nvfp4_rotation_error.py --quick    # small shapes, prints only
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import torch

import comfy_kitchen_c
from comfy_kitchen_c import ops

GROUPS = (16, 64, 256)
OUTLIER_FACTORS = (0, 20, 100)
OUTLIER_CHANNELS = 1 / 256  # fraction of K
SHAPES = [(256, 3072, 3072), (256, 3072, 12288), (256, 12288, 3072)]
QUICK_SHAPES = [(64, 1024, 512)]
TIMING_SHAPES = [(4096, 3072), (4096, 12288)]
QUICK_TIMING_SHAPES = [(512, 1024)]
RESULTS = Path(__file__).parent / "results" / "nvfp4_rotation_error.md"


def activations(m: int, k: int, factor: float, device: str, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g)
    if factor:
        channels = torch.randperm(k, generator=g)[: max(1, round(k * OUTLIER_CHANNELS))]
        scale = factor / 5 + torch.rand(channels.numel(), generator=g) * (factor - factor / 5)
        x[:, channels] *= scale
    return x.to(device=device, dtype=torch.bfloat16)


def weight(n: int, k: int, device: str, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, k, generator=g) / k**0.5).to(device=device, dtype=torch.bfloat16)


def quantized_weight(w: torch.Tensor, group: int) -> tuple:
    rotated = ops.rotate_int8_convrot_weight(w, group) if group else w
    pts = rotated.abs().amax().float() / ops.NVFP4_RANGE
    qw, sw = ops.quantize_and_rotate_nvfp4(w, pts, group) if group else ops.quantize_nvfp4(w, pts)
    return qw, pts, sw


def relative_error(y: torch.Tensor, ref: torch.Tensor) -> float:
    return float((y.double() - ref.double()).norm() / ref.double().norm())


def error_rows(shapes, device: str) -> list[list[str]]:
    rows = []
    for m, k, n in shapes:
        w = weight(n, k, device)
        weights = {g: quantized_weight(w, g) for g in (0, *GROUPS)}
        for factor in OUTLIER_FACTORS:
            x = activations(m, k, factor, device)
            ref = torch.nn.functional.linear(x, w)
            errors = [relative_error(ops.nvfp4_linear(x, *weights[0]), ref)]
            for g in GROUPS:
                y = ops.nvfp4_linear(x, *weights[g], convrot=True, convrot_groupsize=g)
                errors.append(relative_error(y, ref))
            best = min(range(len(errors)), key=errors.__getitem__)
            cells = [f"**{e:.4f}**" if i == best else f"{e:.4f}" for i, e in enumerate(errors)]
            rows.append([device, f"{m}x{k}x{n}", f"{factor}x" if factor else "none", *cells])
            print(" | ".join(rows[-1]), flush=True)
    return rows


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def median_ms(fn, repeats: int, device: str) -> float:
    fn()
    _sync(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def timing_rows(shapes, device: str, repeats: int) -> list[list[str]]:
    rows = []
    for m, k in shapes:
        x = activations(m, k, 100, device)
        pts = x.abs().amax().float() * 16 / ops.NVFP4_RANGE
        plain = median_ms(lambda: ops.quantize_nvfp4(x, pts), repeats, device)
        for g in GROUPS:
            fused = median_ms(lambda: ops.quantize_and_rotate_nvfp4(x, pts, g), repeats, device)
            unfused = median_ms(lambda: ops.quantize_nvfp4(ops.rotate_int8_convrot_weight(x, g), pts),
                                repeats, device)
            rows.append([device, f"{m}x{k}", str(g), f"{plain:.3f}", f"{fused:.3f}", f"{unfused:.3f}",
                         f"{fused / plain:.2f}", f"{unfused / fused:.2f}"])
            print(" | ".join(rows[-1]), flush=True)
    return rows


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


ERROR_HEADER = ["device", "M x K x N", "outliers", "unrotated", *(f"rotated G={g}" for g in GROUPS)]
TIMING_HEADER = ["device", "M x K", "G", "quantize_nvfp4 ms", "fused ms", "rotate + quantize ms",
                 "fused / plain", "unfused / fused"]


def summary(rows: list[list[str]]) -> str:
    """How often each variant had the lowest error, per outlier setting."""
    lines = []
    for factor in sorted({r[2] for r in rows}, key=lambda f: (f != "none", len(f), f)):
        subset = [r for r in rows if r[2] == factor]
        wins = [sum(c.startswith("**") for c in col) for col in zip(*(r[3:] for r in subset))]
        named = ", ".join(f"{h} {w}" for h, w in zip(ERROR_HEADER[3:], wins) if w)
        lines.append(f"- outliers {factor}: lowest error in {len(subset)} cases: {named}")
    return "\n".join(lines)


def report(error: list[list[str]], timing: list[list[str]], repeats: int, load: str) -> str:
    return f"""# NVFP4 linear: error with and without the ConvRot rotation

Generated by `python benchmarks/nvfp4_rotation_error.py` (see its docstring for the exact
inputs). Machine: {platform.processor() or platform.machine()}, torch {torch.__version__},
{torch.get_num_threads()} CPU threads, comfy_kitchen_c CPU kernels `{comfy_kitchen_c._C.cpu_isa()}`,
load average {load} when the timings started (a busy machine slows all columns alike; compare ratios).

## Relative Frobenius error against the bfloat16 linear

x: randn with {OUTLIER_CHANNELS * 100:.2f}% of channels scaled by factor/5..factor; W: randn / sqrt(K).
The lowest error of each row is bold.

{table(ERROR_HEADER, error)}

{summary(error)}

How to read it: NVFP4 already gives every 16 values their own e4m3 scale, so an outlier
coarsens only its own block (its 15 neighbours are small next to it and mostly round to 0,
but they also contribute little to the output). The rotation spreads the outlier over its
group of G values (G/16 blocks), which raises the scale of all of them; the energy it moves
is the same, so it cannot lower the outlier's own error, and the group's small values are
still crushed by the larger scale. Rotation pays off where one scale covers many values (the
int8 row-wise ConvRot path), much less where scales are per 16 values.

## Cost of the fused rotation (bfloat16 x, median of {repeats} calls)

"fused" is quantize_and_rotate_nvfp4; "rotate + quantize" is the unfused composition it equals
bit for bit.

{table(TIMING_HEADER, timing)}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes; print only, write nothing")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() and comfy_kitchen_c._C.HAS_CUDA else [])
    error, timing = [], []
    for device in devices:
        error += error_rows(QUICK_SHAPES if args.quick else SHAPES, device)
    load = f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "unknown"
    for device in devices:
        timing += timing_rows(QUICK_TIMING_SHAPES if args.quick else TIMING_SHAPES, device, args.repeats)
    text = report(error, timing, args.repeats, load)
    if args.quick:
        print(text)
        return
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text)
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
