# SPDX-License-Identifier: Apache-2.0
"""ComfyUI's hot path through comfy_kitchen's own layer code, with backend "c" first: a tiny
DiT-like stack of ConvRot int8 linears and an NVFP4 linear stack, on the CPU and on the emulated
device, forward under torch.inference_mode() and torch.no_grad().  Every op the layers call must
run in "c" (none falls through to another backend) and match eager's on the same arguments within
the op's stated bound (each call is checked as it happens, see `served`); the whole forward is
compared with the eager backend's forward.

The call sequence, as ComfyUI (comfy/ops.py, comfy/model_prefetch.py, comfy/quant_ops.py) makes it
against comfy_kitchen 0.2.40 (a later ComfyUI can be checked against this list):

  loading   QuantizedTensor.from_float(w, "TensorWiseINT8Layout", convrot=True, per_channel=True)
              -> registry "quantize_int8_convrot_weight"(w, 256, stochastic_rounding=0)
            QuantizedTensor.from_float(w, "TensorCoreNVFP4Layout")
              -> ck.quantize_nvfp4(w, amax / (448 * 6), pad_16x=...)
  staging   the model's weights are empty_like copies, filled as ComfyUI fills them:
              dst.copy_(src)                  (legacy path: qdata.copy_ + Params.copy_from)
              dst._params.copy_from(src._params, non_blocking=True) (DynamicVRAM: the qdata is
                                              copied by comfy-aimdo, then the layout's params)
  embedding TensorWiseINT8Layout.dequantize_embedding(qdata, params, tokens)
              -> torch.ops.comfy_kitchen.dequantize_int8_embedding(q, scale, tokens, 256, code)
  block     TensorWiseINT8Layout.fused_rms_modulated(x, qkv.weight, bias, norm_w, eps, mod_scale)
              -> ck.int8_linear_rms_modulated(...)  (only because "c" serves it natively)
            F.linear(h, proj.weight, proj.bias)
              inference_mode: aten.linear -> torch.ops.comfy_kitchen.int8_linear(x, q, s, bias, code,
                              True, 256)
              no_grad:        aten.t + aten.mm (x flattened to 2-D; the bias added by torch)
                              -> torch.ops.comfy_kitchen.int8_linear(x2d, q, s, None, code, True, 256)
            linear_input_act(ff_in, x, "rms_norm", act_weight=norm2_w, act_eps=1e-6)
              -> ck.int8_linear(x, q, s, bias, x.dtype, convrot=True, convrot_groupsize=256,
                                input_act="rms_norm", input_act_weight=norm2_w, input_act_eps=1e-6)
            linear_input_act(down, u, "swiglu", residual=x, residual_scale=gate)  (MiniMax H3's MLP)
              -> ck.int8_linear(u, ..., input_act="swiglu", residual=x, residual_scale=gate)
  text enc. weight.dequantize() every forward
              -> torch.ops.comfy_kitchen.dequantize_int8_convrot_weight_dtype(q, s, 256, code)
  LoRA      QuantizedTensor.from_float(w + delta, ..., stochastic_rounding=seed)
              -> "quantize_int8_convrot_weight"(w, 256, stochastic_rounding=seed)
  NVFP4     compute capability 10.0+: F.linear(QuantizedTensor.from_float(x, "TensorCoreNVFP4Layout"),
              w, bias) -> ck.quantize_nvfp4 + ck.scaled_mm_nvfp4; else F.linear(x, w.dequantize(), bias)
              -> ck.dequantize_nvfp4 every forward

Bounds per call (`served`): bit for bit where no rotation or transcendental activation is
involved; the rotation's stated bounds (conftest: codes, rotated values) and, for an int8_linear
with a rotation or swiglu, the activation bound of test_int8_linear (assert_activation_close);
scaled_mm_nvfp4, which eager cannot run on a CPU, against its definition (both operands decoded
exactly, one float32 product, rounded once), bit for bit.  The whole int8 stack
against eager's forward: chained, a last-place difference moves the next layer's codes, so the
stacks differ by about one int8 step: less than eager's own distance from the unquantized
forward, and ours no farther from that than 1.05 times eager (comfy_kitchen's own factor).
"""
import contextlib
import dataclasses
from collections import Counter

