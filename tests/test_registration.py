# SPDX-License-Identifier: Apache-2.0
"""Backend "c" in comfy_kitchen's registry: registration, priority, activation,
fall-through for calls it cannot serve, and proof that calls are served by our C code."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import comfy_kitchen as ck
from comfy_kitchen.registry import registry
from comfy_kitchen.tensor.int8 import TensorWiseINT8Layout

import comfy_kitchen_c
from comfy_kitchen_c import _C, backend, op_list
from conftest import MODULATED, RESIDUAL, RMS_NORM_ACT, ck_lacks_reason, requires_ck
from inputs import FakeCudaTensor


def run_python(code: str, **env) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            env={**os.environ, **env}, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def count_calls(monkeypatch, names) -> dict:
    """Counts calls into the C kernels `names` (ops.py looks them up on _C at call time)."""
    calls = {}
    for name in names:
        real = getattr(_C, name)

        def spy(*args, _real=real, _name=name):
            calls[_name] = calls.get(_name, 0) + 1
            return _real(*args)

        monkeypatch.setattr(_C, name, spy)
    return calls


@pytest.fixture
def kernel_calls(monkeypatch):
    return count_calls(monkeypatch, ("quantize_int8_rowwise", "quantize_int8_tensorwise", "dequantize_int8_convrot_weight_dtype", "quantize_nvfp4"))


@pytest.mark.parametrize("first", ["comfy_kitchen", "comfy_kitchen_c"])
def test_registered_in_either_import_order_without_reordering(first):
    second = "comfy_kitchen_c" if first == "comfy_kitchen" else "comfy_kitchen"
    out = run_python(f"""
        import {first}, {second}
        from comfy_kitchen.registry import registry
        import comfy_kitchen as ck
        info = ck.list_backends()["c"]
        print(info["available"], "quantize_nvfp4" in info["capabilities"], registry._priority[0] != "c")
    """)
    assert out == "True True True"


def test_env_variable_activates_at_import():
    out = run_python("""
        import comfy_kitchen_c
        from comfy_kitchen.registry import registry
        print(registry._priority[0])
    """, COMFY_KITCHEN_C_ACTIVATE="1")
    assert out == "c"


def test_imports_and_serves_ops_without_comfy_kitchen():
    out = run_python("""
        import sys
        sys.modules["comfy_kitchen"] = None  # import comfy_kitchen now raises ImportError
        import torch, comfy_kitchen_c
        q, s = comfy_kitchen_c.ops.quantize_int8_rowwise(torch.ones(2, 8))
        print(int(q.sum()), comfy_kitchen_c.register())
    """)
    assert out == "2032 False"


def test_activate_puts_c_first_and_keeps_the_others(activated):
    assert registry._priority[0] == "c"
    assert registry._priority.count("c") == 1
    assert "eager" in registry._priority


def test_public_api_call_is_served_by_c(activated, kernel_calls):
    x = torch.randn(8, 64, dtype=torch.bfloat16)
    q, s = ck.quantize_int8_rowwise(x)
    assert kernel_calls.get("quantize_int8_rowwise") == 1
    assert registry.get_capable_backend("quantize_int8_rowwise", {"x": x, "stochastic_rounding": 0}) == "c"
    qx, sx = ck.quantize_nvfp4(x, torch.tensor(0.01))
    assert kernel_calls.get("quantize_nvfp4") == 1


def test_convrot_layout_quantization_is_served_by_c(activated, kernel_calls):
    w = torch.randn(32, 512, dtype=torch.bfloat16)
    qdata, params = TensorWiseINT8Layout.quantize(w, is_weight=True, per_channel=True, convrot=True,
                                                  convrot_groupsize=256)
    assert kernel_calls.get("quantize_int8_rowwise") == 1
    assert params.convrot and qdata.dtype == torch.int8 and params.scale.shape == (32, 1)
    # and the layout's dequantization goes through torch.ops into the registry too
    back = TensorWiseINT8Layout.dequantize(qdata, params)
    rel = float((back.float() - w.float()).abs().mean() / w.float().abs().max())
    assert rel < 0.02


def test_unservable_calls_fall_through_to_eager(activated, kernel_calls):
    x = torch.randn(8, 64)
    per_channel_scale = torch.full((8, 1), 0.1)
    assert registry.get_capable_backend(
        "quantize_int8_tensorwise", {"x": x, "scale": per_channel_scale, "stochastic_rounding": 0}) == "eager"
    q = torch.zeros(4, 64, dtype=torch.int8)
    assert registry.get_capable_backend(
        "dequantize_int8_simple_dtype",
        {"q": q, "scale": torch.tensor(1.0), "output_dtype_code": 5}) == "eager"
    assert registry.get_capable_backend(
        "quantize_int8_convrot_weight",
        {"weight": torch.randn(4, 96), "group_size": 32, "stochastic_rounding": 0}) == "eager"
    assert registry.get_capable_backend(
        "quantize_int8_rowwise", {"x": torch.randn(4, 8, device="meta"), "stochastic_rounding": 0}) == "eager"
    assert kernel_calls == {}


def test_constraints_state_devices_and_dtypes():
    caps = comfy_kitchen_c.backend.capabilities()
    assert set(caps) <= set(dir(comfy_kitchen_c.ops))
    for name, fc in caps.items():
        assert fc.default_devices == ({"cpu", "cuda"} if _C.HAS_CUDA else {"cpu"}), name
        assert fc.call_rules, name


class _OnCuda1(FakeCudaTensor):
    """Claims cuda:1, to test the per-device GPU rule."""
    fake_device_index = 1


@pytest.mark.parametrize("cc,served", [((7, 0), False), ((7, 5), True), ((12, 0), True)])
def test_gpus_below_the_built_architectures_fall_through(monkeypatch, fresh_capabilities, cc, served):
    asked = []
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d: asked.append(d) or cc)
    x = torch.randn(4, 64).as_subclass(_OnCuda1)
    reason = comfy_kitchen_c.backend.unsupported_gpu({"x": x, "stochastic_rounding": 0})
    assert asked == [1]  # the tensor's own device, not the current one
    comfy_kitchen_c.backend.unsupported_gpu({"x": x})
    assert asked == [1]  # asked once per device and process
    assert (reason is None) == served
    if not served:
        assert "argument 'x' is on cuda:1 with compute capability 7.0" in reason


# Eager's ops on integer and NVFP4 data that "c" does not serve, with why: comfy_kitchen_c/op_list.py.
NOT_SERVED = op_list.NOT_SERVED


@pytest.mark.parametrize("on_cuda", ["x", "weight"])
def test_a_call_on_two_devices_is_declined_whichever_tensor_comes_first(monkeypatch, fresh_capabilities, on_cuda):
    """The rule takes the call's first tensor as the call's device (backend._on_cpu): a call whose
    tensors are on two devices must still be declined, by the op's check, in either order."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d: (9, 0))
    args = {"x": torch.randn(4, 64), "weight": torch.zeros(8, 64, dtype=torch.int8),
            "weight_scale": torch.ones(8, 1), "bias": None, "out_dtype": torch.bfloat16}
    args[on_cuda] = args[on_cuda].as_subclass(FakeCudaTensor)
    op = next(o for o in op_list.OPS if o.name == "int8_linear")
    result = backend._call_rule(op)(args)
    assert not result.success
    assert "is on cuda:0 but" in result.failure_reason or "is on cpu but" in result.failure_reason \
        or result.failed_param == "__device__", result


