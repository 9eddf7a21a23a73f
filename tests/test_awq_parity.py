# SPDX-License-Identifier: Apache-2.0
"""Parity of gemv_awq_w4a16 with comfy_kitchen's eager backend, on the CPU and on the emulated
device.  The weight's values are eager's bits (a one-hot x reads them out exactly: one product, no
rounding of the sum); the outputs are within the bound of docs/parity.md (comfy_kitchen_c/awq_bound.py), computed
per output from sum_k |x_k W_nk|, not a tolerance."""

import sys
from pathlib import Path

import pytest
import torch
from comfy_kitchen.backends.eager.awq import gemv_awq_w4a16 as eager_awq

import comfy_kitchen_c.ops as ops
from conftest import DTYPE_IDS, FLOAT_DTYPES, assert_bitwise_equal, kernels_of

sys.path.insert(0, str(Path(__file__).resolve().parent / "fuzz"))
from comfy_kitchen_c.awq_bound import assert_within, bound, eager_weight  # noqa: E402

DEVICES = ["cpu", "emulated"]
OP = "gemv_awq_w4a16"


def awq_weight(n, k, group, dtype, seed=0):
    """Random packed codes, scales and zero points as AWQ checkpoints have them."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randint(-128, 128, (n, k // 2), dtype=torch.int8, generator=g)
    s = (torch.rand(k // group, n, generator=g) * 0.02 + 0.001).to(dtype)
    z = (torch.randn(k // group, n, generator=g) * 0.05).to(dtype)
    return q, s, z


def check(x, q, s, z, bias=None, group=64, what=""):
    ours = ops.gemv_awq_w4a16(x, q, s, z, bias, group)
    ref = eager_awq(x, q, s, z, bias, group)
    assert_within(ours, ref, bound(x, q, s, z, bias, group), what)
    return ours, ref


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_weight_values_are_eagers_bits(device, dtype):
    """x = rows of the identity: y[., n] is W[n, k] itself, for every (n, k)."""
    n, k, group = 24, 96, 32
    q, s, z = awq_weight(n, k, group, dtype, seed=1)
    w = eager_weight(q, s, z, group)
    with kernels_of(device):
        for k0 in range(0, k, 16):
            x = torch.eye(k, dtype=dtype)[k0:k0 + 16]
            assert_bitwise_equal(ops.gemv_awq_w4a16(x, q, s, z, None, group), w[:, k0:k0 + 16].t().contiguous(),
                                 f"columns {k0}..")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("rows", [1, 3, 16, 40])  # 40: beyond the small batches it is made for
def test_within_bound(device, dtype, rows):
    n, k = (40, 256) if device == "emulated" else (96, 1024)
    q, s, z = awq_weight(n, k, 64, dtype, seed=rows)
    x = torch.randn(rows, k, generator=torch.Generator().manual_seed(rows)).to(dtype)
    bias = torch.randn(n).to(dtype)
    with kernels_of(device):
        check(x, q, s, z, None, 64, "no bias")
        ours, ref = check(x, q, s, z, bias, 64, "bias")
    # the bound is no blanket: a wrong weight or a dropped group breaks it
    broken = ours.double().clone()
    broken[0, 0] += ref.double().abs().max()
    with pytest.raises(AssertionError):
        assert_within(broken.to(ours.dtype), ref, bound(x, q, s, z, bias, 64))


@pytest.mark.parametrize("device", DEVICES)
def test_shapes_groups_bias_dtypes_layouts(device):
    q, s, z = awq_weight(20, 96, 32, torch.bfloat16, seed=3)
    x = torch.randn(2, 3, 96).to(torch.float16)  # x in another dtype: eager's x.to(compute)
    with kernels_of(device):
        check(x, q, s, z, None, 32, "3-D x")
        check(x[0, 0], q, s, z, None, 32, "1-D x")
        check(x.transpose(0, 1), q, s, z, None, 32, "non-contiguous x")
        check(x, q, s, z, torch.randn(20), 32, "float32 bias: promoted")
        check(x, q, s, z, torch.randn(20).half(), 32, "float16 bias: promoted")
        qo, so, zo = awq_weight(20, 90, 15, torch.float16, seed=4)  # odd group: groups split bytes
        check(torch.randn(3, 90), qo, so, zo, None, 15, "group 15")
        check(torch.randn(3, 96), q, s.t().contiguous().t(), z, None, 32, "strided wscales")
        check(torch.randn(5, 96), q.t().contiguous().t(), s, z, torch.randn(20).bfloat16(), 32, "strided qweight")


@pytest.mark.parametrize("device", DEVICES)
def test_empty_and_special_values(device):
    q, s, z = awq_weight(8, 64, 32, torch.bfloat16, seed=5)
    x = torch.randn(4, 64).bfloat16()
    x[1, 3] = float("nan")
    x[2, 5] = float("inf")
    x[3, 0] = 3e38
    with kernels_of(device):
        check(x, q, s, z, None, 32, "NaN, inf, huge")
        for xe in (torch.zeros(0, 64).bfloat16(), torch.zeros(2, 0, 64).bfloat16()):
            assert_bitwise_equal(ops.gemv_awq_w4a16(xe, q, s, z, None, 32), eager_awq(xe, q, s, z, None, 32), "empty")
            with_bias = ops.gemv_awq_w4a16(xe, q, s, z, torch.ones(8), 32)
            assert with_bias.dtype == eager_awq(xe, q, s, z, torch.ones(8), 32).dtype == torch.float32


def _bad(**over):
    q, s, z = awq_weight(8, 64, 32, torch.bfloat16)
    args = dict(x=torch.randn(2, 64).bfloat16(), qweight=q, wscales=s, wzeros=z, bias=None, group_size=32)
    args.update(over)
    return args


@pytest.mark.parametrize("arg, args", [
    ("x", _bad(x=torch.randn(2, 64).double())),
    ("qweight", _bad(x=torch.randn(2, 96).bfloat16())),
    ("x", _bad(x=torch.tensor(1.0))),
    ("x", _bad(x=torch.zeros(2, 0).bfloat16(), qweight=torch.zeros(8, 0, dtype=torch.int8),
               wscales=torch.ones(0, 8).bfloat16(), wzeros=torch.ones(0, 8).bfloat16())),  # eager fails too
    ("qweight", _bad(qweight=torch.zeros(0, 32, dtype=torch.int8), wscales=torch.ones(2, 0).bfloat16(),
                     wzeros=torch.ones(2, 0).bfloat16())),  # eager fails too
    ("qweight", _bad(qweight=torch.zeros(8, 32, dtype=torch.uint8))),
    ("qweight", _bad(qweight=torch.zeros(8, 32, 1, dtype=torch.int8))),
    ("wscales", _bad(wscales=torch.ones(2, 9).bfloat16())),
    ("wscales", _bad(wscales=torch.ones(2, 8, dtype=torch.int32))),
    ("wzeros", _bad(wzeros=torch.ones(2, 8).half())),
    ("wzeros", _bad(wzeros=torch.ones(1, 8).bfloat16())),
    ("bias", _bad(bias=torch.ones(9))),
    ("bias", _bad(bias=torch.ones(1, 8))),
    ("bias", _bad(bias=torch.ones(8, dtype=torch.int64))),
    ("group_size", _bad(group_size=48)),
    ("group_size", _bad(group_size=0)),
    ("group_size", _bad(group_size=32.0)),
])
def test_refused_calls_name_op_and_argument(arg, args):
    with pytest.raises((ops.ArgumentError, ops.ArgumentTypeError), match=rf"^{OP}: argument '{arg}'"):
        ops.gemv_awq_w4a16(**args)


def test_emulated_device_is_not_the_cpu_order():
    """Both devices within the bound, each in its own order (docs/parity.md): the test above covers both."""
    q, s, z = awq_weight(16, 512, 64, torch.float32, seed=9)
    x = torch.randn(2, 512)
    cpu = ops.gemv_awq_w4a16(x, q, s, z)
    with kernels_of("emulated"):
        emu = ops.gemv_awq_w4a16(x, q, s, z)
    assert_within(emu, cpu, 2 * bound(x, q, s, z, None, 64), "emulated vs cpu")
