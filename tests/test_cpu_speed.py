# SPDX-License-Identifier: Apache-2.0
"""Where the CPU runs torch's code instead of ours (comfy_kitchen_c/cpu_speed.py): which path a
call takes, and that the result is eager's either way.  Never a speed assert: the choices' figures
are benchmarks/README.md's."""
from __future__ import annotations

import pytest
import torch

import comfy_kitchen_c.ops as ops
from comfy_kitchen_c import cpu_speed, linear as L

E = pytest.importorskip("comfy_kitchen.backends.eager.quantization")
ACT_CODES = L.INPUT_ACT_CODES
needs_library_gemm = pytest.mark.skipif(not L._library_gemm(L.LIBRARY_GEMM_MIN_ROWS, 64, 8),
                                        reason="the library GEMM path is off here (no oneDNN or _int_mm)")


@pytest.fixture
def act_codes(monkeypatch):
    """The activation code of each C call int8_linear makes, by C op name."""
    seen = []
    real = L._run

    def spy(name, op, device, tensors, ints, *rest):
        if name in ("int8_linear", "int8_linear_quantize"):
            seen.append((name, ints[0]))
        return real(name, op, device, tensors, ints, *rest)
    monkeypatch.setattr(L, "_run", spy)
    return seen


def _call(act: str, dtype: torch.dtype, rows: int):
    g = torch.Generator().manual_seed(5)
    k, n = 64, 8
    x = torch.randn(rows, 2 * k if act in ("swiglu", "situ") else k, generator=g).to(dtype)
    kw = dict(x=x, weight=torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8),
              weight_scale=torch.rand(n, generator=g) * 0.01, bias=None, out_dtype=dtype, input_act=act)
    if act == "rms_norm":
        kw.update(input_act_weight=torch.rand(k, generator=g).to(dtype), input_act_eps=1e-6)
    return kw


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int16) if t.element_size() == 2 else t.view(torch.int32)


@needs_library_gemm
@pytest.mark.parametrize("act, dtype", sorted(cpu_speed.TORCH_ACTS, key=str))
def test_torchs_activation_from_the_library_gemms_rows_on_gives_eagers_bits(act, dtype, act_codes):
    kw = _call(act, dtype, L.LIBRARY_GEMM_MIN_ROWS)
    got = ops.int8_linear(**kw)
    assert act_codes == [("int8_linear_quantize", 0)], "the activation was torch's, the quantizer plain"
    assert torch.equal(_bits(got), _bits(E.int8_linear(**kw)))


@pytest.mark.parametrize("act, dtype", [("gelu_tanh", torch.float32), ("rms_norm", torch.float16)])
def test_fewer_rows_keep_the_activation_fused(act, dtype, act_codes):
    ops.int8_linear(**_call(act, dtype, L.LIBRARY_GEMM_MIN_ROWS - 1))
    assert act_codes == [("int8_linear", ACT_CODES[act])]


@needs_library_gemm
def test_a_pair_not_listed_keeps_the_activation_fused(act_codes):
    assert ("gelu_tanh", torch.bfloat16) not in cpu_speed.TORCH_ACTS
    ops.int8_linear(**_call("gelu_tanh", torch.bfloat16, L.LIBRARY_GEMM_MIN_ROWS))
    assert act_codes == [("int8_linear_quantize", ACT_CODES["gelu_tanh"])]


# ---- the registry's speed rule (cpu_speed.MIN_ELEMENTS) -----------------------------------------

def _dequant_kwargs(op: str, rows: int, cols: int = 1024) -> dict:
    q = torch.randint(-127, 128, (rows, cols), dtype=torch.int8)
    kw = {"q": q, "scale": torch.rand(rows, 1) + 0.01}
    return {**kw, "output_dtype_code": 2} if op.endswith("_dtype") else kw


