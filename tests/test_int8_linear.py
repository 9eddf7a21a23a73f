# SPDX-License-Identifier: Apache-2.0
"""int8_linear: parity with comfy_kitchen's eager backend on the CPU and on the emulated
device (the GPU launcher, chunking, the cuBLASLt stand-in, the epilogue and GEMV kernels),
chunking under a tiny memory bound, and bad input.

Tolerances (each stated where used):
- No rotation, with or without a bias: bit for bit.  Both quantize rows identically, the
  int32 sums are exact, and the epilogue forms float(acc) * (x_scale * w_scale), rounds it to
  out_dtype and adds the bias rounded to out_dtype in out_dtype, as eager.
- Rotation: our Walsh-Hadamard butterfly sums in another order than eager's matmul, so the
  codes may differ within the project's stated bound (conftest.assert_rotated_quant_close);
  the GEMM and epilogue are then checked exactly against our own codes.
"""
import pytest
import torch

import comfy_kitchen_c
from comfy_kitchen_c import ArgumentError, ArgumentTypeError, ops
from comfy_kitchen_c.testing import emulated_device

from conftest import DTYPE_IDS, FLOAT_DTYPES, E, assert_bitwise_equal, assert_rotated_quant_close

from comfy_kitchen.backends._activations import apply_input_act
from comfy_kitchen.tensor.int8_utils import _build_hadamard, _rotate_activation


def make(m, k, n, dtype, scale="channel", bias=False, act=None, seed=0, lead=None):
    g = torch.Generator().manual_seed(seed)
    kin = 2 * k if act in ("swiglu", "situ") else k
    x = (torch.randn(*(lead or (m,)), kin, generator=g) * 3).to(dtype)
    w = torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8)
    ws = {"scalar": torch.tensor(0.004), "channel": torch.rand(n, generator=g) * 0.01 + 0.001,
          "column": torch.rand(n, 1, generator=g) * 0.01 + 0.001}[scale]
    b = (torch.randn(n, generator=g) * 4).to(dtype) if bias else None
    return x, w, ws, b


def check_against_eager(x, w, ws, b, out_dtype, what, run=ops.int8_linear):
    assert_bitwise_equal(run(x, w, ws, b, out_dtype), E.int8_linear(x, w, ws, b, out_dtype), what)


SHAPES = [(1, 64, 48), (3, 100, 30), (64, 67, 17), (257, 256, 33)]  # K % 4 != 0, odd K and N
SCALES = ["scalar", "channel", "column"]
OUT_DTYPES = [torch.bfloat16, torch.float16, torch.float32]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_matches_eager(shape, dtype):
    m, k, n = shape
    for i, scale in enumerate(SCALES):
        out_dtype = OUT_DTYPES[(i + SHAPES.index(shape)) % 3]
        for bias in (False, True):
            x, w, ws, b = make(m, k, n, dtype, scale, bias, seed=i)
            check_against_eager(x, w, ws, b, out_dtype, f"{shape} {dtype} {scale} bias={bias} -> {out_dtype}")


def test_out_dtype_none_is_bfloat16_as_comfy_kitchen():
    x, w, ws, _ = make(4, 32, 8, torch.float16)
    y = ops.int8_linear(x, w, ws)
    assert y.dtype == torch.bfloat16
    assert_bitwise_equal(y, E.int8_linear(x, w, ws, None, torch.bfloat16), "default out_dtype")


def test_leading_dimensions_and_one_dimensional_x():
    x, w, ws, b = make(0, 64, 24, torch.bfloat16, lead=(2, 5))
    y = ops.int8_linear(x, w, ws, None, torch.bfloat16)
    assert y.shape == (2, 5, 24)
    assert_bitwise_equal(y, E.int8_linear(x, w, ws, None, torch.bfloat16), "3-D x")
    y1 = ops.int8_linear(x[0, 0], w, ws, None, torch.bfloat16)
    assert y1.shape == (24,)
    assert_bitwise_equal(y1, y[0, 0], "1-D x")


