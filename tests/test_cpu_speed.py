# SPDX-License-Identifier: Apache-2.0
"""Where the CPU runs torch's code instead of ours (comfy_kitchen_c/cpu_speed.py): which path a
call takes, and that the result is eager's either way.  Never a speed assert: the choices' figures
are in benchmarks/results/cpu_speed_rules.md."""
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


# ---- the registry's speed rules: measured on this CPU (cpu_speed.PROBES) ------------------------
# The timings are the test's (conftest's measured_speed): which backend serves a call never depends
# on the clock here.  benchmarks/bench_registry.py measures the real ones.

PROBE_CALLS = [(op, dtype) for op, probe in sorted(cpu_speed.PROBES.items()) for dtype in probe.keys]


def _probe_call(op: str, dtype, rows: int = 1) -> dict:
    """A valid call of op, rows rows of the probe's own shape, with dtype as its deciding dtype."""
    return cpu_speed.PROBES[op].build(dtype, rows)


def _size(op: str, kwargs: dict) -> int:
    probe = cpu_speed.PROBES[op]
    return probe.size(kwargs, kwargs[probe.main])


@pytest.mark.parametrize("op, dtype", PROBE_CALLS, ids=lambda v: str(v).replace("torch.", ""))
def test_an_explicit_c_runs_c_where_eager_measured_faster(op, dtype, activated, measured_speed):
    """Eager measured faster at every size: picked by priority the call goes to eager, but
    use_backend("c") and get_implementation(..., backend="c") get "c"'s own op."""
    from comfy_kitchen.registry import registry
    from comfy_kitchen_c import ops as c_ops
    measured_speed(lambda op, size: 0.5)
    kwargs = _probe_call(op, dtype)
    assert registry.get_capable_backend(op, kwargs) == "eager"
    with registry.use_backend("c"):
        assert registry.get_capable_backend(op, kwargs) == "c"
        assert registry.get_implementation(op, kwargs=kwargs) is getattr(c_ops, op)
    assert registry.get_implementation(op, backend="c", kwargs=kwargs) is getattr(c_ops, op)
    with registry.use_backend("eager"):  # another backend named: "c" is not asked
        assert registry.get_capable_backend(op, kwargs) == "eager"


def test_the_measured_boundary_decides_and_names_the_argument(activated, measured_speed, caplog):
    """Ours slower below 100,000 elements, faster from there: the ladder's sizes below go to eager,
    those from the first faster size on to "c"; the reason names the argument, the sizes and the
    measured ratios, and the DEBUG line the call's own size."""
    from comfy_kitchen.registry import registry
    op = "dequantize_int8_simple"
    measured_speed(lambda op, size: 0.6 if size < 100_000 else 1.4)
    small, large = _probe_call(op, torch.float32, 16), _probe_call(op, torch.float32, 64)  # 49,152 and 196,608
    with caplog.at_level("DEBUG", logger="comfy_kitchen_c"):
        result = registry.validate_backend_for_call("c", op, small)
        assert registry.get_capable_backend(op, small) == "eager"
    assert not result.success and result.failed_param == "q"
    assert result.failure_reason.startswith("eager is faster on this CPU up to 98304 elements (float32 output dtype")
    assert "0.60x at 49152" in result.failure_reason
    assert any(f"backend 'c' declines {op}: argument 'q': 49152 elements; eager is faster" in r.getMessage()
               for r in caplog.records)
    assert registry.get_capable_backend(op, large) == "c"
    # a size between the last slower and the first faster ladder size goes to "c": a tie is ours
    between = {"q": torch.zeros(1, 150_000, dtype=torch.int8), "scale": torch.ones(1, 1)}
    assert registry.get_capable_backend(op, between) == "c"


def test_no_rule_sends_a_call_to_eager_where_ours_measured_faster(activated, measured_speed):
    """Ours at least MARGIN of eager's speed at every size of every probe: nothing is declined."""
    from comfy_kitchen.registry import registry
    measured_speed(lambda op, size: cpu_speed.MARGIN)
    for op, dtype in PROBE_CALLS:
        for rows in (1, 16, 300):
            assert cpu_speed.decline(op, _probe_call(op, dtype, rows)) is None, (op, dtype, rows)
    assert registry.get_capable_backend("rms_gated_residual", _probe_call("rms_gated_residual", torch.float16)) == "c"


