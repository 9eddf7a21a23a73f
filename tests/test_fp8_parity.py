# SPDX-License-Identifier: Apache-2.0
"""Parity of the per-tensor FP8 ops with comfy_kitchen's eager backend, on the CPU and on the
emulated device: codes and values bit for bit, for float8_e4m3fn and float8_e5m2.  NaN results
match as NaN of any sign: eager itself gives NaN codes of either sign for bfloat16 (its vector
and scalar conversions disagree).  Exhaustive where the domain is small: every 16-bit input of
the quantizer, every code of the dequantizer, every float16 input of stochastic rounding."""

import pytest
import torch

import comfy_kitchen_c.ops as ops
from conftest import DTYPE_IDS, FLOAT_DTYPES, assert_bitwise_equal, kernels_of

FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]
FP8_IDS = ["e4m3", "e5m2"]
DEVICES = ["cpu", "emulated"]


_kernels = kernels_of  # conftest.py


def assert_fp8_equal(ours, ref, what):
    """Same dtype, shape and bytes, NaN codes matching NaN codes of either sign."""
    assert ours.dtype == ref.dtype, f"{what}: dtype {ours.dtype} != {ref.dtype}"
    assert ours.shape == ref.shape, f"{what}: shape {tuple(ours.shape)} != {tuple(ref.shape)}"
    a, b = ours.reshape(-1).view(torch.uint8), ref.reshape(-1).view(torch.uint8)
    nan = ours.reshape(-1).float().isnan() & ref.reshape(-1).float().isnan()
    bad = ~((a == b) | nan)
    assert not bool(bad.any()), (f"{what}: {int(bad.sum())} of {a.numel()} codes differ, first at "
                                 f"{int(bad.nonzero()[0])}: {int(a[bad][0]):#x} vs eager {int(b[bad][0]):#x}")


def all_16bit(dtype):
    """Every bit pattern of a 16-bit float type (NaNs and infinities included)."""
    return torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)