@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_any_rank_x_gives_the_rows_of_its_matrix(device):
    """x [..., K] goes to the C op as it is (its rows of K), out comes back [..., N]: every rank,
    a non-contiguous x and a bias give the outputs of the same rows passed as a matrix."""
    run = run_on(device)
    x, w, ws, b = make(0, 64, 24, torch.float16, bias=True, lead=(3, 2, 5))
    for rows in (x, x[0], x[0, 0], x[0, 0, 0], x.transpose(0, 1)):
        y = run(rows, w, ws, b, torch.bfloat16)
        matrix = run(rows.reshape(-1, 64), w, ws, b, torch.bfloat16)
        assert y.shape == (*rows.shape[:-1], 24), rows.shape
        assert_bitwise_equal(y, matrix.reshape(y.shape), f"{tuple(rows.shape)} {device}")


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("bias_dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("out_dtype", OUT_DTYPES, ids=["bf16", "f16", "f32"])
def test_bias_is_rounded_to_the_output_dtype_and_added_in_it(device, out_dtype, bias_dtype):
    """The bias comes in its own dtype and the epilogue gives eager's
    round_out(round_out(p) + round_out(bias)), p = float(acc) * (x_scale * w_scale) (the float32
    output without a bias).  Where a single rounding of p + bias would differ (16-bit outputs),
    it does on these inputs: checked, so that this test can fail."""
    run = run_on(device)
    for m in (1, 6):  # the GPU path's GEMV (epilogue fused) and GEMM + epilogue kernel
        x, w, ws, _ = make(m, 64, 40, torch.bfloat16, "channel", seed=m)
        bias = (torch.randn(40, generator=torch.Generator().manual_seed(m)) * 4).to(bias_dtype)
        product = run(x, w, ws, None, torch.float32)
        want = (product.to(out_dtype) + bias.to(out_dtype)).to(out_dtype)
        assert_bitwise_equal(run(x, w, ws, bias, out_dtype), want, f"m={m} {device}")
        if out_dtype != torch.float32:
            once = (product + bias.to(out_dtype).float()).to(out_dtype)
            assert not torch.equal(once, want), f"m={m}: the two roundings are not observable"


@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_one_value_bias_is_broadcast(device):
    run = run_on(device)
    x, w, ws, _ = make(5, 64, 24, torch.bfloat16)
    for bias in (torch.tensor([1.5]), torch.tensor(-0.25, dtype=torch.float16)):
        assert_bitwise_equal(run(x, w, ws, bias, torch.float16), run(x, w, ws, bias.expand(24), torch.float16),
                             f"{bias} {device}")


def eager_codes(x, act, group):
    """Eager's activated, rotated and quantized rows (int8_linear's steps 1-5)."""
    xa = apply_input_act(x, act)
    if group:
        xa = _rotate_activation(xa, _build_hadamard(group, device=x.device, dtype=x.dtype), group)
    return E.quantize_int8_rowwise(xa.reshape(-1, xa.shape[-1]))


def linear_from_codes(q, sx, w, ws, out_dtype):
    """Eager's GEMM and epilogue (steps 6-7) on given codes: exact int32 sums, one rounding."""
    acc = q.int() @ w.int().T
    return (acc.float() * (sx * ws.float().reshape(1, -1))).to(out_dtype)


@pytest.mark.parametrize("group", [4, 16, 64, 256])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_convrot(group, dtype):
    x, w, ws, _ = make(19, 256, 40, dtype, "channel")
    ours = ops.int8_linear(x, w, ws, None, torch.float32, True, group)
    # Our codes vs eager's: the rotation's stated bound.
    q, s = ops.quantize_and_rotate_rowwise(x, None, group)
    q_ref, s_ref = eager_codes(x, None, group)
    assert_rotated_quant_close(q, s, q_ref, s_ref, f"codes G={group} {dtype}")
    # GEMM and epilogue exactly as eager's on those codes.
    assert_bitwise_equal(ours, linear_from_codes(q, s, w, ws, torch.float32), f"linear G={group} {dtype}")


# The activation is computed in float32 in aten's order and rounded to x's dtype as eager
# does (csrc/math/activation.h), but with libm's tanhf/expf where aten uses its own
# vectorized (1-ulp) versions, possibly with FMA contraction: an activated value can land on
# the other side of a rounding boundary, which moves a code (or, at a row's maximum, the row's
# scale by one unit of x's dtype; after a float32 rotation every value of the row, and so its
# scale, moves by float32 ulps).  So: at least 99% of outputs agree with the reference within
# 1e-5 of the output's range (a scale a few float32 ulps off), and all within 2^-6 of it
# (about two quantization steps of a row).
ACT_MIN_AGREEING = 0.99
ACT_AGREE_RELATIVE = 1e-5
ACT_MAX_RELATIVE = 2.0**-6


def assert_activation_close(ours, ref, what):
    diff = (ours.float() - ref.float()).abs() / ref.float().abs().max()
    agree = float((diff <= ACT_AGREE_RELATIVE).float().mean())
    assert agree >= ACT_MIN_AGREEING, f"{what}: only {agree:.2%} of outputs agree"
    assert float(diff.max()) <= ACT_MAX_RELATIVE, f"{what}: relative difference {float(diff.max())}"


@pytest.mark.parametrize("act", ["gelu_tanh", "swiglu", "none"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_input_act(act, dtype):
    x, w, ws, b = make(33, 96, 20, dtype, "channel", bias=False, act=act)
    ours = ops.int8_linear(x, w, ws, None, torch.bfloat16, input_act=act)
    ref = E.int8_linear(x, w, ws, None, torch.bfloat16, input_act=act)
    assert_activation_close(ours, ref, f"{act} {dtype}")
    # With the rotation, against our own path on eager's activated input (the rotation's
    # own difference from eager is test_convrot's subject).
    rotated = ops.int8_linear(x, w, ws, None, torch.float32, True, 16, act)
    preactivated = ops.int8_linear(apply_input_act(x, act), w, ws, None, torch.float32, True, 16)
    assert_activation_close(rotated, preactivated, f"{act} {dtype} rotated")


@pytest.fixture
def memory_limit():
    saved = comfy_kitchen_c.linear_memory_limit()
    yield comfy_kitchen_c.set_linear_memory_limit
    comfy_kitchen_c.set_linear_memory_limit(saved)


def run_on(device):
    """int8_linear on the CPU kernels or through the GPU path on the emulated device."""
    def run(*args, **kwargs):
        if device == "cpu":
            return ops.int8_linear(*args, **kwargs)
        with emulated_device():
            return ops.int8_linear(*args, **kwargs)
    return run


@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_chunks_give_the_same_result(memory_limit, device):
    run = run_on(device)
    x, w, ws, b = make(37, 64, 24, torch.bfloat16, "channel", bias=True, act="swiglu")
    whole = run(x, w, ws, b, torch.float16, True, 16, "swiglu")
    per_row = 64 + 4 + 4 * 32 + 2 * 64  # codes, scale, accumulator (padded on the GPU), activated row
    for limit in (1, 3 * per_row + 5 * 256, 10 * per_row + 5 * 256):
        memory_limit(limit)
        assert_bitwise_equal(run(x, w, ws, b, torch.float16, True, 16, "swiglu"), whole, f"limit {limit}")


def test_memory_limit_is_settable_and_checked(memory_limit):
    memory_limit(1 << 20)
    assert comfy_kitchen_c.linear_memory_limit() == 1 << 20
    with pytest.raises(ArgumentError, match="set_linear_memory_limit: argument 'nbytes'"):
        comfy_kitchen_c.set_linear_memory_limit(0)


# ---- the GPU path on the emulated device ----

EMULATED_CASES = [
    # (m, k, n, dtype, scale, bias, convrot group, act)
    (1, 64, 40, torch.bfloat16, "channel", True, 0, None),        # GEMV, 16-byte rows
    (1, 67, 9, torch.float16, "scalar", False, 0, None),          # GEMV, scalar tail
    (1, 256, 24, torch.float32, "column", True, 64, "gelu_tanh"),  # GEMV after fused act + rotation
    (3, 100, 30, torch.bfloat16, "scalar", True, 0, None),        # padded K and N
    (64, 67, 17, torch.float16, "channel", False, 0, "swiglu"),
    (40, 512, 48, torch.bfloat16, "channel", True, 256, None),
    (17, 1024, 16, torch.float32, "channel", False, 1024, "swiglu"),
    (9, 8192, 16, torch.bfloat16, "scalar", False, 256, None),    # rows longer than one segment
    (33, 96, 16, torch.bfloat16, "channel", True, 0, "swiglu"),    # the plain tile's warp walk, swiglu
    (33, 96, 16, torch.float16, "channel", False, 0, "swiglu"),
]


@pytest.mark.parametrize("case", EMULATED_CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}-G{c[6]}-{c[7]}")
def test_emulated_device_matches_the_cpu_path(case):
    """The GPU kernels do the CPU kernels' arithmetic in the same order (both without FMA
    contraction, the same libm activation), so the two paths agree bit for bit."""
    m, k, n, dtype, scale, bias, group, act = case
    x, w, ws, b = make(m, k, n, dtype, scale, bias, act=act)
    args = (x, w, ws, b, torch.bfloat16, group > 0, group or 256, act)
    cpu = ops.int8_linear(*args)
    with emulated_device():
        gpu = ops.int8_linear(*args)
    assert_bitwise_equal(gpu, cpu, "emulated vs cpu")


@pytest.mark.parametrize("shape", [(1, 100, 30), (5, 100, 30), (64, 67, 17)], ids=str)
def test_emulated_device_matches_eager(shape):
    m, k, n = shape
    x, w, ws, b = make(m, k, n, torch.bfloat16, "channel", bias=True)
    check_against_eager(x, w, ws, b, torch.bfloat16, f"emulated {shape}", run=run_on("emulated"))


def test_emulated_device_misaligned_weight():
    """A weight view whose data is not 16-byte aligned is copied for the GEMM and read with
    the scalar loop by the GEMV."""
    x, _, ws, b = make(6, 64, 32, torch.bfloat16, "channel", bias=True)
    storage = torch.randint(-127, 128, (32 * 64 + 1,), dtype=torch.int8)
    w = storage[1:].view(32, 64)
    assert w.data_ptr() % 16 != 0
    for rows in (x, x[:1]):
        check_against_eager(rows, w, ws, b, torch.bfloat16, f"misaligned {rows.shape[0]}", run=run_on("emulated"))


# ---- bad input ----

def bad_calls():
    x, w, ws, b = make(4, 64, 8, torch.bfloat16)
    return [
        (ArgumentTypeError, "'weight'", dict(x=x, weight=w.float(), weight_scale=ws)),
        (ArgumentError, "'weight'", dict(x=x, weight=w[:, :32], weight_scale=ws)),
        (ArgumentError, "'weight_scale'", dict(x=x, weight=w, weight_scale=torch.ones(3))),
        (ArgumentError, "'bias'", dict(x=x, weight=w, weight_scale=ws, bias=torch.ones(5))),
        (ArgumentTypeError, "'out_dtype'", dict(x=x, weight=w, weight_scale=ws, out_dtype=torch.int8)),
        (ArgumentError, "'convrot_groupsize'", dict(x=x, weight=w, weight_scale=ws, convrot=True,
                                                    convrot_groupsize=48)),
        (ArgumentError, "'input_act'", dict(x=x, weight=w, weight_scale=ws, input_act="relu")),
        (ArgumentError, "'x'", dict(x=x[:, :63], weight=w[:, :31], weight_scale=ws, input_act="swiglu")),
        (ArgumentError, "'residual_scale'", dict(x=x, weight=w, weight_scale=ws, residual=torch.ones(4, 8))),
        (ArgumentTypeError, "'x'", dict(x=x.int(), weight=w, weight_scale=ws)),
        (ArgumentError, "'x'", dict(x=x[:0], weight=w, weight_scale=ws)),
        (ArgumentTypeError, "'convrot'", dict(x=x, weight=w, weight_scale=ws, convrot=1)),
    ]


@pytest.mark.parametrize("i", range(12))
def test_bad_input_names_op_and_argument(i):
    exc, name, kwargs = bad_calls()[i]
    with pytest.raises(exc, match=f"int8_linear: argument {name}"):
        ops.int8_linear(**kwargs)


@pytest.mark.parametrize("isa", comfy_kitchen_c._C.cpu_isas())
def test_every_cpu_isa_gives_the_same_bits(isa):
    """The GEMM has an AVX2 micro-kernel; int32 sums are exact in any order, so every
    instruction set's build gives the same result."""
    x, w, ws, b = make(37, 200, 21, torch.bfloat16, "channel", bias=True, act="gelu_tanh")
    saved = comfy_kitchen_c._C.cpu_isa()
    try:
        comfy_kitchen_c._C.set_cpu_isa(isa)
        mine = ops.int8_linear(x, w, ws, b, torch.float32, True, 4, "gelu_tanh")
        comfy_kitchen_c._C.set_cpu_isa("baseline")
        assert_bitwise_equal(mine, ops.int8_linear(x, w, ws, b, torch.float32, True, 4, "gelu_tanh"), isa)
    finally:
        comfy_kitchen_c._C.set_cpu_isa(saved)


def test_the_kernel_checks_its_own_arguments():
    """The C op (what ops.int8_linear calls) rejects what the Python layer would never pass:
    a scratch too small for one row, a weight of the wrong shape, an unknown activation, an
    output without x's leading dimensions, a bias of the wrong length."""
    x, w, ws, _ = make(4, 64, 8, torch.bfloat16)
    out = torch.empty(4, 8, dtype=torch.bfloat16)

    def call(x=x, weight=w, bias=None, out=out, scratch_bytes=4096, act=0):
        scratch = torch.empty(scratch_bytes, dtype=torch.uint8)
        comfy_kitchen_c._C.int8_linear("int8_linear", x.__dlpack__(), weight.__dlpack__(), ws.__dlpack__(),
                                       None if bias is None else bias.__dlpack__(), out.__dlpack__(),
                                       scratch.__dlpack__(), None, None, None, None, None, act, 0, 1, 1, 0, -1, 0,
                                       1)

    call()
    assert_bitwise_equal(out, E.int8_linear(x, w, ws, None, torch.bfloat16), "direct call")
    out3 = torch.empty(2, 2, 8, dtype=torch.bfloat16)
    call(x=x.view(2, 2, 64), out=out3)
    assert_bitwise_equal(out3, out.view(2, 2, 8), "3-D direct call")
    with pytest.raises(ArgumentError, match="int8_linear: argument 'scratch'"):
        call(scratch_bytes=64)
    with pytest.raises(ArgumentError, match="int8_linear: argument 'weight'"):
        call(weight=w[:7])
    with pytest.raises(ArgumentError, match="int8_linear: argument 'input_act'"):
        call(act=7)
    with pytest.raises(ArgumentError, match="int8_linear: argument 'act_weight' is required"):
        call(act=3)
    with pytest.raises(ArgumentError, match=r"int8_linear: argument 'out': expected shape \(2, 2, 8\)"):
        call(x=x.view(2, 2, 64))
    with pytest.raises(ArgumentError, match="int8_linear: argument 'out'"):
        call(out=torch.empty(4, 0, dtype=torch.bfloat16))
    with pytest.raises(ArgumentError, match="int8_linear: argument 'bias'"):
        call(bias=torch.ones(9))


@pytest.mark.parametrize("value,bits", [(0.0, 0), (-0.0, 0x80000000), (1e-6, 0x358637BD), (1e-5, 0x3727C5AC)])
def test_eps_goes_to_c_as_its_float32_bits_with_the_sign_of_zero(value, bits):
    """linear._float_bits skips the struct round trip for +0.0 (every call without rms_norm): -0.0
    compares equal to it and must not take that path (nor a cache keyed by value)."""
    from comfy_kitchen_c import linear

    assert linear._float_bits(value) == bits
