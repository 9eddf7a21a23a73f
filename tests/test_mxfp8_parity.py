# SPDX-License-Identifier: Apache-2.0
"""Parity of the MXFP8 ops with comfy_kitchen's eager backend, on the CPU and on the emulated
device.  quantize_mxfp8 and dequantize_mxfp8: codes, E8M0 scales (swizzled, padding included) and
values bit for bit; FP8 NaN codes match NaN codes of either sign (a block with a zero scale turns
its zeros into 0/0, whose NaN's sign is the machine's).  The E8M0 exponent is eager's
ceil(log2(absmax / 448)) with log2 rounded to float32 first: swept over every block maximum
near each power of two where that rounding decides it.

scaled_mm_mxfp8: eager's is torch's block-scaled GEMM, which refuses the CPU ("CPU does not
support swizzle"), so the reference is its definition, as for scaled_mm_nvfp4: eager's exact
dequantization of each operand (an e4m3 value times a power of two is exact in float32)
multiplied in float64, plus the bias rounded to the output type.  Bound: a float32 dot product of
K terms is within K * 2^-24 * sum|a_k b_k| of the exact one, then one rounding to out_dtype
(eps/2 * |y|, taken as eps * |y|); cuBLASLt's float32 accumulation is within the same bound, so
ours and eager's on a GPU differ by at most twice the first term plus the rounding."""

import pytest
import torch

import comfy_kitchen_c.ops as ops
from comfy_kitchen_c import ArgumentError, ArgumentTypeError
from conftest import DTYPE_IDS, FLOAT_DTYPES, kernels_of

E = pytest.importorskip("comfy_kitchen.backends.eager.quantization")
if not hasattr(torch, "float8_e8m0fnu"):
    pytest.skip("this torch has no float8_e8m0fnu (eager's MXFP8 needs it)", allow_module_level=True)

DEVICES = ["cpu", "emulated"]
F32_EPS = 2.0**-24


def assert_codes_equal(ours, ref, what):
    """Same dtype, shape and bytes; FP8 NaN codes match NaN codes of either sign."""
    assert ours.dtype == ref.dtype, f"{what}: dtype {ours.dtype} != {ref.dtype}"
    assert ours.shape == ref.shape, f"{what}: shape {tuple(ours.shape)} != {tuple(ref.shape)}"
    a, b = ours.reshape(-1).view(torch.uint8), ref.reshape(-1).view(torch.uint8)
    if ours.dtype == torch.float8_e4m3fn:
        nan = ((a & 0x7F) == 0x7F) & ((b & 0x7F) == 0x7F)
    else:
        nan = torch.zeros_like(a, dtype=torch.bool)
    bad = ~((a == b) | nan)
    assert not bool(bad.any()), (f"{what}: {int(bad.sum())} of {a.numel()} bytes differ, first at "
                                 f"{int(bad.nonzero()[0])}: {int(a[bad][0]):#x} vs eager {int(b[bad][0]):#x}")


def assert_quantized_equal(ours, ref, what):
    assert_codes_equal(ours[0], ref[0], f"{what} codes")
    assert_codes_equal(ours[1], ref[1], f"{what} scales")


def assert_values_equal(ours, ref, what):
    assert ours.dtype == ref.dtype and ours.shape == ref.shape, what
    same = (ours == ref) | (ours.isnan() & ref.isnan())
    assert bool(same.all()), f"{what}: {int((~same).sum())} of {ours.numel()} values differ"


def blocks(rows, cols, dtype, seed=0):
    """Blocks of very different magnitudes (a block's scale is its own), with grid ties, NaN,
    infinities, -0.0, all-zero blocks and blocks so small that their scale is 2^-127."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g)
    mag = torch.pow(2.0, torch.randint(-40, 40, (rows, (cols + 31) // 32), generator=g).float())
    x = x * mag.repeat_interleave(32, dim=1)[:, :cols]
    flat = x.view(-1)
    flat[::11] = torch.randint(-900, 900, (len(flat[::11]),), generator=g).float() * 0.25
    if cols >= 32 and rows >= 6:
        x[0, :32] = 0.0
        x[0, 3] = -0.0
        x[1, 5] = float("nan")
        x[2, 7] = float("inf")
        x[3, 9] = -float("inf")
        x[4, :32] = torch.randn(32, generator=g) * 1e-37  # absmax / 448 below 2^-127
        x[5, :32] = 3e38
    return x.to(dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape, pad", [((67, 256), False), ((45, 70), True), ((130, 96), True), ((3, 32), False)])
def test_quantize_bit_exact(eager, device, dtype, shape, pad):
    x = blocks(*shape, dtype)
    with kernels_of(device):
        ours = ops.quantize_mxfp8(x, pad)
    assert_quantized_equal(ours, eager.quantize_mxfp8(x, pad), f"{dtype} {shape} pad {pad}")


def block_maxima():
    """float32 block maxima m whose m / 448 lies at and just above each power of two 2^e,
    e = -135 .. 120 (below 2^-126 too): the first 60 float32 steps, which cover every j where
    log2's rounding to float32 decides ceil (at most 22 steps of 2^-23 for |e| >= 64)."""
    out = []
    for e in range(-135, 121):
        base = torch.tensor(448.0 * 2.0**e, dtype=torch.float64).float()
        if base == 0 or not torch.isfinite(base):
            continue
        steps = torch.arange(-2, 60, dtype=torch.int32) + base.view(torch.int32)
        out.append(steps.view(torch.float32))
    m = torch.cat(out)
    return m[torch.isfinite(m) & (m > 0)]


