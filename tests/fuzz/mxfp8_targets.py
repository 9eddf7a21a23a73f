# SPDX-License-Identifier: Apache-2.0
"""Fuzz targets of the MXFP8 ops with eager's results as the oracle: quantize_mxfp8 and
dequantize_mxfp8 bit for bit (FP8 codes as bytes, NaN codes of either sign matching, E8M0 scales
as bytes); scaled_mm_mxfp8 within docs/ops.md's bound of its definition (eager's torch scaled_mm
refuses the CPU), as scaled_mm_nvfp4."""
from __future__ import annotations

import torch
from comfy_kitchen.backends.eager import quantization as E

from comfy_kitchen_c import mxfp8
from draw import Draw
from fp8_targets import compare_fp8
from linear_targets import _eps, _free_beyond_range
import oracle


def make_quantize(d: Draw) -> dict:
    pad = d.chance(0.4)
    cols = d.extent(70) if pad else d.multiple(32, 3)
    args = {"x": d.layout(d.values((d.extent(40), cols), d.float_dtype(0)))}
    if pad or d.chance(0.3):
        args["pad_32x"] = pad
    return args


def scale_bytes(d: Draw, rows: int, cols: int, moderate: float = 0.7) -> torch.Tensor:
    """A swizzled E8M0 scale buffer for rows x cols codes: random bytes (0 and 255 among them),
    mostly (always for the GEMM) scales near 1 (codes 117..136)."""
    r, c = mxfp8._scale_shape(rows, cols)
    b = d.codes((r, c), torch.uint8)
    if d.chance(moderate):
        b = (b % 20 + 117).to(torch.uint8)
    return b.view(torch.float8_e8m0fnu)


def make_dequantize(d: Draw) -> dict:
    rows, cols = d.extent(40), d.multiple(32, 3)
    args = {"qx": d.layout(d.codes((rows, cols), torch.uint8)).view(torch.float8_e4m3fn),
            "block_scales": scale_bytes(d, rows, cols)}
    if d.chance(0.6):
        args["output_type"] = d.pick((None, torch.float32, torch.float16, torch.bfloat16))  # None: eager's float32
    return args


def compare_quantized(ours, ref, a) -> None:
    oracle.same_form(ours, ref)
    compare_fp8(ours[0], ref[0], a)
    oracle.bits_equal(ours[1].view(torch.uint8), ref[1].view(torch.uint8), "scales")


def make_scaled_mm(d: Draw) -> dict:
    m, n, k = d.extent(20), d.extent(20), d.multiple(32, 3) or 32
    args = {"a": d.codes((m, k), torch.uint8).view(torch.float8_e4m3fn),
            "b": d.codes((n, k), torch.uint8).view(torch.float8_e4m3fn),
            "block_scale_a": scale_bytes(d, m, k, 1.0), "block_scale_b": scale_bytes(d, n, k, 1.0)}
    if d.chance(0.5):
        args["bias"] = d.values((n,), d.float_dtype(0))
    if d.chance(0.5):
        args["out_dtype"] = d.pick((None, torch.float32, torch.float16, torch.bfloat16))
    return args


def ref_scaled_mm(a):
    """docs/parity.md's definition: both operands dequantized exactly (eager's dequantize_mxfp8 to
    float32), multiplied, the bias (rounded to out_dtype) added, rounded once to out_dtype; here in
    float64 with the float32 bound of scaled_mm_nvfp4 (alpha 1)."""
    k = a["a"].shape[1]
    da = E.dequantize_mxfp8(a["a"], a["block_scale_a"], torch.float32).double()
    db = E.dequantize_mxfp8(a["b"], a["block_scale_b"], torch.float32).double()
    out = a.get("out_dtype") or torch.bfloat16
    bias = a.get("bias")
    bias = torch.zeros(1, dtype=torch.float64) if bias is None else bias.to(out).double()
    y = da @ db.T + bias
    magnitude = da.abs() @ db.abs().T
    bound = magnitude * (k + 3) * _eps(torch.float32) + bias.abs() * 2 * _eps(torch.float32)
    # torch's CPU matmul flushes subnormal products: up to float32's smallest normal per term
    bound = bound + torch.finfo(torch.float32).tiny * k * 2 + y.abs() * _eps(out)
    return y.to(out), _free_beyond_range(bound, y, magnitude + bias.abs(), out)


def compare_scaled_mm(ours, ref, a) -> None:
    y, bound = ref
    oracle.compare_close(ours, y, bound.nan_to_num(nan=float("inf"), posinf=float("inf")), "scaled_mm_mxfp8")


def _bad_codes(d: Draw, a: dict):
    return d.pick((torch.zeros(4, 32, dtype=torch.uint8), torch.zeros(4, 32), torch.zeros(2, 2, 32).to(
        torch.float8_e4m3fn), None))


def _bad_scales(d: Draw, a: dict):
    return d.pick((None, torch.zeros(3, dtype=torch.uint8), torch.zeros(128, 4)))


def targets(Target) -> list:
    return [
        Target("quantize_mxfp8", ("x", "pad_32x"), make_quantize,
               lambda a: E.quantize_mxfp8(a["x"], a.get("pad_32x", False)), compare_quantized,
               {"x": lambda d, a: d.pick((torch.zeros(3, 32, dtype=torch.int32), torch.zeros(2, 2, 32), None,
                                          torch.zeros(4, 33))),
                "pad_32x": lambda d, a: d.pick((1, "yes", None))}),
        Target("dequantize_mxfp8", ("qx", "block_scales", "output_type"), make_dequantize,
               lambda a: E.dequantize_mxfp8(a["qx"], a["block_scales"], a.get("output_type", torch.bfloat16)),
               lambda o, r, a: oracle.bits_equal(o, r, "values"),
               {"qx": _bad_codes, "block_scales": _bad_scales,
                "output_type": lambda d, a: d.pick((torch.int32, torch.float8_e4m3fn, "bf16"))}),
        Target("scaled_mm_mxfp8", ("a", "b", "block_scale_a", "block_scale_b", "bias", "out_dtype"),
               make_scaled_mm, ref_scaled_mm, compare_scaled_mm,
               {"a": _bad_codes, "b": _bad_codes, "block_scale_a": _bad_scales, "block_scale_b": _bad_scales,
                "bias": lambda d, a: d.pick((torch.ones(999), torch.ones(2, dtype=torch.int32))),
                "out_dtype": lambda d, a: d.pick((torch.int32, "f16"))},
               emulated_same_bits=False),
    ]
