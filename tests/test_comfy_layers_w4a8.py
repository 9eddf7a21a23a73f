# SPDX-License-Identifier: Apache-2.0
"""ComfyUI's hot path through comfy_kitchen's AsymW4A8Int8Layout with backend "c" first, as
tests/test_comfy_layers.py does for int8 and NVFP4 (its helpers imported): a tiny block of W4A8
linears on the CPU, forward under torch.inference_mode() and torch.no_grad().  Every op the
layers call runs in "c" (none falls through), each call is checked against eager's on the same
arguments as it happens, and the forward is compared with the eager backend's forward.

The call sequence, as comfy_kitchen 0.2.40's layout makes it:

  loading   QuantizedTensor.from_float(w, "AsymW4A8Int8Layout"[, bits=6])
              -> registry "quantize_w4a8_int8_weight" (test_loading_runs_the_quantizer_in_c; the
                 block below is loaded by eager, so that its forward compares the linears alone)
  block     F.linear(x, w, bias)
              inference_mode: aten.linear -> "w4a8_int8_linear"(x, qdata, s_rel, s_channel, codebook, ...)
              no_grad:        aten.t + aten.mm -> "w4a8_int8_linear"(x2d, ..., bias=None)
            AsymW4A8Int8Layout.linear_input_act(w, x, input_act="rms_norm" | "swiglu", residual=...)
              -> "w4a8_int8_linear"(x, ..., input_act=..., residual=..., residual_scale=...)
            an MMA-packed weight (optimize_for_gemv's records, made here from random records as the
            CUDA packer needs a GPU): F.linear -> "w4a8_packed_linear"
  text enc. weight.dequantize() every forward -> "dequantize_w4a8_int8_weight"

The forward runs on the CPU and on the emulated device (the CUDA path: the linears decode the
codes a part at a time into int8_linear's scratch, comfy_kitchen_c/w4a8.py), where it equals the
CPU's forward bit for bit.  Bounds per call: the linears within an int8 linear's bound with a
rotation (test_int8_linear.assert_activation_close), the dequantizer within the rotation's
(conftest.assert_rotation_close).  The whole forward against eager's: each layer's output within
that same activation bound of eager's, chained as ComfyUI chains them, since a rotated code moved
by one in one layer shifts the next layer's input by less than one int8 step of its row.
"""
import dataclasses

import pytest
import torch
import torch.nn.functional as F

import comfy_kitchen as ck
from comfy_kitchen.registry import registry
from comfy_kitchen.tensor.base import QuantizedTensor
from comfy_kitchen.tensor.w4a8_int8 import AsymW4A8Int8Layout
from comfy_kitchen.tensor.w4a8_packed import default_w4a8_codebook

from conftest import assert_bitwise_equal, assert_rotation_close, saved_priority
from test_comfy_layers import device_context
from test_comfy_layers import served as _served
from test_int8_linear import assert_activation_close
from test_w4a8_parity import random_records

DIM, HIDDEN = 256, 512


def _check_call(func, args, kwargs, ours):
    ref = getattr(registry._backends["eager"], func)(*args, **kwargs)
    if func == "dequantize_w4a8_int8_weight":
        assert_rotation_close(ours, ref, func)
    elif func == "quantize_w4a8_int8_weight":  # loaded here only where the rotation is exact
        from test_w4a8_quant import assert_same
        assert_same(ours, ref, func)
    else:
        assert_activation_close(ours, ref, f"{func} {kwargs.get('input_act')}")


def served():
    """test_comfy_layers.served with the W4A8 ops' bounds (_check_call)."""
    return _served(_check_call)


def w4a8_weight(n, k, seed, **kw):
    w = (torch.randn(n, k, generator=torch.Generator().manual_seed(seed)) * 0.05).to(torch.bfloat16)
    return QuantizedTensor.from_float(w, "AsymW4A8Int8Layout", **kw)


def packed_weight(n, k, seed):
    """An MMA-packed weight as optimize_for_gemv leaves it: the records, an empty scale."""
    params = AsymW4A8Int8Layout.Params(
        scale=torch.empty(0, dtype=torch.float8_e4m3fn), orig_dtype=torch.bfloat16, orig_shape=(n, k),
        s_channel=torch.rand(n, generator=torch.Generator().manual_seed(seed)) * 1e-3 + 1e-5,
        codebook=default_w4a8_codebook(), mma_packed=True)
    return QuantizedTensor(random_records(n, k, 4, seed), "AsymW4A8Int8Layout", params)


