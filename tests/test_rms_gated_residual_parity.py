# SPDX-License-Identifier: Apache-2.0
"""Parity of rms_gated_residual with comfy_kitchen's eager backend, bit for bit, on the CPU kernels
and on the GPU kernels (emulated device): every dtype of activation, gate and residual (each of
eager's three steps rounds to its own promoted dtype), gate and residual per row, per batch, per
position and one for all, row lengths on each path of the rms sum, NaN/Inf, empty, refusals."""

import pytest
import torch
from comfy_kitchen.backends.eager.residual import rms_gated_residual as E

import comfy_kitchen_c.ops as ops
from comfy_kitchen_c._C import ArgumentError, ArgumentTypeError
from conftest import DTYPE_IDS, FLOAT_DTYPES, assert_bitwise_equal, kernels_of


def _t(shape, dtype, g, scale=1.0):
    return (torch.randn(shape, generator=g) * scale).to(dtype)


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("act_dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("gate_dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("res_dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_every_dtype_mix(device, act_dtype, gate_dtype, res_dtype):
    g = torch.Generator().manual_seed(1)
    a, w = _t((2, 5, 64), act_dtype, g, 3.0), _t((64,), act_dtype, g)
    r, gate = _t((2, 5, 64), res_dtype, g), _t((2, 1, 64), gate_dtype, g)
    with kernels_of(device):
        assert_bitwise_equal(ops.rms_gated_residual(a, w, r, gate, 1e-5), E(a, w, r, gate, 1e-5), "mix")


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("act_shape", [(1, 7, 3072), (2, 3, 6), (3, 8), (2, 4, 40), (1, 2, 576)])
@pytest.mark.parametrize("form", ["full", "batch", "position", "one"])
def test_broadcasts_and_row_lengths(device, act_shape, form):
    g = torch.Generator().manual_seed(2)
    lead, d = act_shape[:-1], act_shape[-1]
    shape = {"full": lead, "batch": (lead[0],) + (1,) * (len(lead) - 1), "position": (1,) + lead[1:],
             "one": ()}[form] + (d,)
    a, w = _t(act_shape, torch.bfloat16, g, 2.0), _t((d,), torch.bfloat16, g)
    r, gate = _t(act_shape, torch.bfloat16, g), _t(shape, torch.bfloat16, g)
    r2 = _t(shape, torch.float32, g)
    with kernels_of(device):
        assert_bitwise_equal(ops.rms_gated_residual(a, w, r, gate), E(a, w, r, gate), f"gate {form}")
        assert_bitwise_equal(ops.rms_gated_residual(a, w, r2, gate, 1e-6), E(a, w, r2, gate, 1e-6),
                             f"residual {form}")


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("eps", [0.0, 1e-5, 1.0])
def test_nan_inf_and_zero_rows(device, eps):
    g = torch.Generator().manual_seed(3)
    a, w = _t((4, 16), torch.float16, g), _t((16,), torch.float16, g)
    r, gate = _t((4, 16), torch.float16, g), _t((4, 16), torch.float16, g)
    a[0, 3], a[1] = float("nan"), 0.0
    a[2, 5], gate[3, 1], r[3, 2] = float("inf"), float("inf"), -float("inf")
    with kernels_of(device):
        assert_bitwise_equal(ops.rms_gated_residual(a, w, r, gate, eps), E(a, w, r, gate, eps), "special")


@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_empty_and_strided(device):
    """No rows: an empty result, as eager.  A strided activation gets the contiguous row's bits
    (eager's own depend on the layout: docs/parity.md)."""
    a = torch.randn(0, 3, 8)
    w, r, gate = torch.rand(8), torch.randn(0, 3, 8), torch.randn(8)
    big = torch.randn(3, 8, 6).bfloat16()
    s = big.transpose(1, 2)  # [3, 6, 8], not contiguous
    rs, gs, ws = torch.randn(3, 6, 8).bfloat16(), torch.randn(3, 1, 8).bfloat16(), torch.rand(8).bfloat16()
    with kernels_of(device):
        assert_bitwise_equal(ops.rms_gated_residual(a, w, r, gate), E(a, w, r, gate), "empty")
        assert_bitwise_equal(ops.rms_gated_residual(s, ws, rs, gs), E(s.contiguous(), ws, rs, gs), "strided")


@pytest.mark.parametrize("call,needle", [
    (lambda: ops.rms_gated_residual(torch.randn(2, 8), torch.rand(7), torch.randn(2, 8), torch.randn(8)),
     "argument 'norm_weight': 7 values"),
    (lambda: ops.rms_gated_residual(torch.randn(2, 8), torch.rand(8), torch.randn(2, 8), torch.randn(2, 1)),
     "argument 'gate': shape [2, 1] is not served"),
    (lambda: ops.rms_gated_residual(torch.randn(2, 3, 8), torch.rand(8), torch.randn(2, 3, 8), torch.randn(2, 1, 1, 8)),
     "argument 'gate'"),
    (lambda: ops.rms_gated_residual(torch.randn(2, 3, 4, 8), torch.rand(8), torch.randn(2, 3, 4, 8),
                                    torch.randn(2, 1, 4, 8)), "argument 'gate': shape [2, 1, 4, 8] broadcasts"),
    (lambda: ops.rms_gated_residual(torch.randn(2, 8), torch.rand(8), torch.randn(3, 2, 8), torch.randn(8)),
     "argument 'residual'"),
    (lambda: ops.rms_gated_residual(torch.randn(2, 8).double(), torch.rand(8), torch.randn(2, 8), torch.randn(8)),
     "argument 'activation': expected dtype"),
    (lambda: ops.rms_gated_residual(torch.randn(2, 8), torch.rand(8), torch.randn(2, 8), torch.randn(8), "x"),
     "argument 'eps': expected a float"),
])
def test_refusals_name_op_and_argument(call, needle):
    with pytest.raises((ArgumentError, ArgumentTypeError), match="rms_gated_residual: " + needle.replace("(", r"\(")
                       .replace("[", r"\[")):
        call()
