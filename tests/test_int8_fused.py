# SPDX-License-Identifier: Apache-2.0
"""The fused int8 linear ops of comfy_kitchen 0.2.40 against its eager backend, on the CPU and
on the emulated device: int8_linear's rms_norm and situ activations and its residual form,
int8_linear_modulated, int8_linear_rms_modulated, and dequantize_int8_embedding.

Tolerances (each stated where used):
- rms_norm, the modulations, the residual form, the embedding without rotation: bit for bit.
  rms_norm follows aten's CPU rms_norm step by step (float32 squares summed in torch's cascade
  order, / K, + eps, 1 / sqrt, (x * r) * w rounded once); the modulation rounds 1 + s to s's
  dtype and the product to the promoted dtype; the residual is one float32 fma (aten's
  addcmul contracts to one), rounded to out_dtype.
- situ: its tanh and sigmoid are libm's where aten uses its vectorized ones, so the bound of
  test_int8_linear's activations (assert_activation_close) applies, as for gelu_tanh.
- Rotation (convrot, a rotated embedding): the butterfly's stated bound against eager; the
  rest is checked exactly against our own path on eager's activated input.
"""
import pytest
import torch

from comfy_kitchen_c import ArgumentError, ArgumentTypeError, ops
from comfy_kitchen_c.testing import emulated_device

from conftest import (DTYPE_IDS, FLOAT_DTYPES, MODULATED, RESIDUAL, RMS_NORM_ACT, E, assert_bitwise_equal,
                      assert_rotation_close, ck_lacks, ck_lacks_reason, requires_ck)
from test_int8_linear import assert_activation_close, make, run_on

DEVICES = ["cpu", "emulated"]


def on(device, fn, *args, **kwargs):
    if device == "cpu":
        return fn(*args, **kwargs)
    with emulated_device():
        return fn(*args, **kwargs)


# ---- rms_norm ----

RMS_SHAPES = [(5, 4, 8), (3, 8, 16), (9, 9, 16), (33, 96, 20), (1, 100, 24), (17, 1000, 12), (4, 4100, 8)]


@requires_ck(*RMS_NORM_ACT)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", RMS_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_rms_norm_input_act_is_bit_for_bit(device, dtype, shape):
    m, k, n = shape
    x, w, ws, b = make(m, k, n, dtype, "channel", bias=True)
    g = torch.Generator().manual_seed(k)
    for weight_dtype, eps in ((torch.float32, 1e-6), (dtype, 0.0), (torch.bfloat16, None)):
        nw = (torch.randn(k, generator=g) + 1).to(weight_dtype)
        args = (x, w, ws, b, torch.bfloat16)
        kw = dict(input_act="rms_norm", input_act_weight=nw, input_act_eps=eps)
        ours = on(device, ops.int8_linear, *args, **kw)
        assert_bitwise_equal(ours, E.int8_linear(*args, **kw), f"{device} {weight_dtype} eps={eps}")


@requires_ck(*RMS_NORM_ACT)
def test_rms_norm_follows_torchs_summation_order():
    """torch's CPU sum of a float32 row is a cascade over 8-lane vectors (csrc/math/rms.h);
    rms_norm inherits it.  A row where another order of the same squares gives another r (here
    the float64-exact sum) still gives eager's bits with ours: the order is what matters."""
    k = 3072
    x = (torch.randn(64, k, generator=torch.Generator().manual_seed(1)) * 3)
    nw = torch.ones(k)
    exact = (x.double().pow(2).sum(-1, keepdim=True) / k).float()
    other = (x * torch.rsqrt(exact + 1e-6)) * nw
    eager = torch.nn.functional.rms_norm(x, (k,), weight=nw, eps=1e-6)
    assert not torch.equal(other, eager), "another summation order is not observable on these rows"
    w = torch.randint(-127, 128, (16, k), generator=torch.Generator().manual_seed(2), dtype=torch.int8)
    ws = torch.full((16,), 0.002)
    kw = dict(input_act="rms_norm", input_act_weight=nw, input_act_eps=1e-6)
    for device in DEVICES:
        assert_bitwise_equal(on(device, ops.int8_linear, x, w, ws, None, torch.float32, **kw),
                             E.int8_linear(x, w, ws, None, torch.float32, **kw), device)