class TinyBlock:
    """A pre-norm block of W4A8 linears (4-bit codebook and 6-bit weights, e4m3 scales), a
    packed linear and a text-encoder-style dequantized linear."""

    def __init__(self):
        g = torch.Generator().manual_seed(0)

        def vec(n, scale=1.0):
            return (torch.randn(n, generator=g) * scale).to(torch.bfloat16)

        with ck.use_backend("eager"):
            self.qkv, self.qkv_b = w4a8_weight(DIM, DIM, 1), vec(DIM, 0.1)
            self.ff_in = w4a8_weight(DIM, DIM, 2, bits=6)
            self.up = w4a8_weight(2 * HIDDEN, DIM, 3)
            self.down = w4a8_weight(DIM, HIDDEN, 4, bits=6)
            self.text = w4a8_weight(DIM, DIM, 5)
        self.packed = packed_weight(DIM, DIM, 6)
        self.norm_w, self.gate = vec(DIM) + 1, vec(DIM, 0.5)

    def forward(self, x):
        """Each layer's output, in order."""
        outs = [F.linear(x, self.qkv, self.qkv_b)]
        outs.append(AsymW4A8Int8Layout.linear_input_act(self.ff_in, outs[-1], input_act="rms_norm",
                                                        input_act_weight=self.norm_w, input_act_eps=1e-6))
        u = F.linear(outs[-1], self.up)
        outs.append(AsymW4A8Int8Layout.linear_input_act(self.down, u, input_act="swiglu", residual=outs[-1],
                                                        residual_scale=self.gate))
        outs.append(F.linear(outs[-1], self.packed))
        outs.append(F.linear(outs[-1], self.text.dequantize()))
        return outs


EXPECTED_OPS = {"w4a8_int8_linear": 4, "w4a8_packed_linear": 1, "dequantize_w4a8_int8_weight": 1}


@pytest.fixture(scope="module")
def block():
    return TinyBlock()


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("grad_mode", ["inference_mode", "no_grad"])
def test_forward_runs_every_op_in_c_and_matches_eager(block, device, grad_mode):
    import comfy_kitchen_c

    x = torch.randn(2, 5, DIM, generator=torch.Generator().manual_seed(9)).to(torch.bfloat16)
    mode = torch.inference_mode if grad_mode == "inference_mode" else torch.no_grad
    with saved_priority(registry):
        comfy_kitchen_c.activate()
        with mode(), device_context(device), served() as calls:
            outs = block.forward(x)
        assert all(backend == "c" for _, backend in calls), f"fell through: {dict(calls)}"
        assert {op: n for (op, _), n in calls.items()} == EXPECTED_OPS, dict(calls)
        with mode(), ck.use_backend("eager"):
            refs = block.forward(x)
    for k, (o, r) in enumerate(zip(outs, refs)):
        assert o.shape == r.shape and o.dtype == r.dtype == torch.bfloat16, k
        assert_activation_close(o, r, f"{grad_mode} layer {k}")
    if device == "emulated":  # the CUDA path's forward is the CPU's, bit for bit
        with saved_priority(registry):
            comfy_kitchen_c.activate()
            with mode():
                cpu_outs = block.forward(x)
        for k, (o, c) in enumerate(zip(outs, cpu_outs)):
            assert_bitwise_equal(o, c, f"{grad_mode} layer {k}: emulated device against the CPU")


@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_loading_runs_the_quantizer_in_c(device):
    """ComfyUI's load of a W4A8 and a W6A8 weight through the layout: the quantizer runs in "c",
    and on a weight whose rotation is exact (few significant bits) the layout holds eager's
    tensors bit for bit, in the default, the 6-bit and the asymmetric form."""
    import comfy_kitchen_c
    from test_w4a8_quant import assert_same, few_bit_weight

    w = few_bit_weight(64, DIM, torch.bfloat16, 8)
    forms = [{}, {"bits": 6}, {"symmetric": False}]
    with saved_priority(registry):
        comfy_kitchen_c.activate()
        with device_context(device), served() as calls:
            ours = [QuantizedTensor.from_float(w, "AsymW4A8Int8Layout", **kw) for kw in forms]
    assert dict(calls) == {("quantize_w4a8_int8_weight", "c"): 3}, dict(calls)
    with ck.use_backend("eager"):
        refs = [QuantizedTensor.from_float(w, "AsymW4A8Int8Layout", **kw) for kw in forms]
    for kw, o, r in zip(forms, ours, refs):
        assert_same(AsymW4A8Int8Layout.get_plain_tensors(o), AsymW4A8Int8Layout.get_plain_tensors(r), f"{kw}")


def test_the_count_sees_a_call_that_falls_through(block, monkeypatch):
    """The check above can fail: with "c" not serving w4a8_int8_linear, the layers' calls of it
    go to eager, and the count says so."""
    import comfy_kitchen_c
    import comfy_kitchen_c.backend as backend

    x = torch.randn(3, DIM).to(torch.bfloat16)
    with saved_priority(registry):
        comfy_kitchen_c.activate()
        caps = backend.capabilities()
        del caps["w4a8_int8_linear"]
        monkeypatch.setattr(registry, "_capabilities", {**registry._capabilities, "c": set(caps)})
        with torch.inference_mode(), served() as calls:
            F.linear(x, block.qkv)
    assert dict(calls) == {("w4a8_int8_linear", "eager"): 1}, dict(calls)


def test_the_packed_weight_is_the_canonical_one(block):
    """The packed records unpack to a canonical weight whose linear is the packed one's."""
    from comfy_kitchen.tensor.w4a8_packed import unpack_w4a8_mma_weight
    from comfy_kitchen_c import ops

    qt = block.packed
    q, s = unpack_w4a8_mma_weight(qt._qdata, DIM, DIM)
    x = torch.randn(4, DIM).to(torch.bfloat16)
    p = qt._params
    assert dataclasses.is_dataclass(p) and p.mma_packed
    assert torch.equal(ops.w4a8_packed_linear(x, qt._qdata, p.scale, p.s_channel, p.codebook),
                       ops.w4a8_int8_linear(x, q, s, p.s_channel, p.codebook))
