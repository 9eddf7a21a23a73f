# SPDX-License-Identifier: Apache-2.0
"""CPU int8_linear's two GEMMs: torch._int_mm (oneDNN) between our C quantizer and epilogue
(int8_linear_quantize, int8_linear_epilogue) from LIBRARY_GEMM_MIN_ROWS rows on, our C GEMM
(the one-call op) below that.  The choice must not change a bit (int32 sums of int8 products
are exact in any order; the quantizer and epilogue are the same C code), and each path must be
the one taken where intended: the call count of torch._int_mm says which ran."""
import pytest
import torch

import comfy_kitchen_c
from comfy_kitchen_c import ArgumentError, ArgumentTypeError, linear as L, ops, settings
from comfy_kitchen_c import testing
from comfy_kitchen_c.testing import emulated_device

from conftest import assert_bitwise_equal
from test_int8_linear import make

needs_onednn = pytest.mark.skipif(not (torch.backends.mkldnn.is_available() and hasattr(torch, "_int_mm")),
                                  reason="torch without oneDNN: the CPU GEMM is always ours")


@pytest.fixture
def int_mm_calls(monkeypatch):
    """The number of torch._int_mm calls made so far (a list holding it)."""
    calls = [0]
    real = torch._int_mm

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "_int_mm", counted)
    return calls


@pytest.fixture
def our_gemm(monkeypatch):
    """Runs fn with the library GEMM off (every row count takes our C GEMM)."""
    def run(fn, *args, **kwargs):
        with monkeypatch.context() as m:
            m.setattr(L, "LIBRARY_GEMM_MIN_ROWS", 1 << 62)
            return fn(*args, **kwargs)
    return run


@pytest.fixture
def memory_limit():
    saved = comfy_kitchen_c.linear_memory_limit()
    yield comfy_kitchen_c.set_linear_memory_limit
    comfy_kitchen_c.set_linear_memory_limit(saved)


M = L.LIBRARY_GEMM_MIN_ROWS + 21  # rows enough for the library GEMM


def _modulated(x, k, dtype):
    return torch.linspace(-0.5, 0.7, k).to(dtype)


# (name, builder of (fn, args, kwargs)) over every form that shares the CPU GEMM
def _forms(dtype, out_dtype):
    x, w, ws, b = make(M, 96, 40, dtype, "channel", bias=True, seed=3)
    xs, _, _, _ = make(M, 96, 40, dtype, act="swiglu", seed=4)
    nw = torch.rand(96) + 0.5
    s = _modulated(x, 96, dtype)
    res = torch.randn(M, 40).to(out_dtype)
    rs = torch.rand(40).to(out_dtype)
    return [
        ("plain", ops.int8_linear, (x, w, ws, b, out_dtype), {}),
        ("scalar scale", ops.int8_linear, (x, w, torch.tensor(0.004), None, out_dtype), {}),
        ("convrot", ops.int8_linear, (x, w, ws, b, out_dtype, True, 16), {}),
        ("gelu_tanh", ops.int8_linear, (x, w, ws, b, out_dtype), {"input_act": "gelu_tanh"}),
        ("swiglu", ops.int8_linear, (xs, w, ws, b, out_dtype), {"input_act": "swiglu"}),
        ("situ", ops.int8_linear, (xs, w, ws, b, out_dtype), {"input_act": "situ"}),
        ("rms_norm", ops.int8_linear, (x, w, ws, b, out_dtype),
         {"input_act": "rms_norm", "input_act_weight": nw, "input_act_eps": 1e-5}),
        ("residual", ops.int8_linear, (x, w, ws, b, out_dtype), {"residual": res, "residual_scale": rs}),
        ("residual scalar", ops.int8_linear, (x.view(1, M, 96), w, ws, b, out_dtype),
         {"residual": res[:1], "residual_scale": rs[:1]}),
        ("modulated", ops.int8_linear_modulated, (x, s, w, ws, b, out_dtype), {}),
        ("rms_modulated", ops.int8_linear_rms_modulated, (x, nw.to(dtype), 1e-6, s, w, ws, b, out_dtype), {}),
    ]


