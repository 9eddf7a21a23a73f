# SPDX-License-Identifier: Apache-2.0
"""The per-tensor FP8 ops (re-exported by ``comfy_kitchen_c.ops``): quantize_per_tensor_fp8,
dequantize_per_tensor_fp8 and stochastic_rounding_fp8, with comfy_kitchen's parameters, for
float8_e4m3fn and float8_e5m2.  Each is element-wise over the flat order of x (any rank, any
layout: non-contiguous x is copied first); FP8 tensors reach C as their uint8 bytes."""
from __future__ import annotations

import torch

from . import _checks as check
from ._C import ArgumentError, ArgumentTypeError
from ._call import _run
from ._proved import checked as _checked

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)


def _format(op: str, name: str, dtype) -> int:
    """The C ops' flag for an FP8 dtype: 0 float8_e4m3fn, 1 float8_e5m2."""
    if dtype not in FP8_DTYPES:
        raise ArgumentTypeError(f"{op}: argument '{name}': expected torch.float8_e4m3fn or torch.float8_e5m2, "
                                f"got {dtype!r}")
    return int(dtype == torch.float8_e5m2)


def _check_scale(op: str, scale, dtypes, x) -> None:
    """A one-element tensor on x's device (eager calls tensor methods on it: no numbers)."""
    check.tensor(op, "scale", scale, dtypes)
    if scale.numel() != 1:
        raise ArgumentError(f"{op}: argument 'scale': expected one element, got shape {list(scale.shape)}")
    check.same_device(op, x=x, scale=scale)


def _result_shape(x: torch.Tensor, scale: torch.Tensor) -> torch.Size:
    """Eager's result shape: x broadcast with the one-element scale (its extra leading dims)."""
    return x.shape if scale.dim() <= x.dim() else torch.Size((1,) * (scale.dim() - x.dim()) + tuple(x.shape))


# ---- quantize_per_tensor_fp8 -----------------------------------------------------------------

def check_quantize_per_tensor_fp8(x, scale, output_type=torch.float8_e4m3fn):
    op = "quantize_per_tensor_fp8"
    check.tensor(op, "x", x, check.FLOAT_DTYPES, empty=True)
    _check_scale(op, scale, (torch.float32,), x)
    _format(op, "output_type", output_type)


def quantize_per_tensor_fp8(x, scale, output_type=torch.float8_e4m3fn):
    """FP8 codes of clamp(x * (1/scale).to(x.dtype), -max, max), as eager, bit for bit."""
    op = "quantize_per_tensor_fp8"
    _checked(check_quantize_per_tensor_fp8, x, scale, output_type)
    xc = x.contiguous()
    q = torch.empty(size=xc.shape, dtype=torch.uint8, device=x.device)
    _run("quantize_per_tensor_fp8", op, x.device, (xc, scale, q), (_format(op, "output_type", output_type),))
    return q.view(output_type).view(_result_shape(x, scale))


# ---- dequantize_per_tensor_fp8 ---------------------------------------------------------------

def check_dequantize_per_tensor_fp8(x, scale, output_type=torch.bfloat16):
    op = "dequantize_per_tensor_fp8"
    check.tensor(op, "x", x, FP8_DTYPES, empty=True)
    _check_scale(op, scale, check.FLOAT_DTYPES, x)
    if output_type not in check.FLOAT_DTYPES:
        raise ArgumentTypeError(f"{op}: argument 'output_type': expected float32, float16 or bfloat16, "
                                f"got {output_type!r}")


def dequantize_per_tensor_fp8(x, scale, output_type=torch.bfloat16):
    """x.to(output_type) * scale.to(output_type), as eager, bit for bit."""
    op = "dequantize_per_tensor_fp8"
    _checked(check_dequantize_per_tensor_fp8, x, scale, output_type)
    xc = x.contiguous()
    out = torch.empty(size=xc.shape, dtype=output_type, device=x.device)
    # float16 and bfloat16 scales are exact in float32: the kernels read one float32
    _run("dequantize_per_tensor_fp8", op, x.device, (xc.view(torch.uint8), scale.to(torch.float32), out),
         (int(x.dtype == torch.float8_e5m2),))
    return out.view(_result_shape(x, scale))


# ---- stochastic_rounding_fp8 -----------------------------------------------------------------

def check_stochastic_rounding_fp8(x, rng, output_type=torch.float8_e4m3fn):
    op = "stochastic_rounding_fp8"
    # eager fails on a 0-dim x (it assigns through abs_x[:])
    check.tensor(op, "x", x, check.FLOAT_DTYPES, min_ndim=1, empty=True)
    check.tensor(op, "rng", rng, (torch.uint8,), empty=True)
    if rng.shape != x.shape:  # comfy_kitchen: "Random uint8 tensor with the same shape as x"
        raise ArgumentError(f"{op}: argument 'rng': expected x's shape {list(x.shape)}, got {list(rng.shape)}")
    check.same_device(op, x=x, rng=rng)
    _format(op, "output_type", output_type)


def stochastic_rounding_fp8(x, rng, output_type=torch.float8_e4m3fn):
    """Eager's stochastic rounding to FP8 (x as float16, mantissa + rng/256 floored), bit for bit."""
    op = "stochastic_rounding_fp8"
    _checked(check_stochastic_rounding_fp8, x, rng, output_type)
    xc = x.contiguous()
    q = torch.empty(size=xc.shape, dtype=torch.uint8, device=x.device)
    _run("stochastic_rounding_fp8", op, x.device, (xc, rng.contiguous(), q),
         (_format(op, "output_type", output_type),))
    return q.view(output_type)
