# SPDX-License-Identifier: Apache-2.0
"""Fuzz targets of the linear ops (int8_linear and its modulated forms, scaled_mm_nvfp4,
nvfp4_linear), of the embedding gather, and of the memory bound they share
(set_linear_memory_limit).  Bounds from docs/linear.md."""
from __future__ import annotations

import torch
from comfy_kitchen.backends._activations import apply_input_act
from comfy_kitchen.backends.eager import quantization as E

import comfy_kitchen_c
from comfy_kitchen_c import ops
from draw import Draw
import oracle

ACTS = (None, "none", "gelu_tanh", "swiglu", "rms_norm", "situ")
PAIRED = ("swiglu", "situ")  # [gate | up] and [hidden | gate]: x has 2K columns


def _eps(dtype) -> float:
    return torch.finfo(dtype).eps


def _free_beyond_range(bound, y, magnitude, out):
    """Where float32 intermediates (magnitude: a bound of their size) or the rounded result may
    overflow, ours may be inf or NaN where the float64 reference is not: no bound there."""
    wild = (magnitude > 1e38) | (y.abs() + bound > torch.finfo(out).max) | ~torch.isfinite(magnitude)
    return torch.where(wild, torch.full_like(bound, float("inf")), bound)


def _weight_scale(d: Draw, n: int) -> torch.Tensor:
    shape = d.pick(((1,), (), (n,), (n, 1)))
    s = d.values(shape, d.float_dtype(0))
    return s.abs() + 1e-3 if d.chance(0.85) else s


def make_int8_linear(d: Draw) -> dict:
    act = d.pick(ACTS) if d.chance(0.35) else None
    convrot = d.chance(0.25)
    g = d.pick((4, 16, 64)) if convrot else 256
    k = d.multiple(g, 3) if convrot else d.extent(40)
    n = d.extent(24)
    x_k = 2 * k if act in PAIRED else k
    lead = tuple(d.extent(5) for _ in range(d.int_in(0, 2)))
    x = d.layout(d.values((*lead, x_k), d.float_dtype(0)))
    args = {"x": x, "weight": d.layout(d.codes((n, k))), "weight_scale": _weight_scale(d, n)}
    if d.chance(0.4):
        args["bias"] = d.values(d.pick(((n,), (1,))), d.float_dtype(0))
    if d.chance(0.5):
        args["out_dtype"] = d.pick((None, torch.float32, torch.float16, torch.bfloat16))
    if convrot or d.chance(0.2):
        args["convrot"] = convrot
        args["convrot_groupsize"] = g
    if act is not None or d.chance(0.1):
        args["input_act"] = act
    if act == "rms_norm":
        args["input_act_weight"] = d.values((k,), d.pick((x.dtype, torch.float32)))
        args["input_act_eps"] = d.pick((1e-6, 1e-5, 0.0))
    if d.chance(0.25):
        args["residual"] = d.values(d.pick(((*lead, n), (n,))), d.float_dtype(0))
        args["residual_scale"] = d.values(d.pick(((n,), (1,), ())), d.float_dtype(0))
    return args


def _contiguous_x(a: dict) -> dict:
    """Eager's rms_norm sums a strided row in another order than a contiguous one (its float32 bits
    depend on the layout: seed 1 input 13555); ours are those of the contiguous row whatever the
    layout (docs/parity.md), so eager is asked with the same values, contiguous."""
    return {**a, "x": a["x"].contiguous()}


def ref_int8_linear(a):
    a = _contiguous_x(a)
    # out_dtype as drawn: None is eager's direct call's float32 (ours follows it), omitted its bfloat16
    kw = {k: v for k, v in a.items() if k not in ("x", "weight", "weight_scale")}
    bias = kw.pop("bias", None)
    y = E.int8_linear(a["x"], a["weight"], a["weight_scale"], bias, **kw)
    if not _inexact(a):
        return y, y, y
    # for the bound of the inexact paths: before the residual form, with and without the bias
    kw.pop("residual", None), kw.pop("residual_scale", None)
    pre = E.int8_linear(a["x"], a["weight"], a["weight_scale"], bias, **kw)
    unbiased = E.int8_linear(a["x"], a["weight"], a["weight_scale"], None, **kw) if bias is not None else pre
    return y, pre, unbiased