@needs_onednn
@pytest.mark.parametrize("dtype,out_dtype", [(torch.bfloat16, torch.bfloat16), (torch.float16, torch.float32),
                                             (torch.float32, torch.float16)], ids=["bf16", "f16-f32", "f32-f16"])
def test_library_gemm_gives_our_gemms_bits(dtype, out_dtype, int_mm_calls, our_gemm):
    for name, fn, args, kwargs in _forms(dtype, out_dtype):
        before = int_mm_calls[0]
        library = fn(*args, **kwargs)
        assert int_mm_calls[0] == before + 1, f"{name}: torch._int_mm not called once"
        ours = our_gemm(fn, *args, **kwargs)
        assert int_mm_calls[0] == before + 1, f"{name}: our GEMM path called torch._int_mm"
        assert library.shape == ours.shape and library.dtype == ours.dtype, name
        assert_bitwise_equal(library, ours, f"{name} {dtype} -> {out_dtype}")


@needs_onednn
def test_few_rows_take_our_gemm_and_more_the_library(int_mm_calls):
    x, w, ws, b = make(L.LIBRARY_GEMM_MIN_ROWS, 64, 24, torch.bfloat16, bias=True)
    for rows, calls in ((1, 0), (L.LIBRARY_GEMM_MIN_ROWS - 1, 0), (L.LIBRARY_GEMM_MIN_ROWS, 1)):
        before = int_mm_calls[0]
        ops.int8_linear(x[:rows], w, ws, b)
        assert int_mm_calls[0] - before == calls, f"{rows} rows"


@needs_onednn
def test_onednn_off_takes_our_gemm(int_mm_calls):
    x, w, ws, b = make(M, 64, 24, torch.bfloat16, bias=True)
    with torch.backends.mkldnn.flags(enabled=False):
        ops.int8_linear(x, w, ws, b)
    assert int_mm_calls[0] == 0


def test_the_emulated_device_never_takes_the_library(int_mm_calls):
    x, w, ws, b = make(M, 64, 24, torch.bfloat16, bias=True)
    with emulated_device():
        ops.int8_linear(x, w, ws, b)
    assert int_mm_calls[0] == 0


@needs_onednn
@pytest.mark.parametrize("choice, calls", [("ours", 0), ("library", 1)])
def test_the_cpu_gemm_setting_picks_the_gemm(monkeypatch, int_mm_calls, choice, calls):
    """COMFY_KITCHEN_C_CPU_GEMM (settings.py), read at the first CPU int8_linear."""
    x, w, ws, b = make(M, 64, 24, torch.bfloat16, bias=True)
    monkeypatch.setenv("COMFY_KITCHEN_C_CPU_GEMM", choice)
    monkeypatch.setattr(L, "_LIBRARY_GEMM_ON", None)
    settings.reload()
    try:
        ops.int8_linear(x, w, ws, b)
    finally:
        monkeypatch.undo()
        settings.reload()
    assert int_mm_calls[0] == calls


def test_the_parts_refuse_the_emulated_device():
    """The parts have no GPU kernel: on the emulated device (every call runs the GPU entry) the
    router refuses them by name rather than run the CPU code on "device memory"."""
    x = torch.randn(4, 64, dtype=torch.bfloat16)
    q, sx = torch.empty(4, 64, dtype=torch.int8), torch.empty(4)
    acc, out = torch.zeros(4, 8, dtype=torch.int32), torch.empty(4, 8, dtype=torch.bfloat16)
    emu = testing._emu()  # EmulatedDeviceMissing: skipped (conftest)
    for name, args in (("int8_linear_quantize", (x, q, sx, None, None, None, 0, 0, 0, -1)),
                       ("int8_linear_epilogue", (acc, sx, torch.ones(1), None, None, None, out))):
        with pytest.raises(ArgumentTypeError, match=f"{name} has no GPU kernel; it runs on CPU tensors"):
            _call(name, *args, module=emu)