import pytest
import torch
import torch.nn.functional as F

import comfy_kitchen as ck
from comfy_kitchen.registry import registry
from comfy_kitchen.tensor.base import QuantizedTensor
from comfy_kitchen.tensor.int8 import TensorWiseINT8Layout

from conftest import E, assert_bitwise_equal, assert_rotated_quant_close, assert_rotation_close, saved_priority
from test_int8_linear import assert_activation_close

DIM, HIDDEN, VOCAB, G = 256, 512, 64, 256
ROTATED = {"quantize_int8_convrot_weight", "dequantize_int8_convrot_weight", "dequantize_int8_convrot_weight_dtype",
           "dequantize_int8_embedding"}


def _backend_of(func, impl):
    for name, module in registry._backends.items():
        if getattr(module, func, None) is impl:
            return name
    return "?"


def _tensors(value):
    return [t for t in (value if isinstance(value, tuple) else (value,)) if isinstance(t, torch.Tensor)]


def scaled_mm_nvfp4_definition(a, b, tensor_scale_a, tensor_scale_b, block_scale_a, block_scale_b, bias=None,
                               out_dtype=None, alpha=None):
    """What scaled_mm_nvfp4 computes (eager's needs a GPU): both operands decoded exactly with
    eager's dequantize_nvfp4 in float32, one float32 product, scaled, the bias added, rounded once."""
    one = torch.ones((), dtype=torch.float32, device=a.device)
    out_dtype = out_dtype or torch.bfloat16
    y = E.dequantize_nvfp4(a, one, block_scale_a, torch.float32) @ E.dequantize_nvfp4(b, one, block_scale_b,
                                                                                    torch.float32).T
    y = y * (tensor_scale_a * tensor_scale_b if alpha is None else alpha).reshape(1)
    if bias is not None:
        y = y + bias.to(out_dtype).float()
    return y.to(out_dtype)


def _check_call(func, args, kwargs, ours):
    """ours (from "c") against eager's result on the same arguments, within func's bound."""
    eager = getattr(registry._backends["eager"], func)
    if func == "scaled_mm_nvfp4":  # eager's needs a GPU: its definition instead
        eager = scaled_mm_nvfp4_definition
    ref = eager(*args, **kwargs)
    if func == "quantize_int8_convrot_weight":  # stochastic rounding: eager's noise, drawn as eager draws it
        assert_rotated_quant_close(*ours, *ref, func)
    elif func in ROTATED:
        assert_rotation_close(ours, ref, func)
    elif func.startswith("int8_linear") and (kwargs.get("convrot") or kwargs.get("input_act") == "swiglu"):
        assert_activation_close(ours, ref, f"{func} {kwargs.get('input_act')}")
    else:
        for o, r in zip(_tensors(ours), _tensors(ref)):
            assert_bitwise_equal(_bytes_of_fp8(o), _bytes_of_fp8(r), func)


def _bytes_of_fp8(t):
    """An FP8 tensor as its codes (torch compares no FP8 tensors on the CPU)."""
    return t.view(torch.uint8) if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) else t


@contextlib.contextmanager
def served(check=None):
    """Counts every op the layers get from the registry per (op, backend), and checks each call
    "c" serves against eager's on the same arguments (check, default _check_call).  The CPU speed
    rules are off meanwhile (comfy_kitchen_c/cpu_speed.py gives calls eager runs faster to eager,
    most of them smaller than any model's; these layers are toy-sized): what is counted is which
    calls "c" can serve, and the rules have their own tests (tests/test_cpu_speed.py)."""
    from comfy_kitchen_c import cpu_speed

    calls = Counter()
    real = registry.get_implementation
    cpu_speed.configure(mode="off")

    def get_implementation(func_name, backend=None, kwargs=None):
        impl = real(func_name, backend, kwargs)
        name = _backend_of(func_name, impl)
        calls[(func_name, name)] += 1
        if name != "c":
            return impl

        def checked(*args, **kw):
            out = impl(*args, **kw)
            (check or _check_call)(func_name, args, kw, out)
            return out
        return checked

    registry.get_implementation = get_implementation
    try:
        yield calls
    finally:
        cpu_speed.configure()
        del registry.get_implementation  # the instance attribute; the class's method again