def test_a_rule_that_flips_back_is_followed(activated, measured_speed):
    """The linears' shape: ours faster at few rows, eager from many (a float16 x on a CPU whose
    torch runs float16 natively): the rows from the first slower ladder size on go to eager."""
    from comfy_kitchen.registry import registry
    op = "int8_linear"
    measured_speed(lambda op, rows: 2.0 if rows < 256 else 0.8)
    plain = (torch.float16, "plain")
    assert registry.get_capable_backend(op, _probe_call(op, plain, 64)) == "c"
    kwargs = _probe_call(op, plain, 64)
    kwargs["x"] = torch.randn(300, kwargs["x"].shape[1]).half()
    assert registry.get_capable_backend(op, kwargs) == "eager"


def test_each_form_of_a_linear_is_its_own_rule(activated, measured_speed, monkeypatch):
    """A float16 residual linear measured slower where the plain one measured faster: each form is
    timed when a call of it first comes, and decides for itself."""
    from comfy_kitchen.registry import registry
    measured_speed()
    monkeypatch.setattr(cpu_speed, "time_pair",
                        lambda ours, eager, kwargs, rounds=5: (0.5 if "residual" in kwargs else 2.0, 1.0))
    op = "int8_linear"
    plain, residual = _probe_call(op, (torch.float16, "plain"), 256), _probe_call(op, (torch.float16, "residual"), 256)
    assert "residual" in residual and residual["residual"].shape == (256, cpu_speed.K_LINEAR)
    assert registry.get_capable_backend(op, plain) == "c"
    assert registry.get_capable_backend(op, residual) == "eager"
    for form, extra in (("convrot+gelu_tanh", {}), ("swiglu", {}), ("rms_norm+residual", {})):
        kwargs = _probe_call(op, (torch.bfloat16, form), 16)
        assert cpu_speed._linear_form(kwargs, kwargs["x"]) == (torch.bfloat16, form)
        ours = ops.int8_linear(**kwargs)  # the probe's call is a valid one
        assert ours.shape == (16, cpu_speed.K_LINEAR)
    assert cpu_speed.decline(op, {**plain, "input_act": "unknown"}) is None  # no rule for a call "c" refuses


def test_measured_once_then_read_from_the_cache_file(activated, measured_speed):
    """The first call of an (op, dtype, threads) measures it and writes the file, keyed by this
    machine and versions; another process (here: the decisions forgotten) reads it instead of timing."""
    import json
    from comfy_kitchen.registry import registry
    op = "dequantize_int8_embedding"
    path = measured_speed(lambda op, size: 0.5)
    kwargs = _probe_call(op, torch.bfloat16)
    assert registry.get_capable_backend(op, kwargs) == "eager"
    timed = len(measured_speed.timed)
    assert timed == len(cpu_speed.PROBES[op].ladder)
    doc = json.load(open(path))
    env = doc["environments"][cpu_speed.environment()]
    assert f"{op}|bfloat16|{torch.get_num_threads()}" in env
    assert cpu_speed.cpu_model() in cpu_speed.environment() and torch.__version__ in cpu_speed.environment()
    measured_speed(lambda op, size: 2.0, cache_file=path)  # the file's decision wins over a new timing
    assert registry.get_capable_backend(op, kwargs) == "eager"
    assert len(measured_speed.timed) == timed
    assert registry.get_capable_backend(op, _probe_call(op, torch.float32)) == "c"  # not in the file: timed


def test_a_disturbed_measurement_gives_the_call_to_c_and_is_not_kept(activated, measured_speed, monkeypatch):
    import os
    from comfy_kitchen.registry import registry
    path = measured_speed()
    monkeypatch.setattr(cpu_speed, "time_pair", lambda ours, eager, kwargs, rounds=5: (0.3, 5.0))
    kwargs = _probe_call("dequantize_int8_simple", torch.float32)
    assert registry.get_capable_backend("dequantize_int8_simple", kwargs) == "c"
    assert not os.path.exists(path)