def _inexact(a) -> bool:
    """A rotation (another summation order) or a transcendental activation (libm vs aten)."""
    return bool(a.get("convrot")) or a.get("input_act") in ("gelu_tanh", "swiglu", "situ")


def _x_scale(a) -> torch.Tensor:
    """Eager's per-row x scale [..., 1] (of the activated, rotated rows)."""
    x = apply_input_act(a["x"].contiguous(), a.get("input_act"), a.get("input_act_weight"),
                        a.get("input_act_eps", 0.0))
    if a.get("convrot"):
        from targets import rot_ref
        x = rot_ref(x, a["convrot_groupsize"])
    return E.quantize_int8_rowwise(x)[1]


def compare_int8_linear(ours, ref, a) -> None:
    """Bit for bit without a rotation or a transcendental activation (docs/parity.md: bias,
    rms_norm and the residual form follow eager's roundings).  Otherwise an activated value (libm
    vs aten: an ulp) or a rotated one (another summation order) moves a code by at most 1 and the
    row's scale by at most an ulp of x's dtype: within sx*|sw|*sum|w|*(1 + 127*eps_x) of eager's
    product, plus eps_out*(|unbiased| + |pre|) for the bias's rounding; the residual form scales
    that by |residual_scale| and rounds once more.  Rows whose activated input is not finite are
    free: eager's codes there are undefined (docs/parity.md ("Results where eager's are undefined"))."""
    y, pre, unbiased = ref
    oracle.same_form(ours, y)
    out = ours.dtype
    rows_defined = torch.isfinite(_x_scale(a)).reshape(*y.shape[:-1], 1).expand_as(y)
    if not _inexact(a):
        plain = (a.get("input_act") in (None, "none") and a.get("bias") is None
                 and a.get("residual") is None)
        if plain:  # eager's NaN and inf rows too: nothing is added to their non-finite products
            oracle.bits_equal(ours, y, "int8_linear")
        else:
            oracle.bits_equal(ours[rows_defined], y[rows_defined], "int8_linear")
        return
    tol = _eps(out) * (unbiased.double().abs() + pre.double().abs())
    sx = _x_scale(a).double().reshape(*y.shape[:-1], 1)
    sw = a["weight_scale"].double().reshape(-1).abs()
    wsum = a["weight"].double().abs().sum(dim=1)
    tol = tol + sx * sw * wsum * (1 + 127 * _eps(a["x"].dtype)) * (1 + 2 * _eps(out))
    if a.get("residual") is not None:
        s = a["residual_scale"].to(out).double().abs()
        tol = (tol * s * (1 + _eps(out)) + _eps(out) * y.double().abs()).expand_as(y)
    ours, y, tol = ours[rows_defined], y[rows_defined], tol[rows_defined]
    oracle.compare_close(ours, y, tol, "int8_linear")


# ---- NVFP4 GEMMs ----------------------------------------------------------------------------------------

def _scale_bytes(d, rows, cols):
    from targets import scale_bytes
    return scale_bytes(d, rows, cols)