@pytest.mark.parametrize("device", DEVICES)
def test_scale_exponent_at_powers_of_two(eager, device):
    m = block_maxima()
    x = torch.zeros(len(m), 32)
    x[:, 0] = m
    x[:, 1] = -m / 3
    x[:, 2] = m * 0.5000001
    with kernels_of(device):
        ours = ops.quantize_mxfp8(x)
    assert_quantized_equal(ours, eager.quantize_mxfp8(x), "block maxima near powers of two")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_quantize_every_16bit_input(eager, device, dtype):
    """Every bit pattern of the 16-bit type, in blocks of 32 (with each block's neighbours)."""
    x = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype).reshape(-1, 256)
    with kernels_of(device):
        ours = ops.quantize_mxfp8(x)
    assert_quantized_equal(ours, eager.quantize_mxfp8(x), f"every {dtype}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("out", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_dequantize_every_code_and_scale(eager, device, out):
    """All 256 codes against all 256 E8M0 scales (0: 0.0, 255: infinity)."""
    rows = 256
    qx = torch.arange(256, dtype=torch.int32).to(torch.uint8).repeat(rows, 1).view(torch.float8_e4m3fn)
    shape = (256, 8)  # swizzled buffer of 256 rows x 8 blocks
    scales = torch.arange(rows * 8, dtype=torch.int32).remainder(256).to(torch.uint8)
    scales = scales[torch.randperm(len(scales), generator=torch.Generator().manual_seed(1))]
    scales = scales.reshape(shape).view(torch.float8_e8m0fnu)
    with kernels_of(device):
        ours = ops.dequantize_mxfp8(qx, scales, out)
    assert_values_equal(ours, eager.dequantize_mxfp8(qx, scales, out), f"every code to {out}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_round_trip(eager, device, dtype):
    x = blocks(40, 160, dtype, seed=3)
    qx, s = eager.quantize_mxfp8(x, True)
    with kernels_of(device):
        ours = ops.dequantize_mxfp8(qx, s, dtype)
    assert_values_equal(ours, eager.dequantize_mxfp8(qx, s, dtype), "round trip")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape, pad", [((0, 32), False), ((5, 0), False), ((0, 0), False), ((0, 5), True),
                                        ((3, 0), True)])
def test_empty(eager, device, shape, pad):
    x = torch.randn(shape)
    ref = eager.quantize_mxfp8(x, pad)
    with kernels_of(device):
        ours = ops.quantize_mxfp8(x, pad)
        values = ops.dequantize_mxfp8(*ours, torch.float32)
    assert_quantized_equal(ours, ref, f"empty {shape}")
    assert values.shape == eager.dequantize_mxfp8(*ref, torch.float32).shape


@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous(eager, device):
    x = blocks(64, 96, torch.bfloat16, seed=5).t()  # [96, 64], column-major
    qx, s = eager.quantize_mxfp8(x)
    with kernels_of(device):
        ours = ops.quantize_mxfp8(x)
        values = ops.dequantize_mxfp8(qx.t().contiguous().t(), s.t().contiguous().t())
    assert_quantized_equal(ours, (qx, s), "transposed x")
    assert_values_equal(values, eager.dequantize_mxfp8(qx, s), "non-contiguous codes")


# ---- scaled_mm_mxfp8 -------------------------------------------------------------------------

