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

    def spy(name, op, device, tensors, ints):
        if name in ("int8_linear", "int8_linear_quantize"):
            seen.append((name, ints[0]))
        return real(name, op, device, tensors, ints)
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

COLS = 1024


def _threshold_kwargs(op: str, rows: int) -> dict:
    """A call of op whose elements (cpu_speed.decline: rows x COLS) are rows x COLS."""
    g = torch.Generator().manual_seed(7)
    q = torch.randint(-127, 128, (rows, COLS), generator=g, dtype=torch.int8)
    if op.startswith("dequantize_int8_simple"):
        kw = {"q": q, "scale": torch.rand(rows, 1, generator=g) + 0.01}
        return {**kw, "output_dtype_code": 2} if op.endswith("_dtype") else kw
    if op == "dequantize_int8_embedding":  # its elements: the rows it gathers
        table = torch.randint(-127, 128, (8, COLS), generator=g, dtype=torch.int8)
        return {"q": table, "scale": torch.rand(8, 1, generator=g) + 0.01,
                "indices": torch.randint(0, 8, (rows,), generator=g), "group_size": 0, "output_dtype_code": 2}
    x = torch.randn(rows, COLS, generator=g)
    scale = torch.tensor(0.05)
    if op == "quantize_per_tensor_fp8":
        return {"x": x, "scale": scale}
    if op == "dequantize_per_tensor_fp8":
        return {"x": x.to(torch.float8_e4m3fn), "scale": scale}
    if op == "rms_gated_residual":  # bfloat16: its float16 and float32 go to eager at any size
        bf = torch.bfloat16
        return {"activation": x.to(bf), "norm_weight": torch.rand(COLS, generator=g).to(bf),
                "residual": torch.randn(rows, COLS, generator=g).to(bf), "gate": torch.randn(1, COLS, generator=g).to(bf)}
    raise AssertionError(f"no call of {op} here: add one")


def _eager(op: str):
    from comfy_kitchen.backends import eager
    for module in ("quantization", "residual"):
        fn = getattr(getattr(eager, module, None), op, None)
        if fn is not None:
            return fn
    pytest.skip(f"the installed comfy_kitchen's eager backend has no {op}")


@pytest.mark.parametrize("op", sorted(cpu_speed.MIN_ELEMENTS))
def test_the_registry_gives_small_cpu_calls_to_eager_and_serves_from_the_threshold(op, activated, caplog):
    from comfy_kitchen.registry import registry
    eager = _eager(op)
    rows = cpu_speed.MIN_ELEMENTS[op] // COLS
    small, large = _threshold_kwargs(op, rows - 1), _threshold_kwargs(op, rows)
    with caplog.at_level("DEBUG", logger="comfy_kitchen_c"):
        result = registry.validate_backend_for_call("c", op, small)
        assert registry.get_capable_backend(op, small) == "eager"
    assert not result.success and result.failed_param == "__speed__"
    assert f"below {cpu_speed.MIN_ELEMENTS[op]} elements" in result.failure_reason
    assert any(f"backend 'c' declines {op}: eager is faster on the CPU" in r.getMessage() for r in caplog.records)
    assert registry.validate_backend_for_call("c", op, large).success
    assert registry.get_capable_backend(op, large) == "c"
    # a direct call of ours runs ours whatever the size, with eager's result
    ours, ref = getattr(ops, op)(**small), eager(**small)
    assert torch.equal(ours.float(), ref.float()) and ours.dtype == ref.dtype


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
    rows = cpu_speed.MIN_ELEMENTS["rms_gated_residual"] // 32  # at the size threshold: the dtype decides
    kw = {"activation": torch.randn(rows, 32).to(dtype), "norm_weight": torch.rand(32).to(dtype),
          "residual": torch.randn(rows, 32).to(dtype), "gate": torch.randn(1, 32).to(dtype)}
    assert registry.get_capable_backend("rms_gated_residual", kw) == served_by


@pytest.mark.parametrize("code, dtype", [(0, torch.float32), (1, torch.float16), (2, torch.bfloat16)])
def test_dequantize_int8_simple_dtype_follows_its_output_dtype(activated, code, dtype, caplog):
    """Its threshold is its output dtype's (cpu_speed.OUT_MIN_ELEMENTS, else MIN_ELEMENTS), and
    eager serves the dtypes in EAGER_OUT_DTYPES at every size."""
    from comfy_kitchen.registry import registry
    op = "dequantize_int8_simple_dtype"
    least = cpu_speed.OUT_MIN_ELEMENTS.get((op, dtype), cpu_speed.MIN_ELEMENTS[op])
    small, large = (_threshold_kwargs(op, rows) for rows in (least // COLS - 1, least // COLS))
    small["output_dtype_code"] = large["output_dtype_code"] = code
    assert registry.get_capable_backend(op, small) == "eager"
    expected = "eager" if dtype in cpu_speed.EAGER_OUT_DTYPES[op] else "c"
    with caplog.at_level("DEBUG", logger="comfy_kitchen_c"):
        assert registry.get_capable_backend(op, large) == expected
    if expected == "eager":
        assert any(f"eager is faster on the CPU with {dtype} output" in r.getMessage() for r in caplog.records)
    assert cpu_speed.OUT_MIN_ELEMENTS.get((op, torch.float32)) != cpu_speed.MIN_ELEMENTS[op]  # the rule is per dtype


@pytest.mark.parametrize("kw", [{}, {"bits": 6}, {"codebook": False}, {"symmetric": False},
                                {"stochastic_rounding": 3}])
def test_w4a8_quantizer_is_served_in_every_form(activated, kw):
    """No speed rule gives a form of quantize_w4a8_int8_weight to eager: each is 2x eager or more
    on the CPU (benchmarks/README.md, "The W4A8 / W6A8 quantizer on the CPU")."""
    from comfy_kitchen.registry import registry
    call = {"weight": torch.randn(16, 256).to(torch.bfloat16), **kw}
    assert cpu_speed.decline("quantize_w4a8_int8_weight", call) is None
    assert registry.get_capable_backend("quantize_w4a8_int8_weight", call) == "c"