@requires_ck(*RMS_NORM_ACT)
@pytest.mark.parametrize("device", DEVICES)
def test_rms_norm_of_zero_and_nonfinite_rows(device):
    x, w, ws, _ = make(4, 64, 8, torch.bfloat16)
    x[0] = 0  # eps = 0: 0 * inf = NaN, as eager
    x[1, 3] = float("inf")
    x[2, 5] = float("nan")
    nw = torch.ones(64)
    for eps in (0.0, 1e-5):
        kw = dict(input_act="rms_norm", input_act_weight=nw, input_act_eps=eps)
        assert_bitwise_equal(on(device, ops.int8_linear, x, w, ws, None, torch.float32, **kw),
                             E.int8_linear(x, w, ws, None, torch.float32, **kw), f"eps={eps}")


# ---- situ ----

@requires_ck("input_act='situ'")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_situ(device, dtype):
    x, w, ws, _ = make(33, 96, 20, dtype, "channel", act="situ")
    x = x * 10  # reach the soft caps (|hidden| ~ 25, |gate| ~ 4)
    ours = on(device, ops.int8_linear, x, w, ws, None, torch.bfloat16, input_act="situ")
    ref = E.int8_linear(x, w, ws, None, torch.bfloat16, input_act="situ")
    assert_activation_close(ours, ref, f"situ {dtype} {device}")


def test_situ_on_the_emulated_device_matches_the_cpu():
    """Both run ckc_situ (csrc/math/activation.h) with the host's libm."""
    x, w, ws, b = make(19, 256, 24, torch.bfloat16, "channel", bias=True, act="situ")
    args = (x * 10, w, ws, b, torch.float16, True, 64, "situ")
    assert_bitwise_equal(on("emulated", ops.int8_linear, *args), ops.int8_linear(*args), "situ G=64")


# ---- activations with the rotation, the GPU path against the CPU's ----

@pytest.mark.parametrize("act", ["rms_norm", "situ", "swiglu"])
@pytest.mark.parametrize("group", [16, 256])
def test_activations_with_rotation_gpu_matches_cpu(act, group):
    x, w, ws, b = make(37, 512, 40, torch.bfloat16, "channel", bias=True, act=act)
    nw = torch.randn(512).to(torch.float16) if act == "rms_norm" else None
    args = (x, w, ws, b, torch.float32, True, group, act, nw, 1e-6)
    assert_bitwise_equal(on("emulated", ops.int8_linear, *args), ops.int8_linear(*args), f"{act} G={group}")


# ---- the residual form ----

