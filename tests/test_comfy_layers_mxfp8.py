# SPDX-License-Identifier: Apache-2.0
"""ComfyUI's MXFP8 path through comfy_kitchen's own layer code (TensorCoreMXFP8Layout,
comfy_kitchen/tensor/mxfp8.py) with backend "c" first, on the CPU and on the emulated device,
forward under torch.inference_mode() and torch.no_grad(): a small two-layer stack whose shapes
need the layout's padding (K = 150 and M = 10 rounded up to 32; N = 192).

  loading   QuantizedTensor.from_float(w, "TensorCoreMXFP8Layout") -> ck.quantize_mxfp8(w, pad_32x=True)
  layer 1   compute capability 10.0+: F.linear(QuantizedTensor.from_float(x, ...), w, bias)
              -> ck.quantize_mxfp8(x, pad_32x=True) + ck.scaled_mm_mxfp8 (inference_mode: aten.linear;
              no_grad: aten.t + aten.addmm), the result sliced back to [M, N]
  layer 2   older GPUs: F.linear(x, w.dequantize(), bias) -> ck.dequantize_mxfp8 every forward

Every op the layers call must run in "c" and match eager's on the same arguments (each call
checked as it happens: test_comfy_layers.served, with this family's checks): quantize_mxfp8 and
dequantize_mxfp8 bit for bit; scaled_mm_mxfp8, which eager cannot run on a CPU (torch's scaled_mm:
"CPU does not support swizzle"), against its definition (eager's exact dequantization of both
operands, one float32 product, the bias in float32, rounded once): on the CPU that is our
algorithm, so bit for bit; on the emulated device (cuBLASLt's stand-in sums in another order)
within the float32 bound of tests/test_mxfp8_parity.py.  The whole forward against eager's
(the definition standing in for its scaled_mm): bit for bit on the CPU; on the emulated device the
second layer, run on eager's first-layer output, bit for bit."""
import contextlib
import inspect

import pytest
import torch
import torch.nn.functional as F

from comfy_kitchen.registry import registry
from comfy_kitchen.tensor.base import QuantizedTensor

import comfy_kitchen as ck
import test_comfy_layers as layers
from conftest import E, assert_bitwise_equal, saved_priority
from test_comfy_layers import c_first, device_context, served, staged  # noqa: F401 (c_first: autouse)
from test_mxfp8_parity import assert_quantized_equal, assert_values_equal, assert_within_bound

M_SHAPE, K, N = (2, 5), 150, 192
OPS = {"quantize_mxfp8", "dequantize_mxfp8", "scaled_mm_mxfp8"}


def scaled_mm_mxfp8_definition(a, b, block_scale_a, block_scale_b, bias=None, out_dtype=None):
    """What scaled_mm_mxfp8 computes (eager's needs a GPU): both operands decoded exactly with
    eager's dequantize_mxfp8 in float32, one float32 product, the bias added, rounded once."""
    out_dtype = out_dtype or torch.bfloat16
    y = E.dequantize_mxfp8(a, block_scale_a, torch.float32) @ E.dequantize_mxfp8(b, block_scale_b, torch.float32).T
    if bias is not None:
        y = y + bias.to(out_dtype).float()
    return y.to(out_dtype)


def check_call(func, args, kwargs, ours, device):
    """ours (from "c") against eager's result on the same arguments, within func's bound."""
    if func == "quantize_mxfp8":
        assert_quantized_equal(ours, E.quantize_mxfp8(*args, **kwargs), func)
    elif func == "dequantize_mxfp8":
        assert_values_equal(ours, E.dequantize_mxfp8(*args, **kwargs), func)
    elif func == "scaled_mm_mxfp8":
        ref = scaled_mm_mxfp8_definition(*args, **kwargs)
        if device == "cpu":
            assert_bitwise_equal(ours, ref, func)
        else:
            a = inspect.signature(scaled_mm_mxfp8_definition).bind(*args, **kwargs).arguments
            assert_within_bound(ours, a["a"], a["b"], a["block_scale_a"], a["block_scale_b"], a.get("bias"),
                                ours.dtype, func)
    else:
        raise AssertionError(f"an op outside the MXFP8 family: {func}")


