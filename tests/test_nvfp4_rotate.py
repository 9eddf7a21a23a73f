# SPDX-License-Identifier: Apache-2.0
"""quantize_and_rotate_nvfp4 and nvfp4_linear (ops of comfy_kitchen_c only).

quantize_and_rotate_nvfp4 is defined as quantize_nvfp4 of rotate_int8_convrot_weight's
output (the rotation rounded to x's dtype), fused: it must equal that composition bit for
bit on the CPU, on the emulated device (the CUDA kernel sources), and between them.
quantize_nvfp4 and the rotation are each checked against comfy_kitchen eager in
test_nvfp4_parity.py and test_int8_parity.py."""
import sys

import pytest
import torch

from comfy_kitchen.float_utils import from_blocked

import comfy_kitchen_c as ckc
from comfy_kitchen_c import _C, ops
from conftest import DTYPE_IDS, FLOAT_DTYPES, assert_bitwise_equal
from inputs import CASES

GROUPS = [16, 64, 256]
HAS_EMU = sys.platform != "win32"


def pts_for(x, group):
    """amax(|x|) * sqrt(G) / (448 * 6): no rotated value exceeds it (the ops' own rule)."""
    return (x.float().abs().amax() * group**0.5 / 2688).clamp(min=1e-12).reshape(())


def composition(x, pts, group, pad, hi_first):
    return ops.quantize_nvfp4(ops.rotate_int8_convrot_weight(x, group), pts, 0.0, pad, hi_first)


def assert_same_quantized(ours, ref, what):
    assert ours[1].dtype == torch.float8_e4m3fn
    assert_bitwise_equal(ours[0], ref[0], f"{what}: codes")
    assert_bitwise_equal(ours[1].view(torch.uint8), ref[1].view(torch.uint8), f"{what}: block scales")


def check_fused(x, group, pad=False, hi_first=True):
    """Fused on CPU and (where built) on the emulated device == the CPU composition."""
    pts = pts_for(x, group)
    ref = composition(x, pts, group, pad, hi_first)
    assert_same_quantized(ops.quantize_and_rotate_nvfp4(x, pts, group, pad, hi_first), ref, "cpu")
    if HAS_EMU:
        from comfy_kitchen_c.testing import emulated_device
        with emulated_device():
            assert_same_quantized(ops.quantize_and_rotate_nvfp4(x, pts, group, pad, hi_first), ref, "emulated")
    return ref


