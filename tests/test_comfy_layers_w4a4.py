# SPDX-License-Identifier: Apache-2.0
"""ComfyUI's path through comfy_kitchen's ConvRot W4A4 layout (TensorCoreConvRotW4A4Layout), with
backend "c" first: a tiny MLP-like stack on the CPU and on the emulated device, forward under
torch.inference_mode() and torch.no_grad().  Every op the layout calls must run in "c" and match
eager's on the same arguments within the op's stated bound (tests/test_w4a4_parity.py's checks,
each call checked as it happens through test_comfy_layers.served); the whole forward is compared
with the eager backend's forward.

The calls, as comfy_kitchen 0.2.40's layout makes them:
  loading   QuantizedTensor.from_float(w, "TensorCoreConvRotW4A4Layout", convrot_groupsize=G)
              -> registry "quantize_convrot_w4a4_weight"(w, G, 64, stochastic_rounding=0)
  staging   empty_like copies filled as ComfyUI fills them (test_comfy_layers.staged)
  linear    inference_mode: aten.linear -> "convrot_w4a4_linear"(x, q, s, bias, G, 64, "int4")
            no_grad:        aten.t + aten.addmm / aten.mm -> "convrot_w4a4_linear"(x2d, q, s, bias|None, ...)
  text enc. weight.dequantize() every forward -> "dequantize_convrot_w4a4_weight"(q, s, G, 64, dtype)
  LoRA      from_float(w + delta, ..., stochastic_rounding=seed) -> "quantize_convrot_w4a4_weight"

Bounds per call: quantization codes equal to eager's or one step off at a rounding tie within the
rotation's bound, scales within it; the dequantized weight within the rotation's bound; the
linear bit for bit with eager's int4_linear on our activation codes.  The whole stack against
eager's forward: chained, a code one step off moves the next layer's input, so the two differ by
about one int4 step: less than eager's own distance from the unquantized forward, and ours no
farther from it than 1.05 times eager (test_comfy_layers' factor)."""
import pytest
import torch
import torch.nn.functional as F

import comfy_kitchen as ck
import test_comfy_layers as layers
from comfy_kitchen.registry import registry
from comfy_kitchen.tensor.base import QuantizedTensor
from conftest import saved_priority
from test_w4a4_parity import assert_codes_at_ties, assert_dequant_close, assert_linear_given_codes

DIM, HIDDEN, G = 256, 512, 64
c_first = layers.c_first  # its autouse fixture ("c" first), over this module's model
W4A4_OPS = {"quantize_convrot_w4a4_weight", "dequantize_convrot_w4a4_weight", "convrot_w4a4_linear"}


def check_w4a4_call(func, args, kwargs, ours):
    """A W4A4 op's result against eager's on the same arguments, within its bound."""
    names = {"quantize_convrot_w4a4_weight": ("weight", "convrot_groupsize", "quant_group_size",
                                              "stochastic_rounding"),
             "dequantize_convrot_w4a4_weight": ("qdata", "scales", "convrot_groupsize", "quant_group_size",
                                                "output_dtype"),
             "convrot_w4a4_linear": ("x", "qweight", "wscales", "bias", "convrot_groupsize", "quant_group_size",
                                     "linear_dtype")}[func]
    a = dict(zip(names, args), **kwargs)
    ref = getattr(registry._backends["eager"], func)(*args, **kwargs)
    if func == "quantize_convrot_w4a4_weight":
        assert_codes_at_ties(a["weight"], a["convrot_groupsize"], *ours, *ref)
    elif func == "dequantize_convrot_w4a4_weight":
        assert_dequant_close(a["qdata"], a["scales"], a["convrot_groupsize"], ours, ref)
    else:
        assert_linear_given_codes(a["x"], a["qweight"], a["wscales"], a.get("bias"), a["convrot_groupsize"], ours)