def mm_operands(m, n, k, out_dtype, bias, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g) * 3
    a[:, :: max(k // 5, 1)] *= 20  # outlier channels, as activations have
    b = torch.randn(n, k, generator=g)
    qa, sa = E.quantize_mxfp8(a, True)
    qb, sb = E.quantize_mxfp8(b, True)
    bias_t = (torch.randn(qb.shape[0], generator=g) * 2).to(out_dtype) if bias else None
    return qa, qb, sa, sb, bias_t


def assert_within_bound(out, qa, qb, sa, sb, bias, out_dtype, what):
    da = E.dequantize_mxfp8(qa, sa, torch.float32).double()
    db = E.dequantize_mxfp8(qb, sb, torch.float32).double()
    y = da @ db.T
    if bias is not None:
        y = y + bias.double()
    tol = qa.shape[1] * F32_EPS * (da.abs() @ db.abs().T) + torch.finfo(out_dtype).eps * y.abs()
    assert out.dtype == out_dtype and out.shape == y.shape, what
    err = (out.double() - y).abs()
    assert bool((err <= tol).all()), f"{what}: worst excess {float((err - tol).max())}"


def test_eager_refuses_the_cpu():
    qa, qb, sa, sb, _ = mm_operands(32, 32, 64, torch.bfloat16, False)
    with pytest.raises(Exception, match="swizzle"):
        E.scaled_mm_mxfp8(qa, qb, sa, sb, None, torch.bfloat16)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("out_dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("mnk", [(1, 64, 96), (33, 40, 256), (130, 16, 64)])
def test_scaled_mm_within_bound(device, out_dtype, bias, mnk):
    qa, qb, sa, sb, b = mm_operands(*mnk, out_dtype, bias)
    with kernels_of(device):
        out = ops.scaled_mm_mxfp8(qa, qb, sa, sb, b, out_dtype)
    assert_within_bound(out, qa, qb, sa, sb, b, out_dtype, f"{device} {mnk}")


def test_scaled_mm_default_out_dtype_is_bfloat16():
    qa, qb, sa, sb, _ = mm_operands(4, 8, 32, torch.bfloat16, False)
    assert ops.scaled_mm_mxfp8(qa, qb, sa, sb).dtype == torch.bfloat16


# ---- bad input: the op and the argument named ---------------------------------------------------

def _q(rows=4, cols=64):
    return E.quantize_mxfp8(torch.randn(rows, cols))


BAD = [
    (lambda: ops.quantize_mxfp8(torch.randn(2, 3, 32)), ArgumentError, "quantize_mxfp8: argument 'x'"),
    (lambda: ops.quantize_mxfp8(torch.randn(4, 40)), ArgumentError, "quantize_mxfp8: argument 'x'.*pad_32x"),
    (lambda: ops.quantize_mxfp8(torch.zeros(4, 32, dtype=torch.int32)), ArgumentTypeError,
     "quantize_mxfp8: argument 'x'"),
    (lambda: ops.quantize_mxfp8(torch.randn(4, 32), 1), ArgumentTypeError, "quantize_mxfp8: argument 'pad_32x'"),
    (lambda: ops.dequantize_mxfp8(_q()[0], _q()[1][:64]), ArgumentError,
     "dequantize_mxfp8: argument 'block_scales'"),
    (lambda: ops.dequantize_mxfp8(_q()[0].view(torch.uint8), _q()[1]), ArgumentTypeError,
     "dequantize_mxfp8: argument 'qx'"),
    (lambda: ops.dequantize_mxfp8(_q()[0][:, :48], _q()[1]), ArgumentError, "dequantize_mxfp8: argument 'qx'"),
    (lambda: ops.dequantize_mxfp8(*_q(), torch.int8), ArgumentTypeError, "dequantize_mxfp8: argument 'output_type'"),
    (lambda: ops.dequantize_mxfp8(_q()[0], _q()[1].float()), ArgumentTypeError,
     "dequantize_mxfp8: argument 'block_scales'"),
    (lambda: ops.scaled_mm_mxfp8(_q()[0], _q(4, 96)[0], _q()[1], _q(4, 96)[1]), ArgumentError,
     "scaled_mm_mxfp8: argument 'b'"),
    (lambda: ops.scaled_mm_mxfp8(_q()[0], _q()[0], _q()[1], _q()[1], torch.zeros(5)), ArgumentError,
     "scaled_mm_mxfp8: argument 'bias'"),
    (lambda: ops.scaled_mm_mxfp8(_q()[0], _q()[0], _q()[1], _q()[1], None, torch.int32), ArgumentTypeError,
     "scaled_mm_mxfp8: argument 'out_dtype'"),
    (lambda: ops.scaled_mm_mxfp8(_q()[0], _q()[0], _q()[1][:1], _q()[1]), ArgumentError,
     "scaled_mm_mxfp8: argument 'block_scale_a'"),
    (lambda: ops.scaled_mm_mxfp8(_q()[0].float(), _q()[0], _q()[1], _q()[1]), ArgumentTypeError,
     "scaled_mm_mxfp8: argument 'a'"),
]


@pytest.mark.parametrize("call, error, message", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input_names_op_and_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()
