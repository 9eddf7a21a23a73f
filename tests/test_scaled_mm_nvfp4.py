# SPDX-License-Identifier: Apache-2.0
"""scaled_mm_nvfp4 on the CPU (dequantize-and-matmul) and through the GPU launcher on the
emulated device (its C reference of cuBLASLt's block-scaled FP4 GEMM), and registration of
both linear ops.

comfy_kitchen's eager scaled_mm_nvfp4 cannot run on the CPU ("CPU does not support swizzle"),
so the reference is its definition: eager's exact dequantization of each operand (an e2m1
code times an e4m3 block scale is exact in float32) multiplied in float64, times alpha, plus
the bias in the output type.  Tolerance: a float32 dot product of K terms is within
K * 2^-24 * sum|a_k b_k| of the exact one (the standard bound; the reference's float64
error is far below it), then one rounding to out_dtype (eps/2 * |y|, taken as eps * |y|).
"""
import pytest
import torch

import comfy_kitchen as ck
from comfy_kitchen.registry import registry

import comfy_kitchen_c
from comfy_kitchen_c import ArgumentError, ArgumentTypeError, _C, ops
from comfy_kitchen_c.testing import emulated_device

from conftest import E
from inputs import FakeCudaTensor

F32_EPS = 2.0**-24


def nvfp4(x, hi_first=True):
    pts = (x.abs().max().float() / (448 * 6)).reshape(())
    q, s = E.quantize_nvfp4(x, pts, 0.0, False, hi_first)
    return q, s, pts