def test_a_declined_call_is_decided_before_the_argument_check(activated, measured_speed, monkeypatch):
    """The decline costs a look-up, not the op's check (about 3 us of the 10 a call through the
    registry costs); a forced "c" then runs the check, which refuses the bad call by argument."""
    from comfy_kitchen.exceptions import NoCapableBackendError
    from comfy_kitchen.registry import registry
    from comfy_kitchen_c import backend, op_list
    measured_speed(lambda op, size: 0.5)
    checks = []
    real = ops.check_dequantize_int8_simple
    monkeypatch.setattr(ops, "check_dequantize_int8_simple", lambda *a, **k: checks.append(1) or real(*a, **k))
    rule = backend._call_rule(op_list.BY_NAME["dequantize_int8_simple"])
    kwargs = _probe_call("dequantize_int8_simple", torch.float32)
    assert rule(kwargs).failed_param == "q" and checks == []
    bad = {**kwargs, "scale": torch.ones(3)}
    assert rule(bad).failed_param == "q" and checks == []
    monkeypatch.setattr(registry, "_constraints", {**registry._constraints})
    c = registry._constraints[("c", "dequantize_int8_simple")]
    registry._constraints[("c", "dequantize_int8_simple")] = type(c)(params={}, default_devices=c.default_devices,
                                                                       call_rules=(rule,))
    with pytest.raises(NoCapableBackendError, match=r"c: scale: dequantize_int8_simple: argument 'scale'"):
        registry.get_implementation("dequantize_int8_simple", backend="c", kwargs=bad)
    assert checks == [1]


def test_off_gives_every_valid_call_to_c(activated):
    from comfy_kitchen.registry import registry
    cpu_speed.configure(mode="off")
    try:
        for op, dtype in PROBE_CALLS:
            assert cpu_speed.decline(op, _probe_call(op, dtype)) is None
        assert registry.get_capable_backend("rms_gated_residual", _probe_call("rms_gated_residual", torch.float16)) == "c"
    finally:
        cpu_speed.configure()


def test_the_emulated_device_is_not_the_cpu(activated, measured_speed):
    """The speed rules are the CPU kernels'; CPU tensors on the emulated device run the GPU kernels."""
    from comfy_kitchen.registry import registry
    from conftest import kernels_of
    measured_speed(lambda op, size: 0.5)
    kwargs = _probe_call("dequantize_int8_simple", torch.float32)
    with kernels_of("emulated"):
        assert registry.get_capable_backend("dequantize_int8_simple", kwargs) == "c"
    assert measured_speed.timed == []


def test_awq_above_the_gpu_rows_goes_to_eager_on_cuda_only_by_priority(activated):
    """On CUDA (here the emulated device's) a batch above awq.GPU_MAX_ROWS goes to eager's GEMM when
    "c" is picked by priority; named, "c" serves it; on the CPU the measured rule decides."""
    from comfy_kitchen.registry import registry
    from comfy_kitchen_c import awq
    from conftest import kernels_of
    kwargs = _probe_call("gemv_awq_w4a16", torch.bfloat16, awq.GPU_MAX_ROWS + 1)
    small = _probe_call("gemv_awq_w4a16", torch.bfloat16, awq.GPU_MAX_ROWS)
    with kernels_of("emulated"):
        assert registry.get_capable_backend("gemv_awq_w4a16", kwargs) == "eager"
        assert registry.get_capable_backend("gemv_awq_w4a16", small) == "c"
        with registry.use_backend("c"):
            assert registry.get_capable_backend("gemv_awq_w4a16", kwargs) == "c"
    assert registry.get_capable_backend("gemv_awq_w4a16", kwargs) == "c"  # CPU, rules off (the tests' default)


@pytest.mark.parametrize("kw", [{}, {"bits": 6}, {"codebook": False}, {"symmetric": False},
                                {"stochastic_rounding": 3}])
def test_w4a8_quantizer_is_served_in_every_form(activated, kw):
    """No speed rule gives a form of quantize_w4a8_int8_weight to eager: each is 2x eager or more
    on the CPU (benchmarks/results/w4a8_quant_cpu.md)."""
    from comfy_kitchen.registry import registry
    call = {"weight": torch.randn(16, 256).to(torch.bfloat16), **kw}
    assert cpu_speed.decline("quantize_w4a8_int8_weight", call) is None
    assert registry.get_capable_backend("quantize_w4a8_int8_weight", call) == "c"