def int8_weight(n, k, seed):
    w = (torch.randn(n, k, generator=torch.Generator().manual_seed(seed)) * 0.05).to(torch.bfloat16)
    return QuantizedTensor.from_float(w, "TensorWiseINT8Layout", convrot=True, per_channel=True,
                                      convrot_groupsize=G)


def staged(src: QuantizedTensor, dynamic_vram: bool) -> QuantizedTensor:
    """An empty weight of src's layout filled as ComfyUI fills it (see the module docstring)."""
    dst = torch.empty_like(src)
    if dynamic_vram:
        dst._qdata.copy_(src._qdata)
        dst._params.copy_from(src._params, non_blocking=True)
    else:
        dst.copy_(src)
    assert torch.equal(dst._qdata, src._qdata) and torch.equal(dst._params.scale, src._params.scale)
    return dst


class Linear:
    def __init__(self, weight, bias=None):
        self.weight, self.bias = weight, bias


def linear_input_act(linear, x, input_act, act_weight=None, act_eps=0.0, residual=None, residual_scale=None):
    """ComfyUI's comfy.ops.linear_input_act on an int8 weight: its quantized branch."""
    qdata, scale = TensorWiseINT8Layout.get_plain_tensors(linear.weight)
    params = linear.weight._params
    return ck.int8_linear(x, qdata, scale, linear.bias, x.dtype, convrot=params.convrot,
                          convrot_groupsize=params.convrot_groupsize, input_act=input_act,
                          input_act_weight=act_weight, input_act_eps=act_eps, residual=residual,
                          residual_scale=residual_scale)