@contextlib.contextmanager
def checked_calls(monkeypatch, device):
    """test_comfy_layers.served, with this family's checks in place of its per-call check."""
    monkeypatch.setattr(layers, "_check_call", lambda f, a, k, o: check_call(f, a, k, o, device))
    with served() as calls:
        yield calls


class TinyMXFP8:
    def __init__(self):
        g = torch.Generator().manual_seed(0)
        w1 = (torch.randn(N, K, generator=g) * 0.05).to(torch.bfloat16)
        w2 = (torch.randn(N, N, generator=g) * 0.05).to(torch.bfloat16)
        self.w1 = staged(QuantizedTensor.from_float(w1, "TensorCoreMXFP8Layout"), False)
        self.w2 = staged(QuantizedTensor.from_float(w2, "TensorCoreMXFP8Layout"), True)
        self.b1 = (torch.randn(N, generator=g) * 0.1).to(torch.bfloat16)
        self.b2 = (torch.randn(N, generator=g) * 0.1).to(torch.bfloat16)

    def layer1(self, x):  # compute capability 10.0+: the input quantized, scaled_mm_mxfp8
        xq = QuantizedTensor.from_float(x.reshape(-1, K), "TensorCoreMXFP8Layout")
        return F.linear(xq, self.w1, self.b1).reshape(*x.shape[:-1], N)

    def layer2(self, h):  # older GPUs: the weight dequantized every forward
        return F.linear(h, self.w2.dequantize(), self.b2)

    def forward(self, x):
        h = self.layer1(x)
        return h, self.layer2(h)


@contextlib.contextmanager
def eager_scaled_mm_on_the_cpu():
    module = registry._backends["eager"]
    real = module.scaled_mm_mxfp8
    module.scaled_mm_mxfp8 = scaled_mm_mxfp8_definition
    try:
        yield
    finally:
        module.scaled_mm_mxfp8 = real


@pytest.fixture(scope="module")
def model():
    import comfy_kitchen_c

    with saved_priority(registry):
        comfy_kitchen_c.activate()
        mp = pytest.MonkeyPatch()
        with checked_calls(mp, "cpu") as calls:
            m = TinyMXFP8()
        mp.undo()
        yield m, dict(calls)


def test_loading_quantizes_in_c(model):
    _, calls = model
    assert calls == {("quantize_mxfp8", "c"): 2}, calls


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("grad_mode", ["inference_mode", "no_grad"])
def test_forward_runs_every_op_in_c_and_matches_eager(model, monkeypatch, device, grad_mode):
    m, _ = model
    x = (torch.randn(*M_SHAPE, K, generator=torch.Generator().manual_seed(1)) * 2).to(torch.bfloat16)
    mode = torch.inference_mode if grad_mode == "inference_mode" else torch.no_grad
    with mode(), device_context(device), checked_calls(monkeypatch, device) as calls:
        out = m.forward(x)
    assert all(backend == "c" for _, backend in calls), f"fell through: {dict(calls)}"
    assert {op: n for (op, _), n in calls.items()} == {op: 1 for op in OPS}, dict(calls)
    with mode(), ck.use_backend("eager"), eager_scaled_mm_on_the_cpu():
        ref = m.forward(x)
    for o, r in zip(out, ref):
        assert o.shape == r.shape == (*M_SHAPE, N) and o.dtype == r.dtype == torch.bfloat16
    if device == "cpu":
        assert_bitwise_equal(out[1], ref[1], f"{grad_mode} forward")
    else:  # layer 1 checked within its bound per call; layer 2 on eager's layer-1 output
        with mode(), device_context(device):
            ours_on_eagers = m.layer2(ref[0])
        assert_bitwise_equal(ours_on_eagers, ref[1], f"{device} {grad_mode} layer 2")


def test_the_count_sees_a_call_that_falls_through(model, monkeypatch):
    """The check above can fail: with "c" refusing dequantize_mxfp8, the layer's call goes to
    eager, and the count says so."""
    import comfy_kitchen_c.backend as backend

    caps = backend.capabilities()
    del caps["dequantize_mxfp8"]
    monkeypatch.setattr(registry, "_capabilities", {**registry._capabilities, "c": set(caps)})
    m, _ = model
    with torch.inference_mode(), served() as calls:
        m.layer2(torch.zeros(3, N, dtype=torch.bfloat16))
    assert calls[("dequantize_mxfp8", "eager")] == 1 and ("dequantize_mxfp8", "c") not in calls
