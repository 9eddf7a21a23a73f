# SPDX-License-Identifier: Apache-2.0
"""AWQ W4A16 checkpoints through comfy_kitchen's own TensorCoreAWQW4A16Layout with backend "c"
first, on the CPU and on the emulated device, forward under torch.inference_mode() and
torch.no_grad(): the modulation linears of Qwen-Image-Edit (img_mod.1 / txt_mod.1: silu of the
conditioning, one row per image, into 6 x DIM).  Every call the layout makes must run in "c" and
match eager's on the same arguments within the bound of docs/parity.md (tests/test_comfy_layers.py's
`served`, with gemv_awq_w4a16 checked by comfy_kitchen_c/awq_bound.py).

The call sequence against comfy_kitchen 0.2.40 (comfy_kitchen/tensor/awq_w4a16.py):

  loading   offline-quantized only: QuantizedTensor(qweight, "TensorCoreAWQW4A16Layout",
              Params(scale=wscales, zeros=wzeros, group_size=64, ...)) from the state dict
  linear    inference_mode: aten.linear -> ck.gemv_awq_w4a16(x, q, wscales, wzeros, bias=b, group_size=64)
            no_grad:        aten.t (the layout flips `transposed`) + aten.addmm / aten.mm
                            -> ck.gemv_awq_w4a16(x, q, wscales, wzeros, bias=b or None, group_size=64)
"""
import inspect
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import comfy_kitchen as ck
import comfy_kitchen.tensor.awq_w4a16  # noqa: F401 (registers the layout)
from comfy_kitchen.backends.eager.awq import gemv_awq_w4a16 as eager_awq
from comfy_kitchen.registry import registry
from comfy_kitchen.tensor.awq_w4a16 import TensorCoreAWQW4A16Layout
from comfy_kitchen.tensor.base import QuantizedTensor

import test_comfy_layers as layers
from conftest import saved_priority
from test_comfy_layers import device_context, served

sys.path.insert(0, str(Path(__file__).resolve().parent / "fuzz"))
from comfy_kitchen_c.awq_bound import assert_within, bound  # noqa: E402

DIM, G = 256, 64
OUT = 6 * 64  # the modulation's 6 chunks, narrowed to keep the emulated device quick


def awq_weight(n, k, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randint(-128, 128, (n, k // 2), dtype=torch.int8, generator=g)
    s = (torch.rand(k // G, n, generator=g) * 0.02 + 0.001).to(torch.bfloat16)
    z = (torch.randn(k // G, n, generator=g) * 0.05).to(torch.bfloat16)
    params = TensorCoreAWQW4A16Layout.Params(scale=s, orig_dtype=torch.bfloat16, orig_shape=(n, k), zeros=z,
                                             group_size=G)
    return QuantizedTensor(q, "TensorCoreAWQW4A16Layout", params)


class Modulation:
    """img_mod.1 with a bias and txt_mod.1 without, as two AWQ linears on silu(conditioning)."""

    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.img = awq_weight(OUT, DIM, 1)
        self.img_bias = (torch.randn(OUT, generator=g) * 0.1).to(torch.bfloat16)
        self.txt = awq_weight(OUT, DIM, 2)

    def forward(self, c):
        h = F.silu(c)
        return F.linear(h, self.img, self.img_bias), F.linear(h, self.txt)


@pytest.fixture(autouse=True)
def c_first(monkeypatch):
    """Backend "c" first, and served's per-call check taking gemv_awq_w4a16 within its bound."""
    import comfy_kitchen_c

    real = layers._check_call
    checked = []

    def check_call(func, args, kwargs, ours):
        if func != "gemv_awq_w4a16":
            return real(func, args, kwargs, ours)
        a = inspect.signature(eager_awq).bind(*args, **kwargs)
        a.apply_defaults()
        ref = eager_awq(**a.arguments)
        assert_within(ours, ref, bound(*a.arguments.values()), "gemv_awq_w4a16 in the layout")
        checked.append(func)

    monkeypatch.setattr(layers, "_check_call", check_call)
    with saved_priority(registry):
        comfy_kitchen_c.activate()
        yield checked


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("grad_mode", ["inference_mode", "no_grad"])
@pytest.mark.parametrize("rows", [1, 2])
def test_modulation_runs_in_c_within_the_bound(c_first, device, grad_mode, rows):
    m = Modulation()
    c = torch.randn(rows, DIM, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    mode = torch.inference_mode if grad_mode == "inference_mode" else torch.no_grad
    with mode(), device_context(device), served() as calls:
        img, txt = m.forward(c)
    assert dict(calls) == {("gemv_awq_w4a16", "c"): 2}, dict(calls)
    assert c_first == ["gemv_awq_w4a16"] * 2  # each call checked against eager within the bound
    with mode(), ck.use_backend("eager"):
        ref_img, ref_txt = m.forward(c)
    h = F.silu(c)
    for o, r, w, b in ((img, ref_img, m.img, m.img_bias), (txt, ref_txt, m.txt, None)):
        assert o.shape == r.shape == (rows, OUT) and o.dtype == r.dtype == torch.bfloat16
        assert_within(o, r, bound(h, w._qdata, w._params.scale, w._params.zeros, b, G), f"{device} {grad_mode}")


def test_the_count_sees_a_call_that_falls_through(monkeypatch):
    """The checks above can fail: with "c" refusing gemv_awq_w4a16, the layout's calls go to eager."""
    import comfy_kitchen_c.backend as backend

    caps = backend.capabilities()
    del caps["gemv_awq_w4a16"]
    monkeypatch.setattr(registry, "_capabilities", {**registry._capabilities, "c": set(caps)})
    with torch.inference_mode(), served() as calls:
        Modulation().forward(torch.randn(1, DIM).to(torch.bfloat16))
    assert calls[("gemv_awq_w4a16", "eager")] == 2 and ("gemv_awq_w4a16", "c") not in calls