class TinyDiT:
    """Embedding, one pre-norm block (adaLN-modulated qkv, projection, rms-norm MLP input, SwiGLU
    MLP with a gated residual), a text-encoder-style dequantized linear, an NVFP4 linear stack."""

    def __init__(self):
        g = torch.Generator().manual_seed(0)

        def vec(n, scale=1.0):
            return (torch.randn(n, generator=g) * scale).to(torch.bfloat16)

        self.table = staged(int8_weight(VOCAB, DIM, 1), False)
        self.qkv = Linear(staged(int8_weight(DIM, DIM, 2), True), vec(DIM, 0.1))
        self.proj = Linear(staged(int8_weight(DIM, DIM, 3), False), vec(DIM, 0.1))
        self.ff_in = Linear(staged(int8_weight(DIM, DIM, 4), True), vec(DIM, 0.1))
        self.up = Linear(staged(int8_weight(2 * HIDDEN, DIM, 5), False), vec(2 * HIDDEN, 0.1))
        self.down = Linear(staged(int8_weight(DIM, HIDDEN, 6), True), vec(DIM, 0.1))
        self.text = Linear(int8_weight(DIM, DIM, 7), None)
        self.norm_w, self.norm2_w = vec(DIM) + 1, vec(DIM) + 1
        self.mod_scale, self.gate = vec(DIM, 0.2), vec(DIM, 0.5)
        fp4 = [(torch.randn(DIM, DIM, generator=g) * 0.05).to(torch.bfloat16) for _ in range(2)]
        self.fp4 = [staged(QuantizedTensor.from_float(w, "TensorCoreNVFP4Layout"), k == 1) for k, w in
                    enumerate(fp4)]

    def block(self, x):
        h = TensorWiseINT8Layout.fused_rms_modulated(x, self.qkv.weight, self.qkv.bias, self.norm_w, 1e-6,
                                                     self.mod_scale)
        assert h is not NotImplemented, "the layout found no native backend for its fused path"
        x = x + F.linear(h, self.proj.weight, self.proj.bias)
        u = linear_input_act(self.ff_in, x, "rms_norm", act_weight=self.norm2_w, act_eps=1e-6)
        u = F.linear(u, self.up.weight, self.up.bias)
        return linear_input_act(self.down, u, "swiglu", residual=x, residual_scale=self.gate)

    def forward(self, tokens):
        """(the int8 stack's output, the NVFP4 stack's)."""
        t = self.table
        x = TensorWiseINT8Layout.dequantize_embedding(t._qdata, t._params, tokens)
        x = self.block(x)
        x = F.linear(x, self.text.weight.dequantize())  # a text encoder's dequantization per forward
        return x, self.nvfp4_stack(x)

    def nvfp4_stack(self, x):
        for k, w in enumerate(self.fp4):
            if k == 0:  # compute capability 10.0+: the input quantized, scaled_mm_nvfp4
                xq = QuantizedTensor.from_float(x.reshape(-1, DIM), "TensorCoreNVFP4Layout")
                x = F.linear(xq, w).reshape(x.shape)
            else:  # older GPUs: the weight dequantized every forward
                x = F.linear(x, w.dequantize())
        return x

    def float_forward(self, tokens):
        """The int8 stack unquantized: eager's dequantized weights, torch's float ops, float32."""
        def w(layer):
            with ck.use_backend("eager"):
                return layer.weight.dequantize().float()

        def b(layer):
            return None if layer.bias is None else layer.bias.float()

        with ck.use_backend("eager"):
            x = F.embedding(tokens, self.table.dequantize()).float()
        h = F.rms_norm(x, (DIM,), self.norm_w.float(), 1e-6) * (1.0 + self.mod_scale.float())
        x = x + F.linear(F.linear(h, w(self.qkv), b(self.qkv)), w(self.proj), b(self.proj))
        u = F.linear(F.linear(F.rms_norm(x, (DIM,), self.norm2_w.float(), 1e-6), w(self.ff_in), b(self.ff_in)),
                     w(self.up), b(self.up))
        gate, up = u.chunk(2, dim=-1)
        x = x + self.gate.float() * F.linear(F.silu(gate) * up, w(self.down), b(self.down))
        return F.linear(x, w(self.text))

    def lora(self, seed):
        """A LoRA patched in on the fly: the dequantized weight plus a delta, requantized with
        stochastic rounding (ComfyUI's want_requant)."""
        w = self.proj.weight.dequantize()
        delta = torch.randn(w.shape, generator=torch.Generator().manual_seed(seed)).to(w.dtype) * 1e-3
        return QuantizedTensor.from_float(w + delta, "TensorWiseINT8Layout", convrot=True, per_channel=True,
                                          convrot_groupsize=G, stochastic_rounding=seed)


EXPECTED_OPS = {
    "dequantize_int8_embedding": 1, "int8_linear_rms_modulated": 1, "int8_linear": 4,
    "dequantize_int8_convrot_weight_dtype": 1, "quantize_nvfp4": 1, "scaled_mm_nvfp4": 1, "dequantize_nvfp4": 1,
}


@pytest.fixture(scope="module")
def model():
    import comfy_kitchen_c

    with saved_priority(registry):
        comfy_kitchen_c.activate()
        with served() as calls:
            m = TinyDiT()
        yield m, calls


@pytest.fixture(autouse=True)
def c_first(model):
    import comfy_kitchen_c

    with saved_priority(registry):
        comfy_kitchen_c.activate()
        yield


def test_loading_quantizes_in_c(model):
    _, calls = model
    assert set(calls) == {("quantize_int8_convrot_weight", "c"), ("quantize_nvfp4", "c")}, calls
    assert calls[("quantize_int8_convrot_weight", "c")] == 7 and calls[("quantize_nvfp4", "c")] == 2


@contextlib.contextmanager
def eager_scaled_mm_on_the_cpu():
    """Eager's scaled_mm_nvfp4 refuses CPU tensors (torch's scaled_mm: "CPU does not support
    swizzle"): its definition stands in for it in the eager forward."""
    module = registry._backends["eager"]
    real = module.scaled_mm_nvfp4
    module.scaled_mm_nvfp4 = scaled_mm_nvfp4_definition
    try:
        yield
    finally:
        module.scaled_mm_nvfp4 = real