def make(m, n, k, out_dtype, bias=False, seed=0, hi_first=True):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g) * 3
    a[:, :: max(k // 5, 1)] *= 20  # outlier channels, as activations have
    b = torch.randn(n, k, generator=g)
    qa, sa, pa = nvfp4(a, hi_first)
    qb, sb, pb = nvfp4(b, hi_first)
    bias_t = (torch.randn(n, generator=g) * 2).to(out_dtype) if bias else None
    return qa, qb, pa, pb, sa, sb, bias_t


def reference(qa, qb, sa, sb, alpha, bias, out_dtype):
    """(float64 result, float64 sum |a_k b_k| per output) from eager's dequantization."""
    one = torch.ones((), dtype=torch.float32)
    da = E.dequantize_nvfp4(qa, one, sa, torch.float32).double()
    db = E.dequantize_nvfp4(qb, one, sb, torch.float32).double()
    y = (da @ db.T) * float(alpha)
    if bias is not None:
        y = y + bias.double()
    return y, (da.abs() @ db.abs().T) * abs(float(alpha))


def assert_close_to_reference(out, qa, qb, sa, sb, alpha, bias, out_dtype, what):
    y, magnitude = reference(qa, qb, sa, sb, alpha, bias, out_dtype)
    k = 2 * qa.shape[1]
    tol = k * F32_EPS * magnitude + torch.finfo(out_dtype).eps * y.abs()
    assert out.dtype == out_dtype and out.shape == y.shape, what
    bad = (out.double() - y).abs() > tol
    assert not bool(bad.any()), f"{what}: {int(bad.sum())} of {out.numel()} outputs beyond the bound"


SHAPES = [(1, 8, 16), (3, 17, 48), (64, 40, 128), (130, 8, 32)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_matches_the_definition(shape, device):
    m, n, k = shape
    for i, out_dtype in enumerate([torch.bfloat16, torch.float16, torch.float32]):
        qa, qb, pa, pb, sa, sb, bias = make(m, n, k, out_dtype, bias=i != 1, seed=i)
        if device == "cpu":
            out = ops.scaled_mm_nvfp4(qa, qb, pa, pb, sa, sb, bias, out_dtype)
        else:
            with emulated_device():
                out = ops.scaled_mm_nvfp4(qa, qb, pa, pb, sa, sb, bias, out_dtype)
        assert_close_to_reference(out, qa, qb, sa, sb, pa * pb, bias, out_dtype, f"{device} {shape} {out_dtype}")


@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_alpha_replaces_the_tensor_scales_and_out_dtype_defaults_to_bfloat16(device):
    qa, qb, pa, pb, sa, sb, _ = make(5, 16, 64, torch.bfloat16)
    alpha = torch.tensor(0.37)
    ctx = emulated_device() if device == "emulated" else torch.no_grad()
    with ctx:
        out = ops.scaled_mm_nvfp4(qa, qb, pa, pb, sa, sb, alpha=alpha)
    assert out.dtype == torch.bfloat16
    assert_close_to_reference(out, qa, qb, sa, sb, alpha, None, torch.bfloat16, f"{device} alpha")


def test_nibble_order_does_not_change_the_product():
    """Both operands packed low-nibble-first give the same GEMM: each pair's two values swap in
    a and b alike, inside one 16-value block."""
    hi = make(4, 8, 32, torch.float32, hi_first=True)
    lo = make(4, 8, 32, torch.float32, hi_first=False)
    assert torch.equal(ops.scaled_mm_nvfp4(*hi, torch.float32), ops.scaled_mm_nvfp4(*lo, torch.float32))


def bad_calls():
    qa, qb, pa, pb, sa, sb, _ = make(4, 8, 32, torch.bfloat16)
    return [
        (ArgumentError, "'b'", (qa, qb[:, :8], pa, pb, sa, sb)),
        (ArgumentError, "'block_scale_a'", (qa, qb, pa, pb, sa[:64], sb)),
        (ArgumentError, "'bias'", (qa, qb, pa, pb, sa, sb, torch.ones(3))),
        (ArgumentTypeError, "'out_dtype'", (qa, qb, pa, pb, sa, sb, None, torch.int8)),
        (ArgumentError, "'tensor_scale_a'", (qa, qb, torch.ones(2), pb, sa, sb)),
        (ArgumentTypeError, "'a'", (qa.to(torch.int8), qb, pa, pb, sa, sb)),
        (ArgumentError, "'a'", (qa[:, :4], qb[:, :4], pa, pb, sa, sb)),
    ]


@pytest.mark.parametrize("i", range(7))
def test_bad_input_names_op_and_argument(i):
    exc, name, args = bad_calls()[i]
    with pytest.raises(exc, match=f"scaled_mm_nvfp4: argument {name}"):
        ops.scaled_mm_nvfp4(*args)


# ---- registration of the linear ops ----

def test_int8_linear_through_comfy_kitchen_runs_our_kernel(activated, monkeypatch):
    calls = []
    real = _C.int8_linear
    monkeypatch.setattr(_C, "int8_linear", lambda *a: calls.append(a[0]) or real(*a))
    x = torch.randn(6, 64, dtype=torch.bfloat16)
    w = torch.randint(-127, 128, (16, 64), dtype=torch.int8)
    ws = torch.rand(16) * 0.01
    y = ck.int8_linear(x, w, ws, input_act="gelu_tanh")
    assert calls == ["int8_linear"]
    assert torch.equal(y, ops.int8_linear(x, w, ws, None, torch.bfloat16, input_act="gelu_tanh"))


def test_unservable_linear_calls_fall_through(activated):
    x = torch.randn(6, 64, dtype=torch.bfloat16)
    w = torch.randint(-127, 128, (16, 64), dtype=torch.int8)
    base = {"x": x, "weight": w, "weight_scale": torch.rand(16), "bias": None, "out_dtype": torch.bfloat16,
            "convrot": False, "convrot_groupsize": 256, "input_act": None}
    assert registry.get_capable_backend("int8_linear", base) == "c"
    assert registry.get_capable_backend("int8_linear", {**base, "input_act": "situ"}) == "eager"
    assert registry.get_capable_backend("int8_linear", {**base, "residual": torch.ones(6, 16),
                                                        "residual_scale": torch.ones(16)}) == "c"
    assert registry.get_capable_backend("int8_linear", {**base, "residual": torch.ones(6, 15),
                                                        "residual_scale": torch.ones(16)}) == "eager"
    assert registry.get_capable_backend("int8_linear", {**base, "convrot": True, "convrot_groupsize": 48}) == "eager"
    qa, qb, pa, pb, sa, sb, _ = make(4, 8, 32, torch.bfloat16)
    mm = {"a": qa, "b": qb, "tensor_scale_a": pa, "tensor_scale_b": pb, "block_scale_a": sa, "block_scale_b": sb,
          "bias": None, "out_dtype": torch.bfloat16, "alpha": None}
    assert registry.get_capable_backend("scaled_mm_nvfp4", mm) == "c"
    assert registry.get_capable_backend("scaled_mm_nvfp4", {**mm, "b": qb[:, :8]}) == "eager"


@pytest.mark.parametrize("cc,int8_served,fp4_served", [((7, 0), False, False), ((8, 9), True, False),
                                                       ((10, 0), True, True)])
def test_minimum_compute_capabilities(monkeypatch, fresh_capabilities, cc, int8_served, fp4_served):
    """IMMA needs 7.5, the block-scaled FP4 GEMM 10.0: on an older GPU the call rule fails with a
    hardware reason (before any argument check), so comfy_kitchen picks another backend."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d: cc)
    cuda = lambda t: t.as_subclass(FakeCudaTensor)  # noqa: E731
    qa, qb, pa, pb, sa, sb, _ = make(4, 8, 32, torch.bfloat16)
    calls = {
        "int8_linear": {"x": cuda(torch.randn(4, 64)), "weight": cuda(torch.ones(8, 64, dtype=torch.int8)),
                        "weight_scale": cuda(torch.ones(8))},
        "scaled_mm_nvfp4": {"a": cuda(qa), "b": cuda(qb), "tensor_scale_a": cuda(pa), "tensor_scale_b": cuda(pb),
                            "block_scale_a": cuda(sa), "block_scale_b": cuda(sb)},
    }
    caps = comfy_kitchen_c.backend.capabilities()
    for name, served in (("int8_linear", int8_served), ("scaled_mm_nvfp4", fp4_served)):
        result = caps[name].call_rules[0](calls[name])
        assert result.success == served, (name, result)
        if not served:
            assert result.failed_param == "__hardware__" and f"{cc[0]}.{cc[1]}" in result.failure_reason