class _OnlyOnCuda(FakeCudaTensor):
    """A fake CUDA tensor that is not on the CPU either (FakeCudaTensor keeps is_cpu)."""

    @property
    def is_cpu(self):
        return False


def test_an_ignored_cpu_argument_does_not_make_a_gpu_call_a_cpu_one(monkeypatch, fresh_capabilities,
                                                                      measured_speed):
    """The call's device is its x's (cpu_speed.py decides by the argument whose size it measures):
    a CUDA call with a CPU tensor the op ignores (residual_scale without a residual) is a GPU call,
    which the CPU's speed rules (here: eager measured faster for float16 x at every row count)
    must not decline.  Any CPU tensor used to make it a CPU call."""
    measured_speed(lambda op, size: 0.5)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d: (9, 0))
    args = {"x": torch.randn(256, 64, dtype=torch.float16).as_subclass(_OnlyOnCuda),
            "weight": torch.zeros(32, 64, dtype=torch.int8).as_subclass(_OnlyOnCuda),
            "weight_scale": torch.ones(32, 1).as_subclass(_OnlyOnCuda), "bias": None,
            "out_dtype": torch.bfloat16, "residual": None, "residual_scale": torch.ones(1)}
    op = next(o for o in op_list.OPS if o.name == "int8_linear")
    result = backend._call_rule(op)(args)
    assert result.success, result
    args["x"] = torch.randn(256, 64, dtype=torch.float16)  # the same call on the CPU: the speed rule holds
    args["weight"], args["weight_scale"] = torch.zeros(32, 64, dtype=torch.int8), torch.ones(32, 1)
    declined = backend._call_rule(op)(args)
    assert declined.failed_param == "x" and "eager is faster on this CPU" in declined.failure_reason