@requires_ck(*RESIDUAL)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("out_dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_residual_is_bit_for_bit(device, out_dtype):
    for m in (1, 6):  # the GPU path's GEMV and GEMM + epilogue
        x, w, ws, b = make(m, 64, 40, torch.bfloat16, "channel", bias=True, seed=m)
        g = torch.Generator().manual_seed(m)
        cases = [  # (residual, residual_scale)
            ((torch.randn(m, 40, generator=g) * 3).to(torch.float16), torch.randn(40, generator=g)),
            (torch.randn(m, 40, generator=g) * 3, torch.randn(1, 40, generator=g).to(torch.bfloat16)),
            ((torch.randn(40, generator=g) * 3).to(out_dtype), torch.tensor([0.5])),  # broadcast over rows
        ]
        for residual, scale in cases:
            kw = dict(residual=residual, residual_scale=scale)
            ours = on(device, ops.int8_linear, x, w, ws, b, out_dtype, **kw)
            assert_bitwise_equal(ours, E.int8_linear(x, w, ws, b, out_dtype, **kw),
                                 f"m={m} {residual.dtype}{list(residual.shape)} {scale.dtype}{list(scale.shape)}")


def test_residual_float32_is_one_fused_multiply_add():
    """aten's float32 addcmul rounds residual + y * s once; a separate product and sum would
    differ on these inputs (so the bitwise test above can fail)."""
    x, w, ws, _ = make(64, 64, 40, torch.float32, "channel")
    g = torch.Generator().manual_seed(3)
    residual, scale = torch.randn(64, 40, generator=g), torch.randn(40, generator=g)
    y = ops.int8_linear(x, w, ws, None, torch.float32)
    assert not torch.equal(residual + y * scale, torch.addcmul(residual, y, scale))
    assert_bitwise_equal(ops.int8_linear(x, w, ws, None, torch.float32, residual=residual, residual_scale=scale),
                         torch.addcmul(residual, y, scale), "fma")


# ---- int8_linear_modulated and int8_linear_rms_modulated ----

MOD_DTYPES = [  # (x, modulation scale, norm weight): promotions included
    (torch.bfloat16, torch.bfloat16, torch.bfloat16),
    (torch.float16, torch.float16, torch.float32),
    (torch.float32, torch.bfloat16, torch.float16),
    (torch.bfloat16, torch.float32, torch.float32),  # x * (1 + s) in float32
    (torch.bfloat16, torch.float16, torch.bfloat16),  # bfloat16 * float16: float32
]


@requires_ck(*MODULATED)
@pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtypes", MOD_DTYPES, ids=lambda d: "-".join(DTYPE_IDS[FLOAT_DTYPES.index(t)] for t in d))
def test_modulated_ops_are_bit_for_bit(device, dtypes):
    x_dtype, s_dtype, w_dtype = dtypes
    for m in (1, 37):
        x, w, ws, b = make(m, 96, 24, x_dtype, "channel", bias=True, lead=(1, m), seed=m)
        g = torch.Generator().manual_seed(m)
        s = (torch.randn(96, generator=g) * 0.5).to(s_dtype)
        nw = (torch.randn(96, generator=g) + 1).to(w_dtype)
        mod = on(device, ops.int8_linear_modulated, x, s, w, ws, b, torch.float16)
        assert_bitwise_equal(mod, E.int8_linear_modulated(x, s, w, ws, b, torch.float16), f"modulated m={m}")
        rms = on(device, ops.int8_linear_rms_modulated, x, nw, 1e-5, s, w, ws, b)
        assert_bitwise_equal(rms, E.int8_linear_rms_modulated(x, nw, 1e-5, s, w, ws, b), f"rms m={m}")


@pytest.mark.parametrize("device", DEVICES)
def test_modulated_ops_with_rotation(device):
    """Against our own int8_linear on eager's modulated (and normalized) rows: the
    modulation is exact, the rotation's difference from eager is test_convrot's subject."""
    x, w, ws, b = make(21, 256, 24, torch.bfloat16, "channel", bias=True)
    s = torch.randn(256) * 0.3
    nw = torch.randn(256).to(torch.bfloat16)
    modulated = x * (1.0 + s)
    want = on(device, ops.int8_linear, modulated, w, ws, b, torch.bfloat16, True, 64)
    assert_bitwise_equal(on(device, ops.int8_linear_modulated, x, s, w, ws, b, torch.bfloat16, True, 64), want, "mod")
    normalized = torch.nn.functional.rms_norm(x, (256,), nw, 1e-6) * (1.0 + s)
    want = on(device, ops.int8_linear, normalized, w, ws, b, torch.bfloat16, True, 64)
    assert_bitwise_equal(on(device, ops.int8_linear_rms_modulated, x, nw, 1e-6, s, w, ws, b, torch.bfloat16,
                            True, 64), want, "rms")


# ---- dequantize_int8_embedding ----

def embedding_table(vocab=300, dim=64, scale="row", dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randint(-127, 128, (vocab, dim), generator=g, dtype=torch.int8)
    s = {"row": torch.rand(vocab, 1, generator=g) * 0.01, "full": torch.rand(vocab, dim, generator=g) * 0.01,
         "scalar": torch.tensor(0.004), "one": torch.tensor([0.003])}[scale].to(dtype)
    return q, s


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scale", ["row", "full", "scalar", "one"])
@pytest.mark.parametrize("code", [0, 1, 2])
@pytest.mark.parametrize("dim", [64, 256])  # the GPU's element path, and its warp walk (rows of >= 128)
def test_embedding_is_bit_for_bit(device, scale, code, dim):
    q, s = embedding_table(dim=dim, scale=scale, dtype=torch.bfloat16 if scale == "row" else torch.float32)
    g = torch.Generator().manual_seed(code)
    for indices in (torch.randint(0, 300, (7,), generator=g), torch.randint(0, 300, (2, 3), generator=g).int(),
                    torch.tensor(299)):
        ours = on(device, ops.dequantize_int8_embedding, q, s, indices, 0, code)
        assert_bitwise_equal(ours, E.dequantize_int8_embedding(q, s, indices, 0, code), f"{list(indices.shape)}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("group", [16, 256])
def test_rotated_embedding(device, group):
    q, s = embedding_table(dim=512, scale="row")
    indices = torch.tensor([[3, 1, 4], [1, 5, 9]])
    for code in (0, 2):
        ours = on(device, ops.dequantize_int8_embedding, q, s, indices, group, code)
        assert_rotation_close(ours, E.dequantize_int8_embedding(q, s, indices, group, code), f"G={group} {code}")
        # the gathered rows are the table's rows dequantized (ConvRot weight's own op)
        table = on(device, ops.dequantize_int8_convrot_weight_dtype, q, s, group, code)
        assert_bitwise_equal(ours, table[indices], f"G={group} gather")


def test_embedding_index_out_of_range():
    """The CPU refuses it; the GPU (no host sync to check) makes its row NaN."""
    q, s = embedding_table()
    with pytest.raises(ArgumentError, match="dequantize_int8_embedding: argument 'indices': index 300"):
        ops.dequantize_int8_embedding(q, s, torch.tensor([0, 300]), 0, 0)
    for group in (0, 16):
        out = on("emulated", ops.dequantize_int8_embedding, q, s, torch.tensor([0, -1, 2]), group, 0)
        assert bool(out[1].isnan().all()) and not bool(out[[0, 2]].isnan().any()), f"G={group}"
    q, s = embedding_table(dim=256)  # the warp walk's rows
    out = on("emulated", ops.dequantize_int8_embedding, q, s, torch.tensor([0, 300, 2, -5]), 0, 0)
    assert bool(out[[1, 3]].isnan().all()) and not bool(out[[0, 2]].isnan().any()), "the walk"


def test_embedding_of_no_indices():
    q, s = embedding_table()
    out = ops.dequantize_int8_embedding(q, s, torch.zeros(0, 2, dtype=torch.long), 0, 1)
    assert out.shape == (0, 2, 64) and out.dtype == torch.float16


# ---- bad input ----

def bad_fused_calls():
    x, w, ws, _ = make(4, 64, 8, torch.bfloat16)
    q, s = embedding_table()
    lin = dict(x=x, weight=w, weight_scale=ws)
    return [
        (ops.int8_linear, ArgumentTypeError, "int8_linear: argument 'input_act_weight' is required",
         dict(lin, input_act="rms_norm")),
        (ops.int8_linear, ArgumentError, "int8_linear: argument 'input_act_weight': expected shape",
         dict(lin, input_act="rms_norm", input_act_weight=torch.ones(1, 64))),
        (ops.int8_linear, ArgumentTypeError, "int8_linear: argument 'input_act_eps'",
         dict(lin, input_act="rms_norm", input_act_weight=torch.ones(64), input_act_eps="1e-6")),
        (ops.int8_linear, ArgumentError, "int8_linear: argument 'x': situ needs an even row length",
         dict(x=x[:, :63], weight=w[:, :31], weight_scale=ws, input_act="situ")),
        (ops.int8_linear, ArgumentError, "int8_linear: argument 'residual': shape",
         dict(lin, residual=torch.ones(4, 9), residual_scale=torch.ones(8))),
        (ops.int8_linear, ArgumentError, "int8_linear: argument 'residual_scale': expected 1 or 8",
         dict(lin, residual=torch.ones(4, 8), residual_scale=torch.ones(4, 8))),
        (ops.int8_linear_modulated, ArgumentError, "int8_linear_modulated: argument 'modulation_scale'",
         dict(x=x, modulation_scale=torch.ones(2, 64), weight=w, weight_scale=ws)),
        (ops.int8_linear_modulated, ArgumentTypeError, "int8_linear_modulated: argument 'weight_scale' is required",
         dict(x=x, modulation_scale=torch.ones(64), weight=w, weight_scale=None)),
        (ops.int8_linear_rms_modulated, ArgumentError, "int8_linear_rms_modulated: argument 'norm_weight'",
         dict(x=x, norm_weight=torch.ones(63), norm_eps=1e-6, modulation_scale=torch.ones(64), weight=w,
              weight_scale=ws)),
        (ops.dequantize_int8_embedding, ArgumentError, "dequantize_int8_embedding: argument 'scale'",
         dict(q=q, scale=torch.ones(300), indices=torch.tensor([1]), group_size=0, output_dtype_code=0)),
        (ops.dequantize_int8_embedding, ArgumentTypeError, "dequantize_int8_embedding: argument 'indices'",
         dict(q=q, scale=s, indices=torch.tensor([1.0]), group_size=0, output_dtype_code=0)),
        (ops.dequantize_int8_embedding, ArgumentError, "dequantize_int8_embedding: argument 'group_size'",
         dict(q=q, scale=s, indices=torch.tensor([1]), group_size=48, output_dtype_code=0)),
        (ops.dequantize_int8_embedding, ArgumentError, "dequantize_int8_embedding: argument 'output_dtype_code'",
         dict(q=q, scale=s, indices=torch.tensor([1]), group_size=0, output_dtype_code=5)),
    ]


@pytest.mark.parametrize("i", range(13))
def test_bad_input_names_op_and_argument(i):
    fn, exc, message, kwargs = bad_fused_calls()[i]
    with pytest.raises(exc, match=message):
        fn(**kwargs)


# ---- rows eager leaves undefined ----

@pytest.mark.parametrize("device", DEVICES)
def test_a_row_not_finite_after_its_activation_is_nan(device):
    """docs/parity.md ("Results where eager's are undefined"): a row whose quantized input (after the
    activation, rms_norm or the modulation) holds a NaN or an inf has a non-finite scale and codes
    0, so its outputs are 0 * scale = NaN, the bias and the residual included; the other rows are
    eager's."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 32, generator=g, dtype=torch.float32).to(torch.float16)
    x[0, 3], x[1, 5] = float("nan"), float("inf")
    x[2] = 60000.0  # finite, but x * (1 + s) overflows float16 in the modulated ops
    w = torch.randint(-127, 128, (8, 32), generator=g, dtype=torch.int8)
    ws, bias = torch.rand(8, generator=g) + 0.1, torch.randn(8, generator=g)
    residual = dict(residual=torch.randn(4, 8, generator=g), residual_scale=torch.randn(8, generator=g))
    ms = torch.ones(32, dtype=torch.float16)
    nw = torch.ones(32)
    cases = [
        ((x, w, ws, bias, torch.float32), dict(input_act="gelu_tanh"), ops.int8_linear, "int8_linear", 2, ()),
        ((x, w, ws, bias, torch.float32), residual, ops.int8_linear, "int8_linear", 2, RESIDUAL),
        ((x, w, ws, bias, torch.float32), dict(input_act="rms_norm", input_act_weight=nw), ops.int8_linear,
         "int8_linear", 2, RMS_NORM_ACT),
        ((x, ms, w, ws, bias, torch.float32), {}, ops.int8_linear_modulated, "int8_linear_modulated", 3,
         MODULATED[:1]),
    ]
    # the cases whose eager reference the installed comfy_kitchen has run; the others skip the
    # test afterwards, with what is missing
    missing = [f for case in cases for f in ck_lacks(*case[-1])]
    for args, kw, ours_fn, eager_name, bad_rows, needs in cases:
        if ck_lacks(*needs):
            continue
        eager_fn = getattr(E, eager_name)
        ours = on(device, ours_fn, *args, **kw)
        assert bool(ours[:bad_rows].isnan().all()), (ours_fn.__name__, kw.keys())
        assert_bitwise_equal(ours[bad_rows:], eager_fn(*args, **kw)[bad_rows:], ours_fn.__name__)
    if missing:
        pytest.skip(ck_lacks_reason(dict.fromkeys(missing)) + " (the other cases passed)")
