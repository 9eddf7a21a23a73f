# SPDX-License-Identifier: Apache-2.0
"""Parity of the ConvRot W4A4 ops with comfy_kitchen's eager backend, on the CPU and on the
emulated device.

What is bit for bit, and how the rest is held to its bound without a tolerance:
* the int4 codec (prepare_int4_weight_for_int8_linear: every byte) and the quantizer's math:
  fed eager's own rotated values (group 0), our codes and scales are eager's, nearest and
  stochastic (eager's noise for the seed);
* every op on inputs whose rotation is exact (small integers times a power of two: every
  partial sum of the butterfly and of eager's matmul is exact, so both round the same exact
  value): codes, scales, dequantized weights and the linear's output, bit for bit;
* the linear's GEMM and epilogue given the activation codes: bit for bit with eager's
  int4_linear on the same codes (integer accumulation == eager's float accumulation);
* on random inputs the rotation's sums are formed in another order than eager's matmul, so a
  rotated value may round to the other neighbour: a code may then differ by one step, and
  test_quantize_random_codes_differ_only_at_ties allows exactly that and nothing else: each
  differing code must be one step from eager's and eager's exact quotient must lie within the
  rotation's derived error bound (docs/parity.md, csrc/math/int4.h) of a rounding boundary.
"""
import math

import pytest
import torch

import comfy_kitchen_c.ops as ops
from comfy_kitchen_c import w4a4
from comfy_kitchen.backends.eager import convrot_w4a4 as EW
from comfy_kitchen.backends.eager.svdquant import _unpack_int4_row_major
from conftest import DTYPE_IDS, FLOAT_DTYPES, assert_bitwise_equal, kernels_of

DEVICES = ["cpu", "emulated"]
GROUPS = [4, 16, 256, 1024]
U32 = 2.0 ** -24  # float32 unit roundoff