def values(n, dtype, seed=0):
    """Magnitudes over the FP8 ranges and beyond, ties of the grids, NaN, inf, -0.0, huge."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=g) * torch.pow(10.0, torch.randint(-8, 6, (n,), generator=g).float())
    x[::7] = torch.randint(-600, 600, (len(x[::7]),), generator=g).float() * 0.0625  # grid points and ties
    x[:8] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 3e38, -1e30, 65520.0])
    return x.to(dtype)


SCALES = [1.0, 0.0123, 7.5, 1e-30, 1e30, -0.5, 0.0, float("inf"), float("nan")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fp8", FP8, ids=FP8_IDS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_quantize_bit_exact(eager, device, fp8, dtype):
    x = values(5000, dtype)
    with _kernels(device):
        for s in SCALES:
            scale = torch.tensor(s)
            assert_fp8_equal(ops.quantize_per_tensor_fp8(x, scale, fp8),
                             eager.quantize_per_tensor_fp8(x, scale, fp8), f"scale {s}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fp8", FP8, ids=FP8_IDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_quantize_every_16bit_input(eager, device, fp8, dtype):
    x = all_16bit(dtype)
    with _kernels(device):
        for s in (1.0, 0.37, 300.0):
            scale = torch.tensor([s])
            assert_fp8_equal(ops.quantize_per_tensor_fp8(x, scale, fp8),
                             eager.quantize_per_tensor_fp8(x, scale, fp8), f"scale {s}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fp8", FP8, ids=FP8_IDS)
def test_quantize_float32_at_every_fp8_midpoint(eager, device, fp8):
    """Each FP8 value, the midpoints between neighbours (ties to even) and the floats next to them."""
    grid = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(fp8).float()
    grid = grid[torch.isfinite(grid)].unique()
    mids = (grid[1:] + grid[:-1]) / 2
    x = torch.cat([grid, mids, mids.nextafter(torch.tensor(-1e9)), mids.nextafter(torch.tensor(1e9))])
    with _kernels(device):
        for s in (1.0, 0.5):
            scale = torch.tensor(s)
            assert_fp8_equal(ops.quantize_per_tensor_fp8(x, scale, fp8),
                             eager.quantize_per_tensor_fp8(x, scale, fp8), f"scale {s}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fp8", FP8, ids=FP8_IDS)
@pytest.mark.parametrize("out_dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_dequantize_every_code(eager, device, fp8, out_dtype):
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(fp8).repeat(9)
    with _kernels(device):
        for scale_dtype in FLOAT_DTYPES:
            for s in SCALES + [3.3e38, 1e-40]:
                scale = torch.tensor(s, dtype=torch.float32).to(scale_dtype)
                assert_bitwise_equal(ops.dequantize_per_tensor_fp8(codes, scale, out_dtype),
                                     eager.dequantize_per_tensor_fp8(codes, scale, out_dtype),
                                     f"scale {s} ({scale_dtype})")


def _rng(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, shape, generator=g, dtype=torch.int32).to(torch.uint8)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fp8", FP8, ids=FP8_IDS)
def test_stochastic_every_float16_input(eager, device, fp8):
    """The op works in float16: all 65536 inputs, with noise 0, 255 and random bytes."""
    x = all_16bit(torch.float16)
    with _kernels(device):
        for rng in (torch.zeros_like(x, dtype=torch.uint8), torch.full(x.shape, 255, dtype=torch.uint8),
                    _rng(x.shape, 1), _rng(x.shape, 2)):
            assert_fp8_equal(ops.stochastic_rounding_fp8(x, rng, fp8), eager.stochastic_rounding_fp8(x, rng, fp8),
                             "codes")


@pytest.mark.parametrize("fp8", FP8, ids=FP8_IDS)
def test_stochastic_every_float16_input_with_every_noise_byte(eager, fp8):
    """The CPU kernel reads a table over the float16 inputs (csrc/cpu/fp8_tables.c: two codes and
    the noise byte where the upper one starts): every input with every one of the 256 noise bytes,
    so a threshold one byte off fails here."""
    x = all_16bit(torch.float16).reshape(-1, 1).expand(-1, 256).contiguous()
    rng = torch.arange(256, dtype=torch.uint8).reshape(1, 256).expand(x.shape[0], -1).contiguous()
    assert_fp8_equal(ops.stochastic_rounding_fp8(x, rng, fp8), eager.stochastic_rounding_fp8(x, rng, fp8),
                     "codes at every noise byte")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fp8", FP8, ids=FP8_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_stochastic_bit_exact(eager, device, fp8, dtype):
    x = values(20000, dtype, seed=3)
    with _kernels(device):
        for seed in (4, 5):
            rng = _rng(x.shape, seed)
            assert_fp8_equal(ops.stochastic_rounding_fp8(x, rng, fp8), eager.stochastic_rounding_fp8(x, rng, fp8),
                             f"rng seed {seed}")


def _layouts(x):
    """x as N-D, 0-dim, empty, strided, transposed and offset views (values of x's own)."""
    yield x.reshape(4, 5, 6)
    yield x[:1].reshape(())
    yield x[:0].reshape(0, 3)
    yield x.reshape(12, 10)[:, ::2]
    yield x.reshape(10, 12).t()
    yield x[3:]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fp8", FP8, ids=FP8_IDS)
def test_layouts_and_shapes(eager, device, fp8):
    base = values(120, torch.bfloat16, seed=6)
    scale = torch.tensor(0.25)
    with _kernels(device):
        for x in _layouts(base):
            q = ops.quantize_per_tensor_fp8(x, scale, fp8)
            assert_fp8_equal(q, eager.quantize_per_tensor_fp8(x, scale, fp8), f"quantize {list(x.shape)}")
            qv = q.view(torch.uint8).transpose(0, -1).contiguous().transpose(0, -1).view(fp8) if q.dim() else q
            assert_bitwise_equal(ops.dequantize_per_tensor_fp8(qv, scale, torch.float16),
                                 eager.dequantize_per_tensor_fp8(qv, scale, torch.float16), "dequantize")
            rng = _rng(x.shape, 7)
            if x.dim() == 0:  # eager fails there (abs_x[:] = ...): refused
                with pytest.raises(ops.ArgumentError, match="stochastic_rounding_fp8: argument 'x'"):
                    ops.stochastic_rounding_fp8(x, rng, fp8)
                continue
            assert_fp8_equal(ops.stochastic_rounding_fp8(x, rng, fp8), eager.stochastic_rounding_fp8(x, rng, fp8),
                             f"stochastic {list(x.shape)}")


def test_scale_with_more_dims_broadcasts_as_eager(eager):
    x = values(10, torch.float32)
    scale = torch.tensor([[2.0]])
    q = ops.quantize_per_tensor_fp8(x, scale)
    assert q.shape == eager.quantize_per_tensor_fp8(x, scale).shape == (1, 10)
    d = ops.dequantize_per_tensor_fp8(q.reshape(10), scale)
    assert d.shape == eager.dequantize_per_tensor_fp8(q.reshape(10), scale).shape == (1, 10)


@pytest.mark.parametrize("call", [
    lambda: ops.quantize_per_tensor_fp8(torch.ones(3), torch.ones(2)),
    lambda: ops.quantize_per_tensor_fp8(torch.ones(3), torch.ones(1, dtype=torch.float16)),
    lambda: ops.quantize_per_tensor_fp8(torch.ones(3), torch.ones(1), torch.bfloat16),
    lambda: ops.quantize_per_tensor_fp8(torch.ones(3), 1.0),
    lambda: ops.dequantize_per_tensor_fp8(torch.ones(3), torch.ones(1)),
    lambda: ops.dequantize_per_tensor_fp8(torch.ones(3).to(torch.float8_e5m2), torch.ones(1), torch.float8_e5m2),
    lambda: ops.stochastic_rounding_fp8(torch.ones(3), torch.zeros(3, dtype=torch.int8)),
    lambda: ops.stochastic_rounding_fp8(torch.ones(3), torch.zeros(1, dtype=torch.uint8)),
])
def test_refused_calls_name_op_and_argument(call):
    with pytest.raises((ops.ArgumentError, ops.ArgumentTypeError), match=r"^\w+_fp8: argument '\w+'"):
        call()
