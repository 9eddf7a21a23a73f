# SPDX-License-Identifier: Apache-2.0
"""The NVFP4 quantizer's codes at every E2M1 code boundary, bit for bit against eager's division,
on the emulated device (the CUDA kernel source) and on the CPU: every positive finite e4m3 block
scale, under per-tensor scales from 2^-20 to 2^20, with values at each code boundary (0.25 .. 5
times the block's total scale) and 6 float32 steps either side of it, both signs, and uniform
values.  Any form of the quantizer that does not divide each value (a reciprocal per block:
benchmarks/results/gpu_model_predictions.md, "NVFP4 without a division per value") must pass
this: at these values the product x * RN(1 / total) and eager's RN(x / total) fall on different
sides of a boundary (a build that used the product alone failed it for every per-tensor scale)."""

import pytest
import torch

import comfy_kitchen_c.ops as ops
from test_nvfp4_parity import assert_quantized_equal

BOUNDARIES = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)  # where E2M1's rounding changes code
STEPS = 6  # float32 steps each side of a boundary
PER_TENSOR = (1.0, 1 / 2688, 3.7e-3, 0.173, 2.0 ** -20, 2.0 ** 20, 1.13e-7, 911.0)
E4M3 = torch.arange(1, 0x7F, dtype=torch.uint8).view(torch.float8_e4m3fn).float()  # every positive finite scale


def _steps(c: torch.Tensor) -> torch.Tensor:
    """c and its STEPS float32 neighbours either side."""
    out, up, down = [c], c, c
    for _ in range(STEPS):
        up, down = torch.nextafter(up, torch.tensor(float("inf"))), torch.nextafter(down, torch.tensor(0.0))
        out += [up, down]
    return torch.stack(out, -1)


def _blocks(pts: float, g: torch.Generator) -> torch.Tensor:
    """Rows of 16-value blocks: per e4m3 scale v, blocks led by the
    absmax that gives scale v, then the values at every boundary b * (pts * v) and their
    neighbours, both signs, and uniform values; zero blocks fill the last row."""
    total = torch.tensor(pts, dtype=torch.float32) * E4M3  # the kernel's pts * e4m3 value
    absmax = (total.double() * 6).float()
    at = _steps(torch.stack([(total.double() * b).float() for b in BOUNDARIES], -1)).reshape(len(E4M3), -1)
    uniform = ((torch.rand(len(E4M3), 30, generator=g) * 12 - 6) * total.double()[:, None]).float()
    values = torch.cat([at, -at, uniform], 1)
    values = torch.cat([values, torch.zeros(len(E4M3), -values.shape[1] % 15)], 1).reshape(len(E4M3), -1, 15)
    blocks = torch.cat([absmax[:, None, None].expand(-1, values.shape[1], 1), values], 2).reshape(-1, 16)
    blocks = torch.cat([blocks, torch.zeros(-blocks.shape[0] % 16, 16)])
    return blocks.reshape(-1, 256)


@pytest.mark.parametrize("pts", PER_TENSOR)
def test_every_e4m3_scale_and_every_boundary_match_eagers_division(eager, pts):
    x = _blocks(pts, torch.Generator().manual_seed(7))
    assert bool(torch.isfinite(x).all())
    scale = torch.tensor(pts, dtype=torch.float32)
    ref = eager.quantize_nvfp4(x, scale, 0.0, False)
    # every block's scale is the one intended: each e4m3 value occurs
    assert set(ref[1].view(torch.uint8).flatten().tolist()) >= set(range(1, 0x7F))
    assert_quantized_equal(ops.quantize_nvfp4(x, scale, 0.0, False), ref, x.shape[0], x.shape[1])
    from comfy_kitchen_c.testing import emulated_device
    with emulated_device():
        assert_quantized_equal(ops.quantize_nvfp4(x, scale, 0.0, False), ref, x.shape[0], x.shape[1])