def integer_weights(n, k, dtype, seed=0, step=0.25):
    """Small integers times a power of two: every rotation sum is exact in float32 (and the one
    rounding to a 16-bit type is of the same exact value in ours and in eager's)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(-8, 9, (n, k), generator=g).float() * step).to(dtype)


def random_weights(n, k, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=g)
    w[:, ::37] *= 8.0  # outlier columns, as ConvRot expects
    return w.to(dtype)


def eager_rotated(w, group):
    return EW._rotate_weight(w, EW._build_hadamard(group, dtype=w.dtype), group)


# ---- the codec ----------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_prepare_int4_every_byte(device):
    q = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.int8).reshape(4, 64)
    with kernels_of(device):
        for w in (q, q[:, :33], q.t().contiguous()[:7], q[:, ::2]):  # odd widths, non-contiguous
            assert_bitwise_equal(ops.prepare_int4_weight_for_int8_linear(w),
                                 EW.prepare_int4_weight_for_int8_linear(w), f"shape {tuple(w.shape)}")


# ---- the quantizer on eager's own rotated values ---------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("seed", [0, 7, 2**40 + 3])
def test_quantizer_on_eager_rotation_bit_exact(device, dtype, seed):
    x = eager_rotated(random_weights(24, 512, dtype, seed=1), 256)
    x[1] = 0.0                          # scale floor (float16: 1e-10 rounds to 0, so 0/0 -> code 0)
    x[2, 5] = float("nan")              # NaN row: NaN scale, codes 0
    x[3, 7] = float("inf")              # inf row: inf scale, finite values -> 0, inf/inf -> 0
    x[4] = x[4] * 1e-6                  # tiny scales (float16 subnormals)
    x[5, :] = torch.arange(512, dtype=torch.float32).remainder(15).sub(7).mul(0.5).to(dtype)  # x/s on ties
    ref_q, ref_s = EW.quantize_signed_int4_rowwise(x.clone(), stochastic_rounding=seed)
    with kernels_of(device):
        q, s = w4a4._quantize_rows("quantize_convrot_w4a4_weight", x, 0, seed)
    assert_bitwise_equal(q, ref_q, "codes")
    assert_bitwise_equal(s, ref_s, "scales")


# ---- whole ops, exact rotations: bit for bit --------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("group", GROUPS)
def test_quantize_exact_rotation_bit_exact(device, dtype, group):
    w = integer_weights(12, max(group, 128), dtype)
    with kernels_of(device):
        for seed in (0, 5):
            q, s = ops.quantize_convrot_w4a4_weight(w, group, 64, seed)
            rq, rs = EW.quantize_convrot_w4a4_weight(w, group, 64, seed)
            assert_bitwise_equal(q, rq, f"codes, seed {seed}")
            assert_bitwise_equal(s, rs, f"scales, seed {seed}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("group", GROUPS)
def test_dequantize_exact_bit_exact(device, dtype, group):
    """Power-of-two scales: code * scale * (+-2^-L) and all their sums are exact."""
    g = torch.Generator().manual_seed(group)
    k = max(group, 128)
    q = torch.randint(-128, 128, (10, k // 2), generator=g, dtype=torch.int32).to(torch.int8)
    scales = torch.pow(2.0, torch.randint(-20, 10, (10,), generator=g).float())
    with kernels_of(device):
        assert_bitwise_equal(ops.dequantize_convrot_w4a4_weight(q, scales, group, 64, dtype),
                             EW.dequantize_convrot_w4a4_weight(q, scales, group, 64, dtype), "dequantized")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("group", [16, 256])
def test_linear_exact_rotation_bit_exact(device, dtype, group):
    w = integer_weights(70, 256, torch.float32, seed=2)
    qw, ws = EW.quantize_convrot_w4a4_weight(w, group)
    x = integer_weights(2 * 5, 256, dtype, seed=3, step=0.5).reshape(2, 5, 256)
    bias = torch.randn(70).to(dtype)
    with kernels_of(device):
        for b in (None, bias, bias.float()):
            assert_bitwise_equal(ops.convrot_w4a4_linear(x, qw, ws.to(dtype), b, group),
                                 EW.convrot_w4a4_linear(x, qw, ws.to(dtype), b, group), "linear")


# ---- the GEMM and epilogue given the codes --------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_linear_gemm_bit_exact_given_codes(device, dtype):
    """Our linear equals eager's int4_linear on our activation codes, at K where the sums
    overflow float16 (out = inf as eager's) and with -8 nibbles in the weight."""
    g = torch.Generator().manual_seed(4)
    k, n = 1536, 67
    x = torch.randn(9, k, generator=g).to(dtype) * 30
    qw = torch.randint(-128, 128, (n, k // 2), generator=g, dtype=torch.int32).to(torch.int8)
    ws = (torch.rand(n, generator=g) * 40).to(dtype)
    bias = torch.randn(n, generator=g).to(dtype)
    with kernels_of(device):
        qa, xs = w4a4._quantize_rows("convrot_w4a4_linear", x, 64, 0)
        for b in (None, bias):
            ref = EW.int4_linear(qa, qw, xs, ws, b, dtype)
            assert_bitwise_equal(ops.convrot_w4a4_linear(x, qw, ws, b, 64), ref, f"bias {b is not None}")


def test_eager_cpu_matmul_accumulates_codes_exactly():
    """The premise of the exact accumulation (csrc/math/int4.h): torch's CPU matmul of int4 codes
    in each float dtype is the exact integer sum rounded once."""
    g = torch.Generator().manual_seed(5)
    a = torch.randint(-7, 8, (9, 4096), generator=g)
    b = torch.randint(-8, 8, (11, 4096), generator=g)
    exact = a @ b.t()
    for dtype in FLOAT_DTYPES:
        assert torch.equal(a.to(dtype) @ b.to(dtype).t(), exact.to(dtype)), dtype


# ---- random inputs: codes differ only at ties within the derived bound ----------------------------

def rotation_bound(w64, group):
    """Per element, a bound on |float32 rotation - exact rotation| for both ours (log2(G) levels of
    additions) and eager's matmul (a dot product of G terms in any order: G - 1 additions):
    (G - 1 + log2 G) * u * sum|x_i| / sqrt(G) over the element's group, covering both at once."""
    n, k = w64.shape
    mass = w64.abs().reshape(n, k // group, group).sum(-1, keepdim=True) / math.sqrt(group)
    return ((group - 1 + math.log2(group)) * U32 * mass).expand(n, k // group, group).reshape(n, k)


def assert_codes_at_ties(w, group, q, s, rq, rs):
    """Our (q, s) of quantize_convrot_w4a4_weight(w, group) against eager's (rq, rs): each code
    equal, or one step away where eager's exact quotient lies within the rotation's bound (plus
    the 16-bit rounding of the rotated value and of the quotient) of a rounding boundary; scales
    within the same bound."""
    n, k = w.shape
    dtype = w.dtype
    w64 = w.double()
    exact = (w64.reshape(n, -1, group) @ EW._build_hadamard(group, dtype=torch.float64).t()).reshape(n, k)
    bound = rotation_bound(w64, group)
    # ulp of the 16-bit type at the value: the rotated value's own rounding may go either way
    ulp = {torch.float32: 0.0, torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7}[dtype] * exact.abs()
    # scales: eager's absmax may round to the neighbour of ours only within the same bound
    row_tol = (bound.max(-1).values + ulp.max(-1).values) / 7 * (1 + 2 ** -7) + rs.double().abs() * 2 ** -7 * (
        dtype != torch.float32)
    assert bool(((s.double() - rs.double()).abs() <= row_tol).all()), "scales beyond the rotation's bound"
    same_scale = (s == rs).unsqueeze(1)
    codes, ref = _unpack_int4_row_major(q).long(), _unpack_int4_row_major(rq).long()
    quotient = exact / rs.double().unsqueeze(1)
    tie_dist = (quotient - quotient.floor() - 0.5).abs()
    tie_tol = (bound + ulp) / rs.double().unsqueeze(1) + 2.0 ** -7 * quotient.abs() * (dtype != torch.float32)
    differ = codes != ref
    assert bool(((codes - ref).abs() <= 1).all()), "a code differs by more than one step"
    unexplained = differ & same_scale & (tie_dist > tie_tol)
    assert not bool(unexplained.any()), (f"{int(unexplained.sum())} codes differ away from a rounding tie: "
                                         f"first quotient {float(quotient[unexplained][0])}")
    return int(differ.sum())


def assert_dequant_close(q, scales, group, ours, ref):
    """Both within the rotation's bound of the exact rotation before their final rounding."""
    w_rot = _unpack_int4_row_major(q).double() * scales.double().unsqueeze(1)
    bound = rotation_bound(w_rot, group)
    ulp = {torch.float32: 2.0 ** -24, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}[ours.dtype]
    o, r = ours.double(), ref.double()
    tol = 2 * bound * (1 + ulp) + 2 * ulp * r.abs().clamp(min=o.abs())
    assert bool(((o - r).abs() <= tol).all()), "dequantized weight beyond the rotation's bound"


def assert_linear_given_codes(x, qweight, wscales, bias, group, ours):
    """ours == eager's int4_linear on our own activation codes (exact GEMM and epilogue)."""
    x2d = x.reshape(-1, x.shape[-1]).contiguous()
    qa, xs = w4a4._quantize_rows("convrot_w4a4_linear", x2d, group, 0)
    ref = EW.int4_linear(qa, qweight, xs, wscales, bias, x.dtype)
    assert_bitwise_equal(ours, ref.reshape(*x.shape[:-1], qweight.shape[0]), "linear given our codes")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("group", [64, 256])
def test_quantize_random_codes_differ_only_at_ties(device, dtype, group):
    w = random_weights(24, 512, dtype, seed=group)
    with kernels_of(device):
        q, s = ops.quantize_convrot_w4a4_weight(w, group)
    rq, rs = EW.quantize_convrot_w4a4_weight(w, group)
    differ = assert_codes_at_ties(w, group, q, s, rq, rs)
    assert differ <= q.numel() * 2 // 100, f"{differ} differing codes"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_dequantize_random_within_bound(device, dtype):
    g = torch.Generator().manual_seed(9)
    q = torch.randint(-128, 128, (16, 128), generator=g, dtype=torch.int32).to(torch.int8)
    scales = torch.rand(16, generator=g) * 0.1
    with kernels_of(device):
        ours = ops.dequantize_convrot_w4a4_weight(q, scales, 256, 64, dtype)
    assert_dequant_close(q, scales, 256, ours, EW.dequantize_convrot_w4a4_weight(q, scales, 256, 64, dtype))


# ---- edge inputs -----------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_edges(device):
    w = integer_weights(8, 128, torch.bfloat16)
    qw, ws = EW.quantize_convrot_w4a4_weight(w, 16)
    with kernels_of(device):
        # non-contiguous weight (a transpose) and an empty one
        wt = integer_weights(128, 64, torch.float16).t()
        for a, b in zip(ops.quantize_convrot_w4a4_weight(wt, 16), EW.quantize_convrot_w4a4_weight(wt, 16)):
            assert_bitwise_equal(a, b, "non-contiguous")
        e = torch.zeros(0, 128)
        for a, b in zip(ops.quantize_convrot_w4a4_weight(e, 16), EW.quantize_convrot_w4a4_weight(e, 16)):
            assert_bitwise_equal(a, b, "empty")
        # K = 0 bytes of codes: empty rows of output, as eager
        assert_bitwise_equal(ops.prepare_int4_weight_for_int8_linear(qw[:, :0]),
                             EW.prepare_int4_weight_for_int8_linear(qw[:, :0]), "no columns")
        # eager's int4 unpacking fails on 0 rows (reshape to [0, -1]): ours refuse by name
        for call, arg in ((lambda: ops.dequantize_convrot_w4a4_weight(qw[:0], ws[:0], 16), "qdata"),
                          (lambda: ops.prepare_int4_weight_for_int8_linear(qw[:0]), "weight"),
                          (lambda: ops.convrot_w4a4_linear(torch.zeros(0, 128), qw, ws, None, 16), "x"),
                          (lambda: ops.convrot_w4a4_linear(torch.ones(3, 128), qw[:0], ws[:0], None, 16), "qweight")):
            with pytest.raises(ValueError, match=f"'{arg}': 0 rows"):
                call()
        # one row of x given as a vector
        x = torch.ones(128, dtype=torch.bfloat16)
        assert_bitwise_equal(ops.convrot_w4a4_linear(x, qw, ws, None, 16), EW.convrot_w4a4_linear(x, qw, ws, None, 16),
                             "x [K]")
        # NaN and inf rows in the linear
        x = integer_weights(4, 128, torch.float32)
        x[1, 3] = float("nan")
        x[2, 9] = float("inf")
        assert_bitwise_equal(ops.convrot_w4a4_linear(x, qw, ws, None, 16, 64, "int8"),
                             EW.convrot_w4a4_linear(x, qw, ws, None, 16, 64, "int8"), "NaN/inf rows")


# ---- bad inputs: a clear exception naming the op and the argument ----------------------------------

def bad_calls():
    w = torch.zeros(4, 128)
    qw = torch.zeros(4, 64, dtype=torch.int8)
    s = torch.ones(4)
    x = torch.zeros(2, 128)
    yield "quantize_convrot_w4a4_weight", "weight", (w.to(torch.int32),), TypeError
    yield "quantize_convrot_w4a4_weight", "weight", (torch.zeros(128),), ValueError
    yield "quantize_convrot_w4a4_weight", "weight", (torch.zeros(4, 96), 16), ValueError
    yield "quantize_convrot_w4a4_weight", "weight", (torch.zeros(4, 0),), ValueError
    yield "quantize_convrot_w4a4_weight", "convrot_groupsize", (w, 8), ValueError
    yield "quantize_convrot_w4a4_weight", "convrot_groupsize", (w, 4096), ValueError
    yield "quantize_convrot_w4a4_weight", "quant_group_size", (w, 16, 32), ValueError
    yield "quantize_convrot_w4a4_weight", "stochastic_rounding", (w, 16, 64, 1.5), TypeError
    yield "dequantize_convrot_w4a4_weight", "qdata", (qw.to(torch.uint8), s), TypeError
    yield "dequantize_convrot_w4a4_weight", "scales", (qw, torch.ones(3)), ValueError
    yield "dequantize_convrot_w4a4_weight", "convrot_groupsize", (qw, s, 1024), ValueError
    yield "dequantize_convrot_w4a4_weight", "output_dtype", (qw, s, 16, 64, torch.int8), TypeError
    yield "prepare_int4_weight_for_int8_linear", "weight", (torch.zeros(2, 2, 2, dtype=torch.int8),), ValueError
    yield "prepare_int4_weight_for_int8_linear", "weight", (torch.zeros(2, 2),), TypeError
    yield "convrot_w4a4_linear", "x", (torch.zeros(2, 64), qw, s), ValueError
    yield "convrot_w4a4_linear", "x", (x.to(torch.int8), qw, s, None, 16), TypeError
    yield "convrot_w4a4_linear", "qweight", (x, qw.float(), s, None, 16), TypeError
    yield "convrot_w4a4_linear", "wscales", (x, qw, torch.ones(5), None, 16), ValueError
    yield "convrot_w4a4_linear", "bias", (x, qw, s, torch.ones(3), 16), ValueError
    yield "convrot_w4a4_linear", "convrot_groupsize", (x, qw, s, None, 5), ValueError
    yield "convrot_w4a4_linear", "linear_dtype", (x, qw, s, None, 16, 64, "fp8"), ValueError
    yield "convrot_w4a4_linear", "quant_group_size", (x, qw, s, None, 16, 128), ValueError


@pytest.mark.parametrize("op, arg, args, exc", list(bad_calls()), ids=lambda v: v if isinstance(v, str) else None)
def test_bad_input_names_op_and_argument(op, arg, args, exc):
    with pytest.raises(exc) as info:
        getattr(ops, op)(*args)
    assert op in str(info.value) and f"'{arg}'" in str(info.value), str(info.value)