@pytest.mark.parametrize("op", sorted(cpu_speed.MIN_ELEMENTS))
def test_the_registry_gives_small_cpu_calls_to_eager_and_serves_from_the_threshold(op, activated, caplog):
    from comfy_kitchen.registry import registry
    rows = cpu_speed.MIN_ELEMENTS[op] // 1024
    small, large = _dequant_kwargs(op, rows - 1), _dequant_kwargs(op, rows)
    with caplog.at_level("DEBUG", logger="comfy_kitchen_c"):
        result = registry.validate_backend_for_call("c", op, small)
        assert registry.get_capable_backend(op, small) == "eager"
    assert not result.success and result.failed_param == "__speed__"
    assert f"below {cpu_speed.MIN_ELEMENTS[op]} elements" in result.failure_reason
    assert any(f"backend 'c' declines {op}: eager is faster on the CPU" in r.getMessage() for r in caplog.records)
    assert registry.validate_backend_for_call("c", op, large).success
    assert registry.get_capable_backend(op, large) == "c"
    # a direct call of ours runs ours whatever the size, with eager's result
    assert torch.equal(getattr(ops, op)(**small), getattr(E, op)(**small))


def test_ops_without_a_threshold_are_served_at_any_size(activated):
    from comfy_kitchen.registry import registry
    x = torch.randn(1, 16)
    assert "quantize_int8_rowwise" not in cpu_speed.MIN_ELEMENTS
    assert registry.get_capable_backend("quantize_int8_rowwise", {"x": x, "stochastic_rounding": 0}) == "c"


def _linear_kwargs(dtype: torch.dtype, rows: int) -> dict:
    return {"x": torch.randn(rows, 64).to(dtype), "weight": torch.randint(-127, 128, (8, 64), dtype=torch.int8),
            "weight_scale": torch.rand(8) * 0.01, "out_dtype": dtype}


def test_float16_linears_go_to_eager_from_the_row_threshold(activated, caplog):
    from comfy_kitchen.registry import registry
    rows = cpu_speed.FLOAT16_LINEAR_MIN_ROWS
    with caplog.at_level("DEBUG", logger="comfy_kitchen_c"):
        assert registry.get_capable_backend("int8_linear", _linear_kwargs(torch.float16, rows)) == "eager"
    assert any("declines int8_linear: eager is faster on the CPU with float16 x" in r.getMessage()
               for r in caplog.records)
    assert registry.get_capable_backend("int8_linear", _linear_kwargs(torch.float16, rows - 1)) == "c"
    assert registry.get_capable_backend("int8_linear", _linear_kwargs(torch.bfloat16, rows)) == "c"
    mod = {**_linear_kwargs(torch.float16, rows), "modulation_scale": torch.zeros(64, dtype=torch.float16)}
    assert registry.get_capable_backend("int8_linear_modulated", mod) == "eager"


@pytest.mark.parametrize("dtype, served_by", [(torch.float16, "eager"), (torch.float32, "eager"),
                                              (torch.bfloat16, "c")])
def test_rms_gated_residual_goes_to_eager_in_the_dtypes_listed(activated, dtype, served_by):
    from comfy_kitchen.registry import registry
    assert (dtype in cpu_speed.EAGER_DTYPES["rms_gated_residual"]) == (served_by == "eager")
    kw = {"activation": torch.randn(4, 32).to(dtype), "norm_weight": torch.rand(32).to(dtype),
          "residual": torch.randn(4, 32).to(dtype), "gate": torch.randn(1, 32).to(dtype)}
    assert registry.get_capable_backend("rms_gated_residual", kw) == served_by


@needs_library_gemm
def test_library_gemm_parts_use_the_pool_only_when_large(monkeypatch):
    """On the library-GEMM path the quantizer (rows x K) and the epilogue (rows x N) go to our pool
    only from PART_POOL_MIN_ELEMENTS elements (linear.py says why: torch's OpenMP workers spin
    beside them); below, the calling thread alone.  Who gets how many threads, not speed."""
    seen = {}
    real = L._run

    def spy(name, op, device, tensors, ints, threads=None):
        seen[name] = threads
        return real(name, op, device, tensors, ints, threads)
    monkeypatch.setattr(L, "_run", spy)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)
    g = torch.Generator().manual_seed(6)
    rows, k, n = L.LIBRARY_GEMM_MIN_ROWS, 64, 8
    monkeypatch.setattr(L, "PART_POOL_MIN_ELEMENTS", rows * k)  # the quantizer's part reaches it, the epilogue's not
    x = torch.randn(rows, k, generator=g)
    w = torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8)
    ws = torch.rand(n, generator=g) * 0.01
    out = L.int8_linear(x, w, ws)
    assert seen == {"int8_linear_quantize": 3, "int8_linear_epilogue": 1}
    monkeypatch.undo()
    assert torch.equal(out, L.int8_linear(x, w, ws))  # the thread count cannot change a result
