# SPDX-License-Identifier: Apache-2.0
"""Fuzz targets of the per-tensor FP8 ops (quantize_per_tensor_fp8, dequantize_per_tensor_fp8,
stochastic_rounding_fp8) with eager's results as the oracle, bit for bit: FP8 codes as bytes,
NaN codes of either sign matching (eager's own bfloat16 paths give both)."""
from __future__ import annotations

import torch
from comfy_kitchen.backends.eager import quantization as E

from draw import Draw
import oracle

FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def _shape(d: Draw) -> tuple:
    return tuple(d.extent(9) for _ in range(d.int_in(0, 3)))


def _scale(d: Draw, dtype=torch.float32) -> torch.Tensor:
    v = d.pick((1.0, 0.01, 3.7, 1e-30, 1e30, -0.5, 0.0, float("inf"), float("nan")))
    return torch.tensor(v, dtype=torch.float32).to(dtype).reshape(d.pick(((), (1,), (1, 1))))


def _fp8_type(d: Draw, args: dict) -> dict:
    if d.chance(0.7):
        args["output_type"] = d.pick(FP8)
    return args


def make_quantize(d: Draw) -> dict:
    return _fp8_type(d, {"x": d.layout(d.values(_shape(d), d.float_dtype(0))), "scale": _scale(d)})


def make_dequantize(d: Draw) -> dict:
    args = {"x": d.layout(d.codes(_shape(d), torch.uint8)).view(d.pick(FP8)),
            "scale": _scale(d, d.float_dtype(0))}
    if d.chance(0.7):
        args["output_type"] = d.pick((torch.float32, torch.float16, torch.bfloat16))
    return args


def make_stochastic(d: Draw) -> dict:
    x = d.layout(d.values(_shape(d), d.float_dtype(0)))
    return _fp8_type(d, {"x": x, "rng": d.layout(d.codes(x.shape, torch.uint8))})


def compare_fp8(ours, ref, a) -> None:
    oracle.same_form(ours, ref)
    if ref.dtype in FP8:
        nan = ours.float().isnan() & ref.float().isnan()
        ours, ref = torch.where(nan, 0, ours.view(torch.uint8)), torch.where(nan, 0, ref.view(torch.uint8))
    oracle.bits_equal(ours, ref, "values")


def _bad_x(d: Draw, args: dict):
    return d.pick((torch.zeros(3, dtype=torch.float64), torch.zeros(3, dtype=torch.int32), None, "x", 1.0))


def _bad_scale(d: Draw, args: dict):
    return d.pick((None, 1.0, torch.ones(2), torch.ones(1, dtype=torch.int32), "1"))


def _bad_fp8_type(d: Draw, args: dict):
    return d.pick((torch.float32, torch.int8, "e4m3", None))


def targets(Target) -> list:
    return [
        Target("quantize_per_tensor_fp8", ("x", "scale", "output_type"), make_quantize,
               lambda a: E.quantize_per_tensor_fp8(a["x"], a["scale"], a.get("output_type", torch.float8_e4m3fn)),
               compare_fp8, {"x": _bad_x, "scale": _bad_scale, "output_type": _bad_fp8_type}),
        Target("dequantize_per_tensor_fp8", ("x", "scale", "output_type"), make_dequantize,
               lambda a: E.dequantize_per_tensor_fp8(a["x"], a["scale"], a.get("output_type", torch.bfloat16)),
               compare_fp8,
               {"x": lambda d, a: d.pick((torch.zeros(3), torch.zeros(3, dtype=torch.uint8), None)),
                "scale": _bad_scale, "output_type": lambda d, a: d.pick((torch.float8_e4m3fn, torch.int32, "bf16"))}),
        Target("stochastic_rounding_fp8", ("x", "rng", "output_type"), make_stochastic,
               lambda a: E.stochastic_rounding_fp8(a["x"], a["rng"], a.get("output_type", torch.float8_e4m3fn)),
               compare_fp8,
               {"x": _bad_x, "rng": lambda d, a: d.pick((torch.zeros(2, 2, 2, 2, dtype=torch.uint8),
                                                          torch.zeros(1, dtype=torch.int8), None)),
                "output_type": _bad_fp8_type}),
    ]
