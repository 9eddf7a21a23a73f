# SPDX-License-Identifier: Apache-2.0
"""The CPU kernels' rms factor (csrc/cpu/rms_impl.h: aten's cascade sum with its 32 streams side by
side) against eager, bit for bit, at row lengths where each level of the cascade flushes: 544 values
(level 0 into 1), 3,072 + 8 + 3 (six such flushes, a leftover vector and 3 scalars), 8,192 + 40
(level 1 into 2), 131,072 + 11 (level 2 into 3, a leftover vector and 3 scalars).  The rows'
magnitudes spread over 8 binades, so another order of the same squares gives another factor; the
test checks that it would.  Every instruction-set build this CPU runs, and rms_gated_residual's GPU
kernel on the emulated device (math/rms.h's cascade, a stream per lane)."""

import pytest
import torch
from comfy_kitchen.backends.eager.residual import rms_gated_residual as E_residual

import comfy_kitchen_c.ops as ops
from comfy_kitchen_c import _C
from conftest import RMS_NORM_ACT, E, assert_bitwise_equal, requires_ck

ROW_LENGTHS = (544, 3072 + 8 + 3, 8192 + 40, 131072 + 11)


@pytest.fixture(params=_C.cpu_isas(), autouse=True)
def isa(request):
    saved = _C.cpu_isa()
    _C.set_cpu_isa(request.param)
    yield request.param
    _C.set_cpu_isa(saved)


def spread_rows(rows: int, k: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, k, generator=g) * torch.exp2(torch.randint(-4, 5, (rows, k), generator=g).float())


def other_order_differs(x: torch.Tensor, eps: float) -> bool:
    """Whether the float64-exact mean of the squares gives another normalized row than torch's."""
    exact = (x.double().pow(2).sum(-1, keepdim=True) / x.shape[-1]).float()
    return not torch.equal(x * torch.rsqrt(exact + eps), torch.nn.functional.rms_norm(x, (x.shape[-1],), eps=eps))


@pytest.mark.parametrize("k", ROW_LENGTHS)
def test_rms_gated_residual_every_cascade_level(k, isa):
    x = spread_rows(16, k, k)
    assert other_order_differs(x, 1e-5), "the summation order is not observable on these rows"
    w, r, gate = (torch.randn(k, generator=torch.Generator().manual_seed(s)) for s in (1, 2, 3))
    for dtype in (torch.float32, torch.bfloat16):
        args = (x.to(dtype), w.to(dtype), r.to(dtype), gate.to(dtype))
        ref = E_residual(*args)
        assert_bitwise_equal(ops.rms_gated_residual(*args), ref, f"k={k} {dtype}")
        if isa == _C.cpu_isas()[0]:  # the GPU kernel's scalar cascade per lane (math/rms.h), once
            from comfy_kitchen_c.testing import emulated_device
            with emulated_device():
                assert_bitwise_equal(ops.rms_gated_residual(*args), ref, f"emulated k={k} {dtype}")


@requires_ck(*RMS_NORM_ACT)
@pytest.mark.parametrize("k", ROW_LENGTHS)
def test_int8_linear_rms_norm_every_cascade_level(k):
    x = spread_rows(15, k, k)  # below linear.py's LIBRARY_GEMM_MIN_ROWS: our fused rms_norm, not torch's
    assert other_order_differs(x, 1e-6), "the summation order is not observable on these rows"
    g = torch.Generator().manual_seed(7)
    w = torch.randint(-127, 128, (8, k), generator=g, dtype=torch.int8)
    ws = torch.full((8,), 0.002)
    kw = dict(input_act="rms_norm", input_act_weight=torch.rand(k, generator=g) + 0.5, input_act_eps=1e-6)
    assert_bitwise_equal(ops.int8_linear(x, w, ws, None, torch.float32, **kw),
                         E.int8_linear(x, w, ws, None, torch.float32, **kw), f"k={k}")