@pytest.fixture(scope="module")
def w4a4_checks():
    """test_comfy_layers.served checks each call through its _check_call: the W4A4 ops with their
    own bounds, every other op as there (for this module's tests, loading included)."""
    other = layers._check_call

    def check(func, args, kwargs, ours):
        return (check_w4a4_call if func in W4A4_OPS else other)(func, args, kwargs, ours)
    layers._check_call = check
    try:
        yield
    finally:
        layers._check_call = other


def w4a4_weight(n, k, seed, stochastic_rounding=0):
    w = (torch.randn(n, k, generator=torch.Generator().manual_seed(seed)) * 0.05).to(torch.bfloat16)
    return QuantizedTensor.from_float(w, "TensorCoreConvRotW4A4Layout", convrot_groupsize=G,
                                      stochastic_rounding=stochastic_rounding)


class TinyW4A4:
    """Two W4A4 linears with a GELU between (an MLP), a projection without bias, and a
    text-encoder-style linear whose weight is dequantized every forward."""

    def __init__(self):
        g = torch.Generator().manual_seed(0)

        def vec(n):
            return (torch.randn(n, generator=g) * 0.1).to(torch.bfloat16)

        self.up = layers.Linear(layers.staged(w4a4_weight(HIDDEN, DIM, 1), False), vec(HIDDEN))
        self.down = layers.Linear(layers.staged(w4a4_weight(DIM, HIDDEN, 2), True), vec(DIM))
        self.proj = layers.Linear(layers.staged(w4a4_weight(DIM, DIM, 3), False), None)
        self.text = layers.Linear(w4a4_weight(DIM, DIM, 4, stochastic_rounding=11), None)

    def forward(self, x):
        h = F.gelu(F.linear(x, self.up.weight, self.up.bias))
        x = x + F.linear(h, self.down.weight, self.down.bias)
        x = F.linear(x, self.proj.weight)
        return F.linear(x, self.text.weight.dequantize())

    def float_forward(self, x):
        def w(layer):
            with ck.use_backend("eager"):
                return layer.weight.dequantize().float()
        x = x.float()
        h = F.gelu(F.linear(x, w(self.up), self.up.bias.float()))
        x = x + F.linear(h, w(self.down), self.down.bias.float())
        return F.linear(F.linear(x, w(self.proj)), w(self.text))


@pytest.fixture(scope="module")
def model(w4a4_checks):
    import comfy_kitchen_c

    with saved_priority(registry):
        comfy_kitchen_c.activate()
        with layers.served() as calls:
            m = TinyW4A4()
        yield m, calls


def test_loading_quantizes_in_c(model):
    _, calls = model
    assert dict(calls) == {("quantize_convrot_w4a4_weight", "c"): 4}, dict(calls)


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("grad_mode", ["inference_mode", "no_grad"])
def test_forward_runs_every_op_in_c_and_matches_eager(model, device, grad_mode):
    m, _ = model
    x = (torch.randn(2, 5, DIM, generator=torch.Generator().manual_seed(1))).to(torch.bfloat16)
    mode = torch.inference_mode if grad_mode == "inference_mode" else torch.no_grad
    with mode(), layers.device_context(device), layers.served() as calls:
        out = m.forward(x)
    assert all(backend == "c" for _, backend in calls), f"fell through: {dict(calls)}"
    assert {op: n for (op, _), n in calls.items()} == {"convrot_w4a4_linear": 3, "dequantize_convrot_w4a4_weight": 1}
    with mode(), ck.use_backend("eager"):
        ref = m.forward(x)
    assert out.shape == ref.shape == (2, 5, DIM) and out.dtype == ref.dtype == torch.bfloat16
    exact = m.float_forward(x)
    ours_err, eager_err = layers.rel_l2(out, exact), layers.rel_l2(ref, exact)
    assert layers.rel_l2(out, ref) <= eager_err, (layers.rel_l2(out, ref), eager_err)
    assert ours_err <= 1.05 * eager_err, (ours_err, eager_err)