# (rows, groups per row, pad_16x): rows a multiple of 16; (33, 1 group) padded (for G = 64
# that is the (33, 64) of the NVFP4 edge cases); one row; (48, 5 groups of 16) has an odd
# tile count (3 * 5); rows past 128 (a second swizzle tile).
SHAPES = [(64, 4, False), (33, 1, True), (1, 3, True), (48, 5, False), (130, 2, True)]
# Wide rows: G = 16 and 256 with 913 and 912 scale columns (no whole warps of rows fit a block: the
# GPU quantizer's 1-D layout), G = 64 with 768 (K = 12288: the row layout's widest blocks)
WIDE_GROUPS = {16: 913, 64: 192, 256: 57}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("rows,groups,pad", SHAPES)
def test_fused_equals_rotate_then_quantize(dtype, group, rows, groups, pad):
    x = CASES["normal"](rows, groups * group, dtype)
    qx, sx = check_fused(x, group, pad, hi_first=rows % 2 == 0)
    assert qx.shape == (rows + (-rows) % 16 if pad else rows, groups * group // 2)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("case", [c for c in CASES if c != "normal"])
def test_fused_on_edge_inputs(dtype, group, case):
    """Outlier channels, zero rows, subnormals, values at the dtype's limits (whose rotation
    overflows float16 to inf)."""
    check_fused(CASES[case](40, 2 * group, dtype), group, pad=True)


def test_misaligned_input_takes_the_scalar_path():
    base = torch.randn(4 * 256 + 1).to(torch.bfloat16)
    x = base[1:].view(4, 256)
    assert x.data_ptr() % 16 != 0
    check_fused(x, 64)


def _scales(sx, rows, cols):
    return from_blocked(sx, rows, cols // 16).view(torch.uint8)


@pytest.mark.parametrize("group", GROUPS)
def test_non_finite_values_spread_over_their_group(group):
    """The rotation mixes a group: one inf makes every value of its group +-inf (each
    butterfly sees one inf), so those blocks saturate (scale 448, codes +-6); a NaN makes its
    group NaN, so those blocks get the NaN scale 0x7F and codes 0 (quantize_nvfp4's rules).
    Other groups are untouched."""
    x = CASES["normal"](4, 2 * group, torch.float32)
    x[1, 5] = float("inf")
    x[2, group + 3] = float("nan")
    pts = torch.tensor(0.01)
    qx, sx = ops.quantize_and_rotate_nvfp4(x, pts, group)
    assert_same_quantized((qx, sx), composition(x, pts, group, False, True), "non-finite")
    scales = _scales(sx, 4, 2 * group)
    blocks = group // 16
    assert bool((scales[1, :blocks] == 0x7E).all())
    codes = torch.stack([qx >> 4, qx & 0xF], dim=-1).reshape(4, -1)
    assert bool(((codes[1, :group] & 0x7) == 0x7).all())
    assert bool((scales[2, blocks:] == 0x7F).all()) and bool((qx[2, group // 2:] == 0).all())
    finite = torch.ones_like(scales, dtype=torch.bool)
    finite[1, :blocks] = False
    finite[2, blocks:] = False
    assert bool((scales[finite] < 0x7E).all())


def test_zero_rows_quantize_to_zero():
    x = CASES["zero_rows"](32, 64, torch.bfloat16)
    qx, sx = ops.quantize_and_rotate_nvfp4(x, pts_for(x, 16), 16)
    scales = _scales(sx, 32, 64)
    assert bool((qx[::2] == 0).all()) and bool((scales[::2] == 0).all()) and bool((scales[1::2] != 0).all())


def test_rotation_is_not_the_identity():
    """The op must rotate: on a row with one large value per group its codes differ from
    plain quantize_nvfp4 (a kernel that skipped the rotation would pass the checks above
    only if the rotation also did nothing)."""
    x = torch.zeros(16, 64)
    x[:, ::16] = 4.0
    pts = torch.tensor(1 / 6)
    rotated, _ = ops.quantize_and_rotate_nvfp4(x, pts, 16)
    plain, _ = ops.quantize_nvfp4(x, pts)
    assert not torch.equal(rotated, plain)
    assert bool((rotated != 0).all())  # 4 * H16 e_0 = +-1 everywhere: every code nonzero


# ---- argument checks ------------------------------------------------------------------------

def test_quantize_and_rotate_bad_arguments():
    x = torch.randn(16, 256)
    pts = torch.tensor(0.01)
    op = "quantize_and_rotate_nvfp4"
    for group in (4, 32, 1024, 0):
        with pytest.raises(ckc.ArgumentError, match=f"{op}: argument 'group_size': {group} is not 16, 64 or 256"):
            ops.quantize_and_rotate_nvfp4(x, pts, group)
    with pytest.raises(ckc.ArgumentTypeError, match=f"{op}: argument 'group_size'"):
        ops.quantize_and_rotate_nvfp4(x, pts, 16.0)
    with pytest.raises(ckc.ArgumentError, match=f"{op}: argument 'group_size': row length 80 is not divisible"):
        ops.quantize_and_rotate_nvfp4(torch.randn(16, 80), pts, 64)
    with pytest.raises(ckc.ArgumentTypeError, match=f"{op}: argument 'per_tensor_scale' is required"):
        ops.quantize_and_rotate_nvfp4(x, None)
    with pytest.raises(ckc.ArgumentTypeError, match=f"{op}: argument 'per_tensor_scale'"):
        ops.quantize_and_rotate_nvfp4(x, pts.double())
    with pytest.raises(ckc.ArgumentError, match=f"{op}: argument 'x': expected 2 dimensions"):
        ops.quantize_and_rotate_nvfp4(x.reshape(2, 8, 256), pts)
    with pytest.raises(ckc.ArgumentTypeError, match=f"{op}: argument 'x'"):
        ops.quantize_and_rotate_nvfp4(x.to(torch.int32), pts)


def test_kernel_entry_rejects_other_groups():
    """The C entry point checks the group itself (it does not trust the Python wrapper)."""
    x = torch.randn(16, 64)
    qx = torch.empty(16, 32, dtype=torch.uint8)
    sx = torch.zeros(128, 4, dtype=torch.uint8)
    pts = torch.tensor([0.01])
    for group, message in ((1024, "is not 16, 64 or 256"), (4, "is not 16, 64 or 256"),
                           (256, "row length 64 is not divisible")):
        with pytest.raises(ckc.ArgumentError, match=f"op: argument 'group_size'.*{message}"):
            _C.quantize_nvfp4("op", x.__dlpack__(), pts.__dlpack__(), qx.__dlpack__(), sx.__dlpack__(), 1, group, 0, 1)


# ---- nvfp4_linear -----------------------------------------------------------------------------

def quantized_weight(w, group=0):
    """(qw, per-tensor scale, block scales) as a model would store them; the scale of a rotated
    weight comes from its rotated values (weights are quantized once, offline)."""
    rotated = ops.rotate_int8_convrot_weight(w, group) if group else w
    pts = (rotated.float().abs().amax() / 2688).reshape(())
    if group:
        qw, sw = ops.quantize_and_rotate_nvfp4(w, pts, group)
    else:
        qw, sw = ops.quantize_nvfp4(w, pts, 0.0, w.shape[1] % 16 != 0 or w.shape[0] % 16 != 0)
    return qw, pts, sw


def exact_product(x, weight, weight_scale, weight_block_scales, bias, group):
    """float64 product of the dequantized operands (x quantized as the op documents), and
    the float64 sum of |products| that bounds float32 accumulation error."""
    x2 = x.reshape(-1, x.shape[-1])
    amax = x2.abs().amax().float() * (group**0.5 if group else 1.0)
    pts = (amax / 2688).clamp_min(torch.finfo(torch.float32).tiny).reshape(1)
    if group:
        qa, sa = ops.quantize_and_rotate_nvfp4(x2, pts, group, True)
    else:
        qa, sa = ops.quantize_nvfp4(x2, pts, 0.0, True)
    a = ops.dequantize_nvfp4(qa, pts, sa, torch.float32).double()[: x2.shape[0]]
    w = ops.dequantize_nvfp4(weight, weight_scale, weight_block_scales, torch.float32).double()
    out = a @ w.T + (0.0 if bias is None else bias.double())
    magnitude = a.abs() @ w.abs().T + (0.0 if bias is None else bias.double().abs())
    return out.reshape(*x.shape[:-1], -1), magnitude.reshape(*x.shape[:-1], -1)


def assert_matmul_exact(y, x, qw, pts, sw, bias, group):
    """The matmul step is float32 accumulation of the exact products, rounded once to the
    output dtype: within one ulp of the output dtype plus K float32 roundings of the sum of
    |products| (the classic bound for a K-term float32 dot product)."""
    ref, magnitude = exact_product(x, qw, pts, sw, bias, group)
    k = 2 * qw.shape[1]
    tol = torch.finfo(y.dtype).eps * ref.abs() + k * 2.0**-24 * magnitude
    err = (y.double() - ref).abs()
    assert bool((err <= tol).all()), f"max excess {float((err - tol).max())}"


def relative_error(y, ref):
    return float((y.double() - ref.double()).norm() / ref.double().norm())


# Gaussian operands: each NVFP4 operand has about 9.5% relative RMS error (measured: E2M1
# steps are up to 1/3 of the block's absmax, plus the e4m3 block scale's rounding), so the
# product's relative Frobenius error is about sqrt(2) * 9.5% = 13.5%; 0.2 leaves margin, and
# a wrong rotation convention gives errors above 1.
LOOSE_REL_ERROR = 0.2


@pytest.mark.parametrize("group", [0, 16, 64, 256])
@pytest.mark.parametrize("out_dtype", [None, torch.float32, torch.float16], ids=["x.dtype", "f32", "f16"])
def test_nvfp4_linear(group, out_dtype):
    x = CASES["normal"](2 * 33, 512, torch.bfloat16).reshape(2, 33, 512)  # 3-D, 66 rows: padded to 80
    w = (CASES["normal"](48, 512, torch.bfloat16, seed=7).float() * 0.02).to(torch.bfloat16)
    bias = torch.linspace(-1, 1, 48).to(torch.bfloat16)
    qw, pts, sw = quantized_weight(w, group)
    y = ops.nvfp4_linear(x, qw, pts, sw, bias, out_dtype, bool(group), group or 16)
    assert y.shape == (2, 33, 48) and y.dtype == (out_dtype or x.dtype)
    assert_matmul_exact(y, x, qw, pts, sw, bias, group)
    ref = torch.nn.functional.linear(x, w, bias)
    assert relative_error(y, ref) < LOOSE_REL_ERROR
    if group:
        # the rotated weight used unrotated (or the reverse) is far off: the test can tell
        wrong = ops.nvfp4_linear(x, qw, pts, sw, bias, out_dtype)
        assert relative_error(wrong, ref) > 1.0


def test_nvfp4_linear_pads_features_and_weight_rows():
    """K = 40 is padded to 48 (the weight from quantize_nvfp4 with pad_16x); the output has
    one column per stored weight row (24 padded to 32), the padded ones 0."""
    x = CASES["normal"](5, 40, torch.float32)
    w = CASES["normal"](24, 40, torch.float32, seed=3) * 0.05
    qw, pts, sw = quantized_weight(w)
    assert qw.shape == (32, 24)
    y = ops.nvfp4_linear(x, qw, pts, sw)
    assert y.shape == (5, 32) and bool((y[:, 24:] == 0).all())
    assert_matmul_exact(y, x, qw, pts, sw, None, 0)
    assert relative_error(y[:, :24], x @ w.T) < LOOSE_REL_ERROR


def test_nvfp4_linear_one_dimensional_and_zero_input():
    w = CASES["normal"](16, 64, torch.float32, seed=3)
    qw, pts, sw = quantized_weight(w, 16)
    bias = torch.arange(16, dtype=torch.float32)
    y = ops.nvfp4_linear(torch.zeros(64), qw, pts, sw, bias, convrot=True)
    assert y.shape == (16,)
    assert torch.equal(y, bias)  # zero codes: exactly the bias, no NaN from a zero scale


@pytest.mark.skipif(not HAS_EMU, reason="the emulated device is not built on Windows")
def test_nvfp4_linear_on_the_emulated_device():
    from comfy_kitchen_c.testing import emulated_device
    x = CASES["outliers"](20, 256, torch.float16)
    qw, pts, sw = quantized_weight(CASES["normal"](32, 256, torch.float16, seed=9), 64)
    y = ops.nvfp4_linear(x, qw, pts, sw, convrot=True, convrot_groupsize=64)
    with emulated_device():
        assert_bitwise_equal(ops.nvfp4_linear(x, qw, pts, sw, convrot=True, convrot_groupsize=64), y, "emulated")


def test_nvfp4_linear_bad_arguments():
    op = "nvfp4_linear"
    x = torch.randn(4, 64)
    qw, pts, sw = quantized_weight(torch.randn(16, 64))
    call = ops.nvfp4_linear
    with pytest.raises(ckc.ArgumentTypeError, match=f"{op}: argument 'weight': expected dtype uint8"):
        call(x, qw.to(torch.int8), pts, sw)
    with pytest.raises(ckc.ArgumentError, match=f"{op}: argument 'weight': 32 packed columns hold 64 values, but x"):
        call(torch.randn(4, 96), qw, pts, sw)
    with pytest.raises(ckc.ArgumentTypeError, match=f"{op}: argument 'weight_tensor_scale' is required"):
        call(x, qw, None, sw)
    with pytest.raises(ckc.ArgumentError, match=f"{op}: argument 'weight_tensor_scale': expected one element"):
        call(x, qw, torch.ones(2), sw)
    with pytest.raises(ckc.ArgumentTypeError, match=f"{op}: argument 'weight_block_scales' is required"):
        call(x, qw, pts, None)
    with pytest.raises(ckc.ArgumentError, match=f"{op}: argument 'weight_block_scales': expected 512 elements"):
        call(x, qw, pts, sw[:64])
    with pytest.raises(ckc.ArgumentError, match=f"{op}: argument 'bias': expected 16 elements"):
        call(x, qw, pts, sw, torch.zeros(15))
    with pytest.raises(ckc.ArgumentTypeError, match=f"{op}: argument 'out_dtype'"):
        call(x, qw, pts, sw, None, torch.int8)
    with pytest.raises(ckc.ArgumentTypeError, match=f"{op}: argument 'convrot': expected a bool"):
        call(x, qw, pts, sw, convrot=1)
    with pytest.raises(ckc.ArgumentError, match=f"{op}: argument 'convrot_groupsize': 1024 is not 16, 64 or 256"):
        call(x, qw, pts, sw, convrot=True, convrot_groupsize=1024)
    with pytest.raises(ckc.ArgumentError, match=f"{op}: argument 'convrot_groupsize': row length 64 is not divisible"):
        call(x, qw, pts, sw, convrot=True, convrot_groupsize=256)
    with pytest.raises(ckc.ArgumentTypeError, match=f"{op}: argument 'x'"):
        call(x.to(torch.int32), qw, pts, sw)


@pytest.mark.parametrize("group", GROUPS)
def test_rows_wider_than_one_segment(group):
    x = torch.randn(3, WIDE_GROUPS[group] * group, generator=torch.Generator().manual_seed(group))
    check_fused(x, group)
