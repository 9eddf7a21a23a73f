# SPDX-License-Identifier: Apache-2.0
"""ComfyUI's FP8 checkpoints (float8_e4m3fn and float8_e5m2, per-tensor scale) through
comfy_kitchen's own TensorCoreFP8Layout with backend "c" first, on the CPU and on the emulated
device, forward under torch.inference_mode() and torch.no_grad().  Every op the layout calls must
run in "c" and match eager's on the same arguments (tests/test_comfy_layers.py's `served`: the FP8
ops are bit for bit), and the whole forward must be eager's bit for bit.

The call sequence, as ComfyUI (comfy/ops.py, comfy/quant_ops.py, comfy/float.py) makes it against
comfy_kitchen 0.2.40:

  loading   QuantizedTensor.from_float(w, "TensorCoreFP8Layout", dtype=fp8)   (a model converted on
              load; a checkpoint's own FP8 weights arrive as qdata + scale)
              -> ck.quantize_per_tensor_fp8(w, amax / fp8_max, fp8)
  staging   empty_like copies filled by copy_ / Params.copy_from, as for the int8 layers
  linear    F.linear(x, w, b) on a GPU without FP8 compute (and on the CPU): the layout's handler
              dequantizes -> ck.dequantize_per_tensor_fp8(q, scale, orig_dtype), then torch's linear
            with FP8 compute (compute capability 8.9+) the input is quantized first:
              QuantizedTensor.from_float(x, "TensorCoreFP8Layout", scale=input_scale)
              -> ck.quantize_per_tensor_fp8(x, input_scale, fp8), then torch's scaled_mm
  LoRA      comfy.float.stochastic_rounding(w + delta, fp8, seed) on the scaled weight
              -> ck.stochastic_rounding_fp8(w * (1/scale), rng, fp8), rng from the seed's generator
"""
import pytest
import torch
import torch.nn.functional as F

import comfy_kitchen as ck
from comfy_kitchen.registry import registry
from comfy_kitchen.tensor.base import QuantizedTensor
from comfy_kitchen.tensor.fp8 import TensorCoreFP8Layout

from conftest import assert_bitwise_equal, saved_priority
from test_comfy_layers import Linear, _bytes_of_fp8, c_first, device_context, served, staged  # noqa: F401 (c_first: autouse)

DIM, HIDDEN = 256, 512
FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def fp8_weight(n, k, seed, fp8):
    w = (torch.randn(n, k, generator=torch.Generator().manual_seed(seed)) * 0.05).to(torch.bfloat16)
    return QuantizedTensor.from_float(w, "TensorCoreFP8Layout", dtype=fp8)


class TinyFP8MLP:
    """Two FP8 linears with a GELU between them and a residual, as a DiT block's MLP."""

    def __init__(self, fp8):
        g = torch.Generator().manual_seed(0)
        self.fp8 = fp8
        self.up = Linear(staged(fp8_weight(HIDDEN, DIM, 1, fp8), True),
                         (torch.randn(HIDDEN, generator=g) * 0.1).to(torch.bfloat16))
        self.down = Linear(staged(fp8_weight(DIM, HIDDEN, 2, fp8), False), None)
        self.input_scale = torch.tensor(0.02, dtype=torch.float32)

    def forward(self, x):
        h = F.gelu(F.linear(x, self.up.weight, self.up.bias), approximate="tanh")
        return x + F.linear(h, self.down.weight)

    def forward_fp8_compute(self, x):
        """The input quantized as on an FP8-compute GPU; its scaled_mm is torch's, which a CPU
        lacks, so the layout's handler dequantizes both operands, as it does when scaled_mm fails."""
        xq = QuantizedTensor.from_float(x, "TensorCoreFP8Layout", scale=self.input_scale, dtype=self.fp8)
        return F.linear(xq.dequantize(), self.up.weight, self.up.bias)

    def lora(self, seed):
        """comfy.float.stochastic_rounding of the patched weight, in the layout's scale."""
        w = self.down.weight
        scale = w._params.scale
        patched = w.dequantize().float()
        patched += torch.randn(patched.shape, generator=torch.Generator().manual_seed(seed)) * 1e-3
        patched *= (1.0 / scale).to(patched.dtype)
        rng = torch.randint(0, 256, patched.shape, dtype=torch.uint8,
                            generator=torch.Generator().manual_seed(seed))
        qdata = ck.stochastic_rounding_fp8(patched, rng, self.fp8)
        params = TensorCoreFP8Layout.Params(scale=scale, orig_dtype=torch.bfloat16, orig_shape=tuple(qdata.shape))
        return QuantizedTensor(qdata, "TensorCoreFP8Layout", params)


@pytest.fixture(scope="module", params=list(FP8), ids=list(FP8))
def model(request):
    import comfy_kitchen_c

    with saved_priority(registry):
        comfy_kitchen_c.activate()
        with served() as calls:
            m = TinyFP8MLP(FP8[request.param])
        yield m, calls


def x_of(seed=3):
    return torch.randn(2, 4, DIM, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def test_loading_quantizes_in_c(model):
    _, calls = model
    assert dict(calls) == {("quantize_per_tensor_fp8", "c"): 2}, dict(calls)


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("grad_mode", ["inference_mode", "no_grad"])
def test_forward_runs_every_op_in_c_and_is_eagers(model, device, grad_mode):
    m, _ = model
    mode = torch.inference_mode if grad_mode == "inference_mode" else torch.no_grad
    x = x_of()
    with mode(), device_context(device), served() as calls:
        out = m.forward(x)
        out_fp8 = m.forward_fp8_compute(x)
    assert dict(calls) == {("dequantize_per_tensor_fp8", "c"): 4, ("quantize_per_tensor_fp8", "c"): 1}, dict(calls)
    with mode(), ck.use_backend("eager"):
        ref, ref_fp8 = m.forward(x), m.forward_fp8_compute(x)
    assert out.shape == (2, 4, DIM) and out.dtype == torch.bfloat16
    assert_bitwise_equal(out, ref, f"{device} {grad_mode} forward")
    assert_bitwise_equal(out_fp8, ref_fp8, f"{device} {grad_mode} forward, FP8 input")


@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_lora_requantization_in_c(model, device):
    m, _ = model
    with device_context(device), served() as calls:
        patched = m.lora(seed=7)
    assert dict(calls) == {("dequantize_per_tensor_fp8", "c"): 1, ("stochastic_rounding_fp8", "c"): 1}, dict(calls)
    with ck.use_backend("eager"):
        ref = m.lora(seed=7)
    assert_bitwise_equal(_bytes_of_fp8(patched._qdata), _bytes_of_fp8(ref._qdata), "requantized weight")
    assert patched._qdata.dtype == m.fp8


def test_the_count_sees_a_call_that_falls_through(model, monkeypatch):
    """The checks above can fail: with "c" refusing dequantize_per_tensor_fp8, the layout's calls
    of it go to eager, and the count says so."""
    import comfy_kitchen_c.backend as backend

    caps = backend.capabilities()
    del caps["dequantize_per_tensor_fp8"]
    monkeypatch.setattr(registry, "_capabilities", {**registry._capabilities, "c": set(caps)})
    m, _ = model
    with torch.inference_mode(), served() as calls:
        m.forward(x_of())
    assert calls[("dequantize_per_tensor_fp8", "eager")] == 2 and ("dequantize_per_tensor_fp8", "c") not in calls
