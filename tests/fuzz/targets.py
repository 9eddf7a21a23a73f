# SPDX-License-Identifier: Apache-2.0
"""The fuzz targets: one table entry per public op.  An entry says how to draw a call (a dict
of arguments by name, mostly consistent so that the kernels run, with edge shapes, layouts and
values), what bad values each argument can take, eager's result for it (or docs/parity.md's definition
where eager has none), and how to compare.  A new op plugs in with one more ``Target`` here:
the engine (run.py) mutates arguments, picks positional and keyword forms, runs the call on the
CPU, on the emulated device and through comfy_kitchen's registry, and applies the oracle."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from comfy_kitchen.backends.eager import quantization as E
from comfy_kitchen.tensor.int8_utils import _build_hadamard

from comfy_kitchen_c import ops
from draw import Draw
import fp8_targets
import linear_targets
import mxfp8_targets
import rope_targets
import oracle


@dataclass
class Target:
    op: str
    params: tuple[str, ...]                      # in signature order
    make: Callable[[Draw], dict]                 # a call's arguments by name
    reference: Callable[[dict], Any] | None      # eager's result (None: no reference)
    compare: Callable[[Any, Any, dict], None]
    hostile: dict[str, Callable[[Draw, dict], Any]] = field(default_factory=dict)
    registered: bool = True                      # served through comfy_kitchen's registry
    emulated_same_bits: bool | None = True       # docs/gpu.md: the GPU kernels give the CPU's bits (None: no device)
    fn: Callable | None = None                   # default: comfy_kitchen_c.ops.<op>
    # docs/gpu.md: the CPU and GPU butterflies may give an exactly-zero rotated value opposite signs
    zero_sign_free: bool = False
    # Arguments the checks (the registry's rules) accept as missing although the op needs them:
    # comfy_kitchen's layouts probe the fused ops' backends without them (tests/test_registration.py)
    probe_optional: tuple[str, ...] = ()
    # Calls whose GPU result differs from the CPU's as docs/gpu.md documents (no device comparison)
    gpu_differs: Callable[[dict], bool] | None = None

    def call(self):
        return self.fn or getattr(ops, self.op)


# ---- shared drawing ---------------------------------------------------------------------------------

def lead_shape(d: Draw, k: int, min_ndim: int = 1, max_ndim: int = 3) -> tuple:
    ndim = d.int_in(min_ndim, max_ndim)
    return tuple(d.extent(5) for _ in range(ndim - 1)) + (k,)


def act_tensor(d: Draw, shape, dtype=None) -> torch.Tensor:
    dtype = dtype or d.float_dtype(0)
    return d.layout(d.values(shape, dtype))


def bad_float_tensor(d: Draw, args: dict, huge: bool = True) -> Any:
    """A tensor no float input takes: odd dtype, 0-dim, beyond the row limits (huge), or junk."""
    u = d.r.random()
    if not huge and 0.7 <= u < 0.8:  # an op without row limits would materialise it: legit, 100+ GiB
        u = 0.0
    if u < 0.4:
        return d.values((3, 16), torch.float32).to(d.pick((torch.float64, torch.int32, torch.uint8, torch.bool)))
    if u < 0.55:
        return torch.randn(4, 16, dtype=torch.float64).to(torch.complex64).conj()
    if u < 0.7:
        return torch.tensor(1.5)
    if u < 0.8:  # rows or row length beyond 2^31, without the memory
        return d.expanded_huge(torch.float32, d.pick((2**31, 2**31 + 1, 2**40)), d.pick((1, 16)))
    if u < 0.9:
        return torch.empty(2, 16, device="meta")
    return d.junk()


def seed(d: Draw, args: dict):
    u = d.r.random()
    if u < 0.75:
        return 0
    if u < 0.9:
        return d.int_in(1, 2**31)
    return d.pick((None, -3, 2**63, 2**64 - 1))


def maybe_seed(d: Draw, args: dict, p: float) -> dict:
    """args with a stochastic_rounding argument, with probability p."""
    if d.chance(p):
        args["stochastic_rounding"] = seed(d, args)
    return args


def bad_seed(d: Draw, args: dict):
    return d.pick((1.5, "7", 2**64, 2**70, True, [3]))


def rot_ref(x: torch.Tensor, group: int) -> torch.Tensor:
    """Eager's rotation formula in float32, rounded to x's dtype: eager's own bfloat16 matmul on
    this kind of CPU (AVX512-BF16) flushes subnormal inputs (docs/parity.md)."""
    h = _build_hadamard(group, "cpu", torch.float32)
    k = x.shape[-1]
    groups = x.float().reshape(*x.shape[:-1], k // group, group)  # eager's reshape, without its -1
    return (groups @ h).reshape(x.shape).to(x.dtype)


def optional(args: dict, *names):
    return {n: args[n] for n in names if n in args}


def grouped_length(d: Draw, g) -> int:
    """A row length of up to 3 groups of g (one of 256 or 1024: eager rotates with a matmul), a
    multiple of 16 when g is a bad group size."""
    valid = type(g) is int and 4 <= g <= 1024
    return d.multiple(g if valid else 16, 3 if g in (4, 16, 64) else 1)


# ---- int8 quantizers ---------------------------------------------------------------------------------

def make_rowwise(d: Draw) -> dict:
    args = {"x": act_tensor(d, lead_shape(d, d.extent(70)))}
    return maybe_seed(d, args, 0.5)


def make_rotate_rowwise(d: Draw) -> dict:
    g = d.group()
    k = grouped_length(d, g)
    x = act_tensor(d, lead_shape(d, k))
    valid = type(g) is int and g in (4, 16, 64, 256, 1024)
    h = _build_hadamard(g, "cpu", x.dtype) if valid and d.chance(0.5) else None
    args = {"x": x, "h": h, "group_size": g}
    return maybe_seed(d, args, 0.4)


def make_convrot_weight(d: Draw) -> dict:
    g = d.group()
    k = grouped_length(d, g)
    args = {"weight": act_tensor(d, (d.extent(9), k)), "group_size": g}
    return maybe_seed(d, args, 0.3)


def tensorwise_scale(d: Draw, args: dict):
    u = d.r.random()
    if u < 0.4:
        return None
    if u < 0.5:
        return "recalculate"
    if u < 0.7:
        return d.pick((0.5, 1e-3, 3, 0.0, -2.0, 1e30, float("inf"), float("nan"), 1e-45))
    return d.values(d.pick(((), (1,), (1, 1))), d.float_dtype(0)).abs() + d.pick((0.0, 0.01))


def make_tensorwise(d: Draw) -> dict:
    shape = lead_shape(d, d.extent(40), min_ndim=0 if d.chance(0.1) else 1)
    args = {"x": act_tensor(d, shape), "scale": tensorwise_scale(d, {})}
    return maybe_seed(d, args, 0.4)


def ref_rowwise(a):
    return E.quantize_int8_rowwise(a["x"], a.get("stochastic_rounding", 0))


def ref_tensorwise(a):
    return E.quantize_int8_tensorwise(a["x"], a.get("scale"), a.get("stochastic_rounding", 0))


def ref_rotate_rowwise(a):
    return E.quantize_int8_rowwise(rot_ref(a["x"], a["group_size"]), a.get("stochastic_rounding", 0))


def ref_convrot_weight(a):
    return E.quantize_int8_rowwise(rot_ref(a["weight"], a["group_size"]), a.get("stochastic_rounding", 0))


INT8_QUANT = [
    Target("quantize_int8_rowwise", ("x", "stochastic_rounding"), make_rowwise, ref_rowwise,
           lambda o, r, a: oracle.compare_int8(o, r, a["x"], False),
           {"x": bad_float_tensor, "stochastic_rounding": bad_seed}),
    Target("quantize_int8_tensorwise", ("x", "scale", "stochastic_rounding"), make_tensorwise, ref_tensorwise,
           lambda o, r, a: oracle.compare_int8(o, r, a["x"], False),
           {"x": lambda d, a: bad_float_tensor(d, a, huge=False), "scale": lambda d, a: d.pick(("max", True, torch.ones(2), torch.ones(1).int(),
                                                                [1.0])),
            "stochastic_rounding": bad_seed}),
    Target("quantize_and_rotate_rowwise", ("x", "h", "group_size", "stochastic_rounding"), make_rotate_rowwise,
           ref_rotate_rowwise, lambda o, r, a: oracle.compare_int8(o, r, rot_ref(a["x"], a["group_size"]), True),
           {"x": bad_float_tensor, "h": lambda d, a: d.pick((torch.ones(3, 3), torch.ones(4, 4).int(), "h")),
            "group_size": lambda d, a: d.group(None), "stochastic_rounding": bad_seed}),
    Target("quantize_int8_convrot_weight", ("weight", "group_size", "stochastic_rounding"), make_convrot_weight,
           ref_convrot_weight,
           lambda o, r, a: oracle.compare_int8(o, r, rot_ref(a["weight"], a["group_size"]), True),
           {"weight": bad_float_tensor, "group_size": lambda d, a: d.group(None), "stochastic_rounding": bad_seed}),
    Target("rotate_int8_convrot_weight", ("weight", "group_size"),
           lambda d: {k: v for k, v in make_convrot_weight(d).items() if k != "stochastic_rounding"},
           lambda a: rot_ref(a["weight"], a["group_size"]),
           lambda o, r, a: oracle.compare_rotation(o, r, a["weight"], a["group_size"]),
           {"weight": bad_float_tensor, "group_size": lambda d, a: d.group(None)}, zero_sign_free=True),
]


# ---- int8 dequantizers --------------------------------------------------------------------------------

def dequant_scale(d: Draw, q_shape) -> torch.Tensor:
    """Per row (the quantizers' [..., 1]), one value, or any shape broadcasting to q."""
    u = d.r.random()
    if u < 0.5 and len(q_shape) >= 1:
        shape = (*q_shape[:-1], 1)
    elif u < 0.7:
        shape = d.pick(((), (1,)))
    elif u < 0.85 and len(q_shape) >= 1:
        shape = (1,) * (len(q_shape) - 1) + (q_shape[-1],)
    else:
        shape = tuple(q_shape)
    s = d.values(shape, d.float_dtype(0))
    return d.layout(s.abs() if d.chance(0.8) else s)


def make_dequant(d: Draw, two_d: bool, grouped: bool, coded: bool) -> dict:
    g = d.group() if grouped else None
    k = grouped_length(d, g) if grouped else d.extent(40)
    shape = (d.extent(9), k) if two_d else lead_shape(d, k, min_ndim=0 if d.chance(0.05) else 1)
    q = d.layout(d.codes(shape))
    args = {"q": q, "scale": dequant_scale(d, shape)}
    if grouped:
        args["group_size"] = g
    if coded:
        args["output_dtype_code"] = d.pick((0, 1, 2))
    return args


def bad_q(d: Draw, args: dict):
    u = d.r.random()
    if u < 0.4:
        return d.values((3, 16), torch.float32)
    if u < 0.6:
        return torch.zeros(3, 16, dtype=torch.uint8)
    if u < 0.75:
        return torch.zeros(1, dtype=torch.int8).expand(2**31, 1)
    return d.junk()


def bad_dequant_scale(d: Draw, args: dict):
    return d.pick((torch.ones(3, 5), torch.ones(7), torch.ones(2, 2, 2, 2), torch.ones(1, dtype=torch.int32),
                   torch.ones(1, dtype=torch.float64), 0.5, None))


def bad_code(d: Draw, args: dict):
    return d.pick((3, 5, 6, -1, 2**70, "2", 1.0, True, None))


def _rot_back(a):
    return lambda o, r, args: oracle.compare_rotation(o, r, (args["q"].double() * args["scale"].double()).expand(
        o.shape), args["group_size"])


INT8_DEQUANT = [
    Target("dequantize_int8_simple", ("q", "scale"), lambda d: make_dequant(d, False, False, False),
           lambda a: E.dequantize_int8_simple(a["q"], a["scale"]), lambda o, r, a: oracle.compare_dequant(o, r),
           {"q": bad_q, "scale": bad_dequant_scale}),
    Target("dequantize_int8_simple_dtype", ("q", "scale", "output_dtype_code"),
           lambda d: make_dequant(d, False, False, True),
           lambda a: E.dequantize_int8_simple_dtype(a["q"], a["scale"], a["output_dtype_code"]),
           lambda o, r, a: oracle.compare_dequant(o, r),
           {"q": bad_q, "scale": bad_dequant_scale, "output_dtype_code": bad_code}),
    Target("dequantize_int8_convrot_weight", ("q", "scale", "group_size"), lambda d: make_dequant(d, True, True, False),
           lambda a: E.dequantize_int8_convrot_weight(a["q"], a["scale"], a["group_size"]), _rot_back(None),
           {"q": bad_q, "scale": bad_dequant_scale, "group_size": lambda d, a: d.group(None)}, zero_sign_free=True),
    Target("dequantize_int8_convrot_weight_dtype", ("q", "scale", "group_size", "output_dtype_code"),
           lambda d: make_dequant(d, True, True, True),
           lambda a: E.dequantize_int8_convrot_weight_dtype(a["q"], a["scale"], a["group_size"],
                                                            a["output_dtype_code"]), _rot_back(None),
           {"q": bad_q, "scale": bad_dequant_scale, "group_size": lambda d, a: d.group(None),
            "output_dtype_code": bad_code}, zero_sign_free=True),
]


# ---- NVFP4 ---------------------------------------------------------------------------------------------

def per_tensor_scale(d: Draw, x: torch.Tensor | None):
    u = d.r.random()
    amax = float(x.float().abs().nan_to_num(posinf=0).amax()) if x is not None and x.numel() else 1.0
    value = d.pick((amax / 2688 or 1.0, amax / 2688 * 16 or 1.0, 1.0, 0.0, 1e-12, -0.5, float("nan"), float("inf")))
    if u < 0.3:
        return value
    return torch.tensor(value, dtype=torch.float32).reshape(d.pick(((), (1,))))


def bad_pts(d: Draw, args: dict):
    return d.pick((None, torch.ones(2), torch.tensor(1.0, dtype=torch.float16), torch.tensor(1), True, "1"))


def flag(d: Draw, args: dict):
    return d.chance(0.5)


def bad_flag(d: Draw, args: dict):
    return d.pick(("no", 2, 0, 1, None, 1.0))


def make_quantize_nvfp4(d: Draw) -> dict:
    pad = d.chance(0.4)
    cols = d.extent(40) if pad else d.multiple(16, 3)
    x = act_tensor(d, (d.extent(20), cols))
    args = {"x": x, "per_tensor_scale": per_tensor_scale(d, x)}
    if d.chance(0.3):
        args["epsilon"] = d.pick((0.0, 1e-6))
    if pad or d.chance(0.3):
        args["pad_16x"] = pad
    if d.chance(0.4):
        args["hi_first"] = flag(d, args)
    return args


def make_rotate_nvfp4(d: Draw) -> dict:
    g = d.pick((16, 64, 256)) if d.chance(0.92) else d.pick((4, 1024, 32, 0, "16"))
    x = act_tensor(d, (d.extent(20), d.multiple(g if isinstance(g, int) and 16 <= g <= 256 else 16, 2)))
    args = {"x": x, "per_tensor_scale": per_tensor_scale(d, x), "group_size": g}
    for name in ("pad_16x", "hi_first"):
        if d.chance(0.4):
            args[name] = flag(d, args)
    return args


def scale_bytes(d: Draw, rows: int, cols: int) -> torch.Tensor:
    """A swizzled e4m3 block-scale buffer for rows x cols values: random bytes (NaN 0x7F among them)."""
    r, c = ops._scale_shape(rows, cols)
    b = d.codes((r, c), torch.uint8)
    if d.chance(0.7):  # mostly moderate scales: 0x30..0x50
        b = (b % 0x20 + 0x30).to(torch.uint8)
    return b.view(torch.float8_e4m3fn)


def make_dequantize_nvfp4(d: Draw) -> dict:
    rows, cols = d.extent(20), d.multiple(16, 3)
    args = {"qx": d.layout(d.codes((rows, cols // 2), torch.uint8)), "per_tensor_scale": per_tensor_scale(d, None),
            "block_scales": scale_bytes(d, rows, cols)}
    if d.chance(0.6):
        args["output_type"] = d.pick((torch.float32, torch.float16, torch.bfloat16))
    if d.chance(0.4):
        args["hi_first"] = flag(d, args)
    return args


def ref_quantize_nvfp4(a):
    return E.quantize_nvfp4(a["x"], a["per_tensor_scale"], a.get("epsilon", 0.0), a.get("pad_16x", False),
                            a.get("hi_first", True))


def ref_rotate_nvfp4(a):
    """docs/ops.md: bit for bit quantize_nvfp4(rotate_int8_convrot_weight(x, G), ...)."""
    return ops.quantize_nvfp4(ops.rotate_int8_convrot_weight(a["x"], a.get("group_size", 16)), a["per_tensor_scale"], 0.0,
                              a.get("pad_16x", False), a.get("hi_first", True))


def ref_dequantize_nvfp4(a):
    pts = a["per_tensor_scale"]
    pts = torch.tensor(pts, dtype=torch.float32) if not isinstance(pts, torch.Tensor) else pts
    return E.dequantize_nvfp4(a["qx"], pts, a["block_scales"], a.get("output_type", torch.bfloat16),
                              a.get("hi_first", True))


NVFP4 = [
    Target("quantize_nvfp4", ("x", "per_tensor_scale", "epsilon", "pad_16x", "hi_first"), make_quantize_nvfp4,
           ref_quantize_nvfp4,
           lambda o, r, a: oracle.compare_nvfp4(o, r, a["x"], a["per_tensor_scale"], a.get("hi_first", True)),
           {"x": bad_float_tensor, "per_tensor_scale": bad_pts, "pad_16x": bad_flag, "hi_first": bad_flag}),
    Target("dequantize_nvfp4", ("qx", "per_tensor_scale", "block_scales", "output_type", "hi_first"),
           make_dequantize_nvfp4, ref_dequantize_nvfp4, lambda o, r, a: oracle.compare_dequant(o, r),
           {"qx": lambda d, a: d.pick((torch.zeros(4, 8, dtype=torch.int8), torch.zeros(4, 7, dtype=torch.uint8),
                                       torch.zeros(2, 2, 8, dtype=torch.uint8), None)),
            "per_tensor_scale": bad_pts,
            "block_scales": lambda d, a: d.pick((None, torch.zeros(3, dtype=torch.uint8), torch.zeros(128, 4))),
            "output_type": lambda d, a: d.pick((torch.int32, torch.float64, "bf16", None)), "hi_first": bad_flag}),
    Target("quantize_and_rotate_nvfp4", ("x", "per_tensor_scale", "group_size", "pad_16x", "hi_first"),
           make_rotate_nvfp4, ref_rotate_nvfp4, lambda o, r, a: oracle.compare_nvfp4(o, r, None, None),
           {"x": bad_float_tensor, "per_tensor_scale": bad_pts, "group_size": lambda d, a: d.group(None),
            "pad_16x": bad_flag, "hi_first": bad_flag}, registered=False),
]


def _families_of_newer_eager() -> list:
    """The target families whose eager module a comfy_kitchen older than 0.2.40 lacks (0.2.31, the
    oldest supported, has no rms_rope, residual, W4A4, W4A8 or AWQ module): imported where the
    installed one has it.  Their ops are then not registered either (backend.declared_ops)."""
    import importlib

    targets = []
    for name in ("rms_rope_targets", "residual_targets", "w4a4_targets", "w4a8_targets", "awq_targets"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        targets += module.targets(Target)
    return targets


TARGETS = {t.op: t for t in INT8_QUANT + INT8_DEQUANT + NVFP4 + linear_targets.targets(Target)
           + rope_targets.targets(Target) + fp8_targets.targets(Target) + mxfp8_targets.targets(Target)
           + _families_of_newer_eager()}
