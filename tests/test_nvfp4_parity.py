# SPDX-License-Identifier: Apache-2.0
"""Parity of the NVFP4 ops with comfy_kitchen's eager backend, on CPU: codes,
block scales (and their swizzled layout) and dequantized values bit for bit."""

import pytest
import torch

from comfy_kitchen.float_utils import from_blocked, swap_nibbles

import comfy_kitchen_c.ops as ops
from conftest import DTYPE_IDS, FLOAT_DTYPES, assert_bitwise_equal, kernels_of
from inputs import CASES

# (rows, cols, pad_16x): aligned, rows not a multiple of 16 or 128, pad both dims, and
# tile counts (rows/16)*(cols/16) that are odd (16x16, 48x80 = padded (33, 65), 16x4080).
SHAPES = [(256, 512, False), (129, 128, False), (33, 65, True), (16, 16, False), (48, 80, False),
          (16, 4080, False), (1, 16, False), (1, 7, True), (130, 2064, True)]


def _pts(x):
    return (x.float().abs().amax() / (448 * 6)).clamp(min=1e-12).reshape(())


def _bytes(t):
    return t.view(torch.uint8)


def assert_quantized_equal(ours, ref, rows, cols):
    """Scales bit for bit; codes bit for bit except in blocks whose scale is NaN, where
    eager's codes are undefined and ours are documented to be 0."""
    (qx, sx), (qx_ref, sx_ref) = ours, ref
    assert sx.dtype == torch.float8_e4m3fn
    assert_bitwise_equal(_bytes(sx), _bytes(sx_ref), "block scales")
    nan_block = (_bytes(from_blocked(sx, rows, 2 * qx.shape[1] // 16)) & 0x7F) == 0x7F
    nan_bytes = nan_block.repeat_interleave(8, dim=1)
    assert_bitwise_equal(qx[~nan_bytes], qx_ref[~nan_bytes], "codes")
    assert bool((qx[nan_bytes] == 0).all()), "codes of NaN-scale blocks must be 0"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("rows,cols,pad", SHAPES)
def test_quantize_nvfp4_bit_exact(eager, dtype, case, rows, cols, pad):
    x = CASES[case](rows, cols, dtype)
    pts = _pts(x)
    for hi_first in (True, False):
        ours = ops.quantize_nvfp4(x, pts, 0.0, pad, hi_first)
        assert_quantized_equal(ours, eager.quantize_nvfp4(x, pts, 0.0, pad, hi_first), ours[0].shape[0], cols)


@pytest.mark.parametrize("out_dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("rows,cols,pad", SHAPES)
def test_dequantize_nvfp4_bit_exact(eager, out_dtype, case, rows, cols, pad):
    x = CASES[case](rows, cols, torch.bfloat16)
    pts = _pts(x)
    qx, sx = eager.quantize_nvfp4(x, pts, 0.0, pad)
    for hi_first in (True, False):
        q = qx if hi_first else swap_nibbles(qx)
        assert_bitwise_equal(ops.dequantize_nvfp4(q, pts, sx, out_dtype, hi_first),
                             eager.dequantize_nvfp4(q, pts, sx, out_dtype, hi_first), "values")


def test_hi_first_false_swaps_nibbles():
    x = CASES["normal"](64, 128, torch.bfloat16)
    hi, s_hi = ops.quantize_nvfp4(x, _pts(x))
    lo, s_lo = ops.quantize_nvfp4(x, _pts(x), hi_first=False)
    assert torch.equal(lo, swap_nibbles(hi)) and torch.equal(_bytes(s_hi), _bytes(s_lo))
    assert not torch.equal(lo, hi)


def test_scale_layout_is_cublas_swizzle():
    """Scale (r, c) sits at ((r//128*ceil(C/4) + c//4)*32 + r%32)*16 + (r%128)//32*4 + c%4."""
    rows, cols = 300, 16 * 9
    g = torch.Generator().manual_seed(5)
    # one distinct power-of-two absmax per block makes every scale distinct and exact
    x = torch.ones(rows, cols)
    exps = torch.randint(-6, 6, (rows, cols // 16), generator=g).float()
    x = (x.reshape(rows, -1, 16) * torch.exp2(exps).unsqueeze(-1)).reshape(rows, cols)
    _, sx = ops.quantize_nvfp4(x, torch.tensor(1.0 / 6))
    logical = torch.exp2(exps)  # absmax / 6 / (1/6)
    assert sx.shape == (384, 12)
    torch.testing.assert_close(from_blocked(sx, rows, cols // 16).float(), logical, rtol=0, atol=0)
    flat = _bytes(sx).reshape(-1)
    col_tiles = 3
    for r, c in [(0, 0), (1, 0), (32, 0), (0, 4), (128, 0), (299, 8), (170, 5)]:
        off = ((r // 128 * col_tiles + c // 4) * 32 + r % 32) * 16 + (r % 128) // 32 * 4 + c % 4
        assert flat[off].view(torch.float8_e4m3fn).float() == logical[r, c]
    # padding scales (rows past 300, columns past 9) stay zero
    padded = _bytes(from_blocked(sx, 384, 12))
    assert bool((padded[rows:] == 0).all()) and bool((padded[:, cols // 16:] == 0).all())


# (rows, cols, pad_16x, group): scale buffers padded in rows and columns (33 x 65 -> 48 x 80:
# 5 scale columns of 8, 48 rows of 128), in columns within one row (1 x 48: 3 of 4), in rows
# past a second swizzle tile (130 x 32: 256 rows), and rotated: G = 16 with padded columns,
# G = 64 and 256 (whole groups of 4 or 16 scale columns, rows padded; 33 rows pad_16x).
PADDED_SCALE_SHAPES = [(33, 65, True, 0), (1, 48, False, 0), (130, 32, False, 0), (1, 48, True, 16),
                       (130, 32, False, 16), (33, 64, True, 64), (5, 256, False, 256)]


def _quant_kernel_into(scales, x, pts, out_shape, group):
    """The nvfp4_quant kernel called directly, writing block scales into the given buffer;
    returns the codes."""
    qx = torch.empty((out_shape[0], out_shape[1] // 2), dtype=torch.uint8)
    ops._run("quantize_nvfp4", "quantize_nvfp4", x.device, (x, pts.reshape(1), qx, scales), (1, group))
    return qx


_kernels = kernels_of  # conftest.py


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("rows,cols,pad,group", PADDED_SCALE_SHAPES)
def test_quantizer_writes_the_scale_buffers_padding(device, rows, cols, pad, group):
    """The op allocates the swizzled scale buffer uninitialized: the kernel itself must write
    its padding entries (rows up to 128, scale columns up to 4) as scale 0, so a buffer full
    of 0xFF ends up as the zero-filled one does, codes unchanged."""
    x = CASES["normal"](rows, cols, torch.bfloat16)
    pts = _pts(x) * (group**0.5 if group else 1.0)
    out_shape = (ops._round_up(rows, 16), ops._round_up(cols, 16)) if pad else (rows, cols)
    shape = ops._scale_shape(*out_shape)
    assert shape[0] * shape[1] > out_shape[0] * out_shape[1] // 16, "the buffer must have padding"
    with _kernels(device):
        ours = torch.full(shape, 0xFF, dtype=torch.uint8)
        qx = _quant_kernel_into(ours, x, pts, out_shape, group)
        ref = torch.zeros(shape, dtype=torch.uint8)
        qx_ref = _quant_kernel_into(ref, x, pts, out_shape, group)
    assert_bitwise_equal(ours, ref, "block scales, padding included")
    assert_bitwise_equal(qx, qx_ref, "codes")


def test_e4m3_scale_rounding_over_the_whole_range(eager):
    """Block absmaxes sweeping 2^-20..2^12 exercise every e4m3 code, subnormals,
    the 448 clamp and saturation, all compared with eager's conversion."""
    n = 4096
    absmax = torch.exp2(torch.linspace(-20, 12, n))
    x = torch.zeros(n, 16)
    x[:, 3] = absmax
    x[::2, 5] = -absmax[::2] * 0.7
    pts = torch.tensor(1.0)
    assert_quantized_equal(ops.quantize_nvfp4(x, pts), eager.quantize_nvfp4(x, pts), n, 16)


def test_e2m1_ties_round_to_even(eager):
    """Values at every E2M1 midpoint and their neighbours (block scale 1)."""
    mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 7.0])
    vals = torch.cat([mids, mids.nextafter(torch.tensor(0.0)), mids.nextafter(torch.tensor(9.0))])
    vals = torch.cat([vals, -vals])
    x = torch.zeros(1, 64)
    x[0, : vals.numel()] = vals
    x[0, 60] = 6.0  # absmax 6 -> block scale exactly 1 with pts 1
    x[0, 44] = 6.0
    x[0, 28] = 6.0
    pts = torch.tensor(1.0)
    assert_bitwise_equal(ops.quantize_nvfp4(x, pts)[0], eager.quantize_nvfp4(x, pts)[0], "codes")


def test_non_finite_blocks_have_documented_results():
    """A block containing NaN gets the e4m3 NaN scale (0x7F) and zero codes, so it
    decodes to NaN; an infinity saturates its block's scale to 448 and its code to 6."""
    x = CASES["normal"](16, 64, torch.float32)
    x[2, 3] = float("nan")
    x[5, 20] = float("inf")
    pts = torch.tensor(0.01)
    qx, sx = ops.quantize_nvfp4(x, pts)
    scales = _bytes(from_blocked(sx, 16, 4))
    assert scales[2, 0] == 0x7F
    assert bool((qx[2, :8] == 0).all())
    assert scales[5, 1] == 0x7E  # 448
    assert (qx[5, 10] >> 4) == 0x7  # element 20 is the even (high) nibble of byte 10
    out = ops.dequantize_nvfp4(qx, pts, sx, torch.float32)
    assert torch.isnan(out[2, :16]).all() and torch.isfinite(out[:2]).all()


def test_zero_per_tensor_scale_and_zero_blocks(eager):
    x = CASES["zero_rows"](32, 64, torch.bfloat16)
    for pts in (torch.tensor(0.0), _pts(x)):
        assert_quantized_equal(ops.quantize_nvfp4(x, pts), eager.quantize_nvfp4(x, pts), 32, 64)


def test_roundtrip_error_is_bounded():
    x = CASES["normal"](128, 256, torch.bfloat16)
    pts = _pts(x)
    qx, sx = ops.quantize_nvfp4(x, pts)
    back = ops.dequantize_nvfp4(qx, pts, sx, torch.float32)
    blocks = x.float().reshape(128, -1, 16)
    err = (back.reshape(128, -1, 16) - blocks).abs().amax(-1)
    # one E2M1 step at the top of the range is 2/6 of the block's absmax, half of it when rounding,
    # plus the e4m3 rounding of the block scale (1/16 relative)
    assert bool((err <= blocks.abs().amax(-1) * (1 / 6 + 1 / 16) + 1e-6).all())