def make_scaled_mm(d: Draw) -> dict:
    m, n, k = d.extent(20), d.extent(20), d.multiple(16, 3)
    args = {"a": d.codes((m, k // 2), torch.uint8), "b": d.codes((n, k // 2), torch.uint8),
            "tensor_scale_a": torch.tensor([d.pick((1.0, 0.01, 3.0))]),
            "tensor_scale_b": torch.tensor(d.pick((1.0, 0.5, 1e-3))),
            "block_scale_a": _scale_bytes(d, m, k), "block_scale_b": _scale_bytes(d, n, k)}
    if d.chance(0.4):
        args["bias"] = d.values((n,), d.float_dtype(0))
    if d.chance(0.5):
        args["out_dtype"] = d.pick((None, torch.float32, torch.float16, torch.bfloat16))
    if d.chance(0.3):
        args["alpha"] = torch.tensor([d.pick((1.0, 0.25, 2.0))])
    return args


def _dec(codes, scales, k) -> torch.Tensor:
    one = torch.ones(1, dtype=torch.float32)
    return E.dequantize_nvfp4(codes, one, scales.reshape(-1), torch.float32).double()[:, :k]


def ref_scaled_mm(a):
    """docs/parity.md's definition: both operands dequantized exactly, multiplied, alpha and the bias
    applied, rounded once to out_dtype; here in float64, with the float32 bound below."""
    k = 2 * a["a"].shape[1]
    da, db = _dec(a["a"], a["block_scale_a"], k), _dec(a["b"], a["block_scale_b"], k)
    alpha = a.get("alpha")
    alpha = (a["tensor_scale_a"] * a["tensor_scale_b"] if alpha is None else alpha).double().reshape(())
    out = a.get("out_dtype") or torch.bfloat16
    bias = a.get("bias")
    bias = torch.zeros(1, dtype=torch.float64) if bias is None else bias.to(out).double()
    prod = da @ db.T
    y = prod * alpha + bias
    magnitude = (da.abs() @ db.abs().T) * torch.maximum(alpha.abs(), torch.ones(()))
    bound = magnitude * alpha.abs() * (k + 3) * _eps(torch.float32) + bias.abs() * 2 * _eps(torch.float32)
    # torch's CPU matmul flushes subnormal products: up to float32's smallest normal per term
    bound = bound + torch.finfo(torch.float32).tiny * k * (alpha.abs() + 1)
    bound = bound + y.abs() * _eps(out)
    return y.to(out), _free_beyond_range(bound, y, magnitude + bias.abs(), out)


def compare_scaled_mm(ours, ref, a) -> None:
    y, bound = ref
    oracle.compare_close(ours, y, bound.nan_to_num(nan=float("inf"), posinf=float("inf")), "scaled_mm_nvfp4")


def make_nvfp4_linear(d: Draw) -> dict:
    convrot = d.chance(0.3)
    g = d.pick((16, 64)) if convrot else 16
    k = d.multiple(g, 3) if convrot else d.extent(40)
    n = d.extent(16)
    w_f = d.values((n, k), torch.float32) if d.chance(0.5) else torch.randn(n, k, generator=d.g)
    w_f = w_f.nan_to_num(nan=0.0, posinf=1.0, neginf=-1.0)
    pts = float(w_f.abs().amax()) / 2688 if w_f.numel() else 1.0
    pts = (pts or 1.0) * (4 if convrot else 1)
    if n == 0:  # no rows to quantize: an empty weight of the right width
        qw, bs = torch.zeros(0, (k + 15) // 16 * 8, dtype=torch.uint8), torch.zeros(0, dtype=torch.float8_e4m3fn)
    elif convrot:
        qw, bs = ops.quantize_and_rotate_nvfp4(w_f, pts, g, pad_16x=True)
    else:
        qw, bs = ops.quantize_nvfp4(w_f, pts, pad_16x=True)
    x = d.layout(d.values((*(d.extent(4) for _ in range(d.int_in(0, 2))), k), d.float_dtype(0)))
    args = {"x": x, "weight": qw[:n], "weight_tensor_scale": pts, "weight_block_scales": bs}
    if d.chance(0.3):
        args["bias"] = d.values((n,), d.float_dtype(0))
    if d.chance(0.3):
        args["out_dtype"] = d.pick((None, torch.float32, torch.float16, torch.bfloat16))
    if convrot or d.chance(0.1):
        args["convrot"], args["convrot_groupsize"] = convrot, g
    return args


def ref_nvfp4_linear(a):
    """x @ dec(W)^T + bias in float64, with a bound for quantizing x to NVFP4 on the fly: a value
    is off by at most a quarter of its row's largest (times sqrt(G) rotated: the rotated row's
    largest), plus float32 sums and the output's rounding."""
    x, w = a["x"].double(), a["weight"]
    k, n = x.shape[-1], w.shape[0]
    kp = 2 * w.shape[1]
    pts = a["weight_tensor_scale"]
    pts = float(pts) if not isinstance(pts, torch.Tensor) else float(pts.reshape(()))
    dw = _dec(w, a["weight_block_scales"], kp)[:, :k] * pts
    g = a.get("convrot_groupsize", 16) if a.get("convrot") else 0
    if g:  # the weight holds W H: undo the rotation (H is symmetric and orthogonal)
        from comfy_kitchen.tensor.int8_utils import _build_hadamard
        h = _build_hadamard(g, "cpu", torch.float64)
        dw = (dw.reshape(n, -1, g) @ h).reshape(n, k)
    out = a.get("out_dtype") or a["x"].dtype
    bias = a.get("bias")
    bias = torch.zeros(1, dtype=torch.float64) if bias is None else bias.double()
    y = x @ dw.T + bias
    row_max = x.abs().amax(dim=-1, keepdim=True) * (g ** 0.5 if g else 1.0)
    magnitude = x.abs() @ dw.abs().T
    # plus float32's smallest normal per term: torch's CPU matmul (our GEMM here) flushes subnormals
    err = (0.26 * row_max + torch.finfo(torch.float32).tiny) * dw.abs().sum(dim=1) + magnitude * (kp + 4) * _eps(
        torch.float32)
    # the output's rounding: 2 ulps relative, and below its normal range its subnormal spacing
    # (finfo.tiny * eps: 2^-24 in float16), which no relative term covers
    bound = (err + y.abs() * 2 * _eps(out) + bias.abs() * _eps(out) + torch.finfo(torch.float32).tiny * (kp + 2)
             + torch.finfo(out).tiny * _eps(out))
    wide = torch.maximum(magnitude, row_max * dw.abs().amax(dim=1) * 6 * 448) + bias.abs()
    # rotated values beyond the dtype's range become inf (docs/parity.md: an inf makes its group inf)
    wide = torch.where(row_max >= torch.finfo(a["x"].dtype).max / 2, torch.full_like(wide, float("inf")), wide)
    return y.to(out), _free_beyond_range(bound, y, wide, out)


def compare_nvfp4_linear(ours, ref, a) -> None:
    y, bound = ref
    finite_rows = torch.isfinite(a["x"]).all(dim=-1, keepdim=True).expand_as(y)
    if not bool(finite_rows.all()):  # a NaN or inf makes x's per-tensor scale non-finite: every row is
        oracle.same_form(ours, y)     # undefined (docs/parity.md: one scale for all of x)
        return
    if not _alpha_finite(a):  # docs/parity.md: the two per-tensor scales' float32 product overflowed
        oracle.same_form(ours, y)
        return
    oracle.compare_close(ours, y, bound.nan_to_num(nan=float("inf"), posinf=float("inf")), "nvfp4_linear")


def _alpha_finite(a) -> bool:
    """Whether x's per-tensor scale (amax / 2688, times sqrt(G) rotated) times the weight's is
    finite in float32: scaled_mm_nvfp4 scales its sums by that product, as cuBLASLt's alpha
    (found: seed 1 input 24310, x = -1.2e38 against a weight scale of 1e35: 0 * inf = NaN in a
    row of zero codes where the exact result is the bias)."""
    g = a.get("convrot_groupsize", 16) if a.get("convrot") else 0
    pts_x = a["x"].abs().amax().float() / 2688 * (float(g) ** 0.5 if g else 1.0)
    pts_w = a["weight_tensor_scale"]
    pts_w = pts_w.float().reshape(()) if isinstance(pts_w, torch.Tensor) else torch.tensor(float(pts_w))
    return bool(torch.isfinite(pts_x * pts_w))


def set_memory_limit(nbytes):
    saved = ops.linear_memory_limit()
    try:
        comfy_kitchen_c.set_linear_memory_limit(nbytes)
        return ops.linear_memory_limit()
    finally:  # the bound lives in linear.py: leave it as it was for the inputs that follow
        comfy_kitchen_c.linear._linear_memory_limit = saved


def compare_limit(ours, ref, a) -> None:
    if ours != ref:
        raise oracle.Mismatch(f"linear_memory_limit() is {ours} after setting {ref}")


# ---- the modulated int8 linears and the embedding gather --------------------------------------------

def make_modulated(d: Draw, rms: bool) -> dict:
    """A valid call without the rotation (its bound is int8_linear's, fuzzed there): eager's
    result is then deterministic and ours must equal it bit for bit where every row is finite."""
    k, n = d.extent(40), d.extent(24)
    dtype = d.float_dtype(0)
    x = d.layout(d.values((*(d.extent(5) for _ in range(d.int_in(0, 2))), k), dtype))
    args = {"x": x}
    if rms:
        args["norm_weight"] = d.values((k,), d.pick((dtype, torch.float32)))
        args["norm_eps"] = d.pick((1e-6, 1e-5, 0.0))
    args["modulation_scale"] = d.values((k,), d.pick((dtype, torch.float32)))
    args["weight"] = d.layout(d.codes((n, k)))
    args["weight_scale"] = _weight_scale(d, n)
    if d.chance(0.4):
        args["bias"] = d.values((n,), d.float_dtype(0))
    if d.chance(0.5):
        args["out_dtype"] = d.pick((None, torch.float32, torch.float16, torch.bfloat16))
    return args


def ref_modulated(a):
    """Eager's, out_dtype as drawn (None: eager's float32, `.to(None)` of its accumulator's type;
    omitted: its default, bfloat16), as ours."""
    fn = E.int8_linear_rms_modulated if "norm_weight" in a else E.int8_linear_modulated
    return fn(**_contiguous_x(a))


def compare_modulated(ours, ref, a) -> None:
    """Bit for bit (docs/linear.md: eager's roundings, the modulation exact), except in
    rows whose modulated input is not finite (a float16 overflow, a NaN or inf drawn): there
    eager's row scale is not finite and its codes undefined (docs/parity.md, "Results where eager's
    are undefined")."""
    oracle.same_form(ours, ref)
    x = a["x"]
    if "norm_weight" in a:
        x = torch.nn.functional.rms_norm(x, (x.shape[-1],), a["norm_weight"], a["norm_eps"])
    rows = torch.isfinite(x * (1.0 + a["modulation_scale"])).all(dim=-1, keepdim=True).expand_as(ref)
    oracle.bits_equal(ours[rows], ref[rows], "int8_linear_rms_modulated" if "norm_weight" in a
                      else "int8_linear_modulated")


def make_embedding(d: Draw) -> dict:
    vocab, dim = max(1, d.extent(30)), d.pick((16, 64, 96))  # indices need a row to point at
    group = d.pick((0, 0, 16)) if dim % 16 == 0 else 0
    scale = d.values((vocab, 1), torch.float32) if d.chance(0.7) else d.values((), torch.float32)
    indices = torch.randint(0, vocab, tuple(d.extent(4) for _ in range(d.int_in(1, 2))),
                            generator=torch.Generator().manual_seed(d.int_in(0, 2**31)))
    return {"q": d.codes((vocab, dim)), "scale": scale, "indices": indices, "group_size": group,
            "output_dtype_code": d.pick((0, 1, 2))}


def _index_out_of_range(a) -> bool:
    """docs/errors.md: an index out of range is an ArgumentError on the CPU, a NaN row on a GPU."""
    i, q = a.get("indices"), a.get("q")
    return (isinstance(i, torch.Tensor) and isinstance(q, torch.Tensor) and q.dim() == 2 and i.numel() > 0
            and not i.is_floating_point() and (int(i.min()) < 0 or int(i.max()) >= q.shape[0]))


def ref_embedding(a):
    return E.dequantize_int8_embedding(**a)


def compare_embedding(ours, ref, a) -> None:
    """Bit for bit without the rotation (one product, one rounding); with it, the rotation's
    bound of the dequantizers (docs/parity.md: a float32 rotation in another order) as
    dequantize_int8_convrot_weight_dtype's target checks it."""
    if a["group_size"] <= 0:  # eager's rule: no rotation
        oracle.compare_dequant(ours, ref)
        return
    gathered = torch.nn.functional.embedding(a["indices"], a["q"]).double()
    scale = a["scale"]
    gathered = gathered * (torch.nn.functional.embedding(a["indices"], scale).double() if scale.dim() >= 2
                           else scale.double())
    oracle.compare_rotation(ours, ref, gathered, a["group_size"])


def targets(Target) -> list:
    bad_x = lambda d, a: d.pick((torch.zeros(2, 4, dtype=torch.int8), torch.zeros(2, 4, dtype=torch.float64),  # noqa: E731
                                 torch.tensor(1.0), None, "x"))
    return [
        Target("int8_linear", ("x", "weight", "weight_scale", "bias", "out_dtype", "convrot", "convrot_groupsize",
                               "input_act", "input_act_weight", "input_act_eps", "residual", "residual_scale"),
               make_int8_linear, ref_int8_linear, compare_int8_linear, probe_optional=("weight_scale",),
               hostile={"x": bad_x, "weight": lambda d, a: d.pick((torch.zeros(4, 4), torch.zeros(4, 5, dtype=torch.int8),
                                                                   torch.zeros(2, 2, 4, dtype=torch.int8), None)),
                "weight_scale": lambda d, a: d.pick((torch.ones(3, 3), torch.ones(1, dtype=torch.int32), 0.5, None)),
                "bias": lambda d, a: d.pick((torch.ones(1000), torch.ones(3, dtype=torch.int8), 1.0)),
                "out_dtype": lambda d, a: d.pick((torch.int8, torch.float64, "bf16")),
                "convrot": lambda d, a: d.pick((1, "yes", None)),
                "convrot_groupsize": lambda d, a: d.group(None),
                "input_act": lambda d, a: d.pick(("relu", "rms_norm", "situ", 3, "")),
                "input_act_weight": lambda d, a: torch.ones(4), "input_act_eps": lambda d, a: 1e-6,
                "residual": lambda d, a: torch.ones(1), "residual_scale": lambda d, a: torch.ones(1)}),
        Target("scaled_mm_nvfp4", ("a", "b", "tensor_scale_a", "tensor_scale_b", "block_scale_a", "block_scale_b",
                                   "bias", "out_dtype", "alpha"),
               make_scaled_mm, ref_scaled_mm, compare_scaled_mm,
               {"a": lambda d, a: d.pick((torch.zeros(4, 7, dtype=torch.uint8), torch.zeros(4, 8, dtype=torch.int8))),
                "b": lambda d, a: d.pick((torch.zeros(4, 16, dtype=torch.uint8), torch.zeros(4, 8))),
                "tensor_scale_a": lambda d, a: d.pick((None, torch.ones(2), torch.tensor(1.0).half(), 1.0)),
                "tensor_scale_b": lambda d, a: d.pick((None, torch.ones(2))),
                "block_scale_a": lambda d, a: d.pick((torch.zeros(5, dtype=torch.uint8), torch.zeros(512))),
                "block_scale_b": lambda d, a: d.pick((None, torch.zeros(5, dtype=torch.uint8))),
                "bias": lambda d, a: d.pick((torch.ones(999), torch.ones(2, dtype=torch.int32))),
                "out_dtype": lambda d, a: d.pick((torch.int32, "f16")),
                "alpha": lambda d, a: d.pick((torch.ones(2), 2.0))},
               emulated_same_bits=False),
        Target("nvfp4_linear", ("x", "weight", "weight_tensor_scale", "weight_block_scales", "bias", "out_dtype",
                                "convrot", "convrot_groupsize"),
               make_nvfp4_linear, ref_nvfp4_linear, compare_nvfp4_linear,
               {"x": bad_x, "weight": lambda d, a: d.pick((torch.zeros(4, 3, dtype=torch.uint8), None)),
                "weight_tensor_scale": lambda d, a: d.pick((None, torch.ones(3), "1")),
                "weight_block_scales": lambda d, a: d.pick((None, torch.zeros(7, dtype=torch.uint8))),
                "bias": lambda d, a: d.pick((torch.ones(2, 2), torch.ones(999))),
                "out_dtype": lambda d, a: d.pick((torch.int8, "x")),
                "convrot": lambda d, a: d.pick((1, "no")),
                "convrot_groupsize": lambda d, a: d.pick((4, 1024, 32, 0, None))},
               registered=False, emulated_same_bits=False),
        Target("int8_linear_modulated", ("x", "modulation_scale", "weight", "weight_scale", "bias", "out_dtype",
                                         "convrot", "convrot_groupsize"),
               lambda d: make_modulated(d, False), ref_modulated, compare_modulated, probe_optional=("weight_scale",),
               hostile={"x": bad_x, "modulation_scale": lambda d, a: d.pick((torch.ones(3), torch.ones(2, 5), None, 1.0)),
                "weight": lambda d, a: d.pick((torch.zeros(4, 4), None)),
                "out_dtype": lambda d, a: d.pick((torch.int8, "bf16"))}),
        Target("int8_linear_rms_modulated", ("x", "norm_weight", "norm_eps", "modulation_scale", "weight",
                                             "weight_scale", "bias", "out_dtype", "convrot", "convrot_groupsize"),
               lambda d: make_modulated(d, True), ref_modulated, compare_modulated, probe_optional=("weight_scale",),
               hostile={"x": bad_x, "norm_weight": lambda d, a: d.pick((torch.ones(3), None, 1.0)),
                "norm_eps": lambda d, a: d.pick(("1e-6", None, float("nan"))),
                "modulation_scale": lambda d, a: d.pick((torch.ones(3), None))}),
        Target("dequantize_int8_embedding", ("q", "scale", "indices", "group_size", "output_dtype_code"),
               make_embedding, ref_embedding, compare_embedding,
               {"q": lambda d, a: d.pick((torch.zeros(4, 4), torch.zeros(2, 2, 4, dtype=torch.int8), None)),
                "scale": lambda d, a: d.pick((torch.ones(3, 3), None, 1.0)),
                "indices": lambda d, a: d.pick((torch.tensor([10**6]), torch.tensor([-1]), torch.ones(2), None)),
                "group_size": lambda d, a: d.pick((3, -4, "16", None)),
                "output_dtype_code": lambda d, a: d.pick((7, -1, "bf16", None))},
               zero_sign_free=True, gpu_differs=_index_out_of_range, probe_optional=("indices",)),
        Target("set_linear_memory_limit", ("nbytes",),
               lambda d: {"nbytes": d.pick((1, 4096, 2**20, 2**40))}, lambda a: a["nbytes"],
               compare_limit,
               {"nbytes": lambda d, a: d.pick((0, -1, 1.5, "1", None, True))},
               registered=False, emulated_same_bits=None, fn=set_memory_limit),
    ]