@needs_onednn
def test_chunks_bounded_by_the_memory_limit(memory_limit, int_mm_calls, our_gemm, monkeypatch):
    """Rows go through in chunks of limit // (k + 4 + 4n + activated row) rows, one
    torch._int_mm per chunk, with the one-call op's result (each chunk's x, output and
    residual rows its own).  The activation stays fused here (cpu_speed.TORCH_ACTS emptied):
    the chunks' activated rows are what is bounded."""
    from comfy_kitchen_c import cpu_speed
    monkeypatch.setattr(cpu_speed, "TORCH_ACTS", frozenset())
    m, k, n = 70, 64, 24
    x, w, ws, b = make(m, k, n, torch.float16, bias=True, act="swiglu")
    res = {"residual": torch.randn(m, n), "residual_scale": torch.rand(n)}
    whole = our_gemm(ops.int8_linear, x, w, ws, b, torch.float32, True, 16, "swiglu", **res)
    per_row = k + 4 + 4 * n + 2 * k
    for rows in (L.LIBRARY_GEMM_MIN_ROWS, 33, m):
        memory_limit(rows * per_row + per_row - 1)
        before = int_mm_calls[0]
        got = ops.int8_linear(x, w, ws, b, torch.float32, True, 16, "swiglu", **res)
        assert int_mm_calls[0] - before == -(-m // rows), f"{rows} rows per chunk"
        assert_bitwise_equal(got, whole, f"chunks of {rows}")


def _call(name, *tensors_and_ints, module=None):
    args = [t.__dlpack__() if isinstance(t, torch.Tensor) else t for t in tensors_and_ints]
    getattr(module or comfy_kitchen_c._C, name)(name, *args, 0, 1)


def test_the_parts_check_their_arguments():
    x, w, ws, _ = make(4, 64, 8, torch.bfloat16)
    q, sx = torch.empty(4, 64, dtype=torch.int8), torch.empty(4)
    acc, out = torch.zeros(4, 8, dtype=torch.int32), torch.empty(4, 8, dtype=torch.bfloat16)
    _call("int8_linear_quantize", x, q, sx, None, None, None, 0, 0, 0, -1)
    ref_q, ref_s = ops.quantize_int8_rowwise(x)
    assert_bitwise_equal(q, ref_q, "codes")
    assert_bitwise_equal(sx, ref_s.reshape(-1), "scales")
    with pytest.raises(ArgumentError, match=r"int8_linear_quantize: argument 'q': expected shape \(4, 64\)"):
        _call("int8_linear_quantize", x, torch.empty(4, 32, dtype=torch.int8), sx, None, None, None, 0, 0, 0, -1)
    with pytest.raises(ArgumentError, match="int8_linear_quantize: argument 'act_rows' is required"):
        _call("int8_linear_quantize", x, q, sx, None, None, None, 1, 0, 0, -1)
    with pytest.raises(ArgumentError, match="int8_linear_quantize: argument 'act_rows'"):
        _call("int8_linear_quantize", x, q, sx, torch.empty(10, dtype=torch.uint8), None, None, 1, 0, 0, -1)
    with pytest.raises(ArgumentError, match="int8_linear_quantize: argument 'act'"):
        _call("int8_linear_quantize", x, q, sx, None, None, None, 9, 0, 0, -1)
    _call("int8_linear_epilogue", acc, sx, ws, None, None, None, out)
    assert not out.float().any()
    with pytest.raises(ArgumentError, match="int8_linear_epilogue: argument 'out'"):
        _call("int8_linear_epilogue", acc, sx, ws, None, None, None, out[:3])
    with pytest.raises(ArgumentError, match="int8_linear_epilogue: argument 'weight_scale'"):
        _call("int8_linear_epilogue", acc, sx, ws[:3], None, None, None, out)
    with pytest.raises(ArgumentError, match="int8_linear_epilogue: argument 'residual'"):
        _call("int8_linear_epilogue", acc, sx, ws, None, torch.ones(3, 8), torch.ones(1), out)
    with pytest.raises(ArgumentTypeError, match="int8_linear_epilogue: argument 'acc'"):
        _call("int8_linear_epilogue", acc.float(), sx, ws, None, None, None, out)


# ---- the tabulated activations (csrc/cpu/act_tables.c) ----
# gelu_tanh, silu(gate) and situ's factors are tabulated over every 16-bit input; the tables must
# hold what the per-value expression (csrc/math/activation.h, with the C library's tanhf and
# expf) gives.  The reference recomputes that expression here, one IEEE float32 operation at a time
# (torch's elementwise float32 ops round each result; none is fused), with the same libm.

libm = None
try:
    import ctypes
    import ctypes.util
    libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    for _fn in (libm.tanhf, libm.expf):
        _fn.restype, _fn.argtypes = ctypes.c_float, [ctypes.c_float]
except (OSError, AttributeError):
    libm = None
needs_libm = pytest.mark.skipif(libm is None, reason="no C library math to call for the reference")


def _libm(fn, t):
    return torch.tensor([fn(v) for v in t.tolist()], dtype=torch.float32)


def _every_value(dtype):
    """Every finite value of a 16-bit dtype."""
    v = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype).float()
    return v[torch.isfinite(v)]