def rel_l2(a, b):
    return float((a.float() - b.float()).norm() / b.float().norm())


def device_context(device):
    from comfy_kitchen_c.testing import emulated_device

    return emulated_device() if device == "emulated" else contextlib.nullcontext()


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("grad_mode", ["inference_mode", "no_grad"])
def test_forward_runs_every_op_in_c_and_matches_eager(model, device, grad_mode):
    m, _ = model
    tokens = torch.tensor([[1, 5, 9, 63], [0, 2, 4, 8]])
    mode = torch.inference_mode if grad_mode == "inference_mode" else torch.no_grad
    with mode(), device_context(device), served() as calls:
        out = m.forward(tokens)
    assert all(backend == "c" for _, backend in calls), f"fell through: {dict(calls)}"
    assert {op: n for (op, _), n in calls.items()} == EXPECTED_OPS, dict(calls)
    with mode(), ck.use_backend("eager"), eager_scaled_mm_on_the_cpu():
        ref = m.forward(tokens)
    for o, r in zip(out, ref):
        assert o.shape == r.shape == (2, 4, DIM) and o.dtype == r.dtype == torch.bfloat16
    # The int8 stack: each op was checked on its own arguments (served); chained, a last-place
    # difference moves the next layer's int8 codes, so the stacks differ by about one int8 step.
    # Bound: less than eager's own quantization error (its distance from the unquantized forward),
    # and ours no farther from the unquantized forward than 1.05 times eager (the factor of
    # comfy_kitchen's own test of fused activations).
    exact = m.float_forward(tokens)
    ours_err, eager_err = rel_l2(out[0], exact), rel_l2(ref[0], exact)
    assert rel_l2(out[0], ref[0]) <= eager_err, (rel_l2(out[0], ref[0]), eager_err)
    assert ours_err <= 1.05 * eager_err, (ours_err, eager_err)
    # The NVFP4 stack quantizes its input to 4 bits, which turns those differences into whole fp4
    # steps: on eager's int8 output, ours is eager's bit for bit.
    with mode(), device_context(device):
        ours_on_eagers = m.nvfp4_stack(ref[0])
    with mode(), ck.use_backend("eager"), eager_scaled_mm_on_the_cpu():
        assert_bitwise_equal(ours_on_eagers, m.nvfp4_stack(ref[0]), f"{device} {grad_mode} NVFP4 stack")


@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_lora_requantization_in_c(model, device):
    m, _ = model
    with device_context(device), served() as calls:
        patched = m.lora(seed=7)
    assert dict(calls) == {("dequantize_int8_convrot_weight_dtype", "c"): 1, ("quantize_int8_convrot_weight", "c"): 1}
    # each call checked against eager's on its arguments (served): the requantization with its
    # stochastic rounding within the rotation's bound
    assert patched._params.convrot and patched._qdata.shape == m.proj.weight._qdata.shape


def test_the_staged_weights_are_the_models(model):
    """copy_ and Params.copy_from fill the empty weights with the quantized ones' data: the
    layers read them (a dataclass replace keeps the destination's dtype, as ComfyUI's)."""
    m, _ = model
    assert dataclasses.is_dataclass(m.qkv.weight._params)
    assert m.qkv.weight._params.convrot and m.qkv.weight._layout_cls == "TensorWiseINT8Layout"
    assert m.fp4[1]._layout_cls == "TensorCoreNVFP4Layout"


def test_the_count_sees_a_call_that_falls_through(model, monkeypatch):
    """The check above can fail: with "c" refusing int8_linear, the layers' calls of it go to
    eager, and the count says so."""
    import comfy_kitchen_c.backend as backend

    caps = backend.capabilities()
    del caps["int8_linear"]
    monkeypatch.setattr(registry, "_capabilities", {**registry._capabilities, "c": set(caps)})
    m, _ = model
    with torch.inference_mode(), served() as calls:
        m.forward(torch.tensor([[1, 2]]))
    assert calls[("int8_linear", "eager")] == 4 and ("int8_linear", "c") not in calls