def test_every_int8_and_nvfp4_op_of_eager_is_served():
    eager = registry._capabilities["eager"]
    ours = registry._capabilities["c"]
    quantized = {n for n in eager if any(t in n for t in ("int8", "nvfp4", "int4", "w4a", "svdquant", "convrot"))}
    # an op whose 0.2.40 contract the installed comfy_kitchen lacks is not registered (backend.py)
    quantized = {n for n in quantized if backend._contract_present(n)}
    assert quantized - set(NOT_SERVED) <= ours, sorted(quantized - set(NOT_SERVED) - ours)
    assert not set(NOT_SERVED) & ours
    absent = set(NOT_SERVED) - set(eager)  # fp16_linear too, which no quantized name matches
    # A comfy_kitchen older than the list (it lacks ops the list registers: 0.2.31) may lack a
    # not-served op too; whether one left eager is then seen against the newest.
    older = {op.name for op in op_list.OPS if op.registered} - comfy_kitchen_c.backend.declared_ops()
    assert not absent or older, f"an op listed as not served left eager: {sorted(absent)}"
    if absent:
        pytest.skip(ck_lacks_reason(sorted(absent)) + " (not served by c); checked against the newest")


def test_a_refused_call_logs_cs_reason(activated, caplog):
    x = torch.randn(4, 64)
    w = torch.zeros(8, 64, dtype=torch.int8)
    kwargs = {"x": x, "weight": w, "weight_scale": torch.ones(8), "input_act": "rms_norm",
              "input_act_weight": torch.ones(63)}
    with caplog.at_level("DEBUG", logger="comfy_kitchen_c"):
        assert registry.get_capable_backend("int8_linear", kwargs) == "eager"
    record = next(r for r in caplog.records if r.name == "comfy_kitchen_c")
    assert record.levelname == "DEBUG"
    assert "backend 'c' declines int8_linear: int8_linear: argument 'input_act_weight'" in record.getMessage()


@requires_ck("comfy_kitchen.tensor.int8:_has_native_fusion", *MODULATED)
def test_the_layouts_fusion_probe_finds_c(activated):
    """TensorWiseINT8Layout.fused_rms_modulated asks the registry with a subset of the
    arguments (no weight_scale, no norm_eps) whether a native backend serves the fusion."""
    from comfy_kitchen.tensor.int8 import _has_native_fusion

    x = torch.randn(3, 64, dtype=torch.bfloat16)
    probe = {"x": x, "norm_weight": torch.ones(64, dtype=torch.bfloat16), "modulation_scale": torch.zeros(64),
             "weight": torch.zeros(8, 64, dtype=torch.int8), "out_dtype": x.dtype}
    assert registry.get_capable_backend("int8_linear_rms_modulated", probe) == "c"
    assert _has_native_fusion("int8_linear_rms_modulated", probe)


@pytest.fixture
def fused_calls(monkeypatch):
    return count_calls(monkeypatch, ("int8_linear", "dequantize_int8_embedding"))


@requires_ck("ck.int8_linear(residual)", "ck.int8_linear(input_act_weight)", "input_act='situ'",
             "ck.int8_linear_modulated", "ck.int8_linear_rms_modulated")
def test_the_new_ops_are_served_by_c_through_the_public_api(activated, fused_calls, speed_rules_off):
    x = torch.randn(3, 64, dtype=torch.bfloat16)
    w = torch.randint(-5, 6, (8, 64), dtype=torch.int8)
    ws = torch.full((8, 1), 0.01)
    ck.int8_linear(x, w, ws, None, x.dtype, input_act="rms_norm", input_act_weight=torch.ones(64),
                   input_act_eps=1e-6, residual=torch.ones(3, 8), residual_scale=torch.ones(8))
    ck.int8_linear(torch.randn(3, 128), w, ws, input_act="situ")
    ck.int8_linear_modulated(x, torch.zeros(64), w, ws)
    ck.int8_linear_rms_modulated(x, torch.ones(64), 1e-6, torch.zeros(64), w, ws)
    torch.ops.comfy_kitchen.dequantize_int8_embedding(w, ws, torch.tensor([1, 2]), 0, 2)
    assert fused_calls == {"int8_linear": 4, "dequantize_int8_embedding": 1}