def _reference(act, v, other, dtype):
    f = torch.float32
    r = lambda t: t.to(dtype).to(f)  # noqa: E731 -- the rounding to the row's type
    one, half = torch.tensor(1.0, dtype=f), torch.tensor(0.5, dtype=f)
    if act == "gelu_tanh":
        inner = torch.tensor(0.7978845608028654, dtype=f) * (v + torch.tensor(0.044715, dtype=f) * (v * v * v))
        return r((half * v) * (one + _libm(libm.tanhf, inner)))
    if act == "swiglu":
        return r(r(v / (one + _libm(libm.expf, -v))) * other)
    gate, hidden = other, v  # situ: the row is [hidden | gate]
    capped = r(_libm(libm.tanhf, r(gate / 4.0)))
    gated = r(r(capped * 4.0) * r(one / (one + _libm(libm.expf, -gate))))
    soft = r(_libm(libm.tanhf, r(hidden / 25.0)))
    return r(r(soft * 25.0) * gated)


@needs_libm
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("act", ["gelu_tanh", "swiglu", "situ"])
def test_tabulated_activations_hold_the_per_value_results(act, dtype):
    act_code = L.INPUT_ACT_CODES[act]
    v = _every_value(dtype)
    k = 256
    v = torch.cat([v, v[: (-v.numel()) % k]])  # whole rows
    rows = v.numel() // k
    other = v.flip(0) if act != "gelu_tanh" else None
    x = v.to(dtype).view(rows, k) if other is None else torch.cat(
        [v.to(dtype).view(rows, k), other.to(dtype).view(rows, k)], 1)
    q, sx = torch.empty(rows, k, dtype=torch.int8), torch.empty(rows)
    act_rows = torch.empty(rows * k * 2, dtype=torch.uint8)
    _call("int8_linear_quantize", x.contiguous(), q, sx, act_rows, None, None, act_code, 0, 0, -1)
    got = act_rows.view(dtype).float()
    want = _reference(act, v, other, dtype)
    same = (got == want) | (got.isnan() & want.isnan())
    assert bool(same.all()), f"{act} {dtype}: {int((~same).sum())} of {v.numel()} values differ, first at " \
                             f"{v[~same][:3].tolist()}: {got[~same][:3].tolist()} vs {want[~same][:3].tolist()}"
